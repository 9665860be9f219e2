/* kernels_avx2.c - the lane kernels for AVX2: 8 blocks per tile.  Codebook
 * lookups are register permutes for up to 16 entries, gathers beyond. */
#include "tq_internal.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#define LANES 8
typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));

typedef struct vtab {
    __m256 lo, hi;
    uint32_t size;
    const float *p;
} vtab;

static inline vtab vtab_load(const float *p, uint32_t size)
{
    vtab t = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), size, p};
    return t;
}

static inline vf vtab_get(const vtab *t, vi idx)
{
    __m256i i = (__m256i)idx;
    if (t->size <= 8) return (vf)_mm256_permutevar8x32_ps(t->lo, i);
    if (t->size <= 16) {
        __m256 a = _mm256_permutevar8x32_ps(t->lo, i), b = _mm256_permutevar8x32_ps(t->hi, i);
        return (vf)_mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
    }
    return (vf)_mm256_i32gather_ps(t->p, i, 4);
}

static inline vf vsqrt(vf x) { return (vf)_mm256_sqrt_ps((__m256)x); }

#define KERNELS_NAME tq_kernels_avx2
#include "kernels_lanes.inc"

#else
/* Not an AVX2 build target: the scalar kernels stand in (never selected at
 * run time, since tq_simd_best() would not report AVX2). */
const tq_kernels tq_kernels_avx2 = {0};
#endif
