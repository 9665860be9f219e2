/* quantize_tq4.c - `tq quantize-tq4`: a GGUF model to TQ4_1S / TQ3_1S (and the K-quants,
 * ggml's legacy types and the float types) by policy.  The options parsed and mapped onto
 * formats/weights/quant_model.h (prepare: every tensor decided; execute: the model streamed),
 * then reported: llama-quantize's line a tensor, the JSON report, the summary. */
#include "cli.h"
#include "cli_opts.h"
#include "device.h"
#include "gguf.h"
#include "model.h"
#include "imatrix.h"
#include "json.h"
#include "progress.h"
#include "quant_model.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    const char *in, *out, *imatrix;
    tq_gguf_options gopt;
    quant_plan plan;
    int allow_requantize, dry_run, json, quiet, search_fork;
    int simulate;           /* --simulate: converted tensors written as dequantized values */
    tq_dtype simulate_type; /* ... of this float type (f32 or f16) */
    long threads;
} opts;

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
        "  --threads N, --quiet\n\n"
        "IN and OUT are files (the model is mapped; a split model: its first shard).\n");
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

/* ---------------------------------------------------------- the report */

static void qt_fmt_shape(char *b, size_t n, const int64_t *ne)
{
    snprintf(b, n, "[%5" PRId64 ", %5" PRId64 ", %5" PRId64 ", %5" PRId64 "]", ne[0], ne[1], ne[2],
             ne[3]);
}

static void qt_log_line(const tq_gguf *g, const tq_quant_job *j, int64_t n, const opts *o)
{
    char shape[96];
    qt_fmt_shape(shape, sizeof shape, tq_gguf_tensor_ne(g, j->i));
    fprintf(stderr, "[%4" PRId64 "/%4" PRId64 "] %-36s - %s, type = %6s, ", j->i + 1, n,
            tq_gguf_tensor_name(g, j->i), shape, j->in_ty->name);
    if (!j->convert)
        fprintf(stderr, "%s .. size = %8.2f MiB\n", o->dry_run ? "keep" : "copying",
                j->in_bytes / 1048576.0);
    else {
        fprintf(stderr, "%s %s%s .. size = %8.2f MiB -> %8.2f MiB",
                o->dry_run ? "would convert to" : "converting to", qp_type_name(j->out),
                o->simulate ? " (simulated)" : "", j->in_bytes / 1048576.0,
                (uint64_t)(tq_gguf_tensor_nelements(g, j->i) /
                           tq_dtype_block_values((tq_dtype)j->out)) *
                    tq_dtype_block_bytes((tq_dtype)j->out) / 1048576.0);
        if (!isnan(j->rel_err)) fprintf(stderr, ", rel err %.3g", j->rel_err);
        if (j->weighted) fprintf(stderr, " (weighted %.3g)", j->wrel_err);
        if (j->fallback)
            fprintf(stderr, " [fallback: rows of %" PRId64 " are not whole blocks of %zu for %s]",
                    tq_gguf_tensor_ne(g, j->i)[0], tq_dtype_block_values((tq_dtype)j->wanted),
                    qp_type_name(j->wanted));
        fputc('\n', stderr);
    }
}

/* A string, or null where there is none. */
static json_t *text_or_null(const char *s) { return s ? json_text(s) : json_null(); }

static json_t *qt_json_tensor(const tq_gguf *g, const tq_quant_job *j, int64_t i)
{
    const int64_t *ne = tq_gguf_tensor_ne(g, i);
    json_t *t = json_object();
    json_object_set_new(t, "index", json_integer(i));
    json_object_set_new(t, "name", json_text(tq_gguf_tensor_name(g, i)));
    json_object_set_new(t, "shape", json_pack("[IIII]", (json_int_t)ne[0], (json_int_t)ne[1],
                                              (json_int_t)ne[2], (json_int_t)ne[3]));
    json_object_set_new(t, "from", json_text(j->in_ty->name));
    json_object_set_new(t, "to", json_text(j->convert ? qp_type_name(j->out) : j->in_ty->name));
    json_object_set_new(t, "written_as", json_text(j->out_ty->name));
    json_object_set_new(t, "bytes_in", json_integer((json_int_t)j->in_bytes));
    json_object_set_new(t, "bytes_out", json_integer((json_int_t)j->out_bytes));
    json_object_set_new(t, "fallback", json_boolean(j->fallback));
    json_object_set_new(t, "rel_error", json_num(j->rel_err, 6));
    json_object_set_new(t, "weighted_rel_error", json_num(j->weighted ? j->wrel_err : NAN, 6));
    return t;
}

static int qt_json_report(const tq_gguf *g, const tq_quant_job *jobs, int64_t n, const opts *o,
                          double secs, uint64_t in_b, uint64_t out_b, uint64_t weights)
{
    static const char *const own_line[] = {"tensors", "summary", NULL};
    static const char *const rows[] = {"tensors", NULL};
    json_t *doc = json_object();
    json_object_set_new(doc, "input", json_text(o->in));
    json_object_set_new(doc, "output", text_or_null(o->dry_run ? NULL : o->out));
    json_object_set_new(doc, "type", json_text(qp_type_name(o->plan.type)));
    json_object_set_new(doc, "policy", json_text(qp_policy_name(o->plan.policy)));
    json_object_set_new(doc, "simulate", json_boolean(o->simulate));
    json_object_set_new(doc, "dry_run", json_boolean(o->dry_run));
    json_object_set_new(doc, "imatrix", text_or_null(o->imatrix));
    json_t *tensors = json_array();
    int64_t nf = 0;
    int64_t nc = 0;
    for (int64_t i = 0; i < n; i++) {
        json_array_append_new(tensors, qt_json_tensor(g, &jobs[i], i));
        nf += jobs[i].fallback;
        nc += jobs[i].convert;
    }
    json_object_set_new(doc, "tensors", tensors);
    json_t *sum = json_object();
    json_object_set_new(sum, "bytes_in", json_integer((json_int_t)in_b));
    json_object_set_new(sum, "bytes_out", json_integer((json_int_t)out_b));
    json_object_set_new(sum, "bpw_in", json_num(weights ? 8.0 * in_b / weights : 0, 6));
    json_object_set_new(sum, "bpw_out", json_num(weights ? 8.0 * out_b / weights : 0, 6));
    json_object_set_new(sum, "converted", json_integer(nc));
    json_object_set_new(sum, "fallbacks", json_integer(nf));
    json_object_set_new(sum, "seconds", json_num(secs, 4));
    json_object_set_new(doc, "summary", sum);
    json_layout layout = {own_line, rows, 0};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
}

/* An imatrix that names none of the TQ tensors is worth a word. */
static void qt_imatrix_warning(const tq_gguf *g, const tq_imatrix *im, const tq_quant_job *jobs,
                               int64_t n, const opts *o)
{
    int any = 0;
    for (int64_t i = 0; i < n && !any; i++) {
        uint64_t m;
        any = jobs[i].convert && (jobs[i].out == TQ_DT_TQ4_1S || jobs[i].out == TQ_DT_TQ3_1S) &&
              tq_imatrix_get(im, tq_gguf_tensor_name(g, i), &m);
    }
    if (!any) cli_log("warning: %s has no entry for any TQ tensor of %s", o->imatrix, o->in);
}

static void qt_print_summary(const tq_quant_job *jobs, int64_t n, const opts *o, double secs,
                             uint64_t in_b, uint64_t out_b, uint64_t weights)
{
    int64_t nf = 0, nc = 0;
    for (int64_t i = 0; i < n; i++) {
        nf += jobs[i].fallback;
        nc += jobs[i].convert;
    }
    fprintf(stderr, "model size  = %10.2f MiB (%.2f BPW)\n", in_b / 1048576.0,
            weights ? 8.0 * in_b / weights : 0);
    fprintf(stderr, "quant size  = %10.2f MiB (%.2f BPW)%s\n", out_b / 1048576.0,
            weights ? 8.0 * out_b / weights : 0,
            o->simulate ? ", simulated: written as dequantized values" : "");
    fprintf(stderr,
            "tensors     = %" PRId64 " converted, %" PRId64 " kept, %" PRId64 " fallback%s\n", nc,
            n - nc, nf, nf == 1 ? "" : "s");
    if (!o->dry_run)
        fprintf(stderr, "time        = %.2f s, %.1f MB/s of input\n", secs,
                secs > 0 ? in_b / secs / 1e6 : 0.0);
}

/* What the command reports as the model is written. */
typedef struct quant_run {
    const tq_gguf *g;
    const opts *o;
    progress pr;
} quant_run;

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    progress_update(&((quant_run *)user)->pr, done, total, "bytes");
}

static void show_tensor(void *user, const tq_quant_job *j)
{
    quant_run *r = user;
    if (r->o->quiet || r->o->json) return;
    progress_end(&r->pr);
    qt_log_line(r->g, j, tq_gguf_n_tensors(r->g), r->o);
}

/* The command line as the conversion's options. */
static tq_quant_options map_options(opts *o, const tq_imatrix *im, quant_run *run)
{
    tq_quant_options q = {.plan = &o->plan,
                          .in_label = o->in,
                          .imatrix_name = o->imatrix,
                          .im = im,
                          .allow_requantize = o->allow_requantize,
                          .search_fork = o->search_fork,
                          .simulate = o->simulate,
                          .simulate_type = o->simulate_type,
                          .threads = (int)o->threads,
                          .on_progress = show_progress,
                          .on_tensor = show_tensor,
                          .user = run};
    return q;
}

/* The plan (every tensor decided), then the model written unless --dry-run: 0 or an exit code. */
static int quantize(tq_ctx *ctx, const tq_gguf *g, const tq_imatrix *im, opts *o,
                    tq_quant_job *jobs, double t0)
{
    quant_run run = {.g = g, .o = o};
    tq_quant_options q = map_options(o, im, &run);
    if (tq_quant_prepare(ctx, g, &q, jobs)) return cli_lib_error(ctx);
    int64_t n = tq_gguf_n_tensors(g);
    uint64_t in_b = 0;
    uint64_t out_b = 0;
    uint64_t weights = 0;
    for (int64_t i = 0; i < n; i++) {
        in_b += jobs[i].in_bytes;
        out_b += jobs[i].out_bytes;
        weights += (uint64_t)tq_gguf_tensor_nelements(g, i);
    }
    if (im && !o->quiet) qt_imatrix_warning(g, im, jobs, n, o);
    const char *inputs[2] = {o->in, o->imatrix ? o->imatrix : o->in};
    progress_init(&run.pr, o->quiet || o->json);
    tq_status st = TQ_OK;
    if (o->dry_run) {
        for (int64_t i = 0; i < n && !o->quiet; i++) qt_log_line(g, &jobs[i], n, o);
    } else {
        st = tq_quant_execute(ctx, g, jobs, &q, o->out, inputs, 2);
    }
    progress_end(&run.pr);
    if (st) return cli_lib_error(ctx);
    double secs = cli_now() - t0;
    if (o->json) return qt_json_report(g, jobs, n, o, secs, in_b, out_b, weights);
    if (!o->quiet)
        qt_print_summary(jobs, n, o, secs, in_b, out_b, weights);
    return 0;
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
    tq_quant_job *jobs = NULL;
    tq_model model;
    if (tq_gguf_open(ctx, o.in, &o.gopt, &g) ||
        (o.imatrix && tq_imatrix_open(ctx, o.imatrix, &im)) || tq_model_read(ctx, g, &model)) {
        rc = cli_lib_error(ctx);
    } else {
        o.plan.n_layers = model.n_layer;
        tq_model_free(&model);
        int64_t n = tq_gguf_n_tensors(g);
        jobs = calloc((size_t)(n ? n : 1), sizeof *jobs);
        rc = jobs ? quantize(ctx, g, im, &o, jobs, t0) : cli_runtime_error("out of memory");
    }
    free(jobs);
    tq_imatrix_close(im);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    qp_free(&o.plan);
    return rc;
}
