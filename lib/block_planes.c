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

void tq_planes_to_blocks(uint32_t g, uint32_t b, const uint8_t *planes, size_t n_blocks,
                         uint8_t *blocks)
{
    uint8_t idx[MAX_G], sign[MAX_G];
    size_t bb = 2 + (size_t)g * b / 8;
    const uint8_t *norms = planes, *signs = planes + 2 * n_blocks, *mags = signs + n_blocks * g / 8;
    uint8_t half = (uint8_t)(1u << (b - 1));
    for (size_t k = 0; k < n_blocks; k++) {
        uint8_t *blk = blocks + k * bb;
        memcpy(blk, norms + 2 * k, 2);
        tq_unpack_bits(signs + k * g / 8, g, 1, sign);
        tq_unpack_bits(mags + k * g * (b - 1) / 8, g, b - 1, idx);
        for (uint32_t j = 0; j < g; j++) idx[j] = sign[j] ? idx[j] + half : half - 1 - idx[j];
        tq_pack_bits(idx, g, b, blk + 2);
    }
}
