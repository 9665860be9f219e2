/* test_stats.c - moments against a direct double-precision computation. */
#include "harness.h"
#include "tq_internal.h"

#include <math.h>

TEST(stats_moments_and_beyond)
{
    size_t n = 100003;
    float *x = malloc(n * 4);
    unsigned long long st = 3;
    for (size_t i = 0; i < n; i++) x[i] = (float)(tq_test_randn(&st) * (i % 1000 == 0 ? 9 : 1) + 0.25);
    tq_moments m, a, b;
    tq_moments_init(&m);
    tq_moments_add(&m, x, n);
    tq_moments_init(&a);
    tq_moments_init(&b);
    tq_moments_add(&a, x, 5000);
    tq_moments_add(&b, x + 5000, n - 5000);
    tq_moments_merge(&a, &b);
    double s1 = 0, s2 = 0, mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) s1 += x[i], s2 += (double)x[i] * x[i], mn = fmin(mn, x[i]), mx = fmax(mx, x[i]);
    double mu = s1 / n, var = s2 / n - mu * mu, m4 = 0;
    for (size_t i = 0; i < n; i++) m4 += pow(x[i] - mu, 4);
    double kurt = m4 / n / (var * var), mean, rms, k, k2;
    tq_moments_summary(&m, &mean, &rms, &k);
    tq_moments_summary(&a, NULL, NULL, &k2);
    CHECK_EQ(m.n, n);
    CHECK(m.min == mn);
    CHECK(m.max == mx);
    /* float runs carried in double: about 1e-6 relative (lib/stats.c) */
    CHECK(fabs(mean - mu) < 2e-6 * sqrt(s2 / n) && fabs(rms - sqrt(s2 / n)) < 2e-6 * sqrt(s2 / n), "mean %.9g vs %.9g, rms %.9g",
          mean, mu, rms);
    CHECK(fabs(k - kurt) < 1e-5 * kurt && fabs(k2 - kurt) < 1e-5 * kurt, "kurtosis %.9g vs %.9g", k, kurt);
    CHECK(k > 3.5, "outliers make the tails heavy: %g", k);
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) c += fabsf(x[i]) > 3.0f;
    CHECK(tq_count_beyond(x, n, 3.0f) == c);
    tq_moments z;
    tq_moments_init(&z);
    tq_moments_add(&z, x, 0);
    tq_moments_summary(&z, &mean, &rms, &k);
    CHECK(k == 0.0 && z.n == 0, "empty sample");
    free(x);
}
