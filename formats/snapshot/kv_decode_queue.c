/* kv_decode_queue.c - the decode's pipeline (kv_decode_jobs.h): chunks decoded over threads,
 * written in file order by one, memory bounded by a window of chunks. */
#include "kv_chunk.h"
#include "kv_decode_jobs.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* The pipeline.  Every thread takes the next chunk nobody has taken (in
 * file order) and decodes it; thread 0 also writes, in file order, each
 * chunk as soon as it is done.  A chunk is taken only within WINDOW chunks
 * of the first one not yet written, or when it belongs to the tensor being
 * written (a transposed V is written whole), so memory stays bounded.
 * Decoding the 24,576-token Gemma session into a file (2 cores) this takes
 * 0.44 s where per-tensor tasks (a barrier after each tensor, the writer a
 * tensor behind) took 0.47 s, medians of 7 interleaved runs, and holds 29
 * MB at its peak where they held 42 (two tensors' rows). */
enum { WINDOW = 16 };

typedef struct dqueue {
    const tq_ctx *ctx;
    const tqkv_reader *r, *base;
    const tq_kvsnap_decode_options *o;
    djob *jobs;        /* [n_tensors] */
    uint32_t *job_of;  /* [n]: the tensor of each chunk, in file order */
    uint64_t *first;   /* [n_tensors + 1]: each tensor's first chunk */
    uint8_t *done;     /* [n]: decoded (atomic) */
    uint64_t n;        /* chunks in all */
    uint64_t next;     /* the next chunk to take (atomic) */
    uint64_t written;  /* chunks written (atomic) */
    int stop;          /* the writer gave up (atomic) */
    pthread_mutex_t mu; /* with moved: sleep until a chunk is done or written */
    pthread_cond_t moved;
} dqueue;

/* Waiting threads sleep (a spinning or yielding thread took 0.3-1.7 s of
 * system time on the 24,576-token session while the writer was slow). */
static void wake(dqueue *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->moved);
    pthread_mutex_unlock(&q->mu);
}

/* Sleeps until another thread calls wake, or 1 ms (a wake between this
 * thread's test and its sleep is not lost for longer). */
static void wait_moved(dqueue *q)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&q->mu);
    pthread_cond_timedwait(&q->moved, &q->mu, &until);
    pthread_mutex_unlock(&q->mu);
}

/* The next chunk to decode; n when none is left, n + 1 when none may be
 * taken yet. */
static uint64_t take(dqueue *q)
{
    uint64_t g = __atomic_load_n(&q->next, __ATOMIC_RELAXED);
    for (;;) {
        if (g >= q->n || __atomic_load_n(&q->stop, __ATOMIC_RELAXED)) return q->n;
        uint64_t w = __atomic_load_n(&q->written, __ATOMIC_ACQUIRE);
        if (g >= w + WINDOW && (w >= q->n || q->job_of[g] != q->job_of[w])) return q->n + 1;
        if (__atomic_compare_exchange_n(&q->next, &g, g + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return g;
    }
}

/* Whether chunk g (file order) is left out: past the token prefix or outside the layers. */
static int chunk_skipped(const dqueue *q, uint64_t g)
{
    const djob *j = &q->jobs[q->job_of[g]];
    uint64_t k = g - q->first[q->job_of[g]];
    const tqkv_reader *from = k < j->nb ? q->base : q->r;
    uint64_t at = k < j->nb ? j->bfirst + k : j->first + k - j->nb;
    const tqkv_chunk *ch = tqkv_chunk_at(from, at);
    const tq_kvsnap_decode_options *o = q->o;
    uint32_t layer = tq_kvdec_layer_of(j->t);
    if (o->layer_hi && (layer < o->layer_lo || layer >= o->layer_hi)) return 1;
    if (tq_kvdec_job_is_moved(j)) /* every row of its own; the base's it takes */
        return k < j->nb && (ch->row0 + ch->nrows <= j->t->base_from ||
                             ch->row0 >= j->t->base_from + j->t->row_start);
    return o->max_rows && ch->row0 >= o->max_rows && !j->t->transposed;
}

/* A streamed snapshot's pass: the chunks of its own the decode will read. */
static tq_status plan_fetches(tq_ctx *ctx, const dqueue *q)
{
    if (!tqkv_streamed(q->r)) return TQ_OK;
    uint64_t n = tqkv_n_chunks(q->r);
    uint8_t *wanted = calloc(n ? n : 1, 1); /* [n]: by the snapshot's chunk */
    if (!wanted) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t g = 0; g < q->n; g++) {
        const djob *j = &q->jobs[q->job_of[g]];
        uint64_t k = g - q->first[q->job_of[g]];
        if (k >= j->nb) wanted[j->first + k - j->nb] = !chunk_skipped(q, g);
    }
    tq_status st = tqkv_fetch_plan(ctx, q->r, wanted);
    free(wanted);
    return st;
}

static void decode_one(dqueue *q, uint64_t g)
{
    djob *j = &q->jobs[q->job_of[g]];
    uint64_t k = g - q->first[q->job_of[g]];
    const tqkv_reader *from = k < j->nb ? q->base : q->r;
    uint64_t at = k < j->nb ? j->bfirst + k : j->first + k - j->nb;
    int skip = chunk_skipped(q, g);
    tq_ctx *local, *dev;
    if (!chunk_ctxs(q->ctx, &local, &dev)) {
        j->co[k].st = TQ_ERR_NOMEM;
        snprintf(j->co[k].err, sizeof j->co[k].err, "out of memory");
    } else if (!skip && (j->co[k].st = tqkv_chunk_fetch(local, from, at))) {
        snprintf(j->co[k].err, sizeof j->co[k].err, "%s", tq_ctx_error(local));
    } else {
        const tqkv_chunk *ch = tqkv_chunk_at(from, at);
        /* coarse by the record of the snapshot the chunk is in */
        int coarse = tqkv_chunk_is_coarse(from == q->base ? j->bt : j->t, ch->row0);
        const tqkv_record *fine = from == q->base ? &j->base_fine : j->t;
        const tqkv_record *coarse_rec = from == q->base ? &j->base_coarse : &j->coarse;
        const tqkv_record *rec = coarse ? coarse_rec : fine;
        const tq_codec *c = coarse ? j->c_coarse : j->c;
        tq_kvdec_decode_chunk(from, rec, c, j, at, skip, local, dev, &j->co[k]);
    }
    tqkv_chunk_release(from, at);
    chunk_ctxs_free(local, dev);
    __atomic_store_n(&q->done[g], 1, __ATOMIC_RELEASE);
    wake(q);
}

/* Writes every chunk that is done, in order, from the first not written;
 * 1 when it wrote any.  A tensor's skeleton goes out before its first
 * chunk, a whole tensor once its last chunk is done. */
static int write_ready(tq_ctx *ctx, dqueue *q, FILE *out, uint64_t *pos, uint64_t *sk,
                       uint64_t *done_bytes, tq_status *st)
{
    const tqkv_meta *m = tqkv_meta_of(q->r);
    int wrote = 0;
    for (uint64_t w = q->written; w < q->n && !*st; w = q->written) {
        uint32_t i = q->job_of[w];
        djob *j = &q->jobs[i];
        uint64_t last = q->first[i + 1] - 1;
        uint64_t ready = tq_kvdec_job_is_whole(j) ? last : w;
        if (!__atomic_load_n(&q->done[ready], __ATOMIC_ACQUIRE)) break;
        if (w == q->first[i]) *st = tq_kvdec_job_begin(ctx, m, j, out, pos, sk);
        if (!*st && tq_kvdec_job_is_whole(j)) {
            for (uint64_t g = w; g <= last; g++) /* decoded before last: taken in order */
                while (!__atomic_load_n(&q->done[g], __ATOMIC_ACQUIRE)) wait_moved(q);
            *st = tq_kvdec_job_write_whole(ctx, q->r, q->base, j, out);
            w = last;
        } else if (!*st) {
            uint64_t k = w - q->first[i];
            *st = tq_kvdec_chunk_status(ctx, j, k);
            if (!*st) *st = tq_kvdec_put(ctx, out, j->co[k].p, j->co[k].len);
            free(j->co[k].p);
            j->co[k].p = NULL;
        }
        if (!*st && w == last) {
            tq_kvdec_job_free(j);
            *done_bytes += j->t->bytes;
            uint64_t total = m->source_size - m->skeleton_len;
            if (q->o->on_progress) q->o->on_progress(q->o->progress_user, *done_bytes, total);
        }
        __atomic_store_n(&q->written, w + 1, __ATOMIC_RELEASE);
        wrote = 1;
    }
    if (*st) __atomic_store_n(&q->stop, 1, __ATOMIC_RELEASE);
    if (wrote || *st) wake(q);
    return wrote;
}

static void queue_free(dqueue *q, uint32_t n_jobs)
{
    for (uint32_t i = 0; q->jobs && i < n_jobs; i++) tq_kvdec_job_free(&q->jobs[i]);
    free(q->jobs);
    free(q->job_of);
    free(q->first);
    free(q->done);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->moved);
}

/* Every tensor's job (its codecs and chunk list) and the chunks in file
 * order. */
static tq_status queue_setup(tq_ctx *ctx, const tqkv_meta *m, tq_type_profile prof,
                             const tq_ggml_type *const want[2], int out_prof, dqueue *q)
{
    tq_status st = TQ_OK;
    uint64_t ck = 0;
    q->jobs = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *q->jobs);
    q->first = calloc(m->n_tensors + 1, sizeof *q->first);
    if (!q->jobs || !q->first) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->n_tensors && !st; i++) {
        st = tq_kvdec_job_setup(ctx, m, prof, want, out_prof, q->r, q->base, i, q->o->head_dim,
                                &ck, &q->jobs[i]);
        q->first[i + 1] = q->first[i] + q->jobs[i].nch;
    }
    if (st) return st;
    q->n = q->first[m->n_tensors];
    q->job_of = malloc((q->n ? q->n : 1) * sizeof *q->job_of);
    q->done = calloc(q->n ? q->n : 1, 1);
    if (!q->job_of || !q->done) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->n_tensors; i++)
        for (uint64_t g = q->first[i]; g < q->first[i + 1]; g++) q->job_of[g] = i;
    return TQ_OK;
}

/* Every tensor's chunks decoded over threads and written in file order, then the skeleton's
 * tail. */
tq_status tq_kvdec_run(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                       const tq_kvsnap_decode_options *o, tq_type_profile prof,
                       const tq_ggml_type *const want[2], int out_prof, FILE *out)
{
    const tqkv_meta *m = tqkv_meta_of(r);
    tq_status st;
    dqueue q = {.ctx = ctx, .r = r, .base = base, .o = o};
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.moved, NULL);
    if ((st = queue_setup(ctx, m, prof, want, (int)out_prof, &q)) || (st = plan_fetches(ctx, &q))) {
        queue_free(&q, m->n_tensors);
        return st;
    }
    uint64_t pos = 0, sk = 0, done_bytes = 0;
    int threads = o->threads > 0 ? o->threads : tq_ctx_threads(ctx);
#pragma omp parallel num_threads(threads)
    {
        int writer = omp_get_thread_num() == 0;
        for (;;) {
            int wrote = writer && write_ready(ctx, &q, out, &pos, &sk, &done_bytes, &st);
            if (writer && (st || q.written == q.n)) break;
            uint64_t g = take(&q);
            if (g < q.n)
                decode_one(&q, g);
            else if (g == q.n && !writer)
                break;
            else if (!wrote)
                wait_moved(&q); /* the window is full, or the next chunk is another's */
        }
    }
    queue_free(&q, m->n_tensors);
    if (!st) st = tq_kvdec_put(ctx, out, m->skeleton + sk, m->skeleton_len - sk);
    if (!st) st = tqkv_finish(ctx, r); /* a pipe: the rest read, the index and trailer checked */
    return st;
}
