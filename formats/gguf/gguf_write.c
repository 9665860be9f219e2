/* gguf_write.c - the GGUF writer.  The whole header is known before the
 * first data byte (metadata and tensor infos with final types), so it is
 * written once, up front, and tensor data streams after it.  The output is a
 * temporary file beside the destination until tq_gguf_writer_finish() renames
 * it, so a failed run never leaves a partial model behind. */
#include "file_io.h"
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *raw; /* the value as stored after the type field */
    uint64_t raw_len;
} wkv;

typedef struct wtensor {
    char name[TQ_GGUF_MAX_NAME + 1];
    int type_id;
    uint32_t n_dims;
    int64_t ne[TQ_GGUF_MAX_DIMS];
    uint64_t nbytes;
} wtensor;

enum { W_BUILDING, W_OPEN, W_DONE, W_FAILED };

struct tq_gguf_writer {
    tq_ctx *ctx;
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    tq_type_profile profile;
    uint32_t alignment;
    int state;
    char *path;         /* as given; shards get -0000k-of-0000N.gguf names */
    uint64_t split_max; /* 0: one file */
    int n_sh, cur_sh;
    struct wshard {
        char *path, *tmp;
        int64_t first, end; /* tensors [first, end) */
    } * sh;
    FILE *f;
    int64_t cur;       /* tensor being written */
    uint64_t cur_done; /* its bytes so far */
};

tq_status tq_gguf_writer_new(tq_ctx *ctx, tq_gguf_writer **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    (*out)->ctx = ctx;
    (*out)->profile = TQ_PROFILE_DEFAULT;
    (*out)->alignment = TQ_GGUF_DEFAULT_ALIGNMENT;
    return TQ_OK;
}

void tq_gguf_writer_free(tq_gguf_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n_sh; i++) /* unlinked first: an abandoned output is not synced */
        if (w->sh[i].tmp && w->state != W_DONE) unlink(w->sh[i].tmp);
    if (w->f) fclose(w->f);
    for (int i = 0; i < w->n_sh; i++) {
        free(w->sh[i].path);
        free(w->sh[i].tmp);
    }
    free(w->sh);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].raw);
    }
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w);
}

static tq_status building(tq_gguf_writer *w)
{
    if (w->state != W_BUILDING)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                "GGUF writer: metadata and tensors must be set before open");
    return TQ_OK;
}

tq_status tq_gguf_writer_set_split(tq_gguf_writer *w, uint64_t max_bytes)
{
    tq_status st = building(w);
    if (st) return st;
    w->split_max = max_bytes;
    return TQ_OK;
}

static int64_t find_kv(const tq_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return i;
    return -1;
}

int64_t tq_gguf_writer_n_kv(const tq_gguf_writer *w) { return w->n_kv; }

/* Takes ownership of raw. */
static tq_status put_kv(tq_gguf_writer *w, const char *key, uint32_t type, uint8_t *raw,
                        uint64_t raw_len)
{
    tq_status st = building(w);
    if (st || !*key) {
        free(raw);
        return st ? st : tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "GGUF writer: empty key");
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kv[i].raw);
        w->kv[i].type = type;
        w->kv[i].raw = raw;
        w->kv[i].raw_len = raw_len;
        return TQ_OK;
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *kv = realloc(w->kv, (size_t)cap * sizeof *kv);
        if (!kv) {
            free(raw);
            return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(raw);
        return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    }
    w->kv[w->n_kv++] = (wkv){k, type, raw, raw_len};
    return TQ_OK;
}

static uint8_t *dup_bytes(const void *p, uint64_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    if (b && n) memcpy(b, p, n);
    return b;
}

tq_status tq_gguf_writer_copy_kv(tq_gguf_writer *w, const tq_gguf *src, int64_t i)
{
    uint64_t len;
    const uint8_t *raw = tq_gguf_kv_raw(src, i, &len);
    uint8_t *b = dup_bytes(raw, len);
    if (!b) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    return put_kv(w, tq_gguf_kv_key(src, i), (uint32_t)tq_gguf_kv_type(src, i), b, len);
}

tq_status tq_gguf_writer_copy_kvs(tq_gguf_writer *w, const tq_gguf *src)
{
    for (int64_t i = 0; i < tq_gguf_n_kv(src); i++) {
        if (!strncmp(tq_gguf_kv_key(src, i), "split.", 6)) continue;
        tq_status st = tq_gguf_writer_copy_kv(w, src, i);
        if (st) return st;
    }
    return TQ_OK;
}

tq_status tq_gguf_writer_set_scalar(tq_gguf_writer *w, const char *key, tq_gguf_type t,
                                    const void *le_value)
{
    size_t sz = tq_gguf_type_size(t);
    if (!sz)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "GGUF writer: %s is not a scalar type",
                                tq_gguf_type_name(t));
    uint8_t *b = dup_bytes(le_value, sz);
    if (!b) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    return put_kv(w, key, (uint32_t)t, b, sz);
}

tq_status tq_gguf_writer_set_u32(tq_gguf_writer *w, const char *key, uint32_t v)
{
    return tq_gguf_writer_set_scalar(w, key, TQ_GGUF_UINT32, &v);
}

tq_status tq_gguf_writer_set_str(tq_gguf_writer *w, const char *key, const char *s, uint64_t len)
{
    uint8_t *b = malloc(8 + len);
    if (!b) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(b, &len, 8);
    memcpy(b + 8, s, len);
    return put_kv(w, key, TQ_GGUF_STRING, b, 8 + len);
}

tq_status tq_gguf_writer_set_array(tq_gguf_writer *w, const char *key, tq_gguf_type t, uint64_t n,
                                   const void *data, const uint64_t *lens)
{
    if (t == TQ_GGUF_ARRAY || (unsigned)t >= TQ_GGUF_TYPE_COUNT)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "GGUF writer: arrays of %s are not allowed",
                                tq_gguf_type_name(t));
    uint64_t len = 12;
    if (t == TQ_GGUF_STRING)
        for (uint64_t j = 0; j < n; j++) len += 8 + lens[j];
    else
        len += n * tq_gguf_type_size(t);
    uint8_t *b = malloc(len), *p = b + 12;
    if (!b) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    uint32_t t32 = (uint32_t)t;
    memcpy(b, &t32, 4);
    memcpy(b + 4, &n, 8);
    if (t == TQ_GGUF_STRING) {
        const char *const *s = data;
        for (uint64_t j = 0; j < n; j++) {
            memcpy(p, &lens[j], 8);
            memcpy(p + 8, s[j], lens[j]);
            p += 8 + lens[j];
        }
    } else if (n) {
        memcpy(p, data, n * tq_gguf_type_size(t));
    }
    return put_kv(w, key, TQ_GGUF_ARRAY, b, len);
}

tq_status tq_gguf_writer_remove_kv(tq_gguf_writer *w, const char *key)
{
    tq_status st = building(w);
    if (st) return st;
    int64_t i = find_kv(w, key);
    if (i < 0) return TQ_OK;
    free(w->kv[i].key);
    free(w->kv[i].raw);
    memmove(w->kv + i, w->kv + i + 1, (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return TQ_OK;
}

tq_status tq_gguf_writer_set_profile(tq_gguf_writer *w, tq_type_profile p)
{
    tq_status st = building(w);
    if (st) return st;
    if (p < 0 || p >= TQ_PROFILE_COUNT)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "unknown type-id profile %d", (int)p);
    if (w->n_t)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                "GGUF writer: set the type-id profile before adding tensors");
    w->profile = p;
    return TQ_OK;
}

tq_status tq_gguf_writer_add_tensor(tq_gguf_writer *w, const char *name, int type_id,
                                    uint32_t n_dims, const int64_t *ne)
{
    tq_status st = building(w);
    if (st) return st;
    size_t nl = strlen(name);
    if (nl > TQ_GGUF_MAX_NAME)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "tensor name '%s' is %zu bytes (at most %d)",
                                name, nl, TQ_GGUF_MAX_NAME);
    if (n_dims > TQ_GGUF_MAX_DIMS)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "tensor '%s' has %u dimensions", name, n_dims);
    const tq_ggml_type *ty = tq_ggml_type_get(w->profile, type_id);
    if (!ty)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                "tensor '%s': type id %d is unknown in profile %s", name, type_id,
                                tq_type_profile_name(w->profile));
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "duplicate tensor name '%s'", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *e = &w->t[w->n_t];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, nl);
    e->type_id = type_id;
    e->n_dims = n_dims;
    int64_t nel = 1;
    for (uint32_t d = 0; d < TQ_GGUF_MAX_DIMS; d++) {
        e->ne[d] = d < n_dims ? ne[d] : 1;
        if (e->ne[d] < 0 || (e->ne[d] && nel > INT64_MAX / e->ne[d]))
            return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "tensor '%s' has an invalid shape", name);
        nel *= e->ne[d];
    }
    if (e->ne[0] % ty->block)
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                "tensor '%s': row of %" PRId64
                                " is not a multiple of %s's block %u",
                                name, e->ne[0], ty->name, ty->block);
    e->nbytes = (uint64_t)nel / ty->block * ty->bytes;
    w->n_t++;
    return TQ_OK;
}

/* ------------------------------------------------------------ output */

static tq_status werr(tq_gguf_writer *w, const char *what)
{
    w->state = W_FAILED;
    return tq_ctx_set_error(w->ctx, TQ_ERR_IO, "%s: %s: %s", w->path ? w->path : "output", what,
                            strerror(errno));
}

static int put(tq_gguf_writer *w, const void *p, size_t n)
{
    return fwrite(p, 1, n, w->f) == n ? 0 : -1;
}

static int pad(tq_gguf_writer *w, uint64_t pos)
{
    static const uint8_t zeros[256];
    uint64_t n = (w->alignment - pos % w->alignment) % w->alignment;
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (put(w, zeros, k)) return -1;
        n -= k;
    }
    return 0;
}

static tq_status settle_metadata(tq_gguf_writer *w)
{
    int64_t i = find_kv(w, "general.alignment");
    if (i >= 0) {
        uint32_t a;
        if (w->kv[i].type != TQ_GGUF_UINT32 || w->kv[i].raw_len != 4)
            return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "general.alignment must be a UINT32");
        memcpy(&a, w->kv[i].raw, 4);
        if (!a || (a & (a - 1)))
            return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "general.alignment %u is not a power of 2",
                                    a);
        w->alignment = a;
    }
    int ambiguous = 0;
    for (int64_t t = 0; t < w->n_t; t++) ambiguous |= tq_ggml_type_id_ambiguous(w->t[t].type_id);
    i = find_kv(w, "tq.type_profile");
    const char *pn = tq_type_profile_name(w->profile);
    if (i >= 0) {
        uint64_t len;
        memcpy(&len, w->kv[i].raw, 8);
        if (w->kv[i].type != TQ_GGUF_STRING || len != strlen(pn) ||
            memcmp(w->kv[i].raw + 8, pn, len))
            return tq_ctx_set_error(
                w->ctx, TQ_ERR_ARG,
                "tq.type_profile in the metadata is not the writer's profile %s", pn);
    } else if (ambiguous) {
        /* record how to read ids whose meaning depends on the ggml revision */
        return tq_gguf_writer_set_str(w, "tq.type_profile", pn, strlen(pn));
    }
    return TQ_OK;
}

/* Shards: tensors in order, a new shard when the next tensor would pass the
 * size limit (a tensor is never cut, so a shard may exceed it alone). */
static tq_status plan_shards(tq_gguf_writer *w)
{
    int n = 1;
    uint64_t size = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        uint64_t b = w->t[i].nbytes;
        if (w->split_max && size && size + b > w->split_max) {
            n++;
            size = 0;
        }
        size += b;
    }
    w->sh = calloc((size_t)n, sizeof *w->sh);
    if (!w->sh) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    w->n_sh = n;
    size_t L = strlen(w->path);
    if (n > 1 && (L < 5 || strcmp(w->path + L - 5, ".gguf")))
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "%s: a split output's name must end in .gguf",
                                w->path);
    int k = 0;
    size = 0;
    for (int64_t i = 0; i <= w->n_t; i++) {
        if (i == w->n_t || (w->split_max && size && size + w->t[i].nbytes > w->split_max)) {
            w->sh[k].end = i;
            if (++k < n) w->sh[k].first = i;
            size = 0;
        }
        if (i < w->n_t) size += w->t[i].nbytes;
    }
    for (int s = 0; s < n; s++) {
        w->sh[s].path = malloc(L + 32);
        if (!w->sh[s].path) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
        if (n == 1)
            strcpy(w->sh[s].path, w->path);
        else
            sprintf(w->sh[s].path, "%.*s-%05d-of-%05d.gguf", (int)(L - 5), w->path, s + 1, n);
    }
    return TQ_OK;
}

static tq_status write_kv(tq_gguf_writer *w, const char *key, uint32_t type, const void *raw,
                          uint64_t len, uint64_t *pos)
{
    uint64_t kl = strlen(key);
    if (put(w, &kl, 8) || put(w, key, kl) || put(w, &type, 4) || put(w, raw, len))
        return werr(w, "write failed");
    *pos += 12 + kl + len;
    return TQ_OK;
}

/* Creates shard s's temporary file and writes its header. */
static tq_status open_shard(tq_gguf_writer *w, int s)
{
    struct wshard *sh = &w->sh[s];
    tq_status st = tq_temp_create(w->ctx, sh->path, &sh->tmp, &w->f);
    if (st) {
        w->state = W_FAILED;
        return st;
    }
    w->cur_sh = s;

    int split = w->n_sh > 1;
    uint32_t magic = 0x46554747u, version = 3;
    uint64_t nt = (uint64_t)(sh->end - sh->first), pos = 24;
    int64_t align_kv = find_kv(w, "general.alignment");
    uint64_t nk = (uint64_t)w->n_kv; /* the first split has every key, the others alignment */
    if (s != 0) nk = align_kv >= 0 ? 1 : 0;
    if (split) nk += 3;
    if (put(w, &magic, 4) || put(w, &version, 4) || put(w, &nt, 8) || put(w, &nk, 8))
        return werr(w, "write failed");
    for (int64_t i = 0; i < w->n_kv; i++)
        if (s == 0 || i == align_kv)
            if ((st = write_kv(w, w->kv[i].key, w->kv[i].type, w->kv[i].raw, w->kv[i].raw_len,
                               &pos)))
                return st;
    if (split) { /* llama.cpp's split keys: u16 shard number, u16 count, i32 total tensors */
        uint16_t no = (uint16_t)s, count = (uint16_t)w->n_sh;
        int32_t total = (int32_t)w->n_t;
        if ((st = write_kv(w, "split.no", TQ_GGUF_UINT16, &no, 2, &pos)) ||
            (st = write_kv(w, "split.count", TQ_GGUF_UINT16, &count, 2, &pos)) ||
            (st = write_kv(w, "split.tensors.count", TQ_GGUF_INT32, &total, 4, &pos)))
            return st;
    }
    uint64_t off = 0;
    for (int64_t i = sh->first; i < sh->end; i++) {
        wtensor *e = &w->t[i];
        uint64_t nl = strlen(e->name);
        uint32_t tid = (uint32_t)e->type_id;
        if (put(w, &nl, 8) || put(w, e->name, nl) || put(w, &e->n_dims, 4) ||
            put(w, e->ne, 8 * e->n_dims) || put(w, &tid, 4) || put(w, &off, 8))
            return werr(w, "write failed");
        pos += 8 + nl + 4 + 8 * e->n_dims + 4 + 8;
        off += (e->nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    if (nt && pad(w, pos)) return werr(w, "write failed");
    return TQ_OK;
}

static tq_status close_shard(tq_gguf_writer *w)
{
    FILE *f = w->f;
    w->f = NULL;
    if (fflush(f)) {
        fclose(f);
        return werr(w, "write failed");
    }
    if (fclose(f)) return werr(w, "write failed"); /* the stream fsyncs as it closes */
    return TQ_OK;
}

tq_status tq_gguf_writer_open(tq_gguf_writer *w, const char *path, const char *const *inputs,
                              size_t n_inputs)
{
    tq_status st = building(w);
    if (st) return st;
    if (!strcmp(path, "-") || !strncmp(path, "s3://", 5)) /* shards, a header written last */
        return tq_ctx_set_error(w->ctx, TQ_ERR_IO, "%s: a GGUF file is written to a file, not to "
                                "a pipe or an object: give its path (./%s for that name)",
                                path, path);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strncmp(w->kv[i].key, "split.", 6)) /* the writer owns the split layout */
            tq_gguf_writer_remove_kv(w, w->kv[i--].key);
    if ((st = settle_metadata(w))) return st;
    w->path = strdup(path);
    if (!w->path) return tq_ctx_set_error(w->ctx, TQ_ERR_NOMEM, "out of memory");
    if ((st = plan_shards(w))) return st;
    for (int s = 0; s < w->n_sh; s++)
        for (size_t i = 0; i < n_inputs; i++)
            if (tq_same_file(w->sh[s].path, inputs[i]))
                return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                        "%s: the output would overwrite the input %s",
                                        w->sh[s].path, inputs[i]);
    w->state = W_OPEN;
    w->cur = 0;
    w->cur_done = 0;
    return open_shard(w, 0);
}

/* Pads finished tensors and moves to the next shard when one is complete. */
static tq_status advance(tq_gguf_writer *w)
{
    while (w->cur < w->n_t && w->t[w->cur].nbytes == w->cur_done) {
        if (pad(w, w->cur_done)) return werr(w, "write failed");
        w->cur++;
        w->cur_done = 0;
        if (w->cur == w->sh[w->cur_sh].end && w->cur_sh + 1 < w->n_sh) {
            tq_status st = close_shard(w);
            if (!st) st = open_shard(w, w->cur_sh + 1);
            if (st) return st;
        }
    }
    return TQ_OK;
}

tq_status tq_gguf_writer_write(tq_gguf_writer *w, const void *data, size_t len)
{
    if (w->state != W_OPEN) return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "GGUF writer: not open");
    const uint8_t *p = data;
    while (len) {
        tq_status st = advance(w);
        if (st) return st;
        if (w->cur >= w->n_t) {
            w->state = W_FAILED;
            return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                    "GGUF writer: more data than the tensors hold");
        }
        uint64_t room = w->t[w->cur].nbytes - w->cur_done;
        size_t k = len < room ? len : (size_t)room;
        if (put(w, p, k)) return werr(w, "write failed");
        p += k;
        len -= k;
        w->cur_done += k;
    }
    return TQ_OK;
}

tq_status tq_gguf_writer_finish(tq_gguf_writer *w)
{
    if (w->state != W_OPEN) return tq_ctx_set_error(w->ctx, TQ_ERR_ARG, "GGUF writer: not open");
    tq_status st = advance(w);
    if (st) return st;
    if (w->cur < w->n_t) {
        w->state = W_FAILED;
        return tq_ctx_set_error(w->ctx, TQ_ERR_ARG,
                                "GGUF writer: tensor '%s' got %" PRIu64 " of %" PRIu64 " bytes",
                                w->t[w->cur].name, w->cur_done, w->t[w->cur].nbytes);
    }
    if ((st = close_shard(w))) return st;
    for (int s = 0; s < w->n_sh; s++)
        if (rename(w->sh[s].tmp, w->sh[s].path))
            return werr(w, "cannot rename the finished file into place");
    w->state = W_DONE;
    return TQ_OK;
}

tq_status tq_gguf_copy_tensor(const tq_gguf *src, int64_t i, tq_gguf_writer *w)
{
    const uint8_t *p = tq_gguf_tensor_data(src, i);
    uint64_t n = tq_gguf_tensor_nbytes(src, i), step = 16u << 20;
    tq_status st = TQ_OK;
    for (uint64_t off = 0; off < n && !st; off += step) {
        uint64_t len = n - off < step ? n - off : step;
        st = tq_gguf_writer_write(w, p + off, (size_t)len);
        tq_gguf_tensor_release_range(src, i, off, len);
    }
    return st;
}
