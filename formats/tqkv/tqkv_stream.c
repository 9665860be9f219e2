/* tqkv_stream.c - a .tqkv snapshot read from a byte source (tqkv.h, tqkv_open_src): a pipe front
 * to back, or an object by ranges.  Every check of the mapped reader (tqkv_read.c) is made, a
 * chunk's as it arrives. */
#include "io.h"
#include "seal.h"
#include "tqkv_bytes.h"
#include "tqkv_read_impl.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

/* What an object's first ranged GET asks for: the header and, mostly, the whole metadata. */
enum { FIRST_GET = 64 << 10 };

struct tqkv_stream {
    tq_src *src;
    int ranged;
    uint64_t data0;     /* the first chunk's offset */
    uint64_t index_off; /* an object's index; a pipe's once its chunks have passed */
    uint64_t *index;    /* [n_chunks]: an object's chunk offsets */
    pthread_mutex_t mu; /* fetches: one reader of the source at a time */
    uint64_t next;      /* the next chunk to arrive in this pass */
    uint64_t pos;       /* the source's offset */
    int streaming;      /* an object: a streamed range is open at pos */
    uint8_t **held;     /* [n_chunks]: header and stored bytes of a chunk not yet released */
    uint8_t *released;  /* [n_chunks] */
    uint8_t *wanted;    /* [n_chunks] */
    int passes;
    tq_status failed; /* a failure is final: the source's place is lost */
    char why[512];
};

int tqkv_streamed(const tqkv_reader *r)
{
    if (!r->stream) return 0;
    return r->stream->ranged ? 2 : 1;
}

void tqkv_stream_free(tqkv_reader *r)
{
    tqkv_stream *s = r->stream;
    if (!s) return;
    for (uint64_t i = 0; s->held && i < r->n_chunks; i++) free(s->held[i]);
    free(s->held);
    free(s->released);
    free(s->wanted);
    free(s->index);
    tq_src_close(s->src);
    pthread_mutex_destroy(&s->mu);
    free(s);
    r->stream = NULL;
}

/* Exactly n bytes in order, or "truncated" at offset at. */
static tq_status read_exact(tq_ctx *ctx, tqkv_reader *r, void *buf, uint64_t n)
{
    uint64_t got;
    tq_status st = tq_src_read(ctx, r->stream->src, buf, n, &got);
    if (!st && got != n) st = tqkv_bad(ctx, r, "truncated snapshot", r->stream->pos + got);
    if (!st) r->stream->pos += n;
    return st;
}

/* A pipe's header (its first got bytes, read when it was opened) and metadata, read in order
 * (the metadata as it comes, so a header that claims more than arrives costs no more memory
 * than what arrived). */
static tq_status head_of_pipe(tq_ctx *ctx, tqkv_reader *r, const uint8_t *head, uint64_t got)
{
    uint64_t ml;
    tq_status st = TQ_OK;
    if (got < HDR_LEN)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a .tqkv snapshot", r->label);
    if (!st) st = tqkv_check_header(ctx, r, head, HDR_LEN, &ml);
    if (st) return st;
    r->stream->pos = HDR_LEN;
    uint64_t cap = ml < (64u << 20) ? ml : (64u << 20);
    uint8_t *meta = malloc(cap ? cap : 1); /* [ml]: grown as it arrives */
    for (uint64_t have = 0; !st && have < ml;) {
        if (have == cap) {
            cap = 2 * cap < ml ? 2 * cap : ml;
            uint8_t *m = realloc(meta, cap);
            if (!m) {
                st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
                break;
            }
            meta = m;
        }
        uint64_t want = cap - have;
        st = meta ? read_exact(ctx, r, meta + have, want) : TQ_ERR_NOMEM;
        have += want;
    }
    if (!meta) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tqkv_check_meta(ctx, r, head, meta, ml);
    free(meta);
    r->stream->data0 = HDR_LEN + ml;
    return st;
}

/* An object's header and metadata: one ranged GET for both, mostly (its first bytes, buf's
 * first of FIRST_GET, read when it was opened: buf is taken). */
static tq_status head_of_object(tq_ctx *ctx, tqkv_reader *r, uint8_t *buf, uint64_t first)
{
    tqkv_stream *s = r->stream;
    uint64_t size = 0, ml;
    tq_status st = tq_src_size(ctx, s->src, &size);
    if (!st && size < HDR_LEN + TRAILER_LEN)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a .tqkv snapshot", r->label);
    if (!st) st = tqkv_check_header(ctx, r, buf, first, &ml);
    if (!st && ml > size - HDR_LEN - TRAILER_LEN)
        st = tqkv_bad(ctx, r, "metadata runs past the end", 8);
    if (!st && HDR_LEN + ml > first) {
        uint8_t *b = realloc(buf, HDR_LEN + ml);
        st = b ? tq_src_read_at(ctx, s->src, first, b + first, HDR_LEN + ml - first) : TQ_ERR_NOMEM;
        if (b) buf = b;
    }
    if (!buf || st == TQ_ERR_NOMEM) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tqkv_check_meta(ctx, r, buf, buf + HDR_LEN, ml);
    free(buf);
    r->size = size;
    s->data0 = HDR_LEN + ml;
    return st;
}

/* Every chunk's tensor and rows, as the metadata cuts them; a kept chunk's length too. */
static tq_status chunk_list(tq_ctx *ctx, tqkv_reader *r)
{
    const tqkv_meta *m = &r->meta;
    uint64_t n = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) n += tqkv_record_n_chunks(&m->t[i]);
    r->chunks = calloc(n ? n : 1, sizeof *r->chunks);
    r->n_chunks = n;
    tqkv_stream *s = r->stream;
    s->held = calloc(n ? n : 1, sizeof *s->held);
    s->released = calloc(n ? n : 1, 1);
    s->wanted = malloc(n ? n : 1);
    if (!r->chunks || !s->held || !s->released || !s->wanted)
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memset(s->wanted, 1, n ? n : 1);
    uint64_t k = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        for (uint32_t c = 0; c < tqkv_record_n_chunks(t); c++, k++) {
            tqkv_chunk *ch = &r->chunks[k];
            int ok;
            ch->tensor = i;
            tqkv_record_chunk_rows(t, c, &ch->row0, &ch->nrows);
            if (t->codec == TQKV_CODEC_RAW || tqkv_chunk_is_sink(t, ch->row0))
                ch->raw_len = tqkv_expected_raw(ctx, t, ch->row0, ch->nrows, &ok);
        }
    }
    return TQ_OK;
}

/* An object's trailer and index: each chunk's offset and stored length. */
static tq_status index_of_object(tq_ctx *ctx, tqkv_reader *r)
{
    tqkv_stream *s = r->stream;
    uint64_t nc, ioff, ih, n = r->size;
    /* the metadata's chunk count sizes the index: index and trailer in one ranged GET of at
       least FIRST_GET bytes (a small answer waits for a delayed ACK: 40-50 ms a request on
       radosgw, where the bytes before the index cost a few hundred microseconds) */
    uint64_t tail = r->n_chunks * 8 + TRAILER_LEN;
    if (tail > n - s->data0) return tqkv_bad(ctx, r, "index placement", n - TRAILER_LEN);
    uint64_t get = n - s->data0 < FIRST_GET ? n - s->data0 : FIRST_GET;
    if (get < tail) get = tail;
    s->index = malloc(get); /* [get]: chunk bytes, [n_chunks] offsets, then the trailer */
    if (!s->index) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_src_read_at(ctx, s->src, n - get, s->index, get);
    if (st) return st;
    memmove(s->index, (uint8_t *)s->index + (get - tail), tail);
    const uint8_t *tr = (const uint8_t *)s->index + r->n_chunks * 8;
    memcpy(&nc, tr, 8);
    memcpy(&ioff, tr + 8, 8);
    memcpy(&ih, tr + 16, 8);
    if (memcmp(tr + 24, END_MAGIC, 8))
        return tqkv_bad(ctx, r, "trailer missing (truncated snapshot?)", n - TRAILER_LEN);
    if (nc != r->n_chunks || ioff != n - tail)
        return tqkv_bad(ctx, r, "index placement", n - TRAILER_LEN);
    if (tqkv_hash2(s->index, nc * 8, tr, 16) != ih)
        return tqkv_bad(ctx, r, "index checksum mismatch", ioff);
    s->index_off = ioff;
    for (uint64_t i = 0; i < nc; i++) {
        uint64_t end = i + 1 < nc ? s->index[i + 1] : ioff;
        uint64_t at = s->index[i];
        if (at != (i ? r->chunks[i - 1].offset + CHUNK_HDR + r->chunks[i - 1].stored_len
                     : s->data0) ||
            end < at || end - at < CHUNK_HDR)
            return tqkv_bad(ctx, r, "chunk index entry", ioff + 8 * i);
        r->chunks[i].offset = at;
        r->chunks[i].stored_len = end - at - CHUNK_HDR;
    }
    if (nc ? r->chunks[nc - 1].offset + CHUNK_HDR + r->chunks[nc - 1].stored_len != ioff
           : ioff != s->data0)
        return tqkv_bad(ctx, r, "chunks do not cover every tensor", ioff);
    return TQ_OK;
}

/* A sealed snapshot, read whole (head: the first of its bytes, already read) and opened in
 * memory; the source is closed. */
static tq_status open_sealed(tq_ctx *ctx, tq_src *src, const uint8_t *head, uint64_t n_head,
                             tqkv_reader **out)
{
    uint64_t size = 0;
    uint8_t *all = NULL;
    tq_status st = TQ_OK;
    if (tq_src_ranged(src)) {
        st = tq_src_size(ctx, src, &size);
        if (!st && !(all = malloc(size ? size : 1)))
            st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        if (!st) memcpy(all, head, n_head < size ? n_head : size);
        if (!st && size > n_head) st = tq_src_read_at(ctx, src, n_head, all + n_head,
                                                      size - n_head);
    } else { /* a pipe: its bytes as they come, the buffer doubled */
        uint64_t cap = 1u << 20;
        all = malloc(cap);
        if (!all) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        if (all) memcpy(all, head, n_head);
        size = n_head;
        for (uint64_t got = 1; !st && got;) {
            if (size == cap) {
                uint8_t *b = realloc(all, cap * 2);
                if (!b) {
                    st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
                    break;
                }
                all = b;
                cap *= 2;
            }
            st = tq_src_read(ctx, src, all + size, cap - size, &got);
            if (!st) size += got;
        }
    }
    if (!st) st = tqkv_open_memory(ctx, all, size, tq_src_name(src), out);
    free(all); /* opened: the reader holds the plaintext */
    tq_src_close(src);
    return st;
}

tq_status tqkv_open_src(tq_ctx *ctx, struct tq_src *src, tqkv_reader **out)
{
    uint8_t *first = malloc(FIRST_GET); /* [FIRST_GET]: an object's first bytes */
    uint64_t n_first = 0;
    *out = NULL;
    tq_status st = first ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    /* the first bytes tell a sealed snapshot: a pipe's are read now (no peek: an object read
       in order makes no request before its streamed one) */
    if (!st && tq_src_ranged(src)) st = tq_src_read_head(ctx, src, first, FIRST_GET, &n_first);
    else if (!st) st = tq_src_read(ctx, src, first, HDR_LEN, &n_first);
    if (!st && tq_seal_is_sealed(first, n_first)) {
        st = open_sealed(ctx, src, first, n_first, out);
        free(first);
        return st;
    }
    if (!st && tq_seal_keys_current()) st = tqkv_refuse_plain(ctx, tq_src_name(src));
    if (st) {
        free(first);
        tq_src_close(src);
        return st;
    }
    tqkv_reader *r = calloc(1, sizeof *r);
    if (r) r->stream = calloc(1, sizeof *r->stream);
    if (r && r->stream) r->label = strdup(tq_src_name(src));
    if (!r || !r->stream || !r->label) {
        if (r) free(r->stream);
        free(r);
        free(first);
        tq_src_close(src);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tqkv_stream *s = r->stream;
    s->src = src;
    s->ranged = tq_src_ranged(src);
    pthread_mutex_init(&s->mu, NULL);
    if (s->ranged) {
        st = head_of_object(ctx, r, first, n_first);
    } else {
        st = head_of_pipe(ctx, r, first, n_first);
        free(first);
    }
    if (!st) st = chunk_list(ctx, r);
    if (!st && s->ranged) st = index_of_object(ctx, r);
    if (st) {
        tqkv_close(r);
        return st;
    }
    *out = r;
    return TQ_OK;
}

tq_status tqkv_fetch_plan(tq_ctx *ctx, const tqkv_reader *cr, const uint8_t *wanted)
{
    tqkv_reader *r = (tqkv_reader *)cr; /* the fetch state is the reader's own */
    tqkv_stream *s = r->stream;
    if (!s) return TQ_OK;
    if (!s->ranged && s->passes)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "%s: a pipe is read once; this needs the snapshot as a file",
                                r->label);
    s->passes++;
    if (!s->ranged) return TQ_OK; /* a pipe's chunks all pass: the unwanted are dropped */
    for (uint64_t i = 0; i < r->n_chunks; i++) {
        free(s->held[i]);
        s->held[i] = NULL;
        s->released[i] = 0;
        s->wanted[i] = wanted ? wanted[i] != 0 : 1;
    }
    s->next = 0;
    s->streaming = 0;
    return TQ_OK;
}

/* An object: a streamed GET from chunk k through the last wanted chunk after it without a gap. */
static tq_status stream_run(tq_ctx *ctx, tqkv_reader *r, uint64_t k)
{
    tqkv_stream *s = r->stream;
    uint64_t j = k;
    while (j + 1 < r->n_chunks && s->wanted[j + 1]) j++;
    uint64_t end = j + 1 < r->n_chunks ? s->index[j + 1] : s->index_off;
    s->pos = s->index[k];
    s->streaming = 1;
    return tq_src_stream(ctx, s->src, s->index[k], end - s->index[k]);
}

/* Chunk k's header and stored bytes, the next in the source: checked against the metadata's
 * cut (and an object's index), its checksum, then its lengths. */
static tq_status arrive(tq_ctx *ctx, tqkv_reader *r, uint64_t k)
{
    tqkv_stream *s = r->stream;
    tqkv_chunk *ch = &r->chunks[k];
    uint8_t h[CHUNK_HDR];
    uint32_t magic, tensor, row0, nrows;
    uint64_t hash, stored;
    tq_status st = TQ_OK;
    if (s->ranged && (!s->streaming || s->pos != s->index[k])) st = stream_run(ctx, r, k);
    uint64_t at = s->pos;
    if (!st) st = read_exact(ctx, r, h, CHUNK_HDR);
    if (st) return st;
    memcpy(&magic, h, 4);
    memcpy(&tensor, h + 4, 4);
    memcpy(&row0, h + 8, 4);
    memcpy(&nrows, h + 12, 4);
    memcpy(&stored, h + 28, 8);
    memcpy(&hash, h + 36, 8);
    if (magic != CHUNK_MAGIC || stored > ZSTD_compressBound(MAX_PIECE) ||
        (s->ranged && stored != ch->stored_len))
        return tqkv_bad(ctx, r, "chunk header", at);
    if (tensor != ch->tensor || row0 != ch->row0 || nrows != ch->nrows || h[16] > 1)
        return tqkv_bad(ctx, r, "chunk out of order", at);
    uint8_t *buf = malloc(CHUNK_HDR + stored); /* [44 + stored]: header, stored payload */
    if (!buf) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(buf, h, CHUNK_HDR);
    if ((st = read_exact(ctx, r, buf + CHUNK_HDR, stored))) {
        free(buf);
        return st;
    }
    ch->offset = at;
    ch->zstd = h[16];
    memcpy(&ch->raw_len, h + 20, 8);
    ch->stored_len = stored;
    ch->stored = buf + CHUNK_HDR;
    if (tqkv_hash2(h, 36, buf + CHUNK_HDR, stored) != hash)
        st = tqkv_bad(ctx, r, "chunk checksum mismatch", at);
    if (!st) st = tqkv_check_chunk_rows(ctx, r, &r->meta.t[tensor], ch);
    if (st || s->released[k] || !s->wanted[k]) {
        free(buf);
        ch->stored = NULL;
    } else {
        s->held[k] = buf;
    }
    return st;
}

/* Chunks up to i as the pass wants them (lock held); a failure stays. */
static tq_status advance(tq_ctx *ctx, tqkv_reader *r, uint64_t i)
{
    tqkv_stream *s = r->stream;
    tq_status st = s->failed;
    if (st) return tq_ctx_set_error(ctx, st, "%s", s->why);
    for (; !st && s->next <= i && s->next < r->n_chunks; s->next++)
        if (!s->ranged || s->wanted[s->next]) st = arrive(ctx, r, s->next);
    if (st) {
        s->failed = st;
        snprintf(s->why, sizeof s->why, "%s", tq_ctx_error(ctx));
    }
    return st;
}

tq_status tqkv_chunk_fetch(tq_ctx *ctx, const tqkv_reader *cr, uint64_t i)
{
    tqkv_reader *r = (tqkv_reader *)cr;
    tqkv_stream *s = r->stream;
    if (!s) return TQ_OK;
    pthread_mutex_lock(&s->mu);
    tq_status st = advance(ctx, r, i);
    if (!st && !s->held[i])
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "%s: chunk %" PRIu64 " is not in this pass",
                              r->label, i);
    pthread_mutex_unlock(&s->mu);
    return st;
}

void tqkv_chunk_release(const tqkv_reader *cr, uint64_t i)
{
    tqkv_reader *r = (tqkv_reader *)cr;
    tqkv_stream *s = r->stream;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->released[i] = 1;
    free(s->held[i]);
    s->held[i] = NULL;
    r->chunks[i].stored = NULL;
    pthread_mutex_unlock(&s->mu);
}

/* A pipe's index and trailer, after its last chunk: the offsets the chunks came at, the
 * checksum, and nothing after. */
static tq_status pipe_tail(tq_ctx *ctx, tqkv_reader *r)
{
    tqkv_stream *s = r->stream;
    uint64_t nc = r->n_chunks, ioff = s->pos, tnc, tioff, ih, got;
    uint8_t tr[TRAILER_LEN], extra;
    uint64_t *index = malloc(nc ? nc * 8 : 1); /* [nc] */
    if (!index) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = read_exact(ctx, r, index, nc * 8);
    for (uint64_t i = 0; !st && i < nc; i++)
        if (index[i] != r->chunks[i].offset) st = tqkv_bad(ctx, r, "chunk index entry", ioff);
    if (!st) st = read_exact(ctx, r, tr, TRAILER_LEN);
    if (!st) {
        memcpy(&tnc, tr, 8);
        memcpy(&tioff, tr + 8, 8);
        memcpy(&ih, tr + 16, 8);
        if (memcmp(tr + 24, END_MAGIC, 8))
            st = tqkv_bad(ctx, r, "trailer missing (truncated snapshot?)", s->pos - TRAILER_LEN);
        else if (tnc != nc || tioff != ioff)
            st = tqkv_bad(ctx, r, "index placement", s->pos - TRAILER_LEN);
        else if (tqkv_hash2(index, nc * 8, tr, 16) != ih)
            st = tqkv_bad(ctx, r, "index checksum mismatch", ioff);
    }
    free(index);
    if (!st) st = tq_src_read(ctx, s->src, &extra, 1, &got);
    if (!st && got) st = tqkv_bad(ctx, r, "bytes after the trailer", s->pos);
    if (!st) r->size = s->pos;
    return st;
}

tq_status tqkv_finish(tq_ctx *ctx, const tqkv_reader *cr)
{
    tqkv_reader *r = (tqkv_reader *)cr;
    tqkv_stream *s = r->stream;
    if (!s || s->ranged) return TQ_OK;
    pthread_mutex_lock(&s->mu);
    if (!s->passes) { /* a pass of its own (inspect): every chunk read and dropped */
        s->passes = 1;
        memset(s->released, 1, r->n_chunks);
    }
    tq_status st = r->n_chunks ? advance(ctx, r, r->n_chunks - 1) : TQ_OK;
    if (!st && !r->size) st = pipe_tail(ctx, r);
    pthread_mutex_unlock(&s->mu);
    return st;
}
