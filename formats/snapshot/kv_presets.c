/* kv_presets.c - the preset table (kv_presets.h) and the options checked against it. */
#include "kv_presets.h"

#include <string.h>

/* The presets, in tq_kvsnap_preset's order; each stage's table has a row for each, in this
 * order.  The figures behind each value: tests/bench/results/kv_presets.md. */
static const char *const preset_names[] = {"balanced", "lossless", "q8", "small"};
#define N_PRESETS (sizeof preset_names / sizeof *preset_names)
#define ROW_OF(table, p) (&(table)[(unsigned)(p) < N_PRESETS ? (unsigned)(p) : 0])

/* clang-format off */
/* blocks: tq's block codec (lossless: reported, unused: every byte is kept)
 *   k v    bits of K and V
 *   ks vs  K's and V's bits at heads of `sh` values or fewer (an fp16 norm a head costs 16/g)
 *   sh     the largest head that takes ks and vs
 *   bb     bits of the first and last --boundary-layers layers
 *   sk     first cells of each coded K and V kept exact (attention sinks) */
static const tq_kvsnap_blocks_row blocks_table[N_PRESETS] = {
    /*              k  v ks vs  sh bb sk */
    /* balanced */ { 4, 4, 5, 4, 32, 8, 1},
    /* lossless */ { 4, 4, 4, 4, 32, 8, 1},
    /* q8       */ { 8, 8, 8, 8, 32, 8, 1},
    /* small    */ { 3, 3, 3, 3, 32, 8, 1},
};

/* cells: the blocks' codebook
 *   ce     TQ_CELLS_*: Lloyd-Max or uniform cells (CA: uniform at ub bits in groups >= ug)
 *   ub ug  where auto takes uniform cells: at ub bits, in groups of ug values or more
 *   nb     block norms matched to the cells (norm correction) from nb bits */
#define CA TQ_CELLS_AUTO
static const tq_kvsnap_cells_row cells_table[N_PRESETS] = {
    /*              ce  ub  ug nb */
    /* balanced */ {CA,  3, 64, 3},
    /* lossless */ {CA,  3, 64, 3},
    /* q8       */ {CA,  3, 64, 3},
    /* small    */ {CA,  3, 64, 3},
};
#undef CA

/* offset: what K loses before it is coded
 *   ko     TQ_KOFF_*: the offset (KR: K's pre-RoPE mean, turned)
 *   os     hundredths of K's energy an offset must remove to be kept
 *   oh     the smallest head that takes an offset */
#define KR TQ_KOFF_ROPE
static const tq_kvsnap_offset_row offset_table[N_PRESETS] = {
    /*              ko  os  oh */
    /* balanced */ {KR,  5, 64},
    /* lossless */ {KR,  5, 64},
    /* q8       */ {KR,  5, 64},
    /* small    */ {KR,  5, 64},
};
#undef KR

/* transform: transform coding (kv_klt.h) where it takes fewer bits at tq's error
 *   tc     TQ_TC_*: auto (TA) or off (T0)
 *   kc vc  the transform's bits a K / V value: the block bits less kc / vc hundredths (vc 0: V
 *          keeps the blocks)
 *   vs     vc at heads of the blocks' `sh` values or fewer (balanced's V there was never judged
 *          transform-coded: stories260K's heads of 8 restored worse with it)
 *   sv     V screened as K is: transform-coded only where, at its blocks' error, it would take
 *          fewer bits than they (the Llama-8B-shaped Gaussian V did not, and cost 4x the
 *          encode; SmolLM2's and Gemma 3's real V pass: their 20 sessions' balanced bytes as
 *          unscreened; small's V at 2.1 failed it on 2 of SmolLM2's 8, so small does not screen)
 *   tr     transform-coded rows a chunk holds at most (chunks alike in size)
 *   rr     transform-coded chunks of rr rows or more hold rANS streams (else zstd's bytes)
 *   tm     the fewest coded cells a transform is fitted on */
#define TA TQ_TC_AUTO
#define T0 TQ_TC_OFF
static const tq_kvsnap_transform_row transform_table[N_PRESETS] = {
    /*              tc   kc  vc  vs sv    tr    rr  tm */
    /* balanced */ {TA, 125, 125,  0, 1, 4096, 1024, 16},
    /* lossless */ {T0,   0,   0,  0, 0, 4096, 1024, 16},
    /* q8       */ {T0,   0,   0,  0, 0, 4096, 1024, 16},
    /* small    */ {TA, 100,  90, 90, 0, 4096, 1024, 16},
};
#undef TA
#undef T0

/* past: the cells a sliding-window layer no longer attends to
 *   pb     their bits (0: as the others)
 *   kl vl  bits added to K's and V's other cells where a state has such cells */
static const tq_kvsnap_past_row past_table[N_PRESETS] = {
    /*              pb kl vl */
    /* balanced */ { 2, 1, 1},
    /* lossless */ { 0, 0, 0},
    /* q8       */ { 0, 0, 0},
    /* small    */ { 1, 1, 1},
};

/* recent: the newest cells of a layer that has no past cells, which the tokens after a restore
 * attend to most (SmolLM2 on the choosing texts: the worst KL / floor at 128 steps 2.45 -> 1.68
 * for 0.04 bits a value; results/kv_texts.md, "Recent cells")
 *   rc     how many (0: none)
 *   rb     bits they take beyond the others'
 *   rw     also in a state whose sliding-window layers lift their window (past's kl, vl): on
 *          Gemma 3's held-out texts balanced's worst case rose with it, small's fell */
static const tq_kvsnap_recent_row recent_table[N_PRESETS] = {
    /*               rc rb rw */
    /* balanced */ {128, 2, 0},
    /* lossless */ {  0, 0, 0},
    /* q8       */ {  0, 0, 0},
    /* small    */ {128, 2, 1},
};

/* innerq: automatic InnerQ (and calibrate-innerq's default)
 *   is     the exponent, in hundredths
 *   ic     the fewest cells a layer is calibrated on */
static const tq_kvsnap_innerq_row innerq_table[N_PRESETS] = {
    /*              is  ic */
    /* balanced */ {50, 64},
    /* lossless */ {50, 64},
    /* q8       */ {50, 64},
    /* small    */ {50, 64},
};

/* chunks: the container
 *   zs     the chunks' zstd level
 *   ck     KiB of source rows a block-coded chunk holds */
static const tq_kvsnap_chunks_row chunks_table[N_PRESETS] = {
    /*              zs  ck */
    /* balanced */ { 1, 256},
    /* lossless */ { 1, 256},
    /* q8       */ { 1, 256},
    /* small    */ { 1, 256},
};
/* clang-format on */

const tq_kvsnap_blocks_row *tq_kvsnap_blocks_of(tq_kvsnap_preset p)
{
    return ROW_OF(blocks_table, p);
}

const tq_kvsnap_cells_row *tq_kvsnap_cells_of(tq_kvsnap_preset p) { return ROW_OF(cells_table, p); }

const tq_kvsnap_offset_row *tq_kvsnap_offset_of(tq_kvsnap_preset p)
{
    return ROW_OF(offset_table, p);
}

const tq_kvsnap_transform_row *tq_kvsnap_transform_of(tq_kvsnap_preset p)
{
    return ROW_OF(transform_table, p);
}

const tq_kvsnap_past_row *tq_kvsnap_past_of(tq_kvsnap_preset p) { return ROW_OF(past_table, p); }

const tq_kvsnap_recent_row *tq_kvsnap_recent_of(tq_kvsnap_preset p)
{
    return ROW_OF(recent_table, p);
}

const tq_kvsnap_innerq_row *tq_kvsnap_innerq_of(tq_kvsnap_preset p)
{
    return ROW_OF(innerq_table, p);
}

const tq_kvsnap_chunks_row *tq_kvsnap_chunks_of(tq_kvsnap_preset p)
{
    return ROW_OF(chunks_table, p);
}

int tq_kvsnap_preset_parse(const char *name, tq_kvsnap_preset *out)
{
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (!strcmp(name, preset_names[i])) {
            *out = (tq_kvsnap_preset)i;
            return 0;
        }
    }
    return -1;
}

const char *tq_kvsnap_preset_name(tq_kvsnap_preset p)
{
    if ((unsigned)p >= N_PRESETS) return "?";
    return preset_names[p];
}

void tq_kvsnap_options_init(tq_kvsnap_options *o)
{
    *o = (tq_kvsnap_options){.preset = TQ_KVSNAP_PRESET_BALANCED,
                             .k_bits = TQ_KVSNAP_UNSET,
                             .v_bits = TQ_KVSNAP_UNSET,
                             .head_dim = TQ_KVSNAP_UNSET,
                             .codec = TQ_KVSNAP_UNSET,
                             .sink_cells = TQ_KVSNAP_UNSET,
                             .k_offset = TQ_KVSNAP_UNSET,
                             .cells = TQ_KVSNAP_UNSET,
                             .transform = TQ_KVSNAP_UNSET,
                             .k_rate = TQ_KVSNAP_UNSET,
                             .v_rate = TQ_KVSNAP_UNSET,
                             .past_bits = TQ_KVSNAP_UNSET,
                             .recent_cells = TQ_KVSNAP_UNSET,
                             .recent_bits = TQ_KVSNAP_UNSET,
                             .zstd_level = TQ_KVSNAP_UNSET};
}

static int bits_in(int b, int lo, int hi) { return b == TQ_KVSNAP_UNSET || (b >= lo && b <= hi); }

tq_status tq_kvsnap_options_check(tq_ctx *ctx, const tq_kvsnap_options *o)
{
    if ((unsigned)o->preset >= N_PRESETS)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown preset %d", (int)o->preset);
    int lossless = o->preset == TQ_KVSNAP_PRESET_LOSSLESS;
    if (o->head_dim != TQ_KVSNAP_UNSET && o->head_dim < 1)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "head size %d", o->head_dim);
    if (o->codec != TQ_KVSNAP_UNSET && o->codec != TQKV_CODEC_TQ && o->codec != TQKV_CODEC_TURBO &&
        o->codec != TQKV_CODEC_ANGLE && o->codec != TQKV_CODEC_PROD)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "no block codec %d", o->codec);
    /* scales given (automatic ones are made only where these checks pass) */
    int given = o->innerq_file || o->innerq_path || o->innerq;
    if (given && o->model && o->model->innerq_folded)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the model has InnerQ scales folded in already: its states need "
                                "no --innerq");
    if (given && o->innerq_off)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "InnerQ scales given and turned off");
    if (given && (o->codec == TQKV_CODEC_ANGLE || o->codec == TQKV_CODEC_PROD))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "--innerq scales what tq's codec codes: not with "
                                "--codec %s",
                                o->codec == TQKV_CODEC_ANGLE ? "angle" : "prod");
    if (given && o->codec == TQKV_CODEC_TURBO)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "--innerq scales what tq's codec codes: not with --turbo");
    if (given && lossless)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG, "--innerq scales what tq's codec codes: not with --preset lossless");
    if (!bits_in(o->past_bits, 0, 8))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "--past-bits must be 0..8 (0: as the others)");
    if (o->past_bits > 0 && lossless)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "--past-bits codes cells coarser: not with --preset lossless");
    if (!bits_in(o->recent_bits, 0, 7))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "--recent-bits must be 0..7 (0: none finer)");
    if (o->recent_cells != TQ_KVSNAP_UNSET && o->recent_cells < 0)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "--recent-cells %d", o->recent_cells);
    if (o->recent_bits > 0 && o->recent_cells > 0 && lossless)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "--recent-bits codes cells finer: not with --preset lossless");
    return TQ_OK; /* the bits a codec takes are checked once resolved (tq_kvsnap_plan_make) */
}

void tq_kvsnap_resolve(const tq_kvsnap_options *o, tq_kvsnap_options *r)
{
    tq_kvsnap_preset p = o->preset;
    *r = *o;
    if (r->sink_cells == TQ_KVSNAP_UNSET) r->sink_cells = tq_kvsnap_blocks_of(p)->sink_cells;
    if (r->k_offset == TQ_KVSNAP_UNSET) r->k_offset = tq_kvsnap_offset_of(p)->k_offset;
    if (r->cells == TQ_KVSNAP_UNSET) r->cells = tq_kvsnap_cells_of(p)->cells;
    if (r->zstd_level == TQ_KVSNAP_UNSET) r->zstd_level = tq_kvsnap_chunks_of(p)->zstd_level;
    if (r->transform == TQ_KVSNAP_UNSET) r->transform = tq_kvsnap_transform_of(p)->transform;
    if (r->past_bits == TQ_KVSNAP_UNSET) r->past_bits = tq_kvsnap_past_of(p)->past_bits;
    if (r->recent_cells == TQ_KVSNAP_UNSET) r->recent_cells = tq_kvsnap_recent_of(p)->recent_cells;
    if (r->recent_bits == TQ_KVSNAP_UNSET) r->recent_bits = tq_kvsnap_recent_of(p)->recent_bits;
    if (r->codec == TQ_KVSNAP_UNSET) r->codec = TQKV_CODEC_TQ;
    if (r->codec != TQKV_CODEC_TQ) r->transform = TQ_TC_OFF;
}

double tq_kvsnap_transform_rate(const tq_kvsnap_options *o, int is_v, int bits, int small_head)
{
    const tq_kvsnap_transform_row *row = tq_kvsnap_transform_of(o->preset);
    double given = is_v ? o->v_rate : o->k_rate;
    int v_cut = small_head ? row->v_rate_cut_small : row->v_rate_cut;
    int cut = is_v ? v_cut : row->k_rate_cut;
    if (given != TQ_KVSNAP_UNSET) return given;
    return cut ? bits - cut / 100.0 : 0.0;
}

uint32_t tq_kvsnap_given_head_dim(const tq_kvsnap_options *o)
{
    return o->head_dim > 0 ? (uint32_t)o->head_dim : 0;
}

void tq_kvsnap_innerq_defaults(double *strength, uint32_t *min_cells)
{
    const tq_kvsnap_innerq_row *row = tq_kvsnap_innerq_of(TQ_KVSNAP_PRESET_BALANCED);
    *strength = row->innerq_strength / 100.0;
    *min_cells = (uint32_t)row->innerq_cells;
}
