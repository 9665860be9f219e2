/* bench.c - `tq bench`: codec quality and speed on generated data.  Speed is
 * the median of repeated runs; the scalar reference and the SIMD path run in
 * the same process on the same data so their ratio is meaningful. */
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
    int demo;
    int cuda;
    const char *which; /* codec or weights */
} bench_opts;

void help_bench(void)
{
    printf("usage: tq bench codec|weights [--values N] [--reps R] [--threads N] [--cuda] [--demo]\n\n"
           "  codec    KV codecs (turbo2/3/4 and tq generic) on generated K-like data:\n"
           "           bits per value, relative MSE, encode/decode GB/s of float32 per core\n"
           "           (scalar reference and best SIMD side by side) and on all cores\n"
           "  weights  TQ3_1S/TQ4_1S: relative error of the fork's search and tq's, and\n"
           "           encode/decode M weights/s per core and on all cores\n\n"
           "  --values N   values per run (default 4194304; --demo: 1048576)\n"
           "  --reps R     runs per figure, the median is shown (default 5; --demo: 3)\n"
           "  --threads N  threads for the all-cores column (default: all)\n"
           "  --cuda       add a CUDA column (host-to-host, transfers included)\n"
           "  --demo       short run on a smaller sample\n");
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

/* K-cache-like rows: Gaussian channels, a few large biased outlier channels
 * (the structure that makes raw K hard to quantize without rotation). */
static float *gen_kv(size_t n, unsigned g)
{
    float *x = malloc(n * sizeof(float));
    if (!x) return NULL;
    rng_state = 42;
    for (size_t i = 0; i < n; i++) {
        unsigned j = (unsigned)(i % g);
        double sc = (j % 17 == 3) ? 6.0 : 1.0;
        x[i] = (float)(sc * randn() + ((j % 17 == 3) ? 2.0 : 0.0));
    }
    return x;
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

static double time_once(tq_ctx *ctx, run_fn fn, const tq_codec *c, const void *in, size_t n, void *out)
{
    double t0 = cli_now();
    if (fn(ctx, c, in, n, out) != TQ_OK) return -1.0;
    return cli_now() - t0;
}

static int parse(int argc, char **argv, bench_opts *o)
{
    long values = 0, reps = 0;
    const cli_opt own[] = {
        CLI_OPT_FLAG("--demo", &o->demo),
        CLI_OPT_FLAG("--cuda", &o->cuda),
        CLI_OPT_LONG("--values", &values, 4096, 1L << 30),
        CLI_OPT_LONG("--reps", &reps, 1, 64),
        {NULL},
    };
    const cli_spec spec = {"bench", CLI_THREADS, own, 1};
    cli_common c;
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, &o->which, &n);
    if (rc) return rc;
    if (!o->which) return cli_usage_error("which bench? codec or weights (see tq help bench)");
    o->threads = (int)c.threads;
    o->values = (size_t)values;
    o->reps = (int)reps;
    if (!o->values) o->values = o->demo ? (1u << 20) : (1u << 22);
    if (!o->reps) o->reps = o->demo ? 3 : 5;
    o->values -= o->values % 512;
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
        {TQ_SIMD_SCALAR, 1, TQ_BACKEND_CPU, run_encode, {0}}, {best, 1, TQ_BACKEND_CPU, run_encode, {0}},
        {TQ_SIMD_SCALAR, 1, TQ_BACKEND_CPU, run_decode, {0}}, {best, 1, TQ_BACKEND_CPU, run_decode, {0}},
        {best, o->threads, TQ_BACKEND_CPU, run_encode, {0}},  {best, o->threads, TQ_BACKEND_CPU, run_decode, {0}},
        {best, 1, TQ_BACKEND_CUDA, run_encode, {0}},          {best, 1, TQ_BACKEND_CUDA, run_decode, {0}},
    };
    int ncf = o->cuda ? 8 : 6, reps = o->reps > 64 ? 64 : o->reps;
    for (int rep = -1; rep < reps; rep++) /* rep -1 warms caches and pages */
        for (int i = 0; i < ncf; i++) {
            tq_ctx_set_simd(ctx, cf[i].simd);
            tq_ctx_set_threads(ctx, cf[i].threads);
            if (tq_ctx_set_backend(ctx, cf[i].backend) != TQ_OK) return cli_lib_error(ctx);
            int enc = cf[i].fn == run_encode;
            double t = time_once(ctx, cf[i].fn, c, enc ? (const void *)x : blk, n, enc ? blk : (void *)y);
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

static int bench_codec(const bench_opts *o)
{
    static const tq_codec_desc descs[] = {
        {TQ_CODEC_TURBO2, 0, 0, 0, 0, 0},      {TQ_CODEC_TURBO3, 0, 0, 0, 0, 0},
        {TQ_CODEC_TURBO4, 0, 0, 0, 0, 0},      {TQ_CODEC_TQ, 128, 2, 0, 0, 0},
        {TQ_CODEC_TQ, 128, 3, 1, 0, 0},        {TQ_CODEC_TQ, 128, 4, 1, 0, 0},
        {TQ_CODEC_TQ, 64, 4, 1, 0, 0},         {TQ_CODEC_TQ, 128, 8, 1, 0, 0},
    };
    size_t n = o->values;
    tq_ctx *ctx = tq_ctx_new();
    float *x = gen_kv(n, 128), *y = malloc(n * sizeof(float));
    void *blk = malloc(n * 2 + n / 8 + 4096);
    if (!ctx || !x || !y || !blk) return cli_runtime_error("out of memory for %zu values", n);
    if (o->cuda && tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA) != TQ_OK) return cli_lib_error(ctx);
    tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    printf("tq bench codec: %zu float32 values (%.1f MiB) of K-like data, median of %d runs\n", n,
           n * 4.0 / 1048576, o->reps);
    printf("SIMD: %s; per-core columns use 1 thread; all-cores uses %d threads\n",
           tq_simd_name(tq_simd_best()), o->threads ? o->threads : tq_ctx_threads(ctx));
    printf("GB/s = 1e9 bytes of float32 input (encode) or output (decode) per second\n\n");
    printf("%-16s %6s %6s %9s | %8s %8s %5s | %8s %8s %5s | %7s %7s", "codec", "bits", "x f16",
           "rel_mse", "enc ref", "enc simd", "x", "dec ref", "dec simd", "x", "enc all", "dec all");
    if (o->cuda) printf(" | %8s %8s", "enc cuda", "dec cuda");
    printf("\n");
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++) {
        tq_codec *c;
        if (tq_codec_new(ctx, &descs[i], &c) != TQ_OK) return cli_lib_error(ctx);
        tq_ctx_set_simd(ctx, TQ_SIMD_AUTO);
        tq_ctx_set_threads(ctx, 0);
        tq_encode(ctx, c, x, n, blk);
        tq_decode(ctx, c, blk, n, y);
        double bits = 8.0 * tq_codec_block_bytes(c) / tq_codec_block_values(c);
        speed_row r;
        int rc = measure(ctx, c, x, n, blk, y, o, n * 4e-9, &r);
        if (rc) return rc;
        printf("%-16s %6.3f %6.2f %9.5f | %8.2f %8.2f %5.1f | %8.2f %8.2f %5.1f | %7.2f %7.2f",
               tq_codec_name(c), bits, 16.0 / bits, rel_mse(x, y, n), r.enc_scalar, r.enc_simd,
               r.enc_simd / r.enc_scalar, r.dec_scalar, r.dec_simd, r.dec_simd / r.dec_scalar, r.enc_all,
               r.dec_all);
        if (o->cuda) printf(" | %8.2f %8.2f", r.enc_cuda, r.dec_cuda);
        printf("\n");
        fflush(stdout);
        tq_codec_free(c);
    }
    free(x), free(y), free(blk);
    tq_ctx_free(ctx);
    return 0;
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
    printf("tq bench weights: %zu Gaussian weights with rare outliers, median of %d runs\n", n, o->reps);
    printf("Mw/s = million weights per second, one core unless 'all'.  fork = the fork's search\n"
           "(bit-identical to quantize_row_tq4_1s_ref), scalar; tq = tq's search (per-half starts,\n"
           "scales picked against their fp16 value), %s; ref = the scalar decoder\n\n",
           tq_simd_name(tq_simd_best()));
    printf("%-8s %5s %11s %11s | %8s %8s %5s | %8s %8s %5s | %7s %7s\n", "type", "bits", "relmse fork",
           "relmse tq", "enc fork", "enc tq", "x", "dec ref", "dec simd", "x", "enc all", "dec all");
    tq_codec_kind kinds[2] = {TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S};
    for (int i = 0; i < 2; i++) {
        tq_codec_desc d = {kinds[i], 0, 0, 0, 0, 0};
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
               r.enc_simd, r.enc_simd / r.enc_scalar, r.dec_scalar, r.dec_simd, r.dec_simd / r.dec_scalar,
               r.enc_all, r.dec_all);
        tq_codec_free(c);
    }
    free(x), free(y), free(blk);
    tq_ctx_free(ctx);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    if (!strcmp(o.which, "codec")) return bench_codec(&o);
    if (!strcmp(o.which, "weights")) return bench_weights(&o);
    return cli_usage_error("unknown bench '%s': codec or weights", o.which);
}
