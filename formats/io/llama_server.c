/* llama_server.c - see llama_server.h. */
#include "llama_server.h"

#include <curl/curl.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most an answer may hold: /props with a chat template, a slot action's few numbers;
 * /tokenize of a long prompt (about 12 bytes a token). */
enum { PROPS_MOST = 4 << 20, SLOT_MOST = 64 << 10 };
#define TOKENIZE_MOST (256ull << 20)

typedef struct answer {
    char *body;
    size_t len;
    size_t most;
    int too_long;
} answer;

static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    answer *a = user;
    size_t n = size * nmemb;
    if (a->len + n > a->most) {
        a->too_long = 1;
        return 0; /* the transfer stops here */
    }
    char *b = realloc(a->body, a->len + n + 1);
    if (!b) return 0;
    memcpy(b + a->len, p, n);
    a->body = b;
    a->len += n;
    b[a->len] = 0;
    return n;
}

/* The server's text as a message may carry it: control characters and bytes past ASCII as
 * \xNN, at most n - 1 bytes. */
static void escaped(const char *text, char *out, size_t n)
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && k + 5 < n; p++) {
        if (*p >= 0x20 && *p < 0x7f)
            out[k++] = (char)*p;
        else
            k += (size_t)snprintf(out + k, n - k, "\\x%02x", *p);
    }
    out[k] = 0;
}

/* One request: *json the answer's JSON (a 2xx answer's), else one line in the context; given
 * up after stall_s seconds without a byte (0: never, a prompt's processing says nothing). */
static tq_status call_ex(tq_ctx *ctx, const llama_server *srv, const char *path,
                         const char *body, long timeout_s, long stall_s, size_t most,
                         json_t **json)
{
    char url[2048];
    char err[CURL_ERROR_SIZE] = "";
    answer a = {NULL, 0, most, 0};
    long status = 0;
    const char *server = srv->url;
    size_t n = strlen(server);
    while (n && server[n - 1] == '/') n--;
    snprintf(url, sizeof url, "%.*s%s", (int)n, server, path);
    *json = NULL;
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[1024];
    if (hdr && srv->authorization) {
        snprintf(auth, sizeof auth, "Authorization: %s", srv->authorization);
        struct curl_slist *more = curl_slist_append(hdr, auth);
        if (!more) curl_slist_free_all(hdr);
        hdr = more;
    }
    if (!h || !hdr) {
        curl_slist_free_all(hdr);
        if (h) curl_easy_cleanup(h);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, stall_s ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall_s);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    tq_status st = TQ_OK;
    json_t *j = a.body ? json_loads(a.body, 0, NULL) : NULL;
    char said[512];
    if (a.too_long) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s: an answer of more than %zu bytes",
                              server, path, most);
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s: no answer within %ld s (or %ld s without "
                              "a byte): give --timeout",
                              server, path, timeout_s, stall_s ? stall_s : timeout_s);
    } else if (cc != CURLE_OK) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the server did not answer: %s", server,
                              err[0] ? err : curl_easy_strerror(cc));
    } else if (status / 100 != 2) {
        /* llama-server's errors: {"error": {"code": N, "message": "...", "type": "..."}} */
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"),
                                                            "message"));
        escaped(msg ? msg : "no message", said, sizeof said);
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s: HTTP %ld: %s", server, path, status, said);
    } else if (!j) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s: the answer is not JSON", server, path);
    }
    free(a.body);
    if (st) {
        json_decref(j);
        return st;
    }
    *json = j;
    return TQ_OK;
}

static tq_status call(tq_ctx *ctx, const llama_server *srv, const char *path, const char *body,
                      long timeout_s, size_t most, json_t **json)
{
    return call_ex(ctx, srv, path, body, timeout_s, LLAMA_SERVER_STALL, most, json);
}

tq_status llama_server_model(tq_ctx *ctx, const llama_server *srv, char **model_path)
{
    json_t *j;
    long t = srv->timeout_s < LLAMA_SERVER_SMALL_TIMEOUT ? srv->timeout_s
                                                          : LLAMA_SERVER_SMALL_TIMEOUT;
    tq_status st = call(ctx, srv, "/props", NULL, t, PROPS_MOST, &j);
    if (st) return st;
    const char *p = json_string_value(json_object_get(j, "model_path"));
    int named = p && *p; /* p lives in j: read before j goes */
    *model_path = named ? strdup(p) : NULL;
    json_decref(j);
    if (!named)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /props names no model_path: give --model",
                                srv->url);
    return *model_path ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
}

tq_status llama_server_build(tq_ctx *ctx, const llama_server *srv, char *build, size_t size)
{
    json_t *j;
    long t = srv->timeout_s < LLAMA_SERVER_SMALL_TIMEOUT ? srv->timeout_s
                                                          : LLAMA_SERVER_SMALL_TIMEOUT;
    build[0] = 0;
    tq_status st = call(ctx, srv, "/props", NULL, t, PROPS_MOST, &j);
    if (st) return st;
    const char *b = json_string_value(json_object_get(j, "build_info"));
    if (b) snprintf(build, size, "%s", b);
    json_decref(j);
    return TQ_OK;
}

tq_status llama_server_slot(tq_ctx *ctx, const llama_server *srv, long slot, const char *action,
                            const char *file, uint32_t *n)
{
    char path[128];
    json_t *j;
    json_t *req = json_pack("{s:s}", "filename", file);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    snprintf(path, sizeof path, "/slots/%ld?action=%s", slot, action);
    tq_status st = call(ctx, srv, path, body, srv->timeout_s, SLOT_MOST, &j);
    free(body);
    if (st) return st;
    const char *key = strcmp(action, "save") ? "n_restored" : "n_saved";
    json_t *count = json_object_get(j, key);
    json_int_t v = json_is_integer(count) ? json_integer_value(count) : -1;
    if (!count || (json_is_integer(count) && v >= 0 && v <= INT32_MAX)) {
        if (n) *n = count ? (uint32_t)v : 0;
    } else {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s: %s is not a count of tokens",
                              srv->url, path, key);
    }
    json_decref(j);
    return st;
}

tq_status llama_server_tokenize(tq_ctx *ctx, const llama_server *srv, const char *text,
                                int32_t **tokens, uint32_t *n)
{
    json_t *j;
    json_t *req = json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    *tokens = NULL;
    *n = 0;
    if (!body) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = call(ctx, srv, "/tokenize", body, srv->timeout_s, TOKENIZE_MOST, &j);
    free(body);
    if (st) return st;
    json_t *arr = json_object_get(j, "tokens");
    size_t len = json_array_size(arr);
    if (!json_is_array(arr) || len > UINT32_MAX)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /tokenize: not a token list", srv->url);
    size_t cap = len ? len : 1;
    *tokens = st ? NULL : malloc(cap * sizeof **tokens);
    if (!st && !*tokens) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < len; i++) {
        json_t *t = json_array_get(arr, i);
        json_int_t v = json_is_integer(t) ? json_integer_value(t) : -1;
        if (v < 0 || v > INT32_MAX)
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /tokenize: token %zu is not a token id",
                                  srv->url, i);
        else
            (*tokens)[i] = (int32_t)v;
    }
    *n = (uint32_t)len;
    json_decref(j);
    if (st) {
        free(*tokens);
        *tokens = NULL;
    }
    return st;
}

tq_status llama_server_apply_template(tq_ctx *ctx, const llama_server *srv, const char *body,
                                      char **prompt)
{
    json_t *j;
    *prompt = NULL;
    tq_status st = call(ctx, srv, "/apply-template", body, srv->timeout_s, TOKENIZE_MOST, &j);
    if (st) return st;
    const char *p = json_string_value(json_object_get(j, "prompt"));
    *prompt = p ? strdup(p) : NULL;
    json_decref(j);
    if (!p)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /apply-template: no prompt", srv->url);
    return *prompt ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
}

/* A JSON number as a count in [lo, hi], else fallback. */
static long count_of(const json_t *v, long lo, long hi, long fallback)
{
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : fallback;
    return x >= lo && x <= hi ? (long)x : fallback;
}

enum { SLOTS_MOST = 4096 };

/* /slots' answer (j) as slot states. */
static tq_status slots_of(tq_ctx *ctx, const char *url, const json_t *j,
                          llama_server_slot_state **slots, uint32_t *n)
{
    tq_status st = TQ_OK;
    size_t len = json_array_size(j);
    *slots = NULL;
    *n = 0;
    if (!json_is_array(j) || len > SLOTS_MOST)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /slots: not a list of slots", url);
    size_t cap = len ? len : 1;
    *slots = calloc(cap, sizeof **slots);
    if (!*slots) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < len; i++) {
        json_t *e = json_array_get(j, i);
        llama_server_slot_state *s = &(*slots)[i];
        s->id = count_of(json_object_get(e, "id"), 0, SLOTS_MOST - 1, -1);
        s->id_task = count_of(json_object_get(e, "id_task"), 0, INT32_MAX, -1);
        s->n_tokens = (uint32_t)count_of(json_object_get(e, "n_prompt_tokens"), 0, INT32_MAX, 0);
        s->processing = json_is_true(json_object_get(e, "is_processing"));
        if (s->id < 0)
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /slots: slot %zu has no id", url, i);
    }
    if (st) {
        free(*slots);
        *slots = NULL;
        return st;
    }
    *n = (uint32_t)len;
    return TQ_OK;
}

tq_status llama_server_slots_parse(tq_ctx *ctx, const char *url, const char *text, size_t len,
                                   llama_server_slot_state **slots, uint32_t *n)
{
    json_t *j = json_loadb(text, len, 0, NULL);
    *slots = NULL;
    *n = 0;
    if (!j) return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /slots: the answer is not JSON", url);
    tq_status st = slots_of(ctx, url, j, slots, n);
    json_decref(j);
    return st;
}

tq_status llama_server_slots(tq_ctx *ctx, const llama_server *srv,
                             llama_server_slot_state **slots, uint32_t *n)
{
    json_t *j;
    long t = srv->timeout_s < LLAMA_SERVER_SMALL_TIMEOUT ? srv->timeout_s
                                                          : LLAMA_SERVER_SMALL_TIMEOUT;
    *slots = NULL;
    *n = 0;
    tq_status st = call(ctx, srv, "/slots", NULL, t, PROPS_MOST, &j);
    if (st) return st;
    st = slots_of(ctx, srv->url, j, slots, n);
    json_decref(j);
    return st;
}

tq_status llama_server_prefill(tq_ctx *ctx, const llama_server *srv, long slot,
                               const int32_t *tokens, uint32_t n, uint32_t *processed)
{
    json_t *arr = json_array();
    for (uint32_t i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, json_integer(tokens[i]))) {
            json_decref(arr);
            arr = NULL;
        }
    json_t *req = arr ? json_pack("{s:o, s:i, s:I, s:b}", "prompt", arr, "n_predict", 0,
                                  "id_slot", (json_int_t)slot, "cache_prompt", 1)
                      : NULL;
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    json_t *j;
    tq_status st = call_ex(ctx, srv, "/completion", body, srv->timeout_s, 0, TOKENIZE_MOST, &j);
    free(body);
    if (st) return st;
    json_t *pn = json_object_get(json_object_get(j, "timings"), "prompt_n");
    if (processed) *processed = (uint32_t)count_of(pn, 0, INT32_MAX, 0);
    json_decref(j);
    return TQ_OK;
}
