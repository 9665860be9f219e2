/* test_kquants.c - K-quant decoding on hand-built superblocks whose values
 * are known: q4_K with unit scales gives its nibbles back minus the min,
 * q6_K its 6-bit codes minus 32, q3_K its hmask rule, q2_K its sub-block
 * scales; the element types report ggml's sizes.  (Bit-exactness against
 * gguf-py on random and real blocks: tests/oracle/kquant_decode.py; the
 * encoders' bytes against ggml's: tests/oracle/kquant_encode.py.)  The
 * encoders round-trip with the error their bit widths allow, and the
 * importance-weighted ones spend their precision where the weights are. */
#include "harness.h"
#include "tq.h"

#include <string.h>

static void put16(uint8_t *p, float f)
{
    uint16_t h = tq_fp32_to_fp16(f);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

TEST(kquant_sizes)
{
    CHECK_EQ(tq_dtype_block_values(TQ_DT_Q4_K), 256);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_Q4_K), 144);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_Q2_K), 84);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_Q3_K), 110);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_Q5_K), 176);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_Q6_K), 210);
    CHECK_EQ(tq_dtype_block_values(TQ_DT_IQ4_NL), 32);
    CHECK_EQ(tq_dtype_block_bytes(TQ_DT_IQ4_XS), 136);
    CHECK(!strcmp(tq_dtype_name(TQ_DT_Q6_K), "q6_K"));
}

TEST(kquant_known_values)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t b[210];
    float y[256];
    /* q4_K: d 1, dmin 0.5, every scale 1 and min 2 (6-bit fields), nibbles e % 16 */
    memset(b, 0, sizeof b);
    put16(b, 1.0f), put16(b + 2, 0.5f);
    for (int j = 0; j < 4; j++) b[4 + j] = 1, b[8 + j] = 2, b[12 + j] = 1 | 2 << 4;
    for (int i = 0; i < 128; i++) b[16 + i] = (uint8_t)((i % 16) | ((i % 16) << 4));
    CHECK_EQ(tq_dequantize(ctx, TQ_DT_Q4_K, b, 256, y), TQ_OK);
    for (int e = 0; e < 256; e++) CHECK(y[e] == (float)((e % 32) % 16) - 1.0f, "q4_K value %d = %g", e, y[e]);
    /* q6_K: d 0.25, scales 1..16, codes 32 + 5 everywhere (ql 5, qh 2 -> 5 | 2 << 4 = 37) */
    memset(b, 0, sizeof b);
    for (int i = 0; i < 128; i++) b[i] = 0x55;
    for (int i = 0; i < 64; i++) b[128 + i] = 0xAA;
    for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(i + 1);
    put16(b + 208, 0.25f);
    CHECK_EQ(tq_dequantize(ctx, TQ_DT_Q6_K, b, 256, y), TQ_OK);
    for (int e = 0; e < 256; e++) CHECK(y[e] == 0.25f * (float)(e / 16 + 1) * 5.0f, "q6_K value %d = %g", e, y[e]);
    /* q3_K: all 2-bit codes 3; hmask set for the first 128 values only; scales 33 (= 1 after -32) */
    memset(b, 0, sizeof b);
    for (int l = 0; l < 32; l++) b[l] = 0x0F;
    for (int i = 0; i < 64; i++) b[32 + i] = 0xFF;
    for (int i = 0; i < 8; i++) b[96 + i] = 0x11;
    for (int i = 8; i < 12; i++) b[96 + i] = 0xAA;
    put16(b + 108, 2.0f);
    CHECK_EQ(tq_dequantize(ctx, TQ_DT_Q3_K, b, 256, y), TQ_OK);
    for (int e = 0; e < 256; e++) CHECK(y[e] == (e < 128 ? 6.0f : -2.0f), "q3_K value %d = %g", e, y[e]);
    /* q2_K: sub-block s has scale s % 16 and min 1; codes 1; d 1, dmin 3 */
    memset(b, 0, sizeof b);
    for (int s = 0; s < 16; s++) b[s] = (uint8_t)(s | 1 << 4);
    for (int i = 0; i < 64; i++) b[16 + i] = 0x55;
    put16(b + 80, 1.0f), put16(b + 82, 3.0f);
    CHECK_EQ(tq_dequantize(ctx, TQ_DT_Q2_K, b, 256, y), TQ_OK);
    for (int e = 0; e < 256; e++) CHECK(y[e] == (float)(e / 16) - 3.0f, "q2_K value %d = %g", e, y[e]);
    CHECK(tq_quantize(ctx, TQ_DT_Q3_K, y, 256, b) == TQ_ERR_UNSUPPORTED, "q3_K decodes only");
    CHECK(tq_dequantize(ctx, TQ_DT_Q4_K, b, 200, y) == TQ_ERR_ARG, "a partial superblock");
    tq_ctx_free(ctx);
}

static double rel_err(const float *x, const float *y, const float *w, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i % 512] : 1.0;
        e += wi * (x[i] - y[i]) * (x[i] - y[i]), s += wi * x[i] * x[i];
    }
    return e / s;
}

TEST(kquant_encoders_round_trip)
{
    enum { N = 512 * 16 };
    static float x[N], y[N], w[512];
    static uint8_t b[N];
    uint64_t s = 7;
    for (size_t i = 0; i < N; i++) { /* roughly Gaussian: a sum of uniforms */
        float v = 0;
        for (int k = 0; k < 4; k++) s = s * 6364136223846793005ull + 1442695040888963407ull, v += (float)(s >> 40) / (1 << 24);
        x[i] = v - 2.0f;
    }
    for (int i = 0; i < 512; i++) w[i] = i % 8 ? 0.01f : 100.0f; /* every 8th column matters */
    tq_ctx *ctx = tq_ctx_new();
    const tq_dtype t[] = {TQ_DT_Q4_K, TQ_DT_Q5_K, TQ_DT_Q6_K};
    const double most[] = {0.012, 0.003, 0.0008};
    double prev = 1;
    for (int k = 0; k < 3; k++) {
        CHECK_EQ(tq_quantize(ctx, t[k], x, N, b), TQ_OK);
        CHECK_EQ(tq_dequantize(ctx, t[k], b, N, y), TQ_OK);
        double e = rel_err(x, y, NULL, N);
        CHECK(e < most[k] && e < prev / 3, "%s relative error %g", tq_dtype_name(t[k]), e);
        prev = e;
        double plain = rel_err(x, y, w, N);
        CHECK_EQ(tq_quantize_weighted(ctx, t[k], x, 16, 512, w, b), TQ_OK);
        CHECK_EQ(tq_dequantize(ctx, t[k], b, N, y), TQ_OK);
        double weighted = rel_err(x, y, w, N);
        CHECK(weighted < plain, "%s weighted error %g not below the plain encoder's %g", tq_dtype_name(t[k]), weighted, plain);
    }
    w[3] = -1.0f;
    CHECK(tq_quantize_weighted(ctx, TQ_DT_Q4_K, x, 16, 512, w, b) == TQ_ERR_ARG, "a negative importance");
    CHECK(tq_quantize_weighted(ctx, TQ_DT_Q4_K, x, 1, 500, NULL, b) == TQ_ERR_ARG, "rows of 500");
    tq_ctx_free(ctx);
}
