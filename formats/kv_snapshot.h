/*
 * kv_snapshot.h - llama.cpp state file <-> .tqkv snapshot: which codec each
 * K/V tensor gets, and the row coding on both sides.  Containers are in
 * llama_state.h and tqkv.h; the codecs in libtq.
 */
#ifndef TQ_KV_SNAPSHOT_H
#define TQ_KV_SNAPSHOT_H

#include "gguf.h"
#include "llama_state.h"
#include "tqkv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_kvsnap_options {
    int lossless;          /* 1: every tensor verbatim (zstd) */
    int k_bits, v_bits;    /* tq codec bits, 1..8 */
    int boundary_layers;   /* first and last N layers at 8 bits */
    uint32_t head_dim;     /* rotation group; 0 = guess from the row width */
    int zstd_level;        /* for the chunks; 0 = none */
    int has_fingerprint;
    uint64_t fingerprint;
    const char *profile;   /* type-id profile name used to read the source */
    int threads;           /* 0 = all */
    int turbo;             /* code with the fork's turbo2/3/4 blocks (bits 2..4, rows of 128s) */
    /* InnerQ: per-channel scales s_j multiplied in before coding and divided
     * out after decoding, for tq-coded tensors: innerq holds
     * innerq_layers x 2 (K, V) x innerq_dim floats; innerq_layers 1 applies
     * the same K and V scales to every layer.  innerq_dim must be the group. */
    const float *innerq;
    uint32_t innerq_layers, innerq_dim;
    const tqkv_reader *base; /* --append: store only the cells after the base's */
    const char *base_name;   /* the base's file name, recorded for decode */
    /* called after each tensor with the source K/V bytes done so far */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} tq_kvsnap_options;

typedef struct tq_kvsnap_report {
    uint32_t n_tensors, n_lossy, n_raw;
    uint64_t source_bytes, snapshot_bytes, kv_values, kv_bytes;
    uint32_t group_used;
    int group_guessed;
} tq_kvsnap_report;

tq_status tq_kvsnap_encode(tq_ctx *ctx, const tq_kv_view *s, const tq_kvsnap_options *o, FILE *out,
                           tq_kvsnap_report *rep);
typedef struct tq_kvsnap_decode_options {
    int threads;            /* 0 = all */
    const char *cache_type; /* NULL: the original element types; else every K/V
                               tensor as "f32", "f16", "bf16" or the fork's
                               "turbo2"/"turbo3"/"turbo4" (heads zero-padded to
                               128s, as the fork allocates its cache) */
    uint32_t head_dim;      /* needed for turbo cache types */
    /* Rows and layers that need not be decoded (a token prefix or a layer
     * range is wanted): their bytes are written as zeros, the file keeps its
     * layout, only the chunks wanted are read.  Rows below max_rows (0:
     * all) of layers in [layer_lo, layer_hi) (layer_hi 0: all). */
    uint32_t max_rows;
    uint32_t layer_lo, layer_hi;
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} tq_kvsnap_decode_options;

/* Rebuilds the source state file in its exact layout (opt may be NULL). */
tq_status tq_kvsnap_decode(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                           const tq_kvsnap_decode_options *opt, FILE *out);

/* Model identity: a hash of the architecture, its hyperparameter keys and
 * the tensor table (names, types, shapes), not of the weights' values. */
uint64_t tq_model_fingerprint(const tq_gguf *g);
/* The attention head size of a model, 0 if the metadata does not say. */
uint32_t tq_model_head_dim(const tq_gguf *g, int value);

#ifdef __cplusplus
}
#endif
#endif
