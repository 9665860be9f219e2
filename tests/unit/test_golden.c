/* test_golden.c - compatibility with the TurboQuant+ fork's CPU reference:
 * the published reference vectors (embedded, so a machine without ../shared
 * still checks them) and the golden files in ../shared/golden. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>
#include <string.h>

static void hex2bin(const char *hex, uint8_t *out)
{
    for (size_t i = 0; hex[2 * i]; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static tq_codec *mk(tq_codec_kind kind)
{
    tq_codec_desc d = {kind, 0, 0, 0, 0, 0, 0, 0};
    tq_codec *c = NULL;
    tq_codec_new(tq_test_ctx(), &d, &c);
    return c;
}

static const struct {
    tq_codec_kind kind;
    const char *hex;
} kv_ref[] = {
    {TQ_CODEC_TURBO2, "3355895b9957bc2a5d6cfaed42960e24d66e57a96b26845a1aba7f21911291841e61"},
    {TQ_CODEC_TURBO3, "ed5457b326b97944afdca58fd57d1819add9be53825819b47164d9462761621979873a1a7e62"
                      "ef914379e15738f347188843"},
    {TQ_CODEC_TURBO4, "31550000b5c1af45c4834d36e1cfb829f724f07dbbeef5e80c517bb7da01420b6de3eb5b7e36"
                      "a5bbae4a381b31a2ba459d16b8bded6d121a26940c1303c43281eb262648"},
};

/* turboquant-formats.md 8.1: x[i] = sinf(i*0.1f + 0.5f) * 10 encodes to these exact bytes. */
TEST(golden_embedded_kv_blocks)
{
    tq_ctx *ctx = tq_ctx_new();
    float x[128];
    for (int i = 0; i < 128; i++) x[i] = sinf(i * 0.1f + 0.5f) * 10.0f;
    for (size_t t = 0; t < 3; t++) {
        tq_codec *c = mk(kv_ref[t].kind);
        uint8_t want[68], got[68];
        hex2bin(kv_ref[t].hex, want);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best(); lvl++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            CHECK_EQ(tq_encode(ctx, c, x, 128, got), TQ_OK);
            CHECK(memcmp(got, want, tq_codec_block_bytes(c)) == 0, "%s bytes differ at simd %s",
                  tq_codec_name(c), tq_simd_name((tq_simd)lvl));
        }
        tq_codec_free(c);
    }
    /* turbo3 dequant: rotated domain and after the inverse WHT */
    tq_codec *c = mk(TQ_CODEC_TURBO3);
    uint8_t blk[50];
    float y[128];
    hex2bin(kv_ref[1].hex, blk);
    tq_decode_rotated(ctx, c, blk, 128, y);
    const float rot[4] = {-1.691316f, 5.179321f, -9.286634f, 5.179321f};
    for (int i = 0; i < 4; i++) CHECK(fabsf(y[i] - rot[i]) < 2e-6f * 10, "rotated[%d] = %f", i, y[i]);
    tq_decode(ctx, c, blk, 128, y);
    const float org[4] = {4.09285f, 5.05043f, 4.85164f, 8.75079f};
    for (int i = 0; i < 4; i++) CHECK(fabsf(y[i] - org[i]) < 1e-4f, "decoded[%d] = %f", i, y[i]);
    double e = 0, s = 0;
    for (int i = 0; i < 128; i++) e += (y[i] - x[i]) * (y[i] - x[i]), s += x[i] * x[i];
    CHECK(fabs(e / s - 0.0271) < 0.00051, "turbo3 relative MSE %.5f", e / s);
    tq_codec_free(c);
    tq_ctx_free(ctx);
}

TEST(golden_embedded_weight_blocks)
{
    tq_ctx *ctx = tq_ctx_new();
    float w[32], y[32];
    for (int i = 0; i < 32; i++) w[i] = (i - 15.5f) / 8.0f;
    const char *hex[2] = {"263c013d46963a1b555537d747472afa56563838", "293caf3ed3d81892b4ccd3d4f4db4651"};
    tq_codec_kind kinds[2] = {TQ_CODEC_TQ4_1S, TQ_CODEC_TQ3_1S};
    for (int t = 0; t < 2; t++) {
        tq_codec *c = mk(kinds[t]);
        uint8_t want[20], got[20];
        hex2bin(hex[t], want);
        size_t bb = tq_codec_block_bytes(c);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best(); lvl++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
            CHECK_EQ(tq_encode(ctx, c, w, 32, got), TQ_OK);
            CHECK(memcmp(got, want, bb) == 0, "%s fork-search bytes differ (simd %s)", tq_codec_name(c),
                  tq_simd_name((tq_simd)lvl));
            /* the default search must be at least as good as the fork's block */
            tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
            CHECK_EQ(tq_encode(ctx, c, w, 32, got), TQ_OK);
            double eb = 0, ef = 0;
            tq_decode(ctx, c, got, 32, y);
            for (int i = 0; i < 32; i++) eb += (y[i] - w[i]) * (y[i] - w[i]);
            tq_decode(ctx, c, want, 32, y);
            for (int i = 0; i < 32; i++) ef += (y[i] - w[i]) * (y[i] - w[i]);
            CHECK(eb <= ef * (1 + 1e-6), "best search error %g above fork's %g", eb, ef);
        }
        if (t == 0) {
            tq_decode(ctx, c, want, 32, y);
            const float d[4] = {-1.92031f, -1.88398f, -1.63633f, -1.53161f};
            for (int i = 0; i < 4; i++) CHECK(fabsf(y[i] - d[i]) < 1e-5f, "tq4_1s dequant[%d] %f", i, y[i]);
        }
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
}

/* ------------------------------------------------ ../shared/golden files */

static int close_rel(float got, float want)
{
    if (got == want || (isnan(got) && isnan(want))) return 1; /* incl. the golden +-inf */
    if (want == 0.0f) return 0;
    return fabsf(got - want) <= 1e-6f * fabsf(want) + 1e-30f;
}

static const char *kv_names[3] = {"turbo2", "turbo3", "turbo4"};

/* The fork's revisions (lib/fork_revisions.c, a row each): a revision's golden files are
 * those of the first row that writes the same three blocks: the first row's in
 * ../shared/golden; a later one's committed under tests/golden/NAME, made from the fork's own
 * reference C (tests/golden/README.md).  A row whose blocks have no files fails. */
static uint32_t golden_owner(uint32_t rev)
{
    uint32_t r = 0;
    while (tq_fork_dtype(r, 2) != tq_fork_dtype(rev, 2) ||
           tq_fork_dtype(r, 3) != tq_fork_dtype(rev, 3) ||
           tq_fork_dtype(r, 4) != tq_fork_dtype(rev, 4))
        r++;
    return r;
}

static int has_turbo(uint32_t rev) { return tq_fork_revision_at(rev)->turbo3 >= 0; }

static void *read_golden(uint32_t rev, const char *file, size_t *len)
{
    char p[256];
    uint32_t owner = golden_owner(rev);
    if (!owner) {
        snprintf(p, sizeof p, "golden/%s", file);
        return tq_test_read_shared(p, len);
    }
    snprintf(p, sizeof p, "tests/golden/%s/%s", tq_fork_revision_at(owner)->name, file);
    return tq_test_read_file(p, len);
}

static tq_codec *mk_rev(uint32_t rev, int t)
{
    tq_codec_desc d = {(tq_codec_kind)(TQ_CODEC_TURBO2 + t), 0, 0, 0, 0, 0, 0, rev};
    tq_codec *c = NULL;
    tq_codec_new(tq_test_ctx(), &d, &c);
    return c;
}

/* Decoding a revision's blocks gives its dequantize_row output (rotated) and that after the
 * inverse WHT, to float32 rounding. */
static void check_kv_decode(uint32_t rev, int *found)
{
    const char *name = tq_fork_revision_at(rev)->name;
    tq_ctx *ctx = tq_ctx_new();
    float y[64 * 128];
    *found = 1;
    for (int t = 0; t < 3; t++) {
        char f[64];
        size_t nb = 0, nr = 0, nd = 0;
        snprintf(f, sizeof f, "%s.blocks", kv_names[t]);
        uint8_t *blk = read_golden(rev, f, &nb);
        snprintf(f, sizeof f, "%s.dequant_rotated.f32", kv_names[t]);
        float *rot = read_golden(rev, f, &nr);
        snprintf(f, sizeof f, "%s.dequant.f32", kv_names[t]);
        float *dq = read_golden(rev, f, &nd);
        if (!blk || !rot || !dq) {
            free(blk), free(rot), free(dq);
            *found = 0;
            break;
        }
        tq_codec *c = mk_rev(rev, t);
        CHECK(c != NULL, "%s %s: no codec", name, kv_names[t]);
        CHECK_EQ(nb, 64 * tq_codec_block_bytes(c));
        CHECK_EQ(nr, sizeof y);
        CHECK_EQ(nd, sizeof y);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best(); lvl++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            tq_decode_rotated(ctx, c, blk, 64 * 128, y);
            for (int i = 0; i < 64 * 128; i++)
                CHECK(close_rel(y[i], rot[i]), "%s %s rotated value %d: %g vs %g", name,
                      kv_names[t], i, y[i], rot[i]);
            tq_decode(ctx, c, blk, 64 * 128, y);
            for (int i = 0; i < 64 * 128; i++)
                CHECK(close_rel(y[i], dq[i]), "%s %s value %d: %g vs %g", name, kv_names[t], i,
                      y[i], dq[i]);
        }
        tq_codec_free(c);
        free(blk), free(rot), free(dq);
    }
    tq_ctx_free(ctx);
}

TEST(golden_kv_decode_first_fork_blocks)
{
    int checked = 0;
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++) {
        if (!has_turbo(rev) || golden_owner(rev)) continue;
        int found = 0;
        check_kv_decode(rev, &found);
        if (!found) SKIP("../shared/golden not found");
        checked++;
    }
    CHECK(checked > 0, "no revision writes the first row's blocks");
}

TEST(golden_kv_decode_every_later_fork_revision)
{
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++) {
        if (!has_turbo(rev) || !golden_owner(rev)) continue;
        int found = 0;
        check_kv_decode(rev, &found);
        CHECK(found, "%s: its blocks' golden files are missing from tests/golden/%s",
              tq_fork_revision_at(rev)->name, tq_fork_revision_at(golden_owner(rev))->name);
    }
}

/* Encoding ../shared/golden/kv_input.f32 reproduces a revision's blocks byte for byte, at
 * every SIMD level. */
static void check_kv_encode(uint32_t rev, const float *in)
{
    const char *name = tq_fork_revision_at(rev)->name;
    tq_ctx *ctx = tq_ctx_new();
    for (int t = 0; t < 3; t++) {
        char f[64];
        size_t nb = 0;
        snprintf(f, sizeof f, "%s.blocks", kv_names[t]);
        uint8_t *want = read_golden(rev, f, &nb);
        CHECK(want != NULL, "%s: %s missing", name, f);
        tq_codec *c = mk_rev(rev, t);
        size_t bb = tq_codec_block_bytes(c);
        CHECK_EQ(nb, 64 * bb);
        uint8_t *got = malloc(64 * bb);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best(); lvl++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            CHECK_EQ(tq_encode(ctx, c, in, 64 * 128, got), TQ_OK);
            for (int v = 0; v < 64; v++)
                CHECK(memcmp(got + v * bb, want + v * bb, bb) == 0,
                      "%s %s vector %d differs at simd %s (first bytes %02x%02x vs %02x%02x)",
                      name, kv_names[t], v, tq_simd_name((tq_simd)lvl), got[v * bb],
                      got[v * bb + 1], want[v * bb], want[v * bb + 1]);
        }
        free(got), free(want);
        tq_codec_free(c);
    }
    tq_ctx_free(ctx);
}

TEST(golden_kv_encode_bytes_every_fork_revision)
{
    size_t nin = 0;
    float *in = tq_test_read_shared("golden/kv_input.f32", &nin);
    if (!in) SKIP("../shared/golden/kv_input.f32 not found");
    CHECK_EQ(nin, 64 * 128 * sizeof(float));
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++)
        if (has_turbo(rev)) check_kv_encode(rev, in);
    free(in);
}

TEST(golden_shared_weights)
{
    size_t nin;
    float *in = tq_test_read_shared("golden/w_input.f32", &nin);
    if (!in) SKIP("../shared/golden not found");
    CHECK_EQ(nin, 256 * 32 * sizeof(float));
    tq_ctx *ctx = tq_ctx_new();
    const char *names[2] = {"tq3_1s", "tq4_1s"};
    float *y = malloc(nin), *yw = malloc(nin);
    for (int t = 0; t < 2; t++) {
        char p[128];
        size_t nb, nd;
        snprintf(p, sizeof p, "golden/%s.blocks", names[t]);
        uint8_t *want = tq_test_read_shared(p, &nb);
        snprintf(p, sizeof p, "golden/%s.dequant.f32", names[t]);
        float *dq = tq_test_read_shared(p, &nd);
        CHECK(want && dq);
        tq_codec *c = mk(t ? TQ_CODEC_TQ4_1S : TQ_CODEC_TQ3_1S);
        size_t bb = tq_codec_block_bytes(c);
        CHECK_EQ(nb, 256 * bb);
        CHECK_EQ(nd, nin);
        tq_decode(ctx, c, want, 256 * 32, yw);
        for (int i = 0; i < 256 * 32; i++)
            CHECK(close_rel(yw[i], dq[i]), "%s decode value %d: %g vs %g", names[t], i, yw[i], dq[i]);
        uint8_t *got = malloc(nb);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= (int)tq_simd_best(); lvl++) {
            tq_ctx_set_simd(ctx, (tq_simd)lvl);
            tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_FORK);
            tq_encode(ctx, c, in, 256 * 32, got);
            CHECK(memcmp(got, want, nb) == 0, "%s fork search differs from golden blocks", names[t]);
            tq_codec_set_weight_search(ctx, c, TQ_WSEARCH_BEST);
            tq_encode(ctx, c, in, 256 * 32, got);
            tq_decode(ctx, c, got, 256 * 32, y);
            for (int b = 0; b < 256; b++) {
                double eg = 0, ew = 0;
                for (int j = 0; j < 32; j++) {
                    double a = y[b * 32 + j] - in[b * 32 + j], w = yw[b * 32 + j] - in[b * 32 + j];
                    eg += a * a, ew += w * w;
                }
                CHECK(eg <= ew * (1 + 1e-6) + 1e-30, "%s block %d: error %g above golden %g", names[t], b, eg, ew);
            }
        }
        free(got), free(want), free(dq);
        tq_codec_free(c);
    }
    free(y), free(yw), free(in);
    tq_ctx_free(ctx);
}
