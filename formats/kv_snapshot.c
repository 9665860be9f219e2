/* kv_snapshot.c - state file <-> snapshot, see kv_snapshot.h.  Each tensor's
 * rows are cut into chunks that are coded in parallel and written in order,
 * so memory stays bounded by one tensor and the output is the same for any
 * thread count. */
#include "kv_snapshot.h"
#include "tq_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CHUNK_TARGET (256u << 10) /* source bytes per chunk */

/* ------------------------------------------------------------ models */

uint64_t tq_model_fingerprint(const tq_gguf *g)
{
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 0x74716b76ull);
    uint64_t alen = 0;
    const char *arch = tq_gguf_get_str(g, "general.architecture", "", &alen);
    XXH64_update(xs, arch, alen);
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        const char *k = tq_gguf_kv_key(g, i);
        if (strncmp(k, arch, alen) || k[alen] != '.') continue;
        uint64_t len;
        const uint8_t *raw = tq_gguf_kv_raw(g, i, &len);
        uint32_t t = (uint32_t)tq_gguf_kv_type(g, i);
        XXH64_update(xs, k, strlen(k) + 1);
        XXH64_update(xs, &t, 4);
        XXH64_update(xs, raw, len);
    }
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const char *n = tq_gguf_tensor_name(g, i);
        int32_t t = tq_gguf_tensor_type_id(g, i);
        XXH64_update(xs, n, strlen(n) + 1);
        XXH64_update(xs, &t, 4);
        XXH64_update(xs, tq_gguf_tensor_ne(g, i), 4 * sizeof(int64_t));
    }
    uint64_t h = XXH64_digest(xs);
    XXH64_freeState(xs);
    return h;
}

uint32_t tq_model_head_dim(const tq_gguf *g, int value)
{
    uint64_t alen;
    const char *arch = tq_gguf_get_str(g, "general.architecture", NULL, &alen);
    if (!arch || alen > 64) return 0;
    char key[128];
    snprintf(key, sizeof key, "%.*s.attention.%s", (int)alen, arch, value ? "value_length" : "key_length");
    int64_t v = tq_gguf_get_int(g, key, 0);
    if (v > 0) return (uint32_t)v;
    snprintf(key, sizeof key, "%.*s.embedding_length", (int)alen, arch);
    int64_t e = tq_gguf_get_int(g, key, 0);
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)alen, arch);
    int64_t h = tq_gguf_get_int(g, key, 0);
    return e > 0 && h > 0 && e % h == 0 ? (uint32_t)(e / h) : 0;
}

/* ------------------------------------------------------------ encode */

typedef struct src_tensor {
    const tq_kv_tensor *kt;
    uint32_t cells, kv_state, stream, layer, n_layer;
    int is_v;
} src_tensor;

static int cmp_off(const void *a, const void *b)
{
    uint64_t x = ((const src_tensor *)a)->kt->data_off, y = ((const src_tensor *)b)->kt->data_off;
    return x < y ? -1 : x > y;
}

static uint32_t pick_group(uint64_t width, uint32_t head_dim, int *guessed)
{
    *guessed = 0;
    if (head_dim && tq_is_pow2(head_dim) && head_dim >= 8 && head_dim <= 512 && width % head_dim == 0) return head_dim;
    *guessed = 1;
    for (uint32_t g = 128; g >= 8; g /= 2)
        if (width % g == 0) return g;
    return 0;
}

static tq_codec *make_codec(const tqkv_tensor *t)
{
    tq_codec_desc d;
    tq_codec *c = NULL;
    if (t->codec != TQKV_CODEC_RAW && !tqkv_codec_desc(t, &d)) tq_codec_new(NULL, &d, &c);
    return c;
}

typedef struct chunk_out {
    uint8_t *p;
    uint64_t len;
    tq_status st;
    char err[512];
} chunk_out;

/* Codes one chunk of tensor t (rows [r0, r0+n)) on the calling thread. */
static void encode_chunk(const src_tensor *s, const tqkv_tensor *t, const tq_codec *c, uint32_t r0, uint32_t n,
                         tq_simd simd, chunk_out *o)
{
    tq_ctx local = {TQ_OK, "", 1, simd, TQ_BACKEND_CPU};
    if (t->codec == TQKV_CODEC_RAW) {
        o->len = t->transposed ? t->bytes : (uint64_t)n * s->kt->row_size;
        o->p = malloc(o->len ? o->len : 1);
        if (!o->p) goto oom;
        memcpy(o->p, s->kt->data + (t->transposed ? 0 : (uint64_t)r0 * s->kt->row_size), o->len);
        return;
    }
    size_t nv = (size_t)n * t->width;
    float *x = malloc(nv * sizeof(float));
    o->len = nv / t->group * tq_codec_block_bytes(c);
    o->p = malloc(o->len);
    if (!x || !o->p) {
        free(x);
        goto oom;
    }
    o->st = tq_kv_tensor_read_rows(&local, s->kt, s->cells, r0, n, x);
    if (!o->st && t->innerq)
        for (size_t i = 0; i < nv; i += t->group)
            for (uint32_t j = 0; j < t->group; j++) x[i + j] *= t->innerq[j];
    if (!o->st) o->st = tq_encode(&local, c, x, nv, o->p);
    if (o->st) snprintf(o->err, sizeof o->err, "%s", local.msg);
    free(x);
    return;
oom:
    o->st = TQ_ERR_NOMEM;
    snprintf(o->err, sizeof o->err, "out of memory");
}

static tq_status adopt_base(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base, const char *base_name);

tq_status tq_kvsnap_encode(tq_ctx *ctx, const tq_kv_view *s, const tq_kvsnap_options *o, FILE *out,
                           tq_kvsnap_report *rep)
{
    memset(rep, 0, sizeof *rep);
    /* the tensors, in file order */
    size_t n = 0, cap = 0;
    src_tensor *src = NULL;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++) {
        const tq_kv_state *k = tq_kv_view_kv(s, i);
        for (uint32_t j = 0; j < k->n_stream; j++) {
            const tq_kv_stream *st = &k->streams[j];
            if (!st->cell_count) continue;
            for (uint32_t l = 0; l < st->n_layer; l++)
                for (int v = 0; v < 2; v++) {
                    if (n == cap) {
                        cap = cap ? 2 * cap : 64;
                        src_tensor *p = realloc(src, cap * sizeof *p);
                        if (!p) {
                            free(src);
                            return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
                        }
                        src = p;
                    }
                    src[n++] = (src_tensor){v ? &st->v[l] : &st->k[l], st->cell_count, i, j, l, st->n_layer, v};
                }
        }
    }
    qsort(src, n, sizeof *src, cmp_off);

    tqkv_meta m;
    memset(&m, 0, sizeof m);
    static const uint8_t kinds[] = {[TQ_KV_SESSION] = TQKV_SOURCE_SESSION, [TQ_KV_SEQUENCE] = TQKV_SOURCE_SEQUENCE,
                                    [TQ_KV_NUMPY] = TQKV_SOURCE_NUMPY};
    m.source_kind = kinds[tq_kv_view_kind(s)];
    m.state_version = tq_kv_view_version(s);
    m.source_size = tq_kv_view_size(s);
    m.n_tokens = tq_kv_view_n_tokens(s);
    m.tokens = (int32_t *)tq_kv_view_tokens(s);
    m.arch = (char *)tq_kv_view_arch(s);
    snprintf(m.profile, sizeof m.profile, "%s", o->profile ? o->profile : tq_type_profile_name(TQ_PROFILE_DEFAULT));
    m.has_fingerprint = (uint8_t)o->has_fingerprint;
    m.fingerprint = o->fingerprint;
    m.n_tensors = (uint32_t)n;
    m.t = calloc(n ? n : 1, sizeof *m.t);
    m.skeleton = malloc(m.source_size ? m.source_size : 1);
    if (!m.t || !m.skeleton) {
        free(src), free(m.t), free(m.skeleton);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    const uint8_t *bytes = tq_kv_view_bytes(s);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const tq_kv_tensor *kt = src[i].kt;
        tqkv_tensor *t = &m.t[i];
        memcpy(m.skeleton + m.skeleton_len, bytes + pos, kt->data_off - pos);
        m.skeleton_len += kt->data_off - pos;
        pos = kt->data_off + kt->bytes;
        t->file_off = kt->data_off;
        t->bytes = kt->bytes;
        t->kv_state = src[i].kv_state;
        t->stream = src[i].stream;
        t->layer = src[i].layer;
        t->is_v = (uint8_t)src[i].is_v;
        t->transposed = (uint8_t)kt->transposed;
        t->cells = src[i].cells;
        t->width = kt->width;
        t->type_id = kt->type->id;
        t->codec = TQKV_CODEC_RAW;
        int guessed = 0;
        uint32_t g = pick_group(kt->width, o->head_dim, &guessed);
        if (o->turbo && !o->lossless && kt->type->dtype >= 0 && kt->width % 128 == 0) {
            t->codec = TQKV_CODEC_TURBO; /* the fork's blocks, for comparison and interchange */
            t->group = 128;
            t->bits = (uint8_t)(src[i].is_v ? o->v_bits : o->k_bits);
            t->norm_correction = 1;
            rep->group_used = 128;
            rep->n_lossy++;
        } else if (!o->lossless && kt->type->dtype >= 0 && g) {
            int boundary = (int)src[i].layer < o->boundary_layers ||
                           (int)src[i].layer >= (int)src[i].n_layer - o->boundary_layers;
            t->codec = TQKV_CODEC_TQ;
            t->group = g;
            t->bits = (uint8_t)(boundary ? 8 : src[i].is_v ? o->v_bits : o->k_bits);
            t->norm_correction = t->bits >= 3; /* matched norms cost quality at 1-2 bits */
            t->seed = TQ_SEED_FORK;
            if (o->innerq) {
                uint32_t l = o->innerq_layers == 1 ? 0 : src[i].layer;
                if (o->innerq_dim != g || l >= o->innerq_layers) {
                    uint32_t layer = src[i].layer;
                    m.tokens = NULL;
                    m.arch = NULL;
                    tqkv_meta_free(&m);
                    free(src);
                    if (o->innerq_dim != g)
                        return tq_fail(ctx, TQ_ERR_ARG, "layer %u: InnerQ scales of %u channels for heads of %u", layer,
                                       o->innerq_dim, g);
                    return tq_fail(ctx, TQ_ERR_ARG, "layer %u: the InnerQ scales cover %u layers", layer, o->innerq_layers);
                }
                if (!(t->innerq = malloc(4ull * g))) {
                    m.tokens = NULL;
                    m.arch = NULL;
                    tqkv_meta_free(&m);
                    free(src);
                    return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
                }
                memcpy(t->innerq, o->innerq + ((size_t)l * 2 + (size_t)src[i].is_v) * g, 4ull * g);
            }
            rep->group_used = g;
            rep->group_guessed |= guessed;
            rep->n_lossy++;
        } else {
            rep->n_raw++;
        }
        if (t->codec == TQKV_CODEC_RAW && t->transposed && t->bytes > (1ull << 30)) {
            m.tokens = NULL; /* borrowed */
            m.arch = NULL;
            tqkv_meta_free(&m);
            free(src);
            return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "layer %u: a transposed V of more than 1 GiB cannot be kept verbatim "
                                                    "(a chunk holds at most 1 GiB); use a lossy preset", t->layer);
        }
        uint64_t rs = kt->row_size ? kt->row_size : 1;
        t->rows_per_chunk = t->codec == TQKV_CODEC_RAW && t->transposed ? t->cells
                                                                        : (uint32_t)(rs >= CHUNK_TARGET ? 1 : CHUNK_TARGET / rs);
        if (t->rows_per_chunk > t->cells) t->rows_per_chunk = t->cells;
    }
    memcpy(m.skeleton + m.skeleton_len, bytes + pos, m.source_size - pos);
    m.skeleton_len += m.source_size - pos;
    if (o->base) {
        tq_status bst = adopt_base(ctx, &m, o->base, o->base_name);
        if (bst) {
            m.tokens = NULL;
            m.arch = NULL;
            tqkv_meta_free(&m);
            free(src);
            return bst;
        }
    }

    tqkv_writer *w;
    uint64_t done_bytes = 0;
    tq_status st = tqkv_write_begin(ctx, out, &m, &w);
    int threads = o->threads > 0 ? o->threads : tq_ctx_threads(ctx);
    /* pipeline: chunks of tensor i are coded, compressed and hashed on the
     * worker threads while this thread writes tensor i-1's */
    chunk_out *jobs[2] = {NULL, NULL};
    tq_codec *codecs[2] = {NULL, NULL};
    uint32_t njob[2] = {0, 0};
    int have_prev = 0;
    tq_simd simd = tq_ctx_simd(ctx);
    int level = o->zstd_level;
#pragma omp parallel num_threads(threads)
#pragma omp single
    for (size_t i = 0; i <= n; i++) {
        int cur = (int)(i & 1), prv = cur ^ 1, started = 0;
        if (i < n && !st) {
            tqkv_tensor *t = &m.t[i];
            uint32_t rows = t->cells - t->row_start, nch = (rows + t->rows_per_chunk - 1) / t->rows_per_chunk;
            codecs[cur] = make_codec(t);
            jobs[cur] = calloc(nch ? nch : 1, sizeof(chunk_out));
            njob[cur] = nch;
            if (!jobs[cur] || (t->codec != TQKV_CODEC_RAW && !codecs[cur])) {
                st = tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
                free(jobs[cur]);
                tq_codec_free(codecs[cur]);
                jobs[cur] = NULL;
                codecs[cur] = NULL;
            } else {
                started = 1;
                chunk_out *co = jobs[cur];
                const tq_codec *c = codecs[cur];
                const src_tensor *sr = &src[i];
                for (uint32_t k = 0; k < nch; k++) {
#pragma omp task firstprivate(k, co, c, t, sr, i)
                    {
                        uint32_t r0 = t->row_start + k * t->rows_per_chunk;
                        uint32_t nr = t->cells - r0 < t->rows_per_chunk ? t->cells - r0 : t->rows_per_chunk;
                        encode_chunk(sr, t, c, r0, nr, simd, &co[k]);
                        if (!co[k].st) { /* compress and hash here, off the writing thread */
                            uint8_t *pk;
                            uint64_t pl;
                            co[k].st = tqkv_chunk_pack((uint32_t)i, r0, nr, co[k].p, co[k].len, level, &pk, &pl);
                            free(co[k].p);
                            co[k].p = co[k].st ? NULL : pk;
                            co[k].len = co[k].st ? 0 : pl;
                            if (co[k].st) snprintf(co[k].err, sizeof co[k].err, "out of memory");
                        }
                    }
                }
            }
        }
        if (have_prev) {
            const tqkv_tensor *t = &m.t[i - 1];
            for (uint32_t k = 0; k < njob[prv]; k++) {
                if (!st && jobs[prv][k].st)
                    st = tq_fail(ctx, jobs[prv][k].st, "layer %u %s: %s", t->layer, t->is_v ? "V" : "K", jobs[prv][k].err);
                if (!st) st = tqkv_write_packed(w, jobs[prv][k].p, jobs[prv][k].len);
                free(jobs[prv][k].p);
            }
            free(jobs[prv]);
            tq_codec_free(codecs[prv]);
            jobs[prv] = NULL;
            codecs[prv] = NULL;
            have_prev = 0;
            done_bytes += t->bytes;
            if (o->progress && !st) o->progress(o->progress_user, done_bytes, m.source_size - m.skeleton_len);
        }
#pragma omp taskwait
        if (started) have_prev = 1;
    }
    for (int q = 0; q < 2; q++) { /* after an error: what was coded but not written */
        for (uint32_t k = 0; jobs[q] && k < njob[q]; k++) free(jobs[q][k].p);
        free(jobs[q]);
        tq_codec_free(codecs[q]);
    }
    rep->snapshot_bytes = tqkv_writer_final_size(w);
    if (!st) {
        st = tqkv_write_end(w);
    } else {
        tqkv_writer_abort(w);
    }
    rep->n_tensors = (uint32_t)n;
    rep->source_bytes = m.source_size;
    rep->kv_values = tq_kv_view_kv_values(s);
    rep->kv_bytes = tq_kv_view_kv_bytes(s);
    m.tokens = NULL; /* borrowed */
    m.arch = NULL;
    tqkv_meta_free(&m);
    free(src);
    return st;
}

/* Does base describe the same K/V tensors, with its cells a prefix of t's? */
static int same_tensor(const tqkv_tensor *a, const tqkv_tensor *b)
{
    return a->kv_state == b->kv_state && a->stream == b->stream && a->layer == b->layer && a->is_v == b->is_v &&
           a->transposed == b->transposed && a->width == b->width && a->type_id == b->type_id && a->cells <= b->cells;
}

static tq_status adopt_base(tq_ctx *ctx, tqkv_meta *m, const tqkv_reader *base, const char *base_name)
{
    const tqkv_meta *b = tqkv_meta_of(base);
    if (b->base_id) return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "the base is itself an appended snapshot (chains are not supported)");
    if (b->source_kind != m->source_kind || strcmp(b->profile, m->profile) || b->n_tensors != m->n_tensors)
        return tq_fail(ctx, TQ_ERR_ARG, "the base snapshot is of another kind of state (file kind, profile or tensors differ)");
    if (b->n_tokens > m->n_tokens || memcmp(b->tokens, m->tokens, 4ull * b->n_tokens))
        return tq_fail(ctx, TQ_ERR_ARG, "the base's %u tokens are not a prefix of this state's %u tokens", b->n_tokens,
                       m->n_tokens);
    if (b->has_fingerprint != m->has_fingerprint || b->fingerprint != m->fingerprint)
        return tq_fail(ctx, TQ_ERR_ARG, "the base was made for another model");
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        tqkv_tensor *t = &m->t[i];
        const tqkv_tensor *bt = &b->t[i];
        if (!same_tensor(bt, t))
            return tq_fail(ctx, TQ_ERR_ARG, "layer %u %s: the base's tensor does not match this state's", t->layer,
                           t->is_v ? "V" : "K");
        /* the rows in the base decode as they would in a full encode only
         * with the base's codec */
        t->codec = bt->codec;
        t->bits = bt->bits;
        t->norm_correction = bt->norm_correction;
        t->group = bt->group;
        t->seed = bt->seed;
        t->rows_per_chunk = bt->rows_per_chunk;
        t->row_start = t->codec == TQKV_CODEC_RAW && t->transposed ? 0 : bt->cells;
        free(t->innerq); /* the base's scales, as for its codec */
        t->innerq = NULL;
        if (bt->innerq) {
            if (!(t->innerq = malloc(4ull * bt->group))) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
            memcpy(t->innerq, bt->innerq, 4ull * bt->group);
        }
    }
    const char *slash = strrchr(base_name, '/');
    m->base_name = strdup(slash ? slash + 1 : base_name);
    if (!m->base_name) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    m->base_id = tqkv_file_id(base);
    return TQ_OK;
}

/* ------------------------------------------------------------ decode */

static tq_status put(tq_ctx *ctx, FILE *f, const void *p, uint64_t n)
{
    if (n && fwrite(p, 1, n, f) != n) return tq_fail(ctx, TQ_ERR_IO, "writing the state file failed");
    return TQ_OK;
}

/* Source bytes of chunk k of tensor t (ck = the chunk's index in the file). */
static int is_turbo(const tq_ggml_type *t)
{
    return t->dtype == TQ_DT_TURBO2 || t->dtype == TQ_DT_TURBO3 || t->dtype == TQ_DT_TURBO4;
}

/* Row width in the output: the same, except that turbo caches pad every head
 * to a multiple of 128 values as the fork allocates them. */
static uint64_t out_width(const tqkv_tensor *t, const tq_ggml_type *oty, uint32_t head_dim)
{
    if (!is_turbo(oty) || !head_dim) return t->width;
    uint64_t ph = (head_dim + 127) / 128 * 128;
    return t->width / head_dim * ph;
}

/* Source bytes of chunk ck of tensor t, converted from the source type ty to
 * the output type oty when they differ (rows in cell-major order). */
static void decode_chunk(const tqkv_reader *r, const tqkv_tensor *t, const tq_codec *c, const tq_ggml_type *ty,
                         const tq_ggml_type *oty, uint32_t head_dim, uint64_t ck, int skip, tq_simd simd, chunk_out *o)
{
    tq_ctx local = {TQ_OK, "", 1, simd, TQ_BACKEND_CPU};
    const tqkv_chunk *ch = tqkv_chunk_at(r, ck);
    if (skip) { /* not wanted: zeros of the length it would have */
        o->len = t->codec == TQKV_CODEC_RAW && oty == ty ? ch->raw_len
                                                         : ch->nrows * (out_width(t, oty, head_dim) / oty->block) * oty->bytes;
        if (!(o->p = calloc(1, o->len ? o->len : 1))) goto oom;
        return;
    }
    uint8_t *raw = malloc(ch->raw_len ? ch->raw_len : 1);
    if (!raw) goto oom;
    o->st = tqkv_chunk_read(&local, r, ck, raw);
    if (o->st || (t->codec == TQKV_CODEC_RAW && oty == ty)) {
        o->p = raw;
        o->len = ch->raw_len;
        if (o->st) snprintf(o->err, sizeof o->err, "%s", local.msg);
        return;
    }
    size_t nv = (size_t)ch->nrows * t->width;
    uint64_t ow = out_width(t, oty, head_dim);
    float *y = malloc((ow > t->width ? ch->nrows * ow : nv) * sizeof(float));
    o->len = (uint64_t)ch->nrows * (ow / oty->block) * oty->bytes;
    o->p = malloc(o->len ? o->len : 1);
    if (!y || !o->p) {
        free(y), free(raw);
        goto oom;
    }
    if (t->codec != TQKV_CODEC_RAW) {
        o->st = tq_decode(&local, c, raw, nv, y);
        if (!o->st && t->innerq)
            for (size_t i = 0; i < nv; i += t->group)
                for (uint32_t j = 0; j < t->group; j++) y[i + j] /= t->innerq[j];
    }
    else if (!t->transposed) o->st = tq_dequantize(&local, (tq_dtype)ty->dtype, raw, nv, y);
    else /* element-major source bytes: gather cell-major rows */
        for (uint64_t j = 0; j < t->width && !o->st; j++)
            for (uint32_t c0 = 0; c0 < t->cells && !o->st; c0++)
                o->st = tq_dequantize(&local, (tq_dtype)ty->dtype, raw + (j * t->cells + c0) * ty->bytes, 1,
                                      y + (uint64_t)c0 * t->width + j);
    if (!o->st && ow > t->width) { /* the fork's layout: each head zero-padded to whole 128s */
        uint64_t nh = t->width / head_dim, ph = ow / nh;
        for (uint64_t rr = ch->nrows; rr-- > 0;)
            for (uint64_t h = nh; h-- > 0;) {
                float *dst = y + rr * ow + h * ph;
                memmove(dst, y + rr * t->width + h * head_dim, head_dim * sizeof(float));
                memset(dst + head_dim, 0, (ph - head_dim) * sizeof(float));
            }
        nv = (size_t)ch->nrows * ow;
    }
    if (!o->st) o->st = tq_quantize(&local, (tq_dtype)oty->dtype, y, nv, o->p);
    if (o->st) snprintf(o->err, sizeof o->err, "%s", local.msg);
    free(y);
    free(raw);
    return;
oom:
    o->st = TQ_ERR_NOMEM;
    snprintf(o->err, sizeof o->err, "out of memory");
}

/* One tensor on its way out: where its chunks are and their decoded bytes. */
typedef struct djob {
    uint32_t i;
    const tqkv_tensor *t;
    const tq_ggml_type *ty, *oty;
    tq_codec *c;
    uint64_t nb, bfirst, first, nch;
    uint32_t head_dim;
    chunk_out *co;
} djob;

static tq_status job_setup(tq_ctx *ctx, const tqkv_meta *m, tq_type_profile prof, const tq_ggml_type *want,
                           const tqkv_reader *r, const tqkv_reader *base, uint32_t i, uint64_t *ck, djob *j)
{
    memset(j, 0, sizeof *j);
    j->i = i;
    j->t = &m->t[i];
    j->ty = tq_ggml_type_get(prof, j->t->type_id);
    j->oty = want ? want : j->ty;
    j->c = make_codec(j->t);
    /* the base's chunks for rows below row_start, then ours */
    if (j->t->row_start) {
        while (j->bfirst < tqkv_n_chunks(base) && tqkv_chunk_at(base, j->bfirst)->tensor < i) j->bfirst++;
        while (j->bfirst + j->nb < tqkv_n_chunks(base) && tqkv_chunk_at(base, j->bfirst + j->nb)->tensor == i) j->nb++;
    }
    j->first = *ck;
    uint64_t nown = 0;
    while (*ck < tqkv_n_chunks(r) && tqkv_chunk_at(r, *ck)->tensor == i) (*ck)++, nown++;
    j->nch = j->nb + nown;
    j->co = calloc(j->nch ? j->nch : 1, sizeof *j->co);
    if (!j->co || (j->t->codec != TQKV_CODEC_RAW && !j->c)) {
        free(j->co);
        tq_codec_free(j->c);
        memset(j, 0, sizeof *j);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

static void job_free(djob *j)
{
    for (uint64_t k = 0; j->co && k < j->nch; k++) free(j->co[k].p);
    free(j->co);
    tq_codec_free(j->c);
    j->co = NULL;
    j->c = NULL;
}

/* The skeleton up to the tensor (its layer header patched for a new cache
 * type), then the tensor's bytes. */
static tq_status job_write(tq_ctx *ctx, const tqkv_meta *m, const tqkv_reader *r, const tqkv_reader *base, djob *j,
                           FILE *out, uint64_t *pos, uint64_t *sk)
{
    const tqkv_tensor *t = j->t;
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
        st = put(ctx, out, m->skeleton + *sk, gap - 12);
        if (!st) st = put(ctx, out, h, 12);
    } else {
        st = put(ctx, out, m->skeleton + *sk, gap);
    }
    *sk += gap;
    *pos = t->file_off + t->bytes;
    for (uint64_t k = 0; k < j->nch && !st; k++)
        if (j->co[k].st) st = tq_fail(ctx, j->co[k].st, "layer %u %s: %s", t->layer, t->is_v ? "V" : "K", j->co[k].err);
    if (st) return st;
    if (t->transposed && (t->codec != TQKV_CODEC_RAW || oty != ty)) {
        /* cell-major rows back to llama.cpp's element-major V */
        uint64_t es = oty->bytes, row = 0, tbytes = t->width * t->cells * es;
        uint8_t *tb = malloc(tbytes ? tbytes : 1);
        if (!tb) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
        for (uint64_t k = 0; k < j->nch; k++) {
            const tqkv_chunk *ch = k < j->nb ? tqkv_chunk_at(base, j->bfirst + k) : tqkv_chunk_at(r, j->first + k - j->nb);
            for (uint32_t rr = 0; rr < ch->nrows; rr++, row++)
                for (uint64_t e = 0; e < t->width; e++)
                    memcpy(tb + (e * t->cells + row) * es, j->co[k].p + ((uint64_t)rr * t->width + e) * es, es);
        }
        st = put(ctx, out, tb, tbytes);
        free(tb);
        return st;
    }
    for (uint64_t k = 0; k < j->nch && !st; k++) st = put(ctx, out, j->co[k].p, j->co[k].len);
    return st;
}

tq_status tq_kvsnap_decode(tq_ctx *ctx, const tqkv_reader *r, const tqkv_reader *base,
                           const tq_kvsnap_decode_options *opt, FILE *out)
{
    static const tq_kvsnap_decode_options defaults = {0};
    const tq_kvsnap_decode_options *o = opt ? opt : &defaults;
    int threads = o->threads;
    const char *cache_type = o->cache_type;
    const tqkv_meta *m = tqkv_meta_of(r);
    uint64_t done_bytes = 0;
    if (m->base_id) {
        if (!base)
            return tq_fail(ctx, TQ_ERR_ARG, "the snapshot appends to %s: give that snapshot (--base)", m->base_name);
        const tqkv_meta *b = tqkv_meta_of(base);
        if (tqkv_file_id(base) != m->base_id)
            return tq_fail(ctx, TQ_ERR_ARG, "the base snapshot is not the one this snapshot appends to (%s)", m->base_name);
        for (uint32_t i = 0; i < m->n_tensors; i++)
            if (b->n_tensors != m->n_tensors || (m->t[i].row_start && b->t[i].cells != m->t[i].row_start))
                return tq_fail(ctx, TQ_ERR_CORRUPT, "the base snapshot does not fit (tensor %u)", i);
    }
    tq_type_profile prof;
    if (tq_type_profile_parse(m->profile, &prof)) return tq_fail(ctx, TQ_ERR_FORMAT, "unknown type-id profile");
    if (threads <= 0) threads = tq_ctx_threads(ctx);
    const tq_ggml_type *want = NULL;
    if (cache_type && m->source_kind == TQKV_SOURCE_NUMPY)
        return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "--cache-type is for llama.cpp state files, not NumPy dumps");
    if (cache_type) {
        want = tq_ggml_type_by_name(prof, cache_type);
        /* q8_0/q4_0 are left out on purpose: current upstream llama.cpp
         * stores K/V of quantized caches Hadamard-rotated (its attention
         * rotation), so plain q8_0 rows would restore wrong there.  The
         * fork's turbo caches are written as the fork lays them out. */
        if (!want || (want->dtype != TQ_DT_F32 && want->dtype != TQ_DT_F16 && want->dtype != TQ_DT_BF16 && !is_turbo(want)))
            return tq_fail(ctx, TQ_ERR_UNSUPPORTED,
                           "cache type %s: tq converts to f32, f16, bf16 and the fork's turbo2/3/4 caches "
                           "(q8_0/q4_0 caches are stored rotated by current llama.cpp)", cache_type);
        if (is_turbo(want) && !o->head_dim)
            return tq_fail(ctx, TQ_ERR_ARG, "a turbo cache pads each head: the head size is needed (--model or --head-dim)");
    }
    /* every conversion is possible before anything is written */
    for (uint32_t i = 0; want && i < m->n_tensors; i++) {
        const tqkv_tensor *t = &m->t[i];
        const tq_ggml_type *ty = tq_ggml_type_get(prof, t->type_id);
        if (ty->dtype < 0) return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "layer %u: no decoder for %s", t->layer, ty->name);
        if (out_width(t, want, o->head_dim) % want->block)
            return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "layer %u: rows of %llu values are not whole %s blocks", t->layer,
                           (unsigned long long)t->width, want->name);
        if (t->transposed && want->block != 1)
            return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "transposed V (flash attention off) needs a float cache type, not %s",
                           want->name);
        if (is_turbo(want) && (t->width % o->head_dim || is_turbo(ty)))
            return tq_fail(ctx, TQ_ERR_UNSUPPORTED, "layer %u: rows of %llu values are not whole heads of %u%s", t->layer,
                           (unsigned long long)t->width, o->head_dim, is_turbo(ty) ? " (already a turbo cache)" : "");
    }
    /* A two-stage pipeline: while worker threads decode tensor i's chunks,
     * this thread writes tensor i-1, so the output stream and the decoding
     * overlap.  Two tensors' buffers are alive at a time. */
    uint64_t pos = 0, sk = 0, ck = 0;
    tq_status st = TQ_OK;
    djob jobs[2];
    memset(jobs, 0, sizeof jobs);
    int have_prev = 0;
    tq_simd simd = tq_ctx_simd(ctx);
#pragma omp parallel num_threads(threads)
#pragma omp single
    for (uint32_t i = 0; i <= m->n_tensors; i++) {
        djob *j = &jobs[i & 1], *prev = &jobs[(i + 1) & 1];
        int started = 0;
        if (i < m->n_tensors && !st) {
            st = job_setup(ctx, m, prof, want, r, base, i, &ck, j);
            j->head_dim = o->head_dim;
            started = !st;
            for (uint64_t k = 0; started && k < j->nch; k++) {
#pragma omp task firstprivate(k, j)
                {
                    const tqkv_reader *from = k < j->nb ? base : r;
                    uint64_t at = k < j->nb ? j->bfirst + k : j->first + k - j->nb;
                    const tqkv_chunk *ch = tqkv_chunk_at(from, at);
                    int skip = (o->max_rows && ch->row0 >= o->max_rows && !j->t->transposed) ||
                               (o->layer_hi && (j->t->layer < o->layer_lo || j->t->layer >= o->layer_hi));
                    decode_chunk(from, j->t, j->c, j->ty, j->oty, j->head_dim, at, skip, simd, &j->co[k]);
                }
            }
        }
        if (have_prev) {
            if (!st) st = job_write(ctx, m, r, base, prev, out, &pos, &sk);
            job_free(prev);
            have_prev = 0;
            done_bytes += prev->t->bytes;
            if (o->progress && !st) o->progress(o->progress_user, done_bytes, m->source_size - m->skeleton_len);
        }
#pragma omp taskwait
        if (started) have_prev = 1;
    }
    if (have_prev) job_free(&jobs[m->n_tensors & 1]);
    if (!st) st = put(ctx, out, m->skeleton + sk, m->skeleton_len - sk);
    return st;
}
