/* inspect_kv.c - `tq inspect` for llama.cpp state files and .tqkv snapshots:
 * layout, per-layer types and sizes, bits per value, and (for snapshots)
 * the codec of every tensor after verifying every checksum. */
#include "cli.h"
#include "inspect.h"
#include "kv_plan.h"
#include "json.h"
#include "llama_state.h"
#include "tqkv.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* indexed by tq_kv_kind and by the snapshot's source kind alike */
static const char *kind_name(unsigned k)
{
    static const char *const names[] = {"session", "sequence", "numpy"};
    return names[k < 2 ? k : 2];
}
/* a record's codec family, as --json names it */
static const char *codec_family(unsigned codec)
{
    static const char *const names[] = {
        [TQKV_CODEC_RAW] = "raw",     [TQKV_CODEC_TQ] = "tq",     [TQKV_CODEC_TURBO] = "turbo",
        [TQKV_CODEC_ANGLE] = "angle", [TQKV_CODEC_PROD] = "prod",   [TQKV_CODEC_KLT] = "klt",
    };
    if (codec >= sizeof names / sizeof *names || !names[codec]) return "tq";
    return names[codec];
}

static const char *kind_long(unsigned k)
{
    static const char *const names[] = {"llama.cpp session file", "llama.cpp sequence file",
                                        "NumPy K/V dump"};
    return names[k < 2 ? k : 2];
}

/* One stream's layers: a table, or its --json object (first: no comma before it). */
static void print_stream(const tq_kv_stream *st, uint32_t i, uint32_t j, int json, int first)
{
    if (json) {
        printf("%s\n  {\"kv_state\": %u, \"stream\": %u, \"cells\": %u, \"v_trans\": %u, "
               "\"mla\": %s, \"layers\": [",
               first ? "" : ",", i, j, st->cell_count, st->v_trans, st->v ? "false" : "true");
    } else {
        printf("\nKV state %u, stream %u: %u cells, v_trans %u, %u layers%s\n", i, j,
               st->cell_count, st->v_trans, st->n_layer,
               st->v ? "" : ", MLA (one latent a cell in K, no V)");
        if (st->cell_count)
            printf("  %5s %-8s %7s %-8s %7s %12s\n", "layer", "K type", "K width", "V type",
                   "V width", "bytes");
    }
    for (uint32_t l = 0; st->cell_count && l < st->n_layer; l++) {
        const tq_kv_tensor *kt = &st->k[l], *vt = st->v ? &st->v[l] : NULL;
        const char *vname = vt ? vt->type->name : "-";
        uint64_t vw = vt ? vt->width : 0, bytes = kt->bytes + (vt ? vt->bytes : 0);
        if (json)
            printf("%s{\"layer\": %u, \"k_type\": \"%s\", \"k_width\": %" PRIu64
                   ", \"v_type\": \"%s\", \"v_width\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                   l ? ", " : "", l, kt->type->name, kt->width, vname, vw, bytes);
        else
            printf("  %5u %-8s %7" PRIu64 " %-8s %7" PRIu64 " %12" PRIu64 "\n", l,
                   kt->type->name, kt->width, vname, vw, bytes);
    }
    if (json) printf("]}");
}

/* The recurrent memory's state, after the KV states: a line, or its --json member. */
static void print_recurrent(const tq_kv_view *s, int json)
{
    const tq_kv_recurrent *r = tq_kv_view_recurrent(s);
    if (json && !r) {
        printf(",\n \"recurrent\": null");
        return;
    }
    if (!r) return;
    if (json) {
        printf(",\n \"recurrent\": {\"cells\": %u, \"layers\": %u, \"layers_with_state\": %u, "
               "\"bytes\": %" PRIu64 ", \"state_bytes\": %" PRIu64 "}",
               r->cell_count, r->n_layer, r->n_records / 2, r->len, r->state_bytes);
        return;
    }
    printf("\nrecurrent state: %u cell%s, %u of %u layers with a state (convolution and "
           "state-space rows), %" PRIu64 " bytes, kept exactly\n",
           r->cell_count, r->cell_count == 1 ? "" : "s", r->n_records / 2, r->n_layer, r->len);
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

int inspect_state(const char *path, const char *label, int json, tq_type_profile prof)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *s;
    if (tq_kv_view_open_as(ctx, path, label, prof, &s)) {
        int rc = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return rc;
    }
    unsigned kind = tq_kv_view_kind(s);
    int session = kind == TQ_KV_SESSION;
    uint64_t vals = tq_kv_view_kv_values(s), kvb = tq_kv_view_kv_bytes(s);
    if (json) {
        printf("{\"file\": ");
        json_cstr(stdout, label);
        printf(", \"format\": \"%s\", \"kind\": \"%s\", \"version\": %u, \"size\": %" PRIu64
               ", \"tokens\": %u, \"architecture\": ",
               kind == TQ_KV_NUMPY ? "numpy" : "llama-state", kind_name(kind),
               tq_kv_view_version(s), tq_kv_view_size(s), tq_kv_view_n_tokens(s));
        json_cstr(stdout, tq_kv_view_arch(s));
        printf(", \"outputs_section\": %s, \"mrope_extensions\": %s, \"type_profile\": \"%s\", "
               "\"kv_values\": %" PRIu64 ", \"kv_bytes\": %" PRIu64,
               tq_kv_view_has_outputs(s) ? "true" : "false",
               tq_kv_view_has_ext(s) ? "true" : "false",
               tq_type_profile_name(tq_kv_view_profile(s)), vals, kvb);
        printf(", \"fork_revision\": {\"name\": \"%s\", \"how\": ",
               tq_type_profile_name(tq_kv_view_profile(s)));
        json_cstr(stdout, tq_kv_view_profile_how(s));
        printf("}");
        print_recurrent(s, 1);
        printf(",\n \"kv_states\": [");
    } else {
        printf("file:          %s (%" PRIu64 " bytes%s, %s v%u)\n", label, tq_kv_view_size(s),
               kind == TQ_KV_NUMPY ? " as arrays" : "", kind_long(kind), tq_kv_view_version(s));
        if (session) printf("architecture:  %s\n", tq_kv_view_arch(s));
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
    }
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++) {
        const tq_kv_state *k = tq_kv_view_kv(s, i);
        for (uint32_t j = 0; j < k->n_stream; j++)
            print_stream(&k->streams[j], i, j, json, !(i + j));
    }
    if (json) printf("\n ]}\n");
    if (!json) print_recurrent(s, 0);
    tq_kv_view_close(s);
    tq_ctx_free(ctx);
    return fflush(stdout) ? cli_runtime_error("writing to stdout failed") : 0;
}

/* The snapshot's header fields as the start of the --json object. */
static void header_json(const tqkv_reader *r, const tqkv_meta *m, const char *path, uint64_t vals,
                        double bpv)
{
    printf("{\"file\": ");
    json_cstr(stdout, path);
    printf(", \"format\": \"tqkv\", \"version\": %d, \"size\": %" PRIu64
           ", \"verified\": %s, \"chunks\": %" PRIu64
           ", \"source\": {\"kind\": \"%s\", \"version\": %u, \"size\": %" PRIu64
           ", \"tokens\": %u, \"architecture\": ",
           tqkv_version(r), tqkv_size(r), tqkv_streamed(r) == 2 ? "false" : "true",
           tqkv_n_chunks(r), kind_name(m->source_kind),
           m->state_version, m->source_size, m->n_tokens);
    json_cstr(stdout, m->arch);
    printf("}, \"base\": ");
    if (m->base_id) {
        json_cstr(stdout, m->base_name);
    } else {
        printf("null");
    }
    printf(", \"type_profile\": \"%s\", \"model_fingerprint\": ", m->profile);
    if (m->has_fingerprint)
        printf("\"%016" PRIx64 "\"", m->fingerprint);
    else
        printf("null");
    printf(", \"kv_values\": %" PRIu64 ", \"bits_per_value\": ", vals);
    json_double(stdout, bpv, 6);
    printf(", \"ratio\": ");
    json_double(stdout, (double)m->source_size / (double)tqkv_size(r), 6);
    printf(",\n \"tensors\": [\n");
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
    if (tqkv_streamed(r) == 2) /* an object: its chunks were not fetched */
        printf("file:          %s (%" PRIu64 " bytes, .tqkv v%d; integrity verified: header, "
               "metadata, index; %" PRIu64 " chunks not read)\n",
               path, tqkv_size(r), tqkv_version(r), tqkv_n_chunks(r));
    else
        printf("file:          %s (%" PRIu64 " bytes, .tqkv v%d; integrity verified: header, "
               "metadata, index, %" PRIu64 " chunks)\n",
               path, tqkv_size(r), tqkv_version(r), tqkv_n_chunks(r));
    printf("source:        %s v%u, %" PRIu64 " bytes, %u tokens%s%s\n", kind_long(m->source_kind),
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
    for (uint32_t s = 0; mapped && s < 2;
         s++) { /* the iSWA caches' model layers, K records in order */
        int any = 0;
        for (uint32_t i = 0; i < m->n_tensors; i++) {
            const tqkv_record *t = &m->t[i];
            if (t->kv_state != s || t->is_v || t->stream || t->model_layer == TQKV_NO_MODEL_LAYER)
                continue;
            const char *lead = s ? "\n  cache 1 (SWA):  " : "model layers:  cache 0 (base): ";
            printf("%s%u", any++ ? " " : lead, t->model_layer);
        }
        if (s == 1) printf("\n");
    }
    printf("\n  %5s %6s %3s %-8s %-*s %6s %12s %8s\n", "state", "layer", "kv", "type",
           codec_width(m), "codec", "cells", "stored", "bits/val");
}

/* One record: its coding and what its chunks take (stored bytes). */
static void record_row(const tqkv_meta *m, uint32_t i, uint64_t stored, int json)
{
    const tqkv_record *t = &m->t[i];
    char codec[CODEC_LEN];
    tq_kvsnap_describe(t, TQ_DESCRIBE_TABLE, codec, sizeof codec);
    tq_type_profile p = TQ_PROFILE_DEFAULT;
    tq_type_profile_parse(m->profile, &p);
    const tq_ggml_type *ty = tq_ggml_type_get(p, t->type_id);
    double b = 8.0 * (double)stored / (double)(t->width * t->cells);
    if (json) printf("  {");
    if (json && t->model_layer != TQKV_NO_MODEL_LAYER)
        printf("\"model_layer\": %u, ", t->model_layer);
    if (json && t->group_guessed) printf("\"group_guessed\": true, ");
    if (json && t->sink_rows) printf("\"sink_rows\": %u, ", t->sink_rows);
    if (json && t->offset) printf("\"offset\": true, ");
    if (json && t->planes) printf("\"planes\": true, ");
    if (json && t->uniform) printf("\"uniform\": true, ");
    if (json && t->klt) /* the heads' coded components and their stored bases */
        printf("\"components\": %" PRIu64 ", \"basis_bytes\": %" PRIu64 ", ",
               tqkv_klt_components(t), 2 * tqkv_klt_components(t) * t->group);
    if (json && t->coarse_end) /* cells past a sliding window: rows below the end, coarser */
        printf("\"past_end\": %u, \"past_bits\": %u, \"past_step_scale\": %g, ", t->coarse_end,
               t->coarse_bits, (double)t->coarse_scale);
    if (json && t->hadamard) /* the source's rotation block (llama.cpp's quantized caches) */
        printf("\"hadamard\": %u, ", t->hadamard);
    if (json && t->rope_pos)
        printf("\"offset_rope\": {\"n_rot\": %u, \"freq_base\": %g, \"freq_scale\": %g}, ",
               t->rope.n_rot, t->rope.freq_base, t->rope.freq_scale);
    if (json)
        printf("\"kv_state\": %u, \"stream\": %u, \"layer\": %u, \"kv\": \"%s\", \"type\": "
               "\"%s\", \"codec\": \"%s\", \"group\": %u, "
               "\"bits\": %u, \"innerq\": %s, \"cells\": %u, \"width\": %" PRIu64
               ", \"stored_bytes\": %" PRIu64 ", \"bits_per_value\": %.4f}%s\n",
               t->kv_state, t->stream, t->layer, t->is_v ? "V" : "K", ty ? ty->name : "?",
               codec_family(t->codec), t->group, t->bits, t->innerq ? "true" : "false", t->cells,
               t->width, stored, b, i + 1 < m->n_tensors ? "," : "");
    else
        printf("  %5u %6u %3s %-8s %-*s %6u %12" PRIu64 " %8.3f\n", t->kv_state, t->layer,
               t->is_v ? "V" : "K", ty ? ty->name : "?", codec_width(m), codec, t->cells, stored,
               b);
}

int inspect_snapshot(const char *path, struct tq_src *src, int json)
{
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    /* a pipe is read to its end (every chunk verified); an object's header, metadata and
     * index alone are fetched */
    tq_status st = src ? tqkv_open_src(ctx, src, &r) : tqkv_open(ctx, path, &r);
    if (!st && src && (st = tqkv_finish(ctx, r))) tqkv_close(r);
    if (st) {
        int rc = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return rc;
    }
    const tqkv_meta *m = tqkv_meta_of(r);
    uint64_t vals = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) vals += m->t[i].width * m->t[i].cells;
    double bpv = vals ? 8.0 * (double)tqkv_size(r) / (double)vals : 0.0;
    if (json)
        header_json(r, m, path, vals, bpv);
    else
        header_text(r, m, path, vals, bpv);
    uint64_t ck = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        uint64_t stored = 0; /* the record's chunks with their 44-byte headers */
        while (ck < tqkv_n_chunks(r) && tqkv_chunk_at(r, ck)->tensor == i)
            stored += tqkv_chunk_at(r, ck++)->stored_len + 44;
        record_row(m, i, stored, json);
    }
    if (json) printf(" ]}\n");
    tqkv_close(r);
    tq_ctx_free(ctx);
    return fflush(stdout) ? cli_runtime_error("writing to stdout failed") : 0;
}
