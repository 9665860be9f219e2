/* kv_snapshot_decode.c - a snapshot back into the file it was made from, whole or with rows and
 * layers left out (kv_snapshot_restore.c builds the other outputs on it): each tensor's chunks
 * decoded and converted to the output's type (kv_decode_jobs.h), run in file order over
 * threads by kv_decode_queue.c.  A mapped snapshot's chunks were verified when it was opened;
 * a streamed one's are as they arrive. */
#include "file_io.h"
#include "kv_numpy.h"
#include "kv_chunk.h"
#include "kv_decode_jobs.h"
#include "kv_klt.h"
#include "kv_layers.h"
#include "kv_snapshot.h"
#include "llama_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

tq_status tq_kvdec_put(tq_ctx *ctx, FILE *f, const void *p, uint64_t n)
{
    if (n && fwrite(p, 1, n, f) != n)
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "writing the state file failed: %s",
                                strerror(errno));
    return TQ_OK;
}

static int is_turbo(const tq_ggml_type *t)
{
    uint32_t rev;
    uint32_t bits;
    return t->dtype >= 0 && tq_fork_dtype_of((tq_dtype)t->dtype, &rev, &bits);
}

/* Row width in the output: the same, except that turbo caches pad every head
 * to a multiple of 128 values as the fork allocates them. */
static uint64_t out_width(const tqkv_record *t, const tq_ggml_type *oty, uint32_t head_dim)
{
    if (!is_turbo(oty) || !head_dim) return t->width;
    uint64_t ph = (head_dim + 127) / 128 * 128;
    return t->width / head_dim * ph;
}

/* A coded chunk's rows as floats, y[nrows][width]: transform-coded, or blocks decoded on dev
 * (the offset, InnerQ scales and RoPE offset undone on the CPU). */
static tq_status coded_rows(const tqkv_record *t, const tq_codec *c, const tqkv_chunk *ch,
                            const uint8_t *raw, tq_ctx *local, tq_ctx *dev, float *y)
{
    if (t->codec == TQKV_CODEC_KLT)
        return tq_kvsnap_klt_decode(local, t, raw, ch->raw_len, ch->row0, ch->nrows, y);
    size_t nv = (size_t)ch->nrows * t->width;
    tq_status st = tq_decode(dev, c, raw, nv, y);
    if (st) return tq_ctx_set_error(local, st, "%s", tq_ctx_error(dev));
    return tq_kvsnap_rows_from_code(local, t, ch->row0, ch->nrows, y);
}

/* Kept (or sink) rows as floats, y[nv]: element-major source bytes (a transposed V) gathered
 * into cell-major rows. */
static tq_status source_rows(const tqkv_record *t, const tq_ggml_type *ty, const uint8_t *raw,
                             size_t nv, tq_ctx *local, float *y)
{
    if (!t->transposed) return tq_dequantize(local, (tq_dtype)ty->dtype, raw, nv, y);
    tq_status st = TQ_OK;
    for (uint64_t j = 0; j < t->width && !st; j++)
        for (uint32_t c0 = 0; c0 < t->cells && !st; c0++)
            st = tq_dequantize(local, (tq_dtype)ty->dtype, raw + (j * t->cells + c0) * ty->bytes,
                               1, y + (uint64_t)c0 * t->width + j);
    return st;
}

/* Rows y[nrows][width] spread in place to y[nrows][ow], each head of head_dim zero-padded to
 * ow / heads (the fork's cache layout). */
static void pad_heads(float *y, uint32_t nrows, uint64_t width, uint32_t head_dim, uint64_t ow)
{
    uint64_t nh = width / head_dim, ph = ow / nh;
    for (uint64_t rr = nrows; rr-- > 0;)
        for (uint64_t h = nh; h-- > 0;) {
            float *dst = y + rr * ow + h * ph;
            memmove(dst, y + rr * width + h * head_dim, head_dim * sizeof(float));
            memset(dst + head_dim, 0, (ph - head_dim) * sizeof(float));
        }
}

/* A legacy quantized type (q8_0, q4_0, ...): what llama.cpp's attention rotation applies to. */
static int is_legacy_quant(const tq_ggml_type *t)
{
    return t->dtype == TQ_DT_Q8_0 || t->dtype == TQ_DT_Q4_0 || t->dtype == TQ_DT_Q4_1 ||
           t->dtype == TQ_DT_Q5_0 || t->dtype == TQ_DT_Q5_1;
}

/* The block current llama.cpp rotates a quantized cache's rows in (llama-kv-cache.cpp,
 * attn_rot_k / attn_rot_v; kv_rotation.c tells a source's): heads of a multiple of 64, K in
 * blocks of the largest power of two in the head, V in blocks of 64; 0: not rotated. */
static uint32_t llama_rotation(const tqkv_record *t, const tq_ggml_type *oty, uint32_t head_dim)
{
    if (!is_legacy_quant(oty) || !head_dim || head_dim % 64 || t->transposed) return 0;
    uint32_t n = t->is_v ? 64 : head_dim & (~head_dim + 1);
    if (n > TQ_RHT_MAX) n = TQ_RHT_MAX;
    return t->width % n ? 0 : n;
}

/* The output's rows are the source's bytes: the same element type (under another revision's
 * type id, maybe). */
static int same_rows(const tq_ggml_type *ty, const tq_ggml_type *oty)
{
    return ty == oty || ty->dtype == oty->dtype;
}

/* A turbo type as the revision out_prof has it (decode's fork_rev: another block or table,
 * or another id), or ty where that revision means the same. */
static const tq_ggml_type *in_revision(const tq_ggml_type *ty, int out_prof)
{
    if (out_prof == TQ_PROFILE_AUTO || !is_turbo(ty)) return ty;
    const tq_ggml_type *o = tq_ggml_type_by_name((tq_type_profile)out_prof, ty->name);
    return o && (o->dtype != ty->dtype || o->id != ty->id) ? o : ty;
}

/* Source bytes of chunk ck of tensor t, converted from the source type ty to
 * the output type oty when they differ (rows in cell-major order). */
void tq_kvdec_decode_chunk(const tqkv_reader *r, const tqkv_record *t, const tq_codec *c,
                           const djob *j, uint64_t ck, int skip, tq_ctx *local, tq_ctx *dev,
                           chunk_out *o)
{
    const tq_ggml_type *ty = j->ty;
    const tq_ggml_type *oty = j->oty;
    uint32_t head_dim = j->head_dim;
    const tqkv_chunk *ch = tqkv_chunk_at(r, ck);
    int coded = t->codec != TQKV_CODEC_RAW &&
                !tqkv_chunk_is_sink(t, ch->row0); /* sink rows: the source's bytes */
    if (skip) { /* not wanted: zeros of the length it would have */
        o->len = !coded && same_rows(ty, oty)
                     ? ch->raw_len
                     : ch->nrows * (out_width(t, oty, head_dim) / oty->block) * oty->bytes;
        if (!(o->p = calloc(1, o->len ? o->len : 1))) goto oom;
        return;
    }
    uint8_t *raw = malloc(ch->raw_len ? ch->raw_len : 1); /* [raw_len]: the chunk's payload */
    if (!raw) goto oom;
    o->st = tqkv_chunk_read(local, r, ck, raw);
    if (o->st || (!coded && same_rows(ty, oty))) {
        o->p = raw;
        o->len = ch->raw_len;
        if (o->st) snprintf(o->err, sizeof o->err, "%s", tq_ctx_error(local));
        return;
    }
    size_t nv = (size_t)ch->nrows * t->width;
    uint64_t ow = out_width(t, oty, head_dim);
    /* y: [nrows][width] decoded rows ([nrows][ow] where heads are padded to the output's) */
    float *y = malloc((ow > t->width ? ch->nrows * ow : nv) * sizeof(float));
    o->len = (uint64_t)ch->nrows * (ow / oty->block) * oty->bytes;
    o->p = malloc(o->len ? o->len : 1);
    if (!y || !o->p) {
        free(y);
        free(raw);
        goto oom;
    }
    if (coded && t->planes) { /* back to the codec's blocks, in place of the planes */
        uint8_t *blocks = malloc(ch->raw_len ? ch->raw_len : 1);
        if (!blocks) {
            free(y);
            free(raw);
            goto oom;
        }
        tq_planes_to_blocks(t->group, t->bits, raw, nv / t->group, blocks);
        free(raw);
        raw = blocks;
    }
    if (coded)
        o->st = coded_rows(t, c, ch, raw, local, dev, y);
    else
        o->st = source_rows(t, ty, raw, nv, local, y);
    /* the rotations (tqkv_record.hadamard, djob.out_rot): coded rows come back in the model's
     * channels, kept rows as the source stored them; they go out as the source stored them
     * (the same type), in the model's channels (a float cache, which llama.cpp does not
     * rotate) or rotated as llama.cpp stores a quantized cache of another type */
    uint32_t rot_in = coded ? 0 : t->hadamard;
    uint32_t rot_out = same_rows(ty, oty) ? t->hadamard : j->out_rot;
    if (!o->st && rot_in != rot_out && rot_in)
        o->st = tq_hadamard_blocks(local, rot_in, y, nv);
    if (!o->st && rot_in != rot_out && rot_out)
        o->st = tq_hadamard_blocks(local, rot_out, y, nv);
    if (!o->st && ow > t->width) { /* the fork's layout: each head zero-padded to whole 128s */
        pad_heads(y, ch->nrows, t->width, head_dim, ow);
        nv = (size_t)ch->nrows * ow;
    }
    if (!o->st) o->st = tq_quantize(local, (tq_dtype)oty->dtype, y, nv, o->p);
    if (o->st) snprintf(o->err, sizeof o->err, "%s", tq_ctx_error(local));
    free(y);
    free(raw);
    return;
oom:
    o->st = TQ_ERR_NOMEM;
    snprintf(o->err, sizeof o->err, "out of memory");
}


tq_status tq_kvdec_job_setup(tq_ctx *ctx, const tqkv_meta *m, tq_type_profile prof,
                             const tq_ggml_type *const want[2], int out_prof,
                             const tqkv_reader *r, const tqkv_reader *base, uint32_t i,
                             uint32_t head_dim, uint64_t *ck, djob *j)
{
    memset(j, 0, sizeof *j);
    j->i = i;
    j->t = &m->t[i];
    j->head_dim = head_dim;
    j->ty = tq_ggml_type_get(prof, j->t->type_id);
    const tq_ggml_type *w = want ? want[j->t->is_v != 0] : NULL;
    j->oty = w ? w : in_revision(j->ty, out_prof);
    if (!same_rows(j->ty, j->oty)) j->out_rot = llama_rotation(j->t, j->oty, head_dim);
    int blocks = tqkv_record_has_blocks(j->t);
    j->c = tq_kvsnap_record_codec(ctx, j->t);
    tqkv_record_coarse(j->t, &j->coarse);
    /* the base's coarse rows end where its record says; their coding is the same (adopted) */
    int coarse = j->t->coarse_end || (j->t->row_start && tqkv_meta_of(base)->t[i].coarse_end);
    if (blocks && j->c && coarse) j->c_coarse = tq_kvsnap_record_codec(ctx, &j->coarse);
    if (blocks && (!j->c || (coarse && !j->c_coarse))) {
        tq_codec_free(j->c);
        j->c = NULL;
        return tq_ctx_status(ctx);
    }
    if (j->t->row_start) j->bt = &tqkv_meta_of(base)->t[i];
    if (j->t->from_base) { /* the base's tables (the transforms' counts and steps checked) */
        j->own = *j->t;
        j->own.innerq = j->bt->innerq;
        j->own.innerq_n = j->bt->innerq_n;
        j->own.offset = j->bt->offset;
        if (j->t->klt) j->own.klt = j->bt->klt;
        j->t = &j->own;
        tqkv_record_coarse(j->t, &j->coarse);
    }
    j->base_fine = *j->t;
    j->base_coarse = j->coarse;
    if (j->bt) { /* which of its chunks hold rANS streams, its rows' positions: the base's */
        j->base_fine.coarse_end = j->bt->coarse_end;
        j->base_fine.rope_pos = j->bt->rope_pos;
        j->base_fine.klt_rans = j->bt->klt_rans;
        j->base_fine.klt_rans_coarse = j->bt->klt_rans_coarse;
        j->base_coarse.rope_pos = j->bt->rope_pos;
        j->base_coarse.klt_rans = j->bt->klt_rans;
    }
    /* the base's chunks for rows below row_start, then ours */
    if (j->t->row_start) {
        while (j->bfirst < tqkv_n_chunks(base) && tqkv_chunk_at(base, j->bfirst)->tensor < i)
            j->bfirst++;
        while (j->bfirst + j->nb < tqkv_n_chunks(base) &&
               tqkv_chunk_at(base, j->bfirst + j->nb)->tensor == i)
            j->nb++;
    }
    j->first = *ck;
    uint64_t nown = 0;
    while (*ck < tqkv_n_chunks(r) && tqkv_chunk_at(r, *ck)->tensor == i) {
        (*ck)++;
        nown++;
    }
    j->nch = j->nb + nown;
    j->co = calloc(j->nch ? j->nch : 1, sizeof *j->co);
    if (!j->co) {
        free(j->co);
        tq_codec_free(j->c);
        tq_codec_free(j->c_coarse);
        memset(j, 0, sizeof *j);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

void tq_kvdec_job_free(djob *j)
{
    for (uint64_t k = 0; j->co && k < j->nch; k++) free(j->co[k].p);
    free(j->co);
    tq_codec_free(j->c);
    tq_codec_free(j->c_coarse);
    j->co = NULL;
    j->c = NULL;
    j->c_coarse = NULL;
}

/* The skeleton up to the tensor, its layer header patched for a new cache
 * type. */
tq_status tq_kvdec_job_begin(tq_ctx *ctx, const tqkv_meta *m, const djob *j, FILE *out,
                           uint64_t *pos, uint64_t *sk)
{
    const tqkv_record *t = j->t;
    const tq_ggml_type *ty = j->ty, *oty = j->oty;
    tq_status st;
    uint64_t gap = t->file_off - *pos;
    if (oty != ty && gap >= 12) {
        /* the layer header just before the rows: i32 type, then u64 row size
         * (or u32 element size + u32 width for transposed V) */
        uint8_t h[12];
        int32_t id = oty->id;
        memcpy(h, &id, 4);
        if (t->transposed) {
            uint32_t es = oty->bytes, w = (uint32_t)t->width;
            memcpy(h + 4, &es, 4);
            memcpy(h + 8, &w, 4);
        } else {
            uint64_t rs = out_width(t, oty, j->head_dim) / oty->block * oty->bytes;
            memcpy(h + 4, &rs, 8);
        }
        st = tq_kvdec_put(ctx, out, m->skeleton + *sk, gap - 12);
        if (!st) st = tq_kvdec_put(ctx, out, h, 12);
    } else {
        st = tq_kvdec_put(ctx, out, m->skeleton + *sk, gap);
    }
    *sk += gap;
    *pos = t->file_off + t->bytes;
    return st;
}

tq_status tq_kvdec_chunk_status(tq_ctx *ctx, const djob *j, uint64_t k)
{
    if (!j->co[k].st) return TQ_OK;
    return tq_ctx_set_error(ctx, j->co[k].st, "layer %u %s: %s", j->t->layer,
                            j->t->is_v ? "V" : "K", j->co[k].err);
}

/* llama.cpp's element-major V is written whole: cell-major rows back to
 * element-major. */
int tq_kvdec_job_is_moved(const djob *j)
{
    return j->t->share_at || j->t->base_from || (j->bt && j->bt->cells != j->t->row_start);
}

int tq_kvdec_job_is_whole(const djob *j)
{
    return tq_kvdec_job_is_moved(j) ||
           (j->t->transposed && (j->t->codec != TQKV_CODEC_RAW || !same_rows(j->ty, j->oty)));
}

/* A moved job's rows in the source's order: each coded row's bytes (the base's rows
 * [base_from, base_from + row_start), then its own) placed at the source row it is
 * (tqkv_record_row), then written in that order. */
static tq_status write_moved(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                             const djob *j, FILE *out)
{
    const tqkv_record *t = j->t;
    const uint8_t **row_at = calloc(t->cells, sizeof *row_at); /* [cells]: by source row */
    if (!row_at) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    uint64_t row_bytes = 0;
    for (uint64_t k = 0; k < j->nch; k++) {
        const tqkv_chunk *ch = k < j->nb ? tqkv_chunk_at(base, j->bfirst + k)
                                         : tqkv_chunk_at(r, j->first + k - j->nb);
        uint64_t rb = j->co[k].len / ch->nrows; /* the output's row: the same in every chunk */
        row_bytes = rb;
        for (uint32_t rr = 0; rr < ch->nrows; rr++) {
            uint64_t c = k < j->nb ? (uint64_t)ch->row0 + rr - t->base_from : ch->row0 + rr;
            if (k < j->nb && (ch->row0 + rr < t->base_from || c >= t->row_start)) continue;
            row_at[tqkv_record_row(t, (uint32_t)c)] = j->co[k].p + rr * rb;
        }
    }
    tq_status st = TQ_OK;
    for (uint32_t row = 0; row < t->cells && !st; row++)
        st = tq_kvdec_put(ctx, out, row_at[row], row_bytes);
    free(row_at);
    return st;
}

tq_status tq_kvdec_job_write_whole(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                                 const djob *j, FILE *out)
{
    const tqkv_record *t = j->t;
    tq_status st = TQ_OK;
    for (uint64_t k = 0; k < j->nch && !st; k++) st = tq_kvdec_chunk_status(ctx, j, k);
    if (st) return st;
    if (tq_kvdec_job_is_moved(j)) return write_moved(ctx, r, base, j, out);
    uint64_t es = j->oty->bytes, row = 0, tbytes = t->width * t->cells * es;
    uint8_t *tb = malloc(tbytes ? tbytes : 1); /* [width][cells] elements */
    if (!tb) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t k = 0; k < j->nch; k++) {
        const tqkv_chunk *ch = k < j->nb ? tqkv_chunk_at(base, j->bfirst + k)
                                         : tqkv_chunk_at(r, j->first + k - j->nb);
        for (uint32_t rr = 0; rr < ch->nrows; rr++, row++)
            for (uint64_t e = 0; e < t->width; e++)
                memcpy(tb + (e * t->cells + row) * es,
                       j->co[k].p + ((uint64_t)rr * t->width + e) * es, es);
    }
    st = tq_kvdec_put(ctx, out, tb, tbytes);
    free(tb);
    return st;
}

/* Whether the base's tensor bt holds the rows t takes from it, and where t takes the base's
 * tables, tables that fit: offsets pre-RoPE where t has positions, transforms of the same
 * counts and steps. */
static int base_fits(const tqkv_record *t, const tqkv_record *bt)
{
    if (!t->row_start) return 1;
    if (bt->cells < t->base_from || bt->cells - t->base_from < t->row_start) return 0;
    if (!t->from_base) return 1;
    /* the base's offsets are pre-RoPE exactly where t has its cells' positions */
    if (bt->from_base || (t->rope_pos != NULL) != (bt->offset && bt->rope_pos)) return 0;
    if (!t->klt) return 1;
    if (bt->codec != TQKV_CODEC_KLT || !bt->klt || bt->group != t->group ||
        bt->width != t->width || bt->klt_basis8 != t->klt_basis8)
        return 0;
    for (uint64_t h = 0; h < t->width / t->group; h++)
        if (bt->klt[h].m != t->klt[h].m || bt->klt[h].step != t->klt[h].step) return 0;
    return 1;
}

/* An appended snapshot needs its own base. */
tq_status tq_kvsnap_check_base(tq_ctx *ctx, const tqkv_meta *m, const tqkv_reader *base)
{
    if (!m->base_id) return TQ_OK;
    if (!base)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the snapshot appends to %s: give that snapshot (--base)",
                                m->base_name);
    const tqkv_meta *b = tqkv_meta_of(base);
    if (tqkv_file_id(base) != m->base_id)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "the base snapshot is not the one this snapshot appends to (%s)",
                                m->base_name);
    for (uint32_t i = 0; i < m->n_tensors; i++)
        if (b->n_tensors != m->n_tensors || !base_fits(&m->t[i], &b->t[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                    "the base snapshot does not fit (tensor %u)", i);
    return TQ_OK;
}

/* One cache type by name, checked: a float, a legacy quant (with the head size, for the
 * rotation) or the fork's turbo types. */
static tq_status cache_type_named(tq_ctx *ctx, tq_type_profile out_prof, const char *name,
                                  uint32_t head_dim, const tq_ggml_type **out)
{
    const tq_ggml_type *want = tq_ggml_type_by_name(out_prof, name);
    *out = want;
    if (!want || (want->dtype != TQ_DT_F32 && want->dtype != TQ_DT_F16 &&
                  want->dtype != TQ_DT_BF16 && want->dtype != TQ_DT_Q8_0 &&
                  want->dtype != TQ_DT_Q4_0 && !is_turbo(want)))
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "cache type %s: tq converts to f32, f16, bf16, q8_0, q4_0 and the "
                                "fork's turbo2/3/4 caches",
                                name);
    if ((is_turbo(want) || is_legacy_quant(want)) && !head_dim)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "a %s cache needs the head size (--model or --head-dim: %s)",
                                want->name,
                                is_turbo(want) ? "the head size is needed to pad each head"
                                               : "the head size is needed to rotate rows");
    return TQ_OK;
}

/* The element types the K (want[0]) and V (want[1]) tensors are converted to (NULL: kept),
 * checked for every tensor before anything is written. */
static tq_status cache_type_of(tq_ctx *ctx, const tqkv_meta *m, tq_type_profile prof,
                               const tq_kvsnap_decode_options *o, const tq_ggml_type *want[2])
{
    want[0] = NULL;
    want[1] = NULL;
    if (!o->cache_type) return TQ_OK;
    if (m->source_kind == TQ_KV_NUMPY)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "--cache-type is for llama.cpp state files, not NumPy dumps");
    tq_type_profile out_prof = TQ_PROFILE_NEWEST;
    if (o->fork_rev && tq_type_profile_parse(o->fork_rev, &out_prof))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown fork revision '%s'", o->fork_rev);
    const char *v_name = o->cache_type_v ? o->cache_type_v : o->cache_type;
    tq_status st = cache_type_named(ctx, out_prof, o->cache_type, o->head_dim, &want[0]);
    if (!st) st = cache_type_named(ctx, out_prof, v_name, o->head_dim, &want[1]);
    if (st) return st;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const tqkv_record *t = &m->t[i];
        const tq_ggml_type *ty = tq_ggml_type_get(prof, t->type_id);
        const tq_ggml_type *w = want[t->is_v != 0];
        if (ty->dtype < 0)
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "layer %u: no decoder for %s",
                                    t->layer, ty->name);
        if (out_width(t, w, o->head_dim) % w->block)
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                    "layer %u: rows of %llu values are not whole %s blocks",
                                    t->layer, (unsigned long long)t->width, w->name);
        if (t->transposed && w->block != 1)
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                    "transposed V (flash attention off) needs a float cache "
                                    "type, not %s",
                                    w->name);
        if (is_turbo(w) && (t->width % o->head_dim || is_turbo(ty)))
            return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                    "layer %u: rows of %llu values are not whole heads of %u%s",
                                    t->layer, (unsigned long long)t->width, o->head_dim,
                                    is_turbo(ty) ? " (already a turbo cache)" : "");
    }
    return TQ_OK;
}

/* --layers counts model layers where the snapshot knows them (iSWA) */
uint32_t tq_kvdec_layer_of(const tqkv_record *t)
{
    return t->model_layer != TQKV_NO_MODEL_LAYER ? t->model_layer : t->layer;
}

tq_status tq_kvsnap_decode(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                           const tq_kvsnap_decode_options *opt, FILE *out)
{
    static const tq_kvsnap_decode_options defaults = {0};
    const tq_kvsnap_decode_options *o = opt ? opt : &defaults;
    const tqkv_meta *m = tqkv_meta_of(r);
    tq_type_profile prof;
    const tq_ggml_type *want[2];
    tq_status st = tq_kvsnap_check_base(ctx, m, base);
    if (st) return st;
    if (tq_type_profile_parse(m->profile, &prof))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "unknown type-id profile");
    if ((st = cache_type_of(ctx, m, prof, o, want))) return st;
    /* turbo rows of another revision than the one asked for are written for that one */
    tq_type_profile out_prof = TQ_PROFILE_AUTO;
    if (o->fork_rev && tq_type_profile_parse(o->fork_rev, &out_prof))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown fork revision '%s'", o->fork_rev);
    return tq_kvdec_run(ctx, r, base, o, prof, o->cache_type ? want : NULL, (int)out_prof, out);
}
