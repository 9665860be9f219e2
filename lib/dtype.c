/* dtype.c - element types by name: ggml's block formats (decoders here for
 * the 32-value ones, lib/kquants.c for the K-quants; encoders in
 * lib/legacy_quants.c and lib/kquants_encode.c) and the TurboQuant blocks
 * through the codecs. */
#include "tq_internal.h"

#include <stdio.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

static const struct {
    const char *name;
    uint32_t values, bytes;
} dt[TQ_DT_COUNT] = {
    [TQ_DT_F32] = {"f32", 1, 4},          [TQ_DT_F16] = {"f16", 1, 2},
    [TQ_DT_BF16] = {"bf16", 1, 2},        [TQ_DT_Q4_0] = {"q4_0", 32, 18},
    [TQ_DT_Q4_1] = {"q4_1", 32, 20},      [TQ_DT_Q5_0] = {"q5_0", 32, 22},
    [TQ_DT_Q5_1] = {"q5_1", 32, 24},      [TQ_DT_Q8_0] = {"q8_0", 32, 34},
    [TQ_DT_TQ3_1S] = {"tq3_1s", 32, 16},  [TQ_DT_TQ4_1S] = {"tq4_1s", 32, 20},
    [TQ_DT_TURBO2] = {"turbo2", 128, 34}, [TQ_DT_TURBO3] = {"turbo3", 128, 50},
    [TQ_DT_TURBO4] = {"turbo4", 128, 68}, [TQ_DT_Q2_K] = {"q2_K", 256, 84},
    [TQ_DT_Q3_K] = {"q3_K", 256, 110},    [TQ_DT_Q4_K] = {"q4_K", 256, 144},
    [TQ_DT_Q5_K] = {"q5_K", 256, 176},    [TQ_DT_Q6_K] = {"q6_K", 256, 210},
    [TQ_DT_IQ4_NL] = {"iq4_nl", 32, 18},  [TQ_DT_IQ4_XS] = {"iq4_xs", 256, 136},
};

static int is_kquant(tq_dtype t) { return t >= TQ_DT_Q2_K && t <= TQ_DT_IQ4_XS; }

/* A type's name and block (a later fork revision's from its row: its turbo name). */
static int info(tq_dtype t, const char **name, uint32_t *values, uint32_t *bytes)
{
    static const char *const turbo_names[] = {"turbo2", "turbo3", "turbo4"};
    uint32_t rev;
    uint32_t bits;
    if ((unsigned)t < TQ_DT_COUNT) {
        *name = dt[t].name;
        *values = dt[t].values;
        *bytes = dt[t].bytes;
        return 1;
    }
    if (!tq_fork_dtype_of(t, &rev, &bits)) return 0;
    tq_fork_block_info b;
    tq_fork_block(rev, bits, &b);
    *name = turbo_names[bits - 2];
    *values = 128;
    *bytes = b.bytes;
    return 1;
}

const char *tq_dtype_name(tq_dtype t)
{
    const char *name = "?";
    uint32_t values;
    uint32_t bytes;
    info(t, &name, &values, &bytes);
    return name;
}

size_t tq_dtype_block_values(tq_dtype t)
{
    const char *name;
    uint32_t values = 0;
    uint32_t bytes;
    info(t, &name, &values, &bytes);
    return values;
}

size_t tq_dtype_block_bytes(tq_dtype t)
{
    const char *name;
    uint32_t values;
    uint32_t bytes = 0;
    info(t, &name, &values, &bytes);
    return bytes;
}

/* The codec-backed types, each with its codec kind; they share one codec each, made on first
 * use. */
static const struct {
    tq_dtype t;
    tq_codec_kind k;
} codec_types[] = {{TQ_DT_TQ3_1S, TQ_CODEC_TQ3_1S},
                   {TQ_DT_TQ4_1S, TQ_CODEC_TQ4_1S},
                   {TQ_DT_TURBO2, TQ_CODEC_TURBO2},
                   {TQ_DT_TURBO3, TQ_CODEC_TURBO3},
                   {TQ_DT_TURBO4, TQ_CODEC_TURBO4}};
#define N_CODEC_TYPES (sizeof codec_types / sizeof codec_types[0])
static tq_codec *codecs[TQ_DT_LIMIT]; /* the later fork revisions' types too */
static pthread_once_t codecs_once = PTHREAD_ONCE_INIT;

static void make_codecs(void)
{
    /* a failure leaves the codec NULL, which codec_run reports */
    tq_ctx local = {TQ_OK, "", 1, TQ_SIMD_SCALAR, TQ_BACKEND_CPU};
    for (size_t i = 0; i < N_CODEC_TYPES; i++) {
        tq_codec_desc d = {.kind = codec_types[i].k};
        tq_codec_new(&local, &d, &codecs[codec_types[i].t]);
    }
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++)
        for (uint32_t bits = 2; bits <= 4; bits++) {
            tq_dtype t = tq_fork_dtype(rev, bits);
            if ((unsigned)t < TQ_DT_COUNT || codecs[t]) continue; /* the first row's, or made */
            tq_codec_desc d = {.kind = (tq_codec_kind)(TQ_CODEC_TURBO2 + (int)bits - 2),
                               .fork_rev = rev};
            tq_codec_new(&local, &d, &codecs[t]);
        }
}

/* Whether t runs through a codec (no codec is built: a value at a time asks this). */
static int is_codec_type(tq_dtype t)
{
    uint32_t rev;
    uint32_t bits;
    for (size_t i = 0; i < N_CODEC_TYPES; i++)
        if (codec_types[i].t == t) return 1;
    return tq_fork_dtype_of(t, &rev, &bits);
}

static const tq_codec *codec_for(tq_dtype t)
{
    pthread_once(&codecs_once, make_codecs);
    return codecs[t];
}

static tq_status check(tq_ctx *ctx, tq_dtype t, size_t n)
{
    const char *name;
    uint32_t values;
    uint32_t bytes;
    if (!info(t, &name, &values, &bytes))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown element type %d", (int)t);
    /* the codec types run through the codec's backend table; the rest is CPU code */
    int codec = is_codec_type(t);
    /* callers convert a value at a time (transposed V): the message is made
     * only for the refusal */
    if (!codec && ctx && ctx->backend != TQ_BACKEND_CPU) {
        char what[48];
        snprintf(what, sizeof what, "%s conversion", name);
        tq_status st = tq_require_cpu(ctx, what);
        if (st) return st;
    }
    if (n % values)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%zu values is not a whole number of %s blocks", n,
                       name);
    return TQ_OK;
}

static tq_status codec_run(tq_ctx *ctx, tq_dtype t, int enc, const void *in, size_t n, void *out)
{
    const tq_codec *c = codec_for(t);
    if (!c)
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory creating the %s codec",
                                tq_dtype_name(t));
    /* the caller owns the parallelism: run on this thread */
    tq_ctx local = {TQ_OK, "", 1, ctx->simd, TQ_BACKEND_CPU};
    tq_status st = enc ? tq_encode(&local, c, in, n, out) : tq_decode(&local, c, in, n, out);
    if (st) return tq_ctx_set_error(ctx, st, "%s", local.msg);
    return TQ_OK;
}

/* fp16 values at src, aligned or not (rows at odd offsets, a state file's after a name of odd
 * length, are copied to an aligned run a piece at a time for the bulk conversion). */
static void from_f16(const uint8_t *src, size_t n, float *y)
{
    if (((uintptr_t)src & 1) == 0) {
        tq_fp16_to_fp32_bulk((const uint16_t *)(const void *)src, y, n);
        return;
    }
    for (size_t i0 = 0; i0 < n; i0 += 512) {
        uint16_t run[512];
        size_t k = n - i0 < 512 ? n - i0 : 512;
        memcpy(run, src + 2 * i0, 2 * k);
        tq_fp16_to_fp32_bulk(run, y + i0, k);
    }
}

/* ggml's Q5_0 (one 0) and Q5_1 blocks: 32 values of 5 bits, the fifth bits apart. */
static void from_q5(int one, const uint8_t *s, size_t nb, float *y)
{
    size_t bb = one ? 24 : 22;
    for (size_t b = 0; b < nb; b++, s += bb, y += 32) {
        float d = tq_get_h(s), m = one ? tq_get_h(s + 2) : 0.0f;
        const uint8_t *qhp = s + (one ? 4 : 2), *qs = qhp + 4;
        uint32_t qh = qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 |
                      (uint32_t)qhp[3] << 24;
        for (int j = 0; j < 16; j++) {
            int x0 = (qs[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10);
            int x1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            if (one) {
                y[j] = (float)x0 * d + m;
                y[j + 16] = (float)x1 * d + m;
            } else {
                y[j] = (float)(x0 - 16) * d;
                y[j + 16] = (float)(x1 - 16) * d;
            }
        }
    }
}

/* ggml's Q4_0 (one 0) and Q4_1 blocks: 32 values of 4 bits, a scale (and a minimum). */
static void from_q4(int one, const uint8_t *s, size_t nb, float *y)
{
    size_t bb = one ? 20 : 18, q0 = one ? 4 : 2;
    for (size_t b = 0; b < nb; b++, s += bb, y += 32) {
        float d = tq_get_h(s), m = one ? tq_get_h(s + 2) : 0.0f;
        for (int j = 0; j < 16; j++) {
            if (one) {
                y[j] = (float)(s[q0 + j] & 0xF) * d + m;
                y[j + 16] = (float)(s[q0 + j] >> 4) * d + m;
            } else {
                y[j] = (float)((s[q0 + j] & 0xF) - 8) * d;
                y[j + 16] = (float)((s[q0 + j] >> 4) - 8) * d;
            }
        }
    }
}

tq_status tq_dequantize(tq_ctx *ctx, tq_dtype t, const void *src, size_t n, float *y)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check(ctx, t, n);
    if (st) return st;
    const uint8_t *s = src;
    size_t nb = n / tq_dtype_block_values(t);
    switch (t) {
        case TQ_DT_F32:
            memcpy(y, src, n * 4);
            break;
        case TQ_DT_F16:
            from_f16(s, n, y);
            break;
        case TQ_DT_BF16:
            for (size_t i = 0; i < n; i++)
                y[i] = tq_bf16_to_fp32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
            break;
        case TQ_DT_Q8_0:
            for (size_t b = 0; b < nb; b++, s += 34, y += 32) {
                float d = tq_get_h(s);
                for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)s[2 + j] * d;
            }
            break;
        case TQ_DT_Q4_0:
        case TQ_DT_Q4_1:
            from_q4(t == TQ_DT_Q4_1, s, nb, y);
            break;
        case TQ_DT_Q5_0:
        case TQ_DT_Q5_1:
            from_q5(t == TQ_DT_Q5_1, s, nb, y);
            break;
        default:
            if (is_kquant(t)) {
                tq_kquant_dequantize(t, s, nb, y);
                return TQ_OK;
            }
            return codec_run(ctx, t, 0, src, n, y);
    }
    return TQ_OK;
}

/* A block type codes a scale from the block's values: one NaN or infinity
 * would silently spoil the whole block, so it is refused (the float types
 * carry such values through as they are). */
static tq_status check_finite(tq_ctx *ctx, tq_dtype t, const float *x, size_t n)
{
    if (t == TQ_DT_F32 || t == TQ_DT_F16 || t == TQ_DT_BF16) return TQ_OK;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                    "value %zu is %g: %s blocks need finite values", i, x[i],
                                    tq_dtype_name(t));
    return TQ_OK;
}

/* x as one of the float types: F32, F16 (aligned: the bulk converter) or BF16. */
static void floats_from_f32(tq_dtype t, const float *x, size_t n, uint8_t *o)
{
    if (t == TQ_DT_F32) {
        memcpy(o, x, n * 4);
    } else if (t == TQ_DT_F16 && ((uintptr_t)o & 1) == 0) {
        tq_fp32_to_fp16_bulk(x, (uint16_t *)(void *)o, n);
    } else if (t == TQ_DT_F16) {
        for (size_t i = 0; i < n; i++) tq_put_h(o + 2 * i, x[i]);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = tq_fp32_to_bf16(x[i]);
            o[2 * i] = (uint8_t)h;
            o[2 * i + 1] = (uint8_t)(h >> 8);
        }
    }
}

tq_status tq_quantize(tq_ctx *ctx, tq_dtype t, const float *x, size_t n, void *dst)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check(ctx, t, n);
    if (!st) st = check_finite(ctx, t, x, n);
    if (st) return st;
    uint8_t *o = dst;
    size_t nb = n / tq_dtype_block_values(t);
    if (t == TQ_DT_F32 || t == TQ_DT_F16 || t == TQ_DT_BF16) {
        floats_from_f32(t, x, n, o);
        return TQ_OK;
    }
    switch (t) {
        case TQ_DT_Q8_0:
        case TQ_DT_Q4_0:
        case TQ_DT_Q4_1:
        case TQ_DT_Q5_0:
        case TQ_DT_Q5_1:
            tq_legacy_quantize(t, x, n, NULL, o);
            break;
        case TQ_DT_Q4_K:
        case TQ_DT_Q5_K:
        case TQ_DT_Q6_K:
            tq_kquant_quantize(t, x, nb, NULL, o);
            break;
        default:
            if (is_kquant(t))
                return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                        "quantizing to %s is not supported", tq_dtype_name(t));
            return codec_run(ctx, t, 1, x, n, dst);
    }
    return TQ_OK;
}

tq_status tq_quantize_weighted(tq_ctx *ctx, tq_dtype t, const float *x, size_t n_rows,
                               size_t row_len, const float *importance, void *dst)
{
    TQ_NEED_CTX(ctx);
    if (!importance) return tq_quantize(ctx, t, x, n_rows * row_len, dst);
    tq_status st = check(ctx, t, row_len);
    if (!st) st = check_finite(ctx, t, x, n_rows * row_len);
    if (st) return st;
    int legacy = t == TQ_DT_Q4_0 || t == TQ_DT_Q4_1 || t == TQ_DT_Q5_0 || t == TQ_DT_Q5_1;
    int kq = t == TQ_DT_Q4_K || t == TQ_DT_Q5_K || t == TQ_DT_Q6_K;
    if (!legacy && !kq)
        return tq_quantize(ctx, t, x, n_rows * row_len, dst); /* ggml weighs these by nothing */
    for (size_t i = 0; i < row_len; i++)
        if (!(importance[i] >= 0) || isinf(importance[i]))
            return tq_ctx_set_error(
                ctx, TQ_ERR_ARG, "importance %zu is %g, not a finite value >= 0", i, importance[i]);
    size_t rb = row_len / tq_dtype_block_values(t) * tq_dtype_block_bytes(t);
    uint8_t *o = dst;
    for (size_t r = 0; r < n_rows; r++, x += row_len, o += rb) {
        if (legacy)
            tq_legacy_quantize(t, x, row_len, importance, o);
        else
            tq_kquant_quantize(t, x, row_len / 256, importance, o);
    }
    return TQ_OK;
}
