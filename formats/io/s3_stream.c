/* s3_stream.c - a streamed GET (s3.h, tq_s3_stream_*): one request's body read by a thread of
 * its own into a ring the reader drains, so that a pipe-like reader never waits on a round
 * trip per read; the requests themselves are s3.c's. */
#include "s3_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A streamed GET's buffer between its thread and the reader. */
enum { S3_RING = 8 << 20 };

struct tq_s3_stream {
    tq_s3 *s;
    uint64_t off, n;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t moved;
    uint8_t *ring; /* [S3_RING] */
    size_t head, len;
    int done, cancel;
    tq_status st;
    char err[600];
};

static int stream_push(void *user, const uint8_t *p, size_t n)
{
    tq_s3_stream *st = user;
    pthread_mutex_lock(&st->mu);
    while (n && !st->cancel) {
        while (st->len == S3_RING && !st->cancel) pthread_cond_wait(&st->moved, &st->mu);
        size_t tail = (st->head + st->len) % S3_RING;
        size_t room = S3_RING - st->len;
        size_t k = n < room ? n : room;
        if (k > S3_RING - tail) k = S3_RING - tail;
        memcpy(st->ring + tail, p, k);
        st->len += k;
        p += k;
        n -= k;
        pthread_cond_broadcast(&st->moved);
    }
    int go_on = !st->cancel;
    pthread_mutex_unlock(&st->mu);
    return go_on;
}

static void *stream_main(void *user)
{
    tq_s3_stream *st = user;
    tq_ctx *ctx = tq_ctx_new();
    CURL *h = curl_easy_init();
    int whole = st->n == UINT64_MAX;
    s3_req r = {.method = "GET",
                .off = st->off,
                .n = whole ? 0 : st->n,
                .whole = whole,
                .if_match = 1,
                .sink = stream_push,
                .user = st,
                .h = h};
    tq_status s = ctx && h ? s3_call(ctx, st->s, &r) : TQ_ERR_NOMEM;
    s3_req_done(&r);
    if (!s && r.status != 206 && !(whole && r.status == 200))
        s = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the server ignored a byte range", st->s->url);
    if (!s && r.got != (whole ? r.total : st->n))
        s = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the answer ended early", st->s->url);
    pthread_mutex_lock(&st->mu);
    st->st = s;
    snprintf(st->err, sizeof st->err, "%s", s && ctx ? tq_ctx_error(ctx) : "out of memory");
    st->done = 1;
    pthread_cond_broadcast(&st->moved);
    pthread_mutex_unlock(&st->mu);
    if (h) curl_easy_cleanup(h);
    tq_ctx_free(ctx);
    return NULL;
}

tq_status tq_s3_stream_open(tq_ctx *ctx, tq_s3 *s, uint64_t off, uint64_t n, tq_s3_stream **out)
{
    tq_s3_stream *st = calloc(1, sizeof *st);
    *out = NULL;
    if (!st || !(st->ring = malloc(S3_RING))) {
        free(st);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    st->s = s;
    st->off = off;
    st->n = n;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->moved, NULL);
    if (!n) {
        st->done = 1;
    } else if (pthread_create(&st->thread, NULL, stream_main, st)) {
        free(st->ring);
        free(st);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "cannot start a thread");
    }
    *out = st;
    return TQ_OK;
}

tq_status tq_s3_stream_read(tq_ctx *ctx, tq_s3_stream *st, void *buf, uint64_t n, uint64_t *got)
{
    *got = 0;
    pthread_mutex_lock(&st->mu);
    while (!st->len && !st->done) pthread_cond_wait(&st->moved, &st->mu);
    if (st->len) {
        size_t k = n < st->len ? n : st->len;
        if (k > S3_RING - st->head) k = S3_RING - st->head;
        memcpy(buf, st->ring + st->head, k);
        st->head = (st->head + k) % S3_RING;
        st->len -= k;
        *got = k;
        pthread_cond_broadcast(&st->moved);
    }
    tq_status s = !*got && st->st ? tq_ctx_set_error(ctx, st->st, "%s", st->err) : TQ_OK;
    pthread_mutex_unlock(&st->mu);
    return s;
}

void tq_s3_stream_close(tq_s3_stream *st)
{
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    st->cancel = 1;
    pthread_cond_broadcast(&st->moved);
    int started = st->n != 0;
    pthread_mutex_unlock(&st->mu);
    if (started) pthread_join(st->thread, NULL);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->moved);
    free(st->ring);
    free(st);
}

