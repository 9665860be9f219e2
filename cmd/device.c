/* device.c - see device.h.  The self-check runs before any byte of a user's
 * data goes to the GPU: a GPU path that disagreed with the CPU's would write
 * snapshots that decode to something else, so it is verified where it runs. */
#include "cli.h"
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0 if the GPU codes `nb` pseudo-random blocks of codec d to the CPU's
 * bytes and decodes them to the CPU's values. */
static int same_on_both(tq_ctx *gpu, const tq_codec_desc *d, size_t nb, char *why, size_t wl)
{
    tq_ctx *cpu = tq_ctx_new();
    tq_codec *c = NULL;
    int rc = -1;
    if (!cpu || tq_codec_new(cpu, d, &c)) {
        snprintf(why, wl, "%s", cpu ? tq_ctx_error(cpu) : "out of memory");
        tq_ctx_free(cpu);
        return -1;
    }
    size_t n = nb * tq_codec_block_values(c), bytes = nb * tq_codec_block_bytes(c);
    float *x = malloc(n * sizeof *x), *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
    uint8_t *b0 = malloc(bytes), *b1 = malloc(bytes);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; x && i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int64_t)(s >> 11) % 20001 - 10000) / 2500.0f;
    }
    if (!x || !y0 || !y1 || !b0 || !b1)
        snprintf(why, wl, "out of memory");
    else if (tq_encode(cpu, c, x, n, b0) || tq_decode(cpu, c, b0, n, y0))
        snprintf(why, wl, "%s", tq_ctx_error(cpu));
    else if (tq_encode(gpu, c, x, n, b1) || tq_decode(gpu, c, b0, n, y1))
        snprintf(why, wl, "%s", tq_ctx_error(gpu));
    else if (memcmp(b0, b1, bytes) || memcmp(y0, y1, n * sizeof *y0))
        snprintf(why, wl, "%s: the GPU's %s differ from the CPU's", tq_codec_name(c),
                 memcmp(b0, b1, bytes) ? "bytes" : "values");
    else
        rc = 0;
    free(x);
    free(y0);
    free(y1);
    free(b0);
    free(b1);
    tq_codec_free(c);
    tq_ctx_free(cpu);
    return rc;
}

static int self_check(tq_ctx *gpu, char *why, size_t wl)
{
    const tq_codec_desc tq = {TQ_CODEC_TQ, 128, 4, 1, 0, 0, 0, 0};
    const tq_codec_desc turbo = {.kind = TQ_CODEC_TURBO3};
    return same_on_both(gpu, &tq, 4096, why, wl) || same_on_both(gpu, &turbo, 4096, why, wl) ? -1
                                                                                             : 0;
}

int cli_device(const cli_common *c, tq_ctx *ctx, int kernels, uint64_t values)
{
    const char *dev = c->device ? c->device : "auto";
    char why[512];
    if (!strcmp(dev, "cpu"))
        return tq_ctx_set_backend(ctx, TQ_BACKEND_CPU) ? cli_lib_error(ctx) : 0;
    if (!strcmp(dev, "cuda")) {
        if (!kernels)
            return cli_runtime_error(
                "--device cuda: tq has no CUDA kernels for this work yet (use --device cpu)");
        if (tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA))
            return cli_runtime_error("--device cuda: %s", tq_ctx_error(ctx));
        if (self_check(ctx, why, sizeof why)) {
            tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
            return cli_runtime_error("--device cuda: the GPU failed its self-check: %s", why);
        }
        return 0;
    }
    if (!kernels || values < TQ_DEVICE_AUTO_VALUES || !tq_cuda_built() || tq_cuda_devices() < 1)
        return 0;
    if (tq_ctx_set_backend(ctx, TQ_BACKEND_CUDA) || self_check(ctx, why, sizeof why)) {
        tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
        tq_ctx_clear_error(ctx);
        if (!c->quiet) cli_log("--device auto: staying on the CPU (the GPU failed its self-check)");
        return 0;
    }
    if (!c->quiet)
        cli_log("--device auto: coding on the GPU (%d CUDA device(s) visible)", tq_cuda_devices());
    return 0;
}
