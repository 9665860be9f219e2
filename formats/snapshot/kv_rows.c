/* kv_rows.c - which rows of a tensor the plan codes apart from the rest: the cells a
 * sliding-window layer no longer attends to (coarser) and the newest cells (finer). */
#include "kv_plan_parts.h"

#include <stdint.h>
#include <stdlib.h>

/* Rows of the sliding-window layers' tensors that the next token cannot attend to: those
 * before the first cell within the window of the newest (llama.cpp masks a cell at p0 from a
 * query at p1 once p1 - p0 >= window; the newest cell's query is the one a restore re-feeds).
 * Measured on Gemma 3 270M (1200 tokens, window 512, 58% of its cells): coded at 1 or 2 bits
 * instead of 3 the restore's KL did not move (0.00840 both). */
tq_status tq_kvsnap_past_rows(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                              tq_kvsnap_plan *p, src_tensor *src, size_t n)
{
    uint32_t chunk = o->model && o->model->kv_row ? o->model->kv_row->chunk : 0;
    p->swa_window = o->model && tq_kv_view_n_kv(v) == 2 ? o->model->swa_window : 0;
    if (chunk && tq_kv_view_n_kv(v) == 2) p->swa_window = chunk;
    if (!p->swa_window || !o->past_bits || tq_kv_view_has_ext(v)) return TQ_OK;
    for (size_t i = 0; i < n; i++) {
        const tq_kv_stream *st = &tq_kv_view_kv(v, 1)->streams[src[i].stream];
        /* iSWA: the SWA cache comes second; cells of several sequences each have their own
           newest cell: left alike */
        if (src[i].kv_state != 1 || !tq_kv_view_one_sequence(v, st)) continue;
        if (src[i].kt->transposed) continue; /* rows apart need rows: V stored by columns */
        int32_t *pos = malloc(4ull * src[i].cells + 4); /* [cells]: the cells' positions */
        if (!pos) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        tq_kv_view_stream_positions(v, st, pos);
        int64_t newest = INT32_MIN;
        for (uint32_t r = 0; r < src[i].cells; r++) newest = pos[r] > newest ? pos[r] : newest;
        /* a chunked layer (llama4) attends to its chunk's positions: those before the newest
           cell's chunk are past; a sliding one to the window before the newest */
        int64_t first = newest - (int64_t)p->swa_window + 1;
        if (chunk) first = newest - newest % (int64_t)chunk;
        uint32_t r = 0;
        while (r < src[i].cells && (int64_t)pos[r] < first) r++;
        src[i].past_rows = r;
        free(pos);
    }
    return TQ_OK;
}

/* Whether the last `recent` of the cells at pos[cells] are the newest: each later than every
 * cell before them. */
static int newest_last(const int32_t *pos, uint32_t cells, uint32_t recent)
{
    int32_t before = INT32_MIN;
    for (uint32_t r = 0; r + recent < cells; r++) before = pos[r] > before ? pos[r] : before;
    for (uint32_t r = cells - recent; r < cells; r++)
        if (pos[r] <= before) return 0;
    return 1;
}

/* The newest cells, which the tokens that follow a restore attend to most: the last
 * o->recent_cells rows of a tensor of one sequence with no past rows, where they are its
 * newest cells and at most half its cells (a short state is coded alike); in a state whose
 * sliding-window layers lift their window (p->past_bits: cells past it coarser, the rest
 * finer) only where the preset's recent row says so. */
tq_status tq_kvsnap_recent_rows(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                const tq_kvsnap_plan *p, src_tensor *src, size_t n)
{
    if (o->recent_cells <= 0 || o->recent_bits <= 0 || o->base || tq_kv_view_has_ext(v))
        return TQ_OK;
    if (p->settings.past_bits && !o->row->recent_with_window) return TQ_OK;
    uint32_t recent = (uint32_t)o->recent_cells;
    for (size_t i = 0; i < n; i++) {
        const tq_kv_stream *st = &tq_kv_view_kv(v, src[i].kv_state)->streams[src[i].stream];
        if (src[i].past_rows || src[i].cells < 2 * recent || !tq_kv_view_one_sequence(v, st))
            continue;
        int32_t *pos = malloc(4ull * src[i].cells + 4); /* [cells]: the cells' positions */
        if (!pos) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        tq_kv_view_stream_positions(v, st, pos);
        if (newest_last(pos, src[i].cells, recent)) src[i].recent_rows = recent;
        free(pos);
    }
    return TQ_OK;
}
