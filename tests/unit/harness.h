/* harness.h - a minimal test registry: TEST(name) { CHECK(...); SKIP(...); }
 * Each test is one line of output: "ok <name>", "FAIL <name>: ..." or
 * "SKIP: <name>: <reason>"; tests/run.sh counts them. */
#ifndef TQ_TEST_HARNESS_H
#define TQ_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

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

#define SKIP(...)                                                                  \
    do {                                                                           \
        tq_test_skip(__VA_ARGS__);                                                 \
        return;                                                                    \
    } while (0)

/* Helpers shared by the unit tests (tests/unit/util.c). */
const char *tq_test_shared_dir(void);                 /* ../shared or $TQ_SHARED */
void *tq_test_read_shared(const char *rel, size_t *len); /* NULL if absent */
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

#endif
