/*
 * Per-GPU-model quotas (gs_queue_spec.by_model; docs/queues.md, "GPU models") on small clusters
 * of H100 and A100 nodes, each outcome worked out by hand in the comments. The invariant checker
 * (which recounts the per-model books) runs after every cycle.
 *
 * Nodes are added H100 first, so the cluster's model ids are H100 = 0 and A100 = 1. Policy
 * bestfit with equal scores takes the lowest node index, and packs a node before opening the
 * next (the fuller node fits tighter).
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
#define H100 0u
#define A100 1u
#define MASK(m) (UINT64_C(1) << (m))

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t reclaims, binds;
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    if (ev->kind == GS_EV_EVICT && ev->reason == GS_EVICT_RECLAIM)
        w->reclaims++;
    if (ev->kind == GS_EV_BIND)
        w->binds++;
}

/* Nodes n0.. with 8 GPUs each, of the models given ("H100" or "A100"), then the engine. */
static void world_init(struct world *w, const char *const *models, uint32_t n)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "n%u", i);
        struct gs_node_spec s = {name, 64000, 1 << 20, 110, 8, models[i], 0};
        assert_int_equal(gs_cluster_add_node(w->c, &s, NULL), GS_OK);
    }
    assert_int_equal(gs_cluster_model_find(w->c, "H100"), (int)H100);
    struct gs_engine_config cfg = {
        .policy = "bestfit", .preemption = true, .reclaim = true, .on_event = on_event, .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
    struct gs_priority_class_spec pc = {"normal", 10, -1};
    assert_int_equal(gs_engine_add_priority_class(w->e, &pc, NULL), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

/* A top-level queue with an overall GPU quota and limit and at most one per-model entry. */
static int add_queue(struct world *w, const char *name, uint32_t parent, int64_t quota,
                     int64_t limit, const struct gs_model_quota *mq, uint32_t *id)
{
    struct gs_queue_spec s = {name, parent, {quota, 0, 0}, {limit, INF, INF}, 1, 0, mq, mq ? 1 : 0};
    return gs_engine_add_queue(w->e, &s, id);
}

static uint32_t submit(struct world *w, uint32_t q, uint64_t mask, int64_t now_ms)
{
    struct gs_tpod_spec s = {"p", q, 0, GS_NO_GANG, GS_POD_REQ(1000, 0, 1, 1000, mask), -1};
    uint32_t id;
    assert_int_equal(gs_engine_submit(w->e, &s, now_ms, &id), GS_OK);
    return id;
}

static void cycle(struct world *w, int64_t now_ms)
{
    assert_int_equal(gs_engine_cycle(w->e, now_ms, NULL, NULL), GS_OK);
    char msg[512];
    if (gs_engine_check(w->e, msg, sizeof(msg)) != GS_OK)
        fail_msg("invariant: %s", msg);
}

static struct gs_tpod_info pod(struct world *w, uint32_t id)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, id, &in), GS_OK);
    return in;
}

static int64_t model_alloc(struct world *w, uint32_t q, uint32_t model)
{
    struct gs_queue_model_info mi;
    assert_int_equal(gs_engine_queue_model_info(w->e, q, model, &mi), GS_OK);
    return mi.allocated_milli;
}

static int64_t gpu_alloc(struct world *w, uint32_t q)
{
    struct gs_queue_info in;
    assert_int_equal(gs_engine_queue_info(w->e, q, &in), GS_OK);
    return in.allocated[GS_RES_GPU];
}

/*
 * Nodes n0, n1 H100 and n2 A100. Queue q: overall limit 16 GPUs, H100 limit 8. Seventeen 1-GPU
 * pods of any model: bestfit packs pods 0..7 on n0 (H100 now at 8 of 8); from pod 8 on, H100 is
 * left out of what the pod may use, so n1 (H100, empty) is skipped and pods 8..15 fill n2 (A100).
 * Pod 16 would take q to 17 GPUs, over its overall limit of 16: it waits, and says so.
 */
static void test_any_model_pods_go_to_a100_once_h100_is_full(void **st)
{
    (void)st;
    static const char *const models[] = {"H100", "H100", "A100"};
    struct world w;
    world_init(&w, models, 3);
    struct gs_model_quota mq = {H100, 0, 8000};
    uint32_t q;
    assert_int_equal(add_queue(&w, "q", GS_QUEUE_ROOT, 0, 16000, &mq, &q), GS_OK);
    uint32_t p[17];
    for (int i = 0; i < 17; i++)
        p[i] = submit(&w, q, GS_MODEL_ANY, i);
    cycle(&w, 100);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(pod(&w, p[i]).state, GS_TPOD_RUNNING);
        assert_int_equal(pod(&w, p[i]).pl.node, 0);
    }
    for (int i = 8; i < 16; i++) {
        assert_int_equal(pod(&w, p[i]).state, GS_TPOD_RUNNING);
        assert_int_equal(pod(&w, p[i]).pl.node, 2);
    }
    assert_int_equal(pod(&w, p[16]).state, GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, p[16]), "queue q is at its limit of 16 GPUs");
    assert_int_equal(gs_cluster_node(w.c, 1)->gpus_full_free, 8);
    assert_int_equal(model_alloc(&w, q, H100), 8000);
    assert_int_equal(model_alloc(&w, q, A100), 8000);
    assert_int_equal(gpu_alloc(&w, q), 16000);
    world_fini(&w);
}

/*
 * Same cluster and queue. Eight H100-only pods fill n0. A ninth H100-only pod would be the 9th
 * H100 GPU: it waits although n1 has 8 free H100s, with the model in its reason. An any-model
 * pod still runs, on n2. When one H100 pod finishes, the waiting one binds, on n0 (bestfit: the
 * freed GPU is the tightest fit).
 */
static void test_h100_pod_waits_at_the_h100_limit(void **st)
{
    (void)st;
    static const char *const models[] = {"H100", "H100", "A100"};
    struct world w;
    world_init(&w, models, 3);
    struct gs_model_quota mq = {H100, 0, 8000};
    uint32_t q;
    assert_int_equal(add_queue(&w, "q", GS_QUEUE_ROOT, 0, 16000, &mq, &q), GS_OK);
    uint32_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = submit(&w, q, MASK(H100), i);
    uint32_t ninth = submit(&w, q, MASK(H100), 8);
    uint32_t any = submit(&w, q, GS_MODEL_ANY, 9);
    cycle(&w, 100);
    for (int i = 0; i < 8; i++)
        assert_int_equal(pod(&w, p[i]).pl.node, 0);
    assert_int_equal(pod(&w, ninth).state, GS_TPOD_PENDING);
    assert_string_equal(gs_engine_pod_reason(w.e, ninth), "queue q is at its limit of 8 H100 GPUs");
    assert_int_equal(pod(&w, any).state, GS_TPOD_RUNNING);
    assert_int_equal(pod(&w, any).pl.node, 2);
    assert_int_equal(gs_engine_finish(w.e, p[3], 200), GS_OK);
    cycle(&w, 300);
    assert_int_equal(pod(&w, ninth).state, GS_TPOD_RUNNING);
    assert_int_equal(pod(&w, ninth).pl.node, 0);
    assert_int_equal(model_alloc(&w, q, H100), 8000);
    world_fini(&w);
}

/*
 * Nodes n0 H100 and n1 A100 (16 GPUs). Queue other: overall quota 8, no per-model entry; queue
 * owner: overall quota 8 and H100 quota 8 (limit 8). other runs 12 any-model pods: 0..7 on n0,
 * 8..11 on n1. owner then asks 4 H100-only pods. Fair shares (capacity 16): owner min(8, 4) = 4,
 * other min(8, 12) = 8, and the 4 left go to other (owner's demand is met): 12. other holds
 * exactly its share, so the overall rule (victim above its share) allows nothing. The per-model
 * rule does: owner holds 0 of its 8 H100 quota, other is guaranteed no H100. Each owner pod
 * reclaims the newest other pod on n0 (equal priority and start: highest id first): 7, 6, 5, 4.
 * Those four wait again and take the 4 free A100s of n1. Nothing on n1 is touched, and later
 * cycles evict nothing (other has no H100 quota to reclaim with, owner is at its H100 quota).
 * Without the H100 entry owner reclaims nothing and its pods wait (the same run, with_entry
 * false).
 */
static void reclaim_case(bool with_entry)
{
    static const char *const models[] = {"H100", "A100"};
    struct world w;
    world_init(&w, models, 2);
    uint32_t other, owner;
    assert_int_equal(add_queue(&w, "other", GS_QUEUE_ROOT, 8000, INF, NULL, &other), GS_OK);
    struct gs_model_quota mq = {H100, 8000, 8000};
    assert_int_equal(
        add_queue(&w, "owner", GS_QUEUE_ROOT, 8000, INF, with_entry ? &mq : NULL, &owner), GS_OK);
    uint32_t o[12], r[4];
    for (int i = 0; i < 12; i++)
        o[i] = submit(&w, other, GS_MODEL_ANY, i);
    cycle(&w, 100);
    for (int i = 0; i < 12; i++)
        assert_int_equal(pod(&w, o[i]).pl.node, i < 8 ? 0 : 1);
    for (int i = 0; i < 4; i++)
        r[i] = submit(&w, owner, MASK(H100), 200 + i);
    for (int t = 0; t < 5; t++)
        cycle(&w, 300 + t);
    if (!with_entry) {
        assert_int_equal(w.reclaims, 0);
        for (int i = 0; i < 4; i++)
            assert_int_equal(pod(&w, r[i]).state, GS_TPOD_PENDING);
        world_fini(&w);
        return;
    }
    assert_int_equal(w.reclaims, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pod(&w, r[i]).state, GS_TPOD_RUNNING);
        assert_int_equal(pod(&w, r[i]).pl.node, 0);
    }
    for (int i = 0; i < 12; i++) {
        struct gs_tpod_info in = pod(&w, o[i]);
        assert_int_equal(in.state, GS_TPOD_RUNNING);
        assert_int_equal(in.evictions, i >= 4 && i < 8 ? 1 : 0);
        assert_int_equal(in.pl.node, i < 4 ? 0 : 1);
    }
    assert_int_equal(model_alloc(&w, owner, H100), 4000);
    assert_int_equal(model_alloc(&w, other, H100), 4000);
    assert_int_equal(model_alloc(&w, other, A100), 8000);
    for (int t = 0; t < 20; t++)
        cycle(&w, 400 + t);
    assert_int_equal(w.reclaims, 4);
    world_fini(&w);
}

static void test_owner_reclaims_h100_only_by_its_h100_quota(void **st)
{
    (void)st;
    reclaim_case(true);
}

static void test_without_the_h100_entry_nothing_is_reclaimed(void **st)
{
    (void)st;
    reclaim_case(false);
}

/*
 * The per-model quota protects what it guarantees from the overall rule too. Nodes n0 H100 and
 * n1 A100. Queue keep: overall quota 2, H100 quota 4; it runs 4 H100 pods on n0 and is above its
 * overall fair share (demand 4, quota 2: fair 2 + what the other leaves). Queue taker: overall
 * quota 14, no entry; it asks 13 H100-only pods. Fair shares: keep min(2, 4) = 2, taker min(14,
 * 13) = 13, the 1 left to keep: 3. keep holds 4 > 3, so the overall rule would take one of its
 * H100 pods for taker, but keep would fall to 3 of its H100 quota of 4: refused. taker's pods
 * fill the 4 free H100s of n0 and the other 9 wait.
 */
static void test_model_quota_shields_from_overall_reclaim(void **st)
{
    (void)st;
    static const char *const models[] = {"H100", "A100"};
    struct world w;
    world_init(&w, models, 2);
    uint32_t keep, taker;
    struct gs_model_quota mq = {H100, 4000, INF};
    assert_int_equal(add_queue(&w, "keep", GS_QUEUE_ROOT, 2000, INF, &mq, &keep), GS_OK);
    assert_int_equal(add_queue(&w, "taker", GS_QUEUE_ROOT, 14000, INF, NULL, &taker), GS_OK);
    for (int i = 0; i < 4; i++)
        submit(&w, keep, MASK(H100), i);
    cycle(&w, 100);
    assert_int_equal(model_alloc(&w, keep, H100), 4000);
    for (int i = 0; i < 13; i++)
        submit(&w, taker, MASK(H100), 200 + i);
    for (int t = 0; t < 5; t++)
        cycle(&w, 300 + t);
    assert_int_equal(w.reclaims, 0);
    assert_int_equal(model_alloc(&w, keep, H100), 4000);
    assert_int_equal(model_alloc(&w, taker, H100), 4000);
    world_fini(&w);
}

/* What add_queue and update_queue refuse, and the parent's sum rule. */
static void test_model_entries_are_checked(void **st)
{
    (void)st;
    static const char *const models[] = {"H100", "A100"};
    struct world w;
    world_init(&w, models, 2);
    uint32_t id;
    struct gs_model_quota unknown = {7, 0, INF}, below = {H100, 3000, 2000},
                          over_overall = {H100, 5000, INF};
    assert_int_equal(add_queue(&w, "a", GS_QUEUE_ROOT, 0, INF, &unknown, &id), GS_EINVAL);
    assert_int_equal(add_queue(&w, "a", GS_QUEUE_ROOT, 0, INF, &below, &id), GS_EINVAL);
    assert_int_equal(add_queue(&w, "a", GS_QUEUE_ROOT, 0, 4000, &over_overall, &id), GS_EINVAL);
    struct gs_model_quota twice[2] = {{H100, 0, INF}, {H100, 0, 1000}};
    struct gs_queue_spec s = {"a", GS_QUEUE_ROOT, {0, 0, 0}, {INF, INF, INF}, 1, 0, twice, 2};
    assert_int_equal(gs_engine_add_queue(w.e, &s, &id), GS_EINVAL);
    /* Parent dept: H100 quota 4. Children 3 + 1 fit; a third child with 1 more does not. */
    uint32_t dept, c1;
    struct gs_model_quota d = {H100, 4000, INF}, three = {H100, 3000, INF}, one = {H100, 1000, INF};
    assert_int_equal(add_queue(&w, "dept", GS_QUEUE_ROOT, 0, INF, &d, &dept), GS_OK);
    assert_int_equal(add_queue(&w, "c1", dept, 0, INF, &three, &c1), GS_OK);
    assert_int_equal(add_queue(&w, "c2", dept, 0, INF, &one, &id), GS_OK);
    assert_int_equal(add_queue(&w, "c3", dept, 0, INF, &one, &id), GS_EINVAL);
    /* c1 holds 2 H100 GPUs: an H100 limit of 1 is refused, 2 is taken; the entry reads back. */
    submit(&w, c1, MASK(H100), 0);
    submit(&w, c1, MASK(H100), 0);
    cycle(&w, 10);
    assert_int_equal(model_alloc(&w, c1, H100), 2000);
    assert_int_equal(model_alloc(&w, dept, H100), 2000);
    struct gs_model_quota lim1 = {H100, 1000, 1000}, lim2 = {H100, 2000, 2000};
    struct gs_queue_spec u = {"c1", dept, {0, 0, 0}, {INF, INF, INF}, 1, 0, &lim1, 1};
    assert_int_equal(gs_engine_update_queue(w.e, c1, &u), GS_EINVAL);
    u.by_model = &lim2;
    assert_int_equal(gs_engine_update_queue(w.e, c1, &u), GS_OK);
    struct gs_queue_model_info mi;
    assert_int_equal(gs_engine_queue_model_info(w.e, c1, H100, &mi), GS_OK);
    assert_true(mi.bounded);
    assert_int_equal(mi.quota_milli, 2000);
    assert_int_equal(mi.limit_milli, 2000);
    assert_int_equal(gs_engine_queue_model_info(w.e, c1, A100, &mi), GS_OK);
    assert_false(mi.bounded);
    assert_int_equal(mi.limit_milli, INF);
    assert_int_equal(gs_engine_queue_model_info(w.e, c1, GS_MODELS_MAX, &mi), GS_EINVAL);
    world_fini(&w);
}

static struct gs_queue_model_info model_info(struct world *w, uint32_t q, uint32_t model)
{
    struct gs_queue_model_info mi;
    assert_int_equal(gs_engine_queue_model_info(w->e, q, model, &mi), GS_OK);
    assert_true(mi.fair_known);
    return mi;
}

/*
 * Fair share per GPU model: each model's GPUs are divided on their own, so a queue's unused
 * H100 share is not lent to it as A100 share. Nodes n0 H100 and n1 A100, 8 GPUs each. Queues:
 * A (quota 6 GPUs, H100 entry quota 6), B (quota 4, A100 entry quota 4), C (quota 0, no entry,
 * over-quota weight 2; A and B weight 1). Pending, as the cycle starts: A four A100-only 1-GPU
 * pods, B eight A100-only, C eight of any model (counted on both models).
 *
 * H100, 8000 milli: wants A 0, B 0, C 8000; quotas give 0 (A wants none, C has no entry); the
 * 8000 left go by weight to the one queue still wanting: C 8000.
 * A100, 8000 milli: wants A 4000, B 8000, C 8000; quotas give A 0 (no A100 entry), B 4000, C 0;
 * the 4000 left by weight 1:1:2 among all three: A 1000, B 1000 + 4000 = 5000, C 2000.
 * Overall, 16000 milli: wants A 4000, B 8000, C 8000; quotas give A 4000, B 4000; the 8000 left
 * by weight 1:2 among B and C: 2666 and 5333, the unit left by truncation to B (id order):
 * A 4000, B 6667, C 5333. A's overall share counts its H100 quota on its A100 pods: 4000; its
 * A100 share is 1000.
 */
static void test_fair_share_is_divided_per_gpu_model(void **st)
{
    (void)st;
    struct world w;
    const char *models[] = {"H100", "A100"};
    world_init(&w, models, 2);
    struct gs_model_quota ha = {H100, 6000, INF}, qb = {A100, 4000, INF};
    struct gs_queue_spec sa = {"A", GS_QUEUE_ROOT, {6000, 0, 0}, {INF, INF, INF}, 1, 0, &ha, 1};
    struct gs_queue_spec sb = {"B", GS_QUEUE_ROOT, {4000, 0, 0}, {INF, INF, INF}, 1, 0, &qb, 1};
    struct gs_queue_spec sc = {"C", GS_QUEUE_ROOT, {0, 0, 0}, {INF, INF, INF}, 2, 0, NULL, 0};
    uint32_t a, b, c;
    assert_int_equal(gs_engine_add_queue(w.e, &sa, &a), GS_OK);
    assert_int_equal(gs_engine_add_queue(w.e, &sb, &b), GS_OK);
    assert_int_equal(gs_engine_add_queue(w.e, &sc, &c), GS_OK);
    for (int i = 0; i < 4; i++)
        (void)submit(&w, a, MASK(A100), 0);
    for (int i = 0; i < 8; i++) {
        (void)submit(&w, b, MASK(A100), 0);
        (void)submit(&w, c, GS_MODEL_ANY, 0);
    }
    cycle(&w, 1);
    struct {
        uint32_t q, model;
        int64_t demand, fair;
    } want[] = {
        {a, H100, 0, 0},       {b, H100, 0, 0},       {c, H100, 8000, 8000}, {a, A100, 4000, 1000},
        {b, A100, 8000, 5000}, {c, A100, 8000, 2000}, {0, H100, 8000, 8000}, {0, A100, 20000, 8000},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct gs_queue_model_info mi = model_info(&w, want[i].q, want[i].model);
        if (mi.demand_milli != want[i].demand || mi.fair_milli != want[i].fair)
            fail_msg("row %zu: demand %lld fair %lld", i, (long long)mi.demand_milli,
                     (long long)mi.fair_milli);
    }
    struct gs_queue_info qi;
    static const int64_t overall[] = {4000, 6667, 5333};
    uint32_t ids[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gs_engine_queue_info(w.e, ids[i], &qi), GS_OK);
        assert_int_equal(qi.fair[GS_RES_GPU], overall[i]);
    }
    world_fini(&w);
}

/* Without any per-model entry there is no per-model division (and no cost for it). */
static void test_no_model_entries_no_model_fair_share(void **st)
{
    (void)st;
    struct world w;
    const char *models[] = {"H100", "A100"};
    world_init(&w, models, 2);
    uint32_t q;
    assert_int_equal(add_queue(&w, "q", GS_QUEUE_ROOT, 1000, INF, NULL, &q), GS_OK);
    (void)submit(&w, q, GS_MODEL_ANY, 0);
    cycle(&w, 1);
    struct gs_queue_model_info mi;
    assert_int_equal(gs_engine_queue_model_info(w.e, q, H100, &mi), GS_OK);
    assert_false(mi.fair_known);
    assert_int_equal(mi.fair_milli, 0);
    world_fini(&w);
}

/*
 * The overall reclaim rule reclaims GPUs of a model only while the reclaimer is below its fair
 * share of that model. Nodes n0 H100 and n1 A100, 8 GPUs each. A: quota 6 GPUs, its H100 entry
 * quota 6, weight 1. C: quota 0, no entry, weight 1, running eight H100-only and eight
 * A100-only pods. A then asks six A100-only pods.
 * Overall, 16000: wants A 6000, C 16000; quotas give A 6000, C 0; C gets the 10000 left. C holds
 * 16000 > 10000 and A 0 < 6000: by the overall shares alone A would reclaim six A100s.
 * A100, 8000: wants A 6000, C 8000; quotas give 0 (A's entry is for H100); by weight 1:1 4000
 * each. A reclaims while below 4000: four A100s, and its other two pods wait. A's unused H100
 * quota is not lent to it as A100 share.
 */
static void test_reclaim_stops_at_the_model_fair_share(void **st)
{
    (void)st;
    struct world w;
    const char *models[] = {"H100", "A100"};
    world_init(&w, models, 2);
    struct gs_model_quota ha = {H100, 6000, INF};
    struct gs_queue_spec sa = {"A", GS_QUEUE_ROOT, {6000, 0, 0}, {INF, INF, INF}, 1, 0, &ha, 1};
    uint32_t a, c;
    assert_int_equal(gs_engine_add_queue(w.e, &sa, &a), GS_OK);
    assert_int_equal(add_queue(&w, "C", GS_QUEUE_ROOT, 0, INF, NULL, &c), GS_OK);
    for (int i = 0; i < 8; i++) {
        (void)submit(&w, c, MASK(H100), 0);
        (void)submit(&w, c, MASK(A100), 0);
    }
    cycle(&w, 1);
    assert_int_equal(gpu_alloc(&w, c), 16000);
    uint32_t ap[6];
    for (int i = 0; i < 6; i++)
        ap[i] = submit(&w, a, MASK(A100), 2);
    for (int t = 3; t < 10; t++)
        cycle(&w, t);
    assert_int_equal(model_info(&w, a, A100).fair_milli, 4000);
    assert_int_equal(w.reclaims, 4);
    assert_int_equal(model_alloc(&w, a, A100), 4000);
    assert_int_equal(model_alloc(&w, c, A100), 4000);
    int running = 0;
    for (int i = 0; i < 6; i++)
        running += pod(&w, ap[i]).state == GS_TPOD_RUNNING;
    assert_int_equal(running, 4);
    world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_model_pods_go_to_a100_once_h100_is_full),
        cmocka_unit_test(test_h100_pod_waits_at_the_h100_limit),
        cmocka_unit_test(test_owner_reclaims_h100_only_by_its_h100_quota),
        cmocka_unit_test(test_without_the_h100_entry_nothing_is_reclaimed),
        cmocka_unit_test(test_model_quota_shields_from_overall_reclaim),
        cmocka_unit_test(test_model_entries_are_checked),
        cmocka_unit_test(test_fair_share_is_divided_per_gpu_model),
        cmocka_unit_test(test_no_model_entries_no_model_fair_share),
        cmocka_unit_test(test_reclaim_stops_at_the_model_fair_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
