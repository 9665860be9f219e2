/* test_tqkv_past.c - cells a sliding-window layer no longer attends to (older than its window
 * before the newest cell) coded coarser: planned from the model's window, decoded back with
 * more error than the cells in the window, the same bytes at any thread count, appended
 * snapshots keep the base's rows as the base coded them, and every bad field is refused. */
#include "gguf.h"
#include "harness.h"
#include "kv_plan.h"
#include "llama_state.h"
#include "kv_snapshot.h"
#include "tq_internal.h"
#include "tqkv.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { CELLS = 40, WINDOW = 8, WIDTH = 64, GLOBAL = 3, SLIDING = 15 };

/* A gemma3 session file of `cells` cells in two caches (iSWA: 3 global layers, then 15
 * sliding ones), f16 rows of one 64-value head, cell c of sequence c % n_seq at position
 * c / n_seq; every value its own seed, so a shorter state's cells are a prefix of a longer
 * one's. */
static uint8_t *make_session_of(uint32_t cells, uint32_t n_seq, size_t *len)
{
    tq_test_buf b = {0};
    tq_test_ggsn_head(&b, cells, 7, "gemma3");
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t layers = s ? SLIDING : GLOBAL;
        tq_test_u32(&b, 1); /* one stream */
        tq_test_u32(&b, cells);
        for (uint32_t c = 0; c < cells; c++) {
            tq_test_u32(&b, c / n_seq); /* position */
            tq_test_u32(&b, 1);         /* in one sequence */
            tq_test_u32(&b, c % n_seq);
        }
        tq_test_u32(&b, 0); /* K/V not transposed */
        tq_test_u32(&b, layers);
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t l = 0; l < layers; l++) {
                tq_test_u32(&b, 1); /* f16 */
                tq_test_u64(&b, 2 * WIDTH);
                for (uint32_t c = 0; c < cells; c++)
                    for (int e = 0; e < WIDTH; e++) {
                        unsigned long long seed = 1 + e + 101ull * c + 7919ull * l + 31ull * kv +
                                                  1000003ull * s;
                        uint16_t h = tq_fp32_to_fp16((float)tq_test_randn(&seed));
                        tq_test_put(&b, &h, 2);
                    }
            }
    }
    *len = b.n;
    return b.p;
}

static uint8_t *make_session(uint32_t cells, size_t *len)
{
    return make_session_of(cells, 1, len);
}

/* A gemma3 model of no tensors: its 18 layers, head size 64 and sliding window of 8. */
static tq_gguf *make_model(tq_ctx *ctx, tq_test_buf *b)
{
    tq_test_gguf_head(b, 5, "gemma3");
    tq_test_gguf_u32(b, "gemma3.block_count", GLOBAL + SLIDING);
    tq_test_gguf_u32(b, "gemma3.attention.key_length", WIDTH);
    tq_test_gguf_u32(b, "gemma3.attention.value_length", WIDTH);
    tq_test_gguf_u32(b, "gemma3.attention.sliding_window", WINDOW);
    while (b->n % 32) tq_test_put(b, "", 1);
    tq_gguf *g = NULL;
    if (tq_gguf_open_memory(ctx, b->p, b->n, "m.gguf", NULL, &g))
        tq_test_fail(__FILE__, __LINE__, " model: %s\n", tq_ctx_error(ctx));
    return g;
}

/* The session encoded with options o and the model (o->in.model is set for the call). */
static uint8_t *encode_with(const uint8_t *state, size_t len, tq_test_enc *o,
                            size_t *out_len)
{
    tq_ctx *ctx = tq_test_ctx();
    tq_test_buf mb;
    tq_gguf *model = make_model(ctx, &mb);
    tq_model facts = {0};
    if (model && tq_model_read(ctx, model, &facts))
        tq_test_fail(__FILE__, __LINE__, " model: %s\n", tq_ctx_error(ctx));
    o->in.model = &facts;
    char err[512] = "no model";
    uint8_t *snap = NULL;
    if (model) snap = tq_test_snapshot_encode(state, len, o, out_len, err, sizeof err);
    if (!snap) tq_test_fail(__FILE__, __LINE__, " encode: %s\n", err);
    o->in.model = NULL;
    tq_model_free(&facts);
    tq_gguf_close(model);
    free(mb.p);
    return snap;
}

/* The session encoded with the balanced preset, the model, and `past` bits (-1: the
 * preset's). */
static uint8_t *encode(const uint8_t *state, size_t len, int threads, int past,
                       const tqkv_reader *base, size_t *out_len)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.run.threads = threads;
    o.q.past_bits = past;
    o.in.base = base;
    o.q.base_name = "base.tqkv";
    return encode_with(state, len, &o, out_len);
}

TEST(past_window_cells_of_sliding_layers_are_coded_coarser)
{
    size_t sl, n1, n2, dl;
    uint8_t *state = make_session(CELLS, &sl);
    uint8_t *one = encode(state, sl, 1, -1, NULL, &n1);
    uint8_t *two = encode(state, sl, 2, -1, NULL, &n2);
    CHECK_EQ_U64(n1, n2);
    CHECK(one && two && n1 == n2 && !memcmp(one, two, n1), "bytes differ between 1 and 2 threads");
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, one, n1, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        /* the balanced preset: K and V one bit finer (5 and 5) where past cells are coded at 2 */
        CHECK_EQ(t->bits, 5);
        if (t->kv_state == 0) {
            CHECK_EQ(t->coarse_end, 0);
            continue;
        }
        CHECK_EQ(t->coarse_end, CELLS - WINDOW);
        CHECK_EQ(t->coarse_bits, 2);
        CHECK_EQ(t->coarse_uniform, 0);
        CHECK_EQ(t->coarse_nc, 0); /* matched norms cost quality at 1-2 bits */
        char d[160];
        CHECK(strstr(tq_kvsnap_describe(t, TQ_DESCRIBE_PLAN, d, sizeof d), "past(<32,b=2)"),
              "described as '%s'", d);
    }
    char err[512];
    uint8_t *back = tq_test_snapshot_decode(one, n1, NULL, &dl, err, sizeof err);
    CHECK(back != NULL, "%s", err);
    CHECK_EQ_U64(dl, sl);
    double past = tq_test_rows_error(state, sl, back, dl, 1, 1, CELLS - WINDOW);
    double window = tq_test_rows_error(state, sl, back, dl, 1, CELLS - WINDOW, CELLS);
    double global = tq_test_rows_error(state, sl, back, dl, 0, 1, CELLS - WINDOW);
    /* 2 bits' error against 5 bits': at least twice as large */
    CHECK(past > 2 * window, "past cells' error %g, the window's %g", past, window);
    CHECK(past > 2 * global, "past cells' error %g, the global layers' same cells' %g", past,
          global);
    tqkv_close(r);
    free(state);
    free(one);
    free(two);
    free(back);
}

/* Every record of the snapshot without coarse rows and at `bits` (0: any). */
static void check_every_cell_alike(const uint8_t *snap, size_t n, unsigned bits)
{
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, snap, n, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        CHECK_EQ(m->t[i].coarse_end, 0);
        if (bits) CHECK_EQ(m->t[i].bits, bits);
    }
    tqkv_close(r);
}

TEST(past_bits_0_codes_every_cell_alike)
{
    size_t sl, n;
    uint8_t *state = make_session(CELLS, &sl);
    uint8_t *snap = encode(state, sl, 1, 0, NULL, &n);
    check_every_cell_alike(snap, n, 4); /* no lift either */
    free(state);
    free(snap);
}

TEST(a_state_within_the_window_has_no_past_cells)
{
    size_t sl, n;
    uint8_t *state = make_session(WINDOW, &sl);
    uint8_t *snap = encode(state, sl, 1, -1, NULL, &n);
    check_every_cell_alike(snap, n, 4);
    free(state);
    free(snap);
}

TEST(cells_of_two_sequences_are_not_past_each_others_window)
{
    size_t sl, n;
    uint8_t *state = make_session_of(CELLS, 2, &sl); /* sequence 1's newest is not 0's */
    uint8_t *snap = encode(state, sl, 1, -1, NULL, &n);
    check_every_cell_alike(snap, n, 0);
    free(state);
    free(snap);
}

TEST(past_append_decodes_the_bases_cells_as_the_base_coded_them)
{
    size_t pl, fl, bl, al;
    uint8_t *pre = make_session(24, &pl), *full = make_session(CELLS, &fl);
    uint8_t *base = encode(pre, pl, 1, -1, NULL, &bl);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *br, *ar;
    CHECK_OK(ctx, tqkv_open_memory(ctx, base, bl, "base.tqkv", &br));
    uint8_t *app = encode(full, fl, 1, -1, br, &al);
    CHECK_OK(ctx, tqkv_open_memory(ctx, app, al, "app.tqkv", &ar));
    const tqkv_meta *bm = tqkv_meta_of(br), *am = tqkv_meta_of(ar);
    for (uint32_t i = 0; i < am->n_tensors; i++) {
        uint32_t want_b = bm->t[i].kv_state ? 24 - WINDOW : 0;
        uint32_t want_a = am->t[i].kv_state ? CELLS - WINDOW : 0;
        CHECK_EQ(bm->t[i].coarse_end, want_b);
        CHECK_EQ(am->t[i].coarse_end, want_a);
        CHECK_EQ(am->t[i].row_start, 24);
    }
    char err[512];
    CHECK(!tq_test_base_cells_alike(base, bl, app, al, br, 24, err, sizeof err), "%s", err);
    tqkv_close(br);
    tqkv_close(ar);
    free(pre);
    free(full);
    free(base);
    free(app);
}

/* Appended by fewer cells than the window, none of the new cells is past it: the base's
 * coarse coding is still stored, for the base's chunks (it was not, and the decode failed). */
TEST(past_append_of_fewer_cells_than_the_window_decodes_the_bases_cells)
{
    size_t pl, fl, bl, al;
    uint8_t *pre = make_session(24, &pl), *full = make_session(28, &fl);
    uint8_t *base = encode(pre, pl, 1, -1, NULL, &bl);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *br, *ar;
    CHECK_OK(ctx, tqkv_open_memory(ctx, base, bl, "base.tqkv", &br));
    uint8_t *app = encode(full, fl, 1, -1, br, &al);
    CHECK_OK(ctx, tqkv_open_memory(ctx, app, al, "app.tqkv", &ar));
    const tqkv_meta *am = tqkv_meta_of(ar);
    for (uint32_t i = 0; i < am->n_tensors; i++) {
        CHECK_EQ(am->t[i].coarse_end, am->t[i].kv_state ? 24 : 0);
        if (am->t[i].kv_state) CHECK_EQ(am->t[i].coarse_bits, 2);
    }
    char err[512];
    CHECK(!tq_test_base_cells_alike(base, bl, app, al, br, 24, err, sizeof err), "%s", err);
    tqkv_close(br);
    tqkv_close(ar);
    free(pre);
    free(full);
    free(base);
    free(app);
}

/* The global layers' newest 16 cells (recent_cells) in a state whose sliding layers lift
 * their window, under `preset`: the coarse end each global tensor gets. */
static uint32_t global_coarse_end(tq_kvsnap_preset preset)
{
    size_t sl, n;
    uint8_t *state = make_session(CELLS, &sl);
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.preset = preset;
    o.q.recent_cells = 16;
    uint8_t *snap = encode_with(state, sl, &o, &n);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r = NULL;
    if (snap && tqkv_open_memory(ctx, snap, n, "x.tqkv", &r))
        tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
    uint32_t end = r ? tqkv_meta_of(r)->t[0].coarse_end : UINT32_MAX;
    tqkv_close(r);
    free(snap);
    free(state);
    return end;
}

TEST(balanced_leaves_the_newest_cells_to_the_window_lift_and_small_adds_them)
{
    CHECK_EQ(global_coarse_end(TQ_KVSNAP_PRESET_BALANCED), 0);
    CHECK_EQ(global_coarse_end(TQ_KVSNAP_PRESET_SMALL), CELLS - 16);
}

/* The metadata ends with the last tensor's (the last sliding layer's V) coarse rows: u32
 * end, u8 bits, cells, norm correction, planes, f32 step scale. */
static void end_past_cells(uint8_t *meta, uint64_t ml)
{
    uint32_t end = CELLS + 1;
    memcpy(meta + ml - 12, &end, 4);
}

static void end_at_0(uint8_t *meta, uint64_t ml) { memset(meta + ml - 12, 0, 4); }

static void end_inside_a_chunk(uint8_t *meta, uint64_t ml)
{
    uint32_t end = CELLS - WINDOW - 1;
    memcpy(meta + ml - 12, &end, 4);
}

static void bits_9(uint8_t *meta, uint64_t ml) { meta[ml - 8] = 9; }

static void uniform_2(uint8_t *meta, uint64_t ml) { meta[ml - 7] = 2; }

static void planes_2(uint8_t *meta, uint64_t ml) { meta[ml - 5] = 2; }

static void scale_on_blocks(uint8_t *meta, uint64_t ml)
{
    float one = 1.0f;
    memcpy(meta + ml - 4, &one, 4);
}

TEST(past_snapshot_refuses_bad_coarse_fields)
{
    size_t sl, n;
    uint8_t *state = make_session(CELLS, &sl);
    uint8_t *snap = encode(state, sl, 1, -1, NULL, &n);
    uint64_t ml;
    memcpy(&ml, snap + 8, 8);
    uint32_t end;
    memcpy(&end, snap + 32 + ml - 12, 4);
    CHECK_EQ(end, CELLS - WINDOW); /* the field is where the edits expect it */
    static const struct {
        void (*edit)(uint8_t *meta, uint64_t ml);
        const char *want;
    } cases[] = {
        {end_past_cells, "bad coarse rows (their end)"},
        {end_at_0, "bad coarse rows (their end)"},
        {end_inside_a_chunk, "chunk crosses the end of the coarse rows"},
        {bits_9, "bad coarse rows (their coding)"},
        {uniform_2, "bad coarse rows (their coding)"},
        {planes_2, "bad coarse rows (their coding)"},
        {scale_on_blocks, "bad coarse rows (their coding)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        tq_test_snapshot_refused_after(snap, n, cases[i].edit, cases[i].want);
    free(state);
    free(snap);
}
