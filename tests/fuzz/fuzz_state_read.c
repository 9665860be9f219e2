/* fuzz_state_read.c - libFuzzer target for the llama.cpp state reader: any
 * bytes open or fail with a message; what opens is walked and decoded. */
#include "llama_state.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_kv_view *s;
    /* AUTO: the fork's revision told from the bytes, as a state of unknown origin is read */
    if (tq_kv_view_open_memory_limited(ctx, data, size, "fuzz", TQ_PROFILE_AUTO, 1 << 24, &s) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++) {
        const tq_kv_state *k = tq_kv_view_kv(s, i);
        for (uint32_t j = 0; j < k->n_stream; j++) {
            const tq_kv_stream *st = &k->streams[j];
            for (uint32_t l = 0; l < st->n_layer && st->cell_count; l++)
                for (int v = 0; v < (st->v ? 2 : 1); v++) { /* an MLA cache: K alone */
                    const tq_kv_tensor *t = v ? &st->v[l] : &st->k[l];
                    if (t->width > 4096 || t->type->dtype < 0) continue;
                    float *row = malloc(t->width * sizeof(float));
                    tq_kv_view_read_rows(ctx, t, st->cell_count, st->cell_count - 1, 1, row);
                    free(row);
                }
            for (uint32_t l = 0; st->k_idx && l < st->n_layer; l++) /* within the bytes */
                if (st->k_idx[l].type && (st->k_idx[l].data_off > size ||
                                          st->k_idx[l].bytes > size - st->k_idx[l].data_off))
                    abort();
        }
    }
    const tq_kv_recurrent *r = tq_kv_view_recurrent(s); /* within the bytes it came from */
    if (r && (r->off > size || r->len > size - r->off || r->state_bytes > r->len)) abort();
    tq_kv_view_close(s);
    return 0;
}
