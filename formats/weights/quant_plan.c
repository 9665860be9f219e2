/* quant_plan.c - see quant_plan.h. */
#include "quant_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int type;
} types[] = {{"tq4_1s", TQ_DT_TQ4_1S}, {"tq3_1s", TQ_DT_TQ3_1S}, {"q8_0", TQ_DT_Q8_0},
             {"q6_K", TQ_DT_Q6_K},     {"q5_K", TQ_DT_Q5_K},     {"q4_K", TQ_DT_Q4_K},
             {"q5_1", TQ_DT_Q5_1},     {"q5_0", TQ_DT_Q5_0},     {"q4_1", TQ_DT_Q4_1},
             {"q4_0", TQ_DT_Q4_0},     {"f16", TQ_DT_F16},       {"bf16", TQ_DT_BF16},
             {"f32", TQ_DT_F32},       {"keep", QT_KEEP}};

int qp_parse_type(const char *s)
{
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcasecmp(s, types[i].name)) return types[i].type;
    return -2;
}

const char *qp_type_name(int t)
{
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (types[i].type == t) return types[i].name;
    return "?";
}

static const char *const policies[] = {"all", "attn", "config-i"};
const char *qp_policy_name(qp_policy p) { return policies[p]; }
int qp_parse_policy(const char *s, qp_policy *p)
{
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, policies[i])) {
            *p = (qp_policy)i;
            return 0;
        }
    return -1;
}

int qp_add_rule(quant_plan *p, const char *spec, char *err, size_t errlen)
{
    const char *eq = strrchr(spec, '=');
    if (!eq || eq == spec) {
        snprintf(err, errlen, "'%s' is not REGEX=TYPE", spec);
        return -1;
    }
    int t = qp_parse_type(eq + 1);
    if (t == -2) {
        snprintf(err, errlen, "'%s': unknown type '%s' (" QP_TYPE_NAMES ")", spec, eq + 1);
        return -1;
    }
    qp_rule *r = realloc(p->rules, (p->n_rules + 1) * sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->rules = r;
    r = &p->rules[p->n_rules];
    r->src = strndup(spec, (size_t)(eq - spec));
    if (!r->src) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = regcomp(&r->re, r->src, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char m[128];
        regerror(rc, &r->re, m, sizeof m);
        snprintf(err, errlen, "'%s': bad regular expression: %s", spec, m);
        free(r->src);
        return -1;
    }
    r->type = t;
    p->n_rules++;
    return 0;
}

int qp_add_rules_file(quant_plan *p, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    char line[4096];
    int n = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        n++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r' || line[l - 1] == ' ' ||
                     line[l - 1] == '\t'))
            line[--l] = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s || *s == '#') continue;
        char e[512];
        if (qp_add_rule(p, s, e, sizeof e)) {
            snprintf(err, errlen, "%s:%d: %s", path, n, e);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

void qp_free(quant_plan *p)
{
    for (size_t i = 0; i < p->n_rules; i++) {
        regfree(&p->rules[i].re);
        free(p->rules[i].src);
    }
    free(p->rules);
    p->rules = NULL;
    p->n_rules = 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* llama-quantize's tensors that are never quantized (src/llama-quant.cpp,
 * tensor_allows_quantization): norms, routers, positional tables, convolution kernels
 * (mamba's ssm_conv1d, lfm2's shortconv.conv), T5's relative bias, RWKV's small mixing
 * tensors, gemma3n's altup and laurel, per-layer projections and the DSA indexer's */
int qp_eligible(const char *name, uint32_t n_dims)
{
    if (n_dims < 2 || !ends_with(name, "weight")) return 0;
    static const char *const never[] = {
        "_norm.weight",          "norm.weight",           "ffn_gate_inp.weight",
        "ffn_gate_tid2eid",      "position_embd",         "pos_embd",
        "token_types",           "ssm_conv1d",            "shortconv.conv.weight",
        "attn_rel_b",            "altup",                 "laurel",
        "per_layer_model_proj",  "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight",    "time_mix_w1.weight",
        "time_mix_w2.weight",    "time_mix_v0.weight",    "time_mix_v1.weight",
        "time_mix_v2.weight",    "time_mix_a0.weight",    "time_mix_a1.weight",
        "time_mix_a2.weight",    "time_mix_g1.weight",    "time_mix_g2.weight",
        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (strstr(name, never[i])) return 0;
    return 1;
}

int qp_layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= 0 && l < 1000000 ? (int)l : -1;
}

/* the part after "blk.N." */
static const char *role_of(const char *name)
{
    const char *r = name;
    if (qp_layer_of(name) >= 0) r = strchr(name + 4, '.') + 1;
    return r;
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* A layer's token mixer, the attention role of the policies: attention's Q/K/V/O, an MLA
 * cache's projections (deepseek2), a linear-attention or state-space mixer's (qwen35 and
 * qwen3next's gated DeltaNet, mamba's, granitehybrid's), lfm2's short convolution's and
 * RWKV's time mixing, each as llama-quantize gives it the type (its rules, then only the
 * 2-D weights of qp_eligible) */
static int is_attn(const char *r)
{
    static const char *const mixers[] = {
        "attn_q.",         "attn_k.",     "attn_v.",     "attn_output.",  "attn_qkv.",
        "attn_q_a.",       "attn_q_b.",   "attn_kv_a_mqa.", "attn_kv_b.", "attn_k_b.",
        "attn_v_b.",       "attn_gate.",  "ssm_in.",     "ssm_out.",      "ssm_x.",
        "ssm_dt.",         "ssm_beta.",   "ssm_alpha.",  "ssm_ba.",       "shortconv.in_proj.",
        "shortconv.out_proj.", "time_mix_key.", "time_mix_value.", "time_mix_receptance.",
        "time_mix_output.", "time_mix_gate."};
    for (size_t i = 0; i < sizeof mixers / sizeof *mixers; i++)
        if (starts(r, mixers[i])) return 1;
    return 0;
}

static int64_t block_of(int t) { return (int64_t)tq_dtype_block_values((tq_dtype)t); }

/* llama-quantize's fallbacks for rows that are not whole superblocks: the
 * 32-value type of about the same size, F16 when even that does not fit. */
static int fallback_of(int t, int64_t ne0)
{
    int f = TQ_DT_F16; /* llama-quantize's fallbacks for rows that are not whole 256s */
    if (t == TQ_DT_Q4_K)
        f = TQ_DT_Q5_0;
    else if (t == TQ_DT_Q5_K)
        f = TQ_DT_Q5_1;
    else if (t == TQ_DT_Q6_K)
        f = TQ_DT_Q8_0;
    return ne0 % block_of(f) ? TQ_DT_F16 : f;
}

int qp_choose(const quant_plan *p, const char *name, uint32_t n_dims, const int64_t *ne,
              int *fallback, int *wanted)
{
    *fallback = 0;
    if (!qp_eligible(name, n_dims)) return *wanted = QT_KEEP;
    const char *r = role_of(name);
    int layer = qp_layer_of(name), t = QT_KEEP;
    switch (p->policy) {
        case QP_ALL:
            t = p->type;
            break;
        case QP_ATTN:
            t = is_attn(r) ? p->type : QT_KEEP;
            break;
        case QP_CONFIG_I:
            if (is_attn(r) || starts(r, "ffn_gate") || starts(r, "ffn_up"))
                t = p->type;
            else if (starts(r, "ffn_down"))
                t = p->ffn_down_type;
            break;
    }
    int b = p->boundary_layers; /* default: config-i's 2 at each end, none otherwise */
    if (b < 0) b = p->policy == QP_CONFIG_I ? 2 : 0;
    if (t != QT_KEEP && layer >= 0 && (layer < b || (int64_t)layer >= (int64_t)p->n_layers - b))
        t = TQ_DT_Q8_0;
    for (size_t i = 0; i < p->n_rules; i++) /* the first match wins, as in llama-quantize */
        if (!regexec(&p->rules[i].re, name, 0, NULL, 0)) {
            t = p->rules[i].type;
            break;
        }
    *wanted = t;
    if (t != QT_KEEP && ne[0] % block_of(t)) {
        *fallback = 1;
        t = fallback_of(t, ne[0]);
    }
    return t;
}
