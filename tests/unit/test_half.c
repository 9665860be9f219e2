/* test_half.c - fp16 and bf16 conversions over every 16-bit pattern, their
 * rounding midpoints, and (where the CPU has F16C) against the hardware. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static double half_value(uint16_t h) /* independent decoding via ldexp */
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

TEST(fp16_decode_all_65536)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_fp16_to_fp32((uint16_t)h);
        double want = half_value((uint16_t)h);
        if (isnan(want)) {
            CHECK(isnan(f), "%04x should decode to NaN", h);
            continue;
        }
        CHECK((double)f == want && !signbit(f) == !signbit(want), "%04x -> %g, want %g", h, f, want);
    }
}

TEST(fp16_encode_roundtrip_and_nan)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_fp16_to_fp32((uint16_t)h);
        uint16_t back = tq_fp32_to_fp16(f);
        if (isnan(f)) CHECK((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "NaN %04x -> %04x", h, back);
        else CHECK(back == h, "%04x -> %g -> %04x", h, f, back);
    }
}

/* Between each pair of adjacent finite halves: the midpoint goes to the even
 * one, anything nearer one side goes to that side. */
TEST(fp16_round_to_nearest_even)
{
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t lo = (uint16_t)(h | (neg << 15)), hi = (uint16_t)((h + 1) | (neg << 15));
            float a = tq_fp16_to_fp32(lo), b = tq_fp16_to_fp32(hi);
            float mid = (float)(((double)a + b) / 2); /* exact: 12 significant bits */
            uint16_t even = (h & 1) ? hi : lo;
            CHECK(tq_fp32_to_fp16(mid) == even, "midpoint of %04x/%04x -> %04x", lo, hi,
                  tq_fp32_to_fp16(mid));
            float below = nextafterf(mid, a), above = nextafterf(mid, b);
            CHECK(tq_fp32_to_fp16(below) == lo, "just past midpoint toward %04x", lo);
            CHECK(tq_fp32_to_fp16(above) == hi, "just past midpoint toward %04x", hi);
        }
    }
    CHECK(tq_fp32_to_fp16(65519.996f) == 0x7bff, "below 65520 stays at the largest half");
    CHECK(tq_fp32_to_fp16(65520.0f) == 0x7c00, "65520 rounds to infinity");
    CHECK(tq_fp32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(tq_fp32_to_fp16(2.9802322e-08f) == 0x0000, "2^-25 ties to even zero");
    CHECK(tq_fp32_to_fp16(2.9802326e-08f) == 0x0001, "just above 2^-25 rounds up");
    CHECK(tq_fp32_to_fp16(1e-45f) == 0 && tq_fp32_to_fp16(-0.0f) == 0x8000);
}

__attribute__((target("f16c"))) static uint16_t hw_f16(float f)
{
    return (uint16_t)__builtin_ia32_vcvtps2ph((float __attribute__((vector_size(16)))){f, 0, 0, 0}, 0)[0];
}

TEST(fp16_matches_f16c_hardware)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c")) SKIP("CPU has no F16C");
    unsigned long long s = 1;
    for (long i = 0; i < 20000000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f)) continue;
        CHECK(tq_fp32_to_fp16(f) == hw_f16(f), "%08x: %04x vs hardware %04x", u, tq_fp32_to_fp16(f), hw_f16(f));
    }
}

TEST(bf16_all_65536_and_rounding)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_bf16_to_fp32((uint16_t)h);
        CHECK(f2u(f) == h << 16, "bf16 %04x decodes to %08x", h, f2u(f));
        uint16_t back = tq_fp32_to_bf16(f);
        if (isnan(f)) CHECK((back & 0x7f80) == 0x7f80 && (back & 0x7f), "NaN stays NaN");
        else CHECK(back == h, "%04x -> %04x", h, back);
        if ((h & 0x7f80) != 0x7f80 && (h & 0x7fff) != 0x7f7f) {
            uint32_t mid = (h << 16) | 0x8000; /* exactly halfway to the next bf16 */
            float m;
            memcpy(&m, &mid, 4);
            CHECK(tq_fp32_to_bf16(m) == ((h & 1) ? h + 1 : h), "midpoint after %04x", h);
            mid |= 1;
            memcpy(&m, &mid, 4);
            CHECK(tq_fp32_to_bf16(m) == h + 1, "just above midpoint after %04x", h);
        }
    }
    CHECK(tq_fp32_to_bf16(3.4028235e38f) == 0x7f80, "FLT_MAX rounds to infinity");
}

TEST(half_rows)
{
    float x[5] = {1.0f, -2.5f, 65504.0f, 1e-7f, 0.0f}, y[5];
    uint16_t h[5];
    tq_fp32_to_fp16_row(x, h, 5);
    tq_fp16_to_fp32_row(h, y, 5);
    for (int i = 0; i < 5; i++) CHECK(h[i] == tq_fp32_to_fp16(x[i]) && y[i] == tq_fp16_to_fp32(h[i]));
    tq_fp32_to_bf16_row(x, h, 5);
    tq_bf16_to_fp32_row(h, y, 5);
    for (int i = 0; i < 5; i++) CHECK(h[i] == tq_fp32_to_bf16(x[i]) && y[i] == tq_bf16_to_fp32(h[i]));
}

/* The bulk path (F16C where present) gives the scalar values for all 65,536
 * patterns; NaNs stay NaN (F16C quiets signalling ones). */
TEST(fp16_bulk_matches_scalar_all_65536)
{
    uint16_t *h = malloc(65536 * 2 + 2);
    float *a = malloc(65537 * 4), *b = malloc(65537 * 4);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    h[65536] = 0x3c00;
    tq_fp16_to_fp32_bulk(h, a, 65537); /* an odd length exercises the tail */
    tq_fp16_to_fp32_row(h, b, 65537);
    for (uint32_t i = 0; i < 65537; i++) {
        if (isnan(b[i])) CHECK(isnan(a[i]), "%04x", h[i]);
        else CHECK(f2u(a[i]) == f2u(b[i]), "%04x: %g vs %g", h[i], a[i], b[i]);
    }
    free(h), free(a), free(b);
}

/* The bulk fp32 -> fp16 path (F16C where present) rounds like the scalar one:
 * every half, every midpoint and random floats. */
TEST(fp16_bulk_encode_matches_scalar)
{
    size_t n = 3 * 65536 + 1000003;
    float *x = malloc(n * 4);
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    size_t k = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) f = 0.0f;
        x[k++] = f;
        x[k++] = nextafterf(f, INFINITY);
        x[k++] = (float)(((double)f + tq_fp16_to_fp32((uint16_t)(h + 1))) / 2);
    }
    unsigned long long s = 9;
    while (k < n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        float f;
        memcpy(&f, &u, 4);
        x[k++] = isnan(f) ? 1.0f : f;
    }
    tq_fp32_to_fp16_bulk(x, a, n);
    tq_fp32_to_fp16_row(x, b, n);
    for (size_t i = 0; i < n; i++) CHECK(a[i] == b[i], "%a: %04x vs %04x", x[i], a[i], b[i]);
    free(x), free(a), free(b);
}
