/* kv_snapshot_view.c - a .tqkv snapshot as a KV source: a bidder like the
 * byte formats', for the readers of KV data (calibration, benchmarks) that
 * take snapshots beside state files.  Opening decodes the snapshot into an
 * unlinked file in the temporary directory and maps it, so memory stays
 * bounded as for any mapped source. */
#include "file_io.h"
#include "io.h"
#include "kv_snapshot.h"
#include "kv_source.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static int probe_snapshot(const uint8_t *p, uint64_t size)
{
    return size >= 4 && !memcmp(p, "TQKV", 4) ? 100 : 0;
}

/* The decoded state's view takes v's place; v keeps its label and source. */
static tq_status open_snapshot(tq_ctx *ctx, tq_kv_view *v, uint64_t max_bytes)
{
    (void)max_bytes; /* the decoded file is mapped, not read into memory */
    tqkv_reader *r;
    tq_status st = tqkv_open_memory(ctx, v->map, (size_t)v->size, v->label, &r);
    if (st) return st;
    char near[4096];
    snprintf(near, sizeof near, "%s/tq-snapshot", tq_temp_dir());
    tq_kv_view *inner = NULL;
    st = tq_kvsnap_open_view(ctx, r, near, &inner);
    int has_fp = tqkv_meta_of(r)->has_fingerprint;
    uint64_t fp = tqkv_meta_of(r)->fingerprint;
    tqkv_close(r);
    if (st) return st;
    tq_kv_view outer = *v;
    *v = *inner;
    *inner = outer; /* closing inner now releases the snapshot's bytes */
    char *decoded_label = v->label; /* the unlinked file's: messages name the snapshot */
    v->label = inner->label;
    inner->label = decoded_label;
    v->source = outer.source;
    v->profile = outer.profile;
    v->has_fingerprint = has_fp;
    v->fingerprint = fp;
    tq_kv_view_close(inner);
    return TQ_OK;
}

const tq_kv_source tq_kv_source_snapshot = {"tq snapshot", probe_snapshot, open_snapshot};

static int snapshot_magic(const uint8_t *head, size_t n) { return tqkv_is_snapshot(head, n); }

tq_status tq_kvsnap_open_mapped(tq_ctx *ctx, const char *name, tqkv_reader **out)
{
    char *tmp;
    const char *local;
    tq_status st = tq_io_local(ctx, name, snapshot_magic, &tmp, &local);
    if (!st) st = tqkv_open(ctx, local, out);
    tq_temp_discard(tmp); /* mapped: the bytes stay while it is open */
    return st;
}

static int state_or_snapshot_magic(const uint8_t *head, size_t n)
{
    return tq_kv_view_probe(head, n) || probe_snapshot(head, n);
}

tq_status tq_kvsnap_open_any(tq_ctx *ctx, const char *name, tq_type_profile profile,
                             tq_kv_view **out)
{
    const tq_kv_source *sources[8];
    size_t n = 0;
    for (size_t i = 0; i < tq_kv_n_byte_sources && n < 7; i++) sources[n++] = tq_kv_byte_sources[i];
    sources[n++] = &tq_kv_source_snapshot;
    char *tmp;
    const char *local;
    *out = NULL;
    tq_status st = tq_io_local(ctx, name, state_or_snapshot_magic, &tmp, &local);
    if (!st) st = tq_kv_view_open_from(ctx, local, name, profile, sources, n, out);
    tq_temp_discard(tmp); /* mapped: the bytes stay while it is open */
    return st;
}

void tq_kvsnap_layout_close(tq_kvsnap_layout *l)
{
    tq_kv_view_close(l->v);
    if (l->map) munmap(l->map, l->size ? l->size : 1);
    memset(l, 0, sizeof *l);
}

tq_status tq_kvsnap_layout_open(tq_ctx *ctx, const tqkv_reader *r, tq_kvsnap_layout *l)
{
    const tqkv_meta *m = tqkv_meta_of(r);
    memset(l, 0, sizeof *l);
    l->size = (size_t)m->source_size;
    void *map = mmap(NULL, l->size ? l->size : 1, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    l->map = map;
    uint64_t at = 0;
    uint64_t sk = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        uint64_t gap = m->t[i].file_off - at;
        if (m->t[i].file_off < at || gap > m->skeleton_len - sk) break;
        memcpy(l->map + at, m->skeleton + sk, gap);
        sk += gap;
        at = m->t[i].file_off + m->t[i].bytes;
    }
    if (at <= m->source_size && m->skeleton_len - sk <= m->source_size - at)
        memcpy(l->map + at, m->skeleton + sk, m->skeleton_len - sk);
    tq_type_profile prof = TQ_PROFILE_AUTO;
    if (tq_type_profile_parse(m->profile, &prof))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "unknown type-id profile");
    return tq_kv_view_open_memory(ctx, l->map, l->size, "the snapshot's layout", prof, &l->v);
}
