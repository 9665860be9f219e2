/* test_rotation.c - tq_rotation: orthogonal to float precision for power-of-
 * two and Kronecker sizes, R' undoes R, rows and columns agree, seeds are
 * deterministic and distinct. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <string.h>

TEST(rotation_is_orthogonal_and_consistent)
{
    static const uint32_t sizes[] = {8, 64, 96, 384, 3072, 5120, 172};
    tq_ctx *ctx = tq_ctx_new();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint32_t n = sizes[si];
        tq_rotation *r;
        CHECK(tq_rotation_new(ctx, n, 1234, &r) == TQ_OK, "n %u: %s", n, tq_ctx_error(ctx));
        CHECK_EQ(tq_rotation_size(r), n);
        /* columns of R: R e_i for a few i; orthonormal */
        uint32_t probe = n < 24 ? n : 24;
        float *cols = calloc((size_t)n * probe, sizeof(float));
        for (uint32_t i = 0; i < probe; i++) cols[(size_t)((i * 7919u) % n) * probe + i] = 1.0f;
        CHECK(tq_rotation_apply(ctx, r, cols, probe, 0) == TQ_OK); /* the columns of an n x probe matrix at once */
        for (uint32_t a = 0; a < probe; a++)
            for (uint32_t b = 0; b < probe; b++) {
                double d = 0.0;
                for (uint32_t e = 0; e < n; e++) d += (double)cols[(size_t)e * probe + a] * cols[(size_t)e * probe + b];
                CHECK(fabs(d - (a == b)) < 1e-5, "n %u: <R e_%u, R e_%u> = %g", n, a, b, d);
            }
        /* one vector at a time gives the same as the column form; R' undoes R */
        unsigned long long st = n;
        float *v = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
        for (uint32_t e = 0; e < n; e++) v[e] = v0[e] = (float)tq_test_randn(&st);
        CHECK_EQ(tq_rotation_apply(ctx, r, v, 1, 0), TQ_OK);
        float *w = malloc((size_t)n * 2 * sizeof(float));
        for (uint32_t e = 0; e < n; e++) w[2 * e] = v0[e], w[2 * e + 1] = 0.0f;
        CHECK_EQ(tq_rotation_apply(ctx, r, w, 2, 0), TQ_OK);
        for (uint32_t e = 0; e < n; e++) CHECK(fabsf(w[2 * e] - v[e]) <= 1e-6f * (1 + fabsf(v[e])) && w[2 * e + 1] == 0.0f);
        CHECK_EQ(tq_rotation_apply(ctx, r, v, 1, 1), TQ_OK);
        for (uint32_t e = 0; e < n; e++) CHECK(fabsf(v[e] - v0[e]) < 1e-5f * (1 + fabsf(v0[e])), "n %u: R'R x != x at %u", n, e);
        /* same seed, same matrix; another seed, another */
        tq_rotation *r2, *r3;
        CHECK_EQ(tq_rotation_new(ctx, n, 1234, &r2), TQ_OK);
        CHECK_EQ(tq_rotation_new(ctx, n, 99, &r3), TQ_OK);
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        memcpy(a, v0, n * sizeof(float));
        memcpy(b, v0, n * sizeof(float));
        tq_rotation_apply(ctx, r2, a, 1, 0);
        tq_rotation_apply(ctx, r3, b, 1, 0);
        tq_rotation_apply(ctx, r, v0, 1, 0);
        CHECK(!memcmp(a, v0, n * sizeof(float)) && memcmp(b, v0, n * sizeof(float)));
        free(a), free(b), free(v), free(v0), free(w), free(cols);
        tq_rotation_free(r), tq_rotation_free(r2), tq_rotation_free(r3);
    }
    tq_rotation *r;
    CHECK_EQ(tq_rotation_new(ctx, 1031, 1, &r), TQ_ERR_UNSUPPORTED);
    CHECK(strstr(tq_ctx_error(ctx), "odd factor 1031"));
    tq_ctx_free(ctx);
}

TEST(rotation_signs_are_exact)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_rotation *r;
    CHECK_EQ(tq_rotation_new_signs(ctx, 256, 7, &r), TQ_OK);
    CHECK(!strcmp(tq_rotation_kind(r), "signs(256)"));
    float x[256 * 3], x0[256 * 3], rows[3 * 256];
    unsigned long long st = 3;
    for (int i = 0; i < 256 * 3; i++) x[i] = x0[i] = (float)tq_test_randn(&st);
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < 256; i++) rows[l * 256 + i] = x0[i * 3 + l];
    CHECK_EQ(tq_rotation_apply(ctx, r, x, 3, 0), TQ_OK);
    CHECK_EQ(tq_rotation_apply_rows(ctx, r, rows, 3, 0), TQ_OK);
    int flipped = 0;
    for (int i = 0; i < 256; i++) {
        flipped += x[i * 3] != x0[i * 3];
        for (int l = 0; l < 3; l++) {
            CHECK(x[i * 3 + l] == x0[i * 3 + l] || x[i * 3 + l] == -x0[i * 3 + l], "only signs change");
            CHECK(rows[l * 256 + i] == x[i * 3 + l], "rows and columns agree");
        }
    }
    CHECK(flipped > 90 && flipped < 166, "about half the signs flip (%d of 256)", flipped);
    CHECK(tq_rotation_apply(ctx, r, x, 3, 1) == TQ_OK && !memcmp(x, x0, sizeof x), "R' R = I exactly");
    tq_rotation_free(r);
    tq_ctx_free(ctx);
}
