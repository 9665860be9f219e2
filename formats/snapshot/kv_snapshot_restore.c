/* kv_snapshot_restore.c - a snapshot as another kind of file than its source (session <->
 * sequence file, .npz), a token prefix or a layer range (tq_kvsnap_restore), or as a KV view:
 * decoded (kv_snapshot_decode.c) into an intermediate file, opened through the front door and
 * written by the writer of the kind asked for. */
#include "file_io.h"
#include "kv_layers.h"
#include "kv_numpy.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "restore_point.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Rows past a token prefix were left out on the guess that cell i holds at
 * most position i (one sequence, as after a prompt): does the view bear it
 * out? */
static int prefix_fits(tq_ctx *ctx, const tq_kv_view *v, uint32_t max_rows)
{
    for (uint32_t i = 0; max_rows && i < tq_kv_view_n_kv(v); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(v, i)->n_stream; j++) {
            uint32_t n;
            const tq_kv_stream *sr = &tq_kv_view_kv(v, i)->streams[j];
            if (sr->cell_count && !tq_kv_view_stream_prefix(ctx, v, sr, max_rows, &n, NULL) &&
                n > max_rows)
                return 0;
        }
    return 1;
}

/* The snapshot decoded into an intermediate file and opened as a view. */
static tq_status decode_to_view(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                                const tq_kvsnap_decode_options *d, const char *near,
                                tq_kv_view **out)
{
    tq_kvsnap_decode_options dopt = *d;
    tq_type_profile prof = TQ_PROFILE_DEFAULT; /* the source's revision, as the snapshot says */
    tq_type_profile_parse(tqkv_meta_of(r)->profile, &prof);
    if (d->cache_type) /* converted to turbo rows: for the newest revision unless told */
        prof = TQ_PROFILE_NEWEST;
    if (d->fork_rev) /* turbo rows written for this revision, converted where they were not */
        tq_type_profile_parse(d->fork_rev, &prof);
    for (;;) {
        char *tmp = NULL;
        FILE *tf;
        tq_status st = tq_temp_create(ctx, near, &tmp, &tf);
        if (st) return st;
        st = tq_kvsnap_decode(ctx, r, base, &dopt, tf);
        if (fflush(tf) && !st) st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing failed", tmp);
        if (!st) st = tq_kv_view_open(ctx, tmp, prof, out);
        unlink(tmp); /* the mapping stays valid, and an unlinked file is not synced */
        tq_temp_forget(tmp);
        fclose(tf);
        free(tmp);
        if (st || prefix_fits(ctx, *out, dopt.max_rows)) return st;
        tq_kv_view_close(*out);
        *out = NULL;
        dopt.max_rows = 0; /* several sequences share positions: decode all */
    }
}

tq_status tq_kvsnap_open_view(tq_ctx *ctx, const tqkv_reader *r, const char *tmp_near,
                              tq_kv_view **out)
{
    tq_kvsnap_decode_options d = {.threads = 0};
    const tqkv_meta *m = tqkv_meta_of(r);
    tq_status st = tq_kvsnap_check_base(ctx, m, NULL);
    return st ? st : decode_to_view(ctx, r, NULL, &d, tmp_near, out);
}

/* A checkpoint's partial state spliced in, then the whole written again with the pad cells
 * below its windows (a checkpoint's sliding-window cache holds a window too); the spliced
 * state is opened through the front door, which checks the checkpoint's bytes. */
static tq_status write_spliced(tq_ctx *ctx, const tq_kv_view *v, const tq_state_rewrite *rw,
                               FILE *out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_state_rewrite first = *rw;
    first.pad_window = 0;
    tq_status st = tq_llama_state_write(ctx, v, &first, mem);
    if (fclose(mem) && !st) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_kv_view *spliced = NULL;
    if (!st)
        st = tq_kv_view_open_memory(ctx, buf, len, "the state with its checkpoint",
                                    tq_kv_view_profile(v), &spliced);
    tq_state_rewrite again = {rw->kind, rw->arch, 0, rw->pad_window, NULL, 0};
    if (!st) st = tq_llama_state_write(ctx, spliced, &again, out);
    tq_kv_view_close(spliced);
    free(buf);
    return st;
}

/* Whether padding windows (ro->pad_window) leaves the whole state as it was: no stream holds a
 * window's cells alone (a dense model's, or a --swa-full server's), told from the snapshot's
 * cells without decoding a row. */
static int pads_nothing(tq_ctx *ctx, const tqkv_reader *r, const tq_kvsnap_restore_options *ro)
{
    if (!ro->pad_window) return 1;
    tq_kvsnap_layout l;
    int none = !tq_kvsnap_layout_open(ctx, r, &l) && !tq_restore_pads(l.v, ro->pad_window);
    tq_kvsnap_layout_close(&l);
    tq_ctx_clear_error(ctx); /* a layout that does not open: the slower path reports it */
    return none;
}

tq_status tq_kvsnap_restore(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                            const tq_kvsnap_decode_options *d, const tq_kvsnap_restore_options *ro,
                            FILE *out)
{
    const tqkv_meta *m = tqkv_meta_of(r);
    /* the source as it was: streamed straight out, with no intermediate file (that and its
       rewrite were a third of a SmolLM2 slot's restore: tests/bench/results/slot_link.md) */
    if ((int)ro->format == m->source_kind && m->source_kind != TQ_KV_NUMPY && !ro->tokens &&
        !ro->partial && pads_nothing(ctx, r, ro))
        return tq_kvsnap_decode(ctx, r, base, d, out);
    tq_kvsnap_decode_options dopt = *d;
    /* chunks past a token prefix are not decoded; NumPy rows are tokens, and
     * in state files the prefix's cells come first (checked when writing) */
    dopt.max_rows = tqkv_streamed(r) == 1 ? 0 : ro->tokens; /* a pipe passes once, whole */
    if (ro->has_layers) {
        dopt.layer_lo = ro->layer_lo;
        dopt.layer_hi = ro->layer_hi + 1;
    }
    tq_kv_view *v;
    tq_status st = decode_to_view(ctx, r, base, &dopt, ro->tmp_near, &v);
    if (st) return st;
    /* the writers convert elements: CPU work, whatever backend decoded */
    tq_backend backend = tq_ctx_backend(ctx);
    tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    if (ro->format == TQ_KV_NUMPY) {
        tq_cache_layers L;
        st = tq_cache_layers_of_snapshot(ctx, m, NULL, &L);
        uint32_t hi = ro->has_layers ? ro->layer_hi : UINT32_MAX;
        tq_npz_options no = {ro->tokens, ro->has_layers ? ro->layer_lo : 0, hi, ro->head_dim,
                             !st && tq_cache_layers_known(&L) ? L.model : NULL};
        if (!st) {
            st = tq_npz_write(ctx, v, &no, out);
            tq_cache_layers_free(&L);
        }
    } else {
        tq_state_rewrite rw = {ro->format,     ro->arch,    ro->tokens,
                              ro->pad_window, ro->partial, ro->partial_len};
        st = rw.partial && rw.pad_window ? write_spliced(ctx, v, &rw, out)
                                         : tq_llama_state_write(ctx, v, &rw, out);
    }
    tq_kv_view_close(v);
    if (backend != TQ_BACKEND_CPU && tq_ctx_set_backend(ctx, backend) && !st)
        st = TQ_ERR_UNSUPPORTED;
    return st;
}
