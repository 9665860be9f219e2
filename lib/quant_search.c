/* quant_search.c - see quant_search.h.  The searches are ggml's (named in
 * each comment) restated; their float order is part of the format's
 * contract with llama.cpp, so expressions keep ggml's association. */
#include "quant_search.h"

#include <math.h>
#include <string.h>

/* ggml's GROUP_MAX_EPS: below it a group counts as all zeros. */
#define ALL_ZERO 1e-15f

int tq_qs_nearest(float v)
{
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi)
{
    if (v < lo) return lo;
    return v > hi ? hi : v;
}

/* make_qx_quants with rmse_type 1 */
float tq_qs_symmetric(int n, int nmax, const float *x, int8_t *L, const float *w)
{
    float peak = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            peak = x[i];
        }
    if (amax < ALL_ZERO) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / peak, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(tq_qs_nearest(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float wi = w ? w[i] : x[i] * x[i];
        sumlx += wi * x[i] * l;
        suml2 += wi * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (!k) continue;
        iscale = -(nmax + 0.1f * k) / peak;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(tq_qs_nearest(iscale * x[i]), -nmax, nmax - 1);
            float wi = w ? w[i] : x[i] * x[i];
            sumlx += wi * x[i] * l;
            suml2 += wi * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(tq_qs_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* make_qkx2_quants (strict_range) and make_qkx3_quants */
float tq_qs_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out,
                   float rmin, float rdelta, int nstep, int strict_range)
{
    float lo = x[0], hi = x[0];
    float sum_w = w ? w[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        float wi = w ? w[i] : x[i] * x[i];
        sum_w += wi;
        sum_x += wi * x[i];
    }
    if (lo > 0) lo = 0;
    if (strict_range ? hi == lo : hi <= lo) {
        memset(L, 0, (size_t)n);
        *min_out = -lo;
        return 0.f;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(tq_qs_nearest(iscale * (x[i] - lo)), 0, nmax);
        float d = scale * L[i] + lo - x[i];
        best += (w ? w[i] : x[i] * x[i]) * (d * d);
    }
    uint8_t trial[256];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(tq_qs_nearest(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            float wi = w ? w[i] : x[i] * x[i];
            sum_l += wi * l;
            sum_l2 += wi * l * l;
            sum_xl += wi * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float d = s * trial[i] + m - x[i];
            err += (w ? w[i] : x[i] * x[i]) * (d * d);
        }
        if (err < best) {
            memcpy(L, trial, (size_t)n);
            best = err;
            scale = s;
            lo = m;
        }
    }
    *min_out = -lo;
    return scale;
}

/* make_qp_quants */
float tq_qs_positive(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
    float peak = 0;
    for (int i = 0; i < n; i++) peak = peak > x[i] ? peak : x[i];
    if (peak < ALL_ZERO) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / peak;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)tq_qs_nearest(iscale * x[i]);
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        float d = x[i] - scale * L[i];
        best += w[i] * d * d;
    }
    for (int k = -4; k <= 4; k++) {
        if (!k) continue;
        float is = (0.1f * k + nmax) / peak, s = 1 / is, err = 0;
        for (int i = 0; i < n; i++) {
            int l = tq_qs_nearest(is * x[i]);
            if (l > nmax) l = nmax;
            float d = x[i] - s * l;
            err += w[i] * d * d;
        }
        if (err < best) {
            best = err;
            iscale = is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = tq_qs_nearest(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int round = 0; round < 5; round++) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int l = tq_qs_nearest(x[i] * sl2 / slx);
            if (l > nmax) l = nmax;
            if (l == L[i]) continue;
            slx += w[i] * x[i] * l;
            sl2 += w[i] * l * l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)l;
                sumlx = slx;
                suml2 = sl2;
                moved++;
            }
        }
        if (!moved) break;
    }
    return sumlx / suml2;
}
