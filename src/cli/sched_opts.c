/*
 * gpusched scheduler's options: the --help text and the command line read into struct
 * gs__sched_opts (sched_int.h), with every usage error reported here (exit 2). Split from
 * cmd_scheduler.c, which runs the scheduler with what is read here.
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
    "usage: gpusched scheduler [--kubeconfig FILE] [--scheduler-name NAME]\n"
    "                          [--default-queue NAME] [--policy NAME] [--dry-run]\n"
    "                          [--qps N] [--burst N] [--max-runtime-s N]\n"
    "                          [--shutdown-timeout-s N]\n"
    "                          [--leader-elect[=BOOL]] [--lease-namespace NS]\n"
    "                          [--lease-name NAME] [--metrics-addr HOST:PORT]\n"
    "                          [--pool-label KEY]\n"
    "                          [--webhook-addr HOST:PORT --webhook-cert FILE\n"
    "                           --webhook-key FILE]\n"
    "                          [--accounting FILE [--team-label KEY]]\n"
    "                          [--kai-preemptible-threshold[=N]] [--log-format text|json]\n"
    "                          [--dynamic-mig [--mig-plan-timeout-s N]]\n"
    "       gpusched scheduler --version\n"
    "\n"
    "Runs gpusched as a second Kubernetes scheduler: it places pods whose spec.schedulerName is\n"
    "gpusched (whole GPUs, milli and memory fractions, MIG instances, time-sliced slots,\n"
    "queues, quotas, PriorityClasses, gangs), binds them with their GPU choice in annotation\n"
    "gpusched.io/assigned-gpus, evicts victims through the Eviction API, and writes why each\n"
    "pod waits in its PodScheduled condition (once per change of reason).\n"
    "\n"
    "  --kubeconfig FILE     API server and credentials (default: $KUBECONFIG; else in a pod\n"
    "                        its service account; else ~/.kube/config)\n"
    "  --scheduler-name NAME the spec.schedulerName it serves (default: gpusched)\n"
    "  --default-queue NAME  queue of pods without a queue label (default: default)\n"
    "  --policy NAME         placement policy (default fgd)\n"
    "  --dry-run             decide and log (\"dry-run bind pod=NS/NAME node=N\"), bind,\n"
    "                        evict and write nothing (no status, Events or Queue status)\n"
    "  --qps N, --burst N    client rate limit (default 50 and 100)\n"
    "  --max-runtime-s N     exit 0 after N seconds (tests)\n"
    "  --shutdown-timeout-s N\n"
    "                        at exit, wait up to N s (0 to 3600, default 10) for the\n"
    "                        requests in flight (Bindings, Events) to be answered; the\n"
    "                        Events still unanswered then are dropped, counted by reason\n"
    "                        in the log (\"events dropped at exit: ...\")\n"
    "  --leader-elect[=BOOL] elect one leader among replicas on a coordination.k8s.io/v1\n"
    "                        Lease; only the leader schedules (default true, false with\n"
    "                        --dry-run); lease 15 s, renew deadline 10 s, retry 2 s\n"
    "  --lease-namespace NS  the Lease's namespace (default kube-system)\n"
    "  --lease-name NAME     the Lease's name (default gpusched)\n"
    "  --metrics-addr H:P    serve /healthz, /readyz (200 once caches synced) and /metrics\n"
    "                        (Prometheus text) on H:P, e.g. 127.0.0.1:10259; port 0 picks\n"
    "                        one and logs it (default: not served)\n"
    "  --pool-label KEY      the node label whose value names a node's pool in the pool\n"
    "                        series of /metrics (gpusched_gpus, gpusched_gpu_fragmentation;\n"
    "                        default nvidia.com/gpu.product; nodes without it: pool=\"\")\n"
    "  --webhook-addr H:P    serve the mutating admission webhook over HTTPS at\n"
    "                        https://H:P/mutate-pods (port 0 picks one and logs it): a pod\n"
    "                        of this scheduler that asks for a fraction by KAI annotation\n"
    "                        only (gpu-fraction, gpu-memory) gets gpusched.io/gpu-slice: 1\n"
    "                        added to its first container's limits and requests, so that\n"
    "                        kubelet calls the node agent's Allocate; every replica serves\n"
    "                        it, leader or not (default: not served)\n"
    "  --webhook-cert FILE   the webhook's PEM certificate (chain), e.g. tls.crt\n"
    "  --webhook-key FILE    its PEM private key, e.g. tls.key\n"
    "  --accounting FILE     record every allocation interval (bind or adoption to finish,\n"
    "                        delete or eviction, with the reason) in the SQLite usage store\n"
    "                        FILE (created; read by gpusched report usage); only the leader\n"
    "                        writes, committing at most once a second; at a restart the\n"
    "                        intervals of pods still running stay open, those of pods seen\n"
    "                        Succeeded/Failed close at their containers' finishedAt (reason\n"
    "                        finished), the others at the last commit with reason recovered\n"
    "                        (default: not recorded); with --metrics-addr also serves\n"
    "                        gpusched_usage_charged_gpu_seconds_total{queue} and\n"
    "                        gpusched_usage_charged_gpus{queue}, charged as the store does\n"
    "                        (one writer per FILE: a second one is refused, FILE-writer.lock)\n"
    "  --team-label KEY      the pod, else namespace, label naming a pod's team in the store\n"
    "                        (default gpusched.io/team; else the queue's top-level ancestor)\n"
    "  --kai-preemptible-threshold[=N]\n"
    "                        KAI-Scheduler's rule: a PriorityClass without the label\n"
    "                        gpusched.io/preemptible is preemptible only when its value\n"
    "                        is below N (default 100); without this option every such\n"
    "                        class is preemptible. The label (\"false\": never a victim)\n"
    "                        wins\n"
    "  --log-format FMT      text (default): \"TIME LEVEL MESSAGE\" lines; json: one JSON\n"
    "                        object per line with ts (UTC, ms), level, component\n"
    "                        (scheduler), msg, and pod, node and queue when the message\n"
    "                        names them (pod=NS/NAME node=N queue=Q)\n"
    "  --dynamic-mig         a MIG pod that fits no GPU's layout as it is may have a MIG\n"
    "                        GPU re-partitioned for it, destroying only free instances\n"
    "                        (docs/internals/sharing.md): the plan goes on the Node as\n"
    "                        annotation gpusched.io/mig-plan, the pod is held there\n"
    "                        (status.nominatedNodeName, its GPU reserved) and bound once\n"
    "                        the node agent's inventory (gpusched.io/gpus) shows the new\n"
    "                        layout; the agent carries plans out only with mig.dynamic on\n"
    "                        in its config (docs/agent.md). Default off\n"
    "  --mig-plan-timeout-s N\n"
    "                        how long a plan may wait for the agent (1 to 3600, default\n"
    "                        60); after it, or a failure the agent reports in\n"
    "                        gpusched.io/mig-plan-status, the plan is removed, the hold\n"
    "                        released, and the pod waits with the reason and avoids the\n"
    "                        node for as long before it is decided there again\n"
    "  --version             print the version and exit\n"
    "\n"
    "Events (events.k8s.io/v1, reportingController gpusched): Scheduled, FailedScheduling\n"
    "(for every pod that waits, note = its PodScheduled message, once per change of reason;\n"
    "none while schedulingGates hold it), Preempted (on a victim: by whom and why),\n"
    "Nominated (on a preemptor: whom it evicts); the same reason about a pod within\n"
    "10 min is one Event whose series.count grows, written at most every 10 s. Events wait\n"
    "behind Bindings, so on a loaded API server the requests that place pods go first;\n"
    "SIGTERM waits --shutdown-timeout-s for requests in flight and logs how many it leaves\n"
    "unanswered.\n"
    "A pod with preemptionPolicy Never (its own, else its class's) waits instead of\n"
    "preempting, as in kube-scheduler; it still reclaims quota its queue lent.\n"
    "Preemption takes lower-priority pods of the preemptor's queue, and of other queues\n"
    "only pods running above their queue's quota, for a pod whose queue stays within its\n"
    "own (docs/queues.md). It chooses as kube-scheduler: on each node the lower-priority\n"
    "pods that must go, those whose PodDisruptionBudget (watched) has no disruption left\n"
    "given back first; the node with the fewest such violations, then the lowest highest\n"
    "victim priority, the lowest sum of victim priorities, the fewest victims, the latest\n"
    "start of the highest-priority victims, then the first node. The preemptor gets\n"
    "status.nominatedNodeName and\n"
    "binds once its victims are gone; victims are marked DisruptionTarget, then evicted; a\n"
    "PodDisruptionBudget that refuses (429) sends the preemptor to the next node, else it\n"
    "waits \"blocked by PodDisruptionBudget NS/NAME\". A refused Binding backs off 1 s\n"
    "doubling to 10 s.\n"
    "A gang member whose Binding is refused is sent again on the GPUs held for it for 30 s;\n"
    "then its gang is released whole (members already bound are evicted, reason gang).\n"
    "Queues (scheduling.gpusched.io and KAI's scheduling.run.ai/v2) and PodGroups\n"
    "(scheduling.x-k8s.io and Volcano's scheduling.volcano.sh/v1beta1) are watched when their\n"
    "CRDs exist. A Queue edit applies at the next cycle and evicts nothing (a lowered limit\n"
    "stops new placements); a deleted Queue's pending pods wait \"queue NAME does not exist\",\n"
    "its running ones keep running; a PodGroup's minMember edit applies until its gang starts.\n"
    "Queue status (allocated, fairShare, running, pending) is written to each gpusched Queue.\n"
    "SIGTERM or SIGINT: finish the cycle in progress and its binds, release the Lease, exit 0.\n"
    "Exit: 0 stopped; 1 internal error or the Lease was lost; 2 bad usage or configuration.\n";

/* True for the options that take a value. */
static bool takes_value(const char *name)
{
    return strcmp(name, "--kubeconfig") == 0 || strcmp(name, "--scheduler-name") == 0 ||
           strcmp(name, "--default-queue") == 0 || strcmp(name, "--policy") == 0 ||
           strcmp(name, "--qps") == 0 || strcmp(name, "--burst") == 0 ||
           strcmp(name, "--max-runtime-s") == 0 || strcmp(name, "--lease-namespace") == 0 ||
           strcmp(name, "--lease-name") == 0 || strcmp(name, "--metrics-addr") == 0 ||
           strcmp(name, "--webhook-addr") == 0 || strcmp(name, "--webhook-cert") == 0 ||
           strcmp(name, "--webhook-key") == 0 || strcmp(name, "--accounting") == 0 ||
           strcmp(name, "--team-label") == 0 || strcmp(name, "--shutdown-timeout-s") == 0 ||
           strcmp(name, "--pool-label") == 0 || strcmp(name, "--log-format") == 0 ||
           strcmp(name, "--mig-plan-timeout-s") == 0;
}

int gs__sched_parse_opts(int argc, char **argv, struct gs__sched_opts *o)
{
    *o = (struct gs__sched_opts){.policy = "fgd",
                                 .lease_ns = "kube-system",
                                 .lease_name = "gpusched",
                                 .team_label = "gpusched.io/team",
                                 .pool_label = GS_SCHEDMETRICS_POOL_LABEL,
                                 .shutdown_timeout_s = 10,
                                 .mig_plan_timeout_s = 60,
                                 .elect = -1,
                                 .log_format = GS_LOG_FORMAT_TEXT};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char split[32];
        int k;
        /* --name=value as well as --name value (the Helm chart writes the first). */
        if (gs__cli_split(a, split, sizeof(split), &val) && takes_value(split))
            a = split;
        else
            val = NULL;
        if (!val && takes_value(a)) {
            if (i + 1 >= argc) {
                (void)fprintf(stderr, "gpusched scheduler: %s needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            (void)printf("gpusched scheduler %s\n", GS_VERSION);
            return 0;
        } else if (strcmp(a, "--dry-run") == 0) {
            o->dry = true;
        } else if (strcmp(a, "--leader-elect") == 0 || strcmp(a, "--leader-elect=true") == 0) {
            o->elect = 1;
        } else if (strcmp(a, "--leader-elect=false") == 0) {
            o->elect = 0;
        } else if (strcmp(a, "--lease-namespace") == 0) {
            o->lease_ns = val;
        } else if (strcmp(a, "--lease-name") == 0) {
            o->lease_name = val;
        } else if (strcmp(a, "--metrics-addr") == 0) {
            o->metrics_addr = val;
        } else if (strcmp(a, "--webhook-addr") == 0) {
            o->wh_addr = val;
        } else if (strcmp(a, "--webhook-cert") == 0) {
            o->wh_cert = val;
        } else if (strcmp(a, "--webhook-key") == 0) {
            o->wh_key = val;
        } else if (strcmp(a, "--accounting") == 0) {
            o->acct_path = val;
        } else if (strcmp(a, "--team-label") == 0) {
            o->team_label = val;
        } else if (strcmp(a, "--log-format") == 0) {
            if (gs_log_format_parse(val, &o->log_format) != GS_OK) {
                (void)fprintf(stderr,
                              "gpusched scheduler: --log-format must be text or json, not '%s'\n",
                              val);
                return 2;
            }
        } else if (strcmp(a, "--pool-label") == 0) {
            o->pool_label = val;
        } else if (val && strcmp(a, "--shutdown-timeout-s") == 0) {
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (!val[0] || *end || errno || v < 0 || v > 3600) {
                (void)fprintf(stderr,
                              "gpusched scheduler: --shutdown-timeout-s must be a whole number of "
                              "seconds from 0 to 3600, not '%s'\n",
                              val);
                return 2;
            }
            o->shutdown_timeout_s = v;
        } else if (strcmp(a, "--dynamic-mig") == 0) {
            o->dynamic_mig = true;
        } else if (val && strcmp(a, "--mig-plan-timeout-s") == 0) {
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (!val[0] || *end || errno || v < 1 || v > 3600) {
                (void)fprintf(stderr,
                              "gpusched scheduler: --mig-plan-timeout-s must be a whole number of "
                              "seconds from 1 to 3600, not '%s'\n",
                              val);
                return 2;
            }
            o->mig_plan_timeout_s = v;
            o->mig_timeout_given = true;
        } else if (strcmp(a, "--kubeconfig") == 0) {
            o->kubeconfig = val;
        } else if (strcmp(a, "--scheduler-name") == 0) {
            o->name = val;
        } else if (strcmp(a, "--default-queue") == 0) {
            o->dq = val;
        } else if (strcmp(a, "--policy") == 0) {
            o->policy = val;
        } else if (val && (strcmp(a, "--qps") == 0 || strcmp(a, "--burst") == 0 ||
                           strcmp(a, "--max-runtime-s") == 0)) {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (*end || errno || v <= 0 || v > 1e9) {
                (void)fprintf(stderr, "gpusched scheduler: %s must be a positive number\n", a);
                return 2;
            }
            if (a[2] == 'q')
                o->qps = v;
            else if (a[2] == 'b')
                o->burst = (long)v;
            else
                o->max_runtime_s = (long)v;
        } else if ((k = gs__cli_kai_threshold("scheduler", a, &o->kai_threshold)) != 0) {
            if (k != 1)
                return k;
            o->kai_preemptible = true;
        } else {
            (void)fprintf(stderr, "gpusched scheduler: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if ((o->wh_addr || o->wh_cert || o->wh_key) && !(o->wh_addr && o->wh_cert && o->wh_key)) {
        (void)fprintf(stderr, "gpusched scheduler: --webhook-addr, --webhook-cert and "
                              "--webhook-key go together\n");
        return 2;
    }
    if (o->acct_path && o->dry) {
        (void)fprintf(stderr, "gpusched scheduler: --accounting records binds, which --dry-run "
                              "does not make\n");
        return 2;
    }
    if (o->mig_timeout_given && !o->dynamic_mig) {
        (void)fprintf(stderr, "gpusched scheduler: --mig-plan-timeout-s needs --dynamic-mig\n");
        return 2;
    }
    if (!o->team_label || !o->team_label[0]) {
        (void)fprintf(stderr, "gpusched scheduler: --team-label must not be empty\n");
        return 2;
    }
    if (!o->pool_label || !o->pool_label[0]) {
        (void)fprintf(stderr, "gpusched scheduler: --pool-label must not be empty\n");
        return 2;
    }
    if (gs__cli_policy_arg("scheduler", &o->policy) != 0)
        return 2;
    return -1;
}
