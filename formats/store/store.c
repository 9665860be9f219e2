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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* At most this many snapshots are read at one index boundary: the most recently used. */
enum { FIND_CANDIDATES = 16 };
/* The seed of a token prefix's hash: not the snapshot container's seeds. */
#define PREFIX_SEED 0x7470726566697821ull

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
    }
    free(tmp);
    free(path);
    return st;
}

/* A small object (an entry), whole: 64 KiB at most. */
static tq_status get_remote(tq_ctx *ctx, const char *url, char **p, uint64_t *n, int *found)
{
    enum { MOST = 64 << 10 };
    tq_s3 *o;
    uint64_t size = 0;
    tq_status st = tq_s3_open(ctx, url, &o);
    if (st) return st;
    *p = malloc(MOST + 1);
    st = *p ? tq_s3_get(ctx, o, 0, MOST, *p, n, &size) : TQ_ERR_NOMEM;
    if (!*p) tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (st && tq_s3_missing(o)) {
        st = TQ_OK; /* none: not found */
        free(*p);
        *p = NULL;
        *n = 0;
    } else if (!st) {
        (*p)[*n] = 0;
        *found = 1;
    }
    tq_s3_close(o);
    return st;
}

tq_status tq_store_get(tq_ctx *ctx, tq_store *s, const char *entry, char **p, uint64_t *n,
                       int *found)
{
    char *path = tq_store_path(s, entry);
    *p = NULL;
    *n = 0;
    *found = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (s->remote) {
        tq_status st = get_remote(ctx, path, p, n, found);
        free(path);
        return st;
    }
    FILE *f = fopen(path, "rb");
    tq_status st = TQ_OK;
    if (!f && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    if (f) {
        char buf[4096];
        size_t k;
        *found = 1;
        while (!st && (k = fread(buf, 1, sizeof buf, f)) > 0) {
            char *q = realloc(*p, *n + k + 1);
            if (!q) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
            if (q) {
                memcpy(q + *n, buf, k);
                *p = q;
                *n += k;
                q[*n] = 0;
            }
        }
        if (!st && ferror(f)) st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: reading failed", path);
        fclose(f);
    }
    if (*found && !*p && !st && !(*p = calloc(1, 1)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    free(path);
    return st;
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
        free(dir);
        free(path);
        *names = l.names;
        *n = l.n;
        if (l.n) qsort(l.names, l.n, sizeof *l.names, by_name);
        return st;
    }
    DIR *d = opendir(path);
    tq_status st = TQ_OK;
    if (!d && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    for (struct dirent *e = d ? readdir(d) : NULL; e && !st; e = readdir(d)) {
        /* a writer's temporary (NAME.tmp.XXXXXX) is not an entry yet */
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp.")) continue;
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
    if (unlink(path) && errno != ENOENT)
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
    } else if (!stat(path, &sb)) {
        *size = (uint64_t)sb.st_size;
        *found = 1;
    } else if (errno != ENOENT) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    }
    free(path);
    return st;
}

tq_status tq_store_snapshot(tq_ctx *ctx, tq_store *s, const char *name, tqkv_reader **out)
{
    char entry[64];
    tq_src *src;
    snprintf(entry, sizeof entry, "snap/%s.tqkv", name);
    char *path = tq_store_path(s, entry);
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = s->remote ? tq_src_open(ctx, path, &src) : tqkv_open(ctx, path, out);
    if (!st && s->remote) st = tqkv_open_src(ctx, src, out);
    free(path);
    return st;
}

uint64_t tq_store_prefix_hash(const int32_t *tokens, uint32_t n)
{
    return XXH64(tokens, (size_t)n * sizeof *tokens, PREFIX_SEED);
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
    for (uint32_t k = TQ_STORE_STRIDE; k <= n && !st; k += TQ_STORE_STRIDE) {
        snprintf(entry, sizeof entry, "idx/%016" PRIx64 "/%016" PRIx64 "/%s", fp,
                 tq_store_prefix_hash(tokens, k), name);
        st = tq_store_put(ctx, s, entry, "", 0);
    }
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

tq_status tq_store_put_points(tq_ctx *ctx, tq_store *s, const char *name,
                              const tq_store_points *pt)
{
    char entry[64];
    char text[32 + 16 * TQ_STORE_MAX_CHECKPOINTS];
    const char *recurrent = pt->recurrent ? "recurrent\n" : "";
    int n = snprintf(text, sizeof text, "from %u\n%s", pt->from, recurrent);
    for (uint32_t i = 0; i < pt->n_checkpoints && i < TQ_STORE_MAX_CHECKPOINTS; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "checkpoint %u\n", pt->checkpoint[i]);
    snprintf(entry, sizeof entry, "points/%s", name);
    return tq_store_put(ctx, s, entry, text, (uint64_t)n);
}

/* One line of a points entry into pt; 0 when it is not one tq writes. */
static int points_line(const char *line, uint32_t n_tokens, tq_store_points *pt)
{
    char word[16];
    unsigned long v = 0;
    int got = sscanf(line, "%15s %lu", word, &v);
    if (got == 1 && !strcmp(word, "recurrent")) {
        pt->recurrent = 1;
        return 1;
    }
    if (got != 2 || v > n_tokens) return 0;
    if (!strcmp(word, "from") && v) {
        pt->from = (uint32_t)v;
        return 1;
    }
    if (strcmp(word, "checkpoint") || pt->n_checkpoints == TQ_STORE_MAX_CHECKPOINTS) return 0;
    if (pt->n_checkpoints && v <= pt->checkpoint[pt->n_checkpoints - 1]) return 0;
    pt->checkpoint[pt->n_checkpoints++] = (uint32_t)v;
    return 1;
}

tq_status tq_store_get_points(tq_ctx *ctx, tq_store *s, const char *name, uint32_t n_tokens,
                              tq_store_points *pt)
{
    char entry[64];
    char *text;
    uint64_t len;
    int found;
    memset(pt, 0, sizeof *pt);
    pt->from = n_tokens;
    snprintf(entry, sizeof entry, "points/%s", name);
    tq_status st = tq_store_get(ctx, s, entry, &text, &len, &found);
    if (st || !found) return st;
    tq_store_points got = {.from = n_tokens};
    int good = 1;
    for (char *line = text; good && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        good = points_line(line, n_tokens, &got);
        line = end ? end + 1 : line + strlen(line);
    }
    free(text);
    if (good) *pt = got; /* one that does not parse: whole only */
    return TQ_OK;
}

uint32_t tq_store_point_for(const tq_store_points *pt, uint32_t n_tokens, uint32_t common,
                            uint32_t n_prompt)
{
    uint32_t limit = common < n_tokens ? common : n_tokens;
    if (pt->recurrent && limit >= n_prompt) limit = n_prompt ? n_prompt - 1 : 0;
    if (limit >= pt->from) return limit;
    for (uint32_t i = pt->n_checkpoints; i-- > 0;)
        if (pt->checkpoint[i] <= limit) return pt->checkpoint[i];
    return 0;
}

typedef struct candidate {
    char *name;
    double used;
} candidate;

static int newer_first(const void *a, const void *b)
{
    double x = ((const candidate *)a)->used;
    double y = ((const candidate *)b)->used;
    return (x < y) - (x > y);
}

/* A candidate's tokens against the prompt's: *common, whether it can be a base. */
static tq_status compare(tq_ctx *ctx, tq_store *s, const char *name, const int32_t *tokens,
                         uint32_t n, uint32_t *common, uint32_t *n_tokens, int *whole)
{
    tqkv_reader *r;
    tq_status st = tq_store_snapshot(ctx, s, name, &r);
    if (st) return st;
    const tqkv_meta *m = tqkv_meta_of(r);
    uint32_t k = 0;
    while (k < n && k < m->n_tokens && m->tokens[k] == tokens[k]) k++;
    *common = k;
    *n_tokens = m->n_tokens;
    *whole = !m->base_id;
    tqkv_close(r);
    return TQ_OK;
}

/* The candidates at one boundary, newest first; the best of them into *best. */
typedef struct find_q {
    uint64_t fp;
    const int32_t *tokens;
    uint32_t n;
    int as_base;
    const char *const *except; /* names not to take (a restore's failed tries) */
    uint32_t n_except;
} find_q;

static int excepted(const find_q *q, const char *name)
{
    for (uint32_t i = 0; i < q->n_except; i++)
        if (!strcmp(q->except[i], name)) return 1;
    return 0;
}

static tq_status find_at(tq_ctx *ctx, tq_store *s, const char *folder, const find_q *q,
                         tq_store_match *best, uint32_t *skipped)
{
    const int32_t *tokens = q->tokens;
    uint32_t n = q->n;
    int as_base = q->as_base;
    char **names;
    uint32_t count;
    tq_status st = tq_store_list(ctx, s, folder, &names, &count);
    candidate *c = NULL;
    if (!st) c = calloc(count ? count : 1, sizeof *c); /* [count]: newest first */
    if (!st && !c) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < count; i++) {
        c[i].name = names[i];
        c[i].used = tq_store_last_used(ctx, s, names[i]);
    }
    if (c && count) qsort(c, count, sizeof *c, newer_first);
    for (uint32_t i = 0; !st && i < count && i < FIND_CANDIDATES; i++) {
        uint32_t common = 0;
        uint32_t total = 0;
        int whole = 0;
        char entry[64];
        uint64_t size;
        int there = 0;
        snprintf(entry, sizeof entry, "snap/%s.tqkv", c[i].name);
        if (excepted(q, c[i].name)) continue;
        if (tq_store_size(ctx, s, entry, &size, &there) || !there)
            continue; /* evicted since it was indexed: a miss, not a fault */
        if (compare(ctx, s, c[i].name, tokens, n, &common, &total, &whole)) {
            (*skipped)++; /* gone (evicted, or a lost race) or unreadable: the next one */
            continue;
        }
        if (as_base && (!whole || common < total)) continue;
        uint32_t point = common;
        if (!as_base) {
            tq_store_points pt;
            if (tq_store_get_points(ctx, s, c[i].name, total, &pt)) {
                (*skipped)++;
                continue;
            }
            point = tq_store_point_for(&pt, total, common, n);
        }
        if (common > best->shared) best->shared = common;
        if (point > best->point) {
            snprintf(best->name, sizeof best->name, "%s", c[i].name);
            best->common = common;
            best->n_tokens = total;
            best->point = point;
        }
    }
    free(c);
    tq_store_names_free(names, count);
    return st;
}

static tq_status find(tq_ctx *ctx, tq_store *s, const find_q *q, tq_store_match *best,
                      uint32_t *skipped)
{
    char folder[64];
    memset(best, 0, sizeof *best);
    *skipped = 0;
    for (uint32_t k = q->n / TQ_STORE_STRIDE * TQ_STORE_STRIDE; k >= TQ_STORE_STRIDE;
         k -= TQ_STORE_STRIDE) {
        snprintf(folder, sizeof folder, "idx/%016" PRIx64 "/%016" PRIx64, q->fp,
                 tq_store_prefix_hash(q->tokens, k));
        tq_status st = find_at(ctx, s, folder, q, best, skipped);
        /* a snapshot first met at a shorter boundary shares fewer than k tokens */
        if (st || best->point >= k) return st;
    }
    return TQ_OK;
}

tq_status tq_store_find(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens, uint32_t n,
                        const char *const *except, uint32_t n_except, tq_store_match *best,
                        uint32_t *skipped)
{
    find_q q = {fp, tokens, n, 0, except, n_except};
    return find(ctx, s, &q, best, skipped);
}

tq_status tq_store_find_base(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens,
                             uint32_t n, tq_store_match *best, uint32_t *skipped)
{
    find_q q = {fp, tokens, n, 1, NULL, 0};
    return find(ctx, s, &q, best, skipped);
}
