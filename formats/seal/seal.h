/*
 * seal.h - sealed bytes (SEAL.md): a snapshot or a store entry encrypted and authenticated
 * with AES-256-GCM (OpenSSL's libcrypto) under a 32-byte key of the user's, in segments, so
 * that a flipped, cut, reordered or spliced byte is refused before any of it is used, by
 * someone who can recompute every XXH64 as well.
 *
 * The layout, front to back:
 *   1. header, 56 bytes, in the clear (and the associated data of every segment):
 *      "TQKS", u32 version (1), u8[8] key id (HMAC-SHA256(key, "tq key id 1"), its first 8
 *      bytes), u8[32] salt (random, a file's own), u32 log2 of the segment size (16),
 *      u32 reserved (0)
 *   2. segments: the plaintext in pieces of 2^16 bytes, the last 0..2^16 of them (0 only
 *      when it is the only one), each its ciphertext and a 16-byte tag; segment i under the
 *      file's key HKDF-SHA256(key, salt, "tq sealed 1") and the nonce u8 last (1 for the
 *      last segment, else 0), u8[3] 0, u64 i big-endian
 *
 * A file's key is its own (a random salt), so no nonce repeats under a key; a segment moved
 * to another place or file, a header taken from another file, or a file cut at a segment's
 * end fails its tag.
 */
#ifndef TQ_SEAL_H
#define TQ_SEAL_H

#include "tq.h"

#include <stdint.h>
#include <stdio.h>

#define TQ_SEAL_KEY_BYTES 32
#define TQ_SEAL_HEADER 56
#define TQ_SEAL_MAX_KEYS 8

/* The keys a run holds: the first seals what it writes; any of them opens what it reads
 * (a key being rotated: the new one first, the old after it). */
typedef struct tq_seal_keys {
    uint32_t n;
    uint8_t key[TQ_SEAL_MAX_KEYS][TQ_SEAL_KEY_BYTES];
    uint8_t id[TQ_SEAL_MAX_KEYS][8];
} tq_seal_keys;

/* A key file's 32 raw bytes added to keys; *exposed 1 when others than its owner may read
 * it (the caller warns). */
tq_status tq_seal_keys_load(tq_ctx *ctx, const char *path, tq_seal_keys *keys, int *exposed);
/* A key's 32 bytes added to keys (its id made); TQ_ERR_ARG when keys is full. */
tq_status tq_seal_keys_add(tq_ctx *ctx, tq_seal_keys *keys, const uint8_t key[TQ_SEAL_KEY_BYTES]);
/* A key's id as text: 16 hex digits (buf: 17 bytes). */
void tq_seal_key_id_hex(const uint8_t id[8], char *buf);

/* The keys of this process (set once, before any thread starts): every snapshot and store
 * entry it writes is sealed, and it reads only sealed ones.  NULL or none: plain, as without
 * keys. */
void tq_seal_keys_use(const tq_seal_keys *keys);
const tq_seal_keys *tq_seal_keys_current(void);

/* Keyed hashes for names (a store's, STORE.md "Sealed stores"): out[i] is the first 8 bytes
 * (big-endian) of HMAC-SHA256(keys' first key, label || data[0 .. (i + 1) * stride)), for i
 * below k; 0 when the library fails. */
int tq_seal_mac64_prefixes(const tq_seal_keys *keys, const char *label, const void *data,
                           size_t stride, size_t k, uint64_t *out);

/* 1 when bytes begin as sealed bytes do. */
int tq_seal_is_sealed(const void *head, uint64_t n);
/* The key id of sealed bytes (at least TQ_SEAL_HEADER of them). */
void tq_seal_key_id_of(const void *head, uint8_t id[8]);

/* Sealed bytes opened: the plaintext (malloc'd, *plain_n bytes) under one of keys; label
 * names them in messages.  No key of theirs: TQ_ERR_UNSUPPORTED; a tag that fails:
 * TQ_ERR_CORRUPT. */
tq_status tq_seal_open(tq_ctx *ctx, const tq_seal_keys *keys, const char *label,
                       const uint8_t *sealed, uint64_t n, uint8_t **plain, uint64_t *plain_n);
/* Bytes sealed whole under keys' first key (malloc'd). */
tq_status tq_seal_bytes(tq_ctx *ctx, const tq_seal_keys *keys, const void *plain, uint64_t n,
                        uint8_t **sealed, uint64_t *sealed_n);

/* A stream sealed as it is written: the plaintext goes to *plain, the sealed bytes to dst
 * (whose header is written now).  tq_sealer_finish seals the last segment and closes
 * *plain (dst stays the caller's to flush and close); abort closes it and writes no more. */
typedef struct tq_sealer tq_sealer;
tq_status tq_sealer_begin(tq_ctx *ctx, const tq_seal_keys *keys, FILE *dst, tq_sealer **s,
                          FILE **plain);
tq_status tq_sealer_finish(tq_ctx *ctx, tq_sealer *s);
void tq_sealer_abort(tq_sealer *s);

#endif
