/*
 * `gpusched report`: over a usage accounting database (usage_report.h). `usage`: GPU-hours
 * charged by capacity per team, queue, namespace, GPU model, node, PriorityClass or what a pod
 * holds of a GPU (MIG profile, whole GPU, fraction, replica), idle capacity, preemptions, waits
 * and quota attainment, as a table, CSV, JSON or one self-contained HTML page; `export`: the
 * chargeback CSV, a row per pod per day; `compact`: retention; `ingest`: utilisation samples
 * from a Prometheus server or one scrape of a node agent (usage_ingest.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cli/cmd.h"
#include "cli/tz.h"
#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_ingest.h"
#include "gpusched/usage_report.h"

static const char *const usage_top =
    "usage: gpusched report usage --db FILE [options]      GPU-hours by team, queue, ...\n"
    "       gpusched report export --db FILE [--from T] [--to T] [--out FILE]\n"
    "                                                      chargeback CSV, a row per pod per day\n"
    "       gpusched report compact --db FILE --older-than D [--delete]\n"
    "                                                      retention\n"
    "       gpusched report ingest --db FILE --prometheus URL [--from T] [--to T]\n"
    "                                                      utilisation from Prometheus\n"
    "       gpusched report ingest --db FILE --agent URL|FILE [--at T]\n"
    "                                                      ... or one scrape of a node agent\n"
    "\n"
    "Run 'gpusched report <usage|export|compact|ingest> --help' for each one's options.\n";

static const char *const usage_ingest =
    "usage: gpusched report ingest --db FILE --prometheus URL [options]\n"
    "       gpusched report ingest --db FILE --agent URL|FILE [--at T] [--metric NAME]\n"
    "\n"
    "Reads GPU utilisation from a Prometheus server's HTTP API (/api/v1/query_range) and writes\n"
    "it to the accounting database as utilisation samples per pod and GPU, so that 'report\n"
    "usage' shows GPU-hours used beside charged and names idle allocations.\n"
    "\n"
    "Each sample is mapped to the pod whose allocation interval held that GPU at that time: the\n"
    "GPU by the series' UUID label (else its Hostname or node label and its gpu label); a\n"
    "series with namespace and pod labels counts for that pod; one without counts for the GPU's\n"
    "only holder and is skipped when several pods held the GPU then. On a shared GPU the\n"
    "exporter repeats the whole GPU's value on each pod's series (dcgm-exporter #587), so a pod\n"
    "is written the GPU's value x its charged share / the shares of all its holders then (pods\n"
    "at 0.50 and 0.25 of a GPU at 60% get 40% and 20%). MIG instance series (GPU_I_ID) are\n"
    "skipped. Samples are keyed by pod, node, GPU and time: ingesting a period again replaces\n"
    "them, never doubles them.\n"
    "\n"
    "options:\n"
    "  --db FILE         the accounting database (must exist; opened for writing)\n"
    "  --prometheus URL  the server, e.g. http://prometheus:9090 (a path prefix is kept)\n"
    "  --from T, --to T  the period, RFC 3339 or a date, UTC, to exclusive (default: the\n"
    "                    database's allocation intervals, first start to last end)\n"
    "  --step-s S        seconds between samples (default 60, at least 1); one query per\n"
    "                    1,440 steps (a day at 60 s), each committed as one transaction\n"
    "  --query Q         PromQL giving % of a whole GPU per series (default\n"
    "                    DCGM_FI_DEV_GPU_UTIL)\n"
    "  --timeout-s S     per query (default 30)\n"
    "  --agent SRC       instead of Prometheus: one scrape of a node agent's (or\n"
    "                    dcgm-exporter's) /metrics, its URL (http://node:9400/metrics) or a\n"
    "                    file holding one, read as Prometheus text; the agent's pod series\n"
    "                    carry the whole GPU's value, so they are shared as above\n"
    "  --at T            with --agent: the time of samples without a timestamp (default:\n"
    "                    now for a URL, the file's modification time for a file)\n"
    "  --metric NAME     with --agent: the series read (default DCGM_FI_DEV_GPU_UTIL)\n"
    "  -h, --help        this text\n"
    "\n"
    "Prints what it read, wrote and skipped, by reason.\n"
    "exit status: 0 done; 1 Prometheus or the agent unreachable, refusing or answering\n"
    "badly (a bad line of an agent's text is named), or the database cannot be written;\n"
    "2 bad usage or a bad database\n";

static const char *const usage_export =
    "usage: gpusched report export --db FILE [--from T] [--to T] [--out FILE]\n"
    "\n"
    "Writes the chargeback export: CSV with one row per pod per UTC day (and node) it held GPUs\n"
    "in the period, columns day, pod_uid, namespace, name, team, queue, priority_class, node,\n"
    "model, held_hours, charged_gpu_hours (charged by capacity as 'report usage' does).\n"
    "  --from T, --to T  as for 'report usage' (default: the whole database)\n"
    "  --out FILE        write there instead of standard output\n"
    "exit status: 0 done; 1 cannot write; 2 bad usage or a bad database\n";

static const char *const usage_compact =
    "usage: gpusched report compact --db FILE --older-than D [--delete]\n"
    "\n"
    "Retention. Replaces the utilisation samples older than D by hourly means per pod and GPU;\n"
    "with --delete also deletes the allocation and capacity intervals that ended before then.\n"
    "Intervals are never deleted without --delete. D counts back from the database's last\n"
    "committed heartbeat (its own clock): 90d, 36h, 30m or 45s. Run it while no writer has\n"
    "the file open: a store has one writer (FILE-writer.lock), so it is refused while a\n"
    "scheduler or replay writes the file, naming the holder's pid.\n"
    "exit status: 0 done; 1 internal error; 2 bad usage, a bad database or a live writer\n";

static const char *const usage_report =
    "usage: gpusched report usage --db FILE [options]\n"
    "\n"
    "Reports GPU-hours from a usage accounting database (written by 'gpusched replay\n"
    "--accounting FILE', 'gpusched scheduler --accounting FILE' or 'gpusched accountant').\n"
    "A pod is charged by the share of each GPU it holds (a 25% fraction is 0.25 GPU, a MIG\n"
    "1g instance of 7 is 1/7, a time-sliced replica of N is 1/N) for the part of its run\n"
    "inside the period; idle is capacity minus charged, so the rows and the idle row add up\n"
    "to the cluster's capacity-hours. A pod still running counts until the writer's last\n"
    "committed heartbeat.\n"
    "\n"
    "options:\n"
    "  --db FILE         the accounting database (opened read-only)\n"
    "  --from T          period start, RFC 3339 (2026-12-01T00:00:00Z) or a date, UTC\n"
    "                    (default: the first record)\n"
    "  --to T            period end, exclusive (default: the last committed heartbeat)\n"
    "  --by G            team (default), queue, namespace, model, node, priorityclass or\n"
    "                    profile (MIG profile, whole-gpu, fraction or time-sliced)\n"
    "  --tz Z            print times in zone Z: UTC (default), an offset such as +01:00 or\n"
    "                    -05:00, or a tz database name such as Europe/Berlin or\n"
    "                    America/New_York (each time at its own offset, DST included;\n"
    "                    needs tzdata). --from and --to stay UTC unless they carry an offset\n"
    "  --format F        table (default), csv, json, html (one self-contained page) or\n"
    "                    prometheus (gauges per group in the text exposition format)\n"
    "  --out FILE        write there instead of standard output\n"
    "  --idle-min-h H    idle allocation: held at least H hours in the period (default 1)\n"
    "  --idle-util-pct X ... and used under X% of what it was charged (default 5)\n"
    "  -h, --help        this text\n"
    "\n"
    "Columns: charged GPU-hours, and share% of the period's capacity GPU-hours (every hour\n"
    "counted; replay's share% averages samples while a queue waits); used GPU-hours from\n"
    "utilisation samples ('report ingest' writes them; '-' and a note when the database has\n"
    "none in the period); quota GPU-hours and attainment (charged / quota) for queues and\n"
    "teams; preemptions suffered (its intervals ended by eviction) and caused; wait from\n"
    "queueing to start of the intervals starting in the period.\n"
    "\n"
    "exit status:\n"
    "  0  done\n"
    "  1  internal error, or the report cannot be written\n"
    "  2  bad usage, or a database that is missing, foreign, newer, corrupt or empty\n";

static int parse_double(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi))
        return -1;
    *out = x;
    return 0;
}

/* What an option of a report subcommand reads its value as, and the type of its destination. */
enum opt_kind {
    OPT_FLAG,        /* no value; bool, set true */
    OPT_STR,         /* const char *, the value as given (borrowed from argv) */
    OPT_TIME,        /* int64_t Unix ms: RFC 3339 or a date, UTC (gs_usage_parse_time) */
    OPT_TZ,          /* struct gs__cli_tz: UTC, an offset or a zone name (gs__cli_tz_parse) */
    OPT_BY,          /* enum gs_usage_by (gs_usage_by_find) */
    OPT_FORMAT,      /* enum gs_usage_format, by name */
    OPT_HOURS_MS,    /* int64_t ms from hours in [lo, hi], truncated */
    OPT_PCT,         /* double, a number in [lo, hi] */
    OPT_SECONDS_MS,  /* int64_t ms from seconds in [lo, hi], rounded */
    OPT_DURATION_MS, /* int64_t ms from a whole number and d, h, m or s, at most 100,000 days */
};

/* One option of a report subcommand: one row of its table for parse_opts(). */
struct report_opt {
    const char *name;   /* "--db" */
    enum opt_kind kind; /* how the value is read */
    void *dst;          /* where it goes, of the type the kind names */
    double lo, hi;      /* the range of a number (OPT_HOURS_MS, OPT_PCT, OPT_SECONDS_MS) */
    const char *expect; /* what a bad value is told it should be, after "expected " */
};

#define TIME_EXPECT "RFC 3339 (2026-12-01T00:00:00Z) or a date (2026-12-01)"

/* Reads a value of kind k into dst; 0, or -1 when it is not one. */
static int read_value(enum opt_kind k, const char *v, double lo, double hi, void *dst)
{
    double x;
    switch (k) {
    case OPT_FLAG:
    case OPT_STR:
    case OPT_TZ: /* parse_opts() reads it, for the zone's own message */
        break;
    case OPT_TIME:
        return gs_usage_parse_time(v, dst) == GS_OK ? 0 : -1;
    case OPT_BY:
        return gs_usage_by_find(v, dst) == GS_OK ? 0 : -1;
    case OPT_FORMAT: {
        static const char *const names[] = {"table", "csv", "json", "html", "prometheus"};
        for (int f = 0; f < (int)(sizeof(names) / sizeof(names[0])); f++)
            if (strcmp(v, names[f]) == 0) {
                *(enum gs_usage_format *)dst = (enum gs_usage_format)f;
                return 0;
            }
        return -1;
    }
    case OPT_HOURS_MS:
        if (parse_double(v, lo, hi, &x) != 0)
            return -1;
        *(int64_t *)dst = (int64_t)(x * 3600000.0);
        return 0;
    case OPT_PCT:
        return parse_double(v, lo, hi, dst);
    case OPT_SECONDS_MS:
        if (parse_double(v, lo, hi, &x) != 0)
            return -1;
        *(int64_t *)dst = (int64_t)(x * 1000.0 + 0.5);
        return 0;
    case OPT_DURATION_MS: {
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        int64_t unit = strcmp(end, "d") == 0   ? INT64_C(86400000)
                       : strcmp(end, "h") == 0 ? INT64_C(3600000)
                       : strcmp(end, "m") == 0 ? INT64_C(60000)
                       : strcmp(end, "s") == 0 ? INT64_C(1000)
                                               : 0;
        if (errno || end == v || n < 0 || !unit || n > INT64_C(100000) * 86400)
            return -1;
        *(int64_t *)dst = (int64_t)n * unit;
        return 0;
    }
    }
    return 0;
}

/*
 * Reads the options of report subcommand `cmd` ("report usage") by its table, n rows: each as
 * `--name value` or `--name=value` (a flag takes no value), into the rows' destinations; -h or
 * --help prints `help`. Destinations of options not given keep what the caller put there.
 * @return -1 read, go on; 0 after printing help; 2 after printing why not (the option named).
 */
static int parse_opts(const char *cmd, const char *help, const struct report_opt *t, size_t n,
                      int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char name[32];
        int inline_v = gs__cli_split(a, name, sizeof(name), &v);
        if (inline_v)
            a = name;
        bool is_help = strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
        const struct report_opt *o = NULL;
        for (size_t k = 0; k < n && !o; k++)
            if (strcmp(a, t[k].name) == 0)
                o = &t[k];
        if (!o && !is_help) {
            (void)fprintf(stderr, "gpusched %s: unknown option '%s' (see --help)\n", cmd, a);
            return 2;
        }
        if ((is_help || o->kind == OPT_FLAG) && inline_v) {
            (void)fprintf(stderr, "gpusched %s: %s takes no value\n", cmd, a);
            return 2;
        }
        if (is_help) {
            (void)fputs(help, stdout);
            return 0;
        }
        if (o->kind == OPT_FLAG) {
            *(bool *)o->dst = true;
            continue;
        }
        if (gs__cli_value(cmd, a, inline_v, v, &i) != 0)
            return 2;
        if (o->kind == OPT_STR) {
            *(const char **)o->dst = v;
        } else if (o->kind == OPT_TZ) {
            char why[700];
            if (gs__cli_tz_parse(v, o->dst, why, sizeof(why)) != GS_OK) {
                (void)fprintf(stderr, "gpusched %s: %s: %s\n", cmd, a, why);
                return 2;
            }
        } else if (read_value(o->kind, v, o->lo, o->hi, o->dst) != 0) {
            (void)fprintf(stderr, "gpusched %s: %s: expected %s, got '%s'\n", cmd, a, o->expect, v);
            return 2;
        }
    }
    return -1;
}

/* Opens the store `db` for report subcommand `cmd` ("report usage") with options so; on failure
 * says why, prefixed "gpusched CMD: ". 0; 1 out of memory; 2 missing, foreign, newer or
 * corrupt. */
static int open_store(const char *cmd, const char *db, const struct gs_usage_options *so,
                      struct gs_usage_store **s)
{
    char msg[600];
    int err = gs_usage_open(db, so, s, msg, sizeof(msg));
    if (!err)
        return 0;
    (void)fprintf(stderr, "gpusched %s: %s\n", cmd, msg);
    return err == GS_ENOMEM ? 1 : 2;
}

static int cmd_report_usage(int argc, char **argv)
{
    const char *db = NULL, *out_path = NULL;
    struct gs_usage_report_options o = {INT64_MIN, INT64_MAX, GS_USAGE_BY_TEAM, 0, 0, 0};
    enum gs_usage_format fmt = GS_USAGE_TABLE;
    struct gs__cli_tz tz = {"", 0};
    const struct report_opt opts[] = {
        {"--db", OPT_STR, &db, 0, 0, NULL},
        {"--from", OPT_TIME, &o.from_ms, 0, 0, TIME_EXPECT},
        {"--to", OPT_TIME, &o.to_ms, 0, 0, TIME_EXPECT},
        {"--by", OPT_BY, &o.by, 0, 0,
         "team, queue, namespace, model, node, priorityclass or profile"},
        {"--format", OPT_FORMAT, &fmt, 0, 0, "table, csv, json, html or prometheus"},
        {"--out", OPT_STR, &out_path, 0, 0, NULL},
        {"--idle-min-h", OPT_HOURS_MS, &o.idle_min_ms, 1e-3, 1e6, "hours in [0.001, 1e6]"},
        {"--idle-util-pct", OPT_PCT, &o.idle_util_pct, 1e-6, 100, "a percentage in (0, 100]"},
        {"--tz", OPT_TZ, &tz, 0, 0, NULL},
    };
    int prc =
        parse_opts("report usage", usage_report, opts, sizeof(opts) / sizeof(opts[0]), argc, argv);
    if (prc >= 0)
        return prc;
    if (!db) {
        (void)fprintf(stderr, "gpusched report usage: --db is required (see --help)\n");
        return 2;
    }
    o.tz_offset_min = tz.offset_min;
    if (tz.name[0]) {
        o.tz_offset_at = gs__cli_tz_offset_at;
        o.tz_ctx = &tz;
    }
    struct gs_usage_store *s = NULL;
    struct gs_usage_options so = {.read_only = true};
    int err = open_store("report usage", db, &so, &s);
    if (err)
        return err;
    char msg[600];
    struct gs_usage_report *r = NULL;
    err = gs_usage_report_build(s, &o, &r, msg, sizeof(msg));
    if (err) {
        (void)fprintf(stderr, "gpusched report usage: %s\n", msg);
        (void)gs_usage_close(s);
        return err == GS_ENOMEM ? 1 : 2;
    }
    int rc = 0;
    FILE *f = stdout;
    if (out_path && !(f = fopen(out_path, "w"))) {
        (void)fprintf(stderr, "gpusched report usage: cannot write %s: %s\n", out_path,
                      strerror(errno));
        rc = 1;
    }
    if (!rc && gs_usage_report_write(r, fmt, f) != GS_OK) {
        (void)fprintf(stderr, "gpusched report usage: cannot write %s\n",
                      out_path ? out_path : "standard output");
        rc = 1;
    }
    if (f && f != stdout && fclose(f) != 0 && !rc) {
        (void)fprintf(stderr, "gpusched report usage: cannot write %s: %s\n", out_path,
                      strerror(errno));
        rc = 1;
    }
    gs_usage_report_free(r);
    (void)gs_usage_close(s);
    return rc;
}

static int cmd_report_export(int argc, char **argv)
{
    const char *db = NULL, *out = NULL;
    int64_t from_ms = INT64_MIN, to_ms = INT64_MAX;
    const struct report_opt opts[] = {
        {"--db", OPT_STR, &db, 0, 0, NULL},
        {"--from", OPT_TIME, &from_ms, 0, 0, TIME_EXPECT},
        {"--to", OPT_TIME, &to_ms, 0, 0, TIME_EXPECT},
        {"--out", OPT_STR, &out, 0, 0, NULL},
    };
    int rc =
        parse_opts("report export", usage_export, opts, sizeof(opts) / sizeof(opts[0]), argc, argv);
    if (rc >= 0)
        return rc;
    if (!db) {
        (void)fprintf(stderr, "gpusched report export: --db is required (see --help)\n");
        return 2;
    }
    struct gs_usage_store *s;
    struct gs_usage_options so = {.read_only = true};
    if ((rc = open_store("report export", db, &so, &s)) != 0)
        return rc;
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        (void)fprintf(stderr, "gpusched report export: cannot write %s: %s\n", out,
                      strerror(errno));
        (void)gs_usage_close(s);
        return 1;
    }
    uint64_t rows;
    char msg[600];
    int err = gs_usage_export_daily(s, from_ms, to_ms, f, &rows, msg, sizeof(msg));
    rc = 0;
    if (err) {
        (void)fprintf(stderr, "gpusched report export: %s\n", msg);
        rc = err == GS_EINVAL ? 2 : 1;
    }
    if (f != stdout && fclose(f) != 0 && !rc) {
        (void)fprintf(stderr, "gpusched report export: cannot write %s: %s\n", out,
                      strerror(errno));
        rc = 1;
    }
    (void)gs_usage_close(s);
    return rc;
}

static int cmd_report_compact(int argc, char **argv)
{
    const char *db = NULL;
    int64_t older_ms = -1; /* -1: not given */
    bool del = false;
    const struct report_opt opts[] = {
        {"--db", OPT_STR, &db, 0, 0, NULL},
        {"--older-than", OPT_DURATION_MS, &older_ms, 0, 0,
         "a duration such as 90d, 36h, 30m or 45s"},
        {"--delete", OPT_FLAG, &del, 0, 0, NULL},
    };
    int rc = parse_opts("report compact", usage_compact, opts, sizeof(opts) / sizeof(opts[0]), argc,
                        argv);
    if (rc >= 0)
        return rc;
    if (!db || older_ms < 0) {
        (void)fprintf(stderr,
                      "gpusched report compact: --db and --older-than are required (see --help)\n");
        return 2;
    }
    struct gs_usage_store *s;
    /* Refuse what is not already ours: compact never creates a database (it migrates one). */
    struct gs_usage_options eo = {.existing_only = true};
    if ((rc = open_store("report compact", db, &eo, &s)) != 0)
        return rc;
    char msg[600];
    sqlite3_stmt *st = NULL;
    int64_t hb = 0;
    if (sqlite3_prepare_v2(gs_usage_db(s), "SELECT t_ms FROM heartbeat", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        hb = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    struct gs_usage_compact_stats cs;
    int64_t cutoff = hb - older_ms;
    int err = gs_usage_compact(s, cutoff, del, &cs, msg, sizeof(msg));
    (void)gs_usage_close(s);
    if (err) {
        (void)fprintf(stderr, "gpusched report compact: %s\n", msg);
        return 1;
    }
    char when[40];
    gs_usage_format_time(cutoff, when, sizeof(when));
    printf("before %s: %llu utilisation samples became %llu hourly means; %llu allocation and "
           "%llu capacity intervals deleted%s\n",
           when, (unsigned long long)cs.samples_in, (unsigned long long)cs.samples_out,
           (unsigned long long)cs.intervals_deleted, (unsigned long long)cs.capacity_deleted,
           del ? "" : " (intervals are kept without --delete)");
    return 0;
}

static int cmd_report_ingest(int argc, char **argv)
{
    const char *db = NULL;
    struct gs_usage_ingest_options o = {NULL, NULL, INT64_MIN, INT64_MAX, 0, 0};
    struct gs_usage_agent_options ao = {NULL, NULL, INT64_MIN, 0};
    int64_t timeout_ms = 0;
    const struct report_opt opts[] = {
        {"--db", OPT_STR, &db, 0, 0, NULL},
        {"--prometheus", OPT_STR, &o.base_url, 0, 0, NULL},
        {"--from", OPT_TIME, &o.from_ms, 0, 0, TIME_EXPECT},
        {"--to", OPT_TIME, &o.to_ms, 0, 0, TIME_EXPECT},
        {"--step-s", OPT_SECONDS_MS, &o.step_ms, 1, 86400, "seconds in [1, 86400]"},
        {"--query", OPT_STR, &o.query, 0, 0, NULL},
        {"--timeout-s", OPT_SECONDS_MS, &timeout_ms, 0.001, 3600, "seconds in [0.001, 3600]"},
        {"--agent", OPT_STR, &ao.source, 0, 0, NULL},
        {"--at", OPT_TIME, &ao.t_ms, 0, 0, TIME_EXPECT},
        {"--metric", OPT_STR, &ao.metric, 0, 0, NULL},
    };
    int prc =
        parse_opts("report ingest", usage_ingest, opts, sizeof(opts) / sizeof(opts[0]), argc, argv);
    if (prc >= 0)
        return prc;
    o.timeout_ms = ao.timeout_ms = (long)timeout_ms;
    if (!db || !o.base_url == !ao.source) {
        (void)fprintf(stderr, "gpusched report ingest: --db and one of --prometheus or --agent "
                              "are required (see --help)\n");
        return 2;
    }
    if (!ao.source && (ao.t_ms != INT64_MIN || ao.metric)) {
        (void)fprintf(stderr, "gpusched report ingest: --at and --metric go with --agent\n");
        return 2;
    }
    if (ao.source && (o.from_ms != INT64_MIN || o.to_ms != INT64_MAX || o.step_ms || o.query)) {
        (void)fprintf(stderr, "gpusched report ingest: --from, --to, --step-s and --query go "
                              "with --prometheus\n");
        return 2;
    }
    struct gs_usage_store *s;
    /* Refuse what is not already ours: ingest never creates a database (it migrates one). It
     * only adds samples, so it runs beside the store's writer (a live scheduler). */
    struct gs_usage_options eo = {.existing_only = true, .alongside_writer = true};
    if ((prc = open_store("report ingest", db, &eo, &s)) != 0)
        return prc;
    char msg[600];
    struct gs_usage_ingest_stats st;
    int64_t from, to;
    int err = ao.source ? gs_usage_ingest_agent(s, &ao, &st, &from, msg, sizeof(msg))
                        : gs_usage_ingest_prometheus(s, &o, &st, &from, &to, msg, sizeof(msg));
    int cerr = gs_usage_close(s);
    if (err) {
        (void)fprintf(stderr, "gpusched report ingest: %s\n", msg);
        return err == GS_EINVAL || err == GS_ENOENT ? 2 : 1;
    }
    if (cerr) {
        (void)fprintf(stderr, "gpusched report ingest: %s: closing failed\n", db);
        return 1;
    }
    char a[40], b[40];
    gs_usage_format_time(from, a, sizeof(a));
    if (ao.source) {
        printf("%s at %s: %llu samples of %llu series; %llu samples written\n", ao.source, a,
               (unsigned long long)st.samples, (unsigned long long)st.series,
               (unsigned long long)st.written);
    } else {
        gs_usage_format_time(to, b, sizeof(b));
        printf("%s to %s: %llu samples of %llu series in %llu %s; %llu samples written\n", a, b,
               (unsigned long long)st.samples, (unsigned long long)st.series,
               (unsigned long long)st.queries, st.queries == 1 ? "query" : "queries",
               (unsigned long long)st.written);
    }
    const struct {
        uint64_t n;
        const char *why;
    } skip[] = {
        {st.skipped_shared, "on shared GPUs without pod labels"},
        {st.skipped_other_pod, "of pods not holding that GPU then"},
        {st.skipped_no_holder, "on GPUs no pod held then"},
        {st.skipped_no_gpu, "without UUID or node and gpu labels"},
        {st.skipped_mig, "of MIG instances (GPU_I_ID)"},
        {st.skipped_value, "NaN or outside 0..100"},
    };
    for (size_t k = 0; k < sizeof(skip) / sizeof(skip[0]); k++)
        if (skip[k].n)
            printf("%llu samples %s skipped\n", (unsigned long long)skip[k].n, skip[k].why);
    return 0;
}

int gs_cmd_report(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        (void)fputs(usage_top, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "usage") == 0)
        return cmd_report_usage(argc - 1, argv + 1);
    if (strcmp(argv[0], "export") == 0)
        return cmd_report_export(argc - 1, argv + 1);
    if (strcmp(argv[0], "compact") == 0)
        return cmd_report_compact(argc - 1, argv + 1);
    if (strcmp(argv[0], "ingest") == 0)
        return cmd_report_ingest(argc - 1, argv + 1);
    (void)fprintf(stderr, "gpusched report: unknown report '%s' (usage, export, compact, ingest)\n",
                  argv[0]);
    return 2;
}
