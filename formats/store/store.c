/* store.c - see store.h and STORE.md: a directory of entries, each written whole and renamed
 * into place. */
#define _GNU_SOURCE /* asprintf */
#include "store.h"

#include "file_io.h"
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
    char *root;
};

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

tq_status tq_store_open(tq_ctx *ctx, const char *where, tq_store **out)
{
    struct stat st;
    *out = NULL;
    if (!strncmp(where, "s3://", 5))
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "%s: a store in an object store is not built yet; use a "
                                "directory",
                                where);
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

tq_status tq_store_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n)
{
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

tq_status tq_store_get(tq_ctx *ctx, tq_store *s, const char *entry, char **p, uint64_t *n,
                       int *found)
{
    char *path = tq_store_path(s, entry);
    *p = NULL;
    *n = 0;
    *found = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
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

tq_status tq_store_list(tq_ctx *ctx, tq_store *s, const char *folder, char ***names,
                        uint32_t *n)
{
    char *path = tq_store_path(s, folder);
    *names = NULL;
    *n = 0;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
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
    if (unlink(path) && errno != ENOENT)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
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

/* The seconds a snapshot was last used (0: never recorded). */
static double last_used(tq_ctx *ctx, tq_store *s, const char *name)
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
    char entry[64];
    snprintf(entry, sizeof entry, "snap/%s.tqkv", name);
    char *path = tq_store_path(s, entry);
    tqkv_reader *r;
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tqkv_open(ctx, path, &r);
    free(path);
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
static tq_status find_at(tq_ctx *ctx, tq_store *s, const char *folder, const int32_t *tokens,
                         uint32_t n, int as_base, tq_store_match *best, uint32_t *skipped)
{
    char **names;
    uint32_t count;
    tq_status st = tq_store_list(ctx, s, folder, &names, &count);
    candidate *c = NULL;
    if (!st) c = calloc(count ? count : 1, sizeof *c); /* [count]: newest first */
    if (!st && !c) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < count; i++) {
        c[i].name = names[i];
        c[i].used = last_used(ctx, s, names[i]);
    }
    if (c && count) qsort(c, count, sizeof *c, newer_first);
    for (uint32_t i = 0; !st && i < count && i < FIND_CANDIDATES; i++) {
        uint32_t common = 0;
        uint32_t total = 0;
        int whole = 0;
        char entry[64];
        struct stat sb;
        snprintf(entry, sizeof entry, "snap/%s.tqkv", c[i].name);
        char *path = tq_store_path(s, entry);
        int there = path && !stat(path, &sb);
        free(path);
        if (!there) continue; /* evicted since it was indexed: a miss, not a fault */
        if (compare(ctx, s, c[i].name, tokens, n, &common, &total, &whole)) {
            (*skipped)++; /* gone (evicted, or a lost race) or unreadable: the next one */
            continue;
        }
        if (as_base && (!whole || common < total)) continue;
        if (common > best->common) {
            snprintf(best->name, sizeof best->name, "%s", c[i].name);
            best->common = common;
            best->n_tokens = total;
        }
    }
    free(c);
    tq_store_names_free(names, count);
    return st;
}

static tq_status find(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens, uint32_t n,
                      int as_base, tq_store_match *best, uint32_t *skipped)
{
    char folder[64];
    memset(best, 0, sizeof *best);
    *skipped = 0;
    for (uint32_t k = n / TQ_STORE_STRIDE * TQ_STORE_STRIDE; k >= TQ_STORE_STRIDE;
         k -= TQ_STORE_STRIDE) {
        snprintf(folder, sizeof folder, "idx/%016" PRIx64 "/%016" PRIx64, fp,
                 tq_store_prefix_hash(tokens, k));
        tq_status st = find_at(ctx, s, folder, tokens, n, as_base, best, skipped);
        if (st || best->common) return st;
    }
    return TQ_OK;
}

tq_status tq_store_find(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens, uint32_t n,
                        tq_store_match *best, uint32_t *skipped)
{
    return find(ctx, s, fp, tokens, n, 0, best, skipped);
}

tq_status tq_store_find_base(tq_ctx *ctx, tq_store *s, uint64_t fp, const int32_t *tokens,
                             uint32_t n, tq_store_match *best, uint32_t *skipped)
{
    return find(ctx, s, fp, tokens, n, 1, best, skipped);
}
