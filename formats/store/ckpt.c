/* ckpt.c - context-checkpoint sidecars checked, filtered and packed for the store (ckpt.h). */
#include "ckpt.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

enum { CKPT_HEAD = 12, CKPT_FIELDS = 32, STORED_HEAD = 24 };

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int tq_ckpt_blob_header(const uint8_t *blob) { return get32(blob) == 0xaf143cd8u; }

tq_status tq_ckpt_parse(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint32_t n_tokens,
                        tq_ckpt *out, uint32_t *count)
{
    *count = 0;
    if (n < CKPT_HEAD || get32(p) != TQ_CKPT_MAGIC)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "not a checkpoint sidecar (no PKCL magic)");
    if (get32(p + 4) != 1)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "checkpoint sidecar version %u (1 known)",
                                get32(p + 4));
    uint32_t k = get32(p + 8);
    if (k > TQ_CKPT_MAX)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "a sidecar of %u checkpoints (at most %u)", k,
                                TQ_CKPT_MAX);
    uint64_t at = CKPT_HEAD;
    for (uint32_t i = 0; i < k; i++) {
        if (n - at < CKPT_FIELDS)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "checkpoint %u: cut short", i);
        tq_ckpt *c = &out[i];
        c->n_tokens = (int64_t)get64(p + at);
        memcpy(&c->pos_min, p + at + 8, 4);
        memcpy(&c->pos_max, p + at + 12, 4);
        uint64_t tgt = get64(p + at + 16);
        uint64_t dft = get64(p + at + 24);
        uint64_t left = n - at - CKPT_FIELDS;
        if (tgt > left || dft > left - tgt)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "checkpoint %u: its states run past the "
                                    "sidecar's end", i);
        int64_t last = i ? out[i - 1].n_tokens : 0;
        if (c->n_tokens <= last || c->n_tokens > (int64_t)n_tokens || c->pos_min > c->pos_max)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "checkpoint %u: %lld tokens (the state "
                                    "holds %u; counts ascend)", i, (long long)c->n_tokens,
                                    n_tokens);
        c->off = at;
        c->len = CKPT_FIELDS + tgt + dft;
        at += c->len;
    }
    if (at != n)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%llu bytes after the sidecar's checkpoints",
                                (unsigned long long)(n - at));
    *count = k;
    return TQ_OK;
}

tq_status tq_ckpt_upto(tq_ctx *ctx, const uint8_t *p, const tq_ckpt *c, uint32_t count,
                       uint32_t upto, uint8_t **out, uint64_t *len, uint32_t *kept)
{
    uint64_t n = CKPT_HEAD;
    uint32_t k = 0;
    while (k < count && c[k].n_tokens <= (int64_t)upto) n += c[k++].len;
    *out = malloc(n);
    if (!*out) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(*out, p, 8);
    memcpy(*out + 8, &k, 4);
    if (k) memcpy(*out + CKPT_HEAD, p + c[0].off, n - CKPT_HEAD); /* the records are in order */
    *len = n;
    *kept = k;
    return TQ_OK;
}

tq_status tq_ckpt_pack(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint8_t **out, uint64_t *len)
{
    size_t bound = ZSTD_compressBound((size_t)n);
    uint8_t *b = malloc(STORED_HEAD + bound);
    if (!b) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint32_t head[2] = {TQ_CKPT_STORED_MAGIC, 1};
    uint64_t sum = XXH64(p, (size_t)n, 0);
    memcpy(b, head, 8);
    memcpy(b + 8, &n, 8);
    memcpy(b + 16, &sum, 8);
    size_t z = ZSTD_compress(b + STORED_HEAD, bound, p, (size_t)n, 3);
    if (ZSTD_isError(z)) {
        free(b);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "compressing the checkpoints failed");
    }
    *out = b;
    *len = STORED_HEAD + z;
    return TQ_OK;
}

tq_status tq_ckpt_unpack(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint64_t max_len,
                         uint8_t **out, uint64_t *len)
{
    if (n < STORED_HEAD || get32(p) != TQ_CKPT_STORED_MAGIC || get32(p + 4) != 1)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "stored checkpoints: no TQCK header");
    uint64_t raw = get64(p + 8);
    if (raw > max_len)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "stored checkpoints: %llu bytes claimed",
                                (unsigned long long)raw);
    uint8_t *b = malloc(raw ? raw : 1);
    if (!b) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    size_t got = ZSTD_decompress(b, (size_t)raw, p + STORED_HEAD, (size_t)(n - STORED_HEAD));
    if (ZSTD_isError(got) || got != raw || XXH64(b, (size_t)raw, 0) != get64(p + 16)) {
        free(b);
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "stored checkpoints: checksum mismatch");
    }
    *out = b;
    *len = raw;
    return TQ_OK;
}
