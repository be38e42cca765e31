/*
 * gpusched scheduler: the core against a real Kubernetes API server, as a second scheduler
 * (pods with spec.schedulerName: gpusched).
 *
 * One thread. Informers (list, then watch) feed nodes, pods, PriorityClasses, Queues and
 * PodGroups into the shared translation (kworld.h). Once nodes, pods and PriorityClasses are
 * listed, scheduling cycles run whenever something changed (and at least once a second); the
 * decisions of a cycle are collected and sent after it: a Binding (with the GPU choice as the
 * annotation gpusched.io/assigned-gpus), an Eviction for a victim, and a PodScheduled=False
 * condition with the reason for a pod that waits. A bind the server refuses releases what the
 * pod held at once: the pod is forgotten, read again, and waits for the next cycle.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cmd.h"
#include "gpusched/err.h"
#include "gpusched/kube.h"
#include "gpusched/kworld.h"
#include "gpusched/sched.h"

static const char *const usage =
    "usage: gpusched scheduler [--kubeconfig FILE] [--scheduler-name NAME]\n"
    "                          [--default-queue NAME] [--policy NAME] [--dry-run]\n"
    "                          [--qps N] [--burst N] [--max-runtime-s N]\n"
    "\n"
    "Runs gpusched as a second Kubernetes scheduler: it places pods whose spec.schedulerName is\n"
    "gpusched (whole GPUs and milli fractions, queues, quotas, PriorityClasses, gangs), binds\n"
    "them with their GPU choice in annotation gpusched.io/assigned-gpus, evicts victims\n"
    "through the Eviction API, and writes why a pod waits in its PodScheduled condition.\n"
    "\n"
    "  --kubeconfig FILE     API server and credentials (default: $KUBECONFIG, then the\n"
    "                        in-cluster service account)\n"
    "  --scheduler-name S    the spec.schedulerName it serves (default gpusched)\n"
    "  --default-queue Q     queue of pods without a queue label (default default)\n"
    "  --policy NAME         placement policy (default fgd)\n"
    "  --dry-run             decide and log, bind and evict nothing\n"
    "  --qps N, --burst N    client rate limit (default 50 and 100)\n"
    "  --max-runtime-s N     exit 0 after N seconds (tests)\n"
    "\n"
    "SIGTERM or SIGINT: finish the cycle in progress and its binds, then exit 0.\n"
    "Exit: 0 stopped; 1 internal error; 2 bad usage or configuration.\n";

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logf_(const char *level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s\n", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                  level, msg);
}

/* A decision of the last cycle, sent after it. */
struct action {
    enum gs_kevent_kind kind;
    char *ns, *name, *node, *text;
    json_t *gpus; /* BIND: the assignment's gpus array */
};

struct sched {
    struct gs_kube_client *client;
    struct gs_kworld *world;
    struct action *acts;
    size_t nacts, capacts;
    bool dry_run;
    bool dirty;
    uint64_t binds, bind_failures, evictions, status_patches;
};

static void on_world_event(void *ctx, const struct gs_kevent *ev)
{
    struct sched *s = ctx;
    if (ev->kind == GS_KEV_FINISH || ev->kind == GS_KEV_DELETE ||
        (ev->kind == GS_KEV_BIND && ev->adopted))
        return; /* what the API server told us, or already bound there */
    if (s->nacts == s->capacts) {
        size_t cap = s->capacts ? s->capacts * 2 : 64;
        struct action *a = realloc(s->acts, cap * sizeof(*a));
        if (!a) {
            logf_("error", "out of memory queueing a decision for %s/%s", ev->ns, ev->name);
            return;
        }
        s->acts = a;
        s->capacts = cap;
    }
    struct action *a = &s->acts[s->nacts];
    memset(a, 0, sizeof(*a));
    a->kind = ev->kind;
    a->ns = strdup(ev->ns);
    a->name = strdup(ev->name);
    a->node = ev->node ? strdup(ev->node) : NULL;
    a->text = ev->reason ? strdup(ev->reason) : NULL;
    if (ev->kind == GS_KEV_BIND) {
        a->gpus = json_array();
        for (uint32_t g = 0; g < ev->n_gpus && a->gpus; g++)
            json_array_append_new(a->gpus,
                                  json_pack("{s:I,s:I}", "index", (json_int_t)ev->gpus[g].index,
                                            "milli", (json_int_t)ev->gpus[g].milli));
    }
    if (!a->ns || !a->name) {
        free(a->ns);
        free(a->name);
        free(a->node);
        free(a->text);
        json_decref(a->gpus);
        return;
    }
    s->nacts++;
}

static void action_fini(struct action *a)
{
    free(a->ns);
    free(a->name);
    free(a->node);
    free(a->text);
    json_decref(a->gpus);
}

/* Escapes nothing: namespaces and names are DNS labels and subdomains. */
static void pod_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub)
{
    (void)snprintf(buf, cap, "/api/v1/namespaces/%s/pods/%s%s%s", ns, name, sub ? "/" : "",
                   sub ? sub : "");
}

/* After a refused bind: forget the pod and read it again, so it waits as it is now. */
static void rebind_later(struct sched *s, const struct action *a)
{
    (void)gs_kworld_forget_pod(s->world, a->ns, a->name, wall_ms());
    char path[600];
    pod_path(path, sizeof(path), a->ns, a->name, NULL);
    struct gs_kube_response r;
    if (gs_kube_request(s->client, GS_KUBE_GET, path, NULL, &r) == GS_OK && r.body) {
        json_object_set_new(r.body, "kind", json_string("Pod"));
        char err[256];
        if (gs_kworld_apply(s->world, GS_KADDED, r.body, wall_ms(), err, sizeof(err)) != GS_OK)
            logf_("warn", "pod %s/%s: %s", a->ns, a->name, err);
    }
    gs_kube_response_fini(&r);
    s->dirty = true;
}

static void do_bind(struct sched *s, const struct action *a)
{
    json_t *assigned = json_pack("{s:O}", "gpus", a->gpus);
    char *ann = assigned ? json_dumps(assigned, JSON_COMPACT) : NULL;
    json_decref(assigned);
    json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:s}}", "apiVersion", "v1",
                             "kind", "Binding", "metadata", "name", a->name, "namespace", a->ns,
                             "annotations", "gpusched.io/assigned-gpus", ann ? ann : "{}", "target",
                             "apiVersion", "v1", "kind", "Node", "name", a->node);
    char path[600];
    pod_path(path, sizeof(path), a->ns, a->name, "binding");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_POST, path, body, &r) : GS_ENOMEM;
    if (err == GS_OK) {
        s->binds++;
        logf_("info", "bound pod=%s/%s node=%s gpus=%s", a->ns, a->name, a->node, ann ? ann : "");
    } else {
        s->bind_failures++;
        logf_("warn", "bind refused pod=%s/%s node=%s: HTTP %ld %s: %s", a->ns, a->name, a->node,
              r.http_status, r.reason, r.message[0] ? r.message : gs_strerror(err));
        rebind_later(s, a);
    }
    gs_kube_response_fini(&r);
    json_decref(body);
    free(ann);
}

static void do_evict(struct sched *s, const struct action *a)
{
    json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "policy/v1", "kind", "Eviction",
                             "metadata", "name", a->name, "namespace", a->ns);
    char path[600];
    pod_path(path, sizeof(path), a->ns, a->name, "eviction");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_POST, path, body, &r) : GS_ENOMEM;
    if (err == GS_OK || err == GS_ENOENT) {
        s->evictions++;
        logf_("info", "evicted pod=%s/%s reason=%s", a->ns, a->name, a->text ? a->text : "");
    } else {
        logf_("warn", "eviction refused pod=%s/%s: HTTP %ld %s: %s", a->ns, a->name, r.http_status,
              r.reason, r.message[0] ? r.message : gs_strerror(err));
    }
    gs_kube_response_fini(&r);
    json_decref(body);
}

static void do_pending(struct sched *s, const struct action *a)
{
    json_t *body =
        json_pack("{s:{s:[{s:s,s:s,s:s,s:s}]}}", "status", "conditions", "type", "PodScheduled",
                  "status", "False", "reason", "Unschedulable", "message", a->text ? a->text : "");
    char path[600];
    pod_path(path, sizeof(path), a->ns, a->name, "status");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err =
        body ? gs_kube_request(s->client, GS_KUBE_PATCH_STRATEGIC, path, body, &r) : GS_ENOMEM;
    if (err == GS_OK)
        s->status_patches++;
    else if (err != GS_ENOENT)
        logf_("warn", "status of pod=%s/%s not written: HTTP %ld %s", a->ns, a->name, r.http_status,
              r.message);
    logf_("info", "pending pod=%s/%s reason=\"%s\"", a->ns, a->name, a->text ? a->text : "");
    gs_kube_response_fini(&r);
    json_decref(body);
}

static void send_actions(struct sched *s)
{
    for (size_t i = 0; i < s->nacts; i++) {
        struct action *a = &s->acts[i];
        if (s->dry_run) {
            logf_("info", "dry-run %s pod=%s/%s node=%s %s",
                  a->kind == GS_KEV_BIND    ? "bind"
                  : a->kind == GS_KEV_EVICT ? "evict"
                                            : "pending",
                  a->ns, a->name, a->node ? a->node : "-", a->text ? a->text : "");
        } else if (a->kind == GS_KEV_BIND) {
            do_bind(s, a);
        } else if (a->kind == GS_KEV_EVICT) {
            do_evict(s, a);
        } else if (a->kind == GS_KEV_PENDING) {
            do_pending(s, a);
        }
        action_fini(a);
    }
    s->nacts = 0;
}

static void on_informer(void *ud, enum gs_kube_event_type type, json_t *obj)
{
    struct sched *s = ud;
    enum gs_kchange ch;
    switch (type) {
    case GS_KUBE_EVENT_ADDED:
        ch = GS_KADDED;
        break;
    case GS_KUBE_EVENT_MODIFIED:
        ch = GS_KMODIFIED;
        break;
    case GS_KUBE_EVENT_DELETED:
        ch = GS_KDELETED;
        break;
    default:
        return; /* RELIST and SYNCED: the objects follow as ADDED */
    }
    char err[512] = "";
    int rc = gs_kworld_apply(s->world, ch, obj, wall_ms(), err, sizeof(err));
    if (rc == GS_EINVAL)
        logf_("warn", "ignored %s: %s", json_string_value(json_object_get(obj, "kind")), err);
    else if (rc)
        logf_("error", "cannot apply a change: %s", gs_strerror(rc));
    s->dirty = true;
}

struct watched {
    const char *path;
    bool required; /* scheduling waits for its first list */
};

static const struct watched watched[] = {
    {"/api/v1/nodes", true},
    {"/api/v1/pods", true},
    {"/apis/scheduling.k8s.io/v1/priorityclasses", true},
    {"/apis/scheduling.gpusched.io/v1alpha1/queues", false},
    {"/apis/scheduling.x-k8s.io/v1alpha1/podgroups", false},
};
#define N_WATCHED (sizeof(watched) / sizeof(watched[0]))

int gs_cmd_scheduler(int argc, char **argv)
{
    const char *kubeconfig = NULL, *name = NULL, *dq = NULL, *policy = "fgd";
    double qps = 0;
    long burst = 0, max_runtime_s = 0;
    bool dry = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool takes = strcmp(a, "--kubeconfig") == 0 || strcmp(a, "--scheduler-name") == 0 ||
                     strcmp(a, "--default-queue") == 0 || strcmp(a, "--policy") == 0 ||
                     strcmp(a, "--qps") == 0 || strcmp(a, "--burst") == 0 ||
                     strcmp(a, "--max-runtime-s") == 0;
        const char *val = NULL;
        if (takes) {
            if (i + 1 >= argc) {
                (void)fprintf(stderr, "gpusched scheduler: %s needs a value\n%s", a, usage);
                return 2;
            }
            val = argv[++i];
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--dry-run") == 0) {
            dry = true;
        } else if (strcmp(a, "--kubeconfig") == 0) {
            kubeconfig = val;
        } else if (strcmp(a, "--scheduler-name") == 0) {
            name = val;
        } else if (strcmp(a, "--default-queue") == 0) {
            dq = val;
        } else if (strcmp(a, "--policy") == 0) {
            policy = val;
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
                qps = v;
            else if (a[2] == 'b')
                burst = (long)v;
            else
                max_runtime_s = (long)v;
        } else {
            (void)fprintf(stderr, "gpusched scheduler: unknown option %s\n%s", a, usage);
            return 2;
        }
    }
    if (gs_policy_find(policy) < 0) {
        (void)fprintf(stderr, "gpusched scheduler: --policy: unknown policy %s\n", policy);
        return 2;
    }
    struct gs_kube_config cfg;
    struct gs_kube_diag diag;
    int rc = kubeconfig ? gs_kube_config_load_file(kubeconfig, &cfg, &diag)
                        : gs_kube_config_load_default(&cfg, &diag);
    if (rc) {
        char msg[800];
        (void)gs_kube_diag_format(&diag, msg, sizeof(msg));
        (void)fprintf(stderr, "gpusched scheduler: %s\n", msg);
        return 2;
    }
    struct sched s;
    memset(&s, 0, sizeof(s));
    s.dry_run = dry;
    struct gs_kube_client_opts opts = {.qps = qps, .burst = (uint32_t)burst};
    rc = gs_kube_client_new(&cfg, &opts, &s.client);
    gs_kube_config_fini(&cfg);
    if (rc) {
        (void)fprintf(stderr, "gpusched scheduler: cannot make an API client: %s\n",
                      gs_strerror(rc));
        return 1;
    }
    struct gs_kworld_config wc = {.scheduler_name = name,
                                  .default_queue = dq,
                                  .policy = policy,
                                  .preemption = true,
                                  .reclaim = true,
                                  .on_event = on_world_event,
                                  .ctx = &s};
    struct gs_kube_informer *inf[N_WATCHED] = {0};
    int exit_code = 0;
    if (gs_kworld_new(&wc, &s.world) != GS_OK) {
        exit_code = 1;
        goto out;
    }
    for (size_t i = 0; i < N_WATCHED; i++) {
        struct gs_kube_informer_opts io = {.path = watched[i].path};
        if (gs_kube_informer_new(s.client, &io, on_informer, &s, &inf[i]) != GS_OK) {
            exit_code = 1;
            goto out;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    logf_("info", "gpusched scheduler %s: serving schedulerName=%s policy=%s%s", GS_VERSION,
          name ? name : GS_KWORLD_SCHEDULER, policy, dry ? " (dry run)" : "");
    int64_t t0 = mono_ms(), last_cycle = 0;
    bool started = false;
    uint64_t cycles = 0;
    while (!stop_flag) {
        if (max_runtime_s && mono_ms() - t0 >= max_runtime_s * 1000)
            break;
        if ((rc = gs_kube_client_step(s.client, 50)) != GS_OK) {
            logf_("error", "API client failed: %s", gs_strerror(rc));
            exit_code = 1;
            break;
        }
        if (!started) {
            bool ready = true;
            for (size_t i = 0; i < N_WATCHED; i++) {
                struct gs_kube_informer_stats st;
                gs_kube_informer_get_stats(inf[i], &st);
                bool tried = gs_kube_informer_synced(inf[i]) || st.failures > 0;
                if (watched[i].required ? !gs_kube_informer_synced(inf[i]) : !tried)
                    ready = false;
            }
            if (!ready)
                continue;
            started = true;
            logf_("info", "caches synced in %lld ms; scheduling", (long long)(mono_ms() - t0));
        }
        int64_t now = mono_ms();
        if (!s.dirty && now - last_cycle < 1000)
            continue;
        s.dirty = false;
        last_cycle = now;
        uint32_t changes = 0;
        char err[512] = "";
        rc = gs_kworld_cycle(s.world, wall_ms(), &changes, err, sizeof(err));
        cycles++;
        if (rc == GS_EINVAL) {
            logf_("error", "cannot schedule: %s", err);
            exit_code = 2;
            break;
        }
        if (rc) {
            logf_("error", "scheduling cycle failed: %s", gs_strerror(rc));
            exit_code = 1;
            break;
        }
        send_actions(&s);
        if (changes)
            s.dirty = true; /* settle: cycle again until nothing changes */
    }
    send_actions(&s); /* drain decisions already made */
    logf_("info", "stopping: cycles=%llu binds=%llu bind_failures=%llu evictions=%llu",
          (unsigned long long)cycles, (unsigned long long)s.binds,
          (unsigned long long)s.bind_failures, (unsigned long long)s.evictions);
out:
    for (size_t i = 0; i < s.nacts; i++)
        action_fini(&s.acts[i]);
    free(s.acts);
    gs_kube_client_free(s.client); /* frees the informers */
    gs_kworld_free(s.world);
    return exit_code;
}
