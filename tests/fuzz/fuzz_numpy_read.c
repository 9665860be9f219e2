/* fuzz_numpy_read.c - libFuzzer target for NumPy K/V dumps (.npy, .npz
 * through libarchive) and the NumPy images snapshots rebuild (TQNI): any
 * bytes open or fail with a message; what opens is read, written back as
 * an .npz (whole, and cut to a prefix and a layer), and refused as a state
 * file. */
#include "kv_numpy.h"
#include "llama_state.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    tq_llama_state *s;
    /* 16 MiB of arrays at most: a deflated member can claim any size */
    if (tq_llama_state_open_memory_limited(ctx, data, size, "fuzz", TQ_PROFILE_DEFAULT, 1 << 24, &s) != TQ_OK) {
        if (!*tq_ctx_error(ctx)) abort();
        return 0;
    }
    if (tq_llama_state_kind(s) != TQ_STATE_NUMPY) { /* a state file: fuzz_state_read's business */
        tq_llama_state_close(s);
        return 0;
    }
    const tq_kv_stream *st = &tq_llama_state_kv(s, 0)->streams[0];
    for (uint32_t l = 0; l < st->n_layer; l++)
        for (int v = 0; v < 2; v++) {
            const tq_kv_tensor *t = v ? &st->v[l] : &st->k[l];
            float *row = malloc(t->width * sizeof(float));
            if (tq_kv_tensor_read_rows(ctx, t, st->cell_count, st->cell_count - 1, 1, row) != TQ_OK) abort();
            free(row);
        }
    FILE *f = fopen("/dev/null", "wb");
    if (tq_state_write_npz(ctx, s, NULL, f) != TQ_OK) abort();
    tq_npz_options cut = {st->cell_count / 2 + 1, 1, 1, 0};
    if (tq_state_write_npz(ctx, s, &cut, f) != TQ_OK) abort();
    tq_state_rewrite rw = {TQ_STATE_SESSION, "llama", 1};
    if (tq_llama_state_rewrite(ctx, s, &rw, f) == TQ_OK) abort(); /* no cell metadata to rebuild from */
    fclose(f);
    tq_llama_state_close(s);
    return 0;
}
