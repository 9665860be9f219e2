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
        CHECK(tq_ctx_backend(ctx) == TQ_BACKEND_CPU);
    } else {
        CHECK(st == TQ_OK && tq_ctx_backend(ctx) == TQ_BACKEND_CUDA);
    }
    CHECK(tq_ctx_set_backend(ctx, (tq_backend)5) == TQ_ERR_ARG);
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
        tq_codec_desc d = {(tq_codec_kind)k, 0, 0, 0, 0};
        CHECK(cuda_same(ctx, &d, &why), "kind %d: %s", k, why);
    }
    for (uint32_t g = 8; g <= 512; g *= 2)
        for (uint32_t b = 1; b <= 8; b++) {
            tq_codec_desc d = {TQ_CODEC_TQ, g, b, b > 2, 77};
            CHECK(cuda_same(ctx, &d, &why), "tq g=%u b=%u: %s", g, b, why);
        }
    tq_ctx_free(ctx);
}
