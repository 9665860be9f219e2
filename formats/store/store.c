/* store.c - see store.h and STORE.md: a directory of entries, each written whole and renamed
 * into place. */
#define _GNU_SOURCE /* asprintf */
#include "store.h"

#include "file_io.h"
#include "io.h"
#include "s3.h"
#include "tqkv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* At most this many snapshots are read at one index boundary: the most recently used. */
/* The seed of a token prefix's hash: not the snapshot container's seeds. */
#define PREFIX_SEED 0x7470726566697821ull
/* The most a small entry (an index, use, name or points entry) may hold. */
#define ENTRY_MOST (64u << 10)

struct tq_store {
    char *root; /* a directory, or s3://bucket/prefix */
    int remote;
};

int tq_store_remote(const tq_store *s) { return s->remote; }

const char *tq_store_root(const tq_store *s) { return s->root; }

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

static int count_one(void *user, const char *name, uint64_t size)
{
    (void)name;
    (void)size;
    (*(uint32_t *)user)++;
    return 0; /* one is enough */
}

/* A store under s3://bucket/prefix: the bucket answers a listing, or the store is refused. */
static tq_status open_remote(tq_ctx *ctx, const char *where, tq_store **out)
{
    tq_store *s = calloc(1, sizeof *s);
    uint32_t seen = 0;
    if (!s || !(s->root = strdup(where))) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->remote = 1;
    size_t n = strlen(s->root);
    while (n > 5 && s->root[n - 1] == '/') s->root[--n] = 0;
    char *snap = tq_store_path(s, "snap/");
    tq_status st = snap ? tq_s3_list(ctx, snap, count_one, &seen) : TQ_ERR_NOMEM;
    if (!snap) tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    free(snap);
    if (st) {
        tq_store_close(s);
        return st;
    }
    *out = s;
    return TQ_OK;
}

tq_status tq_store_open(tq_ctx *ctx, const char *where, tq_store **out)
{
    struct stat st;
    *out = NULL;
    if (tq_s3_is_url(where)) return open_remote(ctx, where, out);
    if (make_dirs(where) || stat(where, &st) || !S_ISDIR(st.st_mode))
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: not a directory tq can use as a store: %s",
                                where, strerror(errno ? errno : ENOTDIR));
    tq_store *s = calloc(1, sizeof *s);
    if (!s || !(s->root = strdup(where))) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    size_t n = strlen(s->root);
    while (n > 1 && s->root[n - 1] == '/') s->root[--n] = 0;
    char *snap = tq_store_path(s, "snap"); /* the snapshots' folder: written to by encodes */
    int bad = !snap || make_dirs(snap);
    free(snap);
    if (bad) {
        tq_store_close(s);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot make its snap folder: %s", where,
                                strerror(errno));
    }
    *out = s;
    return TQ_OK;
}

void tq_store_close(tq_store *s)
{
    if (!s) return;
    free(s->root);
    free(s);
}

char *tq_store_path(const tq_store *s, const char *entry)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", s->root, entry) < 0) return NULL;
    return p;
}

/* A directory store's folders on the way to an entry (snap/, idx/FP/PHASH/, ...) are folders
 * of the store, never links out of it (the store's own root may be a link: the user named it).
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

/* An object written by one PUT. */
static tq_status put_remote(tq_ctx *ctx, const char *url, const void *p, uint64_t n)
{
    tq_s3 *o;
    tq_s3_upload *u;
    tq_status st = tq_s3_open(ctx, url, &o);
    if (st) return st;
    st = tq_s3_upload_begin(ctx, o, &u);
    if (!st) st = tq_s3_upload_write(ctx, u, p, n);
    if (!st) st = tq_s3_upload_commit(ctx, u);
    else if (u) tq_s3_upload_abort(u);
    tq_s3_close(o);
    return st;
}

tq_status tq_store_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n)
{
    if (s->remote) {
        char *url = tq_store_path(s, entry);
        tq_status st = url ? put_remote(ctx, url, p, n)
                           : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        free(url);
        return st;
    }
    if (folders_real(ctx, s, entry)) return TQ_ERR_IO;
    char *path = tq_store_path(s, entry);
    char *slash = path ? strrchr(path, '/') : NULL;
    char *tmp = NULL;
    FILE *f;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    *slash = 0;
    int made = make_dirs(path);
    *slash = '/';
    tq_status st = made ? tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot make its folder: %s", path,
                                           strerror(errno))
                        : tq_temp_create_ex(ctx, path, 1, &tmp, &f);
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

struct tq_store_writer {
    tq_sink *sink; /* an object's upload */
    FILE *f;
    char *path, *tmp; /* a directory's entry and its temporary */
};

tq_status tq_store_write_begin(tq_ctx *ctx, tq_store *s, const char *entry, tq_store_writer **w,
                               FILE **f)
{
    tq_store_writer *o = calloc(1, sizeof *o);
    *w = NULL;
    *f = NULL;
    if (!o || !(o->path = tq_store_path(s, entry))) {
        free(o);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_status st = TQ_OK;
    if (s->remote) {
        st = tq_sink_open(ctx, o->path, &o->sink, &o->f);
    } else if (!(st = folders_real(ctx, s, entry))) {
        char *slash = strrchr(o->path, '/');
        *slash = 0;
        int made = make_dirs(o->path);
        *slash = '/';
        st = made ? tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot make its folder: %s", o->path,
                                     strerror(errno))
                  : tq_temp_create_ex(ctx, o->path, 1, &o->tmp, &o->f);
    }
    if (st) {
        tq_store_write_abort(o);
        return st;
    }
    *w = o;
    *f = o->f;
    return TQ_OK;
}

const char *tq_store_write_error(const tq_store_writer *w)
{
    return w && w->sink ? tq_sink_error(w->sink) : "";
}

tq_status tq_store_write_commit(tq_ctx *ctx, tq_store_writer *w)
{
    tq_status st = TQ_OK;
    if (w->sink) {
        st = tq_sink_commit(ctx, w->sink);
        w->sink = NULL;
    } else {
        int bad = fflush(w->f) != 0; /* the temporary's stream fsyncs as it closes */
        bad |= fclose(w->f) != 0;
        if (bad || rename(w->tmp, w->path)) {
            st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed: %s", w->path,
                                  strerror(errno));
            unlink(w->tmp);
        }
        tq_temp_forget(w->tmp);
    }
    free(w->tmp);
    free(w->path);
    free(w);
    return st;
}

void tq_store_write_abort(tq_store_writer *w)
{
    if (!w) return;
    if (w->sink) tq_sink_abort(w->sink);
    if (!w->sink && w->tmp) {
        unlink(w->tmp); /* before fclose: no fsync of a discarded file */
        fclose(w->f);
        tq_temp_forget(w->tmp);
    }
    free(w->tmp);
    free(w->path);
    free(w);
}

/* An object whole, at most max bytes: its size first where it may be large. */
static tq_status get_remote(tq_ctx *ctx, const char *url, uint64_t max, char **p, uint64_t *n,
                            int *found)
{
    tq_s3 *o;
    uint64_t size = 0;
    tq_status st = tq_s3_open(ctx, url, &o);
    if (st) return st;
    uint64_t want = max;
    if (max > ENTRY_MOST) st = tq_s3_size(ctx, o, &size);
    if (!st && max > ENTRY_MOST && size > max)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %llu bytes, more than an entry holds",
                              url, (unsigned long long)size);
    if (!st && max > ENTRY_MOST) want = size;
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

/* A directory store's entry: a regular file (never followed through a symlink, never a FIFO
 * or device), at most max bytes. */
static tq_status get_local(tq_ctx *ctx, const char *path, uint64_t max, char **p, uint64_t *n,
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

tq_status tq_store_get_max(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                           uint64_t *n, int *found)
{
    char *path = tq_store_path(s, entry);
    *p = NULL;
    *n = 0;
    *found = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = s->remote ? get_remote(ctx, path, max, p, n, found)
                             : folders_real(ctx, s, entry);
    if (!s->remote && !st) st = get_local(ctx, path, max, p, n, found);
    free(path);
    return st;
}

tq_status tq_store_get(tq_ctx *ctx, tq_store *s, const char *entry, char **p, uint64_t *n,
                       int *found)
{
    return tq_store_get_max(ctx, s, entry, ENTRY_MOST, p, n, found);
}

void tq_store_entry(tq_store_kind kind, const char *name, char *entry, size_t size)
{
    static const char *const form[] = {[TQ_STORE_SNAP] = "snap/%s.tqkv",
                                       [TQ_STORE_SNAP_FILE] = "snap/%s",
                                       [TQ_STORE_NAME] = "names/%s",
                                       [TQ_STORE_POINTS] = "points/%s",
                                       [TQ_STORE_CKPT] = "ckpt/%s"};
    snprintf(entry, size, form[kind], name);
}

int tq_store_name_ok(const char *name)
{
    size_t n = 0;
    if (!name || name[0] == '.' || !name[0]) return 0;
    for (; name[n]; n++) {
        char c = name[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok || n >= TQ_STORE_NAME_MAX) return 0;
    }
    return !strstr(name, ".tmp.");
}

int tq_store_is_snapshot_name(const char *name)
{
    static const char hex[] = "0123456789abcdef";
    if (!name || strlen(name) != 33 || name[16] != '-') return 0;
    for (int i = 0; i < 33; i++)
        if (i != 16 && !memchr(hex, name[i], 16)) return 0;
    return 1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tq_store_names_free(char **names, uint32_t n)
{
    for (uint32_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

typedef struct name_list {
    char **names;
    uint32_t n;
    int failed;
} name_list;

static int add_name(void *user, const char *name, uint64_t size)
{
    name_list *l = user;
    char **grown = realloc(l->names, (l->n + 1) * sizeof *l->names);
    (void)size;
    if (grown) l->names = grown;
    if (!grown || !(l->names[l->n] = strdup(name))) {
        l->failed = 1;
        return 0;
    }
    l->n++;
    return 1;
}

/* Only the names tq writes: an object someone else put under the prefix is no entry. */
static void keep_valid(name_list *l)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        if (tq_store_name_ok(l->names[i]))
            l->names[k++] = l->names[i];
        else
            free(l->names[i]);
    }
    l->n = k;
}

tq_status tq_store_list(tq_ctx *ctx, tq_store *s, const char *folder, char ***names,
                        uint32_t *n)
{
    char *path = tq_store_path(s, folder);
    *names = NULL;
    *n = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (s->remote) { /* the objects one level under FOLDER/ */
        name_list l = {NULL, 0, 0};
        char *dir = NULL;
        tq_status st = asprintf(&dir, "%s/", path) < 0 ? TQ_ERR_NOMEM : TQ_OK;
        if (!st) st = tq_s3_list(ctx, dir, add_name, &l);
        if (!st && l.failed) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        keep_valid(&l);
        free(dir);
        free(path);
        *names = l.names;
        *n = l.n;
        if (l.n) qsort(l.names, l.n, sizeof *l.names, by_name);
        return st;
    }
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/", folder); /* the folder itself is checked as a step too */
    tq_status st = folders_real(ctx, s, sub);
    DIR *d = st ? NULL : opendir(path);
    if (!st && !d && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    for (struct dirent *e = d ? readdir(d) : NULL; e && !st; e = readdir(d)) {
        /* a writer's temporary (NAME.tmp.XXXXXX) is not an entry yet, and a name tq would
         * not write is no entry at all */
        if (!tq_store_name_ok(e->d_name)) continue;
        char **grown = realloc(*names, (*n + 1) * sizeof **names);
        if (grown) *names = grown;
        if (!grown || !((*names)[*n] = strdup(e->d_name)))
            st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        else
            (*n)++;
    }
    if (d) closedir(d);
    if (*n) qsort(*names, *n, sizeof **names, by_name);
    free(path);
    return st;
}

tq_status tq_store_remove(tq_ctx *ctx, tq_store *s, const char *entry)
{
    char *path = tq_store_path(s, entry);
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    if (s->remote) {
        tq_s3 *o;
        st = tq_s3_open(ctx, path, &o);
        if (!st) st = tq_s3_delete(ctx, o);
        tq_s3_close(o);
        free(path);
        return st;
    }
    st = folders_real(ctx, s, entry);
    if (!st && unlink(path) && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    free(path);
    return st;
}

tq_status tq_store_size(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size, int *found)
{
    char *path = tq_store_path(s, entry);
    struct stat sb;
    tq_status st = TQ_OK;
    *found = 0;
    *size = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (s->remote) {
        tq_s3 *o;
        st = tq_s3_open(ctx, path, &o);
        if (!st) st = tq_s3_size(ctx, o, size);
        if (st && tq_s3_missing(o)) st = TQ_OK;
        else if (!st) *found = 1;
        tq_s3_close(o);
    } else if (folders_real(ctx, s, entry)) { /* a folder that is a link: nothing through it */
        st = TQ_ERR_IO;
    } else if (!lstat(path, &sb)) {
        if (S_ISREG(sb.st_mode)) *size = (uint64_t)sb.st_size;
        if (!S_ISREG(sb.st_mode))
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a regular file", path);
        *found = S_ISREG(sb.st_mode);
    } else if (errno != ENOENT) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    }
    free(path);
    return st;
}

tq_status tq_store_check_entry(tq_ctx *ctx, tq_store *s, const char *entry)
{
    uint64_t size;
    int found;
    tq_status st = tq_store_size(ctx, s, entry, &size, &found);
    if (!st && !found)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s/%s: no such entry", s->root, entry);
    return st;
}

tq_status tq_store_snapshot(tq_ctx *ctx, tq_store *s, const char *name, tqkv_reader **out)
{
    char entry[64];
    tq_src *src;
    if (!tq_store_is_snapshot_name(name))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "'%.40s': not a snapshot's name", name);
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    char *path = tq_store_path(s, entry);
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = s->remote ? TQ_OK : tq_store_check_entry(ctx, s, entry);
    if (st) {
        free(path);
        return st;
    }
    st = s->remote ? tq_src_open(ctx, path, &src) : tqkv_open(ctx, path, out);
    if (!st && s->remote) st = tqkv_open_src(ctx, src, out);
    free(path);
    return st;
}

uint64_t tq_store_prefix_hash(const int32_t *tokens, uint32_t n)
{
    return XXH64(tokens, (size_t)n * sizeof *tokens, PREFIX_SEED);
}

uint64_t *tq_store_prefix_hashes(const int32_t *tokens, uint32_t n)
{
    uint32_t k = n / TQ_STORE_STRIDE;
    uint64_t *h = malloc((k ? k : 1) * sizeof *h);
    XXH64_state_t *x = XXH64_createState();
    if (!h || !x || XXH64_reset(x, PREFIX_SEED) == XXH_ERROR) {
        free(h);
        XXH64_freeState(x);
        return NULL;
    }
    for (uint32_t i = 0; i < k; i++) { /* one pass: each boundary's digest of the stream so far */
        XXH64_update(x, tokens + (size_t)i * TQ_STORE_STRIDE, TQ_STORE_STRIDE * sizeof *tokens);
        h[i] = XXH64_digest(x);
    }
    XXH64_freeState(x);
    return h;
}

void tq_store_name(uint64_t fingerprint, const int32_t *tokens, uint32_t n, char *buf)
{
    snprintf(buf, 34, "%016" PRIx64 "-%016" PRIx64, fingerprint, tq_store_prefix_hash(tokens, n));
}

tq_status tq_store_touch(tq_ctx *ctx, tq_store *s, const char *name)
{
    char entry[64];
    char when[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(entry, sizeof entry, "used/%s", name);
    int n = snprintf(when, sizeof when, "%lld.%03ld", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
    return tq_store_put(ctx, s, entry, when, (uint64_t)n);
}

tq_status tq_store_index(tq_ctx *ctx, tq_store *s, uint64_t fp, const char *name,
                         const int32_t *tokens, uint32_t n)
{
    char entry[128];
    tq_status st = TQ_OK;
    uint64_t *h = tq_store_prefix_hashes(tokens, n);
    if (!h) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n / TQ_STORE_STRIDE && !st; i++) {
        snprintf(entry, sizeof entry, "idx/%016" PRIx64 "/%016" PRIx64 "/%s", fp, h[i], name);
        st = tq_store_put(ctx, s, entry, "", 0);
    }
    free(h);
    return st ? st : tq_store_touch(ctx, s, name);
}

double tq_store_last_used(tq_ctx *ctx, tq_store *s, const char *name)
{
    char entry[64];
    char *p;
    uint64_t n;
    int found;
    snprintf(entry, sizeof entry, "used/%s", name);
    if (tq_store_get(ctx, s, entry, &p, &n, &found) || !found) return 0;
    double t = strtod(p, NULL);
    free(p);
    return t;
}
