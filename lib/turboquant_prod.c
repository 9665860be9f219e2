/* turboquant_prod.c - TurboQuant-prod blocks (lib/TQ_PROD.md): the paper's
 * inner-product quantizer.  A (b-1)-bit MSE block of the rotated unit vector
 * (tq's exact codebook, no norm correction) plus QJL on its residual e: the
 * signs of S e for a seeded Gaussian g x g matrix S, and |e|.  The decoded
 * vector c + sqrt(pi/2)/g |e| S' sign(S e) is unbiased: E <y, x~> = <y, x>
 * for every y, because E[(s.y) sign(s.e)] = sqrt(2/pi) <y, e> / |e| for a
 * Gaussian row s. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* S: g x g standard Gaussians (Box-Muller on splitmix64), row-major. */
int tq_prod_sketch(uint32_t g, uint64_t seed, float *S)
{
    uint64_t st = seed ^ 0x716a6c31ull; /* "qjl1" */
    for (size_t i = 0; i < (size_t)g * g; i += 2) {
        double u1 = ((mix(&st) >> 11) + 0.5) * (1.0 / 9007199254740992.0),
               u2 = (mix(&st) >> 11) * (1.0 / 9007199254740992.0);
        double r = sqrt(-2.0 * log(u1));
        S[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < (size_t)g * g) S[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    return 0;
}

/* Layout: norm n (fp16), residual norm |e| (fp16), (b-1)-bit indices, g sign bits. */
void tq_prod_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out)
{
    uint32_t g = c->kv.g, mb = c->kv.bits;
    const float *S = c->extra, *cen = c->kv.cen;
    float y[512];
    uint8_t idx[512], sg[512];
    for (size_t b = 0; b < nb; b++, x += g, out += c->block_bytes) {
        float n2 = 0;
        for (uint32_t j = 0; j < g; j++) n2 += x[j] * x[j];
        float n = sqrtf(n2), inv = n > 1e-10f ? 1 / n : 0;
        for (uint32_t j = 0; j < g; j++) y[j] = x[j] * inv;
        tq_rht_forward_raw(g, c->kv.s1, c->kv.s2, y);
        float e2 = 0;
        for (uint32_t j = 0; j < g; j++) {
            idx[j] = (uint8_t)tq_cb_index(c->kv.cb, y[j]);
            y[j] -= cen[idx[j]]; /* the residual, in place */
            e2 += y[j] * y[j];
        }
        for (uint32_t i = 0; i < g; i++) {
            float s = 0;
            for (uint32_t j = 0; j < g; j++) s += S[(size_t)i * g + j] * y[j];
            sg[i] = s >= 0;
        }
        tq_put_h(out, n);
        tq_put_h(out + 2, sqrtf(e2));
        tq_pack_bits(idx, g, mb, out + 4);
        tq_pack_bits(sg, g, 1, out + 4 + tq_packed_bytes(g, mb));
    }
}

static void prod_rotated(const tq_codec *c, const uint8_t *in, float *y)
{
    uint32_t g = c->kv.g, mb = c->kv.bits;
    const float *S = c->extra, *cen = c->kv.cen;
    uint8_t idx[512], sg[512];
    tq_unpack_bits(in + 4, g, mb, idx);
    tq_unpack_bits(in + 4 + tq_packed_bytes(g, mb), g, 1, sg);
    float n = tq_get_h(in), k = sqrtf(1.5707963267948966f) / (float)g * tq_get_h(in + 2);
    for (uint32_t j = 0; j < g; j++) y[j] = cen[idx[j]];
    for (uint32_t i = 0; i < g; i++) { /* + k S' z */
        float z = sg[i] ? k : -k;
        for (uint32_t j = 0; j < g; j++) y[j] += z * S[(size_t)i * g + j];
    }
    for (uint32_t j = 0; j < g; j++) y[j] *= n;
}

void tq_prod_decode_block(const tq_codec *c, const uint8_t *in, float *y)
{
    prod_rotated(c, in, y);
}

/* Scores: <q', c> from the centroid lookups, plus k <S q', z> with S q'
 * computed once per query: the sketch part costs g adds per key. */
tq_status tq_prod_scores(const tq_codec *c, const float *qr, const uint8_t *blocks, size_t n_keys,
                         float *out)
{
    uint32_t g = c->kv.g, mb = c->kv.bits;
    const float *S = c->extra, *cen = c->kv.cen;
    float sq[512];
    for (uint32_t i = 0; i < g; i++) {
        float s = 0;
        for (uint32_t j = 0; j < g; j++) s += S[(size_t)i * g + j] * qr[j];
        sq[i] = s;
    }
    uint8_t idx[512], sg[512];
    for (size_t k = 0; k < n_keys; k++, blocks += c->block_bytes) {
        tq_unpack_bits(blocks + 4, g, mb, idx);
        tq_unpack_bits(blocks + 4 + tq_packed_bytes(g, mb), g, 1, sg);
        float a = 0, z = 0;
        for (uint32_t j = 0; j < g; j++) a += qr[j] * cen[idx[j]];
        for (uint32_t i = 0; i < g; i++) z += sg[i] ? sq[i] : -sq[i];
        out[k] = tq_get_h(blocks) *
                 (a + sqrtf(1.5707963267948966f) / (float)g * tq_get_h(blocks + 2) * z);
    }
    return TQ_OK;
}
