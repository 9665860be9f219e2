/* util.c - data helpers for the unit tests. */
#include "harness.h"
#include "tq.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

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
