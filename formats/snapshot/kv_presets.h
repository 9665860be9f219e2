/* kv_presets.h - the snapshot presets: every default and constant of a plan, a table a stage
 * and one row a preset in each, in kv_presets.c (zstd's lib/compress/clevels.h).  kv_plan.c
 * and the files it is cut into read their numbers here and nowhere else; why each value is
 * what it is, and the figure that decided it, is in tests/bench/results/kv_presets.md. */
#ifndef TQ_KV_PRESETS_H
#define TQ_KV_PRESETS_H

#include "kv_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A preset is one row in each stage's table (kv_presets.c, whose legends say what each column
 * holds): the blocks, their cells, K's offset, the transform, the past cells, InnerQ and the
 * chunks. */
typedef struct tq_kvsnap_blocks_row {
    int k_bits, v_bits, k_bits_small, v_bits_small, small_head, boundary_bits, sink_cells;
} tq_kvsnap_blocks_row;
typedef struct tq_kvsnap_cells_row {
    int cells, uniform_bits, uniform_group, matched_norm_bits;
} tq_kvsnap_cells_row;
typedef struct tq_kvsnap_offset_row {
    int k_offset, offset_share, offset_head;
} tq_kvsnap_offset_row;
typedef struct tq_kvsnap_transform_row {
    int transform, k_rate_cut, v_rate_cut, v_rate_cut_small, v_screen, transform_rows, rans_rows;
    int transform_cells;
} tq_kvsnap_transform_row;
typedef struct tq_kvsnap_past_row {
    int past_bits, k_lift, v_lift;
} tq_kvsnap_past_row;
typedef struct tq_kvsnap_recent_row {
    int recent_cells, recent_bits, with_window;
} tq_kvsnap_recent_row;
typedef struct tq_kvsnap_innerq_row {
    int innerq_strength, innerq_cells;
} tq_kvsnap_innerq_row;
typedef struct tq_kvsnap_chunks_row {
    int zstd_level, chunk_kib;
} tq_kvsnap_chunks_row;

/* Preset p's row of each stage (an unknown p: balanced's). */
const tq_kvsnap_blocks_row *tq_kvsnap_blocks_of(tq_kvsnap_preset p);
const tq_kvsnap_cells_row *tq_kvsnap_cells_of(tq_kvsnap_preset p);
const tq_kvsnap_offset_row *tq_kvsnap_offset_of(tq_kvsnap_preset p);
const tq_kvsnap_transform_row *tq_kvsnap_transform_of(tq_kvsnap_preset p);
const tq_kvsnap_past_row *tq_kvsnap_past_of(tq_kvsnap_preset p);
const tq_kvsnap_recent_row *tq_kvsnap_recent_of(tq_kvsnap_preset p);
const tq_kvsnap_innerq_row *tq_kvsnap_innerq_of(tq_kvsnap_preset p);
const tq_kvsnap_chunks_row *tq_kvsnap_chunks_of(tq_kvsnap_preset p);

/* The options with every default taken from the preset's row (options_init's
 * TQ_KVSNAP_UNSET and -1 rates). */
void tq_kvsnap_resolve(const tq_kvsnap_options *o, tq_kvsnap_options *resolved);
/* The transform's bits per value for K or V of tensors whose tq codec has `bits`: the
 * user's, else the preset's (0: not transformed); small_head: heads of the blocks' small size. */
double tq_kvsnap_transform_rate(const tq_kvsnap_options *o, int is_v, int bits, int small_head);

#ifdef __cplusplus
}
#endif
#endif
