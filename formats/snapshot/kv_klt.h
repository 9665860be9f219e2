/*
 * kv_klt.h - transform-coded snapshot tensors (codec KLT, formats/tqkv/TQKV.md
 * "Transform coding"): fitting a tensor's transforms in the plan, and
 * coding a chunk of its rows.
 *
 * Per KV head, the rows are centered (K: turned back to before RoPE and its
 * pre-RoPE mean removed; V: its mean removed), projected on the
 * eigenvectors of their covariance, and every coefficient is quantized
 * with one step per head, the step at which the indices' entropy meets the
 * preset's rate (reverse water-filling: components far below the step get
 * no bits and are not stored).  A chunk's payload is the indices zig-zag
 * coded (0, -1, 1, -2, ... as 0, 1, 2, 3, ...), a byte each, component by
 * component, 255 standing for an index of 255 or more whose u16 follows
 * after all the bytes, in order; zstd codes the bytes in blocks of a few
 * components, whose spread is alike.
 */
#ifndef TQ_KV_KLT_H
#define TQ_KV_KLT_H

#include "kv_view.h"
#include "tqkv.h"

/* tq's codec on the same rows: what a transform has to beat. */
typedef struct tq_klt_rival {
    double rel_mse; /* its squared error per unit of the rows' energy */
    double bits;    /* its bits per value, indices and norms */
} tq_klt_rival;

/* What fitting tensor t found (tq_kvsnap_klt_fit). */
typedef struct tq_klt_fit {
    double rate;             /* bits per value of the indices (the sample's entropy) */
    double basis_bits;       /* the stored bases per coded value */
    double gain_bits;        /* with klt_gain: the rows' gains per value (their entropy) */
    double equal_error_bits; /* bits per value, bases included, at the rival's error */
    uint32_t m;              /* components over all heads */
    int skipped;             /* at the rival's error the transform costs its bits or more */
} tq_klt_fit;

/* Fits t's transforms from a sample of its coded rows (past the sinks) at
 * `rate` bits per value: on return t->klt, t->offset (and with rope, the
 * rotation and positions: K before RoPE) are set, as a KLT record.  rope
 * and pos (cells positions) may be NULL.  With a rival, first estimates from
 * the eigenvalues (Gaussian components, one uniform step, the bases, the
 * entropy coder's loss) what the transform costs at the rival's error; where
 * that is no less than the rival's bits, stops there with fit->skipped set. */
tq_status tq_kvsnap_klt_fit(tq_ctx *ctx, const tq_kv_tensor *kt, tqkv_record *t,
                            const tq_rope *rope, const int32_t *pos, double rate,
                            const tq_klt_rival *rival, tq_klt_fit *fit);

/* Rows [row0, row0 + n) of t as float32 (x[n][width], overwritten) into
 * the chunk payload: room for 3 x tqkv_klt_components(t) x n bytes, *len
 * set to what it takes. */
tq_status tq_kvsnap_klt_encode(tq_ctx *ctx, const tqkv_record *t, float *x, uint32_t row0,
                               uint32_t n, uint8_t *payload, uint64_t *len);
/* The payload (len bytes) back into rows y[n][width]; TQ_ERR_CORRUPT when
 * its escapes do not fill it exactly. */
tq_status tq_kvsnap_klt_decode(tq_ctx *ctx, const tqkv_record *t, const uint8_t *payload,
                               uint64_t len, uint32_t row0, uint32_t n, float *y);
/* Where zstd should start a new block in such a payload: cuts[] (at most
 * KLT_MAX_CUTS offsets); the count. */
enum { KLT_MAX_CUTS = 512 };
int tq_kvsnap_klt_cuts(const tqkv_record *t, uint32_t n, uint64_t *cuts);

#endif
