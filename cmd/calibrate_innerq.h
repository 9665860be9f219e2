/* calibrate_innerq.h - the options of `tq calibrate-innerq` (the scales come from
 * formats/snapshot/innerq_derive.h, the fold into the model from formats/weights/innerq_fold.h). */
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

#endif
