/* fuzz_tqkv_read.c - libFuzzer target for the .tqkv reader and decoder: any
 * bytes either fail verification with a message or decode completely.
 * Random bytes rarely get past the checksums, so for inputs whose first byte
 * is odd the harness first recomputes every checksum it can find (header,
 * metadata, chunks, index): that way the parsers behind the checksums are
 * fuzzed too. */
#include "kv_snapshot.h"
#include "tqkv.h"
#include "tqkv_fix.inc"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_ctx *ctx = fuzz_ctx();
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
