/* llama_server.h - what tq asks a running llama-server (tools/server of llama.cpp): its model,
 * a slot saved to or restored from a file in its --slot-save-path, a text's tokens.  HTTP is
 * libcurl's and JSON jansson's.  Every failure is one line in the context: the server
 * unreachable, or its answer's status and message. */
#ifndef TQ_LLAMA_SERVER_H
#define TQ_LLAMA_SERVER_H

#include "tq.h"

#include <stdint.h>

/* GET /props: the model file the server loaded (malloc'd). */
tq_status llama_server_model(tq_ctx *ctx, const char *server, char **model_path);
/* POST /slots/SLOT?action=save|restore {"filename": FILE}; *n the answer's n_saved or
 * n_restored (may be NULL). */
tq_status llama_server_slot(tq_ctx *ctx, const char *server, long slot, const char *action,
                            const char *file, uint32_t *n);
/* POST /tokenize {"content": TEXT, "add_special": true}: the tokens /completion makes of it
 * (malloc'd). */
tq_status llama_server_tokenize(tq_ctx *ctx, const char *server, const char *text,
                                int32_t **tokens, uint32_t *n);

#endif
