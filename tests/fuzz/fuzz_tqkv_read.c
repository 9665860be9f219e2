/* fuzz_tqkv_read.c - libFuzzer target for the .tqkv reader and decoder: any
 * bytes either fail verification with a message or decode completely. */
#include "kv_snapshot.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) {
        ctx = tq_ctx_new();
        tq_ctx_set_threads(ctx, 1);
    }
    tqkv_reader *r;
    if (tqkv_open_memory(ctx, data, size, "fuzz", &r) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    if (tqkv_meta_of(r)->source_size < (64u << 20)) {
        FILE *f = fopen("/dev/null", "wb");
        tq_kvsnap_decode(ctx, r, 1, f);
        fclose(f);
    }
    tqkv_close(r);
    return 0;
}
