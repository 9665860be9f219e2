/* kv_fit.c - whether a state is the model's (kv_plan_parts.h, tq_kvsnap_check_fit): its
 * memory against the model's and its rows against the head size. */
#include "kv_plan_parts.h"
#include "model.h"

/* The state's memory against the model's (model.h, 6.): its KV layers, a recurrent state
 * where the model keeps one (a hybrid model's file cut where that state begins reads as an
 * attention model's), V where the model is not MLA. */
static tq_status check_memory(tq_ctx *ctx, const tq_kv_view *v, const tq_model *m)
{
    if (!m->kv_row) return TQ_OK; /* facts not verified: coded as without them */
    uint32_t layers = 0;
    int no_v = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(v); i++) {
        const tq_kv_state *k = tq_kv_view_kv(v, i);
        if (!k->n_stream || !tq_kv_state_stream(k)->cell_count) continue;
        layers += tq_kv_state_stream(k)->n_layer;
        no_v |= tq_kv_state_stream(k)->v == NULL;
    }
    const tq_kv_recurrent *r = tq_kv_view_recurrent(v);
    if (m->n_layer && layers && layers != m->n_kv_layer)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the state holds %u layers, the model keeps K/V in %u (of %u): "
                                "not this model's state",
                                layers, m->n_kv_layer, m->n_layer);
    if (m->n_recurrent && (!r || r->n_records / 2 != m->n_recurrent))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s keeps a recurrent state of %u layers; the state holds %s%u: "
                                "not this model's state, or cut short",
                                m->arch, m->n_recurrent, r ? "one of " : "none of ",
                                r ? r->n_records / 2 : 0);
    if (!m->n_recurrent && r)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the state holds a recurrent state; %s keeps none: not this "
                                "model's state",
                                m->arch);
    if (layers && no_v != m->mla)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                no_v ? "the state holds K without V (an MLA cache); %s is not "
                                       "MLA: not this model's state, or cut short"
                                     : "the state holds V; %s caches an MLA latent: not this "
                                       "model's state",
                                m->arch);
    return TQ_OK;
}

/* A head size given (--head-dim) or the model's must cut every row into
 * whole heads, and the model must have the state's layers: otherwise the
 * state is not this model's, or the size is wrong. */
tq_status tq_kvsnap_check_fit(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                              const src_tensor *src, size_t n)
{
    if (o->model) {
        tq_status st = check_memory(ctx, v, o->model);
        if (st) return st;
    }
    uint32_t given = (uint32_t)o->head_dim;
    for (size_t i = 0; (given || o->model) && i < n; i++)
        if (src[i].head && src[i].kt->width % src[i].head)
            return tq_ctx_set_error(
                ctx, TQ_ERR_ARG, "layer %u %s: rows of %llu values are not whole heads of %u (%s)",
                src[i].layer, src[i].is_v ? "V" : "K", (unsigned long long)src[i].kt->width,
                src[i].head, given ? "--head-dim" : "the model's head size");
    return TQ_OK;
}
