/* bitpack.c - index packing.  The generic layout is a little-endian bit
 * stream (index j at bit j*bits), which for 2 and 4 bits is exactly the
 * fork's turbo2/turbo4/TQ4_1S packing; turbo3 splits its 3-bit indices into
 * a 2-bit plane and a 1-bit plane. */
#include "tq_internal.h"

#include <string.h>

/* 16-byte vectors (SSE2 on x86-64, NEON on arm64) for the 2- and 4-bit
 * layouts: shuffles interleave the bit fields.  GCC's __builtin_shuffle has no
 * clang equivalent with vector masks; clang builds (the fuzzers) take the
 * scalar loops, which are the same function. */
#if defined(__GNUC__) && !defined(__clang__)
#define TQ_VECTOR_PACK 1
typedef uint8_t u8x16 __attribute__((vector_size(16)));
#else
#define TQ_VECTOR_PACK 0
#endif

static void unpack4(const uint8_t *in, size_t n, uint8_t *idx)
{
    size_t i = 0;
#if TQ_VECTOR_PACK
    for (; i + 32 <= n; i += 32) {
        u8x16 x, lo, hi;
        memcpy(&x, in + i / 2, 16);
        lo = x & 15;
        hi = x >> 4;
        u8x16 a = __builtin_shuffle(
            lo, hi, (u8x16){0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23});
        u8x16 b = __builtin_shuffle(
            lo, hi, (u8x16){8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31});
        memcpy(idx + i, &a, 16);
        memcpy(idx + i + 16, &b, 16);
    }
#endif
    for (; i < n; i += 2) {
        idx[i] = in[i / 2] & 15;
        idx[i + 1] = in[i / 2] >> 4;
    }
}

static void unpack2(const uint8_t *in, size_t n, uint8_t *idx)
{
    size_t i = 0;
#if TQ_VECTOR_PACK
    for (; i + 64 <= n; i += 64) {
        u8x16 x;
        memcpy(&x, in + i / 4, 16);
        u8x16 p0 = x & 3, p1 = (x >> 2) & 3, p2 = (x >> 4) & 3, p3 = x >> 6;
        u8x16 lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
        u8x16 hi = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
        u8x16 a0 = __builtin_shuffle(p0, p1, lo), a1 = __builtin_shuffle(p0, p1, hi);
        u8x16 b0 = __builtin_shuffle(p2, p3, lo), b1 = __builtin_shuffle(p2, p3, hi);
        u8x16 w0 = {0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23};
        u8x16 w1 = {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31};
        u8x16 o[4] = {__builtin_shuffle(a0, b0, w0), __builtin_shuffle(a0, b0, w1),
                      __builtin_shuffle(a1, b1, w0), __builtin_shuffle(a1, b1, w1)};
        memcpy(idx + i, o, 64);
    }
#endif
    for (; i < n; i++) idx[i] = (in[i / 4] >> (2 * (i % 4))) & 3;
}

static void pack4(const uint8_t *idx, size_t n, uint8_t *out)
{
    size_t i = 0;
#if TQ_VECTOR_PACK
    for (; i + 32 <= n; i += 32) {
        u8x16 a, b;
        memcpy(&a, idx + i, 16);
        memcpy(&b, idx + i + 16, 16);
        u8x16 ev = __builtin_shuffle(
            a, b, (u8x16){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});
        u8x16 od = __builtin_shuffle(
            a, b, (u8x16){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31});
        u8x16 o = (ev & 15) | (u8x16)(od << 4);
        memcpy(out + i / 2, &o, 16);
    }
#endif
    for (; i < n; i += 2) out[i / 2] = (uint8_t)((idx[i] & 15) | (idx[i + 1] << 4));
}

/* Any width: 8 indices make exactly `bits` bytes (bits a constant at each
 * call, so the shifts unroll). */
static inline __attribute__((always_inline)) void pack8(const uint8_t *idx, size_t n, uint8_t *out,
                                                        const uint32_t bits)
{
    const uint64_t mask = (1u << bits) - 1;
    for (size_t j = 0; j < n; j += 8, out += bits) {
        uint64_t v = 0;
        for (int k = 0; k < 8; k++) v |= (idx[j + k] & mask) << (k * bits);
        for (uint32_t q = 0; q < bits; q++) out[q] = (uint8_t)(v >> (8 * q));
    }
}

static inline __attribute__((always_inline)) void unpack8(const uint8_t *in, size_t n, uint8_t *idx,
                                                          const uint32_t bits)
{
    const uint64_t mask = (1u << bits) - 1;
    for (size_t j = 0; j < n; j += 8, in += bits) {
        uint64_t v = 0;
        for (uint32_t q = 0; q < bits; q++) v |= (uint64_t)in[q] << (8 * q);
        for (int k = 0; k < 8; k++) idx[j + k] = (uint8_t)((v >> (k * bits)) & mask);
    }
}

/* pack8 and unpack8 made for each width they serve, so that the compiler unrolls the loops
 * over the bits */
#define AT_WIDTH(b)                                                                                \
    static void pack8_##b(const uint8_t *idx, size_t n, uint8_t *out) { pack8(idx, n, out, b); }   \
    static void unpack8_##b(const uint8_t *in, size_t n, uint8_t *idx) { unpack8(in, n, idx, b); }
AT_WIDTH(1)
AT_WIDTH(3)
AT_WIDTH(5)
AT_WIDTH(6)
AT_WIDTH(7)
#undef AT_WIDTH
static void pack8_2(const uint8_t *idx, size_t n, uint8_t *out) { pack8(idx, n, out, 2); }
static void copy_bytes(const uint8_t *from, size_t n, uint8_t *to) { memcpy(to, from, n); }

/* Each width's routine, by bits: 8 indices a step at 1, 2 (packing), 3, 5, 6 and 7 bits, where
 * n is a multiple of 8; the shuffles at 4 and 2 (unpacking) and a copy at 8, for any n. */
typedef void (*pack_fn)(const uint8_t *from, size_t n, uint8_t *to);
static const pack_fn pack_at[9] = {NULL,  pack8_1, pack8_2, pack8_3,   pack4,
                                   pack8_5, pack8_6, pack8_7, copy_bytes};
static const pack_fn unpack_at[9] = {NULL,      unpack8_1, unpack2,   unpack8_3, unpack4,
                                     unpack8_5, unpack8_6, unpack8_7, copy_bytes};
enum { PACK_ANY_N = 1 << 4 | 1 << 8, UNPACK_ANY_N = 1 << 2 | 1 << 4 | 1 << 8 };

/* The routine for n fields of `bits` bits, or NULL: the bit stream's loop does it. */
static pack_fn routine(const pack_fn *at, unsigned any_n, uint32_t bits, size_t n)
{
    if (bits > 8 || (n % 8 && !(any_n >> bits & 1))) return NULL;
    return at[bits];
}

size_t tq_packed_bytes(size_t n, uint32_t bits) { return (n * bits + 7) / 8; }

void tq_pack_bits(const uint8_t *idx, size_t n, uint32_t bits, uint8_t *out)
{
    size_t nbytes = tq_packed_bytes(n, bits);
    pack_fn whole = routine(pack_at, PACK_ANY_N, bits, n);
    if (whole) {
        whole(idx, n, out);
        return;
    }
    uint32_t mask = (1u << bits) - 1;
    memset(out, 0, nbytes);
    size_t bitpos = 0;
    for (size_t j = 0; j < n; j++, bitpos += bits) {
        uint32_t v = (uint32_t)(idx[j] & mask) << (bitpos % 8);
        size_t b = bitpos / 8;
        out[b] |= (uint8_t)v;
        if (v >> 8) out[b + 1] |= (uint8_t)(v >> 8);
    }
}

void tq_unpack_bits(const uint8_t *in, size_t n, uint32_t bits, uint8_t *idx)
{
    pack_fn whole = routine(unpack_at, UNPACK_ANY_N, bits, n);
    if (whole) {
        whole(in, n, idx);
        return;
    }
    uint32_t mask = (1u << bits) - 1;
    size_t bitpos = 0, nbytes = tq_packed_bytes(n, bits);
    for (size_t j = 0; j < n; j++, bitpos += bits) {
        size_t b = bitpos / 8;
        uint32_t v = in[b];
        if (b + 1 < nbytes) v |= (uint32_t)in[b + 1] << 8;
        idx[j] = (uint8_t)((v >> (bitpos % 8)) & mask);
    }
}

void tq_pack_turbo3(const uint8_t *idx, size_t n, uint8_t *lo, uint8_t *hi)
{
    memset(lo, 0, n / 4);
    memset(hi, 0, n / 8);
    for (size_t j = 0; j < n; j++) {
        lo[j / 4] |= (uint8_t)((idx[j] & 3) << (2 * (j % 4)));
        hi[j / 8] |= (uint8_t)(((idx[j] >> 2) & 1) << (j % 8));
    }
}

void tq_unpack_turbo3(const uint8_t *lo, const uint8_t *hi, size_t n, uint8_t *idx)
{
    unpack2(lo, n, idx);
    size_t j = 0;
#if TQ_VECTOR_PACK
    for (; j + 16 <= n; j += 16) { /* spread two bytes of the bit plane over 16 indices */
        u8x16 h = {0}, v;
        h[0] = hi[j / 8];
        h[1] = hi[j / 8 + 1];
        h = __builtin_shuffle(h, (u8x16){0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1});
        u8x16 bit = (h & (u8x16){1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128}) != 0;
        memcpy(&v, idx + j, 16);
        v |= bit & 4;
        memcpy(idx + j, &v, 16);
    }
#endif
    for (; j < n; j++) idx[j] |= (uint8_t)(((hi[j / 8] >> (j % 8)) & 1) << 2);
}
