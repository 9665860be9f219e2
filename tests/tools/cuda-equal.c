/* cuda-equal.c - the GPU against the CPU on many vectors: for every KV codec
 * the CUDA backend runs (the fork's turbo2/3/4; tq blocks of every group and
 * bit width, Lloyd-Max and uniform cells), VECTORS pseudo-random vectors
 * (Gaussian rows with outlier channels and offsets, a zero block per slice)
 * are encoded and decoded on both, and every byte and float compared.
 * Prints a line per codec (vectors, GB/s of each side) and exits 1 on the
 * first difference, 77 without a GPU.  build/tests/cuda-equal [--scalar] [VECTORS]
 * (default 10^7 per codec), run by tests/device/gpu_check.sh. */
#include "tq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* counter-based, so the threads fill their parts independently */
static void fill(float *x, size_t n, unsigned g, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        double u = ((mix(seed ^ (2 * i)) >> 11) + 0.5) / 9007199254740992.0;
        double v = (mix(seed ^ (2 * i + 1)) >> 11) / 9007199254740992.0;
        unsigned j = (unsigned)(i % g);
        x[i] = (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v) * (j % 17 == 3 ? 8.0 : 1.0) + 0.3 * (j % 5));
    }
    memset(x, 0, g * sizeof *x); /* a zero block */
}

static const char *other = "GPU (host data)";

/* 0 if equal; prints the codec's line */
static int check(tq_ctx *cpu, tq_ctx *gpu, const tq_codec_desc *d, size_t vectors)
{
    tq_codec *c;
    if (tq_codec_new(cpu, d, &c)) return fprintf(stderr, "codec: %s\n", tq_ctx_error(cpu)), 1;
    size_t g = tq_codec_block_values(c), bb = tq_codec_block_bytes(c), slice = (size_t)1 << 20;
    float *x = malloc(slice * g * 4), *y0 = malloc(slice * g * 4), *y1 = malloc(slice * g * 4);
    uint8_t *b0 = malloc(slice * bb), *b1 = malloc(slice * bb);
    double tc = 0, tg = 0;
    int bad = !x || !y0 || !y1 || !b0 || !b1;
    for (size_t done = 0; !bad && done < vectors; done += slice) {
        size_t nb = vectors - done < slice ? vectors - done : slice, n = nb * g;
        fill(x, n, (unsigned)g, done + 977 * g + d->bits);
        double t0 = now();
        bad |= tq_encode(cpu, c, x, n, b0) || tq_decode(cpu, c, b0, n, y0);
        double t1 = now();
        bad |= tq_encode(gpu, c, x, n, b1) || tq_decode(gpu, c, b0, n, y1);
        tg += now() - t1, tc += t1 - t0;
        if (bad) fprintf(stderr, "%s: %s %s\n", tq_codec_name(c), tq_ctx_error(cpu), tq_ctx_error(gpu));
        else if (memcmp(b0, b1, nb * bb) || memcmp(y0, y1, n * 4)) {
            size_t k = 0;
            while (k < nb * bb && b0[k] == b1[k]) k++;
            fprintf(stderr, "%s: the GPU's %s differ (first at byte %zu of slice %zu)\n", tq_codec_name(c),
                    k < nb * bb ? "bytes" : "decoded floats", k, done / slice);
            bad = 1;
        }
    }
    double gb = (double)vectors * g * 4 * 2 / 1e9; /* floats in and out, encode and decode */
    if (!bad) printf("%-26s %zu vectors equal; CPU %.2f GB/s, %s %.2f GB/s\n", tq_codec_name(c), vectors, gb / tc,
                     other, gb / tg);
    free(x), free(y0), free(y1), free(b0), free(b1);
    tq_codec_free(c);
    return bad;
}

int main(int argc, char **argv)
{
    /* --scalar: the scalar kernels stand in for the GPU (the tool's own check, and SIMD against scalar) */
    int scalar = argc > 1 && !strcmp(argv[1], "--scalar");
    if (scalar) other = "scalar";
    size_t vectors = argc > 1 + scalar ? strtoull(argv[1 + scalar], NULL, 10) : 10000000;
    if (!scalar && (!tq_cuda_built() || tq_cuda_devices() < 1)) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    tq_ctx *cpu = tq_ctx_new(), *gpu = tq_ctx_new();
    if (scalar ? tq_ctx_set_simd(gpu, TQ_SIMD_SCALAR) : tq_ctx_set_backend(gpu, TQ_BACKEND_CUDA))
        return fprintf(stderr, "%s\n", tq_ctx_error(gpu)), 1;
    int bad = 0;
    /* the fork's blocks of every revision (lib/fork_revisions.c), each block once */
    for (uint32_t rev = 0; rev < tq_fork_revision_count() && !bad; rev++)
        for (uint32_t bits = 2; bits <= 4 && !bad; bits++) {
            uint32_t first;
            uint32_t b;
            if (!tq_fork_dtype_of(tq_fork_dtype(rev, bits), &first, &b) || first != rev) continue;
            tq_codec_desc d = {.kind = (tq_codec_kind)(TQ_CODEC_TURBO2 + (int)bits - 2),
                               .fork_rev = rev};
            bad = check(cpu, gpu, &d, vectors);
        }
    for (uint32_t g = 64; g <= 256 && !bad; g *= 2) /* Lloyd-Max at 2-4 bits, uniform cells in 4- and 5-bit fields */
        for (uint32_t b = 2; b <= 5 && !bad; b++)
            for (uint32_t u = 0; u < 2 && !bad; u++)
                if (u ? b >= 4 : b <= 4) bad = check(cpu, gpu, &(tq_codec_desc){TQ_CODEC_TQ, g, b, b > 2, 0, 0, u, 0}, vectors);
    tq_ctx_free(cpu), tq_ctx_free(gpu);
    return bad;
}
