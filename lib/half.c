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

/* For bulk conversion (tensors): F16C when the CPU has it.  Values are the
 * same as tq_fp16_to_fp32 except that signalling NaNs come out quiet. */
static int use_f16c(void)
{
    static int cached = -1; /* the same answer from any thread: relaxed is enough */
    int use = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (use < 0) {
#if defined(__x86_64__) && !defined(__clang__) /* clang 14 does not know "f16c" here */
        __builtin_cpu_init();
        use = tq_have_f16c_kernel() && __builtin_cpu_supports("f16c") &&
              __builtin_cpu_supports("avx");
#else
        use = 0;
#endif
        __atomic_store_n(&cached, use, __ATOMIC_RELAXED);
    }
    return use;
}

void tq_fp32_to_fp16_bulk(const float *x, uint16_t *y, size_t n)
{
    if (use_f16c())
        tq_fp32_to_fp16_row_f16c(x, y, n);
    else
        tq_fp32_to_fp16_row(x, y, n);
}

void tq_fp16_to_fp32_bulk(const uint16_t *x, float *y, size_t n)
{
    int use = use_f16c();
    if (use)
        tq_fp16_to_fp32_row_f16c(x, y, n);
    else
        tq_fp16_to_fp32_row(x, y, n);
}

void tq_fp32_to_bf16_row(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_fp32_to_bf16(x[i]);
}

void tq_bf16_to_fp32_row(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tq_bf16_to_fp32(x[i]);
}
