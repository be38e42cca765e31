/*
 * Dynamic MIG in the cluster and the tenant engine: gs_cluster_set_mig_layout() (held
 * instances kept, refusals with their reasons) and gs_engine_config.dynamic_mig (off: a pod
 * with no free instance waits; on: the best plan over the cluster is applied, the BIND reports
 * the re-partition and its delay, and a gang trial that fails puts the old layout back).
 * The geometry is the H100-80GB table's (1g.10gb starts 0..6, 3g.40gb {0,4}, 4g.40gb {0},
 * 2g.20gb {0,2,4}); each expected layout is worked out in the comment above its test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <string.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "gpusched/tenant.h"

#define INF GS_UNLIMITED

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    const struct gs_mig_model *m;
    uint32_t binds, repartitions;
    int64_t last_delay_ms;
    uint32_t queue, pclass;
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    if (ev->kind != GS_EV_BIND && ev->kind != GS_EV_BACKFILL)
        return;
    w->binds++;
    w->repartitions += ev->mig_repartitions;
    w->last_delay_ms = ev->start_delay_ms;
}

static uint8_t prof(const struct world *w, const char *name)
{
    int p = gs_mig_profile_find(w->m, name);
    assert_true(p >= 0);
    return (uint8_t)p;
}

/* A node with one H100-80GB GPU in MIG mode with the layout given as "profile@start" pairs. */
static uint32_t add_mig_node(struct world *w, const char *name, const char *const *profiles,
                             const uint8_t *starts, uint32_t n)
{
    struct gs_gpu_mode mode = {.sharing = GS_GPU_SHARE_MIG, .mig_count = (uint8_t)n};
    for (uint32_t k = 0; k < n; k++)
        mode.mig[k] = (struct gs_mig_instance){prof(w, profiles[k]), starts[k]};
    struct gs_node_spec s = {.name = name,
                             .cpu_milli = 64000,
                             .mem_mib = 262144,
                             .pods_max = 110,
                             .gpu_count = 1,
                             .gpu_model = "H100-80GB",
                             .gpu_mem_mib = 81920,
                             .gpu_modes = &mode};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(w->c, &s, &id), GS_OK);
    return id;
}

static uint32_t add_seven_1g(struct world *w, const char *name)
{
    static const char *const p[] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
                                    "1g.10gb", "1g.10gb", "1g.10gb"};
    static const uint8_t s[] = {0, 1, 2, 3, 4, 5, 6};
    return add_mig_node(w, name, p, s, 7);
}

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    w->m = gs_mig_model_find("H100-80GB");
    assert_non_null(w->m);
}

static void engine_start(struct world *w, bool dynamic, int64_t delay_ms)
{
    struct gs_engine_config cfg = {.policy = "bestfit",
                                   .dynamic_mig = dynamic,
                                   .mig_repartition_ms = delay_ms,
                                   .on_event = on_event,
                                   .ctx = w};
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
    struct gs_queue_spec q = {"team", GS_QUEUE_ROOT, {0, 0, 0}, {INF, INF, INF}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w->e, &q, &w->queue), GS_OK);
    struct gs_priority_class_spec pc = {"batch", 10, -1};
    assert_int_equal(gs_engine_add_priority_class(w->e, &pc, &w->pclass), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static uint32_t submit(struct world *w, const char *profile, uint8_t count, uint32_t gang,
                       int64_t now_ms)
{
    struct gs_tpod_spec s = {"p", w->queue, w->pclass, gang, {0}, -1};
    s.req = (struct gs_pod_req){
        .cpu_milli = 1000, .mem_mib = 1024, .gpu_model_mask = GS_MODEL_ANY, .mig_count = count};
    (void)snprintf(s.req.mig_profile, sizeof(s.req.mig_profile), "%s", profile);
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

static struct gs_tpod_info info(struct world *w, uint32_t pod)
{
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w->e, pod, &in), GS_OK);
    return in;
}

/* The GPU's layout as "profile@start,..." in its (ascending start) order, with '*' after a held
 * instance. */
static void layout_str(const struct world *w, uint32_t node, char *buf, size_t cap)
{
    const struct gs_gpu *g = &gs_cluster_node(w->c, node)->gpus[0];
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < g->mig_count && len < cap; k++) {
        int n = snprintf(buf + len, cap - len, "%s%s@%u%s", k ? "," : "",
                         w->m->profiles[g->mig[k].profile].name, g->mig[k].start,
                         g->mig_held >> k & 1 ? "*" : "");
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

static void expect_layout(const struct world *w, uint32_t node, const char *want)
{
    char got[256];
    layout_str(w, node, got, sizeof(got));
    assert_string_equal(got, want);
}

/*
 * gs_cluster_set_mig_layout(): a pod holds the 1g at 0 of seven 1g.10gb. The layout 1g at 0..3
 * + 3g at 4 keeps it (held bit moves with it, compute slice 0 stays used); one that drops it
 * is refused with the reason and changes nothing; so are a GPU not in MIG mode, an overlap and
 * an empty layout. The pod's unbind then works on the new layout.
 */
static void test_set_mig_layout_keeps_held_instances(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n = add_seven_1g(&w, "n0");
    struct gs_node_spec plain = {.name = "plain",
                                 .cpu_milli = 1000,
                                 .mem_mib = 1024,
                                 .pods_max = 10,
                                 .gpu_count = 1,
                                 .gpu_model = "H100-80GB"};
    uint32_t pn;
    assert_int_equal(gs_cluster_add_node(w.c, &plain, &pn), GS_OK);
    struct gs_pod_req r = {
        .cpu_milli = 1000, .mem_mib = 1024, .gpu_model_mask = GS_MODEL_ANY, .mig_count = 1};
    (void)snprintf(r.mig_profile, sizeof(r.mig_profile), "1g.10gb");
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(w.c, n), n, &r, &pl), GS_OK);
    assert_int_equal(gs_cluster_bind(w.c, &r, &pl), GS_OK);
    expect_layout(&w, n, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");

    uint8_t g1 = prof(&w, "1g.10gb"), g3 = prof(&w, "3g.40gb");
    char why[200];
    uint64_t gen = gs_cluster_node(w.c, n)->gen;
    /* Given in any order; kept by start. */
    struct gs_mig_instance next[] = {{g3, 4}, {g1, 3}, {g1, 0}, {g1, 1}, {g1, 2}};
    assert_int_equal(gs_cluster_set_mig_layout(w.c, n, 0, next, 5, why, sizeof(why)), GS_OK);
    assert_string_equal(why, "");
    expect_layout(&w, n, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4");
    assert_int_equal(gs_cluster_node(w.c, n)->gpus[0].mig_slices_used, 0x1);
    assert_true(gs_cluster_node(w.c, n)->gen > gen);

    struct gs_mig_instance two3g[] = {{g3, 0}, {g3, 4}};
    assert_int_equal(gs_cluster_set_mig_layout(w.c, n, 0, two3g, 2, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "instance 1g.10gb at 0 is held by a pod and not in the new layout");
    struct gs_mig_instance overlap[] = {{g1, 0}, {g3, 0}};
    assert_int_equal(gs_cluster_set_mig_layout(w.c, n, 0, overlap, 2, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "instance 1 (3g.40gb at 0) overlaps instance 0 (1g.10gb at 0) in "
                             "memory slice 0");
    assert_int_equal(gs_cluster_set_mig_layout(w.c, n, 0, next, 0, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "0 instances: a MIG layout has 1 to 8");
    assert_int_equal(gs_cluster_set_mig_layout(w.c, pn, 0, next, 5, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU 0 is not in MIG mode");
    assert_int_equal(gs_cluster_set_mig_layout(w.c, n, 1, next, 5, why, sizeof(why)), GS_EINVAL);
    expect_layout(&w, n, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4");

    assert_int_equal(gs_cluster_unbind(w.c, &r, &pl), GS_OK);
    expect_layout(&w, n, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4");
    assert_int_equal(gs_cluster_node(w.c, n)->gpus[0].mig_slices_used, 0);
    gs_cluster_free(w.c);
}

/* Off (the default): a 3g.40gb pod on seven free 1g.10gb waits and the layout stays. */
static void test_off_a_pod_without_a_free_instance_waits(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n = add_seven_1g(&w, "n0");
    engine_start(&w, false, 0);
    uint32_t p = submit(&w, "3g.40gb", 1, GS_NO_GANG, 0);
    cycle(&w, 0);
    assert_int_equal(info(&w, p).state, GS_TPOD_PENDING);
    assert_int_equal(w.binds, 0);
    expect_layout(&w, n, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
    world_fini(&w);
}

/*
 * On, delay 10 s: the plan of test_mig_plan's first case (destroy the 1g at 4, 5, 6, create 3g
 * at 4) is applied at t = 5 s; the pod holds the 3g at 4, its BIND says one re-partition and a
 * 10 s delay, and its start is 5 + 10 = 15 s. A 1g pod after it takes a free 1g at once: no
 * re-partition, no delay.
 */
static void test_on_the_gpu_is_re_partitioned_and_the_start_delayed(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n = add_seven_1g(&w, "n0");
    engine_start(&w, true, 10000);
    uint32_t p = submit(&w, "3g.40gb", 1, GS_NO_GANG, 5000);
    cycle(&w, 5000);
    struct gs_tpod_info in = info(&w, p);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    assert_int_equal(in.start_ms, 15000);
    assert_int_equal(in.pl.mig_count, 1);
    assert_int_equal(in.pl.mig[0].gpu, 0);
    assert_int_equal(in.pl.mig[0].profile, prof(&w, "3g.40gb"));
    assert_int_equal(in.pl.mig[0].start, 4);
    assert_int_equal(w.binds, 1);
    assert_int_equal(w.repartitions, 1);
    assert_int_equal(w.last_delay_ms, 10000);
    expect_layout(&w, n, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4*");
    uint32_t q = submit(&w, "1g.10gb", 1, GS_NO_GANG, 6000);
    cycle(&w, 6000);
    assert_int_equal(info(&w, q).state, GS_TPOD_RUNNING);
    assert_int_equal(info(&w, q).start_ms, 6000);
    assert_int_equal(w.repartitions, 1);
    assert_int_equal(w.last_delay_ms, 0);
    expect_layout(&w, n, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4*");
    world_fini(&w);
}

/*
 * The plan with the fewest instances destroyed wins across nodes. n0 (index 0): seven free
 * 1g.10gb, a 3g.40gb there destroys three. n1: 4g.40gb at 0 (held by a 4g pod), 2g.20gb at 4 and
 * 1g.10gb at 6, both free: 3g at 4 destroys two. n1 is chosen although n0 comes first.
 * Two 3g on one card: n0 is still seven free 1g; a pod asking two 3g.40gb destroys all seven
 * there (n1 has no room: its 4g at 0 and 3g at 4 are held).
 */
static void test_the_fewest_destroyed_wins_across_nodes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n0 = add_seven_1g(&w, "n0");
    static const char *const p1[] = {"4g.40gb", "2g.20gb", "1g.10gb"};
    static const uint8_t s1[] = {0, 4, 6};
    uint32_t n1 = add_mig_node(&w, "n1", p1, s1, 3);
    engine_start(&w, true, 10000);
    uint32_t big = submit(&w, "4g.40gb", 1, GS_NO_GANG, 0);
    cycle(&w, 0);
    assert_int_equal(info(&w, big).pl.node, n1);
    assert_int_equal(w.repartitions, 0);
    uint32_t p3 = submit(&w, "3g.40gb", 1, GS_NO_GANG, 1000);
    cycle(&w, 1000);
    assert_int_equal(info(&w, p3).pl.node, n1);
    assert_int_equal(w.repartitions, 1);
    expect_layout(&w, n1, "4g.40gb@0*,3g.40gb@4*");
    expect_layout(&w, n0, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
    uint32_t two = submit(&w, "3g.40gb", 2, GS_NO_GANG, 2000);
    cycle(&w, 2000);
    struct gs_tpod_info in = info(&w, two);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    assert_int_equal(in.pl.node, n0);
    assert_int_equal(in.pl.mig_count, 2);
    assert_int_equal(in.pl.mig[0].start, 0);
    assert_int_equal(in.pl.mig[1].start, 4);
    expect_layout(&w, n0, "3g.40gb@0*,3g.40gb@4*");
    assert_int_equal(w.repartitions, 2);
    world_fini(&w);
}

/*
 * A gang trial that fails puts the layout back. n0: seven 1g.10gb, a lone 1g pod holding the
 * one at 0. A gang of two 3g.40gb (min_member 2; 2 x 3/7 GPU passes the engine's GPU bound of
 * one GPU): the first member re-partitions n0 (destroy the 1g at 4, 5, 6, 3g at 4), the second
 * has no plan (3g at 0 needs the held 1g at 0), so the trial rolls back: the seven 1g are there
 * again, the one at 0 still held, and no member was reported bound. With a second GPU of seven
 * free 1g (node n1) the gang runs. Member 1: either GPU destroys three 1g, but n1 keeps four
 * spare 1g (score 4) and n0 three (the held one is not spare: score 3), so n1 although n0 comes
 * first. Member 2: n1 would destroy its four lower 1g, n0 three: n0. Both start 10 s after the
 * cycle; two re-partitions.
 */
static void test_a_failed_gang_trial_puts_the_layout_back(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    uint32_t n0 = add_seven_1g(&w, "n0");
    engine_start(&w, true, 10000);
    uint32_t lone = submit(&w, "1g.10gb", 1, GS_NO_GANG, 0);
    cycle(&w, 0);
    assert_int_equal(info(&w, lone).state, GS_TPOD_RUNNING);
    struct gs_gang_spec gs = {"job", 2, 0};
    uint32_t g;
    assert_int_equal(gs_engine_add_gang(w.e, &gs, &g), GS_OK);
    uint32_t m[2];
    for (int i = 0; i < 2; i++)
        m[i] = submit(&w, "3g.40gb", 1, g, 1000);
    uint32_t binds = w.binds;
    cycle(&w, 1000);
    for (int i = 0; i < 2; i++)
        assert_int_equal(info(&w, m[i]).state, GS_TPOD_PENDING);
    assert_int_equal(w.binds, binds);
    assert_int_equal(w.repartitions, 0);
    expect_layout(&w, n0, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6");
    uint32_t n1 = add_seven_1g(&w, "n1");
    cycle(&w, 2000);
    for (int i = 0; i < 2; i++) {
        struct gs_tpod_info in = info(&w, m[i]);
        assert_int_equal(in.state, GS_TPOD_RUNNING);
        assert_int_equal(in.start_ms, 12000);
        assert_int_equal(in.pl.node, i == 0 ? n1 : n0);
    }
    assert_int_equal(w.binds, binds + 2);
    assert_int_equal(w.repartitions, 2);
    expect_layout(&w, n0, "1g.10gb@0*,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4*");
    expect_layout(&w, n1, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4*");
    world_fini(&w);
}

/* A negative delay is refused by gs_engine_new(). */
static void test_negative_delay_is_einval(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_engine_config cfg = {
        .policy = "bestfit", .dynamic_mig = true, .mig_repartition_ms = -1};
    assert_int_equal(gs_engine_new(w.c, &cfg, &w.e), GS_EINVAL);
    assert_null(w.e);
    gs_cluster_free(w.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_mig_layout_keeps_held_instances),
        cmocka_unit_test(test_off_a_pod_without_a_free_instance_waits),
        cmocka_unit_test(test_on_the_gpu_is_re_partitioned_and_the_start_delayed),
        cmocka_unit_test(test_the_fewest_destroyed_wins_across_nodes),
        cmocka_unit_test(test_a_failed_gang_trial_puts_the_layout_back),
        cmocka_unit_test(test_negative_delay_is_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
