/*
 * Benchmarks of the usage accounting store (never a timed test; bench/run.sh runs them):
 *
 *   bench_usage write N DIR
 *       writes N allocation intervals (a begin and an end each, one GPU, batches of 1,000
 *       events as the live default) into DIR/write.db and prints intervals per second (wall
 *       and per CPU-second) and the database size per million intervals: with synchronous=FULL
 *       (the default) in batches of 1,000 and of 10,000 events, and with NORMAL (relaxed_sync)
 *       in batches of 1,000. With FULL every commit waits for an fsync.
 *   bench_usage year REPLAY_DB DIR
 *       copies the intervals, capacity and quota snapshots of one replay (gpusched replay
 *       --accounting) back to back until they cover one year, into DIR/year.db, then times
 *       `report usage` over that year (open, build, table), median of 5.
 *   bench_usage ingest G DIR
 *       `report ingest`'s work without the network: a store in DIR/ingest.db of G whole GPUs on
 *       G / 8 nodes, each held by one pod for a day, a range-query body of G series of 1,440
 *       steps (a day at 60 s, one query's worth) built in memory, then the time to parse it
 *       (gs_prom_parse_range()) and to map and write it (gs_usage_ingest_matrix() and its
 *       commit), in samples per second, with the body's size.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_ingest.h"
#include "gpusched/usage_report.h"

#include "bench_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static int bench_write(long n, const char *dir, bool relaxed, uint32_t batch)
{
    char path[512], msg[512];
    (void)snprintf(path, sizeof(path), "%s/write.db", dir);
    (void)remove(path);
    struct gs_usage_store *s;
    struct gs_usage_options o = {.batch_events = batch, .relaxed_sync = relaxed};
    if (gs_usage_open(path, &o, &s, msg, sizeof(msg)) != GS_OK) {
        (void)fprintf(stderr, "bench_usage: %s\n", msg);
        return 1;
    }
    clock_t c0 = clock();
    static const char *const teams[] = {"inference", "research", "llm-train", "vision"};
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        char uid[64], name[40], node[32];
        (void)snprintf(uid, sizeof(uid), "5f0c9a7e-%08lx-4b1d-9c2e-%012lx", i, i * 7919);
        (void)snprintf(name, sizeof(name), "job-%ld", i);
        (void)snprintf(node, sizeof(node), "node-%04ld", i % 1213);
        int64_t start = (int64_t)i * 1000;
        struct gs_usage_interval iv = {uid,          "default",    name,          teams[i % 4],
                                       teams[i % 4], teams[i % 4], "best-effort", node,
                                       "A100",       start,        start};
        struct gs_usage_gpu g = {.gpu_index = (uint32_t)(i % 8),
                                 .sharing = GS_GPU_SHARE_MILLI,
                                 .gpu_milli = i % 3 ? 1000 : 250,
                                 .mig_instance = -1,
                                 .replica_slot = -1};
        int64_t id;
        if (gs_usage_begin_interval(s, &iv, &g, 1, &id) != GS_OK ||
            gs_usage_tick(s, start, NULL) != GS_OK ||
            gs_usage_end_interval(s, id, start + 600000, GS_USAGE_END_FINISHED, NULL) != GS_OK ||
            gs_usage_tick(s, start + 1, NULL) != GS_OK) {
            (void)fprintf(stderr, "bench_usage: %s\n", gs_usage_errmsg(s));
            (void)gs_usage_close(s);
            return 1;
        }
    }
    if (gs_usage_close(s) != GS_OK)
        return 1;
    double dt = now_s() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    long long size = file_size(path);
    printf("write (synchronous=%s, batches of %u events): %ld intervals in %.2f s = %.0f "
           "intervals/s wall, %.0f per CPU-second; database %.1f MiB = %.1f MiB per million "
           "intervals\n",
           relaxed ? "NORMAL" : "FULL", batch, n, dt, (double)n / dt, (double)n / cpu,
           (double)size / 1048576.0, (double)size / 1048576.0 * 1e6 / (double)n);
    return 0;
}

static int exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        (void)fprintf(stderr, "bench_usage: %s: %s\n", sql, err ? err : "?");
        sqlite3_free(err);
        return 1;
    }
    return 0;
}

static int bench_year(const char *replay_db, const char *dir)
{
    char path[512], msg[512], sql[2048];
    (void)snprintf(path, sizeof(path), "%s/year.db", dir);
    (void)remove(path);
    struct gs_usage_store *s;
    if (gs_usage_open(path, NULL, &s, msg, sizeof(msg)) != GS_OK) {
        (void)fprintf(stderr, "bench_usage: %s\n", msg);
        return 1;
    }
    sqlite3 *db = gs_usage_db(s);
    (void)snprintf(sql, sizeof(sql), "ATTACH DATABASE '%s' AS r", replay_db);
    if (exec(db, sql))
        return 1;
    sqlite3_stmt *st;
    int64_t lo = 0, hi = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT min(start_ms), max(coalesce(end_ms, start_ms)) FROM r.capacity",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        (void)fprintf(stderr, "bench_usage: %s: no capacity\n", replay_db);
        return 1;
    }
    lo = sqlite3_column_int64(st, 0);
    hi = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    int64_t span = hi - lo, year = INT64_C(365) * 86400000;
    if (span <= 0)
        return 1;
    int copies = (int)((year + span - 1) / span);
    double t0 = now_s();
    if (exec(db, "BEGIN"))
        return 1;
    for (int k = 0; k < copies; k++) {
        long long off = (long long)k * span;
        (void)snprintf(
            sql, sizeof(sql),
            "INSERT INTO allocation(pod_uid, namespace, name, queue, queue_path, team, "
            "priority_class, node, model, num_gpu, gpus_charged, queued_ms, start_ms, end_ms, "
            "end_reason, evicted_by) SELECT pod_uid || '-c%d', namespace, name, queue, "
            "queue_path, team, priority_class, node, model, num_gpu, gpus_charged, queued_ms + "
            "%lld, start_ms + %lld, end_ms + %lld, end_reason, evicted_by || '-c%d' FROM "
            "r.allocation;"
            "INSERT INTO capacity(node, model, gpu_index, gpu_uuid, healthy, start_ms, end_ms, "
            "end_reason) SELECT node, model, gpu_index, gpu_uuid, healthy, start_ms + %lld, "
            "end_ms + %lld, end_reason FROM r.capacity;"
            "INSERT INTO quota_snapshot SELECT t_ms + %lld, queue, queue_path, gpu_quota_milli, "
            "gpu_limit_milli, gpu_fair_milli, gpu_allocated_milli FROM r.quota_snapshot;",
            k, off, off, off, k, off, off, off);
        if (exec(db, sql))
            return 1;
    }
    (void)snprintf(sql, sizeof(sql),
                   "INSERT INTO heartbeat VALUES(1, %lld, 1) ON CONFLICT(id) DO UPDATE SET "
                   "t_ms = excluded.t_ms; COMMIT; DETACH DATABASE r",
                   (long long)lo + (long long)copies * (long long)span);
    if (exec(db, sql))
        return 1;
    double build_s = now_s() - t0;
    long long nint = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM allocation", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        nint = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    (void)gs_usage_close(s);
    printf("year: the replay (%.1f days) copied %d times = %.1f days, %lld intervals, built in "
           "%.2f s; database %.1f MiB\n",
           (double)span / 86400000.0, copies, (double)copies * (double)span / 86400000.0, nint,
           build_s, (double)file_size(path) / 1048576.0);
    struct gs_usage_options ro = {.read_only = true};
    static const enum gs_usage_by bys[] = {GS_USAGE_BY_TEAM, GS_USAGE_BY_NODE};
    for (unsigned b = 0; b < 2; b++) {
        double t[5];
        for (int rep = 0; rep < 5; rep++) {
            double a = now_s();
            if (gs_usage_open(path, &ro, &s, msg, sizeof(msg)) != GS_OK) {
                (void)fprintf(stderr, "bench_usage: %s\n", msg);
                return 1;
            }
            struct gs_usage_report_options o = {lo, lo + year, bys[b], 0, 0, 0};
            struct gs_usage_report *r;
            if (gs_usage_report_build(s, &o, &r, msg, sizeof(msg)) != GS_OK) {
                (void)fprintf(stderr, "bench_usage: %s\n", msg);
                return 1;
            }
            FILE *devnull = fopen("/dev/null", "w");
            if (!devnull || gs_usage_report_write(r, GS_USAGE_TABLE, devnull) != GS_OK)
                return 1;
            (void)fclose(devnull);
            gs_usage_report_free(r);
            (void)gs_usage_close(s);
            t[rep] = now_s() - a;
        }
        qsort(t, 5, sizeof(t[0]), cmp_double);
        printf("report usage --by %s over the year: %.3f s (median of 5; min %.3f, max %.3f)\n",
               gs_usage_by_name(bys[b]), t[2], t[0], t[4]);
    }
    return 0;
}

/* 2026-12-01T00:00:00Z in Unix seconds. */
#define INGEST_T0_S INT64_C(1796083200)

static int bench_ingest(long gpus, const char *dir)
{
    if (gpus < 8 || gpus > 100000) {
        (void)fprintf(stderr, "bench_usage ingest: G in [8, 100000]\n");
        return 2;
    }
    char path[512], msg[512];
    (void)snprintf(path, sizeof(path), "%s/ingest.db", dir);
    (void)remove(path);
    struct gs_usage_store *s;
    if (gs_usage_open(path, NULL, &s, msg, sizeof(msg)) != GS_OK) {
        (void)fprintf(stderr, "bench_usage: %s\n", msg);
        return 1;
    }
    const int64_t day_ms = INT64_C(86400000), t0 = INGEST_T0_S * 1000;
    int err = GS_OK;
    for (long g = 0; g < gpus && !err; g++) {
        char uid[32], node[32], uuid[48];
        (void)snprintf(uid, sizeof(uid), "pod-%ld", g);
        (void)snprintf(node, sizeof(node), "node-%ld", g / 8);
        (void)snprintf(uuid, sizeof(uuid), "GPU-%036ld", g);
        struct gs_usage_interval iv = {
            .pod_uid = uid, .ns = "ml", .name = uid, .node = node, .queued_ms = t0, .start_ms = t0};
        struct gs_usage_gpu gr = {.gpu_uuid = uuid,
                                  .gpu_index = (uint32_t)(g % 8),
                                  .sharing = GS_GPU_SHARE_MILLI,
                                  .gpu_milli = 1000,
                                  .mig_instance = -1,
                                  .replica_slot = -1};
        int64_t id;
        err = gs_usage_begin_interval(s, &iv, &gr, 1, &id);
        if (!err)
            err = gs_usage_end_interval(s, id, t0 + day_ms, GS_USAGE_END_FINISHED, NULL);
    }
    if (!err)
        err = gs_usage_commit(s, t0 + day_ms);
    /* The body, as Prometheus writes it: G series, each with the pod's labels. */
    size_t cap = (size_t)gpus * (1440 * 24 + 256) + 128, n = 0;
    char *body = err ? NULL : malloc(cap);
    if (!body) {
        (void)fprintf(stderr, "bench_usage ingest: %s\n", err ? gs_usage_errmsg(s) : "no memory");
        (void)gs_usage_close(s);
        return 1;
    }
    n += (size_t)snprintf(body + n, cap - n,
                          "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\","
                          "\"result\":[");
    for (long g = 0; g < gpus; g++) {
        n +=
            (size_t)snprintf(body + n, cap - n,
                             "%s{\"metric\":{\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\",\"gpu\":\"%ld\","
                             "\"UUID\":\"GPU-%036ld\",\"Hostname\":\"node-%ld\",\"namespace\":"
                             "\"ml\",\"pod\":\"pod-%ld\",\"container\":\"main\"},\"values\":[",
                             g ? "," : "", g % 8, g, g / 8, g);
        for (long k = 0; k < 1440; k++)
            n += (size_t)snprintf(body + n, cap - n, "%s[%lld,\"%ld\"]", k ? "," : "",
                                  (long long)(INGEST_T0_S + 60 * k), (g + k) % 101);
        n += (size_t)snprintf(body + n, cap - n, "]}");
    }
    n += (size_t)snprintf(body + n, cap - n, "]}}");
    double a = now_s();
    clock_t ca = clock();
    struct gs_prom_matrix *m;
    err = gs_prom_parse_range(body, n, &m, msg, sizeof(msg));
    double b = now_s();
    clock_t cb = clock();
    free(body);
    if (err) {
        (void)fprintf(stderr, "bench_usage ingest: %s\n", msg);
        (void)gs_usage_close(s);
        return 1;
    }
    struct gs_usage_ingest_stats st = {0};
    err = gs_usage_ingest_matrix(s, m, t0, t0 + day_ms, &st, msg, sizeof(msg));
    if (!err)
        err = gs_usage_commit(s, INT64_MIN);
    double c = now_s();
    clock_t cc = clock();
    uint64_t samples = m->nsamples;
    gs_prom_matrix_free(m);
    (void)gs_usage_close(s);
    if (err || st.written != samples) {
        (void)fprintf(stderr, "bench_usage ingest: %s (written %llu of %llu)\n", msg,
                      (unsigned long long)st.written, (unsigned long long)samples);
        return 1;
    }
    double cpu_parse = (double)(cb - ca) / CLOCKS_PER_SEC,
           cpu_write = (double)(cc - cb) / CLOCKS_PER_SEC;
    printf("ingest: %ld GPU series x 1440 steps = %llu samples, body %.1f MB: parsed in %.2f s "
           "(%.0f samples/s; %.0f per CPU-second), mapped and written in %.2f s (%.0f samples/s; "
           "%.0f per CPU-second), %.0f bytes stored per sample\n",
           gpus, (unsigned long long)samples, (double)n / 1e6, b - a, (double)samples / (b - a),
           (double)samples / cpu_parse, c - b, (double)samples / (c - b),
           (double)samples / cpu_write, (double)file_size(path) / (double)samples);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "write") == 0)
        return bench_write(strtol(argv[2], NULL, 10), argv[3], false, 1000) ||
               bench_write(strtol(argv[2], NULL, 10), argv[3], false, 10000) ||
               bench_write(strtol(argv[2], NULL, 10), argv[3], true, 1000);
    if (argc == 4 && strcmp(argv[1], "year") == 0)
        return bench_year(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "ingest") == 0)
        return bench_ingest(strtol(argv[2], NULL, 10), argv[3]);
    (void)fprintf(stderr, "usage: bench_usage write N DIR | bench_usage year REPLAY_DB DIR | "
                          "bench_usage ingest G DIR\n");
    return 2;
}
