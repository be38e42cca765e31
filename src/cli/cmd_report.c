/*
 * `gpusched report`: reports over a usage accounting database (usage_report.h). One
 * subcommand today, `usage`: GPU-hours charged by capacity per team, queue, namespace, GPU
 * model, node or PriorityClass, idle capacity, preemptions, waits and quota attainment, as a
 * table, CSV, JSON or one self-contained HTML page.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"

static const char *const usage_report =
    "usage: gpusched report usage --db FILE [options]\n"
    "\n"
    "Reports GPU-hours from a usage accounting database (written by 'gpusched replay\n"
    "--accounting FILE'). A pod is charged by the share of each GPU it holds (a 25% fraction\n"
    "is 0.25 GPU, a MIG 1g instance of 7 is 1/7, a time-sliced replica of N is 1/N) for the\n"
    "part of its run inside the period; idle is capacity minus charged, so the rows and the\n"
    "idle row add up to the cluster's capacity-hours. A pod still running counts until the\n"
    "writer's last committed heartbeat.\n"
    "\n"
    "options:\n"
    "  --db FILE         the accounting database (opened read-only)\n"
    "  --from T          period start, RFC 3339 (2026-12-01T00:00:00Z) or a date, UTC\n"
    "                    (default: the first record)\n"
    "  --to T            period end, exclusive (default: the last committed heartbeat)\n"
    "  --by G            team (default), queue, namespace, model, node or priorityclass\n"
    "  --format F        table (default), csv, json or html (one self-contained page)\n"
    "  --out FILE        write there instead of standard output\n"
    "  --idle-min-h H    idle allocation: held at least H hours in the period (default 1)\n"
    "  --idle-util-pct X ... and used under X% of what it was charged (default 5)\n"
    "  -h, --help        this text\n"
    "\n"
    "Columns: charged GPU-hours; used GPU-hours from utilisation samples ('-' and a note when\n"
    "the database has none in the period); quota GPU-hours and attainment (charged / quota)\n"
    "for queues and teams; preemptions suffered (its intervals ended by eviction) and caused;\n"
    "wait from queueing to start of the intervals starting in the period.\n"
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

static int cmd_report_usage(int argc, char **argv)
{
    const char *db = NULL, *out_path = NULL;
    struct gs_usage_report_options o = {INT64_MIN, INT64_MAX, GS_USAGE_BY_TEAM, 0, 0};
    enum gs_usage_format fmt = GS_USAGE_TABLE;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char name[32];
        int inline_v = gs__cli_split(a, name, sizeof(name), &v);
        if (inline_v)
            a = name;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            if (inline_v) {
                (void)fprintf(stderr, "gpusched report usage: %s takes no value\n", a);
                return 2;
            }
            (void)fputs(usage_report, stdout);
            return 0;
        }
        const char *valued[] = {"--db",  "--from", "--to",         "--by",
                                "--format", "--out", "--idle-min-h", "--idle-util-pct"};
        int known = 0;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known) {
            (void)fprintf(stderr, "gpusched report usage: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!v) {
            (void)fprintf(stderr, "gpusched report usage: %s needs a value\n", a);
            return 2;
        }
        if (!inline_v)
            i++;
        if (strcmp(a, "--db") == 0) {
            db = v;
        } else if (strcmp(a, "--out") == 0) {
            out_path = v;
        } else if (strcmp(a, "--from") == 0 || strcmp(a, "--to") == 0) {
            if (gs_usage_parse_time(v, strcmp(a, "--from") == 0 ? &o.from_ms : &o.to_ms) !=
                GS_OK) {
                (void)fprintf(stderr,
                              "gpusched report usage: %s: expected RFC 3339 "
                              "(2026-12-01T00:00:00Z) or a date (2026-12-01), got '%s'\n",
                              a, v);
                return 2;
            }
        } else if (strcmp(a, "--by") == 0) {
            if (gs_usage_by_find(v, &o.by) != GS_OK) {
                (void)fprintf(stderr,
                              "gpusched report usage: --by: expected team, queue, namespace, "
                              "model, node or priorityclass, got '%s'\n",
                              v);
                return 2;
            }
        } else if (strcmp(a, "--format") == 0) {
            static const char *const names[] = {"table", "csv", "json", "html"};
            int found = -1;
            for (int k = 0; k < 4; k++)
                if (strcmp(v, names[k]) == 0)
                    found = k;
            if (found < 0) {
                (void)fprintf(stderr,
                              "gpusched report usage: --format: expected table, csv, json or "
                              "html, got '%s'\n",
                              v);
                return 2;
            }
            fmt = (enum gs_usage_format)found;
        } else if (strcmp(a, "--idle-min-h") == 0) {
            double h;
            if (parse_double(v, 1e-3, 1e6, &h) != 0) {
                (void)fprintf(stderr,
                              "gpusched report usage: --idle-min-h: expected hours in "
                              "[0.001, 1e6], got '%s'\n",
                              v);
                return 2;
            }
            o.idle_min_ms = (int64_t)(h * 3600000.0);
        } else {
            if (parse_double(v, 1e-6, 100, &o.idle_util_pct) != 0) {
                (void)fprintf(stderr,
                              "gpusched report usage: --idle-util-pct: expected a percentage "
                              "in (0, 100], got '%s'\n",
                              v);
                return 2;
            }
        }
    }
    if (!db) {
        (void)fprintf(stderr, "gpusched report usage: --db is required (see --help)\n");
        return 2;
    }
    char msg[600];
    struct gs_usage_store *s = NULL;
    struct gs_usage_options so = {.read_only = true};
    int err = gs_usage_open(db, &so, &s, msg, sizeof(msg));
    if (err) {
        (void)fprintf(stderr, "gpusched report usage: %s\n", msg);
        return err == GS_ENOMEM ? 1 : 2;
    }
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

int gs_cmd_report(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        (void)fputs(usage_report, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "usage") == 0)
        return cmd_report_usage(argc - 1, argv + 1);
    (void)fprintf(stderr, "gpusched report: unknown report '%s' (usage)\n", argv[0]);
    return 2;
}
