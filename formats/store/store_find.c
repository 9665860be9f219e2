/* store_find.c - a stored snapshot for a prompt: restore points (points/ entries) and the
 * search of the token-prefix index (store.h, tq_store_find; STORE.md, "Finding the longest
 * stored prefix", "Restore points"). */
#include "store.h"

#include "tqkv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The candidates opened at one boundary, the most recently used first. */
enum { FIND_CANDIDATES = 16 };

tq_status tq_store_put_points(tq_ctx *ctx, tq_store *s, const char *name,
                              const tq_restore_points *pt)
{
    char entry[64];
    char text[32 + 16 * TQ_RESTORE_MAX_CHECKPOINTS];
    const char *recurrent = pt->recurrent ? "recurrent\n" : "";
    int n = snprintf(text, sizeof text, "from %u\n%s", pt->from, recurrent);
    for (uint32_t i = 0; i < pt->n_checkpoints && i < TQ_RESTORE_MAX_CHECKPOINTS; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "checkpoint %u\n", pt->checkpoint[i]);
    tq_store_entry(TQ_STORE_POINTS, name, entry, sizeof entry);
    return tq_store_put(ctx, s, entry, text, (uint64_t)n);
}

/* One line of a points entry into pt; 0 when it is not one tq writes. */
static int points_line(const char *line, uint32_t n_tokens, tq_restore_points *pt)
{
    char word[16];
    unsigned long v = 0;
    int got = sscanf(line, "%15s %lu", word, &v);
    if (got == 1 && !strcmp(word, "recurrent")) {
        pt->recurrent = 1;
        return 1;
    }
    if (got != 2 || v > n_tokens) return 0;
    if (!strcmp(word, "from")) {
        pt->from = (uint32_t)v;
        return 1;
    }
    return !strcmp(word, "checkpoint") &&
           tq_restore_points_add_checkpoint(pt, n_tokens, (uint32_t)v);
}

tq_status tq_store_get_points(tq_ctx *ctx, tq_store *s, const char *name, uint32_t n_tokens,
                              tq_restore_points *pt)
{
    char entry[64];
    char *text;
    uint64_t len;
    int found;
    tq_restore_points_whole(pt, n_tokens);
    tq_store_entry(TQ_STORE_POINTS, name, entry, sizeof entry);
    tq_status st = tq_store_get(ctx, s, entry, &text, &len, &found);
    if (st || !found) return st;
    tq_store_parse_points(text, n_tokens, pt); /* one that does not parse: whole only */
    free(text);
    return TQ_OK;
}

int tq_store_parse_points(char *text, uint32_t n_tokens, tq_restore_points *pt)
{
    tq_restore_points got;
    tq_restore_points_whole(&got, n_tokens);
    int good = 1;
    for (char *line = text; good && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        good = points_line(line, n_tokens, &got);
        line = end ? end + 1 : line + strlen(line);
    }
    good = good && tq_restore_points_valid(&got, n_tokens);
    if (good) *pt = got;
    return good;
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
    tq_store_snapshot_keep(s, name, r); /* the restore's decode opens it next */
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

/* What decoding a candidate to its point costs, lowest first: a whole snapshot decoded
 * straight into the slot file, one cut at the point (an intermediate file), a link (its base
 * read whole first), a link cut. */
static int decode_cost(int whole, uint32_t total, uint32_t point)
{
    return 2 * !whole + (total != point);
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
        tq_store_entry(TQ_STORE_SNAP, c[i].name, entry, sizeof entry);
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
            tq_restore_points pt;
            if (tq_store_get_points(ctx, s, c[i].name, total, &pt)) {
                (*skipped)++;
                continue;
            }
            point = tq_restore_point_for(&pt, total, common, n);
        }
        if (common > best->shared) best->shared = common;
        if (point > best->point ||
            (point && point == best->point &&
             decode_cost(whole, total, point) <
                 decode_cost(best->whole, best->n_tokens, best->point))) {
            snprintf(best->name, sizeof best->name, "%s", c[i].name);
            best->common = common;
            best->n_tokens = total;
            best->point = point;
            best->whole = whole;
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
    uint64_t *h = tq_store_prefix_hashes(q->tokens, q->n); /* linear in the prompt */
    if (!h) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (uint32_t i = q->n / TQ_STORE_STRIDE; i-- > 0;) {
        uint32_t k = (i + 1) * TQ_STORE_STRIDE;
        snprintf(folder, sizeof folder, "idx/%016" PRIx64 "/%016" PRIx64, q->fp, h[i]);
        st = find_at(ctx, s, folder, q, best, skipped);
        /* a snapshot first met at a shorter boundary shares fewer than k tokens */
        if (st || best->point >= k) break;
    }
    free(h);
    return st;
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
