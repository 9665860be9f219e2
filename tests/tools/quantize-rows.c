/* quantize-rows.c - test tool: float32 rows on stdin quantized by libtq to
 * TYPE, blocks on stdout, so oracle tests can compare tq's encoders with
 * ggml's byte for byte.  With IMPORTANCE.f32 (ROW_LEN floats), the
 * importance-weighted encoder. */
#include "tq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *slurp(FILE *f, size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    *n = len / sizeof(float);
    return (float *)b;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: quantize-rows TYPE ROW_LEN [IMPORTANCE.f32] < rows.f32 > blocks\n");
        return 2;
    }
    int t = -1;
    for (int i = 0; i < TQ_DT_COUNT && t < 0; i++)
        if (!strcmp(argv[1], tq_dtype_name((tq_dtype)i))) t = i;
    size_t row = (size_t)strtoull(argv[2], NULL, 10), n = 0, ni = 0;
    float *x = slurp(stdin, &n), *imp = NULL;
    if (argc == 4) {
        FILE *f = fopen(argv[3], "rb");
        imp = f ? slurp(f, &ni) : NULL;
        if (!imp || ni != row) {
            fprintf(stderr, "%s: need %zu importances\n", argv[3], row);
            return 2;
        }
    }
    if (t < 0 || !x || !row || n % row) {
        fprintf(stderr, "bad type, row length or input\n");
        return 2;
    }
    size_t bytes = n / tq_dtype_block_values((tq_dtype)t) * tq_dtype_block_bytes((tq_dtype)t);
    void *out = malloc(bytes + 1);
    tq_ctx *ctx = tq_ctx_new();
    if (tq_quantize_weighted(ctx, (tq_dtype)t, x, n / row, row, imp, out)) {
        fprintf(stderr, "%s\n", tq_ctx_error(ctx));
        return 1;
    }
    fwrite(out, 1, bytes, stdout);
    tq_ctx_free(ctx);
    free(out);
    free(x);
    free(imp);
    return 0;
}
