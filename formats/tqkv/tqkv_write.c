/* tqkv_write.c - the .tqkv writer (tqkv.h, TQKV.md): header and metadata up front, chunks
 * packed (zstd, XXH64) off the writing thread, then the index and the trailer. */
#include "tqkv_bytes.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

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




/* A head's basis rows: fp16 values, or with basis8 per row an i8 exponent (TQKV_BASIS8_MIN_EXP
 * less one for a zero row) and group i8 values (tqkv_basis_round made them exact). */
static void put_basis(bbuf *b, const tqkv_record *t, const tqkv_klt *k)
{
    for (uint32_t r = 0; r < k->m; r++) {
        const float *row = k->basis + (size_t)r * t->group;
        int e = t->klt_basis8 ? tqkv_basis8_exp(row, t->group) : 0;
        int8_t e8 = (int8_t)(e == INT32_MIN ? TQKV_BASIS8_MIN_EXP - 1 : e);
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
        if (!t->from_base) put_basis(b, t, k);
    }
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
        int scales = t->innerq && !t->from_base; /* stored here */
        int per_head = scales && t->innerq_n != t->group;
        uint8_t rec_flags[3] = {(uint8_t)(scales | (t->group_guessed ? 2 : 0) |
                                          (t->radius_bits & 15) << 2 | (per_head ? 64 : 0) |
                                          (tqkv_has_extension(t) ? 128 : 0)),
                                (uint8_t)ml, (uint8_t)(ml >> 8)};
        uint8_t codec = t->uniform ? TQKV_CODEC_TQ_UNIFORM_ID : t->codec;
        for (int f = 0; f < tqkv_n_rec_fields; f++) {
            const tqkv_rec_field *rf = &tqkv_rec_fields[f];
            if (rf->member == TQKV_REC_CODEC)
                bput(b, &codec, 1);
            else if (rf->member == TQKV_REC_FLAGS)
                bput(b, rec_flags, 3);
            else
                bput(b, (const char *)t + rf->member, (size_t)rf->bytes);
        }
    }
    int any_innerq = 0, any_v3 = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        if (m->t[i].innerq && !m->t[i].from_base) {
            bput(b, m->t[i].innerq, 4ull * m->t[i].innerq_n);
            any_innerq = 1;
        }
        any_v3 |= tqkv_has_extension(&m->t[i]) || m->t[i].uniform ||
                  (m->t[i].innerq && m->t[i].innerq_n != m->t[i].group) ||
                  m->t[i].model_layer != TQKV_NO_MODEL_LAYER || m->t[i].group_guessed ||
                  m->t[i].codec == TQKV_CODEC_ANGLE || m->t[i].codec == TQKV_CODEC_PROD ||
                  m->t[i].codec == TQKV_CODEC_KLT;
    }
    for (uint32_t i = 0; i < m->n_tensors; i++) { /* version 3: the extensions, in tensor order */
        const tqkv_record *t = &m->t[i];
        if (!tqkv_has_extension(t)) continue;
        uint32_t flags = (t->offset && !t->from_base ? 1 : 0) | (t->offset && t->rope_pos ? 2 : 0) |
                         (t->planes ? 4 : 0) | (t->klt ? 8 : 0) | (t->coarse_end ? 16 : 0) |
                         (t->hadamard ? 32 : 0) | (t->klt && t->klt_rans ? 64 : 0) |
                         (t->klt && t->klt_gain ? 128 : 0) | (t->klt && t->klt_basis8 ? 256 : 0) |
                         (t->klt && t->klt_rans && t->klt_rans_coarse ? 512 : 0) |
                         (t->klt && t->chunks_grow ? 1024 : 0) |
                         (t->from_base ? 2048 : 0) |
                         (t->share_at || t->base_from ? 4096 : 0);
        PUTV(b, t->sink_rows);
        PUTV(b, flags);
        if (flags & 1) bput(b, t->offset, 4ull * t->width);
        if (flags & 2) put_rope(b, t);
        if (t->klt) put_klt(b, t);
        if (t->coarse_end) put_coarse(b, t);
        if (t->hadamard) PUTV(b, t->hadamard); /* bit 5: u32 rotation block */
        if (flags & 4096) { /* bit 12: where the base's rows sit, which of the base's */
            PUTV(b, t->share_at);
            PUTV(b, t->base_from);
        }
    }
    if (any_v3) return 3;
    return any_innerq ? 2 : 1;
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
