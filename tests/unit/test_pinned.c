/*
 * Pods pinned to one node (filter.h, gs_filter_intern()): a required affinity that names exactly
 * one node by `matchFields metadata.name In [x]` or `kubernetes.io/hostname In [x]` makes no
 * filter class; it is judged against its node directly, with the rest of its filter (taints and
 * tolerations, cordon, nodeSelector) as for any pod, and never passes a later node in the same
 * slot. 10,000 such pods for 10,000 nodes create no class and each lands on its node. A pinned
 * pod that cannot fit holds up nothing behind it. Worked by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"
#include "gpusched/tenant.h"

#define HOSTNAME "kubernetes.io/hostname"

static struct gs_cluster *cluster(uint32_t nodes, uint32_t gpus, bool hostname_labels)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    for (uint32_t i = 0; i < nodes; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "n%u", i);
        struct gs_node_spec s = {name, 32000, 65536, 110, gpus, gpus ? "A100" : NULL, 81920};
        uint32_t id;
        assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
        if (hostname_labels)
            assert_int_equal(gs_cluster_set_label(c, id, HOSTNAME, name), GS_OK);
    }
    return c;
}

/* A filter naming node `name`: by matchFields (field) or by the hostname label. The spec
 * points into *buf, which must outlive its use. */
struct pin_buf {
    const char *values[1];
    struct gs_sel_expr expr;
    struct gs_sel_term term;
    struct gs_filter_spec spec;
};

static const struct gs_filter_spec *pin_spec(struct pin_buf *b, const char *name, bool field)
{
    b->values[0] = name;
    b->expr =
        (struct gs_sel_expr){field ? "metadata.name" : HOSTNAME, GS_SEL_IN, field, b->values, 1};
    b->term = (struct gs_sel_term){&b->expr, 1};
    b->spec = (struct gs_filter_spec){.required = &b->term, .n_required = 1};
    return &b->spec;
}

static uint32_t intern(struct gs_cluster *c, const struct gs_filter_spec *f)
{
    uint32_t cls = UINT32_MAX;
    assert_int_equal(gs_filter_intern(c, f, &cls), GS_OK);
    return cls;
}

/* The passing nodes as "0100...", checked against a judgement from scratch. */
static void passing(const struct gs_cluster *c, uint32_t cls, char *out)
{
    uint32_t n = gs_cluster_node_count(c);
    for (uint32_t i = 0; i < n; i++) {
        bool pass = gs_filter_pass(c, cls, i);
        assert_int_equal(pass, gs_filter_check(c, cls, i, NULL) == GS_FILTER_PASS);
        out[i] = pass ? '1' : '0';
    }
    out[n] = '\0';
}

static void test_pin_by_field_or_hostname_makes_no_class(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(4, 8, true);
    struct pin_buf b1, b2;
    uint32_t by_field = intern(c, pin_spec(&b1, "n2", true));
    uint32_t by_label = intern(c, pin_spec(&b2, "n1", false));
    uint32_t node = UINT32_MAX;
    assert_true(gs_filter_pinned(c, by_field, &node));
    assert_int_equal(node, 2);
    assert_true(gs_filter_pinned(c, by_label, &node));
    assert_int_equal(node, 1);
    assert_int_equal(gs_filter_class_count(c), 1); /* the default class only */
    assert_int_equal(gs_filter_pin_count(c), 2);
    assert_null(gs_filter_nodes(c, by_field));
    assert_true(gs_filter_valid(c, by_field));
    assert_int_equal(gs_filter_base(c, by_field), GS_FILTER_DEFAULT);
    char got[8];
    passing(c, by_field, got);
    assert_string_equal(got, "0010");
    passing(c, by_label, got);
    assert_string_equal(got, "0100");
    /* A node other than the pinned one fails on affinity, as the whole filter would. */
    assert_int_equal(gs_filter_check(c, by_field, 0, NULL), GS_FILTER_AFFINITY);
    /* The same filter again shares the pin; each reference is released in turn. */
    struct pin_buf b3;
    assert_int_equal(intern(c, pin_spec(&b3, "n2", true)), by_field);
    assert_int_equal(gs_filter_pin_count(c), 2);
    gs_filter_release(c, by_field);
    assert_int_equal(gs_filter_pin_count(c), 2);
    gs_filter_release(c, by_field);
    gs_filter_release(c, by_label);
    assert_int_equal(gs_filter_pin_count(c), 0);
    assert_false(gs_filter_valid(c, by_field));
    gs_cluster_free(c);
}

static void test_pin_keeps_the_rest_of_the_filter(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8, true);
    struct gs_taint t = {"dedicated", "infer", GS_TAINT_NO_SCHEDULE};
    assert_int_equal(gs_cluster_set_taints(c, 1, &t, 1), GS_OK);
    /* Pinned to n1 without a toleration: n1's taint stops it (the taint is named first). */
    struct pin_buf b;
    uint32_t bare = intern(c, pin_spec(&b, "n1", true));
    const struct gs_taint *why = NULL;
    assert_int_equal(gs_filter_check(c, bare, 1, &why), GS_FILTER_TAINT);
    assert_string_equal(why->key, "dedicated");
    char got[8];
    passing(c, bare, got);
    assert_string_equal(got, "000");
    /* With the toleration: the rest of the filter is a class of its own (the toleration), the
     * pin passes n1. */
    struct gs_toleration tol = {"dedicated", GS_TOL_EQUAL, "infer", GS_TAINT_NO_SCHEDULE};
    struct gs_filter_spec f = *pin_spec(&b, "n1", true);
    f.tolerations = &tol;
    f.n_tolerations = 1;
    uint32_t tolerant = intern(c, &f);
    assert_true(gs_filter_pinned(c, tolerant, NULL));
    assert_int_not_equal(gs_filter_base(c, tolerant), GS_FILTER_DEFAULT);
    assert_int_equal(gs_filter_class_count(c), 2); /* default + the toleration's class */
    passing(c, tolerant, got);
    assert_string_equal(got, "010");
    /* Cordoned, n1 takes neither. */
    assert_int_equal(gs_cluster_set_unschedulable(c, 1, true), GS_OK);
    assert_int_equal(gs_filter_check(c, tolerant, 1, NULL), GS_FILTER_UNSCHEDULABLE);
    gs_filter_release(c, bare);
    gs_filter_release(c, tolerant);
    assert_int_equal(gs_filter_class_count(c), 1);
    gs_cluster_free(c);
}

static void test_what_is_not_a_pin_stays_a_class(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8, false); /* no hostname labels */
    struct pin_buf b1, b2;
    /* The hostname label names n1, but n1 carries no such label: an ordinary class, which
     * matches no node (kube-scheduler would match the label, not the name). */
    uint32_t label = intern(c, pin_spec(&b1, "n1", false));
    assert_false(gs_filter_pinned(c, label, NULL));
    char got[8];
    passing(c, label, got);
    assert_string_equal(got, "000");
    /* A node that does not exist yet: a class, which picks the node up when it comes. */
    uint32_t later = intern(c, pin_spec(&b2, "n3", true));
    assert_false(gs_filter_pinned(c, later, NULL));
    struct gs_node_spec s = {"n3", 32000, 65536, 110, 8, "A100", 81920};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    passing(c, later, got);
    assert_string_equal(got, "0001");
    /* Two values, or two expressions: classes. */
    const char *two[] = {"n0", "n1"};
    struct gs_sel_expr x2 = {"metadata.name", GS_SEL_IN, true, two, 2};
    struct gs_sel_term t2 = {&x2, 1};
    struct gs_filter_spec f2 = {.required = &t2, .n_required = 1};
    assert_false(gs_filter_pinned(c, intern(c, &f2), NULL));
    assert_int_equal(gs_filter_class_count(c), 4);
    assert_int_equal(gs_filter_pin_count(c), 0);
    gs_cluster_free(c);
}

static void test_pin_never_passes_a_later_node_in_its_slot(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(3, 8, true);
    struct pin_buf b;
    uint32_t pin = intern(c, pin_spec(&b, "n1", true));
    assert_int_equal(gs_cluster_remove_node(c, 1), GS_OK);
    struct gs_node_spec s = {"other", 32000, 65536, 110, 8, "A100", 81920};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    assert_int_equal(id, 1); /* the freed slot */
    char got[8];
    passing(c, pin, got);
    assert_string_equal(got, "000");
    gs_filter_release(c, pin);
    gs_cluster_free(c);
}

struct counts {
    uint32_t binds, unsched;
};

static void count_event(void *ctx, const struct gs_event *ev)
{
    struct counts *k = ctx;
    k->binds += ev->kind == GS_EV_BIND;
    k->unsched += ev->kind == GS_EV_UNSCHEDULABLE;
}

static struct gs_engine *engine(struct gs_cluster *c, struct counts *k, uint32_t *queue,
                                uint32_t *pc)
{
    struct gs_engine_config cfg = {.policy = "bestfit", .on_event = count_event, .ctx = k};
    struct gs_engine *e = NULL;
    assert_int_equal(gs_engine_new(c, &cfg, &e), GS_OK);
    struct gs_queue_spec q = {
        "q", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    assert_int_equal(gs_engine_add_queue(e, &q, queue), GS_OK);
    struct gs_priority_class_spec p = {"normal", 10, 1};
    assert_int_equal(gs_engine_add_priority_class(e, &p, pc), GS_OK);
    return e;
}

static void test_ten_thousand_pinned_pods_make_no_class_and_land_on_their_nodes(void **state)
{
    (void)state;
    enum { N = 10000 };
    struct gs_cluster *c = cluster(N, 1, true);
    struct counts k = {0};
    uint32_t q, pc;
    struct gs_engine *e = engine(c, &k, &q, &pc);
    /* Pod i asks 1 GPU and is pinned to node n(N-1-i): by matchFields for even i, by the
     * hostname label for odd i. Bestfit alone would fill the nodes from n0 up. */
    uint32_t *pod = malloc(N * sizeof(*pod));
    assert_non_null(pod);
    for (uint32_t i = 0; i < N; i++) {
        char name[16], uid[16];
        (void)snprintf(name, sizeof(name), "n%u", N - 1 - i);
        (void)snprintf(uid, sizeof(uid), "u%u", i);
        struct pin_buf b;
        uint32_t cls = intern(c, pin_spec(&b, name, i % 2 == 0));
        struct gs_tpod_spec s = {
            "p", q, pc, GS_NO_GANG, GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY), -1};
        struct gs_pod_ident id = {uid, "default", uid, cls, 0, false};
        assert_int_equal(gs_engine_submit_pod(e, &s, &id, 0, &pod[i]), GS_OK);
        gs_filter_release(c, cls); /* the pod holds its own reference */
    }
    assert_int_equal(gs_filter_class_count(c), 1);
    assert_int_equal(gs_filter_pin_count(c), N);
    assert_int_equal(gs_engine_cycle(e, 1000, NULL, NULL), GS_OK);
    assert_int_equal(k.binds, N);
    for (uint32_t i = 0; i < N; i++) {
        struct gs_tpod_info in;
        assert_int_equal(gs_engine_pod_info(e, pod[i], &in), GS_OK);
        assert_int_equal(in.state, GS_TPOD_RUNNING);
        assert_int_equal(in.pl.node, N - 1 - i);
    }
    char msg[256];
    assert_int_equal(gs_engine_check(e, msg, sizeof(msg)), GS_OK);
    free(pod);
    gs_engine_free(e);
    assert_int_equal(gs_filter_pin_count(c), N); /* bound pods keep theirs */
    gs_cluster_free(c);
}

static void test_pinned_pod_that_cannot_fit_holds_up_nothing(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster(2, 1, true);
    struct counts k = {0};
    uint32_t q, pc, hi;
    struct gs_engine *e = engine(c, &k, &q, &pc);
    struct gs_priority_class_spec ph = {"high", 50, 0};
    assert_int_equal(gs_engine_add_priority_class(e, &ph, &hi), GS_OK);
    /* n0's only GPU is taken; a high-priority pod pinned to n0 waits, and a low-priority pod
     * pinned to n1, behind it in the same flavor, still binds in the same cycle. */
    struct gs_pod_req one = GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY);
    struct gs_placement on0 = {0, 1, {0}, 1000};
    assert_int_equal(gs_cluster_bind(c, &one, &on0), GS_OK);
    struct pin_buf b0, b1;
    uint32_t c0 = intern(c, pin_spec(&b0, "n0", true)), c1 = intern(c, pin_spec(&b1, "n1", true));
    struct gs_tpod_spec s = {"p", q, hi, GS_NO_GANG, one, -1};
    struct gs_pod_ident i0 = {"a", "default", "a", c0, 0, false};
    struct gs_pod_ident i1 = {"b", "default", "b", c1, 0, false};
    uint32_t pa, pb;
    assert_int_equal(gs_engine_submit_pod(e, &s, &i0, 0, &pa), GS_OK);
    s.priority_class = pc;
    assert_int_equal(gs_engine_submit_pod(e, &s, &i1, 0, &pb), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 1000, NULL, NULL), GS_OK);
    assert_int_equal(k.binds, 1);
    assert_int_equal(k.unsched, 1);
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(e, pa, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_PENDING);
    assert_string_equal(in.reason, "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 "
                                   "node(s) didn't match Pod's node affinity/selector.");
    assert_int_equal(gs_engine_pod_info(e, pb, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    assert_int_equal(in.pl.node, 1);
    gs_filter_release(c, c0);
    gs_filter_release(c, c1);
    gs_engine_free(e);
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pin_by_field_or_hostname_makes_no_class),
        cmocka_unit_test(test_pin_keeps_the_rest_of_the_filter),
        cmocka_unit_test(test_what_is_not_a_pin_stays_a_class),
        cmocka_unit_test(test_pin_never_passes_a_later_node_in_its_slot),
        cmocka_unit_test(test_ten_thousand_pinned_pods_make_no_class_and_land_on_their_nodes),
        cmocka_unit_test(test_pinned_pod_that_cannot_fit_holds_up_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
