/* test_cuda.c - the CUDA backend writes the CPU's bytes and floats. */
#include "harness.h"
#include "tq_internal.h"

#include <string.h>

TEST(cuda_backend_selection)
{
    tq_ctx *ctx = tq_ctx_new();
    CHECK(tq_ctx_backend(ctx) == TQ_BACKEND_CPU, "the CPU is the default");
    tq_status st = tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA);
    if (!tq_cuda_built() || tq_cuda_devices() < 1) {
        CHECK(st == TQ_ERR_UNSUPPORTED, "CUDA cannot be chosen without CUDA");
        CHECK(strlen(tq_ctx_error(ctx)) > 0);
        CHECK_EQ(tq_ctx_backend(ctx), TQ_BACKEND_CPU);
    } else {
        CHECK_EQ(st, TQ_OK);
        CHECK_EQ(tq_ctx_backend(ctx), TQ_BACKEND_CUDA);
    }
    CHECK_EQ(tq_ctx_set_backend(ctx, (tq_backend)5), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}

static int cuda_same(tq_ctx *ctx, const tq_codec_desc *d, const char **why)
{
    tq_codec *c;
    if (tq_codec_new(ctx, d, &c) != TQ_OK) return *why = "codec", 0;
    size_t g = tq_codec_block_values(c), bb = tq_codec_block_bytes(c), nb = 3000 + g % 7;
    float *x = tq_test_kv_data(nb, (unsigned)g, g * 7 + d->bits), *y1 = malloc(nb * g * 4), *y2 = malloc(nb * g * 4);
    uint8_t *b1 = malloc(nb * bb), *b2 = malloc(nb * bb);
    for (size_t i = 0; i < g; i++) x[5 * g + i] = 0.0f; /* a zero block */
    int ok = 1;
    tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    tq_encode(ctx, c, x, nb * g, b1);
    tq_decode(ctx, c, b1, nb * g, y1);
    tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA);
    if (tq_encode(ctx, c, x, nb * g, b2) != TQ_OK) *why = tq_ctx_error(ctx), ok = 0;
    else if (memcmp(b1, b2, nb * bb)) *why = "encoded bytes differ", ok = 0;
    else if (tq_decode(ctx, c, b1, nb * g, y2) != TQ_OK) *why = tq_ctx_error(ctx), ok = 0;
    else if (memcmp(y1, y2, nb * g * 4)) *why = "decoded floats differ", ok = 0;
    else {
        tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
        tq_decode_rotated(ctx, c, b1, nb * g, y1);
        tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA);
        tq_decode_rotated(ctx, c, b1, nb * g, y2);
        if (memcmp(y1, y2, nb * g * 4)) *why = "rotated decode differs", ok = 0;
    }
    tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    free(x), free(y1), free(y2), free(b1), free(b2);
    tq_codec_free(c);
    return ok;
}

TEST(cuda_matches_cpu_bytes)
{
    if (!tq_cuda_built()) SKIP("built without CUDA");
    if (tq_cuda_devices() < 1) SKIP("no CUDA device visible");
    tq_ctx *ctx = tq_ctx_new();
    const char *why = "";
    for (int k = TQ_CODEC_TURBO2; k <= TQ_CODEC_TURBO4; k++) {
        tq_codec_desc d = {.kind = (tq_codec_kind)k};
        CHECK(cuda_same(ctx, &d, &why), "kind %d: %s", k, why);
    }
    for (uint32_t g = 8; g <= 512; g *= 2)
        for (uint32_t b = 1; b <= 8; b++) {
            tq_codec_desc d = {TQ_CODEC_TQ, g, b, b > 2, 77, 0, 0, 0};
            CHECK(cuda_same(ctx, &d, &why), "tq g=%u b=%u: %s", g, b, why);
        }
    tq_ctx_free(ctx);
}

/* What the CUDA entry of the backend table cannot do is refused through the
 * context, never run on the CPU instead: weight codecs, conversions,
 * rotations.  The context is switched by hand, so this holds without a GPU. */
TEST(cuda_backend_refuses_what_it_cannot_do)
{
    tq_ctx *ctx = tq_ctx_new();
    ctx->backend = TQ_BACKEND_CUDA;
    tq_codec *w = NULL, *kv = NULL;
    CHECK_EQ(tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TQ4_1S}, &w), TQ_OK);
    CHECK_EQ(tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TURBO3}, &kv), TQ_OK);
    float x[128] = {1.0f, -2.0f, 3.0f}, y[128];
    uint8_t blk[256];
    CHECK(tq_encode(ctx, w, x, 32, blk) == TQ_ERR_UNSUPPORTED && strstr(tq_ctx_error(ctx), "CUDA backend has no tq4_1s"),
          "weight codec on CUDA: %s", tq_ctx_error(ctx));
    CHECK(tq_dequantize(ctx, TQ_DT_F16, blk, 32, y) == TQ_ERR_UNSUPPORTED && strstr(tq_ctx_error(ctx), "f16 conversion"),
          "%s", tq_ctx_error(ctx));
    float imp[32] = {1.0f};
    CHECK(tq_encode_weighted(ctx, w, x, 1, 32, imp, blk) == TQ_ERR_UNSUPPORTED, "weighted coding on CUDA");
    tq_rotation *r;
    CHECK_EQ(tq_rotation_new(ctx, 32, 1, &r), TQ_OK);
    CHECK(tq_rotation_apply(ctx, r, x, 1, 0) == TQ_ERR_UNSUPPORTED, "rotation on CUDA");
    tq_rotation_free(r);
    if (!tq_cuda_built())
        CHECK(tq_encode(ctx, kv, x, 128, blk) == TQ_ERR_UNSUPPORTED && strstr(tq_ctx_error(ctx), "built without CUDA"),
              "a KV codec in a build without CUDA: %s", tq_ctx_error(ctx));
    ctx->backend = TQ_BACKEND_CPU;
    CHECK_EQ(tq_encode(ctx, w, x, 32, blk), TQ_OK);
    CHECK_EQ(tq_dequantize(ctx, TQ_DT_F16, blk, 32, y), TQ_OK);
    tq_codec_free(w);
    tq_codec_free(kv);
    tq_ctx_free(ctx);
}
