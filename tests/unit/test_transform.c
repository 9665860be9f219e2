/* test_transform.c - the transform-coding blocks: the eigenbasis of a
 * covariance decorrelates it, and reverse water-filling spends the budget
 * on the components above the water level. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <stdlib.h>

TEST(sym_eigen_diagonalizes_a_covariance_with_orthonormal_rows)
{
    enum { D = 24, N = 400 };
    tq_ctx *ctx = tq_ctx_new();
    unsigned long long seed = 11;
    double *x = malloc(sizeof(double) * N * D), a[D * D] = {0}, val[D], vec[D * D];
    for (int r = 0; r < N; r++) { /* correlated: channel j mixes the first ones */
        double z0 = tq_test_randn(&seed), z1 = tq_test_randn(&seed);
        for (int j = 0; j < D; j++) x[r * D + j] = z0 * (j + 1) * 0.3 + z1 * (j % 3) + 0.1 * tq_test_randn(&seed);
    }
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int r = 0; r < N; r++) s += x[r * D + i] * x[r * D + j];
            a[i * D + j] = s / N;
        }
    CHECK_OK(ctx, tq_sym_eigen(ctx, D, a, val, vec));
    for (int k = 0; k + 1 < D; k++) CHECK(val[k] >= val[k + 1], "eigenvalue %d %g < %d %g", k, val[k], k + 1, val[k + 1]);
    for (int k = 0; k < D; k++)
        for (int l = 0; l < D; l++) {
            double dot = 0, av = 0;
            for (int j = 0; j < D; j++) dot += vec[k * D + j] * vec[l * D + j];
            CHECK_NEAR(dot, k == l ? 1.0 : 0.0, 1e-9);
            for (int i = 0; i < D; i++) /* v_k^T A v_l */
                for (int j = 0; j < D; j++) av += vec[k * D + i] * a[i * D + j] * vec[l * D + j];
            CHECK_NEAR(av, k == l ? val[k] : 0.0, 1e-8 * (1 + fabs(val[0])));
        }
    free(x);
    tq_ctx_free(ctx);
}

TEST(sym_eigen_refuses_an_asymmetric_matrix)
{
    tq_ctx *ctx = tq_ctx_new();
    double a[4] = {1, 2, 3, 1}, val[2], vec[4];
    CHECK_STATUS(ctx, tq_sym_eigen(ctx, 2, a, val, vec), TQ_ERR_ARG);
    a[1] = NAN;
    CHECK_STATUS(ctx, tq_sym_eigen(ctx, 2, a, val, vec), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}

TEST(waterfill_spends_the_budget_above_the_water_level)
{
    tq_ctx *ctx = tq_ctx_new();
    double var[6] = {16, 4, 1, 0.25, 0.01, 0}, bits[6], theta;
    CHECK_OK(ctx, tq_waterfill(ctx, 6, var, 1.0, bits, &theta));
    double total = 0;
    for (int i = 0; i < 6; i++) {
        total += bits[i];
        if (var[i] <= theta) CHECK_EQ(bits[i], 0);
        else CHECK_NEAR(bits[i], 0.5 * log2(var[i] / theta), 1e-12);
    }
    CHECK_NEAR(total, 6.0, 1e-9);
    /* 6 bits over {16, 4, 1, 0.25}: theta = (16 * 4 * 1 * 0.25)^(1/4) / 2^(12/4) = 2^(1 - 3) */
    CHECK_NEAR(theta, 0.25, 1e-9);
    CHECK_EQ(bits[4], 0);
    tq_ctx_free(ctx);
}

TEST(waterfill_with_no_budget_codes_nothing)
{
    tq_ctx *ctx = tq_ctx_new();
    double var[3] = {2, 1, 0.5}, bits[3] = {9, 9, 9}, theta;
    CHECK_OK(ctx, tq_waterfill(ctx, 3, var, 0.0, bits, &theta));
    CHECK_EQ(bits[0] + bits[1] + bits[2], 0);
    CHECK_NEAR(theta, 2.0, 0);
    double bad[2] = {1, -1};
    CHECK_STATUS(ctx, tq_waterfill(ctx, 2, bad, 1.0, bits, &theta), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}
