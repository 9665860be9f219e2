/* test_weight_importance.c - tq_encode_weighted: with skewed importances the
 * weighted error falls below the plain search's, never rises for any block,
 * and the bytes do not depend on the thread count. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <string.h>

static double werr(const float *x, const float *y, const float *imp, size_t rows, size_t cols, size_t b)
{
    double s = 0.0; /* block column b of every row, or everything for b = SIZE_MAX */
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) {
            if (b != SIZE_MAX && j / 32 != b) continue;
            double d = (double)x[r * cols + j] - y[r * cols + j];
            s += imp[j] * d * d;
        }
    return s;
}

TEST(weighted_search_lowers_weighted_error)
{
    const size_t rows = 48, cols = 1024, n = rows * cols;
    float *x = malloc(n * 4), *y0 = malloc(n * 4), *y1 = malloc(n * 4), imp[1024];
    uint8_t *b0 = malloc(n), *b1 = malloc(n), *b2 = malloc(n);
    unsigned long long s = 99;
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.02 * tq_test_randn(&s));
    for (size_t j = 0; j < cols; j++) imp[j] = (tq_test_randn(&s) > 1.2) ? 100.0f : 1.0f; /* ~12% hot columns */
    tq_ctx *ctx = tq_ctx_new();
    tq_codec_kind kinds[2] = {TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S};
    for (int k = 0; k < 2; k++) {
        tq_codec *c;
        CHECK_EQ(tq_codec_new(ctx, &(tq_codec_desc){kinds[k], 0, 0, 0, 0, 0, 0, 0}, &c), TQ_OK);
        CHECK_EQ(tq_encode(ctx, c, x, n, b0), TQ_OK);
        tq_ctx_set_threads(ctx, 1);
        CHECK(tq_encode_weighted(ctx, c, x, rows, cols, imp, b1) == TQ_OK, "%s", tq_ctx_error(ctx));
        tq_ctx_set_threads(ctx, 2);
        CHECK_EQ(tq_encode_weighted(ctx, c, x, rows, cols, imp, b2), TQ_OK);
        CHECK(!memcmp(b1, b2, n * tq_codec_block_bytes(c) / 32), "thread count changed the bytes");
        CHECK_EQ(tq_decode(ctx, c, b0, n, y0), TQ_OK);
        CHECK_EQ(tq_decode(ctx, c, b1, n, y1), TQ_OK);
        double e0 = werr(x, y0, imp, rows, cols, SIZE_MAX), e1 = werr(x, y1, imp, rows, cols, SIZE_MAX);
        printf("  %s: importance-weighted error %.4g plain, %.4g weighted (%.1f%% lower)\n", tq_codec_name(c), e0, e1,
               100.0 * (1 - e1 / e0));
        CHECK(e1 < 0.95 * e0, "weighted search gained too little: %g vs %g", e1, e0);
        for (size_t b = 0; b < cols / 32; b++) /* row by row would be stricter still; per block column here */
            CHECK(werr(x, y1, imp, rows, cols, b) <= werr(x, y0, imp, rows, cols, b) * (1 + 1e-6), "block column %zu", b);
        /* no importance: the plain search */
        CHECK(tq_encode_weighted(ctx, c, x, rows, cols, NULL, b2) == TQ_OK && !memcmp(b0, b2, n * tq_codec_block_bytes(c) / 32));
        float bad[1024];
        memcpy(bad, imp, sizeof bad);
        bad[5] = -1.0f;
        CHECK_EQ(tq_encode_weighted(ctx, c, x, rows, cols, bad, b2), TQ_ERR_ARG);
        CHECK(strstr(tq_ctx_error(ctx), "importance[5]"));
        bad[5] = NAN;
        CHECK_EQ(tq_encode_weighted(ctx, c, x, rows, cols, bad, b2), TQ_ERR_ARG);
        CHECK(tq_encode_weighted(ctx, c, x, rows * 2, cols / 2 + 16, imp, b2) == TQ_ERR_ARG, "row length not of 32s");
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
    free(x), free(y0), free(y1), free(b0), free(b1), free(b2);
}
