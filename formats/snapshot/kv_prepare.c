/* kv_prepare.c - from the request to the plan in one call (kv_plan.h, tq_kvsnap_prepare): the
 * request resolved, the scales a file gives or the state and the model allow, the rotation
 * the source was stored with, then the plan.  tq_kvsnap_encode and encode-kvdump both come
 * through here, so the same request makes the same bytes. */
#include "innerq_scales.h"
#include "kv_plan_parts.h"

#include <stdlib.h>
#include <string.h>

/* The user's scales file into p->scales and o: its dimension is one head's or the whole row's
 * (a scale a channel of every KV head), as calibrate-innerq --per wrote it. */
static tq_status load_scales(tq_ctx *ctx, tq_kvsnap_prepared *p, tq_kvsnap_settings *o)
{
    tq_status st = tq_innerq_set_load(ctx, o->innerq_path, &p->scales);
    if (st) return st;
    if (o->model && p->scales.has_model && p->scales.model_fingerprint != o->model->fingerprint)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s: scales calibrated for another model (fingerprint %016llx, "
                                "the model's %016llx)",
                                o->innerq_path, (unsigned long long)p->scales.model_fingerprint,
                                (unsigned long long)o->model->fingerprint);
    o->innerq = p->scales.s;
    o->innerq_layers = p->scales.n_layer;
    o->innerq_dim = p->scales.n_head * p->scales.head_dim;
    o->innerq_file = 1;
    return TQ_OK;
}

/* Q-aware K scales computed from the state, where the model allows (tq_kvsnap_auto_innerq):
 * one vector a head. */
static tq_status auto_scales(tq_ctx *ctx, tq_kv_view *v, tq_kvsnap_prepared *p,
                             tq_kvsnap_settings *o)
{
    tq_status st = tq_kvsnap_auto_innerq(ctx, v, o, &p->scales, &p->innerq_why);
    if (st || !p->scales.s) return st;
    o->innerq = p->scales.s;
    o->innerq_layers = p->scales.n_layer;
    o->innerq_dim = p->scales.head_dim;
    return TQ_OK;
}

/* Automatic scales the plan dropped from every K (it transform-codes them all): none kept,
 * and the log says why.  The transform's choice does not depend on the scales. */
static void drop_unused_scales(tq_kvsnap_prepared *p)
{
    tq_kvsnap_settings *o = &p->plan->settings;
    if (o->innerq_file || !p->scales.s || !tq_kvsnap_k_transformed(p->plan)) return;
    tq_innerq_set_free(&p->scales);
    o->innerq = NULL;
    o->innerq_layers = 0;
    o->innerq_dim = 0;
    p->innerq_why = "off (K is transform-coded: its basis decorrelates the channels)";
}

tq_status tq_kvsnap_prepare(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_request *q,
                            const tq_kvsnap_inputs *in, const tq_kvsnap_run *run,
                            tq_kvsnap_prepared **out)
{
    *out = NULL;
    tq_kvsnap_settings o; /* resolved here, once; the plan keeps them */
    tq_status st = tq_kvsnap_resolve(ctx, q, in, run, &o);
    if (st) return st;
    tq_kvsnap_prepared *p = calloc(1, sizeof *p);
    if (!p) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (o.innerq_path) st = load_scales(ctx, p, &o);
    if (!st) st = tq_kvsnap_find_rotation(ctx, v, &o, &p->rotated);
    if (!st && !o.innerq && !o.innerq_off) st = auto_scales(ctx, v, p, &o);
    if (!st) st = tq_kvsnap_plan_settled(ctx, v, &o, &p->plan);
    if (!st) drop_unused_scales(p);
    if (st) {
        tq_kvsnap_prepared_free(p);
        return st;
    }
    p->cuda_kernels = tq_kvsnap_cuda_kernels(&p->plan->meta);
    *out = p;
    return TQ_OK;
}

void tq_kvsnap_prepared_free(tq_kvsnap_prepared *p)
{
    if (!p) return;
    tq_kvsnap_plan_free(p->plan);
    tq_innerq_set_free(&p->scales);
    free(p);
}
