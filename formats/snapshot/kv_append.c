/* kv_append.c - --append: a snapshot of a state that continues a base snapshot's stores only
 * the new cells, coded as the base coded its own (kv_plan_parts.h). */
#include "kv_plan_parts.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The record fields that say how rows are coded: an appended tensor takes the base's, so the
 * base's rows decode as the base coded them (the sinks are in the base's chunks; the coarse
 * coding is for this state's past rows). */
#define CODING(f) {offsetof(tqkv_record, f), sizeof(((tqkv_record *)0)->f)}
static const struct {
    size_t offset;
    size_t bytes;
} coding_fields[] = {
    CODING(codec), CODING(bits), CODING(norm_correction), CODING(group), CODING(seed),
    CODING(rows_per_chunk), CODING(sink_rows), CODING(planes), CODING(uniform),
    CODING(klt_rans), CODING(klt_rans_coarse), CODING(klt_gain), CODING(klt_basis8),
    CODING(chunks_grow),
    CODING(coarse_bits), CODING(coarse_uniform), CODING(coarse_nc), CODING(coarse_planes),
    CODING(coarse_scale),
};
#undef CODING

/* Does base describe the same K/V tensors, with its cells a prefix of t's? */
static int same_tensor(const tqkv_record *a, const tqkv_record *b)
{
    return a->kv_state == b->kv_state && a->stream == b->stream && a->layer == b->layer &&
           a->is_v == b->is_v && a->transposed == b->transposed && a->width == b->width &&
           a->type_id == b->type_id && a->cells <= b->cells;
}

/* t takes the base's transforms (codec KLT). */
static tq_status copy_klt(tq_ctx *ctx, tqkv_record *t, const tqkv_record *bt)
{
    if (!bt->klt) return TQ_OK;
    uint64_t nh = t->width / t->group;
    if (!(t->klt = calloc(nh, sizeof *t->klt)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t h = 0; h < nh; h++) {
        size_t nv = (size_t)bt->klt[h].m * t->group;
        t->klt[h] = bt->klt[h];
        if (!(t->klt[h].basis = malloc((nv ? nv : 1) * sizeof(float))))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        memcpy(t->klt[h].basis, bt->klt[h].basis, nv * sizeof(float));
    }
    return TQ_OK;
}

/* Does the base's tensor hold this state's first cells, so that its rows are shared?  Only
 * where this state's stream begins at position 0 with its first base-many cells in order: a
 * sliding-window cache that holds its newest window only has moved on since the base was
 * saved, and the link stores its cells itself (row_start 0, coded by its own plan). */
int tq_kvsnap_base_shares(const tq_kv_view *v, const src_tensor *s, const tqkv_record *bt)
{
    const tq_kv_stream *st = &tq_kv_view_kv(v, s->kv_state)->streams[s->stream];
    if (!st->cell_count || bt->cells > st->cell_count) return 0;
    int32_t *pos = malloc(4ull * st->cell_count);
    if (!pos) return 0;
    tq_kv_view_stream_positions(v, st, pos);
    int shares = 1;
    for (uint32_t c = 0; shares && c < bt->cells; c++) shares = pos[c] == (int32_t)c;
    free(pos);
    return shares;
}

/* --append: the rows in the base decode as they would in a full encode only
 * with the base's codec, so the base decides the coding of every tensor it shares. */
tq_status tq_kvsnap_adopt_base(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                               const char *base_name, const tq_kv_view *v, const src_tensor *src)
{
    const tqkv_meta *b = tqkv_meta_of(base);
    if (b->base_id)
        return tq_ctx_set_error(
            ctx, TQ_ERR_UNSUPPORTED,
            "the base is itself an appended snapshot (chains are not supported)");
    if (b->source_kind != m->source_kind || strcmp(b->profile, m->profile) ||
        b->n_tensors != m->n_tensors)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "the base snapshot is of another kind of state (file kind, profile or "
            "tensors differ)");
    if (b->n_tokens > m->n_tokens || memcmp(b->tokens, m->tokens, 4ull * b->n_tokens))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the base's %u tokens are not a prefix of this state's %u tokens",
                                b->n_tokens, m->n_tokens);
    if (b->has_fingerprint != m->has_fingerprint || b->fingerprint != m->fingerprint)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "the base was made for another model");
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        const tqkv_record *bt = &b->t[i];
        if (!same_tensor(bt, t))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                    "layer %u %s: the base's tensor does not match this state's",
                                    t->layer, t->is_v ? "V" : "K");
        if (!tq_kvsnap_base_shares(v, &src[i], bt)) continue; /* stored whole, as planned */
        if (t->hadamard != bt->hadamard) /* rows are read through the view's rotation */
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                    "layer %u %s: the base took the source's rotation in blocks of "
                                    "%u, this state in blocks of %u",
                                    t->layer, t->is_v ? "V" : "K", bt->hadamard, t->hadamard);
        for (size_t f = 0; f < sizeof coding_fields / sizeof coding_fields[0]; f++)
            memcpy((char *)t + coding_fields[f].offset, (const char *)bt + coding_fields[f].offset,
                   coding_fields[f].bytes);
        t->row_start = t->codec == TQKV_CODEC_RAW && t->transposed ? 0 : bt->cells;
        /* the base's coarse coding is stored for its chunks where none of ours are coarse */
        if (!bt->coarse_end) t->coarse_end = 0;
        if (bt->coarse_end && t->coarse_end < t->row_start) t->coarse_end = t->row_start;
        free(t->innerq); /* the base's scales, as for its codec */
        t->innerq = NULL;
        if (bt->innerq) {
            if (!(t->innerq = malloc(4ull * bt->innerq_n)))
                return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
            memcpy(t->innerq, bt->innerq, 4ull * bt->innerq_n);
            t->innerq_n = bt->innerq_n;
        }
        tq_status kst = copy_klt(ctx, t, bt);
        if (kst) return kst;
        free(t->offset); /* and its offsets */
        t->offset = NULL;
        if (bt->offset) {
            if (!(t->offset = malloc(4ull * bt->width)))
                return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
            memcpy(t->offset, bt->offset, 4ull * bt->width);
        }
    }
    const char *slash = strrchr(base_name, '/');
    m->base_name = strdup(slash ? slash + 1 : base_name);
    if (!m->base_name) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    m->base_id = tqkv_file_id(base);
    return TQ_OK;
}

/* --append onto a base with pre-RoPE offsets: the base's rotation, and the
 * positions of this state's cells, which must place the base's cells where
 * the base had them (its rows decode with these positions). */
tq_status tq_kvsnap_adopt_base_rope(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                                    const tq_kv_view *v, const src_tensor *src)
{
    const tqkv_meta *b = tqkv_meta_of(base);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        const tqkv_record *bt = &b->t[i];
        if (!bt->rope_pos || !tq_kvsnap_base_shares(v, &src[i], bt)) continue;
        if (!(t->rope_pos = malloc(4ull * t->cells)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        tq_kv_view_stream_positions(v, &tq_kv_view_kv(v, src[i].kv_state)->streams[src[i].stream],
                               t->rope_pos);
        t->rope = bt->rope;
        if (memcmp(t->rope_pos, bt->rope_pos, 4ull * bt->cells))
            return tq_ctx_set_error(
                ctx, TQ_ERR_ARG,
                "layer %u K: the base's cells are at other positions in this state", t->layer);
    }
    return TQ_OK;
}
