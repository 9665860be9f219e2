/*
 * llama_state.h - llama.cpp state files: session files ('ggsn' v9, both the
 * layouts with and without the old outputs section) and sequence files
 * ('ggsq' v2, what llama-server's slot save writes).  See LLAMA_STATE.md.
 *
 * The reader maps the file, parses all of it and refuses anything it does
 * not fully understand; the result is a KV view: for every KV memory state
 * in the file (one, or two for iSWA models), every stream and every layer,
 * the K and V rows of the stored cells with their element type.  Bytes that
 * are not K/V rows (header, tokens, cell metadata, the old outputs section)
 * are kept verbatim so the writer can rebuild the file exactly.
 */
#ifndef TQ_LLAMA_STATE_H
#define TQ_LLAMA_STATE_H

#include "gguf.h"
#include "tq.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_GGSN_MAGIC 0x6767736eu
#define TQ_GGSQ_MAGIC 0x67677371u

/* NUMPY: a .npy/.npz K/V dump (kv_numpy.h), held as a NumPy image. */
typedef enum tq_state_kind { TQ_STATE_SESSION = 0, TQ_STATE_SEQUENCE = 1, TQ_STATE_NUMPY = 2 } tq_state_kind;

/* One K or V tensor of one layer of one stream: cell_count rows of `width`
 * elements of `type`.  Transposed V (v_trans = 1) is stored element-major:
 * `data` then holds width runs of cell_count elements. */
typedef struct tq_kv_tensor {
    const tq_ggml_type *type;
    uint64_t row_size;  /* bytes per cell row (cell-major) */
    uint64_t width;     /* elements per row */
    int transposed;
    const uint8_t *data;
    uint64_t data_off;  /* file offset of data */
    uint64_t bytes;     /* cell_count * row_size */
} tq_kv_tensor;

typedef struct tq_kv_stream {
    uint32_t cell_count;
    uint64_t meta_off, meta_len; /* the per-cell metadata, verbatim */
    uint32_t v_trans, n_layer;
    tq_kv_tensor *k, *v;         /* n_layer each */
} tq_kv_stream;

typedef struct tq_kv_state { /* one KV memory state (§5 of the spec) */
    uint32_t n_stream;
    tq_kv_stream *streams;
} tq_kv_state;

typedef struct tq_llama_state tq_llama_state;

tq_status tq_llama_state_open(tq_ctx *ctx, const char *path, tq_type_profile profile, tq_llama_state **out);
tq_status tq_llama_state_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                     tq_type_profile profile, tq_llama_state **out);
/* The same, reading at most max_bytes of NumPy array data (0: no limit), so
 * that a small compressed .npz cannot claim unbounded memory. */
tq_status tq_llama_state_open_memory_limited(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                             tq_type_profile profile, uint64_t max_bytes, tq_llama_state **out);
void tq_llama_state_close(tq_llama_state *s);

tq_state_kind tq_llama_state_kind(const tq_llama_state *s);
uint32_t tq_llama_state_version(const tq_llama_state *s);
uint32_t tq_llama_state_n_tokens(const tq_llama_state *s);
const int32_t *tq_llama_state_tokens(const tq_llama_state *s); /* may be unaligned-safe copy */
const char *tq_llama_state_arch(const tq_llama_state *s);      /* "" for sequence files */
int tq_llama_state_has_outputs(const tq_llama_state *s);       /* old session layout */
int tq_llama_state_has_ext(const tq_llama_state *s);           /* M-RoPE cell extensions */
uint32_t tq_llama_state_n_kv(const tq_llama_state *s);         /* KV memory states */
const tq_kv_state *tq_llama_state_kv(const tq_llama_state *s, uint32_t i);
uint64_t tq_llama_state_size(const tq_llama_state *s);
const uint8_t *tq_llama_state_bytes(const tq_llama_state *s);
/* Verbatim bytes before the first KV state: magic .. tokens (.. arch ..
 * outputs section). */
uint64_t tq_llama_state_prefix_len(const tq_llama_state *s);
/* Total K/V elements and row bytes over all states, streams and layers. */
uint64_t tq_llama_state_kv_values(const tq_llama_state *s);
uint64_t tq_llama_state_kv_bytes(const tq_llama_state *s);

/* The leading cells of a stream whose positions are below max_pos: their
 * count and the length of their metadata (meta_len may be NULL).  Fails if
 * a later cell has such a position too, i.e. the cells are not in prompt
 * order.  NumPy views: the first max_pos cells.  max_pos 0: every cell. */
tq_status tq_kv_stream_prefix(tq_ctx *ctx, const tq_llama_state *s, const tq_kv_stream *st, uint32_t max_pos,
                              uint32_t *n_cells, uint64_t *meta_len);

/* Writes s again as a llama.cpp state file: as a session (`arch` names the
 * model architecture when s has none, i.e. comes from a sequence file) or
 * a sequence file, keeping only the first max_tokens tokens and the cells
 * at positions below max_tokens (0: all).  Such cells must come first in
 * every stream, as they do after a plain prompt. */
typedef struct tq_state_rewrite {
    tq_state_kind kind;
    const char *arch;
    uint32_t max_tokens;
} tq_state_rewrite;
tq_status tq_llama_state_rewrite(tq_ctx *ctx, const tq_llama_state *s, const tq_state_rewrite *o, FILE *out);

/* Reads cell-major row c of a tensor as float32 (width values); handles the
 * transposed layout.  Types: any with a tq_dtype decoder. */
tq_status tq_kv_tensor_read_rows(tq_ctx *ctx, const tq_kv_tensor *t, uint32_t cell_count, uint32_t c0, uint32_t n,
                                 float *out);

#ifdef __cplusplus
}
#endif
#endif
