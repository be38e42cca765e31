/*
 * Chargeback export and retention over the accounting store (usage_report.h): the daily CSV,
 * one row per pod per UTC day, and `compact`, which turns old utilisation samples into hourly
 * means and deletes old intervals only when asked.
 */
#define _POSIX_C_SOURCE 200809L /* fmemopen */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"
#include "gpusched/usage_report.h"

#define DAY_MS INT64_C(86400000)

static int fail(sqlite3 *db, const char *what, char *msg, size_t cap)
{
    const char *path = sqlite3_db_filename(db, "main");
    (void)snprintf(msg, cap, "%s: %s: %s", path ? path : "the database", what, sqlite3_errmsg(db));
    return sqlite3_errcode(db) == SQLITE_NOMEM ? GS_ENOMEM : GS_EIO;
}

static void csv_field(FILE *f, const unsigned char *s)
{
    (void)fputc(',', f);
    if (!s)
        return;
    if (!strpbrk((const char *)s, ",\"\r\n")) {
        (void)fputs((const char *)s, f);
        return;
    }
    (void)fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            (void)fputc('"', f);
        (void)fputc(*s, f);
    }
    (void)fputc('"', f);
}

/* The pending row: one pod, one day, one node. */
struct day_row {
    bool used;
    int64_t day;
    char uid[256], node[256];
    char line[1024]; /* the identity columns after the uid, already quoted */
    double held_h, gpu_h;
};

static void flush(FILE *f, struct day_row *r, uint64_t *rows)
{
    if (!r->used)
        return;
    char day[40];
    gs_usage_format_time(r->day, day, sizeof(day));
    day[10] = '\0';
    (void)fprintf(f, "%s%s,%.6f,%.6f\n", day, r->line, r->held_h, r->gpu_h);
    r->used = false;
    (*rows)++;
}

int gs_usage_export_daily(struct gs_usage_store *s, int64_t from_ms, int64_t to_ms, FILE *f,
                          uint64_t *rows, char *msg, size_t cap)
{
    uint64_t n = 0;
    if (rows)
        *rows = 0;
    if (from_ms >= to_ms) {
        (void)snprintf(msg, cap, "empty period");
        return GS_EINVAL;
    }
    sqlite3 *db = gs_usage_db(s);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT pod_uid, namespace, name, team, queue, priority_class, node, "
                           "model, gpus_charged, start_ms, coalesce(end_ms, (SELECT t_ms FROM "
                           "heartbeat)) FROM allocation WHERE start_ms < ?2 AND coalesce(end_ms, "
                           "(SELECT t_ms FROM heartbeat)) > ?1 ORDER BY pod_uid, start_ms",
                           -1, &st, NULL) != SQLITE_OK)
        return fail(db, "reading allocations", msg, cap);
    (void)sqlite3_bind_int64(st, 1, from_ms);
    (void)sqlite3_bind_int64(st, 2, to_ms);
    (void)fputs("day,pod_uid,namespace,name,team,queue,priority_class,node,model,held_hours,"
                "charged_gpu_hours\n",
                f);
    static struct day_row cur; /* large; not re-entrant, like the CLI that calls it */
    memset(&cur, 0, sizeof(cur));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *uid = (const char *)sqlite3_column_text(st, 0);
        const char *node = (const char *)sqlite3_column_text(st, 6);
        double gpus = sqlite3_column_double(st, 8);
        int64_t a = sqlite3_column_int64(st, 9), e = sqlite3_column_int64(st, 10);
        if (a < from_ms)
            a = from_ms;
        if (e > to_ms)
            e = to_ms;
        for (int64_t d = (a >= 0 ? a / DAY_MS : -((-a + DAY_MS - 1) / DAY_MS)) * DAY_MS; d < e;
             d += DAY_MS) {
            int64_t held = gs_charge_overlap_ms(a, e, d, d + DAY_MS);
            if (held <= 0)
                continue;
            if (!cur.used || cur.day != d || strcmp(cur.uid, uid ? uid : "") != 0 ||
                strcmp(cur.node, node ? node : "") != 0) {
                flush(f, &cur, &n);
                cur.used = true;
                cur.day = d;
                cur.held_h = cur.gpu_h = 0;
                (void)snprintf(cur.uid, sizeof(cur.uid), "%s", uid ? uid : "");
                (void)snprintf(cur.node, sizeof(cur.node), "%s", node ? node : "");
                /* The identity columns, quoted as CSV, into cur.line. */
                FILE *mf = fmemopen(cur.line, sizeof(cur.line), "w");
                if (mf) {
                    for (int c = 0; c < 8; c++)
                        csv_field(mf, sqlite3_column_text(st, c));
                    (void)fclose(mf);
                }
            }
            cur.held_h += (double)held / 3600000.0;
            cur.gpu_h += gpus * (double)held / 3600000.0;
        }
    }
    flush(f, &cur, &n);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return fail(db, "reading allocations", msg, cap);
    if (rows)
        *rows = n;
    if (fflush(f) != 0 || ferror(f)) {
        (void)snprintf(msg, cap, "cannot write the export");
        return GS_EIO;
    }
    return GS_OK;
}

static int run(sqlite3 *db, const char *sql, int64_t cutoff, uint64_t *changes, char *msg,
               size_t cap)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail(db, "compacting", msg, cap);
    if (sqlite3_bind_parameter_count(st) > 0)
        (void)sqlite3_bind_int64(st, 1, cutoff);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return fail(db, "compacting", msg, cap);
    if (changes)
        *changes = (uint64_t)sqlite3_changes(db);
    return GS_OK;
}

int gs_usage_compact(struct gs_usage_store *s, int64_t cutoff_ms, bool delete_intervals,
                     struct gs_usage_compact_stats *stats, char *msg, size_t cap)
{
    struct gs_usage_compact_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    sqlite3 *db = gs_usage_db(s);
    if (sqlite3_db_readonly(db, "main") == 1) {
        (void)snprintf(msg, cap, "the store is open read-only");
        return GS_EINVAL;
    }
    if (!sqlite3_get_autocommit(db)) {
        (void)snprintf(msg, cap, "a batch is open: gs_usage_commit() it first");
        return GS_EINVAL;
    }
    int err = run(db, "BEGIN IMMEDIATE", 0, NULL, msg, cap);
    if (err)
        return err;
    /* Hourly means per pod and GPU, into a temporary table, then swapped for the raw rows. */
    if ((err = run(db,
                   "CREATE TEMP TABLE IF NOT EXISTS compacted(t_ms, pod_uid, node, gpu_index, "
                   "util_pct)",
                   0, NULL, msg, cap)) ||
        (err = run(db, "DELETE FROM compacted", 0, NULL, msg, cap)) ||
        (err = run(db,
                   "INSERT INTO compacted SELECT (t_ms / 3600000) * 3600000, pod_uid, node, "
                   "gpu_index, avg(util_pct) FROM util_sample WHERE t_ms < ?1 GROUP BY 1, 2, 3, 4",
                   cutoff_ms, &stats->samples_out, msg, cap)) ||
        (err = run(db, "DELETE FROM util_sample WHERE t_ms < ?1", cutoff_ms, &stats->samples_in,
                   msg, cap)) ||
        (err = run(db, "INSERT INTO util_sample SELECT * FROM compacted", 0, NULL, msg, cap)))
        goto fail;
    if (delete_intervals &&
        ((err = run(db,
                    "DELETE FROM allocation_gpu WHERE allocation_id IN (SELECT id FROM "
                    "allocation WHERE end_ms < ?1)",
                    cutoff_ms, NULL, msg, cap)) ||
         (err = run(db, "DELETE FROM allocation WHERE end_ms < ?1", cutoff_ms,
                    &stats->intervals_deleted, msg, cap)) ||
         (err = run(db, "DELETE FROM capacity WHERE end_ms < ?1", cutoff_ms,
                    &stats->capacity_deleted, msg, cap))))
        goto fail;
    if ((err = run(db, "COMMIT", 0, NULL, msg, cap)))
        goto fail;
    return GS_OK;
fail:
    (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    memset(stats, 0, sizeof(*stats));
    return err;
}
