/* proxy_http.c - the proxy's HTTP (proxy.h, PROXY.md): libmicrohttpd takes the clients'
 * requests, a thread a connection; each is forwarded to the server by libcurl as it came, and
 * the answer is handed back as the server's bytes arrive (a stream event by event). */
#define _GNU_SOURCE /* vasprintf */
#include "proxy_impl.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

/* The most the server's bytes wait for the client before the transfer pauses. */
enum { BUF_MOST = 1 << 20, READ_BLOCK = 32 << 10 };
/* A forwarded request's whole time: a long prompt's processing says nothing for minutes. */
#define FORWARD_MOST_S 3600L

void proxy_log(const tq_proxy *p, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n >= 0 && p->cfg.log) p->cfg.log(p->cfg.log_user, line);
    if (n >= 0) free(line);
}

/* Headers that belong to one hop: never passed on. */
static int hop_header(const char *name)
{
    static const char *const hop[] = {"host", "content-length", "transfer-encoding",
                                      "connection", "keep-alive", "expect", "upgrade",
                                      "proxy-connection", "te", "trailer", NULL};
    for (int i = 0; hop[i]; i++)
        if (!strcasecmp(name, hop[i])) return 1;
    return 0;
}

static enum MHD_Result take_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    proxy_req *r = cls;
    char line[8192];
    (void)kind;
    if (!strcasecmp(key, "authorization") && !r->authorization)
        r->authorization = strdup(value);
    if (hop_header(key)) return MHD_YES;
    snprintf(line, sizeof line, "%s: %s", key, value ? value : "");
    struct curl_slist *l = curl_slist_append(r->out_headers, line);
    if (l) r->out_headers = l;
    return MHD_YES;
}

/* The server's answer's header lines: the status line starts them again (100 Continue). */
static size_t on_header(char *p, size_t size, size_t nmemb, void *user)
{
    proxy_req *r = user;
    size_t n = size * nmemb;
    char line[8192];
    size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, k);
    line[k] = 0;
    while (k && (line[k - 1] == '\r' || line[k - 1] == '\n')) line[--k] = 0;
    if (!strncmp(line, "HTTP/", 5)) {
        curl_slist_free_all(r->in_headers);
        r->in_headers = NULL;
        r->status = strtol(strchr(line, ' ') ? strchr(line, ' ') : line, NULL, 10);
        return n;
    }
    if (!k) {
        if (r->status >= 200) r->headers_done = 1;
        return n;
    }
    struct curl_slist *l = curl_slist_append(r->in_headers, line);
    if (l) r->in_headers = l;
    return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    proxy_req *r = user;
    size_t n = size * nmemb;
    r->headers_done = 1;
    if (r->buf_off == r->buf_len) {
        r->buf_off = 0;
        r->buf_len = 0;
    }
    if (r->buf_len + n > BUF_MOST && r->buf_len > r->buf_off) {
        r->paused = 1;
        return CURL_WRITEFUNC_PAUSE; /* the client is slower: the server waits */
    }
    char *b = realloc(r->buf, r->buf_len + n);
    if (!b) return 0;
    memcpy(b + r->buf_len, p, n);
    r->buf = b;
    r->buf_len += n;
    proxy_turn_scan(&r->turn, p, n);
    return n;
}

/* Moves the transfer on until the answer's headers are in (headers) or some of its body is
 * waiting or it ended. */
static void pump(proxy_req *r, int headers)
{
    while (!r->done) {
        int running = 0;
        curl_multi_perform(r->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(r->multi, &left)))
            if (msg->msg == CURLMSG_DONE) {
                r->result = msg->data.result;
                r->done = 1;
            }
        if (!running) r->done = 1;
        if (r->done) break;
        if (headers ? r->headers_done : r->buf_len > r->buf_off) break;
        curl_multi_poll(r->multi, NULL, 0, 1000, NULL);
    }
}

static int forward_start(proxy_req *r, const char *method)
{
    char url[8192];
    const char *server = r->p->cfg.session.srv.url;
    size_t n = strlen(server);
    while (n && server[n - 1] == '/') n--;
    snprintf(url, sizeof url, "%.*s%s", (int)n, server, r->uri);
    r->easy = curl_easy_init();
    r->multi = curl_multi_init();
    struct curl_slist *l = curl_slist_append(r->out_headers, "Expect:");
    if (l) r->out_headers = l;
    if (!r->easy || !r->multi) return -1;
    CURL *h = r->easy;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->error);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->out_headers);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, FORWARD_MOST_S);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (r->body_len || !strcmp(method, "POST") || !strcmp(method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? r->body : "");
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "POST"))
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!r->body_len && !strcmp(method, "GET")) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_multi_add_handle(r->multi, h);
    return 0;
}

static ssize_t read_answer(void *cls, uint64_t pos, char *out, size_t max)
{
    proxy_req *r = cls;
    (void)pos;
    if (r->buf_len == r->buf_off) pump(r, 0);
    if (r->buf_len > r->buf_off) {
        size_t k = r->buf_len - r->buf_off;
        if (k > max) k = max;
        memcpy(out, r->buf + r->buf_off, k);
        r->buf_off += k;
        r->sent += k;
        if (r->paused && r->buf_off == r->buf_len) {
            r->paused = 0;
            curl_easy_pause(r->easy, CURLPAUSE_CONT);
        }
        return (ssize_t)k;
    }
    return r->result == CURLE_OK ? MHD_CONTENT_READER_END_OF_STREAM
                                 : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The answer's header named name (its value in the list), or NULL. */
static const char *answer_header(const proxy_req *r, const char *name)
{
    size_t k = strlen(name);
    for (const struct curl_slist *l = r->in_headers; l; l = l->next)
        if (!strncasecmp(l->data, name, k) && l->data[k] == ':') {
            const char *v = l->data + k + 1;
            while (*v == ' ') v++;
            return v;
        }
    return NULL;
}

static enum MHD_Result answer_text(proxy_req *r, struct MHD_Connection *c, unsigned status,
                                   const char *type, const char *text)
{
    r->status = status;
    struct MHD_Response *res =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!res) return MHD_NO;
    MHD_add_response_header(res, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, status, res);
    MHD_destroy_response(res);
    return ok;
}

/* An OpenAI-style error, for what the proxy answers itself (a client's fault, or no server). */
static enum MHD_Result answer_error(proxy_req *r, struct MHD_Connection *c, unsigned status,
                                    const char *msg)
{
    char text[512];
    snprintf(text, sizeof text, "{\"error\":{\"code\":%u,\"message\":\"%s\",\"type\":\"%s\"}}",
             status, msg, status == 401 ? "authentication_error" : "proxy_error");
    return answer_text(r, c, status, "application/json", text);
}

/* The answer to the client: the server's status and headers, its body as it comes. */
static enum MHD_Result answer_forwarded(proxy_req *r, struct MHD_Connection *c)
{
    const char *len = answer_header(r, "content-length");
    uint64_t size = MHD_SIZE_UNKNOWN;
    if (len && !r->paused) size = strtoull(len, NULL, 10);
    struct MHD_Response *res = MHD_create_response_from_callback(size, READ_BLOCK, read_answer,
                                                                 r, NULL);
    if (!res) return MHD_NO;
    for (const struct curl_slist *l = r->in_headers; l; l = l->next) {
        char name[256];
        const char *colon = strchr(l->data, ':');
        if (!colon || (size_t)(colon - l->data) >= sizeof name) continue;
        snprintf(name, sizeof name, "%.*s", (int)(colon - l->data), l->data);
        if (hop_header(name)) continue;
        const char *v = colon + 1;
        while (*v == ' ') v++;
        MHD_add_response_header(res, name, v);
    }
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, res);
    MHD_destroy_response(res);
    return ok;
}

/* A bearer key compared in time that does not depend on where it differs. */
static int key_ok(const tq_proxy *p, const char *authorization)
{
    const char *key = p->cfg.api_key;
    if (!key) return 1;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7)) return 0;
    const char *given = authorization + 7;
    size_t a = strlen(given);
    size_t b = strlen(key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned)(given[i < a ? i : 0] ^ key[i]);
    return diff == 0;
}

static enum MHD_Result serve(proxy_req *r, struct MHD_Connection *c, const char *method,
                             const char *path)
{
    tq_proxy *p = r->p;
    MHD_get_connection_values(c, MHD_HEADER_KIND, take_header, r);
    if (!key_ok(p, r->authorization)) return answer_error(r, c, 401, "a valid API key is needed");
    if (r->too_big) return answer_error(r, c, 413, "the request's body is too large");
    if (!strcmp(path, "/tq/metrics")) {
        char *text = proxy_metrics_text(p);
        enum MHD_Result ok = text ? answer_text(r, c, 200, "text/plain; version=0.0.4", text)
                                  : MHD_NO;
        free(text);
        return ok;
    }
    proxy_turn_begin(r, method, path);
    if (forward_start(r, method)) return answer_error(r, c, 500, "out of memory");
    pump(r, 1);
    if (!r->headers_done) { /* no answer: the server is down or did not answer in time */
        proxy_log(p, "%s %s: the server did not answer: %s", method, r->uri,
                  *r->error ? r->error : curl_easy_strerror(r->result));
        return answer_error(r, c, 502, "the server did not answer");
    }
    return answer_forwarded(r, c);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    proxy_req *r = *con_cls;
    (void)cls;
    (void)version;
    if (!r) return MHD_NO;
    if (!r->started) {
        r->started = 1;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->too_big || r->body_len + n > r->p->cfg.max_body) {
            r->too_big = 1;
            return MHD_YES;
        }
        char *b = realloc(r->body, r->body_len + n + 1);
        if (!b) return MHD_NO;
        memcpy(b + r->body_len, upload_data, n);
        r->body = b;
        r->body_len += n;
        r->body[r->body_len] = 0;
        return MHD_YES;
    }
    return serve(r, c, method, url);
}

/* A request begins: its state, with the URI as sent (MHD gives the handler the path alone). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    tq_proxy *p = cls;
    (void)c;
    proxy_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->p = p;
    r->uri = strdup(uri);
    r->t0 = tq_slot_now();
    r->turn.slot = -1;
    r->turn.prompt_n = -1;
    if (!r->uri) {
        free(r);
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    p->in_flight++;
    p->m.requests++;
    pthread_mutex_unlock(&p->lock);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    tq_proxy *p = cls;
    proxy_req *r = *con_cls;
    (void)c;
    if (!r) return;
    int completed = why == MHD_REQUEST_TERMINATED_COMPLETED_OK && r->done &&
                    r->result == CURLE_OK && r->status / 100 == 2;
    if (r->multi && r->easy) curl_multi_remove_handle(r->multi, r->easy);
    if (r->easy) curl_easy_cleanup(r->easy); /* a client gone: the server's request ends too */
    if (r->multi) curl_multi_cleanup(r->multi);
    proxy_turn_end(r, completed);
    curl_slist_free_all(r->out_headers);
    curl_slist_free_all(r->in_headers);
    free(r->authorization);
    free(r->buf);
    free(r->body);
    free(r->uri);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&p->lock);
    p->in_flight--;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t k = strlen(line);
    while (k && line[k - 1] == '\n') line[--k] = 0;
    proxy_log(cls, "http: %s", line);
}

/* HOST:PORT (a [v6] host in brackets) resolved to an address to bind. */
static tq_status listen_address(tq_ctx *ctx, const char *listen, struct sockaddr_storage *sa,
                                int *v6)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || strlen(colon + 1) == 0 || strlen(colon + 1) > 5)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "--listen: '%s' is not HOST:PORT", listen);
    const char *h = listen;
    size_t hn = (size_t)(colon - listen);
    if (*h == '[' && hn >= 2 && h[hn - 1] == ']') {
        h++;
        hn -= 2;
    }
    snprintf(host, sizeof host, "%.*s", (int)hn, h);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) || !ai)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "--listen: '%s' is not an address of this "
                                                 "machine with a port", listen);
    memcpy(sa, ai->ai_addr, ai->ai_addrlen);
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return TQ_OK;
}

/* A service's memory stays what its work needs: glibc raises its mmap threshold after each
 * large free, so the megabyte buffers of many threads (slot files, snapshots, a thread a
 * connection) come to live in arenas that keep them: a proxy's RSS grew by 112 MiB in ten
 * minutes of tests/oracle/slot_pool.py.  A fixed threshold maps each and gives it back. */
static void service_malloc(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif
}

tq_status tq_proxy_start(tq_ctx *ctx, const tq_proxy_config *cfg, tq_proxy **out,
                         unsigned *port)
{
    service_malloc();
    struct sockaddr_storage sa;
    int v6 = 0;
    *out = NULL;
    tq_status st = listen_address(ctx, cfg->listen, &sa, &v6);
    if (st) return st;
    tq_proxy *p = calloc(1, sizeof *p);
    if (!p) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    p->cfg = *cfg;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    if (proxy_saver_start(p)) {
        free(p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "cannot start the save thread");
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    p->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, p, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, p,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->client_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(256u << 10), MHD_OPTION_URI_LOG_CALLBACK, on_uri, p,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, p,
        MHD_OPTION_END);
    if (!p->mhd) {
        proxy_saver_stop(p);
        free(p);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "--listen %s: cannot listen there (in use?)",
                                cfg->listen);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(p->mhd, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    *out = p;
    return TQ_OK;
}

void tq_proxy_stop(tq_proxy *p)
{
    if (!p) return;
    MHD_quiesce_daemon(p->mhd); /* no new connection; those open finish their requests */
    double until = tq_slot_now() + p->cfg.drain_s;
    pthread_mutex_lock(&p->lock);
    while (p->in_flight && tq_slot_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->changed, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    MHD_stop_daemon(p->mhd);
    proxy_saver_stop(p);
    for (uint32_t i = 0; i < p->n_slots; i++) free(p->slots[i].tokens);
    free(p->slots);
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
