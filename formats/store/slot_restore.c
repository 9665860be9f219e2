/* slot_restore.c - a prompt's longest stored restore point brought back into a server's slot
 * (slot_session.h): found through the store's index, decoded to that point (with the
 * checkpoints at or below it) into the server's folder, restored by the server, removed. */
#include "slot_session.h"

#include "file_io.h"
#include "io.h"
#include "kv_snapshot.h"
#include "tqkv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Tries a restore may take: a stored snapshot that fails to decode (corrupt where its index
 * did not show it: an object's chunks arrive only then) gives way to the next-best prefix. */
enum { RESTORE_TRIES = 3 };

tq_status tq_slot_named_tokens(tq_ctx *ctx, const tq_slot_session *ss, const char *alias,
                               int32_t **tokens, uint32_t *n)
{
    char entry[300];
    char name[40];
    char *text;
    uint64_t len;
    int found;
    tqkv_reader *s;
    tq_store_entry(TQ_STORE_NAME, alias, entry, sizeof entry);
    tq_status st = tq_store_get(ctx, ss->store, entry, &text, &len, &found);
    if (st) return st;
    int named = found && tq_store_is_snapshot_name(text); /* names a snapshot, or none */
    if (named) snprintf(name, sizeof name, "%s", text);
    free(text);
    if (!named)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%s: no snapshot named '%s'",
                                tq_store_root(ss->store), alias);
    if (strtoull(name, NULL, 16) != ss->fp)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s: '%s' is a snapshot of another model (fingerprint %.16s; the "
                                "server's model has %016" PRIx64 ")",
                                tq_store_root(ss->store), alias, name, ss->fp);
    st = tq_store_snapshot(ctx, ss->store, name, &s);
    if (st) return st;
    *n = tqkv_meta_of(s)->n_tokens;
    *tokens = malloc(4ull * *n + 4);
    if (*tokens) memcpy(*tokens, tqkv_meta_of(s)->tokens, 4ull * *n);
    tq_store_snapshot_keep(ss->store, name, s);
    return *tokens ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
}

/* A base name as an appended snapshot records it: NAME.tqkv of a stored snapshot's NAME. */
static int base_name_ok(const char *file)
{
    char name[40];
    size_t n = strlen(file);
    if (n != 38 || strcmp(file + 33, ".tqkv")) return 0;
    snprintf(name, sizeof name, "%.33s", file);
    return tq_store_is_snapshot_name(name);
}

/* The context's message behind a prefix (what: "its base NAME", or NULL), status st. */
static tq_status prefixed(tq_ctx *ctx, tq_status st, const char *path, const char *base)
{
    char why[512];
    snprintf(why, sizeof why, "%s", tq_ctx_error(ctx)); /* the message is rewritten */
    if (base) return tq_ctx_set_error(ctx, st, "%s: its base %s: %s", path, base, why);
    return tq_ctx_set_error(ctx, st, "%s: %s", path, why);
}

/* The stored snapshot's first `tokens` tokens written to out as a slot file. */
static tq_status decode_to(tq_ctx *ctx, const tq_slot_session *ss, const tqkv_reader *s,
                           const tqkv_reader *base, uint32_t tokens, const tq_store_ckpts *k,
                           const char *raw, FILE *out)
{
    const tqkv_meta *m = tqkv_meta_of(s);
    tq_type_profile rev = tq_slot_server_revision(ctx, ss);
    if (rev == TQ_PROFILE_AUTO) rev = TQ_PROFILE_NEWEST;
    tq_kvsnap_decode_options d = {.threads = ss->threads,
                                  .fork_rev = tq_type_profile_name(rev),
                                  .cache_type = *ss->cache_k ? ss->cache_k : NULL,
                                  .cache_type_v = *ss->cache_v ? ss->cache_v : NULL,
                                  .head_dim = ss->head_k,
                                  .on_progress = ss->on_progress,
                                  .progress_user = ss->progress_user};
    /* masked cells below a window-only cache: the server's check passes when the prompt ends
     * where the snapshot does as well (restore_point.h, tq_restore_pad_below) */
    tq_kvsnap_restore_options ro = {.format = (tq_kv_kind)m->source_kind,
                                    .tokens = tokens < m->n_tokens ? tokens : 0,
                                    .tmp_near = raw,
                                    .pad_window = TQ_RESTORE_PAD_CELLS,
                                    .partial = k->partial,
                                    .partial_len = k->partial_len};
    return tq_kvsnap_restore(ctx, s, base, &d, &ro, out);
}

/* The stored snapshot `name` decoded to `tokens` tokens into the server's folder as raw: a
 * chain whose base is gone or a snapshot that does not decode is TQ_ERR_CORRUPT (the next-best
 * prefix is tried). */
static tq_status decode(tq_ctx *ctx, const tq_slot_session *ss, const char *name,
                        uint32_t tokens, const tq_store_ckpts *k, const char *raw)
{
    char entry[96];
    tqkv_reader *s = NULL;
    tqkv_reader *base = NULL;
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    char *path = tq_store_path(ss->store, entry);
    if (!path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_store_snapshot(ctx, ss->store, name, &s);
    const tqkv_meta *m = st ? NULL : tqkv_meta_of(s);
    if (!st && m->base_id && !base_name_ok(m->base_name))
        st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s: names a base that is not a stored "
                                                   "snapshot's", path);
    if (!st && m->base_id) { /* an appended snapshot: its base beside it, read whole */
        tq_store_entry(TQ_STORE_SNAP_FILE, m->base_name, entry, sizeof entry);
        char *bp = tq_store_path(ss->store, entry);
        if (!bp || tq_kvsnap_open_mapped(ctx, bp, &base))
            st = prefixed(ctx, TQ_ERR_CORRUPT, path, m->base_name);
        free(bp);
    }
    char *tmp = NULL;
    FILE *f = NULL;
    if (!st) st = tq_temp_create_ex(ctx, raw, 0, &tmp, &f);
    if (!st) {
        st = decode_to(ctx, ss, s, base, tokens, k, raw, f);
        /* a snapshot that does not decode: the next-best prefix is tried */
        if (st && st != TQ_ERR_NOMEM && st != TQ_ERR_IO)
            st = prefixed(ctx, TQ_ERR_CORRUPT, path, NULL);
        if (st) unlink(tmp);
        int bad = fclose(f) != 0;
        if (!st && (bad || rename(tmp, raw)))
            st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed", raw);
        if (st) unlink(tmp);
        tq_temp_forget(tmp);
    }
    if (st == TQ_ERR_FORMAT) /* opened, but not a snapshot: corrupt as well */
        st = TQ_ERR_CORRUPT;
    free(tmp);
    free(path);
    tqkv_close(base);
    tqkv_close(s);
    return st;
}

/* The best candidate's restore points and the checkpoints at or below its point into k. */
static tq_status load_points(tq_ctx *ctx, const tq_slot_session *ss, const tq_store_match *best,
                             tq_store_ckpts *k)
{
    tq_restore_points pt;
    tq_kvsnap_ckpt_coding coding = {ctx, NULL, NULL, NULL, NULL, 0, 0};
    tq_store_ckpts_free(k);
    tq_status st = tq_store_get_points(ctx, ss->store, best->name, best->n_tokens, &pt);
    if (st || !pt.n_checkpoints) return st;
    uint32_t at = tq_restore_point_needs_checkpoint(&pt, best->point) ? best->point : 0;
    return tq_store_load_checkpoints(ctx, ss->store, best->name, best->n_tokens, at,
                                     tq_kvsnap_ckpt_decode, &coding, k);
}

/* Finds and decodes the best stored prefix into raw (rep->point 0: none). */
static tq_status find_and_decode(tq_ctx *ctx, const tq_slot_session *ss, const int32_t *tokens,
                                 uint32_t n, uint32_t have, const char *raw,
                                 tq_slot_restored *rep)
{
    char failed[RESTORE_TRIES][40];
    const char *except[RESTORE_TRIES];
    char side[4200];
    uint32_t skipped = 0;
    tq_store_match best = {0};
    tq_store_ckpts k = {0};
    tq_status st = TQ_OK;
    snprintf(side, sizeof side, "%s.ckpt", raw);
    for (uint32_t t = 0; !st && t < RESTORE_TRIES; t++) {
        double t0 = tq_slot_now();
        st = tq_store_find(ctx, ss->store, ss->fp, tokens, n, except, t, &best, &skipped);
        rep->find_s += tq_slot_now() - t0;
        if (!st && skipped) tq_slot_note(ss, "warning: %u stored snapshots could not be read; "
                                             "skipped", skipped);
        rep->shared = best.shared > rep->shared ? best.shared : rep->shared;
        if (st || best.point <= have) break; /* nothing the slot lacks */
        st = load_points(ctx, ss, &best, &k);
        t0 = tq_slot_now();
        if (!st) st = decode(ctx, ss, best.name, best.point, &k, raw);
        if (!st) st = tq_store_write_checkpoints(ctx, &k, best.point, side);
        rep->decode_s += tq_slot_now() - t0;
        if (!st) {
            rep->point = best.point;
            snprintf(rep->name, sizeof rep->name, "%s", best.name);
            break;
        }
        tq_slot_remove_raw(raw);
        if (st != TQ_ERR_CORRUPT || t + 1 == RESTORE_TRIES) break;
        tq_slot_note(ss, "warning: %s: corrupt (%s); the next-best prefix instead", best.name,
                     tq_ctx_error(ctx));
        snprintf(failed[t], sizeof failed[t], "%s", best.name);
        except[t] = failed[t];
        st = TQ_OK;
    }
    tq_store_ckpts_free(&k);
    return st;
}

tq_status tq_slot_restore_prepare(tq_ctx *ctx, const tq_slot_session *ss, const int32_t *tokens,
                                  uint32_t n, uint32_t have, tq_slot_restored *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->n_prompt = n;
    tq_slot_raw_name(ss, "restore", rep->file, sizeof rep->file, rep->path, sizeof rep->path);
    tq_status st = find_and_decode(ctx, ss, tokens, n, have, rep->path, rep);
    /* the candidates' readers lived for this restore: a proxy's store outlives them, and an
       entry may be replaced or evicted meanwhile */
    tq_store_snapshot_forget(ss->store);
    if (st || !rep->point) tq_slot_restore_discard(rep);
    return st;
}

void tq_slot_restore_discard(tq_slot_restored *rep)
{
    if (*rep->path) tq_slot_remove_raw(rep->path);
    rep->point = 0;
}

tq_status tq_slot_restore_apply(tq_ctx *ctx, const tq_slot_session *ss, long slot,
                                tq_slot_restored *rep)
{
    uint32_t n_restored = 0;
    double t0 = tq_slot_now();
    tq_status st = llama_server_slot(ctx, &ss->srv, slot, "restore", rep->file, &n_restored);
    rep->restore_s = tq_slot_now() - t0;
    tq_slot_remove_raw(rep->path);
    if (st) {
        rep->point = 0;
        return st;
    }
    /* restored already: a store that cannot record the use (read-only) is a warning */
    int present;
    if (tq_store_touch(ctx, ss->store, rep->name, &present))
        tq_slot_note(ss, "warning: %s: its use not recorded: %s", rep->name, tq_ctx_error(ctx));
    return TQ_OK;
}

tq_status tq_slot_restore(tq_ctx *ctx, tq_slot_session *ss, long slot, const int32_t *tokens,
                          uint32_t n, uint32_t have, tq_slot_restored *rep)
{
    char k[16];
    char v[16];
    tq_status st = tq_slot_restore_prepare(ctx, ss, tokens, n, have, rep);
    if (st || !rep->point) return st;
    st = tq_slot_restore_apply(ctx, ss, slot, rep);
    if (st != TQ_ERR_IO || !n) return st;
    /* refused: a server with other cache types (f16 saved, q8_0 here) takes it converted */
    snprintf(k, sizeof k, "%s", ss->cache_k);
    snprintf(v, sizeof v, "%s", ss->cache_v);
    char why[512];
    snprintf(why, sizeof why, "%s", tq_ctx_error(ctx));
    if (tq_slot_probe_types(ctx, ss, slot, tokens[0]) ||
        (!strcmp(k, ss->cache_k) && !strcmp(v, ss->cache_v)))
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s", why);
    tq_slot_note(ss, "note: the server refused the restore (%s): converted to its cache types "
                     "(K %s, V %s)",
                 why, ss->cache_k, ss->cache_v);
    st = tq_slot_restore_prepare(ctx, ss, tokens, n, have, rep);
    if (st || !rep->point) return st;
    return tq_slot_restore_apply(ctx, ss, slot, rep);
}
