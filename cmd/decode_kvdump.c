/* decode_kvdump.c - `tq decode-kvdump`: a .tqkv snapshot back into the
 * llama.cpp state file it came from.  Every checksum is verified before the
 * first output byte. */
#include "cli.h"
#include "cli_opts.h"
#include "device.h"
#include "gguf.h"
#include "io.h"
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
    printf(
        "usage: tq decode-kvdump IN.tqkv -o OUT [--format ggsn|ggsq|npz] [--tokens N] [--layers "
        "A-B]\n"
        "                        [--cache-type T] [--model M.gguf | --head-dim N] [--base B.tqkv]\n"
        "                        [--fork-rev REV] [--threads N] [--quiet]\n\n"
        "Rebuilds the state file the snapshot was made from, in its original layout (session or\n"
        "sequence file, per-layer element types, V layout), for llama.cpp to load; a NumPy dump\n"
        "comes back as an .npz with its own array names, shapes and dtypes.\n\n"
        "  --format F       ggsn (session file), ggsq (sequence file: what llama-server's slot\n"
        "                   restore reads) or npz (arrays tokens, k_L, v_L); default: the "
        "source's\n"
        "  --tokens N       only the first N tokens (the cells at positions below N): a prompt\n"
        "                   prefix, decoded without the rest of the snapshot\n"
        "  --layers A-B     only layers A..B (with --format npz)\n"
        "  --cache-type T   write every K/V tensor as f32, f16, bf16, q8_0, q4_0 (rotated as "
        "current\n"
        "                   llama.cpp stores them) or the fork's turbo2/3/4 (heads padded to 128s "
        "as\n"
        "                   the fork allocates them); the last five need --model or --head-dim: "
        "for a\n"
        "                   context created with that cache type (default: the original types)\n"
        "  --fork-rev REV   the TurboQuant+ fork revision --cache-type turbo2/3/4 writes for:\n");
    cli_help_revisions("                  ", "                   ", 1);
    printf(
        "  --model M.gguf   refuse unless the snapshot was made for this model (its architecture\n"
        "                   names a session file made from a sequence file; its head size shapes "
        "npz)\n"
        "  --base B.tqkv    the snapshot an appended one builds on (default: its recorded name,\n"
        "                   next to IN)\n"
        "  --fsync          flush the output to disk before it is renamed into place (default: "
        "not;\n"
        "                   a decoded state can be made again from its snapshot)\n"
        "  -o -             write to stdout; -o onto a device, FIFO or link to one writes into\n"
        "                   it as a stream (never replaced)\n"
        "  --key-file KEY   a sealed snapshot's key (TQ_KEY_FILE: the same; again: more keys)\n\n"
        "IN and OUT may be - (a pipe: the snapshot streams, each chunk verified as it arrives)\n"
        "or s3://bucket/key (an object: only the chunks the decode needs are fetched), with\n"
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and\n"
        "AWS_ENDPOINT_URL (another store's endpoint: path-style) from the environment.\n");
}

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    progress_update(user, done, total, "K/V bytes");
}

static const char *const format_names[] = {"ggsn", "ggsq", "npz", NULL}; /* indexed by tq_kv_kind */
static const char layers_npz_only[] =
    "--layers: a llama.cpp state file holds every layer; use it with --format npz";

typedef struct dec_opts {
    cli_common c;
    const char *in, *cache_type, *base, *format;
    long head_dim, tokens;
    int fsync;
    tq_kvsnap_restore_options ro;
} dec_opts;

static int parse_layers(void *user, const char *v)
{
    tq_kvsnap_restore_options *ro = user;
    char *end;
    long lo = strtol(v, &end, 10), hi = *end == '-' ? strtol(end + 1, &end, 10) : lo;
    if (*end || end == v || lo < 0 || hi < lo || hi > 65535)
        return cli_usage_error("--layers: '%s' is not a layer range A-B (0-based, A <= B)", v);
    ro->layer_lo = (uint32_t)lo;
    ro->layer_hi = (uint32_t)hi;
    ro->has_layers = 1;
    return 0;
}

static int parse(int argc, char **argv, dec_opts *o)
{
    const cli_opt own[] = {
        CLI_OPT_CHOICE("--format", &o->format, format_names,
                       "--format: '%s' is not ggsn, ggsq or npz"),
        CLI_OPT_LONG("--tokens", &o->tokens, 1, INT32_MAX),
        CLI_OPT_FN("--layers", parse_layers, &o->ro),
        CLI_OPT_STR("--cache-type", &o->cache_type),
        CLI_OPT_LONG("--head-dim", &o->head_dim, 1, 4096),
        CLI_OPT_STR("--base", &o->base),
        CLI_OPT_FLAG("--fsync", &o->fsync),
        {NULL},
    };
    const unsigned common = CLI_O | CLI_QUIET | CLI_THREADS | CLI_PROFILE | CLI_MODEL | CLI_DEVICE |
                           CLI_KEY;
    const cli_spec spec = {"decode-kvdump", common, own, 1};
    int n = 0, rc = cli_parse(&spec, argc, argv, &o->c, &o->in, &n);
    if (rc) return rc;
    if (!o->in) return cli_usage_error("which snapshot? (see tq help decode-kvdump)");
    if (!o->c.out) return cli_usage_error("where to? give -o OUT (or -o - for stdout)");
    o->ro.format = (tq_kv_kind)-1;
    for (int f = 0; o->format && f < 3; f++)
        if (!strcmp(o->format, format_names[f])) o->ro.format = (tq_kv_kind)f;
    if (o->ro.has_layers && o->format && o->ro.format != TQ_KV_NUMPY)
        return cli_usage_error("%s", layers_npz_only);
    o->ro.tokens = (uint32_t)o->tokens;
    return 0;
}

/* The base an appended snapshot needs (from --base or beside it), and the
 * model's checks: 0 or an exit code. */
static int open_inputs(tq_ctx *ctx, dec_opts *o, const tqkv_meta *m, char *arch, tqkv_reader **base)
{
    static char found[4096];
    if (m->base_id) {
        if (!o->base) {
            const char *slash = strrchr(o->in, '/');
            snprintf(found, sizeof found, "%.*s%s", slash ? (int)(slash - o->in + 1) : 0, o->in,
                     m->base_name);
            o->base = found;
        }
        if (tq_kvsnap_open_mapped(ctx, o->base, base)) return cli_lib_error(ctx);
    }
    o->ro.head_dim = (uint32_t)o->head_dim;
    if (!o->c.model) return 0;
    tq_gguf *g;
    tq_model model;
    if (tq_gguf_open(ctx, o->c.model, NULL, &g)) return cli_lib_error(ctx);
    if (tq_model_read(ctx, g, &model)) {
        tq_gguf_close(g);
        return cli_lib_error(ctx);
    }
    if (!o->ro.head_dim) o->ro.head_dim = model.head_k;
    snprintf(arch, 257, "%s", model.arch);
    int rc = tq_kvsnap_check_model(ctx, m, &model, o->c.model)
                 ? cli_runtime_error("%s: %s", o->in, tq_ctx_error(ctx))
                 : 0;
    tq_model_free(&model);
    tq_gguf_close(g);
    return rc;
}

static int restore(tq_ctx *ctx, dec_opts *o, const tqkv_reader *r, const tqkv_reader *base)
{
    const tqkv_meta *m = tqkv_meta_of(r);
    cli_out out;
    const char *inputs[3] = {o->in, o->c.model ? o->c.model : o->in, o->base ? o->base : o->in};
    int rc =
        cli_out_open_ex(&out, o->c.out, inputs, 3, o->fsync); /* the snapshot stays: see --fsync */
    if (rc) return rc;
    char near[4096];
    const char *dir = getenv("TMPDIR");
    if (tq_io_is_stream(o->c.out))
        snprintf(near, sizeof near, "%s/tq-decode", dir && *dir ? dir : "/tmp");
    else
        snprintf(near, sizeof near, "%s", o->c.out);
    o->ro.tmp_near = near;
    double t0 = cli_now();
    progress pr;
    progress_init(&pr, o->c.quiet);
    tq_kvsnap_decode_options dopt = {.threads = (int)o->c.threads,
                                     .cache_type = o->cache_type,
                                     .fork_rev = o->c.profile_name,
                                     .head_dim = o->ro.head_dim,
                                     .on_progress = show_progress,
                                     .progress_user = &pr};
    uint64_t values = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) values += m->t[i].width * m->t[i].cells;
    int kernels = 1; /* the CUDA kernels decode tq and turbo blocks; others stay on the CPU */
    for (uint32_t i = 0; i < m->n_tensors; i++)
        kernels &= m->t[i].codec != TQKV_CODEC_ANGLE && m->t[i].codec != TQKV_CODEC_PROD;
    if ((rc = cli_device(&o->c, ctx, kernels, values))) {
        cli_out_abort(&out);
        return rc;
    }
    tq_status st = tq_kvsnap_restore(ctx, r, base, &dopt, &o->ro, out.f);
    progress_end(&pr);
    if (st && cli_out_error(&out)) {
        rc = cli_runtime_error("%s", cli_out_error(&out));
        cli_out_abort(&out);
        return rc;
    }
    if (st) {
        /* a streamed snapshot's reader names its source already */
        const char *msg = tq_ctx_error(ctx);
        int named = strstr(msg, strcmp(o->in, "-") ? o->in : "stdin") != NULL;
        cli_out_abort(&out);
        return named ? cli_runtime_error("%s", msg) : cli_runtime_error("%s: %s", o->in, msg);
    }
    if ((rc = cli_out_commit(&out)) || o->c.quiet) return rc;
    static const char *const what[] = {"session file", "sequence file", "NumPy .npz"};
    cli_log("%s: %u tokens, %.2f MB snapshot -> %s %s in %.2f s", o->in,
            o->ro.tokens && o->ro.tokens < m->n_tokens ? o->ro.tokens : m->n_tokens,
            tqkv_size(r) / 1e6, strcmp(o->c.out, "-") ? o->c.out : "stdout", what[o->ro.format],
            cli_now() - t0);
    return 0;
}

/* --layers A-B within the snapshot's layers (the model's, where the snapshot records them). */
static int check_layers(const dec_opts *o, const tqkv_meta *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        uint32_t l = t->model_layer != TQKV_NO_MODEL_LAYER ? t->model_layer : t->layer;
        if (l + 1 > n) n = l + 1;
    }
    if (o->ro.layer_hi < n) return 0;
    if (!n) return cli_runtime_error("%s: --layers: the snapshot holds no K/V layers", o->in);
    return cli_runtime_error("%s: --layers %u-%u: the snapshot holds layers 0-%u", o->in,
                             o->ro.layer_lo, o->ro.layer_hi, n - 1);
}

int cmd_decode_kvdump(int argc, char **argv)
{
    dec_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r = NULL, *base = NULL;
    char arch[257] = "";
    /* a whole decode reads an object front to back as one streamed GET; a part of it (a token
       prefix, a layer range) by ranges, the index first */
    int whole = !o.tokens && !o.ro.has_layers;
    if (cli_open_snapshot(ctx, o.in, whole, &r)) rc = cli_lib_error(ctx);
    if (!rc && (int)o.ro.format < 0) o.ro.format = (tq_kv_kind)tqkv_meta_of(r)->source_kind;
    if (!rc && o.ro.has_layers && o.ro.format != TQ_KV_NUMPY)
        rc = cli_usage_error("%s", layers_npz_only);
    if (!rc && o.ro.has_layers) rc = check_layers(&o, tqkv_meta_of(r));
    if (!rc) rc = open_inputs(ctx, &o, tqkv_meta_of(r), arch, &base);
    o.ro.arch = arch;
    if (!rc) rc = restore(ctx, &o, r, base);
    tqkv_close(base);
    tqkv_close(r);
    tq_ctx_free(ctx);
    return rc;
}
