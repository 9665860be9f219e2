/* kv_layers.c - see kv_layers.h. */
#include "kv_layers.h"
#include "arch.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int swa_layers(const char *arch, const tq_model *model, uint32_t n, uint8_t *swa,
                      char *rule, size_t rl)
{
    if (model && model->n_swa_pattern == n) {
        if (model->swa_pattern_bad) return 0;
        memcpy(swa, model->swa_pattern, n);
        snprintf(rule, rl, "the model's %s.attention.sliding_window_pattern", model->arch);
        return 1;
    }
    uint32_t p = tq_arch_swa_period(arch);
    if (!p) return 0;
    for (uint32_t il = 0; il < n; il++) swa[il] = il % p < p - 1;
    snprintf(rule, rl, "%s: every %u%s layer global", arch, p, p == 2 ? "nd" : "th");
    return 1;
}

tq_status tq_cache_layers_for(tq_ctx *ctx, const char *arch, const tq_model *model,
                              uint32_t n_state, const uint32_t *n_layer, tq_cache_layers *out)
{
    memset(out, 0, sizeof *out);
    if (n_state > 2)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%u KV memory states (at most 2 are known)",
                                n_state);
    out->n_state = n_state;
    uint32_t total = 0;
    for (uint32_t s = 0; s < n_state; s++) {
        out->n_layer[s] = n_layer[s];
        total += n_layer[s];
    }
    char a[64] = "";
    if (model)
        snprintf(a, sizeof a, "%s", model->arch);
    else if (arch)
        snprintf(a, sizeof a, "%s", arch);
    uint32_t n_all = model && model->n_layer ? model->n_layer : total;
    uint8_t *swa_all = calloc(n_all ? n_all : 1, 1);
    uint32_t *own = malloc((n_all ? n_all : 1) * sizeof *own); /* the layers that keep K/V */
    uint8_t *swa = calloc(n_all ? n_all : 1, 1);                /* [n_model]: theirs */
    if (!swa_all || !own || !swa) {
        free(swa_all);
        free(own);
        free(swa);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    int known = swa_layers(a, model, n_all, swa_all, out->rule, sizeof out->rule);
    /* a hybrid model's recurrent layers, layers that reuse another's K/V and MTP layers keep
       none in these caches (model.h, 6.) */
    uint32_t n_model = 0;
    for (uint32_t il = 0; il < n_all; il++)
        if (!model || !model->kv_layer || model->kv_layer[il]) {
            own[n_model] = il;
            swa[n_model++] = swa_all[il];
        }
    free(swa_all);
    uint32_t n_swa = 0;
    for (uint32_t i = 0; known && i < n_model; i++) n_swa += swa[i];
    tq_status st = TQ_OK;
    /* which states hold which layers: one state holds them all (or, for a
     * partial iSWA save, just the SWA ones); two are base then SWA */
    int fits = n_state == 1
                   ? n_layer[0] == n_model || (known && n_swa && n_layer[0] == n_swa)
                   : known && n_state == 2 && n_layer[0] == n_model - n_swa && n_layer[1] == n_swa;
    if (n_state == 2 && !fits && model)
        st = tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "the state's two caches hold %u and %u layers, which is not the model's split "
            "(%u global and %u sliding-window layers, %s)",
            n_layer[0], n_layer[1], n_model - n_swa, n_swa,
            known ? out->rule : "no sliding-window pattern");
    for (uint32_t s = 0; !st && fits && s < n_state; s++) {
        if (!(out->model[s] = malloc((n_layer[s] ? n_layer[s] : 1) * sizeof(uint32_t)))) {
            st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
            break;
        }
        /* state s keeps the layers whose swa flag is `want`, in model order */
        int all = n_state == 1 && n_layer[0] == n_model, want = n_state == 2 ? s == 1 : 1;
        uint32_t l = 0;
        for (uint32_t i = 0; i < n_model && l < n_layer[s]; i++)
            if (all || swa[i] == want) out->model[s][l++] = own[i];
    }
    if (n_state == 1 && fits && n_layer[0] == n_model)
        snprintf(out->rule, sizeof out->rule, n_model < n_all ? "one cache, every attention layer"
                                                             : "one cache, every layer");
    free(swa);
    free(own);
    if (st) tq_cache_layers_free(out);
    return st;
}

tq_status tq_cache_layers_make(tq_ctx *ctx, const tq_kv_view *v, const tq_model *model,
                            tq_cache_layers *out)
{
    uint32_t n = tq_kv_view_n_kv(v), nl[2] = {0, 0};
    for (uint32_t s = 0; s < n && s < 2; s++) {
        const tq_kv_state *k = tq_kv_view_kv(v, s);
        nl[s] = k->n_stream ? tq_kv_state_stream(k)->n_layer : 0;
    }
    return tq_cache_layers_for(ctx, tq_kv_view_arch(v), model, n, nl, out);
}

tq_status tq_cache_layers_of_snapshot(tq_ctx *ctx, const tqkv_meta *m, const tq_model *model,
                                   tq_cache_layers *out)
{
    uint32_t ns = 0, nl[2] = {0, 0};
    int recorded = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        if (t->kv_state >= 2)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "KV state %u (at most 2 are known)",
                                    t->kv_state);
        if (t->kv_state + 1 > ns) ns = t->kv_state + 1;
        if (t->stream == 0 && t->layer + 1 > nl[t->kv_state]) nl[t->kv_state] = t->layer + 1;
        recorded |= t->model_layer != TQKV_NO_MODEL_LAYER;
    }
    tq_status st = tq_cache_layers_for(ctx, m->arch, model, ns, nl, out);
    if (st || !recorded) return st;
    /* the records say; a model must agree with them */
    for (uint32_t i = 0; i < m->n_tensors && !st; i++) {
        const tqkv_record *t = &m->t[i];
        uint32_t want = tq_cache_layers_model(out, t->kv_state, t->layer);
        if (t->model_layer == TQKV_NO_MODEL_LAYER || want == t->model_layer) continue;
        if (model)
            st = tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                  "cache %u layer %u was model layer %u when encoded, the model's "
                                  "split (%s) makes it layer %s",
                                  t->kv_state, t->layer, t->model_layer, out->rule,
                                  want == TQ_KV_LAYER_UNKNOWN ? "unknown" : "another");
        else if (out->model[t->kv_state]) /* no model: the records win over the architecture's rule
                                           */
            out->model[t->kv_state][t->layer] = t->model_layer;
    }
    for (uint32_t s = 0; !st && !model && s < ns; s++)
        if (!out->model[s]) { /* the rule did not fit: take the records as they are */
            if (!(out->model[s] = malloc((nl[s] ? nl[s] : 1) * sizeof(uint32_t)))) {
                st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
                break;
            }
            for (uint32_t l = 0; l < nl[s]; l++) out->model[s][l] = TQ_KV_LAYER_UNKNOWN;
            for (uint32_t i = 0; i < m->n_tensors; i++)
                if (m->t[i].kv_state == s && m->t[i].stream == 0)
                    out->model[s][m->t[i].layer] = m->t[i].model_layer;
            snprintf(out->rule, sizeof out->rule, "as recorded in the snapshot");
        }
    if (st) tq_cache_layers_free(out);
    return st;
}

uint32_t tq_cache_layers_model(const tq_cache_layers *m, uint32_t s, uint32_t l)
{
    if (!m || s >= m->n_state || !m->model[s] || l >= m->n_layer[s]) return TQ_KV_LAYER_UNKNOWN;
    return m->model[s][l];
}

int tq_cache_layers_known(const tq_cache_layers *m)
{
    for (uint32_t s = 0; s < m->n_state; s++)
        if (!m->model[s]) return 0;
    return m->n_state > 0;
}

void tq_cache_layers_free(tq_cache_layers *m)
{
    for (int s = 0; s < 2; s++) {
        free(m->model[s]);
        m->model[s] = NULL;
    }
}
