/* innerq.c - InnerQ per-channel scaling around the KV codecs, and the
 * scales' derivation from calibration statistics. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>

/* x[n] times (or over) scales[dim] channel by channel; vectorized (-O3) and also built for
 * x86-64-v3, eight lanes at a time: a scalar division a value was 8% of Gemma 3's decode, and
 * the lanes' quotients are the same IEEE ones */
TQ_CLONES_V3 static void apply_scales(float *x, size_t n, const float *scales, uint32_t dim,
                                      int divide)
{
    if (divide)
        for (size_t i = 0; i < n; i += dim)
            for (uint32_t j = 0; j < dim; j++) x[i + j] /= scales[j];
    else
        for (size_t i = 0; i < n; i += dim)
            for (uint32_t j = 0; j < dim; j++) x[i + j] *= scales[j];
}

tq_status tq_innerq_apply(tq_ctx *ctx, float *x, size_t n, const float *scales, uint32_t dim,
                          int divide)
{
    TQ_NEED_CTX(ctx);
    if (!dim || n % dim)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%zu values are not whole groups of %u InnerQ channels", n, dim);
    apply_scales(x, n, scales, dim, divide);
    return TQ_OK;
}

/* the partner of channel j under the pairing, j itself if none */
static uint32_t partner(uint32_t j, uint32_t dim, tq_rope_pairs pairs, uint32_t rot)
{
    if (j >= rot) return j;
    if (pairs == TQ_PAIRS_ADJACENT) return j ^ 1u;
    if (pairs == TQ_PAIRS_HALVES) return j < rot / 2 ? j + rot / 2 : j - rot / 2;
    (void)dim;
    return j;
}

tq_status tq_innerq_scales(tq_ctx *ctx, tq_innerq_method method, const double *ek2,
                           const double *eq2, uint32_t dim, tq_rope_pairs pairs, uint32_t rot,
                           double strength, double lo, double hi, float *s)
{
    TQ_NEED_CTX(ctx);
    if (!dim || dim > 4096)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "InnerQ over %u channels", dim);
    if (!(strength > 0 && strength <= 4))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "InnerQ strength %g outside (0, 4]", strength);
    if (method == TQ_INNERQ_QK && !eq2)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "Q-aware scales need E[q^2]");
    if (!rot) rot = dim;
    if (rot > dim || (pairs != TQ_PAIRS_NONE && rot % 2))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "RoPE over %u of %u channels cannot be paired",
                                rot, dim);
    if (method == TQ_INNERQ_FORK) { /* float arithmetic, as the fork's finalize step */
        float mean = 0, *rms = malloc(dim * sizeof *rms);
        if (!rms) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        for (uint32_t j = 0; j < dim; j++) mean += rms[j] = sqrtf((float)ek2[j]);
        mean /= (float)dim;
        float rmax = 0, rmin = INFINITY;
        for (uint32_t j = 0; j < dim; j++) {
            float r = rms[j] > 1e-10f ? mean / rms[j] : 1.0f, v = powf(r, (float)strength);
            rmax = r > rmax ? r : rmax;
            rmin = r < rmin ? r : rmin;
            if (v < 0.5f) v = 0.5f;
            if (v > 2.0f) v = 2.0f;
            s[j] = v;
        }
        if (rmax < 1.2f &&
            rmin > 1.0f / 1.2f) /* the fork turns itself off: channels already even */
            for (uint32_t j = 0; j < dim; j++) s[j] = 1.0f;
        free(rms);
        return TQ_OK;
    }
    double logsum = 0;
    for (uint32_t j = 0; j < dim; j++) {
        uint32_t p = partner(j, dim, pairs, rot);
        double k = 0.5 * (ek2[j] + ek2[p]),
               q = method == TQ_INNERQ_QK ? 0.5 * (eq2[j] + eq2[p]) : 1.0;
        double v = k > 0 && q > 0 ? pow(q / k, strength / 2) : 1.0;
        if (lo > 0 && v < lo) v = lo;
        if (hi > 0 && v > hi) v = hi;
        s[j] = (float)v;
        logsum += log(v);
    }
    double g = exp(logsum / dim);
    for (uint32_t j = 0; j < dim; j++) s[j] = (float)(s[j] / g);
    return TQ_OK;
}
