/* half.c - IEEE binary16 and bfloat16 conversions, bit exact, no FPU mode
 * dependence (the fork and ggml round to nearest even). */
#include "tq_internal.h"
#include "tq_half.h"

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

uint16_t tq_fp32_to_fp16(float f) { return tq_half_from_bits(f2u(f)); }

float tq_fp16_to_fp32(uint16_t h) { return u2f(tq_half_to_bits(h)); }

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
