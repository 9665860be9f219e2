/* tqkv_record.c - a .tqkv record's facts that the writer, the reader and the snapshot
 * pipeline share: its chunks' rows, its coarse and sink rows, its block codec's descriptor,
 * its transform's components, gains and basis rounding (tqkv.h, TQKV.md). */
#include "tqkv_bytes.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REC(f) {(int)offsetof(tqkv_record, f), (int)sizeof(((tqkv_record *)0)->f)}
/* clang-format off */
const tqkv_rec_field tqkv_rec_fields[] = {
    REC(file_off), REC(bytes), REC(kv_state), REC(stream), REC(layer), REC(is_v), REC(transposed),
    {TQKV_REC_CODEC, 1}, REC(bits), REC(norm_correction), {TQKV_REC_FLAGS, 3},
    REC(group), REC(seed), REC(cells), REC(width), REC(type_id), REC(rows_per_chunk),
    REC(row_start),
};
/* clang-format on */
#undef REC
const int tqkv_n_rec_fields = (int)(sizeof tqkv_rec_fields / sizeof tqkv_rec_fields[0]);

void tqkv_meta_free(tqkv_meta *m)
{
    free(m->tokens);
    free(m->arch);
    free(m->base_name);
    free(m->skeleton);
    for (uint32_t i = 0; m->t && i < m->n_tensors; i++) {
        free(m->t[i].innerq);
        free(m->t[i].offset);
        free(m->t[i].rope_pos);
        for (uint64_t h = 0; m->t[i].klt && h < m->t[i].width / m->t[i].group; h++)
            free(m->t[i].klt[h].basis);
        free(m->t[i].klt);
    }
    free(m->t);
    memset(m, 0, sizeof *m);
}

int tqkv_codec_desc(const tqkv_record *t, tq_codec_desc *d)
{
    memset(d, 0, sizeof *d);
    if (t->codec == TQKV_CODEC_TQ) {
        if (!tq_is_pow2(t->group) || t->group < 8 || t->group > 512 || t->bits < 1 || t->bits > 8 ||
            t->norm_correction > 1 || t->uniform > 1 || (t->uniform && t->bits < 2))
            return -1;
        *d = (tq_codec_desc){TQ_CODEC_TQ, t->group, t->bits,   t->norm_correction,
                             t->seed,     0,        t->uniform, 0};
        return 0;
    }
    if (t->codec == TQKV_CODEC_ANGLE ||
        t->codec == TQKV_CODEC_PROD) { /* lib/TURBOANGLE.md, lib/TQ_PROD.md */
        int angle = t->codec == TQKV_CODEC_ANGLE;
        if (!tq_is_pow2(t->group) || t->group < 8 || t->group > 512 || t->bits < (angle ? 1 : 2) ||
            t->bits > 8 || t->norm_correction > (angle ? 1 : 0) || t->radius_bits > (angle ? 8 : 0))
            return -1;
        *d = (tq_codec_desc){angle ? TQ_CODEC_ANGLE : TQ_CODEC_PROD,
                             t->group,
                             t->bits,
                             t->norm_correction,
                             t->seed,
                             t->radius_bits,
                             0,
                             0};
        return 0;
    }
    if (t->codec == TQKV_CODEC_TURBO) { /* the fork's blocks: fixed group, signs, norm correction */
        if (t->group != 128 || t->bits < 2 || t->bits > 4 || t->norm_correction != 1 || t->seed)
            return -1;
        d->kind = (tq_codec_kind)(TQ_CODEC_TURBO2 + (t->bits - 2));
        d->fork_rev = 0; /* a snapshot's turbo blocks are the first revision's (TQKV.md) */
        return 0;
    }
    return -1;
}

/* The KLT codec's transforms: per head u32 m, f32 step, m x group f16. */


/* A row's exponent e: 2^e above its largest value (frexp: exact); INT32_MIN for a zero row. */
int tqkv_basis8_exp(const float *row, uint32_t d)
{
    float top = 0.0f;
    for (uint32_t j = 0; j < d; j++)
        if (fabsf(row[j]) > top) top = fabsf(row[j]);
    int e;
    if (top == 0.0f || frexpf(top, &e) == 0.0f) return INT32_MIN;
    return e < TQKV_BASIS8_MIN_EXP ? INT32_MIN : e;
}

void tqkv_basis_round(int basis8, float *row, uint32_t d)
{
    if (!basis8) {
        for (uint32_t j = 0; j < d; j++) row[j] = tq_fp16_to_fp32(tq_fp32_to_fp16(row[j]));
        return;
    }
    int e = tqkv_basis8_exp(row, d);
    for (uint32_t j = 0; j < d; j++) {
        float q = e == INT32_MIN ? 0.0f : nearbyintf(ldexpf(row[j], 7 - e));
        if (q > 127.0f) q = 127.0f;
        if (q < -127.0f) q = -127.0f;
        row[j] = e == INT32_MIN ? 0.0f : ldexpf(q, e - 7);
    }
}

uint64_t tqkv_klt_rans_bound(const tqkv_record *t, uint32_t nrows)
{
    /* each head's gains a stream; each component: its stream, then 2 bytes an escaped index */
    uint64_t gains = t->klt_gain ? t->width / t->group * tq_rans_bound(nrows) : 0;
    return gains + tqkv_klt_components(t) * (tq_rans_bound(nrows) + 2ull * nrows);
}

/* 2^(r/8) and 2^((r + 1/2)/8), r = 0..7: a gain's mantissa and the border above it */
static const float gain_frac[8] = {1.0f,        1.09050773f, 1.18920712f, 1.29683955f,
                                   1.41421356f, 1.54221083f, 1.68179283f, 1.83400809f};
static const float gain_mid[8] = {1.04427378f, 1.13878863f, 1.24185781f, 1.35425503f,
                                  1.47682615f, 1.61049033f, 1.75625216f, 1.91520656f};

/* 2^e for e in [-126, 127], built from its exponent bits: exact, as ldexpf's, without its
 * call, which with the codes' search was a tenth of SmolLM2's encode (kv_long_speed.md) */
static float pow2f(int e)
{
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float tqkv_gain(uint8_t code)
{
    if (!code) return 0.0f;
    return gain_frac[code % 8] * pow2f(code / 8 - 16);
}

uint8_t tqkv_gain_code(float norm)
{
    if (!(norm > 0.0f)) return 0;
    if (isinf(norm)) return 255;
    /* the largest code whose lower border reaches norm: norm = m 2^e, m in [1, 2), and the
       borders of exponent e (gain_mid[k] 2^e, the codes 8 (e + 16) + k + 1) scale m's
       compares exactly; below gain_mid[0] it is the code of exponent e - 1's last border */
    int e;
    float m = 2.0f * frexpf(norm, &e);
    int code = 8 * (e - 1 + 16);
    for (int k = 0; k < 8; k++) code += m >= gain_mid[k];
    if (code < 1) return 1;
    return (uint8_t)(code > 255 ? 255 : code);
}

uint64_t tqkv_klt_components(const tqkv_record *t)
{
    uint64_t n = 0;
    for (uint64_t h = 0; t->klt && h < t->width / t->group; h++) n += t->klt[h].m;
    return n;
}

/* Whether record t needs a version 3 extension (TQKV.md, "Extensions"). */
int tqkv_has_extension(const tqkv_record *t)
{
    return t->sink_rows || t->offset || t->planes || t->klt || t->coarse_end || t->hadamard ||
           t->share_at || t->base_from || t->from_base;
}

uint32_t tqkv_record_row(const tqkv_record *t, uint32_t c)
{
    if (c < t->row_start) return t->share_at + c;
    uint32_t own = c - t->row_start;
    return own < t->share_at ? own : c;
}

/* Where t's stored rows past the sinks start, and where its coarse ones end (the first row of
 * the fine ones). */
static void record_parts(const tqkv_record *t, uint32_t *from, uint32_t *fine)
{
    *from = t->row_start > t->sink_rows ? t->row_start : t->sink_rows;
    *fine = t->coarse_end > *from ? t->coarse_end : *from;
    if (*fine > t->cells) *fine = t->cells;
}

/* Chunk j of a part (rows_per_chunk R each, or growing from TQKV_GROW_ROWS, doubling, to R):
 * its rows. */
static uint32_t part_chunk_rows(const tqkv_record *t, uint32_t j)
{
    uint32_t r = t->rows_per_chunk;
    if (!t->chunks_grow || r <= TQKV_GROW_ROWS) return r;
    if (j >= 31 || (TQKV_GROW_ROWS << j) >= r) return r;
    return TQKV_GROW_ROWS << j;
}

/* The chunks of a part of n rows; with *row0 (may be NULL) the first row of its chunk k, from
 * 0, and *nrows its rows. */
static uint32_t part_chunks(const tqkv_record *t, uint32_t n, uint32_t k, uint32_t *row0,
                            uint32_t *nrows)
{
    uint32_t j = 0;
    uint32_t at = 0;
    for (; at < n; j++) {
        uint32_t len = part_chunk_rows(t, j);
        if (len > n - at) len = n - at;
        if (row0 && j == k) {
            *row0 = at;
            *nrows = len;
        }
        at += len;
    }
    return j;
}

uint32_t tqkv_record_n_chunks(const tqkv_record *t)
{
    uint32_t from, fine, sink = t->row_start < t->sink_rows;
    record_parts(t, &from, &fine);
    uint32_t rows = t->cells > fine ? t->cells - fine : 0;
    return sink + part_chunks(t, fine - from, 0, NULL, NULL) + part_chunks(t, rows, 0, NULL, NULL);
}

void tqkv_record_chunk_rows(const tqkv_record *t, uint32_t k, uint32_t *row0, uint32_t *nrows)
{
    uint32_t from, fine, sink = t->row_start < t->sink_rows;
    record_parts(t, &from, &fine);
    if (sink && k == 0) {
        *row0 = 0;
        *nrows = t->sink_rows;
        return;
    }
    uint32_t n_coarse = part_chunks(t, fine - from, 0, NULL, NULL);
    uint32_t end = t->cells;
    k -= sink;
    if (k < n_coarse) {
        end = fine;
    } else {
        from = fine;
        k -= n_coarse;
    }
    *row0 = 0;
    *nrows = 0;
    part_chunks(t, end - from, k, row0, nrows);
    *row0 += from;
}

int tqkv_chunk_is_coarse(const tqkv_record *t, uint32_t row0)
{
    return t->codec != TQKV_CODEC_RAW && row0 >= t->sink_rows && row0 < t->coarse_end;
}

int tqkv_chunk_rans(const tqkv_record *t, uint32_t row0)
{
    return t->klt_rans && (!t->klt_rans_coarse || tqkv_chunk_is_coarse(t, row0));
}

void tqkv_record_coarse(const tqkv_record *t, tqkv_record *out)
{
    *out = *t;
    out->coarse_end = 0;
    out->klt_rans_coarse = 0; /* its chunks are all coarse */
    if (t->codec == TQKV_CODEC_KLT) {
        out->klt_step_scale = t->coarse_scale;
        return;
    }
    out->bits = t->coarse_bits;
    out->uniform = t->coarse_uniform;
    out->norm_correction = t->coarse_nc;
    out->planes = t->coarse_planes;
}

int tqkv_chunk_is_sink(const tqkv_record *t, uint32_t row0)
{
    return t->codec != TQKV_CODEC_RAW && row0 < t->sink_rows;
}
