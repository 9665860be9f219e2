/* inspect.c - `tq inspect FILE`: what a GGUF model, a llama.cpp state or a .tqkv snapshot
 * holds, as a summary and tables or (--json) the complete structure.  A model: metadata and
 * tensors, with --stats each tensor's statistics (formats/gguf/gguf_stats.h); a state: layout
 * and per-layer types; a snapshot: every record's coding, its checksums verified. */
#include "cli.h"
#include "cli_opts.h"
#include "file_io.h"
#include "gguf.h"
#include "gguf_stats.h"
#include "innerq_scales.h"
#include "io.h"
#include "kv_plan.h"
#include "kv_view.h"
#include "seal.h"
#include "tqkv.h"
#include "json.h"
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct inspect_opts {
    const char *path;
    int json, stats, quiet, threads;
    tq_gguf_options gopt;
} inspect_opts;

void help_inspect(void)
{
    printf(
        "usage: tq inspect [--json] [--stats] [--type-profile NAME] [--threads N] [--quiet]\n"
        "                  [--key-file KEY]... FILE\n\n"
        "Describes a GGUF model (a split model: give its first shard), a llama.cpp state file\n"
        "(session or slot file: layout, per-layer types, bits per value) or a .tqkv snapshot\n"
        "(codecs, sizes, ratio; every checksum verified).\n\n"
        "  --json               the complete structure as JSON on stdout (see tq-inspect(1))\n"
        "  --stats              per-tensor min, max, RMS, kurtosis and the share beyond 6 RMS of\n"
        "                       the dequantized values (every type tq decodes)\n"
        "  --type-profile NAME  how to read type ids a file does not record (--fork-rev: same;\n"
        "                       a state's turbo rows tell theirs where they can), a revision:\n");
    cli_help_revisions("                      ", "                       ", 0);
    printf(
        "  --threads N          threads for --stats (default: all cores)\n"
        "  --quiet              no progress display\n"
        "  --key-file KEY       a sealed snapshot's key (TQ_KEY_FILE: the same); without it, its\n"
        "                       key id alone is shown\n\n"
        "FILE may be - (a pipe) or s3://bucket/key (an object: of a snapshot only the header,\n"
        "metadata and index are fetched), with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
        "AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL from the environment.\n");
}

/* The library's message for what failed, ctx freed: the exit code. */
static int lib_failed(tq_ctx *ctx)
{
    int rc = cli_lib_error(ctx);
    tq_ctx_free(ctx);
    return rc;
}

/* One element of a KV: printed on `text` where it is given (escapes visible, floats as %g),
 * else returned as a JSON value (a float as the digits that give back its type's value, 9 for
 * FLOAT32 and 17 for FLOAT64; a UINT64 past INT64_MAX a real: jansson's integers are signed). */
static json_t *elem(const tq_gguf *g, int64_t i, uint64_t j, FILE *text)
{
    tq_gguf_type t =
        tq_gguf_kv_type(g, i) == TQ_GGUF_ARRAY ? tq_gguf_kv_arr_type(g, i) : tq_gguf_kv_type(g, i);
    int64_t iv = 0;
    uint64_t uv = 0, len = 0;
    double dv = 0;
    const char *s = NULL;
    if (t == TQ_GGUF_STRING) s = tq_gguf_kv_get_str(g, i, j, &len);
    int is_float = t == TQ_GGUF_FLOAT32 || t == TQ_GGUF_FLOAT64;
    if (is_float) tq_gguf_kv_get_float(g, i, j, &dv);
    if (t == TQ_GGUF_UINT64) tq_gguf_kv_get_uint(g, i, j, &uv);
    if (!s && !is_float && t != TQ_GGUF_UINT64) tq_gguf_kv_get_int(g, i, j, &iv);
    if (text && s) cli_print_visible(text, s, len, 60);
    else if (text && is_float) fprintf(text, "%g", dv);
    else if (text && t == TQ_GGUF_UINT64) fprintf(text, "%" PRIu64, uv);
    else if (text && t == TQ_GGUF_BOOL) fputs(iv ? "true" : "false", text);
    else if (text) fprintf(text, "%" PRId64, iv);
    if (text) return NULL;
    if (s) return json_textn(s, len);
    if (is_float) return json_num(dv, t == TQ_GGUF_FLOAT32 ? 9 : 17);
    if (t == TQ_GGUF_UINT64 && uv > (uint64_t)INT64_MAX) return json_real((double)uv);
    if (t == TQ_GGUF_UINT64) return json_integer((json_int_t)uv);
    return t == TQ_GGUF_BOOL ? json_boolean(iv) : json_integer((json_int_t)iv);
}

/* The metadata, a key a line (arrays: their first six values). */
static void print_keys(FILE *f, const tq_gguf *g)
{
    fprintf(f, "\nmetadata (%" PRId64 " keys):\n", tq_gguf_n_kv(g));
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        tq_gguf_type t = tq_gguf_kv_type(g, i);
        int arr = t == TQ_GGUF_ARRAY;
        uint64_t n = arr ? tq_gguf_kv_count(g, i) : 1;
        uint64_t shown = n <= 6 ? n : 6;
        if (arr)
            fprintf(f, "  %-40s [%s] x%" PRIu64 " = [", tq_gguf_kv_key(g, i),
                    tq_gguf_type_name(tq_gguf_kv_arr_type(g, i)), n);
        else
            fprintf(f, "  %-40s %-8s = ", tq_gguf_kv_key(g, i), tq_gguf_type_name(t));
        for (uint64_t j = 0; j < shown; j++) {
            if (j) fputs(", ", f);
            elem(g, i, j, f);
        }
        if (arr) fputs(n > 6 ? ", ...]" : "]", f);
        fputc('\n', f);
    }
}

/* The metadata as --json rows: a key an object, an array's every value. */
static json_t *keys_json(const tq_gguf *g)
{
    json_t *rows = json_array();
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        tq_gguf_type t = tq_gguf_kv_type(g, i);
        json_t *row = json_object();
        json_object_set_new(row, "key", json_text(tq_gguf_kv_key(g, i)));
        json_object_set_new(row, "type", json_string(tq_gguf_type_name(t)));
        if (t == TQ_GGUF_ARRAY) {
            uint64_t n = tq_gguf_kv_count(g, i);
            json_t *values = json_array();
            for (uint64_t j = 0; j < n; j++) json_array_append_new(values, elem(g, i, j, NULL));
            json_object_set_new(row, "elem_type",
                                json_string(tq_gguf_type_name(tq_gguf_kv_arr_type(g, i))));
            json_object_set_new(row, "count", json_integer((json_int_t)n));
            json_object_set_new(row, "value", values);
        } else {
            json_object_set_new(row, "value", elem(g, i, 0, NULL));
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

/* A tensor's shape as both reports write it: "[4096, 4096]". */
static void shape_text(const tq_gguf *g, int64_t i, char *shape, size_t n)
{
    const int64_t *ne = tq_gguf_tensor_ne(g, i);
    int p = snprintf(shape, n, "[");
    for (uint32_t d = 0; d < tq_gguf_tensor_n_dims(g, i); d++)
        p += snprintf(shape + p, n - (size_t)p, "%s%" PRId64, d ? ", " : "", ne[d]);
    snprintf(shape + p, n - (size_t)p, "]");
}

/* The tensor table, with --stats their statistics. */
static void print_human_tensors(const tq_gguf *g, const tq_gguf_stats *st)
{
    printf("\ntensors (%" PRId64 "):\n", tq_gguf_n_tensors(g));
    printf("  %5s %-34s %-26s %-7s %12s %12s", "index", "name", "shape", "type", "bytes", "offset");
    if (st) printf(" %11s %11s %10s %8s %8s", "min", "max", "rms", "kurtosis", ">6rms");
    printf("\n");
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        char shape[64];
        shape_text(g, i, shape, sizeof shape);
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

static void print_human(const tq_gguf *g, const inspect_opts *o, const tq_gguf_stats *st)
{
    char a[32], b[32];
    uint64_t len;
    tq_gguf_totals tt;
    tq_gguf_totals_of(g, &tt);
    double params = tt.weights;
    cli_human_size((double)tq_gguf_file_size(g), a, sizeof a);
    printf("file:          %s (%s, GGUF v%u, %u shard%s, alignment %u)\n", o->path, a,
           tq_gguf_version(g), tq_gguf_n_shards(g), tq_gguf_n_shards(g) > 1 ? "s" : "",
           tq_gguf_alignment(g));
    const char *arch = tq_gguf_get_str(g, "general.architecture", "(none)", &len);
    printf("architecture:  %.*s\n", (int)len, arch);
    const char *name = tq_gguf_get_str(g, "general.name", NULL, &len);
    if (name) printf("name:          %.*s\n", (int)len, name);
    cli_human_count(params, a, sizeof a);
    printf("parameters:    %s (%.0f)\n", a, params);
    int64_t ft = tq_gguf_get_int(g, "general.file_type", -1);
    if (ft >= 0) printf("file type:     %" PRId64 " (%s)\n", ft, tq_gguf_file_type_name(ft));
    printf("tensors:       %" PRId64 "\n", tq_gguf_n_tensors(g));
    cli_human_size(tt.bytes, a, sizeof a);
    double bpw = params > 0 ? 8 * tt.bytes / params : 0.0;
    printf("tensor data:   %s, %.3f bits per weight\n", a, bpw);
    const tq_gguf_type_total *ts = tt.by_type;
    for (int k = 0; k < tt.n_types; k++) {
        cli_human_size(ts[k].bytes, a, sizeof a);
        cli_human_count(ts[k].weights, b, sizeof b);
        printf("  %-8s %5" PRId64 " tensors %10s weights %12s %7.3f bpw\n", ts[k].name,
               ts[k].tensors, b, a, ts[k].weights > 0 ? 8 * ts[k].bytes / ts[k].weights : 0.0);
    }
    printf("type ids:      profile %s (%s)\n", tq_type_profile_name(tq_gguf_profile(g)),
           tq_gguf_profile_source(g, o->gopt.profile_explicit));
    int prov = 0;
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++)
        if (!strncmp(tq_gguf_kv_key(g, i), "tq.", 3)) {
            if (!prov++) printf("tq provenance:\n");
            printf("  %s = ", tq_gguf_kv_key(g, i));
            elem(g, i, 0, stdout);
            printf("\n");
        }
    if (tq_innerq_is_scales(g)) print_innerq_scales(o->path);
    print_keys(stdout, g);
    print_human_tensors(g, st);
}

/* The tensors as --json rows, with --stats their statistics. */
static json_t *tensors_json(const tq_gguf *g, const tq_gguf_stats *st)
{
    static const char *const stat_names[] = {"min", "max", "rms", "kurtosis", "beyond_6rms"};
    json_t *rows = json_array();
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        json_t *shape = json_array();
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        for (uint32_t d = 0; d < tq_gguf_tensor_n_dims(g, i); d++)
            json_array_append_new(shape, json_integer((json_int_t)ne[d]));
        json_t *row = json_pack(
            "{s:I, s:o, s:o, s:s, s:i, s:I, s:I, s:I, s:i}", "index", (json_int_t)i, "name",
            json_text(tq_gguf_tensor_name(g, i)), "shape", shape, "type",
            tq_gguf_tensor_type(g, i)->name, "type_id", tq_gguf_tensor_type_id(g, i), "bytes",
            (json_int_t)tq_gguf_tensor_nbytes(g, i), "offset",
            (json_int_t)tq_gguf_tensor_offset(g, i), "file_offset",
            (json_int_t)tq_gguf_tensor_file_offset(g, i), "shard", (int)tq_gguf_tensor_shard(g, i));
        if (st && st[i].have) {
            const double v[] = {st[i].min, st[i].max, st[i].rms, st[i].kurtosis, st[i].beyond6};
            json_t *stats = json_object();
            for (int k = 0; k < 5; k++)
                json_object_set_new(stats, stat_names[k], json_num(v[k], 9));
            json_object_set_new(row, "stats", stats);
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

/* The model's totals: parameters, bytes and bits per weight, by type. */
static json_t *summary_json(const tq_gguf *g)
{
    tq_gguf_totals tt;
    tq_gguf_totals_of(g, &tt);
    json_t *by_type = json_object();
    for (int k = 0; k < tt.n_types; k++) {
        const tq_gguf_type_total *t = &tt.by_type[k];
        json_object_set_new(by_type, t->name,
                            json_pack("{s:I, s:o, s:o, s:o}", "tensors", (json_int_t)t->tensors,
                                      "weights", json_num(t->weights, 17), "bytes",
                                      json_num(t->bytes, 17), "bits_per_weight",
                                      json_num(t->weights > 0 ? 8 * t->bytes / t->weights : 0, 6)));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "parameters", json_num(tt.weights, 17),
                     "tensor_bytes", json_num(tt.bytes, 17), "bits_per_weight",
                     json_num(tt.weights > 0 ? 8 * tt.bytes / tt.weights : 0, 6), "by_type",
                     by_type);
}

/* A model as --json writes it (tq's one JSON writer). */
static int print_json(const tq_gguf *g, const inspect_opts *o, const tq_gguf_stats *st)
{
    static const char *const own_line[] = {"shards", "type_profile", "summary",
                                           "metadata", "tensors", NULL};
    json_t *shards = json_array();
    for (uint32_t s = 0; s < tq_gguf_n_shards(g); s++)
        json_array_append_new(shards, json_text(tq_gguf_shard_path(g, s)));
    json_t *doc = json_pack(
        "{s:o, s:s, s:i, s:i, s:I, s:I, s:o, s:{s:s, s:s}, s:o, s:o, s:o}", "file",
        json_text(o->path), "format", "gguf", "version", (int)tq_gguf_version(g), "alignment",
        (int)tq_gguf_alignment(g), "data_offset", (json_int_t)tq_gguf_data_offset(g), "file_size",
        (json_int_t)tq_gguf_file_size(g), "shards", shards, "type_profile", "name",
        tq_type_profile_name(tq_gguf_profile(g)), "source",
        tq_gguf_profile_source(g, o->gopt.profile_explicit), "summary", summary_json(g),
        "metadata", keys_json(g), "tensors", tensors_json(g, st));
    json_layout layout = {own_line, own_line + 3, 1};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
}

/* ---- KV states and snapshots */

/* One stream's layers: a table. */
static void print_stream(const tq_kv_stream *st, uint32_t i, uint32_t j)
{
    printf("\nKV state %u, stream %u: %u cells, v_trans %u, %u layers%s\n", i, j, st->cell_count,
           st->v_trans, st->n_layer, st->v ? "" : ", MLA (one latent a cell in K, no V)");
    if (st->cell_count)
        printf("  %5s %-8s %7s %-8s %7s %12s\n", "layer", "K type", "K width", "V type",
               "V width", "bytes");
    for (uint32_t l = 0; st->cell_count && l < st->n_layer; l++) {
        const tq_kv_tensor *kt = &st->k[l], *vt = st->v ? &st->v[l] : NULL;
        printf("  %5u %-8s %7" PRIu64 " %-8s %7" PRIu64 " %12" PRIu64 "\n", l, kt->type->name,
               kt->width, vt ? vt->type->name : "-", vt ? vt->width : 0,
               kt->bytes + (vt ? vt->bytes : 0));
    }
}

/* One stream and its layers as a --json row. */
static json_t *stream_json(const tq_kv_stream *st, uint32_t i, uint32_t j)
{
    json_t *layers = json_array();
    for (uint32_t l = 0; st->cell_count && l < st->n_layer; l++) {
        const tq_kv_tensor *kt = &st->k[l], *vt = st->v ? &st->v[l] : NULL;
        json_array_append_new(
            layers, json_pack("{s:i, s:s, s:I, s:s, s:I, s:I}", "layer", (int)l, "k_type",
                              kt->type->name, "k_width", (json_int_t)kt->width, "v_type",
                              vt ? vt->type->name : "-", "v_width",
                              (json_int_t)(vt ? vt->width : 0), "bytes",
                              (json_int_t)(kt->bytes + (vt ? vt->bytes : 0))));
    }
    return json_pack("{s:i, s:i, s:i, s:i, s:b, s:o}", "kv_state", (int)i, "stream", (int)j,
                     "cells", (int)st->cell_count, "v_trans", (int)st->v_trans, "mla", !st->v,
                     "layers", layers);
}

/* A state as --json writes it (tq's one JSON writer). */
static int state_json(const tq_kv_view *s, const char *label)
{
    static const char *const own_line[] = {"recurrent", "kv_states", NULL};
    unsigned kind = tq_kv_view_kind(s);
    const tq_kv_recurrent *r = tq_kv_view_recurrent(s);
    const char *rev = tq_type_profile_name(tq_kv_view_profile(s));
    json_t *doc = json_pack(
        "{s:o, s:s, s:s, s:i, s:I, s:i, s:o, s:b, s:b, s:s, s:I, s:I}", "file", json_text(label),
        "format", kind == TQ_KV_NUMPY ? "numpy" : "llama-state", "kind", tq_kv_kind_name(kind, 0),
        "version", (int)tq_kv_view_version(s), "size", (json_int_t)tq_kv_view_size(s), "tokens",
        (int)tq_kv_view_n_tokens(s), "architecture", json_text(tq_kv_view_arch(s)),
        "outputs_section", tq_kv_view_has_outputs(s), "mrope_extensions", tq_kv_view_has_ext(s),
        "type_profile", rev, "kv_values", (json_int_t)tq_kv_view_kv_values(s), "kv_bytes",
        (json_int_t)tq_kv_view_kv_bytes(s));
    json_object_set_new(doc, "fork_revision", json_pack("{s:s, s:o}", "name", rev, "how",
                                                        json_text(tq_kv_view_profile_how(s))));
    json_object_set_new(doc, "recurrent",
                        r ? json_pack("{s:i, s:i, s:i, s:I, s:I}", "cells", (int)r->cell_count,
                                      "layers", (int)r->n_layer, "layers_with_state",
                                      (int)(r->n_records / 2), "bytes", (json_int_t)r->len,
                                      "state_bytes", (json_int_t)r->state_bytes)
                          : json_null());
    json_t *states = json_array();
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(s, i)->n_stream; j++)
            json_array_append_new(states, stream_json(&tq_kv_view_kv(s, i)->streams[j], i, j));
    json_object_set_new(doc, "kv_states", states);
    json_layout layout = {own_line, own_line + 1, 0};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
}

/* The layout line: the memory's parts. */
static void print_layout(const tq_kv_view *s)
{
    const tq_kv_recurrent *r = tq_kv_view_recurrent(s);
    uint32_t n = tq_kv_view_n_kv(s);
    if (n)
        printf("layout:        %u KV state%s", n, n > 1 ? "s (iSWA)" : "");
    else
        printf("layout:        no KV state");
    const char *rec = "";
    if (r) rec = n ? ", then a recurrent state (hybrid)" : ", a recurrent state";
    printf("%s%s%s\n", rec, tq_kv_view_has_outputs(s) ? ", old outputs section" : "",
           tq_kv_view_has_ext(s) ? ", M-RoPE cell extensions" : "");
}

static int inspect_state(const char *path, const char *label, int json, tq_type_profile prof)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *s;
    if (tq_kv_view_open_as(ctx, path, label, prof, &s)) return lib_failed(ctx);
    int rc = json ? state_json(s, label) : 0;
    unsigned kind = tq_kv_view_kind(s);
    uint64_t vals = tq_kv_view_kv_values(s), kvb = tq_kv_view_kv_bytes(s);
    if (!json) {
        printf("file:          %s (%" PRIu64 " bytes%s, %s v%u)\n", label, tq_kv_view_size(s),
               kind == TQ_KV_NUMPY ? " as arrays" : "", tq_kv_kind_name(kind, 1),
               tq_kv_view_version(s));
        if (kind == TQ_KV_SESSION) printf("architecture:  %s\n", tq_kv_view_arch(s));
        printf("tokens:        %u\n", tq_kv_view_n_tokens(s));
        const char *how = tq_kv_view_profile_how(s);
        int none = !strncmp(how, "no turbo", 8); /* then no revision matters */
        printf("fork revision: %s (%s)\n",
               none ? "-" : tq_type_profile_name(tq_kv_view_profile(s)), how);
        print_layout(s);
        printf("K/V data:      %" PRIu64 " bytes, %" PRIu64
               " values, %.3f bits per value (%.1f%% of the file)\n",
               kvb, vals, vals ? 8.0 * (double)kvb / (double)vals : 0.0,
               100.0 * (double)kvb / (double)tq_kv_view_size(s));
        for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++)
            for (uint32_t j = 0; j < tq_kv_view_kv(s, i)->n_stream; j++)
                print_stream(&tq_kv_view_kv(s, i)->streams[j], i, j);
        const tq_kv_recurrent *r = tq_kv_view_recurrent(s); /* after the KV states */
        if (r)
            printf("\nrecurrent state: %u cell%s, %u of %u layers with a state (convolution and "
                   "state-space rows), %" PRIu64 " bytes, kept exactly\n", r->cell_count,
                   r->cell_count == 1 ? "" : "s", r->n_records / 2, r->n_layer, r->len);
    }
    tq_kv_view_close(s);
    tq_ctx_free(ctx);
    if (rc) return rc;
    return fflush(stdout) ? cli_runtime_error("writing to stdout failed") : 0;
}

/* A snapshot's header fields as the --json document's first members. */
static json_t *header_json(const tqkv_reader *r, const tqkv_meta *m, const char *path,
                           uint64_t vals, double bpv)
{
    char print[17]; /* the model's fingerprint */
    snprintf(print, sizeof print, "%016" PRIx64, m->fingerprint);
    return json_pack(
        "{s:o, s:s, s:i, s:I, s:b, s:I, s:{s:s, s:i, s:I, s:i, s:o}, s:o, s:o, s:o, s:I, s:o, s:o}",
        "file", json_text(path), "format", "tqkv", "version", tqkv_version(r), "size",
        (json_int_t)tqkv_size(r), "verified", tqkv_streamed(r) != 2, "chunks",
        (json_int_t)tqkv_n_chunks(r), "source", "kind", tq_kv_kind_name(m->source_kind, 0),
        "version", (int)m->state_version, "size", (json_int_t)m->source_size, "tokens",
        (int)m->n_tokens, "architecture", json_text(m->arch), "base",
        m->base_id ? json_text(m->base_name) : json_null(), "type_profile", json_text(m->profile),
        "model_fingerprint", m->has_fingerprint ? json_string(print) : json_null(), "kv_values",
        (json_int_t)vals, "bits_per_value", json_num(bpv, 6), "ratio",
        json_num((double)m->source_size / (double)tqkv_size(r), 6));
}

/* The snapshot's header fields as the text report's first lines. */
enum { CODEC_LEN = 160 }; /* the longest description: every attribute, a long past end */

/* The codec column: the widest description, at least 22. */
static int codec_width(const tqkv_meta *m)
{
    int w = 22;
    char codec[CODEC_LEN];
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        int n = (int)strlen(tq_kvsnap_describe(&m->t[i], TQ_DESCRIBE_TABLE, codec, sizeof codec));
        if (n > w) w = n;
    }
    return w;
}

static void header_text(const tqkv_reader *r, const tqkv_meta *m, const char *path, uint64_t vals,
                        double bpv)
{
    char chunks[64]; /* an object's chunks were not fetched */
    snprintf(chunks, sizeof chunks, tqkv_streamed(r) == 2 ? "; %" PRIu64 " chunks not read"
                                                          : ", %" PRIu64 " chunks",
             tqkv_n_chunks(r));
    printf("file:          %s (%" PRIu64 " bytes, .tqkv v%d; integrity verified: header, "
           "metadata, index%s)\n",
           path, tqkv_size(r), tqkv_version(r), chunks);
    printf("source:        %s v%u, %" PRIu64 " bytes, %u tokens%s%s\n",
           tq_kv_kind_name(m->source_kind, 1),
           m->state_version, m->source_size, m->n_tokens, m->arch[0] ? ", architecture " : "",
           m->arch);
    if (m->base_id)
        printf("appends to:    %s (id %016" PRIx64 "): cells it holds are not repeated here\n",
               m->base_name, m->base_id);
    if (m->has_fingerprint)
        printf("model:         fingerprint %016" PRIx64 "\n", m->fingerprint);
    else
        printf("model:         no fingerprint (encoded without --model)\n");
    printf("size:          %.2fx smaller than the source, %.3f bits per K/V value (%" PRIu64
           " values)\n",
           (double)m->source_size / (double)tqkv_size(r), bpv, vals);
    printf("kept exactly:  %" PRIu64 " bytes of the source that are not K/V rows (header, "
           "tokens, cell metadata, a recurrent state)\n",
           m->skeleton_len);
    int guessed = 0, mapped = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        guessed |= m->t[i].group_guessed;
        mapped |= m->t[i].model_layer != TQKV_NO_MODEL_LAYER;
    }
    if (guessed)
        printf("group:         guessed from the row width when encoded (no --model or "
               "--head-dim)\n");
    int any[2] = {0, 0}; /* the iSWA caches' model layers, K in order */
    for (uint32_t s = 0; mapped && s < 2; s++)
        for (uint32_t i = 0; i < m->n_tensors; i++) {
            const tqkv_record *t = &m->t[i];
            const char *lead = s ? "\n  cache 1 (SWA):  " : "model layers:  cache 0 (base): ";
            if (t->kv_state == s && !t->is_v && !t->stream && t->model_layer != TQKV_NO_MODEL_LAYER)
                printf("%s%u", any[s]++ ? " " : lead, t->model_layer);
        }
    if (mapped) printf("\n");
    printf("\n  %5s %6s %3s %-8s %-*s %6s %12s %8s\n", "state", "layer", "kv", "type",
           codec_width(m), "codec", "cells", "stored", "bits/val");
}

/* A record's element type, as the snapshot's revision numbers it (NULL: none known). */
static const tq_ggml_type *record_type(const tqkv_meta *m, const tqkv_record *t)
{
    tq_type_profile p = TQ_PROFILE_DEFAULT;
    tq_type_profile_parse(m->profile, &p);
    return tq_ggml_type_get(p, t->type_id);
}

/* One record: its coding and what its chunks take (stored bytes), a table row. */
static void record_row(const tqkv_meta *m, uint32_t i, uint64_t stored)
{
    const tqkv_record *t = &m->t[i];
    char codec[CODEC_LEN];
    tq_kvsnap_describe(t, TQ_DESCRIBE_TABLE, codec, sizeof codec);
    const tq_ggml_type *ty = record_type(m, t);
    double b = 8.0 * (double)stored / (double)(t->width * t->cells);
    printf("  %5u %6u %3s %-8s %-*s %6u %12" PRIu64 " %8.3f\n", t->kv_state, t->layer,
           t->is_v ? "V" : "K", ty ? ty->name : "?", codec_width(m), codec, t->cells, stored, b);
}

/* an integer member where it is present (jansson's "o*" leaves a NULL out) */
static json_t *present(int have, json_int_t v) { return have ? json_integer(v) : NULL; }

/* One record as a --json row: the attributes it has, then its coding and stored bytes. */
static json_t *record_json(const tqkv_meta *m, uint32_t i, uint64_t stored)
{
    const tqkv_record *t = &m->t[i];
    const tq_ggml_type *ty = record_type(m, t);
    double b = 8.0 * (double)stored / (double)(t->width * t->cells);
    json_int_t comps = (json_int_t)tqkv_klt_components(t); /* the heads' coded components */
    json_t *rope = !t->rope_pos ? NULL
                                : json_pack("{s:i, s:o, s:o}", "n_rot", (int)t->rope.n_rot,
                                            "freq_base", json_num(t->rope.freq_base, 6),
                                            "freq_scale", json_num(t->rope.freq_scale, 6));
    /* past_*: cells past a sliding window, rows below the end, coarser; hadamard: the source's
     * rotation block (llama.cpp's quantized caches) */
    return json_pack(
        "{s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*,"
        " s:i, s:i, s:i, s:s, s:s, s:s, s:i, s:i, s:b, s:i, s:I, s:I, s:o}",
        "model_layer", present(t->model_layer != TQKV_NO_MODEL_LAYER, t->model_layer),
        "group_guessed", t->group_guessed ? json_true() : NULL, "sink_rows",
        present(t->sink_rows != 0, t->sink_rows), "offset", t->offset ? json_true() : NULL,
        "planes", t->planes ? json_true() : NULL, "uniform", t->uniform ? json_true() : NULL,
        "components", present(t->klt != NULL, comps), "basis_bytes",
        present(t->klt != NULL, 2 * comps * t->group),
        "past_end", present(t->coarse_end != 0, t->coarse_end), "past_bits",
        present(t->coarse_end != 0, t->coarse_bits), "past_step_scale",
        t->coarse_end ? json_num(t->coarse_scale, 6) : NULL, "hadamard",
        present(t->hadamard != 0, t->hadamard), "offset_rope", rope,
        "kv_state", (int)t->kv_state, "stream", (int)t->stream, "layer", (int)t->layer, "kv",
        t->is_v ? "V" : "K", "type", ty ? ty->name : "?", "codec", tqkv_codec_family(t->codec),
        "group", (int)t->group, "bits", (int)t->bits, "innerq", t->innerq, "cells",
        (int)t->cells, "width", (json_int_t)t->width, "stored_bytes", (json_int_t)stored,
        "bits_per_value", json_decimals(b, 4));
}

/* head: the first 16 bytes (a sealed snapshot's key id among them). */
static int inspect_snapshot(const char *path, struct tq_src *src, const uint8_t *head, int json)
{
    char id[17] = "";
    if (tq_seal_is_sealed(head, 16)) tq_seal_key_id_hex(head + 8, id);
    if (*id && !tq_seal_keys_current()) tq_src_close(src);
    if (*id && !tq_seal_keys_current()) return cli_show_sealed(path, head, json);
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    /* a pipe is read to its end (every chunk verified); an object's header, metadata and
     * index alone are fetched */
    tq_status st = src ? tqkv_open_src(ctx, src, &r) : tqkv_open(ctx, path, &r);
    if (!st && src && (st = tqkv_finish(ctx, r))) tqkv_close(r);
    if (st) return lib_failed(ctx);
    const tqkv_meta *m = tqkv_meta_of(r);
    uint64_t vals = tqkv_meta_values(m);
    double bpv = vals ? 8.0 * (double)tqkv_size(r) / (double)vals : 0.0;
    int rc = 0;
    if (json) {
        static const char *const own_line[] = {"tensors", NULL};
        json_t *doc = header_json(r, m, path, vals, bpv);
        json_t *rows = json_array();
        for (uint32_t i = 0; i < m->n_tensors; i++)
            json_array_append_new(rows, record_json(m, i, tqkv_record_stored(r, i)));
        json_object_set_new(doc, "tensors", rows);
        if (*id) json_object_set_new(doc, "sealed", json_true());
        if (*id) json_object_set_new(doc, "key_id", json_string(id));
        json_layout layout = {own_line, own_line, 0};
        if (json_write_report(stdout, doc, &layout)) rc = cli_runtime_error("stdout: write failed");
    } else {
        header_text(r, m, path, vals, bpv);
        for (uint32_t i = 0; i < m->n_tensors; i++) record_row(m, i, tqkv_record_stored(r, i));
        if (*id) printf("sealed:        AES-256-GCM, key id %s\n", id);
    }
    tqkv_close(r);
    tq_ctx_free(ctx);
    if (!rc && fflush(stdout)) rc = cli_runtime_error("writing to stdout failed");
    return rc;
}

static int parse(int argc, char **argv, inspect_opts *o)
{
    cli_common c;
    const cli_opt own[] = {CLI_OPT_FLAG("--stats", &o->stats), {NULL}};
    const cli_spec spec = {"inspect", CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_PROFILE | CLI_KEY,
                           own, 1};
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, &o->path, &n);
    if (rc) return rc;
    if (!o->path) return cli_usage_error("which file? (see tq help inspect)");
    o->json = c.json;
    o->quiet = c.quiet;
    o->threads = (int)c.threads;
    o->gopt = cli_gguf_options(&c);
    return 0;
}

static void show_tensor(void *user, int64_t i, int64_t n, const char *name)
{
    progress_update(user, (uint64_t)i, (uint64_t)n, name);
}

/* --stats: each tensor's statistics, measured in parallel; 0 or an exit code. */
static int gguf_stats(tq_ctx *ctx, tq_gguf *g, const inspect_opts *o, tq_gguf_stats **out)
{
    int64_t n = tq_gguf_n_tensors(g);
    tq_gguf_stats *st = calloc((size_t)(n ? n : 1), sizeof *st); /* [n] */
    *out = st;
    if (!st) return cli_runtime_error("out of memory");
    progress pr;
    progress_init(&pr, o->quiet);
    double t0 = cli_now();
    double bytes;
    int threads = o->threads ? o->threads : tq_ctx_threads(ctx);
    tq_status failed = tq_gguf_stats_all(ctx, g, threads, st, &bytes, show_tensor, &pr);
    progress_end(&pr);
    double dt = cli_now() - t0;
    if (failed) return cli_runtime_error("%s: %s", o->path, tq_ctx_error(ctx));
    if (!o->quiet)
        cli_log("stats over %.1f MB of tensor data in %.2f s (%.2f GB/s, %d threads)",
                bytes / 1e6, dt, dt > 0 ? bytes / dt / 1e9 : 0.0, threads);
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    inspect_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    /* what kind of file: the KV sources and the snapshot reader judge the
     * first bytes; anything else goes to the GGUF reader */
    unsigned char magic[16] = {0};
    uint64_t nm = 0; /* magic's bytes read */
    tq_src *src = NULL;
    char *tmp = NULL;
    const char *path = o.path;
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) return cli_runtime_error("out of memory");
    if (tq_io_peek(ctx, o.path, &src, magic, sizeof magic, &nm)) return lib_failed(ctx);
    if (tqkv_is_snapshot(magic, nm) || (nm == sizeof magic && tq_seal_is_sealed(magic, nm))) {
        tq_ctx_free(ctx);
        if (o.stats) {
            tq_src_close(src);
            return cli_usage_error("--stats is for GGUF models");
        }
        return inspect_snapshot(o.path, src, magic, o.json);
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
        tq_temp_discard(tmp);
        return rc;
    }
    tq_gguf *g = NULL;
    if (!rc && tq_gguf_open(ctx, path, &o.gopt, &g)) rc = cli_lib_error(ctx);
    tq_temp_discard(tmp); /* mapped: the bytes stay while it is open */
    if (rc) {
        tq_ctx_free(ctx);
        return rc;
    }
    if (tq_gguf_profile_assumed(g))
        cli_log("%s: warning: type ids 41 and up differ between ggml revisions and the file "
                "records none; read with profile %s (choose with --type-profile)",
                o.path, tq_type_profile_name(tq_gguf_profile(g)));
    tq_gguf_stats *st = NULL;
    if (o.stats) rc = gguf_stats(ctx, g, &o, &st);
    if (!rc) {
        if (o.json)
            rc = print_json(g, &o, st);
        else
            print_human(g, &o, st);
        if (!rc && fflush(stdout)) rc = cli_runtime_error("writing to stdout failed");
    }
    free(st);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return rc;
}
