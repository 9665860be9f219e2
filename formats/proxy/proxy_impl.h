/* proxy_impl.h - what the proxy's files share (proxy.h, PROXY.md): the proxy, what it knows of
 * each server slot, a request's forwarding and its generation turn, the save queue, the
 * metrics. */
#ifndef TQ_PROXY_IMPL_H
#define TQ_PROXY_IMPL_H

#include "proxy.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

/* What the proxy knows of one server slot. */
typedef struct proxy_slot {
    int busy;           /* a request of the proxy holds it (restore, generation, raw save) */
    long id_task;       /* the server's task that left it as recorded (-1: not known) */
    uint32_t n_cells;   /* the tokens the server said it held then */
    int32_t *tokens;    /* what it holds, as far as known: a prefix of its cells */
    uint32_t n_tokens;
    double used;        /* when a request last released it */
} proxy_slot;

/* A slot file the server wrote, waiting for its encode into the store. */
typedef struct proxy_job {
    struct proxy_job *next;
    long slot;
    long id_task;         /* the slot's task when saved (-1: a prompt's end) */
    double raw_s;
    char path[4096];
} proxy_job;

/* The counters /tq/metrics reports (PROXY.md); under the proxy's lock. */
typedef struct proxy_metrics {
    uint64_t requests, generations, hits, misses;
    uint64_t tokens_restored, prompt_tokens, prompt_tokens_processed;
    uint64_t bytes_stored, saves, saves_skipped, errors;
    double restore_s, save_s;
} proxy_metrics;

struct tq_proxy {
    tq_proxy_config cfg;
    struct MHD_Daemon *mhd;
    pthread_mutex_t lock;
    pthread_cond_t changed;   /* a slot freed, a job queued or done, a request ended */
    proxy_slot *slots;        /* n_slots of them, learned from /slots */
    uint32_t n_slots;
    uint32_t in_flight;       /* requests begun and not yet completed */
    proxy_job *jobs, *jobs_tail;
    uint32_t pending;         /* jobs queued or being stored */
    int stopping;
    pthread_t saver;
    proxy_metrics m;
};

/* At most this many slot files wait for their encode: past it a save is skipped (logged). */
enum { PROXY_PENDING_MOST = 16 };

/* A generation request's part in the session (proxy_turn.c). */
typedef struct proxy_turn {
    int active;            /* a generation the proxy keeps */
    long slot;             /* the slot it runs in */
    int32_t *tokens;       /* its prompt's tokens */
    uint32_t n;
    uint32_t have;         /* what the slot held of them before */
    uint32_t restored;     /* tokens restored from the store */
    char restored_from[40];
    double restore_s;
    long prompt_n;         /* the answer's timings.prompt_n (-1: not seen) */
    uint32_t scan_matched; /* proxy_turn_scan's state: the key's bytes matched so far, */
    int scan_number;       /* in the number after it, */
    uint32_t scan_digits;  /* its digits so far */
    long scan_value;
    uint32_t prefilled;    /* prompt tokens the server processed for the prompt's end */
    char note[600];        /* why the store was not used, for the log */
} proxy_turn;

/* One request from a client. */
typedef struct proxy_req {
    tq_proxy *p;
    char *uri;               /* as the client sent it, query included */
    char *body;              /* the request's body (body_len bytes) */
    size_t body_len;
    int too_big;             /* the body passed cfg.max_body */
    int started;             /* the access handler has seen the request */
    char *authorization;     /* the client's Authorization header, for the proxy's own calls */
    struct curl_slist *out_headers;  /* the client's headers, to the server */
    /* the forwarded request */
    CURLM *multi;
    CURL *easy;
    char error[CURL_ERROR_SIZE];
    long status;
    struct curl_slist *in_headers;   /* the server's answer's headers */
    int headers_done, done, paused;
    CURLcode result;
    char *buf;               /* the server's bytes not yet given to the client */
    size_t buf_len, buf_off;
    uint64_t sent;
    double t0;
    proxy_turn turn;
} proxy_req;

/* proxy_turn.c: before the request goes to the server (restore; the body may gain the slot it
 * was pinned to) and after its answer went back (the raw save, queued). */
void proxy_turn_begin(proxy_req *r, const char *method, const char *path);
void proxy_turn_end(proxy_req *r, int completed);
/* A request body's prompt as token ids (malloc'd): 1; 0 where it is not a list (a text, or
 * none); -1 where it is a list of anything but token ids (0 .. 2^31 - 1). */
int proxy_prompt_array(const json_t *body, int32_t **tokens, uint32_t *n);
/* The answer's bytes as they pass: timings.prompt_n is read from them. */
void proxy_turn_scan(proxy_turn *t, const char *p, size_t n);

/* proxy_saver.c: the queue of slot files and the thread that stores them. */
int proxy_saver_start(tq_proxy *p);
/* Queues a slot file (0), or refuses it (-1: too many pending, the file removed). */
int proxy_saver_queue(tq_proxy *p, long slot, long id_task, const char *path, double raw_s);
/* Lets the queue empty (at most drain_s), then ends the thread. */
void proxy_saver_stop(tq_proxy *p);

/* proxy_metrics.c: the counters in Prometheus' text format (malloc'd). */
char *proxy_metrics_text(tq_proxy *p);

/* A log line, printf-formatted. */
void proxy_log(const tq_proxy *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
