/* kv_chunk.h - one chunk of rows on its way through a snapshot pipeline
 * (kv_snapshot_encode.c, kv_snapshot_decode.c): its bytes, or why a worker
 * thread could not make them (reported by the writing thread, in order). */
#ifndef TQ_KV_CHUNK_H
#define TQ_KV_CHUNK_H

#include "tq.h"
#include "tqkv.h"

#include <stdint.h>
#include <stdio.h>

typedef struct chunk_out {
    uint8_t *p;
    uint64_t len;
    tq_status st;
    char err[512];
} chunk_out;

/* Records a failure: the worker context's message, or "out of memory"
 * when there is no context. */
static inline void chunk_fail(chunk_out *o, const tq_ctx *c, tq_status st)
{
    o->st = st;
    snprintf(o->err, sizeof o->err, "%s", c ? tq_ctx_error(c) : "out of memory");
}

/* A worker's contexts: the codec on the caller's backend (dev), element
 * conversions and transforms on the CPU (cpu: dev itself when that is the
 * CPU).  0 when out of memory (both NULL). */
static inline int chunk_ctxs(const tq_ctx *parent, tq_ctx **cpu, tq_ctx **dev)
{
    *cpu = *dev = tq_ctx_clone(parent);
    if (*dev && tq_ctx_backend(*dev) != TQ_BACKEND_CPU &&
        (!(*cpu = tq_ctx_clone(*dev)) || tq_ctx_set_backend(*cpu, TQ_BACKEND_CPU))) {
        tq_ctx_free(*cpu);
        tq_ctx_free(*dev);
        *cpu = *dev = NULL;
    }
    return *dev != NULL;
}

static inline void chunk_ctxs_free(tq_ctx *cpu, tq_ctx *dev)
{
    if (cpu != dev) tq_ctx_free(cpu);
    tq_ctx_free(dev);
}

/* A tensor's per-channel offset out of (sign -1, before coding) or back into
 * (sign 1, after decoding) rows of width values. */
static inline void chunk_offset(float *x, size_t rows, const float *off, uint64_t width, float sign)
{
    for (size_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < width; j++) x[r * width + j] += sign * off[j];
}

/* A block-coded record's rows [row0, row0 + n) on their way into the codec (x: [n][width], in
 * place) and back out of it (y), the one inverse of the other (kv_chain.c). */
tq_status tq_kvsnap_rows_to_code(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t n,
                                 float *x);
tq_status tq_kvsnap_rows_from_code(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t n,
                                   float *y);

#endif
