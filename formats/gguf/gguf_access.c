/* gguf_access.c - a parsed GGUF's fields, keys and tensors (gguf.h): reads of what
 * gguf_read.c validated. */
#include "gguf_parsed.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint32_t tq_gguf_version(const tq_gguf *g) { return g->version; }
uint32_t tq_gguf_alignment(const tq_gguf *g) { return g->alignment; }
uint64_t tq_gguf_data_offset(const tq_gguf *g) { return g->sh[0].data_off; }
uint32_t tq_gguf_n_shards(const tq_gguf *g) { return g->n_sh; }
const char *tq_gguf_shard_path(const tq_gguf *g, uint32_t i)
{
    return i < g->n_sh ? g->sh[i].path : NULL;
}
tq_type_profile tq_gguf_profile(const tq_gguf *g) { return g->profile; }
int tq_gguf_profile_assumed(const tq_gguf *g) { return g->assumed; }

uint64_t tq_gguf_file_size(const tq_gguf *g)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < g->n_sh; i++) s += g->sh[i].size;
    return s;
}

int64_t tq_gguf_n_kv(const tq_gguf *g) { return g->n_kv; }


const char *tq_gguf_kv_key(const tq_gguf *g, int64_t i) { return g->kv[i].key; }
tq_gguf_type tq_gguf_kv_type(const tq_gguf *g, int64_t i) { return g->kv[i].type; }
tq_gguf_type tq_gguf_kv_arr_type(const tq_gguf *g, int64_t i) { return g->kv[i].arr_type; }
uint64_t tq_gguf_kv_count(const tq_gguf *g, int64_t i) { return g->kv[i].n; }

static const uint8_t *elem(const tq_gguf *g, int64_t i, uint64_t j, tq_gguf_type *t)
{
    const kv_ent *e = &g->kv[i];
    if (j >= e->n) return NULL;
    *t = e->type == TQ_GGUF_ARRAY ? e->arr_type : e->type;
    if (*t == TQ_GGUF_STRING) return g->sh[0].map + (e->str_off ? e->str_off[j] : e->val_off);
    return g->sh[0].map + e->val_off + j * tq_gguf_type_size(*t);
}

int tq_gguf_kv_get_int(const tq_gguf *g, int64_t i, uint64_t j, int64_t *out)
{
    tq_gguf_type t;
    const uint8_t *p = elem(g, i, j, &t);
    if (!p) return -1;
    switch (t) {
        case TQ_GGUF_UINT8:
            *out = p[0];
            break;
        case TQ_GGUF_INT8:
            *out = (int8_t)p[0];
            break;
        case TQ_GGUF_BOOL:
            *out = p[0];
            break;
        case TQ_GGUF_UINT16:
            *out = (uint16_t)(p[0] | p[1] << 8);
            break;
        case TQ_GGUF_INT16:
            *out = (int16_t)(p[0] | p[1] << 8);
            break;
        case TQ_GGUF_UINT32:
            *out = get_u32(p);
            break;
        case TQ_GGUF_INT32:
            *out = (int32_t)get_u32(p);
            break;
        case TQ_GGUF_UINT64:
            *out = (int64_t)get_u64(p);
            break;
        case TQ_GGUF_INT64:
            *out = (int64_t)get_u64(p);
            break;
        default:
            return -1;
    }
    return 0;
}

int tq_gguf_kv_get_uint(const tq_gguf *g, int64_t i, uint64_t j, uint64_t *out)
{
    tq_gguf_type t;
    const uint8_t *p = elem(g, i, j, &t);
    if (p && t == TQ_GGUF_UINT64) {
        *out = get_u64(p);
        return 0;
    }
    int64_t v;
    if (tq_gguf_kv_get_int(g, i, j, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

int tq_gguf_kv_get_float(const tq_gguf *g, int64_t i, uint64_t j, double *out)
{
    tq_gguf_type t;
    const uint8_t *p = elem(g, i, j, &t);
    if (!p) return -1;
    if (t == TQ_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
    } else if (t == TQ_GGUF_FLOAT64) {
        memcpy(out, p, 8);
    } else {
        return -1;
    }
    return 0;
}

const char *tq_gguf_kv_get_str(const tq_gguf *g, int64_t i, uint64_t j, uint64_t *len)
{
    tq_gguf_type t;
    const uint8_t *p = elem(g, i, j, &t);
    if (!p || t != TQ_GGUF_STRING) return NULL;
    *len = get_u64(p);
    return (const char *)p + 8;
}

const uint8_t *tq_gguf_kv_raw(const tq_gguf *g, int64_t i, uint64_t *len)
{
    *len = g->kv[i].raw_len;
    return g->sh[0].map + g->kv[i].raw_off;
}

const char *tq_gguf_get_str(const tq_gguf *g, const char *key, const char *fallback, uint64_t *len)
{
    int64_t i = tq_gguf_find_key(g, key);
    const char *s =
        i >= 0 && g->kv[i].type == TQ_GGUF_STRING ? tq_gguf_kv_get_str(g, i, 0, len) : NULL;
    if (!s && len) *len = fallback ? strlen(fallback) : 0;
    return s ? s : fallback;
}

int64_t tq_gguf_get_int(const tq_gguf *g, const char *key, int64_t fallback)
{
    int64_t i = tq_gguf_find_key(g, key), v;
    if (i < 0 || g->kv[i].type == TQ_GGUF_ARRAY || tq_gguf_kv_get_int(g, i, 0, &v)) return fallback;
    return v;
}

int64_t tq_gguf_n_tensors(const tq_gguf *g) { return g->n_t; }


const char *tq_gguf_tensor_name(const tq_gguf *g, int64_t i) { return g->t[i].name; }
int tq_gguf_tensor_type_id(const tq_gguf *g, int64_t i) { return g->t[i].type_id; }
const tq_ggml_type *tq_gguf_tensor_type(const tq_gguf *g, int64_t i) { return g->t[i].type; }
uint32_t tq_gguf_tensor_n_dims(const tq_gguf *g, int64_t i) { return g->t[i].n_dims; }
const int64_t *tq_gguf_tensor_ne(const tq_gguf *g, int64_t i) { return g->t[i].ne; }
uint64_t tq_gguf_tensor_nbytes(const tq_gguf *g, int64_t i) { return g->t[i].nbytes; }
uint64_t tq_gguf_tensor_offset(const tq_gguf *g, int64_t i) { return g->t[i].offset; }
uint32_t tq_gguf_tensor_shard(const tq_gguf *g, int64_t i) { return g->t[i].shard; }

int64_t tq_gguf_tensor_nelements(const tq_gguf *g, int64_t i)
{
    const int64_t *ne = g->t[i].ne;
    return ne[0] * ne[1] * ne[2] * ne[3];
}

uint64_t tq_gguf_tensor_file_offset(const tq_gguf *g, int64_t i)
{
    return g->sh[g->t[i].shard].data_off + g->t[i].offset;
}

const void *tq_gguf_tensor_data(const tq_gguf *g, int64_t i)
{
    return g->sh[g->t[i].shard].map + tq_gguf_tensor_file_offset(g, i);
}

void tq_gguf_tensor_release_range(const tq_gguf *g, int64_t i, uint64_t off, uint64_t len)
{
    const shard *s = &g->sh[g->t[i].shard];
    uint64_t nb = tq_gguf_tensor_nbytes(g, i);
    if (!s->mapped || off >= nb) return;
    if (len > nb - off) len = nb - off;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)tq_gguf_tensor_data(g, i) + off, e = a + len;
    a = (a + page - 1) & ~(page - 1); /* whole pages only: neighbours may still be in use */
    e &= ~(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

void tq_gguf_tensor_release(const tq_gguf *g, int64_t i)
{
    tq_gguf_tensor_release_range(g, i, 0, tq_gguf_tensor_nbytes(g, i));
}
