/* rans-speed.c - rANS decoding speed at each SIMD level this CPU has (a benchmark tool, not a
 * test): TQ_RANS_LANES streams of N symbols each (zig-zag codes of discretized Laplacians of
 * three spreads, about 4 bits a symbol, as a snapshot's transform indices), decoded by
 * tq_rans_decode_many, nanoseconds of one core a symbol, medians of interleaved runs; encoding
 * beside them.
 *
 *   build/tests/rans-speed [N (1434: a SmolLM2 chunk's rows)] [RUNS (9)] */
#include "tq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

/* sym[lanes][n]: lane j's spread 1.5, 3 or 4.5 (j mod 3) */
static void fill(uint8_t *sym, size_t n)
{
    unsigned long long seed = 1;
    for (size_t i = 0; i < (size_t)TQ_RANS_LANES * n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((double)(seed >> 11) + 0.5) / 9007199254740992.0;
        double spread = 1.5 * (double)(1 + (i / n) % 3);
        double v = u < 0.5 ? spread * log(2 * u) : -spread * log(2 - 2 * u);
        long q = lround(v);
        unsigned long z = q >= 0 ? 2ul * (unsigned long)q : 2ul * (unsigned long)(-q) - 1;
        sym[i] = (uint8_t)(z < 255 ? z : 254);
    }
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1434;
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (!n || runs < 1 || runs > 99) {
        fprintf(stderr, "usage: rans-speed [N] [RUNS 1..99]\n");
        return 2;
    }
    size_t k = TQ_RANS_LANES;
    size_t cap = tq_rans_bound(n);
    uint8_t *sym = malloc(k * n);
    uint8_t *back = malloc(k * n);
    uint8_t *room = malloc(k * cap);
    uint8_t *packed = malloc(k * cap); /* [lanes][cap]: the streams one after another */
    if (!sym || !back || !room || !packed) return 1;
    uint8_t *out[TQ_RANS_LANES];
    const uint8_t *in[TQ_RANS_LANES];
    size_t len[TQ_RANS_LANES];
    for (size_t j = 0; j < k; j++) out[j] = room + j * cap;
    fill(sym, n);
    tq_ctx *ctx = tq_ctx_new();
    if (tq_rans_encode_many(ctx, k, sym, n, out, cap, len)) return 1;
    size_t pos = 0;
    for (size_t j = 0; j < k; j++) {
        memcpy(packed + pos, out[j], len[j]);
        in[j] = packed + pos;
        pos += len[j];
    }
    int reps = (int)(4000000 / (k * n)) + 1; /* about 4 M symbols a timing */
    double t[4][99];                         /* [level][run]; level 0: encoding */
    int have[4] = {1, 0, 0, 0};
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        for (int i = 0; i < reps; i++) tq_rans_encode_many(ctx, k, sym, n, out, cap, len);
        t[0][r] = (now_s() - t0) * 1e9 / ((double)reps * (double)(k * n));
        for (int lvl = TQ_SIMD_SCALAR; lvl <= TQ_SIMD_AVX512; lvl++) {
            if (tq_ctx_set_simd(ctx, (tq_simd)lvl)) continue; /* not on this CPU */
            have[lvl] = 1;
            t0 = now_s();
            for (int i = 0; i < reps; i++)
                if (tq_rans_decode_many(ctx, k, in, len, back, n)) return 1;
            t[lvl][r] = (now_s() - t0) * 1e9 / ((double)reps * (double)(k * n));
            if (memcmp(back, sym, k * n)) {
                fprintf(stderr, "rans-speed: %s decoded other symbols\n",
                        tq_simd_name((tq_simd)lvl));
                return 1;
            }
        }
    }
    printf("%zu streams of %zu symbols, %.3f bits a symbol; ns of one core a symbol, medians "
           "of %d interleaved runs\n",
           k, n, 8.0 * (double)pos / (double)(k * n), runs);
    printf("encode: %.2f\n", median(t[0], runs));
    for (int lvl = TQ_SIMD_SCALAR; lvl <= TQ_SIMD_AVX512; lvl++)
        if (have[lvl]) printf("decode %s: %.2f\n", tq_simd_name((tq_simd)lvl), median(t[lvl], runs));
    tq_ctx_free(ctx);
    free(sym);
    free(back);
    free(room);
    free(packed);
    return 0;
}
