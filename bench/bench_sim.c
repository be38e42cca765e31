/*
 * Benchmark of one simulation run per policy on a trace: loads the trace once, then times
 * `--repeat` runs of each policy at one seed (default seed 42, tune 1.3) and reports the median
 * and minimum wall time and the pods placed per second (pod decisions / median time).
 *
 *   bench_sim NODES.csv PODS.csv [--repeat N] [--seed S] [--policy P]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/sched.h"
#include "gpusched/sim.h"

#include "bench_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: bench_sim NODES.csv PODS.csv [--repeat N] [--seed S] [--policy P]\n");
        return 2;
    }
    int repeat = 5;
    unsigned long long seed = 42;
    const char *only = NULL;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--repeat") == 0)
            repeat = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--policy") == 0)
            only = argv[i + 1];
    }
    if (repeat < 1 || repeat > 1000)
        repeat = 5;
    struct gs_sim_input *in;
    struct gs_diag d;
    memset(&d, 0, sizeof(d));
    double t0 = now_s();
    int err = gs_sim_input_load(argv[1], argv[2], NULL, &in, &d);
    if (err) {
        char msg[600];
        gs_diag_format(&d, msg, sizeof(msg));
        fprintf(stderr, "bench_sim: %s (%s)\n", msg, gs_strerror(err));
        return 2;
    }
    printf("trace %s: load %.1f ms; seed %llu, tune 1.3, %d repeats\n", gs_sim_input_name(in),
           (now_s() - t0) * 1e3, seed, repeat);
    printf("%-11s %10s %10s %8s %14s\n", "policy", "median s", "min s", "pods", "pods/s");
    double *t = calloc((size_t)repeat, sizeof(*t));
    struct gs_sim_result *res = malloc(sizeof(*res));
    if (!t || !res)
        return 1;
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++) {
        if (only && strcmp(only, gs_policy_name(p)) != 0)
            continue;
        struct gs_sim_run_config cfg = {p, seed, 1.3};
        for (int r = 0; r < repeat; r++) {
            double s = now_s();
            if (gs_sim_run(in, &cfg, res) != GS_OK)
                return 1;
            t[r] = now_s() - s;
        }
        qsort(t, (size_t)repeat, sizeof(*t), cmp_double);
        double med = t[repeat / 2];
        printf("%-11s %10.3f %10.3f %8u %14.0f\n", gs_policy_name(p), med, t[0], res->pods,
               res->pods / med);
    }
    free(t);
    free(res);
    gs_sim_input_free(in);
    return 0;
}
