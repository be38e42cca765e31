/*
 * Benchmark of the scheduler's /metrics snapshot and scrape (src/k8s/schedmetrics.c): the time
 * gs_schedmetrics_observe() takes after each cycle (every queue's info; one pass over the nodes
 * grouping them into pools, with FGD's gs_frag_node() of each GPU node) and the time and size of
 * one render. The world is kube-scheduler's extended-resource shape as bench/k8s_bench.py uses
 * it: N nodes of 8 GPUs in 4 pools (label nvidia.com/gpu.product), Q queues, and P one-GPU pods
 * placed by one best-fit cycle. The median and the slowest of the repeats are printed.
 *
 *   bench_schedmetrics [--nodes N] [--pods P] [--queues Q] [--repeat R]
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/kworld.h"
#include "gpusched/schedmetrics.h"

#include "bench_util.h"

static int apply(struct gs_kworld *w, json_t *o)
{
    char err[256] = "";
    int rc = o ? gs_kworld_apply(w, GS_KADDED, o, 0, err, sizeof(err)) : GS_ENOMEM;
    if (rc != GS_OK)
        (void)fprintf(stderr, "bench_schedmetrics: apply: %s %s\n", gs_strerror(rc), err);
    json_decref(o);
    return rc;
}

static int build(struct gs_kworld *w, int nodes, int pods, int queues)
{
    static const char *const products[] = {"A100-SXM4-80GB", "H100-80GB-HBM3", "L40S", "A10G"};
    for (int i = 0; i < nodes; i++) {
        char name[32];
        (void)snprintf(name, sizeof(name), "node-%05d", i);
        json_t *res = json_pack("{s:s,s:s,s:s,s:s}", "cpu", "64", "memory", "512Gi", "pods", "110",
                                "nvidia.com/gpu", "8");
        json_t *n = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:O,s:o}}", "apiVersion", "v1", "kind",
                              "Node", "metadata", "name", name, "labels", "nvidia.com/gpu.product",
                              products[i % 4], "status", "capacity", res, "allocatable", res);
        if (apply(w, n) != GS_OK)
            return 1;
    }
    for (int q = 0; q < queues; q++) {
        char name[32];
        (void)snprintf(name, sizeof(name), "queue-%03d", q);
        json_t *o = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:i,s:i}}}}", "apiVersion",
                              "scheduling.gpusched.io/v1alpha1", "kind", "Queue", "metadata",
                              "name", name, "spec", "resources", "gpu", "quota", 8, "limit", -1);
        if (apply(w, o) != GS_OK)
            return 1;
    }
    for (int i = 0; i < pods; i++) {
        char name[32], uid[40], q[32];
        (void)snprintf(name, sizeof(name), "pod-%06d", i);
        (void)snprintf(uid, sizeof(uid), "uid-%06d", i);
        (void)snprintf(q, sizeof(q), "queue-%03d", queues ? i % queues : 0);
        json_t *p =
            json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s}},s:{s:s,s:[{s:s,s:{s:{s:s,s:s,s:s}}}]}}",
                      "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                      "bench", "uid", uid, "labels", "gpusched.io/queue", q, "spec",
                      "schedulerName", "gpusched", "containers", "name", "c", "resources",
                      "requests", "cpu", "1", "memory", "4Gi", "nvidia.com/gpu", "1");
        if (apply(w, p) != GS_OK)
            return 1;
    }
    char err[256] = "";
    if (gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)) != GS_OK) {
        (void)fprintf(stderr, "bench_schedmetrics: cycle: %s\n", err);
        return 1;
    }
    return 0;
}

/* A whole decimal argument in [lo, hi]; -1 otherwise. */
static long arg_long(const char *v, long lo, long hi)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return end != v && *end == '\0' && x >= lo && x <= hi ? x : -1;
}

/* Times `repeat` observe + render pairs; prints the medians and maxima. */
static int measure(struct gs_kworld *w, struct gs_schedmetrics *m, double *t_obs, double *t_ren,
                   char *buf, size_t cap, int repeat, size_t *len)
{
    for (int r = 0; r < repeat; r++) {
        double t0 = now_us();
        if (gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w),
                                    gs_kworld_workload(w, NULL), NULL) != GS_OK)
            return 1;
        double t1 = now_us();
        *len = gs_schedmetrics_render(m, buf, cap);
        double t2 = now_us();
        if (*len >= cap)
            return 1;
        t_obs[r] = (t1 - t0) / 1e3;
        t_ren[r] = (t2 - t1) / 1e3;
    }
    qsort(t_obs, (size_t)repeat, sizeof(double), cmp_double);
    qsort(t_ren, (size_t)repeat, sizeof(double), cmp_double);
    return 0;
}

int main(int argc, char **argv)
{
    long nodes = 5000, pods = 10000, queues = 50, repeat = 21;
    for (int i = 1; i + 1 < argc; i += 2) {
        long *dst = strcmp(argv[i], "--nodes") == 0    ? &nodes
                    : strcmp(argv[i], "--pods") == 0   ? &pods
                    : strcmp(argv[i], "--queues") == 0 ? &queues
                    : strcmp(argv[i], "--repeat") == 0 ? &repeat
                                                       : NULL;
        long hi = dst == &pods ? 1000000 : 100000;
        if (dst)
            *dst = arg_long(argv[i + 1], dst == &pods ? 0 : 1, hi);
        else
            nodes = -1;
    }
    if (nodes < 0 || pods < 0 || queues < 0 || repeat < 0 || argc % 2 == 0) {
        (void)fprintf(stderr, "usage: bench_schedmetrics [--nodes 1..100000] [--pods 0..1000000] "
                              "[--queues 1..100000] [--repeat 1..100000]\n");
        return 2;
    }
    struct gs_kworld_config cfg = {.policy = "bestfit"};
    struct gs_kworld *w = NULL;
    struct gs_schedmetrics *m = NULL;
    double *t_obs = malloc(sizeof(double) * (size_t)repeat);
    double *t_ren = malloc(sizeof(double) * (size_t)repeat);
    size_t cap = (size_t)1 << 22, len = 0;
    char *buf = malloc(cap);
    int rc = 1;
    if (t_obs && t_ren && buf && gs_kworld_new(&cfg, &w) == GS_OK &&
        gs_schedmetrics_new(&m) == GS_OK && build(w, (int)nodes, (int)pods, (int)queues) == 0 &&
        measure(w, m, t_obs, t_ren, buf, cap, (int)repeat, &len) == 0) {
        (void)printf("schedmetrics: %ld nodes x 8 GPUs in 4 pools, %ld queues, %ld pods: observe "
                     "median %.3f ms max %.3f ms; render median %.3f ms max %.3f ms (%zu bytes); "
                     "%ld repeats\n",
                     nodes, queues, pods, t_obs[repeat / 2], t_obs[repeat - 1], t_ren[repeat / 2],
                     t_ren[repeat - 1], len, repeat);
        rc = 0;
    }
    free(buf);
    free(t_obs);
    free(t_ren);
    gs_schedmetrics_free(m);
    gs_kworld_free(w);
    return rc;
}
