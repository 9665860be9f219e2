/* test_gguf.c - the GGUF reader against hand-made hostile files, and the
 * writer/reader round trip over every value type and many tensor types. */
#include "gguf.h"
#include "harness.h"
#include "tq_internal.h"

#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* A fork revision's number, by its name (tests name revisions, never number them). */
static tq_type_profile rev(const char *name)
{
    tq_type_profile p = -1;
    tq_type_profile_parse(name, &p);
    return p;
}

/* ------------------------------------------------ a byte builder */

typedef tq_test_buf buf;
static void str(buf *b, const char *s) { tq_test_gguf_str(b, s); }
static void kv_u32(buf *b, const char *k, uint32_t v) { tq_test_gguf_u32(b, k, v); }
static void tinfo(buf *b, const char *name, uint32_t nd, const int64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    tq_test_u32(b, nd);
    for (uint32_t d = 0; d < nd; d++) tq_test_u64(b, (uint64_t)ne[d]);
    tq_test_u32(b, type);
    tq_test_u64(b, off);
}
static void pad_to(buf *b, size_t a)
{
    while (b->n % a) tq_test_put(b, "", 1);
}

/* A small valid file: two KVs, two F32 tensors of 8 and 4 values. */
static buf valid_file(void)
{
    buf b = {0};
    tq_test_u32(&b, 0x46554747u);
    tq_test_u32(&b, 3);
    tq_test_u64(&b, 2);
    tq_test_u64(&b, 2);
    str(&b, "general.architecture");
    tq_test_u32(&b, TQ_GGUF_STRING);
    str(&b, "llama");
    kv_u32(&b, "llama.block_count", 1);
    int64_t ne1[2] = {4, 2}, ne2[1] = {4};
    tinfo(&b, "a.weight", 2, ne1, 0, 0);
    tinfo(&b, "b.weight", 1, ne2, 0, 32);
    pad_to(&b, 32);
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        tq_test_put(&b, &f, 4);
    }
    for (int i = 0; i < 4; i++) {
        float f = -(float)i;
        tq_test_put(&b, &f, 4);
    }
    pad_to(&b, 32);
    return b;
}

/* Opens bytes and returns the error message ("" when it opened). */
static const char *try_open(const buf *b, char *msg, size_t n)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g = NULL;
    tq_status st = tq_gguf_open_memory(ctx, b->p, b->n, "t.gguf", NULL, &g);
    snprintf(msg, n, "%s", st ? tq_ctx_error(ctx) : "");
    if (!st) tq_gguf_close(g);
    tq_ctx_free(ctx);
    return msg;
}

#define EXPECT_REJECT(b, needle)                                                                   \
    do {                                                                                           \
        char m_[512];                                                                              \
        try_open(&(b), m_, sizeof m_);                                                             \
        CHECK(*m_, "accepted a file that should fail with '%s'", needle);                          \
        CHECK(strstr(m_, needle) && !strncmp(m_, "t.gguf: ", 8), "message '%s' lacks '%s'", m_, needle); \
    } while (0)

TEST(gguf_valid_small_file)
{
    buf b = valid_file();
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g;
    CHECK(tq_gguf_open_memory(ctx, b.p, b.n, "t.gguf", NULL, &g) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_gguf_n_kv(g), 2);
    CHECK_EQ(tq_gguf_n_tensors(g), 2);
    CHECK_EQ(tq_gguf_find_key(g, "llama.block_count"), 1);
    CHECK_EQ(tq_gguf_find_key(g, "nope"), -1);
    CHECK_EQ(tq_gguf_get_int(g, "llama.block_count", -1), 1);
    uint64_t len;
    CHECK(!memcmp(tq_gguf_get_str(g, "general.architecture", "", &len), "llama", 5));
    CHECK_EQ(len, 5);
    CHECK_EQ(tq_gguf_find_tensor(g, "b.weight"), 1);
    const float *d = tq_gguf_tensor_data(g, 1);
    CHECK(d[3] == -3.0f);
    CHECK_EQ(tq_gguf_tensor_nelements(g, 0), 8);
    CHECK(tq_gguf_data_offset(g) % 32 == 0);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    free(b.p);
}

TEST(gguf_rejects_every_truncation)
{
    buf b = valid_file();
    char m[512];
    for (size_t k = 0; k < b.n; k++) {
        buf t = {b.p, k, k};
        try_open(&t, m, sizeof m);
        CHECK(*m, "a file cut to %zu of %zu bytes was accepted", k, b.n);
        CHECK(!strncmp(m, "t.gguf: ", 8) && !strchr(m, '\n'), "cut at %zu: '%s'", k, m);
    }
    free(b.p);
}

static void set32(buf *b, size_t off, uint32_t v) { memcpy(b->p + off, &v, 4); }
static void set64(buf *b, size_t off, uint64_t v) { memcpy(b->p + off, &v, 8); }

TEST(gguf_rejects_bad_header_fields)
{
    buf b = valid_file();
    memcpy(b.p, "GGML", 4);
    EXPECT_REJECT(b, "not a GGUF file");
    memcpy(b.p, "GGUF", 4);
    set32(&b, 4, 0);
    EXPECT_REJECT(b, "version 0");
    set32(&b, 4, 1);
    EXPECT_REJECT(b, "version 1 is no longer supported");
    set32(&b, 4, 4);
    EXPECT_REJECT(b, "GGUF version 4");
    set32(&b, 4, 0x03000000u);
    EXPECT_REJECT(b, "big-endian");
    set32(&b, 4, 3);
    set64(&b, 8, (uint64_t)-1);
    EXPECT_REJECT(b, "tensor count -1 is negative");
    set64(&b, 8, 1ull << 60);
    EXPECT_REJECT(b, "cannot fit");
    set64(&b, 8, 2);
    set64(&b, 16, 1ull << 62);
    EXPECT_REJECT(b, "key count");
    set64(&b, 16, 2);
    set64(&b, 24, 1ull << 40); /* first key's length */
    EXPECT_REJECT(b, "exceeds 2^30");
    set64(&b, 24, 1ull << 29);
    EXPECT_REJECT(b, "runs past the end");
    free(b.p);
}

/* Builds a file from parts: kvs (already encoded), tensor infos, data. */
static buf assemble(const buf *kvs, uint64_t n_kv, const buf *infos, uint64_t n_t, size_t data_bytes, size_t align)
{
    buf b = {0};
    tq_test_u32(&b, 0x46554747u);
    tq_test_u32(&b, 3);
    tq_test_u64(&b, n_t);
    tq_test_u64(&b, n_kv);
    tq_test_put(&b, kvs->p, kvs->n);
    tq_test_put(&b, infos->p, infos->n);
    if (n_t) pad_to(&b, align);
    for (size_t i = 0; i < data_bytes; i++) tq_test_put(&b, "\x01", 1);
    return b;
}

/* One hostile key/value: its key and value type, then for an array the
 * element type and count, else the value's bytes; and the message's words. */
typedef struct {
    const char *key;
    uint32_t type;
    uint32_t elem_type;
    uint64_t count;
    const char *value;
    size_t value_bytes;
    const char *needle;
} bad_kv;

/* clang-format off */
static const bad_kv bad_kvs[] = {
    {"",                  TQ_GGUF_UINT8,  0,               0,          "x",        1, "is empty"},
    {"nested",            TQ_GGUF_ARRAY,  TQ_GGUF_ARRAY,   1,          NULL,       0, "nested array"},
    {"big.array",         TQ_GGUF_ARRAY,  TQ_GGUF_UINT64,  1ull << 31, NULL,       0, "at most 2^30"},
    {"many.strings",      TQ_GGUF_ARRAY,  TQ_GGUF_STRING,  1ull << 29, NULL,       0, "cannot fit"},
    {"bad.type",          13,             0,               0,          NULL,       0, "invalid value type 13"},
    {"general.alignment", TQ_GGUF_UINT32, 0,               0,          "\x30\0\0", 4, "alignment 48 is not a power of 2"},
    {"general.alignment", TQ_GGUF_UINT32, 0,               0,          "\0\0\0",   4, "alignment 0 is not a power of 2"},
    {"general.alignment", TQ_GGUF_UINT16, 0,               0,          "\x20",     2, "must be of type UINT32"},
    {"tq.type_profile",   TQ_GGUF_STRING, 0,               0,          "\x07\0\0\0\0\0\0\0martian", 15,
     "unknown tq.type_profile 'martian'"},
};
/* clang-format on */

TEST(gguf_rejects_bad_metadata)
{
    buf kv = {0};
    buf ti = {0};
    for (size_t i = 0; i < sizeof bad_kvs / sizeof bad_kvs[0]; i++) {
        const bad_kv *c = &bad_kvs[i];
        str(&kv, c->key);
        tq_test_u32(&kv, c->type);
        if (c->type == TQ_GGUF_ARRAY) {
            tq_test_u32(&kv, c->elem_type);
            tq_test_u64(&kv, c->count);
        }
        if (c->value) tq_test_put(&kv, c->value, c->value_bytes);
        buf f = assemble(&kv, 1, &ti, 0, 0, 32);
        EXPECT_REJECT(f, c->needle);
        free(f.p);
        free(kv.p);
        kv = (buf){0};
    }
}

TEST(gguf_rejects_a_duplicate_key)
{
    buf kv = {0};
    buf ti = {0};
    kv_u32(&kv, "a", 1);
    kv_u32(&kv, "a", 2);
    buf f = assemble(&kv, 2, &ti, 0, 0, 32);
    EXPECT_REJECT(f, "duplicate key 'a'");
    free(f.p);
    free(kv.p);
}

/* One or two hostile tensor infos, the data bytes after them and the
 * message's words. */
typedef struct {
    const char *name;
    uint32_t n_dims;
    int64_t ne[5];
    uint32_t type;
    uint64_t offset;
} tensor_info;
typedef struct {
    tensor_info info[2];
    uint64_t n_tensors;
    size_t data_bytes;
    const char *needle;
} bad_tensors;

#define ROW_32X2(name, type, offset) {name, 2, {32, 2}, type, offset}
#define NAME_64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
/* clang-format off */
static const bad_tensors bad_tensor_infos[] = {
    {{{"x", 5, {32, 2, 1, 1, 1}, 0, 0}},                    1, 256, "has 5 dimensions"},
    {{ROW_32X2("x", 0, 0), ROW_32X2("x", 0, 256)},          2, 512, "duplicate tensor name 'x'"},
    {{ROW_32X2("x", 4, 0)},                                 1, 256, "type id 4, unknown"},
    {{ROW_32X2("x", 99, 0)},                                1, 256, "type id 99"},
    {{{"x", 2, {33, 1}, 8, 0}},                             1, 256, "not a multiple of q8_0's block size 32"},
    {{{"x", 2, {32, -1}, 0, 0}},                            1, 256, "dimension 1 is negative"},
    {{{"x", 4, {1ll << 40, 1ll << 40, 1, 1}, 0, 0}},        1, 256, "overflows"},
    {{{"x", 2, {1ll << 31, 1ll << 30}, 0, 0}},              1, 256, "size in bytes overflows"},
    {{ROW_32X2(NAME_64, 0, 0)},                             1, 256, "at most 63"},
    {{ROW_32X2("x", 0, 0), ROW_32X2("y", 0, 0)},            2, 512, "tensor 'y' has offset 0, expected 256"},
    {{ROW_32X2("x", 0, 256), ROW_32X2("y", 0, 0)},          2, 512, "tensor 'x' has offset 256, expected 0"},
    {{ROW_32X2("x", 0, 0)},                                 1, 255, "runs past the end"},
    {{ROW_32X2("x", 0, 0), ROW_32X2("y", 0, 256)},          2, 300, "tensor 'y' data"},
};
/* clang-format on */

/* Type 4 is a removed ggml type; q8_0 (8) needs rows of 32; an offset out of
 * order overlaps or misplaces the first tensor. */
TEST(gguf_rejects_bad_tensor_infos)
{
    buf kv = {0};
    for (size_t i = 0; i < sizeof bad_tensor_infos / sizeof bad_tensor_infos[0]; i++) {
        const bad_tensors *c = &bad_tensor_infos[i];
        buf ti = {0};
        for (uint64_t t = 0; t < c->n_tensors; t++) {
            const tensor_info *r = &c->info[t];
            tinfo(&ti, r->name, r->n_dims, r->ne, r->type, r->offset);
        }
        buf f = assemble(&kv, 0, &ti, c->n_tensors, c->data_bytes, 32);
        EXPECT_REJECT(f, c->needle);
        free(f.p);
        free(ti.p);
    }
}

/* ------------------------------------------------ round trip through the writer */

static char *tmp_path(const char *tag)
{
    static char p[128];
    snprintf(p, sizeof p, "/tmp/tq-test-%d-%s.gguf", (int)getpid(), tag);
    return p;
}

TEST(gguf_writer_round_trip_all_value_and_tensor_types)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf_writer *w;
    CHECK_EQ(tq_gguf_writer_new(ctx, &w), TQ_OK);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32v = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 3.5f;
    uint8_t bo = 1;
    uint64_t u64v = 18000000000000000000ull;
    int64_t i64 = -9000000000000000000ll;
    double f64 = -2.25e-300;
    tq_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    tq_gguf_writer_set_scalar(w, "t.u8", TQ_GGUF_UINT8, &u8);
    tq_gguf_writer_set_scalar(w, "t.i8", TQ_GGUF_INT8, &i8);
    tq_gguf_writer_set_scalar(w, "t.u16", TQ_GGUF_UINT16, &u16);
    tq_gguf_writer_set_scalar(w, "t.i16", TQ_GGUF_INT16, &i16);
    tq_gguf_writer_set_scalar(w, "t.u32", TQ_GGUF_UINT32, &u32v);
    tq_gguf_writer_set_scalar(w, "t.i32", TQ_GGUF_INT32, &i32);
    tq_gguf_writer_set_scalar(w, "t.f32", TQ_GGUF_FLOAT32, &f32);
    tq_gguf_writer_set_scalar(w, "t.bool", TQ_GGUF_BOOL, &bo);
    tq_gguf_writer_set_scalar(w, "t.u64", TQ_GGUF_UINT64, &u64v);
    tq_gguf_writer_set_scalar(w, "t.i64", TQ_GGUF_INT64, &i64);
    tq_gguf_writer_set_scalar(w, "t.f64", TQ_GGUF_FLOAT64, &f64);
    int32_t arr[3] = {1, -2, 3};
    tq_gguf_writer_set_array(w, "t.arr_i32", TQ_GGUF_INT32, 3, arr, NULL);
    const char *ss[3] = {"a", "", "ccc\n\"q\""};
    uint64_t sl[3] = {1, 0, 7};
    tq_gguf_writer_set_array(w, "t.arr_str", TQ_GGUF_STRING, 3, ss, sl);
    tq_gguf_writer_set_array(w, "t.arr_empty", TQ_GGUF_FLOAT64, 0, NULL, NULL);
    tq_gguf_writer_set_u32(w, "t.replace", 1);
    tq_gguf_writer_set_u32(w, "t.replace", 2); /* replaced in place */
    tq_gguf_writer_set_u32(w, "t.gone", 9);
    tq_gguf_writer_remove_kv(w, "t.gone");
    tq_gguf_writer_set_u32(w, "general.alignment", 64);
    /* tensors of many ggml types (profile 69d8e4be4 ids, fork types included) */
    static const int ids[] = {0, 1, 30, 8, 2, 3, 6, 7, 12, 14, 23, 46, 45, 44};
    size_t nt = sizeof ids / sizeof ids[0];
    for (size_t i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu.weight", i);
        int64_t ne[2] = {256, (int64_t)i + 1};
        CHECK(tq_gguf_writer_add_tensor(w, name, ids[i], 2, ne) == TQ_OK, "%s", tq_ctx_error(ctx));
    }
    const char *path = tmp_path("rt");
    CHECK(tq_gguf_writer_open(w, path, NULL, 0) == TQ_OK, "%s", tq_ctx_error(ctx));
    for (size_t i = 0; i < nt; i++) {
        const tq_ggml_type *ty = tq_ggml_type_get(TQ_PROFILE_DEFAULT, ids[i]);
        size_t nb = 256 / ty->block * ty->bytes * (i + 1);
        uint8_t *d = malloc(nb);
        for (size_t k = 0; k < nb; k++) d[k] = (uint8_t)(k * 7 + i);
        /* in odd pieces: the writer must not care how data is chunked */
        size_t half = nb / 3;
        CHECK_EQ(tq_gguf_writer_write(w, d, half), TQ_OK);
        CHECK_EQ(tq_gguf_writer_write(w, d + half, nb - half), TQ_OK);
        free(d);
    }
    CHECK(tq_gguf_writer_finish(w) == TQ_OK, "%s", tq_ctx_error(ctx));
    tq_gguf_writer_free(w);

    tq_gguf *g;
    CHECK(tq_gguf_open(ctx, path, NULL, &g) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_gguf_alignment(g), 64);
    CHECK_EQ(tq_gguf_n_tensors(g), (int64_t)nt);
    CHECK(!tq_gguf_profile_assumed(g), "fork ids are recorded with tq.type_profile");
    CHECK(tq_gguf_find_key(g, "tq.type_profile") >= 0 && tq_gguf_find_key(g, "t.gone") < 0);
    int64_t v;
    uint64_t uv, len;
    double d;
    CHECK_EQ(tq_gguf_get_int(g, "t.replace", 0), 2);
    CHECK_EQ(tq_gguf_get_int(g, "t.i8", 0), -100);
    CHECK_EQ(tq_gguf_get_int(g, "t.u16", 0), 60000);
    CHECK_EQ(tq_gguf_get_int(g, "t.i32", 0), -2000000000);
    CHECK_EQ(tq_gguf_get_int(g, "t.i64", 0), i64);
    CHECK_EQ(tq_gguf_kv_get_uint(g, tq_gguf_find_key(g, "t.u64"), 0, &uv), 0);
    CHECK_EQ(uv, u64v);
    CHECK_EQ(tq_gguf_kv_get_float(g, tq_gguf_find_key(g, "t.f64"), 0, &d), 0);
    CHECK_EQ(d, f64);
    CHECK_EQ(tq_gguf_kv_get_float(g, tq_gguf_find_key(g, "t.f32"), 0, &d), 0);
    CHECK(d == 3.5);
    CHECK_EQ(tq_gguf_kv_get_int(g, tq_gguf_find_key(g, "t.bool"), 0, &v), 0);
    CHECK_EQ(v, 1);
    int64_t ai = tq_gguf_find_key(g, "t.arr_str");
    CHECK_EQ(tq_gguf_kv_count(g, ai), 3);
    CHECK(!memcmp(tq_gguf_kv_get_str(g, ai, 2, &len), "ccc\n\"q\"", 7));
    CHECK_EQ(len, 7);
    CHECK(tq_gguf_kv_get_str(g, ai, 1, &len));
    CHECK_EQ(len, 0);
    CHECK(tq_gguf_kv_get_str(g, ai, 3, &len) == NULL, "index past the end");
    CHECK_EQ(tq_gguf_kv_count(g, tq_gguf_find_key(g, "t.arr_empty")), 0);
    CHECK_EQ(tq_gguf_kv_get_int(g, tq_gguf_find_key(g, "t.arr_i32"), 1, &v), 0);
    CHECK_EQ(v, -2);
    for (size_t i = 0; i < nt; i++) {
        CHECK_EQ(tq_gguf_tensor_type_id(g, (int64_t)i), ids[i]);
        const uint8_t *p = tq_gguf_tensor_data(g, (int64_t)i);
        for (size_t k = 0; k < tq_gguf_tensor_nbytes(g, (int64_t)i); k++)
            CHECK(p[k] == (uint8_t)(k * 7 + i), "tensor %zu byte %zu", i, k);
    }

    /* read + write again gives the same bytes */
    char p1[128], path2[128];
    snprintf(p1, sizeof p1, "%s", path);
    snprintf(path2, sizeof path2, "%s", tmp_path("rt2"));
    CHECK_EQ(tq_gguf_writer_new(ctx, &w), TQ_OK);
    tq_gguf_writer_copy_kvs(w, g);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), tq_gguf_tensor_type_id(g, i), tq_gguf_tensor_n_dims(g, i),
                                  tq_gguf_tensor_ne(g, i));
    const char *in = p1;
    CHECK(tq_gguf_writer_open(w, p1, &in, 1) == TQ_ERR_ARG, "the input is never the output");
    CHECK(strstr(tq_ctx_error(ctx), "overwrite"));
    tq_gguf_writer_free(w);
    char link[160];
    snprintf(link, sizeof link, "%s.link", p1);
    unlink(link);
    CHECK_EQ(symlink(p1, link), 0);
    tq_gguf_writer_new(ctx, &w);
    CHECK(tq_gguf_writer_open(w, link, &in, 1) == TQ_ERR_ARG, "not even through another path to the same file");
    tq_gguf_writer_free(w);
    unlink(link);
    tq_gguf_writer_new(ctx, &w);
    tq_gguf_writer_copy_kvs(w, g);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), tq_gguf_tensor_type_id(g, i), tq_gguf_tensor_n_dims(g, i),
                                  tq_gguf_tensor_ne(g, i));
    CHECK_EQ(tq_gguf_writer_open(w, path2, &in, 1), TQ_OK);
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        tq_gguf_writer_write(w, tq_gguf_tensor_data(g, i), tq_gguf_tensor_nbytes(g, i));
    CHECK_EQ(tq_gguf_writer_finish(w), TQ_OK);
    tq_gguf_writer_free(w);
    tq_gguf_close(g);
    size_t n1, n2;
    FILE *f1 = fopen(p1, "rb"), *f2 = fopen(path2, "rb");
    uint8_t *b1 = malloc(1 << 20), *b2 = malloc(1 << 20);
    n1 = fread(b1, 1, 1 << 20, f1);
    n2 = fread(b2, 1, 1 << 20, f2);
    fclose(f1), fclose(f2);
    CHECK(n1 == n2 && !memcmp(b1, b2, n1), "rewritten file differs (%zu vs %zu bytes)", n1, n2);
    free(b1), free(b2);
    unlink(p1);
    unlink(path2);
    tq_ctx_free(ctx);
}

TEST(gguf_writer_leaves_nothing_on_failure)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf_writer *w;
    tq_gguf_writer_new(ctx, &w);
    int64_t ne[1] = {64};
    CHECK_EQ(tq_gguf_writer_add_tensor(w, "x", 0, 1, ne), TQ_OK);
    CHECK(tq_gguf_writer_add_tensor(w, "x", 0, 1, ne) == TQ_ERR_ARG, "duplicate names refused");
    int64_t odd[1] = {33};
    CHECK(tq_gguf_writer_add_tensor(w, "y", 8, 1, odd) == TQ_ERR_ARG, "row not a multiple of the block");
    const char *path = tmp_path("fail");
    unlink(path);
    CHECK(tq_gguf_writer_open(w, path, NULL, 0) == TQ_OK);
    float d[10] = {0};
    tq_gguf_writer_write(w, d, sizeof d);
    CHECK(tq_gguf_writer_finish(w) == TQ_ERR_ARG, "an incomplete tensor is an error");
    CHECK(strstr(tq_ctx_error(ctx), "got 40 of 256 bytes"), "%s", tq_ctx_error(ctx));
    tq_gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0, "no output file after a failed write");
    char dir_listing[256];
    snprintf(dir_listing, sizeof dir_listing, "ls %s.tmp.* >/dev/null 2>&1", path);
    CHECK(system(dir_listing) != 0, "the temporary file was removed");
    tq_ctx_free(ctx);
}

TEST(gguf_type_profiles)
{
    tq_type_profile p;
    CHECK_EQ(tq_type_profile_parse("00910b10", &p), 0);
    CHECK_EQ(p, rev("00910b10"));
    CHECK_EQ(tq_type_profile_parse("nope", &p), -1);
    CHECK(!strcmp(tq_ggml_type_get(rev("69d8e4be4"), 46)->name, "tq4_1s"));
    CHECK(!strcmp(tq_ggml_type_get(rev("00910b10"), 47)->name, "tq4_1s"));
    CHECK(!strcmp(tq_ggml_type_get(rev("45f8a066"), 41)->name, "turbo3"));
    CHECK(!strcmp(tq_ggml_type_get(rev("upstream"), 42)->name, "q2_0"));
    CHECK(!strcmp(tq_ggml_type_get(rev("69d8e4be4"), 42)->name, "turbo2"));
    CHECK(tq_ggml_type_get(rev("upstream"), 43) == NULL && tq_ggml_type_get(TQ_PROFILE_DEFAULT, 4) == NULL);
    CHECK(tq_ggml_type_id_ambiguous(42) && tq_ggml_type_id_ambiguous(41) && !tq_ggml_type_id_ambiguous(8));
    CHECK_EQ(tq_ggml_type_by_name(TQ_PROFILE_DEFAULT, "Q8_0")->id, 8);
    const tq_ggml_type *t = tq_ggml_type_get(TQ_PROFILE_DEFAULT, 45);
    CHECK_EQ(t->block, 32);
    CHECK_EQ(t->bytes, 16);
    CHECK_EQ(t->dtype, TQ_DT_TQ3_1S);
}

TEST(gguf_ambiguous_ids_are_flagged_not_guessed)
{
    buf kv = {0}, ti = {0};
    int64_t ne[1] = {32};
    tinfo(&ti, "w", 1, ne, 46, 0); /* tq4_1s in 69d8e4be4, tq4_1s... or turbo4 elsewhere */
    buf f = assemble(&kv, 0, &ti, 1, 32, 32);
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g;
    CHECK(tq_gguf_open_memory(ctx, f.p, f.n, "t.gguf", NULL, &g) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK(tq_gguf_profile_assumed(g) && !strcmp(tq_gguf_tensor_type(g, 0)->name, "tq4_1s"));
    tq_gguf_close(g);
    tq_gguf_options o = {rev("upstream"), 1};
    CHECK(tq_gguf_open_memory(ctx, f.p, f.n, "t.gguf", &o, &g) == TQ_ERR_FORMAT, "46 does not exist upstream");
    CHECK(strstr(tq_ctx_error(ctx), "unknown in type-id profile upstream"));
    o.profile = rev("45f8a066");
    CHECK(tq_gguf_open_memory(ctx, f.p, f.n, "t.gguf", &o, &g) == TQ_ERR_FORMAT, "46 does not exist in April's ids");
    o.profile = rev("00910b10");
    CHECK_EQ(tq_gguf_open_memory(ctx, f.p, f.n, "t.gguf", &o, &g), TQ_OK);
    CHECK(!tq_gguf_profile_assumed(g) && !strcmp(tq_gguf_tensor_type(g, 0)->name, "tq3_1s"), "chosen, not flagged");
    tq_gguf_close(g);
    free(f.p), free(ti.p);
    tq_ctx_free(ctx);
}
