/* bench.h - what the parts of `tq bench` share: the workload (heads of K, V
 * and queries), the codec list, the metrics of the four benchmark layers,
 * and the report (table, JSON, SVG). */
#ifndef TQ_BENCH_H
#define TQ_BENCH_H

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

#endif
