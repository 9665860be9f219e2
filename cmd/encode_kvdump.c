/* encode_kvdump.c - `tq encode-kvdump`: a llama.cpp state file into a .tqkv
 * snapshot.  Presets pick bits per K and V; everything not K/V is kept
 * byte for byte. */
#include "cli.h"
#include "cli_opts.h"
#include "device.h"
#include "gguf.h"
#include "json.h"
#include "kv_numpy.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "output.h"
#include "progress.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help_streams(void)
{
    printf("  -o -                  write to stdout; -o onto a device, FIFO or link to one writes\n"
        "                        into it as a stream (never replaced)\n"
           "  --key-file KEY        seal the snapshot with KEY's 32 raw bytes (AES-256-GCM;\n"
           "                        TQ_KEY_FILE: the same; see tq help slot)\n\n"
           "IN, OUT and --append may be - (a pipe) or s3://bucket/key (an object: written as a\n"
           "multipart upload that appears only when complete), with AWS_ACCESS_KEY_ID,\n"
           "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL (another\n"
           "store's endpoint: path-style) from the environment.\n");
}

void help_encode_kvdump(void)
{
    printf(
        "usage: tq encode-kvdump IN -o OUT.tqkv [--preset NAME] [--k-bits B --v-bits B]\n"
        "                        [--boundary-layers N] [--model M.gguf | --head-dim N]\n"
        "                        [--dry-run [--json]] [--fork-rev REV] [--threads N] [--quiet]\n\n"
        "IN is a llama.cpp session file (ggsn v9/v10) or sequence/slot file (ggsq v2/v3), or a\n"
        "NumPy dump: .npz with k_0, v_0, ... arrays ([tokens, heads, head_dim] or PyTorch's\n"
        "[1, heads, tokens, head_dim]) or a stacked [layers, 2, tokens, heads, head_dim] .npy\n"
        "(names and shapes: man tq-encode-kvdump).\n\n"
        "presets (K/V bits of the tq codec, one fp16 norm per head):\n"
        "  lossless  every byte kept (zstd); decode gives the identical file\n"
        "  q8        8 bits for K and V\n"
        "  balanced  (default) 5-bit K and 4-bit V for heads of 32 or less, 4 and 4 above;\n"
        "            K and V transform-coded at 2.75 (V's rows at unit norm) where it pays;\n"
        "            with --model, cells past a sliding window at 2 bits, the rest one finer\n"
        "  small     3 and 3; K transform-coded at 2 and V at 2.1 (its rows at unit norm) where\n"
        "            it pays; past cells at 1 bit, the rest one finer\n\n"
        "  --k-bits/--v-bits B   override the preset's bits (1..8)\n"
        "  --boundary-layers N   first and last N layers at 8 bits\n"
        "  --past-bits B         bits of the cells a sliding-window layer no longer attends to\n"
        "                        (older than its window; --model gives it): balanced 2, small\n"
        "                        1, the other cells one bit finer; 0 codes them as the rest\n"
        "  --recent-cells N --recent-bits B  a layer's newest N cells B bits finer (128, 2)\n"
        "  --sink-cells N        keep the first N cells of every tq-coded K and V exact\n"
        "                        (attention sinks; default 1)\n"
        "  --k-offset rope|mean|off  subtract K's offset before coding and add it back after "
        "decoding\n"
        "                        (stored per tensor): rope (default) K's pre-RoPE mean turned by "
        "each\n"
        "                        cell's position where --model gives the RoPE, else the mean; "
        "mean\n"
        "                        each channel's mean over the cells\n"
        "  --cells auto|lloyd-max|uniform  the codebook: Lloyd-Max (the fork's kind) or uniform "
        "cells\n"
        "                        one bit wider with the same distortion, which zstd codes to fewer "
        "bits\n"
        "                        (balanced: 3.84 -> 3.68 bits on Gemma 3 270M, but slower); auto\n"
        "                        (default): uniform at 3 bits in groups of 64 or more\n"
        "  --planes on|off       3- and 5-bit blocks stored as planes (norms, signs, magnitudes) "
        "so\n"
        "                        that zstd entropy-codes the indices (default on: 3 -> 2.89 bits)\n"
        "  --model M.gguf        the model: its head size sets the rotation group, and its\n"
        "                        fingerprint is stored so decode can refuse another model\n"
        "  --head-dim N          the rotation group without a model (else guessed)\n"
        "  --append BASE.tqkv    store only the cells after BASE's (its tokens must be a prefix "
        "of\n"
        "                        this state's); decode needs BASE beside the snapshot or --base\n"
        "  --innerq SCALES.gguf|auto|off\n"
        "                        per-channel InnerQ scales from tq calibrate-innerq (or a .npy: "
        "float32\n"
        "                        [head_dim], [2, head_dim] or [layers, 2, head_dim]), per model "
        "layer:\n"
        "                        K/V channels are multiplied by them before coding and divided "
        "after\n"
        "                        decoding; stored in the snapshot.  auto (default): with a --model "
        "that\n"
        "                        has QK-norm gains, Q-aware K scales computed from this state\n"
        "  --turbo               code with the TurboQuant+ fork's turbo2/3/4 blocks instead (bits "
        "2..4;\n"
        "                        tensors whose rows are not whole 128-value groups are kept)\n"
        "  --codec tq|turbo|angle|prod\n"
        "                        the block for coded tensors: tq's (default), the fork's turbo "
        "(as\n"
        "                        --turbo), TurboAngle (b bits: b+1 angle and b-1 radius bits) or\n"
        "                        TurboQuant-prod (b-1 MSE bits and a 1-bit QJL sketch, b >= 2)\n"
        "  --transform auto|on|off  transform coding (per KV head: K before RoPE, the eigenbasis\n"
        "                        of the state's own covariance, stored, one quantizer step set\n"
        "                        for the rate; TQKV.md): auto (default) where, at the\n"
        "                        error of the tq codec, the indices and the stored bases take\n"
        "                        fewer bits than it\n"
        "  --k-rate/--v-rate R   its bits per K/V value (K: balanced 2.75, small 2; V: balanced\n"
        "                        2.75, small 2.1; 0 keeps V on the tq codec)\n"
        "  --dry-run             print the plan (each tensor's codec, bits, group and payload);\n"
        "                        nothing is written (--json: as JSON)\n"
        "  --fsync               flush the snapshot to disk before it is renamed into place\n"
        "                        (default: not, as zstd; the state it comes from stays)\n");
    help_streams();
}

typedef struct enc_opts {
    cli_common c;
    const char *in, *preset, *append, *innerq;
    long k_bits, v_bits, boundary, head_dim, sink, past_bits, recent_cells, recent_bits;
    int turbo, dry_run, fsync;
    const char *codec, *k_offset, *planes, *cells, *transform;
    double k_rate, v_rate; /* TQ_KVSNAP_UNSET: the preset's */
} enc_opts;

static const char *const codec_names[] = {"tq", "turbo", "angle", "prod", NULL};
static const char *const offset_names[] = {"rope", "mean", "off", NULL};
static const char *const on_off[] = {"on", "off", NULL};
static const char *const cells_names[] = {"auto", "lloyd-max", "uniform", NULL};
static const char *const transform_names[] = {"auto", "on", "off", NULL};

/* --k-rate/--v-rate: bits per value of the transform coder, (0, 8] (V: 0
 * leaves V to the tq codec). */
static int opt_rate(double *dst, const char *name, const char *v, double lo)
{
    char *end;
    double r = strtod(v, &end);
    if (*end || end == v || !(r >= lo) || r > 8 || (lo == 0 && r == 0 && name[2] == 'k'))
        return cli_usage_error("%s: '%s' is not a rate in bits per value (%s 8]", name, v,
                               lo > 0 ? "(0," : "[0,");
    *dst = r;
    return 0;
}

static int opt_k_rate(void *user, const char *v) { return opt_rate(user, "--k-rate", v, 1e-3); }
static int opt_v_rate(void *user, const char *v) { return opt_rate(user, "--v-rate", v, 0); }

static int parse(int argc, char **argv, enc_opts *o)
{
    o->sink = TQ_KVSNAP_UNSET;
    o->k_bits = TQ_KVSNAP_UNSET;
    o->v_bits = TQ_KVSNAP_UNSET;
    o->k_rate = TQ_KVSNAP_UNSET;
    o->v_rate = TQ_KVSNAP_UNSET;
    o->past_bits = TQ_KVSNAP_UNSET;
    o->recent_cells = TQ_KVSNAP_UNSET;
    o->recent_bits = TQ_KVSNAP_UNSET;
    const cli_opt own[] = {
        CLI_OPT_CHOICE("--preset", &o->preset, tq_kvsnap_preset_names,
                       "--preset: unknown preset '%s' (lossless, q8, balanced, small)"),
        CLI_OPT_LONG("--k-bits", &o->k_bits, 1, 8),
        CLI_OPT_LONG("--v-bits", &o->v_bits, 1, 8),
        CLI_OPT_LONG("--boundary-layers", &o->boundary, 0, 4096),
        CLI_OPT_LONG("--past-bits", &o->past_bits, 0, 8),
        CLI_OPT_LONG("--recent-cells", &o->recent_cells, 0, 1 << 30),
        CLI_OPT_LONG("--recent-bits", &o->recent_bits, 0, 7),
        CLI_OPT_LONG("--sink-cells", &o->sink, 0, 65535),
        CLI_OPT_CHOICE("--k-offset", &o->k_offset, offset_names,
                       "--k-offset: '%s' is not rope, mean or off"),
        CLI_OPT_CHOICE("--planes", &o->planes, on_off, "--planes: '%s' is not on or off"),
        CLI_OPT_CHOICE("--cells", &o->cells, cells_names,
                       "--cells: '%s' is not auto, lloyd-max or uniform"),
        CLI_OPT_LONG("--head-dim", &o->head_dim, 8, 512),
        CLI_OPT_STR("--append", &o->append),
        CLI_OPT_STR("--innerq", &o->innerq),
        CLI_OPT_FLAG("--turbo", &o->turbo),
        CLI_OPT_CHOICE("--codec", &o->codec, codec_names,
                       "--codec: '%s' is not tq, turbo, angle or prod"),
        CLI_OPT_CHOICE("--transform", &o->transform, transform_names,
                       "--transform: '%s' is not auto, on or off"),
        CLI_OPT_FN("--k-rate", opt_k_rate, &o->k_rate),
        CLI_OPT_FN("--v-rate", opt_v_rate, &o->v_rate),
        CLI_OPT_FLAG("--dry-run", &o->dry_run),
        CLI_OPT_FLAG("--fsync", &o->fsync),
        {NULL},
    };
    const cli_spec spec = {
        "encode-kvdump",
        CLI_O | CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_PROFILE | CLI_MODEL | CLI_DEVICE | CLI_KEY,
        own, 1};
    int n = 0;
    int rc = cli_parse(&spec, argc, argv, &o->c, &o->in, &n);
    if (rc) return rc;
    if (!o->in) return cli_usage_error("which state file? (see tq help encode-kvdump)");
    if (!o->c.out && !o->dry_run)
        return cli_usage_error("where to? give -o OUT.tqkv (or -o - for stdout, or --dry-run)");
    if (o->codec && o->turbo && strcmp(o->codec, "turbo"))
        return cli_usage_error("--turbo and --codec %s: choose one", o->codec);
    if (o->turbo) o->codec = "turbo";
    return 0;
}

/* The command line as the request: what the user asked, set here once; what the user left
 * out stays TQ_KVSNAP_UNSET (the defaults are kv_presets.c's preset table). */
static void map_request(const enc_opts *o, tq_kvsnap_request *q)
{
    static const int codecs[] = {TQKV_CODEC_TQ, TQKV_CODEC_TURBO, TQKV_CODEC_ANGLE,
                                 TQKV_CODEC_PROD};
    static const int offsets[] = {TQ_KOFF_ROPE, TQ_KOFF_MEAN, TQ_KOFF_OFF};
    static const int cells[] = {TQ_CELLS_AUTO, TQ_CELLS_LLOYD_MAX, TQ_CELLS_UNIFORM};
    static const int transforms[] = {TQ_TC_AUTO, TQ_TC_ON, TQ_TC_OFF};
    *q = (tq_kvsnap_request)TQ_KVSNAP_REQUEST_INIT;
    q->preset = (tq_kvsnap_preset)cli_choice_index(tq_kvsnap_preset_names, o->preset, 0);
    q->k_bits = (int)o->k_bits;
    q->v_bits = (int)o->v_bits;
    q->boundary_layers = (int)o->boundary;
    if (o->head_dim) q->head_dim = (int)o->head_dim;
    if (o->codec) q->codec = codecs[cli_choice_index(codec_names, o->codec, 0)];
    q->base_name = o->append;
    q->sink_cells = (int)o->sink;
    if (o->k_offset) q->k_offset = offsets[cli_choice_index(offset_names, o->k_offset, 0)];
    q->no_planes = o->planes && !strcmp(o->planes, "off");
    if (o->cells) q->cells = cells[cli_choice_index(cells_names, o->cells, 0)];
    if (o->transform)
        q->transform = transforms[cli_choice_index(transform_names, o->transform, 0)];
    q->k_rate = o->k_rate;
    q->v_rate = o->v_rate;
    q->past_bits = (int)o->past_bits;
    q->recent_cells = (int)o->recent_cells;
    q->recent_bits = (int)o->recent_bits;
    int named = o->innerq && strcmp(o->innerq, "auto") && strcmp(o->innerq, "off");
    q->innerq_path = named ? o->innerq : NULL;
    q->innerq_off = o->innerq && !strcmp(o->innerq, "off");
}

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    progress_update(user, done, total, "K/V bytes");
}

/* What the command holds open; freed in one place. */
typedef struct enc_run {
    tq_ctx *ctx;
    tq_gguf *gguf;  /* the model's file */
    tq_model model; /* its facts, read once */
    tq_kv_view *view;
    tqkv_reader *base;
    tq_kvsnap_prepared *prep; /* the plan (the request resolved) and what preparing it found */
} enc_run;

static void run_free(enc_run *r)
{
    tq_kvsnap_prepared_free(r->prep);
    tqkv_close(r->base);
    tq_kv_view_close(r->view);
    tq_model_free(&r->model);
    tq_gguf_close(r->gguf);
    tq_ctx_free(r->ctx);
}

/* The request checked (a usage error before the input is read), the inputs opened, the
 * snapshot prepared (tq_kvsnap_prepare resolves the request): 0 or an exit code. */
static int plan(const enc_opts *o, const tq_kvsnap_request *q, const tq_kvsnap_run *run,
                enc_run *r)
{
    tq_ctx *ctx = r->ctx;
    tq_kvsnap_inputs in = {.model = r->gguf ? &r->model : NULL};
    if (tq_kvsnap_check(ctx, q, &in)) return cli_usage_error("%s", tq_ctx_error(ctx));
    if (cli_open_view(ctx, o->in, cli_kv_profile(&o->c), &r->view)) return cli_lib_error(ctx);
    if (o->append && tq_kvsnap_open_mapped(ctx, o->append, &r->base))
        return cli_lib_error(ctx);
    in.base = r->base;
    if (tq_kvsnap_prepare(ctx, r->view, q, &in, run, &r->prep))
        return cli_runtime_error("%s: %s", o->in, tq_ctx_error(ctx));
    return 0;
}

/* The command line as a request, the model read (its facts check it), then plan(). */
static int prepare(const enc_opts *o, const tq_kvsnap_run *run, enc_run *r)
{
    tq_ctx *ctx = r->ctx;
    tq_kvsnap_request q;
    map_request(o, &q);
    if (o->c.model && (tq_gguf_open(ctx, o->c.model, NULL, &r->gguf) ||
                       tq_model_read(ctx, r->gguf, &r->model)))
        return cli_lib_error(ctx);
    return plan(o, &q, run, r);
}

/* Whether a plan's group was not given: guessed from the width or its architecture's. */
static int guessed_group(uint32_t group, tq_head_source source)
{
    return group && (source == TQ_HEAD_NONE || source == TQ_HEAD_ARCH);
}

static const char *group_note(tq_head_source source)
{
    if (source == TQ_HEAD_ARCH) return " (the head size of its architecture)";
    return source == TQ_HEAD_NONE ? " (guessed from the row width)" : "";
}

/* --dry-run: the plan, one tensor a line (or JSON); nothing is written. */
/* The plan as --dry-run --json writes it (tq's one JSON writer). */
static int print_plan_json(const enc_opts *o, const tq_kvsnap_plan *p)
{
    static const char *const rows[] = {"tensors", NULL};
    const tqkv_meta *m = &p->meta;
    uint64_t total = 0;
    char b[96];
    json_t *doc = json_object();
    json_object_set_new(doc, "input", json_text(o->in));
    json_object_set_new(doc, "preset", json_text(tq_kvsnap_preset_name(p->settings.preset)));
    json_object_set_new(doc, "k_bits", json_integer(p->settings.k_bits));
    json_object_set_new(doc, "v_bits", json_integer(p->settings.v_bits));
    json_object_set_new(doc, "group", json_integer(p->group));
    int guessed = guessed_group(p->group, p->group_source);
    json_object_set_new(doc, "group_guessed", json_boolean(guessed));
    json_t *tensors = json_array();
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        uint64_t pay = tq_kvsnap_plan_payload(p, i);
        total += pay;
        json_t *r = json_object();
        json_object_set_new(r, "kv_state", json_integer(t->kv_state));
        json_object_set_new(r, "stream", json_integer(t->stream));
        json_object_set_new(r, "layer", json_integer(t->layer));
        json_object_set_new(r, "kv", json_text(t->is_v ? "V" : "K"));
        json_object_set_new(r, "cells", json_integer(t->cells));
        json_object_set_new(r, "width", json_integer((json_int_t)t->width));
        json_object_set_new(r, "codec", json_text(tq_kvsnap_describe(t, TQ_DESCRIBE_PLAN, b, 96)));
        json_object_set_new(r, "row_start", json_integer(t->row_start));
        json_object_set_new(r, "payload_bytes", json_integer((json_int_t)pay));
        json_array_append_new(tensors, r);
    }
    json_object_set_new(doc, "tensors", tensors);
    json_object_set_new(doc, "payload_bytes", json_integer((json_int_t)total));
    json_object_set_new(doc, "skeleton_bytes", json_integer((json_int_t)m->skeleton_len));
    json_layout layout = {NULL, rows, 0};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
}

static int print_plan(const enc_opts *o, const tq_kvsnap_plan *p)
{
    const tqkv_meta *m = &p->meta;
    uint64_t total = 0;
    char b[96];
    if (o->c.json) return print_plan_json(o, p);
    printf("plan for %s: preset %s, K %d / V %d bits, rotation group %u%s\n", o->in,
           tq_kvsnap_preset_name(p->settings.preset), p->settings.k_bits, p->settings.v_bits,
           p->group, p->group ? group_note(p->group_source) : "");
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        uint64_t pay = tq_kvsnap_plan_payload(p, i);
        total += pay;
        printf("  state %u stream %u layer %3u %s  %u x %llu  %-30s %llu bytes\n", t->kv_state,
               t->stream, t->layer, t->is_v ? "V" : "K", t->cells, (unsigned long long)t->width,
               tq_kvsnap_describe(t, TQ_DESCRIBE_PLAN, b, sizeof b), (unsigned long long)pay);
    }
    printf("K/V payload %llu bytes before zstd, %llu other bytes kept\n",
           (unsigned long long)total, (unsigned long long)m->skeleton_len);
    return 0;
}

static void report(const enc_opts *o, const tq_kvsnap_prepared *pp, const tq_kvsnap_report *rep,
                   uint32_t n_tokens, double dt)
{
    const tq_kvsnap_plan *p = pp->plan;
    int lossless = p->settings.preset == TQ_KVSNAP_PRESET_LOSSLESS;
    const char *innerq_why = pp->innerq_why;
    if (pp->rotated && !lossless)
        cli_log("%u K/V tensors stored Hadamard-rotated (llama.cpp's quantized cache): coded in "
                "the model's channels",
                pp->rotated);
    if (o->c.model && !lossless && innerq_why && (!o->innerq || !strcmp(o->innerq, "auto")))
        cli_log("InnerQ: %s", innerq_why);
    const tq_model *model = p->settings.model;
    if (model && !model->kv_row && !lossless)
        cli_log("note: %s: its KV facts (RoPE, layers, memory) are not verified through "
                "llama.cpp by tq's tests: coded as without them",
                model->arch[0] ? model->arch : "the model");
    if (rep->group_used && rep->group_source == TQ_HEAD_ARCH && !lossless)
        cli_log("note: rotation group %u, the head size of every %s model; pass --model or "
                "--head-dim to set it",
                rep->group_used, p->group_arch);
    else if (rep->group_used && rep->group_source == TQ_HEAD_NONE && !lossless)
        cli_log("note: rotation group %u guessed from the row width (it could hold other head "
                "sizes); pass --model "
                "or --head-dim for the real head size",
                rep->group_used);
    cli_log("%s: %u tokens, %u tensors (%u coded, %u kept): %.2f MB state -> %.2f MB "
            "(%.2fx, %.3f bits per K/V value, preset %s, K %d / V %d bits%s) in %.2f s",
            o->in, n_tokens, rep->n_tensors, rep->n_coded, rep->n_kept, rep->source_bytes / 1e6,
            rep->snapshot_bytes / 1e6,
            (double)rep->source_bytes / (double)(rep->snapshot_bytes ? rep->snapshot_bytes : 1),
            rep->kv_values ? 8.0 * (double)rep->snapshot_bytes / (double)rep->kv_values : 0.0,
            tq_kvsnap_preset_name(p->settings.preset), p->settings.k_bits, p->settings.v_bits,
            lossless ? ", unused: lossless" : "", dt);
}

int cmd_encode_kvdump(int argc, char **argv)
{
    enc_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    enc_run r = {.ctx = tq_ctx_new()};
    progress pr;
    tq_kvsnap_run run = TQ_KVSNAP_RUN_INIT; /* how it runs: the same bytes at any thread count */
    run.threads = (int)o.c.threads;
    run.on_progress = show_progress;
    run.progress_user = &pr;
    /* after the plan: planning converts elements, CPU work; the CUDA kernels code tq and turbo
     * blocks */
    if ((rc = prepare(&o, &run, &r)) || o.dry_run ||
        (rc = cli_device(&o.c, r.ctx, r.prep->cuda_kernels, tq_kv_view_kv_values(r.view)))) {
        if (!rc && o.dry_run) rc = print_plan(&o, r.prep->plan);
        run_free(&r);
        return rc;
    }
    cli_out out;
    const char *inputs[3] = {o.in, o.c.model ? o.c.model : o.in, o.append ? o.append : o.in};
    if ((rc = cli_out_open_ex(&out, o.c.out, inputs, 3, o.fsync))) { /* see --fsync */
        run_free(&r);
        return rc;
    }
    if ((rc = cli_out_seal(&out))) { /* --key-file */
        cli_out_abort(&out);
        run_free(&r);
        return rc;
    }
    tq_kvsnap_report rep;
    progress_init(&pr, o.c.quiet);
    double t0 = cli_now();
    tq_status est = tq_kvsnap_execute(r.ctx, r.view, r.prep->plan, &run, out.f, &rep);
    progress_end(&pr);
    if (est && cli_out_error(&out)) {
        rc = cli_runtime_error("%s", cli_out_error(&out));
        cli_out_abort(&out);
    } else if (est) {
        rc = cli_runtime_error("%s: %s", o.in, tq_ctx_error(r.ctx));
        cli_out_abort(&out);
    } else {
        rc = cli_out_commit(&out);
    }
    if (!rc && !o.c.quiet)
        report(&o, r.prep, &rep, tq_kv_view_n_tokens(r.view), cli_now() - t0);
    run_free(&r);
    return rc;
}
