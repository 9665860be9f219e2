/* innerq_model.c - see innerq_model.h. */
#include "innerq_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tensor `name` of n values as float32 (malloc'd), or NULL with ctx set */
static float *tensor_f32(tq_ctx *ctx, const tq_gguf *g, const char *name, uint64_t *n)
{
    int64_t i = tq_gguf_find_tensor(g, name);
    if (i < 0) return NULL;
    const tq_ggml_type *t = tq_gguf_tensor_type(g, i);
    *n = (uint64_t)tq_gguf_tensor_nelements(g, i);
    float *x = t->dtype >= 0 ? malloc(*n * sizeof *x) : NULL;
    if (t->dtype < 0) tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "tensor %s is %s, which tq cannot decode", name, t->name);
    else if (!x) tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    else if (tq_dequantize(ctx, (tq_dtype)t->dtype, tq_gguf_tensor_data(g, i), (size_t)*n, x)) {
        free(x);
        x = NULL;
    }
    return x;
}

tq_status tq_innerq_query_energy(tq_ctx *ctx, const tq_gguf *g, uint32_t layer, uint32_t head_dim, uint32_t n_kv_head,
                                 double *out, const char **how)
{
    char name[96];
    uint64_t n = 0;
    tq_ctx_clear_error(ctx);
    snprintf(name, sizeof name, "blk.%u.attn_q_norm.weight", layer);
    float *gq = tensor_f32(ctx, g, name, &n);
    if (gq) {
        tq_status st = TQ_OK;
        if (n != head_dim) st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s has %llu values, heads have %u", name, (unsigned long long)n, head_dim);
        for (uint32_t h = 0; !st && h < n_kv_head; h++)
            for (uint32_t j = 0; j < head_dim; j++) out[(size_t)h * head_dim + j] = (double)gq[j] * gq[j];
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
                                : tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "layer %u has no attn_q_norm, or no attn_q and "
                                                                         "attn_norm: not an attention layer tq knows", layer);
    } else if (!ng || nw % ng || (nw / ng) % ((uint64_t)head_dim * n_kv_head)) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "layer %u: attn_q [%llu x %llu] does not fit %u KV heads of %u", layer,
                              (unsigned long long)ng, (unsigned long long)(ng ? nw / ng : 0), n_kv_head, head_dim);
    } else {
        uint64_t rows = nw / ng, per = rows / ((uint64_t)head_dim * n_kv_head); /* query heads per KV head */
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
    free(w), free(gn);
    return st;
}
