/* innerq_scales.h - InnerQ per-channel K/V scales stored as a .npy file:
 * float32 or float16, shaped [head_dim] (K and V alike), [2, head_dim]
 * (K, V) or [layers, 2, head_dim]. */
#ifndef TQ_INNERQ_SCALES_H
#define TQ_INNERQ_SCALES_H

#include "tq.h"

#include <stdint.h>

/* Returned as layers x 2 x head_dim floats (malloc'd), each finite and
 * positive. */
tq_status tq_innerq_scales_load(tq_ctx *ctx, const char *path, float **out, uint32_t *layers, uint32_t *dim);

#endif
