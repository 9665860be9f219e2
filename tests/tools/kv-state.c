/* kv-state.c - demo and bench tool: a llama.cpp session file (v10, one stream, sequence 0) of
 * a Llama-8B-shaped KV cache, generated: LAYERS f16 K and V tensors of CELLS rows of 8 KV
 * heads x 128 values, Gaussian with 24 channels 8x larger and, in K, a per-channel offset (as
 * real K caches carry one).  Deterministic: the same file for the same arguments.
 * usage: kv-state OUT.ggsn CELLS [LAYERS] */
#include "tq.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIDTH = 1024, HOT = 24 };

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* a standard normal draw (Box-Muller on two uniforms) */
static double randn(uint64_t *s)
{
    double u = (rng_next(s) + 0.5) / 9007199254740992.0;
    double v = (rng_next(s) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int put(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

static int put_u32(FILE *f, uint32_t v) { return put(f, &v, 4); }

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: kv-state OUT.ggsn CELLS [LAYERS]\n");
        return 2;
    }
    uint32_t cells = (uint32_t)strtoul(argv[2], NULL, 10);
    uint32_t layers = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 32;
    if (cells < 1 || cells > 1000000 || layers < 1 || layers > 256) {
        fprintf(stderr, "kv-state: 1..1000000 cells and 1..256 layers\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    uint64_t seed = 12345;
    float scale[WIDTH], offset[WIDTH];                         /* [WIDTH] */
    uint16_t *row = malloc(sizeof *row * WIDTH * (size_t)64); /* [64][WIDTH]: f16 rows */
    for (int j = 0; j < WIDTH; j++) scale[j] = 1.0f;
    for (int k = 0; k < HOT; k++) scale[rng_next(&seed) % WIDTH] = 8.0f;
    int bad = !row;
    /* header: magic "ggsn", version 10, the tokens; then the KV state: architecture name, one
       stream, its cells (position, one sequence id: 0), v_trans 0, the layer count */
    bad |= put_u32(f, 0x6767736E) | put_u32(f, 10) | put_u32(f, cells);
    for (uint32_t c = 0; c < cells; c++) bad |= put_u32(f, c % 32000);
    bad |= put_u32(f, 5) | put(f, "llama", 5) | put_u32(f, 1) | put_u32(f, cells);
    for (uint32_t c = 0; c < cells; c++) bad |= put_u32(f, c) | put_u32(f, 1) | put_u32(f, 0);
    bad |= put_u32(f, 0) | put_u32(f, layers);
    for (int kv = 0; kv < 2 && !bad; kv++)
        for (uint32_t l = 0; l < layers && !bad; l++) {
            for (int j = 0; j < WIDTH; j++) offset[j] = kv ? 0.0f : (float)(2.0 * randn(&seed));
            uint64_t row_size = 2 * WIDTH;
            bad |= put_u32(f, 1) | put(f, &row_size, 8); /* type f16, row size */
            for (uint32_t c0 = 0; c0 < cells && !bad; c0 += 64) {
                uint32_t n = cells - c0 < 64 ? cells - c0 : 64;
                for (uint32_t r = 0; r < n; r++)
                    for (int j = 0; j < WIDTH; j++)
                        row[(size_t)r * WIDTH + j] =
                            tq_fp32_to_fp16((float)(randn(&seed) * scale[j] + offset[j]));
                bad |= put(f, row, 2ull * WIDTH * n);
            }
        }
    free(row);
    if (fclose(f) || bad) {
        fprintf(stderr, "kv-state: writing %s failed\n", argv[1]);
        remove(argv[1]);
        return 1;
    }
    return 0;
}
