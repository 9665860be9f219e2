/* proxy_turn.c - a generation request's part in the session (PROXY.md): before it goes to the
 * server, its prompt's tokens, the slot it will run in (pinned), what that slot holds (asked of
 * the server), and the store's longest restore point beyond it, restored; on sliding-window
 * models a restore point at the prompt's end.  After its answer went back, the slot's raw
 * save, queued for the store. */
#include "proxy_impl.h"
#include "restore_point.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The generation endpoints the proxy keeps sessions for, and how their prompt is told. */
typedef enum { PROMPT_CHAT, PROMPT_TEXT } prompt_kind;
typedef struct generation_path {
    const char *path;
    prompt_kind kind;
} generation_path;

/* clang-format off */
static const generation_path generation_paths[] = {
    /* path                    prompt */
    {"/v1/chat/completions",   PROMPT_CHAT},
    {"/chat/completions",      PROMPT_CHAT},
    {"/v1/completions",        PROMPT_TEXT},
    {"/completions",           PROMPT_TEXT},
    {"/completion",            PROMPT_TEXT},
    {NULL,                     PROMPT_TEXT},
};
/* clang-format on */

static const generation_path *generation_of(const char *method, const char *path)
{
    if (strcmp(method, "POST")) return NULL;
    for (const generation_path *g = generation_paths; g->path; g++)
        if (!strcmp(g->path, path)) return g;
    return NULL;
}

/* A session of the proxy's for one request: the server's calls carry the client's key. */
static tq_slot_session session_of(const proxy_req *r)
{
    pthread_mutex_lock(&r->p->lock); /* the cache types learned may change */
    tq_slot_session ss = r->p->cfg.session;
    pthread_mutex_unlock(&r->p->lock);
    ss.srv.authorization = r->authorization;
    return ss;
}

/* A restore the server refused: the cache types its slot holds learned (the proxy keeps them
 * for the restores after); 1 when they are new, and the restore worth trying again. */
static int learn_types(proxy_req *r, tq_ctx *ctx)
{
    tq_slot_session ss = session_of(r);
    char why[512];
    snprintf(why, sizeof why, "%s", tq_ctx_error(ctx));
    if (tq_slot_probe_types(ctx, &ss, r->turn.slot, r->turn.tokens[0])) return 0;
    pthread_mutex_lock(&r->p->lock);
    tq_slot_session *kept = &r->p->cfg.session;
    int changed = strcmp(kept->cache_k, ss.cache_k) || strcmp(kept->cache_v, ss.cache_v);
    memcpy(kept->cache_k, ss.cache_k, sizeof kept->cache_k);
    memcpy(kept->cache_v, ss.cache_v, sizeof kept->cache_v);
    pthread_mutex_unlock(&r->p->lock);
    if (changed)
        proxy_log(r->p, "slot %ld: the server refused a restore (%s): converting to its cache "
                        "types from now on (K %s, V %s)",
                  r->turn.slot, why, ss.cache_k, ss.cache_v);
    return changed;
}

/* The prompt's tokens as the server will make them: a chat through its template, a text
 * through its tokenizer, a token array as it is.  0, or -1 (the note says why). */
static int prompt_tokens(proxy_req *r, const generation_path *g, json_t *body, tq_ctx *ctx)
{
    tq_slot_session ss = session_of(r);
    proxy_turn *t = &r->turn;
    char *text = NULL;
    json_t *prompt = json_object_get(body, "prompt");
    int listed = g->kind == PROMPT_TEXT ? proxy_prompt_array(body, &t->tokens, &t->n) : 0;
    if (listed < 0) snprintf(t->note, sizeof t->note, "the prompt is not one list of tokens");
    if (listed) return listed > 0 ? 0 : -1;
    tq_status st = TQ_OK;
    if (g->kind == PROMPT_CHAT) {
        st = llama_server_apply_template(ctx, &ss.srv, r->body, &text);
    } else if (json_is_string(prompt)) {
        text = strdup(json_string_value(prompt));
    } else {
        snprintf(t->note, sizeof t->note, "a prompt of several texts: not kept");
        return -1;
    }
    if (!st && text) st = llama_server_tokenize(ctx, &ss.srv, text, &t->tokens, &t->n);
    free(text);
    if (st) snprintf(t->note, sizeof t->note, "the prompt's tokens: %s", tq_ctx_error(ctx));
    return st ? -1 : 0;
}

int proxy_prompt_array(const json_t *body, int32_t **tokens, uint32_t *n)
{
    const json_t *prompt = json_object_get(body, "prompt");
    *tokens = NULL;
    *n = 0;
    if (!json_is_array(prompt)) return 0;
    size_t len = json_array_size(prompt);
    if (len > UINT32_MAX) return -1;
    int32_t *t = malloc((len ? len : 1) * sizeof *t);
    for (size_t i = 0; t && i < len; i++) {
        const json_t *v = json_array_get(prompt, i);
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id > INT32_MAX) {
            free(t);
            return -1;
        }
        t[i] = (int32_t)id;
    }
    if (!t) return -1;
    *tokens = t;
    *n = (uint32_t)len;
    return 1;
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
    uint32_t n = na < nb ? na : nb;
    uint32_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The slots the server has, learned once from /slots. */
static int learn_slots(tq_proxy *p, tq_ctx *ctx, const llama_server *srv)
{
    llama_server_slot_state *s;
    uint32_t n;
    if (p->n_slots) return 0;
    if (llama_server_slots(ctx, srv, &s, &n)) return -1;
    proxy_slot *slots = n ? calloc(n, sizeof *slots) : NULL;
    free(s);
    if (!slots) return -1;
    for (uint32_t i = 0; i < n; i++) slots[i].id_task = -1;
    pthread_mutex_lock(&p->lock);
    if (!p->n_slots) {
        p->slots = slots;
        p->n_slots = n;
        slots = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    free(slots);
    return 0;
}

/* The free slot that shares the most with the prompt, else the least recently used free one;
 * -1 when every slot is held. */
static long pick_slot(const tq_proxy *p, const proxy_turn *t)
{
    long best = -1;
    uint32_t best_common = 0;
    for (uint32_t i = 0; i < p->n_slots; i++) {
        const proxy_slot *s = &p->slots[i];
        if (s->busy) continue;
        uint32_t c = common_prefix(s->tokens, s->n_tokens, t->tokens, t->n);
        const proxy_slot *b = best < 0 ? NULL : &p->slots[best];
        if (!b || c > best_common || (c == best_common && s->used < b->used)) {
            best = (long)i;
            best_common = c;
        }
    }
    return best;
}

/* Pins the slot the request asks for (id_slot), or one picked: waits while it is held. */
static long pin_slot(tq_proxy *p, proxy_turn *t, long asked)
{
    long slot = -1;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        if (asked >= 0 && (uint32_t)asked < p->n_slots && !p->slots[asked].busy) slot = asked;
        if (asked < 0) slot = pick_slot(p, t);
        if (slot >= 0 || (asked >= 0 && (uint32_t)asked >= p->n_slots)) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->changed, &p->lock, &ts);
    }
    if (slot >= 0) p->slots[slot].busy = 1;
    pthread_mutex_unlock(&p->lock);
    return slot;
}

/* What the slot holds of the prompt: what the proxy recorded, where the server's slot is still
 * as it was then (its last task and its cells); else nothing is assumed. */
static uint32_t slot_holds(proxy_req *r, tq_ctx *ctx, long slot)
{
    tq_slot_session ss = session_of(r);
    llama_server_slot_state *s = NULL;
    uint32_t n = 0;
    uint32_t have = 0;
    if (llama_server_slots(ctx, &ss.srv, &s, &n)) return 0;
    tq_proxy *p = r->p;
    pthread_mutex_lock(&p->lock);
    const proxy_slot *k = &p->slots[slot];
    for (uint32_t i = 0; i < n; i++)
        if (s[i].id == slot && s[i].id_task >= 0 && s[i].id_task == k->id_task &&
            s[i].n_tokens == k->n_cells)
            have = common_prefix(k->tokens, k->n_tokens, r->turn.tokens, r->turn.n);
    pthread_mutex_unlock(&p->lock);
    free(s);
    return have;
}

/* The store's part of a restore, in a thread of its own: the request waits for it at most
 * the store's timeout, and a late one is thrown away. */
typedef struct prepare_job {
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    int done, abandoned;
    tq_slot_session ss;
    char authorization[1024];
    int32_t *tokens;
    uint32_t n, have;
    tq_status st;
    char error[512];
    tq_slot_restored rep;
} prepare_job;

static void prepare_free(prepare_job *j)
{
    pthread_cond_destroy(&j->done_cv);
    pthread_mutex_destroy(&j->lock);
    free(j->tokens);
    free(j);
}

static void *prepare_run(void *arg)
{
    prepare_job *j = arg;
    tq_ctx *ctx = tq_ctx_new();
    j->st = ctx ? tq_slot_restore_prepare(ctx, &j->ss, j->tokens, j->n, j->have, &j->rep)
                : TQ_ERR_NOMEM;
    snprintf(j->error, sizeof j->error, "%s", ctx ? tq_ctx_error(ctx) : "out of memory");
    tq_ctx_free(ctx);
    pthread_mutex_lock(&j->lock);
    j->done = 1;
    int abandoned = j->abandoned;
    pthread_cond_signal(&j->done_cv);
    pthread_mutex_unlock(&j->lock);
    if (abandoned) {
        tq_slot_restore_discard(&j->rep);
        prepare_free(j);
    }
    return NULL;
}

/* The store's restore point beyond what the slot holds, decoded within the store's timeout:
 * 0 and rep set, or -1 (none, late, or failed: the note says which). */
static int prepare_in_time(proxy_req *r, tq_slot_restored *rep)
{
    proxy_turn *t = &r->turn;
    prepare_job *j = calloc(1, sizeof *j);
    pthread_t th;
    if (!j || !(j->tokens = malloc(4ull * t->n + 4))) {
        free(j);
        return -1;
    }
    memcpy(j->tokens, t->tokens, 4ull * t->n);
    j->n = t->n;
    j->have = t->have;
    j->ss = session_of(r);
    if (r->authorization) {
        snprintf(j->authorization, sizeof j->authorization, "%s", r->authorization);
        j->ss.srv.authorization = j->authorization;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->done_cv, NULL);
    if (pthread_create(&th, NULL, prepare_run, j)) {
        prepare_free(j);
        return -1;
    }
    pthread_detach(th);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double s = r->p->cfg.store_timeout_s;
    until.tv_sec += (time_t)s;
    until.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->lock);
    while (!j->done && !pthread_cond_timedwait(&j->done_cv, &j->lock, &until)) {
    }
    int done = j->done;
    if (!done) j->abandoned = 1; /* the thread frees it */
    pthread_mutex_unlock(&j->lock);
    if (!done) {
        snprintf(t->note, sizeof t->note, "the store took over %.1f s: a miss", s);
        return -1;
    }
    int rc = j->st ? -1 : 0;
    if (j->st) snprintf(t->note, sizeof t->note, "the store: %s", j->error);
    if (!j->st && !j->rep.point) rc = -1;
    *rep = j->rep;
    prepare_free(j);
    return rc;
}

/* The body with "id_slot" set to the slot pinned (a request that named none). */
static void pin_body(proxy_req *r, json_t *body, long slot)
{
    if (json_integer_value(json_object_get(body, "id_slot")) == slot &&
        json_is_integer(json_object_get(body, "id_slot")))
        return;
    json_object_set_new(body, "id_slot", json_integer(slot));
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) return;
    free(r->body);
    r->body = text;
    r->body_len = strlen(text);
}

/* The server's raw save of the turn's slot (the only step that holds it), queued for the
 * store; a failure is one log line (what it says first) and an error counted. */
static void save_and_queue(proxy_req *r, tq_ctx *ctx, const tq_slot_session *ss, long id_task,
                           const char *what)
{
    char file[128];
    char path[4096];
    tq_slot_saved rep;
    tq_proxy *p = r->p;
    tq_slot_raw_name(ss, "save", file, sizeof file, path, sizeof path);
    if (tq_slot_save_raw(ctx, ss, r->turn.slot, file, path, &rep)) {
        proxy_log(p, "slot %ld: %s: %s", r->turn.slot, what, tq_ctx_error(ctx));
        pthread_mutex_lock(&p->lock);
        p->m.errors++;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    proxy_saver_queue(p, r->turn.slot, id_task, path, rep.raw_s);
}

/* On models whose cache restores only where it was saved (a sliding window, a recurrent
 * state): the prompt but its last token processed alone and saved, so that the next turn
 * restores there whatever the client sends back of the answer.  The request then processes
 * the last token, as it would anyway: nothing is processed twice (a recurrent state cannot
 * step back a token, so a save at the prompt's very end would make the server process the
 * whole prompt again). */
static void save_prompt_end(proxy_req *r, tq_ctx *ctx, uint32_t restored_point)
{
    tq_proxy *p = r->p;
    proxy_turn *t = &r->turn;
    tq_slot_session ss = session_of(r);
    uint32_t end = tq_restore_save_point(ss.exact_points, t->n);
    if (!end || end < p->cfg.min_tokens || restored_point >= end) return;
    tq_status st = llama_server_prefill(ctx, &ss.srv, t->slot, t->tokens, end, &t->prefilled);
    if (st) { /* once more: an answer lost after the server did the work costs it nothing */
        proxy_log(p, "slot %ld: the prompt's end: %s; trying once more", t->slot,
                  tq_ctx_error(ctx));
        st = llama_server_prefill(ctx, &ss.srv, t->slot, t->tokens, end, &t->prefilled);
    }
    if (st) {
        proxy_log(p, "slot %ld: the prompt's end not saved: %s", t->slot, tq_ctx_error(ctx));
        return;
    }
    save_and_queue(r, ctx, &ss, -1, "the prompt's end not saved");
}

void proxy_turn_begin(proxy_req *r, const char *method, const char *path)
{
    tq_proxy *p = r->p;
    proxy_turn *t = &r->turn;
    const generation_path *g = generation_of(method, path);
    if (!g || !r->body) return;
    json_t *body = json_loadb(r->body, r->body_len, 0, NULL);
    tq_ctx *ctx = tq_ctx_new();
    tq_slot_session ss = session_of(r);
    if (!json_is_object(body) || !ctx) {
        json_decref(body);
        tq_ctx_free(ctx);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->m.generations++;
    pthread_mutex_unlock(&p->lock);
    json_t *id = json_object_get(body, "id_slot");
    long asked = json_is_integer(id) ? (long)json_integer_value(id) : -1;
    if (prompt_tokens(r, g, body, ctx) || learn_slots(p, ctx, &ss.srv)) {
        if (!*t->note) snprintf(t->note, sizeof t->note, "/slots: %s", tq_ctx_error(ctx));
        json_decref(body);
        tq_ctx_free(ctx);
        return;
    }
    t->slot = pin_slot(p, t, asked);
    if (t->slot < 0) {
        snprintf(t->note, sizeof t->note, "slot %ld: the server has no such slot", asked);
        json_decref(body);
        tq_ctx_free(ctx);
        return;
    }
    t->active = 1;
    if (asked < 0) pin_body(r, body, t->slot);
    json_decref(body);
    t->have = slot_holds(r, ctx, t->slot);
    tq_slot_restored rep = {0};
    double t0 = tq_slot_now();
    if (t->n >= TQ_STORE_STRIDE && !prepare_in_time(r, &rep)) {
        tq_slot_session mine = session_of(r);
        tq_status st = tq_slot_restore_apply(ctx, &mine, t->slot, &rep);
        if (st == TQ_ERR_IO && learn_types(r, ctx) && !prepare_in_time(r, &rep)) {
            mine = session_of(r);
            st = tq_slot_restore_apply(ctx, &mine, t->slot, &rep);
        }
        if (st) snprintf(t->note, sizeof t->note, "the restore: %s", tq_ctx_error(ctx));
        t->restored = rep.point;
        snprintf(t->restored_from, sizeof t->restored_from, "%s", rep.name);
    }
    t->restore_s = tq_slot_now() - t0;
    pthread_mutex_lock(&p->lock);
    p->m.prompt_tokens += t->n;
    if (t->restored) p->m.hits++;
    if (!t->restored && t->have < TQ_STORE_STRIDE) p->m.misses++;
    p->m.tokens_restored += t->restored;
    p->m.restore_s += t->restore_s;
    pthread_mutex_unlock(&p->lock);
    save_prompt_end(r, ctx, t->restored ? t->restored : t->have);
    tq_ctx_free(ctx);
}

void proxy_turn_scan(proxy_turn *t, const char *p, size_t n)
{
    /* a byte at a time, the state kept between reads: the key or its number may be cut
     * between two of them, and a read is not a string (no terminating NUL) */
    static const char key[] = "\"prompt_n\":";
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (t->scan_number && c >= '0' && c <= '9') {
            if (t->scan_value < 1000000000L) t->scan_value = t->scan_value * 10 + (c - '0');
            t->scan_digits++;
            continue;
        }
        if (t->scan_number && c == ' ' && !t->scan_digits) continue;
        if (t->scan_number && t->scan_digits) t->prompt_n = t->scan_value;
        t->scan_number = 0;
        t->scan_value = 0;
        t->scan_digits = 0;
        if (c == key[t->scan_matched]) {
            t->scan_matched++;
        } else {
            t->scan_matched = c == key[0]; /* '"' is the key's only repeated prefix */
        }
        if (t->scan_matched == sizeof key - 1) {
            t->scan_number = 1;
            t->scan_matched = 0;
        }
    }
}

/* After a kept generation: the slot's raw save (the only step that holds the slot), queued
 * for the store; what the slot holds recorded. */
static void save_after(proxy_req *r, tq_ctx *ctx)
{
    tq_proxy *p = r->p;
    proxy_turn *t = &r->turn;
    tq_slot_session ss = session_of(r);
    llama_server_slot_state *s = NULL;
    uint32_t n = 0;
    long id_task = -1;
    uint32_t cells = 0;
    int asked = llama_server_slots(ctx, &ss.srv, &s, &n) == TQ_OK;
    if (!asked) proxy_log(p, "slot %ld: not saved: %s", t->slot, tq_ctx_error(ctx));
    for (uint32_t i = 0; i < n; i++)
        if (s[i].id == t->slot) {
            id_task = s[i].id_task;
            cells = s[i].n_tokens;
        }
    free(s);
    pthread_mutex_lock(&p->lock);
    proxy_slot *k = &p->slots[t->slot];
    free(k->tokens);
    k->tokens = t->tokens; /* the prompt: a prefix of what the slot holds */
    k->n_tokens = t->n < cells ? t->n : cells;
    k->id_task = id_task;
    k->n_cells = cells;
    t->tokens = NULL;
    pthread_mutex_unlock(&p->lock);
    if (asked && cells < p->cfg.min_tokens)
        proxy_log(p, "slot %ld: not kept: %u tokens, under --min-tokens %u", t->slot, cells,
                  p->cfg.min_tokens);
    if (asked && cells >= p->cfg.min_tokens) save_and_queue(r, ctx, &ss, id_task, "not saved");
}

void proxy_turn_end(proxy_req *r, int completed)
{
    tq_proxy *p = r->p;
    proxy_turn *t = &r->turn;
    double took = tq_slot_now() - r->t0;
    if (t->active && completed) {
        tq_ctx *ctx = tq_ctx_new();
        if (ctx) save_after(r, ctx);
        tq_ctx_free(ctx);
    }
    if (t->active) {
        pthread_mutex_lock(&p->lock);
        proxy_slot *k = &p->slots[t->slot];
        if (!completed) k->id_task = -1; /* cut short: what it holds is not known */
        k->busy = 0;
        k->used = tq_slot_now();
        if (t->prompt_n >= 0) p->m.prompt_tokens_processed += (uint64_t)t->prompt_n;
        p->m.prompt_tokens_processed += t->prefilled;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    char processed[32] = "?"; /* an answer cut short says nothing */
    if (t->prompt_n >= 0) snprintf(processed, sizeof processed, "%ld", t->prompt_n + t->prefilled);
    if (t->active)
        proxy_log(p, "%s %ld slot %ld: prompt %u tokens, held %u, restored %u%s%s (%.3f s), "
                     "server processed %s (%u of them for the prompt's end), %.2f s%s%s%s",
                  r->uri, r->status, t->slot, t->n, t->have, t->restored,
                  *t->restored_from ? " from " : "", t->restored_from, t->restore_s, processed,
                  t->prefilled, took, completed ? "" : ", cut short", *t->note ? "; " : "",
                  t->note);
    else
        proxy_log(p, "%s %ld, %.2f s%s%s", r->uri, r->status, took, *t->note ? "; " : "",
                  t->note);
    free(t->tokens);
    t->tokens = NULL;
}
