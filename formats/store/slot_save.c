/* slot_save.c - a server's slot saved into the store (slot_session.h): the server's raw save,
 * then the encode (appended to the longest stored snapshot it extends), its checkpoints, its
 * restore points and its index entries, in that order: whoever finds it finds them. */
#define _GNU_SOURCE /* vasprintf */
#include "slot_session.h"

#include "file_io.h"
#include "io.h"
#include "kv_snapshot.h"
#include "model.h"
#include "tqkv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double tq_slot_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void tq_slot_note(const tq_slot_session *ss, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n >= 0 && ss->note) ss->note(ss->note_user, line);
    if (n >= 0) free(line);
}

tq_status tq_slot_session_model(tq_ctx *ctx, tq_slot_session *ss, const char *model)
{
    tq_gguf *g;
    tq_model m;
    if (model) ss->model_path = strdup(model);
    if (!model) {
        tq_status st = llama_server_model(ctx, &ss->srv, &ss->model_path);
        if (st) return st;
    }
    if (!ss->model_path) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_gguf_open(ctx, ss->model_path, NULL, &g);
    if (st) return st;
    ss->fp = tq_store_model_id(tq_model_fingerprint(g));
    if (!tq_model_read(ctx, g, &m)) {
        ss->swa_window = m.swa_window;
        ss->swa_head = m.head_k_swa ? m.head_k_swa : m.head_k;
        ss->exact_points = tq_restore_exact_points(m.swa_window, m.n_recurrent);
        ss->head_k = m.head_k;
        tq_model_free(&m);
    }
    tq_gguf_close(g);
    return TQ_OK;
}

void tq_slot_session_free(tq_slot_session *ss)
{
    free(ss->model_path);
    ss->model_path = NULL;
}

void tq_slot_raw_name(const tq_slot_session *ss, const char *what, char *file, size_t file_size,
                      char *path, size_t path_size)
{
    static unsigned long serial; /* threads of one process: never the same name */
    struct timespec ts;
    char side[4200];
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long k = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    snprintf(file, file_size, "tq-%s-%d-%ld%09ld-%lu.bin", what, (int)getpid(), (long)ts.tv_sec,
             ts.tv_nsec, k);
    snprintf(path, path_size, "%s/%s", ss->slot_dir, file);
    tq_temp_track(path); /* a signal removes it (and its sidecar) as tq's other temporaries */
    snprintf(side, sizeof side, "%s.ckpt", path);
    tq_temp_track(side);
}

void tq_slot_remove_raw(const char *path)
{
    char side[4200];
    snprintf(side, sizeof side, "%s.ckpt", path);
    unlink(path);
    unlink(side);
    tq_temp_forget(path);
    tq_temp_forget(side);
}

/* What the session asks of a snapshot (its preset), and how it runs. */
static void snapshot_request(const tq_slot_session *ss, tq_kvsnap_request *q, tq_kvsnap_run *run)
{
    *q = (tq_kvsnap_request)TQ_KVSNAP_REQUEST_INIT;
    q->preset = ss->preset;
    *run = (tq_kvsnap_run)TQ_KVSNAP_RUN_INIT;
    run->threads = ss->threads;
    run->on_progress = ss->on_progress;
    run->progress_user = ss->progress_user;
}

tq_type_profile tq_slot_server_revision(tq_ctx *ctx, const tq_slot_session *ss)
{
    char build[128];
    if (ss->has_profile) return ss->profile;
    if (llama_server_build(ctx, &ss->srv, build, sizeof build)) return TQ_PROFILE_AUTO;
    return tq_type_profile_of_build(build);
}

/* The base named by base (when base->common) opened for an append: 1 when it is gone. */
static int open_base(tq_ctx *ctx, const tq_slot_session *ss, const tq_store_match *base,
                     tqkv_reader **b)
{
    char entry[96];
    tq_store_entry(TQ_STORE_SNAP, base->name, entry, sizeof entry);
    char *path = tq_store_path(ss->store, entry);
    int gone = !path || tq_kvsnap_open_mapped(ctx, path, b);
    free(path);
    return gone;
}

/* The view encoded into the store as name (appended to base when base->common): TQ_OK, an
 * error, or *onto_base 1 when the encode onto the base failed (nothing stored). */
static tq_status encode_once(tq_ctx *ctx, const tq_slot_session *ss, tq_kv_view *v,
                             const char *name, const tq_store_match *base, uint64_t *bytes,
                             int *onto_base)
{
    char entry[96];
    char base_file[64];
    tq_gguf *g = NULL;
    tq_model model;
    tqkv_reader *b = NULL;
    tq_kvsnap_request q;
    tq_kvsnap_run run;
    tq_kvsnap_inputs in = {0};
    tq_kvsnap_report rep = {0};
    *onto_base = 0;
    snapshot_request(ss, &q, &run);
    tq_status st = tq_gguf_open(ctx, ss->model_path, NULL, &g);
    if (!st) st = tq_model_read(ctx, g, &model);
    if (st) {
        tq_gguf_close(g);
        return st;
    }
    in.model = &model;
    if (base->common && open_base(ctx, ss, base, &b)) { /* evicted since it was found */
        *onto_base = 1;
        tq_model_free(&model);
        tq_gguf_close(g);
        return TQ_OK;
    }
    if (base->common) {
        snprintf(base_file, sizeof base_file, "%s.tqkv", base->name);
        in.base = b;
        q.base_name = base_file;
    }
    tq_store_writer *w;
    FILE *f;
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    st = tq_store_write_begin(ctx, ss->store, entry, &w, &f);
    tq_status failed = st ? st : tq_kvsnap_encode(ctx, v, &q, &in, &run, f, &rep);
    char *where = tq_store_path(ss->store, entry);
    if (!st && failed && *tq_store_write_error(w)) /* the store's side: its answer says why */
        failed = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", where ? where : entry,
                                  tq_store_write_error(w));
    else if (!st && failed == TQ_ERR_IO) { /* the store's side: a full disk, a folder gone */
        char why[512];
        snprintf(why, sizeof why, "%s", tq_ctx_error(ctx)); /* the message is rewritten */
        failed = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", where ? where : entry, why);
    }
    free(where);
    if (!st && failed) tq_store_write_abort(w);
    if (!st && !failed) failed = tq_store_write_commit(ctx, w);
    if (!st && failed && failed != TQ_ERR_IO && in.base) *onto_base = 1;
    *bytes = rep.snapshot_bytes;
    tqkv_close(b);
    tq_model_free(&model);
    tq_gguf_close(g);
    return *onto_base ? TQ_OK : failed;
}

/* The same; where the state does not fit its base (another coding, a cache that moved
 * otherwise than appending), the snapshot is stored whole, with a note: a save never fails
 * for a base. */
static tq_status encode(tq_ctx *ctx, const tq_slot_session *ss, tq_kv_view *v, const char *name,
                        tq_store_match *base, uint64_t *bytes)
{
    int onto_base;
    tq_status st = encode_once(ctx, ss, v, name, base, bytes, &onto_base);
    if (st || !onto_base) return st;
    tq_slot_note(ss, "note: %s does not append to %s (%s): stored whole", name, base->name,
         tq_ctx_error(ctx));
    base->common = 0;
    return encode_once(ctx, ss, v, name, base, bytes, &onto_base);
}

/* The server's checkpoint sidecar beside the slot file (a fork build's), checked and put in
 * the store as ckpt/NAME; its counts into pt.  One that does not check out is left out with
 * a warning: the snapshot itself is what was asked for. */
static tq_status save_checkpoints(tq_ctx *ctx, const tq_slot_session *ss, const char *path,
                                  const tq_kv_view *v, const char *name, tq_restore_points *pt)
{
    char side[4200];
    struct stat sb;
    int kept;
    tq_kvsnap_request q;
    tq_kvsnap_run run;
    tq_kvsnap_inputs in = {0};
    snapshot_request(ss, &q, &run);
    q.head_dim = (int)ss->swa_head; /* the partial states are the sliding layers' */
    tq_kvsnap_ckpt_coding coding = {ctx, &q, &in, &run, tq_kv_view_tokens(v),
                                    tq_kv_view_n_tokens(v), tq_kv_view_version(v)};
    snprintf(side, sizeof side, "%s.ckpt", path);
    /* checkpoints hold a window or a recurrent state each: well under the slot file 64 times */
    uint64_t limit = stat(path, &sb) ? 0 : 64ull * (uint64_t)sb.st_size + (1u << 20);
    tq_status st = tq_store_keep_checkpoints(ctx, ss->store, name, side, limit,
                                             tq_kv_view_n_tokens(v), tq_kvsnap_ckpt_code,
                                             &coding, pt, &kept);
    if (!st && kept < 0)
        tq_slot_note(ss, "warning: the server's checkpoint sidecar: %s: not kept",
                     tq_ctx_error(ctx));
    return st;
}

/* A gc racing this save may have evicted the base before it saw the new link (it keeps a
 * base it sees a new dependent of, store_gc.c): the base checked after the write, and where it
 * is gone the snapshot written again whole, so no chain is left without its base. */
static tq_status keep_chain_whole(tq_ctx *ctx, const tq_slot_session *ss, tq_kv_view *v,
                                  const char *name, tq_store_match *base, uint64_t *bytes)
{
    char entry[64];
    tq_store_entry(TQ_STORE_SNAP, base->name, entry, sizeof entry);
    if (!tq_store_check_entry(ctx, ss->store, entry)) return TQ_OK;
    tq_slot_note(ss, "note: %s: its base %s was evicted meanwhile: stored whole", name,
                 base->name);
    base->common = 0;
    return encode(ctx, ss, v, name, base, bytes);
}

tq_status tq_slot_save_raw(tq_ctx *ctx, const tq_slot_session *ss, long slot, const char *file,
                           const char *path, tq_slot_saved *rep)
{
    struct stat sb;
    uint32_t n_saved = 0;
    double t0 = tq_slot_now();
    memset(rep, 0, sizeof *rep);
    tq_status st = llama_server_slot(ctx, &ss->srv, slot, "save", file, &n_saved);
    rep->raw_s = tq_slot_now() - t0;
    if (st) {
        tq_slot_remove_raw(path); /* whatever the server wrote before it failed */
        return st;
    }
    if (access(path, R_OK)) {
        tq_slot_remove_raw(path);
        return tq_ctx_set_error(ctx, TQ_ERR_IO,
                                "the server saved slot %ld, but not into %s: give its "
                                "--slot-save-path as --slot-dir",
                                slot, ss->slot_dir);
    }
    if (lstat(path, &sb) || !S_ISREG(sb.st_mode)) { /* a link planted there: not followed */
        tq_slot_remove_raw(path);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the server's slot file is not a regular file",
                                path);
    }
    rep->n_tokens = n_saved;
    return TQ_OK;
}

/* The view's snapshot into the store (or its use recorded where it is stored already). */
static tq_status store_view(tq_ctx *ctx, const tq_slot_session *ss, const char *path,
                            tq_kv_view *v, tq_slot_saved *rep)
{
    tq_store_match base;
    tq_restore_points pt;
    uint32_t skipped = 0;
    const int32_t *tokens = tq_kv_view_tokens(v);
    uint32_t n = tq_kv_view_n_tokens(v);
    tq_restore_points_of(v, &pt, NULL);
    rep->n_tokens = n;
    rep->tokens = malloc(4ull * n + 4);
    if (!rep->tokens) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(rep->tokens, tokens, 4ull * n);
    tq_store_name(ss->fp, tokens, n, rep->name);
    tq_status st = tq_store_find_base(ctx, ss->store, ss->fp, tokens, n, &base, &skipped);
    if (st) return st;
    if (skipped) tq_slot_note(ss, "warning: %u stored snapshots could not be read", skipped);
    if (!strcmp(base.name, rep->name)) { /* stored already: used again */
        int present;
        st = tq_store_touch(ctx, ss->store, rep->name, &present);
        rep->already = present;
        if (st || present) return st;
        memset(&base, 0, sizeof base); /* evicted meanwhile: saved again, whole */
    }
    st = encode(ctx, ss, v, rep->name, &base, &rep->bytes);
    /* checkpoints and points before the index: whoever finds the snapshot finds them */
    if (!st) st = save_checkpoints(ctx, ss, path, v, rep->name, &pt);
    if (!st) st = tq_store_put_points(ctx, ss->store, rep->name, &pt);
    if (!st) st = tq_store_index(ctx, ss->store, ss->fp, rep->name, tokens, n);
    if (!st && base.common) st = keep_chain_whole(ctx, ss, v, rep->name, &base, &rep->bytes);
    if (!st && base.common) snprintf(rep->base, sizeof rep->base, "%s", base.name);
    rep->checkpoints = pt.n_checkpoints > 0;
    return st;
}

tq_status tq_slot_store_raw(tq_ctx *ctx, const tq_slot_session *ss, const char *path,
                            const char *alias, tq_slot_saved *rep)
{
    tq_kv_view *v = NULL;
    double t0 = tq_slot_now();
    double raw_s = rep->raw_s;
    memset(rep, 0, sizeof *rep);
    rep->raw_s = raw_s;
    tq_status st = tq_kv_view_open(ctx, path, tq_slot_server_revision(ctx, ss), &v);
    if (!st) st = store_view(ctx, ss, path, v, rep);
    if (!st && alias) {
        char entry[300];
        tq_store_entry(TQ_STORE_NAME, alias, entry, sizeof entry);
        st = tq_store_put(ctx, ss->store, entry, rep->name, strlen(rep->name));
    }
    tq_kv_view_close(v);
    tq_slot_remove_raw(path);
    rep->store_s = tq_slot_now() - t0;
    return st;
}

tq_status tq_slot_save(tq_ctx *ctx, const tq_slot_session *ss, long slot, const char *alias,
                       tq_slot_saved *rep)
{
    char file[128];
    char path[4096];
    tq_slot_raw_name(ss, "save", file, sizeof file, path, sizeof path);
    tq_status st = tq_slot_save_raw(ctx, ss, slot, file, path, rep);
    return st ? st : tq_slot_store_raw(ctx, ss, path, alias, rep);
}

/* The first K and V tensors' types of a state (their names), "" where it has none. */
static void view_types(const tq_kv_view *v, char *k, char *vt, size_t n)
{
    *k = 0;
    *vt = 0;
    for (uint32_t s = 0; s < tq_kv_view_n_kv(v) && !*k; s++)
        for (uint32_t r = 0; r < tq_kv_view_kv(v, s)->n_stream && !*k; r++) {
            const tq_kv_stream *st = &tq_kv_view_kv(v, s)->streams[r];
            if (!st->n_layer || !st->cell_count) continue;
            snprintf(k, n, "%s", st->k[0].type->name);
            snprintf(vt, n, "%s", st->v ? st->v[0].type->name : st->k[0].type->name);
        }
}

tq_status tq_slot_probe_types(tq_ctx *ctx, tq_slot_session *ss, long slot, int32_t token)
{
    char file[128];
    char path[4096];
    tq_slot_saved rep;
    tq_kv_view *v = NULL;
    tq_status st = llama_server_prefill(ctx, &ss->srv, slot, &token, 1, NULL);
    tq_slot_raw_name(ss, "probe", file, sizeof file, path, sizeof path);
    if (!st) st = tq_slot_save_raw(ctx, ss, slot, file, path, &rep);
    if (!st) st = tq_kv_view_open(ctx, path, tq_slot_server_revision(ctx, ss), &v);
    if (!st) view_types(v, ss->cache_k, ss->cache_v, sizeof ss->cache_k);
    if (!st && !*ss->cache_k)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "the server's slot holds no K/V cache");
    tq_kv_view_close(v);
    tq_slot_remove_raw(path);
    return st;
}
