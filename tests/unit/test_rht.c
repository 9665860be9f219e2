/* test_rht.c - the randomized Hadamard transform and its sign vectors. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static const char *fork_s1 = "-++--+-+--++++++" "+-+-+--+++-++---" "-++-++-+-++--+-+" "+++-----+-++++-+"
                             "--+---+---+---++" "+--+++--++-++-+-" "-++-+-+-++++-+-+" "+-++-----++-++-+";
static const char *fork_s2 = "++++-++-+---+---" "++--+-+-+--+-+++" "++---+------+++-" "+-+++--+------++"
                             "+-+----+-+-+--++" "-+-++-+----+--+-" "+-+++--+-+-++--+" "-+-++-+-+-----+-";

TEST(rht_fork_signs_match_published_table)
{
    float s1[128], s2[128], w[32];
    CHECK_EQ(tq_signs_kv(tq_test_ctx(), 128, TQ_SEED_FORK, s1, s2), TQ_OK);
    int sum1 = 0, sum2 = 0;
    for (int i = 0; i < 128; i++) {
        CHECK(s1[i] == (fork_s1[i] == '-' ? -1.0f : 1.0f), "s1[%d]", i);
        CHECK(s2[i] == (fork_s2[i] == '-' ? -1.0f : 1.0f), "s2[%d]", i);
        sum1 += (int)s1[i], sum2 += (int)s2[i];
    }
    CHECK(sum1 == 8 && sum2 == -12, "published sums +8 / -12, got %d / %d", sum1, sum2);
    float t1[64], t2[64];
    tq_signs_kv(tq_test_ctx(), 64, TQ_SEED_FORK, t1, t2);
    CHECK(!memcmp(t1, s1, sizeof t1) && !memcmp(t2, s2, sizeof t2), "g = 64 uses the first 64 signs");
    tq_signs_weight32(w);
    for (uint32_t i = 0; i < 32; i++)
        CHECK(w[i] == (((i * 0x9E3779B9u) >> 31) ? -1.0f : 1.0f), "weight sign %u", i);
}

TEST(rht_generator_is_documented_and_balanced)
{
    float a1[1024], a2[1024], b1[1024], b2[1024];
    for (uint32_t g = 8; g <= 1024; g *= 2) {
        tq_signs_kv(tq_test_ctx(), g, 7, a1, a2);
        tq_signs_kv(tq_test_ctx(), g, 7, b1, b2);
        CHECK(!memcmp(a1, b1, g * 4) && !memcmp(a2, b2, g * 4), "deterministic");
        tq_signs_kv(tq_test_ctx(), g, 8, b1, b2);
        CHECK(memcmp(a1, b1, g * 4) || memcmp(a2, b2, g * 4), "seed changes the signs");
    }
    tq_signs_kv(tq_test_ctx(), 1024, 1, a1, a2);
    int neg = 0;
    for (int i = 0; i < 1024; i++) neg += (a1[i] < 0) + (a2[i] < 0);
    CHECK(neg > 900 && neg < 1148, "%d of 2048 signs negative", neg);
    /* seed 0 at g = 256 is the generator, not a stretched fork vector */
    tq_signs_kv(tq_test_ctx(), 256, 0, a1, a2);
    float e1[256], e2[256];
    tq_signs_generate(256, 0, e1, e2);
    CHECK(!memcmp(a1, e1, sizeof e1) && !memcmp(a2, e2, sizeof e2));
}

TEST(rht_check_value_forward_e0)
{
    float s1[128], s2[128], x[128] = {1.0f};
    tq_signs_kv(tq_test_ctx(), 128, 0, s1, s2);
    tq_rht_forward(tq_test_ctx(), 128, s1, s2, x);
    for (int i = 0; i < 128; i++)
        CHECK(x[i] == s1[0] * s2[i] * 0.08838834764831845f, "forward(e0)[%d] = %g", i, x[i]);
}

/* Against a dense D2 H D1 / sqrt(g) product in double. */
TEST(rht_matches_dense_matrix_and_inverts)
{
    unsigned long long st = 3;
    for (uint32_t g = 8; g <= 1024; g *= 2) {
        float s1[1024], s2[1024], x[1024], y[1024];
        tq_signs_kv(tq_test_ctx(), g, g == 128 ? 0 : 99, s1, s2);
        for (uint32_t i = 0; i < g; i++) x[i] = (float)tq_test_randn(&st);
        memcpy(y, x, g * 4);
        CHECK_EQ(tq_rht_forward(tq_test_ctx(), g, s1, s2, y), TQ_OK);
        double nx = 0, ny = 0, maxerr = 0;
        for (uint32_t i = 0; i < g; i++) {
            double acc = 0;
            for (uint32_t j = 0; j < g; j++)
                acc += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * s1[j] * x[j];
            acc *= s2[i] / sqrt((double)g);
            maxerr = fmax(maxerr, fabs(acc - y[i]));
            nx += (double)x[i] * x[i], ny += (double)y[i] * y[i];
        }
        CHECK(maxerr < 1e-5 * sqrt(nx / g) * 8, "g=%u dense mismatch %g", g, maxerr);
        CHECK(fabs(sqrt(ny) - sqrt(nx)) <= 1e-6 * sqrt(nx), "g=%u norm %g vs %g", g, sqrt(ny), sqrt(nx));
        CHECK_EQ(tq_rht_inverse(tq_test_ctx(), g, s1, s2, y), TQ_OK);
        for (uint32_t i = 0; i < g; i++) CHECK(fabsf(y[i] - x[i]) <= 1e-5f * (1 + fabsf(x[i])), "g=%u inverse", g);
    }
}

TEST(rht_rejects_bad_sizes)
{
    tq_ctx *ctx = tq_ctx_new();
    float s[2048] = {0};
    CHECK_EQ(tq_rht_forward(ctx, 12, s, s, s), TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(ctx), "12") != NULL, "message names the size: %s", tq_ctx_error(ctx));
    CHECK_EQ(tq_rht_inverse(ctx, 2048, s, s, s), TQ_ERR_ARG);
    CHECK_EQ(tq_rht_forward(ctx, 4, s, s, s), TQ_ERR_ARG);
    CHECK_EQ(tq_signs_kv(ctx, 96, 0, s, s), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}
