/* bench_clock.c - the bench's one clock and one median (bench_measure.h). */
#include "bench_measure.h"

#include <stdlib.h>
#include <time.h>

double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, ascending);
    return t[n / 2];
}
