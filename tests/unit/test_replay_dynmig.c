/*
 * Replay with dynamic MIG (gs_replay_config.dynamic_mig), on the hand-made trace of
 * tests/data/dynmig: one H100-80GB cut into seven 1g.10gb (starts 0..6, memory slice 7 empty),
 * one queue, every pod arriving at its creation time:
 *
 *   pod  asks          created  runs
 *   p1   1 x 1g.10gb      0     3600 s
 *   p2   1 x 3g.40gb    100      600 s
 *   p3   1 x 1g.10gb    200     3600 s
 *   p4   1 x 3g.40gb    300      600 s
 *
 * Off: no 3g.40gb exists, so p2 and p4 never start; p1 takes the 1g at 0 and p3 the 1g at 1
 * (the pick's lowest free start). Waits of the started pods: 0, 0.
 *
 * On, delay D: at 100 the planner destroys the free 1g at 4, 5, 6 and creates 3g at 4 (the 3g
 * at 0 would need the held 1g at 0 gone); p2 binds at 100 and starts at 100 + D (wait D), ends
 * at 100 + D + 600. p3 at 200 takes the free 1g at 1 (no re-partition, wait 0). p4 at 300: the 3g
 * at 4 is p2's and a 3g at 0 needs the held 1g at 0 and 1 destroyed: no plan, it waits until p2
 * ends and takes the free 3g at 4 as it is: wait 100 + D + 600 - 300 = 400 + D. One
 * re-partition in all.
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
#include "gpusched/qconfig.h"
#include "gpusched/replay.h"
#include "gpusched/trace.h"
#include "replay_fixture.h"
#include "util/file.h"

/* Replays with dynamic MIG on or off and checks the started pods (names and waits, in pod
 * order) and the re-partitions. */
static void replay_expect(bool dynamic, int64_t delay_ms, const char *const *names,
                          const double *waits, uint32_t nwaits, uint64_t repartitions)
{
    struct replay_world w;
    replay_world_load(&w, "dynmig");
    struct gs_replay_config cfg = {.policy = "fgd",
                                   .preemption = true,
                                   .reclaim = true,
                                   .backfill = true,
                                   .sample_ms = 3600000,
                                   .retry_ms = 600000,
                                   .seed = 42,
                                   .arrival_speedup = 1,
                                   .dynamic_mig = dynamic,
                                   .mig_repartition_ms = delay_ms};
    struct gs_replay *r = NULL;
    struct gs_diag d;
    assert_int_equal(gs_replay_run(&w.nodes, &w.pods, w.qc, &cfg, &r, &d), GS_OK);
    const uint32_t *wq;
    const double *ws;
    uint32_t n = gs_replay_waits(r, &wq, &ws);
    const char *const *pods = gs_replay_wait_pods(r);
    assert_int_equal(n, nwaits);
    for (uint32_t i = 0; i < n; i++) {
        assert_string_equal(pods[i], names[i]);
        if (ws[i] != waits[i])
            fail_msg("%s waited %.3f s, want %.3f s", names[i], ws[i], waits[i]);
    }
    assert_int_equal(gs_replay_mig_repartitions(r), repartitions);
    gs_replay_free(r);
    replay_world_fini(&w);
}

static void test_off_the_3g_pods_never_start(void **state)
{
    (void)state;
    static const char *const names[] = {"p1", "p3"};
    static const double waits[] = {0, 0};
    replay_expect(false, 0, names, waits, 2, 0);
}

static void test_on_p2_starts_after_the_default_10_s_re_partition(void **state)
{
    (void)state;
    static const char *const names[] = {"p1", "p2", "p3", "p4"};
    /* D = 10 s: p2 waits 10, p4 400 + 10. */
    static const double waits[] = {0, 10, 0, 410};
    replay_expect(true, 10000, names, waits, 4, 1);
}

static void test_on_the_delay_is_the_configured_one(void **state)
{
    (void)state;
    static const char *const names[] = {"p1", "p2", "p3", "p4"};
    /* D = 30 s: p2 waits 30, p4 430; D = 0: the re-partition is instant. */
    static const double waits30[] = {0, 30, 0, 430};
    replay_expect(true, 30000, names, waits30, 4, 1);
    static const double waits0[] = {0, 0, 0, 400};
    replay_expect(true, 0, names, waits0, 4, 1);
}

static void test_negative_delay_is_refused_with_a_reason(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "dynmig");
    struct gs_replay_config cfg = {
        .policy = "fgd", .arrival_speedup = 1, .dynamic_mig = true, .mig_repartition_ms = -1};
    struct gs_replay *r = NULL;
    struct gs_diag d;
    assert_int_equal(gs_replay_run(&w.nodes, &w.pods, w.qc, &cfg, &r, &d), GS_EINVAL);
    assert_null(r);
    assert_string_equal(d.msg, "the MIG re-partition delay is negative (-1 ms)");
    replay_world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_the_3g_pods_never_start),
        cmocka_unit_test(test_on_p2_starts_after_the_default_10_s_re_partition),
        cmocka_unit_test(test_on_the_delay_is_the_configured_one),
        cmocka_unit_test(test_negative_delay_is_refused_with_a_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
