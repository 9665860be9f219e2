/* rans.c - entropy coding of byte symbols with one static model per stream (tq.h, "entropy
 * coding"): range asymmetric numeral systems (rANS, Duda 2013) with a 32-bit state and byte-wise
 * renormalization.  Snapshots use it for a transform-coded component's indices, whose spread is
 * its own: zstd's Huffman stage codes a symbol in one bit at least and shares a table between
 * components, which cost the transform coder a quarter of a bit a value at 3 bits
 * (tests/bench/results/kv_vs_zstd.md).
 *
 * A stream: u8 the largest symbol s_max; s_max + 1 frequencies summing to 2^RANS_BITS, each
 * one byte below 128 and else two (low 7 bits with the top bit set, then the rest); u32 the
 * length L of the coded bytes; L bytes.  The encoder codes the symbols in
 * reverse and writes its bytes backwards, so the decoder reads forward; the decoder's state
 * starts from the first 4 coded bytes and must end at RANS_LOW with every byte read.
 *
 * One stream is a serial chain: each step waits on the one before.  The _many calls code up to
 * TQ_RANS_LANES streams, RANS_GROUP in lockstep, one step of each in turn, so that the chains
 * overlap; the bytes are those of coding each alone.  With AVX-512 the decoder runs
 * RANS_VEC_LANES streams a vector lane each (rans_avx512.c): the same symbols, 1.4x as fast on
 * this project's machine, where gathers bound it (tests/bench/results/kv_long_speed.md). */
#include "rans_impl.h"
#include "tq_internal.h"

#include <stdlib.h>
#include <string.h>

/* The four-lane loops also built for x86-64-v3 (TQ_CLONES_V3): its leading-zero count, shifts
 * by a register and flag-free multiplies spare each step a few operations
 * (tests/bench/results/kv_long_speed.md) */
#define TQ_RANS_CLONES TQ_CLONES_V3

/* The lanes a scalar loop runs in lockstep: their states, pointers and tables stay in
 * registers and L1; the _many calls run their streams in groups of these. */
#define RANS_GROUP 4

size_t tq_rans_bound(size_t n) { return 1 + 2 * 256 + 4 + 4 + n + n / 64 + 8; }

/* The counts scaled to RANS_TOTAL, every symbol that occurs at least 1; integers only, so
 * that any machine makes the same model from the same counts. */
static void normalize(const uint64_t *count, uint32_t n_sym, uint64_t n, uint32_t *freq)
{
    uint64_t sum = 0;
    uint32_t top = 0;
    for (uint32_t s = 0; s < n_sym; s++) {
        freq[s] = count[s] ? (uint32_t)((count[s] * RANS_TOTAL + n / 2) / n) : 0;
        if (count[s] && !freq[s]) freq[s] = 1;
        sum += freq[s];
        if (freq[s] > freq[top]) top = s;
    }
    /* the rounding's excess or lack is taken from or given to the symbols in turn, largest
       first, never below 1 */
    while (sum != RANS_TOTAL) {
        if (sum < RANS_TOTAL) {
            freq[top] += (uint32_t)(RANS_TOTAL - sum);
            break;
        }
        uint32_t best = n_sym;
        for (uint32_t s = 0; s < n_sym; s++)
            if (freq[s] > 1 && (best == n_sym || freq[s] > freq[best])) best = s;
        uint64_t take = sum - RANS_TOTAL;
        if (take > freq[best] - 1) take = freq[best] - 1;
        freq[best] -= (uint32_t)take;
        sum -= take;
    }
}

/* What coding a symbol changes in the encoder's state: x / freq by a multiply and a shift,
 * exact for every state below 2^31 (a reciprocal rounded up, m = ceil(2^(31 + l) / freq) with
 * 2^(l - 1) < freq <= 2^l: the error m * freq - 2^(31 + l) stays below 2^l), where a division
 * held up each step. */
typedef struct rans_enc_sym {
    uint32_t rcp;   /* m */
    uint32_t shift; /* 31 + l */
    uint32_t x_max; /* states from here emit a byte first */
    uint32_t rest;  /* 2^RANS_BITS - freq: x / f * 2^12 + x % f = x + (x / f) * rest */
    uint32_t cum;
} rans_enc_sym;

static void enc_sym_init(uint32_t freq, uint32_t cum, rans_enc_sym *e)
{
    uint32_t l = 0;
    while ((1u << l) < freq) l++;
    e->shift = 31 + l;
    e->rcp = (uint32_t)(((1ull << e->shift) + freq - 1) / freq);
    e->x_max = ((RANS_LOW >> RANS_BITS) << 8) * freq;
    e->rest = RANS_TOTAL - freq;
    e->cum = cum;
}

/* One lane of the encoder: its model, its output and where its bytes have reached. */
typedef struct rans_enc_lane {
    rans_enc_sym es[256]; /* [n_sym] */
    uint8_t *out, *end, *p, *floor;
    size_t pos; /* the model's length */
    uint32_t x;
} rans_enc_lane;

/* The model of sym[n] into lane->out and lane->es; the coded bytes start from the end. */
static void enc_lane_init(const uint8_t *sym, size_t n, uint8_t *out, size_t cap,
                          rans_enc_lane *lane)
{
    uint64_t count[256] = {0};
    uint32_t freq[256] = {0}, cum[257] = {0}, n_sym = 1;
    uint32_t part[4][256] = {{0}}; /* four counts apart: a run of one symbol no longer waits
                                      on its own counter's last store */
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        part[0][sym[i]]++;
        part[1][sym[i + 1]]++;
        part[2][sym[i + 2]]++;
        part[3][sym[i + 3]]++;
    }
    for (; i < n; i++) part[0][sym[i]]++;
    for (uint32_t s = 0; s < 256; s++) {
        count[s] = (uint64_t)part[0][s] + part[1][s] + part[2][s] + part[3][s];
        if (count[s]) n_sym = s + 1;
    }
    if (n) normalize(count, n_sym, n, freq);
    else freq[0] = RANS_TOTAL; /* no symbols: a model all the same */
    for (uint32_t s = 0; s < n_sym; s++) cum[s + 1] = cum[s] + freq[s];
    for (uint32_t s = 0; s < n_sym; s++)
        if (freq[s]) enc_sym_init(freq[s], cum[s], &lane->es[s]); /* the others never occur */
    size_t pos = 0;
    out[pos++] = (uint8_t)(n_sym - 1);
    for (uint32_t s = 0; s < n_sym; s++) {
        if (freq[s] < 128) {
            out[pos++] = (uint8_t)freq[s];
            continue;
        }
        out[pos++] = (uint8_t)(freq[s] | 128);
        out[pos++] = (uint8_t)(freq[s] >> 7);
    }
    lane->out = out;
    lane->end = out + cap;
    lane->p = lane->end;
    lane->floor = out + pos + 8; /* room for the length and the state */
    lane->pos = pos;
    lane->x = RANS_LOW;
}

/* One symbol into state x, its bytes before p, with the symbol's entry e: at most two bytes out
 * (the state is below 2^31 and x_max at least 2^19), both written whether kept or not and their
 * count from two compares side by side, so that no branch or second compare waits on the
 * state. */
#define ENC_STEP(e, x, p)                                                                   \
    do {                                                                                    \
        uint32_t n_ = ((x) >= (e)->x_max) + ((uint64_t)(x) >= (uint64_t)(e)->x_max << 8);   \
        (p)[-1] = (uint8_t)(x);                                                             \
        (p)[-2] = (uint8_t)((x) >> 8);                                                      \
        (p) -= n_;                                                                          \
        (x) = (uint32_t)((uint64_t)(x) >> (n_ * 8));                                        \
        (x) += (uint32_t)(((uint64_t)(x) * (e)->rcp) >> (e)->shift) * (e)->rest + (e)->cum; \
    } while (0)

static inline void enc_put(rans_enc_lane *lane, uint8_t sym)
{
    ENC_STEP(&lane->es[sym], lane->x, lane->p);
}

/* RANS_GROUP lanes in lockstep from the last symbol while each has room for a step, the
 * states in registers (as dec_all); returns the symbols left.  A step writes two bytes at
 * most, so the lanes run a batch of as many steps as the fullest has byte pairs of room
 * before they look again. */
TQ_RANS_CLONES static size_t enc_all(rans_enc_lane *lane, const uint8_t *sym, size_t n)
{
    const rans_enc_sym *t[RANS_GROUP];
    const uint8_t *s[RANS_GROUP];
    uint8_t *p[RANS_GROUP];
    uint32_t x[RANS_GROUP];
    for (int j = 0; j < RANS_GROUP; j++) {
        t[j] = lane[j].es;
        s[j] = sym + (size_t)j * n;
        p[j] = lane[j].p;
        x[j] = lane[j].x;
    }
    size_t i = n;
    for (;;) {
        size_t batch = i;
        for (int j = 0; j < RANS_GROUP; j++) {
            size_t room = p[j] >= lane[j].floor ? (size_t)(p[j] - lane[j].floor) / 2 + 1 : 0;
            batch = room < batch ? room : batch;
        }
        if (!batch) break;
        for (size_t end = i - batch; i > end; i--) {
#pragma GCC unroll 16
            for (int j = 0; j < RANS_GROUP; j++) ENC_STEP(&t[j][s[j][i - 1]], x[j], p[j]);
        }
    }
    for (int j = 0; j < RANS_GROUP; j++) {
        lane[j].p = p[j];
        lane[j].x = x[j];
    }
    return i;
}

/* The state and the length after the model, the coded bytes moved up behind them. */
static size_t enc_lane_finish(rans_enc_lane *lane)
{
    uint8_t *p = lane->p;
    uint32_t x = lane->x;
    for (int b = 0; b < 4; b++) { /* the state, most significant byte first */
        *--p = (uint8_t)x;
        x >>= 8;
    }
    uint32_t coded = (uint32_t)(lane->end - p);
    memcpy(lane->out + lane->pos, &coded, 4);
    memmove(lane->out + lane->pos + 4, p, coded);
    return lane->pos + 4 + coded;
}

tq_status tq_rans_encode_many(tq_ctx *ctx, size_t k, const uint8_t *sym, size_t n,
                              uint8_t *const *out, size_t cap, size_t *len)
{
    TQ_NEED_CTX(ctx);
    if (!k || k > TQ_RANS_LANES)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%zu rANS streams at once (1..%d)", k,
                                TQ_RANS_LANES);
    if (cap < tq_rans_bound(n)) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "rANS output too small");
    rans_enc_lane *lane = malloc(k * sizeof *lane); /* [k] */
    if (!lane) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < k; j++) enc_lane_init(sym + j * n, n, out[j], cap, &lane[j]);
    tq_status st = TQ_OK;
    for (size_t g = 0; g < k; g += RANS_GROUP) {
        size_t in_group = k - g < RANS_GROUP ? k - g : RANS_GROUP, i = n;
        if (in_group == RANS_GROUP) i = enc_all(lane + g, sym + g * n, n);
        while (!st && i-- > 0) {
            for (size_t j = g; !st && j < g + in_group; j++) {
                if (lane[j].p < lane[j].floor) st = TQ_ERR_ARG; /* the bound did not hold */
                else enc_put(&lane[j], sym[j * n + i]);
            }
        }
    }
    for (size_t j = 0; !st && j < k; j++) {
        if (lane[j].p < lane[j].floor) st = TQ_ERR_ARG;
        else len[j] = enc_lane_finish(&lane[j]);
    }
    free(lane);
    return st ? tq_ctx_set_error(ctx, st, "rANS output too small") : TQ_OK;
}

tq_status tq_rans_encode(tq_ctx *ctx, const uint8_t *sym, size_t n, uint8_t *out, size_t cap,
                         size_t *len)
{
    return tq_rans_encode_many(ctx, 1, sym, n, &out, cap, len);
}

/* A stream's model (freq, cum), its length before the coded bytes (*pos) and theirs. */
static tq_status read_model(tq_ctx *ctx, const uint8_t *in, size_t len, uint32_t *freq,
                            uint32_t *cum, uint32_t *n_sym, size_t *pos, uint32_t *coded)
{
    if (len < 1) return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: no model");
    *n_sym = (uint32_t)in[0] + 1;
    size_t at = 1;
    cum[0] = 0;
    for (uint32_t s = 0; s < *n_sym; s++) {
        if (at + 2 > len)
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                    "entropy-coded stream: model past its end");
        freq[s] = in[at] & 127;
        if (in[at++] & 128) freq[s] |= (uint32_t)in[at++] << 7;
        cum[s + 1] = cum[s] + freq[s];
    }
    if (at + 4 > len)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: model past its end");
    if (cum[*n_sym] != RANS_TOTAL)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                "entropy-coded stream: frequencies sum to %u, not %u", cum[*n_sym],
                                RANS_TOTAL);
    memcpy(coded, in + at, 4);
    at += 4;
    if (*coded < 4 || *coded > len - at)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: %u coded bytes in %zu",
                       *coded, len - at);
    *pos = at;
    return TQ_OK;
}

tq_status tq_rans_stream_size(tq_ctx *ctx, const uint8_t *in, size_t len, size_t *size,
                              uint32_t *max_sym)
{
    TQ_NEED_CTX(ctx);
    uint32_t freq[256], cum[257], n_sym, coded;
    size_t pos;
    tq_status st = read_model(ctx, in, len, freq, cum, &n_sym, &pos, &coded);
    if (st) return st;
    *size = pos + coded;
    *max_sym = n_sym - 1;
    return TQ_OK;
}

static tq_status dec_lane_init(tq_ctx *ctx, const uint8_t *in, size_t len, rans_dec_lane *lane)
{
    uint32_t freq[256], cum[257], n_sym, coded;
    size_t pos;
    tq_status st = read_model(ctx, in, len, freq, cum, &n_sym, &pos, &coded);
    if (st) return st;
    if (pos + coded != len)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                "entropy-coded stream: %zu bytes given, %zu used", len,
                                pos + coded);
    for (uint32_t s = 0; s < n_sym; s++) {
        memset(lane->slot + cum[s], (int)s, freq[s]);
        lane->freq[s] = freq[s];
        lane->cum[s] = cum[s];
        lane->fc[s] = freq[s] | cum[s] << 13;
    }
    const uint8_t *p = in + pos;
    lane->x = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    lane->p = p + 4;
    lane->end = p + coded;
    /* an encoder's state stays in [RANS_LOW, RANS_LOW << 8): from there a step leaves at least
       2^11, and two bytes bring it back */
    if (lane->x < RANS_LOW || lane->x >= RANS_LOW << 8)
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: a state out of range");
    return TQ_OK;
}

/* The two bytes at p, the first the high one: one read. */
static inline uint32_t load_be16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}

/* One symbol out of lane ln (state x, bytes p, two of them left at least) into out: no branch
 * on the state.  The bytes a step takes (0, 1 or 2: from 2^11 at least, two bring the state
 * back over RANS_LOW; its leading zeros less one, over 8) come from one two-byte read at p,
 * which waits only on p and not on the state: the state's chain is a multiply, a count and
 * two shifts (a byte at a time, each read waited on the compare before it, and decoding took
 * a third longer). */
#define DEC_STEP(ln, x, p, out)                                                             \
    do {                                                                                    \
        uint32_t r_ = (x) & (RANS_TOTAL - 1), e_ = (ln)->slot[r_];                          \
        uint32_t w_ = load_be16(p);                                                         \
        (x) = (ln)->freq[e_] * ((x) >> RANS_BITS) + r_ - (ln)->cum[e_];                     \
        uint32_t b_ = ((uint32_t)__builtin_clz(x) - 1) & 24; /* 8 x the bytes it takes */   \
        (x) = (uint32_t)((uint64_t)(x) << b_) | (uint32_t)(w_ >> (16 - b_));                \
        (p) += b_ >> 3;                                                                     \
        (out) = (uint8_t)e_;                                                                \
    } while (0)

static inline uint8_t dec_get(rans_dec_lane *lane)
{
    uint8_t out;
    DEC_STEP(lane, lane->x, lane->p, out);
    return out;
}

/* The same near the end of the coded bytes. */
static uint8_t dec_get_last(rans_dec_lane *lane)
{
    uint32_t x = lane->x;
    uint32_t r = x & (RANS_TOTAL - 1), e = lane->slot[r];
    x = lane->freq[e] * (x >> RANS_BITS) + r - lane->cum[e];
    while (x < RANS_LOW && lane->p < lane->end) x = x << 8 | *lane->p++;
    lane->x = x;
    return (uint8_t)e;
}

/* RANS_GROUP lanes in lockstep from symbol i0 while each has two coded bytes left, their
 * states in registers (a byte store may alias anything: through the lanes' structs every step
 * went to memory); returns the symbol reached.  A step takes two bytes at most, so the lanes
 * run a batch of as many steps as the shortest has byte pairs left before they look again (a
 * look at every step was a fifth of the work). */
TQ_RANS_CLONES static size_t dec_all(rans_dec_lane *lane, uint8_t *sym, size_t n, size_t i0)
{
    const rans_dec_lane *t[RANS_GROUP];
    const uint8_t *p[RANS_GROUP], *e[RANS_GROUP];
    uint8_t *s[RANS_GROUP];
    uint32_t x[RANS_GROUP];
    for (int j = 0; j < RANS_GROUP; j++) {
        t[j] = &lane[j];
        p[j] = lane[j].p;
        e[j] = lane[j].end - 2;
        x[j] = lane[j].x;
        s[j] = sym + (size_t)j * n;
    }
    size_t i = i0;
    for (;;) {
        size_t batch = n - i;
        for (int j = 0; j < RANS_GROUP; j++) {
            size_t safe = p[j] <= e[j] ? (size_t)(e[j] - p[j]) / 2 + 1 : 0;
            batch = safe < batch ? safe : batch;
        }
        if (!batch) break;
        for (size_t end = i + batch; i < end; i++) {
#pragma GCC unroll 16
            for (int j = 0; j < RANS_GROUP; j++) DEC_STEP(t[j], x[j], p[j], s[j][i]);
        }
    }
    for (int j = 0; j < RANS_GROUP; j++) {
        lane[j].p = p[j];
        lane[j].x = x[j];
    }
    return i;
}

/* Whether every lane has two coded bytes left. */
static int lanes_ready(const rans_dec_lane *lane, size_t k)
{
    int ready = 1;
    for (size_t j = 0; j < k; j++) ready &= lane[j].end - lane[j].p >= 2;
    return ready;
}

tq_status tq_rans_decode_many(tq_ctx *ctx, size_t k, const uint8_t *const *in, const size_t *len,
                              uint8_t *sym, size_t n)
{
    TQ_NEED_CTX(ctx);
    if (!k || k > TQ_RANS_LANES)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%zu rANS streams at once (1..%d)", k,
                                TQ_RANS_LANES);
    rans_dec_lane *lane = malloc(k * sizeof *lane); /* [k] */
    if (!lane) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (size_t j = 0; !st && j < k; j++) st = dec_lane_init(ctx, in[j], len[j], &lane[j]);
    size_t i = 0; /* where every lane has reached */
    if (!st && k == RANS_VEC_LANES && ctx->simd == TQ_SIMD_AVX512)
        i = tq_rans_dec_avx512(lane, sym, n, 0);
    for (size_t g = 0; !st && g < k; g += RANS_GROUP) {
        size_t in_group = k - g < RANS_GROUP ? k - g : RANS_GROUP, r = i;
        if (in_group == RANS_GROUP) r = dec_all(lane + g, sym + g * n, n, i);
        for (; r < n && lanes_ready(lane + g, in_group); r++)
            for (size_t j = g; j < g + in_group; j++) sym[j * n + r] = dec_get(&lane[j]);
        for (size_t j = g; !st && j < g + in_group; j++) {
            for (size_t q = r; q < n; q++) sym[j * n + q] = dec_get_last(&lane[j]);
            if (lane[j].x != RANS_LOW || lane[j].p != lane[j].end)
                st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                      "entropy-coded stream: does not end where it should");
        }
    }
    free(lane);
    return st;
}

tq_status tq_rans_decode(tq_ctx *ctx, const uint8_t *in, size_t len, uint8_t *sym, size_t n,
                         size_t *used)
{
    uint32_t max_sym;
    tq_status st = tq_rans_stream_size(ctx, in, len, used, &max_sym);
    if (!st) st = tq_rans_decode_many(ctx, 1, &in, used, sym, n);
    return st;
}
