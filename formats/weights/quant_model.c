/* quant_model.c - a model quantized, prepared then executed (quant_model.h). */
#include "quant_model.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SLICE_VALUES
#define SLICE_VALUES (4u << 20) /* values per slice: 16 MiB of float32 */
#endif

static int is_float_dtype(int d) { return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16; }

/* Decides every tensor before anything is written, so a refusal leaves no file. */
tq_status tq_quant_prepare(tq_ctx *ctx, const tq_gguf *g, const tq_quant_options *o,
                           tq_quant_job *jobs)
{
    tq_type_profile prof = tq_gguf_profile(g);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        tq_quant_job *j = &jobs[i];
        const char *name = tq_gguf_tensor_name(g, i);
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        j->i = i;
        j->in_ty = tq_gguf_tensor_type(g, i);
        j->in_bytes = tq_gguf_tensor_nbytes(g, i);
        j->rel_err = j->wrel_err = NAN;
        j->out =
            qp_choose(o->plan, name, tq_gguf_tensor_n_dims(g, i), ne, &j->fallback, &j->wanted);
        if (j->out != QT_KEEP && j->in_ty->dtype == j->out)
            j->out = QT_KEEP; /* already that type: no loss */
        j->convert = j->out != QT_KEEP;
        if (j->convert) {
            int d = j->in_ty->dtype;
            if (d < 0)
                return tq_ctx_set_error(
                    ctx, TQ_ERR_UNSUPPORTED,
                    "%s: tensor %s is %s, which tq cannot dequantize; keep it (--keep '%s') or "
                    "convert from an F16/F32 model",
                    o->in_label, name, j->in_ty->name, name);
            if (!is_float_dtype(d) && d != TQ_DT_Q8_0 && !o->allow_requantize)
                return tq_ctx_set_error(
                    ctx, TQ_ERR_ARG,
                    "%s: tensor %s is %s: requantizing it loses accuracy; pass --allow-requantize "
                    "to accept that",
                    o->in_label, name, j->in_ty->name);
        }
        int written = -1; /* -1: kept as it is */
        if (j->convert) written = o->simulate ? (int)o->simulate_type : j->out;
        j->out_ty = written < 0 ? j->in_ty : tq_ggml_type_by_name(prof, qp_type_name(written));
        if (!j->out_ty)
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "type profile %s has no %s type id",
                                    tq_type_profile_name(prof), qp_type_name(written));
        j->out_bytes =
            (uint64_t)(tq_gguf_tensor_nelements(g, i) / j->out_ty->block) * j->out_ty->bytes;
    }
    return TQ_OK;
}

typedef struct conv {
    tq_ctx *ctx;
    tq_codec *codec[2]; /* TQ4_1S, TQ3_1S */
    const tq_imatrix *im;
    float *x, *y;
    uint8_t *blk;
    int threads;
} conv;

/* What one parallel pass over rows does: rows of `in` (in_rb bytes each, of
 * type in_type) into rows of `out` (out_rb bytes each). */
typedef enum rows_op { ROWS_DEQUANTIZE, ROWS_QUANTIZE, ROWS_QUANTIZE_WEIGHTED } rows_op;
typedef struct rows_pass {
    rows_op op;
    int type;          /* tq_dtype of the quantized side */
    const uint8_t *in; /* [nr][in_rb] */
    uint8_t *out;      /* [nr][out_rb] */
    size_t in_rb, out_rb;
    int64_t ne0; /* values per row */
    /* ROWS_QUANTIZE_WEIGHTED: row r0 + r belongs to expert (r0 + r) / rows_per_expert */
    const float *imp; /* [experts][ne0] */
    size_t r0, rows_per_expert;
} rows_pass;

static tq_status one_row(tq_ctx *wc, const rows_pass *k, size_t r)
{
    const uint8_t *in = (const uint8_t *)k->in + r * k->in_rb;
    uint8_t *out = (uint8_t *)k->out + r * k->out_rb;
    size_t n = (size_t)k->ne0;
    if (k->op == ROWS_DEQUANTIZE) return tq_dequantize(wc, (tq_dtype)k->type, in, n, (float *)out);
    if (k->op == ROWS_QUANTIZE)
        return tq_quantize(wc, (tq_dtype)k->type, (const float *)in, n, out);
    const float *imp = k->imp + (k->r0 + r) / k->rows_per_expert * n; /* this row's expert */
    return tq_quantize_weighted(wc, (tq_dtype)k->type, (const float *)in, 1, n, imp, out);
}

/* nr rows in parallel; a failure is the lowest failing row's message. */
static tq_status run_rows(tq_ctx *ctx, const rows_pass *k, size_t nr, int threads)
{
    size_t first = SIZE_MAX;
#pragma omp parallel num_threads(threads)
    {
        tq_ctx *wc = tq_ctx_clone(ctx);
#pragma omp for schedule(static)
        for (size_t r = 0; r < nr; r++)
            if (!wc || one_row(wc, k, r)) tq_ctx_keep_first(ctx, &first, r, wc);
        tq_ctx_free(wc);
    }
    return first == SIZE_MAX ? TQ_OK : tq_ctx_status(ctx);
}

static size_t row_bytes(int t, int64_t ne0)
{
    return (size_t)ne0 / tq_dtype_block_values((tq_dtype)t) * tq_dtype_block_bytes((tq_dtype)t);
}

/* The types an imatrix steers: the fork's weight blocks and the ggml types
 * llama-quantize weights (q8_0 and the float types ignore it there too). */
static int weighs(int t)
{
    return t == TQ_DT_TQ4_1S || t == TQ_DT_TQ3_1S || t == TQ_DT_Q4_0 || t == TQ_DT_Q4_1 ||
           t == TQ_DT_Q5_0 || t == TQ_DT_Q5_1 || t == TQ_DT_Q4_K || t == TQ_DT_Q5_K ||
           t == TQ_DT_Q6_K;
}

/* A pass of op over rows of ne0 values with no importances. */
static rows_pass plain_pass(rows_op op, int type, const void *in, void *out, size_t in_rb,
                            size_t out_rb, int64_t ne0)
{
    rows_pass k = {op, type, in, out, in_rb, out_rb, ne0, NULL, 0, 1}; /* 1: no experts */
    return k;
}

/* cv->x's nr rows (from row r0) into cv->blk as j->out: through the fork's
 * codec c, expert by expert where importances weigh them, or ggml's types. */
static tq_status code_slice(conv *cv, const tq_quant_job *j, tq_codec *c, const float *imp,
                            const int64_t *ne, size_t r0, size_t nr, size_t out_rb)
{
    int64_t ne0 = ne[0];
    if (c && imp) { /* rows of one expert at a time: each has its own importances */
        size_t rpe = (size_t)ne[1];
        tq_status st = TQ_OK;
        for (size_t r = 0; r < nr && !st;) {
            size_t e = (r0 + r) / rpe;
            size_t n = rpe - (r0 + r) % rpe;
            if (n > nr - r) n = nr - r;
            st = tq_encode_weighted(cv->ctx, c, cv->x + r * ne0, n, (size_t)ne0, imp + e * ne0,
                                    cv->blk + r * out_rb);
            r += n;
        }
        return st;
    }
    if (c) return tq_encode(cv->ctx, c, cv->x, nr * (size_t)ne0, cv->blk);
    rows_pass q =
        plain_pass(ROWS_QUANTIZE, j->out, cv->x, cv->blk, (size_t)ne0 * sizeof(float), out_rb, ne0);
    if (imp) {
        q.op = ROWS_QUANTIZE_WEIGHTED;
        q.imp = imp;
        q.r0 = r0;
        q.rows_per_expert = (size_t)ne[1];
    }
    return run_rows(cv->ctx, &q, nr, cv->threads);
}

/* Squared errors of cv->y against cv->x, plain and importance-weighted
 * (sums[4]: se, sx, weighted se, weighted sx), in row order: the same sums
 * for any thread count. */
static void add_errors(const conv *cv, const float *imp, const int64_t *ne, size_t r0, size_t nr,
                       double *sums)
{
    int64_t ne0 = ne[0];
    for (size_t r = 0; r < nr; r++) {
        const float *xr = cv->x + r * ne0; /* [ne0] */
        const float *yr = cv->y + r * ne0; /* [ne0] */
        const float *w = NULL;             /* [ne0]: this row's expert's importances */
        if (imp) w = imp + ((r0 + r) / (size_t)ne[1]) * (size_t)ne0;
        for (int64_t k = 0; k < ne0; k++) {
            double d = (double)xr[k] - yr[k];
            double x2 = (double)xr[k] * xr[k];
            sums[0] += d * d;
            sums[1] += x2;
            if (w) {
                sums[2] += w[k] * d * d;
                sums[3] += w[k] * x2;
            }
        }
    }
}

/* The slice as written: the blocks, or (--simulate) their values. */
static tq_status write_slice(conv *cv, const tq_quant_options *o, tq_gguf_writer *w, size_t nr,
                             int64_t ne0, size_t out_rb)
{
    size_t nv = nr * (size_t)ne0;
    if (o->simulate && o->simulate_type == TQ_DT_F16) {
        rows_pass h = plain_pass(ROWS_QUANTIZE, TQ_DT_F16, cv->y, cv->blk,
                                 (size_t)ne0 * sizeof(float), row_bytes(TQ_DT_F16, ne0), ne0);
        tq_status st = run_rows(cv->ctx, &h, nr, cv->threads);
        return st ? st : tq_gguf_writer_write(w, cv->blk, nv * 2);
    }
    if (o->simulate) return tq_gguf_writer_write(w, cv->y, nv * 4);
    return tq_gguf_writer_write(w, cv->blk, nr * out_rb);
}

static tq_status convert(conv *cv, const tq_gguf *g, tq_quant_job *j, const tq_quant_options *o,
                         tq_gguf_writer *w, uint64_t *done, uint64_t total)
{
    const int64_t *ne = tq_gguf_tensor_ne(g, j->i);
    int64_t ne0 = ne[0];
    size_t rows = (size_t)(tq_gguf_tensor_nelements(g, j->i) / ne0);
    size_t per = SLICE_VALUES / (size_t)ne0 ? SLICE_VALUES / (size_t)ne0 : 1;
    const uint8_t *src = tq_gguf_tensor_data(g, j->i);
    size_t in_rb = (size_t)(ne0 / j->in_ty->block) * j->in_ty->bytes;
    size_t out_rb = row_bytes(j->out, ne0);
    size_t f32_rb = (size_t)ne0 * sizeof(float);
    const float *imp = NULL;
    uint64_t nimp = 0;
    if (cv->im && weighs(j->out)) {
        imp = tq_imatrix_get(cv->im, tq_gguf_tensor_name(g, j->i), &nimp);
        if (imp && nimp != (uint64_t)ne0 * (uint64_t)ne[2])
            return tq_ctx_set_error(cv->ctx, TQ_ERR_FORMAT,
                                    "the imatrix has %" PRIu64
                                    " values for %s, which needs %" PRId64,
                                    nimp, tq_gguf_tensor_name(g, j->i), ne0 * ne[2]);
        j->weighted = imp != NULL;
    }
    tq_codec *c = NULL; /* the fork's weight blocks go through their codecs */
    if (j->out == TQ_DT_TQ4_1S)
        c = cv->codec[0];
    else if (j->out == TQ_DT_TQ3_1S)
        c = cv->codec[1];
    double sums[4] = {0, 0, 0, 0};
    tq_status st = TQ_OK;
    for (size_t r0 = 0; r0 < rows && !st; r0 += per) {
        size_t nr = rows - r0 < per ? rows - r0 : per;
        rows_pass in = plain_pass(ROWS_DEQUANTIZE, j->in_ty->dtype, src + r0 * in_rb, cv->x, in_rb,
                                  f32_rb, ne0);
        rows_pass back = plain_pass(ROWS_DEQUANTIZE, j->out, cv->blk, cv->y, out_rb, f32_rb, ne0);
        st = run_rows(cv->ctx, &in, nr, cv->threads);
        if (!st) st = code_slice(cv, j, c, imp, ne, r0, nr, out_rb);
        if (!st) st = run_rows(cv->ctx, &back, nr, cv->threads);
        if (st) break;
        add_errors(cv, imp, ne, r0, nr, sums);
        st = write_slice(cv, o, w, nr, ne0, out_rb);
        tq_gguf_tensor_release_range(g, j->i, r0 * in_rb, nr * in_rb);
        *done += nr * in_rb;
        if (o->on_progress) o->on_progress(o->user, *done, total);
    }
    j->rel_err = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    if (imp) j->wrel_err = sums[3] > 0 ? sums[2] / sums[3] : 0.0;
    return st;
}

static tq_status write_meta(tq_gguf_writer *w, const tq_gguf *g, const tq_quant_options *o,
                            const tq_quant_job *jobs, int64_t n)
{
    tq_status st = tq_gguf_writer_copy_kvs(w, g);
    if (!st && !o->simulate)
        st = tq_gguf_writer_set_u32(w, "general.file_type",
                                    (uint32_t)tq_gguf_file_type_of(o->plan->type));
    if (!st) st = tq_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st)
        st = tq_gguf_writer_set_str(w, "tq.quantize.tool", "tq " TQ_VERSION_STRING,
                                    strlen("tq " TQ_VERSION_STRING));
    const char *ty = qp_type_name(o->plan->type), *pol = qp_policy_name(o->plan->policy);
    if (!st) st = tq_gguf_writer_set_str(w, "tq.quantize.type", ty, strlen(ty));
    if (!st) st = tq_gguf_writer_set_str(w, "tq.quantize.policy", pol, strlen(pol));
    if (!st)
        st = tq_gguf_writer_set_str(w, "tq.quantize.search", o->search_fork ? "fork" : "best", 4);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.quantize.simulated", o->simulate ? 1 : 0);
    if (!st && o->imatrix_name) {
        const char *b = strrchr(o->imatrix_name, '/');
        b = b ? b + 1 : o->imatrix_name;
        st = tq_gguf_writer_set_str(w, "tq.quantize.imatrix", b, strlen(b));
    }
    /* per output type: how many tensors */
    static const int kinds[] = {TQ_DT_TQ4_1S, TQ_DT_TQ3_1S, TQ_DT_Q8_0, TQ_DT_Q6_K, TQ_DT_Q5_K,
                                TQ_DT_Q4_K,   TQ_DT_Q5_1,   TQ_DT_Q5_0, TQ_DT_Q4_1, TQ_DT_Q4_0,
                                TQ_DT_F16,    TQ_DT_BF16,   TQ_DT_F32};
    enum { NK = sizeof kinds / sizeof kinds[0] };
    char buf[NK][32];
    const char *strs[NK + 1];
    uint64_t lens[NK + 1], k = 0;
    for (size_t t = 0; t < NK; t++) {
        int64_t c = 0;
        for (int64_t i = 0; i < n; i++) c += jobs[i].convert && jobs[i].out == kinds[t];
        if (!c) continue;
        snprintf(buf[k], sizeof buf[k], "%s=%" PRId64, qp_type_name(kinds[t]), c);
        strs[k] = buf[k];
        lens[k] = strlen(buf[k]);
        k++;
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) kept += !jobs[i].convert;
    char kb[32];
    snprintf(kb, sizeof kb, "kept=%" PRId64, kept);
    strs[k] = kb;
    lens[k++] = strlen(kb);
    if (!st) st = tq_gguf_writer_set_array(w, "tq.quantize.counts", TQ_GGUF_STRING, k, strs, lens);
    return st;
}

/* The working buffers of a slice, and the fork's two weight codecs. */
static tq_status conv_open(tq_ctx *ctx, const tq_quant_job *jobs, int64_t n, const tq_gguf *g,
                           const tq_quant_options *o, conv *cv)
{
    *cv = (conv){ctx, {NULL, NULL}, o->im, NULL, NULL, NULL, o->threads};
    int64_t widest = 1;
    for (int64_t i = 0; i < n; i++)
        if (jobs[i].convert && tq_gguf_tensor_ne(g, i)[0] > widest)
            widest = tq_gguf_tensor_ne(g, i)[0];
    /* a slice is whole rows of at most SLICE_VALUES values, or one row when
     * a row is longer: never more than the larger of the two */
    size_t slice = (size_t)widest > SLICE_VALUES ? (size_t)widest : SLICE_VALUES;
    cv->x = malloc(slice * sizeof(float));
    cv->y = malloc(slice * sizeof(float));
    cv->blk = malloc(slice * sizeof(float)); /* at most f32-sized output */
    tq_codec_desc d4 = {.kind = TQ_CODEC_TQ4_1S};
    tq_codec_desc d3 = {.kind = TQ_CODEC_TQ3_1S};
    if (!cv->x || !cv->y || !cv->blk || tq_codec_new(ctx, &d4, &cv->codec[0]) ||
        tq_codec_new(ctx, &d3, &cv->codec[1]))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (int k = 0; k < 2 && o->search_fork; k++)
        tq_codec_set_weight_search(ctx, cv->codec[k], TQ_WSEARCH_FORK);
    return TQ_OK;
}

static void conv_close(conv *cv)
{
    tq_codec_free(cv->codec[0]);
    tq_codec_free(cv->codec[1]);
    free(cv->x);
    free(cv->y);
    free(cv->blk);
}

/* The tensors in order, each converted in slices or copied byte for byte. */
static tq_status write_tensors(conv *cv, const tq_gguf *g, tq_quant_job *jobs, int64_t n,
                               const tq_quant_options *o, tq_gguf_writer *w)
{
    uint64_t total = 0;
    uint64_t done = 0;
    for (int64_t i = 0; i < n; i++) total += jobs[i].in_bytes;
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        tq_quant_job *j = &jobs[i];
        if (j->convert) {
            st = convert(cv, g, j, o, w, &done, total);
            if (st) { /* which tensor: the codecs know only values */
                char why[256];
                snprintf(why, sizeof why, "%s", tq_ctx_error(cv->ctx));
                tq_ctx_set_error(cv->ctx, st, "%s: %s", tq_gguf_tensor_name(g, i), why);
            }
        } else {
            st = tq_gguf_copy_tensor(g, i, w);
            done += j->in_bytes;
            if (o->on_progress) o->on_progress(o->user, done, total);
        }
        tq_gguf_tensor_release(g, i);
        if (!st && o->on_tensor) o->on_tensor(o->user, j);
    }
    return st;
}

tq_status tq_quant_execute(tq_ctx *ctx, const tq_gguf *g, tq_quant_job *jobs,
                           const tq_quant_options *o, const char *out,
                           const char *const *inputs, int n_inputs)
{
    int64_t n = tq_gguf_n_tensors(g);
    conv cv;
    tq_status st = conv_open(ctx, jobs, n, g, o, &cv);
    tq_gguf_writer *w = NULL;
    if (!st) st = tq_gguf_writer_new(ctx, &w);
    if (!st) st = write_meta(w, g, o, jobs, n);
    if (!st) st = tq_gguf_writer_set_profile(w, tq_gguf_profile(g));
    for (int64_t i = 0; i < n && !st; i++)
        st = tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), jobs[i].out_ty->id,
                                       tq_gguf_tensor_n_dims(g, i), tq_gguf_tensor_ne(g, i));
    if (!st) st = tq_gguf_writer_open(w, out, inputs, n_inputs);
    if (!st) st = write_tensors(&cv, g, jobs, n, o, w);
    if (!st) st = tq_gguf_writer_finish(w);
    if (w) tq_gguf_writer_free(w);
    conv_close(&cv);
    return st;
}
