/*
 * Placement of one job (a pod, or a gang's pending members) in one mode: plain, with in-queue
 * preemption, or with reclaim from other queues; the victim search both use; EASY backfill
 * reservations; and the reason a pod that was tried stays pending. Part of the tenant engine
 * (tenant_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"
#include "tenant_int.h"

/* ---- per-GPU-model bounds -------------------------------------------------------------------- */

/* Whether queue qi's entry mq blocks g more milli-GPU of its model: its limit, or (over-quota
 * weight 0) its quota. */
static bool model_entry_full(const struct gs_engine *e, uint32_t qi,
                             const struct gs_model_quota *mq, int64_t g)
{
    int64_t held = e->m_alloc[(size_t)qi * GS_MODELS_MAX + mq->model];
    return (mq->limit_milli != GS_UNLIMITED && held + g > mq->limit_milli) ||
           (e->q[qi].weight <= 0 && held + g > mq->quota_milli);
}

/*
 * The GPU models pod p may land on now: its own model mask less every model for which its queue
 * or an ancestor has a per-model entry that one more pod would take past its limit (or, at
 * over-quota weight 0, past its quota). A pod without a GPU charge keeps its mask.
 */
uint64_t gs__model_room(const struct gs_engine *e, const struct tpod *p)
{
    uint64_t mask = p->req.gpu_model_mask;
    int64_t g = p->r[GS_RES_GPU];
    if (g <= 0)
        return mask;
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent)
        for (uint32_t i = 0; i < e->q[a].n_mq; i++)
            if (model_entry_full(e, a, &e->q[a].mq[i], g))
                mask &= ~(UINT64_C(1) << e->q[a].mq[i].model);
    return mask;
}

/* Writes "8 H100 GPUs" (gs__fmt_amount() with the model's name before "GPU"). */
static void fmt_model_amount(const struct gs_engine *e, char *buf, size_t cap, uint32_t model,
                             int64_t milli)
{
    char amt[64];
    gs__fmt_amount(amt, sizeof(amt), GS_RES_GPU, milli);
    const char *sp = strchr(amt, ' ');
    const char *name = gs_cluster_model_name(e->c, model);
    (void)snprintf(buf, cap, "%.*s %s%s", (int)(sp ? sp - amt : 0), amt, name ? name : "?",
                   sp ? sp : amt);
}

/* The per-model reason of a pod whose models gs__model_room() narrowed: the first entry (from
 * its queue up) that blocks a model the pod may use. False if none does. */
static bool model_reason(const struct gs_engine *e, const struct tpod *p, char *buf, size_t cap)
{
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        for (uint32_t i = 0; i < q->n_mq; i++) {
            const struct gs_model_quota *mq = &q->mq[i];
            if (!(p->req.gpu_model_mask & (UINT64_C(1) << mq->model)) ||
                !model_entry_full(e, a, mq, p->r[GS_RES_GPU]))
                continue;
            char amt[128];
            bool by_limit = mq->limit_milli != GS_UNLIMITED &&
                            e->m_alloc[(size_t)a * GS_MODELS_MAX + mq->model] + p->r[GS_RES_GPU] >
                                mq->limit_milli;
            fmt_model_amount(e, amt, sizeof(amt), mq->model,
                             by_limit ? mq->limit_milli : mq->quota_milli);
            if (by_limit)
                (void)snprintf(buf, cap, "queue %s is at its limit of %s", q->name, amt);
            else
                (void)snprintf(buf, cap,
                               "queue %s is at its quota of %s and may not borrow "
                               "(overQuotaWeight 0)",
                               q->name, amt);
            return true;
        }
    }
    return false;
}

/* ---- why pending ----------------------------------------------------------------------------- */

/* The queue-limit reason of a pod that within_limits() refuses; false if it is within them. */
static bool quota_reason(const struct gs_engine *e, const struct tpod *p, char *buf, size_t cap)
{
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        if (q->deleted) {
            (void)snprintf(buf, cap, "queue %s does not exist", q->name);
            return true;
        }
        for (int r = 0; r < GS_RES_COUNT; r++) {
            char amt[64];
            if (q->limit[r] != GS_UNLIMITED && q->alloc[r] + p->r[r] > q->limit[r]) {
                gs__fmt_amount(amt, sizeof(amt), r, q->limit[r]);
                (void)snprintf(buf, cap, "queue %s is at its limit of %s", q->name, amt);
                return true;
            }
            if (q->weight <= 0 && q->quota[r] != GS_UNLIMITED && p->r[r] > 0 &&
                q->alloc[r] + p->r[r] > q->quota[r]) {
                gs__fmt_amount(amt, sizeof(amt), r, q->quota[r]);
                (void)snprintf(buf, cap,
                               "queue %s is at its quota of %s and may not borrow "
                               "(overQuotaWeight 0)",
                               q->name, amt);
                return true;
            }
        }
    }
    return false;
}

/*
 * Records why a pod that was tried is still pending, and emits UNSCHEDULABLE when the reason
 * differs from the one it had: a queue limit, else the per-filter counts (explain.h), with the
 * gang named for a gang member.
 */
int gs__note_unschedulable(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    /* No node changed (no bind, release, label, taint, cordon, health or capacity change) since
     * this pod was last judged, nor its gang (members, what fit in its last trial): the reason
     * is the same, and judging every node again (O(nodes)) would be wasted. Queue books change
     * only with binds and releases, which change nodes. */
    uint64_t stamp = gs_cluster_changes(e->c);
    const struct gang *pg = p->gang != GS_NO_GANG ? &e->g[p->gang] : NULL;
    uint64_t aux =
        pg ? (uint64_t)(pg->pending + pg->running + pg->succeeded) | (uint64_t)pg->last_fit << 32
           : 0;
    if (p->reason_text && p->explained_at == stamp && p->explained_aux == aux)
        return GS_OK;
    p->explained_at = stamp;
    p->explained_aux = aux;
    p->fits_none = false;
    char buf[1024];
    size_t len = 0;
    if (pg) {
        int w = snprintf(buf, sizeof(buf), "gang %s (min_member %u, %u running): ", pg->name,
                         pg->min_member, pg->running);
        len = w > 0 && (size_t)w < sizeof(buf) ? (size_t)w : 0;
    }
    uint32_t members = pg ? pg->pending + pg->running + pg->succeeded : 0;
    if (pg && members < pg->min_member) {
        (void)snprintf(buf + len, sizeof(buf) - len, "%u of %u members exist", members,
                       pg->min_member);
    } else if (!quota_reason(e, p, buf + len, sizeof(buf) - len)) {
        /* Per-model bounds narrow the models it may use: explained on those. When they leave
         * it nothing, or nothing that fits while its own models would, the bound is the reason;
         * when nothing fits either way, the cluster's state is (explained on its own models). */
        struct gs_pod_req rq = p->req;
        rq.gpu_model_mask = gs__model_room(e, p);
        struct gs_unsched u;
        int err = gs_explain(e->c, &rq, p->fclass, &u);
        if (err)
            return err;
        bool by_model = false;
        if (rq.gpu_model_mask != p->req.gpu_model_mask) {
            struct gs_unsched u0;
            if ((err = gs_explain(e->c, &p->req, p->fclass, &u0)) != GS_OK)
                return err;
            if (rq.gpu_model_mask == 0 || (u.fit == 0 && u0.fit > 0))
                by_model = model_reason(e, p, buf + len, sizeof(buf) - len);
            else if (u.fit == 0)
                u = u0;
        }
        if (by_model)
            ; /* the reason is written */
        else if (u.fit > 0 && p->gang != GS_NO_GANG &&
                 e->g[p->gang].last_fit < e->g[p->gang].min_member)
            (void)snprintf(buf + len, sizeof(buf) - len, "%u of %u members fit",
                           e->g[p->gang].last_fit, e->g[p->gang].min_member);
        else if (u.fit > 0) /* it fits somewhere now: held back by order, a reservation, a gang */
            (void)snprintf(buf + len, sizeof(buf) - len, "%s",
                           p->gang != GS_NO_GANG ? "not every member of the minimum fits"
                                                 : "waiting behind a reservation");
        else
            (void)gs_explain_format(&u, &p->req, buf + len, sizeof(buf) - len);
        len = strlen(buf);
        char never[256];
        if (u.fit == 0 && !by_model && gs__fits_no_node(e, p, never, sizeof(never))) {
            p->fits_none = true;
            (void)snprintf(buf + len, sizeof(buf) - len, " %s", never);
            len = strlen(buf);
        }
        /* kube-scheduler's words for a pod that may not preempt (its PostFilter). */
        if (u.fit == 0 && p->preempt_never && e->cfg.preemption)
            (void)snprintf(buf + len, sizeof(buf) - len,
                           " preemption: not eligible due to preemptionPolicy=Never.");
    }
    if (p->reason_text && strcmp(p->reason_text, buf) == 0)
        return GS_OK;
    char *copy = gs__dup_str(buf);
    if (!copy)
        return GS_ENOMEM;
    gs__free(p->reason_text);
    p->reason_text = copy;
    gs__emit_text(e, GS_EV_UNSCHEDULABLE, pod, NO_ID, GS_EVICT_NONE, NULL, copy);
    return GS_OK;
}

/* ---- pods that fit no node ------------------------------------------------------------------- */

/*
 * Whether pod p fits no node even with nothing running there: no node passes its filters
 * (cordon, taints, nodeSelector, required affinity), or none of those that do has the
 * allocatable GPUs (of a model it may use), CPU, memory and pod slot it asks. Such a pod waits
 * for the cluster to change, not for room, so it holds up nothing behind it (a 16-GPU pod on
 * 8-GPU nodes kept every smaller pod of its queue waiting, cycle after cycle). Judged for milli
 * requests (whole GPUs, one fraction) only: the other kinds depend on GPU modes and MIG
 * layouts and are never called unfit here. On true, `why` (cap > 0) receives the sentence its
 * reason ends with. O(nodes); on the failure path only.
 */
bool gs__fits_no_node(const struct gs_engine *e, const struct tpod *p, char *why, size_t cap)
{
    const struct gs_pod_req *rq = &p->req;
    if (gs_req_kind(rq) != GS_REQ_MILLI || rq->xres_count > 0)
        return false;
    uint32_t nn = gs_cluster_node_count(e->c), passing = 0, max_gpus = 0;
    int64_t max_cpu = 0, max_mem = 0;
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        if (!nd || !nd->present || !gs_filter_pass(e->c, p->fclass, n))
            continue;
        passing++;
        bool model_ok = rq->num_gpu == 0 || rq->gpu_model_mask == GS_MODEL_ANY ||
                        (rq->gpu_model_mask & (UINT64_C(1) << (nd->model_id & 63)));
        uint32_t gpus = model_ok ? nd->gpu_count : 0;
        max_gpus = gpus > max_gpus ? gpus : max_gpus;
        max_cpu = nd->cpu_milli > max_cpu ? nd->cpu_milli : max_cpu;
        max_mem = nd->mem_mib > max_mem ? nd->mem_mib : max_mem;
        if (gpus >= rq->num_gpu && nd->cpu_milli >= rq->cpu_milli && nd->mem_mib >= rq->mem_mib &&
            nd->pods_max > 0)
            return false;
    }
    if (cap == 0)
        return true;
    if (passing == 0)
        (void)snprintf(why, cap, "It fits no node: none passes its filters.");
    else if (max_gpus < rq->num_gpu)
        (void)snprintf(why, cap,
                       "It fits no node even when empty: the most GPUs on a node that passes its "
                       "filters is %u, it asks %u.",
                       max_gpus, rq->num_gpu);
    else if (max_cpu < rq->cpu_milli)
        (void)snprintf(why, cap,
                       "It fits no node even when empty: the most CPU on a node that passes its "
                       "filters is %lld milli-CPU, it asks %lld.",
                       (long long)max_cpu, (long long)rq->cpu_milli);
    else if (max_mem < rq->mem_mib)
        (void)snprintf(why, cap,
                       "It fits no node even when empty: the most memory on a node that passes "
                       "its filters is %lld MiB, it asks %lld.",
                       (long long)max_mem, (long long)rq->mem_mib);
    else
        (void)snprintf(why, cap,
                       "It fits no node even when empty: no node that passes its filters has "
                       "all of what it asks at once.");
    return true;
}

/* ---- placement of one job -------------------------------------------------------------------- */

/* Whether starting a pod keeps its queue and every ancestor within limit (and a queue with
 * over-quota weight 0 within its quota). */
static bool within_limits(const struct gs_engine *e, const struct tpod *p)
{
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        if (q->deleted)
            return false;
        for (int r = 0; r < GS_RES_COUNT; r++) {
            if (q->limit[r] != GS_UNLIMITED && q->alloc[r] + p->r[r] > q->limit[r])
                return false;
            if (q->weight <= 0 && q->quota[r] != GS_UNLIMITED && p->r[r] > 0 &&
                q->alloc[r] + p->r[r] > q->quota[r])
                return false;
        }
    }
    return true;
}

/* Places one pod where the policy says; GS_EUNSCHEDULABLE when it does not fit anywhere. */
static int place_one(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    if (!within_limits(e, p))
        return GS_EUNSCHEDULABLE;
    /* Only on the models its queues' per-model limits leave it (the same request otherwise). */
    struct gs_pod_req rq = p->req;
    rq.gpu_model_mask = gs__model_room(e, p);
    if (rq.gpu_model_mask == 0 && p->r[GS_RES_GPU] > 0)
        return GS_EUNSCHEDULABLE;
    struct gs_placement pl;
    int err = gs_sched_place_class(e->sched, &rq, p->fclass, e->rng, &pl);
    if (err == GS_EUNSCHEDULABLE && e->cfg.dynamic_mig)
        return gs__place_mig_dynamic(e, pod, &rq); /* a MIG GPU re-partitioned for it, if any */
    if (err)
        return err;
    return gs__do_bind(e, pod, &pl);
}

/* ---- victims: preemption and reclaim --------------------------------------------------------- */

/* Whether pod c itself may be evicted: running, preemptible, past its queue's min_runtime_ms. */
static bool pod_evictable(const struct gs_engine *e, const struct tpod *c)
{
    return c->state == GS_TPOD_RUNNING && !c->foreign && e->pc[c->pclass].preemptible &&
           e->now_ms - c->start_ms >= e->q[c->queue].min_runtime_ms;
}

static int fair_res(const struct tpod *p)
{
    return p->r[GS_RES_GPU] > 0 ? GS_RES_GPU : GS_RES_CPU;
}

/*
 * Reclaim rule for one victim c of preemptor p, judged on what actually moves: `loss` is what
 * c's queue gives up on the fairness resource (c alone, or its whole gang), `gain` what p's queue
 * takes (p alone, or the members of p's gang that start with it), and `taken` what this search
 * has already taken from c's queue.
 */
static bool reclaim_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                       int64_t taken, int64_t loss, int64_t gain, bool whole_gang)
{
    if (c->queue == p->queue)
        return false;
    int r = fair_res(p);
    if (c->r[r] <= 0)
        return false;
    const struct queue *R = &e->q[p->queue], *V = &e->q[c->queue];
    int64_t av = V->alloc[r] - taken;
    /* The victim's queue is above its share and keeps it: reclaim takes only what a queue holds
     * beyond its fair share, so queues can never take from each other in turn (a loop of
     * reclaim and in-queue preemption was found by test_live_random). A gang that must go
     * whole may take its queue below its share, when the move still lowers unfairness. The
     * victim's queue keeps its quota; the reclaimer is below its share; and the move strictly
     * lowers |alloc - fair| summed over the two queues. */
    if (av <= V->fair[r] || (!whole_gang && av - loss < V->fair[r]) || av - loss < V->quota[r] ||
        R->alloc[r] >= R->fair[r])
        return false;
    int64_t before = abs64(R->alloc[r] - R->fair[r]) + abs64(av - V->fair[r]);
    int64_t after = abs64(R->alloc[r] + gain - R->fair[r]) + abs64(av - loss - V->fair[r]);
    return after < before;
}

/*
 * What the reclaiming queue gains on resource r when `pod` starts: the pod alone, or, while its
 * gang is below min_member, the pod and the pending members after it that the trial needs to
 * reach min_member. A gang starts all or nothing, so they move together and are judged together.
 */
static int64_t reclaim_gain(const struct gs_engine *e, uint32_t pod, int r)
{
    const struct tpod *p = &e->p[pod];
    int64_t gain = p->r[r];
    if (p->gang == GS_NO_GANG)
        return gain;
    const struct gang *g = &e->g[p->gang];
    uint32_t have = g->running + g->succeeded + 1;
    bool after = false;
    for (uint32_t m = 0; m < g->n_members && have < g->min_member; m++) {
        const struct tpod *o = &e->p[g->members[m]];
        if (g->members[m] == pod) {
            after = true;
        } else if (after && o->state == GS_TPOD_PENDING) {
            gain += o->r[r];
            have++;
        }
    }
    return gain;
}

/*
 * Priority preemption's candidates for preemptor p: pods of lower priority, of p's queue, or of
 * another queue when they hold the resource p needs (GPU for a GPU pod, CPU otherwise). Across
 * queues only pods running above their queue's quota may go, judged on what moves
 * (xq_quota_ok()): Kubernetes' priority preemption bounded by quotas, as KAI-Scheduler and
 * Volcano bound theirs.
 */
static bool preempt_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c)
{
    if (prio_of(e, c) >= prio_of(e, p))
        return false;
    return c->queue == p->queue || c->r[fair_res(p)] > 0;
}

/* Whether queue qi's subtree holds leaf queue leaf (qi is leaf or one of its ancestors). */
static bool queue_under(const struct gs_engine *e, uint32_t leaf, uint32_t qi)
{
    for (uint32_t a = leaf; a != NO_ID; a = e->q[a].parent)
        if (a == qi)
            return true;
    return false;
}

static uint32_t common_ancestor(const struct gs_engine *e, uint32_t a, uint32_t b);
static bool model_keeps_quota(const struct gs_engine *e, uint32_t v, uint32_t top, int m,
                              int64_t loss);

/*
 * The quota rule of cross-queue priority preemption, for victim c of preemptor p of another
 * queue, given the victims e->cand[0..used) this search took before (what each moves on the
 * fairness resource in e->vloss) and what c moves (`loss`, c alone or its whole gang): below
 * the two queues' common ancestor, p's queue and each of its ancestors stay within their quota
 * with what p's side gains (`gain`, reclaim_gain()), and c's queue and each of its ancestors keep
 * at least their quota after everything taken from their subtree, and their per-GPU-model
 * quotas for the model of c's node (model_keeps_quota(); `loss_model` is what c moves there).
 * So only pods that run on borrowed capacity go, a queue within its quota is never a victim of
 * another queue's priority, and neither side can take back what it lost by this rule (the
 * winner ends within its quota, the loser at or above its own). A quota of GS_UNLIMITED is
 * never exceeded.
 */
static bool xq_quota_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                        uint32_t used, int64_t loss, int64_t loss_model, int64_t gain)
{
    if (c->queue == p->queue)
        return true;
    int r = fair_res(p);
    uint32_t top = common_ancestor(e, p->queue, c->queue);
    for (uint32_t a = p->queue; a != top && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        if (q->quota[r] != GS_UNLIMITED && q->alloc[r] + gain > q->quota[r])
            return false;
    }
    for (uint32_t a = c->queue; a != top && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        if (q->quota[r] == GS_UNLIMITED)
            return false;
        int64_t taken = loss;
        for (uint32_t j = 0; j < used; j++)
            if (queue_under(e, e->p[e->cand[j]].queue, a))
                taken += e->vloss[j];
        if (q->alloc[r] - taken < q->quota[r])
            return false;
    }
    if (c->r[GS_RES_GPU] <= 0)
        return true;
    /* The victims of one search are on one node (gang mates aside), so the GPU taken from c's
     * queue before is on the same model. */
    int64_t taken_model = loss_model;
    for (uint32_t j = 0; j < used && r == GS_RES_GPU; j++)
        if (e->p[e->cand[j]].queue == c->queue)
            taken_model += e->vloss[j];
    return model_keeps_quota(e, c->queue, top, gs__model_of_node(e, c->pl.node), taken_model);
}

/* What evicting one victim moves, in the current victim search (e->vic_stamp). */
struct victim_unit {
    bool whole;         /* its gang goes with it (it would drop below min_member) */
    uint32_t pods;      /* pods evicted */
    int64_t loss;       /* their requests on the preemptor's fairness resource */
    int32_t max_prio;   /* highest priority among them */
    int64_t loss_model; /* their GPU charge on nodes of the victim's node's GPU model */
};

/* ---- per-model reclaim ----------------------------------------------------------------------- */

/* The lowest common ancestor of queues a and b (the root at worst). */
static uint32_t common_ancestor(const struct gs_engine *e, uint32_t a, uint32_t b)
{
    for (uint32_t x = a; x != NO_ID; x = e->q[x].parent)
        for (uint32_t y = b; y != NO_ID; y = e->q[y].parent)
            if (x == y)
                return x;
    return GS_QUEUE_ROOT;
}

/* Whether queue v and its ancestors below `top` keep their per-model quota for model m after
 * losing `loss` milli-GPU of it. A queue without an entry for m is guaranteed none of it. */
static bool model_keeps_quota(const struct gs_engine *e, uint32_t v, uint32_t top, int m,
                              int64_t loss)
{
    if (m < 0)
        return true;
    for (uint32_t a = v; a != top && a != NO_ID; a = e->q[a].parent) {
        const struct gs_model_quota *mq = gs__queue_model(&e->q[a], (uint32_t)m);
        if (mq && e->m_alloc[(size_t)a * GS_MODELS_MAX + (uint32_t)m] - loss < mq->quota_milli)
            return false;
    }
    return true;
}

/* Whether leaf queue qi stays within its own per-model quota for model m with `gain` more. */
static bool leaf_under_model_quota(const struct gs_engine *e, uint32_t qi, int m, int64_t gain)
{
    if (m < 0)
        return false;
    const struct gs_model_quota *mq = gs__queue_model(&e->q[qi], (uint32_t)m);
    return mq && e->m_alloc[(size_t)qi * GS_MODELS_MAX + (uint32_t)m] + gain <= mq->quota_milli;
}

/*
 * Per-model reclaim of victim c (on a node of model m) by preemptor p, as Kueue reclaims one
 * flavor's nominal quota within a cohort: p's queue has an entry for m and stays within its quota
 * for m with what it gains, as does each of its ancestors with an entry below the queues' common
 * ancestor; c's queue and its ancestors below that keep their quotas for m after the loss
 * (model_keeps_quota()). Judged on m only: a gang member elsewhere moves with the unit uncounted.
 */
static bool model_reclaim_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                             int64_t taken, const struct victim_unit *u, int64_t gain)
{
    int m = c->r[GS_RES_GPU] > 0 ? gs__model_of_node(e, c->pl.node) : -1;
    if (m < 0 || c->queue == p->queue || p->r[GS_RES_GPU] <= 0 ||
        !leaf_under_model_quota(e, p->queue, m, gain))
        return false;
    uint32_t top = common_ancestor(e, p->queue, c->queue);
    for (uint32_t a = e->q[p->queue].parent; a != top && a != NO_ID; a = e->q[a].parent) {
        const struct gs_model_quota *mq = gs__queue_model(&e->q[a], (uint32_t)m);
        if (mq && e->m_alloc[(size_t)a * GS_MODELS_MAX + (uint32_t)m] + gain > mq->quota_milli)
            return false;
    }
    return model_keeps_quota(e, c->queue, top, m, taken + u->loss_model);
}

/* Whether p's queue is below its fair share of GPU model m (tenant_cycle.c, model_fair()), or
 * no share of m was divided (no per-model entries, or c holds no GPU). By the overall rule a
 * queue reclaims GPUs of a model only while below its share of that model, so its unused share
 * of one model is never lent to it as another's. */
static bool below_model_fair(const struct gs_engine *e, const struct tpod *p, int m)
{
    if (!e->m_fair_on || m < 0)
        return true;
    size_t k = (size_t)p->queue * GS_MODELS_MAX + (uint32_t)m;
    return e->m_alloc[k] < e->m_fair[k];
}

/* The reclaim rules for victim c: the overall rule (reclaim_ok()) with the reclaimer below its
 * fair share of c's GPU model and the victim's queues keeping their per-model quotas, or the
 * per-model rule (model_reclaim_ok()). */
static bool reclaim_allowed(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                            int64_t taken, const struct victim_unit *u, int64_t gain)
{
    if (reclaim_ok(e, p, c, taken, u->loss, gain, u->whole)) {
        int m = c->r[GS_RES_GPU] > 0 ? gs__model_of_node(e, c->pl.node) : -1;
        if (below_model_fair(e, p, m) &&
            model_keeps_quota(e, c->queue, common_ancestor(e, p->queue, c->queue), m,
                              taken + u->loss_model))
            return true;
    }
    return model_reclaim_ok(e, p, c, taken, u, gain);
}

/*
 * Works out what evicting c moves, given the victims this search has taken so far: c alone
 * while its gang keeps min_member running or finished without it, else c and every running
 * member of its gang not taken yet. A whole gang is a victim only if each of those members is
 * evictable and, for preemption, of lower priority than p. Returns false if c cannot go.
 */
static bool victim_unit(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                        bool reclaim, struct victim_unit *u)
{
    int r = fair_res(p);
    int cm = gs__model_of_node(e, c->pl.node);
    *u = (struct victim_unit){false, 1, c->r[r], prio_of(e, c), cm >= 0 ? c->r[GS_RES_GPU] : 0};
    if (c->gang == GS_NO_GANG)
        return true;
    const struct gang *g = &e->g[c->gang];
    uint32_t taken = g->vic_stamp == e->vic_stamp ? g->vic_taken : 0;
    if (g->running - taken - 1 + g->succeeded >= g->min_member)
        return true;
    *u = (struct victim_unit){true, 0, 0, INT32_MIN, 0};
    for (uint32_t m = 0; m < g->n_members; m++) {
        const struct tpod *o = &e->p[g->members[m]];
        if (o->state != GS_TPOD_RUNNING || o->vic_stamp == e->vic_stamp)
            continue;
        if (o != c && (!pod_evictable(e, o) || (!reclaim && !preempt_ok(e, p, o))))
            return false;
        u->pods++;
        u->loss += o->r[r];
        if (cm >= 0 && gs__model_of_node(e, o->pl.node) == cm)
            u->loss_model += o->r[GS_RES_GPU];
        u->max_prio = prio_of(e, o) > u->max_prio ? prio_of(e, o) : u->max_prio;
    }
    return true;
}

/* Takes victim ci (alone or with its gang) in the current search: marks what moves, lists it in
 * e->taken[*ntaken..], and unbinds from the cluster what of it sits on `node`, listing those in
 * e->unb for the rebind. GS_ENOMEM (nothing taken) when e->taken cannot grow. */
static int take_unit(struct gs_engine *e, uint32_t ci, bool whole, uint32_t node, uint32_t *nunb,
                     uint32_t *ntaken)
{
    struct tpod *c = &e->p[ci];
    struct gang *g = c->gang != GS_NO_GANG ? &e->g[c->gang] : NULL;
    bool all = whole && g; /* only a gang member goes whole */
    uint32_t n = all ? g->n_members : 1;
    if (gs__grow((void **)&e->taken, &e->taken_cap, *ntaken + n, sizeof(uint32_t)) != GS_OK)
        return GS_ENOMEM;
    if (g && g->vic_stamp != e->vic_stamp) {
        g->vic_stamp = e->vic_stamp;
        g->vic_taken = 0;
    }
    for (uint32_t m = 0; m < n; m++) {
        uint32_t oi = all ? g->members[m] : ci;
        struct tpod *o = &e->p[oi];
        if (o->state != GS_TPOD_RUNNING || o->vic_stamp == e->vic_stamp)
            continue;
        o->vic_stamp = e->vic_stamp;
        e->taken[(*ntaken)++] = oi;
        if (g)
            g->vic_taken++;
        if (o->pl.node != node)
            continue;
        (void)gs_cluster_unbind(e->c, &o->req, &o->pl);
        e->unb[(*nunb)++] = oi;
    }
    return GS_OK;
}

/* A node's victims, scored as kube-scheduler's pickOneNodeForPreemption compares them. */
struct victim_set {
    uint32_t node;
    uint32_t violations; /* victims that violate a disruption budget (gs__budget_classify) */
    int32_t max_prio;    /* highest victim priority */
    int64_t sum_prio;    /* sum over the victims of priority + 2^31 */
    uint32_t count;      /* pods evicted, whole gangs counted */
    int64_t start_ms;    /* earliest start among the victims of priority max_prio */
    uint32_t n;          /* entries in e->cand[0..n) */
};

/* Whether victim set a is preferred to b: fewest budget violations, lowest highest priority,
 * lowest sum of priorities, fewest victims, latest start of the highest-priority victims'
 * earliest; equal sets keep the earlier node (the caller scans nodes in order). */
static bool set_better(const struct victim_set *a, const struct victim_set *b)
{
    if (a->violations != b->violations)
        return a->violations < b->violations;
    if (a->max_prio != b->max_prio)
        return a->max_prio < b->max_prio;
    if (a->sum_prio != b->sum_prio)
        return a->sum_prio < b->sum_prio;
    if (a->count != b->count)
        return a->count < b->count;
    return a->start_ms > b->start_ms;
}

/* Scores what the current search (e->vic_stamp) still takes of e->taken[0..ntaken): pods given
 * back were unmarked. A pod not classified yet (a gang mate on another node) is classified now,
 * after the node's own candidates. */
static void score_set(struct gs_engine *e, uint32_t ntaken, struct victim_set *vs)
{
    vs->violations = vs->count = 0;
    vs->max_prio = INT32_MIN;
    vs->sum_prio = 0;
    vs->start_ms = INT64_MAX;
    for (uint32_t i = 0; i < ntaken; i++) {
        const struct tpod *o = &e->p[e->taken[i]];
        if (o->vic_stamp != e->vic_stamp)
            continue;
        int32_t pr = prio_of(e, o);
        vs->count++;
        vs->violations += gs__budget_classify(e, e->taken[i]);
        vs->sum_prio += (int64_t)pr + ((int64_t)INT32_MAX + 1);
        if (pr > vs->max_prio) {
            vs->max_prio = pr;
            vs->start_ms = o->start_ms;
        } else if (pr == vs->max_prio && o->start_ms < vs->start_ms) {
            vs->start_ms = o->start_ms;
        }
    }
}

static int cmp_sort_key(const void *a, const void *b)
{
    const struct sort_key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
    return x->pod < y->pod ? -1 : x->pod > y->pod;
}

/* Sorts pods[0..n) by the keys key_of() gives, through the engine's scratch key array. */
static int sort_pods(struct gs_engine *e, uint32_t *pods, uint32_t n,
                     void (*key_of)(const struct gs_engine *, uint32_t, struct sort_key *))
{
    if (n < 2)
        return GS_OK;
    int err = gs__grow((void **)&e->keys, &e->keys_cap, n, sizeof(*e->keys));
    if (err)
        return err;
    for (uint32_t i = 0; i < n; i++)
        key_of(e, pods[i], &e->keys[i]);
    qsort(e->keys, n, sizeof(*e->keys), cmp_sort_key);
    for (uint32_t i = 0; i < n; i++)
        pods[i] = e->keys[i].pod;
    return GS_OK;
}

/* Victim order on a node: pods that violate no disruption budget before those that do (once the
 * search classified them), then lowest priority, then newest: shortest running (latest start),
 * then latest created (highest id), so a gang above min_member loses its newest members first.
 * The reverse is kube-scheduler's reprieve order (violating first, each most important first):
 * taking victims in this order until the pod fits and giving back the taken ones in reverse
 * while it still fits evicts the same pods as its "remove all, then reprieve". */
static void victim_key(const struct gs_engine *e, uint32_t pod, struct sort_key *k)
{
    const struct tpod *p = &e->p[pod];
    int64_t viol = p->pdb_stamp == e->vic_stamp && p->pdb_viol;
    *k = (struct sort_key){viol * ((int64_t)1 << 40) + e->pc[p->pclass].value, -p->start_ms,
                           -(int64_t)pod, pod};
}

/*
 * Finds the victims that let pod fit on one node, node and victims chosen as kube-scheduler's
 * DefaultPreemption does (see gs_engine_cycle() for the order; set_better()). Victims are tried
 * greedily in victim order (victim_key) on each node that could host the pod, then reprieved
 * in reverse. Never a member of pod's own gang, nor a pod bound earlier in the same trial.
 * Returns true and fills *best, leaving the victims' ids in e->cand[0..best->n).
 */
static bool find_victims(struct gs_engine *e, uint32_t pod, bool reclaim, struct victim_set *best)
{
    struct tpod *p = &e->p[pod];
    uint32_t nn = gs_cluster_node_count(e->c);
    bool found = false;
    /* Only a queue below its fair share on the needed resource may reclaim by the overall rule;
     * by the per-model rule, only on nodes of a model its own quota for is not used up. */
    const struct queue *R = &e->q[p->queue];
    bool overall = reclaim && R->alloc[fair_res(p)] < R->fair[fair_res(p)];
    int64_t gain = reclaim_gain(e, pod, fair_res(p)); /* reclaim, and preemption across queues */
    if (reclaim && !overall && e->q[p->queue].n_mq == 0)
        return false;
    uint64_t room = gs__model_room(e, p); /* the models its per-model limits leave it */
    memset(best, 0, sizeof(*best));
    uint32_t *bestv = NULL;
    uint32_t bestv_cap = 0;
    for (uint32_t n = 0; n < nn && n < e->nodes_cap; n++) {
        uint32_t k = e->node_npods[n];
        if (k == 0)
            continue;
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        if (!gs_filter_pass(e->c, p->fclass, n))
            continue; /* cordoned, tainted or not selected: victims there would not help */
        if (p->req.num_gpu &&
            (nd->gpu_count < p->req.num_gpu ||
             (room != GS_MODEL_ANY && !(room & (UINT64_C(1) << (nd->model_id & 63))))))
            continue;
        if (reclaim && !overall &&
            !leaf_under_model_quota(e, p->queue, gs__model_of_node(e, n), gain))
            continue; /* neither rule can let it reclaim here */
        if (gs__grow((void **)&e->cand, &e->ncand_cap, k, sizeof(uint32_t)) != GS_OK ||
            gs__grow((void **)&e->unb, &e->unb_cap, k, sizeof(uint32_t)) != GS_OK ||
            gs__grow((void **)&e->vloss, &e->vloss_cap, k, sizeof(int64_t)) != GS_OK)
            break;
        e->vic_stamp++;
        uint32_t nc = 0;
        bool budgets = false;
        for (uint32_t i = 0; i < k; i++) {
            uint32_t ci = e->node_pods[n][i];
            const struct tpod *c = &e->p[ci];
            struct victim_unit u;
            if (!pod_evictable(e, c) || (c->gang != GS_NO_GANG && c->gang == p->gang) ||
                c->bind_trial == e->trial || !victim_unit(e, p, c, reclaim, &u))
                continue;
            /* The rules with nothing taken yet are necessary for any set containing c: taking
             * more only lowers the victim queue's allocation and grows what a victim moves. */
            if (reclaim
                    ? reclaim_allowed(e, p, c, 0, &u, gain)
                    : preempt_ok(e, p, c) && xq_quota_ok(e, p, c, 0, u.loss, u.loss_model, gain)) {
                e->cand[nc++] = ci;
                budgets |= c->nbudgets > 0;
            }
        }
        if (nc == 0)
            continue;
        if (sort_pods(e, e->cand, nc, victim_key) != GS_OK)
            break;
        if (budgets) {
            /* kube-scheduler classifies the potential victims most important first (the reverse
             * of victim order, nothing classified yet), then sorts the violating ones last. */
            for (uint32_t i = nc; i-- > 0;)
                (void)gs__budget_classify(e, e->cand[i]);
            if (sort_pods(e, e->cand, nc, victim_key) != GS_OK)
                break;
        }
        /* Greedy: take victims in order until the pod fits, each judged on what it moves. */
        uint32_t used = 0, nunb = 0, ntaken = 0;
        bool fits = false, oom = false;
        for (uint32_t i = 0; i < nc && !fits; i++) {
            struct tpod *c = &e->p[e->cand[i]];
            struct victim_unit u;
            if (c->vic_stamp == e->vic_stamp || !victim_unit(e, p, c, reclaim, &u))
                continue; /* gone with its gang already, or its gang cannot go */
            if (reclaim) {
                int64_t taken = 0;
                for (uint32_t j = 0; j < used; j++)
                    if (e->p[e->cand[j]].queue == c->queue)
                        taken += e->vloss[j];
                if (!reclaim_allowed(e, p, c, taken, &u, gain))
                    continue;
            } else if (!xq_quota_ok(e, p, c, used, u.loss, u.loss_model, gain)) {
                continue; /* its queue would go below its quota with what was taken before */
            }
            if (take_unit(e, e->cand[i], u.whole, n, &nunb, &ntaken) != GS_OK) {
                oom = true;
                break;
            }
            uint32_t tmp = e->cand[used];
            e->cand[used] = e->cand[i];
            e->cand[i] = tmp;
            e->vloss[used] = u.loss;
            used++;
            fits = gs_node_fits(nd, &p->req);
        }
        if (fits && used > 1) {
            /* Reprieve, as kube-scheduler does: give back, in reverse of the order taken (so
             * budget-violating victims first, then most valuable first), each victim the pod
             * fits without (one on an unhealthy GPU frees nothing usable). Only plain pods: a
             * gang member stays with the unit it was taken in. */
            uint32_t kept = 0;
            for (uint32_t i = used; i-- > 0;) {
                struct tpod *c = &e->p[e->cand[i]];
                if (c->gang != GS_NO_GANG)
                    continue;
                (void)gs_cluster_adopt(e->c, &c->req, &c->pl);
                if (!gs_node_fits(nd, &p->req)) {
                    (void)gs_cluster_unbind(e->c, &c->req, &c->pl);
                    continue;
                }
                for (uint32_t j = 0; j < nunb; j++) /* bound again: not restored below */
                    if (e->unb[j] == e->cand[i]) {
                        e->unb[j] = e->unb[--nunb];
                        break;
                    }
                c->vic_stamp = 0; /* no longer taken: score_set() skips it */
                e->cand[i] = NO_ID;
            }
            for (uint32_t i = 0; i < used; i++) { /* the victims left, in victim order */
                if (e->cand[i] == NO_ID)
                    continue;
                e->cand[kept] = e->cand[i];
                e->vloss[kept++] = e->vloss[i];
            }
            used = kept;
        }
        for (uint32_t i = nunb; i-- > 0;) {
            struct tpod *c = &e->p[e->unb[i]];
            (void)gs_cluster_adopt(e->c, &c->req, &c->pl); /* exact restore */
        }
        if (oom)
            break;
        if (!fits)
            continue;
        struct victim_set vs;
        score_set(e, ntaken, &vs);
        vs.node = n;
        vs.n = used;
        if (!found || set_better(&vs, best)) {
            if (gs__grow((void **)&bestv, &bestv_cap, used, sizeof(uint32_t)) != GS_OK)
                break;
            memcpy(bestv, e->cand, used * sizeof(uint32_t));
            *best = vs;
            found = true;
        }
    }
    if (found) {
        if (gs__grow((void **)&e->cand, &e->ncand_cap, best->n, sizeof(uint32_t)) != GS_OK)
            found = false;
        else
            memcpy(e->cand, bestv, best->n * sizeof(uint32_t));
    }
    gs__free(bestv);
    return found;
}

/* Evicts a victim and, when that leaves its gang below min_member (finished members count),
 * the gang's other running members: the same choice victim_unit() made in the search. */
static int evict_victim(struct gs_engine *e, uint32_t victim, enum gs_evict_reason reason,
                        uint32_t by)
{
    struct tpod *c = &e->p[victim];
    if (c->state != GS_TPOD_RUNNING)
        return GS_OK;
    int err = gs__do_evict(e, victim, reason, by);
    if (err || c->gang == GS_NO_GANG)
        return err;
    struct gang *g = &e->g[c->gang];
    if (g->running + g->succeeded >= g->min_member)
        return GS_OK;
    for (uint32_t m = 0; m < g->n_members && !err; m++)
        if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
            err = gs__do_evict(e, g->members[m], GS_EVICT_GANG, by);
    return err;
}

/* Places one pod, evicting victims (preempt or reclaim mode) if it does not fit as is. */
static int place_with_victims(struct gs_engine *e, uint32_t pod, bool reclaim)
{
    int err = place_one(e, pod);
    if (err != GS_EUNSCHEDULABLE)
        return err;
    if (!within_limits(e, &e->p[pod]))
        return GS_EUNSCHEDULABLE;
    if (!reclaim && e->p[pod].preempt_never)
        return GS_EUNSCHEDULABLE; /* preemptionPolicy Never: no victims for priority */
    struct victim_set vs;
    if (!find_victims(e, pod, reclaim, &vs))
        return GS_EUNSCHEDULABLE;
    enum gs_evict_reason why = reclaim ? GS_EVICT_RECLAIM : GS_EVICT_PREEMPT;
    err = GS_OK;
    for (uint32_t i = 0; i < vs.n && !err; i++)
        err = evict_victim(e, e->cand[i], why, pod);
    if (err)
        return err;
    return place_one(e, pod);
}

/* ---- what an eviction says ------------------------------------------------------------------- */

/* A pod as reports name it: "ns/name" in a live cluster, else its name. */
static void pod_label(const struct tpod *p, char *buf, size_t cap)
{
    if (p->ns)
        (void)snprintf(buf, cap, "%s/%s", p->ns, p->name);
    else
        (void)snprintf(buf, cap, "%s", p->name);
}

/*
 * Why `victim` was evicted for preemptor `by` (reason PREEMPT or RECLAIM), as its EVICT event
 * says it after the preemptor's name ("Preempted by ns/p: <this>"); written after the trial's
 * changes, so a queue's allocation is what it holds after them. Preemption within a queue
 * names the priorities; across queues also the two quotas (the rule of xq_quota_ok()); reclaim
 * the victim queue's books against its fair share and quota. Writes "" for other reasons.
 */
void gs__evict_text(const struct gs_engine *e, uint32_t victim, uint32_t by,
                    enum gs_evict_reason reason, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (by == NO_ID || (reason != GS_EVICT_PREEMPT && reason != GS_EVICT_RECLAIM))
        return;
    const struct tpod *v = &e->p[victim], *p = &e->p[by];
    const struct queue *vq = &e->q[v->queue], *pq = &e->q[p->queue];
    int r = fair_res(p);
    char quota[64], held[64], fair[64];
    gs__fmt_amount(held, sizeof(held), r, vq->alloc[r]);
    gs__fmt_amount(fair, sizeof(fair), r, vq->fair[r]);
    if (reason == GS_EVICT_RECLAIM) {
        gs__fmt_amount(quota, sizeof(quota), r, vq->quota[r]);
        (void)snprintf(buf, cap,
                       "queue %s lent what queue %s is guaranteed (it holds %s after the "
                       "eviction, fair share %s, quota %s)",
                       vq->name, pq->name, held, fair, quota);
        return;
    }
    if (v->queue == p->queue) {
        (void)snprintf(buf, cap, "priority %d > %d in queue %s", prio_of(e, p), prio_of(e, v),
                       pq->name);
        return;
    }
    char pquota[64];
    gs__fmt_amount(pquota, sizeof(pquota), r, pq->quota[r]);
    gs__fmt_amount(quota, sizeof(quota), r, vq->quota[r]);
    (void)snprintf(buf, cap,
                   "priority %d > %d; queue %s is within its quota of %s, queue %s ran above "
                   "its quota of %s (it holds %s after the eviction)",
                   prio_of(e, p), prio_of(e, v), pq->name, pquota, vq->name, quota, held);
}

/*
 * Appends to buf (holding len bytes) the entry of one victim in its preemptor's BIND text:
 * "ns/v (priority 10, same queue)", "ns/v (priority 10, queue b above its quota of 1 GPU)",
 * "ns/v (queue b above its fair share of 2 GPUs)" for reclaim, "ns/v (its gang g went whole)".
 * Returns the new length (cut at cap - 1).
 */
size_t gs__victim_note(const struct gs_engine *e, uint32_t victim, uint32_t by,
                       enum gs_evict_reason reason, char *buf, size_t len, size_t cap)
{
    if (len + 1 >= cap)
        return len;
    const struct tpod *v = &e->p[victim], *p = &e->p[by];
    const struct queue *vq = &e->q[v->queue];
    int r = fair_res(p);
    char who[300], amt[64];
    pod_label(v, who, sizeof(who));
    int w;
    if (reason == GS_EVICT_GANG) {
        w = snprintf(buf + len, cap - len, "%s (its gang %s went whole)", who,
                     v->gang != GS_NO_GANG ? e->g[v->gang].name : "?");
    } else if (reason == GS_EVICT_RECLAIM) {
        gs__fmt_amount(amt, sizeof(amt), r, vq->fair[r]);
        w = snprintf(buf + len, cap - len, "%s (queue %s above its fair share of %s)", who,
                     vq->name, amt);
    } else if (v->queue == p->queue) {
        w = snprintf(buf + len, cap - len, "%s (priority %d, same queue)", who, prio_of(e, v));
    } else {
        gs__fmt_amount(amt, sizeof(amt), r, vq->quota[r]);
        w = snprintf(buf + len, cap - len, "%s (priority %d, queue %s above its quota of %s)", who,
                     prio_of(e, v), vq->name, amt);
    }
    if (w < 0)
        return len;
    return len + (size_t)w < cap ? len + (size_t)w : cap - 1;
}

/* ---- one job in one mode --------------------------------------------------------------------- */

/*
 * Tries a job in one mode (0 plain, 1 preempt, 2 reclaim). On success the changes stay in the
 * log (from `mark`); on failure they are rolled back. Returns GS_OK, GS_EUNSCHEDULABLE or
 * GS_ENOMEM.
 */
int gs__try_job_mode(struct gs_engine *e, uint32_t head, int mode, uint32_t mark)
{
    e->trial++;
    uint32_t *members, need;
    uint32_t nm = gs__job_members(e, head, &members, &need);
    int err;
    if (nm == 0) {
        err = mode == 0 ? place_one(e, head) : place_with_victims(e, head, mode == 2);
        if (err)
            gs__rollback(e, mark);
        return err;
    }
    /* A gang: place pending members until min_member run, all or nothing; extra members that
     * fit join too. Without evictions, a gang whose needed members ask for more GPU than the
     * cluster has free is refused before any trial placement. A gang in its grace period
     * first gets back what it holds for its replacements (undone with the trial if it fails). */
    if (e->g[e->p[head].gang].n_holds > 0 && (err = gs__release_holds(e, e->p[head].gang))) {
        gs__rollback(e, mark);
        return err;
    }
    if (mode == 0 && need > 0) {
        int64_t gpu_need = 0;
        uint32_t counted = 0;
        for (uint32_t m = 0; m < nm && counted < need; m++) {
            const struct tpod *mp = &e->p[members[m]];
            if (mp->state != GS_TPOD_PENDING)
                continue;
            gpu_need += mp->r[GS_RES_GPU];
            counted++;
        }
        bool short_gpu = gpu_need > e->capacity[GS_RES_GPU] - gs_cluster_gpu_milli_used(e->c);
        uint32_t slots = gs__gang_slots(e, members, nm);
        if (short_gpu || slots < need) {
            struct gang *sg = &e->g[e->p[head].gang];
            sg->last_fit = sg->running + sg->succeeded + (slots < need ? slots : need - 1);
            gs__rollback(e, mark);
            return GS_EUNSCHEDULABLE;
        }
    }
    uint32_t placed = 0;
    for (uint32_t m = 0; m < nm; m++) {
        uint32_t pi = members[m];
        if (e->p[pi].state != GS_TPOD_PENDING)
            continue;
        err = mode == 0 ? place_one(e, pi) : place_with_victims(e, pi, mode == 2);
        if (err == GS_ENOMEM) {
            gs__rollback(e, mark);
            return err;
        }
        if (err == GS_OK)
            placed++;
        else if (placed < need && mode == 0)
            break; /* plain mode: a member that does not fit now will not fit later */
    }
    /* Judged on the gang's state, not on `placed`: a member placed and then displaced inside
     * the trial must not count. */
    struct gang *g = &e->g[e->p[head].gang];
    if (placed < need || (need == 0 && placed == 0) || g->running + g->succeeded < g->min_member) {
        if (mode == 0) /* running (finished ones count) before the rollback takes them back */
            g->last_fit = g->running + g->succeeded;
        gs__rollback(e, mark);
        return GS_EUNSCHEDULABLE;
    }
    return GS_OK;
}

/* ---- backfill -------------------------------------------------------------------------------- */

/* Whether the binds since `mark` respect every reservation of this cycle. */
bool gs__respects_reservations(const struct gs_engine *e, uint32_t mark)
{
    for (uint32_t i = mark; i < e->nlog; i++) {
        const struct undo *u = &e->log[i];
        if (u->kind == UNDO_HOLD)
            continue; /* a gang's own held capacity given back to it */
        if (u->kind != UNDO_BIND)
            return false; /* backfill never evicts */
        const struct tpod *p = &e->p[u->pod];
        for (uint32_t k = 0; k < e->nresv; k++) {
            const struct reservation *rv = &e->resv[k];
            if (!rv->nodes[u->pl.node])
                continue;
            if (p->est_ms < 0 || e->now_ms + p->est_ms > rv->start_ms)
                return false;
        }
    }
    return true;
}

/* Backfill order: earliest estimated end first, then id. */
static void end_key(const struct gs_engine *e, uint32_t pod, struct sort_key *k)
{
    const struct tpod *p = &e->p[pod];
    *k = (struct sort_key){p->start_ms + p->est_ms, 0, 0, pod};
}

/*
 * EASY backfill: finds when the blocked job headed by `head` could start if running pods end
 * at their estimates (release them in order of estimated end, trying the job after each), and
 * records the nodes it would use then as reserved until that time. Everything is rolled back.
 */
int gs__reserve(struct gs_engine *e, uint32_t head)
{
    /* The running pods by estimated end change only when something is committed: build the
     * order once per change, from the per-node lists (no scan of every pod ever submitted). */
    if (e->end_order_at != e->mutations) {
        uint32_t nn = gs_cluster_node_count(e->c), k = 0;
        for (uint32_t n = 0; n < nn && n < e->nodes_cap; n++) {
            for (uint32_t j = 0; j < e->node_npods[n]; j++) {
                uint32_t pi = e->node_pods[n][j];
                if (e->p[pi].est_ms < 0)
                    continue;
                if (gs__grow((void **)&e->end_order, &e->end_order_cap, k + 1, sizeof(uint32_t)))
                    return GS_ENOMEM;
                e->end_order[k++] = pi;
            }
        }
        if (sort_pods(e, e->end_order, k, end_key) != GS_OK)
            return GS_ENOMEM;
        e->end_order_n = k;
        e->end_order_at = e->mutations;
    }
    uint32_t n_run = e->end_order_n;
    if (n_run == 0)
        return GS_OK;
    uint32_t *order = gs__malloc(n_run * sizeof(*order));
    if (!order)
        return GS_ENOMEM;
    memcpy(order, e->end_order, n_run * sizeof(*order));
    uint32_t mark = e->nlog;
    int err = GS_OK;
    int64_t at = -1;
    uint32_t nn = gs_cluster_node_count(e->c);
    uint8_t *nodes = NULL;
    for (uint32_t i = 0; i < n_run && i < BACKFILL_RELEASES_MAX; i++) {
        struct tpod *r = &e->p[order[i]];
        if ((err = gs__do_evict(e, order[i], GS_EVICT_NONE, NO_ID)) != GS_OK)
            break;
        /* Try only once every pod ending at this same time is released. */
        if (i + 1 < n_run &&
            e->p[order[i + 1]].start_ms + e->p[order[i + 1]].est_ms == r->start_ms + r->est_ms)
            continue;
        uint32_t inner = e->nlog;
        if (e->p[head].gang == GS_NO_GANG) {
            /* A single pod did not fit before these releases, so it fits now only on a node
             * they touched: check those nodes alone instead of a whole placement. */
            uint32_t batch_start = i;
            while (batch_start > 0 &&
                   e->p[order[batch_start - 1]].start_ms + e->p[order[batch_start - 1]].est_ms ==
                       r->start_ms + r->est_ms)
                batch_start--;
            bool fits = false;
            for (uint32_t j = batch_start; j <= i && !fits; j++) {
                const struct gs_node *nd = gs_cluster_node(e->c, e->p[order[j]].pl.node);
                fits = gs_node_fits(nd, &e->p[head].req) && within_limits(e, &e->p[head]);
            }
            if (!fits)
                continue;
        }
        err = gs__try_job_mode(e, head, 0, inner);
        if (err == GS_ENOMEM)
            break;
        if (err == GS_OK) {
            at = r->start_ms + r->est_ms;
            nodes = gs__calloc(nn ? nn : 1, 1);
            if (!nodes) {
                err = GS_ENOMEM;
                break;
            }
            for (uint32_t j = inner; j < e->nlog; j++)
                if (e->log[j].kind == UNDO_BIND)
                    nodes[e->log[j].pl.node] = 1;
            break;
        }
        err = GS_OK;
    }
    gs__rollback(e, mark);
    gs__free(order);
    if (err == GS_ENOMEM) {
        gs__free(nodes);
        return err;
    }
    if (at < 0) {
        gs__free(nodes);
        return GS_OK;
    }
    if (gs__grow((void **)&e->resv, &e->capresv, e->nresv + 1, sizeof(*e->resv)) != GS_OK) {
        gs__free(nodes);
        return GS_ENOMEM;
    }
    e->resv[e->nresv++] = (struct reservation){at, nodes};
    return GS_OK;
}
