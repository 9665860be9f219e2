/* test_kv_restore.c - a snapshot restored as a slot file (tq_kvsnap_restore,
 * formats/snapshot/kv_snapshot_restore.c): a whole state comes back as its source, byte for
 * byte, unless a cache that holds a window alone takes pad cells below it. */
#include "file_io.h"
#include "harness.h"
#include "kv_snapshot.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CELLS = 40, PAD = 2 };

/* A sequence file of 40 cells at pos[cell] (NULL: 0..39), 2 layers of 64 f16 values. */
static uint8_t *state_at(const int32_t *pos, uint32_t n_tokens, size_t *len)
{
    static unsigned long long seed = 9;
    tq_test_seq s = {CELLS, 2, 64, 1, 0, 100, tq_test_randn_value, &seed};
    return pos ? tq_test_seq_state_at(&s, pos, n_tokens, len) : tq_test_seq_state(&s, len);
}

/* The lossless snapshot of state, restored whole as a sequence file with pad_window pad. */
static uint8_t *restored(const uint8_t *state, size_t len, uint32_t pad, size_t *out_len)
{
    char err[512];
    size_t snap_len;
    tq_test_enc o = {.q = {.codec = TQKV_CODEC_TQ, .preset = TQ_KVSNAP_PRESET_LOSSLESS}, .run = {.zstd_level = 1, .threads = 1}};
    uint8_t *snap = tq_test_snapshot_encode(state, len, &o, &snap_len, err, sizeof err);
    if (!snap) fprintf(stderr, "  encode: %s\n", err);
    if (!snap) return NULL;
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    uint8_t *out = NULL;
    char near[4096];
    snprintf(near, sizeof near, "%s/tq-test-restore", tq_temp_dir());
    if (tqkv_open_memory(ctx, snap, snap_len, "x.tqkv", &r) == TQ_OK) {
        char *buf = NULL;
        size_t bl = 0;
        FILE *f = open_memstream(&buf, &bl);
        tq_kvsnap_restore_options ro = {.format = TQ_KV_SEQUENCE, .tmp_near = near,
                                        .pad_window = pad};
        tq_kvsnap_decode_options d = {.threads = 2};
        tq_status st = tq_kvsnap_restore(ctx, r, NULL, &d, &ro, f);
        fclose(f);
        if (st) fprintf(stderr, "  restore: %s\n", tq_ctx_error(ctx));
        if (!st) {
            out = (uint8_t *)buf;
            *out_len = bl;
        } else {
            free(buf);
        }
        tqkv_close(r);
    }
    tq_ctx_free(ctx);
    free(snap);
    return out;
}

TEST(restore_of_a_whole_dense_state_is_its_source_whatever_the_window_pad)
{
    size_t len, back_len = 0;
    uint8_t *state = state_at(NULL, 0, &len);
    uint8_t *back = restored(state, len, PAD, &back_len);
    CHECK(back != NULL, "the restore failed");
    CHECK(back_len == len, "restored %zu bytes, the source %zu", back_len, len);
    CHECK(back && !memcmp(back, state, len), "the restored bytes differ from the source's");
    free(back);
    free(state);
}

TEST(restore_of_a_window_only_cache_adds_its_pad_cells)
{
    int32_t pos[CELLS];
    for (uint32_t c = 0; c < CELLS; c++) pos[c] = 100 + (int32_t)c; /* the last 40 of 140 */
    size_t len, padded_len = 0, plain_len = 0;
    uint8_t *state = state_at(pos, 140, &len);
    uint8_t *padded = restored(state, len, PAD, &padded_len);
    uint8_t *plain = restored(state, len, 0, &plain_len);
    CHECK(padded && plain, "a restore failed");
    CHECK(plain_len == len && plain && !memcmp(plain, state, len),
          "without a pad: %zu bytes, the source %zu", plain_len, len);
    /* each of the 2 layers' K and V rows (64 f16) and each pad cell's metadata */
    CHECK(padded_len > len + PAD * 2 * 2 * 64 * 2, "with a pad of %d: %zu bytes, the source %zu",
          PAD, padded_len, len);
    free(padded);
    free(plain);
    free(state);
}
