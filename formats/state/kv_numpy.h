/*
 * kv_numpy.h - NumPy K/V dumps.  A .npy or .npz holding per-layer K and V
 * arrays (PyTorch/vLLM-style dumps; names and shapes in NUMPY.md) is a KV
 * source behind tq_kv_view_open (kind TQ_KV_NUMPY); any KV view can be written
 * out as an .npz.
 */
#ifndef TQ_KV_NUMPY_H
#define TQ_KV_NUMPY_H

#include "kv_view.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The NumPy reader alone (what tq_kv_view_open uses when the bytes are a dump or
 * a NumPy image): at most max_bytes of array data (0: no limit).  data must
 * outlive the view. */
tq_status tq_numpy_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                               uint64_t max_bytes, tq_kv_view **out);

typedef struct tq_npz_options {
    uint32_t max_tokens;         /* keep the first N tokens (0: all) */
    uint32_t layer_lo, layer_hi; /* K/V of layers lo..hi only (inclusive) */
    uint32_t head_dim;           /* other sources: write [tokens, heads, head_dim]
                                    rather than [tokens, width] (0: unknown) */
    /* iSWA states: k_L / v_L (and the layer range) by model layer: model_layer[s][l] is
       state s's layer l (formats/model/kv_layers.h makes it); NULL: as the states count */
    uint32_t *const *model_layer;
} tq_npz_options;

/* NumPy dumps come back with their own array names, dtypes, shapes and
 * orientation, other arrays verbatim; other views as tokens, k_L and v_L
 * (float16 if the cache was, else float32; L the model layer, for two iSWA
 * caches when o->layers maps them, else kvI_sJ_k_L per cache and stream).
 * A stored (uncompressed) zip. */
tq_status tq_npz_write(tq_ctx *ctx, const tq_kv_view *v, const tq_npz_options *o, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
