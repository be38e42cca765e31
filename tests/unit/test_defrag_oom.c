/*
 * Out of memory in the defragmentation planner (include/gpusched/defrag.h), as a tested path:
 * this file defines the core's allocation seam (src/core/alloc_int.h) itself, as test_oom.c
 * does, and fails the N-th allocation the planner makes, for every N until a call makes no
 * allocation fail. Each call must return GS_ENOMEM with the plan zeroed, or the plan of the run
 * without failures, and leave the cluster's free resources as they were.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc_int.h"
#include "gpusched/cluster.h"
#include "gpusched/defrag.h"
#include "gpusched/err.h"

static uint64_t alloc_count; /* allocations counted since counting began */
static uint64_t fail_at;     /* the allocation that fails (1-based); 0 none */
static bool counting;        /* only the planner's allocations are counted */
static bool failed;          /* the call hit its failure */

static bool should_fail(void)
{
    if (!counting)
        return false;
    if (++alloc_count == fail_at) {
        failed = true;
        return true;
    }
    return false;
}

void *gs__malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n);
}

void *gs__calloc(size_t count, size_t size)
{
    return should_fail() ? NULL : calloc(count, size);
}

void *gs__realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n);
}

void gs__free(void *p)
{
    free(p);
}

/* Issue 12's three 8-GPU nodes with pods of 4+2+1, 4+2 and 4+2+1 GPUs (test_defrag.c). */
static struct gs_cluster *three_nodes(struct gs_defrag_pod *pods, uint32_t *n)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    const uint32_t sizes[3][3] = {{4, 2, 1}, {4, 2, 0}, {4, 2, 1}};
    *n = 0;
    for (uint32_t i = 0; i < 3; i++) {
        char name[8];
        (void)snprintf(name, sizeof name, "n%u", i);
        struct gs_node_spec sp = {name, 64000, 262144, 110, 8, "V100", 0, NULL};
        uint32_t id = 0;
        assert_int_equal(gs_cluster_add_node(c, &sp, &id), GS_OK);
        for (uint32_t j = 0; j < 3; j++) {
            if (!sizes[i][j])
                continue;
            struct gs_pod_req r = GS_POD_REQ(1000, 1024, sizes[i][j], 1000, GS_MODEL_ANY);
            struct gs_placement pl;
            assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, id), id, &r, &pl), GS_OK);
            assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
            pods[(*n)++] = (struct gs_defrag_pod){r, pl, true};
        }
    }
    return c;
}

static void snapshot(const struct gs_cluster *c, int32_t out[3][GS_NODE_GPUS_MAX + 1])
{
    for (uint32_t i = 0; i < 3; i++) {
        const struct gs_node *nd = gs_cluster_node(c, i);
        out[i][0] = (int32_t)nd->pods;
        for (uint32_t g = 0; g < GS_NODE_GPUS_MAX; g++)
            out[i][g + 1] = g < nd->gpu_count ? nd->gpus[g].gpu_milli_free : 0;
    }
}

static void test_planner_out_of_memory_returns_enomem_and_leaves_the_cluster(void **state)
{
    (void)state;
    struct gs_defrag_pod pods[8];
    uint32_t n = 0;
    struct gs_cluster *c = three_nodes(pods, &n);
    struct gs_pod_req pending = GS_POD_REQ(1000, 1024, 4, 1000, GS_MODEL_ANY);
    struct gs_defrag_config cfg = {.budget_pods = 3};
    int32_t before[3][GS_NODE_GPUS_MAX + 1], after[3][GS_NODE_GPUS_MAX + 1];
    snapshot(c, before);
    uint32_t failures = 0;
    for (fail_at = 1;; fail_at++) {
        alloc_count = 0;
        failed = false;
        counting = true;
        struct gs_defrag_plan p;
        int err = gs_defrag_plan(c, pods, n, &pending, &cfg, &p);
        counting = false;
        snapshot(c, after);
        assert_memory_equal(before, after, sizeof(before));
        if (!failed) {
            /* The run without failure: the hand-worked plan (2 pods, 3 GPUs). */
            assert_int_equal(err, GS_OK);
            assert_int_equal(p.pods_moved, 2);
            assert_int_equal(p.gpu_milli_moved, 3000);
            break;
        }
        failures++;
        assert_int_equal(err, GS_ENOMEM);
        assert_int_equal(p.n_ops, 0);
        assert_int_equal(p.pods_moved, 0);
    }
    /* The planner allocates its scratch up front: at least the five arrays and the state. */
    assert_true(failures >= 6);
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planner_out_of_memory_returns_enomem_and_leaves_the_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
