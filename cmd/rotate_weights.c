/* rotate_weights.c - `tq rotate-weights`: exact orthogonal rotations folded
 * into a llama-like model (QuaRot/SpinQuant R1 and R2), tensor by tensor.
 *
 * R1 (n_embd) rotates the residual stream: with every RMSNorm gain folded
 * into the matrices that read the normalised stream (the norm of R x is the
 * norm of x, so RMSNorm commutes with R once its gain is gone), readers
 * become W R1', writers R1 W, embeddings R1 e.  R2 (head_dim, one per KV
 * head) rotates V's output and rotates it back in O's input columns for
 * every query head that reads that KV head.  The model computes the same
 * function; weights and activations lose their outlier channels. */
#include "cli.h"
#include "cli_opts.h"
#include "gguf.h"
#include "progress.h"
#include "rotate_plan.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x51a7e5eedull

void help_rotate_weights(void)
{
    printf(
        "usage: tq rotate-weights [options] IN.gguf OUT.gguf\n\n"
        "Folds exact orthogonal rotations into a llama, mistral, mistral3, smollm3, qwen2 or\n"
        "qwen3 model, or (R2 only) a gemma2/gemma3 one: the output computes the same function in\n"
        "stock llama.cpp, and its weights lose their outlier channels, so it quantizes better.\n"
        "Quantized inputs (Q8_0, K-quants, ...) are dequantized; the tensors a rotation\n"
        "changes are written in --out-type, the others copied as they are.\n\n"
        "  --r1 on|off|auto  residual-stream rotation of size n_embd, RMSNorm gains folded in\n"
        "                    (default auto: on where the graph allows it, else off with the "
        "reason)\n"
        "  --r2 on|off       per-KV-head rotation of V, undone in O's columns (default on)\n"
        "  --kind hadamard|signs\n"
        "                    randomized Hadamard (default) or a random diagonal of signs (exact "
        "in\n"
        "                    floating point: for checking a pipeline, it removes no outliers)\n"
        "  --out-type auto|f16|bf16|f32\n"
        "                    type of the rotated tensors (default auto: float tensors keep their\n"
        "                    type, quantized ones become F16)\n"
        "  --seed N          rotation seed (default %llu)\n"
        "  --type-profile NAME, --threads N, --quiet\n\n"
        "IN and OUT are files (the model is mapped; a split model: its first shard).\n",
        (unsigned long long)DEFAULT_SEED);
}

typedef struct ropts {
    const char *in, *out;
    tq_gguf_options gopt;
    int r1, r2, quiet, signs, out_type; /* r1: 1 on, 0 off, -1 auto; out_type: a dtype, -1 auto */
    uint64_t seed;
    long threads;
} ropts;

static int opt_seed(void *user, const char *v)
{
    char *end;
    *(uint64_t *)user = strtoull(v, &end, 0);
    if (*end || *v == '-') return cli_usage_error("--seed: '%s' is not a number", v);
    return 0;
}

static int parse(int argc, char **argv, ropts *o)
{
    static const char *const on_off[] = {"on", "off", NULL},
                             *const on_off_auto[] = {"on", "off", "auto", NULL},
                             *const kinds[] = {"hadamard", "signs", NULL},
                             *const types[] = {"auto", "f16", "bf16", "f32", NULL};
    const char *r1 = "auto", *r2 = "on", *kind = "hadamard", *ot = "auto", *pos[2] = {NULL, NULL};
    memset(o, 0, sizeof *o);
    o->seed = DEFAULT_SEED;
    const cli_opt own[] = {
        CLI_OPT_CHOICE("--r1", &r1, on_off_auto, "--r1: '%s' is not on, off or auto"),
        CLI_OPT_CHOICE("--r2", &r2, on_off, "--r2: '%s' is not on or off"),
        CLI_OPT_CHOICE("--kind", &kind, kinds, "--kind: '%s' is not hadamard or signs"),
        CLI_OPT_CHOICE("--out-type", &ot, types, "--out-type: '%s' is not auto, f16, bf16 or f32"),
        CLI_OPT_FN("--seed", opt_seed, &o->seed),
        {NULL},
    };
    const cli_spec spec = {"rotate-weights", CLI_QUIET | CLI_THREADS | CLI_PROFILE, own, 2};
    cli_common c;
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, pos, &n);
    if (rc) return rc;
    o->in = pos[0];
    o->out = pos[1];
    o->quiet = c.quiet;
    o->threads = c.threads;
    o->gopt = cli_gguf_options(&c);
    o->r1 = -1; /* auto: where the architecture allows it */
    if (!strcmp(r1, "on"))
        o->r1 = 1;
    else if (!strcmp(r1, "off"))
        o->r1 = 0;
    o->r2 = !strcmp(r2, "on");
    o->signs = !strcmp(kind, "signs");
    o->out_type = -1; /* auto: float inputs keep their type */
    if (!strcmp(ot, "f16"))
        o->out_type = TQ_DT_F16;
    else if (!strcmp(ot, "bf16"))
        o->out_type = TQ_DT_BF16;
    else if (!strcmp(ot, "f32"))
        o->out_type = TQ_DT_F32;
    if (!o->in) return cli_usage_error("which model? (see tq help rotate-weights)");
    if (!o->out) return cli_usage_error("where to? give OUT.gguf");
    if (!o->r1 && !o->r2) return cli_usage_error("--r1 off and --r2 off: nothing to do");
    return 0;
}

typedef struct rot {
    tq_rotation *r1;
    tq_rotation **r2; /* one per KV head */
} rot;

/* The seed of KV head h's R2: distinct per head, derived from the model seed. */
static uint64_t r2_seed(uint64_t seed, uint32_t h) { return seed * 0x9E3779B97F4A7C15ull + 1 + h; }

/* Rows that can be rotated a slice at a time (everything acts row by row);
 * the rest needs the whole tensor (R1 on the columns, R2 on blocks of rows). */
static int row_wise(const rr_tensor *t)
{
    return (t->role == RR_READER || t->role == RR_EMBED) && !t->v_rows;
}

#ifndef SLICE_VALUES
#define SLICE_VALUES (4u << 20)
#endif

/* x holds `rows` rows of the tensor (all of them unless row_wise). */
/* One parallel rotation pass over a tensor x of rows x row values. */
typedef enum rot_op {
    ROT_ROW_BLOCKS,    /* W R1': R1 on every row, 128 rows an item */
    ROT_COLUMN_BLOCKS, /* R1 W: R1 down the columns, 256 columns an item */
    ROT_HEAD_COLUMNS   /* W_o R2': each query head's input columns, a row an item */
} rot_op;

typedef struct rot_pass {
    rot_op op;
    const rot *R;
    float *x; /* [rows][row] */
    size_t row, rows;
    uint32_t hd;     /* ROT_HEAD_COLUMNS: head size of V */
    uint32_t n_head; /* query heads */
    uint32_t per;    /* query heads per KV head: head q uses R2 of KV head q / per */
} rot_pass;

static tq_status rot_item(tq_ctx *wc, const rot_pass *k, size_t i)
{
    if (k->op == ROT_ROW_BLOCKS) {
        size_t r = i * 128;
        size_t nr = k->rows - r < 128 ? k->rows - r : 128;
        return tq_rotation_apply_rows(wc, k->R->r1, k->x + r * k->row, nr, 0);
    }
    if (k->op == ROT_COLUMN_BLOCKS) {
        size_t c0 = i * 256;
        size_t nc = k->row - c0 < 256 ? k->row - c0 : 256;
        return tq_rotation_apply_strided(wc, k->R->r1, k->x + c0, nc, k->row, 0);
    }
    for (uint32_t q = 0; q < k->n_head; q++) {
        float *cols = k->x + i * k->row + (size_t)q * k->hd; /* [hd]: query head q's inputs */
        tq_status st = tq_rotation_apply(wc, k->R->r2[q / k->per], cols, 1, 0);
        if (st) return st;
    }
    return TQ_OK;
}

/* n items across the threads, each with a worker context; a failure is the
 * lowest failing item's message, whatever the thread count. */
static tq_status rot_parallel(tq_ctx *ctx, const rot_pass *k, size_t n)
{
    size_t first = SIZE_MAX;
#pragma omp parallel
    {
        tq_ctx *wc = tq_ctx_clone(ctx);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++)
            if (!wc || rot_item(wc, k, i)) tq_ctx_keep_first(ctx, &first, i, wc);
        tq_ctx_free(wc);
    }
    return first == SIZE_MAX ? TQ_OK : tq_ctx_status(ctx);
}

static tq_status transform(tq_ctx *ctx, const tq_gguf *g, const rr_model *m, const rr_tensor *t,
                           const rot *R, const ropts *o, float *x, size_t rows)
{
    const int64_t *ne = tq_gguf_tensor_ne(g, t->src);
    size_t row = (size_t)ne[0];
    tq_status st = TQ_OK;
    if (t->role == RR_NORM && o->r1) { /* folded into the readers */
        for (size_t i = 0; i < row; i++) x[i] = 1.0f;
        return TQ_OK;
    }
    if (t->role == RR_READER && o->r1 && t->norm >= 0) {
        float *gain = malloc(row * sizeof(float));
        if (!gain) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        st = tq_dequantize(ctx, (tq_dtype)tq_gguf_tensor_type(g, t->norm)->dtype,
                           tq_gguf_tensor_data(g, t->norm), row, gain);
#pragma omp parallel for schedule(static)
        for (size_t r = 0; r < rows; r++)
            for (size_t i = 0; i < row; i++) x[r * row + i] *= gain[i];
        free(gain);
    }
    if (!st && o->r1 &&
        (t->role == RR_READER || t->role == RR_EMBED)) { /* W R1': R1 on every row */
        rot_pass k = {ROT_ROW_BLOCKS, R, x, row, rows, 0, 0, 0};
        st = rot_parallel(ctx, &k, (rows + 127) / 128);
    }
    if (!st && o->r2 &&
        t->v_rows) { /* R2 W_v: each KV head's block of output rows (or bias values) */
        uint32_t hd = m->head_dim_v;
        size_t lanes = t->role == RR_COPY ? 1 : row;
        for (uint32_t h = 0; h < m->n_head_kv && !st; h++)
            st = tq_rotation_apply(ctx, R->r2[h], x + (size_t)h * hd * lanes, lanes, 0);
    }
    if (!st && o->r2 &&
        t->o_cols) { /* W_o R2': each query head's input columns, with its KV head's R2 */
        uint32_t per = m->n_head / m->n_head_kv; /* query heads per KV head */
        rot_pass k = {ROT_HEAD_COLUMNS, R, x, row, rows, m->head_dim_v, m->n_head, per};
        st = rot_parallel(ctx, &k, rows);
    }
    if (!st && o->r1 &&
        t->role == RR_WRITER) { /* R1 W: the columns, in blocks of 256 across the threads */
        rot_pass k = {ROT_COLUMN_BLOCKS, R, x, row, rows, 0, 0, 0};
        st = rot_parallel(ctx, &k, (row + 255) / 256);
    }
    if (!st && o->r1 && t->role == RR_WRITER_BIAS) st = tq_rotation_apply(ctx, R->r1, x, 1, 0);
    return st;
}

static int needs_change(const rr_tensor *t, const ropts *o)
{
    if (t->v_rows && o->r2) return 1;
    if (t->o_cols && o->r2) return 1;
    return o->r1 && t->role != RR_COPY;
}

static tq_status write_meta(tq_gguf_writer *w, const tq_gguf *g, const rr_model *m, const rot *R,
                            const ropts *o)
{
    tq_status st = tq_gguf_writer_copy_kvs(w, g);
    char kind[160];
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.rotation.version", 1);
    if (!st)
        st = tq_gguf_writer_set_str(w, "tq.rotation.tool", "tq " TQ_VERSION_STRING,
                                    strlen("tq " TQ_VERSION_STRING));
    if (!st) st = tq_gguf_writer_set_scalar(w, "tq.rotation.seed", TQ_GGUF_UINT64, &o->seed);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.rotation.r1", (uint32_t)o->r1);
    if (!st && o->r1) {
        st = tq_gguf_writer_set_u32(w, "tq.rotation.r1.size", m->n_embd);
        snprintf(kind, sizeof kind, "%s", tq_rotation_kind(R->r1));
        if (!st) st = tq_gguf_writer_set_str(w, "tq.rotation.r1.kind", kind, strlen(kind));
        const char *folded[3] = {"attn_norm", "ffn_norm", "output_norm"};
        uint64_t lens[3] = {9, 8, 11};
        if (!st)
            st = tq_gguf_writer_set_array(w, "tq.rotation.r1.folded_norms", TQ_GGUF_STRING, 3,
                                          folded, lens);
        if (!st) st = tq_gguf_writer_set_u32(w, "tq.rotation.r1.untied_output", (uint32_t)m->tied);
    }
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.rotation.r2", (uint32_t)o->r2);
    if (!st && o->r2) {
        st = tq_gguf_writer_set_u32(w, "tq.rotation.r2.size", m->head_dim_v);
        snprintf(kind, sizeof kind, "%s per KV head (%u heads)", tq_rotation_kind(R->r2[0]),
                 m->n_head_kv);
        if (!st) st = tq_gguf_writer_set_str(w, "tq.rotation.r2.kind", kind, strlen(kind));
    }
    const char *gen =
        "tq rotation v1: R1 from seed, R2 of KV head h from seed*0x9E3779B97F4A7C15+1+h; "
        "randomized Hadamard signs from splitmix64, odd factors Gram-Schmidt on Box-Muller "
        "Gaussians";
    if (!st) st = tq_gguf_writer_set_str(w, "tq.rotation.generator", gen, strlen(gen));
    return st;
}

static tq_status make_rotations(tq_ctx *ctx, const rr_model *m, const ropts *o, rot *R)
{
    tq_status (*make)(tq_ctx *, uint32_t, uint64_t, tq_rotation **) =
        o->signs ? tq_rotation_new_signs : tq_rotation_new;
    if (o->r1 && make(ctx, m->n_embd, o->seed, &R->r1)) return tq_ctx_status(ctx);
    if (!o->r2) return TQ_OK;
    if (!(R->r2 = calloc(m->n_head_kv, sizeof *R->r2)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t h = 0; h < m->n_head_kv; h++)
        if (make(ctx, m->head_dim_v, r2_seed(o->seed, h), &R->r2[h])) return tq_ctx_status(ctx);
    return TQ_OK;
}

static int is_float(int d) { return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16; }

/* What a rotated tensor is written as: --out-type, else its own type when
 * that is a float type (no rounding added), else F16. */
static int out_dtype(const tq_ggml_type *in, const ropts *o)
{
    if (o->out_type >= 0) return o->out_type;
    return is_float(in->dtype) ? in->dtype : TQ_DT_F16;
}

/* One tensor, rotated a slice of rows at a time when it acts row-wise. */
static tq_status rotate_tensor(tq_ctx *ctx, const tq_gguf *g, const rr_model *m, const rr_tensor *t,
                               const rot *R, const ropts *o, float *x, uint8_t *enc,
                               tq_gguf_writer *w)
{
    const tq_ggml_type *ty = tq_gguf_tensor_type(g, t->src);
    tq_dtype out = (tq_dtype)out_dtype(ty, o);
    size_t n = (size_t)tq_gguf_tensor_nelements(g, t->src);
    const uint8_t *src = tq_gguf_tensor_data(g, t->src);
    size_t row = (size_t)tq_gguf_tensor_ne(g, t->src)[0], rows = n / row;
    size_t per = rows; /* column-wise: the whole tensor at once */
    if (row_wise(t)) per = SLICE_VALUES / row ? SLICE_VALUES / row : 1;
    size_t rb = row / ty->block * ty->bytes, out_rb = row * tq_dtype_block_bytes(out);
    tq_status st = TQ_OK;
    for (size_t r0 = 0; r0 < rows && !st; r0 += per) {
        size_t nr = rows - r0 < per ? rows - r0 : per;
        st = tq_dequantize(ctx, (tq_dtype)ty->dtype, src + r0 * rb, nr * row, x);
        if (!st) st = transform(ctx, g, m, t, R, o, x, nr);
        if (!st) st = tq_quantize(ctx, out, x, nr * row, enc);
        if (!st) st = tq_gguf_writer_write(w, enc, nr * out_rb);
        tq_gguf_tensor_release_range(g, t->src, r0 * rb, nr * rb);
    }
    return st;
}

/* The rotated model; *changed counts the tensors that were rotated. */
static tq_status write_model(tq_ctx *ctx, const tq_gguf *g, const rr_model *m, const rot *R,
                             const ropts *o, size_t *changed)
{
    /* buffers: the largest tensor that must be whole (in float32, and
     * encoded), or a slice of rows of the row-wise ones */
    size_t biggest = SLICE_VALUES, biggest_bytes = SLICE_VALUES * sizeof(float);
    uint64_t total = 0, done_b = 0;
    for (size_t i = 0; i < m->n; i++) {
        size_t ne = (size_t)tq_gguf_tensor_nelements(g, m->t[i].src),
               nb = (size_t)tq_gguf_tensor_nbytes(g, m->t[i].src);
        size_t row = (size_t)tq_gguf_tensor_ne(g, m->t[i].src)[0];
        if (row_wise(&m->t[i])) {
            ne = row > SLICE_VALUES ? row : SLICE_VALUES / row * row;
            nb = ne * sizeof(float);
        }
        if (ne > biggest) biggest = ne;
        if (nb > biggest_bytes) biggest_bytes = nb;
        total += tq_gguf_tensor_nbytes(g, m->t[i].src);
    }
    (void)biggest_bytes;
    float *x = malloc(biggest * sizeof(float));
    uint8_t *enc = malloc(biggest * sizeof(float)); /* any output type, float32 at most */
    tq_gguf_writer *w = NULL;
    tq_status st = !x || !enc
                       ? tq_ctx_set_error(ctx, TQ_ERR_NOMEM,
                                          "out of memory for a tensor of %zu values", biggest)
                       : tq_gguf_writer_new(ctx, &w);
    if (!st) st = write_meta(w, g, m, R, o);
    if (!st) st = tq_gguf_writer_set_profile(w, tq_gguf_profile(g));
    for (size_t i = 0; i < m->n && !st; i++) {
        const rr_tensor *t = &m->t[i];
        uint32_t id = tq_gguf_tensor_type_id(g, t->src);
        if (needs_change(t, o)) {
            const char *name =
                tq_dtype_name((tq_dtype)out_dtype(tq_gguf_tensor_type(g, t->src), o));
            const tq_ggml_type *ot = tq_ggml_type_by_name(tq_gguf_profile(g), name);
            if (!ot)
                st = tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "type profile has no %s type id",
                                      name);
            else
                id = ot->id;
        }
        if (!st)
            st = tq_gguf_writer_add_tensor(w, t->name, id, tq_gguf_tensor_n_dims(g, t->src),
                                           tq_gguf_tensor_ne(g, t->src));
    }
    const char *inputs[1] = {o->in};
    if (!st) st = tq_gguf_writer_open(w, o->out, inputs, 1);
    progress pr;
    progress_init(&pr, o->quiet);
    for (size_t i = 0; i < m->n && !st; i++) {
        const rr_tensor *t = &m->t[i];
        if (!needs_change(t, o))
            st = tq_gguf_copy_tensor(g, t->src, w);
        else {
            ++*changed;
            st = rotate_tensor(ctx, g, m, t, R, o, x, enc, w);
        }
        tq_gguf_tensor_release(g, t->src);
        done_b += tq_gguf_tensor_nbytes(g, t->src);
        progress_update(&pr, done_b, total, "bytes");
    }
    progress_end(&pr);
    if (!st) st = tq_gguf_writer_finish(w);
    tq_gguf_writer_free(w);
    free(x);
    free(enc);
    return st;
}

int cmd_rotate_weights(int argc, char **argv)
{
    ropts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    double t0 = cli_now();
    tq_ctx *ctx = cli_ctx_new(o.threads);
    if (!ctx) return TQ_EXIT_RUNTIME;
    tq_gguf *g = NULL;
    rr_model m = {0};
    rot R = {NULL, NULL};
    size_t changed = 0;
    if (tq_gguf_open(ctx, o.in, &o.gopt, &g))
        rc = cli_lib_error(ctx);
    else if (rr_plan(ctx, g, o.r1, &m))
        rc = cli_runtime_error("%s: %s", o.in, tq_ctx_error(ctx));
    if (!rc) o.r1 = m.r1; /* R1 where the plan allows it */
    if (!rc && !o.r1 && !o.r2)
        rc = cli_usage_error("%s: R1 is not possible here (%s) and --r2 is off: nothing to do",
                             o.in, m.r1_blocker);
    if (!rc && make_rotations(ctx, &m, &o, &R))
        rc = cli_runtime_error("%s: %s: %s", o.in, R.r1 || !o.r1 ? "R2" : "R1", tq_ctx_error(ctx));
    if (!rc && write_model(ctx, g, &m, &R, &o, &changed)) rc = cli_lib_error(ctx);
    if (!rc && !o.quiet)
        cli_log("%s (%s, n_embd %u, %u layers, %u/%u heads of %u): %zu of %zu tensors "
                "rotated%s%s%s in %.2f s",
                o.in, m.arch, m.n_embd, m.n_layer, m.n_head, m.n_head_kv, m.head_dim, changed, m.n,
                o.r1 ? ", R1 " : "", o.r1 ? tq_rotation_kind(R.r1) : "",
                o.r2 ? ", R2 per KV head" : "", cli_now() - t0);
    if (!rc && !o.quiet && m.r1_blocker[0]) cli_log("R1 not folded: %s", m.r1_blocker);
    if (!rc && !o.quiet && m.tied && o.r1)
        cli_log("the embeddings were tied to the output; output.weight is now written out");
    tq_rotation_free(R.r1);
    for (uint32_t h = 0; R.r2 && h < m.n_head_kv; h++) tq_rotation_free(R.r2[h]);
    free(R.r2);
    rr_free(&m);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return rc;
}
