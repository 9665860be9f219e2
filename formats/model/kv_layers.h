/* kv_layers.h - which model layer each layer of a KV state is.
 *
 * A llama.cpp state file lists, per KV memory state, the layers that state
 * caches, in model order but without their model indices.  Models with
 * interleaved sliding-window attention (iSWA: gemma2, gemma3, cohere2, ...)
 * keep two states: first the base cache (the global-attention layers), then
 * the SWA cache (the sliding-window layers), so "layer 0" of the second state
 * is not model layer 0.  The split comes from the model's
 * {arch}.attention.sliding_window_pattern (one bool per layer, true = SWA)
 * when it has one, else from llama.cpp's rule for the architecture: layer il
 * is SWA when il % n < n - 1, n = 2 for gemma2, 6 for gemma3, 4 for
 * cohere2.  A view with one state maps layer l to model layer l. */
#ifndef TQ_KV_LAYERS_H
#define TQ_KV_LAYERS_H

#include "kv_view.h"
#include "model.h"
#include "tqkv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_KV_LAYER_UNKNOWN UINT32_MAX

typedef struct tq_cache_layers {
    uint32_t n_state;
    uint32_t n_layer[2]; /* per state (the first stream's) */
    uint32_t *model[2];  /* model layer of state s's layer l; NULL when not known */
    char rule[192];      /* how the split was found, for messages */
} tq_cache_layers;

/* The model layers of v's states, from the model when given (NULL: from the
 * state's architecture).  Two states whose layer counts do not fit the
 * split are left unknown (model[] NULL), unless a model was given: then that
 * is an error (TQ_ERR_ARG), as the state cannot come from that model. */
tq_status tq_cache_layers_make(tq_ctx *ctx, const tq_kv_view *v, const tq_model *model,
                            tq_cache_layers *out);
/* The same for a state description without a view: n_state states of
 * n_layer[s] layers, the architecture's name. */
tq_status tq_cache_layers_for(tq_ctx *ctx, const char *arch, const tq_model *model,
                              uint32_t n_state, const uint32_t *n_layer, tq_cache_layers *out);
/* A snapshot's: the model layers its records carry (version 3), else as
 * tq_cache_layers_for finds them from the recorded architecture.  With a model,
 * recorded layers that differ from the model's split are an error
 * (TQ_ERR_ARG). */
tq_status tq_cache_layers_of_snapshot(tq_ctx *ctx, const tqkv_meta *m, const tq_model *model,
                                   tq_cache_layers *out);
/* The model layer of state s's layer l, TQ_KV_LAYER_UNKNOWN if not known. */
uint32_t tq_cache_layers_model(const tq_cache_layers *m, uint32_t s, uint32_t l);
int tq_cache_layers_known(const tq_cache_layers *m); /* 1 if every state is mapped */
void tq_cache_layers_free(tq_cache_layers *m);

#ifdef __cplusplus
}
#endif
#endif
