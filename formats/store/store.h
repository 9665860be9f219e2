/*
 * store.h - a snapshot store (STORE.md): a directory or an object-store prefix that many tq
 * processes share, holding
 * snapshots under content-derived names, an index of their token prefixes, and their last use.
 * Every change is one entry written whole and renamed into place, so that racing writers cost
 * at most a miss and a reader never sees half an entry.
 *
 * The entries, under the store's root:
 *   1. snap/NAME.tqkv          a snapshot; NAME = FP-HASH: the model fingerprint and the XXH64
 *                              of its tokens, 16 hex digits each
 *   2. idx/FP/PHASH/NAME       an empty entry: NAME's tokens begin with the prefix whose hash is
 *                              PHASH, one at every TQ_STORE_STRIDE tokens
 *   3. used/NAME               the time NAME was last saved or restored (decimal seconds)
 *   4. names/ALIAS             a user's name for a snapshot: NAME
 *   5. points/NAME             the token counts NAME restores at (tq_restore_points), text
 *   6. ckpt/NAME               the server's context checkpoints saved with NAME (STORE.md)
 */
#ifndef TQ_STORE_H
#define TQ_STORE_H

#include "ckpt.h"
#include "restore_point.h"
#include "tq.h"

#include <stdint.h>
#include <stdio.h>

/* Token-prefix boundaries the index keeps, as LMCache's chunks of 256 tokens. */
#define TQ_STORE_STRIDE 256u

typedef struct tq_store tq_store;

/* A store in a directory (made if missing) or under an s3://bucket/prefix (io.h, s3.h: its
 * entries are objects, each written by one PUT). */
tq_status tq_store_open(tq_ctx *ctx, const char *where, tq_store **out);
/* 1 for a store in an object store. */
int tq_store_remote(const tq_store *s);
void tq_store_close(tq_store *s);
const char *tq_store_root(const tq_store *s);

/* The longest name an entry, a snapshot or a user's name may have. */
#define TQ_STORE_NAME_MAX 128u
/* The one rule for names in a store (--name, entries, base names): 1 to TQ_STORE_NAME_MAX of
 * A-Z a-z 0-9 . _ -, not beginning with '.', no ".tmp." (a writer's temporary).  Names are
 * data, never paths: no '/'. */
int tq_store_name_ok(const char *name);

/* A store's entries by kind; their names are made here alone: a snapshot "snap/NAME.tqkv", a
 * snapshot by its file name "snap/FILE" (a chain's base, as a snapshot records it), a user's
 * name "names/NAME", restore points "points/NAME", checkpoints "ckpt/NAME". */
typedef enum tq_store_kind {
    TQ_STORE_SNAP,
    TQ_STORE_SNAP_FILE,
    TQ_STORE_NAME,
    TQ_STORE_POINTS,
    TQ_STORE_CKPT
} tq_store_kind;
void tq_store_entry(tq_store_kind kind, const char *name, char *entry, size_t size);
/* FP-HASH: 16 hex digits, '-', 16 hex digits (tq_store_name). */
int tq_store_is_snapshot_name(const char *name);
/* The entry is there as a regular file (a directory store's: never a symlink, FIFO or device). */
tq_status tq_store_check_entry(tq_ctx *ctx, tq_store *s, const char *entry);

/* The path of an entry (malloc'd): what the snapshot readers and writers take. */
char *tq_store_path(const tq_store *s, const char *entry);
/* An entry written whole, atomically (a temporary beside it, renamed into place). */
tq_status tq_store_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n);
/* An entry written as a stream (a snapshot): through *f, appearing whole on commit (a
 * directory's temporary beside it, fsynced and renamed into place; an object's upload), nothing
 * on abort. */
typedef struct tq_store_writer tq_store_writer;
tq_status tq_store_write_begin(tq_ctx *ctx, tq_store *s, const char *entry, tq_store_writer **w,
                               FILE **f);
tq_status tq_store_write_commit(tq_ctx *ctx, tq_store_writer *w);
void tq_store_write_abort(tq_store_writer *w);
/* Why the last write to an object failed (the store's answer), "" when none did. */
const char *tq_store_write_error(const tq_store_writer *w);
/* A small entry's bytes (malloc'd, NUL-terminated; 64 KiB at most); *found 0 when there is
 * none.  A directory store's entry must be a regular file, opened without following a link. */
tq_status tq_store_get(tq_ctx *ctx, tq_store *s, const char *entry, char **p, uint64_t *n,
                       int *found);
/* The same, at most max bytes. */
tq_status tq_store_get_max(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                           uint64_t *n, int *found);
/* The entries directly under a folder of entries (malloc'd names, sorted); none if missing. */
tq_status tq_store_list(tq_ctx *ctx, tq_store *s, const char *folder, char ***names,
                        uint32_t *n);
void tq_store_names_free(char **names, uint32_t n);
tq_status tq_store_remove(tq_ctx *ctx, tq_store *s, const char *entry);
/* An entry's size; *found 0 when there is none. */
tq_status tq_store_size(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size, int *found);
/* A stored snapshot's reader, for its metadata: a directory's mapped and verified whole, an
 * object's header, metadata and index read by ranges (tqkv_open_src). */
struct tqkv_reader;
tq_status tq_store_snapshot(tq_ctx *ctx, tq_store *s, const char *name,
                            struct tqkv_reader **out);
/* A reader of tq_store_snapshot's whose chunks were not read, given back: an object store's
 * is kept for the next tq_store_snapshot of that name (a restore reads a candidate's tokens,
 * then decodes it: an object's opening is three requests and its whole metadata, a megabyte
 * and more with its transform bases); others are closed. */
void tq_store_snapshot_keep(tq_store *s, const char *name, struct tqkv_reader *r);
/* The kept readers closed (a restore's end: they hold their metadata and may go stale). */
void tq_store_snapshot_forget(tq_store *s);

/* What names a model in a store's names: its fingerprint, or with the process's keys (seal.h) a
 * keyed hash of it. */
uint64_t tq_store_model_id(uint64_t fingerprint);
/* The content-derived name of a snapshot of these tokens for a model (its tq_store_model_id;
 * buf: 34 bytes): with the process's keys, a keyed hash of the tokens. */
void tq_store_name(uint64_t fingerprint, const int32_t *tokens, uint32_t n, char *buf);
/* The hash of a token prefix as the index keys it. */
uint64_t tq_store_prefix_hash(const int32_t *tokens, uint32_t n);
/* The hashes of every TQ_STORE_STRIDE-token prefix of tokens[0..n), in one pass (malloc'd,
 * n / TQ_STORE_STRIDE of them; NULL: out of memory). */
uint64_t *tq_store_prefix_hashes(const int32_t *tokens, uint32_t n);

/* A snapshot's restore points (restore_point.h owns what they are) are kept as a points
 * entry: records them (entry 5). */
tq_status tq_store_put_points(tq_ctx *ctx, tq_store *s, const char *name,
                              const tq_restore_points *pt);
/* A snapshot's points; a snapshot stored without them restores whole only (from n_tokens). */
tq_status tq_store_get_points(tq_ctx *ctx, tq_store *s, const char *name, uint32_t n_tokens,
                              tq_restore_points *pt);
/* A points entry's text (changed in place) into pt; 0, pt untouched, when a line is not one
 * tq writes or the points are not a state of n_tokens can have. */
int tq_store_parse_points(char *text, uint32_t n_tokens, tq_restore_points *pt);

/* The most a snapshot's stored checkpoints may take (ckpt/NAME). */
#define TQ_STORE_CKPT_MOST (1ull << 36)

/* A server's checkpoint sidecar (the file side, at most limit bytes, of a state of n_tokens
 * tokens) checked and kept as ckpt/NAME, its blobs coded by code; pt's checkpoints set.  The
 * sidecar is removed.  *kept: 1 kept; 0 none there; -1 not kept, the context says why (a
 * sidecar that does not check out is left out, not an error); an error status: the store
 * refused the entry. */
tq_status tq_store_keep_checkpoints(tq_ctx *ctx, tq_store *s, const char *name, const char *side,
                                    uint64_t limit, uint32_t n_tokens, tq_ckpt_coder code,
                                    void *user, tq_restore_points *pt, int *kept);
/* A stored snapshot's checkpoints: the sidecar (decoded by decode) and, at a count `at` (0:
 * none asked), that checkpoint's partial state (its in-memory header left out). */
typedef struct tq_store_ckpts {
    uint8_t *side; /* NULL: none stored */
    uint64_t side_len;
    tq_ckpt c[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t count;
    const uint8_t *partial;
    uint64_t partial_len;
} tq_store_ckpts;
tq_status tq_store_load_checkpoints(tq_ctx *ctx, tq_store *s, const char *name,
                                    uint32_t n_tokens, uint32_t at, tq_ckpt_decoder decode,
                                    void *user, tq_store_ckpts *k);
/* The checkpoints at or below upto written as a sidecar at path (a new file); none: nothing. */
tq_status tq_store_write_checkpoints(tq_ctx *ctx, const tq_store_ckpts *k, uint32_t upto,
                                     const char *path);
void tq_store_ckpts_free(tq_store_ckpts *k);

/* A stored snapshot whose tokens begin like a prompt's. */
typedef struct tq_store_match {
    char name[40];
    uint32_t n_tokens; /* the snapshot's */
    uint32_t common;   /* tokens it shares with the prompt from the first (checked exactly) */
    uint32_t point;    /* the count to restore: the largest restore point <= common */
    uint32_t shared;   /* the most tokens any candidate shared (a restore point or not) */
    int whole;         /* no base: decoded alone */
} tq_store_match;

/* The snapshot for model fp with the longest restore point that tokens[0..n) begins with
 * (the prompt's first TQ_STORE_STRIDE tokens at least in common): found through the index,
 * from the longest boundary down, its tokens read and compared, its points read.  A
 * candidate that cannot be read is skipped, and *skipped counts it; the names in except are
 * not taken (a restore's tries that failed to decode).  Of candidates with the same point, the
 * one cheapest to decode to it: a whole snapshot of that many tokens, then one cut there, then
 * a link (its base is read too).  best->point 0: none. */
tq_status tq_store_find(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens, uint32_t n,
                        const char *const *except, uint32_t n_except, tq_store_match *best,
                        uint32_t *skipped);
/* The same among snapshots that can be a base for these tokens (--append): whole snapshots
 * (not appended ones) all of whose tokens the prompt begins with. */
tq_status tq_store_find_base(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens,
                             uint32_t n, tq_store_match *best, uint32_t *skipped);
/* Records a stored snapshot: its index entries and its use now. */
tq_status tq_store_index(tq_ctx *ctx, tq_store *s, uint64_t fp, const char *name,
                         const int32_t *tokens, uint32_t n);
/* What gc did. */
typedef struct tq_store_gc_report {
    uint32_t kept, evicted;
    uint64_t bytes_before, bytes_after;
    uint32_t temps_removed; /* writers' temporaries over an hour old (a directory store's) */
} tq_store_gc_report;

/* Evicts least recently used snapshots until the store's snapshots take at most max_bytes.
 * A base goes only after every snapshot appended to it (a chain is never broken: a base counts
 * as used when its latest dependent was); each eviction removes the index entries first, so a
 * racing restore sees a snapshot or no entry, at worst an entry whose snapshot is gone (a
 * miss).  Snapshots that cannot be read are left alone.  fn (NULL: none) is told each name
 * evicted, as it goes. */
typedef void (*tq_store_evicted_fn)(void *user, const char *name); /* each snapshot evicted */
tq_status tq_store_gc(tq_ctx *ctx, tq_store *s, uint64_t max_bytes, tq_store_evicted_fn fn,
                      void *user, tq_store_gc_report *rep);

/* A writer's temporary (NAME.tmp.XXXXXX) this old is a dead writer's: gc and check remove it. */
#define TQ_STORE_TEMP_AGE_S 3600

/* What tq_store_check found. */
typedef struct tq_store_check_report {
    uint32_t snapshots, entries; /* read: snapshots whole, the entries that point at them */
    uint32_t problems, repaired; /* repaired: removed (or a snapshot indexed again) */
} tq_store_check_report;
/* A problem: the entry, why, and 1 when repair removed it, -1 when it repaired it otherwise, 0
 * when it is left. */
typedef void (*tq_store_problem_fn)(void *user, const char *entry, const char *why,
                                    int repaired);
/* Every entry verified (STORE.md, "Checking a store"): each snapshot read whole (checksums, or
 * with a key its tags) and its name against its tokens, each chain's base present and the same,
 * the index, names, use times, restore points and checkpoints against the snapshots that
 * passed, writers' temporaries over an hour old.  repair: what is broken or unreachable removed
 * (a snapshot not indexed at every boundary is indexed again); never another key's entry, nor a
 * temporary a live writer may still write. */
tq_status tq_store_check(tq_ctx *ctx, tq_store *s, int repair, tq_store_problem_fn fn, void *user,
                         tq_store_check_report *rep);

/* The time a snapshot was last saved or restored (seconds since 1970; 0: not recorded). */
double tq_store_last_used(tq_ctx *ctx, tq_store *s, const char *name);
/* Marks a snapshot used now (what gc evicts last).  With present (else NULL), the snapshot is
 * looked for after: gc removes a snapshot before its use record, so a use recorded while gc was
 * evicting it is seen here as a snapshot gone; its record is removed again and *present is 0
 * (a pool's stores hold no use of nothing, STORE.md "Eviction"). */
tq_status tq_store_touch(tq_ctx *ctx, tq_store *s, const char *name, int *present);

#endif
