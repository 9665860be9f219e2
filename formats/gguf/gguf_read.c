/* gguf_read.c - the GGUF reader: maps the file and validates what ggml's
 * gguf.cpp validates before anything is exposed.  Every failure is reported
 * once as "FILE: what: where". */
#include "file_io.h"
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_parsed.h"

/* ------------------------------------------------------------ hashing */

static uint64_t fnv1a(const char *s, uint64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int tab_init(strtab *t, uint64_t n)
{
    t->cap = 16;
    while (t->cap < 2 * n + 16) t->cap *= 2;
    t->slot = calloc(t->cap, sizeof *t->slot);
    return t->slot ? 0 : -1;
}

typedef const char *(*name_fn)(const tq_gguf *g, int64_t i, uint64_t *len);

static const char *kv_name(const tq_gguf *g, int64_t i, uint64_t *len)
{
    *len = g->kv[i].key_len;
    return g->kv[i].key;
}

static const char *t_name(const tq_gguf *g, int64_t i, uint64_t *len)
{
    *len = strlen(g->t[i].name);
    return g->t[i].name;
}

/* Finds name; with insert >= 0 adds that index when absent.  Returns the
 * index found, or -1. */
static int64_t tab_find(const tq_gguf *g, const strtab *t, name_fn fn, const char *s, uint64_t n,
                        int64_t insert)
{
    if (!t->slot) return -1;
    for (uint64_t h = fnv1a(s, n) & (t->cap - 1);; h = (h + 1) & (t->cap - 1)) {
        int64_t v = t->slot[h];
        if (!v) {
            if (insert >= 0) t->slot[h] = insert + 1;
            return -1;
        }
        uint64_t l;
        const char *o = fn(g, v - 1, &l);
        if (l == n && !memcmp(o, s, n)) return v - 1;
    }
}

/* ------------------------------------------------------------ cursor */

typedef struct rd {
    const uint8_t *p;
    uint64_t size, pos;
    tq_ctx *ctx;
    const char *label;
} rd;

static tq_status bad(rd *r, uint64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tq_status bad(rd *r, uint64_t at, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tq_ctx_set_error(r->ctx, TQ_ERR_FORMAT, "%s: %s: at offset %" PRIu64, r->label, what,
                            at);
}

static tq_status need(rd *r, uint64_t n, const char *what)
{
    if (n > r->size - r->pos)
        return bad(r, r->pos, "truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left", what, n,
                   r->size - r->pos);
    return TQ_OK;
}

static tq_status rd_u32(rd *r, uint32_t *v, const char *what)
{
    tq_status st = need(r, 4, what);
    if (st) return st;
    *v = get_u32(r->p + r->pos);
    r->pos += 4;
    return TQ_OK;
}

static tq_status rd_u64(rd *r, uint64_t *v, const char *what)
{
    tq_status st = need(r, 8, what);
    if (st) return st;
    *v = get_u64(r->p + r->pos);
    r->pos += 8;
    return TQ_OK;
}

/* a string: u64 length + bytes (no NUL) */
static tq_status rd_str(rd *r, uint64_t *off, uint64_t *len, const char *what)
{
    uint64_t at = r->pos;
    tq_status st = rd_u64(r, len, what);
    if (st) return st;
    if (*len > GGUF_MAX_STRING) return bad(r, at, "%s length %" PRIu64 " exceeds 2^30", what, *len);
    if (*len > r->size - r->pos)
        return bad(r, at, "%s length %" PRIu64 " runs past the end of the file", what, *len);
    *off = r->pos;
    r->pos += *len;
    return TQ_OK;
}

/* ------------------------------------------------------------ metadata */

static tq_status parse_value(rd *r, kv_ent *e)
{
    uint64_t at = r->pos;
    tq_status st;
    e->n = 1;
    e->arr_type = TQ_GGUF_TYPE_COUNT;
    if (e->type == TQ_GGUF_ARRAY) {
        uint32_t at32;
        if ((st = rd_u32(r, &at32, "array element type"))) return st;
        if (at32 >= TQ_GGUF_TYPE_COUNT)
            return bad(r, at, "key '%s' has an array of invalid type %u", e->key, at32);
        if (at32 == TQ_GGUF_ARRAY)
            return bad(r, at, "key '%s' is a nested array (not allowed by ggml)", e->key);
        e->arr_type = (tq_gguf_type)at32;
        if ((st = rd_u64(r, &e->n, "array length"))) return st;
        if (e->n > GGUF_MAX_ARRAY)
            return bad(r, at, "key '%s' has %" PRIu64 " elements (at most 2^30)", e->key, e->n);
    }
    tq_gguf_type et = e->type == TQ_GGUF_ARRAY ? e->arr_type : e->type;
    e->val_off = r->pos;
    if (et == TQ_GGUF_STRING) {
        if (e->type == TQ_GGUF_ARRAY) {
            if (e->n > (r->size - r->pos) / 8)
                return bad(r, at, "key '%s': %" PRIu64 " strings cannot fit in the file", e->key,
                           e->n);
            e->str_off = malloc((e->n ? e->n : 1) * sizeof(uint64_t));
            if (!e->str_off)
                return tq_ctx_set_error(r->ctx, TQ_ERR_NOMEM, "%s: out of memory", r->label);
        }
        for (uint64_t j = 0; j < e->n; j++) {
            uint64_t off, len;
            if (e->str_off) e->str_off[j] = r->pos;
            if ((st = rd_str(r, &off, &len, "string value"))) return st;
        }
    } else {
        uint64_t sz = tq_gguf_type_size(et);
        if (e->n > (r->size - r->pos) / sz)
            return bad(r, at,
                       "key '%s': %" PRIu64 " values of %" PRIu64
                       " bytes run past the end of the file",
                       e->key, e->n, sz);
        r->pos += e->n * sz;
    }
    e->raw_len = r->pos - e->raw_off;
    return TQ_OK;
}

static tq_status parse_kvs(rd *r, tq_gguf *g, int64_t n_kv, kv_ent **out, int64_t *n_out,
                           strtab *tab)
{
    if ((uint64_t)n_kv > (r->size - r->pos) / 12)
        return bad(r, 16, "key count %" PRId64 " cannot fit in the file", n_kv);
    kv_ent *kv = calloc((size_t)(n_kv ? n_kv : 1), sizeof *kv);
    if (!kv || tab_init(tab, (uint64_t)n_kv)) {
        free(kv);
        return tq_ctx_set_error(r->ctx, TQ_ERR_NOMEM, "%s: out of memory", r->label);
    }
    *out = kv;
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < n_kv; i++, *n_out = i) {
        kv_ent *e = &kv[i];
        uint64_t at = r->pos, koff, klen;
        if ((st = rd_str(r, &koff, &klen, "key"))) return st;
        if (!klen) return bad(r, at, "key %" PRId64 " is empty", i);
        e->key = malloc(klen + 1);
        if (!e->key) return tq_ctx_set_error(r->ctx, TQ_ERR_NOMEM, "%s: out of memory", r->label);
        memcpy(e->key, r->p + koff, klen);
        e->key[klen] = 0;
        e->key_len = klen;
        *n_out = i + 1;
        g->kv = kv; /* the table's name lookups read through g */
        if (tab_find(g, tab, kv_name, e->key, klen, i) >= 0)
            return bad(r, at, "duplicate key '%s'", e->key);
        uint32_t t;
        uint64_t tat = r->pos;
        if ((st = rd_u32(r, &t, "value type"))) return st;
        if (t >= TQ_GGUF_TYPE_COUNT)
            return bad(r, tat, "key '%s' has invalid value type %u", e->key, t);
        e->type = (tq_gguf_type)t;
        e->raw_off = r->pos;
        if ((st = parse_value(r, e))) return st;
    }
    return TQ_OK;
}

static void free_kvs(kv_ent *kv, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].str_off);
    }
    free(kv);
}

/* ------------------------------------------------------------ one shard */

static int kv_index(const kv_ent *kv, int64_t n, const char *key)
{
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(kv[i].key, key)) return (int)i;
    return -1;
}

static tq_status parse_header(rd *r, uint32_t *version, int64_t *n_t, int64_t *n_kv)
{
    tq_status st;
    if (r->size < 4 || memcmp(r->p, "GGUF", 4)) {
        char m[5] = {0};
        for (int i = 0; i < 4 && (uint64_t)i < r->size; i++)
            m[i] = (r->p[i] >= 32 && r->p[i] < 127) ? (char)r->p[i] : '?';
        return bad(r, 0, "not a GGUF file (magic '%s', expected 'GGUF')", m);
    }
    r->pos = 4;
    if ((st = rd_u32(r, version, "version"))) return st;
    if ((*version & 0xFFFF) == 0 && *version)
        return bad(r, 4,
                   "version field 0x%08x: a big-endian GGUF; tq reads little-endian files only "
                   "(convert with gguf-py's gguf_convert_endian.py)",
                   *version);
    if (*version == 0) return bad(r, 4, "bad GGUF version 0");
    if (*version == 1) return bad(r, 4, "GGUF version 1 is no longer supported");
    if (*version > 3) return bad(r, 4, "GGUF version %u (tq reads versions 2 and 3)", *version);
    uint64_t a, b;
    if ((st = rd_u64(r, &a, "tensor count")) || (st = rd_u64(r, &b, "key count"))) return st;
    if ((int64_t)a < 0) return bad(r, 8, "tensor count %" PRId64 " is negative", (int64_t)a);
    if ((int64_t)b < 0) return bad(r, 16, "key count %" PRId64 " is negative", (int64_t)b);
    *n_t = (int64_t)a;
    *n_kv = (int64_t)b;
    return TQ_OK;
}

static tq_status resolve_profile(rd *r, tq_gguf *g, const tq_gguf_options *opt)
{
    g->profile = opt ? opt->profile : TQ_PROFILE_DEFAULT;
    int i = kv_index(g->kv, g->n_kv, "tq.type_profile");
    if (i < 0) return TQ_OK;
    kv_ent *e = &g->kv[i];
    char name[32] = {0};
    uint64_t len = e->type == TQ_GGUF_STRING ? get_u64(r->p + e->val_off) : 0;
    if (e->type != TQ_GGUF_STRING || len >= sizeof name)
        return bad(r, e->raw_off, "key 'tq.type_profile' must be a short string");
    memcpy(name, r->p + e->val_off + 8, len);
    tq_type_profile p;
    if (tq_type_profile_parse(name, &p))
        return bad(r, e->raw_off, "unknown tq.type_profile '%s'", name);
    if (opt && opt->profile_explicit && opt->profile != p)
        return bad(r, e->raw_off, "the file records type-id profile %s but %s was requested", name,
                   tq_type_profile_name(opt->profile));
    g->profile = p;
    return TQ_OK;
}

static tq_status parse_alignment(rd *r, tq_gguf *g)
{
    g->alignment = TQ_GGUF_DEFAULT_ALIGNMENT;
    int i = kv_index(g->kv, g->n_kv, "general.alignment");
    if (i < 0) return TQ_OK;
    kv_ent *e = &g->kv[i];
    if (e->type != TQ_GGUF_UINT32)
        return bad(r, e->raw_off, "key 'general.alignment' must be of type UINT32, not %s",
                   tq_gguf_type_name(e->type));
    uint32_t a = get_u32(r->p + e->val_off);
    if (!a || (a & (a - 1))) return bad(r, e->val_off, "alignment %u is not a power of 2", a);
    g->alignment = a;
    return TQ_OK;
}

/* Tensor k's info (name, dimensions, type, offset) into e; *nlen the name's length. */
static tq_status parse_tensor_info(rd *r, tq_gguf *g, int64_t k, const tq_gguf_options *opt,
                                   tensor_ent *e, uint64_t *name_len)
{
    tq_status st;
    memset(e, 0, sizeof *e);
    uint64_t at = r->pos, noff, nlen;
    if ((st = rd_str(r, &noff, &nlen, "tensor name"))) return st;
    if (nlen > TQ_GGUF_MAX_NAME)
        return bad(r, at, "tensor %" PRId64 " name is %" PRIu64 " bytes (at most %d)", k, nlen,
                   TQ_GGUF_MAX_NAME);
    memcpy(e->name, r->p + noff, nlen);
    *name_len = nlen;
    if (memchr(e->name, 0, nlen))
        return bad(r, at, "tensor %" PRId64 " name contains a NUL byte", k);
    if ((st = rd_u32(r, &e->n_dims, "n_dims"))) return st;
    if (e->n_dims > TQ_GGUF_MAX_DIMS)
        return bad(r, at, "tensor '%s' has %u dimensions (at most 4)", e->name, e->n_dims);
    int64_t nel = 1;
    for (int d = 0; d < TQ_GGUF_MAX_DIMS; d++) {
        e->ne[d] = 1;
        if ((uint32_t)d >= e->n_dims) continue;
        uint64_t v;
        if ((st = rd_u64(r, &v, "dimension"))) return st;
        e->ne[d] = (int64_t)v;
        if (e->ne[d] < 0) return bad(r, at, "tensor '%s' dimension %d is negative", e->name, d);
        if (e->ne[d] && nel > INT64_MAX / e->ne[d])
            return bad(r, at, "tensor '%s' element count overflows", e->name);
        nel *= e->ne[d];
    }
    uint32_t tid;
    if ((st = rd_u32(r, &tid, "tensor type"))) return st;
    e->type_id = (int)tid;
    e->type = tq_ggml_type_get(g->profile, (int)tid);
    if (!e->type)
        return bad(r, at, "tensor '%s' has type id %u, unknown in type-id profile %s", e->name,
                   tid, tq_type_profile_name(g->profile));
    if (tq_ggml_type_id_ambiguous((int)tid) && !(opt && opt->profile_explicit) &&
        kv_index(g->kv, g->n_kv, "tq.type_profile") < 0)
        g->assumed = 1;
    if (e->ne[0] % e->type->block)
        return bad(r, at,
                   "tensor '%s' has %" PRId64
                   " elements per row, not a multiple of %s's block size %u",
                   e->name, e->ne[0], e->type->name, e->type->block);
    uint64_t blocks = (uint64_t)nel / e->type->block;
    if (blocks > (uint64_t)INT64_MAX / e->type->bytes)
        return bad(r, at, "tensor '%s' size in bytes overflows", e->name);
    e->nbytes = blocks * e->type->bytes;
    return rd_u64(r, &e->offset, "tensor offset");
}

/* The data section of tensors [first, g->n_t): an aligned start, offsets the running padded
 * sum in info order, all within the file. */
static tq_status check_offsets(rd *r, tq_gguf *g, int64_t first, int64_t n, uint32_t shard_i)
{
    uint64_t a = g->alignment, data = r->pos;
    if (n > 0) data = (r->pos + a - 1) / a * a;
    g->sh[shard_i].data_off = data;
    uint64_t expect = 0;
    for (int64_t i = first; i < g->n_t; i++) {
        tensor_ent *e = &g->t[i];
        if (e->offset != expect)
            return bad(r, data, "tensor '%s' has offset %" PRIu64 ", expected %" PRIu64, e->name,
                       e->offset, expect);
        uint64_t padded = (e->nbytes + a - 1) / a * a;
        if (padded > r->size || expect > r->size - padded || data > r->size - expect - padded)
            return bad(r, data + expect,
                       "tensor '%s' data (%" PRIu64
                       " bytes padded) runs past the end of the file (%" PRIu64 " bytes)",
                       e->name, padded, r->size);
        expect += padded;
    }
    return TQ_OK;
}

static tq_status parse_tensors(rd *r, tq_gguf *g, int64_t n, uint32_t shard_i,
                               const tq_gguf_options *opt)
{
    if ((uint64_t)n > (r->size - r->pos) / 24)
        return bad(r, 8, "tensor count %" PRId64 " cannot fit in the file", n);
    if (g->n_t + n > g->cap_t) {
        int64_t cap = g->n_t + n;
        tensor_ent *t = realloc(g->t, (size_t)(cap ? cap : 1) * sizeof *t);
        if (!t) return tq_ctx_set_error(r->ctx, TQ_ERR_NOMEM, "%s: out of memory", r->label);
        g->t = t;
        g->cap_t = cap;
    }
    if ((uint64_t)(g->n_t + n) * 2 + 16 > g->names.cap) { /* rehash for the new total */
        strtab nt;
        if (tab_init(&nt, (uint64_t)(g->n_t + n)))
            return tq_ctx_set_error(r->ctx, TQ_ERR_NOMEM, "%s: out of memory", r->label);
        free(g->names.slot);
        g->names = nt;
        for (int64_t i = 0; i < g->n_t; i++)
            tab_find(g, &g->names, t_name, g->t[i].name, strlen(g->t[i].name), i);
    }
    int64_t first = g->n_t;
    for (int64_t k = 0; k < n; k++) {
        tensor_ent *e = &g->t[g->n_t];
        uint64_t at = r->pos, nlen = 0;
        tq_status st = parse_tensor_info(r, g, k, opt, e, &nlen);
        if (st) return st;
        e->shard = shard_i;
        if (tab_find(g, &g->names, t_name, e->name, nlen, g->n_t) >= 0)
            return bad(r, at, "duplicate tensor name '%s'", e->name);
        g->n_t++;
    }
    return check_offsets(r, g, first, n, shard_i);
}

/* Parses one mapped shard: metadata into kv (shard 0) or a scratch table. */
static tq_status parse_shard(tq_ctx *ctx, tq_gguf *g, uint32_t si, const tq_gguf_options *opt,
                             kv_ent **kv_out, int64_t *n_kv_out)
{
    shard *s = &g->sh[si];
    rd r = {s->map, s->size, 0, ctx, s->path};
    uint32_t version = 0;
    int64_t n_t = 0, n_kv = 0;
    tq_status st = parse_header(&r, &version, &n_t, &n_kv);
    if (st) return st;
    if (si == 0) {
        g->version = version;
        if ((st = parse_kvs(&r, g, n_kv, &g->kv, &g->n_kv, &g->keys))) return st;
        if ((st = resolve_profile(&r, g, opt)) || (st = parse_alignment(&r, g))) return st;
        return parse_tensors(&r, g, n_t, 0, opt);
    }
    /* later shards: their own metadata (split.*) only */
    tq_gguf tmp = *g;
    tmp.kv = NULL;
    tmp.n_kv = 0;
    strtab keys = {0, NULL};
    st = parse_kvs(&r, &tmp, n_kv, &tmp.kv, &tmp.n_kv, &keys);
    free(keys.slot);
    *kv_out = tmp.kv;
    *n_kv_out = tmp.n_kv;
    if (st) return st;
    uint32_t saved = g->alignment;
    kv_ent *saved_kv = g->kv;
    int64_t saved_n = g->n_kv;
    g->kv = tmp.kv;
    g->n_kv = tmp.n_kv;
    st = parse_alignment(&r, g);
    if (!st) st = parse_tensors(&r, g, n_t, si, opt);
    g->kv = saved_kv;
    g->n_kv = saved_n;
    g->alignment = saved;
    return st;
}

/* ------------------------------------------------------------ files */

static tq_status map_file(tq_ctx *ctx, const char *path, shard *s)
{
    s->path = strdup(path);
    if (!s->path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_map_file(ctx, path, 1, "empty file: not a GGUF file", &s->map, &s->size);
    s->mapped = st == TQ_OK;
    return st;
}

static tq_gguf *new_model(uint32_t n_shards)
{
    tq_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->sh = calloc(n_shards, sizeof *g->sh);
    if (!g->sh) {
        free(g);
        return NULL;
    }
    g->n_sh = 1;
    return g;
}

void tq_gguf_close(tq_gguf *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->n_sh; i++) {
        if (g->sh[i].mapped) tq_unmap_file(g->sh[i].map, g->sh[i].size);
        free(g->sh[i].path);
    }
    free(g->sh);
    free_kvs(g->kv, g->n_kv);
    free(g->t);
    free(g->keys.slot);
    free(g->names.slot);
    free(g);
}

/* Reads an integer KV of a shard's metadata. */
static int split_int(const shard *s, const kv_ent *kv, int64_t n, const char *key, int64_t *out)
{
    int i = kv_index(kv, n, key);
    if (i < 0) return -1;
    const uint8_t *p = s->map + kv[i].val_off;
    switch (kv[i].type) {
        case TQ_GGUF_UINT16:
            *out = (uint16_t)(p[0] | p[1] << 8);
            return 0;
        case TQ_GGUF_INT32:
            *out = (int32_t)get_u32(p);
            return 0;
        case TQ_GGUF_UINT32:
            *out = get_u32(p);
            return 0;
        default:
            return -1;
    }
}

static tq_status open_splits(tq_ctx *ctx, tq_gguf *g, const tq_gguf_options *opt)
{
    int64_t count, no, total;
    shard *s0 = &g->sh[0];
    if (split_int(s0, g->kv, g->n_kv, "split.count", &count)) return TQ_OK;
    if (split_int(s0, g->kv, g->n_kv, "split.no", &no)) no = 0;
    if (no != 0)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: this is shard %" PRId64 " of %" PRId64
                                " of a split model: open shard 1",
                                s0->path, no + 1, count);
    if (count <= 1) return TQ_OK;
    if (count > 99999)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: split.count %" PRId64 " is out of range",
                                s0->path, count);
    const char *p = g->sh[0].path;
    size_t L = strlen(p);
    char want[64];
    snprintf(want, sizeof want, "-00001-of-%05d.gguf", (int)count);
    size_t wl = strlen(want);
    if (L < wl || strcmp(p + L - wl, want))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: split.count is %" PRId64 " but the name does not end in %s", p,
                                count, want);
    shard *sh = realloc(g->sh, (size_t)count * sizeof *sh);
    if (!sh) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    g->sh = sh;
    s0 = NULL; /* moved */
    memset(g->sh + 1, 0, (size_t)(count - 1) * sizeof *sh);
    for (int64_t k = 1; k < count; k++) {
        char *path = malloc(L + 64);
        if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        memcpy(path, p, L - wl);
        snprintf(path + L - wl, 64, "-%05d-of-%05d.gguf", (int)k + 1, (int)count);
        g->n_sh = (uint32_t)k + 1;
        tq_status st = map_file(ctx, path, &g->sh[k]);
        free(path);
        if (st) return st;
        kv_ent *kv = NULL;
        int64_t n_kv = 0;
        st = parse_shard(ctx, g, (uint32_t)k, opt, &kv, &n_kv);
        int64_t sno = -1, scount = -1;
        if (!st && (split_int(&g->sh[k], kv, n_kv, "split.no", &sno) || sno != k ||
                    split_int(&g->sh[k], kv, n_kv, "split.count", &scount) || scount != count))
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                  "%s: split.no/split.count are not %" PRId64 "/%" PRId64,
                                  g->sh[k].path, k, count);
        free_kvs(kv, n_kv);
        if (st) return st;
    }
    if (!split_int(&g->sh[0], g->kv, g->n_kv, "split.tensors.count", &total) && total != g->n_t)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: split.tensors.count is %" PRId64
                                " but the shards hold %" PRId64 " tensors",
                                p, total, g->n_t);
    return TQ_OK;
}

tq_status tq_gguf_open(tq_ctx *ctx, const char *path, const tq_gguf_options *opt, tq_gguf **out)
{
    *out = NULL;
    tq_gguf *g = new_model(1);
    if (!g) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = map_file(ctx, path, &g->sh[0]);
    if (!st) st = parse_shard(ctx, g, 0, opt, NULL, NULL);
    if (!st) st = open_splits(ctx, g, opt);
    if (st) {
        tq_gguf_close(g);
        return st;
    }
    *out = g;
    return TQ_OK;
}

tq_status tq_gguf_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                              const tq_gguf_options *opt, tq_gguf **out)
{
    *out = NULL;
    tq_gguf *g = new_model(1);
    if (!g || !(g->sh[0].path = strdup(label ? label : "(memory)"))) {
        tq_gguf_close(g);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    g->sh[0].map = data;
    g->sh[0].size = size;
    tq_status st = parse_shard(ctx, g, 0, opt, NULL, NULL);
    if (st) {
        tq_gguf_close(g);
        return st;
    }
    *out = g;
    return TQ_OK;
}

/* ------------------------------------------------------------ lookups */

int64_t tq_gguf_find_key(const tq_gguf *g, const char *key)
{
    return tab_find(g, &g->keys, kv_name, key, strlen(key), -1);
}

int64_t tq_gguf_find_tensor(const tq_gguf *g, const char *name)
{
    return tab_find(g, &g->names, t_name, name, strlen(name), -1);
}
