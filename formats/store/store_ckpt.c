/* store_ckpt.c - a server's context checkpoints kept with a stored snapshot (ckpt/NAME) and
 * brought back beside a slot file (store.h, ckpt.h; STORE.md, "Restore points"). */
#include "store.h"

#include "file_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

tq_status tq_store_keep_checkpoints(tq_ctx *ctx, tq_store *s, const char *name, const char *side,
                                    uint64_t limit, uint32_t n_tokens, tq_ckpt_coder code,
                                    void *user, tq_restore_points *pt, int *kept)
{
    uint8_t *raw = NULL;
    uint64_t len = 0;
    tq_ckpt c[TQ_RESTORE_MAX_CHECKPOINTS];
    uint32_t k = 0;
    *kept = 0;
    if (access(side, F_OK)) return TQ_OK;
    int bad = tq_read_regular(ctx, side, limit, &raw, &len) ||
              tq_ckpt_parse(ctx, raw, len, n_tokens, c, &k);
    unlink(side);
    if (bad) {
        free(raw);
        *kept = -1; /* the context says why */
        return TQ_OK;
    }
    uint8_t *packed = NULL;
    uint64_t plen = 0;
    char entry[64 + TQ_STORE_NAME_MAX];
    tq_store_entry(TQ_STORE_CKPT, name, entry, sizeof entry);
    tq_status st = k ? tq_ckpt_pack(ctx, raw, c, k, code, user, &packed, &plen) : TQ_OK;
    if (!st && k) st = tq_store_put(ctx, s, entry, packed, plen);
    pt->n_checkpoints = 0;
    for (uint32_t i = 0; !st && i < k; i++) /* tq_ckpt_parse checked each: ascending, in range */
        tq_restore_points_add_checkpoint(pt, n_tokens, (uint32_t)c[i].n_tokens);
    *kept = !st && k;
    free(packed);
    free(raw);
    return st;
}

tq_status tq_store_load_checkpoints(tq_ctx *ctx, tq_store *s, const char *name,
                                    uint32_t n_tokens, uint32_t at, tq_ckpt_decoder decode,
                                    void *user, tq_store_ckpts *k)
{
    char entry[64 + TQ_STORE_NAME_MAX];
    char *stored;
    uint64_t len;
    int found;
    memset(k, 0, sizeof *k);
    tq_store_entry(TQ_STORE_CKPT, name, entry, sizeof entry);
    tq_status st = tq_store_get_max(ctx, s, entry, TQ_STORE_CKPT_MOST, &stored, &len, &found);
    if (!st && !found && at)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: its checkpoints are gone", name);
    if (st || !found) return st;
    st = tq_ckpt_unpack(ctx, (const uint8_t *)stored, len, TQ_STORE_CKPT_MOST, decode, user,
                        &k->side, &k->side_len);
    free(stored);
    if (!st) st = tq_ckpt_parse(ctx, k->side, k->side_len, n_tokens, k->c, &k->count);
    for (uint32_t i = 0; !st && at && i < k->count; i++) {
        if (k->c[i].n_tokens != (int64_t)at) continue;
        uint64_t tgt;
        memcpy(&tgt, k->side + k->c[i].off + 16, 8);
        k->partial = k->side + k->c[i].off + 32;
        k->partial_len = tgt;
        if (tgt >= 8 && tq_ckpt_blob_header(k->partial)) { /* newer llama.cpp's in-memory form */
            k->partial += 8;
            k->partial_len -= 8;
        }
    }
    if (!st && at && !k->partial)
        st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s: no checkpoint at %u tokens", name, at);
    if (st) tq_store_ckpts_free(k);
    return st;
}

tq_status tq_store_write_checkpoints(tq_ctx *ctx, const tq_store_ckpts *k, uint32_t upto,
                                     const char *path)
{
    uint8_t *p;
    uint64_t len;
    uint32_t kept;
    if (!k->side) return TQ_OK;
    tq_status st = tq_ckpt_upto(ctx, k->side, k->c, k->count, upto, &p, &len, &kept);
    if (st || !kept) {
        free(p);
        return st;
    }
    FILE *f = fopen(path, "wbx"); /* a name of tq's own beside its slot file: never replaced */
    int bad = !f || fwrite(p, 1, len, f) != len;
    if (f && fclose(f)) bad = 1;
    free(p);
    if (bad) unlink(path);
    return bad ? tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot write the checkpoints", path)
               : TQ_OK;
}

void tq_store_ckpts_free(tq_store_ckpts *k)
{
    free(k->side);
    memset(k, 0, sizeof *k);
}
