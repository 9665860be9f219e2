/* half_f16c.c - binary16 to float32 rows with the F16C instruction, which is
 * exact for every value (it quiets signalling NaNs, which the software path
 * keeps); chosen at run time by half.c. */
#include "tq_internal.h"

#if defined(__x86_64__) && defined(__F16C__)
#include <immintrin.h>

void tq_fp16_to_fp32_row_f16c(const uint16_t *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = tq_fp16_to_fp32(x[i]);
}

void tq_fp32_to_fp16_row_f16c(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) /* imm 0: round to nearest even, as tq_fp32_to_fp16 */
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    for (; i < n; i++) y[i] = tq_fp32_to_fp16(x[i]);
}

int tq_have_f16c_kernel(void) { return 1; }
#else
void tq_fp32_to_fp16_row_f16c(const float *x, uint16_t *y, size_t n)
{
    tq_fp32_to_fp16_row(x, y, n);
}
void tq_fp16_to_fp32_row_f16c(const uint16_t *x, float *y, size_t n)
{
    tq_fp16_to_fp32_row(x, y, n);
}
int tq_have_f16c_kernel(void) { return 0; }
#endif
