/* kv_append.c - --append: a snapshot of a state that continues a base snapshot's stores only
 * the new cells, coded as the base coded its own (kv_plan_parts.h). */
#include "kv_plan_parts.h"
#include "kv_snapshot.h"

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

/* Does base describe the same K/V tensor (which of its cells t holds: tq_kvsnap_base_share)? */
static int same_tensor(const tqkv_record *a, const tqkv_record *b)
{
    return a->kv_state == b->kv_state && a->stream == b->stream && a->layer == b->layer &&
           a->is_v == b->is_v && a->transposed == b->transposed && a->width == b->width &&
           a->type_id == b->type_id;
}

/* t takes the base's transforms (codec KLT), in memory to code its own rows. */
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

/* A position and the row that holds it, for finding the base's row of a position. */
typedef struct pos_row {
    int32_t pos;
    uint32_t row;
} pos_row;

static int by_pos(const void *a, const void *b)
{
    int32_t x = ((const pos_row *)a)->pos, y = ((const pos_row *)b)->pos;
    return (x > y) - (x < y);
}

/* brow[r]: the base's row holding the position of this state's row r (-1: none), found by
 * position (a token prefix holds the same K/V at the same positions); 0 when a position
 * repeats in the base (no single row for it). */
static int base_rows_of(const int32_t *pos, uint32_t cells, const int32_t *bpos, uint32_t bcells,
                        int64_t *brow)
{
    pos_row *by = malloc((bcells ? bcells : 1) * sizeof *by); /* [bcells]: sorted by position */
    if (!by) return 0;
    for (uint32_t r = 0; r < bcells; r++) by[r] = (pos_row){bpos[r], r};
    qsort(by, bcells, sizeof *by, by_pos);
    int unique = 1;
    for (uint32_t r = 1; r < bcells; r++) unique &= by[r].pos != by[r - 1].pos;
    for (uint32_t r = 0; unique && r < cells; r++) {
        pos_row key = {pos[r], 0};
        const pos_row *hit = bsearch(&key, by, bcells, sizeof *by, by_pos);
        brow[r] = hit ? (int64_t)hit->row : -1;
    }
    free(by);
    return unique;
}

/* The longest run of rows that are the base's rows in the same order. */
static void longest_run(const int64_t *brow, uint32_t cells, tq_kvsnap_share *run)
{
    memset(run, 0, sizeof *run);
    uint32_t at = 0;
    uint32_t len = 0;
    for (uint32_t r = 0; r < cells; r++) {
        if (brow[r] >= 0 && len && brow[r] == brow[r - 1] + 1) {
            len++;
        } else {
            at = r;
            len = brow[r] >= 0;
        }
        if (len > run->n) *run = (tq_kvsnap_share){at, (uint32_t)(brow[r] + 1 - len), len};
    }
}

/* A kept tensor's row is shared only where its bytes are the base's (a lossless link rebuilds
 * its source byte for byte, and a server that computes a cell again writes other bytes for
 * the same position: llama-server does for the last window of a sliding-window model after a
 * restore): brow[r] set to -1 where they differ, the base's rows read from its chunks. */
static tq_status kept_rows_equal(tq_ctx *ctx, const tqkv_reader *base, uint32_t i,
                                 const tqkv_record *bt, const tq_kv_tensor *kt, uint32_t cells,
                                 int64_t *brow)
{
    uint64_t row_size = bt->bytes / bt->cells;
    if (tqkv_streamed(base) || row_size != kt->row_size) {
        for (uint32_t r = 0; r < cells; r++) brow[r] = -1;
        return TQ_OK;
    }
    uint8_t *rows = malloc(bt->bytes ? bt->bytes : 1); /* [bcells][row_size]: the base's */
    if (!rows) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (uint64_t ck = 0; ck < tqkv_n_chunks(base) && !st; ck++) {
        const tqkv_chunk *ch = tqkv_chunk_at(base, ck);
        if (ch->tensor != i) continue;
        if (ch->raw_len != ch->nrows * row_size || ch->row0 + (uint64_t)ch->nrows > bt->cells)
            st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "the base's chunk %llu does not fit",
                                  (unsigned long long)ck);
        else
            st = tqkv_chunk_read(ctx, base, ck, rows + ch->row0 * row_size);
    }
    for (uint32_t r = 0; r < cells && !st; r++)
        if (brow[r] >= 0 &&
            memcmp(kt->data + r * row_size, rows + (uint64_t)brow[r] * row_size, row_size))
            brow[r] = -1;
    free(rows);
    return st;
}

/* Which of this state's rows the base's tensor bt (tensor i) holds, as one run (run->n 0:
 * none).  A stream of one sequence is matched by position, also where a sliding-window cache
 * has moved on since the base was saved and keeps fewer of the base's cells, in another order;
 * another stream shares only where both begin at position 0 in order, as a whole cache saved
 * by a server does.  Kept rows must be the base's bytes too. */
tq_status tq_kvsnap_base_share(tq_ctx *ctx, const tq_kv_view *v, const src_tensor *s,
                               const tqkv_reader *base, uint32_t i, const tq_kv_view *bv,
                               tq_kvsnap_share *run)
{
    memset(run, 0, sizeof *run);
    const tqkv_record *bt = &tqkv_meta_of(base)->t[i];
    const tq_kv_stream *st = &tq_kv_view_kv(v, s->kv_state)->streams[s->stream];
    const tq_kv_stream *bst = NULL;
    if (bv && bt->kv_state < tq_kv_view_n_kv(bv) &&
        bt->stream < tq_kv_view_kv(bv, bt->kv_state)->n_stream)
        bst = &tq_kv_view_kv(bv, bt->kv_state)->streams[bt->stream];
    if (!st->cell_count || !bst || bst->cell_count != bt->cells) return TQ_OK;
    uint32_t cells = st->cell_count;
    int32_t *pos = malloc(4ull * cells);            /* [cells]: this state's positions */
    int32_t *bpos = malloc(4ull * bst->cell_count); /* [bcells]: the base's */
    int64_t *brow = malloc(8ull * cells);           /* [cells]: the base's row of each */
    tq_status status = TQ_OK;
    if (!pos || !bpos || !brow) status = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    int found = 0;
    if (!status) {
        tq_kv_view_stream_positions(v, st, pos);
        tq_kv_view_stream_positions(bv, bst, bpos);
        if (tq_kv_view_one_sequence(v, st) && tq_kv_view_one_sequence(bv, bst)) {
            found = base_rows_of(pos, cells, bpos, bst->cell_count, brow);
        } else if (bt->cells <= cells) {
            found = 1;
            for (uint32_t c = 0; c < cells; c++) brow[c] = c < bt->cells ? (int64_t)c : -1;
            for (uint32_t c = 0; found && c < bt->cells; c++)
                found = pos[c] == (int32_t)c && bpos[c] == (int32_t)c;
        }
    }
    if (found && bt->codec == TQKV_CODEC_RAW)
        status = kept_rows_equal(ctx, base, i, bt, s->kt, cells, brow);
    if (found && !status) longest_run(brow, cells, run);
    free(pos);
    free(bpos);
    free(brow);
    return status;
}

/* Tensor i takes the base's coding where the base holds some of its rows. */
static tq_status adopt_tensor(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                              const tq_kv_view *bv, const tq_kv_view *v, const src_tensor *src,
                              uint32_t i, uint32_t recent)
{
    const tqkv_meta *b = tqkv_meta_of(base);
    tqkv_record *t = &m->t[i];
    const tqkv_record *bt = &b->t[i];
    if (!same_tensor(bt, t))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "layer %u %s: the base's tensor does not match this state's",
                                t->layer, t->is_v ? "V" : "K");
    if (t->transposed && t->codec == TQKV_CODEC_RAW) return TQ_OK; /* kept whole */
    tq_kvsnap_share run;
    tq_status st = tq_kvsnap_base_share(ctx, v, &src[i], base, i, bv, &run);
    if (st) return st;
    int moved = run.at || run.from || run.n != bt->cells;
    if (!run.n || (bt->sink_rows && run.n <= bt->sink_rows))
        return TQ_OK; /* stored whole, as planned */
    if (t->hadamard != bt->hadamard) /* rows are read through the view's rotation */
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "layer %u %s: the base took the source's rotation in blocks of "
                                "%u, this state in blocks of %u",
                                t->layer, t->is_v ? "V" : "K", bt->hadamard, t->hadamard);
    for (size_t f = 0; f < sizeof coding_fields / sizeof coding_fields[0]; f++)
        memcpy((char *)t + coding_fields[f].offset, (const char *)bt + coding_fields[f].offset,
               coding_fields[f].bytes);
    t->row_start = run.n;
    t->share_at = run.at;
    t->base_from = run.from;
    /* The coarse rows.  Where this state has cells past a sliding window (its plan's coarse
     * end), they stay coarse and its newer own rows fine, as the base's.  Where it has none and
     * the base codes its newest cells finer than its bulk (its coarse rows), this state's own
     * rows are coded as a whole encode codes them: its newest `recent` cells finer, its older
     * own cells (a link that adds at least twice `recent` in order) at the base's bulk coding.
     * A link of a few tokens (a note, a turn) is all newest cells: coded at the bulk coding
     * instead, a SmolLM2 note restored with KL 8.0e-2 where fine it restored with 1.2e-3
     * (tests/bench/results/slot_links.md). */
    uint32_t past_end = t->coarse_end;
    t->coarse_end = 0;
    if (bt->coarse_end && past_end) {
        t->coarse_end = moved || past_end < t->row_start ? t->row_start : past_end;
    } else if (bt->coarse_end) {
        uint32_t own = t->cells - t->row_start;
        t->coarse_end = t->row_start;
        if (recent && !t->share_at && own >= 2 * recent) t->coarse_end = t->cells - recent;
    }
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
    /* on disk by reference (tqkv_record.from_base): a link does not store its base's scales,
     * offsets and bases again */
    t->from_base = t->innerq || t->offset || t->klt;
    return TQ_OK;
}

/* --append: the rows in the base decode as they would in a full encode only
 * with the base's codec, so the base decides the coding of every tensor it shares. */
tq_status tq_kvsnap_adopt_base(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                               const char *base_name, const tq_kv_view *v, const src_tensor *src,
                               uint32_t recent)
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
    tq_kvsnap_layout bl;
    tq_status st = tq_kvsnap_layout_open(ctx, base, &bl);
    for (uint32_t i = 0; !st && i < m->n_tensors; i++)
        st = adopt_tensor(ctx, m, base, bl.v, v, src, i, recent);
    tq_kvsnap_layout_close(&bl);
    if (st) return st;
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
        if (!bt->rope_pos || !t->row_start) continue;
        int32_t *pos = malloc(4ull * t->cells); /* [cells]: by source row */
        if (!pos || !(t->rope_pos = malloc(4ull * t->cells))) {
            free(pos);
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        }
        tq_kv_view_stream_positions(v, &tq_kv_view_kv(v, src[i].kv_state)->streams[src[i].stream],
                                    pos);
        for (uint32_t c = 0; c < t->cells; c++) t->rope_pos[c] = pos[tqkv_record_row(t, c)];
        free(pos);
        t->rope = bt->rope;
        if (memcmp(t->rope_pos, bt->rope_pos + t->base_from, 4ull * t->row_start))
            return tq_ctx_set_error(
                ctx, TQ_ERR_ARG,
                "layer %u K: the base's cells are at other positions in this state", t->layer);
    }
    return TQ_OK;
}
