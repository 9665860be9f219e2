/*
 * restore_point.h - where a saved session can be restored: the one owner of the
 * rule (RESTORE_POINTS.md beside it).  The store, the decode, `tq slot` and the
 * proxy ask these functions and hold none of their constants.
 *
 * A restore point is a token count at which every cache of a saved state is
 * whole:
 *   1. dense attention: every count from 1 to the saved count;
 *   2. a sliding-window cache as llama.cpp saves it (its newest cells only):
 *      no count below its newest cell, so only the saved count;
 *   3. a recurrent state (hybrid and recurrent models): only the saved count;
 *   4. a context checkpoint (llama-server's, kept beside a snapshot) adds the
 *      count it was taken at: its partial state stands in for 2 and 3 there.
 * Restoring a window-only cache writes TQ_RESTORE_PAD_CELLS masked cells below
 * its window, so that llama-server accepts it (see tq_restore_pad_below).
 */
#ifndef TQ_RESTORE_POINT_H
#define TQ_RESTORE_POINT_H

#include "kv_view.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most checkpoints one state keeps (llama-server keeps 32 by default: --ctx-checkpoints). */
#define TQ_RESTORE_MAX_CHECKPOINTS 64u
/* Masked cells written below a window-only cache on a restore for llama-server. */
#define TQ_RESTORE_PAD_CELLS 2u

/* A state's restore points: every count from `from` to its n_tokens, and its checkpoints'. */
typedef struct tq_restore_points {
    uint32_t from;     /* 1 on a dense cache; n_tokens where a cache cannot be cut */
    int recurrent;     /* a recurrent state: its server must be given a token after it */
    uint32_t n_checkpoints;
    uint32_t checkpoint[TQ_RESTORE_MAX_CHECKPOINTS]; /* ascending */
} tq_restore_points;

/* The smallest window-only cache of a state (for messages): its cells and positions. */
typedef struct tq_restore_window {
    uint32_t cells; /* 0: no such cache */
    int32_t lo;
    int32_t hi;
} tq_restore_window;

/* The points of a state as read (no checkpoints); w (may be NULL) gets its smallest
 * window-only cache. */
void tq_restore_points_of(const tq_kv_view *v, tq_restore_points *pt, tq_restore_window *w);
/* Points of a state of n_tokens that restores whole only (a snapshot stored without them). */
void tq_restore_points_whole(tq_restore_points *pt, uint32_t n_tokens);
/* Adds a checkpoint's count; 0 (pt unchanged) when it is not in 1..n_tokens, not above the
 * last one, or one too many. */
int tq_restore_points_add_checkpoint(tq_restore_points *pt, uint32_t n_tokens, uint32_t count);
/* Whether pt is one a state of n_tokens can have (`from` in 1..n_tokens, checkpoints in
 * range and ascending): what a reader of stored points checks. */
int tq_restore_points_valid(const tq_restore_points *pt, uint32_t n_tokens);

/* The largest point <= common (the tokens a prompt of n_prompt shares with a state of
 * n_tokens) that restores that prompt; 0: none.  After a recurrent state the server must
 * process a token of its own: the point stays below n_prompt. */
uint32_t tq_restore_point_for(const tq_restore_points *pt, uint32_t n_tokens, uint32_t common,
                              uint32_t n_prompt);
/* Whether a restore at point needs its checkpoint (the point is below `from`). */
int tq_restore_point_needs_checkpoint(const tq_restore_points *pt, uint32_t point);

/* Refuses (TQ_ERR_UNSUPPORTED, naming the counts that restore) a cut of v to keep tokens
 * that leaves a cache without the cells it needs. */
tq_status tq_restore_check_cut(tq_ctx *ctx, const tq_kv_view *v, uint32_t keep);

/* The masked cells to write below stream st when n of its cells are written: pad where it
 * holds a window's cells only, is written whole and has room below it; else 0.  Its cells
 * sit at window_lo - pad .. window_lo - 1: every later query is at least the window away,
 * so no attention reads them, and llama-server's check that a restored sliding-window cache
 * reaches back past its window (server-context.cpp: pos_min < pos_next - n_swa) passes. */
uint32_t tq_restore_pad_below(const tq_kv_view *v, const tq_kv_stream *st, uint32_t n,
                              uint32_t pad);
/* Whether writing v whole with pad adds cells below any stream (else the bytes are v's). */
int tq_restore_pads(const tq_kv_view *v, uint32_t pad);

/* Whether a model's caches restore only at their points' ends (a sliding window or a
 * recurrent state): the proxy then saves at the prompt's end. */
int tq_restore_exact_points(uint32_t swa_window, uint32_t n_recurrent);
/* Whether llama-server uses a restored sliding-window cache of `swa_window` at point (it
 * processes the prompt again where the cache, pad included, cannot reach back past it). */
int tq_restore_window_used(uint32_t point, uint32_t swa_window);
/* Where the proxy saves a prompt of n_prompt tokens on a model whose caches restore only
 * where saved: all but its last token, which the request processes anyway (0: nowhere). */
uint32_t tq_restore_save_point(int exact_points, uint32_t n_prompt);

#ifdef __cplusplus
}
#endif

#endif
