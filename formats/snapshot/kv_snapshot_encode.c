/* kv_snapshot_encode.c - executes a snapshot plan.  A two-stage pipeline:
 * the chunks of tensor i are coded, compressed and hashed as OpenMP tasks
 * while this thread writes tensor i-1's, in order. */
#include "kv_chunk.h"
#include "kv_klt.h"
#include "kv_snapshot.h"

#include <stdlib.h>
#include <string.h>

/* One tensor in flight: its codec and its chunks' packed bytes. */
typedef struct etensor {
    uint32_t i;
    tq_codec *c, *c_coarse; /* the rows' block codec, the coarse rows' (NULL: none) */
    tqkv_record coarse;     /* the coarse rows' record (tqkv_record_coarse) */
    chunk_out *co;
    uint32_t nch;
} etensor;

/* The source rows coded rows [r0 + done, ...) are (tqkv_record_row: a moved window's own rows
 * sit around its base's): the first, and how many follow it in order (at most n - done). */
static uint32_t coded_run(const tqkv_record *t, uint32_t r0, uint32_t done, uint32_t n,
                          uint32_t *row)
{
    *row = tqkv_record_row(t, r0 + done);
    uint32_t run = 1;
    while (done + run < n && tqkv_record_row(t, r0 + done + run) == *row + run) run++;
    return run;
}

/* Coded rows [r0, r0+n) of t as floats, x[n][width], read from the source rows they are. */
static tq_status read_coded_rows(tq_ctx *ctx, const tq_kv_tensor *kt, const tqkv_record *t,
                                 uint32_t r0, uint32_t n, float *x)
{
    tq_status st = TQ_OK;
    uint32_t row;
    for (uint32_t done = 0, run; done < n && !st; done += run) {
        run = coded_run(t, r0, done, n, &row);
        st = tq_kv_view_read_rows(ctx, kt, t->cells, row, run, x + (size_t)done * t->width);
    }
    return st;
}

/* Transform-codes rows [r0, r0+n) of tensor t on the CPU (kv_klt.h). */
static void encode_klt_chunk(const tq_ctx *parent, const tq_kv_tensor *kt, const tqkv_record *t,
                             uint32_t r0, uint32_t n, chunk_out *o)
{
    float *x = malloc((size_t)n * t->width * sizeof(float)); /* [n][width]: the rows */
    tq_ctx *ctx = tq_ctx_clone(parent);
    /* a rANS stream and the escapes per component, or [components][n] index bytes and
       2 bytes per escaped index; with gains, a stream or n bytes a head first */
    uint64_t gains = t->klt_gain ? t->width / t->group * n : 0;
    uint64_t bytes = gains + 3 * tqkv_klt_components(t) * n;
    o->p = malloc((tqkv_chunk_rans(t, r0) ? tqkv_klt_rans_bound(t, n) : bytes) + 1);
    tq_status st = x && ctx && o->p ? TQ_OK : TQ_ERR_NOMEM;
    if (!st && tq_ctx_backend(ctx) != TQ_BACKEND_CPU) st = tq_ctx_set_backend(ctx, TQ_BACKEND_CPU);
    if (!st) st = read_coded_rows(ctx, kt, t, r0, n, x);
    if (!st) st = tq_kvsnap_klt_encode(ctx, t, x, r0, n, o->p, &o->len);
    if (st) chunk_fail(o, ctx, st);
    free(x);
    tq_ctx_free(ctx);
}

/* Codes rows [r0, r0+n) of tensor t on the calling thread. */
static void encode_chunk(const tq_ctx *parent, const tq_kv_tensor *kt, const tqkv_record *t,
                         const tq_codec *c, uint32_t r0, uint32_t n, chunk_out *o)
{
    if (t->codec == TQKV_CODEC_RAW ||
        tqkv_chunk_is_sink(t, r0)) { /* kept, or the exact sink rows */
        o->len = t->transposed ? t->bytes : (uint64_t)n * kt->row_size;
        if (!(o->p = malloc(o->len ? o->len : 1))) {
            chunk_fail(o, NULL, TQ_ERR_NOMEM);
        } else if (t->transposed) {
            memcpy(o->p, kt->data, o->len);
        } else {
            uint32_t row;
            for (uint32_t done = 0, run; done < n; done += run) { /* the source rows they are */
                run = coded_run(t, r0, done, n, &row);
                memcpy(o->p + (uint64_t)done * kt->row_size,
                       kt->data + (uint64_t)row * kt->row_size, (uint64_t)run * kt->row_size);
            }
        }
        return;
    }
    if (t->codec == TQKV_CODEC_KLT) {
        encode_klt_chunk(parent, kt, t, r0, n, o);
        return;
    }
    size_t nv = (size_t)n * t->width;
    float *x = malloc(nv * sizeof(float)); /* [n][width]: the rows as float32 */
    tq_ctx *ctx, *dev;
    int have = chunk_ctxs(parent, &ctx, &dev);
    o->len = nv / t->group * tq_codec_block_bytes(c);
    o->p = malloc(o->len); /* [nv / group][block bytes]: the coded blocks */
    if (!x || !o->p || !have) {
        free(x);
        chunk_ctxs_free(ctx, dev);
        chunk_fail(o, NULL, TQ_ERR_NOMEM);
        return;
    }
    tq_status st = read_coded_rows(ctx, kt, t, r0, n, x);
    if (!st) st = tq_kvsnap_rows_to_code(ctx, t, r0, n, x);
    if (!st && (st = tq_encode(dev, c, x, nv, o->p)))
        tq_ctx_set_error(ctx, st, "%s", tq_ctx_error(dev));
    uint8_t *planes = !st && t->planes ? malloc(o->len) : NULL;
    if (!st && t->planes && !planes) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (planes) {
        tq_blocks_to_planes(t->group, t->bits, o->p, nv / t->group, planes);
        free(o->p);
        o->p = planes;
    }
    if (st) chunk_fail(o, ctx, st);
    free(x);
    chunk_ctxs_free(ctx, dev);
}

/* Starts tensor i's chunks as tasks: code, then compress and hash there,
 * off the writing thread. */
static tq_status start_tensor(tq_ctx *ctx, const tq_kvsnap_plan *p, uint32_t i, int level,
                              etensor *e)
{
    const tqkv_record *t = &p->meta.t[i];
    uint32_t nch = tqkv_record_n_chunks(t);
    int blocks = tqkv_record_has_blocks(t);
    *e = (etensor){.i = i, .c = tq_kvsnap_record_codec(ctx, t), .nch = nch};
    e->co = calloc(nch ? nch : 1, sizeof(chunk_out));
    tqkv_record_coarse(t, &e->coarse);
    if (blocks && t->coarse_end) e->c_coarse = tq_kvsnap_record_codec(ctx, &e->coarse);
    if (!e->co || (blocks && (!e->c || (t->coarse_end && !e->c_coarse)))) {
        int no_codec = blocks && (!e->c || (t->coarse_end && !e->c_coarse));
        free(e->co);
        tq_codec_free(e->c);
        tq_codec_free(e->c_coarse);
        memset(e, 0, sizeof *e);
        if (no_codec) return tq_ctx_status(ctx);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    const tq_kv_tensor *kt = p->src[i];
    for (uint32_t k = 0; k < nch; k++) {
#pragma omp task firstprivate(k, e, t, kt, i)
        {
            chunk_out *co = &e->co[k];
            uint32_t r0, nr;
            tqkv_record_chunk_rows(t, k, &r0, &nr);
            int coarse = tqkv_chunk_is_coarse(t, r0);
            const tqkv_record *ct = coarse ? &e->coarse : t; /* the chunk's coding */
            const tq_codec *cc = coarse ? e->c_coarse : e->c;
            encode_chunk(ctx, kt, ct, cc, r0, nr, co);
            if (!co->st) {
                uint8_t *pk;
                uint64_t pl;
                /* planes: norms, signs, magnitudes, each in a zstd block of its own */
                uint64_t nb = ct->planes ? co->len / tq_codec_block_bytes(cc) : 0;
                uint64_t cuts[KLT_MAX_CUTS] = {2 * nb, 2 * nb + nb * t->group / 8};
                int sink = tqkv_chunk_is_sink(t, r0), n_cuts = ct->planes && !sink ? 2 : 0;
                if (t->codec == TQKV_CODEC_KLT && !sink) n_cuts = tq_kvsnap_klt_cuts(t, nr, cuts);
                int zl = t->codec == TQKV_CODEC_KLT && tqkv_chunk_rans(t, r0) && !sink ? 0 : level;
                co->st = tqkv_chunk_pack(i, r0, nr, co->p, co->len, zl, cuts, n_cuts, &pk, &pl);
                free(co->p);
                co->p = co->st ? NULL : pk;
                co->len = co->st ? 0 : pl;
                if (co->st) snprintf(co->err, sizeof co->err, "out of memory");
            }
        }
    }
    return TQ_OK;
}

static void free_tensor(etensor *e)
{
    for (uint32_t k = 0; e->co && k < e->nch; k++) free(e->co[k].p);
    free(e->co);
    tq_codec_free(e->c);
    tq_codec_free(e->c_coarse);
    memset(e, 0, sizeof *e);
}

/* Tensors started together: the threads wait for each other once a group (the last chunks of
 * one tensor left a thread idle at every tensor: tests/bench/results/kv_long_speed.md), while
 * the group before is written. */
enum { ENC_GROUP = 4 };

/* Writes a finished tensor's chunks in order (or reports its first error). */
static tq_status finish_tensor(tq_ctx *ctx, const tq_kvsnap_plan *p, tqkv_writer *w, etensor *e,
                               tq_status st)
{
    const tqkv_record *t = &p->meta.t[e->i];
    for (uint32_t k = 0; k < e->nch && !st; k++) {
        if (e->co[k].st)
            st = tq_ctx_set_error(ctx, e->co[k].st, "layer %u %s: %s", t->layer,
                                  t->is_v ? "V" : "K", e->co[k].err);
        else
            st = tqkv_write_packed(w, e->co[k].p, e->co[k].len);
    }
    free_tensor(e);
    return st;
}

tq_status tq_kvsnap_execute(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_plan *p,
                            const tq_kvsnap_run *run, FILE *out, tq_kvsnap_report *rep)
{
    const tqkv_meta *m = &p->meta;
    *rep = (tq_kvsnap_report){.n_tensors = m->n_tensors,
                              .n_coded = p->n_coded,
                              .n_kept = p->n_kept,
                              .source_bytes = m->source_size,
                              .kv_values = tq_kv_view_kv_values(v),
                              .kv_bytes = tq_kv_view_kv_bytes(v),
                              .group_used = p->group,
                              .group_source = p->group_source};
    tqkv_writer *w;
    tq_status st = tqkv_write_begin(ctx, out, m, &w);
    if (st) return st;
    int threads = run->threads > 0 ? run->threads : tq_ctx_threads(ctx);
    uint64_t done = 0;
    etensor jobs[2][ENC_GROUP]; /* [the group running, the group being written][its tensors] */
    memset(jobs, 0, sizeof jobs);
    uint32_t n_prev = 0;
#pragma omp parallel num_threads(threads)
#pragma omp single
    for (uint32_t g = 0; g * ENC_GROUP <= m->n_tensors + ENC_GROUP - 1; g++) {
        etensor *cur = jobs[g & 1], *prev = jobs[(g + 1) & 1];
        uint32_t n_cur = 0;
        for (uint32_t i = g * ENC_GROUP; i < m->n_tensors && i < (g + 1) * ENC_GROUP && !st; i++)
            if (!(st = start_tensor(ctx, p, i, p->settings.zstd_level, &cur[n_cur]))) n_cur++;
        for (uint32_t j = 0; j < n_prev; j++) {
            done += m->t[prev[j].i].bytes;
            st = finish_tensor(ctx, p, w, &prev[j], st);
            if (run->on_progress && !st)
                run->on_progress(run->progress_user, done, m->source_size - m->skeleton_len);
        }
#pragma omp taskwait
        n_prev = n_cur;
    }
    for (int q = 0; q < 2; q++) /* after an error: coded but not written */
        for (int j = 0; j < ENC_GROUP; j++) free_tensor(&jobs[q][j]);
    rep->snapshot_bytes = tqkv_writer_final_size(w);
    if (!st)
        st = tqkv_write_end(w);
    else
        tqkv_writer_abort(w);
    return st;
}

tq_status tq_kvsnap_encode(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_request *q,
                           const tq_kvsnap_inputs *in, const tq_kvsnap_run *run, FILE *out,
                           tq_kvsnap_report *rep)
{
    memset(rep, 0, sizeof *rep);
    tq_kvsnap_prepared *p;
    tq_status st = tq_kvsnap_prepare(ctx, v, q, in, run, &p);
    if (st) return st;
    st = tq_kvsnap_execute(ctx, v, p->plan, run, out, rep);
    tq_kvsnap_prepared_free(p);
    return st;
}
