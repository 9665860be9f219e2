/* bench_weights.c - the weight codecs measured (bench_measure.h).  `tq bench weights`: TQ4_1S and
 * TQ3_1S on generated Gaussian weights with rare outliers, the fork's search beside tq's, the
 * scalar kernels beside the SIMD ones, timed interleaved.  `tq bench --model M.gguf` without
 * --kv: up to 16 weight matrices spread over the file (their first Mi values each),
 * dequantized from whatever type they have, then coded with every weight type tq writes:
 * relative squared error against those values, bits per weight, encode speed on one core. */
#include "bench_measure.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wcodec {
    const char *name;
    int dtype; /* tq_dtype */
    int fork;  /* TQ types: the fork's search */
} wcodec;

static const wcodec wl[] = {{"tq4_1s (tq search)", TQ_DT_TQ4_1S, 0},
                            {"tq4_1s (fork search)", TQ_DT_TQ4_1S, 1},
                            {"tq3_1s (tq search)", TQ_DT_TQ3_1S, 0},
                            {"q8_0", TQ_DT_Q8_0, 0},
                            {"q6_K", TQ_DT_Q6_K, 0},
                            {"q5_K", TQ_DT_Q5_K, 0},
                            {"q4_K", TQ_DT_Q4_K, 0},
                            {"q4_0", TQ_DT_Q4_0, 0}};
enum { NW = sizeof wl / sizeof *wl };
_Static_assert(NW == BWT_MODEL_CODECS, "bench_measure.h's count of the weight codecs");

static int coded(tq_ctx *ctx, const wcodec *w, tq_codec *const *tc, const float *x, size_t n,
                 uint8_t *buf, float *y)
{
    if (w->dtype == TQ_DT_TQ4_1S || w->dtype == TQ_DT_TQ3_1S) {
        tq_codec *c = tc[w->dtype == TQ_DT_TQ3_1S];
        tq_codec_set_weight_search(ctx, c, w->fork ? TQ_WSEARCH_FORK : TQ_WSEARCH_BEST);
        return tq_encode(ctx, c, x, n, buf) || (y && tq_decode(ctx, c, buf, n, y)) ? -1 : 0;
    }
    return tq_quantize(ctx, (tq_dtype)w->dtype, x, n, buf) ||
                   (y && tq_dequantize(ctx, (tq_dtype)w->dtype, buf, n, y))
               ? -1
               : 0;
}

/* A tensor tq can sample: a matrix of a type it decodes, rows of whole 32s. */
static int sampled(const tq_gguf *g, int64_t i)
{
    return tq_gguf_tensor_n_dims(g, i) >= 2 && tq_gguf_tensor_type(g, i)->dtype >= 0 &&
           tq_gguf_tensor_ne(g, i)[0] % 32 == 0;
}

/* Sums over the sampled matrices, per codec of wl. */
typedef struct wsums {
    double se[NW], sxc[NW], vals[NW], bytes[NW];
} wsums;

/* Tensor i's first values (at most cap) into x, coded with every codec of wl; the count. */
static size_t sample(tq_ctx *ctx, const tq_gguf *g, int64_t i, size_t cap, tq_codec *const *tc,
                     float *x, float *y, uint8_t *buf, wsums *ws)
{
    const tq_ggml_type *ty = tq_gguf_tensor_type(g, i);
    int64_t ne0 = tq_gguf_tensor_ne(g, i)[0];
    size_t rows = cap / (size_t)ne0;
    size_t all = (size_t)(tq_gguf_tensor_nelements(g, i) / ne0);
    if (rows > all) rows = all;
    size_t n = rows * (size_t)ne0;
    if (!n || tq_dequantize(ctx, (tq_dtype)ty->dtype, tq_gguf_tensor_data(g, i), n, x)) return 0;
    double sx = 0;
    for (size_t j = 0; j < n; j++) sx += (double)x[j] * x[j];
    for (int c = 0; c < NW; c++) { /* K-quants only where rows are whole superblocks */
        size_t bv = tq_dtype_block_values((tq_dtype)wl[c].dtype);
        if (ne0 % (int64_t)bv || coded(ctx, &wl[c], tc, x, n, buf, y)) continue;
        for (size_t j = 0; j < n; j++) ws->se[c] += (double)(x[j] - y[j]) * (x[j] - y[j]);
        ws->sxc[c] += sx;
        ws->vals[c] += (double)n;
        ws->bytes[c] += (double)n / bv * tq_dtype_block_bytes((tq_dtype)wl[c].dtype);
    }
    return n;
}

/* Each codec's encode speed on x's n values, one core: the median of reps after a warm-up. */
static void time_codecs(tq_ctx *ctx, tq_codec *const *tc, const float *x, size_t n, int reps,
                        uint8_t *buf, const wsums *ws, bwt_model_result *res)
{
    double t[64];
    if (reps > 64) reps = 64;
    for (int c = 0; c < NW; c++) {
        res->encode_mws[c] = NAN;
        if (!n || !ws->vals[c]) continue;
        for (int r = -1; r < reps; r++) {
            double a = bench_now();
            coded(ctx, &wl[c], tc, x, n, buf, NULL);
            if (r >= 0) t[r] = bench_now() - a;
        }
        res->encode_mws[c] = n / bench_median(t, reps) / 1e6;
    }
}

tq_status bwt_model(tq_ctx *ctx, const tq_gguf *g, int quick, int reps, bwt_model_result *res)
{
    memset(res, 0, sizeof *res);
    int64_t nt = tq_gguf_n_tensors(g);
    int64_t cand = 0;
    for (int64_t i = 0; i < nt; i++) cand += sampled(g, i);
    if (!cand)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "no weight matrix tq can decode with rows of 32s");
    int64_t want = quick ? 4 : 16;
    int64_t every = (cand + want - 1) / want;
    int64_t k = 0;
    res->cap = quick ? (1u << 18) : (1u << 20);
    tq_ctx_set_threads(ctx, 1);
    tq_codec *tc[2] = {NULL, NULL};
    tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TQ4_1S}, &tc[0]);
    tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TQ3_1S}, &tc[1]);
    wsums ws;
    memset(&ws, 0, sizeof ws);
    float *x = malloc(res->cap * 4);   /* [cap]: a tensor's sample, the last one timed */
    float *y = malloc(res->cap * 4);   /* [cap]: decoded */
    uint8_t *buf = malloc(res->cap * 4); /* [cap * 4]: coded */
    for (int64_t i = 0; x && y && buf && i < nt; i++) {
        if (!sampled(g, i) || k++ % every) continue;
        size_t n = sample(ctx, g, i, res->cap, tc, x, y, buf, &ws);
        if (!n) continue;
        res->total += (double)n;
        res->used++;
    }
    size_t n = (size_t)(res->total > res->cap ? res->cap : res->total);
    n -= n % 256; /* x holds the last tensor's sample */
    time_codecs(ctx, tc, x, n, reps, buf, &ws, res);
    for (int c = 0; c < NW; c++) {
        res->name[c] = wl[c].name;
        res->bits[c] = ws.vals[c] ? 8 * ws.bytes[c] / ws.vals[c] : NAN;
        res->rel_error[c] = ws.sxc[c] ? ws.se[c] / ws.sxc[c] : NAN;
    }
    int short_of_memory = !x || !y || !buf;
    free(x);
    free(y);
    free(buf);
    tq_codec_free(tc[0]);
    tq_codec_free(tc[1]);
    if (short_of_memory) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

/* ------------------------------------------------------ generated weights */

/* A standard normal value from a splitmix64 stream (two draws, Box-Muller). */
static double randn(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    unsigned long long w = (*state += 0x9E3779B97F4A7C15ull);
    w = (w ^ (w >> 30)) * 0xBF58476D1CE4E5B9ull;
    w = (w ^ (w >> 27)) * 0x94D049BB133111EBull;
    w ^= w >> 31;
    double u1 = ((z >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (w >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

typedef tq_status (*run_fn)(tq_ctx *, const tq_codec *, const void *, size_t, void *);

static tq_status run_encode(tq_ctx *ctx, const tq_codec *c, const void *in, size_t n, void *out)
{
    return tq_encode(ctx, c, in, n, out);
}

static tq_status run_decode(tq_ctx *ctx, const tq_codec *c, const void *in, size_t n, void *out)
{
    return tq_decode(ctx, c, in, n, out);
}

static double time_once(tq_ctx *ctx, run_fn fn, const tq_codec *c, const void *in, size_t n,
                        void *out)
{
    double t0 = bench_now();
    if (fn(ctx, c, in, n, out) != TQ_OK) return -1.0;
    return bench_now() - t0;
}

/* One configuration of a measurement: which kernel runs and how. */
typedef struct config {
    tq_simd simd;
    int threads;
    run_fn fn;
    double t[64];
} config;

/* Speeds in Mw/s: encode scalar, SIMD; decode scalar, SIMD (one core); encode, decode on all
 * threads.  The
 * configurations run interleaved, one after another within each repetition, so a slow phase
 * of a shared machine hits all of them alike and their ratios stay meaningful; each figure is
 * the median over repetitions. */
static tq_status measure(tq_ctx *ctx, const tq_codec *c, const float *x, size_t n, void *blk,
                         float *y, const bwt_opts *o, double speed[6])
{
    tq_simd best = tq_simd_best();
    config cf[6] = {
        {TQ_SIMD_SCALAR, 1, run_encode, {0}}, {best, 1, run_encode, {0}},
        {TQ_SIMD_SCALAR, 1, run_decode, {0}}, {best, 1, run_decode, {0}},
        {best, o->threads, run_encode, {0}},  {best, o->threads, run_decode, {0}},
    };
    int reps = o->reps > 64 ? 64 : o->reps;
    for (int rep = -1; rep < reps; rep++) /* rep -1 warms caches and pages */
        for (int i = 0; i < 6; i++) {
            tq_ctx_set_simd(ctx, cf[i].simd);
            tq_ctx_set_threads(ctx, cf[i].threads);
            int enc = cf[i].fn == run_encode;
            const void *in = enc ? (const void *)x : blk;
            void *out = enc ? blk : (void *)y;
            double t = time_once(ctx, cf[i].fn, c, in, n, out);
            if (t < 0) return tq_ctx_status(ctx);
            if (rep >= 0) cf[i].t[rep] = t;
        }
    for (int i = 0; i < 6; i++) speed[i] = n * 1e-6 / bench_median(cf[i].t, reps);
    return TQ_OK;
}

static double rel_mse(const float *x, const float *y, size_t n)
{
    double e = 0;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        e += d * d;
        s += (double)x[i] * x[i];
    }
    return s > 0 ? e / s : 0;
}

/* One codec's row: both searches' errors, the fork's scalar encode, tq's speeds. */
static tq_status generated_row(tq_ctx *ctx, tq_codec *c, const float *x, size_t n, void *blk,
                               float *y, const bwt_opts *o, bwt_row *row)
{
    tq_ctx_set_threads(ctx, 0);
    tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
    tq_encode(ctx, c, x, n, blk);
    tq_decode(ctx, c, blk, n, y);
    row->rel_mse_fork = rel_mse(x, y, n);
    tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
    tq_encode(ctx, c, x, n, blk);
    tq_decode(ctx, c, blk, n, y);
    row->rel_mse_best = rel_mse(x, y, n);
    double fork[6];
    double best[6];
    tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
    tq_status st = measure(ctx, c, x, n, blk, y, o, fork);
    tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
    if (!st) st = measure(ctx, c, x, n, blk, y, o, best);
    snprintf(row->name, sizeof row->name, "%s", tq_codec_name(c));
    row->bits = 8.0 * tq_codec_block_bytes(c) / 32;
    row->enc_fork = fork[0];
    row->enc_simd = best[1];
    row->dec_scalar = best[2];
    row->dec_simd = best[3];
    row->enc_all = best[4];
    row->dec_all = best[5];
    return st;
}

tq_status bwt_generated(tq_ctx *ctx, const bwt_opts *o, bwt_row rows[2])
{
    size_t n = o->values;
    float *x = malloc(n * sizeof(float)); /* [n] */
    float *y = malloc(n * sizeof(float)); /* [n] */
    void *blk = malloc(n);                /* [n] bytes: at most 8 bits a weight */
    tq_status st = TQ_OK;
    if (!x || !y || !blk)
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory for %zu values", n);
    if (!st) st = tq_ctx_set_backend(ctx, TQ_BACKEND_CPU); /* the CPU's kernels are compared */
    unsigned long long rng = 7;
    for (size_t i = 0; !st && i < n; i++)
        x[i] = (float)(0.02 * randn(&rng) * (i % 4096 == 17 ? 20 : 1));
    tq_codec_kind kinds[2] = {TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S};
    for (int i = 0; i < 2 && !st; i++) {
        tq_codec_desc d = {.kind = kinds[i]};
        tq_codec *c = NULL;
        st = tq_codec_new(ctx, &d, &c);
        if (!st) st = generated_row(ctx, c, x, n, blk, y, o, &rows[i]);
        tq_codec_free(c);
    }
    free(x);
    free(y);
    free(blk);
    return st;
}
