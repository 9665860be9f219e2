/* codec.c - codec descriptors and the row-parallel entry points.  Blocks are
 * independent, so splitting them over threads cannot change a byte. */
#include "tq_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks per unit of parallel work: large enough to amortise scheduling,
 * a multiple of every SIMD width. */
#define TQ_CHUNK_BLOCKS 256

static tq_status fix_fork(tq_ctx *ctx, const tq_codec_desc *d, const char *name)
{
    if (d->group || d->bits || d->norm_correction || d->seed)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "codec %s has a fixed layout: group, bits, norm_correction and seed must be 0", name);
    return TQ_OK;
}

/* What a descriptor makes, before any table is built: the layout, the block's size, the
 * parameters of the KV kernels and the codebook kind. */
typedef struct codec_shape {
    tq_layout layout;
    size_t block_values, block_bytes;
    uint32_t g, bits, norm_correction;
    tq_codebook_kind cbk;
    char name[48];
    const tq_codebook *book; /* a fork revision's typed-in table (else cbk's) */
} codec_shape;

static int group_ok(uint32_t g) { return tq_is_pow2(g) && g >= 8 && g <= 512; }

/* The fork's KV blocks: groups of 128, its signs and norm correction; the layout, size and
 * table of the revision's row (lib/fork_revisions.c). */
static tq_status shape_turbo(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    uint32_t bits = (uint32_t)(d->kind - TQ_CODEC_TURBO2) + 2;
    if (d->fork_rev >= tq_fork_revision_count())
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "fork revision %u: there are %u", d->fork_rev,
                                tq_fork_revision_count());
    tq_fork_block_info b;
    tq_fork_block(d->fork_rev, bits, &b);
    *s = (codec_shape){b.layout, 128, b.bytes, 128, bits, 1, TQ_CB_EXACT, "", b.book};
    if (b.first)
        snprintf(s->name, sizeof s->name, "turbo%u-%s", bits, b.first);
    else
        snprintf(s->name, sizeof s->name, "turbo%u", bits);
    return fix_fork(ctx, d, s->name);
}

static tq_status shape_tq(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    if (!group_ok(d->group))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "tq codec group %u is not a power of two in [8, 512]", d->group);
    if (d->bits < 1 || d->bits > 8)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "tq codec bits %u outside 1..8", d->bits);
    if (d->norm_correction > 1)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "tq codec norm_correction must be 0 or 1");
    if (d->uniform > 1 || (d->uniform && d->bits < 2))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                       "tq codec: uniform cells need 2..8 bits (uniform %u, bits %u)", d->uniform,
                       d->bits);
    *s = (codec_shape){TQ_LAYOUT_TQ, d->group, 2 + tq_packed_bytes(d->group, d->bits), d->group,
                       d->bits, d->norm_correction, TQ_CB_EXACT, "", NULL};
    snprintf(s->name, sizeof s->name, "tq(g=%u,b=%u%s%s)", d->group, d->bits,
             d->norm_correction ? ",nc" : "", d->uniform ? ",uniform" : "");
    return TQ_OK;
}

/* The fork's weight blocks: 32 values, one sign vector. */
static tq_status shape_weights(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    int four = d->kind == TQ_CODEC_TQ4_1S;
    *s = (codec_shape){four ? TQ_LAYOUT_W4 : TQ_LAYOUT_W3, 32, four ? 20 : 16, 32, four ? 4 : 3,
                       0, four ? TQ_CB_TQ4W : TQ_CB_TQ3W, "", NULL};
    snprintf(s->name, sizeof s->name, "%s", four ? "tq4_1s" : "tq3_1s");
    return fix_fork(ctx, d, s->name);
}

static tq_status shape_angle(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    if (!group_ok(d->group))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "angle codec group %u is not a power of two in [8, 512]", d->group);
    if (d->bits < 1 || d->bits > 8 || d->radius_bits > 8 || d->norm_correction > 1)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "angle codec: angle bits %u (1..8), radius bits %u (0..8), "
                                "norm_correction %u (0/1)",
                                d->bits, d->radius_bits, d->norm_correction);
    size_t radii = d->radius_bits ? tq_packed_bytes(d->group / 2, d->radius_bits) : 0;
    /* bits 1: an unused codebook; the angle levels are uniform */
    *s = (codec_shape){TQ_LAYOUT_ANGLE, d->group,
                       2 + tq_packed_bytes(d->group / 2, d->bits) + radii,
                       d->group, 1, d->norm_correction, TQ_CB_EXACT, "", NULL};
    snprintf(s->name, sizeof s->name, "angle(g=%u,A=%u,r=%u%s)", d->group, 1u << (d->bits & 15),
             d->radius_bits, d->norm_correction ? ",nc" : "");
    return TQ_OK;
}

static tq_status shape_prod(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    if (!group_ok(d->group))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "prod codec group %u is not a power of two in [8, 512]", d->group);
    if (d->bits < 2 || d->bits > 8 || d->norm_correction || d->radius_bits)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "prod codec: bits %u outside 2..8 (b-1 MSE bits + 1 sketch bit), "
                                "norm_correction and radius_bits must be 0",
                                d->bits);
    *s = (codec_shape){TQ_LAYOUT_PROD, d->group,
                       4 + tq_packed_bytes(d->group, d->bits - 1) + d->group / 8, d->group,
                       d->bits - 1, 0, TQ_CB_EXACT, "", NULL};
    snprintf(s->name, sizeof s->name, "prod(g=%u,b=%u)", d->group, d->bits);
    return TQ_OK;
}

/* Each kind's shape (its blocks, rotation and codebooks), by tq_codec_kind. */
typedef tq_status (*shape_fn)(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s);
/* clang-format off */
static const shape_fn shape_of_kind[] = {
    [TQ_CODEC_TURBO2] = shape_turbo, [TQ_CODEC_TURBO3] = shape_turbo,
    [TQ_CODEC_TURBO4] = shape_turbo, [TQ_CODEC_TQ] = shape_tq, [TQ_CODEC_TQ3_1S] = shape_weights,
    [TQ_CODEC_TQ4_1S] = shape_weights, [TQ_CODEC_ANGLE] = shape_angle, [TQ_CODEC_PROD] = shape_prod,
};
/* clang-format on */

static tq_status shape_of(tq_ctx *ctx, const tq_codec_desc *d, codec_shape *s)
{
    memset(s, 0, sizeof *s);
    size_t k = (size_t)d->kind;
    if (k >= sizeof shape_of_kind / sizeof shape_of_kind[0] || !shape_of_kind[k])
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown codec kind %d", (int)d->kind);
    tq_status st = shape_of_kind[k](ctx, d, s);
    if (!st && d->kind != TQ_CODEC_ANGLE && d->radius_bits)
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "radius_bits is for the angle codec only");
    if (!st && d->kind != TQ_CODEC_TQ && d->uniform)
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "uniform cells are for the tq codec only");
    int turbo = d->kind >= TQ_CODEC_TURBO2 && d->kind <= TQ_CODEC_TURBO4;
    if (!st && !turbo && d->fork_rev)
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "fork_rev is for the fork's KV codecs only");
    return st;
}

tq_status tq_codec_desc_sizes(tq_ctx *ctx, const tq_codec_desc *d, size_t *block_values,
                              size_t *block_bytes)
{
    TQ_NEED_CTX(ctx);
    codec_shape s;
    tq_status st = shape_of(ctx, d, &s);
    if (st) return st;
    *block_values = s.block_values;
    *block_bytes = s.block_bytes;
    return TQ_OK;
}

/* The sign diagonals the rotation uses (s1 | s2), and an angle codec's radius codebook or a
 * prod codec's sketch. */
static tq_status make_tables(tq_ctx *ctx, tq_codec *c)
{
    tq_block_params *p = &c->kv;
    const tq_codec_desc *d = &c->desc;
    if (!(c->signs = malloc(2 * p->g * sizeof(float))))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory creating a codec");
    float *s1 = c->signs, *s2 = c->signs + p->g;
    if (c->layout == TQ_LAYOUT_W3 || c->layout == TQ_LAYOUT_W4) {
        tq_signs_weight32(s1); /* one sign vector: the second factor is I */
        for (uint32_t i = 0; i < 32; i++) s2[i] = 1.0f;
    } else {
        int own = c->layout == TQ_LAYOUT_TQ || c->layout == TQ_LAYOUT_ANGLE ||
                  c->layout == TQ_LAYOUT_PROD;
        tq_signs_kv(ctx, p->g, own ? d->seed : TQ_SEED_FORK, s1, s2);
        if (c->layout == TQ_LAYOUT_ANGLE) /* one sign diagonal, then the orthonormal transform */
            for (uint32_t i = 0; i < p->g; i++) s2[i] = 1.0f;
    }
    p->s1 = s1;
    p->s2 = s2;
    if (c->layout == TQ_LAYOUT_ANGLE && d->radius_bits) {
        uint32_t k = 1u << d->radius_bits;
        if (!(c->extra = malloc(2 * k * sizeof(float))) ||
            tq_angle_radius_codebook(p->g, d->radius_bits, c->extra, c->extra + k))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory creating a codec");
    }
    if (c->layout == TQ_LAYOUT_PROD) {
        if (!(c->extra = malloc((size_t)p->g * p->g * sizeof(float))))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory creating a codec");
        tq_prod_sketch(p->g, d->seed, c->extra);
    }
    return TQ_OK;
}

tq_status tq_codec_new(tq_ctx *ctx, const tq_codec_desc *d, tq_codec **out)
{
    TQ_NEED_CTX(ctx);
    *out = NULL;
    codec_shape s;
    tq_status st = shape_of(ctx, d, &s);
    if (st) return st;
    tq_codec *c = calloc(1, sizeof *c);
    if (!c) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory creating a codec");
    c->desc = *d;
    c->layout = s.layout;
    c->block_values = s.block_values;
    c->block_bytes = s.block_bytes;
    snprintf(c->name, sizeof c->name, "%s", s.name);
    tq_block_params *p = &c->kv;
    p->g = s.g;
    p->bits = s.bits;
    p->norm_correction = s.norm_correction;
    if ((st = make_tables(ctx, c))) {
        tq_codec_free(c);
        return st;
    }
    p->scale = tq_rht_scale(p->g);
    if (d->kind == TQ_CODEC_TQ && d->uniform)
        p->cb = tq_codebook_uniform(p->g, p->bits);
    else if (s.book)
        p->cb = s.book;
    else if (s.cbk == TQ_CB_EXACT)
        p->cb = tq_codebook_exact(p->g, p->bits);
    else
        p->cb = tq_codebook_fork(s.cbk);
    if (!p->cb) {
        tq_codec_free(c);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory computing a codebook");
    }
    for (uint32_t k = 0; k < 256; k++) {
        p->cen[k] = k < p->cb->size ? p->cb->centroids[k] : 0.0f;
        p->thr[k] = k + 1 < p->cb->size ? p->cb->thresholds[k] : INFINITY;
    }
    *out = c;
    return TQ_OK;
}

void tq_codec_free(tq_codec *c)
{
    if (!c) return;
    free(c->signs);
    free(c->extra);
    free(c);
}

const tq_codec_desc *tq_codec_get_desc(const tq_codec *c) { return &c->desc; }
size_t tq_codec_block_values(const tq_codec *c) { return c->block_values; }
size_t tq_codec_block_bytes(const tq_codec *c) { return c->block_bytes; }
const char *tq_codec_name(const tq_codec *c) { return c->name; }

static int is_weight(const tq_codec *c)
{
    return c->layout == TQ_LAYOUT_W3 || c->layout == TQ_LAYOUT_W4;
}
/* TurboAngle and TurboQuant-prod: portable C, no SIMD or device kernels */
static int is_plain(const tq_codec *c)
{
    return c->layout == TQ_LAYOUT_ANGLE || c->layout == TQ_LAYOUT_PROD;
}

tq_status tq_codec_set_weight_search(tq_ctx *ctx, tq_codec *c, tq_weight_search s)
{
    TQ_NEED_CTX(ctx);
    if (!is_weight(c))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "codec %s has no weight search", c->name);
    if (s != TQ_WSEARCH_BEST && s != TQ_WSEARCH_FORK)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown weight search %d", (int)s);
    c->wsearch = s;
    return TQ_OK;
}

static tq_status check_n(tq_ctx *ctx, const tq_codec *c, size_t n)
{
    if (n % c->block_values)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                       "%zu values is not a whole number of %s blocks (%zu values each)", n,
                       c->name, c->block_values);
    return TQ_OK;
}

/* One call's work: which direction, and the kernel set to run it. */
typedef struct job {
    const tq_codec *c;
    const tq_kernels *k;
    int encode, rotated;
    const void *in;
    void *out;
} job;

/* nb blocks through a one-block decoder, then (unless rotated) the inverse
 * RHT of each: the CPU path of the TurboAngle and TurboQuant-prod blocks. */
typedef void (*block_decoder)(const tq_codec *c, const uint8_t *in, float *y);
static void decode_span(const tq_codec *c, block_decoder one, const uint8_t *in, size_t nb,
                        float *y, int rotated)
{
    for (size_t b = 0; b < nb; b++) {
        one(c, in + b * c->block_bytes, y + b * c->kv.g);
        if (!rotated) tq_rht_inverse_raw(c->kv.g, c->kv.s1, c->kv.s2, y + b * c->kv.g);
    }
}

static void run_span(const job *j, size_t b0, size_t m)
{
    const tq_codec *c = j->c;
    if (j->encode) {
        const float *x = (const float *)j->in + b0 * c->block_values;
        uint8_t *o = (uint8_t *)j->out + b0 * c->block_bytes;
        if (c->layout == TQ_LAYOUT_ANGLE)
            tq_angle_encode(c, x, m, o);
        else if (c->layout == TQ_LAYOUT_PROD)
            tq_prod_encode(c, x, m, o);
        else if (is_weight(c))
            j->k->w_encode(c, x, m, o);
        else
            j->k->kv_encode(c, x, m, o);
    } else {
        const uint8_t *i = (const uint8_t *)j->in + b0 * c->block_bytes;
        float *y = (float *)j->out + b0 * c->block_values;
        if (c->layout == TQ_LAYOUT_ANGLE)
            decode_span(c, tq_angle_decode_block, i, m, y, j->rotated);
        else if (c->layout == TQ_LAYOUT_PROD)
            decode_span(c, tq_prod_decode_block, i, m, y, j->rotated);
        else if (is_weight(c))
            j->k->w_decode(c, i, m, y);
        else
            j->k->kv_decode(c, i, m, y, j->rotated);
    }
}

static tq_status run(tq_ctx *ctx, const tq_codec *c, size_t n, int encode, int rotated,
                     const void *in, void *out)
{
    tq_status st = check_n(ctx, c, n);
    if (st) return st;
    size_t nb = n / c->block_values;
    const tq_kernels *k = tq_kernels_of(ctx);
    if (is_plain(c) && (st = tq_require_cpu(ctx, c->name))) return st;
    if (k->dev_kv_encode && !is_weight(c) && !is_plain(c)) {
        char err[256];
        int rc = encode ? k->dev_kv_encode(c, in, nb, out, err, sizeof err)
                        : k->dev_kv_decode(c, in, nb, out, rotated, err, sizeof err);
        if (rc)
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "%s %s: %s", k->name,
                           encode ? "encode" : "decode", err);
        return TQ_OK;
    }
    int have_w = encode ? k->w_encode != NULL : k->w_decode != NULL;
    int have_kv = encode ? k->kv_encode != NULL : k->kv_decode != NULL;
    int have = is_plain(c) || (is_weight(c) ? have_w : have_kv);
    if (!have)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                       "the %s backend has no %s %s kernel: use a CPU context", k->name, c->name,
                       encode ? "encode" : "decode");
    job j = {c, k, encode, rotated, in, out};
    long nchunks = (long)((nb + TQ_CHUNK_BLOCKS - 1) / TQ_CHUNK_BLOCKS);
    int nt = tq_resolve_threads(ctx);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nchunks > 1)
    for (long ci = 0; ci < nchunks; ci++) {
        size_t b0 = (size_t)ci * TQ_CHUNK_BLOCKS;
        run_span(&j, b0, nb - b0 < TQ_CHUNK_BLOCKS ? nb - b0 : TQ_CHUNK_BLOCKS);
    }
    return TQ_OK;
}

tq_status tq_encode(tq_ctx *ctx, const tq_codec *c, const float *x, size_t n, void *blocks)
{
    TQ_NEED_CTX(ctx);
    return run(ctx, c, n, 1, 0, x, blocks);
}

tq_status tq_decode(tq_ctx *ctx, const tq_codec *c, const void *blocks, size_t n, float *y)
{
    TQ_NEED_CTX(ctx);
    return run(ctx, c, n, 0, 0, blocks, y);
}

tq_status tq_decode_rotated(tq_ctx *ctx, const tq_codec *c, const void *blocks, size_t n, float *y)
{
    TQ_NEED_CTX(ctx);
    if (is_weight(c))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s is a weight codec: it has no rotated-domain output", c->name);
    return run(ctx, c, n, 0, 1, blocks, y);
}

tq_status tq_scores(tq_ctx *ctx, const tq_codec *c, const float *q, const void *blocks,
                    size_t n_keys, float *out)
{
    TQ_NEED_CTX(ctx);
    if (is_weight(c))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%s is a weight codec: no attention scores",
                                c->name);
    tq_status st = tq_require_cpu(ctx, "compressed-domain scores");
    if (st) return st;
    const tq_block_params *p = &c->kv;
    float qr[512];
    memcpy(qr, q, p->g * sizeof(float));
    tq_rht_forward_raw(p->g, p->s1, p->s2, qr); /* <q, R'v> = <R q, v> */
    if (c->layout == TQ_LAYOUT_ANGLE || c->layout == TQ_LAYOUT_PROD) {
        st = c->layout == TQ_LAYOUT_ANGLE ? tq_angle_scores(c, qr, blocks, n_keys, out)
                                          : tq_prod_scores(c, qr, blocks, n_keys, out);
        return st ? tq_ctx_set_error(ctx, st, "out of memory") : TQ_OK;
    }
    const uint8_t *b = blocks;
    uint8_t idx[512];
    for (size_t k = 0; k < n_keys; k++, b += c->block_bytes) { /* norm x sum_j q'_j c[idx_j] */
        uint16_t h0, h1;
        tq_block_load(c, b, idx, &h0, &h1);
        float s = 0;
        for (uint32_t j = 0; j < p->g; j++) s += qr[j] * p->cen[idx[j]];
        out[k] = tq_fp16_to_fp32(h0) * s;
    }
    return TQ_OK;
}
