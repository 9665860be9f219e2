/* fuzz_proxy_answers.c - what tq slot proxy reads of untrusted bytes it does not hand to a
 * library whole: a server's /slots answer (llama_server_slots_parse), a request body's token
 * prompt (proxy_prompt_array) and an answer's timings as they pass in two pieces
 * (proxy_turn_scan). */
#include "llama_server.h"
#include "proxy_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_ctx *ctx = tq_ctx_new();
    llama_server_slot_state *slots = NULL;
    uint32_t n = 0;
    if (!ctx) return 0;
    if (!llama_server_slots_parse(ctx, "fuzz", (const char *)data, size, &slots, &n))
        for (uint32_t i = 0; i < n; i++)
            if (slots[i].id < 0 || slots[i].id_task < -1) abort();
    free(slots);
    json_t *body = json_loadb((const char *)data, size, 0, NULL);
    int32_t *tokens = NULL;
    uint32_t nt = 0;
    if (proxy_prompt_array(body, &tokens, &nt) > 0)
        for (uint32_t i = 0; i < nt; i++)
            if (tokens[i] < 0) abort();
    free(tokens);
    json_decref(body);
    proxy_turn t;
    memset(&t, 0, sizeof t);
    t.prompt_n = -1;
    size_t cut = size ? data[0] % (size + 1) : 0;
    proxy_turn_scan(&t, (const char *)data, cut);
    proxy_turn_scan(&t, (const char *)data + cut, size - cut);
    tq_ctx_free(ctx);
    return 0;
}
