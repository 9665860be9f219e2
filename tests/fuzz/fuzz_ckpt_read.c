/* fuzz_ckpt_read.c - libFuzzer target for the checkpoint sidecars a server writes and the
 * store keeps (formats/store/ckpt.h): any bytes parse or fail with a message; what parses is
 * cut at a count and parses again, and packs for the store and unpacks to the same bytes;
 * stored bytes unpack or fail with a message (a coded checkpoint's snapshot is
 * fuzz_tqkv_read's). */
#include "ckpt.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_ckpt c[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t k;
    if (tq_ckpt_parse(ctx, data, size, 1u << 20, c, &k) == TQ_OK) {
        uint8_t *cut;
        uint64_t len;
        uint32_t kept;
        uint32_t upto = k ? (uint32_t)c[k / 2].n_tokens : 0;
        if (tq_ckpt_upto(ctx, data, c, k, upto, &cut, &len, &kept) != TQ_OK) abort();
        tq_ckpt again[TQ_RESTORE_MAX_CHECKPOINTS];
        uint32_t k2;
        if (tq_ckpt_parse(ctx, cut, len, 1u << 20, again, &k2) != TQ_OK || k2 != kept) abort();
        free(cut);
        uint8_t *packed;
        uint8_t *back;
        uint64_t packed_len;
        uint64_t back_len;
        if (tq_ckpt_pack(ctx, data, c, k, NULL, NULL, &packed, &packed_len) != TQ_OK) abort();
        if (tq_ckpt_unpack(ctx, packed, packed_len, 1u << 24, NULL, NULL, &back, &back_len) ||
            back_len != size || memcmp(back, data, size))
            abort();
        free(packed);
        free(back);
    } else if (!*tq_ctx_error(ctx)) {
        abort();
    }
    uint8_t *raw;
    uint64_t n;
    if (tq_ckpt_unpack(ctx, data, size, 1u << 24, NULL, NULL, &raw, &n) == TQ_OK)
        free(raw);
    else if (!*tq_ctx_error(ctx))
        abort();
    return 0;
}
