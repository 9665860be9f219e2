/* kv_snapshot_view.c - any KV file as a view, .tqkv snapshots included, for
 * the readers of KV data (calibration, benchmarks) that take snapshots beside
 * state files. */
#include "kv_snapshot.h"
#include "kv_source.h"

#include <stdio.h>
#include <string.h>

tq_status tq_kv_open_any(tq_ctx *ctx, const char *path, tq_type_profile profile, tq_kv_view **v, int *has_fp,
                         uint64_t *fp)
{
    *v = NULL, *has_fp = 0, *fp = 0;
    char magic[4] = {0};
    FILE *pf = fopen(path, "rb");
    if (pf) {
        if (fread(magic, 1, 4, pf) != 4) magic[0] = 0;
        fclose(pf);
    }
    if (memcmp(magic, "TQKV", 4)) return tq_kv_open(ctx, path, profile, v);
    tqkv_reader *r;
    if (tqkv_open(ctx, path, &r)) return tq_ctx_status(ctx);
    *has_fp = tqkv_meta_of(r)->has_fingerprint, *fp = tqkv_meta_of(r)->fingerprint;
    tq_status st = tq_kvsnap_open_view(ctx, r, "/tmp/tq-snapshot", v);
    tqkv_close(r);
    if (!st) st = tq_kv_view_relabel(ctx, *v, path);
    if (st) {
        tq_kv_close(*v);
        *v = NULL;
    }
    return st;
}
