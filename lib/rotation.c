/* rotation.c - seeded orthogonal matrices for folding rotations into model
 * weights (tq_rotation in tq.h).
 *
 * n a power of two: R = (1/sqrt n) H_n diag(s), a randomized Hadamard
 * transform (s: n signs from the seed).  Otherwise n = m k with m the
 * largest power of two dividing n and k <= 512: R = R_m (x) Q_k, the
 * Kronecker product of a randomized Hadamard transform and a seeded random
 * orthogonal k x k matrix (Gram-Schmidt on Gaussian columns, in double), as
 * QuaRot does for sizes like 3072 and 5120.  Element i = a k + b of a vector
 * is entry (a, b) of an m x k matrix X, and R x = vec(R_m X Q_k^T).
 *
 * Vectors are transformed along any axis: element i of each of `lanes`
 * vectors sits at x[i * lanes + l], so the same code rotates the rows of a
 * matrix (lanes = 1, one row at a time) or its columns (lanes = row length,
 * the butterfly then runs on whole rows). */
#include "tq_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_K 512

struct tq_rotation {
    uint32_t n, m, k;
    uint64_t seed;
    float *s;       /* m signs */
    double *q;      /* k x k, row-major; NULL when k == 1 */
    int signs_only; /* diag(s) alone: m = n, k = 1, no butterfly */
    char kind[64];
};

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *st)
{
    return ((splitmix64(st) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

tq_status tq_rotation_new(tq_ctx *ctx, uint32_t n, uint64_t seed, tq_rotation **out)
{
    TQ_NEED_CTX(ctx);
    *out = NULL;
    if (!n) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a rotation of size 0");
    uint32_t m = n & (~n + 1), k = n / m; /* m: the largest power of two dividing n */
    if (k > MAX_K)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                       "size %u = %u x %u: the odd factor %u is above %d (a dense %u x %u "
                       "orthogonal factor would be needed)",
                       n, m, k, k, MAX_K, k, k);
    tq_rotation *r = calloc(1, sizeof *r);
    if (!r || !(r->s = malloc(m * sizeof(float))) ||
        (k > 1 && !(r->q = malloc((size_t)k * k * sizeof(double))))) {
        tq_rotation_free(r);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    r->n = n;
    r->m = m;
    r->k = k;
    r->seed = seed;
    uint64_t st = seed ^ 0x726f7461746531ull; /* "rotate1": these signs are not the codecs' */
    for (uint32_t i = 0; i < m; i++) r->s[i] = (splitmix64(&st) >> 63) ? -1.0f : 1.0f;
    if (k > 1) {
        double *q =
            r->q; /* rows: Gaussian vectors, then modified Gram-Schmidt (twice, for accuracy) */
        for (uint32_t i = 0; i < k * k; i++) {
            double u1 = uniform01(&st), u2 = uniform01(&st);
            q[i] = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        }
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < k; i++) {
                for (uint32_t j = 0; j < i; j++) {
                    double d = 0.0;
                    for (uint32_t c = 0; c < k; c++) d += q[i * k + c] * q[j * k + c];
                    for (uint32_t c = 0; c < k; c++) q[i * k + c] -= d * q[j * k + c];
                }
                double nn = 0.0;
                for (uint32_t c = 0; c < k; c++) nn += q[i * k + c] * q[i * k + c];
                nn = 1.0 / sqrt(nn);
                for (uint32_t c = 0; c < k; c++) q[i * k + c] *= nn;
            }
        snprintf(r->kind, sizeof r->kind, "hadamard(%u) x orthogonal(%u)", m, k);
    } else {
        snprintf(r->kind, sizeof r->kind, "hadamard(%u)", m);
    }
    *out = r;
    return TQ_OK;
}

tq_status tq_rotation_new_signs(tq_ctx *ctx, uint32_t n, uint64_t seed, tq_rotation **out)
{
    TQ_NEED_CTX(ctx);
    *out = NULL;
    if (!n) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a rotation of size 0");
    tq_rotation *r = calloc(1, sizeof *r);
    if (!r || !(r->s = malloc(n * sizeof(float)))) {
        tq_rotation_free(r);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    r->n = r->m = n;
    r->k = 1;
    r->seed = seed;
    r->signs_only = 1;
    uint64_t st = seed ^ 0x7369676e73ull; /* "signs" */
    for (uint32_t i = 0; i < n; i++) r->s[i] = (splitmix64(&st) >> 63) ? -1.0f : 1.0f;
    snprintf(r->kind, sizeof r->kind, "signs(%u)", n);
    *out = r;
    return TQ_OK;
}

void tq_rotation_free(tq_rotation *r)
{
    if (!r) return;
    free(r->s);
    free(r->q);
    free(r);
}

uint32_t tq_rotation_size(const tq_rotation *r) { return r->n; }
const char *tq_rotation_kind(const tq_rotation *r) { return r->kind; }

/* x: n elements of `lanes` vectors, element i of vector l at x[i * stride + l].
 * R x = (R_m (x) Q) x, R' x = (R_m' (x) Q') x: Q mixes the k elements inside
 * each of the m groups, then the Hadamard butterfly runs across groups. */
tq_status tq_rotation_apply_strided(tq_ctx *ctx, const tq_rotation *r, float *x, size_t lanes,
                                    size_t stride, int transpose)
{
    TQ_NEED_CTX(ctx);
    uint32_t m = r->m, k = r->k;
    float scale = (float)(1.0 / sqrt((double)m));
    tq_status cst = tq_require_cpu(ctx, "rotations");
    if (cst) return cst;
    if (lanes > stride)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%zu lanes with a stride of %zu", lanes, stride);
    if (r->signs_only) { /* its own transpose; negation is exact */
        for (size_t i = 0; i < m; i++)
            for (size_t l = 0; l < lanes; l++) x[i * stride + l] *= r->s[i];
        return TQ_OK;
    }
    if (k > 1) {
        double *tmp = malloc((size_t)k * lanes * sizeof(double));
        if (!tmp) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        for (uint32_t a = 0; a < m; a++) {
            memset(tmp, 0, (size_t)k * lanes * sizeof(double));
            for (uint32_t o = 0; o < k; o++)
                for (uint32_t i = 0; i < k; i++) {
                    double c = transpose ? r->q[(size_t)i * k + o] : r->q[(size_t)o * k + i];
                    const float *src = x + ((size_t)a * k + i) * stride;
                    double *dst = tmp + (size_t)o * lanes;
                    for (size_t l = 0; l < lanes; l++) dst[l] += c * src[l];
                }
            for (uint32_t o = 0; o < k; o++)
                for (size_t l = 0; l < lanes; l++)
                    x[((size_t)a * k + o) * stride + l] = (float)tmp[(size_t)o * lanes + l];
        }
        free(tmp);
    }
    if (m == 1) return TQ_OK;
    size_t n = (size_t)m * k;
    if (!transpose) /* R_m = (1/sqrt m) H diag(s) */
        for (size_t i = 0; i < n; i++) {
            float sg = r->s[i / k];
            for (size_t l = 0; l < lanes; l++) x[i * stride + l] *= sg;
        }
    /* the unnormalised butterfly across groups: a stage pairs the h groups
     * starting at group i with the h groups after them */
    for (uint32_t h = 1; h < m; h *= 2)
        for (uint32_t i = 0; i < m; i += 2 * h) {
            if (lanes == stride) { /* both halves contiguous: one long, vectorizable loop */
                size_t len = (size_t)h * k * lanes;
                float *restrict p = x + (size_t)i * k * lanes, *restrict q = p + len;
                for (size_t t = 0; t < len; t++) {
                    float u = p[t], v = q[t];
                    p[t] = u + v;
                    q[t] = u - v;
                }
                continue;
            }
            for (size_t e = (size_t)i * k; e < (size_t)(i + h) * k; e++) {
                float *restrict p = x + e * stride, *restrict q = x + (e + (size_t)h * k) * stride;
                for (size_t l = 0; l < lanes; l++) {
                    float u = p[l], v = q[l];
                    p[l] = u + v;
                    q[l] = u - v;
                }
            }
        }
    for (size_t i = 0; i < n; i++) {
        float f = transpose ? scale * r->s[i / k] : scale;
        for (size_t l = 0; l < lanes; l++) x[i * stride + l] *= f;
    }
    return TQ_OK;
}

tq_status tq_rotation_apply(tq_ctx *ctx, const tq_rotation *r, float *x, size_t lanes,
                            int transpose)
{
    TQ_NEED_CTX(ctx);
    return tq_rotation_apply_strided(ctx, r, x, lanes, lanes, transpose);
}

/* Many contiguous vectors: transposed in blocks of 32 so the butterfly runs
 * across 32 lanes at every stage (rotating one vector at a time leaves the
 * early stages, pairs one float apart, unvectorized).  Same floats, same
 * order of operations per element as one vector at a time. */
tq_status tq_rotation_apply_rows(tq_ctx *ctx, const tq_rotation *r, float *x, size_t rows,
                                 int transpose)
{
    TQ_NEED_CTX(ctx);
    enum { B = 32 };
    size_t n = r->n;
    tq_status cst = tq_require_cpu(ctx, "rotations");
    if (cst) return cst;
    float *t = malloc(n * B * sizeof(float));
    if (!t) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (size_t r0 = 0; r0 < rows && !st; r0 += B) {
        size_t nb = rows - r0 < B ? rows - r0 : B;
        float *blk = x + r0 * n;
        for (size_t b = 0; b < nb; b++)
            for (size_t i = 0; i < n; i++) t[i * B + b] = blk[b * n + i];
        st = tq_rotation_apply_strided(ctx, r, t, nb, B, transpose);
        for (size_t b = 0; b < nb; b++)
            for (size_t i = 0; i < n; i++) blk[b * n + i] = t[i * B + b];
    }
    free(t);
    return st;
}
