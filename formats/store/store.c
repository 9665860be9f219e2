/* store.c - see store.h and STORE.md: what a store is whatever holds its entries (names, the
 * entries' kinds, listings kept to tq's names, prefix hashes, use times, the index), each
 * entry's bytes moved by the backend the store's place chose once (store_backend.h). */
#define _GNU_SOURCE /* asprintf */
#include "store_backend.h"
#include "seal.h"

#include "tqkv.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* The seed of a token prefix's hash: not the snapshot container's seeds. */
#define PREFIX_SEED 0x7470726566697821ull

/* clang-format off */
/* The backends, asked in order: the first that claims a store's place holds it. */
static const tq_store_backend *const backends[] = {
    &tq_store_s3_backend,  /* s3://bucket/prefix */
    &tq_store_dir_backend, /* anything else: a directory */
    NULL,
};
/* clang-format on */

int tq_store_remote(const tq_store *s) { return s->backend->remote; }

const char *tq_store_root(const tq_store *s) { return s->root; }

tq_status tq_store_open(tq_ctx *ctx, const char *where, tq_store **out)
{
    *out = NULL;
    const tq_store_backend *const *b = backends;
    while (*b && !(*b)->claims(where)) b++;
    if (!*b) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "'%s': not a store's place", where);
    tq_store *s = calloc(1, sizeof *s);
    const tq_seal_keys *keys = tq_seal_keys_current();
    size_t n = strlen(where);
    while (n > 1 && where[n - 1] == '/') n--;
    /* a key's entries are its own: a folder by its id (STORE.md, "Sealed stores") */
    char id[17] = "";
    if (keys) tq_seal_key_id_hex(keys->id[0], id);
    if (s) s->root = malloc(n + sizeof "/k-" + sizeof id);
    if (s && s->root) snprintf(s->root, n + sizeof "/k-" + sizeof id, "%.*s%s%s", (int)n, where,
                               keys ? "/k-" : "", id);
    if (!s || !s->root) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->backend = *b;
    pthread_mutex_init(&s->kept_mu, NULL);
    tq_status st = s->backend->open(ctx, s);
    if (st) {
        tq_store_close(s);
        return st;
    }
    *out = s;
    return TQ_OK;
}

void tq_store_close(tq_store *s)
{
    if (!s) return;
    tq_store_snapshot_forget(s);
    pthread_mutex_destroy(&s->kept_mu);
    free(s->root);
    free(s);
}

char *tq_store_path(const tq_store *s, const char *entry)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", s->root, entry) < 0) return NULL;
    return p;
}

/* TQ_CRASH_AT=N: the process kills itself (SIGKILL, no cleanup) at the Nth change it makes to a
 * store, before that change, so that a test reaches every point of a save, a gc or the proxy
 * and checks what a crash there leaves (tests/oracle/slot_crash.py; STORE.md, "Crashes"). */
static long crash_at;
static long crash_seen;
static pthread_once_t crash_once = PTHREAD_ONCE_INIT;

static void crash_read(void)
{
    const char *v = getenv("TQ_CRASH_AT");
    crash_at = v ? strtol(v, NULL, 10) : 0;
}

static void crash_point(void)
{
    pthread_once(&crash_once, crash_read);
    if (crash_at > 0 && __atomic_add_fetch(&crash_seen, 1, __ATOMIC_SEQ_CST) == crash_at)
        raise(SIGKILL);
}

/* With the process's keys (seal.h) every entry is sealed as it is written and must open as it
 * is read: an entry of another key, or a plain one, is not there (STORE.md, "Sealed stores"). */
tq_status tq_store_put(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n)
{
    const tq_seal_keys *keys = tq_seal_keys_current();
    crash_point();
    if (!keys) return s->backend->put(ctx, s, entry, p, n);
    uint8_t *sealed;
    uint64_t sealed_n;
    tq_status st = tq_seal_bytes(ctx, keys, p, n, &sealed, &sealed_n);
    if (!st) st = s->backend->put(ctx, s, entry, sealed, sealed_n);
    free(sealed);
    return st;
}

tq_status tq_store_write_begin(tq_ctx *ctx, tq_store *s, const char *entry, tq_store_writer **w,
                               FILE **f)
{
    tq_store_writer *o = calloc(1, sizeof *o);
    *w = NULL;
    *f = NULL;
    if (!o) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    o->backend = s->backend;
    crash_point();
    tq_status st = s->backend->write_begin(ctx, s, entry, o);
    if (st) {
        free(o->path);
        free(o);
        return st;
    }
    if (tq_seal_keys_current() &&
        (st = tq_sealer_begin(ctx, tq_seal_keys_current(), o->f, &o->sealer, &o->plain))) {
        tq_store_write_abort(o);
        return st;
    }
    *w = o;
    *f = o->sealer ? o->plain : o->f;
    return TQ_OK;
}

const char *tq_store_write_error(const tq_store_writer *w)
{
    return w ? w->backend->write_error(w) : "";
}

tq_status tq_store_write_commit(tq_ctx *ctx, tq_store_writer *w)
{
    tq_status st = w->sealer ? tq_sealer_finish(ctx, w->sealer) : TQ_OK;
    w->sealer = NULL;
    if (st) {
        tq_store_write_abort(w);
        return st;
    }
    crash_point(); /* written whole, not yet in place */
    st = w->backend->write_commit(ctx, w);
    free(w->path);
    free(w);
    return st;
}

void tq_store_write_abort(tq_store_writer *w)
{
    if (!w) return;
    tq_sealer_abort(w->sealer);
    w->backend->write_abort(w);
    free(w->path);
    free(w);
}

tq_status tq_store_get_max(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                           uint64_t *n, int *found)
{
    *p = NULL;
    *n = 0;
    *found = 0;
    const tq_seal_keys *keys = tq_seal_keys_current();
    if (!keys) return s->backend->get(ctx, s, entry, max, p, n, found);
    /* the seal's header and a tag a segment on top of what the entry may hold */
    uint64_t most = max + TQ_SEAL_HEADER + 16 * (max / 65536 + 1);
    char *sealed = NULL;
    uint64_t sealed_n = 0;
    uint8_t *plain = NULL;
    uint64_t plain_n = 0;
    tq_status st = s->backend->get(ctx, s, entry, most, &sealed, &sealed_n, found);
    if (st || !*found) return st;
    if (!tq_seal_is_sealed(sealed, sealed_n)) { /* planted, or an unsealed store's */
        free(sealed);
        *found = 0;
        return TQ_OK;
    }
    st = tq_seal_open(ctx, keys, entry, (const uint8_t *)sealed, sealed_n, &plain, &plain_n);
    free(sealed);
    if (st == TQ_ERR_UNSUPPORTED) *found = 0; /* another key's: another tenant's */
    if (st == TQ_ERR_UNSUPPORTED) return TQ_OK;
    if (st) return st;
    *p = realloc(plain, plain_n + 1); /* NUL-terminated, as the backends give */
    if (!*p) {
        free(plain);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    (*p)[plain_n] = 0;
    *n = plain_n;
    return TQ_OK;
}

tq_status tq_store_get(tq_ctx *ctx, tq_store *s, const char *entry, char **p, uint64_t *n,
                       int *found)
{
    return tq_store_get_max(ctx, s, entry, TQ_STORE_ENTRY_MOST, p, n, found);
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

int tq_store_names_add(void *user, const char *name, uint64_t size)
{
    tq_store_names *l = user;
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
static void keep_valid(tq_store_names *l)
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
    tq_store_names l = {NULL, 0, 0};
    tq_status st = s->backend->list(ctx, s, folder, &l);
    if (!st && l.failed) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    /* a writer's temporary (NAME.tmp.XXXXXX) is not an entry yet, and a name tq would not
     * write (an object someone else put under the prefix) is no entry at all */
    keep_valid(&l);
    if (l.n) qsort(l.names, l.n, sizeof *l.names, by_name);
    *names = l.names;
    *n = l.n;
    return st;
}

tq_status tq_store_remove(tq_ctx *ctx, tq_store *s, const char *entry)
{
    crash_point();
    return s->backend->remove(ctx, s, entry);
}

tq_status tq_store_size(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size, int *found)
{
    *found = 0;
    *size = 0;
    return s->backend->size(ctx, s, entry, size, found);
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
    if (!tq_store_is_snapshot_name(name))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "'%.40s': not a snapshot's name", name);
    tqkv_reader *kept = NULL;
    pthread_mutex_lock(&s->kept_mu);
    for (uint32_t i = 0; i < TQ_STORE_KEPT && !kept; i++) {
        if (!s->kept[i] || strcmp(s->kept_name[i], name)) continue;
        kept = s->kept[i];
        s->kept[i] = NULL;
    }
    pthread_mutex_unlock(&s->kept_mu);
    if (kept) {
        *out = kept;
        return TQ_OK;
    }
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    return s->backend->snapshot(ctx, s, entry, out);
}

void tq_store_snapshot_forget(tq_store *s)
{
    tqkv_reader *gone[TQ_STORE_KEPT];
    pthread_mutex_lock(&s->kept_mu);
    for (uint32_t i = 0; i < TQ_STORE_KEPT; i++) {
        gone[i] = s->kept[i];
        s->kept[i] = NULL;
    }
    pthread_mutex_unlock(&s->kept_mu);
    for (uint32_t i = 0; i < TQ_STORE_KEPT; i++) tqkv_close(gone[i]);
}

void tq_store_snapshot_keep(tq_store *s, const char *name, tqkv_reader *r)
{
    if (!s->backend->remote || strlen(name) >= sizeof s->kept_name[0]) {
        tqkv_close(r);
        return;
    }
    pthread_mutex_lock(&s->kept_mu);
    uint32_t at = s->kept_next;
    for (uint32_t i = 0; i < TQ_STORE_KEPT; i++) /* a reader of that name already: replaced */
        if (s->kept[i] && !strcmp(s->kept_name[i], name)) at = i;
    tqkv_reader *old = s->kept[at];
    s->kept[at] = r;
    snprintf(s->kept_name[at], sizeof s->kept_name[at], "%s", name);
    if (at == s->kept_next) s->kept_next = (s->kept_next + 1) % TQ_STORE_KEPT;
    pthread_mutex_unlock(&s->kept_mu);
    tqkv_close(old);
}

/* With the process's keys, names hide what they are made of: keyed hashes (HMAC-SHA256) of the
 * tokens and of the model's fingerprint instead of XXH64 and the fingerprint itself. */
uint64_t tq_store_model_id(uint64_t fingerprint)
{
    const tq_seal_keys *keys = tq_seal_keys_current();
    uint8_t le[8];
    uint64_t id = 0;
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(fingerprint >> (8 * i));
    if (!keys || !tq_seal_mac64_prefixes(keys, "tq model", le, 8, 1, &id)) return fingerprint;
    return id;
}

uint64_t tq_store_prefix_hash(const int32_t *tokens, uint32_t n)
{
    const tq_seal_keys *keys = tq_seal_keys_current();
    uint64_t h = 0;
    if (keys && tq_seal_mac64_prefixes(keys, "tq tokens", tokens, (size_t)n * sizeof *tokens, 1,
                                       &h))
        return h;
    return XXH64(tokens, (size_t)n * sizeof *tokens, PREFIX_SEED);
}

uint64_t *tq_store_prefix_hashes(const int32_t *tokens, uint32_t n)
{
    uint32_t k = n / TQ_STORE_STRIDE;
    uint64_t *h = malloc((k ? k : 1) * sizeof *h);
    const tq_seal_keys *keys = tq_seal_keys_current();
    if (h && keys) {
        if (tq_seal_mac64_prefixes(keys, "tq tokens", tokens, TQ_STORE_STRIDE * sizeof *tokens,
                                   k, h))
            return h;
        free(h);
        return NULL;
    }
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

tq_status tq_store_touch(tq_ctx *ctx, tq_store *s, const char *name, int *present)
{
    char entry[64];
    char snap[300];
    char when[32];
    struct timespec ts;
    uint64_t size;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(entry, sizeof entry, "used/%s", name);
    int n = snprintf(when, sizeof when, "%lld.%03ld", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
    tq_status st = tq_store_put(ctx, s, entry, when, (uint64_t)n);
    if (st || !present) return st;
    tq_store_entry(TQ_STORE_SNAP, name, snap, sizeof snap);
    st = tq_store_size(ctx, s, snap, &size, present);
    if (!st && !*present) st = tq_store_remove(ctx, s, entry);
    return st;
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
    return st ? st : tq_store_touch(ctx, s, name, NULL);
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
