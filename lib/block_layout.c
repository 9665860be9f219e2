/* block_layout.c - the byte layout of every block kind: where the fp16
 * scale(s) sit and how the indices are packed (see turboquant-formats.md for
 * the fork's kinds and TQ_BLOCK.md for tq's own). */
#include "tq_internal.h"

/* TQ3_1S: four groups of eight 3-bit indices, each group a 24-bit LE word. */
static void pack_w3(const uint8_t *idx, uint8_t *qs)
{
    for (int gi = 0; gi < 4; gi++) {
        uint32_t w = 0;
        for (int i = 0; i < 8; i++) w |= (uint32_t)(idx[8 * gi + i] & 7) << (3 * i);
        qs[3 * gi] = (uint8_t)w;
        qs[3 * gi + 1] = (uint8_t)(w >> 8);
        qs[3 * gi + 2] = (uint8_t)(w >> 16);
    }
}

static void unpack_w3(const uint8_t *qs, uint8_t *idx)
{
    for (int gi = 0; gi < 4; gi++) {
        uint32_t w = qs[3 * gi] | (uint32_t)qs[3 * gi + 1] << 8 | (uint32_t)qs[3 * gi + 2] << 16;
        for (int i = 0; i < 8; i++) idx[8 * gi + i] = (w >> (3 * i)) & 7;
    }
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

void tq_block_store(const tq_codec *c, const uint8_t *idx, uint16_t h0, uint16_t h1, uint8_t *out)
{
    size_t n = c->block_values;
    put16(out, h0);
    switch (c->layout) {
        case TQ_LAYOUT_TURBO2:
        case TQ_LAYOUT_TQ:
            tq_pack_bits(idx, n, c->kv.bits, out + 2);
            break;
        case TQ_LAYOUT_TURBO3:
            tq_pack_turbo3(idx, n, out + 2, out + 2 + n / 4);
            break;
        case TQ_LAYOUT_TURBO4:
            put16(out + 2, 0); /* rnorm: written as 0 by the fork's 4-bit mode */
            tq_pack_bits(idx, n, 4, out + 4);
            break;
        case TQ_LAYOUT_W3:
            put16(out + 2, h1);
            pack_w3(idx, out + 4);
            break;
        case TQ_LAYOUT_W4:
            put16(out + 2, h1);
            tq_pack_bits(idx, n, 4, out + 4);
            break;
        default:
            break; /* angle and prod blocks have their own code */
    }
}

void tq_block_load(const tq_codec *c, const uint8_t *in, uint8_t *idx, uint16_t *h0, uint16_t *h1)
{
    size_t n = c->block_values;
    *h0 = get16(in);
    *h1 = 0;
    switch (c->layout) {
        case TQ_LAYOUT_TURBO2:
        case TQ_LAYOUT_TQ:
            tq_unpack_bits(in + 2, n, c->kv.bits, idx);
            break;
        case TQ_LAYOUT_TURBO3:
            tq_unpack_turbo3(in + 2, in + 2 + n / 4, n, idx);
            break;
        case TQ_LAYOUT_TURBO4:
            tq_unpack_bits(in + 4, n, 4, idx);
            break;
        case TQ_LAYOUT_W3:
            *h1 = get16(in + 2);
            unpack_w3(in + 4, idx);
            break;
        case TQ_LAYOUT_W4:
            *h1 = get16(in + 2);
            tq_unpack_bits(in + 4, n, 4, idx);
            break;
        default:
            break; /* angle and prod blocks have their own code */
    }
}
