/*
 * Tests of the replay's gangs (include/gpusched/replay.h, podGroups in docs/queues.md), on the
 * hand-sized trace of tests/data/gangs: one node with 4 GPUs, one queue, EASY backfill on.
 *
 *   pod  GPUs  created  runs (deletion - scheduled)
 *   p0    1       0     1000 s
 *   a1    2      10      100 s
 *   a2    2      20      100 s
 *   a3    2     100       50 s
 *
 * The podGroups rule (minGpu 2, window 60 s, minMember 2) makes {a1, a2} a gang (a2 arrives 10 s
 * after a1, same shape); a3 arrives 90 s after a1, opens a group of its own, and runs alone.
 *
 * With the gang: p0 starts at 0 (3 GPUs free). The gang needs 4 GPUs at once and 3 are free, so
 * it waits for p0's end at 1000 s (its backfill reservation). a3 arrives at 100 and, ending at
 * 150 <= 1000, backfills at once. At 1000 the gang starts whole: waits p0 0, a1 990, a2 980,
 * a3 0 (started pods in pod order).
 *
 * Without podGroups: a1 starts at 10 (1 GPU left), a2 waits for a1's end at 110 and starts then
 * (wait 90); a3 at 100 may not backfill (it would end at 150, after a2's reservation at 110),
 * and starts when a2 ends at 210 (wait 110): waits 0, 0, 90, 110.
 *
 * With timeout 5m: the gang has not started 300 s after a1 arrived. The next cycle after 150 is
 * the retry tick at 750 (10 minutes after the last event while pods wait), where it fails: a1 and
 * a2 never run; started pods p0 and a3 wait 0 each.
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

/* Replays with the queues text (the file, cut or extended) and checks the started pods' waits. */
static void replay_expect(const struct replay_world *w, const char *queues, const double *waits,
                          uint32_t nwaits, uint32_t gangs, uint32_t started, uint32_t timed_out)
{
    struct gs_qconfig *qc = NULL;
    struct gs_diag d;
    if (gs_qconfig_parse(queues, strlen(queues), "queues.yaml", &qc, &d) != GS_OK) {
        char msg[512];
        gs_diag_format(&d, msg, sizeof msg);
        fail_msg("queues: %s", msg);
    }
    struct gs_replay_config cfg = {.policy = "fgd",
                                   .preemption = true,
                                   .reclaim = true,
                                   .backfill = true,
                                   .sample_ms = 3600000,
                                   .retry_ms = 600000,
                                   .seed = 42,
                                   .arrival_speedup = 1};
    struct gs_replay *r = NULL;
    assert_int_equal(gs_replay_run(&w->nodes, &w->pods, qc, &cfg, &r, &d), GS_OK);
    const uint32_t *wq;
    const double *ws;
    uint32_t n = gs_replay_waits(r, &wq, &ws);
    if (n != nwaits)
        fail_msg("%u pods started, want %u", n, nwaits);
    for (uint32_t i = 0; i < n; i++)
        if (ws[i] != waits[i])
            fail_msg("started pod %u waited %.3f s, want %.3f s", i, ws[i], waits[i]);
    uint32_t g, gs, gt;
    gs_replay_gangs(r, &g, &gs, &gt);
    assert_int_equal(g, gangs);
    assert_int_equal(gs, started);
    assert_int_equal(gt, timed_out);
    gs_replay_free(r);
    gs_qconfig_free(qc);
}

static void test_replay_places_the_podgroup_gang_whole(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "gangs");
    const double waits[] = {0, 990, 980, 0};
    replay_expect(&w, w.queues, waits, 4, 1, 1, 0);
    replay_world_fini(&w);
}

static void test_replay_without_podgroups_starts_members_alone(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "gangs");
    char *cut = strstr(w.queues, "podGroups:");
    assert_non_null(cut);
    *cut = '\0';
    const double waits[] = {0, 0, 90, 110};
    replay_expect(&w, w.queues, waits, 4, 0, 0, 0);
    replay_world_fini(&w);
}

static void test_replay_gang_past_its_timeout_never_runs(void **state)
{
    (void)state;
    struct replay_world w;
    replay_world_load(&w, "gangs");
    size_t cap = w.queues_len + 64;
    char *text = malloc(cap);
    assert_non_null(text);
    (void)snprintf(text, cap, "%s    timeout: 5m\n", w.queues);
    const double waits[] = {0, 0};
    replay_expect(&w, text, waits, 2, 1, 0, 1);
    free(text);
    replay_world_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_places_the_podgroup_gang_whole),
        cmocka_unit_test(test_replay_without_podgroups_starts_members_alone),
        cmocka_unit_test(test_replay_gang_past_its_timeout_never_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
