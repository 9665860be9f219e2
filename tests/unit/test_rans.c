/* test_rans.c - rANS streams (lib/rans.c): symbols come back, the size meets the entropy, and
 * damaged streams are refused with one line. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 20000 };

/* N symbols of a discretized Laplacian of the given spread, zig-zag coded (0, 1, 2, ...) */
static uint8_t *laplace_symbols(double spread, unsigned long long seed, double *entropy)
{
    uint8_t *s = malloc(N);
    double count[256] = {0};
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((seed >> 11) + 0.5) / 9007199254740992.0;
        double v = u < 0.5 ? spread * log(2 * u) : -spread * log(2 - 2 * u);
        long q = lround(v);
        unsigned long z = q >= 0 ? 2ul * (unsigned long)q : 2ul * (unsigned long)(-q) - 1;
        s[i] = (uint8_t)(z < 255 ? z : 255);
        count[s[i]]++;
    }
    *entropy = 0;
    for (int k = 0; k < 256; k++)
        if (count[k]) *entropy -= count[k] / N * log2(count[k] / N);
    return s;
}

TEST(rans_round_trip_returns_the_symbols_within_a_percent_of_their_entropy)
{
    tq_ctx *ctx = tq_ctx_new();
    const double spreads[] = {0.05, 0.4, 2.0, 20.0};
    for (int k = 0; k < 4; k++) {
        double h;
        uint8_t *s = laplace_symbols(spreads[k], 7 + k, &h), *back = malloc(N);
        size_t cap = tq_rans_bound(N), len = 0, used = 0;
        uint8_t *buf = malloc(cap);
        CHECK_OK(ctx, tq_rans_encode(ctx, s, N, buf, cap, &len));
        CHECK_OK(ctx, tq_rans_decode(ctx, buf, len, back, N, &used));
        CHECK_EQ(used, len);
        CHECK(!memcmp(s, back, N), "spread %g: the symbols differ", spreads[k]);
        /* over the entropy: the model (at most 1 + 2 x 256 bytes), the length and the state */
        double bits = 8.0 * len / N, model = 8.0 * (1 + 2 * 256 + 8) / N;
        CHECK(bits < h * 1.01 + model, "spread %g: %.4f bits a symbol, entropy %.4f", spreads[k],
              bits, h);
        free(s);
        free(back);
        free(buf);
    }
    tq_ctx_free(ctx);
}

TEST(rans_codes_one_repeated_symbol_in_a_few_bytes)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *s = calloc(N, 1), *back = malloc(N);
    size_t cap = tq_rans_bound(N), len = 0, used = 0;
    uint8_t *buf = malloc(cap);
    CHECK_OK(ctx, tq_rans_encode(ctx, s, N, buf, cap, &len));
    CHECK(len <= 16, "%zu bytes", len);
    memset(back, 7, N);
    CHECK_OK(ctx, tq_rans_decode(ctx, buf, len, back, N, &used));
    CHECK(!memcmp(s, back, N), "not all zeros");
    free(s);
    free(back);
    free(buf);
    tq_ctx_free(ctx);
}

TEST(rans_refuses_damaged_streams)
{
    tq_ctx *ctx = tq_ctx_new();
    double h;
    uint8_t *s = laplace_symbols(2.0, 3, &h), *back = malloc(N);
    size_t cap = tq_rans_bound(N), len = 0, used = 0;
    uint8_t *buf = malloc(cap);
    CHECK_OK(ctx, tq_rans_encode(ctx, s, N, buf, cap, &len));
    /* a frequency changed: they no longer sum to 2^12 */
    buf[1] ^= 1;
    CHECK_STATUS(ctx, tq_rans_decode(ctx, buf, len, back, N, &used), TQ_ERR_CORRUPT);
    CHECK(strstr(tq_ctx_error(ctx), "sum to"), "%s", tq_ctx_error(ctx));
    buf[1] ^= 1;
    /* a coded byte changed, the stream cut short, or asked for more symbols than it holds */
    buf[len / 2] ^= 0x40;
    CHECK_STATUS(ctx, tq_rans_decode(ctx, buf, len, back, N, &used), TQ_ERR_CORRUPT);
    buf[len / 2] ^= 0x40;
    CHECK_STATUS(ctx, tq_rans_decode(ctx, buf, len - 1, back, N, &used), TQ_ERR_CORRUPT);
    uint8_t *more = malloc(N + 1);
    CHECK_STATUS(ctx, tq_rans_decode(ctx, buf, len, more, N + 1, &used), TQ_ERR_CORRUPT);
    CHECK_STATUS(ctx, tq_rans_decode(ctx, buf, 3, back, N, &used), TQ_ERR_CORRUPT);
    CHECK(strchr(tq_ctx_error(ctx), '\n') == NULL, "two lines: %s", tq_ctx_error(ctx));
    CHECK_OK(ctx, tq_rans_decode(ctx, buf, len, back, N, &used));
    free(more);
    free(s);
    free(back);
    free(buf);
    tq_ctx_free(ctx);
}

/* TQ_RANS_LANES streams of N symbols, sym[lanes][N], of spreads from one value to a byte's
 * range: their coded lengths far apart, so that lanes run out of bytes at different steps. */
static uint8_t *many_symbols(void)
{
    uint8_t *sym = malloc((size_t)TQ_RANS_LANES * N);
    for (int j = 0; j < TQ_RANS_LANES; j++) {
        double h;
        uint8_t *s = laplace_symbols(j == 5 ? 0.0 : 0.05 * pow(1.3, j), 11 + j, &h);
        memcpy(sym + (size_t)j * N, s, N);
        free(s);
    }
    return sym;
}

TEST(rans_many_codes_each_stream_as_one_alone)
{
    tq_ctx *ctx = tq_ctx_new();
    size_t cap = tq_rans_bound(N), alone_len, used;
    uint8_t *sym = many_symbols(), *back = malloc((size_t)TQ_RANS_LANES * N);
    uint8_t *out[TQ_RANS_LANES], *alone = malloc(cap);
    for (int j = 0; j < TQ_RANS_LANES; j++) out[j] = malloc(cap);
    for (size_t k = 1; k <= TQ_RANS_LANES; k++) { /* every lane count, each against one alone */
        size_t len[TQ_RANS_LANES];
        CHECK_OK(ctx, tq_rans_encode_many(ctx, k, sym, N, out, cap, len));
        const uint8_t *in[TQ_RANS_LANES];
        for (size_t j = 0; j < k; j++) {
            CHECK_OK(ctx, tq_rans_encode(ctx, sym + j * N, N, alone, cap, &alone_len));
            CHECK_EQ(len[j], alone_len);
            CHECK(!memcmp(out[j], alone, alone_len), "%zu lanes: lane %zu's bytes differ", k, j);
            in[j] = out[j];
            uint32_t max_sym = 0;
            CHECK_OK(ctx, tq_rans_stream_size(ctx, out[j], len[j], &used, &max_sym));
            CHECK_EQ(used, len[j]);
        }
        memset(back, 0, (size_t)TQ_RANS_LANES * N);
        CHECK_OK(ctx, tq_rans_decode_many(ctx, k, in, len, back, N));
        CHECK(!memcmp(back, sym, k * N), "%zu lanes: the symbols differ", k);
    }
    for (int j = 0; j < TQ_RANS_LANES; j++) free(out[j]);
    free(alone);
    free(sym);
    free(back);
    tq_ctx_free(ctx);
}

/* The streams of many_symbols, n symbols each, one after another in one buffer (as a
 * snapshot's chunk holds them), at in[lanes]. */
static void many_streams(tq_ctx *ctx, const uint8_t *sym, size_t n, const uint8_t **in,
                         size_t *len, uint8_t **packed_out)
{
    size_t cap = tq_rans_bound(n), pos = 0;
    uint8_t *packed = *packed_out = malloc((size_t)TQ_RANS_LANES * cap), *out[TQ_RANS_LANES];
    for (int j = 0; j < TQ_RANS_LANES; j++) out[j] = malloc(cap);
    uint8_t *sym_n = malloc((size_t)TQ_RANS_LANES * n); /* [lanes][n] */
    for (int j = 0; j < TQ_RANS_LANES; j++) memcpy(sym_n + (size_t)j * n, sym + (size_t)j * N, n);
    CHECK_OK(ctx, tq_rans_encode_many(ctx, TQ_RANS_LANES, sym_n, n, out, cap, len));
    for (int j = 0; j < TQ_RANS_LANES; j++) {
        memcpy(packed + pos, out[j], len[j]);
        in[j] = packed + pos;
        pos += len[j];
        free(out[j]);
    }
    free(sym_n);
}

TEST(rans_decode_many_gives_every_simd_level_the_same_symbols)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *sym = many_symbols(), *back = malloc((size_t)TQ_RANS_LANES * N);
    const size_t lengths[] = {N, 1434, 33, 4, 1};
    for (size_t t = 0; t < sizeof lengths / sizeof *lengths; t++) {
        size_t n = lengths[t], len[TQ_RANS_LANES];
        const uint8_t *in[TQ_RANS_LANES];
        uint8_t *packed;
        many_streams(ctx, sym, n, in, len, &packed);
        for (int lvl = TQ_SIMD_SCALAR; lvl <= TQ_SIMD_AVX512; lvl++) {
            if (tq_ctx_set_simd(ctx, (tq_simd)lvl)) continue; /* not on this CPU */
            memset(back, 0xee, (size_t)TQ_RANS_LANES * n);
            CHECK_OK(ctx, tq_rans_decode_many(ctx, TQ_RANS_LANES, in, len, back, n));
            for (int j = 0; j < TQ_RANS_LANES; j++)
                CHECK(!memcmp(back + (size_t)j * n, sym + (size_t)j * N, n),
                      "%s, %zu symbols: lane %d's differ", tq_simd_name((tq_simd)lvl), n, j);
        }
        free(packed);
    }
    free(sym);
    free(back);
    tq_ctx_free(ctx);
}

TEST(rans_decode_many_refuses_a_damaged_lane_at_every_simd_level)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *sym = many_symbols(), *back = malloc((size_t)TQ_RANS_LANES * N);
    size_t len[TQ_RANS_LANES];
    const uint8_t *in[TQ_RANS_LANES];
    uint8_t *packed;
    many_streams(ctx, sym, N, in, len, &packed);
    /* a coded byte in the middle of lane 17, far from its model and its state */
    size_t at = (size_t)(in[17] - packed) + len[17] / 2;
    packed[at] ^= 0x10;
    for (int lvl = TQ_SIMD_SCALAR; lvl <= TQ_SIMD_AVX512; lvl++) {
        if (tq_ctx_set_simd(ctx, (tq_simd)lvl)) continue;
        CHECK_STATUS(ctx, tq_rans_decode_many(ctx, TQ_RANS_LANES, in, len, back, N),
                     TQ_ERR_CORRUPT);
        CHECK(strchr(tq_ctx_error(ctx), '\n') == NULL, "two lines: %s", tq_ctx_error(ctx));
    }
    free(packed);
    free(sym);
    free(back);
    tq_ctx_free(ctx);
}

TEST(rans_stream_size_reads_the_length_and_largest_symbol_from_the_model)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t sym[300], buf[2048];
    for (int i = 0; i < 300; i++) sym[i] = (uint8_t)(i % 7 == 0 ? 200 : i % 3);
    size_t len = 0, size = 0;
    uint32_t max_sym = 0;
    CHECK_OK(ctx, tq_rans_encode(ctx, sym, 300, buf, sizeof buf, &len));
    CHECK_OK(ctx, tq_rans_stream_size(ctx, buf, len + 100, &size, &max_sym));
    CHECK_EQ(size, len);
    CHECK_EQ(max_sym, 200u);
    /* the model cut short, or a coded length past what is there */
    CHECK_STATUS(ctx, tq_rans_stream_size(ctx, buf, 50, &size, &max_sym), TQ_ERR_CORRUPT);
    CHECK_STATUS(ctx, tq_rans_stream_size(ctx, buf, len - 1, &size, &max_sym), TQ_ERR_CORRUPT);
    tq_ctx_free(ctx);
}

TEST(rans_decode_many_refuses_a_damaged_lane)
{
    tq_ctx *ctx = tq_ctx_new();
    double h;
    uint8_t *s = laplace_symbols(2.0, 5, &h), *sym = malloc(2 * N), *back = malloc(2 * N);
    memcpy(sym, s, N);
    memcpy(sym + N, s, N);
    size_t cap = tq_rans_bound(N), len[2];
    uint8_t *out[2] = {malloc(cap), malloc(cap)};
    CHECK_OK(ctx, tq_rans_encode_many(ctx, 2, sym, N, out, cap, len));
    out[1][len[1] / 2] ^= 0x10;
    const uint8_t *in[2] = {out[0], out[1]};
    CHECK_STATUS(ctx, tq_rans_decode_many(ctx, 2, in, len, back, N), TQ_ERR_CORRUPT);
    CHECK(strchr(tq_ctx_error(ctx), '\n') == NULL, "two lines: %s", tq_ctx_error(ctx));
    free(out[0]);
    free(out[1]);
    free(s);
    free(sym);
    free(back);
    tq_ctx_free(ctx);
}
