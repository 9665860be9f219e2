/* test_codec.c - codec descriptors, argument errors, determinism and the
 * behaviour on degenerate input. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static tq_status try_desc(tq_ctx *ctx, tq_codec_kind k, uint32_t g, uint32_t b, uint32_t nc, uint64_t seed)
{
    tq_codec_desc d = {k, g, b, nc, seed, 0, 0, 0};
    tq_codec *c = NULL;
    tq_status st = tq_codec_new(ctx, &d, &c);
    tq_codec_free(c);
    return st;
}

TEST(codec_descriptor_validation)
{
    tq_ctx *ctx = tq_ctx_new();
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 96, 4, 1, 0), TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(ctx), "96"), "message names the group: %s", tq_ctx_error(ctx));
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 4, 4, 1, 0), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 1024, 4, 1, 0), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 128, 0, 1, 0), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 128, 9, 1, 0), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 128, 4, 2, 0), TQ_ERR_ARG);
    CHECK(try_desc(ctx, TQ_CODEC_TURBO3, 128, 0, 0, 0) == TQ_ERR_ARG, "fork kinds take no parameters");
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ4_1S, 0, 0, 0, 5), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, (tq_codec_kind)77, 0, 0, 0, 0), TQ_ERR_ARG);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 8, 1, 0, 0), TQ_OK);
    CHECK_EQ(try_desc(ctx, TQ_CODEC_TQ, 512, 8, 1, ~0ull), TQ_OK);
    tq_ctx_free(ctx);
}

TEST(codec_sizes_and_names)
{
    static const struct {
        tq_codec_desc d;
        size_t values, bytes;
        const char *name;
    } t[] = {
        {{TQ_CODEC_TURBO2, 0, 0, 0, 0, 0, 0, 0}, 128, 34, "turbo2"}, {{TQ_CODEC_TURBO3, 0, 0, 0, 0, 0, 0, 0}, 128, 50, "turbo3"},
        {{TQ_CODEC_TURBO4, 0, 0, 0, 0, 0, 0, 0}, 128, 68, "turbo4"}, {{TQ_CODEC_TQ3_1S, 0, 0, 0, 0, 0, 0, 0}, 32, 16, "tq3_1s"},
        {{TQ_CODEC_TQ4_1S, 0, 0, 0, 0, 0, 0, 0}, 32, 20, "tq4_1s"},  {{TQ_CODEC_TQ, 8, 3, 1, 0, 0, 0, 0}, 8, 5, "tq(g=8,b=3,nc)"},
        {{TQ_CODEC_TQ, 64, 4, 0, 0, 0, 0, 0}, 64, 34, "tq(g=64,b=4)"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        tq_codec *c;
        CHECK_EQ(tq_codec_new(tq_test_ctx(), &t[i].d, &c), TQ_OK);
        CHECK(tq_codec_block_values(c) == t[i].values && tq_codec_block_bytes(c) == t[i].bytes, "%s", t[i].name);
        CHECK(!strcmp(tq_codec_name(c), t[i].name), "%s vs %s", tq_codec_name(c), t[i].name);
        CHECK(!memcmp(tq_codec_get_desc(c), &t[i].d, sizeof t[i].d));
        tq_codec_free(c);
    }
}

TEST(codec_call_errors)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_codec_desc d = {TQ_CODEC_TQ, 64, 4, 1, 0, 0, 0, 0};
    tq_codec *c;
    tq_codec_new(ctx, &d, &c);
    float x[100] = {0};
    uint8_t blk[100];
    CHECK_EQ(tq_encode(ctx, c, x, 100, blk), TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(ctx), "100 values"), "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_decode(ctx, c, blk, 65, x), TQ_ERR_ARG);
    CHECK_EQ(tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK), TQ_ERR_ARG);
    tq_codec_free(c);
    tq_codec_desc w = {TQ_CODEC_TQ4_1S, 0, 0, 0, 0, 0, 0, 0};
    tq_codec_new(ctx, &w, &c);
    CHECK_EQ(tq_decode_rotated(ctx, c, blk, 32, x), TQ_ERR_ARG);
    CHECK_EQ(tq_codec_set_weight_search(ctx, c, (tq_weight_search)9), TQ_ERR_ARG);
    tq_ctx_clear_error(ctx);
    CHECK_EQ(tq_ctx_status(ctx), TQ_OK);
    CHECK(!*tq_ctx_error(ctx));
    CHECK(!strcmp(tq_status_name(TQ_ERR_CORRUPT), "corrupt data"));
    tq_codec_free(c);
    tq_ctx_free(ctx);
}

TEST(codec_degenerate_inputs)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_codec_kind kinds[] = {TQ_CODEC_TURBO2, TQ_CODEC_TURBO3, TQ_CODEC_TURBO4, TQ_CODEC_TQ, TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S, 0};
    for (size_t i = 0; i < 6; i++) {
        tq_codec_desc d = {kinds[i], 0, 0, 0, 0, 0, 0, 0};
        if (kinds[i] == TQ_CODEC_TQ) d = (tq_codec_desc){TQ_CODEC_TQ, 128, 3, 1, 0, 0, 0, 0};
        tq_codec *c;
        CHECK_EQ(tq_codec_new(ctx, &d, &c), TQ_OK);
        size_t n = 128;
        float zero[128] = {0}, y[128], bad[128];
        uint8_t blk[256];
        CHECK_EQ(tq_encode(ctx, c, zero, n, blk), TQ_OK);
        CHECK_EQ(tq_decode(ctx, c, blk, n, y), TQ_OK);
        for (size_t j = 0; j < n; j++) CHECK(y[j] == 0.0f, "%s: zeros decode to %g", tq_codec_name(c), y[j]);
        for (size_t j = 0; j < n; j++) bad[j] = j % 3 ? NAN : INFINITY;
        CHECK(tq_encode(ctx, c, bad, n, blk) == TQ_OK, "non-finite input is coded, not refused");
        /* every byte pattern decodes without faulting */
        memset(blk, 0xff, sizeof blk);
        CHECK_EQ(tq_decode(ctx, c, blk, n, y), TQ_OK);
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
}

TEST(codec_norm_correction_keeps_norm)
{
    tq_ctx *ctx = tq_ctx_new();
    float *x = tq_test_kv_data(200, 64, 9), y[200 * 64];
    uint8_t blk[200 * 66];
    for (uint32_t b = 2; b <= 8; b++) {
        tq_codec_desc d = {TQ_CODEC_TQ, 64, b, 1, 0, 0, 0, 0};
        tq_codec *c;
        tq_codec_new(ctx, &d, &c);
        tq_encode(ctx, c, x, 200 * 64, blk);
        tq_decode(ctx, c, blk, 200 * 64, y);
        for (int v = 0; v < 200; v++) {
            double nx = 0, ny = 0;
            for (int j = 0; j < 64; j++) nx += x[v * 64 + j] * x[v * 64 + j], ny += y[v * 64 + j] * y[v * 64 + j];
            CHECK(fabs(sqrt(ny) / sqrt(nx) - 1) < 1.5e-3, "b=%u vector %d norm ratio %g", b, v, sqrt(ny / nx));
        }
        tq_codec_free(c);
    }
    free(x);
    tq_ctx_free(ctx);
}

/* The reason the generic codec exists: a small head is coded in its own
 * group. At the same 4.25 bits/value, tq g=64 beats turbo4 (fork) on K-like
 * data, and the exact codebook at g=128 beats turbo4's table. */
TEST(codec_generic_beats_fork_at_equal_rate)
{
    tq_ctx *ctx = tq_ctx_new();
    size_t n = 128 * 2000;
    float *x = tq_test_kv_data(n / 128, 128, 21), *y = malloc(n * 4);
    uint8_t *blk = malloc(n);
    double err[3];
    tq_codec_desc ds[3] = {{TQ_CODEC_TURBO4, 0, 0, 0, 0, 0, 0, 0}, {TQ_CODEC_TQ, 64, 4, 1, 0, 0, 0, 0}, {TQ_CODEC_TQ, 128, 4, 1, 0, 0, 0, 0}};
    for (int i = 0; i < 3; i++) {
        tq_codec *c;
        tq_codec_new(ctx, &ds[i], &c);
        tq_encode(ctx, c, x, n, blk);
        tq_decode(ctx, c, blk, n, y);
        double e = 0, s = 0;
        for (size_t j = 0; j < n; j++) e += (y[j] - x[j]) * (y[j] - x[j]), s += x[j] * x[j];
        err[i] = e / s;
        tq_codec_free(c);
    }
    CHECK(err[1] < err[0] && err[2] < err[0], "turbo4 %.5f, tq g64 %.5f, tq g128 %.5f", err[0], err[1], err[2]);
    free(x), free(y), free(blk);
    tq_ctx_free(ctx);
}

TEST(codec_desc_sizes_are_the_built_codecs_block_sizes)
{
    tq_ctx *ctx = tq_ctx_new();
    const tq_codec_desc descs[] = {
        {TQ_CODEC_TQ, 64, 3, 1, TQ_SEED_FORK, 0, 0, 0}, {TQ_CODEC_TQ, 128, 4, 0, 7, 0, 1, 0},
        {TQ_CODEC_TURBO3, 0, 0, 0, 0, 0, 0, 0},         {TQ_CODEC_TQ4_1S, 0, 0, 0, 0, 0, 0, 0},
        {TQ_CODEC_ANGLE, 64, 5, 1, 3, 4, 0, 0},         {TQ_CODEC_PROD, 32, 4, 0, 9, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++) {
        size_t values = 0, bytes = 0;
        tq_codec *c = NULL;
        CHECK_OK(ctx, tq_codec_desc_sizes(ctx, &descs[i], &values, &bytes));
        CHECK_OK(ctx, tq_codec_new(ctx, &descs[i], &c));
        CHECK_EQ_U64(values, tq_codec_block_values(c));
        CHECK_EQ_U64(bytes, tq_codec_block_bytes(c));
        tq_codec_free(c);
    }
    const tq_codec_desc bad = {TQ_CODEC_TQ, 48, 3, 0, 0, 0, 0, 0}; /* not a power of two */
    size_t values, bytes;
    CHECK_EQ(tq_codec_desc_sizes(ctx, &bad, &values, &bytes), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}
