/* rht.c - randomized Hadamard transform, the fork's definition:
 * forward y = D(s2) H D(s1) x / sqrt(g), inverse x = D(s1) H D(s2) y / sqrt(g).
 * The operation order (sign, butterfly, then one multiply by scale*sign) is
 * the fork's, so results match it bit for bit in float32. */
#include "tq_internal.h"
#include "tq_fwht.h"

#include <math.h>

float tq_rht_scale(uint32_t g) { return (float)(1.0 / sqrt((double)g)); }

void tq_fwht(float *x, uint32_t g) { tq_fwht_inline(x, g); }

void tq_rht_forward_raw(uint32_t g, const float *s1, const float *s2, float *x)
{
    float sc = tq_rht_scale(g);
    for (uint32_t i = 0; i < g; i++) x[i] *= s1[i];
    tq_fwht(x, g);
    for (uint32_t i = 0; i < g; i++) x[i] *= sc * s2[i];
}

void tq_rht_inverse_raw(uint32_t g, const float *s1, const float *s2, float *x)
{
    float sc = tq_rht_scale(g);
    for (uint32_t i = 0; i < g; i++) x[i] *= s2[i];
    tq_fwht(x, g);
    for (uint32_t i = 0; i < g; i++) x[i] *= sc * s1[i];
}

static tq_status check_g(tq_ctx *ctx, uint32_t g)
{
    if (!tq_is_pow2(g) || g < TQ_RHT_MIN || g > TQ_RHT_MAX)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "RHT size %u is not a power of two in [%d, %d]", g,
                       TQ_RHT_MIN, TQ_RHT_MAX);
    return TQ_OK;
}

tq_status tq_rht_forward(tq_ctx *ctx, uint32_t g, const float *s1, const float *s2, float *x)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_g(ctx, g);
    if (st == TQ_OK) tq_rht_forward_raw(g, s1, s2, x);
    return st;
}

tq_status tq_rht_inverse(tq_ctx *ctx, uint32_t g, const float *s1, const float *s2, float *x)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_g(ctx, g);
    if (st == TQ_OK) tq_rht_inverse_raw(g, s1, s2, x);
    return st;
}

tq_status tq_hadamard_blocks(tq_ctx *ctx, uint32_t n, float *x, size_t count)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_g(ctx, n);
    if (st != TQ_OK) return st;
    float sc = tq_rht_scale(n);
    for (size_t b = 0; b + n <= count; b += n) {
        tq_fwht(x + b, n);
        for (uint32_t i = 0; i < n; i++) x[b + i] *= sc;
    }
    return TQ_OK;
}
