/* klt_avx2.c - the transform coder's matrix product with AVX2 and FMA
 * (klt.c holds the scalar one, the packing and the choice).  Both compute
 * every output as fmaf(a[r][k], m[k][c], acc) for k ascending, so their
 * bytes are equal: the vector lanes run over output columns, never over a
 * sum. */
#include "tq_internal.h"

#include <stddef.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* Rows [r, r + 6) against one 16-column panel (p: [kd][16]): 12
 * accumulators, 2 loads of the panel and 6 broadcasts per k; a row's k-th
 * value at a[row * rs + k * ks]; output rows os floats apart. */
static void tile6x16(const float *a, size_t rs, size_t ks, size_t kd, const float *p, float *o,
                     size_t os)
{
    __m256 acc[6][2]; /* [row][half of the panel]: the unrolled loops keep them in registers */
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        acc[i][0] = _mm256_setzero_ps();
        acc[i][1] = _mm256_setzero_ps();
    }
    for (size_t k = 0; k < kd; k++) {
        __m256 m0 = _mm256_loadu_ps(p + k * 16);
        __m256 m1 = _mm256_loadu_ps(p + k * 16 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            __m256 x = _mm256_broadcast_ss(a + i * rs + k * ks);
            acc[i][0] = _mm256_fmadd_ps(x, m0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(x, m1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        _mm256_storeu_ps(o + i * os, acc[i][0]);
        _mm256_storeu_ps(o + i * os + 8, acc[i][1]);
    }
}

/* One row against one panel of w (8 or 16) columns. */
static void row_panel(const float *a, size_t ks, size_t kd, const float *p, size_t w, float *o)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (size_t k = 0; k < kd; k++) {
        __m256 x = _mm256_broadcast_ss(a + k * ks);
        s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p + k * w), s0);
        if (w == 16) s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p + k * w + 8), s1);
    }
    _mm256_storeu_ps(o, s0);
    if (w == 16) _mm256_storeu_ps(o + 8, s1);
}

/* out[n][nc] = a[n][kd] . m, nc % 8 == 0, m packed in panels (klt.c,
 * pack_panels): columns [c0, c0 + w) as kd x w floats at m + kd * c0; a[r][k]
 * at a[r * rs + k * ks]; out's rows os floats apart; lower: only out[r][c] with c <= r is
 * needed (others may be left). */
void tq_klt_matmul_avx2(const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                        const float *m, size_t nc, int lower, float *out, size_t os)
{
    for (size_t c0 = 0; c0 < nc; c0 += 16) {
        size_t w = nc - c0 >= 16 ? 16 : 8;
        const float *p = m + kd * c0;
        size_t r = lower ? c0 / 6 * 6 : 0; /* lower: the rows that reach the panel's columns */
        for (; w == 16 && r + 6 <= n; r += 6)
            tile6x16(a + r * rs, rs, ks, kd, p, out + r * os + c0, os);
        for (; r < n; r++) row_panel(a + r * rs, ks, kd, p, w, out + r * os + c0);
    }
}

/* q[i] = round_index(y[i] * inv) (klt.c) + bias, eight at a time: max and min return their
 * second operand for NaN, as the scalar clamp sends NaN to -32767 */
static __m256i round8(const float *y, __m256 inv, __m256i bias)
{
    const __m256 lo = _mm256_set1_ps(-32767.0f), hi = _mm256_set1_ps(32767.0f);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(y), inv);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), bias);
}

size_t tq_klt_round_avx2(const float *y, size_t n, float inv, int32_t bias, int32_t *q)
{
    __m256 vi = _mm256_set1_ps(inv);
    __m256i vb = _mm256_set1_epi32(bias);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_si256((__m256i *)(q + i), round8(y + i, vi, vb));
    return i;
}

size_t tq_klt_round16_avx2(const float *y, size_t n, float inv, int16_t *q)
{
    __m256 vi = _mm256_set1_ps(inv);
    __m256i vb = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i r = round8(y + i, vi, vb);
        __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(q + i), p);
    }
    return i;
}

/* Eight rows x[8][stride] as columns: panel[j * w + i] = x[i * stride + j] for j < d (d % 8 ==
 * 0), by 8 x 8 transposes in registers (a scalar scatter, it was 8% of SmolLM2's encode) */
void tq_klt_columns8_avx2(const float *x, size_t stride, uint32_t d, float *panel, size_t w)
{
    for (uint32_t j0 = 0; j0 < d; j0 += 8) {
        __m256 r[8], t[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(x + i * stride + j0);
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
#pragma GCC unroll 2
        for (int i = 0; i < 8; i += 4) {
            r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
            r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
            r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
            r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
        }
        /* r[0..3]: columns 0, 1, 2, 3 of rows 0-3 (low) and 4, 5, 6, 7 (high); r[4..7] rows 4-7 */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            _mm256_storeu_ps(panel + (j0 + c) * w, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
            _mm256_storeu_ps(panel + (j0 + c + 4) * w,
                             _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
        }
    }
}

int tq_klt_have_avx2(void) { return 1; }

#else
/* Never called: tq_klt_have_avx2 says 0. */
#define UNUSED __attribute__((unused))
void tq_klt_matmul_avx2(UNUSED const float *a, UNUSED size_t rs, UNUSED size_t ks,
                        UNUSED size_t n, UNUSED size_t kd, UNUSED const float *m,
                        UNUSED size_t nc, UNUSED int lower, UNUSED float *out,
                        UNUSED size_t os)
{
}

size_t tq_klt_round_avx2(UNUSED const float *y, UNUSED size_t n, UNUSED float inv,
                         UNUSED int32_t bias, UNUSED int32_t *q)
{
    return 0;
}

size_t tq_klt_round16_avx2(UNUSED const float *y, UNUSED size_t n, UNUSED float inv,
                           UNUSED int16_t *q)
{
    return 0;
}

void tq_klt_columns8_avx2(UNUSED const float *x, UNUSED size_t stride, UNUSED uint32_t d,
                          UNUSED float *panel, UNUSED size_t w)
{
}

int tq_klt_have_avx2(void) { return 0; }
#endif
