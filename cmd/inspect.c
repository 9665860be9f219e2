/* inspect.c - `tq inspect FILE`: what a GGUF model holds.  The default view
 * is a summary, the metadata (long arrays abbreviated) and a tensor table;
 * --json prints the complete structure; --stats adds per-tensor statistics
 * computed on dequantized values. */
#include "cli.h"
#include "cli_opts.h"
#include "file_io.h"
#include "gguf.h"
#include "inspect.h"
#include "innerq_scales.h"
#include "io.h"
#include "kv_view.h"
#include "tqkv.h"
#include "json.h"
#include "progress.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct inspect_opts {
    const char *path;
    int json, stats, quiet, threads;
    tq_gguf_options gopt;
} inspect_opts;

void help_inspect(void)
{
    printf(
        "usage: tq inspect [--json] [--stats] [--type-profile NAME] [--threads N] [--quiet] "
        "FILE\n\n"
        "Describes a GGUF model (a split model: give its first shard), a llama.cpp state file\n"
        "(session or slot file: layout, per-layer types, bits per value) or a .tqkv snapshot\n"
        "(codecs, sizes, ratio; every checksum verified).\n\n"
        "  --json               the complete structure as JSON on stdout (see tq-inspect(1))\n"
        "  --stats              per-tensor min, max, RMS, kurtosis and the share of values beyond\n"
        "                       6 RMS, on dequantized values (f32, f16, bf16, q4_0, q4_1, q5_0, "
        "q5_1,\n"
        "                       q8_0, tq3_1s, tq4_1s)\n"
        "  --type-profile NAME  how to read tensor type ids the file does not record:\n"
        "                       69d8e4be4 (default), pr197, 010d04edc, 00910b10, 45f8a066,\n"
        "                       upstream; --fork-rev is the same option.  A state's turbo\n"
        "                       rows name the fork revision they came from where they can\n"
        "                       (turbo4: 66- or 68-byte blocks); the line 'fork revision'\n"
        "                       says which and how\n"
        "  --threads N          threads for --stats (default: all cores)\n"
        "  --quiet              no progress display\n\n"
        "FILE may be - (a pipe) or s3://bucket/key (an object: of a snapshot only the header,\n"
        "metadata and index are fetched), with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
        "AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL from the environment.\n");
}

/* ------------------------------------------------------------ stats */

typedef struct tstats {
    int have;
    double min, max, rms, kurtosis, beyond6;
    uint64_t n;
} tstats;

#define STAT_CHUNK (1u << 16) /* values per unit of work */

/* Two passes over the dequantized tensor: moments, then the count beyond
 * 6 RMS, which revisits only chunks whose largest magnitude passes that
 * threshold (rare: usually the second pass reads nothing).  Chunks are
 * combined in order, so the result is the same for any thread count. */
static int tensor_stats(const void *data, const tq_ggml_type *ty, int64_t nel, int threads,
                        tstats *out)
{
    memset(out, 0, sizeof *out);
    if (ty->dtype < 0 || nel <= 0) return 0;
    uint64_t chunk = STAT_CHUNK - STAT_CHUNK % ty->block;
    if (!chunk) chunk = ty->block;
    uint64_t nchunks = ((uint64_t)nel + chunk - 1) / chunk;
    tq_moments *mo = malloc(nchunks * sizeof *mo);
    uint64_t *beyond = calloc(nchunks, sizeof *beyond);
    int failed = !mo || !beyond;
    float thr = 0;
    for (int pass = 0; pass < 2 && !failed; pass++) {
#pragma omp parallel num_threads(threads)
        {
            float *buf = malloc(chunk * sizeof(float));
            tq_ctx *ctx = tq_ctx_new();
            if (!buf || !ctx)
                failed = 1;
            else
                tq_ctx_set_threads(ctx, 1);
#pragma omp for schedule(dynamic, 4)
            for (uint64_t c = 0; c < nchunks; c++) {
                if (failed) continue;
                if (pass == 1 && fmax(-mo[c].min, mo[c].max) <= thr) continue;
                uint64_t v0 = c * chunk,
                         m = (uint64_t)nel - v0 < chunk ? (uint64_t)nel - v0 : chunk;
                const uint8_t *src = (const uint8_t *)data + v0 / ty->block * ty->bytes;
                if (tq_dequantize(ctx, (tq_dtype)ty->dtype, src, m, buf)) {
                    failed = 1;
                    continue;
                }
                if (pass == 0) {
                    tq_moments_init(&mo[c]);
                    tq_moments_add(&mo[c], buf, m);
                } else {
                    beyond[c] = tq_count_beyond(buf, m, thr);
                }
            }
            free(buf);
            tq_ctx_free(ctx);
        }
        if (pass == 0 && !failed) {
            tq_moments all;
            tq_moments_init(&all);
            for (uint64_t c = 0; c < nchunks; c++) tq_moments_merge(&all, &mo[c]);
            tq_moments_summary(&all, NULL, &out->rms, &out->kurtosis);
            out->min = all.min;
            out->max = all.max;
            thr = (float)(6.0 * out->rms);
        }
    }
    uint64_t b = 0;
    for (uint64_t c = 0; !failed && c < nchunks; c++) b += beyond[c];
    free(mo);
    free(beyond);
    if (failed) return -1;
    out->beyond6 = (double)b / (double)nel;
    out->have = 1;
    out->n = (uint64_t)nel;
    return 0;
}

/* ------------------------------------------------------------ printing */

/* v in steps of `step` with the units' names (5 of them), fmt for a scaled
 * value: "%.2f %s" (sizes) or "%.1f%s" (counts); whole units as "%.0f". */
static void human(double v, double step, const char *const *u, const char *fmt, const char *whole,
                  char *out, size_t n)
{
    int i = 0;
    while (v >= step && i < 4) {
        v /= step;
        i++;
    }
    snprintf(out, n, i ? fmt : whole, v, u[i]);
}

static void human_size(double b, char *out, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    human(b, 1024, u, "%.2f %s", "%.0f %s", out, n);
}

static void human_count(double v, char *out, size_t n)
{
    static const char *const u[] = {"", "K", "M", "B", "T"};
    human(v, 1000, u, "%.1f%s", "%.0f%s", out, n);
}

/* one element of a KV, as text (strings quoted, escapes visible) */
static void print_elem(FILE *f, const tq_gguf *g, int64_t i, uint64_t j, int json)
{
    tq_gguf_type t =
        tq_gguf_kv_type(g, i) == TQ_GGUF_ARRAY ? tq_gguf_kv_arr_type(g, i) : tq_gguf_kv_type(g, i);
    int64_t iv;
    uint64_t uv, len;
    double dv;
    if (t == TQ_GGUF_STRING) {
        const char *s = tq_gguf_kv_get_str(g, i, j, &len);
        if (json)
            json_str(f, s, len);
        else {
            uint64_t show = len > 60 ? 60 : len;
            fputc('\'', f);
            for (uint64_t k = 0; k < show; k++) {
                unsigned char c = (unsigned char)s[k];
                if (c < 0x20 || c == 0x7f)
                    fprintf(f, "\\x%02x", c);
                else
                    fputc(c, f);
            }
            fputs(show < len ? "'..." : "'", f);
        }
    } else if (t == TQ_GGUF_BOOL) {
        tq_gguf_kv_get_int(g, i, j, &iv);
        fputs(iv ? "true" : "false", f);
    } else if (t == TQ_GGUF_FLOAT32 || t == TQ_GGUF_FLOAT64) {
        tq_gguf_kv_get_float(g, i, j, &dv);
        if (json)
            json_double(f, dv, t == TQ_GGUF_FLOAT32 ? 9 : 17);
        else
            fprintf(f, "%g", dv);
    } else if (t == TQ_GGUF_UINT64) {
        tq_gguf_kv_get_uint(g, i, j, &uv);
        fprintf(f, "%" PRIu64, uv);
    } else {
        tq_gguf_kv_get_int(g, i, j, &iv);
        fprintf(f, "%" PRId64, iv);
    }
}

typedef struct type_sum {
    const char *name;
    int64_t tensors;
    double weights, bytes;
} type_sum;

static int summarize_types(const tq_gguf *g, type_sum *ts, int max)
{
    int n = 0;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const char *name = tq_gguf_tensor_type(g, i)->name;
        int k = 0;
        while (k < n && strcmp(ts[k].name, name)) k++;
        if (k == n) {
            if (n == max) continue;
            ts[n++] = (type_sum){name, 0, 0, 0};
        }
        ts[k].tensors++;
        ts[k].weights += (double)tq_gguf_tensor_nelements(g, i);
        ts[k].bytes += (double)tq_gguf_tensor_nbytes(g, i);
    }
    return n;
}

static const char *profile_source(const tq_gguf *g, const inspect_opts *o)
{
    if (tq_gguf_find_key(g, "tq.type_profile") >= 0) return "file";
    if (o->gopt.profile_explicit) return "option";
    return tq_gguf_profile_assumed(g) ? "assumed" : "default";
}

/* A SCALES.gguf of calibrate-innerq: each layer's range of K and V scales. */
static void print_innerq(const char *path)
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
            float lo = INFINITY, hi = 0;
            for (uint32_t h = 0; h < s.n_head; h++)
                for (uint32_t j = 0; j < s.head_dim; j++) {
                    float x = tq_innerq_set_at(&s, l, v, h)[j];
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                }
            printf(" %s %.3g..%.3g", v ? "V" : "K", lo, hi);
        }
        printf("\n");
    }
    tq_innerq_set_free(&s);
    tq_ctx_free(ctx);
}

/* The metadata, a key a line (arrays: their first six values). */
static void print_human_keys(const tq_gguf *g)
{
    printf("\nmetadata (%" PRId64 " keys):\n", tq_gguf_n_kv(g));
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        tq_gguf_type t = tq_gguf_kv_type(g, i);
        if (t == TQ_GGUF_ARRAY) {
            uint64_t n = tq_gguf_kv_count(g, i);
            printf("  %-40s [%s] x%" PRIu64 " = [", tq_gguf_kv_key(g, i),
                   tq_gguf_type_name(tq_gguf_kv_arr_type(g, i)), n);
            for (uint64_t j = 0; j < n && j < 6; j++) {
                if (j) printf(", ");
                print_elem(stdout, g, i, j, 0);
            }
            printf(n > 6 ? ", ...]\n" : "]\n");
        } else {
            printf("  %-40s %-8s = ", tq_gguf_kv_key(g, i), tq_gguf_type_name(t));
            print_elem(stdout, g, i, 0, 0);
            printf("\n");
        }
    }
}

/* The tensor table, with --stats their statistics. */
static void print_human_tensors(const tq_gguf *g, const tstats *st)
{
    printf("\ntensors (%" PRId64 "):\n", tq_gguf_n_tensors(g));
    printf("  %5s %-34s %-26s %-7s %12s %12s", "index", "name", "shape", "type", "bytes", "offset");
    if (st) printf(" %11s %11s %10s %8s %8s", "min", "max", "rms", "kurtosis", ">6rms");
    printf("\n");
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        char shape[64];
        int p = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < tq_gguf_tensor_n_dims(g, i); d++)
            p += snprintf(shape + p, sizeof shape - (size_t)p, "%s%" PRId64, d ? ", " : "", ne[d]);
        snprintf(shape + p, sizeof shape - (size_t)p, "]");
        printf("  %5" PRId64 " %-34s %-26s %-7s %12" PRIu64 " %12" PRIu64, i,
               tq_gguf_tensor_name(g, i), shape, tq_gguf_tensor_type(g, i)->name,
               tq_gguf_tensor_nbytes(g, i), tq_gguf_tensor_file_offset(g, i));
        if (st && st[i].have)
            printf(" %11.4g %11.4g %10.4g %8.3f %7.4f%%", st[i].min, st[i].max, st[i].rms,
                   st[i].kurtosis, 100 * st[i].beyond6);
        else if (st)
            printf(" %11s", "(no decoder)");
        printf("\n");
    }
}

static void print_human(const tq_gguf *g, const inspect_opts *o, const tstats *st)
{
    char a[32], b[32];
    uint64_t len;
    double params = 0, bytes = 0;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        params += (double)tq_gguf_tensor_nelements(g, i);
        bytes += (double)tq_gguf_tensor_nbytes(g, i);
    }
    human_size((double)tq_gguf_file_size(g), a, sizeof a);
    printf("file:          %s (%s, GGUF v%u, %u shard%s, alignment %u)\n", o->path, a,
           tq_gguf_version(g), tq_gguf_n_shards(g), tq_gguf_n_shards(g) > 1 ? "s" : "",
           tq_gguf_alignment(g));
    const char *arch = tq_gguf_get_str(g, "general.architecture", "(none)", &len);
    printf("architecture:  %.*s\n", (int)len, arch);
    const char *name = tq_gguf_get_str(g, "general.name", NULL, &len);
    if (name) printf("name:          %.*s\n", (int)len, name);
    human_count(params, a, sizeof a);
    printf("parameters:    %s (%.0f)\n", a, params);
    int64_t ft = tq_gguf_get_int(g, "general.file_type", -1);
    if (ft >= 0) printf("file type:     %" PRId64 " (%s)\n", ft, tq_gguf_file_type_name(ft));
    printf("tensors:       %" PRId64 "\n", tq_gguf_n_tensors(g));
    human_size(bytes, a, sizeof a);
    printf("tensor data:   %s, %.3f bits per weight\n", a, params > 0 ? 8 * bytes / params : 0.0);
    type_sum ts[64];
    int nts = summarize_types(g, ts, 64);
    for (int k = 0; k < nts; k++) {
        human_size(ts[k].bytes, a, sizeof a);
        human_count(ts[k].weights, b, sizeof b);
        printf("  %-8s %5" PRId64 " tensors %10s weights %12s %7.3f bpw\n", ts[k].name,
               ts[k].tensors, b, a, ts[k].weights > 0 ? 8 * ts[k].bytes / ts[k].weights : 0.0);
    }
    printf("type ids:      profile %s (%s)\n", tq_type_profile_name(tq_gguf_profile(g)),
           profile_source(g, o));
    int prov = 0;
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++)
        if (!strncmp(tq_gguf_kv_key(g, i), "tq.", 3)) {
            if (!prov++) printf("tq provenance:\n");
            printf("  %s = ", tq_gguf_kv_key(g, i));
            print_elem(stdout, g, i, 0, 0);
            printf("\n");
        }
    const char *gt = tq_gguf_get_str(g, "general.type", "", &len);
    if (len == 9 && !memcmp(gt, "tq-innerq", 9)) print_innerq(o->path);

    print_human_keys(g);
    print_human_tensors(g, st);
}

/* The metadata as JSON objects, one a line. */
static void print_json_keys(FILE *f, const tq_gguf *g)
{
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        tq_gguf_type t = tq_gguf_kv_type(g, i);
        fprintf(f, "  {\"key\": ");
        json_cstr(f, tq_gguf_kv_key(g, i));
        fprintf(f, ", \"type\": \"%s\"", tq_gguf_type_name(t));
        if (t == TQ_GGUF_ARRAY) {
            uint64_t n = tq_gguf_kv_count(g, i);
            fprintf(f, ", \"elem_type\": \"%s\", \"count\": %" PRIu64 ", \"value\": [",
                    tq_gguf_type_name(tq_gguf_kv_arr_type(g, i)), n);
            for (uint64_t j = 0; j < n; j++) {
                if (j) fputs(", ", f);
                print_elem(f, g, i, j, 1);
            }
            fputc(']', f);
        } else {
            fprintf(f, ", \"value\": ");
            print_elem(f, g, i, 0, 1);
        }
        fprintf(f, "}%s\n", i + 1 < tq_gguf_n_kv(g) ? "," : "");
    }
}

/* The tensors as JSON objects, one a line, with --stats their statistics. */
static void print_json_tensors(FILE *f, const tq_gguf *g, const tstats *st)
{
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        fprintf(f, "  {\"index\": %" PRId64 ", \"name\": ", i);
        json_cstr(f, tq_gguf_tensor_name(g, i));
        fprintf(f, ", \"shape\": [");
        for (uint32_t d = 0; d < tq_gguf_tensor_n_dims(g, i); d++)
            fprintf(f, "%s%" PRId64, d ? ", " : "", ne[d]);
        fprintf(f,
                "], \"type\": \"%s\", \"type_id\": %d, \"bytes\": %" PRIu64 ", \"offset\": %" PRIu64
                ", \"file_offset\": %" PRIu64 ", \"shard\": %u",
                tq_gguf_tensor_type(g, i)->name, tq_gguf_tensor_type_id(g, i),
                tq_gguf_tensor_nbytes(g, i), tq_gguf_tensor_offset(g, i),
                tq_gguf_tensor_file_offset(g, i), tq_gguf_tensor_shard(g, i));
        if (st && st[i].have) {
            fprintf(f, ", \"stats\": {\"min\": ");
            json_double(f, st[i].min, 9);
            fprintf(f, ", \"max\": ");
            json_double(f, st[i].max, 9);
            fprintf(f, ", \"rms\": ");
            json_double(f, st[i].rms, 9);
            fprintf(f, ", \"kurtosis\": ");
            json_double(f, st[i].kurtosis, 9);
            fprintf(f, ", \"beyond_6rms\": ");
            json_double(f, st[i].beyond6, 9);
            fprintf(f, "}");
        }
        fprintf(f, "}%s\n", i + 1 < tq_gguf_n_tensors(g) ? "," : "");
    }
}

static void print_json(const tq_gguf *g, const inspect_opts *o, const tstats *st)
{
    FILE *f = stdout;
    double params = 0, bytes = 0;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        params += (double)tq_gguf_tensor_nelements(g, i);
        bytes += (double)tq_gguf_tensor_nbytes(g, i);
    }
    fprintf(f, "{\"file\": ");
    json_cstr(f, o->path);
    fprintf(f,
            ", \"format\": \"gguf\", \"version\": %u, \"alignment\": %u, \"data_offset\": %" PRIu64
            ", \"file_size\": %" PRIu64 ",\n \"shards\": [",
            tq_gguf_version(g), tq_gguf_alignment(g), tq_gguf_data_offset(g), tq_gguf_file_size(g));
    for (uint32_t s = 0; s < tq_gguf_n_shards(g); s++) {
        if (s) fprintf(f, ", ");
        json_cstr(f, tq_gguf_shard_path(g, s));
    }
    fprintf(f, "],\n \"type_profile\": {\"name\": \"%s\", \"source\": \"%s\"},\n",
            tq_type_profile_name(tq_gguf_profile(g)), profile_source(g, o));
    fprintf(f, " \"summary\": {\"parameters\": %.0f, \"tensor_bytes\": %.0f, \"bits_per_weight\": ",
            params, bytes);
    json_double(f, params > 0 ? 8 * bytes / params : 0, 6);
    fprintf(f, ", \"by_type\": {");
    type_sum ts[64];
    int nts = summarize_types(g, ts, 64);
    for (int k = 0; k < nts; k++) {
        fprintf(f,
                "%s\"%s\": {\"tensors\": %" PRId64
                ", \"weights\": %.0f, \"bytes\": %.0f, \"bits_per_weight\": ",
                k ? ", " : "", ts[k].name, ts[k].tensors, ts[k].weights, ts[k].bytes);
        json_double(f, ts[k].weights > 0 ? 8 * ts[k].bytes / ts[k].weights : 0, 6);
        fprintf(f, "}");
    }
    fprintf(f, "}},\n \"metadata\": [\n");
    print_json_keys(f, g);
    fprintf(f, " ],\n \"tensors\": [\n");
    print_json_tensors(f, g, st);
    fprintf(f, " ]\n}\n");
}

static int parse(int argc, char **argv, inspect_opts *o)
{
    cli_common c;
    const cli_opt own[] = {CLI_OPT_FLAG("--stats", &o->stats), {NULL}};
    const cli_spec spec = {"inspect", CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_PROFILE, own, 1};
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, &o->path, &n);
    if (rc) return rc;
    if (!o->path) return cli_usage_error("which file? (see tq help inspect)");
    o->json = c.json;
    o->quiet = c.quiet;
    o->threads = (int)c.threads;
    o->gopt = cli_gguf_options(&c);
    return 0;
}

/* The first bytes of the input, for the readers to bid on: a file's, or a pipe's or an object's
 * through *src (opened: the bytes stay to be read). */
static int peek(tq_ctx *ctx, const char *name, tq_src **src, unsigned char *magic, size_t *nm)
{
    uint64_t got = 0;
    *src = NULL;
    if (!tq_io_is_stream(name)) {
        FILE *mf = fopen(name, "rb");
        if (mf) {
            *nm = fread(magic, 1, 16, mf);
            fclose(mf);
        }
        return 0;
    }
    if (tq_src_open(ctx, name, src) || tq_src_peek(ctx, *src, magic, 16, &got)) {
        tq_src_close(*src);
        *src = NULL;
        return cli_lib_error(ctx);
    }
    *nm = (size_t)got;
    return 0;
}

/* A pipe's or an object's copy removed; rc passed through. */
static int unlink_copy(char *tmp, int rc)
{
    if (tmp) unlink(tmp);
    tq_temp_forget(tmp);
    free(tmp);
    return rc;
}

/* --stats: each tensor's statistics, measured in parallel; 0 or an exit code. */
static int gguf_stats(tq_ctx *ctx, tq_gguf *g, const inspect_opts *o, tstats **out)
{
    int rc = 0;
    int64_t n = tq_gguf_n_tensors(g);
    tstats *st = calloc((size_t)(n ? n : 1), sizeof *st);
    progress pr;
    progress_init(&pr, o->quiet);
    double t0 = cli_now(), bytes = 0;
    int threads = o->threads ? o->threads : tq_ctx_threads(ctx);
    for (int64_t i = 0; st && i < n; i++) {
        progress_update(&pr, (uint64_t)i, (uint64_t)n, tq_gguf_tensor_name(g, i));
        if (tensor_stats(tq_gguf_tensor_data(g, i), tq_gguf_tensor_type(g, i),
                         tq_gguf_tensor_nelements(g, i), threads, &st[i])) {
            rc = cli_runtime_error("%s: tensor '%s': statistics failed", o->path,
                                   tq_gguf_tensor_name(g, i));
            break;
        }
        if (st[i].have) bytes += (double)tq_gguf_tensor_nbytes(g, i);
    }
    progress_end(&pr);
    double dt = cli_now() - t0;
    if (!o->quiet && !rc)
        cli_log("stats over %.1f MB of tensor data in %.2f s (%.2f GB/s, %d threads)",
                bytes / 1e6, dt, dt > 0 ? bytes / dt / 1e9 : 0.0, threads);
    *out = st;
    return rc;
}

int cmd_inspect(int argc, char **argv)
{
    inspect_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    /* what kind of file: the KV sources and the snapshot reader judge the
     * first bytes; anything else goes to the GGUF reader */
    unsigned char magic[16] = {0};
    size_t nm = 0;
    tq_src *src = NULL;
    char *tmp = NULL;
    const char *path = o.path;
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) return cli_runtime_error("out of memory");
    if ((rc = peek(ctx, o.path, &src, magic, &nm))) {
        tq_ctx_free(ctx);
        return rc;
    }
    if (tqkv_is_snapshot(magic, nm)) {
        tq_ctx_free(ctx);
        if (o.stats) {
            tq_src_close(src);
            return cli_usage_error("--stats is for GGUF models");
        }
        return inspect_snapshot(o.path, src, o.json);
    }
    /* anything else from a pipe or an object is read from a copy: a state or a model's */
    if (src && nm >= 4 && !tq_kv_view_probe(magic, nm) && memcmp(magic, "GGUF", 4))
        rc = cli_runtime_error("%s: not a state, snapshot or GGUF model (its first bytes are no "
                               "magic tq knows)",
                               o.path);
    if (!rc && src && tq_src_spool(ctx, src, NULL, &tmp)) rc = cli_lib_error(ctx);
    tq_src_close(src);
    if (tmp) path = tmp;
    if (!rc && nm >= 4 && tq_kv_view_probe(magic, nm)) {
        tq_type_profile kv_prof = TQ_PROFILE_AUTO; /* told from the bytes unless given */
        if (o.gopt.profile_explicit) kv_prof = o.gopt.profile;
        rc = o.stats ? cli_usage_error("--stats is for GGUF models")
                     : inspect_state(path, o.path, o.json, kv_prof);
        tq_ctx_free(ctx);
        return unlink_copy(tmp, rc);
    }
    tq_gguf *g;
    if (rc || tq_gguf_open(ctx, path, &o.gopt, &g)) {
        rc = rc ? rc : cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return unlink_copy(tmp, rc);
    }
    unlink_copy(tmp, 0); /* mapped: the bytes stay while it is open */
    if (tq_gguf_profile_assumed(g))
        cli_log("%s: warning: type ids 41 and up differ between ggml revisions and the file "
                "records none; read with profile %s (choose with --type-profile)",
                o.path, tq_type_profile_name(tq_gguf_profile(g)));
    tstats *st = NULL;
    if (o.stats) rc = gguf_stats(ctx, g, &o, &st);
    if (!rc) {
        if (o.json)
            print_json(g, &o, st);
        else
            print_human(g, &o, st);
        if (fflush(stdout)) rc = cli_runtime_error("writing to stdout failed");
    }
    free(st);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return rc;
}
