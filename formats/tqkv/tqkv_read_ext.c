/* tqkv_read_ext.c - the version 3 tensor extensions as read (TQKV.md, "Metadata": sink rows,
 * offsets and their rotation, planes, transforms, coarse rows, the source's rotation, where an
 * appended tensor's base rows sit), each field checked. */
#include "tqkv_bytes.h"
#include "tqkv_read_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A pre-RoPE offset's rotation and positions (put_rope), expanded to one
 * position per cell. */
static tq_status get_rope(tq_ctx *ctx, const tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint32_t pairs, runs, row, prev = 0;
    int32_t pos;
    uint64_t at = HDR_LEN + c->pos;
    if (mget(c, &t->rope.head_dim, 4) || mget(c, &t->rope.n_rot, 4) || mget(c, &pairs, 4) ||
        mget(c, &t->rope.freq_base, 4) || mget(c, &t->rope.freq_scale, 4) || mget(c, &runs, 4))
        return tqkv_bad(ctx, r, "RoPE offset truncated", at);
    t->rope.pairs = pairs == TQ_PAIRS_ADJACENT ? TQ_PAIRS_ADJACENT : TQ_PAIRS_HALVES;
    if (pairs != t->rope.pairs || tq_rope_check(ctx, &t->rope, t->width) || t->group < 2 || !runs ||
        runs > t->cells)
        return tqkv_bad(ctx, r, "bad RoPE offset", at);
    if (!(t->rope_pos = malloc(4ull * t->cells)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < runs; k++) {
        at = HDR_LEN + c->pos;
        if (mget(c, &row, 4) || mget(c, &pos, 4))
            return tqkv_bad(ctx, r, "RoPE positions truncated", at);
        if (k ? row < prev || row >= t->cells : row != 0)
            return tqkv_bad(ctx, r, "RoPE position runs out of order", at);
        for (uint32_t q = prev; k && q < row; q++)
            t->rope_pos[q] = (int32_t)((uint32_t)t->rope_pos[q - 1] + 1);
        t->rope_pos[row] = pos;
        prev = row + 1;
    }
    for (uint32_t q = prev; q < t->cells; q++)
        t->rope_pos[q] = (int32_t)((uint32_t)t->rope_pos[q - 1] + 1);
    return TQ_OK;
}

/* K offsets (and their rotation) of one tensor's extension. */
static tq_status get_offset(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t, uint32_t flags)
{
    if (!(t->offset = malloc(4ull * t->width)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (mget(c, t->offset, 4ull * t->width))
        return tqkv_bad(ctx, r, "offsets truncated", HDR_LEN + c->pos);
    for (uint64_t j = 0; j < t->width; j++)
        if (!isfinite(t->offset[j]))
            return tqkv_bad(ctx, r, "an offset that is not finite", HDR_LEN + c->pos);
    return flags & 2 ? get_rope(ctx, r, c, t) : TQ_OK;
}

/* The KLT codec's transforms (put_klt): every head's component count,
 * step and basis, each value finite and at most 1 in size (rows of an
 * orthonormal basis). */
static tq_status get_basis16(tq_ctx *ctx, tqkv_reader *r, mcur *c, const tqkv_record *t,
                             tqkv_klt *k)
{
    for (uint64_t i = 0; i < (uint64_t)k->m * t->group; i++) {
        uint16_t v = 0;
        mget(c, &v, 2); /* fits: checked by the caller */
        k->basis[i] = tq_fp16_to_fp32(v);
        if (!(fabsf(k->basis[i]) <= 1.0f))
            return tqkv_bad(ctx, r, "a basis value that is not finite or above 1",
                            HDR_LEN + c->pos - 2);
    }
    return TQ_OK;
}

/* put_basis's bytes: an exponent of TQKV_BASIS8_MIN_EXP - 1 .. 1 a row (the first: a zero row),
 * values -127..127 (0 in a zero row), none above 1 in size. */
static tq_status get_basis8(tq_ctx *ctx, tqkv_reader *r, mcur *c, const tqkv_record *t,
                            tqkv_klt *k)
{
    for (uint32_t row = 0; row < k->m; row++) {
        int8_t e = 0;
        mget(c, &e, 1); /* fits: checked by the caller */
        if (e < TQKV_BASIS8_MIN_EXP - 1 || e > 1)
            return tqkv_bad(ctx, r, "a basis row's exponent out of range", HDR_LEN + c->pos - 1);
        for (uint32_t j = 0; j < t->group; j++) {
            int8_t q = 0;
            mget(c, &q, 1);
            float v = e < TQKV_BASIS8_MIN_EXP ? 0.0f : ldexpf((float)q, e - 7);
            k->basis[(size_t)row * t->group + j] = v;
            if (q == -128 || (e < TQKV_BASIS8_MIN_EXP && q) || !(fabsf(v) <= 1.0f))
                return tqkv_bad(ctx, r, "a basis value that is not finite or above 1",
                                HDR_LEN + c->pos - 1);
        }
    }
    return TQ_OK;
}

static tq_status get_klt(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t nh = t->width / t->group;
    if (!(t->klt = calloc(nh, sizeof *t->klt)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t h = 0; h < nh; h++) {
        tqkv_klt *k = &t->klt[h];
        uint64_t at = HDR_LEN + c->pos;
        if (mget(c, &k->m, 4) || mget(c, &k->step, 4))
            return tqkv_bad(ctx, r, "transform truncated", at);
        if (k->m > t->group || !(k->step > 0) || !isfinite(k->step))
            return tqkv_bad(ctx, r, "bad transform (components or step)", at);
        uint64_t nv = (uint64_t)k->m * t->group;
        if (t->from_base) continue; /* the base's basis, lent at decode */
        uint64_t bytes = t->klt_basis8 ? nv + k->m : 2 * nv;
        if (bytes > c->n - c->pos) return tqkv_bad(ctx, r, "transform basis truncated", at);
        if (!(k->basis = malloc((nv ? nv : 1) * sizeof *k->basis)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        tq_status st = t->klt_basis8 ? get_basis8(ctx, r, c, t, k) : get_basis16(ctx, r, c, t, k);
        if (st) return st;
    }
    return TQ_OK;
}

/* The coarse rows' coding (put_coarse): an end past the sinks, within the cells, and not
 * before the base's rows (at their end: none of this snapshot's, the base's coarse coding kept
 * for its chunks); block codecs: a valid block of other bits; KLT: a finite step scale >= 1. */
static tq_status get_coarse(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t at = HDR_LEN + c->pos;
    uint8_t f[4];
    if (mget(c, &t->coarse_end, 4) || mget(c, f, 4) || mget(c, &t->coarse_scale, 4))
        return tqkv_bad(ctx, r, "coarse rows truncated", at);
    t->coarse_bits = f[0];
    t->coarse_uniform = f[1];
    t->coarse_nc = f[2];
    t->coarse_planes = f[3];
    if (t->coarse_end <= t->sink_rows || t->coarse_end < t->row_start ||
        t->coarse_end > t->cells || t->codec == TQKV_CODEC_RAW)
        return tqkv_bad(ctx, r, "bad coarse rows (their end)", at);
    tqkv_record v;
    tqkv_record_coarse(t, &v);
    tq_codec_desc d;
    int ok = t->codec == TQKV_CODEC_KLT
                 ? !f[0] && !f[1] && !f[2] && !f[3] && isfinite(t->coarse_scale) &&
                       t->coarse_scale >= 1.0f && t->coarse_scale <= 65536.0f
                 : t->coarse_scale == 0.0f && f[1] <= 1 && f[2] <= 1 && f[3] <= 1 &&
                       !tqkv_codec_desc(&v, &d) &&
                       (!f[3] || (t->codec == TQKV_CODEC_TQ && f[0] >= 2 && t->group % 8 == 0));
    if (!ok) return tqkv_bad(ctx, r, "bad coarse rows (their coding)", at);
    return TQ_OK;
}

/* The source's rotation (extension flag bit 5): a power-of-two block of
 * whole rows, cell-major. */
static tq_status get_hadamard(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t at = HDR_LEN + c->pos;
    if (mget(c, &t->hadamard, 4)) return tqkv_bad(ctx, r, "rotation block truncated", at);
    uint32_t n = t->hadamard;
    if (n & (n - 1) || n < TQ_RHT_MIN || n > TQ_RHT_MAX || t->width % n || t->transposed)
        return tqkv_bad(ctx, r, "bad rotation block", at);
    return TQ_OK;
}

/* Where an appended tensor's base rows sit (extension flag bit 12): not both 0, within its
 * cells (which of the base's rows is checked against the base: tq_kvsnap_check_base). */
static tq_status get_share(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t at = HDR_LEN + c->pos;
    if (mget(c, &t->share_at, 4) || mget(c, &t->base_from, 4))
        return tqkv_bad(ctx, r, "shared rows truncated", at);
    if ((!t->share_at && !t->base_from) || t->share_at > t->cells - t->row_start ||
        t->base_from > UINT32_MAX - t->row_start)
        return tqkv_bad(ctx, r, "bad shared rows", at);
    return TQ_OK;
}

/* Version 3: the extensions (sink rows, offsets, planes,
 * transforms), in tensor order. */
tq_status tqkv_parse_extensions(tq_ctx *ctx, tqkv_reader *r, mcur *c)
{
    tqkv_meta *m = &r->meta;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        if (!t->has_ext) continue;
        uint32_t flags;
        if (mget(c, &t->sink_rows, 4) || mget(c, &flags, 4))
            return tqkv_bad(ctx, r, "tensor extension truncated", HDR_LEN + c->pos);
        if (t->sink_rows >= t->cells || (t->row_start && t->row_start < t->sink_rows) ||
            flags > 8191 || (!t->sink_rows && !flags) || ((flags & 3) == 2 && !(flags & 2048)) ||
            ((flags & 1984) && !(flags & 8)) || ((flags & 512) && !(flags & 64)) ||
            ((flags & 6144) && !t->row_start) || ((flags & 2048) && ((flags & 1) || t->innerq)) ||
            ((flags & 4) && (t->codec != TQKV_CODEC_TQ || t->bits < 2 || t->group % 8)) ||
            !(flags & 8) != (t->codec != TQKV_CODEC_KLT) ||
            (t->codec == TQKV_CODEC_RAW && (t->sink_rows || (flags & ~4128u)))) /* kept */
            return tqkv_bad(ctx, r, "bad tensor extension", HDR_LEN + c->pos);
        t->planes = (flags & 4) != 0;
        t->klt_rans = (flags & 64) != 0;
        t->klt_gain = (flags & 128) != 0;
        t->klt_basis8 = (flags & 256) != 0;
        t->klt_rans_coarse = (flags & 512) != 0;
        t->chunks_grow = (flags & 1024) != 0;
        t->from_base = (flags & 2048) != 0;
        tq_status st = TQ_OK;
        if (flags & 1) st = get_offset(ctx, r, c, t, flags);
        if (!st && (flags & 3) == 2) st = get_rope(ctx, r, c, t); /* the base's offsets */
        if (!st && (flags & 8)) st = get_klt(ctx, r, c, t);
        if (!st && (flags & 16)) st = get_coarse(ctx, r, c, t);
        if (!st && (flags & 32)) st = get_hadamard(ctx, r, c, t);
        if (!st && (flags & 4096)) st = get_share(ctx, r, c, t);
        if (st) return st;
    }
    return TQ_OK;
}
