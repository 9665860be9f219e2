/* fuzz_gguf_read.c - libFuzzer target for the GGUF reader: any bytes either
 * open or fail with a message; what opens is walked completely. */
#include "gguf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_gguf *g;
    if (tq_gguf_open_memory(ctx, data, size, "fuzz", NULL, &g) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort(); /* a failure always says why */
        return 0;
    }
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        sink += strlen(tq_gguf_kv_key(g, i));
        uint64_t n = tq_gguf_kv_count(g, i), len;
        for (uint64_t j = 0; j < n && j < 64; j++) {
            int64_t v;
            double d;
            const char *s = tq_gguf_kv_get_str(g, i, j, &len);
            if (s && len) sink += (uint8_t)s[len - 1];
            if (!tq_gguf_kv_get_int(g, i, j, &v)) sink += (uint64_t)v;
            if (!tq_gguf_kv_get_float(g, i, j, &d)) sink += d > 0;
        }
        tq_gguf_kv_raw(g, i, &len);
    }
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const tq_ggml_type *t = tq_gguf_tensor_type(g, i);
        const uint8_t *p = tq_gguf_tensor_data(g, i);
        uint64_t nb = tq_gguf_tensor_nbytes(g, i);
        if (nb) sink += p[0] + p[nb - 1]; /* the whole tensor lies inside the buffer */
        if (t->dtype >= 0 && nb >= t->bytes) {
            float y[256];
            if (t->block <= 256) tq_dequantize(ctx, (tq_dtype)t->dtype, p, t->block, y);
        }
        tq_gguf_find_tensor(g, tq_gguf_tensor_name(g, i));
    }
    tq_gguf_close(g);
    (void)sink;
    return 0;
}
