/* test_codebook.c - the fork's tables as published, and the exact-law
 * Lloyd-Max codebooks against theory and an independent implementation. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

TEST(codebook_fork_tables_are_consistent)
{
    tq_codebook_kind kinds[5] = {TQ_CB_TURBO2, TQ_CB_TURBO3, TQ_CB_TURBO4, TQ_CB_TQ3W, TQ_CB_TQ4W};
    uint32_t bits[5] = {2, 3, 4, 3, 4};
    for (int i = 0; i < 5; i++) {
        tq_codebook cb;
        CHECK_EQ(tq_codebook_get(tq_test_ctx(), kinds[i], 0, 0, &cb), TQ_OK);
        CHECK_EQ(cb.bits, bits[i]);
        CHECK_EQ(cb.size, 1u << bits[i]);
        for (uint32_t k = 0; k + 1 < cb.size; k++) {
            CHECK(cb.centroids[k] < cb.centroids[k + 1], "kind %d ascending", i);
            float mid = 0.5f * (cb.centroids[k] + cb.centroids[k + 1]);
            CHECK(fabsf(cb.thresholds[k] - mid) < 2e-6f, "kind %d threshold %u is the midpoint", i, k);
        }
    }
    /* TQ4 weights are Lloyd-Max for N(0,1) (Max 1960): outer level 2.7326 */
    tq_codebook w4;
    tq_codebook_get(tq_test_ctx(), TQ_CB_TQ4W, 0, 0, &w4);
    CHECK(fabsf(w4.centroids[15] - 2.732590f) < 1e-6f && w4.centroids[0] == -w4.centroids[15]);
}

/* colalb1/turboquant-cpp codebook_d{64,128}_b{1..4}.json (numbers-to-beat 15) */
static const struct {
    uint32_t g, b;
    double mse;
    double c[8];
} ref[] = {
    {64, 1, 0.358387, {0.100125908}},
    {64, 2, 0.114526, {0.056514369, 0.187495848}},
    {64, 3, 0.033391, {0.030467306, 0.093827183, 0.166161040, 0.263907447}},
    {64, 4, 0.009132, {0.015910889, 0.048066015, 0.081274219, 0.116438349, 0.154870063, 0.198798047,
                       0.252857960, 0.330748898}},
    {128, 1, 0.360889, {0.070661573}},
    {128, 2, 0.116000, {0.039990945, 0.133040198}},
    {128, 3, 0.033966, {0.021602469, 0.066580595, 0.118132984, 0.188390614}},
    {128, 4, 0.009315, {0.011296498, 0.034134028, 0.057744536, 0.082792567, 0.110247065, 0.141761654,
                        0.180793729, 0.237627187}},
};

TEST(codebook_exact_matches_independent_tables)
{
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        tq_codebook cb;
        CHECK_EQ(tq_codebook_get(tq_test_ctx(), TQ_CB_EXACT, ref[i].g, ref[i].b, &cb), TQ_OK);
        CHECK(fabs(cb.mse - ref[i].mse) <= 1e-3 * ref[i].mse, "d=%u b=%u D_mse %.6f vs %.6f", ref[i].g,
              ref[i].b, cb.mse, ref[i].mse);
        uint32_t half = cb.size / 2;
        for (uint32_t k = 0; k < half; k++)
            CHECK(fabs(cb.centroids[half + k] - ref[i].c[k]) < 1e-4, "d=%u b=%u c[%u] %.9f vs %.9f",
                  ref[i].g, ref[i].b, k, cb.centroids[half + k], ref[i].c[k]);
    }
}

TEST(codebook_exact_all_sizes_sane)
{
    for (uint32_t g = 8; g <= 1024; g *= 2) {
        double prev = 1.0;
        for (uint32_t b = 1; b <= 8; b++) {
            tq_codebook cb;
            CHECK_EQ(tq_codebook_get(tq_test_ctx(), TQ_CB_EXACT, g, b, &cb), TQ_OK);
            CHECK(cb.mse > 0 && cb.mse < prev, "g=%u b=%u D_mse %g not below %g", g, b, cb.mse, prev);
            /* Panter-Dite: high-rate D_mse ~ (sqrt(3) pi / 2) 4^-b; within the paper's bounds */
            CHECK(cb.mse >= pow(4, -(double)b) * 0.9 && cb.mse <= 2.73 * pow(4, -(double)b), "g=%u b=%u", g, b);
            for (uint32_t k = 0; k < cb.size; k++) {
                CHECK(cb.centroids[k] == -cb.centroids[cb.size - 1 - k], "symmetric");
                if (k + 1 < cb.size)
                    CHECK(cb.centroids[k] < cb.thresholds[k] && cb.thresholds[k] < cb.centroids[k + 1]);
            }
            prev = cb.mse;
        }
    }
    tq_ctx *ctx = tq_ctx_new();
    tq_codebook cb;
    CHECK_EQ(tq_codebook_get(ctx, TQ_CB_EXACT, 100, 4, &cb), TQ_ERR_ARG);
    CHECK_EQ(tq_codebook_get(ctx, TQ_CB_EXACT, 128, 9, &cb), TQ_ERR_ARG);
    CHECK_EQ(tq_codebook_get(ctx, (tq_codebook_kind)99, 128, 4, &cb), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}

/* The codec end to end: random unit vectors at g = 128 without norm
 * correction land within 1% of the theoretical D_mse (paper / TQP refs). */
TEST(codec_mse_matches_theory_g128)
{
    const double want[4] = {0.3609, 0.1160, 0.0340, 0.00931};
    const int nv = 20000, g = 128;
    float *x = malloc(sizeof(float) * nv * g), *y = malloc(sizeof(float) * nv * g);
    uint8_t *blk = malloc((size_t)nv * (2 + g));
    unsigned long long st = 11;
    for (int v = 0; v < nv; v++) {
        double n = 0;
        for (int j = 0; j < g; j++) {
            double r = tq_test_randn(&st);
            x[v * g + j] = (float)r;
            n += r * r;
        }
        for (int j = 0; j < g; j++) x[v * g + j] = (float)(x[v * g + j] / sqrt(n));
    }
    tq_ctx *ctx = tq_ctx_new();
    double prev = 1;
    for (uint32_t b = 1; b <= 8; b++) {
        tq_codec_desc d = {TQ_CODEC_TQ, 128, b, 0, 0, 0, 0, 0};
        tq_codec *c;
        CHECK_EQ(tq_codec_new(ctx, &d, &c), TQ_OK);
        tq_encode(ctx, c, x, (size_t)nv * g, blk);
        tq_decode(ctx, c, blk, (size_t)nv * g, y);
        double e = 0;
        for (size_t i = 0; i < (size_t)nv * g; i++) e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        e /= nv;
        if (b <= 4) CHECK(fabs(e - want[b - 1]) <= 0.01 * want[b - 1], "b=%u D_mse %.5f vs %.5f", b, e, want[b - 1]);
        CHECK(e < prev, "b=%u D_mse %.6g not below b-1's %.6g", b, e, prev);
        prev = e;
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
    free(x), free(y), free(blk);
}

/* Uniform cells: evenly spaced thresholds, the Lloyd-Max codebook of one bit
 * fewer's distortion on random unit vectors (within 1.5%), and a lower index
 * entropy than it, which is what they are for; refused where undefined. */
TEST(codebook_uniform_same_distortion_lower_entropy)
{
    enum { NV = 8000, G = 128 };
    float *x = malloc(sizeof(float) * NV * G), *y = malloc(sizeof(float) * NV * G);
    uint8_t *blk = malloc((size_t)NV * (2 + G)), *idx = malloc((size_t)NV * G);
    unsigned long long st = 5;
    for (int v = 0; v < NV; v++) {
        double n = 0;
        for (int j = 0; j < G; j++) {
            x[v * G + j] = (float)tq_test_randn(&st);
            n += (double)x[v * G + j] * x[v * G + j];
        }
        for (int j = 0; j < G; j++) x[v * G + j] = (float)(x[v * G + j] / sqrt(n));
    }
    tq_ctx *ctx = tq_ctx_new();
    for (uint32_t b = 3; b <= 5; b++) {
        double e[2], h[2];
        for (int u = 0; u < 2; u++) {
            tq_codec *c;
            CHECK(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_TQ, G, u ? b + 1 : b, 0, 0, 0, (uint32_t)u, 0}, &c) == TQ_OK,
                  "%s", tq_ctx_error(ctx));
            uint32_t fb = u ? b + 1 : b;
            size_t bb = tq_codec_block_bytes(c);
            tq_encode(ctx, c, x, (size_t)NV * G, blk);
            tq_decode(ctx, c, blk, (size_t)NV * G, y);
            e[u] = 0;
            for (size_t i = 0; i < (size_t)NV * G; i++) e[u] += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            e[u] /= NV;
            double count[256] = {0};
            for (int v = 0; v < NV; v++) {
                tq_unpack_bits(blk + v * bb + 2, G, fb, idx);
                for (int j = 0; j < G; j++) count[idx[j]]++;
            }
            h[u] = 0;
            for (int k = 0; k < 256; k++)
                if (count[k]) h[u] -= count[k] / (NV * G) * log2(count[k] / (NV * G));
            tq_codec_free(c);
        }
        CHECK(fabs(e[1] - e[0]) < 0.015 * e[0], "b=%u: uniform D %.6f vs Lloyd-Max %.6f", b, e[1], e[0]);
        CHECK(h[1] < h[0] - 0.1, "b=%u: uniform entropy %.3f vs Lloyd-Max %.3f", b, h[1], h[0]);
        printf("  b=%u: D %.5f / %.5f, index entropy %.3f / %.3f bits (Lloyd-Max / uniform)\n", b, e[0], e[1], h[0], h[1]);
    }
    const tq_codebook *u = tq_codebook_uniform(G, 5);
    CHECK(u);
    CHECK_EQ(u->size, 32);
    for (uint32_t k = 1; u && k + 1 < u->size - 1; k++)
        CHECK(fabsf((u->thresholds[k + 1] - u->thresholds[k]) - (u->thresholds[1] - u->thresholds[0])) < 1e-6f, "even cells");
    tq_codec *bad;
    CHECK(tq_codec_new(ctx, &(tq_codec_desc){TQ_CODEC_TQ, G, 1, 0, 0, 0, 1, 0}, &bad) == TQ_ERR_ARG, "1-bit uniform refused");
    CHECK(tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TURBO3, .uniform = 1}, &bad) == TQ_ERR_ARG, "turbo refuses it");
    tq_ctx_free(ctx);
    free(x), free(y), free(blk), free(idx);
}
