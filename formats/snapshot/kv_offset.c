/* kv_offset.c - K's offset before coding (kv_plan_parts.h, tq_kvsnap_fit_offset). */
#include "kv_plan_parts.h"

#include <stdlib.h>
#include <string.h>

/* K's offset over the coded cells (past the sinks): a part every cell
 * would otherwise code again (real K caches carry one: 14-71% of K's energy
 * in Gemma 3 270M's layers as a plain mean).  Two forms, the one that leaves
 * less energy (InnerQ-scaled, as the codec sees it) wins:
 * - the per-channel mean of the rows (post-RoPE), in the scaled domain;
 * - RoPE-aware: b = the mean of R(pos)^T k, K's pre-RoPE mean, and each cell
 *   codes k - R(pos) b (where the model's RoPE is known: 1.5-7.5x less energy
 *   than the plain mean leaves in Gemma's sliding-window layers, where RoPE
 *   turns most channels through many periods and averages their mean out).
 * Kept only where it pays, as measured by the KL of restores: where it
 * removes at least the preset's share of K's energy (Gaussian K without one gained
 * nothing) and heads are large enough (stories260K's heads of 8 lost; kv_presets.c os, oh). */
enum { OFFSET_STEP = 256 };

typedef struct offset_sums {
    double *mean, *pre; /* [width]: sums of scaled rows, of unscaled pre-RoPE rows */
    double *sq;         /* [width]: sums of squares, per channel (vectorized), then added up */
    double energy, resid_rope;
} offset_sums;

static float iq_scale(const tqkv_record *t, uint64_t j)
{
    return t->innerq ? t->innerq[j % t->innerq_n] : 1.0f;
}

/* Pass 1: the sums; rope NULL: the plain mean only.  scale[width]: the InnerQ scales. */
static tq_status offset_pass1(tq_ctx *ctx, const src_tensor *s, const tqkv_record *t,
                              const tq_rope *rope, const int32_t *pos, const float *scale,
                              float *rows, offset_sums *o)
{
    tq_status st = TQ_OK;
    for (uint32_t c0 = t->sink_rows; !st && c0 < t->cells; c0 += OFFSET_STEP) {
        uint32_t nr = t->cells - c0 < OFFSET_STEP ? t->cells - c0 : OFFSET_STEP;
        st = tq_kv_view_read_rows(ctx, s->kt, t->cells, c0, nr, rows);
        for (uint32_t r = 0; !st && r < nr; r++) {
            const float *row = rows + (size_t)r * t->width;
            for (uint64_t j = 0; j < t->width; j++) {
                double x = row[j] * scale[j];
                o->mean[j] += x;
                o->sq[j] += x * x;
            }
        }
        if (!st && rope) st = tq_rope_unrotate(ctx, rope, rows, nr, t->width, pos + c0);
        for (uint32_t r = 0; !st && rope && r < nr; r++) /* the channels apart: vectorized */
            for (uint64_t j = 0; j < t->width; j++) o->pre[j] += rows[(size_t)r * t->width + j];
    }
    return st;
}

/* Pass 2: the energy k - R(pos) b leaves, scaled; from every PASS2_EVERY-th block of rows
 * where there are many (it only chooses between the two forms: the Llama-8B-shaped state's
 * plan with a model spent a third of its time in the two passes), scaled to all of them. */
enum { PASS2_EVERY = 4, PASS2_ALL_BELOW = 2048 };

static tq_status offset_pass2(tq_ctx *ctx, const src_tensor *s, const tqkv_record *t,
                              const tq_rope *rope, const int32_t *pos, const float *b,
                              const float *scale, float *rows, offset_sums *o)
{
    tq_status st = TQ_OK;
    uint32_t every = t->cells - t->sink_rows < PASS2_ALL_BELOW ? 1 : PASS2_EVERY;
    uint64_t counted = 0;
    for (uint32_t c0 = t->sink_rows; !st && c0 < t->cells; c0 += every * OFFSET_STEP) {
        uint32_t nr = t->cells - c0 < OFFSET_STEP ? t->cells - c0 : OFFSET_STEP;
        counted += nr;
        st = tq_kv_view_read_rows(ctx, s->kt, t->cells, c0, nr, rows);
        if (!st) st = tq_rope_add(ctx, rope, b, rows, nr, t->width, pos + c0, -1.0f);
        for (uint32_t r = 0; !st && r < nr; r++) {
            const float *row = rows + (size_t)r * t->width;
            for (uint64_t j = 0; j < t->width; j++) {
                double x = row[j] * scale[j];
                o->sq[j] += x * x;
            }
        }
    }
    double all = t->cells - t->sink_rows;
    for (uint64_t j = 0; !st && every > 1 && j < t->width; j++) o->sq[j] *= all / (double)counted;
    return st;
}

/* The per-channel squares added up, and cleared. */
static double offset_energy(offset_sums *o, uint64_t width)
{
    double e = 0;
    for (uint64_t j = 0; j < width; j++) {
        e += o->sq[j];
        o->sq[j] = 0;
    }
    return e;
}

tq_status tq_kvsnap_fit_offset(tq_ctx *ctx, const src_tensor *s, tqkv_record *t,
                               const tq_rope *rope, const int32_t *pos)
{
    /* o.mean, o.pre: [width] sums; rows: [OFFSET_STEP][width]; b, t->offset: [width] */
    offset_sums o = {calloc(t->width, sizeof(double)), calloc(t->width, sizeof(double)),
                     calloc(t->width, sizeof(double)), 0, 0};
    float *rows = malloc((size_t)OFFSET_STEP * t->width * sizeof *rows);
    float *b = malloc(t->width * sizeof *b);
    float *scale = malloc(t->width * sizeof *scale); /* [width]: InnerQ's scale per channel */
    t->offset = malloc(t->width * sizeof *t->offset);
    tq_status st = TQ_OK;
    if (!o.mean || !o.pre || !o.sq || !rows || !b || !scale || !t->offset)
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t j = 0; !st && j < t->width; j++) scale[j] = iq_scale(t, j);
    double n = t->cells - t->sink_rows, mean2 = 0;
    if (!st) st = offset_pass1(ctx, s, t, rope, pos, scale, rows, &o);
    if (!st) o.energy = offset_energy(&o, t->width);
    for (uint64_t j = 0; !st && j < t->width; j++) {
        t->offset[j] = (float)(o.mean[j] / n);
        b[j] = (float)(o.pre[j] / n);
        mean2 += (double)t->offset[j] * t->offset[j];
    }
    double resid_mean = o.energy - mean2 * n;
    if (!st && rope) st = offset_pass2(ctx, s, t, rope, pos, b, scale, rows, &o);
    if (!st && rope) o.resid_rope = offset_energy(&o, t->width);
    int use_rope = !st && rope && o.resid_rope < resid_mean;
    if (use_rope && (t->rope_pos = malloc(4ull * t->cells))) {
        memcpy(t->offset, b, t->width * sizeof *b);
        memcpy(t->rope_pos, pos, 4ull * t->cells);
        t->rope = *rope;
    } else if (use_rope) {
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    double keep = 1 - TQ_KVSNAP_OFFSET_SHARE / 100.0; /* the energy an offset may leave */
    if (st || (use_rope ? o.resid_rope : resid_mean) > keep * o.energy ||
        t->group < (uint32_t)TQ_KVSNAP_OFFSET_HEAD) {
        free(t->offset);
        free(t->rope_pos);
        t->offset = NULL;
        t->rope_pos = NULL;
    }
    free(o.mean);
    free(o.pre);
    free(o.sq);
    free(rows);
    free(b);
    free(scale);
    return st;
}
