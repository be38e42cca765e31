/*
 * Randomised invariants of the engine in a live cluster: node churn (add, remove with pods on
 * it, cordon, taints, labels), GPU health flips, pods with node selectors and tolerations,
 * adopt (known and unknown GPUs, foreign pods), finish, delete and forget, and cycles with
 * preemption and reclaim, in seeded worlds. After every step: gs_engine_check() (GPU books,
 * queue books, states), every filter class's node set equals a judgement from scratch, and the
 * event stream is consistent: an EVICT or FINISH only of a pod reported bound (BIND, BACKFILL
 * or ADOPT) and not ended since, never two binds of one pod without an end between.
 *
 * Gangs with members of mixed PriorityClasses and a random grace period (0 or 5-20 s) come and
 * lose members to deletes and node removals; replacements arrive for gangs in their grace period.
 * Pods pinned to one node come too. Plain pods and gang members are covered by up to two of three
 * disruption budgets whose allowances change at random (0-2), so victim search classifies and
 * reprieves them in every world. Nothing of a trial that was rolled back may be reported: a
 * BIND is only of a pod that runs when the event comes, and of a gang member only while its gang
 * has min_member running or finished; an EVICT only of a pod that no longer runs; a
 * GANG_TIMEOUT only of a pod not bound.
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
#include "gpusched/rng.h"
#include "gpusched/tenant.h"

#define PODS_MAX 4096
#define WORLDS 12
#define STEPS 2500

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    struct gs_rng rng;
    bool bound[PODS_MAX];
    uint32_t queues[3], pcs[3], cls[4];
    uint32_t budgets[3]; /* disruption budget ids */
    uint64_t binds, evicts, adopts, removed_nodes;
    uint32_t gangs[256], gang_queue[256], ngangs;
    uint64_t gang_binds, grace_releases, replacements, pinned;
    char names[64][16];
    uint32_t next_node;
    uint32_t nic; /* the other resource example.com/nic */
    uint64_t nic_binds;
};

/* Binds and evictions of the current step: a cycle that never ends shows as thousands. */
static int step_changes;

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    if (ev->kind == GS_EV_BIND || ev->kind == GS_EV_EVICT)
        step_changes++;
    assert_true(ev->pod < PODS_MAX);
    struct gs_tpod_info info;
    assert_int_equal(gs_engine_pod_info(w->e, ev->pod, &info), GS_OK);
    switch (ev->kind) {
    case GS_EV_BIND:
    case GS_EV_BACKFILL:
        /* Reported only once final: the pod runs, and a gang member's gang is at its minimum
         * (a rolled-back trial leaves it below). */
        assert_int_equal(info.state, GS_TPOD_RUNNING);
        if (info.gang != GS_NO_GANG) {
            struct gs_gang_info gi;
            assert_int_equal(gs_engine_gang_info(w->e, info.gang, &gi), GS_OK);
            assert_true(gi.running + gi.succeeded >= gi.min_member);
            w->gang_binds++;
        }
        /* fall through */
    case GS_EV_ADOPT:
        assert_false(w->bound[ev->pod]);
        w->bound[ev->pod] = true;
        w->binds++;
        w->adopts += ev->kind == GS_EV_ADOPT;
        break;
    case GS_EV_EVICT:
        assert_true(w->bound[ev->pod]);
        assert_non_null(ev->pl);
        assert_int_not_equal(info.state, GS_TPOD_RUNNING); /* not an eviction rolled back */
        w->bound[ev->pod] = false;
        w->evicts++;
        break;
    case GS_EV_FINISH:
        assert_true(w->bound[ev->pod]);
        w->bound[ev->pod] = false;
        break;
    case GS_EV_DELETE:
        assert_true(ev->pl == NULL || w->bound[ev->pod]);
        w->bound[ev->pod] = false;
        break;
    case GS_EV_GANG_TIMEOUT:
        assert_false(w->bound[ev->pod]);
        assert_int_not_equal(info.state, GS_TPOD_RUNNING);
        w->grace_releases += ev->text != NULL; /* released at the end of a grace period */
        break;
    default:
        break;
    }
}

static uint32_t draw(struct world *w, uint32_t n)
{
    return (uint32_t)(gs_rng_next(&w->rng) % n);
}

static void add_node(struct world *w)
{
    static const char *const models[] = {"A100", "H100"};
    char name[16];
    (void)snprintf(name, sizeof(name), "n%u", w->next_node++);
    uint32_t gpus = draw(w, 3) == 0 ? 0 : 1 + draw(w, 8);
    struct gs_node_spec s = {name, 16000 + 16000 * draw(w, 3),       1 << 18, 20,
                             gpus, gpus ? models[draw(w, 2)] : NULL, 0};
    uint32_t id;
    if (gs_cluster_add_node(w->c, &s, &id) != GS_OK)
        return;
    if (draw(w, 2))
        assert_int_equal(gs_cluster_set_label(w->c, id, "pool", draw(w, 2) ? "a" : "b"), GS_OK);
    if (draw(w, 3) == 0) { /* other resources: 0..2 NICs */
        struct gs_xres x = {w->nic, draw(w, 3)};
        assert_int_equal(gs_cluster_set_xres(w->c, id, &x, 1), GS_OK);
    }
    if (draw(w, 4) == 0) {
        struct gs_taint t = {"dedicated", "x",
                             draw(w, 2) ? GS_TAINT_NO_SCHEDULE : GS_TAINT_PREFER_NO_SCHEDULE};
        assert_int_equal(gs_cluster_set_taints(w->c, id, &t, 1), GS_OK);
    }
}

/* A present node index, or -1. */
static int some_node(struct world *w)
{
    uint32_t n = gs_cluster_node_count(w->c);
    if (n == 0)
        return -1;
    for (uint32_t tries = 0; tries < 8; tries++) {
        uint32_t i = draw(w, n);
        if (gs_cluster_node(w->c, i)->present)
            return (int)i;
    }
    return -1;
}

static struct gs_tpod_spec pod_spec(struct world *w)
{
    struct gs_tpod_spec s = {.name = "p",
                             .queue = w->queues[draw(w, 3)],
                             .priority_class = w->pcs[draw(w, 3)],
                             .gang = GS_NO_GANG,
                             .req = {1000 * draw(w, 4), 1024, 0, 0, GS_MODEL_ANY},
                             .runtime_estimate_ms = -1};
    uint32_t k = draw(w, 6);
    if (k == 0) {
        /* CPU only */
    } else if (k <= 2) {
        s.req.num_gpu = 1;
        s.req.gpu_milli = 100 * (1 + (int32_t)draw(w, 9));
    } else {
        s.req.num_gpu = 1 + draw(w, 4);
        s.req.gpu_milli = 1000;
    }
    if (draw(w, 5) == 0) {
        s.req.xres_count = 1;
        s.req.xres[0] = (struct gs_xres){w->nic, 1};
    }
    return s;
}

static void check_all(struct world *w)
{
    char msg[256];
    if (gs_engine_check(w->e, msg, sizeof(msg)) != GS_OK)
        fail_msg("engine check: %s", msg);
    uint32_t n = gs_cluster_node_count(w->c);
    for (uint32_t k = 0; k < 4; k++)
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(gs_filter_pass(w->c, w->cls[k], i),
                             gs_filter_check(w->c, w->cls[k], i, NULL) == GS_FILTER_PASS);
    for (uint32_t i = 0; i < n; i++) { /* node-steps with NICs held (the engine checks sums) */
        const struct gs_node *nd = gs_cluster_node(w->c, i);
        for (uint32_t k = 0; nd->present && k < nd->xres_count; k++)
            w->nic_binds += nd->xres[k].used > 0;
    }
}

/* Up to two of the world's three disruption budgets for a pod (0: none; a repeat is allowed). */
static void pick_budgets(struct world *w, struct gs_pod_ident *id)
{
    for (int k = 0; k < 2; k++) {
        uint32_t b = draw(w, 4);
        id->budgets[k] = b ? w->budgets[b - 1] : 0;
    }
}
/* A new gang of min_member 2-4 with 0-1 extra members, in one queue, each member of a random
 * PriorityClass and filter class; grace period 0 (a third of them) or 5-20 s. */
static void submit_gang(struct world *w, int64_t now)
{
    if (w->ngangs == sizeof(w->gangs) / sizeof(w->gangs[0]) ||
        gs_engine_pod_count(w->e) + 8 >= PODS_MAX)
        return;
    char name[16];
    (void)snprintf(name, sizeof(name), "g%u", w->ngangs);
    struct gs_gang_spec gs = {name, 2 + draw(w, 3), draw(w, 4) == 0 ? 30000 : 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w->e, &gs, &g), GS_OK);
    int64_t grace = draw(w, 3) == 0 ? 0 : 5000 + 1000 * (int64_t)draw(w, 16);
    assert_int_equal(gs_engine_set_gang_grace(w->e, g, grace), GS_OK);
    struct gs_tpod_spec s = pod_spec(w);
    s.gang = g;
    w->gangs[w->ngangs] = g;
    w->gang_queue[w->ngangs++] = s.queue;
    uint32_t n = gs.min_member + draw(w, 2);
    for (uint32_t m = 0; m < n; m++) {
        s.priority_class = w->pcs[draw(w, 3)];
        struct gs_pod_ident id = {NULL, "ns", NULL, w->cls[draw(w, 4)], now, false};
        pick_budgets(w, &id);
        int rc = gs_engine_submit_pod(w->e, &s, &id, now, NULL);
        assert_true(rc == GS_OK || rc == GS_ELIMIT); /* a gang over q2's limit is refused */
    }
}

/* A replacement for a gang in its grace period (the first from a random start), if any. */
static void submit_replacement(struct world *w, int64_t now)
{
    if (w->ngangs == 0 || gs_engine_pod_count(w->e) + 1 >= PODS_MAX)
        return;
    uint32_t start = draw(w, w->ngangs);
    for (uint32_t k = 0; k < w->ngangs; k++) {
        uint32_t i = (start + k) % w->ngangs;
        struct gs_gang_info gi;
        assert_int_equal(gs_engine_gang_info(w->e, w->gangs[i], &gi), GS_OK);
        if (gi.grace_until_ms < 0)
            continue;
        struct gs_tpod_spec s = pod_spec(w);
        s.gang = w->gangs[i];
        s.queue = w->gang_queue[i];
        struct gs_pod_ident id = {NULL, "ns", NULL, GS_FILTER_DEFAULT, now, false};
        int rc = gs_engine_submit_pod(w->e, &s, &id, now, NULL);
        assert_true(rc == GS_OK || rc == GS_ELIMIT);
        w->replacements++;
        return;
    }
}

/* A plain pod pinned to a random present node (filter.h). */
static void submit_pinned(struct world *w, int64_t now)
{
    int node = some_node(w);
    if (node < 0 || gs_engine_pod_count(w->e) + 1 >= PODS_MAX)
        return;
    const char *name[] = {gs_cluster_node(w->c, (uint32_t)node)->name};
    struct gs_sel_expr x = {"metadata.name", GS_SEL_IN, true, name, 1};
    struct gs_sel_term t = {&x, 1};
    struct gs_filter_spec f = {.required = &t, .n_required = 1};
    uint32_t cls;
    assert_int_equal(gs_filter_intern(w->c, &f, &cls), GS_OK);
    assert_true(gs_filter_pinned(w->c, cls, NULL));
    struct gs_tpod_spec s = pod_spec(w);
    struct gs_pod_ident id = {NULL, "ns", NULL, cls, now, false};
    assert_int_equal(gs_engine_submit_pod(w->e, &s, &id, now, NULL), GS_OK);
    gs_filter_release(w->c, cls);
    w->pinned++;
}

static void step(struct world *w, int64_t now)
{
    uint32_t np = gs_engine_pod_count(w->e);
    uint32_t op = draw(w, 100);
    if (op < 4) {
        submit_gang(w, now);
    } else if (op < 7) {
        submit_replacement(w, now);
    } else if (op < 9) {
        submit_pinned(w, now);
    } else if (op < 30) {
        struct gs_tpod_spec s = pod_spec(w);
        struct gs_pod_ident id = {NULL, "ns", NULL, w->cls[draw(w, 4)], now, false};
        pick_budgets(w, &id);
        uint32_t pod;
        if (np < PODS_MAX - 1 && gs_engine_submit_pod(w->e, &s, &id, now, &pod) == GS_OK)
            w->bound[pod] = false;
        if (draw(w, 4) == 0) /* a budget's status.disruptionsAllowed changes */
            assert_int_equal(
                gs_engine_set_budget_allowed(w->e, w->budgets[draw(w, 3)], (int32_t)draw(w, 3)),
                GS_OK);
    } else if (op < 36) {
        /* Adopt: a random placement, GPUs known (maybe over-committed: then refused) or not. */
        int node = some_node(w);
        if (node < 0 || np >= PODS_MAX - 1)
            return;
        const struct gs_node *nd = gs_cluster_node(w->c, (uint32_t)node);
        struct gs_tpod_spec s = pod_spec(w);
        if (s.req.num_gpu > nd->gpu_count)
            s.req.num_gpu = nd->gpu_count;
        if (s.req.num_gpu == 0)
            s.req.gpu_milli = 0;
        struct gs_placement pl = {(uint32_t)node, 0, {0}, 0};
        if (s.req.num_gpu && draw(w, 2)) {
            pl.num_gpu = s.req.num_gpu;
            pl.gpu_milli = s.req.gpu_milli;
            uint32_t start = draw(w, nd->gpu_count - s.req.num_gpu + 1);
            for (uint32_t g = 0; g < s.req.num_gpu; g++)
                pl.gpu_index[g] = (uint8_t)(start + g);
        }
        struct gs_pod_ident id = {NULL, "ns", NULL, GS_FILTER_DEFAULT, now, draw(w, 3) == 0};
        uint32_t pod;
        int rc = gs_engine_adopt(w->e, &s, &id, &pl, now, &pod);
        assert_true(rc == GS_OK || rc == GS_EINVAL);
    } else if (op < 50) {
        if (np == 0)
            return;
        uint32_t pod = draw(w, np);
        struct gs_tpod_info info;
        if (gs_engine_pod_info(w->e, pod, &info) != GS_OK)
            return;
        uint32_t what = draw(w, 3);
        if (what == 0 && info.state == GS_TPOD_RUNNING)
            assert_int_equal(gs_engine_finish(w->e, pod, now), GS_OK);
        else if (what == 1 && (info.state == GS_TPOD_RUNNING || info.state == GS_TPOD_PENDING))
            assert_int_equal(gs_engine_delete(w->e, pod, now), GS_OK);
        else if (what == 2 && (info.state == GS_TPOD_SUCCEEDED || info.state == GS_TPOD_FAILED)) {
            /* A gang member's record stays with its gang when forgotten: a second forget of
             * it is refused. */
            int rc = gs_engine_forget(w->e, pod);
            assert_true(rc == GS_OK || (rc == GS_EINVAL && info.gang != GS_NO_GANG));
            w->bound[pod] = false;
        }
    } else if (op < 53) {
        add_node(w);
    } else if (op < 55) {
        int node = some_node(w);
        if (node >= 0 && gs_cluster_nodes_present(w->c) > 2) {
            assert_int_equal(gs_engine_remove_node(w->e, (uint32_t)node, now), GS_OK);
            w->removed_nodes++;
        }
    } else if (op < 60) {
        int node = some_node(w);
        if (node >= 0)
            assert_int_equal(gs_cluster_set_unschedulable(w->c, (uint32_t)node, draw(w, 2)), GS_OK);
    } else if (op < 66) {
        int node = some_node(w);
        if (node >= 0 && gs_cluster_node(w->c, (uint32_t)node)->gpu_count) {
            const struct gs_node *nd = gs_cluster_node(w->c, (uint32_t)node);
            assert_int_equal(gs_cluster_set_gpu_health(w->c, (uint32_t)node, draw(w, nd->gpu_count),
                                                       draw(w, 3) != 0),
                             GS_OK);
        }
    } else if (op < 68) {
        int node = some_node(w);
        if (node >= 0)
            assert_int_equal(
                gs_cluster_set_label(w->c, (uint32_t)node, "pool", draw(w, 2) ? "a" : "b"), GS_OK);
    } else if (op < 70) {
        /* NICs offered change (may drop below what pods hold, or vanish). */
        int node = some_node(w);
        struct gs_xres x = {w->nic, draw(w, 3)};
        if (node >= 0)
            assert_int_equal(gs_cluster_set_xres(w->c, (uint32_t)node, &x, draw(w, 4) != 0), GS_OK);
    } else {
        assert_int_equal(gs_engine_cycle(w->e, now, &w->rng, NULL), GS_OK);
    }
}

static void test_random_live_worlds_keep_every_invariant(void **state)
{
    (void)state;
    uint64_t binds = 0, evicts = 0, adopts = 0, removed = 0;
    uint64_t gang_binds = 0, releases = 0, replacements = 0, pinned = 0, nic = 0;
    static struct world w;
    for (uint32_t seed = 1; seed <= WORLDS; seed++) {
        memset(&w, 0, sizeof(w));
        gs_rng_seed(&w.rng, seed);
        assert_int_equal(gs_cluster_new(&w.c), GS_OK);
        assert_int_equal(gs_cluster_xres_id(w.c, "example.com/nic", &w.nic), GS_OK);
        struct gs_engine_config cfg = {.policy = seed % 2 ? "bestfit" : "packing",
                                       .preemption = true,
                                       .reclaim = true,
                                       .evict_ends_pod = seed % 3 == 0,
                                       .on_event = on_event,
                                       .ctx = &w};
        assert_int_equal(gs_engine_new(w.c, &cfg, &w.e), GS_OK);
        for (uint32_t q = 0; q < 3; q++) {
            char name[8];
            (void)snprintf(name, sizeof(name), "q%u", q);
            struct gs_queue_spec qs = {name,
                                       GS_QUEUE_ROOT,
                                       {2000 * q, 0, 0},
                                       {q == 2 ? 6000 : GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED},
                                       1.0,
                                       0};
            assert_int_equal(gs_engine_add_queue(w.e, &qs, &w.queues[q]), GS_OK);
            struct gs_priority_class_spec pc = {name, (int32_t)(10 * q), 1};
            assert_int_equal(gs_engine_add_priority_class(w.e, &pc, &w.pcs[q]), GS_OK);
            char bname[8];
            (void)snprintf(bname, sizeof(bname), "ns/b%u", q);
            assert_int_equal(gs_engine_add_budget(w.e, bname, (int32_t)q, &w.budgets[q]), GS_OK);
        }
        /* Four filter classes: default, pool=a, tolerate the taint, pool In (b) + toleration. */
        const char *sel[] = {"pool=a"};
        struct gs_filter_spec fa = {.node_selector = sel, .n_node_selector = 1};
        struct gs_toleration tol = {"dedicated", GS_TOL_EXISTS, NULL, 0};
        struct gs_filter_spec ft = {.tolerations = &tol, .n_tolerations = 1};
        const char *b[] = {"b"};
        struct gs_sel_expr ex = {"pool", GS_SEL_IN, false, b, 1};
        struct gs_sel_term term = {&ex, 1};
        struct gs_filter_spec fb = {
            .required = &term, .n_required = 1, .tolerations = &tol, .n_tolerations = 1};
        w.cls[0] = GS_FILTER_DEFAULT;
        assert_int_equal(gs_filter_intern(w.c, &fa, &w.cls[1]), GS_OK);
        assert_int_equal(gs_filter_intern(w.c, &ft, &w.cls[2]), GS_OK);
        assert_int_equal(gs_filter_intern(w.c, &fb, &w.cls[3]), GS_OK);
        for (uint32_t i = 0; i < 6; i++)
            add_node(&w);
        for (uint32_t s = 0; s < STEPS; s++) {
            step_changes = 0;
            step(&w, 1000 * (int64_t)s);
            check_all(&w);
            if (step_changes > 5000) /* no live lock: a loop of reclaim and preemption did this */
                fail_msg("seed %u step %u: %d binds and evictions in one step", seed, s,
                         step_changes);
        }
        binds += w.binds;
        evicts += w.evicts;
        adopts += w.adopts;
        removed += w.removed_nodes;
        gang_binds += w.gang_binds;
        releases += w.grace_releases;
        replacements += w.replacements;
        pinned += w.pinned;
        nic += w.nic_binds;
        gs_engine_free(w.e);
        gs_cluster_free(w.c);
    }
    /* The worlds did exercise what they claim to. */
    print_message("%u worlds x %u steps: %llu binds (%llu adopted), %llu evictions, %llu nodes "
                  "removed\n",
                  WORLDS, STEPS, (unsigned long long)binds, (unsigned long long)adopts,
                  (unsigned long long)evicts, (unsigned long long)removed);
    assert_true(binds > 1000);
    assert_true(adopts > 100);
    assert_true(evicts > 50);
    assert_true(removed > 50);
    print_message("gangs: %llu member binds, %llu released after a grace period, %llu "
                  "replacements; %llu pinned pods\n",
                  (unsigned long long)gang_binds, (unsigned long long)releases,
                  (unsigned long long)replacements, (unsigned long long)pinned);
    assert_true(gang_binds > 200);
    assert_true(releases > 10);
    assert_true(replacements > 20);
    assert_true(pinned > 200);
    print_message("other resources: %llu node-steps with NICs held\n", (unsigned long long)nic);
    assert_true(nic > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_live_worlds_keep_every_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
