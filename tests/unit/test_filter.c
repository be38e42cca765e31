/*
 * Node lifecycle and node filters of the core, worked by hand: nodeSelector, every node
 * affinity operator, taints and tolerations of every effect, cordon, GPU health, node removal
 * with slot reuse and stale handles, allocatable below what pods hold, preferred scores, and
 * the exact "why pending" messages.
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
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"

static struct gs_cluster *cluster(uint32_t nodes, uint32_t gpus)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    for (uint32_t i = 0; i < nodes; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "n%u", i);
        struct gs_node_spec s = {name, 32000, 65536, 110, gpus, gpus ? "A100" : NULL, 81920};
        assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    }
    return c;
}

static uint32_t intern(struct gs_cluster *c, const struct gs_filter_spec *f)
{
    uint32_t cls = UINT32_MAX;
    assert_int_equal(gs_filter_intern(c, f, &cls), GS_OK);
    return cls;
}

/* The set of passing nodes as a bit string "1010..." by node index. */
static void passing(const struct gs_cluster *c, uint32_t cls, char *out)
{
    uint32_t n = gs_cluster_node_count(c);
    for (uint32_t i = 0; i < n; i++) {
        bool cached = gs_filter_pass(c, cls, i);
        /* The incremental node set always equals a judgement from scratch. */
        assert_int_equal(cached, gs_filter_check(c, cls, i, NULL) == GS_FILTER_PASS);
        out[i] = cached ? '1' : '0';
    }
    out[n] = '\0';
}

static void label(struct gs_cluster *c, uint32_t node, const char *k, const char *v)
{
    assert_int_equal(gs_cluster_set_label(c, node, k, v), GS_OK);
}

static void test_node_selector_ands_its_entries(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(4, 8);
    label(c, 0, "pool", "train");
    label(c, 1, "pool", "train");
    label(c, 1, "zone", "a");
    label(c, 2, "zone", "a");
    const char *sel[] = {"pool=train", "zone=a"};
    struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 2};
    uint32_t cls = intern(c, &f);
    char got[8];
    passing(c, cls, got);
    assert_string_equal(got, "0100"); /* only n1 has both */
    /* A label change touches the node's bit at once. */
    label(c, 2, "pool", "train");
    passing(c, cls, got);
    assert_string_equal(got, "0110");
    /* The same spec interns to the same class. */
    assert_int_equal(intern(c, &f), cls);
    assert_int_equal(gs_filter_class_count(c), 2); /* default + this one */
    gs_cluster_free(c);
}

static void test_affinity_operators_each(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(4, 8);
    label(c, 0, "gpu.count", "8");
    label(c, 1, "gpu.count", "4");
    label(c, 2, "gpu.count", "x"); /* not an integer: Gt/Lt never match */
    label(c, 0, "zone", "a");
    label(c, 1, "zone", "b");
    label(c, 2, "zone", "c");
    /* n3 has no labels. */
    const char *ab[] = {"a", "b"};
    const char *five[] = {"5"};
    struct {
        struct gs_sel_expr e;
        const char *want;
    } cases[] = {
        {{"zone", GS_SEL_IN, false, ab, 2}, "1100"},
        {{"zone", GS_SEL_NOT_IN, false, ab, 2}, "0011"}, /* a missing label is "not in" */
        {{"zone", GS_SEL_EXISTS, false, NULL, 0}, "1110"},
        {{"zone", GS_SEL_DOES_NOT_EXIST, false, NULL, 0}, "0001"},
        {{"gpu.count", GS_SEL_GT, false, five, 1}, "1000"}, /* 8 > 5 */
        {{"gpu.count", GS_SEL_LT, false, five, 1}, "0100"}, /* 4 < 5 */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct gs_sel_term t = {&cases[k].e, 1};
        struct gs_filter_spec f = {.required = &t, .n_required = 1};
        char got[8];
        passing(c, intern(c, &f), got);
        assert_string_equal(got, cases[k].want);
    }
    gs_cluster_free(c);
}

static void test_affinity_terms_or_expressions_and(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(4, 8);
    label(c, 0, "zone", "a");
    label(c, 0, "tier", "gold");
    label(c, 1, "zone", "a");
    label(c, 2, "tier", "gold");
    const char *a[] = {"a"}, *gold[] = {"gold"}, *n3[] = {"n3"};
    struct gs_sel_expr both[] = {{"zone", GS_SEL_IN, false, a, 1},
                                 {"tier", GS_SEL_IN, false, gold, 1}};
    struct gs_sel_expr name[] = {{"metadata.name", GS_SEL_IN, true, n3, 1}};
    struct gs_sel_term terms[] = {{both, 2}, {name, 1}};
    struct gs_filter_spec f = {.required = terms, .n_required = 2};
    char got[8];
    passing(c, intern(c, &f), got);
    assert_string_equal(got, "1001"); /* n0 by the first term (both), n3 by matchFields */
    /* An empty term matches nothing. */
    struct gs_sel_term empty = {NULL, 0};
    struct gs_filter_spec fe = {.required = &empty, .n_required = 1};
    passing(c, intern(c, &fe), got);
    assert_string_equal(got, "0000");
    gs_cluster_free(c);
}

static void test_malformed_filters_are_refused(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(1, 8);
    uint32_t cls;
    const char *x[] = {"x"}, *two[] = {"1", "2"};
    struct gs_sel_expr bad[] = {
        {"zone", GS_SEL_IN, false, NULL, 0},     /* In without values */
        {"zone", GS_SEL_EXISTS, false, x, 1},    /* Exists with values */
        {"n", GS_SEL_GT, false, x, 1},           /* Gt of a non-integer */
        {"n", GS_SEL_LT, false, two, 2},         /* Lt with two values */
        {"metadata.uid", GS_SEL_IN, true, x, 1}, /* a field other than metadata.name */
        {"metadata.name", GS_SEL_EXISTS, true, 0, 0} /* a field with Exists */,
        {"", GS_SEL_EXISTS, false, NULL, 0}, /* empty key */
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct gs_sel_term t = {&bad[k], 1};
        struct gs_filter_spec f = {.required = &t, .n_required = 1};
        assert_int_equal(gs_filter_intern(c, &f, &cls), GS_EINVAL);
    }
    const char *sel[] = {"novalue"};
    struct gs_filter_spec fs = {.node_selector = sel, .n_node_selector = 1};
    assert_int_equal(gs_filter_intern(c, &fs, &cls), GS_EINVAL);
    struct gs_toleration tol = {NULL, GS_TOL_EQUAL, "v", 0}; /* Equal needs a key */
    struct gs_filter_spec ft = {.tolerations = &tol, .n_tolerations = 1};
    assert_int_equal(gs_filter_intern(c, &ft, &cls), GS_EINVAL);
    assert_int_equal(gs_filter_class_count(c), 1); /* nothing was interned */
    gs_cluster_free(c);
}

static void test_taints_and_tolerations(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(4, 8);
    struct gs_taint gpu = {"nvidia.com/gpu", "present", GS_TAINT_NO_SCHEDULE};
    struct gs_taint exec = {"dedicated", "infer", GS_TAINT_NO_EXECUTE};
    struct gs_taint soft = {"spot", "", GS_TAINT_PREFER_NO_SCHEDULE};
    assert_int_equal(gs_cluster_set_taints(c, 0, &gpu, 1), GS_OK);
    assert_int_equal(gs_cluster_set_taints(c, 1, &exec, 1), GS_OK);
    assert_int_equal(gs_cluster_set_taints(c, 2, &soft, 1), GS_OK);
    char got[8];
    /* No toleration: NoSchedule and NoExecute filter, PreferNoSchedule does not. */
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "0011");
    /* Equal with the right value tolerates n0 only. */
    struct gs_toleration eq = {"nvidia.com/gpu", GS_TOL_EQUAL, "present", GS_TAINT_NO_SCHEDULE};
    struct gs_filter_spec f1 = {.tolerations = &eq, .n_tolerations = 1};
    passing(c, intern(c, &f1), got);
    assert_string_equal(got, "1011");
    /* Equal with another value does not. */
    struct gs_toleration wrong = {"nvidia.com/gpu", GS_TOL_EQUAL, "absent", 0};
    struct gs_filter_spec f2 = {.tolerations = &wrong, .n_tolerations = 1};
    passing(c, intern(c, &f2), got);
    assert_string_equal(got, "0011");
    /* Exists on a key with the NoSchedule effect does not tolerate the NoExecute taint. */
    struct gs_toleration ex = {"dedicated", GS_TOL_EXISTS, NULL, GS_TAINT_NO_SCHEDULE};
    struct gs_filter_spec f3 = {.tolerations = &ex, .n_tolerations = 1};
    passing(c, intern(c, &f3), got);
    assert_string_equal(got, "0011");
    /* Exists with no key and no effect tolerates everything. */
    struct gs_toleration all = {NULL, GS_TOL_EXISTS, NULL, 0};
    struct gs_filter_spec f4 = {.tolerations = &all, .n_tolerations = 1};
    passing(c, intern(c, &f4), got);
    assert_string_equal(got, "1111");
    /* Removing the taints lets the default class in again. */
    assert_int_equal(gs_cluster_set_taints(c, 0, NULL, 0), GS_OK);
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "1011");
    gs_cluster_free(c);
}

static void test_cordon_filters_unless_tolerated(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8);
    assert_int_equal(gs_cluster_set_unschedulable(c, 1, true), GS_OK);
    char got[8];
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "101");
    struct gs_toleration t = {GS_TAINT_UNSCHEDULABLE, GS_TOL_EXISTS, NULL, GS_TAINT_NO_SCHEDULE};
    struct gs_filter_spec f = {.tolerations = &t, .n_tolerations = 1};
    passing(c, intern(c, &f), got);
    assert_string_equal(got, "111"); /* as DaemonSet pods tolerate cordon */
    assert_int_equal(gs_cluster_set_unschedulable(c, 1, false), GS_OK);
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "111");
    gs_cluster_free(c);
}

static void test_unhealthy_gpu_takes_no_new_work_and_keeps_its_pod(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(1, 2);
    struct gs_pod_req half = GS_POD_REQ(0, 0, 1, 500, GS_MODEL_ANY);
    struct gs_placement pl = {0, 1, {1}, 500};
    assert_int_equal(gs_cluster_bind(c, &half, &pl), GS_OK);
    assert_int_equal(gs_cluster_set_gpu_health(c, 0, 1, false), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    /* GPU 1 holds 500 and shows 0 free (not 500, not negative); GPU 0 is whole and free. */
    assert_int_equal(n->gpus[1].gpu_milli_used, 500);
    assert_int_equal(n->gpus[1].gpu_milli_free, 0);
    assert_int_equal(n->gpu_milli_free_total, 1000);
    assert_int_equal(n->gpus_full_free, 1);
    int64_t cpu, mem, gpu;
    gs_cluster_capacity(c, &cpu, &mem, &gpu);
    assert_int_equal(gpu, 1000); /* one healthy GPU */
    /* A second half-GPU pod can only go to GPU 0. */
    struct gs_placement on1 = {0, 1, {1}, 500};
    assert_int_equal(gs_cluster_bind(c, &half, &on1), GS_EINVAL);
    struct gs_placement on0 = {0, 1, {0}, 500};
    assert_int_equal(gs_cluster_bind(c, &half, &on0), GS_OK);
    /* The pod on the unhealthy GPU releases exactly what it held. */
    assert_int_equal(gs_cluster_unbind(c, &half, &pl), GS_OK);
    assert_int_equal(n->gpus[1].gpu_milli_used, 0);
    assert_int_equal(n->gpus[1].gpu_milli_free, 0);
    assert_int_equal(gs_cluster_set_gpu_health(c, 0, 1, true), GS_OK);
    assert_int_equal(n->gpus[1].gpu_milli_free, 1000);
    gs_cluster_free(c);
}

static void test_allocatable_below_used_shows_zero_free(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(1, 0);
    struct gs_pod_req r = GS_POD_REQ(20000, 1024, 0, 0, GS_MODEL_ANY);
    struct gs_placement pl = {0, 0, {0}, 0};
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
    struct gs_node_update u = {16000, 65536, 110, 0, NULL, 0};
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    assert_int_equal(n->cpu_milli_free, 0); /* 16000 - 20000 clamps to 0 */
    assert_int_equal(gs_cluster_unbind(c, &r, &pl), GS_OK);
    assert_int_equal(n->cpu_milli_free, 16000);
    gs_cluster_free(c);
}

static void test_gpus_appear_and_go_through_updates(void **state)
{
    (void)state;
    /* A kubelet registers the node first; its device plugin reports 2 GPUs later. */
    struct gs_cluster *c = cluster(1, 0);
    struct gs_node_update u = {32000, 65536, 110, 2, NULL, 0};
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_EINVAL); /* GPUs need a model */
    u.gpu_model = "H100";
    u.gpu_mem_mib = 81920;
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    assert_int_equal(n->gpu_count, 2);
    assert_int_equal(n->gpus_full_free, 2);
    assert_string_equal(gs_cluster_model_name(c, n->model_id), "H100");
    assert_int_equal(gs_cluster_gpu_count(c), 2);
    /* A pod on GPU 1: dropping to 1 GPU is refused, the node unchanged; growing is fine. */
    struct gs_pod_req one = GS_POD_REQ(0, 0, 1, 1000, GS_MODEL_ANY);
    struct gs_placement on1 = {0, 1, {1}, 1000};
    assert_int_equal(gs_cluster_bind(c, &one, &on1), GS_OK);
    u.gpu_count = 1;
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_EINVAL);
    assert_int_equal(n->gpu_count, 2);
    u.gpu_count = 4;
    u.gpu_model = "A100"; /* and no model change while a GPU holds a pod */
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_EINVAL);
    u.gpu_model = "H100";
    assert_int_equal(gs_cluster_update_node(c, 0, &u), GS_OK);
    assert_int_equal(n->gpu_count, 4);
    assert_int_equal(n->gpus_full_free, 3);
    assert_int_equal(gs_cluster_gpu_count(c), 4);
    gs_cluster_free(c);
}

static void test_removed_node_slot_is_reused_with_a_new_handle(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8);
    uint64_t h1 = gs_cluster_node_handle(c, 1);
    struct gs_pod_req r = GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY);
    struct gs_placement pl = {1, 1, {0}, 1000};
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
    assert_int_equal(gs_cluster_remove_node(c, 1), GS_EEXIST); /* pods first */
    assert_int_equal(gs_cluster_unbind(c, &r, &pl), GS_OK);
    assert_int_equal(gs_cluster_remove_node(c, 1), GS_OK);
    assert_int_equal(gs_cluster_nodes_present(c), 2);
    assert_int_equal(gs_cluster_gpu_count(c), 16);
    assert_int_equal(gs_cluster_find_node(c, "n1"), -1);
    assert_int_equal(gs_cluster_find_node(c, "n2"), 2); /* index deletion keeps the others */
    uint32_t idx;
    assert_int_equal(gs_cluster_node_resolve(c, h1, &idx), GS_ENOENT);
    char got[8];
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "101");
    assert_false(gs_node_fits(gs_cluster_node(c, 1), &r));
    /* A new node takes the free slot; the old handle still does not resolve. */
    struct gs_node_spec s = {"n9", 8000, 1024, 10, 4, "H100", 0};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    assert_int_equal(id, 1);
    assert_int_equal(gs_cluster_node_resolve(c, h1, &idx), GS_ENOENT);
    assert_int_equal(gs_cluster_node_resolve(c, gs_cluster_node_handle(c, 1), &idx), GS_OK);
    assert_int_equal(idx, 1);
    assert_int_equal(gs_cluster_find_node(c, "n9"), 1);
    passing(c, GS_FILTER_DEFAULT, got);
    assert_string_equal(got, "111");
    /* The removed name may come back. */
    s.name = "n1";
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    assert_int_equal(id, 3);
    gs_cluster_free(c);
}

static void test_placement_honours_selector_and_preferences(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8);
    label(c, 2, "pool", "train");
    struct gs_sched *s = NULL;
    struct gs_sched_config cfg = {.policy = "bestfit"};
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    struct gs_pod_req r = GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY);
    struct gs_placement pl;
    /* Without preference, best fit ties break to n0. */
    assert_int_equal(gs_sched_place(s, &r, NULL, &pl), GS_OK);
    assert_int_equal(pl.node, 0);
    /* Preferred affinity for pool=train: n2 gets +200 (weight 2 x 100) and wins. */
    const char *train[] = {"train"};
    struct gs_sel_expr e = {"pool", GS_SEL_IN, false, train, 1};
    struct gs_pref_term pt = {10, {&e, 1}};
    struct gs_filter_spec f = {.preferred = &pt, .n_preferred = 1};
    uint32_t cls = intern(c, &f);
    assert_int_equal(gs_sched_place_class(s, &r, cls, NULL, &pl), GS_OK);
    assert_int_equal(pl.node, 2);
    /* A PreferNoSchedule taint on n0 moves an unpreferring pod to n1. */
    struct gs_taint soft = {"spot", "", GS_TAINT_PREFER_NO_SCHEDULE};
    assert_int_equal(gs_cluster_set_taints(c, 0, &soft, 1), GS_OK);
    assert_int_equal(gs_sched_place(s, &r, NULL, &pl), GS_OK);
    assert_int_equal(pl.node, 1);
    /* A required selector with no match leaves nothing feasible. */
    const char *sel[] = {"pool=none"};
    struct gs_filter_spec fs = {.node_selector = sel, .n_node_selector = 1};
    assert_int_equal(gs_sched_place_class(s, &r, intern(c, &fs), NULL, &pl), GS_EUNSCHEDULABLE);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void expect_message(const struct gs_cluster *c, const struct gs_pod_req *r, uint32_t cls,
                           const char *want)
{
    struct gs_unsched u;
    assert_int_equal(gs_explain(c, r, cls, &u), GS_OK);
    char buf[512];
    size_t len = gs_explain_format(&u, r, buf, sizeof(buf));
    assert_int_equal(len, strlen(buf));
    assert_string_equal(buf, want);
}

static void test_reasons_name_each_filter(void **state)
{
    (void)state;
    /* 6 nodes of 8 GPUs: n0 cordoned, n1 tainted, n2 and n3 without the label, n4 full, n5 with
     * 4 of 8 GPUs free. A pod asking 8 GPUs with pool=train, which n4 and n5 have. */
    struct gs_cluster *c = cluster(6, 8);
    assert_int_equal(gs_cluster_set_unschedulable(c, 0, true), GS_OK);
    struct gs_taint t = {"dedicated", "infer", GS_TAINT_NO_SCHEDULE};
    assert_int_equal(gs_cluster_set_taints(c, 1, &t, 1), GS_OK);
    for (uint32_t i = 0; i < 6; i++)
        if (i != 2 && i != 3)
            label(c, i, "pool", "train");
    struct gs_pod_req four = GS_POD_REQ(0, 0, 4, 1000, GS_MODEL_ANY);
    struct gs_placement p4a = {4, 4, {0, 1, 2, 3}, 1000}, p4b = {4, 4, {4, 5, 6, 7}, 1000};
    struct gs_placement p5 = {5, 4, {0, 2, 4, 6}, 1000};
    assert_int_equal(gs_cluster_bind(c, &four, &p4a), GS_OK);
    assert_int_equal(gs_cluster_bind(c, &four, &p4b), GS_OK);
    assert_int_equal(gs_cluster_bind(c, &four, &p5), GS_OK);
    const char *sel[] = {"pool=train"};
    struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 1};
    uint32_t cls = intern(c, &f);
    struct gs_pod_req eight = GS_POD_REQ(0, 0, 8, 1000, GS_MODEL_ANY);
    /* Sorted as strings, as kube-scheduler does. */
    expect_message(c, &eight, cls,
                   "0/6 nodes are available: 1 node(s) had untolerated taint {dedicated: infer}, "
                   "1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu, 2 node(s) "
                   "didn't match Pod's node affinity/selector.");
    /* Uncordon and untaint n0 and n1; they join the eligible nodes. */
    assert_int_equal(gs_cluster_set_unschedulable(c, 0, false), GS_OK);
    assert_int_equal(gs_cluster_set_taints(c, 1, NULL, 0), GS_OK);
    /* Fill n0 and n1 down to 2 and 3 free GPUs: 2 + 3 + 4 = 9 >= 8 free, largest block 4. */
    struct gs_placement a = {0, 4, {0, 1, 2, 3}, 1000}, b = {1, 4, {0, 1, 2, 3}, 1000};
    struct gs_pod_req two = GS_POD_REQ(0, 0, 2, 1000, GS_MODEL_ANY),
                      one = GS_POD_REQ(0, 0, 1, 1000, GS_MODEL_ANY);
    struct gs_placement a2 = {0, 2, {4, 5}, 1000}, b1 = {1, 1, {4}, 1000};
    assert_int_equal(gs_cluster_bind(c, &four, &a), GS_OK);
    assert_int_equal(gs_cluster_bind(c, &two, &a2), GS_OK);
    assert_int_equal(gs_cluster_bind(c, &four, &b), GS_OK);
    assert_int_equal(gs_cluster_bind(c, &one, &b1), GS_OK);
    expect_message(c, &eight, cls,
                   "0/6 nodes are available: 2 node(s) didn't match Pod's node "
                   "affinity/selector, 4 Insufficient nvidia.com/gpu. free GPU capacity is "
                   "fragmented: largest free block 4 of the 8 GPUs asked");
    /* A fraction: every GPU of the eligible nodes is at most 300 milli free. */
    struct gs_cluster *d = cluster(2, 1);
    struct gs_pod_req big = GS_POD_REQ(0, 0, 1, 700, GS_MODEL_ANY),
                      half = GS_POD_REQ(0, 0, 1, 500, GS_MODEL_ANY);
    struct gs_placement q0 = {0, 1, {0}, 700}, q1 = {1, 1, {0}, 700};
    assert_int_equal(gs_cluster_bind(d, &big, &q0), GS_OK);
    assert_int_equal(gs_cluster_bind(d, &big, &q1), GS_OK);
    expect_message(d, &half, GS_FILTER_DEFAULT,
                   "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. free GPU capacity is "
                   "fragmented: largest free share 300 of the 500 milli-GPU asked");
    /* CPU and model: a CPU-heavy pod counts every resource a node lacks. */
    struct gs_pod_req cpu = GS_POD_REQ(64000, 1 << 20, 1, 100, GS_MODEL_ANY);
    expect_message(d, &cpu, GS_FILTER_DEFAULT,
                   "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory.");
    struct gs_pod_req other = GS_POD_REQ(0, 0, 1, 100, 0); /* a model mask no node has */
    expect_message(d, &other, GS_FILTER_DEFAULT,
                   "0/2 nodes are available: 2 node(s) didn't match Pod's GPU model.");
    gs_cluster_free(d);
    gs_cluster_free(c);
    /* No node at all: said as such, not as a refusal with no reason ("0/0 ... available:."). */
    struct gs_cluster *e = cluster(0, 8);
    expect_message(e, &one, GS_FILTER_DEFAULT, "0/0 nodes are available: no nodes to schedule on.");
    gs_cluster_free(e);
}

static void test_classes_are_bounded_and_recycled(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(2, 8);
    char vals[GS_FILTER_CLASSES_MAX][16];
    const char *sel[GS_FILTER_CLASSES_MAX];
    uint32_t cls;
    for (uint32_t i = 0; i < GS_FILTER_CLASSES_MAX - 1; i++) {
        (void)snprintf(vals[i], sizeof(vals[i]), "k=%u", i);
        sel[i] = vals[i];
        struct gs_filter_spec f = {.node_selector = &sel[i], .n_node_selector = 1};
        assert_int_equal(gs_filter_intern(c, &f, &cls), GS_OK);
    }
    assert_int_equal(gs_filter_class_count(c), GS_FILTER_CLASSES_MAX);
    const char *extra = "k=extra";
    struct gs_filter_spec fx = {.node_selector = &extra, .n_node_selector = 1};
    assert_int_equal(gs_filter_intern(c, &fx, &cls), GS_ELIMIT);
    /* Release one: its entry is recycled for the new class, with an exact node set. */
    gs_filter_release(c, 5);
    assert_int_equal(gs_filter_intern(c, &fx, &cls), GS_OK);
    assert_int_equal(cls, 5);
    label(c, 1, "k", "extra");
    char got[4];
    passing(c, cls, got);
    assert_string_equal(got, "01");
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_selector_ands_its_entries),
        cmocka_unit_test(test_affinity_operators_each),
        cmocka_unit_test(test_affinity_terms_or_expressions_and),
        cmocka_unit_test(test_malformed_filters_are_refused),
        cmocka_unit_test(test_taints_and_tolerations),
        cmocka_unit_test(test_cordon_filters_unless_tolerated),
        cmocka_unit_test(test_unhealthy_gpu_takes_no_new_work_and_keeps_its_pod),
        cmocka_unit_test(test_allocatable_below_used_shows_zero_free),
        cmocka_unit_test(test_gpus_appear_and_go_through_updates),
        cmocka_unit_test(test_removed_node_slot_is_reused_with_a_new_handle),
        cmocka_unit_test(test_placement_honours_selector_and_preferences),
        cmocka_unit_test(test_reasons_name_each_filter),
        cmocka_unit_test(test_classes_are_bounded_and_recycled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
