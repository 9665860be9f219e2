/* tq_fwht.h - the unnormalised Walsh-Hadamard butterfly in the fork's order
 * (h = 1, 2, 4, ...; pairs (j, j+h) -> (a+b, a-b)), shared by the C library
 * and the CUDA kernels so both compute the same floats. */
#ifndef TQ_FWHT_H
#define TQ_FWHT_H

#include <stdint.h>

#ifdef __CUDACC__
#define TQ_FWHT_HD __host__ __device__
#else
#define TQ_FWHT_HD
#endif

static inline TQ_FWHT_HD void tq_fwht_inline(float *x, uint32_t g)
{
    for (uint32_t h = 1; h < g; h *= 2)
        for (uint32_t i = 0; i < g; i += 2 * h)
            for (uint32_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

#endif
