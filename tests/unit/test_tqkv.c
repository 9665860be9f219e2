/* test_tqkv.c - snapshots: lossless and lossy round trips of hand-built
 * state files through memory, and integrity: every single-byte change and
 * every truncation of a snapshot is refused. */
#include "harness.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "tq_internal.h"
#include "tqkv.h"

#include <math.h>
#include <string.h>

/* sequence file: 40 cells, 3 layers, f16 rows of 2 heads x 32 */
static uint8_t *make_state(size_t *len, int vtrans)
{
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
#define P(v)                                                                                       \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        memcpy(b + n, &v_, sizeof v_);                                                             \
        n += sizeof v_;                                                                            \
    } while (0)
    P(TQ_GGSQ_MAGIC);
    P((uint32_t)2);
    P((uint32_t)40);
    for (int i = 0; i < 40; i++) P((int32_t)(100 + i));
    P((uint32_t)1);
    P((uint32_t)40);
    for (int c = 0; c < 40; c++) {
        P((int32_t)c);
        P((uint32_t)1);
        P((int32_t)0);
    }
    P((uint32_t)vtrans);
    P((uint32_t)3);
    unsigned long long st = 5;
    for (int kv = 0; kv < 2; kv++)
        for (int l = 0; l < 3; l++) {
            P((int32_t)1);
            if (kv && vtrans) {
                P((uint32_t)2);
                P((uint32_t)64);
            } else {
                P((uint64_t)128);
            }
            for (int i = 0; i < 40 * 64; i++) P(tq_fp32_to_fp16((float)tq_test_randn(&st)));
        }
#undef P
    *len = n;
    return b;
}

static uint8_t *encode(const uint8_t *state, size_t len, int lossless, size_t *out_len)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_llama_state *s;
    if (tq_llama_state_open_memory(ctx, state, len, "s", TQ_PROFILE_DEFAULT, &s)) return NULL;
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    tq_kvsnap_options o = {lossless, 5, 4, 0, 32, 1, 0, 0, "69d8e4be4", 1, 0};
    tq_kvsnap_report rep;
    tq_status st = tq_kvsnap_encode(ctx, s, &o, f, &rep);
    fclose(f);
    tq_llama_state_close(s);
    tq_ctx_free(ctx);
    if (st) {
        free(buf);
        return NULL;
    }
    *out_len = bl;
    return (uint8_t *)buf;
}

static uint8_t *decode(const uint8_t *snap, size_t len, size_t *out_len, char *err, size_t errlen)
{
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    uint8_t *out = NULL;
    if (tqkv_open_memory(ctx, snap, len, "x.tqkv", &r) == TQ_OK) {
        char *buf = NULL;
        size_t bl = 0;
        FILE *f = open_memstream(&buf, &bl);
        tq_status st = tq_kvsnap_decode(ctx, r, 2, NULL, f);
        fclose(f);
        tqkv_close(r);
        if (!st) {
            out = (uint8_t *)buf;
            *out_len = bl;
        } else {
            free(buf);
        }
    }
    snprintf(err, errlen, "%s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
    return out;
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
        tq_llama_state *a, *b;
        CHECK(tq_llama_state_open_memory(ctx, state, sl, "a", TQ_PROFILE_DEFAULT, &a) == TQ_OK);
        CHECK(tq_llama_state_open_memory(ctx, back, dl, "b", TQ_PROFILE_DEFAULT, &b) == TQ_OK, "%s", tq_ctx_error(ctx));
        const tq_kv_stream *sa = &tq_llama_state_kv(a, 0)->streams[0], *sb = &tq_llama_state_kv(b, 0)->streams[0];
        CHECK(!memcmp(state, back, tq_llama_state_prefix_len(a)));
        float ra[40 * 64], rb[40 * 64];
        for (uint32_t l = 0; l < 3; l++)
            for (int kv = 0; kv < 2; kv++) {
                tq_kv_tensor_read_rows(ctx, kv ? &sa->v[l] : &sa->k[l], 40, 0, 40, ra);
                tq_kv_tensor_read_rows(ctx, kv ? &sb->v[l] : &sb->k[l], 40, 0, 40, rb);
                double e = 0, s = 0;
                for (int i = 0; i < 40 * 64; i++) e += (ra[i] - rb[i]) * (ra[i] - rb[i]), s += ra[i] * ra[i];
                CHECK(e / s < (kv ? 0.02 : 0.006), "layer %u %s relative error %g", l, kv ? "V" : "K", e / s);
            }
        tq_llama_state_close(a);
        tq_llama_state_close(b);
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
