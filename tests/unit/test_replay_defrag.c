/*
 * The replay's defragmentation (gs_replay_config.defrag, include/gpusched/defrag.h) on the
 * hand-sized trace of tests/data/defrag: two nodes of one GPU each, one queue, bestfit.
 *
 *   pod  GPU   created  runs (deletion - scheduled)
 *   a    0.5      0     5000 s
 *   b    0.5      0      100 s
 *   x    0.5      1       99 s
 *   y    0.5      1     6000 s
 *   c    1.0    200      100 s
 *
 * Bestfit puts b on a's GPU (the fuller node, 0.5 left, fits exactly), x and y on the other.
 * At 100 b and x end: each GPU holds one half (a, y), 1.0 GPU free in two pieces. c (a whole
 * GPU) arrives at 200 and fits nowhere.
 *
 * Without defrag: c waits for a's end at 5000: wait 4800 s.
 *
 * With defrag after 600 s: the cycle at 200 leaves c waiting; the next cycle is the retry tick
 * 600 s later, at 800, where c has waited 600 s: the plan moves one half onto the other's GPU
 * (1 pod, 500 milli; no one-move plan moves less, and no zero-move plan exists), c starts in the
 * cycle right after at 800 (wait 600 s, 1.0 GPU recovered), and the moved pod restarts 30 s
 * later and runs its whole run time again. Waits in pod order: a 0, b 0, x 0, y 0, c 600.
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
#include "gpusched/tenant.h"
#include "gpusched/trace.h"
#include "replay_fixture.h"

static struct gs_replay *run(const struct replay_world *w, bool defrag)
{
    struct gs_replay_config cfg = {.policy = "bestfit",
                                   .preemption = true,
                                   .reclaim = true,
                                   .backfill = true,
                                   .sample_ms = 3600000,
                                   .retry_ms = 600000,
                                   .seed = 42,
                                   .arrival_speedup = 1,
                                   .defrag = defrag,
                                   .defrag_wait_ms = 600000,
                                   .defrag_moves = 2,
                                   .defrag_restart_ms = 30000};
    struct gs_replay *r = NULL;
    struct gs_diag d;
    assert_int_equal(gs_replay_run(&w->nodes, &w->pods, w->qc, &cfg, &r, &d), GS_OK);
    return r;
}

static void expect_waits(const struct gs_replay *r, const double *want, uint32_t n)
{
    const uint32_t *wq;
    const double *ws;
    assert_int_equal(gs_replay_waits(r, &wq, &ws), n);
    for (uint32_t i = 0; i < n; i++)
        if (ws[i] != want[i])
            fail_msg("started pod %u waited %.3f s, want %.3f s", i, ws[i], want[i]);
}

static void test_replay_without_defrag_waits_for_the_long_half(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "defrag");
    struct gs_replay *r = run(&w, false);
    const double waits[] = {0, 0, 0, 0, 4800};
    expect_waits(r, waits, 5);
    struct gs_replay_defrag d;
    gs_replay_defrag(r, &d);
    assert_int_equal(d.searches, 0);
    assert_int_equal(d.plans, 0);
    gs_replay_free(r);
    replay_world_fini(&w);
}

static void test_replay_with_defrag_moves_one_half_and_starts_the_whole_gpu_pod(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "defrag");
    struct gs_replay *r = run(&w, true);
    const double waits[] = {0, 0, 0, 0, 600};
    expect_waits(r, waits, 5);
    struct gs_replay_defrag d;
    gs_replay_defrag(r, &d);
    assert_int_equal(d.searches, 1);
    assert_int_equal(d.plans, 1);
    assert_int_equal(d.no_plan, 0);
    assert_int_equal(d.pods_moved, 1);
    assert_int_equal(d.gpu_milli_moved, 500);
    assert_int_equal(d.started, 1);
    assert_int_equal(d.gpu_milli_recovered, 1000);
    uint64_t by[GS_REPLAY_EVICT_REASONS];
    gs_replay_evictions_by_reason(r, by);
    assert_int_equal(by[GS_EVICT_DEFRAG], 1);
    const struct gs_replay_queue *q;
    assert_int_equal(gs_replay_queues(r, &q), 1);
    assert_int_equal(q[0].defrag_moved, 1);
    assert_int_equal(q[0].defrag_started, 1);
    assert_int_equal(q[0].completed, 5);
    /* Mean wait 600 / 5 = 120 s (4800 / 5 = 960 s without). */
    assert_true(q[0].wait_mean_s == 120.0);
    gs_replay_free(r);
    replay_world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_without_defrag_waits_for_the_long_half),
        cmocka_unit_test(test_replay_with_defrag_moves_one_half_and_starts_the_whole_gpu_pod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
