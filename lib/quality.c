/* quality.c - what a codec costs a head (tq.h, "quality of decoded K/V"): the measures in
 * double precision, as their definitions say (no shortcuts: a unit test checks them against
 * a brute-force computation); tq bench reports them. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void softmax_scores(const float *q, const float *k, uint32_t n, uint32_t d, double *p)
{
    double mx = -INFINITY, s = 0, sc = 1 / sqrt((double)d);
    for (uint32_t i = 0; i < n; i++) {
        double a = 0;
        for (uint32_t j = 0; j < d; j++) a += (double)q[j] * k[(size_t)i * d + j];
        p[i] = a * sc;
        if (p[i] > mx) mx = p[i];
    }
    for (uint32_t i = 0; i < n; i++) s += p[i] = exp(p[i] - mx);
    for (uint32_t i = 0; i < n; i++) p[i] /= s;
}

/* |top-k(a) & top-k(b)| by selection on copies of the indices */
static int overlap(const double *a, const double *b, uint32_t n, int k, int *ia, int *ib)
{
    if ((uint32_t)k > n) k = (int)n;
    for (uint32_t i = 0; i < n; i++) ia[i] = ib[i] = (int)i;
    for (int r = 0; r < k; r++)
        for (uint32_t i = (uint32_t)r + 1; i < n; i++) {
            if (a[ia[i]] > a[ia[r]]) {
                int t = ia[i];
                ia[i] = ia[r];
                ia[r] = t;
            }
            if (b[ib[i]] > b[ib[r]]) {
                int t = ib[i];
                ib[i] = ib[r];
                ib[r] = t;
            }
        }
    int c = 0;
    for (int x = 0; x < k; x++)
        for (int y = 0; y < k; y++) c += ia[x] == ib[y];
    return c;
}

tq_status tq_attention_error(tq_ctx *ctx, const tq_attn_head *h, const float *kd,
                             const float *vd, int k, double tau, tq_attn_error *out)
{
    TQ_NEED_CTX(ctx);
    tq_status st = TQ_OK;
    uint32_t n = h->n, d = h->d;
    double *p = malloc(n * sizeof *p), *pd = malloc(n * sizeof *pd), *o = malloc(2 * d * sizeof *o);
    int *ia = malloc(n * sizeof *ia), *ib = malloc(n * sizeof *ib);
    memset(out, 0, sizeof *out);
    if (!p || !pd || !o || !ia || !ib) {
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t skipped = 0;
    for (uint32_t qi = 0; qi < h->m; qi++) {
        const float *q = h->q + (size_t)qi * d;
        softmax_scores(q, h->k, n, d, p);
        softmax_scores(q, kd, n, d, pd);
        double kl = 0;
        for (uint32_t i = 0; i < n; i++)
            if (p[i] > 0) kl += p[i] * (log(p[i]) - log(pd[i] > 1e-300 ? pd[i] : 1e-300));
        memset(o, 0, 2 * d * sizeof *o);
        for (uint32_t i = 0; i < n; i++) {
            int skip = tau > 0 && pd[i] < tau;
            skipped += skip;
            for (uint32_t j = 0; j < d; j++) {
                o[j] += p[i] * h->v[(size_t)i * d + j];
                if (!skip) o[d + j] += pd[i] * vd[(size_t)i * d + j];
            }
        }
        double ab = 0, aa = 0, bb = 0;
        for (uint32_t j = 0; j < d; j++) {
            ab += o[j] * o[d + j];
            aa += o[j] * o[j];
            bb += o[d + j] * o[d + j];
        }
        out->kl += kl > 0 ? kl : 0; /* rounding can leave a tiny negative sum */
        out->out_cos += aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb);
        out->topk += (double)overlap(p, pd, n, k, ia, ib) / (k < (int)n ? k : (int)n);
    }
    if (h->m) {
        out->kl /= h->m;
        out->out_cos /= h->m;
        out->topk /= h->m;
        out->skipped = (double)skipped / ((double)h->m * n);
    }
done:
    free(p);
    free(pd);
    free(o);
    free(ia);
    free(ib);
    return st;
}

void tq_recon_error(const float *x, const float *y, size_t n, uint32_t d, double *se, double *sx,
              double *max_err, double *cos_sum)
{
    for (size_t v = 0; v < n; v++) {
        double ab = 0, aa = 0, bb = 0;
        for (uint32_t j = 0; j < d; j++) {
            double a = x[v * d + j], b = y[v * d + j], e = fabs(a - b);
            *se += (a - b) * (a - b);
            *sx += a * a;
            if (e > *max_err) *max_err = e;
            ab += a * b;
            aa += a * a;
            bb += b * b;
        }
        *cos_sum += aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb);
    }
}

double tq_angle_kl(const float *y, size_t n_pairs, int bins)
{
    double *hst = calloc((size_t)bins, sizeof *hst), kl = 0;
    if (!hst || !n_pairs) {
        free(hst);
        return NAN;
    }
    for (size_t i = 0; i < n_pairs; i++) {
        double t = atan2((double)y[2 * i + 1], (double)y[2 * i]);
        int b = (int)((t + M_PI) / (2 * M_PI) * bins);
        if (b < 0) b = 0;
        if (b >= bins) b = bins - 1;
        hst[b]++;
    }
    for (int b = 0; b < bins; b++) {
        double p = hst[b] / (double)n_pairs;
        if (p > 0) kl += p * log(p * bins);
    }
    free(hst);
    return kl;
}
