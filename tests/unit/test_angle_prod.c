/* test_angle_prod.c - TurboAngle and TurboQuant-prod codecs and
 * compressed-domain scores: TurboAngle keeps norms (norm correction), is
 * deterministic per seed, and its error falls as the angle bins grow;
 * TurboQuant-prod's inner products are unbiased (a z-test over seeds) with
 * a variance under the paper's bound; tq_scores equals decode-then-dot for
 * every KV codec. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void randv(float *x, size_t n, unsigned long long *st)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)tq_test_randn(st);
}

static double rel_mse(const float *x, const float *y, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) e += (double)(x[i] - y[i]) * (x[i] - y[i]), s += (double)x[i] * x[i];
    return e / s;
}

TEST(turboangle_invariants)
{
    enum { G = 128, NB = 64, N = G * NB };
    static float x[N], y[N];
    static uint8_t b1[N * 4], b2[N * 4];
    unsigned long long st = 11;
    randv(x, N, &st);
    for (int i = 0; i < N; i += 7) x[i] *= 6; /* some outlier channels */
    tq_ctx *ctx = tq_ctx_new();
    double prev = 1e9;
    for (uint32_t ab = 2; ab <= 7; ab++) {
        tq_codec *c;
        tq_codec_desc d = {TQ_CODEC_ANGLE, G, ab, 1, 5, 4, 0, 0};
        CHECK(tq_codec_new(ctx, &d, &c) == TQ_OK, "%s", tq_ctx_error(ctx));
        CHECK_EQ(tq_codec_block_bytes(c), 2 + (size_t)(G / 2) * (ab + 4) / 8);
        CHECK_EQ(tq_encode(ctx, c, x, N, b1), TQ_OK);
        CHECK_EQ(tq_encode(ctx, c, x, N, b2), TQ_OK);
        CHECK(!memcmp(b1, b2, NB * tq_codec_block_bytes(c)), "deterministic");
        CHECK_EQ(tq_decode(ctx, c, b1, N, y), TQ_OK);
        double e = rel_mse(x, y, N);
        CHECK(e < prev, "A = %u: error %g not below %g", 1u << ab, e, prev);
        prev = e;
        for (int b = 0; b < NB; b++) { /* norm correction: each block keeps its norm */
            double nx = 0, ny = 0;
            for (int j = 0; j < G; j++) nx += (double)x[b * G + j] * x[b * G + j], ny += (double)y[b * G + j] * y[b * G + j];
            CHECK(fabs(sqrt(ny) / sqrt(nx) - 1) < 2e-3, "block %d norm %g vs %g", b, sqrt(ny), sqrt(nx));
        }
        tq_codec_free(c);
    }
    tq_codec *c5, *c6;
    CHECK_EQ(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_ANGLE, G, 4, 0, 5, 0, 0, 0}, &c5), TQ_OK);
    CHECK_EQ(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_ANGLE, G, 4, 0, 6, 0, 0, 0}, &c6), TQ_OK);
    tq_encode(ctx, c5, x, N, b1);
    tq_encode(ctx, c6, x, N, b2);
    CHECK(memcmp(b1, b2, NB * tq_codec_block_bytes(c5)) != 0, "another seed, other bytes");
    CHECK(tq_codec_block_bytes(c5) == 2 + G / 2 * 4 / 8, "one radius per group: angles only");
    tq_codec_free(c5), tq_codec_free(c6);
    tq_codec *bad;
    CHECK(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_ANGLE, 96, 4, 0, 0, 0, 0, 0}, &bad) == TQ_ERR_ARG);
    CHECK(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_TQ, 64, 4, 0, 0, 3, 0, 0}, &bad) == TQ_ERR_ARG, "radius bits elsewhere");
    tq_ctx_free(ctx);
}

TEST(turboquant_prod_is_unbiased)
{
    enum { G = 128, TRIALS = 400 };
    float x[G], y[G], xt[G];
    uint8_t blk[256];
    unsigned long long st = 21;
    randv(x, G, &st);
    randv(y, G, &st);
    double nx = 0, ny = 0, exact = 0;
    for (int j = 0; j < G; j++) nx += (double)x[j] * x[j], ny += (double)y[j] * y[j];
    for (int j = 0; j < G; j++) x[j] /= (float)sqrt(nx), exact += (double)x[j] * y[j]; /* unit x */
    tq_ctx *ctx = tq_ctx_new();
    for (uint32_t b = 2; b <= 4; b++) {
        double s = 0, s2 = 0;
        for (int t = 0; t < TRIALS; t++) { /* a fresh rotation and sketch per trial */
            tq_codec *c;
            CHECK(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_PROD, G, b, 0, 1000 + t, 0, 0, 0}, &c) == TQ_OK, "%s", tq_ctx_error(ctx));
            tq_encode(ctx, c, x, G, blk);
            tq_decode(ctx, c, blk, G, xt);
            double ip = 0;
            for (int j = 0; j < G; j++) ip += (double)y[j] * xt[j];
            s += ip - exact, s2 += (ip - exact) * (ip - exact);
            tq_codec_free(c);
        }
        double mean = s / TRIALS, var = s2 / TRIALS - mean * mean, se = sqrt(var / TRIALS);
        double bound = sqrt(3.0) * M_PI * M_PI * ny / G * pow(4.0, -(double)b);
        CHECK(fabs(mean) < 4 * se, "b %u: mean error %g, %g standard errors", b, mean, mean / se);
        CHECK(var < bound, "b %u: variance %g above the paper's bound %g", b, var, bound);
        printf("  prod b=%u: mean IP error %+.2e (%.1f s.e.), variance %.3e, paper bound %.3e\n", b, mean, mean / se,
               var, bound);
    }
    tq_ctx_free(ctx);
}

TEST(scores_equal_decode_then_dot)
{
    enum { KEYS = 50 };
    const tq_codec_desc descs[] = {{TQ_CODEC_TURBO3, 0, 0, 0, 0, 0, 0, 0}, {TQ_CODEC_TURBO4, 0, 0, 0, 0, 0, 0, 0},
                                   {TQ_CODEC_TQ, 128, 3, 1, 9, 0, 0, 0},  {TQ_CODEC_TQ, 64, 5, 0, 0, 0, 0, 0},
                                   {TQ_CODEC_ANGLE, 128, 5, 1, 3, 3, 0, 0}, {TQ_CODEC_ANGLE, 64, 4, 0, 3, 0, 0, 0},
                                   {TQ_CODEC_PROD, 128, 3, 0, 4, 0, 0, 0}};
    static float k[KEYS * 128], kd[KEYS * 128], q[128], sc[KEYS];
    static uint8_t blk[KEYS * 512];
    unsigned long long st = 31;
    tq_ctx *ctx = tq_ctx_new();
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++) {
        tq_codec *c;
        CHECK(tq_codec_new(ctx, &descs[i], &c) == TQ_OK, "%s", tq_ctx_error(ctx));
        size_t g = tq_codec_block_values(c);
        randv(k, KEYS * g, &st);
        randv(q, g, &st);
        tq_encode(ctx, c, k, KEYS * g, blk);
        tq_decode(ctx, c, blk, KEYS * g, kd);
        CHECK(tq_scores(ctx, c, q, blk, KEYS, sc) == TQ_OK, "%s", tq_ctx_error(ctx));
        for (int j = 0; j < KEYS; j++) {
            double dot = 0, mag = 0;
            for (size_t e = 0; e < g; e++) dot += (double)q[e] * kd[j * g + e], mag += fabs((double)q[e] * kd[j * g + e]);
            CHECK(fabs(sc[j] - dot) <= 1e-5 * mag + 1e-6, "%s key %d: score %g, decode-then-dot %g", tq_codec_name(c), j,
                  sc[j], dot);
        }
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
}
