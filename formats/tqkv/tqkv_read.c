/* tqkv_read.c - the verifying .tqkv reader (tqkv.h, TQKV.md): every checksum and field checked
 * before a chunk is handed out. */
#include "file_io.h"
#include "gguf.h"
#include "seal.h"
#include "tqkv_bytes.h"
#include "tqkv_read_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

/* ------------------------------------------------------------ reader */

int tqkv_is_snapshot(const void *data, size_t size) { return size >= 4 && !memcmp(data, MAGIC, 4); }
const tqkv_meta *tqkv_meta_of(const tqkv_reader *r) { return &r->meta; }
uint64_t tqkv_n_chunks(const tqkv_reader *r) { return r->n_chunks; }
uint32_t tqkv_version(const tqkv_reader *r) { return r->version; }
const tqkv_chunk *tqkv_chunk_at(const tqkv_reader *r, uint64_t i) { return &r->chunks[i]; }
uint64_t tqkv_size(const tqkv_reader *r) { return r->size; }

uint64_t tqkv_meta_values(const tqkv_meta *m)
{
    uint64_t values = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) values += m->t[i].width * m->t[i].cells;
    return values;
}

uint64_t tqkv_record_stored(const tqkv_reader *r, uint32_t i)
{
    uint64_t stored = 0; /* chunks are in tensor order (checked at open) */
    for (uint64_t c = 0; c < r->n_chunks && r->chunks[c].tensor <= i; c++)
        if (r->chunks[c].tensor == i) stored += r->chunks[c].stored_len + CHUNK_HDR;
    return stored;
}

const char *tqkv_codec_family(unsigned codec)
{
    static const char *const names[] = {
        [TQKV_CODEC_RAW] = "raw",     [TQKV_CODEC_TQ] = "tq",     [TQKV_CODEC_TURBO] = "turbo",
        [TQKV_CODEC_ANGLE] = "angle", [TQKV_CODEC_PROD] = "prod", [TQKV_CODEC_KLT] = "klt",
    };
    if (codec >= sizeof names / sizeof *names || !names[codec]) return "tq";
    return names[codec];
}

void tqkv_close(tqkv_reader *r)
{
    if (!r) return;
    if (r->mapped) tq_unmap_file(r->map, r->size);
    free(r->plain);
    tqkv_stream_free(r);
    tqkv_meta_free(&r->meta);
    free(r->chunks);
    free(r->label);
    free(r);
}

uint64_t tqkv_expected_raw(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t nrows,
                           int *ok)
{
    *ok = 1;
    if (tqkv_chunk_is_sink(t, row0)) { /* exactly the sink rows, in the source type */
        *ok = row0 == 0 && nrows == t->sink_rows;
        return t->bytes / t->cells * nrows;
    }
    uint32_t cells = t->cells ? t->cells : 1;
    if (t->codec == TQKV_CODEC_RAW) return t->transposed ? t->bytes : t->bytes / cells * nrows;
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

tq_status tqkv_bad(tq_ctx *ctx, const tqkv_reader *r, const char *what, uint64_t at)
{
    return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s: %s: at offset %" PRIu64, r->label, what, at);
}

/* One tensor record (TQKV.md), validated against the source it places the
 * tensor in: its rows must follow the previous tensor's (prev_end). */
static tq_status parse_tensor_rec(tq_ctx *ctx, tqkv_reader *r, mcur *cp, tq_type_profile prof,
                                  uint64_t prev_end, tqkv_record *t)
{
    mcur c = *cp;
    const tqkv_meta *m = &r->meta;
    uint8_t rec_flags[3] = {0, 0, 0};
    for (int f = 0; f < tqkv_n_rec_fields; f++) {
        const tqkv_rec_field *rf = &tqkv_rec_fields[f];
        void *to = rec_flags;
        if (rf->member == TQKV_REC_CODEC) to = &t->codec;
        if (rf->member >= 0) to = (char *)t + rf->member;
        mget(&c, to, (uint64_t)rf->bytes);
    }
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
    uint64_t at = HDR_LEN + c.pos - TENSOR_REC;
    const tq_ggml_type *ty = tq_ggml_type_get(prof, t->type_id);
    if (!ty || !t->cells || !t->width || !t->rows_per_chunk || t->row_start > t->cells ||
        (t->row_start && !m->base_id) ||
        (t->row_start && t->transposed && t->codec == TQKV_CODEC_RAW))
        return tqkv_bad(ctx, r, "bad tensor record", at);
    if (t->file_off < prev_end || t->bytes > m->source_size ||
        t->file_off > m->source_size - t->bytes)
        return tqkv_bad(ctx, r, "tensor placement outside the source", at);
    uint64_t row_bytes, total_bytes;
    if (t->is_v > 1 || t->transposed > 1 || t->width % ty->block ||
        __builtin_mul_overflow(t->width / ty->block, (uint64_t)ty->bytes, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, (uint64_t)t->cells, &total_bytes) ||
        total_bytes != t->bytes)
        return tqkv_bad(ctx, r, "tensor size inconsistent with its type", at);
    if (t->transposed && (ty->block != 1 || !t->is_v)) /* llama.cpp transposes only float V */
        return tqkv_bad(ctx, r, "a transposed tensor of a block type", at);
    if (t->codec == TQKV_CODEC_KLT) { /* one transform per head of `group` values */
        if (!v3 || ty->dtype < 0 || t->group < 8 || t->group > 4096 || t->group % 8 ||
            t->width % t->group || t->bits || t->norm_correction || t->seed || !t->has_ext ||
            t->width > (1u << 20))
            return tqkv_bad(ctx, r, "bad codec parameters", at);
    } else if (t->codec != TQKV_CODEC_RAW) {
        tq_codec_desc d;
        if (ty->dtype < 0 || tqkv_codec_desc(t, &d) || t->width % t->group)
            return tqkv_bad(ctx, r, "bad codec parameters", at);
    }
    if (extra || (!v3 && (rec_flags[1] || rec_flags[2])) ||
        (innerq && (r->version < 2 || t->codec != TQKV_CODEC_TQ)) ||
        (!v3 && t->codec > TQKV_CODEC_TURBO) || (t->radius_bits && t->codec != TQKV_CODEC_ANGLE) ||
        (per_head && (!innerq || t->width > (1u << 20))) ||
        (t->has_ext && (t->transposed || t->width > (1u << 20))))
        return tqkv_bad(ctx, r, "bad InnerQ, group, radius or model-layer field", at);
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
            return tqkv_bad(ctx, r, "InnerQ scales truncated", HDR_LEN + c->pos);
        for (uint32_t j = 0; j < t->innerq_n; j++)
            if (!(t->innerq[j] > 0.0f) || isinf(t->innerq[j]))
                return tqkv_bad(ctx, r, "an InnerQ scale that is not finite and positive",
                                HDR_LEN + c->pos);
    }
    return TQ_OK;
}

tq_status tqkv_parse_meta(tq_ctx *ctx, tqkv_reader *r, const uint8_t *p, uint64_t n)
{
    mcur c = {p, n, 0};
    tqkv_meta *m = &r->meta;
    uint8_t fp;
    uint16_t pad;
    uint32_t al, pl;
    if (mget(&c, &m->source_kind, 1) || mget(&c, &fp, 1) || mget(&c, &pad, 2) ||
        mget(&c, &m->state_version, 4) || mget(&c, &m->source_size, 8) ||
        mget(&c, &m->fingerprint, 8) || mget(&c, &m->n_tokens, 4))
        return tqkv_bad(ctx, r, "metadata truncated", HDR_LEN + c.pos);
    m->has_fingerprint = fp;
    if (m->source_kind > 2) return tqkv_bad(ctx, r, "unknown source kind", HDR_LEN);
    if (m->n_tokens > (n - c.pos) / 4)
        return tqkv_bad(ctx, r, "token count does not fit", HDR_LEN + c.pos);
    m->tokens = malloc(4ull * m->n_tokens + 4);
    if (!m->tokens) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->tokens, 4ull * m->n_tokens);
    if (mget(&c, &al, 4) || al > 256 || al > n - c.pos)
        return tqkv_bad(ctx, r, "bad architecture field", HDR_LEN + c.pos);
    m->arch = malloc(al + 1);
    if (!m->arch) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->arch, al);
    m->arch[al] = 0;
    if (mget(&c, &pl, 4) || pl >= sizeof m->profile || mget(&c, m->profile, pl))
        return tqkv_bad(ctx, r, "bad profile field", HDR_LEN + c.pos);
    m->profile[pl] = 0;
    uint32_t bl;
    if (mget(&c, &m->base_id, 8) || mget(&c, &bl, 4) || bl > 4096 || bl > n - c.pos ||
        (bl && !m->base_id) || (!bl && m->base_id))
        return tqkv_bad(ctx, r, "bad base field", HDR_LEN + c.pos);
    m->base_name = malloc(bl + 1);
    if (!m->base_name) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    mget(&c, m->base_name, bl);
    m->base_name[bl] = 0;
    if (memchr(m->base_name, 0, bl) || memchr(m->base_name, '/', bl))
        return tqkv_bad(ctx, r, "bad base name", HDR_LEN + c.pos);
    tq_type_profile prof;
    if (tq_type_profile_parse(m->profile, &prof))
        return tqkv_bad(ctx, r, "unknown type-id profile", HDR_LEN + c.pos);
    uint64_t sl, sz;
    if (mget(&c, &sl, 8) || mget(&c, &sz, 8) || sz > n - c.pos || sl > m->source_size ||
        sl > MAX_PIECE || ZSTD_getFrameContentSize(p + c.pos, sz) != sl)
        return tqkv_bad(ctx, r, "bad skeleton field", HDR_LEN + c.pos);
    m->skeleton = malloc(sl ? sl : 1);
    if (!m->skeleton) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    size_t got = ZSTD_decompress(m->skeleton, sl, p + c.pos, sz);
    if (ZSTD_isError(got) || got != sl)
        return tqkv_bad(ctx, r, "skeleton does not decompress", HDR_LEN + c.pos);
    m->skeleton_len = sl;
    c.pos += sz;
    if (mget(&c, &m->n_tensors, 4) || m->n_tensors > (n - c.pos) / TENSOR_REC)
        return tqkv_bad(ctx, r, "bad tensor count", HDR_LEN + c.pos);
    if (c.pos + (uint64_t)m->n_tensors * TENSOR_REC > n)
        return tqkv_bad(ctx, r, "metadata length mismatch", HDR_LEN + c.pos);
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
        return tqkv_bad(ctx, r, "skeleton and tensors do not add up to the source", HDR_LEN);
    tq_status st = parse_scales(ctx, r, &c);
    if (!st) st = tqkv_parse_extensions(ctx, r, &c);
    if (st) return st;
    if (c.pos != n) return tqkv_bad(ctx, r, "metadata length mismatch", HDR_LEN + c.pos);
    return TQ_OK;
}

/* A chunk's rows within one part of its tensor (coarse rows or not) and its length what that
 * part's coding makes of them. */
tq_status tqkv_check_chunk_rows(tq_ctx *ctx, const tqkv_reader *r, const tqkv_record *t,
                                  const tqkv_chunk *ch)
{
    const tqkv_record *ct = t;
    tqkv_record coarse;
    if (tqkv_chunk_is_coarse(t, ch->row0)) {
        if (ch->nrows > t->coarse_end - ch->row0)
            return tqkv_bad(ctx, r, "chunk crosses the end of the coarse rows", ch->offset);
        tqkv_record_coarse(t, &coarse);
        ct = &coarse;
    }
    int ok;
    uint64_t want = tqkv_expected_raw(ctx, ct, ch->row0, ch->nrows, &ok);
    int klt = ok && t->codec == TQKV_CODEC_KLT && !tqkv_chunk_is_sink(t, ch->row0);
    int rans = tqkv_chunk_rans(t, ch->row0);
    if (klt && !rans && ch->raw_len >= want && (ch->raw_len - want) % 2 == 0 &&
        ch->raw_len - want <= 2 * want)
        want = ch->raw_len; /* one byte an index, then 2 bytes per escaped one */
    if (klt && rans && ch->raw_len <= tqkv_klt_rans_bound(t, ch->nrows))
        want = ch->raw_len; /* a stream a component: its own checks when it is decoded */
    if (ch->raw_len != want || !ok || ch->raw_len > MAX_PIECE ||
        (!ch->zstd && ch->stored_len != ch->raw_len) ||
        (ch->zstd && ZSTD_getFrameContentSize(ch->stored, ch->stored_len) != ch->raw_len))
        return tqkv_bad(ctx, r, "chunk length", ch->offset);
    return TQ_OK;
}

/* XXH64 of two pieces one after the other. */
uint64_t tqkv_hash2(const void *a, size_t an, const void *b, size_t bn)
{
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 0);
    XXH64_update(xs, a, an);
    XXH64_update(xs, b, bn);
    uint64_t h = XXH64_digest(xs);
    XXH64_freeState(xs);
    return h;
}

/* The header and the metadata (checksums first). */
/* The header's 32 bytes: magic, version, checksum; *meta_len. */
tq_status tqkv_check_header(tq_ctx *ctx, tqkv_reader *r, const uint8_t *p, uint64_t n,
                              uint64_t *meta_len)
{
    uint64_t hh;
    uint32_t ver;
    if (n < HDR_LEN || memcmp(p, MAGIC, 4))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a .tqkv snapshot", r->label);
    memcpy(&ver, p + 4, 4);
    memcpy(meta_len, p + 8, 8);
    memcpy(&hh, p + 24, 8);
    if (XXH64(p, 24, 0) != hh) return tqkv_bad(ctx, r, "header checksum mismatch", 0);
    if (ver < 1 || ver > TQKV_VERSION)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: snapshot version %u (this tq reads 1 to %d)", r->label, ver,
                                TQKV_VERSION);
    r->version = ver;
    if (*meta_len > MAX_META) return tqkv_bad(ctx, r, "metadata runs past the end", 8);
    return TQ_OK;
}

/* The metadata, its checksum first. */
tq_status tqkv_check_meta(tq_ctx *ctx, tqkv_reader *r, const uint8_t *head, const uint8_t *meta,
                            uint64_t ml)
{
    uint64_t mh;
    memcpy(&mh, head + 16, 8);
    if (XXH64(meta, ml, 0) != mh) return tqkv_bad(ctx, r, "metadata checksum mismatch", HDR_LEN);
    return tqkv_parse_meta(ctx, r, meta, ml);
}

static tq_status parse_head(tq_ctx *ctx, tqkv_reader *r, uint64_t *meta_len)
{
    const uint8_t *p = r->map;
    uint64_t n = r->size;
    uint64_t ml;
    if (n < HDR_LEN + TRAILER_LEN)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a .tqkv snapshot", r->label);
    tq_status st = tqkv_check_header(ctx, r, p, n, &ml);
    if (st) return st;
    if (ml > n - HDR_LEN - TRAILER_LEN) return tqkv_bad(ctx, r, "metadata runs past the end", 8);
    *meta_len = ml;
    return tqkv_check_meta(ctx, r, p, p + HDR_LEN, ml);
}

/* The trailer and the index it locates (checksum first): *index_off, *n_chunks. */
static tq_status parse_trailer(tq_ctx *ctx, const tqkv_reader *r, uint64_t data0,
                               uint64_t *index_off, uint64_t *n_chunks)
{
    const uint8_t *p = r->map;
    uint64_t n = r->size;
    const uint8_t *tr = p + n - TRAILER_LEN;
    uint64_t nc, ioff, ih;
    memcpy(&nc, tr, 8);
    memcpy(&ioff, tr + 8, 8);
    memcpy(&ih, tr + 16, 8);
    if (memcmp(tr + 24, END_MAGIC, 8))
        return tqkv_bad(ctx, r, "trailer missing (truncated snapshot?)", n - TRAILER_LEN);
    if (ioff < data0 || ioff > n - TRAILER_LEN || nc != (n - TRAILER_LEN - ioff) / 8 ||
        (n - TRAILER_LEN - ioff) % 8)
        return tqkv_bad(ctx, r, "index placement", n - TRAILER_LEN);
    if (tqkv_hash2(p + ioff, nc * 8, tr, 16) != ih)
        return tqkv_bad(ctx, r, "index checksum mismatch", ioff);
    *index_off = ioff;
    *n_chunks = nc;
    return TQ_OK;
}

/* Chunk i's header at the offset the index gives, which must be expect_off (checksum
 * verified). */
static tq_status parse_chunk_header(tq_ctx *ctx, const tqkv_reader *r, uint64_t ioff, uint64_t i,
                                    uint64_t expect_off, tqkv_chunk *ch)
{
    const uint8_t *p = r->map;
    memcpy(&ch->offset, p + ioff + 8 * i, 8);
    if (ch->offset != expect_off || ch->offset > ioff || ioff - ch->offset < CHUNK_HDR)
        return tqkv_bad(ctx, r, "chunk index entry", ioff + 8 * i);
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
        return tqkv_bad(ctx, r, "chunk header", ch->offset);
    ch->stored = h + CHUNK_HDR;
    if (tqkv_hash2(h, 36, ch->stored, ch->stored_len) != hash)
        return tqkv_bad(ctx, r, "chunk checksum mismatch", ch->offset);
    return TQ_OK;
}

static tq_status parse(tq_ctx *ctx, tqkv_reader *r)
{
    uint64_t ml = 0, ioff = 0, nc = 0;
    tq_status st = parse_head(ctx, r, &ml);
    uint64_t data0 = HDR_LEN + ml;
    if (!st) st = parse_trailer(ctx, r, data0, &ioff, &nc);
    if (st) return st;
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
        if ((st = parse_chunk_header(ctx, r, ioff, i, expect_off, ch))) return st;
        while (ti < m->n_tensors && next_row == m->t[ti].cells)
            if (++ti < m->n_tensors) next_row = m->t[ti].row_start;
        if (ch->tensor != ti || ti >= m->n_tensors || ch->row0 != next_row || !ch->nrows ||
            ch->nrows > m->t[ti].cells - next_row || ch->zstd > 1)
            return tqkv_bad(ctx, r, "chunk out of order", ch->offset);
        if (m->t[ti].transposed && m->t[ti].codec == TQKV_CODEC_RAW && ch->nrows != m->t[ti].cells)
            return tqkv_bad(ctx, r, "chunk out of order", ch->offset);
        if ((st = tqkv_check_chunk_rows(ctx, r, &m->t[ti], ch))) return st;
        next_row += ch->nrows;
        expect_off = ch->offset + CHUNK_HDR + ch->stored_len;
    }
    while (ti < m->n_tensors && next_row == m->t[ti].cells)
        if (++ti < m->n_tensors) next_row = m->t[ti].row_start;
    if (ti != m->n_tensors || expect_off != ioff)
        return tqkv_bad(ctx, r, "chunks do not cover every tensor", ioff);
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

tq_status tqkv_unseal(tq_ctx *ctx, tqkv_reader *r, const uint8_t *data, uint64_t size)
{
    return tq_seal_open(ctx, tq_seal_keys_current(), r->label, data, size, &r->plain,
                        &r->size);
}

tq_status tqkv_refuse_plain(tq_ctx *ctx, const char *label)
{
    return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                            "%s is not sealed: with a key, tq reads only snapshots sealed "
                            "with one",
                            label);
}

tq_status tqkv_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                           tqkv_reader **out)
{
    *out = NULL;
    tqkv_reader *r = alloc_reader(label ? label : "(memory)");
    if (!r) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    r->map = data;
    r->size = size;
    tq_status st = TQ_OK;
    if (tq_seal_is_sealed(data, size) && !(st = tqkv_unseal(ctx, r, data, size)))
        r->map = r->plain;
    if (!st) st = parse(ctx, r);
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
    if (tq_seal_is_sealed(m, size)) { /* opened into memory; the file is let go */
        r->mapped = 0;
        st = tqkv_unseal(ctx, r, m, size);
        r->map = r->plain;
        tq_unmap_file(m, size);
    } else if (tq_seal_keys_current()) {
        st = tqkv_refuse_plain(ctx, path);
    }
    if (!st) st = parse(ctx, r);
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
        return tqkv_bad(ctx, r, "chunk does not decompress", c->offset);
    return TQ_OK;
}
