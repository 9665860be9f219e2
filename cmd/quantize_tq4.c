/* quantize_tq4.c - `tq quantize-tq4`: a GGUF model to TQ4_1S / TQ3_1S (and
 * Q8_0, Q4_0, F16, BF16, F32) tensors by policy, streamed tensor by tensor
 * from the mapped input: a bounded slice of rows is dequantized, coded, and
 * checked by decoding it again, so memory does not grow with the model. */
#include "cli.h"
#include "cli_opts.h"
#include "device.h"
#include "gguf.h"
#include "model.h"
#include "imatrix.h"
#include "json.h"
#include "progress.h"
#include "quant_plan.h"
#include "quantize_tq4.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SLICE_VALUES
#define SLICE_VALUES (4u << 20) /* values per slice: 16 MiB of float32 */
#endif

void help_quantize_tq4(void)
{
    printf(
        "usage: tq quantize-tq4 [options] IN.gguf OUT.gguf\n\n"
        "Writes IN with the tensors a policy selects in TQ4_1S or TQ3_1S (the TurboQuant+ fork's\n"
        "weight types), others as the policy says, with llama-quantize's conventions.\n\n"
        "  --type tq4_1s|tq3_1s     the type for the selected tensors (default tq4_1s)\n"
        "  --policy all|attn|config-i\n"
        "                           all: every quantizable weight; attn: the token mixers\n"
        "                           (attention Q/K/V/O, MLA, DeltaNet, SSM and short-conv\n"
        "                           projections); config-i (default): those and FFN gate/up\n"
        "                           in --type, FFN down in q4_K, the first and last 2\n"
        "                           layers in q8_0, embeddings and output kept\n"
        "  --boundary-layers N      layers at each end in q8_0 (default: 2 for config-i, else 0)\n"
        "  --ffn-down-type T        config-i's type for ffn_down (default q4_K, as the fork's)\n"
        "  --tensor-type REGEX=T    type for tensors whose name matches (repeatable, the first\n"
        "                           match wins, as in llama-quantize); T: tq4_1s tq3_1s q8_0 q6_K "
        "q5_K q4_K q5_1 q5_0 q4_1\n"
        "                           q4_0 f16 bf16 f32 keep; rows that are not whole blocks fall\n"
        "                           back as llama-quantize's do (q4_K->q5_0, q5_K->q5_1,\n"
        "                           q6_K->q8_0, else F16), logged and counted\n"
        "  --tensor-type-file F     the same, one REGEX=T per line\n"
        "  --keep REGEX             copy matching tensors as they are\n"
        "  --allow-requantize       accept quantized inputs other than q8_0 (legacy and K-quants,\n"
        "                           dequantized first)\n"
        "  --imatrix FILE           llama.cpp importance matrix (GGUF or .dat): TQ3_1S/TQ4_1S\n"
        "                           minimise importance-weighted error; q4_0..q5_1 and\n"
        "                           q4_K..q6_K are weighted as llama-quantize weights them\n"
        "  --simulate[=f16]         write every converted tensor as its dequantized values in F32\n"
        "                           (or F16): a model stock llama.cpp runs, to judge the quality\n"
        "  --search best|fork       tq's search (default) or the fork's, bit for bit\n"
        "  --dry-run                the plan and sizes; nothing is written\n"
        "  --json                   a JSON report on stdout\n"
        "  --type-profile NAME      type-id numbering (see tq inspect)\n"
        "  --threads N, --quiet\n");
}


static int opt_type(void *user, const char *v)
{
    opts *o = user;
    int t = qp_parse_type(v);
    if (t != TQ_DT_TQ4_1S && t != TQ_DT_TQ3_1S)
        return cli_usage_error("--type: '%s' is not tq4_1s or tq3_1s", v);
    o->plan.type = t;
    return 0;
}

static int opt_policy(void *user, const char *v)
{
    opts *o = user;
    if (qp_parse_policy(v, &o->plan.policy))
        return cli_usage_error("--policy: '%s' is not all, attn or config-i", v);
    return 0;
}

static int opt_ffn_down(void *user, const char *v)
{
    opts *o = user;
    int t = qp_parse_type(v);
    if (t == -2) return cli_usage_error("--ffn-down-type: unknown type '%s'", v);
    o->plan.ffn_down_type = t;
    return 0;
}

static int opt_rule(void *user, const char *v)
{
    char err[600];
    if (qp_add_rule(&((opts *)user)->plan, v, err, sizeof err))
        return cli_usage_error("--tensor-type: %s", err);
    return 0;
}

static int opt_rules_file(void *user, const char *v)
{
    char err[600];
    if (qp_add_rules_file(&((opts *)user)->plan, v, err, sizeof err))
        return cli_usage_error("--tensor-type-file: %s", err);
    return 0;
}

static int opt_keep(void *user, const char *v)
{
    char err[600], spec[4200];
    snprintf(spec, sizeof spec, "%s=keep", v);
    if (qp_add_rule(&((opts *)user)->plan, spec, err, sizeof err))
        return cli_usage_error("--keep: %s", err);
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    static const char *const searches[] = {"best", "fork", NULL}, *const sims[] = {"f32", "f16",
                                                                                   NULL};
    const char *search = NULL, *simulate = NULL, *pos[2] = {NULL, NULL};
    memset(o, 0, sizeof *o);
    o->plan.type = TQ_DT_TQ4_1S;
    o->plan.policy = QP_CONFIG_I;
    o->plan.boundary_layers = -1;
    o->plan.ffn_down_type = TQ_DT_Q4_K; /* the fork's Config I */
    long boundary = -1;
    const cli_opt own[] = {
        CLI_OPT_FN("--type", opt_type, o),
        CLI_OPT_FN("--policy", opt_policy, o),
        CLI_OPT_LONG("--boundary-layers", &boundary, 0, 100000),
        CLI_OPT_FN("--ffn-down-type", opt_ffn_down, o),
        CLI_OPT_FN("--tensor-type", opt_rule, o),
        CLI_OPT_FN("--tensor-type-file", opt_rules_file, o),
        CLI_OPT_FN("--keep", opt_keep, o),
        CLI_OPT_FLAG("--allow-requantize", &o->allow_requantize),
        CLI_OPT_STR("--imatrix", &o->imatrix),
        {.name = "--simulate",
         .kind = CLI_CHOICE,
         .dst = &simulate,
         .choices = sims,
         .bad = "--simulate: '%s' is not f32 or f16",
         .optional = 1},
        CLI_OPT_CHOICE("--search", &search, searches, "--search: '%s' is not best or fork"),
        CLI_OPT_FLAG("--dry-run", &o->dry_run),
        {NULL},
    };
    const cli_spec spec = {"quantize-tq4",
                           CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_PROFILE | CLI_DEVICE, own, 2};
    cli_common c;
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, pos, &n);
    if (rc) return rc;
    tq_ctx *dc = tq_ctx_new(); /* the weight codecs have no CUDA kernels yet: cuda is refused, auto
                                  is the CPU */
    rc = dc ? cli_device(&c, dc, 0, 0) : cli_runtime_error("out of memory");
    tq_ctx_free(dc);
    if (rc) return rc;
    o->in = pos[0];
    o->out = pos[1];
    o->quiet = c.quiet;
    o->json = c.json;
    o->threads = c.threads;
    o->gopt = cli_gguf_options(&c);
    if (boundary >= 0) o->plan.boundary_layers = (int)boundary;
    o->simulate = simulate != NULL;
    o->simulate_type = simulate && !strcmp(simulate, "f16") ? TQ_DT_F16 : TQ_DT_F32;
    o->search_fork = search && !strcmp(search, "fork");
    if (!o->in) return cli_usage_error("which model? (see tq help quantize-tq4)");
    if (!o->out && !o->dry_run) return cli_usage_error("where to? give OUT.gguf (or --dry-run)");
    return 0;
}

static int is_float_dtype(int d) { return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16; }


/* Decides every tensor before anything is written, so a refusal leaves no file. */
static int make_plan(tq_ctx *ctx, const tq_gguf *g, opts *o, tq_type_profile prof, tjob *jobs)
{
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        tjob *j = &jobs[i];
        const char *name = tq_gguf_tensor_name(g, i);
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        j->i = i;
        j->in_ty = tq_gguf_tensor_type(g, i);
        j->in_bytes = tq_gguf_tensor_nbytes(g, i);
        j->rel_err = j->wrel_err = NAN;
        j->out =
            qp_choose(&o->plan, name, tq_gguf_tensor_n_dims(g, i), ne, &j->fallback, &j->wanted);
        if (j->out != QT_KEEP && j->in_ty->dtype == j->out)
            j->out = QT_KEEP; /* already that type: no loss */
        j->convert = j->out != QT_KEEP;
        if (j->convert) {
            int d = j->in_ty->dtype;
            if (d < 0)
                return cli_runtime_error(
                    "%s: tensor %s is %s, which tq cannot dequantize; keep it (--keep '%s') or "
                    "convert from an F16/F32 model",
                    o->in, name, j->in_ty->name, name);
            if (!is_float_dtype(d) && d != TQ_DT_Q8_0 && !o->allow_requantize)
                return cli_runtime_error(
                    "%s: tensor %s is %s: requantizing it loses accuracy; pass --allow-requantize "
                    "to accept that",
                    o->in, name, j->in_ty->name);
        }
        int written = -1; /* -1: kept as it is */
        if (j->convert) written = o->simulate ? (int)o->simulate_type : j->out;
        j->out_ty = written < 0 ? j->in_ty : tq_ggml_type_by_name(prof, qp_type_name(written));
        if (!j->out_ty)
            return cli_runtime_error("type profile %s has no %s type id",
                                     tq_type_profile_name(prof), qp_type_name(written));
        j->out_bytes =
            (uint64_t)(tq_gguf_tensor_nelements(g, i) / j->out_ty->block) * j->out_ty->bytes;
    }
    (void)ctx;
    return 0;
}

/* ---------------------------------------------------------- converting */

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
static tq_status code_slice(conv *cv, const tjob *j, tq_codec *c, const float *imp,
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
static tq_status write_slice(conv *cv, const opts *o, tq_gguf_writer *w, size_t nr, int64_t ne0,
                             size_t out_rb)
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

static tq_status convert(conv *cv, const tq_gguf *g, tjob *j, const opts *o, tq_gguf_writer *w,
                         progress *pr, uint64_t *done, uint64_t total)
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
        progress_update(pr, *done, total, "bytes");
    }
    j->rel_err = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    if (imp) j->wrel_err = sums[3] > 0 ? sums[2] / sums[3] : 0.0;
    return st;
}




/* ---------------------------------------------------------- the command */

static tq_status write_meta(tq_gguf_writer *w, const tq_gguf *g, const opts *o, const tjob *jobs,
                            int64_t n)
{
    tq_status st = tq_gguf_writer_copy_kvs(w, g);
    if (!st && !o->simulate)
        st = tq_gguf_writer_set_u32(w, "general.file_type",
                                    (uint32_t)tq_gguf_file_type_of(o->plan.type));
    if (!st) st = tq_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st)
        st = tq_gguf_writer_set_str(w, "tq.quantize.tool", "tq " TQ_VERSION_STRING,
                                    strlen("tq " TQ_VERSION_STRING));
    const char *ty = qp_type_name(o->plan.type), *pol = qp_policy_name(o->plan.policy);
    if (!st) st = tq_gguf_writer_set_str(w, "tq.quantize.type", ty, strlen(ty));
    if (!st) st = tq_gguf_writer_set_str(w, "tq.quantize.policy", pol, strlen(pol));
    if (!st)
        st = tq_gguf_writer_set_str(w, "tq.quantize.search", o->search_fork ? "fork" : "best", 4);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.quantize.simulated", o->simulate ? 1 : 0);
    if (!st && o->imatrix) {
        const char *b = strrchr(o->imatrix, '/');
        b = b ? b + 1 : o->imatrix;
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


/* The converted model, tensor by tensor in slices of bounded size. */
static tq_status write_model(tq_ctx *ctx, const tq_gguf *g, tjob *jobs, int64_t n, const opts *o,
                             conv *cv, int64_t widest, uint64_t total)
{
    /* a slice is whole rows of at most SLICE_VALUES values, or one row when
     * a row is longer: never more than the larger of the two */
    size_t slice = (size_t)widest > SLICE_VALUES ? (size_t)widest : SLICE_VALUES;
    cv->x = malloc(slice * sizeof(float));
    cv->y = malloc(slice * sizeof(float));
    cv->blk = malloc(slice * sizeof(float)); /* at most f32-sized output */
    tq_codec_desc d4 = {.kind = TQ_CODEC_TQ4_1S}, d3 = {.kind = TQ_CODEC_TQ3_1S};
    if (!cv->x || !cv->y || !cv->blk || tq_codec_new(ctx, &d4, &cv->codec[0]) ||
        tq_codec_new(ctx, &d3, &cv->codec[1]))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (int k = 0; k < 2 && o->search_fork; k++)
        tq_codec_set_weight_search(ctx, cv->codec[k], TQ_WSEARCH_FORK);
    tq_gguf_writer *w = NULL;
    progress pr;
    progress_init(&pr, o->quiet || o->json);
    uint64_t done_b = 0;
    tq_status st = tq_gguf_writer_new(ctx, &w);
    if (!st) st = write_meta(w, g, o, jobs, n);
    if (!st) st = tq_gguf_writer_set_profile(w, tq_gguf_profile(g));
    for (int64_t i = 0; i < n && !st; i++)
        st = tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), jobs[i].out_ty->id,
                                       tq_gguf_tensor_n_dims(g, i), tq_gguf_tensor_ne(g, i));
    const char *inputs[2] = {o->in, o->imatrix ? o->imatrix : o->in};
    if (!st) st = tq_gguf_writer_open(w, o->out, inputs, 2);
    for (int64_t i = 0; i < n && !st; i++) {
        tjob *j = &jobs[i];
        if (j->convert) {
            st = convert(cv, g, j, o, w, &pr, &done_b, total);
            if (st) { /* which tensor: the codecs know only values */
                char why[256];
                snprintf(why, sizeof why, "%s", tq_ctx_error(cv->ctx));
                tq_ctx_set_error(cv->ctx, st, "%s: %s", tq_gguf_tensor_name(g, i), why);
            }
        } else {
            st = tq_gguf_copy_tensor(g, i, w);
            done_b += j->in_bytes;
            progress_update(&pr, done_b, total, "bytes");
        }
        tq_gguf_tensor_release(g, i);
        if (!st && !o->quiet && !o->json) {
            progress_end(&pr);
            qt_log_line(g, j, n, o);
        }
    }
    progress_end(&pr);
    if (!st) st = tq_gguf_writer_finish(w);
    if (w) tq_gguf_writer_free(w);
    return st;
}


int cmd_quantize_tq4(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc) {
        qp_free(&o.plan);
        return rc < 0 ? TQ_EXIT_OK : rc;
    }
    double t0 = cli_now();
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) return cli_runtime_error("out of memory");
    tq_ctx_set_threads(ctx, (int)o.threads);
    tq_gguf *g = NULL;
    tq_imatrix *im = NULL;
    tjob *jobs = NULL;
    conv cv = {ctx, {NULL, NULL}, NULL, NULL, NULL, NULL, (int)o.threads};
    if (tq_gguf_open(ctx, o.in, &o.gopt, &g) ||
        (o.imatrix && tq_imatrix_open(ctx, o.imatrix, &im))) {
        rc = cli_lib_error(ctx);
        goto done;
    }
    tq_model model;
    if (tq_model_read(ctx, g, &model)) {
        rc = cli_lib_error(ctx);
        goto done;
    }
    o.plan.n_layers = model.n_layer;
    tq_model_free(&model);
    cv.im = im;
    int64_t n = tq_gguf_n_tensors(g);
    if (!(jobs = calloc((size_t)(n ? n : 1), sizeof *jobs))) {
        rc = cli_runtime_error("out of memory");
        goto done;
    }
    if ((rc = make_plan(ctx, g, &o, tq_gguf_profile(g), jobs))) goto done;
    uint64_t in_b = 0, out_b = 0, weights = 0;
    int64_t widest = 1;
    for (int64_t i = 0; i < n; i++) {
        in_b += jobs[i].in_bytes;
        out_b += jobs[i].out_bytes;
        weights += (uint64_t)tq_gguf_tensor_nelements(g, i);
        if (jobs[i].convert && tq_gguf_tensor_ne(g, i)[0] > widest)
            widest = tq_gguf_tensor_ne(g, i)[0];
    }
    if (im && !o.quiet) qt_imatrix_warning(g, im, jobs, n, &o);
    if (o.dry_run) {
        for (int64_t i = 0; i < n && !o.quiet; i++) qt_log_line(g, &jobs[i], n, &o);
    } else if (write_model(ctx, g, jobs, n, &o, &cv, widest, in_b)) {
        rc = cli_lib_error(ctx);
        goto done;
    }
    double secs = cli_now() - t0;
    if (o.json)
        qt_json_report(g, jobs, n, &o, secs, in_b, out_b, weights);
    else if (!o.quiet)
        qt_print_summary(jobs, n, &o, secs, in_b, out_b, weights);
done:
    tq_codec_free(cv.codec[0]);
    tq_codec_free(cv.codec[1]);
    free(cv.x);
    free(cv.y);
    free(cv.blk);
    free(jobs);
    tq_imatrix_close(im);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    qp_free(&o.plan);
    return rc;
}
