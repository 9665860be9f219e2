/* kv_rotation.c - tq_kvsnap_find_rotation (kv_plan.h): which quantized K/V
 * tensors a state stores Hadamard-rotated.  Today's llama.cpp multiplies K
 * and V of a quantized cache (q8_0, q4_0, ...) by a normalized Walsh-
 * Hadamard matrix before storing them, when the head size is a multiple of
 * 64: K in blocks of the largest power of two dividing the head, V in blocks
 * of 64 (llama-kv-cache.cpp, attn_rot_k / attn_rot_v).  Older builds and the
 * fork do not, and a state file does not say, so the rows tell: a model's
 * channels carry unequal energy, rotated ones nearly equal.  Turned back, a
 * q8_0 slot of Gemma 3 270M gets its RoPE offsets and Q-aware scales again:
 * KL over the top-20 after a restore 0.0317 -> 0.0062 (2048 tokens,
 * tests/oracle/server_slots.py's set-up, balanced). */
#include "kv_plan.h"
#include "kv_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLE_ROWS = 256 }; /* rows spread over the cells: energies settle well before */

/* exp(mean log e) / mean e over the n channel energies: 1 when equal */
static double flatness(const double *e, uint64_t n)
{
    double lg = 0;
    double sum = 0;
    for (uint64_t j = 0; j < n; j++) {
        lg += log(e[j] + 1e-30);
        sum += e[j];
    }
    return sum > 0 ? exp(lg / (double)n) / (sum / (double)n) : 1.0;
}

/* 1 when the tensor's rows turned back in blocks of n are far less flat than
 * as stored: the store rotated them. */
static tq_status looks_rotated(tq_ctx *ctx, const tq_kv_tensor *kt, uint32_t cells, uint32_t n,
                               int *yes)
{
    *yes = 0;
    uint32_t rows = cells < SAMPLE_ROWS ? cells : SAMPLE_ROWS;
    float *x = malloc(kt->width * sizeof *x);     /* [width]: one row */
    double *e = calloc(2 * kt->width, sizeof *e); /* [2][width]: energies as stored, turned back */
    if (!x || !e) {
        free(x);
        free(e);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_status st = TQ_OK;
    for (uint32_t k = 0; k < rows && !st; k++) {
        uint32_t row = (uint32_t)((uint64_t)k * cells / rows);
        st = tq_kv_view_read_rows(ctx, kt, cells, row, 1, x);
        for (uint64_t j = 0; !st && j < kt->width; j++) e[j] += (double)x[j] * x[j];
        if (!st) st = tq_hadamard_blocks(ctx, n, x, kt->width);
        for (uint64_t j = 0; !st && j < kt->width; j++) e[kt->width + j] += (double)x[j] * x[j];
    }
    /* a margin, so that rows with no structure either way stay as stored */
    if (!st) *yes = flatness(e + kt->width, kt->width) < 0.8 * flatness(e, kt->width);
    free(x);
    free(e);
    return st;
}

/* With a base: its records' rotations (rows are read through them). */
static tq_status take_base(tq_ctx *ctx, tq_kv_view *v, const tqkv_meta *b)
{
    tq_status st = TQ_OK;
    for (uint32_t k = 0; k < b->n_tensors && !st; k++) {
        const tqkv_record *t = &b->t[k];
        if (t->hadamard)
            st = tq_kv_view_set_hadamard(ctx, v, t->kv_state, t->stream, t->layer, t->is_v,
                                         t->hadamard);
    }
    return st;
}

/* Every quantized K (is_v 0) or V tensor that llama.cpp would rotate: its
 * block, 0 when it would not (or the tensor cannot tell). */
static uint32_t block_of(const tq_kv_stream *sr, uint32_t l, int is_v, uint32_t d)
{
    if (is_v && !sr->v) return 0; /* an MLA cache: no V */
    const tq_kv_tensor *kt = is_v ? &sr->v[l] : &sr->k[l];
    uint32_t n = is_v ? 64 : d & (~d + 1); /* K: the largest power of two in d; V: 64 */
    if (n > TQ_RHT_MAX) n = TQ_RHT_MAX;
    if (!sr->cell_count || kt->type->block <= 1 || kt->type->dtype < 0 || kt->transposed ||
        kt->width % n)
        return 0;
    return n;
}

/* Votes of the quantized K (is_v 0) or V tensors: rotated, and all. */
static tq_status vote(tq_ctx *ctx, const tq_kv_view *v, int is_v, uint32_t d, uint32_t *yes,
                      uint32_t *all)
{
    *yes = 0;
    *all = 0;
    for (uint32_t s = 0; s < tq_kv_view_n_kv(v); s++)
        for (uint32_t r = 0; r < tq_kv_view_kv(v, s)->n_stream; r++) {
            const tq_kv_stream *sr = &tq_kv_view_kv(v, s)->streams[r];
            for (uint32_t l = 0; l < sr->n_layer; l++) {
                uint32_t n = block_of(sr, l, is_v, d);
                int rotated = 0;
                if (!n) continue;
                tq_status st =
                    looks_rotated(ctx, is_v ? &sr->v[l] : &sr->k[l], sr->cell_count, n, &rotated);
                if (st) return st;
                *yes += (uint32_t)rotated;
                (*all)++;
            }
        }
    return TQ_OK;
}

/* One producer stored every tensor, so one verdict: the K tensors' majority
 * (a model's K channels are far from flat; V's can be nearly flat, 7 of
 * Gemma's 18 V layers told), V's where K is not quantized. */
tq_status tq_kvsnap_find_rotation(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_settings *o,
                                  uint32_t *found)
{
    *found = 0;
    if (o->base) return take_base(ctx, v, tqkv_meta_of(o->base));
    tq_head_source from;
    uint32_t d = tq_arch_head_size((uint32_t)o->head_dim, o->model, tq_kv_view_head_dim(v),
                                   tq_kv_view_arch(v), &from);
    if (!d || d % 64) return TQ_OK; /* llama.cpp rotates heads of a multiple of 64 only */
    uint32_t yes, all;
    tq_status st = vote(ctx, v, 0, d, &yes, &all);
    if (!st && !all) st = vote(ctx, v, 1, d, &yes, &all);
    if (st || 2 * yes <= all) return st;
    for (uint32_t s = 0; s < tq_kv_view_n_kv(v) && !st; s++)
        for (uint32_t r = 0; r < tq_kv_view_kv(v, s)->n_stream && !st; r++) {
            const tq_kv_stream *sr = &tq_kv_view_kv(v, s)->streams[r];
            for (uint32_t l = 0; l < sr->n_layer && !st; l++)
                for (int is_v = 0; is_v < 2 && !st; is_v++) {
                    uint32_t n = block_of(sr, l, is_v, d);
                    if (n) st = tq_kv_view_set_hadamard(ctx, v, s, r, l, is_v, n);
                    *found += n != 0;
                }
        }
    return st;
}
