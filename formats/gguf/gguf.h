/*
 * gguf.h - GGUF model files: a strict reader over a read-only mapping and a
 * streaming writer.  The layout and the rules follow ggml's gguf.cpp (see
 * formats/gguf/GGUF.md); a file this writer produces passes ggml's reader.
 *
 * Reading
 *   tq_gguf_open() maps the file, validates every header field before
 *   returning, and exposes metadata and tensor infos by index.  Tensor data is
 *   never copied: tq_gguf_tensor_data() points into the mapping.  A split
 *   model (name-00001-of-0000N.gguf) opens as one model when its first shard
 *   is given.
 *
 *   Numeric tensor type ids are not stable across ggml revisions and forks.
 *   Each id is looked up in a type-id profile: the one recorded in the file
 *   (key tq.type_profile), else the caller's.  A file that uses an id whose
 *   meaning differs between profiles and records none is flagged
 *   (tq_gguf_profile_assumed) so the caller can say so; it is never guessed
 *   silently.
 *
 * Writing
 *   Describe the whole file first (metadata, then tensor infos with their
 *   final types and shapes), open, then stream each tensor's bytes in order;
 *   the writer pads.  The header is computed up front.  Output goes to a
 *   temporary file beside the destination and is renamed into place by
 *   tq_gguf_writer_finish(); tq_gguf_writer_free() before that removes it.
 */
#ifndef TQ_GGUF_H
#define TQ_GGUF_H

#include "tq.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_GGUF_DEFAULT_ALIGNMENT 32
#define TQ_GGUF_MAX_DIMS          4
#define TQ_GGUF_MAX_NAME          63 /* bytes; ggml's GGML_MAX_NAME is 64 with the NUL */

typedef enum tq_gguf_type {
    TQ_GGUF_UINT8 = 0,
    TQ_GGUF_INT8 = 1,
    TQ_GGUF_UINT16 = 2,
    TQ_GGUF_INT16 = 3,
    TQ_GGUF_UINT32 = 4,
    TQ_GGUF_INT32 = 5,
    TQ_GGUF_FLOAT32 = 6,
    TQ_GGUF_BOOL = 7,
    TQ_GGUF_STRING = 8,
    TQ_GGUF_ARRAY = 9,
    TQ_GGUF_UINT64 = 10,
    TQ_GGUF_INT64 = 11,
    TQ_GGUF_FLOAT64 = 12,
    TQ_GGUF_TYPE_COUNT = 13
} tq_gguf_type;

const char *tq_gguf_type_name(tq_gguf_type t); /* "UINT32", "STRING", ... */
size_t tq_gguf_type_size(tq_gguf_type t);      /* fixed size; 0 for STRING/ARRAY */

/* ------------------------------------------------- tensor type ids */

/* Type-id profiles: a row of the fork's revisions table (tq_fork_revision_at in tq.h:
 * lib/fork_revisions.c), by its number, or AUTO.  Nothing here names a revision: names go
 * through tq_type_profile_parse, lists through tq_type_profile_list. */
typedef int tq_type_profile;
#define TQ_PROFILE_DEFAULT 0 /* the table's first row: what a file that names none means */
#define TQ_PROFILE_AUTO 99   /* KV states: the revision told by the bytes (kv_view.h) */
#define TQ_PROFILE_COUNT ((int)tq_fork_revision_count())
/* The row flagged TQ_FORK_NEWEST: what turbo caches are written for unless told. */
tq_type_profile tq_type_profile_newest(void);
#define TQ_PROFILE_NEWEST (tq_type_profile_newest())
/* The revisions' names, ", " between them, the default's and the newest's said so (as helps
 * list them); only those with turbo blocks where turbo_only.  The length it needs. */
size_t tq_type_profile_list(char *buf, size_t size, int turbo_only);
/* The revision a server's build names (its version string ends in a revision's commit), or
 * TQ_PROFILE_AUTO where it names none tq knows. */
tq_type_profile tq_type_profile_of_build(const char *build_info);

/* A revision's name ("auto" for TQ_PROFILE_AUTO, "?" for no row). */
const char *tq_type_profile_name(tq_type_profile p);
int tq_type_profile_parse(const char *s, tq_type_profile *out); /* 0 ok, -1 unknown */

typedef struct tq_ggml_type {
    int id;
    const char *name; /* ggml's lower-case name: "f32", "q4_K", "tq4_1s" */
    uint32_t block;   /* elements per block */
    uint32_t bytes;   /* bytes per block */
    int dtype;        /* tq_dtype that can decode it, or -1 */
} tq_ggml_type;

/* NULL for ids that do not exist (or were removed) in that profile. */
const tq_ggml_type *tq_ggml_type_get(tq_type_profile p, int id);
const tq_ggml_type *tq_ggml_type_by_name(tq_type_profile p, const char *name);
/* 1 if id means different things in different profiles (41 and up). */
int tq_ggml_type_id_ambiguous(int id);

/* ------------------------------------------------- general.file_type */

/* The fork's values for its weight types (LLAMA_FTYPE_MOSTLY_TQ3_1S / TQ4_1S). */
#define TQ_FTYPE_TQ3_1S 43
#define TQ_FTYPE_TQ4_1S 44
/* llama.cpp's name of a general.file_type value ("MOSTLY_Q4_K_M"; "unknown"). */
const char *tq_gguf_file_type_name(int64_t ft);
/* The file type of a model whose weights are mostly dtype (tq3_1s or tq4_1s). */
int tq_gguf_file_type_of(int dtype);

/* ------------------------------------------------- reader */

typedef struct tq_gguf tq_gguf;

typedef struct tq_gguf_options {
    tq_type_profile profile; /* used when the file records none */
    int profile_explicit;    /* 1: the caller chose it (suppresses the flag) */
} tq_gguf_options;

/* opt may be NULL (default profile). */
tq_status tq_gguf_open(tq_ctx *ctx, const char *path, const tq_gguf_options *opt, tq_gguf **out);
/* Parses a buffer the caller keeps alive (fuzzing, tests); no split lookup. */
tq_status tq_gguf_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                              const tq_gguf_options *opt, tq_gguf **out);
void tq_gguf_close(tq_gguf *g);

uint32_t tq_gguf_version(const tq_gguf *g);
uint32_t tq_gguf_alignment(const tq_gguf *g);
uint64_t tq_gguf_file_size(const tq_gguf *g);   /* all shards together */
uint64_t tq_gguf_data_offset(const tq_gguf *g); /* of the first shard */
uint32_t tq_gguf_n_shards(const tq_gguf *g);
const char *tq_gguf_shard_path(const tq_gguf *g, uint32_t i);
tq_type_profile tq_gguf_profile(const tq_gguf *g);
int tq_gguf_profile_assumed(const tq_gguf *g); /* ambiguous ids, no record, no choice */

/* Metadata (of the first shard), in file order. */
int64_t tq_gguf_n_kv(const tq_gguf *g);
int64_t tq_gguf_find_key(const tq_gguf *g, const char *key); /* -1 if absent */
const char *tq_gguf_kv_key(const tq_gguf *g, int64_t i);     /* NUL-terminated copy */
tq_gguf_type tq_gguf_kv_type(const tq_gguf *g, int64_t i);
tq_gguf_type tq_gguf_kv_arr_type(const tq_gguf *g, int64_t i); /* element type of an ARRAY */
uint64_t tq_gguf_kv_count(const tq_gguf *g, int64_t i);        /* 1 for scalars */
/* Element j (0 for scalars), converted: integers and BOOL as int64/uint64,
 * floats as double.  Return -1 when the element is not of that family. */
int tq_gguf_kv_get_int(const tq_gguf *g, int64_t i, uint64_t j, int64_t *out);
int tq_gguf_kv_get_uint(const tq_gguf *g, int64_t i, uint64_t j, uint64_t *out);
int tq_gguf_kv_get_float(const tq_gguf *g, int64_t i, uint64_t j, double *out);
/* Strings are not NUL-terminated; *len gets the byte length. */
const char *tq_gguf_kv_get_str(const tq_gguf *g, int64_t i, uint64_t j, uint64_t *len);
/* The value's raw little-endian bytes as stored in the file (after the type
 * fields), for copying a KV verbatim. */
const uint8_t *tq_gguf_kv_raw(const tq_gguf *g, int64_t i, uint64_t *len);

/* Convenience: a string or integer key, or the fallback when absent or of
 * another type. */
const char *tq_gguf_get_str(const tq_gguf *g, const char *key, const char *fallback, uint64_t *len);
int64_t tq_gguf_get_int(const tq_gguf *g, const char *key, int64_t fallback);

/* Tensors (over all shards), in file order. */
int64_t tq_gguf_n_tensors(const tq_gguf *g);
int64_t tq_gguf_find_tensor(const tq_gguf *g, const char *name);
const char *tq_gguf_tensor_name(const tq_gguf *g, int64_t i);
int tq_gguf_tensor_type_id(const tq_gguf *g, int64_t i);
const tq_ggml_type *tq_gguf_tensor_type(const tq_gguf *g, int64_t i);
uint32_t tq_gguf_tensor_n_dims(const tq_gguf *g, int64_t i);
const int64_t *tq_gguf_tensor_ne(const tq_gguf *g, int64_t i); /* 4 entries, missing = 1 */
int64_t tq_gguf_tensor_nelements(const tq_gguf *g, int64_t i);
uint64_t tq_gguf_tensor_nbytes(const tq_gguf *g, int64_t i);
uint64_t tq_gguf_tensor_offset(const tq_gguf *g, int64_t i);      /* within its data section */
uint64_t tq_gguf_tensor_file_offset(const tq_gguf *g, int64_t i); /* absolute, in its shard */
uint32_t tq_gguf_tensor_shard(const tq_gguf *g, int64_t i);
const void *tq_gguf_tensor_data(const tq_gguf *g, int64_t i);
/* Done with a tensor's data: its whole pages leave this process's resident
 * set (a later access reads them again), so streaming through a model keeps
 * memory flat. */
void tq_gguf_tensor_release(const tq_gguf *g, int64_t i);
/* The same for bytes [off, off + len) of its data, as a stream moves on. */
void tq_gguf_tensor_release_range(const tq_gguf *g, int64_t i, uint64_t off, uint64_t len);

/* ------------------------------------------------- writer */

typedef struct tq_gguf_writer tq_gguf_writer;

tq_status tq_gguf_writer_new(tq_ctx *ctx, tq_gguf_writer **out);
void tq_gguf_writer_free(tq_gguf_writer *w); /* removes an unfinished output */

/* Metadata.  Setting an existing key replaces its value in place; new keys
 * are appended.  copy_kvs copies every key of src except split.* (a split
 * layout belongs to the file that has it). */
tq_status tq_gguf_writer_copy_kvs(tq_gguf_writer *w, const tq_gguf *src);
tq_status tq_gguf_writer_copy_kv(tq_gguf_writer *w, const tq_gguf *src, int64_t i);
tq_status tq_gguf_writer_set_scalar(tq_gguf_writer *w, const char *key, tq_gguf_type t,
                                    const void *le_value);
tq_status tq_gguf_writer_set_u32(tq_gguf_writer *w, const char *key, uint32_t v);
tq_status tq_gguf_writer_set_str(tq_gguf_writer *w, const char *key, const char *s, uint64_t len);
/* Numeric arrays: n elements of type t, little-endian packed.  String
 * arrays: t = STRING, data = const char *const[n], lens = lengths. */
tq_status tq_gguf_writer_set_array(tq_gguf_writer *w, const char *key, tq_gguf_type t, uint64_t n,
                                   const void *data, const uint64_t *lens);
tq_status tq_gguf_writer_remove_kv(tq_gguf_writer *w, const char *key);
int64_t tq_gguf_writer_n_kv(const tq_gguf_writer *w);

/* Tensor infos, in the order their data will be written. */
tq_status tq_gguf_writer_set_profile(tq_gguf_writer *w, tq_type_profile p);
tq_status tq_gguf_writer_add_tensor(tq_gguf_writer *w, const char *name, int type_id,
                                    uint32_t n_dims, const int64_t *ne);

/* Split output: shards of at most max_bytes of tensor data (a tensor is never
 * cut), named PATH-00001-of-0000N.gguf when PATH ends in .gguf, with
 * llama.cpp's split.* keys; 0 (the default) writes one file. */
tq_status tq_gguf_writer_set_split(tq_gguf_writer *w, uint64_t max_bytes);

/* Creates the temporary output(s) beside path and writes the first header.
 * Refuses a path that is (or links to) one of the inputs. */
tq_status tq_gguf_writer_open(tq_gguf_writer *w, const char *path, const char *const *inputs,
                              size_t n_inputs);
/* Appends data of the current tensor (any chunking); padding is automatic. */
tq_status tq_gguf_writer_write(tq_gguf_writer *w, const void *data, size_t len);
/* Appends tensor i of src as it is, 16 MiB at a time, releasing the input
 * pages behind it (tq_gguf_tensor_release_range): copying a large tensor
 * does not grow the resident set. */
tq_status tq_gguf_copy_tensor(const tq_gguf *src, int64_t i, tq_gguf_writer *w);
/* Checks that every tensor is complete, flushes and renames into place. */
tq_status tq_gguf_writer_finish(tq_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
