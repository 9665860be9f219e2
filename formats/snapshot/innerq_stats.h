/* innerq_stats.h - calibration statistics for InnerQ: per model layer, KV
 * head and channel, the mean square of K and of V over every cell of every
 * KV source given (state files, NumPy dumps), streamed a block of rows at a
 * time.  iSWA caches count by model layer (kv_layers.h).  Every source must
 * have the first one's layers and row widths: dumps of different models are
 * refused, as are sources without cells. */
#ifndef TQ_INNERQ_STATS_H
#define TQ_INNERQ_STATS_H

#include "gguf.h"
#include "kv_view.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_innerq_stats tq_innerq_stats;

tq_status tq_innerq_stats_new(tq_ctx *ctx, uint32_t head_dim, tq_innerq_stats **out);
void tq_innerq_stats_free(tq_innerq_stats *s);
/* Before the first add: read K only (V scales are not wanted), half the reading. */
void tq_innerq_stats_k_only(tq_innerq_stats *s);
/* model (or NULL: the state's architecture) places iSWA layers */
tq_status tq_innerq_stats_add(tq_ctx *ctx, tq_innerq_stats *s, const tq_kv_view *v,
                              const tq_model *model);
uint32_t tq_innerq_stats_layers(const tq_innerq_stats *s);
uint32_t tq_innerq_stats_heads(const tq_innerq_stats *s); /* KV heads per layer */
uint32_t tq_innerq_stats_head_dim(const tq_innerq_stats *s);
uint64_t tq_innerq_stats_cells(const tq_innerq_stats *s, uint32_t layer); /* cells seen */
/* The head_dim mean squares of layer l, KV head h, K (is_v 0) or V into out. */
void tq_innerq_stats_mean2(const tq_innerq_stats *s, uint32_t l, uint32_t h, int is_v, double *out);

#ifdef __cplusplus
}
#endif
#endif
