/* restore_point.c - where a saved session can be restored (restore_point.h,
 * RESTORE_POINTS.md): the points of a state, the point for a prompt, the cut a
 * decode may make, the cells padded below a window and the proxy's save point. */
#include "restore_point.h"

#include <stdio.h>
#include <string.h>

void tq_restore_points_of(const tq_kv_view *v, tq_restore_points *pt, tq_restore_window *w)
{
    tq_restore_window small = {0, 0, 0};
    uint32_t n_tokens = tq_kv_view_n_tokens(v);
    memset(pt, 0, sizeof *pt);
    pt->from = n_tokens ? 1 : 0;
    pt->recurrent = tq_kv_view_recurrent(v) != NULL;
    if (pt->recurrent) pt->from = n_tokens; /* it sums up every token: whole or not at all */
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(v, i)->n_stream; j++) {
            int32_t lo;
            int32_t hi;
            const tq_kv_stream *st = &tq_kv_view_kv(v, i)->streams[j];
            if (!tq_kv_view_stream_span(v, st, &lo, &hi) || lo <= 0) continue;
            /* a window's cells only (a sliding-window cache as a sequence save keeps it): a
             * cut below its newest cell leaves the window without the cells it needs */
            uint32_t whole = (uint32_t)hi + 1 < n_tokens ? (uint32_t)hi + 1 : n_tokens;
            if (whole > pt->from) pt->from = whole;
            if (!small.cells || (uint32_t)(hi - lo + 1) < small.cells) {
                small.cells = (uint32_t)(hi - lo + 1);
                small.lo = lo;
                small.hi = hi;
            }
        }
    if (w) *w = small;
}

void tq_restore_points_whole(tq_restore_points *pt, uint32_t n_tokens)
{
    memset(pt, 0, sizeof *pt);
    pt->from = n_tokens;
}

int tq_restore_points_add_checkpoint(tq_restore_points *pt, uint32_t n_tokens, uint32_t count)
{
    if (!count || count > n_tokens || pt->n_checkpoints == TQ_RESTORE_MAX_CHECKPOINTS) return 0;
    if (pt->n_checkpoints && count <= pt->checkpoint[pt->n_checkpoints - 1]) return 0;
    pt->checkpoint[pt->n_checkpoints++] = count;
    return 1;
}

int tq_restore_points_valid(const tq_restore_points *pt, uint32_t n_tokens)
{
    if (pt->from < 1 || pt->from > n_tokens) return 0;
    if (pt->n_checkpoints > TQ_RESTORE_MAX_CHECKPOINTS) return 0;
    for (uint32_t i = 0; i < pt->n_checkpoints; i++) {
        if (!pt->checkpoint[i] || pt->checkpoint[i] > n_tokens) return 0;
        if (i && pt->checkpoint[i] <= pt->checkpoint[i - 1]) return 0;
    }
    return 1;
}

uint32_t tq_restore_point_for(const tq_restore_points *pt, uint32_t n_tokens, uint32_t common,
                              uint32_t n_prompt)
{
    uint32_t limit = common < n_tokens ? common : n_tokens;
    if (pt->recurrent && limit >= n_prompt) limit = n_prompt ? n_prompt - 1 : 0;
    if (limit >= pt->from) return limit;
    for (uint32_t i = pt->n_checkpoints; i-- > 0;)
        if (pt->checkpoint[i] <= limit) return pt->checkpoint[i];
    return 0;
}

int tq_restore_point_needs_checkpoint(const tq_restore_points *pt, uint32_t point)
{
    return point < pt->from;
}

tq_status tq_restore_check_cut(tq_ctx *ctx, const tq_kv_view *v, uint32_t keep)
{
    tq_restore_points pt;
    tq_restore_window w;
    uint32_t n_tokens = tq_kv_view_n_tokens(v);
    tq_restore_points_of(v, &pt, &w);
    if (keep >= n_tokens || keep >= pt.from) return TQ_OK;
    if (pt.recurrent)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "a recurrent state (a hybrid or recurrent model's) sums up all "
                                "%u tokens: it cannot be cut to the first %u",
                                n_tokens, keep);
    char counts[48];
    if (pt.from == n_tokens)
        snprintf(counts, sizeof counts, "only at all %u tokens", n_tokens);
    else
        snprintf(counts, sizeof counts, "at %u..%u tokens", pt.from, n_tokens);
    return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                            "--tokens %u: a sliding-window cache here holds only positions "
                            "%d..%d (its window), which a cut to %u tokens would leave without "
                            "its cells: this state restores %s",
                            keep, w.lo, w.hi, keep, counts);
}

uint32_t tq_restore_pad_below(const tq_kv_view *v, const tq_kv_stream *st, uint32_t n,
                              uint32_t pad)
{
    int32_t lo;
    int32_t hi;
    if (!pad || !st->meta_len || n != st->cell_count) return 0;
    if (!tq_kv_view_stream_span(v, st, &lo, &hi)) return 0;
    return lo >= (int32_t)pad ? pad : 0;
}

int tq_restore_pads(const tq_kv_view *v, uint32_t pad)
{
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(v, i)->n_stream; j++) {
            const tq_kv_stream *st = &tq_kv_view_kv(v, i)->streams[j];
            if (tq_restore_pad_below(v, st, st->cell_count, pad)) return 1;
        }
    return 0;
}

int tq_restore_exact_points(uint32_t swa_window, uint32_t n_recurrent)
{
    return swa_window || n_recurrent;
}

int tq_restore_window_used(uint32_t point, uint32_t swa_window)
{
    /* the window's cells end at point - 1 and the pad reaches TQ_RESTORE_PAD_CELLS below
     * them: up to the window and one more, no cell reaches back past it */
    return !swa_window || point > swa_window + TQ_RESTORE_PAD_CELLS - 1;
}

uint32_t tq_restore_save_point(int exact_points, uint32_t n_prompt)
{
    /* a recurrent state cannot step back a token: a save at the very end would make the
     * server process the whole prompt again */
    return exact_points && n_prompt ? n_prompt - 1 : 0;
}
