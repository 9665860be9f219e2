/* device.h - --device auto|cpu|cuda: where a command's codec work runs. */
#ifndef TQ_CMD_DEVICE_H
#define TQ_CMD_DEVICE_H

#include "cli_opts.h"

/* Batches below this many values stay on the CPU under auto: copying them
 * to a GPU and back costs more than coding them on the cores. */
#define TQ_DEVICE_AUTO_VALUES (256ull << 20)

/* Sets ctx's backend for --device.  cpu: the CPU.  cuda: the GPU, or one
 * line and exit 1 where there is none, where `kernels` is 0 (no CUDA
 * kernels for this work yet) or where the self-check fails.  auto (the
 * default): the GPU when the work has kernels, the batch holds at least
 * TQ_DEVICE_AUTO_VALUES values, a GPU is visible and the self-check passes
 * (blocks of the tq and turbo codecs coded on both, bytes and decoded values
 * compared), said once on stderr; the CPU otherwise.  0 or an exit code. */
int cli_device(const cli_common *c, tq_ctx *ctx, int kernels, uint64_t values);

#endif
