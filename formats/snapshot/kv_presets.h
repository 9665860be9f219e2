/* kv_presets.h - the snapshot presets: every default and constant of a plan, one row a preset,
 * in kv_presets.c (zstd's lib/compress/clevels.h).  kv_plan.c and the files it is cut into read
 * their numbers here and nowhere else; why each value is what it is, and the figure that
 * decided it, is in tests/bench/results/kv_presets.md. */
#ifndef TQ_KV_PRESETS_H
#define TQ_KV_PRESETS_H

#include "kv_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A preset's row: kv_presets.c's legend says what each column holds. */
typedef struct tq_kvsnap_preset_row {
    const char *name;
    int k_bits, v_bits, k_bits_small, v_bits_small, small_head, boundary_bits;
    int sink_cells, k_offset, offset_share, offset_head;
    int cells, uniform_bits, uniform_group, matched_norm_bits;
    int zstd_level, chunk_kib;
    int transform, k_rate_cut, v_rate_cut, transform_rows, rans_rows, transform_cells;
    int past_bits, past_lift;
    int innerq_strength, innerq_cells;
} tq_kvsnap_preset_row;

/* The row of preset p (an unknown p: balanced's). */
const tq_kvsnap_preset_row *tq_kvsnap_preset_row_of(tq_kvsnap_preset p);

/* The options with every default taken from the preset's row (options_init's
 * TQ_KVSNAP_UNSET and -1 rates). */
void tq_kvsnap_resolve(const tq_kvsnap_options *o, tq_kvsnap_options *resolved);
/* The transform's bits per value for K or V of tensors whose tq codec has `bits`: the
 * user's, else the preset's (0: not transformed). */
double tq_kvsnap_transform_rate(const tq_kvsnap_options *o, int is_v, int bits);

#ifdef __cplusplus
}
#endif
#endif
