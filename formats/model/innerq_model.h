/* innerq_model.h - the query side of Q-aware InnerQ: E[q_j^2] per layer, KV
 * head and channel, from the model alone.  Models with QK-norm (gemma3,
 * qwen3): q leaves the per-head RMSNorm with unit mean square, so E[q_j^2] is
 * the square of attn_q_norm's gain.  Others: the squared norms of W_q's rows
 * with the attention norm's gains folded in, i.e. E[q_j^2] for a whitened,
 * normalized input (an approximation: real inputs are not white).  The query
 * heads that share a KV head are pooled (mean). */
#ifndef TQ_INNERQ_MODEL_H
#define TQ_INNERQ_MODEL_H

#include "gguf.h"
#include "model.h"

/* What InnerQ needs to know of a model's attention. */
typedef struct tq_attn_model {
    char arch[64];
    uint32_t n_layer, n_head, n_head_kv, head_dim, head_dim_v;
    uint32_t rope_dims; /* channels RoPE turns ({arch}.rope.dimension_count, else head_dim) */
    tq_rope_pairs
        pairs;   /* NeoX half-split for the architectures llama.cpp runs so, else adjacent */
    int qk_norm; /* attn_q_norm and attn_k_norm in every layer (gemma3, qwen3, ...) */
    int folded;  /* the model already has InnerQ scales folded in (tq.innerq.folded) */
} tq_attn_model;

/* Refuses (TQ_ERR_UNSUPPORTED, one line) a model without the hyperparameters
 * or the per-layer attn_q/attn_k/attn_v/attn_output tensors tq knows (fused
 * QKV, per-layer head counts, MLA). */
tq_status tq_attn_model_read(tq_ctx *ctx, const tq_model *model, tq_attn_model *m);

/* out: n_kv_head x head_dim; *how names the source ("QK-norm gains", ...). */
tq_status tq_innerq_query_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim,
                                 uint32_t n_kv_head, double *out, const char **how);

/* The V side: an error e_j in channel j of a head's attention output reaches
 * the residual stream as e_j times column j of W_o, so the weight of channel
 * j is that column's mean square, averaged over the query heads reading the
 * KV head.  out: n_kv_head x head_dim. */
tq_status tq_innerq_output_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim,
                                  uint32_t n_kv_head, double *out);

#endif
