/* kv_view.c - the KV view's front door and its accessors.  The registered
 * sources bid on the leading bytes; with no bid, the llama.cpp state reader
 * opens the file anyway, so that a wrong file gets its precise message ("not
 * a llama.cpp state file (magic ...)"). */
#include "file_io.h"
#include "kv_source.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

const tq_kv_source *const tq_kv_byte_sources[] = {&tq_kv_source_llama_state, &tq_kv_source_numpy};
const size_t tq_kv_n_byte_sources = sizeof tq_kv_byte_sources / sizeof *tq_kv_byte_sources;

/* The highest bid on these bytes; NULL when no source bids. */
static const tq_kv_source *pick(const tq_kv_source *const *sources, size_t n, const uint8_t *p,
                                uint64_t size)
{
    const tq_kv_source *best = NULL;
    int bid = 0;
    for (size_t i = 0; i < n; i++) {
        int b = sources[i]->probe(p, size);
        if (b > bid) {
            bid = b;
            best = sources[i];
        }
    }
    return best;
}

const char *tq_kv_view_probe(const void *data, size_t size)
{
    const tq_kv_source *s = pick(tq_kv_byte_sources, tq_kv_n_byte_sources, data, size);
    return s ? s->name : NULL;
}

void tq_kv_view_reset_states(tq_kv_view *v)
{
    for (uint32_t i = 0; i < TQ_KV_MAX_STATES; i++) {
        tq_kv_state *k = &v->kv[i];
        for (uint32_t s = 0; s < k->n_stream; s++) {
            free(k->streams[s].k);
            free(k->streams[s].v);
            free(k->streams[s].k_idx);
        }
        free(k->streams);
        memset(k, 0, sizeof *k);
    }
    v->n_kv = 0;
}

void tq_kv_view_close(tq_kv_view *v)
{
    if (!v) return;
    tq_kv_view_reset_states(v);
    if (v->mapped) tq_unmap_file(v->map, v->size);
    if (v->owned) free((void *)v->map);
    if (v->source_free) v->source_free(v->source_data);
    free(v->tokens);
    free(v->arch);
    free(v->label);
    free(v);
}

static tq_status open_view(tq_ctx *ctx, const tq_kv_source *src, const tq_kv_source *const *sources,
                           size_t n_sources, const uint8_t *map, uint64_t size, int mapped,
                           const char *label, tq_type_profile p, uint64_t max_bytes,
                           tq_kv_view **out)
{
    *out = NULL;
    tq_kv_view *v = calloc(1, sizeof *v);
    if (!v || !(v->label = strdup(label))) {
        free(v);
        if (mapped) tq_unmap_file(map, size);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    v->map = map;
    v->size = size;
    v->mapped = mapped;
    v->profile = p == TQ_PROFILE_AUTO ? TQ_PROFILE_DEFAULT : p;
    v->profile_how = p == TQ_PROFILE_AUTO ? "no turbo rows" : "option";
    if (p == TQ_PROFILE_AUTO) v->profile_auto = 1;
    v->source = src ? src : pick(sources, n_sources, map, size);
    if (!v->source) v->source = &tq_kv_source_llama_state;
    tq_status st = v->source->open(ctx, v, max_bytes);
    if (st) {
        tq_kv_view_close(v);
        return st;
    }
    *out = v;
    return TQ_OK;
}

tq_status tq_kv_view_open_with(tq_ctx *ctx, const tq_kv_source *src, const void *data, size_t size,
                          const char *label, tq_type_profile p, uint64_t max_bytes,
                          tq_kv_view **out)
{
    return open_view(ctx, src, NULL, 0, data, size, 0, label ? label : "(memory)", p, max_bytes,
                     out);
}

tq_status tq_kv_view_open_memory_limited(tq_ctx *ctx, const void *data, size_t size,
                                         const char *label, tq_type_profile p, uint64_t max_bytes,
                                         tq_kv_view **out)
{
    return open_view(ctx, NULL, tq_kv_byte_sources, tq_kv_n_byte_sources, data, size, 0,
                     label ? label : "(memory)", p, max_bytes, out);
}

tq_status tq_kv_view_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                            tq_type_profile p, tq_kv_view **out)
{
    return tq_kv_view_open_memory_limited(ctx, data, size, label, p, 0, out);
}

tq_status tq_kv_view_open_from(tq_ctx *ctx, const char *path, const char *label,
                               tq_type_profile p, const tq_kv_source *const *sources, size_t n,
                               tq_kv_view **out)
{
    *out = NULL;
    const uint8_t *m;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, 12, "too short for a llama.cpp state file", &m, &size);
    if (st) return st;
    return open_view(ctx, NULL, sources, n, m, size, 1, label, p, 0, out);
}

tq_status tq_kv_view_open_as(tq_ctx *ctx, const char *path, const char *label, tq_type_profile p,
                            tq_kv_view **out)
{
    *out = NULL;
    const uint8_t *m;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, 12, "too short for a llama.cpp state file", &m, &size);
    if (st) return st;
    return open_view(ctx, NULL, tq_kv_byte_sources, tq_kv_n_byte_sources, m, size, 1, label, p, 0,
                     out);
}

tq_status tq_kv_view_open(tq_ctx *ctx, const char *path, tq_type_profile p, tq_kv_view **out)
{
    return tq_kv_view_open_from(ctx, path, path, p, tq_kv_byte_sources, tq_kv_n_byte_sources,
                                 out);
}

int tq_kv_view_fingerprint(const tq_kv_view *v, uint64_t *fp)
{
    *fp = v->has_fingerprint ? v->fingerprint : 0;
    return v->has_fingerprint;
}

const char *tq_kv_view_format(const tq_kv_view *v) { return v->source->name; }
const char *tq_kv_view_label(const tq_kv_view *v) { return v->label; }

tq_kv_kind tq_kv_view_kind(const tq_kv_view *v) { return v->kind; }

const char *tq_kv_kind_name(unsigned kind, int long_form)
{
    static const char *const names[] = {"session", "sequence", "numpy"};
    static const char *const longs[] = {"llama.cpp session file", "llama.cpp sequence file",
                                        "NumPy K/V dump"};
    unsigned k = kind < 2 ? kind : 2;
    return long_form ? longs[k] : names[k];
}
uint32_t tq_kv_view_version(const tq_kv_view *v) { return v->version; }
uint32_t tq_kv_view_n_tokens(const tq_kv_view *v) { return v->n_tokens; }
const int32_t *tq_kv_view_tokens(const tq_kv_view *v) { return v->tokens; }
const char *tq_kv_view_arch(const tq_kv_view *v) { return v->arch; }
uint32_t tq_kv_view_head_dim(const tq_kv_view *v) { return v->head_dim; }
int tq_kv_view_has_outputs(const tq_kv_view *v) { return v->has_outputs; }
int tq_kv_view_has_ext(const tq_kv_view *v) { return v->has_ext; }
tq_type_profile tq_kv_view_profile(const tq_kv_view *v) { return v->profile; }
const char *tq_kv_view_profile_how(const tq_kv_view *v) { return v->profile_how; }
const tq_kv_recurrent *tq_kv_view_recurrent(const tq_kv_view *v)
{
    return v->has_recurrent ? &v->rec : NULL;
}
uint32_t tq_kv_view_n_kv(const tq_kv_view *v) { return v->n_kv; }
const tq_kv_stream *tq_kv_state_stream(const tq_kv_state *k)
{
    for (uint32_t j = 0; j < k->n_stream; j++)
        if (k->streams[j].cell_count) return &k->streams[j];
    return k->streams;
}

const tq_kv_state *tq_kv_view_kv(const tq_kv_view *v, uint32_t i)
{
    return i < v->n_kv ? &v->kv[i] : NULL;
}
uint64_t tq_kv_view_size(const tq_kv_view *v) { return v->size; }
const uint8_t *tq_kv_view_bytes(const tq_kv_view *v) { return v->map; }
uint64_t tq_kv_view_xxh64(const tq_kv_view *v)
{
    return XXH64(v->map, (size_t)tq_kv_view_size(v), 0);
}
uint64_t tq_kv_view_prefix_len(const tq_kv_view *v) { return v->prefix_len; }

static uint64_t sum_kv(const tq_kv_view *v, int values)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < v->n_kv; i++)
        for (uint32_t j = 0; j < v->kv[i].n_stream; j++) {
            const tq_kv_stream *st = &v->kv[i].streams[j];
            for (uint32_t l = 0; l < st->n_layer; l++) {
                t += values ? st->k[l].width * st->cell_count : st->k[l].bytes;
                if (st->v) t += values ? st->v[l].width * st->cell_count : st->v[l].bytes;
            }
        }
    return t;
}

uint64_t tq_kv_view_kv_values(const tq_kv_view *v) { return sum_kv(v, 1); }
uint64_t tq_kv_view_kv_bytes(const tq_kv_view *v) { return sum_kv(v, 0); }

/* Bytes of one cell's metadata at p: i32 pos, u32 n_seq, [8 or 12 bytes of M-RoPE
 * extension], n_seq x i32 seq id. */
static uint64_t cell_meta_len(const tq_kv_view *v, const uint8_t *p)
{
    uint32_t nseq;
    memcpy(&nseq, p + 4, 4);
    return 8 + (uint64_t)v->has_ext + 4ull * nseq;
}

tq_status tq_kv_view_stream_prefix(tq_ctx *ctx, const tq_kv_view *v, const tq_kv_stream *st,
                              uint32_t max_pos, uint32_t *n_cells, uint64_t *meta_len)
{
    if (!max_pos) { /* no limit */
        *n_cells = st->cell_count;
        if (meta_len) *meta_len = st->meta_len;
        return TQ_OK;
    }
    if (!st->meta_len) { /* no metadata: cell i is position i */
        *n_cells = st->cell_count < max_pos ? st->cell_count : max_pos;
        if (meta_len) *meta_len = 0;
        return TQ_OK;
    }
    /* the source validated the metadata: walking it cannot run off */
    const uint8_t *p = v->map + st->meta_off;
    uint64_t off = 0, cut = 0;
    uint32_t n = 0;
    int ended = 0;
    for (uint32_t i = 0; i < st->cell_count; i++) {
        int32_t pos;
        memcpy(&pos, p + off, 4);
        off += cell_meta_len(v, p + off);
        if (pos >= 0 && (uint32_t)pos < max_pos) {
            if (ended)
                return tq_ctx_set_error(
                    ctx, TQ_ERR_UNSUPPORTED,
                    "%s: cell %u (position %d) comes after a cell past the prefix: "
                    "the cells are not in prompt order",
                    v->label, i, pos);
            n++;
            cut = off;
        } else {
            ended = 1;
        }
    }
    *n_cells = n;
    if (meta_len) *meta_len = cut;
    return TQ_OK;
}

void tq_kv_view_stream_positions(const tq_kv_view *v, const tq_kv_stream *st, int32_t *pos)
{
    const uint8_t *p = v->map + st->meta_off; /* validated by the source */
    uint64_t off = 0;
    for (uint32_t i = 0; i < st->cell_count; i++) {
        if (!st->meta_len) {
            pos[i] = (int32_t)i;
            continue;
        }
        memcpy(&pos[i], p + off, 4);
        off += cell_meta_len(v, p + off);
    }
}

int tq_kv_view_one_sequence(const tq_kv_view *v, const tq_kv_stream *st)
{
    const uint8_t *p = v->map + st->meta_off; /* validated by the source */
    uint64_t off = 0;
    int32_t first = 0;
    for (uint32_t i = 0; st->meta_len && i < st->cell_count; i++) {
        uint32_t nseq;
        int32_t seq;
        memcpy(&nseq, p + off + 4, 4);
        if (nseq != 1) return 0;
        memcpy(&seq, p + off + 8 + v->has_ext, 4);
        if (i == 0) first = seq;
        if (seq != first) return 0;
        off += cell_meta_len(v, p + off);
    }
    return 1;
}

tq_status tq_kv_view_set_hadamard(tq_ctx *ctx, tq_kv_view *v, uint32_t state, uint32_t stream,
                                  uint32_t layer, int is_v, uint32_t n)
{
    if (state >= v->n_kv || stream >= v->kv[state].n_stream ||
        layer >= v->kv[state].streams[stream].n_layer)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "no tensor %u/%u/%u", state, stream, layer);
    tq_kv_stream *s = &v->kv[state].streams[stream];
    if (is_v && !s->v) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "an MLA cache has no V");
    tq_kv_tensor *t = is_v ? &s->v[layer] : &s->k[layer];
    if (n && (n & (n - 1) || n < TQ_RHT_MIN || n > TQ_RHT_MAX || t->width % n || t->transposed))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a rotation in blocks of %u values does not fit "
                                "rows of %llu", n, (unsigned long long)t->width);
    t->hadamard = n;
    return TQ_OK;
}

tq_status tq_kv_view_read_rows(tq_ctx *ctx, const tq_kv_tensor *t, uint32_t cells, uint32_t c0,
                                 uint32_t n, float *out)
{
    if (t->type->dtype < 0)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "no decoder for KV type %s",
                                t->type->name);
    if ((uint64_t)c0 + n > cells)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "rows %u..%u past %u cells", c0, c0 + n, cells);
    if (!t->transposed) {
        tq_status st = tq_dequantize(ctx, (tq_dtype)t->type->dtype,
                                     t->data + (uint64_t)c0 * t->row_size, (size_t)n * t->width,
                                     out);
        if (st || !t->hadamard) return st;
        return tq_hadamard_blocks(ctx, t->hadamard, out, (size_t)n * t->width);
    }
    /* element-major: element j of cell c at (j * cells + c) * size */
    size_t es = t->type->bytes;
    for (uint64_t j = 0; j < t->width; j++)
        for (uint32_t r = 0; r < n; r++) {
            tq_status st =
                tq_dequantize(ctx, (tq_dtype)t->type->dtype, t->data + (j * cells + c0 + r) * es, 1,
                              out + (uint64_t)r * t->width + j);
            if (st) return st;
        }
    return TQ_OK;
}

int tq_kv_view_stream_span(const tq_kv_view *v, const tq_kv_stream *st, int32_t *lo, int32_t *hi)
{
    if (!st->cell_count) return 0;
    *lo = 0;
    *hi = (int32_t)st->cell_count - 1;
    if (!st->meta_len) return 1;
    const uint8_t *p = v->map + st->meta_off;
    uint64_t off = 0;
    for (uint32_t i = 0; i < st->cell_count; i++) {
        int32_t pos;
        memcpy(&pos, p + off, 4);
        off += cell_meta_len(v, p + off);
        if (!i || pos < *lo) *lo = pos;
        if (!i || pos > *hi) *hi = pos;
    }
    return 1;
}
