/* rope.c - RoPE rotations (tq.h).  Angles in double: encode and decode must
 * agree with each other exactly, and with the model only closely. */
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>

tq_status tq_rope_check(tq_ctx *ctx, const tq_rope *r, uint64_t width)
{
    TQ_NEED_CTX(ctx);
    if (!r->head_dim || width % r->head_dim || !r->n_rot || r->n_rot % 2 ||
        r->n_rot > r->head_dim || (r->pairs != TQ_PAIRS_ADJACENT && r->pairs != TQ_PAIRS_HALVES) ||
        !(r->freq_base > 0.0f) || !isfinite(r->freq_base) || !(r->freq_scale > 0.0f) ||
        !isfinite(r->freq_scale))
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "RoPE of %u of %u channels (base %g, scale %g) does not fit rows of %llu", r->n_rot,
            r->head_dim, r->freq_base, r->freq_scale, (unsigned long long)width);
    return TQ_OK;
}

/* The angles of a row: cos and sin at the row's position in cs[i] and cs[h + i] (h = n_rot / 2,
 * one array each so that the loops vectorize); each pair's frequency f_i in cs[2h + i], cos
 * and sin of f_i in cs[3h + i] and cs[4h + i].  From one position to the next the angles
 * advance by f_i, so consecutive cells (a prompt's) turn the previous row's cos/sin by one
 * step, 4 products instead of a cos and a sin; every RESYNC rows and after a jump the angles
 * are computed afresh.  Encode and decode call this on the same rows, so they agree exactly;
 * the drift in between is ~1e-14. */
enum { RESYNC = 64 };
/* Rows up to this many positions apart (a sample of spread cells: a plan's) turn the previous
 * row's angles by the gap's, kept in cs from the first use (MAX_GAP x 2 x h, behind the
 * rest; a gap's f entry 0 until then). */
enum { MAX_GAP = 16 };

static double *angle_table(const tq_rope *r)
{
    uint32_t h = r->n_rot / 2;
    /* [3][h] cos, sin, f; [MAX_GAP][2][h] cos and sin of g f; [MAX_GAP] whether set */
    double *cs = calloc((3 + 2 * MAX_GAP) * h + MAX_GAP, sizeof *cs);
    for (uint32_t i = 0; cs && i < h; i++) {
        double f = r->freq_scale * pow((double)r->freq_base, -2.0 * i / r->n_rot);
        cs[2 * h + i] = f;
        cs[3 * h + i] = cos(f);
        cs[4 * h + i] = sin(f);
    }
    if (cs) cs[(3 + 2 * MAX_GAP) * h] = 1; /* the gap of 1: set above */
    return cs;
}

/* cs's angles for row k of rows at positions pos (also built for x86-64-v3, as the loops that
 * turn rows: four doubles a lane set where SSE2 takes two; with no fused multiply-add, the same
 * bits) */
TQ_CLONES_V3 static void angles(const tq_rope *r, const int32_t *pos, size_t k, double *cs)
{
    uint32_t h = r->n_rot / 2;
    double *c = cs, *s = cs + h;
    const double *f = cs + 2 * h;
    int64_t gap = k ? (int64_t)pos[k] - (int64_t)pos[k - 1] : 0;
    if (k % RESYNC && gap >= 1 && gap <= MAX_GAP) {
        double *cf = cs + (1 + 2 * gap) * h, *sf = cf + h, *set = cs + (3 + 2 * MAX_GAP) * h;
        for (uint32_t i = 0; !set[gap - 1] && i < h; i++) {
            cf[i] = cos((double)gap * f[i]);
            sf[i] = sin((double)gap * f[i]);
        }
        set[gap - 1] = 1;
        for (uint32_t i = 0; i < h; i++) {
            double c0 = c[i];
            double s0 = s[i];
            c[i] = c0 * cf[i] - s0 * sf[i];
            s[i] = s0 * cf[i] + c0 * sf[i];
        }
        return;
    }
    for (uint32_t i = 0; i < h; i++) {
        double th = (double)pos[k] * f[i];
        c[i] = cos(th);
        s[i] = sin(th);
    }
}

/* One row turned by the angles cs: pairs (i, i + n_rot/2) or (2i, 2i+1),
 * each layout its own loop so that the compiler vectorizes it (the same
 * double products either way). */
TQ_CLONES_V3 static void turn_row(const tq_rope *r, float *x, uint64_t width, const double *cs,
                                  double dir)
{
    uint32_t h = r->n_rot / 2;
    for (uint64_t o = 0; o < width; o += r->head_dim) {
        float *y = x + o;
        if (r->pairs == TQ_PAIRS_HALVES) {
            for (uint32_t i = 0; i < h; i++) {
                double c = cs[i], s = -dir * cs[h + i], x0 = y[i], x1 = y[i + h];
                y[i] = (float)(x0 * c + x1 * s);
                y[i + h] = (float)(x1 * c - x0 * s);
            }
        } else {
            for (uint32_t i = 0; i < h; i++) {
                double c = cs[i], s = -dir * cs[h + i], x0 = y[2 * i], x1 = y[2 * i + 1];
                y[2 * i] = (float)(x0 * c + x1 * s);
                y[2 * i + 1] = (float)(x1 * c - x0 * s);
            }
        }
    }
}

/* x = R(pos)^T x (dir -1) or R(pos) x (dir 1), row by row. */
static tq_status turn(tq_ctx *ctx, const tq_rope *r, float *x, size_t rows, uint64_t width,
                      const int32_t *pos, double dir)
{
    tq_status st = tq_rope_check(ctx, r, width);
    double *cs = st ? NULL : angle_table(r);
    if (st || !cs) return st ? st : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < rows; k++) {
        angles(r, pos, k, cs);
        turn_row(r, x + k * width, width, cs, dir);
    }
    free(cs);
    return TQ_OK;
}

tq_status tq_rope_unrotate(tq_ctx *ctx, const tq_rope *r, float *x, size_t rows, uint64_t width,
                           const int32_t *pos)
{
    TQ_NEED_CTX(ctx);
    return turn(ctx, r, x, rows, width, pos, -1.0);
}

tq_status tq_rope_rotate(tq_ctx *ctx, const tq_rope *r, float *x, size_t rows, uint64_t width,
                         const int32_t *pos)
{
    TQ_NEED_CTX(ctx);
    return turn(ctx, r, x, rows, width, pos, 1.0);
}

/* y[width] += sign * b turned by the angles cs, head by head. */
TQ_CLONES_V3 static void add_row(const tq_rope *r, const float *b, float *y, uint64_t width,
                                 const double *cs, float sign)
{
    uint32_t half = r->n_rot / 2;
    for (uint64_t h = 0; h < width; h += r->head_dim) {
        for (uint32_t j = r->n_rot; j < r->head_dim; j++)
            y[h + j] += sign * b[h + j]; /* not turned */
        if (r->pairs == TQ_PAIRS_HALVES) /* each layout its own loop: it vectorizes */
            for (uint32_t i = 0; i < half; i++) {
                double c = cs[i], s = cs[half + i], b0 = b[h + i], b1 = b[h + half + i];
                y[h + i] += sign * (float)(b0 * c - b1 * s);
                y[h + half + i] += sign * (float)(b0 * s + b1 * c);
            }
        else
            for (uint32_t i = 0; i < half; i++) {
                double c = cs[i], s = cs[half + i], b0 = b[h + 2 * i], b1 = b[h + 2 * i + 1];
                y[h + 2 * i] += sign * (float)(b0 * c - b1 * s);
                y[h + 2 * i + 1] += sign * (float)(b0 * s + b1 * c);
            }
    }
}

tq_status tq_rope_add(tq_ctx *ctx, const tq_rope *r, const float *b, float *x, size_t rows,
                      uint64_t width, const int32_t *pos, float sign)
{
    TQ_NEED_CTX(ctx);
    tq_status st = tq_rope_check(ctx, r, width);
    double *cs = st ? NULL : angle_table(r);
    if (st || !cs) return st ? st : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < rows; k++) {
        angles(r, pos, k, cs);
        add_row(r, b, x + k * width, width, cs, sign);
    }
    free(cs);
    return TQ_OK;
}
