/* kernels_avx2.c - the lane kernels for AVX2: 8 blocks per tile.  Codebook
 * lookups are register permutes for up to 32 entries, gathers beyond. */
#include "tq_internal.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#define LANES 8
typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));

typedef struct vtab {
    __m256 lo, hi, lo2, hi2; /* entries 0-7, 8-15, 16-23, 24-31 */
    const float *p;
} vtab;

/* p holds 256 entries (tq_block_params), so the 32 loaded here exist */
static inline vtab vtab_load(const float *p)
{
    vtab t = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 16),
              _mm256_loadu_ps(p + 24), p};
    return t;
}

/* table entry idx of a table of K entries (K a compile-time constant) */
static inline __attribute__((always_inline)) vf vtab_get(const vtab *t, vi idx, uint32_t K)
{
    __m256i i = (__m256i)idx;
    if (K <= 8) return (vf)_mm256_permutevar8x32_ps(t->lo, i);
    __m256 a = _mm256_permutevar8x32_ps(t->lo, i), b = _mm256_permutevar8x32_ps(t->hi, i);
    __m256 ab = _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
    if (K <= 16) return (vf)ab;
    if (K <= 32) { /* four permutes and three blends beat a gather */
        __m256 c = _mm256_permutevar8x32_ps(t->lo2, i), d = _mm256_permutevar8x32_ps(t->hi2, i);
        __m256 cd = _mm256_blendv_ps(c, d, _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
        return (vf)_mm256_blendv_ps(ab, cd, _mm256_castsi256_ps(_mm256_slli_epi32(i, 27)));
    }
    return (vf)_mm256_i32gather_ps(t->p, i, 4);
}

static inline vf vsqrt(vf x) { return (vf)_mm256_sqrt_ps((__m256)x); }

static inline vi vload_u8(const uint8_t *p)
{
    return (vi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

static inline void vstore_u8(uint8_t *p, vi v)
{
    __m256i x = (__m256i)v;
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(w, w));
}

#define KERNELS_NAME  tq_kernels_avx2
#define KERNELS_LABEL "avx2"
#include "kernels_lanes.inc"

#else
/* Not an AVX2 build target: the scalar kernels stand in (never selected at
 * run time, since tq_simd_best() would not report AVX2). */
const tq_kernels tq_kernels_avx2 = {0};
#endif
