/* kv_decode_jobs.h - a snapshot's tensors on their way out (kv_snapshot_decode.c): each one's
 * chunks read, decoded and converted to the output's type, its layer header patched, its bytes
 * written; kv_decode_queue.c runs them over threads in file order.  Private to the decode. */
#ifndef TQ_KV_DECODE_JOBS_H
#define TQ_KV_DECODE_JOBS_H

#include "kv_chunk.h"
#include "kv_snapshot.h"

#include <stdio.h>

/* One tensor on its way out: where its chunks are and their decoded bytes. */
typedef struct djob {
    uint32_t i;
    const tqkv_record *t;   /* the snapshot's record, or own where the base lends to it */
    tqkv_record own;        /* the record with the base's transforms (tqkv_record.from_base) */
    const tq_ggml_type *ty, *oty;
    tq_codec *c, *c_coarse; /* the rows' block codec, the coarse rows' (NULL: none) */
    tqkv_record coarse;     /* the coarse rows' record (tqkv_record_coarse) */
    const tqkv_record *bt;  /* the base's record of the tensor (NULL: no rows there) */
    tqkv_record base_fine;  /* the record the base's fine rows decode by: its coarse end */
    tqkv_record base_coarse; /* and its coarse rows: the base's positions */
    uint64_t nb, bfirst, first, nch;
    uint32_t head_dim;
    uint32_t out_rot;       /* rows go out rotated in blocks of this (0: not) */
    chunk_out *co;
} djob;

tq_status tq_kvdec_put(tq_ctx *ctx, FILE *f, const void *p, uint64_t n);
/* Tensor i's job: its codecs, its chunks (the base's, then r's, from *ck on), the output type
 * (want[is_v], or its turbo type in out_prof's revision; TQ_PROFILE_AUTO: kept), the output's
 * rotation (for head_dim). */
tq_status tq_kvdec_job_setup(tq_ctx *ctx, const tqkv_meta *m, tq_type_profile prof,
                             const tq_ggml_type *const want[2], int out_prof,
                             const tqkv_reader *r, const tqkv_reader *base, uint32_t i,
                             uint32_t head_dim, uint64_t *ck, djob *j);
void tq_kvdec_job_free(djob *j);
/* The skeleton up to the tensor, its layer header patched for a new cache type. */
tq_status tq_kvdec_job_begin(tq_ctx *ctx, const tqkv_meta *m, const djob *j, FILE *out,
                             uint64_t *pos, uint64_t *sk);
tq_status tq_kvdec_chunk_status(tq_ctx *ctx, const djob *j, uint64_t k);
/* Whether the job's rows go out in another order than its chunks hold them: the base's rows
 * sit within its own (tqkv_record.share_at), or are not all of the base's rows. */
int tq_kvdec_job_is_moved(const djob *j);
/* A transposed V decoded, or a moved job: written whole once its last chunk is done. */
int tq_kvdec_job_is_whole(const djob *j);
tq_status tq_kvdec_job_write_whole(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                                   const djob *j, FILE *out);
/* Chunk ck of tensor t as the output's bytes (skip: zeros of that length). */
void tq_kvdec_decode_chunk(const tqkv_reader *r, const tqkv_record *t, const tq_codec *c,
                           const djob *j, uint64_t ck, int skip, tq_ctx *local, tq_ctx *dev,
                           chunk_out *o);
/* The model layer a record counts as for --layers. */
uint32_t tq_kvdec_layer_of(const tqkv_record *t);
/* Every tensor's chunks decoded over threads and written in file order. */
tq_status tq_kvdec_run(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                       const tq_kvsnap_decode_options *o, tq_type_profile prof,
                       const tq_ggml_type *const want[2], int out_prof, FILE *out);

#endif
