/* imatrix.c - reading importance matrices (see imatrix.h, IMATRIX.md).
 * Everything is converted at open into one list of (name, mean squares), so
 * lookups do not depend on the form and a damaged file fails before any
 * tensor is quantized. */
#include "file_io.h"
#include "gguf.h"
#include "imatrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 1000000
#define MAX_NAME    4096

typedef struct entry {
    char *name;
    float *v;
    uint64_t n;
} entry;

struct tq_imatrix {
    entry *e;
    uint32_t n, cap;
    int gguf;
};

static tq_status add(tq_ctx *ctx, tq_imatrix *m, const char *name, size_t nl, uint64_t n,
                     const char *label)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (strlen(m->e[i].name) == nl && !memcmp(m->e[i].name, name, nl))
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: tensor %.*s appears twice", label,
                                    (int)nl, name);
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 64;
        entry *p = realloc(m->e, cap * sizeof *p);
        if (!p) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        m->e = p;
        m->cap = cap;
    }
    entry *e = &m->e[m->n];
    e->name = malloc(nl + 1);
    e->v = malloc((n ? n : 1) * sizeof(float));
    if (!e->name || !e->v) {
        free(e->name);
        free(e->v);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    memcpy(e->name, name, nl);
    e->name[nl] = 0;
    e->n = n;
    m->n++;
    return TQ_OK;
}

static int finite_nonneg(const float *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!(v[i] >= 0.0f) || isinf(v[i])) return 0;
    return 1;
}

static tq_status from_gguf(tq_ctx *ctx, tq_imatrix *m, const tq_gguf *g, const char *label)
{
    uint64_t tl = 0;
    const char *type = tq_gguf_get_str(g, "general.type", NULL, &tl);
    if (type && !(tl == 7 && !memcmp(type, "imatrix", 7)))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: a GGUF of general.type '%.*s', not an imatrix", label,
                                (int)(tl < 64 ? tl : 64), type);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const char *nm = tq_gguf_tensor_name(g, i);
        size_t len = strlen(nm);
        if (len <= 8 || strcmp(nm + len - 8, ".in_sum2")) continue;
        char cname[MAX_NAME + 16];
        snprintf(cname, sizeof cname, "%.*s.counts", (int)(len - 8), nm);
        int64_t ci = tq_gguf_find_tensor(g, cname);
        const int64_t *ne = tq_gguf_tensor_ne(g, i);
        if (ci < 0)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s has no %s", label, nm, cname);
        const int64_t *cne = tq_gguf_tensor_ne(g, ci);
        if (tq_gguf_tensor_type(g, i)->dtype != TQ_DT_F32 ||
            tq_gguf_tensor_type(g, ci)->dtype != TQ_DT_F32 || ne[2] != 1 || ne[3] != 1 ||
            cne[0] != 1 || cne[1] != ne[1] || cne[2] != 1 || cne[3] != 1)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                    "%s: %s / .counts are not F32 [n, n_mat] / [1, n_mat]", label,
                                    nm);
        uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1];
        tq_status st = add(ctx, m, nm, len - 8, n, label);
        if (st) return st;
        const float *sum2 = tq_gguf_tensor_data(g, i), *cnt = tq_gguf_tensor_data(g, ci);
        float *v = m->e[m->n - 1].v;
        for (int64_t e = 0; e < ne[1]; e++) {
            float c;
            memcpy(&c, cnt + e, 4);
            if (!(c >= 0.0f) || isinf(c))
                return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s has a bad count", label, cname);
            for (int64_t j = 0; j < ne[0]; j++) {
                float s;
                memcpy(&s, sum2 + e * ne[0] + j, 4);
                v[e * ne[0] + j] = c > 0.0f ? s / c : 0.0f; /* no tokens seen: no preference */
            }
        }
        if (!finite_nonneg(v, n))
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                    "%s: %s holds negative, NaN or infinite values", label, nm);
    }
    if (!m->n)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: a GGUF without any .in_sum2 tensor (not an imatrix)", label);
    m->gguf = 1;
    return TQ_OK;
}

/* Legacy: i32 n; n x (i32 len, name, i32 ncall, i32 nval, f32[nval]); then
 * optionally i32 last_chunk, i32 len, dataset name. */
static tq_status from_dat(tq_ctx *ctx, tq_imatrix *m, const uint8_t *p, uint64_t size,
                          const char *label)
{
    uint64_t pos = 0;
    int32_t n = 0;
#define GET(v)                                                                                     \
    do {                                                                                           \
        if (size - pos < 4)                                                                        \
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: truncated imatrix at offset %llu",    \
                                    label, (unsigned long long)pos);                               \
        memcpy(&(v), p + pos, 4);                                                                  \
        pos += 4;                                                                                  \
    } while (0)
    GET(n);
    if (n <= 0 || n > MAX_ENTRIES || (uint64_t)n > size / 16)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                "%s: not an imatrix (GGUF or legacy .dat): entry count %d", label,
                                n);
    for (int32_t i = 0; i < n; i++) {
        int32_t len, ncall, nval;
        GET(len);
        if (len <= 0 || len > MAX_NAME || (uint64_t)len > size - pos)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: entry %d: bad name length %d", label,
                                    i, len);
        const char *name = (const char *)p + pos;
        pos += (uint64_t)len;
        GET(ncall);
        GET(nval);
        if (nval <= 0 || (uint64_t)nval > (size - pos) / 4)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: entry %d: %d values do not fit", label,
                                    i, nval);
        if (memchr(name, 0, (size_t)len))
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: entry %d: a NUL in its name", label,
                                    i);
        tq_status st = add(ctx, m, name, (size_t)len, (uint64_t)nval, label);
        if (st) return st;
        memcpy(m->e[m->n - 1].v, p + pos, 4ull * (uint64_t)nval);
        pos += 4ull * (uint64_t)nval;
        if (!finite_nonneg(m->e[m->n - 1].v, (uint64_t)nval))
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                    "%s: %s holds negative, NaN or infinite values", label,
                                    m->e[m->n - 1].name);
    }
    if (pos < size) { /* last chunk and dataset name */
        int32_t last, len;
        GET(last);
        GET(len);
        if (len < 0 || (uint64_t)len != size - pos)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                    "%s: bytes after the entries that are not a dataset name",
                                    label);
    }
#undef GET
    return TQ_OK;
}

static tq_status open_bytes(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *path,
                            const char *label, tq_imatrix **out)
{
    *out = NULL;
    tq_imatrix *m = calloc(1, sizeof *m);
    if (!m) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st;
    if (size >= 4 && !memcmp(p, "GGUF", 4)) {
        tq_gguf *g;
        st = path ? tq_gguf_open(ctx, path, NULL, &g)
                  : tq_gguf_open_memory(ctx, p, size, label, NULL, &g);
        if (!st) {
            st = from_gguf(ctx, m, g, label);
            tq_gguf_close(g);
        }
    } else {
        st = from_dat(ctx, m, p, size, label);
    }
    if (st) {
        tq_imatrix_close(m);
        return st;
    }
    *out = m;
    return TQ_OK;
}

tq_status tq_imatrix_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                 tq_imatrix **out)
{
    return open_bytes(ctx, data, size, NULL, label ? label : "(memory)", out);
}

tq_status tq_imatrix_open(tq_ctx *ctx, const char *path, tq_imatrix **out)
{
    const uint8_t *map;
    uint64_t size;
    *out = NULL;
    tq_status st = tq_map_file(ctx, path, 4, "too short for an imatrix", &map, &size);
    if (st) return st;
    st = open_bytes(ctx, map, size, path, path, out);
    tq_unmap_file(map, size);
    return st;
}

void tq_imatrix_close(tq_imatrix *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].v);
    }
    free(m->e);
    free(m);
}

uint32_t tq_imatrix_n_entries(const tq_imatrix *m) { return m->n; }
const char *tq_imatrix_name(const tq_imatrix *m, uint32_t i)
{
    return i < m->n ? m->e[i].name : NULL;
}
int tq_imatrix_is_gguf(const tq_imatrix *m) { return m->gguf; }

const float *tq_imatrix_get(const tq_imatrix *m, const char *tensor, uint64_t *n)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].name, tensor)) {
            *n = m->e[i].n;
            return m->e[i].v;
        }
    return NULL;
}
