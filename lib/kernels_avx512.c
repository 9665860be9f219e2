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
    uint32_t size;
    const float *p;
} vtab;

static inline vtab vtab_load(const float *p, uint32_t size)
{
    vtab t = {_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16), size, p};
    return t;
}

static inline vf vtab_get(const vtab *t, vi idx)
{
    __m512i i = (__m512i)idx;
    if (t->size <= 16) return (vf)_mm512_permutexvar_ps(i, t->lo);
    if (t->size <= 32) return (vf)_mm512_permutex2var_ps(t->lo, i, t->hi);
    return (vf)_mm512_i32gather_ps(i, t->p, 4);
}

static inline vf vsqrt(vf x) { return (vf)_mm512_sqrt_ps((__m512)x); }

#define KERNELS_NAME tq_kernels_avx512
#include "kernels_lanes.inc"

#else
const tq_kernels tq_kernels_avx512 = {0};
#endif
