/* innerq_fold.h - a model with InnerQ scales folded into its weights (what calibrate-innerq
 * --fold writes), so that any runtime KV cache stores s*k and s_v*v: K through the QK-norm
 * gains (attn_q_norm / attn_k_norm) or W_q / W_k rows, V through W_v rows and W_o columns. */
#ifndef TQ_INNERQ_FOLD_H
#define TQ_INNERQ_FOLD_H

#include "gguf.h"
#include "innerq_model.h"
#include "innerq_scales.h"

#include <stddef.h>

/* What the fold will change, decided before anything is written: which parts fold and why a
 * part is left out. */
typedef struct tq_fold_plan {
    int k, v;                    /* parts that fold */
    char k_why[200], v_why[200]; /* why a part is left out ("" if it folds or was not asked for) */
} tq_fold_plan;

/* The plan; TQ_ERR_ARG where per-head scales meet QK-norm gains (which serve every head),
 * TQ_ERR_UNSUPPORTED where nothing can fold (quantized tensors without allow_requantize, or
 * types tq does not write). */
tq_status tq_fold_plan_make(tq_ctx *ctx, int allow_requantize, const tq_gguf *g,
                            const tq_attn_model *am, const tq_innerq_set *set, tq_fold_plan *fp);
/* The folded model written to path (never over one of inputs), the scales' provenance in its
 * metadata; *changed the tensors rewritten. */
tq_status tq_fold_write(tq_ctx *ctx, const tq_gguf *g, const char *path,
                        const char *const *inputs, size_t n_inputs, const tq_attn_model *am,
                        const tq_innerq_set *set, const tq_innerq_provenance *prov,
                        const tq_fold_plan *fp, size_t *changed);

#endif
