/* fuzz_sealed_read.c - libFuzzer target for sealed bytes (formats/seal/seal.h) and the .tqkv
 * reader behind them: any bytes either fail to open with a message or open to a snapshot that
 * verifies.  Random bytes never pass a GCM tag, so an input whose first byte is odd is a
 * plaintext to seal with the harness's key first (its checksums recomputed, as fuzz_tqkv_read
 * does): the sealed bytes must open exactly when the plaintext does, and with one byte flipped
 * (where the second byte says) never.  Other inputs are opened as they are. */
#include "seal.h"
#include "tqkv.h"
#include "tqkv_fix.inc"

#include <stdlib.h>
#include <string.h>

static tq_seal_keys keys;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    uint8_t key[TQ_SEAL_KEY_BYTES];
    for (int i = 0; i < TQ_SEAL_KEY_BYTES; i++) key[i] = (uint8_t)(i * 7 + 1);
    tq_ctx *ctx = tq_ctx_new();
    if (tq_seal_keys_add(ctx, &keys, key)) abort();
    tq_ctx_free(ctx);
    tq_seal_keys_use(&keys);
    return 0;
}

/* Opened by the .tqkv reader: 1 when it verifies; a refusal must say why. */
static int opens(tq_ctx *ctx, const uint8_t *p, size_t n)
{
    tqkv_reader *r = NULL;
    tq_status st = tqkv_open_memory(ctx, p, n, "x", &r);
    if (st && !*tq_ctx_error(ctx)) abort();
    tqkv_close(r);
    return st == TQ_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_ctx *ctx = tq_ctx_new();
    if (!size || !(data[0] & 1)) {
        uint8_t *plain = NULL;
        uint64_t n = 0;
        if (tq_seal_open(ctx, &keys, "x", data, size, &plain, &n) && !*tq_ctx_error(ctx)) abort();
        free(plain);
        opens(ctx, data, size);
        tq_ctx_free(ctx);
        return 0;
    }
    size_t n = size > 2 ? size - 2 : 0;
    uint8_t *plain = malloc(n ? n : 1), *sealed = NULL;
    uint64_t sealed_n = 0;
    if (n) memcpy(plain, data + 2, n);
    fix_checksums(plain, n);
    tq_seal_keys none = {0};
    tq_seal_keys_use(&none); /* the plaintext as a plain snapshot */
    int plain_opens = opens(ctx, plain, n);
    tq_seal_keys_use(&keys);
    if (tq_seal_bytes(ctx, &keys, plain, n, &sealed, &sealed_n)) abort();
    if (opens(ctx, sealed, sealed_n) != plain_opens) abort();
    sealed[(size > 1 ? data[1] * 257u : 0u) % sealed_n] ^= 0x20;
    uint8_t *back = NULL;
    uint64_t back_n = 0;
    if (!tq_seal_open(ctx, &keys, "x", sealed, sealed_n, &back, &back_n)) abort();
    free(back);
    free(sealed);
    free(plain);
    tq_ctx_free(ctx);
    return 0;
}
