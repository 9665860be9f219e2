/* kquants.c - decoding ggml's K-quant superblocks (q2_K .. q6_K, 256 values)
 * and the IQ4 non-linear blocks, with ggml's arithmetic: each value is
 * (d * scale) * q - (dmin * min) in float32, products formed in that order,
 * so the floats equal ggml's dequantize_row_* bit for bit.  Layouts
 * (little-endian, fp16 super-scales):
 *   q2_K  84 B: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit),
 *               d, dmin
 *   q3_K 110 B: hmask[32] (high bit, set = no offset), qs[64] (2-bit),
 *               scales[12] (16 x 6 bits, minus 32), d
 *   q4_K 144 B: d, dmin, scales[12] (8 x (6-bit scale, 6-bit min)), qs[128]
 *   q5_K 176 B: d, dmin, scales[12], qh[32] (fifth bit), qs[128]
 *   q6_K 210 B: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d
 *   iq4_nl 18 B: d, qs[16] (indices into a fixed 16-entry int8 table)
 *   iq4_xs 136 B: d, scales_h (u16), scales_l[4], qs[128]
 * Value e of a superblock reads its bits from the byte and shift the
 * packing puts it at; the comments at each decoder say which. */
#include "tq_internal.h"

#include <string.h>

static void q2_k(const uint8_t *s, float *y)
{
    const uint8_t *sc = s, *qs = s + 16;
    float d = tq_get_h(s + 80), dmin = tq_get_h(s + 82);
    /* e = 128 h + 32 j + l: bits 2j..2j+1 of qs[32 h + l]; sub-block e / 16 */
    for (int e = 0; e < 256; e++) {
        int h = e >> 7, j = (e >> 5) & 3, l = e & 31, q = (qs[32 * h + l] >> (2 * j)) & 3;
        float dl = d * (float)(sc[e >> 4] & 0xF), ml = dmin * (float)(sc[e >> 4] >> 4);
        y[e] = dl * (float)q - ml;
    }
}

static void q3_k(const uint8_t *s, float *y)
{
    const uint8_t *hm = s, *qs = s + 32, *sc = s + 96;
    float d = tq_get_h(s + 108);
    int scale[16];
    for (int k = 0; k < 16; k++) {
        int lo = (sc[k & 7] >> (4 * (k >> 3))) & 0xF, hi = (sc[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
        scale[k] = (lo | hi << 4) - 32;
    }
    /* low bits as q2_K; the high bit of value e is bit e / 32 of hmask[e % 32] */
    for (int e = 0; e < 256; e++) {
        int h = e >> 7, j = (e >> 5) & 3, l = e & 31;
        int q = ((qs[32 * h + l] >> (2 * j)) & 3) - ((hm[l] >> (e >> 5)) & 1 ? 0 : 4);
        float dl = d * (float)scale[e >> 4];
        y[e] = dl * (float)q;
    }
}

/* The 8 (scale, min) pairs of q4_K / q5_K: 6 bits each; the first four in the
 * low 6 bits of bytes 0-3 / 4-7, the last four from the nibbles of bytes 8-11
 * with their top two bits in the top bits of bytes 0-3 / 4-7. */
static void scale_min_k4(const uint8_t *p, int *sc, int *mn)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = p[j] & 63;
        mn[j] = p[j + 4] & 63;
        sc[j + 4] = (p[j + 8] & 0xF) | ((p[j] >> 6) << 4);
        mn[j + 4] = (p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4);
    }
}

static void q45_k(const uint8_t *s, float *y, int five)
{
    float d = tq_get_h(s), dmin = tq_get_h(s + 2);
    int sc[8], mn[8];
    scale_min_k4(s + 4, sc, mn);
    const uint8_t *qh = s + 16, *qs = s + (five ? 48 : 16);
    /* e = 64 c + 32 n + l: nibble n of qs[32 c + l]; sub-block e / 32; the
     * fifth bit (q5_K) is bit e / 32 of qh[l] */
    for (int e = 0; e < 256; e++) {
        int c = e >> 6, n = (e >> 5) & 1, l = e & 31, b = e >> 5;
        int q = (qs[32 * c + l] >> (4 * n)) & 0xF;
        if (five) q |= ((qh[l] >> b) & 1) << 4;
        float d1 = d * (float)sc[b], m1 = dmin * (float)mn[b];
        y[e] = d1 * (float)q - m1;
    }
}

static void q6_k(const uint8_t *s, float *y)
{
    const uint8_t *ql = s, *qh = s + 128;
    const int8_t *sc = (const int8_t *)(s + 192);
    float d = tq_get_h(s + 208);
    /* e = 128 h + 32 j + l: the low 4 bits are nibble (e % 128) / 64 of
     * ql[64 h + e % 64], the high 2 bits are bits 2j of qh[32 h + l] */
    for (int e = 0; e < 256; e++) {
        int h = e >> 7, j = (e >> 5) & 3, l = e & 31;
        int lo = (ql[64 * h + (e & 63)] >> (4 * ((e >> 6) & 1))) & 0xF,
            hi = (qh[32 * h + l] >> (2 * j)) & 3;
        int q = (lo | hi << 4) - 32;
        y[e] = d * (float)sc[e >> 4] * (float)q;
    }
}

static const int8_t iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

static void iq4_nl(const uint8_t *s, float *y)
{
    float d = tq_get_h(s);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4_values[s[2 + j] & 0xF];
        y[j + 16] = d * (float)iq4_values[s[2 + j] >> 4];
    }
}

static void iq4_xs(const uint8_t *s, float *y)
{
    float d = tq_get_h(s);
    uint16_t sh = (uint16_t)(s[2] | s[3] << 8);
    const uint8_t *sl = s + 4, *qs = s + 8;
    /* 8 blocks of 32: a 6-bit scale (4 low bits in sl, 2 high in sh) minus
     * 32, then iq4_nl's nibble order within the block */
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[32 * ib + j] = dl * (float)iq4_values[qs[16 * ib + j] & 0xF];
            y[32 * ib + j + 16] = dl * (float)iq4_values[qs[16 * ib + j] >> 4];
        }
    }
}

static void q4_k(const uint8_t *s, float *y) { q45_k(s, y, 0); }
static void q5_k(const uint8_t *s, float *y) { q45_k(s, y, 1); }

int tq_kquant_dequantize(tq_dtype t, const uint8_t *s, size_t nb, float *y)
{
    /* one superblock's decoder per type */
    static void (*const decoders[TQ_DT_COUNT])(const uint8_t *s, float *y) = {
        [TQ_DT_Q2_K] = q2_k, [TQ_DT_Q3_K] = q3_k,     [TQ_DT_Q4_K] = q4_k,     [TQ_DT_Q5_K] = q5_k,
        [TQ_DT_Q6_K] = q6_k, [TQ_DT_IQ4_NL] = iq4_nl, [TQ_DT_IQ4_XS] = iq4_xs,
    };
    if ((unsigned)t >= TQ_DT_COUNT || !decoders[t]) return -1;
    size_t bytes = tq_dtype_block_bytes(t);
    size_t vals = tq_dtype_block_values(t);
    for (size_t b = 0; b < nb; b++) decoders[t](s + b * bytes, y + b * vals);
    return 0;
}
