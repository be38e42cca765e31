/*
 * The engine in a live cluster, worked by hand: pods with uids and filters, adopt after a
 * restart (known and unknown GPUs), pods of another scheduler, node removal (node-lost), the
 * event stream (every EVICT after a BIND or ADOPT of the same pod), reasons emitted once per
 * change, queue-limit messages, forget and handles, and evicted pods that end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/tenant.h"

#define MAX_EV 256

struct rec {
    enum gs_event_kind kind;
    uint32_t pod;
    enum gs_evict_reason reason;
    uint32_t node;
    char text[512];
};

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t q1, q2, pc_low, pc_high;
    struct rec ev[MAX_EV];
    uint32_t nev;
    bool bound[64]; /* pod -> reported BIND/ADOPT and not yet ended */
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    assert_true(w->nev < MAX_EV);
    struct rec *r = &w->ev[w->nev++];
    memset(r, 0, sizeof(*r));
    r->kind = ev->kind;
    r->pod = ev->pod;
    r->reason = ev->reason;
    r->node = ev->pl ? ev->pl->node : UINT32_MAX;
    if (ev->text)
        (void)snprintf(r->text, sizeof(r->text), "%s", ev->text);
    assert_true(ev->pod < 64);
    switch (ev->kind) {
    case GS_EV_BIND:
    case GS_EV_BACKFILL:
    case GS_EV_ADOPT:
        assert_false(w->bound[ev->pod]);
        w->bound[ev->pod] = true;
        break;
    case GS_EV_EVICT:
    case GS_EV_FINISH:
        /* Never an eviction or finish of a pod that was not reported bound. */
        assert_true(w->bound[ev->pod]);
        w->bound[ev->pod] = false;
        break;
    case GS_EV_DELETE:
        assert_true(ev->pl == NULL || w->bound[ev->pod]);
        w->bound[ev->pod] = false;
        break;
    default:
        break;
    }
    /* The callback may read the engine. */
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w->e, ev->pod, &info), GS_OK);
}

static void add_node(struct world *w, const char *name, uint32_t gpus)
{
    struct gs_node_spec s = {name, 64000, 1 << 20, 110, gpus, "A100", 81920};
    assert_int_equal(gs_cluster_add_node(w->c, &s, NULL), GS_OK);
}

static void world_init(struct world *w, int64_t q1_gpu_limit, bool evict_ends)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .preemption = true,
                                   .reclaim = true,
                                   .evict_ends_pod = evict_ends,
                                   .on_event = on_event,
                                   .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
    struct gs_queue_spec q = {
        "research", GS_QUEUE_ROOT, {0, 0, 0}, {q1_gpu_limit, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w->e, &q, &w->q1), GS_OK);
    struct gs_queue_spec q2 = {
        "infer", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w->e, &q2, &w->q2), GS_OK);
    struct gs_priority_class_spec lo = {"low", 10, 1}, hi = {"high", 50, 1};
    assert_int_equal(gs_engine_add_priority_class(w->e, &lo, &w->pc_low), GS_OK);
    assert_int_equal(gs_engine_add_priority_class(w->e, &hi, &w->pc_high), GS_OK);
}

static void world_fini(struct world *w)
{
    char msg[256];
    assert_int_equal(gs_engine_check(w->e, msg, sizeof(msg)), GS_OK);
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static struct gs_tpod_spec pod_spec(uint32_t queue, uint32_t pc, uint32_t gpus, int32_t milli)
{
    struct gs_tpod_spec s = {.name = "p",
                             .queue = queue,
                             .priority_class = pc,
                             .gang = GS_NO_GANG,
                             .req = {1000, 1024, gpus, gpus ? milli : 0, GS_MODEL_ANY},
                             .runtime_estimate_ms = -1};
    return s;
}

static uint32_t submit(struct world *w, const char *uid, uint32_t queue, uint32_t pc, uint32_t gpus,
                       uint32_t cls)
{
    struct gs_tpod_spec s = pod_spec(queue, pc, gpus, 1000);
    struct gs_pod_ident id = {uid, "default", uid, cls, 0, false};
    uint32_t pod;
    assert_int_equal(gs_engine_submit_pod(w->e, &s, &id, 0, &pod), GS_OK);
    return pod;
}

static uint32_t count(const struct world *w, enum gs_event_kind kind)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->nev; i++)
        n += w->ev[i].kind == kind;
    return n;
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    char msg[256];
    assert_int_equal(gs_engine_check(w->e, msg, sizeof(msg)), GS_OK);
}

static void test_uid_lookup_and_selector_placement(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 8);
    add_node(&w, "b", 8);
    assert_int_equal(gs_cluster_set_label(w.c, 1, "pool", "train"), GS_OK);
    const char *sel[] = {"pool=train"};
    struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 1};
    uint32_t cls;
    assert_int_equal(gs_filter_intern(w.c, &f, &cls), GS_OK);
    uint32_t p = submit(&w, "uid-1", w.q1, w.pc_low, 1, cls);
    gs_filter_release(w.c, cls); /* the pod holds its own reference */
    assert_int_equal(gs_engine_find_pod(w.e, "uid-1"), p);
    assert_int_equal(gs_engine_find_pod(w.e, "uid-2"), -1);
    /* A duplicate uid is refused. */
    struct gs_tpod_spec s = pod_spec(w.q1, w.pc_low, 1, 1000);
    struct gs_pod_ident dup = {"uid-1", "default", "x", GS_FILTER_DEFAULT, 0, false};
    assert_int_equal(gs_engine_submit_pod(w.e, &s, &dup, 0, NULL), GS_EEXIST);
    cycle(&w, 1000);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, p, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    assert_int_equal(info.pl.node, 1); /* the only node with pool=train */
    assert_string_equal(info.uid, "uid-1");
    assert_string_equal(info.ns, "default");
    assert_int_equal(w.ev[0].kind, GS_EV_SUBMIT);
    assert_int_equal(w.ev[1].kind, GS_EV_BIND);
    world_fini(&w);
}

static void test_adopt_after_restart_keeps_assignments(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 4);
    /* Before the restart: pods on GPUs 1 and 2 (known), and one whose GPUs are unknown. */
    struct gs_tpod_spec s = pod_spec(w.q1, w.pc_low, 1, 1000);
    struct gs_pod_ident i1 = {"u1", "ns", "p1", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement on1 = {0, 1, {1}, 1000};
    uint32_t p1, p2, p3;
    assert_int_equal(gs_engine_adopt(w.e, &s, &i1, &on1, 100, &p1), GS_OK);
    struct gs_tpod_spec half = pod_spec(w.q1, w.pc_low, 1, 500);
    struct gs_pod_ident i2 = {"u2", "ns", "p2", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement on2 = {0, 1, {2}, 500};
    assert_int_equal(gs_engine_adopt(w.e, &half, &i2, &on2, 100, &p2), GS_OK);
    struct gs_pod_ident i3 = {"u3", "ns", "p3", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement unknown = {0, 0, {0}, 0};
    assert_int_equal(gs_engine_adopt(w.e, &s, &i3, &unknown, 100, &p3), GS_OK);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, p3, &info), GS_OK);
    /* Lowest-indexed untouched healthy GPU: 0. */
    assert_int_equal(info.pl.num_gpu, 1);
    assert_int_equal(info.pl.gpu_index[0], 0);
    assert_true(info.adopted);
    assert_int_equal(count(&w, GS_EV_ADOPT), 3);
    /* Over-commit refused: GPU 1 is whole taken. */
    struct gs_pod_ident i4 = {"u4", "ns", "p4", GS_FILTER_DEFAULT, 0, false};
    assert_int_equal(gs_engine_adopt(w.e, &s, &i4, &on1, 100, NULL), GS_EINVAL);
    assert_int_equal(gs_engine_find_pod(w.e, "u4"), -1); /* nothing left behind */
    /* Two new 1-GPU pods: one fits (GPU 3), the other waits. No GPU is handed out twice. */
    uint32_t n1 = submit(&w, "n1", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    uint32_t n2 = submit(&w, "n2", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    cycle(&w, 1000);
    assert_int_equal(gs_engine_pod_info(w.e, n1, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    assert_int_equal(info.pl.gpu_index[0], 3);
    assert_int_equal(gs_engine_pod_info(w.e, n2, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, n2),
                        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.");
    /* A queue over its limit after adopt takes no new pods, and says so. */
    struct world v;
    world_init(&v, 1000, false);
    add_node(&v, "a", 4);
    struct gs_pod_ident j1 = {"u1", "ns", "p1", GS_FILTER_DEFAULT, 0, false};
    struct gs_pod_ident j2 = {"u2", "ns", "p2", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement g0 = {0, 1, {0}, 1000}, g1 = {0, 1, {1}, 1000};
    struct gs_tpod_spec sv = pod_spec(v.q1, v.pc_low, 1, 1000);
    assert_int_equal(gs_engine_adopt(v.e, &sv, &j1, &g0, 0, NULL), GS_OK);
    assert_int_equal(gs_engine_adopt(v.e, &sv, &j2, &g1, 0, NULL), GS_OK); /* limit 1: books only */
    uint32_t late = submit(&v, "late", v.q1, v.pc_low, 1, GS_FILTER_DEFAULT);
    assert_int_equal(gs_engine_cycle(v.e, 1000, NULL, NULL), GS_OK);
    assert_string_equal(gs_engine_pod_reason(v.e, late), "queue research is at its limit of 1 GPU");
    gs_engine_free(v.e);
    gs_cluster_free(v.c);
    world_fini(&w);
}

/* A time-sliced pod asks num_gpu 0 and timeslice_slots 2: its placement's two GPUs are kept on
 * adopt (they were cleared as "no GPU" before), one slot taken on each. */
static void test_adopt_keeps_time_sliced_slots(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    struct gs_gpu_mode ts = {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4};
    assert_int_equal(gs_cluster_set_gpu_mode(w.c, 0, 0, &ts, NULL, 0), GS_OK);
    assert_int_equal(gs_cluster_set_gpu_mode(w.c, 0, 1, &ts, NULL, 0), GS_OK);
    struct gs_tpod_spec s = pod_spec(w.q1, w.pc_low, 0, 0);
    s.req.timeslice_slots = 2;
    struct gs_pod_ident i1 = {"u1", "ns", "p1", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement on = {0, 2, {0, 1}, 0};
    uint32_t p1;
    assert_int_equal(gs_engine_adopt(w.e, &s, &i1, &on, 100, &p1), GS_OK);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, p1, &info), GS_OK);
    assert_int_equal(info.pl.num_gpu, 2);
    const struct gs_node *n = gs_cluster_node(w.c, 0);
    assert_int_equal(n->gpus[0].replicas_used, 1);
    assert_int_equal(n->gpus[1].replicas_used, 1);
    world_fini(&w);
}

static void test_foreign_pods_hold_capacity_and_are_never_victims(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    /* kube-scheduler bound a 1-GPU pod; we do not know which GPU. */
    struct gs_tpod_spec s = pod_spec(w.q1, w.pc_low, 1, 1000);
    struct gs_pod_ident f = {"kube-1", "ns", "other", GS_FILTER_DEFAULT, 0, true};
    struct gs_placement unknown = {0, 0, {0}, 0};
    uint32_t fp;
    assert_int_equal(gs_engine_adopt(w.e, &s, &f, &unknown, 0, &fp), GS_OK);
    struct gs_queue_info qi;
    assert_int_equal(gs_engine_queue_info(w.e, w.q1, &qi), GS_OK);
    assert_int_equal(qi.allocated[GS_RES_GPU], 0); /* not charged to research */
    /* Two high-priority pods: one runs on the free GPU, the other cannot evict the foreign pod. */
    uint32_t a = submit(&w, "a", w.q1, w.pc_high, 1, GS_FILTER_DEFAULT);
    uint32_t b = submit(&w, "b", w.q1, w.pc_high, 1, GS_FILTER_DEFAULT);
    cycle(&w, 1000);
    cycle(&w, 2000);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, a, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    assert_int_equal(info.pl.gpu_index[0], 1);
    assert_int_equal(gs_engine_pod_info(w.e, b, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_PENDING);
    assert_int_equal(count(&w, GS_EV_EVICT), 0);
    /* Fair share is computed on the capacity beside the foreign pod: 1 GPU. */
    assert_int_equal(gs_engine_queue_info(w.e, w.q1, &qi), GS_OK);
    assert_int_equal(qi.fair[GS_RES_GPU], 1000);
    /* When it finishes, b takes its GPU. */
    assert_int_equal(gs_engine_finish(w.e, fp, 3000), GS_OK);
    cycle(&w, 3000);
    assert_int_equal(gs_engine_pod_info(w.e, b, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    world_fini(&w);
}

static void test_remove_node_evicts_node_lost(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    add_node(&w, "b", 2);
    uint32_t p0 = submit(&w, "p0", w.q1, w.pc_low, 2, GS_FILTER_DEFAULT);
    uint32_t p1 = submit(&w, "p1", w.q1, w.pc_low, 2, GS_FILTER_DEFAULT);
    cycle(&w, 1000);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, p0, &info), GS_OK);
    uint32_t node = info.pl.node;
    uint32_t nev = w.nev;
    assert_int_equal(gs_engine_remove_node(w.e, node, 2000), GS_OK);
    assert_int_equal(w.nev, nev + 1);
    assert_int_equal(w.ev[nev].kind, GS_EV_EVICT);
    assert_int_equal(w.ev[nev].pod, p0);
    assert_int_equal(w.ev[nev].reason, GS_EVICT_NODE_LOST);
    assert_int_equal(w.ev[nev].node, node);
    assert_int_equal(gs_cluster_nodes_present(w.c), 1);
    /* The evicted pod waits again; the other node is full; it says why. */
    cycle(&w, 3000);
    assert_int_equal(gs_engine_pod_info(w.e, p0, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_PENDING);
    assert_int_equal(info.last_evict_reason, GS_EVICT_NODE_LOST);
    assert_string_equal(gs_engine_pod_reason(w.e, p0),
                        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.");
    assert_int_equal(gs_engine_pod_info(w.e, p1, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    /* A node comes back (a new slot or the old one): the pod runs there. */
    add_node(&w, "c", 2);
    cycle(&w, 4000);
    assert_int_equal(gs_engine_pod_info(w.e, p0, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    world_fini(&w);
}

static void test_unschedulable_is_emitted_once_per_change(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    uint32_t p = submit(&w, "big", w.q1, w.pc_low, 4, GS_FILTER_DEFAULT);
    for (int i = 0; i < 5; i++)
        cycle(&w, 1000 * (i + 1));
    assert_int_equal(count(&w, GS_EV_UNSCHEDULABLE), 1);
    /* 4 GPUs on a node of 2: it fits no node even when empty (test_tenant_xqueue.c). */
    assert_string_equal(w.ev[1].text,
                        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. It fits no node "
                        "even when empty: the most GPUs on a node that passes its filters is 2, "
                        "it asks 4.");
    /* Cordon the node: the reason changes, one more event. */
    assert_int_equal(gs_cluster_set_unschedulable(w.c, 0, true), GS_OK);
    cycle(&w, 9000);
    cycle(&w, 10000);
    assert_int_equal(count(&w, GS_EV_UNSCHEDULABLE), 2);
    assert_string_equal(gs_engine_pod_reason(w.e, p),
                        "0/1 nodes are available: 1 node(s) were unschedulable. It fits no node: "
                        "none passes its filters.");
    world_fini(&w);
}

static void test_forget_frees_the_slot_and_handles_tell(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    uint32_t p = submit(&w, "old", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    uint64_t h = gs_engine_pod_handle(w.e, p);
    cycle(&w, 1000);
    assert_int_equal(gs_engine_forget(w.e, p), GS_EINVAL); /* still running */
    assert_int_equal(gs_engine_finish(w.e, p, 2000), GS_OK);
    assert_int_equal(gs_engine_forget(w.e, p), GS_OK);
    assert_int_equal(gs_engine_find_pod(w.e, "old"), -1);
    uint32_t q;
    assert_int_equal(gs_engine_pod_resolve(w.e, h, &q), GS_ENOENT);
    /* The next pod reuses the slot under a new handle; the old one still does not resolve. */
    uint32_t r = submit(&w, "new", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    assert_int_equal(r, p);
    assert_int_equal(gs_engine_pod_count(w.e), 1);
    assert_int_equal(gs_engine_pod_resolve(w.e, h, &q), GS_ENOENT);
    assert_int_equal(gs_engine_pod_resolve(w.e, gs_engine_pod_handle(w.e, r), &q), GS_OK);
    assert_int_equal(gs_engine_find_pod(w.e, "new"), r);
    memset(w.bound, 0, sizeof(w.bound)); /* slot reused: the event checker restarts */
    cycle(&w, 3000);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, r, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    world_fini(&w);
}

static void test_evicted_pod_ends_when_configured(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, GS_UNLIMITED, true);
    add_node(&w, "a", 1);
    uint32_t low = submit(&w, "low", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    cycle(&w, 1000);
    uint32_t high = submit(&w, "high", w.q1, w.pc_high, 1, GS_FILTER_DEFAULT);
    cycle(&w, 2000);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w.e, low, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_FAILED); /* gone, as in Kubernetes */
    assert_int_equal(info.last_evict_reason, GS_EVICT_PREEMPT);
    assert_int_equal(gs_engine_pod_info(w.e, high, &info), GS_OK);
    assert_int_equal(info.state, GS_TPOD_RUNNING);
    struct gs_queue_info qi;
    assert_int_equal(gs_engine_queue_info(w.e, w.q1, &qi), GS_OK);
    assert_int_equal(qi.pending, 0);
    assert_int_equal(qi.demand[GS_RES_GPU], 1000);
    world_fini(&w);
}

static void test_unhealthy_gpu_pod_can_still_be_a_victim(void **state)
{
    (void)state;
    /* A low pod on a GPU that went unhealthy is restored exactly after a victim search that
     * does not pick it, and the high pod never lands on the unhealthy GPU. */
    struct world w;
    world_init(&w, GS_UNLIMITED, false);
    add_node(&w, "a", 2);
    uint32_t l0 = submit(&w, "l0", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    uint32_t l1 = submit(&w, "l1", w.q1, w.pc_low, 1, GS_FILTER_DEFAULT);
    cycle(&w, 1000);
    struct gs_tpod_info i0, i1;
    assert_int_equal(gs_engine_pod_info(w.e, l0, &i0), GS_OK);
    assert_int_equal(gs_engine_pod_info(w.e, l1, &i1), GS_OK);
    assert_int_equal(gs_cluster_set_gpu_health(w.c, 0, i0.pl.gpu_index[0], false), GS_OK);
    uint32_t h = submit(&w, "h", w.q1, w.pc_high, 1, GS_FILTER_DEFAULT);
    cycle(&w, 2000);
    struct gs_tpod_info ih;
    assert_int_equal(gs_engine_pod_info(w.e, h, &ih), GS_OK);
    assert_int_equal(ih.state, GS_TPOD_RUNNING);
    assert_int_equal(ih.pl.gpu_index[0], i1.pl.gpu_index[0]); /* the healthy GPU */
    assert_int_equal(gs_engine_pod_info(w.e, l1, &i1), GS_OK);
    assert_int_equal(i1.state, GS_TPOD_PENDING);
    assert_int_equal(gs_engine_pod_info(w.e, l0, &i0), GS_OK);
    assert_int_equal(i0.state, GS_TPOD_RUNNING); /* keeps running on the unhealthy GPU */
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uid_lookup_and_selector_placement),
        cmocka_unit_test(test_adopt_after_restart_keeps_assignments),
        cmocka_unit_test(test_adopt_keeps_time_sliced_slots),
        cmocka_unit_test(test_foreign_pods_hold_capacity_and_are_never_victims),
        cmocka_unit_test(test_remove_node_evicts_node_lost),
        cmocka_unit_test(test_unschedulable_is_emitted_once_per_change),
        cmocka_unit_test(test_forget_frees_the_slot_and_handles_tell),
        cmocka_unit_test(test_evicted_pod_ends_when_configured),
        cmocka_unit_test(test_unhealthy_gpu_pod_can_still_be_a_victim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
