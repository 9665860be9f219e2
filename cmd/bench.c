/* bench.c - `tq bench`: codec quality and speed on generated data.  Speed is
 * the median of repeated runs; the scalar reference and the SIMD path run in
 * the same process on the same data so their ratio is meaningful. */
#include "bench_kv.h"
#include "cli.h"
#include "cli_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_opts {
    size_t values;
    int reps;
    int threads; /* for the all-cores column; 0 = all */
    int demo, json;
    int cuda;
    const char *which; /* kv (default) or weights */
    const char *kv, *model, *plot;
} bench_opts;

void help_bench(void)
{
    printf(
        "usage: tq bench [kv|weights] [--quick] [--kv FILE [--model M.gguf]] [--json] [--plot "
        "FILE.svg]\n"
        "                [--reps R] [--threads N]\n\n"
        "  kv       (default) every KV codec side by side on the same data: the TurboQuant family\n"
        "           (tq, turbo2/3/4, TurboAngle, TurboQuant-prod), ggml's q8_0/q4_0/q4_K..q6_K, "
        "f16\n"
        "           and zstd of f16.  Layer 1 reconstruction: bits per value with every overhead,\n"
        "           x f16, relative MSE, cosine, max error, D_mse of unit vectors beside the "
        "bounds\n"
        "           4^-b and 2.72 4^-b, the LARQL contract; layer 2 attention: softmax KL, output\n"
        "           cosine and top-8 overlap against exact attention, asymmetric K/V, boundary "
        "layers,\n"
        "           sparse V; layer 4 speed: encode/decode GB/s per core (scalar and SIMD) and on "
        "all\n"
        "           cores, medians after a warm-up, peak memory.  (Layer 3, model quality through\n"
        "           llama.cpp, is tests/bench/kv_model_quality.py.)\n"
        "  weights  TQ3_1S/TQ4_1S: relative error of the fork's search and tq's, M weights/s\n"
        "  --model M.gguf without --kv: every weight type on the model's own tensors\n\n"
        "  --kv FILE     real K/V: a llama.cpp state file, NumPy dump or .tqkv snapshot (queries:\n"
        "                the last cells' keys stand in); --model gives the head size\n"
        "  --quick       a few-second run on a smaller sample (also --demo)\n"
        "  --json        every figure and the machine as JSON on stdout\n"
        "  --plot F.svg  distortion vs bits per value with both bounds, and throughput bars\n"
        "  --reps R      repetitions per speed figure (default 5; --quick: 3)\n"
        "  --threads N   threads for the all-cores columns (default: all)\n"
        "  --values N    weights: values per run (default 4194304)\n"
        "  --cuda        weights: add a CUDA column\n");
}

static unsigned long long rng_state;

static double randn(void)
{
    unsigned long long z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    unsigned long long w = (rng_state += 0x9E3779B97F4A7C15ull);
    w = (w ^ (w >> 30)) * 0xBF58476D1CE4E5B9ull;
    w = (w ^ (w >> 27)) * 0x94D049BB133111EBull;
    w ^= w >> 31;
    double u1 = ((z >> 11) + 0.5) / 9007199254740992.0, u2 = (w >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef tq_status (*run_fn)(tq_ctx *, const tq_codec *, const void *, size_t, void *);

static tq_status run_encode(tq_ctx *ctx, const tq_codec *c, const void *in, size_t n, void *out)
{
    return tq_encode(ctx, c, in, n, out);
}

static tq_status run_decode(tq_ctx *ctx, const tq_codec *c, const void *in, size_t n, void *out)
{
    return tq_decode(ctx, c, in, n, out);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

static double time_once(tq_ctx *ctx, run_fn fn, const tq_codec *c, const void *in, size_t n,
                        void *out)
{
    double t0 = cli_now();
    if (fn(ctx, c, in, n, out) != TQ_OK) return -1.0;
    return cli_now() - t0;
}

static int parse(int argc, char **argv, bench_opts *o)
{
    long values = 0, reps = 0;
    int quick = 0;
    const cli_opt own[] = {
        CLI_OPT_FLAG("--demo", &o->demo),     CLI_OPT_FLAG("--quick", &quick),
        CLI_OPT_FLAG("--cuda", &o->cuda),     CLI_OPT_LONG("--values", &values, 4096, 1L << 30),
        CLI_OPT_LONG("--reps", &reps, 1, 64), CLI_OPT_STR("--kv", &o->kv),
        CLI_OPT_STR("--plot", &o->plot),      {NULL},
    };
    const cli_spec spec = {"bench", CLI_THREADS | CLI_JSON | CLI_MODEL | CLI_DEVICE, own, 1};
    cli_common c;
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, &o->which, &n);
    if (rc) return rc;
    if (c.device && !strcmp(c.device, "cuda")) { /* the CUDA rows beside the CPU's */
        if (tq_cuda_devices() < 1)
            return cli_runtime_error("--device cuda: %s", tq_cuda_built()
                                                              ? "no CUDA device is visible"
                                                              : "this tq was built without CUDA");
        o->cuda = 1;
    }
    if (c.device && !strcmp(c.device, "cpu") && o->cuda)
        return cli_usage_error("--cuda with --device cpu: choose one");
    if (!o->which || !strcmp(o->which, "codec")) o->which = "kv";
    if (strcmp(o->which, "kv") && strcmp(o->which, "weights"))
        return cli_usage_error("unknown bench '%s': kv or weights (see tq help bench)", o->which);
    o->demo |= quick;
    o->json = c.json;
    o->model = c.model;
    o->threads = (int)c.threads;
    o->values = (size_t)values;
    o->reps = (int)reps;
    if (!o->values) o->values = o->demo ? (1u << 20) : (1u << 22);
    if (!o->reps) o->reps = o->demo ? 3 : 5;
    o->values -= o->values % 512;
    if (!strcmp(o->which, "kv") && o->cuda)
        return cli_usage_error("--cuda: the kv bench runs on the CPU (see issue 15)");
    return 0;
}

typedef struct speed_row {
    double enc_scalar, enc_simd, dec_scalar, dec_simd, enc_all, dec_all, enc_cuda, dec_cuda;
} speed_row;

/* One configuration of a measurement: which kernel runs and how. */
typedef struct config {
    tq_simd simd;
    int threads;
    tq_backend backend;
    run_fn fn;
    double t[64];
} config;

/* The configurations run interleaved, one after another within each
 * repetition, so a slow phase of a shared machine hits all of them alike and
 * their ratios stay meaningful; each figure is the median over repetitions. */
static int measure(tq_ctx *ctx, const tq_codec *c, const float *x, size_t n, void *blk, float *y,
                   const bench_opts *o, double unit, speed_row *r)
{
    tq_simd best = tq_simd_best();
    config cf[8] = {
        {TQ_SIMD_SCALAR, 1, TQ_BACKEND_CPU, run_encode, {0}},
        {best, 1, TQ_BACKEND_CPU, run_encode, {0}},
        {TQ_SIMD_SCALAR, 1, TQ_BACKEND_CPU, run_decode, {0}},
        {best, 1, TQ_BACKEND_CPU, run_decode, {0}},
        {best, o->threads, TQ_BACKEND_CPU, run_encode, {0}},
        {best, o->threads, TQ_BACKEND_CPU, run_decode, {0}},
        {best, 1, TQ_BACKEND_CUDA, run_encode, {0}},
        {best, 1, TQ_BACKEND_CUDA, run_decode, {0}},
    };
    int ncf = o->cuda ? 8 : 6, reps = o->reps > 64 ? 64 : o->reps;
    for (int rep = -1; rep < reps; rep++) /* rep -1 warms caches and pages */
        for (int i = 0; i < ncf; i++) {
            tq_ctx_set_simd(ctx, cf[i].simd);
            tq_ctx_set_threads(ctx, cf[i].threads);
            if (tq_ctx_set_backend(ctx, cf[i].backend) != TQ_OK) return cli_lib_error(ctx);
            int enc = cf[i].fn == run_encode;
            double t =
                time_once(ctx, cf[i].fn, c, enc ? (const void *)x : blk, n, enc ? blk : (void *)y);
            if (t < 0) return cli_lib_error(ctx);
            if (rep >= 0) cf[i].t[rep] = t;
        }
    tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    double *out[8] = {&r->enc_scalar, &r->enc_simd, &r->dec_scalar, &r->dec_simd,
                      &r->enc_all,    &r->dec_all,  &r->enc_cuda,   &r->dec_cuda};
    memset(r, 0, sizeof *r);
    for (int i = 0; i < ncf; i++) *out[i] = unit / median(cf[i].t, reps);
    return 0;
}

static double rel_mse(const float *x, const float *y, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        e += d * d;
        s += (double)x[i] * x[i];
    }
    return s > 0 ? e / s : 0;
}

static int bench_weights(const bench_opts *o)
{
    size_t n = o->values;
    tq_ctx *ctx = tq_ctx_new();
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *blk = malloc(n);
    if (!ctx || !x || !y || !blk) return cli_runtime_error("out of memory for %zu values", n);
    rng_state = 7;
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.02 * randn() * (i % 4096 == 17 ? 20 : 1));
    printf("tq bench weights: %zu Gaussian weights with rare outliers, median of %d runs\n", n,
           o->reps);
    printf(
        "Mw/s = million weights per second, one core unless 'all'.  fork = the fork's search\n"
        "(bit-identical to quantize_row_tq4_1s_ref), scalar; tq = tq's search (per-half starts,\n"
        "scales picked against their fp16 value), %s; ref = the scalar decoder\n\n",
        tq_simd_name(tq_simd_best()));
    printf("%-8s %5s %11s %11s | %8s %8s %5s | %8s %8s %5s | %7s %7s\n", "type", "bits",
           "relmse fork", "relmse tq", "enc fork", "enc tq", "x", "dec ref", "dec simd", "x",
           "enc all", "dec all");
    tq_codec_kind kinds[2] = {TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S};
    for (int i = 0; i < 2; i++) {
        tq_codec_desc d = {.kind = kinds[i]};
        tq_codec *c;
        if (tq_codec_new(ctx, &d, &c) != TQ_OK) return cli_lib_error(ctx);
        tq_ctx_set_threads(ctx, 0);
        tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
        tq_encode(ctx, c, x, n, blk);
        tq_decode(ctx, c, blk, n, y);
        double e_fork = rel_mse(x, y, n);
        tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
        tq_encode(ctx, c, x, n, blk);
        tq_decode(ctx, c, blk, n, y);
        double e_best = rel_mse(x, y, n);
        speed_row r, rf;
        bench_opts oo = *o;
        oo.cuda = 0;
        tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
        int rc = measure(ctx, c, x, n, blk, y, &oo, n * 1e-6, &rf);
        tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
        if (!rc) rc = measure(ctx, c, x, n, blk, y, &oo, n * 1e-6, &r);
        if (rc) return rc;
        r.enc_scalar = rf.enc_scalar;
        printf("%-8s %5.2f %11.6f %11.6f | %8.1f %8.1f %5.1f | %8.1f %8.1f %5.1f | %7.1f %7.1f\n",
               tq_codec_name(c), 8.0 * tq_codec_block_bytes(c) / 32, e_fork, e_best, r.enc_scalar,
               r.enc_simd, r.enc_simd / r.enc_scalar, r.dec_scalar, r.dec_simd,
               r.dec_simd / r.dec_scalar, r.enc_all, r.dec_all);
        tq_codec_free(c);
    }
    free(x);
    free(y);
    free(blk);
    tq_ctx_free(ctx);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    if (!strcmp(o.which, "weights") && !o.model) return bench_weights(&o);
    if (o.model && !o.kv) return bench_model_weights(o.model, o.demo, o.json, o.reps);
    bkv_opts k = {o.demo, o.json, o.reps, o.threads, o.kv, o.model, o.plot};
    return bench_kv(&k);
}
