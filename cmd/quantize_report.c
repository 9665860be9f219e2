/* quantize_report.c - what quantize-tq4 says: a line a tensor (llama-quantize's), the JSON
 * report, the summary (quantize_tq4.h). */
#include "cli.h"
#include "json.h"
#include "quantize_tq4.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

void qt_fmt_shape(char *b, size_t n, const int64_t *ne)
{
    snprintf(b, n, "[%5" PRId64 ", %5" PRId64 ", %5" PRId64 ", %5" PRId64 "]", ne[0], ne[1], ne[2],
             ne[3]);
}

void qt_log_line(const tq_gguf *g, const tjob *j, int64_t n, const opts *o)
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

void qt_json_report(const tq_gguf *g, const tjob *jobs, int64_t n, const opts *o, double secs,
                    uint64_t in_b, uint64_t out_b, uint64_t weights)
{
    printf("{\"input\": ");
    json_cstr(stdout, o->in);
    printf(", \"output\": ");
    if (o->out && !o->dry_run)
        json_cstr(stdout, o->out);
    else
        printf("null");
    printf(
        ", \"type\": \"%s\", \"policy\": \"%s\", \"simulate\": %s, \"dry_run\": %s, \"imatrix\": ",
        qp_type_name(o->plan.type), qp_policy_name(o->plan.policy), o->simulate ? "true" : "false",
        o->dry_run ? "true" : "false");
    if (o->imatrix)
        json_cstr(stdout, o->imatrix);
    else
        printf("null");
    printf(",\n \"tensors\": [");
    for (int64_t i = 0; i < n; i++) {
        const tjob *j = &jobs[i];
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        printf("%s\n  {\"index\": %" PRId64 ", \"name\": ", i ? "," : "", i);
        json_cstr(stdout, tq_gguf_tensor_name(g, i));
        printf(", \"shape\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
               "], \"from\": \"%s\", \"to\": \"%s\", "
               "\"written_as\": \"%s\", \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64
               ", \"fallback\": %s, \"rel_error\": ",
               ne[0], ne[1], ne[2], ne[3], j->in_ty->name,
               j->convert ? qp_type_name(j->out) : j->in_ty->name, j->out_ty->name, j->in_bytes,
               j->out_bytes, j->fallback ? "true" : "false");
        json_double(stdout, j->rel_err, 6);
        printf(", \"weighted_rel_error\": ");
        json_double(stdout, j->weighted ? j->wrel_err : NAN, 6);
        printf("}");
    }
    printf("\n ],\n \"summary\": {\"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64
           ", \"bpw_in\": ",
           in_b, out_b);
    json_double(stdout, weights ? 8.0 * in_b / weights : 0, 6);
    printf(", \"bpw_out\": ");
    json_double(stdout, weights ? 8.0 * out_b / weights : 0, 6);
    int64_t nf = 0, nc = 0;
    for (int64_t i = 0; i < n; i++) {
        nf += jobs[i].fallback;
        nc += jobs[i].convert;
    }
    printf(", \"converted\": %" PRId64 ", \"fallbacks\": %" PRId64 ", \"seconds\": ", nc, nf);
    json_double(stdout, secs, 4);
    printf("}}\n");
}

/* An imatrix that names none of the TQ tensors is worth a word. */
void qt_imatrix_warning(const tq_gguf *g, const tq_imatrix *im, const tjob *jobs, int64_t n,
                        const opts *o)
{
    int any = 0;
    for (int64_t i = 0; i < n && !any; i++) {
        uint64_t m;
        any = jobs[i].convert && (jobs[i].out == TQ_DT_TQ4_1S || jobs[i].out == TQ_DT_TQ3_1S) &&
              tq_imatrix_get(im, tq_gguf_tensor_name(g, i), &m);
    }
    if (!any) cli_log("warning: %s has no entry for any TQ tensor of %s", o->imatrix, o->in);
}

void qt_print_summary(const tjob *jobs, int64_t n, const opts *o, double secs, uint64_t in_b,
                      uint64_t out_b, uint64_t weights)
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
