/* test_imatrix.c - the imatrix reader on the committed seeds (GGUF and
 * legacy forms: values, per-expert means, zero counts) and on every
 * truncation and hostile field of a legacy file. */
#include "harness.h"
#include "imatrix.h"

#include <stdint.h>
#include <string.h>

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n + 1);
    if (fread(p, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return p;
}

static tq_status open_mem(const uint8_t *p, size_t n, tq_imatrix **m, char *msg)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_status st = tq_imatrix_open_memory(ctx, p, n, "im", m);
    snprintf(msg, 512, "%s", st ? tq_ctx_error(ctx) : "");
    tq_ctx_free(ctx);
    return st;
}

TEST(imatrix_reads_both_forms)
{
    size_t n;
    char msg[512];
    tq_imatrix *m;
    uint8_t *g = slurp("tests/fuzz/seeds/fuzz_imatrix_read/imatrix.gguf", &n);
    CHECK(g && open_mem(g, n, &m, msg) == TQ_OK, "%s", msg);
    uint64_t k;
    const float *v = tq_imatrix_get(m, "blk.0.ffn_up.weight", &k);
    CHECK(tq_imatrix_is_gguf(m) && v && k == 32 && v[0] == 0.25f && v[31] == 8.0f, "in_sum2 / counts");
    v = tq_imatrix_get(m, "blk.0.ffn_gate_exps.weight", &k);
    CHECK(v && k == 64 && v[0] == 0.5f && v[32] == 0.0f, "per expert; a zero count gives 0");
    CHECK(!tq_imatrix_get(m, "blk.1.ffn_up.weight", &k));
    tq_imatrix_close(m);
    free(g);
    uint8_t *d = slurp("tests/fuzz/seeds/fuzz_imatrix_read/legacy.dat", &n);
    CHECK(d && open_mem(d, n, &m, msg) == TQ_OK, "%s", msg);
    v = tq_imatrix_get(m, "attn", &k);
    CHECK(!tq_imatrix_is_gguf(m));
    CHECK_EQ(tq_imatrix_n_entries(m), 2);
    CHECK(v);
    CHECK_EQ(k, 8);
    CHECK(v[7] == 1.0f);
    tq_imatrix_close(m);
    /* every truncation that cuts an entry is refused; cutting exactly the
     * optional dataset trailer is a valid file */
    size_t entries_end = n - 12; /* i32 last_chunk, i32 length, "wiki" */
    for (size_t cut = 0; cut < n; cut++) {
        tq_status st = open_mem(d, cut, &m, msg);
        if (cut == entries_end) {
            CHECK(st == TQ_OK, "the file without its trailer: %s", msg);
            tq_imatrix_close(m);
        } else {
            CHECK(st != TQ_OK && strstr(msg, "im: ") == msg, "cut at %zu of %zu accepted", cut, n);
        }
    }
    /* a NaN value, a negative one, a value count past the end */
    uint8_t *b = malloc(n);
    memcpy(b, d, n);
    float nanv = __builtin_nanf("");
    memcpy(b + 4 + 4 + 19 + 8, &nanv, 4);
    CHECK(open_mem(b, n, &m, msg) != TQ_OK && strstr(msg, "NaN"), "%s", msg);
    memcpy(b, d, n);
    float neg = -1.0f;
    memcpy(b + 4 + 4 + 19 + 8 + 4, &neg, 4);
    CHECK(open_mem(b, n, &m, msg) != TQ_OK && strstr(msg, "negative"), "%s", msg);
    memcpy(b, d, n);
    int32_t huge = 1 << 30;
    memcpy(b + 4 + 4 + 19 + 4, &huge, 4);
    CHECK(open_mem(b, n, &m, msg) != TQ_OK && strstr(msg, "do not fit"), "%s", msg);
    free(b);
    free(d);
}
