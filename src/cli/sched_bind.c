/*
 * Bindings of `gpusched scheduler` (internals in sched_int.h): a pod's Binding goes out without
 * waiting, with its GPU choice as the annotation gpusched.io/assigned-gpus; the engine has
 * assumed the placement, so no later cycle hands those GPUs out while it is in flight. A bind
 * the server refuses releases what the pod held at once (forgotten) and the pod is read again:
 * at once after a 409, after a backoff of 1 s doubling to 10 s otherwise. Pods held out of the
 * world until due live here too (hold, read again). A gang member's refused Binding is the
 * exception: it is retried on the GPUs held for it for 30 s, then its gang is released whole
 * (the block comment above retry_drop()).
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sched_int.h"
#include "gpusched/err.h"
#include "gpusched/tenant.h"

/* Escapes nothing: namespaces and names are DNS labels and subdomains. */
void gs__sched_pod_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub)
{
    (void)snprintf(buf, cap, "/api/v1/namespaces/%s/pods/%s%s%s", ns, name, sub ? "/" : "",
                   sub ? sub : "");
}

char *gs__sched_key_of(const char *ns, const char *name)
{
    size_t n = strlen(ns) + strlen(name) + 2;
    char *k = malloc(n);
    if (k)
        (void)snprintf(k, n, "%s/%s", ns, name);
    return k;
}

/* Holds pod ns/name out of the world until due_ms, then reads it again (gs__sched_process_held). */
void gs__sched_hold_pod(struct sched *s, const char *ns, const char *name, int64_t due_ms)
{
    char *k = gs__sched_key_of(ns, name);
    json_t *e = json_pack("{s:s,s:s,s:I}", "ns", ns, "name", name, "due_ms", (json_int_t)due_ms);
    if (!k || !e || json_object_set_new(s->held, k, e))
        gs__sched_logf("error", "out of memory holding pod=%s/%s", ns, name);
    free(k);
}

bool gs__sched_is_held(struct sched *s, const char *ns, const char *name)
{
    char *k = gs__sched_key_of(ns, name);
    bool held = k && json_object_get(s->held, k) != NULL;
    free(k);
    return held;
}

/*
 * Reads the held pods that are due: the pod as it is now enters the world (bound elsewhere, it is
 * adopted there; still pending, it is placed afresh); gone, it is dropped; a failed read is tried
 * again a second later.
 */
void gs__sched_process_held(struct sched *s)
{
    int64_t now = gs__sched_mono_ms();
    const char *k;
    json_t *e, *tmp;
    json_object_foreach_safe(s->held, tmp, k, e)
    {
        if (json_integer_value(json_object_get(e, "due_ms")) > now)
            continue;
        const char *ns = json_string_value(json_object_get(e, "ns"));
        const char *name = json_string_value(json_object_get(e, "name"));
        char path[600];
        gs__sched_pod_path(path, sizeof(path), ns, name, NULL);
        struct gs_kube_response r;
        memset(&r, 0, sizeof(r));
        int err = gs_kube_request(s->client, GS_KUBE_GET, path, NULL, &r);
        if (err == GS_OK && r.body) {
            json_object_set_new(r.body, "kind", json_string("Pod"));
            (void)gs_kworld_forget_pod(s->world, ns, name, gs__sched_wall_ms()); /* a fresh entry */
            char msg[256];
            const char *node =
                json_string_value(json_object_get(json_object_get(r.body, "spec"), "nodeName"));
            gs__sched_logf("info", "pod=%s/%s read again: %s%s", ns, name,
                           node ? "bound to " : "pending", node ? node : "");
            if (gs_kworld_apply(s->world, GS_KADDED, r.body, gs__sched_wall_ms(), msg,
                                sizeof(msg)) != GS_OK)
                gs__sched_logf("warn", "pod=%s/%s: %s", ns, name, msg);
            json_object_del(s->held, k);
            s->dirty = true;
        } else if (err == GS_ENOENT) {
            json_object_del(s->held, k); /* gone meanwhile */
        } else {
            gs__sched_logf("warn", "cannot read pod=%s/%s again: HTTP %ld %s; retrying in 1 s", ns,
                           name, r.http_status, r.message[0] ? r.message : gs_strerror(err));
            json_object_set_new(e, "due_ms", json_integer(now + 1000));
        }
        gs_kube_response_fini(&r);
    }
}

/* Writes PodScheduled=False with a reason and message (Unschedulable, SchedulerError). */
int gs__sched_patch_scheduled_false(struct sched *s, const char *ns, const char *name,
                                    const char *reason, const char *msg)
{
    json_t *body = json_pack("{s:{s:[{s:s,s:s,s:s,s:s}]}}", "status", "conditions", "type",
                             "PodScheduled", "status", "False", "reason", reason, "message", msg);
    char path[600];
    gs__sched_pod_path(path, sizeof(path), ns, name, "status");
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err =
        body ? gs_kube_request(s->client, GS_KUBE_PATCH_STRATEGIC, path, body, &r) : GS_ENOMEM;
    if (err == GS_OK)
        s->status_patches++;
    else if (err != GS_ENOENT)
        gs__sched_logf("warn", "status of pod=%s/%s not written: HTTP %ld %s", ns, name,
                       r.http_status, r.message);
    gs_kube_response_fini(&r);
    json_decref(body);
    return err;
}

/*
 * After a refused bind the pod gives back at once what the engine held for it (forgotten), and:
 * 409, someone else bound it (or it is being deleted): it is read again at once and adopted
 * where it is; 404, it is gone; anything else (an admission webhook's refusal, a transport
 * failure): it waits out a backoff of 1 s doubling to 10 s per refusal in a row, as
 * kube-scheduler's, with PodScheduled=False reason SchedulerError saying why, and is read again
 * then. A pod that keeps failing so never holds GPUs that the pods behind it could use.
 */
static void bind_refused(struct sched *s, const struct action *a, int err,
                         const struct gs_kube_response *r)
{
    (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
    s->dirty = true;
    if (err == GS_ENOENT)
        return;
    if (err == GS_ECONFLICT || err == GS_EEXIST) {
        gs__sched_logf("info", "pod=%s/%s: bind conflict (%s); reading it again", a->ns, a->name,
                       r->message[0] ? r->message : gs_strerror(err));
        gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms());
        return;
    }
    char *k = gs__sched_key_of(a->ns, a->name);
    json_int_t n = k ? json_integer_value(json_object_get(s->bind_attempts, k)) : 0;
    int64_t delay = BIND_BACKOFF_INITIAL_MS;
    for (json_int_t i = 0; i < n && delay < BIND_BACKOFF_MAX_MS; i++)
        delay *= 2;
    if (delay > BIND_BACKOFF_MAX_MS)
        delay = BIND_BACKOFF_MAX_MS;
    if (k)
        json_object_set_new(s->bind_attempts, k, json_integer(n + 1));
    free(k);
    char msg[900];
    if (r->http_status)
        (void)snprintf(msg, sizeof(msg),
                       "binding to node %s failed: HTTP %ld%s%s: %s; retrying in %lld ms",
                       a->node ? a->node : "?", r->http_status, r->reason[0] ? " " : "", r->reason,
                       r->message[0] ? r->message : gs_strerror(err), (long long)delay);
    else
        (void)snprintf(msg, sizeof(msg), "binding to node %s failed: %s; retrying in %lld ms",
                       a->node ? a->node : "?", r->message[0] ? r->message : gs_strerror(err),
                       (long long)delay);
    gs__sched_logf("info", "pod=%s/%s backs off %lld ms after %lld refused bind(s)", a->ns, a->name,
                   (long long)delay, (long long)(n + 1));
    (void)gs__sched_patch_scheduled_false(s, a->ns, a->name, "SchedulerError", msg);
    gs__sched_post_event(s, a, "Warning", "FailedScheduling", "Scheduling", msg);
    gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms() + delay);
}

/* A Binding in flight: the action it sends, owned, until its answer. */
struct bind_call {
    struct sched *s;
    struct bind_call *prev, *next; /* s->in_flight: the calls in flight */
    struct action a;
    char *ann;        /* the assignment annotation sent */
    int64_t first_ms; /* a gang member's retry: its first refusal (monotonic); 0 first try */
    uint32_t tries;   /* refusals before this try */
};

static void gang_refused(struct sched *s, struct bind_call *bc, int err,
                         const struct gs_kube_response *r);
static void send_bind(struct sched *s, struct action *a, int64_t first_ms, uint32_t tries);

/*
 * Seconds since the engine's submission of the pod of a (its creationTimestamp, or when it was
 * first seen if earlier), by the wall clock; -1 when the pod is not found.
 */
static double since_submit_s(const struct sched *s, const struct action *a)
{
    const struct gs_engine *e = s->world ? gs_kworld_engine(s->world) : NULL;
    int64_t id = e && a->uid ? gs_engine_find_pod(e, a->uid) : -1;
    struct gs_tpod_info pi;
    if (id < 0 || gs_engine_pod_info(e, (uint32_t)id, &pi) != GS_OK)
        return -1;
    int64_t d = gs__sched_wall_ms() - pi.submit_ms;
    return d > 0 ? (double)d / 1000.0 : 0;
}

/* Adds bc to the calls in flight, before its request is sent. */
static void link_call(struct bind_call *bc)
{
    bc->prev = NULL;
    bc->next = bc->s->in_flight;
    if (bc->next)
        bc->next->prev = bc;
    bc->s->in_flight = bc;
}

/* Takes bc off the calls in flight, once it is answered. */
static void unlink_call(struct bind_call *bc)
{
    if (bc->prev)
        bc->prev->next = bc->next;
    else
        bc->s->in_flight = bc->next;
    if (bc->next)
        bc->next->prev = bc->prev;
    bc->prev = bc->next = NULL;
}

static void call_free(struct bind_call *bc)
{
    gs__sched_action_fini(&bc->a);
    free(bc->ann);
    free(bc);
}

void gs__sched_bind_fini(struct sched *s)
{
    struct bind_call *bc = s->in_flight;
    s->in_flight = NULL;
    while (bc) {
        struct bind_call *next = bc->next;
        call_free(bc);
        bc = next;
    }
}

/* The answer to a Binding (inside gs_kube_client_step). */
static void bind_done(void *ud, int err, struct gs_kube_response *r)
{
    struct bind_call *bc = ud;
    struct sched *s = bc->s;
    const struct action *a = &bc->a;
    unlink_call(bc);
    if (err == GS_OK) {
        s->binds++;
        char *k = gs__sched_key_of(a->ns, a->name);
        if (k) {
            (void)json_object_del(s->bind_attempts, k);
            (void)json_object_del(s->pdb_blocked, k);
            (void)json_object_del(s->unblock, k);
            gs_kworld_avoid_clear(s->world, a->ns, a->name);
        }
        free(k);
        gs_schedmetrics_bind(s->metrics, true);
        gs_schedmetrics_attempt(s->metrics, GS_SCHED_SCHEDULED);
        gs_schedmetrics_pod_scheduled(s->metrics, since_submit_s(s, a));
        gs__sched_logf("info", "bound pod=%s/%s node=%s cycle=%llu queue=%s gpus=%s", a->ns,
                       a->name, a->node, (unsigned long long)a->cycle, a->queue ? a->queue : "",
                       bc->ann ? bc->ann : "");
        if (a->gang) {
            json_t *set = json_object_get(s->gang_bound, a->gang);
            if (!set && json_object_set_new(s->gang_bound, a->gang, set = json_object()))
                set = NULL;
            char *gk = gs__sched_key_of(a->ns, a->name);
            if (!set || !gk || json_object_set_new(set, gk, json_true()))
                gs__sched_logf("error", "out of memory recording gang %s's member %s/%s", a->gang,
                               a->ns, a->name);
            free(gk);
        }
        char gl[GS_NODE_GPUS_MAX * 28 + 16] = "", note[900];
        size_t n = 0;
        for (size_t g = 0; g < json_array_size(a->gpus) && n < sizeof(gl) - 16; g++) {
            json_t *e = json_array_get(a->gpus, g);
            json_int_t idx = json_integer_value(json_object_get(e, "index"));
            json_int_t milli = json_integer_value(json_object_get(e, "milli"));
            const json_t *mig = json_object_get(e, "mig");
            const json_t *mem = json_object_get(e, "mem_mib");
            const json_t *start = json_object_get(mig, "start");
            int w =
                mig && !json_is_integer(start) /* read from capacity: the agent picks */
                    ? snprintf(gl + n, sizeof(gl) - n, "%s%lld:%s", n ? "," : "", (long long)idx,
                               json_string_value(json_object_get(mig, "profile")))
                    : mig   ? snprintf(gl + n, sizeof(gl) - n, "%s%lld:%s@%lld", n ? "," : "",
                                       (long long)idx,
                                       json_string_value(json_object_get(mig, "profile")),
                                       (long long)json_integer_value(start))
                      : mem ? snprintf(gl + n, sizeof(gl) - n, "%s%lld:%lldMiB", n ? "," : "",
                                       (long long)idx, (long long)json_integer_value(mem))
                      : milli == 1000
                          ? snprintf(gl + n, sizeof(gl) - n, "%s%lld", n ? "," : "", (long long)idx)
                          : snprintf(gl + n, sizeof(gl) - n, "%s%lld:%lldm", n ? "," : "",
                                     (long long)idx, (long long)milli);
            if (w < 0)
                break;
            n += (size_t)w;
        }
        (void)snprintf(note, sizeof(note), "Successfully assigned %s/%s to %s%s%s%s", a->ns,
                       a->name, a->node, n ? " (GPUs " : "", gl, n ? ")" : "");
        gs__sched_post_event(s, a, "Normal", "Scheduled", "Binding", note);
    } else {
        s->bind_failures++;
        gs_schedmetrics_bind(s->metrics, false);
        gs_schedmetrics_attempt(s->metrics, GS_SCHED_ERROR);
        gs__sched_logf("warn", "bind refused pod=%s/%s node=%s: HTTP %ld %s: %s", a->ns, a->name,
                       a->node, r->http_status, r->reason,
                       r->message[0] ? r->message : gs_strerror(err));
        if (a->gang && err != GS_ENOENT && err != GS_ECONFLICT && err != GS_EEXIST)
            gang_refused(s, bc, err, r); /* takes bc->a over */
        else
            bind_refused(s, a, err, r);
    }
    call_free(bc);
}

/*
 * Sends a pod's Binding without waiting for it (assume, then confirm or forget): the engine has
 * the pod running on its GPUs already, so while the Binding is in flight no cycle hands those
 * GPUs to anyone else, and a refusal (bind_done) forgets the pod, releasing them at once. Takes
 * the action over (it is left empty).
 */
json_t *gs__sched_assigned_gpu(const struct gs_kgpu *g)
{
    json_t *o =
        json_pack("{s:I,s:I}", "index", (json_int_t)g->index, "milli", (json_int_t)g->milli);
    if (!o)
        return NULL;
    /* The UUID when the node's agent published its inventory, for the agent to check. */
    if ((g->uuid && json_object_set_new(o, "uuid", json_string(g->uuid)) != 0) ||
        (g->mem_mib > 0 && json_object_set_new(o, "mem_mib", json_integer(g->mem_mib)) != 0) ||
        (g->mig_profile &&
         json_object_set_new(
             o, "mig",
             json_pack("{s:s,s:o}", "profile", g->mig_profile, "start",
                       g->mig_start >= 0 ? json_integer(g->mig_start) : json_null())) != 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void gs__sched_bind(struct sched *s, struct action *a)
{
    send_bind(s, a, 0, 0);
}

static void send_bind(struct sched *s, struct action *a, int64_t first_ms, uint32_t tries)
{
    struct bind_call *bc = calloc(1, sizeof(*bc));
    json_t *assigned = json_pack("{s:O}", "gpus", a->gpus);
    char *ann = assigned ? json_dumps(assigned, JSON_COMPACT) : NULL;
    json_decref(assigned);
    json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:s}}", "apiVersion", "v1",
                             "kind", "Binding", "metadata", "name", a->name, "namespace", a->ns,
                             "annotations", "gpusched.io/assigned-gpus", ann ? ann : "{}", "target",
                             "apiVersion", "v1", "kind", "Node", "name", a->node);
    char path[600];
    gs__sched_pod_path(path, sizeof(path), a->ns, a->name, "binding");
    if (!bc) {
        /* Nothing sent: the pod gives its GPUs back and is read again in a second. */
        gs__sched_logf("error", "out of memory sending the Binding of %s/%s", a->ns, a->name);
        (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
        gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms() + 1000);
        free(ann);
        json_decref(body);
        return;
    }
    bc->s = s;
    bc->a = *a;
    bc->ann = ann;
    bc->first_ms = first_ms;
    bc->tries = tries;
    memset(a, 0, sizeof(*a));
    link_call(bc);
    int err = body ? gs_kube_request_async(s->client, GS_KUBE_POST, path, body, bind_done, bc)
                   : GS_ENOMEM;
    json_decref(body);
    if (err != GS_OK) {
        struct gs_kube_response r;
        memset(&r, 0, sizeof(r));
        r.retry_after_s = -1;
        (void)snprintf(r.message, sizeof(r.message), "cannot send the Binding: %s",
                       gs_strerror(err));
        bind_done(bc, err, &r); /* frees bc */
    }
}

/*
 * Gangs whose bind partly fails (issue 7: "the failed members retry on the GPUs held for them
 * for 30 s, then the gang is released whole; a bound nodeName cannot be undone"). A refused
 * member is not forgotten: the engine keeps it on its node and GPUs, so nothing else is given
 * them, and the same Binding is sent again after 1 s, doubling, the last try at GANG_RETRY_MS
 * after the first refusal. If that one is refused too, the gang is released whole: its
 * refused members are forgotten (their GPUs free at once) and read again, and the members we
 * bound are evicted (reason gang), as they cannot be unbound. A 404 or 409 of a member is
 * handled as any pod's (it is gone, or bound by someone else).
 */
static void retry_drop(struct sched *s, size_t i)
{
    gs__sched_action_fini(&s->gretry[i].bind);
    size_t last = --s->ngretry;
    if (i != last)
        s->gretry[i] = s->gretry[last];
    memset(&s->gretry[last], 0, sizeof(s->gretry[last]));
}

/* Forgets a refused member and reads it again later, holding nothing. */
static void release_member(struct sched *s, const struct action *a, const char *why)
{
    (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
    char msg[900];
    (void)snprintf(msg, sizeof(msg),
                   "gang %s released whole: binding to node %s was refused for %d s (%s)", a->gang,
                   a->node ? a->node : "?", GANG_RETRY_MS / 1000, why);
    (void)gs__sched_patch_scheduled_false(s, a->ns, a->name, "SchedulerError", msg);
    gs__sched_post_event(s, a, "Warning", "FailedScheduling", "Scheduling", msg);
    gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms() + BIND_BACKOFF_INITIAL_MS);
}

/* Releases gang `gang` whole; `failed` (may be NULL) is a refused member not in the list. */
static void release_gang(struct sched *s, const char *gang, const struct action *failed,
                         const char *why)
{
    char *g = strdup(gang); /* gang may point into an action freed below */
    if (!g) {
        gs__sched_logf("error", "out of memory releasing a gang");
        return;
    }
    gs__sched_logf("info", "gang %s released whole: a member's Binding was refused for %d s", g,
                   GANG_RETRY_MS / 1000);
    if (failed)
        release_member(s, failed, why);
    for (size_t i = 0; i < s->ngretry;) {
        if (strcmp(s->gretry[i].bind.gang, g) == 0) {
            release_member(s, &s->gretry[i].bind, why);
            retry_drop(s, i);
            continue;
        }
        i++;
    }
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(s->gang_bound, g), key, v)
    {
        (void)v;
        const char *slash = strchr(key, '/');
        if (!slash)
            continue;
        char ns[256];
        (void)snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
        char text[] = "gang";
        struct action victim = {.kind = GS_KEV_EVICT,
                                .ns = ns,
                                .name = (char *)(uintptr_t)(slash + 1),
                                .text = text,
                                .gang = g};
        char pdb[400] = "";
        gs__sched_mark_disruption_target(s, &victim);
        enum evict_result r = gs__sched_evict_pod(s, &victim, false, pdb, sizeof(pdb));
        if (r == EVICT_BLOCKED || r == EVICT_FAILED)
            gs__sched_logf("warn", "gang %s: bound member %s not evicted (%s); it runs on", g, key,
                           pdb);
    }
    (void)json_object_del(s->gang_bound, g);
    s->dirty = true;
    free(g);
}

static void gang_refused(struct sched *s, struct bind_call *bc, int err,
                         const struct gs_kube_response *r)
{
    struct action *a = &bc->a;
    int64_t now = gs__sched_mono_ms();
    int64_t first = bc->first_ms ? bc->first_ms : now;
    char why[400];
    if (r->http_status)
        (void)snprintf(why, sizeof(why), "HTTP %ld%s%s: %.300s", r->http_status,
                       r->reason[0] ? " " : "", r->reason,
                       r->message[0] ? r->message : gs_strerror(err));
    else
        (void)snprintf(why, sizeof(why), "%.300s", r->message[0] ? r->message : gs_strerror(err));
    if (now - first >= GANG_RETRY_MS) {
        release_gang(s, a->gang, a, why);
        return; /* bc->a is freed by bind_done */
    }
    int64_t delay = BIND_BACKOFF_INITIAL_MS;
    for (uint32_t i = 0; i < bc->tries && delay < BIND_BACKOFF_MAX_MS; i++)
        delay *= 2;
    if (delay > BIND_BACKOFF_MAX_MS)
        delay = BIND_BACKOFF_MAX_MS;
    int64_t due = now + delay > first + GANG_RETRY_MS ? first + GANG_RETRY_MS : now + delay;
    if (s->ngretry == s->capgretry) {
        size_t cap = s->capgretry ? s->capgretry * 2 : 8;
        struct gang_retry *n = realloc(s->gretry, cap * sizeof(*n));
        if (!n) {
            gs__sched_logf("error", "out of memory: gang %s is released at once", a->gang);
            release_gang(s, a->gang, a, why);
            return;
        }
        s->gretry = n;
        s->capgretry = cap;
    }
    struct gang_retry *g = &s->gretry[s->ngretry++];
    g->bind = *a;
    memset(a, 0, sizeof(*a));
    g->first_ms = first;
    g->due_ms = due;
    g->tries = bc->tries + 1;
    char msg[900];
    (void)snprintf(msg, sizeof(msg),
                   "binding to node %s failed: %s; gang %s holds its GPUs: retrying in %lld ms "
                   "(%lld of %d s)",
                   g->bind.node ? g->bind.node : "?", why, g->bind.gang, (long long)(due - now),
                   (long long)((now - first) / 1000), GANG_RETRY_MS / 1000);
    gs__sched_logf("info",
                   "pod=%s/%s gang %s: bind refused %u time(s); retrying on node %s in %lld ms",
                   g->bind.ns, g->bind.name, g->bind.gang, g->tries,
                   g->bind.node ? g->bind.node : "?", (long long)(due - now));
    if (g->tries == 1)
        gs__sched_post_event(s, &g->bind, "Warning", "FailedScheduling", "Scheduling", msg);
}

void gs__sched_gang_retry(struct sched *s, bool live)
{
    int64_t now = gs__sched_mono_ms();
    for (size_t i = 0; live && !s->dry_run && i < s->ngretry;) {
        if (s->gretry[i].due_ms > now) {
            i++;
            continue;
        }
        struct gang_retry g = s->gretry[i];
        memset(&s->gretry[i].bind, 0, sizeof(s->gretry[i].bind));
        retry_drop(s, i);
        send_bind(s, &g.bind, g.first_ms, g.tries); /* takes g.bind over */
    }
}

void gs__sched_gang_pod_gone(struct sched *s, const char *key)
{
    for (size_t i = 0; i < s->ngretry;) {
        char *k = gs__sched_key_of(s->gretry[i].bind.ns, s->gretry[i].bind.name);
        bool gone = k && strcmp(k, key) == 0;
        free(k);
        if (gone) {
            retry_drop(s, i);
            continue;
        }
        i++;
    }
    const char *gang;
    json_t *set, *tmp;
    json_object_foreach_safe(s->gang_bound, tmp, gang, set)
    {
        (void)json_object_del(set, key);
        if (json_object_size(set) == 0)
            (void)json_object_del(s->gang_bound, gang);
    }
}

void gs__sched_gang_fini(struct sched *s)
{
    while (s->ngretry)
        retry_drop(s, 0);
    free(s->gretry);
    s->gretry = NULL;
    s->capgretry = 0;
    json_decref(s->gang_bound);
    s->gang_bound = NULL;
}
