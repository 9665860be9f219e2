/* innerq_stats.c - see innerq_stats.h. */
#include "innerq_stats.h"
#include "kv_layers.h"

#include <stdlib.h>
#include <string.h>

struct tq_innerq_stats {
    uint32_t head_dim, n_layer, n_head;
    uint64_t width;  /* per layer, K and V alike */
    int k_only;      /* V is not read (its mean squares stay 0) */
    double *sum;     /* [layer][K, V][head][channel] */
    uint64_t *cells; /* per layer */
};

tq_status tq_innerq_stats_new(tq_ctx *ctx, uint32_t head_dim, tq_innerq_stats **out)
{
    *out = NULL;
    if (head_dim < 2 || head_dim > 4096)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "head size %u", head_dim);
    if (!(*out = calloc(1, sizeof **out)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    (*out)->head_dim = head_dim;
    return TQ_OK;
}

void tq_innerq_stats_free(tq_innerq_stats *s)
{
    if (!s) return;
    free(s->sum);
    free(s->cells);
    free(s);
}

/* The first source fixes the shape; later ones must have it. */
static tq_status shape(tq_ctx *ctx, tq_innerq_stats *s, const tq_kv_view *v, uint32_t n_layer,
                       uint64_t width)
{
    if (!s->sum) {
        if (!width || width % s->head_dim)
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                    "%s: rows of %llu values are not whole heads of %u",
                                    tq_kv_view_label(v), (unsigned long long)width, s->head_dim);
        s->n_layer = n_layer;
        s->width = width;
        s->n_head = (uint32_t)(width / s->head_dim);
        s->sum = calloc((size_t)n_layer * 2 * width, sizeof *s->sum);
        s->cells = calloc(n_layer, sizeof *s->cells);
        if (!s->sum || !s->cells) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        return TQ_OK;
    }
    if (n_layer != s->n_layer || width != s->width)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "%s: %u layers of %llu values, where the first dump has %u of %llu: dumps of different "
            "models",
            tq_kv_view_label(v), n_layer, (unsigned long long)width, s->n_layer,
            (unsigned long long)s->width);
    return TQ_OK;
}

/* Layer l of a stream: each row's squares into the layer's K (and V) sums. */
static tq_status add_layer(tq_ctx *ctx, tq_innerq_stats *s, const tq_kv_stream *sr, uint32_t l,
                           uint32_t ml, float *rows)
{
    enum { STEP = 256 }; /* rows: [STEP][width] */
    tq_status st = TQ_OK;
    for (int isv = 0; !st && isv < (sr->v ? 2 - s->k_only : 1); isv++) {
        double *acc = s->sum + ((size_t)ml * 2 + isv) * s->width;
        for (uint32_t c0 = 0; !st && c0 < sr->cell_count; c0 += STEP) {
            uint32_t n = sr->cell_count - c0 < STEP ? sr->cell_count - c0 : STEP;
            st = tq_kv_view_read_rows(ctx, isv ? &sr->v[l] : &sr->k[l], sr->cell_count, c0, n,
                                      rows);
            for (uint32_t r = 0; !st && r < n; r++)
                for (uint64_t e = 0; e < s->width; e++)
                    acc[e] += (double)rows[r * s->width + e] * rows[r * s->width + e];
        }
    }
    return st;
}

/* A stream's layers into the sums, a layer a worker: a stream's layers are distinct model
 * layers, so each sum has one writer and takes its rows in the same order whatever the thread
 * count. */
static tq_status add_stream(tq_ctx *ctx, tq_innerq_stats *s, const tq_kv_view *v,
                            const tq_cache_layers *L, uint32_t i, const tq_kv_stream *sr)
{
    uint32_t n_layer = sr->cell_count ? sr->n_layer : 0;
    uint32_t *ml = malloc((n_layer ? n_layer : 1) * sizeof *ml); /* [n_layer]: model layers */
    if (!ml) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < n_layer; l++) {
        ml[l] = tq_kv_view_n_kv(v) == 2 ? tq_cache_layers_model(L, i, l) : l;
        if (ml[l] >= s->n_layer) {
            free(ml);
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: cache %u layer %u has no model layer",
                                    tq_kv_view_label(v), i, l);
        }
    }
    size_t first = SIZE_MAX;
#pragma omp parallel num_threads(tq_ctx_threads(ctx)) if (n_layer > 1)
    {
        tq_ctx *wc = tq_ctx_clone(ctx);
        float *rows = malloc(256 * s->width * sizeof *rows);
#pragma omp for schedule(dynamic, 1)
        for (uint32_t l = 0; l < n_layer; l++) {
            tq_status st = wc && rows ? add_layer(wc, s, sr, l, ml[l], rows) : TQ_ERR_NOMEM;
            if (st) tq_ctx_keep_first(ctx, &first, l, rows ? wc : NULL);
        }
        free(rows);
        tq_ctx_free(wc);
    }
    for (uint32_t l = 0; first == SIZE_MAX && l < n_layer; l++) s->cells[ml[l]] += sr->cell_count;
    free(ml);
    return first == SIZE_MAX ? TQ_OK : tq_ctx_status(ctx);
}

tq_status tq_innerq_stats_add(tq_ctx *ctx, tq_innerq_stats *s, const tq_kv_view *v,
                              const tq_model *model)
{
    tq_cache_layers L;
    tq_status st = tq_cache_layers_make(ctx, v, model, &L);
    if (st) return st;
    uint32_t n_layer = 0, any = 0;
    uint64_t width = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++) {
        const tq_kv_state *k = tq_kv_view_kv(v, i);
        if (k->n_stream) n_layer += tq_kv_state_stream(k)->n_layer;
        for (uint32_t j = 0; j < k->n_stream; j++) {
            any += k->streams[j].cell_count > 0;
            for (uint32_t l = 0; l < k->streams[j].n_layer && k->streams[j].cell_count; l++) {
                uint64_t w = k->streams[j].k[l].width;
                if ((width && w != width) || !k->streams[j].v || k->streams[j].v[l].width != w)
                    st = tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "%s: layers of different widths",
                                          tq_kv_view_label(v));
                width = w;
            }
        }
    }
    if (!st && !any)
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "%s: no cells: an empty dump", tq_kv_view_label(v));
    if (!st && tq_kv_view_n_kv(v) == 2 && !tq_cache_layers_known(&L))
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG,
                              "%s: two caches (iSWA) whose layers cannot be matched to the model's "
                              "(give --model)",
                              tq_kv_view_label(v));
    if (!st) st = shape(ctx, s, v, n_layer, width);
    for (uint32_t i = 0; !st && i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; !st && j < tq_kv_view_kv(v, i)->n_stream; j++)
            st = add_stream(ctx, s, v, &L, i, &tq_kv_view_kv(v, i)->streams[j]);
    tq_cache_layers_free(&L);
    return st;
}

void tq_innerq_stats_k_only(tq_innerq_stats *s) { s->k_only = 1; }
uint32_t tq_innerq_stats_layers(const tq_innerq_stats *s) { return s->n_layer; }
uint32_t tq_innerq_stats_heads(const tq_innerq_stats *s) { return s->n_head; }
uint32_t tq_innerq_stats_head_dim(const tq_innerq_stats *s) { return s->head_dim; }
uint64_t tq_innerq_stats_cells(const tq_innerq_stats *s, uint32_t layer)
{
    return layer < s->n_layer ? s->cells[layer] : 0;
}

void tq_innerq_stats_mean2(const tq_innerq_stats *s, uint32_t l, uint32_t h, int is_v, double *out)
{
    const double *acc = s->sum + ((size_t)l * 2 + (is_v != 0)) * s->width + (size_t)h * s->head_dim;
    double n = l < s->n_layer && s->cells[l] ? (double)s->cells[l] : 1.0;
    for (uint32_t j = 0; j < s->head_dim; j++) out[j] = acc[j] / n;
}
