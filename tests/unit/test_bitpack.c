/* test_bitpack.c - index packing layouts. */
#include "harness.h"
#include "tq_internal.h"

#include <string.h>

TEST(bitpack_roundtrip_all_widths)
{
    unsigned long long st = 5;
    uint8_t idx[512], back[512], buf[520];
    for (uint32_t bits = 1; bits <= 8; bits++)
        for (size_t n = 8; n <= 512; n *= 2) {
            for (size_t j = 0; j < n; j++) idx[j] = (uint8_t)((unsigned)(tq_test_randn(&st) * 1e6) & ((1u << bits) - 1));
            CHECK_EQ(tq_packed_bytes(n, bits), n * bits / 8);
            memset(buf, 0xa5, sizeof buf);
            tq_pack_bits(idx, n, bits, buf);
            CHECK(buf[n * bits / 8] == 0xa5, "bits=%u n=%zu writes past the end", bits, n);
            tq_unpack_bits(buf, n, bits, back);
            CHECK(!memcmp(idx, back, n), "bits=%u n=%zu", bits, n);
            /* the layout: index j at bit j*bits, little-endian */
            for (size_t j = 0; j < n; j++) {
                unsigned v = 0;
                for (uint32_t k = 0; k < bits; k++) {
                    size_t bit = j * bits + k;
                    v |= ((buf[bit / 8] >> (bit % 8)) & 1u) << k;
                }
                CHECK(v == idx[j], "bits=%u index %zu at the wrong bits", bits, j);
            }
        }
}

TEST(bitpack_turbo3_planes)
{
    uint8_t idx[128], lo[32], hi[16], back[128];
    for (int j = 0; j < 128; j++) idx[j] = (uint8_t)((j * 5 + 3) & 7);
    tq_pack_turbo3(idx, 128, lo, hi);
    for (int j = 0; j < 128; j++) {
        CHECK(((lo[j / 4] >> (2 * (j % 4))) & 3) == (idx[j] & 3), "low plane %d", j);
        CHECK(((hi[j / 8] >> (j % 8)) & 1) == (idx[j] >> 2), "high plane %d", j);
    }
    tq_unpack_turbo3(lo, hi, 128, back);
    CHECK(!memcmp(idx, back, 128));
}

/* Planes: exact both ways for every width and group; on a hand case, the
 * norms first, then signs (idx >= 2^(b-1)), then magnitudes counted from
 * zero outward on either side. */
TEST(block_planes_round_trip_and_layout)
{
    unsigned long long st = 11;
    for (uint32_t b = 2; b <= 8; b++)
        for (uint32_t g = 8; g <= 512; g *= 4) {
            size_t nb = 3, bb = 2 + g * b / 8;
            uint8_t blocks[3 * (2 + 512)], planes[sizeof blocks], back[sizeof blocks];
            for (size_t i = 0; i < nb * bb; i++) blocks[i] = (uint8_t)(tq_test_randn(&st) * 1000);
            tq_blocks_to_planes(g, b, blocks, nb, planes);
            tq_planes_to_blocks(g, b, planes, nb, back);
            CHECK(!memcmp(back, blocks, nb * bb), "b %u g %u: planes do not invert", b, g);
        }
    /* one block of 8 values at 3 bits: indices 0..7 */
    uint8_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7}, blk[2 + 3], pl[5], mags[8];
    blk[0] = 0x12, blk[1] = 0x34;
    tq_pack_bits(idx, 8, 3, blk + 2);
    tq_blocks_to_planes(8, 3, blk, 1, pl);
    CHECK(pl[0] == 0x12 && pl[1] == 0x34, "the norm first");
    CHECK(pl[2] == 0xF0, "signs: %02x", pl[2]); /* indices 4..7 are the positive half */
    tq_unpack_bits(pl + 3, 8, 2, mags);
    const uint8_t want[8] = {3, 2, 1, 0, 0, 1, 2, 3};
    CHECK(!memcmp(mags, want, 8), "magnitudes %u %u %u %u %u %u %u %u", mags[0], mags[1], mags[2], mags[3], mags[4],
          mags[5], mags[6], mags[7]);
}
