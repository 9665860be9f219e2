/* test_tqkv_klt.c - transform-coded snapshots (codec KLT): a round trip
 * through memory is close and its bytes do not depend on the thread
 * count, and every bad field of a transform is refused with one line. */
#include "harness.h"
#include "kv_plan.h"
#include "kv_snapshot.h"
#include "tq_internal.h"
#include "tqkv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { CELLS = 300, LAYERS = 2, WIDTH = 64, HEAD = 32 };

/* A sequence file whose rows a transform pays on: three factors shared by
 * every channel of a cell's head, mixed by fixed channel weights, plus
 * noise of each channel's own that falls off along the head. */
static float factor_value(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    uint32_t j = e % HEAD, h = e / HEAD;
    double g[3];
    for (int k = 0; k < 3; k++) {
        unsigned long long seed = 1000003ull * l + 7919ull * (uint64_t)is_v + 31ull * c + 5ull * h + k;
        g[k] = tq_test_randn(&seed);
    }
    double x = 2.0 * g[0] * cos(j * 0.3) + g[1] * sin(j * 0.7) + 0.5 * g[2] * ((j % 4) - 1.5);
    unsigned long long own = 7ull * l + 3ull * (uint64_t)is_v + 131ull * c + 100003ull * e + 1;
    (void)user; /* every value its own seed: a shorter state is a prefix of a longer one */
    return (float)(x + 0.5 * pow(0.75, j) * tq_test_randn(&own)); /* the rest falls off */
}

static uint8_t *make_cells(size_t *len, uint32_t cells)
{
    tq_test_seq s = {cells, LAYERS, WIDTH, 1, 0, 100, factor_value, NULL};
    return tq_test_seq_state(&s, len);
}

static uint8_t *make_state(size_t *len) { return make_cells(len, CELLS); }

static uint8_t *encode_klt_base(const uint8_t *state, size_t len, int threads,
                                const tqkv_reader *base, size_t *out_len)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.transform = TQ_TC_ON;
    o.q.recent_cells = 0; /* every cell alike: the metadata ends with the bases (recent cells:
                           test_tqkv_recent.c) */
    o.q.k_rate = 2.0;
    o.q.v_rate = 2.0;
    o.q.head_dim = HEAD;
    o.run.threads = threads;
    o.in.base = base;
    o.q.base_name = "base.tqkv";
    char err[512];
    uint8_t *snap = tq_test_snapshot_encode(state, len, &o, out_len, err, sizeof err);
    if (!snap) tq_test_fail(__FILE__, __LINE__, " encode: %s\n", err);
    return snap;
}

static uint8_t *encode_klt(const uint8_t *state, size_t len, int threads, size_t *out_len)
{
    return encode_klt_base(state, len, threads, NULL, out_len);
}

static uint8_t *decode(const uint8_t *snap, size_t len, size_t *out_len, char *err, size_t n)
{
    return tq_test_snapshot_decode(snap, len, NULL, out_len, err, n);
}

/* The source's and the decode's views, the snapshot's reader, their rows. */
static void close_both(tq_kv_view *a, tq_kv_view *b, tqkv_reader *r, float *ra, float *rb)
{
    free(ra);
    free(rb);
    tq_kv_view_close(a);
    tq_kv_view_close(b);
    tqkv_close(r);
}

TEST(klt_snapshot_round_trip_is_close_and_the_same_at_any_thread_count)
{
    size_t sl, n1, n2, dl;
    uint8_t *state = make_state(&sl), *one = encode_klt(state, sl, 1, &n1);
    uint8_t *two = encode_klt(state, sl, 2, &n2);
    CHECK_EQ_U64(n1, n2);
    CHECK(n1 == n2 && !memcmp(one, two, n1), "the bytes differ between 1 and 2 threads");
    char err[512];
    uint8_t *back = decode(one, n1, &dl, err, sizeof err);
    CHECK(back != NULL, "%s", err);
    CHECK_EQ_U64(dl, sl);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, one, n1, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        char d[128];
        CHECK_EQ(m->t[i].codec, TQKV_CODEC_KLT);
        CHECK(strstr(tq_kvsnap_describe(&m->t[i], TQ_DESCRIBE_TABLE, d, sizeof d), "klt g=32"),
              "described as '%s'", d);
    }
    tq_kv_view *a, *b;
    CHECK_OK(ctx, tq_kv_view_open_memory(ctx, state, sl, "a", TQ_PROFILE_DEFAULT, &a));
    CHECK_OK(ctx, tq_kv_view_open_memory(ctx, back, dl, "b", TQ_PROFILE_DEFAULT, &b));
    const tq_kv_stream *sa = &tq_kv_view_kv(a, 0)->streams[0], *sb = &tq_kv_view_kv(b, 0)->streams[0];
    float *ra = malloc(sizeof(float) * CELLS * WIDTH), *rb = malloc(sizeof(float) * CELLS * WIDTH);
    for (uint32_t l = 0; l < LAYERS; l++)
        for (int kv = 0; kv < 2; kv++) {
            CHECK_OK(ctx, tq_kv_view_read_rows(ctx, kv ? &sa->v[l] : &sa->k[l], CELLS, 0, CELLS, ra));
            CHECK_OK(ctx, tq_kv_view_read_rows(ctx, kv ? &sb->v[l] : &sb->k[l], CELLS, 0, CELLS, rb));
            double e = 0, s = 0;
            for (int i = 0; i < CELLS * WIDTH; i++) {
                e += (ra[i] - rb[i]) * (ra[i] - rb[i]);
                s += ra[i] * ra[i];
            }
            /* 2 bits a value where three components hold nearly all: a fine step */
            CHECK(e / s < 0.01, "layer %u %s relative error %g", l, kv ? "V" : "K", e / s);
        }
    double bits = n1 * 8.0 / (2.0 * LAYERS * CELLS * WIDTH);
    /* 2 bits of indices, ~0.7 of zstd's overhead on 300-byte component runs, the bases
       (a byte a value: 8 bits x 18 components x 32 values per head over 300 cells, 1.0) and
       V's gains (a byte a row and head, 0.25 at most) */
    CHECK(bits < 4.5, "%.2f bits per value with the bases (%d cells)", bits, CELLS);
    close_both(a, b, r, ra, rb);
    free(state);
    free(one);
    free(two);
    free(back);
}

/* The metadata ends with the last tensor's last head: u32 m, f32 step, m rows of an i8
 * exponent and HEAD i8 values (the test state's V of the last layer). */
enum { ROW_BYTES = 1 + HEAD };

static uint32_t last_m(const uint8_t *meta, uint64_t ml)
{
    for (uint32_t m = 0; m <= HEAD; m++) { /* the m whose field sits where it says */
        uint64_t at = ml - (uint64_t)m * ROW_BYTES - 8;
        uint32_t v;
        memcpy(&v, meta + at, 4);
        if (v == m) return m;
    }
    return 0;
}

static void value_out_of_range(uint8_t *meta, uint64_t ml)
{
    meta[ml - 1] = 0x80; /* -128: the values stop at -127 */
}

static void big_basis(uint8_t *meta, uint64_t ml)
{
    meta[ml - ROW_BYTES] = 1; /* 2^1: 127 x 2^-6, near 2, where no unit row holds it */
    meta[ml - 1] = 127;
}

static void bad_exponent(uint8_t *meta, uint64_t ml)
{
    meta[ml - ROW_BYTES] = 2;
}

static void bad_step(uint8_t *meta, uint64_t ml)
{
    float step = -1.0f;
    memcpy(meta + ml - (uint64_t)last_m(meta, ml) * ROW_BYTES - 4, &step, 4);
}

static void too_many_components(uint8_t *meta, uint64_t ml)
{
    uint32_t m = HEAD + 1;
    memcpy(meta + ml - (uint64_t)last_m(meta, ml) * ROW_BYTES - 8, &m, 4);
}

static void longer_basis(uint8_t *meta, uint64_t ml)
{
    uint32_t m = last_m(meta, ml) + 1; /* one more row than the metadata holds */
    memcpy(meta + ml - (uint64_t)(m - 1) * ROW_BYTES - 8, &m, 4);
}

TEST(klt_snapshot_refuses_bad_transform_fields)
{
    size_t sl, n;
    uint8_t *state = make_state(&sl), *snap = encode_klt(state, sl, 1, &n);
    uint64_t ml;
    memcpy(&ml, snap + 8, 8);
    uint32_t m = last_m(snap + 32, ml);
    CHECK(m > 0 && m < HEAD, "the last head codes %u of %d components", m, HEAD);
    tq_test_snapshot_refused_after(snap, n, value_out_of_range,
                                   "a basis value that is not finite or above 1");
    tq_test_snapshot_refused_after(snap, n, big_basis, "a basis value that is not finite or above 1");
    tq_test_snapshot_refused_after(snap, n, bad_exponent, "a basis row's exponent out of range");
    tq_test_snapshot_refused_after(snap, n, bad_step, "bad transform (components or step)");
    tq_test_snapshot_refused_after(snap, n, too_many_components, "bad transform (components or step)");
    tq_test_snapshot_refused_after(snap, n, longer_basis, "transform basis truncated");
    free(state);
    free(snap);
}

TEST(klt_append_codes_new_cells_with_the_bases_of_the_base)
{
    size_t pl, fl, bl, al;
    uint8_t *pre = make_cells(&pl, 200), *full = make_cells(&fl, CELLS);
    uint8_t *base = encode_klt(pre, pl, 1, &bl);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *br, *ar;
    CHECK_OK(ctx, tqkv_open_memory(ctx, base, bl, "base.tqkv", &br));
    uint8_t *app = encode_klt_base(full, fl, 1, br, &al);
    CHECK(app != NULL, "no appended snapshot");
    CHECK_OK(ctx, tqkv_open_memory(ctx, app, al, "app.tqkv", &ar));
    const tqkv_meta *bm = tqkv_meta_of(br), *am = tqkv_meta_of(ar);
    for (uint32_t i = 0; i < am->n_tensors; i++) { /* the base's transforms, by reference */
        const tqkv_record *a = &am->t[i], *b = &bm->t[i];
        CHECK_EQ(a->codec, TQKV_CODEC_KLT);
        CHECK_EQ(a->row_start, 200);
        CHECK_EQ(a->from_base, 1);
        CHECK_EQ_U64(tqkv_klt_components(a), tqkv_klt_components(b));
        CHECK(a->klt[0].step == b->klt[0].step && !a->klt[0].basis,
              "tensor %u: step %g (the base's %g), basis %s", i, a->klt[0].step, b->klt[0].step,
              a->klt[0].basis ? "stored again" : "the base's");
    }
    char err[512];
    CHECK(!tq_test_base_cells_alike(base, bl, app, al, br, 200, err, sizeof err), "%s", err);
    tqkv_close(ar);
    tqkv_close(br);
    free(pre);
    free(full);
    free(base);
    free(app);
}

/* ------------------------------------------------------------ --transform auto */

/* Rows with no structure a basis could take: every value its own Gaussian draw. */
static float white_value(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    unsigned long long own = 7ull * l + 3ull * (uint64_t)is_v + 131ull * c + 100003ull * e + 1;
    (void)user;
    return (float)tq_test_randn(&own);
}

/* The codec auto gives the K tensor of `cells` cells of `width` values (heads of `head`) from
 * value(), and whether its bases are a byte a value (basis8, where not NULL). */
static int auto_k_record(float (*value)(void *, uint32_t, int, uint32_t, uint32_t),
                         uint32_t cells, uint32_t width, uint32_t head, int *codec, int *basis8)
{
    tq_ctx *ctx = tq_test_ctx();
    size_t len;
    tq_test_seq s = {cells, 1, width, 1, 0, 100, value, NULL};
    uint8_t *state = tq_test_seq_state(&s, &len);
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.head_dim = head;
    tq_kv_view *v = NULL;
    tq_kvsnap_prepared *prep = NULL;
    tq_status st = tq_kv_view_open_memory(ctx, state, len, "s", TQ_PROFILE_DEFAULT, &v);
    if (!st) st = tq_kvsnap_prepare(ctx, v, &o.q, &o.in, &o.run, &prep);
    const tq_kvsnap_plan *p = st ? NULL : prep->plan;
    const tqkv_record *k = st ? NULL : &p->meta.t[p->meta.t[0].is_v ? 1 : 0];
    if (k) *codec = k->codec;
    if (k && basis8) *basis8 = k->klt_basis8;
    if (st) tq_test_fail(__FILE__, __LINE__, " plan: %s\n", tq_ctx_error(ctx));
    tq_kvsnap_prepared_free(prep);
    tq_kv_view_close(v);
    free(state);
    return st ? -1 : 0;
}

static int auto_k_codec(float (*value)(void *, uint32_t, int, uint32_t, uint32_t),
                        uint32_t cells, uint32_t width, uint32_t head, int *codec)
{
    return auto_k_record(value, cells, width, head, codec, NULL);
}

TEST(klt_auto_transforms_k_where_it_costs_fewer_bits_at_tqs_error)
{
    int codec;
    if (auto_k_codec(factor_value, 4000, WIDTH, HEAD, &codec)) return;
    CHECK_EQ(codec, TQKV_CODEC_KLT);
}

TEST(klt_auto_keeps_tqs_codec_for_rows_without_structure)
{
    /* heads of 128: at the preset's rate the transform's indices and bases would be fewer bits
       than tq's 4-bit blocks, but at tq's error they are more (the old rule took it: larger and
       worse).  Heads of 32 are another matter: there tq's fp16 norms cost half a bit a value,
       which the transform does without */
    int codec;
    if (auto_k_codec(white_value, 3000, 256, 128, &codec)) return;
    CHECK_EQ(codec, TQKV_CODEC_TQ);
}

TEST(klt_auto_keeps_tqs_codec_where_the_bases_cost_more_than_they_save)
{
    /* 120 cells: a head of 32's basis is 16 x 32 x 32 bits over 120 x 32 values */
    int codec;
    if (auto_k_codec(factor_value, 120, WIDTH, HEAD, &codec)) return;
    CHECK_EQ(codec, TQKV_CODEC_TQ);
}

/* factor_value's rows plus one direction across every channel of a head whose variance is 10^6
 * times the rest (Gemma 3's global K: a few components hold nearly all the energy): rounding
 * its basis row to a byte a value errs by more than the quantizer at the rate. */
static float dominant_value(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    unsigned long long seed = 1000003ull * l + 7919ull * (uint64_t)is_v + 31ull * c + e / HEAD + 77;
    double j = e % HEAD;
    return factor_value(user, l, is_v, c, e) + (float)(1000.0 * tq_test_randn(&seed) * cos(j * 0.37 + 0.1));
}

/* Two factors across a head over white noise a quarter as strong: no component so strong that a
 * byte a basis value errs by much against the quantizer's step. */
static float mild_value(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    double j = e % HEAD;
    unsigned long long seed = 1000003ull * l + 7919ull * (uint64_t)is_v + 31ull * c + e / HEAD + 5;
    double g0 = tq_test_randn(&seed);
    double g1 = tq_test_randn(&seed);
    return (float)(2.0 * g0 * cos(j * 0.3) + g1 * sin(j * 0.7) + 0.5 * white_value(user, l, is_v, c, e));
}

TEST(klt_bases_keep_a_byte_a_value_where_rounding_adds_little_error)
{
    int codec = -1;
    int basis8 = -1;
    if (auto_k_record(mild_value, 4000, WIDTH, HEAD, &codec, &basis8)) return;
    CHECK_EQ(codec, TQKV_CODEC_KLT);
    CHECK_EQ(basis8, 1);
}

TEST(klt_bases_take_fp16_where_a_byte_a_value_would_add_more_error_than_it_saves_bits)
{
    int codec = -1;
    int basis8 = -1;
    if (auto_k_record(dominant_value, 4000, WIDTH, HEAD, &codec, &basis8)) return;
    CHECK_EQ(codec, TQKV_CODEC_KLT);
    CHECK_EQ(basis8, 0);
}

/* factor_value's rows, each cell's V scaled by a factor from 1/16 to 16 (V rows of a real
 * cache differ in length many times over; the attention sink's is the shortest) */
static float spread_value(void *user, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    float x = factor_value(user, l, is_v, c, e);
    return is_v ? x * ldexpf(1.0f, (int)(c % 9) - 4) : x;
}

TEST(klt_v_rows_keep_their_relative_error_whatever_their_length)
{
    tq_test_seq s = {CELLS, LAYERS, WIDTH, 1, 0, 100, spread_value, NULL};
    size_t sl, n, dl;
    uint8_t *state = tq_test_seq_state(&s, &sl), *snap = encode_klt(state, sl, 1, &n);
    char err[512];
    uint8_t *back = decode(snap, n, &dl, err, sizeof err);
    CHECK(back != NULL, "%s", err);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r;
    CHECK_OK(ctx, tqkv_open_memory(ctx, snap, n, "x.tqkv", &r));
    const tqkv_meta *m = tqkv_meta_of(r);
    for (uint32_t i = 0; i < m->n_tensors; i++) /* V's rows with their gains, K's without */
        CHECK_EQ(m->t[i].klt_gain, m->t[i].is_v);
    tq_kv_view *a, *b;
    CHECK_OK(ctx, tq_kv_view_open_memory(ctx, state, sl, "a", TQ_PROFILE_DEFAULT, &a));
    CHECK_OK(ctx, tq_kv_view_open_memory(ctx, back, dl, "b", TQ_PROFILE_DEFAULT, &b));
    const tq_kv_stream *sa = &tq_kv_view_kv(a, 0)->streams[0], *sb = &tq_kv_view_kv(b, 0)->streams[0];
    float *ra = malloc(sizeof(float) * CELLS * WIDTH), *rb = malloc(sizeof(float) * CELLS * WIDTH);
    CHECK_OK(ctx, tq_kv_view_read_rows(ctx, &sa->v[0], CELLS, 0, CELLS, ra));
    CHECK_OK(ctx, tq_kv_view_read_rows(ctx, &sb->v[0], CELLS, 0, CELLS, rb));
    /* each row's error against its distance from the coded cells' mean (what is coded) */
    double mean[WIDTH] = {0}, e[2] = {0, 0}, sq[2] = {0, 0}; /* the rows of 1/16, of 16 */
    for (uint32_t c = 1; c < CELLS; c++)
        for (int j = 0; j < WIDTH; j++) mean[j] += ra[c * WIDTH + j] / (CELLS - 1.0);
    for (uint32_t c = 1; c < CELLS; c++) {
        int k = c % 9 == 0 ? 0 : c % 9 == 8 ? 1 : -1;
        for (int j = 0; k >= 0 && j < WIDTH; j++) {
            double d = ra[c * WIDTH + j] - rb[c * WIDTH + j], x = ra[c * WIDTH + j] - mean[j];
            e[k] += d * d;
            sq[k] += x * x;
        }
    }
    /* one step for every row would leave the short rows 256^2 times the long rows' share */
    CHECK(e[0] / sq[0] < 4 * e[1] / sq[1], "relative error %g of the short rows, %g of the long",
          e[0] / sq[0], e[1] / sq[1]);
    CHECK(e[1] / sq[1] < 0.02, "relative error of the long rows %g", e[1] / sq[1]);
    close_both(a, b, r, ra, rb);
    free(state);
    free(snap);
    free(back);
}

TEST(tqkv_gain_code_picks_the_nearest_gain_in_log_scale)
{
    CHECK_EQ(tqkv_gain_code(0.0f), 0);
    CHECK_EQ_DBL(tqkv_gain(0), 0.0f);
    CHECK_EQ_DBL(tqkv_gain(128), 1.0f);
    CHECK_EQ_DBL(tqkv_gain(136), 2.0f);
    uint8_t last = 0;
    for (double x = 1e-4; x < 1e4; x *= 1.01) {
        uint8_t c = tqkv_gain_code((float)x);
        double ratio = x / tqkv_gain(c);
        /* within half a step (2^(1/16)) either way */
        CHECK(ratio < 1.0443 && ratio > 1 / 1.0443, "norm %g: code %u, gain %g", x, c,
              (double)tqkv_gain(c));
        CHECK(c >= last, "norm %g: code %u after %u", x, c, last);
        last = c;
    }
    CHECK_EQ(tqkv_gain_code(1e30f), 255); /* beyond the codes: the largest */
    CHECK_EQ(tqkv_gain_code(1e-30f), 1);
}

TEST(tqkv_gain_code_changes_exactly_at_the_borders_between_gains)
{
    /* the border below code c: the geometric mid of gains c - 1 and c, 2^((c - 1/2) / 8 - 16)
       (a float constant within 4 ulps of it).  From it the code steps from c - 1 to c between
       two neighbouring floats, as the search it replaced did (the snapshots' bytes hang on
       it) */
    for (int c = 2; c < 256; c++) {
        float ideal = ldexpf((float)exp2(((c - 1) % 8 + 0.5) / 8), (c - 1) / 8 - 16);
        float border = ideal;
        for (int ulps = 0; ulps < 8; ulps++) border = nextafterf(border, 0.0f);
        for (int ulps = 0; ulps < 16 && tqkv_gain_code(border) < c; ulps++)
            border = nextafterf(border, 1e30f);
        CHECK_EQ(tqkv_gain_code(border), c);
        CHECK_EQ(tqkv_gain_code(nextafterf(border, 0.0f)), c - 1);
    }
    CHECK_EQ(tqkv_gain_code(INFINITY), 255);
    CHECK_EQ(tqkv_gain_code(NAN), 0);
    CHECK_EQ(tqkv_gain_code(-1.0f), 0);
    CHECK_EQ(tqkv_gain_code(1e-45f), 1); /* subnormal */
}

TEST(tqkv_basis_round_keeps_a_byte_a_value_within_half_a_step_and_is_exact_again)
{
    float row[64], again[64];
    unsigned long long seed = 42;
    for (int j = 0; j < 64; j++) row[j] = (float)(tq_test_randn(&seed) / 8.0);
    float top = 0;
    for (int j = 0; j < 64; j++) top = fabsf(row[j]) > top ? fabsf(row[j]) : top;
    float x[64];
    memcpy(x, row, sizeof x);
    tqkv_basis_round(1, x, 64);
    for (int j = 0; j < 64; j++) /* the step: 2^(e - 7) <= top / 64, half of it at most */
        CHECK(fabsf(x[j] - row[j]) <= top / 128, "value %d: %g from %g (largest %g)", j, x[j],
              row[j], top);
    memcpy(again, x, sizeof x);
    tqkv_basis_round(1, again, 64);
    CHECK(!memcmp(again, x, sizeof x), "rounding a stored row changed it");
    float zero[8] = {0};
    tqkv_basis_round(1, zero, 8);
    CHECK_EQ_DBL(zero[3], 0.0f);
}

/* The codec of the first V of a state of independent normal values (nothing a transform can
 * gather: the Llama-8B-shaped session's V) planned with `preset`. */
static int gaussian_v_codec(tq_kvsnap_preset preset)
{
    unsigned long long seed = 9;
    tq_test_seq q = {2048, 1, 128, 1, 0, 0, tq_test_randn_value, &seed};
    size_t sl, n;
    uint8_t *state = tq_test_seq_state(&q, &sl);
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.preset = preset;
    o.q.head_dim = 128;
    char err[512];
    uint8_t *snap = tq_test_snapshot_encode(state, sl, &o, &n, err, sizeof err);
    if (!snap) tq_test_fail(__FILE__, __LINE__, " encode: %s\n", err);
    tq_ctx *ctx = tq_test_ctx();
    tqkv_reader *r = NULL;
    if (snap && tqkv_open_memory(ctx, snap, n, "x.tqkv", &r))
        tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
    int codec = r ? tqkv_meta_of(r)->t[1].codec : -1;
    tqkv_close(r);
    free(snap);
    free(state);
    return codec;
}

TEST(balanced_screens_v_at_its_blocks_error_and_small_does_not)
{
    CHECK_EQ(gaussian_v_codec(TQ_KVSNAP_PRESET_BALANCED), TQKV_CODEC_TQ);
    CHECK_EQ(gaussian_v_codec(TQ_KVSNAP_PRESET_SMALL), TQKV_CODEC_KLT);
}
