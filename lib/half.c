/* half.c - IEEE binary16 and bfloat16 conversions, bit exact, no FPU mode
 * dependence (the fork and ggml round to nearest even). */
#include "tq_internal.h"

#include <string.h>

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tq_fp32_to_fp16(float f)
{
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) /* >= 65520 rounds past the largest half (65504) */
        return sign | 0x7c00u;
    uint32_t e = a >> 23;
    if (e >= 113) { /* normal half: rebias, then round on the 13 dropped bits */
        uint32_t r = a - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    /* subnormal half: value / 2^-24 = mantissa24 >> (126 - e) */
    uint32_t s = 126 - e;
    if (s > 24) return sign;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
}

float tq_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
    if (e) return u2f(sign | ((e + 112u) << 23) | (m << 13));
    if (!m) return u2f(sign);
    /* subnormal: exact in float */
    float v = (float)m * 5.9604644775390625e-08f; /* 2^-24 */
    return sign ? -v : v;
}

uint16_t tq_fp32_to_bf16(float f)
{
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float tq_bf16_to_fp32(uint16_t h) { return u2f((uint32_t)h << 16); }

void tq_fp32_to_fp16_row(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_fp32_to_fp16(x[i]);
}

void tq_fp16_to_fp32_row(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_fp16_to_fp32(x[i]);
}

void tq_fp32_to_bf16_row(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_fp32_to_bf16(x[i]);
}

void tq_bf16_to_fp32_row(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_bf16_to_fp32(x[i]);
}
