/* decode_kvdump.c - `tq decode-kvdump`: a .tqkv snapshot back into the
 * llama.cpp state file it came from.  Every checksum is verified before the
 * first output byte. */
#include "cli.h"
#include "gguf.h"
#include "file_io.h"
#include "kv_numpy.h"
#include "kv_snapshot.h"
#include "output.h"
#include "progress.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void help_decode_kvdump(void)
{
    printf("usage: tq decode-kvdump IN.tqkv -o OUT [--format ggsn|ggsq|npz] [--tokens N] [--layers A-B]\n"
           "                        [--cache-type T] [--model M.gguf | --head-dim N] [--base B.tqkv]\n"
           "                        [--threads N] [--quiet]\n\n"
           "Rebuilds the state file the snapshot was made from, in its original layout (session or\n"
           "sequence file, per-layer element types, V layout), for llama.cpp to load; a NumPy dump\n"
           "comes back as an .npz with its own array names, shapes and dtypes.\n\n"
           "  --format F       ggsn (session file), ggsq (sequence file: what llama-server's slot\n"
           "                   restore reads) or npz (arrays tokens, k_L, v_L); default: the source's\n"
           "  --tokens N       only the first N tokens (the cells at positions below N): a prompt\n"
           "                   prefix, decoded without the rest of the snapshot\n"
           "  --layers A-B     only layers A..B (with --format npz)\n"
           "  --cache-type T   write every K/V tensor as f32, f16, bf16, or the fork's turbo2/3/4 (heads\n"
           "                   padded to 128s as the fork allocates them: needs --model or --head-dim),\n"
           "                   for a context created with that cache type (default: the original types)\n"
           "  --model M.gguf   refuse unless the snapshot was made for this model (its architecture\n"
           "                   names a session file made from a sequence file; its head size shapes npz)\n"
           "  --base B.tqkv    the snapshot an appended one builds on (default: its recorded name,\n"
           "                   next to IN)\n"
           "  -o -             write to stdout\n");
}

static void show_progress(void *user, uint64_t done, uint64_t total) { progress_update(user, done, total, "K/V bytes"); }

static const char *const format_names[] = {"ggsn", "ggsq", "npz"}; /* indexed by tq_kv_kind */

/* What the output is beyond a plain rebuild of the source. */
typedef struct reshape {
    int format;           /* tq_kv_kind of the output */
    long tokens;          /* 0: all */
    long layer_lo, layer_hi;
    int has_layers;
    const char *arch;     /* from --model */
    uint32_t head_dim;
} reshape;

/* The snapshot decoded into a temporary file (a state file, or a NumPy image)
 * and opened as a KV view, then written as asked.  The temporary file sits
 * beside the output, or in $TMPDIR for stdout, and is gone before we return. */
static tq_status decode_reshaped(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                                 tq_kvsnap_decode_options *dopt, const reshape *rs, const char *out_path, FILE *out)
{
    char *tmp = NULL, where[4096];
    FILE *tf;
    const char *dir = getenv("TMPDIR");
    if (!strcmp(out_path, "-")) snprintf(where, sizeof where, "%s/tq-decode", dir && *dir ? dir : "/tmp");
    else snprintf(where, sizeof where, "%s", out_path);
    tq_kv_view *s = NULL;
    tq_status st;
    for (;;) {
        if ((st = tq_temp_create(ctx, where, &tmp, &tf))) return st;
        st = tq_kvsnap_decode(ctx, r, base, dopt, tf);
        if (fflush(tf) && !st) st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed", tmp);
        if (!st) st = tq_kv_open(ctx, tmp, TQ_PROFILE_DEFAULT, &s);
        unlink(tmp); /* the mapping stays valid, and an unlinked file is not synced */
        fclose(tf);
        free(tmp);
        if (st) return st;
        /* rows past the prefix were left out on the guess that cell i holds
         * at most position i (one sequence, as after a prompt): check it */
        int fits = 1;
        for (uint32_t i = 0; dopt->max_rows && i < tq_kv_view_n_kv(s); i++)
            for (uint32_t j = 0; j < tq_kv_view_kv(s, i)->n_stream; j++) {
                uint32_t n;
                const tq_kv_stream *sr = &tq_kv_view_kv(s, i)->streams[j];
                if (sr->cell_count && !tq_kv_stream_prefix(ctx, s, sr, dopt->max_rows, &n, NULL) && n > dopt->max_rows)
                    fits = 0;
            }
        if (fits) break;
        tq_kv_close(s);
        s = NULL;
        dopt->max_rows = 0; /* several sequences share positions: decode all */
    }
    if (rs->format == TQ_KV_NUMPY) {
        tq_npz_options no = {(uint32_t)rs->tokens, rs->has_layers ? (uint32_t)rs->layer_lo : 0,
                             rs->has_layers ? (uint32_t)rs->layer_hi : UINT32_MAX, rs->head_dim};
        st = tq_npz_write(ctx, s, &no, out);
    } else {
        tq_state_rewrite ro = {(tq_kv_kind)rs->format, rs->arch, (uint32_t)rs->tokens};
        st = tq_llama_state_write(ctx, s, &ro, out);
    }
    tq_kv_close(s);
    return st;
}

int cmd_decode_kvdump(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *model = NULL, *cache_type = NULL, *base_path = NULL, *format = NULL;
    long threads = 0, hd = 0;
    int quiet = 0;
    reshape rs = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) quiet = 1;
        else if ((v = cli_opt_value(argc, argv, &i, "-o")) || (v = cli_opt_value(argc, argv, &i, "--output"))) {
            if (!*v) return TQ_EXIT_USAGE;
            out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--head-dim"))) {
            if (!*v || cli_parse_long("--head-dim", v, 1, 4096, &hd)) return TQ_EXIT_USAGE;
        } else if ((v = cli_opt_value(argc, argv, &i, "--base"))) {
            if (!*v) return TQ_EXIT_USAGE;
            base_path = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--cache-type"))) {
            if (!*v) return TQ_EXIT_USAGE;
            cache_type = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--model"))) {
            if (!*v) return TQ_EXIT_USAGE;
            model = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--format"))) {
            if (!*v) return TQ_EXIT_USAGE;
            format = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--tokens"))) {
            if (!*v || cli_parse_long("--tokens", v, 1, INT32_MAX, &rs.tokens)) return TQ_EXIT_USAGE;
        } else if ((v = cli_opt_value(argc, argv, &i, "--layers"))) {
            if (!*v) return TQ_EXIT_USAGE;
            char *end;
            rs.layer_lo = strtol(v, &end, 10);
            rs.layer_hi = *end == '-' ? strtol(end + 1, &end, 10) : rs.layer_lo;
            if (*end || end == v || rs.layer_lo < 0 || rs.layer_hi < rs.layer_lo || rs.layer_hi > 65535)
                return cli_usage_error("--layers: '%s' is not a layer range A-B (0-based, A <= B)", v);
            rs.has_layers = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--threads"))) {
            if (!*v || cli_parse_long("--threads", v, 0, 4096, &threads)) return TQ_EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("unknown option '%s' (see tq help decode-kvdump)", argv[i]);
        } else if (in) {
            return cli_usage_error("one input at a time ('%s' and '%s')", in, argv[i]);
        } else {
            in = argv[i];
        }
    }
    if (!in) return cli_usage_error("which snapshot? (see tq help decode-kvdump)");
    if (!out) return cli_usage_error("where to? give -o OUT (or -o - for stdout)");
    rs.format = -1;
    for (int f = 0; format && f < 3; f++)
        if (!strcmp(format, format_names[f])) rs.format = f;
    if (format && rs.format < 0) return cli_usage_error("--format: '%s' is not ggsn, ggsq or npz", format);
    if (rs.has_layers && rs.format != TQ_KV_NUMPY && !(rs.format < 0))
        return cli_usage_error("--layers: a llama.cpp state file holds every layer; use it with --format npz");
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    int rc = 0;
    if (tqkv_open(ctx, in, &r)) {
        rc = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return rc;
    }
    const tqkv_meta *m = tqkv_meta_of(r);
    if (rs.format < 0) rs.format = m->source_kind;
    if (rs.has_layers && rs.format != TQ_KV_NUMPY) {
        tqkv_close(r);
        tq_ctx_free(ctx);
        return cli_usage_error("--layers: a llama.cpp state file holds every layer; use it with --format npz");
    }
    tqkv_reader *base = NULL;
    char found[4096];
    if (m->base_id) { /* an appended snapshot: its base, from --base or beside it */
        if (!base_path) {
            const char *slash = strrchr(in, '/');
            snprintf(found, sizeof found, "%.*s%s", slash ? (int)(slash - in + 1) : 0, in, m->base_name);
            base_path = found;
        }
        if (tqkv_open(ctx, base_path, &base)) rc = cli_lib_error(ctx);
    }
    uint32_t head_dim = (uint32_t)hd;
    char arch[257] = "";
    if (!rc && model) {
        tq_gguf *g;
        if (tq_gguf_open(ctx, model, NULL, &g)) rc = cli_lib_error(ctx);
        else {
            if (!head_dim) head_dim = tq_model_head_dim(g, 0);
            uint64_t alen = 0;
            const char *a = tq_gguf_get_str(g, "general.architecture", "", &alen);
            snprintf(arch, sizeof arch, "%.*s", (int)(alen < 256 ? alen : 256), a);
            uint64_t fp = tq_model_fingerprint(g);
            if (!m->has_fingerprint)
                rc = cli_runtime_error("%s: the snapshot carries no model fingerprint (encoded without --model)", in);
            else if (fp != m->fingerprint)
                rc = cli_runtime_error("%s: made for another model (fingerprint %016llx, %s has %016llx)", in,
                                       (unsigned long long)m->fingerprint, model, (unsigned long long)fp);
            tq_gguf_close(g);
        }
    }
    rs.arch = arch;
    rs.head_dim = head_dim;
    /* the source as it was: streamed straight out; anything else goes
     * through a temporary file */
    int plain = rs.format == m->source_kind && m->source_kind != TQKV_SOURCE_NUMPY && !rs.tokens;
    cli_out o;
    const char *inputs[3] = {in, model ? model : in, base_path ? base_path : in};
    if (!rc && !(rc = cli_out_open(&o, out, inputs, 3))) {
        double t0 = cli_now();
        progress pr;
        progress_init(&pr, quiet);
        tq_kvsnap_decode_options dopt = {.threads = (int)threads, .cache_type = cache_type, .head_dim = head_dim,
                                         .progress = show_progress, .progress_user = &pr};
        /* chunks past a token prefix are not decoded; NumPy rows are tokens,
         * and in state files the prefix's cells come first (checked when
         * writing) */
        dopt.max_rows = (uint32_t)rs.tokens;
        if (rs.has_layers) dopt.layer_lo = (uint32_t)rs.layer_lo, dopt.layer_hi = (uint32_t)rs.layer_hi + 1;
        tq_status dst = plain ? tq_kvsnap_decode(ctx, r, base, &dopt, o.f)
                              : decode_reshaped(ctx, r, base, &dopt, &rs, out, o.f);
        progress_end(&pr);
        if (dst) {
            rc = cli_runtime_error("%s: %s", in, tq_ctx_error(ctx));
            cli_out_abort(&o);
        } else if (!(rc = cli_out_commit(&o)) && !quiet) {
            static const char *const what[] = {"session file", "sequence file", "NumPy .npz"};
            fprintf(stderr, "tq decode-kvdump: %s: %u tokens, %.2f MB snapshot -> %s %s in %.2f s\n", in,
                    rs.tokens && (uint32_t)rs.tokens < m->n_tokens ? (uint32_t)rs.tokens : m->n_tokens,
                    tqkv_size(r) / 1e6, strcmp(out, "-") ? out : "stdout", what[rs.format], cli_now() - t0);
        }
    }
    tqkv_close(base);
    tqkv_close(r);
    tq_ctx_free(ctx);
    return rc;
}
