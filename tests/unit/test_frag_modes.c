/*
 * Unit tests of FGD's fragmentation measure beyond milli (gs_frag_node_gpus(), frag_modes.c)
 * and of FGD's choice for memory-fraction and MIG requests (policy_fgd_modes.c).
 *
 * Every expected value is worked out by hand beside it from docs/fgd-policies.md §3.7. The
 * workloads have two types of one pod each, so p = 1/2 and every bucket is an exact double. A
 * GPU's free memory as milli-GPU is the largest m with floor(81920 m / 1000) <= MiB free, i.e.
 * ((free + 1) x 1000 - 1) / 81920 in integers; a MIG instance of c compute slices on a 7-slice
 * GPU is floor(1000 c / 7) milli: 1g 142, 2g 285, 3g 428. Sigmoids were evaluated with
 * python3 -c 'import math; print(100 / (1 + math.exp(-x)))'.
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
#include "gpusched/mig.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#include "share_fixture.h"

#define GIB80 81920 /* an 80 GB GPU's memory, MiB */
#define GIB(x) ((int64_t)(x)*1024)

/* Binds a memory request on GPU `gpu` of node `node`. */
static void bind_mem_at(struct gs_cluster *c, uint32_t node, uint32_t gpu, int64_t mib,
                        int32_t milli)
{
    struct gs_pod_req r = fx_mem_req(1, mib, 0, milli);
    struct gs_placement pl = {.node = node, .num_gpu = 1, .gpu_milli = milli};
    pl.gpu_index[0] = (uint8_t)gpu;
    pl.gpu_mem_mib[0] = (int32_t)mib;
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
}

static double frag_of(const struct gs_workload *w, const struct gs_cluster *c, uint32_t node,
                      struct gs_frag *f)
{
    const struct gs_node *n = gs_cluster_node(c, node);
    return gs_frag_node_gpus(w, n->model_id, n->cpu_milli_free, n->gpus, n->gpu_count, f);
}

/* The workload "half 20 GiB, half 40 GiB" (no compute share unless given). */
static void mem_workload(struct gs_workload *w, int32_t milli20, int32_t milli40)
{
    struct gs_pod_req r[2] = {fx_mem_req(1, GIB(20), 0, milli20),
                              fx_mem_req(1, GIB(40), 0, milli40)};
    assert_int_equal(gs_workload_build(r, NULL, 2, 100, w), GS_OK);
    assert_int_equal(w->n_types, 2);
    assert_true(gs_workload_has_modes(w));
}

/* ---- the workload ---------------------------------------------------------------------------- */

static void test_workload_keys_memory_and_mig_types_apart(void **state)
{
    (void)state;
    /* Three 1g.5gb x1, two 20 GiB, one milli 500, one CPU-only pod. Before this layer a MIG
     * pod (num_gpu 0, gpu_milli 0) grouped with the CPU-only one. Counts 3, 2, 1, 1; the two
     * of count 1 by key descending: (cpu 1000, milli 500, 1 GPU) before (1000, 0, 0). */
    struct gs_pod_req r[7] = {
        fx_mig_req("1g.5gb", 1),
        fx_mem_req(1, GIB(20), 0, 0),
        fx_mig_req("1g.5gb", 1),
        GS_POD_REQ(1000, 1024, 1, 500, GS_MODEL_ANY),
        fx_mem_req(1, GIB(20), 0, 0),
        fx_mig_req("1g.5gb", 1),
        GS_POD_REQ(1000, 1024, 0, 0, GS_MODEL_ANY),
    };
    struct gs_workload w;
    assert_int_equal(gs_workload_build(r, NULL, 7, 100, &w), GS_OK);
    assert_int_equal(w.n_types, 4);
    assert_int_equal(w.types[0].kind, GS_REQ_MIG);
    assert_int_equal(w.types[0].count, 3);
    assert_int_equal(w.types[0].mig_count, 1);
    assert_string_equal(w.types[0].mig_profile, "1g.5gb");
    /* Resolved for every model of the table: on A100-40GB it is profile 0 (stored + 1). */
    for (uint32_t i = 0; i < gs_mig_model_count() && i < GS_FRAG_MIG_MODELS; i++) {
        const struct gs_mig_model *mm = gs_mig_model_at(i);
        int p = gs_mig_profile_find(mm, "1g.5gb");
        assert_int_equal(w.types[0].mig_profile_at[i], p < 0 ? -1 : p + 1);
        if (strcmp(mm->name, "A100-40GB") == 0)
            assert_int_equal(w.types[0].mig_profile_at[i], 1);
    }
    assert_int_equal(w.types[1].kind, GS_REQ_MEMORY);
    assert_int_equal(w.types[1].gpu_mem_mib, GIB(20));
    assert_int_equal(w.types[1].count, 2);
    assert_int_equal(w.types[2].kind, GS_REQ_MILLI);
    assert_int_equal(w.types[2].gpu_milli, 500);
    assert_int_equal(w.types[3].kind, GS_REQ_MILLI);
    assert_int_equal(w.types[3].num_gpu, 0);
    assert_int_equal(w.types[3].count, 1);
    gs_workload_fini(&w);

    /* A milli-only list has no modes. */
    struct gs_pod_req m[1] = {GS_POD_REQ(1000, 1024, 1, 500, GS_MODEL_ANY)};
    assert_int_equal(gs_workload_build(m, NULL, 1, 100, &w), GS_OK);
    assert_false(gs_workload_has_modes(&w));
    gs_workload_fini(&w);
}

/* ---- memory ------------------------------------------------------------------------------------
 */

static void test_memory_fragment_of_one_80gb_gpu(void **state)
{
    (void)state;
    struct gs_workload w;
    mem_workload(&w, 0, 0);
    /* Types by key descending: 40 GiB first, then 20 GiB. */
    assert_int_equal(w.types[0].gpu_mem_mib, GIB(40));
    assert_int_equal(w.types[1].gpu_mem_mib, GIB(20));
    struct {
        int64_t used_gib;
        double f;  /* F */
        double q3; /* usable */
    } cases[] = {
        /* 80 free (1000 milli): both fit, F 0, q3 = 1000. */
        {0, 0, 1000},
        /* 40 free (500): 40960 <= 40960, both fit: F 0, q3 500. */
        {40, 0, 500},
        /* 30 free, ((30720 + 1) x 1000 - 1) / 81920 = 375: the 20 GiB type fits (q3 375/2);
         * the 40 GiB type does not: all 375 to q2. F = 0.5 x 375 = 187.5. */
        {50, 187.5, 187.5},
        /* 10 free, 125: neither fits, F = 0.5 x 125 + 0.5 x 125 = 125. */
        {70, 125, 0},
        /* Full: nothing idle. */
        {80, 0, 0},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct gs_cluster *c = fx_new_cluster();
        uint32_t n = fx_add_node(c, "a", 1, "H100-80GB", GIB80, NULL);
        if (cases[k].used_gib)
            bind_mem_at(c, n, 0, GIB(cases[k].used_gib), 0);
        struct gs_frag f;
        double total = frag_of(&w, c, n, &f);
        assert_true(total == cases[k].f);
        assert_true(f.q3 == cases[k].q3);
        /* Fixed point: count 1 each, so the integer total is twice F. */
        assert_int_equal(f.total_count_milli, (int64_t)(2 * cases[k].f));
        gs_cluster_free(c);
    }
    gs_workload_fini(&w);
}

static void test_memory_fragment_counts_memory_compute_cannot_reach(void **state)
{
    (void)state;
    /* 50 % "20 GiB + 300 milli", 50 % "40 GiB, no compute". A pod holds 10 GiB and 800 milli:
     * 70 GiB free, 200 milli of compute. The first type's compute does not fit (800 + 300 >
     * 1000), so all the GPU's free memory is fragment to it: ((71680 + 1) x 1000 - 1) / 81920
     * = 875, p 1/2 -> 437.5 in q2. The 40 GiB type fits (q3 437.5). F = 437.5. */
    struct gs_workload w;
    mem_workload(&w, 300, 0);
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 1, "H100-80GB", GIB80, NULL);
    bind_mem_at(c, n, 0, GIB(10), 800);
    struct gs_frag f;
    assert_true(frag_of(&w, c, n, &f) == 437.5);
    assert_true(f.q2 == 437.5);
    assert_true(f.q3 == 437.5);
    /* The milli view of the same GPU is min(200 compute, 875 memory) = 200: the paper's
     * measure would see 200 milli and no memory at all. */
    assert_int_equal(gs_cluster_node(c, n)->gpus[0].gpu_milli_free, 200);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

/* ---- MIG ------------------------------------------------------------------------------------- */

static void test_mig_fragment_of_an_a100_40gb_layout(void **state)
{
    (void)state;
    const struct gs_mig_model *a100 = gs_mig_model_find("A100-40GB");
    uint8_t g1 = (uint8_t)gs_mig_profile_find(a100, "1g.5gb");
    uint8_t g2 = (uint8_t)gs_mig_profile_find(a100, "2g.10gb");
    uint8_t g3 = (uint8_t)gs_mig_profile_find(a100, "3g.20gb");
    /* 1g@0, 1g@1, 2g@2, 3g@4: memory slices 0, 1, 2-3, 4-7; compute 1 + 1 + 2 + 3 = 7. */
    struct gs_gpu_mode mode = {
        .sharing = GS_GPU_SHARE_MIG, .mig_count = 4, .mig = {{g1, 0}, {g1, 1}, {g2, 2}, {g3, 4}}};
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 1, "NVIDIA-A100-SXM4-40GB", 40960, &mode);
    struct gs_pod_req r[2] = {fx_mig_req("1g.5gb", 1), fx_mig_req("3g.20gb", 1)};
    struct gs_workload w;
    assert_int_equal(gs_workload_build(r, NULL, 2, 100, &w), GS_OK);
    struct gs_frag f;
    /* All free: idle 142 + 142 + 285 + 428 = 997. 1g type: usable 284, fragment 713; 3g type:
     * usable 428, fragment 569. F = 0.5 x 713 + 0.5 x 569 = 641; q3 = 142 + 214 = 356. */
    assert_true(frag_of(&w, c, n, &f) == 641);
    assert_true(f.q3 == 356);
    /* One 1g held (the lowest start, 1g@0): idle 855; 1g: fragment 855 - 142 = 713; 3g: 855 -
     * 428 = 427. F = 356.5 + 213.5 = 570. */
    struct gs_pod_req one = fx_mig_req("1g.5gb", 1);
    fx_place(c, n, &one);
    assert_true(frag_of(&w, c, n, &f) == 570);
    /* Both 1g held: idle 713; the 1g type fits no more: all 713 (q2); 3g: 713 - 428 = 285.
     * F = 356.5 + 142.5 = 499. */
    fx_place(c, n, &one);
    assert_true(frag_of(&w, c, n, &f) == 499);
    assert_true(f.q2 == 499);
    /* The 3g held too: only 2g.10gb is free, which no profile of the workload can use: the
     * whole 285 is fragment (each type counts it, p 1/2 each). */
    struct gs_pod_req three = fx_mig_req("3g.20gb", 1);
    fx_place(c, n, &three);
    assert_true(frag_of(&w, c, n, &f) == 285);
    assert_int_equal(f.total_count_milli, 570);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

/* ---- FGD's choice ------------------------------------------------------------------------------
 */

static int32_t place_with(struct gs_cluster *c, const char *policy, const struct gs_workload *w,
                          const struct gs_pod_req *r, struct gs_placement *pl)
{
    struct gs_sched_config cfg = {.policy = policy, .workload = w};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    struct gs_rng rng;
    gs_rng_seed(&rng, 42);
    int err = gs_sched_place(s, r, &rng, pl);
    gs_sched_free(s);
    return err;
}

static void test_fgd_memory_keeps_room_for_40gib_where_bestfit_does_not(void **state)
{
    (void)state;
    struct gs_workload w;
    mem_workload(&w, 0, 0);
    struct gs_pod_req r20 = fx_mem_req(1, GIB(20), 0, 0);
    /* One node, two 80 GB GPUs: GPU 0 has 60 GiB free, GPU 1 50 GiB. A 20 GiB request.
     * Best fit takes GPU 1 (30 GiB left, the least). FGD: on GPU 0 it leaves 40 and 50 free,
     * where both types fit: F 0. On GPU 1 it leaves 60 and 30: the 40 GiB type fits the node
     * (GPU 0) but not GPU 1, whose 375 milli are fragment to it: F = 0.5 x 375 = 187.5. FGD
     * takes GPU 0. */
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 2, "H100-80GB", GIB80, NULL);
    bind_mem_at(c, n, 0, GIB(20), 0);
    bind_mem_at(c, n, 1, GIB(30), 0);
    struct gs_placement pl;
    assert_int_equal(place_with(c, "bestfit", &w, &r20, &pl), GS_OK);
    assert_int_equal(pl.gpu_index[0], 1);
    assert_int_equal(place_with(c, "fgd", &w, &r20, &pl), GS_OK);
    assert_int_equal(pl.num_gpu, 1);
    assert_int_equal(pl.gpu_index[0], 0);
    assert_int_equal(pl.gpu_mem_mib[0], GIB(20));
    assert_int_equal(place_with(c, "fgdband", &w, &r20, &pl), GS_OK);
    assert_int_equal(pl.gpu_index[0], 0);
    assert_int_equal(gs_cluster_bind(c, &r20, &pl), GS_OK);
    gs_cluster_free(c);

    /* The same two GPUs as two nodes. Best fit scores the node left with the least memory:
     * b (51200 MiB free) 100, a 0. FGD: a, dF 0, trunc(100 sigmoid(0)) = 50; b, F 0 -> 187.5,
     * trunc(100 sigmoid(-0.1875)) = trunc(45.33) = 45. */
    c = fx_new_cluster();
    uint32_t a = fx_add_node(c, "a", 1, "H100-80GB", GIB80, NULL);
    uint32_t b = fx_add_node(c, "b", 1, "H100-80GB", GIB80, NULL);
    bind_mem_at(c, a, 0, GIB(20), 0);
    bind_mem_at(c, b, 0, GIB(30), 0);
    struct gs_sched_config cfg = {.policy = "fgd", .workload = &w};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    int32_t scores[2];
    struct gs_rng rng;
    gs_rng_seed(&rng, 1);
    assert_int_equal(gs_sched_score_nodes(s, &r20, &rng, scores), 2);
    assert_int_equal(scores[a], 50);
    assert_int_equal(scores[b], 45);
    gs_sched_free(s);
    assert_int_equal(place_with(c, "fgd", &w, &r20, &pl), GS_OK);
    assert_int_equal(pl.node, a);
    assert_int_equal(place_with(c, "bestfit", &w, &r20, &pl), GS_OK);
    assert_int_equal(pl.node, b);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

static void test_fgd_mig_leaves_no_lone_1g_where_bestfit_does(void **state)
{
    (void)state;
    const struct gs_mig_model *a100 = gs_mig_model_find("A100-40GB");
    uint8_t g1 = (uint8_t)gs_mig_profile_find(a100, "1g.5gb");
    struct gs_gpu_mode seven = {
        .sharing = GS_GPU_SHARE_MIG,
        .mig_count = 7,
        .mig = {{g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g1, 4}, {g1, 5}, {g1, 6}}};
    /* Workload: half 1g.5gb x1, half 1g.5gb x2. Node a has 2 of its seven 1g free, node b 3.
     * A 1g.5gb x1 request. Best fit: the fewest instances free, a. FGD: a before: idle 284,
     * both types fit, F 0; after: 142 left, the x2 type fits no more: F = 0.5 x 142 = 71,
     * score trunc(100 sigmoid(-0.071)) = trunc(48.23) = 48. b: 426 -> 284, both types still
     * fit: F 0 -> 0, score 50. FGD takes b. */
    struct gs_cluster *c = fx_new_cluster();
    uint32_t a = fx_add_node(c, "a", 1, "NVIDIA-A100-SXM4-40GB", 40960, &seven);
    uint32_t b = fx_add_node(c, "b", 1, "NVIDIA-A100-SXM4-40GB", 40960, &seven);
    struct gs_pod_req five = fx_mig_req("1g.5gb", 5), four = fx_mig_req("1g.5gb", 4);
    fx_place(c, a, &five);
    fx_place(c, b, &four);
    struct gs_pod_req r[2] = {fx_mig_req("1g.5gb", 1), fx_mig_req("1g.5gb", 2)};
    struct gs_workload w;
    assert_int_equal(gs_workload_build(r, NULL, 2, 100, &w), GS_OK);
    struct gs_pod_req one = fx_mig_req("1g.5gb", 1);
    struct gs_sched_config cfg = {.policy = "fgd", .workload = &w};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    int32_t scores[2];
    struct gs_rng rng;
    gs_rng_seed(&rng, 1);
    assert_int_equal(gs_sched_score_nodes(s, &one, &rng, scores), 2);
    assert_int_equal(scores[a], 48);
    assert_int_equal(scores[b], 50);
    gs_sched_free(s);
    struct gs_placement pl;
    assert_int_equal(place_with(c, "bestfit", &w, &one, &pl), GS_OK);
    assert_int_equal(pl.node, a);
    assert_int_equal(place_with(c, "fgd", &w, &one, &pl), GS_OK);
    assert_int_equal(pl.node, b);
    /* b holds 1g@0..3 (the pick's lowest starts); the next free is at start 4. */
    assert_int_equal(pl.mig_count, 1);
    assert_int_equal(pl.mig[0].gpu, 0);
    assert_int_equal(pl.mig[0].profile, g1);
    assert_int_equal(pl.mig[0].start, 4);
    assert_int_equal(gs_cluster_bind(c, &one, &pl), GS_OK);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

static void test_fgd_mig_two_instances_one_at_a_time(void **state)
{
    (void)state;
    const struct gs_mig_model *a100 = gs_mig_model_find("A100-40GB");
    uint8_t g1 = (uint8_t)gs_mig_profile_find(a100, "1g.5gb");
    uint8_t g3 = (uint8_t)gs_mig_profile_find(a100, "3g.20gb");
    /* One node, GPU 0: 1g@0..3 and 3g@4 (idle 4 x 142 + 428 = 996); GPU 1: seven 1g (994).
     * Workload half 1g.5gb x1, half 3g.20gb x1: F = 0.5 x 428 + 0.5 x (1990 - 428) = 995. A
     * 1g.5gb x2 request, taken one instance at a time. Every 1g taken lowers the idle by 142
     * and the 1g type still fits after each, so F falls by 0.5 x 142 = 71 per step on either
     * card (995 -> 924 -> 853) and the tie goes to the lowest index: GPU 0 twice, starts 0
     * and 1. */
    struct gs_gpu_mode modes[2] = {
        {.sharing = GS_GPU_SHARE_MIG,
         .mig_count = 5,
         .mig = {{g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g3, 4}}},
        {.sharing = GS_GPU_SHARE_MIG,
         .mig_count = 7,
         .mig = {{g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g1, 4}, {g1, 5}, {g1, 6}}},
    };
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 2, "NVIDIA-A100-SXM4-40GB", 40960, modes);
    struct gs_pod_req r[2] = {fx_mig_req("1g.5gb", 1), fx_mig_req("3g.20gb", 1)};
    struct gs_workload w;
    assert_int_equal(gs_workload_build(r, NULL, 2, 100, &w), GS_OK);
    struct gs_pod_req two = fx_mig_req("1g.5gb", 2);
    struct gs_placement pl;
    assert_int_equal(place_with(c, "fgd", &w, &two, &pl), GS_OK);
    assert_int_equal(pl.node, n);
    assert_int_equal(pl.mig_count, 2);
    assert_int_equal(pl.mig[0].gpu, 0);
    assert_int_equal(pl.mig[0].start, 0);
    assert_int_equal(pl.mig[1].gpu, 0);
    assert_int_equal(pl.mig[1].start, 1);
    assert_int_equal(gs_cluster_bind(c, &two, &pl), GS_OK);
    /* Within one node F depends only on the multiset of free instances (shares are per
     * profile and the fit test is per node), so with fixed layouts FGD's MIG choice is between
     * nodes; inside a node the tie keeps the pick's order. The 3g@4 was not touched: F now
     * 924 - 71 = 853 (idle 1706; 1g type 1278 usable, 428 fragment; 3g type 1278). */
    assert_true(frag_of(&w, c, n, NULL) == 853);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

/* ---- the milli path is unchanged ---------------------------------------------------------------
 */

static void test_milli_workload_same_buckets_in_both_forms(void **state)
{
    (void)state;
    /* Random fractions nodes (memory known or not) with random milli pods bound, random milli
     * workloads: the per-GPU form must give bit-for-bit the buckets of the free-milli form. */
    struct gs_rng rng;
    gs_rng_seed(&rng, 8);
    static const int32_t millis[] = {100, 250, 300, 500, 700, 1000};
    for (int round = 0; round < 300; round++) {
        struct gs_pod_req reqs[40];
        uint32_t np = 1 + gs_rng_below(&rng, 40);
        for (uint32_t i = 0; i < np; i++) {
            uint32_t kind = gs_rng_below(&rng, 8);
            int64_t cpu = 1000 * (int64_t)gs_rng_below(&rng, 9);
            if (kind == 0)
                reqs[i] = GS_POD_REQ(cpu, 1024, 0, 0, GS_MODEL_ANY);
            else if (kind < 5)
                reqs[i] = GS_POD_REQ(cpu, 1024, 1, millis[gs_rng_below(&rng, 5)], GS_MODEL_ANY);
            else
                reqs[i] = GS_POD_REQ(cpu, 1024, 1 + gs_rng_below(&rng, 4), 1000,
                                     gs_rng_below(&rng, 3) ? GS_MODEL_ANY : 2);
        }
        struct gs_workload w;
        assert_int_equal(gs_workload_build(reqs, NULL, np, 95, &w), GS_OK);
        assert_false(gs_workload_has_modes(&w));
        struct gs_cluster *c = fx_new_cluster();
        uint32_t gpus = 1 + gs_rng_below(&rng, 8);
        uint32_t n =
            fx_add_node(c, "n", gpus, round % 2 ? "V100" : "A100", round % 3 ? GIB80 : 0, NULL);
        for (int k = 0; k < 12; k++) {
            struct gs_pod_req p = GS_POD_REQ(1000 * (int64_t)gs_rng_below(&rng, 8), 1024, 1,
                                             millis[gs_rng_below(&rng, 6)], GS_MODEL_ANY);
            struct gs_placement pl;
            if (gs_node_pick_gpus(gs_cluster_node(c, n), n, &p, &pl) == GS_OK)
                assert_int_equal(gs_cluster_bind(c, &p, &pl), GS_OK);
        }
        const struct gs_node *nd = gs_cluster_node(c, n);
        struct gs_frag f1, f2;
        double t1 = gs_frag_node(&w, nd->model_id, nd->cpu_milli_free, nd->gpu_free_desc,
                                 nd->gpu_count, &f1);
        double t2 =
            gs_frag_node_gpus(&w, nd->model_id, nd->cpu_milli_free, nd->gpus, nd->gpu_count, &f2);
        assert_memory_equal(&t1, &t2, sizeof(t1));
        assert_memory_equal(&f1, &f2, sizeof(f1));
        gs_cluster_free(c);
        gs_workload_fini(&w);
    }
}

static void test_free_milli_form_counts_other_kinds_as_fragment(void **state)
{
    (void)state;
    /* gs_frag_node() has no memory to judge a 20 GiB type by: it counts all idle (q2). One
     * free GPU, workload half 20 GiB, half 40 GiB: F = 1000 in the free-milli form, 0 in the
     * per-GPU one. */
    struct gs_workload w;
    mem_workload(&w, 0, 0);
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 1, "H100-80GB", GIB80, NULL);
    const struct gs_node *nd = gs_cluster_node(c, n);
    struct gs_frag f;
    assert_true(gs_frag_node(&w, nd->model_id, nd->cpu_milli_free, nd->gpu_free_desc, 1, &f) ==
                1000);
    assert_true(f.q2 == 1000);
    assert_true(frag_of(&w, c, n, NULL) == 0);
    gs_cluster_free(c);
    gs_workload_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workload_keys_memory_and_mig_types_apart),
        cmocka_unit_test(test_memory_fragment_of_one_80gb_gpu),
        cmocka_unit_test(test_memory_fragment_counts_memory_compute_cannot_reach),
        cmocka_unit_test(test_mig_fragment_of_an_a100_40gb_layout),
        cmocka_unit_test(test_fgd_memory_keeps_room_for_40gib_where_bestfit_does_not),
        cmocka_unit_test(test_fgd_mig_leaves_no_lone_1g_where_bestfit_does),
        cmocka_unit_test(test_fgd_mig_two_instances_one_at_a_time),
        cmocka_unit_test(test_milli_workload_same_buckets_in_both_forms),
        cmocka_unit_test(test_free_milli_form_counts_other_kinds_as_fragment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
