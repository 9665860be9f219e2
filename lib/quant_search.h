/* quant_search.h - the scale searches behind ggml's reference and
 * importance-weighted quantizers (lib/quant_search.c), shared by the
 * K-quant and legacy block encoders.  Internal to lib/.
 *
 * Every function reproduces ggml's float32 arithmetic operation for
 * operation (same order of sums and products, no contraction), because a
 * different rounding anywhere changes a chosen index and so the bytes. */
#ifndef TQ_QUANT_SEARCH_H
#define TQ_QUANT_SEARCH_H

#include <stdint.h>

/* Round to nearest, ties to even, through the 1.5 * 2^23 trick ggml uses
 * (|v| < 2^22). */
int tq_qs_nearest(float v);

/* Symmetric levels: L[i] = l + nmax with l in [-nmax, nmax - 1]; returns the
 * scale (x ~ scale * l).  wkind picks the error weight when w is NULL:
 * 1 = x^2 (ggml's rmse_type 1).  Searches 18 scales around nmax / max and
 * keeps the one with the largest weighted correlation. */
float tq_qs_symmetric(int n, int nmax, const float *x, int8_t *L, const float *w);

/* Asymmetric levels L in [0, nmax] with x ~ scale * L - min; *min_out gets
 * the (non-negative) offset.  Tries nstep + 1 trial scales
 * (rmin + rdelta * k + nmax) / range and, for each, the weighted
 * least-squares scale and offset; keeps the lowest weighted squared error.
 * w NULL means x^2.  strict_range 1: a block whose max equals its min is
 * "flat" (ggml's make_qkx2_quants); 0: max <= min (make_qkx3_quants). */
float tq_qs_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out,
                   float rmin, float rdelta, int nstep, int strict_range);

/* Non-negative levels L in [0, nmax] for the sub-block scales themselves
 * (x >= 0), weighted by w: a coarse scale search then up to five rounds of
 * single-level moves that raise the weighted correlation.  Returns the
 * scale. */
float tq_qs_positive(int n, int nmax, const float *x, uint8_t *L, const float *w);

#endif
