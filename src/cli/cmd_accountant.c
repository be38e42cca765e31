/*
 * gpusched accountant: the usage store's one writer beside any number of scheduler replicas.
 * It runs the scheduler's informers and world (cmd_scheduler.c, with the world observing:
 * kworld.h gs_kworld_config.observe) and records what the leader's decisions leave on the API
 * server: pods becoming bound (with their gpusched.io/assigned-gpus), finishing, deleted, and
 * evicted with the leader's mark (sched_evict.h). It never takes the Lease, never places, binds
 * or evicts, and writes nothing to the API server. This file holds its options; the loop is the
 * scheduler's (gs__sched_run()). docs/usage-accounting.md, "The accountant", says what it records.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/sched_int.h"
#include "gpusched/err.h"
#include "gpusched/log.h"
#include "gpusched/schedmetrics.h"

static const char *const usage =
    "usage: gpusched accountant --accounting FILE [--kubeconfig FILE]\n"
    "                           [--scheduler-name NAME] [--default-queue NAME]\n"
    "                           [--team-label KEY] [--metrics-addr HOST:PORT]\n"
    "                           [--pool-label KEY] [--qps N] [--burst N]\n"
    "                           [--max-runtime-s N] [--kai-preemptible-threshold[=N]]\n"
    "                           [--log-format text|json]\n"
    "       gpusched accountant --version\n"
    "\n"
    "Records the allocation intervals of the pods `gpusched scheduler` places (its\n"
    "schedulerName) in the SQLite usage store FILE, from what the leader leaves on the API\n"
    "server, so that the scheduler can run any number of replicas without --accounting while\n"
    "one accountant writes the file. It watches pods, nodes, PriorityClasses, Queues and\n"
    "namespaces, never takes the Lease, never places, binds or evicts, and writes nothing\n"
    "to the API server. An interval starts at the pod's bind as the API server shows it\n"
    "(its PodScheduled=True condition's lastTransitionTime, else status.startTime, else when\n"
    "first seen bound), with the GPUs of its gpusched.io/assigned-gpus annotation; it ends\n"
    "finished (phase Succeeded or Failed, at the containers' latest finishedAt), deleted,\n"
    "evicted-preemption, evicted-reclaim or evicted-gang (the leader's gpusched.io/evicted\n"
    "mark on the victim: at its decision time, evicted_by the preemptor's uid) or node-lost\n"
    "(its Node deleted). A restart reads the intervals left open as the scheduler's\n"
    "--accounting does. One writer per FILE (FILE-writer.lock).\n"
    "\n"
    "  --accounting FILE     the usage store (created; read by gpusched report usage)\n"
    "  --kubeconfig FILE     API server and credentials (default: $KUBECONFIG; else in a pod\n"
    "                        its service account; else ~/.kube/config)\n"
    "  --scheduler-name NAME the spec.schedulerName whose pods are recorded (default gpusched)\n"
    "  --default-queue NAME  queue of pods without a queue label, as the scheduler's\n"
    "                        (default: default)\n"
    "  --team-label KEY      the pod, else namespace, label naming a pod's team in the store\n"
    "                        (default gpusched.io/team; else the queue's top-level ancestor)\n"
    "  --metrics-addr H:P    serve /healthz, /readyz (200 once caches synced) and /metrics\n"
    "                        (gpusched_usage_charged_gpu_seconds_total{queue},\n"
    "                        gpusched_usage_charged_gpus{queue}, the queue and pool series;\n"
    "                        gpusched_leader 0) on H:P; port 0 picks one and logs it\n"
    "  --pool-label KEY      the node label naming a node's pool in the pool series\n"
    "                        (default nvidia.com/gpu.product)\n"
    "  --qps N, --burst N    client rate limit (default 50 and 100)\n"
    "  --max-runtime-s N     exit 0 after N seconds (tests)\n"
    "  --kai-preemptible-threshold[=N]\n"
    "                        as the scheduler's (PriorityClasses read the same way)\n"
    "  --log-format FMT      text (default) or json (component accountant)\n"
    "  --version             print the version and exit\n"
    "\n"
    "SIGTERM or SIGINT: commit and exit 0.\n"
    "Exit: 0 stopped; 1 internal error; 2 bad usage or configuration (a store it cannot\n"
    "open or that another writer holds).\n";

static bool takes_value(const char *name)
{
    static const char *const with_value[] = {
        "--kubeconfig", "--scheduler-name", "--default-queue", "--qps",
        "--burst",      "--max-runtime-s",  "--metrics-addr",  "--accounting",
        "--team-label", "--pool-label",     "--log-format"};
    for (size_t i = 0; i < sizeof(with_value) / sizeof(with_value[0]); i++)
        if (strcmp(name, with_value[i]) == 0)
            return true;
    return false;
}

/* Reads the command line into o (the scheduler's options, follower set). -1: run; else the
 * exit code (0 after --help or --version, 2 after a usage error, printed naming the option). */
static int parse(int argc, char **argv, struct gs__sched_opts *o)
{
    *o = (struct gs__sched_opts){.policy = "fgd",
                                 .team_label = "gpusched.io/team",
                                 .pool_label = GS_SCHEDMETRICS_POOL_LABEL,
                                 .shutdown_timeout_s = 0,
                                 .elect = 0,
                                 .log_format = GS_LOG_FORMAT_TEXT,
                                 .follower = true};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char split[32];
        int k;
        if (gs__cli_split(a, split, sizeof(split), &val) && takes_value(split))
            a = split;
        else
            val = NULL;
        if (!val && takes_value(a)) {
            if (i + 1 >= argc) {
                (void)fprintf(stderr, "gpusched accountant: %s needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            (void)printf("gpusched accountant %s\n", GS_VERSION);
            return 0;
        } else if (strcmp(a, "--kubeconfig") == 0) {
            o->kubeconfig = val;
        } else if (strcmp(a, "--scheduler-name") == 0) {
            o->name = val;
        } else if (strcmp(a, "--default-queue") == 0) {
            o->dq = val;
        } else if (strcmp(a, "--accounting") == 0) {
            o->acct_path = val;
        } else if (strcmp(a, "--team-label") == 0) {
            o->team_label = val;
        } else if (strcmp(a, "--metrics-addr") == 0) {
            o->metrics_addr = val;
        } else if (strcmp(a, "--pool-label") == 0) {
            o->pool_label = val;
        } else if (strcmp(a, "--log-format") == 0) {
            if (gs_log_format_parse(val, &o->log_format) != GS_OK) {
                (void)fprintf(stderr,
                              "gpusched accountant: --log-format must be text or json, not '%s'\n",
                              val);
                return 2;
            }
        } else if (val && (strcmp(a, "--qps") == 0 || strcmp(a, "--burst") == 0 ||
                           strcmp(a, "--max-runtime-s") == 0)) {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (!val[0] || *end || errno || v <= 0 || v > 1e9) {
                (void)fprintf(stderr, "gpusched accountant: %s must be a positive number\n", a);
                return 2;
            }
            if (a[2] == 'q')
                o->qps = v;
            else if (a[2] == 'b')
                o->burst = (long)v;
            else
                o->max_runtime_s = (long)v;
        } else if ((k = gs__cli_kai_threshold("accountant", a, &o->kai_threshold)) != 0) {
            if (k != 1)
                return k;
            o->kai_preemptible = true;
        } else {
            (void)fprintf(stderr, "gpusched accountant: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!o->acct_path || !o->acct_path[0]) {
        (void)fprintf(stderr, "gpusched accountant: --accounting FILE is required\n");
        return 2;
    }
    if (!o->team_label || !o->team_label[0] || !o->pool_label || !o->pool_label[0]) {
        (void)fprintf(stderr, "gpusched accountant: --team-label and --pool-label must not be "
                              "empty\n");
        return 2;
    }
    return -1;
}

int gs_cmd_accountant(int argc, char **argv)
{
    struct gs__sched_opts o;
    int rc = parse(argc, argv, &o);
    return rc >= 0 ? rc : gs__sched_run(&o);
}
