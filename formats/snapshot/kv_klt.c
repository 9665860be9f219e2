/* kv_klt.c - transform-coded snapshot tensors (kv_klt.h). */
#include "kv_klt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows sampled for a tensor's covariance and step: evenly spread over the
 * coded cells.  A basis from the first half of a 27K-token session served
 * its second half within 0.12 bits (../shared/reference/real-models.md), so
 * a spread sample of this size stands for the whole; half as many for SmolLM2's heads of 64
 * restored its small preset at 2.10x the floor where this does at 1.73x
 * (tests/bench/results/kv_long_smollm2.md). */
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

/* Each head's slice of rows x[n][width] scaled to unit norm by its gain (klt_gain): the codes
 * into codes[nh][n], head by head. */
static void scale_to_gains(float *x, uint32_t n, uint64_t width, uint32_t d, uint8_t *codes)
{
    uint64_t nh = width / d;
    for (uint32_t r = 0; r < n; r++)
        for (uint64_t h = 0; h < nh; h++) {
            float *v = x + (size_t)r * width + h * d;
            double sq = 0;
            for (uint32_t j = 0; j < d; j++) sq += (double)v[j] * v[j];
            uint8_t c = tqkv_gain_code((float)sqrt(sq));
            codes[h * n + r] = c;
            float g = tqkv_gain(c);
            for (uint32_t j = 0; c && j < d; j++) v[j] /= g;
        }
}

/* The inverse: y[n][width]'s head slices times their gains (codes: NULL, none), then the
 * offset added (NULL: none), in one pass over the rows in order (head by head, it went over
 * a chunk's rows once a head, out of cache: a sixth of SmolLM2's decode) */
static void gains_and_offset(float *y, uint32_t n, uint64_t width, uint32_t d,
                             const uint8_t *codes, const float *offset)
{
    uint64_t nh = width / d;
    for (uint32_t r = 0; r < n; r++) {
        float *row = y + (size_t)r * width;
        for (uint64_t h = 0; codes && h < nh; h++) {
            float g = tqkv_gain(codes[h * n + r]), *v = row + h * d;
            for (uint32_t j = 0; j < d; j++) v[j] *= g;
        }
        for (uint64_t j = 0; offset && j < width; j++) row[j] += offset[j];
    }
}

/* The entropy of codes[n] in bits. */
static double code_entropy(const uint8_t *codes, uint32_t n)
{
    uint32_t count[256] = {0};
    for (uint32_t i = 0; i < n; i++) count[codes[i]]++;
    double h = 0;
    for (int c = 0; c < 256; c++)
        if (count[c]) h -= (double)count[c] / n * log2((double)count[c] / n);
    return h;
}

/* The centered sample x[ns / every][width]: every `every`-th of ns rows spread over the
 * coded cells, turned back to before RoPE where rope is given, mean removed into
 * t->offset, with klt_gain each head's rows at unit norm (*gain_bits: the gains' entropy per
 * value). */
static tq_status read_sample(tq_ctx *ctx, const tq_kv_tensor *kt, tqkv_record *t,
                             const tq_rope *rope, const int32_t *pos, float *x, uint32_t ns,
                             uint32_t every, double *gain_bits)
{
    uint32_t coded = t->cells - t->sink_rows, all = ns;
    ns /= every;
    int32_t *spos = malloc(ns * sizeof *spos);
    double *mean = calloc(t->width, sizeof *mean);
    tq_status st = spos && mean ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; !st && k < ns; k++) {
        uint32_t row = t->sink_rows + (uint32_t)((uint64_t)k * every * coded / all);
        st = tq_kv_view_read_rows(ctx, kt, t->cells, row, 1, x + (size_t)k * t->width);
        if (pos) spos[k] = pos[row];
    }
    if (!st && rope) st = tq_rope_unrotate(ctx, rope, x, ns, t->width, spos);
    for (uint32_t k = 0; !st && k < ns; k++)
        for (uint64_t j = 0; j < t->width; j++) mean[j] += x[(size_t)k * t->width + j];
    for (uint64_t j = 0; !st && j < t->width; j++) t->offset[j] = (float)(mean[j] / ns);
    for (uint32_t k = 0; !st && k < ns; k++)
        for (uint64_t j = 0; j < t->width; j++) x[(size_t)k * t->width + j] -= t->offset[j];
    uint64_t nh = t->width / t->group;
    uint8_t *codes = t->klt_gain ? malloc(nh * ns) : NULL; /* [nh][ns] */
    if (!st && t->klt_gain && !codes) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st && codes) scale_to_gains(x, ns, t->width, t->group, codes);
    *gain_bits = 0;
    for (uint64_t h = 0; !st && codes && h < nh; h++)
        *gain_bits += code_entropy(codes + h * ns, ns) / (double)(nh * t->group);
    free(codes);
    free(spos);
    free(mean);
    return st;
}

/* The distortion byte bases add to a head's coefficients over the quantizer's own, as a share
 * of it: each kept component's variance times its rounded row's squared error, against the
 * step's error on the kept components and the dropped components' variance.  Gemma 3 270M's
 * global K (heads of 256) measured 0.5-6.6, SmolLM2's heads of 64 0.004-0.25
 * (tests/bench/results/kv_texts.md). */
static double basis8_share(const float *basis, const double *vec, const float *y, uint32_t nr,
                           uint32_t d, const tqkv_klt *k)
{
    double added = 0;
    double own = 0;
    for (uint32_t r = 0; r < d; r++) {
        double var = 0;
        for (uint32_t i = 0; i < nr; i++) {
            double c = y[(size_t)i * d + r];
            var += c * c;
        }
        var /= nr ? nr : 1;
        if (r >= k->m) {
            own += var;
            continue;
        }
        double dv = 0;
        for (uint32_t j = 0; j < d; j++) {
            double e = basis[(size_t)r * d + j] - vec[(size_t)r * d + j];
            dv += e * e;
        }
        added += var * dv;
        own += (double)k->step * k->step / 12.0;
    }
    return own > 0 ? added / own : 0.0;
}

/* One head's transform from the centered sample's columns [h*d, h*d+d) and the eigenvectors
 * of their covariance (vec[d][d], rows); with basis8, the share of distortion the byte bases
 * add (basis8_share) into *share. */
static tq_status fit_head(tq_ctx *ctx, const float *x, uint32_t ns, uint64_t width, uint32_t d,
                          const double *vec, int basis8, double rate, tqkv_klt *k, double *bits,
                          double *share)
{
    float *basis = malloc((size_t)d * d * sizeof *basis); /* [d][d]: as stored (f16) */
    float *y = malloc((size_t)ns * d * sizeof *y);        /* [ns][d]: the sample's coefficients */
    tq_status st = basis && y ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < (size_t)d * d; i++) basis[i] = (float)vec[i];
    for (uint32_t r = 0; !st && r < d; r++) tqkv_basis_round(basis8, basis + (size_t)r * d, d);
    /* the step from every other row when there are many (the search quantizes the sample
     * a few times): only those rows projected */
    uint32_t every = ns > RATE_ROWS ? ns / RATE_ROWS : 1, nr = ns / every;
    if (!st) st = tq_klt_project(ctx, basis, d, d, x, nr, width * every, y);
    if (!st) st = tq_klt_rate_step(ctx, y, nr, d, rate, KLT_MIN_BITS, &k->step, &k->m, bits);
    *share = !st && basis8 ? basis8_share(basis, vec, y, nr, d, k) : 0.0;
    if (!st && !(k->basis = malloc(((size_t)k->m * d + 1) * sizeof *k->basis)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) memcpy(k->basis, basis, (size_t)k->m * d * sizeof *basis);
    free(basis);
    free(y);
    return st;
}

/* A basis row's bits: fp16 values, or a byte a value and the row's exponent. */
static double basis_row_bits(int basis8, uint32_t d) { return basis8 ? 8.0 * d + 8 : 16.0 * d; }

/* Every head's transform (t->klt[nh]) into fit's rate and components; where t asks for byte
 * bases, kept only where the bits they save a value outweigh the rate their added distortion
 * is worth (half a bit per doubling: 0.5 log2(1 + share), the heads' mean), else fitted again
 * with fp16 bases: a per-tensor choice from measured cost (issue 36: byte bases cost Gemma 3
 * 270M's global K 2x the floor on texts they were not chosen on; SmolLM2's heads of 64 keep
 * them). */
static tq_status fit_heads(tq_ctx *ctx, const float *x, uint32_t ns, tqkv_record *t,
                           const double *vec, double rate, tq_klt_fit *fit)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d;
    tq_status st = TQ_OK;
    for (int pass = 0; pass < 2; pass++) {
        double share = 0;
        fit->rate = 0;
        fit->m = 0;
        for (uint64_t h = 0; !st && h < nh; h++) {
            double bits = 0;
            double head_share = 0;
            free(t->klt[h].basis);
            t->klt[h].basis = NULL;
            st = fit_head(ctx, x + h * d, ns, t->width, d, vec + h * d * d, t->klt_basis8, rate,
                          &t->klt[h], &bits, &head_share);
            fit->rate += bits / (double)nh;
            fit->m += t->klt[h].m;
            share += head_share / (double)nh;
        }
        double values = (double)(t->cells - t->sink_rows) * (double)t->width;
        double saved = (basis_row_bits(0, d) - basis_row_bits(1, d)) * fit->m / values;
        if (st || !t->klt_basis8 || saved >= 0.5 * log2(1.0 + share)) return st;
        t->klt_basis8 = 0;
    }
    return st;
}

/* The heads' covariances (cov[nh][d][d]) from n rows of the centered sample, a row every
 * `stride` floats; with a rival, the transform's bits at its error from their eigenvalues,
 * bases and coder loss included, into fit (skipped where that is no less than its bits), and
 * where vec is given their eigenvectors too (vec[nh][d][d]: one decomposition where the
 * screen's values and then the vectors took two, a sixth of a plan). */
static tq_status screen(tq_ctx *ctx, const float *x, uint32_t n, size_t stride,
                        const tqkv_record *t, const tq_klt_rival *rival, double *cov,
                        double *val, double *vec, tq_klt_fit *fit)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d, m_est = 0;
    tq_status st = TQ_OK;
    fit->equal_error_bits = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        st = tq_covariance(ctx, x + h * d, n, d, stride, cov + h * d * d);
        if (st || !rival) continue;
        st = tq_sym_eigen(ctx, d, cov + h * d * d, val, vec ? vec + h * d * d : NULL);
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
    /* the bases weighed at 16 bits a value though stored at 8: the margin this estimate was
       calibrated with.  At 8 it took the Llama-8B-shaped Gaussian K at the preset's rate,
       smaller and worse than the blocks (63.1 MB and K error 0.0155 against 69.6 MB and
       0.0084) after a 2.3 s plan, where real K keeps its transform either way
       (tests/bench/results/kv_vs_zstd.md) */
    fit->equal_error_bits +=
        16.0 * d * (double)m_est / (double)nh / coded + KLT_CODER_LOSS + fit->gain_bits;
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
    double *vec = malloc(nh * d * d * sizeof *vec); /* [nh][d][d]: the heads' eigenvectors */
    if (!st && (!cov || !val || !vec)) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    /* First what the eigenvalues alone promise: the transform's bits at the error of tq's
       codec on the same rows.  Where that is no less than tq's own bits, the vectors, the
       projection and the step search are not worth doing.  SCREEN_ROWS of the sample tell
       first where it has twice as many (fewer rows spread the eigenvalues apart, which
       favours the transform: what that turns down, the whole sample turns down too; the
       demo's 8 x 128 state of 2048 cells screened all 2047 and planned for 0.38 s) */
    uint32_t every = ns >= 2 * SCREEN_ROWS ? ns / SCREEN_ROWS : 1;
    if (!st && rival && every > 1) {
        st = read_sample(ctx, kt, t, rope, pos, x, ns, every, &fit->gain_bits);
        if (!st) st = screen(ctx, x, ns / every, t->width, t, rival, cov, val, NULL, fit);
    }
    if (!st && !fit->skipped) st = read_sample(ctx, kt, t, rope, pos, x, ns, 1, &fit->gain_bits);
    /* the eigenvectors only where the quick screen passes: where it turns a tensor down (the
       Llama-8B-shaped Gaussian K) they were half the plan */
    if (!st && !fit->skipped) st = screen(ctx, x, ns, t->width, t, rival, cov, val, vec, fit);
    for (uint64_t h = 0; !st && !fit->skipped && !rival && h < nh; h++)
        st = tq_sym_eigen(ctx, d, cov + h * d * d, val, vec + h * d * d);
    if (!st && !fit->skipped) st = fit_heads(ctx, x, ns, t, vec, rate, fit);
    free(x);
    free(cov);
    free(val);
    free(vec);
    if (fit->skipped) return st;
    if (!st && rope) {
        if (!(t->rope_pos = malloc(4ull * t->cells)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        memcpy(t->rope_pos, pos, 4ull * t->cells);
        t->rope = *rope;
    }
    double values = (double)(t->cells - t->sink_rows) * (double)t->width;
    fit->basis_bits = basis_row_bits(t->klt_basis8, d) * fit->m / values;
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
 * each followed by its escaped indices' u16 codes, in order; coded TQ_RANS_LANES at a time. */
static tq_status rans_pack(tq_ctx *ctx, const int16_t *idx, uint64_t nc, uint32_t n,
                           uint8_t *payload, uint64_t *len)
{
    size_t cap = tq_rans_bound(n);
    uint8_t *sym = malloc((size_t)TQ_RANS_LANES * (n ? n : 1)); /* [lanes][n]: symbols */
    uint8_t *room = malloc(TQ_RANS_LANES * cap);                /* [lanes][cap]: streams */
    if (!sym || !room) {
        free(sym);
        free(room);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    uint8_t *out[TQ_RANS_LANES];
    for (int j = 0; j < TQ_RANS_LANES; j++) out[j] = room + j * cap;
    uint64_t pos = 0;
    tq_status st = TQ_OK;
    for (uint64_t c0 = 0; !st && c0 < nc; c0 += TQ_RANS_LANES) {
        size_t k = nc - c0 < TQ_RANS_LANES ? (size_t)(nc - c0) : TQ_RANS_LANES;
        size_t used[TQ_RANS_LANES];
        uint8_t escapes = 0;
        for (size_t i = 0; i < k * n; i++) { /* a loop the compiler vectorizes */
            uint16_t u = zigzag(idx[c0 * n + i]);
            sym[i] = (uint8_t)(u < 255 ? u : 255);
            escapes |= sym[i] == 255;
        }
        st = tq_rans_encode_many(ctx, k, sym, n, out, cap, used);
        for (size_t j = 0; !st && j < k; j++) {
            memcpy(payload + pos, out[j], used[j]);
            pos += used[j];
            const int16_t *q = idx + (c0 + j) * n;
            for (uint32_t r = 0; escapes && r < n; r++) {
                uint16_t u = zigzag(q[r]);
                if (u < 255) continue;
                payload[pos++] = (uint8_t)u;
                payload[pos++] = (uint8_t)(u >> 8);
            }
        }
    }
    free(sym);
    free(room);
    *len = pos;
    return st;
}

/* The next streams of rans_pack at payload + *pos, TQ_RANS_LANES at most and none after one
 * that may have escapes (its largest symbol 255), decoded into idx[*k][n]. */
static tq_status rans_unpack_lanes(tq_ctx *ctx, const uint8_t *payload, uint64_t len,
                                   uint64_t *pos, uint64_t left, uint32_t n, uint8_t *sym,
                                   int16_t *idx, size_t *k)
{
    const uint8_t *in[TQ_RANS_LANES];
    size_t size[TQ_RANS_LANES];
    uint32_t max_sym = 0;
    tq_status st = TQ_OK;
    *k = 0;
    while (!st && *k < TQ_RANS_LANES && *k < left && max_sym < 255) {
        in[*k] = payload + *pos;
        st = tq_rans_stream_size(ctx, in[*k], len - *pos, &size[*k], &max_sym);
        if (!st) *pos += size[(*k)++];
    }
    if (!st) st = tq_rans_decode_many(ctx, *k, in, size, sym, n);
    for (size_t i = 0; !st && i < *k * n; i++) idx[i] = unzigzag(sym[i]); /* vectorized */
    /* the escapes: only the last stream's, the others' symbols are below 255 */
    for (size_t i = (*k - 1) * n; !st && max_sym == 255 && i < *k * n; i++) {
        if (sym[i] != 255) continue;
        if (*pos + 2 > len)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: escapes past its end");
        idx[i] = unzigzag((uint16_t)(payload[*pos] | payload[*pos + 1] << 8));
        *pos += 2;
    }
    return st;
}

/* The streams of rans_pack back into idx[nc][n]; TQ_ERR_CORRUPT where they do not fill the
 * payload exactly. */
static tq_status rans_unpack(tq_ctx *ctx, const uint8_t *payload, uint64_t len, uint64_t nc,
                             uint32_t n, int16_t *idx)
{
    uint8_t *sym = malloc((size_t)TQ_RANS_LANES * (n ? n : 1)); /* [lanes][n] */
    if (!sym) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint64_t pos = 0;
    tq_status st = TQ_OK;
    for (uint64_t c = 0; !st && c < nc;) {
        size_t k = 0;
        st = rans_unpack_lanes(ctx, payload, len, &pos, nc - c, n, sym, idx + c * n, &k);
        c += k;
    }
    if (!st && pos != len)
        st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: %llu bytes after its streams",
                              (unsigned long long)(len - pos));
    free(sym);
    return st;
}

/* The gains codes[nh][n] at payload: a rANS stream a head, or n bytes a head; *len their
 * length. */
static tq_status gains_pack(tq_ctx *ctx, const uint8_t *codes, uint64_t nh, uint32_t n, int rans,
                            uint8_t *payload, uint64_t *len)
{
    if (!rans) {
        memcpy(payload, codes, nh * n);
        *len = nh * n;
        return TQ_OK;
    }
    size_t cap = tq_rans_bound(n), used[TQ_RANS_LANES];
    uint8_t *room = malloc(TQ_RANS_LANES * cap); /* [lanes][cap] */
    if (!room) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint8_t *out[TQ_RANS_LANES];
    for (int j = 0; j < TQ_RANS_LANES; j++) out[j] = room + j * cap;
    tq_status st = TQ_OK;
    uint64_t pos = 0;
    for (uint64_t h0 = 0; !st && h0 < nh; h0 += TQ_RANS_LANES) {
        size_t k = nh - h0 < TQ_RANS_LANES ? (size_t)(nh - h0) : TQ_RANS_LANES;
        st = tq_rans_encode_many(ctx, k, codes + h0 * n, n, out, cap, used);
        for (size_t j = 0; !st && j < k; j++) {
            memcpy(payload + pos, out[j], used[j]);
            pos += used[j];
        }
    }
    free(room);
    *len = pos;
    return st;
}

/* gains_pack's bytes back into codes[nh][n]; *used their length. */
static tq_status gains_unpack(tq_ctx *ctx, const uint8_t *payload, uint64_t len, uint64_t nh,
                              uint32_t n, int rans, uint8_t *codes, uint64_t *used)
{
    if (!rans && len < nh * n)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "transform chunk: its gains cut short");
    if (!rans) {
        memcpy(codes, payload, nh * n);
        *used = nh * n;
        return TQ_OK;
    }
    uint64_t pos = 0;
    tq_status st = TQ_OK;
    for (uint64_t h0 = 0; !st && h0 < nh; h0 += TQ_RANS_LANES) {
        size_t k = nh - h0 < TQ_RANS_LANES ? (size_t)(nh - h0) : TQ_RANS_LANES;
        const uint8_t *in[TQ_RANS_LANES];
        size_t size[TQ_RANS_LANES];
        uint32_t max_sym;
        for (size_t j = 0; !st && j < k; j++) {
            in[j] = payload + pos;
            st = tq_rans_stream_size(ctx, in[j], len - pos, &size[j], &max_sym);
            if (!st) pos += size[j];
        }
        if (!st) st = tq_rans_decode_many(ctx, k, in, size, codes + h0 * n, n);
    }
    *used = pos;
    return st;
}

/* Indices idx[nv] as a byte each, then the escaped ones' u16 codes; *len the length. */
static void bytes_pack(const int16_t *idx, uint64_t nv, uint8_t *payload, uint64_t *len)
{
    uint64_t esc = nv, n_esc = 0;
    for (uint64_t i = 0; i < nv; i++) { /* a loop the compiler vectorizes */
        uint16_t u = zigzag(idx[i]);
        payload[i] = (uint8_t)(u < 255 ? u : 255);
        n_esc += u >= 255;
    }
    for (uint64_t i = 0; n_esc && i < nv; i++) { /* the full indices after the bytes */
        uint16_t u = zigzag(idx[i]);
        if (u >= 255) {
            payload[esc++] = (uint8_t)u;
            payload[esc++] = (uint8_t)(u >> 8);
        }
    }
    *len = esc;
}

tq_status tq_kvsnap_klt_encode(tq_ctx *ctx, const tqkv_record *t, float *x, uint32_t row0,
                               uint32_t n, uint8_t *payload, uint64_t *len)
{
    uint32_t d = t->group;
    uint64_t nh = t->width / d, nc = tqkv_klt_components(t), g_len = 0, i_len = 0;
    int16_t *idx = malloc((nc ? nc : 1) * n * sizeof *idx);      /* [nc][n]: heads' components */
    uint8_t *codes = t->klt_gain ? malloc(nh * n) : NULL;         /* [nh][n]: the rows' gains */
    if (!idx || (t->klt_gain && !codes)) {
        free(idx);
        free(codes);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_status st = TQ_OK;
    if (t->rope_pos) st = tq_rope_unrotate(ctx, &t->rope, x, n, t->width, t->rope_pos + row0);
    for (uint32_t r = 0; !st && t->offset && r < n; r++)
        for (uint64_t j = 0; j < t->width; j++) x[(size_t)r * t->width + j] -= t->offset[j];
    if (!st && codes) scale_to_gains(x, n, t->width, d, codes);
    uint64_t c0 = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        tq_klt k = {d, t->klt[h].m, t->klt[h].step * step_scale(t), t->klt[h].basis};
        st = tq_klt_encode(ctx, &k, x + h * d, n, t->width, idx + c0 * n);
        c0 += t->klt[h].m;
    }
    int rans = tqkv_chunk_rans(t, row0);
    if (!st && codes) st = gains_pack(ctx, codes, nh, n, rans, payload, &g_len);
    if (!st && rans)
        st = rans_pack(ctx, idx, nc, n, payload + g_len, &i_len);
    else if (!st)
        bytes_pack(idx, nc * n, payload + g_len, &i_len);
    *len = g_len + i_len;
    free(idx);
    free(codes);
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
    uint64_t nh = t->width / d, nc = tqkv_klt_components(t), g_len = 0;
    int16_t *idx = malloc((nc ? nc : 1) * n * sizeof *idx); /* [nc][n] */
    uint8_t *codes = t->klt_gain ? malloc(nh * n) : NULL;    /* [nh][n] */
    tq_status st = idx && (codes || !t->klt_gain)
                       ? TQ_OK
                       : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    int rans = tqkv_chunk_rans(t, row0);
    if (!st && codes) st = gains_unpack(ctx, payload, len, nh, n, rans, codes, &g_len);
    if (!st)
        st = rans ? rans_unpack(ctx, payload + g_len, len - g_len, nc, n, idx)
                         : bytes_unpack(ctx, payload + g_len, len - g_len, nc * n, idx);
    uint64_t c0 = 0;
    for (uint64_t h = 0; !st && h < nh; h++) {
        tq_klt k = {d, t->klt[h].m, t->klt[h].step * step_scale(t), t->klt[h].basis};
        st = tq_klt_decode(ctx, &k, idx + c0 * n, n, y + h * d, t->width);
        c0 += t->klt[h].m;
    }
    if (!st) gains_and_offset(y, n, t->width, d, codes, t->offset);
    free(idx);
    free(codes);
    if (!st && t->rope_pos) st = tq_rope_rotate(ctx, &t->rope, y, n, t->width, t->rope_pos + row0);
    return st;
}

/* zstd's Huffman table serves one block: blocks of components of like
 * spread (the components come strongest first) of about BLOCK_BYTES */
enum { BLOCK_BYTES = 32 << 10 };

int tq_kvsnap_klt_cuts(const tqkv_record *t, uint32_t n, uint64_t *cuts)
{
    uint64_t nc = tqkv_klt_components(t), per = n ? (BLOCK_BYTES + n - 1) / n : 1, k = 0;
    uint64_t gains = t->klt_gain ? t->width / t->group * n : 0; /* a block of their own */
    if (per < 1) per = 1;
    if (gains) cuts[k++] = gains;
    for (uint64_t c = per; c < nc && k + 1 < KLT_MAX_CUTS; c += per) cuts[k++] = gains + c * n;
    cuts[k++] = gains + nc * n; /* the escapes */
    return (int)k;
}
