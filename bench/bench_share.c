/*
 * Benchmark of placement with every GPU sharing mode mixed (issue 8, "Must show" 6, first part):
 * 10,000 nodes of 8 H100-80GB GPUs, a quarter of the nodes in each mode: MIG (3g+2g+1g+1g),
 * time-slicing (4 slots), fractions (81920 MiB per GPU) and whole. Requests of the four kinds
 * (milli fractions and whole GPUs, memory, slots, MIG instances) arrive in a fixed random order
 * and are placed and bound one by one until 20,000 are placed; the time per decision (filter,
 * score, pick) is reported per kind, median and p99, and decisions per second overall. The
 * dynamic MIG planner's cost is not measured here (bench_migplan).
 *
 * FGD's target workload: with `--workload sample` (the default) it is built, as the live
 * scheduler builds it, from 4,096 requests of the same mix drawn from another seed (threshold
 * 100 %), so memory, slot and MIG types enter it and FGD scores memory and MIG requests by its
 * gradient over every mode; `--workload milli` is the one milli type (2 cores, 500 milli) the
 * bench used before, under which only milli types count.
 *
 * `--nvlink` joins every node's GPUs in NVLink pairs (0,1) (2,3) (4,5) (6,7) first, so whole-GPU
 * requests go through the topology pick (gs_topo_pick()).
 *
 * `--picks` measures instead the GPU pick alone (gs_node_pick_gpus()) of whole-GPU requests on
 * one 8-GPU node, for every set of free GPUs (256) and every size that fits: on a node without
 * NVLink, with DGX-like pairs, and with NVSwitch (every GPU a peer of every other); it reports
 * ns per pick over all of them and for the dearest case, 4 of 8 free.
 *
 *   bench_share [--policy bestfit|fgd|...] [--decisions N] [--workload sample|milli] [--nvlink]
 *   bench_share --picks
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/mig.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#include "bench_util.h"

#define NODES 10000
#define GPUS 8

static struct gs_cluster *make_cluster(void)
{
    struct gs_cluster *c;
    if (gs_cluster_new(&c))
        exit(1);
    const struct gs_mig_model *m = gs_mig_model_find("H100-80GB");
    struct gs_gpu_mode mig = {.sharing = GS_GPU_SHARE_MIG, .mig_count = 4};
    mig.mig[0] = (struct gs_mig_instance){(uint8_t)gs_mig_profile_find(m, "2g.20gb"), 0};
    mig.mig[1] = (struct gs_mig_instance){(uint8_t)gs_mig_profile_find(m, "1g.10gb"), 2};
    mig.mig[2] = (struct gs_mig_instance){(uint8_t)gs_mig_profile_find(m, "1g.10gb"), 3};
    mig.mig[3] = (struct gs_mig_instance){(uint8_t)gs_mig_profile_find(m, "3g.40gb"), 4};
    struct gs_gpu_mode ts = {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4};
    struct gs_gpu_mode frac = {.sharing = GS_GPU_SHARE_MILLI};
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_WHOLE};
    const struct gs_gpu_mode *per_quarter[4] = {&mig, &ts, &frac, &whole};
    char name[32];
    for (int i = 0; i < NODES; i++) {
        struct gs_gpu_mode modes[GPUS];
        for (int g = 0; g < GPUS; g++)
            modes[g] = *per_quarter[i % 4];
        (void)snprintf(name, sizeof(name), "node-%05d", i);
        struct gs_node_spec s = {.name = name,
                                 .cpu_milli = 128000,
                                 .mem_mib = 1048576,
                                 .pods_max = 256,
                                 .gpu_count = GPUS,
                                 .gpu_model = "NVIDIA-H100-80GB-HBM3",
                                 .gpu_mem_mib = 81920,
                                 .gpu_modes = modes};
        if (gs_cluster_add_node(c, &s, NULL))
            exit(1);
    }
    return c;
}

/* Joins each node's GPUs in pairs (0,1) (2,3) ... (--nvlink). */
static void link_pairs(struct gs_cluster *c)
{
    uint16_t p[GPUS];
    for (int g = 0; g < GPUS; g++)
        p[g] = (uint16_t)(1u << (g ^ 1));
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++)
        if (gs_cluster_set_nvlink(c, i, p, GPUS) != GS_OK)
            exit(1);
}

/* --picks: ns per gs_node_pick_gpus() of whole GPUs on 8-GPU nodes, by topology. */
static int bench_picks(void)
{
    enum { PATTERNS = 1 << GPUS, REPEAT = 200 };
    static const char *const topo_name[3] = {"no NVLink", "NVLink pairs", "NVSwitch"};
    struct gs_cluster *c;
    if (gs_cluster_new(&c))
        return 1;
    char name[32];
    for (int t = 0; t < 3; t++)
        for (int f = 0; f < PATTERNS; f++) {
            (void)snprintf(name, sizeof(name), "t%d-free%03d", t, f);
            struct gs_node_spec s = {.name = name,
                                     .cpu_milli = 128000,
                                     .mem_mib = 1048576,
                                     .pods_max = 256,
                                     .gpu_count = GPUS,
                                     .gpu_model = "H200"};
            uint32_t id;
            if (gs_cluster_add_node(c, &s, &id))
                return 1;
            uint16_t p[GPUS] = {0};
            for (int g = 0; g < GPUS && t > 0; g++)
                p[g] = t == 1 ? (uint16_t)(1u << (g ^ 1)) : (uint16_t)(0xFFu & ~(1u << g));
            if (gs_cluster_set_nvlink(c, id, p, GPUS))
                return 1;
            /* GPUs not in pattern f are held by a one-GPU pod each. */
            struct gs_pod_req one = GS_POD_REQ(0, 0, 1, GS_GPU_MILLI, GS_MODEL_ANY);
            for (int g = 0; g < GPUS; g++)
                if (!(f >> g & 1)) {
                    struct gs_placement pl = {.node = id, .num_gpu = 1, .gpu_milli = GS_GPU_MILLI};
                    pl.gpu_index[0] = (uint8_t)g;
                    if (gs_cluster_bind(c, &one, &pl))
                        return 1;
                }
        }
    printf("whole-GPU pick (gs_node_pick_gpus) on %d-GPU nodes: every free set, every size\n",
           GPUS);
    printf("%-14s %10s %14s %22s\n", "topology", "picks", "ns per pick", "ns, 4 of 8 free GPUs");
    uint32_t sink = 0;
    for (int t = 0; t < 3; t++) {
        double total_us = 0, worst_us = 0;
        uint64_t picks = 0, worst_picks = 0;
        for (int f = 1; f < PATTERNS; f++) {
            uint32_t node = (uint32_t)(t * PATTERNS + f);
            const struct gs_node *n = gs_cluster_node(c, node);
            for (uint32_t k = 1; k <= n->gpus_full_free; k++) {
                struct gs_pod_req r = GS_POD_REQ(0, 0, k, GS_GPU_MILLI, GS_MODEL_ANY);
                struct gs_placement pl;
                double t0 = now_us();
                for (int rep = 0; rep < REPEAT; rep++) {
                    if (gs_node_pick_gpus(n, node, &r, &pl) != GS_OK)
                        return 1;
                    sink += pl.gpu_index[0];
                }
                double dt = now_us() - t0;
                total_us += dt;
                picks += REPEAT;
                if (f == 0xFF && k == 4) {
                    worst_us += dt;
                    worst_picks += REPEAT;
                }
            }
        }
        printf("%-14s %10llu %14.1f %22.1f\n", topo_name[t], (unsigned long long)picks,
               total_us * 1e3 / (double)picks, worst_us * 1e3 / (double)worst_picks);
    }
    gs_cluster_free(c);
    return sink == UINT32_MAX; /* keeps the picks from being optimised away */
}

static struct gs_pod_req request(struct gs_rng *rng, int *kind)
{
    struct gs_pod_req r = {.cpu_milli = 2000, .mem_mib = 8192, .gpu_model_mask = GS_MODEL_ANY};
    *kind = (int)gs_rng_below(rng, 5);
    switch (*kind) {
    case 0: /* a milli fraction */
        r.num_gpu = 1;
        r.gpu_milli = 250 * (1 + (int32_t)gs_rng_below(rng, 3));
        break;
    case 1: /* whole GPUs */
        r.num_gpu = 1 + gs_rng_below(rng, 4);
        r.gpu_milli = 1000;
        break;
    case 2: /* memory */
        r.num_gpu = 1;
        r.gpu_mem_mib = 10240 * (1 + gs_rng_below(rng, 4));
        break;
    case 3: /* slots */
        r.timeslice_slots = (uint8_t)(1 + gs_rng_below(rng, 2));
        break;
    default: /* MIG instances */
        r.mig_count = (uint8_t)(1 + gs_rng_below(rng, 2));
        (void)snprintf(r.mig_profile, sizeof(r.mig_profile), "%s",
                       gs_rng_below(rng, 3) ? "1g.10gb" : "3g.40gb");
        break;
    }
    return r;
}

int main(int argc, char **argv)
{
    const char *policy = "bestfit", *workload = "sample";
    uint32_t decisions = 20000;
    bool nvlink = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
            policy = argv[++i];
        else if (strcmp(argv[i], "--decisions") == 0 && i + 1 < argc)
            decisions = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "sample") == 0 || strcmp(argv[i + 1], "milli") == 0))
            workload = argv[++i];
        else if (strcmp(argv[i], "--nvlink") == 0)
            nvlink = true;
        else if (strcmp(argv[i], "--picks") == 0)
            return bench_picks();
        else {
            fprintf(stderr, "usage: bench_share [--policy NAME] [--decisions N] "
                            "[--workload sample|milli] [--nvlink] | --picks\n");
            return 2;
        }
    }
    struct gs_cluster *c = make_cluster();
    if (nvlink)
        link_pairs(c);
    static char any[] = "";
    struct gs_task_type t = {2000, 500, 1, GS_MODEL_ANY, any, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1}, sampled = {0};
    if (strcmp(workload, "sample") == 0) {
        enum { SAMPLE = 4096 };
        static struct gs_pod_req reqs[SAMPLE];
        struct gs_rng wr;
        gs_rng_seed(&wr, 7);
        for (int i = 0; i < SAMPLE; i++) {
            int kind;
            reqs[i] = request(&wr, &kind);
        }
        if (gs_workload_build(reqs, NULL, SAMPLE, 100, &sampled) != GS_OK)
            return 1;
        w = sampled;
    }
    struct gs_sched_config cfg = {.policy = policy, .workload = &w};
    struct gs_sched *s;
    if (gs_sched_new(c, &cfg, &s)) {
        fprintf(stderr, "bench_share: unknown policy %s\n", policy);
        return 2;
    }
    struct gs_rng rng;
    gs_rng_seed(&rng, 42);
    static const char *const kinds[5] = {"milli fraction", "whole GPUs", "GPU memory",
                                         "time-slice slots", "MIG instances"};
    double *times[5];
    uint32_t n[5] = {0}, unplaced = 0;
    for (int k = 0; k < 5; k++)
        times[k] = malloc(sizeof(double) * decisions);
    double total = 0;
    for (uint32_t d = 0; d < decisions; d++) {
        int kind;
        struct gs_pod_req r = request(&rng, &kind);
        struct gs_placement pl;
        double t0 = now_us();
        int err = gs_sched_place(s, &r, &rng, &pl);
        double dt = now_us() - t0;
        total += dt;
        times[kind][n[kind]++] = dt;
        if (err == GS_OK) {
            if (gs_cluster_bind(c, &r, &pl) != GS_OK) {
                fprintf(stderr, "bench_share: a placement did not bind\n");
                return 1;
            }
        } else {
            unplaced++;
        }
    }
    printf("mixed sharing: %d nodes x %d GPUs (1/4 MIG, 1/4 time-sliced, 1/4 fractions, 1/4 "
           "whole), policy %s, workload %s (%u types)%s\n",
           NODES, GPUS, policy, workload, w.n_types, nvlink ? ", NVLink pairs" : "");
    printf("%-18s %8s %12s %12s\n", "kind", "n", "median us", "p99 us");
    for (int k = 0; k < 5; k++) {
        qsort(times[k], n[k], sizeof(double), cmp_double);
        printf("%-18s %8u %12.1f %12.1f\n", kinds[k], n[k], n[k] ? times[k][n[k] / 2] : 0.0,
               n[k] ? times[k][(size_t)(n[k] * 0.99)] : 0.0);
        free(times[k]);
    }
    printf("decisions: %u (%u unplaced), %.0f decisions/s\n", decisions, unplaced,
           decisions / (total / 1e6));
    gs_sched_free(s);
    gs_cluster_free(c);
    gs_workload_fini(&sampled);
    return 0;
}
