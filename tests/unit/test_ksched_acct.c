/*
 * The live scheduler's accountant (src/cli/sched_acct.c) over a real translation (kworld.h) and
 * a real store file: the end reason of each way a pod's hold ends, the times it is told, the team
 * from the pod's label, else its namespace's, and the restart reconcile (an adopted pod keeps its
 * one interval, a pod gone while nothing recorded is closed at the last heartbeat, "recovered").
 *
 * Worked by hand with best fit: node a has 2 GPUs, b has 4. p1 and p2 (1 GPU each) fill a (best
 * fit leaves 1 then 0 free there, against 3 on b); a is deleted at t=3000, so p2 ends node-lost
 * (p1 finished at 2000). p3, p4 and p6 then go to b. Times are the now_ms given to the world.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/sched_acct.h"
#include "cli/sched_int.h"
#include "gpusched/err.h"
#include "gpusched/kworld.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"

static int errors_logged;

/* The scheduler's log (cmd_scheduler.c), here: errors are counted, and none is expected. */
void gs__sched_logf(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)fprintf(stderr, "%s: ", level);
    (void)vfprintf(stderr, fmt, ap);
    (void)fputc('\n', stderr);
    va_end(ap);
    if (strcmp(level, "error") == 0)
        errors_logged++;
}

struct ctx {
    struct gs__sched_acct *acct;
    struct gs_kworld *w;
};

static void on_event(void *ud, const struct gs_kevent *ev)
{
    struct ctx *c = ud;
    gs__sched_acct_event(c->acct, c->w, ev);
}

static json_t *node(const char *name, int gpus)
{
    char g[16];
    (void)snprintf(g, sizeof(g), "%d", gpus);
    return json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "v1", "kind",
                     "Node", "metadata", "name", name, "status", "allocatable", "cpu", "32",
                     "memory", "256Gi", "pods", "110", "nvidia.com/gpu", g);
}

/* A 1-GPU pod of gpusched in namespace ns; on_node: already bound there (NULL: pending). */
static json_t *pod(const char *ns, const char *name, const char *uid, const char *on_node)
{
    json_t *p =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}", "apiVersion", "v1",
                  "kind", "Pod", "metadata", "name", name, "namespace", ns, "uid", uid,
                  "creationTimestamp", "2026-01-01T00:00:00Z", "spec", "schedulerName", "gpusched",
                  "containers", "name", "c", "resources", "limits", "nvidia.com/gpu", "1");
    if (on_node) {
        json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(on_node));
        json_object_set_new(p, "status", json_pack("{s:s}", "phase", "Running"));
    }
    return p;
}

static void apply(struct ctx *c, json_t *obj)
{
    char err[256] = "";
    gs__sched_acct_observe(c->acct, json_string_value(json_object_get(obj, "kind")), false, obj);
    int rc = gs_kworld_apply(c->w, GS_KADDED, obj, 0, err, sizeof(err));
    if (rc != GS_OK)
        fail_msg("apply: %s (%s)", gs_strerror(rc), err);
    json_decref(obj);
}

static void cycle(struct ctx *c, int64_t now_ms)
{
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(c->w, now_ms, NULL, err, sizeof(err)), GS_OK);
}

static void start(struct ctx *c, const char *path)
{
    char msg[256] = "";
    assert_int_equal(gs__sched_acct_new(path, "gpusched.io/team", &c->acct), GS_OK);
    assert_int_equal(gs__sched_acct_start(c->acct, msg, sizeof(msg)), GS_OK);
    struct gs_kworld_config cfg = {.policy = "bestfit", .on_event = on_event, .ctx = c};
    assert_int_equal(gs_kworld_new(&cfg, &c->w), GS_OK);
    apply(c, json_pack("{s:s,s:s,s:{s:s,s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                       "metadata", "name", "ml", "labels", "gpusched.io/team", "vision"));
}

/* One interval of pod `name`: "start end reason team node" (end "-" while open). */
static void row_of(const char *path, const char *name, char *out, size_t cap, int *count)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT start_ms, coalesce(end_ms, '-'),"
                                        " coalesce(end_reason, 'open'), team, node, gpus_charged"
                                        " FROM allocation WHERE name = ?1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    *count = 0;
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW) {
        (*count)++;
        (void)snprintf(out, cap, "%s %s %s %s %s %.1f", sqlite3_column_text(st, 0),
                       sqlite3_column_text(st, 1), sqlite3_column_text(st, 2),
                       sqlite3_column_text(st, 3), sqlite3_column_text(st, 4),
                       sqlite3_column_double(st, 5));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void expect(const char *path, const char *name, const char *want)
{
    char got[256];
    int n;
    row_of(path, name, got, sizeof(got), &n);
    if (n != 1 || strcmp(got, want) != 0)
        fail_msg("%s: %d interval(s), '%s'; want one, '%s'", name, n, got, want);
}

/* GPU-seconds the store charges up to to_ms (open intervals run to it): its gpus_charged. */
static double store_gpu_seconds(const char *path, int64_t to_ms)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT sum(gpus_charged * (coalesce(end_ms, ?1) - "
                                        "start_ms)) / 1000.0 FROM allocation",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, to_ms);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void test_end_reasons_and_restart_reconcile(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-ksched-acct-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/usage.db", dir);
    errors_logged = 0;

    /* The first scheduler. */
    struct ctx c = {0};
    start(&c, path);
    apply(&c, node("a", 2));
    apply(&c, node("b", 4));
    apply(&c, pod("ml", "p1", "uid-1", NULL));
    /* p2's own label wins over its namespace's. */
    json_t *p2 = pod("ml", "p2", "uid-2", NULL);
    json_object_set_new(json_object_get(p2, "metadata"), "labels",
                        json_pack("{s:s}", "gpusched.io/team", "nlp"));
    apply(&c, p2);
    cycle(&c, 1000);
    assert_int_equal(gs__sched_acct_reconcile(c.acct, c.w, 1000), GS_OK);
    assert_int_equal(gs_kworld_finish_pod(c.w, "ml", "p1", 2000), GS_OK);
    assert_int_equal(gs_kworld_delete_node(c.w, "a", 3000), GS_OK);
    apply(&c, pod("other", "p3", "uid-3", NULL));
    apply(&c, pod("other", "p4", "uid-4", NULL));
    apply(&c, pod("other", "p6", "uid-6", NULL));
    cycle(&c, 3000);
    assert_int_equal(gs_kworld_delete_pod(c.w, "other", "p3", 4000), GS_OK);
    assert_int_equal(gs__sched_acct_step(c.acct, 5000), GS_OK);
    /* Live, for /metrics: p1 1 s, p2 2 s, p3 1 s, p4 and p6 2 s each, 1 GPU each = 8
     * GPU-seconds on queue default, and p4 and p6 hold 2 GPUs now. */
    struct gs_schedmetrics_charge ch[4];
    assert_int_equal(gs__sched_acct_charges(c.acct, 5000, ch, 4), 1);
    assert_string_equal(ch[0].queue, "default");
    assert_true(fabs(ch[0].gpu_seconds - 8.0) < 1e-9);
    assert_true(fabs(ch[0].gpus - 2.0) < 1e-9);
    /* ... which is what the store holds for the same span, by its own gpus_charged. */
    assert_true(fabs(store_gpu_seconds(path, 5000) - ch[0].gpu_seconds) < 1e-9);
    /* Accrual goes on with time, never back. */
    assert_int_equal(gs__sched_acct_charges(c.acct, 4000, ch, 4), 1);
    assert_true(fabs(ch[0].gpu_seconds - 8.0) < 1e-9);
    struct gs__sched_acct_stats st;
    assert_int_equal(gs__sched_acct_free(c.acct, 5000, &st), GS_OK);
    gs_kworld_free(c.w);
    assert_int_equal(st.opened, 5);
    assert_int_equal(st.closed, 3);
    expect(path, "p1", "1000 2000 finished vision a 1.0");
    expect(path, "p2", "1000 3000 node-lost nlp a 1.0");
    /* No namespace label: the queue's top-level ancestor, the default queue. */
    expect(path, "p3", "3000 4000 deleted default b 1.0");
    expect(path, "p4", "3000 - open default b 1.0");
    expect(path, "p6", "3000 - open default b 1.0");

    /* The restart: p4 is still bound on b, p6 went while nothing recorded. */
    memset(&c, 0, sizeof(c));
    start(&c, path);
    apply(&c, node("b", 4));
    apply(&c, pod("other", "p4", "uid-4", "b"));
    /* p7 was bound while no scheduler recorded (the file has no interval of it): adopted in
     * the first cycle, its interval starts at its status.startTime, not at the engine's time
     * before any cycle (0, 1970). */
    json_t *p7 = pod("other", "p7", "uid-7", "b");
    json_object_set_new(json_object_get(p7, "status"), "startTime",
                        json_string("2026-01-01T00:00:05Z"));
    apply(&c, p7);
    cycle(&c, 10000);
    assert_int_equal(gs__sched_acct_reconcile(c.acct, c.w, 10000), GS_OK);
    /* The adopted p4 (with the charge the file holds) and p7 count from the reconcile after
     * the first cycle (10000; their adoption events carry the engine's time before any cycle,
     * 0): 1 s x 2 GPUs at 11000. p6, recovered, never counts here. A new process's counter
     * starts at 0 (Prometheus' rate() takes the reset). */
    assert_int_equal(gs__sched_acct_charges(c.acct, 11000, ch, 4), 1);
    assert_string_equal(ch[0].queue, "default");
    if (fabs(ch[0].gpu_seconds - 2.0) >= 1e-9)
        fail_msg("adopted: %.9g GPU-s, %.9g GPUs", ch[0].gpu_seconds, ch[0].gpus);
    assert_true(fabs(ch[0].gpus - 2.0) < 1e-9);
    assert_int_equal(gs__sched_acct_free(c.acct, 11000, &st), GS_OK);
    gs_kworld_free(c.w);
    assert_int_equal(st.opened, 1); /* p7; p4 adopted: not opened twice */
    /* 2026-01-01T00:00:05Z: 20,454 days after the epoch, and 5 s. */
    expect(path, "p7", "1767225605000 - open default b 1.0");
    assert_int_equal(st.kept, 1);
    assert_int_equal(st.recovered, 1);
    expect(path, "p4", "3000 - open default b 1.0");
    /* Closed at the first writer's last heartbeat, its final commit at 5000. */
    expect(path, "p6", "3000 5000 recovered default b 1.0");
    assert_int_equal(errors_logged, 0);

    const char *const files[] = {"usage.db", "usage.db-wal", "usage.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char f[96];
        (void)snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
        (void)unlink(f); /* the WAL files are gone after a clean close */
    }
    assert_int_equal(rmdir(dir), 0);
}

/* A pod of `pod()` that ran on b and ended in `phase`, its containers finished at the given
 * RFC 3339 times. */
static json_t *ended_pod(const char *name, const char *uid, const char *phase, const char *fin1,
                         const char *fin2)
{
    json_t *p = pod("other", name, uid, "b");
    json_t *cs = json_array();
    const char *fins[] = {fin1, fin2};
    for (int i = 0; i < 2; i++)
        json_array_append_new(cs, json_pack("{s:s,s:{s:{s:i,s:s}}}", "name", i ? "d" : "c", "state",
                                            "terminated", "exitCode", 0, "finishedAt", fins[i]));
    json_object_set_new(p, "status",
                        json_pack("{s:s,s:o}", "phase", phase, "containerStatuses", cs));
    return p;
}

/*
 * Recovery at the containers' finish time: q1, q2 and q3 bind on b at 1 s; the scheduler stops
 * at 5 s (its last heartbeat). While none runs q1 succeeds (containers finished at 2 s and
 * 3.5 s: the later counts), q2 fails with a finish time of 0.5 s, before its interval's start
 * (clamped to the start, 1 s), and q3 is deleted. The restart closes q1 at 3.5 s and q2 at 1 s
 * as finished, q3 at the heartbeat, 5 s, as recovered.
 */
static void test_restart_closes_finished_pods_at_their_finish_time(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-ksched-acct-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/usage.db", dir);
    errors_logged = 0;
    struct ctx c = {0};
    start(&c, path);
    apply(&c, node("b", 4));
    apply(&c, pod("other", "q1", "uid-q1", NULL));
    apply(&c, pod("other", "q2", "uid-q2", NULL));
    apply(&c, pod("other", "q3", "uid-q3", NULL));
    cycle(&c, 1000);
    assert_int_equal(gs__sched_acct_reconcile(c.acct, c.w, 1000), GS_OK);
    struct gs__sched_acct_stats st;
    assert_int_equal(gs__sched_acct_free(c.acct, 5000, &st), GS_OK);
    gs_kworld_free(c.w);
    assert_int_equal(st.opened, 3);

    memset(&c, 0, sizeof(c));
    start(&c, path);
    apply(&c, node("b", 4));
    apply(&c,
          ended_pod("q1", "uid-q1", "Succeeded", "1970-01-01T00:00:02Z", "1970-01-01T00:00:03.5Z"));
    apply(&c,
          ended_pod("q2", "uid-q2", "Failed", "1970-01-01T00:00:00.5Z", "1970-01-01T00:00:00.5Z"));
    cycle(&c, 10000);
    assert_int_equal(gs__sched_acct_reconcile(c.acct, c.w, 10000), GS_OK);
    assert_int_equal(gs__sched_acct_free(c.acct, 11000, &st), GS_OK);
    gs_kworld_free(c.w);
    assert_int_equal(st.kept, 0);
    assert_int_equal(st.recovered_finished, 2);
    assert_int_equal(st.recovered, 1);
    expect(path, "q1", "1000 3500 finished default b 1.0");
    expect(path, "q2", "1000 1000 finished default b 1.0");
    expect(path, "q3", "1000 5000 recovered default b 1.0");
    assert_int_equal(errors_logged, 0);

    const char *const files[] = {"usage.db", "usage.db-wal", "usage.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char f[96];
        (void)snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
        (void)unlink(f);
    }
    assert_int_equal(rmdir(dir), 0);
}

/* The team rows of a report over [0, 10 s): "key:caused:suffered ..." in the report's order. */
static void caused_by_team(const char *path, char *out, size_t cap)
{
    char msg[256] = "";
    struct gs_usage_store *s;
    struct gs_usage_options ro = {.read_only = true};
    assert_int_equal(gs_usage_open(path, &ro, &s, msg, sizeof(msg)), GS_OK);
    struct gs_usage_report_options opt = {.from_ms = 0, .to_ms = 10000, .by = GS_USAGE_BY_TEAM};
    struct gs_usage_report *r;
    if (gs_usage_report_build(s, &opt, &r, msg, sizeof(msg)) != GS_OK)
        fail_msg("report: %s", msg);
    size_t n = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < r->nrows && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s:%llu:%llu", i ? " " : "", r->rows[i].key,
                              (unsigned long long)r->rows[i].preemptions_caused,
                              (unsigned long long)r->rows[i].preemptions_suffered);
    gs_usage_report_free(r);
    assert_int_equal(gs_usage_close(s), GS_OK);
}

static void test_preemptor_is_recorded_by_uid(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-ksched-acct-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/usage.db", dir);
    errors_logged = 0;
    struct ctx c = {0};
    char msg[256] = "";
    assert_int_equal(gs__sched_acct_new(path, "gpusched.io/team", &c.acct), GS_OK);
    assert_int_equal(gs__sched_acct_start(c.acct, msg, sizeof(msg)), GS_OK);
    struct gs_kworld_config cfg = {
        .policy = "bestfit", .preemption = true, .on_event = on_event, .ctx = &c};
    assert_int_equal(gs_kworld_new(&cfg, &c.w), GS_OK);
    apply(&c, json_pack("{s:s,s:s,s:{s:s,s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                        "metadata", "name", "ml", "labels", "gpusched.io/team", "vision"));
    apply(&c, node("c", 1));
    json_t *vic = pod("ml", "vic", "uid-vic", NULL);
    json_object_set_new(json_object_get(vic, "spec"), "priority", json_integer(0));
    apply(&c, vic);
    cycle(&c, 1000);
    assert_int_equal(gs__sched_acct_reconcile(c.acct, c.w, 1000), GS_OK);
    json_t *high = pod("ml", "high", "uid-high", NULL);
    json_object_set_new(json_object_get(high, "spec"), "priority", json_integer(1000));
    json_object_set_new(json_object_get(high, "metadata"), "labels",
                        json_pack("{s:s}", "gpusched.io/team", "nlp"));
    apply(&c, high);
    cycle(&c, 2000);
    /* The victim's pod is gone (its kubelet stopped it): the preemptor binds. */
    assert_int_equal(gs_kworld_delete_pod(c.w, "ml", "vic", 2500), GS_OK);
    cycle(&c, 3000);
    assert_int_equal(gs__sched_acct_free(c.acct, 4000, NULL), GS_OK);
    gs_kworld_free(c.w);
    assert_int_equal(errors_logged, 0);

    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT evicted_by, end_reason FROM allocation WHERE "
                                        "name = 'vic'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "uid-high");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "evicted-preemption");
    sqlite3_finalize(st);
    char got[256];
    /* vic suffered one (vision), high caused it (nlp); no "-" row for an unmatched preemptor.
     * Rows by charged GPU-hours: vic held c 1-2 s, high from its bind on. */
    caused_by_team(path, got, sizeof(got));
    assert_non_null(strstr(got, "nlp:1:0"));
    assert_non_null(strstr(got, "vision:0:1"));
    assert_null(strstr(got, "-:"));
    /* A file from before uids were stored names the preemptor "ns/name": it attributes too. */
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE allocation SET evicted_by = 'ml/high' WHERE "
                                  "name = 'vic'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    caused_by_team(path, got, sizeof(got));
    assert_non_null(strstr(got, "nlp:1:0"));
    assert_null(strstr(got, "-:"));

    const char *const files[] = {"usage.db", "usage.db-wal", "usage.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char f[96];
        (void)snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
        (void)unlink(f);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_reasons_and_restart_reconcile),
        cmocka_unit_test(test_preemptor_is_recorded_by_uid),
        cmocka_unit_test(test_restart_closes_finished_pods_at_their_finish_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
