/* test_innerq_stats.c - InnerQ calibration statistics: the mean squares per
 * layer, head and channel equal a direct computation over two hand-built
 * sequence files; a dump of another shape and an empty one are refused. */
#include "harness.h"
#include "innerq_stats.h"
#include "llama_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a sequence file: `cells` cells, 2 layers, f32 rows of 2 heads x 4; value
 * (layer, K/V, cell, e) = f(...) */
static float val(int l, int v, int c, int e, int salt) { return (float)((l + 1) * (v ? -1 : 1) * (e + 1) * 0.1 + (c % 3) * 0.5 + salt); }

static float value_of(void *salt, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    return val((int)l, is_v, (int)c, (int)e, *(int *)salt);
}

static uint8_t *make(size_t *len, int cells, int width, int salt)
{
    tq_test_seq s = {(uint32_t)cells, 2, (uint32_t)width, 0, 0, 0, value_of, &salt};
    return tq_test_seq_state(&s, len);
}

TEST(innerq_stats_mean_squares)
{
    tq_ctx *ctx = tq_ctx_new();
    size_t la, lb, lc, ld;
    uint8_t *a = make(&la, 5, 8, 0), *b = make(&lb, 3, 8, 1), *c = make(&lc, 4, 16, 0), *d = make(&ld, 0, 8, 0);
    tq_kv_view *va, *vb, *vc, *vd;
    CHECK(tq_kv_view_open_memory(ctx, a, la, "a", TQ_PROFILE_DEFAULT, &va) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_kv_view_open_memory(ctx, b, lb, "b", TQ_PROFILE_DEFAULT, &vb), TQ_OK);
    CHECK_EQ(tq_kv_view_open_memory(ctx, c, lc, "c", TQ_PROFILE_DEFAULT, &vc), TQ_OK);
    CHECK(tq_kv_view_open_memory(ctx, d, ld, "d", TQ_PROFILE_DEFAULT, &vd) == TQ_OK, "%s", tq_ctx_error(ctx));
    tq_innerq_stats *s;
    CHECK_EQ(tq_innerq_stats_new(ctx, 4, &s), TQ_OK);
    CHECK(tq_innerq_stats_add(ctx, s, va, NULL) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK(tq_innerq_stats_add(ctx, s, vb, NULL) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_innerq_stats_layers(s), 2);
    CHECK_EQ(tq_innerq_stats_heads(s), 2);
    CHECK_EQ(tq_innerq_stats_cells(s, 1), 8);
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < 2; v++)
            for (int h = 0; h < 2; h++) {
                double m[4];
                tq_innerq_stats_mean2(s, (uint32_t)l, (uint32_t)h, v, m);
                for (int j = 0; j < 4; j++) {
                    double want = 0;
                    for (int cc = 0; cc < 5; cc++) want += pow(val(l, v, cc, h * 4 + j, 0), 2);
                    for (int cc = 0; cc < 3; cc++) want += pow(val(l, v, cc, h * 4 + j, 1), 2);
                    want /= 8;
                    CHECK(fabs(m[j] - want) < 1e-6 * want, "layer %d %s head %d ch %d: %g vs %g", l, v ? "V" : "K", h, j,
                          m[j], want);
                }
            }
    CHECK(tq_innerq_stats_add(ctx, s, vc, NULL) == TQ_ERR_ARG && strstr(tq_ctx_error(ctx), "different models"),
          "%s", tq_ctx_error(ctx));
    CHECK(tq_innerq_stats_add(ctx, s, vd, NULL) == TQ_ERR_ARG && strstr(tq_ctx_error(ctx), "empty"), "%s", tq_ctx_error(ctx));
    tq_innerq_stats_free(s);
    tq_kv_view_close(va), tq_kv_view_close(vb), tq_kv_view_close(vc), tq_kv_view_close(vd);
    free(a), free(b), free(c), free(d);
    tq_ctx_free(ctx);
}
