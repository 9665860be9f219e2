/* block_planes.c - the tq block stream as planes (tq.h, lib/TQ_BLOCK.md). */
#include "tq_internal.h"

#include <string.h>

enum { MAX_G = 1024 };

void tq_blocks_to_planes(uint32_t g, uint32_t b, const uint8_t *blocks, size_t n_blocks,
                         uint8_t *planes)
{
    uint8_t idx[MAX_G], sign[MAX_G];
    size_t bb = 2 + (size_t)g * b / 8;
    uint8_t *norms = planes, *signs = planes + 2 * n_blocks, *mags = signs + n_blocks * g / 8;
    uint8_t half = (uint8_t)(1u << (b - 1));
    for (size_t k = 0; k < n_blocks; k++) {
        const uint8_t *blk = blocks + k * bb;
        memcpy(norms + 2 * k, blk, 2);
        tq_unpack_bits(blk + 2, g, b, idx);
        for (uint32_t j = 0; j < g; j++) {
            sign[j] = idx[j] >= half;
            idx[j] = sign[j] ? idx[j] - half : half - 1 - idx[j];
        }
        tq_pack_bits(sign, g, 1, signs + k * g / 8);
        tq_pack_bits(idx, g, b - 1, mags + k * g * (b - 1) / 8);
    }
}

/* One block's indices from its planes, 8 at a time: the sign byte, b - 1 bytes of magnitudes,
 * b bytes of indices (the little-endian bit streams of tq_pack_bits), without the byte arrays
 * between (b a constant at each call, so the shifts unroll): decode spent 14% of its time in
 * unpacking and packing them. */
static inline __attribute__((always_inline)) void planes_to_block8(uint32_t g, const uint32_t b,
                                                                   const uint8_t *signs,
                                                                   const uint8_t *mags,
                                                                   uint8_t *out)
{
    const uint64_t half = 1u << (b - 1), mmask = half - 1;
    for (uint32_t j = 0; j < g; j += 8, mags += b - 1, out += b) {
        uint64_t m = 0;
        uint64_t v = 0;
        uint32_t s = signs[j / 8];
        for (uint32_t q = 0; q + 1 < b; q++) m |= (uint64_t)mags[q] << (8 * q);
        for (uint32_t k = 0; k < 8; k++) {
            uint64_t mk = (m >> (k * (b - 1))) & mmask;
            uint64_t id = (s >> k) & 1 ? mk + half : half - 1 - mk;
            v |= id << (k * b);
        }
        for (uint32_t q = 0; q < b; q++) out[q] = (uint8_t)(v >> (8 * q));
    }
}

void tq_planes_to_blocks(uint32_t g, uint32_t b, const uint8_t *planes, size_t n_blocks,
                         uint8_t *blocks)
{
    uint8_t idx[MAX_G], sign[MAX_G];
    size_t bb = 2 + (size_t)g * b / 8;
    const uint8_t *norms = planes, *signs = planes + 2 * n_blocks, *mags = signs + n_blocks * g / 8;
    uint8_t half = (uint8_t)(1u << (b - 1));
    for (size_t k = 0; k < n_blocks; k++) {
        uint8_t *blk = blocks + k * bb;
        const uint8_t *sk = signs + k * g / 8, *mk = mags + k * g * (b - 1) / 8;
        memcpy(blk, norms + 2 * k, 2);
        if (g % 8 == 0 && b == 3) {
            planes_to_block8(g, 3, sk, mk, blk + 2);
            continue;
        }
        if (g % 8 == 0 && b == 5) {
            planes_to_block8(g, 5, sk, mk, blk + 2);
            continue;
        }
        tq_unpack_bits(sk, g, 1, sign);
        tq_unpack_bits(mk, g, b - 1, idx);
        for (uint32_t j = 0; j < g; j++) idx[j] = sign[j] ? idx[j] + half : half - 1 - idx[j];
        tq_pack_bits(idx, g, b, blk + 2);
    }
}
