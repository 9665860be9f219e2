/* rotate_plan.c - see rotate_plan.h.  The accepted graph: x = embd[tok];
 * per layer x += Wo attn(RMSNorm_a(x) via Wq, Wk, Wv); x += Wd ffn(
 * RMSNorm_f(x) via Wg, Wu); logits = Wout RMSNorm_o(x).  Every tensor must
 * have a known role in it; an unknown one means the graph may differ, so
 * the model is refused rather than rotated wrongly. */
#include "arch.h"
#include "model.h"
#include "rotate_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -1, with the reason recorded in ctx (the caller prefixes the file name). */
/* the plan's refusals: the message on ctx, -1 */
static int refused_with(tq_status st)
{
    (void)st; /* always an error */
    return -1;
}
#define fail(...) refused_with(tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, __VA_ARGS__))

/* The architectures arch.c's table lets rotate-weights take: "llama, mistral, ...; gemma2,
 * gemma3 with R2 only". */
static void supported(char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int want = 1; want <= 2; want++) {
        const char *sep = want == 2 ? "; " : "";
        for (size_t i = 0; tq_arch_at(i); i++) {
            if (tq_arch_at(i)->rotate != want) continue;
            used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s%s", sep,
                                     tq_arch_at(i)->name);
            sep = ", ";
        }
    }
    if (used < size) snprintf(out + used, size - used, " with R2 only");
}

/* Known but unsupported pieces, with the reason; r1_only: R2 (inside the
 * attention) is still exact with them. */
#define POST_NORMS                                                                                 \
    "post-norms (an RMSNorm with a per-channel gain on the attention or FFN output, before it is " \
    "added to the residual stream) do not commute with a rotation of that stream"
static const struct {
    const char *part, *why;
    int r1_only;
} refused[] = {
    {"_norm.bias",
     "a norm with a bias (LayerNorm): the mean subtraction does not commute with a rotation", 1},
    {"post_norm", POST_NORMS, 1},
    {"post_attention_norm", POST_NORMS, 1},
    {"post_ffw_norm", POST_NORMS, 1},
    {"layer_output_norm", POST_NORMS, 1},
    {"attn_gate", "an attention output gate", 0},
    {"ffn_gate_inp", "a mixture of experts (router) is not handled yet", 1},
    {"_exps", "a mixture of experts is not handled yet", 1},
    {"_shexp", "a mixture of experts is not handled yet", 1},
    {"attn_qkv", "a fused QKV projection is not handled yet", 0},
};

/* The architecture and its hyperparameters. */
static int plan_hparams(tq_ctx *ctx, const tq_gguf *g, rr_model *m)
{
    tq_model model;
    if (tq_model_read(ctx, g, &model)) return -1;
    snprintf(m->arch, sizeof m->arch, "%s", model.arch);
    m->n_embd = model.n_embd;
    m->n_head = model.n_head;
    m->n_head_kv = model.n_head_kv;
    m->n_layer = model.n_layer;
    m->head_dim = model.head_k;
    m->head_dim_v = model.head_v;
    const tq_arch *row = model.row; /* formats/model/arch.c: the rot column */
    tq_model_free(&model);
    char names[256];
    supported(names, sizeof names);
    if (!row || !row->rotate)
        return fail("architecture '%s' is not supported (%s are): its graph may not be the "
                    "RMSNorm pre-norm one a rotation can be folded into",
                    m->arch, names);
    if (row->rotate == 2) /* gemma: embeddings scaled by sqrt(n_embd) commute; post-norms do not */
        snprintf(m->r1_blocker, sizeof m->r1_blocker, "%s: %s", m->arch, POST_NORMS);
    if (!m->n_embd || !m->n_head || !m->n_head_kv || !m->n_layer || m->n_head % m->n_head_kv)
        return fail(
            "%s hyperparameters missing or inconsistent (embedding_length %u, head_count %u, "
            "head_count_kv %u, block_count %u)",
            m->arch, m->n_embd, m->n_head, m->n_head_kv, m->n_layer);
    if (!m->head_dim || !m->head_dim_v) return fail("head size 0");
    return 0;
}

/* Every tensor the graph needs must be there. */
static int plan_required(tq_ctx *ctx, const tq_gguf *g, rr_model *m)
{
    int64_t nt = tq_gguf_n_tensors(g);
    m->t = calloc((size_t)nt + 1, sizeof *m->t);
    if (!m->t) return fail("out of memory");
    int64_t embd = tq_gguf_find_tensor(g, "token_embd.weight"),
            out = tq_gguf_find_tensor(g, "output.weight");
    if (embd < 0) return fail("missing tensor token_embd.weight");
    m->tied = out < 0;
    char want[160];
    static const char *const per_layer[] = {
        "attn_norm.weight", "attn_q.weight",      "attn_k.weight",
        "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
        "ffn_gate.weight",  "ffn_up.weight",      "ffn_down.weight"};
    for (uint32_t l = 0; l < m->n_layer; l++)
        for (size_t k = 0; k < sizeof per_layer / sizeof *per_layer; k++) {
            snprintf(want, sizeof want, "blk.%u.%s", l, per_layer[k]);
            if (tq_gguf_find_tensor(g, want) < 0) return fail("missing tensor %s", want);
        }
    if (tq_gguf_find_tensor(g, "output_norm.weight") < 0)
        return fail("missing tensor output_norm.weight");

    return 0;
}

/* Tensor i's role(s) in the graph, with its shape checked. */
/* A tensor whose shape is not what the hyperparameters say is refused. */
#define SHAPE(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            return fail("tensor %s has shape [%lld, %lld], not what the hyperparameters say",      \
                        name, (long long)ne[0], (long long)ne[1]);                                 \
    } while (0)

/* The tensors outside the layers: embeddings, the final norm, the output. */
static int plan_global(tq_ctx *ctx, const tq_gguf *g, const rr_model *m, rr_tensor *t,
                       const char *name, const int64_t *ne)
{
    int64_t row = ne[0], rows = ne[1];
    if (!strcmp(name, "token_embd.weight")) {
        t->role = RR_EMBED;
        SHAPE(row == m->n_embd);
    } else if (!strcmp(name, "output_norm.weight")) {
        t->role = RR_NORM;
        SHAPE(row == m->n_embd && rows == 1);
    } else if (!strcmp(name, "output.weight")) {
        t->role = RR_READER;
        t->norm = tq_gguf_find_tensor(g, "output_norm.weight");
        SHAPE(row == m->n_embd);
    } else if (!strcmp(name, "rope_freqs.weight"))
        t->role = RR_COPY;
    else
        return fail("tensor %s: unknown to rotate-weights (the graph may differ from llama's)",
                    name);
    return 0;
}

/* A layer's tensor (role: its name after "blk.N."): its part in the rotation and the shape the
 * hyperparameters give it. */
static int plan_layer_tensor(tq_ctx *ctx, const tq_gguf *g, const rr_model *m, rr_tensor *t,
                             const char *name, const char *role, int layer, const int64_t *ne)
{
    int64_t row = ne[0], rows = ne[1];
    uint64_t q_out = (uint64_t)m->n_head * m->head_dim,
             kv_out = (uint64_t)m->n_head_kv * m->head_dim,
             v_out = (uint64_t)m->n_head_kv * m->head_dim_v,
             o_in = (uint64_t)m->n_head * m->head_dim_v;
    char nb[160];
    if (!strcmp(role, "attn_norm.weight") || !strcmp(role, "ffn_norm.weight")) {
        t->role = RR_NORM;
        SHAPE(row == m->n_embd && rows == 1);
    } else if (!strcmp(role, "attn_q.weight") || !strcmp(role, "attn_k.weight") ||
               !strcmp(role, "attn_v.weight")) {
        t->role = RR_READER;
        snprintf(nb, sizeof nb, "blk.%d.attn_norm.weight", layer);
        t->norm = tq_gguf_find_tensor(g, nb);
        t->v_rows = role[5] == 'v';
        uint64_t out_rows = v_out;
        if (role[5] == 'q')
            out_rows = q_out;
        else if (role[5] == 'k')
            out_rows = kv_out;
        SHAPE(row == m->n_embd && (uint64_t)rows == out_rows);
    } else if (!strcmp(role, "ffn_gate.weight") || !strcmp(role, "ffn_up.weight")) {
        t->role = RR_READER;
        snprintf(nb, sizeof nb, "blk.%d.ffn_norm.weight", layer);
        t->norm = tq_gguf_find_tensor(g, nb);
        SHAPE(row == m->n_embd);
    } else if (!strcmp(role, "attn_q.bias") || !strcmp(role, "attn_k.bias")) {
        t->role = RR_COPY; /* added after the projection: its space is not rotated */
    } else if (!strcmp(role, "attn_v.bias")) {
        t->role = RR_COPY;
        t->v_rows = 1;
        SHAPE((uint64_t)row == v_out);
    } else if (!strcmp(role, "attn_q_norm.weight") || !strcmp(role, "attn_k_norm.weight")) {
        t->role = RR_COPY; /* per-head Q/K norms: Q and K are not rotated */
    } else if (!strcmp(role, "attn_output.weight")) {
        t->role = RR_WRITER;
        t->o_cols = 1;
        SHAPE((uint64_t)row == o_in && rows == m->n_embd);
    } else if (!strcmp(role, "ffn_down.weight")) {
        t->role = RR_WRITER;
        SHAPE(rows == m->n_embd);
    } else if (!strcmp(role, "attn_output.bias") || !strcmp(role, "ffn_down.bias")) {
        t->role = RR_WRITER_BIAS;
        SHAPE(row == m->n_embd && rows == 1);
    } else {
        return fail("tensor %s: unknown to rotate-weights (the graph may differ from llama's)",
                    name);
    }
    return 0;
}

static int plan_tensor(tq_ctx *ctx, const tq_gguf *g, rr_model *m, int64_t i)
{
    const char *name = tq_gguf_tensor_name(g, i);
    const tq_ggml_type *ty = tq_gguf_tensor_type(g, i);
    const int64_t *ne = tq_gguf_tensor_ne(g, i);
    rr_tensor *t = &m->t[m->n++];
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++)
        if (strstr(name, refused[k].part)) {
            if (!refused[k].r1_only) return fail("tensor %s: %s", name, refused[k].why);
            if (!m->r1_blocker[0])
                snprintf(m->r1_blocker, sizeof m->r1_blocker, "tensor %s: %s", name,
                         refused[k].why);
            t->src = i;
            t->name = name;
            t->role = RR_COPY;
            t->norm = -1; /* R2 leaves it alone */
            return 0;
        }
    if (ty->dtype < 0)
        return fail("tensor %s is %s, which tq cannot dequantize: it cannot be rotated", name,
                    ty->name);
    t->src = i;
    t->name = name;
    t->norm = -1;
    int layer = -1;
    const char *role = name;
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        layer = (int)strtol(name + 4, &end, 10);
        if (*end != '.' || layer < 0 || (uint32_t)layer >= m->n_layer)
            return fail("tensor %s: not a layer of this %u-layer model", name, m->n_layer);
        role = end + 1;
    }
    if (layer < 0) {
        int rc = plan_global(ctx, g, m, t, name, ne);
        if (rc) return rc;
    } else {
        int rc = plan_layer_tensor(ctx, g, m, t, name, role, layer, ne);
        if (rc) return rc;
    }
    /* tied embeddings: the output matrix untied, the embeddings with output_norm folded */
    if (m->tied && !strcmp(name, "token_embd.weight")) {
        rr_tensor *o = &m->t[m->n++];
        o->src = i;
        o->name = "output.weight";
        o->untied = 1;
        o->role = RR_READER;
        o->norm = tq_gguf_find_tensor(g, "output_norm.weight");
    }
    return 0;
}

int rr_plan(tq_ctx *ctx, const tq_gguf *g, int want_r1, rr_model *m)
{
    memset(m, 0, sizeof *m);
    if (plan_hparams(ctx, g, m) || plan_required(ctx, g, m)) return -1;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        if (plan_tensor(ctx, g, m, i)) return -1;
    if (want_r1 > 0 && m->r1_blocker[0])
        return fail("R1 cannot be folded into this model (%s); --r1 off rotates only V and O (R2)",
                    m->r1_blocker);
    m->r1 = want_r1 < 0 ? !m->r1_blocker[0] : want_r1;
    if (!m->r1) { /* without R1 the output stays tied to the embeddings */
        size_t k = 0;
        for (size_t i = 0; i < m->n; i++)
            if (!m->t[i].untied) m->t[k++] = m->t[i];
        m->n = k;
    }
    return 0;
}

void rr_free(rr_model *m)
{
    free(m->t);
    m->t = NULL;
}
