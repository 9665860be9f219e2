/* s3_impl.h - what s3.c (requests, reads) and s3_upload.c (writes) share; not an API. */
#ifndef TQ_S3_IMPL_H
#define TQ_S3_IMPL_H

#include "s3.h"

#include <curl/curl.h>
#include <time.h>
#include <stddef.h>

struct tq_s3 {
    char *url;      /* s3://bucket/key as given */
    char *bucket;   /* for messages */
    char *http_url; /* the object's https:// (or http://) address */
    char *endpoint; /* for messages */
    char *sigv4;    /* "aws:amz:REGION:s3" */
    char *userpwd;  /* "KEY:SECRET" */
    char *token;    /* "x-amz-security-token: ..." or NULL */
    char etag[128]; /* the object's, once a read has seen it: later reads are If-Match */
    CURL *h;        /* the caller's thread's handle: its connection is kept */
    uint64_t in, out;
    int missing;    /* the last request failed for want of the object (404, not the bucket) */
};

typedef struct s3_req {
    const char *method; /* GET, HEAD, PUT, POST, DELETE */
    const char *query;  /* the query string ("uploads=", ...), NULL for none */
    uint64_t off, n;    /* GET: Range bytes off..off+n-1 when n */
    int whole;          /* GET of the whole object (n 0): a retry resumes with bytes=got- */
    const uint8_t *body;
    uint64_t body_len;
    int if_match; /* the object's ETag must be the one seen */
    int empty_ok; /* a 416 answer (no byte at off 0: an empty object) is an answer */
    /* a 2xx answer's body: into buf (cap bytes at most), else to sink (0 stops the transfer) */
    uint8_t *buf;
    uint64_t cap;
    int (*sink)(void *user, const uint8_t *p, size_t n);
    void *user;
    /* the answer */
    CURL *h;
    long status;
    uint64_t got;  /* 2xx body bytes taken, over every attempt (a retry resumes after them) */
    uint64_t sent; /* of body, this attempt */
    uint64_t total;  /* the object's size: Content-Range's, else a whole answer's length */
    int cancelled;  /* the sink stopped it */
    char etag[128]; /* of this answer */
    long retry_after_s; /* the answer's Retry-After (seconds), -1 when none */
    struct timespec moved; /* when a byte last went either way, this attempt */
    curl_off_t seen_down, seen_up;
    int stalled; /* given up: no byte for the stall limit (retried) */
    time_t server_date; /* the answer's Date, 0 when none */
    char *err;      /* a non-2xx answer's body, at most 16 KiB */
    size_t err_len;
    CURLcode cc;
    char curl_err[CURL_ERROR_SIZE];
    tq_s3 *s;
} s3_req;

typedef struct xml_pick {
    char code[64], message[256], upload_id[256];
    char *into; /* the field being read, NULL if none */
    size_t cap, len;
    int depth;
} xml_pick;

char *s3_dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* r on r->h (the object's own handle when NULL), retried as S3 clients retry (S3.md); a
 * retried GET resumes after the bytes it has. */
tq_status s3_call(tq_ctx *ctx, tq_s3 *s, s3_req *r);
void s3_req_done(s3_req *r);
/* The error code, message and upload id an answer's XML holds (empty where it has none). */
void s3_xml_read(const char *body, size_t n, xml_pick *x);

#endif
