/* bench_workload.c - what `tq bench` measures on.  Built in: generated K/V
 * with the structure real caches have (per-channel offsets and a few
 * outlier channels in K, RoPE on adjacent pairs by position, layers of
 * different scale, head sizes 64, 128 and 256) and queries with K's channel
 * structure at later positions.  From a file: every head of a state, dump or
 * snapshot's K/V (sampled), with the last cells' keys standing in for
 * queries over the earlier cells (a real cache keeps no queries). */
#include "bench_measure.h"
#include "kv_plan.h"
#include "kv_snapshot.h"
#include "kv_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double randn(uint64_t *s)
{
    uint64_t a = (*s += 0x9E3779B97F4A7C15ull), b = (*s += 0x9E3779B97F4A7C15ull);
    a = (a ^ (a >> 30)) * 0xBF58476D1CE4E5B9ull;
    a = (a ^ (a >> 27)) * 0x94D049BB133111EBull;
    a ^= a >> 31;
    b = (b ^ (b >> 30)) * 0xBF58476D1CE4E5B9ull;
    b = (b ^ (b >> 27)) * 0x94D049BB133111EBull;
    b ^= b >> 31;
    double u1 = ((a >> 11) + 0.5) / 9007199254740992.0, u2 = (b >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* RoPE on adjacent pairs (llama.cpp's normal mode), base 10000 */
static void rope(float *x, uint32_t d, uint32_t pos)
{
    for (uint32_t i = 0; i < d / 2; i++) {
        double th = pos * pow(10000.0, -2.0 * i / d), c = cos(th), s = sin(th);
        double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = (float)(a * c - b * s);
        x[2 * i + 1] = (float)(a * s + b * c);
    }
}

static int gen_head(bhead *h, uint32_t d, uint32_t n, uint32_t m, uint32_t layer, uint32_t n_layers,
                    uint64_t seed)
{
    static const double scale[4] = {0.3, 1.0, 3.0, 10.0};
    uint64_t s = seed;
    double sl = scale[layer % 4], *off = malloc(d * sizeof *off), *sig = malloc(d * sizeof *sig);
    *h = (bhead){d,
                 n,
                 m,
                 layer,
                 n_layers,
                 malloc((size_t)n * d * 4),
                 malloc((size_t)n * d * 4),
                 malloc((size_t)m * d * 4)};
    if (!off || !sig || !h->k || !h->v || !h->q) {
        free(off);
        free(sig);
        return -1;
    }
    for (uint32_t j = 0; j < d; j++) {
        int hot = j % 37 == 5 || j % 53 == 11; /* about 5% outlier channels */
        off[j] = 0.5 * randn(&s) * (hot ? 4 : 1);
        sig[j] = (0.5 + 0.5 * fabs(randn(&s))) * (hot ? 6 : 1);
    }
    for (uint32_t t = 0; t < n; t++) {
        float *k = h->k + (size_t)t * d, *v = h->v + (size_t)t * d;
        for (uint32_t j = 0; j < d; j++) {
            k[j] = (float)(sl * (off[j] + sig[j] * randn(&s)));
            v[j] = (float)(sl * (j % 41 == 7 ? 3 : 1) * randn(&s));
        }
        rope(k, d, t);
    }
    for (uint32_t i = 0; i < m;
         i++) { /* queries: K's channels, scaled so scores spread over a few units */
        float *q = h->q + (size_t)i * d;
        for (uint32_t j = 0; j < d; j++)
            q[j] = (float)(2.5 / sl / sqrt(d) * (off[j] + sig[j] * randn(&s)) * 3);
        rope(q, d, n + i);
    }
    free(off);
    free(sig);
    return 0;
}

int bw_builtin(bworkload *w, int quick)
{
    static const uint32_t dims[3] = {64, 128, 256};
    uint32_t layers = quick ? 2 : 4, heads = quick ? 1 : 2, n = quick ? 256 : 1024,
             m = quick ? 8 : 16;
    memset(w, 0, sizeof *w);
    w->h = calloc(3 * layers * heads, sizeof *w->h);
    if (!w->h) return -1;
    for (int di = 0; di < 3; di++)
        for (uint32_t l = 0; l < layers; l++)
            for (uint32_t hh = 0; hh < heads; hh++)
                if (gen_head(&w->h[w->n_heads++], dims[di], n, m, l, layers,
                             1000u * dims[di] + 10u * l + hh))
                    return -1;
    snprintf(w->what, sizeof w->what,
             "built-in: head sizes 64/128/256, %u layers (scales 0.3..10) x %u heads, %u keys, %u "
             "queries per head",
             layers, heads, n, m);
    return 0;
}

/* KV head hd of rows rk/rv[n + m][wd] as a workload head: the first n cells' K and V, the
 * last m cells' keys as query proxies; -1 when out of memory. */
static int take_head(bhead *h, const float *rk, const float *rv, uint64_t wd, uint32_t hd,
                     uint32_t d, uint32_t n, uint32_t m, uint32_t layer, uint32_t n_layer)
{
    *h = (bhead){d,
                 n,
                 m,
                 layer,
                 n_layer,
                 malloc((size_t)n * d * 4),
                 malloc((size_t)n * d * 4),
                 malloc((size_t)m * d * 4)};
    if (!h->k || !h->v || !h->q) return -1;
    for (uint32_t c = 0; c < n + m; c++) {
        const float *ks = rk + ((size_t)c * wd + (size_t)hd * d),
                    *vs = rv + ((size_t)c * wd + (size_t)hd * d);
        if (c < n) {
            memcpy(h->k + (size_t)c * d, ks, d * 4);
            memcpy(h->v + (size_t)c * d, vs, d * 4);
        } else {
            memcpy(h->q + (size_t)(c - n) * d, ks, d * 4); /* later keys as query proxies */
        }
    }
    return 0;
}

int bw_from_file(tq_ctx *ctx, bworkload *w, const char *path, const tq_model *model, int quick,
                 char *err, size_t el)
{
    tq_kv_view *v;
    memset(w, 0, sizeof *w);
    if (tq_kvsnap_open_any(ctx, path, TQ_PROFILE_DEFAULT, &v)) {
        snprintf(err, el, "%s", tq_ctx_error(ctx));
        return -1;
    }
    uint32_t d = tq_arch_head_size(0, model, tq_kv_view_head_dim(v), tq_kv_view_arch(v), NULL);
    const char *dsrc = "guessed (no --model)";
    if (d) dsrc = model ? "the model" : "the source";
    uint32_t max_heads = quick ? 8 : 32, m = quick ? 8 : 16, cap = quick ? 512 : 2048;
    size_t total = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(v, i)->n_stream; j++) {
            const tq_kv_stream *st = &tq_kv_view_kv(v, i)->streams[j];
            for (uint32_t l = 0; st->cell_count > m + 8 && l < st->n_layer; l++) {
                uint64_t wd = st->k[l].width;
                int guessed; /* the snapshot plan's guess: the largest power of two <= 128 */
                if (!d) d = tq_arch_group_for_width(wd, 0, &guessed);
                if (!d) continue;
                if (wd % d == 0 && st->v[l].width == wd) total += wd / d;
            }
        }
    if (!total) {
        tq_kv_view_close(v);
        snprintf(err, el, "%s: no layer with more than %u cells whose rows are whole heads%s", path,
                 m + 8, d ? "" : " (no head size: give --model)");
        return -1;
    }
    size_t every = (total + max_heads - 1) / max_heads, seen = 0;
    w->h = calloc(max_heads + 1, sizeof *w->h);
    float *rk = NULL, *rv = NULL;
    int rc = w->h ? 0 : -1;
    for (uint32_t i = 0; !rc && i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; !rc && j < tq_kv_view_kv(v, i)->n_stream; j++) {
            const tq_kv_stream *st = &tq_kv_view_kv(v, i)->streams[j];
            for (uint32_t l = 0; !rc && st->cell_count > m + 8 && l < st->n_layer; l++) {
                uint64_t wd = st->k[l].width;
                if (wd % d || st->v[l].width != wd) continue;
                uint32_t cells = st->cell_count < cap + m ? st->cell_count : cap + m, n = cells - m;
                free(rk);
                free(rv);
                rk = malloc((size_t)cells * wd * 4);
                rv = malloc((size_t)cells * wd * 4);
                if (!rk || !rv ||
                    tq_kv_view_read_rows(ctx, &st->k[l], st->cell_count, 0, cells, rk) ||
                    tq_kv_view_read_rows(ctx, &st->v[l], st->cell_count, 0, cells, rv)) {
                    snprintf(err, el, "%s: %s", path, tq_ctx_error(ctx));
                    rc = -1;
                    break;
                }
                for (uint32_t hd = 0; hd < wd / d && !rc; hd++, seen++) {
                    if (seen % every || w->n_heads >= max_heads) continue;
                    bhead *h = &w->h[w->n_heads++];
                    rc = take_head(h, rk, rv, wd, hd, d, n, m, l, st->n_layer);
                }
            }
        }
    free(rk);
    free(rv);
    snprintf(w->what, sizeof w->what,
             "%s: %zu of %zu heads of %u (head size from %s), up to %u keys; queries: the last "
             "%u cells' keys (proxies)",
             path, w->n_heads, total, d, dsrc, cap, m);
    tq_kv_view_close(v);
    if (rc && !err[0]) snprintf(err, el, "out of memory");
    return rc;
}

void bw_free(bworkload *w)
{
    for (size_t i = 0; w->h && i < w->n_heads; i++) {
        free(w->h[i].k);
        free(w->h[i].v);
        free(w->h[i].q);
    }
    free(w->h);
    memset(w, 0, sizeof *w);
}
