/*
 * Gangs that lose members, worked by hand: a running gang that loses members below min_member
 * keeps running for its grace period, the capacity the lost members freed is held for its
 * replacements (no other pod may take it), its replacements come before other pods of their
 * priority, and at the end of the grace period without recovery the gang is released whole
 * (EVICT reason GANG, then GANG_TIMEOUT). Each test states the exact event stream.
 *
 * The common world: nodes a and b with 4 A100s each, bestfit, one queue, one PriorityClass; a
 * gang g of min_member 4 whose members ask 2 GPUs each, and a pod x of 2 GPUs submitted after
 * it. Bestfit puts the members g0, g1 on a (GPUs 0-1, 2-3: a is the fuller node once g0 is
 * there) and g2, g3 on b; the cluster is then full and x waits.
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

#define MAX_EV 128

struct rec {
    enum gs_event_kind kind;
    uint32_t pod;
    enum gs_evict_reason reason;
    uint32_t node;
    char text[320];
};

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t q, pc, gang;
    uint32_t g[4], x; /* the members and the other pod */
    struct rec ev[MAX_EV];
    uint32_t nev, seen; /* events recorded; events already compared by expect() */
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
}

/* One expected event: kind, pod, evict reason (EVICT only) and node (UINT32_MAX: none). */
struct want {
    enum gs_event_kind kind;
    uint32_t pod;
    enum gs_evict_reason reason;
    uint32_t node;
};

#define NONE UINT32_MAX

/* The events since the last call must be exactly `want[0..n)`. */
static void expect(struct world *w, const struct want *want, uint32_t n)
{
    if (w->nev - w->seen != n) {
        for (uint32_t i = w->seen; i < w->nev; i++)
            print_message("event %u: kind %d pod %u reason %d node %u %s\n", i, w->ev[i].kind,
                          w->ev[i].pod, w->ev[i].reason, w->ev[i].node, w->ev[i].text);
        fail_msg("%u events, expected %u", w->nev - w->seen, n);
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct rec *r = &w->ev[w->seen + i];
        assert_int_equal(r->kind, want[i].kind);
        assert_int_equal(r->pod, want[i].pod);
        if (r->kind == GS_EV_EVICT)
            assert_int_equal(r->reason, want[i].reason);
        assert_int_equal(r->node, want[i].node);
    }
    w->seen = w->nev;
}

static void check(struct world *w)
{
    char msg[512];
    if (gs_engine_check(w->e, msg, sizeof(msg)) != GS_OK)
        fail_msg("invariant: %s", msg);
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    check(w);
}

static void add_node(struct world *w, const char *name)
{
    struct gs_node_spec s = {name, 64000, 1 << 20, 110, 4, "A100", 81920};
    assert_int_equal(gs_cluster_add_node(w->c, &s, NULL), GS_OK);
}

static uint32_t submit_gpus(struct world *w, uint32_t gang, uint32_t gpus, int64_t now_ms)
{
    struct gs_tpod_spec s = {
        "p", w->q, w->pc, gang, GS_POD_REQ(1000, 1024, gpus, 1000, GS_MODEL_ANY), -1};
    uint32_t id;
    assert_int_equal(gs_engine_submit(w->e, &s, now_ms, &id), GS_OK);
    return id;
}

static uint32_t submit(struct world *w, uint32_t gang, int64_t now_ms)
{
    return submit_gpus(w, gang, 2, now_ms);
}

static enum gs_tpod_state state(struct world *w, uint32_t pod)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pod, &in), GS_OK);
    return in.state;
}

static struct gs_gang_info gang_info(struct world *w)
{
    struct gs_gang_info gi;
    assert_int_equal(gs_engine_gang_info(w->e, w->gang, &gi), GS_OK);
    return gi;
}

/* Builds the common world with grace `grace_ms`, runs the first cycle at t = 1 s and checks
 * it: 4 SUBMIT, 1 SUBMIT (x), the 4 BINDs, UNSCHEDULABLE x. */
static void world_init(struct world *w, int64_t grace_ms, bool evict_ends)
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
    add_node(w, "a");
    add_node(w, "b");
    struct gs_queue_spec q = {
        "research", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w->e, &q, &w->q), GS_OK);
    struct gs_priority_class_spec pc = {"normal", 10, 1};
    assert_int_equal(gs_engine_add_priority_class(w->e, &pc, &w->pc), GS_OK);
    struct gs_gang_spec gs = {"g", 4, 0};
    assert_int_equal(gs_engine_add_gang(w->e, &gs, &w->gang), GS_OK);
    assert_int_equal(gs_engine_set_gang_grace(w->e, w->gang, grace_ms), GS_OK);
    for (int i = 0; i < 4; i++)
        w->g[i] = submit(w, w->gang, 0);
    w->x = submit(w, GS_NO_GANG, 0); /* same time, higher id: after the gang */
    cycle(w, 1000);
    const struct want first[] = {
        {GS_EV_SUBMIT, w->g[0], 0, NONE}, {GS_EV_SUBMIT, w->g[1], 0, NONE},
        {GS_EV_SUBMIT, w->g[2], 0, NONE}, {GS_EV_SUBMIT, w->g[3], 0, NONE},
        {GS_EV_SUBMIT, w->x, 0, NONE},    {GS_EV_BIND, w->g[0], 0, 0},
        {GS_EV_BIND, w->g[1], 0, 0},      {GS_EV_BIND, w->g[2], 0, 1},
        {GS_EV_BIND, w->g[3], 0, 1},      {GS_EV_UNSCHEDULABLE, w->x, 0, NONE},
    };
    expect(w, first, 10);
    assert_string_equal(w->ev[9].text, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
}

static void world_fini(struct world *w)
{
    check(w);
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static void test_gang_keeps_running_and_its_freed_gpus_wait_for_the_replacement(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, false);
    /* t = 10 s: g1 (node a, GPUs 2-3) is deleted. 3 of 4 run: the gang enters its grace
     * period, until 10 + 60 = 70 s; g0, g2, g3 keep running, and a's GPUs 2-3 are held. */
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    const struct want del[] = {{GS_EV_DELETE, w.g[1], 0, 0}};
    expect(&w, del, 1);
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.running, 3);
    assert_int_equal(gi.grace_ms, 60000);
    assert_int_equal(gi.grace_until_ms, 70000);
    assert_int_equal(gi.holds, 1);
    check(&w);
    /* t = 11 s: x could fit on a's two free-looking GPUs, but they are held: it waits, with the
     * same reason as before (no new UNSCHEDULABLE), and nothing is evicted. */
    cycle(&w, 11000);
    expect(&w, NULL, 0);
    assert_int_equal(state(&w, w.x), GS_TPOD_PENDING);
    assert_int_equal(gs_cluster_node(w.c, 0)->gpus[2].gpu_milli_used, 1000);
    /* t = 20 s: the replacement g4 arrives. Submitted after x, it still comes first (a member
     * of a gang in its grace period), gets the held GPUs back and binds on a; the gang is whole
     * again (its grace period ends, nothing held) and x still waits. */
    uint32_t g4 = submit(&w, w.gang, 20000);
    cycle(&w, 20000);
    const struct want back[] = {{GS_EV_SUBMIT, g4, 0, NONE}, {GS_EV_BIND, g4, 0, 0}};
    expect(&w, back, 2);
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w.e, g4, &in), GS_OK);
    assert_int_equal(in.pl.num_gpu, 2);
    assert_int_equal(in.pl.gpu_index[0], 2);
    assert_int_equal(in.pl.gpu_index[1], 3);
    gi = gang_info(&w);
    assert_int_equal(gi.running, 4);
    assert_int_equal(gi.grace_until_ms, -1);
    assert_int_equal(gi.holds, 0);
    assert_int_equal(state(&w, w.x), GS_TPOD_PENDING);
    /* Long after the old grace period: nothing happens to the recovered gang. */
    cycle(&w, 200000);
    expect(&w, NULL, 0);
    world_fini(&w);
}

static void test_gang_released_whole_when_its_grace_period_ends(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, false);
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    w.seen = w.nev;
    /* One millisecond before the end (10 + 60 s) nothing moves. */
    cycle(&w, 69999);
    expect(&w, NULL, 0);
    /* At 70 s the gang is released: g0, g2, g3 are evicted (reason gang, member order), then
     * each gets GANG_TIMEOUT; a's GPUs 2-3 are no longer held. The members go back to pending
     * but only 3 of the 4 needed exist, so the gang is not tried (and blocks nothing): x binds
     * on a (bestfit: a and b are both empty, a is first). */
    cycle(&w, 70000);
    const struct want rel[] = {
        {GS_EV_EVICT, w.g[0], GS_EVICT_GANG, 0}, {GS_EV_EVICT, w.g[2], GS_EVICT_GANG, 1},
        {GS_EV_EVICT, w.g[3], GS_EVICT_GANG, 1}, {GS_EV_GANG_TIMEOUT, w.g[0], 0, NONE},
        {GS_EV_GANG_TIMEOUT, w.g[2], 0, NONE},   {GS_EV_GANG_TIMEOUT, w.g[3], 0, NONE},
        {GS_EV_UNSCHEDULABLE, w.g[0], 0, NONE},  {GS_EV_BIND, w.x, 0, 0},
    };
    expect(&w, rel, 8);
    assert_string_equal(w.ev[w.nev - 5].text,
                        "gang g did not get back to min_member 4 within its grace period of 60 s");
    assert_string_equal(w.ev[w.nev - 2].text,
                        "gang g (min_member 4, 0 running): 3 of 4 members exist");
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.running, 0);
    assert_int_equal(gi.pending, 3);
    assert_false(gi.started);
    assert_int_equal(gi.grace_until_ms, -1);
    assert_int_equal(gi.holds, 0);
    /* t = 80 s: a replacement, outside the grace period. 4 members exist now, but x holds a's
     * GPUs 0-1: free are a's 2-3 and b's 0-3, room for 1 + 2 = 3 members of 2 GPUs. */
    uint32_t g4 = submit(&w, w.gang, 80000);
    cycle(&w, 80000);
    const struct want late[] = {{GS_EV_SUBMIT, g4, 0, NONE},
                                {GS_EV_UNSCHEDULABLE, w.g[0], 0, NONE}};
    expect(&w, late, 2);
    assert_string_equal(w.ev[w.nev - 1].text,
                        "gang g (min_member 4, 0 running): 3 of 4 members fit");
    world_fini(&w);
}

static void test_failed_replacement_trial_keeps_the_hold(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, false);
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    w.seen = w.nev;
    /* A replacement asking 3 GPUs: its trial gets a's 2 held GPUs back, still does not fit, and
     * is rolled back: the hold is bound again, x cannot take it, nothing else moved. */
    uint32_t r = submit_gpus(&w, w.gang, 3, 20000);
    cycle(&w, 20000);
    const struct want ev[] = {{GS_EV_SUBMIT, r, 0, NONE}, {GS_EV_UNSCHEDULABLE, r, 0, NONE}};
    expect(&w, ev, 2);
    assert_string_equal(w.ev[w.nev - 1].text, "gang g (min_member 4, 3 running): 0/2 nodes are "
                                              "available: 2 Insufficient nvidia.com/gpu.");
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.holds, 1);
    assert_int_equal(gi.grace_until_ms, 70000);
    assert_int_equal(gs_cluster_node(w.c, 0)->gpus[2].gpu_milli_used, 1000);
    assert_int_equal(gs_cluster_node(w.c, 0)->gpus[3].gpu_milli_used, 1000);
    assert_int_equal(state(&w, w.x), GS_TPOD_PENDING);
    world_fini(&w);
}

static void test_gang_without_grace_is_released_at_once(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 0, false);
    /* Grace 0: deleting g1 releases the gang on the spot (EVICT g0, g2, g3, reason gang; no
     * GANG_TIMEOUT: nothing timed out), and the next cycle binds x on a. */
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    const struct want del[] = {
        {GS_EV_DELETE, w.g[1], 0, 0},
        {GS_EV_EVICT, w.g[0], GS_EVICT_GANG, 0},
        {GS_EV_EVICT, w.g[2], GS_EVICT_GANG, 1},
        {GS_EV_EVICT, w.g[3], GS_EVICT_GANG, 1},
    };
    expect(&w, del, 4);
    assert_int_equal(gang_info(&w).holds, 0);
    cycle(&w, 11000);
    const struct want next[] = {{GS_EV_UNSCHEDULABLE, w.g[0], 0, NONE}, {GS_EV_BIND, w.x, 0, 0}};
    expect(&w, next, 2);
    world_fini(&w);
}

static void test_gang_that_loses_its_node_keeps_running_and_recovers_elsewhere(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, false);
    /* t = 10 s: node b goes. Its pods are evicted last-bound first (g3, then g2; node-lost);
     * g0 and g1 keep running on a. Nothing is held (the node is gone). */
    assert_int_equal(gs_engine_remove_node(w.e, 1, 10000), GS_OK);
    const struct want lost[] = {
        {GS_EV_EVICT, w.g[3], GS_EVICT_NODE_LOST, 1},
        {GS_EV_EVICT, w.g[2], GS_EVICT_NODE_LOST, 1},
    };
    expect(&w, lost, 2);
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.running, 2);
    assert_int_equal(gi.grace_until_ms, 70000);
    assert_int_equal(gi.holds, 0);
    check(&w);
    /* A cycle with no room: the gang waits, x waits; nothing is evicted. */
    cycle(&w, 11000);
    const struct want wait[] = {{GS_EV_UNSCHEDULABLE, w.g[2], 0, NONE}};
    expect(&w, wait, 1);
    assert_string_equal(w.ev[w.nev - 1].text,
                        "gang g (min_member 4, 2 running): 0/1 nodes are available: 1 "
                        "Insufficient nvidia.com/gpu.");
    /* t = 30 s: node c (4 GPUs) arrives, in the slot b left (index 1). g2 and g3 come before x
     * (gang in its grace period), and both bind on c: the gang is whole again. x waits. */
    add_node(&w, "c");
    cycle(&w, 30000);
    const struct want back[] = {{GS_EV_BIND, w.g[2], 0, 1}, {GS_EV_BIND, w.g[3], 0, 1}};
    expect(&w, back, 2);
    gi = gang_info(&w);
    assert_int_equal(gi.running, 4);
    assert_int_equal(gi.grace_until_ms, -1);
    assert_int_equal(state(&w, w.x), GS_TPOD_PENDING);
    world_fini(&w);
}

static void test_gang_with_nothing_left_running_gives_up_its_holds(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, true);
    /* g1 then g0 (both on a) are deleted: after g1, a's GPUs 2-3 are held; after g0, 2 of 4
     * run (b) and GPUs 0-3 of a are held. Then g2 and g3 go too: nothing runs, the grace
     * period ends and the holds go back: x binds on a in the next cycle. */
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    assert_int_equal(gs_engine_delete(w.e, w.g[0], 11000), GS_OK);
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.holds, 2);
    assert_int_equal(gi.grace_until_ms, 70000); /* from the first loss */
    check(&w);
    assert_int_equal(gs_engine_delete(w.e, w.g[2], 12000), GS_OK);
    assert_int_equal(gs_engine_delete(w.e, w.g[3], 13000), GS_OK);
    gi = gang_info(&w);
    assert_int_equal(gi.running, 0);
    assert_int_equal(gi.holds, 0);
    assert_int_equal(gi.grace_until_ms, -1);
    w.seen = w.nev;
    cycle(&w, 14000);
    const struct want next[] = {{GS_EV_BIND, w.x, 0, 0}};
    expect(&w, next, 1);
    world_fini(&w);
}

static void test_a_pod_that_really_runs_there_takes_precedence_over_a_hold(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 60000, false);
    assert_int_equal(gs_engine_delete(w.e, w.g[1], 10000), GS_OK);
    w.seen = w.nev;
    /* Another scheduler's pod is found running on a's GPU 2, which the gang holds: the hold is
     * the engine's alone, so it is given up and the pod adopted. The gang keeps its grace
     * period, and x can take nothing (a's GPU 3 alone is free, x asks 2). */
    struct gs_tpod_spec s = {
        "f", w.q, w.pc, GS_NO_GANG, GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY), -1};
    struct gs_pod_ident id = {"foreign", "ns", "foreign", 0, 0, true};
    struct gs_placement on_a2 = {0, 1, {2}, 1000};
    uint32_t f;
    assert_int_equal(gs_engine_adopt(w.e, &s, &id, &on_a2, 11000, &f), GS_OK);
    const struct want ad[] = {{GS_EV_ADOPT, f, 0, 0}};
    expect(&w, ad, 1);
    struct gs_gang_info gi = gang_info(&w);
    assert_int_equal(gi.holds, 0);
    assert_int_equal(gi.grace_until_ms, 70000);
    assert_int_equal(gs_cluster_node(w.c, 0)->gpus[3].gpu_milli_used, 0);
    check(&w);
    cycle(&w, 12000);
    assert_int_equal(state(&w, w.x), GS_TPOD_PENDING);
    world_fini(&w);
}

static void test_set_gang_grace_validates(void **state_)
{
    (void)state_;
    struct world w;
    world_init(&w, 0, false);
    assert_int_equal(gs_engine_set_gang_grace(w.e, w.gang, -1), GS_EINVAL);
    assert_int_equal(gs_engine_set_gang_grace(w.e, w.gang + 1, 1000), GS_EINVAL);
    assert_int_equal(gs_engine_set_gang_grace(w.e, w.gang, 5000), GS_OK);
    assert_int_equal(gang_info(&w).grace_ms, 5000);
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_keeps_running_and_its_freed_gpus_wait_for_the_replacement),
        cmocka_unit_test(test_gang_released_whole_when_its_grace_period_ends),
        cmocka_unit_test(test_failed_replacement_trial_keeps_the_hold),
        cmocka_unit_test(test_gang_without_grace_is_released_at_once),
        cmocka_unit_test(test_gang_that_loses_its_node_keeps_running_and_recovers_elsewhere),
        cmocka_unit_test(test_gang_with_nothing_left_running_gives_up_its_holds),
        cmocka_unit_test(test_a_pod_that_really_runs_there_takes_precedence_over_a_hold),
        cmocka_unit_test(test_set_gang_grace_validates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
