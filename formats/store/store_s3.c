/* store_s3.c - a store under s3://bucket/prefix (store_backend.h, io/S3.md): each entry an
 * object written by one PUT or one upload, which appears whole; a listing of snap/ checks the
 * bucket answers when the store is opened. */
#define _GNU_SOURCE /* asprintf */
#include "store_backend.h"

#include "io.h"
#include "s3.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s3_claims(const char *where) { return tq_s3_is_url(where); }

static int count_one(void *user, const char *name, uint64_t size)
{
    (void)name;
    (void)size;
    (*(uint32_t *)user)++;
    return 0; /* one is enough */
}

/* The bucket answers a listing, or the store is refused. */
static tq_status s3_open(tq_ctx *ctx, tq_store *s)
{
    uint32_t seen = 0;
    size_t n = strlen(s->root);
    while (n > 5 && s->root[n - 1] == '/') s->root[--n] = 0;
    char *snap = tq_store_path(s, "snap/");
    tq_status st = snap ? tq_s3_list(ctx, snap, count_one, &seen)
                        : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    free(snap);
    return st;
}

/* An object written by one PUT. */
static tq_status s3_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n)
{
    tq_s3 *o;
    tq_s3_upload *u = NULL;
    char *url = tq_store_path(s, entry);
    if (!url) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_s3_open(ctx, url, &o);
    free(url);
    if (st) return st;
    st = tq_s3_upload_begin(ctx, o, &u);
    if (!st) st = tq_s3_upload_write(ctx, u, p, n);
    if (!st) st = tq_s3_upload_commit(ctx, u);
    else if (u) tq_s3_upload_abort(u);
    tq_s3_close(o);
    return st;
}

/* An object whole, at most max bytes: its size first where it may be large. */
static tq_status get_object(tq_ctx *ctx, const char *url, uint64_t max, char **p, uint64_t *n,
                            int *found)
{
    tq_s3 *o;
    uint64_t size = 0;
    tq_status st = tq_s3_open(ctx, url, &o);
    if (st) return st;
    uint64_t want = max;
    if (max > TQ_STORE_ENTRY_MOST) st = tq_s3_size(ctx, o, &size);
    if (!st && max > TQ_STORE_ENTRY_MOST && size > max)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %llu bytes, more than an entry holds",
                              url, (unsigned long long)size);
    if (!st && max > TQ_STORE_ENTRY_MOST) want = size;
    *p = st ? NULL : malloc(want + 1);
    if (!st && !*p) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tq_s3_get(ctx, o, 0, want, *p, n, &size);
    if (st && tq_s3_missing(o)) {
        st = TQ_OK; /* none: not found */
    } else if (!st && size > want) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %llu bytes, more than an entry holds",
                              url, (unsigned long long)size);
    } else if (!st) {
        (*p)[*n] = 0;
        *found = 1;
    }
    if (!*found) {
        free(*p);
        *p = NULL;
        *n = 0;
    }
    tq_s3_close(o);
    return st;
}

static tq_status s3_get(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                        uint64_t *n, int *found)
{
    char *url = tq_store_path(s, entry);
    if (!url) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = get_object(ctx, url, max, p, n, found);
    free(url);
    return st;
}

/* The objects one level under FOLDER/. */
static tq_status s3_list(tq_ctx *ctx, tq_store *s, const char *folder, tq_store_names *l)
{
    char *dir = NULL;
    if (asprintf(&dir, "%s/%s/", s->root, folder) < 0)
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_s3_list(ctx, dir, tq_store_names_add, l);
    free(dir);
    return st;
}

static tq_status s3_remove(tq_ctx *ctx, tq_store *s, const char *entry)
{
    tq_s3 *o;
    char *url = tq_store_path(s, entry);
    if (!url) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_s3_open(ctx, url, &o);
    if (!st) st = tq_s3_delete(ctx, o);
    tq_s3_close(o);
    free(url);
    return st;
}

static tq_status s3_size(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size,
                         int *found)
{
    tq_s3 *o;
    char *url = tq_store_path(s, entry);
    if (!url) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_s3_open(ctx, url, &o);
    if (!st) st = tq_s3_size(ctx, o, size);
    if (st && tq_s3_missing(o)) st = TQ_OK;
    else if (!st) *found = 1;
    tq_s3_close(o);
    free(url);
    return st;
}

static tq_status s3_write_begin(tq_ctx *ctx, tq_store *s, const char *entry,
                                struct tq_store_writer *w)
{
    tq_sink *sink = NULL;
    w->path = tq_store_path(s, entry);
    if (!w->path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_sink_open(ctx, w->path, &sink, &w->f);
    w->own = sink;
    return st;
}

static tq_status s3_write_commit(tq_ctx *ctx, struct tq_store_writer *w)
{
    return tq_sink_commit(ctx, w->own);
}

static void s3_write_abort(struct tq_store_writer *w)
{
    if (w->own) tq_sink_abort(w->own);
}

static const char *s3_write_error(const struct tq_store_writer *w)
{
    return w->own ? tq_sink_error(w->own) : "";
}

/* Its header, metadata and index read by ranges (a prefix's chunks alone are fetched later). */
static tq_status s3_snapshot(tq_ctx *ctx, tq_store *s, const char *entry, tqkv_reader **out)
{
    tq_src *src;
    char *url = tq_store_path(s, entry);
    if (!url) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_src_open(ctx, url, &src);
    if (!st) st = tqkv_open_src(ctx, src, out);
    free(url);
    return st;
}

const tq_store_backend tq_store_s3_backend = {
    .name = "s3",
    .remote = 1,
    .claims = s3_claims,
    .open = s3_open,
    .put = s3_put,
    .get = s3_get,
    .list = s3_list,
    .remove = s3_remove,
    .size = s3_size,
    .write_begin = s3_write_begin,
    .write_commit = s3_write_commit,
    .write_abort = s3_write_abort,
    .write_error = s3_write_error,
    .snapshot = s3_snapshot,
};
