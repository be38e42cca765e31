/*
 * `gpusched replay`: replays a trace over time through the multi-tenant engine (queues, fair
 * share, PriorityClasses, preemption, reclaim, optional backfill) and reports per queue.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli/acct.h"
#include "cli/cmd.h"
#include "util/file.h"
#include "gpusched/defrag.h"
#include "gpusched/err.h"
#include "gpusched/qconfig.h"
#include "gpusched/replay.h"
#include "gpusched/sched.h"
#include "gpusched/trace.h"
#include "gpusched/usage_report.h"
#include "sim/report.h"

static const char *const usage_replay =
    "usage: gpusched replay --nodes FILE --pods FILE --queues FILE [options]\n"
    "\n"
    "Replays a pod list over time: pods arrive at creation_time, wait in their queue, run for\n"
    "their observed run time (deletion_time - scheduled_time), then leave. A pod the trace never\n"
    "saw running is deleted after waiting as long as it did in the trace. Queues, quotas and\n"
    "PriorityClasses come from the queues file, which also maps trace pods to queues; its\n"
    "podGroups rules, if any, group like pods that arrive together into gangs, placed all or\n"
    "nothing (docs/queues.md, \"Pod groups\"); its sharing rules, if any, turn part of the\n"
    "trace's GPU pods into memory, MIG or time-sliced requests, drawn by --seed (\"Sharing\n"
    "rules\").\n"
    "\n"
    "options:\n"
    "  --nodes FILE        node list (sn,cpu_milli,memory_mib,gpu,model; optional\n"
    "                      gpu_mem_mib, gpu_mode)\n"
    "  --pods FILE         pod list with time columns\n"
    "  --queues FILE       queue configuration (YAML; see docs/queues.md)\n"
    "  --policy P          the one placement policy of the replay (default fgd; random, dotprod,\n"
    "                      clustering, packing, bestfit, or fgdband and fgdfill, ours);\n"
    "                      `simulate --policy all` compares the first six\n"
    "  --no-backfill       strict order within each queue and GPU model (default: EASY\n"
    "                      backfill, with the trace's observed run times as estimates)\n"
    "  --no-preemption     no priority preemption inside queues\n"
    "  --no-reclaim        no reclaim of lent quota between queues\n"
    "  --dynamic-mig[=S]   dynamic MIG: a MIG pod that fits no layout as it is may take a GPU\n"
    "                      re-partitioned for it (only free instances destroyed: the fewest,\n"
    "                      then the layout that keeps the most later requests placeable); the\n"
    "                      pod starts S seconds after (default 10, 0..86400). Default off\n"
    "  --defrag[=S]        defragmentation: the pod that has waited longest past S seconds\n"
    "                      (default 600) and fits on no node gets a migration plan (fewest\n"
    "                      pods moved, then fewest GPUs; include/gpusched/defrag.h), carried\n"
    "                      out by evictions; the moved pods restart at the plan's nodes. The\n"
    "                      replay is also run without it, and the report gives the wait saved\n"
    "                      per queue. Default off\n"
    "  --defrag-moves N    most pods one plan moves (default 2, 1..6)\n"
    "  --defrag-restart S  how long a moved pod takes to restart, seconds (default 30); it\n"
    "                      then runs its whole run time again\n"
    "  --speedup X         arrivals at creation_time / X, run times unchanged: X times the\n"
    "                      offered load (default 1; the openb trace keeps under 1% of its\n"
    "                      cluster busy as recorded)\n"
    "  --cluster-scale F   keep a fraction F of the nodes (every 1/F-th in name order, so the\n"
    "                      model mix stays) to replay on a smaller cluster (default 1);\n"
    "                      queue quotas and limits are scaled by the share of GPUs kept\n"
    "  --seed N            seed of the node tie-break order (default 42)\n"
    "  --sample-s N        period of the share and utilisation samples, seconds (default 3600;\n"
    "                      at most 200,000 samples are kept)\n"
    "  --out DIR           output directory, created if needed (default out/replay)\n"
    "  --accounting FILE   also record every allocation into the usage database FILE\n"
    "                      (SQLite, created if needed; read it with 'gpusched report usage')\n"
    "  --start-time T      place replay time 0 at T (RFC 3339 or YYYY-MM-DD, UTC) in the\n"
    "                      database (default 1970-01-01T00:00:00Z: the trace's own seconds)\n"
    "  --no-plot           do not draw share.png and wait.png (without gnuplot on PATH the\n"
    "                      CSV files are written and a warning says the plots are missing)\n"
    "  -h, --help          this text\n"
    "\n"
    "writes DIR/queues.csv, share.csv, utilisation.csv, waits.csv, share.png and wait.png,\n"
    "modes.csv (GPU-hours per sharing mode) when the node list has a gpu_mode column or the\n"
    "pod list a sharing column, and last DIR/MANIFEST, the list of this set: files an earlier\n"
    "set listed and this one does not\n"
    "write are removed (stderr says what was replaced and removed), other files are named on\n"
    "stderr and left. An interrupted run (SIGINT,\n"
    "SIGTERM, SIGHUP) removes its staging folder; files follow the umask.\n"
    "\n" GS_CLI_TRACE_FORMAT_HELP "\n"
    "exit status:\n"
    "  0  done (also when only the plots are missing)\n"
    "  1  internal error, or the results cannot be written (e.g. cannot write DIR)\n"
    "  2  bad usage or bad input (the message names the option, or file, line and field)\n";

static void print_diag(const char *what, const struct gs_diag *d, int err)
{
    char msg[600];
    if (d->msg[0])
        gs_diag_format(d, msg, sizeof(msg));
    else
        (void)snprintf(msg, sizeof(msg), "%s", gs_strerror(err));
    (void)fprintf(stderr, "gpusched replay: %s%s\n", what, msg);
}

static void fmt_s(double s, char *buf, size_t cap)
{
    if (isnan(s))
        (void)snprintf(buf, cap, "-");
    else if (s < 120)
        (void)snprintf(buf, cap, "%.0fs", s);
    else if (s < 7200)
        (void)snprintf(buf, cap, "%.1fm", s / 60);
    else
        (void)snprintf(buf, cap, "%.1fh", s / 3600);
}

/*
 * The defragmentation report: what the planner did in `r`, and per queue the mean wait of
 * `base` (the same replay without it) against `r`'s. Both have the same leaf queues in the same
 * order (one queues file).
 */
static void print_defrag(const struct gs_replay *r, const struct gs_replay *base,
                         uint64_t evictions)
{
    struct gs_replay_defrag d;
    gs_replay_defrag(r, &d);
    printf("defrag: searches %llu, plans carried out %llu (pods moved %llu, %.1f GPUs, evictions "
           "%llu), planned-for pods started at once %llu (%.1f GPUs recovered), searches without "
           "a plan %llu, trials %llu\n",
           (unsigned long long)d.searches, (unsigned long long)d.plans,
           (unsigned long long)d.pods_moved, (double)d.gpu_milli_moved / 1000.0,
           (unsigned long long)evictions, (unsigned long long)d.started,
           (double)d.gpu_milli_recovered / 1000.0, (unsigned long long)d.no_plan,
           (unsigned long long)d.evals);
    printf("  %-16s %6s %7s %10s %10s %9s\n", "queue", "moved", "planned", "wait mean", "no defrag",
           "saved");
    const struct gs_replay_queue *q, *qb;
    uint32_t nq = gs_replay_queues(r, &q), nb = gs_replay_queues(base, &qb);
    for (uint32_t i = 0; i < nq && i < nb; i++) {
        char wm[16], wb[16], sv[24];
        fmt_s(q[i].wait_mean_s, wm, sizeof(wm));
        fmt_s(qb[i].wait_mean_s, wb, sizeof(wb));
        double saved = qb[i].wait_mean_s - q[i].wait_mean_s;
        if (saved < 0) {
            char neg[16];
            fmt_s(-saved, neg, sizeof(neg));
            (void)snprintf(sv, sizeof(sv), "-%s", neg);
        } else {
            fmt_s(saved, sv, sizeof(sv));
        }
        printf("  %-16s %6u %7u %10s %10s %9s\n", q[i].name, q[i].defrag_moved, q[i].defrag_started,
               wm, wb, sv);
    }
    printf("moved: moves the queue's pods underwent; planned: its pods started right after a plan "
           "made room;\nwait mean: creation to first start, with --defrag and without it (the "
           "same replay run again);\nsaved: the difference.\n");
}

/* Progress on a terminal (issue 10: long runs are not silent): pods ended of the trace's pods
 * and the virtual day, at most five times a second, through the event tap; the taps already set
 * (accounting) are called first. */
struct progress {
    void (*tap_event)(void *, const struct gs_cluster *, const struct gs_engine *,
                      const struct gs_event *, const struct gs_trace_pod *);
    void (*tap_sample)(void *, const struct gs_cluster *, const struct gs_engine *, int64_t);
    void *tap_ctx;
    double t0_s, last_s;
    uint32_t pods, ended, calls;
    bool shown;
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress_event(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                           const struct gs_event *ev, const struct gs_trace_pod *pod)
{
    struct progress *p = ctx;
    if (p->tap_event)
        p->tap_event(p->tap_ctx, c, e, ev, pod);
    if (ev->kind == GS_EV_FINISH || ev->kind == GS_EV_DELETE)
        p->ended++;
    if (++p->calls % 256 != 0)
        return;
    double now = mono_s();
    if (now - p->last_s < 0.2 || now - p->t0_s < 1.0)
        return;
    p->last_s = now;
    (void)fprintf(stderr, "\rreplay: %u of %u pods ended (%.0f%%), day %.1f, %.0f s elapsed ",
                  p->ended, p->pods, p->pods ? 100.0 * p->ended / p->pods : 0.0,
                  (double)ev->now_ms / 86400000.0, now - p->t0_s);
    p->shown = true;
}

static void progress_sample(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                            int64_t t_ms)
{
    struct progress *p = ctx;
    if (p->tap_sample)
        p->tap_sample(p->tap_ctx, c, e, t_ms);
}

int gs_cmd_replay(int argc, char **argv)
{
    const char *nodes_path = NULL, *pods_path = NULL, *queues_path = NULL;
    const char *out_dir = "out/replay";
    struct gs_replay_config cfg = {"fgd",
                                   true,
                                   true,
                                   true,
                                   INT64_C(3600) * 1000,
                                   INT64_C(600) * 1000,
                                   42,
                                   1.0,
                                   NULL,
                                   NULL,
                                   NULL,
                                   false,
                                   0,
                                   false,
                                   INT64_C(600) * 1000,
                                   2,
                                   INT64_C(30) * 1000};
    int plot = 1;
    double scale = 1.0;
    const char *acct_path = NULL;
    int64_t start_ms = 0;
    struct gs__replay_acct *acct = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char name[32];
        int inline_v = gs__cli_split(a, name, sizeof(name), &v);
        if (inline_v)
            a = name;
        const char *flags[] = {
            "-h",           "--help",   "--backfill", "--no-backfill", "--no-preemption",
            "--no-reclaim", "--no-plot"};
        if (strcmp(a, "--defrag") == 0) {
            cfg.defrag = true;
            if (inline_v) {
                char *dend;
                errno = 0;
                double x = strtod(v, &dend);
                if (errno || *dend || *v == '\0' || !(x >= 0) || x > 86400 * 365.0) {
                    (void)fprintf(stderr,
                                  "gpusched replay: --defrag: expected a wait in seconds in "
                                  "[0, 31536000], got '%s'\n",
                                  v);
                    return 2;
                }
                cfg.defrag_wait_ms = (int64_t)llround(x * 1000);
            }
            continue;
        }
        for (size_t k = 0; inline_v && k < sizeof(flags) / sizeof(flags[0]); k++) {
            if (strcmp(a, flags[k]) == 0) {
                (void)fprintf(stderr, "gpusched replay: %s takes no value\n", a);
                return 2;
            }
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage_replay, stdout);
            return 0;
        }
        if (strcmp(a, "--backfill") == 0 || strcmp(a, "--no-backfill") == 0) {
            cfg.backfill = strcmp(a, "--backfill") == 0;
            continue;
        }
        if (strcmp(a, "--no-preemption") == 0) {
            cfg.preemption = false;
            continue;
        }
        if (strcmp(a, "--no-reclaim") == 0) {
            cfg.reclaim = false;
            continue;
        }
        if (strcmp(a, "--no-plot") == 0) {
            plot = 0;
            continue;
        }
        if (strcmp(a, "--dynamic-mig") == 0) {
            cfg.dynamic_mig = true;
            cfg.mig_repartition_ms = INT64_C(10000);
            if (inline_v) {
                char *dend;
                errno = 0;
                double x = strtod(v, &dend);
                if (errno || *dend || *v == '\0' || !(x >= 0) || x > 86400) {
                    (void)fprintf(stderr,
                                  "gpusched replay: --dynamic-mig: expected a delay in seconds "
                                  "in [0, 86400], got '%s'\n",
                                  v);
                    return 2;
                }
                cfg.mig_repartition_ms = (int64_t)llround(x * 1000);
            }
            continue;
        }
        const char *valued[] = {"--nodes",         "--pods",       "--queues",     "--policy",
                                "--seed",          "--sample-s",   "--out",        "--speedup",
                                "--cluster-scale", "--accounting", "--start-time", "--defrag-moves",
                                "--defrag-restart"};
        int known = 0;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known) {
            (void)fprintf(stderr, "gpusched replay: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (gs__cli_value("replay", a, inline_v, v, &i) != 0)
            return 2;
        char *end;
        if (strcmp(a, "--nodes") == 0) {
            nodes_path = v;
        } else if (strcmp(a, "--pods") == 0) {
            pods_path = v;
        } else if (strcmp(a, "--queues") == 0) {
            queues_path = v;
        } else if (strcmp(a, "--out") == 0) {
            out_dir = v;
        } else if (strcmp(a, "--accounting") == 0) {
            acct_path = v;
        } else if (strcmp(a, "--start-time") == 0) {
            if (gs_usage_parse_time(v, &start_ms) != GS_OK) {
                (void)fprintf(stderr,
                              "gpusched replay: --start-time: expected RFC 3339 "
                              "(2026-12-01T00:00:00Z) or a date (2026-12-01), got '%s'\n",
                              v);
                return 2;
            }
        } else if (strcmp(a, "--policy") == 0) {
            int p = gs__cli_policy_find(v);
            if (p < 0 && strcasecmp(v, "all") == 0) {
                (void)fprintf(stderr,
                              "gpusched replay: --policy: a replay runs one policy; 'all' is for "
                              "simulate (run replay once per policy to compare them)\n");
                return 2;
            }
            if (p < 0) {
                (void)fprintf(stderr,
                              "gpusched replay: --policy: unknown policy '%s' (random, dotprod, "
                              "clustering, packing, bestfit, fgd, fgdband, fgdfill)\n",
                              v);
                return 2;
            }
            cfg.policy = gs_policy_name((uint32_t)p);
        } else if (strcmp(a, "--seed") == 0) {
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || *end || *v < '0' || *v > '9') {
                (void)fprintf(stderr,
                              "gpusched replay: --seed: expected a whole number, got '%s'\n", v);
                return 2;
            }
            cfg.seed = s;
        } else if (strcmp(a, "--speedup") == 0) {
            errno = 0;
            double x = strtod(v, &end);
            if (errno || *end || !(x >= 1) || x > 1e6) {
                (void)fprintf(
                    stderr, "gpusched replay: --speedup: expected a number in [1, 1e6], got '%s'\n",
                    v);
                return 2;
            }
            cfg.arrival_speedup = x;
        } else if (strcmp(a, "--cluster-scale") == 0) {
            errno = 0;
            double x = strtod(v, &end);
            if (errno || *end || !(x > 0) || x > 1) {
                (void)fprintf(
                    stderr,
                    "gpusched replay: --cluster-scale: expected a number in (0, 1], got '%s'\n", v);
                return 2;
            }
            scale = x;
        } else if (strcmp(a, "--defrag-moves") == 0) {
            errno = 0;
            long long k = strtoll(v, &end, 10);
            if (errno || *end || k < 1 || k > GS_DEFRAG_BUDGET_MAX) {
                (void)fprintf(stderr, "gpusched replay: --defrag-moves: expected 1..%d, got '%s'\n",
                              GS_DEFRAG_BUDGET_MAX, v);
                return 2;
            }
            cfg.defrag_moves = (uint32_t)k;
        } else if (strcmp(a, "--defrag-restart") == 0) {
            errno = 0;
            double x = strtod(v, &end);
            if (errno || *end || !(x >= 0) || x > 86400) {
                (void)fprintf(stderr,
                              "gpusched replay: --defrag-restart: expected seconds in [0, 86400], "
                              "got '%s'\n",
                              v);
                return 2;
            }
            cfg.defrag_restart_ms = (int64_t)llround(x * 1000);
        } else if (strcmp(a, "--sample-s") == 0) {
            errno = 0;
            long long s = strtoll(v, &end, 10);
            if (errno || *end || s < 1 || s > 86400LL * 365) {
                (void)fprintf(stderr,
                              "gpusched replay: --sample-s: expected 1..31536000, got '%s'\n", v);
                return 2;
            }
            cfg.sample_ms = s * 1000;
        }
    }
    if (!nodes_path || !pods_path || !queues_path) {
        (void)fprintf(stderr,
                      "gpusched replay: --nodes, --pods and --queues are required (see --help)\n");
        return 2;
    }
    int rc = 2;
    struct gs_trace_nodes nodes = {0};
    struct gs_trace_pods pods = {0};
    struct gs_qconfig *qc = NULL;
    struct gs_replay *r = NULL, *base = NULL;
    struct gs_diag d;
    memset(&d, 0, sizeof(d));
    int err = gs_trace_read_nodes(nodes_path, &nodes, &d);
    if (!err)
        err = gs_trace_read_pods(pods_path, &pods, &d);
    if (!err)
        err = gs_qconfig_load(queues_path, &qc, &d);
    if (err) {
        print_diag("", &d, err);
        rc = err == GS_ENOMEM ? 1 : 2;
        goto out;
    }
    if (gs__cli_out_dir("replay", out_dir) != 0)
        goto out;
    if (pods.ignored_columns[0])
        (void)fprintf(stderr,
                      "gpusched replay: note: %s: ignoring columns that are not in the pod list "
                      "format: %s\n",
                      pods_path, pods.ignored_columns);
    if (gs_qconfig_sharing_rules(qc) > 0) {
        /* The queues file's sharing rules turn part of the trace into other request kinds. */
        uint32_t turned[3];
        (void)gs_qconfig_apply_sharing(qc, &pods, cfg.seed, turned);
        printf("sharing rules: %u pods turned into memory, %u into MIG, %u into time-sliced "
               "requests (seed %llu)\n",
               turned[0], turned[1], turned[2], (unsigned long long)cfg.seed);
    }
    if (!pods.has_times) {
        (void)fprintf(stderr,
                      "gpusched replay: %s: the pod list has no creation_time, deletion_time and "
                      "scheduled_time columns to replay\n",
                      pods_path);
        goto out;
    }
    /* A smaller cluster: every k-th node of the name order, as a view of the list read. */
    struct gs_trace_nodes view = nodes;
    struct gs_trace_node *kept = NULL;
    if (scale < 1.0) {
        kept = malloc((nodes.n + 1) * sizeof(*kept));
        uint32_t *ord = malloc((nodes.n + 1) * sizeof(*ord));
        if (!kept || !ord) {
            free(kept);
            free(ord);
            rc = 1;
            goto out;
        }
        if (gs_trace_nodes_order_by_name(nodes.v, nodes.n, ord) != GS_OK) {
            free(kept);
            free(ord);
            rc = 1;
            goto out;
        }
        uint32_t n = 0;
        double acc = 0;
        for (uint32_t i = 0; i < nodes.n; i++) {
            acc += scale;
            if (acc >= 1.0 - 1e-9) {
                acc -= 1.0;
                kept[n++] = nodes.v[ord[i]];
            }
        }
        free(ord);
        if (n == 0) {
            (void)fprintf(stderr, "gpusched replay: --cluster-scale %g keeps no node of %u\n",
                          scale, nodes.n);
            free(kept);
            rc = 2;
            goto out;
        }
        view.v = kept;
        view.n = n;
        /* Quotas and limits were written for the whole cluster: scale them by the GPUs kept. */
        uint64_t gpus_all = 0, gpus_kept = 0;
        for (uint32_t i = 0; i < nodes.n; i++)
            gpus_all += nodes.v[i].gpu_count;
        for (uint32_t i = 0; i < n; i++)
            gpus_kept += kept[i].gpu_count;
        double f = gpus_all ? (double)gpus_kept / (double)gpus_all : scale;
        uint32_t nq = gs_qconfig_queue_count(qc);
        int64_t *before = calloc(2 * (size_t)nq + 1, sizeof(*before));
        for (uint32_t i = 0; before && i < nq; i++)
            (void)gs_qconfig_queue_gpu(qc, i, &before[2 * (size_t)i], &before[2 * (size_t)i + 1]);
        gs_qconfig_scale(qc, f);
        (void)fprintf(
            stderr,
            "gpusched replay: note: --cluster-scale %g keeps %u of %u nodes, %llu of %llu "
            "GPUs; queue quotas and limits scaled by %.4f (GPUs, quota/limit):",
            scale, n, nodes.n, (unsigned long long)gpus_kept, (unsigned long long)gpus_all, f);
        for (uint32_t i = 0; before && i < nq; i++) {
            int64_t qm, lm;
            const char *qn = gs_qconfig_queue_gpu(qc, i, &qm, &lm);
            char lb[32], la[32];
            if (before[2 * (size_t)i + 1] == GS_UNLIMITED)
                (void)snprintf(lb, sizeof(lb), "unlimited");
            else
                (void)snprintf(lb, sizeof(lb), "%g", (double)before[2 * (size_t)i + 1] / 1000);
            if (lm == GS_UNLIMITED)
                (void)snprintf(la, sizeof(la), "unlimited");
            else
                (void)snprintf(la, sizeof(la), "%g", (double)lm / 1000);
            (void)fprintf(stderr, "%s %s %g/%s -> %g/%s", i ? ";" : "", qn,
                          (double)before[2 * (size_t)i] / 1000, lb, (double)qm / 1000, la);
        }
        (void)fputc('\n', stderr);
        free(before);
    }
    /* Pods no node of the (scaled) cluster can ever run wait until the trace deletes them. */
    struct gs_trace_unfit unfit;
    if (gs_trace_unfit(&view, &pods, &unfit) != GS_OK) {
        free(kept);
        rc = 1;
        goto out;
    }
    gs__cli_warn_unfit("replay", pods_path, &unfit);
    if (acct_path) {
        char amsg[600];
        err = gs__replay_acct_open(acct_path, start_ms, qc, &cfg, &acct, amsg, sizeof(amsg));
        if (err) {
            (void)fprintf(stderr, "gpusched replay: --accounting: %s\n", amsg);
            free(kept);
            rc = err == GS_ENOMEM || err == GS_EIO ? 1 : 2;
            goto out;
        }
    }
    struct progress prog = {cfg.tap_event, cfg.tap_sample, cfg.tap_ctx, mono_s(), 0, pods.n, 0, 0,
                            false};
    if (isatty(STDERR_FILENO)) {
        cfg.tap_event = progress_event;
        cfg.tap_sample = progress_sample;
        cfg.tap_ctx = &prog;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(&d, 0, sizeof(d));
    err = gs_replay_run(&view, &pods, qc, &cfg, &r, &d);
    if (prog.shown)
        (void)fprintf(stderr, "\r%*s\r", 72, "");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!err && cfg.defrag) {
        /* The same replay without the planner, for the wait it saves (no taps: its events are
         * not recorded). */
        struct gs_replay_config plain = cfg;
        plain.defrag = false;
        plain.tap_event = NULL;
        plain.tap_sample = NULL;
        plain.tap_ctx = NULL;
        err = gs_replay_run(&view, &pods, qc, &plain, &base, &d);
    }
    free(kept);
    if (err) {
        print_diag("", &d, err);
        rc = err == GS_ENOMEM ? 1 : 2;
        goto out;
    }
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    rc = 1;
    if (gs__mkdir_p(out_dir) != 0) {
        (void)fprintf(stderr, "gpusched replay: cannot write %s: %s\n", out_dir, strerror(errno));
        goto out;
    }
    char msg[512] = "";
    /* The whole set goes to a staging directory first, then into place. */
    char *stage = gs__stage_open(out_dir);
    if (!stage) {
        (void)fprintf(stderr, "gpusched replay: cannot write %s: %s\n", out_dir, strerror(errno));
        goto out;
    }
    int plot_failed = 0;
    struct gs__stage_report rep;
    if (gs_report_write_replay(r, stage, plot, msg, sizeof(msg), &plot_failed) != GS_OK) {
        (void)fprintf(stderr, "gpusched replay: cannot write results: %s\n", msg);
        gs__stage_discard(stage);
        free(stage);
        goto out;
    }
    if (plot_failed)
        (void)fprintf(stderr,
                      "gpusched replay: warning: %s; the CSV files are written, the plots are "
                      "missing (--no-plot skips them)\n",
                      msg);
    if (gs__stage_commit(stage, out_dir, msg, sizeof(msg), &rep) != 0) {
        (void)fprintf(stderr, "gpusched replay: cannot write results: %s\n", msg);
        free(stage);
        goto out;
    }
    free(stage);
    gs__cli_stage_notes("replay", out_dir, &rep);
    uint32_t npods;
    uint64_t binds, evictions, cycles;
    int64_t end_ms;
    gs_replay_totals(r, &npods, &binds, &evictions, &cycles, &end_ms);
    if (acct) {
        char amsg[600];
        uint64_t nint;
        err = gs__replay_acct_close(acct, end_ms, &nint, amsg, sizeof(amsg));
        acct = NULL;
        if (err) {
            (void)fprintf(stderr, "gpusched replay: --accounting: %s\n", amsg);
            goto out;
        }
        printf("accounting: %llu allocation intervals in %s\n", (unsigned long long)nint,
               acct_path);
    }
    uint64_t by[GS_REPLAY_EVICT_REASONS];
    gs_replay_evictions_by_reason(r, by);
    /* Every reason that happened is named, so the breakdown adds up to the total: defrag moves
     * whenever the planner is on, node loss whenever a node went away. */
    char more[96] = "";
    if (cfg.defrag || by[GS_EVICT_DEFRAG] > 0)
        (void)snprintf(more, sizeof(more), ", defrag %llu",
                       (unsigned long long)by[GS_EVICT_DEFRAG]);
    if (by[GS_EVICT_NODE_LOST] > 0) {
        size_t used = strlen(more);
        (void)snprintf(more + used, sizeof(more) - used, ", node lost %llu",
                       (unsigned long long)by[GS_EVICT_NODE_LOST]);
    }
    printf("replayed %u pod%s over %.1f days of replay time with %s%s%s%s: %llu start%s, %llu "
           "eviction%s (preemption %llu, reclaim %llu, gang %llu%s), %llu cycles, %.2f s\n",
           npods, npods == 1 ? "" : "s", (double)end_ms / 86400000.0, cfg.policy,
           cfg.preemption ? ", preemption" : "", cfg.reclaim ? ", reclaim" : "",
           cfg.backfill ? ", backfill" : "", (unsigned long long)binds, binds == 1 ? "" : "s",
           (unsigned long long)evictions, evictions == 1 ? "" : "s",
           (unsigned long long)by[GS_EVICT_PREEMPT], (unsigned long long)by[GS_EVICT_RECLAIM],
           (unsigned long long)by[GS_EVICT_GANG], more, (unsigned long long)cycles, wall);
    if (cfg.dynamic_mig) {
        uint64_t nrep = gs_replay_mig_repartitions(r);
        printf("dynamic MIG: %llu re-partition%s, %.1f s each before the pod starts\n",
               (unsigned long long)nrep, nrep == 1 ? "" : "s",
               (double)cfg.mig_repartition_ms / 1000.0);
    }
    uint32_t ngangs, gangs_started, gangs_timed_out;
    gs_replay_gangs(r, &ngangs, &gangs_started, &gangs_timed_out);
    if (ngangs > 0)
        printf("gangs: %u formed by the podGroups rules, %u started whole, %u timed out\n", ngangs,
               gangs_started, gangs_timed_out);
    printf("  %-16s %6s %7s %6s %7s %8s %8s %8s %9s %10s %7s %7s %9s\n", "queue", "pods", "started",
           "done", "pending", "wait p50", "wait p95", "wait p99", "JCT p50", "GPU-hours", "share%",
           "fair%", "evicted");
    const struct gs_replay_queue *q;
    uint32_t nq = gs_replay_queues(r, &q);
    for (uint32_t i = 0; i < nq; i++) {
        char w50[16], w95[16], w99[16], j50[16];
        fmt_s(q[i].wait_p50_s, w50, sizeof(w50));
        fmt_s(q[i].wait_p95_s, w95, sizeof(w95));
        fmt_s(q[i].wait_p99_s, w99, sizeof(w99));
        fmt_s(q[i].jct_p50_s, j50, sizeof(j50));
        char sh[16], fa[16];
        if (isnan(q[i].share_mean_pct)) {
            (void)snprintf(sh, sizeof(sh), "-");
            (void)snprintf(fa, sizeof(fa), "-");
        } else {
            (void)snprintf(sh, sizeof(sh), "%.1f", q[i].share_mean_pct);
            (void)snprintf(fa, sizeof(fa), "%.1f", q[i].fair_mean_pct);
        }
        printf("  %-16s %6u %7u %6u %7u %8s %8s %8s %9s %10.0f %7s %7s %9llu\n", q[i].name,
               q[i].pods, q[i].started, q[i].completed, q[i].pending_end, w50, w95, w99, j50,
               q[i].gpu_hours, sh, fa, (unsigned long long)q[i].evictions_suffered);
    }
    if (base)
        print_defrag(r, base, by[GS_EVICT_DEFRAG]);
    struct gs_replay_mode modes[GS_REPLAY_MODES];
    if (gs_replay_modes(r, modes)) {
        /* Only when the input names sharing, so plain runs print what they always did. */
        printf("  %-16s %6s %7s %10s %7s %9s\n", "GPU mode", "GPUs", "started", "GPU-hours",
               "alloc%", "peak%");
        uint32_t gpus = 0, started = 0;
        uint64_t milli_ms = 0;
        for (uint32_t k = 0; k < GS_REPLAY_MODES; k++) {
            char al[16];
            if (isnan(modes[k].alloc_pct))
                (void)snprintf(al, sizeof(al), "-");
            else
                (void)snprintf(al, sizeof(al), "%.1f", modes[k].alloc_pct);
            printf("  %-16s %6u %7u %10.3f %7s %9.1f\n", gs_replay_mode_name(k), modes[k].gpus,
                   modes[k].pods_started, modes[k].gpu_hours, al, modes[k].peak_fill_pct);
            gpus += modes[k].gpus;
            started += modes[k].pods_started;
            milli_ms += modes[k].gpu_milli_ms;
        }
        printf("  %-16s %6u %7u %10.3f\n", "all", gpus, started,
               (double)milli_ms / 1000.0 / 3600000.0);
        printf("GPU mode: the node list's gpu_mode; GPU-hours charged by what pods take (a 3g MIG "
               "instance of 7\nslices is 3/7 GPU, a slot of 4 replicas 1/4, a memory share its "
               "share of the GPU's memory);\nalloc%%: those GPU-hours over the mode's GPUs x the "
               "replay's length; peak%%: the fullest one GPU\nof the mode was (slots, slices, "
               "the larger of compute and memory).\n");
    }
    const struct gs_replay_sample *smp;
    uint32_t ns = gs_replay_samples(r, &smp);
    if (ns >= GS_REPLAY_SAMPLES_MAX)
        printf("note: samples stop at %u (t = %.1f h); a longer --sample-s covers the whole "
               "replay\n",
               ns, (double)smp[ns - 1].t_ms / 3600000.0);
    printf(
        "started: pods that ran at least once; done: ran to their end; the rest never ran in the "
        "trace and were\ndeleted after waiting as long as they did there. wait: creation to first "
        "start. JCT (job completion\ntime): creation to the end of the pods that ran to their "
        "end, waits and runs lost to evictions\nincluded. evicted: evictions the queue's pods "
        "suffered. share%% and fair%%: mean GPU share and fair\nshare, %% of the cluster's GPUs, "
        "over the samples (every --sample-s) taken while the queue had pods\nwaiting ('-': it "
        "never waited); not over the whole replay, as 'report usage' share%% is.\nresults in "
        "%s/\n",
        out_dir);
    rc = 0;
out:
    if (acct) {
        char amsg[600];
        (void)gs__replay_acct_close(acct, 0, NULL, amsg, sizeof(amsg));
    }
    gs_replay_free(r);
    gs_replay_free(base);
    gs_qconfig_free(qc);
    gs_trace_nodes_fini(&nodes);
    gs_trace_pods_fini(&pods);
    return rc;
}
