/*
 * Out of memory in the core, as a tested path (STYLE.md; SQLite's test_malloc.c): this file
 * defines the core's allocation seam (src/core/alloc_int.h) itself, so the linker takes these
 * definitions instead of alloc.c's, and they fail the N-th allocation. A scenario of the live
 * cluster (nodes with labels and taints, queues, PriorityClasses, a gang with a grace period,
 * a selector and a pinned pod, cycles with preemption, a delete, a replacement, a node removal,
 * adopt, finish and forget) is run once for every N from 1 until a run makes no allocation
 * fail. Every call must return GS_OK or GS_ENOMEM (or what it returns without the failure), and
 * after every step gs_engine_check() must hold; the sanitizer build then reports any leak on a
 * failure path.
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
#include "gpusched/err.h"
#include "gpusched/cluster.h"
#include "gpusched/filter.h"
#include "gpusched/tenant.h"

/* ---- the failing allocator ---------------------------------------------------------------- */

static uint64_t alloc_count; /* allocations counted since the run began */
static uint64_t fail_at;     /* the allocation that fails (1-based); 0 none */
static bool paused;          /* the checker's own allocations are not counted */
static bool failed;          /* the run hit its failure */

static bool should_fail(void)
{
    if (paused)
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

/* ---- the scenario ------------------------------------------------------------------------- */

static uint32_t events[GS_EV_ADOPT + 1]; /* events of the last run, by kind */
static uint32_t repartitions;            /* dynamic MIG re-partitions reported, last run */

static void on_event(void *ctx, const struct gs_event *ev)
{
    (void)ctx;
    events[ev->kind]++;
    repartitions += ev->mig_repartitions;
}

struct run {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t steps;
};

static void check(struct run *r)
{
    r->steps++;
    if (!r->e)
        return;
    paused = true;
    char msg[256];
    int err = gs_engine_check(r->e, msg, sizeof(msg));
    paused = false;
    if (err != GS_OK)
        fail_msg("allocation %llu failed: invariant broken at step %u: %s",
                 (unsigned long long)fail_at, r->steps, msg);
}

/* rc must be GS_OK, GS_ENOMEM or `also` (what the call may return regardless). */
static bool ok(int rc, int also)
{
    if (rc != GS_OK && rc != GS_ENOMEM && rc != also)
        fail_msg("allocation %llu failed: unexpected return %d", (unsigned long long)fail_at, rc);
    return rc == GS_OK;
}

static void scenario(void)
{
    struct run r = {0};
    if (!ok(gs_cluster_new(&r.c), GS_OK))
        return;
    static const char *const names[] = {"a", "b", "c", "d"};
    for (uint32_t i = 0; i < 4; i++) {
        struct gs_node_spec s = {
            names[i], 32000, 65536, 110, i == 3 ? 0 : 4, i == 3 ? NULL : "A100", 81920};
        uint32_t id;
        if (ok(gs_cluster_add_node(r.c, &s, &id), GS_OK))
            (void)ok(gs_cluster_set_label(r.c, id, "zone", i % 2 ? "x" : "y"), GS_OK);
    }
    struct gs_taint t = {"dedicated", "infer", GS_TAINT_NO_SCHEDULE};
    if (gs_cluster_node_count(r.c) > 2)
        (void)ok(gs_cluster_set_taints(r.c, 2, &t, 1), GS_EINVAL);
    struct gs_engine_config cfg = {
        .policy = "bestfit", .preemption = true, .reclaim = true, .on_event = on_event};
    if (!ok(gs_engine_new(r.c, &cfg, &r.e), GS_OK)) {
        gs_cluster_free(r.c);
        return;
    }
    uint32_t q[2] = {UINT32_MAX, UINT32_MAX}, pc[2] = {UINT32_MAX, UINT32_MAX}, g = UINT32_MAX;
    for (uint32_t i = 0; i < 2; i++) {
        char name[8];
        (void)snprintf(name, sizeof(name), "q%u", i);
        /* q1 has an A100 entry (model 0; refused when no node brought the model in) that bounds
         * nothing, so the scenario runs as without it, through the per-model books. */
        struct gs_model_quota mq = {0, 0, GS_UNLIMITED};
        struct gs_queue_spec qs = {
            name, GS_QUEUE_ROOT,       {4000, 0, 0},  {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1,
            0,    i == 1 ? &mq : NULL, i == 1 ? 1 : 0};
        (void)ok(gs_engine_add_queue(r.e, &qs, &q[i]), GS_EINVAL);
        struct gs_priority_class_spec ps = {name, 10 + 40 * (int32_t)i, 1};
        (void)ok(gs_engine_add_priority_class(r.e, &ps, &pc[i]), GS_OK);
    }
    struct gs_gang_spec gs = {"g", 2, 0};
    if (ok(gs_engine_add_gang(r.e, &gs, &g), GS_OK))
        assert_int_equal(gs_engine_set_gang_grace(r.e, g, 10000), GS_OK);
    /* A disruption budget with no disruption left, covering every other pod below. */
    uint32_t budget = 0;
    if (!ok(gs_engine_add_budget(r.e, "ns/spent", 0, &budget), GS_OK))
        budget = 0;
    check(&r);
    /* Filters: a zone selector with a toleration, and a pin to node b. */
    const char *sel[] = {"zone=y"};
    struct gs_toleration tol = {"dedicated", GS_TOL_EXISTS, NULL, 0};
    struct gs_filter_spec fz = {
        .node_selector = sel, .n_node_selector = 1, .tolerations = &tol, .n_tolerations = 1};
    const char *bname[] = {"b"};
    struct gs_sel_expr x = {"metadata.name", GS_SEL_IN, true, bname, 1};
    struct gs_sel_term term = {&x, 1};
    struct gs_filter_spec fp = {.required = &term, .n_required = 1};
    uint32_t cz = GS_FILTER_DEFAULT, cp = GS_FILTER_DEFAULT;
    (void)ok(gs_filter_intern(r.c, &fz, &cz), GS_OK);
    (void)ok(gs_filter_intern(r.c, &fp, &cp), GS_OK);
    if (q[0] == UINT32_MAX || q[1] == UINT32_MAX || pc[0] == UINT32_MAX || pc[1] == UINT32_MAX ||
        g == UINT32_MAX)
        goto out;
    /* Pods: plain ones in both queues, three gang members, a selector pod, a pinned pod and a
     * CPU-only pod; the odd ones covered by the budget. */
    uint32_t pods[16], np = 0;
    for (uint32_t i = 0; i < 9; i++) {
        struct gs_tpod_spec s = {
            "p", q[i % 2], pc[0], GS_NO_GANG, GS_POD_REQ(1000, 1024, 1 + i % 2, 1000, GS_MODEL_ANY),
            -1};
        uint32_t cls = GS_FILTER_DEFAULT;
        if (i >= 3 && i < 6) {
            s.gang = g;
            s.queue = q[0];
        } else if (i == 6) {
            cls = cz;
        } else if (i == 7) {
            cls = cp;
        } else if (i == 8) {
            s.req.num_gpu = 0;
            s.req.gpu_milli = 0;
        }
        char uid[8];
        (void)snprintf(uid, sizeof(uid), "u%u", i);
        struct gs_pod_ident id = {uid, "ns", uid, cls, 0, false, {i % 2 ? budget : 0}};
        uint32_t pod;
        if (ok(gs_engine_submit_pod(r.e, &s, &id, 0, &pod), GS_OK))
            pods[np++] = pod;
        check(&r);
    }
    gs_filter_release(r.c, cz);
    gs_filter_release(r.c, cp);
    cz = cp = GS_FILTER_DEFAULT;
    (void)ok(gs_engine_cycle(r.e, 1000, NULL, NULL), GS_OK);
    check(&r);
    /* Delete a running gang member (grace period, hold), then a replacement. */
    for (uint32_t i = 0; i < np; i++) {
        struct gs_tpod_info in;
        if (gs_engine_pod_info(r.e, pods[i], &in) == GS_OK && in.gang == g &&
            in.state == GS_TPOD_RUNNING) {
            (void)ok(gs_engine_delete(r.e, pods[i], 3000), GS_OK);
            break;
        }
    }
    check(&r);
    struct gs_tpod_spec rep = {"rep", q[0], pc[0], g, GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY),
                               -1};
    (void)ok(gs_engine_submit(r.e, &rep, 4000, NULL), GS_ELIMIT);
    (void)ok(gs_engine_cycle(r.e, 4000, NULL, NULL), GS_OK);
    check(&r);
    /* A high-priority pod of 4 GPUs: preemption. */
    struct gs_tpod_spec hi = {
        "hi", q[0], pc[1], GS_NO_GANG, GS_POD_REQ(1000, 1024, 4, 1000, GS_MODEL_ANY), -1};
    (void)ok(gs_engine_submit(r.e, &hi, 2000, NULL), GS_OK);
    (void)ok(gs_engine_cycle(r.e, 2000, NULL, NULL), GS_OK);
    check(&r);
    /* Node a goes; adopt a pod on c; finish and forget what runs; the grace period ends. */
    (void)ok(gs_engine_remove_node(r.e, 0, 5000), GS_OK);
    check(&r);
    struct gs_tpod_spec ad = {
        "ad", q[1], pc[0], GS_NO_GANG, GS_POD_REQ(1000, 1024, 1, 500, GS_MODEL_ANY), -1};
    struct gs_pod_ident aid = {"adopted", "ns", "adopted", GS_FILTER_DEFAULT, 0, false};
    struct gs_placement on_c = {2, 0, {0}, 0};
    (void)ok(gs_engine_adopt(r.e, &ad, &aid, &on_c, 5000, NULL), GS_EINVAL);
    check(&r);
    for (uint32_t i = 0; i < gs_engine_pod_count(r.e); i++) {
        struct gs_tpod_info in;
        if (gs_engine_pod_info(r.e, i, &in) != GS_OK)
            continue;
        if (in.state == GS_TPOD_RUNNING && i % 2 == 0)
            (void)ok(gs_engine_finish(r.e, i, 6000), GS_OK);
        if (gs_engine_pod_info(r.e, i, &in) == GS_OK &&
            (in.state == GS_TPOD_SUCCEEDED || in.state == GS_TPOD_FAILED))
            (void)ok(gs_engine_forget(r.e, i), GS_EINVAL);
        check(&r);
    }
    (void)ok(gs_engine_cycle(r.e, 20000, NULL, NULL), GS_OK);
    check(&r);
out:
    gs_filter_release(r.c, cz);
    gs_filter_release(r.c, cp);
    gs_engine_free(r.e);
    gs_cluster_free(r.c);
}

/* A MIG pod of `count` instances of `profile`. */
static struct gs_tpod_spec mig_pod(uint32_t q, uint32_t pc, uint32_t gang, const char *profile,
                                   uint8_t count)
{
    struct gs_tpod_spec s = {"m", q, pc, gang, {0}, -1};
    s.req = (struct gs_pod_req){
        .cpu_milli = 1000, .mem_mib = 1024, .gpu_model_mask = GS_MODEL_ANY, .mig_count = count};
    (void)snprintf(s.req.mig_profile, sizeof(s.req.mig_profile), "%s", profile);
    return s;
}

/* Dynamic MIG (tenant_mig.c): two H100-80GB GPUs of seven 1g.10gb each; a lone 1g pod, a gang
 * of two 3g.40gb (one re-partition on each GPU, test_tenant_dynmig's case), a third 3g pod
 * (the GPU without the lone pod gives up its four lower 1g), the lone pod's finish. */
static void scenario_dynmig(void)
{
    struct run r = {0};
    if (!ok(gs_cluster_new(&r.c), GS_OK))
        return;
    struct gs_gpu_mode seven = {.sharing = GS_GPU_SHARE_MIG, .mig_count = 7};
    for (uint8_t k = 0; k < 7; k++)
        seven.mig[k] = (struct gs_mig_instance){0, k}; /* profile 0: 1g.10gb */
    static const char *const names[] = {"m0", "m1"};
    for (uint32_t i = 0; i < 2; i++) {
        struct gs_node_spec s = {names[i], 32000, 65536, 110, 1, "H100-80GB", 81920, &seven};
        (void)ok(gs_cluster_add_node(r.c, &s, NULL), GS_OK);
    }
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .dynamic_mig = true,
                                   .mig_repartition_ms = 10000,
                                   .on_event = on_event};
    if (!ok(gs_engine_new(r.c, &cfg, &r.e), GS_OK)) {
        gs_cluster_free(r.c);
        return;
    }
    struct gs_queue_spec qs = {
        "q", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    struct gs_priority_class_spec ps = {"batch", 10, -1};
    uint32_t q = UINT32_MAX, pc = UINT32_MAX, g = UINT32_MAX, id;
    struct gs_gang_spec gs = {"job", 2, 0};
    if (!ok(gs_engine_add_queue(r.e, &qs, &q), GS_OK) ||
        !ok(gs_engine_add_priority_class(r.e, &ps, &pc), GS_OK) ||
        !ok(gs_engine_add_gang(r.e, &gs, &g), GS_OK))
        goto out;
    check(&r);
    struct gs_tpod_spec lone = mig_pod(q, pc, GS_NO_GANG, "1g.10gb", 1);
    (void)ok(gs_engine_submit(r.e, &lone, 0, &id), GS_OK);
    (void)ok(gs_engine_cycle(r.e, 0, NULL, NULL), GS_OK);
    check(&r);
    for (int i = 0; i < 2; i++) {
        struct gs_tpod_spec m = mig_pod(q, pc, g, "3g.40gb", 1);
        (void)ok(gs_engine_submit(r.e, &m, 1000, &id), GS_OK);
    }
    (void)ok(gs_engine_cycle(r.e, 1000, NULL, NULL), GS_OK);
    check(&r);
    struct gs_tpod_spec big = mig_pod(q, pc, GS_NO_GANG, "3g.40gb", 1);
    (void)ok(gs_engine_submit(r.e, &big, 2000, &id), GS_OK);
    (void)ok(gs_engine_cycle(r.e, 2000, NULL, NULL), GS_OK);
    check(&r);
    (void)ok(gs_engine_finish(r.e, 0, 3000), GS_EINVAL);
    (void)ok(gs_engine_cycle(r.e, 3000, NULL, NULL), GS_OK);
    check(&r);
out:
    gs_engine_free(r.e);
    gs_cluster_free(r.c);
}

static void test_dynamic_mig_allocation_failures_leave_the_engine_consistent(void **state)
{
    (void)state;
    fail_at = 0;
    alloc_count = 0;
    repartitions = 0;
    memset(events, 0, sizeof(events));
    scenario_dynmig();
    uint64_t total = alloc_count;
    /* Without failures: the lone pod, both gang members and the 3g pod are bound; the gang
     * takes one re-partition per GPU (3g at 4 on each), the 3g pod a third: on the lone pod's
     * GPU a 3g at 0 would destroy its held 1g at 0, on the other the four free 1g at 0..3 go. */
    print_message("dynamic MIG: %u bind, %u re-partitions, %llu allocations\n", events[GS_EV_BIND],
                  repartitions, (unsigned long long)total);
    assert_int_equal(events[GS_EV_BIND], 4);
    assert_int_equal(repartitions, 3);
    uint64_t hit = 0;
    for (fail_at = 1; fail_at <= total + 1; fail_at++) {
        alloc_count = 0;
        failed = false;
        scenario_dynmig();
        hit += failed;
    }
    assert_int_equal(hit, total);
}

static void test_every_allocation_failure_leaves_the_engine_consistent(void **state)
{
    (void)state;
    /* Without failures first: how many allocations the scenario makes. */
    fail_at = 0;
    alloc_count = 0;
    memset(events, 0, sizeof(events));
    scenario();
    uint64_t total = alloc_count;
    assert_true(total > 100);
    /* It did what it says: binds, a preemption, a delete, an adopt, finishes. */
    print_message("events: %u bind, %u evict, %u delete, %u adopt, %u finish, %u unschedulable\n",
                  events[GS_EV_BIND], events[GS_EV_EVICT], events[GS_EV_DELETE],
                  events[GS_EV_ADOPT], events[GS_EV_FINISH], events[GS_EV_UNSCHEDULABLE]);
    assert_true(events[GS_EV_BIND] >= 6);
    assert_true(events[GS_EV_EVICT] >= 1);
    assert_int_equal(events[GS_EV_DELETE], 1);
    assert_int_equal(events[GS_EV_ADOPT], 1);
    assert_true(events[GS_EV_FINISH] >= 1);
    uint64_t hit = 0;
    for (fail_at = 1; fail_at <= total + 1; fail_at++) {
        alloc_count = 0;
        failed = false;
        scenario();
        hit += failed;
    }
    print_message("%llu allocations in the scenario; each failed once in its own run\n",
                  (unsigned long long)total);
    /* Runs are deterministic: every allocation up to the last was reached and failed. */
    assert_int_equal(hit, total);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_failure_leaves_the_engine_consistent),
        cmocka_unit_test(test_dynamic_mig_allocation_failures_leave_the_engine_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
