/*
 * kv_snapshot.h - a KV view <-> a .tqkv snapshot.  Encoding executes a
 * snapshot plan (kv_plan.h); decoding rebuilds the source file, or writes
 * it as another kind (session <-> sequence file, .npz), a token prefix or a
 * layer range.  Containers are in tqkv.h and the KV sources' headers; the
 * codecs in libtq.
 */
#ifndef TQ_KV_SNAPSHOT_H
#define TQ_KV_SNAPSHOT_H

#include "gguf.h"
#include "kv_plan.h"
#include "kv_view.h"
#include "tqkv.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_kvsnap_report {
    uint32_t n_tensors, n_coded, n_kept;
    uint64_t source_bytes, snapshot_bytes, kv_values, kv_bytes;
    uint32_t group_used;
    tq_head_source group_source; /* as tq_kvsnap_plan's */
} tq_kvsnap_report;

/* Codes the view as the plan says (at the zstd level it was made for; threads and progress
 * from run) and writes the snapshot to out.  Each tensor's rows are cut into chunks coded in
 * parallel and written in order: memory stays bounded by two tensors, the bytes are the same
 * for any thread count. */
tq_status tq_kvsnap_execute(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_plan *p,
                            const tq_kvsnap_run *run, FILE *out, tq_kvsnap_report *rep);
/* Prepare (tq_kvsnap_prepare: it may mark v's rotated tensors) and execute in one call: the
 * bytes encode-kvdump writes for the same request. */
tq_status tq_kvsnap_encode(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_request *q,
                           const tq_kvsnap_inputs *in, const tq_kvsnap_run *run, FILE *out,
                           tq_kvsnap_report *rep);

typedef struct tq_kvsnap_decode_options {
    int threads;            /* 0 = all */
    const char *cache_type; /* NULL: the original element types; else every K/V
                               tensor as "f32", "f16", "bf16" or the fork's
                               "turbo2"/"turbo3"/"turbo4" (heads zero-padded to
                               128s, as the fork allocates its cache) */
    const char *cache_type_v; /* V's type where it differs from K's (NULL: cache_type);
                                 q8_0 and q4_0 rows are written Hadamard-rotated as current
                                 llama.cpp stores them (heads of a multiple of 64) */
    uint32_t head_dim;      /* needed for turbo and quantized cache types */
    /* the fork revision turbo cache types are written for (a type-id profile's name: its
       ids, blocks and tables); NULL: the newest (TQ_PROFILE_NEWEST) */
    const char *fork_rev;
    /* Rows and layers that need not be decoded (a token prefix or a layer
     * range is wanted): their bytes are written as zeros, the file keeps its
     * layout, only the chunks wanted are read.  Rows below max_rows (0:
     * all) of layers in [layer_lo, layer_hi) (layer_hi 0: all). */
    uint32_t max_rows;
    uint32_t layer_lo, layer_hi;
    void (*on_progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} tq_kvsnap_decode_options;

/* An appended snapshot's base is given and is the one it records (TQ_OK without a base id). */
tq_status tq_kvsnap_check_base(tq_ctx *ctx, const tqkv_meta *m, const tqkv_reader *base);
/* Rebuilds the source file in its exact layout (opt may be NULL). */
tq_status tq_kvsnap_decode(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                           const tq_kvsnap_decode_options *opt, FILE *out);

/* A server's context checkpoint (formats/store/ckpt.h) coded as a snapshot: its partial state
 * wrapped as a sequence file (of state_version) of the session's first n_tokens tokens and
 * encoded with the session's request and run (no model: the partial state holds some of its
 * layers); one that does not code, or codes larger, is kept as it is (*coded NULL).  user: a
 * tq_kvsnap_ckpt_coding. */
typedef struct tq_kvsnap_ckpt_coding {
    tq_ctx *ctx;
    const tq_kvsnap_request *request; /* NULL: decoding only */
    const tq_kvsnap_inputs *inputs;
    const tq_kvsnap_run *run;
    const int32_t *tokens; /* the session's */
    uint32_t n_tokens;
    uint32_t state_version;
} tq_kvsnap_ckpt_coding;
tq_status tq_kvsnap_ckpt_code(void *user, const uint8_t *blob, uint64_t n, int64_t n_tokens,
                              uint8_t **coded, uint64_t *coded_len);
tq_status tq_kvsnap_ckpt_decode(void *user, const uint8_t *coded, uint64_t n, int64_t n_tokens,
                                uint8_t **blob, uint64_t *blob_len);

/* What a restore writes beyond a plain rebuild of the source. */
typedef struct tq_kvsnap_restore_options {
    tq_kv_kind format; /* the output: session, sequence file or .npz */
    uint32_t tokens;   /* only the first N tokens (0: all) */
    int has_layers;    /* .npz: only layers layer_lo..layer_hi */
    uint32_t layer_lo, layer_hi;
    const char *arch;     /* names the architecture of a session made from a sequence file */
    uint32_t head_dim;    /* shapes .npz arrays of state files; turbo cache types */
    const char *tmp_near; /* where the intermediate file may go (beside the output) */
    uint32_t pad_window;  /* state files: tq_state_rewrite.pad_window */
    const uint8_t *partial; /* state files: tq_state_rewrite.partial (a checkpoint's) */
    uint64_t partial_len;
} tq_kvsnap_restore_options;

/* The snapshot as asked: streamed straight out when it is the source as it
 * was; else decoded into an intermediate file (beside tmp_near, unlinked at
 * once), opened as a KV view and written by the writer of the format asked
 * for.  Only the chunks a token prefix or layer range needs are decoded. */
tq_status tq_kvsnap_restore(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                            const tq_kvsnap_decode_options *d, const tq_kvsnap_restore_options *ro,
                            FILE *out);

/* A snapshot (not an appended one) as a KV view: decoded into an unlinked
 * file beside tmp_near, mapped, opened through the front door; memory stays
 * bounded as for any mapped source. */
tq_status tq_kvsnap_open_view(tq_ctx *ctx, const tqkv_reader *r, const char *tmp_near,
                              tq_kv_view **out);

/* Any KV file tq reads, .tqkv snapshots included: the byte formats'
 * bidders and the snapshot's (kv_snapshot_view.c), by name (a file, - for a
 * pipe, s3://bucket/key: copied to an unlinked temporary file and mapped).  A
 * snapshot's model fingerprint: tq_kv_view_fingerprint. */
tq_status tq_kvsnap_open_any(tq_ctx *ctx, const char *name, tq_type_profile profile,
                             tq_kv_view **out);
extern const struct tq_kv_source tq_kv_source_snapshot;
/* A snapshot by name (a file, - for a pipe, s3://bucket/key), mapped: a pipe or an object is
 * copied to an unlinked temporary file first (formats/io), the bytes staying while it is open. */
tq_status tq_kvsnap_open_mapped(tq_ctx *ctx, const char *name, tqkv_reader **out);

/* A snapshot's source as a view of its skeleton (the source less its rows) over rows of
 * zeros, in an anonymous mapping whose pages are never written but the skeleton's: what its
 * cells are (positions, sequences) without decoding a row.  A state file's snapshot. */
typedef struct tq_kvsnap_layout {
    uint8_t *map; /* [size]: the source, its rows zeros */
    size_t size;
    tq_kv_view *v;
} tq_kvsnap_layout;
tq_status tq_kvsnap_layout_open(tq_ctx *ctx, const tqkv_reader *r, tq_kvsnap_layout *l);
void tq_kvsnap_layout_close(tq_kvsnap_layout *l);

#ifdef __cplusplus
}
#endif
#endif
