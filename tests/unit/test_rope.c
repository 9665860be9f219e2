/* test_rope.c - RoPE as llama.cpp turns K: R(pos) b equal to ggml's
 * recurrence (theta_i = pos * scale * base^(-2/n)^i, in float) for normal and
 * NeoX pairs, partial RoPE leaving the last channels, unrotate undoing add,
 * consecutive positions (angles by recurrence) against the exact rotation,
 * and refusals. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <string.h>

/* ggml's rope of one head, as its CPU kernel computes it (float recurrence). */
static void ggml_like(const float *b, float *y, uint32_t hd, uint32_t n_rot, int neox, float base, float scale, int pos)
{
    memcpy(y, b, hd * sizeof *y);
    float theta_scale = powf(base, -2.0f / n_rot), theta = pos * scale;
    for (uint32_t i = 0; i < n_rot / 2; i++, theta *= theta_scale) {
        uint32_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_rot / 2 : 2 * i + 1;
        float c = cosf(theta), s = sinf(theta);
        y[j0] = b[j0] * c - b[j1] * s;
        y[j1] = b[j0] * s + b[j1] * c;
    }
}

TEST(rope_matches_ggml)
{
    tq_ctx *ctx = tq_ctx_new();
    enum { HD = 64, NH = 2, W = HD * NH, ROWS = 5 };
    float b[W], x[ROWS * W], want[HD];
    for (int j = 0; j < W; j++) b[j] = sinf(0.7f * j + 0.3f) + (j % 7 == 0 ? 3.0f : 0.0f);
    const int32_t pos[ROWS] = {0, 1, 17, 511, 1200};
    for (int neox = 0; neox < 2; neox++)
        for (uint32_t n_rot = 32; n_rot <= HD; n_rot += 32) {
            tq_rope r = {HD, n_rot, neox ? TQ_PAIRS_HALVES : TQ_PAIRS_ADJACENT, 10000.0f, 0.5f};
            memset(x, 0, sizeof x);
            CHECK(tq_rope_add(ctx, &r, b, x, ROWS, W, pos, 1.0f) == TQ_OK, "%s", tq_ctx_error(ctx));
            double worst = 0;
            for (int k = 0; k < ROWS; k++)
                for (int h = 0; h < NH; h++) {
                    ggml_like(b + h * HD, want, HD, n_rot, neox, 10000.0f, 0.5f, pos[k]);
                    for (int j = 0; j < HD; j++) worst = fmax(worst, fabs(x[k * W + h * HD + j] - want[j]));
                    if (n_rot < HD) CHECK(x[k * W + h * HD + HD - 1] == b[h * HD + HD - 1], "partial RoPE turned a free channel");
                }
            /* ggml's float recurrence drifts from exact angles by ~1e-4 at position 1200 */
            CHECK(worst < 2e-3, "neox %d n_rot %u: %g from ggml", neox, n_rot, worst);
            CHECK_EQ(tq_rope_unrotate(ctx, &r, x, ROWS, W, pos), TQ_OK);
            worst = 0;
            for (int k = 0; k < ROWS; k++)
                for (int j = 0; j < W; j++) worst = fmax(worst, fabs(x[k * W + j] - b[j]));
            CHECK(worst < 1e-5, "unrotate(R b) = b: %g", worst);
            for (int k = 0; k < ROWS; k++) memcpy(x + k * W, b, sizeof b);
            CHECK(tq_rope_add(ctx, &r, b, x, ROWS, W, pos, 1.0f) == TQ_OK);
            CHECK(tq_rope_add(ctx, &r, b, x, ROWS, W, pos, -1.0f) == TQ_OK);
            for (int j = 0; j < W; j++) CHECK(x[(ROWS - 1) * W + j] == b[j] || fabsf(x[(ROWS - 1) * W + j] - b[j]) < 1e-6f);
        }
    /* consecutive cells advance their angles by recurrence: still the exact rotation, past RESYNC rows and a jump */
    enum { RUN = 300 };
    static int32_t run[RUN];
    static float xr[RUN * HD];
    for (int k = 0; k < RUN; k++) run[k] = k < 200 ? 100000 + k : 7 + k;
    tq_rope r = {HD, HD, TQ_PAIRS_HALVES, 10000.0f, 1.0f};
    memset(xr, 0, sizeof xr);
    CHECK(tq_rope_add(ctx, &r, b, xr, RUN, HD, run, 1.0f) == TQ_OK);
    double worst = 0;
    for (int k = 0; k < RUN; k++)
        for (int i = 0; i < HD / 2; i++) {
            double th = run[k] * pow(10000.0, -2.0 * i / HD), c = cos(th), sn = sin(th);
            worst = fmax(worst, fabs(xr[k * HD + i] - (b[i] * c - b[i + HD / 2] * sn)));
            worst = fmax(worst, fabs(xr[k * HD + i + HD / 2] - (b[i] * sn + b[i + HD / 2] * c)));
        }
    CHECK(worst < 1e-5, "recurrence over consecutive positions: %g from the exact rotation", worst);
    tq_rope bad = {HD, 33, TQ_PAIRS_HALVES, 10000.0f, 1.0f};
    CHECK(tq_rope_add(ctx, &bad, b, x, 1, W, pos, 1.0f) == TQ_ERR_ARG, "odd n_rot refused");
    bad = (tq_rope){HD, HD, TQ_PAIRS_HALVES, 10000.0f, 1.0f};
    CHECK(tq_rope_unrotate(ctx, &bad, x, 1, W + 1, pos) == TQ_ERR_ARG, "rows that are not whole heads refused");
    bad.freq_base = NAN;
    CHECK(tq_rope_check(ctx, &bad, W) == TQ_ERR_ARG && strstr(tq_ctx_error(ctx), "RoPE"), "%s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
}

TEST(rope_rotate_matches_adding_the_turned_offset_and_undoes_unrotate)
{
    tq_ctx *ctx = tq_ctx_new();
    enum { HD = 64, NH = 2, W = HD * NH, ROWS = 70 }; /* past the recurrence's resync at 64 */
    for (int neox = 0; neox < 2; neox++) {
        tq_rope r = {HD, 48, neox ? TQ_PAIRS_HALVES : TQ_PAIRS_ADJACENT, 10000.0f, 1.0f};
        static float b[W], x[ROWS * W], y[ROWS * W], z[ROWS * W];
        int32_t pos[ROWS];
        for (int k = 0; k < ROWS; k++) pos[k] = k < 40 ? 3 + k : 500 + 2 * k; /* a run, then jumps */
        for (int j = 0; j < W; j++) b[j] = cosf(0.3f * j) + (j % 5 == 0 ? 2.0f : 0.0f);
        for (int k = 0; k < ROWS; k++) memcpy(x + k * W, b, sizeof b);
        memset(y, 0, sizeof y);
        CHECK_OK(ctx, tq_rope_rotate(ctx, &r, x, ROWS, W, pos));            /* R(pos) b */
        CHECK_OK(ctx, tq_rope_add(ctx, &r, b, y, ROWS, W, pos, 1.0f));      /* 0 + R(pos) b */
        double worst = 0;
        for (int i = 0; i < ROWS * W; i++) worst = fmax(worst, fabs(x[i] - y[i]));
        CHECK_NEAR(worst, 0.0, 1e-5);
        memcpy(z, x, sizeof z);
        CHECK_OK(ctx, tq_rope_unrotate(ctx, &r, z, ROWS, W, pos));
        worst = 0;
        for (int k = 0; k < ROWS; k++)
            for (int j = 0; j < W; j++) worst = fmax(worst, fabs(z[k * W + j] - b[j]));
        CHECK_NEAR(worst, 0.0, 1e-5);
    }
    tq_ctx_free(ctx);
}
