/* tqkv_read_impl.h - what the mapped reader (tqkv_read.c) and the streamed one (tqkv_stream.c)
 * share: the reader's state and the checks every chunk and the metadata pass; not an API. */
#ifndef TQ_TQKV_READ_IMPL_H
#define TQ_TQKV_READ_IMPL_H

#include "tqkv.h"

#include <string.h>

typedef struct tqkv_stream tqkv_stream;

struct tqkv_reader {
    const uint8_t *map; /* the whole snapshot (NULL when streamed) */
    uint64_t size;
    int mapped;
    char *label;
    tqkv_meta meta;
    tqkv_chunk *chunks;
    uint64_t n_chunks;
    uint32_t version;
    tqkv_stream *stream; /* read from a source (tqkv_open_src), else NULL */
    uint8_t *plain;      /* a sealed snapshot's bytes opened (seal.h): map points here */
};

/* A sealed snapshot's bytes opened into r (r->plain, r->map); a plain one refused when this
 * process holds keys (tq_seal_keys_current): planted bytes would pass every XXH64. */
tq_status tqkv_unseal(tq_ctx *ctx, tqkv_reader *r, const uint8_t *data, uint64_t size);
tq_status tqkv_refuse_plain(tq_ctx *ctx, const char *label);

/* payload bytes a chunk of nrows of tensor t must decode to (*ok 0: none can) */
uint64_t tqkv_expected_raw(tq_ctx *ctx, const tqkv_record *t, uint32_t row0, uint32_t nrows,
                           int *ok);
tq_status tqkv_bad(tq_ctx *ctx, const tqkv_reader *r, const char *what, uint64_t at);
/* A cursor over the metadata's bytes: mget copies n of them out, -1 where fewer are left. */
typedef struct mcur {
    const uint8_t *p;
    uint64_t n, pos;
} mcur;

static inline int mget(mcur *c, void *v, uint64_t n)
{
    if (n > c->n - c->pos) return -1;
    memcpy(v, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

/* payload bytes a chunk of nrows of tensor t must decode to */
/* Version 3: every tensor's extension, in tensor order (tqkv_read_ext.c). */
tq_status tqkv_parse_extensions(tq_ctx *ctx, tqkv_reader *r, mcur *c);
tq_status tqkv_parse_meta(tq_ctx *ctx, tqkv_reader *r, const uint8_t *p, uint64_t n);
/* A chunk's rows and lengths as its tensor's coding makes them (its stored bytes at hand). */
tq_status tqkv_check_chunk_rows(tq_ctx *ctx, const tqkv_reader *r, const tqkv_record *t,
                                const tqkv_chunk *ch);
uint64_t tqkv_hash2(const void *a, size_t an, const void *b, size_t bn);
void tqkv_stream_free(tqkv_reader *r);
/* The header's 32 bytes (of n at p): magic, checksum, version (set in r), *meta_len at most
 * MAX_META. */
tq_status tqkv_check_header(tq_ctx *ctx, tqkv_reader *r, const uint8_t *p, uint64_t n,
                            uint64_t *meta_len);
/* The metadata: its checksum (in the header at head), then every field. */
tq_status tqkv_check_meta(tq_ctx *ctx, tqkv_reader *r, const uint8_t *head, const uint8_t *meta,
                          uint64_t ml);
/* The metadata a reader may be asked to hold: a skeleton of up to MAX_PIECE and the tensors'
 * records. */
#define MAX_META (2 * MAX_PIECE)

#endif
