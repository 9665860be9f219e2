/* gguf_stats.c - a GGUF model's tensors in numbers (gguf_stats.h). */
#include "gguf_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STAT_CHUNK (1u << 16) /* values per unit of work */

/* Two passes over the dequantized tensor: moments, then the count beyond
 * 6 RMS, which revisits only chunks whose largest magnitude passes that
 * threshold (rare: usually the second pass reads nothing).  Chunks are
 * combined in order, so the result is the same for any thread count. */
static int stats_of(const void *data, const tq_ggml_type *ty, int64_t nel, int threads,
                    tq_gguf_stats *out)
{
    memset(out, 0, sizeof *out);
    if (ty->dtype < 0 || nel <= 0) return 0;
    uint64_t chunk = STAT_CHUNK - STAT_CHUNK % ty->block;
    if (!chunk) chunk = ty->block;
    uint64_t nchunks = ((uint64_t)nel + chunk - 1) / chunk;
    tq_moments *mo = malloc(nchunks * sizeof *mo);
    uint64_t *beyond = calloc(nchunks, sizeof *beyond);
    int failed = !mo || !beyond;
    float thr = 0;
    for (int pass = 0; pass < 2 && !failed; pass++) {
#pragma omp parallel num_threads(threads)
        {
            float *buf = malloc(chunk * sizeof(float));
            tq_ctx *ctx = tq_ctx_new();
            if (!buf || !ctx)
                failed = 1;
            else
                tq_ctx_set_threads(ctx, 1);
#pragma omp for schedule(dynamic, 4)
            for (uint64_t c = 0; c < nchunks; c++) {
                if (failed) continue;
                if (pass == 1 && fmax(-mo[c].min, mo[c].max) <= thr) continue;
                uint64_t v0 = c * chunk;
                uint64_t m = (uint64_t)nel - v0 < chunk ? (uint64_t)nel - v0 : chunk;
                const uint8_t *src = (const uint8_t *)data + v0 / ty->block * ty->bytes;
                if (tq_dequantize(ctx, (tq_dtype)ty->dtype, src, m, buf)) {
                    failed = 1;
                    continue;
                }
                if (pass == 0) {
                    tq_moments_init(&mo[c]);
                    tq_moments_add(&mo[c], buf, m);
                } else {
                    beyond[c] = tq_count_beyond(buf, m, thr);
                }
            }
            free(buf);
            tq_ctx_free(ctx);
        }
        if (pass == 0 && !failed) {
            tq_moments all;
            tq_moments_init(&all);
            for (uint64_t c = 0; c < nchunks; c++) tq_moments_merge(&all, &mo[c]);
            tq_moments_summary(&all, NULL, &out->rms, &out->kurtosis);
            out->min = all.min;
            out->max = all.max;
            thr = (float)(6.0 * out->rms);
        }
    }
    uint64_t b = 0;
    for (uint64_t c = 0; !failed && c < nchunks; c++) b += beyond[c];
    free(mo);
    free(beyond);
    if (failed) return -1;
    out->beyond6 = (double)b / (double)nel;
    out->have = 1;
    out->n = (uint64_t)nel;
    return 0;
}

tq_status tq_gguf_tensor_stats(tq_ctx *ctx, const tq_gguf *g, int64_t i, int threads,
                               tq_gguf_stats *out)
{
    if (stats_of(tq_gguf_tensor_data(g, i), tq_gguf_tensor_type(g, i),
                 tq_gguf_tensor_nelements(g, i), threads, out))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "tensor '%s': statistics failed",
                                tq_gguf_tensor_name(g, i));
    return TQ_OK;
}

tq_status tq_gguf_stats_all(tq_ctx *ctx, const tq_gguf *g, int threads, tq_gguf_stats *st,
                            double *bytes,
                            void (*on_tensor)(void *user, int64_t i, int64_t n, const char *name),
                            void *user)
{
    int64_t n = tq_gguf_n_tensors(g);
    *bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        if (on_tensor) on_tensor(user, i, n, tq_gguf_tensor_name(g, i));
        tq_status st_i = tq_gguf_tensor_stats(ctx, g, i, threads, &st[i]);
        if (st_i) return st_i;
        if (st[i].have) *bytes += (double)tq_gguf_tensor_nbytes(g, i);
    }
    return TQ_OK;
}

void tq_gguf_totals_of(const tq_gguf *g, tq_gguf_totals *t)
{
    memset(t, 0, sizeof *t);
    int max = (int)(sizeof t->by_type / sizeof *t->by_type);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        double weights = (double)tq_gguf_tensor_nelements(g, i);
        double bytes = (double)tq_gguf_tensor_nbytes(g, i);
        t->weights += weights;
        t->bytes += bytes;
        const char *name = tq_gguf_tensor_type(g, i)->name;
        int k = 0;
        while (k < t->n_types && strcmp(t->by_type[k].name, name)) k++;
        if (k == t->n_types) {
            if (k == max) continue;
            t->by_type[t->n_types++] = (tq_gguf_type_total){name, 0, 0, 0};
        }
        t->by_type[k].tensors++;
        t->by_type[k].weights += weights;
        t->by_type[k].bytes += bytes;
    }
}

const char *tq_gguf_profile_source(const tq_gguf *g, int explicit_profile)
{
    if (tq_gguf_find_key(g, "tq.type_profile") >= 0) return "file";
    if (explicit_profile) return "option";
    return tq_gguf_profile_assumed(g) ? "assumed" : "default";
}
