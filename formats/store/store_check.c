/* store_check.c - every entry of a store verified, and with repair what is broken or unreachable
 * removed (store.h, tq_store_check; STORE.md, "Checking a store").  The snapshots first: each
 * read whole (checksums, or a sealed store's tags), its name against its tokens, its base;
 * then the entries that point at snapshots (the index, names, use times, restore points,
 * checkpoints) against the snapshots that passed, then writers' temporaries an hour old. */
#define _GNU_SOURCE /* nftw's FTW_ACTIONRETVAL */
#include "store_backend.h"
#include "tqkv.h"

#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct check_snap {
    char name[40];
    char base[40]; /* "" when whole */
    uint64_t base_id, id; /* id: XXH64 of its bytes where they were at hand, else 0 */
    int bad; /* 1: broken or unrestorable; 2: another key's (never touched); 3: gone since listed */
    int32_t *tokens;
    uint32_t n_tokens;
} check_snap;

typedef struct check_run {
    tq_ctx *ctx;
    tq_store *s;
    int repair;
    tq_store_problem_fn fn;
    void *user;
    tq_store_check_report *rep;
    check_snap *snap;
    uint32_t n_snap;
} check_run;

static void problem(check_run *c, const char *entry, int removable, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One problem told, and with repair its entry removed (when it is one repair may remove). */
static void problem(check_run *c, const char *entry, int removable, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int removed = c->repair && removable && !tq_store_remove(c->ctx, c->s, entry);
    c->rep->problems++;
    c->rep->repaired += removed != 0;
    if (c->fn) c->fn(c->user, entry, why, removed);
}

/* A snapshot read whole: an object's chunks are fetched and verified too. */
static tq_status verify_whole(tq_ctx *ctx, tqkv_reader *r)
{
    if (tqkv_streamed(r) != 2) return TQ_OK; /* mapped or opened in memory: verified */
    tq_status st = tqkv_fetch_plan(ctx, r, NULL);
    for (uint64_t i = 0; !st && i < tqkv_n_chunks(r); i++) {
        st = tqkv_chunk_fetch(ctx, r, i);
        tqkv_chunk_release(r, i);
    }
    return st;
}

static void read_snapshot(check_run *c, const char *file, check_snap *g)
{
    char entry[300];
    char want[40];
    tqkv_reader *r = NULL;
    snprintf(g->name, sizeof g->name, "%.*s", (int)(strlen(file) - 5), file);
    tq_store_entry(TQ_STORE_SNAP_FILE, file, entry, sizeof entry);
    tq_status st = tq_store_snapshot(c->ctx, c->s, g->name, &r);
    if (!st) st = verify_whole(c->ctx, r);
    uint64_t size;
    int found = 1;
    if (st && !tq_store_size(c->ctx, c->s, entry, &size, &found) && !found) {
        g->bad = 3; /* evicted by a live gc since the listing: its entries go with it */
        tqkv_close(r);
        return;
    }
    if (st) {
        g->bad = st == TQ_ERR_UNSUPPORTED ? 2 : 1; /* another key's is told, never removed */
        problem(c, entry, g->bad == 1, "%s", tq_ctx_error(c->ctx));
        tqkv_close(r);
        return;
    }
    const tqkv_meta *m = tqkv_meta_of(r);
    tq_store_name(strtoull(g->name, NULL, 16), m->tokens, m->n_tokens, want);
    if (m->base_id)
        snprintf(g->base, sizeof g->base, "%.*s", (int)strcspn(m->base_name, "."), m->base_name);
    g->base_id = m->base_id;
    g->id = tqkv_streamed(r) ? 0 : tqkv_file_id(r);
    g->n_tokens = m->n_tokens;
    g->tokens = malloc(4ull * m->n_tokens + 4);
    if (g->tokens) memcpy(g->tokens, m->tokens, 4ull * m->n_tokens);
    tqkv_close(r);
    if (strcmp(want, g->name)) {
        g->bad = 1;
        problem(c, entry, 1, "its tokens are named %s, not %s", want, g->name);
    }
}

static check_snap *find_snap(const check_run *c, const char *name)
{
    for (uint32_t i = 0; i < c->n_snap; i++)
        if (!strcmp(c->snap[i].name, name)) return &c->snap[i];
    return NULL;
}

/* A snapshot appended to a base that is gone, broken or another: it cannot be restored (and a
 * snapshot appended to it neither: until nothing changes). */
static void check_chains(check_run *c)
{
    char entry[300];
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = 0; i < c->n_snap; i++) {
            check_snap *g = &c->snap[i];
            if (g->bad || !g->base[0]) continue;
            const check_snap *b = find_snap(c, g->base);
            const char *why = NULL;
            if (!b || b->bad == 3) why = "is gone";
            else if (b->bad) why = "is broken";
            else if (b->id && b->id != g->base_id) why = "is another snapshot than it was";
            if (!why) continue;
            g->bad = 1;
            changed = 1;
            tq_store_entry(TQ_STORE_SNAP, g->name, entry, sizeof entry);
            problem(c, entry, 1, "its base %s %s", g->base, why);
        }
    }
}

/* Whether name is a snapshot that passed (a good one), or one a live store's writers are
 * changing: saved since the listing, or evicted while checked (its entries follow it). */
static int good(const check_run *c, const char *name)
{
    char entry[300];
    uint64_t size;
    int found = 0;
    const check_snap *g = find_snap(c, name);
    if (g) return !g->bad || g->bad == 3;
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    return !tq_store_size(c->ctx, c->s, entry, &size, &found) && found;
}

/* The entries under folder/ that name a snapshot (names/ holds it as content): each must be a
 * good one. */
static void check_folder(check_run *c, const char *folder)
{
    char **names;
    uint32_t n;
    char entry[300];
    if (tq_store_list(c->ctx, c->s, folder, &names, &n)) {
        problem(c, folder, 0, "cannot be listed: %s", tq_ctx_error(c->ctx));
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        snprintf(entry, sizeof entry, "%s/%s", folder, names[i]);
        c->rep->entries++;
        if (strcmp(folder, "names")) {
            if (!good(c, names[i])) problem(c, entry, 1, "belongs to no good snapshot");
            continue;
        }
        char *p = NULL;
        uint64_t len;
        int found = 0;
        if (!tq_store_get(c->ctx, c->s, entry, &p, &len, &found) && found && !good(c, p))
            problem(c, entry, 1, "names %.40s, which is no good snapshot", p);
        free(p);
    }
    if (n) tq_store_names_free(names, n);
}

/* idx/FP/PHASH/NAME: each for a good snapshot; every good snapshot indexed at each boundary of
 * its tokens (a save or gc cut short leaves it unfound: repair indexes it again). */
static void check_index(check_run *c)
{
    char **fps, **hs, **names;
    uint32_t nf = 0, nh, nn;
    char folder[128], entry[300];
    uint32_t *seen = calloc(c->n_snap ? c->n_snap : 1, sizeof *seen); /* [n_snap] */
    if (!seen || tq_store_list(c->ctx, c->s, "idx", &fps, &nf)) nf = 0;
    for (uint32_t i = 0; i < nf; i++) {
        snprintf(folder, sizeof folder, "idx/%s", fps[i]);
        if (tq_store_list(c->ctx, c->s, folder, &hs, &nh)) continue;
        for (uint32_t j = 0; j < nh; j++) {
            snprintf(folder, sizeof folder, "idx/%s/%s", fps[i], hs[j]);
            if (tq_store_list(c->ctx, c->s, folder, &names, &nn)) continue;
            for (uint32_t k = 0; k < nn; k++) {
                snprintf(entry, sizeof entry, "%s/%s", folder, names[k]);
                c->rep->entries++;
                const check_snap *g = find_snap(c, names[k]);
                if (g && !g->bad) seen[g - c->snap]++;
                else if (!good(c, names[k])) problem(c, entry, 1, "indexes no good snapshot");
            }
            if (nn) tq_store_names_free(names, nn);
        }
        if (nh) tq_store_names_free(hs, nh);
    }
    if (nf) tq_store_names_free(fps, nf);
    for (uint32_t i = 0; seen && i < c->n_snap; i++) {
        check_snap *g = &c->snap[i];
        if (g->bad || seen[i] >= g->n_tokens / TQ_STORE_STRIDE) continue;
        tq_store_entry(TQ_STORE_SNAP, g->name, entry, sizeof entry);
        int fixed = c->repair && !tq_store_index(c->ctx, c->s, strtoull(g->name, NULL, 16),
                                                 g->name, g->tokens, g->n_tokens);
        c->rep->problems++;
        c->rep->repaired += fixed;
        if (c->fn)
            c->fn(c->user, entry, fixed ? "not indexed at every boundary: indexed again"
                                        : "not indexed at every boundary (a save or gc cut short)",
                  fixed ? -1 : 0);
    }
    free(seen);
}

/* Writers' temporaries an hour old in a directory store; other keys' folders are not walked. */
static check_run *walking;

static int temp_one(const char *path, const struct stat *sb, int kind, struct FTW *ftw)
{
    const char *base = path + ftw->base;
    if (kind == FTW_D && ftw->level > 0 && !strncmp(base, "k-", 2)) return FTW_SKIP_SUBTREE;
    if (kind == FTW_F && S_ISREG(sb->st_mode) && strstr(base, ".tmp.") &&
        sb->st_mtime < time(NULL) - TQ_STORE_TEMP_AGE_S) {
        const char *rel = path + strlen(tq_store_root(walking->s)) + 1;
        problem(walking, rel, 1, "a writer's temporary over an hour old");
    }
    return FTW_CONTINUE;
}

tq_status tq_store_check(tq_ctx *ctx, tq_store *s, int repair, tq_store_problem_fn fn, void *user,
                         tq_store_check_report *rep)
{
    char **files;
    uint32_t nf;
    memset(rep, 0, sizeof *rep);
    check_run c = {ctx, s, repair, fn, user, rep, NULL, 0};
    tq_status st = tq_store_list(ctx, s, "snap", &files, &nf);
    if (!st && !(c.snap = calloc(nf ? nf : 1, sizeof *c.snap)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < nf; i++) {
        size_t len = strlen(files[i]);
        if (len < 6 || len - 5 >= sizeof c.snap[0].name || strcmp(files[i] + len - 5, ".tqkv"))
            continue;
        read_snapshot(&c, files[i], &c.snap[c.n_snap++]);
        rep->snapshots++;
    }
    if (!st) {
        check_chains(&c);
        check_index(&c);
        check_folder(&c, "names");
        check_folder(&c, "used");
        check_folder(&c, "points");
        check_folder(&c, "ckpt");
    }
    if (!st && !tq_store_remote(s)) {
        walking = &c;
        nftw(tq_store_root(s), temp_one, 16, FTW_PHYS | FTW_ACTIONRETVAL); /* no link followed */
        walking = NULL;
    }
    for (uint32_t i = 0; i < c.n_snap; i++) free(c.snap[i].tokens);
    free(c.snap);
    if (nf) tq_store_names_free(files, nf);
    return st;
}
