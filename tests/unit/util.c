/* util.c - data helpers for the unit tests. */
#include "gguf.h"
#include "harness.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "tq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

static tq_ctx *test_ctx;
static void free_test_ctx(void) { tq_ctx_free(test_ctx); }

tq_ctx *tq_test_ctx(void)
{
    if (!test_ctx) {
        test_ctx = tq_ctx_new();
        atexit(free_test_ctx);
    }
    return test_ctx;
}

const char *tq_test_shared_dir(void)
{
    const char *s = getenv("TQ_SHARED");
    return s && *s ? s : "../shared";
}

void *tq_test_read_shared(const char *rel, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tq_test_shared_dir(), rel);
    return tq_test_read_file(path, len);
}

void *tq_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *len = (size_t)n;
    return buf;
}

static uint64_t next64(unsigned long long *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tq_test_randn(unsigned long long *s)
{
    double u1 = ((next64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (next64(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Gaussian rows with a few outlier channels and a per-channel offset, the
 * shape of real K caches (a handful of large, biased channels). */
float *tq_test_kv_data(size_t nv, unsigned g, unsigned long long seed)
{
    float *x = malloc(nv * g * sizeof(float));
    for (size_t v = 0; v < nv; v++)
        for (unsigned j = 0; j < g; j++) {
            double sc = (j % 17 == 3) ? 8.0 : 1.0;
            x[v * g + j] = (float)(sc * tq_test_randn(&seed) + 0.3 * (j % 5));
        }
    return x;
}

void tq_test_put(tq_test_buf *b, const void *d, size_t n)
{
    if (!n) return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
void tq_test_u32(tq_test_buf *b, uint32_t v) { tq_test_put(b, &v, 4); }
void tq_test_u64(tq_test_buf *b, uint64_t v) { tq_test_put(b, &v, 8); }

/* ---- a stand-in for stories260K: its shapes, random weights */

static tq_status put_f32_tensor(tq_gguf_writer *w, size_t n, unsigned long long *seed, int gain)
{
    float *x = malloc(n * sizeof *x); /* [n] */
    if (!x) return TQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        double r = tq_test_randn(seed);
        x[i] = gain ? (float)(1.0 + 0.3 * r) : (float)(r * 0.125);
    }
    tq_status st = tq_gguf_writer_write(w, x, n * sizeof *x);
    free(x);
    return st;
}

typedef struct standin_tensor {
    char name[48];
    int64_t ne[2];
    uint32_t n_dims;
    int gain; /* a norm's gain vector */
} standin_tensor;

/* stories260K's tensors in its order: 3 global, 9 per layer x 5 */
static size_t standin_tensors(standin_tensor *t)
{
    static const struct {
        const char *role;
        int64_t ne0, ne1;
    } layer[] = {{"attn_q", 64, 64},   {"attn_k", 64, 32},   {"attn_v", 64, 32},
                 {"attn_output", 64, 64}, {"attn_norm", 64, 0}, {"ffn_gate", 64, 172},
                 {"ffn_down", 172, 64}, {"ffn_up", 64, 172}, {"ffn_norm", 64, 0}};
    size_t n = 0;
    t[n++] = (standin_tensor){"token_embd.weight", {64, 512}, 2, 0};
    t[n++] = (standin_tensor){"output_norm.weight", {64, 1}, 1, 1};
    t[n++] = (standin_tensor){"output.weight", {64, 512}, 2, 0};
    for (int l = 0; l < 5; l++) {
        for (size_t k = 0; k < sizeof layer / sizeof *layer; k++) {
            standin_tensor *s = &t[n++];
            snprintf(s->name, sizeof s->name, "blk.%d.%s.weight", l, layer[k].role);
            s->ne[0] = layer[k].ne0;
            s->ne[1] = layer[k].ne1 ? layer[k].ne1 : 1;
            s->n_dims = layer[k].ne1 ? 2 : 1;
            s->gain = !layer[k].ne1;
        }
    }
    return n;
}

int tq_test_write_standin(const char *path)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf_writer *w = NULL;
    standin_tensor t[64];
    size_t n = standin_tensors(t);
    static const struct {
        const char *key;
        uint32_t v;
    } u32[] = {{"llama.context_length", 2048},  {"llama.embedding_length", 64},
               {"llama.feed_forward_length", 172}, {"llama.attention.head_count", 8},
               {"llama.attention.head_count_kv", 4}, {"llama.block_count", 5},
               {"llama.rope.dimension_count", 8}};
    tq_status st = tq_gguf_writer_new(ctx, &w);
    if (!st) st = tq_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    for (size_t i = 0; !st && i < sizeof u32 / sizeof *u32; i++)
        st = tq_gguf_writer_set_u32(w, u32[i].key, u32[i].v);
    float eps = 1e-5f;
    if (!st) st = tq_gguf_writer_set_scalar(w, "llama.attention.layer_norm_rms_epsilon", TQ_GGUF_FLOAT32, &eps);
    for (size_t i = 0; !st && i < n; i++) st = tq_gguf_writer_add_tensor(w, t[i].name, 0, t[i].n_dims, t[i].ne);
    if (!st) st = tq_gguf_writer_open(w, path, NULL, 0);
    unsigned long long seed = 260;
    for (size_t i = 0; !st && i < n; i++)
        st = put_f32_tensor(w, (size_t)(t[i].ne[0] * t[i].ne[1]), &seed, t[i].gain);
    if (!st) st = tq_gguf_writer_finish(w);
    tq_gguf_writer_free(w);
    tq_ctx_free(ctx);
    return st == TQ_OK ? 0 : -1;
}

static char standin_path[512];
static void remove_standin(void) { unlink(standin_path); }

const char *tq_test_stories(int *standin)
{
    static char shared[4096];
    snprintf(shared, sizeof shared, "%s/models/stories260K.gguf", tq_test_shared_dir());
    *standin = access(shared, R_OK) != 0;
    if (!*standin) return shared;
    if (!standin_path[0]) {
        const char *d = getenv("TMPDIR");
        snprintf(standin_path, sizeof standin_path, "%s/tq-standin-%d.gguf", d && *d ? d : "/tmp",
                 (int)getpid());
        if (tq_test_write_standin(standin_path)) {
            standin_path[0] = 0;
            return NULL;
        }
        atexit(remove_standin);
    }
    return standin_path;
}

tq_gguf *tq_test_open_stories(tq_ctx *ctx)
{
    int standin;
    const char *path = tq_test_stories(&standin);
    tq_gguf *g = NULL;
    if (!path) {
        tq_ctx_set_error(ctx, TQ_ERR_IO, "no stories260K in ../shared, and no stand-in written");
        return NULL;
    }
    if (tq_gguf_open(ctx, path, NULL, &g) != TQ_OK) return NULL;
    return g;
}

void tq_test_ggsn_head(tq_test_buf *b, uint32_t n_tokens, uint32_t first_token, const char *arch)
{
    tq_test_u32(b, TQ_GGSN_MAGIC);
    tq_test_u32(b, 9);
    tq_test_u32(b, n_tokens);
    for (uint32_t i = 0; i < n_tokens; i++) tq_test_u32(b, first_token + i);
    tq_test_u32(b, (uint32_t)strlen(arch));
    tq_test_put(b, arch, strlen(arch));
}

/* ---- hand-built llama.cpp sequence files */

#define PUT(v)                                                                                     \
    do {                                                                                           \
        __typeof__(v) v_ = (v);                                                                    \
        tq_test_put(&b, &v_, sizeof v_);                                                           \
    } while (0)

uint8_t *tq_test_seq_state(const tq_test_seq *s, size_t *len)
{
    return tq_test_seq_state_at(s, NULL, s->cells, len);
}

uint8_t *tq_test_seq_state_at(const tq_test_seq *s, const int32_t *pos, uint32_t n_tokens,
                              size_t *len)
{
    tq_test_buf b = {0};
    PUT(TQ_GGSQ_MAGIC);
    PUT((uint32_t)2); /* sequence file version */
    PUT(n_tokens); /* tokens */
    for (uint32_t i = 0; i < n_tokens; i++) PUT((int32_t)(s->token0 + (int32_t)i));
    PUT((uint32_t)1); /* one stream */
    PUT(s->cells);
    for (uint32_t c = 0; c < s->cells; c++) { /* position, one sequence id: 0 */
        PUT((int32_t)(pos ? pos[c] : (int32_t)c));
        PUT((uint32_t)1);
        PUT((int32_t)0);
    }
    if (s->cells) { /* llama.cpp writes nothing more for an empty stream */
        PUT((uint32_t)s->vtrans);
        PUT(s->layers);
        uint32_t es = s->f16 ? 2 : 4;
        for (int v = 0; v < 2; v++) {
            for (uint32_t l = 0; l < s->layers; l++) {
                PUT((int32_t)(s->f16 ? 1 : 0)); /* ggml type */
                int trans = v && s->vtrans;
                if (trans) {
                    PUT(es);
                    PUT(s->width);
                } else {
                    PUT((uint64_t)s->width * es);
                }
                /* the values in file order: rows (or, transposed, elements) */
                for (uint32_t i = 0; i < s->cells * s->width; i++) {
                    uint32_t c = trans ? i % s->cells : i / s->width;
                    uint32_t e = trans ? i / s->cells : i % s->width;
                    uint32_t at = pos ? (uint32_t)pos[c] : c;
                    float x = s->value(s->user, l, v, at, e);
                    if (s->f16) PUT(tq_fp32_to_fp16(x));
                    else PUT(x);
                }
            }
        }
    }
    *len = b.n;
    return b.p;
}
#undef PUT

float tq_test_randn_value(void *seed, uint32_t l, int is_v, uint32_t c, uint32_t e)
{
    (void)l;
    (void)is_v;
    (void)c;
    (void)e;
    return (float)tq_test_randn(seed);
}

/* A memory stream's bytes once closed (the stream sets *buf and *bl then): the caller's when
 * st is TQ_OK, else freed (NULL). */
static uint8_t *stream_bytes(FILE *f, char **buf, const size_t *bl, tq_status st, size_t *out_len)
{
    fclose(f);
    if (st) {
        free(*buf);
        return NULL;
    }
    *out_len = *bl;
    return (uint8_t *)*buf;
}

uint8_t *tq_test_snapshot_decode(const uint8_t *snap, size_t len, const tqkv_reader *base,
                                 size_t *out_len, char *err, size_t errlen)
{
    tq_ctx *ctx = tq_ctx_new();
    tqkv_reader *r;
    uint8_t *out = NULL;
    if (tqkv_open_memory(ctx, snap, len, "x.tqkv", &r) == TQ_OK) {
        char *buf = NULL;
        size_t bl = 0;
        FILE *f = open_memstream(&buf, &bl);
        tq_status st = tq_kvsnap_decode(ctx, r, base, &(tq_kvsnap_decode_options){.threads = 2}, f);
        out = stream_bytes(f, &buf, &bl, st, out_len);
        tqkv_close(r);
    }
    snprintf(err, errlen, "%s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
    return out;
}

uint8_t *tq_test_snapshot_encode(const uint8_t *state, size_t len, const tq_test_enc *o,
                                 size_t *out_len, char *err, size_t errlen)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *v;
    uint8_t *out = NULL;
    if (tq_kv_view_open_memory(ctx, state, len, "s", TQ_PROFILE_DEFAULT, &v) == TQ_OK) {
        char *buf = NULL;
        size_t bl = 0;
        FILE *f = open_memstream(&buf, &bl);
        tq_kvsnap_report rep;
        tq_status st = tq_kvsnap_encode(ctx, v, &o->q, &o->in, &o->run, f, &rep);
        out = stream_bytes(f, &buf, &bl, st, out_len);
        tq_kv_view_close(v);
    }
    snprintf(err, errlen, "%s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
    return out;
}

/* Cache kv, layer l, K or V of both views: their first `cells` rows alike (0) or not (-1). */
static int rows_alike(tq_ctx *ctx, const tq_kv_view *vb, const tq_kv_view *va, uint32_t kv,
                      uint32_t l, int is_v, uint32_t cells)
{
    const tq_kv_stream *sb = &tq_kv_view_kv(vb, kv)->streams[0];
    const tq_kv_stream *sa = &tq_kv_view_kv(va, kv)->streams[0];
    const tq_kv_tensor *tb = is_v ? &sb->v[l] : &sb->k[l];
    const tq_kv_tensor *ta = is_v ? &sa->v[l] : &sa->k[l];
    size_t bytes = sizeof(float) * (size_t)tb->width * cells;
    float *rb = malloc(bytes + 1); /* [cells][width] */
    float *ra = malloc(bytes + 1); /* [cells][width] */
    int rc = -1;
    if (rb && ra && !tq_kv_view_read_rows(ctx, tb, sb->cell_count, 0, cells, rb) &&
        !tq_kv_view_read_rows(ctx, ta, sa->cell_count, 0, cells, ra))
        rc = memcmp(ra, rb, bytes) ? -1 : 0;
    free(rb);
    free(ra);
    return rc;
}

int tq_test_base_cells_alike(const uint8_t *base, size_t base_len, const uint8_t *app,
                             size_t app_len, const tqkv_reader *base_reader, uint32_t base_cells,
                             char *err, size_t errlen)
{
    size_t lb = 0;
    size_t la = 0;
    uint8_t *out_b = tq_test_snapshot_decode(base, base_len, NULL, &lb, err, errlen);
    uint8_t *out_a = out_b ? tq_test_snapshot_decode(app, app_len, base_reader, &la, err, errlen)
                           : NULL;
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *vb = NULL;
    tq_kv_view *va = NULL;
    int rc = out_a && out_b ? 0 : -1;
    if (!rc && (tq_kv_view_open_memory(ctx, out_b, lb, "b", TQ_PROFILE_DEFAULT, &vb) ||
                tq_kv_view_open_memory(ctx, out_a, la, "a", TQ_PROFILE_DEFAULT, &va))) {
        snprintf(err, errlen, "%s", tq_ctx_error(ctx));
        rc = -1;
    }
    for (uint32_t kv = 0; !rc && kv < tq_kv_view_n_kv(vb); kv++)
        for (uint32_t l = 0; !rc && l < tq_kv_view_kv(vb, kv)->streams[0].n_layer; l++)
            for (int is_v = 0; !rc && is_v < 2; is_v++) {
                rc = rows_alike(ctx, vb, va, kv, l, is_v, base_cells);
                if (rc)
                    snprintf(err, errlen, "cache %u layer %u %s: the base's cells differ", kv, l,
                             is_v ? "V" : "K");
            }
    tq_kv_view_close(vb);
    tq_kv_view_close(va);
    tq_ctx_free(ctx);
    free(out_b);
    free(out_a);
    return rc;
}

/* One tensor's rows [r0, r1) of both views: their squared difference and the first's energy
 * added to *e and *n. */
static tq_status add_rows_error(tq_ctx *ctx, const tq_kv_tensor *ta, const tq_kv_tensor *tb,
                                uint32_t ca, uint32_t cb, uint32_t r0, uint32_t r1, double *e,
                                double *n)
{
    size_t nv = (size_t)(r1 - r0) * ta->width;
    float *ra = malloc(sizeof(float) * nv + 1); /* [r1 - r0][width] */
    float *rb = malloc(sizeof(float) * nv + 1);
    tq_status st = ra && rb ? TQ_OK : TQ_ERR_NOMEM;
    if (!st) st = tq_kv_view_read_rows(ctx, ta, ca, r0, r1 - r0, ra);
    if (!st) st = tq_kv_view_read_rows(ctx, tb, cb, r0, r1 - r0, rb);
    for (size_t i = 0; !st && i < nv; i++) {
        *e += ((double)ra[i] - rb[i]) * ((double)ra[i] - rb[i]);
        *n += (double)ra[i] * ra[i];
    }
    free(ra);
    free(rb);
    return st;
}

double tq_test_rows_error(const uint8_t *a, size_t al, const uint8_t *b, size_t bl,
                          uint32_t cache, uint32_t r0, uint32_t r1)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *va = NULL;
    tq_kv_view *vb = NULL;
    tq_status st = tq_kv_view_open_memory(ctx, a, al, "a", TQ_PROFILE_DEFAULT, &va);
    if (!st) st = tq_kv_view_open_memory(ctx, b, bl, "b", TQ_PROFILE_DEFAULT, &vb);
    double e = 0;
    double n = 0;
    const tq_kv_stream *sa = st ? NULL : &tq_kv_view_kv(va, cache)->streams[0];
    const tq_kv_stream *sb = st ? NULL : &tq_kv_view_kv(vb, cache)->streams[0];
    for (uint32_t l = 0; !st && l < sa->n_layer; l++)
        for (int kv = 0; !st && kv < 2; kv++)
            st = add_rows_error(ctx, kv ? &sa->v[l] : &sa->k[l], kv ? &sb->v[l] : &sb->k[l],
                                sa->cell_count, sb->cell_count, r0, r1, &e, &n);
    if (st) tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
    tq_kv_view_close(va);
    tq_kv_view_close(vb);
    tq_ctx_free(ctx);
    return st ? -1 : e / n;
}

void tq_test_snapshot_refused_after(const uint8_t *snap, size_t n,
                                    void (*edit)(uint8_t *meta, uint64_t ml), const char *want)
{
    uint8_t *s = malloc(n);
    memcpy(s, snap, n);
    uint64_t ml;
    memcpy(&ml, s + 8, 8);
    edit(s + 32, ml);
    uint64_t h = XXH64(s + 32, ml, 0);
    memcpy(s + 16, &h, 8);
    h = XXH64(s, 24, 0);
    memcpy(s + 24, &h, 8);
    char err[512];
    size_t dl;
    uint8_t *back = tq_test_snapshot_decode(s, n, NULL, &dl, err, sizeof err);
    CHECK(!back, "decoded after the edit for '%s'", want);
    CHECK(strstr(err, want) && !strchr(err, '\n'), "'%s' does not say '%s'", err, want);
    free(back);
    free(s);
}

void tq_test_gguf_str(tq_test_buf *b, const char *s)
{
    tq_test_u64(b, strlen(s));
    tq_test_put(b, s, strlen(s));
}

void tq_test_gguf_head(tq_test_buf *b, uint64_t n_kv, const char *arch)
{
    memset(b, 0, sizeof *b);
    tq_test_u32(b, 0x46554747u);
    tq_test_u32(b, 3);
    tq_test_u64(b, 0);
    tq_test_u64(b, n_kv);
    tq_test_gguf_str(b, "general.architecture");
    tq_test_u32(b, TQ_GGUF_STRING);
    tq_test_gguf_str(b, arch);
}

void tq_test_gguf_u32(tq_test_buf *b, const char *key, uint32_t v)
{
    tq_test_gguf_str(b, key);
    tq_test_u32(b, TQ_GGUF_UINT32);
    tq_test_u32(b, v);
}
