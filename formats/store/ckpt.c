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
    if (k > TQ_RESTORE_MAX_CHECKPOINTS)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "a sidecar of %u checkpoints (at most %u)", k,
                                TQ_RESTORE_MAX_CHECKPOINTS);
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

/* A growing byte buffer; grow failures stick in ok. */
typedef struct ckpt_buf {
    uint8_t *p;
    uint64_t n, cap;
    int ok;
} ckpt_buf;

static void buf_put(ckpt_buf *b, const void *p, uint64_t n)
{
    if (!b->ok || !n) return;
    if (b->n + n > b->cap) {
        uint64_t cap = (b->cap ? b->cap * 2 : 4096) + n;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->ok = 0;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* One checkpoint's record of the stored form: its fields, then head, tgt and dft. */
static void put_record(ckpt_buf *b, const uint8_t *rec, uint32_t coding, uint32_t head,
                       const uint8_t *tgt, uint64_t tgt_len)
{
    uint64_t n_tgt = get64(rec + 16);
    uint64_t n_dft = get64(rec + 24);
    buf_put(b, rec, 16); /* n_tokens, pos_min, pos_max */
    buf_put(b, &coding, 4);
    buf_put(b, &head, 4);
    buf_put(b, &tgt_len, 8);
    buf_put(b, &n_dft, 8);
    buf_put(b, rec + CKPT_FIELDS, head);
    buf_put(b, tgt, tgt_len);
    buf_put(b, rec + CKPT_FIELDS + n_tgt, n_dft);
}

/* The container (5 of the store's entry) compressed behind its header. */
static tq_status seal(tq_ctx *ctx, const ckpt_buf *c, uint8_t **out, uint64_t *len)
{
    size_t bound = ZSTD_compressBound((size_t)c->n);
    uint8_t *b = malloc(STORED_HEAD + bound);
    if (!b) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint32_t head[2] = {TQ_CKPT_STORED_MAGIC, 2};
    uint64_t sum = XXH64(c->p, (size_t)c->n, 0);
    memcpy(b, head, 8);
    memcpy(b + 8, &c->n, 8);
    memcpy(b + 16, &sum, 8);
    size_t z = ZSTD_compress(b + STORED_HEAD, bound, c->p, (size_t)c->n, 3);
    if (ZSTD_isError(z)) {
        free(b);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "compressing the checkpoints failed");
    }
    *out = b;
    *len = STORED_HEAD + z;
    return TQ_OK;
}

tq_status tq_ckpt_pack(tq_ctx *ctx, const uint8_t *p, const tq_ckpt *c, uint32_t count,
                       tq_ckpt_coder code, void *user, uint8_t **out, uint64_t *len)
{
    ckpt_buf b = {NULL, 0, 0, 1};
    tq_status st = TQ_OK;
    buf_put(&b, &count, 4);
    for (uint32_t i = 0; !st && i < count; i++) {
        const uint8_t *rec = p + c[i].off;
        const uint8_t *blob = rec + CKPT_FIELDS;
        uint64_t n_tgt = get64(rec + 16);
        uint32_t head = n_tgt >= 8 && tq_ckpt_blob_header(blob) ? 8 : 0;
        uint8_t *coded = NULL;
        uint64_t coded_len = 0;
        if (code) st = code(user, blob + head, n_tgt - head, c[i].n_tokens, &coded, &coded_len);
        if (coded)
            put_record(&b, rec, 1, head, coded, coded_len);
        else
            put_record(&b, rec, 0, head, blob + head, n_tgt - head);
        free(coded);
    }
    if (!st && !b.ok) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = seal(ctx, &b, out, len);
    free(b.p);
    return st;
}

/* The container's checkpoints back into the fork's sidecar, coded blobs decoded. */
static tq_status to_sidecar(tq_ctx *ctx, const uint8_t *p, uint64_t n, tq_ckpt_decoder decode,
                            void *user, ckpt_buf *side)
{
    const char *bad = "stored checkpoints: cut short";
    if (n < 4) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s", bad);
    uint32_t count = get32(p);
    uint32_t head[3] = {TQ_CKPT_MAGIC, 1, count};
    if (count > TQ_RESTORE_MAX_CHECKPOINTS) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s", bad);
    buf_put(side, head, 12);
    uint64_t at = 4;
    for (uint32_t i = 0; i < count; i++) {
        if (n - at < 40) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s", bad);
        const uint8_t *r = p + at;
        uint32_t coding = get32(r + 16);
        uint32_t hl = get32(r + 20);
        uint64_t tgt = get64(r + 24);
        uint64_t dft = get64(r + 32);
        uint64_t left = n - at - 40;
        if (coding > 1 || (coding && !decode) || hl > 8 || hl > left || tgt > left - hl ||
            dft > left - hl - tgt)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s", bad);
        const uint8_t *blob = r + 40 + hl;
        uint8_t *plain = NULL;
        uint64_t plain_len = tgt;
        if (coding) {
            int64_t n_tokens = (int64_t)get64(r);
            tq_status st = decode(user, blob, tgt, n_tokens, &plain, &plain_len);
            if (st) return st;
        }
        uint64_t n_tgt = hl + plain_len;
        buf_put(side, r, 16);
        buf_put(side, &n_tgt, 8);
        buf_put(side, &dft, 8);
        buf_put(side, r + 40, hl);
        buf_put(side, plain ? plain : blob, plain_len);
        buf_put(side, blob + tgt, dft);
        free(plain);
        at += 40 + hl + tgt + dft;
    }
    if (at != n) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s", bad);
    return side->ok ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
}

tq_status tq_ckpt_unpack(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint64_t max_len,
                         tq_ckpt_decoder decode, void *user, uint8_t **out, uint64_t *len)
{
    if (n < STORED_HEAD || get32(p) != TQ_CKPT_STORED_MAGIC || get32(p + 4) != 2)
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
    ckpt_buf side = {NULL, 0, 0, 1};
    tq_status st = to_sidecar(ctx, b, raw, decode, user, &side);
    free(b);
    if (st) {
        free(side.p);
        return st;
    }
    *out = side.p;
    *len = side.n;
    return TQ_OK;
}
