/*
 * kv_view.h - the KV view: what every KV source (llama.cpp state files, NumPy
 * dumps, anything added later) reads into and every KV writer writes from.
 *
 * A view holds one or two KV memory states (two for iSWA models: base cache,
 * then the SWA cache), each with streams, each with K and V tensors per
 * layer: cell_count rows of `width` elements of one element type.  Beside the
 * rows travel the tokens and the per-cell metadata (llama.cpp's layout: i32
 * pos, u32 n_seq, [8 bytes of M-RoPE extension], n_seq x i32 seq id) exactly
 * as the source had them.  A view also keeps the source's bytes, so that
 * everything which is not K/V rows can be kept verbatim (the snapshot
 * "skeleton"): tensor data_off are offsets into tq_kv_view_bytes().
 *
 * The front door: tq_kv_view_open() asks each registered source format to probe
 * the first bytes (as libarchive's format bidders do) and lets the one that
 * claims them open the view.  Sources and writers know this view, never each
 * other.
 */
#ifndef TQ_KV_VIEW_H
#define TQ_KV_VIEW_H

#include "gguf.h"
#include "tq.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which kind of file the view came from; the value is what snapshots record. */
/* The values are stored in .tqkv snapshots (tqkv.h source_kind): fixed. */
typedef enum tq_kv_kind { TQ_KV_SESSION = 0, TQ_KV_SEQUENCE = 1, TQ_KV_NUMPY = 2 } tq_kv_kind;

/* One K or V tensor of one layer of one stream: cell_count rows of `width`
 * elements of `type`.  Transposed V (v_trans = 1) is stored element-major:
 * `data` then holds width runs of cell_count elements. */
typedef struct tq_kv_tensor {
    const tq_ggml_type *type;
    uint64_t row_size; /* bytes per cell row (cell-major) */
    uint64_t width;    /* elements per row */
    int transposed;
    const uint8_t *data;
    uint64_t data_off; /* offset of data in the source bytes */
    uint64_t bytes;    /* cell_count * row_size */
    /* 0: rows as stored; n: stored as H_n times the model's values, in blocks
     * of n (llama.cpp's attention rotation of quantized caches, H_n the
     * normalized Walsh-Hadamard matrix), which tq_kv_view_read_rows undoes
     * (tq_hadamard_blocks; H_n is its own inverse).  Set by
     * tq_kv_view_set_hadamard. */
    uint32_t hadamard;
} tq_kv_tensor;

typedef struct tq_kv_stream {
    uint32_t cell_count;
    /* the per-cell metadata, verbatim; meta_len 0 with cells present: the
     * source has none, cell i is at position i of sequence 0 */
    uint64_t meta_off, meta_len;
    uint32_t v_trans, n_layer;
    tq_kv_tensor *k, *v; /* n_layer each */
    /* the indexer keys of a sparse-attention cache (llama.cpp's k_idx section, after K):
       n_layer, type NULL where a layer has none; NULL: no section.  Kept verbatim. */
    tq_kv_tensor *k_idx;
} tq_kv_stream;

typedef struct tq_kv_state { /* one KV memory state */
    uint32_t n_stream;
    tq_kv_stream *streams; /* an MLA cache's: v NULL (one latent a cell, in K) */
} tq_kv_state;

/* A recurrent memory's state (mamba, rwkv, the other half of a hybrid model's memory):
 * per-sequence rows of each layer's convolution (R) and state-space (S) tensors, which tq
 * keeps byte for byte.  llama.cpp writes it after the KV state(s), or alone. */
typedef struct tq_kv_recurrent {
    uint32_t cell_count;  /* sequences with a state (cells) */
    uint32_t n_layer;     /* the model's layers, with state or not, as written */
    uint32_t n_records;   /* tensor records: R then S of each layer that has state */
    uint64_t off, len;    /* where it lies in the source bytes */
    uint64_t state_bytes; /* the records' rows */
} tq_kv_recurrent;

typedef struct tq_kv_view tq_kv_view;

/* Opens a file through the front door.  Which source format claimed it:
 * tq_kv_view_format(). */
tq_status tq_kv_view_open(tq_ctx *ctx, const char *path, tq_type_profile profile, tq_kv_view **out);
/* The same, named label in messages (a copy of a pipe or an object in a temporary file). */
tq_status tq_kv_view_open_as(tq_ctx *ctx, const char *path, const char *label,
                            tq_type_profile profile, tq_kv_view **out);
/* 1 and *fp where the view is a snapshot that records its model's
 * fingerprint (encoded with --model); else 0 and *fp 0. */
int tq_kv_view_fingerprint(const tq_kv_view *v, uint64_t *fp);
tq_status tq_kv_view_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                            tq_type_profile profile, tq_kv_view **out);
/* The same, reading at most max_bytes of array data for sources that expand
 * their input (0: no limit), so that a small compressed .npz cannot claim
 * unbounded memory. */
tq_status tq_kv_view_open_memory_limited(tq_ctx *ctx, const void *data, size_t size,
                                         const char *label, tq_type_profile profile,
                                         uint64_t max_bytes, tq_kv_view **out);
void tq_kv_view_close(tq_kv_view *v);

/* The name of the source format that claims these leading bytes ("llama.cpp
 * state", "NumPy"), NULL if none does.  16 bytes are enough to decide. */
const char *tq_kv_view_probe(const void *data, size_t size);

const char *tq_kv_view_format(const tq_kv_view *v);
const char *tq_kv_view_label(const tq_kv_view *v);
tq_kv_kind tq_kv_view_kind(const tq_kv_view *v);
/* A kind's name (a view's, or a snapshot's source_kind): "session", or with long_form
 * "llama.cpp session file"; an unknown kind is numpy's. */
const char *tq_kv_kind_name(unsigned kind, int long_form);
uint32_t tq_kv_view_version(const tq_kv_view *v);
uint32_t tq_kv_view_n_tokens(const tq_kv_view *v);
const int32_t *tq_kv_view_tokens(const tq_kv_view *v);
const char *tq_kv_view_arch(const tq_kv_view *v); /* "" when the source does not say */
/* The head size the source's layout shows (a NumPy dump's [.., heads,
 * head_dim] arrays), 0 when it shows none (state files, [tokens, width]). */
uint32_t tq_kv_view_head_dim(const tq_kv_view *v);
int tq_kv_view_has_outputs(const tq_kv_view *v); /* old llama.cpp session layout */
int tq_kv_view_has_ext(const tq_kv_view *v);     /* M-RoPE cell extensions: their bytes */
/* The type-id profile (the fork's revision) the view was read with, and how it was chosen:
 * "option", or with TQ_PROFILE_AUTO what told it ("turbo4 rows of 66-byte blocks", ...) or
 * that nothing could ("turbo3 rows: the revision cannot be told from the bytes ..."). */
tq_type_profile tq_kv_view_profile(const tq_kv_view *v);
const char *tq_kv_view_profile_how(const tq_kv_view *v);
/* The recurrent memory's state, NULL where the source has none. */
const tq_kv_recurrent *tq_kv_view_recurrent(const tq_kv_view *v);
uint32_t tq_kv_view_n_kv(const tq_kv_view *v);   /* KV memory states */
const tq_kv_state *tq_kv_view_kv(const tq_kv_view *v, uint32_t i);
/* The stream that holds cells: a slot saved by a server with one stream a slot (--parallel N,
 * not unified) writes every stream, and only its own holds cells and layers; the first when
 * none does. */
const tq_kv_stream *tq_kv_state_stream(const tq_kv_state *k);
uint64_t tq_kv_view_size(const tq_kv_view *v);
const uint8_t *tq_kv_view_bytes(const tq_kv_view *v);
/* XXH64 of the source's bytes: which file a figure was computed from. */
uint64_t tq_kv_view_xxh64(const tq_kv_view *v);
/* Verbatim bytes before the first K/V rows. */
uint64_t tq_kv_view_prefix_len(const tq_kv_view *v);
/* Total K/V elements and row bytes over all states, streams and layers. */
/* Marks the K (is_v 0) or V tensor of a layer as stored rotated in blocks
 * of n values (tq_kv_tensor.hadamard; 0 clears): n a power of two in
 * [TQ_RHT_MIN, TQ_RHT_MAX] dividing the row, rows cell-major. */
tq_status tq_kv_view_set_hadamard(tq_ctx *ctx, tq_kv_view *v, uint32_t state, uint32_t stream,
                                  uint32_t layer, int is_v, uint32_t n);
uint64_t tq_kv_view_kv_values(const tq_kv_view *v);
uint64_t tq_kv_view_kv_bytes(const tq_kv_view *v);

/* A stream's lowest and highest cell positions (cells without metadata: 0 .. cell_count - 1;
 * a ring buffer's cells need not be in position order); 0 when it holds no cell. */
int tq_kv_view_stream_span(const tq_kv_view *v, const tq_kv_stream *st, int32_t *lo, int32_t *hi);

/* The leading cells of a stream whose positions are below max_pos: their
 * count and the length of their metadata (meta_len may be NULL).  Fails if
 * a later cell has such a position too, i.e. the cells are not in prompt
 * order.  max_pos 0: every cell. */
tq_status tq_kv_view_stream_prefix(tq_ctx *ctx, const tq_kv_view *v, const tq_kv_stream *st,
                              uint32_t max_pos, uint32_t *n_cells, uint64_t *meta_len);

/* Each cell's position (pos: cell_count entries), from the cell metadata
 * (cell i at position i where the source has none).  M-RoPE cells
 * (tq_kv_view_has_ext) have more to their position than this. */
void tq_kv_view_stream_positions(const tq_kv_view *v, const tq_kv_stream *st, int32_t *pos);
/* 1 if every cell of the stream belongs to one sequence, the same for all (no metadata: 1). */
int tq_kv_view_one_sequence(const tq_kv_view *v, const tq_kv_stream *st);

/* Reads cell-major rows [c0, c0+n) of a tensor as float32 (width values
 * each); handles the transposed layout.  Types: any with a tq_dtype decoder. */
tq_status tq_kv_view_read_rows(tq_ctx *ctx, const tq_kv_tensor *t, uint32_t cell_count,
                                 uint32_t c0, uint32_t n, float *out);

#ifdef __cplusplus
}
#endif
#endif
