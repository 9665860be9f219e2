/* transform.c - the eigenbasis of a covariance and reverse water-filling
 * (tq.h, "transform coding"): what a KLT-coded snapshot is built from. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Householder reduction to tridiagonal form, then implicit QL steps with
 * Wilkinson-like shifts on the tridiagonal matrix, the rotations carried
 * into the reflectors' product: O(d^3) with a small constant where cyclic
 * Jacobi needed many sweeps (measured at d = 256 on the 2-core VM: Jacobi
 * 0.48 s, this 0.02 s), deterministic, exact to rounding.  Eigenvectors are
 * kept as rows so that every rotation combines two contiguous rows. */
enum { QL_ITERATIONS = 64 };

/* The Householder and QL loops are each a row times a scalar: TQ_CLONES_V3 doubles their lanes
 * (the same bits; a tenth of the plan's CPU time on the Llama-8B-shaped state,
 * tests/bench/results/kv_vs_zstd.md). */

/* Column k of a below the diagonal turned to (alpha, 0, ...) by the Householder reflector
 * H = I - 2 v v^T (v[d - k - 1], unit), applied to the trailing block from both sides; 0 where
 * the column is tridiagonal already (no reflector). */
TQ_CLONES_V3 static int reflect_column(uint32_t d, double *a, uint32_t k, double *v, double *p)
{
    uint32_t len = d - k - 1; /* the column below the diagonal: a[k+1..d-1][k] */
    double norm = 0;
    for (uint32_t i = 0; i < len; i++) {
        v[i] = a[(size_t)(k + 1 + i) * d + k];
        norm += v[i] * v[i];
    }
    norm = sqrt(norm);
    double tail = norm * norm - v[0] * v[0];
    if (norm == 0 || tail == 0) return 0;
    double alpha = v[0] > 0 ? -norm : norm;
    v[0] -= alpha;
    double vn = sqrt(v[0] * v[0] + tail);
    for (uint32_t i = 0; i < len; i++) v[i] /= vn;
    /* trailing block B = a[k+1..][k+1..]; B <- H B H with H = I - 2 v v^T:
     * p = B v, w = p - (v.p) v, B <- B - 2 v w^T - 2 w v^T */
    memset(p, 0, len * sizeof *p); /* B v as rows times v_j (B is symmetric to the bit):
                                      no sum across a vector's lanes, so it vectorizes */
    for (uint32_t j = 0; j < len; j++) {
        const double *row = a + (size_t)(k + 1 + j) * d + k + 1;
        double vj = v[j];
        for (uint32_t i = 0; i < len; i++) p[i] += vj * row[i];
    }
    double vp = 0;
    for (uint32_t i = 0; i < len; i++) vp += v[i] * p[i];
    for (uint32_t i = 0; i < len; i++) p[i] -= vp * v[i];
    for (uint32_t i = 0; i < len; i++) {
        double *row = a + (size_t)(k + 1 + i) * d + k + 1;
        for (uint32_t j = 0; j < len; j++) row[j] -= 2.0 * (v[i] * p[j] + p[i] * v[j]);
    }
    a[(size_t)(k + 1) * d + k] = alpha;
    a[(size_t)k * d + k + 1] = alpha;
    for (uint32_t i = 1; i < len; i++) {
        a[(size_t)(k + 1 + i) * d + k] = 0;
        a[(size_t)k * d + k + 1 + i] = 0;
    }
    return 1;
}

/* Q = H_0 H_1 ... H_{d-3} from the reflectors vs[d][d] (reflector k in row k), built from I
 * inside out: H_k M = M - 2 v (v^T M) touches rows and columns k+1.. only; w = v^T M and the
 * update are both rows times scalars (vectorized).  Then q = Q^T: rows of Q^T are what QL
 * rotates.  w: d scratch values. */
TQ_CLONES_V3 static tq_status reflectors_to_q(uint32_t d, const double *vs, double *w, double *q)
{
    double *mq = calloc((size_t)d * d, sizeof *mq); /* [d][d]: Q */
    if (!mq) return TQ_ERR_NOMEM;
    for (uint32_t i = 0; i < d; i++) mq[(size_t)i * d + i] = 1.0;
    for (uint32_t k = d >= 2 ? d - 2 : 0; k-- > 0;) {
        const double *vk = vs + (size_t)k * d;
        memset(w, 0, d * sizeof *w);
        for (uint32_t i = k + 1; i < d; i++) {
            const double *row = mq + (size_t)i * d;
            double vi = vk[i];
            for (uint32_t c = k + 1; c < d; c++) w[c] += vi * row[c];
        }
        for (uint32_t i = k + 1; i < d; i++) {
            double *row = mq + (size_t)i * d;
            double vi2 = 2.0 * vk[i];
            for (uint32_t c = k + 1; c < d; c++) row[c] -= vi2 * w[c];
        }
    }
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j < d; j++) q[(size_t)i * d + j] = mq[(size_t)j * d + i];
    free(mq);
    return TQ_OK;
}

/* a[d][d] (destroyed) = Q T Q^T: diag[d], off[d] (off[i] couples i and
 * i+1; off[d-1] = 0) and q[d][d] = Q^T (row i: column i of Q; q NULL:
 * not built). */
static tq_status tridiagonalize(uint32_t d, double *a, double *diag, double *off, double *q)
{
    double *v = malloc(d * sizeof *v), *p = malloc(d * sizeof *p);
    double *vs = calloc((size_t)d * d, sizeof *vs); /* [d][d]: reflector k in row k */
    tq_status st = v && p && vs ? TQ_OK : TQ_ERR_NOMEM;
    for (uint32_t k = 0; !st && k + 2 < d; k++)
        if (reflect_column(d, a, k, v, p))
            memcpy(vs + (size_t)k * d + k + 1, v, (d - k - 1) * sizeof *v);
    for (uint32_t i = 0; !st && i < d; i++) {
        diag[i] = a[(size_t)i * d + i];
        off[i] = i + 1 < d ? a[(size_t)(i + 1) * d + i] : 0.0;
    }
    if (!st && q) st = reflectors_to_q(d, vs, p, q);
    free(v);
    free(p);
    free(vs);
    return st;
}

/* sqrt(a^2 + b^2): libm's hypot (exact to rounding, the eigenvectors' bases depend on it to
 * the bit) where vectors are built; the plain root where only values are (a plan screening
 * hundreds of covariances spent a third of its time in hypot), hypot again where the squares
 * could overflow. */
static double norm2(double a, double b, int exact)
{
    if (exact || fabs(a) > 1e150 || fabs(b) > 1e150) return hypot(a, b);
    return sqrt(a * a + b * b);
}

/* Rows i and i+1 of z turn by (c, s): the QL step's plane rotation. */
static void turn_rows(uint32_t d, double *z, uint32_t i, double c, double s)
{
    double *zi = z + (size_t)i * d, *zn = zi + d;
    for (uint32_t k = 0; k < d; k++) {
        double f = zn[k];
        zn[k] = s * zi[k] + c * f;
        zi[k] = c * zi[k] - s * f;
    }
}

/* Eigenvalues of the tridiagonal (diag, off) into diag, their vectors into
 * the rows of z (which holds Q^T on entry; NULL: values only).  0, or -1 when an eigenvalue
 * does not converge. */
TQ_CLONES_V3 static int tridiagonal_ql(uint32_t d, double *diag, double *off, double *z)
{
    for (uint32_t l = 0; l < d; l++) {
        for (int iter = 0;; iter++) {
            uint32_t m = l; /* the first negligible coupling at or after l */
            while (m + 1 < d) {
                double scale = fabs(diag[m]) + fabs(diag[m + 1]);
                if (fabs(off[m]) <= 1e-15 * scale) break;
                m++;
            }
            if (m == l) break;
            if (iter == QL_ITERATIONS) return -1;
            /* shift: the eigenvalue of the leading 2 x 2 block nearer diag[l] */
            double g = (diag[l + 1] - diag[l]) / (2.0 * off[l]);
            double r = norm2(g, 1.0, z != NULL);
            g = diag[m] - diag[l] + off[l] / (g + (g >= 0 ? r : -r));
            double s = 1, c = 1, p = 0;
            uint32_t i = m;
            int deflated = 0;
            while (i-- > l) {
                double f = s * off[i], b = c * off[i];
                r = norm2(f, g, z != NULL);
                off[i + 1] = r;
                if (r == 0) { /* an exact split: deflate and start again */
                    diag[i + 1] -= p;
                    off[m] = 0;
                    deflated = 1;
                    break;
                }
                s = f / r;
                c = g / r;
                g = diag[i + 1] - p;
                r = (diag[i] - g) * s + 2.0 * c * b;
                p = s * r;
                diag[i + 1] = g + p;
                g = c * r - b;
                if (z) turn_rows(d, z, i, c, s);
            }
            if (deflated) continue;
            diag[l] -= p;
            off[l] = g;
            off[m] = 0;
        }
    }
    return 0;
}

tq_status tq_sym_eigen(tq_ctx *ctx, uint32_t d, const double *a, double *eigval, double *eigvec)
{
    TQ_NEED_CTX(ctx);
    if (!d || d > 4096)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "eigen-decomposition of %u x %u", d, d);
    for (size_t i = 0; i < (size_t)d * d; i++)
        if (!isfinite(a[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a matrix entry that is not finite");
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j < i; j++)
            if (a[(size_t)i * d + j] != a[(size_t)j * d + i])
                return tq_ctx_set_error(ctx, TQ_ERR_ARG, "the matrix is not symmetric at (%u, %u)",
                                        i, j);
    double *m = malloc((size_t)d * d * sizeof *m); /* [d][d]: a, reduced in place */
    double *off = malloc(d * sizeof *off);
    if (!m || !off) {
        free(m);
        free(off);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    memcpy(m, a, (size_t)d * d * sizeof *m);
    tq_status st = tridiagonalize(d, m, eigval, off, eigvec);
    if (!st && tridiagonal_ql(d, eigval, off, eigvec))
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "an eigenvalue did not converge");
    else if (st)
        st = tq_ctx_set_error(ctx, st, "out of memory");
    free(m);
    free(off);
    if (st) return st;
    /* descending, by selection: equal values keep their order (deterministic) */
    for (uint32_t i = 0; i + 1 < d; i++) {
        uint32_t best = i;
        for (uint32_t j = i + 1; j < d; j++)
            if (eigval[j] > eigval[best]) best = j;
        if (best == i) continue;
        double t = eigval[i];
        eigval[i] = eigval[best];
        eigval[best] = t;
        for (uint32_t k = 0; eigvec && k < d; k++) {
            double x = eigvec[(size_t)i * d + k];
            eigvec[(size_t)i * d + k] = eigvec[(size_t)best * d + k];
            eigvec[(size_t)best * d + k] = x;
        }
    }
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
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "water-filling %u components at %g bits", n,
                       bits_per_value);
    double top = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!(var[i] >= 0) || !isfinite(var[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "variance %u is %g", i, var[i]);
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
