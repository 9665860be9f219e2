/* test_tqkv_recent.c - a layer's newest cells coded finer than the rest (--recent-cells,
 * --recent-bits): planned as the rows past the coarse ones, decoded with less error than the
 * older cells in blocks and in transform coding, the same bytes at any thread count, left
 * alike in a short state, and an appended snapshot keeps the base's rows as the base coded
 * them. */
#include "harness.h"
#include "kv_plan.h"
#include "kv_snapshot.h"
#include "tq_internal.h"
#include "tqkv.h"

#include <stdlib.h>
#include <string.h>

enum { WIDTH = 64, LAYERS = 2, RECENT = 16, RECENT_BITS = 2 };

/* A sequence file of `cells` cells of normal values, the same values for the same cell
 * whatever the count (a shorter state's cells are a prefix of a longer one's). */
static float value_of(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    (void)user;
    unsigned long long seed = 1 + e + 131ull * c + 7919ull * l + 31ull * (unsigned)is_v;
    return (float)tq_test_randn(&seed);
}

static uint8_t *make_state(uint32_t cells, size_t *len)
{
    tq_test_seq s = {cells, LAYERS, WIDTH, 1, 0, 0, value_of, NULL};
    return tq_test_seq_state(&s, len);
}

/* The state encoded with the balanced preset, the newest RECENT cells RECENT_BITS finer, and
 * transform coding `transform` (TQ_TC_*). */
static uint8_t *encode(const uint8_t *state, size_t len, int threads, int transform,
                       const tqkv_reader *base, size_t *out_len)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.run.threads = threads;
    o.q.transform = transform;
    o.q.recent_cells = RECENT;
    o.q.recent_bits = RECENT_BITS;
    o.in.base = base;
    o.q.base_name = "base.tqkv";
    char err[512];
    uint8_t *snap = tq_test_snapshot_encode(state, len, &o, out_len, err, sizeof err);
    if (!snap) tq_test_fail(__FILE__, __LINE__, " encode: %s\n", err);
    return snap;
}

/* The newest cells' error against the older ones' (past the sink) in the decoded state. */
static void check_newest_finer(const uint8_t *state, size_t sl, const uint8_t *snap, size_t n,
                               uint32_t cells)
{
    char err[512];
    size_t dl;
    uint8_t *back = tq_test_snapshot_decode(snap, n, NULL, &dl, err, sizeof err);
    CHECK(back != NULL, "%s", err);
    if (!back) return;
    double older = tq_test_rows_error(state, sl, back, dl, 0, 1, cells - RECENT);
    double newest = tq_test_rows_error(state, sl, back, dl, 0, cells - RECENT, cells);
    /* two bits finer: a quarter of the step, a sixteenth of the error; at least a quarter */
    CHECK(newest * 4 < older, "the newest cells' error %g, the older ones' %g", newest, older);
    free(back);
}

TEST(recent_cells_are_coded_in_blocks_of_more_bits)
{
    enum { CELLS = 96 };
    size_t sl, n1, n2;
    uint8_t *state = make_state(CELLS, &sl);
    uint8_t *one = encode(state, sl, 1, TQ_TC_OFF, NULL, &n1);
    uint8_t *two = encode(state, sl, 2, TQ_TC_OFF, NULL, &n2);
    CHECK_EQ_U64(n1, n2);
    CHECK(n1 == n2 && !memcmp(one, two, n1), "bytes differ between 1 and 2 threads");
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, one, n1, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        CHECK_EQ(m->t[i].codec, TQKV_CODEC_TQ);
        CHECK_EQ(m->t[i].coarse_end, CELLS - RECENT);
        CHECK_EQ(m->t[i].bits, m->t[i].coarse_bits + RECENT_BITS);
    }
    tqkv_close(r);
    check_newest_finer(state, sl, one, n1, CELLS);
    free(state);
    free(one);
    free(two);
}

TEST(recent_cells_of_a_transform_coded_tensor_take_finer_steps)
{
    /* cells enough for one chunk of rANS streams (the preset's rr), whose newest cells are
       too few to pay for a model a component: zstd's bytes */
    enum { CELLS = 1100 };
    size_t sl, n;
    uint8_t *state = make_state(CELLS, &sl);
    uint8_t *snap = encode(state, sl, 2, TQ_TC_ON, NULL, &n);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, snap, n, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        CHECK_EQ(m->t[i].codec, TQKV_CODEC_KLT);
        CHECK_EQ(m->t[i].coarse_end, CELLS - RECENT);
        CHECK(m->t[i].coarse_scale == 4.0f, "coarse step scale %g, not 4",
              (double)m->t[i].coarse_scale);
        CHECK_EQ(m->t[i].klt_rans, 1);
        CHECK_EQ(m->t[i].klt_rans_coarse, 1);
    }
    tqkv_close(r);
    check_newest_finer(state, sl, snap, n, CELLS);
    free(state);
    free(snap);
}

TEST(recent_cells_are_alike_in_a_state_of_fewer_than_twice_as_many)
{
    size_t sl, n;
    uint8_t *state = make_state(2 * RECENT - 1, &sl);
    uint8_t *snap = encode(state, sl, 1, TQ_TC_OFF, NULL, &n);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, snap, n, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) CHECK_EQ(m->t[i].coarse_end, 0);
    tqkv_close(r);
    free(state);
    free(snap);
}

/* A base of base_cells cells with its newest cells finer, and the state of cells cells
 * appended to it: the base's cells decode alike from both. */
static void check_append(uint32_t base_cells, uint32_t cells, int transform)
{
    size_t pl, fl, bl, al;
    uint8_t *pre = make_state(base_cells, &pl);
    uint8_t *full = make_state(cells, &fl);
    uint8_t *base = encode(pre, pl, 1, transform, NULL, &bl);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *br;
    CHECK_OK(ctx, tqkv_open_memory(ctx, base, bl, "base.tqkv", &br));
    CHECK_EQ(tqkv_meta_of(br)->t[0].coarse_end, base_cells - RECENT);
    uint8_t *app = encode(full, fl, 1, transform, br, &al);
    char err[512];
    CHECK(!tq_test_base_cells_alike(base, bl, app, al, br, base_cells, err, sizeof err), "%s",
          err);
    tqkv_close(br);
    free(pre);
    free(full);
    free(base);
    free(app);
}

TEST(recent_append_decodes_the_bases_block_rows_as_the_base_coded_them)
{
    check_append(64, 96, TQ_TC_OFF);
}

TEST(recent_append_decodes_the_bases_transform_rows_as_the_base_coded_them)
{
    check_append(1100, 1200, TQ_TC_ON);
}
