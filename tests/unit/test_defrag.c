/*
 * Unit tests of the defragmentation planner (include/gpusched/defrag.h): the hand-worked case of
 * issue 12 with the arithmetic beside each expected value, whole-GPU and fraction cases, and a
 * seeded randomised test that replays every plan returned on the cluster (each EVICT must
 * release exactly what the pod held, each PLACE must fit and bind, the pending pod must end up
 * bound) and checks "fewest pods moved" against an independent brute force over every single
 * move (each movable pod to each node, its GPUs picked by gs_node_pick_gpus()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/charge.h"
#include "gpusched/cluster.h"
#include "gpusched/defrag.h"
#include "gpusched/err.h"
#include "gpusched/rng.h"

#define PODS_MAX 96

/* A test cluster and the pods bound in it. */
struct world {
    struct gs_cluster *c;
    struct gs_defrag_pod pods[PODS_MAX];
    uint32_t n;
};

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
}

static uint32_t add_node(struct world *w, const char *name, uint32_t gpus)
{
    struct gs_node_spec sp = {.name = name,
                              .cpu_milli = 256000,
                              .mem_mib = 1048576,
                              .pods_max = 110,
                              .gpu_count = gpus,
                              .gpu_model = "V100"};
    uint32_t id = 0;
    assert_int_equal(gs_cluster_add_node(w->c, &sp, &id), GS_OK);
    return id;
}

static struct gs_pod_req gpu_req(uint32_t num_gpu, int32_t gpu_milli)
{
    return GS_POD_REQ(1000, 1024, num_gpu, gpu_milli, GS_MODEL_ANY);
}

/* Binds a pod where gs_node_pick_gpus() puts it on `node`; returns its index or -1. */
static int bind_pod(struct world *w, uint32_t node, struct gs_pod_req req, bool movable)
{
    struct gs_placement pl;
    if (gs_node_pick_gpus(gs_cluster_node(w->c, node), node, &req, &pl) != GS_OK)
        return -1;
    assert_int_equal(gs_cluster_bind(w->c, &req, &pl), GS_OK);
    assert_true(w->n < PODS_MAX);
    w->pods[w->n] = (struct gs_defrag_pod){req, pl, movable};
    return (int)w->n++;
}

static bool fits_anywhere(const struct gs_cluster *c, const struct gs_pod_req *req)
{
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++)
        if (gs_node_fits(gs_cluster_node(c, i), req))
            return true;
    return false;
}

/* Free milli-GPU, CPU and pods of every node, to compare before and after a plan. */
static void snapshot(const struct gs_cluster *c, int64_t *out)
{
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++) {
        const struct gs_node *nd = gs_cluster_node(c, i);
        *out++ = nd->cpu_milli_free;
        *out++ = nd->pods;
        for (uint32_t g = 0; g < GS_NODE_GPUS_MAX; g++)
            *out++ = g < nd->gpu_count ? nd->gpus[g].gpu_milli_free : 0;
    }
}

#define SNAP_MAX (16 * (2 + GS_NODE_GPUS_MAX))

/*
 * Replays a plan on the cluster, checking each step independently of the planner, then undoes
 * it. Returns the charge of the evicted pods (milli) as computed here.
 */
static int64_t replay_plan(struct world *w, const struct gs_pod_req *pending,
                           const struct gs_defrag_plan *p)
{
    bool evicted[PODS_MAX] = {0}, placed[PODS_MAX] = {0};
    uint32_t n_evicted = 0, pending_placed = 0;
    int64_t charge = 0;
    assert_true(p->n_ops == 2 * p->pods_moved + 1);
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const struct gs_defrag_op *op = &p->ops[i];
        if (op->kind == GS_DEFRAG_EVICT) {
            assert_true(op->pod < w->n);
            assert_true(w->pods[op->pod].movable);
            assert_false(evicted[op->pod]);
            assert_memory_equal(&op->pl, &w->pods[op->pod].pl, sizeof(op->pl));
            double gpus = 0;
            assert_int_equal(
                gs_charge_placement(w->c, &w->pods[op->pod].req, &w->pods[op->pod].pl, &gpus),
                GS_OK);
            charge += gs_charge_milli(gpus);
            assert_int_equal(gs_cluster_unbind(w->c, &w->pods[op->pod].req, &op->pl), GS_OK);
            evicted[op->pod] = true;
            n_evicted++;
            continue;
        }
        assert_int_equal(op->kind, GS_DEFRAG_PLACE);
        const struct gs_pod_req *req = pending;
        if (op->pod == GS_DEFRAG_PENDING) {
            pending_placed++;
            assert_memory_equal(&op->pl, &p->pending_pl, sizeof(op->pl));
        } else {
            assert_true(op->pod < w->n && evicted[op->pod] && !placed[op->pod]);
            placed[op->pod] = true;
            req = &w->pods[op->pod].req;
        }
        assert_true(gs_node_fits(gs_cluster_node(w->c, op->pl.node), req));
        assert_int_equal(gs_cluster_bind(w->c, req, &op->pl), GS_OK);
    }
    assert_int_equal(pending_placed, 1);
    assert_int_equal(n_evicted, p->pods_moved);
    for (uint32_t i = 0; i < w->n; i++)
        assert_true(evicted[i] == placed[i]);
    /* Undo, newest first. */
    for (uint32_t i = p->n_ops; i-- > 0;) {
        const struct gs_defrag_op *op = &p->ops[i];
        const struct gs_pod_req *req =
            op->pod == GS_DEFRAG_PENDING ? pending : &w->pods[op->pod].req;
        if (op->kind == GS_DEFRAG_PLACE)
            assert_int_equal(gs_cluster_unbind(w->c, req, &op->pl), GS_OK);
        else
            assert_int_equal(gs_cluster_bind(w->c, req, &op->pl), GS_OK);
    }
    return charge;
}

/*
 * Brute force, independent of the planner's search: whether one move (any movable pod to any
 * node, GPUs as gs_node_pick_gpus() picks them) lets `pending` fit somewhere.
 */
static bool one_move_exists(struct world *w, const struct gs_pod_req *pending)
{
    bool found = false;
    for (uint32_t p = 0; p < w->n && !found; p++) {
        if (!w->pods[p].movable)
            continue;
        struct gs_defrag_pod *pod = &w->pods[p];
        assert_int_equal(gs_cluster_unbind(w->c, &pod->req, &pod->pl), GS_OK);
        for (uint32_t m = 0; m < gs_cluster_node_count(w->c) && !found; m++) {
            struct gs_placement pl;
            if (gs_node_pick_gpus(gs_cluster_node(w->c, m), m, &pod->req, &pl) != GS_OK)
                continue;
            assert_int_equal(gs_cluster_bind(w->c, &pod->req, &pl), GS_OK);
            found = fits_anywhere(w->c, pending);
            assert_int_equal(gs_cluster_unbind(w->c, &pod->req, &pl), GS_OK);
        }
        assert_int_equal(gs_cluster_bind(w->c, &pod->req, &pod->pl), GS_OK);
    }
    return found;
}

/*
 * Issue 12's case. Three 8-GPU nodes: n0 holds pods of 4, 2 and 1 GPUs (1 free), n1 of 4 and 2
 * (2 free), n2 of 4, 2 and 1 (1 free); a 4-GPU pod waits. Free GPUs are 1 + 2 + 1 = 4 but no
 * node has 4. One move cannot do it: a node must end with 4 free; n0 or n2 would need 3 more
 * freed by one pod (their pods are 4, 2, 1: the 4 needs 4 free elsewhere, there are at most 2;
 * the 2 or 1 free too little), n1 needs 2 more, i.e. its 2-GPU pod moved (or the 4), and no
 * other node has 2 (or 4) free. Two moves can: n0's 2 and 1 to n1 and n2 (n0 then has 4
 * free). GPUs moved are at least 3: n1 must free 2 (its 2-GPU pod) and that pod needs 1 more
 * freed somewhere (another move of >= 1 GPU), n0/n2 must free 3 (2 + 1, or the 4). So the best
 * plan moves 2 pods and 3 GPUs.
 */
static void test_three_busy_nodes_need_two_moves_for_a_four_gpu_pod(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n[3] = {add_node(&w, "n0", 8), add_node(&w, "n1", 8), add_node(&w, "n2", 8)};
    uint32_t sizes[3][3] = {{4, 2, 1}, {4, 2, 0}, {4, 2, 1}};
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++)
            if (sizes[i][j])
                assert_true(bind_pod(&w, n[i], gpu_req(sizes[i][j], 1000), true) >= 0);
    struct gs_pod_req pending = gpu_req(4, 1000);
    assert_false(fits_anywhere(w.c, &pending));
    assert_false(one_move_exists(&w, &pending));

    int64_t before[SNAP_MAX], after[SNAP_MAX];
    snapshot(w.c, before);
    struct gs_defrag_plan p;
    struct gs_defrag_config one = {.budget_pods = 1};
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &pending, &one, &p), GS_ENOENT);
    assert_int_equal(p.n_ops, 0);

    struct gs_defrag_config three = {.budget_pods = 3};
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &pending, &three, &p), GS_OK);
    snapshot(w.c, after);
    assert_memory_equal(before, after, sizeof(int64_t) * 3 * (2 + GS_NODE_GPUS_MAX));
    assert_true(p.exact);
    assert_int_equal(p.pods_moved, 2);
    assert_int_equal(p.gpu_milli_moved, 3000); /* 2 + 1 GPUs, see above */
    assert_int_equal(replay_plan(&w, &pending, &p), 3000);
    assert_int_equal(p.pending_pl.num_gpu, 4);
    snapshot(w.c, after);
    assert_memory_equal(before, after, sizeof(int64_t) * 3 * (2 + GS_NODE_GPUS_MAX));
    gs_cluster_free(w.c);
}

/* With no pod movable nothing can be planned, and a pod that fits needs no move. */
static void test_unmovable_pods_give_no_plan_and_a_fitting_pod_needs_none(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t a = add_node(&w, "a", 2), b = add_node(&w, "b", 2);
    assert_true(bind_pod(&w, a, gpu_req(1, 1000), false) >= 0);
    assert_true(bind_pod(&w, b, gpu_req(1, 1000), false) >= 0);
    struct gs_pod_req two = gpu_req(2, 1000), one = gpu_req(1, 1000);
    struct gs_defrag_config cfg = {.budget_pods = 2};
    struct gs_defrag_plan p;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &two, &cfg, &p), GS_ENOENT);
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &one, &cfg, &p), GS_OK);
    assert_int_equal(p.pods_moved, 0);
    assert_int_equal(p.n_ops, 1);
    assert_int_equal(p.ops[0].kind, GS_DEFRAG_PLACE);
    assert_int_equal(p.ops[0].pod, GS_DEFRAG_PENDING);
    assert_int_equal(p.pending_pl.node, a); /* the first node with a free GPU */
    /* Marked movable, a's pod can go to b's free GPU: one move of 1000 milli. */
    w.pods[0].movable = true;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &two, &cfg, &p), GS_OK);
    assert_int_equal(p.pods_moved, 1);
    assert_int_equal(p.gpu_milli_moved, 1000);
    assert_int_equal(replay_plan(&w, &two, &p), 1000);
    /* Bad arguments. */
    cfg.budget_pods = 0;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &two, &cfg, &p), GS_EINVAL);
    cfg.budget_pods = GS_DEFRAG_BUDGET_MAX + 1;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &two, &cfg, &p), GS_EINVAL);
    cfg.budget_pods = 1;
    struct gs_pod_req bad = gpu_req(2, 500); /* a fraction of more than one GPU */
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &bad, &cfg, &p), GS_EINVAL);
    gs_cluster_free(w.c);
}

/*
 * Fractions: node a's only GPU holds 300 milli, node b's 600. A pod of 800 milli fits neither
 * (700 and 400 free). Moving a's 300 to b (400 free >= 300) frees a's GPU: 1 move, 300 milli.
 * Moving b's 600 to a (700 free) also works with 1 move but moves 600: the planner must take
 * the 300.
 */
static void test_fraction_moves_the_smaller_share(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t a = add_node(&w, "a", 1), b = add_node(&w, "b", 1);
    int small = bind_pod(&w, a, gpu_req(1, 300), true);
    assert_true(bind_pod(&w, b, gpu_req(1, 600), true) >= 0);
    struct gs_pod_req pending = gpu_req(1, 800);
    struct gs_defrag_config cfg = {.budget_pods = 2};
    struct gs_defrag_plan p;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &pending, &cfg, &p), GS_OK);
    assert_int_equal(p.pods_moved, 1);
    assert_int_equal(p.gpu_milli_moved, 300);
    assert_int_equal(p.ops[0].kind, GS_DEFRAG_EVICT);
    assert_int_equal(p.ops[0].pod, (uint32_t)small);
    assert_int_equal(p.pending_pl.node, a);
    assert_int_equal(replay_plan(&w, &pending, &p), 300);
    /* Both at 600: 400 free each; a 500 pod fits neither, and no move helps (a moved 600 finds
     * only 400 or the 500 left after the pending pod). */
    gs_cluster_free(w.c);
    world_init(&w);
    a = add_node(&w, "a", 1);
    b = add_node(&w, "b", 1);
    assert_true(bind_pod(&w, a, gpu_req(1, 600), true) >= 0);
    assert_true(bind_pod(&w, b, gpu_req(1, 600), true) >= 0);
    pending = gpu_req(1, 500);
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &pending, &cfg, &p), GS_ENOENT);
    (void)b;
    gs_cluster_free(w.c);
}

/*
 * Whole GPU after fractions on one node: a 2-GPU node with 500 milli on each GPU has 1000 milli
 * free but no free GPU. Moving one 500 onto the other GPU (500 free there) frees a whole GPU:
 * one move of 500 milli, to the same node.
 */
static void test_whole_gpu_freed_by_moving_a_fraction_within_its_node(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t a = add_node(&w, "a", 2);
    struct gs_pod_req half = gpu_req(1, 500);
    struct gs_placement pl0 = {.node = a, .num_gpu = 1, .gpu_index = {0}, .gpu_milli = 500};
    struct gs_placement pl1 = {.node = a, .num_gpu = 1, .gpu_index = {1}, .gpu_milli = 500};
    assert_int_equal(gs_cluster_bind(w.c, &half, &pl0), GS_OK);
    assert_int_equal(gs_cluster_bind(w.c, &half, &pl1), GS_OK);
    w.pods[0] = (struct gs_defrag_pod){half, pl0, true};
    w.pods[1] = (struct gs_defrag_pod){half, pl1, true};
    w.n = 2;
    struct gs_pod_req whole = gpu_req(1, 1000);
    struct gs_defrag_config cfg = {.budget_pods = 2};
    struct gs_defrag_plan p;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &whole, &cfg, &p), GS_OK);
    assert_int_equal(p.pods_moved, 1);
    assert_int_equal(p.gpu_milli_moved, 500);
    assert_int_equal(p.ops[2].kind, GS_DEFRAG_PLACE);
    assert_int_equal(p.ops[2].pl.node, a);
    assert_int_equal(replay_plan(&w, &whole, &p), 500);
    gs_cluster_free(w.c);
}

/* An evaluation bound too small for any plan gives GS_ELIMIT. */
static void test_evaluation_bound_stops_the_search(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n[3] = {add_node(&w, "n0", 8), add_node(&w, "n1", 8), add_node(&w, "n2", 8)};
    uint32_t sizes[3][3] = {{4, 2, 1}, {4, 2, 0}, {4, 2, 1}};
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++)
            if (sizes[i][j])
                assert_true(bind_pod(&w, n[i], gpu_req(sizes[i][j], 1000), true) >= 0);
    struct gs_pod_req pending = gpu_req(4, 1000);
    struct gs_defrag_config cfg = {.budget_pods = 3, .evals_max = 5};
    struct gs_defrag_plan p;
    assert_int_equal(gs_defrag_plan(w.c, w.pods, w.n, &pending, &cfg, &p), GS_ELIMIT);
    gs_cluster_free(w.c);
}

/*
 * Seeded random clusters: 2-5 nodes of 4 or 8 GPUs filled with whole-GPU pods (1, 2, 4) and
 * fractions (100..900 milli), each movable with probability 3/4; a pending pod that fits
 * nowhere. Every plan must replay (replay_plan()), report the charge the replay computes, leave
 * the cluster as it was, and a plan of two or more moves must have no one-move alternative
 * (brute force); GS_ENOENT at budget 1 must agree with the brute force too.
 */
static void test_random_plans_are_valid_and_minimal_in_moves(void **state)
{
    (void)state;
    struct gs_rng rng;
    gs_rng_seed(&rng, 12);
    uint32_t planned = 0, none = 0, multi = 0;
    for (uint32_t round = 0; round < 3000; round++) {
        struct world w;
        world_init(&w);
        uint32_t nodes = 2 + (uint32_t)gs_rng_below(&rng, 4);
        for (uint32_t i = 0; i < nodes; i++) {
            char name[16];
            (void)snprintf(name, sizeof(name), "n%u", i);
            add_node(&w, name, gs_rng_below(&rng, 2) ? 8 : 4);
        }
        uint32_t tries = 6 + (uint32_t)gs_rng_below(&rng, 8 * nodes);
        for (uint32_t t = 0; t < tries && w.n < PODS_MAX; t++) {
            struct gs_pod_req r = gs_rng_below(&rng, 3) == 0
                                      ? gpu_req(1, (int32_t)(100 * (1 + gs_rng_below(&rng, 9))))
                                      : gpu_req(1u << gs_rng_below(&rng, 3), 1000);
            (void)bind_pod(&w, (uint32_t)gs_rng_below(&rng, nodes), r, gs_rng_below(&rng, 4) != 0);
        }
        struct gs_pod_req pending = gs_rng_below(&rng, 3) == 0
                                        ? gpu_req(1, (int32_t)(100 * (1 + gs_rng_below(&rng, 9))))
                                        : gpu_req(1u << gs_rng_below(&rng, 3), 1000);
        if (fits_anywhere(w.c, &pending)) {
            gs_cluster_free(w.c);
            continue;
        }
        int64_t before[SNAP_MAX], after[SNAP_MAX];
        size_t snap_bytes = sizeof(int64_t) * nodes * (2 + GS_NODE_GPUS_MAX);
        snapshot(w.c, before);
        struct gs_defrag_plan p;
        struct gs_defrag_config one = {.budget_pods = 1};
        int err = gs_defrag_plan(w.c, w.pods, w.n, &pending, &one, &p);
        assert_true(err == GS_OK || err == GS_ENOENT);
        assert_int_equal(err == GS_OK, one_move_exists(&w, &pending));
        struct gs_defrag_config cfg = {.budget_pods = 3};
        err = gs_defrag_plan(w.c, w.pods, w.n, &pending, &cfg, &p);
        snapshot(w.c, after);
        assert_memory_equal(before, after, snap_bytes);
        if (err == GS_OK) {
            planned++;
            assert_true(p.exact);
            assert_true(p.pods_moved >= 1 && p.pods_moved <= 3);
            assert_int_equal(replay_plan(&w, &pending, &p), p.gpu_milli_moved);
            if (p.pods_moved >= 2) {
                multi++;
                assert_false(one_move_exists(&w, &pending));
            }
        } else {
            assert_int_equal(err, GS_ENOENT);
            none++;
        }
        snapshot(w.c, after);
        assert_memory_equal(before, after, snap_bytes);
        gs_cluster_free(w.c);
    }
    print_message("plans %u, none %u, multi-move %u\n", planned, none, multi);
    /* The generator must exercise both outcomes and multi-move plans (seed 12: 233 plans, 83 of
     * them multi-move, 878 without). */
    assert_true(planned > 150);
    assert_true(none > 500);
    assert_true(multi > 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_busy_nodes_need_two_moves_for_a_four_gpu_pod),
        cmocka_unit_test(test_unmovable_pods_give_no_plan_and_a_fitting_pod_needs_none),
        cmocka_unit_test(test_fraction_moves_the_smaller_share),
        cmocka_unit_test(test_whole_gpu_freed_by_moving_a_fraction_within_its_node),
        cmocka_unit_test(test_evaluation_bound_stops_the_search),
        cmocka_unit_test(test_random_plans_are_valid_and_minimal_in_moves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
