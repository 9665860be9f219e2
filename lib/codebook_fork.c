/* codebook_fork.c - the TurboQuant+ fork's codebooks, verbatim (TT 69d8e4be4,
 * ggml-turbo-quant.c; the KV tables after its PR #197 below).  They are
 * constants of a file format, not something we can recompute: the old 4-bit
 * KV table in particular is empirical, and the fork's typed midpoints, not
 * ours, decide an index (lib/TURBO_REVISIONS.md). */
#include "tq_internal.h"

#include <stddef.h>

static const float kv2_c[4] = {-0.133462f, -0.039994f, 0.039994f, 0.133462f};
static const float kv2_t[3] = {-0.086728f, 0.0f, 0.086728f};

static const float kv3_c[8] = {-0.190685f, -0.117832f, -0.065717f, -0.021460f,
                               0.021460f,  0.065717f,  0.117832f,  0.190685f};
static const float kv3_t[7] = {-0.154259f, -0.091775f, -0.043589f, 0.0f,
                               0.043589f,  0.091775f,  0.154259f};

static const float kv4_c[16] = {
    -0.173926f, -0.117195f, -0.089527f, -0.068756f, -0.051262f, -0.035597f, -0.020989f, -0.006938f,
    0.006938f,  0.020989f,  0.035597f,  0.051262f,  0.068756f,  0.089527f,  0.117195f,  0.173926f};
static const float kv4_t[15] = {-0.145560f, -0.103361f, -0.079142f, -0.060009f, -0.043430f,
                                -0.028293f, -0.013963f, 0.0f,       0.013963f,  0.028293f,
                                0.043430f,  0.060009f,  0.079142f,  0.103361f,  0.145560f};

/* After the fork's PR #197 (2026-06-26): converged Lloyd-Max tables for N(0, 1/128) and the
 * midpoints the fork's nearest_centroid_3bit / _4bit compare against. */
static const float kv3n_c[8] = {-0.190207f, -0.118786f, -0.066822f, -0.021663f,
                                0.021663f,  0.066822f,  0.118786f,  0.190207f};
static const float kv3n_t[7] = {-0.154496f, -0.092804f, -0.044243f, 0.0f,
                                0.044243f,  0.092804f,  0.154496f};

static const float kv4n_c[16] = {
    -0.241529f, -0.182877f, -0.143016f, -0.111036f, -0.083292f, -0.058050f, -0.034299f, -0.011349f,
    0.011349f,  0.034299f,  0.058050f,  0.083292f,  0.111036f,  0.143016f,  0.182877f,  0.241529f};
static const float kv4n_t[15] = {-0.212203f, -0.162947f, -0.127026f, -0.097164f, -0.070671f,
                                 -0.046174f, -0.022824f, 0.0f,       0.022824f,  0.046174f,
                                 0.070671f,  0.097164f,  0.127026f,  0.162947f,  0.212203f};

static const float w4_c[16] = {
    -2.732590f, -2.069017f, -1.618046f, -1.256231f, -0.942340f, -0.656759f, -0.388048f, -0.128395f,
    0.128395f,  0.388048f,  0.656759f,  0.942340f,  1.256231f,  1.618046f,  2.069017f,  2.732590f};
static const float w4_t[15] = {-2.400804f, -1.843532f, -1.437139f, -1.099286f, -0.799550f,
                               -0.522404f, -0.258222f, 0.0f,       0.258222f,  0.522404f,
                               0.799550f,  1.099286f,  1.437139f,  1.843532f,  2.400804f};

/* TQ3 is asymmetric in the fork; keep it so. */
static const float w3_c[8] = {-1.996684f, -1.291398f, -0.740341f, -0.247508f,
                              0.230106f,  0.725222f,  1.277503f,  1.988943f};
static const float w3_t[7] = {-1.644041f, -1.015870f, -0.493925f, -0.008701f,
                              0.477664f,  1.001363f,  1.633223f};

static const tq_codebook fork_books[] = {
    {2, 4, kv2_c, kv2_t, 0.0}, {3, 8, kv3_c, kv3_t, 0.0}, {4, 16, kv4_c, kv4_t, 0.0},
    {3, 8, w3_c, w3_t, 0.0},   {4, 16, w4_c, w4_t, 0.0},  {3, 8, kv3n_c, kv3n_t, 0.0},
    {4, 16, kv4n_c, kv4n_t, 0.0},
};

const tq_codebook *tq_codebook_fork(tq_codebook_kind kind)
{
    switch (kind) {
        case TQ_CB_TURBO2:
            return &fork_books[0];
        case TQ_CB_TURBO3:
            return &fork_books[1];
        case TQ_CB_TURBO4:
            return &fork_books[2];
        case TQ_CB_TQ3W:
            return &fork_books[3];
        case TQ_CB_TQ4W:
            return &fork_books[4];
        case TQ_CB_TURBO3_PR197:
            return &fork_books[5];
        case TQ_CB_TURBO4_PR197:
            return &fork_books[6];
        default:
            return NULL;
    }
}

tq_status tq_codebook_get(tq_ctx *ctx, tq_codebook_kind kind, uint32_t g, uint32_t bits,
                          tq_codebook *out)
{
    TQ_NEED_CTX(ctx);
    const tq_codebook *cb;
    if (kind == TQ_CB_EXACT) {
        if (!tq_is_pow2(g) || g < TQ_RHT_MIN || g > TQ_RHT_MAX)
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                    "codebook group %u is not a power of two in [%d, %d]", g,
                                    TQ_RHT_MIN, TQ_RHT_MAX);
        if (bits < 1 || bits > 8)
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "codebook bits %u outside 1..8", bits);
        cb = tq_codebook_exact(g, bits);
        if (!cb) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory computing a codebook");
    } else {
        cb = tq_codebook_fork(kind);
        if (!cb) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown codebook kind %d", (int)kind);
    }
    *out = *cb;
    return TQ_OK;
}
