/* innerq_auto.c - encode-kvdump's --innerq auto (kv_plan.h): with a model
 * whose QK-norm gains give E[q^2] exactly, Q-aware K scales from the state
 * being encoded (stored in the snapshot).  Measured: Gemma 3 270M's
 * balanced snapshots restore with a third of the KL; on stories260K, where
 * E[q^2] is only approximated from W_q, the same scales cost KL, so models
 * without QK-norm get none. */
#include "innerq_derive.h"
#include "kv_plan.h"
#include "kv_presets.h"

#include <stdint.h>
#include <string.h>


/* A quantized K read as stored where tq_kvsnap_find_rotation did not find
 * (or was not asked to find) llama.cpp's Hadamard rotation: its channels may
 * not be the model's, and Q-aware scales would weight the wrong ones.
 * Measured on a q8_0 llama-server slot of Gemma 3 270M (2048 tokens,
 * --swa-full, 48 greedy tokens after the restore): KL over the top-20 0.045
 * with such scales on the rotated rows, 0.012 without. */
static int k_is_quantized(const tq_kv_view *v)
{
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(v, i)->n_stream; j++) {
            const tq_kv_stream *s = &tq_kv_view_kv(v, i)->streams[j];
            for (uint32_t l = 0; s->cell_count && l < s->n_layer; l++)
                if (s->k[l].type->block > 1 && !s->k[l].hadamard) return 1;
        }
    return 0;
}

/* Whether every layer's K and V rows have one width (a gemma4's sliding and global layers may
 * not: other head sizes and KV head counts). */
static int one_width(const tq_kv_view *v)
{
    uint64_t width = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++) {
        const tq_kv_state *k = tq_kv_view_kv(v, i);
        for (uint32_t j = 0; j < k->n_stream; j++)
            for (uint32_t l = 0; l < k->streams[j].n_layer; l++) {
                const tq_kv_stream *st = &k->streams[j];
                uint64_t w = st->k[l].width;
                if ((width && w != width) || (st->v && st->v[l].width != w)) return 0;
                width = w;
            }
    }
    return 1;
}

tq_status tq_kvsnap_auto_innerq(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                tq_innerq_set *set, const char **why)
{
    memset(set, 0, sizeof *set);
    *why = "off";
    if (!o->row)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "options not resolved (tq_kvsnap_resolve)");
    if (!o->model || o->codec != TQKV_CODEC_TQ || o->base || o->row->exact) return TQ_OK;
    if (k_is_quantized(v)) {
        *why = "off (K of a quantized cache, not in the model's channels)";
        return TQ_OK;
    }
    if (!one_width(v)) {
        *why = "off (layers of different widths: scales are per channel of one width)";
        return TQ_OK;
    }
    tq_attn_model am;
    if (tq_attn_model_read(ctx, o->model, &am) || !am.qk_norm || am.folded ||
        am.head_dim != am.head_dim_v) {
        tq_ctx_clear_error(ctx);
        *why = "off (the model has no QK-norm gains: E[q^2] would be a guess)";
        return TQ_OK;
    }
    tq_innerq_stats *st = NULL;
    tq_status rc = tq_innerq_stats_new(ctx, am.head_dim, &st);
    if (!rc) tq_innerq_stats_k_only(st); /* V is left alone */
    if (!rc) rc = tq_innerq_stats_add(ctx, st, v, o->model);
    uint64_t fewest = UINT64_MAX;
    for (uint32_t l = 0; !rc && l < tq_innerq_stats_layers(st); l++)
        if (tq_innerq_stats_cells(st, l) < fewest) fewest = tq_innerq_stats_cells(st, l);
    char how[128];
    /* calibrate-innerq's rule with --model, at the presets' strength (kv_presets.h) */
    tq_innerq_derive_options derive = {.k_method = TQ_INNERQ_QK,
                                       .v_method = TQ_INNERQ_V_OFF,
                                       .strength = TQ_KVSNAP_INNERQ_STRENGTH / 100.0};
    if (!rc && (tq_innerq_stats_layers(st) != am.n_layer ||
                fewest < (uint64_t)TQ_KVSNAP_INNERQ_CELLS)) {
        *why = "off (too few cells to calibrate on)";
    } else if (!rc) {
        rc = tq_innerq_derive(ctx, &derive, o->model, &am, st, set, how, sizeof how);
        if (!rc) *why = "Q-aware scales from this state and the model's QK-norm gains";
    }
    tq_innerq_stats_free(st);
    return rc;
}
