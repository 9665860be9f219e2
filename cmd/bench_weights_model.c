/* bench_weights_model.c - `tq bench --model M.gguf` without --kv: the weight
 * codecs on the model's own tensors.  Up to 16 weight matrices spread over
 * the file (their first Mi values each), dequantized from whatever type they
 * have, then coded with every weight type tq writes: relative squared error
 * against those values, bits per weight, encode speed on one core. */
#include "bench_kv.h"
#include "cli.h"
#include "gguf.h"
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

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

/* What the run measured, for the report. */
typedef struct wresults {
    const char *path;
    int used;                              /* weight matrices sampled */
    size_t cap;                            /* values sampled per matrix at most */
    double total;                          /* weights coded */
    int reps;                              /* timed runs per codec */
    size_t n;                              /* values timed (0: none) */
    const double *se, *sxc, *vals, *bytes; /* [NW] */
    double (*t)[64];                       /* [NW][reps] seconds */
} wresults;

static double median_of(double *x, int n)
{
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (x[b] < x[a]) {
                double s = x[a];
                x[a] = x[b];
                x[b] = s;
            }
    return x[n / 2];
}

static void print_results(const wresults *w, int json)
{
    if (json) {
        printf("{\"model\": ");
        json_cstr(stdout, w->path);
        printf(", \"tensors\": %d, \"weights\": %.0f, \"codecs\": [", w->used, w->total);
    } else {
        printf("tq bench --model %s: %d weight matrices (their first %zu values each, %.0f "
               "weights), coded from\n"
               "their dequantized values (so a type a tensor already has is favoured); speed: one "
               "core, median of\n"
               "%d\n\n%-22s %8s %11s %12s\n",
               w->path, w->used, w->cap, w->total, w->reps, "type", "bits/w", "rel. error",
               "encode Mw/s");
    }
    for (int c = 0; c < NW; c++) {
        double med = NAN;
        if (w->n && w->vals[c]) med = median_of(w->t[c], w->reps);
        double bpw = w->vals[c] ? 8 * w->bytes[c] / w->vals[c] : NAN;
        double err = w->sxc[c] ? w->se[c] / w->sxc[c] : NAN;
        double mws = w->n / med / 1e6;
        if (json) {
            printf("%s{\"name\": ", c ? ", " : "");
            json_cstr(stdout, wl[c].name);
            printf(", \"bits_per_weight\": ");
            json_double(stdout, bpw, 6);
            printf(", \"rel_error\": ");
            json_double(stdout, err, 6);
            printf(", \"encode_mws\": ");
            json_double(stdout, mws, 6);
            printf("}");
        } else {
            printf("%-22s %8.3f %11.3e %12.1f\n", wl[c].name, bpw, err, mws);
        }
    }
    if (json) printf("]}\n");
}

int bench_model_weights(const char *path, int quick, int json, int reps)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g;
    if (!ctx) return cli_runtime_error("out of memory");
    if (tq_gguf_open(ctx, path, NULL, &g)) {
        int e = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return e;
    }
    tq_ctx_set_threads(ctx, 1);
    tq_codec *tc[2];
    tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TQ4_1S}, &tc[0]);
    tq_codec_new(ctx, &(tq_codec_desc){.kind = TQ_CODEC_TQ3_1S}, &tc[1]);
    int64_t nt = tq_gguf_n_tensors(g), cand = 0;
    for (int64_t i = 0; i < nt; i++)
        cand += tq_gguf_tensor_n_dims(g, i) >= 2 && tq_gguf_tensor_type(g, i)->dtype >= 0 &&
                tq_gguf_tensor_ne(g, i)[0] % 32 == 0;
    if (!cand) {
        tq_gguf_close(g);
        tq_codec_free(tc[0]);
        tq_codec_free(tc[1]);
        tq_ctx_free(ctx);
        return cli_runtime_error("%s: no weight matrix tq can decode with rows of 32s", path);
    }
    int64_t want = quick ? 4 : 16, every = (cand + want - 1) / want, k = 0;
    size_t cap = quick ? (1u << 18) : (1u << 20);
    double se[NW] = {0}, sxc[NW] = {0}, vals[NW] = {0}, bytes[NW] = {0}, t[NW][64], total = 0;
    int used = 0;
    float *x = malloc(cap * 4), *y = malloc(cap * 4);
    uint8_t *buf = malloc(cap * 4);
    for (int64_t i = 0; x && y && buf && i < nt; i++) {
        if (!(tq_gguf_tensor_n_dims(g, i) >= 2 && tq_gguf_tensor_type(g, i)->dtype >= 0 &&
              tq_gguf_tensor_ne(g, i)[0] % 32 == 0))
            continue;
        if (k++ % every) continue;
        const tq_ggml_type *ty = tq_gguf_tensor_type(g, i);
        int64_t ne0 = tq_gguf_tensor_ne(g, i)[0];
        size_t rows = cap / (size_t)ne0, all = (size_t)(tq_gguf_tensor_nelements(g, i) / ne0);
        if (rows > all) rows = all;
        size_t n = rows * (size_t)ne0;
        if (!n || tq_dequantize(ctx, (tq_dtype)ty->dtype, tq_gguf_tensor_data(g, i), n, x))
            continue;
        double sx = 0;
        for (size_t j = 0; j < n; j++) sx += (double)x[j] * x[j];
        for (int c = 0; c < NW; c++) { /* K-quants only where rows are whole superblocks */
            if (ne0 % (int64_t)tq_dtype_block_values((tq_dtype)wl[c].dtype) ||
                coded(ctx, &wl[c], tc, x, n, buf, y))
                continue;
            for (size_t j = 0; j < n; j++) se[c] += (double)(x[j] - y[j]) * (x[j] - y[j]);
            sxc[c] += sx;
            vals[c] += (double)n;
            bytes[c] += (double)n / tq_dtype_block_values((tq_dtype)wl[c].dtype) *
                        tq_dtype_block_bytes((tq_dtype)wl[c].dtype);
        }
        total += (double)n;
        used++;
    }
    /* speed: the last tensor's sample, each codec after a warm-up, median */
    size_t n = (size_t)(total > cap ? cap : total);
    n -= n % 256; /* x holds the last tensor's sample */
    for (int c = 0; n && c < NW; c++)
        for (int r = -1; r < reps; r++) {
            double a = now();
            if (!vals[c]) break;
            coded(ctx, &wl[c], tc, x, n, buf, NULL);
            if (r >= 0) t[c][r] = now() - a;
        }
    wresults res = {path, used, cap, total, reps, n, se, sxc, vals, bytes, t};
    print_results(&res, json);
    free(x);
    free(y);
    free(buf);
    tq_codec_free(tc[0]);
    tq_codec_free(tc[1]);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return 0;
}
