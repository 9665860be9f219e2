/* test_state_sections.c - the state layouts of the fork's newer revisions and of upstream
 * llama.cpp b10164, from bytes laid out as their state_write code lays them out: turbo4's
 * 66- and 68-byte blocks told apart, the k_idx section, sequence saves without SWA-masked
 * cells, caches that write nothing, nextn layers.  Each is read, then written back by
 * tq_llama_state_write, byte for byte. */
#include "harness.h"
#include "llama_state.h"
#include "tq_internal.h"

#include <stdio.h>
#include <string.h>

/* A fork revision's number, by its name (tests name revisions, never number them). */
static tq_type_profile rev(const char *name)
{
    tq_type_profile p = -1;
    tq_type_profile_parse(name, &p);
    return p;
}

typedef tq_test_buf sb;

/* A sequence file's header: n_tokens tokens 100, 101, ... */
static void seq_head(sb *b, uint32_t n_tokens)
{
    tq_test_u32(b, TQ_GGSQ_MAGIC);
    tq_test_u32(b, 2);
    tq_test_u32(b, n_tokens);
    for (uint32_t i = 0; i < n_tokens; i++) tq_test_u32(b, 100 + i);
}

/* One stream's cells at positions first.., sequence 0, then v_trans 0 and n_layer. */
static void cells(sb *b, uint32_t n, int32_t first, uint32_t n_layer)
{
    tq_test_u32(b, 1); /* n_stream */
    tq_test_u32(b, n);
    for (uint32_t c = 0; c < n; c++) {
        tq_test_u32(b, (uint32_t)(first + (int32_t)c));
        tq_test_u32(b, 1);
        tq_test_u32(b, 0);
    }
    tq_test_u32(b, 0);
    tq_test_u32(b, n_layer);
}

/* A record: i32 type, u64 row size, n rows of row bytes; byte j of row r is fill(r, j). */
static void record(sb *b, uint32_t type, uint64_t row, uint32_t n, uint8_t (*fill)(uint32_t, uint64_t))
{
    tq_test_u32(b, type);
    tq_test_u64(b, row);
    for (uint32_t r = 0; r < n; r++)
        for (uint64_t j = 0; j < row; j++) {
            uint8_t v = fill(r, j);
            tq_test_put(b, &v, 1);
        }
}

static uint8_t any_bytes(uint32_t r, uint64_t j) { return (uint8_t)(r * 31 + j * 7 + 1); }
/* 68-byte turbo4 blocks as the fork at 69d8e4be4 writes them: rnorm (bytes 2-3) 0 */
static uint8_t rnorm_zero(uint32_t r, uint64_t j) { return j % 68 == 2 || j % 68 == 3 ? 0 : any_bytes(r, j); }
static uint8_t f16_small(uint32_t r, uint64_t j) { return j % 2 ? 0x3c : (uint8_t)(r + j); }

static tq_status open_auto(const sb *b, tq_type_profile p, tq_kv_view **s, char *msg, size_t n)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_status st = tq_kv_view_open_memory(ctx, b->p, b->n, "s.ggsq", p, s);
    snprintf(msg, n, "%s", st ? tq_ctx_error(ctx) : "");
    tq_ctx_free(ctx);
    return st;
}

/* Writes the view back as a sequence file and compares it with the bytes it was read from. */
static void check_written_back(const tq_kv_view *s, const sb *b)
{
    char *out = NULL;
    size_t out_n = 0;
    FILE *f = open_memstream(&out, &out_n);
    tq_ctx *ctx = tq_ctx_new();
    tq_state_rewrite o = {.kind = TQ_KV_SEQUENCE, .arch = ""};
    tq_status st = tq_llama_state_write(ctx, s, &o, f);
    fclose(f);
    CHECK(st == TQ_OK, "write: %s", tq_ctx_error(ctx));
    CHECK(out_n == b->n, "written %zu bytes, read %zu", out_n, b->n);
    size_t at = 0;
    while (at < out_n && out[at] == ((char *)b->p)[at]) at++;
    CHECK(at == out_n, "written bytes differ from the read ones at offset %zu of %zu", at, out_n);
    tq_ctx_free(ctx);
    free(out);
}

/* A turbo4 state, K and V of one layer: 2 cells of `blocks` blocks of `bytes`. */
static sb turbo4_state(uint32_t blocks, uint32_t bytes, uint8_t (*fill)(uint32_t, uint64_t))
{
    sb b = {0};
    seq_head(&b, 2);
    cells(&b, 2, 0, 1);
    record(&b, 44, (uint64_t)blocks * bytes, 2, fill);
    record(&b, 44, (uint64_t)blocks * bytes, 2, fill);
    return b;
}

static void check_turbo4(uint32_t blocks, uint32_t bytes, uint8_t (*fill)(uint32_t, uint64_t),
                         tq_type_profile want, uint64_t want_width, const char *how)
{
    char m[512];
    tq_kv_view *s;
    sb b = turbo4_state(blocks, bytes, fill);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK(tq_kv_view_profile(s) == want, "revision %s, want %s (%s)",
          tq_type_profile_name(tq_kv_view_profile(s)), tq_type_profile_name(want),
          tq_kv_view_profile_how(s));
    CHECK(strstr(tq_kv_view_profile_how(s), how) != NULL, "told by '%s', want '%s'",
          tq_kv_view_profile_how(s), how);
    const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
    CHECK(st->k[0].width == want_width, "K width %llu, want %llu",
          (unsigned long long)st->k[0].width, (unsigned long long)want_width);
    CHECK(st->k[0].type->bytes == bytes, "blocks of %u bytes, want %u", st->k[0].type->bytes,
          bytes);
    check_written_back(s, &b);
    tq_kv_view_close(s);
    free(b.p);
}

TEST(state_tells_turbo4_66_byte_blocks_by_the_row_size)
{
    check_turbo4(3, 66, any_bytes, rev("pr197"), 3 * 128, "66 bytes");
}

TEST(state_tells_turbo4_68_byte_blocks_by_the_row_size)
{
    check_turbo4(3, 68, rnorm_zero, rev("69d8e4be4"), 3 * 128, "68 bytes");
}

TEST(state_never_takes_rows_of_33_68_byte_blocks_for_66_byte_blocks)
{
    /* 33 x 68 = 34 x 66 = 2244 bytes: the old fork's rnorm fields (0) decide */
    check_turbo4(33, 68, rnorm_zero, rev("69d8e4be4"), 33 * 128, "rnorm fields 0");
}

TEST(state_takes_rows_of_34_66_byte_blocks_for_66_byte_blocks)
{
    check_turbo4(34, 66, any_bytes, rev("pr197"), 34 * 128, "66 bytes");
}

TEST(state_with_turbo3_alone_takes_the_newest_revision_unless_told)
{
    char m[512];
    tq_kv_view *s;
    sb b = {0};
    seq_head(&b, 2);
    cells(&b, 2, 0, 1);
    record(&b, 43, 50, 2, any_bytes);
    record(&b, 43, 50, 2, any_bytes);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK(tq_kv_view_profile(s) == TQ_PROFILE_NEWEST, "revision %s",
          tq_type_profile_name(tq_kv_view_profile(s)));
    CHECK(strstr(tq_kv_view_profile_how(s), "not told") != NULL, "told by '%s'",
          tq_kv_view_profile_how(s));
    CHECK(tq_kv_view_kv(s, 0)->streams[0].k[0].type->dtype == (int)tq_fork_dtype((uint32_t)rev("pr197"), 3), "dtype %d",
          tq_kv_view_kv(s, 0)->streams[0].k[0].type->dtype);
    tq_kv_view_close(s);
    CHECK(open_auto(&b, rev("69d8e4be4"), &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK(tq_kv_view_kv(s, 0)->streams[0].k[0].type->dtype == TQ_DT_TURBO3, "dtype %d",
          tq_kv_view_kv(s, 0)->streams[0].k[0].type->dtype);
    CHECK(!strcmp(tq_kv_view_profile_how(s), "option"), "told by '%s'", tq_kv_view_profile_how(s));
    tq_kv_view_close(s);
    free(b.p);
}

/* llama-kv-cache.cpp (b10164), state_write_data: after the K records of a sparse-attention
 * cache, u32 1, then per layer u32 has and, where 1, an f32 record; then V. */
TEST(state_reads_and_writes_the_k_idx_section)
{
    char m[512];
    tq_kv_view *s;
    sb b = {0};
    seq_head(&b, 3);
    cells(&b, 3, 0, 2);
    record(&b, 1, 32, 3, f16_small); /* K, layer 0 and 1 */
    record(&b, 1, 32, 3, f16_small);
    tq_test_u32(&b, 1);
    tq_test_u32(&b, 0); /* layer 0: no indexer keys */
    tq_test_u32(&b, 1);
    record(&b, 0, 16, 3, any_bytes); /* layer 1: 4 f32 a cell */
    record(&b, 1, 32, 3, f16_small); /* V */
    record(&b, 1, 32, 3, f16_small);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
    CHECK(st->k_idx != NULL, "no k_idx section read");
    CHECK(st->k_idx[0].type == NULL, "layer 0 has indexer keys");
    CHECK(st->k_idx[1].type && st->k_idx[1].row_size == 16, "layer 1 k_idx rows of %llu",
          (unsigned long long)st->k_idx[1].row_size);
    CHECK_EQ(st->v[1].width, 16);
    check_written_back(s, &b);
    tq_kv_view_close(s);
    free(b.p);
}

/* An iSWA sequence save of b10164 (llama-kv-cache.cpp, state_write: is_masked_swa cells are
 * not written): the base cache's 10 cells, the sliding-window cache's last 4 alone. */
TEST(state_reads_a_sequence_save_without_swa_masked_cells)
{
    char m[512];
    tq_kv_view *s;
    sb b = {0};
    seq_head(&b, 10);
    cells(&b, 10, 0, 1);
    record(&b, 1, 32, 10, f16_small);
    record(&b, 1, 32, 10, f16_small);
    cells(&b, 4, 6, 1);
    record(&b, 1, 64, 4, f16_small);
    record(&b, 1, 64, 4, f16_small);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK_EQ(tq_kv_view_n_kv(s), 2);
    const tq_kv_stream *swa = &tq_kv_view_kv(s, 1)->streams[0];
    int32_t pos[4];
    tq_kv_view_stream_positions(s, swa, pos);
    CHECK(swa->cell_count == 4 && pos[0] == 6 && pos[3] == 9, "%u cells from %d",
          swa->cell_count, pos[0]);
    check_written_back(s, &b);
    tq_kv_view_close(s);
    free(b.p);
}

/* A cache that shares another's cells writes nothing at all (state_write: `if (other)
 * return`): the sequence file ends with its tokens. */
TEST(state_reads_caches_that_write_nothing)
{
    char m[512];
    tq_kv_view *s;
    sb b = {0};
    seq_head(&b, 5);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK_EQ(tq_kv_view_n_kv(s), 0);
    CHECK_EQ(tq_kv_view_n_tokens(s), 5);
    check_written_back(s, &b);
    tq_kv_view_close(s);
    free(b.p);
}

/* nextn (MTP) layers are counted in the layer loop (b10164: n_layer_all): a state of 2 layers
 * and 1 nextn layer holds 3 layers, read and written as any other. */
TEST(state_reads_nextn_layers_in_the_layer_count)
{
    char m[512];
    tq_kv_view *s;
    sb b = {0};
    seq_head(&b, 2);
    cells(&b, 2, 0, 3);
    for (int kv = 0; kv < 2; kv++)
        for (int l = 0; l < 3; l++) record(&b, 1, 32, 2, f16_small);
    CHECK(open_auto(&b, TQ_PROFILE_AUTO, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK_EQ(tq_kv_view_kv(s, 0)->streams[0].n_layer, 3);
    check_written_back(s, &b);
    tq_kv_view_close(s);
    free(b.p);
}
