/*
 * Two helpers every benchmark in bench/ uses: a monotonic clock in microseconds and the qsort
 * comparison of doubles used to take medians and percentiles. Header-only; include after the
 * file's _POSIX_C_SOURCE (clock_gettime).
 */
#ifndef GS_BENCH_UTIL_H
#define GS_BENCH_UTIL_H

#include <time.h>

/** CLOCK_MONOTONIC in microseconds. */
static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/** qsort() order of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif /* GS_BENCH_UTIL_H */
