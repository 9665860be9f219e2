/* stats.c - sample moments for tensor statistics.  The loops are compiled
 * for AVX-512, AVX2 and baseline x86-64 and picked at load time (GCC
 * target_clones), since `tq inspect --stats` should run at memory speed. */
#include "tq_internal.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TQ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TQ_CLONES
#endif

void tq_moments_init(tq_moments *m)
{
    m->n = 0;
    m->s1 = m->s2 = m->s3 = m->s4 = 0.0;
    m->min = INFINITY;
    m->max = -INFINITY;
}

/* Sums run in float over short runs (twice the SIMD width of double) and are
 * carried in double between runs, which keeps ~1e-6 relative accuracy. */
#define RUN 512

/* The public calls are plain functions around static clones, so that libtq.so exports no
 * clone resolver beside tq.h's names. */
TQ_CLONES static void moments_add(tq_moments *m, const float *x, size_t n)
{
    double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    float mn = INFINITY, mx = -INFINITY;
    for (size_t i0 = 0; i0 < n; i0 += RUN) {
        size_t e = n - i0 < RUN ? n : i0 + RUN;
        float a1 = 0, a2 = 0, a3 = 0, a4 = 0;
#pragma omp simd reduction(+ : a1, a2, a3, a4) reduction(min : mn) reduction(max : mx)
        for (size_t i = i0; i < e; i++) {
            float v = x[i], v2 = v * v;
            a1 += v;
            a2 += v2;
            a3 += v2 * v;
            a4 += v2 * v2;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        s1 += a1;
        s2 += a2;
        s3 += a3;
        s4 += a4;
    }
    m->n += n;
    m->s1 += s1;
    m->s2 += s2;
    m->s3 += s3;
    m->s4 += s4;
    if (mn < m->min) m->min = mn;
    if (mx > m->max) m->max = mx;
}

void tq_moments_add(tq_moments *m, const float *x, size_t n) { moments_add(m, x, n); }

void tq_moments_merge(tq_moments *a, const tq_moments *b)
{
    a->n += b->n;
    a->s1 += b->s1;
    a->s2 += b->s2;
    a->s3 += b->s3;
    a->s4 += b->s4;
    if (b->min < a->min) a->min = b->min;
    if (b->max > a->max) a->max = b->max;
}

void tq_moments_summary(const tq_moments *m, double *mean, double *rms, double *kurtosis)
{
    double n = m->n ? (double)m->n : 1.0, mu = m->s1 / n;
    double var = m->s2 / n - mu * mu;
    double m4 = m->s4 / n - 4 * mu * m->s3 / n + 6 * mu * mu * m->s2 / n - 3 * mu * mu * mu * mu;
    if (mean) *mean = mu;
    if (rms) *rms = sqrt(m->s2 / n);
    if (kurtosis) *kurtosis = var > 0 ? m4 / (var * var) : 0.0;
}

TQ_CLONES static uint64_t count_beyond(const float *x, size_t n, float thr)
{
    uint64_t c = 0;
#pragma omp simd reduction(+ : c)
    for (size_t i = 0; i < n; i++) c += fabsf(x[i]) > thr;
    return c;
}

uint64_t tq_count_beyond(const float *x, size_t n, float thr)
{
    return count_beyond(x, n, thr);
}
