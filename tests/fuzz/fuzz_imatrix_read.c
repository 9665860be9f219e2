/* fuzz_imatrix_read.c - libFuzzer target for the imatrix reader (GGUF and
 * legacy .dat forms): any bytes open or fail with a message; what opens is
 * looked up entry by entry. */
#include "imatrix.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_imatrix *m;
    if (tq_imatrix_open_memory(ctx, data, size, "fuzz", &m) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    for (uint32_t i = 0; i < tq_imatrix_n_entries(m); i++) {
        uint64_t n;
        const float *v = tq_imatrix_get(m, tq_imatrix_name(m, i), &n);
        if (!v) abort();
        for (uint64_t j = 0; j < n; j++)
            if (!(v[j] >= 0.0f) || isinf(v[j])) abort(); /* the reader promises finite, non-negative values */
    }
    tq_imatrix_close(m);
    return 0;
}
