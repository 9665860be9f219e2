/*
 * ckpt.h - a server's context checkpoints (the TurboQuant+ fork's llama-server writes them
 * beside a saved slot file as FILE.ckpt, fork PR #206; LLAMA_STATE.md, "Checkpoint
 * sidecars"), and how the store keeps them (STORE.md, "Checkpoints").
 *
 * The sidecar, little-endian:
 *   1. u32 magic 0x4C434B50 ("PKCL")
 *   2. u32 version 1
 *   3. u32 count
 *   4. count checkpoints, each: i64 n_tokens, i32 pos_min, i32 pos_max, u64 n_tgt,
 *      u64 n_dft, then n_tgt bytes (the model's partial state: its sliding-window and
 *      recurrent memory) and n_dft bytes (a draft model's); a blob from a llama.cpp whose
 *      llama_state_seq_get_data writes an in-memory header begins with u32 0xaf143cd8 and
 *      i32 seq_id, then the memory's state as a sequence file holds it after its tokens
 *
 * The store's entry ckpt/NAME:
 *   1. u32 magic 0x4B435154 ("TQCK")
 *   2. u32 version 2
 *   3. u64 the length of 5 decompressed
 *   4. u64 XXH64 of 5 decompressed (seed 0)
 *   5. one zstd frame of: u32 count, then per checkpoint i64 n_tokens, i32 pos_min,
 *      i32 pos_max, u32 coding (0: the target blob as it was; 1: a .tqkv snapshot of it),
 *      u32 head (the blob's in-memory header bytes, kept: 0 or 8), u64 tgt (its stored
 *      bytes), u64 dft, then the head, tgt and dft bytes.  A coded blob is the memory's
 *      section wrapped as a sequence file of the checkpoint's first n_tokens tokens (u32
 *      magic, u32 version, u32 n_tokens, the tokens, the section) and encoded as any state.
 */
#ifndef TQ_CKPT_H
#define TQ_CKPT_H

#include "restore_point.h"
#include "tq.h"

#include <stdint.h>

#define TQ_CKPT_MAGIC 0x4C434B50u
#define TQ_CKPT_STORED_MAGIC 0x4B435154u
/* The most checkpoints a sidecar may hold: TQ_RESTORE_MAX_CHECKPOINTS (restore_point.h). */

typedef struct tq_ckpt {
    int64_t n_tokens;
    int32_t pos_min, pos_max;
    uint64_t off, len; /* the checkpoint's record (fields and blobs) in the sidecar */
} tq_ckpt;

/* Whether a checkpoint's blob begins with llama.cpp's in-memory sequence header (8 bytes:
 * u32 0xaf143cd8, i32 seq_id) before the memory's state. */
int tq_ckpt_blob_header(const uint8_t *blob);

/* Checks a sidecar of a state of n_tokens tokens and lists its checkpoints (at most
 * TQ_RESTORE_MAX_CHECKPOINTS; each n_tokens in 1..n_tokens, ascending); the bytes must add up
 * exactly. */
tq_status tq_ckpt_parse(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint32_t n_tokens,
                        tq_ckpt *out, uint32_t *count);
/* The sidecar holding only the checkpoints at or below upto tokens (malloc'd); *kept their
 * number. */
tq_status tq_ckpt_upto(tq_ctx *ctx, const uint8_t *p, const tq_ckpt *c, uint32_t count,
                       uint32_t upto, uint8_t **out, uint64_t *len, uint32_t *kept);
/* How a checkpoint's target blob is coded for the store: the blob (its in-memory header
 * left out) into `coded` (malloc'd), or 0 with *coded NULL to keep it as it is.  user: the
 * caller's. */
typedef tq_status (*tq_ckpt_coder)(void *user, const uint8_t *blob, uint64_t n,
                                   int64_t n_tokens, uint8_t **coded, uint64_t *coded_len);
/* A coded blob back (malloc'd). */
typedef tq_status (*tq_ckpt_decoder)(void *user, const uint8_t *coded, uint64_t n,
                                     int64_t n_tokens, uint8_t **blob, uint64_t *blob_len);

/* A parsed sidecar as the store keeps it (malloc'd); code NULL: every blob as it is. */
tq_status tq_ckpt_pack(tq_ctx *ctx, const uint8_t *p, const tq_ckpt *c, uint32_t count,
                       tq_ckpt_coder code, void *user, uint8_t **out, uint64_t *len);
/* The sidecar back from the store's bytes, its checksum verified, coded blobs decoded by
 * decode; at most max_len bytes. */
tq_status tq_ckpt_unpack(tq_ctx *ctx, const uint8_t *p, uint64_t n, uint64_t max_len,
                         tq_ckpt_decoder decode, void *user, uint8_t **out, uint64_t *len);

#endif
