/* kernels_scalar.c - the reference kernels: one block at a time, in the
 * fork's exact operation order.  The SIMD kernels must produce the same bytes;
 * tests compare them. */
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static void kv_encode_block(const tq_codec *c, const float *x, uint8_t *out)
{
    const tq_block_params *p = &c->kv;
    uint32_t g = p->g;
    float u[512];
    uint8_t idx[512];
    float ss = 0.0f;
    for (uint32_t j = 0; j < g; j++) ss += x[j] * x[j];
    float n = sqrtf(ss);
    float inv = n > 1e-10f ? 1.0f / n : 0.0f;
    for (uint32_t j = 0; j < g; j++) u[j] = x[j] * inv;
    tq_rht_forward_raw(g, p->s1, p->s2, u);
    float rs = 0.0f;
    for (uint32_t j = 0; j < g; j++) {
        uint32_t k = tq_cb_index(p->cb, u[j]);
        float cv = p->cb->centroids[k];
        idx[j] = (uint8_t)k;
        rs += cv * cv;
    }
    float recon = sqrtf(rs);
    float nv = n;
    if (p->norm_correction && recon > 1e-10f) nv = n / recon;
    tq_block_store(c, idx, tq_fp32_to_fp16(nv), 0, out);
}

static void kv_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out)
{
    for (size_t b = 0; b < nb; b++)
        kv_encode_block(c, x + b * c->block_values, out + b * c->block_bytes);
}

static void kv_decode(const tq_codec *c, const uint8_t *in, size_t nb, float *y, int rotated)
{
    const tq_block_params *p = &c->kv;
    uint8_t idx[512];
    for (size_t b = 0; b < nb; b++) {
        uint16_t h0, h1;
        float *yb = y + b * p->g;
        tq_block_load(c, in + b * c->block_bytes, idx, &h0, &h1);
        float nrm = tq_fp16_to_fp32(h0);
        for (uint32_t j = 0; j < p->g; j++) yb[j] = p->cb->centroids[idx[j]] * nrm;
        if (!rotated) tq_rht_inverse_raw(p->g, p->s1, p->s2, yb);
    }
}

static float inv_or_zero(float d) { return d > 1e-10f ? 1.0f / d : 0.0f; }

/* Indices of half h against the stored (fp16) scale dq, and their squared
 * error.  fork_inv >= 0: the fork's index (from the fp32 reciprocal) unless
 * the nearest to buf/dq is strictly better, so never worse than the fork. */
static float w_half(const tq_codec *c, const float *buf, int h, float dq, float fork_inv,
                    uint8_t *idx)
{
    const tq_block_params *p = &c->kv;
    const float *C = p->cb->centroids;
    float err = 0.0f, dqs = dq != 0.0f ? dq : 1.0f;
    for (int j = 16 * h; j < 16 * h + 16; j++) {
        uint32_t k2 = tq_cb_index(p->cb, buf[j] / dqs),
                 k = fork_inv >= 0.0f ? tq_cb_index(p->cb, buf[j] * fork_inv) : k2;
        float e1 = buf[j] - C[k] * dq, e2 = buf[j] - C[k2] * dq;
        if (dq != 0.0f && e2 * e2 < e1 * e1) {
            k = k2;
            e1 = e2;
        }
        idx[j] = (uint8_t)k;
        err += e1 * e1;
    }
    return err;
}

static void w_refine(const tq_codec *c, const float *buf, float *d)
{
    const float *C = c->kv.cb->centroids;
    for (int r = 0; r < TQ_WREFINE_ROUNDS; r++)
        for (int h = 0; h < 2; h++) {
            float inv = inv_or_zero(d[h]), num = 0.0f, den = 0.0f;
            for (int j = 16 * h; j < 16 * h + 16; j++) {
                float cv = C[tq_cb_index(c->kv.cb, buf[j] * inv)];
                num += buf[j] * cv;
                den += cv * cv;
            }
            if (den > 1e-10f) d[h] = num / den;
        }
}

/* The fork's TQ3_1S/TQ4_1S search: a shared grid of scale multipliers for
 * both half-blocks, then six least-squares refinements per half.  BEST adds
 * a second start per half (the grid value best for that half alone: the
 * halves have separate scales, so a shared multiplier is a needless
 * constraint), refines it the same way, and keeps whichever start gives the
 * lower error against the stored fp16 scale. */
static void w_encode_block(const tq_codec *c, const float *x, uint8_t *out)
{
    const tq_block_params *p = &c->kv;
    const float *C = p->cb->centroids;
    float buf[32];
    uint8_t idx[32], alt_idx[32];
    memcpy(buf, x, sizeof buf);
    tq_rht_forward_raw(32, p->s1, p->s2, buf);
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < 16; j++) s0 += buf[j] * buf[j];
    for (int j = 16; j < 32; j++) s1 += buf[j] * buf[j];
    float rms0 = sqrtf(s0 / 16.0f), rms1 = sqrtf(s1 / 16.0f);
    float best = 1e30f, d0 = rms0, d1 = rms1, hbest[2] = {1e30f, 1e30f}, alt[2] = {rms0, rms1};
    for (int si = 0; si < TQ_WGRID_N; si++) {
        float t0 = rms0 * tq_wgrid[si], t1 = rms1 * tq_wgrid[si];
        float i0 = inv_or_zero(t0), i1 = inv_or_zero(t1);
        float err = 0.0f, eh[2] = {0.0f, 0.0f};
        for (int j = 0; j < 32; j++) {
            float d = j < 16 ? t0 : t1, inv = j < 16 ? i0 : i1;
            float diff = buf[j] - C[tq_cb_index(p->cb, buf[j] * inv)] * d;
            err += diff * diff;
            eh[j >= 16] += diff * diff;
        }
        if (err < best) {
            best = err;
            d0 = t0;
            d1 = t1;
        }
        if (eh[0] < hbest[0]) {
            hbest[0] = eh[0];
            alt[0] = t0;
        }
        if (eh[1] < hbest[1]) {
            hbest[1] = eh[1];
            alt[1] = t1;
        }
    }
    float d[2] = {d0, d1};
    w_refine(c, buf, d);
    uint16_t hd[2] = {tq_fp32_to_fp16(d[0]), tq_fp32_to_fp16(d[1])};
    if (c->wsearch == TQ_WSEARCH_FORK) {
        for (int h = 0; h < 2; h++)
            for (int j = 16 * h; j < 16 * h + 16; j++)
                idx[j] = (uint8_t)tq_cb_index(p->cb, buf[j] * inv_or_zero(d[h]));
    } else {
        w_refine(c, buf, alt);
        for (int h = 0; h < 2; h++) {
            float e = w_half(c, buf, h, tq_fp16_to_fp32(hd[h]), inv_or_zero(d[h]), idx);
            uint16_t ha = tq_fp32_to_fp16(alt[h]);
            if (w_half(c, buf, h, tq_fp16_to_fp32(ha), -1.0f, alt_idx) < e) {
                hd[h] = ha;
                memcpy(idx + 16 * h, alt_idx + 16 * h, 16);
            }
        }
    }
    tq_block_store(c, idx, hd[0], hd[1], out);
}

static void w_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out)
{
    for (size_t b = 0; b < nb; b++) w_encode_block(c, x + b * 32, out + b * c->block_bytes);
}

static void w_decode(const tq_codec *c, const uint8_t *in, size_t nb, float *y)
{
    const tq_block_params *p = &c->kv;
    uint8_t idx[32];
    for (size_t b = 0; b < nb; b++) {
        uint16_t h0, h1;
        float *yb = y + b * 32;
        tq_block_load(c, in + b * c->block_bytes, idx, &h0, &h1);
        float d0 = tq_fp16_to_fp32(h0), d1 = tq_fp16_to_fp32(h1);
        for (int j = 0; j < 32; j++) yb[j] = p->cb->centroids[idx[j]] * (j < 16 ? d0 : d1);
        tq_rht_inverse_raw(32, p->s1, p->s2, yb);
    }
}

const float tq_wgrid[TQ_WGRID_N] = {0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f, 1.35f, 1.5f};

const tq_kernels tq_kernels_scalar = {"scalar", kv_encode, kv_decode, w_encode,
                                      w_decode, NULL,      NULL};
