/*
 * Unit tests of the accounting store, the recorder and the usage report (usage.h,
 * usage_report.h). The GPU-hours expected below are worked out by hand beside each value from
 * the scenario the test builds (charge.h's rules), never read back from the code's output.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>

#include "gpusched/err.h"
#include "gpusched/tenant.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"

#define H_MS INT64_C(3600000)
#define MIN_MS INT64_C(60000)
/* 2026-12-01T00:00:00Z: 20,788 days after the epoch (worked out in test_time_round_trips). */
#define EPOCH_MS (INT64_C(20788) * 86400 * 1000)

#define assert_near(a, b, eps) assert_near_at((a), (b), (eps), __FILE__, __LINE__)
static void assert_near_at(double a, double b, double eps, const char *file, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("%.15g != %.15g (within %g)\n", a, b, eps);
        _fail(file, line);
    }
}

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    (void)snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs_usage_test.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void db_path(char *buf, size_t cap, const char *name)
{
    (void)snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static struct gs_usage_store *open_new(const char *name)
{
    char path[128], msg[512];
    db_path(path, sizeof(path), name);
    (void)unlink(path);
    struct gs_usage_store *s;
    int err = gs_usage_open(path, NULL, &s, msg, sizeof(msg));
    if (err)
        fail_msg("open %s: %s", path, msg);
    return s;
}

static const struct gs_usage_row *row_of(const struct gs_usage_report *r, const char *key)
{
    for (uint32_t i = 0; i < r->nrows; i++)
        if (strcmp(r->rows[i].key, key) == 0)
            return &r->rows[i];
    fail_msg("no row %s", key);
    return NULL;
}

static struct gs_usage_report *report(struct gs_usage_store *s, int64_t from, int64_t to,
                                      enum gs_usage_by by)
{
    struct gs_usage_report_options o = {.from_ms = from, .to_ms = to, .by = by};
    struct gs_usage_report *r;
    char msg[512];
    int err = gs_usage_report_build(s, &o, &r, msg, sizeof(msg));
    if (err)
        fail_msg("report: %s", msg);
    return r;
}

/* ---- the engine through the recorder ---------------------------------------------------- */

struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
    struct gs_usage_recorder *rec;
};

static void world_event(void *ctx, const struct gs_event *ev)
{
    struct world *w = ctx;
    gs_usage_recorder_on_event(w->rec, w->c, w->e, ev, NULL);
}

static uint32_t submit(struct world *w, uint32_t q, uint32_t pc, uint32_t num_gpu, int32_t milli,
                       uint64_t mask, int64_t now_ms)
{
    struct gs_tpod_spec sp = {"p", q, pc, GS_NO_GANG, GS_POD_REQ(1000, 1024, num_gpu, milli, mask),
                              -1};
    uint32_t id;
    assert_int_equal(gs_engine_submit(w->e, &sp, now_ms, &id), GS_OK);
    return id;
}

/*
 * Two teams on two nodes. n1 has 1 A100, n8 has 8 H100. Team ta (leaf ta-q, quota 1 GPU) runs
 * four 250-milli pods on n1 from 0:00 to 1:00. Team tb (leaf tb-q, quota 8 GPUs) runs an 8-GPU
 * low-priority pod from 0:00; at 0:30 an 8-GPU high-priority pod of tb preempts it and runs to
 * 1:30. The recording runs from 0:00 to 2:00.
 */
static void record_two_teams(struct gs_usage_store *s)
{
    struct world w = {0};
    assert_int_equal(gs_cluster_new(&w.c), GS_OK);
    struct gs_node_spec n1 = {"n1", 64000, 1 << 20, 110, 1, "A100", 0};
    struct gs_node_spec n8 = {"n8", 64000, 1 << 20, 110, 8, "H100", 0};
    assert_int_equal(gs_cluster_add_node(w.c, &n1, NULL), GS_OK);
    assert_int_equal(gs_cluster_add_node(w.c, &n8, NULL), GS_OK);
    struct gs_usage_recorder_config rc = {s, EPOCH_MS, "uid-"};
    assert_int_equal(gs_usage_recorder_new(&rc, &w.rec), GS_OK);
    struct gs_engine_config ec = {
        .policy = "bestfit", .preemption = true, .on_event = world_event, .ctx = &w};
    assert_int_equal(gs_engine_new(w.c, &ec, &w.e), GS_OK);
    const int64_t inf = GS_UNLIMITED;
    struct gs_queue_spec ta = {"ta", GS_QUEUE_ROOT, {1000, inf, inf}, {inf, inf, inf}, 1, 0};
    struct gs_queue_spec tb = {"tb", GS_QUEUE_ROOT, {8000, inf, inf}, {inf, inf, inf}, 1, 0};
    uint32_t qa, qb, la, lb, low, high;
    assert_int_equal(gs_engine_add_queue(w.e, &ta, &qa), GS_OK);
    assert_int_equal(gs_engine_add_queue(w.e, &tb, &qb), GS_OK);
    struct gs_queue_spec tal = {"ta-q", qa, {1000, inf, inf}, {inf, inf, inf}, 1, 0};
    struct gs_queue_spec tbl = {"tb-q", qb, {8000, inf, inf}, {inf, inf, inf}, 1, 0};
    assert_int_equal(gs_engine_add_queue(w.e, &tal, &la), GS_OK);
    assert_int_equal(gs_engine_add_queue(w.e, &tbl, &lb), GS_OK);
    struct gs_priority_class_spec pl = {"low", 10, -1}, ph = {"high", 1000, -1};
    assert_int_equal(gs_engine_add_priority_class(w.e, &pl, &low), GS_OK);
    assert_int_equal(gs_engine_add_priority_class(w.e, &ph, &high), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(w.rec, w.c, w.e, 0), GS_OK);
    uint64_t a100 = 1u << gs_cluster_model_find(w.c, "A100");
    uint64_t h100 = 1u << gs_cluster_model_find(w.c, "H100");
    uint32_t quarter[4];
    for (int i = 0; i < 4; i++)
        quarter[i] = submit(&w, la, low, 1, 250, a100, 0);
    uint32_t big = submit(&w, lb, low, 8, 1000, h100, 0);
    assert_int_equal(gs_engine_cycle(w.e, 0, NULL, NULL), GS_OK);
    uint32_t urgent = submit(&w, lb, high, 8, 1000, h100, 30 * MIN_MS);
    assert_int_equal(gs_engine_cycle(w.e, 30 * MIN_MS, NULL, NULL), GS_OK);
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_pod_info(w.e, big, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_PENDING); /* preempted, waiting again */
    assert_int_equal(gs_engine_pod_info(w.e, urgent, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    for (int i = 0; i < 4; i++)
        assert_int_equal(gs_engine_finish(w.e, quarter[i], H_MS), GS_OK);
    assert_int_equal(gs_engine_finish(w.e, urgent, 90 * MIN_MS), GS_OK);
    /* The evicted pod would start again at 1:30; delete it first so the scenario ends there. */
    assert_int_equal(gs_engine_delete(w.e, big, 90 * MIN_MS), GS_OK);
    assert_int_equal(gs_usage_recorder_error(w.rec), GS_OK);
    assert_int_equal(gs_usage_recorder_finish(w.rec, 2 * H_MS), GS_OK);
    gs_usage_recorder_free(w.rec);
    gs_engine_free(w.e);
    gs_cluster_free(w.c);
}

static void test_recorded_engine_gives_hand_worked_gpu_hours(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("two_teams.db");
    record_two_teams(s);
    struct gs_usage_report *r = report(s, INT64_MIN, INT64_MAX, GS_USAGE_BY_TEAM);
    assert_int_equal(r->from_ms, EPOCH_MS);
    assert_int_equal(r->to_ms, EPOCH_MS + 2 * H_MS);
    /* Capacity: 9 GPUs x 2 h = 18 GPU-hours. */
    assert_near(r->capacity_gpu_h, 18.0, 1e-9);
    /* ta: four pods at 25 % for one hour = 4 x 0.25 x 1 = 1.00. */
    const struct gs_usage_row *a = row_of(r, "ta");
    assert_near(a->charged_gpu_h, 1.0, 1e-9);
    /* tb: the 8-GPU pod evicted after 30 min = 8 x 0.5 = 4; the preemptor from 0:30 to 1:30
     * = 8 x 1 = 8; together 12. */
    const struct gs_usage_row *b = row_of(r, "tb");
    assert_near(b->charged_gpu_h, 12.0, 1e-9);
    /* Idle: 18 - 13 = 5; totals add up to capacity. */
    assert_near(r->idle_gpu_h, 5.0, 1e-9);
    assert_near(a->charged_gpu_h + b->charged_gpu_h + r->idle_gpu_h, r->capacity_gpu_h, 1e-6);
    assert_int_equal(b->preemptions_suffered, 1);
    assert_int_equal(b->preemptions_caused, 1);
    assert_int_equal(a->preemptions_suffered, 0);
    /* Quota attainment: ta 1 GPU x 2 h = 2 quota GPU-hours; tb 8 x 2 = 16. */
    assert_near(a->quota_gpu_h, 2.0, 1e-9);
    assert_near(b->quota_gpu_h, 16.0, 1e-9);
    /* Waits: every pod started when submitted. */
    assert_int_equal(a->starts, 4);
    assert_int_equal(b->starts, 2);
    assert_near(b->wait_mean_s, 0.0, 1e-9);
    assert_true(isnan(a->used_gpu_h)); /* no utilisation samples */
    assert_int_equal(r->util_samples, 0);
    gs_usage_report_free(r);

    /* The boundary: 0:15 to 0:45 counts only the inside parts. ta 4 x 0.25 x 0.5 = 0.5; tb the
     * evicted pod 0:15-0:30 = 8 x 0.25 = 2 and the preemptor 0:30-0:45 = 8 x 0.25 = 2;
     * capacity 9 x 0.5 = 4.5, idle 4.5 - 4.5 = 0. */
    r = report(s, EPOCH_MS + 15 * MIN_MS, EPOCH_MS + 45 * MIN_MS, GS_USAGE_BY_TEAM);
    assert_near(row_of(r, "ta")->charged_gpu_h, 0.5, 1e-9);
    assert_near(row_of(r, "tb")->charged_gpu_h, 4.0, 1e-9);
    assert_near(r->capacity_gpu_h, 4.5, 1e-9);
    assert_near(r->idle_gpu_h, 0.0, 1e-9);
    assert_int_equal(row_of(r, "tb")->preemptions_suffered, 1);
    /* Only the preemptor starts inside (at 0:30). */
    assert_int_equal(row_of(r, "tb")->starts, 1);
    assert_int_equal(row_of(r, "ta")->starts, 0);
    gs_usage_report_free(r);

    /* By node: n1 holds ta's 1.00, n8 tb's 12. */
    r = report(s, INT64_MIN, INT64_MAX, GS_USAGE_BY_NODE);
    assert_near(row_of(r, "n1")->charged_gpu_h, 1.0, 1e-9);
    assert_near(row_of(r, "n8")->charged_gpu_h, 12.0, 1e-9);
    gs_usage_report_free(r);

    /* The stored rows: end reasons and the preemptor's uid. */
    sqlite3 *db = gs_usage_db(s);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT end_reason, count(*), sum(evicted_by IS NOT NULL) "
                                        "FROM allocation GROUP BY 1 ORDER BY 1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "evicted-preemption");
    assert_int_equal(sqlite3_column_int(st, 1), 1);
    assert_int_equal(sqlite3_column_int(st, 2), 1);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "finished");
    assert_int_equal(sqlite3_column_int(st, 1), 5);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/* ---- the store directly ------------------------------------------------------------------- */

static int64_t begin(struct gs_usage_store *s, const char *uid, const char *team, int64_t start,
                     struct gs_usage_gpu g)
{
    struct gs_usage_interval iv = {.pod_uid = uid,
                                   .name = uid,
                                   .queue = team,
                                   .team = team,
                                   .node = "n1",
                                   .model = "A100",
                                   .queued_ms = start,
                                   .start_ms = start};
    int64_t id;
    assert_int_equal(gs_usage_begin_interval(s, &iv, &g, 1, &id), GS_OK);
    return id;
}

static struct gs_usage_gpu milli_gpu(uint32_t idx, int32_t milli)
{
    return (struct gs_usage_gpu){.gpu_index = idx,
                                 .sharing = GS_GPU_SHARE_MILLI,
                                 .gpu_milli = milli,
                                 .mig_instance = -1,
                                 .replica_slot = -1};
}

static void capacity(struct gs_usage_store *s, uint32_t gpus, int64_t start, int64_t end)
{
    for (uint32_t g = 0; g < gpus; g++) {
        struct gs_usage_capacity c = {"n1", "A100", g, NULL, true, start};
        int64_t id;
        assert_int_equal(gs_usage_begin_capacity(s, &c, &id), GS_OK);
        assert_int_equal(gs_usage_end_capacity(s, id, end, "removed"), GS_OK);
    }
}

static void test_three_quarter_pods_leave_a_quarter_idle_and_shares_by_mode(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("modes.db");
    int64_t t0 = EPOCH_MS;
    /* Hour 1 on GPU 0: three pods at 25 %. */
    capacity(s, 1, t0, t0 + H_MS);
    for (int i = 0; i < 3; i++) {
        char uid[16];
        (void)snprintf(uid, sizeof(uid), "q%d", i);
        int64_t id = begin(s, uid, "t", t0, milli_gpu(0, 250));
        assert_int_equal(gs_usage_end_interval(s, id, t0 + H_MS, GS_USAGE_END_FINISHED, NULL),
                         GS_OK);
    }
    assert_int_equal(gs_usage_commit(s, t0 + H_MS), GS_OK);
    struct gs_usage_report *r = report(s, t0, t0 + H_MS, GS_USAGE_BY_TEAM);
    assert_near(row_of(r, "t")->charged_gpu_h, 0.75, 1e-9); /* 3 x 0.25 */
    assert_near(r->idle_gpu_h, 0.25, 1e-9);                 /* 1 - 0.75 */
    gs_usage_report_free(r);

    /* A MIG 1g instance of 7 held for 7 h is 1 GPU-hour; a replica of 4 for 4 h is 1. */
    int64_t t1 = t0 + 10 * H_MS;
    struct gs_usage_gpu mig = {.gpu_index = 0,
                               .sharing = GS_GPU_SHARE_MIG,
                               .gpu_milli = 142,
                               .mig_profile = "1g.10gb",
                               .mig_instance = 7,
                               .mig_slices = 1,
                               .gpu_mig_slices = 7,
                               .replica_slot = -1};
    int64_t id = begin(s, "mig", "m", t1, mig);
    assert_int_equal(gs_usage_end_interval(s, id, t1 + 7 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    struct gs_usage_gpu ts = {.gpu_index = 1,
                              .sharing = GS_GPU_SHARE_TIMESLICE,
                              .gpu_milli = 250,
                              .mig_instance = -1,
                              .replica_slot = 2,
                              .replicas = 4};
    id = begin(s, "ts", "s", t1, ts);
    assert_int_equal(gs_usage_end_interval(s, id, t1 + 4 * H_MS, GS_USAGE_END_DELETED, NULL),
                     GS_OK);
    capacity(s, 2, t1, t1 + 7 * H_MS);
    assert_int_equal(gs_usage_commit(s, t1 + 7 * H_MS), GS_OK);
    r = report(s, t1, t1 + 7 * H_MS, GS_USAGE_BY_TEAM);
    assert_near(row_of(r, "m")->charged_gpu_h, 1.0, 1e-9); /* 7 h x 1/7 */
    assert_near(row_of(r, "s")->charged_gpu_h, 1.0, 1e-9); /* 4 h x 1/4 */
    assert_near(r->capacity_gpu_h, 14.0, 1e-9);            /* 2 GPUs x 7 h */
    assert_near(r->idle_gpu_h, 12.0, 1e-9);
    gs_usage_report_free(r);
    /* A grant that cannot be charged is refused and writes nothing. */
    struct gs_usage_gpu bad = milli_gpu(0, 0);
    struct gs_usage_interval iv = {.pod_uid = "bad", .start_ms = t1};
    assert_int_equal(gs_usage_begin_interval(s, &iv, &bad, 1, &id), GS_EINVAL);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

static struct gs_usage_gpu mig_gpu(uint32_t idx, const char *profile, uint8_t slices,
                                   int32_t instance)
{
    return (struct gs_usage_gpu){.gpu_index = idx,
                                 .sharing = GS_GPU_SHARE_MIG,
                                 .mig_profile = profile,
                                 .mig_instance = instance,
                                 .mig_slices = slices,
                                 .gpu_mig_slices = 7,
                                 .replica_slot = -1};
}

static void test_by_profile_gives_mig_whole_and_fraction_rows(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("profile.db");
    int64_t t0 = EPOCH_MS, id;
    capacity(s, 6, t0, t0 + 2 * H_MS); /* 6 GPUs x 2 h = 12 GPU-hours */
    /* GPU 0 (MIG): two 1g.10gb pods for 1 h and 2 h, a 3g.40gb pod for 1 h. */
    id = begin(s, "mig-a", "t", t0, mig_gpu(0, "1g.10gb", 1, 9));
    assert_int_equal(gs_usage_end_interval(s, id, t0 + H_MS, GS_USAGE_END_FINISHED, NULL), GS_OK);
    id = begin(s, "mig-b", "t", t0, mig_gpu(0, "1g.10gb", 1, 10));
    assert_int_equal(gs_usage_end_interval(s, id, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    id = begin(s, "mig-c", "t", t0, mig_gpu(0, "3g.40gb", 3, 2));
    assert_int_equal(gs_usage_end_interval(s, id, t0 + H_MS, GS_USAGE_END_FINISHED, NULL), GS_OK);
    /* GPUs 1 and 2 whole for 1.5 h. */
    struct gs_usage_interval iv = {
        .pod_uid = "whole", .team = "t", .node = "n1", .queued_ms = t0, .start_ms = t0};
    struct gs_usage_gpu two[2] = {milli_gpu(1, 1000), milli_gpu(2, 1000)};
    assert_int_equal(gs_usage_begin_interval(s, &iv, two, 2, &id), GS_OK);
    assert_int_equal(gs_usage_end_interval(s, id, t0 + 90 * MIN_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    /* GPU 3: a quarter for 2 h. GPU 4: a replica of 4 for 2 h. */
    id = begin(s, "quarter", "t", t0, milli_gpu(3, 250));
    assert_int_equal(gs_usage_end_interval(s, id, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    struct gs_usage_gpu ts = {.gpu_index = 4,
                              .sharing = GS_GPU_SHARE_TIMESLICE,
                              .gpu_milli = 250,
                              .mig_instance = -1,
                              .replica_slot = 1,
                              .replicas = 4};
    id = begin(s, "replica", "t", t0, ts);
    assert_int_equal(gs_usage_end_interval(s, id, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    assert_int_equal(gs_usage_commit(s, t0 + 2 * H_MS), GS_OK);
    struct gs_usage_report *r = report(s, t0, t0 + 2 * H_MS, GS_USAGE_BY_PROFILE);
    assert_int_equal(r->nrows, 5);
    assert_near(row_of(r, "1g.10gb")->charged_gpu_h, 3.0 / 7.0, 1e-9); /* (1 h + 2 h) x 1/7 */
    assert_int_equal(row_of(r, "1g.10gb")->intervals, 2);
    assert_near(row_of(r, "3g.40gb")->charged_gpu_h, 3.0 / 7.0, 1e-9); /* 1 h x 3/7 */
    assert_near(row_of(r, "whole-gpu")->charged_gpu_h, 3.0, 1e-9);     /* 2 GPUs x 1.5 h */
    assert_near(row_of(r, "fraction")->charged_gpu_h, 0.5, 1e-9);      /* 0.25 x 2 h */
    assert_near(row_of(r, "time-sliced")->charged_gpu_h, 0.5, 1e-9);   /* 1/4 x 2 h */
    /* 12 - (3/7 + 3/7 + 3 + 0.5 + 0.5) = 8 - 6/7 idle. */
    assert_near(r->charged_gpu_h, 4.0 + 6.0 / 7.0, 1e-9);
    assert_near(r->idle_gpu_h, 8.0 - 6.0 / 7.0, 1e-9);
    assert_string_equal(r->rows[0].key, "whole-gpu"); /* by charged descending */
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/* Rows of table in the store file name (a second, read-only connection). */
static int64_t count_rows(const char *name, const char *sql)
{
    char path[128];
    db_path(path, sizeof(path), name);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/*
 * The per-queue share is a time integral of the snapshots' step function, not a mean of rows.
 * 4 GPUs from 0:00 to 4:00 (16 GPU-hours). Queue qa: allocated 1 GPU and fair 2 GPUs from 0:00,
 * allocated 3 GPUs from 1:00 (one snapshot each; the last holds to the heartbeat at 4:00).
 * Whole period: allocated 1 x 1 h + 3 x 3 h = 10 GPU-hours = 62.5 % of 16 (a mean of the two
 * rows would say 2 GPUs = 50 %); fair 2 x 4 = 8 = 50 %. From 2:00 to 4:00 no snapshot falls in
 * the period: the 1:00 one gives 3 x 2 h = 6 of 8 GPU-hours = 75 %, fair 4 of 8 = 50 %.
 */
static void test_queue_share_integrates_snapshots_over_time(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("steps.db");
    int64_t t0 = EPOCH_MS;
    capacity(s, 4, t0, t0 + 4 * H_MS);
    int64_t id = begin(s, "a", "qa", t0, milli_gpu(0, 1000));
    assert_int_equal(gs_usage_end_interval(s, id, t0 + 4 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    struct gs_usage_quota q0 = {t0, "qa", "qa", 0, -1, 2000, 1000};
    struct gs_usage_quota q1 = {t0 + H_MS, "qa", "qa", 0, -1, 2000, 3000};
    assert_int_equal(gs_usage_add_quota(s, &q0), GS_OK);
    assert_int_equal(gs_usage_add_quota(s, &q1), GS_OK);
    assert_int_equal(gs_usage_commit(s, t0 + 4 * H_MS), GS_OK);
    struct gs_usage_report *r = report(s, INT64_MIN, INT64_MAX, GS_USAGE_BY_QUEUE);
    assert_int_equal(r->nqueues, 1);
    assert_string_equal(r->queue_names[0], "qa");
    assert_near(r->capacity_gpu_h, 16.0, 1e-9);
    assert_near(r->queue_alloc_pct[0], 62.5, 1e-9);
    assert_near(r->queue_fair_pct[0], 50.0, 1e-9);
    gs_usage_report_free(r);
    r = report(s, t0 + 2 * H_MS, t0 + 4 * H_MS, GS_USAGE_BY_QUEUE);
    assert_int_equal(r->nqueues, 1);
    assert_near(r->queue_alloc_pct[0], 75.0, 1e-9);
    assert_near(r->queue_fair_pct[0], 50.0, 1e-9);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/*
 * The recorder writes a queue's snapshot only when it changed: one queue q (quota 1 GPU) on a
 * 1-GPU node; syncs at 0 s and 60 s with nothing running write one row; a 1-GPU pod started at
 * 90 s changes allocated (0 -> 1000 milli), so the sync at 120 s writes a second; the syncs at
 * 180 s and 240 s write none. Two rows, where a row per sync would make five.
 */
static void test_recorder_writes_quota_snapshots_only_on_change(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("changes.db");
    struct world w = {0};
    assert_int_equal(gs_cluster_new(&w.c), GS_OK);
    struct gs_node_spec n1 = {"n1", 64000, 1 << 20, 110, 1, "A100", 0};
    assert_int_equal(gs_cluster_add_node(w.c, &n1, NULL), GS_OK);
    struct gs_usage_recorder_config rc = {s, EPOCH_MS, "uid-"};
    assert_int_equal(gs_usage_recorder_new(&rc, &w.rec), GS_OK);
    struct gs_engine_config ec = {.policy = "bestfit", .on_event = world_event, .ctx = &w};
    assert_int_equal(gs_engine_new(w.c, &ec, &w.e), GS_OK);
    const int64_t inf = GS_UNLIMITED;
    struct gs_queue_spec qs = {"q", GS_QUEUE_ROOT, {1000, inf, inf}, {inf, inf, inf}, 1, 0};
    struct gs_priority_class_spec pc = {"normal", 0, -1};
    uint32_t q, cls;
    assert_int_equal(gs_engine_add_queue(w.e, &qs, &q), GS_OK);
    assert_int_equal(gs_engine_add_priority_class(w.e, &pc, &cls), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(w.rec, w.c, w.e, 0), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(w.rec, w.c, w.e, 60000), GS_OK);
    (void)submit(&w, q, cls, 1, 1000, UINT64_MAX, 90000);
    assert_int_equal(gs_engine_cycle(w.e, 90000, NULL, NULL), GS_OK);
    for (int64_t t = 120000; t <= 240000; t += 60000)
        assert_int_equal(gs_usage_recorder_sync(w.rec, w.c, w.e, t), GS_OK);
    assert_int_equal(gs_usage_recorder_finish(w.rec, 300000), GS_OK);
    assert_int_equal(gs_usage_recorder_error(w.rec), GS_OK);
    gs_usage_recorder_free(w.rec);
    gs_engine_free(w.e);
    gs_cluster_free(w.c);
    assert_int_equal(gs_usage_close(s), GS_OK);
    assert_int_equal(count_rows("changes.db", "SELECT count(*) FROM quota_snapshot"), 2);
    assert_int_equal(count_rows("changes.db", "SELECT max(gpu_allocated_milli) FROM quota_snapshot "
                                              "WHERE t_ms = 1796083200000 + 120000"),
                     1000);
}

/*
 * Capacity follows the cluster through the recorder's syncs: n1 has 2 GPUs, n2 1 GPU, from 0:00.
 * At 1:00 n1's GPU 1 turns unhealthy, at 2:00 n2 is removed, at 3:00 n3 with 4 GPUs is added;
 * the recording ends at 4:00. A 1-GPU pod holds n1's GPU 0 from 0:00 to 4:00.
 *   n1 g0: 0-4 h healthy, 4 GPU-h; n1 g1: 0-1 h healthy (ended health-changed), 1-4 h unhealthy:
 *   4 GPU-h, 3 of them unhealthy; n2 g0: 0-2 h (ended removed), 2 GPU-h; n3 g0-3: 3-4 h, 4.
 *   Capacity 4 + 4 + 2 + 4 = 14 GPU-h, unhealthy 3, charged 4, idle 14 - 4 = 10.
 */
static void test_recorder_follows_health_removal_and_addition(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("capacity.db");
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    struct gs_node_spec n1 = {"n1", 64000, 1 << 20, 110, 2, "A100", 0};
    struct gs_node_spec n2 = {"n2", 64000, 1 << 20, 110, 1, "A100", 0};
    struct gs_node_spec n3 = {"n3", 64000, 1 << 20, 110, 4, "H100", 0};
    uint32_t i1, i2, i3;
    assert_int_equal(gs_cluster_add_node(c, &n1, &i1), GS_OK);
    assert_int_equal(gs_cluster_add_node(c, &n2, &i2), GS_OK);
    struct gs_usage_recorder *rec;
    struct gs_usage_recorder_config rc = {s, EPOCH_MS, "uid-"};
    assert_int_equal(gs_usage_recorder_new(&rc, &rec), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(rec, c, NULL, 0), GS_OK);
    (void)begin(s, "held", "t", EPOCH_MS, milli_gpu(0, 1000));
    assert_int_equal(gs_cluster_set_gpu_health(c, i1, 1, false), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(rec, c, NULL, H_MS), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(rec, c, NULL, H_MS + 30 * MIN_MS), GS_OK); /* same */
    assert_int_equal(gs_cluster_remove_node(c, i2), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(rec, c, NULL, 2 * H_MS), GS_OK);
    assert_int_equal(gs_cluster_add_node(c, &n3, &i3), GS_OK);
    assert_int_equal(gs_usage_recorder_sync(rec, c, NULL, 3 * H_MS), GS_OK);
    assert_int_equal(gs_usage_recorder_finish(rec, 4 * H_MS), GS_OK);
    gs_usage_recorder_free(rec);
    gs_cluster_free(c);

    /* The rows: node, GPU, healthy, start and end (h), reason. */
    static const char *const want[] = {
        "n1 0 1 0 4 recording-ended", "n1 1 0 1 4 recording-ended", "n1 1 1 0 1 health-changed",
        "n2 0 1 0 2 removed",         "n3 0 1 3 4 recording-ended", "n3 1 1 3 4 recording-ended",
        "n3 2 1 3 4 recording-ended", "n3 3 1 3 4 recording-ended",
    };
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(gs_usage_db(s),
                                        "SELECT node, gpu_index, healthy, (start_ms - ?1) / ?2, "
                                        "(end_ms - ?1) / ?2, end_reason FROM capacity ORDER BY "
                                        "node, gpu_index, start_ms DESC",
                                        -1, &st, NULL),
                     SQLITE_OK);
    (void)sqlite3_bind_int64(st, 1, EPOCH_MS);
    (void)sqlite3_bind_int64(st, 2, H_MS);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        char got[96];
        (void)snprintf(got, sizeof(got), "%s %d %d %lld %lld %s", sqlite3_column_text(st, 0),
                       sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                       (long long)sqlite3_column_int64(st, 3),
                       (long long)sqlite3_column_int64(st, 4), sqlite3_column_text(st, 5));
        assert_string_equal(got, want[i]);
    }
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);

    struct gs_usage_report *r = report(s, EPOCH_MS, EPOCH_MS + 4 * H_MS, GS_USAGE_BY_TEAM);
    assert_near(r->capacity_gpu_h, 14.0, 1e-9);
    assert_near(r->unhealthy_gpu_h, 3.0, 1e-9);
    assert_near(r->charged_gpu_h, 4.0, 1e-9);
    assert_near(r->idle_gpu_h, 10.0, 1e-9);
    assert_near(row_of(r, "t")->charged_gpu_h + r->idle_gpu_h, r->capacity_gpu_h, 1e-9);
    /* Per hour: 3, 3, 2 (n2 gone), 6 (n3 added): the buckets add up to the capacity. */
    static const double per_hour[] = {3, 3, 2, 6};
    assert_int_equal(r->nbuckets, 4);
    for (uint32_t k = 0; k < 4; k++)
        assert_near(r->bucket_capacity[k], per_hour[k], 1e-9);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/*
 * Issue 8's charging rule, which sets no cap per GPU (docs/usage-accounting.md): two memory
 * requests that fit one 80 GiB GPU together, 900 milli + 8 GiB and 99 milli + 72 GiB (compute
 * 0.999, memory 80 GiB), are each charged the larger of their compute and memory shares:
 * max(0.9, 8/80) = 0.9 and max(0.099, 72/80) = 0.9, so 1.80 GPU-hours in an hour of one GPU,
 * and the idle row goes negative (1.00 - 1.80 = -0.80). The engine's quota books charge the same
 * pods 1800 milli-GPU (test_charge).
 */
static void test_two_memory_requests_on_one_gpu_are_charged_1_80(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("memory.db");
    int64_t t0 = EPOCH_MS;
    capacity(s, 1, t0, t0 + H_MS);
    struct gs_usage_gpu a = milli_gpu(0, 900), b = milli_gpu(0, 99);
    a.mem_mib = 8 * 1024;
    b.mem_mib = 72 * 1024;
    a.gpu_mem_mib = b.gpu_mem_mib = 80 * 1024;
    int64_t ia = begin(s, "compute", "t", t0, a), ib = begin(s, "memory", "t", t0, b);
    assert_int_equal(gs_usage_end_interval(s, ia, t0 + H_MS, GS_USAGE_END_FINISHED, NULL), GS_OK);
    assert_int_equal(gs_usage_end_interval(s, ib, t0 + H_MS, GS_USAGE_END_FINISHED, NULL), GS_OK);
    assert_int_equal(gs_usage_commit(s, t0 + H_MS), GS_OK);
    struct gs_usage_report *r = report(s, t0, t0 + H_MS, GS_USAGE_BY_TEAM);
    assert_near(r->capacity_gpu_h, 1.0, 1e-9);
    assert_near(row_of(r, "t")->charged_gpu_h, 1.8, 1e-9);
    assert_near(r->idle_gpu_h, -0.8, 1e-9);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

static void test_utilisation_names_idle_allocations(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("util.db");
    int64_t t0 = EPOCH_MS;
    capacity(s, 2, t0, t0 + 2 * H_MS);
    int64_t a = begin(s, "lazy", "t", t0, milli_gpu(0, 1000));
    int64_t b = begin(s, "busy", "t", t0, milli_gpu(1, 1000));
    for (int k = 0; k < 4; k++) {
        int64_t t = t0 + k * 30 * MIN_MS;
        assert_int_equal(gs_usage_add_util(s, t, "lazy", "n1", 0, 2.0), GS_OK);
        assert_int_equal(gs_usage_add_util(s, t, "busy", "n1", 1, 50.0), GS_OK);
    }
    assert_int_equal(gs_usage_add_util(s, t0, "x", "n1", 1, 101.0), GS_EINVAL);
    assert_int_equal(gs_usage_end_interval(s, a, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    assert_int_equal(gs_usage_end_interval(s, b, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    assert_int_equal(gs_usage_end_interval(s, b, t0 + 3 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_ENOENT); /* already ended */
    assert_int_equal(gs_usage_commit(s, t0 + 2 * H_MS), GS_OK);
    struct gs_usage_report *r = report(s, t0, t0 + 2 * H_MS, GS_USAGE_BY_TEAM);
    /* Used: 2 % x 1 GPU x 2 h = 0.04 and 50 % x 1 x 2 = 1.0: 1.04 of 4 charged. */
    assert_near(row_of(r, "t")->used_gpu_h, 1.04, 1e-9);
    assert_near(row_of(r, "t")->charged_gpu_h, 4.0, 1e-9);
    /* The ratio: 1.04 / 4.0 = 26.0 %. */
    assert_near(row_of(r, "t")->used_pct, 26.0, 1e-9);
    assert_int_equal(r->util_samples, 8);
    /* Idle: held 2 h >= 1 h and used 0.04 < 5 % of 2: only "lazy". */
    assert_int_equal(r->nidle, 1);
    assert_string_equal(r->idle[0].pod_uid, "lazy");
    assert_near(r->idle[0].held_h, 2.0, 1e-9);
    /* The HTML page draws charged against used and lists the idle allocation. */
    char *page = NULL;
    size_t page_len = 0;
    FILE *mf = open_memstream(&page, &page_len);
    assert_non_null(mf);
    assert_int_equal(gs_usage_report_write(r, GS_USAGE_HTML, mf), GS_OK);
    assert_int_equal(fclose(mf), 0);
    assert_non_null(strstr(page, "data-charged-gpu-hours=\"4.000000\""));
    assert_non_null(strstr(page, "data-used-gpu-hours=\"1.040000\""));
    assert_non_null(strstr(page, "<tr><td>lazy</td><td>lazy</td><td>t</td><td>2.0</td>"));
    assert_null(strstr(page, "no utilisation samples"));
    /* The table's row: charged 4.00, used 1.04, used % 26.0. */
    assert_non_null(strstr(page, "<tr><td>t</td><td>4.00</td><td>1.04</td><td>26.0</td>"));
    free(page);
    /* The same ratio in the table, CSV, JSON and Prometheus forms. */
    static const struct {
        enum gs_usage_format fmt;
        const char *want;
    } forms[] = {
        /* share 100.0: 4.00 of 2 GPUs x 2 h; used 1.04 GPU-h = 3,744 GPU-s. */
        {GS_USAGE_TABLE, "t                            4.00   100.0        1.04   26.0 "},
        {GS_USAGE_CSV, "t,4.000000,1.040000,26.000,"},
        {GS_USAGE_JSON, "\"used_pct\": 26.0"},
        {GS_USAGE_PROMETHEUS, "gpusched_usage_used_ratio{team=\"t\"} 0.260000\n"},
        {GS_USAGE_PROMETHEUS, "gpusched_usage_used_gpu_seconds{team=\"t\"} 3744.000\n"},
    };
    for (unsigned i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        mf = open_memstream(&page, &page_len);
        assert_non_null(mf);
        assert_int_equal(gs_usage_report_write(r, forms[i].fmt, mf), GS_OK);
        assert_int_equal(fclose(mf), 0);
        if (!strstr(page, forms[i].want))
            fail_msg("form %u lacks \"%s\":\n%s", i, forms[i].want, page);
        free(page);
    }
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

static void test_recover_closes_open_intervals_at_the_last_heartbeat(void **state)
{
    (void)state;
    char path[128], msg[512];
    int64_t t0 = EPOCH_MS;
    /* The writer is a child that dies without closing (_exit skips every cleanup), as a crash
     * does: its last batch was never committed. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct gs_usage_store *s = open_new("recover.db");
        (void)begin(s, "gone", "t", t0, milli_gpu(0, 500));
        (void)begin(s, "alive", "t", t0, milli_gpu(1, 500));
        if (gs_usage_commit(s, t0 + 5 * MIN_MS) != GS_OK)
            _exit(3);
        (void)begin(s, "lost", "t", t0 + 6 * MIN_MS, milli_gpu(2, 500));
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    db_path(path, sizeof(path), "recover.db");
    struct gs_usage_store *s2;
    assert_int_equal(gs_usage_open(path, NULL, &s2, msg, sizeof(msg)), GS_OK);
    const char *running[] = {"alive"};
    uint32_t closed;
    assert_int_equal(gs_usage_recover(s2, running, 1, &closed), GS_OK);
    assert_int_equal(closed, 1);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(gs_usage_db(s2),
                                        "SELECT pod_uid, end_ms, end_reason FROM allocation "
                                        "ORDER BY pod_uid",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "alive");
    assert_int_equal(sqlite3_column_type(st, 1), SQLITE_NULL); /* still running: stays open */
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "gone");
    assert_int_equal(sqlite3_column_int64(st, 1), t0 + 5 * MIN_MS); /* the heartbeat */
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "recovered");
    assert_int_equal(sqlite3_step(st), SQLITE_DONE); /* "lost" was never committed */
    sqlite3_finalize(st);
    assert_int_equal(gs_usage_close(s2), GS_OK);
}

static void test_compact_keeps_hourly_means_and_deletes_only_when_asked(void **state)
{
    (void)state;
    struct gs_usage_store *s = open_new("compact.db");
    int64_t t0 = EPOCH_MS;
    int64_t a = begin(s, "old", "t", t0, milli_gpu(0, 1000));
    int64_t b = begin(s, "new", "t", t0 + 2 * H_MS, milli_gpu(1, 500));
    /* Hour 0: 10, 20, 30, 40 % (mean 25); hour 1: 60, 80 (mean 70); hour 2 stays raw. */
    const double u0[] = {10, 20, 30, 40}, u1[] = {60, 80};
    for (int k = 0; k < 4; k++)
        assert_int_equal(gs_usage_add_util(s, t0 + k * 15 * MIN_MS, "old", "n1", 0, u0[k]), GS_OK);
    for (int k = 0; k < 2; k++)
        assert_int_equal(gs_usage_add_util(s, t0 + H_MS + k * 30 * MIN_MS, "old", "n1", 0, u1[k]),
                         GS_OK);
    assert_int_equal(gs_usage_add_util(s, t0 + 2 * H_MS + 5 * MIN_MS, "new", "n1", 1, 50), GS_OK);
    assert_int_equal(gs_usage_end_interval(s, a, t0 + 2 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    assert_int_equal(gs_usage_end_interval(s, b, t0 + 3 * H_MS, GS_USAGE_END_FINISHED, NULL),
                     GS_OK);
    char msg[512];
    struct gs_usage_compact_stats cs;
    /* A batch is open: refused, nothing changes. */
    assert_int_equal(gs_usage_compact(s, t0 + 2 * H_MS, false, &cs, msg, sizeof(msg)), GS_EINVAL);
    assert_int_equal(gs_usage_commit(s, t0 + 3 * H_MS), GS_OK);
    /* The export before compaction: "old" 2 h x 1 GPU, "new" 1 h x 0.5, one day each. */
    char path[128];
    db_path(path, sizeof(path), "export.csv");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t rows;
    assert_int_equal(gs_usage_export_daily(s, INT64_MIN, INT64_MAX, f, &rows, msg, sizeof(msg)),
                     GS_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rows, 2);
    f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    assert_non_null(fgets(line, sizeof(line), f)); /* header */
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "2026-12-01,new,,new,t,t,,n1,A100,1.000000,0.500000\n");
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "2026-12-01,old,,old,t,t,,n1,A100,2.000000,2.000000\n");
    assert_int_equal(fclose(f), 0);

    /* Compact before 2:00 without --delete: 6 raw samples become 2 hourly means. */
    assert_int_equal(gs_usage_compact(s, t0 + 2 * H_MS, false, &cs, msg, sizeof(msg)), GS_OK);
    assert_int_equal(cs.samples_in, 6);
    assert_int_equal(cs.samples_out, 2);
    assert_int_equal(cs.intervals_deleted, 0);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(gs_usage_db(s),
                                        "SELECT t_ms, util_pct FROM util_sample ORDER BY t_ms", -1,
                                        &st, NULL),
                     SQLITE_OK);
    const int64_t want_t[] = {t0, t0 + H_MS, t0 + 2 * H_MS + 5 * MIN_MS};
    const double want_u[] = {25.0, 70.0, 50.0}; /* (10+20+30+40)/4, (60+80)/2, raw */
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int64(st, 0), want_t[k]);
        assert_near(sqlite3_column_double(st, 1), want_u[k], 1e-9);
    }
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    /* With delete, cutoff 2:30: "old" ended at 2:00 goes, "new" (ends 3:00) stays. */
    assert_int_equal(gs_usage_compact(s, t0 + 150 * MIN_MS, true, &cs, msg, sizeof(msg)), GS_OK);
    assert_int_equal(cs.intervals_deleted, 1);
    assert_int_equal(cs.samples_in, 3); /* the two means and the 2:05 sample, kept as means */
    assert_int_equal(cs.samples_out, 3);
    struct gs_usage_report *r = report(s, INT64_MIN, INT64_MAX, GS_USAGE_BY_TEAM);
    assert_near(row_of(r, "t")->charged_gpu_h, 0.5, 1e-9);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

/* ---- bad files ---------------------------------------------------------------------------- */

static void test_foreign_corrupt_and_newer_files_get_a_clear_error(void **state)
{
    (void)state;
    char path[128], msg[512];
    struct gs_usage_store *s;
    /* Random bytes. */
    db_path(path, sizeof(path), "garbage.db");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8192; i++)
        fputc((i * 7919 + 13) & 0xff, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_EIO);
    assert_null(s);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "not a SQLite database or is corrupt"));
    /* Another application's SQLite file. */
    db_path(path, sizeof(path), "foreign.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE songs(title TEXT)", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "not a gpusched accounting database"));
    /* ... also with a schema version of its own. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 3", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, "not a gpusched accounting database"));
    /* Ours, from a newer gpusched. */
    s = open_new("newer.db");
    assert_int_equal(gs_usage_close(s), GS_OK);
    db_path(path, sizeof(path), "newer.db");
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_EPARSE);
    assert_non_null(strstr(msg, "newer than this gpusched knows"));
    /* A real database with its pages overwritten in the middle. */
    s = open_new("corrupt.db");
    for (int i = 0; i < 2000; i++) {
        char uid[16];
        (void)snprintf(uid, sizeof(uid), "c%d", i);
        (void)begin(s, uid, "t", EPOCH_MS + i, milli_gpu(0, 100));
    }
    assert_int_equal(gs_usage_close(s), GS_OK);
    db_path(path, sizeof(path), "corrupt.db");
    f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 4096 * 2, SEEK_SET), 0);
    for (int i = 0; i < 4096 * 8; i++)
        fputc(0x5a, f);
    assert_int_equal(fclose(f), 0);
    int err = gs_usage_open(path, NULL, &s, msg, sizeof(msg));
    if (err == GS_OK) {
        /* The header survived: the damage shows when the pages are read. */
        struct gs_usage_report_options o = {INT64_MIN, INT64_MAX, GS_USAGE_BY_TEAM, 0, 0, 0};
        struct gs_usage_report *r = NULL;
        err = gs_usage_report_build(s, &o, &r, msg, sizeof(msg));
        gs_usage_report_free(r);
        (void)gs_usage_close(s);
    }
    assert_int_not_equal(err, GS_OK);
    assert_non_null(strstr(msg, path));
    /* Read-only on a missing file. */
    db_path(path, sizeof(path), "missing.db");
    struct gs_usage_options ro = {.read_only = true};
    assert_int_equal(gs_usage_open(path, &ro, &s, msg, sizeof(msg)), GS_ENOENT);
    assert_non_null(strstr(msg, path));
}

/* ---- one writer ---------------------------------------------------------------------------- */

static void test_second_writer_is_refused_readers_are_not_and_exit_releases(void **state)
{
    (void)state;
    char path[128], lock[160], msg[512];
    db_path(path, sizeof(path), "one-writer.db");
    (void)snprintf(lock, sizeof(lock), "%s-writer.lock", path);
    (void)unlink(path);
    struct gs_usage_store *w1 = open_new("one-writer.db");
    (void)begin(w1, "first", "t", EPOCH_MS, milli_gpu(0, 1000));
    assert_int_equal(gs_usage_commit(w1, EPOCH_MS + H_MS), GS_OK);
    /* A second writer, even in this process (flock is per open file), is refused with the lock
     * file and this process's pid named. */
    struct gs_usage_store *w2 = (void *)1;
    assert_int_equal(gs_usage_open(path, NULL, &w2, msg, sizeof(msg)), GS_ECONFLICT);
    assert_null(w2);
    char want[200];
    (void)snprintf(want, sizeof(want), "another writer holds %s (pid %ld)", lock, (long)getpid());
    assert_non_null(strstr(msg, want));
    struct gs_usage_options eo = {.existing_only = true}; /* report compact, report ingest */
    assert_int_equal(gs_usage_open(path, &eo, &w2, msg, sizeof(msg)), GS_ECONFLICT);
    /* Utilisation samples may be added beside the writer (report ingest). */
    struct gs_usage_options ao = {.existing_only = true, .alongside_writer = true};
    assert_int_equal(gs_usage_open(path, &ao, &w2, msg, sizeof(msg)), GS_OK);
    assert_int_equal(gs_usage_close(w2), GS_OK);
    assert_int_equal(access(lock, F_OK), 0); /* still w1's */
    /* A reader opens and reads what the writer committed. */
    struct gs_usage_options ro = {.read_only = true};
    struct gs_usage_store *r;
    assert_int_equal(gs_usage_open(path, &ro, &r, msg, sizeof(msg)), GS_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(gs_usage_db(r), "SELECT count(*) FROM allocation", -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), 1);
    sqlite3_finalize(st);
    assert_int_equal(gs_usage_close(r), GS_OK);
    /* Closing releases it and removes the lock file. */
    assert_int_equal(gs_usage_close(w1), GS_OK);
    assert_int_not_equal(access(lock, F_OK), 0);
    assert_int_equal(gs_usage_open(path, NULL, &w2, msg, sizeof(msg)), GS_OK);
    assert_int_equal(gs_usage_close(w2), GS_OK);
    /* A writer process holds it while it lives and releases it when it exits, even by SIGKILL
     * without closing the store. */
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct gs_usage_store *c;
        char m[512], b;
        if (gs_usage_open(path, NULL, &c, m, sizeof(m)) != GS_OK)
            _exit(3);
        if (write(ready[1], "1", 1) != 1)
            _exit(4);
        (void)!read(go[0], &b, 1); /* until killed */
        _exit(0);
    }
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_int_equal(gs_usage_open(path, NULL, &w2, msg, sizeof(msg)), GS_ECONFLICT);
    (void)snprintf(want, sizeof(want), "(pid %ld)", (long)pid);
    assert_non_null(strstr(msg, want));
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(access(lock, F_OK), 0); /* a killed writer leaves the file, not the lock */
    assert_int_equal(gs_usage_open(path, NULL, &w2, msg, sizeof(msg)), GS_OK);
    assert_int_equal(gs_usage_close(w2), GS_OK);
    (void)close(go[0]);
    (void)close(go[1]);
    (void)close(ready[0]);
    (void)close(ready[1]);
}

static void test_time_round_trips(void **state)
{
    (void)state;
    int64_t ms;
    /* 2026-12-01: 56 years after 1970 with 14 leap days (1972..2024) = 56 x 365 + 14 = 20,454
     * days to 2026-01-01, plus Jan..Nov 2026 (31+28+31+30+31+30+31+31+30+31+30 = 334) =
     * 20,788. */
    assert_int_equal(gs_usage_parse_time("2026-12-01", &ms), GS_OK);
    assert_int_equal(ms, EPOCH_MS);
    assert_int_equal(gs_usage_parse_time("2026-12-01T01:30:00Z", &ms), GS_OK);
    assert_int_equal(ms, EPOCH_MS + 90 * MIN_MS);
    assert_int_equal(gs_usage_parse_time("2026-12-01T01:30:00.250+01:00", &ms), GS_OK);
    assert_int_equal(ms, EPOCH_MS + 30 * MIN_MS + 250);
    char buf[40];
    gs_usage_format_time(EPOCH_MS + 90 * MIN_MS + 5000, buf, sizeof(buf));
    assert_string_equal(buf, "2026-12-01T01:30:05Z");
    gs_usage_format_time(0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    assert_int_equal(gs_usage_parse_time("2026-02-30", &ms), GS_EPARSE);
    assert_int_equal(gs_usage_parse_time("2026-12-01T25:00:00Z", &ms), GS_EPARSE);
    assert_int_equal(gs_usage_parse_time("2026-12-01T01:00:00", &ms), GS_EPARSE); /* no zone */
    assert_int_equal(gs_usage_parse_time("yesterday", &ms), GS_EPARSE);
    /* --tz: 01:30 UTC is 02:30 at +01:00 and 20:00 the day before at -05:30. */
    int32_t tz;
    assert_int_equal(gs_usage_parse_tz("+01:00", &tz), GS_OK);
    assert_int_equal(tz, 60);
    gs_usage_format_time_tz(EPOCH_MS + 90 * MIN_MS, tz, buf, sizeof(buf));
    assert_string_equal(buf, "2026-12-01T02:30:00+01:00");
    assert_int_equal(gs_usage_parse_tz("-05:30", &tz), GS_OK);
    assert_int_equal(tz, -330);
    gs_usage_format_time_tz(EPOCH_MS + 90 * MIN_MS, tz, buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-30T20:00:00-05:30");
    /* What it prints parses back to the same instant. */
    assert_int_equal(gs_usage_parse_time(buf, &ms), GS_OK);
    assert_int_equal(ms, EPOCH_MS + 90 * MIN_MS);
    assert_int_equal(gs_usage_parse_tz("UTC", &tz), GS_OK);
    assert_int_equal(tz, 0);
    assert_int_equal(gs_usage_parse_tz("+24:00", &tz), GS_EPARSE);
    assert_int_equal(gs_usage_parse_tz("Europe/Paris", &tz), GS_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_engine_gives_hand_worked_gpu_hours),
        cmocka_unit_test(test_three_quarter_pods_leave_a_quarter_idle_and_shares_by_mode),
        cmocka_unit_test(test_by_profile_gives_mig_whole_and_fraction_rows),
        cmocka_unit_test(test_queue_share_integrates_snapshots_over_time),
        cmocka_unit_test(test_recorder_writes_quota_snapshots_only_on_change),
        cmocka_unit_test(test_two_memory_requests_on_one_gpu_are_charged_1_80),
        cmocka_unit_test(test_utilisation_names_idle_allocations),
        cmocka_unit_test(test_recorder_follows_health_removal_and_addition),
        cmocka_unit_test(test_recover_closes_open_intervals_at_the_last_heartbeat),
        cmocka_unit_test(test_compact_keeps_hourly_means_and_deletes_only_when_asked),
        cmocka_unit_test(test_foreign_corrupt_and_newer_files_get_a_clear_error),
        cmocka_unit_test(test_second_writer_is_refused_readers_are_not_and_exit_releases),
        cmocka_unit_test(test_time_round_trips),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
