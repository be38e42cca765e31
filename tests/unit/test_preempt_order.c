/*
 * Preemption's node and victim choice with disruption budgets, as kube-scheduler's
 * DefaultPreemption makes it (pickOneNodeForPreemption; SelectVictimsOnNode with
 * filterPodsWithPDBViolation): fewest budget violations, lowest highest victim priority, lowest
 * sum of priorities (each + 2^31), fewest victims, latest start of the highest-priority victims'
 * earliest, then node order. Each level has a case where it alone decides: every level before
 * it ties and node order (n0 first) would pick the other node. Clusters are two nodes of
 * different GPU models so that the running pods land where the test says (pinned by model);
 * the preemptor takes any model. Evicted pods end, as in Kubernetes. The invariant checker runs
 * after every cycle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/tenant.h"

#define INF GS_UNLIMITED

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t q;
    uint32_t evicted[16]; /* pod ids of EVICT events, in order */
    uint32_t nevicted;
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    if (ev->kind == GS_EV_EVICT && w->nevicted < 16)
        w->evicted[w->nevicted++] = ev->pod;
}

/* Two nodes of `gpus` GPUs each: n0 with A100s, n1 with H100s; one queue, preemption on. */
static void world_init(struct world *w, uint32_t gpus)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    struct gs_node_spec n0 = {"n0", 64000, 1 << 20, 110, gpus, "A100", 0};
    struct gs_node_spec n1 = {"n1", 64000, 1 << 20, 110, gpus, "H100", 0};
    assert_int_equal(gs_cluster_add_node(w->c, &n0, NULL), GS_OK);
    assert_int_equal(gs_cluster_add_node(w->c, &n1, NULL), GS_OK);
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .preemption = true,
                                   .evict_ends_pod =
                                       true, /* as in Kubernetes: an evicted pod is gone */
                                   .on_event = on_event,
                                   .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
    struct gs_queue_spec qs = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {INF, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w->e, &qs, &w->q), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static uint32_t pclass(struct world *w, const char *name, int32_t value)
{
    struct gs_priority_class_spec s = {name, value, 1};
    uint32_t id;
    assert_int_equal(gs_engine_add_priority_class(w->e, &s, &id), GS_OK);
    return id;
}

static uint32_t budget(struct world *w, const char *name, int32_t allowed)
{
    uint32_t id;
    assert_int_equal(gs_engine_add_budget(w->e, name, allowed, &id), GS_OK);
    return id;
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    char msg[512];
    if (gs_engine_check(w->e, msg, sizeof(msg)) != GS_OK)
        fail_msg("invariant: %s", msg);
}

/*
 * Submits a pod of `gpus` GPUs of model `model` (NULL: any) covered by budgets b1 and b2 (0:
 * none) and, unless model is NULL, runs a cycle at now_ms so that it starts then on the node of
 * that model, which is checked.
 */
static uint32_t pod(struct world *w, uint32_t pc, const char *model, uint32_t gpus, uint32_t b1,
                    uint32_t b2, int64_t now_ms)
{
    uint64_t mask = GS_MODEL_ANY;
    if (model) {
        int m = gs_cluster_model_find(w->c, model);
        assert_true(m >= 0);
        mask = UINT64_C(1) << m;
    }
    struct gs_tpod_spec s = {"p", w->q, pc, GS_NO_GANG, GS_POD_REQ(1000, 0, gpus, 1000, mask), -1};
    struct gs_pod_ident id = {NULL, "ns", NULL, GS_FILTER_DEFAULT, now_ms, false, {b1, b2, 0, 0}};
    uint32_t pi;
    assert_int_equal(gs_engine_submit_pod(w->e, &s, &id, now_ms, &pi), GS_OK);
    if (model) {
        cycle(w, now_ms);
        struct gs_tpod_info in;
        assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
        assert_int_equal(in.state, GS_TPOD_RUNNING);
        assert_int_equal(in.pl.node, strcmp(model, "A100") == 0 ? 0 : 1);
    }
    return pi;
}

static uint32_t node_of(struct world *w, uint32_t pi)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    return in.pl.node;
}

static enum gs_tpod_state state(struct world *w, uint32_t pi)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
    return in.state;
}

/* Level 1 decides, and before level 2: n0's victim (priority 10) is covered by two budgets, one
 * with 5 disruptions left and one with none, so it violates (any budget with none left is
 * enough); n1's victim has priority 20 and no budget. Scores: n0 (1 violation, highest 10),
 * n1 (0, 20): the fewest violations wins though n1's victim is of higher priority. */
static void test_fewest_budget_violations_first(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 1);
    uint32_t lo = pclass(&w, "lo", 10), mid = pclass(&w, "mid", 20), hi = pclass(&w, "hi", 50);
    uint32_t roomy = budget(&w, "ns/roomy", 5), spent = budget(&w, "ns/spent", 0);
    uint32_t v0 = pod(&w, lo, "A100", 1, roomy, spent, 0);
    uint32_t v1 = pod(&w, mid, "H100", 1, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 1, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, v1), GS_TPOD_FAILED);
    assert_int_equal(state(&w, v0), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 1);
    world_fini(&w);
}

/* Level 2 decides, before level 4: the preemptor needs 2 GPUs. n0 holds one 2-GPU pod of
 * priority 20 (1 victim, highest 20); n1 two 1-GPU pods of priority 10 (2 victims, highest 10).
 * No budgets. The lower highest priority wins over fewer victims: both pods of n1 go. */
static void test_lowest_highest_victim_priority_before_fewest_victims(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t lo = pclass(&w, "lo", 10), mid = pclass(&w, "mid", 20), hi = pclass(&w, "hi", 50);
    uint32_t big = pod(&w, mid, "A100", 2, 0, 0, 0);
    uint32_t s1 = pod(&w, lo, "H100", 1, 0, 0, 0);
    uint32_t s2 = pod(&w, lo, "H100", 1, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 2, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, s1), GS_TPOD_FAILED);
    assert_int_equal(state(&w, s2), GS_TPOD_FAILED);
    assert_int_equal(state(&w, big), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 2);
    world_fini(&w);
}

/* Level 3 decides: 2 GPUs needed; n0 runs priorities 10 and 10, n1 runs 10 and 5, 1 GPU each.
 * Highest 10 on both; sums (10 + 2^31) + (10 + 2^31) = 2^32 + 20 on n0 and 2^32 + 15 on n1:
 * n1 wins. */
static void test_lowest_sum_of_victim_priorities(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t five = pclass(&w, "five", 5), ten = pclass(&w, "ten", 10), hi = pclass(&w, "hi", 50);
    uint32_t a = pod(&w, ten, "A100", 1, 0, 0, 0);
    uint32_t b = pod(&w, ten, "A100", 1, 0, 0, 0);
    uint32_t c = pod(&w, ten, "H100", 1, 0, 0, 0);
    uint32_t d = pod(&w, five, "H100", 1, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 2, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, c), GS_TPOD_FAILED);
    assert_int_equal(state(&w, d), GS_TPOD_FAILED);
    assert_int_equal(state(&w, a), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b), GS_TPOD_RUNNING);
    world_fini(&w);
}

/* The sum counts each victim as priority + 2^31, so a victim of negative priority never makes
 * a set cheaper: n0 runs one 2-GPU pod of priority 10 (sum 2^31 + 10), n1 runs priorities 10
 * and -5 (sum 2^32 + 5). A plain sum would say 5 < 10 and pick n1; the offset sum picks n0. */
static void test_negative_priority_victim_does_not_lower_the_sum(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t neg = pclass(&w, "neg", -5), ten = pclass(&w, "ten", 10), hi = pclass(&w, "hi", 50);
    uint32_t big = pod(&w, ten, "A100", 2, 0, 0, 0);
    uint32_t c = pod(&w, ten, "H100", 1, 0, 0, 0);
    uint32_t d = pod(&w, neg, "H100", 1, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 2, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 0);
    assert_int_equal(state(&w, big), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, c), 1);
    assert_int_equal(node_of(&w, d), 1);
    world_fini(&w);
}

/* Level 4 decides. With the 2^31 offset, equal highest priorities and equal sums with different
 * counts need the lowest priority there is: n0 runs priorities 10 and INT32_MIN (sum
 * (10 + 2^31) + 0 = 2^31 + 10), n1 one 2-GPU pod of priority 10 (sum 2^31 + 10). Counts 2 and 1:
 * n1 wins, though node order would pick n0. */
static void test_fewest_victims_when_sums_tie(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t lowest = pclass(&w, "lowest", INT32_MIN), ten = pclass(&w, "ten", 10);
    uint32_t hi = pclass(&w, "hi", 50);
    uint32_t a = pod(&w, ten, "A100", 1, 0, 0, 0);
    uint32_t b = pod(&w, lowest, "A100", 1, 0, 0, 0);
    uint32_t big = pod(&w, ten, "H100", 2, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 2, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, big), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, a), 0);
    assert_int_equal(node_of(&w, b), 0);
    world_fini(&w);
}

/* Level 5 decides: 2 GPUs needed, every victim of priority 10. n0's started at 0 and 300, n1's
 * at 100 and 200. The earliest start among the highest-priority victims is 0 on n0 and 100 on
 * n1; the latest of those, n1, wins (though n0 has the latest single start, 300). */
static void test_latest_earliest_start_of_highest_priority_victims(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t ten = pclass(&w, "ten", 10), hi = pclass(&w, "hi", 50);
    uint32_t a = pod(&w, ten, "A100", 1, 0, 0, 0);
    uint32_t c = pod(&w, ten, "H100", 1, 0, 0, 100);
    uint32_t d = pod(&w, ten, "H100", 1, 0, 0, 200);
    uint32_t b = pod(&w, ten, "A100", 1, 0, 0, 300);
    uint32_t p = pod(&w, hi, NULL, 2, 0, 0, 400);
    cycle(&w, 400);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, c), GS_TPOD_FAILED);
    assert_int_equal(state(&w, d), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, a), 0);
    assert_int_equal(node_of(&w, b), 0);
    world_fini(&w);
}

/* Level 6: everything ties (priority 10, started at 0, no budgets): n0, the first node. */
static void test_full_tie_takes_the_first_node(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 1);
    uint32_t ten = pclass(&w, "ten", 10), hi = pclass(&w, "hi", 50);
    uint32_t a = pod(&w, ten, "A100", 1, 0, 0, 0);
    uint32_t b = pod(&w, ten, "H100", 1, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 1, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 0);
    assert_int_equal(state(&w, a), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, b), 1);
    world_fini(&w);
}

/* On one node, a violating victim is reprieved first: n0 (2 GPUs) runs A, priority 10 under a
 * spent budget, and B, priority 20 without one; n1 is full of a priority-60 pod, so n0 it is.
 * Without the budget A would go (lowest priority). kube-scheduler gives A back first (the pod
 * still fits with B gone), then B cannot be given back: B is the victim, no violation. */
static void test_violating_victim_is_reprieved_before_a_higher_priority_one(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t lo = pclass(&w, "lo", 10), mid = pclass(&w, "mid", 20), top = pclass(&w, "top", 60);
    uint32_t hi = pclass(&w, "hi", 50);
    uint32_t spent = budget(&w, "ns/spent", 0);
    uint32_t a = pod(&w, lo, "A100", 1, spent, 0, 0);
    uint32_t b = pod(&w, mid, "A100", 1, 0, 0, 0);
    (void)pod(&w, top, "H100", 2, 0, 0, 0);
    uint32_t p = pod(&w, hi, NULL, 1, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 0);
    assert_int_equal(state(&w, b), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, a), 0);
    assert_int_equal(w.nevicted, 1);
    world_fini(&w);
}

/*
 * One disruption allowed, two covered victims on the only usable node (same priority and
 * start): walking them most important first (A, the older id, then B), A takes the one
 * disruption and B violates. So A is evicted (no violation), and the committed eviction leaves
 * the budget at 0. A second preemptor finds B violating, and evicts it anyway: a budget is a
 * preference when nothing else makes room (the Eviction API then decides).
 */
static void test_one_disruption_allowed_goes_to_the_most_important_victim(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 2);
    uint32_t ten = pclass(&w, "ten", 10), top = pclass(&w, "top", 60), hi = pclass(&w, "hi", 50);
    uint32_t one = budget(&w, "ns/one", 1);
    uint32_t a = pod(&w, ten, "A100", 1, one, 0, 0);
    uint32_t b = pod(&w, ten, "A100", 1, one, 0, 0);
    (void)pod(&w, top, "H100", 2, 0, 0, 0);
    uint32_t p1 = pod(&w, hi, NULL, 1, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p1), 0);
    assert_int_equal(state(&w, a), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, b), 0);
    int32_t allowed = -1;
    const char *name = NULL;
    assert_int_equal(gs_engine_budget_info(w.e, one, &name, &allowed), GS_OK);
    assert_string_equal(name, "ns/one");
    assert_int_equal(allowed, 0);
    /* A second preemptor takes B though its budget is spent. */
    uint32_t p2 = pod(&w, hi, NULL, 1, 0, 0, 20);
    cycle(&w, 20);
    assert_int_equal(node_of(&w, p2), 0);
    assert_int_equal(state(&w, b), GS_TPOD_FAILED);
    assert_int_equal(allowed, 0);
    assert_int_equal(gs_engine_budget_info(w.e, one, NULL, &allowed), GS_OK);
    assert_int_equal(allowed, 0); /* not below zero */
    /* The cluster's value replaces the engine's. */
    assert_int_equal(gs_engine_set_budget_allowed(w.e, one, 3), GS_OK);
    assert_int_equal(gs_engine_budget_info(w.e, one, NULL, &allowed), GS_OK);
    assert_int_equal(allowed, 3);
    world_fini(&w);
}

/* A pod's budgets can be replaced after it runs (a PodDisruptionBudget created later): then it
 * is protected as if it had come with them. Same cluster as the level-1 case, budgets set late. */
static void test_budgets_set_on_a_running_pod_count(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 1);
    uint32_t lo = pclass(&w, "lo", 10), mid = pclass(&w, "mid", 20), hi = pclass(&w, "hi", 50);
    uint32_t v0 = pod(&w, lo, "A100", 1, 0, 0, 0);
    uint32_t v1 = pod(&w, mid, "H100", 1, 0, 0, 0);
    uint32_t spent = budget(&w, "ns/late", 0);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, v0, &spent, 1), GS_OK);
    uint32_t p = pod(&w, hi, NULL, 1, 0, 0, 10);
    cycle(&w, 10);
    assert_int_equal(node_of(&w, p), 1);
    assert_int_equal(state(&w, v1), GS_TPOD_FAILED);
    assert_int_equal(node_of(&w, v0), 0);
    world_fini(&w);
}

/* Bad budget input is refused with nothing changed. */
static void test_budget_input_is_checked(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 1);
    uint32_t lo = pclass(&w, "lo", 10);
    uint32_t b = budget(&w, "ns/b", 1);
    assert_int_equal(b, 1);
    assert_int_equal(gs_engine_add_budget(w.e, "ns/b", 2, NULL), GS_EEXIST);
    assert_int_equal(gs_engine_add_budget(w.e, "", 2, NULL), GS_EINVAL);
    assert_int_equal(gs_engine_add_budget(w.e, NULL, 2, NULL), GS_EINVAL);
    assert_int_equal(gs_engine_add_budget(w.e, "ns/neg", -1, NULL), GS_EINVAL);
    assert_int_equal(gs_engine_find_budget(w.e, "ns/b"), 1);
    assert_int_equal(gs_engine_find_budget(w.e, "ns/none"), -1);
    assert_int_equal(gs_engine_set_budget_allowed(w.e, 2, 1), GS_EINVAL);
    assert_int_equal(gs_engine_set_budget_allowed(w.e, 0, 1), GS_EINVAL);
    assert_int_equal(gs_engine_set_budget_allowed(w.e, 1, -1), GS_EINVAL);
    assert_int_equal(gs_engine_budget_info(w.e, 2, NULL, NULL), GS_EINVAL);
    /* A pod naming an unknown budget is not submitted. */
    struct gs_tpod_spec s = {"p", w.q, lo, GS_NO_GANG, GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY),
                             -1};
    struct gs_pod_ident id = {NULL, "ns", NULL, GS_FILTER_DEFAULT, 0, false, {0, 7, 0, 0}};
    assert_int_equal(gs_engine_submit_pod(w.e, &s, &id, 0, NULL), GS_EINVAL);
    assert_int_equal(gs_engine_pod_count(w.e), 0);
    uint32_t pi = pod(&w, lo, "A100", 1, 0, b, 0);
    uint32_t five[5] = {1, 1, 1, 1, 1}, zero = 0, nine = 9;
    assert_int_equal(gs_engine_set_pod_budgets(w.e, pi, five, 5), GS_EINVAL);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, pi, &zero, 1), GS_EINVAL);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, pi, &nine, 1), GS_EINVAL);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, 42, five, 1), GS_EINVAL);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, pi, five, 4), GS_OK);
    assert_int_equal(gs_engine_set_pod_budgets(w.e, pi, NULL, 0), GS_OK);
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fewest_budget_violations_first),
        cmocka_unit_test(test_lowest_highest_victim_priority_before_fewest_victims),
        cmocka_unit_test(test_lowest_sum_of_victim_priorities),
        cmocka_unit_test(test_negative_priority_victim_does_not_lower_the_sum),
        cmocka_unit_test(test_fewest_victims_when_sums_tie),
        cmocka_unit_test(test_latest_earliest_start_of_highest_priority_victims),
        cmocka_unit_test(test_full_tie_takes_the_first_node),
        cmocka_unit_test(test_violating_victim_is_reprieved_before_a_higher_priority_one),
        cmocka_unit_test(test_one_disruption_allowed_goes_to_the_most_important_victim),
        cmocka_unit_test(test_budgets_set_on_a_running_pod_count),
        cmocka_unit_test(test_budget_input_is_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
