/* weight_importance.c - TQ3_1S/TQ4_1S encoding that minimises the
 * importance-weighted error (tq_encode_weighted in tq.h).
 *
 * A block is coded in the rotated basis r = H x (H: the fork's 32-point
 * randomized Hadamard), but its error matters in the weights' own basis,
 * weighted per input column: err = (x - x^)' W (x - x^) = e' M e with
 * e = r - r^ and M = H W H'.  W is diagonal, M is not, so the importance
 * of one column spreads over every rotated coordinate: the plain search's
 * nearest-centroid choice is no longer optimal.  Each block starts from the
 * plain result and improves it by coordinate descent on the indices and a
 * weighted least-squares fit of its two scales, keeping whatever lowers
 * e' M e.  M depends only on the column block, so it is built once per
 * block column and shared by every row. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct wctx {
    const tq_codec *c;
    const float *M; /* 32 x 32 per column block */
} wctx;

static float quad(const float *M, const float *e) /* e' M e */
{
    float s = 0.0f;
    for (int a = 0; a < 32; a++) {
        float t = 0.0f;
        for (int b = 0; b < 32; b++) t += M[a * 32 + b] * e[b];
        s += e[a] * t;
    }
    return s;
}

static void recon(const float *C, const uint8_t *idx, float d0, float d1, float *out)
{
    for (int j = 0; j < 32; j++) out[j] = C[idx[j]] * (j < 16 ? d0 : d1);
}

static float cost_of(const float *M, const float *C, const float *r, const uint8_t *idx, float d0,
                     float d1)
{
    float e[32];
    recon(C, idx, d0, d1, e);
    for (int j = 0; j < 32; j++) e[j] = r[j] - e[j];
    return quad(M, e);
}

/* Weighted least squares for the two half scales with the indices fixed,
 * rounded to fp16 as stored; 0 if the system is degenerate. */
static int fit_scales(const float *M, const float *C, const float *r, const uint8_t *idx,
                      uint16_t *h0, uint16_t *h1)
{
    float c0[32] = {0}, c1[32] = {0}, m0[32], m1[32];
    for (int j = 0; j < 16; j++) c0[j] = C[idx[j]];
    for (int j = 16; j < 32; j++) c1[j] = C[idx[j]];
    for (int a = 0; a < 32; a++) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int b = 0; b < 32; b++) {
            s0 += M[a * 32 + b] * c0[b];
            s1 += M[a * 32 + b] * c1[b];
        }
        m0[a] = s0;
        m1[a] = s1;
    }
    double a00 = 0, a01 = 0, a11 = 0, r0 = 0, r1 = 0;
    for (int a = 0; a < 32; a++) {
        a00 += (double)c0[a] * m0[a];
        a01 += (double)c0[a] * m1[a];
        a11 += (double)c1[a] * m1[a];
        r0 += (double)r[a] * m0[a];
        r1 += (double)r[a] * m1[a];
    }
    double det = a00 * a11 - a01 * a01;
    if (!(det > 1e-12 * (a00 * a11 + 1e-30))) return 0;
    double d0 = (r0 * a11 - r1 * a01) / det, d1 = (r1 * a00 - r0 * a01) / det;
    if (!(d0 > 0) || !(d1 > 0) || d0 > 65504.0 || d1 > 65504.0) return 0;
    *h0 = tq_fp32_to_fp16((float)d0);
    *h1 = tq_fp32_to_fp16((float)d1);
    return 1;
}

/* Greedy passes: move one index to a neighbouring centroid while e' M e falls. */
static float descend(const float *M, const float *C, uint32_t K, const float *r, uint8_t *idx,
                     float d0, float d1, float cost)
{
    float e[32], g[32];
    recon(C, idx, d0, d1, e);
    for (int j = 0; j < 32; j++) e[j] = r[j] - e[j];
    for (int a = 0; a < 32; a++) {
        float t = 0.0f;
        for (int b = 0; b < 32; b++) t += M[a * 32 + b] * e[b];
        g[a] = t;
    }
    for (int pass = 0; pass < 4; pass++) {
        int moved = 0;
        for (int j = 0; j < 32; j++) {
            float d = j < 16 ? d0 : d1;
            for (int dir = -1; dir <= 1; dir += 2) {
                int k = idx[j] + dir;
                if (k < 0 || k >= (int)K) continue;
                float delta = (C[k] - C[idx[j]]) * d; /* r^_j grows by delta, e_j falls by it */
                float nc = cost - 2.0f * delta * g[j] + delta * delta * M[j * 32 + j];
                if (nc < cost * (1.0f - 1e-6f)) {
                    cost = nc;
                    idx[j] = (uint8_t)k;
                    e[j] -= delta;
                    for (int a = 0; a < 32; a++) g[a] -= delta * M[a * 32 + j];
                    moved = 1;
                    break;
                }
            }
        }
        if (!moved) break;
    }
    return cost;
}

static void encode_block(const wctx *w, const float *M, const float *x, tq_simd simd, uint8_t *out)
{
    const tq_codec *c = w->c;
    const float *C = c->kv.cb->centroids;
    uint32_t K = c->kv.cb->size;
    tq_kernels_for(simd)->w_encode(c, x, 1, out);
    uint8_t idx[32], best_idx[32];
    uint16_t h0, h1;
    tq_block_load(c, out, idx, &h0, &h1);
    float r[32];
    memcpy(r, x, sizeof r);
    tq_rht_forward_raw(32, c->kv.s1, c->kv.s2, r);
    float plain = cost_of(M, C, r, idx, tq_fp16_to_fp32(h0), tq_fp16_to_fp32(h1));
    if (!(plain > 0.0f)) return; /* exact already, or no importance here */
    float best = plain;
    uint16_t b0 = h0, b1 = h1;
    memcpy(best_idx, idx, 32);
    for (int round = 0; round < 2; round++) {
        uint16_t f0, f1;
        if (fit_scales(M, C, r, idx, &f0, &f1)) {
            float fc = cost_of(M, C, r, idx, tq_fp16_to_fp32(f0), tq_fp16_to_fp32(f1));
            if (fc < best) {
                h0 = f0;
                h1 = f1;
            }
        }
        descend(M, C, K, r, idx, tq_fp16_to_fp32(h0), tq_fp16_to_fp32(h1),
                cost_of(M, C, r, idx, tq_fp16_to_fp32(h0), tq_fp16_to_fp32(h1)));
        /* recomputed, not the running sum, so rounding cannot fake a gain */
        float cc = cost_of(M, C, r, idx, tq_fp16_to_fp32(h0), tq_fp16_to_fp32(h1));
        if (cc < best) {
            best = cc;
            b0 = h0;
            b1 = h1;
            memcpy(best_idx, idx, 32);
        }
    }
    if (best < plain) tq_block_store(c, best_idx, b0, b1, out);
}

tq_status tq_encode_weighted(tq_ctx *ctx, const tq_codec *c, const float *x, size_t n_rows,
                             size_t row_len, const float *importance, void *blocks)
{
    TQ_NEED_CTX(ctx);
    if (c->layout != TQ_LAYOUT_W3 && c->layout != TQ_LAYOUT_W4)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "codec %s is not a weight codec", c->name);
    if (!row_len || row_len % 32)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "row length %zu is not a multiple of 32", row_len);
    if (!importance) return tq_encode(ctx, c, x, n_rows * row_len, blocks);
    tq_status cst = tq_require_cpu(ctx, "importance-weighted weight coding");
    if (cst) return cst;
    for (size_t i = 0; i < row_len; i++)
        if (!(importance[i] >= 0.0f) || isinf(importance[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                           "importance[%zu] = %g is not a finite non-negative number", i,
                           importance[i]);
    size_t nbc = row_len / 32;
    float *M = malloc(nbc * 32 * 32 * sizeof(float));
    if (!M) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    float H[32][32]; /* H[:, i] = H e_i */
    for (int i = 0; i < 32; i++) {
        float u[32] = {0};
        u[i] = 1.0f;
        tq_rht_forward_raw(32, c->kv.s1, c->kv.s2, u);
        for (int a = 0; a < 32; a++) H[a][i] = u[a];
    }
    for (size_t b = 0; b < nbc; b++) {
        const float *wv = importance + 32 * b;
        float *Mb = M + b * 1024;
        for (int a = 0; a < 32; a++)
            for (int k = 0; k < 32; k++) {
                double s = 0.0;
                for (int i = 0; i < 32; i++) s += (double)H[a][i] * wv[i] * H[k][i];
                Mb[a * 32 + k] = (float)s;
            }
    }
    wctx w = {c, M};
    tq_simd simd = ctx->simd;
    uint8_t *out = blocks;
    size_t bb = c->block_bytes;
    int nt = tq_resolve_threads(ctx);
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt)
    for (size_t row = 0; row < n_rows; row++)
        for (size_t b = 0; b < nbc; b++)
            encode_block(&w, M + b * 1024, x + row * row_len + 32 * b, simd,
                         out + (row * nbc + b) * bb);
    free(M);
    return TQ_OK;
}
