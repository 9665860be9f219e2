/* tq_half.h - binary16 conversions as inline functions, shared by the C
 * library and the CUDA kernels so both round identically (round to nearest
 * even; NaN keeps its top payload bits and becomes quiet). */
#ifndef TQ_HALF_H
#define TQ_HALF_H

#include <stdint.h>

#ifdef __CUDACC__
#define TQ_HD __host__ __device__
#else
#define TQ_HD
#endif

static inline TQ_HD uint16_t tq_half_from_bits(uint32_t x)
{
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: past 65504 */
    uint32_t e = a >> 23;
    if (e >= 113) { /* normal half: rebias, round on the 13 dropped bits */
        uint32_t r = a - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    uint32_t s = 126 - e; /* subnormal half: value / 2^-24 = mantissa >> s */
    if (s > 24) return sign;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* bits of the float32 equal to the half h */
static inline TQ_HD uint32_t tq_half_to_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return sign | 0x7f800000u | (m << 13);
    if (e) return sign | ((e + 112u) << 23) | (m << 13);
    if (!m) return sign;
    int sh = 0; /* subnormal: normalise the mantissa */
    while (!(m & 0x400u)) {
        m <<= 1;
        sh++;
    }
    return sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3ffu) << 13);
}

#endif
