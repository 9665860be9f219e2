/* test_llama_state.c - the state-file reader on the real fixtures and on
 * small hand-built files, including every truncation. */
#include "harness.h"
#include "llama_state.h"
#include "tq_internal.h"

#include <string.h>

typedef tq_test_buf sb;

/* A sequence file (or an old-layout session file): 3 cells, one of them in
 * two sequences, 2 layers, f16 rows of 16 values, optional transposed V and
 * M-RoPE extensions. */
static sb small_state(int vtrans, int ext, int session_old_outputs)
{
    sb b = {0};
    tq_test_u32(&b, session_old_outputs ? TQ_GGSN_MAGIC : TQ_GGSQ_MAGIC);
    tq_test_u32(&b, session_old_outputs ? 9 : 2);
    tq_test_u32(&b, 3);
    for (int i = 0; i < 3; i++) tq_test_u32(&b, (uint32_t)(10 + i));
    if (session_old_outputs) {
        tq_test_u32(&b, 5);
        tq_test_put(&b, "llama", 5);
        tq_test_u32(&b, 1); /* n_outputs */
        tq_test_u32(&b, 2); /* output_pos */
        tq_test_u64(&b, 4); /* logits */
        for (int i = 0; i < 4; i++) tq_test_u32(&b, 0x3f800000u);
        tq_test_u64(&b, 0); /* embeddings */
    }
    tq_test_u32(&b, 1); /* n_stream */
    tq_test_u32(&b, 3); /* cells */
    for (int c = 0; c < 3; c++) { /* cell 1 belongs to two sequences */
        tq_test_u32(&b, (uint32_t)c);
        tq_test_u32(&b, c == 1 ? 2 : 1);
        if (ext) tq_test_u64(&b, 0x0000000700000005ull);
        tq_test_u32(&b, 0);
        if (c == 1) tq_test_u32(&b, 3);
    }
    tq_test_u32(&b, (uint32_t)vtrans);
    tq_test_u32(&b, 2);
    uint16_t h[48];
    for (int i = 0; i < 48; i++) h[i] = tq_fp32_to_fp16((float)i * 0.5f);
    for (int l = 0; l < 2; l++) {
        tq_test_u32(&b, 1);
        tq_test_u64(&b, 32);
        tq_test_put(&b, h, 96);
    }
    for (int l = 0; l < 2; l++) {
        tq_test_u32(&b, 1);
        if (vtrans) {
            tq_test_u32(&b, 2);
            tq_test_u32(&b, 16);
        } else {
            tq_test_u64(&b, 32);
        }
        tq_test_put(&b, h, 96);
    }
    return b;
}

static tq_status open_sb(const sb *b, tq_kv_view **s, char *msg, size_t n)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_status st = tq_kv_view_open_memory(ctx, b->p, b->n, "s.ggsq", TQ_PROFILE_DEFAULT, s);
    snprintf(msg, n, "%s", st ? tq_ctx_error(ctx) : "");
    tq_ctx_free(ctx);
    return st;
}

TEST(state_small_layouts_parse)
{
    char m[512];
    for (int v = 0; v < 2; v++)
        for (int e = 0; e < 2; e++)
            for (int o = 0; o < 2; o++) {
                sb b = small_state(v, e, o);
                tq_kv_view *s;
                CHECK(open_sb(&b, &s, m, sizeof m) == TQ_OK, "vtrans %d ext %d outputs %d: %s", v, e, o, m);
                CHECK_EQ(tq_kv_view_has_ext(s), e ? 8 : 0);
                CHECK(tq_kv_view_recurrent(s) == NULL);
                CHECK_EQ(tq_kv_view_has_outputs(s), o);
                CHECK_EQ(tq_kv_view_n_tokens(s), 3);
                CHECK_EQ(tq_kv_view_tokens(s)[2], 12);
                const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
                CHECK_EQ(st->cell_count, 3);
                CHECK_EQ(st->n_layer, 2);
                CHECK_EQ(st->v_trans, (uint32_t)v);
                CHECK_EQ(st->k[1].width, 16);
                CHECK_EQ(st->v[1].width, 16);
                CHECK_EQ(st->v[0].transposed, v);
                float rows[48];
                tq_ctx *ctx = tq_ctx_new();
                CHECK_EQ(tq_kv_view_read_rows(ctx, &st->v[1], 3, 0, 3, rows), TQ_OK);
                /* cell-major value (c, j): stored at c*16+j, or at j*3+c when transposed */
                for (int c = 0; c < 3; c++)
                    for (int j = 0; j < 16; j++)
                        CHECK(rows[c * 16 + j] == (v ? (j * 3 + c) : (c * 16 + j)) * 0.5f, "v %d c %d j %d", v, c, j);
                tq_ctx_free(ctx);
                CHECK_EQ(tq_kv_view_kv_values(s), 2 * 2 * 3 * 16);
                tq_kv_view_close(s);
                /* every truncation fails with a message, but these: cut where V begins, the
                   file is an MLA cache's (K alone); cut where the memory begins, a context
                   whose caches share another's cells (nothing written); nothing in the
                   format tells either apart */
                int mla_reads = 0, empty_reads = 0;
                for (size_t k = 0; k < b.n; k++) {
                    sb t = {b.p, k, 0};
                    if (open_sb(&t, &s, m, sizeof m) == TQ_OK && tq_kv_view_n_kv(s) == 0) {
                        CHECK(tq_kv_view_recurrent(s) == NULL, "cut at %zu: a recurrent state", k);
                        empty_reads++;
                        tq_kv_view_close(s);
                        continue;
                    }
                    if (!m[0]) {
                        CHECK(tq_kv_view_kv(s, 0)->streams[0].v == NULL, "cut at %zu of %zu accepted", k, b.n);
                        mla_reads++;
                        tq_kv_view_close(s);
                        continue;
                    }
                    CHECK(strstr(m, "s.ggsq: ") == m, "%s", m);
                }
                CHECK_EQ(mla_reads, 1);
                CHECK(empty_reads >= 1 && empty_reads <= 2, "%d empty readings", empty_reads);
                free(b.p);
            }
}

/* A sequence file of the layouts current llama.cpp writes for newer models: cells with the
 * 12-byte M-RoPE extension (x, y, tok), one attention layer (K f16 rows of 16, V unless mla),
 * then, with rec_layers, a recurrent state of that many layers with state out of
 * rec_layers + 1 (R rows of 24 f32, S rows of 8 f32, one cell); kv 0: the recurrent state
 * alone. */
static sb newer_state(int ext12, int mla, int kv, uint32_t rec_layers)
{
    sb b = {0};
    tq_test_u32(&b, TQ_GGSQ_MAGIC);
    tq_test_u32(&b, 3);
    tq_test_u32(&b, 2);
    tq_test_u32(&b, 7);
    tq_test_u32(&b, 8);
    uint16_t h[32];
    for (int i = 0; i < 32; i++) h[i] = tq_fp32_to_fp16((float)i * 0.25f);
    if (kv) {
        tq_test_u32(&b, 1); /* n_stream */
        tq_test_u32(&b, 2); /* cells */
        for (int c = 0; c < 2; c++) {
            tq_test_u32(&b, (uint32_t)c);
            tq_test_u32(&b, 1);
            if (ext12) {
                tq_test_u32(&b, 0); /* x, y, tok */
                tq_test_u32(&b, 0);
                tq_test_u32(&b, (uint32_t)(7 + c));
            }
            tq_test_u32(&b, 0);
        }
        tq_test_u32(&b, 0); /* v_trans */
        tq_test_u32(&b, 1);
        for (int v = 0; v < (mla ? 1 : 2); v++) {
            tq_test_u32(&b, 1);
            tq_test_u64(&b, 32);
            tq_test_put(&b, h, 64);
        }
    }
    if (!rec_layers) return b;
    tq_test_u32(&b, 1); /* one cell: the sequence's state */
    tq_test_u32(&b, 1);
    tq_test_u32(&b, 0); /* no seq ids in a sequence save */
    tq_test_u32(&b, 0); /* s_trans */
    tq_test_u32(&b, rec_layers + (uint32_t)(kv != 0));
    float f[24];
    for (int i = 0; i < 24; i++) f[i] = (float)i;
    for (int rs = 0; rs < 2; rs++)
        for (uint32_t l = 0; l < rec_layers; l++) {
            tq_test_u32(&b, 0); /* f32 */
            tq_test_u64(&b, rs ? 32 : 96);
            tq_test_put(&b, f, rs ? 32 : 96);
        }
    return b;
}

TEST(state_reads_twelve_byte_cell_extensions)
{
    char m[512];
    tq_kv_view *s;
    sb b = newer_state(1, 0, 1, 0);
    CHECK(open_sb(&b, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK_EQ(tq_kv_view_has_ext(s), 12);
    int32_t pos[2];
    tq_kv_view_stream_positions(s, &tq_kv_view_kv(s, 0)->streams[0], pos);
    CHECK(pos[0] == 0 && pos[1] == 1, "positions %d %d", pos[0], pos[1]);
    tq_kv_view_close(s);
    free(b.p);
}

TEST(state_reads_an_mla_cache_as_k_without_v)
{
    char m[512];
    tq_kv_view *s;
    sb b = newer_state(0, 1, 1, 0);
    CHECK(open_sb(&b, &s, m, sizeof m) == TQ_OK, "%s", m);
    const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
    CHECK(st->v == NULL, "V present");
    CHECK_EQ(st->k[0].width, 16);
    CHECK_EQ(tq_kv_view_kv_values(s), 2 * 16);
    tq_kv_view_close(s);
    free(b.p);
}

TEST(state_reads_a_hybrid_models_recurrent_state_after_its_kv_state)
{
    char m[512];
    tq_kv_view *s;
    sb b = newer_state(1, 0, 1, 3);
    CHECK(open_sb(&b, &s, m, sizeof m) == TQ_OK, "%s", m);
    const tq_kv_recurrent *r = tq_kv_view_recurrent(s);
    CHECK(r != NULL, "no recurrent state");
    CHECK_EQ(tq_kv_view_n_kv(s), 1);
    CHECK_EQ(r->cell_count, 1);
    CHECK_EQ(r->n_layer, 4);
    CHECK_EQ(r->n_records, 6);
    CHECK_EQ(r->state_bytes, 3 * (96 + 32));
    CHECK_EQ(r->off + r->len, b.n);
    tq_kv_view_close(s);
    /* cut anywhere, at a record's end too (two records short), it fails; but two cuts read
       as whole files of other models, which nothing in the format tells apart (a --model
       does): where V begins, an MLA cache's K alone; where the recurrent state begins, an
       attention model's KV state; where the memory begins, caches that share another's
       cells (nothing written) */
    int other_reads = 0;
    for (size_t k = 0; k < b.n; k++) {
        sb t = {b.p, k, 0};
        if (open_sb(&t, &s, m, sizeof m) == TQ_OK) {
            CHECK(!tq_kv_view_recurrent(s), "cut at %zu of %zu accepted", k, b.n);
            other_reads++;
            tq_kv_view_close(s);
        }
    }
    CHECK_EQ(other_reads, 3);
    free(b.p);
}

TEST(state_reads_a_recurrent_state_alone)
{
    char m[512];
    tq_kv_view *s;
    sb b = newer_state(0, 0, 0, 2);
    CHECK(open_sb(&b, &s, m, sizeof m) == TQ_OK, "%s", m);
    CHECK_EQ(tq_kv_view_n_kv(s), 0);
    CHECK(tq_kv_view_recurrent(s) != NULL, "no recurrent state");
    CHECK_EQ(tq_kv_view_recurrent(s)->n_records, 4);
    CHECK_EQ(tq_kv_view_kv_values(s), 0);
    tq_kv_view_close(s);
    free(b.p);
}

TEST(state_rejects_bad_fields)
{
    char m[512];
    tq_kv_view *s;
    sb b = small_state(0, 0, 0);
    uint32_t v = 4;
    memcpy(b.p + 4, &v, 4);
    CHECK(open_sb(&b, &s, m, sizeof m) != TQ_OK && strstr(m, "sequence version 4 is not supported"), "%s", m);
    v = 2;
    memcpy(b.p + 4, &v, 4);
    memcpy(b.p, "GGUF", 4);
    CHECK(open_sb(&b, &s, m, sizeof m) != TQ_OK && strstr(m, "not a llama.cpp state file"), "%s", m);
    free(b.p);
    b = small_state(0, 0, 0);
    tq_test_put(&b, "xx", 2); /* trailing bytes are not silently ignored */
    CHECK(open_sb(&b, &s, m, sizeof m) != TQ_OK, "trailing bytes accepted");
    free(b.p);
    b = small_state(0, 0, 0);
    /* a K type id unknown in the profile */
    size_t k0 = 12 + 12 + 4 + 4 + 3 * 12 + 4 + 8; /* header, tokens, n_stream, cells, meta (+1 seq id), v_trans+n_layer */
    uint32_t bad = 99;
    memcpy(b.p + k0, &bad, 4);
    CHECK(open_sb(&b, &s, m, sizeof m) != TQ_OK && strstr(m, "type id 99"), "%s", m);
    free(b.p);
}

static const char *fixtures[] = {"p1_f16.ggsn", "p1_f16.ggsq", "p1_f16_vtrans.ggsn", "p1_bf16.ggsn", "p1_f32.ggsq", "p1_turbo3.ggsq"};

TEST(state_fixtures_parse)
{
    char path[512];
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        snprintf(path, sizeof path, "%s/fixtures/llama-state/%s", tq_test_shared_dir(), fixtures[i]);
        tq_ctx *ctx = tq_ctx_new();
        tq_kv_view *s;
        tq_status st = tq_kv_view_open(ctx, path, TQ_PROFILE_DEFAULT, &s);
        if (st == TQ_ERR_IO) {
            tq_ctx_free(ctx); /* a skip must not leak: the sanitized run checks leaks */
            SKIP("../shared/fixtures not found");
        }
        CHECK(st == TQ_OK, "%s", tq_ctx_error(ctx));
        const tq_kv_stream *k = &tq_kv_view_kv(s, 0)->streams[0];
        CHECK_EQ(tq_kv_view_n_tokens(s), 1239);
        CHECK_EQ(k->cell_count, 1239);
        CHECK_EQ(k->n_layer, 5);
        CHECK(!tq_kv_view_has_outputs(s) && !tq_kv_view_has_ext(s));
        int turbo = strstr(fixtures[i], "turbo") != NULL;
        CHECK(k->k[0].width == (turbo ? 512u : 32u), "%s width %llu", fixtures[i], (unsigned long long)k->k[0].width);
        CHECK(k->v_trans == (strstr(fixtures[i], "vtrans") != NULL));
        CHECK(!strcmp(tq_kv_view_arch(s), strstr(fixtures[i], "ggsn") ? "llama" : ""));
        tq_kv_view_close(s);
        tq_ctx_free(ctx);
    }
}
