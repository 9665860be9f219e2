/* kernels_avx512.c - the lane kernels for AVX-512: 16 blocks per tile; a
 * 16-entry codebook fits one register, 32 entries two. */
#include "tq_internal.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#define LANES 16
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));

typedef struct vtab {
    __m512 lo, hi;
    const float *p;
} vtab;

static inline vtab vtab_load(const float *p)
{
    vtab t = {_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16), p};
    return t;
}

/* table entry idx of a table of K entries (K a compile-time constant) */
static inline __attribute__((always_inline)) vf vtab_get(const vtab *t, vi idx, uint32_t K)
{
    __m512i i = (__m512i)idx;
    if (K <= 16) return (vf)_mm512_permutexvar_ps(i, t->lo);
    if (K <= 32) return (vf)_mm512_permutex2var_ps(t->lo, i, t->hi);
    return (vf)_mm512_i32gather_ps(i, t->p, 4);
}

static inline vf vsqrt(vf x) { return (vf)_mm512_sqrt_ps((__m512)x); }

static inline vi vload_u8(const uint8_t *p)
{
    return (vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

static inline void vstore_u8(uint8_t *p, vi v)
{
    _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8((__m512i)v));
}

#define KERNELS_NAME  tq_kernels_avx512
#define KERNELS_LABEL "avx512"
#include "kernels_lanes.inc"

#else
const tq_kernels tq_kernels_avx512 = {0};
#endif
