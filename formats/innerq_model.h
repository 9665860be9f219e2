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

/* out: n_kv_head x head_dim; *how names the source ("QK-norm gains", ...). */
tq_status tq_innerq_query_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim, uint32_t n_kv_head,
                                 double *out, const char **how);

#endif
