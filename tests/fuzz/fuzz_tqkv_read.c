/* fuzz_tqkv_read.c - libFuzzer target for the .tqkv reader and decoder: any
 * bytes either fail verification with a message or decode completely.
 * Random bytes rarely get past the checksums, so for inputs whose first byte
 * is odd the harness first recomputes every checksum it can find (header,
 * metadata, chunks, index): that way the parsers behind the checksums are
 * fuzzed too.  Where its first byte has bit 3 set (and is not 'T'), the input is a base
 * snapshot and one appended to it (fuzz_pair). */
#include "kv_snapshot.h"
#include "tqkv.h"
#include "tqkv_fix.inc"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bit 3 of the first byte: a base and an appended snapshot, [mode][u32 n][base: n bytes][link],
 * each checksummed again where bit 0 is set; the link is decoded with the base (what rows it
 * takes from the base, and which of its tables). */
static int fuzz_pair(tq_ctx *ctx, const uint8_t *data, size_t size, uint8_t mode)
{
    uint32_t n;
    if (size < 5) return 0;
    memcpy(&n, data + 1, 4);
    if (n > size - 5) return 0;
    uint8_t *base = malloc(n ? n : 1);
    uint8_t *link = malloc(size - 5 - n + 1);
    memcpy(base, data + 5, n);
    memcpy(link, data + 5 + n, size - 5 - n);
    if (mode & 1) {
        fix_checksums(base, n);
        fix_checksums(link, size - 5 - n);
    }
    tqkv_reader *br = NULL;
    tqkv_reader *lr = NULL;
    if (!tqkv_open_memory(ctx, base, n, "base", &br) &&
        !tqkv_open_memory(ctx, link, size - 5 - n, "link", &lr) &&
        tqkv_meta_of(lr)->source_size < (64u << 20)) {
        FILE *f = fopen("/dev/null", "wb");
        if (tq_kvsnap_decode(ctx, lr, br, &(tq_kvsnap_decode_options){.threads = 1}, f) &&
            !*tq_ctx_error(ctx))
            abort();
        fclose(f);
    }
    tqkv_close(lr);
    tqkv_close(br);
    free(base);
    free(link);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_ctx *ctx = fuzz_ctx();
    if (size && (data[0] & 8) && data[0] != 'T') return fuzz_pair(ctx, data, size, data[0]);
    uint8_t mode;
    uint8_t *buf = fuzz_input(data, size, &mode);
    if (!buf) return 0;
    tqkv_reader *r;
    if (tqkv_open_memory(ctx, buf, size, "fuzz", &r) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        free(buf);
        return 0;
    }
    if (tqkv_meta_of(r)->source_size < (64u << 20)) {
        FILE *f = fopen("/dev/null", "wb");
        /* bits 1-2 of the first byte: also the cache-type conversions */
        const char *ct = (mode & 6) == 2 ? "f32" : (mode & 6) == 4 ? "turbo3" : (mode & 6) == 6 ? "bf16" : NULL;
        tq_kvsnap_decode(ctx, r, NULL, &(tq_kvsnap_decode_options){.threads = 1, .cache_type = ct, .head_dim = 8}, f);
        fclose(f);
    }
    tqkv_close(r);
    free(buf);
    return 0;
}
