/* test_innerq_scales.c - InnerQ scales from calibration statistics: the
 * Q-aware rule's values on a hand case, RoPE pairs sharing a scale (adjacent
 * and half-split, partial RoPE), the fork's rule equal to a direct
 * implementation of its finalize step, and refusals. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <string.h>

TEST(innerq_scales_rules)
{
    tq_ctx *ctx = tq_ctx_new();
    const double ek2[4] = {4, 4, 1, 1}, eq2[4] = {1, 1, 4, 4};
    float s[8];
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, ek2, eq2, 4, TQ_PAIRS_NONE, 0, 0.5, 0, 0, s) == TQ_OK);
    /* (eq2/ek2)^(1/4) = 1/sqrt2, sqrt2: geometric mean 1 already */
    CHECK(fabsf(s[0] - 0.70710678f) < 1e-6f && fabsf(s[3] - 1.41421356f) < 1e-6f, "%g %g", s[0], s[3]);
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_KV, ek2, NULL, 4, TQ_PAIRS_NONE, 0, 0.5, 0, 0, s) == TQ_OK);
    /* (1/ek2)^(1/4) = 1/sqrt2, 1, over their geometric mean 2^(-1/4): 2^(-1/4), 2^(1/4) */
    CHECK(fabsf(s[0] - 0.84089642f) < 1e-6f && fabsf(s[2] - 1.18920712f) < 1e-6f, "K energy alone: %g %g", s[0], s[2]);
    double k8[8] = {1, 9, 2, 3, 5, 0.5, 7, 4}, q8[8] = {3, 1, 1, 2, 6, 1, 2, 2};
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, k8, q8, 8, TQ_PAIRS_ADJACENT, 0, 0.5, 0, 0, s) == TQ_OK);
    for (int j = 0; j < 8; j += 2) CHECK(s[j] == s[j + 1], "adjacent pair %d shares a scale", j);
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, k8, q8, 8, TQ_PAIRS_HALVES, 0, 0.5, 0, 0, s) == TQ_OK);
    for (int j = 0; j < 4; j++) CHECK(s[j] == s[j + 4], "half-split pair %d shares a scale", j);
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, k8, q8, 8, TQ_PAIRS_HALVES, 4, 0.5, 0, 0, s) == TQ_OK);
    CHECK(s[0] == s[2] && s[1] == s[3] && s[4] != s[5], "partial RoPE: the first 4 paired, the rest free");
    double gm = 0;
    for (int j = 0; j < 8; j++) gm += log(s[j]);
    CHECK(fabs(gm) < 1e-5, "geometric mean 1");
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, k8, q8, 8, TQ_PAIRS_NONE, 0, 0.5, 0.9, 1.1, s) == TQ_OK);
    /* the fork: rms, mean/rms, ^strength, clamp [0.5, 2], in float */
    double kf[8] = {1e-30, 16, 0.25, 1, 100, 0.01, 2, 3};
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_FORK, kf, NULL, 8, TQ_PAIRS_ADJACENT, 0, 0.5, 0, 0, s) == TQ_OK);
    float rms[8], mean = 0;
    for (int j = 0; j < 8; j++) mean += rms[j] = sqrtf((float)kf[j]);
    mean /= 8;
    for (int j = 0; j < 8; j++) {
        float r = rms[j] > 1e-10f ? mean / rms[j] : 1.0f, v = powf(r, 0.5f);
        v = v < 0.5f ? 0.5f : v > 2.0f ? 2.0f : v;
        CHECK(s[j] == v, "fork channel %d: %g vs %g", j, s[j], v);
    }
    CHECK(s[0] == 1.0f, "no energy: ratio 1");
    double even[8] = {1, 1.1, 0.9, 1, 1.05, 0.95, 1, 1}; /* every ratio within 1.2: the fork switches off */
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_FORK, even, NULL, 8, TQ_PAIRS_NONE, 0, 0.5, 0, 0, s) == TQ_OK);
    for (int j = 0; j < 8; j++) CHECK(s[j] == 1.0f, "fork auto-disable: channel %d is %g", j, s[j]);
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_QK, k8, NULL, 8, TQ_PAIRS_NONE, 0, 0.5, 0, 0, s) == TQ_ERR_ARG, "QK without Q");
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_KV, k8, NULL, 8, TQ_PAIRS_NONE, 0, 0, 0, 0, s) == TQ_ERR_ARG, "strength 0");
    CHECK(tq_innerq_scales(ctx, TQ_INNERQ_KV, k8, NULL, 8, TQ_PAIRS_HALVES, 5, 0.5, 0, 0, s) == TQ_ERR_ARG, "odd rot");
    tq_ctx_free(ctx);
}
