/* innerq_scales.c - InnerQ per-channel scales from a .npy file (the form
 * calibrate-innerq writes), see innerq_scales.h. */
#include "file_io.h"
#include "innerq_scales.h"
#include "npy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tq_status tq_innerq_scales_load(tq_ctx *ctx, const char *path, float **out, uint32_t *layers, uint32_t *dim)
{
    *out = NULL;
    const uint8_t *p;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, 10, "not a .npy array", &p, &size);
    if (st) return st;
    tq_npy_header h;
    char err[256];
    if (tq_npy_parse(p, size, &h, err, sizeof err)) {
        tq_unmap_file(p, size);
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", path, err);
    }
    const char *why = NULL;
    uint64_t d = h.ndim ? h.shape[h.ndim - 1] : 0, l = h.ndim == 3 ? h.shape[0] : 1;
    if ((strcmp(h.descr, "<f4") && strcmp(h.descr, "<f2")) || h.fortran_order) why = "not a C-order float32 or float16 array";
    else if (!(h.ndim == 1 || (h.ndim == 2 && h.shape[0] == 2) || (h.ndim == 3 && h.shape[1] == 2)))
        why = "not shaped [head_dim], [2, head_dim] (K, V) or [layers, 2, head_dim]";
    else if (!d || d > 512 || !l || l > 65536) why = "an implausible size";
    else if (h.count * h.itemsize != size - h.header_len) why = "data size does not match its shape";
    if (why) {
        tq_unmap_file(p, size);
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: InnerQ scales: %s", path, why);
    }
    float *s = malloc(l * 2 * d * sizeof(float));
    if (!s) {
        tq_unmap_file(p, size);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    float *raw = malloc(h.count * sizeof(float));
    if (!raw || tq_dequantize(ctx, h.itemsize == 4 ? TQ_DT_F32 : TQ_DT_F16, p + h.header_len, h.count, raw)) {
        free(s), free(raw);
        tq_unmap_file(p, size);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_unmap_file(p, size);
    for (uint64_t i = 0; i < l * 2 * d; i++) { /* [D] serves K and V alike */
        s[i] = raw[h.ndim == 1 ? i % d : i];
        if (!(s[i] > 0.0f) || isinf(s[i])) {
            double bad = s[i];
            free(s), free(raw);
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: InnerQ scale %llu is %g, not finite and positive", path,
                           (unsigned long long)i, bad);
        }
    }
    free(raw);
    *out = s;
    *layers = (uint32_t)l;
    *dim = (uint32_t)d;
    return TQ_OK;
}
