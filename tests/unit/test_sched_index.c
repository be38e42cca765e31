/*
 * The placement index (src/core/sched_index.c) against the scan it replaces, under a seeded
 * random run of every policy: binds, releases, cordons, removed and added nodes (past the
 * index's first size), a new
 * workload, CPU-only pods on a cluster with and without GPU-less nodes, shared and whole-GPU
 * pods, memory and model limits. Before each placement the expected node is worked out from
 * gs_sched_score_nodes() (always the scan: every feasible node's score) by the engine's rule,
 * the highest score, the smallest rank among equal ones; gs_sched_place() (the index where it
 * applies) must choose that node and, for the random policy, make the same draws.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#define NODES_MAX 120
#define LIVE_MAX 4096

struct live {
    struct gs_pod_req r;
    struct gs_placement pl;
};

/* The shapes pods are drawn from: CPU-only, shared, whole GPUs, of two memory sizes. */
static struct gs_pod_req shape(struct gs_rng *rng)
{
    static const int64_t cpu[] = {0, 1000, 4000, 8000, 16000};
    static const int32_t share[] = {100, 250, 500, 700};
    static const uint32_t whole[] = {1, 2, 4, 8};
    int64_t c = cpu[gs_rng_below(rng, 5)];
    int64_t mem = gs_rng_below(rng, 4) == 0 ? 65536 : 2048;
    uint64_t mask = gs_rng_below(rng, 6) == 0 ? UINT64_C(1) : GS_MODEL_ANY;
    switch (gs_rng_below(rng, 3)) {
    case 0:
        return GS_POD_REQ(c, mem, 0, 0, GS_MODEL_ANY);
    case 1:
        return GS_POD_REQ(c, mem, 1, share[gs_rng_below(rng, 4)], mask);
    default:
        return GS_POD_REQ(c, mem, whole[gs_rng_below(rng, 4)], GS_GPU_MILLI, mask);
    }
}

static uint32_t add_node(struct gs_cluster *c, struct gs_rng *rng, uint32_t serial)
{
    static const uint32_t gpus[] = {0, 2, 4, 8};
    static const int64_t cpu[] = {32000, 64000, 96000};
    char name[32];
    (void)snprintf(name, sizeof(name), "n%u", serial);
    struct gs_node_spec sp = {name,
                              cpu[gs_rng_below(rng, 3)],
                              gs_rng_below(rng, 2) ? 262144 : 131072,
                              110,
                              gpus[gs_rng_below(rng, 4)],
                              gs_rng_below(rng, 2) ? "A" : "B",
                              0,
                              NULL};
    uint32_t id = UINT32_MAX;
    assert_int_equal(gs_cluster_add_node(c, &sp, &id), GS_OK);
    return id;
}

/* The scan's choice by the engine's rule; UINT32_MAX when no node is feasible. */
static uint32_t scan_choice(struct gs_sched *s, const struct gs_cluster *c,
                            const struct gs_pod_req *r, struct gs_rng *rng, const uint32_t *rank)
{
    int32_t scores[NODES_MAX * 2];
    int nf = gs_sched_score_nodes(s, r, rng, scores);
    assert_true(nf >= 0);
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++) {
        if (scores[i] < 0)
            continue; /* not feasible (every policy's scores here are >= 0) */
        if (best == UINT32_MAX || scores[i] > scores[best] ||
            (scores[i] == scores[best] && rank[i] < rank[best]))
            best = i;
    }
    return best;
}

static void run_policy(uint32_t policy, uint64_t seed)
{
    struct gs_rng rng;
    gs_rng_seed(&rng, seed);
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    uint32_t serial = 0;
    for (uint32_t i = 0; i < 24; i++)
        add_node(c, &rng, serial++);
    /* Two target workloads of 200 pods each, the second swapped in half way. */
    struct gs_pod_req reqs[200];
    struct gs_workload w[2];
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < 200; i++)
            reqs[i] = shape(&rng);
        assert_int_equal(gs_workload_build(reqs, NULL, 200, 95, &w[k]), GS_OK);
    }
    /* Ranks: a permutation of the first 24 nodes; later nodes rank after them by index. */
    uint32_t rank[NODES_MAX * 2];
    for (uint32_t i = 0; i < 24; i++)
        rank[i] = i;
    gs_rng_shuffle_u32(&rng, rank, 24);
    struct gs_sched_config cfg = {gs_policy_name(policy), rank, &w[0], 0};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    static struct live live[LIVE_MAX];
    uint32_t n_live = 0, placed = 0, refused = 0;
    for (uint32_t step = 0; step < 3000; step++) {
        if (step == 2000) /* a grown cluster: past the index's first 64 leaves */
            while (gs_cluster_node_count(c) < 80)
                add_node(c, &rng, serial++);
        uint32_t n = gs_cluster_node_count(c);
        for (uint32_t i = 24; i < n; i++)
            rank[i] = i; /* nodes added after creation rank by index */
        if (step == 1500)
            assert_int_equal(gs_sched_set_workload(s, &w[1]), GS_OK);
        uint32_t act = gs_rng_below(&rng, 100);
        if (act < 62 || n_live == 0) {
            struct gs_pod_req r = shape(&rng);
            struct gs_rng r_scan = rng, r_place = rng;
            uint32_t want = scan_choice(s, c, &r, &r_scan, rank);
            struct gs_placement pl;
            int err = gs_sched_place(s, &r, &r_place, &pl);
            if (want == UINT32_MAX) {
                assert_int_equal(err, GS_EUNSCHEDULABLE);
                refused++;
            } else {
                assert_int_equal(err, GS_OK);
                if (pl.node != want)
                    fail_msg("%s step %u: index chose node %u, the scan %u", cfg.policy, step,
                             pl.node, want);
                /* The draws: the same for a pod whose GPU pick draws nothing after them. */
                if (r.num_gpu != 1 || r.gpu_milli >= GS_GPU_MILLI)
                    assert_memory_equal(&r_scan, &r_place, sizeof(r_scan));
                assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
                if (n_live < LIVE_MAX)
                    live[n_live++] = (struct live){r, pl};
                placed++;
            }
            rng = r_place;
        } else if (act < 88) {
            uint32_t k = gs_rng_below(&rng, n_live);
            assert_int_equal(gs_cluster_unbind(c, &live[k].r, &live[k].pl), GS_OK);
            live[k] = live[--n_live];
        } else if (act < 94) {
            uint32_t i = gs_rng_below(&rng, n);
            if (gs_cluster_node(c, i)->present)
                assert_int_equal(gs_cluster_set_unschedulable(c, i, gs_rng_below(&rng, 2)), GS_OK);
        } else if (act < 97 && gs_cluster_nodes_present(c) > 4) {
            uint32_t i = gs_rng_below(&rng, n);
            if (!gs_cluster_node(c, i)->present)
                continue;
            for (uint32_t k = 0; k < n_live;) {
                if (live[k].pl.node != i) {
                    k++;
                    continue;
                }
                assert_int_equal(gs_cluster_unbind(c, &live[k].r, &live[k].pl), GS_OK);
                live[k] = live[--n_live];
            }
            assert_int_equal(gs_cluster_remove_node(c, i), GS_OK);
        } else if (n < NODES_MAX) {
            add_node(c, &rng, serial++);
        }
    }
    /* The run went through full and empty stretches, not only one of them, and the cluster
     * grew past the index's first 64 leaves (every class rebuilt at the new size). */
    assert_true(placed > 500);
    assert_true(refused > 10);
    assert_true(gs_cluster_node_count(c) > 64);
    gs_sched_free(s);
    gs_cluster_free(c);
    gs_workload_fini(&w[0]);
    gs_workload_fini(&w[1]);
}

static void test_index_places_as_the_scan_for_every_policy(void **state)
{
    (void)state;
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++)
        for (uint64_t seed = 1; seed <= 4; seed++)
            run_policy(p, seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_places_as_the_scan_for_every_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
