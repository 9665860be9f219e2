/* bench_codecs.c - the codecs `tq bench` compares, each run the way its
 * users store K/V: the TurboQuant family per head (tq, TurboAngle,
 * TurboQuant-prod with the head as the group; the fork's turbo blocks of
 * 128, smaller heads zero-padded to 128 as the fork pads them), ggml's block
 * types over the cache row, f16, and zstd of f16. */
#include "bench_measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* The TurboQuant family by family, each at 4, 3 and 2 bits a value: the fork's turbo blocks
 * (their nominal bits with the norms), tq (b bits, norms matched to the cells where nc), TurboAngle
 * (A = 2^b angles and r radius bits a pair: (b + r) / 2 bits a value) and TurboQuant-prod. */
#define TURBO(n, nominal) {"turbo", "turbo" #n, nominal, TQ_CODEC_TURBO##n, 0, 0, 0, -1}
#define TQ(b, nc) {"tq", "tq b=" #b, b, TQ_CODEC_TQ, b, 0, nc, -1}
#define ANGLE(a, b, r) {"angle", "angle A=" #a " r=" #r, (b + r) / 2.0, TQ_CODEC_ANGLE, b, r, 1, -1}
#define PROD(b) {"prod", "prod b=" #b, b, TQ_CODEC_PROD, b, 0, 0, -1}
static const bcodec codecs[] = {
    {"f16", "f16", 16, 0, 0, 0, 0, TQ_DT_F16},
    {"zstd", "zstd -3 of f16", 16, 0, 0, 0, 0, TQ_DT_F16},
    {"ggml", "q8_0", 8.5, 0, 0, 0, 0, TQ_DT_Q8_0},
    {"ggml", "q6_K", 6.5625, 0, 0, 0, 0, TQ_DT_Q6_K},
    {"ggml", "q5_K", 5.5, 0, 0, 0, 0, TQ_DT_Q5_K},
    {"ggml", "q4_K", 4.5, 0, 0, 0, 0, TQ_DT_Q4_K},
    {"ggml", "q4_0", 4.5, 0, 0, 0, 0, TQ_DT_Q4_0},
    TURBO(4, 4.25),
    TURBO(3, 3.125),
    TURBO(2, 2.125),
    TQ(4, 1),
    TQ(3, 1),
    TQ(2, 0),
    ANGLE(32, 5, 3),
    ANGLE(16, 4, 2),
    ANGLE(8, 3, 1),
    PROD(4),
    PROD(3),
    PROD(2),
};

#undef TURBO
#undef TQ
#undef ANGLE
#undef PROD

size_t bc_list(const bcodec **out)
{
    *out = codecs;
    return sizeof codecs / sizeof *codecs;
}

static int is_turbo(const bcodec *c)
{
    return c->dtype < 0 &&
           (c->kind == TQ_CODEC_TURBO2 || c->kind == TQ_CODEC_TURBO3 || c->kind == TQ_CODEC_TURBO4);
}

int bc_open(tq_ctx *ctx, const bcodec *c, uint32_t d, bcodec_run *r, char *why, size_t wl)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->d = d;
    if (c->dtype >= 0) return 0;
    if (is_turbo(c)) {
        if (d % 128 && 128 % d) {
            snprintf(why, wl, "heads of %u are not whole or part blocks of 128", d);
            return -1;
        }
        r->pad = d < 128;
    } else if (!tq_is_pow2(d) || d < 8 || d > 512) {
        snprintf(why, wl, "heads of %u are not a group of 8..512", d);
        return -1;
    }
    tq_codec_desc desc = {c->kind, is_turbo(c) ? 0 : d, c->bits, c->nc, 0, c->radius_bits, 0, 0};
    if (tq_codec_new(ctx, &desc, &r->tc)) {
        snprintf(why, wl, "%s", tq_ctx_error(ctx));
        return -1;
    }
    return 0;
}

void bc_close(bcodec_run *r)
{
    tq_codec_free(r->tc);
    r->tc = NULL;
}

/* values the codec sees for n vectors */
static size_t coded_values(const bcodec_run *r, size_t n) { return n * (r->pad ? 128 : r->d); }

uint64_t bc_bound(const bcodec_run *r, size_t n)
{
    size_t v = coded_values(r, n);
    if (r->tc) return v / tq_codec_block_values(r->tc) * tq_codec_block_bytes(r->tc);
    uint64_t raw = v / tq_dtype_block_values((tq_dtype)r->c->dtype) *
                   tq_dtype_block_bytes((tq_dtype)r->c->dtype);
    return strcmp(r->c->family, "zstd") ? raw : 2 * raw + ZSTD_compressBound(raw);
}

static const float *padded(const bcodec_run *r, const float *x, size_t n, float **tmp)
{
    *tmp = NULL;
    if (!r->pad) return x;
    float *p = calloc(n * 128, sizeof *p);
    for (size_t i = 0; p && i < n; i++) memcpy(p + i * 128, x + i * r->d, r->d * sizeof(float));
    return *tmp = p;
}

uint64_t bc_encode(tq_ctx *ctx, const bcodec_run *r, const float *x, size_t n, uint8_t *buf)
{
    float *tmp;
    const float *in = padded(r, x, n, &tmp);
    size_t v = coded_values(r, n);
    uint64_t bytes = 0;
    if (!in) return 0;
    if (r->tc) {
        if (!tq_encode(ctx, r->tc, in, v, buf)) bytes = bc_bound(r, n);
    } else if (!tq_quantize(ctx, (tq_dtype)r->c->dtype, in, v, buf)) {
        uint64_t raw = v / tq_dtype_block_values((tq_dtype)r->c->dtype) *
                       tq_dtype_block_bytes((tq_dtype)r->c->dtype);
        bytes = raw;
        if (!strcmp(r->c->family, "zstd")) { /* the f16 bytes, compressed after them */
            size_t z = ZSTD_compress(buf + raw, ZSTD_compressBound(raw) + raw, buf, raw, 3);
            bytes = ZSTD_isError(z) ? 0 : z;
            if (bytes) memmove(buf, buf + raw, z);
        }
    }
    free(tmp);
    return bytes;
}

int bc_decode(tq_ctx *ctx, const bcodec_run *r, const uint8_t *buf, uint64_t bytes, size_t n,
              float *y)
{
    size_t v = coded_values(r, n);
    float *out = r->pad ? malloc(v * sizeof *out) : y;
    uint8_t *raw = NULL;
    int rc = -1;
    if (!out) return -1;
    if (r->tc)
        rc = tq_decode(ctx, r->tc, buf, v, out) ? -1 : 0;
    else if (!strcmp(r->c->family, "zstd")) {
        raw = malloc(v * 2);
        size_t got = raw ? ZSTD_decompress(raw, v * 2, buf, bytes) : 0;
        rc =
            raw && !ZSTD_isError(got) && got == v * 2 && !tq_dequantize(ctx, TQ_DT_F16, raw, v, out)
                ? 0
                : -1;
    } else {
        rc = tq_dequantize(ctx, (tq_dtype)r->c->dtype, buf, v, out) ? -1 : 0;
    }
    if (r->pad) {
        for (size_t i = 0; !rc && i < n; i++)
            memcpy(y + i * r->d, out + i * 128, r->d * sizeof(float));
        free(out);
    }
    free(raw);
    return rc;
}
