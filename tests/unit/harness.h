/* harness.h - a minimal test registry: TEST(name) { CHECK(...); SKIP(...); }
 * Each test is one line of output: "ok <name>", "FAIL <name>: ..." or
 * "SKIP: <name>: <reason>"; tests/run.sh counts them. */
#ifndef TQ_TEST_HARNESS_H
#define TQ_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tq_test {
    const char *name;
    void (*fn)(void);
    struct tq_test *next;
} tq_test;

void tq_test_register(tq_test *t);
int tq_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tq_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int tq_test_failed(void);

#define TEST(name)                                                                 \
    static void name(void);                                                        \
    __attribute__((constructor)) static void reg_##name(void)                      \
    {                                                                              \
        static tq_test t = {#name, name, NULL};                                    \
        tq_test_register(&t);                                                      \
    }                                                                              \
    static void name(void)

/* CHECK stops the test at the first failure so one bug is one line. */
#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            tq_test_fail(__FILE__, __LINE__, " " __VA_ARGS__);                      \
            fprintf(stdout, " [%s]\n", #cond);                                     \
            return;                                                                \
        }                                                                          \
    } while (0)

/* CHECK_EQ and friends print both sides; CHECK_OK the status and the
 * context's message. */
/* a and b as values of `type`, printed with fmt where they differ */
#define CHECK_SAME_AS(type, fmt, a, b)                                                             \
    do {                                                                                           \
        type a_ = (type)(a);                                                                       \
        type b_ = (type)(b);                                                                       \
        if (!(a_ == b_)) {                                                                         \
            tq_test_fail(__FILE__, __LINE__, " %s == %s: " fmt " != " fmt "\n", #a, #b, a_, b_);  \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define CHECK_EQ(a, b) CHECK_SAME_AS(long long, "%lld", a, b)
#define CHECK_EQ_U64(a, b) CHECK_SAME_AS(unsigned long long, "%llu", a, b)
/* Floating-point values equal to the bit (NaN never), both printed in full. */
#define CHECK_EQ_DBL(a, b) CHECK_SAME_AS(double, "%.17g", a, b)
#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a);                                                                      \
        const char *b_ = (b);                                                                      \
        if (!a_ || !b_ || strcmp(a_, b_)) {                                                        \
            tq_test_fail(__FILE__, __LINE__, " %s == %s: \"%s\" != \"%s\"\n", #a, #b,          \
                         a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                  \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (double)(a);                                                                   \
        double b_ = (double)(b);                                                                   \
        if (!(fabs(a_ - b_) <= (tol))) {                                                           \
            tq_test_fail(__FILE__, __LINE__, " %s ~ %s: %.9g vs %.9g (tolerance %g)\n", #a, #b,    \
                         a_, b_, (double)(tol));                                                   \
            return;                                                                                \
        }                                                                                          \
    } while (0)
/* st must be TQ_OK; else prints its name and ctx's message */
#define CHECK_OK(ctx, expr)                                                                        \
    do {                                                                                           \
        tq_status st_ = (expr);                                                                    \
        if (st_ != TQ_OK) {                                                                        \
            tq_test_fail(__FILE__, __LINE__, " %s: %s: %s\n", #expr, tq_status_name(st_),          \
                         tq_ctx_error(ctx));                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)
/* st must be want; else prints both names and ctx's message */
#define CHECK_STATUS(ctx, expr, want)                                                              \
    do {                                                                                           \
        tq_status st_ = (expr);                                                                    \
        if (st_ != (want)) {                                                                       \
            tq_test_fail(__FILE__, __LINE__, " %s: %s, expected %s: %s\n", #expr,                  \
                         tq_status_name(st_), tq_status_name(want), tq_ctx_error(ctx));            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define SKIP(...)                                                                  \
    do {                                                                           \
        tq_test_skip(__VA_ARGS__);                                                 \
        return;                                                                    \
    } while (0)

/* Helpers shared by the unit tests (tests/unit/util.c). */
/* One context for the calls a test makes without a context of its own
 * (lives until the runner exits; tests run one at a time). */
struct tq_ctx;
struct tq_ctx *tq_test_ctx(void);
const char *tq_test_shared_dir(void);
/* A model with stories260K's shapes and random weights written to path (0
 * or -1); tq_test_stories: ../shared's stories260K, else that stand-in
 * (*standin 1; NULL if it could not be written), for the tests that check
 * what follows from the shapes alone; tq_test_open_stories opens it (NULL:
 * the context says why). */
int tq_test_write_standin(const char *path);
const char *tq_test_stories(int *standin);                 /* ../shared or $TQ_SHARED */
struct tq_gguf *tq_test_open_stories(struct tq_ctx *ctx);
void *tq_test_read_shared(const char *rel, size_t *len); /* NULL if absent */
void *tq_test_read_file(const char *path, size_t *len);  /* the same, any path */
double tq_test_randn(unsigned long long *state);
float *tq_test_kv_data(size_t n_vectors, unsigned g, unsigned long long seed); /* realistic-ish K */

/* A growing byte buffer for building files field by field (little-endian
 * hosts, like the formats). */
#include <stdint.h>
typedef struct tq_test_buf {
    uint8_t *p;
    size_t n, cap;
} tq_test_buf;
void tq_test_put(tq_test_buf *b, const void *d, size_t n);
void tq_test_u32(tq_test_buf *b, uint32_t v);
void tq_test_u64(tq_test_buf *b, uint64_t v);

/* A llama.cpp sequence file (version 2, one stream, one sequence): cells
 * tokens token0.. at positions 0.., `layers` layers of K and V rows of
 * `width` values (f16 or f32; V transposed with vtrans), each value
 * value(user, layer, is_v, cell, element), asked in file order.  malloc'd. */
typedef struct tq_test_seq {
    uint32_t cells, layers, width;
    int f16, vtrans;
    int32_t token0;
    float (*value)(void *user, uint32_t layer, int is_v, uint32_t cell, uint32_t e);
    void *user;
} tq_test_seq;
uint8_t *tq_test_seq_state(const tq_test_seq *s, size_t *len);
/* The same with each cell at pos[cell] (value() asked by position) and n_tokens tokens: a
 * sliding window's cells in a ring buffer's order. */
uint8_t *tq_test_seq_state_at(const tq_test_seq *s, const int32_t *pos, uint32_t n_tokens,
                              size_t *len);
/* A snapshot ("x.tqkv" in messages) decoded in memory, with its base
 * snapshot or NULL, on 2 threads: malloc'd state bytes, or NULL with the
 * reason in err. */
struct tqkv_reader;
uint8_t *tq_test_snapshot_decode(const uint8_t *snap, size_t len, const struct tqkv_reader *base,
                                 size_t *out_len, char *err, size_t errlen);
#include "kv_plan.h"

/* What a test hands the snapshot pipeline in one: the request, its inputs and the run (kept
 * apart as kv_plan.h keeps them). */
typedef struct tq_test_enc {
    tq_kvsnap_request q;
    tq_kvsnap_inputs in;
    tq_kvsnap_run run;
} tq_test_enc;
#define TQ_TEST_ENC_INIT {.q = TQ_KVSNAP_REQUEST_INIT, .run = TQ_KVSNAP_RUN_INIT}
/* A state's snapshot made in memory with e: malloc'd bytes, or NULL with the reason in err. */
uint8_t *tq_test_snapshot_encode(const uint8_t *state, size_t len, const tq_test_enc *e,
                                 size_t *out_len, char *err, size_t errlen);
/* The base snapshot and the one appended to it (base: its reader) decoded: 0 when the first
 * base_cells cells of every K and V of every cache decode alike in both, else -1 with where
 * they differ in err. */
int tq_test_base_cells_alike(const uint8_t *base, size_t base_len, const uint8_t *app,
                             size_t app_len, const struct tqkv_reader *base_reader,
                             uint32_t base_cells, char *err, size_t errlen);
/* Squared error between two states' rows [r0, r1) over every K and V of cache `cache`'s first
 * stream, relative to the first's energy (-1, the test failed, where one does not read). */
double tq_test_rows_error(const uint8_t *a, size_t al, const uint8_t *b, size_t bl,
                          uint32_t cache, uint32_t r0, uint32_t r1);
/* The snapshot with its metadata changed by edit() and its checksums redone: decoding it must
 * fail with one line that says want. */
void tq_test_snapshot_refused_after(const uint8_t *snap, size_t n,
                                    void (*edit)(uint8_t *meta, uint64_t ml), const char *want);
/* A llama.cpp session file's head (version 9): its n_tokens tokens, first_token counting up, and
 * the architecture's name, as its stream layout begins; b is appended to. */
void tq_test_ggsn_head(tq_test_buf *b, uint32_t n_tokens, uint32_t first_token, const char *arch);
/* GGUF pieces: a string (u64 length, bytes) and a key with its uint32 value. */
void tq_test_gguf_str(tq_test_buf *b, const char *s);
void tq_test_gguf_u32(tq_test_buf *b, const char *key, uint32_t v);
/* A GGUF v3 header of no tensors and n_kv keys, the first general.architecture = arch (b is
 * emptied first); the caller adds the other n_kv - 1. */
void tq_test_gguf_head(tq_test_buf *b, uint64_t n_kv, const char *arch);
/* a value callback: the next tq_test_randn of the seed user points to */
float tq_test_randn_value(void *seed, uint32_t l, int is_v, uint32_t c, uint32_t e);

#endif
