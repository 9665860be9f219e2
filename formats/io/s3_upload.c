/* s3_upload.c - an upload to an object (s3.h): one PUT when small, else a multipart upload
 * whose parts go out on threads of their own as they fill. */
#include "s3_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A multipart upload's part size (S3 wants 5 MiB at least but the last, 10,000 parts at
 * most: the size doubles every 1,000 parts), the parts in memory at once (filling, queued and
 * going out) and the threads that send them. */
enum { S3_PART = 8 << 20, S3_PARTS_HELD = 4, S3_SENDERS = 2 };
typedef struct s3_part {
    int number;
    uint8_t *p;
    uint64_t n;
    struct s3_part *next;
} s3_part;

struct tq_s3_upload {
    tq_s3 *s;
    uint8_t *cur; /* [part_size]: the part being filled */
    uint64_t cur_len, part_size, total;
    int n_parts; /* numbered so far */
    char upload_id[256];
    pthread_mutex_t mu;
    pthread_cond_t moved;
    s3_part *queue, *queue_tail;
    int held;     /* parts queued or going out */
    char **etags; /* [n_parts] */
    int etags_cap;
    int stop, senders;
    pthread_t sender[S3_SENDERS];
    tq_status st;
    char err[600];
};

static void upload_fail(tq_s3_upload *u, tq_status st, const char *msg)
{
    if (u->st) return;
    u->st = st;
    snprintf(u->err, sizeof u->err, "%s", msg);
}

static tq_status send_part(tq_ctx *ctx, tq_s3_upload *u, CURL *h, const s3_part *pt, char *etag,
                           size_t cap)
{
    char *id = curl_easy_escape(h, u->upload_id, 0);
    char *q = id ? s3_dup_printf("partNumber=%d&uploadId=%s", pt->number, id) : NULL;
    s3_req r = {.method = "PUT", .query = q, .body = pt->p, .body_len = pt->n, .h = h};
    tq_status st = q ? s3_call(ctx, u->s, &r) : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "no memory");
    s3_req_done(&r);
    if (!st && !r.etag[0])
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: part %d: no ETag in the answer", u->s->url,
                              pt->number);
    snprintf(etag, cap, "%s", r.etag);
    curl_free(id);
    free(q);
    return st;
}

static void *sender_main(void *user)
{
    tq_s3_upload *u = user;
    tq_ctx *ctx = tq_ctx_new();
    CURL *h = curl_easy_init();
    char etag[128];
    for (;;) {
        pthread_mutex_lock(&u->mu);
        while (!u->queue && !u->stop) pthread_cond_wait(&u->moved, &u->mu);
        s3_part *pt = u->queue;
        if (pt) u->queue = pt->next;
        int failed = u->st != TQ_OK;
        pthread_mutex_unlock(&u->mu);
        if (!pt) break;
        tq_status st = TQ_ERR_NOMEM;
        if (!failed && ctx && h) st = send_part(ctx, u, h, pt, etag, sizeof etag);
        pthread_mutex_lock(&u->mu);
        if (st && !failed) upload_fail(u, st, ctx ? tq_ctx_error(ctx) : "out of memory");
        if (!st) u->etags[pt->number - 1] = strdup(etag);
        if (!st && !u->etags[pt->number - 1]) upload_fail(u, TQ_ERR_NOMEM, "out of memory");
        u->held--;
        pthread_cond_broadcast(&u->moved);
        pthread_mutex_unlock(&u->mu);
        free(pt->p);
        free(pt);
    }
    if (h) curl_easy_cleanup(h);
    tq_ctx_free(ctx);
    return NULL;
}

tq_status tq_s3_upload_begin(tq_ctx *ctx, tq_s3 *s, tq_s3_upload **out)
{
    tq_s3_upload *u = calloc(1, sizeof *u);
    *out = NULL;
    if (!u || !(u->cur = malloc(S3_PART))) {
        free(u);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    u->s = s;
    u->part_size = S3_PART;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->moved, NULL);
    *out = u;
    return TQ_OK;
}

/* The multipart upload's id (POST ?uploads=), and its senders. */
static tq_status initiate(tq_ctx *ctx, tq_s3_upload *u)
{
    xml_pick x;
    s3_req r = {.method = "POST", .query = "uploads="};
    uint8_t *answer = malloc(65536);
    r.buf = answer;
    r.cap = 65535;
    tq_status st = answer ? s3_call(ctx, u->s, &r) : TQ_ERR_NOMEM;
    s3_req_done(&r);
    if (!st) s3_xml_read((const char *)answer, r.got, &x);
    free(answer);
    if (st) return st;
    if (!x.upload_id[0])
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: no UploadId in the answer", u->s->url);
    snprintf(u->upload_id, sizeof u->upload_id, "%s", x.upload_id);
    for (; u->senders < S3_SENDERS; u->senders++)
        if (pthread_create(&u->sender[u->senders], NULL, sender_main, u))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "cannot start a thread");
    return TQ_OK;
}

/* The part filled so far, queued for a sender once fewer than S3_PARTS_HELD are held. */
static tq_status queue_part(tq_ctx *ctx, tq_s3_upload *u)
{
    s3_part *pt = calloc(1, sizeof *pt);
    tq_status st = TQ_OK;
    if (!pt) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (u->n_parts == u->etags_cap) {
        int cap = u->etags_cap ? 2 * u->etags_cap : 64;
        char **e = realloc(u->etags, cap * sizeof *e);
        if (!e) {
            free(pt);
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        }
        memset(e + u->etags_cap, 0, (cap - u->etags_cap) * sizeof *e);
        u->etags = e;
        u->etags_cap = cap;
    }
    pt->number = ++u->n_parts;
    pt->p = u->cur;
    pt->n = u->cur_len;
    pthread_mutex_lock(&u->mu);
    while (u->held >= S3_PARTS_HELD - 1 && !u->st) pthread_cond_wait(&u->moved, &u->mu);
    if (u->st) {
        st = tq_ctx_set_error(ctx, u->st, "%s", u->err);
        free(pt->p);
        free(pt);
    } else {
        if (u->queue)
            u->queue_tail->next = pt;
        else
            u->queue = pt;
        u->queue_tail = pt;
        u->held++;
        pthread_cond_broadcast(&u->moved);
    }
    pthread_mutex_unlock(&u->mu);
    u->cur = NULL;
    u->cur_len = 0;
    if (!st && u->n_parts % 1000 == 0 && u->part_size < (1ull << 30)) u->part_size *= 2;
    if (!st && !(u->cur = malloc(u->part_size)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    return st;
}

tq_status tq_s3_upload_write(tq_ctx *ctx, tq_s3_upload *u, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    while (n) {
        uint64_t k = u->part_size - u->cur_len < n ? u->part_size - u->cur_len : n;
        memcpy(u->cur + u->cur_len, b, k);
        u->cur_len += k;
        u->total += k;
        b += k;
        n -= k;
        if (u->cur_len < u->part_size) break;
        tq_status st = u->upload_id[0] ? TQ_OK : initiate(ctx, u);
        if (!st) st = queue_part(ctx, u);
        if (st) return st;
    }
    return TQ_OK;
}

/* Waits for the senders to empty the queue, and stops them. */
static void senders_stop(tq_s3_upload *u)
{
    pthread_mutex_lock(&u->mu);
    while (u->held && !u->st) pthread_cond_wait(&u->moved, &u->mu);
    u->stop = 1;
    pthread_cond_broadcast(&u->moved);
    pthread_mutex_unlock(&u->mu);
    for (int i = 0; i < u->senders; i++) pthread_join(u->sender[i], NULL);
    u->senders = 0;
}

static void upload_free(tq_s3_upload *u)
{
    for (s3_part *pt = u->queue; pt;) {
        s3_part *next = pt->next;
        free(pt->p);
        free(pt);
        pt = next;
    }
    for (int i = 0; i < u->etags_cap; i++) free(u->etags[i]);
    free(u->etags);
    free(u->cur);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->moved);
    free(u);
}

/* CompleteMultipartUpload's body: the parts' numbers and ETags. */
static char *complete_body(const tq_s3_upload *u, size_t *len)
{
    size_t cap = 128 + (size_t)u->n_parts * 200;
    char *b = malloc(cap);
    size_t n = 0;
    if (!b) return NULL;
    n += snprintf(b + n, cap - n, "<CompleteMultipartUpload>");
    for (int i = 0; i < u->n_parts; i++)
        n += snprintf(b + n, cap - n, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
                      i + 1, u->etags[i]);
    n += snprintf(b + n, cap - n, "</CompleteMultipartUpload>");
    *len = n;
    return b;
}

static tq_status complete(tq_ctx *ctx, tq_s3_upload *u)
{
    size_t len = 0;
    xml_pick x;
    char *body = complete_body(u, &len);
    char *id = curl_easy_escape(u->s->h, u->upload_id, 0);
    char *q = id ? s3_dup_printf("uploadId=%s", id) : NULL;
    uint8_t *answer = malloc(65536);
    s3_req r = {.method = "POST",
                .query = q,
                .body = (const uint8_t *)body,
                .body_len = len,
                .buf = answer,
                .cap = 65535};
    tq_status st = body && q && answer ? s3_call(ctx, u->s, &r) : TQ_ERR_NOMEM;
    s3_req_done(&r);
    /* S3 may answer 200 and then report an error in the body */
    if (!st) s3_xml_read((const char *)answer, r.got, &x);
    if (!st && x.code[0])
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: completing the upload: %s: %s", u->s->url,
                              x.code, x.message);
    if (st == TQ_ERR_NOMEM && !(body && q && answer))
        tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    free(answer);
    free(body);
    free(q);
    curl_free(id);
    return st;
}

/* DELETE ?uploadId=: the parts go, no object appears. */
static void abort_upload(tq_s3_upload *u)
{
    tq_ctx *ctx = tq_ctx_new();
    char *id = curl_easy_escape(u->s->h, u->upload_id, 0);
    char *q = id ? s3_dup_printf("uploadId=%s", id) : NULL;
    s3_req r = {.method = "DELETE", .query = q};
    if (ctx && q) s3_call(ctx, u->s, &r);
    s3_req_done(&r);
    free(q);
    curl_free(id);
    tq_ctx_free(ctx);
}

tq_status tq_s3_upload_commit(tq_ctx *ctx, tq_s3_upload *u)
{
    tq_status st = TQ_OK;
    if (!u->upload_id[0]) { /* small: one PUT */
        s3_req r = {.method = "PUT", .body = u->cur, .body_len = u->cur_len};
        st = s3_call(ctx, u->s, &r);
        s3_req_done(&r);
        upload_free(u);
        return st;
    }
    if (u->cur_len) st = queue_part(ctx, u);
    senders_stop(u);
    if (!st && u->st) st = tq_ctx_set_error(ctx, u->st, "%s", u->err);
    if (!st) st = complete(ctx, u);
    if (st) abort_upload(u);
    upload_free(u);
    return st;
}

void tq_s3_upload_abort(tq_s3_upload *u)
{
    if (!u) return;
    pthread_mutex_lock(&u->mu);
    upload_fail(u, TQ_ERR_IO, "aborted");
    pthread_mutex_unlock(&u->mu);
    senders_stop(u);
    if (u->upload_id[0]) abort_upload(u);
    upload_free(u);
}
