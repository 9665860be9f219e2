/* store_gc.c - the store's eviction (store.h, tq_store_gc; STORE.md, "Eviction"). */
#define _GNU_SOURCE
#include "store.h"

#include "tqkv.h"

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* evict()'s answer when a racing save made the victim a base: not an error, not evicted. */
#define TQ_KEPT ((tq_status)100)

/* One stored snapshot as gc sees it. */
typedef struct gc_snap {
    char name[40];
    char base[40]; /* "" for a whole snapshot */
    uint64_t bytes, fp;
    double used;   /* its own last use, raised to its dependents' latest */
    uint32_t dependents;
    int32_t *tokens; /* for its index entries */
    uint32_t n_tokens;
    int gone;
} gc_snap;

/* Reads one snapshot's facts; 0 when it cannot be read (left alone). */
static int gc_read(tq_ctx *ctx, tq_store *s, const char *file, gc_snap *g)
{
    char entry[300];
    tqkv_reader *r;
    uint64_t size = 0;
    int found = 0;
    size_t len = strlen(file);
    if (len < 6 || len - 5 >= sizeof g->name || strcmp(file + len - 5, ".tqkv")) return 0;
    snprintf(g->name, sizeof g->name, "%.*s", (int)(len - 5), file);
    tq_store_entry(TQ_STORE_SNAP_FILE, file, entry, sizeof entry);
    if (tq_store_size(ctx, s, entry, &size, &found) || !found ||
        tq_store_snapshot(ctx, s, g->name, &r))
        return 0;
    const tqkv_meta *m = tqkv_meta_of(r);
    g->bytes = size;
    g->fp = strtoull(g->name, NULL, 16);
    if (m->base_id)
        snprintf(g->base, sizeof g->base, "%.*s", (int)strcspn(m->base_name, "."), m->base_name);
    g->n_tokens = m->n_tokens;
    g->tokens = malloc(4ull * m->n_tokens + 4);
    if (g->tokens) memcpy(g->tokens, m->tokens, 4ull * m->n_tokens);
    tqkv_close(r);
    g->used = tq_store_last_used(ctx, s, g->name);
    return g->tokens != NULL;
}

/* Has a snapshot gc did not see at its start been appended to g (a save racing this gc)? */
static int new_dependent(tq_ctx *ctx, tq_store *s, const gc_snap *all, uint32_t n_all,
                         const gc_snap *g)
{
    char **files;
    uint32_t nf;
    int found = 0;
    if (tq_store_list(ctx, s, "snap", &files, &nf)) return 1; /* cannot tell: keep it */
    for (uint32_t i = 0; !found && i < nf; i++) {
        gc_snap h = {0};
        int known = 0;
        for (uint32_t j = 0; j < n_all && !known; j++)
            known = !strncmp(files[i], all[j].name, strlen(all[j].name));
        if (known || !gc_read(ctx, s, files[i], &h)) continue;
        found = !strcmp(h.base, g->name);
        free(h.tokens);
    }
    tq_store_names_free(files, nf);
    return found;
}

/* Its index entries, its name entries, the snapshot, then its use, points and checkpoints. */
static tq_status evict(tq_ctx *ctx, tq_store *s, const gc_snap *all, uint32_t n_all,
                       const gc_snap *g)
{
    char entry[300];
    tq_status st = TQ_OK;
    uint64_t *h = tq_store_prefix_hashes(g->tokens, g->n_tokens);
    if (!h) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < g->n_tokens / TQ_STORE_STRIDE && !st; i++) {
        snprintf(entry, sizeof entry, "idx/%016" PRIx64 "/%016" PRIx64 "/%s", g->fp, h[i],
                 g->name);
        st = tq_store_remove(ctx, s, entry);
    }
    free(h);
    char **names;
    uint32_t n = 0;
    if (!st) st = tq_store_list(ctx, s, "names", &names, &n);
    for (uint32_t i = 0; !st && i < n; i++) {
        char *p;
        uint64_t len;
        int found;
        tq_store_entry(TQ_STORE_NAME, names[i], entry, sizeof entry);
        if (!tq_store_get(ctx, s, entry, &p, &len, &found) && found && !strcmp(p, g->name))
            st = tq_store_remove(ctx, s, entry);
        free(p);
    }
    if (n) tq_store_names_free(names, n);
    /* a save that appended to it since gc began keeps it, indexed again (the save checks its
     * base after writing too: between the two, a chain is never left without its base) */
    if (!st && new_dependent(ctx, s, all, n_all, g))
        return tq_store_index(ctx, s, g->fp, g->name, g->tokens, g->n_tokens) ? TQ_ERR_IO
                                                                               : TQ_KEPT;
    tq_store_entry(TQ_STORE_SNAP, g->name, entry, sizeof entry);
    if (!st) st = tq_store_remove(ctx, s, entry);
    /* after the snapshot: a racing restore that still finds it restores it whole, and a use it
     * records after this is removed by that restore (tq_store_touch) */
    snprintf(entry, sizeof entry, "used/%s", g->name);
    if (!st) st = tq_store_remove(ctx, s, entry);
    tq_store_entry(TQ_STORE_POINTS, g->name, entry, sizeof entry);
    if (!st) st = tq_store_remove(ctx, s, entry);
    tq_store_entry(TQ_STORE_CKPT, g->name, entry, sizeof entry);
    if (!st) st = tq_store_remove(ctx, s, entry);
    return st;
}

/* The next to evict: the least recently used with no dependents left; -1 if none. */
static long next_victim(const gc_snap *g, uint32_t n)
{
    long v = -1;
    for (uint32_t i = 0; i < n; i++)
        if (!g[i].gone && !g[i].dependents && (v < 0 || g[i].used < g[v].used)) v = (long)i;
    return v;
}

/* A writer's temporary left by a process that died (NAME.tmp.XXXXXX), an hour old: removed. */
static unsigned temps_removed;

static int sweep_one(const char *path, const struct stat *sb, int kind, struct FTW *ftw)
{
    const char *base = path + ftw->base;
    if (kind == FTW_F && S_ISREG(sb->st_mode) && strstr(base, ".tmp.") &&
        sb->st_mtime < time(NULL) - TQ_STORE_TEMP_AGE_S && !unlink(path))
        temps_removed++;
    return 0;
}

tq_status tq_store_gc(tq_ctx *ctx, tq_store *s, uint64_t max_bytes, tq_store_evicted_fn fn,
                      void *user, tq_store_gc_report *rep)
{
    char **files;
    uint32_t nf;
    memset(rep, 0, sizeof *rep);
    temps_removed = 0;
    if (!tq_store_remote(s)) nftw(tq_store_root(s), sweep_one, 16, FTW_PHYS); /* no link followed */
    rep->temps_removed = temps_removed;
    tq_status st = tq_store_list(ctx, s, "snap", &files, &nf);
    gc_snap *g = NULL;
    if (!st) g = calloc(nf ? nf : 1, sizeof *g); /* [nf] */
    uint32_t n = 0;
    if (!st && !g) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < nf; i++)
        if (gc_read(ctx, s, files[i], &g[n])) rep->bytes_before += g[n++].bytes;
    for (uint32_t i = 0; g && i < n; i++) /* each base: used when its latest dependent was */
        for (uint32_t j = 0; j < n; j++)
            if (g[i].base[0] && !strcmp(g[i].base, g[j].name)) {
                g[j].dependents++;
                if (g[i].used > g[j].used) g[j].used = g[i].used;
            }
    uint64_t total = rep->bytes_before;
    while (!st && total > max_bytes) {
        long v = next_victim(g, n);
        if (v < 0) break;
        st = evict(ctx, s, g, n, &g[v]);
        g[v].gone = 1;
        if (st == TQ_KEPT) { /* a racing save appended to it: kept */
            st = TQ_OK;
            continue;
        }
        total -= g[v].bytes;
        rep->evicted++;
        if (!st && fn) fn(user, g[v].name);
        for (uint32_t j = 0; g[v].base[0] && j < n; j++)
            if (!strcmp(g[v].base, g[j].name)) g[j].dependents--;
    }
    rep->bytes_after = total;
    rep->kept = n - rep->evicted;
    for (uint32_t i = 0; g && i < n; i++) free(g[i].tokens);
    free(g);
    if (nf) tq_store_names_free(files, nf);
    return st;
}
