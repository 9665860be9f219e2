/* llama_server.h - what tq asks a running llama-server (tools/server of llama.cpp): its model,
 * a slot saved to or restored from a file in its --slot-save-path, a text's tokens.  HTTP is
 * libcurl's and JSON jansson's.  The server is not trusted: every request has a total and a
 * stall timeout, every answer a size limit, numbers are range-checked, and the server's text
 * reaches a message with its control characters escaped.  Every failure is one line in the
 * context: the server unreachable or too slow, or its answer's status and message. */
#ifndef TQ_LLAMA_SERVER_H
#define TQ_LLAMA_SERVER_H

#include "tq.h"

#include <stdint.h>

/* Seconds a small request (/props) may take at most; the slot actions and /tokenize take
 * the server's timeout_s. */
#define LLAMA_SERVER_SMALL_TIMEOUT 30L
/* Seconds without a byte after which a request is given up. */
#define LLAMA_SERVER_STALL 30L

typedef struct llama_server {
    const char *url; /* http://host:port */
    long timeout_s;  /* a save, restore or tokenization at most (tq slot --timeout) */
    const char *authorization; /* an Authorization header's value to send (NULL: none) */
} llama_server;

/* GET /props: the build the server names ("b<count>-<commit>"; "" where it names none). */
tq_status llama_server_build(tq_ctx *ctx, const llama_server *srv, char *build, size_t size);
/* GET /props: the model file the server loaded (malloc'd). */
tq_status llama_server_model(tq_ctx *ctx, const llama_server *srv, char **model_path);
/* POST /slots/SLOT?action=save|restore {"filename": FILE}; *n the answer's n_saved or
 * n_restored (0 .. 2^31 - 1; may be NULL). */
tq_status llama_server_slot(tq_ctx *ctx, const llama_server *srv, long slot, const char *action,
                            const char *file, uint32_t *n);
/* POST /tokenize {"content": TEXT, "add_special": true}: the tokens /completion makes of it
 * (malloc'd; each 0 .. 2^31 - 1). */
tq_status llama_server_tokenize(tq_ctx *ctx, const llama_server *srv, const char *text,
                                int32_t **tokens, uint32_t *n);

/* POST /apply-template with a chat request's JSON body: the prompt text its template makes
 * (malloc'd), what /v1/chat/completions then tokenizes. */
tq_status llama_server_apply_template(tq_ctx *ctx, const llama_server *srv, const char *body,
                                      char **prompt);

/* What GET /slots says of a slot. */
typedef struct llama_server_slot_state {
    long id;
    long id_task;      /* its last task (-1: none since the server started) */
    uint32_t n_tokens; /* the tokens its cache holds (n_prompt_tokens) */
    int processing;
} llama_server_slot_state;
/* GET /slots (malloc'd, *n of them; at most 4096). */
tq_status llama_server_slots(tq_ctx *ctx, const llama_server *srv,
                             llama_server_slot_state **slots, uint32_t *n);
/* The same from an answer's bytes (the parse alone; url names the server in messages). */
tq_status llama_server_slots_parse(tq_ctx *ctx, const char *url, const char *text, size_t len,
                                   llama_server_slot_state **slots, uint32_t *n);
/* POST /completion {"prompt": TOKENS, "n_predict": 0, "id_slot": SLOT}: the slot's cache made
 * to hold the prompt, nothing generated (a restore point at the prompt's end); *processed the
 * prompt tokens the server processed for it (timings.prompt_n; may be NULL). */
tq_status llama_server_prefill(tq_ctx *ctx, const llama_server *srv, long slot,
                               const int32_t *tokens, uint32_t n, uint32_t *processed);

#endif
