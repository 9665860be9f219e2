/* test_simd.c - every SIMD level and every thread count produce the scalar
 * reference's bytes, for every codec configuration and awkward inputs. */
#include "harness.h"
#include "tq_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Rows that stress the kernels: Gaussian, zero, constant, one spike, tiny
 * (subnormal), huge, mixed scales. */
static float *awkward(size_t nblocks, uint32_t g, unsigned long long seed)
{
    float *x = malloc(nblocks * g * sizeof(float));
    for (size_t b = 0; b < nblocks; b++)
        for (uint32_t j = 0; j < g; j++) {
            float v = (float)tq_test_randn(&seed);
            switch (b % 7) {
            case 1: v = 0.0f; break;
            case 2: v = 3.0f; break;
            case 3: v = j == b % g ? 5.0f : 0.0f; break;
            case 4: v *= 1e-41f; break;
            case 5: v *= 1e18f; break;
            case 6: v *= j % 9 == 0 ? 40.0f : 0.01f; break;
            }
            x[b * g + j] = v;
        }
    return x;
}

static int same_everywhere(tq_ctx *ctx, tq_codec *c, const float *x, size_t n, const char **why)
{
    size_t nb = n / tq_codec_block_values(c), bb = tq_codec_block_bytes(c);
    uint8_t *ref = malloc(nb * bb), *got = malloc(nb * bb);
    float *yref = malloc(n * 4), *y = malloc(n * 4), *yr = malloc(n * 4), *yrr = malloc(n * 4);
    int ok = 1, kv = c->layout != TQ_LAYOUT_W3 && c->layout != TQ_LAYOUT_W4;
    tq_ctx_set_simd(ctx, TQ_SIMD_SCALAR);
    tq_ctx_set_threads(ctx, 1);
    tq_encode(ctx, c, x, n, ref);
    tq_decode(ctx, c, ref, n, yref);
    if (kv) tq_decode_rotated(ctx, c, ref, n, yrr);
    static const int threads[] = {1, 2, 3, 7};
    for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best() && ok; lvl++)
        for (int t = 0; t < 4 && ok; t++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            tq_ctx_set_threads(ctx, threads[t]);
            memset(got, 0, nb * bb);
            tq_encode(ctx, c, x, n, got);
            if (memcmp(got, ref, nb * bb)) *why = "encoded bytes differ", ok = 0;
            tq_decode(ctx, c, ref, n, y);
            if (ok && memcmp(y, yref, n * 4)) *why = "decoded floats differ", ok = 0;
            if (ok && kv) {
                tq_decode_rotated(ctx, c, ref, n, yr);
                if (memcmp(yr, yrr, n * 4)) *why = "rotated decode differs", ok = 0;
            }
            if (!ok) printf("  [simd %s, %d threads] ", tq_simd_name((tq_simd)lvl), threads[t]);
        }
    free(ref), free(got), free(yref), free(y), free(yr), free(yrr);
    return ok;
}

TEST(simd_fork_codecs_match_scalar)
{
    if (tq_simd_best() == TQ_SIMD_SCALAR) SKIP("CPU has no AVX2 (only the scalar path exists)");
    tq_ctx *ctx = tq_ctx_new();
    tq_codec_kind kinds[] = {TQ_CODEC_TURBO2, TQ_CODEC_TURBO3, TQ_CODEC_TURBO4, TQ_CODEC_TQ3_1S, TQ_CODEC_TQ4_1S};
    for (size_t i = 0; i < 5; i++) {
        tq_codec_desc d = {kinds[i], 0, 0, 0, 0, 0, 0, 0};
        tq_codec *c;
        CHECK_EQ(tq_codec_new(ctx, &d, &c), TQ_OK);
        size_t nb = 1037; /* not a multiple of any tile or chunk */
        float *x = awkward(nb, (uint32_t)tq_codec_block_values(c), 17 + i);
        const char *why = "";
        for (int s = 0; s < 2; s++) {
            if (s == 1 && tq_codec_set_weight_search(tq_test_ctx(), c, TQ_WSEARCH_FORK) != TQ_OK) break;
            CHECK(same_everywhere(ctx, c, x, nb * tq_codec_block_values(c), &why), "%s: %s", tq_codec_name(c), why);
        }
        free(x);
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
}

TEST(simd_generic_codec_matches_scalar_all_configs)
{
    if (tq_simd_best() == TQ_SIMD_SCALAR) SKIP("CPU has no AVX2 (only the scalar path exists)");
    tq_ctx *ctx = tq_ctx_new();
    for (uint32_t g = 8; g <= 512; g *= 2)
        for (uint32_t b = 1; b <= 8; b++)
            for (uint32_t nc = 0; nc < 2; nc++) {
                tq_codec_desc d = {TQ_CODEC_TQ, g, b, nc, g == 64 ? 0 : 1234, 0, 0, 0};
                tq_codec *c;
                CHECK_EQ(tq_codec_new(ctx, &d, &c), TQ_OK);
                size_t nb = 4096 / g * 5 + 3;
                float *x = awkward(nb, g, g * 31 + b);
                const char *why = "";
                CHECK(same_everywhere(ctx, c, x, nb * g, &why), "%s: %s", tq_codec_name(c), why);
                free(x);
                tq_codec_free(c);
            }
    tq_ctx_free(ctx);
}

TEST(simd_level_selection)
{
    tq_ctx *ctx = tq_ctx_new();
    CHECK(tq_ctx_simd(ctx) == tq_simd_best(), "a new context uses the best level");
    CHECK_EQ(tq_ctx_set_simd(ctx, TQ_SIMD_SCALAR), TQ_OK);
    CHECK_EQ(tq_ctx_simd(ctx), TQ_SIMD_SCALAR);
    CHECK_EQ(tq_ctx_set_simd(ctx, TQ_SIMD_AUTO), TQ_OK);
    CHECK_EQ(tq_ctx_simd(ctx), tq_simd_best());
    if (tq_simd_best() < TQ_SIMD_AVX512) {
        CHECK_EQ(tq_ctx_set_simd(ctx, TQ_SIMD_AVX512), TQ_ERR_UNSUPPORTED);
        CHECK(strstr(tq_ctx_error(ctx), "avx512") != NULL);
    }
    CHECK(tq_ctx_set_simd(ctx, (tq_simd)42) != TQ_OK);
    tq_ctx_free(ctx);
}
