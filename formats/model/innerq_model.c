/* innerq_model.c - see innerq_model.h. */
#include "innerq_model.h"
#include "arch.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_tensor(const tq_gguf *g, uint32_t l, const char *what)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%u.%s.weight", l, what);
    return tq_gguf_find_tensor(g, name) >= 0;
}

tq_status tq_attn_model_read(tq_ctx *ctx, const tq_model *model, tq_attn_model *m)
{
    memset(m, 0, sizeof *m);
    const tq_gguf *g = model->gguf;
    if (!model->arch[0])
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "no general.architecture: not a model");
    snprintf(m->arch, sizeof m->arch, "%s", model->arch);
    if (model->head_kv_per_layer)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "%s: KV head counts per layer are not supported", m->arch);
    m->n_layer = model->n_layer;
    m->n_head = model->n_head;
    m->n_head_kv = model->n_head_kv;
    m->head_dim = model->head_k;
    m->head_dim_v = model->head_v;
    if (!m->n_layer || !m->n_head || !m->n_head_kv || m->n_head % m->n_head_kv || !m->head_dim ||
        !m->head_dim_v)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "%s: attention hyperparameters missing or inconsistent", m->arch);
    m->rope_dims = model->n_rot;
    if (m->rope_dims > m->head_dim || m->rope_dims % 2)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "%s: RoPE over %u of %u channels", m->arch,
                                m->rope_dims, m->head_dim);
    m->pairs = tq_arch_rope_pairs(m->arch);
    m->qk_norm = 1;
    for (uint32_t l = 0; l < m->n_layer; l++) {
        if (!has_tensor(g, l, "attn_q") || !has_tensor(g, l, "attn_k") ||
            !has_tensor(g, l, "attn_v") || !has_tensor(g, l, "attn_output"))
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                    "%s: layer %u lacks attn_q, attn_k, attn_v or attn_output: "
                                    "not an attention layout tq knows (fused QKV, MLA?)",
                                    m->arch, l);
        m->qk_norm &= has_tensor(g, l, "attn_q_norm") && has_tensor(g, l, "attn_k_norm");
    }
    m->folded = model->innerq_folded;
    return TQ_OK;
}

/* tensor `name` of n values as float32 (malloc'd), or NULL with ctx set */
static float *tensor_f32(tq_ctx *ctx, const tq_gguf *g, const char *name, uint64_t *n)
{
    int64_t i = tq_gguf_find_tensor(g, name);
    if (i < 0) return NULL;
    const tq_ggml_type *t = tq_gguf_tensor_type(g, i);
    *n = (uint64_t)tq_gguf_tensor_nelements(g, i);
    float *x = t->dtype >= 0 ? malloc(*n * sizeof *x) : NULL;
    if (t->dtype < 0)
        tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "tensor %s is %s, which tq cannot decode", name,
                         t->name);
    else if (!x)
        tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    else if (tq_dequantize(ctx, (tq_dtype)t->dtype, tq_gguf_tensor_data(g, i), (size_t)*n, x)) {
        free(x);
        x = NULL;
    }
    return x;
}

tq_status tq_innerq_query_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim,
                                 uint32_t n_kv_head, double *out, const char **how)
{
    char name[96];
    uint64_t n = 0;
    tq_ctx_clear_error(ctx);
    snprintf(name, sizeof name, "blk.%u.attn_q_norm.weight", layer);
    float *gq = tensor_f32(ctx, g, name, &n);
    if (gq) {
        tq_status st = TQ_OK;
        if (n != head_dim)
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s has %llu values, heads have %u", name,
                                  (unsigned long long)n, head_dim);
        for (uint32_t h = 0; !st && h < n_kv_head; h++)
            for (uint32_t j = 0; j < head_dim; j++)
                out[(size_t)h * head_dim + j] = (double)gq[j] * gq[j];
        free(gq);
        *how = "QK-norm gains";
        return st;
    }
    if (tq_ctx_status(ctx)) return tq_ctx_status(ctx);
    uint64_t nw = 0, ng = 0;
    snprintf(name, sizeof name, "blk.%u.attn_q.weight", layer);
    float *w = tensor_f32(ctx, g, name, &nw);
    snprintf(name, sizeof name, "blk.%u.attn_norm.weight", layer);
    float *gn = w ? tensor_f32(ctx, g, name, &ng) : NULL;
    tq_status st = TQ_OK;
    if (!w || !gn) {
        st = tq_ctx_status(ctx) ? tq_ctx_status(ctx)
                                : tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                                   "layer %u has no attn_q_norm, or no attn_q and "
                                                   "attn_norm: not an attention layer tq knows",
                                                   layer);
    } else if (!ng || nw % ng || (nw / ng) % ((uint64_t)head_dim * n_kv_head)) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                              "layer %u: attn_q [%llu x %llu] does not fit %u KV heads of %u",
                              layer, (unsigned long long)ng, (unsigned long long)(ng ? nw / ng : 0),
                              n_kv_head, head_dim);
    } else {
        uint64_t rows = nw / ng,
                 per = rows / ((uint64_t)head_dim * n_kv_head); /* query heads per KV head */
        memset(out, 0, (size_t)n_kv_head * head_dim * sizeof *out);
        for (uint64_t r = 0; r < rows; r++) {
            double e = 0;
            for (uint64_t i = 0; i < ng; i++) {
                double a = (double)w[r * ng + i] * gn[i];
                e += a * a;
            }
            uint64_t qh = r / head_dim, j = r % head_dim;
            out[(qh / per) * head_dim + j] += e / (double)ng / (double)per;
        }
        *how = "W_q rows with attn_norm's gains (whitened-input approximation)";
    }
    free(w);
    free(gn);
    return st;
}

tq_status tq_innerq_output_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim,
                                  uint32_t n_kv_head, double *out)
{
    char name[96];
    uint64_t n = 0;
    tq_ctx_clear_error(ctx);
    snprintf(name, sizeof name, "blk.%u.attn_output.weight", layer);
    int64_t ti = tq_gguf_find_tensor(g, name);
    float *w = tensor_f32(ctx, g, name, &n);
    if (!w)
        return tq_ctx_status(ctx) ? tq_ctx_status(ctx)
                                  : tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                                     "layer %u has no attn_output: not an "
                                                     "attention layer tq knows",
                                                     layer);
    uint64_t cols = (uint64_t)tq_gguf_tensor_ne(g, ti)[0], rows = n / cols,
             kv = (uint64_t)head_dim * n_kv_head;
    tq_status st = TQ_OK;
    if (cols % kv) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                              "layer %u: attn_output's %llu inputs do not fit %u KV heads of %u",
                              layer, (unsigned long long)cols, n_kv_head, head_dim);
    } else {
        uint64_t per = cols / kv; /* query heads per KV head */
        memset(out, 0, (size_t)kv * sizeof *out);
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                double a = w[r * cols + c];
                out[(c / head_dim / per) * head_dim + c % head_dim] +=
                    a * a / (double)rows / (double)per;
            }
    }
    free(w);
    return st;
}
