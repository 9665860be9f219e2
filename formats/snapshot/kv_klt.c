/* kv_klt.c - transform-coded snapshot tensors (kv_klt.h). */
#include "kv_klt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows sampled for a tensor's covariance and step: evenly spread over the
 * coded cells.  A basis from the first half of a 27K-token session served
 * its second half within 0.12 bits (../shared/reference/real-models.md), so
 * a spread sample of this size stands for the whole. */
enum { SAMPLE_ROWS = 2048, RATE_ROWS = 1024, SCREEN_ROWS = 512 };
/* Components whose indices carry less than this (bits per row) are not
 * stored: nearly all their indices are 0 */
#define KLT_MIN_BITS 0.01
/* What a transform really costs over the Gaussian estimate at the same error (bits per
 * value): the plan adds it.  On the Llama-8B-shaped Gaussian KV the estimate said 3.88 bits
 * where the forced transform needs about 4.05 at tq's error, its rANS-coded indices near their
 * entropy (tests/bench/results/kv_vs_zstd.md) */
#define KLT_CODER_LOSS 0.2

static uint32_t sample_count(const tqkv_record *t)
{
    uint32_t coded = t->cells - t->sink_rows;
    return coded < SAMPLE_ROWS ? coded : SAMPLE_ROWS;
}

/* The centered sample x[ns / every][width]: every `every`-th of ns rows spread over the
 * coded cells, turned back to before RoPE where rope is given, mean removed into
 * t->offset. */
static tq_status read_sample(tq_ctx *ctx, const tq_kv_tensor *kt, tqkv_record *t,
                             const tq_rope *rope, const int32_t *pos, float *x, uint32_t ns,
                             uint32_t every)
{
    uint32_t coded = t->cells - t->sink_rows, all = ns;
    ns /= every;
    int32_t *spos = malloc(ns * sizeof *spos);
    double *mean = calloc(t->width, sizeof *mean);
    tq_status st = spos && mean ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; !st && k < ns; k++) {
        uint32_t row = t->sink_rows + (uint32_t)((uint64_t)k * every * coded / all);
        st = tq_kv_tensor_read_rows(ctx, kt, t->cells, row, 1, x + (size_t)k * t->width);
        if (pos) spos[k] = pos[row];
    }
    if (!st && rope) st = tq_rope_unrotate(ctx, rope, x, ns, t->width, spos);
    for (uint32_t k = 0; !st && k < ns; k++)
        for (uint64_t j = 0; j < t->width; j++) mean[j] += x[(size_t)k * t->width + j];
    for (uint64_t j = 0; !st && j < t->width; j++) t->offset[j] = (float)(mean[j] / ns);
    for (uint32_t k = 0; !st && k < ns; k++)
        for (uint64_t j = 0; j < t->width; j++) x[(size_t)k * t->width + j] -= t->offset[j];
    free(spos);
    free(mean);
    return st;
}

/* One head's transform from the centered sample's columns [h*d, h*d+d). */
static tq_status fit_head(tq_ctx *ctx, const float *x, uint32_t ns, uint64_t width, uint32_t d,
                          const double *cov, double rate, tqkv_klt *k, double *bits)
{
    double *vec = malloc((size_t)d * d * sizeof *vec);    /* [d][d]: eigenvectors, rows */
    double *val = malloc(d * sizeof *val);                /* [d] */
    float *basis = malloc((size_t)d * d * sizeof *basis); /* [d][d]: as stored (f16) */
    float *y = malloc((size_t)ns * d * sizeof *y);        /* [ns][d]: the sample's coefficients */
    tq_status st = vec && val && basis && y
                       ? TQ_OK
                       : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tq_sym_eigen(ctx, d, cov, val, vec);
    for (size_t i = 0; !st && i < (size_t)d * d; i++)
        basis[i] = tq_fp16_to_fp32(tq_fp32_to_fp16((float)vec[i]));
    if (!st) st = tq_klt_project(ctx, basis, d, d, x, ns, width, y);
    /* the step from every other row when there are many: the search
     * quantizes the sample ~13 times */
    uint32_t every = ns > RATE_ROWS ? ns / RATE_ROWS : 1, nr = ns / every;
    for (uint32_t r = 1; !st && every > 1 && r < nr; r++)
        memcpy(y + (size_t)r * d, y + (size_t)r * every * d, d * sizeof *y);
    if (!st) st = tq_klt_rate_step(ctx, y, nr, d, rate, KLT_MIN_BITS, &k->step, &k->m, bits);
    if (!st && !(k->basis = malloc(((size_t)k->m * d + 1) * sizeof *k->basis)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) memcpy(k->basis, basis, (size_t)k->m * d * sizeof *basis);
    free(vec);
    free(val);
    free(basis);
    free(y);
    return st;
}

/* The heads' covariances (cov[nh][d][d]) from n rows of the centered sample, a row every
 * `stride` floats; with a rival, the transform's bits at its error from their eigenvalues,
 * bases and coder loss included, into fit (skipped where that is no less than its bits). */
static tq_status screen(tq_ctx *ctx, const float *x, uint32_t n, size_t stride,
                        const tqkv_record *t, const tq_klt_rival *rival, double *cov,
                        double *val, tq_klt_fit *fit)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d, m_est = 0;
    tq_status st = TQ_OK;
    fit->equal_error_bits = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        st = tq_covariance(ctx, x + h * d, n, d, stride, cov + h * d * d);
        if (st || !rival) continue;
        st = tq_sym_eigen(ctx, d, cov + h * d * d, val, NULL);
        double energy = 0;
        for (uint32_t c = 0; !st && c < d; c++) energy += val[c] > 0 ? val[c] / d : 0;
        uint32_t m_h = 0;
        if (!st)
            fit->equal_error_bits += tq_klt_gauss_bits_at_error(val, d, rival->rel_mse * energy,
                                                                KLT_MIN_BITS, &m_h);
        m_est += m_h;
    }
    if (st || !rival) return st;
    double coded = (double)(t->cells - t->sink_rows) * d;
    fit->equal_error_bits /= (double)nh;
    fit->equal_error_bits += 16.0 * (double)m_est / (double)nh * d / coded + KLT_CODER_LOSS;
    fit->skipped = fit->equal_error_bits >= rival->bits;
    return TQ_OK;
}

tq_status tq_kvsnap_klt_fit(tq_ctx *ctx, const tq_kv_tensor *kt, tqkv_record *t,
                            const tq_rope *rope, const int32_t *pos, double rate,
                            const tq_klt_rival *rival, tq_klt_fit *fit)
{
    uint32_t d = t->group, ns = sample_count(t);
    uint64_t nh = t->width / d;
    memset(fit, 0, sizeof *fit);
    float *x = malloc((size_t)ns * t->width * sizeof *x); /* [ns][width]: the centered sample */
    free(t->offset);
    t->offset = malloc(t->width * sizeof *t->offset);
    t->klt = calloc(nh, sizeof *t->klt);
    tq_status st = x && t->offset && t->klt && ns
                       ? TQ_OK
                       : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    double *cov = malloc(nh * d * d * sizeof *cov); /* [nh][d][d]: the heads' covariances */
    double *val = malloc(d * sizeof *val);          /* [d]: one head's eigenvalues */
    if (!st && (!cov || !val)) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    /* First what the eigenvalues alone promise: the transform's bits at the error of tq's
       codec on the same rows.  Where that is no less than tq's own bits, the vectors, the
       projection and the step search are not worth doing.  A quarter of the sample tells
       first (fewer rows spread the eigenvalues apart, which favours the
       transform: what that turns down, the whole sample turns down too) */
    uint32_t every = ns >= 4 * SCREEN_ROWS ? ns / SCREEN_ROWS : 1;
    if (!st && rival && every > 1) {
        st = read_sample(ctx, kt, t, rope, pos, x, ns, every);
        if (!st) st = screen(ctx, x, ns / every, t->width, t, rival, cov, val, fit);
    }
    if (!st && !fit->skipped) st = read_sample(ctx, kt, t, rope, pos, x, ns, 1);
    if (!st && !fit->skipped) st = screen(ctx, x, ns, t->width, t, rival, cov, val, fit);
    for (uint64_t h = 0; !st && !fit->skipped && h < nh; h++) {
        double bits = 0;
        st = fit_head(ctx, x + h * d, ns, t->width, d, cov + h * d * d, rate, &t->klt[h], &bits);
        fit->rate += bits / (double)nh;
        fit->m += t->klt[h].m;
    }
    free(x);
    free(cov);
    free(val);
    if (fit->skipped) return st;
    if (!st && rope) {
        if (!(t->rope_pos = malloc(4ull * t->cells)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        memcpy(t->rope_pos, pos, 4ull * t->cells);
        t->rope = *rope;
    }
    fit->basis_bits = 16.0 * fit->m * d / ((double)(t->cells - t->sink_rows) * (double)t->width);
    return st;
}

/* ------------------------------------------------------------ chunks */

/* The factor on every head's step: the coarse rows' record has its own (tqkv_record_coarse). */
static float step_scale(const tqkv_record *t)
{
    return t->klt_step_scale > 0 ? t->klt_step_scale : 1.0f;
}

static uint16_t zigzag(int16_t v) { return (uint16_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 15)); }
static int16_t unzigzag(uint16_t u) { return (int16_t)((u >> 1) ^ (uint16_t)-(u & 1)); }

/* Indices idx[nc][n] as nc rANS streams (symbols: the zig-zag codes, 255 for 255 or more),
 * each followed by its escaped indices' u16 codes, in order. */
static tq_status rans_pack(tq_ctx *ctx, const int16_t *idx, uint64_t nc, uint32_t n,
                           uint8_t *payload, uint64_t *len)
{
    uint8_t *sym = malloc(n ? n : 1); /* [n]: one component's symbols */
    if (!sym) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint64_t pos = 0;
    tq_status st = TQ_OK;
    for (uint64_t c = 0; !st && c < nc; c++) {
        const int16_t *q = idx + c * n;
        for (uint32_t r = 0; r < n; r++) {
            uint16_t u = zigzag(q[r]);
            sym[r] = (uint8_t)(u < 255 ? u : 255);
        }
        size_t used = 0;
        st = tq_rans_encode(ctx, sym, n, payload + pos, tq_rans_bound(n), &used);
        pos += used;
        for (uint32_t r = 0; !st && r < n; r++) {
            uint16_t u = zigzag(q[r]);
            if (u < 255) continue;
            payload[pos++] = (uint8_t)u;
            payload[pos++] = (uint8_t)(u >> 8);
        }
    }
    free(sym);
    *len = pos;
    return st;
}

/* The streams of rans_pack back into idx[nc][n]; TQ_ERR_CORRUPT where they do not fill the
 * payload exactly. */
static tq_status rans_unpack(tq_ctx *ctx, const uint8_t *payload, uint64_t len, uint64_t nc,
                             uint32_t n, int16_t *idx)
{
    uint8_t *sym = malloc(n ? n : 1); /* [n] */
    if (!sym) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint64_t pos = 0;
    tq_status st = TQ_OK;
    for (uint64_t c = 0; !st && c < nc; c++) {
        size_t used = 0;
        st = tq_rans_decode(ctx, payload + pos, len - pos, sym, n, &used);
        pos += used;
        int16_t *q = idx + c * n;
        for (uint32_t r = 0; !st && r < n; r++) {
            uint16_t u = sym[r];
            if (u == 255 && pos + 2 > len) {
                st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: escapes past its end");
                break;
            }
            if (u == 255) {
                u = (uint16_t)(payload[pos] | payload[pos + 1] << 8);
                pos += 2;
            }
            q[r] = unzigzag(u);
        }
    }
    if (!st && pos != len)
        st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: %llu bytes after its streams",
                              (unsigned long long)(len - pos));
    free(sym);
    return st;
}

tq_status tq_kvsnap_klt_encode(tq_ctx *ctx, const tqkv_record *t, float *x, uint32_t row0,
                               uint32_t n, uint8_t *payload, uint64_t *len)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d, nc = tqkv_klt_components(t);
    int16_t *idx = malloc((nc ? nc : 1) * n * sizeof *idx); /* [nc][n]: heads' components */
    if (!idx) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    if (t->rope_pos) st = tq_rope_unrotate(ctx, &t->rope, x, n, t->width, t->rope_pos + row0);
    for (uint32_t r = 0; !st && t->offset && r < n; r++)
        for (uint64_t j = 0; j < t->width; j++) x[(size_t)r * t->width + j] -= t->offset[j];
    uint64_t c0 = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        tq_klt k = {d, t->klt[h].m, t->klt[h].step * step_scale(t), t->klt[h].basis};
        st = tq_klt_encode(ctx, &k, x + h * d, n, t->width, idx + c0 * n);
        c0 += t->klt[h].m;
    }
    if (!st && t->klt_rans) {
        st = rans_pack(ctx, idx, nc, n, payload, len);
        free(idx);
        return st;
    }
    uint64_t nv = nc * n, esc = nv, n_esc = 0;
    for (uint64_t i = 0; !st && i < nv; i++) { /* a loop the compiler vectorizes */
        uint16_t u = zigzag(idx[i]);
        payload[i] = (uint8_t)(u < 255 ? u : 255);
        n_esc += u >= 255;
    }
    for (uint64_t i = 0; !st && n_esc && i < nv; i++) { /* the full indices after the bytes */
        uint16_t u = zigzag(idx[i]);
        if (u >= 255) {
            payload[esc++] = (uint8_t)u;
            payload[esc++] = (uint8_t)(u >> 8);
        }
    }
    *len = esc;
    free(idx);
    return st;
}

/* The byte layout (a byte an index, then the escaped ones' u16 codes) back into idx[nv]. */
static tq_status bytes_unpack(tq_ctx *ctx, const uint8_t *payload, uint64_t len, uint64_t nv,
                              int16_t *idx)
{
    if (len < nv) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk too short");
    uint64_t esc = nv;
    for (uint64_t i = 0; i < nv; i++) idx[i] = unzigzag(payload[i]); /* vectorized */
    const uint8_t *e = payload, *end = payload + nv;
    while ((e = memchr(e, 255, (size_t)(end - e))) != NULL) { /* the escapes, in order */
        if (esc + 2 > len)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: escapes past its end");
        idx[e - payload] = unzigzag((uint16_t)(payload[esc] | payload[esc + 1] << 8));
        esc += 2;
        e++;
    }
    if (esc != len)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                "transform chunk: %llu bytes after its escapes",
                                (unsigned long long)(len - esc));
    return TQ_OK;
}

tq_status tq_kvsnap_klt_decode(tq_ctx *ctx, const tqkv_record *t, const uint8_t *payload,
                               uint64_t len, uint32_t row0, uint32_t n, float *y)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d, nc = tqkv_klt_components(t);
    int16_t *idx = malloc((nc ? nc : 1) * n * sizeof *idx); /* [nc][n] */
    if (!idx) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = t->klt_rans ? rans_unpack(ctx, payload, len, nc, n, idx)
                               : bytes_unpack(ctx, payload, len, nc * n, idx);
    uint64_t c0 = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        tq_klt k = {d, t->klt[h].m, t->klt[h].step * step_scale(t), t->klt[h].basis};
        st = tq_klt_decode(ctx, &k, idx + c0 * n, n, y + h * d, t->width);
        c0 += t->klt[h].m;
    }
    free(idx);
    for (uint32_t r = 0; !st && t->offset && r < n; r++)
        for (uint64_t j = 0; j < t->width; j++) y[(size_t)r * t->width + j] += t->offset[j];
    if (!st && t->rope_pos) st = tq_rope_rotate(ctx, &t->rope, y, n, t->width, t->rope_pos + row0);
    return st;
}

/* zstd's Huffman table serves one block: blocks of components of like
 * spread (the components come strongest first) of about BLOCK_BYTES */
enum { BLOCK_BYTES = 32 << 10 };

int tq_kvsnap_klt_cuts(const tqkv_record *t, uint32_t n, uint64_t *cuts)
{
    uint64_t nc = tqkv_klt_components(t), per = n ? (BLOCK_BYTES + n - 1) / n : 1, k = 0;
    if (per < 1) per = 1;
    for (uint64_t c = per; c < nc && k + 1 < KLT_MAX_CUTS; c += per) cuts[k++] = c * n;
    cuts[k++] = nc * n; /* the escapes */
    return (int)k;
}
