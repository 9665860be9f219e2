/* test_tqkv.c - snapshots: lossless and lossy round trips of hand-built
 * state files through memory, and integrity: every single-byte change and
 * every truncation of a snapshot is refused. */
#include "harness.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "tq_internal.h"
#include "tqkv.h"
#include "tqkv_bytes.h"

#include <math.h>
#include <string.h>


/* sequence file: 40 cells, 3 layers, f16 rows of 2 heads x 32 */
static uint8_t *make_state(size_t *len, int vtrans)
{
    unsigned long long seed = 5;
    tq_test_seq s = {40, 3, 64, 1, vtrans, 100, tq_test_randn_value, &seed};
    return tq_test_seq_state(&s, len);
}

static uint8_t *encode_opts(const uint8_t *state, size_t len, const tq_test_enc *o,
                            size_t *out_len, char *err, size_t errlen)
{
    return tq_test_snapshot_encode(state, len, o, out_len, err, errlen);
}

/* the options most tests use: K 5 / V 4 bits at head size 32, or lossless */
static uint8_t *encode(const uint8_t *state, size_t len, int lossless, size_t *out_len)
{
    char err[512];
    tq_test_enc o = {.q = {.codec = TQKV_CODEC_TQ, .preset = lossless ? TQ_KVSNAP_PRESET_LOSSLESS : TQ_KVSNAP_PRESET_BALANCED, .k_bits = 5, .v_bits = 4, .head_dim = 32}, .run = {.zstd_level = 1, .threads = 1}};
    return encode_opts(state, len, &o, out_len, err, sizeof err);
}

static uint8_t *decode(const uint8_t *snap, size_t len, size_t *out_len, char *err, size_t errlen)
{
    return tq_test_snapshot_decode(snap, len, NULL, out_len, err, errlen);
}

TEST(tqkv_lossless_and_lossy_round_trips)
{
    char err[512];
    for (int vt = 0; vt < 2; vt++) {
        size_t sl, nl, dl;
        uint8_t *state = make_state(&sl, vt);
        uint8_t *snap = encode(state, sl, 1, &nl);
        CHECK(snap != NULL);
        uint8_t *back = decode(snap, nl, &dl, err, sizeof err);
        CHECK(back && dl == sl && !memcmp(back, state, sl), "lossless round trip (vtrans %d): %s", vt, err);
        free(snap), free(back);
        snap = encode(state, sl, 0, &nl);
        back = decode(snap, nl, &dl, err, sizeof err);
        CHECK(back && dl == sl, "%s", err);
        CHECK(nl * 8.0 / (2 * 3 * 40 * 64) < 6.0, "5/4-bit K/V at head 32: %.2f bits per value", nl * 8.0 / (2 * 3 * 40 * 64));
        /* everything but the K/V rows is identical, and the rows are close */
        tq_ctx *ctx = tq_ctx_new();
        tq_kv_view *a, *b;
        CHECK_EQ(tq_kv_view_open_memory(ctx, state, sl, "a", TQ_PROFILE_DEFAULT, &a), TQ_OK);
        CHECK(tq_kv_view_open_memory(ctx, back, dl, "b", TQ_PROFILE_DEFAULT, &b) == TQ_OK, "%s", tq_ctx_error(ctx));
        const tq_kv_stream *sa = &tq_kv_view_kv(a, 0)->streams[0], *sb = &tq_kv_view_kv(b, 0)->streams[0];
        CHECK(!memcmp(state, back, tq_kv_view_prefix_len(a)));
        float ra[40 * 64], rb[40 * 64];
        for (uint32_t l = 0; l < 3; l++)
            for (int kv = 0; kv < 2; kv++) {
                tq_kv_view_read_rows(ctx, kv ? &sa->v[l] : &sa->k[l], 40, 0, 40, ra);
                tq_kv_view_read_rows(ctx, kv ? &sb->v[l] : &sb->k[l], 40, 0, 40, rb);
                double e = 0, s = 0;
                for (int i = 0; i < 40 * 64; i++) e += (ra[i] - rb[i]) * (ra[i] - rb[i]), s += ra[i] * ra[i];
                CHECK(e / s < (kv ? 0.02 : 0.006), "layer %u %s relative error %g", l, kv ? "V" : "K", e / s);
            }
        tq_kv_view_close(a);
        tq_kv_view_close(b);
        tq_ctx_free(ctx);
        free(snap), free(back), free(state);
    }
}

TEST(tqkv_every_byte_flip_and_truncation_is_refused)
{
    size_t sl, nl, dl;
    uint8_t *state = make_state(&sl, 0);
    uint8_t *snap = encode(state, sl, 0, &nl);
    CHECK(snap != NULL);
    char err[512];
    for (size_t i = 0; i < nl; i++) {
        snap[i] ^= 0x40;
        uint8_t *back = decode(snap, nl, &dl, err, sizeof err);
        snap[i] ^= 0x40;
        CHECK(!back, "a flipped byte at %zu of %zu decoded", i, nl);
        CHECK(strstr(err, "x.tqkv: ") == err && !strchr(err, '\n'), "byte %zu: '%s'", i, err);
    }
    for (size_t k = 0; k < nl; k += (k < 64 || nl - k < 64) ? 1 : 7) {
        uint8_t *back = decode(snap, k, &dl, err, sizeof err);
        CHECK(!back, "a snapshot cut to %zu of %zu bytes decoded", k, nl);
    }
    uint8_t *back = decode(snap, nl, &dl, err, sizeof err);
    CHECK(back && dl == sl, "the intact snapshot still decodes: %s", err);
    free(back), free(snap), free(state);
}

/* --append: a snapshot of a longer state that stores only the new cells
 * decodes, with its base, to exactly what a full encode decodes to. */
/* the first `cells` cells (and tokens) of make_state's 40-cell file */
static uint8_t *prefix_state(const uint8_t *full, size_t *len, uint32_t cells)
{
    size_t cap = 1 << 20, n = 0, src = 0;
    uint8_t *b = malloc(cap);
    memcpy(b, full, 8); /* magic, version */
    memcpy(b + 8, &cells, 4);
    memcpy(b + 12, full + 12, 4ull * cells);
    n = 12 + 4ull * cells;
    src = 12 + 4 * 40;
    memcpy(b + n, full + src, 4); /* n_stream */
    memcpy(b + n + 4, &cells, 4);
    n += 8;
    src += 8;
    memcpy(b + n, full + src, 12ull * cells); /* cell metadata */
    n += 12ull * cells;
    src += 12 * 40;
    memcpy(b + n, full + src, 8); /* v_trans, n_layer */
    n += 8;
    src += 8;
    for (int t = 0; t < 6; t++) { /* K and V of 3 layers: type, row size, rows */
        memcpy(b + n, full + src, 12);
        memcpy(b + n + 12, full + src + 12, 128ull * cells);
        n += 12 + 128ull * cells;
        src += 12 + 128 * 40;
    }
    *len = n;
    return b;
}

TEST(tqkv_append_equals_full_encode)
{
    char err[512];
    size_t fl, pl, bl, al, gl, d1, d2;
    uint8_t *full = make_state(&fl, 0), *pre = prefix_state(full, &pl, 25);
    for (int lossless = 0; lossless < 2; lossless++) {
        tq_test_enc o = {.q = {.codec = TQKV_CODEC_TQ, .preset = lossless ? TQ_KVSNAP_PRESET_LOSSLESS : TQ_KVSNAP_PRESET_BALANCED, .k_bits = 5, .v_bits = 4, .head_dim = 32}, .run = {.zstd_level = 1, .threads = 1}};
        uint8_t *base = encode_opts(pre, pl, &o, &bl, err, sizeof err);
        CHECK(base, "%s", err);
        uint8_t *whole = encode_opts(full, fl, &o, &gl, err, sizeof err);
        tq_ctx *ctx = tq_ctx_new();
        tqkv_reader *br;
        CHECK(tqkv_open_memory(ctx, base, bl, "base.tqkv", &br) == TQ_OK, "%s", tq_ctx_error(ctx));
        o.in.base = br;
        o.q.base_name = "dir/base.tqkv";
        uint8_t *app = encode_opts(full, fl, &o, &al, err, sizeof err);
        CHECK(app, "%s", err);
        CHECK(al < gl * 3 / 4, "the appended snapshot stores only the new cells (%zu vs %zu bytes)", al, gl);
        tqkv_reader *ar, *wr;
        CHECK(tqkv_open_memory(ctx, app, al, "app.tqkv", &ar) == TQ_OK, "%s", tq_ctx_error(ctx));
        CHECK(!strcmp(tqkv_meta_of(ar)->base_name, "base.tqkv"));
        CHECK_EQ(tqkv_open_memory(ctx, whole, gl, "whole.tqkv", &wr), TQ_OK);
        char *o1 = NULL, *o2 = NULL;
        FILE *f1 = open_memstream(&o1, &d1), *f2 = open_memstream(&o2, &d2);
        CHECK(tq_kvsnap_decode(ctx, ar, br, &(tq_kvsnap_decode_options){.threads = 2}, f1) == TQ_OK, "%s", tq_ctx_error(ctx));
        CHECK(tq_kvsnap_decode(ctx, wr, NULL, &(tq_kvsnap_decode_options){.threads = 2}, f2) == TQ_OK);
        fclose(f1), fclose(f2);
        CHECK(d1 == d2 && !memcmp(o1, o2, d1), "append+base and full encode decode differently (lossless %d)", lossless);
        if (lossless) CHECK(d1 == fl && !memcmp(o1, full, fl));
        FILE *f3 = fopen("/dev/null", "wb");
        CHECK(tq_kvsnap_decode(ctx, ar, NULL, &(tq_kvsnap_decode_options){.threads = 1}, f3) == TQ_ERR_ARG && strstr(tq_ctx_error(ctx), "base.tqkv"),
              "no base: %s", tq_ctx_error(ctx));
        CHECK(tq_kvsnap_decode(ctx, ar, wr, &(tq_kvsnap_decode_options){.threads = 1}, f3) == TQ_ERR_ARG, "another snapshot as the base");
        fclose(f3);
        free(o1), free(o2);
        /* a state whose tokens do not continue the base's is refused */
        full[12] ^= 1;
        uint8_t *bad = encode_opts(full, fl, &o, &al, err, sizeof err);
        full[12] ^= 1;
        CHECK(!bad && strstr(err, "not a prefix"), "%s", err);
        tqkv_close(ar), tqkv_close(wr), tqkv_close(br);
        tq_ctx_free(ctx);
        free(base), free(whole), free(app);
    }
    free(full), free(pre);
}

/* Found by fuzzing: a row width of 2^63 + 32 made width x cells x size wrap
 * around to the recorded byte count, and decode then overflowed a buffer.
 * Rebuild that case in the current format with valid checksums. */
#include <xxhash.h>
TEST(tqkv_refuses_wrapping_sizes)
{
    size_t sl, nl;
    char err[512];
    /* no planes: their extension would follow the records this test finds from the end */
    tq_test_enc o = {.q = {.codec = TQKV_CODEC_TQ, .preset = TQ_KVSNAP_PRESET_BALANCED, .k_bits = 5, .v_bits = 4, .head_dim = 32, .no_planes = 1}, .run = {.zstd_level = 1, .threads = 1}};
    uint8_t *state = make_state(&sl, 0), *snap = encode_opts(state, sl, &o, &nl, err, sizeof err);
    CHECK(snap != NULL);
    uint64_t ml;
    memcpy(&ml, snap + 8, 8);
    /* the first tensor record: the metadata's last n_tensors * 72 bytes */
    uint32_t nt;
    memcpy(&nt, snap + 32 + ml - (uint64_t)6 * 72 - 4, 4);
    CHECK(nt == 6, "tensor count %u", nt);
    uint8_t *rec = snap + 32 + ml - (uint64_t)nt * 72;
    uint64_t width;
    memcpy(&width, rec + 52, 8); /* offset of `width` in a record */
    CHECK(width == 64, "record layout: width %llu", (unsigned long long)width);
    width += 1ull << 63;
    memcpy(rec + 52, &width, 8);
    uint64_t h = XXH64(snap + 32, ml, 0);
    memcpy(snap + 16, &h, 8);
    h = XXH64(snap, 24, 0);
    memcpy(snap + 24, &h, 8);
    size_t dl;
    uint8_t *back = decode(snap, nl, &dl, err, sizeof err);
    CHECK(!back && strstr(err, "tensor size inconsistent"), "%s", err);
    free(back), free(snap), free(state);
}

/* A gemma3 session file: 4 cells, two caches (iSWA) of 3 and 15 layers, f16
 * rows of 64. */
static uint8_t *make_iswa_session(size_t *len)
{
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
#define P(v)                                                                                       \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        memcpy(b + n, &v_, sizeof v_);                                                             \
        n += sizeof v_;                                                                            \
    } while (0)
    P(TQ_GGSN_MAGIC);
    P((uint32_t)9);
    P((uint32_t)4);
    for (int i = 0; i < 4; i++) P((int32_t)(7 + i));
    P((uint32_t)6);
    memcpy(b + n, "gemma3", 6), n += 6;
    unsigned long long st = 9;
    for (int s = 0; s < 2; s++) {
        uint32_t layers = s ? 15 : 3;
        P((uint32_t)1);
        P((uint32_t)4);
        for (int c = 0; c < 4; c++) {
            P((int32_t)c);
            P((uint32_t)1);
            P((int32_t)0);
        }
        P((uint32_t)0);
        P(layers);
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t l = 0; l < layers; l++) {
                P((int32_t)1);
                P((uint64_t)128);
                for (int i = 0; i < 4 * 64; i++) P(tq_fp32_to_fp16((float)tq_test_randn(&st) * (1 + s)));
            }
    }
#undef P
    *len = n;
    return b;
}

TEST(tqkv_iswa_layers_are_model_layers)
{
    size_t len, sl, dl;
    uint8_t *state = make_iswa_session(&len);
    char err[512];
    /* InnerQ scales per model layer: layer l's K scales 1 + (l+1)/32, V 2 - l/64, so
     * a record shows which layer's it took */
    static float scales[18 * 2 * 64];
    for (int l = 0; l < 18; l++)
        for (int j = 0; j < 64; j++)
            scales[(l * 2) * 64 + j] = 1 + (l + 1) / 32.0f, scales[(l * 2 + 1) * 64 + j] = 2 - l / 64.0f;
    tq_test_enc o = {.q = {.codec = TQKV_CODEC_TQ, .preset = TQ_KVSNAP_PRESET_BALANCED, .head_dim = 64, .boundary_layers = 1}, .in = {.innerq = scales, .innerq_layers = 18, .innerq_dim = 64}, .run = {.zstd_level = 1, .threads = 1}};
    uint8_t *snap = encode_opts(state, len, &o, &sl, err, sizeof err);
    CHECK(snap != NULL, "%s", err);
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    CHECK(snap && tqkv_open_memory(ctx, snap, sl, "i.tqkv", &r) == TQ_OK, "%s", tq_ctx_error(ctx));
    if (snap && r) {
        const tqkv_meta *m = tqkv_meta_of(r);
        CHECK_EQ(tqkv_version(r), 3);
        CHECK_EQ(m->n_tensors, 36);
        for (uint32_t i = 0; i < m->n_tensors; i++) {
            const tqkv_record *t = &m->t[i];
            uint32_t want = t->kv_state == 0 ? 6 * t->layer + 5 : t->layer + t->layer / 5;
            CHECK(t->model_layer == want, "cache %u layer %u: model layer %u, not %u", t->kv_state, t->layer,
                  t->model_layer, want);
            float ws = t->is_v ? 2 - want / 64.0f : 1 + (want + 1) / 32.0f;
            CHECK(t->innerq && t->innerq_n == 64 && t->innerq[0] == ws && t->innerq[63] == ws,
                  "cache %u layer %u: not model layer %u's InnerQ scales", t->kv_state, t->layer, want);
            int edge = want == 0 || want == 17;
            CHECK((t->bits == 8) == edge, "model layer %u: %u bits (boundary layers count model layers)", want, t->bits);
        }
        tqkv_close(r);
    }
    /* lossless: the state comes back byte for byte through version 3 */
    o.q.preset = TQ_KVSNAP_PRESET_LOSSLESS;
    o.in.innerq = NULL;
    free(snap);
    snap = encode_opts(state, len, &o, &sl, err, sizeof err);
    uint8_t *back = snap ? decode(snap, sl, &dl, err, sizeof err) : NULL;
    CHECK(back && dl == len && !memcmp(back, state, len), "lossless iSWA round trip: %s", err);
    free(back);
    free(snap);
    free(state);
    tq_ctx_free(ctx);
}

/* The one layout table the writer and reader share covers the record's bytes, each field as
 * wide as its member. */
TEST(tqkv_record_fields_fill_the_record_each_as_wide_as_its_member)
{
    int total = 0;
    for (int f = 0; f < tqkv_n_rec_fields; f++) {
        const tqkv_rec_field *rf = &tqkv_rec_fields[f];
        total += rf->bytes;
        CHECK(rf->member >= 0 || rf->member == TQKV_REC_CODEC || rf->member == TQKV_REC_FLAGS,
              "field %d: member %d", f, rf->member);
        CHECK(rf->member < 0 || rf->member + rf->bytes <= (int)sizeof(tqkv_record),
              "field %d runs past the record", f);
    }
    CHECK_EQ(total, TENSOR_REC);
}

/* ------------------------------------------------- links over a sliding window that moved */

/* Values by position: the same position of the same tokens holds the same K/V in any layout. */
static float value_at(void *user, uint32_t l, int is_v, uint32_t pos, uint32_t e)
{
    unsigned long long own = 7ull * l + 3ull * (uint64_t)is_v + 131ull * pos + 100003ull * e + 1;
    (void)user;
    return (float)tq_test_randn(&own);
}

enum { WIN = 64, WIN_BASE_LO = 100, WIN_NEW = 16 };

/* A window of WIN cells, 2 layers of 2 heads x 32: the base's over positions 100..163 in
 * order (ring 0, added 0); a link's WIN_NEW tokens later, as a ring buffer holds it (the new
 * cells where the oldest were: llama-server's default cache; ring 1) or in order (--swa-full;
 * ring 0). */
static uint8_t *window_state(int ring, uint32_t added, size_t *len)
{
    int32_t pos[WIN];
    for (uint32_t c = 0; c < WIN; c++) {
        pos[c] = (int32_t)(WIN_BASE_LO + (ring ? 0 : added) + c);
        if (ring && c < added) pos[c] = (int32_t)(WIN_BASE_LO + WIN + c);
    }
    tq_test_seq s = {WIN, 2, 64, 1, 0, 100, value_at, NULL};
    return tq_test_seq_state_at(&s, pos, WIN_BASE_LO + WIN + added, len);
}

/* The base state's snapshot with options o, and the link state's appended to it, each opened
 * (o's base set to the base's reader). */
static void encode_link(tq_ctx *ctx, const uint8_t *pre, size_t pl, const uint8_t *state,
                        size_t sl, tq_test_enc *o, uint8_t **base, size_t *bl,
                        tqkv_reader **br, uint8_t **link, size_t *ll, tqkv_reader **lr)
{
    char err[512];
    *base = encode_opts(pre, pl, o, bl, err, sizeof err);
    CHECK(*base, "%s", err);
    CHECK_OK(ctx, tqkv_open_memory(ctx, *base, *bl, "base.tqkv", br));
    o->in.base = *br;
    o->q.base_name = "base.tqkv";
    *link = encode_opts(state, sl, o, ll, err, sizeof err);
    CHECK(*link, "%s", err);
    CHECK_OK(ctx, tqkv_open_memory(ctx, *link, *ll, "link.tqkv", lr));
}

/* Whether the rows at each position the two decoded states both hold are the same bytes. */
static int same_rows_by_position(tq_ctx *ctx, const uint8_t *a, size_t al, const uint8_t *b,
                                 size_t bl, uint32_t *n_common)
{
    tq_kv_view *va = NULL, *vb = NULL;
    int same = !tq_kv_view_open_memory(ctx, a, al, "a", TQ_PROFILE_DEFAULT, &va) &&
               !tq_kv_view_open_memory(ctx, b, bl, "b", TQ_PROFILE_DEFAULT, &vb);
    *n_common = 0;
    const tq_kv_stream *sa = same ? &tq_kv_view_kv(va, 0)->streams[0] : NULL;
    const tq_kv_stream *sb = same ? &tq_kv_view_kv(vb, 0)->streams[0] : NULL;
    int32_t pa[WIN], pb[WIN];
    if (same) {
        tq_kv_view_stream_positions(va, sa, pa);
        tq_kv_view_stream_positions(vb, sb, pb);
    }
    for (uint32_t l = 0; same && l < sa->n_layer; l++)
        for (int is_v = 0; is_v < 2; is_v++) {
            const tq_kv_tensor *ta = is_v ? &sa->v[l] : &sa->k[l];
            const tq_kv_tensor *tb = is_v ? &sb->v[l] : &sb->k[l];
            for (uint32_t i = 0; i < WIN; i++)
                for (uint32_t j = 0; j < WIN; j++) {
                    if (pa[i] != pb[j]) continue;
                    *n_common += !l && !is_v;
                    same &= !memcmp(ta->data + i * ta->row_size, tb->data + j * tb->row_size,
                                    ta->row_size);
                }
        }
    tq_kv_view_close(va);
    tq_kv_view_close(vb);
    return same;
}

TEST(link_over_a_moved_window_stores_only_the_cells_its_base_lacks)
{
    char err[512];
    size_t pl, bl, sl, ll, wl, dl, dbl;
    uint8_t *pre = window_state(0, 0, &pl);
    for (int ring = 0; ring < 2; ring++)
        for (int lossless = 0; lossless < 2; lossless++) {
            tq_ctx *ctx = tq_test_ctx();
            uint8_t *link_state = window_state(ring, WIN_NEW, &sl);
            tq_test_enc o = TQ_TEST_ENC_INIT;
            o.q.preset = lossless ? TQ_KVSNAP_PRESET_LOSSLESS : TQ_KVSNAP_PRESET_BALANCED;
            o.q.head_dim = 32;
            o.run.threads = 1;
            uint8_t *whole = encode_opts(link_state, sl, &o, &wl, err, sizeof err);
            uint8_t *base = NULL, *link = NULL;
            tqkv_reader *br = NULL, *lr = NULL;
            encode_link(ctx, pre, pl, link_state, sl, &o, &base, &bl, &br, &link, &ll, &lr);
            CHECK(lr, "no link (ring %d, lossless %d)", ring, lossless);
            const tqkv_meta *lm = tqkv_meta_of(lr);
            for (uint32_t i = 0; i < lm->n_tensors; i++) {
                const tqkv_record *t = &lm->t[i];
                CHECK(t->row_start == WIN - WIN_NEW && t->base_from == WIN_NEW &&
                          t->share_at == (ring ? WIN_NEW : 0),
                      "ring %d lossless %d tensor %u: shares %u rows from the base's row %u at "
                      "row %u (want %u from %u at %u)",
                      ring, lossless, i, t->row_start, t->base_from, t->share_at, WIN - WIN_NEW,
                      WIN_NEW, ring ? WIN_NEW : 0);
            }
            CHECK(ll * 2 < wl, "ring %d lossless %d: the link %zu bytes, a whole snapshot %zu",
                  ring, lossless, ll, wl);
            uint8_t *dec = tq_test_snapshot_decode(link, ll, br, &dl, err, sizeof err);
            uint8_t *dec_base = tq_test_snapshot_decode(base, bl, NULL, &dbl, err, sizeof err);
            CHECK(dec && dec_base, "%s", err);
            CHECK_EQ_U64(dl, sl);
            if (lossless)
                CHECK(!memcmp(dec, link_state, sl), "ring %d: not the link's bytes", ring);
            uint32_t common = 0;
            CHECK(same_rows_by_position(ctx, dec, dl, dec_base, dbl, &common),
                  "ring %d lossless %d: the shared cells decode otherwise than the base's", ring,
                  lossless);
            CHECK_EQ(common, WIN - WIN_NEW);
            free(dec);
            free(dec_base);
            tqkv_close(lr);
            tqkv_close(br);
            free(link);
            free(whole);
            free(base);
            free(link_state);
        }
    free(pre);
}

TEST(lossless_link_shares_only_cells_whose_bytes_are_the_bases)
{
    char err[512];
    size_t pl, bl, sl, ll, dl;
    uint8_t *pre = window_state(0, 0, &pl);
    uint8_t *link_state = window_state(1, WIN_NEW, &sl);
    /* the cell at position 140 computed again by the server: other bytes (its first K value) */
    tq_ctx *ctx = tq_test_ctx();
    tq_kv_view *v = NULL;
    CHECK_OK(ctx, tq_kv_view_open_memory(ctx, link_state, sl, "s", TQ_PROFILE_DEFAULT, &v));
    const tq_kv_tensor *k0 = &tq_kv_view_kv(v, 0)->streams[0].k[0];
    uint64_t at = (uint64_t)(k0->data - tq_kv_view_bytes(v)) + (140 - WIN_BASE_LO) * k0->row_size;
    tq_kv_view_close(v);
    link_state[at] ^= 1;
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.preset = TQ_KVSNAP_PRESET_LOSSLESS;
    o.run.threads = 1;
    uint8_t *base = NULL, *link = NULL;
    tqkv_reader *br = NULL, *lr = NULL;
    encode_link(ctx, pre, pl, link_state, sl, &o, &base, &bl, &br, &link, &ll, &lr);
    CHECK(lr, "no link");
    const tqkv_record *t = &tqkv_meta_of(lr)->t[0];
    /* rows 16..39 hold 116..139, row 40 the changed 140, rows 41..63 141..163 */
    CHECK(t->row_start == 24 && t->share_at == 16 && t->base_from == 16,
          "shares %u rows from the base's row %u at row %u (want 24 from 16 at 16)",
          t->row_start, t->base_from, t->share_at);
    uint8_t *dec = tq_test_snapshot_decode(link, ll, br, &dl, err, sizeof err);
    CHECK(dec && dl == sl && !memcmp(dec, link_state, sl), "not the link's bytes: %s", err);
    free(dec);
    tqkv_close(lr);
    tqkv_close(br);
    free(link);
    free(base);
    free(link_state);
    free(pre);
}
