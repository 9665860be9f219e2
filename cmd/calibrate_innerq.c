/* calibrate_innerq.c - `tq calibrate-innerq`: per-channel K/V scales from
 * real KV dumps and the model, written as SCALES.gguf and, with --fold,
 * folded into the model.
 *
 * Scaling channel j of K by s_j and of Q by 1/s_j leaves every q.k as it
 * was; a quantizer of K then spends its precision on s*k, and the error that
 * reaches a logit is (q/s).e with e sized by |s k|.  That is smallest for
 * s_j = (E[q_j^2] / E[k_j^2])^(1/4): E[k^2] comes from the dumps, E[q^2]
 * from the model (innerq_model.h).  V works the same way through W_o. */
#include "cli.h"
#include "cli_opts.h"
#include "file_io.h"
#include "innerq_derive.h"
#include "innerq_fold.h"
#include "innerq_model.h"
#include "kv_plan.h"
#include "innerq_scales.h"
#include "innerq_stats.h"
#include "kv_snapshot.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ci_opts {
    cli_common c;
    const char *dumps[256];
    int n_dumps;
    const char *method, *v, *per, *fold;
    double strength, clamp[2]; /* clamp 0, 0: none */
    long min_tokens, head_dim;
    int pow2, allow_requantize;
} ci_opts;

#define MAX_DUMPS 256

void help_calibrate_innerq(void)
{
    printf(
        "usage: tq calibrate-innerq [options] --model M.gguf DUMP... -o SCALES.gguf [--fold "
        "OUT.gguf]\n\n"
        "Per-channel InnerQ scales for K (and V), per model layer, from real KV dumps (llama.cpp\n"
        "state files, NumPy dumps, .tqkv snapshots; all from the model given) and the model.  K "
        "is\n"
        "multiplied by s and Q by 1/s, which leaves attention as it is and evens out what a K\n"
        "quantizer sees.  Keep the scales with snapshots (tq encode-kvdump --innerq SCALES.gguf) "
        "or\n"
        "fold them into the model (--fold) so that every runtime KV cache gains.\n\n"
        "  --method qk|kv|fork  qk (default with --model): s = (E[q^2]/E[k^2])^(strength/2), "
        "E[q^2]\n"
        "                       from the QK-norm gains or W_q and the attention norm; kv: K "
        "energy\n"
        "                       alone; fork: the TurboQuant+ fork's rule exactly, pooled as it "
        "pools\n"
        "                       (all layers, K with V, channel j mod 128), for comparison\n"
        "  --v wo|kv|off        V scales: through W_o's column energies (wo), V energy alone, or "
        "none\n"
        "                       (default off: measured not to help; see the man page)\n"
        "  --per layer|head     one vector per layer (default; what QK-norm gains can hold) or per "
        "KV head\n"
        "  --strength X         exponent (default 0.5: the fourth root; the fork: (0, 1])\n"
        "  --clamp LO,HI        bound each scale (before the geometric mean is brought to 1)\n"
        "  --pow2               round scales to powers of two: folding is then exact in any float "
        "type\n"
        "  --min-tokens N       refuse layers seen in fewer cells (default 64)\n"
        "  --head-dim N         the head size without a model (state files do not record it)\n"
        "  --fold OUT.gguf      also write the model with the scales folded in\n"
        "  --allow-requantize   let --fold rewrite quantized tensors (else those parts are left "
        "out)\n"
        "  -o SCALES.gguf, --type-profile NAME, --threads N, --quiet\n\n"
        "A DUMP may be - (a pipe) or s3://bucket/key (an object), with AWS_ACCESS_KEY_ID,\n"
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL from the\n"
        "environment; the model and the outputs are files (a model is mapped).\n");
}

static int opt_double(double *dst, const char *name, const char *v, double lo, double hi)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x > lo && x <= hi))
        return cli_usage_error("%s: '%s' is not a number in (%g, %g]", name, v, lo, hi);
    *dst = x;
    return 0;
}

static int opt_strength(void *user, const char *v)
{
    return opt_double(user, "--strength", v, 0, 4);
}

static int opt_clamp(void *user, const char *v)
{
    double *lh = user;
    char *end, *end2;
    lh[0] = strtod(v, &end);
    if (*end == ',') lh[1] = strtod(end + 1, &end2);
    if (*end != ',' || *end2 || !(lh[0] > 0) || !(lh[1] >= lh[0]) || isinf(lh[1]))
        return cli_usage_error("--clamp: '%s' is not LO,HI with 0 < LO <= HI", v);
    return 0;
}

static int parse(int argc, char **argv, ci_opts *o)
{
    static const char *const methods[] = {"qk", "kv", "fork", NULL},
                             *const vs[] = {"wo", "kv", "off", NULL},
                             *const pers[] = {"layer", "head", NULL};
    memset(o, 0, sizeof *o);
    uint32_t min_cells;
    tq_kvsnap_innerq_defaults(&o->strength, &min_cells); /* what --innerq auto runs with */
    o->min_tokens = (long)min_cells;
    o->per = "layer";
    const cli_opt own[] = {
        CLI_OPT_CHOICE("--method", &o->method, methods, "--method: '%s' is not qk, kv or fork"),
        CLI_OPT_CHOICE("--v", &o->v, vs, "--v: '%s' is not wo, kv or off"),
        CLI_OPT_CHOICE("--per", &o->per, pers, "--per: '%s' is not layer or head"),
        CLI_OPT_FN("--strength", opt_strength, &o->strength),
        CLI_OPT_FN("--clamp", opt_clamp, o->clamp),
        CLI_OPT_FLAG("--pow2", &o->pow2),
        CLI_OPT_LONG("--min-tokens", &o->min_tokens, 1, 1L << 30),
        CLI_OPT_LONG("--head-dim", &o->head_dim, 2, 4096),
        CLI_OPT_STR("--fold", &o->fold),
        CLI_OPT_FLAG("--allow-requantize", &o->allow_requantize),
        {NULL},
    };
    const cli_spec spec = {"calibrate-innerq",
                           CLI_O | CLI_QUIET | CLI_THREADS | CLI_PROFILE | CLI_MODEL | CLI_KEY, own,
                           MAX_DUMPS};
    int rc = cli_parse(&spec, argc, argv, &o->c, o->dumps, &o->n_dumps);
    if (rc) return rc;
    if (!o->n_dumps) return cli_usage_error("which KV dumps? (see tq help calibrate-innerq)");
    if (!o->c.out) return cli_usage_error("where to? give -o SCALES.gguf");
    if (!o->method) o->method = o->c.model ? "qk" : "kv";
    int fork = !strcmp(o->method, "fork");
    if (!o->v) o->v = fork ? "kv" : "off"; /* the fork scales V with the K vector */
    if (o->c.model && o->head_dim)
        return cli_usage_error("--head-dim: the model gives the head size");
    if (!o->c.model && (!strcmp(o->method, "qk") || !strcmp(o->v, "wo") || o->fold)) {
        const char *what = "--method qk";
        if (o->fold)
            what = "--fold";
        else if (!strcmp(o->v, "wo"))
            what = "--v wo";
        return cli_usage_error("%s needs the model: give --model M.gguf", what);
    }
    if (fork && (o->clamp[0] || o->pow2 || strcmp(o->per, "layer") || !strcmp(o->v, "wo")))
        return cli_usage_error(
            "--method fork is the fork's rule as it is: no --clamp, --pow2, --per head or --v wo");
    if (fork && o->strength > 1)
        return cli_usage_error("--method fork: --strength must be in (0, 1], as the fork's");
    if (fork && o->fold)
        return cli_usage_error("--method fork: its scales are not RoPE-pair symmetric, folding "
                               "them would change the model");
    if (o->fold && (!strcmp(o->fold, o->c.out) || tq_same_file(o->fold, o->c.out)))
        return cli_usage_error("-o and --fold name the same file");
    for (int i = -1; o->fold && i < o->n_dumps; i++) /* refused before the scales are written */
        if (tq_same_file(o->fold, i < 0 ? o->c.model : o->dumps[i]))
            return cli_runtime_error("%s: the output would overwrite the input %s", o->fold,
                                     i < 0 ? o->c.model : o->dumps[i]);
    return 0;
}

/* The model's attention as InnerQ reads it, refused where the scales would not apply. */
static int check_model(tq_ctx *ctx, const ci_opts *o, const tq_model *model, tq_attn_model *am)
{
    if (tq_attn_model_read(ctx, model, am))
        return cli_runtime_error("%s: %s", o->c.model, tq_ctx_error(ctx));
    if (am->folded)
        return cli_runtime_error("%s already has InnerQ scales folded in (tq.innerq.folded)",
                                 o->c.model);
    if (am->head_dim != am->head_dim_v)
        return cli_runtime_error("%s: K heads of %u and V heads of %u: not supported",
                                 o->c.model, am->head_dim, am->head_dim_v);
    return 0;
}

/* The dumps' statistics; every dump must fit the model (when given). */
static int gather(tq_ctx *ctx, const ci_opts *o, const tq_model *model, const tq_attn_model *am,
                  tq_innerq_stats **st, uint64_t *hashes)
{
    uint32_t hd = am ? am->head_dim : (uint32_t)o->head_dim;
    int first_fp = -1; /* the first snapshot's fingerprint: the others must have it */
    uint64_t fp0 = 0;
    for (int i = 0; i < o->n_dumps; i++) {
        tq_kv_view *v = NULL;
        int has_fp = 0, rc = 0;
        uint64_t fp = 0;
        if (tq_kvsnap_open_any(ctx, o->dumps[i], o->c.profile, &v)) return cli_lib_error(ctx);
        has_fp = tq_kv_view_fingerprint(v, &fp);
        uint32_t shown = tq_kv_view_head_dim(v); /* a NumPy dump's [.., heads, head_dim] */
        if (!hd) hd = tq_arch_head_size(0, NULL, shown, tq_kv_view_arch(v), NULL);
        if (has_fp && first_fp < 0) {
            first_fp = i;
            fp0 = fp;
        }
        if (model && has_fp && fp != model->fingerprint)
            rc = cli_runtime_error("%s: a snapshot of another model than %s", o->dumps[i],
                                   o->c.model);
        else if (has_fp && fp != fp0)
            rc = cli_runtime_error("%s: a snapshot of another model than %s", o->dumps[i],
                                   o->dumps[first_fp]);
        else if (shown && hd && shown != hd)
            rc = cli_runtime_error("%s: heads of %u where %s has %u: dumps of different models",
                                   o->dumps[i], shown, am ? o->c.model : "the first dump", hd);
        else if (!hd)
            rc = cli_usage_error("%s: the head size is not known: give --model", o->dumps[i]);
        else if (!*st && tq_innerq_stats_new(ctx, hd, st))
            rc = cli_lib_error(ctx);
        if (!rc && i == 0 && !strcmp(o->v, "off"))
            tq_innerq_stats_k_only(*st); /* V's energies are not used */
        if (!rc && tq_innerq_stats_add(ctx, *st, v, model))
            rc = cli_runtime_error("%s", tq_ctx_error(ctx));
        hashes[i] = rc ? 0 : tq_kv_view_xxh64(v);
        tq_kv_view_close(v);
        if (rc) return rc;
    }
    if (am &&
        (tq_innerq_stats_layers(*st) != am->n_layer || tq_innerq_stats_heads(*st) != am->n_head_kv))
        return cli_runtime_error(
            "%s: %u layers of %u KV heads, the model has %u of %u: dumps of another model",
            o->dumps[0], tq_innerq_stats_layers(*st), tq_innerq_stats_heads(*st), am->n_layer,
            am->n_head_kv);
    for (uint32_t l = 0; l < tq_innerq_stats_layers(*st); l++)
        if (tq_innerq_stats_cells(*st, l) < (uint64_t)o->min_tokens)
            return cli_runtime_error("layer %u was seen in %llu cells, fewer than --min-tokens %ld",
                                     l, (unsigned long long)tq_innerq_stats_cells(*st, l),
                                     o->min_tokens);
    return 0;
}

/* The options as the derivation takes them, then the scales. */
static int derive(tq_ctx *ctx, const ci_opts *o, const tq_model *model, const tq_attn_model *am,
                  const tq_innerq_stats *st, tq_innerq_set *set, char *how, size_t how_len)
{
    tq_innerq_derive_options d = {.per_head = !strcmp(o->per, "head"),
                                  .strength = o->strength,
                                  .clamp_lo = o->clamp[0],
                                  .clamp_hi = o->clamp[1],
                                  .pow2 = o->pow2};
    tq_innerq_method_parse(o->method, &d.k_method); /* the option table allows only known names */
    tq_innerq_v_method_parse(o->v, &d.v_method);
    if (!tq_innerq_derive(ctx, &d, model, am, st, set, how, how_len)) return 0;
    if (model) return cli_runtime_error("%s: %s", o->c.model, tq_ctx_error(ctx));
    return cli_lib_error(ctx);
}

static void range(const tq_innerq_set *s, int is_v, float *lo, float *hi)
{
    *lo = INFINITY;
    *hi = 0;
    for (uint32_t l = 0; l < s->n_layer; l++) {
        for (uint32_t h = 0; h < s->n_head; h++) {
            const float *x = tq_innerq_set_at(s, l, is_v, h); /* [head_dim] */
            for (uint32_t j = 0; j < s->head_dim; j++) {
                if (x[j] < *lo) *lo = x[j];
                if (x[j] > *hi) *hi = x[j];
            }
        }
    }
}

static void report(const ci_opts *o, const tq_innerq_set *set, uint64_t tokens, const char *how,
                   double seconds)
{
    float klo, khi, vlo, vhi;
    range(set, 0, &klo, &khi);
    range(set, 1, &vlo, &vhi);
    cli_log("%s: %u layers x %s of %u from %llu cells in %d dump%s; method %s (E[q^2]: %s), "
            "strength %g; K scales %.3g..%.3g, V %s%.3g..%.3g, in %.2f s",
            o->c.out, set->n_layer, set->n_head > 1 ? "KV heads" : "1 vector", set->head_dim,
            (unsigned long long)tokens, o->n_dumps, o->n_dumps > 1 ? "s" : "", o->method, how,
            o->strength, klo, khi, set->has_v ? "" : "off ", vlo, vhi, seconds);
}

/* --fold's plan: a usage error where the scales cannot be folded by their kind, a runtime
 * error where the model's tensors cannot take them. */
static int fold_plan(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am,
                     const tq_innerq_set *set, tq_fold_plan *fp)
{
    tq_status st = tq_fold_plan_make(ctx, o->allow_requantize, g, am, set, fp);
    if (st == TQ_ERR_ARG) return cli_usage_error("%s: %s", o->c.model, tq_ctx_error(ctx));
    return st ? cli_runtime_error("%s", tq_ctx_error(ctx)) : 0;
}

static int fold_write(tq_ctx *ctx, const ci_opts *o, const tq_gguf *g, const tq_attn_model *am,
                      const tq_innerq_set *set, const tq_innerq_provenance *prov,
                      const tq_fold_plan *fp)
{
    double t0 = cli_now();
    const char *inputs[1] = {o->c.model};
    size_t changed = 0;
    if (tq_fold_write(ctx, g, o->fold, inputs, 1, am, set, prov, fp, &changed))
        return cli_lib_error(ctx);
    const char *k_how = "not folded";
    if (fp->k) k_how = am->qk_norm ? "through attn_q_norm/attn_k_norm" : "through W_q/W_k rows";
    const char *v_how = set->has_v ? "not folded" : "off";
    if (fp->v) v_how = "through W_v rows and W_o columns";
    if (!o->c.quiet)
        cli_log("%s: %zu tensors changed in %.2f s: K %s, V %s", o->fold, changed, cli_now() - t0,
                k_how, v_how);
    if (*fp->k_why) cli_log("K not folded: %s", fp->k_why);
    if (*fp->v_why) cli_log("V not folded: %s", fp->v_why);
    return 0;
}

/* What `tq inspect` shows of a SCALES.gguf (cli.h): each layer's range of K and V scales. */
void print_innerq_scales(const char *path)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_innerq_set s;
    if (!ctx || tq_innerq_set_load(ctx, path, &s)) {
        printf("InnerQ scales: unreadable (%s)\n", ctx ? tq_ctx_error(ctx) : "out of memory");
        tq_ctx_free(ctx);
        return;
    }
    printf("InnerQ scales: %u layers x %u %s x %u channels, method %s%s\n", s.n_layer, s.n_head,
           s.n_head > 1 ? "KV heads" : "vector", s.head_dim, s.method,
           s.has_v ? ", K and V" : ", K only");
    for (uint32_t l = 0; l < s.n_layer; l++) {
        printf("  layer %3u:", l);
        for (int v = 0; v <= s.has_v; v++) {
            float lo;
            float hi;
            tq_innerq_set_range(&s, l, v, &lo, &hi);
            printf(" %s %.3g..%.3g", v ? "V" : "K", lo, hi);
        }
        printf("\n");
    }
    tq_innerq_set_free(&s);
    tq_ctx_free(ctx);
}

int cmd_calibrate_innerq(int argc, char **argv)
{
    ci_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    double t0 = cli_now();
    tq_ctx *ctx = cli_ctx_new(o.c.threads);
    if (!ctx) return TQ_EXIT_RUNTIME;
    tq_gguf *g = NULL;
    tq_attn_model am;
    tq_innerq_stats *st = NULL;
    tq_innerq_set set = {0};
    uint64_t hashes[MAX_DUMPS];
    char how[128] = "";
    tq_model model = {0};
    const tq_model *mp = NULL; /* model's facts, read once (NULL: no --model) */
    if (o.c.model && (tq_gguf_open(ctx, o.c.model, NULL, &g) || tq_model_read(ctx, g, &model)))
        rc = cli_lib_error(ctx);
    if (g && !rc) mp = &model;
    if (mp) rc = check_model(ctx, &o, mp, &am);
    if (!rc) rc = gather(ctx, &o, mp, g ? &am : NULL, &st, hashes);
    if (!rc) rc = derive(ctx, &o, mp, g ? &am : NULL, st, &set, how, sizeof how);
    tq_fold_plan fp = {0};
    if (!rc && o.fold) rc = fold_plan(ctx, &o, g, &am, &set, &fp);
    uint64_t tokens = 0;
    for (uint32_t l = 0; !rc && l < set.n_layer; l++) /* the tokens seen: iSWA layers keep fewer */
        if (tq_innerq_stats_cells(st, l) > tokens) tokens = tq_innerq_stats_cells(st, l);
    const char *pairs_name = "none"; /* no model: no RoPE pairs */
    if (g) pairs_name = am.pairs == TQ_PAIRS_HALVES ? "halves" : "adjacent";
    tq_innerq_provenance prov = {.method = o.method,
                                 .v_method = o.v,
                                 .per = o.per,
                                 .query_energy = how,
                                 .strength = o.strength,
                                 .clamp_lo = o.clamp[0],
                                 .clamp_hi = o.clamp[1],
                                 .pow2 = o.pow2,
                                 .tokens = tokens,
                                 .n_sources = (uint32_t)o.n_dumps,
                                 .sources = o.dumps,
                                 .source_hashes = hashes,
                                 .pairs = pairs_name,
                                 .rope_dims = g ? am.rope_dims : 0,
                                 .model_name = o.c.model};
    const char *inputs[MAX_DUMPS + 1];
    for (int i = 0; i < o.n_dumps; i++) inputs[i] = o.dumps[i];
    inputs[o.n_dumps] = o.c.model ? o.c.model : o.dumps[0];
    if (!rc && tq_innerq_set_write(ctx, o.c.out, &set, &prov, inputs, (size_t)o.n_dumps + 1))
        rc = cli_lib_error(ctx);
    if (!rc && !o.c.quiet) report(&o, &set, tokens, how, cli_now() - t0);
    if (!rc && o.fold) rc = fold_write(ctx, &o, g, &am, &set, &prov, &fp);
    tq_innerq_set_free(&set);
    tq_innerq_stats_free(st);
    tq_model_free(&model);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return rc;
}
