/* transform.c - the eigenbasis of a covariance and reverse water-filling
 * (tq.h, "transform coding"): what a KLT-coded snapshot is built from. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Cyclic Jacobi: simple, exact to rounding and deterministic, converging
 * quadratically (the sweep cap is a guard).  Measured: 0.48 s for one
 * 256 x 256 covariance on the 2-core VM, so a snapshot of 36 such tensors
 * would spend 17 s here: the encoder will need a Householder reduction (or
 * a basis computed once per model) before it meets issue 22's speed item. */
enum { EIGEN_SWEEPS = 64 };

/* Off-diagonal energy of m[d][d]. */
static double off_diagonal(uint32_t d, const double *m)
{
    double s = 0;
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j < d; j++)
            if (i != j) s += m[(size_t)i * d + j] * m[(size_t)i * d + j];
    return s;
}

/* One Jacobi rotation zeroing m[p][q]; v's rows p and q turn with it. */
static void rotate_pair(uint32_t d, double *m, double *v, uint32_t p, uint32_t q)
{
    double apq = m[(size_t)p * d + q];
    double app = m[(size_t)p * d + p];
    double aqq = m[(size_t)q * d + q];
    double tau = (aqq - app) / (2.0 * apq);
    double t = (tau >= 0 ? 1.0 : -1.0) / (fabs(tau) + sqrt(1.0 + tau * tau));
    double c = 1.0 / sqrt(1.0 + t * t);
    double s = t * c;
    for (uint32_t k = 0; k < d; k++) { /* columns p and q */
        double mkp = m[(size_t)k * d + p];
        double mkq = m[(size_t)k * d + q];
        m[(size_t)k * d + p] = c * mkp - s * mkq;
        m[(size_t)k * d + q] = s * mkp + c * mkq;
    }
    for (uint32_t k = 0; k < d; k++) { /* rows p and q */
        double mpk = m[(size_t)p * d + k];
        double mqk = m[(size_t)q * d + k];
        m[(size_t)p * d + k] = c * mpk - s * mqk;
        m[(size_t)q * d + k] = s * mpk + c * mqk;
    }
    for (uint32_t k = 0; k < d; k++) {
        double vp = v[(size_t)p * d + k];
        double vq = v[(size_t)q * d + k];
        v[(size_t)p * d + k] = c * vp - s * vq;
        v[(size_t)q * d + k] = s * vp + c * vq;
    }
}

tq_status tq_sym_eigen(tq_ctx *ctx, uint32_t d, const double *a, double *eigval, double *eigvec)
{
    TQ_NEED_CTX(ctx);
    if (!d || d > 4096) return tq_fail(ctx, TQ_ERR_ARG, "eigen-decomposition of %u x %u", d, d);
    double scale = 0;
    for (size_t i = 0; i < (size_t)d * d; i++) {
        if (!isfinite(a[i])) return tq_fail(ctx, TQ_ERR_ARG, "a matrix entry that is not finite");
        scale += a[i] * a[i];
    }
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j < i; j++)
            if (a[(size_t)i * d + j] != a[(size_t)j * d + i])
                return tq_fail(ctx, TQ_ERR_ARG, "the matrix is not symmetric at (%u, %u)", i, j);
    double *m = malloc((size_t)d * d * sizeof *m); /* [d][d]: a, turned to diagonal */
    if (!m) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(m, a, (size_t)d * d * sizeof *m);
    memset(eigvec, 0, (size_t)d * d * sizeof *eigvec);
    for (uint32_t i = 0; i < d; i++) eigvec[(size_t)i * d + i] = 1.0;
    double tiny = scale * 1e-30;
    for (int sweep = 0; sweep < EIGEN_SWEEPS && off_diagonal(d, m) > tiny; sweep++)
        for (uint32_t p = 0; p + 1 < d; p++)
            for (uint32_t q = p + 1; q < d; q++)
                if (m[(size_t)p * d + q] != 0.0) rotate_pair(d, m, eigvec, p, q);
    for (uint32_t i = 0; i < d; i++) eigval[i] = m[(size_t)i * d + i];
    /* descending, by selection: equal values keep their order (deterministic) */
    for (uint32_t i = 0; i + 1 < d; i++) {
        uint32_t best = i;
        for (uint32_t j = i + 1; j < d; j++)
            if (eigval[j] > eigval[best]) best = j;
        if (best == i) continue;
        double t = eigval[i];
        eigval[i] = eigval[best];
        eigval[best] = t;
        for (uint32_t k = 0; k < d; k++) {
            double x = eigvec[(size_t)i * d + k];
            eigvec[(size_t)i * d + k] = eigvec[(size_t)best * d + k];
            eigvec[(size_t)best * d + k] = x;
        }
    }
    free(m);
    return TQ_OK;
}

/* Total bits at water level theta. */
static double rate_at(uint32_t n, const double *var, double theta)
{
    double r = 0;
    for (uint32_t i = 0; i < n; i++)
        if (var[i] > theta) r += 0.5 * log2(var[i] / theta);
    return r;
}

tq_status tq_waterfill(tq_ctx *ctx, uint32_t n, const double *var, double bits_per_value,
                       double *bits, double *theta)
{
    TQ_NEED_CTX(ctx);
    if (!n || !(bits_per_value >= 0) || !isfinite(bits_per_value))
        return tq_fail(ctx, TQ_ERR_ARG, "water-filling %u components at %g bits", n,
                       bits_per_value);
    double top = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!(var[i] >= 0) || !isfinite(var[i]))
            return tq_fail(ctx, TQ_ERR_ARG, "variance %u is %g", i, var[i]);
        if (var[i] > top) top = var[i];
    }
    *theta = 0;
    memset(bits, 0, n * sizeof *bits);
    if (top == 0 || bits_per_value == 0) {
        *theta = top;
        return TQ_OK;
    }
    /* rate falls as theta rises: bisect log2(theta) between a level that
     * spends too much and the largest variance (which spends nothing) */
    double want = bits_per_value * n;
    double hi = log2(top);
    double lo = hi - 2.0 * bits_per_value - 64.0;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi);
        if (rate_at(n, var, exp2(mid)) > want)
            lo = mid;
        else
            hi = mid;
    }
    *theta = exp2(hi);
    for (uint32_t i = 0; i < n; i++) bits[i] = var[i] > *theta ? 0.5 * log2(var[i] / *theta) : 0.0;
    return TQ_OK;
}
