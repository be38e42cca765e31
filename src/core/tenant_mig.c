/*
 * Dynamic MIG in the tenant engine (gs_engine_config.dynamic_mig): a MIG pod that fits no node
 * as the layouts are takes a GPU re-partitioned for it. Every MIG GPU the pod could use is
 * planned with gs_mig_plan_repartition() (include/gpusched/mig_plan.h) and the best plan over
 * the cluster wins by the planner's own rules (fewest destroyed, highest future score, fewest
 * created), then by node rank and GPU index. The layout change goes through the undo log like
 * a bind, so a failed trial (a gang that does not fit whole, a preemption that does not pay)
 * puts the old layout back; commit reports the pod's BIND with the re-partition's delay. Part
 * of the tenant engine (tenant_int.h).
 */
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/mig_plan.h"
#include "tenant_int.h"

/* The best plan found so far and where it applies. */
struct choice {
    bool found;
    uint32_t node, gpu, rank;
    struct gs_mig_plan plan;
};

/* Whether plan `a` on (rank, gpu) beats the choice: the planner's rules across GPUs, then the
 * node's tie-break rank and the GPU index. */
static bool beats(const struct gs_mig_plan *a, uint32_t rank, uint32_t gpu, const struct choice *b)
{
    if (!b->found)
        return true;
    if (a->n_destroyed != b->plan.n_destroyed)
        return a->n_destroyed < b->plan.n_destroyed;
    if (a->score != b->plan.score)
        return a->score > b->plan.score;
    if (a->n_created != b->plan.n_created)
        return a->n_created < b->plan.n_created;
    if (rank != b->rank)
        return rank < b->rank;
    return gpu < b->gpu;
}

/* Plans every MIG GPU of node i for the pod's request, keeping the best plan in *best. */
static void plan_node(const struct gs_engine *e, const struct gs_pod_req *req, uint32_t i,
                      struct choice *best)
{
    const struct gs_node *n = gs_cluster_node(e->c, i);
    uint32_t rank = e->cfg.node_rank ? e->cfg.node_rank[i] : i;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (gpu->sharing != GS_GPU_SHARE_MIG || !gpu->healthy || !gpu->mig_model)
            continue;
        int prof = gs_mig_profile_find(gpu->mig_model, req->mig_profile);
        if (prof < 0)
            continue;
        struct gs_mig_slot cur[GS_MIG_INSTANCES_MAX];
        for (uint32_t k = 0; k < gpu->mig_count; k++)
            cur[k] = (struct gs_mig_slot){gpu->mig[k], (gpu->mig_held >> k & 1) != 0};
        struct gs_mig_plan plan;
        if (gs_mig_plan_repartition(gpu->mig_model, cur, gpu->mig_count, (uint32_t)prof,
                                    req->mig_count, &plan) != GS_OK)
            continue;
        if (beats(&plan, rank, g, best)) {
            best->found = true;
            best->node = i;
            best->gpu = g;
            best->rank = rank;
            best->plan = plan;
        }
    }
}

/* Records the GPU's layout before a re-partition for pod `pod` (UNDO_MIG: by = node, reason =
 * GPU index, pl.mig[0..mig_count) the instances as they were). Capacity is ensured by the
 * caller. */
static void log_old_layout(struct gs_engine *e, uint32_t pod, uint32_t node, uint32_t g)
{
    const struct gs_gpu *gpu = &gs_cluster_node(e->c, node)->gpus[g];
    struct undo u;
    memset(&u, 0, sizeof(u));
    u.pod = pod;
    u.kind = UNDO_MIG;
    u.reason = (uint8_t)g;
    u.by = node;
    u.pl.node = node;
    u.pl.mig_count = gpu->mig_count;
    for (uint32_t k = 0; k < gpu->mig_count; k++)
        u.pl.mig[k] = (struct gs_placement_mig){(uint8_t)g, gpu->mig[k].profile, gpu->mig[k].start};
    e->log[e->nlog++] = u;
}

/* Undoes one UNDO_MIG record: the GPU gets back the layout it had (gs__rollback()). */
void gs__undo_mig(struct gs_engine *e, const struct undo *u)
{
    struct gs_mig_instance old[GS_MIG_INSTANCES_MAX];
    for (uint32_t k = 0; k < u->pl.mig_count; k++)
        old[k] = (struct gs_mig_instance){u->pl.mig[k].profile, u->pl.mig[k].start};
    /* Every later change is undone first, so the held instances are the ones that were held
     * before the re-partition, all in the old layout: this cannot fail. */
    (void)gs_cluster_set_mig_layout(e->c, u->by, u->reason, old, u->pl.mig_count, NULL, 0);
}

/*
 * Places pending MIG pod `pod` on a GPU re-partitioned for it, when gs_engine_config.dynamic_mig
 * is on (the caller found no node as the layouts are and checked the queue limits). The layout
 * change and the bind go into the undo log, in that order (gs__commit() reads the pair as "this
 * bind waited for a re-partition"). Returns GS_OK; GS_EUNSCHEDULABLE when dynamic MIG is off,
 * the pod asks no MIG instance or no GPU has a plan; GS_ENOMEM (nothing changed then). `req` is
 * the pod's request with the GPU models its queues' per-model limits leave it (gs__model_room()).
 */
int gs__place_mig_dynamic(struct gs_engine *e, uint32_t pod, const struct gs_pod_req *req)
{
    const struct tpod *p = &e->p[pod];
    if (!e->cfg.dynamic_mig || gs_req_kind(req) != GS_REQ_MIG)
        return GS_EUNSCHEDULABLE;
    const struct gs_node_fit *fit = gs_cluster_fit_array(e->c);
    uint32_t nn = gs_cluster_node_count(e->c);
    struct choice best;
    memset(&best, 0, sizeof(best));
    for (uint32_t i = 0; i < nn; i++) {
        /* CPU, memory, a pod slot, the GPU model and a healthy MIG GPU (the packed view); the
         * pod's filters (selectors, taints, cordon); other resources. */
        if (!gs_fit_ok(&fit[i], req) || !gs_filter_pass(e->c, p->fclass, i))
            continue;
        if (req->xres_count && !gs_node_xres_fits(gs_cluster_node(e->c, i), req))
            continue;
        plan_node(e, req, i, &best);
    }
    if (!best.found)
        return GS_EUNSCHEDULABLE;
    const struct gs_mig_plan *plan = &best.plan;
    int err = gs__grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log));
    if (err)
        return err;
    uint32_t mark = e->nlog;
    if (plan->n_ops > 0) {
        log_old_layout(e, pod, best.node, best.gpu);
        err = gs_cluster_set_mig_layout(e->c, best.node, best.gpu, plan->layout, plan->n_layout,
                                        NULL, 0);
        if (err) { /* not reached: the plan keeps every held instance and passed the check */
            e->nlog = mark;
            return err;
        }
    }
    /* The plan's instances, by start (a placement lists them by GPU, then start). */
    struct gs_placement pl;
    memset(&pl, 0, sizeof(pl));
    pl.node = best.node;
    for (uint32_t k = 0; k < plan->n_granted; k++) {
        struct gs_mig_instance in = plan->layout[plan->granted[k]];
        uint32_t j = pl.mig_count++;
        while (j > 0 && pl.mig[j - 1].start > in.start) {
            pl.mig[j] = pl.mig[j - 1];
            j--;
        }
        pl.mig[j] = (struct gs_placement_mig){(uint8_t)best.gpu, in.profile, in.start};
    }
    err = gs__do_bind(e, pod, &pl);
    if (err) {
        if (e->nlog > mark)
            gs__rollback(e, mark);
        return err;
    }
    return GS_OK;
}
