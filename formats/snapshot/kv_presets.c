/* kv_presets.c - the preset table (kv_presets.h) and the options checked against it. */
#include "kv_presets.h"

/* clang-format off */
/* The presets, a row each in tq_kvsnap_preset's order (tq_kvsnap_preset_names below).  The
 * figures behind each value: tests/bench/results/kv_presets.md.
 *   ex     exact: every byte kept (lossless; the blocks' bits below only reported)
 *   k v    bits of K's and V's blocks
 *   ks vs  K's and V's bits at heads of TQ_KVSNAP_SMALL_HEAD values or fewer (an fp16 norm a
 *          head costs 16/g)
 *   tc     transform coding (kv_klt.h) where it takes fewer bits at the blocks' error: TA auto,
 *          T0 off
 *   kc vc  the transform's bits a K / V value: the block bits less kc / vc hundredths (vc 0: V
 *          keeps the blocks)
 *   vsm    vc at small heads (balanced's V there was never judged transform-coded:
 *          stories260K's heads of 8 restored worse with it)
 *   sv     V screened as K is: transform-coded only where, at its blocks' error, it takes fewer
 *          bits than they (the Llama-8B-shaped Gaussian V did not, and cost 4x the encode;
 *          SmolLM2's and Gemma 3's real V pass; small's V at 2.1 failed on 2 of SmolLM2's 8)
 *   pb     bits of the cells a sliding-window layer no longer attends to (0: as the others)
 *   kl vl  bits added to K's and V's other cells where a state has such cells
 *   rc rb  a layer's newest rc cells, rb bits finer, where it has no past cells (SmolLM2 on
 *          the choosing texts: the worst KL / floor at 128 steps 2.45 -> 1.68 for 0.04 bits a
 *          value; results/kv_texts.md, "Recent cells")
 *   rw     the newest cells finer also where sliding-window layers lift their window (kl, vl):
 *          on Gemma 3's held-out texts balanced's worst case rose with it, small's fell */
#define TA TQ_TC_AUTO
#define T0 TQ_TC_OFF
static const tq_kvsnap_preset_row presets[] = {
    /*             ex  k  v ks vs  tc   kc   vc vsm sv  pb kl vl   rc rb rw */
    /* balanced */ {0, 4, 4, 5, 4, TA, 125, 125,  0, 1,  2, 1, 1, 128, 2, 0},
    /* lossless */ {1, 4, 4, 4, 4, T0,   0,   0,  0, 0,  0, 0, 0,   0, 0, 0},
    /* q8       */ {0, 8, 8, 8, 8, T0,   0,   0,  0, 0,  0, 0, 0,   0, 0, 0},
    /* small    */ {0, 3, 3, 3, 3, TA, 100,  90, 90, 0,  1, 1, 1, 128, 2, 1},
};
#undef TA
#undef T0
/* clang-format on */
#define N_PRESETS (sizeof presets / sizeof *presets)

/* the presets' names, the table's rows in order: the one list (the CLI's choices too) */
const char *const tq_kvsnap_preset_names[N_PRESETS + 1] = {"balanced", "lossless", "q8", "small",
                                                           NULL};

/* The one lookup of a preset (an unknown p: balanced's row). */
static const tq_kvsnap_preset_row *preset_row(tq_kvsnap_preset p)
{
    return &presets[(unsigned)p < N_PRESETS ? (unsigned)p : 0];
}

const char *tq_kvsnap_preset_name(tq_kvsnap_preset p)
{
    if ((unsigned)p >= N_PRESETS) return "?";
    return tq_kvsnap_preset_names[p];
}

static int bits_in(int b, int lo, int hi) { return b == TQ_KVSNAP_UNSET || (b >= lo && b <= hi); }

static tq_status check(tq_ctx *ctx, const tq_kvsnap_request *o, const tq_kvsnap_inputs *in)
{
    if ((unsigned)o->preset >= N_PRESETS)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown preset %d", (int)o->preset);
    int lossless = preset_row(o->preset)->exact;
    if (o->head_dim < 0)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "head size %d", o->head_dim);
    if (o->codec != TQ_KVSNAP_UNSET && o->codec != TQKV_CODEC_TQ && o->codec != TQKV_CODEC_TURBO &&
        o->codec != TQKV_CODEC_ANGLE && o->codec != TQKV_CODEC_PROD)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "no block codec %d", o->codec);
    /* scales given (automatic ones are made only where these checks pass) */
    int given = o->innerq_path || in->innerq;
    if (given && in->model && in->model->innerq_folded)
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
    return TQ_OK; /* the bits a codec takes are checked by the plan, which resolves them */
}

tq_status tq_kvsnap_check(tq_ctx *ctx, const tq_kvsnap_request *q, const tq_kvsnap_inputs *in)
{
    return check(ctx, q, in);
}

tq_status tq_kvsnap_resolve(tq_ctx *ctx, const tq_kvsnap_request *q, const tq_kvsnap_inputs *in,
                            const tq_kvsnap_run *run, tq_kvsnap_settings *r)
{
    tq_status st = check(ctx, q, in);
    if (st) return st;
    const tq_kvsnap_preset_row *row = preset_row(q->preset);
    *r = (tq_kvsnap_settings){.preset = q->preset,
                              .row = row,
                              .k_bits = q->k_bits,
                              .v_bits = q->v_bits,
                              .boundary_layers = q->boundary_layers,
                              .head_dim = q->head_dim,
                              .model = in->model,
                              .codec = q->codec,
                              .innerq = in->innerq,
                              .innerq_layers = in->innerq_layers,
                              .innerq_dim = in->innerq_dim,
                              .innerq_file = in->innerq != NULL,
                              .innerq_path = q->innerq_path,
                              .innerq_off = q->innerq_off,
                              .sink_cells = q->sink_cells,
                              .k_offset = q->k_offset,
                              .no_planes = q->no_planes,
                              .cells = q->cells,
                              .transform = q->transform,
                              .k_rate = q->k_rate,
                              .v_rate = q->v_rate,
                              .past_bits = q->past_bits,
                              .recent_cells = q->recent_cells,
                              .recent_bits = q->recent_bits,
                              .base = in->base,
                              .base_name = q->base_name,
                              .zstd_level = run->zstd_level};
    if (r->sink_cells == TQ_KVSNAP_UNSET) r->sink_cells = TQ_KVSNAP_SINK_CELLS;
    if (r->k_offset == TQ_KVSNAP_UNSET) r->k_offset = TQ_KVSNAP_K_OFFSET;
    if (r->cells == TQ_KVSNAP_UNSET) r->cells = TQ_KVSNAP_CELLS;
    if (r->zstd_level == TQ_KVSNAP_UNSET) r->zstd_level = TQ_KVSNAP_ZSTD_LEVEL;
    if (r->transform == TQ_KVSNAP_UNSET) r->transform = row->transform;
    if (r->past_bits == TQ_KVSNAP_UNSET) r->past_bits = row->past_bits;
    if (r->recent_cells == TQ_KVSNAP_UNSET) r->recent_cells = row->recent_cells;
    if (r->recent_bits == TQ_KVSNAP_UNSET) r->recent_bits = row->recent_bits;
    if (r->codec == TQ_KVSNAP_UNSET) r->codec = TQKV_CODEC_TQ;
    if (r->codec != TQKV_CODEC_TQ) r->transform = TQ_TC_OFF;
    return TQ_OK;
}

void tq_kvsnap_innerq_defaults(double *strength, uint32_t *min_cells)
{
    *strength = TQ_KVSNAP_INNERQ_STRENGTH / 100.0;
    *min_cells = (uint32_t)TQ_KVSNAP_INNERQ_CELLS;
}
