/* innerq_derive.c - InnerQ scales from K/V statistics (innerq_derive.h):
 * per layer (and KV head) by the chosen rule, or the fork's one vector
 * pooled over everything as the fork pools it. */
#include "innerq_derive.h"
#include "kv_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fork's accumulator: x_j^2 summed over every 128-value group (j the
 * position in it) of every K row, and V row where V is scaled too, of every
 * layer and head; divided by the number of groups.  Heads that are not whole
 * 128s give the group of one head (the fork itself turns InnerQ off there). */
static void fork_pool(const tq_innerq_stats *st, uint32_t d, int with_v, uint32_t g, double *out)
{
    double *m2 = malloc(d * sizeof *m2), count = 0;
    memset(out, 0, g * sizeof *out);
    for (uint32_t l = 0; m2 && l < tq_innerq_stats_layers(st); l++) {
        double cells = (double)tq_innerq_stats_cells(st, l);
        for (uint32_t h = 0; h < tq_innerq_stats_heads(st); h++)
            for (int v = 0; v <= with_v; v++) {
                tq_innerq_stats_mean2(st, l, h, v, m2);
                for (uint32_t j = 0; j < d; j++) out[j % g] += m2[j] * cells;
                count += cells * (d / g);
            }
    }
    for (uint32_t j = 0; j < g; j++) out[j] = count > 0 ? out[j] / count : 0;
    free(m2);
}

static void round_pow2(float *s, size_t n)
{
    for (size_t i = 0; i < n; i++) s[i] = ldexpf(1.0f, (int)lrint(log2((double)s[i])));
}

/* mean over the n_head vectors of d values in x, into x[0..d) */
static void pool_heads(double *x, uint32_t n_head, uint32_t d)
{
    for (uint32_t h = 1; h < n_head; h++)
        for (uint32_t j = 0; j < d; j++) x[j] += x[(size_t)h * d + j];
    for (uint32_t j = 0; j < d; j++) x[j] /= n_head;
}

/* Layer l's K and V scales into out ([K, V][nh][d]). */
static tq_status layer_scales(tq_ctx *ctx, const tq_innerq_derive_options *o, const tq_gguf *g,
                              const tq_attn_model *am, const tq_innerq_stats *st, uint32_t l,
                              uint32_t nh, double *buf, float *out, char *how, size_t hl)
{
    uint32_t H = tq_innerq_stats_heads(st), d = tq_innerq_stats_head_dim(st);
    double *ek = buf, *ev = buf + (size_t)H * d, *eq = buf + 2 * (size_t)H * d,
           *eo = buf + 3 * (size_t)H * d;
    for (uint32_t h = 0; h < H; h++) {
        tq_innerq_stats_mean2(st, l, h, 0, ek + (size_t)h * d);
        tq_innerq_stats_mean2(st, l, h, 1, ev + (size_t)h * d);
    }
    const char *src = "";
    if (o->k_method == TQ_INNERQ_QK && tq_innerq_query_energy(ctx, g, l, d, H, eq, &src))
        return tq_ctx_status(ctx);
    if (o->v_method == TQ_INNERQ_V_WO && tq_innerq_output_energy(ctx, g, l, d, H, eo))
        return tq_ctx_status(ctx);
    if (!l && *src) snprintf(how, hl, "%s", src);
    if (nh == 1 && H > 1) /* one vector serves every KV head: pool them */
        for (double *x = buf; x < buf + 4 * (size_t)H * d; x += (size_t)H * d) pool_heads(x, H, d);
    tq_rope_pairs pairs = am ? am->pairs : TQ_PAIRS_NONE;
    uint32_t rot = am ? am->rope_dims : 0;
    for (uint32_t h = 0; h < nh; h++) {
        size_t at = (size_t)h * d;
        float *sk = out + at, *sv = out + (size_t)nh * d + at;
        if (tq_innerq_scales(ctx, o->k_method, ek + at, eq + at, d, pairs, rot, o->strength,
                             o->clamp_lo, o->clamp_hi, sk))
            return tq_ctx_status(ctx);
        /* V: in W_o's metric (the QK rule with W_o's column energies), or by its own energies */
        tq_innerq_method vm = TQ_INNERQ_KV;
        if (o->v_method == TQ_INNERQ_V_WO) vm = TQ_INNERQ_QK;
        if (o->v_method == TQ_INNERQ_V_OFF) {
            for (uint32_t j = 0; j < d; j++) sv[j] = 1.0f;
        } else if (tq_innerq_scales(ctx, vm, ev + at, eo + at, d, TQ_PAIRS_NONE, 0, o->strength,
                                    o->clamp_lo, o->clamp_hi, sv)) {
            return tq_ctx_status(ctx);
        }
    }
    if (o->pow2) round_pow2(out, 2 * (size_t)nh * d);
    return TQ_OK;
}

tq_status tq_innerq_derive(tq_ctx *ctx, const tq_innerq_derive_options *o,
                           const tq_model *model, const tq_attn_model *am,
                           const tq_innerq_stats *st, tq_innerq_set *set, char *how,
                           size_t how_len)
{
    const tq_gguf *g = model ? model->gguf : NULL;
    uint32_t L = tq_innerq_stats_layers(st), H = tq_innerq_stats_heads(st),
             d = tq_innerq_stats_head_dim(st);
    uint32_t nh = o->per_head ? H : 1;
    size_t per_layer = 2 * (size_t)nh * d;
    int fork = o->k_method == TQ_INNERQ_FORK;
    *set = (tq_innerq_set){L,
                           nh,
                           d,
                           malloc(L * per_layer * sizeof(float)),
                           o->v_method != TQ_INNERQ_V_OFF,
                           model != NULL,
                           model ? model->fingerprint : 0,
                           ""};
    snprintf(set->method, sizeof set->method, "%s", tq_innerq_method_name(o->k_method));
    snprintf(how, how_len, "%s", o->k_method == TQ_INNERQ_QK ? "" : "not used");
    double *buf = malloc(4 * (size_t)H * d * sizeof *buf); /* [ek, ev, eq, eo][H][d] */
    tq_status rc = TQ_OK;
    if (!set->s || !buf) rc = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!rc && fork) {
        uint32_t gr = d % 128 ? d : 128;
        fork_pool(st, d, set->has_v, gr, buf);
        float *v = (float *)(buf + gr);
        if (tq_innerq_scales(ctx, TQ_INNERQ_FORK, buf, NULL, gr, TQ_PAIRS_NONE, 0, o->strength, 0,
                             0, v))
            rc = tq_ctx_status(ctx);
        for (size_t i = 0; !rc && i < L * per_layer; i++) {
            int is_v = (int)(i / d % 2);
            set->s[i] = is_v && !set->has_v ? 1.0f : v[i % d % gr];
        }
        snprintf(how, how_len,
                 "not used (the fork's rule: one %u-vector pooled over all layers, heads%s)", gr,
                 set->has_v ? ", K and V" : "");
    }
    for (uint32_t l = 0; !rc && !fork && l < L; l++)
        rc = layer_scales(ctx, o, g, am, st, l, nh, buf, set->s + l * per_layer, how, how_len);
    free(buf);
    if (rc) {
        free(set->s);
        set->s = NULL;
    }
    return rc;
}

static const struct {
    const char *name;
    tq_innerq_method method;
} k_methods[] = {{"qk", TQ_INNERQ_QK}, {"kv", TQ_INNERQ_KV}, {"fork", TQ_INNERQ_FORK}};
static const char *const v_methods[] = {
    [TQ_INNERQ_V_OFF] = "off", [TQ_INNERQ_V_KV] = "kv", [TQ_INNERQ_V_WO] = "wo"};

const char *tq_innerq_method_name(tq_innerq_method m)
{
    for (size_t i = 0; i < sizeof k_methods / sizeof *k_methods; i++)
        if (k_methods[i].method == m) return k_methods[i].name;
    return "?";
}

int tq_innerq_method_parse(const char *name, tq_innerq_method *out)
{
    for (size_t i = 0; i < sizeof k_methods / sizeof *k_methods; i++) {
        if (!strcmp(name, k_methods[i].name)) {
            *out = k_methods[i].method;
            return 0;
        }
    }
    return -1;
}

int tq_innerq_v_method_parse(const char *name, tq_innerq_v_method *out)
{
    for (size_t i = 0; i < sizeof v_methods / sizeof *v_methods; i++) {
        if (!strcmp(name, v_methods[i])) {
            *out = (tq_innerq_v_method)i;
            return 0;
        }
    }
    return -1;
}
