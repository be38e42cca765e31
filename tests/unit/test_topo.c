/*
 * Unit tests of the whole-GPU topology choice (include/gpusched/topo.h, gs_topo_pick()) and of
 * its use by the cluster (gs_cluster_set_nvlink(), gs_node_pick_gpus(), the policies' whole-GPU
 * pick). Every expected set is worked out by hand beside it from the score in topo.h: NVLink
 * pairs inside the set, then most GPUs on one NUMA node, then fewest links cut to available GPUs
 * left outside, then the lowest indices. Masks are written as hex: bit g is GPU g.
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
#include "gpusched/topo.h"

#define BIT(g) (UINT64_C(1) << (g))

/* n GPUs joined in pairs (0,1), (2,3), ...: a DGX-like board when n is 8. */
static void pairs(uint64_t *m, uint32_t n)
{
    for (uint32_t g = 0; g < n; g++)
        m[g] = BIT(g ^ 1u);
}

static uint64_t pick(uint32_t n, const uint64_t *m, const int32_t *numa, uint64_t avail,
                     uint64_t must, uint32_t want)
{
    uint64_t out = UINT64_MAX;
    assert_int_equal(gs_topo_pick(n, m, numa, avail, must, want, &out), GS_OK);
    return out;
}

static void test_topo_two_gpus_on_an_empty_dgx_take_pair_0_1(void **state)
{
    (void)state;
    uint64_t m[8];
    pairs(m, 8);
    /* Each pair {2k,2k+1} holds one link and cuts none (its GPUs have no other peer); every
     * other pair of GPUs holds none. Four sets tie at (1 link, cut 0): the lowest, {0,1}. */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0, 2), 0x03);
    /* Four GPUs: two pairs hold 2 links, cut 0; {0,1,2,3} is the first of them. */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0, 4), 0x0F);
}

static void test_topo_one_gpu_keeps_pairs_whole(void **state)
{
    (void)state;
    uint64_t m[8];
    pairs(m, 8);
    /* GPU 0 used, 1..7 free. One GPU holds no link; GPU 1 cuts none (its partner 0 is not
     * available), GPUs 2..7 cut one each (their partner is free): GPU 1. */
    assert_int_equal(pick(8, m, NULL, 0xFE, 0, 1), 0x02);
    /* GPUs 0 and 2 used: GPUs 1 and 3 cut none; the lower, GPU 1. */
    assert_int_equal(pick(8, m, NULL, 0xFA, 0, 1), 0x02);
    /* Nothing used: every GPU cuts one; the lowest, GPU 0. */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0, 1), 0x01);
}

static void test_topo_four_of_2_3_5_6_7_take_the_two_pairs(void **state)
{
    (void)state;
    uint64_t m[8];
    pairs(m, 8);
    /* Available {2,3,5,6,7}, 4 wanted: {2,3,6,7} holds 2-3 and 6-7 (2 links); every other
     * four of them leaves out 2, 3, 6 or 7 and so breaks one of the two pairs (1 link). */
    assert_int_equal(pick(8, m, NULL, 0xEC, 0, 4), 0xCC);
}

static void test_topo_counts_links_before_numa_and_numa_before_cut(void **state)
{
    (void)state;
    /* Issue 9's board: NUMA nodes {0-3} {4-7}; NVLink 0-4, 0-5, 2-6, 3-4, 3-7. Available
     * {2,3,5,6,7}, 4 wanted: {2,3,6,7} holds 2-6 and 3-7 (2 links); {2,5,6,7} holds 2-6 only,
     * {3,5,6,7} 3-7 only, {2,3,5,6} 2-6 only, {2,3,5,7} 3-7 only: {2,3,6,7}. */
    uint64_t m[8] = {0};
    const uint32_t links[][2] = {{0, 4}, {0, 5}, {2, 6}, {3, 4}, {3, 7}};
    for (size_t k = 0; k < 5; k++)
        m[links[k][0]] |= BIT(links[k][1]); /* one end only: the pick counts it for both */
    const int32_t numa[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    assert_int_equal(pick(8, m, numa, 0xEC, 0, 4), 0xCC);
    /* No links, NUMA {0,1} {2,3} ...: available {1,2,3}, 2 wanted: {1,2} and {1,3} have one
     * GPU per node, {2,3} two on node 1: {2,3} although {1,2} has the lower indices. */
    const uint64_t none[8] = {0};
    const int32_t numa2[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    assert_int_equal(pick(8, none, numa2, 0x0E, 0, 2), 0x0C);
    /* Pairs (0,1) (2,3) ... and NUMA {0-3} {4-7}; GPUs 1 and 5 used. A 2-GPU request: {2,3}
     * and {6,7} hold a link each, on one node each, and cut none: the lower, {2,3}. */
    uint64_t p[8];
    pairs(p, 8);
    const int32_t numa3[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    assert_int_equal(pick(8, p, numa3, 0xDD, 0, 2), 0x0C);
}

static void test_topo_must_include_is_scored_not_returned(void **state)
{
    (void)state;
    uint64_t m[8];
    pairs(m, 8);
    /* Must GPU 6, one more: 7 makes the pair 6-7 (1 link); any other makes none: GPU 7. */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0x40, 1), 0x80);
    /* Must 6 (also offered), three more: {6,7} + a pair (2 links, cut 0), lowest {0,1}. */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0x40, 3), 0x83);
}

static void test_topo_without_links_takes_the_lowest(void **state)
{
    (void)state;
    /* No link, NUMA unknown: every set scores (0 links, all on "one" node, cut 0): the lowest
     * indices, the pick of a node without topology. */
    const uint64_t none[8] = {0};
    assert_int_equal(pick(8, none, NULL, 0xFF, 0, 3), 0x07);
    assert_int_equal(pick(8, none, NULL, 0x5A, 0, 2), 0x0A); /* avail {1,3,4,6}: {1,3} */
    /* No link, one NUMA node for all: the same. */
    const int32_t numa[8] = {0};
    assert_int_equal(pick(8, none, numa, 0x5A, 0, 2), 0x0A);
}

static void test_topo_nvswitch_node_takes_the_lowest(void **state)
{
    (void)state;
    /* NVSwitch: every GPU a peer of every other. A set of k out of a available holds C(k,2)
     * links and cuts k x (a - k): the same for every set of k, so the lowest indices win. */
    uint64_t m[8];
    for (uint32_t g = 0; g < 8; g++)
        m[g] = 0xFF & ~BIT(g);
    assert_int_equal(pick(8, m, NULL, 0xFF, 0, 3), 0x07);
    assert_int_equal(pick(8, m, NULL, 0xFA, 0, 2), 0x0A); /* 0 and 2 used: {1,3} */
    assert_int_equal(pick(8, m, NULL, 0xFF, 0, 1), 0x01);
}

static void test_topo_more_than_16_candidates_are_greedy(void **state)
{
    (void)state;
    /* 32 GPUs in pairs (0,1) ... (30,31): past GS_TOPO_EXACT_MAX, the greedy search. */
    uint64_t m[32];
    pairs(m, 32);
    uint64_t all = 0xFFFFFFFFu;
    /* GPU 0 used (31 candidates), one wanted: each seed alone; GPU 1 cuts none, the others one
     * each: GPU 1, as the exact search would. */
    assert_int_equal(pick(32, m, NULL, all & ~BIT(0), 0, 1), BIT(1));
    /* GPU 0 used, two wanted. Seed 1 adds the lowest GPU cutting least, all add no link and cut
     * one: 2, giving {1,2} (0 links). Seed 2 adds its partner 3 (1 link): {2,3}, 1 link, cut 0,
     * and no later seed beats it (a pair at best ties): {2,3}. */
    assert_int_equal(pick(32, m, NULL, all & ~BIT(0), 0, 2), BIT(2) | BIT(3));
    /* All free, four wanted: seed 0 adds 1 (a link), then 2 (no link is possible; every GPU
     * cuts one, lowest first), then 3 (a link to 2): {0,1,2,3}, 2 links, cut 0. */
    assert_int_equal(pick(32, m, NULL, all, 0, 4), 0x0F);
    /* The bound of the greedy search: GPUs 0 and 2 used (30 candidates), four wanted. From any
     * seed the step prefers the orphans 1 and 3 (no link to the set, cut 0) to starting a
     * second pair (cut 1), so every completion holds one pair: seed 1 gives {1,3,4,5}, and no
     * seed does better. {4,5,6,7} holds two. */
    assert_int_equal(pick(32, m, NULL, all & ~(BIT(0) | BIT(2)), 0, 4),
                     BIT(1) | BIT(3) | BIT(4) | BIT(5));
    /* The same board cut to 16 GPUs is searched exactly (14 candidates): two pairs (2 links,
     * cut 0) beat one; the first two pairs after the orphans are {4,5,6,7}. */
    assert_int_equal(pick(16, m, NULL, 0xFFFF & ~(BIT(0) | BIT(2)), 0, 4), 0xF0);
    /* Greedy with must_include: the set grows from must GPU 9 alone: 8 (a link) first. */
    assert_int_equal(pick(32, m, NULL, all, BIT(9), 1), BIT(8));
}

static void test_topo_refuses_bad_arguments(void **state)
{
    (void)state;
    uint64_t m[8];
    pairs(m, 8);
    uint64_t out = 7;
    assert_int_equal(gs_topo_pick(8, m, NULL, 0xFF, 0, 2, NULL), GS_EINVAL);
    assert_int_equal(gs_topo_pick(65, m, NULL, 0xFF, 0, 2, &out), GS_EINVAL);
    assert_int_equal(out, 0);
    out = 7;
    assert_int_equal(gs_topo_pick(8, NULL, NULL, 0xFF, 0, 2, &out), GS_EINVAL);
    assert_int_equal(out, 0);
    assert_int_equal(gs_topo_pick(8, m, NULL, 0x1FF, 0, 2, &out), GS_EINVAL); /* GPU 8 */
    assert_int_equal(gs_topo_pick(8, m, NULL, 0xFF, 0x100, 2, &out), GS_EINVAL);
    assert_int_equal(gs_topo_pick(8, m, NULL, 0xFF, 0, 65, &out), GS_EINVAL);
    /* Three available beyond must, four wanted: not enough. */
    out = 7;
    assert_int_equal(gs_topo_pick(8, m, NULL, 0x0F, 0x01, 4, &out), GS_EUNSCHEDULABLE);
    assert_int_equal(out, 0);
    /* Exactly as many as wanted: all of them; none wanted: none. */
    assert_int_equal(pick(8, m, NULL, 0x0F, 0x01, 3), 0x0E);
    assert_int_equal(pick(8, m, NULL, 0x0F, 0, 0), 0);
    assert_int_equal(pick(0, NULL, NULL, 0, 0, 0), 0);
}

/* ---- the cluster ------------------------------------------------------------------------- */

static struct gs_pod_req whole(uint32_t num_gpu)
{
    return GS_POD_REQ(1000, 1024, num_gpu, GS_GPU_MILLI, GS_MODEL_ANY);
}

static uint32_t add_node(struct gs_cluster *c, const char *name, uint32_t gpus)
{
    struct gs_node_spec s = {.name = name,
                             .cpu_milli = 64000,
                             .mem_mib = 262144,
                             .pods_max = 110,
                             .gpu_count = gpus,
                             .gpu_model = "H200"};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    return id;
}

static void set_pairs(struct gs_cluster *c, uint32_t node, uint32_t gpus)
{
    uint16_t p[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < gpus; g++)
        p[g] = (uint16_t)(1u << (g ^ 1u));
    assert_int_equal(gs_cluster_set_nvlink(c, node, p, gpus), GS_OK);
}

static void bind_on(struct gs_cluster *c, uint32_t node, uint8_t gpu)
{
    struct gs_pod_req r = whole(1);
    struct gs_placement pl = {.node = node, .num_gpu = 1, .gpu_milli = GS_GPU_MILLI};
    pl.gpu_index[0] = gpu;
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
}

/* The GPUs gs_node_pick_gpus() takes for `num` whole GPUs, as a mask. */
static uint32_t node_pick(struct gs_cluster *c, uint32_t node, uint32_t num)
{
    struct gs_pod_req r = whole(num);
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, node), node, &r, &pl), GS_OK);
    assert_int_equal(pl.num_gpu, num);
    uint32_t mask = 0;
    for (uint32_t k = 0; k < pl.num_gpu; k++) {
        if (k > 0)
            assert_true(pl.gpu_index[k - 1] < pl.gpu_index[k]); /* ascending */
        mask |= 1u << pl.gpu_index[k];
    }
    return mask;
}

static void test_set_nvlink_checks_and_symmetrises(void **state)
{
    (void)state;
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    uint32_t n = add_node(c, "dgx", 4);
    const struct gs_node *nd = gs_cluster_node(c, n);
    assert_false(nd->has_nvlink);
    uint16_t p[4] = {0x2, 0, 0x8, 0}; /* 0->1 and 2->3, told by one end each */
    assert_int_equal(gs_cluster_set_nvlink(c, 9, p, 4), GS_EINVAL); /* no node 9 */
    assert_int_equal(gs_cluster_set_nvlink(c, n, p, 3), GS_EINVAL); /* not gpu_count */
    assert_int_equal(gs_cluster_set_nvlink(c, n, NULL, 4), GS_EINVAL);
    uint16_t self[4] = {0x1, 0, 0, 0};
    assert_int_equal(gs_cluster_set_nvlink(c, n, self, 4), GS_EINVAL);
    uint16_t past[4] = {0x10, 0, 0, 0}; /* GPU 4 of a 4-GPU node */
    assert_int_equal(gs_cluster_set_nvlink(c, n, past, 4), GS_EINVAL);
    assert_false(nd->has_nvlink);
    uint64_t gen = nd->gen;
    assert_int_equal(gs_cluster_set_nvlink(c, n, p, 4), GS_OK);
    assert_true(nd->has_nvlink);
    assert_int_equal(nd->nvlink[0], 0x2);
    assert_int_equal(nd->nvlink[1], 0x1); /* the other end filled in */
    assert_int_equal(nd->nvlink[2], 0x8);
    assert_int_equal(nd->nvlink[3], 0x4);
    assert_true(nd->gen != gen);
    /* The same links again: no change, no new generation. */
    gen = nd->gen;
    uint16_t both[4] = {0x2, 0x1, 0x8, 0x4};
    assert_int_equal(gs_cluster_set_nvlink(c, n, both, 4), GS_OK);
    assert_true(nd->gen == gen);
    /* Shrinking to 3 GPUs drops GPU 3 and the link 2-3; 0-1 stays. */
    struct gs_node_update u = {64000, 262144, 110, 3, NULL, 0};
    assert_int_equal(gs_cluster_update_node(c, n, &u), GS_OK);
    assert_int_equal(nd->nvlink[0], 0x2);
    assert_int_equal(nd->nvlink[2], 0);
    assert_int_equal(nd->nvlink[3], 0);
    assert_true(nd->has_nvlink);
    /* Cleared with n 0. */
    assert_int_equal(gs_cluster_set_nvlink(c, n, NULL, 0), GS_OK);
    assert_false(nd->has_nvlink);
    assert_int_equal(nd->nvlink[0], 0);
    gs_cluster_free(c);
}

static void test_node_pick_prefers_nvlink_pairs(void **state)
{
    (void)state;
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    uint32_t plain = add_node(c, "plain", 8);
    uint32_t dgx = add_node(c, "dgx", 8);
    set_pairs(c, dgx, 8);
    /* Empty: a 2-GPU request takes {0,1} on both (a pair, and the lowest). */
    assert_int_equal(node_pick(c, plain, 2), 0x03);
    assert_int_equal(node_pick(c, dgx, 2), 0x03);
    /* GPU 0 used: one GPU takes GPU 1 on both (the lowest; on dgx the one whose partner is
     * gone, cut 0 against 1 for 2..7). */
    bind_on(c, plain, 0);
    bind_on(c, dgx, 0);
    assert_int_equal(node_pick(c, dgx, 1), 0x02);
    assert_int_equal(node_pick(c, plain, 1), 0x02);
    /* GPUs 0 and 3 used: 2 GPUs take the lowest {1,2} without NVLink; with pairs {1,2} holds
     * no link and {4,5} one: {4,5}. */
    bind_on(c, plain, 3);
    bind_on(c, dgx, 3);
    assert_int_equal(node_pick(c, plain, 2), 0x06);
    assert_int_equal(node_pick(c, dgx, 2), 0x30);
    /* Four of {1,2,4,5,6,7}: {4,5,6,7} holds 2 links; the lowest four {1,2,4,5} one. */
    assert_int_equal(node_pick(c, plain, 4), 0x36);
    assert_int_equal(node_pick(c, dgx, 4), 0xF0);
    /* The fit check agrees: six free, six fit, seven do not. */
    struct gs_pod_req r6 = whole(6), r7 = whole(7);
    assert_true(gs_node_fits(gs_cluster_node(c, dgx), &r6));
    assert_false(gs_node_fits(gs_cluster_node(c, dgx), &r7));
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, dgx), dgx, &r7, &pl), GS_EUNSCHEDULABLE);
    gs_cluster_free(c);
}

static void test_node_pick_on_nvswitch_is_the_lowest(void **state)
{
    (void)state;
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    uint32_t n = add_node(c, "hgx", 8);
    uint16_t all[8];
    for (uint32_t g = 0; g < 8; g++)
        all[g] = (uint16_t)(0xFFu & ~(1u << g));
    assert_int_equal(gs_cluster_set_nvlink(c, n, all, 8), GS_OK);
    /* Every set of k scores alike (topo.h): the lowest free, as without NVLink. */
    assert_int_equal(node_pick(c, n, 3), 0x07);
    bind_on(c, n, 1);
    assert_int_equal(node_pick(c, n, 3), 0x0D); /* {0,2,3} */
    gs_cluster_free(c);
}

/* The policies place whole GPUs through the same pick: bestfit and FGD on one node. */
static void test_policies_place_whole_gpus_on_pairs(void **state)
{
    (void)state;
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    uint32_t n = add_node(c, "dgx", 8);
    set_pairs(c, n, 8);
    bind_on(c, n, 1); /* GPU 1 used: 2 GPUs go to {2,3}, not the lowest {0,2} */
    struct gs_pod_req r2 = whole(2);
    struct gs_workload w;
    assert_int_equal(gs_workload_build(&r2, NULL, 1, 95, &w), GS_OK);
    const char *policies[] = {"bestfit", "fgd", "packing", "random"};
    for (size_t k = 0; k < 4; k++) {
        struct gs_sched_config cfg = {.policy = policies[k], .workload = &w};
        struct gs_sched *s = NULL;
        assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
        struct gs_rng rng;
        gs_rng_seed(&rng, 1);
        struct gs_placement pl;
        assert_int_equal(gs_sched_place(s, &r2, &rng, &pl), GS_OK);
        assert_int_equal(pl.node, n);
        assert_int_equal(pl.num_gpu, 2);
        assert_int_equal(pl.gpu_index[0], 2);
        assert_int_equal(pl.gpu_index[1], 3);
        gs_sched_free(s);
    }
    gs_workload_fini(&w);
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_two_gpus_on_an_empty_dgx_take_pair_0_1),
        cmocka_unit_test(test_topo_one_gpu_keeps_pairs_whole),
        cmocka_unit_test(test_topo_four_of_2_3_5_6_7_take_the_two_pairs),
        cmocka_unit_test(test_topo_counts_links_before_numa_and_numa_before_cut),
        cmocka_unit_test(test_topo_must_include_is_scored_not_returned),
        cmocka_unit_test(test_topo_without_links_takes_the_lowest),
        cmocka_unit_test(test_topo_nvswitch_node_takes_the_lowest),
        cmocka_unit_test(test_topo_more_than_16_candidates_are_greedy),
        cmocka_unit_test(test_topo_refuses_bad_arguments),
        cmocka_unit_test(test_set_nvlink_checks_and_symmetrises),
        cmocka_unit_test(test_node_pick_prefers_nvlink_pairs),
        cmocka_unit_test(test_node_pick_on_nvswitch_is_the_lowest),
        cmocka_unit_test(test_policies_place_whole_gpus_on_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
