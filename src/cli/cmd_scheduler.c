/*
 * gpusched scheduler: the core against a real Kubernetes API server, as a second scheduler
 * (pods with spec.schedulerName: gpusched).
 *
 * One scheduling thread. Informers (list, then watch) feed nodes, pods, PriorityClasses, Queues and
 * PodGroups into the shared translation (kworld.h). Once nodes, pods and PriorityClasses are
 * listed, scheduling cycles run whenever something changed (and at least once a second); the
 * decisions of a cycle are collected and sent after it: a Binding (with the GPU choice as the
 * annotation gpusched.io/assigned-gpus), an Eviction for a victim, and a PodScheduled=False
 * condition with the reason for a pod that waits. A bind the server refuses releases what the
 * pod held at once: the pod is forgotten, read again, and waits for the next cycle.
 *
 * Replicas elect a leader on a Lease (gs_kube_leader_*, kube.h) with a client of their own,
 * whose short request timeout keeps a hung renewal from outliving the lease. Every replica runs
 * its informers; only the leader runs cycles (a standby's engine would otherwise believe in
 * binds nobody sent) and sends their decisions, each after checking the renew deadline has not
 * passed. A leader that loses the Lease stops at once and exits 1, as kube-scheduler does; on
 * SIGTERM it releases the Lease so a standby takes over at its next attempt. Each decision is
 * also told as an events.k8s.io/v1 Event (Scheduled, FailedScheduling, Preempted), at most one
 * per pod and reason every 10 s. With --metrics-addr, libmicrohttpd's own thread serves
 * /healthz, /readyz and /metrics from counters the loop records under a mutex (schedmetrics.h);
 * it is the only other thread.
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
#include <unistd.h>

#include "cli/cmd.h"
#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/kube.h"
#include "gpusched/log.h"
#include "gpusched/kworld.h"
#include "gpusched/sched.h"
#include "gpusched/schedmetrics.h"

static const char *const usage =
    "usage: gpusched scheduler [--kubeconfig FILE] [--scheduler-name NAME]\n"
    "                          [--default-queue NAME] [--policy NAME] [--dry-run]\n"
    "                          [--qps N] [--burst N] [--max-runtime-s N]\n"
    "                          [--leader-elect[=BOOL]] [--lease-namespace NS]\n"
    "                          [--lease-name NAME] [--metrics-addr HOST:PORT]\n"
    "\n"
    "Runs gpusched as a second Kubernetes scheduler: it places pods whose spec.schedulerName is\n"
    "gpusched (whole GPUs and milli fractions, queues, quotas, PriorityClasses, gangs), binds\n"
    "them with their GPU choice in annotation gpusched.io/assigned-gpus, evicts victims\n"
    "through the Eviction API, and writes why a pod waits in its PodScheduled condition.\n"
    "\n"
    "  --kubeconfig FILE     API server and credentials (default: $KUBECONFIG, then the\n"
    "                        in-cluster service account)\n"
    "  --scheduler-name NAME the spec.schedulerName it serves (default: gpusched)\n"
    "  --default-queue NAME  queue of pods without a queue label (default: default)\n"
    "  --policy NAME         placement policy (default fgd)\n"
    "  --dry-run             decide and log, bind and evict nothing\n"
    "  --qps N, --burst N    client rate limit (default 50 and 100)\n"
    "  --max-runtime-s N     exit 0 after N seconds (tests)\n"
    "  --leader-elect[=BOOL] elect one leader among replicas on a coordination.k8s.io/v1\n"
    "                        Lease; only the leader schedules (default true, false with\n"
    "                        --dry-run); lease 15 s, renew deadline 10 s, retry 2 s\n"
    "  --lease-namespace NS  the Lease's namespace (default kube-system)\n"
    "  --lease-name NAME     the Lease's name (default gpusched)\n"
    "  --metrics-addr H:P    serve /healthz, /readyz (200 once caches synced) and /metrics\n"
    "                        (Prometheus text) on H:P, e.g. 127.0.0.1:10259; port 0 picks\n"
    "                        one and logs it (default: not served)\n"
    "\n"
    "Events (events.k8s.io/v1, reportingController gpusched): Scheduled, FailedScheduling,\n"
    "Preempted; at most one per pod and reason every 10 s.\n"
    "SIGTERM or SIGINT: finish the cycle in progress and its binds, release the Lease, exit 0.\n"
    "Exit: 0 stopped; 1 internal error or the Lease was lost; 2 bad usage or configuration.\n";

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

static int64_t mono_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(const char *level, const char *fmt, ...) GS_PRINTF(2, 3);

static void logf_(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gs_vlog(gs_log_stderr_stamped, (void *)level, fmt, ap);
    va_end(ap);
}

/* A decision of the last cycle, sent after it. */
struct action {
    enum gs_kevent_kind kind;
    char *ns, *name, *uid, *node, *text, *by;
    json_t *gpus; /* BIND: the assignment's gpus array */
    bool sent;    /* BIND: sent with the cycle's batch (send_binds) */
};

/* Slots of the event rate limiter: a pod's reason hashed to one slot; a collision only means an
 * event sent that could have been skipped, or skipped within 10 s of another pod's. */
#define EVENT_SLOTS 4096
#define EVENT_REPEAT_MS 10000

struct event_slot {
    uint64_t key;    /* hash of ns/name/reason; 0 = empty */
    int64_t last_ms; /* when it was last sent (monotonic) */
};

/* Requests collected to go out concurrently (gs_kube_request_many): their paths and bodies. */
struct outbox {
    struct gs_kube_call *calls;
    char **paths;
    size_t n, cap;
};

/* Binds and Events in flight at once: enough to hide the API server's latency, well under its
 * default --max-requests-inflight of 400. */
#define BATCH_IN_FLIGHT 64

struct sched {
    struct gs_kube_client *client;
    struct gs_kworld *world;
    struct gs_kube_leader *leader; /* NULL without leader election */
    const char *identity;          /* holderIdentity and reportingInstance */
    struct action *acts;
    size_t nacts, capacts;
    bool dry_run;
    bool dirty;
    bool lost; /* the Lease was lost: send nothing more */
    uint64_t binds, bind_failures, evictions, status_patches, events, events_skipped;
    struct event_slot *event_slots;  /* EVENT_SLOTS entries */
    struct outbox *outbox;           /* non-NULL while Events are collected for one batch */
    struct gs_schedmetrics *metrics; /* NULL when not served; its calls take NULL */
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
    a->uid = ev->uid ? strdup(ev->uid) : NULL;
    a->node = ev->node ? strdup(ev->node) : NULL;
    a->text = ev->reason ? strdup(ev->reason) : NULL;
    a->by = ev->by ? strdup(ev->by) : NULL;
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
        free(a->uid);
        free(a->node);
        free(a->text);
        free(a->by);
        json_decref(a->gpus);
        return;
    }
    s->nacts++;
}

static void action_fini(struct action *a)
{
    free(a->ns);
    free(a->name);
    free(a->uid);
    free(a->node);
    free(a->text);
    free(a->by);
    json_decref(a->gpus);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* a separator, so "a" "bc" differs from "ab" "c" */
}

/* True when an event of this reason for this pod may go out now (and records that it does). */
static bool event_due(struct sched *s, const struct action *a, const char *reason)
{
    if (!s->event_slots)
        return true;
    uint64_t k = fnv1a(fnv1a(fnv1a(14695981039346656037ULL, a->ns), a->name), reason);
    if (k == 0)
        k = 1;
    struct event_slot *e = &s->event_slots[k % EVENT_SLOTS];
    int64_t now = mono_ms();
    if (e->key == k && now - e->last_ms < EVENT_REPEAT_MS) {
        s->events_skipped++;
        return false;
    }
    e->key = k;
    e->last_ms = now;
    return true;
}

/*
 * Posts an events.k8s.io/v1 Event about the action's pod. Failures are logged and otherwise
 * ignored: an Event is for people, and the decision it tells has been made.
 */
/* Adds a request to the outbox; takes `body` on success. @return GS_OK or GS_ENOMEM. */
static int outbox_add(struct outbox *o, enum gs_kube_method method, const char *path,
                      json_t *body)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct gs_kube_call *c = realloc(o->calls, cap * sizeof(*c));
        if (!c)
            return GS_ENOMEM;
        o->calls = c;
        char **p = realloc(o->paths, cap * sizeof(*p));
        if (!p)
            return GS_ENOMEM;
        o->paths = p;
        o->cap = cap;
    }
    char *pc = strdup(path);
    if (!pc)
        return GS_ENOMEM;
    memset(&o->calls[o->n], 0, sizeof(o->calls[o->n]));
    o->paths[o->n] = pc;
    o->calls[o->n].method = method;
    o->calls[o->n].path = pc;
    o->calls[o->n].body = body;
    o->n++;
    return GS_OK;
}

/* Releases every call of the outbox (bodies, paths, responses) and empties it. */
static void outbox_clear(struct outbox *o)
{
    for (size_t i = 0; i < o->n; i++) {
        json_decref((json_t *)o->calls[i].body);
        free(o->paths[i]);
        gs_kube_response_fini(&o->calls[i].resp);
    }
    o->n = 0;
}

/* Sends the outbox's Events concurrently, counts and logs them, and empties it. */
static void outbox_send_events(struct sched *s, struct outbox *o)
{
    if (o->n && gs_kube_request_many(s->client, o->calls, o->n, BATCH_IN_FLIGHT) != GS_OK)
        logf_("warn", "%zu events: the batch did not finish", o->n);
    for (size_t i = 0; i < o->n; i++) {
        const struct gs_kube_call *c = &o->calls[i];
        if (c->rc == GS_OK)
            s->events++;
        else
            logf_("warn", "event %s not written: HTTP %ld %s: %s", c->path, c->resp.http_status,
                  c->resp.reason, c->resp.message[0] ? c->resp.message : gs_strerror(c->rc));
    }
    outbox_clear(o);
}

static void post_event(struct sched *s, const struct action *a, const char *type,
                       const char *reason, const char *verb, const char *note)
{
    if (!event_due(s, a, reason))
        return;
    char now[80], gen[216], path[400], notebuf[1024];
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)snprintf(now, sizeof(now), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
    /* client-go's name: the pod's, a dot, the time in hex ns (generateName may not end in a
     * dot); within a name's 253 characters. */
    (void)snprintf(gen, sizeof(gen), "%.200s.%llx", a->name,
                   (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    (void)snprintf(notebuf, sizeof(notebuf), "%s", note); /* the API's limit is 1 kB */
    (void)snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events", a->ns);
    json_t *body = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s}}", "apiVersion",
        "events.k8s.io/v1", "kind", "Event", "metadata", "name", gen, "namespace", a->ns,
        "eventTime", now, "reportingController", "gpusched", "reportingInstance", s->identity,
        "action", verb, "reason", reason, "type", type, "note", notebuf, "regarding", "apiVersion",
        "v1", "kind", "Pod", "namespace", a->ns, "name", a->name, "uid", a->uid ? a->uid : "");
    if (body && s->outbox && outbox_add(s->outbox, GS_KUBE_POST, path, body) == GS_OK)
        return; /* sent with the batch; outbox_send() counts it */
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_POST, path, body, &r) : GS_ENOMEM;
    if (err == GS_OK)
        s->events++;
    else
        logf_("warn", "event %s for pod=%s/%s not written: HTTP %ld %s: %s", reason, a->ns, a->name,
              r.http_status, r.reason, r.message[0] ? r.message : gs_strerror(err));
    gs_kube_response_fini(&r);
    json_decref(body);
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

/* The Binding of a BIND action, with the GPU choice as annotation gpusched.io/assigned-gpus
 * (its text in *ann, owned by the caller). NULL when out of memory. */
static json_t *bind_body(const struct action *a, char **ann)
{
    json_t *assigned = json_pack("{s:O}", "gpus", a->gpus);
    *ann = assigned ? json_dumps(assigned, JSON_COMPACT) : NULL;
    json_decref(assigned);
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:s}}", "apiVersion", "v1", "kind",
                     "Binding", "metadata", "name", a->name, "namespace", a->ns, "annotations",
                     "gpusched.io/assigned-gpus", *ann ? *ann : "{}", "target", "apiVersion", "v1",
                     "kind", "Node", "name", a->node);
}

/* What follows a bind's answer: counters, the log line and the Scheduled Event, or, when
 * refused, releasing the pod's GPUs at once (rebind_later). */
static void bind_done(struct sched *s, const struct action *a, int err,
                      const struct gs_kube_response *rp, const char *ann)
{
    const struct gs_kube_response r = *rp;
    if (err == GS_OK) {
        s->binds++;
        gs_schedmetrics_bind(s->metrics, true);
        gs_schedmetrics_attempt(s->metrics, GS_SCHED_SCHEDULED);
        logf_("info", "bound pod=%s/%s node=%s gpus=%s", a->ns, a->name, a->node, ann ? ann : "");
        char gl[GS_NODE_GPUS_MAX * 12 + 16] = "", note[900];
        size_t n = 0;
        for (size_t g = 0; g < json_array_size(a->gpus) && n < sizeof(gl) - 16; g++) {
            json_t *e = json_array_get(a->gpus, g);
            json_int_t idx = json_integer_value(json_object_get(e, "index"));
            json_int_t milli = json_integer_value(json_object_get(e, "milli"));
            int w = milli == 1000
                        ? snprintf(gl + n, sizeof(gl) - n, "%s%lld", n ? "," : "", (long long)idx)
                        : snprintf(gl + n, sizeof(gl) - n, "%s%lld:%lldm", n ? "," : "",
                                   (long long)idx, (long long)milli);
            if (w < 0)
                break;
            n += (size_t)w;
        }
        (void)snprintf(note, sizeof(note), "Successfully assigned %s/%s to %s%s%s%s", a->ns,
                       a->name, a->node, n ? " (GPUs " : "", gl, n ? ")" : "");
        post_event(s, a, "Normal", "Scheduled", "Binding", note);
    } else {
        s->bind_failures++;
        gs_schedmetrics_bind(s->metrics, false);
        gs_schedmetrics_attempt(s->metrics, GS_SCHED_ERROR);
        logf_("warn", "bind refused pod=%s/%s node=%s: HTTP %ld %s: %s", a->ns, a->name, a->node,
              r.http_status, r.reason, r.message[0] ? r.message : gs_strerror(err));
        rebind_later(s, a);
    }
}

/*
 * Sends the cycle's binds concurrently (at most BATCH_IN_FLIGHT at once), then their Events
 * the same way. The core has already charged every pod's GPUs, so no GPU is handed out twice
 * while binds are in flight; a refused bind releases its pod's GPUs before the next cycle.
 */
static void send_binds(struct sched *s)
{
    struct outbox binds = {0}, events = {0};
    char **anns = calloc(s->nacts ? s->nacts : 1, sizeof(*anns));
    size_t *of = calloc(s->nacts ? s->nacts : 1, sizeof(*of)); /* call -> action */
    if (!anns || !of) {
        free(anns);
        free(of);
        return; /* send_actions sends them one by one */
    }
    for (size_t i = 0; i < s->nacts; i++) {
        struct action *a = &s->acts[i];
        if (a->kind != GS_KEV_BIND)
            continue;
        char path[600];
        pod_path(path, sizeof(path), a->ns, a->name, "binding");
        char *ann = NULL;
        json_t *body = bind_body(a, &ann);
        if (!body || outbox_add(&binds, GS_KUBE_POST, path, body) != GS_OK) {
            json_decref(body);
            free(ann);
            continue; /* left for send_actions, one by one */
        }
        anns[binds.n - 1] = ann;
        of[binds.n - 1] = i;
    }
    if (binds.n && gs_kube_request_many(s->client, binds.calls, binds.n, BATCH_IN_FLIGHT) != GS_OK)
        logf_("warn", "%zu binds: the batch did not finish", binds.n);
    s->outbox = &events;
    for (size_t k = 0; k < binds.n; k++) {
        struct action *a = &s->acts[of[k]];
        bind_done(s, a, binds.calls[k].rc, &binds.calls[k].resp, anns[k]);
        a->sent = true; /* done: send_actions skips it */
        free(anns[k]);
    }
    s->outbox = NULL;
    outbox_send_events(s, &events);
    outbox_clear(&binds);
    free(binds.calls);
    free(binds.paths);
    free(events.calls);
    free(events.paths);
    free(anns);
    free(of);
}

static void do_bind(struct sched *s, const struct action *a)
{
    char *ann = NULL;
    json_t *body = bind_body(a, &ann);
    char path[600];
    pod_path(path, sizeof(path), a->ns, a->name, "binding");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_POST, path, body, &r) : GS_ENOMEM;
    bind_done(s, a, err, &r, ann);
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
        gs_schedmetrics_eviction(s->metrics, a->text);
        logf_("info", "evicted pod=%s/%s reason=%s", a->ns, a->name, a->text ? a->text : "");
        char note[600];
        if (a->by)
            (void)snprintf(note, sizeof(note), "Preempted by %s", a->by);
        else
            (void)snprintf(note, sizeof(note), "Evicted: %s", a->text ? a->text : "");
        if (err == GS_OK)
            post_event(s, a, "Normal", "Preempted", "Preempting", note);
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
    gs_schedmetrics_attempt(s->metrics, GS_SCHED_UNSCHEDULABLE);
    if (err == GS_OK)
        s->status_patches++;
    else if (err != GS_ENOENT)
        logf_("warn", "status of pod=%s/%s not written: HTTP %ld %s", a->ns, a->name, r.http_status,
              r.message);
    logf_("info", "pending pod=%s/%s reason=\"%s\"", a->ns, a->name, a->text ? a->text : "");
    if (err != GS_ENOENT)
        post_event(s, a, "Warning", "FailedScheduling", "Scheduling", a->text ? a->text : "");
    gs_kube_response_fini(&r);
    json_decref(body);
}

/* True while this replica may write decisions: no election, or it holds a live Lease. */
static bool leading(struct sched *s)
{
    if (!s->leader)
        return true;
    if (s->lost || gs_kube_leader_is_leader(s->leader, mono_ms()))
        return !s->lost;
    if (gs_kube_leader_lost(s->leader))
        s->lost = true; /* it led, and the renew deadline passed */
    return false;
}

static void send_actions(struct sched *s)
{
    if (!s->dry_run && leading(s))
        send_binds(s);
    for (size_t i = 0; i < s->nacts; i++) {
        struct action *a = &s->acts[i];
        if (a->sent) {
            /* a bind the batch sent */
        } else if (!s->dry_run && !leading(s)) {
            /* The renew deadline passed: another replica may lead by now. Send nothing. */
        } else if (s->dry_run) {
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

static void count_pending(void *ctx, const char *ns, const char *name, const char *reason)
{
    (void)ns;
    (void)name;
    (void)reason;
    (*(uint32_t *)ctx)++;
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
    const char *lease_ns = "kube-system", *lease_name = "gpusched", *metrics_addr = NULL;
    double qps = 0;
    long burst = 0, max_runtime_s = 0;
    bool dry = false;
    int elect = -1; /* -1: the default (on unless --dry-run) */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool takes = strcmp(a, "--kubeconfig") == 0 || strcmp(a, "--scheduler-name") == 0 ||
                     strcmp(a, "--default-queue") == 0 || strcmp(a, "--policy") == 0 ||
                     strcmp(a, "--qps") == 0 || strcmp(a, "--burst") == 0 ||
                     strcmp(a, "--max-runtime-s") == 0 || strcmp(a, "--lease-namespace") == 0 ||
                     strcmp(a, "--lease-name") == 0 || strcmp(a, "--metrics-addr") == 0;
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
        } else if (strcmp(a, "--leader-elect") == 0 || strcmp(a, "--leader-elect=true") == 0) {
            elect = 1;
        } else if (strcmp(a, "--leader-elect=false") == 0) {
            elect = 0;
        } else if (strcmp(a, "--lease-namespace") == 0) {
            lease_ns = val;
        } else if (strcmp(a, "--lease-name") == 0) {
            lease_name = val;
        } else if (strcmp(a, "--metrics-addr") == 0) {
            metrics_addr = val;
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
    if (elect < 0)
        elect = !dry;
    /* holderIdentity: hostname_pid_random, unique even for two replicas in one pod's netns. */
    char identity[128], host[64] = "gpusched";
    if (gethostname(host, sizeof(host)) != 0)
        (void)snprintf(host, sizeof(host), "gpusched");
    host[sizeof(host) - 1] = '\0';
    unsigned int rnd = (unsigned int)mono_ms() ^ (unsigned int)getpid() * 2654435761U;
    FILE *ur = fopen("/dev/urandom", "rb");
    if (ur) {
        if (fread(&rnd, sizeof(rnd), 1, ur) != 1)
            rnd ^= (unsigned int)wall_ms();
        (void)fclose(ur);
    }
    (void)snprintf(identity, sizeof(identity), "%s_%ld_%08x", host, (long)getpid(), rnd);
    struct sched s;
    memset(&s, 0, sizeof(s));
    s.dry_run = dry;
    s.identity = identity;
    s.event_slots = calloc(EVENT_SLOTS, sizeof(*s.event_slots));
    if (metrics_addr) {
        uint16_t port = 0;
        rc = gs_schedmetrics_new(&s.metrics);
        if (rc == GS_OK)
            rc = gs_schedmetrics_serve(s.metrics, metrics_addr, &port);
        if (rc) {
            (void)fprintf(stderr, "gpusched scheduler: --metrics-addr %s: %s\n", metrics_addr,
                          rc == GS_EIO ? "cannot listen there" : gs_strerror(rc));
            gs_schedmetrics_free(s.metrics);
            gs_kube_config_fini(&cfg);
            free(s.event_slots);
            return 2;
        }
        logf_("info", "serving /healthz /readyz /metrics on %s (port %u)", metrics_addr,
              (unsigned)port);
    }
    struct gs_kube_client *lease_client = NULL;
    struct gs_kube_client_opts opts = {.qps = qps, .burst = (uint32_t)burst};
    rc = gs_kube_client_new(&cfg, &opts, &s.client);
    if (rc == GS_OK && elect) {
        /* Its own connection and a 4 s limit: a renewal must never wait behind a list or bind,
         * nor hang past the renew deadline. */
        struct gs_kube_client_opts lo = {.qps = -1, .timeout_ms = 4000, .connect_timeout_ms = 2000};
        rc = gs_kube_client_new(&cfg, &lo, &lease_client);
    }
    gs_kube_config_fini(&cfg);
    if (rc) {
        (void)fprintf(stderr, "gpusched scheduler: cannot make an API client: %s\n",
                      gs_strerror(rc));
        gs_kube_client_free(s.client);
        gs_schedmetrics_free(s.metrics);
        free(s.event_slots);
        return 1;
    }
    if (elect) {
        struct gs_kube_leader_opts lopts = {
            .namespace_ = lease_ns, .name = lease_name, .identity = identity};
        rc = gs_kube_leader_new(lease_client, &lopts, &s.leader);
        if (rc) {
            (void)fprintf(stderr, "gpusched scheduler: leader election: %s\n", gs_strerror(rc));
            gs_kube_client_free(lease_client);
            gs_kube_client_free(s.client);
            gs_schedmetrics_free(s.metrics);
            free(s.event_slots);
            return 2;
        }
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
    logf_("info", "gpusched scheduler %s: serving schedulerName=%s policy=%s identity=%s%s",
          GS_VERSION, name ? name : GS_KWORLD_SCHEDULER, policy, identity, dry ? " (dry run)" : "");
    if (s.leader)
        logf_("info", "leader election on lease %s/%s: standing by until it is ours", lease_ns,
              lease_name);
    int64_t t0 = mono_ms(), last_cycle = 0;
    bool started = false, was_leader = false;
    uint64_t cycles = 0;
    while (!stop_flag) {
        if (max_runtime_s && mono_ms() - t0 >= max_runtime_s * 1000)
            break;
        if ((rc = gs_kube_client_step(s.client, 50)) != GS_OK) {
            logf_("error", "API client failed: %s", gs_strerror(rc));
            exit_code = 1;
            break;
        }
        if (s.leader) {
            if (gs_kube_leader_step(s.leader, mono_ms()) != GS_OK) {
                logf_("error", "leader election: out of memory");
                exit_code = 1;
                break;
            }
            bool now_leader = leading(&s);
            if (now_leader && !was_leader)
                logf_("info", "leader: acquired lease %s/%s as %s", lease_ns, lease_name, identity);
            was_leader = now_leader;
            if (gs_kube_leader_lost(s.leader) || s.lost) {
                struct gs_kube_leader_stats ls;
                gs_kube_leader_get_stats(s.leader, &ls);
                logf_("error",
                      "leader: lost lease %s/%s (holder now '%s', last renewal %lld ms "
                      "ago); stopping",
                      lease_ns, lease_name, gs_kube_leader_holder(s.leader),
                      (long long)(mono_ms() - ls.last_renew_ms));
                s.lost = true;
                exit_code = 1;
                break;
            }
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
            gs_schedmetrics_set_ready(s.metrics, true);
            logf_("info", "caches synced in %lld ms", (long long)(mono_ms() - t0));
        }
        gs_schedmetrics_set_leader(s.metrics, !s.leader || was_leader);
        if (s.leader && !was_leader)
            continue; /* standby: caches stay warm, nothing is decided */
        int64_t now = mono_ms();
        if (!s.dirty && now - last_cycle < 1000)
            continue;
        s.dirty = false;
        last_cycle = now;
        uint32_t changes = 0;
        char err[512] = "";
        int64_t c0_ns = mono_ns();
        rc = gs_kworld_cycle(s.world, wall_ms(), &changes, err, sizeof(err));
        cycles++;
        if (s.metrics) {
            uint32_t pending = 0;
            gs_kworld_each_pending(s.world, count_pending, &pending);
            gs_schedmetrics_cycle(s.metrics, (double)(mono_ns() - c0_ns) / 1e9, pending);
        }
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
    send_actions(&s); /* drain decisions already made (nothing when the Lease is lost) */
    if (s.leader) {
        struct gs_kube_leader_stats ls;
        gs_kube_leader_get_stats(s.leader, &ls);
        if (!s.lost && gs_kube_leader_is_leader(s.leader, mono_ms())) {
            rc = gs_kube_leader_release(s.leader, mono_ms());
            logf_(rc ? "warn" : "info", "leader: released lease %s/%s%s%s", lease_ns, lease_name,
                  rc ? ": " : "", rc ? gs_strerror(rc) : "");
        }
        logf_("info", "leader: renewals=%llu failures=%llu longest gap between renewals=%lld ms",
              (unsigned long long)ls.renewals, (unsigned long long)ls.failures,
              (long long)ls.max_renew_gap_ms);
    }
    logf_("info",
          "stopping: cycles=%llu binds=%llu bind_failures=%llu evictions=%llu events=%llu "
          "events_skipped=%llu",
          (unsigned long long)cycles, (unsigned long long)s.binds,
          (unsigned long long)s.bind_failures, (unsigned long long)s.evictions,
          (unsigned long long)s.events, (unsigned long long)s.events_skipped);
out:
    for (size_t i = 0; i < s.nacts; i++)
        action_fini(&s.acts[i]);
    free(s.acts);
    gs_kube_client_free(s.client); /* frees the informers */
    gs_kube_leader_free(s.leader);
    gs_kube_client_free(lease_client);
    gs_kworld_free(s.world);
    gs_schedmetrics_free(s.metrics); /* stops its thread first */
    free(s.event_slots);
    return exit_code;
}
