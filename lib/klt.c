/* klt.c - transform coding of vectors (tq.h, "transform coding"): the
 * projection on a basis and back, the quantizer step that meets a rate,
 * and the covariance the basis comes from.  Snapshots use it for K and V
 * rows (formats/tqkv/TQKV.md, "Transform coding"). */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tq_klt_matmul_avx2(const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                        const float *m, size_t nc, int lower, float *out, size_t os);
int tq_klt_have_avx2(void);
/* klt_avx2.c: the first multiple of 8 of round_index's values; the rest is the caller's */
size_t tq_klt_round_avx2(const float *y, size_t n, float inv, int32_t bias, int32_t *q);
size_t tq_klt_round16_avx2(const float *y, size_t n, float inv, int16_t *q);
void tq_klt_columns8_avx2(const float *x, size_t stride, uint32_t d, float *panel, size_t w);

/* m[kd][nc] (row-major, nc % 8 == 0) into panels of 16 columns (the last
 * of 8 where nc % 16 == 8): columns [c0, c0 + w) as kd x w floats at
 * dst + kd * c0, what the products read front to back. */
static void pack_panels(const float *m, size_t kd, size_t nc, float *dst)
{
    for (size_t c0 = 0; c0 < nc; c0 += 16) {
        size_t w = nc - c0 >= 16 ? 16 : 8;
        for (size_t k = 0; k < kd; k++) memcpy(dst + kd * c0 + k * w, m + k * nc + c0, w * 4);
    }
}

/* The products' right-hand sides from basis[m][d]: its transpose [d][mp]
 * (coefficients from rows) or itself [mp][d] (rows from coefficients),
 * zero-padded to mp = m rounded up to 8, in panels; NULL when out of
 * memory. */
static float *basis_panels(const float *basis, uint32_t m, uint32_t d, uint32_t mp, int transpose)
{
    float *rm = calloc((size_t)d * mp, sizeof *rm); /* row-major first */
    float *p = malloc((size_t)d * mp * sizeof *p);
    if (!rm || !p) {
        free(rm);
        free(p);
        return NULL;
    }
    for (uint32_t c = 0; c < m; c++)
        for (uint32_t j = 0; j < d; j++) {
            float v = basis[(size_t)c * d + j];
            if (transpose)
                rm[(size_t)j * mp + c] = v;
            else
                rm[(size_t)c * d + j] = v;
        }
    if (transpose)
        pack_panels(rm, d, mp, p);
    else
        pack_panels(rm, mp, d, p);
    free(rm);
    return p;
}

/* out[n][nc] = a[n][kd] . m (packed), nc % 8 == 0, a[r][k] at a[r * rs + k * ks]: each
 * output a chain of fused multiply-adds over k ascending, as the AVX2 version computes it,
 * so that every SIMD level writes the same bytes; lower: only out[r][c] with c <= r is needed
 * (others may be left); out's rows os floats apart. */
static void matmul_scalar(const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                          const float *m, size_t nc, int lower, float *out, size_t os)
{
    for (size_t r = 0; r < n; r++)
        for (size_t c0 = 0; c0 < nc && (!lower || c0 <= r); c0 += 16) {
            size_t w = nc - c0 >= 16 ? 16 : 8;
            const float *p = m + kd * c0;
            float *o = out + r * os + c0;
            memset(o, 0, w * sizeof *o);
            for (size_t k = 0; k < kd; k++) {
                float x = a[r * rs + k * ks];
                for (size_t c = 0; c < w; c++) o[c] = fmaf(x, p[k * w + c], o[c]);
            }
        }
}

/* Asked of the CPU once: the products and roundings ask at every tile (1: yes, 0: no). */
static int cpu_has_fma(void)
{
    static int known = -1; /* racing threads store the same answer */
#if defined(__x86_64__) || defined(__i386__)
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("fma") != 0;
    }
#else
    known = 0;
#endif
    return known;
}

/* Whether the AVX2 kernels may run. */
static int use_avx2(const tq_ctx *ctx)
{
    return ctx->simd != TQ_SIMD_SCALAR && tq_klt_have_avx2() && cpu_has_fma();
}

static void matmul_part(const tq_ctx *ctx, const float *a, size_t rs, size_t ks, size_t n,
                        size_t kd, const float *m, size_t nc, int lower, float *out, size_t os)
{
    if (use_avx2(ctx))
        tq_klt_matmul_avx2(a, rs, ks, n, kd, m, nc, lower, out, os);
    else
        matmul_scalar(a, rs, ks, n, kd, m, nc, lower, out, os);
}

static void matmul(const tq_ctx *ctx, const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                   const float *m, size_t nc, float *out)
{
    matmul_part(ctx, a, rs, ks, n, kd, m, nc, 0, out, nc);
}

static uint32_t pad8(uint32_t m) { return (m + 7) / 8 * 8; }

/* v clamped to +-32767 (NaN to -32767) and rounded to nearest even: adding
 * and taking away 1.5 * 2^23 leaves the integer part (exact below 2^22;
 * no library call in the inner loops) */
static inline float round_index(float v)
{
    v = v > -32767.0f ? v : -32767.0f; /* a max and a min the loops vectorize */
    v = v < 32767.0f ? v : 32767.0f;
    const float magic = 12582912.0f; /* IEEE order: without -ffast-math never folded away */
    return (v + magic) - magic;
}

/* q[n] = round_index(y[n] * inv) + bias, the same on every SIMD level. */
static void round_all(int avx2, const float *y, size_t n, float inv, int32_t bias, int32_t *q)
{
    size_t i = avx2 ? tq_klt_round_avx2(y, n, inv, bias, q) : 0;
    for (; i < n; i++) q[i] = (int32_t)round_index(y[i] * inv) + bias;
}

static void round_all16(int avx2, const float *y, size_t n, float inv, int16_t *q)
{
    size_t i = avx2 ? tq_klt_round16_avx2(y, n, inv, q) : 0;
    for (; i < n; i++) q[i] = (int16_t)round_index(y[i] * inv);
}

static tq_status check_klt(tq_ctx *ctx, const tq_klt *k)
{
    if (!k->d || k->d % 8 || k->d > 4096 || k->m > k->d)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG, "a transform of %u components for vectors of %u values", k->m, k->d);
    if (!(k->step > 0) || !isfinite(k->step))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "quantizer step %g (finite and > 0 needed)",
                                (double)k->step);
    for (size_t i = 0; i < (size_t)k->m * k->d; i++)
        if (!isfinite(k->basis[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a basis value that is not finite (%zu)", i);
    return TQ_OK;
}

/* rows per product: the tile's rows and coefficients stay in L2, and the
 * AVX2 product takes rows six at a time */
enum { TILE = 60 };
/* rows per product where the encoder takes them as its columns (a multiple of 16: whole
 * panels) */
enum { ENC_TILE = 64 };

tq_status tq_klt_encode(tq_ctx *ctx, const tq_klt *k, const float *x, size_t n, size_t stride,
                        int16_t *idx)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_klt(ctx, k);
    if (st) return st;
    if (!k->m || !n) return TQ_OK;
    uint32_t d = k->d;
    float *xp = calloc((size_t)d * ENC_TILE, sizeof *xp);  /* [d][ENC_TILE]: rows as columns */
    float *yt = malloc((size_t)k->m * ENC_TILE * sizeof *yt); /* [m][ENC_TILE]: coefficients */
    if (!xp || !yt) {
        free(xp);
        free(yt);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    float inv = 1.0f / k->step;
    int avx2 = use_avx2(ctx);
    /* the coefficients component-major, as the indices go out, from the basis's rows against
       the rows as columns (each product's chain as in rows against the basis: fma is
       symmetric); read row-major and quantized by columns, the rows' coefficients were a
       quarter of the encoder's CPU */
    for (size_t r0 = 0; r0 < n; r0 += ENC_TILE) {
        size_t nr = n - r0 < ENC_TILE ? n - r0 : ENC_TILE, np = (nr + 7) / 8 * 8;
        for (size_t c0 = 0; c0 < np; c0 += 16) { /* panels of 16 rows (the last of 8) */
            size_t w = np - c0 >= 16 ? 16 : 8;
            float *panel = xp + (size_t)d * c0;
            for (size_t h = 0; h < w; h += 8) { /* eight rows at a time */
                if (avx2 && d % 8 == 0 && c0 + h + 8 <= nr) {
                    tq_klt_columns8_avx2(x + (r0 + c0 + h) * stride, stride, d, panel + h, w);
                    continue;
                }
                for (size_t r = c0 + h; r < c0 + h + 8; r++)
                    for (uint32_t j = 0; j < d; j++)
                        panel[j * w + r - c0] = r < nr ? x[(r0 + r) * stride + j] : 0.0f;
            }
        }
        matmul(ctx, k->basis, d, 1, k->m, d, xp, np, yt);
        for (uint32_t c = 0; c < k->m; c++)
            round_all16(avx2, yt + c * np, nr, inv, idx + (size_t)c * n + r0);
    }
    free(xp);
    free(yt);
    return TQ_OK;
}

tq_status tq_klt_decode(tq_ctx *ctx, const tq_klt *k, const int16_t *idx, size_t n, float *x,
                        size_t stride)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_klt(ctx, k);
    if (st) return st;
    uint32_t d = k->d, mp = pad8(k->m ? k->m : 1);
    if (!k->m) {
        for (size_t r = 0; r < n; r++) memset(x + r * stride, 0, d * sizeof *x);
        return TQ_OK;
    }
    float *ct = calloc((size_t)mp * TILE, sizeof *ct);   /* [mp][TILE]: coefficients, padded */
    float *bp = basis_panels(k->basis, k->m, d, mp, 0); /* [mp][d] in panels */
    if (!ct || !bp) {
        free(ct);
        free(bp);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
        size_t nr = n - r0 < TILE ? n - r0 : TILE;
        /* component-major as the indices come, so that this loop vectorizes: the product reads
           it strided (filled row-major, a scatter, it was a fifth of the decode's CPU) */
        for (uint32_t c = 0; c < k->m; c++)
            for (size_t r = 0; r < nr; r++)
                ct[c * TILE + r] = (float)idx[(size_t)c * n + r0 + r] * k->step;
        /* the rows straight into x: through a tile, their copy was 5% of the decode */
        matmul_part(ctx, ct, 1, TILE, nr, mp, bp, d, 0, x + r0 * stride, stride);
    }
    free(ct);
    free(bp);
    return TQ_OK;
}

tq_status tq_klt_project(tq_ctx *ctx, const float *basis, uint32_t m, uint32_t d, const float *x,
                         size_t n, size_t stride, float *y)
{
    TQ_NEED_CTX(ctx);
    if (!d || d % 8 || m > d || m % 8)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "projecting on %u of %u components", m, d);
    float *bt = basis_panels(basis, m, d, m, 1);       /* [d][m] in panels */
    float *xt = malloc((size_t)TILE * d * sizeof *xt); /* [TILE][d] */
    if (!bt || !xt) {
        free(bt);
        free(xt);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
        size_t nr = n - r0 < TILE ? n - r0 : TILE;
        for (size_t r = 0; r < nr; r++) memcpy(xt + r * d, x + (r0 + r) * stride, d * sizeof *xt);
        matmul(ctx, xt, d, 1, nr, d, bt, m, y + r0 * m);
    }
    free(bt);
    free(xt);
    return TQ_OK;
}

tq_status tq_covariance(tq_ctx *ctx, const float *x, size_t n, uint32_t d, size_t stride,
                        double *cov)
{
    TQ_NEED_CTX(ctx);
    if (!n || !d || d % 8) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "covariance of %zu x %u", n, d);
    float *xr = malloc((size_t)n * d * sizeof *xr); /* [n][d]: the rows, contiguous */
    float *xp = malloc((size_t)n * d * sizeof *xp); /* xr in panels */
    float *c = malloc((size_t)d * d * sizeof *c);   /* [d][d] */
    if (!xr || !xp || !c) {
        free(xr);
        free(xp);
        free(c);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r = 0; r < n; r++) memcpy(xr + r * d, x + r * stride, d * sizeof *xr);
    pack_panels(xr, n, d, xp);
    /* x^T x, x's columns read as the product's rows: its lower triangle (the half it needs) */
    matmul_part(ctx, xr, 1, d, d, n, xp, d, 1, c, d);
    free(xp);
    /* symmetric to the bit: the product's two triangles sum in one order */
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j <= i; j++) {
            double v = (double)c[(size_t)i * d + j] / (double)n;
            cov[(size_t)i * d + j] = v;
            cov[(size_t)j * d + i] = v;
        }
    free(xr);
    free(c);
    return TQ_OK;
}

/* ------------------------------------------------------------ the step for a rate */

/* Counters for a span of indices this short: four sets, each row's index counted in the
 * set of its row mod 4, so that a run of one index (a fine component's 0s) does not wait on
 * its own counter's last store (one set: the rate search's histograms were a fifth of a
 * plan's CPU) */
enum { SPAN_SHORT = 1024 };

/* Entropy in bits of round(y / step) over n samples of one component (y[n]: a column; q:
 * n scratch indices), with the Miller-Madow correction (the plain estimate from a sample is
 * low by about (bins - 1) / (2 n ln 2)); bins: 65535 counters, zero on entry and on return;
 * four: 4 * SPAN_SHORT counters; var: the component's variance. */
static double index_entropy(int avx2, const float *y, size_t n, float inv, double var,
                            uint32_t *bins, uint32_t *four, int32_t *q)
{
    int32_t lo = 65534, hi = 0;
    round_all(avx2, y, n, inv, 32767, q);
    for (size_t r = 0; r < n; r++) { /* vectorized */
        lo = q[r] < lo ? q[r] : lo;
        hi = q[r] > hi ? q[r] : hi;
    }
    int32_t span = hi - lo + 1;
    int in_order = (size_t)(hi - lo) < n; /* the bins in order over their span: the usual case */
    uint32_t *count = bins + lo;          /* [span] where in_order */
    if (in_order && span <= SPAN_SHORT) {
        memset(four, 0, 4 * (size_t)span * sizeof *four);
        uint32_t *c0 = four - lo, *c1 = c0 + span, *c2 = c1 + span, *c3 = c2 + span;
        size_t r = 0;
        for (; r + 4 <= n; r += 4) {
            c0[q[r]]++;
            c1[q[r + 1]]++;
            c2[q[r + 2]]++;
            c3[q[r + 3]]++;
        }
        for (; r < n; r++) c0[q[r]]++;
        for (int32_t k = 0; k < span; k++)
            four[k] += four[span + k] + four[2 * span + k] + four[3 * span + k];
        count = four;
    } else {
        for (size_t r = 0; r < n; r++) bins[q[r]]++;
    }
    double h = 0;
    size_t used = 0;
    for (int32_t k = 0; in_order && k < span; k++) {
        if (!count[k]) continue;
        double p = (double)count[k] / (double)n;
        h -= p * log2(p);
        used++;
        count[k] = 0;
    }
    for (size_t r = 0; !in_order && r < n; r++) { /* else row by row */
        uint32_t *b = &bins[q[r]];
        if (*b) {
            double p = (double)*b / (double)n;
            h -= p * log2(p);
            used++;
            *b = 0;
        }
    }
    h += (double)(used - 1) / (2.0 * (double)n * log(2.0));
    /* a sample of n cannot show more than log2(n) bits: where the indices
     * spread over many of its rows, the step is fine against the spread
     * and a Gaussian's entropy at that step is the estimate (an upper
     * bound for a given variance) */
    double gauss = 0.5 * log2(2.0 * M_PI * M_E * var * (double)inv * (double)inv);
    if (used * 4 > n && gauss > h) h = gauss;
    return h;
}

/* How near under the rate (a share of its bits) the step search may stop. */
#define RATE_TOL 0.0005

/* The bits per vector of y's d components at a step of 2^log_step. */
static double total_bits(int avx2, const float *y, size_t n, uint32_t d, double log_step,
                         const double *var, uint32_t *bins, int32_t *q, double *h)
{
    float inv = 1.0f / (float)exp2(log_step);
    double total = 0;
    uint32_t *four = bins + 65535; /* [4][SPAN_SHORT] */
    for (uint32_t c = 0; c < d; c++) {
        h[c] = index_entropy(avx2, y + c * n, n, inv, var[c], bins, four, q);
        total += h[c];
    }
    return total;
}

/* Where a Gaussian of each component's variance would spend `want` bits
 * per vector at high rate (0.5 log2(2 pi e var / step^2) where positive):
 * the bisection's starting point, log2 of the step. */
static double gaussian_log_step(const double *var, uint32_t d, double want)
{
    double lo = -60, hi = 60;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi), bits = 0;
        for (uint32_t c = 0; c < d; c++) {
            double b = 0.5 * log2(2.0 * M_PI * M_E * var[c]) - mid;
            if (b > 0) bits += b;
        }
        if (bits > want)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* What the step search evaluates: the columns y[d][n], their variances, the scratch. */
typedef struct rate_search {
    int avx2;
    const float *y; /* [d][n] */
    size_t n;
    uint32_t d;
    const double *var; /* [d] */
    uint32_t *bins;
    int32_t *q;
    double want; /* bits per vector */
} rate_search;

/* The bits per vector at a step of 2^log_step less the rate, each component's into h. */
static double bits_over(const rate_search *s, double log_step, double *h)
{
    return total_bits(s->avx2, s->y, s->n, s->d, log_step, s->var, s->bins, s->q, h) - s->want;
}

/* log2 of the step.  Bits fall as the step grows: a bracket of log2(step) from the Gaussian
 * estimate, widened until it holds the rate, then regula falsi (Illinois: a side kept twice
 * halves the other's value) until the step's bits are within RATE_TOL of the rate or the
 * bracket is 2^-10 wide (the step to 0.07% of itself); h_hi: each component's bits there. */
static double search_step(const rate_search *s, double *h, double *h_hi)
{
    double guess = gaussian_log_step(s->var, s->d, s->want);
    double lo = guess - 0.25, hi = guess + 0.25;
    double f_lo = bits_over(s, lo, h);
    for (double w = 0.5; f_lo <= 0 && lo > -126; w *= 2) {
        hi = lo;
        lo -= w;
        f_lo = bits_over(s, lo, h);
    }
    double f_hi = bits_over(s, hi, h_hi);
    for (double w = 0.5; f_hi > 0 && hi < 126; w *= 2) {
        lo = hi;
        f_lo = f_hi;
        hi += w;
        f_hi = bits_over(s, hi, h_hi);
    }
    int kept = 0; /* the side moved last: -1 lo, +1 hi */
    for (int it = 0; it < 40 && hi - lo > 1.0 / 1024 && f_hi < -RATE_TOL * s->want; it++) {
        double x = hi - f_hi * (hi - lo) / (f_hi - f_lo);
        double edge = (hi - lo) / 64; /* never at an end: the bracket always shrinks */
        if (!(x > lo + edge)) x = lo + edge;
        if (x > hi - edge) x = hi - edge;
        double f = bits_over(s, x, h);
        if (f > 0) {
            lo = x;
            f_lo = f;
            if (kept < 0) f_hi /= 2;
            kept = -1;
            continue;
        }
        hi = x;
        f_hi = f;
        memcpy(h_hi, h, s->d * sizeof *h);
        if (kept > 0) f_lo /= 2;
        kept = 1;
    }
    return hi;
}

tq_status tq_klt_rate_step(tq_ctx *ctx, const float *y, size_t n, uint32_t d, double bits,
                           double min_bits, float *step, uint32_t *m, double *rate)
{
    TQ_NEED_CTX(ctx);
    if (!n || !d || !(bits > 0) || bits > 16 || !(min_bits >= 0))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a step for %g bits over %zu x %u coefficients",
                                bits, n, d);
    for (size_t i = 0; i < n * d; i++)
        if (!isfinite(y[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a coefficient that is not finite");
    uint32_t *bins = calloc(65535 + 4 * SPAN_SHORT, sizeof *bins); /* and index_entropy's four */
    double *h = malloc(2 * d * sizeof *h); /* [2][d]: each component's bits at a step tried */
    double *h_hi = h + d;                  /* [d]: at the step kept */
    double *var = calloc(d, sizeof *var);  /* [d]: each component's variance */
    int32_t *q = malloc(n * sizeof *q);    /* [n]: one component's indices */
    float *yc = malloc(n * d * sizeof *yc); /* [d][n]: y by columns, read once a step tried */
    tq_status st = bins && h && var && q && yc ? TQ_OK : TQ_ERR_NOMEM;
    for (size_t r = 0; !st && r < n; r++)
        for (uint32_t c = 0; c < d; c++) var[c] += (double)y[r * d + c] * y[r * d + c];
    for (uint32_t c = 0; !st && c < d; c++)
        for (size_t r = 0; r < n; r++) yc[c * n + r] = y[r * d + c];
    for (uint32_t c = 0; !st && c < d; c++) var[c] /= (double)n;
    if (!st) {
        rate_search s = {use_avx2(ctx), yc, n, d, var, bins, q, bits * d};
        *step = (float)exp2(search_step(&s, h, h_hi));
        double total = 0;
        uint32_t keep = 0;
        for (uint32_t c = 0; c < d; c++) {
            total += h_hi[c];
            if (h_hi[c] >= min_bits) keep = c + 1; /* the components after the last that pays */
        }
        *m = keep;
        *rate = total / d;
    }
    free(bins);
    free(h);
    free(var);
    free(q);
    free(yc);
    return st ? tq_ctx_set_error(ctx, st, "out of memory") : TQ_OK;
}

uint32_t tq_klt_gauss_components(const double *var, uint32_t d, double bits, double min_bits)
{
    double step = gaussian_log_step(var, d, bits * d);
    uint32_t m = 0;
    for (uint32_t c = 0; c < d; c++)
        m += var[c] > 0 && 0.5 * log2(2.0 * M_PI * M_E * var[c]) - step >= min_bits;
    return m;
}

/* ------------------------------------------------------------ costs at an error */

/* Index entropy h (bits) and squared error per unit variance e of round(y / step) for a
 * Gaussian y of standard deviation s steps, reconstructed at index * step.  From 1 step on,
 * the high-rate laws (0.5 log2(2 pi e s^2), 1 / (12 s^2)) are off by terms of the order of
 * exp(-2 pi^2 s^2), under 1e-8: only finer components need their bins summed. */
static void gauss_uniform(double s, double *h, double *e)
{
    if (s <= 0) {
        *h = 0;
        *e = 1;
        return;
    }
    if (s >= 1) {
        *h = 0.5 * log2(2.0 * M_PI * M_E * s * s);
        *e = 1.0 / (12.0 * s * s);
        return;
    }
    /* bins k = -K..K of width 1/s in units of sd; past 9 sd nothing is left */
    int K = (int)ceil(9.0 * s) + 1;
    double hh = 0, ee = 0, a = (-K - 0.5) / s;
    double ca = 0.5 * (1 + erf(a / M_SQRT2)), pa = exp(-0.5 * a * a) / sqrt(2.0 * M_PI);
    for (int k = -K; k <= K; k++) {
        double b = (k + 0.5) / s, c = k / s;
        double cb = 0.5 * (1 + erf(b / M_SQRT2)), pb = exp(-0.5 * b * b) / sqrt(2.0 * M_PI);
        double p = cb - ca;
        /* the integral of (u - c)^2 phi(u) over [a, b] */
        ee += (1.0 + c * c) * p - (b * pb - a * pa) + 2.0 * c * (pb - pa);
        if (p > 0) hh -= p * log2(p);
        a = b;
        ca = cb;
        pa = pb;
    }
    *h = hh;
    *e = ee;
}

/* Total squared error and bits of d components at a step of 2^log_step; components below
 * min_bits are dropped (decoded as 0: their whole variance is the error). */
static void gauss_cost(const double *var, uint32_t d, double log_step, double min_bits,
                       double *err, double *bits, uint32_t *m)
{
    double step = exp2(log_step);
    *err = 0;
    *bits = 0;
    *m = 0;
    for (uint32_t c = 0; c < d; c++) {
        double h, e;
        gauss_uniform(var[c] > 0 ? sqrt(var[c]) / step : 0, &h, &e);
        if (h < min_bits) {
            *err += var[c];
            continue;
        }
        *err += e * var[c];
        *bits += h;
        *m += 1;
    }
}

double tq_klt_gauss_bits_at_error(const double *var, uint32_t d, double mse, double min_bits,
                                  uint32_t *m)
{
    double total = 0, top = 0;
    for (uint32_t c = 0; c < d; c++) {
        total += var[c] > 0 ? var[c] : 0;
        top = var[c] > top ? var[c] : top;
    }
    uint32_t kept = 0;
    if (m) *m = 0;
    if (!(mse >= 0) || top == 0 || mse * d >= total) return 0;
    /* the error grows with the step: bisect log2(step) between one that is far too fine and
       one past the largest component */
    double want = mse * d, hi = 0.5 * log2(top) + 4, lo = 0.5 * log2(want / d) - 4;
    double err, bits;
    for (int it = 0; it < 20; it++) { /* to 2^-16 of a 16-wide bracket: a screen's precision */
        double mid = 0.5 * (lo + hi);
        gauss_cost(var, d, mid, min_bits, &err, &bits, &kept);
        if (err > want)
            hi = mid;
        else
            lo = mid;
    }
    gauss_cost(var, d, lo, min_bits, &err, &bits, &kept);
    if (m) *m = kept;
    return bits / d;
}

tq_status tq_codec_gauss_cost(tq_ctx *ctx, uint32_t g, uint32_t bits, int uniform, double *mse,
                              double *index_bits)
{
    TQ_NEED_CTX(ctx);
    if (uniform && bits < 2)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "uniform cells at %u bits (2..8)", bits);
    tq_codebook cb;
    tq_status st = tq_codebook_get(ctx, TQ_CB_EXACT, g, uniform ? bits - 1 : bits, &cb);
    if (st) return st;
    *mse = cb.mse;
    if (uniform) { /* cells of one step with the Lloyd-Max distortion: the step from the law */
        double lo = -20, hi = 10, h = 0, e = 0;
        for (int it = 0; it < 60; it++) {
            double mid = 0.5 * (lo + hi);
            gauss_uniform(exp2(-mid), &h, &e);
            if (e > cb.mse)
                hi = mid;
            else
                lo = mid;
        }
        gauss_uniform(exp2(-lo), &h, &e);
        *index_bits = h;
        return TQ_OK;
    }
    /* a rotated group's coordinate is near N(0, 1/g): the cells' probabilities under it */
    double sd = 1.0 / sqrt((double)g), h = 0, below = 0;
    for (uint32_t k = 0; k < cb.size; k++) {
        double up = k + 1 < cb.size ? 0.5 * (1 + erf(cb.thresholds[k] / sd / M_SQRT2)) : 1.0;
        double p = up - below;
        if (p > 0) h -= p * log2(p);
        below = up;
    }
    *index_bits = h;
    return TQ_OK;
}
