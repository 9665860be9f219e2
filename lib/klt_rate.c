/* klt_rate.c - transform coding's rate model (tq.h, "transform coding"): the quantizer step
 * that meets a rate, measured on the indices' entropy, and the Gaussian costs at an error the
 * plan compares codecs with.  The projections themselves are klt.c's. */
#include "klt_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    tq_klt_round_all(avx2, y, n, inv, 32767, q);
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
        rate_search s = {tq_klt_use_avx2(ctx), yc, n, d, var, bins, q, bits * d};
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
