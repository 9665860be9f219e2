/* calibrate_innerq.h - the parts of `tq calibrate-innerq`: the options, the
 * scales from the statistics (formats/snapshot/innerq_derive.h) and the fold into the model
 * (innerq_fold.c). */
#ifndef TQ_CALIBRATE_INNERQ_H
#define TQ_CALIBRATE_INNERQ_H

#include "cli_opts.h"
#include "innerq_derive.h"
#include "innerq_model.h"
#include "innerq_scales.h"
#include "innerq_stats.h"

typedef struct ci_opts {
    cli_common c;
    const char *dumps[256];
    int n_dumps;
    const char *method, *v, *per, *fold;
    double strength, clamp[2]; /* clamp 0, 0: none */
    long min_tokens, head_dim;
    int pow2, allow_requantize;
} ci_opts;

/* What --fold will change, decided before anything is written: which parts
 * fold (K through the QK-norm gains or W_q/W_k rows, V through W_v rows and
 * W_o columns) and why a part is left out. */
typedef struct ci_fold_plan {
    int k, v;                    /* parts that fold */
    char k_why[200], v_why[200]; /* why a part is left out ("" if it folds or was not asked for) */
} ci_fold_plan;

/* 0, or an exit code for a fold that cannot be done at all. */
int ci_fold_plan_make(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am,
                      const tq_innerq_set *set, ci_fold_plan *fp);
int ci_fold_write(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am,
                  const tq_innerq_set *set, const tq_innerq_provenance *prov,
                  const ci_fold_plan *fp);

#endif
