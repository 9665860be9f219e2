/* rotate_plan.h - what `tq rotate-weights` does to each tensor of a model:
 * the architecture check (llama-like graphs, and gemma2/gemma3 for R2 only;
 * everything else refused with the reason) and each tensor's role in the
 * residual stream. */
#ifndef TQ_ROTATE_PLAN_H
#define TQ_ROTATE_PLAN_H

#include "gguf.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    RR_COPY = 0,   /* unchanged (rope frequencies, per-head Q/K norms, reader biases) */
    RR_NORM,       /* an RMSNorm gain: folded into its readers, written as ones */
    RR_EMBED,      /* token embeddings: rows rotated by R1 */
    RR_READER,     /* rows (input side, n_embd) rotated by R1 after the norm is folded in */
    RR_WRITER,     /* output side (n_embd) rotated by R1 */
    RR_WRITER_BIAS /* a writer's bias: rotated by R1 */
} rr_role;

typedef struct rr_tensor {
    int64_t src;      /* input tensor index; for an untied output, token_embd's */
    const char *name; /* output name */
    rr_role role;
    int64_t norm; /* RR_READER: the gain folded in (-1 none) */
    int v_rows;   /* attn_v weight/bias: R2 on each KV head's output block */
    int o_cols;   /* attn_output: R2' on each query head's input block */
    int untied;   /* the output matrix made from tied embeddings (R1 only) */
} rr_tensor;

typedef struct rr_model {
    char arch[64];
    uint32_t n_embd, n_head, n_head_kv, head_dim, head_dim_v, n_layer;
    int tied;             /* no output.weight: token_embd is also the output matrix */
    char r1_blocker[320]; /* why R1 cannot be folded into this graph ("" if it can) */
    int r1;               /* R1 planned */
    size_t n;
    rr_tensor *t; /* output tensors in order */
} rr_model;

/* 0, or -1 with a one-line reason recorded in ctx (unsupported architecture
 * or tensor, missing tensors, wrong shapes, a type tq cannot decode).  A
 * graph that only R1 cannot take is planned, with the reason in
 * m->r1_blocker; the caller refuses R1 on it. */
/* want_r1: 1 on (refused, with the reason, where the graph cannot take it),
 * 0 off, -1 wherever the graph allows (m->r1 says what was planned). */
int rr_plan(tq_ctx *ctx, const tq_gguf *g, int want_r1, rr_model *m);
void rr_free(rr_model *m);

#endif
