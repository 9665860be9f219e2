/* bitpack.c - index packing.  The generic layout is a little-endian bit
 * stream (index j at bit j*bits), which for 2 and 4 bits is exactly the
 * fork's turbo2/turbo4/TQ4_1S packing; turbo3 splits its 3-bit indices into
 * a 2-bit plane and a 1-bit plane. */
#include "tq_internal.h"

#include <string.h>

size_t tq_packed_bytes(size_t n, uint32_t bits) { return (n * bits + 7) / 8; }

void tq_pack_bits(const uint8_t *idx, size_t n, uint32_t bits, uint8_t *out)
{
    size_t nbytes = tq_packed_bytes(n, bits);
    if (bits == 8) {
        memcpy(out, idx, n);
        return;
    }
    if (bits == 4) {
        for (size_t i = 0; i < n / 2; i++) out[i] = (uint8_t)((idx[2 * i] & 15) | (idx[2 * i + 1] << 4));
        return;
    }
    memset(out, 0, nbytes);
    uint32_t mask = (1u << bits) - 1;
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
    if (bits == 8) {
        memcpy(idx, in, n);
        return;
    }
    if (bits == 4) {
        for (size_t i = 0; i < n / 2; i++) {
            idx[2 * i] = in[i] & 15;
            idx[2 * i + 1] = in[i] >> 4;
        }
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
    for (size_t j = 0; j < n; j++)
        idx[j] = (uint8_t)(((lo[j / 4] >> (2 * (j % 4))) & 3) | (((hi[j / 8] >> (j % 8)) & 1) << 2));
}
