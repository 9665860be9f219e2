/* test_innerq_model.c - the query side of Q-aware InnerQ on stories260K (no
 * QK-norm: W_q rows with attn_norm's gains, 8 query heads pooled onto 4 KV
 * heads), checked against the same sum written out here; a layer the model
 * lacks is refused. */
#include "harness.h"
#include "innerq_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST(innerq_query_energy_stories260k)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g = tq_test_open_stories(ctx); /* the shapes are what is checked */
    CHECK(g != NULL, "%s", tq_ctx_error(ctx));
    double e[4 * 8];
    const char *how = NULL;
    CHECK(tq_innerq_query_energy(ctx, g, 1, 8, 4, e, &how) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK(how && strstr(how, "W_q"), "%s", how ? how : "-");
    int64_t wi = tq_gguf_find_tensor(g, "blk.1.attn_q.weight"), ni = tq_gguf_find_tensor(g, "blk.1.attn_norm.weight");
    float *w = malloc(64 * 64 * sizeof *w), gn[64];
    tq_dequantize(ctx, (tq_dtype)tq_gguf_tensor_type(g, wi)->dtype, tq_gguf_tensor_data(g, wi), 64 * 64, w);
    tq_dequantize(ctx, (tq_dtype)tq_gguf_tensor_type(g, ni)->dtype, tq_gguf_tensor_data(g, ni), 64, gn);
    for (int h = 0; h < 4; h++) /* KV head h: query heads 2h and 2h+1 */
        for (int j = 0; j < 8; j++) {
            double want = 0;
            for (int q = 2 * h; q < 2 * h + 2; q++)
                for (int i = 0; i < 64; i++) want += (double)w[(q * 8 + j) * 64 + i] * gn[i] * w[(q * 8 + j) * 64 + i] * gn[i] / 64 / 2;
            CHECK(e[h * 8 + j] > 0 && (e[h * 8 + j] - want) * (e[h * 8 + j] - want) < 1e-18 + 1e-20 * want, "head %d ch %d: %g vs %g", h, j,
                  e[h * 8 + j], want);
        }
    free(w);
    CHECK(tq_innerq_query_energy(ctx, g, 99, 8, 4, e, &how) == TQ_ERR_UNSUPPORTED, "a layer the model lacks");
    CHECK(tq_innerq_query_energy(ctx, g, 1, 8, 3, e, &how) == TQ_ERR_FORMAT, "3 KV heads of 8 do not fit 64 rows");
    tq_gguf_close(g);
    tq_ctx_free(ctx);
}
