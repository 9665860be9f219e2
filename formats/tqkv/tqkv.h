/*
 * tqkv.h - the .tqkv snapshot container (spec and tables: formats/tqkv/TQKV.md).
 *
 * A snapshot holds one llama.cpp state file: every byte that is not K/V row
 * data (the "skeleton": header, tokens, cell metadata, per-layer headers) is
 * kept verbatim (zstd-compressed), and the K/V rows of each tensor are coded
 * in independently decodable, checksummed chunks.  The container knows bytes
 * and checksums; formats/snapshot/ applies the codecs.
 *
 * The layout, little-endian, XXH64 (seed 0) checksums, front to back:
 *   1. header, 32 bytes: "TQKV", u32 version (1..3), u64 metadata length,
 *      u64 XXH64 of the metadata, u64 XXH64 of header bytes 0..23
 *   2. metadata: source kind, fingerprint flag, source version and size,
 *      model fingerprint, tokens, architecture, type-id profile, base id
 *      and name, the skeleton (one zstd frame), the tensor count, then
 *      a. one 72-byte record per K/V tensor: where its rows sit in the
 *         source, layer, K/V, codec, bits, group, seed, flags, model layer
 *      b. version 2: the InnerQ scales of the records that flag them
 *      c. version 3: the extensions (sink rows, K offsets, RoPE, planes,
 *         the transforms of codec 6, coarse rows past a sliding window,
 *         the source's Hadamard rotation)
 *   3. chunks, in tensor order, rows ascending: a 44-byte header ("TQCK",
 *      tensor, first row, row count, zstd flag, raw and stored length,
 *      XXH64) and the payload (source bytes, or coded blocks)
 *   4. index: u64 offset of every chunk header
 *   5. trailer, 32 bytes: u64 chunk count, u64 index offset, u64 XXH64 of
 *      the index and these 16 bytes, "TQKVEND\0"
 */
#ifndef TQ_TQKV_H
#define TQ_TQKV_H

#include "tq.h"

#include <stdint.h>
#include <stdio.h>

struct tq_src;

#ifdef __cplusplus
extern "C" {
#endif

#define TQKV_VERSION                                                                               \
    3 /* 2 adds InnerQ scales, 3 model layers and the group-guessed flag; files                    \
         without them are written as the lowest version that holds them */
#define TQKV_NO_MODEL_LAYER UINT32_MAX
/* A growing tensor's first chunk of each part (tqkv_record.chunks_grow). */
#define TQKV_GROW_ROWS 1024u

/* source_kind holds the view's tq_kv_kind (kv_view.h): its values are the
 * codes on disk (0 session, 1 sequence, 2 NumPy) and must not change. */
enum {
    TQKV_CODEC_RAW = 0,
    TQKV_CODEC_TQ = 1,
    TQKV_CODEC_TURBO = 2,
    TQKV_CODEC_ANGLE = 3,
    TQKV_CODEC_PROD = 4,
    TQKV_CODEC_KLT = 6 /* version 3: transform coding (TQKV.md, "Transform coding") */
};
/* On disk only (version 3): a TQ tensor with uniform cells; read back as
 * codec TQKV_CODEC_TQ with `uniform` set. */
#define TQKV_CODEC_TQ_UNIFORM_ID 5

/* One KV head's transform (codec KLT): m basis rows of `group` values,
 * strongest component first, and the quantizer step of their coefficients. */
typedef struct tqkv_klt {
    uint32_t m;
    float step;
    float *basis; /* [m][group]: f16 values (stored as f16), orthonormal rows */
} tqkv_klt;

/* One K or V tensor of the source state. */
typedef struct tqkv_record {
    uint64_t file_off, bytes; /* where its rows sit in the source file */
    uint32_t kv_state, stream, layer;
    uint8_t is_v, transposed;
    uint8_t codec;                 /* TQKV_CODEC_*; TURBO = the fork's turbo2/3/4 blocks */
    uint8_t bits, norm_correction; /* TQ codec */
    uint32_t group;                /* TQ codec */
    uint64_t seed;                 /* TQ codec */
    uint32_t cells;
    uint64_t width;  /* elements per cell row */
    int32_t type_id; /* source element type (in the profile) */
    uint32_t rows_per_chunk;
    uint32_t row_start;    /* rows [0, row_start) are in the base snapshot */
    uint32_t model_layer;  /* version 3: the model layer (iSWA caches), else TQKV_NO_MODEL_LAYER */
    uint8_t group_guessed; /* version 3: the group was guessed from the row width */
    uint8_t radius_bits;   /* version 3, ANGLE codec: bits per pair radius */
    float *innerq;         /* TQ codec: innerq_n per-channel scales applied before
                              coding (x_j * s_j), divided out after decoding;
                              NULL if none (owned by the meta) */
    uint32_t innerq_n;     /* group (every head alike) or width (version 3: per head) */
    uint32_t sink_rows;    /* version 3, coded tensors: rows [0, sink_rows) kept exact in the
                              source type, as the tensor's first chunk (attention sinks) */
    uint8_t has_ext;       /* version 3, as read: the record's flag bit 7 (an extension
                              with sink rows, offsets and/or planes follows the scales) */
    float *offset;         /* version 3, coded tensors: width values subtracted from every
                              (InnerQ-scaled) row before coding, added back after decoding;
                              NULL if none (owned by the meta) */
    int32_t *rope_pos;     /* version 3, with offset: the offset is K's pre-RoPE mean b; row r
                              codes k - R(rope_pos[r]) b before InnerQ scaling (tq_rope_add);
                              cells positions, NULL if none (owned by the meta) */
    tq_rope rope;          /* with rope_pos: the rotation R */
    uint8_t uniform;       /* TQ codec: uniform cells (tq_codec_desc.uniform; version 3) */
    uint8_t planes;        /* version 3, TQ codec: coded chunks hold their blocks as planes
                              (tq_blocks_to_planes), for zstd to entropy-code */
    tqkv_klt *klt;         /* KLT codec: width / group heads' transforms (owned by the meta) */
    uint8_t klt_rans;      /* KLT codec: chunks hold each component's indices as a rANS stream
                              (extension flag bit 6; 0: a byte an index, for zstd) */
    uint8_t chunks_grow; /* KLT codec: each part's chunks (coarse rows, the others) grow from
                            TQKV_GROW_ROWS rows, doubling, to rows_per_chunk (extension flag bit
                            10): a token prefix is read from few of the bytes */
    uint8_t klt_rans_coarse; /* KLT codec with klt_rans: only the chunks of coarse rows hold
                                rANS streams, the others index bytes for zstd (extension flag
                                bit 9: the newest rows, finer, are too few to pay for a model
                                a component) */
    uint8_t klt_basis8;    /* KLT codec: bases stored as a byte a value, a power of two a row
                              (tqkv_basis_round; extension flag bit 8; 0: fp16 values) */
    uint8_t klt_gain;      /* KLT codec: each head's rows coded at unit norm, their gains (a
                              byte each, tqkv_gain) ahead of the indices in every coded chunk
                              (extension flag bit 7) */
    double klt_rate;       /* KLT codec, as planned (not stored): the indices' bits per value
                              the encoder measured on its sample; 0 when read from a file */
    /* version 3, coded tensors: rows from the sinks (or row_start) up to coarse_end are coded
       coarser, as tqkv_record_coarse describes (cells that a sliding-window layer no longer
       attends to: kv_plan.c); 0: none */
    uint32_t coarse_end;
    uint8_t coarse_bits, coarse_uniform, coarse_nc, coarse_planes; /* block codecs: theirs */
    float coarse_scale;   /* KLT codec: their steps are the heads' steps times this (>= 1) */
    float klt_step_scale; /* in memory, KLT codec: every head's step times this (0: 1); set in
                             the coarse rows' record */
    /* version 3: the source stores the rows rotated by the normalized Walsh-Hadamard matrix in
       blocks of this many values (llama.cpp's attention rotation of quantized caches); coded
       rows were turned back (tq_hadamard_blocks) before coding.  0: as stored */
    uint32_t hadamard;
    /* version 3, an appended tensor: its rows in coded order are the base's rows [base_from,
       base_from + row_start), then its own; the base's sit at its rows [share_at, share_at +
       row_start), its own around them (tqkv_record_row: a sliding window that moved since the
       base was saved shares the cells the base holds).  Both 0: the base's rows come first. */
    uint32_t share_at, base_from;
    uint8_t from_base; /* appended: the coding's tables are the base's tensor's, not stored
                          again: its InnerQ scales, offsets and transform bases (of a KLT
                          record each head's m and step are stored); as read, innerq, offset
                          and the bases NULL until the decoder lends the base's */
} tqkv_record;

typedef struct tqkv_meta {
    uint8_t source_kind;
    uint32_t state_version;
    uint64_t source_size;
    uint32_t n_tokens;
    int32_t *tokens;
    char *arch;
    char profile[24];
    uint8_t has_fingerprint;
    uint64_t fingerprint;
    uint64_t base_id;  /* XXH64 of the whole base snapshot (--append), 0 if none */
    char *base_name;   /* the base's file name as given to encode ("" if none) */
    uint8_t *skeleton; /* decompressed */
    uint64_t skeleton_len;
    uint32_t n_tensors;
    tqkv_record *t;
} tqkv_meta;

void tqkv_meta_free(tqkv_meta *m);
/* The row of the source that t's coded row c is (coded order: the base's rows, then its own;
 * tqkv_record.share_at). */
uint32_t tqkv_record_row(const tqkv_record *t, uint32_t c);
/* How tensor t's rows [row_start, cells) are cut into chunks: its sink rows
 * (if it stores them) form chunk 0, then chunks of rows_per_chunk. */
uint32_t tqkv_record_n_chunks(const tqkv_record *t);
void tqkv_record_chunk_rows(const tqkv_record *t, uint32_t k, uint32_t *row0, uint32_t *nrows);
/* KLT codec: the coded components of all heads (the chunk payload holds a
 * byte per component and row, then 2 bytes per escaped index: kv_klt.h). */
uint64_t tqkv_klt_components(const tqkv_record *t);
/* KLT codec with klt_rans: the most a chunk of nrows rows can hold (a rANS stream and
 * its escapes per component: kv_klt.h). */
uint64_t tqkv_klt_rans_bound(const tqkv_record *t, uint32_t nrows);
/* KLT codec with klt_gain: the gain a row's code stands for (0: 0; c: 2^((c - 128) / 8)), and
 * the code nearest to a row's norm (in log scale, no libm: the same on every machine). */
float tqkv_gain(uint8_t code);
/* A basis row of d values as stored (in place): fp16, or with basis8 each value q 2^(e - 7),
 * q in -127..127 and 2^e the power of two above the row's largest value (e of at least -32;
 * below, 0): exact scalings, the same on every machine. */
void tqkv_basis_round(int basis8, float *row, uint32_t d);
uint8_t tqkv_gain_code(float norm);
/* Whether a chunk starting at row0 holds the tensor's exact sink rows. */
int tqkv_chunk_is_sink(const tqkv_record *t, uint32_t row0);
/* Whether a chunk starting at row0 holds coarse rows (below coarse_end, past the sinks). */
int tqkv_chunk_is_coarse(const tqkv_record *t, uint32_t row0);
/* Whether a KLT chunk of t starting at row0 holds rANS streams (klt_rans, klt_rans_coarse). */
int tqkv_chunk_rans(const tqkv_record *t, uint32_t row0);
/* The record the coarse rows of t are coded by: t with the coarse bits, cells, norm correction
 * and planes (block codecs) or steps (KLT) and no coarse rows of its own; pointers shared. */
void tqkv_record_coarse(const tqkv_record *t, tqkv_record *out);
/* The libtq codec of a coded tensor (TQ or TURBO); -1 if the record is invalid. */
int tqkv_codec_desc(const tqkv_record *t, tq_codec_desc *d);
/* Whether t's rows are coded in blocks of a libtq codec (not kept, not
 * transform-coded). */
static inline int tqkv_record_has_blocks(const tqkv_record *t)
{
    return t->codec != TQKV_CODEC_RAW && t->codec != TQKV_CODEC_KLT;
}

/* ------------------------------------------------ writing (streams: pipes work) */

typedef struct tqkv_writer tqkv_writer;

tq_status tqkv_write_begin(tq_ctx *ctx, FILE *f, const tqkv_meta *m, tqkv_writer **out);
/* payload of rows [row0, row0+nrows) of tensor ti; zstd-compressed when it helps */
tq_status tqkv_write_chunk(tqkv_writer *w, uint32_t ti, uint32_t row0, uint32_t nrows,
                           const void *payload, uint64_t len, int zstd_level);
/* The same in two steps, so that compression and hashing can run on worker
 * threads: pack (thread-safe; *out is malloc'd header + stored payload), then
 * write packed chunks in order.  cuts: offsets where the payload's statistics
 * change (planes), each compressed in a zstd block of its own (0 cuts: none). */
tq_status tqkv_chunk_pack(uint32_t ti, uint32_t row0, uint32_t nrows, const void *payload,
                          uint64_t len, int zstd_level, const uint64_t *cuts, int n_cuts,
                          uint8_t **out, uint64_t *out_len);
tq_status tqkv_write_packed(tqkv_writer *w, const uint8_t *packed, uint64_t len);
tq_status tqkv_write_end(tqkv_writer *w); /* index and trailer; frees w */
void tqkv_writer_abort(tqkv_writer *w);
uint64_t tqkv_writer_bytes(const tqkv_writer *w);
/* what the snapshot will measure once tqkv_write_end adds the index and trailer */
uint64_t tqkv_writer_final_size(const tqkv_writer *w);

/* ------------------------------------------------ reading */

typedef struct tqkv_chunk {
    uint64_t offset; /* of its header */
    uint32_t tensor, row0, nrows;
    uint8_t zstd;
    uint64_t raw_len, stored_len;
    const uint8_t *stored;
} tqkv_chunk;

typedef struct tqkv_reader tqkv_reader;

/* Validates the header, metadata, index and every chunk checksum before
 * returning: a snapshot that opens is intact. */
tq_status tqkv_open(tq_ctx *ctx, const char *path, tqkv_reader **out);
tq_status tqkv_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                           tqkv_reader **out);
void tqkv_close(tqkv_reader *r);

/* A snapshot from a byte source (io.h: a pipe, read once front to back with no seek, or an
 * object read by ranges).  It opens once the header and metadata verify (an object's trailer
 * and index too); the chunk list comes from the metadata (and an object's index).  Chunks are
 * fetched as a pass asks for them, each verified as it arrives, and held until released, so
 * memory stays bounded by what a decode has in flight.  The reader takes the source. */
tq_status tqkv_open_src(tq_ctx *ctx, struct tq_src *src, tqkv_reader **out);
/* 0: mapped, every chunk verified at open; 1: from a pipe; 2: from an object. */
int tqkv_streamed(const tqkv_reader *r);
/* A pass over the chunks wanted[i] != 0 (NULL: all) in order: an object's are fetched as few
 * streamed ranges.  A pipe takes one pass, reading every chunk. */
tq_status tqkv_fetch_plan(tq_ctx *ctx, const tqkv_reader *r, const uint8_t *wanted);
/* Chunk i's stored bytes at hand (tqkv_chunk_at(r, i)->stored), read and verified; chunks
 * before it that the pass wants are held for their turn.  Thread-safe; a no-op when mapped. */
tq_status tqkv_chunk_fetch(tq_ctx *ctx, const tqkv_reader *r, uint64_t i);
void tqkv_chunk_release(const tqkv_reader *r, uint64_t i);
/* A pipe: every chunk left read and verified, then the index and trailer, then its end.  A
 * no-op otherwise (an object's index and trailer verify at open). */
tq_status tqkv_finish(tq_ctx *ctx, const tqkv_reader *r);
const tqkv_meta *tqkv_meta_of(const tqkv_reader *r);
uint64_t tqkv_n_chunks(const tqkv_reader *r);
uint32_t tqkv_version(const tqkv_reader *r);
const tqkv_chunk *tqkv_chunk_at(const tqkv_reader *r, uint64_t i);
uint64_t tqkv_size(const tqkv_reader *r);
/* The K/V values a snapshot's records hold (width x cells, summed). */
uint64_t tqkv_meta_values(const tqkv_meta *m);
/* What record i's chunks take in the file, their headers with them. */
uint64_t tqkv_record_stored(const tqkv_reader *r, uint32_t i);
/* A record's codec family as reports name it: raw, tq, turbo, angle, prod, klt. */
const char *tqkv_codec_family(unsigned codec);
/* XXH64 of all of a snapshot's bytes: what an appended snapshot records of its base. */
uint64_t tqkv_file_id(const tqkv_reader *r);
/* Decompresses chunk i into out (raw_len bytes). */
tq_status tqkv_chunk_read(tq_ctx *ctx, const tqkv_reader *r, uint64_t i, void *out);

int tqkv_is_snapshot(const void *data, size_t size); /* magic check */

#ifdef __cplusplus
}
#endif
#endif
