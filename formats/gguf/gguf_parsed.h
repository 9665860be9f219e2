/* gguf_parsed.h - a parsed GGUF in memory: what the reader (gguf_read.c) fills and its
 * accessors (gguf_access.c) read; not an API. */
#ifndef TQ_GGUF_PARSED_H
#define TQ_GGUF_PARSED_H

#include "gguf.h"

#include <stdint.h>
#include <string.h>

#define GGUF_MAX_STRING (1ull << 30) /* ggml's GGUF_MAX_STRING_LENGTH */
#define GGUF_MAX_ARRAY  (1ull << 30) /* ggml's GGUF_MAX_ARRAY_ELEMENTS */

typedef struct kv_ent {
    char *key;
    uint64_t key_len;
    tq_gguf_type type, arr_type;
    uint64_t n;
    uint64_t val_off; /* first value byte (arrays: first element) */
    uint64_t raw_off; /* value as stored after the type field */
    uint64_t raw_len;
    uint64_t *str_off; /* STRING arrays: offset of each element's length field */
} kv_ent;

typedef struct tensor_ent {
    char name[TQ_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    int64_t ne[TQ_GGUF_MAX_DIMS];
    int type_id;
    const tq_ggml_type *type;
    uint64_t offset, nbytes;
    uint32_t shard;
} tensor_ent;

typedef struct shard {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint64_t data_off;
    int mapped;
} shard;

typedef struct strtab {
    uint64_t cap;
    int64_t *slot; /* index + 1, 0 = empty */
} strtab;

struct tq_gguf {
    shard *sh;
    uint32_t n_sh;
    kv_ent *kv;
    int64_t n_kv;
    tensor_ent *t;
    int64_t n_t, cap_t;
    uint32_t version, alignment;
    tq_type_profile profile;
    int assumed;
    strtab keys, names;
};

/* Little-endian integers at p. */
static inline uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#endif
