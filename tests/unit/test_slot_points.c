/* test_slot_points.c - restore points (issue 46): the counts a state can be cut to with every
 * cache whole, the state writer's refusal of other cuts and its pad cells below a window, the
 * store's choice of a point, and the checkpoint sidecars' checks (formats/store/ckpt.h). */
#include "ckpt.h"
#include "harness.h"
#include "kv_view.h"
#include "llama_state.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The committed 16-token sequence state (one dense cache), malloc'd. */
static uint8_t *seed_state(size_t *len)
{
    FILE *f = fopen("tests/fuzz/seeds/fuzz_state_read/stories16.ggsq", "rb");
    if (!f) return NULL;
    uint8_t *p = malloc(1 << 20);
    *len = p ? fread(p, 1, 1 << 20, f) : 0;
    fclose(f);
    return p;
}

/* The state with its cells moved up by `by` positions: a cache that holds a window only. */
static void shift_positions(const tq_kv_view *v, uint8_t *bytes, int32_t by)
{
    const tq_kv_stream *st = &tq_kv_view_kv(v, 0)->streams[0];
    uint64_t off = st->meta_off;
    for (uint32_t i = 0; i < st->cell_count; i++) {
        int32_t pos;
        uint32_t nseq;
        memcpy(&pos, bytes + off, 4);
        memcpy(&nseq, bytes + off + 4, 4);
        pos += by;
        memcpy(bytes + off, &pos, 4);
        off += 8 + (uint64_t)tq_kv_view_has_ext(v) + 4ull * nseq;
    }
}

/* The seed state with its cells at positions 4..19 of its 16 tokens (a window's cells only),
 * opened over *moved (malloc'd); NULL on failure. */
static tq_kv_view *window_only(tq_ctx *ctx, uint8_t **moved)
{
    size_t len;
    tq_kv_view *v = NULL;
    *moved = seed_state(&len);
    if (!*moved || tq_kv_view_open_memory(ctx, *moved, len, "s", TQ_PROFILE_DEFAULT, &v))
        return NULL;
    uint8_t *copy = malloc(len);
    memcpy(copy, *moved, len);
    shift_positions(v, copy, 4);
    tq_kv_view_close(v);
    free(*moved);
    *moved = copy;
    return tq_kv_view_open_memory(ctx, copy, len, "w", TQ_PROFILE_DEFAULT, &v) ? NULL : v;
}

TEST(a_dense_state_restores_at_every_count)
{
    size_t len;
    uint8_t *bytes = seed_state(&len);
    CHECK(bytes, "the committed seed state");
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *v;
    CHECK(tq_kv_view_open_memory(ctx, bytes, len, "s", TQ_PROFILE_DEFAULT, &v) == TQ_OK, "%s",
          tq_ctx_error(ctx));
    tq_restore_points pt;
    tq_restore_window w;
    tq_restore_points_of(v, &pt, &w);
    CHECK(pt.from == 1 && !pt.recurrent && !w.cells, "from %u, recurrent %d, window %u",
          pt.from, pt.recurrent, w.cells);
    tq_kv_view_close(v);
    tq_ctx_free(ctx);
    free(bytes);
}

TEST(a_window_only_cache_restores_whole_only_and_a_cut_is_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *moved;
    tq_kv_view *v = window_only(ctx, &moved);
    CHECK(v, "%s", tq_ctx_error(ctx));
    tq_restore_points pt;
    tq_restore_window w;
    tq_restore_points_of(v, &pt, &w);
    CHECK(pt.from == 16 && w.lo == 4 && w.hi == 19, "from %u, window %d..%d", pt.from, w.lo,
          w.hi);
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    tq_state_rewrite cut = {TQ_KV_SEQUENCE, NULL, 8, 0, NULL, 0};
    tq_status st = tq_llama_state_write(ctx, v, &cut, f);
    fclose(f);
    CHECK(st == TQ_ERR_UNSUPPORTED && strstr(tq_ctx_error(ctx), "only at all 16 tokens") &&
              strstr(tq_ctx_error(ctx), "positions 4..19"),
          "status %d: %s", st, tq_ctx_error(ctx));
    free(out);
    tq_kv_view_close(v);
    tq_ctx_free(ctx);
    free(moved);
}

TEST(pad_cells_go_below_the_window_and_read_back)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *moved;
    tq_kv_view *v = window_only(ctx, &moved);
    CHECK(v, "%s", tq_ctx_error(ctx));
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    tq_state_rewrite pad = {TQ_KV_SEQUENCE, NULL, 0, 2, NULL, 0};
    tq_status st = tq_llama_state_write(ctx, v, &pad, f);
    fclose(f);
    CHECK(st == TQ_OK, "%s", tq_ctx_error(ctx));
    tq_kv_view *w;
    CHECK(tq_kv_view_open_memory(ctx, out, out_len, "padded", TQ_PROFILE_DEFAULT, &w) == TQ_OK,
          "%s", tq_ctx_error(ctx));
    const tq_kv_stream *a = &tq_kv_view_kv(v, 0)->streams[0];
    const tq_kv_stream *b = &tq_kv_view_kv(w, 0)->streams[0];
    int32_t lo;
    int32_t hi;
    CHECK(tq_kv_view_stream_span(w, b, &lo, &hi) && lo == 2 && hi == 19 &&
              b->cell_count == a->cell_count + 2,
          "cells %u (were %u), positions %d..%d", b->cell_count, a->cell_count, lo, hi);
    /* the pad rows are zeros, the rest as they were */
    uint64_t rs = a->k[0].row_size;
    int zeros = 1;
    for (uint64_t i = 0; i < 2 * rs; i++) zeros &= b->k[0].data[i] == 0;
    CHECK(zeros && !memcmp(b->k[0].data + 2 * rs, a->k[0].data, a->cell_count * rs),
          "layer 0 K: the pad rows zero and the cells' rows kept");
    tq_kv_view_close(w);
    free(out);
    tq_kv_view_close(v);
    tq_ctx_free(ctx);
    free(moved);
}

TEST(the_store_takes_the_longest_point_within_the_shared_prefix)
{
    tq_restore_points dense = {.from = 1};
    tq_restore_points window = {.from = 1000, .n_checkpoints = 2, .checkpoint = {300, 600}};
    tq_restore_points recurrent = {.from = 1000, .recurrent = 1};
    struct {
        const tq_restore_points *pt;
        uint32_t common, prompt, want;
    } cases[] = {
        {&dense, 700, 900, 700},     {&dense, 1000, 1000, 1000}, {&window, 650, 900, 600},
        {&window, 299, 900, 0},      {&window, 1000, 1200, 1000}, {&window, 1000, 1000, 1000},
        {&recurrent, 1000, 1001, 1000}, {&recurrent, 1000, 1000, 0}, {&recurrent, 999, 1200, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t got = tq_restore_point_for(cases[i].pt, 1000, cases[i].common, cases[i].prompt);
        CHECK(got == cases[i].want, "case %zu: %u, want %u", i, got, cases[i].want);
    }
}

TEST(checkpoints_are_counts_within_the_state_in_ascending_order)
{
    tq_restore_points pt;
    tq_restore_points_whole(&pt, 1000);
    CHECK(pt.from == 1000 && !pt.n_checkpoints, "whole: from %u, %u checkpoints", pt.from,
          pt.n_checkpoints);
    CHECK(tq_restore_points_add_checkpoint(&pt, 1000, 300), "300 of 1000 taken");
    CHECK(!tq_restore_points_add_checkpoint(&pt, 1000, 300), "300 again refused");
    CHECK(!tq_restore_points_add_checkpoint(&pt, 1000, 1001), "1001 of 1000 refused");
    CHECK(!tq_restore_points_add_checkpoint(&pt, 1000, 0), "0 refused");
    CHECK(tq_restore_points_add_checkpoint(&pt, 1000, 600), "600 taken");
    CHECK(pt.n_checkpoints == 2 && tq_restore_points_valid(&pt, 1000), "%u checkpoints, valid %d",
          pt.n_checkpoints, tq_restore_points_valid(&pt, 1000));
    CHECK(!tq_restore_points_valid(&pt, 500), "points of 1000 tokens taken for 500");
    uint32_t added = pt.n_checkpoints;
    for (uint32_t c = 601; c <= 1000; c++) added += (uint32_t)tq_restore_points_add_checkpoint(&pt, 1000, c);
    CHECK(added == TQ_RESTORE_MAX_CHECKPOINTS, "%u checkpoints kept, want at most %u", added,
          TQ_RESTORE_MAX_CHECKPOINTS);
    CHECK(tq_restore_point_needs_checkpoint(&pt, 600) && !tq_restore_point_needs_checkpoint(&pt, 1000),
          "a point below from needs its checkpoint, from does not");
}

TEST(a_window_restore_is_used_only_past_the_window_and_its_pad)
{
    uint32_t window = 64;
    CHECK(tq_restore_window_used(10, 0), "no window: every point is used");
    CHECK(!tq_restore_window_used(window, window), "a point at the window: processed again");
    CHECK(!tq_restore_window_used(window + TQ_RESTORE_PAD_CELLS - 1, window),
          "a point within the pad: processed again");
    CHECK(tq_restore_window_used(window + TQ_RESTORE_PAD_CELLS, window),
          "a point past the window and its pad: used");
}

TEST(the_proxy_saves_all_but_the_last_token_where_points_are_exact)
{
    CHECK(tq_restore_exact_points(4096, 0) && tq_restore_exact_points(0, 2) &&
              !tq_restore_exact_points(0, 0),
          "a window or a recurrent state makes points exact; a dense model not");
    CHECK(tq_restore_save_point(1, 900) == 899, "exact: %u, want 899",
          tq_restore_save_point(1, 900));
    CHECK(tq_restore_save_point(0, 900) == 0, "dense: %u, want 0 (no save at the end)",
          tq_restore_save_point(0, 900));
    CHECK(tq_restore_save_point(1, 0) == 0, "an empty prompt: %u", tq_restore_save_point(1, 0));
}

/* A sidecar as the fork writes it: checkpoints at the given counts, blob i of i + 3 bytes. */
static uint8_t *sidecar(const int64_t *counts, uint32_t n, uint64_t *len)
{
    uint8_t *p = calloc(1, 4096);
    uint32_t head[3] = {TQ_CKPT_MAGIC, 1, n};
    memcpy(p, head, 12);
    uint64_t at = 12;
    for (uint32_t i = 0; i < n; i++) {
        int32_t pos[2] = {0, (int32_t)counts[i] - 1};
        uint64_t sizes[2] = {i + 3, 0};
        memcpy(p + at, &counts[i], 8);
        memcpy(p + at + 8, pos, 8);
        memcpy(p + at + 16, sizes, 16);
        memset(p + at + 32, 'a' + (int)i, i + 3);
        at += 32 + i + 3;
    }
    *len = at;
    return p;
}

TEST(a_checkpoint_sidecar_is_checked_cut_and_kept_whole)
{
    tq_ctx *ctx = tq_ctx_new();
    const int64_t counts[3] = {4, 9, 12};
    uint64_t len;
    uint8_t *side = sidecar(counts, 3, &len);
    tq_ckpt c[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t k;
    CHECK(tq_ckpt_parse(ctx, side, len, 16, c, &k) == TQ_OK && k == 3, "%s (%u)",
          tq_ctx_error(ctx), k);
    uint8_t *cut;
    uint64_t cut_len;
    uint32_t kept;
    CHECK(tq_ckpt_upto(ctx, side, c, k, 10, &cut, &cut_len, &kept) == TQ_OK && kept == 2,
          "kept %u", kept);
    tq_ckpt c2[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t k2;
    CHECK(tq_ckpt_parse(ctx, cut, cut_len, 16, c2, &k2) == TQ_OK && k2 == 2 && c2[1].n_tokens == 9,
          "%s", tq_ctx_error(ctx));
    free(cut);
    uint8_t *packed;
    uint64_t packed_len;
    uint8_t *back;
    uint64_t back_len;
    CHECK(tq_ckpt_pack(ctx, side, c, k, NULL, NULL, &packed, &packed_len) == TQ_OK);
    CHECK(tq_ckpt_unpack(ctx, packed, packed_len, 1 << 20, NULL, NULL, &back, &back_len) ==
                  TQ_OK &&
              back_len == len && !memcmp(back, side, len),
          "%s", tq_ctx_error(ctx));
    free(back);
    packed[packed_len - 1] ^= 1;
    CHECK(tq_ckpt_unpack(ctx, packed, packed_len, 1 << 20, NULL, NULL, &back, &back_len) ==
              TQ_ERR_CORRUPT,
          "a flipped bit: %s", tq_ctx_error(ctx));
    free(packed);
    free(side);
    tq_ctx_free(ctx);
}

TEST(a_sidecar_that_does_not_add_up_is_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_ckpt c[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t k;
    const int64_t ascending[2] = {4, 9};
    const int64_t descending[2] = {9, 4};
    uint64_t len;
    uint8_t *side = sidecar(ascending, 2, &len);
    CHECK(tq_ckpt_parse(ctx, side, len + 1, 16, c, &k) == TQ_ERR_CORRUPT, "a byte too many");
    CHECK(tq_ckpt_parse(ctx, side, len - 1, 16, c, &k) == TQ_ERR_CORRUPT, "a byte short");
    CHECK(tq_ckpt_parse(ctx, side, len, 8, c, &k) == TQ_ERR_CORRUPT, "past the state's tokens");
    free(side);
    side = sidecar(descending, 2, &len);
    CHECK(tq_ckpt_parse(ctx, side, len, 16, c, &k) == TQ_ERR_CORRUPT, "counts descend");
    side[0] ^= 1;
    CHECK(tq_ckpt_parse(ctx, side, len, 16, c, &k) == TQ_ERR_CORRUPT &&
              strstr(tq_ctx_error(ctx), "PKCL"),
          "no magic: %s", tq_ctx_error(ctx));
    free(side);
    tq_ctx_free(ctx);
}

TEST(prefix_hashes_in_one_pass_equal_each_prefixs_hash)
{
    uint32_t n = 5 * TQ_STORE_STRIDE + 17;
    int32_t *tokens = malloc(4ull * n);
    for (uint32_t i = 0; i < n; i++) tokens[i] = (int32_t)(i * 2654435761u % 50000);
    uint64_t *h = tq_store_prefix_hashes(tokens, n);
    CHECK(h, "out of memory");
    for (uint32_t i = 0; i < n / TQ_STORE_STRIDE; i++) {
        uint64_t want = tq_store_prefix_hash(tokens, (i + 1) * TQ_STORE_STRIDE);
        CHECK(h[i] == want, "boundary %u: %016llx, want %016llx", i, (unsigned long long)h[i],
              (unsigned long long)want);
    }
    free(h);
    free(tokens);
}
