/* s3.c - see s3.h and S3.md.  HTTP and SigV4 signing are libcurl's; an answer's XML (an
 * error's code and message, a multipart upload's id) is read with expat. */
#define _GNU_SOURCE /* vasprintf */
#include "s3_impl.h"

#include <curl/curl.h>
#include <expat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>

/* Attempts a request gets where S3 clients retry (the AWS SDKs' standard mode makes 3; a
 * restarted radosgw or a throttled bucket wants a little longer), and the backoff: a wait
 * drawn at random below 0.1 s doubled for each attempt made ("full jitter", as the AWS SDKs:
 * clients that failed together do not retry together), or what a Retry-After asks, at most
 * S3_RETRY_AFTER_MAX_S (S3.md, "Retries"). */
enum { S3_TRIES = 5, S3_WAIT_MS = 100, S3_RETRY_AFTER_MAX_S = 10 };

/* The store's clock less ours, learnt from a RequestTimeTooSkewed answer's Date: requests are
 * dated by it from then on (an X-Amz-Date header, which libcurl signs as given). */
static long s3_skew_s;

/* Seconds without a byte before a request is given up and retried (TQ_S3_STALL_S, else 30). */
static long stall_s(void)
{
    static long v;
    if (!__atomic_load_n(&v, __ATOMIC_RELAXED)) {
        const char *e = getenv("TQ_S3_STALL_S");
        long x = e ? strtol(e, NULL, 10) : 0;
        __atomic_store_n(&v, x > 0 && x <= 3600 ? x : 30, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}


static void (*s3_note_fn)(void *, const char *);
static void *s3_note_user;

void tq_s3_set_note(void (*note)(void *user, const char *msg), void *user)
{
    s3_note_fn = note;
    s3_note_user = user;
}

static void note(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (!s3_note_fn) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s3_note_fn(s3_note_user, msg);
}

int tq_s3_is_url(const char *name) { return name && !strncmp(name, "s3://", 5); }
const char *tq_s3_url(const tq_s3 *s) { return s->url; }
uint64_t tq_s3_bytes_in(const tq_s3 *s) { return __atomic_load_n(&s->in, __ATOMIC_RELAXED); }
uint64_t tq_s3_bytes_out(const tq_s3 *s) { return __atomic_load_n(&s->out, __ATOMIC_RELAXED); }

static pthread_once_t s3_once = PTHREAD_ONCE_INIT;
static void s3_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

char *s3_dup_printf(const char *fmt, ...)
{
    va_list ap;
    char *p = NULL;
    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0) p = NULL;
    va_end(ap);
    return p;
}

/* The key as a URL path: every byte but the unreserved ones and '/' percent-coded (what SigV4's
 * canonical URI holds). */
static char *escape_key(const char *key)
{
    static const char hex[] = "0123456789ABCDEF";
    char *e = malloc(3 * strlen(key) + 1);
    char *o = e;
    if (!e) return NULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~/", *p);
        if (plain) {
            *o++ = (char)*p;
            continue;
        }
        *o++ = '%';
        *o++ = hex[*p >> 4];
        *o++ = hex[*p & 15];
    }
    *o = 0;
    return e;
}

void tq_s3_close(tq_s3 *s)
{
    if (!s) return;
    if (s->h) curl_easy_cleanup(s->h);
    free(s->url);
    free(s->bucket);
    free(s->http_url);
    free(s->endpoint);
    free(s->sigv4);
    free(s->userpwd);
    free(s->token);
    free(s);
}

/* s3://bucket/key: a bucket name as S3 allows (3-63 of a-z 0-9 . -) and a key. */
static int split_url(const char *url, char **bucket, const char **key)
{
    const char *b = url + 5;
    const char *slash = strchr(b, '/');
    if (!slash || slash - b < 3 || slash - b > 63 || !slash[1]) return -1;
    for (const char *p = b; p < slash; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
            return -1;
    /* a key is what the user typed: no "." or ".." segment for a path to resolve */
    for (const char *seg = slash + 1; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
        size_t len = strcspn(seg, "/");
        if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) return -2;
    }
    *bucket = strndup(b, (size_t)(slash - b));
    *key = slash + 1;
    return *bucket ? 0 : -1;
}

/* The endpoint and addressing: a custom endpoint (Ceph, MinIO, R2) is addressed path-style,
 * AWS itself virtual-hosted, as the AWS CLI does. */
static int locate(tq_s3 *s, const char *key, const char *region)
{
    const char *ep = env("AWS_ENDPOINT_URL_S3");
    char *ekey = escape_key(key);
    if (!ep) ep = env("AWS_ENDPOINT_URL");
    if (!ekey) return -1;
    if (ep) {
        size_t n = strlen(ep);
        while (n && ep[n - 1] == '/') n--;
        s->endpoint = strndup(ep, n);
        s->http_url = s3_dup_printf("%.*s/%s/%s", (int)n, ep, s->bucket, ekey);
    } else {
        s->endpoint = s3_dup_printf("https://s3.%s.amazonaws.com", region);
        s->http_url = s3_dup_printf("https://%s.s3.%s.amazonaws.com/%s", s->bucket, region, ekey);
    }
    free(ekey);
    return s->endpoint && s->http_url ? 0 : -1;
}

tq_status tq_s3_open(tq_ctx *ctx, const char *url, tq_s3 **out)
{
    const char *key = NULL;
    const char *id = env("AWS_ACCESS_KEY_ID");
    const char *secret = env("AWS_SECRET_ACCESS_KEY");
    const char *region = env("AWS_REGION");
    *out = NULL;
    pthread_once(&s3_once, s3_global_init);
    if (!region) region = env("AWS_DEFAULT_REGION");
    if (!region) region = "us-east-1";
    tq_s3 *s = calloc(1, sizeof *s);
    if (!s) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    int split = split_url(url, &s->bucket, &key);
    const char *ep = env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3")
                                                : env("AWS_ENDPOINT_URL");
    if (split) {
        tq_s3_close(s);
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                split == -2 ? "%s: a key with a '.' or '..' segment (keys are "
                                              "names, not paths)"
                                            : "%s: not an object URL s3://bucket/key",
                                url);
    }
    if (ep && strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
        tq_s3_close(s);
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "AWS_ENDPOINT_URL: an http:// or https:// URL, "
                                                 "not '%.40s'", ep);
    }
    if (!id || !secret) {
        tq_s3_close(s);
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s: no credentials: set AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY",
                                url);
    }
    s->url = strdup(url);
    s->sigv4 = s3_dup_printf("aws:amz:%s:s3", region);
    s->userpwd = s3_dup_printf("%s:%s", id, secret);
    if (env("AWS_SESSION_TOKEN"))
        s->token = s3_dup_printf("x-amz-security-token: %s", env("AWS_SESSION_TOKEN"));
    s->h = curl_easy_init();
    if (!s->url || !s->sigv4 || !s->userpwd || !s->h || locate(s, key, region) ||
        (env("AWS_SESSION_TOKEN") && !s->token)) {
        tq_s3_close(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return TQ_OK;
}

/* ------------------------------------------------------------ one request */


static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    s3_req *r = user;
    size_t n = size * nmemb;
    __atomic_add_fetch(&r->s->in, n, __ATOMIC_RELAXED);
    if (!r->status) curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status / 100 != 2) {
        size_t keep = r->err_len + n > 16384 ? 16384 - r->err_len : n;
        char *e = realloc(r->err, r->err_len + keep + 1);
        if (!e) return 0;
        memcpy(e + r->err_len, p, keep);
        r->err = e;
        r->err_len += keep;
        r->err[r->err_len] = 0;
        return n;
    }
    if (!r->s->etag[0] && r->etag[0]) /* later reads are of this object, If-Match */
        snprintf(r->s->etag, sizeof r->s->etag, "%s", r->etag);
    if (r->sink && !r->sink(r->user, (const uint8_t *)p, n)) {
        r->cancelled = 1;
        return 0;
    }
    if (!r->sink && r->buf) {
        if (n > r->cap - r->got) return 0; /* more than asked: refused as a short answer */
        memcpy(r->buf + r->got, p, n);
    }
    r->got += n;
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *user)
{
    s3_req *r = user;
    size_t n = size * nmemb;
    char line[120];
    size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, k);
    line[k] = 0;
    line[strcspn(line, "\r\n")] = 0;
    if (!strncasecmp(line, "HTTP/", 5)) { /* a new answer (after 100 Continue, a redirect) */
        r->etag[0] = 0;
        r->status = 0;
        r->retry_after_s = -1;
        r->server_date = 0;
    } else if (!strncasecmp(line, "Retry-After:", 12)) {
        char *end;
        long v = strtol(line + 12, &end, 10);
        if (end != line + 12 && v >= 0) r->retry_after_s = v; /* an HTTP date: not taken */
    } else if (!strncasecmp(line, "Date:", 5)) {
        time_t t = curl_getdate(line + 5, NULL);
        r->server_date = t > 0 ? t : 0;
    } else if (!strncasecmp(line, "ETag:", 5)) {
        const char *v = line + 5;
        while (*v == ' ') v++;
        snprintf(r->etag, sizeof r->etag, "%s", v);
    } else if (!strncasecmp(line, "Content-Range:", 14)) {
        const char *slash = strrchr(line, '/');
        if (slash && slash[1] != '*') r->total = strtoull(slash + 1, NULL, 10);
    } else if (!strncasecmp(line, "Content-Length:", 15) && !r->n && !r->got) {
        r->total = strtoull(line + 15, NULL, 10); /* no Range asked: the whole object */
    }
    return n;
}

static size_t on_send(char *p, size_t size, size_t nmemb, void *user)
{
    s3_req *r = user;
    uint64_t n = size * nmemb;
    if (n > r->body_len - r->sent) n = r->body_len - r->sent;
    memcpy(p, r->body + r->sent, n);
    r->sent += n;
    __atomic_add_fetch(&r->s->out, n, __ATOMIC_RELAXED);
    return n;
}

static struct curl_slist *request_headers(const tq_s3 *s, const s3_req *r)
{
    char line[200];
    /* curl 7.88 signs the x-amz- headers it is given; radosgw and AWS want the payload's
     * hash among them (UNSIGNED-PAYLOAD: the chunks carry their own checksums) */
    struct curl_slist *l = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (s->token) l = curl_slist_append(l, s->token);
    if (r->n) {
        uint64_t from = r->off + r->got;
        snprintf(line, sizeof line, "Range: bytes=%llu-%llu", (unsigned long long)from,
                 (unsigned long long)(r->off + r->n - 1));
        l = curl_slist_append(l, line);
    } else if (r->whole && r->got) { /* the rest, after a cut */
        snprintf(line, sizeof line, "Range: bytes=%llu-", (unsigned long long)r->got);
        l = curl_slist_append(l, line);
    }
    if (r->if_match && s->etag[0]) {
        snprintf(line, sizeof line, "If-Match: %s", s->etag);
        l = curl_slist_append(l, line);
    }
    long skew = __atomic_load_n(&s3_skew_s, __ATOMIC_RELAXED);
    if (skew) { /* the store's time, signed as given */
        struct tm tm;
        time_t now = time(NULL) + skew;
        gmtime_r(&now, &tm);
        strftime(line, sizeof line, "X-Amz-Date: %Y%m%dT%H%M%SZ", &tm);
        l = curl_slist_append(l, line);
    }
    return l;
}

/* Before each request on a connection: the answer's first segment acknowledged at once.  An
 * S3 server sends a small answer's head and body in two writes, and with Nagle's algorithm
 * the second waits for the ACK of the first, which Linux delays 40 ms: each small answer (an
 * upload's id, a part's ETag, an index) took 40-50 ms on radosgw. */
static int before_request(void *user, char *ip, char *local_ip, int port, int local_port)
{
    CURL *h = user;
    curl_socket_t fd;
    int one = 1;
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK && fd != CURL_SOCKET_BAD)
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    return CURL_PREREQFUNC_OK;
}

/* A transfer's progress: given up (and retried) once no byte has gone either way for the
 * stall limit, whatever came before (curl's own low-speed check averages over seconds, so a
 * burst hid a stall behind it). */
static int on_progress(void *user, curl_off_t dl_total, curl_off_t dl, curl_off_t ul_total,
                       curl_off_t ul)
{
    s3_req *r = user;
    struct timespec now;
    (void)dl_total;
    (void)ul_total;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (dl != r->seen_down || ul != r->seen_up || !r->moved.tv_sec) {
        r->seen_down = dl;
        r->seen_up = ul;
        r->moved = now;
        return 0;
    }
    r->stalled = now.tv_sec - r->moved.tv_sec >= stall_s();
    return r->stalled;
}

/* One attempt of r on r->h. */
static void attempt(tq_s3 *s, s3_req *r)
{
    CURL *h = r->h;
    char *url = r->query ? s3_dup_printf("%s?%s", s->http_url, r->query) : strdup(s->http_url);
    struct curl_slist *hdr = request_headers(s, r);
    r->status = 0;
    r->sent = 0;
    r->etag[0] = 0;
    r->retry_after_s = -1;
    r->server_date = 0;
    r->err_len = 0;
    r->curl_err[0] = 0;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(h, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, before_request);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, h);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* the key as typed (no dot segments resolved), over http or https only, no redirects */
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    /* no wait for 100-continue before a part (an empty Expect: header would be signed too,
     * and radosgw refuses the signature) */
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
    /* a server that stops answering mid-transfer: given up after 30 s (TQ_S3_STALL_S) without
       a byte, and retried */
    r->moved.tv_sec = 0;
    r->stalled = 0;
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, r);
    if (!strcmp(r->method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(r->method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_send);
        curl_easy_setopt(h, CURLOPT_READDATA, r);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    } else if (!strcmp(r->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "GET")) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
    }
    r->cc = url && hdr ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
    if (r->cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdr);
    free(url);
}

/* ------------------------------------------------------------ answers */


static void XMLCALL xml_start(void *user, const XML_Char *name, const XML_Char **attrs)
{
    xml_pick *x = user;
    (void)attrs;
    x->into = NULL;
    if (!strcmp(name, "Code") && !x->code[0]) x->into = x->code;
    if (!strcmp(name, "Message") && !x->message[0]) x->into = x->message;
    if (!strcmp(name, "UploadId") && !x->upload_id[0]) x->into = x->upload_id;
    if (x->into == x->code) x->cap = sizeof x->code;
    if (x->into == x->message) x->cap = sizeof x->message;
    if (x->into == x->upload_id) x->cap = sizeof x->upload_id;
    x->len = 0;
}

static void XMLCALL xml_end(void *user, const XML_Char *name)
{
    (void)name;
    ((xml_pick *)user)->into = NULL;
}

static void XMLCALL xml_text(void *user, const XML_Char *s, int n)
{
    xml_pick *x = user;
    if (!x->into) return;
    size_t k = (size_t)n < x->cap - 1 - x->len ? (size_t)n : x->cap - 1 - x->len;
    memcpy(x->into + x->len, s, k);
    x->len += k;
    x->into[x->len] = 0;
}

/* The error code, message and upload id an answer's XML holds (empty where it has none). */
void s3_xml_read(const char *body, size_t n, xml_pick *x)
{
    memset(x, 0, sizeof *x);
    XML_Parser p = XML_ParserCreate(NULL);
    if (!p || !body) {
        if (p) XML_ParserFree(p);
        return;
    }
    XML_SetUserData(p, x);
    XML_SetElementHandler(p, xml_start, xml_end);
    XML_SetCharacterDataHandler(p, xml_text);
    XML_Parse(p, body, (int)n, 1);
    XML_ParserFree(p);
}

static int ok_answer(const s3_req *r)
{
    return r->cc == CURLE_OK && (r->status / 100 == 2 || (r->status == 416 && r->empty_ok));
}

/* What S3 clients retry: a connection refused, cut or timed out, a 5xx, throttling. */
static int retryable(const s3_req *r)
{
    if (r->cancelled) return 0;
    switch (r->cc) {
        case CURLE_OK:
            return r->status >= 500 || r->status == 429;
        case CURLE_COULDNT_CONNECT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_GOT_NOTHING:
        case CURLE_OPERATION_TIMEDOUT:
            return 1;
        case CURLE_ABORTED_BY_CALLBACK:
            return r->stalled;
        default:
            return 0;
    }
}

/* What went wrong, in a few words. */
static void describe(const tq_s3 *s, const s3_req *r, char *out, size_t cap)
{
    xml_pick x;
    if (r->cc == CURLE_COULDNT_CONNECT) {
        snprintf(out, cap, "cannot connect to %s", s->endpoint);
        return;
    }
    if (r->stalled) {
        snprintf(out, cap, "no byte for %ld s", stall_s());
        return;
    }
    if (r->cc != CURLE_OK) {
        snprintf(out, cap, "%s", r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->cc));
        return;
    }
    s3_xml_read(r->err, r->err_len, &x);
    if (r->status == 404 && !strcmp(x.code, "NoSuchBucket"))
        snprintf(out, cap, "no such bucket '%s'", s->bucket);
    else if (r->status == 404)
        snprintf(out, cap, "no such object");
    else if (r->status == 403)
        snprintf(out, cap, "access denied (%s): check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY",
                 x.code[0] ? x.code : "HTTP 403");
    else if (r->status == 412)
        snprintf(out, cap, "the object changed while it was read");
    else
        snprintf(out, cap, "HTTP %ld%s%s%s%s", r->status, x.code[0] ? " " : "", x.code,
                 x.message[0] ? ": " : "", x.message);
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The wait before attempt a + 1: a Retry-After's (capped), else a random share of the
 * doubled backoff. */
static long backoff_ms(const s3_req *r, int a)
{
    static __thread unsigned seed;
    if (!seed) seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed ^ (unsigned)getpid();
    if (r->retry_after_s >= 0)
        return 1000L * (r->retry_after_s < S3_RETRY_AFTER_MAX_S ? r->retry_after_s
                                                                 : S3_RETRY_AFTER_MAX_S);
    long top = (long)S3_WAIT_MS << a;
    return (long)((double)rand_r(&seed) / ((double)RAND_MAX + 1.0) * (double)top);
}

/* A RequestTimeTooSkewed answer: the store's Date taken as the time to sign with (1), told
 * once; 0 when it gave none. */
static int correct_skew(const tq_s3 *s, const s3_req *r)
{
    xml_pick x;
    if (r->cc != CURLE_OK || r->status != 403 || !r->server_date) return 0;
    s3_xml_read(r->err, r->err_len, &x);
    if (strcmp(x.code, "RequestTimeTooSkewed")) return 0;
    long skew = (long)(r->server_date - time(NULL));
    __atomic_store_n(&s3_skew_s, skew ? skew : 1, __ATOMIC_RELAXED);
    note("%s: this machine's clock differs from the store's by %+ld s: requests are dated by "
         "the store's",
         s->url, skew);
    return 1;
}

/* r on r->h (the object's own handle when NULL), retried as S3 clients retry; a retried GET
 * resumes after the bytes it has. */
tq_status s3_call(tq_ctx *ctx, tq_s3 *s, s3_req *r)
{
    char why[400];
    char first[400] = "";
    char waits[96] = ""; /* the waits before each retry, told with it */
    const char *what = r->query ? r->query : "";
    r->s = s;
    if (!r->h) r->h = s->h;
    for (int a = 1;; a++) {
        attempt(s, r);
        if (ok_answer(r)) {
            /* told once it worked: a failure's one line says how often it was tried */
            if (a > 1)
                note("%s: %s%s%s retried after %s: done at attempt %d of %d (waits:%s s)",
                     s->url, r->method, *what ? " ?" : "", what, first, a, S3_TRIES, waits);
            return TQ_OK;
        }
        describe(s, r, why, sizeof why);
        s->missing = r->cc == CURLE_OK && r->status == 404 && !strstr(why, "no such bucket");
        if (a == 1) snprintf(first, sizeof first, "%s", why);
        int skewed = a < S3_TRIES && correct_skew(s, r);
        if (!skewed && (!retryable(r) || a == S3_TRIES)) {
            free(r->err);
            r->err = NULL;
            if (r->cancelled) return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cancelled", s->url);
            if (a > 1)
                return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s%s%s: %s (tried %d times)", s->url,
                                        r->method, *what ? " ?" : "", what, why, a);
            return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s%s%s: %s", s->url, r->method,
                                    *what ? " ?" : "", what, why);
        }
        if (strcmp(r->method, "GET")) r->got = 0; /* a body goes again from its start */
        long wait = skewed ? 0 : backoff_ms(r, a);
        size_t used = strlen(waits);
        snprintf(waits + used, sizeof waits - used, " %.3f", wait / 1e3);
        sleep_ms(wait);
    }
}

void s3_req_done(s3_req *r)
{
    free(r->err);
    r->err = NULL;
}

tq_status tq_s3_size(tq_ctx *ctx, tq_s3 *s, uint64_t *size)
{
    uint64_t got;
    uint8_t byte;
    return tq_s3_get(ctx, s, 0, 1, &byte, &got, size);
}

tq_status tq_s3_get(tq_ctx *ctx, tq_s3 *s, uint64_t off, uint64_t n, void *buf, uint64_t *got,
                    uint64_t *size)
{
    /* a GET, not a HEAD, so that a missing bucket or key is named by the answer's XML */
    s3_req r = {.method = "GET", .off = off, .n = n, .buf = buf, .cap = n, .if_match = 1,
                .empty_ok = off == 0};
    tq_status st = s3_call(ctx, s, &r);
    s3_req_done(&r);
    if (st) return st;
    if (r.status == 416) { /* an empty object: no byte 0 */
        *got = 0;
        if (size) *size = 0;
        return TQ_OK;
    }
    if (r.status != 206 && !(r.status == 200 && off == 0 && r.total <= n))
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the server ignored a byte range", s->url);
    if (r.got != n && off + r.got != r.total)
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %llu bytes where %llu were asked", s->url,
                                (unsigned long long)r.got, (unsigned long long)n);
    if (!s->etag[0]) snprintf(s->etag, sizeof s->etag, "%s", r.etag);
    *got = r.got;
    if (size) *size = r.total;
    return TQ_OK;
}
