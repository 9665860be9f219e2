/* innerq_fold.c - a model with its InnerQ scales folded in (innerq_fold.h; calibrate-innerq
 * --fold), so that any runtime KV cache stores s*k and s_v*v.
 *
 * K: models with QK-norm get attn_k_norm's gain times s and attn_q_norm's
 * divided by s (one vector per layer: the gains serve every head); others
 * get W_k's rows (and bias) times s and W_q's rows divided by the s of their
 * KV head.  RoPE turns pairs of channels that share a scale, so it commutes.
 * V: W_v's rows (and bias) times s_v, W_o's input columns divided by it.
 * Divisions, not reciprocal multiplications, so power-of-two scales are
 * exact.  Quantized tensors are rewritten only with --allow-requantize. */
#include "innerq_fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_COPY, F_QNORM, F_KNORM, F_Q_ROWS, F_K_ROWS, F_V_ROWS, F_O_COLS } fold_op;

/* What tensor `name` gets, and its layer. */
static fold_op op_of(const char *name, const tq_attn_model *am, const tq_fold_plan *fp,
                     uint32_t *layer)
{
    unsigned l;
    char rest[64];
    if (sscanf(name, "blk.%u.%63s", &l, rest) != 2) return F_COPY;
    *layer = l;
    int w = !strcmp(strchr(rest, '.') ? strchr(rest, '.') : "", ".weight"),
        b = !strcmp(strchr(rest, '.') ? strchr(rest, '.') : "", ".bias");
    if (!w && !b) return F_COPY;
    *strchr(rest, '.') = 0;
    if (fp->k && am->qk_norm && w && !strcmp(rest, "attn_q_norm")) return F_QNORM;
    if (fp->k && am->qk_norm && w && !strcmp(rest, "attn_k_norm")) return F_KNORM;
    if (fp->k && !am->qk_norm && !strcmp(rest, "attn_q")) return F_Q_ROWS;
    if (fp->k && !am->qk_norm && !strcmp(rest, "attn_k")) return F_K_ROWS;
    if (fp->v && !strcmp(rest, "attn_v")) return F_V_ROWS;
    if (fp->v && w && !strcmp(rest, "attn_output")) return F_O_COLS;
    return F_COPY;
}

static int is_float(int d) { return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16; }

/* tq writes these again; the other quantized types it only reads */
static int writable(int d)
{
    return is_float(d) || d == TQ_DT_Q8_0 || d == TQ_DT_Q4_0 || d == TQ_DT_Q4_1 ||
           d == TQ_DT_Q5_0 || d == TQ_DT_Q5_1 || d == TQ_DT_Q4_K || d == TQ_DT_Q5_K ||
           d == TQ_DT_Q6_K || d == TQ_DT_TQ3_1S || d == TQ_DT_TQ4_1S;
}

/* Whether every tensor of a part can be rewritten; why not into why. */
static int part_ok(const tq_gguf *g, int allow_requantize, const char *const *names, int n,
                   uint32_t layers, char *why, size_t wl)
{
    char name[96];
    for (uint32_t l = 0; l < layers; l++)
        for (int i = 0; i < n; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", l, names[i]);
            int64_t t = tq_gguf_find_tensor(g, name);
            if (t < 0) continue; /* an absent bias */
            const tq_ggml_type *ty = tq_gguf_tensor_type(g, t);
            if (is_float(ty->dtype)) continue;
            if (!writable(ty->dtype)) {
                snprintf(why, wl, "%s is %s, which tq does not write", name, ty->name);
                return 0;
            }
            if (!allow_requantize) {
                snprintf(why, wl, "%s is %s: folding requantizes it (--allow-requantize)", name,
                         ty->name);
                return 0;
            }
        }
    return 1;
}

tq_status tq_fold_plan_make(tq_ctx *ctx, int allow_requantize, const tq_gguf *g,
                            const tq_attn_model *am, const tq_innerq_set *set, tq_fold_plan *fp)
{
    memset(fp, 0, sizeof *fp);
    static const char *const knorm[] = {"attn_q_norm.weight", "attn_k_norm.weight"};
    static const char *const krows[] = {"attn_q.weight", "attn_q.bias", "attn_k.weight",
                                        "attn_k.bias"};
    static const char *const vparts[] = {"attn_v.weight", "attn_v.bias", "attn_output.weight"};
    if (am->qk_norm && set->n_head > 1)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the model has QK-norm: its gains serve every head of a layer, so "
                                "--per head scales cannot be folded (use --per layer)");
    int rq = allow_requantize;
    if (am->qk_norm)
        fp->k = part_ok(g, rq, knorm, 2, am->n_layer, fp->k_why, sizeof fp->k_why);
    else
        fp->k = part_ok(g, rq, krows, 4, am->n_layer, fp->k_why, sizeof fp->k_why);
    fp->v = set->has_v && part_ok(g, rq, vparts, 3, am->n_layer, fp->v_why, sizeof fp->v_why);
    if (!fp->k && !fp->v)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "--fold: nothing can be folded: %s%s%s",
                                fp->k_why, *fp->v_why ? "; " : "", fp->v_why);
    return TQ_OK;
}

/* x: the tensor as float32, ne its shape; the fold's arithmetic. */
static void apply(fold_op op, float *x, const int64_t *ne, const tq_attn_model *am,
                  const tq_innerq_set *set, uint32_t l)
{
    uint32_t d = set->head_dim, per = am->n_head / am->n_head_kv;
    size_t cols = (size_t)ne[0], rows = (size_t)(ne[1] * ne[2] * ne[3]);
    if (op == F_QNORM || op == F_KNORM) {
        const float *s = tq_innerq_set_at(set, l, 0, 0);
        for (size_t j = 0; j < cols; j++) x[j] = op == F_KNORM ? x[j] * s[j % d] : x[j] / s[j % d];
        return;
    }
    if (op == F_O_COLS) { /* input column c belongs to query head c / d */
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++)
                x[r * cols + c] /= tq_innerq_set_at(set, l, 1, (uint32_t)(c / d / per))[c % d];
        return;
    }
    /* output rows (a bias: one value per row) */
    int is_v = op == F_V_ROWS, q = op == F_Q_ROWS;
    size_t n_out = rows == 1 ? cols : rows, lanes = rows == 1 ? 1 : cols;
    for (size_t r = 0; r < n_out; r++) {
        uint32_t head = (uint32_t)(r / d), kvh = q ? head / per : head;
        float s = tq_innerq_set_at(set, l, is_v, kvh)[r % d];
        for (size_t i = 0; i < lanes; i++)
            x[r * lanes + i] = q ? x[r * lanes + i] / s : x[r * lanes + i] * s;
    }
}

static tq_status fold_tensor(tq_ctx *ctx, const tq_gguf *g, int64_t i, fold_op op,
                             const tq_attn_model *am, const tq_innerq_set *set, uint32_t l,
                             tq_gguf_writer *w)
{
    const tq_ggml_type *ty = tq_gguf_tensor_type(g, i);
    size_t n = (size_t)tq_gguf_tensor_nelements(g, i), nb = (size_t)tq_gguf_tensor_nbytes(g, i);
    float *x = malloc(n * sizeof *x);
    void *enc = malloc(nb);
    tq_status st = !x || !enc
                       ? tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory")
                       : tq_dequantize(ctx, (tq_dtype)ty->dtype, tq_gguf_tensor_data(g, i), n, x);
    if (!st) apply(op, x, tq_gguf_tensor_ne(g, i), am, set, l);
    if (!st) st = tq_quantize(ctx, (tq_dtype)ty->dtype, x, n, enc);
    if (!st) st = tq_gguf_writer_write(w, enc, nb);
    free(x);
    free(enc);
    return st;
}

static tq_status write_meta(tq_gguf_writer *w, const tq_gguf *g, const tq_innerq_set *set,
                            const tq_innerq_provenance *prov, const tq_fold_plan *fp,
                            const tq_attn_model *am)
{
    tq_status st = tq_gguf_writer_copy_kvs(w, g);
    if (!st) st = tq_innerq_provenance_write(w, set, prov);
    char parts[160];
    const char *k_part = "";
    if (fp->k) k_part = am->qk_norm ? "k:qk_norm_gains" : "k:wq_wk_rows";
    snprintf(parts, sizeof parts, "%s%s%s", k_part, fp->k && fp->v ? "," : "",
             fp->v ? "v:wv_rows_wo_columns" : "");
    if (!st) st = tq_gguf_writer_set_str(w, "tq.innerq.folded", parts, strlen(parts));
    if (!st) st = tq_gguf_writer_set_profile(w, tq_gguf_profile(g));
    for (int64_t i = 0; !st && i < tq_gguf_n_tensors(g); i++)
        st = tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), tq_gguf_tensor_type_id(g, i),
                                       tq_gguf_tensor_n_dims(g, i), tq_gguf_tensor_ne(g, i));
    return st;
}

tq_status tq_fold_write(tq_ctx *ctx, const tq_gguf *g, const char *path,
                        const char *const *inputs, size_t n_inputs, const tq_attn_model *am,
                        const tq_innerq_set *set, const tq_innerq_provenance *prov,
                        const tq_fold_plan *fp, size_t *changed)
{
    tq_gguf_writer *w = NULL;
    tq_status st = tq_gguf_writer_new(ctx, &w);
    if (!st) st = write_meta(w, g, set, prov, fp, am);
    if (!st) st = tq_gguf_writer_open(w, path, inputs, n_inputs);
    *changed = 0;
    for (int64_t i = 0; !st && i < tq_gguf_n_tensors(g); i++) {
        uint32_t l = 0;
        fold_op op = op_of(tq_gguf_tensor_name(g, i), am, fp, &l);
        if (op == F_COPY || l >= am->n_layer) {
            st = tq_gguf_copy_tensor(g, i, w);
        } else {
            ++*changed;
            st = fold_tensor(ctx, g, i, op, am, set, l, w);
        }
        tq_gguf_tensor_release(g, i);
    }
    if (!st) st = tq_gguf_writer_finish(w);
    tq_gguf_writer_free(w);
    return st;
}
