/* bench_measure.h - what `tq bench` measures (BENCH.md), without a word printed: the workload
 * (heads of K, V and queries: bench_workload.c), the KV codecs compared (bench_codecs.c), the
 * four layers of KV figures (bench_kv.c) and the weight codecs, on generated weights or a
 * model's own tensors (bench_weights.c).  cmd/bench.c reports them (table, JSON, SVG). */
#ifndef TQ_BENCH_MEASURE_H
#define TQ_BENCH_MEASURE_H

#include "model.h"
#include "tq.h"

#include <stddef.h>
#include <stdint.h>

/* One attention head's sample: n keys and values of d values, m queries (the workload's,
 * which it fills; tq_attn_head is its read-only face). */
typedef struct bhead {
    uint32_t d, n, m;
    uint32_t layer, n_layers;
    float *k, *v, *q;
} bhead;

typedef struct bworkload {
    bhead *h;
    size_t n_heads;
    char what[160]; /* "built-in: ...", or the file and how queries were made */
} bworkload;

/* A codec as the bench runs it on a set of n vectors of d values. */
typedef struct bcodec {
    const char *family; /* "tq", "turbo", "angle", "prod", "ggml", "f16", "zstd" */
    char label[40]; /* "tq b=3", "turbo3", "q4_K", ... (per head size the name may add the group) */
    double nominal_bits; /* what it is matched at */
    tq_codec_kind kind;  /* block codecs */
    uint32_t bits, radius_bits, nc;
    int dtype; /* ggml / float types: a tq_dtype, else -1 */
} bcodec;

/* A codec made ready for vectors of d values (its block codec built). */
typedef struct bcodec_run {
    const bcodec *c;
    uint32_t d;
    tq_codec *tc; /* block codecs */
    int pad;      /* turbo on heads below 128: each vector padded to 128 */
} bcodec_run;

/* 0, or -1 with *why when the codec cannot take vectors of d. */
int bc_open(tq_ctx *ctx, const bcodec *c, uint32_t d, bcodec_run *r, char *why, size_t wl);
void bc_close(bcodec_run *r);
/* Bytes that n vectors take at most (buffer size). */
uint64_t bc_bound(const bcodec_run *r, size_t n);
/* n vectors in, the stored bytes out (everything a file would hold: blocks,
 * padding, the zstd frame); returns their count, 0 on failure. */
uint64_t bc_encode(tq_ctx *ctx, const bcodec_run *r, const float *x, size_t n, uint8_t *buf);
int bc_decode(tq_ctx *ctx, const bcodec_run *r, const uint8_t *buf, uint64_t bytes, size_t n,
              float *y);
/* The codecs `tq bench` compares, in table order. */
size_t bc_list(const bcodec **out);

/* ---- metrics: libtq's (tq.h, "quality of decoded K/V") */
typedef tq_attn_error battn;

/* ---- timing (bench_clock.c): monotonic seconds; the median of t[n], t left sorted */
double bench_now(void);
double bench_median(double *t, int n);

/* ---- the workload */
int bw_builtin(bworkload *w, int quick);
/* A state file, NumPy dump or .tqkv snapshot (through the KV front door),
 * the model (or NULL) giving the head size. */
int bw_from_file(tq_ctx *ctx, bworkload *w, const char *path, const tq_model *model, int quick,
                 char *err, size_t el);
void bw_free(bworkload *w);

/* ---- KV codecs: the four layers */
/* What `tq bench kv` runs on and how long. */
typedef struct bkv_opts {
    int quick;          /* fewer heads, values and vectors */
    int reps, threads;  /* timed repetitions; threads for the all-cores column (0: all) */
    const char *kv;     /* a state, NumPy dump or snapshot to sample, NULL: generated */
} bkv_opts;

/* One codec's figures (NAN where not measured). */
typedef struct bkv_row {
    const bcodec *c;
    uint64_t bytes, values; /* over the heads it could take */
    size_t heads, heads_skipped;
    double bpv, rel_mse, cosine, max_err;
    double unit_dmse, unit_cos; /* random unit vectors, d = 128 */
    double ip_bias, ip_var;     /* <y, x^> - <y, x> for unit x and unit y: mean and variance */
    double scores_gbps,
        decode_dot_gbps; /* q.k for every key from the blocks vs decode then dot (one core) */
    battn attn;
    /* GB/s of float32, medians; spread = (max - min) / median over the repetitions */
    double enc_scalar, enc_simd, enc_all, dec_scalar, dec_simd, dec_all, enc_spread, dec_spread;
} bkv_row;

/* Layer 2's extras: K and V with different codecs, boundary layers, sparse V. */
typedef struct bkv_pair {
    char what[96];
    double bpv;
    battn attn;
} bkv_pair;

typedef struct bkv_result {
    char workload[200];
    bkv_row *rows;
    size_t n_rows;
    bkv_pair pairs[8];
    size_t n_pairs;
    double theory_dmse[4], theory_measured[4]; /* b = 1..4, d = 128 */
    double angle_kl_rotated, angle_kl_raw;     /* 256-bin histogram of pair angles vs uniform */
    size_t speed_values;
    int reps, threads;
    double peak_mb, seconds;
} bkv_result;

/* The four layers for every codec of bc_list() into *res (res->rows allocated: free them with
 * bkv_result_free); model (or NULL) gives a file's head size. */
tq_status bkv_measure(tq_ctx *ctx, const bkv_opts *o, const tq_model *model, bkv_result *res);
void bkv_result_free(bkv_result *res);

/* ---- weights: the fork's weight codecs on generated weights (`tq bench weights`) */
typedef struct bwt_opts {
    size_t values;      /* Gaussian weights with rare outliers */
    int reps, threads;  /* timed repetitions; threads for the all-cores columns (0: all) */
} bwt_opts;

typedef struct bwt_row {
    char name[16];                        /* the codec's */
    double bits;                          /* per weight */
    double rel_mse_fork, rel_mse_best;    /* the fork's search, tq's */
    double enc_fork;                      /* Mw/s: the fork's search, scalar, one core */
    double enc_simd, dec_scalar, dec_simd, enc_all, dec_all; /* tq's search (simd: best), Mw/s */
} bwt_row;

/* TQ4_1S and TQ3_1S into rows[2]: errors of both searches, speeds as medians of interleaved
 * repetitions. */
tq_status bwt_generated(tq_ctx *ctx, const bwt_opts *o, bwt_row rows[2]);

/* ---- weights: every weight type tq writes on a model's own tensors (`tq bench --model`) */
#define BWT_MODEL_CODECS 8

typedef struct bwt_model_result {
    int used;                               /* weight matrices sampled */
    size_t cap;                             /* values sampled per matrix at most */
    double total;                           /* weights coded */
    const char *name[BWT_MODEL_CODECS];     /* the codecs, in table order */
    double bits[BWT_MODEL_CODECS];          /* per weight (NAN: no matrix it could take) */
    double rel_error[BWT_MODEL_CODECS];     /* squared error over energy (NAN: as bits) */
    double encode_mws[BWT_MODEL_CODECS];    /* million weights a second, one core, median */
} bwt_model_result;

/* Up to 16 (quick: 4) weight matrices spread over g, their first Mi values each, dequantized
 * and coded with each type; TQ_ERR_ARG where g has no matrix tq can decode with rows of 32s. */
tq_status bwt_model(tq_ctx *ctx, const tq_gguf *g, int quick, int reps, bwt_model_result *res);

#endif
