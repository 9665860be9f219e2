/*
 * proxy.h - tq slot proxy (PROXY.md): an HTTP proxy in front of one llama-server that keeps
 * every generation's slot in a snapshot store and brings it back before the next request
 * that begins with it, across server restarts, model swaps and a pool of servers sharing the
 * store.  Every request goes to the server as it came and every answer comes back as the
 * server sent it (a stream event by event); the store is best-effort: a store that fails,
 * is slow or holds nothing leaves the request as the server alone would answer it.
 *
 * HTTP from clients is libmicrohttpd's (HTTP/1.1, keep-alive, chunked bodies, a thread a
 * connection); to the server libcurl's.  Nothing here prints: the log is a callback.
 */
#ifndef TQ_PROXY_H
#define TQ_PROXY_H

#include "slot_session.h"

#include <stdint.h>

typedef struct tq_proxy_config {
    tq_slot_session session;  /* the server, its slot folder, the store, the coding */
    const char *listen;       /* HOST:PORT (PORT 0: any free port) */
    const char *api_key;      /* clients must send "Authorization: Bearer KEY" (NULL: none) */
    uint32_t min_tokens;      /* sessions shorter are not kept */
    uint64_t max_size;        /* the store kept under this many bytes (0: no bound) */
    double store_timeout_s;   /* the most a request waits on the store (a restore) */
    double drain_s;           /* SIGTERM: the most pending saves are waited for */
    uint64_t max_body;        /* a request's body at most */
    long client_timeout_s;    /* an idle or silent client is dropped after this */
    void (*log)(void *user, const char *line); /* a line each request, save and note */
    void *log_user;
} tq_proxy_config;

/* The defaults: why each is what it is, PROXY.md. */
#define TQ_PROXY_MIN_TOKENS 512u
#define TQ_PROXY_STORE_TIMEOUT_S 5.0
#define TQ_PROXY_DRAIN_S 60.0
#define TQ_PROXY_MAX_BODY (64ull << 20)
#define TQ_PROXY_CLIENT_TIMEOUT_S 120L

typedef struct tq_proxy tq_proxy;

/* Listens and serves in threads of its own until tq_proxy_stop; *port the port bound. */
tq_status tq_proxy_start(tq_ctx *ctx, const tq_proxy_config *cfg, tq_proxy **out,
                         unsigned *port);
/* Stops taking connections, lets the requests in flight finish and the pending saves complete
 * (at most cfg->drain_s), then frees everything. */
void tq_proxy_stop(tq_proxy *p);

#endif
