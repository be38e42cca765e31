/*
 * Dynamic MIG in `gpusched scheduler --dynamic-mig` (issue 8): a BIND on a GPU the engine
 * re-partitioned for the pod is not sent at once. The plan (what the node's inventory shows
 * against the layout the engine planned: instances to destroy, then to create) goes on the Node
 * as annotation gpusched.io/mig-plan (include/gpusched/kmigplan.h), the pod is held there as a
 * nominated preemptor is (status.nominatedNodeName; the engine keeps its instance on the planned
 * layout, and the translation keeps that layout while the GPU holds the pod however often the
 * old inventory is read again), and the Binding is sent once the agent's inventory
 * (gpusched.io/gpus) shows the planned layout, naming the new instance as any MIG bind does.
 * A failure the agent writes in gpusched.io/mig-plan-status, or no answer within
 * --mig-plan-timeout-s, removes the plan and releases the pod: the engine forgets it (its
 * layout goes back to the inventory's at the next cycle), it avoids the node for the timeout's
 * length (at least PDB_RETRY_MS), waits with the reason, and is decided again.
 * One plan per node is in flight at a time (the annotation holds one).
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/sched_int.h"
#include "gpusched/err.h"
#include "gpusched/kmigplan.h"
#include "gpusched/kube.h"
#include "gpusched/kworld.h"

/* A pod that met a plan in flight on its node is decided again after this long. */
#define PLAN_BUSY_RETRY_MS 2000

static void copy_slot(struct gs_kmig_inst *dst, const struct gs_kmig_slot *src)
{
    (void)snprintf(dst->profile, sizeof(dst->profile), "%s", src->profile ? src->profile : "");
    dst->start = src->start < 0 ? 0 : (uint32_t)src->start;
}

struct gs__sched_mig *gs__sched_mig_copy(const struct gs_kmig_change *mc)
{
    struct gs__sched_mig *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->gpu = mc->gpu;
    m->known = mc->known;
    m->n_destroy = mc->n_destroy;
    m->n_create = mc->n_create;
    m->n_layout = mc->n_layout;
    for (uint32_t i = 0; i < mc->n_destroy && i < GS_MIG_INSTANCES_MAX; i++)
        copy_slot(&m->destroy[i], &mc->destroy[i]);
    for (uint32_t i = 0; i < mc->n_create && i < GS_MIG_INSTANCES_MAX; i++)
        copy_slot(&m->create[i], &mc->create[i]);
    for (uint32_t i = 0; i < mc->n_layout && i < GS_MIG_INSTANCES_MAX; i++)
        copy_slot(&m->layout[i], &mc->layout[i]);
    return m;
}

/* "1g.10gb@0 1g.10gb@1" into buf. */
static void list_text(const struct gs_kmig_inst *in, uint32_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s@%u", i ? " " : "", in[i].profile, in[i].start);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (n == 0)
        (void)snprintf(buf, cap, "none");
}

/* Sets the node's plan annotation to text (NULL removes it) and, with clear_status, removes
 * the agent's last outcome. */
static int patch_node(struct sched *s, const char *node, const char *text, bool clear_status)
{
    json_t *ann = json_object();
    if (!ann)
        return GS_ENOMEM;
    json_object_set_new(ann, GS_KMIGPLAN_ANNOTATION, text ? json_string(text) : json_null());
    if (clear_status)
        json_object_set_new(ann, GS_KMIGPLAN_STATUS_ANNOTATION, json_null());
    json_t *body = json_pack("{s:{s:o}}", "metadata", "annotations", ann);
    char path[400];
    (void)snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int err = body ? gs_kube_request(s->client, GS_KUBE_PATCH_MERGE, path, body, &r) : GS_ENOMEM;
    if (err != GS_OK && err != GS_ENOENT)
        gs__sched_logf("warn", "annotation %s of node=%s not written: HTTP %ld %s",
                       GS_KMIGPLAN_ANNOTATION, node, r.http_status,
                       r.message[0] ? r.message : gs_strerror(err));
    gs_kube_response_fini(&r);
    json_decref(body);
    return err;
}

/*
 * Releases a pod whose re-partition will not happen: the engine forgets it (the GPU's layout
 * goes back to the inventory's at the next cycle), it avoids the node for a while and waits
 * with `why` as its reason, and is read again to be decided afresh.
 */
static void release(struct sched *s, const struct action *b, const char *why)
{
    gs__sched_logf("warn", "pod=%s/%s node=%s: %s", b->ns, b->name, b->node, why);
    gs__sched_post_event(s, b, "Warning", "MIGRepartitionFailed", "Scheduling", why);
    (void)gs_kworld_forget_pod(s->world, b->ns, b->name, gs__sched_wall_ms());
    if (gs_kworld_avoid_node(s->world, b->ns, b->name, b->node) != GS_OK)
        gs__sched_logf("error", "out of memory: pod=%s/%s may try node=%s again", b->ns, b->name,
                       b->node);
    char *k = gs__sched_key_of(b->ns, b->name);
    int64_t retry = s->mig_plan_timeout_ms > PDB_RETRY_MS ? s->mig_plan_timeout_ms : PDB_RETRY_MS;
    if (k) {
        json_object_set_new(s->pdb_blocked, k, json_string(why));
        json_object_set_new(s->unblock, k, json_integer(gs__sched_mono_ms() + retry));
    }
    free(k);
    gs__sched_set_nominated(s, b->ns, b->name, NULL);
    gs__sched_hold_pod(s, b->ns, b->name, gs__sched_mono_ms());
    s->dirty = true;
}

static void plan_drop(struct sched *s, size_t i)
{
    struct migplan *p = &s->plans[i];
    gs__sched_action_fini(&p->bind);
    free(p->key);
    free(p->failed);
    size_t last = --s->nplans;
    if (i != last)
        s->plans[i] = s->plans[last];
    memset(&s->plans[last], 0, sizeof(s->plans[last]));
}

static void utc_now(char *buf, size_t cap)
{
    time_t t = (time_t)(gs__sched_wall_ms() / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        (void)snprintf(buf, cap, "1970-01-01T00:00:00Z");
}

void gs__sched_migplan_start(struct sched *s, struct action *a)
{
    const struct gs__sched_mig *m = a->mig;
    char why[700];
    for (size_t i = 0; i < s->nplans; i++)
        if (strcmp(s->plans[i].bind.node, a->node) == 0) {
            /* The annotation holds one plan: this pod is decided again once that one is over
             * (the engine forgets it now; the node's layout is the in-flight plan's). */
            gs__sched_logf("info",
                           "pod=%s/%s: node=%s has a MIG re-partition in flight (plan %s); "
                           "deciding the pod again in %d ms",
                           a->ns, a->name, a->node, s->plans[i].id, PLAN_BUSY_RETRY_MS);
            (void)gs_kworld_forget_pod(s->world, a->ns, a->name, gs__sched_wall_ms());
            gs__sched_hold_pod(s, a->ns, a->name, gs__sched_mono_ms() + PLAN_BUSY_RETRY_MS);
            s->dirty = true;
            gs__sched_action_fini(a);
            memset(a, 0, sizeof(*a));
            return;
        }
    if (!m->known) {
        (void)snprintf(why, sizeof(why),
                       "MIG re-partition of GPU %u on node %s not planned: the node has no "
                       "gpusched.io/gpus inventory (its node agent names the instances' starts)",
                       m->gpu, a->node);
        release(s, a, why);
        gs__sched_action_fini(a);
        memset(a, 0, sizeof(*a));
        return;
    }
    if (s->nplans == s->capplans) {
        size_t cap = s->capplans ? s->capplans * 2 : 8;
        struct migplan *np = realloc(s->plans, cap * sizeof(*np));
        if (!np) {
            release(s, a, "out of memory holding the pod for a MIG re-partition");
            gs__sched_action_fini(a);
            memset(a, 0, sizeof(*a));
            return;
        }
        s->plans = np;
        s->capplans = cap;
    }
    struct gs_kmig_plan plan;
    memset(&plan, 0, sizeof(plan));
    (void)snprintf(plan.id, sizeof(plan.id), "%.32s-gpu%u-%lld-%llu", a->node, m->gpu,
                   (long long)(gs__sched_wall_ms() / 1000), (unsigned long long)++s->plan_seq);
    plan.gpu = m->gpu;
    const char *uuid = NULL;
    for (size_t g = 0; g < json_array_size(a->gpus) && !uuid; g++) {
        const json_t *e = json_array_get(a->gpus, g);
        if (json_integer_value(json_object_get(e, "index")) == (json_int_t)m->gpu)
            uuid = json_string_value(json_object_get(e, "uuid"));
    }
    (void)snprintf(plan.uuid, sizeof(plan.uuid), "%s", uuid ? uuid : "");
    plan.n_destroy = m->n_destroy;
    memcpy(plan.destroy, m->destroy, sizeof(plan.destroy));
    plan.n_create = m->n_create;
    memcpy(plan.create, m->create, sizeof(plan.create));
    (void)snprintf(plan.pod, sizeof(plan.pod), "%s/%s", a->ns, a->name);
    utc_now(plan.created, sizeof(plan.created));
    char *text = gs_kmig_plan_write(&plan);
    int err = text ? patch_node(s, a->node, text, true) : GS_ENOMEM;
    free(text);
    if (err != GS_OK) {
        (void)snprintf(why, sizeof(why),
                       "MIG re-partition of GPU %u on node %s not planned: the plan could not be "
                       "written on the Node (%s)",
                       m->gpu, a->node, gs_strerror(err));
        release(s, a, why);
        gs__sched_action_fini(a);
        memset(a, 0, sizeof(*a));
        return;
    }
    struct migplan *p = &s->plans[s->nplans];
    memset(p, 0, sizeof(*p));
    p->key = gs__sched_key_of(a->ns, a->name);
    (void)snprintf(p->id, sizeof(p->id), "%s", plan.id);
    p->due_ms = gs__sched_mono_ms() + s->mig_plan_timeout_ms;
    p->bind = *a;
    memset(a, 0, sizeof(*a));
    s->nplans++;
    gs__sched_set_nominated(s, p->bind.ns, p->bind.name, p->bind.node);
    char d[200], c[200];
    list_text(m->destroy, m->n_destroy, d, sizeof(d));
    list_text(m->create, m->n_create, c, sizeof(c));
    gs__sched_logf("info",
                   "planned MIG re-partition pod=%s/%s node=%s gpu=%u plan=%s destroy=[%s] "
                   "create=[%s]: binding once the node's inventory shows it",
                   p->bind.ns, p->bind.name, p->bind.node, m->gpu, p->id, d, c);
    char note[700];
    (void)snprintf(note, sizeof(note),
                   "Waiting for node %s to re-partition GPU %u (plan %s): destroy %s, create %s",
                   p->bind.node, m->gpu, p->id, d, c);
    gs__sched_post_event(s, &p->bind, "Normal", "MIGRepartition", "Planning", note);
}

void gs__sched_migplan_node(struct sched *s, const json_t *node)
{
    const json_t *md = json_object_get(node, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *st = json_string_value(
        json_object_get(json_object_get(md, "annotations"), GS_KMIGPLAN_STATUS_ANNOTATION));
    if (!name || !st)
        return;
    for (size_t i = 0; i < s->nplans; i++) {
        struct migplan *p = &s->plans[i];
        if (strcmp(p->bind.node, name) != 0 || p->failed)
            continue;
        struct gs_kmig_status out;
        char err[300] = "";
        if (gs_kmig_status_read(st, &out, err, sizeof(err)) != GS_OK) {
            gs__sched_logf("warn", "node=%s: annotation %s: %s", name,
                           GS_KMIGPLAN_STATUS_ANNOTATION, err);
            continue;
        }
        if (strcmp(out.id, p->id) == 0 && !out.done)
            p->failed = strdup(out.reason[0] ? out.reason : "no reason given");
    }
}

/* Whether the node's inventory shows GPU m->gpu in exactly the planned layout. */
static bool layout_shown(struct sched *s, const char *node, const struct gs__sched_mig *m)
{
    struct gs_kmig_slot inv[GS_MIG_INSTANCES_MAX + 1];
    uint32_t n = 0;
    if (gs_kworld_inventory_mig(s->world, node, m->gpu, inv, GS_MIG_INSTANCES_MAX + 1, &n) !=
            GS_OK ||
        n != m->n_layout)
        return false;
    for (uint32_t i = 0; i < m->n_layout; i++) {
        bool found = false;
        for (uint32_t j = 0; j < n && !found; j++)
            found = inv[j].profile && inv[j].start == (int32_t)m->layout[i].start &&
                    strcmp(inv[j].profile, m->layout[i].profile) == 0;
        if (!found)
            return false;
    }
    return true;
}

void gs__sched_migplan_check(struct sched *s, bool live)
{
    if (!live)
        return;
    int64_t now = gs__sched_mono_ms();
    for (size_t i = 0; i < s->nplans;) {
        struct migplan *p = &s->plans[i];
        const struct gs__sched_mig *m = p->bind.mig;
        char why[900];
        if (m && layout_shown(s, p->bind.node, m)) {
            gs__sched_logf("info",
                           "pod=%s/%s node=%s: MIG re-partition of GPU %u done (plan %s); "
                           "binding",
                           p->bind.ns, p->bind.name, p->bind.node, m->gpu, p->id);
            (void)patch_node(s, p->bind.node, NULL, false);
            gs__sched_bind(s, &p->bind);
            plan_drop(s, i);
            continue;
        }
        if (p->failed || now >= p->due_ms || !m) {
            if (p->failed)
                (void)snprintf(why, sizeof(why),
                               "MIG re-partition of GPU %u on node %s failed (plan %s): the node "
                               "agent reported: %s",
                               m ? m->gpu : 0, p->bind.node, p->id, p->failed);
            else
                (void)snprintf(why, sizeof(why),
                               "MIG re-partition of GPU %u on node %s timed out (plan %s): the "
                               "node agent did not carry it out within %lld s (it does only with "
                               "mig.dynamic on in its config)",
                               m ? m->gpu : 0, p->bind.node, p->id,
                               (long long)(s->mig_plan_timeout_ms / 1000));
            (void)patch_node(s, p->bind.node, NULL, false);
            release(s, &p->bind, why);
            plan_drop(s, i);
            continue;
        }
        i++;
    }
}

void gs__sched_migplan_pod_gone(struct sched *s, const char *key)
{
    for (size_t i = 0; i < s->nplans; i++)
        if (s->plans[i].key && strcmp(s->plans[i].key, key) == 0) {
            gs__sched_logf("info", "pod=%s deleted; its MIG plan %s on node=%s is removed", key,
                           s->plans[i].id, s->plans[i].bind.node);
            (void)patch_node(s, s->plans[i].bind.node, NULL, false);
            plan_drop(s, i);
            return;
        }
}

void gs__sched_migplan_fini(struct sched *s)
{
    while (s->nplans)
        plan_drop(s, 0);
    free(s->plans);
    s->plans = NULL;
    s->capplans = 0;
}
