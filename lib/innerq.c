/* innerq.c - InnerQ per-channel scaling around the KV codecs. */
#include "tq_internal.h"

tq_status tq_innerq_apply(tq_ctx *ctx, float *x, size_t n, const float *scales, uint32_t dim, int divide)
{
    if (!dim || n % dim)
        return tq_fail(ctx, TQ_ERR_ARG, "%zu values are not whole groups of %u InnerQ channels", n, dim);
    if (divide)
        for (size_t i = 0; i < n; i += dim)
            for (uint32_t j = 0; j < dim; j++) x[i + j] /= scales[j];
    else
        for (size_t i = 0; i < n; i += dim)
            for (uint32_t j = 0; j < dim; j++) x[i + j] *= scales[j];
    return TQ_OK;
}
