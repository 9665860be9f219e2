/* llama_state_write.c - a KV view written back as a llama.cpp state file,
 * possibly of the other kind (session <-> sequence) or cut to a token
 * prefix.  The byte layout is the one llama_state.c reads (LLAMA_STATE.md);
 * any view with llama.cpp cell metadata can be written. */
#include "kv_source.h"
#include "llama_state.h"
#include "restore_point.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct wr {
    tq_ctx *ctx;
    FILE *f;
    tq_status st;
} wr;

static void put(wr *w, const void *p, uint64_t n)
{
    if (!w->st && n && fwrite(p, 1, n, w->f) != n)
        w->st = tq_ctx_set_error(w->ctx, TQ_ERR_IO, "writing the state file failed: %s",
                                 strerror(errno));
}

static void put32(wr *w, uint32_t v) { put(w, &v, 4); }
static void put64(wr *w, uint64_t v) { put(w, &v, 8); }

static tq_status check_single_seq(tq_ctx *ctx, const tq_kv_view *s, const tq_kv_stream *st,
                                  uint32_t n)
{
    const uint8_t *p = s->map + st->meta_off;
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nseq;
        memcpy(&nseq, p + off + 4, 4);
        if (nseq != 1)
            return tq_ctx_set_error(
                ctx, TQ_ERR_UNSUPPORTED,
                "%s: cell %u belongs to %u sequences; a sequence file holds one", s->label, i,
                nseq);
        off += 8 + (uint64_t)s->has_ext + 4ull * nseq;
    }
    return TQ_OK;
}

/* A stream's cells (up to the prefix o asks for), metadata and K/V tensors, as the source laid
 * them out. */
static void put_zeros(wr *w, uint64_t n)
{
    static const uint8_t zeros[4096];
    for (uint64_t k = 0; k < n; k += sizeof zeros)
        put(w, zeros, n - k < sizeof zeros ? n - k : sizeof zeros);
}

/* The pad cells' metadata: the first cell's (its sequence and extension) at the positions
 * below the stream's lowest (a ring buffer's first cell need not be it). */
static void put_pad_meta(wr *w, const tq_kv_view *s, const tq_kv_stream *st, uint32_t pad)
{
    const uint8_t *first = s->map + st->meta_off;
    uint32_t nseq;
    int32_t lo;
    int32_t hi;
    if (!pad || !tq_kv_view_stream_span(s, st, &lo, &hi)) return;
    memcpy(&nseq, first + 4, 4);
    uint64_t len = 8 + (uint64_t)s->has_ext + 4ull * nseq;
    for (uint32_t k = 0; k < pad; k++) {
        int32_t pos = lo - (int32_t)(pad - k);
        put(w, &pos, 4);
        put(w, first + 4, len - 4);
    }
}

/* The indexer keys' section between K and V (llama_state.c, parse_k_idx). */
static void put_k_idx(wr *w, const tq_kv_stream *st, uint32_t n, uint32_t pad)
{
    put32(w, 1);
    for (uint32_t l = 0; l < st->n_layer; l++) {
        const tq_kv_tensor *t = &st->k_idx[l];
        put32(w, t->type != NULL);
        if (!t->type) continue;
        put32(w, (uint32_t)t->type->id);
        put64(w, t->row_size);
        put_zeros(w, (uint64_t)pad * t->row_size);
        put(w, t->data, (uint64_t)n * t->row_size);
    }
}

static void put_stream(wr *w, const tq_kv_view *s, const tq_kv_stream *st,
                       const tq_state_rewrite *o)
{
    uint32_t n;
    uint64_t ml;
    tq_kv_view_stream_prefix(w->ctx, s, st, o->max_tokens, &n, &ml); /* checked before */
    uint32_t pad = tq_restore_pad_below(s, st, n, o->pad_window);
    put32(w, n + pad);
    if (!n) return;
    put_pad_meta(w, s, st, pad);
    put(w, s->map + st->meta_off, ml);
    put32(w, st->v_trans);
    put32(w, st->n_layer);
    for (int v = 0; v < (st->v ? 2 : 1); v++) /* an MLA cache: K alone */
        for (uint32_t l = 0; l < st->n_layer; l++) {
            const tq_kv_tensor *t = v ? &st->v[l] : &st->k[l];
            if (v && !l && st->k_idx) put_k_idx(w, st, n, pad);
            put32(w, (uint32_t)t->type->id);
            if (!t->transposed) {
                put64(w, t->row_size);
                put_zeros(w, (uint64_t)pad * t->row_size);
                put(w, t->data, (uint64_t)n * t->row_size);
                continue;
            }
            uint64_t es = t->type->bytes;
            put32(w, (uint32_t)es);
            put32(w, (uint32_t)t->width);
            for (uint64_t e = 0; e < t->width; e++) {
                put_zeros(w, pad * es);
                put(w, t->data + e * st->cell_count * es, n * es);
            }
        }
}

/* The magic, version, the first nt tokens (packed as llama-server packs them, where the source
 * did) and a session's architecture and old-layout output section. */
static void put_header(wr *w, const tq_kv_view *s, const tq_state_rewrite *o, const char *arch,
                       uint32_t nt)
{
    int v10 = s->kind == TQ_KV_SESSION ? s->version == 10 : s->version == 3;
    put32(w, o->kind == TQ_KV_SESSION ? TQ_GGSN_MAGIC : TQ_GGSQ_MAGIC);
    uint32_t session_version = v10 ? 10 : 9;
    uint32_t sequence_version = v10 ? 3 : 2;
    put32(w, o->kind == TQ_KV_SESSION ? session_version : sequence_version);
    if (s->tokens_packed) { /* llama-server's packing, around the prefix's tokens */
        put32(w, nt + 4);
        put32(w, UINT32_MAX);
        put32(w, 1);
        put32(w, nt);
        put(w, s->tokens, 4ull * nt);
        put32(w, 0);
    } else {
        put32(w, nt);
        put(w, s->tokens, 4ull * nt);
    }
    if (o->kind == TQ_KV_SESSION) {
        put32(w, (uint32_t)strlen(arch));
        put(w, arch, strlen(arch));
        if (s->has_outputs) { /* old layout: the section must be there; logits of a cut prompt are
                                 not */
            uint64_t in_file = s->n_tokens + (s->tokens_packed ? 4u : 0u); /* the packing's */
            uint64_t at = 12 + 4 * in_file + 4 + strlen(s->arch);
            if (nt == s->n_tokens)
                put(w, s->map + at, s->prefix_len - at);
            else {
                put32(w, 0);
                put64(w, 0);
                put64(w, 0);
            }
        }
    }
}

tq_status tq_llama_state_write(tq_ctx *ctx, const tq_kv_view *s, const tq_state_rewrite *o,
                               FILE *out)
{
    for (uint32_t i = 0; i < s->n_kv; i++)
        for (uint32_t j = 0; j < s->kv[i].n_stream; j++)
            if (s->kv[i].streams[j].cell_count && !s->kv[i].streams[j].meta_len)
                return tq_ctx_set_error(
                    ctx, TQ_ERR_UNSUPPORTED,
                    "%s: a %s source has no llama.cpp cell metadata to rebuild a "
                    "state file from; write it as .npz",
                    s->label, s->source->name);
    const char *arch = s->arch && s->arch[0] ? s->arch : o->arch;
    if (o->kind == TQ_KV_SESSION && (!arch || !arch[0]))
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "a session file names the model architecture; a sequence file does not: "
            "give the model (--model)");
    /* a recurrent state holds what every token made of it: it is kept whole or not at all */
    uint32_t keep = o->max_tokens && o->max_tokens < s->n_tokens ? o->max_tokens : s->n_tokens;
    /* a checkpoint stands for the memories that cannot be cut: the SWA cache or the
     * recurrent state, which come last */
    int splice_swa = o->partial && s->n_kv == 2 && !s->has_recurrent;
    int splice_rec = o->partial && s->n_kv <= 1 && s->has_recurrent;
    if (o->partial && !splice_swa && !splice_rec)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "a checkpoint replaces an iSWA model's sliding-window cache or a "
                                "hybrid model's recurrent state; this state has neither alone");
    tq_status cut = o->partial ? TQ_OK : tq_restore_check_cut(ctx, s, keep);
    if (cut) return cut;
    if (s->has_recurrent && o->kind != s->kind)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "a recurrent state is written as it was saved: a %s file stays "
                                "one",
                                s->kind == TQ_KV_SESSION ? "session" : "sequence");
    /* every stream's prefix and seq-id check first: nothing half-written (a cache that a
     * checkpoint replaces is not written) */
    for (uint32_t i = 0; i < s->n_kv - (uint32_t)splice_swa; i++)
        for (uint32_t j = 0; j < s->kv[i].n_stream; j++) {
            const tq_kv_stream *st = &s->kv[i].streams[j];
            uint32_t n;
            tq_status e = tq_kv_view_stream_prefix(ctx, s, st, o->max_tokens, &n, NULL);
            if (!e && o->kind == TQ_KV_SEQUENCE && s->kind != TQ_KV_SEQUENCE)
                e = check_single_seq(ctx, s, st, n);
            if (e) return e;
        }
    wr w = {ctx, out, TQ_OK};
    put_header(&w, s, o, arch, keep);
    for (uint32_t i = 0; i < s->n_kv - (uint32_t)splice_swa; i++) {
        put32(&w, s->kv[i].n_stream);
        for (uint32_t j = 0; j < s->kv[i].n_stream; j++) put_stream(&w, s, &s->kv[i].streams[j], o);
    }
    if (o->partial) put(&w, o->partial, o->partial_len);
    if (s->has_recurrent && !splice_rec) put(&w, s->map + s->rec.off, s->rec.len);
    return w.st;
}
