/* fuzz_tqkv_stream.c - libFuzzer target for the streamed .tqkv reader (tqkv_stream.c) and the
 * decoder on it: the bytes as a pipe (read once, in order) or as an object (read by ranges),
 * and a whole decode or a token prefix.  Any bytes either fail with a message or decode
 * completely.  Bit 0 of the first byte recomputes the checksums (tqkv_fix.inc); bit 1 reads by
 * ranges; bit 2 decodes the first 3 rows only. */
#include "io.h"
#include "kv_snapshot.h"
#include "tqkv.h"
#include "tqkv_fix.inc"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_ctx *ctx = fuzz_ctx();
    uint8_t mode;
    uint8_t *buf = fuzz_input(data, size, &mode);
    if (!buf) return 0;
    tq_src *src;
    tqkv_reader *r;
    if (tq_src_open_memory(ctx, buf, size, "fuzz", (mode & 2) != 0, &src)) abort();
    if (tqkv_open_src(ctx, src, &r) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        free(buf);
        return 0;
    }
    if (tqkv_meta_of(r)->source_size < (64u << 20)) {
        FILE *f = fopen("/dev/null", "wb");
        tq_kvsnap_decode_options o = {.threads = 1, .max_rows = (mode & 4) ? 3 : 0};
        if (tq_kvsnap_decode(ctx, r, NULL, &o, f) != TQ_OK && !*tq_ctx_error(ctx)) abort();
        fclose(f);
    }
    tqkv_close(r);
    free(buf);
    return 0;
}
