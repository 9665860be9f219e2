/*
 * kv_numpy.h - NumPy K/V dumps.  A .npy or .npz holding per-layer K and V
 * arrays (PyTorch/vLLM-style dumps; names and shapes in NUMPY.md) opens
 * through tq_llama_state_open like a llama.cpp state file, as a KV view of
 * kind TQ_STATE_NUMPY; any KV view can be written out as an .npz.
 */
#ifndef TQ_KV_NUMPY_H
#define TQ_KV_NUMPY_H

#include "llama_state.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_npz_options {
    uint32_t max_tokens;         /* keep the first N tokens (0: all) */
    uint32_t layer_lo, layer_hi; /* K/V of layers lo..hi only (inclusive) */
    uint32_t head_dim;           /* state files: write [tokens, heads, head_dim]
                                    rather than [tokens, width] (0: unknown) */
} tq_npz_options;

/* NumPy dumps come back with their own array names, dtypes, shapes and
 * orientation, other arrays verbatim; state files as tokens, k_L and v_L
 * (float16 if the cache was, else float32).  A stored (uncompressed) zip. */
tq_status tq_state_write_npz(tq_ctx *ctx, const tq_llama_state *s, const tq_npz_options *o, FILE *out);

/* InnerQ scales from a .npy (what calibrate-innerq writes): float32 or
 * float16, shaped [head_dim] (K and V alike), [2, head_dim] (K, V) or
 * [layers, 2, head_dim]; returned as layers x 2 x head_dim floats (malloc'd),
 * each finite and positive. */
tq_status tq_innerq_scales_load(tq_ctx *ctx, const char *path, float **out, uint32_t *layers, uint32_t *dim);

#ifdef __cplusplus
}
#endif
#endif
