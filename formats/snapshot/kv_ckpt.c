/* kv_ckpt.c - a server's context checkpoint coded as a snapshot for the store (ckpt.h): its
 * partial state (a sliding-window cache's section, or a recurrent state) wrapped as a sequence
 * file of the checkpoint's first tokens, and encoded as any state; decoded and unwrapped back. */
#include "kv_snapshot.h"
#include "llama_state.h"
#include "tqkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WRAP_HEAD = 12 }; /* u32 magic, u32 version, u32 n_tokens; the tokens follow */

tq_status tq_kvsnap_ckpt_code(void *user, const uint8_t *blob, uint64_t n, int64_t n_tokens,
                              uint8_t **coded, uint64_t *coded_len)
{
    tq_kvsnap_ckpt_coding *k = user;
    *coded = NULL;
    if (n_tokens <= 0 || (uint64_t)n_tokens > k->n_tokens) return TQ_OK;
    uint64_t head = WRAP_HEAD + 4ull * (uint64_t)n_tokens;
    uint8_t *wrapped = malloc(head + n);
    if (!wrapped) return tq_ctx_set_error(k->ctx, TQ_ERR_NOMEM, "out of memory");
    uint32_t fields[3] = {TQ_GGSQ_MAGIC, k->state_version, (uint32_t)n_tokens};
    memcpy(wrapped, fields, WRAP_HEAD);
    memcpy(wrapped + WRAP_HEAD, k->tokens, 4ull * (uint64_t)n_tokens);
    memcpy(wrapped + head, blob, n);
    tq_kv_view *v = NULL;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = NULL;
    /* a partial state the readers do not take, or the plan cannot code, is kept as it is */
    if (!tq_kv_view_open_memory(k->ctx, wrapped, head + n, "a checkpoint", TQ_PROFILE_AUTO,
                                &v))
        f = open_memstream(&out, &out_len);
    tq_kvsnap_report rep;
    int coded_ok = f && !tq_kvsnap_encode(k->ctx, v, k->request, k->inputs, k->run, f, &rep);
    if (f && fclose(f)) coded_ok = 0;
    tq_kv_view_close(v);
    free(wrapped);
    if (coded_ok && out_len < n) {
        *coded = (uint8_t *)out;
        *coded_len = out_len;
        return TQ_OK;
    }
    free(out);
    return TQ_OK;
}

tq_status tq_kvsnap_ckpt_decode(void *user, const uint8_t *coded, uint64_t n, int64_t n_tokens,
                                uint8_t **blob, uint64_t *blob_len)
{
    tq_kvsnap_ckpt_coding *k = user;
    tqkv_reader *r;
    tq_status st = tqkv_open_memory(k->ctx, coded, (size_t)n, "a stored checkpoint", &r);
    if (st) return st;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    tq_kvsnap_decode_options d = {.threads = k->run ? k->run->threads : 0};
    if (!f) st = tq_ctx_set_error(k->ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) st = tq_kvsnap_decode(k->ctx, r, NULL, &d, f);
    if (f && fclose(f) && !st) st = tq_ctx_set_error(k->ctx, TQ_ERR_NOMEM, "out of memory");
    tqkv_close(r);
    uint64_t head = WRAP_HEAD + 4ull * (uint64_t)(n_tokens > 0 ? n_tokens : 0);
    uint32_t fields[3] = {0, 0, 0};
    if (!st && out_len >= WRAP_HEAD) memcpy(fields, out, WRAP_HEAD);
    if (!st && (out_len < head || fields[0] != TQ_GGSQ_MAGIC || fields[2] != (uint64_t)n_tokens))
        st = tq_ctx_set_error(k->ctx, TQ_ERR_CORRUPT,
                              "a stored checkpoint of %lld tokens decodes to another state",
                              (long long)n_tokens);
    if (st) {
        free(out);
        return st;
    }
    memmove(out, out + head, out_len - head);
    *blob = (uint8_t *)out;
    *blob_len = out_len - head;
    return TQ_OK;
}
