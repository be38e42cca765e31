/*
 * Gangs (PodGroups): their records, the judgement that refuses a gang whose minimum can never
 * fit under its queue's caps, the members of a gang trial, the quick bound that proves a gang
 * cannot fit right now, the gang timeout, and the grace period of a gang that lost members
 * (docs/internals/tenancy.md, "Gangs that lose members"). Part of the tenant engine
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

int gs_engine_add_gang(struct gs_engine *e, const struct gs_gang_spec *spec, uint32_t *id)
{
    if (!spec->name || !*spec->name || spec->min_member == 0 || spec->timeout_ms < 0)
        return GS_EINVAL;
    for (uint32_t i = 0; i < e->ng; i++)
        if (strcmp(e->g[i].name, spec->name) == 0)
            return GS_EEXIST;
    int err = gs__grow((void **)&e->g, &e->capg, e->ng + 1, sizeof(*e->g));
    if (err)
        return err;
    char *name = gs__dup_str(spec->name);
    if (!name)
        return GS_ENOMEM;
    struct gang *g = &e->g[e->ng];
    memset(g, 0, sizeof(*g));
    g->name = name;
    g->min_member = spec->min_member;
    g->timeout_ms = spec->timeout_ms;
    g->first_submit_ms = -1;
    g->tried_cycle = UINT32_MAX;
    g->last_fit = UINT32_MAX;
    g->degraded_ms = -1;
    if (id)
        *id = e->ng;
    e->ng++;
    return GS_OK;
}

int gs_engine_set_gang_min_member(struct gs_engine *e, uint32_t gang, uint32_t min_member)
{
    if (gang >= e->ng || min_member == 0)
        return GS_EINVAL;
    struct gang *g = &e->g[gang];
    if (g->started || g->running > 0 || g->succeeded > 0)
        return GS_EINVAL;
    g->min_member = min_member;
    gs__gang_judge(e, gang);
    for (uint32_t m = 0; m < g->n_members; m++)
        e->p[g->members[m]].explained_at = UINT64_MAX; /* its reason names the minimum */
    return GS_OK;
}

int gs_engine_set_gang_grace(struct gs_engine *e, uint32_t gang, int64_t grace_ms)
{
    if (gang >= e->ng || grace_ms < 0)
        return GS_EINVAL;
    e->g[gang].grace_ms = grace_ms;
    return GS_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Decides whether gang gi can ever start under the limits of its queue and its ancestors, and
 * records the answer in g->refused and g->reason. Its minimum is min_member less its finished
 * members, to run at once; per resource the least that takes is the sum of the smallest requests
 * among its pending and running members (all of them while they are fewer than the minimum: the
 * members still to come can only add). A queue's cap is its limit, or its quota when its
 * over-quota weight is 0, as within_limits() applies them. A gang with running members is never
 * refused (it already fits). Needs e->vals for n_members values; cannot fail.
 */
void gs__gang_judge(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    g->refused = false;
    g->reason[0] = '\0';
    if (g->n_members == 0 || g->running > 0 || g->succeeded >= g->min_member)
        return;
    uint32_t k = g->min_member - g->succeeded;
    uint32_t qi = e->p[g->members[0]].queue;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        uint32_t n = 0;
        for (uint32_t m = 0; m < g->n_members; m++) {
            const struct tpod *o = &e->p[g->members[m]];
            if (o->state == GS_TPOD_PENDING || o->state == GS_TPOD_RUNNING)
                e->vals[n++] = o->r[r];
        }
        if (n > k)
            qsort(e->vals, n, sizeof(*e->vals), cmp_i64);
        int64_t need = 0;
        for (uint32_t i = 0; i < n && i < k; i++)
            need += e->vals[i];
        if (need <= 0)
            continue;
        for (uint32_t a = qi; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
            const struct queue *q = &e->q[a];
            if (q->deleted)
                return; /* not refused: it waits for its queue (gs_engine_delete_queue()) */
            int64_t cap = q->limit[r];
            bool by_quota = q->weight <= 0 && q->quota[r] != GS_UNLIMITED && q->quota[r] < cap;
            if (by_quota)
                cap = q->quota[r];
            if (cap == GS_UNLIMITED || need <= cap)
                continue;
            char a_need[32], a_cap[32];
            gs__fmt_amount(a_need, sizeof(a_need), r, need);
            gs__fmt_amount(a_cap, sizeof(a_cap), r, cap);
            (void)snprintf(g->reason, sizeof(g->reason),
                           "gang %.100s needs %s at minimum but queue %s is limited to %s%s",
                           g->name, a_need, q->name, a_cap,
                           by_quota ? " (its quota; over-quota weight 0)" : "");
            g->refused = true;
            return;
        }
    }
}

/* Pods of the job headed by `head`: the gang's pending members, or the pod alone. */
uint32_t gs__job_members(struct gs_engine *e, uint32_t head, uint32_t **out, uint32_t *need)
{
    struct tpod *p = &e->p[head];
    if (p->gang == GS_NO_GANG) {
        *out = &p->seq; /* unused placeholder; caller uses head */
        *need = 1;
        return 0;
    }
    struct gang *g = &e->g[p->gang];
    *out = g->members;
    uint32_t have = g->running + g->succeeded;
    *need = g->min_member > have ? g->min_member - have : 0;
    return g->n_members;
}

/*
 * An upper bound on how many pending members of a gang the cluster could host right now, when
 * they all ask for the same thing (the usual gang): per node, the fewest copies that its free
 * CPU, memory, pod slots and GPUs allow, summed. Ignores placement order and limits, so it only
 * proves that a gang cannot fit: a gang of 512 eight-GPU pods is refused in one pass over the
 * packed node view instead of 300 trial placements and their rollback. Returns UINT32_MAX
 * when the members differ (no bound).
 */
uint32_t gs__gang_slots(const struct gs_engine *e, const uint32_t *members, uint32_t nm)
{
    const struct gs_pod_req *rq = NULL;
    for (uint32_t m = 0; m < nm; m++) {
        const struct tpod *mp = &e->p[members[m]];
        if (mp->state != GS_TPOD_PENDING)
            continue;
        if (rq && !gs_pod_req_equal(rq, &mp->req))
            return UINT32_MAX;
        rq = &mp->req;
    }
    if (!rq)
        return 0;
    const struct gs_node_fit *fit = gs_cluster_fit_array(e->c);
    uint32_t nn = gs_cluster_node_count(e->c);
    uint64_t slots = 0;
    /* With dynamic MIG a node whose layouts hold no free instance of the profile may still
     * take members after a re-partition: only the packed view's necessary test applies. */
    bool replan = e->cfg.dynamic_mig && gs_req_kind(rq) == GS_REQ_MIG;
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node_fit *f = &fit[n];
        if (replan ? !gs_fit_ok(f, rq) : !gs_cluster_fits_at(e->c, fit, n, rq))
            continue;
        int64_t k = f->pods_left;
        if (rq->xres_count > 0)
            k = min64(k, gs_node_xres_copies(gs_cluster_node(e->c, n), rq));
        if (rq->cpu_milli > 0)
            k = min64(k, f->cpu_milli_free / rq->cpu_milli);
        if (rq->mem_mib > 0)
            k = min64(k, f->mem_mib_free / rq->mem_mib);
        if (rq->num_gpu > 0 && rq->gpu_milli > 0 && gs_req_kind(rq) == GS_REQ_MILLI) {
            int64_t g = 0;
            for (uint32_t i = 0; i < f->gpu_count; i++)
                g += f->gpu_free_desc[i] / rq->gpu_milli; /* copies each GPU can take */
            k = min64(k, rq->gpu_milli < GS_GPU_MILLI ? g : g / rq->num_gpu);
        }
        slots += (uint64_t)k;
        if (slots >= nm)
            return nm;
    }
    return (uint32_t)slots;
}

void gs__fail_timed_out_gangs(struct gs_engine *e)
{
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        struct gang *g = &e->g[gi];
        if (g->started || g->timeout_ms <= 0 || g->first_submit_ms < 0 || g->pending == 0 ||
            e->now_ms - g->first_submit_ms < g->timeout_ms)
            continue;
        for (uint32_t m = 0; m < g->n_members; m++) {
            struct tpod *p = &e->p[g->members[m]];
            if (p->state != GS_TPOD_PENDING)
                continue;
            p->state = GS_TPOD_FAILED;
            p->end_ms = e->now_ms;
            e->q[p->queue].pending--;
            g->pending--;
            gs__account(e, p->queue, 1, p->r, -1);
            gs__emit(e, GS_EV_GANG_TIMEOUT, g->members[m], NO_ID, GS_EVICT_NONE, NULL);
        }
        gs__gang_judge(e, gi);
    }
}

/* ---- gangs that lose members ----------------------------------------------------------------- */

/* Makes room for one more hold of gang gi, so that gs__gang_hold_add() cannot fail. */
int gs__gang_hold_reserve(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    return gs__grow((void **)&g->holds, &g->cap_holds, g->n_holds + 1, sizeof(*g->holds));
}

/*
 * Holds what a lost member of gang gi freed (req on pl, released from the cluster just before)
 * for the gang's replacements: binds it again in the cluster, where no other pod can take it,
 * until the gang's next trial gives it back (gs__release_holds()) or the grace period ends. Needs
 * gs__gang_hold_reserve() first; cannot fail (what was just released fits again).
 */
void gs__gang_hold_add(struct gs_engine *e, uint32_t gi, const struct gs_pod_req *req,
                       const struct gs_placement *pl)
{
    struct gang *g = &e->g[gi];
    (void)gs_cluster_adopt(e->c, req, pl);
    g->holds[g->n_holds++] = (struct gang_hold){*req, *pl, HOLD_HELD};
}

/* Gives back to the cluster every hold of gang gi still held; forgets the list when no hold
 * is left in a trial in progress. */
static void drop_holds(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    bool in_trial = false;
    for (uint32_t i = 0; i < g->n_holds; i++) {
        struct gang_hold *h = &g->holds[i];
        if (h->state == HOLD_HELD) {
            (void)gs_cluster_unbind(e->c, &h->req, &h->pl);
            h->state = HOLD_DEAD;
        }
        in_trial = in_trial || h->state == HOLD_RELEASED;
    }
    if (!in_trial)
        g->n_holds = 0;
}

/*
 * Ends gang gi's grace period when it is in one and no longer needs it: it is back at
 * min_member (running or finished), or nothing of it runs any more. Its holds go back to the
 * cluster. Cannot fail.
 */
void gs__gang_settle(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    if (g->degraded_ms < 0 && g->n_holds == 0)
        return;
    if (g->running > 0 && g->running + g->succeeded < g->min_member)
        return;
    drop_holds(e, gi);
    g->degraded_ms = -1;
}

/* Called after gang gi lost running members at now_ms (deleted, or their node removed) and
 * still runs some below min_member: its grace period starts unless it is in one already. */
void gs__gang_degrade(struct gs_engine *e, uint32_t gi, int64_t now_ms)
{
    struct gang *g = &e->g[gi];
    if (g->degraded_ms < 0)
        g->degraded_ms = now_ms;
}

/* Gives back the holds of every gang on node `node` (the node is going away). */
void gs__gang_drop_node_holds(struct gs_engine *e, uint32_t node)
{
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        struct gang *g = &e->g[gi];
        for (uint32_t i = 0; i < g->n_holds; i++) {
            struct gang_hold *h = &g->holds[i];
            if (h->state == HOLD_HELD && h->pl.node == node) {
                (void)gs_cluster_unbind(e->c, &h->req, &h->pl);
                h->state = HOLD_DEAD;
            }
        }
    }
}

/*
 * Releases every gang whose grace period has ended at e->now_ms without getting back to
 * min_member: its running members are evicted with reason GANG (EVICT events), its holds go
 * back to the cluster, and each released member gets a GANG_TIMEOUT event after the EVICTs,
 * with the reason as text. The gang starts over: not started, its schedule timeout counted from
 * now. Returns GS_OK or GS_ENOMEM (that gang is then left as it was).
 */
int gs__gang_expire_grace(struct gs_engine *e)
{
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        struct gang *g = &e->g[gi];
        if (g->degraded_ms < 0 || e->now_ms - g->degraded_ms < g->grace_ms)
            continue;
        uint32_t mark = e->nlog;
        int err = GS_OK;
        for (uint32_t m = 0; m < g->n_members && !err; m++)
            if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
                err = gs__do_evict(e, g->members[m], GS_EVICT_GANG, NO_ID);
        if (err) {
            gs__rollback(e, mark);
            return err;
        }
        uint32_t end = e->nlog;
        g->started = false;
        g->first_submit_ms = e->now_ms;
        drop_holds(e, gi);
        g->degraded_ms = -1;
        err = gs__commit(e, mark, false);
        /* The log's records stay readable after the commit (it only rewinds nlog) until the
         * next change is logged; the callbacks may not change the engine. */
        char text[GANG_REASON_MAX];
        (void)snprintf(text, sizeof(text),
                       "gang %.100s did not get back to min_member %u within its grace period "
                       "of %lld s",
                       g->name, g->min_member, (long long)(g->grace_ms / 1000));
        for (uint32_t i = mark; i < end; i++)
            gs__emit_text(e, GS_EV_GANG_TIMEOUT, e->log[i].pod, NO_ID, GS_EVICT_NONE, NULL, text);
        gs__gang_judge(e, gi);
        if (err)
            return err;
    }
    return GS_OK;
}
