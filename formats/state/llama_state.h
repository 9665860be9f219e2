/*
 * llama_state.h - llama.cpp state files: session files ('ggsn' v9/v10, both
 * the layouts with and without the old outputs section) and sequence files
 * ('ggsq' v2/v3, what llama-server's slot save writes).  See LLAMA_STATE.md.
 *
 * Reading: a KV source behind tq_kv_view_open (kv_view.h).  The reader maps the
 * file, parses all of it and refuses anything it does not fully understand.
 * Bytes that are not K/V rows (header, tokens, cell metadata, the old
 * outputs section) stay where they are in the view's bytes, so the writer
 * can rebuild the file exactly.
 */
#ifndef TQ_LLAMA_STATE_H
#define TQ_LLAMA_STATE_H

#include "kv_view.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_GGSN_MAGIC 0x6767736eu
#define TQ_GGSQ_MAGIC 0x67677371u

/* Writes a view as a llama.cpp state file: as a session (`arch` names the
 * model architecture when the view has none, e.g. comes from a sequence
 * file) or a sequence file, keeping only the first max_tokens tokens and the
 * cells at positions below max_tokens (0: all).  Such cells must come first
 * in every stream, as they do after a plain prompt.  The view must carry
 * llama.cpp cell metadata. */
typedef struct tq_state_rewrite {
    tq_kv_kind kind; /* TQ_KV_SESSION or TQ_KV_SEQUENCE */
    const char *arch;
    uint32_t max_tokens;
    /* cells of zeros written below each window-only cache (restore_point.h:
     * tq_restore_pad_below, TQ_RESTORE_PAD_CELLS); 0: none (the cells as read) */
    uint32_t pad_window;
    /* a context checkpoint's partial state at max_tokens (ckpt.h: its target blob), written
     * in place of the memories that cannot be cut (an iSWA model's sliding-window cache, a
     * hybrid model's recurrent state); NULL: none */
    const uint8_t *partial;
    uint64_t partial_len;
} tq_state_rewrite;
tq_status tq_llama_state_write(tq_ctx *ctx, const tq_kv_view *v, const tq_state_rewrite *o,
                               FILE *out);

#ifdef __cplusplus
}
#endif
#endif
