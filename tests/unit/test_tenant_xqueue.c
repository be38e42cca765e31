/*
 * Cross-queue priority preemption (a higher-priority pod of a queue within its quota takes the
 * place of lower-priority pods that other queues run above their quotas) and head-of-line
 * blocking by pods that fit no node at all. Every expected placement and eviction is worked
 * out by hand in the comment beside it. Reclaim is off unless a case says otherwise, so every
 * eviction seen is priority preemption. The invariant checker runs after every cycle.
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
#define G 1000 /* one GPU in milli-GPU */

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t evicted[16], evicted_by[16]; /* EVICT events in order */
    enum gs_evict_reason evict_reason[16];
    char evict_text[16][512];
    uint32_t nevicted;
    uint32_t bound_pod;      /* the last BIND */
    char bind_text[1024];    /* its text ("" without one) */
    char unsched_text[1024]; /* the last UNSCHEDULABLE text */
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    if (ev->kind == GS_EV_EVICT && w->nevicted < 16) {
        w->evicted[w->nevicted] = ev->pod;
        w->evicted_by[w->nevicted] = ev->by;
        w->evict_reason[w->nevicted] = ev->reason;
        (void)snprintf(w->evict_text[w->nevicted], sizeof(w->evict_text[0]), "%s",
                       ev->text ? ev->text : "");
        w->nevicted++;
    } else if (ev->kind == GS_EV_BIND) {
        w->bound_pod = ev->pod;
        (void)snprintf(w->bind_text, sizeof(w->bind_text), "%s", ev->text ? ev->text : "");
    } else if (ev->kind == GS_EV_UNSCHEDULABLE) {
        (void)snprintf(w->unsched_text, sizeof(w->unsched_text), "%s", ev->text);
    }
}

static void add_node(struct world *w, const char *name, uint32_t gpus, const char *model)
{
    struct gs_node_spec s = {name, 64000, 1 << 20, 110, gpus, model, 0};
    assert_int_equal(gs_cluster_add_node(w->c, &s, NULL), GS_OK);
}

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
}

static void engine_start(struct world *w, bool reclaim)
{
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .preemption = true,
                                   .reclaim = reclaim,
                                   .on_event = on_event,
                                   .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

/* A queue with a GPU quota (in GPUs), no limit, over-quota weight 1. */
static uint32_t queue(struct world *w, const char *name, uint32_t parent, int64_t gpu_quota)
{
    struct gs_queue_spec s = {name, parent, {gpu_quota * G, 0, 0}, {INF, INF, INF}, 1, 0};
    uint32_t id;
    assert_int_equal(gs_engine_add_queue(w->e, &s, &id), GS_OK);
    return id;
}

static uint32_t pclass(struct world *w, const char *name, int32_t value)
{
    struct gs_priority_class_spec s = {name, value, 1};
    uint32_t id;
    assert_int_equal(gs_engine_add_priority_class(w->e, &s, &id), GS_OK);
    return id;
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    char msg[512];
    if (gs_engine_check(w->e, msg, sizeof(msg)) != GS_OK)
        fail_msg("invariant: %s", msg);
}

/* Submits pod `name` of `gpus` whole GPUs (model: NULL any) with filter class cls. */
static uint32_t submit_cls(struct world *w, const char *name, uint32_t q, uint32_t pc,
                           uint32_t gpus, const char *model, uint32_t cls, int64_t now_ms)
{
    uint64_t mask = GS_MODEL_ANY;
    if (model) {
        int m = gs_cluster_model_find(w->c, model);
        assert_true(m >= 0);
        mask = UINT64_C(1) << m;
    }
    struct gs_tpod_spec s = {name, q, pc, GS_NO_GANG, GS_POD_REQ(1000, 0, gpus, G, mask), -1};
    struct gs_pod_ident id = {NULL, "ns", name, cls, now_ms, false, {0, 0, 0, 0}};
    uint32_t pi;
    assert_int_equal(gs_engine_submit_pod(w->e, &s, &id, now_ms, &pi), GS_OK);
    return pi;
}

static uint32_t submit(struct world *w, const char *name, uint32_t q, uint32_t pc, uint32_t gpus,
                       const char *model, int64_t now_ms)
{
    return submit_cls(w, name, q, pc, gpus, model, GS_FILTER_DEFAULT, now_ms);
}

/* Submits a pod and runs a cycle at now_ms, after which it must be running. */
static uint32_t start(struct world *w, const char *name, uint32_t q, uint32_t pc, uint32_t gpus,
                      const char *model, int64_t now_ms)
{
    uint32_t pi = submit(w, name, q, pc, gpus, model, now_ms);
    cycle(w, now_ms);
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    return pi;
}

static enum gs_tpod_state state(struct world *w, uint32_t pi)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
    return in.state;
}

static uint32_t node_of(struct world *w, uint32_t pi)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pi, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    return in.pl.node;
}

static int64_t gpu_alloc(struct world *w, uint32_t q)
{
    struct gs_queue_info in;
    assert_int_equal(gs_engine_queue_info(w->e, q, &in), GS_OK);
    return in.allocated[GS_RES_GPU];
}

/*
 * One node of 4 GPUs. Queue b (quota 1 GPU) runs b0..b3 (1 GPU each, priority 10, started at
 * t = 0, 1, 2, 3 s): 3 GPUs above its quota. Queue a (quota 2 GPUs) is empty.
 *  - a1 (1 GPU, priority 100): a holds 0 + 1 <= 2, within its quota; b keeps 4 - 1 = 3 >= 1.
 *    Victims are all four (equal priority), newest first: b3 (started at 3 s) goes.
 *  - a2 (same): a 1 + 1 = 2 <= 2; b 3 - 1 = 2 >= 1: b2 (started at 2 s) goes.
 *  - a3 (same): a would hold 2 + 1 = 3 > 2, above its quota: no victim across queues; it waits,
 *    though b still runs one GPU above its quota (b0, b1 stay).
 * Then nothing moves again: b's evicted pods (priority 10) cannot take anything back (b is at
 * 2 >= its quota 1, so it is not within its quota; a is within its own), so the evictions stay
 * at two over further cycles.
 */
static void test_priority_pod_within_quota_takes_over_quota_pods_newest_first(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 4, "A100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2), b = queue(&w, "b", GS_QUEUE_ROOT, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 100);
    uint32_t b0 = start(&w, "b0", b, low, 1, NULL, 0);
    uint32_t b1 = start(&w, "b1", b, low, 1, NULL, 1000);
    uint32_t b2 = start(&w, "b2", b, low, 1, NULL, 2000);
    uint32_t b3 = start(&w, "b3", b, low, 1, NULL, 3000);
    assert_int_equal(gpu_alloc(&w, b), 4 * G);

    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 10000);
    cycle(&w, 10000);
    assert_int_equal(state(&w, a1), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 1);
    assert_int_equal(w.evicted[0], b3);
    assert_int_equal(w.evicted_by[0], a1);
    assert_int_equal(w.evict_reason[0], GS_EVICT_PREEMPT);

    uint32_t a2 = submit(&w, "a2", a, high, 1, NULL, 11000);
    cycle(&w, 11000);
    assert_int_equal(state(&w, a2), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 2);
    assert_int_equal(w.evicted[1], b2);

    uint32_t a3 = submit(&w, "a3", a, high, 1, NULL, 12000);
    for (int64_t t = 12000; t < 16000; t += 1000)
        cycle(&w, t);
    assert_int_equal(state(&w, a3), GS_TPOD_PENDING);
    assert_int_equal(w.nevicted, 2);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b1), GS_TPOD_RUNNING);
    assert_int_equal(gpu_alloc(&w, a), 2 * G);
    assert_int_equal(gpu_alloc(&w, b), 2 * G);
    world_fini(&w);
}

/*
 * Two GPUs; queue b (quota 2) runs b0, b1 (priority 10): within its quota. Queue a (quota 2)
 * submits a1 (priority 1000). b would keep 2 - 1 = 1 < 2: no pod of b may go, by priority
 * (preemption) or by fair share (reclaim, on here: the fair shares for demands a 1, b 2 on 2
 * GPUs are quotas min(2,1) = 1 and min(2,2) = 2 scaled to 2 GPUs, a 0.666 and b 1.333; b is
 * above its share but would go below its quota, so reclaim refuses too). a1 waits; nothing is
 * evicted.
 */
static void test_pods_within_their_queues_quota_are_never_taken_by_another_queue(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    engine_start(&w, true);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2), b = queue(&w, "b", GS_QUEUE_ROOT, 2);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 1000);
    uint32_t b0 = start(&w, "b0", b, low, 1, NULL, 0);
    uint32_t b1 = start(&w, "b1", b, low, 1, NULL, 1000);
    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 5000);
    for (int64_t t = 5000; t < 9000; t += 1000)
        cycle(&w, t);
    assert_int_equal(state(&w, a1), GS_TPOD_PENDING);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b1), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 0);
    world_fini(&w);
}

/*
 * Equal priority never preempts, across queues as within one: b (quota 0) runs b0 (priority
 * 50) on the one GPU; a1 of a (quota 1) has priority 50 too and waits.
 */
static void test_equal_priority_never_preempts_across_queues(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 1, "A100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 1), b = queue(&w, "b", GS_QUEUE_ROOT, 0);
    uint32_t mid = pclass(&w, "mid", 50);
    uint32_t b0 = start(&w, "b0", b, mid, 1, NULL, 0);
    uint32_t a1 = submit(&w, "a1", a, mid, 1, NULL, 1000);
    cycle(&w, 1000);
    assert_int_equal(state(&w, a1), GS_TPOD_PENDING);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 0);
    world_fini(&w);
}

/*
 * One node of 2 GPUs: a0 of queue a (quota 2; priority 50) and b0 of queue b (quota 0;
 * priority 10). a1 (priority 100, 1 GPU) of a: a holds 1 + 1 = 2 <= 2. Both are candidates (a0
 * of its own queue, b0 above b's quota 0: 1 - 1 = 0 >= 0); the lowest priority goes first, so
 * b0 is evicted and a's own a0 stays.
 */
static void test_lowest_priority_victim_first_across_and_within_queues(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2), b = queue(&w, "b", GS_QUEUE_ROOT, 0);
    uint32_t low = pclass(&w, "low", 10), mid = pclass(&w, "mid", 50),
             high = pclass(&w, "high", 100);
    uint32_t a0 = start(&w, "a0", a, mid, 1, NULL, 0);
    uint32_t b0 = start(&w, "b0", b, low, 1, NULL, 1000);
    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 2000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, a1), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, a0), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 1);
    assert_int_equal(w.evicted[0], b0);
    world_fini(&w);
}

/*
 * Node choice as kube-scheduler makes it, over victims of another queue: n0 (A100, 2 GPUs)
 * runs b-big (2 GPUs, priority 20), n1 (H100, 2 GPUs) runs b-s1, b-s2 (1 GPU each, priority
 * 10); queue b's quota is 0, a's 2. a1 (2 GPUs, priority 100, any model) needs a whole node.
 * Highest victim priority: n0 20, n1 10: n1 wins though it takes two pods. With n0's pod at
 * priority 10 too (second part: c-big on n2, A100, against c-s1, c-s2 on n3, H100, of queue c),
 * the highest priorities tie at 10 and the sums decide: n2 1 x (10 + 2^31) < n3 2 x (10 + 2^31):
 * the fewest victims, c-big alone.
 */
static void test_victim_node_lowest_priority_then_fewest_victims(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    add_node(&w, "n1", 2, "H100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2), b = queue(&w, "b", GS_QUEUE_ROOT, 0);
    uint32_t low = pclass(&w, "low", 10), mid = pclass(&w, "mid", 20),
             high = pclass(&w, "high", 100);
    uint32_t big = start(&w, "b-big", b, mid, 2, "A100", 0);
    uint32_t s1 = start(&w, "b-s1", b, low, 1, "H100", 1000);
    uint32_t s2 = start(&w, "b-s2", b, low, 1, "H100", 2000);
    assert_int_equal(node_of(&w, big), 0);
    assert_int_equal(node_of(&w, s1), 1);
    uint32_t a1 = submit(&w, "a1", a, high, 2, NULL, 3000);
    cycle(&w, 3000);
    assert_int_equal(node_of(&w, a1), 1);
    assert_int_equal(w.nevicted, 2);
    assert_int_equal(state(&w, s1), GS_TPOD_PENDING);
    assert_int_equal(state(&w, s2), GS_TPOD_PENDING);
    assert_int_equal(state(&w, big), GS_TPOD_RUNNING);
    world_fini(&w);

    world_init(&w);
    add_node(&w, "n2", 2, "A100");
    add_node(&w, "n3", 2, "H100");
    engine_start(&w, false);
    a = queue(&w, "a", GS_QUEUE_ROOT, 2);
    uint32_t c = queue(&w, "c", GS_QUEUE_ROOT, 0);
    low = pclass(&w, "low", 10);
    high = pclass(&w, "high", 100);
    big = start(&w, "c-big", c, low, 2, "A100", 0);
    s1 = start(&w, "c-s1", c, low, 1, "H100", 1000);
    s2 = start(&w, "c-s2", c, low, 1, "H100", 2000);
    a1 = submit(&w, "a1", a, high, 2, NULL, 3000);
    cycle(&w, 3000);
    assert_int_equal(node_of(&w, a1), 0);
    assert_int_equal(w.nevicted, 1);
    assert_int_equal(w.evicted[0], big);
    assert_int_equal(state(&w, s1), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, s2), GS_TPOD_RUNNING);
    world_fini(&w);
}

/*
 * Quotas are kept up the tree below the queues' common ancestor: department d (quota 2) holds
 * team b (quota 0), which runs b0, b1 (priority 10) on the 2 GPUs: b is 2 above its quota, but
 * d is exactly at its own. a1 (priority 100) of top-level a (quota 2) would take d to 1 < 2:
 * nothing goes. Inside d, team e (quota 2, d's guarantee is its own) may: e1 (priority 100)
 * takes b's newest pod b1, since below their common ancestor d only b and e are judged (b at
 * 2 - 1 = 1 >= 0, e at 0 + 1 <= 2).
 */
static void test_ancestor_quota_shields_a_team_from_other_departments(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2), d = queue(&w, "d", GS_QUEUE_ROOT, 2);
    uint32_t b = queue(&w, "b", d, 0), eq = queue(&w, "e", d, 2);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 100);
    uint32_t b0 = start(&w, "b0", b, low, 1, NULL, 0);
    uint32_t b1 = start(&w, "b1", b, low, 1, NULL, 1000);
    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 2000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, a1), GS_TPOD_PENDING);
    assert_int_equal(w.nevicted, 0);
    uint32_t e1 = submit(&w, "e1", eq, high, 1, NULL, 3000);
    cycle(&w, 3000);
    assert_int_equal(state(&w, e1), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 1);
    assert_int_equal(w.evicted[0], b1);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, a1), GS_TPOD_PENDING);
    world_fini(&w);
}

/*
 * A per-GPU-model quota is a quota too: queue b (overall quota 0, H100 quota 2 GPUs) runs b0,
 * b1 (priority 10) on the one H100 node of 2 GPUs. Overall b is 2 above its quota, but it holds
 * exactly its H100 quota, which it would lose (2 - 1 < 2): a1 (priority 100) of a (quota 2)
 * takes nothing and waits.
 */
static void test_model_quota_shields_pods_from_cross_queue_preemption(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "H100");
    engine_start(&w, false);
    int h100 = gs_cluster_model_find(w.c, "H100");
    assert_true(h100 >= 0);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2);
    struct gs_model_quota mq = {(uint32_t)h100, 2 * G, INF};
    struct gs_queue_spec bs = {"b", GS_QUEUE_ROOT, {0, 0, 0}, {INF, INF, INF}, 1, 0, &mq, 1};
    uint32_t b;
    assert_int_equal(gs_engine_add_queue(w.e, &bs, &b), GS_OK);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 100);
    uint32_t b0 = start(&w, "b0", b, low, 1, NULL, 0);
    uint32_t b1 = start(&w, "b1", b, low, 1, NULL, 1000);
    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 2000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, a1), GS_TPOD_PENDING);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b1), GS_TPOD_RUNNING);
    assert_int_equal(w.nevicted, 0);
    world_fini(&w);
}

/*
 * The explanation: the victim's EVICT says who took its place and why it could be taken; the
 * preemptor's BIND lists what it evicted. Queue b (quota 1) runs b0, b1 on 2 GPUs; a1
 * (priority 100) of a (quota 1) takes b1 (newest). After the eviction b holds 1 GPU, its quota.
 */
static void test_eviction_and_bind_say_who_was_evicted_and_why(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    engine_start(&w, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 1), b = queue(&w, "b", GS_QUEUE_ROOT, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 100);
    (void)start(&w, "b0", b, low, 1, NULL, 0);
    uint32_t b1 = start(&w, "b1", b, low, 1, NULL, 1000);
    uint32_t a1 = submit(&w, "a1", a, high, 1, NULL, 2000);
    cycle(&w, 2000);
    assert_int_equal(w.nevicted, 1);
    assert_int_equal(w.evicted[0], b1);
    assert_string_equal(w.evict_text[0],
                        "priority 100 > 10; queue a is within its quota of 1 GPU, queue b ran "
                        "above its quota of 1 GPU (it holds 1 GPU after the eviction)");
    assert_int_equal(w.bound_pod, a1);
    assert_string_equal(w.bind_text,
                        "preempted ns/b1 (priority 10, queue b above its quota of 1 GPU)");
    world_fini(&w);
}

/*
 * Head-of-line blocking: one node of 8 GPUs, one queue. huge (16 GPUs, submitted first, same
 * priority) fits no node even empty; small (1 GPU, submitted after) must start in the same
 * cycle (before the fix it waited behind huge for ever), and huge's reason says it fits no
 * node. Then big (8 GPUs) submitted before tail (1
 * GPU) while small holds a GPU: big fits the empty node, so it waits for room and, in strict
 * order, tail waits behind it.
 */
static void test_pod_that_fits_no_node_does_not_block_its_queue(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 8, "A100");
    engine_start(&w, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0);
    uint32_t pc = pclass(&w, "p", 10);
    uint32_t huge = submit(&w, "huge", q, pc, 16, NULL, 0);
    uint32_t small = submit(&w, "small", q, pc, 1, NULL, 1000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, small), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, huge), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, huge),
                        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. It fits no node "
                        "even when empty: the most GPUs on a node that passes its filters is 8, "
                        "it asks 16.");

    uint32_t big = submit(&w, "big", q, pc, 8, NULL, 3000);
    uint32_t tail = submit(&w, "tail", q, pc, 1, NULL, 4000);
    cycle(&w, 5000);
    assert_int_equal(state(&w, big), GS_TPOD_PENDING);
    assert_int_equal(state(&w, tail), GS_TPOD_PENDING);
    world_fini(&w);
}

/*
 * The same behind a selector: pods of one filter class share a flavor, so a pod whose selector
 * leaves it only nodes too small used to hold up the pods of that class behind it. n0
 * (size=small, 2 GPUs) and n1 (8 GPUs); sel (4 GPUs, nodeSelector size=small) fits no node that
 * passes its filters even empty (the most is n0's 2 < 4); small1 (1 GPU, the same selector,
 * submitted after) starts on n0 in the same cycle. The reason counts n0 under GPUs and n1
 * under the selector, as kube-scheduler would, and adds that nothing empty would do.
 */
static void test_selected_pod_too_big_for_its_nodes_does_not_block(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 2, "A100");
    add_node(&w, "n1", 8, "A100");
    assert_int_equal(gs_cluster_set_label(w.c, 0, "size", "small"), GS_OK);
    engine_start(&w, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0);
    uint32_t pc = pclass(&w, "p", 10);
    const char *sel[] = {"size=small"};
    struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 1};
    uint32_t cls;
    assert_int_equal(gs_filter_intern(w.c, &f, &cls), GS_OK);
    uint32_t big = submit_cls(&w, "sel", q, pc, 4, NULL, cls, 0);
    uint32_t small1 = submit_cls(&w, "small1", q, pc, 1, NULL, cls, 1000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, small1), GS_TPOD_RUNNING);
    assert_int_equal(node_of(&w, small1), 0);
    assert_int_equal(state(&w, big), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, big),
                        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't "
                        "match Pod's node affinity/selector. It fits no node even when empty: the "
                        "most GPUs on a node that passes its filters is 2, it asks 4.");
    gs_filter_release(w.c, cls);
    world_fini(&w);
}

/* A selector that no node matches at all: the reason says no node passes its filters. */
static void test_selector_matching_no_node_says_so(void **st)
{
    (void)st;
    struct world w;
    world_init(&w);
    add_node(&w, "n0", 8, "A100");
    engine_start(&w, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0);
    uint32_t pc = pclass(&w, "p", 10);
    const char *sel[] = {"zone=nowhere"};
    struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 1};
    uint32_t cls;
    assert_int_equal(gs_filter_intern(w.c, &f, &cls), GS_OK);
    uint32_t lost = submit_cls(&w, "lost", q, pc, 1, NULL, cls, 0);
    uint32_t other = submit(&w, "other", q, pc, 1, NULL, 1000);
    cycle(&w, 2000);
    assert_int_equal(state(&w, other), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, lost), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, lost),
                        "0/1 nodes are available: 1 node(s) didn't match Pod's node "
                        "affinity/selector. It fits no node: none passes its filters.");
    gs_filter_release(w.c, cls);
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_pod_within_quota_takes_over_quota_pods_newest_first),
        cmocka_unit_test(test_pods_within_their_queues_quota_are_never_taken_by_another_queue),
        cmocka_unit_test(test_equal_priority_never_preempts_across_queues),
        cmocka_unit_test(test_lowest_priority_victim_first_across_and_within_queues),
        cmocka_unit_test(test_victim_node_lowest_priority_then_fewest_victims),
        cmocka_unit_test(test_ancestor_quota_shields_a_team_from_other_departments),
        cmocka_unit_test(test_model_quota_shields_pods_from_cross_queue_preemption),
        cmocka_unit_test(test_eviction_and_bind_say_who_was_evicted_and_why),
        cmocka_unit_test(test_pod_that_fits_no_node_does_not_block_its_queue),
        cmocka_unit_test(test_selected_pod_too_big_for_its_nodes_does_not_block),
        cmocka_unit_test(test_selector_matching_no_node_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
