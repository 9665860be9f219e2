/* kv_chain.c - what a block-coded record's rows go through on either side of the codec
 * (kv_chunk.h), written once for both directions so that the decode undoes the encode in the
 * reverse order:
 *   encode: 1. K's pre-RoPE offset out, turned to each cell's position (rope_pos)
 *           2. InnerQ's per-channel scales in
 *           3. the plain offset out (an offset without rope_pos)
 *   decode: 3, 2, 1 undone. */
#include "kv_chunk.h"

tq_status tq_kvsnap_rows_to_code(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t n,
                                 float *x)
{
    size_t nv = (size_t)n * t->width;
    tq_status st = TQ_OK;
    if (t->rope_pos)
        st = tq_rope_add(ctx, &t->rope, t->offset, x, n, t->width, t->rope_pos + row0, -1.0f);
    if (!st && t->innerq) st = tq_innerq_apply(ctx, x, nv, t->innerq, t->innerq_n, 0);
    if (!st && t->offset && !t->rope_pos) chunk_offset(x, n, t->offset, t->width, -1.0f);
    return st;
}

tq_status tq_kvsnap_rows_from_code(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t n,
                                   float *y)
{
    size_t nv = (size_t)n * t->width;
    tq_status st = TQ_OK;
    if (t->offset && !t->rope_pos) chunk_offset(y, n, t->offset, t->width, 1.0f);
    if (t->innerq) st = tq_innerq_apply(ctx, y, nv, t->innerq, t->innerq_n, 1);
    if (!st && t->rope_pos)
        st = tq_rope_add(ctx, &t->rope, t->offset, y, n, t->width, t->rope_pos + row0, 1.0f);
    return st;
}
