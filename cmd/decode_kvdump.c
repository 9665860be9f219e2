/* decode_kvdump.c - `tq decode-kvdump`: a .tqkv snapshot back into the
 * llama.cpp state file it came from.  Every checksum is verified before the
 * first output byte. */
#include "cli.h"
#include "gguf.h"
#include "kv_snapshot.h"
#include "output.h"
#include "progress.h"
#include "tqkv.h"

#include <stdio.h>
#include <string.h>

void help_decode_kvdump(void)
{
    printf("usage: tq decode-kvdump IN.tqkv -o OUT [--cache-type T] [--model M.gguf | --head-dim N]\n"
           "                        [--base B.tqkv] [--threads N] [--quiet]\n\n"
           "Rebuilds the state file the snapshot was made from, in its original layout (session or\n"
           "sequence file, per-layer element types, V layout), for llama.cpp to load.\n\n"
           "  --cache-type T   write every K/V tensor as f32, f16, bf16, or the fork's turbo2/3/4 (heads\n"
           "                   padded to 128s as the fork allocates them: needs --model or --head-dim),\n"
           "                   for a context created with that cache type (default: the original types)\n"
           "  --model M.gguf   refuse unless the snapshot was made for this model\n"
           "  --base B.tqkv    the snapshot an appended one builds on (default: its recorded name,\n"
           "                   next to IN)\n"
           "  -o -             write to stdout\n");
}

static void show_progress(void *user, uint64_t done, uint64_t total) { progress_update(user, done, total, "K/V bytes"); }

int cmd_decode_kvdump(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *model = NULL, *cache_type = NULL, *base_path = NULL;
    long threads = 0, hd = 0;
    int quiet = 0;
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
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    int rc = 0;
    if (tqkv_open(ctx, in, &r)) {
        rc = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        return rc;
    }
    const tqkv_meta *m = tqkv_meta_of(r);
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
    if (!rc && model) {
        tq_gguf *g;
        if (tq_gguf_open(ctx, model, NULL, &g)) rc = cli_lib_error(ctx);
        else {
            if (!head_dim) head_dim = tq_model_head_dim(g, 0);
            uint64_t fp = tq_model_fingerprint(g);
            if (!m->has_fingerprint)
                rc = cli_runtime_error("%s: the snapshot carries no model fingerprint (encoded without --model)", in);
            else if (fp != m->fingerprint)
                rc = cli_runtime_error("%s: made for another model (fingerprint %016llx, %s has %016llx)", in,
                                       (unsigned long long)m->fingerprint, model, (unsigned long long)fp);
            tq_gguf_close(g);
        }
    }
    cli_out o;
    const char *inputs[3] = {in, model ? model : in, base_path ? base_path : in};
    if (!rc && !(rc = cli_out_open(&o, out, inputs, 3))) {
        double t0 = cli_now();
        progress pr;
        progress_init(&pr, quiet);
        tq_kvsnap_decode_options dopt = {(int)threads, cache_type, head_dim, show_progress, &pr};
        tq_status dst = tq_kvsnap_decode(ctx, r, base, &dopt, o.f);
        progress_end(&pr);
        if (dst) {
            rc = cli_runtime_error("%s: %s", in, tq_ctx_error(ctx));
            cli_out_abort(&o);
        } else if (!(rc = cli_out_commit(&o)) && !quiet) {
            fprintf(stderr, "tq decode-kvdump: %s: %u tokens, %.2f MB snapshot -> %.2f MB %s file in %.2f s\n", in,
                    m->n_tokens, tqkv_size(r) / 1e6, m->source_size / 1e6,
                    m->source_kind == TQKV_SOURCE_SESSION ? "session" : "sequence", cli_now() - t0);
        }
    }
    tqkv_close(base);
    tqkv_close(r);
    tq_ctx_free(ctx);
    return rc;
}
