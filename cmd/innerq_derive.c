/* innerq_derive.c - calibrate-innerq's scales from the statistics: per layer
 * (and KV head with --per head) by the chosen rule, or the fork's one vector
 * pooled over everything as the fork pools it. */
#include "calibrate_innerq.h"
#include "cli.h"
#include "kv_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tq_innerq_method method_of(const char *m)
{
    return !strcmp(m, "qk") ? TQ_INNERQ_QK : !strcmp(m, "fork") ? TQ_INNERQ_FORK : TQ_INNERQ_KV;
}

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
static int layer_scales(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am,
                        const tq_innerq_stats *st, uint32_t l, uint32_t nh, double *buf, float *out, char *how, size_t hl)
{
    uint32_t H = tq_innerq_stats_heads(st), d = tq_innerq_stats_head_dim(st);
    double *ek = buf, *ev = buf + (size_t)H * d, *eq = buf + 2 * (size_t)H * d, *eo = buf + 3 * (size_t)H * d;
    for (uint32_t h = 0; h < H; h++) {
        tq_innerq_stats_mean2(st, l, h, 0, ek + (size_t)h * d);
        tq_innerq_stats_mean2(st, l, h, 1, ev + (size_t)h * d);
    }
    const char *src = "";
    if (!strcmp(o->method, "qk") && tq_innerq_query_energy(ctx, g, l, d, H, eq, &src))
        return cli_runtime_error("%s: %s", o->c.model, tq_ctx_error(ctx));
    if (!strcmp(o->v, "wo") && tq_innerq_output_energy(ctx, g, l, d, H, eo))
        return cli_runtime_error("%s: %s", o->c.model, tq_ctx_error(ctx));
    if (!l && *src) snprintf(how, hl, "%s", src);
    if (nh == 1 && H > 1) /* one vector serves every KV head: pool them */
        for (double *x = buf; x < buf + 4 * (size_t)H * d; x += (size_t)H * d) pool_heads(x, H, d);
    tq_rope_pairs pairs = am ? am->pairs : TQ_PAIRS_NONE;
    uint32_t rot = am ? am->rope_dims : 0;
    for (uint32_t h = 0; h < nh; h++) {
        size_t at = (size_t)h * d;
        float *sk = out + at, *sv = out + (size_t)nh * d + at;
        if (tq_innerq_scales(ctx, method_of(o->method), ek + at, eq + at, d, pairs, rot, o->strength, o->clamp[0],
                             o->clamp[1], sk))
            return cli_lib_error(ctx);
        if (!strcmp(o->v, "off")) {
            for (uint32_t j = 0; j < d; j++) sv[j] = 1.0f;
        } else if (tq_innerq_scales(ctx, !strcmp(o->v, "wo") ? TQ_INNERQ_QK : TQ_INNERQ_KV, ev + at, eo + at, d,
                                    TQ_PAIRS_NONE, 0, o->strength, o->clamp[0], o->clamp[1], sv))
            return cli_lib_error(ctx);
    }
    if (o->pow2) round_pow2(out, 2 * (size_t)nh * d);
    return 0;
}

int ci_scales(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am, const tq_innerq_stats *st,
              tq_innerq_set *set, char *how, size_t how_len)
{
    uint32_t L = tq_innerq_stats_layers(st), H = tq_innerq_stats_heads(st), d = tq_innerq_stats_head_dim(st);
    uint32_t nh = !strcmp(o->per, "head") ? H : 1;
    size_t per_layer = 2 * (size_t)nh * d;
    *set = (tq_innerq_set){L, nh, d, malloc(L * per_layer * sizeof(float)), strcmp(o->v, "off") != 0, g != NULL,
                           g ? tq_model_fingerprint(g) : 0, ""};
    snprintf(set->method, sizeof set->method, "%s", o->method);
    snprintf(how, how_len, "%s", !strcmp(o->method, "qk") ? "" : "not used");
    double *buf = malloc(4 * (size_t)H * d * sizeof *buf);
    int rc = !set->s || !buf ? cli_runtime_error("out of memory") : 0;
    if (!rc && !strcmp(o->method, "fork")) {
        uint32_t gr = d % 128 ? d : 128;
        fork_pool(st, d, set->has_v, gr, buf);
        float *v = (float *)(buf + gr);
        if (tq_innerq_scales(ctx, TQ_INNERQ_FORK, buf, NULL, gr, TQ_PAIRS_NONE, 0, o->strength, 0, 0, v))
            rc = cli_lib_error(ctx);
        for (size_t i = 0; !rc && i < L * per_layer; i++) {
            int is_v = (int)(i / d % 2);
            set->s[i] = is_v && !set->has_v ? 1.0f : v[i % d % gr];
        }
        snprintf(how, how_len, "not used (the fork's rule: one %u-vector pooled over all layers, heads%s)", gr,
                 set->has_v ? ", K and V" : "");
    }
    for (uint32_t l = 0; !rc && strcmp(o->method, "fork") && l < L; l++)
        rc = layer_scales(ctx, o, g, am, st, l, nh, buf, set->s + l * per_layer, how, how_len);
    free(buf);
    return rc;
}

static void range(const tq_innerq_set *s, int is_v, float *lo, float *hi)
{
    *lo = INFINITY, *hi = 0;
    for (uint32_t l = 0; l < s->n_layer; l++)
        for (uint32_t h = 0; h < s->n_head; h++) {
            const float *x = tq_innerq_set_at(s, l, is_v, h);
            for (uint32_t j = 0; j < s->head_dim; j++) *lo = x[j] < *lo ? x[j] : *lo, *hi = x[j] > *hi ? x[j] : *hi;
        }
}

void ci_report(const ci_opts *o, const tq_innerq_set *set, uint64_t tokens, const char *how, double seconds)
{
    float klo, khi, vlo, vhi;
    range(set, 0, &klo, &khi);
    range(set, 1, &vlo, &vhi);
    cli_log("%s: %u layers x %s of %u from %llu cells in %d dump%s; method %s (E[q^2]: %s), strength %g; K scales "
            "%.3g..%.3g, V %s%.3g..%.3g, in %.2f s", o->c.out, set->n_layer, set->n_head > 1 ? "KV heads" : "1 vector",
            set->head_dim, (unsigned long long)tokens, o->n_dumps, o->n_dumps > 1 ? "s" : "", o->method, how,
            o->strength, klo, khi, set->has_v ? "" : "off ", vlo, vhi, seconds);
}
