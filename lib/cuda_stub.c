/* cuda_stub.c - stands in for kernels/ in a build without nvcc, so the same
 * API answers "no CUDA" instead of failing to link. */
#include "tq_internal.h"

#include <stdio.h>

int tq_cuda_built(void) { return 0; }
int tq_cuda_devices(void) { return 0; }

int tq_cuda_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out, char *err,
                   size_t errlen)
{
    (void)c, (void)x, (void)nb, (void)out;
    snprintf(err, errlen, "built without CUDA");
    return -1;
}

int tq_cuda_decode(const tq_codec *c, const uint8_t *in, size_t nb, float *y, int rotated,
                   char *err, size_t errlen)
{
    (void)c, (void)in, (void)nb, (void)y, (void)rotated;
    snprintf(err, errlen, "built without CUDA");
    return -1;
}
