/*
 * Semantics of the multi-tenant engine on small clusters, each with the exact placements and
 * evictions worked out by hand in the comments. The invariant checker runs after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/tenant.h"

#define INF GS_UNLIMITED

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t evictions[4]; /* by reason */
    uint32_t binds, backfills, timeouts;
    uint32_t last_evicted, last_evicted_by; /* pod ids of the last EVICT event */
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    switch (ev->kind) {
    case GS_EV_BIND:
        w->binds++;
        break;
    case GS_EV_BACKFILL:
        w->backfills++;
        break;
    case GS_EV_EVICT:
        w->evictions[ev->reason]++;
        w->last_evicted = ev->pod;
        w->last_evicted_by = ev->by;
        break;
    case GS_EV_GANG_TIMEOUT:
        w->timeouts++;
        break;
    default: /* the lifecycle events (submit, finish, ...) are tested in test_live.c */
        break;
    }
}

static void add_node(struct world *w, const char *name, uint32_t gpus, const char *model,
                     int64_t cpu_milli)
{
    struct gs_node_spec s = {name, cpu_milli, 1 << 20, 110, gpus, model, 0};
    assert_int_equal(gs_cluster_add_node(w->c, &s, NULL), GS_OK);
}

static void world_init(struct world *w, bool preempt, bool reclaim, bool backfill)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    (void)preempt;
    (void)reclaim;
    (void)backfill;
}

static void engine_start(struct world *w, bool preempt, bool reclaim, bool backfill)
{
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .preemption = preempt,
                                   .reclaim = reclaim,
                                   .backfill = backfill,
                                   .on_event = on_event,
                                   .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static uint32_t queue(struct world *w, const char *name, uint32_t parent, int64_t gpu_quota,
                      int64_t gpu_limit, double weight)
{
    struct gs_queue_spec s = {name, parent, {gpu_quota, 0, 0}, {gpu_limit, INF, INF}, weight, 0};
    uint32_t id;
    assert_int_equal(gs_engine_add_queue(w->e, &s, &id), GS_OK);
    return id;
}

static uint32_t pclass(struct world *w, const char *name, int32_t value)
{
    struct gs_priority_class_spec s = {name, value, -1};
    uint32_t id;
    assert_int_equal(gs_engine_add_priority_class(w->e, &s, &id), GS_OK);
    return id;
}

static uint32_t submit(struct world *w, uint32_t q, uint32_t pc, uint32_t gang, uint32_t num_gpu,
                       int64_t cpu_milli, int64_t now_ms, int64_t est_ms, uint64_t model_mask)
{
    struct gs_tpod_spec s = {
        "p",   q, pc, gang, GS_POD_REQ(cpu_milli, 0, num_gpu, num_gpu ? 1000 : 0, model_mask),
        est_ms};
    uint32_t id;
    assert_int_equal(gs_engine_submit(w->e, &s, now_ms, &id), GS_OK);
    return id;
}

static void check(struct world *w)
{
    char msg[512];
    int err = gs_engine_check(w->e, msg, sizeof(msg));
    if (err != GS_OK)
        fail_msg("invariant: %s", msg);
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    check(w);
}

static enum gs_tpod_state state(struct world *w, uint32_t pod)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pod, &in), GS_OK);
    return in.state;
}

static uint32_t running_in(struct world *w, uint32_t q)
{
    struct gs_queue_info in;
    assert_int_equal(gs_engine_queue_info(w->e, q, &in), GS_OK);
    return in.running;
}

static int64_t fair_gpu(struct world *w, uint32_t q)
{
    struct gs_queue_info in;
    assert_int_equal(gs_engine_queue_info(w->e, q, &in), GS_OK);
    return in.fair[GS_RES_GPU];
}

/* One node with 8 GPUs; queues A and B with 4 GPUs of quota each. A asks for 6 GPUs while B is
 * idle: A borrows B's idle quota and runs all 6. */
static void test_queue_borrows_idle_quota(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, true, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 4000, INF, 1);
    queue(&w, "b", GS_QUEUE_ROOT, 4000, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    for (int i = 0; i < 6; i++)
        submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, a), 6);
    /* Fair share: A wants 6000, gets its 4000 quota, and B wants nothing, so the 4000 left go
     * to A up to its demand: 6000. */
    assert_int_equal(fair_gpu(&w, a), 6000);
    world_fini(&w);
}

/* Continuing: B now asks for 4 GPUs. The 2 free GPUs go to B at once; for the other 2 B
 * reclaims from A. Fair shares become 4000 each (both quotas met, nothing left). Each reclaim
 * moves |A - fair| + |B - fair| from 2000 + 2000 to 1000 + 1000, then to 0; A keeps its quota. */
static void test_owner_reclaims_lent_quota(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, true, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 4000, INF, 1);
    uint32_t b = queue(&w, "b", GS_QUEUE_ROOT, 4000, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    uint32_t ap[6];
    for (int i = 0; i < 6; i++)
        ap[i] = submit(&w, a, pc, GS_NO_GANG, 1, 1000, i, -1, GS_MODEL_ANY);
    cycle(&w, 10);
    for (int i = 0; i < 4; i++)
        submit(&w, b, pc, GS_NO_GANG, 1, 1000, 20, -1, GS_MODEL_ANY);
    cycle(&w, 30);
    assert_int_equal(running_in(&w, a), 4);
    assert_int_equal(running_in(&w, b), 4);
    assert_int_equal(fair_gpu(&w, a), 4000);
    assert_int_equal(fair_gpu(&w, b), 4000);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 2);
    uint32_t pending = 0;
    for (int i = 0; i < 6; i++)
        pending += state(&w, ap[i]) == GS_TPOD_PENDING;
    assert_int_equal(pending, 2);
    /* Further cycles change nothing: A is at its share, so it may not reclaim back. */
    for (int t = 0; t < 20; t++)
        cycle(&w, 40 + t);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 2);
    world_fini(&w);
}

/* A limit caps borrowing: A has quota 2 and limit 3 on an idle 8-GPU node. It asks for 6 and
 * runs exactly 3. */
static void test_limit_caps_borrowing(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2000, 3000, 1);
    queue(&w, "b", GS_QUEUE_ROOT, 6000, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    for (int i = 0; i < 6; i++)
        submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, a), 3);
    /* Fair share also stops at the limit: min(demand 6000, limit 3000). */
    assert_int_equal(fair_gpu(&w, a), 3000);
    world_fini(&w);
}

/* Over-quota split by weight 1:3. No quotas, 8 GPUs, both queues want 8: fair shares are
 * 8000 x 1/4 = 2000 and 8000 x 3/4 = 6000. Serving the queue with the lowest allocated/fair
 * (ties to the lower id) gives A, B, B, B, A, B, B, B: 2 and 6 GPUs. */
static void test_over_quota_split_by_weight_1_to_3(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t b = queue(&w, "b", GS_QUEUE_ROOT, 0, INF, 3);
    uint32_t pc = pclass(&w, "normal", 10);
    for (int i = 0; i < 8; i++) {
        submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
        submit(&w, b, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    }
    cycle(&w, 0);
    assert_int_equal(fair_gpu(&w, a), 2000);
    assert_int_equal(fair_gpu(&w, b), 6000);
    assert_int_equal(running_in(&w, a), 2);
    assert_int_equal(running_in(&w, b), 6);
    world_fini(&w);
}

/* Priority preemption inside a queue: 2 GPUs hold low-priority pods started at t=0 and t=10.
 * A high-priority pod at t=20 evicts exactly one: the shortest running (started at 10). */
static void test_priority_preempts_shortest_running_low_pod(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2000, INF, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 50);
    uint32_t l1 = submit(&w, a, low, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    uint32_t l2 = submit(&w, a, low, GS_NO_GANG, 1, 1000, 10, -1, GS_MODEL_ANY);
    cycle(&w, 10);
    uint32_t h = submit(&w, a, high, GS_NO_GANG, 1, 1000, 20, -1, GS_MODEL_ANY);
    cycle(&w, 20);
    assert_int_equal(state(&w, h), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, l1), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, l2), GS_TPOD_PENDING);
    assert_int_equal(w.evictions[GS_EVICT_PREEMPT], 1);
    struct gs_tpod_info in;
    gs_engine_pod_info(w.e, l2, &in);
    assert_int_equal(in.last_evict_reason, GS_EVICT_PREEMPT);
    assert_int_equal(in.evictions, 1);
    world_fini(&w);
}

/* PriorityClass value 150 is non-preemptible by default (>= 100): a value-200 pod waits. */
static void test_non_preemptible_pod_never_evicted(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 2000, INF, 1);
    uint32_t guaranteed = pclass(&w, "guaranteed", 150), urgent = pclass(&w, "urgent", 200);
    bool preemptible = true;
    gs_engine_priority_class(w.e, guaranteed, NULL, &preemptible);
    assert_false(preemptible);
    uint32_t g1 = submit(&w, a, guaranteed, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t g2 = submit(&w, a, guaranteed, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    uint32_t u = submit(&w, a, urgent, GS_NO_GANG, 1, 1000, 5, -1, GS_MODEL_ANY);
    for (int t = 1; t <= 10; t++)
        cycle(&w, 10 * t);
    assert_int_equal(state(&w, g1), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, g2), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, u), GS_TPOD_PENDING);
    assert_int_equal(w.evictions[GS_EVICT_PREEMPT] + w.evictions[GS_EVICT_RECLAIM], 0);
    world_fini(&w);
}

/* A one-GPU pod with preemptionPolicy Never (preempt_never) of priority `value`. */
static uint32_t submit_never(struct world *w, uint32_t q, uint32_t pc, int64_t now_ms)
{
    struct gs_tpod_spec s = {
        "never", q, pc, GS_NO_GANG, GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY), -1, true};
    uint32_t id;
    assert_int_equal(gs_engine_submit(w->e, &s, now_ms, &id), GS_OK);
    return id;
}

/* preemptionPolicy Never, as kube-scheduler has it: one GPU, held by a priority-10 pod (t=0);
 * a second priority-10 pod waits from t=5. A priority-50 Never pod arrives at t=10: it evicts
 * nothing (10 cycles), waits with kube-scheduler's reason, and when the running pod finishes at
 * t=200 it goes first, ahead of the older priority-10 pod (ordering by priority still holds).
 * The same pod without Never evicts the running pod at once (the control). */
static void test_never_pod_waits_instead_of_preempting(void **state_)
{
    (void)state_;
    for (int never = 1; never >= 0; never--) {
        struct world w;
        world_init(&w, true, false, false);
        add_node(&w, "n0", 1, "A100", 64000);
        engine_start(&w, true, false, false);
        uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 1000, INF, 1);
        uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 50);
        uint32_t run = submit(&w, a, low, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
        cycle(&w, 0);
        uint32_t older = submit(&w, a, low, GS_NO_GANG, 1, 1000, 5, -1, GS_MODEL_ANY);
        uint32_t h = never ? submit_never(&w, a, high, 10)
                           : submit(&w, a, high, GS_NO_GANG, 1, 1000, 10, -1, GS_MODEL_ANY);
        for (int t = 1; t <= 10; t++)
            cycle(&w, (int64_t)10 * t);
        if (!never) {
            assert_int_equal(w.evictions[GS_EVICT_PREEMPT], 1);
            assert_int_equal(w.last_evicted, run);
            assert_int_equal(w.last_evicted_by, h);
            assert_int_equal(state(&w, h), GS_TPOD_RUNNING);
            world_fini(&w);
            continue;
        }
        assert_int_equal(w.evictions[GS_EVICT_PREEMPT] + w.evictions[GS_EVICT_RECLAIM], 0);
        assert_int_equal(state(&w, run), GS_TPOD_RUNNING);
        assert_int_equal(state(&w, h), GS_TPOD_PENDING);
        struct gs_tpod_info in;
        assert_int_equal(gs_engine_pod_info(w.e, h, &in), GS_OK);
        assert_non_null(in.reason);
        assert_string_equal(in.reason, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
                                       "preemption: not eligible due to preemptionPolicy=Never.");
        /* The low pod that waits has no such words: it has lower priority than everything
         * running, so nothing was eligible in any case, but it is not a Never pod. */
        assert_int_equal(gs_engine_pod_info(w.e, older, &in), GS_OK);
        assert_null(strstr(in.reason ? in.reason : "", "preemptionPolicy"));
        assert_int_equal(gs_engine_finish(w.e, run, 200), GS_OK);
        cycle(&w, 200);
        assert_int_equal(state(&w, h), GS_TPOD_RUNNING);
        assert_int_equal(state(&w, older), GS_TPOD_PENDING);
        world_fini(&w);
    }
}

/* Reclaim is not preemption for a Never pod (docs/internals/tenancy.md): queues A and B have 1
 * GPU of quota each on a 2-GPU node; A borrowed B's GPU (2 pods running). B's Never pod
 * reclaims it: fair shares are 1000 and 1000, A is 1000 above, B 1000 below, and one reclaim
 * takes |A - fair| + |B - fair| from 2000 to 0. Exactly one eviction, reason reclaim. */
static void test_never_pod_still_reclaims_lent_quota(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 1000, INF, 1);
    uint32_t b = queue(&w, "b", GS_QUEUE_ROOT, 1000, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, a), 2);
    uint32_t n = submit_never(&w, b, pc, 10);
    cycle(&w, 10);
    assert_int_equal(state(&w, n), GS_TPOD_RUNNING);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 1);
    assert_int_equal(w.evictions[GS_EVICT_PREEMPT], 0);
    assert_int_equal(w.last_evicted_by, n);
    assert_int_equal(running_in(&w, a), 1);
    world_fini(&w);
}

/* Gang all-or-nothing: min_member 3 one-GPU pods on a 2-GPU cluster run none; a third GPU on
 * a new node lets all three start in one cycle. */
static void test_gang_is_all_or_nothing(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec gs = {"job", 3, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    uint32_t m[3];
    for (int i = 0; i < 3; i++)
        m[i] = submit(&w, a, pc, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(state(&w, m[i]), GS_TPOD_PENDING);
    assert_int_equal(gs_cluster_gpu_milli_used(w.c), 0);
    add_node(&w, "n1", 1, "A100", 64000);
    cycle(&w, 10);
    for (int i = 0; i < 3; i++)
        assert_int_equal(state(&w, m[i]), GS_TPOD_RUNNING);
    world_fini(&w);
}

/* Volcano #3373: two gangs of 100 GPUs on a 150-GPU cluster (18 x 8 + 1 x 6). Exactly one gang
 * runs; the other waits whole and holds no GPU, cycle after cycle. */
static void test_two_100_gpu_gangs_on_150_gpus_no_partial_hold(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    char name[32];
    for (int i = 0; i < 18; i++) {
        snprintf(name, sizeof(name), "n%02d", i);
        add_node(&w, name, 8, "H100", 256000);
    }
    add_node(&w, "n18", 6, "H100", 256000);
    engine_start(&w, false, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t b = queue(&w, "b", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec s1 = {"g1", 100, 0}, s2 = {"g2", 100, 0};
    uint32_t g1, g2;
    gs_engine_add_gang(w.e, &s1, &g1);
    gs_engine_add_gang(w.e, &s2, &g2);
    for (int i = 0; i < 100; i++) {
        submit(&w, a, pc, g1, 1, 1000, 0, -1, GS_MODEL_ANY);
        submit(&w, b, pc, g2, 1, 1000, 0, -1, GS_MODEL_ANY);
    }
    for (int t = 0; t < 5; t++) {
        cycle(&w, t);
        uint32_t ra = running_in(&w, a), rb = running_in(&w, b);
        assert_true((ra == 100 && rb == 0) || (ra == 0 && rb == 100));
        assert_int_equal(gs_cluster_gpu_milli_used(w.c), 100000);
    }
    world_fini(&w);
}

/* Volcano #3869: two queues over and under their share in turn. Quotas 4 + 4 on 8 GPUs.
 * Phase 1: A fills the 8 GPUs while B is idle. Phase 2: B asks for 4 and reclaims exactly 4.
 * Phase 3: A's work is deleted and B grows to 8 while A is idle. Phase 4: A asks for 4 again
 * and reclaims exactly 4. Each phase then runs 200 more cycles: evictions stay at the 4 that
 * each owner's return needs (8 in all), never a back-and-forth. */
static void test_no_reclaim_ping_pong_between_two_queues(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, true, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 4000, INF, 1);
    uint32_t b = queue(&w, "b", GS_QUEUE_ROOT, 4000, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    uint32_t ap[8];
    for (int i = 0; i < 8; i++)
        ap[i] = submit(&w, a, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, a), 8);
    for (int i = 0; i < 4; i++)
        submit(&w, b, pc, GS_NO_GANG, 1, 1000, 1, -1, GS_MODEL_ANY);
    for (int t = 0; t < 200; t++)
        cycle(&w, 10 + t);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 4);
    assert_int_equal(running_in(&w, a), 4);
    assert_int_equal(running_in(&w, b), 4);
    for (int i = 0; i < 8; i++)
        assert_int_equal(gs_engine_delete(w.e, ap[i], 300), GS_OK);
    check(&w);
    for (int i = 0; i < 4; i++)
        submit(&w, b, pc, GS_NO_GANG, 1, 1000, 300, -1, GS_MODEL_ANY);
    for (int t = 0; t < 200; t++)
        cycle(&w, 400 + t);
    assert_int_equal(running_in(&w, b), 8);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 4);
    for (int i = 0; i < 4; i++)
        submit(&w, a, pc, GS_NO_GANG, 1, 1000, 700, -1, GS_MODEL_ANY);
    for (int t = 0; t < 200; t++)
        cycle(&w, 800 + t);
    assert_int_equal(running_in(&w, a), 4);
    assert_int_equal(running_in(&w, b), 4);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 4 + 4);
    world_fini(&w);
}

/* Kueue #7393: queue A borrows CPU (6000 used on a 2000 quota) but uses no GPU; B runs 4 GPUs on
 * a 2000 quota. A's 1-GPU pod must still reclaim a GPU from B: fairness is judged on the GPU,
 * the resource it needs. Fair GPU: A min(2000, 1000) = 1000, B 2000 + the 1000 left = 3000;
 * moving 1000 takes |A - fair| + |B - fair| from 1000 + 1000 to 0. */
static void test_reclaim_judged_on_needed_resource_not_borrowed_cpu(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, true, false);
    add_node(&w, "n0", 4, "A100", 16000);
    engine_start(&w, false, true, false);
    struct gs_queue_spec qa = {"a", GS_QUEUE_ROOT, {2000, 2000, 0}, {INF, INF, INF}, 1, 0};
    struct gs_queue_spec qb = {"b", GS_QUEUE_ROOT, {2000, 14000, 0}, {INF, INF, INF}, 1, 0};
    uint32_t a, b;
    assert_int_equal(gs_engine_add_queue(w.e, &qa, &a), GS_OK);
    assert_int_equal(gs_engine_add_queue(w.e, &qb, &b), GS_OK);
    uint32_t pc = pclass(&w, "normal", 10);
    for (int i = 0; i < 3; i++)
        submit(&w, a, pc, GS_NO_GANG, 0, 2000, 0, -1, GS_MODEL_ANY);
    for (int i = 0; i < 4; i++)
        submit(&w, b, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, a), 3);
    assert_int_equal(running_in(&w, b), 4);
    uint32_t g = submit(&w, a, pc, GS_NO_GANG, 1, 1000, 10, -1, GS_MODEL_ANY);
    cycle(&w, 20);
    assert_int_equal(state(&w, g), GS_TPOD_RUNNING);
    assert_int_equal(running_in(&w, b), 3);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 1);
    world_fini(&w);
}

/* Kueue #8309: a pending H100 job (first in its queue) must not block an A100 job behind it.
 * The only H100 node is full; the A100 node is free. */
static void test_pending_h100_job_does_not_block_a100_job(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "a100", 1, "A100", 64000);
    add_node(&w, "h100", 1, "H100", 64000);
    engine_start(&w, false, false, false);
    uint32_t other = queue(&w, "other", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    uint64_t a100 = gs_cluster_model_mask(w.c, "A100", 4);
    uint64_t h100 = gs_cluster_model_mask(w.c, "H100", 4);
    uint32_t holder = submit(&w, other, pc, GS_NO_GANG, 1, 1000, 0, -1, h100);
    cycle(&w, 0);
    assert_int_equal(state(&w, holder), GS_TPOD_RUNNING);
    uint32_t wants_h100 = submit(&w, a, pc, GS_NO_GANG, 1, 1000, 10, -1, h100);
    uint32_t wants_a100 = submit(&w, a, pc, GS_NO_GANG, 1, 1000, 11, -1, a100);
    cycle(&w, 20);
    assert_int_equal(state(&w, wants_h100), GS_TPOD_PENDING);
    assert_int_equal(state(&w, wants_a100), GS_TPOD_RUNNING);
    world_fini(&w);
}

/* EASY backfill. 8 GPUs; R (4 GPUs, estimate 100 ms) runs from t=0. At t=10 the queue holds J
 * (8 GPUs, head), K (4 GPUs, estimate 200) and L (4 GPUs, estimate 50). J's reservation starts
 * when R ends, at t=100, on the only node. K would end at 210 > 100: refused. L ends at
 * 60 <= 100: backfilled. */
static void test_backfill_that_would_delay_reservation_is_refused(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, true);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, false, true);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    uint32_t r = submit(&w, a, pc, GS_NO_GANG, 4, 1000, 0, 100, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(state(&w, r), GS_TPOD_RUNNING);
    uint32_t j = submit(&w, a, pc, GS_NO_GANG, 8, 1000, 10, 500, GS_MODEL_ANY);
    uint32_t k = submit(&w, a, pc, GS_NO_GANG, 4, 1000, 10, 200, GS_MODEL_ANY);
    uint32_t l = submit(&w, a, pc, GS_NO_GANG, 4, 1000, 10, 50, GS_MODEL_ANY);
    cycle(&w, 10);
    assert_int_equal(state(&w, j), GS_TPOD_PENDING);
    assert_int_equal(state(&w, k), GS_TPOD_PENDING);
    assert_int_equal(state(&w, l), GS_TPOD_RUNNING);
    assert_int_equal(w.backfills, 1);
    /* R and L end; J starts next, before K. */
    gs_engine_finish(w.e, l, 60);
    gs_engine_finish(w.e, r, 100);
    cycle(&w, 100);
    assert_int_equal(state(&w, j), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, k), GS_TPOD_PENDING);
    world_fini(&w);
}

/* A gang that waits past its timeout fails whole. */
static void test_gang_times_out_whole(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec gs = {"big", 4, 1000};
    uint32_t g;
    gs_engine_add_gang(w.e, &gs, &g);
    uint32_t m0 = submit(&w, a, pc, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    for (int i = 0; i < 3; i++)
        submit(&w, a, pc, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 500);
    assert_int_equal(state(&w, m0), GS_TPOD_PENDING);
    cycle(&w, 1000);
    assert_int_equal(state(&w, m0), GS_TPOD_FAILED);
    assert_int_equal(w.timeouts, 4);
    world_fini(&w);
}

/* Evicting one member of a running gang evicts the gang (reason GANG for the others). */
static void test_preemption_evicts_whole_gang(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    add_node(&w, "n1", 2, "A100", 64000);
    engine_start(&w, true, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 50);
    struct gs_gang_spec gs = {"train", 4, 0};
    uint32_t g;
    gs_engine_add_gang(w.e, &gs, &g);
    uint32_t m[4];
    for (int i = 0; i < 4; i++)
        m[i] = submit(&w, a, low, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(state(&w, m[i]), GS_TPOD_RUNNING);
    uint32_t h = submit(&w, a, high, GS_NO_GANG, 1, 1000, 10, -1, GS_MODEL_ANY);
    cycle(&w, 20);
    assert_int_equal(state(&w, h), GS_TPOD_RUNNING);
    for (int i = 0; i < 4; i++)
        assert_int_equal(state(&w, m[i]), GS_TPOD_PENDING);
    assert_int_equal(w.evictions[GS_EVICT_PREEMPT], 1);
    assert_int_equal(w.evictions[GS_EVICT_GANG], 3);
    world_fini(&w);
}

static uint32_t evictions_total(const struct world *w)
{
    return w->evictions[GS_EVICT_PREEMPT] + w->evictions[GS_EVICT_RECLAIM] +
           w->evictions[GS_EVICT_GANG];
}

/* Two gangs never fight. Queues A and B, quota 0 and weight 1 each, one node with 2 GPUs. Gang a
 * (2 x 1 GPU, min_member 2) runs in A; gang b of the same shape arrives in B. Fair shares: both
 * demand 2000, so 1000 each. b's first member may reclaim only if the move lowers |alloc - fair|
 * summed over A and B. What moves: b starts whole (+2000 for B, its two members) and a, taken
 * below its minimum, goes whole (-2000 for A). Before: |2000 - 1000| + |0 - 1000| = 2000; after:
 * |0 - 1000| + |2000 - 1000| = 2000, not lower: no reclaim, b waits. Judging one member on each
 * side instead (1000 + 1000 -> 0) let b evict a whole and a evict b back in the same cycle,
 * 4 evictions per cycle for ever. */
static void test_equal_gangs_in_two_queues_do_not_reclaim_each_other(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t qa = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t qb = queue(&w, "b", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec sa = {"a", 2, 0}, sb = {"b", 2, 0};
    uint32_t ga, gb;
    assert_int_equal(gs_engine_add_gang(w.e, &sa, &ga), GS_OK);
    assert_int_equal(gs_engine_add_gang(w.e, &sb, &gb), GS_OK);
    uint32_t a0 = submit(&w, qa, pc, ga, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t a1 = submit(&w, qa, pc, ga, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(w.binds, 2);
    uint32_t b0 = submit(&w, qb, pc, gb, 1, 1000, 10, -1, GS_MODEL_ANY);
    uint32_t b1 = submit(&w, qb, pc, gb, 1, 1000, 10, -1, GS_MODEL_ANY);
    for (int t = 1; t <= 10; t++) {
        struct gs_cycle_stats st;
        assert_int_equal(gs_engine_cycle(w.e, 10 + 10 * t, NULL, &st), GS_OK);
        check(&w);
        assert_int_equal(st.evicted, 0);
        assert_int_equal(st.bound, 0);
    }
    assert_int_equal(fair_gpu(&w, qa), 1000);
    assert_int_equal(fair_gpu(&w, qb), 1000);
    assert_int_equal(state(&w, a0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, a1), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b0), GS_TPOD_PENDING);
    assert_int_equal(state(&w, b1), GS_TPOD_PENDING);
    assert_int_equal(evictions_total(&w), 0);
    assert_int_equal(w.binds, 2);
    world_fini(&w);
}

/* Gang reclaim still happens when the whole move helps. Queues A and B (quota 0, weight 1), one
 * node with 4 GPUs. Gang a (4 x 1 GPU, min_member 4) runs in A; gang b (2 x 1 GPU, min_member 2)
 * arrives in B. Fair shares 2000 each. b gains 2000, a goes whole (-4000): |4000 - 2000| +
 * |0 - 2000| = 4000 before, |0 - 2000| + |2000 - 2000| = 2000 after, lower: b reclaims, one
 * RECLAIM eviction and three GANG evictions. Then B is at its share, so a (which needs all 4
 * GPUs) cannot reclaim back, and further cycles change nothing. */
static void test_gang_reclaims_whole_gang_when_the_move_lowers_unfairness(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, true, false);
    add_node(&w, "n0", 4, "A100", 64000);
    engine_start(&w, false, true, false);
    uint32_t qa = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t qb = queue(&w, "b", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec sa = {"a", 4, 0}, sb = {"b", 2, 0};
    uint32_t ga, gb;
    assert_int_equal(gs_engine_add_gang(w.e, &sa, &ga), GS_OK);
    assert_int_equal(gs_engine_add_gang(w.e, &sb, &gb), GS_OK);
    for (int i = 0; i < 4; i++)
        submit(&w, qa, pc, ga, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(running_in(&w, qa), 4);
    uint32_t b0 = submit(&w, qb, pc, gb, 1, 1000, 10, -1, GS_MODEL_ANY);
    uint32_t b1 = submit(&w, qb, pc, gb, 1, 1000, 10, -1, GS_MODEL_ANY);
    cycle(&w, 20);
    assert_int_equal(state(&w, b0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, b1), GS_TPOD_RUNNING);
    assert_int_equal(running_in(&w, qa), 0);
    assert_int_equal(w.evictions[GS_EVICT_RECLAIM], 1);
    assert_int_equal(w.evictions[GS_EVICT_GANG], 3);
    for (int t = 0; t < 10; t++)
        cycle(&w, 30 + t);
    assert_int_equal(evictions_total(&w), 4);
    assert_int_equal(running_in(&w, qb), 2);
    world_fini(&w);
}

/* Members above min_member are victims one at a time. One node with 2 GPUs; gang v (2 x 1 GPU,
 * min_member 1, priority 10) runs both members; a priority-50 pod of 1 GPU arrives in the same
 * queue. Evicting one member leaves v at 1 running = min_member, so exactly one goes: the
 * newest, v1 (both started at t=0; v1 was created after v0). v0 keeps running. */
static void test_preemption_takes_one_surplus_gang_member_not_the_gang(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, false, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 50);
    struct gs_gang_spec gs = {"v", 1, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    uint32_t v0 = submit(&w, a, low, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t v1 = submit(&w, a, low, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(state(&w, v0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, v1), GS_TPOD_RUNNING);
    uint32_t h = submit(&w, a, high, GS_NO_GANG, 1, 1000, 10, -1, GS_MODEL_ANY);
    cycle(&w, 20);
    assert_int_equal(state(&w, h), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, v0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, v1), GS_TPOD_PENDING);
    assert_int_equal(w.evictions[GS_EVICT_PREEMPT], 1);
    assert_int_equal(w.evictions[GS_EVICT_GANG], 0);
    assert_int_equal(w.last_evicted, v1);
    assert_int_equal(w.last_evicted_by, h);
    /* Nothing more moves: the node is full and v holds its minimum. */
    for (int t = 0; t < 5; t++)
        cycle(&w, 30 + t);
    assert_int_equal(evictions_total(&w), 1);
    world_fini(&w);
}

/* A gang whose minimum can never fit under its queue's limit is refused, with the reason, at the
 * submit that shows it: queue q is limited to 1 GPU, gang g has min_member 2 x 1 GPU. The first
 * member alone (1000 <= 1000) may still fit; the second makes the minimum 2000 > 1000. The pods
 * stay pending and are never tried. Raising the limit to 2 GPUs clears the refusal and both
 * start in the next cycle. Lowering it below what q holds is taken and evicts nothing. */
static void test_gang_above_queue_limit_is_refused_with_reason(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0, 1000, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec gs = {"g", 2, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    struct gs_tpod_spec s = {"p", q, pc, g, GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY), -1};
    uint32_t m0 = UINT32_MAX, m1 = UINT32_MAX;
    assert_int_equal(gs_engine_submit(w.e, &s, 0, &m0), GS_OK);
    struct gs_gang_info gi;
    assert_int_equal(gs_engine_gang_info(w.e, g, &gi), GS_OK);
    assert_false(gi.refused);
    assert_string_equal(gi.reason, "");
    assert_int_equal(gs_engine_submit(w.e, &s, 0, &m1), GS_ELIMIT);
    assert_int_equal(m1, m0 + 1); /* added all the same */
    assert_int_equal(gs_engine_gang_info(w.e, g, &gi), GS_OK);
    assert_true(gi.refused);
    assert_int_equal(gi.members, 2);
    assert_string_equal(gi.reason,
                        "gang g needs 2 GPUs at minimum but queue q is limited to 1 GPU");
    for (int t = 0; t < 3; t++) {
        struct gs_cycle_stats st;
        assert_int_equal(gs_engine_cycle(w.e, 10 + t, NULL, &st), GS_OK);
        check(&w);
        assert_int_equal(st.attempts, 0);
        assert_int_equal(st.bound, 0);
    }
    assert_int_equal(state(&w, m0), GS_TPOD_PENDING);
    assert_int_equal(state(&w, m1), GS_TPOD_PENDING);
    struct gs_queue_spec up = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {2000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &up), GS_OK);
    assert_int_equal(gs_engine_gang_info(w.e, g, &gi), GS_OK);
    assert_false(gi.refused);
    cycle(&w, 20);
    assert_int_equal(state(&w, m0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, m1), GS_TPOD_RUNNING);
    /* q now holds 2000: a limit of 1000 is taken all the same, and evicts nothing. */
    struct gs_queue_spec down = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {1000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &down), GS_OK);
    cycle(&w, 21);
    assert_int_equal(state(&w, m0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, m1), GS_TPOD_RUNNING);
    assert_int_equal(evictions_total(&w), 0);
    struct gs_queue_spec renamed = {"r", GS_QUEUE_ROOT, {0, 0, 0}, {2000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &renamed), GS_EINVAL);
    assert_int_equal(gs_engine_update_queue(w.e, GS_QUEUE_ROOT, &up), GS_EINVAL);
    world_fini(&w);
}

/* Queue edits while pods run (a Queue object edited, deleted, created again). q (limit 3 GPUs)
 * runs p0..p2 (1 GPU each) on n0 (4 GPUs). Its limit drops to 1 GPU: nothing is evicted, and p3
 * waits "at its limit of 1 GPU" while q holds 3, then 1 (p0, p1 finished: 1000 + 1000 > 1000),
 * and starts when p2 has finished too (0 + 1000 <= 1000). p4 then waits at the limit; q is
 * deleted: p3 keeps running, p4's reason becomes "queue q does not exist" at the next cycle
 * though no node changed. q created again with a limit of 4 GPUs: p4 starts (2 GPUs used). */
static void test_queue_limit_lowered_and_queue_deleted_evict_nothing(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 4, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0, 3000, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    uint32_t p[5];
    for (int i = 0; i < 3; i++)
        p[i] = submit(&w, q, pc, GS_NO_GANG, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 1);
    assert_int_equal(running_in(&w, q), 3);
    struct gs_queue_spec down = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {1000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &down), GS_OK);
    p[3] = submit(&w, q, pc, GS_NO_GANG, 1, 1000, 2, -1, GS_MODEL_ANY);
    cycle(&w, 3);
    assert_int_equal(running_in(&w, q), 3);
    assert_int_equal(evictions_total(&w), 0);
    assert_int_equal(state(&w, p[3]), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, p[3]), "queue q is at its limit of 1 GPU");
    assert_int_equal(gs_engine_finish(w.e, p[0], 4), GS_OK);
    assert_int_equal(gs_engine_finish(w.e, p[1], 4), GS_OK);
    cycle(&w, 5);
    assert_int_equal(state(&w, p[3]), GS_TPOD_PENDING);
    assert_int_equal(gs_engine_finish(w.e, p[2], 6), GS_OK);
    cycle(&w, 7);
    assert_int_equal(state(&w, p[3]), GS_TPOD_RUNNING);
    p[4] = submit(&w, q, pc, GS_NO_GANG, 1, 1000, 8, -1, GS_MODEL_ANY);
    cycle(&w, 9);
    assert_string_equal(gs_engine_pod_reason(w.e, p[4]), "queue q is at its limit of 1 GPU");
    assert_int_equal(gs_engine_delete_queue(w.e, q), GS_OK);
    cycle(&w, 10);
    assert_int_equal(state(&w, p[3]), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, p[4]), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, p[4]), "queue q does not exist");
    assert_int_equal(evictions_total(&w), 0);
    struct gs_queue_info qi;
    assert_int_equal(gs_engine_queue_info(w.e, q, &qi), GS_OK);
    assert_int_equal(qi.limit[GS_RES_GPU], 0);
    assert_int_equal(qi.allocated[GS_RES_GPU], 1000); /* p3 stays charged */
    struct gs_queue_spec again = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {4000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &again), GS_OK);
    cycle(&w, 11);
    assert_int_equal(state(&w, p[4]), GS_TPOD_RUNNING);
    assert_int_equal(gs_cluster_gpu_milli_used(w.c), 2000);
    /* The root, an unknown id and a queue with a live child cannot be deleted. */
    uint32_t dept = queue(&w, "dept", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t team = queue(&w, "team", dept, 0, INF, 1);
    assert_int_equal(gs_engine_delete_queue(w.e, GS_QUEUE_ROOT), GS_EINVAL);
    assert_int_equal(gs_engine_delete_queue(w.e, 99), GS_EINVAL);
    assert_int_equal(gs_engine_delete_queue(w.e, dept), GS_EINVAL);
    assert_int_equal(gs_engine_delete_queue(w.e, team), GS_OK);
    assert_int_equal(gs_engine_delete_queue(w.e, dept), GS_OK);
    check(&w);
    world_fini(&w);
}

/* A PodGroup's minMember edited before its gang starts: gang g (min_member 3) has 2 members on
 * a node of 2 GPUs and waits ("2 of 3 members exist"); min_member 2 lets both start at the next
 * cycle. Once started its minimum is fixed. */
static void test_gang_min_member_changes_until_it_starts(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 2, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec gs = {"g", 3, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    uint32_t m0 = submit(&w, q, pc, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t m1 = submit(&w, q, pc, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 1);
    assert_int_equal(state(&w, m0), GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, m0),
                        "gang g (min_member 3, 0 running): 2 of 3 members exist");
    assert_int_equal(gs_engine_set_gang_min_member(w.e, g, 0), GS_EINVAL);
    assert_int_equal(gs_engine_set_gang_min_member(w.e, g + 1, 2), GS_EINVAL);
    assert_int_equal(gs_engine_set_gang_min_member(w.e, g, 2), GS_OK);
    cycle(&w, 2);
    assert_int_equal(state(&w, m0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, m1), GS_TPOD_RUNNING);
    assert_int_equal(gs_engine_set_gang_min_member(w.e, g, 1), GS_EINVAL);
    struct gs_gang_info gi;
    assert_int_equal(gs_engine_gang_info(w.e, g, &gi), GS_OK);
    assert_int_equal(gi.min_member, 2);
    world_fini(&w);
}

/* Finished members count toward min_member. Gang h (min_member 2, 1 GPU each) runs h0 and h1
 * in queue q (limit 2 GPUs); h0 finishes; h1 is deleted, so h runs nothing, with 1 finished.
 * q's limit drops to 1 GPU (q holds 0). h2 and h3 arrive: h needs 2 - 1 finished = 1 more pod,
 * the smallest of h2, h3: 1000 <= 1000, not refused (counting h0 as missing would make it
 * 2000 > 1000). The next cycle starts h2 alone (h3 would put q above 1 GPU). */
static void test_finished_members_count_toward_gang_minimum(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 4, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t q = queue(&w, "q", GS_QUEUE_ROOT, 0, 2000, 1);
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_gang_spec hs = {"h", 2, 0};
    uint32_t h;
    assert_int_equal(gs_engine_add_gang(w.e, &hs, &h), GS_OK);
    uint32_t h0 = submit(&w, q, pc, h, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t h1 = submit(&w, q, pc, h, 1, 1000, 0, -1, GS_MODEL_ANY);
    cycle(&w, 0);
    assert_int_equal(state(&w, h0), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, h1), GS_TPOD_RUNNING);
    assert_int_equal(gs_engine_finish(w.e, h0, 5), GS_OK);
    assert_int_equal(gs_engine_delete(w.e, h1, 6), GS_OK);
    check(&w);
    struct gs_queue_spec down = {"q", GS_QUEUE_ROOT, {0, 0, 0}, {1000, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_update_queue(w.e, q, &down), GS_OK);
    uint32_t h2 = submit(&w, q, pc, h, 1, 1000, 7, -1, GS_MODEL_ANY);
    uint32_t h3 = submit(&w, q, pc, h, 1, 1000, 7, -1, GS_MODEL_ANY);
    struct gs_gang_info gi;
    assert_int_equal(gs_engine_gang_info(w.e, h, &gi), GS_OK);
    assert_false(gi.refused);
    assert_int_equal(gi.succeeded, 1);
    assert_int_equal(gi.pending, 2);
    cycle(&w, 10);
    assert_int_equal(state(&w, h2), GS_TPOD_RUNNING);
    assert_int_equal(state(&w, h3), GS_TPOD_PENDING);
    world_fini(&w);
}

/* A gang never preempts its own members. One node with 1 GPU; gang g (min_member 2 x 1 GPU) has
 * members of priority 10 (m0, created first) and 50 (m1). In preemption mode m0 is placed first,
 * then m1 finds no room; m0 is of lower priority but in m1's own gang (and bound in this same
 * trial), so it is no victim. The gang cannot reach 2 and is rolled back: it never starts, and
 * no BIND or EVICT event is ever reported (before: m1 evicted m0, and the stream reported the
 * eviction of a pod it had never reported bound, with the gang running 1 of 2). */
static void test_gang_never_preempts_its_own_members(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, true, true, false);
    add_node(&w, "n0", 1, "A100", 64000);
    engine_start(&w, true, true, false);
    uint32_t a = queue(&w, "a", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t low = pclass(&w, "low", 10), high = pclass(&w, "high", 50);
    struct gs_gang_spec gs = {"g", 2, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    uint32_t m0 = submit(&w, a, low, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    uint32_t m1 = submit(&w, a, high, g, 1, 1000, 0, -1, GS_MODEL_ANY);
    for (int t = 0; t < 5; t++)
        cycle(&w, t);
    assert_int_equal(state(&w, m0), GS_TPOD_PENDING);
    assert_int_equal(state(&w, m1), GS_TPOD_PENDING);
    assert_int_equal(w.binds, 0);
    assert_int_equal(evictions_total(&w), 0);
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w.e, m0, &in), GS_OK);
    assert_int_equal(in.evictions, 0);
    assert_int_equal(gs_cluster_gpu_milli_used(w.c), 0);
    /* The reason the issue asks for: one member fits on the single GPU, the minimum is 2.
     * m1 (priority 50) heads the gang's trial. */
    assert_string_equal(gs_engine_pod_reason(w.e, m1),
                        "gang g (min_member 2, 0 running): 1 of 2 members fit");
    world_fini(&w);
}

/* Configuration errors: children's quotas above the parent's, limit under quota, unknown
 * parent, duplicate name. */
static void test_queue_tree_validation(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t dept = queue(&w, "dept", GS_QUEUE_ROOT, 4000, INF, 1);
    queue(&w, "t1", dept, 3000, INF, 1);
    struct gs_queue_spec over = {"t2", dept, {2000, 0, 0}, {INF, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w.e, &over, NULL), GS_EINVAL);
    struct gs_queue_spec badlimit = {"t3", dept, {1000, 0, 0}, {500, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w.e, &badlimit, NULL), GS_EINVAL);
    struct gs_queue_spec orphan = {"t4", 99, {0, 0, 0}, {INF, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w.e, &orphan, NULL), GS_ENOENT);
    struct gs_queue_spec dup = {"t1", dept, {0, 0, 0}, {INF, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w.e, &dup, NULL), GS_EEXIST);
    /* Pods go to leaves only. */
    uint32_t pc = pclass(&w, "normal", 10);
    struct gs_tpod_spec s = {"p", dept, pc, GS_NO_GANG, GS_POD_REQ(1000, 0, 1, 1000, GS_MODEL_ANY),
                             -1};
    assert_int_equal(gs_engine_submit(w.e, &s, 0, NULL), GS_EINVAL);
    world_fini(&w);
}

/* Queue paths as usage records name them: top-level first, '/' between, cut on a name. */
static void test_queue_path(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, false, false, false);
    add_node(&w, "n0", 8, "A100", 64000);
    engine_start(&w, false, false, false);
    uint32_t org = queue(&w, "org", GS_QUEUE_ROOT, 0, INF, 1);
    uint32_t team = queue(&w, "team", org, 0, INF, 1);
    uint32_t dev = queue(&w, "dev", team, 0, INF, 1);
    char buf[64];
    const char *top = "x";
    assert_int_equal(gs_engine_queue_path(w.e, dev, buf, sizeof buf, &top), GS_OK);
    assert_string_equal(buf, "org/team/dev");
    assert_string_equal(top, "org");
    assert_int_equal(gs_engine_queue_path(w.e, org, buf, sizeof buf, &top), GS_OK);
    assert_string_equal(buf, "org");
    assert_string_equal(top, "org");
    assert_int_equal(gs_engine_queue_path(w.e, GS_QUEUE_ROOT, buf, sizeof buf, &top), GS_OK);
    assert_string_equal(buf, "");
    assert_null(top);
    /* "org/team" is 8 bytes: with cap 12 the third name does not fit and is left out whole. */
    assert_int_equal(gs_engine_queue_path(w.e, dev, buf, 12, NULL), GS_EINVAL);
    assert_string_equal(buf, "org/team");
    assert_int_equal(gs_engine_queue_path(w.e, 99, buf, sizeof buf, &top), GS_EINVAL);
    assert_string_equal(buf, "");
    assert_null(top);
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_borrows_idle_quota),
        cmocka_unit_test(test_queue_path),
        cmocka_unit_test(test_owner_reclaims_lent_quota),
        cmocka_unit_test(test_limit_caps_borrowing),
        cmocka_unit_test(test_over_quota_split_by_weight_1_to_3),
        cmocka_unit_test(test_priority_preempts_shortest_running_low_pod),
        cmocka_unit_test(test_non_preemptible_pod_never_evicted),
        cmocka_unit_test(test_never_pod_waits_instead_of_preempting),
        cmocka_unit_test(test_never_pod_still_reclaims_lent_quota),
        cmocka_unit_test(test_gang_is_all_or_nothing),
        cmocka_unit_test(test_two_100_gpu_gangs_on_150_gpus_no_partial_hold),
        cmocka_unit_test(test_no_reclaim_ping_pong_between_two_queues),
        cmocka_unit_test(test_reclaim_judged_on_needed_resource_not_borrowed_cpu),
        cmocka_unit_test(test_pending_h100_job_does_not_block_a100_job),
        cmocka_unit_test(test_backfill_that_would_delay_reservation_is_refused),
        cmocka_unit_test(test_gang_times_out_whole),
        cmocka_unit_test(test_preemption_evicts_whole_gang),
        cmocka_unit_test(test_queue_tree_validation),
        cmocka_unit_test(test_equal_gangs_in_two_queues_do_not_reclaim_each_other),
        cmocka_unit_test(test_gang_reclaims_whole_gang_when_the_move_lowers_unfairness),
        cmocka_unit_test(test_preemption_takes_one_surplus_gang_member_not_the_gang),
        cmocka_unit_test(test_gang_above_queue_limit_is_refused_with_reason),
        cmocka_unit_test(test_finished_members_count_toward_gang_minimum),
        cmocka_unit_test(test_queue_limit_lowered_and_queue_deleted_evict_nothing),
        cmocka_unit_test(test_gang_min_member_changes_until_it_starts),
        cmocka_unit_test(test_gang_never_preempts_its_own_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
