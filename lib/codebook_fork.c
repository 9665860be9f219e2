/* codebook_fork.c - the TurboQuant+ fork's weight codebooks, verbatim (TT 69d8e4be4,
 * ggml-turbo-quant.c): constants of a file format, not recomputed.  Its KV tables are its
 * revisions' (lib/fork_revisions.c). */
#include "tq_internal.h"

#include <stddef.h>

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

static const tq_codebook weight_books[] = {
    {3, 8, w3_c, w3_t, 0.0},
    {4, 16, w4_c, w4_t, 0.0},
};

const tq_codebook *tq_codebook_fork(tq_codebook_kind kind)
{
    tq_fork_block_info b;
    switch (kind) {
        case TQ_CB_TURBO2:
        case TQ_CB_TURBO3:
        case TQ_CB_TURBO4:
            tq_fork_block(0, (uint32_t)(kind - TQ_CB_TURBO2) + 2, &b); /* the first row's */
            return b.book;
        case TQ_CB_TQ3W:
            return &weight_books[0];
        case TQ_CB_TQ4W:
            return &weight_books[1];
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
