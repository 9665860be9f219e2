/* gguf-tensor-f32.c - test tool: a tensor of a GGUF file decoded by tq to
 * float32 (raw little-endian on stdout), any type tq reads, including the
 * fork's TQ3_1S/TQ4_1S that gguf-py does not know.  Also prints the type
 * name on stderr. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gguf-tensor-f32 MODEL.gguf TENSOR > values.f32\n");
        return 2;
    }
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g;
    if (tq_gguf_open(ctx, argv[1], NULL, &g)) {
        fprintf(stderr, "%s\n", tq_ctx_error(ctx));
        return 1;
    }
    int64_t i = tq_gguf_find_tensor(g, argv[2]);
    if (i < 0) {
        fprintf(stderr, "no tensor %s\n", argv[2]);
        return 1;
    }
    const tq_ggml_type *t = tq_gguf_tensor_type(g, i);
    size_t n = (size_t)tq_gguf_tensor_nelements(g, i);
    float *y = malloc(n * sizeof(float) + 4);
    if (t->dtype < 0 || tq_dequantize(ctx, (tq_dtype)t->dtype, tq_gguf_tensor_data(g, i), n, y)) {
        fprintf(stderr, "cannot decode %s (%s)\n", argv[2], t->name);
        return 1;
    }
    fprintf(stderr, "%s\n", t->name);
    fwrite(y, sizeof(float), n, stdout);
    free(y);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return 0;
}
