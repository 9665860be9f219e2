/* kv_plan.c - the snapshot plan (kv_plan.h): every coding decision for a
 * snapshot, made before any byte is coded, so that a dry run, an encode and
 * an appended encode cannot disagree. */
#include "kv_plan.h"
#include "kv_plan_parts.h"
#include "kv_presets.h"
#include "arch.h"
#include "kv_klt.h"
#include "kv_layers.h"
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int tq_kvsnap_k_transformed(const tq_kvsnap_plan *p)
{
    int klt = 0;
    for (uint32_t i = 0; i < p->meta.n_tensors; i++) {
        const tqkv_record *t = &p->meta.t[i];
        if (!t->is_v && t->codec == TQKV_CODEC_TQ) return 0;
        klt |= !t->is_v && t->codec == TQKV_CODEC_KLT;
    }
    return klt;
}

/* ------------------------------------------------------------ models */

tq_status tq_kvsnap_check_model(tq_ctx *ctx, const tqkv_meta *m, const tq_model *model,
                                const char *model_label)
{
    uint64_t fp = model->fingerprint;
    if (!m->has_fingerprint)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG, "the snapshot carries no model fingerprint (encoded without --model)");
    if (fp != m->fingerprint)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG, "made for another model (fingerprint %016llx, %s has %016llx)",
            (unsigned long long)m->fingerprint, model_label, (unsigned long long)fp);
    tq_cache_layers L; /* iSWA: the caches' layers must be the model's as recorded */
    tq_status st = tq_cache_layers_of_snapshot(ctx, m, model, &L);
    if (!st) tq_cache_layers_free(&L);
    return st;
}

/* ------------------------------------------------------------ the view's tensors */


static int cmp_off(const void *a, const void *b)
{
    uint64_t x = ((const src_tensor *)a)->kt->data_off, y = ((const src_tensor *)b)->kt->data_off;
    return x < y ? -1 : x > y;
}

/* Every K/V tensor with cells, in the order of the source bytes. */
static tq_status collect(tq_ctx *ctx, const tq_kv_view *s, src_tensor **out, size_t *count)
{
    size_t n = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(s, i)->n_stream; j++) {
            const tq_kv_stream *st = &tq_kv_view_kv(s, i)->streams[j];
            if (st->cell_count) n += (st->v ? 2ull : 1ull) * st->n_layer;
        }
    src_tensor *src = calloc(n ? n : 1, sizeof *src);
    if (!src) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    n = 0;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s); i++)
        for (uint32_t j = 0; j < tq_kv_view_kv(s, i)->n_stream; j++) {
            const tq_kv_stream *st = &tq_kv_view_kv(s, i)->streams[j];
            for (uint32_t l = 0; st->cell_count && l < st->n_layer; l++)
                for (int v = 0; v < (st->v ? 2 : 1); v++) /* an MLA cache: K alone */
                    src[n++] = (src_tensor){.kt = v ? &st->v[l] : &st->k[l],
                                            .cells = st->cell_count,
                                            .kv_state = i,
                                            .stream = j,
                                            .layer = l,
                                            .n_layer = st->n_layer,
                                            .is_v = v};
        }
    qsort(src, n, sizeof *src, cmp_off);
    *out = src;
    *count = n;
    return TQ_OK;
}

/* ------------------------------------------------------------ per tensor */

static tq_status plan_innerq(tq_ctx *ctx, const tq_kvsnap_settings *o, const src_tensor *s,
                             tqkv_record *t)
{
    uint32_t l = o->innerq_layers == 1 ? 0 : s->model_layer, n = o->innerq_dim;
    if (n != t->group && n != t->width) /* one vector for every head, or one per head of the row */
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG,
            "layer %u: InnerQ scales of %u channels for heads of %u (rows of %llu): "
            "scales for another model",
            s->layer, n, t->group, (unsigned long long)t->width);
    if (o->innerq_layers != 1 && o->innerq_layers != s->n_model)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "InnerQ scales for %u layers, the state's model has %u: scales for "
                                "another model",
                                o->innerq_layers, s->n_model);
    if (l >= o->innerq_layers)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "layer %u: the InnerQ scales cover %u layers",
                                s->layer, o->innerq_layers);
    const float *src = o->innerq + ((size_t)l * 2 + (size_t)s->is_v) * n;
    uint32_t ones = 0;
    while (ones < n && src[ones] == 1.0f) ones++;
    if (ones == n) return TQ_OK; /* scales of 1 (V left alone): nothing to store */
    if (!(t->innerq = malloc(4ull * n)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(t->innerq, src, 4ull * n);
    t->innerq_n = n;
    return TQ_OK;
}

/* tq's block for b bits' distortion in groups of g: its field bits, cells and norm
 * correction. */
static void tq_block_coding(const tq_kvsnap_settings *o, int b, uint32_t g, uint8_t *bits,
                            uint8_t *uniform, uint8_t *nc)
{
    *bits = (uint8_t)b;
    *uniform = 0;
    *nc = b >= TQ_KVSNAP_NC_BITS; /* matched norms cost quality at fewer bits */
    /* auto: where measured to pay (kv_presets.h) */
    int auto_u = b == TQ_KVSNAP_UNIFORM_BITS && g >= TQ_KVSNAP_UNIFORM_GROUP;
    int u = o->cells == TQ_CELLS_UNIFORM || (o->cells == TQ_CELLS_AUTO && auto_u);
    if (u && o->codec == TQKV_CODEC_TQ && b < 8) { /* b bits' distortion from uniform cells */
        *uniform = 1;                                /* one bit wider */
        *bits = (uint8_t)(b + 1);
    }
}

/* 3- and 5-bit indices straddle bytes, hiding their skew from zstd: planes give it whole 2- and
 * 4-bit magnitudes (measured: 3 -> 2.83 bits per index, the entropy being 2.82); other widths
 * are aligned */
static uint8_t tq_block_planes(const tq_kvsnap_settings *o, int codec, int bits)
{
    return codec == TQKV_CODEC_TQ && (bits == 3 || bits == 5) && !o->no_planes;
}

/* TurboAngle (b bits a value: (angle + radius) / 2) or TurboQuant-prod blocks in place of
 * tq's, where the options ask for them. */
static void other_block(int codec, int b, tqkv_record *t)
{
    if (codec == TQKV_CODEC_ANGLE) {
        t->codec = TQKV_CODEC_ANGLE;
        t->bits = (uint8_t)(b >= 8 ? 8 : b + 1);
        t->radius_bits = (uint8_t)(b >= 8 ? 8 : b - 1);
        t->norm_correction = 1;
        t->seed = 1;
    } else if (codec == TQKV_CODEC_PROD) {
        t->codec = TQKV_CODEC_PROD;
        t->norm_correction = 0;
        t->seed = 1;
    }
}

/* Whether s is in the first or last --boundary-layers layers (coded at the blocks' bb bits). */
static int is_boundary(const tq_kvsnap_settings *o, const src_tensor *s)
{
    return (int)s->model_layer < o->boundary_layers ||
           (int)s->model_layer >= (int)s->n_model - o->boundary_layers;
}

/* A quantized source (a turbo cache: 2.1 to 4.3 bits a value) coded at as many bits a value
 * as it holds would be larger and worse than its own blocks: those are kept instead. */
static int no_smaller(const tq_kv_tensor *kt, const tqkv_record *t)
{
    if (kt->type->block == 1 || !t->group) return 0;
    double source_bits = 8.0 * kt->type->bytes / kt->type->block;
    return t->bits + 16.0 / t->group >= source_bits;
}

static tq_status plan_tensor(tq_ctx *ctx, tq_kvsnap_plan *p, const tq_kvsnap_settings *o,
                             uint32_t head_dim, const src_tensor *s, tqkv_record *t)
{
    const tq_kv_tensor *kt = s->kt;
    *t = (tqkv_record){.file_off = kt->data_off,
                       .bytes = kt->bytes,
                       .kv_state = s->kv_state,
                       .stream = s->stream,
                       .layer = s->layer,
                       .is_v = (uint8_t)s->is_v,
                       .transposed = (uint8_t)kt->transposed,
                       .cells = s->cells,
                       .width = kt->width,
                       .type_id = kt->type->id,
                       .hadamard = kt->hadamard,
                       .codec = TQKV_CODEC_RAW,
                       .model_layer = s->mapped ? s->model_layer : TQKV_NO_MODEL_LAYER};
    const tqkv_record kept = *t;
    int guessed = 0, lossless = o->row->exact,
        decodable = kt->type->dtype >= 0;
    uint32_t g = tq_arch_group_for_width(kt->width, head_dim, &guessed);
    if (o->codec == TQKV_CODEC_TURBO && !lossless && decodable && kt->width % 128 == 0) {
        t->codec = TQKV_CODEC_TURBO; /* the fork's blocks, for comparison and interchange */
        t->group = 128;
        t->bits = (uint8_t)(s->is_v ? p->settings.v_bits : p->settings.k_bits);
        t->norm_correction = 1;
        p->group = 128;
    } else if (!lossless && decodable && g && o->codec != TQKV_CODEC_TURBO) {
        int boundary = is_boundary(o, s);
        int b = s->is_v ? p->settings.v_bits : p->settings.k_bits;
        if (boundary) b = TQ_KVSNAP_BOUNDARY_BITS;
        t->codec = TQKV_CODEC_TQ;
        t->group = g;
        t->seed = TQ_SEED_FORK;
        tq_block_coding(o, b, g, &t->bits, &t->uniform, &t->norm_correction);
        other_block(o->codec, b, t);
        p->group = g;
        if (guessed) p->group_source = TQ_HEAD_NONE; /* one guessed group says so */
        t->group_guessed = (uint8_t)guessed;
        if (o->innerq) {
            tq_status st = plan_innerq(ctx, o, s, t);
            if (st) return st;
        }
        if (o->sink_cells > 0 && t->codec == TQKV_CODEC_TQ && !kt->transposed &&
            s->cells > (uint32_t)o->sink_cells)
            t->sink_rows =
                (uint32_t)o->sink_cells; /* the first cells, which attention keeps returning to */
        /* planes are a v3 extension, which a transposed V cannot carry (TQKV.md) */
        t->planes = !kt->transposed && tq_block_planes(o, t->codec, t->bits);
        if (p->settings.past_bits && t->codec == TQKV_CODEC_TQ && !boundary && !kt->transposed &&
            s->past_rows > t->sink_rows && p->settings.past_bits < b) { /* coarse rows: kv_plan.h */
            t->coarse_end = s->past_rows;
            tq_block_coding(o, p->settings.past_bits, g, &t->coarse_bits, &t->coarse_uniform,
                            &t->coarse_nc);
            t->coarse_planes = tq_block_planes(o, t->codec, t->coarse_bits);
        }
    }
    if (t->codec != TQKV_CODEC_RAW && no_smaller(kt, t)) *t = kept;
    if (t->codec == TQKV_CODEC_RAW)
        p->n_kept++;
    else
        p->n_coded++;
    if (t->codec == TQKV_CODEC_RAW && t->transposed && t->bytes > (1ull << 30))
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "layer %u: a transposed V of more than 1 GiB cannot be kept "
                                "verbatim (a chunk holds at most 1 GiB); use a lossy preset",
                                t->layer);
    uint64_t rs = kt->row_size ? kt->row_size : 1;
    uint64_t chunk_bytes = (uint64_t)TQ_KVSNAP_CHUNK_KIB << 10;
    t->rows_per_chunk = (uint32_t)(rs >= chunk_bytes ? 1 : chunk_bytes / rs);
    if (t->codec == TQKV_CODEC_RAW && t->transposed) t->rows_per_chunk = t->cells; /* one piece */
    if (t->rows_per_chunk > t->cells) t->rows_per_chunk = t->cells;
    return TQ_OK;
}

/* ------------------------------------------------------------ the plan */

/* The RoPE tensor i's K went through, with its cells' positions; NULL where
 * it cannot be told (no model, M-RoPE cells, a RoPE tq does not rebuild). */
static const tq_rope *tensor_rope(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                  const src_tensor *s, const tqkv_record *t, tq_rope *r,
                                  int32_t **pos)
{
    *pos = NULL;
    if (s->no_rope) return NULL;
    int swa = tq_kv_view_n_kv(v) == 2 && s->kv_state == 1; /* iSWA: the SWA cache comes second */
    int known = o->model && (swa ? o->model->rope_swa_known : o->model->rope_known);
    if (known) *r = swa ? o->model->rope_swa : o->model->rope;
    if (o->k_offset != TQ_KOFF_ROPE || !known || tq_kv_view_has_ext(v) ||
        tq_rope_check(ctx, r, t->width) || !(*pos = malloc(4ull * t->cells))) {
        tq_ctx_clear_error(ctx); /* not a failure: the plain mean serves */
        return NULL;
    }
    tq_kv_view_stream_positions(v, &tq_kv_view_kv(v, s->kv_state)->streams[s->stream], *pos);
    return r;
}

/* Whether tensor t may be transform-coded: a tq-coded tensor of rows (not
 * transposed), heads of a multiple of 8, enough coded cells for a
 * covariance, not appended (the base fixes the coding), V only where the
 * preset gives V a rate; with --transform auto, not where the user gave
 * InnerQ scales (the transform would drop them). */
static int transformable(const tq_kvsnap_plan *p, const tq_kvsnap_settings *o,
                         const tqkv_record *t)
{
    double rate = t->is_v ? p->settings.v_rate : p->settings.k_rate;
    if (o->transform == TQ_TC_AUTO && o->innerq_file) return 0; /* the user's scales rule */
    /* a sliding layer's cells past its window are never read again, and the window is too few
       cells to pay for a basis: Gemma 3 270M at 8192 tokens restored at 0.89x the floor with
       them transform-coded (2.690 bits), 0.92x with none (2.575 bits) */
    if (o->transform == TQ_TC_AUTO && t->coarse_end) return 0;
    return o->transform != TQ_TC_OFF && t->codec == TQKV_CODEC_TQ && !t->transposed &&
           t->group % 8 == 0 && rate > 0 && !o->base &&
           t->cells >= t->sink_rows + (uint32_t)TQ_KVSNAP_TRANSFORM_CELLS;
}

/* The bits per value tq's codec spends on t: its indices (uniform cells:
 * b + 1-bit fields that zstd codes to about b) and a fp16 norm per group. */
static double tq_codec_bits(const tqkv_record *t)
{
    return t->bits - t->uniform + 16.0 / t->group;
}

/* What tq's blocks cost on t's coded rows, measured: 2048 of them spread over the cells,
 * coded and packed as chunks are (planes, zstd at `level`), in bits per value. */
static tq_status blocks_bits(tq_ctx *ctx, const src_tensor *s, const tqkv_record *t, int level,
                             double *bits)
{
    uint32_t coded = t->cells - t->sink_rows, ns = coded < 2048 ? coded : 2048;
    size_t nv = (size_t)ns * t->width, nb = nv / t->group;
    tq_codec *c = tq_kvsnap_record_codec(ctx, t);
    if (!c) return tq_ctx_status(ctx);
    size_t len = nb * tq_codec_block_bytes(c);
    float *x = malloc(nv * sizeof *x);        /* [ns][width]: the sample */
    uint8_t *blk = malloc(len ? len : 1);     /* [nb][block bytes]: coded */
    uint8_t *planes = malloc(len ? len : 1);  /* the same as planes */
    uint8_t *packed = NULL;
    uint64_t packed_len = 0;
    tq_status st = TQ_OK;
    if (!x || !blk || !planes) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; !st && k < ns; k++) {
        uint32_t row = t->sink_rows + (uint32_t)((uint64_t)k * coded / ns);
        st = tq_kv_view_read_rows(ctx, s->kt, t->cells, row, 1, x + (size_t)k * t->width);
    }
    if (!st) st = tq_encode(ctx, c, x, nv, blk);
    if (!st && t->planes) tq_blocks_to_planes(t->group, t->bits, blk, nb, planes);
    uint64_t cuts[2] = {2 * nb, 2 * nb + nb * t->group / 8};
    if (!st && tqkv_chunk_pack(0, 0, ns, t->planes ? planes : blk, len, level, cuts,
                               t->planes ? 2 : 0, &packed, &packed_len))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) *bits = 8.0 * (double)packed_len / (double)nv;
    free(packed);
    free(x);
    free(blk);
    free(planes);
    tq_codec_free(c);
    return st;
}

/* Fits t's transforms; takes them (t becomes a KLT record) where forced or
 * where, at the error tq's codec would leave on t's rows, the transform's
 * indices and bases take fewer bits than tq's codec (on Gemma 3 270M's K the
 * transform's error is far lower at the same rate: ../shared/reference/
 * real-models.md; on K/V without such structure it is not, and the bases
 * cost: tests/bench/results/kv_vs_zstd.md), else leaves t as it was. */
/* A transform-coded tensor's chunks: as few as the preset's transform rows allow, alike in
 * size (a tensor's chunks are coded side by side, and the longest holds up the next tensor).
 * Past TQKV_GROW_ROWS coded rows they grow from that many, doubling: a token prefix's decode
 * reads few of the bytes (a 1,024-token prefix of SmolLM2's 7,168-token session 0.18 of
 * them, where two halves made it 0.52) for one or two chunks more a tensor (0.8% more bytes
 * on SmolLM2's session: tests/bench/results/kv_s3.md). */
static void transform_chunks(tqkv_record *k)
{
    uint32_t coded = k->cells - k->sink_rows;
    uint32_t n_chunks = (coded + TQ_KVSNAP_TRANSFORM_ROWS - 1) / TQ_KVSNAP_TRANSFORM_ROWS;
    k->rows_per_chunk = n_chunks > 1 ? (coded + n_chunks - 1) / n_chunks : k->cells;
    k->chunks_grow = coded > TQKV_GROW_ROWS;
    if (k->chunks_grow) k->rows_per_chunk = (uint32_t)TQ_KVSNAP_TRANSFORM_ROWS;
    if (k->rows_per_chunk > k->cells) k->rows_per_chunk = k->cells;
    /* each component its own model (lib/rans.c) where chunks are long enough for a model's
       bytes to cost less than zstd's shared Huffman tables lose */
    k->klt_rans = k->rows_per_chunk >= (uint32_t)TQ_KVSNAP_RANS_ROWS;
}

/* Every head's transform has a step a quantizer can use. */
static int steps_ok(const tqkv_record *k)
{
    for (uint64_t h = 0; k->klt && h < k->width / k->group; h++)
        if (!(k->klt[h].step > 0) || !isfinite(k->klt[h].step)) return 0;
    return 1;
}

static tq_status plan_transform(tq_ctx *ctx, const tq_kvsnap_plan *p,
                                const tq_kvsnap_settings *o, const src_tensor *s, tqkv_record *t,
                                const tq_rope *rope, const int32_t *pos, int *taken)
{
    tqkv_record k = *t;
    k.offset = NULL;
    k.rope_pos = NULL;
    k.klt = NULL;
    /* V's rows at unit norm, each with its gain: one step for every row made the error of
       rows that attention weighs most (short V) as large as the longest's, and restored
       worse than tq's blocks (tests/bench/results/kv_long_smollm2.md) */
    k.klt_gain = t->is_v;
    /* a byte a basis value: the bases of SmolLM2's 64-value heads were 0.14 bits a value at
       7K tokens, and K's error at the same rate grew 2% where the bits fell 0.035
       (tests/bench/results/kv_long_smollm2.md) */
    k.klt_basis8 = 1;
    /* an MLA latent, one vector a cell that every head reads: one transform over all of it */
    if (s->latent && t->width % 8 == 0 && t->width <= 4096) k.group = (uint32_t)t->width;
    tq_klt_fit fit;
    int forced = o->transform == TQ_TC_ON;
    tq_klt_rival rival = {0, tq_codec_bits(t)};
    tq_status st = TQ_OK;
    if (!forced) {
        double index_bits = 0;
        st = tq_codec_gauss_cost(ctx, t->group, t->bits, t->uniform, &rival.rel_mse, &index_bits);
        rival.bits = index_bits + 16.0 / t->group;
    }
    /* V where the preset says so (sv) is screened at the blocks' error as K is, though its rate
       was chosen below it, by KL (kv_long_smollm2.md); what else decides for V is what the
       blocks measure below */
    int screened = !forced && (!t->is_v || o->row->v_screen);
    if (!st)
        st = tq_kvsnap_klt_fit(ctx, s->kt, &k, rope, pos, t->is_v ? o->v_rate : o->k_rate,
                               screened ? &rival : NULL, &fit);
    /* rows a transform cannot fit (a turbo cache's few distinct values: an eigenvalue that does
       not converge, a component of no spread and a step of 0) stay in blocks: never an error */
    int fitted = !st && !fit.skipped && steps_ok(&k);
    if (st == TQ_ERR_ARG && !forced) st = TQ_OK;
    double fit_bits = fitted ? fit.rate + fit.basis_bits + fit.gain_bits : 0;
    *taken = fitted && (forced || fit_bits < tq_codec_bits(t));
    /* V's blocks measured where the transform would take them: rows that repeat (SmolLM2's
       first layer, whose V is the token's alone) cost the blocks under half the transform's
       bits once zstd has them, at the blocks' lower error (tests/bench/results/
       kv_long_smollm2.md) */
    double blocks = 0;
    if (*taken && !forced && t->is_v)
        st = blocks_bits(ctx, s, t, p->settings.zstd_level, &blocks);
    if (*taken && !forced && t->is_v) *taken = !st && blocks > fit_bits;
    if (!*taken) {
        free(k.offset);
        free(k.rope_pos);
        for (uint64_t h = 0; k.klt && h < k.width / k.group; h++) free(k.klt[h].basis);
        free(k.klt);
        return st;
    }
    free(t->innerq); /* the transform decorrelates: no scales */
    k.innerq = NULL;
    k.innerq_n = 0;
    k.codec = TQKV_CODEC_KLT;
    k.bits = 0;
    k.norm_correction = 0;
    k.seed = 0;
    k.uniform = 0;
    k.planes = 0;
    transform_chunks(&k);
    k.klt_rate = fit.rate;
    if (k.coarse_end) { /* a step 2^d times as large: d bits fewer a component that keeps bits */
        k.coarse_scale = ldexpf(1.0f, (t->is_v ? o->v_bits : o->k_bits) - o->past_bits);
        k.coarse_bits = 0;
        k.coarse_uniform = 0;
        k.coarse_nc = 0;
        k.coarse_planes = 0;
    }
    *t = k;
    return TQ_OK;
}

static tq_status plan_offsets(tq_ctx *ctx, tq_kvsnap_plan *p, const tq_kv_view *v,
                              const tq_kvsnap_settings *o, const src_tensor *src, size_t n)
{
    size_t first = SIZE_MAX;
#pragma omp parallel
    {
        tq_ctx *wc = tq_ctx_clone(ctx);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            tqkv_record *t = &p->meta.t[i];
            int tc = transformable(p, o, t);
            if (t->codec != TQKV_CODEC_TQ || t->transposed || t->cells <= t->sink_rows + 1 ||
                (t->is_v && !tc))
                continue;
            tq_rope r;
            int32_t *pos = NULL;
            const tq_rope *rope = NULL;
            if (wc && !t->is_v) rope = tensor_rope(wc, v, o, &src[i], t, &r, &pos);
            int taken = 0;
            tq_status st = wc ? TQ_OK : TQ_ERR_NOMEM;
            if (!st && tc) st = plan_transform(wc, p, o, &src[i], t, rope, pos, &taken);
            if (!st && !taken && !t->is_v && o->k_offset)
                st = tq_kvsnap_fit_offset(wc, &src[i], t, rope, pos);
            if (st) tq_ctx_keep_first(ctx, &first, i, wc);
            free(pos);
        }
        tq_ctx_free(wc);
    }
    if (first == SIZE_MAX) return TQ_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", tq_ctx_error(ctx));
    return tq_ctx_set_error(ctx, tq_ctx_status(ctx), "layer %u K offset: %s",
                            p->meta.t[first].layer, why);
}

/* The snapshot's header fields and the skeleton: the source bytes between
 * the tensors' rows. */
static tq_status plan_meta(tq_ctx *ctx, const tq_kv_view *s, const tq_kvsnap_settings *o,
                           const src_tensor *src, size_t n, tqkv_meta *m)
{
    m->source_kind = (uint8_t)tq_kv_view_kind(s);
    m->state_version = tq_kv_view_version(s);
    m->source_size = tq_kv_view_size(s);
    m->n_tokens = tq_kv_view_n_tokens(s);
    m->arch = strdup(tq_kv_view_arch(s));
    m->tokens = malloc(4ull * m->n_tokens + 4);
    /* the revision the source was read with: it also names the turbo tables of codec 2 */
    snprintf(m->profile, sizeof m->profile, "%s", tq_type_profile_name(tq_kv_view_profile(s)));
    if (o->model) {
        m->has_fingerprint = 1;
        m->fingerprint = o->model->fingerprint;
    }
    m->n_tensors = (uint32_t)n;
    uint64_t rows = 0;
    for (size_t i = 0; i < n; i++) rows += src[i].kt->bytes;
    m->t = calloc(n ? n : 1, sizeof *m->t);
    m->skeleton = malloc(m->source_size - rows + 1);
    if (!m->arch || !m->tokens || !m->t || !m->skeleton)
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(m->tokens, tq_kv_view_tokens(s), 4ull * m->n_tokens);
    const uint8_t *bytes = tq_kv_view_bytes(s);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const tq_kv_tensor *kt = src[i].kt;
        memcpy(m->skeleton + m->skeleton_len, bytes + pos, kt->data_off - pos);
        m->skeleton_len += kt->data_off - pos;
        pos = kt->data_off + kt->bytes;
    }
    memcpy(m->skeleton + m->skeleton_len, bytes + pos, m->source_size - pos);
    m->skeleton_len += m->source_size - pos;
    return TQ_OK;
}

/* Model layers: from the model or the state's architecture; where two
 * caches cannot be told apart, each counts its own layers. */
static tq_status map_layers(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                            src_tensor *src, size_t n, tq_kvsnap_plan *p)
{
    tq_cache_layers L;
    tq_status st = tq_cache_layers_make(ctx, v, o->model, &L);
    if (st) return st;
    uint32_t total = 0;
    for (uint32_t s = 0; s < L.n_state; s++) total += L.n_layer[s];
    int two = L.n_state == 2 && tq_cache_layers_known(&L);
    for (size_t i = 0; i < n; i++) {
        uint32_t m = tq_cache_layers_model(&L, src[i].kv_state, src[i].layer);
        src[i].mapped = two && m != TQ_KV_LAYER_UNKNOWN;
        src[i].model_layer = src[i].mapped ? m : src[i].layer;
        src[i].n_model = src[i].mapped ? total : src[i].n_layer;
        /* the table's NoPE layers (smollm3, llama4: every 4th) and an MLA latent, whose RoPE
           part is not where a head's rotary dimensions are, have no RoPE tq can undo */
        uint32_t nope = o->model && o->model->kv_row ? o->model->kv_row->nope : 0;
        src[i].no_rope = (o->model && o->model->mla) ||
                         (nope && m != TQ_KV_LAYER_UNKNOWN && (m + 1) % nope == 0);
        src[i].latent = o->model && o->model->mla && !src[i].is_v;
    }
    if (two) snprintf(p->layer_rule, sizeof p->layer_rule, "%s", L.rule);
    tq_cache_layers_free(&L);
    return TQ_OK;
}

/* Bits from the preset, for the group the first K tensor gets; lifted where cells past a
 * sliding window are coded at the preset's fewer past bits. */
static void plan_bits(tq_kvsnap_plan *p, const tq_kvsnap_settings *o, const src_tensor *src,
                      size_t n, uint32_t head_dim)
{
    int guessed;
    uint32_t g = n ? tq_arch_group_for_width(src[0].kt->width, head_dim, &guessed) : head_dim;
    const tq_kvsnap_preset_row *row = o->row;
    int small = g && g <= TQ_KVSNAP_SMALL_HEAD;
    int kb = small ? row->k_bits_small : row->k_bits;
    int vb = small ? row->v_bits_small : row->v_bits;
    int past = 0; /* some tensor has past rows beyond its sinks */
    double k_rate = o->k_rate, v_rate = o->v_rate; /* asked: the settings take the plan's */
    for (size_t i = 0; i < n; i++) past |= src[i].past_rows > (uint32_t)o->sink_cells;
    p->settings.past_bits = past ? o->past_bits : 0;
    if (p->settings.past_bits) {
        kb += row->past_k_lift;
        vb += row->past_v_lift;
    }
    p->settings.k_bits = o->k_bits > 0 ? o->k_bits : kb;
    p->settings.v_bits = o->v_bits > 0 ? o->v_bits : vb;
    /* the transform's bits a value: the user's, else the blocks' less the preset's cut */
    int v_cut = small ? row->v_rate_cut_small : row->v_rate_cut;
    p->settings.k_rate = row->k_rate_cut ? p->settings.k_bits - row->k_rate_cut / 100.0 : 0.0;
    p->settings.v_rate = v_cut ? p->settings.v_bits - v_cut / 100.0 : 0.0;
    if (k_rate != TQ_KVSNAP_UNSET) p->settings.k_rate = k_rate;
    if (v_rate != TQ_KVSNAP_UNSET) p->settings.v_rate = v_rate;
}

/* The newest rows of t (s->recent_rows) coded o->recent_bits finer than the rest, which become
 * its coarse rows: blocks of more bits, or transform steps 2^recent_bits times finer. */
static void plan_recent(const tq_kvsnap_plan *p, const tq_kvsnap_settings *o, const src_tensor *s,
                        tqkv_record *t)
{
    if (!s->recent_rows || t->coarse_end || t->transposed || is_boundary(o, s)) return;
    if (t->codec == TQKV_CODEC_KLT) {
        t->coarse_end = t->cells - s->recent_rows;
        t->coarse_scale = ldexpf(1.0f, o->recent_bits);
        t->klt_rans_coarse = t->klt_rans && s->recent_rows < t->rows_per_chunk;
        for (uint64_t h = 0; h < t->width / t->group; h++)
            t->klt[h].step = ldexpf(t->klt[h].step, -o->recent_bits);
        return;
    }
    int b = s->is_v ? p->settings.v_bits : p->settings.k_bits;
    int fine = b + o->recent_bits > 8 ? 8 : b + o->recent_bits;
    if (t->codec != TQKV_CODEC_TQ || fine <= b) return;
    t->coarse_end = t->cells - s->recent_rows;
    t->coarse_bits = t->bits;
    t->coarse_uniform = t->uniform;
    t->coarse_nc = t->norm_correction;
    t->coarse_planes = t->planes;
    tq_block_coding(o, fine, t->group, &t->bits, &t->uniform, &t->norm_correction);
    t->planes = tq_block_planes(o, t->codec, t->bits);
}

tq_status tq_kvsnap_plan_settled(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                 tq_kvsnap_plan **out)
{
    *out = NULL;
    tq_kvsnap_plan *p = calloc(1, sizeof *p);
    if (!p) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    p->settings = *o;
    o = &p->settings; /* from here the plan's: plan_bits completes them */
    tq_head_source from;
    uint32_t head_dim = tq_arch_head_size((uint32_t)o->head_dim, o->model,
                                          tq_kv_view_head_dim(v), tq_kv_view_arch(v), &from);
    int from_arch = from == TQ_HEAD_ARCH;
    if (from_arch) snprintf(p->group_arch, sizeof p->group_arch, "%s", tq_kv_view_arch(v));
    src_tensor *src = NULL;
    size_t n = 0;
    tq_status st = collect(ctx, v, &src, &n);
    /* the sliding layers' own head size (gemma4's key_length_swa) for the SWA cache's tensors */
    uint32_t swa_head = o->model && o->model->head_k_swa && !o->head_dim &&
                                tq_kv_view_n_kv(v) == 2
                            ? o->model->head_k_swa
                            : head_dim;
    for (size_t i = 0; i < n; i++) src[i].head = src[i].kv_state == 1 ? swa_head : head_dim;
    if (!st) st = tq_kvsnap_check_fit(ctx, v, o, src, n);
    if (!st) st = map_layers(ctx, v, o, src, n, p);
    if (!st) st = plan_meta(ctx, v, o, src, n, &p->meta);
    int lossy = !o->row->exact;
    if (!st && lossy) st = tq_kvsnap_past_rows(ctx, v, o, p, src, n);
    if (!st) plan_bits(p, o, src, n, head_dim);
    if (!st && lossy) st = tq_kvsnap_recent_rows(ctx, v, o, p, src, n);
    if (!st && o->codec == TQKV_CODEC_PROD && (p->settings.k_bits < 2 || p->settings.v_bits < 2))
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG,
                              "TurboQuant-prod needs 2..8 bits (b-1 MSE bits and the sketch bit)");
    if (!st && o->codec == TQKV_CODEC_ANGLE && (p->settings.k_bits < 1 || p->settings.v_bits < 1))
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG, "TurboAngle needs 1..8 bits");
    if (!st && o->codec == TQKV_CODEC_TURBO &&
        (o->k_bits < 2 || o->k_bits > 4 || o->v_bits < 2 || o->v_bits > 4))
        st = tq_ctx_set_error(ctx, TQ_ERR_ARG,
                              "--turbo codes with the fork's turbo2/3/4 blocks: bits must be 2..4 "
                              "(give --k-bits/--v-bits)");
    p->group_source = from; /* until a tensor's group is guessed from its width */
    for (size_t i = 0; !st && i < n; i++)
        st = plan_tensor(ctx, p, o, src[i].head, &src[i], &p->meta.t[i]);
    uint32_t recent = o->recent_bits > 0 && o->recent_cells > 0 ? (uint32_t)o->recent_cells : 0;
    if (!st && o->base)
        st = tq_kvsnap_adopt_base(ctx, &p->meta, o->base, o->base_name, v, src, recent);
    if (!st && o->base)
        st = tq_kvsnap_adopt_base_rope(ctx, &p->meta, o->base, v, src);
    else if (!st && (o->k_offset || o->transform != TQ_TC_OFF))
        st = plan_offsets(ctx, p, v, o, src, n);
    for (size_t i = 0; !st && i < n; i++) plan_recent(p, o, &src[i], &p->meta.t[i]);
    for (size_t i = 0; !st && i < n; i++) p->n_transformed += p->meta.t[i].codec == TQKV_CODEC_KLT;
    if (!st && !(p->src = malloc((n ? n : 1) * sizeof *p->src)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n; i++) p->src[i] = src[i].kt;
    free(src);
    if (st) {
        tq_kvsnap_plan_free(p);
        return st;
    }
    *out = p;
    return TQ_OK;
}

void tq_kvsnap_plan_free(tq_kvsnap_plan *p)
{
    if (!p) return;
    tqkv_meta_free(&p->meta);
    free(p->src);
    free(p);
}

/* Bytes of n rows of t in its block codec (0 if it has none). */
static uint64_t block_bytes(const tqkv_record *t, uint64_t n)
{
    tq_ctx *ctx = tq_ctx_new(); /* the plan made this codec already: it cannot fail here */
    tq_codec *c = ctx ? tq_kvsnap_record_codec(ctx, t) : NULL;
    tq_ctx_free(ctx);
    uint64_t bytes = c ? n * t->width / tq_codec_block_values(c) * tq_codec_block_bytes(c) : 0;
    tq_codec_free(c);
    return bytes;
}

uint64_t tq_kvsnap_plan_payload(const tq_kvsnap_plan *p, uint32_t i)
{
    const tqkv_record *t = &p->meta.t[i];
    uint64_t rows = t->cells - t->row_start;
    if (t->codec == TQKV_CODEC_RAW && t->transposed) return t->row_start ? 0 : t->bytes;
    if (t->codec == TQKV_CODEC_RAW) return rows * p->src[i]->row_size;
    uint64_t sink = t->row_start < t->sink_rows ? t->sink_rows - t->row_start : 0;
    if (t->codec == TQKV_CODEC_KLT)
        return tqkv_klt_components(t) * (rows - sink) + sink * p->src[i]->row_size;
    uint64_t from = t->row_start > t->sink_rows ? t->row_start : t->sink_rows;
    uint64_t coarse = t->coarse_end > from ? t->coarse_end - from : 0;
    tqkv_record c;
    tqkv_record_coarse(t, &c);
    return block_bytes(t, rows - sink - coarse) + block_bytes(&c, coarse) +
           sink * p->src[i]->row_size;
}
