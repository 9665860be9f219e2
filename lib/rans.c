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
 * starts from the first 4 coded bytes and must end at RANS_LOW with every byte read. */
#include "tq_internal.h"

#include <stdlib.h>
#include <string.h>

#define RANS_BITS 12                  /* frequencies in units of 2^-12 */
#define RANS_TOTAL (1u << RANS_BITS)
#define RANS_LOW (1u << 23)           /* the state stays in [RANS_LOW, RANS_LOW << 8) */

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

tq_status tq_rans_encode(tq_ctx *ctx, const uint8_t *sym, size_t n, uint8_t *out, size_t cap,
                         size_t *len)
{
    TQ_NEED_CTX(ctx);
    if (cap < tq_rans_bound(n)) return tq_fail(ctx, TQ_ERR_ARG, "rANS output too small");
    uint64_t count[256] = {0};
    uint32_t freq[256] = {0}, cum[257] = {0}, n_sym = 1;
    for (size_t i = 0; i < n; i++) count[sym[i]]++;
    for (uint32_t s = 0; s < 256; s++)
        if (count[s]) n_sym = s + 1;
    if (n) normalize(count, n_sym, n, freq);
    else freq[0] = RANS_TOTAL; /* no symbols: a model all the same */
    for (uint32_t s = 0; s < n_sym; s++) cum[s + 1] = cum[s] + freq[s];
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
    /* the coded bytes, backwards from the end of the room */
    uint8_t *end = out + cap, *p = end;
    uint32_t x = RANS_LOW;
    for (size_t i = n; i-- > 0;) {
        uint32_t f = freq[sym[i]];
        uint32_t x_max = ((RANS_LOW >> RANS_BITS) << 8) * f;
        while (x >= x_max) {
            *--p = (uint8_t)x;
            x >>= 8;
        }
        x = ((x / f) << RANS_BITS) + (x % f) + cum[sym[i]];
    }
    for (int b = 0; b < 4; b++) { /* the state, most significant byte first */
        *--p = (uint8_t)x;
        x >>= 8;
    }
    uint32_t coded = (uint32_t)(end - p);
    if (out + pos + 4 > p) return tq_fail(ctx, TQ_ERR_ARG, "rANS output too small");
    memcpy(out + pos, &coded, 4);
    pos += 4;
    memmove(out + pos, p, coded);
    *len = pos + coded;
    return TQ_OK;
}

tq_status tq_rans_decode(tq_ctx *ctx, const uint8_t *in, size_t len, uint8_t *sym, size_t n,
                         size_t *used)
{
    TQ_NEED_CTX(ctx);
    if (len < 1) return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: no model");
    uint32_t n_sym = (uint32_t)in[0] + 1, freq[256], cum[257] = {0};
    size_t pos = 1;
    for (uint32_t s = 0; s < n_sym; s++) {
        if (pos + 2 > len)
            return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: model past its end");
        freq[s] = in[pos] & 127;
        if (in[pos++] & 128) freq[s] |= (uint32_t)in[pos++] << 7;
        cum[s + 1] = cum[s] + freq[s];
    }
    if (pos + 4 > len)
        return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: model past its end");
    if (cum[n_sym] != RANS_TOTAL)
        return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: frequencies sum to %u, not %u",
                       cum[n_sym], RANS_TOTAL);
    uint32_t coded;
    memcpy(&coded, in + pos, 4);
    pos += 4;
    if (coded < 4 || coded > len - pos)
        return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: %u coded bytes in %zu", coded,
                       len - pos);
    uint8_t slot[RANS_TOTAL]; /* [2^RANS_BITS]: the symbol each slot of the state decodes to */
    for (uint32_t s = 0; s < n_sym; s++) memset(slot + cum[s], (int)s, freq[s]);
    const uint8_t *p = in + pos, *end = p + coded;
    uint32_t x = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    p += 4;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = x & (RANS_TOTAL - 1), s = slot[r];
        x = freq[s] * (x >> RANS_BITS) + r - cum[s];
        while (x < RANS_LOW && p < end) x = x << 8 | *p++;
        sym[i] = (uint8_t)s;
    }
    if (x != RANS_LOW || p != end)
        return tq_fail(ctx, TQ_ERR_CORRUPT, "entropy-coded stream: does not end where it should");
    *used = pos + coded;
    return TQ_OK;
}
