/* test_kv_rotation.c - quantized K/V that llama.cpp stores Hadamard-rotated: found from the
 * rows, read turned back into the model's channels, coded there, decoded rotated again for
 * the same cache type and left in the model's channels for a float one; a state stored as it
 * is stays unmarked; every bad rotation field is refused. */
#include "harness.h"
#include "kv_plan.h"
#include "kv_snapshot.h"
#include "llama_state.h"
#include "tq_internal.h"
#include "tqkv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { CELLS = 48, HEAD = 64, WIDTH = 128, LAYERS = 2 };

/* The model's value e of cell c: channels of very unequal spread, as a model's K and V. */
static float model_value(uint32_t l, int kv, uint32_t c, uint32_t e)
{
    unsigned long long seed = 1 + e + 131ull * c + 7919ull * l + 31ull * kv;
    float spread = e % 16 == 0 ? 4.0f : 0.05f + 0.02f * (float)(e % 5);
    return spread * (float)tq_test_randn(&seed);
}

/* A llama session file of q8_0 K and V rows (two heads of 64), each head rotated by
 * H_64 / 8 first when `rotated` (llama.cpp's attention rotation). */
static uint8_t *make_state(int rotated, size_t *len)
{
    tq_ctx *ctx = tq_test_ctx();
    tq_test_buf b = {0};
    tq_test_ggsn_head(&b, CELLS, 5, "llama");
    tq_test_u32(&b, 1); /* one stream */
    tq_test_u32(&b, CELLS);
    for (uint32_t c = 0; c < CELLS; c++) {
        tq_test_u32(&b, c); /* position */
        tq_test_u32(&b, 1); /* in one sequence */
        tq_test_u32(&b, 0);
    }
    tq_test_u32(&b, 0); /* K/V not transposed */
    tq_test_u32(&b, LAYERS);
    float row[WIDTH];
    uint8_t q[WIDTH / 32 * 34];
    for (int kv = 0; kv < 2; kv++)
        for (uint32_t l = 0; l < LAYERS; l++) {
            tq_test_u32(&b, 8); /* q8_0 */
            tq_test_u64(&b, sizeof q);
            for (uint32_t c = 0; c < CELLS; c++) {
                for (uint32_t e = 0; e < WIDTH; e++) row[e] = model_value(l, kv, c, e);
                if ((rotated && tq_hadamard_blocks(ctx, HEAD, row, WIDTH)) ||
                    tq_quantize(ctx, TQ_DT_Q8_0, row, WIDTH, q))
                    tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
                tq_test_put(&b, q, sizeof q);
            }
        }
    *len = b.n;
    return b.p;
}

/* The state's view, rotations found; *found how many tensors. */
static tq_kv_view *open_found(tq_ctx *ctx, const uint8_t *state, size_t len, uint32_t *found)
{
    tq_kv_view *v = NULL;
    tq_kvsnap_settings o = {.head_dim = HEAD}; /* what find_rotation reads of them */
    if (tq_kv_view_open_memory(ctx, state, len, "s", TQ_PROFILE_DEFAULT, &v) ||
        tq_kvsnap_find_rotation(ctx, v, &o, found))
        tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
    return v;
}

/* Largest |read - model value| over every row of the view, relative to the largest value. */
static double off_model(tq_ctx *ctx, const tq_kv_view *v)
{
    const tq_kv_stream *s = &tq_kv_view_kv(v, 0)->streams[0];
    float *rows = malloc(sizeof(float) * CELLS * WIDTH); /* [CELLS][WIDTH] */
    double worst = 0;
    double top = 0;
    for (uint32_t l = 0; l < LAYERS; l++)
        for (int kv = 0; kv < 2; kv++) {
            if (tq_kv_view_read_rows(ctx, kv ? &s->v[l] : &s->k[l], CELLS, 0, CELLS, rows))
                tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
            for (uint32_t c = 0; c < CELLS; c++)
                for (uint32_t e = 0; e < WIDTH; e++) {
                    double want = model_value(l, kv, c, e);
                    double d = fabs(rows[(size_t)c * WIDTH + e] - want);
                    worst = d > worst ? d : worst;
                    top = fabs(want) > top ? fabs(want) : top;
                }
        }
    free(rows);
    return worst / top;
}

TEST(hadamard_block_is_its_own_inverse_and_the_sylvester_matrix)
{
    tq_ctx *ctx = tq_test_ctx();
    float x[HEAD];
    float y[HEAD];
    unsigned long long seed = 3;
    for (int i = 0; i < HEAD; i++) x[i] = y[i] = (float)tq_test_randn(&seed);
    CHECK_OK(ctx, tq_hadamard_blocks(ctx, HEAD, y, HEAD));
    for (int i = 0; i < HEAD; i++) { /* H[i][j] = (-1)^popcount(i & j) / 8 */
        double want = 0;
        for (int j = 0; j < HEAD; j++) want += (__builtin_popcount(i & j) % 2 ? -x[j] : x[j]) / 8.0;
        CHECK_NEAR(y[i], want, 1e-5);
    }
    CHECK_OK(ctx, tq_hadamard_blocks(ctx, HEAD, y, HEAD));
    for (int i = 0; i < HEAD; i++) CHECK_NEAR(y[i], x[i], 1e-5);
}

/* Each state, rotated by llama.cpp or stored as it is: how many tensors the search marks,
 * the rotation it marks on K (the largest power of two in the head) and V (llama.cpp's 64),
 * and the rows read back in the model's channels either way. */
TEST(rotations_are_found_where_llama_cpp_made_them_and_nowhere_else)
{
    tq_ctx *ctx = tq_test_ctx();
    struct {
        int rotated;
        uint32_t found;
        uint32_t k_hadamard;
        uint32_t v_hadamard;
    } cases[] = {{1, 2 * LAYERS, HEAD, 64}, {0, 0, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *state = make_state(cases[i].rotated, &len);
        uint32_t found = 7;
        tq_kv_view *v = open_found(ctx, state, len, &found);
        CHECK_EQ(found, cases[i].found);
        const tq_kv_stream *s = &tq_kv_view_kv(v, 0)->streams[0];
        CHECK_EQ(s->k[0].hadamard, cases[i].k_hadamard);
        CHECK_EQ(s->v[1].hadamard, cases[i].v_hadamard);
        double off = off_model(ctx, v);
        CHECK(off < 0.02, "rows read %.4f of the largest value off the model's", off);
        tq_kv_view_close(v);
        free(state);
    }
}

/* The state encoded (balanced) after its rotations were found. */
static uint8_t *encode_found(const uint8_t *state, size_t len, size_t *out_len)
{
    tq_ctx *ctx = tq_test_ctx();
    uint32_t found;
    tq_kv_view *v = open_found(ctx, state, len, &found);
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.head_dim = HEAD;
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    tq_kvsnap_report rep;
    if (tq_kvsnap_encode(ctx, v, &o.q, &o.in, &o.run, f, &rep))
        tq_test_fail(__FILE__, __LINE__, " encode: %s\n", tq_ctx_error(ctx));
    fclose(f);
    tq_kv_view_close(v);
    *out_len = bl;
    return (uint8_t *)buf;
}

/* The snapshot decoded (cache_type NULL: the source's types) and opened as a view. */
static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n, "writing %s", path);
    if (f) fclose(f);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *p = NULL;
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size > 0 && (p = malloc((size_t)size)) && fread(p, 1, (size_t)size, f) == (size_t)size)
        *n = (size_t)size;
    fclose(f);
    return p;
}

/* tq_kvsnap_encode of a view as opened (the rotation not looked for yet), in memory. */
static uint8_t *encode_as_opened(const uint8_t *state, size_t len, size_t *out_len)
{
    tq_ctx *ctx = tq_test_ctx();
    tq_kv_view *v = NULL;
    char *buf = NULL;
    size_t bl = 0;
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.head_dim = HEAD;
    if (tq_kv_view_open_memory(ctx, state, len, "s", TQ_PROFILE_DEFAULT, &v))
        tq_test_fail(__FILE__, __LINE__, " open: %s\n", tq_ctx_error(ctx));
    FILE *f = v ? open_memstream(&buf, &bl) : NULL;
    tq_kvsnap_report rep;
    if (f && tq_kvsnap_encode(ctx, v, &o.q, &o.in, &o.run, f, &rep))
        tq_test_fail(__FILE__, __LINE__, " encode: %s\n", tq_ctx_error(ctx));
    if (f) fclose(f);
    tq_kv_view_close(v);
    *out_len = bl;
    return (uint8_t *)buf;
}

TEST(kvsnap_encode_writes_the_bytes_encode_kvdump_writes)
{
    /* the rotated rows are found by the preparation both calls share (tq_kvsnap_prepare):
       before it, tq_kvsnap_encode coded them as stored */
    char dir[] = "/tmp/tq-prepare-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char state[64], out[64];
    snprintf(state, sizeof state, "%s/s.ggsn", dir);
    snprintf(out, sizeof out, "%s/s.tqkv", dir);
    size_t sl;
    uint8_t *s = make_state(1, &sl);
    write_file(state, s, sl);
    /* the tq the tests run beside (make test builds it first) */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "./tq encode-kvdump %s -o %s --head-dim 64 -q", state, out);
    CHECK_EQ(system(cmd), 0);
    size_t cli_n, api_n;
    uint8_t *cli = read_file(out, &cli_n);
    uint8_t *api = encode_as_opened(s, sl, &api_n);
    CHECK(cli_n > 0, "the CLI wrote %zu bytes", cli_n);
    CHECK_EQ_U64(cli_n, api_n);
    size_t first = cli_n;
    for (size_t i = 0; cli && api && i < cli_n && i < api_n && first == cli_n; i++)
        if (cli[i] != api[i]) first = i;
    CHECK_EQ_U64(first, cli_n); /* the first byte that differs: none */
    free(cli);
    free(api);
    free(s);
    unlink(state);
    unlink(out);
    rmdir(dir);
}

static tq_kv_view *decoded(tq_ctx *ctx, const uint8_t *snap, size_t n, const char *cache_type,
                           char **buf)
{
    tqkv_reader *r = NULL;
    tq_kv_view *v = NULL;
    size_t bl = 0;
    *buf = NULL;
    tq_kvsnap_decode_options d = {.threads = 2, .cache_type = cache_type};
    FILE *f = open_memstream(buf, &bl);
    if (tqkv_open_memory(ctx, snap, n, "x.tqkv", &r) || tq_kvsnap_decode(ctx, r, NULL, &d, f))
        tq_test_fail(__FILE__, __LINE__, " decode: %s\n", tq_ctx_error(ctx));
    fclose(f);
    tqkv_close(r);
    if (tq_kv_view_open_memory(ctx, (uint8_t *)*buf, bl, "back", TQ_PROFILE_DEFAULT, &v))
        tq_test_fail(__FILE__, __LINE__, " %s\n", tq_ctx_error(ctx));
    return v;
}

TEST(rotated_rows_decode_rotated_and_convert_to_f16_in_the_models_channels)
{
    tq_ctx *ctx = tq_test_ctx();
    size_t len, n;
    uint8_t *state = make_state(1, &len);
    uint8_t *snap = encode_found(state, len, &n);
    tqkv_reader *r = NULL;
    CHECK_OK(ctx, tqkv_open_memory(ctx, snap, n, "x.tqkv", &r));
    for (uint32_t i = 0; r && i < tqkv_meta_of(r)->n_tensors; i++)
        CHECK_EQ(tqkv_meta_of(r)->t[i].hadamard, 64);
    tqkv_close(r);
    char *same, *f16;
    tq_kv_view *back = decoded(ctx, snap, n, NULL, &same);
    uint32_t found = 0;
    tq_kvsnap_settings o = {.head_dim = HEAD};
    CHECK_OK(ctx, tq_kvsnap_find_rotation(ctx, back, &o, &found));
    CHECK_EQ(found, 2 * LAYERS); /* stored rotated again, as the source was */
    double off_same = off_model(ctx, back);
    tq_kv_view *conv = decoded(ctx, snap, n, "f16", &f16);
    CHECK_EQ(tq_kv_view_kv(conv, 0)->streams[0].k[0].type->block, 1);
    double off_f16 = off_model(ctx, conv); /* read as stored: no rotation is marked */
    /* 4-bit blocks: a tenth of the largest value; a rotated f16 row would be off by it */
    CHECK(off_same < 0.15, "q8_0 rows decoded %.4f of the largest value off", off_same);
    CHECK(off_f16 < 0.15, "f16 rows decoded %.4f of the largest value off", off_f16);
    tq_kv_view_close(back);
    tq_kv_view_close(conv);
    free(same);
    free(f16);
    free(snap);
    free(state);
}

static void block_3(uint8_t *meta, uint64_t ml)
{
    uint32_t n = 3;
    memcpy(meta + ml - 4, &n, 4);
}

static void block_2048(uint8_t *meta, uint64_t ml)
{
    uint32_t n = 2048;
    memcpy(meta + ml - 4, &n, 4);
}

static void block_wider_than_the_row(uint8_t *meta, uint64_t ml)
{
    uint32_t n = 256;
    memcpy(meta + ml - 4, &n, 4);
}

TEST(bad_rotation_blocks_are_refused)
{
    size_t len, n;
    uint8_t *state = make_state(1, &len);
    uint8_t *snap = encode_found(state, len, &n);
    uint64_t ml;
    memcpy(&ml, snap + 8, 8);
    uint32_t block;
    memcpy(&block, snap + 32 + ml - 4, 4);
    CHECK_EQ(block, 64); /* the field is where the edits expect it */
    tq_test_snapshot_refused_after(snap, n, block_3, "bad rotation block");
    tq_test_snapshot_refused_after(snap, n, block_2048, "bad rotation block");
    tq_test_snapshot_refused_after(snap, n, block_wider_than_the_row, "bad rotation block");
    free(snap);
    free(state);
}
