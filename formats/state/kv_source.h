/*
 * kv_source.h - for KV source formats (not for their users): the view's
 * representation and the interface a source registers in kv_view.c.
 *
 * A source probes leading bytes and bids (0: not mine; higher wins), then
 * opens: it fills a view allocated by the front door, which owns the input
 * mapping.  A source that expands its input into an image of its own
 * (NumPy's) replaces `map` with it and sets `owned`.
 */
#ifndef TQ_KV_SOURCE_H
#define TQ_KV_SOURCE_H

#include "kv_view.h"

#define TQ_KV_MAX_STATES 2 /* iSWA: base cache then SWA cache */

struct tq_kv_view {
    const struct tq_kv_source *source;
    const uint8_t *map;
    uint64_t size;
    int mapped; /* map is an mmap of the file */
    int owned;  /* map is malloc'd by the source */
    char *label;
    tq_kv_kind kind;
    uint32_t version, n_tokens;
    int32_t *tokens;
    int tokens_packed; /* the file holds llama-server's packed token list (LLAMA_STATE.md):
                          tokens are the prompt's, unpacked; writers pack them again */
    char *arch;
    uint32_t head_dim;   /* the head size the source's layout shows, 0 if it does not */
    int has_fingerprint; /* a snapshot made with --model: that model's fingerprint */
    uint64_t fingerprint;
    int has_outputs;
    int has_ext; /* the bytes of each cell's extension: 0, 8 (older M-RoPE) or 12 (x, y, tok) */
    int has_recurrent;
    tq_kv_recurrent rec; /* a recurrent memory's state (has_recurrent), kept verbatim */
    uint64_t prefix_len;
    uint32_t n_kv;
    tq_kv_state kv[TQ_KV_MAX_STATES];
    tq_type_profile profile;
    /* how the profile was chosen: "option" (the caller's), or for TQ_PROFILE_AUTO what in the
       bytes told the fork's revisions apart, or that nothing could */
    const char *profile_how;
    int profile_auto; /* opened with TQ_PROFILE_AUTO: the source may choose */
    void *source_data; /* the source's own, freed by it */
    void (*source_free)(void *data);
};

typedef struct tq_kv_source {
    const char *name;
    /* how sure the source is that these bytes (size of them available,
     * at least 16 unless the input is shorter) are its format: 0 not at all */
    int (*probe)(const uint8_t *p, uint64_t size);
    /* fill v from v->map / v->size; on failure the front door closes v */
    tq_status (*open)(tq_ctx *ctx, tq_kv_view *v, uint64_t max_bytes);
} tq_kv_source;

extern const tq_kv_source tq_kv_source_llama_state; /* llama_state.c */
extern const tq_kv_source tq_kv_source_numpy;       /* kv_numpy.c */

/* The byte formats' bidders (what tq_kv_view_open asks); a layer above adds its
 * own (formats/snapshot/: .tqkv snapshots) through tq_kv_view_open_from. */
extern const tq_kv_source *const tq_kv_byte_sources[];
extern const size_t tq_kv_n_byte_sources;
/* tq_kv_view_open with these bidders (n of them); no bid: the llama.cpp state
 * reader opens it anyway, for its precise message.  label names the input in
 * messages (a spooled copy's path is not the name the user gave). */
tq_status tq_kv_view_open_from(tq_ctx *ctx, const char *path, const char *label,
                               tq_type_profile profile, const tq_kv_source *const *sources,
                               size_t n, tq_kv_view **out);

/* Frees the streams' tensor arrays of every state (for a source retrying
 * another reading of the same bytes). */
void tq_kv_view_reset_states(tq_kv_view *v);
/* A view over memory the caller keeps alive, for a source's own direct
 * entry point (fuzzing, tests); closed with tq_kv_view_close. */
tq_status tq_kv_view_open_with(tq_ctx *ctx, const tq_kv_source *src, const void *data, size_t size,
                          const char *label, tq_type_profile profile, uint64_t max_bytes,
                          tq_kv_view **out);

#endif
