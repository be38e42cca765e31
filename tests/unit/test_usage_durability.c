/*
 * Durability of the accounting store under SIGKILL (issue 11, "Must show" 2).
 *
 * A writer process records 10,000 allocation intervals (each a begin and an end event, batches
 * of 50 events) and, after every commit, tells the parent through a pipe the last interval whose
 * end that commit made durable. The parent kills it with SIGKILL at a seeded-random point of its
 * progress (once it has reported 1 to 2,000 more committed intervals; about ten kills a run,
 * 9 here), then reopens the store as a new writer would: gs_usage_recover() with no
 * running pods, and checks
 *  - every interval reported committed is there, closed as "finished" at its own end;
 *  - no pod has two intervals (the resumed writer starts after what the file holds);
 *  - no interval is left open, and one closed by recovery ends at the last heartbeat, never
 *    before its start.
 * Then a new writer resumes from what the file holds, until all 10,000 are written.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "gpusched/err.h"
#include "gpusched/rng.h"
#include "gpusched/usage.h"

#define INTERVALS 10000
#define SEED 20261201u

static char path[96];
/* Intervals a writer reported as committed with their end; how many. */
static bool must_finish[INTERVALS];
static int64_t must_finish_count;
/* Intervals closed by recovery, over all rounds. */
static uint32_t recovered_total;

static int64_t one(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/* Tells the parent that every interval up to `ended` is committed with its end. */
static void report(int fd, int64_t ended)
{
    char line[32];
    int n = snprintf(line, sizeof(line), "%lld\n", (long long)ended);
    if (write(fd, line, (size_t)n) != n)
        _exit(6);
}

/* The writer: resumes after the intervals the file holds. Never returns. */
static void writer(int fd)
{
    char msg[512];
    struct gs_usage_store *s;
    struct gs_usage_options o = {.batch_events = 50, .batch_ms = INT64_MAX / 4};
    if (gs_usage_open(path, &o, &s, msg, sizeof(msg)) != GS_OK) {
        (void)fprintf(stderr, "writer: %s\n", msg);
        _exit(3);
    }
    if (gs_usage_recover(s, NULL, 0, NULL) != GS_OK)
        _exit(4);
    int64_t next = one(gs_usage_db(s), "SELECT count(*) FROM allocation");
    /* Interval i is begun before interval i-1's end is recorded, so every batch boundary falls
     * while one interval is open, and a kill always leaves one for recovery to close. */
    int64_t prev = 0, ended = next - 1;
    bool committed;
    for (int64_t i = next; i <= INTERVALS; i++) {
        int64_t id = 0;
        if (i < INTERVALS) {
            char uid[32];
            (void)snprintf(uid, sizeof(uid), "iv-%05lld", (long long)i);
            struct gs_usage_interval iv = {.pod_uid = uid,
                                           .team = "t",
                                           .node = "n1",
                                           .queued_ms = i * 1000,
                                           .start_ms = i * 1000};
            struct gs_usage_gpu g = {.gpu_index = (uint32_t)(i % 8),
                                     .sharing = GS_GPU_SHARE_MILLI,
                                     .gpu_milli = 500,
                                     .mig_instance = -1,
                                     .replica_slot = -1};
            if (gs_usage_begin_interval(s, &iv, &g, 1, &id) != GS_OK ||
                gs_usage_tick(s, i * 1000, &committed) != GS_OK)
                _exit(5);
            if (committed)
                report(fd, ended);
        }
        if (prev) {
            if (gs_usage_end_interval(s, prev, i * 1000 + 500 - 1000, GS_USAGE_END_FINISHED,
                                      NULL) != GS_OK ||
                gs_usage_tick(s, i * 1000, &committed) != GS_OK)
                _exit(7);
            ended = i - 1;
            if (committed)
                report(fd, ended);
        }
        prev = id;
    }
    if (gs_usage_close(s) != GS_OK)
        _exit(8);
    report(fd, INTERVALS - 1);
    _exit(0);
}

/* Checks the file as a restarted writer sees it; returns the intervals it holds. */
static int64_t check_store(int64_t committed_max)
{
    char msg[512];
    struct gs_usage_store *s;
    assert_int_equal(gs_usage_open(path, NULL, &s, msg, sizeof(msg)), GS_OK);
    uint32_t closed;
    assert_int_equal(gs_usage_recover(s, NULL, 0, &closed), GS_OK);
    recovered_total += closed;
    sqlite3 *db = gs_usage_db(s);
    int64_t n = one(db, "SELECT count(*) FROM allocation");
    int64_t distinct = one(db, "SELECT count(DISTINCT pod_uid) FROM allocation");
    int64_t open = one(db, "SELECT count(*) FROM allocation WHERE end_ms IS NULL");
    int64_t hb = one(db, "SELECT t_ms FROM heartbeat");
    assert_int_equal(distinct, n); /* no duplicate */
    assert_int_equal(open, 0);     /* none left open */
    /* Every interval a writer reported committed is there and finished at its own end; the
     * rest (begun in a committed batch, ended in a lost one) were closed by recovery. */
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT CAST(substr(pod_uid, 4) AS INTEGER), end_reason, "
                                        "end_ms - start_ms FROM allocation",
                                        -1, &st, NULL),
                     SQLITE_OK);
    int64_t finished = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *why = (const char *)sqlite3_column_text(st, 1);
        assert_true(id >= 0 && id < INTERVALS);
        if (must_finish[id]) {
            assert_string_equal(why, "finished");
            assert_int_equal(sqlite3_column_int64(st, 2), 500);
            finished++;
        } else {
            assert_true(strcmp(why, "finished") == 0 || strcmp(why, "recovered") == 0);
        }
    }
    sqlite3_finalize(st);
    assert_int_equal(finished, must_finish_count);
    assert_true(committed_max < n);
    /* The ids are exactly 0..n-1: resumed writers never skip or repeat one. */
    assert_int_equal(
        one(db, "SELECT coalesce(max(CAST(substr(pod_uid, 4) AS INTEGER)), -1) FROM allocation"),
        n - 1);
    /* Closed by recovery: at the last heartbeat, not before the start. */
    assert_int_equal(one(db, "SELECT count(*) FROM allocation WHERE end_reason = 'recovered' AND "
                             "(end_ms < start_ms OR end_ms > (SELECT t_ms FROM heartbeat))"),
                     0);
    (void)hb;
    assert_int_equal(gs_usage_close(s), GS_OK);
    return n;
}

static void test_sigkill_during_10000_intervals_loses_no_committed_interval(void **state)
{
    (void)state;
    char dir[64];
    (void)snprintf(dir, sizeof(dir), "/tmp/gs_usage_kill.XXXXXX");
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/usage.db", dir);
    struct gs_rng rng;
    gs_rng_seed(&rng, SEED);
    int64_t committed_max = -1, held = 0;
    uint32_t kills = 0, rounds = 0;
    bool done = false;
    while (!done && rounds++ < 2000) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            writer(p[1]);
        }
        close(p[1]);
        /* Killed at a random point of its progress, not of the clock (a fast machine finished
         * all 10,000 before a fixed delay ran out): once it has reported 1 to 2,000 more
         * committed intervals, while it goes on writing. */
        int64_t target =
            (committed_max > 0 ? committed_max : 0) + 1 + (int64_t)gs_rng_below(&rng, 2000);
        static char buf[1 << 20];
        size_t len = 0;
        ssize_t r;
        bool signalled = false;
        while (len < sizeof(buf) - 1 && (r = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0) {
            len += (size_t)r;
            buf[len] = '\0';
            char *end = strrchr(buf, '\n');
            if (!signalled && end) {
                *end = '\0';
                char *start = strrchr(buf, '\n');
                int64_t c = strtoll(start ? start + 1 : buf, NULL, 10);
                *end = '\n';
                if (c >= target) {
                    if (kill(pid, SIGKILL) == 0)
                        kills++;
                    signalled = true;
                }
            }
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* Everything the writer said before it died; the last full line counts. */
        buf[len] = '\0';
        const char *last = "";
        char *nl = strrchr(buf, '\n');
        if (nl) {
            *nl = '\0';
            char *prev = strrchr(buf, '\n');
            last = prev ? prev + 1 : buf;
        }
        close(p[0]);
        if (last[0]) {
            int64_t c = strtoll(last, NULL, 10);
            assert_true(c >= committed_max); /* commits only move forward */
            assert_true(c < INTERVALS);
            committed_max = c;
            /* This writer started after the `held` intervals the file held. */
            for (int64_t j = held; j <= c; j++) {
                must_finish_count += !must_finish[j];
                must_finish[j] = true;
            }
        }
        if (WIFEXITED(status)) {
            if (WEXITSTATUS(status) != 0)
                fail_msg("writer exited %d", WEXITSTATUS(status));
            done = true;
            kills--; /* it had finished before the signal */
        }
        int64_t before = held;
        held = check_store(committed_max);
        assert_true(held >= before);
        assert_true(held >= committed_max + 1);
    }
    assert_true(done);
    assert_int_equal(held, INTERVALS);
    assert_int_equal(committed_max, INTERVALS - 1);
    /* It was really killed mid-write, more than a few times. */
    assert_true(kills >= 5);
    /* Every commit follows a begin, so a kill mid-run leaves an interval open: recovery ran. */
    assert_true(recovered_total >= 1);
    print_message("%u writers killed with SIGKILL in %u rounds; %u open intervals closed by "
                  "recovery\n",
                  kills, rounds, recovered_total);
    char cmd[96];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_during_10000_intervals_loses_no_committed_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
