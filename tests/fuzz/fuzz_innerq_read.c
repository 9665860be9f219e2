/* fuzz_innerq_read.c - libFuzzer target for the InnerQ scales reader
 * (SCALES.gguf and the .npy form): any bytes load or fail with a message;
 * what loads has the shape it claims and only finite, positive scales. */
#include "innerq_scales.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_innerq_set s;
    if (tq_innerq_set_load_memory(ctx, data, size, "fuzz", &s) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    if (!s.n_layer || !s.n_head || !s.head_dim) abort();
    for (uint32_t l = 0; l < s.n_layer; l++)
        for (int v = 0; v < 2; v++)
            for (uint32_t h = 0; h < s.n_head; h++) {
                const float *x = tq_innerq_set_at(&s, l, v, h);
                for (uint32_t j = 0; j < s.head_dim; j++)
                    if (!(x[j] > 0.0f) || isinf(x[j])) abort();
            }
    tq_innerq_set_free(&s);
    return 0;
}
