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
            CHECK(tq_packed_bytes(n, bits) == n * bits / 8);
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
