/* kv_presets.h - the snapshot presets: one table, a row a preset and a column each value that
 * differs between them, in kv_presets.c (zstd's lib/compress/clevels.h), and the values the
 * same in every preset as named constants here.  kv_plan.c and the files it is cut into read
 * their numbers here and nowhere else; why each value is what it is, and the figure that
 * decided it, is in tests/bench/results/kv_presets.md. */
#ifndef TQ_KV_PRESETS_H
#define TQ_KV_PRESETS_H

#include "kv_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What differs between presets: a row a preset in kv_presets.c's one table (its legend says
 * what each column holds and why).  tq_kvsnap_resolve puts the preset's row in the settings;
 * the plan reads it there, and the preset never again. */
typedef struct tq_kvsnap_preset_row {
    int exact; /* every byte kept: no codec, no coarser or finer cells */
    int k_bits, v_bits, k_bits_small, v_bits_small;
    int transform, k_rate_cut, v_rate_cut, v_rate_cut_small, v_screen;
    int past_bits, past_k_lift, past_v_lift;
    int recent_cells, recent_bits, recent_with_window;
} tq_kvsnap_preset_row;

/* What is the same in every preset (the figures behind each: tests/bench/results/
 * kv_presets.md). */
#define TQ_KVSNAP_SMALL_HEAD      32   /* the largest head that takes the small-head bits */
#define TQ_KVSNAP_BOUNDARY_BITS   8    /* the first and last --boundary-layers layers' bits */
#define TQ_KVSNAP_SINK_CELLS      1    /* first cells of each coded K and V kept exact */
#define TQ_KVSNAP_CELLS           TQ_CELLS_AUTO /* uniform cells where measured to pay: */
#define TQ_KVSNAP_UNIFORM_BITS    3    /* at these bits */
#define TQ_KVSNAP_UNIFORM_GROUP   64   /* in groups of this many values or more */
#define TQ_KVSNAP_NC_BITS         3    /* block norms matched to the cells from these bits */
#define TQ_KVSNAP_K_OFFSET        TQ_KOFF_ROPE /* K's pre-RoPE mean, turned */
#define TQ_KVSNAP_OFFSET_SHARE    5    /* hundredths of K's energy an offset must remove */
#define TQ_KVSNAP_OFFSET_HEAD     64   /* the smallest head that takes an offset */
#define TQ_KVSNAP_TRANSFORM_ROWS  4096 /* transform-coded rows a chunk holds at most */
#define TQ_KVSNAP_RANS_ROWS       1024 /* transform-coded chunks of this many rows: rANS */
#define TQ_KVSNAP_TRANSFORM_CELLS 16   /* the fewest coded cells a transform is fitted on */
#define TQ_KVSNAP_INNERQ_STRENGTH 50   /* automatic InnerQ's exponent, in hundredths */
#define TQ_KVSNAP_INNERQ_CELLS    64   /* the fewest cells a layer is calibrated on */
#define TQ_KVSNAP_ZSTD_LEVEL      1    /* the chunks' zstd level */
#define TQ_KVSNAP_CHUNK_KIB       256  /* KiB of source rows a block-coded chunk holds */

/* The request resolved against its preset and the inputs (the check first: TQ_ERR_ARG with the
 * reason); tq_kvsnap_prepare is its only caller, the one entry point that resolves. */
tq_status tq_kvsnap_resolve(tq_ctx *ctx, const tq_kvsnap_request *q, const tq_kvsnap_inputs *in,
                            const tq_kvsnap_run *run, tq_kvsnap_settings *r);


#ifdef __cplusplus
}
#endif
#endif
