/*
 * gpusched scheduler: the core against a real Kubernetes API server, as a second scheduler
 * (pods with spec.schedulerName: gpusched).
 *
 * One scheduling thread. Informers (list, then watch) feed nodes, pods, PriorityClasses, Queues
 * (gpusched's, KAI's) and PodGroups (scheduler-plugins', Volcano's) into the shared translation
 * (kworld.h), which applies their edits and deletes in place. Once nodes, pods and PriorityClasses
 * are listed, scheduling cycles run whenever something changed (and at least once a second); the
 * decisions of a cycle are collected and sent after it: a Binding (with the GPU choice as the
 * annotation gpusched.io/assigned-gpus), an Eviction for a victim, and a PodScheduled=False
 * condition with the reason for a pod that waits. Bindings are sent without waiting
 * (gs_kube_request_async): the engine has assumed the placement, so no later cycle hands those
 * GPUs out while the Binding is in flight. A bind the server refuses releases what the pod held
 * at once (forgotten), and the pod is read again: at once after a 409, after a backoff of 1 s
 * doubling to 10 s otherwise. A relist after a 410 deletes from the world what it no longer
 * lists. Preemption goes as kube-scheduler's: the preemptor is nominated
 * (status.nominatedNodeName) and bound once its victims are gone; victims pass a dry-run
 * Eviction, are marked DisruptionTarget, then evicted; a PodDisruptionBudget's 429 sends the
 * preemptor to another node.
 *
 * Replicas elect a leader on a Lease (gs_kube_leader_*, kube.h) with a client of their own,
 * whose short request timeout keeps a hung renewal from outliving the lease. Every replica runs
 * its informers; only the leader runs cycles (a standby's engine would otherwise believe in
 * binds nobody sent) and sends their decisions, each after checking the renew deadline has not
 * passed. A leader that loses the Lease stops at once and exits 1, as kube-scheduler does; on
 * SIGTERM it waits for its Bindings in flight and releases the Lease so a standby takes over at
 * its next attempt. Each decision is also told as an events.k8s.io/v1 Event (Scheduled,
 * FailedScheduling, Preempted, Nominated), the same reason about a pod within 10 minutes counted
 * into one Event's series. The leader writes each Queue's status. With --metrics-addr,
 * libmicrohttpd's own thread serves /healthz, /readyz and /metrics from counters the loop records
 * under a mutex (schedmetrics.h). With --webhook-addr, another libmicrohttpd thread answers the
 * mutating admission webhook (webhook.h), on every replica; it reads only the request, sharing
 * nothing with the loop. Those are the only other threads. Bindings, and the retries of gang
 * members whose Binding was refused, are in sched_bind.c.
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
#include "cli/sched_acct.h"
#include "cli/sched_evict.h"
#include "cli/sched_int.h"
#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/kevents.h"
#include "gpusched/kube.h"
#include "gpusched/log.h"
#include "gpusched/kworld.h"
#include "gpusched/sched.h"
#include "gpusched/schedmetrics.h"
#include "gpusched/webhook.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

int64_t gs__sched_mono_ms(void)
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

int64_t gs__sched_wall_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Set once by gs__sched_run before any other thread starts; read-only after. */
static enum gs_log_format log_format = GS_LOG_FORMAT_TEXT;
static const char *command = "scheduler"; /* or "accountant": messages and the JSON component */

void gs__sched_log_set_format(enum gs_log_format fmt)
{
    log_format = fmt;
}

void gs__sched_logf(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (log_format == GS_LOG_FORMAT_JSON) {
        struct gs_log_json_sink js = {.level = level, .component = command};
        gs_vlog(gs_log_stderr_json, &js, fmt, ap);
    } else {
        gs_vlog(gs_log_stderr_stamped, (void *)level, fmt, ap);
    }
    va_end(ap);
}

/* A start-up failure (exit 1 or 2) after the options are read: "gpusched scheduler: TEXT" on
 * stderr as a usage error is told, or one JSON line of level error with --log-format json, so
 * that a JSON log holds nothing but JSON. */
static void GS_PRINTF(1, 2) start_failure(const char *fmt, ...)
{
    char text[GS_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (log_format == GS_LOG_FORMAT_JSON)
        gs__sched_logf("error", "%s", text);
    else
        (void)fprintf(stderr, "gpusched %s: %s\n", command, text);
}

/* The webhook's lines, from its own thread (stderr is locked per call). */
static void on_webhook_log(void *ud, const char *level, const char *msg)
{
    (void)ud;
    gs__sched_logf(level, "%s", msg);
}

/* A bad node inventory and the like: the world read it another way. */
static void on_world_warning(void *ctx, const char *msg)
{
    (void)ctx;
    gs__sched_logf("warn", "%s", msg);
}

static void on_world_event(void *ctx, const struct gs_kevent *ev)
{
    struct sched *s = ctx;
    if (s->acct)
        gs__sched_acct_event(s->acct, s->world, ev);
    if (s->follower)
        return; /* it records; the leader decides and sends */
    if (ev->kind == GS_KEV_FINISH || ev->kind == GS_KEV_DELETE ||
        (ev->kind == GS_KEV_BIND && ev->adopted))
        return; /* what the API server told us, or already bound there */
    if (s->nacts == s->capacts) {
        size_t cap = s->capacts ? s->capacts * 2 : 64;
        struct action *a = realloc(s->acts, cap * sizeof(*a));
        if (!a) {
            gs__sched_logf("error", "out of memory queueing a decision for pod=%s/%s", ev->ns,
                           ev->name);
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
    a->by_uid = ev->by_uid ? strdup(ev->by_uid) : NULL;
    a->detail = ev->detail ? strdup(ev->detail) : NULL;
    a->gang = ev->kind == GS_KEV_BIND && ev->gang ? strdup(ev->gang) : NULL;
    a->queue = ev->queue ? strdup(ev->queue) : NULL;
    a->cycle = s->cycle;
    if (ev->kind == GS_KEV_BIND) {
        a->gpus = json_array();
        /* The UUID when the node's agent published its inventory, for the agent to check. */
        for (uint32_t g = 0; g < ev->n_gpus && a->gpus; g++)
            json_array_append_new(a->gpus, gs__sched_assigned_gpu(&ev->gpus[g]));
        if (ev->mig_change)
            a->mig = gs__sched_mig_copy(ev->mig_change);
    }
    /* A re-partition bind whose plan could not be copied must not go out as a plain bind: the
     * instance it names does not exist yet. Dropped like any action short of memory. */
    bool mig_lost = ev->kind == GS_KEV_BIND && ev->mig_change && !a->mig;
    if (!a->ns || !a->name || mig_lost) {
        if (mig_lost)
            gs__sched_logf("error", "out of memory copying the MIG plan of pod=%s/%s", ev->ns,
                           ev->name);
        free(a->ns);
        free(a->name);
        free(a->uid);
        free(a->node);
        free(a->text);
        free(a->by);
        free(a->by_uid);
        free(a->detail);
        free(a->gang);
        free(a->queue);
        json_decref(a->gpus);
        return;
    }
    s->nacts++;
}

void gs__sched_action_fini(struct action *a)
{
    free(a->ns);
    free(a->name);
    free(a->uid);
    free(a->node);
    free(a->text);
    free(a->by);
    free(a->by_uid);
    free(a->detail);
    free(a->gang);
    free(a->queue);
    json_decref(a->gpus);
    free(a->mig);
}

/* Tells of a decision about pod ns/name (uid: NULL when unknown) as an Event (aggregated:
 * kevents.h). */
static void post_pod_event(struct sched *s, const char *ns, const char *name, const char *uid,
                           const char *type, const char *reason, const char *verb, const char *note)
{
    gs_kevents_post(s->events, ns, name, uid, type, reason, verb, note);
}

/* Tells of a decision about the action's pod as an Event (aggregated: kevents.h). */
void gs__sched_post_event(struct sched *s, const struct action *a, const char *type,
                          const char *reason, const char *verb, const char *note)
{
    post_pod_event(s, a->ns, a->name, a->uid, type, reason, verb, note);
}

static void log_event_failure(void *ud, const char *msg)
{
    (void)ud;
    gs__sched_logf("warn", "%s", msg);
}

/*
 * The PodDisruptionBudget named by a 429 answer to an Eviction: the API server's cause reads
 * "The disruption budget NAME needs N healthy pods and has M currently" (or "... does not allow
 * evicting pods currently", "... is still being processed by the server"); the budget is in the
 * pod's namespace.
 */
static void pdb_of_refusal(const struct gs_kube_response *r, const char *ns, char *out, size_t cap)
{
    static const char pre[] = "The disruption budget ";
    json_t *causes = json_object_get(json_object_get(r->body, "details"), "causes");
    for (size_t i = 0; i < json_array_size(causes); i++) {
        const char *m = json_string_value(json_object_get(json_array_get(causes, i), "message"));
        if (m && strncmp(m, pre, sizeof(pre) - 1) == 0) {
            m += sizeof(pre) - 1;
            int n = (int)strcspn(m, " ");
            (void)snprintf(out, cap, "%s/%.*s", ns, n, m);
            return;
        }
    }
    (void)snprintf(out, cap, "%s/(unnamed: %.200s)", ns, r->message);
}

/*
 * Sends the Eviction of a victim (dry_run: only asks whether it would be allowed, which checks
 * PodDisruptionBudgets and changes nothing). On EVICT_BLOCKED `pdb` receives "ns/name".
 */
enum evict_result gs__sched_evict_pod(struct sched *s, const struct action *a, bool dry_run,
                                      char *pdb, size_t pdb_cap)
{
    json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "policy/v1", "kind", "Eviction",
                             "metadata", "name", a->name, "namespace", a->ns);
    if (body && dry_run)
        json_object_set_new(body, "deleteOptions", json_pack("{s:[s]}", "dryRun", "All"));
    char path[600];
    gs__sched_pod_path(path, sizeof(path), a->ns, a->name, "eviction");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_POST, path, body, &r) : GS_ENOMEM;
    enum evict_result res = err == GS_OK           ? EVICT_SENT
                            : err == GS_ENOENT     ? EVICT_GONE
                            : r.http_status == 429 ? EVICT_BLOCKED
                                                   : EVICT_FAILED;
    if (res == EVICT_BLOCKED)
        pdb_of_refusal(&r, a->ns, pdb, pdb_cap);
    if (dry_run) {
        if (res == EVICT_BLOCKED)
            gs__sched_logf("info", "eviction of pod=%s/%s would violate PodDisruptionBudget %s",
                           a->ns, a->name, pdb);
    } else if (res == EVICT_SENT || res == EVICT_GONE) {
        s->evictions++;
        gs_schedmetrics_eviction(s->metrics, a->text);
        gs__sched_logf("info", "evicted pod=%s/%s reason=%s%s%s%s%s%s", a->ns, a->name,
                       a->text ? a->text : "", a->by ? " by=" : "", a->by ? a->by : "",
                       a->detail ? " why=\"" : "", a->detail ? a->detail : "",
                       a->detail ? "\"" : "");
        char note[1024];
        if (a->by && a->detail)
            (void)snprintf(note, sizeof(note), "Preempted by %s: %s", a->by, a->detail);
        else if (a->by)
            (void)snprintf(note, sizeof(note), "Preempted by %s", a->by);
        else
            (void)snprintf(note, sizeof(note), "Evicted: %s", a->text ? a->text : "");
        if (res == EVICT_SENT)
            gs__sched_post_event(s, a, "Normal", "Preempted", "Preempting", note);
    } else {
        gs__sched_logf("warn", "eviction refused pod=%s/%s: HTTP %ld %s: %s%s%s", a->ns, a->name,
                       r.http_status, r.reason, r.message[0] ? r.message : gs_strerror(err),
                       res == EVICT_BLOCKED ? "; PodDisruptionBudget " : "",
                       res == EVICT_BLOCKED ? pdb : "");
    }
    if (res == EVICT_FAILED && pdb_cap)
        (void)snprintf(pdb, pdb_cap, "HTTP %ld %.300s", r.http_status,
                       r.message[0] ? r.message : gs_strerror(err));
    gs_kube_response_fini(&r);
    json_decref(body);
    return res;
}

/*
 * Marks a victim with the DisruptionTarget condition before its eviction, as kube-scheduler's
 * preemption does (reason PreemptionByScheduler), so its controller and its users see why it
 * goes; and, in the same status patch, with the annotation gpusched.io/evicted (sched_evict.h:
 * the reason word, the preemptor and its uid, the decision's time), which the Eviction API leaves
 * alone where it rewrites the condition, for `gpusched accountant` to record the eviction as
 * decided here. A failure is logged: the eviction still tells the pod.
 */
void gs__sched_mark_disruption_target(struct sched *s, const struct action *a)
{
    char now[80], msg[1400], by[400] = "";
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)snprintf(now, sizeof(now), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    const char *word = a->text ? a->text : "preemption";
    if (a->by) /* "ns/name (uid U)": ns/name and a uid hold no space or parenthesis */
        (void)snprintf(by, sizeof(by), "%s%s%s%s", a->by, a->by_uid ? " (uid " : "",
                       a->by_uid ? a->by_uid : "", a->by_uid ? ")" : "");
    if (strcmp(word, "gang") == 0)
        (void)snprintf(msg, sizeof(msg),
                       "%s: gang %s could not bind all its members within %d s and is released "
                       "whole",
                       s->sched_name, a->gang ? a->gang : "?", GANG_RETRY_MS / 1000);
    else if (strcmp(word, "reclaim") == 0)
        (void)snprintf(msg, sizeof(msg),
                       "%s: reclaiming resources for %s, whose queue is below its fair share%s%s",
                       s->sched_name, by[0] ? by : "another queue", a->detail ? ": " : "",
                       a->detail ? a->detail : "");
    else if (strcmp(word, "node-lost") == 0)
        (void)snprintf(msg, sizeof(msg), "%s: node %s is gone", s->sched_name,
                       a->node ? a->node : "?");
    else
        (void)snprintf(msg, sizeof(msg),
                       "%s: preempting to accommodate a higher priority pod%s%s%s%s", s->sched_name,
                       by[0] ? " " : "", by, a->detail ? ": " : "", a->detail ? a->detail : "");
    char *note =
        gs__evict_note(word, a->by, a->by_uid, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    json_t *body =
        note ? json_pack("{s:{s:{s:s}},s:{s:[{s:s,s:s,s:s,s:s,s:s}]}}", "metadata", "annotations",
                         GS__EVICTED_ANNOTATION, note, "status", "conditions", "type",
                         "DisruptionTarget", "status", "True", "reason", "PreemptionByScheduler",
                         "message", msg, "lastTransitionTime", now)
             : NULL;
    free(note);
    char path[600];
    gs__sched_pod_path(path, sizeof(path), a->ns, a->name, "status");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err =
        body ? gs_kube_request(s->client, GS_KUBE_PATCH_STRATEGIC, path, body, &r) : GS_ENOMEM;
    if (err != GS_OK && err != GS_ENOENT)
        gs__sched_logf("warn", "DisruptionTarget of pod=%s/%s not written: HTTP %ld %s", a->ns,
                       a->name, r.http_status, r.message[0] ? r.message : gs_strerror(err));
    gs_kube_response_fini(&r);
    json_decref(body);
}

void gs__sched_set_nominated(struct sched *s, const char *ns, const char *name, const char *node)
{
    json_t *body = json_pack("{s:{s:o}}", "status", "nominatedNodeName",
                             node ? json_string(node) : json_null());
    char path[600];
    gs__sched_pod_path(path, sizeof(path), ns, name, "status");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_PATCH_MERGE, path, body, &r) : GS_ENOMEM;
    if (err != GS_OK && err != GS_ENOENT)
        gs__sched_logf("warn", "nominatedNodeName of pod=%s/%s not written: HTTP %ld %s", ns, name,
                       r.http_status, r.message[0] ? r.message : gs_strerror(err));
    gs_kube_response_fini(&r);
    json_decref(body);
}

static void do_pending(struct sched *s, const struct action *a)
{
    /* A preemptor that gave a node up for a PodDisruptionBudget says that alone: the engine's
     * text would only count the node it now avoids as not matching its affinity. */
    char *k = gs__sched_key_of(a->ns, a->name);
    const char *blocked = k ? json_string_value(json_object_get(s->pdb_blocked, k)) : NULL;
    char text[1200];
    (void)snprintf(text, sizeof(text), "%s", blocked ? blocked : a->text ? a->text : "");
    const char *said = k ? json_string_value(json_object_get(s->pending_said, k)) : NULL;
    int err = GS_OK;
    if (!said || strcmp(said, text) != 0) {
        err = gs__sched_patch_scheduled_false(s, a->ns, a->name, "Unschedulable", text);
        if (k && (err == GS_OK || err == GS_ENOENT))
            (void)json_object_set_new(s->pending_said, k, json_string(text));
    }
    free(k);
    gs_schedmetrics_attempt(s->metrics, GS_SCHED_UNSCHEDULABLE);
    gs__sched_logf("info", "pending pod=%s/%s reason=\"%s\"", a->ns, a->name, text);
    if (err != GS_ENOENT) {
        gs__sched_post_event(s, a, "Warning", "FailedScheduling", "Scheduling", text);
        char *told = gs__sched_key_of(a->ns, a->name);
        if (told)
            (void)json_object_set_new(s->failed_told, told, json_true());
        free(told);
    }
}

/*
 * PodScheduled=False for every pod of ours that waits, not only those the core tried (whose
 * reasons come as PENDING decisions, do_pending): a pod behind its scheduling gates, one the
 * translation refused, one waiting behind a pod ahead of it in its queue. Each gets the reason
 * `whatif` prints in its pending line (gs_kworld_each_pending), under Kubernetes' reason
 * SchedulingGated for gates and Unschedulable otherwise, written when it differs from the last
 * one written, never once per cycle. A PATCH that fails (but for 404) is tried at the next
 * cycle. Each Unschedulable PATCH written is also told as a FailedScheduling Event (note: the
 * condition's message), as kube-scheduler tells every unschedulable attempt, unless do_pending
 * told one about the pod in this cycle; a gated pod gets none (kube-scheduler does not try it).
 */
struct pending_walk {
    struct sched *s;
    json_t *now; /* the pods waiting now -> their message */
};

static void say_pending(void *ctx, const char *ns, const char *name, const char *uid,
                        const char *reason)
{
    struct pending_walk *pw = ctx;
    char *k = gs__sched_key_of(ns, name);
    if (!k)
        return;
    const char *blocked = json_string_value(json_object_get(pw->s->pdb_blocked, k));
    const char *text = blocked ? blocked : reason;
    const char *said = json_string_value(json_object_get(pw->s->pending_said, k));
    int err = GS_OK;
    if (!said || strcmp(said, text) != 0) {
        bool gated = strcmp(text, GS_KWORLD_REASON_GATED) == 0;
        err = gs__sched_patch_scheduled_false(pw->s, ns, name,
                                              gated ? "SchedulingGated" : "Unschedulable", text);
        if (err == GS_OK)
            gs__sched_logf("info", "pending pod=%s/%s reason=\"%s\"", ns, name, text);
        if (err == GS_OK && !gated && !json_object_get(pw->s->failed_told, k))
            post_pod_event(pw->s, ns, name, uid, "Warning", "FailedScheduling", "Scheduling", text);
    }
    if (err == GS_OK || err == GS_ENOENT)
        (void)json_object_set_new(pw->now, k, json_string(text));
    free(k);
}

static void say_all_pending(struct sched *s)
{
    struct pending_walk pw = {s, json_object()};
    if (!pw.now)
        return;
    gs_kworld_each_pending(s->world, say_pending, &pw);
    json_decref(s->pending_said);
    s->pending_said = pw.now; /* pods no longer waiting are forgotten */
}

/* True while this replica may write decisions: no election, or it holds a live Lease. */
static bool leading(struct sched *s)
{
    if (!s->leader)
        return true;
    if (s->lost || gs_kube_leader_is_leader(s->leader, gs__sched_mono_ms()))
        return !s->lost;
    if (gs_kube_leader_lost(s->leader))
        s->lost = true; /* it led, and the renew deadline passed */
    return false;
}

static struct nomination *find_nomination(struct sched *s, const char *key)
{
    for (size_t i = 0; key && i < s->nnoms; i++)
        if (strcmp(s->noms[i].key, key) == 0)
            return &s->noms[i];
    return NULL;
}

static void nomination_drop(struct sched *s, size_t i)
{
    struct nomination *n = &s->noms[i];
    gs__sched_action_fini(&n->bind);
    free(n->key);
    free(n->blocked);
    free(n->blocked_by);
    json_decref(n->victims);
    size_t last = --s->nnoms;
    if (i != last)
        s->noms[i] = s->noms[last];
    memset(&s->noms[last], 0, sizeof(s->noms[last])); /* no freed pointer stays behind */
}

/* Takes over a preemptor's BIND (the action is left empty) and nominates its node. */
static void nominate(struct sched *s, struct action *a)
{
    if (s->nnoms == s->capnoms) {
        size_t cap = s->capnoms ? s->capnoms * 2 : 16;
        struct nomination *nn = realloc(s->noms, cap * sizeof(*nn));
        if (!nn) {
            gs__sched_logf("error", "out of memory nominating pod=%s/%s; binding it now", a->ns,
                           a->name);
            gs__sched_bind(s, a);
            return;
        }
        s->noms = nn;
        s->capnoms = cap;
    }
    struct nomination *n = &s->noms[s->nnoms];
    memset(n, 0, sizeof(*n));
    n->key = gs__sched_key_of(a->ns, a->name);
    n->victims = json_object();
    if (!n->key || !n->victims) {
        free(n->key);
        json_decref(n->victims);
        gs__sched_bind(s, a);
        return;
    }
    n->bind = *a;
    memset(a, 0, sizeof(*a));
    s->nnoms++;
    gs__sched_set_nominated(s, n->bind.ns, n->bind.name, n->bind.node);
    gs__sched_logf("info", "nominated pod=%s/%s node=%s: waiting for its victims to leave%s%s",
                   n->bind.ns, n->bind.name, n->bind.node, n->bind.detail ? ": " : "",
                   n->bind.detail ? n->bind.detail : "");
    /* The preemptor is told whom it evicts and why, as the victims are (Preempted). */
    char note[1400];
    (void)snprintf(note, sizeof(note), "Nominated to node %s: %s", n->bind.node,
                   n->bind.detail ? n->bind.detail : "evicting pods to make room");
    gs__sched_post_event(s, &n->bind, "Normal", "Nominated", "Preempting", note);
}

/*
 * A preemptor whose victims cannot all be evicted gives the node up: the engine forgets it (its
 * GPUs there are free again at once), victims not evicted are read again (adopted as running),
 * and it is read again itself, avoiding that node, to try the next one; where no other node
 * serves, it waits with the budget named in its reason. The node is tried again after
 * PDB_RETRY_MS.
 */
static void nomination_fail(struct sched *s, size_t i)
{
    struct nomination *n = &s->noms[i];
    const struct action *b = &n->bind;
    gs__sched_logf("info", "pod=%s/%s gives node %s up: %s (evicting %s)", b->ns, b->name, b->node,
                   n->blocked ? n->blocked : "an eviction failed",
                   n->blocked_by ? n->blocked_by : "?");
    (void)gs_kworld_forget_pod(s->world, b->ns, b->name, gs__sched_wall_ms());
    if (gs_kworld_avoid_node(s->world, b->ns, b->name, b->node) != GS_OK)
        gs__sched_logf("error", "out of memory: pod=%s/%s may try node=%s again", b->ns, b->name,
                       b->node);
    char reason[700];
    (void)snprintf(reason, sizeof(reason), "blocked by %s (evicting %s from node %s was refused)",
                   n->blocked ? n->blocked : "an eviction failure",
                   n->blocked_by ? n->blocked_by : "a victim", b->node);
    json_object_set_new(s->pdb_blocked, n->key, json_string(reason));
    json_object_set_new(s->unblock, n->key, json_integer(gs__sched_mono_ms() + PDB_RETRY_MS));
    gs__sched_set_nominated(s, b->ns, b->name, NULL);
    gs__sched_hold_pod(s, b->ns, b->name, gs__sched_mono_ms());
    s->dirty = true;
    nomination_drop(s, i);
}

/* Binds the nominated pods whose victims are all gone. */
static void check_nominations(struct sched *s)
{
    for (size_t i = 0; i < s->nnoms;) {
        struct nomination *n = &s->noms[i];
        if (json_object_size(n->victims) == 0 && leading(s)) {
            gs__sched_logf("info", "pod=%s/%s: its victims are gone; binding", n->bind.ns,
                           n->bind.name);
            gs__sched_bind(s, &n->bind);
            nomination_drop(s, i);
            continue;
        }
        i++;
    }
}

/* The avoided nodes of PDB-blocked pods are tried again once PDB_RETRY_MS has passed. */
static void check_unblock(struct sched *s)
{
    int64_t now = gs__sched_mono_ms();
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(s->unblock, tmp, k, v)
    {
        if (json_integer_value(v) > now || find_nomination(s, k))
            continue;
        const char *slash = strchr(k, '/');
        if (!slash)
            continue;
        char ns[256];
        (void)snprintf(ns, sizeof(ns), "%.*s", (int)(slash - k), k);
        gs_kworld_avoid_clear(s->world, ns, slash + 1);
        if (!gs__sched_is_held(s, ns, slash + 1)) {
            (void)gs_kworld_forget_pod(s->world, ns, slash + 1, gs__sched_wall_ms());
            gs__sched_hold_pod(s, ns, slash + 1, now);
        }
        json_object_del(s->unblock, k);
    }
}

/*
 * Sends the decisions of the last cycle. Preemption is done as kube-scheduler does it: a pod
 * whose placement needs victims is nominated (status.nominatedNodeName) and bound only once
 * they are gone; its victims are first asked about with a dry-run Eviction (which checks their
 * PodDisruptionBudgets and changes nothing), then marked DisruptionTarget and evicted. A budget
 * that refuses (429) makes the preemptor give the node up (nomination_fail).
 */
static void send_actions(struct sched *s)
{
    bool live = s->dry_run || leading(s);
    if (live && !s->dry_run) {
        /* Preemptors: the BIND of a pod named as `by` of an EVICT of this cycle. */
        json_t *by = json_object();
        for (size_t i = 0; by && i < s->nacts; i++)
            if (s->acts[i].kind == GS_KEV_EVICT && s->acts[i].by)
                json_object_set_new(by, s->acts[i].by, json_true());
        for (size_t i = 0; by && i < s->nacts; i++) {
            struct action *a = &s->acts[i];
            char *k = a->kind == GS_KEV_BIND ? gs__sched_key_of(a->ns, a->name) : NULL;
            if (k && json_object_get(by, k))
                nominate(s, a);
            free(k);
        }
        json_decref(by);
        /* Dry runs first: a node whose victims a budget protects is given up untouched. */
        for (size_t i = 0; i < s->nacts; i++) {
            struct action *a = &s->acts[i];
            struct nomination *n = a->kind == GS_KEV_EVICT ? find_nomination(s, a->by) : NULL;
            char pdb[400] = "";
            if (n && !n->failed &&
                gs__sched_evict_pod(s, a, true, pdb, sizeof(pdb)) == EVICT_BLOCKED) {
                n->failed = true;
                size_t len = strlen(pdb) + 32;
                n->blocked = malloc(len);
                if (n->blocked)
                    (void)snprintf(n->blocked, len, "PodDisruptionBudget %s", pdb);
                n->blocked_by = gs__sched_key_of(a->ns, a->name);
            }
        }
    }
    for (size_t i = 0; i < s->nacts; i++) {
        struct action *a = &s->acts[i];
        if (!a->ns || !live) {
            /* Taken over by a nomination; or the renew deadline passed: another replica may
             * lead by now, so nothing is sent. */
        } else if (s->dry_run) {
            gs__sched_logf("info", "dry-run %s pod=%s/%s node=%s %s%s",
                           a->kind == GS_KEV_BIND    ? "bind"
                           : a->kind == GS_KEV_EVICT ? "evict"
                                                     : "pending",
                           a->ns, a->name, a->node ? a->node : "-", a->text ? a->text : "",
                           a->mig ? "(after a MIG re-partition of its GPU)" : "");
        } else if (a->kind == GS_KEV_BIND && a->mig) {
            gs__sched_migplan_start(s, a);
        } else if (a->kind == GS_KEV_BIND) {
            gs__sched_bind(s, a);
        } else if (a->kind == GS_KEV_EVICT) {
            struct nomination *n = find_nomination(s, a->by);
            if (n && n->failed) {
                /* Not evicted after all: it runs on, and is read again to be adopted. */
                (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
                gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms());
            } else {
                gs__sched_mark_disruption_target(s, a);
                char why[400] = "";
                enum evict_result r = gs__sched_evict_pod(s, a, false, why, sizeof(why));
                char *k = gs__sched_key_of(a->ns, a->name);
                if (n && r == EVICT_SENT && k)
                    json_object_set_new(n->victims, k, json_true());
                if (n && (r == EVICT_BLOCKED || r == EVICT_FAILED)) {
                    n->failed = true;
                    size_t len = strlen(why) + 32;
                    n->blocked = malloc(len);
                    if (n->blocked)
                        (void)snprintf(n->blocked, len, "%s%s",
                                       r == EVICT_BLOCKED ? "PodDisruptionBudget " : "", why);
                    n->blocked_by = gs__sched_key_of(a->ns, a->name);
                }
                if (r == EVICT_BLOCKED || r == EVICT_FAILED) {
                    (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
                    gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms());
                }
                free(k);
            }
        } else if (a->kind == GS_KEV_PENDING) {
            do_pending(s, a);
        }
        gs__sched_action_fini(a);
    }
    s->nacts = 0;
    for (size_t i = 0; i < s->nnoms;) {
        if (s->noms[i].failed) {
            nomination_fail(s, i);
            continue;
        }
        i++;
    }
}

/*
 * One watched collection. `known` mirrors which of its objects the world holds, so that after
 * a relist (the watch's history was gone: 410) the objects deleted meanwhile, which no watch
 * event will ever tell, are deleted from the world too (marked at RELIST, swept at SYNCED).
 */
struct feed {
    struct sched *s;
    const char *path;
    const char *kind; /* the kind of its objects, for the deletions it makes up */
    json_t *known;    /* key ("ns/name" or "name") -> true */
    json_t *seen;     /* during a relist: the keys listed again; NULL otherwise */
    uint64_t lists;   /* lists delivered */
    struct gs_kube_informer *inf;
};

static char *obj_key(const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name)
        return NULL;
    return ns ? gs__sched_key_of(ns, name) : strdup(name);
}

/* A pod that left the API server: its nomination or its victim entry goes. */
static void pod_gone(struct sched *s, const char *key)
{
    for (size_t i = 0; i < s->nnoms;) {
        struct nomination *n = &s->noms[i];
        (void)json_object_del(n->victims, key);
        if (strcmp(n->key, key) == 0) {
            gs__sched_logf("info", "nominated pod=%s deleted; its node is given up", key);
            nomination_drop(s, i);
            continue;
        }
        i++;
    }
    gs__sched_migplan_pod_gone(s, key);
    (void)json_object_del(s->held, key);
    (void)json_object_del(s->bind_attempts, key);
    (void)json_object_del(s->pdb_blocked, key);
    (void)json_object_del(s->unblock, key);
    gs__sched_gang_pod_gone(s, key);
}

static void apply_change(struct sched *s, enum gs_kchange ch, const json_t *obj)
{
    char err[512] = "";
    int rc = gs_kworld_apply(s->world, ch, obj, gs__sched_wall_ms(), err, sizeof(err));
    if (rc == GS_EINVAL)
        gs__sched_logf("warn", "ignored %s: %s", json_string_value(json_object_get(obj, "kind")),
                       err);
    else if (rc)
        gs__sched_logf("error", "cannot apply a change: %s", gs_strerror(rc));
    s->dirty = true;
}

static void on_informer(void *ud, enum gs_kube_event_type type, json_t *obj)
{
    struct feed *f = ud;
    struct sched *s = f->s;
    if (type == GS_KUBE_EVENT_RELIST) {
        if (f->lists > 0) {
            struct gs_kube_informer_stats st;
            gs_kube_informer_get_stats(f->inf, &st);
            gs__sched_logf("info", "relist of %s (its watch answered 410 Gone %llu time(s) so far)",
                           f->path, (unsigned long long)st.gone);
            gs_schedmetrics_relist(s->metrics);
        }
        json_decref(f->seen);
        f->seen = json_object();
        return;
    }
    if (type == GS_KUBE_EVENT_SYNCED) {
        f->lists++;
        const char *k;
        json_t *v, *tmp;
        size_t swept = 0;
        json_object_foreach_safe(f->known, tmp, k, v)
        {
            if (!f->seen || json_object_get(f->seen, k))
                continue;
            const char *slash = strchr(k, '/');
            json_t *stub = slash
                               ? json_pack("{s:s,s:{s:s%,s:s}}", "kind", f->kind, "metadata",
                                           "namespace", k, (size_t)(slash - k), "name", slash + 1)
                               : json_pack("{s:s,s:{s:s}}", "kind", f->kind, "metadata", "name", k);
            if (stub) {
                if (strcmp(f->kind, "Pod") == 0)
                    pod_gone(s, k);
                apply_change(s, GS_KDELETED, stub);
                swept++;
            }
            json_decref(stub);
            json_object_del(f->known, k);
        }
        if (swept)
            gs__sched_logf("info", "relist of %s: %zu object(s) deleted while the watch was down",
                           f->path, swept);
        json_decref(f->seen);
        f->seen = NULL;
        return;
    }
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
        return;
    }
    char *k = obj_key(obj);
    if (k) {
        if (ch == GS_KDELETED)
            (void)json_object_del(f->known, k);
        else
            json_object_set_new(f->known, k, json_true());
        if (f->seen && ch != GS_KDELETED)
            json_object_set_new(f->seen, k, json_true());
    }
    bool is_pod = strcmp(f->kind, "Pod") == 0;
    if (s->acct)
        gs__sched_acct_observe(s->acct, f->kind, ch == GS_KDELETED, obj);
    if (is_pod && k && ch == GS_KDELETED)
        pod_gone(s, k);
    else if (is_pod && k && json_object_get(s->held, k)) {
        free(k);
        return; /* read afresh when its hold is over */
    }
    free(k);
    apply_change(s, ch, obj);
    if (s->nplans && ch != GS_KDELETED && strcmp(f->kind, "Node") == 0)
        gs__sched_migplan_node(s, obj); /* after the world read its inventory */
}

/*
 * Writes each Queue's status subresource from the engine: allocated (its running pods' requests)
 * and fairShare (the last cycle's), gpu in GPUs, cpu in cores, memory a quantity as the spec
 * writes them, and its running and pending pods. Only Queue objects the watch delivered are
 * written (the default queue made when none exists has no object), and only when changed.
 */
static void write_queue_status(struct sched *s, const json_t *queues_known)
{
    const struct gs_engine *e = gs_kworld_engine(s->world);
    if (!e)
        return;
    for (uint32_t q = 1; q < gs_engine_queue_count(e); q++) {
        struct gs_queue_info qi;
        if (gs_engine_queue_info(e, q, &qi) != GS_OK || !json_object_get(queues_known, qi.name))
            continue;
        char amem[32], fmem[32];
        (void)snprintf(amem, sizeof(amem), "%lldMi", (long long)qi.allocated[GS_RES_MEM]);
        (void)snprintf(fmem, sizeof(fmem), "%lldMi", (long long)qi.fair[GS_RES_MEM]);
        json_t *st = json_pack("{s:{s:f,s:f,s:s},s:{s:f,s:f,s:s},s:I,s:I}", "allocated", "gpu",
                               (double)qi.allocated[GS_RES_GPU] / 1000.0, "cpu",
                               (double)qi.allocated[GS_RES_CPU] / 1000.0, "memory", amem,
                               "fairShare", "gpu", (double)qi.fair[GS_RES_GPU] / 1000.0, "cpu",
                               (double)qi.fair[GS_RES_CPU] / 1000.0, "memory", fmem, "running",
                               (json_int_t)qi.running, "pending", (json_int_t)qi.pending);
        if (!st)
            continue;
        json_t *last = json_object_get(s->queue_status, qi.name);
        if (last && json_equal(last, st)) {
            json_decref(st);
            continue;
        }
        char path[400];
        (void)snprintf(path, sizeof(path), "/apis/scheduling.gpusched.io/v1alpha1/queues/%s/status",
                       qi.name);
        json_t *body = json_pack("{s:O}", "status", st);
        struct gs_kube_response r;
        memset(&r, 0, sizeof(r));
        int err =
            body ? gs_kube_request(s->client, GS_KUBE_PATCH_MERGE, path, body, &r) : GS_ENOMEM;
        if (err == GS_OK)
            json_object_set(s->queue_status, qi.name, st);
        else
            gs__sched_logf("warn", "status of Queue queue=%s not written: HTTP %ld %s", qi.name,
                           r.http_status, r.message[0] ? r.message : gs_strerror(err));
        gs_kube_response_fini(&r);
        json_decref(body);
        json_decref(st);
    }
}

static void count_pending(void *ctx, const char *ns, const char *name, const char *uid,
                          const char *reason)
{
    (void)ns;
    (void)name;
    (void)uid;
    (void)reason;
    (*(uint32_t *)ctx)++;
}

struct watched {
    const char *path;
    const char *kind;
    bool required; /* scheduling waits for its first list */
    bool follower; /* `gpusched accountant` watches it too (the rest only choose victims) */
};

static const struct watched watched[] = {
    {"/api/v1/nodes", "Node", true, true},
    {"/api/v1/pods", "Pod", true, true},
    {"/apis/scheduling.k8s.io/v1/priorityclasses", "PriorityClass", true, true},
    {"/apis/scheduling.gpusched.io/v1alpha1/queues", "Queue", false, true},
    {"/apis/scheduling.run.ai/v2/queues", "Queue", false, true}, /* KAI's */
    {"/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "PodGroup", false, false},
    {"/apis/scheduling.volcano.sh/v1beta1/podgroups", "PodGroup", false, false},   /* Volcano's */
    {"/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudget", false, false}, /* victims */
    {"/api/v1/namespaces", "Namespace", false, true}, /* team labels for --accounting */
};
#define N_WATCHED (sizeof(watched) / sizeof(watched[0]))

/* How often a required watch that keeps failing is told of again. */
#define WATCH_WARN_EVERY_MS 30000

/*
 * Tells of failing lists and watches, so an API server that cannot be reached (or RBAC that
 * refuses) is seen in the log, not only in /readyz: a required kind at its first failure and
 * then at most every WATCH_WARN_EVERY_MS while it keeps failing; an optional one (a CRD that may
 * not be installed) once.
 */
static void warn_watch_failures(struct gs_kube_informer *const *inf, uint64_t *seen,
                                int64_t *warned_ms, int64_t now_ms)
{
    for (size_t i = 0; i < N_WATCHED; i++) {
        struct gs_kube_informer_stats st;
        if (!inf[i])
            continue; /* not watched by the accountant */
        gs_kube_informer_get_stats(inf[i], &st);
        if (st.failures == seen[i])
            continue;
        bool first = seen[i] == 0;
        seen[i] = st.failures;
        if (!first && (!watched[i].required || now_ms - warned_ms[i] < WATCH_WARN_EVERY_MS))
            continue;
        warned_ms[i] = now_ms;
        const char *why = gs_kube_informer_last_error(inf[i]);
        gs__sched_logf(watched[i].required ? "warn" : "info",
                       "watch %s: %s (%llu failure(s) so far; retrying with backoff)%s",
                       watched[i].kind, why && why[0] ? why : "failed",
                       (unsigned long long)st.failures,
                       watched[i].required ? "" : "; optional: scheduling does not wait for it");
    }
}

/* Publishes the live charge per queue on /metrics, as the accounting store charges it. */
static void publish_charges(struct sched *s)
{
    static struct gs_schedmetrics_charge rows[GS_SCHEDMETRICS_QUEUES_MAX];
    uint32_t n =
        gs__sched_acct_charges(s->acct, gs__sched_wall_ms(), rows, GS_SCHEDMETRICS_QUEUES_MAX);
    if (n && gs_schedmetrics_set_charges(s->metrics, rows, n) != GS_OK)
        gs__sched_logf("warn", "/metrics: out of memory; charge series not updated");
}

/*
 * One loop turn of `gpusched accountant` once its caches synced: the store opened before the
 * first world cycle, world cycles (observing: they adopt what the API server shows bound and
 * place nothing, kworld.h) when something changed and at least once a second, the restart's
 * reconcile after the first, the /metrics series once a second, commits at most once a second.
 * Nothing is sent to the API server. Returns -1 to go on, else the exit code.
 */
static int follower_turn(struct sched *s, uint64_t *cycles, int64_t *last_cycle,
                         int64_t *last_flush, const char *pool_label)
{
    int64_t now = gs__sched_mono_ms();
    char err[512] = "";
    if (*cycles == 0 || s->dirty || now - *last_cycle >= 1000) {
        if (*cycles == 0 && gs__sched_acct_start(s->acct, err, sizeof(err)) != GS_OK) {
            gs__sched_logf("error", "--accounting: %s", err);
            return 2;
        }
        s->dirty = false;
        *last_cycle = now;
        int rc = gs_kworld_cycle(s->world, gs__sched_wall_ms(), NULL, err, sizeof(err));
        if (rc == GS_EINVAL) {
            gs__sched_logf("error", "cannot follow the cluster: %s", err);
            return 2;
        }
        if (rc) {
            gs__sched_logf("error", "world cycle failed: %s", gs_strerror(rc));
            return 1;
        }
        (*cycles)++;
        if (gs__sched_acct_reconcile(s->acct, s->world, gs__sched_wall_ms()) != GS_OK)
            gs__sched_logf("error", "accounting: reconciling the open intervals: %s",
                           gs__sched_acct_errmsg(s->acct));
    }
    if (now - *last_flush >= 1000) {
        if (s->metrics && gs_schedmetrics_observe(
                              s->metrics, gs_kworld_engine(s->world), gs_kworld_cluster(s->world),
                              gs_kworld_workload(s->world, NULL), pool_label) != GS_OK)
            gs__sched_logf("warn", "/metrics: out of memory; queue and pool series not updated");
        if (s->metrics)
            publish_charges(s);
        *last_flush = now;
    }
    if (gs__sched_acct_step(s->acct, gs__sched_wall_ms()) != GS_OK)
        gs__sched_logf("error", "accounting: %s (the last second of intervals is lost)",
                       gs__sched_acct_errmsg(s->acct));
    return -1;
}

int gs_cmd_scheduler(int argc, char **argv)
{
    struct gs__sched_opts o;
    int prc = gs__sched_parse_opts(argc, argv, &o);
    return prc >= 0 ? prc : gs__sched_run(&o);
}

int gs__sched_run(const struct gs__sched_opts *op)
{
    struct gs__sched_opts o = *op;
    if (o.follower) {
        command = "accountant";
        o.elect = 0;
    }
    const char *kubeconfig = o.kubeconfig, *name = o.name, *dq = o.dq, *policy = o.policy;
    const char *lease_ns = o.lease_ns, *lease_name = o.lease_name, *metrics_addr = o.metrics_addr;
    const char *wh_addr = o.wh_addr, *wh_cert = o.wh_cert, *wh_key = o.wh_key;
    const char *acct_path = o.acct_path, *team_label = o.team_label, *pool_label = o.pool_label;
    long max_runtime_s = o.max_runtime_s, shutdown_timeout_s = o.shutdown_timeout_s;
    bool dry = o.dry;
    int elect = o.elect;
    gs__sched_log_set_format(o.log_format);
    struct gs_kube_config cfg;
    int rc = gs__cli_kube_config(command, kubeconfig, &cfg);
    if (rc)
        return rc;
    if (elect < 0)
        elect = !dry;
    /* holderIdentity: hostname_pid_random, unique even for two replicas in one pod's netns. */
    char identity[128], host[64] = "gpusched";
    if (gethostname(host, sizeof(host)) != 0)
        (void)snprintf(host, sizeof(host), "gpusched");
    host[sizeof(host) - 1] = '\0';
    unsigned int rnd = (unsigned int)gs__sched_mono_ms() ^ (unsigned int)getpid() * 2654435761U;
    FILE *ur = fopen("/dev/urandom", "rb");
    if (ur) {
        if (fread(&rnd, sizeof(rnd), 1, ur) != 1)
            rnd ^= (unsigned int)gs__sched_wall_ms();
        (void)fclose(ur);
    }
    (void)snprintf(identity, sizeof(identity), "%s_%ld_%08x", host, (long)getpid(), rnd);
    struct sched s;
    memset(&s, 0, sizeof(s));
    s.dry_run = dry;
    s.follower = o.follower;
    s.dynamic_mig = o.dynamic_mig;
    s.mig_plan_timeout_ms = o.mig_plan_timeout_s * 1000;
    s.identity = identity;
    s.sched_name = name ? name : GS_KWORLD_SCHEDULER;
    if (metrics_addr) {
        uint16_t port = 0;
        rc = gs_schedmetrics_new(&s.metrics);
        if (rc == GS_OK)
            rc = gs_schedmetrics_serve(s.metrics, metrics_addr, &port);
        if (rc) {
            start_failure("--metrics-addr %s: %s", metrics_addr,
                          rc == GS_EIO ? "cannot listen there" : gs_strerror(rc));
            gs_schedmetrics_free(s.metrics);
            gs_webhook_server_free(s.webhook);
            gs_kube_config_fini(&cfg);
            return 2;
        }
        gs__sched_logf("info", "serving /healthz /readyz /metrics on %s (port %u)", metrics_addr,
                       (unsigned)port);
    }
    if (wh_addr) {
        struct gs_webhook_server_opts wo = {.addr = wh_addr,
                                            .cert_file = wh_cert,
                                            .key_file = wh_key,
                                            .scheduler_name = s.sched_name,
                                            .log = on_webhook_log};
        char werr[600];
        uint16_t port = 0;
        rc = gs_webhook_server_start(&wo, &s.webhook, &port, werr, sizeof(werr));
        if (rc) {
            start_failure("webhook: %s", werr);
            gs_schedmetrics_free(s.metrics);
            gs_kube_config_fini(&cfg);
            return 2;
        }
        gs__sched_logf("info",
                       "serving the admission webhook at https://%s" GS_WEBHOOK_PATH " (port %u)",
                       wh_addr, (unsigned)port);
    }
    struct gs_kube_client *lease_client = NULL;
    struct gs_kube_client_opts opts = {.qps = o.qps, .burst = (uint32_t)o.burst};
    rc = gs_kube_client_new(&cfg, &opts, &s.client);
    if (rc == GS_OK && elect) {
        /* Its own connection and a 4 s limit: a renewal must never wait behind a list or bind,
         * nor hang past the renew deadline. */
        struct gs_kube_client_opts lo = {.qps = -1, .timeout_ms = 4000, .connect_timeout_ms = 2000};
        rc = gs_kube_client_new(&cfg, &lo, &lease_client);
    }
    gs_kube_config_fini(&cfg);
    if (rc) {
        start_failure("cannot make an API client: %s", gs_strerror(rc));
        gs_kube_client_free(s.client);
        gs_schedmetrics_free(s.metrics);
        gs_webhook_server_free(s.webhook);
        return 1;
    }
    struct gs_kevents_opts eo = {.instance = identity, .log = log_event_failure};
    if (gs_kevents_new(s.client, &eo, &s.events) != GS_OK) {
        start_failure("out of memory");
        gs_kube_client_free(lease_client);
        gs_kube_client_free(s.client);
        gs_schedmetrics_free(s.metrics);
        gs_webhook_server_free(s.webhook);
        return 1;
    }
    if (elect) {
        struct gs_kube_leader_opts lopts = {
            .namespace_ = lease_ns, .name = lease_name, .identity = identity};
        rc = gs_kube_leader_new(lease_client, &lopts, &s.leader);
        if (rc) {
            start_failure("leader election: %s", gs_strerror(rc));
            gs_kevents_free(s.events);
            gs_kube_client_free(lease_client);
            gs_kube_client_free(s.client);
            gs_schedmetrics_free(s.metrics);
            gs_webhook_server_free(s.webhook);
            return 2;
        }
    }
    struct gs_kworld_config wc;
    gs__cli_kworld_config(&wc, name, dq, policy, o.kai_preemptible, o.kai_threshold);
    wc.dynamic_mig = o.dynamic_mig && !s.follower;
    wc.on_event = on_world_event;
    wc.on_warning = on_world_warning;
    wc.ctx = &s;
    if (s.follower) { /* the leader's decisions, as the API server shows them */
        wc.observe = true;
        wc.preemption = wc.reclaim = wc.backfill = false;
    }
    struct gs_kube_informer *inf[N_WATCHED] = {0};
    uint64_t watch_failures_seen[N_WATCHED] = {0};
    int64_t watch_warned_ms[N_WATCHED] = {0};
    struct feed feeds[N_WATCHED];
    memset(feeds, 0, sizeof(feeds));
    int exit_code = 0;
    s.held = json_object();
    s.bind_attempts = json_object();
    s.pdb_blocked = json_object();
    s.pending_said = json_object();
    s.failed_told = json_object();
    s.unblock = json_object();
    s.queue_status = json_object();
    s.gang_bound = json_object();
    if (!s.held || !s.bind_attempts || !s.pdb_blocked || !s.pending_said || !s.failed_told ||
        !s.unblock || !s.queue_status || !s.gang_bound) {
        exit_code = 1;
        goto out;
    }
    if (gs_kworld_new(&wc, &s.world) != GS_OK ||
        (acct_path && gs__sched_acct_new(acct_path, team_label, &s.acct) != GS_OK)) {
        exit_code = 1;
        goto out;
    }
    if (s.follower)
        gs__sched_acct_follow(s.acct);
    for (size_t i = 0; i < N_WATCHED; i++) {
        struct gs_kube_informer_opts io = {.path = watched[i].path};
        if (s.follower && !watched[i].follower)
            continue;
        feeds[i] = (struct feed){
            .s = &s, .path = watched[i].path, .kind = watched[i].kind, .known = json_object()};
        if (!feeds[i].known ||
            gs_kube_informer_new(s.client, &io, on_informer, &feeds[i], &inf[i]) != GS_OK) {
            exit_code = 1;
            goto out;
        }
        feeds[i].inf = inf[i];
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    if (s.follower)
        gs__sched_logf("info",
                       "gpusched accountant %s: following schedulerName=%s, recording to %s",
                       GS_VERSION, name ? name : GS_KWORLD_SCHEDULER, acct_path);
    else
        gs__sched_logf("info",
                       "gpusched scheduler %s: serving schedulerName=%s policy=%s identity=%s%s",
                       GS_VERSION, name ? name : GS_KWORLD_SCHEDULER, policy, identity,
                       dry ? " (dry run)" : "");
    if (s.leader)
        gs__sched_logf("info", "leader election on lease %s/%s: standing by until it is ours",
                       lease_ns, lease_name);
    int64_t t0 = gs__sched_mono_ms(), last_cycle = 0, last_flush = 0;
    const json_t *queues_known = NULL; /* the Queue objects the watch delivered */
    for (size_t i = 0; i < N_WATCHED && !queues_known; i++)
        if (strcmp(watched[i].kind, "Queue") == 0 &&
            feeds[i].known) /* gpusched's: the status written is its */
            queues_known = feeds[i].known;
    bool started = false, was_leader = false;
    uint64_t cycles = 0;
    while (!stop_flag) {
        if (max_runtime_s && gs__sched_mono_ms() - t0 >= max_runtime_s * 1000)
            break;
        if ((rc = gs_kube_client_step(s.client, 50)) != GS_OK) {
            gs__sched_logf("error", "API client failed: %s", gs_strerror(rc));
            exit_code = 1;
            break;
        }
        if (s.leader) {
            if (gs_kube_leader_step(s.leader, gs__sched_mono_ms()) != GS_OK) {
                gs__sched_logf("error", "leader election: out of memory");
                exit_code = 1;
                break;
            }
            bool now_leader = leading(&s);
            if (now_leader && !was_leader)
                gs__sched_logf("info", "leader: acquired lease %s/%s as %s", lease_ns, lease_name,
                               identity);
            was_leader = now_leader;
            if (gs_kube_leader_lost(s.leader) || s.lost) {
                struct gs_kube_leader_stats ls;
                gs_kube_leader_get_stats(s.leader, &ls);
                gs__sched_logf("error",
                               "leader: lost lease %s/%s (holder now '%s', last renewal %lld ms "
                               "ago); stopping",
                               lease_ns, lease_name, gs_kube_leader_holder(s.leader),
                               (long long)(gs__sched_mono_ms() - ls.last_renew_ms));
                s.lost = true;
                exit_code = 1;
                break;
            }
        }
        warn_watch_failures(inf, watch_failures_seen, watch_warned_ms, gs__sched_mono_ms());
        if (!started) {
            bool ready = true;
            for (size_t i = 0; i < N_WATCHED; i++) {
                struct gs_kube_informer_stats st;
                if (!inf[i])
                    continue;
                gs_kube_informer_get_stats(inf[i], &st);
                bool tried = gs_kube_informer_synced(inf[i]) || st.failures > 0;
                if (watched[i].required ? !gs_kube_informer_synced(inf[i]) : !tried)
                    ready = false;
            }
            if (!ready)
                continue;
            started = true;
            gs_schedmetrics_set_ready(s.metrics, true);
            gs__sched_logf("info", "caches synced in %lld ms",
                           (long long)(gs__sched_mono_ms() - t0));
        }
        gs_schedmetrics_set_leader(s.metrics, !s.follower && (!s.leader || was_leader));
        if (s.follower) {
            int fr = follower_turn(&s, &cycles, &last_cycle, &last_flush, pool_label);
            if (fr >= 0) {
                exit_code = fr;
                break;
            }
            continue;
        }
        if (s.leader && !was_leader)
            continue; /* standby: caches stay warm, nothing is decided */
        gs__sched_process_held(&s);
        gs__sched_gang_retry(&s, s.dry_run || leading(&s));
        check_unblock(&s);
        check_nominations(&s);
        gs__sched_migplan_check(&s, !s.dry_run && leading(&s));
        int64_t now = gs__sched_mono_ms();
        if (now - last_flush >= 1000) {
            gs_kevents_flush(s.events, false);
            if (!s.dry_run && cycles > 0)
                write_queue_status(&s, queues_known);
            /* Queue and pool series, once a second: a pass over every node (bench_schedmetrics). */
            if (s.metrics && cycles > 0 &&
                gs_schedmetrics_observe(s.metrics, gs_kworld_engine(s.world),
                                        gs_kworld_cluster(s.world),
                                        gs_kworld_workload(s.world, NULL), pool_label) != GS_OK)
                gs__sched_logf("warn",
                               "/metrics: out of memory; queue and pool series not updated");
            /* Charged GPU-seconds per queue, live, as the accounting store charges them. */
            if (s.metrics && s.acct)
                publish_charges(&s);
            last_flush = now;
        }
        if (s.acct && gs__sched_acct_step(s.acct, gs__sched_wall_ms()) != GS_OK)
            gs__sched_logf("error", "accounting: %s (the last second of intervals is lost)",
                           gs__sched_acct_errmsg(s.acct));
        if (!s.dirty && now - last_cycle < 1000)
            continue;
        s.dirty = false;
        last_cycle = now;
        uint32_t changes = 0;
        char err[512] = "";
        if (s.acct && cycles == 0 && gs__sched_acct_start(s.acct, err, sizeof(err)) != GS_OK) {
            gs__sched_logf("error", "--accounting: %s", err);
            exit_code = 2;
            break;
        }
        int64_t c0_ns = mono_ns();
        (void)json_object_clear(s.failed_told); /* do_pending's posts of this cycle, from now */
        s.cycle = cycles + 1; /* the decisions of this cycle say so (the bind log line) */
        rc = gs_kworld_cycle(s.world, gs__sched_wall_ms(), &changes, err, sizeof(err));
        cycles++;
        if (s.acct && rc == GS_OK &&
            gs__sched_acct_reconcile(s.acct, s.world, gs__sched_wall_ms()) != GS_OK)
            gs__sched_logf("error", "accounting: reconciling the open intervals: %s",
                           gs__sched_acct_errmsg(s.acct));
        if (s.metrics) {
            uint32_t pending = 0, decided = 0;
            gs_kworld_each_pending(s.world, count_pending, &pending);
            for (size_t i = 0; i < s.nacts; i++)
                decided += s.acts[i].kind != GS_KEV_EVICT; /* a BIND or a PENDING */
            gs_schedmetrics_cycle(s.metrics, (double)(mono_ns() - c0_ns) / 1e9, pending, decided);
        }
        if (rc == GS_EINVAL) {
            gs__sched_logf("error", "cannot schedule: %s", err);
            exit_code = 2;
            break;
        }
        if (rc) {
            gs__sched_logf("error", "scheduling cycle failed: %s", gs_strerror(rc));
            exit_code = 1;
            break;
        }
        send_actions(&s);
        if (!s.dry_run && leading(&s))
            say_all_pending(&s);
        if (changes)
            s.dirty = true; /* settle: cycle again until nothing changes */
    }
    send_actions(&s); /* drain decisions already made (nothing when the Lease is lost) */
    /* Requests in flight: their answers are awaited (--shutdown-timeout-s at most), as SIGTERM
     * promises. */
    for (int64_t until = gs__sched_mono_ms() + shutdown_timeout_s * 1000;
         gs_kube_client_in_flight(s.client) > 0 && gs__sched_mono_ms() < until && !s.lost;)
        if (gs_kube_client_step(s.client, 50) != GS_OK)
            break;
    if (gs_kube_client_in_flight(s.client) > 0)
        gs__sched_logf("warn",
                       "%zu request(s) (Bindings, Events) still in flight at exit; their "
                       "answers are not read",
                       gs_kube_client_in_flight(s.client));
    if (!s.lost && (!s.leader || leading(&s)))
        gs_kevents_flush(s.events, true); /* the counts not written yet */
    if (s.leader) {
        struct gs_kube_leader_stats ls;
        gs_kube_leader_get_stats(s.leader, &ls);
        if (!s.lost && gs_kube_leader_is_leader(s.leader, gs__sched_mono_ms())) {
            rc = gs_kube_leader_release(s.leader, gs__sched_mono_ms());
            gs__sched_logf(rc ? "warn" : "info", "leader: released lease %s/%s%s%s", lease_ns,
                           lease_name, rc ? ": " : "", rc ? gs_strerror(rc) : "");
        }
        gs__sched_logf("info",
                       "leader: renewals=%llu failures=%llu longest gap between renewals=%lld ms",
                       (unsigned long long)ls.renewals, (unsigned long long)ls.failures,
                       (long long)ls.max_renew_gap_ms);
    }
    /* Event creates still unanswered: freeing the client drops them. */
    uint64_t dropped = gs_kevents_unanswered(s.events, NULL);
    gs__sched_logf(dropped ? "warn" : "info",
                   "events dropped at exit (unanswered after the %ld s drain): Scheduled=%llu "
                   "FailedScheduling=%llu Preempted=%llu",
                   shutdown_timeout_s,
                   (unsigned long long)gs_kevents_unanswered(s.events, "Scheduled"),
                   (unsigned long long)gs_kevents_unanswered(s.events, "FailedScheduling"),
                   (unsigned long long)gs_kevents_unanswered(s.events, "Preempted"));
    struct gs_kevents_stats es = {0};
    gs_kevents_get_stats(s.events, &es);
    gs__sched_logf("info",
                   "stopping: cycles=%llu binds=%llu bind_failures=%llu evictions=%llu events=%llu "
                   "events_counted=%llu series_patches=%llu events_dropped=%llu",
                   (unsigned long long)cycles, (unsigned long long)s.binds,
                   (unsigned long long)s.bind_failures, (unsigned long long)s.evictions,
                   (unsigned long long)es.created, (unsigned long long)es.counted,
                   (unsigned long long)es.patched, (unsigned long long)dropped);
out:
    if (s.acct) {
        struct gs__sched_acct_stats as = {0};
        int arc = gs__sched_acct_free(s.acct, gs__sched_wall_ms(), &as);
        gs__sched_logf(arc ? "error" : "info",
                       "accounting: opened=%llu closed=%llu kept=%llu recovered=%llu "
                       "recovered_finished=%llu commits=%llu commit_ms_mean=%.3f "
                       "commit_ms_max=%.3f%s",
                       (unsigned long long)as.opened, (unsigned long long)as.closed,
                       (unsigned long long)as.kept, (unsigned long long)as.recovered,
                       (unsigned long long)as.recovered_finished, (unsigned long long)as.commits,
                       as.commits ? as.commit_ms_total / (double)as.commits : 0.0, as.commit_ms_max,
                       arc ? " (the last commit failed)" : "");
    }
    for (size_t i = 0; i < s.nacts; i++)
        gs__sched_action_fini(&s.acts[i]);
    free(s.acts);
    while (s.nnoms)
        nomination_drop(&s, 0);
    free(s.noms);
    gs__sched_migplan_fini(&s);
    for (size_t i = 0; i < N_WATCHED; i++) {
        json_decref(feeds[i].known);
        json_decref(feeds[i].seen);
    }
    json_decref(s.held);
    json_decref(s.bind_attempts);
    json_decref(s.pdb_blocked);
    json_decref(s.pending_said);
    json_decref(s.failed_told);
    json_decref(s.unblock);
    json_decref(s.queue_status);
    gs__sched_gang_fini(&s);
    gs_kube_client_free(s.client); /* frees the informers */
    gs__sched_bind_fini(&s);       /* the Bindings it dropped unanswered */
    gs_kube_leader_free(s.leader);
    gs_kube_client_free(lease_client);
    gs_kworld_free(s.world);
    gs_schedmetrics_free(s.metrics);   /* stops its thread first */
    gs_webhook_server_free(s.webhook); /* likewise */
    gs_kevents_free(s.events);
    return exit_code;
}
