/* legacy_quants.c - ggml's 32-value blocks q8_0, q4_0, q4_1, q5_0 and q5_1,
 * byte for byte: the reference quantizers (quantize_row_*_ref) and, for the
 * 4- and 5-bit ones, the importance-weighted ones llama-quantize runs with
 * an imatrix (quantize_row_*_impl), which need the whole row (the weights
 * use the row's mean square).  q5_0 and q5_1 are also where llama-quantize
 * falls back when a row is not whole K-quant superblocks. */
#include "quant_search.h"
#include "tq_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* the fifth bits of 32 levels: bit j of the word is level j's */
static uint32_t fifth_bits(const uint8_t *lv)
{
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++) qh |= (uint32_t)((lv[j] & 0x10u) >> 4) << j;
    return qh;
}

static void store_nibbles(uint8_t *qs, const uint8_t *lv)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((lv[j] & 0xF) | (lv[j + 16] & 0xF) << 4);
}

/* Reference: one block of 32 from x. */
static void ref_block(tq_dtype t, const float *x, uint8_t *o)
{
    uint8_t lv[32];
    float amax = 0, peak = 0, lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            peak = x[j];
        }
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    switch (t) {
        case TQ_DT_Q8_0: {
            float d = amax / ((1 << 7) - 1), id = d ? 1.0f / d : 0.0f;
            tq_put_h(o, d);
            for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
            return;
        }
        case TQ_DT_Q4_0:
        case TQ_DT_Q5_0: { /* symmetric, the level of the signed peak at -8 / -16 */
            int five = t == TQ_DT_Q5_0, half = five ? 16 : 8, top = five ? 31 : 15;
            float d = peak / -half, id = d ? 1.0f / d : 0.0f;
            tq_put_h(o, d);
            for (int j = 0; j < 32; j++) {
                int8_t q = (int8_t)(x[j] * id + (five ? 16.5f : 8.5f));
                lv[j] = (uint8_t)(q < top ? q : top);
            }
            if (five) put_u32(o + 2, fifth_bits(lv));
            store_nibbles(o + (five ? 6 : 2), lv);
            return;
        }
        case TQ_DT_Q4_1:
        case TQ_DT_Q5_1: { /* affine over [min, max] */
            int five = t == TQ_DT_Q5_1;
            float d = (hi - lo) / (five ? 31 : 15), id = d ? 1.0f / d : 0.0f;
            tq_put_h(o, d);
            tq_put_h(o + 2, lo);
            for (int j = 0; j < 32; j++) {
                float v = (x[j] - lo) * id + 0.5f;
                if (five)
                    lv[j] = (uint8_t)v;
                else {
                    int8_t q = (int8_t)v;
                    lv[j] = (uint8_t)(q < 15 ? q : 15);
                }
            }
            if (five) put_u32(o + 4, fifth_bits(lv));
            store_nibbles(o + (five ? 8 : 4), lv);
            return;
        }
        default:
            return;
    }
}

/* Weighted: one row of n values with its n importances. */
static void weighted_row(tq_dtype t, const float *x, size_t n, const float *qw, uint8_t *o)
{
    float sum_x2 = 0;
    for (size_t j = 0; j < n; j++) sum_x2 += x[j] * x[j];
    float sigma2 = sum_x2 / (float)(int64_t)n;
    size_t bytes = tq_dtype_block_bytes(t);
    for (size_t b = 0; b < n / 32; b++, x += 32, qw += 32, o += bytes) {
        float w[32], lo;
        uint8_t lv[32];
        for (int j = 0; j < 32; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
        switch (t) {
            case TQ_DT_Q4_0:
            case TQ_DT_Q5_0: {
                int five = t == TQ_DT_Q5_0;
                tq_put_h(o, tq_qs_symmetric(32, five ? 16 : 8, x, (int8_t *)lv, w));
                if (five) put_u32(o + 2, fifth_bits(lv));
                store_nibbles(o + (five ? 6 : 2), lv);
                break;
            }
            case TQ_DT_Q4_1:
            case TQ_DT_Q5_1: {
                int five = t == TQ_DT_Q5_1;
                tq_put_h(o, tq_qs_affine(32, five ? 31 : 15, x, w, lv, &lo, -0.9f, 0.05f, 36, 0));
                tq_put_h(o + 2, -lo);
                if (five) put_u32(o + 4, fifth_bits(lv));
                store_nibbles(o + (five ? 8 : 4), lv);
                break;
            }
            default:
                return;
        }
    }
}

int tq_legacy_quantize(tq_dtype t, const float *x, size_t n, const float *qw, uint8_t *o)
{
    if (t != TQ_DT_Q8_0 && t != TQ_DT_Q4_0 && t != TQ_DT_Q4_1 && t != TQ_DT_Q5_0 && t != TQ_DT_Q5_1)
        return -1;
    if (qw && t != TQ_DT_Q8_0) { /* ggml weighs q8_0 by nothing */
        weighted_row(t, x, n, qw, o);
        return 0;
    }
    size_t bytes = tq_dtype_block_bytes(t);
    for (size_t b = 0; b < n / 32; b++) ref_block(t, x + 32 * b, o + bytes * b);
    return 0;
}
