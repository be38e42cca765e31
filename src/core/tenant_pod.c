/*
 * Pods of the tenant engine: identity (the uid index, slot reuse and handles), submission,
 * finish and delete, and the live cluster's adopt, forget and node removal. Part of the tenant
 * engine (tenant_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"
#include "tenant_int.h"

/* ---- pod identity: the uid index and slot reuse ---------------------------------------------- */

static uint64_t hash_uid(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

#define UID_TOMB UINT32_MAX

/* The slot of uid in the index: where it is, or the first free place to put it. */
static uint32_t *uid_slot(const struct gs_engine *e, const char *uid, bool for_insert)
{
    uint32_t mask = e->uid_cap - 1, *tomb = NULL;
    for (uint32_t i = (uint32_t)hash_uid(uid) & mask;; i = (i + 1) & mask) {
        uint32_t v = e->uid_slots[i];
        if (v == 0)
            return for_insert && tomb ? tomb : &e->uid_slots[i];
        if (v == UID_TOMB) {
            if (!tomb)
                tomb = &e->uid_slots[i];
            continue;
        }
        if (strcmp(e->p[v - 1].uid, uid) == 0)
            return &e->uid_slots[i];
    }
}

static int uid_reserve(struct gs_engine *e)
{
    if ((e->uid_len + 1) * 2 <= e->uid_cap)
        return GS_OK;
    uint32_t cap = e->uid_cap ? e->uid_cap * 2 : 64;
    uint32_t *old = e->uid_slots, old_cap = e->uid_cap;
    uint32_t *slots = gs__calloc(cap, sizeof(*slots));
    if (!slots)
        return GS_ENOMEM;
    e->uid_slots = slots;
    e->uid_cap = cap;
    e->uid_len = 0;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i] == 0 || old[i] == UID_TOMB)
            continue;
        *uid_slot(e, e->p[old[i] - 1].uid, true) = old[i];
        e->uid_len++;
    }
    gs__free(old);
    return GS_OK;
}

int64_t gs_engine_find_pod(const struct gs_engine *e, const char *uid)
{
    if (!uid || !e->uid_cap)
        return -1;
    uint32_t v = *uid_slot(e, uid, false);
    return v && v != UID_TOMB ? (int64_t)v - 1 : -1;
}

static bool spec_ok(const struct gs_engine *e, const struct gs_tpod_spec *spec)
{
    if (spec->queue == GS_QUEUE_ROOT || spec->queue >= e->nq || !is_leaf(&e->q[spec->queue]) ||
        spec->priority_class >= e->npc || (spec->gang != GS_NO_GANG && spec->gang >= e->ng))
        return false;
    if (gs_pod_req_validate(&spec->req, NULL, 0) != GS_OK)
        return false;
    if (spec->gang != GS_NO_GANG) {
        const struct gang *g = &e->g[spec->gang];
        if (g->n_members > 0 && e->p[g->members[0]].queue != spec->queue)
            return false;
    }
    return true;
}

/*
 * Creates a pod record in state `state` (PENDING or RUNNING), with every allocation done first
 * so that nothing after it can fail: a reused or new slot, the uid index entry, the gang member
 * entry and the copies of the strings. The caller finishes the state (heap or bind).
 */
static int new_pod(struct gs_engine *e, const struct gs_tpod_spec *spec,
                   const struct gs_pod_ident *ident, int64_t now_ms, uint32_t *out)
{
    const char *uid = ident && ident->uid && *ident->uid ? ident->uid : NULL;
    if (ident && (!gs_filter_valid(e->c, ident->filter_class) ||
                  gs__budget_valid_ids(e, ident->budgets, GS_POD_BUDGETS_MAX) != GS_OK))
        return GS_EINVAL;
    if (uid && gs_engine_find_pod(e, uid) >= 0)
        return GS_EEXIST;
    int err = GS_OK;
    if (e->nfree == 0 && (err = gs__grow((void **)&e->p, &e->capp, e->np + 1, sizeof(*e->p))))
        return err;
    if (uid && (err = uid_reserve(e)))
        return err;
    if (spec->gang != GS_NO_GANG) {
        struct gang *g = &e->g[spec->gang];
        if ((err = gs__grow((void **)&g->members, &g->cap_members, g->n_members + 1,
                            sizeof(*g->members))) != GS_OK ||
            (err = gs__grow((void **)&e->vals, &e->vals_cap, g->n_members + 1, sizeof(*e->vals))) !=
                GS_OK)
            return err;
    }
    const char *nm = ident && ident->name ? ident->name : spec->name;
    char *name = gs__dup_str(nm ? nm : "");
    char *uidc = uid ? gs__dup_str(uid) : NULL;
    char *ns = ident && ident->ns ? gs__dup_str(ident->ns) : NULL;
    if (!name || (uid && !uidc) || (ident && ident->ns && !ns)) {
        gs__free(name);
        gs__free(uidc);
        gs__free(ns);
        return GS_ENOMEM;
    }
    bool reused = e->nfree > 0;
    uint32_t pi = reused ? e->free_pods[--e->nfree] : e->np++;
    struct tpod *p = &e->p[pi];
    uint32_t gen = reused ? p->gen + 1 : 0;
    if (reused)
        e->evictions_reused += p->evictions; /* their record goes with the slot */
    uint32_t seq = reused ? p->seq : 0;      /* stale heap entries of the old pod stay stale */
    memset(p, 0, sizeof(*p));
    p->gen = gen;
    p->seq = seq;
    p->name = name;
    p->uid = uidc;
    p->ns = ns;
    p->queue = spec->queue;
    p->pclass = spec->priority_class;
    p->gang = spec->gang;
    p->req = spec->req;
    if (!p->req.num_gpu)
        p->req.gpu_milli = 0;
    req_vector(&p->req, p->r);
    p->fclass = ident ? ident->filter_class : GS_FILTER_DEFAULT;
    if (gs_req_kind(&p->req) != GS_REQ_MILLI) {
        /* Memory, slots and MIG instances are charged by the share of a GPU they take
         * (charge.h): while pending, the most any GPU of a node its filter passes would
         * charge; at bind, exactly what they land on (gs__charge_landed()). */
        double gpus;
        if (gs_charge_request_class(e->c, &p->req, p->fclass, &gpus) == GS_OK)
            p->r[GS_RES_GPU] = gs_charge_milli(gpus);
    }
    p->pend_gpu_milli = p->r[GS_RES_GPU];
    p->est_ms = spec->runtime_estimate_ms;
    p->preempt_never = spec->preempt_never;
    p->state = GS_TPOD_PENDING;
    p->submit_ms = now_ms;
    p->start_ms = p->end_ms = -1;
    p->created_ms = ident ? ident->created_ms : now_ms;
    gs_filter_ref(e->c, p->fclass);
    for (uint32_t i = 0; ident && i < GS_POD_BUDGETS_MAX; i++)
        if (ident->budgets[i])
            p->budgets[p->nbudgets++] = ident->budgets[i];
    if (uid) {
        uint32_t *slot = uid_slot(e, uid, true);
        if (*slot == 0)
            e->uid_len++;
        *slot = pi + 1;
    }
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->members[g->n_members++] = pi;
        if (g->first_submit_ms < 0)
            g->first_submit_ms = now_ms;
    }
    *out = pi;
    return GS_OK;
}

/* Undoes new_pod() for a pod that never entered any state (an enqueue that failed). */
static void drop_new_pod(struct gs_engine *e, uint32_t pi)
{
    struct tpod *p = &e->p[pi];
    if (p->uid)
        *uid_slot(e, p->uid, false) = UID_TOMB;
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->n_members--;
        if (g->n_members == 0)
            g->first_submit_ms = -1;
    }
    gs_filter_release(e->c, p->fclass);
    gs__free(p->name);
    gs__free(p->uid);
    gs__free(p->ns);
    p->name = p->uid = p->ns = NULL;
    p->forgotten = true;
    p->state = GS_TPOD_FAILED; /* a free slot is in no queue's books */
    if (pi == e->np - 1)
        e->np--;
    else
        e->free_pods[e->nfree++] = pi; /* the slot came from the free list */
}

int gs_engine_submit_pod(struct gs_engine *e, const struct gs_tpod_spec *spec,
                         const struct gs_pod_ident *ident, int64_t now_ms, uint32_t *id)
{
    if (!spec_ok(e, spec))
        return GS_EINVAL;
    uint32_t pi;
    int err = new_pod(e, spec, ident, now_ms, &pi);
    if (err)
        return err;
    if ((err = gs__enqueue(e, pi)) != GS_OK) {
        drop_new_pod(e, pi);
        return err;
    }
    struct tpod *p = &e->p[pi];
    struct queue *q = &e->q[p->queue];
    q->leaf_used = true;
    q->pending++;
    gs__account(e, p->queue, 1, p->r, +1);
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending++; /* new_pod() made it a member */
        gs__gang_judge(e, p->gang);
    }
    if (id)
        *id = pi;
    e->now_ms = now_ms;
    gs__emit(e, GS_EV_SUBMIT, pi, NO_ID, GS_EVICT_NONE, NULL);
    return p->gang != GS_NO_GANG && e->g[p->gang].refused ? GS_ELIMIT : GS_OK;
}

int gs_engine_submit(struct gs_engine *e, const struct gs_tpod_spec *spec, int64_t now_ms,
                     uint32_t *id)
{
    return gs_engine_submit_pod(e, spec, NULL, now_ms, id);
}

/* ---- finish and delete ----------------------------------------------------------------------- */

/* Ends a running pod as SUCCEEDED and releases what it held; no event. */
static int finish_quiet(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    if (pod >= e->np || e->p[pod].state != GS_TPOD_RUNNING)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    int err = gs_cluster_unbind(e->c, &p->req, &p->pl);
    if (err)
        return err;
    gs__node_list_remove(e, pod);
    p->state = GS_TPOD_SUCCEEDED;
    p->end_ms = now_ms;
    e->mutations++;
    gs__account_alloc(e, pod, p->pl.node, -1);
    gs__account(e, p->queue, 1, p->r, -1);
    e->q[p->queue].running--;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].running--;
        e->g[p->gang].succeeded++;
        gs__gang_judge(e, p->gang); /* a finished member counts toward min_member */
    }
    if (p->foreign)
        for (int r = 0; r < GS_RES_COUNT; r++)
            e->foreign_alloc[r] -= p->r[r];
    if (p->foreign)
        e->capacity_gen = 0;
    return GS_OK;
}

int gs_engine_finish(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    int err = finish_quiet(e, pod, now_ms);
    if (err)
        return err;
    e->now_ms = now_ms;
    /* A finished member counts toward min_member, so it never ends a gang's run; but a gang in
     * its grace period whose last running member finishes has nothing left to hold for. */
    if (e->p[pod].gang != GS_NO_GANG)
        gs__gang_settle(e, e->p[pod].gang);
    gs__emit(e, GS_EV_FINISH, pod, NO_ID, GS_EVICT_NONE, &e->p[pod].pl);
    return GS_OK;
}

int gs_engine_delete(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    if (pod >= e->np)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    bool was_running = p->state == GS_TPOD_RUNNING;
    struct gang *g = p->gang != GS_NO_GANG ? &e->g[p->gang] : NULL;
    int err = GS_OK;
    /* Room for the hold first (gangs with a grace period), so that nothing fails after the
     * pod has gone. */
    if (was_running && g && g->grace_ms > 0 && (err = gs__gang_hold_reserve(e, p->gang)) != GS_OK)
        return err;
    if (was_running) {
        if ((err = finish_quiet(e, pod, now_ms)) != GS_OK)
            return err;
        if (g)
            g->succeeded--;
    } else if (p->state == GS_TPOD_PENDING) {
        e->q[p->queue].pending--;
        gs__account(e, p->queue, 1, p->r, -1);
        if (g)
            g->pending--;
    } else {
        return GS_EINVAL;
    }
    p->state = GS_TPOD_FAILED;
    p->end_ms = now_ms;
    e->now_ms = now_ms;
    gs__emit(e, GS_EV_DELETE, pod, NO_ID, GS_EVICT_NONE, was_running ? &p->pl : NULL);
    if (!g)
        return GS_OK;
    gs__gang_judge(e, p->gang); /* one member fewer can only make it fit */
    if (g->running > 0 && g->running + g->succeeded < g->min_member) {
        if (g->grace_ms > 0) {
            /* A gang with a grace period keeps running below min_member while replacements
             * come; what the lost member held stays held for them (its node exists). */
            if (was_running)
                gs__gang_hold_add(e, p->gang, &p->req, &p->pl);
            gs__gang_degrade(e, p->gang, now_ms);
            return GS_OK;
        }
        /* Without one it cannot go on: its other running members go back to pending, whole. */
        uint32_t mark = e->nlog;
        for (uint32_t m = 0; m < g->n_members && !err; m++)
            if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
                err = gs__do_evict(e, g->members[m], GS_EVICT_GANG, NO_ID);
        if (err) {
            gs__rollback(e, mark);
            return err;
        }
        g->started = false;
        return gs__commit(e, mark, false);
    }
    gs__gang_settle(e, p->gang); /* nothing of it left running: nothing to hold for */
    return GS_OK;
}

/* ---- the live cluster: adopt, forget, handles, node removal ---------------------------------- */

/* GPUs for an adopted pod whose GPUs are unknown: the lowest-indexed healthy GPUs that can take
 * it (untouched ones for whole GPUs, the first with room for a fraction). */
static bool pick_unknown_gpus(const struct gs_node *n, const struct gs_pod_req *req,
                              struct gs_placement *pl)
{
    pl->num_gpu = 0;
    for (uint32_t g = 0; g < n->gpu_count && pl->num_gpu < req->num_gpu; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (!gpu->healthy)
            continue;
        bool ok = req->gpu_milli >= GS_GPU_MILLI
                      ? gpu->gpu_milli_used == 0
                      : gpu->gpu_milli - gpu->gpu_milli_used >= req->gpu_milli;
        if (ok)
            pl->gpu_index[pl->num_gpu++] = (uint8_t)g;
    }
    pl->gpu_milli = req->gpu_milli;
    return pl->num_gpu == req->num_gpu;
}

int gs_engine_adopt(struct gs_engine *e, const struct gs_tpod_spec *spec,
                    const struct gs_pod_ident *ident, const struct gs_placement *pl,
                    int64_t start_ms, uint32_t *id)
{
    bool foreign = ident && ident->foreign;
    struct gs_tpod_spec sp = *spec;
    if (foreign) {
        sp.gang = GS_NO_GANG; /* another scheduler's pod belongs to none of our gangs or queues */
    } else if (!spec_ok(e, &sp)) {
        return GS_EINVAL;
    }
    if (foreign &&
        (sp.req.cpu_milli < 0 || sp.req.mem_mib < 0 || sp.req.num_gpu > GS_NODE_GPUS_MAX ||
         (sp.req.num_gpu && (sp.req.gpu_milli <= 0 || sp.req.gpu_milli > GS_GPU_MILLI))))
        return GS_EINVAL;
    const struct gs_node *n = gs_cluster_node(e->c, pl->node);
    if (!n || !n->present)
        return GS_EINVAL;
    struct gs_placement where = *pl;
    /* Capacity held for a gang (gs_engine_delete()) is the engine's alone: a pod that really
     * runs there takes precedence, and the node's holds are given up when they stand in its
     * way. */
    bool unknown = sp.req.num_gpu > 0 && where.num_gpu == 0;
    /* A time-sliced pod's slots are num_gpu GPUs of the placement with num_gpu 0 in the request:
     * only a pod that asks for no GPU at all has its GPUs cleared. */
    if (!gs_req_wants_gpu(&sp.req)) {
        where.num_gpu = 0;
        where.gpu_milli = 0;
    } else if (unknown && !pick_unknown_gpus(n, &sp.req, &where)) {
        gs__gang_drop_node_holds(e, pl->node);
        if (!pick_unknown_gpus(n, &sp.req, &where))
            return GS_EINVAL; /* no GPUs left to charge it to: an over-commit */
    }
    int err = gs__ensure_nodes(e);
    if (err)
        return err;
    if ((err = gs__grow((void **)&e->node_pods[where.node], &e->node_cappods[where.node],
                        e->node_npods[where.node] + 1, sizeof(uint32_t))) != GS_OK)
        return err;
    uint32_t pi;
    if (foreign) {
        /* new_pod() wants a leaf queue; give it the first one and move the pod to the root. */
        struct gs_tpod_spec tmp = sp;
        tmp.queue = GS_QUEUE_ROOT;
        tmp.priority_class = 0;
        if (e->npc == 0)
            return GS_EINVAL; /* the engine needs one PriorityClass for any pod */
        err = new_pod(e, &tmp, ident, start_ms, &pi);
    } else {
        err = new_pod(e, &sp, ident, start_ms, &pi);
    }
    if (err)
        return err;
    struct tpod *p = &e->p[pi];
    if (gs_cluster_adopt(e->c, &p->req, &where) != GS_OK) {
        gs__gang_drop_node_holds(e, where.node);
        if (gs_cluster_adopt(e->c, &p->req, &where) != GS_OK) {
            drop_new_pod(e, pi);
            return GS_EINVAL;
        }
    }
    p->pl = where;
    double landed;
    if (gs_req_kind(&p->req) != GS_REQ_MILLI &&
        gs_charge_placement(e->c, &p->req, &where, &landed) == GS_OK)
        p->r[GS_RES_GPU] = gs_charge_milli(landed); /* the GPUs it holds are known: exact */
    if (foreign)
        p->pend_gpu_milli = p->r[GS_RES_GPU]; /* never pending: it leaves the root's books, on
                                                 eviction too, at what it was charged */
    p->state = GS_TPOD_RUNNING;
    p->start_ms = start_ms;
    p->adopted = true;
    p->foreign = foreign;
    (void)gs__node_list_add(e, pi); /* capacity ensured above */
    struct queue *q = &e->q[p->queue];
    q->leaf_used = q->leaf_used || !foreign;
    q->running++;
    gs__account_alloc(e, pi, where.node, +1);
    gs__account(e, p->queue, 1, p->r, +1);
    if (foreign) {
        for (int r = 0; r < GS_RES_COUNT; r++)
            e->foreign_alloc[r] += p->r[r];
        e->capacity_gen = 0;
    }
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->running++;
        if (g->running + g->succeeded >= g->min_member)
            g->started = true;
        gs__gang_settle(e, p->gang); /* back at its minimum: its grace period ends */
    }
    e->mutations++;
    if (id)
        *id = pi;
    gs__emit(e, GS_EV_ADOPT, pi, NO_ID, GS_EVICT_NONE, &p->pl);
    return GS_OK;
}

int gs_engine_forget(struct gs_engine *e, uint32_t pod)
{
    if (pod >= e->np)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    if (p->forgotten || (p->state != GS_TPOD_SUCCEEDED && p->state != GS_TPOD_FAILED))
        return GS_EINVAL;
    bool reuse = p->gang == GS_NO_GANG;
    if (reuse && gs__grow((void **)&e->free_pods, &e->capfree, e->nfree + 1, sizeof(uint32_t)))
        return GS_ENOMEM;
    if (p->uid)
        *uid_slot(e, p->uid, false) = UID_TOMB;
    gs_filter_release(e->c, p->fclass);
    p->fclass = GS_FILTER_DEFAULT;
    gs__free(p->uid);
    gs__free(p->ns);
    gs__free(p->reason_text);
    p->uid = p->ns = p->reason_text = NULL;
    p->forgotten = true;
    if (reuse) {
        /* The slot is free; the name goes too, so pod_info reports GS_ENOENT. */
        gs__free(p->name);
        p->name = NULL;
        e->free_pods[e->nfree++] = pod;
    }
    return GS_OK;
}

uint64_t gs_engine_pod_handle(const struct gs_engine *e, uint32_t pod)
{
    uint32_t gen = pod < e->np ? e->p[pod].gen : 0;
    return (uint64_t)gen << 32 | pod;
}

int gs_engine_pod_resolve(const struct gs_engine *e, uint64_t handle, uint32_t *pod)
{
    uint32_t i = (uint32_t)handle;
    if (i >= e->np || e->p[i].gen != handle >> 32 || (e->p[i].forgotten && !e->p[i].name))
        return GS_ENOENT;
    *pod = i;
    return GS_OK;
}

const char *gs_engine_pod_reason(const struct gs_engine *e, uint32_t pod)
{
    return pod < e->np ? e->p[pod].reason_text : NULL;
}

int gs_engine_remove_node(struct gs_engine *e, uint32_t node, int64_t now_ms)
{
    const struct gs_node *n = gs_cluster_node(e->c, node);
    if (!n || !n->present)
        return GS_EINVAL;
    int err = gs__ensure_nodes(e);
    if (err)
        return err;
    e->now_ms = now_ms;
    uint32_t mark = e->nlog;
    /* Victims first, then the gangs they leave below their minimum: released whole, or, with a
     * grace period, left running while replacements come (the node is gone: nothing is held). */
    while (!err && e->node_npods[node] > 0)
        err =
            gs__do_evict(e, e->node_pods[node][e->node_npods[node] - 1], GS_EVICT_NODE_LOST, NO_ID);
    for (uint32_t i = mark; !err && i < e->nlog; i++) {
        const struct tpod *p = &e->p[e->log[i].pod];
        if (p->gang == GS_NO_GANG)
            continue;
        struct gang *g = &e->g[p->gang];
        if (g->running == 0 || g->running + g->succeeded >= g->min_member)
            continue;
        if (g->grace_ms > 0)
            continue; /* its grace period starts below, once nothing can fail */
        for (uint32_t m = 0; m < g->n_members && !err; m++)
            if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
                err = gs__do_evict(e, g->members[m], GS_EVICT_GANG, NO_ID);
        g->started = false;
    }
    if (err) {
        gs__rollback(e, mark);
        return err;
    }
    gs__gang_drop_node_holds(e, node);
    for (uint32_t i = mark; i < e->nlog; i++) {
        const struct tpod *p = &e->p[e->log[i].pod];
        if (p->gang == GS_NO_GANG)
            continue;
        const struct gang *g = &e->g[p->gang];
        if (g->running > 0 && g->running + g->succeeded < g->min_member)
            gs__gang_degrade(e, p->gang, now_ms);
    }
    /* Foreign pods on the node leave the root's books as they go. */
    for (uint32_t i = mark; i < e->nlog; i++) {
        struct tpod *p = &e->p[e->log[i].pod];
        if (p->foreign) {
            for (int r = 0; r < GS_RES_COUNT; r++)
                e->foreign_alloc[r] -= p->r[r];
            e->capacity_gen = 0;
        }
    }
    /* Events first, while the node still has its name; then the node goes. Removing a node
     * with no pods left cannot fail. */
    err = gs__commit(e, mark, false);
    int rm = gs_cluster_remove_node(e->c, node);
    return err ? err : rm;
}
