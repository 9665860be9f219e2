/* llama_server.c - see llama_server.h. */
#include "llama_server.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct answer {
    char *body;
    size_t len;
} answer;

static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    answer *a = user;
    size_t n = size * nmemb;
    char *b = realloc(a->body, a->len + n + 1);
    if (!b) return 0;
    memcpy(b + a->len, p, n);
    a->body = b;
    a->len += n;
    b[a->len] = 0;
    return n;
}

/* One request: *json the answer's JSON (a 2xx answer's), else one line in the context. */
static tq_status call(tq_ctx *ctx, const char *server, const char *path, const char *body,
                      json_t **json)
{
    char url[2048];
    char err[CURL_ERROR_SIZE] = "";
    answer a = {NULL, 0};
    long status = 0;
    size_t n = strlen(server);
    while (n && server[n - 1] == '/') n--;
    snprintf(url, sizeof url, "%.*s%s", (int)n, server, path);
    *json = NULL;
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
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
    if (body) {
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    }
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    tq_status st = TQ_OK;
    json_t *j = a.body ? json_loads(a.body, 0, NULL) : NULL;
    if (cc != CURLE_OK) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: the server did not answer: %s", server,
                              err[0] ? err : curl_easy_strerror(cc));
    } else if (status / 100 != 2) {
        /* llama-server's errors: {"error": {"code": N, "message": "...", "type": "..."}} */
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"),
                                                            "message"));
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s: HTTP %ld: %s", server, path, status,
                              msg ? msg : "no message");
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

tq_status llama_server_model(tq_ctx *ctx, const char *server, char **model_path)
{
    json_t *j;
    tq_status st = call(ctx, server, "/props", NULL, &j);
    if (st) return st;
    const char *p = json_string_value(json_object_get(j, "model_path"));
    int named = p && *p; /* p lives in j: read before j goes */
    *model_path = named ? strdup(p) : NULL;
    json_decref(j);
    if (!named)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /props names no model_path: give --model",
                                server);
    return *model_path ? TQ_OK : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
}

tq_status llama_server_slot(tq_ctx *ctx, const char *server, long slot, const char *action,
                            const char *file, uint32_t *n)
{
    char path[128];
    json_t *j;
    json_t *req = json_pack("{s:s}", "filename", file);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    snprintf(path, sizeof path, "/slots/%ld?action=%s", slot, action);
    tq_status st = call(ctx, server, path, body, &j);
    free(body);
    if (st) return st;
    json_t *count = json_object_get(j, strcmp(action, "save") ? "n_restored" : "n_saved");
    if (n) *n = json_is_integer(count) ? (uint32_t)json_integer_value(count) : 0;
    json_decref(j);
    return TQ_OK;
}

tq_status llama_server_tokenize(tq_ctx *ctx, const char *server, const char *text,
                                int32_t **tokens, uint32_t *n)
{
    json_t *j;
    json_t *req = json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    *tokens = NULL;
    *n = 0;
    if (!body) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = call(ctx, server, "/tokenize", body, &j);
    free(body);
    if (st) return st;
    json_t *arr = json_object_get(j, "tokens");
    size_t len = json_array_size(arr);
    *tokens = malloc((len ? len : 1) * sizeof **tokens);
    if (!*tokens) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < len; i++) {
        json_t *t = json_array_get(arr, i);
        if (!json_is_integer(t))
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: /tokenize: not a token list", server);
        else
            (*tokens)[i] = (int32_t)json_integer_value(t);
    }
    *n = (uint32_t)len;
    json_decref(j);
    if (st) {
        free(*tokens);
        *tokens = NULL;
    }
    return st;
}
