/* kv_snapshot_view.c - a .tqkv snapshot as a KV view, for the readers of KV
 * data (calibration, benchmarks) that take snapshots beside state files. */
#include "kv_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tq_status open_snapshot(tq_ctx *ctx, const char *path, tq_type_profile profile, tq_kv_view **v, char **mem,
                               int *has_fp, uint64_t *fp)
{
    tqkv_reader *r;
    if (tqkv_open(ctx, path, &r)) return tq_ctx_status(ctx);
    const tqkv_meta *m = tqkv_meta_of(r);
    *has_fp = m->has_fingerprint, *fp = m->fingerprint;
    size_t len = 0;
    FILE *f = open_memstream(mem, &len);
    tq_kvsnap_decode_options d = {.threads = 0};
    tq_kvsnap_restore_options ro = {.format = (tq_kv_kind)m->source_kind, .tmp_near = "/tmp/tq-snapshot"};
    tq_status st = f ? tq_kvsnap_restore(ctx, r, NULL, &d, &ro, f) : tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (f) fclose(f);
    tqkv_close(r);
    if (!st) st = tq_kv_open_memory(ctx, *mem, len, path, profile, v);
    return st;
}

tq_status tq_kv_open_any(tq_ctx *ctx, const char *path, tq_type_profile profile, tq_kv_view **v, char **mem, int *has_fp,
                         uint64_t *fp)
{
    *v = NULL, *mem = NULL, *has_fp = 0, *fp = 0;
    char magic[4] = {0};
    FILE *pf = fopen(path, "rb");
    if (pf) {
        if (fread(magic, 1, 4, pf) != 4) magic[0] = 0;
        fclose(pf);
    }
    tq_status st = !memcmp(magic, "TQKV", 4) ? open_snapshot(ctx, path, profile, v, mem, has_fp, fp)
                                             : tq_kv_open(ctx, path, profile, v);
    if (st) {
        free(*mem);
        *mem = NULL;
    }
    return st;
}
