/* encode_kvdump.c - `tq encode-kvdump`: a llama.cpp state file into a .tqkv
 * snapshot.  Presets pick bits per K and V; everything not K/V is kept
 * byte for byte. */
#include "cli.h"
#include "gguf.h"
#include "innerq_scales.h"
#include "kv_numpy.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "output.h"
#include "progress.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void help_encode_kvdump(void)
{
    printf("usage: tq encode-kvdump IN -o OUT.tqkv [--preset NAME] [--k-bits B --v-bits B]\n"
           "                        [--boundary-layers N] [--model M.gguf | --head-dim N]\n"
           "                        [--type-profile NAME] [--threads N] [--quiet]\n\n"
           "IN is a llama.cpp session file (ggsn v9/v10) or sequence/slot file (ggsq v2/v3), or a\n"
           "NumPy dump: .npz with k_0, v_0, ... arrays ([tokens, heads, head_dim] or PyTorch's\n"
           "[1, heads, tokens, head_dim]) or a stacked [layers, 2, tokens, heads, head_dim] .npy\n"
           "(names and shapes: man tq-encode-kvdump).\n\n"
           "presets (K/V bits of the tq codec, one fp16 norm per head):\n"
           "  lossless  every byte kept (zstd); decode gives the identical file\n"
           "  q8        8 bits for K and V\n"
           "  balanced  (default) 5-bit K and 4-bit V for heads of 32 or less, 4 and 4 above\n"
           "  small     3 and 3 (about 3.1 bits per value at head size 128; 5 at head size 8,\n"
           "            where the per-head norm costs 2 bits)\n\n"
           "  --k-bits/--v-bits B   override the preset's bits (1..8)\n"
           "  --boundary-layers N   first and last N layers at 8 bits\n"
           "  --model M.gguf        the model: its head size sets the rotation group, and its\n"
           "                        fingerprint is stored so decode can refuse another model\n"
           "  --head-dim N          the rotation group without a model (else guessed)\n"
           "  --append BASE.tqkv    store only the cells after BASE's (its tokens must be a prefix of\n"
           "                        this state's); decode needs BASE beside the snapshot or --base\n"
           "  --innerq SCALES.npy   per-channel InnerQ scales (float32 [head_dim], [2, head_dim] or\n"
           "                        [layers, 2, head_dim]): K/V channels are multiplied by them before\n"
           "                        coding and divided after decoding; stored in the snapshot\n"
           "  --turbo               code with the TurboQuant+ fork's turbo2/3/4 blocks instead (bits 2..4;\n"
           "                        tensors whose rows are not whole 128-value groups are kept)\n"
           "  -o -                  write to stdout\n");
}

typedef struct enc_opts {
    const char *in, *out, *preset, *model, *profile, *append, *innerq;
    long k_bits, v_bits, boundary, head_dim, threads;
    int quiet, turbo;
} enc_opts;

static int parse(int argc, char **argv, enc_opts *o)
{
    memset(o, 0, sizeof *o);
    o->preset = "balanced";
    o->k_bits = o->v_bits = o->boundary = -1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) o->quiet = 1;
        else if (!strcmp(argv[i], "--turbo")) o->turbo = 1;
        else if ((v = cli_opt_value(argc, argv, &i, "-o")) || (v = cli_opt_value(argc, argv, &i, "--output"))) {
            if (!*v) return -1;
            o->out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--preset"))) {
            if (!*v) return -1;
            o->preset = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--innerq"))) {
            if (!*v) return -1;
            o->innerq = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--append"))) {
            if (!*v) return -1;
            o->append = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--model"))) {
            if (!*v) return -1;
            o->model = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--type-profile"))) {
            tq_type_profile p;
            if (!*v) return -1;
            if (tq_type_profile_parse(v, &p)) return cli_usage_error("--type-profile: unknown profile '%s'", v), -1;
            o->profile = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--k-bits"))) {
            if (!*v || cli_parse_long("--k-bits", v, 1, 8, &o->k_bits)) return -1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--v-bits"))) {
            if (!*v || cli_parse_long("--v-bits", v, 1, 8, &o->v_bits)) return -1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--boundary-layers"))) {
            if (!*v || cli_parse_long("--boundary-layers", v, 0, 4096, &o->boundary)) return -1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--head-dim"))) {
            if (!*v || cli_parse_long("--head-dim", v, 8, 512, &o->head_dim)) return -1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--threads"))) {
            if (!*v || cli_parse_long("--threads", v, 0, 4096, &o->threads)) return -1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("unknown option '%s' (see tq help encode-kvdump)", argv[i]), -1;
        } else if (o->in) {
            return cli_usage_error("one input at a time ('%s' and '%s')", o->in, argv[i]), -1;
        } else {
            o->in = argv[i];
        }
    }
    if (!o->in) return cli_usage_error("which state file? (see tq help encode-kvdump)"), -1;
    if (!o->out) return cli_usage_error("where to? give -o OUT.tqkv (or -o - for stdout)"), -1;
    if (strcmp(o->preset, "lossless") && strcmp(o->preset, "q8") && strcmp(o->preset, "balanced") && strcmp(o->preset, "small"))
        return cli_usage_error("--preset: unknown preset '%s' (lossless, q8, balanced, small)", o->preset), -1;
    if (o->innerq && (o->turbo || !strcmp(o->preset, "lossless")))
        return cli_usage_error("--innerq scales what tq's codec codes: not with %s", o->turbo ? "--turbo" : "--preset lossless"), -1;
    return 0;
}

static void show_progress(void *user, uint64_t done, uint64_t total) { progress_update(user, done, total, "K/V bytes"); }

int cmd_encode_kvdump(int argc, char **argv)
{
    enc_opts o;
    if (parse(argc, argv, &o)) return TQ_EXIT_USAGE;
    tq_ctx *ctx = tq_ctx_new();
    tq_kvsnap_options so = {0};
    tq_type_profile prof = TQ_PROFILE_DEFAULT;
    if (o.profile) tq_type_profile_parse(o.profile, &prof);
    so.profile = tq_type_profile_name(prof);
    so.threads = (int)o.threads;
    so.head_dim = o.head_dim > 0 ? (uint32_t)o.head_dim : 0;
    int rc = 0;
    float *scales = NULL;
    if (o.innerq && tq_innerq_scales_load(ctx, o.innerq, &scales, &so.innerq_layers, &so.innerq_dim)) {
        rc = cli_lib_error(ctx);
        free(scales);
        tq_ctx_free(ctx);
        return rc;
    }
    so.innerq = scales;
    if (o.model) {
        tq_gguf *g;
        if (tq_gguf_open(ctx, o.model, NULL, &g)) {
            rc = cli_lib_error(ctx);
            free(scales);
            tq_ctx_free(ctx);
            return rc;
        }
        so.has_fingerprint = 1;
        so.fingerprint = tq_model_fingerprint(g);
        if (!so.head_dim) so.head_dim = tq_model_head_dim(g, 0);
        tq_gguf_close(g);
    }
    tq_kv_view *s;
    if (tq_kv_open(ctx, o.in, prof, &s)) {
        rc = cli_lib_error(ctx);
        free(scales);
        tq_ctx_free(ctx);
        return rc;
    }
    /* bits: the norm costs 16/g bits per value, so small heads get K one bit more */
    uint32_t g = so.head_dim;
    if (!g) {
        const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
        for (g = 128; g >= 8 && st->n_layer && st->k[0].width % g; g /= 2) {}
    }
    int kb = 4, vb = 4;
    if (!strcmp(o.preset, "lossless")) so.lossless = 1;
    else if (!strcmp(o.preset, "q8")) kb = vb = 8;
    else if (!strcmp(o.preset, "balanced")) kb = g <= 32 ? 5 : 4;
    else kb = vb = 3;
    so.k_bits = o.k_bits > 0 ? (int)o.k_bits : kb;
    so.v_bits = o.v_bits > 0 ? (int)o.v_bits : vb;
    so.boundary_layers = o.boundary > 0 ? (int)o.boundary : 0;
    so.zstd_level = 1; /* f16 K/V barely compresses; level 1 keeps most of the gain at 3x the speed */
    so.turbo = o.turbo;
    if (o.turbo && (so.k_bits < 2 || so.k_bits > 4 || so.v_bits < 2 || so.v_bits > 4)) {
        tq_kv_close(s);
        free(scales);
        tq_ctx_free(ctx);
        return cli_usage_error("--turbo codes with the fork's turbo2/3/4 blocks: bits must be 2..4 (give --k-bits/--v-bits)");
    }
    tqkv_reader *base = NULL;
    if (o.append) {
        if (tqkv_open(ctx, o.append, &base)) {
            rc = cli_lib_error(ctx);
            tq_kv_close(s);
            free(scales);
            tq_ctx_free(ctx);
            return rc;
        }
        so.base = base;
        so.base_name = o.append;
    }
    cli_out out;
    const char *inputs[3] = {o.in, o.model ? o.model : o.in, o.append ? o.append : o.in};
    if ((rc = cli_out_open(&out, o.out, inputs, 3))) {
        tqkv_close(base);
        tq_kv_close(s);
        free(scales);
        tq_ctx_free(ctx);
        return rc;
    }
    tq_kvsnap_report rep;
    progress pr;
    progress_init(&pr, o.quiet);
    so.progress = show_progress;
    so.progress_user = &pr;
    double t0 = cli_now();
    tq_status est = tq_kvsnap_encode(ctx, s, &so, out.f, &rep);
    progress_end(&pr);
    if (est) {
        rc = cli_runtime_error("%s: %s", o.in, tq_ctx_error(ctx));
        cli_out_abort(&out);
    } else {
        rc = cli_out_commit(&out);
    }
    double dt = cli_now() - t0;
    if (!rc && !o.quiet) {
        if (rep.group_guessed && !so.lossless)
            fprintf(stderr, "tq encode-kvdump: note: rotation group %u guessed from the row width; pass --model or "
                            "--head-dim for the real head size\n", rep.group_used);
        fprintf(stderr, "tq encode-kvdump: %s: %u tokens, %u tensors (%u coded, %u kept): %.2f MB state -> %.2f MB "
                        "(%.2fx, %.3f bits per K/V value, preset %s, K %d / V %d bits%s) in %.2f s\n",
                o.in, tq_kv_view_n_tokens(s), rep.n_tensors, rep.n_lossy, rep.n_raw, rep.source_bytes / 1e6,
                rep.snapshot_bytes / 1e6, (double)rep.source_bytes / (double)(rep.snapshot_bytes ? rep.snapshot_bytes : 1),
                rep.kv_values ? 8.0 * (double)rep.snapshot_bytes / (double)rep.kv_values : 0.0, o.preset,
                so.k_bits, so.v_bits, so.lossless ? ", unused: lossless" : "", dt);
    }
    tqkv_close(base);
    tq_kv_close(s);
    free(scales);
    tq_ctx_free(ctx);
    return rc;
}
