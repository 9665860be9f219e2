/* test_numpy.c - .npy headers, NumPy K/V dumps as KV views (names, shapes,
 * orientations), .npz export, state rewrites (kind change, token prefix),
 * and hostile dumps: every truncation and byte flip. */
#include "harness.h"
#include "kv_numpy.h"
#include "llama_state.h"
#include "npy.h"
#include "tq_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <string.h>

static int parse_str(const char *hdr_dict, tq_npy_header *h, char *err)
{
    uint8_t b[512];
    size_t n = strlen(hdr_dict);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)n;
    b[9] = 0;
    memcpy(b + 10, hdr_dict, n);
    return tq_npy_parse(b, 10 + n, h, err, 256);
}

TEST(npy_header_parses_numpy_and_other_writers)
{
    tq_npy_header h;
    char err[256];
    CHECK(!parse_str("{'descr': '<f2', 'fortran_order': False, 'shape': (3, 4), }   \n", &h, err), "%s", err);
    CHECK_EQ(h.ndim, 2);
    CHECK_EQ(h.shape[0], 3);
    CHECK_EQ(h.shape[1], 4);
    CHECK_EQ(h.count, 12);
    CHECK_EQ(h.itemsize, 2);
    CHECK(!h.fortran_order);
    CHECK(!parse_str("{\"shape\":(7,),\"fortran_order\":True,\"descr\":\"<f4\"}", &h, err), "%s", err);
    CHECK_EQ(h.ndim, 1);
    CHECK_EQ(h.shape[0], 7);
    CHECK(h.fortran_order);
    CHECK_EQ(h.itemsize, 4);
    CHECK(!parse_str("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", &h, err));
    CHECK_EQ(h.ndim, 0);
    CHECK_EQ(h.count, 1);
    CHECK(!parse_str("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", &h, err));
    CHECK_EQ(h.count, 6);
    CHECK(!parse_str("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }", &h, err) &&
              !h.descr[0] && !h.itemsize, "structured dtypes parse as unknown: %s", err);
    static const char *const bad[] = {
        "{'descr': '<f4', 'shape': (2,), }",                                            /* no fortran_order */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",              /* unknown key */
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",      /* repeated */
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",                      /* not a bool */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999)}", /* overflow */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",                   /* trailing */
        "['descr']",                                                                    /* not a dict */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,3",                      /* unterminated */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}",      /* too many dims */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(parse_str(bad[i], &h, err) == -1 && err[0], "accepted %s", bad[i]);
    /* every truncation of a real header */
    char out[512];
    uint64_t shape[3] = {5, 2, 8};
    uint32_t n = tq_npy_format(out, "<f2", 3, shape);
    CHECK(n % 64 == 0);
    CHECK_EQ(out[n - 1], '\n');
    CHECK(!tq_npy_parse((uint8_t *)out, n, &h, err, sizeof err) && h.header_len == n && h.count == 80, "%s", err);
    for (uint32_t k = 0; k < n; k++) CHECK(tq_npy_parse((uint8_t *)out, k, &h, err, sizeof err) == -1, "cut at %u", k);
    /* numpy's own bytes for a (2, 3) float32 array */
    uint64_t s23[2] = {2, 3};
    n = tq_npy_format(out, "<f4", 2, s23);
    const char *np = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    CHECK_EQ(n, 128);
    CHECK(!memcmp(out, np, strlen(np)));
    CHECK_EQ(out[127], '\n');
    CHECK_EQ(out[126], ' ');
}

/* ---- building .npz files in memory */

typedef struct mem {
    uint8_t *p;
    size_t n;
} mem;

static la_ssize_t mem_write(struct archive *a, void *u, const void *p, size_t n)
{
    (void)a;
    mem *m = u;
    m->p = realloc(m->p, m->n + n);
    memcpy(m->p + m->n, p, n);
    m->n += n;
    return (la_ssize_t)n;
}

typedef struct arr {
    const char *name, *descr;
    int ndim;
    uint64_t shape[6];
    const void *data;
} arr;

static mem make_npz(const arr *a, int n, int deflate)
{
    mem m = {0};
    struct archive *w = archive_write_new();
    archive_write_set_format_zip(w);
    if (!deflate) archive_write_zip_set_compression_store(w);
    archive_write_set_bytes_in_last_block(w, 1);
    archive_write_open(w, &m, NULL, mem_write, NULL);
    for (int i = 0; i < n; i++) {
        char hdr[512];
        uint32_t hl = tq_npy_format(hdr, a[i].descr, a[i].ndim, a[i].shape);
        uint64_t cnt = 1;
        for (int d = 0; d < a[i].ndim; d++) cnt *= a[i].shape[d];
        uint64_t bytes = cnt * (a[i].descr[2] == '2' ? 2 : a[i].descr[2] == '8' ? 8 : 4);
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, a[i].name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)(hl + bytes));
        archive_write_header(w, e);
        archive_write_data(w, hdr, hl);
        archive_write_data(w, a[i].data, bytes);
        archive_entry_free(e);
    }
    archive_write_close(w);
    archive_write_free(w);
    return m;
}

static tq_status open_mem(const mem *m, tq_kv_view **s, char *msg)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_status st = tq_kv_view_open_memory_limited(ctx, m->p, m->n, "d.npz", TQ_PROFILE_DEFAULT, 1 << 24, s);
    snprintf(msg, 512, "%s", st ? tq_ctx_error(ctx) : "");
    tq_ctx_free(ctx);
    return st;
}

/* 2 layers, 6 tokens, 2 heads of 8: K token-major [T, H, D] float16, V as
 * PyTorch keeps it, [1, H, T, D] float32, and a tokens array. */
#define T 6
#define H 2
#define D 8
static uint16_t k16[2][T * H * D];
static float v32[2][H * T * D];
static int64_t toks[T];

static mem sample_npz(int deflate)
{
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < T * H * D; i++) {
            k16[l][i] = tq_fp32_to_fp16((float)(i + 100 * l) * 0.25f);
            v32[l][i] = (float)(i - 50 * l) * 0.125f;
        }
    for (int i = 0; i < T; i++) toks[i] = 1000 + i;
    arr a[] = {
        {"tokens.npy", "<i8", 1, {T}, toks},
        {"k_0.npy", "<f2", 3, {T, H, D}, k16[0]},
        {"past.1.key.npy", "<f2", 3, {T, H, D}, k16[1]},
        {"layer0.value.npy", "<f4", 4, {1, H, T, D}, v32[0]},
        {"v_1.npy", "<f4", 4, {1, H, T, D}, v32[1]},
        {"note.npy", "<i8", 1, {2}, toks},
    };
    return make_npz(a, 6, deflate);
}

TEST(numpy_dump_opens_as_kv_view)
{
    char msg[512];
    for (int deflate = 0; deflate < 2; deflate++) {
        mem m = sample_npz(deflate);
        tq_kv_view *s;
        CHECK(open_mem(&m, &s, msg) == TQ_OK, "deflate %d: %s", deflate, msg);
        CHECK(tq_kv_view_kind(s) == TQ_KV_NUMPY && tq_kv_view_n_tokens(s) == T &&
              tq_kv_view_tokens(s)[5] == 1005);
        const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
        CHECK_EQ(st->cell_count, T);
        CHECK_EQ(st->n_layer, 2);
        CHECK_EQ(st->k[1].width, H * D);
        CHECK_EQ(st->v[0].type->dtype, TQ_DT_F32);
        tq_ctx *ctx = tq_ctx_new();
        float row[H * D];
        for (int l = 0; l < 2; l++)
            for (uint32_t c = 0; c < T; c++) {
                CHECK_EQ(tq_kv_view_read_rows(ctx, &st->k[l], T, c, 1, row), TQ_OK);
                for (int j = 0; j < H * D; j++) CHECK(row[j] == tq_fp16_to_fp32(k16[l][c * H * D + j]));
                CHECK_EQ(tq_kv_view_read_rows(ctx, &st->v[l], T, c, 1, row), TQ_OK);
                /* cell c, head h, dim d sits at [h][c][d] in the PyTorch layout */
                for (int h = 0; h < H; h++)
                    for (int d = 0; d < D; d++) CHECK(row[h * D + d] == v32[l][(h * T + c) * D + d], "l %d c %u h %d", l, c, h);
            }
        /* .npz out and in again: the same arrays, bit for bit */
        char *buf;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        CHECK(tq_npz_write(ctx, s, NULL, f) == TQ_OK, "%s", tq_ctx_error(ctx));
        fclose(f);
        mem m2 = {(uint8_t *)buf, len};
        tq_kv_view *s2;
        CHECK(open_mem(&m2, &s2, msg) == TQ_OK, "%s", msg);
        CHECK(tq_kv_view_size(s2) == tq_kv_view_size(s) &&
                  !memcmp(tq_kv_view_bytes(s2), tq_kv_view_bytes(s), tq_kv_view_size(s)),
              "the rewritten .npz holds the same arrays");
        /* a prefix of 4 tokens and layer 1 only */
        f = open_memstream(&buf, &len);
        CHECK(tq_npz_write(ctx, s, &(tq_npz_options){4, 1, 1, 0, NULL}, f) == TQ_OK);
        fclose(f);
        tq_kv_view_close(s2);
        free(m2.p);
        m2 = (mem){(uint8_t *)buf, len};
        CHECK(open_mem(&m2, &s2, msg) != TQ_OK && strstr(msg, "missing"), "layer 0 is gone: %s", msg);
        free(m2.p);
        tq_ctx_free(ctx);
        tq_kv_view_close(s);
        free(m.p);
    }
}

TEST(numpy_dump_refusals)
{
    char msg[512];
    tq_kv_view *s;
    static float f[T * H * D];
    static int32_t iv[T * H * D];
    struct {
        arr a[3];
        int n;
        const char *want;
    } cases[] = {
        {{{"k_0.npy", "<i4", 3, {T, H, D}, iv}, {"v_0.npy", "<f4", 3, {T, H, D}, f}}, 2, "not float32 or float16"},
        {{{"k_0.npy", "<f4", 3, {T, H, D}, f}}, 1, "missing"},
        {{{"k_0.npy", "<f4", 3, {T, H, D}, f}, {"v_0.npy", "<f4", 3, {T - 1, H, D}, f}}, 2, "different token counts"},
        {{{"k_0.npy", "<f4", 4, {2, H, T / 2, D}, f}, {"v_0.npy", "<f4", 3, {T, H, D}, f}}, 2, "batch"},
        {{{"k_0.npy", "<f4", 5, {1, 1, T, H, D}, f}, {"v_0.npy", "<f4", 3, {T, H, D}, f}}, 2, "shape is not"},
        {{{"x.npy", "<f4", 3, {T, H, D}, f}}, 1, "no K/V arrays"},
        {{{"k_0.npy", "<f4", 3, {T, H, D}, f}, {"v_0.npy", "<f4", 3, {T, H, D}, f}, {"kv.npy", "<f4", 5, {1, 2, T, 1, 8}, f}},
         3, "both"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mem m = make_npz(cases[i].a, cases[i].n, 0);
        CHECK(open_mem(&m, &s, msg) != TQ_OK && strstr(msg, cases[i].want) && strstr(msg, "d.npz: ") == msg,
              "case %zu: %s", i, msg);
        free(m.p);
    }
    mem m = {(uint8_t *)"PK\x03\x04 not really a zip", 24};
    CHECK(open_mem(&m, &s, msg) != TQ_OK && strstr(msg, "npz"), "%s", msg);
}

TEST(numpy_dump_hostile_bytes)
{
    char msg[512];
    mem m = sample_npz(1);
    tq_kv_view *s;
    for (size_t k = 0; k < m.n; k++) { /* every truncation: the central directory is gone */
        mem t = {m.p, k};
        CHECK(open_mem(&t, &s, msg) != TQ_OK && msg[0], "cut at %zu accepted", k);
    }
    uint8_t *c = malloc(m.n);
    unsigned long long seed = 7;
    for (size_t k = 0; k < m.n; k++) { /* every byte flipped: a clean answer either way */
        memcpy(c, m.p, m.n);
        c[k] ^= (uint8_t)(1 + (tq_test_randn(&seed) > 0 ? 0x80 : 0x10));
        mem t = {c, m.n};
        if (open_mem(&t, &s, msg) == TQ_OK) tq_kv_view_close(s);
        else CHECK(msg[0], "flip at %zu: an error without a message", k);
    }
    free(c);
    free(m.p);
    /* a stacked .npy, and the same with its data cut short */
    static float st[3 * 2 * T * 1 * D];
    char hdr[512];
    uint64_t shape[5] = {3, 2, T, 1, D};
    uint32_t hl = tq_npy_format(hdr, "<f4", 5, shape);
    uint8_t *npy = malloc(hl + sizeof st);
    memcpy(npy, hdr, hl);
    memcpy(npy + hl, st, sizeof st);
    mem t = {npy, hl + sizeof st};
    CHECK(open_mem(&t, &s, msg) == TQ_OK && tq_kv_view_kv(s, 0)->streams[0].n_layer == 3, "%s", msg);
    tq_kv_view_close(s);
    t.n -= 4;
    CHECK(open_mem(&t, &s, msg) != TQ_OK && strstr(msg, "data bytes"), "%s", msg);
    free(npy);
}

/* ---- state rewrites */

typedef tq_test_buf sb;

/* A v9 session, 4 tokens and 4 cells at positions 0..3 (cell 3 at pos
 * `last`), 1 layer of f16 rows of 8, optional transposed V. */
static sb session(int vtrans, int32_t last)
{
    sb b = {0};
    tq_test_ggsn_head(&b, 4, 20, "llama");
    tq_test_u32(&b, 1), tq_test_u32(&b, 4);
    for (int c = 0; c < 4; c++) tq_test_u32(&b, (uint32_t)(c == 3 ? last : c)), tq_test_u32(&b, 1), tq_test_u32(&b, 0);
    tq_test_u32(&b, (uint32_t)vtrans), tq_test_u32(&b, 1);
    uint16_t h[32];
    for (int i = 0; i < 32; i++) h[i] = tq_fp32_to_fp16((float)i);
    tq_test_u32(&b, 1), tq_test_u64(&b, 16), tq_test_put(&b, h, 64);
    tq_test_u32(&b, 1);
    if (vtrans) tq_test_u32(&b, 2), tq_test_u32(&b, 8);
    else tq_test_u64(&b, 16);
    tq_test_put(&b, h, 64);
    return b;
}

static tq_status rewrite(const sb *in, tq_state_rewrite o, sb *out, char *msg)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *s;
    tq_status st = tq_kv_view_open_memory(ctx, in->p, in->n, "s.ggsn", TQ_PROFILE_DEFAULT, &s);
    char *buf = NULL;
    size_t len = 0;
    if (!st) {
        FILE *f = open_memstream(&buf, &len);
        st = tq_llama_state_write(ctx, s, &o, f);
        fclose(f);
        tq_kv_view_close(s);
    }
    snprintf(msg, 512, "%s", st ? tq_ctx_error(ctx) : "");
    *out = (sb){(uint8_t *)buf, len, len};
    tq_ctx_free(ctx);
    return st;
}

TEST(state_rewrite_kind_and_prefix)
{
    char msg[512];
    for (int vt = 0; vt < 2; vt++) {
        sb a = session(vt, 3), q, back, cut;
        /* session -> sequence -> session is the identity */
        CHECK(rewrite(&a, (tq_state_rewrite){.kind = TQ_KV_SEQUENCE, .arch = NULL, .max_tokens = 0}, &q, msg) == TQ_OK, "%s", msg);
        CHECK(q.n == a.n - 9 && !memcmp(q.p, "qsgg\x02\0\0\0", 8), "sequence file: magic, version 2, no arch");
        CHECK(rewrite(&q, (tq_state_rewrite){.kind = TQ_KV_SESSION, .arch = NULL, .max_tokens = 0}, &back, msg) != TQ_OK && strstr(msg, "--model"),
              "a session needs the architecture: %s", msg);
        free(back.p);
        CHECK(rewrite(&q, (tq_state_rewrite){.kind = TQ_KV_SESSION, .arch = "llama", .max_tokens = 0}, &back, msg) == TQ_OK, "%s", msg);
        CHECK(back.n == a.n && !memcmp(back.p, a.p, a.n), "vtrans %d: round trip", vt);
        /* the first 2 tokens: the same as a file written after a 2-token prompt */
        CHECK(rewrite(&a, (tq_state_rewrite){.kind = TQ_KV_SESSION, .arch = NULL, .max_tokens = 2}, &cut, msg) == TQ_OK, "%s", msg);
        tq_ctx *ctx = tq_ctx_new();
        tq_kv_view *s;
        CHECK(tq_kv_view_open_memory(ctx, cut.p, cut.n, "cut", TQ_PROFILE_DEFAULT, &s) == TQ_OK, "%s", tq_ctx_error(ctx));
        const tq_kv_stream *st = &tq_kv_view_kv(s, 0)->streams[0];
        CHECK_EQ(tq_kv_view_n_tokens(s), 2);
        CHECK_EQ(st->cell_count, 2);
        CHECK_EQ(st->v[0].transposed, vt);
        float r[16];
        CHECK_EQ(tq_kv_view_read_rows(ctx, &st->v[0], 2, 0, 2, r), TQ_OK);
        for (int c = 0; c < 2; c++)
            for (int j = 0; j < 8; j++) CHECK(r[c * 8 + j] == (float)(vt ? j * 4 + c : c * 8 + j), "c %d j %d", c, j);
        tq_kv_view_close(s);
        tq_ctx_free(ctx);
        free(a.p), free(q.p), free(back.p), free(cut.p);
        /* a cell below the prefix after one past it: refused, not cut wrong */
        a = session(vt, 1);
        CHECK(rewrite(&a, (tq_state_rewrite){.kind = TQ_KV_SESSION, .arch = NULL, .max_tokens = 2}, &cut, msg) != TQ_OK && strstr(msg, "prompt order"),
              "%s", msg);
        free(a.p), free(cut.p);
    }
}
