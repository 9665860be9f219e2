/* kquants_encode.c - ggml's q4_K, q5_K and q6_K encoders, byte for byte:
 * the reference quantizers (quantize_row_q*_K_ref, what llama-quantize
 * runs without an imatrix) and the importance-weighted ones
 * (quantize_row_q*_K_impl, with an imatrix).  Layouts in lib/kquants.c.
 *
 * q4_K / q5_K: eight sub-blocks of 32, each x ~ d_j * q - m_j with 4 (5)
 * bit q; d_j and m_j are themselves 6-bit multiples of the superblock's
 * fp16 d and dmin.  q6_K: sixteen sub-blocks of 16, symmetric 6-bit q,
 * int8 sub-scales of one fp16 d. */
#include "quant_search.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static int clamp_int(int v, int lo, int hi)
{
    if (v < lo) return lo;
    return v > hi ? hi : v;
}

/* The 12 scale bytes of q4_K/q5_K from eight 6-bit (scale, min) pairs. */
static void pack_scales(uint8_t *p, const uint8_t *ls, const uint8_t *lm)
{
    for (int j = 0; j < 4; j++) {
        p[j] = ls[j];
        p[j + 4] = lm[j];
    }
    for (int j = 4; j < 8; j++) {
        p[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
        p[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        p[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

static void unpack_scale(const uint8_t *p, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = p[j] & 63;
        *mn = p[j + 4] & 63;
    } else {
        *sc = (p[j + 4] & 0xF) | ((p[j - 4] >> 6) << 4);
        *mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
    }
}

/* ggml's reference 6-bit sub-block scales and minimums (no importance): each against the
 * largest, *d and *dmin their steps. */
static void scales_6bit(const float *scales, const float *mins, uint8_t *ls, uint8_t *lm,
                        float *d, float *dmin)
{
    float ms = 0, mm = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > ms) ms = scales[j];
        if (mins[j] > mm) mm = mins[j];
    }
    float is = ms > 0 ? 63.f / ms : 0.f, im = mm > 0 ? 63.f / mm : 0.f;
    for (int j = 0; j < 8; j++) {
        uint8_t a = (uint8_t)tq_qs_nearest(is * scales[j]),
                b = (uint8_t)tq_qs_nearest(im * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = b < 63 ? b : 63;
    }
    *d = ms / 63.f;
    *dmin = mm / 63.f;
}

/* The 256 levels L into Q4_K's nibbles (nmax 15) or Q5_K's nibbles and high bits. */
static void pack_levels(const uint8_t *L, int nmax, uint8_t *out)
{
    if (nmax == 15) {
        uint8_t *q = out + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                q[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + l + 32] << 4);
        return;
    }
    uint8_t *qh = out + 16, *q = out + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int a = L[64 * c + l], b = L[64 * c + l + 32];
            if (a > 15) {
                a -= 16;
                qh[l] |= (uint8_t)(1u << (2 * c));
            }
            if (b > 15) {
                b -= 16;
                qh[l] |= (uint8_t)(2u << (2 * c));
            }
            q[32 * c + l] = (uint8_t)(a | b << 4);
        }
}

/* One q4_K (nmax 15) or q5_K (nmax 31) superblock.  qw: the importances of
 * these 256 columns, or NULL for the reference encoder. */
static void q45_block(const float *x, uint8_t *out, int nmax, const float *qw)
{
    uint8_t L[256], ls[8], lm[8];
    float w[32], scales[8], mins[8], sw[8];
    float sum_x2 = 0;
    if (qw)
        for (int l = 0; l < 256; l++) sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / 256;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        if (!qw) { /* reference: each sub-block weighted by its own RMS */
            float s2 = 0;
            for (int l = 0; l < 32; l++) s2 += xj[l] * xj[l];
            float av = sqrtf(s2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av + fabsf(xj[l]);
            scales[j] = nmax == 15
                            ? tq_qs_affine(32, 15, xj, w, L + 32 * j, &mins[j], -1.f, 0.1f, 20, 1)
                            : tq_qs_affine(32, 31, xj, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            continue;
        }
        for (int l = 0; l < 32; l++) w[l] = qw[32 * j + l] * sqrtf(sigma2 + xj[l] * xj[l]);
        float s = 0;
        for (int l = 0; l < 32; l++) s += w[l];
        sw[j] = s;
        scales[j] = tq_qs_affine(32, nmax, xj, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36, 0);
    }
    float d, dmin;
    if (qw) {
        d = tq_qs_positive(8, 63, scales, ls, sw);
        dmin = tq_qs_positive(8, 63, mins, lm, sw);
    } else {
        scales_6bit(scales, mins, ls, lm, &d, &dmin);
    }
    uint8_t *sc = out + 4;
    memset(sc, 0, 12);
    pack_scales(sc, ls, lm);
    tq_put_h(out, d);
    tq_put_h(out + 2, dmin);
    /* re-pick every level against the scales as stored */
    for (int j = 0; j < 8; j++) {
        int a, b;
        unpack_scale(sc, j, &a, &b);
        float dj = tq_get_h(out) * a;
        if (!dj) continue; /* keeps the search's levels, as ggml does */
        float mj = tq_get_h(out + 2) * b;
        for (int l = 0; l < 32; l++) {
            int q = tq_qs_nearest((x[32 * j + l] + mj) / dj);
            L[32 * j + l] = (uint8_t)clamp_int(q, 0, nmax);
        }
    }
    pack_levels(L, nmax, out);
}

static void q6_block(const float *x, uint8_t *out, const float *qw)
{
    int8_t L[256];
    float scales[16], peak = 0, apeak = 0;
    for (int b = 0; b < 16; b++) {
        scales[b] = tq_qs_symmetric(16, 32, x + 16 * b, L + 16 * b, qw ? qw + 16 * b : NULL);
        if (fabsf(scales[b]) > apeak) {
            apeak = fabsf(scales[b]);
            peak = scales[b];
        }
    }
    if (apeak < 1e-15f) {
        memset(out, 0, 210);
        return;
    }
    float is = -128.f / peak;
    tq_put_h(out + 208, 1 / is);
    int8_t *sc = (int8_t *)(out + 192);
    for (int b = 0; b < 16; b++) {
        int v = tq_qs_nearest(is * scales[b]);
        sc[b] = (int8_t)(v < 127 ? v : 127);
    }
    for (int b = 0; b < 16; b++) {
        float d = tq_get_h(out + 208) * sc[b];
        if (!d) continue;
        for (int l = 0; l < 16; l++) {
            int q = tq_qs_nearest(x[16 * b + l] / d);
            L[16 * b + l] = (int8_t)(clamp_int(q, -32, 31) + 32);
        }
    }
    uint8_t *ql = out, *qh = out + 128;
    for (int h = 0; h < 2; h++) {
        const int8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[64 * h + l] = (uint8_t)((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
            ql[64 * h + l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
            qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 |
                                       (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
        }
    }
}

int tq_kquant_quantize(tq_dtype t, const float *x, size_t nb, const float *qw, uint8_t *out)
{
    size_t bytes = tq_dtype_block_bytes(t);
    for (size_t b = 0; b < nb; b++, x += 256, out += bytes) {
        const float *w = qw ? qw + 256 * b : NULL;
        switch (t) {
            case TQ_DT_Q4_K:
                q45_block(x, out, 15, w);
                break;
            case TQ_DT_Q5_K:
                q45_block(x, out, 31, w);
                break;
            case TQ_DT_Q6_K:
                q6_block(x, out, w);
                break;
            default:
                return -1;
        }
    }
    return 0;
}
