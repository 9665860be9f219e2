/* tqkv.c - .tqkv container: writer and verifying reader (TQKV.md). */
#include "file_io.h"
#include "tqkv.h"
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

static uint32_t tq_max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

#define HDR_LEN     32
#define TRAILER_LEN 32
#define CHUNK_HDR   44
#define TENSOR_REC  72
#define CHUNK_MAGIC 0x4b435154u /* "TQCK" */
/* Decoded sizes a snapshot may claim (a hostile file must not make the
 * reader allocate what it wants): one chunk, and the skeleton. */
#define MAX_PIECE (1ull << 30)
static const char MAGIC[4] = {'T', 'Q', 'K', 'V'};
static const char END_MAGIC[8] = {'T', 'Q', 'K', 'V', 'E', 'N', 'D', 0};

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
                             t->seed,     0,        t->uniform};
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
                             0};
        return 0;
    }
    if (t->codec == TQKV_CODEC_TURBO) { /* the fork's blocks: fixed group, signs, norm correction */
        if (t->group != 128 || t->bits < 2 || t->bits > 4 || t->norm_correction != 1 || t->seed)
            return -1;
        d->kind = (tq_codec_kind)(TQ_CODEC_TURBO2 + (t->bits - 2));
        return 0;
    }
    return -1;
}

tq_codec *tqkv_record_codec(tq_ctx *ctx, const tqkv_record *t)
{
    tq_codec_desc d;
    tq_codec *c = NULL;
    if (!tqkv_record_has_blocks(t)) return NULL;
    if (tqkv_codec_desc(t, &d)) {
        tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "layer %u: codec %u has no block codec", t->layer,
                         t->codec);
        return NULL;
    }
    tq_codec_new(ctx, &d, &c);
    return c;
}

/* ------------------------------------------------------------ bytes */

typedef struct bbuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} bbuf;

static void bput(bbuf *b, const void *d, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2 + 256;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
#define PUTV(b, v)                                                                                 \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        bput(b, &v_, sizeof v_);                                                                   \
    } while (0)

/* ------------------------------------------------------------ writer */

struct tqkv_writer {
    tq_ctx *ctx;
    FILE *f;
    uint64_t pos;
    uint64_t *index;
    uint64_t n_chunks, cap_chunks;
    int failed;
};

uint64_t tqkv_writer_bytes(const tqkv_writer *w) { return w->pos; }
uint64_t tqkv_writer_final_size(const tqkv_writer *w)
{
    return w->pos + 8 * w->n_chunks + TRAILER_LEN;
}

static tq_status wput(tqkv_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
        return tq_ctx_set_error(w->ctx, TQ_ERR_IO, "writing the snapshot failed: %s",
                                strerror(errno));
    }
    w->pos += n;
    return TQ_OK;
}

/* A pre-RoPE offset's rotation, then the cells' positions as runs of
 * consecutive positions: (first row, its position) pairs. */
static void put_rope(bbuf *b, const tqkv_record *t)
{
    uint32_t pairs = (uint32_t)t->rope.pairs, runs = 0;
    PUTV(b, t->rope.head_dim);
    PUTV(b, t->rope.n_rot);
    PUTV(b, pairs);
    PUTV(b, t->rope.freq_base);
    PUTV(b, t->rope.freq_scale);
    for (uint32_t r = 0; r < t->cells; r++)
        runs += !r || (int64_t)t->rope_pos[r] != (int64_t)t->rope_pos[r - 1] + 1;
    PUTV(b, runs);
    for (uint32_t r = 0; r < t->cells; r++)
        if (!r || (int64_t)t->rope_pos[r] != (int64_t)t->rope_pos[r - 1] + 1) {
            PUTV(b, r);
            PUTV(b, t->rope_pos[r]);
        }
}

/* The KLT codec's transforms: per head u32 m, f32 step, m x group f16. */
enum { BASIS8_MIN_EXP = -32 };

/* A row's exponent e: 2^e above its largest value (frexp: exact); INT32_MIN for a zero row. */
static int basis8_exp(const float *row, uint32_t d)
{
    float top = 0.0f;
    for (uint32_t j = 0; j < d; j++)
        if (fabsf(row[j]) > top) top = fabsf(row[j]);
    int e;
    if (top == 0.0f || frexpf(top, &e) == 0.0f) return INT32_MIN;
    return e < BASIS8_MIN_EXP ? INT32_MIN : e;
}

void tqkv_basis_round(int basis8, float *row, uint32_t d)
{
    if (!basis8) {
        for (uint32_t j = 0; j < d; j++) row[j] = tq_fp16_to_fp32(tq_fp32_to_fp16(row[j]));
        return;
    }
    int e = basis8_exp(row, d);
    for (uint32_t j = 0; j < d; j++) {
        float q = e == INT32_MIN ? 0.0f : nearbyintf(ldexpf(row[j], 7 - e));
        if (q > 127.0f) q = 127.0f;
        if (q < -127.0f) q = -127.0f;
        row[j] = e == INT32_MIN ? 0.0f : ldexpf(q, e - 7);
    }
}

/* A head's basis rows: fp16 values, or with basis8 per row an i8 exponent (BASIS8_MIN_EXP
 * less one for a zero row) and group i8 values (tqkv_basis_round made them exact). */
static void put_basis(bbuf *b, const tqkv_record *t, const tqkv_klt *k)
{
    for (uint32_t r = 0; r < k->m; r++) {
        const float *row = k->basis + (size_t)r * t->group;
        int e = t->klt_basis8 ? basis8_exp(row, t->group) : 0;
        int8_t e8 = (int8_t)(e == INT32_MIN ? BASIS8_MIN_EXP - 1 : e);
        if (t->klt_basis8) PUTV(b, e8);
        for (uint32_t j = 0; j < t->group; j++) {
            uint16_t v = tq_fp32_to_fp16(row[j]);
            int8_t q = (int8_t)(e == INT32_MIN ? 0 : (int)ldexpf(row[j], 7 - e));
            if (t->klt_basis8)
                PUTV(b, q);
            else
                PUTV(b, v);
        }
    }
}

static void put_klt(bbuf *b, const tqkv_record *t)
{
    for (uint64_t h = 0; h < t->width / t->group; h++) {
        const tqkv_klt *k = &t->klt[h];
        PUTV(b, k->m);
        PUTV(b, k->step);
        put_basis(b, t, k);
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

float tqkv_gain(uint8_t code)
{
    if (!code) return 0.0f;
    return ldexpf(gain_frac[code % 8], code / 8 - 16);
}

uint8_t tqkv_gain_code(float norm)
{
    if (!(norm > 0.0f)) return 0;
    uint32_t lo = 1, hi = 255; /* the largest code whose lower border norm reaches */
    while (lo < hi) {
        uint32_t c = (lo + hi + 1) / 2;
        float below = ldexpf(gain_mid[(c - 1) % 8], (int)(c - 1) / 8 - 16);
        if (norm >= below)
            lo = c;
        else
            hi = c - 1;
    }
    return (uint8_t)lo;
}

uint64_t tqkv_klt_components(const tqkv_record *t)
{
    uint64_t n = 0;
    for (uint64_t h = 0; t->klt && h < t->width / t->group; h++) n += t->klt[h].m;
    return n;
}

/* Whether record t needs a version 3 extension (TQKV.md, "Extensions"). */
static int has_extension(const tqkv_record *t)
{
    return t->sink_rows || t->offset || t->planes || t->klt || t->coarse_end || t->hadamard;
}

/* The coarse rows' coding (extension flag bit 4): u32 end, u8 bits, u8 cells (0 Lloyd-Max, 1
 * uniform), u8 norm correction, u8 planes, f32 step scale (KLT; block codecs 0). */
static void put_coarse(bbuf *b, const tqkv_record *t)
{
    uint8_t f[4] = {t->coarse_bits, t->coarse_uniform, t->coarse_nc, t->coarse_planes};
    PUTV(b, t->coarse_end);
    bput(b, f, 4);
    PUTV(b, t->coarse_scale);
}

/* The tensor records and the scales after them; returns the file version
 * they need (older readers still read what needs nothing newer). */
static uint32_t put_records(bbuf *b, const tqkv_meta *m)
{
    PUTV(b, m->n_tensors);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        /* byte 0: bit 0 InnerQ scales follow the records, bit 1 the group was
         * guessed, bits 2-5 the radius bits (angle codec), bit 6 the scales
         * are per head (one per value of the row), bit 7 an extension
         * follows the scales (sink rows, offsets); bytes 1-2: the model
         * layer + 1 (0: not recorded) */
        uint16_t ml = t->model_layer == TQKV_NO_MODEL_LAYER ? 0 : (uint16_t)(t->model_layer + 1);
        int per_head = t->innerq && t->innerq_n != t->group;
        uint8_t rec_flags[3] = {(uint8_t)((t->innerq != NULL) | (t->group_guessed ? 2 : 0) |
                                          (t->radius_bits & 15) << 2 | (per_head ? 64 : 0) |
                                          (has_extension(t) ? 128 : 0)),
                                (uint8_t)ml, (uint8_t)(ml >> 8)};
        PUTV(b, t->file_off);
        PUTV(b, t->bytes);
        PUTV(b, t->kv_state);
        PUTV(b, t->stream);
        PUTV(b, t->layer);
        PUTV(b, t->is_v);
        PUTV(b, t->transposed);
        uint8_t codec = t->uniform ? TQKV_CODEC_TQ_UNIFORM_ID : t->codec;
        PUTV(b, codec);
        PUTV(b, t->bits);
        PUTV(b, t->norm_correction);
        bput(b, rec_flags, 3);
        PUTV(b, t->group);
        PUTV(b, t->seed);
        PUTV(b, t->cells);
        PUTV(b, t->width);
        PUTV(b, t->type_id);
        PUTV(b, t->rows_per_chunk);
        PUTV(b, t->row_start);
    }
    int any_innerq = 0, any_v3 = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        if (m->t[i].innerq) {
            bput(b, m->t[i].innerq, 4ull * m->t[i].innerq_n);
            any_innerq = 1;
        }
        any_v3 |= has_extension(&m->t[i]) || m->t[i].uniform ||
                  (m->t[i].innerq && m->t[i].innerq_n != m->t[i].group) ||
                  m->t[i].model_layer != TQKV_NO_MODEL_LAYER || m->t[i].group_guessed ||
                  m->t[i].codec == TQKV_CODEC_ANGLE || m->t[i].codec == TQKV_CODEC_PROD ||
                  m->t[i].codec == TQKV_CODEC_KLT;
    }
    for (uint32_t i = 0; i < m->n_tensors; i++) { /* version 3: the extensions, in tensor order */
        const tqkv_record *t = &m->t[i];
        if (!has_extension(t)) continue;
        uint32_t flags = (t->offset ? 1 : 0) | (t->offset && t->rope_pos ? 2 : 0) |
                         (t->planes ? 4 : 0) | (t->klt ? 8 : 0) | (t->coarse_end ? 16 : 0) |
                         (t->hadamard ? 32 : 0) | (t->klt && t->klt_rans ? 64 : 0) |
                         (t->klt && t->klt_gain ? 128 : 0) | (t->klt && t->klt_basis8 ? 256 : 0);
        PUTV(b, t->sink_rows);
        PUTV(b, flags);
        if (t->offset) bput(b, t->offset, 4ull * t->width);
        if (flags & 2) put_rope(b, t);
        if (t->klt) put_klt(b, t);
        if (t->coarse_end) put_coarse(b, t);
        if (t->hadamard) PUTV(b, t->hadamard); /* bit 5: u32 rotation block */
    }
    if (any_v3) return 3;
    return any_innerq ? 2 : 1;
}

/* Where t's stored rows past the sinks start, and where its coarse ones end (the first row of
 * the fine ones). */
static void record_parts(const tqkv_record *t, uint32_t *from, uint32_t *fine)
{
    *from = t->row_start > t->sink_rows ? t->row_start : t->sink_rows;
    *fine = t->coarse_end > *from ? t->coarse_end : *from;
    if (*fine > t->cells) *fine = t->cells;
}

uint32_t tqkv_record_n_chunks(const tqkv_record *t)
{
    uint32_t from, fine, sink = t->row_start < t->sink_rows;
    record_parts(t, &from, &fine);
    uint32_t rows = t->cells > fine ? t->cells - fine : 0;
    return sink + (fine - from + t->rows_per_chunk - 1) / t->rows_per_chunk +
           (rows + t->rows_per_chunk - 1) / t->rows_per_chunk;
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
    uint32_t n_coarse = (fine - from + t->rows_per_chunk - 1) / t->rows_per_chunk;
    uint32_t end = t->cells;
    k -= sink;
    if (k < n_coarse) {
        end = fine;
    } else {
        from = fine;
        k -= n_coarse;
    }
    *row0 = from + k * t->rows_per_chunk;
    *nrows = end - *row0 < t->rows_per_chunk ? end - *row0 : t->rows_per_chunk;
}

int tqkv_chunk_is_coarse(const tqkv_record *t, uint32_t row0)
{
    return t->codec != TQKV_CODEC_RAW && row0 >= t->sink_rows && row0 < t->coarse_end;
}

void tqkv_record_coarse(const tqkv_record *t, tqkv_record *out)
{
    *out = *t;
    out->coarse_end = 0;
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

tq_status tqkv_write_begin(tq_ctx *ctx, FILE *f, const tqkv_meta *m, tqkv_writer **out)
{
    *out = NULL;
    bbuf b = {0};
    uint8_t kind = m->source_kind, fp = m->has_fingerprint;
    uint16_t pad = 0;
    PUTV(&b, kind);
    PUTV(&b, fp);
    PUTV(&b, pad);
    PUTV(&b, m->state_version);
    PUTV(&b, m->source_size);
    PUTV(&b, m->fingerprint);
    PUTV(&b, m->n_tokens);
    bput(&b, m->tokens, 4ull * m->n_tokens);
    uint32_t al = (uint32_t)strlen(m->arch), pl = (uint32_t)strlen(m->profile);
    PUTV(&b, al);
    bput(&b, m->arch, al);
    PUTV(&b, pl);
    bput(&b, m->profile, pl);
    uint32_t bl = m->base_name ? (uint32_t)strlen(m->base_name) : 0;
    PUTV(&b, m->base_id);
    PUTV(&b, bl);
    bput(&b, m->base_name, bl);
    size_t bound = ZSTD_compressBound(m->skeleton_len);
    void *z = malloc(bound ? bound : 1);
    if (!z) {
        free(b.p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    size_t zl = ZSTD_compress(z, bound, m->skeleton, m->skeleton_len, 9);
    if (ZSTD_isError(zl)) {
        free(z);
        free(b.p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "zstd: %s", ZSTD_getErrorName(zl));
    }
    PUTV(&b, m->skeleton_len);
    PUTV(&b, (uint64_t)zl);
    bput(&b, z, zl);
    free(z);
    uint32_t ver = put_records(&b, m);
    if (b.oom) {
        free(b.p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    uint8_t hdr[HDR_LEN];
    uint64_t ml = b.n, mh = XXH64(b.p, b.n, 0);
    memcpy(hdr, MAGIC, 4);
    memcpy(hdr + 4, &ver, 4);
    memcpy(hdr + 8, &ml, 8);
    memcpy(hdr + 16, &mh, 8);
    uint64_t hh = XXH64(hdr, 24, 0);
    memcpy(hdr + 24, &hh, 8);
    tqkv_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(b.p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    w->ctx = ctx;
    w->f = f;
    tq_status st = wput(w, hdr, HDR_LEN);
    if (!st) st = wput(w, b.p, b.n);
    free(b.p);
    if (st) {
        free(w);
        return st;
    }
    *out = w;
    return TQ_OK;
}

/* One zstd frame of the payload, a block ending at each cut: zstd's Huffman
 * stage keeps one table per block, and planes of different statistics (the
 * uniform sign bits, the skewed magnitudes) share one badly.  A plain
 * ZSTD_compress where there are no cuts. */
static size_t zstd_cut(void *dst, size_t cap, const uint8_t *src, size_t len, int level,
                       const uint64_t *cuts, int n_cuts)
{
    if (!n_cuts) return ZSTD_compress(dst, cap, src, len, level);
    ZSTD_CCtx *z = ZSTD_createCCtx();
    if (!z) return (size_t)-1;
    size_t r = ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setPledgedSrcSize(z, len);
    ZSTD_outBuffer o = {dst, cap, 0};
    uint64_t at = 0;
    for (int k = 0; k <= n_cuts && !ZSTD_isError(r); k++) {
        uint64_t end = len; /* after the last cut: the rest */
        if (k < n_cuts) end = cuts[k] > at && cuts[k] < len ? cuts[k] : at;
        ZSTD_inBuffer in = {src + at, end - at, 0};
        ZSTD_EndDirective how = k < n_cuts ? ZSTD_e_flush : ZSTD_e_end;
        do r = ZSTD_compressStream2(z, &o, &in, how);
        while (!ZSTD_isError(r) && r && o.pos < o.size);
        if (!ZSTD_isError(r) && r) r = (size_t)-1; /* dst too small */
        at = end;
    }
    ZSTD_freeCCtx(z);
    return ZSTD_isError(r) ? r : o.pos;
}

tq_status tqkv_chunk_pack(uint32_t ti, uint32_t row0, uint32_t nrows, const void *payload,
                          uint64_t len, int level, const uint64_t *cuts, int n_cuts, uint8_t **out,
                          uint64_t *out_len)
{
    *out = NULL;
    size_t bound = len >= 64 && level > 0 ? ZSTD_compressBound(len) : len;
    uint8_t *buf = malloc(CHUNK_HDR + (bound > len ? bound : len) + 1);
    if (!buf) return TQ_ERR_NOMEM;
    uint8_t *h = buf, *body = buf + CHUNK_HDR;
    uint64_t slen = len;
    uint8_t zstd = 0;
    if (level > 0 && len >= 64) { /* keep zstd only when it saves at least 1/64 */
        size_t zl = zstd_cut(body, bound, payload, len, level, cuts, n_cuts);
        if (!ZSTD_isError(zl) && zl < len - len / 64) {
            slen = zl;
            zstd = 1;
        }
    }
    if (!zstd && len) memcpy(body, payload, len);
    memset(h, 0, CHUNK_HDR);
    uint32_t magic = CHUNK_MAGIC;
    memcpy(h, &magic, 4);
    memcpy(h + 4, &ti, 4);
    memcpy(h + 8, &row0, 4);
    memcpy(h + 12, &nrows, 4);
    h[16] = zstd;
    memcpy(h + 20, &len, 8);
    memcpy(h + 28, &slen, 8);
    XXH64_state_t *xs = XXH64_createState();
    if (!xs) {
        free(buf);
        return TQ_ERR_NOMEM;
    }
    XXH64_reset(xs, 0);
    XXH64_update(xs, h, 36);
    XXH64_update(xs, body, slen);
    uint64_t hash = XXH64_digest(xs);
    XXH64_freeState(xs);
    memcpy(h + 36, &hash, 8);
    *out = buf;
    *out_len = CHUNK_HDR + slen;
    return TQ_OK;
}

tq_status tqkv_write_packed(tqkv_writer *w, const uint8_t *packed, uint64_t len)
{
    if (w->n_chunks == w->cap_chunks) {
        uint64_t cap = w->cap_chunks ? 2 * w->cap_chunks : 256;
        uint64_t *ix = realloc(w->index, cap * sizeof *ix);
        if (!ix) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
        w->index = ix;
        w->cap_chunks = cap;
    }
    w->index[w->n_chunks++] = w->pos;
    return wput(w, packed, len);
}

tq_status tqkv_write_chunk(tqkv_writer *w, uint32_t ti, uint32_t row0, uint32_t nrows,
                           const void *payload, uint64_t len, int level)
{
    uint8_t *pk;
    uint64_t pl;
    if (tqkv_chunk_pack(ti, row0, nrows, payload, len, level, NULL, 0, &pk, &pl))
        return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tqkv_write_packed(w, pk, pl);
    free(pk);
    return st;
}

tq_status tqkv_write_end(tqkv_writer *w)
{
    uint64_t ioff = w->pos, n = w->n_chunks;
    tq_status st = wput(w, w->index, n * 8);
    uint8_t tr[TRAILER_LEN];
    memcpy(tr, &n, 8);
    memcpy(tr + 8, &ioff, 8);
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 0);
    XXH64_update(xs, w->index, n * 8);
    XXH64_update(xs, tr, 16);
    uint64_t h = XXH64_digest(xs);
    XXH64_freeState(xs);
    memcpy(tr + 16, &h, 8);
    memcpy(tr + 24, END_MAGIC, 8);
    if (!st) st = wput(w, tr, TRAILER_LEN);
    if (!st && fflush(w->f))
        st =
            tq_ctx_set_error(w->ctx, TQ_ERR_IO, "writing the snapshot failed: %s", strerror(errno));
    free(w->index);
    free(w);
    return st;
}

void tqkv_writer_abort(tqkv_writer *w)
{
    if (!w) return;
    free(w->index);
    free(w);
}

/* ------------------------------------------------------------ reader */

struct tqkv_reader {
    const uint8_t *map;
    uint64_t size;
    int mapped;
    char *label;
    tqkv_meta meta;
    tqkv_chunk *chunks;
    uint64_t n_chunks;
    uint32_t version;
};

int tqkv_is_snapshot(const void *data, size_t size) { return size >= 4 && !memcmp(data, MAGIC, 4); }
const tqkv_meta *tqkv_meta_of(const tqkv_reader *r) { return &r->meta; }
uint64_t tqkv_n_chunks(const tqkv_reader *r) { return r->n_chunks; }
uint32_t tqkv_version(const tqkv_reader *r) { return r->version; }
const tqkv_chunk *tqkv_chunk_at(const tqkv_reader *r, uint64_t i) { return &r->chunks[i]; }
uint64_t tqkv_size(const tqkv_reader *r) { return r->size; }

void tqkv_close(tqkv_reader *r)
{
    if (!r) return;
    if (r->mapped) tq_unmap_file(r->map, r->size);
    tqkv_meta_free(&r->meta);
    free(r->chunks);
    free(r->label);
    free(r);
}

typedef struct mcur {
    const uint8_t *p;
    uint64_t n, pos;
} mcur;

static int mget(mcur *c, void *v, uint64_t n)
{
    if (n > c->n - c->pos) return -1;
    memcpy(v, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

/* payload bytes a chunk of nrows of tensor t must decode to */
static uint64_t expected_raw(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t nrows,
                             int *ok)
{
    *ok = 1;
    if (tqkv_chunk_is_sink(t, row0)) { /* exactly the sink rows, in the source type */
        *ok = row0 == 0 && nrows == t->sink_rows;
        return t->bytes / t->cells * nrows;
    }
    if (t->codec == TQKV_CODEC_RAW)
        return t->transposed ? t->bytes : t->bytes / tq_max_u32(t->cells, 1) * nrows;
    if (t->codec == TQKV_CODEC_KLT) /* at least a byte an index, and a gain (kv_klt.h) */
        return (tqkv_klt_components(t) + (t->klt_gain ? t->width / t->group : 0)) * nrows;
    tq_codec_desc d;
    size_t bv, bytes;
    if (tqkv_codec_desc(t, &d) || tq_codec_desc_sizes(ctx, &d, &bv, &bytes)) {
        *ok = 0;
        return 0;
    }
    uint64_t bb = bytes, per_row, all;
    if (__builtin_mul_overflow(t->width / t->group, bb, &per_row) ||
        __builtin_mul_overflow(per_row, (uint64_t)nrows, &all)) {
        *ok = 0;
        return 0;
    }
    return all;
}

static tq_status bad(tq_ctx *ctx, const tqkv_reader *r, const char *what, uint64_t at)
{
    return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s: %s: at offset %" PRIu64, r->label, what, at);
}

/* A pre-RoPE offset's rotation and positions (put_rope), expanded to one
 * position per cell. */
static tq_status get_rope(tq_ctx *ctx, const tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint32_t pairs, runs, row, prev = 0;
    int32_t pos;
    uint64_t at = HDR_LEN + c->pos;
    if (mget(c, &t->rope.head_dim, 4) || mget(c, &t->rope.n_rot, 4) || mget(c, &pairs, 4) ||
        mget(c, &t->rope.freq_base, 4) || mget(c, &t->rope.freq_scale, 4) || mget(c, &runs, 4))
        return bad(ctx, r, "RoPE offset truncated", at);
    t->rope.pairs = pairs == TQ_PAIRS_ADJACENT ? TQ_PAIRS_ADJACENT : TQ_PAIRS_HALVES;
    if (pairs != t->rope.pairs || tq_rope_check(ctx, &t->rope, t->width) || t->group < 2 || !runs ||
        runs > t->cells)
        return bad(ctx, r, "bad RoPE offset", at);
    if (!(t->rope_pos = malloc(4ull * t->cells)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < runs; k++) {
        at = HDR_LEN + c->pos;
        if (mget(c, &row, 4) || mget(c, &pos, 4))
            return bad(ctx, r, "RoPE positions truncated", at);
        if (k ? row < prev || row >= t->cells : row != 0)
            return bad(ctx, r, "RoPE position runs out of order", at);
        for (uint32_t q = prev; k && q < row; q++)
            t->rope_pos[q] = (int32_t)((uint32_t)t->rope_pos[q - 1] + 1);
        t->rope_pos[row] = pos;
        prev = row + 1;
    }
    for (uint32_t q = prev; q < t->cells; q++)
        t->rope_pos[q] = (int32_t)((uint32_t)t->rope_pos[q - 1] + 1);
    return TQ_OK;
}

/* One tensor record (TQKV.md), validated against the source it places the
 * tensor in: its rows must follow the previous tensor's (prev_end). */
static tq_status parse_tensor_rec(tq_ctx *ctx, tqkv_reader *r, mcur *cp, tq_type_profile prof,
                                  uint64_t prev_end, tqkv_record *t)
{
    mcur c = *cp;
    const tqkv_meta *m = &r->meta;
    uint8_t rec_flags[3] = {0, 0, 0};
    mget(&c, &t->file_off, 8);
    mget(&c, &t->bytes, 8);
    mget(&c, &t->kv_state, 4);
    mget(&c, &t->stream, 4);
    mget(&c, &t->layer, 4);
    mget(&c, &t->is_v, 1);
    mget(&c, &t->transposed, 1);
    mget(&c, &t->codec, 1);
    mget(&c, &t->bits, 1);
    mget(&c, &t->norm_correction, 1);
    mget(&c, rec_flags, 3);
    int v3 = r->version >= 3;
    if (v3 &&
        t->codec == TQKV_CODEC_TQ_UNIFORM_ID) { /* the tq block with uniform cells: a TQ tensor */
        t->codec = TQKV_CODEC_TQ;
        t->uniform = 1;
    }
    uint8_t innerq = rec_flags[0] & 1,
            extra = v3 ? 0 : rec_flags[0] >> 1; /* bits no version defines */
    uint8_t per_head = v3 && (rec_flags[0] >> 6 & 1);
    t->has_ext = v3 && (rec_flags[0] >> 7); /* its fields follow the scales: read there */
    uint16_t ml = (uint16_t)(rec_flags[1] | rec_flags[2] << 8);
    t->group_guessed = v3 && (rec_flags[0] >> 1 & 1);
    t->radius_bits = v3 ? (rec_flags[0] >> 2) & 15 : 0;
    t->model_layer = r->version >= 3 && ml ? ml - 1u : TQKV_NO_MODEL_LAYER;
    mget(&c, &t->group, 4);
    mget(&c, &t->seed, 8);
    mget(&c, &t->cells, 4);
    mget(&c, &t->width, 8);
    mget(&c, &t->type_id, 4);
    mget(&c, &t->rows_per_chunk, 4);
    mget(&c, &t->row_start, 4);
    uint64_t at = HDR_LEN + c.pos - TENSOR_REC;
    const tq_ggml_type *ty = tq_ggml_type_get(prof, t->type_id);
    if (!ty || !t->cells || !t->width || !t->rows_per_chunk || t->row_start > t->cells ||
        (t->row_start && !m->base_id) ||
        (t->row_start && t->transposed && t->codec == TQKV_CODEC_RAW))
        return bad(ctx, r, "bad tensor record", at);
    if (t->file_off < prev_end || t->bytes > m->source_size ||
        t->file_off > m->source_size - t->bytes)
        return bad(ctx, r, "tensor placement outside the source", at);
    uint64_t row_bytes, total_bytes;
    if (t->is_v > 1 || t->transposed > 1 || t->width % ty->block ||
        __builtin_mul_overflow(t->width / ty->block, (uint64_t)ty->bytes, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, (uint64_t)t->cells, &total_bytes) ||
        total_bytes != t->bytes)
        return bad(ctx, r, "tensor size inconsistent with its type", at);
    if (t->transposed && (ty->block != 1 || !t->is_v)) /* llama.cpp transposes only float V */
        return bad(ctx, r, "a transposed tensor of a block type", at);
    if (t->codec == TQKV_CODEC_KLT) { /* one transform per head of `group` values */
        if (!v3 || ty->dtype < 0 || t->group < 8 || t->group > 4096 || t->group % 8 ||
            t->width % t->group || t->bits || t->norm_correction || t->seed || !t->has_ext ||
            t->width > (1u << 20))
            return bad(ctx, r, "bad codec parameters", at);
    } else if (t->codec != TQKV_CODEC_RAW) {
        tq_codec_desc d;
        if (ty->dtype < 0 || tqkv_codec_desc(t, &d) || t->width % t->group)
            return bad(ctx, r, "bad codec parameters", at);
    }
    if (extra || (!v3 && (rec_flags[1] || rec_flags[2])) ||
        (innerq && (r->version < 2 || t->codec != TQKV_CODEC_TQ)) ||
        (!v3 && t->codec > TQKV_CODEC_TURBO) || (t->radius_bits && t->codec != TQKV_CODEC_ANGLE) ||
        (per_head && (!innerq || t->width > (1u << 20))) ||
        (t->has_ext && (t->transposed || t->width > (1u << 20))))
        return bad(ctx, r, "bad InnerQ, group, radius or model-layer field", at);
    t->innerq_n = 0;
    if (innerq) t->innerq_n = per_head ? (uint32_t)t->width : t->group;
    if (innerq && !(t->innerq = malloc(4ull * t->innerq_n)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    *cp = c;
    return TQ_OK;
}

/* Version 2: the InnerQ scales, in tensor order. */
static tq_status parse_scales(tq_ctx *ctx, tqkv_reader *r, mcur *c)
{
    tqkv_meta *m = &r->meta;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        if (!t->innerq) continue;
        if (mget(c, t->innerq, 4ull * t->innerq_n))
            return bad(ctx, r, "InnerQ scales truncated", HDR_LEN + c->pos);
        for (uint32_t j = 0; j < t->innerq_n; j++)
            if (!(t->innerq[j] > 0.0f) || isinf(t->innerq[j]))
                return bad(ctx, r, "an InnerQ scale that is not finite and positive",
                           HDR_LEN + c->pos);
    }
    return TQ_OK;
}

/* K offsets (and their rotation) of one tensor's extension. */
static tq_status get_offset(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t, uint32_t flags)
{
    if (!(t->offset = malloc(4ull * t->width)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (mget(c, t->offset, 4ull * t->width))
        return bad(ctx, r, "offsets truncated", HDR_LEN + c->pos);
    for (uint64_t j = 0; j < t->width; j++)
        if (!isfinite(t->offset[j]))
            return bad(ctx, r, "an offset that is not finite", HDR_LEN + c->pos);
    return flags & 2 ? get_rope(ctx, r, c, t) : TQ_OK;
}

/* The KLT codec's transforms (put_klt): every head's component count,
 * step and basis, each value finite and at most 1 in size (rows of an
 * orthonormal basis). */
static tq_status get_basis16(tq_ctx *ctx, tqkv_reader *r, mcur *c, const tqkv_record *t,
                             tqkv_klt *k)
{
    for (uint64_t i = 0; i < (uint64_t)k->m * t->group; i++) {
        uint16_t v = 0;
        mget(c, &v, 2); /* fits: checked by the caller */
        k->basis[i] = tq_fp16_to_fp32(v);
        if (!(fabsf(k->basis[i]) <= 1.0f))
            return bad(ctx, r, "a basis value that is not finite or above 1", HDR_LEN + c->pos - 2);
    }
    return TQ_OK;
}

/* put_basis's bytes: an exponent of BASIS8_MIN_EXP - 1 .. 1 a row (the first: a zero row),
 * values -127..127 (0 in a zero row), none above 1 in size. */
static tq_status get_basis8(tq_ctx *ctx, tqkv_reader *r, mcur *c, const tqkv_record *t,
                            tqkv_klt *k)
{
    for (uint32_t row = 0; row < k->m; row++) {
        int8_t e = 0;
        mget(c, &e, 1); /* fits: checked by the caller */
        if (e < BASIS8_MIN_EXP - 1 || e > 1)
            return bad(ctx, r, "a basis row's exponent out of range", HDR_LEN + c->pos - 1);
        for (uint32_t j = 0; j < t->group; j++) {
            int8_t q = 0;
            mget(c, &q, 1);
            float v = e < BASIS8_MIN_EXP ? 0.0f : ldexpf((float)q, e - 7);
            k->basis[(size_t)row * t->group + j] = v;
            if (q == -128 || (e < BASIS8_MIN_EXP && q) || !(fabsf(v) <= 1.0f))
                return bad(ctx, r, "a basis value that is not finite or above 1",
                           HDR_LEN + c->pos - 1);
        }
    }
    return TQ_OK;
}

static tq_status get_klt(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t nh = t->width / t->group;
    if (!(t->klt = calloc(nh, sizeof *t->klt)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t h = 0; h < nh; h++) {
        tqkv_klt *k = &t->klt[h];
        uint64_t at = HDR_LEN + c->pos;
        if (mget(c, &k->m, 4) || mget(c, &k->step, 4))
            return bad(ctx, r, "transform truncated", at);
        if (k->m > t->group || !(k->step > 0) || !isfinite(k->step))
            return bad(ctx, r, "bad transform (components or step)", at);
        uint64_t nv = (uint64_t)k->m * t->group;
        uint64_t bytes = t->klt_basis8 ? nv + k->m : 2 * nv;
        if (bytes > c->n - c->pos) return bad(ctx, r, "transform basis truncated", at);
        if (!(k->basis = malloc((nv ? nv : 1) * sizeof *k->basis)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        tq_status st = t->klt_basis8 ? get_basis8(ctx, r, c, t, k) : get_basis16(ctx, r, c, t, k);
        if (st) return st;
    }
    return TQ_OK;
}

/* The coarse rows' coding (put_coarse): an end past the sinks and the base's rows, within
 * the cells; block codecs: a valid block of other bits; KLT: a finite step scale >= 1. */
static tq_status get_coarse(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t at = HDR_LEN + c->pos;
    uint8_t f[4];
    if (mget(c, &t->coarse_end, 4) || mget(c, f, 4) || mget(c, &t->coarse_scale, 4))
        return bad(ctx, r, "coarse rows truncated", at);
    t->coarse_bits = f[0];
    t->coarse_uniform = f[1];
    t->coarse_nc = f[2];
    t->coarse_planes = f[3];
    if (t->coarse_end <= t->sink_rows || t->coarse_end <= t->row_start ||
        t->coarse_end > t->cells || t->codec == TQKV_CODEC_RAW)
        return bad(ctx, r, "bad coarse rows (their end)", at);
    tqkv_record v;
    tqkv_record_coarse(t, &v);
    tq_codec_desc d;
    int ok = t->codec == TQKV_CODEC_KLT
                 ? !f[0] && !f[1] && !f[2] && !f[3] && isfinite(t->coarse_scale) &&
                       t->coarse_scale >= 1.0f && t->coarse_scale <= 65536.0f
                 : t->coarse_scale == 0.0f && f[1] <= 1 && f[2] <= 1 && f[3] <= 1 &&
                       !tqkv_codec_desc(&v, &d) &&
                       (!f[3] || (t->codec == TQKV_CODEC_TQ && f[0] >= 2 && t->group % 8 == 0));
    if (!ok) return bad(ctx, r, "bad coarse rows (their coding)", at);
    return TQ_OK;
}

/* The source's rotation (extension flag bit 5): a power-of-two block of
 * whole rows, cell-major. */
static tq_status get_hadamard(tq_ctx *ctx, tqkv_reader *r, mcur *c, tqkv_record *t)
{
    uint64_t at = HDR_LEN + c->pos;
    if (mget(c, &t->hadamard, 4)) return bad(ctx, r, "rotation block truncated", at);
    uint32_t n = t->hadamard;
    if (n & (n - 1) || n < TQ_RHT_MIN || n > TQ_RHT_MAX || t->width % n || t->transposed)
        return bad(ctx, r, "bad rotation block", at);
    return TQ_OK;
}

/* Version 3: the extensions (sink rows, offsets, planes,
 * transforms), in tensor order. */
static tq_status parse_extensions(tq_ctx *ctx, tqkv_reader *r, mcur *c)
{
    tqkv_meta *m = &r->meta;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        if (!t->has_ext) continue;
        uint32_t flags;
        if (mget(c, &t->sink_rows, 4) || mget(c, &flags, 4))
            return bad(ctx, r, "tensor extension truncated", HDR_LEN + c->pos);
        if (t->sink_rows >= t->cells || (t->row_start && t->row_start < t->sink_rows) ||
            flags > 511 || (!t->sink_rows && !flags) || (flags & 3) == 2 ||
            ((flags & 448) && !(flags & 8)) ||
            ((flags & 4) && (t->codec != TQKV_CODEC_TQ || t->bits < 2 || t->group % 8)) ||
            !(flags & 8) != (t->codec != TQKV_CODEC_KLT) ||
            (t->codec == TQKV_CODEC_RAW && (t->sink_rows || flags != 32))) /* kept: a rotation */
            return bad(ctx, r, "bad tensor extension", HDR_LEN + c->pos);
        t->planes = (flags & 4) != 0;
        t->klt_rans = (flags & 64) != 0;
        t->klt_gain = (flags & 128) != 0;
        t->klt_basis8 = (flags & 256) != 0;
        tq_status st = TQ_OK;
        if (flags & 1) st = get_offset(ctx, r, c, t, flags);
        if (!st && (flags & 8)) st = get_klt(ctx, r, c, t);
        if (!st && (flags & 16)) st = get_coarse(ctx, r, c, t);
        if (!st && (flags & 32)) st = get_hadamard(ctx, r, c, t);
        if (st) return st;
    }
    return TQ_OK;
}

static tq_status parse_meta(tq_ctx *ctx, tqkv_reader *r, const uint8_t *p, uint64_t n)
{
    mcur c = {p, n, 0};
    tqkv_meta *m = &r->meta;
    uint8_t fp;
    uint16_t pad;
    uint32_t al, pl;
    if (mget(&c, &m->source_kind, 1) || mget(&c, &fp, 1) || mget(&c, &pad, 2) ||
        mget(&c, &m->state_version, 4) || mget(&c, &m->source_size, 8) ||
        mget(&c, &m->fingerprint, 8) || mget(&c, &m->n_tokens, 4))
        return bad(ctx, r, "metadata truncated", HDR_LEN + c.pos);
    m->has_fingerprint = fp;
    if (m->source_kind > 2) return bad(ctx, r, "unknown source kind", HDR_LEN);
    if (m->n_tokens > (n - c.pos) / 4)
        return bad(ctx, r, "token count does not fit", HDR_LEN + c.pos);
    m->tokens = malloc(4ull * m->n_tokens + 4);
    if (!m->tokens) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->tokens, 4ull * m->n_tokens);
    if (mget(&c, &al, 4) || al > 256 || al > n - c.pos)
        return bad(ctx, r, "bad architecture field", HDR_LEN + c.pos);
    m->arch = malloc(al + 1);
    if (!m->arch) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->arch, al);
    m->arch[al] = 0;
    if (mget(&c, &pl, 4) || pl >= sizeof m->profile || mget(&c, m->profile, pl))
        return bad(ctx, r, "bad profile field", HDR_LEN + c.pos);
    m->profile[pl] = 0;
    uint32_t bl;
    if (mget(&c, &m->base_id, 8) || mget(&c, &bl, 4) || bl > 4096 || bl > n - c.pos ||
        (bl && !m->base_id) || (!bl && m->base_id))
        return bad(ctx, r, "bad base field", HDR_LEN + c.pos);
    m->base_name = malloc(bl + 1);
    if (!m->base_name) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->base_name, bl);
    m->base_name[bl] = 0;
    if (memchr(m->base_name, 0, bl) || memchr(m->base_name, '/', bl))
        return bad(ctx, r, "bad base name", HDR_LEN + c.pos);
    tq_type_profile prof;
    if (tq_type_profile_parse(m->profile, &prof))
        return bad(ctx, r, "unknown type-id profile", HDR_LEN + c.pos);
    uint64_t sl, sz;
    if (mget(&c, &sl, 8) || mget(&c, &sz, 8) || sz > n - c.pos || sl > m->source_size ||
        sl > MAX_PIECE || ZSTD_getFrameContentSize(p + c.pos, sz) != sl)
        return bad(ctx, r, "bad skeleton field", HDR_LEN + c.pos);
    m->skeleton = malloc(sl ? sl : 1);
    if (!m->skeleton) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    size_t got = ZSTD_decompress(m->skeleton, sl, p + c.pos, sz);
    if (ZSTD_isError(got) || got != sl)
        return bad(ctx, r, "skeleton does not decompress", HDR_LEN + c.pos);
    m->skeleton_len = sl;
    c.pos += sz;
    if (mget(&c, &m->n_tensors, 4) || m->n_tensors > (n - c.pos) / TENSOR_REC)
        return bad(ctx, r, "bad tensor count", HDR_LEN + c.pos);
    if (c.pos + (uint64_t)m->n_tensors * TENSOR_REC > n)
        return bad(ctx, r, "metadata length mismatch", HDR_LEN + c.pos);
    m->t = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->t);
    if (!m->t) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint64_t prev_end = 0, total = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_record *t = &m->t[i];
        tq_status st = parse_tensor_rec(ctx, r, &c, prof, prev_end, t);
        if (st) return st;
        prev_end = t->file_off + t->bytes;
        total += t->bytes;
    }
    if (total + sl != m->source_size)
        return bad(ctx, r, "skeleton and tensors do not add up to the source", HDR_LEN);
    tq_status st = parse_scales(ctx, r, &c);
    if (!st) st = parse_extensions(ctx, r, &c);
    if (st) return st;
    if (c.pos != n) return bad(ctx, r, "metadata length mismatch", HDR_LEN + c.pos);
    return TQ_OK;
}

/* A chunk's rows within one part of its tensor (coarse rows or not) and its length what that
 * part's coding makes of them. */
static tq_status check_chunk_rows(tq_ctx *ctx, const tqkv_reader *r, const tqkv_record *t,
                                  const tqkv_chunk *ch)
{
    const tqkv_record *ct = t;
    tqkv_record coarse;
    if (tqkv_chunk_is_coarse(t, ch->row0)) {
        if (ch->nrows > t->coarse_end - ch->row0)
            return bad(ctx, r, "chunk crosses the end of the coarse rows", ch->offset);
        tqkv_record_coarse(t, &coarse);
        ct = &coarse;
    }
    int ok;
    uint64_t want = expected_raw(ctx, ct, ch->row0, ch->nrows, &ok);
    int klt = ok && t->codec == TQKV_CODEC_KLT && !tqkv_chunk_is_sink(t, ch->row0);
    if (klt && !t->klt_rans && ch->raw_len >= want && (ch->raw_len - want) % 2 == 0 &&
        ch->raw_len - want <= 2 * want)
        want = ch->raw_len; /* one byte an index, then 2 bytes per escaped one */
    if (klt && t->klt_rans && ch->raw_len <= tqkv_klt_rans_bound(t, ch->nrows))
        want = ch->raw_len; /* a stream a component: its own checks when it is decoded */
    if (ch->raw_len != want || !ok || ch->raw_len > MAX_PIECE ||
        (!ch->zstd && ch->stored_len != ch->raw_len) ||
        (ch->zstd && ZSTD_getFrameContentSize(ch->stored, ch->stored_len) != ch->raw_len))
        return bad(ctx, r, "chunk length", ch->offset);
    return TQ_OK;
}

static tq_status parse(tq_ctx *ctx, tqkv_reader *r)
{
    const uint8_t *p = r->map;
    uint64_t n = r->size;
    if (n < HDR_LEN + TRAILER_LEN || memcmp(p, MAGIC, 4))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a .tqkv snapshot", r->label);
    uint64_t hh, ml, mh;
    uint32_t ver;
    memcpy(&ver, p + 4, 4);
    memcpy(&ml, p + 8, 8);
    memcpy(&mh, p + 16, 8);
    memcpy(&hh, p + 24, 8);
    if (XXH64(p, 24, 0) != hh) return bad(ctx, r, "header checksum mismatch", 0);
    if (ver < 1 || ver > TQKV_VERSION)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: snapshot version %u (this tq reads 1 to %d)", r->label, ver,
                                TQKV_VERSION);
    r->version = ver;
    if (ml > n - HDR_LEN - TRAILER_LEN) return bad(ctx, r, "metadata runs past the end", 8);
    if (XXH64(p + HDR_LEN, ml, 0) != mh) return bad(ctx, r, "metadata checksum mismatch", HDR_LEN);
    tq_status st = parse_meta(ctx, r, p + HDR_LEN, ml);
    if (st) return st;
    const uint8_t *tr = p + n - TRAILER_LEN;
    uint64_t nc, ioff, ih;
    memcpy(&nc, tr, 8);
    memcpy(&ioff, tr + 8, 8);
    memcpy(&ih, tr + 16, 8);
    if (memcmp(tr + 24, END_MAGIC, 8))
        return bad(ctx, r, "trailer missing (truncated snapshot?)", n - TRAILER_LEN);
    uint64_t data0 = HDR_LEN + ml;
    if (ioff < data0 || ioff > n - TRAILER_LEN || nc != (n - TRAILER_LEN - ioff) / 8 ||
        (n - TRAILER_LEN - ioff) % 8)
        return bad(ctx, r, "index placement", n - TRAILER_LEN);
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 0);
    XXH64_update(xs, p + ioff, nc * 8);
    XXH64_update(xs, tr, 16);
    uint64_t got = XXH64_digest(xs);
    XXH64_freeState(xs);
    if (got != ih) return bad(ctx, r, "index checksum mismatch", ioff);
    r->chunks = calloc(nc ? nc : 1, sizeof *r->chunks);
    if (!r->chunks) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    r->n_chunks = nc;
    /* chunks: contiguous from data0 to the index, each verified, and for each
     * tensor covering its rows in order exactly once */
    uint64_t expect_off = data0;
    const tqkv_meta *m = &r->meta;
    uint32_t ti = 0, next_row = m->n_tensors ? m->t[0].row_start : 0;
    for (uint64_t i = 0; i < nc; i++) {
        tqkv_chunk *ch = &r->chunks[i];
        memcpy(&ch->offset, p + ioff + 8 * i, 8);
        if (ch->offset != expect_off || ch->offset > ioff || ioff - ch->offset < CHUNK_HDR)
            return bad(ctx, r, "chunk index entry", ioff + 8 * i);
        const uint8_t *h = p + ch->offset;
        uint32_t magic;
        uint64_t hash;
        memcpy(&magic, h, 4);
        memcpy(&ch->tensor, h + 4, 4);
        memcpy(&ch->row0, h + 8, 4);
        memcpy(&ch->nrows, h + 12, 4);
        ch->zstd = h[16];
        memcpy(&ch->raw_len, h + 20, 8);
        memcpy(&ch->stored_len, h + 28, 8);
        memcpy(&hash, h + 36, 8);
        if (magic != CHUNK_MAGIC || ch->stored_len > ioff - ch->offset - CHUNK_HDR)
            return bad(ctx, r, "chunk header", ch->offset);
        ch->stored = h + CHUNK_HDR;
        xs = XXH64_createState();
        XXH64_reset(xs, 0);
        XXH64_update(xs, h, 36);
        XXH64_update(xs, ch->stored, ch->stored_len);
        got = XXH64_digest(xs);
        XXH64_freeState(xs);
        if (got != hash) return bad(ctx, r, "chunk checksum mismatch", ch->offset);
        while (ti < m->n_tensors && next_row == m->t[ti].cells)
            if (++ti < m->n_tensors) next_row = m->t[ti].row_start;
        if (ch->tensor != ti || ti >= m->n_tensors || ch->row0 != next_row || !ch->nrows ||
            ch->nrows > m->t[ti].cells - next_row || ch->zstd > 1)
            return bad(ctx, r, "chunk out of order", ch->offset);
        if (m->t[ti].transposed && m->t[ti].codec == TQKV_CODEC_RAW && ch->nrows != m->t[ti].cells)
            return bad(ctx, r, "chunk out of order", ch->offset);
        tq_status cst = check_chunk_rows(ctx, r, &m->t[ti], ch);
        if (cst) return cst;
        next_row += ch->nrows;
        expect_off = ch->offset + CHUNK_HDR + ch->stored_len;
    }
    while (ti < m->n_tensors && next_row == m->t[ti].cells)
        if (++ti < m->n_tensors) next_row = m->t[ti].row_start;
    if (ti != m->n_tensors || expect_off != ioff)
        return bad(ctx, r, "chunks do not cover every tensor", ioff);
    return TQ_OK;
}

static tqkv_reader *alloc_reader(const char *label)
{
    tqkv_reader *r = calloc(1, sizeof *r);
    if (r && !(r->label = strdup(label))) {
        free(r);
        return NULL;
    }
    return r;
}

tq_status tqkv_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                           tqkv_reader **out)
{
    *out = NULL;
    tqkv_reader *r = alloc_reader(label ? label : "(memory)");
    if (!r) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    r->map = data;
    r->size = size;
    tq_status st = parse(ctx, r);
    if (st) {
        tqkv_close(r);
        return st;
    }
    *out = r;
    return TQ_OK;
}

tq_status tqkv_open(tq_ctx *ctx, const char *path, tqkv_reader **out)
{
    *out = NULL;
    const uint8_t *m;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, HDR_LEN + TRAILER_LEN, "not a .tqkv snapshot", &m, &size);
    if (st) return st;
    tqkv_reader *r = alloc_reader(path);
    if (!r) {
        tq_unmap_file(m, size);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    r->map = m;
    r->size = size;
    r->mapped = 1;
    st = parse(ctx, r);
    if (st) {
        tqkv_close(r);
        return st;
    }
    *out = r;
    return TQ_OK;
}

uint64_t tqkv_file_id(const tqkv_reader *r) { return XXH64(r->map, r->size, 0x62617365ull); }

tq_status tqkv_chunk_read(tq_ctx *ctx, const tqkv_reader *r, uint64_t i, void *out)
{
    const tqkv_chunk *c = &r->chunks[i];
    if (!c->zstd) {
        memcpy(out, c->stored, c->raw_len);
        return TQ_OK;
    }
    size_t got = ZSTD_decompress(out, c->raw_len, c->stored, c->stored_len);
    if (ZSTD_isError(got) || got != c->raw_len)
        return bad(ctx, r, "chunk does not decompress", c->offset);
    return TQ_OK;
}
