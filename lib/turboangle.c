/* turboangle.c - TurboAngle blocks (lib/TURBOANGLE.md): after a random sign
 * flip and an orthonormal Walsh-Hadamard transform, coordinates are taken in
 * pairs; each pair's angle is uniform on the circle for any input (the
 * rotation makes the direction of a pair isotropic), so a uniform angle
 * quantizer with A bins is optimal for it, and only the radii carry the
 * input's shape.  Radii are coded with a Lloyd-Max codebook for the radius
 * of a coordinate pair of a random unit vector, or not at all (one radius
 * per group, implied by the norm). */
#include "tq_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PI_F 3.14159265358979f

/* Lloyd-Max levels for r = |(y_0, y_1)| of a uniform unit vector in R^g:
 * r^2 ~ Beta(1, g/2 - 1), density (g - 2) r (1 - r^2)^(g/2 - 2) on [0, 1].
 * Solved on a fine grid: this only sets the radius levels, whose exactness
 * no format depends on beyond being recorded by the same code. */
static int solve_radius(uint32_t g, uint32_t bits, float *cen, float *thr)
{
    enum { N = 8192 };
    uint32_t k = 1u << bits;
    double *w = malloc(N * sizeof *w), *c = malloc(k * sizeof *c);
    if (!w || !c) {
        free(w);
        free(c);
        return -1;
    }
    double e = (double)g / 2 - 2, tot = 0;
    for (int i = 0; i < N; i++) {
        double r = (i + 0.5) / N;
        w[i] = r * pow(1 - r * r, e);
        tot += w[i];
    }
    double acc = 0; /* start at the quantiles */
    for (uint32_t j = 0, i = 0; j < k; j++) {
        double want = (j + 0.5) / k * tot;
        while (i < N - 1 && acc + w[i] < want) acc += w[i++];
        c[j] = (i + 0.5) / N;
    }
    for (int it = 0; it < 300; it++) {
        double sw[256] = {0}, sr[256] = {0};
        uint32_t j = 0;
        for (int i = 0; i < N; i++) {
            double r = (i + 0.5) / N;
            while (j + 1 < k && r >= 0.5 * (c[j] + c[j + 1])) j++;
            sw[j] += w[i];
            sr[j] += w[i] * r;
        }
        for (j = 0; j < k; j++)
            if (sw[j] > 0) c[j] = sr[j] / sw[j];
    }
    for (uint32_t j = 0; j < k; j++) {
        cen[j] = (float)c[j];
        if (j + 1 < k) thr[j] = (float)(0.5 * (c[j] + c[j + 1]));
    }
    free(w);
    free(c);
    return 0;
}

/* Solved once per (g, bits) and kept: a snapshot makes one codec per tensor. */
static pthread_mutex_t radius_lock = PTHREAD_MUTEX_INITIALIZER;
static float *radius_cache[10][9]; /* [log2 g - 1][bits]: centroids then thresholds */

int tq_angle_radius_codebook(uint32_t g, uint32_t bits, float *cen, float *thr)
{
    uint32_t lg = 0, k = 1u << bits;
    while ((1u << lg) < g) lg++;
    if (lg < 1 || lg > 10 || bits < 1 || bits > 8) return -1;
    pthread_mutex_lock(&radius_lock);
    float **slot = &radius_cache[lg - 1][bits];
    if (!*slot && (*slot = malloc(2 * k * sizeof(float))) &&
        solve_radius(g, bits, *slot, *slot + k)) {
        free(*slot);
        *slot = NULL;
    }
    float *c = *slot;
    pthread_mutex_unlock(&radius_lock);
    if (!c) return -1;
    memcpy(cen, c, k * sizeof(float));
    memcpy(thr, c + k, (k - 1) * sizeof(float));
    return 0;
}

static uint32_t radius_index(const tq_codec *c, float r)
{
    uint32_t k = 0, n = 1u << c->desc.radius_bits;
    for (uint32_t t = 0; t + 1 < n; t++) k += r >= c->extra[n + t];
    return k;
}

/* The rotated unit vector of block values x: y = H D x / (|x| sqrt g). */
static float rotate_unit(const tq_codec *c, const float *x, float *y)
{
    uint32_t g = c->kv.g;
    float n2 = 0;
    for (uint32_t j = 0; j < g; j++) n2 += x[j] * x[j];
    float n = sqrtf(n2), inv = n > 1e-10f ? 1 / n : 0;
    for (uint32_t j = 0; j < g; j++) y[j] = x[j] * inv;
    tq_rht_forward_raw(g, c->kv.s1, c->kv.s2, y);
    return n;
}

void tq_angle_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out)
{
    uint32_t g = c->kv.g, ab = c->desc.bits, rb = c->desc.radius_bits, A = 1u << ab, np = g / 2;
    float y[512];
    uint8_t ia[256], ir[256];
    for (size_t b = 0; b < nb; b++, x += g, out += c->block_bytes) {
        float n = rotate_unit(c, x, y), recon2 = 0;
        for (uint32_t i = 0; i < np; i++) {
            float t = atan2f(y[2 * i + 1], y[2 * i]); /* (-pi, pi] */
            int a = (int)floorf((t + PI_F) * ((float)A / (2 * PI_F)) + 0.5f);
            ia[i] = (uint8_t)(a % (int)A);
            if (rb) {
                ir[i] = (uint8_t)radius_index(c, hypotf(y[2 * i], y[2 * i + 1]));
                recon2 += c->extra[ir[i]] * c->extra[ir[i]];
            }
        }
        if (!rb) recon2 = 1.0f; /* every radius sqrt(2/g): the unit norm exactly */
        float recon = sqrtf(recon2);
        tq_put_h(out, c->desc.norm_correction && recon > 1e-10f ? n / recon : n);
        tq_pack_bits(ia, np, ab, out + 2);
        if (rb) tq_pack_bits(ir, np, rb, out + 2 + tq_packed_bytes(np, ab));
    }
}

/* Block b's rotated-domain values times its stored norm. */
static void angle_rotated(const tq_codec *c, const uint8_t *in, float *y)
{
    uint32_t g = c->kv.g, ab = c->desc.bits, rb = c->desc.radius_bits, A = 1u << ab, np = g / 2;
    uint8_t ia[256], ir[256];
    tq_unpack_bits(in + 2, np, ab, ia);
    if (rb) tq_unpack_bits(in + 2 + tq_packed_bytes(np, ab), np, rb, ir);
    float n = tq_get_h(in), flat = sqrtf(2.0f / (float)g);
    for (uint32_t i = 0; i < np; i++) {
        float t = -PI_F + (float)ia[i] * (2 * PI_F / (float)A),
              r = (rb ? c->extra[ir[i]] : flat) * n;
        y[2 * i] = r * cosf(t);
        y[2 * i + 1] = r * sinf(t);
    }
}

void tq_angle_decode_block(const tq_codec *c, const uint8_t *in, float *y)
{
    angle_rotated(c, in, y);
}

/* Scores: per pair i and angle bin a, q'_{2i} cos t_a + q'_{2i+1} sin t_a,
 * then per key one lookup and one multiply per pair. */
tq_status tq_angle_scores(const tq_codec *c, const float *qr, const uint8_t *blocks, size_t n_keys,
                          float *out)
{
    uint32_t g = c->kv.g, ab = c->desc.bits, rb = c->desc.radius_bits, A = 1u << ab, np = g / 2;
    float *tab = malloc((size_t)np * A * sizeof(float));
    if (!tab) return TQ_ERR_NOMEM;
    for (uint32_t i = 0; i < np; i++)
        for (uint32_t a = 0; a < A; a++) {
            float t = -PI_F + (float)a * (2 * PI_F / (float)A);
            tab[i * A + a] = qr[2 * i] * cosf(t) + qr[2 * i + 1] * sinf(t);
        }
    uint8_t ia[256], ir[256];
    float flat = sqrtf(2.0f / (float)g);
    for (size_t k = 0; k < n_keys; k++, blocks += c->block_bytes) {
        tq_unpack_bits(blocks + 2, np, ab, ia);
        if (rb) tq_unpack_bits(blocks + 2 + tq_packed_bytes(np, ab), np, rb, ir);
        float s = 0;
        for (uint32_t i = 0; i < np; i++) s += (rb ? c->extra[ir[i]] : flat) * tab[i * A + ia[i]];
        out[k] = tq_get_h(blocks) * s;
    }
    free(tab);
    return TQ_OK;
}
