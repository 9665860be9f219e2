/* codebook_exact.c - Lloyd-Max codebooks for the exact law of one coordinate
 * of a uniformly random unit vector in R^g: density proportional to
 * (1 - x^2)^((g - 3) / 2) on [-1, 1].  After a randomized Hadamard rotation a
 * normalized K/V group follows this law, so these are the MSE-optimal scalar
 * codebooks for it at every g (the N(0, 1/g) tables are only its limit).
 *
 * Solved once per (g, bits) on first use and cached for the process: Lloyd
 * iterations to get close, then Newton on the centroid conditions (their
 * Jacobian is tridiagonal), because plain Lloyd converges too slowly at 8 bits.
 * The CDF is tabulated with Simpson's rule; the first moment has a closed form.
 */
#include "tq_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define GRID (1 << 16)

typedef struct law {
    double a; /* exponent (g - 3) / 2 */
    double X; /* support used: [-X, X]; the mass outside is < 1e-80 */
    double h;
    double Z;  /* normalisation */
    double *F; /* unnormalised CDF at grid points, GRID + 1 entries */
} law;

static double dens(const law *L, double x)
{
    double u = 1.0 - x * x;
    if (u <= 0.0) return 0.0;
    return exp(L->a * log(u));
}

static int law_init(law *L, uint32_t g)
{
    L->a = ((double)g - 3.0) / 2.0;
    L->X = fmin(1.0, 20.0 / sqrt((double)g));
    L->h = 2.0 * L->X / GRID;
    L->F = malloc((GRID + 1) * sizeof(double));
    if (!L->F) return -1;
    L->F[0] = 0.0;
    double f0 = dens(L, -L->X);
    for (int i = 0; i < GRID; i++) {
        double x0 = -L->X + i * L->h, x1 = x0 + L->h;
        double f1 = dens(L, x1);
        L->F[i + 1] = L->F[i] + L->h / 6.0 * (f0 + 4.0 * dens(L, 0.5 * (x0 + x1)) + f1);
        f0 = f1;
    }
    L->Z = L->F[GRID];
    return 0;
}

/* normalised CDF */
static double cdf(const law *L, double x)
{
    if (x <= -L->X) return 0.0;
    if (x >= L->X) return 1.0;
    double p = (x + L->X) / L->h;
    int i = (int)p;
    if (i >= GRID) i = GRID - 1;
    double x0 = -L->X + i * L->h;
    double part = (x - x0) / 6.0 * (dens(L, x0) + 4.0 * dens(L, 0.5 * (x0 + x)) + dens(L, x));
    return (L->F[i] + part) / L->Z;
}

/* normalised first moment from -1 to x: -(1 - x^2)^(a+1) / (2(a+1)) / Z */
static double moment1(const law *L, double x)
{
    double u = 1.0 - x * x;
    if (u <= 0.0) return 0.0;
    return -exp((L->a + 1.0) * log(u)) / (2.0 * (L->a + 1.0)) / L->Z;
}

static double pdf(const law *L, double x) { return dens(L, x) / L->Z; }

static double cdf_inverse(const law *L, double p)
{
    double lo = -L->X, hi = L->X;
    for (int it = 0; it < 200 && hi - lo > 1e-16; it++) {
        double mid = 0.5 * (lo + hi);
        if (cdf(L, mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* A_k, B_k, residual R_k = c_k A_k - B_k for every cell; returns |R|^2. */
static double residuals(const law *L, int K, const double *c, double *A, double *B, double *R)
{
    double Fp = 0.0, Mp = 0.0, norm = 0.0;
    for (int k = 0; k < K; k++) {
        double Fk = 1.0, Mk = 0.0;
        if (k < K - 1) {
            double t = 0.5 * (c[k] + c[k + 1]);
            Fk = cdf(L, t);
            Mk = moment1(L, t);
        }
        A[k] = Fk - Fp;
        B[k] = Mk - Mp;
        R[k] = c[k] * A[k] - B[k];
        norm += R[k] * R[k];
        Fp = Fk;
        Mp = Mk;
    }
    return norm;
}

static int increasing(int K, const double *c)
{
    for (int k = 0; k + 1 < K; k++)
        if (!(c[k] < c[k + 1])) return 0;
    return 1;
}

/* One tabulated law per group, kept for the process: Lloyd-Max solves and
 * the uniform cells' step search evaluate it many times. */
static pthread_mutex_t law_lock = PTHREAD_MUTEX_INITIALIZER;
static law *laws[11];

static const law *law_of(uint32_t g)
{
    int lg = 0;
    while ((1u << lg) < g) lg++;
    pthread_mutex_lock(&law_lock);
    law *L = laws[lg];
    if (!L && (L = malloc(sizeof *L)) && law_init(L, g)) {
        free(L);
        L = NULL;
    }
    laws[lg] = L;
    pthread_mutex_unlock(&law_lock);
    return L;
}

double tq_lloyd_max_exact(uint32_t g, uint32_t bits, double *c)
{
    const law *L = law_of(g);
    int K = 1 << bits;
    if (!L) return -1.0;
    double *A = malloc(8 * sizeof(double) * (size_t)K);
    if (!A) return -1.0;
    double *B = A + K, *R = B + K, *lo = R + K, *di = lo + K, *up = di + K, *d = up + K,
           *tr = d + K;

    for (int k = 0; k < K; k++) c[k] = cdf_inverse(L, (k + 0.5) / K);
    for (int it = 0; it < 60; it++) { /* Lloyd: robust start for Newton */
        residuals(L, K, c, A, B, R);
        for (int k = 0; k < K; k++)
            if (A[k] > 0) c[k] = B[k] / A[k];
    }
    double rn = residuals(L, K, c, A, B, R);
    for (int it = 0; it < 100 && rn > 1e-34; it++) {
        for (int k = 0; k < K; k++) {
            double fr = 0.0, fl = 0.0, tr_ = 0.0, tl = 0.0;
            if (k < K - 1) {
                tr_ = 0.5 * (c[k] + c[k + 1]);
                fr = pdf(L, tr_);
            }
            if (k > 0) {
                tl = 0.5 * (c[k - 1] + c[k]);
                fl = pdf(L, tl);
            }
            up[k] = k < K - 1 ? 0.5 * (c[k] - tr_) * fr : 0.0;
            lo[k] = k > 0 ? 0.5 * (tl - c[k]) * fl : 0.0;
            di[k] = A[k] + up[k] + lo[k];
            d[k] = -R[k];
        }
        /* Thomas algorithm */
        for (int k = 1; k < K; k++) {
            double m = lo[k] / di[k - 1];
            di[k] -= m * up[k - 1];
            d[k] -= m * d[k - 1];
        }
        d[K - 1] /= di[K - 1];
        for (int k = K - 2; k >= 0; k--) d[k] = (d[k] - up[k] * d[k + 1]) / di[k];
        double lam = 1.0, nn = rn;
        for (int tries = 0; tries < 30; tries++, lam *= 0.5) {
            for (int k = 0; k < K; k++) tr[k] = c[k] + lam * d[k];
            if (!increasing(K, tr)) continue;
            nn = residuals(L, K, tr, A, B, R);
            if (nn < rn) break;
        }
        if (!(nn < rn)) break;
        for (int k = 0; k < K; k++) c[k] = tr[k];
        rn = nn;
    }
    for (int k = 0; k < K / 2; k++) { /* the law is symmetric; so is the answer */
        double m = 0.5 * (c[K - 1 - k] - c[k]);
        c[k] = -m;
        c[K - 1 - k] = m;
    }
    residuals(L, K, c, A, B, R);
    double s = 0.0;
    for (int k = 0; k < K; k++) s += 2.0 * c[k] * B[k] - c[k] * c[k] * A[k];
    double mse = 1.0 - (double)g * s;
    free(A);
    return mse;
}

int tq_law_cells(uint32_t g, int K, const double *t, double *mass, double *mom)
{
    const law *L = law_of(g);
    if (!L) return -1;
    double Fp = 0.0, Mp = 0.0;
    for (int k = 0; k < K; k++) {
        double Fk = k < K - 1 ? cdf(L, t[k]) : 1.0, Mk = k < K - 1 ? moment1(L, t[k]) : 0.0;
        mass[k] = Fk - Fp;
        mom[k] = Mk - Mp;
        Fp = Fk;
        Mp = Mk;
    }
    return 0;
}

typedef struct exact_book {
    tq_codebook cb;
    float c[256];
    float t[255];
} exact_book;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static exact_book *cache[2][11][9]; /* [uniform][log2 g][bits] */

/* Lloyd-Max (thresholds the centroids' midpoints) or uniform cells
 * (codebook_uniform.c), solved once per process. */
static const tq_codebook *cached(uint32_t g, uint32_t bits, int uniform)
{
    int lg = 0;
    while ((1u << lg) < g) lg++;
    pthread_mutex_lock(&cache_lock);
    exact_book *e = cache[uniform][lg][bits];
    if (!e) {
        double c[256], t[255];
        uint32_t K = 1u << bits;
        e = calloc(1, sizeof *e);
        double mse = -1.0; /* -1: out of memory */
        if (e && uniform)
            mse = tq_uniform_exact(g, bits, c, t);
        else if (e)
            mse = tq_lloyd_max_exact(g, bits, c);
        for (uint32_t k = 0; !uniform && k + 1 < K; k++) t[k] = 0.5 * (c[k] + c[k + 1]);
        if (mse < 0) {
            free(e);
            e = NULL;
        } else {
            for (uint32_t k = 0; k < K; k++) e->c[k] = (float)c[k];
            for (uint32_t k = 0; k + 1 < K; k++) e->t[k] = (float)t[k];
            e->cb = (tq_codebook){bits, K, e->c, e->t, mse};
            cache[uniform][lg][bits] = e;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return e ? &e->cb : NULL;
}

const tq_codebook *tq_codebook_exact(uint32_t g, uint32_t bits) { return cached(g, bits, 0); }
const tq_codebook *tq_codebook_uniform(uint32_t g, uint32_t bits) { return cached(g, bits, 1); }
