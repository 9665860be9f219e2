/* kv_plan_parts.h - what kv_plan.c shares with the files it is cut into (not an API):
 * the source tensors the plan walks, --append's adoption of a base (kv_append.c) and K's
 * offset fitting (kv_offset.c). */
#ifndef TQ_KV_PLAN_PARTS_H
#define TQ_KV_PLAN_PARTS_H

#include "kv_plan.h"
#include "kv_presets.h"

/* One K or V tensor of the view, as the plan walks them (in the order of the source bytes). */
typedef struct src_tensor {
    const tq_kv_tensor *kt;
    uint32_t cells, kv_state, stream, layer, n_layer;
    int is_v;
    /* the model layer (iSWA states hold interleaved subsets) and the model's
     * layer count: what boundary layers and per-layer scales count in */
    uint32_t model_layer, n_model;
    int mapped; /* model_layer is known from a split of two caches: recorded */
    uint32_t past_rows; /* rows before the first one within the sliding window (0: none) */
    uint32_t recent_rows; /* the last rows, the newest cells, to be coded finer (0: none) */
    int no_rope; /* its K has no RoPE to undo: a NoPE layer, or an MLA latent (model.h) */
    int latent;  /* an MLA cache's K: one latent a cell, shared by every head */
    uint32_t head; /* its head size: the model's, the sliding layers' own where they differ */
} src_tensor;

/* --append: the base's coding taken over by the tensors of m whose rows the base holds some of
 * (its chunks are reused as they are; recent: the newest cells a long link codes finer, 0
 * none); the base's name recorded. */
tq_status tq_kvsnap_adopt_base(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                               const char *base_name, const tq_kv_view *v, const src_tensor *src,
                               uint32_t recent);
/* Rows of a state that its base's tensor holds: n rows from row `at` on are the base's rows
 * from `from` on (tqkv_record.share_at, base_from, row_start). */
typedef struct tq_kvsnap_share {
    uint32_t at, from, n;
} tq_kvsnap_share;
/* The longest such run of s's stream in the base's tensor i, found by the cells' positions in
 * the base's layout bv, kept rows compared byte for byte (run->n 0: none). */
tq_status tq_kvsnap_base_share(tq_ctx *ctx, const tq_kv_view *v, const src_tensor *s,
                               const tqkv_reader *base, uint32_t i, const tq_kv_view *bv,
                               tq_kvsnap_share *run);
/* --append onto a base with pre-RoPE offsets: the base's rotation, and the positions of this
 * state's cells, which must place the base's cells where the base had them. */
tq_status tq_kvsnap_adopt_base_rope(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base,
                                    const tq_kv_view *v, const src_tensor *src);
/* K's offset over t's coded cells (t->offset, with rope its pre-RoPE form and t->rope_pos),
 * kept only where it pays by the preset's row (kv_offset.c). */
tq_status tq_kvsnap_fit_offset(tq_ctx *ctx, const src_tensor *s,
                               tqkv_record *t, const tq_rope *rope, const int32_t *pos);

/* Whether the state fits the model and the head size (kv_fit.c): with a model whose facts are
 * verified, its memory (the layers that keep K/V, a recurrent state, V or an MLA latent); a
 * head size given or the model's must cut every row (src[].head) into whole heads. */
/* The plan of settings resolved already (tq_kvsnap_resolve): kv_prepare.c's last step. */
tq_status tq_kvsnap_plan_settled(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                 tq_kvsnap_plan **out);
tq_status tq_kvsnap_check_fit(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                              const src_tensor *src, size_t n);

/* The rows of the sliding-window layers' tensors that the next token cannot attend to
 * (src[].past_rows; p->swa_window set) and, once the plan's bits are set, the rows to be
 * coded finer as the newest (src[].recent_rows) (kv_rows.c). */
tq_status tq_kvsnap_past_rows(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                              tq_kvsnap_plan *p, src_tensor *src, size_t n);
tq_status tq_kvsnap_recent_rows(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                const tq_kvsnap_plan *p, src_tensor *src, size_t n);

#endif
