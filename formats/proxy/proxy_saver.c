/* proxy_saver.c - the slot files the server wrote, encoded into the store by a thread of their
 * own, in the order they were saved (a prompt's end before the answer that extends it), off
 * every request's path; --max-size keeps the store under its size after each. */
#include "proxy_impl.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What the thread learned of a slot: the tokens it held when saved, if it is still so. */
static void record_tokens(tq_proxy *p, const proxy_job *j, tq_slot_saved *rep)
{
    if (j->id_task < 0 || !rep->tokens) return;
    pthread_mutex_lock(&p->lock);
    proxy_slot *k = &p->slots[j->slot];
    if (k->id_task == j->id_task && !k->busy && rep->n_tokens >= k->n_tokens) {
        free(k->tokens);
        k->tokens = rep->tokens;
        k->n_tokens = rep->n_tokens;
        rep->tokens = NULL;
    }
    pthread_mutex_unlock(&p->lock);
}

/* The names gc evicts, in the log: an operator (and the pool test) tells an evicted session
 * from a lost one. */
static void log_evicted(void *user, const char *name)
{
    proxy_log(user, "the store's gc: evicted %s", name);
}

static void store_one(tq_proxy *p, tq_ctx *ctx, proxy_job *j)
{
    tq_slot_saved rep;
    memset(&rep, 0, sizeof rep);
    rep.raw_s = j->raw_s;
    tq_status st = tq_slot_store_raw(ctx, &p->cfg.session, j->path, NULL, &rep);
    if (st) {
        proxy_log(p, "slot %ld: not stored: %s", j->slot, tq_ctx_error(ctx));
    } else {
        proxy_log(p, "slot %ld: saved %u tokens as %s%s%s (%.2f MB%s), raw save %.3f s, "
                     "stored in %.2f s: complete",
                  j->slot, rep.n_tokens, rep.name, *rep.base ? ", a link on " : "", rep.base,
                  rep.bytes / 1e6, rep.already ? ", stored already" : "", rep.raw_s,
                  rep.store_s);
        record_tokens(p, j, &rep);
    }
    pthread_mutex_lock(&p->lock);
    if (st) p->m.errors++;
    if (!st) p->m.saves++;
    p->m.bytes_stored += rep.bytes;
    p->m.save_s += rep.raw_s + rep.store_s;
    pthread_mutex_unlock(&p->lock);
    free(rep.tokens);
    if (!st && p->cfg.max_size) {
        tq_store_gc_report gc;
        if (tq_store_gc(ctx, p->cfg.session.store, p->cfg.max_size, log_evicted, p, &gc))
            proxy_log(p, "the store's gc: %s", tq_ctx_error(ctx));
        else if (gc.evicted)
            proxy_log(p, "the store's gc: %u snapshots evicted, %.2f MB kept", gc.evicted,
                      gc.bytes_after / 1e6);
    }
}

static void *saver_run(void *arg)
{
    tq_proxy *p = arg;
    tq_ctx *ctx = tq_ctx_new();
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->jobs && !p->stopping) pthread_cond_wait(&p->changed, &p->lock);
        proxy_job *j = p->jobs;
        if (!j) break;
        p->jobs = j->next;
        if (!p->jobs) p->jobs_tail = NULL;
        pthread_mutex_unlock(&p->lock);
        if (ctx) store_one(p, ctx, j);
        if (!ctx) unlink(j->path);
        free(j);
#ifdef __GLIBC__
        malloc_trim(0); /* an encode's freed pages back to the system (proxy_http.c) */
#endif
        pthread_mutex_lock(&p->lock);
        p->pending--;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    tq_ctx_free(ctx);
    return NULL;
}

int proxy_saver_start(tq_proxy *p)
{
    return pthread_create(&p->saver, NULL, saver_run, p) ? -1 : 0;
}

int proxy_saver_queue(tq_proxy *p, long slot, long id_task, const char *path, double raw_s)
{
    proxy_job *j = calloc(1, sizeof *j);
    pthread_mutex_lock(&p->lock);
    int refused = !j || p->pending >= PROXY_PENDING_MOST || p->stopping;
    if (refused) p->m.saves_skipped++;
    if (!refused) {
        j->slot = slot;
        j->id_task = id_task;
        j->raw_s = raw_s;
        snprintf(j->path, sizeof j->path, "%s", path);
        if (p->jobs_tail) p->jobs_tail->next = j;
        else p->jobs = j;
        p->jobs_tail = j;
        p->pending++;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    if (refused) {
        proxy_log(p, "slot %ld: not saved: %u saves pending already", slot, PROXY_PENDING_MOST);
        unlink(path);
        free(j);
    }
    return refused ? -1 : 0;
}

void proxy_saver_stop(tq_proxy *p)
{
    double until = tq_slot_now() + p->cfg.drain_s;
    pthread_mutex_lock(&p->lock);
    while (p->pending && tq_slot_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->changed, &p->lock, &ts);
    }
    /* past the bound: the files still queued are removed, not stored */
    proxy_job *left = p->jobs;
    p->jobs = NULL;
    p->jobs_tail = NULL;
    p->stopping = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->saver, NULL);
    while (left) {
        proxy_job *next = left->next;
        proxy_log(p, "slot %ld: not saved: the drain's time ran out", left->slot);
        unlink(left->path);
        free(left);
        left = next;
    }
}
