/*
 * `gpusched replay --accounting FILE`: the glue between the replay's taps and the usage
 * recorder (cli/acct.h). Pod uids are "replay-<start s>-<pod handle>", so replays recorded into
 * one file at different start times never share a uid.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cli/acct.h"
#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"

struct gs__replay_acct {
    struct gs_usage_store *store;
    struct gs_usage_recorder *rec;
    const struct gs_qconfig *qc;
};

static void tap_event(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                      const struct gs_event *ev, const struct gs_trace_pod *pod)
{
    struct gs__replay_acct *a = ctx;
    struct gs_usage_pod_names names = {NULL, NULL};
    struct gs_qconfig_assignment as;
    memset(&as, 0, sizeof(as));
    if (pod && gs_qconfig_assign(a->qc, pod, &as) == GS_OK)
        names.priority_class = as.priority_class;
    gs_usage_recorder_on_event(a->rec, c, e, ev, &names);
}

static void tap_sample(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                       int64_t t_ms)
{
    struct gs__replay_acct *a = ctx;
    (void)gs_usage_recorder_sync(a->rec, c, e, t_ms); /* an error is kept by the recorder */
}

int gs__replay_acct_open(const char *path, int64_t start_ms, const struct gs_qconfig *qc,
                         struct gs_replay_config *cfg, struct gs__replay_acct **out, char *msg,
                         size_t cap)
{
    *out = NULL;
    struct gs__replay_acct *a = calloc(1, sizeof(*a));
    if (!a)
        return GS_ENOMEM;
    a->qc = qc;
    /* A replay is rerun rather than recovered: batches by count only, not by (virtual) time,
     * and commits that survive a crash of the process but need not survive a power cut. */
    struct gs_usage_options opt = {
        .batch_events = 10000, .batch_ms = INT64_MAX / 4, .relaxed_sync = true};
    int err = gs_usage_open(path, &opt, &a->store, msg, cap);
    if (err) {
        free(a);
        return err;
    }
    char prefix[48];
    (void)snprintf(prefix, sizeof(prefix), "replay-%" PRId64 "-", start_ms / 1000);
    /* A replay from the same start writes the same pod uids: recording it again would fail on
     * the first of them, with part of the second run (its capacity) already committed. Refuse
     * before anything is written. */
    int64_t held = 0;
    if ((err = gs_usage_count_uid_prefix(a->store, prefix, &held)) != GS_OK || held > 0) {
        if (!err) {
            char when[40];
            gs_usage_format_time_tz(start_ms, 0, when, sizeof(when));
            (void)snprintf(msg, cap,
                           "%s already holds a recording of a replay from %s (%lld intervals); a "
                           "replay is recorded once: write to a new file, or give another "
                           "--start-time",
                           path, when, (long long)held);
            err = GS_EEXIST;
        } else {
            (void)snprintf(msg, cap, "%s", gs_usage_errmsg(a->store));
        }
        (void)gs_usage_close(a->store);
        free(a);
        return err;
    }
    struct gs_usage_recorder_config rc = {a->store, start_ms, prefix};
    if ((err = gs_usage_recorder_new(&rc, &a->rec)) != GS_OK) {
        (void)gs_usage_close(a->store);
        free(a);
        (void)snprintf(msg, cap, "%s", gs_strerror(err));
        return err;
    }
    cfg->tap_event = tap_event;
    cfg->tap_sample = tap_sample;
    cfg->tap_ctx = a;
    *out = a;
    return GS_OK;
}

int gs__replay_acct_close(struct gs__replay_acct *a, int64_t end_ms, uint64_t *intervals, char *msg,
                          size_t cap)
{
    if (intervals)
        *intervals = 0;
    if (!a)
        return GS_OK;
    int err = gs_usage_recorder_error(a->rec);
    if (!err)
        err = gs_usage_recorder_finish(a->rec, end_ms);
    if (err)
        (void)snprintf(msg, cap, "%s",
                       gs_usage_errmsg(a->store)[0] ? gs_usage_errmsg(a->store) : gs_strerror(err));
    if (!err && intervals) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(gs_usage_db(a->store), "SELECT count(*) FROM allocation", -1, &st,
                               NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            *intervals = (uint64_t)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    gs_usage_recorder_free(a->rec);
    int cerr = gs_usage_close(a->store);
    if (!err && cerr) {
        err = cerr;
        (void)snprintf(msg, cap, "closing the store failed");
    }
    free(a);
    return err;
}
