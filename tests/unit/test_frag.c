/*
 * Unit tests of the target workload (gs_workload_build) and node fragmentation (gs_frag_node),
 * and of the FGD score built on them.
 *
 * Expected values are worked out by hand from the specification (docs/fgd-policies.md
 * §3.6), with the arithmetic in a comment beside each one. The hand-built workloads use
 * probabilities that are exact binary fractions (1/2, 1/4, 1/8), so every bucket is an exact
 * double and can be compared with ==; only the sigmoid values were evaluated numerically
 * (python3 -c 'import math; print(100 / (1 + math.exp(-x)))').
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

static void assert_close(double got, double want)
{
    if (fabs(got - want) > 1e-12) {
        print_error("got %.17g, expected %.17g\n", got, want);
        fail();
    }
}

static struct gs_pod_req pod(int64_t cpu_milli, int32_t gpu_milli, uint32_t num_gpu)
{
    struct gs_pod_req r = GS_POD_REQ(cpu_milli, 1024, num_gpu, gpu_milli, GS_MODEL_ANY);
    return r;
}

static void expect_type(const struct gs_task_type *t, int64_t cpu, int32_t gpu_milli,
                        uint32_t num_gpu, const char *spec, uint32_t count, double p)
{
    assert_int_equal(t->cpu_milli, cpu);
    assert_int_equal(t->gpu_milli, gpu_milli);
    assert_int_equal(t->num_gpu, num_gpu);
    assert_string_equal(t->gpu_spec, spec);
    assert_int_equal(t->count, count);
    assert_close(t->p, p);
}

/* ---- gs_workload_build -------------------------------------------------------------------- */

static void test_cpu_nonzero_counts_zero_request_as_100(void **state)
{
    (void)state;
    assert_int_equal(gs_cpu_nonzero(0), 100);
    assert_int_equal(gs_cpu_nonzero(1), 1);
    assert_int_equal(gs_cpu_nonzero(4000), 4000);
}

/*
 * 20 pods, interleaved:
 *   A (4000m, 500 milli, 1 GPU, "")        x 8 (memory varies: not part of the key)
 *   B (8000m, 1000, 1, "")                 x 5
 *   C (2000m, CPU only)                    x 5
 *   E (4000m, 500, 1, "V100M32")           x 1 (A's shape, another spec: another type)
 *   D (0m -> 100m, 1000, 2, "")            x 1
 */
static void build_twenty(struct gs_workload *w, int threshold_pct)
{
    struct gs_pod_req reqs[20];
    const char *specs[20];
    uint32_t n = 0;
    for (int i = 0; i < 8; i++) {
        reqs[n] = pod(4000, 500, 1);
        reqs[n].mem_mib = 1000 * (i + 1);
        specs[n++] = "";
        if (i < 5) {
            reqs[n] = pod(8000, 1000, 1);
            specs[n++] = NULL; /* NULL means "" */
            reqs[n] = pod(2000, 0, 0);
            specs[n++] = "";
        }
    }
    reqs[n] = pod(4000, 500, 1);
    reqs[n].gpu_model_mask = 2;
    specs[n++] = "V100M32";
    reqs[n] = pod(0, 1000, 2);
    specs[n++] = "";
    assert_int_equal(n, 20);
    assert_int_equal(gs_workload_build(reqs, specs, n, threshold_pct, w), GS_OK);
}

static void test_workload_groups_by_key_and_keeps_type_that_crosses_95_percent(void **state)
{
    (void)state;
    struct gs_workload w;
    build_twenty(&w, 95);
    /* Count descending: A 8, then B 5 and C 5 (tie: key descending, cpu 8000 > 2000, so B
     * first), then E 1 and D 1 (tie: cpu 4000 > 100, so E first).
     * E = 95 x 20 / 100 = 19. Running count: 8, 13, 18 (< 19), 19 (>= 19: stop, E kept).
     * p = count / 19. */
    assert_int_equal(w.n_types, 4);
    assert_int_equal(w.n_pods, 20);
    assert_int_equal(w.n_pods_covered, 19);
    expect_type(&w.types[0], 4000, 500, 1, "", 8, 8.0 / 19);
    expect_type(&w.types[1], 8000, 1000, 1, "", 5, 5.0 / 19);
    expect_type(&w.types[2], 2000, 0, 0, "", 5, 5.0 / 19);
    expect_type(&w.types[3], 4000, 500, 1, "V100M32", 1, 1.0 / 19);
    assert_true(w.types[3].gpu_model_mask == 2); /* copied from the pod */
    assert_true(w.types[0].gpu_model_mask == GS_MODEL_ANY);
    gs_workload_fini(&w);
    assert_null(w.types);
    assert_int_equal(w.n_types, 0);
}

static void test_workload_threshold_100_keeps_every_type_with_p_count_over_n(void **state)
{
    (void)state;
    struct gs_workload w;
    build_twenty(&w, 100);
    /* E = 20: every type is needed; C = N, so p = count / 20. D's 0m CPU is keyed as 100m. */
    assert_int_equal(w.n_types, 5);
    assert_int_equal(w.n_pods_covered, 20);
    expect_type(&w.types[0], 4000, 500, 1, "", 8, 0.4);
    expect_type(&w.types[1], 8000, 1000, 1, "", 5, 0.25);
    expect_type(&w.types[2], 2000, 0, 0, "", 5, 0.25);
    expect_type(&w.types[3], 4000, 500, 1, "V100M32", 1, 0.05);
    expect_type(&w.types[4], 100, 1000, 2, "", 1, 0.05);
    double sum = 0;
    for (uint32_t t = 0; t < w.n_types; t++)
        sum += w.types[t].p;
    assert_close(sum, 1.0);
    gs_workload_fini(&w);
}

static void test_workload_count_ties_sort_by_key_descending(void **state)
{
    (void)state;
    /* Seven pods, six types of one pod each (the 0m and 100m CPU-only pods are one type). */
    struct gs_pod_req reqs[] = {
        pod(1000, 500, 1), pod(1000, 500, 1),  pod(1000, 500, 1), pod(1000, 1000, 1),
        pod(0, 0, 0),      pod(1000, 1000, 2), pod(100, 0, 0),
    };
    const char *specs[] = {"", "V100M16", "V100M32", "", "", "", ""};
    struct gs_workload w;
    assert_int_equal(gs_workload_build(reqs, specs, 7, 100, &w), GS_OK);
    /* Counts: (100, 0, 0) has 2, every other type 1. Then key descending: cpu 1000 before
     * 100 is irrelevant here because of the count; among the 1000m types gpu_milli 1000 before
     * 500; among (1000, 1000) num_gpu 2 before 1; among (1000, 500, 1) spec byte-wise
     * descending: "V100M32" > "V100M16" > "". N = 7, all kept, p = count / 7. */
    assert_int_equal(w.n_types, 6);
    expect_type(&w.types[0], 100, 0, 0, "", 2, 2.0 / 7);
    expect_type(&w.types[1], 1000, 1000, 2, "", 1, 1.0 / 7);
    expect_type(&w.types[2], 1000, 1000, 1, "", 1, 1.0 / 7);
    expect_type(&w.types[3], 1000, 500, 1, "V100M32", 1, 1.0 / 7);
    expect_type(&w.types[4], 1000, 500, 1, "V100M16", 1, 1.0 / 7);
    expect_type(&w.types[5], 1000, 500, 1, "", 1, 1.0 / 7);
    gs_workload_fini(&w);

    /* CPU breaks a count tie before gpu_milli: (3000m, CPU only) before (2000m, 1000, 1). */
    struct gs_pod_req r2[] = {pod(2000, 1000, 1), pod(3000, 0, 0)};
    assert_int_equal(gs_workload_build(r2, NULL, 2, 100, &w), GS_OK);
    assert_int_equal(w.n_types, 2);
    expect_type(&w.types[0], 3000, 0, 0, "", 1, 0.5);
    expect_type(&w.types[1], 2000, 1000, 1, "", 1, 0.5);
    gs_workload_fini(&w);
}

static void test_workload_threshold_stops_at_first_type_reaching_it(void **state)
{
    (void)state;
    /* N = 10: type X (1000m, 500, 1) x 6, Y (2000m, 1000, 1) x 3, Z (500m, CPU only) x 1. */
    struct gs_pod_req reqs[10];
    for (int i = 0; i < 6; i++)
        reqs[i] = pod(1000, 500, 1);
    for (int i = 6; i < 9; i++)
        reqs[i] = pod(2000, 1000, 1);
    reqs[9] = pod(500, 0, 0);
    struct gs_workload w;

    /* 95%: E = 9.5. Running 6, 9 (< 9.5), 10: all three kept, p = count / 10. */
    assert_int_equal(gs_workload_build(reqs, NULL, 10, 95, &w), GS_OK);
    assert_int_equal(w.n_types, 3);
    assert_int_equal(w.n_pods_covered, 10);
    expect_type(&w.types[0], 1000, 500, 1, "", 6, 0.6);
    expect_type(&w.types[1], 2000, 1000, 1, "", 3, 0.3);
    expect_type(&w.types[2], 500, 0, 0, "", 1, 0.1);
    gs_workload_fini(&w);

    /* 90%: E = 9. Running 6, 9 (>= 9: stop). p = 6/9, 3/9. */
    assert_int_equal(gs_workload_build(reqs, NULL, 10, 90, &w), GS_OK);
    assert_int_equal(w.n_types, 2);
    assert_int_equal(w.n_pods_covered, 9);
    expect_type(&w.types[0], 1000, 500, 1, "", 6, 6.0 / 9);
    expect_type(&w.types[1], 2000, 1000, 1, "", 3, 3.0 / 9);
    gs_workload_fini(&w);

    /* 60%: E = 6: the first type alone reaches it, p = 1. */
    assert_int_equal(gs_workload_build(reqs, NULL, 10, 60, &w), GS_OK);
    assert_int_equal(w.n_types, 1);
    assert_int_equal(w.n_pods_covered, 6);
    expect_type(&w.types[0], 1000, 500, 1, "", 6, 1.0);
    gs_workload_fini(&w);

    /* 61%: E = 6.1: 6 falls short, so Y is needed too: p = 6/9, 3/9. */
    assert_int_equal(gs_workload_build(reqs, NULL, 10, 61, &w), GS_OK);
    assert_int_equal(w.n_types, 2);
    assert_int_equal(w.n_pods_covered, 9);
    gs_workload_fini(&w);
}

static void test_workload_rejects_empty_list_and_bad_threshold(void **state)
{
    (void)state;
    struct gs_pod_req r = pod(1000, 500, 1);
    struct gs_workload w;
    assert_int_equal(gs_workload_build(&r, NULL, 0, 95, &w), GS_EINVAL);
    assert_null(w.types);
    assert_int_equal(w.n_types, 0);
    assert_int_equal(gs_workload_build(&r, NULL, 1, 0, &w), GS_EINVAL);
    assert_int_equal(gs_workload_build(&r, NULL, 1, 101, &w), GS_EINVAL);
    assert_null(w.types);
    gs_workload_fini(&w); /* empty: no-op */
    gs_workload_fini(NULL);
}

/* ---- gs_frag_node ------------------------------------------------------------------------- */

static char any_spec[] = "";
static char b_spec[] = "B";

/*
 * W, in list order:
 *   T0  CPU only, 2000m                         p 1/8
 *   T1  4000m, 500 milli x 1 GPU, any model      p 1/4
 *   T2  8000m, 1000 milli x 2 GPUs, any model    p 1/2
 *   T3  1000m, 1000 milli x 1 GPU, model id 1    p 1/8
 */
static struct gs_task_type w_types[4] = {
    {2000, 0, 0, GS_MODEL_ANY, any_spec, 1, 0.125},
    {4000, 500, 1, GS_MODEL_ANY, any_spec, 2, 0.25},
    {8000, 1000, 2, GS_MODEL_ANY, any_spec, 4, 0.5},
    {1000, 1000, 1, UINT64_C(1) << 1, b_spec, 1, 0.125},
};
static const struct gs_workload W = {w_types, 4, 8, 8};

static void expect_frag(const struct gs_frag *f, double q1, double q2, double q3, double q4,
                        double xl, double xr, double na, double total)
{
    assert_true(f->q1 == q1);
    assert_true(f->q2 == q2);
    assert_true(f->q3 == q3);
    assert_true(f->q4 == q4);
    assert_true(f->xl == xl);
    assert_true(f->xr == xr);
    assert_true(f->na == na);
    assert_true(f->total == total);
}

static void test_frag_fitting_types_count_only_gpus_too_small_for_them(void **state)
{
    (void)state;
    /* Model 0, 16000m free, GPUs 1000, 1000, 300, 0: idle 2300.
     * T0 CPU only, 16000 >= 2000: XL = 1/8 x 2300 = 287.5.
     * T1 fits (1000, 1000 >= 500): GPUs < 500 are 300 and 0: Q2 = 1/4 x 300 = 75,
     *    Q3 = 1/4 x 2000 = 500.
     * T2 fits (two GPUs >= 1000): Q2 += 1/2 x 300 = 150, Q3 += 1/2 x 2000 = 1000.
     * T3 wants model 1: NA = 1/8 x 2300 = 287.5.
     * F = Q1 + Q2 + Q4 + XL + XR + NA = 0 + 225 + 0 + 287.5 + 0 + 287.5 = 800 (Q3 1500 is
     * not counted). */
    const int32_t gpus[] = {1000, 1000, 300, 0};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 16000, gpus, 4, &f) == 800.0);
    expect_frag(&f, 0, 225, 1500, 0, 287.5, 0, 287.5, 800);
    /* The GPU order does not matter. */
    const int32_t shuffled[] = {300, 1000, 0, 1000};
    assert_true(gs_frag_node(&W, 0, 16000, shuffled, 4, NULL) == 800.0);
}

static void test_frag_cpu_short_and_gpu_short_go_to_q1_q4(void **state)
{
    (void)state;
    /* Model 0, 3000m free, GPUs 1000, 600, 0, 0: idle 1600.
     * T0 3000 >= 2000: XL = 1/8 x 1600 = 200.
     * T1 CPU short (3000 < 4000), GPU fits (1000, 600 >= 500): Q4 = 1/4 x 1600 = 400.
     * T2 CPU short, GPU short (one GPU >= 1000, needs 2): Q1 = 1/2 x 1600 = 800.
     * T3 NA = 1/8 x 1600 = 200.
     * F = 800 + 0 + 400 + 200 + 0 + 200 = 1600: all idle GPU is fragment. */
    const int32_t gpus[] = {1000, 600, 0, 0};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 3000, gpus, 4, &f) == 1600.0);
    expect_frag(&f, 800, 0, 0, 400, 200, 0, 200, 1600);
}

static void test_frag_cpu_only_type_that_does_not_fit_counts_as_xr(void **state)
{
    (void)state;
    /* Model 0, 1500m free, GPUs 1000, 1000, 400, 100: idle 2500.
     * T0 1500 < 2000: XR = 1/8 x 2500 = 312.5 (counted like XL).
     * T1 CPU short, GPU fits: Q4 = 1/4 x 2500 = 625.
     * T2 CPU short, GPU fits: Q4 += 1/2 x 2500 = 1250 -> 1875.
     * T3 NA = 312.5. F = 1875 + 312.5 + 312.5 = 2500. */
    const int32_t gpus[] = {1000, 1000, 400, 100};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 1500, gpus, 4, &f) == 2500.0);
    expect_frag(&f, 0, 0, 0, 1875, 0, 312.5, 312.5, 2500);
}

static void test_frag_gpu_short_with_cpu_fitting_counts_all_idle_as_q2(void **state)
{
    (void)state;
    /* Model 0, 16000m free, GPUs 900, 400: idle 1300.
     * T0 XL = 1/8 x 1300 = 162.5.
     * T1 fits (900 >= 500): small 400: Q2 = 1/4 x 400 = 100, Q3 = 1/4 x 900 = 225.
     * T2 GPU short (no GPU >= 1000), CPU fits: Q2 += 1/2 x 1300 = 650 -> 750.
     * T3 NA = 162.5. F = 750 + 162.5 + 162.5 = 1075. */
    const int32_t gpus[] = {900, 400};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 16000, gpus, 2, &f) == 1075.0);
    expect_frag(&f, 0, 750, 225, 0, 162.5, 0, 162.5, 1075);
}

static void test_frag_model_restricted_type_applies_on_its_model(void **state)
{
    (void)state;
    /* Model 1, 16000m free, GPUs 1000, 200: idle 1200.
     * T0 XL = 1/8 x 1200 = 150.
     * T1 fits: small 200: Q2 = 1/4 x 200 = 50, Q3 = 1/4 x 1000 = 250.
     * T2 GPU short: Q2 += 1/2 x 1200 = 600.
     * T3 allowed on model 1, fits (1000): small 200: Q2 += 1/8 x 200 = 25, Q3 += 125.
     * Q2 = 675, Q3 = 375. F = 675 + 150 = 825. */
    const int32_t gpus[] = {1000, 200};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 1, 16000, gpus, 2, &f) == 825.0);
    expect_frag(&f, 0, 675, 375, 0, 150, 0, 0, 825);
}

static void test_frag_node_without_idle_gpu_has_no_fragment(void **state)
{
    (void)state;
    /* Every bucket is p x (part of idle GPU); with idle 0 all are 0, even when CPU is short. */
    const int32_t full[] = {0, 0};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 0, full, 2, &f) == 0.0);
    expect_frag(&f, 0, 0, 0, 0, 0, 0, 0, 0);
    assert_true(gs_frag_node(&W, 0, 64000, NULL, 0, &f) == 0.0);
    expect_frag(&f, 0, 0, 0, 0, 0, 0, 0, 0);
}

/* ---- FGD score from F before and after ----------------------------------------------------- */

/*
 * Cluster for W: model "A" gets id 0, "B" id 1 (T3's mask is bit 1).
 *   x: model A, 20000m; a 2000m/700-milli pod on GPU2 and a 2000m 1-GPU pod on GPU3:
 *      16000m free, GPUs 1000, 1000, 300, 0 (the state of
 *      test_frag_fitting_types_count_only_gpus_too_small_for_them: F = 800).
 *   y: model B, 16000m, GPUs 1000, 1000 idle.
 */
static struct gs_cluster *fgd_cluster(void)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    struct gs_node_spec x = {"x", 20000, 65536, 110, 4, "A", 0};
    struct gs_node_spec y = {"y", 16000, 65536, 110, 2, "B", 0};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &x, &id), GS_OK);
    assert_int_equal(id, 0);
    assert_int_equal(gs_cluster_add_node(c, &y, &id), GS_OK);
    assert_int_equal(gs_cluster_model_find(c, "A"), 0);
    assert_int_equal(gs_cluster_model_find(c, "B"), 1);
    struct gs_pod_req share = pod(2000, 700, 1);
    struct gs_placement pl = {.node = 0, .num_gpu = 1, .gpu_milli = 700};
    pl.gpu_index[0] = 2;
    assert_int_equal(gs_cluster_bind(c, &share, &pl), GS_OK);
    struct gs_pod_req whole = pod(2000, 1000, 1);
    pl.gpu_index[0] = 3;
    pl.gpu_milli = 1000;
    assert_int_equal(gs_cluster_bind(c, &whole, &pl), GS_OK);
    return c;
}

static struct gs_sched *fgd_sched(struct gs_cluster *c, const uint32_t *rank)
{
    struct gs_sched_config cfg = {.policy = "fgd", .node_rank = rank, .workload = &W};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    return s;
}

static void expect_fgd(struct gs_sched *s, const struct gs_pod_req *r, int32_t x, int32_t y)
{
    struct gs_rng rng;
    gs_rng_seed(&rng, 3);
    int32_t sc[2];
    assert_int_equal(gs_sched_score_nodes(s, r, &rng, sc), 2);
    assert_int_equal(sc[0], x);
    assert_int_equal(sc[1], y);
}

static void test_sched_node_frag_matches_hand_computed_f(void **state)
{
    (void)state;
    struct gs_cluster *c = fgd_cluster();
    struct gs_sched *s = fgd_sched(c, NULL);
    struct gs_frag f;
    /* x: F = 800 (see above). */
    assert_true(gs_sched_node_frag(s, 0, &f) == 800.0);
    expect_frag(&f, 0, 225, 1500, 0, 287.5, 0, 287.5, 800);
    /* y (model B, 16000m, 1000, 1000; idle 2000): T0 XL = 250; T1, T2, T3 fit with nothing
     * small: Q3 = 1/4 x 2000 + 1/2 x 2000 + 1/8 x 2000 = 1750. F = 250. */
    assert_true(gs_sched_node_frag(s, 1, &f) == 250.0);
    expect_frag(&f, 0, 0, 1750, 0, 250, 0, 0, 250);
    assert_true(gs_sched_cluster_frag(s) == 1050.0); /* 800 + 250 */
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_frag_total_count_milli_weights_each_type_by_its_pod_count(void **state)
{
    (void)state;
    /* x of fgd_cluster (idle 2300: GPUs 1000, 1000, 300, 0), by type with its count:
     * T0 CPU-only, count 1: 1 x 2300; T1 fits, GPU2's 300 < 500 small, count 2: 2 x 300;
     * T2 fits, 300 small, count 4: 4 x 300; T3 model B only, count 1: 1 x 2300.
     * 2300 + 600 + 1200 + 2300 = 6400 = 8 covered pods x F 800. */
    const int32_t gpus[] = {1000, 1000, 300, 0};
    struct gs_frag f;
    assert_true(gs_frag_node(&W, 0, 16000, gpus, 4, &f) == 800.0);
    assert_int_equal(f.total_count_milli, 6400);
    /* y (model B, 16000m, 1000, 1000): only T0 counts, 1 x 2000 = 2000 = 8 x 250. */
    const int32_t idle[] = {1000, 1000};
    gs_frag_node(&W, 1, 16000, idle, 2, &f);
    assert_int_equal(f.total_count_milli, 2000);
}

/* The cluster figure from scratch: every node's exact integer F, summed, over the 8 pods. */
static double cluster_frag_afresh(const struct gs_cluster *c)
{
    int64_t sum = 0;
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++) {
        const struct gs_node *n = gs_cluster_node(c, i);
        if (!n || !n->present)
            continue;
        struct gs_frag f;
        gs_frag_node(&W, n->model_id, n->cpu_milli_free, n->gpu_free_desc, n->gpu_count, &f);
        sum += f.total_count_milli;
    }
    return (double)sum / 8.0;
}

static void test_cluster_frag_kept_incrementally_equals_the_sum_afresh(void **state)
{
    (void)state;
    /* 300 random binds and unbinds on 6 nodes, nodes removed and added, sometimes several
     * hundred changes between two reads (more than the refresh journal keeps): the figure kept
     * incrementally must equal, exactly, the integer sum over every node computed afresh. */
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    char names[32][8];
    for (uint32_t i = 0; i < 32; i++)
        (void)snprintf(names[i], sizeof(names[i]), "n%u", i);
    uint32_t added = 6;
    for (uint32_t i = 0; i < 6; i++) {
        struct gs_node_spec sp = {names[i], 32000, 65536, 110, i % 2 ? 8 : 4, i % 3 ? "A" : "B", 0};
        assert_int_equal(gs_cluster_add_node(c, &sp, NULL), GS_OK);
    }
    struct gs_sched *s = fgd_sched(c, NULL);
    struct gs_rng rng;
    gs_rng_seed(&rng, 11);
    struct {
        struct gs_pod_req r;
        struct gs_placement pl;
    } live[400];
    uint32_t n_live = 0, checks = 0;
    const int32_t sizes[] = {250, 500, 1000};
    for (uint32_t step = 0; step < 1500; step++) {
        uint32_t op = gs_rng_below(&rng, 10);
        if (op < 6 && n_live < 400) {
            int32_t m = sizes[gs_rng_below(&rng, 3)];
            struct gs_pod_req r = pod(1000 * (int64_t)(1 + gs_rng_below(&rng, 4)), m,
                                      m == 1000 ? 1 + gs_rng_below(&rng, 2) : 1);
            struct gs_placement pl;
            if (gs_sched_place(s, &r, &rng, &pl) == GS_OK && gs_cluster_bind(c, &r, &pl) == GS_OK) {
                live[n_live].r = r;
                live[n_live++].pl = pl;
            }
        } else if (op < 9 && n_live > 0) {
            uint32_t k = gs_rng_below(&rng, n_live);
            assert_int_equal(gs_cluster_unbind(c, &live[k].r, &live[k].pl), GS_OK);
            live[k] = live[--n_live];
        } else if (step % 7 == 0 && added < 32 && gs_cluster_nodes_present(c) < 8) {
            struct gs_node_spec sp = {names[added++], 16000, 65536, 110, 2, "A", 0};
            assert_int_equal(gs_cluster_add_node(c, &sp, NULL), GS_OK);
        } else if (step % 11 == 0) {
            /* Remove a node with its pods (as a deleted Node object). */
            uint32_t i = gs_rng_below(&rng, gs_cluster_node_count(c));
            if (gs_cluster_node(c, i)->present && gs_cluster_nodes_present(c) > 2) {
                for (uint32_t k = 0; k < n_live;) {
                    if (live[k].pl.node != i) {
                        k++;
                        continue;
                    }
                    assert_int_equal(gs_cluster_unbind(c, &live[k].r, &live[k].pl), GS_OK);
                    live[k] = live[--n_live];
                }
                assert_int_equal(gs_cluster_remove_node(c, i), GS_OK);
            }
        }
        /* Read after every step but those from 500 to 899: the read after them finds ~360
         * refreshes and 70,000 cordon changes (each a new generation, journalled), more than
         * the journal's 65,536, and must count every node afresh. */
        if (step == 700) {
            uint32_t i = 0;
            while (!gs_cluster_node(c, i)->present)
                i++;
            for (uint32_t k = 0; k < 70000; k++)
                assert_int_equal(gs_cluster_set_unschedulable(c, i, k % 2 == 0), GS_OK);
        }
        if (step < 500 || step >= 900) {
            assert_true(gs_sched_cluster_frag(s) == cluster_frag_afresh(c));
            checks++;
        }
    }
    assert_true(gs_sched_cluster_frag(s) == cluster_frag_afresh(c));
    assert_true(checks == 1100);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_score_is_truncated_sigmoid_of_fragment_drop(void **state)
{
    (void)state;
    struct gs_cluster *c = fgd_cluster();
    struct gs_sched *s = fgd_sched(c, NULL);
    /* Shared pod, 1000m and 300 milli. Candidate GPUs on x: 0, 1 (1000) and 2 (300).
     * x, GPU2 -> 15000m, (1000, 1000, 0, 0), idle 2000: XL 1/8 x 2000 = 250; T1, T2 fit with
     *   no GPU between 0 and their size: 0; NA 250. F = 500. dF = 800 - 500 = 300:
     *   100 x sigmoid(0.3) = 57.44 -> 57.
     * x, GPU0 (or GPU1) -> (700, 1000, 300, 0): XL 250; T1 fits, small 300: 75; T2 only one
     *   GPU >= 1000: Q2 1/2 x 2000 = 1000; NA 250. F = 1575. dF = -775: 31.54 -> 31.
     *   x scores 57, with GPU2.
     * y, either GPU -> 15000m, (700, 1000), idle 1700: XL 1/8 x 1700 = 212.5; T1 fits, nothing
     *   < 500: 0; T2 GPU short: 1/2 x 1700 = 850; T3 fits, small 700: 1/8 x 700 = 87.5.
     *   F = 850 + 87.5 + 212.5 = 1150. dF = 250 - 1150 = -900: 28.91 -> 28. */
    struct gs_pod_req r = pod(1000, 300, 1);
    expect_fgd(s, &r, 57, 28);
    struct gs_rng rng;
    gs_rng_seed(&rng, 3);
    struct gs_placement pl;
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
    assert_int_equal(pl.node, 0);
    assert_int_equal(pl.num_gpu, 1);
    assert_int_equal(pl.gpu_index[0], 2);

    /* Whole 1-GPU pod, 1000m: the first fully free GPU becomes 0.
     * x -> 15000m, (0, 1000, 300, 0), idle 1300: XL 162.5; T1 fits, small 300: 75; T2 short:
     *   650; NA 162.5. F = 1050. dF = -250: 43.78 -> 43.
     * y -> 15000m, (0, 1000), idle 1000: XL 125; T1 fits, 0; T2 short: 500; T3 fits, 0.
     *   F = 625. dF = 250 - 625 = -375: 40.73 -> 40. */
    r = pod(1000, 1000, 1);
    expect_fgd(s, &r, 43, 40);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_unchanged_fragment_scores_exactly_50(void **state)
{
    (void)state;
    struct gs_cluster *c = fgd_cluster();
    struct gs_sched *s = fgd_sched(c, NULL);
    /* CPU-only 1000m: 15000m left still fits every type on both nodes and idle GPU is the same,
     * so F after = F before, dF = 0 and the score is 100 x sigmoid(0) = 50. */
    struct gs_pod_req r = pod(1000, 0, 0);
    expect_fgd(s, &r, 50, 50);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_cpu_only_pod_loses_points_where_types_stop_fitting(void **state)
{
    (void)state;
    struct gs_cluster *c = fgd_cluster();
    struct gs_sched *s = fgd_sched(c, NULL);
    /* CPU-only 14500m leaves 1500m.
     * x (GPUs 1000, 1000, 300, 0; idle 2300): T0 1500 < 2000: XR 287.5; T1, T2 CPU short with
     *   GPU fitting: Q4 575 + 1150; NA 287.5. F = 2300. dF = 800 - 2300 = -1500: 18.24 -> 18.
     * y (1000, 1000; idle 2000): XR 250; T1, T2: Q4 500 + 1000; T3 (1000m) still fits: 0.
     *   F = 1750. dF = 250 - 1750 = -1500: 18. A tie, broken by rank. */
    struct gs_pod_req r = pod(14500, 0, 0);
    expect_fgd(s, &r, 18, 18);
    struct gs_rng rng;
    gs_rng_seed(&rng, 3);
    struct gs_placement pl;
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
    assert_int_equal(pl.node, 0);
    gs_sched_free(s);
    static const uint32_t rank[] = {1, 0};
    s = fgd_sched(c, rank);
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
    assert_int_equal(pl.node, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_nonzero_counts_zero_request_as_100),
        cmocka_unit_test(test_workload_groups_by_key_and_keeps_type_that_crosses_95_percent),
        cmocka_unit_test(test_workload_threshold_100_keeps_every_type_with_p_count_over_n),
        cmocka_unit_test(test_workload_count_ties_sort_by_key_descending),
        cmocka_unit_test(test_workload_threshold_stops_at_first_type_reaching_it),
        cmocka_unit_test(test_workload_rejects_empty_list_and_bad_threshold),
        cmocka_unit_test(test_frag_fitting_types_count_only_gpus_too_small_for_them),
        cmocka_unit_test(test_frag_cpu_short_and_gpu_short_go_to_q1_q4),
        cmocka_unit_test(test_frag_cpu_only_type_that_does_not_fit_counts_as_xr),
        cmocka_unit_test(test_frag_gpu_short_with_cpu_fitting_counts_all_idle_as_q2),
        cmocka_unit_test(test_frag_model_restricted_type_applies_on_its_model),
        cmocka_unit_test(test_frag_node_without_idle_gpu_has_no_fragment),
        cmocka_unit_test(test_sched_node_frag_matches_hand_computed_f),
        cmocka_unit_test(test_frag_total_count_milli_weights_each_type_by_its_pod_count),
        cmocka_unit_test(test_cluster_frag_kept_incrementally_equals_the_sum_afresh),
        cmocka_unit_test(test_fgd_score_is_truncated_sigmoid_of_fragment_drop),
        cmocka_unit_test(test_fgd_unchanged_fragment_scores_exactly_50),
        cmocka_unit_test(test_fgd_cpu_only_pod_loses_points_where_types_stop_fitting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
