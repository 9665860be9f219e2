/* test_klt.c - transform coding (lib/klt.c): the eigenbasis of a head-sized
 * covariance, coding and decoding on it, the same bytes at every SIMD
 * level, the step that meets a rate, and refusals of bad transforms. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D = 256, N = 1024 };

/* N rows of D values whose variance falls off like a real K's spectrum:
 * D latent factors of standard deviation 4 * 0.97^k, mixed by a fixed
 * random orthogonal-ish matrix (random signs and a channel permutation). */
static float *spectrum_rows(unsigned long long seed)
{
    float *x = malloc(sizeof(float) * N * D);
    int perm[D];
    float sign[D];
    for (int j = 0; j < D; j++) perm[j] = j;
    for (int j = D - 1; j > 0; j--) {
        int k = (int)(seed % (unsigned long long)(j + 1));
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int t = perm[j];
        perm[j] = perm[k];
        perm[k] = t;
        sign[j] = (seed >> 33) & 1 ? 1.0f : -1.0f;
    }
    sign[0] = 1.0f;
    for (int r = 0; r < N; r++)
        for (int k = 0; k < D; k++)
            x[r * D + perm[k]] = sign[k] * (float)(tq_test_randn(&seed) * 4.0 * pow(0.97, k));
    return x;
}

static void basis_of(tq_ctx *ctx, const float *x, float *basis, double *val)
{
    double *cov = malloc(sizeof(double) * D * D), *vec = malloc(sizeof(double) * D * D);
    CHECK_OK(ctx, tq_covariance(ctx, x, N, D, D, cov));
    CHECK_OK(ctx, tq_sym_eigen(ctx, D, cov, val, vec));
    for (int i = 0; i < D * D; i++) basis[i] = (float)vec[i];
    free(cov);
    free(vec);
}

/* One test's data: a context, spectrum rows and their eigenbasis. */
typedef struct {
    tq_ctx *ctx;
    tq_ctx *scalar; /* a context at TQ_SIMD_SCALAR, for the SIMD levels' comparisons */
    float *x;      /* [N][D] the rows */
    float *basis;  /* [D][D] eigenvectors, a row each, largest value first */
    double val[D]; /* eigenvalues, largest first */
} klt_rows;

static klt_rows klt_rows_of(unsigned long long seed)
{
    klt_rows r = {tq_ctx_new(), tq_ctx_new(), spectrum_rows(seed), malloc(sizeof(float) * D * D),
                  {0}};
    basis_of(r.ctx, r.x, r.basis, r.val);
    tq_ctx_set_simd(r.scalar, TQ_SIMD_SCALAR);
    return r;
}

static void klt_rows_free(klt_rows *r)
{
    free(r->x);
    free(r->basis);
    tq_ctx_free(r->ctx);
    tq_ctx_free(r->scalar);
}

TEST(sym_eigen_of_a_head_sized_covariance_is_orthonormal_and_exact)
{
    klt_rows r = klt_rows_of(3);
    double *cov = malloc(sizeof(double) * D * D);
    CHECK_OK(r.ctx, tq_covariance(r.ctx, r.x, N, D, D, cov));
    double worst_dot = 0, worst_res = 0;
    for (int k = 0; k < D; k += 17) {
        for (int l = 0; l < D; l++) {
            double dot = 0;
            for (int j = 0; j < D; j++) dot += (double)r.basis[k * D + j] * r.basis[l * D + j];
            worst_dot = fmax(worst_dot, fabs(dot - (k == l)));
        }
        for (int i = 0; i < D; i++) { /* (A v - lambda v)_i */
            double av = 0;
            for (int j = 0; j < D; j++) av += cov[i * D + j] * r.basis[k * D + j];
            worst_res = fmax(worst_res, fabs(av - r.val[k] * r.basis[k * D + i]));
        }
    }
    CHECK_NEAR(worst_dot, 0.0, 1e-6);
    CHECK_NEAR(worst_res, 0.0, 1e-5 * r.val[0]);
    double alone[D]; /* the values without the vectors: the same reduction, roots taken plainly */
    CHECK_OK(r.ctx, tq_sym_eigen(r.ctx, D, cov, alone, NULL));
    for (int k = 0; k < D; k++) CHECK_NEAR(alone[k], r.val[k], 1e-12 * r.val[0]);
    CHECK(r.val[0] > 10 && r.val[D - 1] < 0.01, "spectrum %g .. %g", r.val[0], r.val[D - 1]);
    free(cov);
    klt_rows_free(&r);
}

TEST(klt_decode_of_encode_errs_by_at_most_half_a_step_per_component)
{
    klt_rows r = klt_rows_of(5);
    float *y = malloc(sizeof(float) * N * D);
    tq_klt k = {D, D, 0.05f, r.basis};
    int16_t *idx = malloc(sizeof(int16_t) * N * D);
    CHECK_OK(r.ctx, tq_klt_encode(r.ctx, &k, r.x, N, D, idx));
    CHECK_OK(r.ctx, tq_klt_decode(r.ctx, &k, idx, N, y, D));
    double err = 0, bound = D * (0.025 * 0.025) * 1.001;
    for (int row = 0; row < N; row++) {
        double e = 0;
        for (int j = 0; j < D; j++) {
            double d = (double)r.x[row * D + j] - y[row * D + j];
            e += d * d;
        }
        err = fmax(err, e);
    }
    /* orthonormal rows: the squared error is the coefficients' */
    CHECK(err <= bound, "worst squared error %g > %g", err, bound);
    free(y);
    free(idx);
    klt_rows_free(&r);
}

TEST(klt_bytes_are_equal_at_every_simd_level)
{
    klt_rows r = klt_rows_of(7);
    tq_klt k = {D, 203, 0.02f, r.basis}; /* a count that is not a multiple of 8 */
    int16_t *a = malloc(sizeof(int16_t) * N * D), *b = malloc(sizeof(int16_t) * N * D);
    float *ya = malloc(sizeof(float) * N * D), *yb = malloc(sizeof(float) * N * D);
    CHECK_OK(r.ctx, tq_klt_encode(r.ctx, &k, r.x, N - 3, D, a));
    CHECK_OK(r.scalar, tq_klt_encode(r.scalar, &k, r.x, N - 3, D, b));
    CHECK_EQ(memcmp(a, b, sizeof(int16_t) * (N - 3) * 203), 0);
    CHECK_OK(r.ctx, tq_klt_decode(r.ctx, &k, a, N - 3, ya, D));
    CHECK_OK(r.scalar, tq_klt_decode(r.scalar, &k, a, N - 3, yb, D));
    CHECK_EQ(memcmp(ya, yb, sizeof(float) * (N - 3) * D), 0);
    free(a);
    free(b);
    free(ya);
    free(yb);
    klt_rows_free(&r);
}

TEST(klt_indices_clamp_and_round_alike_at_every_simd_level)
{
    klt_rows r = klt_rows_of(11);
    /* rows far past the indices' range either way, halfway cases and a NaN */
    for (int j = 0; j < D; j++) {
        r.x[j] = 1e30f;
        r.x[D + j] = -1e30f;
        r.x[2 * D + j] = 0.5f * (float)(j % 7) * 0.02f;
    }
    r.x[3 * D + 5] = NAN;
    tq_klt k = {D, 64, 0.02f, r.basis};
    int16_t *a = malloc(sizeof(int16_t) * N * 64), *b = malloc(sizeof(int16_t) * N * 64);
    CHECK_OK(r.ctx, tq_klt_encode(r.ctx, &k, r.x, N, D, a));
    CHECK_OK(r.scalar, tq_klt_encode(r.scalar, &k, r.x, N, D, b));
    size_t first = SIZE_MAX;
    for (size_t i = 0; i < (size_t)N * 64 && first == SIZE_MAX; i++)
        if (a[i] != b[i]) first = i;
    CHECK_EQ(first, SIZE_MAX);
    int worst = 0;
    for (size_t c = 0; c < 64; c++) worst = abs(a[c * N]) > worst ? abs(a[c * N]) : worst;
    CHECK_EQ(worst, 32767); /* the rows of 1e30 clamp */
    free(a);
    free(b);
    klt_rows_free(&r);
}

TEST(klt_rate_step_is_the_same_at_every_simd_level)
{
    tq_ctx *ctx = tq_ctx_new(), *scalar = tq_ctx_new();
    CHECK_OK(scalar, tq_ctx_set_simd(scalar, TQ_SIMD_SCALAR));
    float *y = spectrum_rows(13);
    float step_a, step_b;
    uint32_t m_a, m_b;
    double rate_a, rate_b;
    CHECK_OK(ctx, tq_klt_rate_step(ctx, y, N, D, 2.5, 0.01, &step_a, &m_a, &rate_a));
    CHECK_OK(scalar, tq_klt_rate_step(scalar, y, N, D, 2.5, 0.01, &step_b, &m_b, &rate_b));
    CHECK_EQ_DBL(step_a, step_b);
    CHECK_EQ(m_a, m_b);
    CHECK_EQ_DBL(rate_a, rate_b);
    free(y);
    tq_ctx_free(ctx);
    tq_ctx_free(scalar);
}

TEST(klt_rate_step_meets_the_rate_and_drops_components_that_carry_nothing)
{
    klt_rows r = klt_rows_of(9);
    float *y = malloc(sizeof(float) * N * D);
    CHECK_OK(r.ctx, tq_klt_project(r.ctx, r.basis, D, D, r.x, N, D, y));
    float step;
    uint32_t m;
    double rate;
    CHECK_OK(r.ctx, tq_klt_rate_step(r.ctx, y, N, D, 2.0, 0.02, &step, &m, &rate));
    CHECK_NEAR(rate, 2.0, 0.01);
    /* the eigenvalues' Gaussian estimate of that count, what the plan screens with */
    uint32_t est = tq_klt_gauss_components(r.val, D, 2.0, 0.02);
    CHECK(est > m * 3 / 4 && est < m * 5 / 4 + 2, "estimated %u components, measured %u", est, m);
    /* the spectrum falls 0.97 a component: the last ones sit far under the step */
    CHECK(m > 40 && m < D, "kept %u of %d components", m, D);
    CHECK(4.0 * pow(0.97, m) < step, "component %u of sd %g kept at step %g", m, 4.0 * pow(0.97, m),
          (double)step);
    float step3;
    CHECK_OK(r.ctx, tq_klt_rate_step(r.ctx, y, N, D, 3.0, 0.02, &step3, &m, &rate));
    /* one more bit a value where every component is coded halves the step; fewer are here */
    CHECK(step3 < step * 0.8f && step3 > step * 0.3f, "2 bits: step %g, 3 bits: %g", (double)step,
          (double)step3);
    free(y);
    klt_rows_free(&r);
}

TEST(klt_refuses_bad_transforms)
{
    tq_ctx *ctx = tq_ctx_new();
    float basis[16] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, x[8] = {0}, y[8];
    int16_t idx[2];
    tq_klt k = {8, 2, 0.0f, basis};
    CHECK_STATUS(ctx, tq_klt_encode(ctx, &k, x, 1, 8, idx), TQ_ERR_ARG);
    k.step = NAN;
    CHECK_STATUS(ctx, tq_klt_decode(ctx, &k, idx, 1, y, 8), TQ_ERR_ARG);
    k.step = 1.0f;
    k.d = 12; /* not a multiple of 8 */
    CHECK_STATUS(ctx, tq_klt_encode(ctx, &k, x, 1, 12, idx), TQ_ERR_ARG);
    k.d = 8;
    k.m = 9;
    CHECK_STATUS(ctx, tq_klt_encode(ctx, &k, x, 1, 8, idx), TQ_ERR_ARG);
    k.m = 2;
    basis[3] = INFINITY;
    CHECK_STATUS(ctx, tq_klt_decode(ctx, &k, idx, 1, y, 8), TQ_ERR_ARG);
    tq_ctx_free(ctx);
}

TEST(klt_gauss_bits_at_error_follows_the_high_rate_law_for_equal_components)
{
    /* one step for 64 unit components at error D: 0.5 log2(2 pi e / 12 / D) bits each */
    double var[64];
    for (int i = 0; i < 64; i++) var[i] = 1.0;
    double mse = 2.0 * M_PI * M_E / 12.0 * pow(2.0, -2.0 * 3.0); /* 3 bits by that law */
    uint32_t m = 0;
    double bits = tq_klt_gauss_bits_at_error(var, 64, mse, 0.01, &m);
    CHECK_NEAR(bits, 3.0, 0.01);
    CHECK_EQ(m, 64);
    /* the whole variance as error: nothing to code */
    CHECK_NEAR(tq_klt_gauss_bits_at_error(var, 64, 1.0, 0.01, &m), 0.0, 0);
    CHECK_EQ(m, 0);
}

TEST(klt_gauss_bits_at_error_drops_components_under_the_error)
{
    /* half the components 100x weaker than the error allowed: they cost nothing, and the
       strong half pays for the error the weak half leaves */
    double var[32];
    for (int i = 0; i < 32; i++) var[i] = i < 16 ? 1.0 : 1e-4;
    uint32_t m = 0;
    double bits = tq_klt_gauss_bits_at_error(var, 32, 0.01, 0.01, &m);
    CHECK_EQ(m, 16);
    double strong = 0.5 * log2(2.0 * M_PI * M_E / 12.0 / 0.02) * 16 / 32;
    CHECK_NEAR(bits, strong, 0.02);
}

TEST(codec_gauss_cost_matches_the_codec_on_gaussian_rows)
{
    /* tq's 4-bit Lloyd-Max blocks of 128 on Gaussian rows: the estimate's error against the
       codec's own */
    tq_ctx *ctx = tq_ctx_new();
    double mse = 0, bits = 0;
    CHECK_OK(ctx, tq_codec_gauss_cost(ctx, 128, 4, 0, &mse, &bits));
    tq_codec_desc desc = {.kind = TQ_CODEC_TQ, .group = 128, .bits = 4, .norm_correction = 1,
                          .seed = 7};
    tq_codec *c = NULL;
    CHECK_OK(ctx, tq_codec_new(ctx, &desc, &c));
    enum { N = 128 * 256 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *blk = malloc(N / tq_codec_block_values(c) * tq_codec_block_bytes(c));
    unsigned long long seed = 11;
    for (int i = 0; i < N; i++) x[i] = (float)tq_test_randn(&seed);
    CHECK_OK(ctx, tq_encode(ctx, c, x, N, blk));
    CHECK_OK(ctx, tq_decode(ctx, c, blk, N, y));
    double e = 0, s = 0;
    for (int i = 0; i < N; i++) {
        e += (double)(x[i] - y[i]) * (x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    CHECK(fabs(e / s - mse) < 0.1 * mse, "measured %g, estimated %g", e / s, mse);
    /* a 16-cell Lloyd-Max codebook's cells are not equally likely: under 4 bits of entropy */
    CHECK(bits > 3.6 && bits < 3.9, "index entropy %g bits", bits);
    CHECK_STATUS(ctx, tq_codec_gauss_cost(ctx, 128, 1, 1, &mse, &bits), TQ_ERR_ARG);
    free(x);
    free(y);
    free(blk);
    tq_codec_free(c);
    tq_ctx_free(ctx);
}
