/* klt_impl.h - what klt.c (the projections) and klt_rate.c (the rate model) share, and the
 * AVX2 kernels of klt_avx2.c. */
#ifndef TQ_KLT_IMPL_H
#define TQ_KLT_IMPL_H

#include "tq_internal.h"

void tq_klt_matmul_avx2(const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                        const float *m, size_t nc, int lower, float *out, size_t os);
int tq_klt_have_avx2(void);
/* klt_avx2.c: the first multiple of 8 of round_index's values; the rest is the caller's */
size_t tq_klt_round_avx2(const float *y, size_t n, float inv, int32_t bias, int32_t *q);
size_t tq_klt_round16_avx2(const float *y, size_t n, float inv, int16_t *q);
void tq_klt_columns8_avx2(const float *x, size_t stride, uint32_t d, float *panel, size_t w);

/* Whether the AVX2 kernels may run (the context's SIMD level, the CPU's FMA). */
int tq_klt_use_avx2(const tq_ctx *ctx);
/* q[n] = round(y[n] * inv) + bias (clamped to +-32767, nearest even), the same on every SIMD
 * level. */
void tq_klt_round_all(int avx2, const float *y, size_t n, float inv, int32_t bias, int32_t *q);

#endif
