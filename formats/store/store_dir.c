/* store_dir.c - a store in a directory (store_backend.h): each entry a regular file, written to
 * a temporary file beside it and renamed into place; the folders on the way to an entry are
 * the store's own, never links out of it, and no entry is read through a link. */
#define _GNU_SOURCE /* O_NOFOLLOW, asprintf */
#include "store_backend.h"

#include "file_io.h"
#include "tqkv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes dir and the folders above it. */
static int make_dirs(const char *dir)
{
    char *p = strdup(dir);
    int rc = p ? 0 : -1;
    for (char *q = p ? p + 1 : NULL; q && *q && !rc; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(p, 0777) && errno != EEXIST) rc = -1;
        *q = '/';
    }
    if (!rc && mkdir(p, 0777) && errno != EEXIST) rc = -1;
    free(p);
    return rc;
}

static int dir_claims(const char *where) { return where && *where; }

static tq_status dir_open(tq_ctx *ctx, tq_store *s)
{
    struct stat st;
    errno = 0;
    if (make_dirs(s->root) || stat(s->root, &st) || !S_ISDIR(st.st_mode))
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: not a directory tq can use as a store: %s",
                                s->root, strerror(errno ? errno : ENOTDIR));
    size_t n = strlen(s->root);
    while (n > 1 && s->root[n - 1] == '/') s->root[--n] = 0;
    char *snap = tq_store_path(s, "snap"); /* the snapshots' folder: written to by encodes */
    int bad = !snap || make_dirs(snap);
    free(snap);
    if (bad)
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot make its snap folder: %s", s->root,
                                strerror(errno));
    return TQ_OK;
}

/* The store's folders on the way to an entry (snap/, idx/FP/PHASH/, ...) are folders of the
 * store, never links out of it (the store's own root may be a link: the user named it).
 * TQ_OK where they are, or are not there yet. */
static tq_status folders_real(tq_ctx *ctx, const tq_store *s, const char *entry)
{
    char path[4096];
    struct stat sb;
    int n = snprintf(path, sizeof path, "%s/", s->root);
    for (const char *p = entry; n > 0 && (size_t)n < sizeof path && (p = strchr(p, '/')); p++) {
        snprintf(path + n, sizeof path - (size_t)n, "%.*s", (int)(p - entry), entry);
        if (lstat(path, &sb)) return TQ_OK; /* not made yet */
        if (!S_ISDIR(sb.st_mode))
            return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: not a folder of the store (a link?)",
                                    path);
    }
    return TQ_OK;
}

/* The entry's folders checked and made: its path (malloc'd), or NULL (the context says why). */
static char *entry_path_made(tq_ctx *ctx, tq_store *s, const char *entry)
{
    if (folders_real(ctx, s, entry)) return NULL;
    char *path = tq_store_path(s, entry);
    char *slash = path ? strrchr(path, '/') : NULL;
    if (!path) {
        tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *slash = 0;
    int made = make_dirs(path);
    *slash = '/';
    if (!made) return path;
    tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot make its folder: %s", path, strerror(errno));
    free(path);
    return NULL;
}

static tq_status dir_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n)
{
    char *tmp = NULL;
    FILE *f;
    char *path = entry_path_made(ctx, s, entry);
    if (!path) return tq_ctx_status(ctx);
    tq_status st = tq_temp_create_ex(ctx, path, 1, &tmp, &f);
    if (!st) {
        int bad = n && fwrite(p, 1, n, f) != n;
        bad |= fflush(f) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path)) {
            st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed: %s", path,
                                  strerror(errno));
            unlink(tmp);
        }
        tq_temp_forget(tmp);
    }
    free(tmp);
    free(path);
    return st;
}

/* An entry: a regular file (never followed through a symlink, never a FIFO or device), at most
 * max bytes. */
static tq_status read_entry(tq_ctx *ctx, const char *path, uint64_t max, char **p, uint64_t *n,
                            int *found)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 && errno == ENOENT) return TQ_OK;
    if (fd < 0) return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    tq_status st = TQ_OK;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a regular file", path);
    else if ((uint64_t)sb.st_size > max)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %llu bytes, more than an entry holds",
                              path, (unsigned long long)sb.st_size);
    uint64_t size = st ? 0 : (uint64_t)sb.st_size;
    *p = st ? NULL : malloc(size + 1);
    if (!st && !*p) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    while (!st && *n < size) {
        ssize_t k = read(fd, *p + *n, size - *n);
        if (k <= 0) st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: reading failed", path);
        if (k > 0) *n += (uint64_t)k;
    }
    close(fd);
    if (st) {
        free(*p);
        *p = NULL;
        *n = 0;
        return st;
    }
    (*p)[*n] = 0;
    *found = 1;
    return TQ_OK;
}

static tq_status dir_get(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                         uint64_t *n, int *found)
{
    tq_status st = folders_real(ctx, s, entry);
    char *path = st ? NULL : tq_store_path(s, entry);
    if (!st && !path) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = read_entry(ctx, path, max, p, n, found);
    free(path);
    return st;
}

static tq_status dir_list(tq_ctx *ctx, tq_store *s, const char *folder, tq_store_names *l)
{
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/", folder); /* the folder itself is checked as a step too */
    tq_status st = folders_real(ctx, s, sub);
    char *path = st ? NULL : tq_store_path(s, folder);
    if (!st && !path) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    DIR *d = st ? NULL : opendir(path);
    if (!st && !d && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    for (struct dirent *e = d ? readdir(d) : NULL; e && !st && !l->failed; e = readdir(d))
        tq_store_names_add(l, e->d_name, 0);
    if (d) closedir(d);
    free(path);
    return st;
}

static tq_status dir_remove(tq_ctx *ctx, tq_store *s, const char *entry)
{
    tq_status st = folders_real(ctx, s, entry);
    char *path = st ? NULL : tq_store_path(s, entry);
    if (!st && !path) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st && unlink(path) && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    free(path);
    return st;
}

static tq_status dir_size(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size,
                          int *found)
{
    struct stat sb;
    tq_status st = folders_real(ctx, s, entry); /* a folder that is a link: nothing through it */
    char *path = st ? NULL : tq_store_path(s, entry);
    if (!st && !path) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st && !lstat(path, &sb)) {
        if (S_ISREG(sb.st_mode)) *size = (uint64_t)sb.st_size;
        if (!S_ISREG(sb.st_mode))
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a regular file", path);
        *found = S_ISREG(sb.st_mode);
    } else if (!st && errno != ENOENT) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    }
    free(path);
    return st;
}

static tq_status dir_write_begin(tq_ctx *ctx, tq_store *s, const char *entry,
                                 struct tq_store_writer *w)
{
    char *tmp = NULL;
    w->path = entry_path_made(ctx, s, entry);
    if (!w->path) return tq_ctx_status(ctx);
    tq_status st = tq_temp_create_ex(ctx, w->path, 1, &tmp, &w->f);
    w->own = tmp;
    return st;
}

static tq_status dir_write_commit(tq_ctx *ctx, struct tq_store_writer *w)
{
    tq_status st = TQ_OK;
    char *tmp = w->own;
    int bad = fflush(w->f) != 0; /* the temporary's stream fsyncs as it closes */
    bad |= fclose(w->f) != 0;
    if (bad || rename(tmp, w->path)) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed: %s", w->path,
                              strerror(errno));
        unlink(tmp);
    }
    tq_temp_forget(tmp);
    free(tmp);
    return st;
}

static void dir_write_abort(struct tq_store_writer *w)
{
    char *tmp = w->own;
    if (!tmp) return;
    unlink(tmp); /* before fclose: no fsync of a discarded file */
    fclose(w->f);
    tq_temp_forget(tmp);
    free(tmp);
}

static const char *dir_write_error(const struct tq_store_writer *w)
{
    (void)w;
    return "";
}

/* Mapped and verified whole, a regular file only. */
static tq_status dir_snapshot(tq_ctx *ctx, tq_store *s, const char *entry, tqkv_reader **out)
{
    uint64_t size;
    int found = 0;
    tq_status st = dir_size(ctx, s, entry, &size, &found);
    if (!st && !found)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s/%s: no such entry", s->root, entry);
    char *path = st ? NULL : tq_store_path(s, entry);
    if (!st && !path) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tqkv_open(ctx, path, out);
    free(path);
    return st;
}

const tq_store_backend tq_store_dir_backend = {
    .name = "directory",
    .remote = 0,
    .claims = dir_claims,
    .open = dir_open,
    .put = dir_put,
    .get = dir_get,
    .list = dir_list,
    .remove = dir_remove,
    .size = dir_size,
    .write_begin = dir_write_begin,
    .write_commit = dir_write_commit,
    .write_abort = dir_write_abort,
    .write_error = dir_write_error,
    .snapshot = dir_snapshot,
};
