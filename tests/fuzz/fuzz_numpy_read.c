/* fuzz_numpy_read.c - libFuzzer target for NumPy K/V dumps (.npy, .npz
 * through libarchive) and the NumPy images snapshots rebuild (TQNI): any
 * bytes open or fail with a message; what opens is read, written back as
 * an .npz (whole, and cut to a prefix and a layer), and refused as a state
 * file.  The NumPy reader is called directly, not through the front door. */
#include "kv_numpy.h"
#include "llama_state.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_kv_view *s;
    /* 16 MiB of arrays at most: a deflated member can claim any size */
    if (tq_numpy_open_memory(ctx, data, size, "fuzz", 1 << 24, &s) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    if (tq_kv_view_kind(s) != TQ_KV_NUMPY) abort();
    const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
    for (uint32_t l = 0; l < st->n_layer; l++)
        for (int v = 0; v < 2; v++) {
            const tq_kv_tensor *t = v ? &st->v[l] : &st->k[l];
            float *row = malloc(t->width * sizeof(float));
            if (tq_kv_view_read_rows(ctx, t, st->cell_count, st->cell_count - 1, 1, row) != TQ_OK) abort();
            free(row);
        }
    FILE *f = fopen("/dev/null", "wb");
    if (tq_npz_write(ctx, s, NULL, f) != TQ_OK) abort();
    tq_npz_options cut = {st->cell_count / 2 + 1, 1, 1, 0, NULL};
    if (tq_npz_write(ctx, s, &cut, f) != TQ_OK) abort();
    tq_state_rewrite rw = {.kind = TQ_KV_SESSION, .arch = "llama", .max_tokens = 1};
    if (tq_llama_state_write(ctx, s, &rw, f) == TQ_OK) abort(); /* no cell metadata to rebuild from */
    fclose(f);
    tq_kv_view_close(s);
    return 0;
}
