/* bench.h - what the parts of `tq bench` share: the workload (heads of K, V
 * and queries), the codec list, the metrics of the four benchmark layers,
 * and the report (table, JSON, SVG). */
#ifndef TQ_BENCH_H
#define TQ_BENCH_H

#include "tq.h"

#include <stddef.h>
#include <stdint.h>

/* One attention head's sample: n keys and values of d values, m queries. */
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

/* ---- metrics (cmd/bench_metrics.c): plain double-precision definitions */
typedef struct battn {
    double kl;      /* mean over queries of KL(softmax(qK/sqrt d) || softmax(qK^/sqrt d)) */
    double out_cos; /* mean cosine of p V and p^ V^ */
    double topk;    /* mean |top-k(p) & top-k(p^)| / k */
    double skipped; /* sparse V: share of value rows skipped */
} battn;

/* One head: exact K, V against decoded Kd, Vd; k for the overlap; tau > 0
 * skips value rows whose decoded weight is below it (sparse V). */
void bm_attention(const bhead *h, const float *kd, const float *vd, int k, double tau, battn *out);
/* Sum of squared errors and of squares, max |error|, and the summed
 * per-vector cosine of n vectors of d. */
void bm_recon(const float *x, const float *y, size_t n, uint32_t d, double *se, double *sx,
              double *max_err, double *cos_sum);
/* KL of the histogram of pair angles atan2(y[2i+1], y[2i]) over `bins`
 * equal bins against the uniform law. */
double bm_angle_kl(const float *y, size_t n_pairs, int bins);

#endif
