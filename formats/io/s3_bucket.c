/* s3_bucket.c - what a store asks of a bucket beside single objects (s3.h): a listing of the
 * keys under a prefix (ListObjectsV2) and a deletion. */
#define _GNU_SOURCE /* strndup */
#include "s3_impl.h"

#include <curl/curl.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tq_s3_missing(const tq_s3 *s) { return s->missing; }

tq_status tq_s3_delete(tq_ctx *ctx, tq_s3 *s)
{
    s3_req r = {.method = "DELETE"};
    tq_status st = s3_call(ctx, s, &r);
    s3_req_done(&r);
    if (st && s->missing) return TQ_OK; /* S3 answers 204 either way; radosgw may say 404 */
    return st;
}

/* One page of a listing: each Contents' Key and Size, IsTruncated, NextContinuationToken. */
typedef struct list_page {
    size_t skip; /* the prefix's length, cut off each key */
    int (*cb)(void *user, const char *name, uint64_t size);
    void *user;
    char text[1100]; /* the element being read */
    size_t len;
    char key[1100];
    uint64_t size;
    int in_contents, in_prefixes, truncated, stop;
    char next[1100];
} list_page;

static void XMLCALL page_start(void *user, const XML_Char *name, const XML_Char **attrs)
{
    list_page *p = user;
    (void)attrs;
    p->len = 0;
    p->text[0] = 0;
    if (!strcmp(name, "Contents")) {
        p->in_contents = 1;
        p->key[0] = 0;
        p->size = 0;
    }
    if (!strcmp(name, "CommonPrefixes")) p->in_prefixes = 1;
}

static void XMLCALL page_text(void *user, const XML_Char *s, int n)
{
    list_page *p = user;
    size_t k = (size_t)n < sizeof p->text - 1 - p->len ? (size_t)n : sizeof p->text - 1 - p->len;
    memcpy(p->text + p->len, s, k);
    p->len += k;
    p->text[p->len] = 0;
}

static void XMLCALL page_end(void *user, const XML_Char *name)
{
    list_page *p = user;
    if (p->in_contents && !strcmp(name, "Key")) snprintf(p->key, sizeof p->key, "%s", p->text);
    if (p->in_contents && !strcmp(name, "Size")) p->size = strtoull(p->text, NULL, 10);
    if (!strcmp(name, "IsTruncated")) p->truncated = !strcmp(p->text, "true");
    if (!strcmp(name, "NextContinuationToken")) snprintf(p->next, sizeof p->next, "%s", p->text);
    if (!strcmp(name, "Contents")) {
        p->in_contents = 0;
        if (!p->stop && strlen(p->key) > p->skip)
            p->stop = !p->cb(p->user, p->key + p->skip, p->size);
    }
    /* a folder below the prefix (PREFIX/NAME/), told as NAME, as a directory lists one */
    size_t n = strlen(p->text);
    if (p->in_prefixes && !strcmp(name, "Prefix") && n > p->skip + 1 && p->text[n - 1] == '/') {
        p->text[n - 1] = 0;
        if (!p->stop) p->stop = !p->cb(p->user, p->text + p->skip, 0);
    }
    if (!strcmp(name, "CommonPrefixes")) p->in_prefixes = 0;
    p->len = 0;
}

/* The bucket's address: the object's, less "/x". */
static tq_status open_bucket(tq_ctx *ctx, const char *bucket, tq_s3 **out)
{
    char url[300];
    snprintf(url, sizeof url, "s3://%s/x", bucket);
    tq_status st = tq_s3_open(ctx, url, out);
    if (st) return st;
    size_t n = strlen((*out)->http_url);
    (*out)->http_url[n - 2] = 0;
    return TQ_OK;
}

/* One page's request and parse. */
static tq_status list_once(tq_ctx *ctx, tq_s3 *b, const char *prefix, list_page *p)
{
    char *ep = curl_easy_escape(b->h, prefix, 0);
    char *et = p->next[0] ? curl_easy_escape(b->h, p->next, 0) : NULL;
    char *q = NULL;
    /* the query in SigV4's canonical order (sorted by name) */
    int n = asprintf(&q, "%s%s%sdelimiter=%%2F&list-type=2&prefix=%s", et ? "continuation-token="
                                                                        : "",
                     et ? et : "", et ? "&" : "", ep ? ep : "");
    curl_free(ep);
    curl_free(et);
    if (n < 0) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    enum { PAGE = 4 << 20 };
    uint8_t *body = malloc(PAGE);
    s3_req r = {.method = "GET", .query = q, .buf = body, .cap = PAGE - 1};
    tq_status st = body ? s3_call(ctx, b, &r) : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "no memory");
    s3_req_done(&r);
    free(q);
    p->next[0] = 0;
    p->truncated = 0;
    if (!st) {
        XML_Parser x = XML_ParserCreate(NULL);
        XML_SetUserData(x, p);
        XML_SetElementHandler(x, page_start, page_end);
        XML_SetCharacterDataHandler(x, page_text);
        if (XML_Parse(x, (const char *)body, (int)r.got, 1) == XML_STATUS_ERROR)
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: a listing that is not XML", b->url);
        XML_ParserFree(x);
    }
    free(body);
    return st;
}

tq_status tq_s3_list(tq_ctx *ctx, const char *url,
                     int (*cb)(void *user, const char *name, uint64_t size), void *user)
{
    const char *b = url + 5;
    const char *slash = strchr(b, '/');
    char *bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
    const char *prefix = slash ? slash + 1 : "";
    tq_s3 *s3 = NULL;
    if (!bucket) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = open_bucket(ctx, bucket, &s3);
    free(bucket);
    list_page *p = st ? NULL : calloc(1, sizeof *p);
    if (!st && !p) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (p) {
        p->skip = strlen(prefix);
        p->cb = cb;
        p->user = user;
    }
    do {
        if (!st) st = list_once(ctx, s3, prefix, p);
    } while (!st && p->truncated && p->next[0] && !p->stop);
    free(p);
    tq_s3_close(s3);
    return st;
}
