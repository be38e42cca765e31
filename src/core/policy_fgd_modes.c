/*
 * FGD on the per-GPU fragmentation measure (gs_frag_node_gpus(), docs/fgd-policies.md §3.7):
 * the score and GPU choice of milli requests on nodes the free-milli measure cannot judge, and
 * of memory-fraction and MIG requests everywhere.
 *
 * A candidate placement is applied to a copy of the node's GPU records exactly as a bind
 * would apply it (share.c, gs__share_apply(): compute and memory debited, an instance held),
 * the derived free amounts recomputed with the cluster's own rule, and F measured on the
 * result; the score is FGD's trunc(100 x sigmoid((F_before - F_after) / 1000)).
 *  - milli sharing pod: every fractions GPU with room, the first by index reaching the best;
 *  - milli whole GPUs: the GPUs the milli path takes (gs__pick_whole_gpus());
 *  - memory fraction on num_gpu GPUs, MIG request of mig_count instances: one GPU (instance)
 *    at a time, each time the one whose taking leaves the lowest F, the lowest index on a tie
 *    (for MIG the lowest free start of the profile on that GPU, as gs_node_pick_gpus() takes).
 *    One unit is exact; several are a greedy descent along the gradient, which costs units x
 *    GPUs evaluations instead of the combinations.
 * With dynamic MIG re-partition off the layouts are fixed, and the measure reads them as they
 * are; a re-partition (tenant_mig.c) is planned only for a pod that fits nowhere as is.
 */
#include <math.h>
#include <string.h>

#include "cluster_int.h"
#include "gpusched/err.h"
#include "sched_int.h"

static void gpu_refresh(struct gs_gpu *g)
{
    int64_t f = g->mem_mib - g->mem_mib_used;
    g->mem_mib_free = f > 0 ? f : 0;
    g->gpu_milli_free = gs__gpu_milli_open(g);
}

/* A share of compute and memory taken on g, as gs__share_apply() takes it. */
static void gpu_take(struct gs_gpu *g, int32_t milli, int64_t mem_mib)
{
    g->gpu_milli_used += milli;
    g->mem_mib_used += mem_mib;
    g->pods = (uint16_t)(g->pods + 1);
    gpu_refresh(g);
}

static double frag_after(const struct gs_sched *s, const struct gs_node *n, int64_t cpu_after,
                         const struct gs_gpu *gpus)
{
    return gs_frag_node_gpus(s->w, n->model_id, cpu_after, gpus, n->gpu_count, NULL);
}

int32_t gs__fgd_milli_full(const struct gs_sched *s, const struct gs_node *n,
                           const struct gs_pod_req *req, double f_before, uint32_t *gpu)
{
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    /* The copy is of the whole node, not an array of GPU records: the analyzer's padding check
     * weighs a local array of struct gs_gpu by its length. Only the GPUs are read. */
    struct gs_node copy = *n;
    struct gs_gpu *after = copy.gpus;
    if (req->num_gpu > 0 && is_share(req)) {
        int32_t best = -1;
        uint32_t pick = 0;
        for (uint32_t g = 0; g < n->gpu_count; g++) {
            if (after[g].sharing != GS_GPU_SHARE_MILLI || after[g].gpu_milli_free < req->gpu_milli)
                continue;
            struct gs_gpu keep = after[g];
            gpu_take(&after[g], req->gpu_milli, gs__milli_mem_mib(&after[g], req->gpu_milli));
            int32_t sc = gs__fgd_score_of(f_before, frag_after(s, n, cpu_after, after));
            after[g] = keep;
            if (sc > best) {
                best = sc;
                pick = g;
            }
        }
        if (gpu)
            *gpu = pick;
        return best;
    }
    /* Whole GPUs: the ones the pick takes (gs__pick_whole_gpus(): the first num_gpu wholly
     * free by index, or the topology's choice on a node with NVLink peers), so that the score
     * measures the placement that follows. */
    uint8_t take[GS_NODE_GPUS_MAX];
    uint32_t taken = gs__pick_whole_gpus(n, req->num_gpu, take);
    for (uint32_t k = 0; k < taken; k++)
        gpu_take(&after[take[k]], after[take[k]].gpu_milli,
                 gs__milli_mem_mib(&after[take[k]], after[take[k]].gpu_milli));
    return gs__fgd_score_of(f_before, frag_after(s, n, cpu_after, after));
}

/* MiB a memory request takes on a fractions GPU with known memory; 0 when it cannot go there
 * (share.c's rule). */
static int64_t mem_ask(const struct gs_gpu *g, const struct gs_pod_req *req)
{
    if (g->sharing != GS_GPU_SHARE_MILLI || g->mem_mib <= 0)
        return 0;
    return req->gpu_mem_pct ? g->mem_mib * req->gpu_mem_pct / 100 : req->gpu_mem_mib;
}

/* One unit of a memory or MIG request on GPU g of after-state a: applies it and says what was
 * taken (*mem_mib, *inst), or returns false and leaves a as it was. `used` marks the GPUs a
 * memory request already took (it takes distinct GPUs; MIG instances may share a card). */
static bool unit_take(struct gs_gpu *a, uint32_t g, const struct gs_pod_req *req, uint32_t used,
                      int64_t *mem_mib, struct gs_placement_mig *inst)
{
    struct gs_gpu *gpu = &a[g];
    if (!gpu->healthy)
        return false;
    if (gs_req_kind(req) == GS_REQ_MEMORY) {
        int64_t ask = mem_ask(gpu, req);
        if ((used >> g & 1) || ask <= 0 || ask > gpu->mem_mib - gpu->mem_mib_used ||
            gpu->gpu_milli_used + req->gpu_milli > gpu->gpu_milli)
            return false;
        gpu_take(gpu, req->gpu_milli, ask);
        *mem_mib = ask;
        return true;
    }
    if (gpu->sharing != GS_GPU_SHARE_MIG || !gpu->mig_model)
        return false;
    int p = gs_mig_profile_find(gpu->mig_model, req->mig_profile);
    for (uint32_t k = 0; p >= 0 && k < gpu->mig_count; k++)
        if (gpu->mig[k].profile == (uint8_t)p && !(gpu->mig_held >> k & 1)) {
            if (!gpu->mig_held)
                gpu->pods = (uint16_t)(gpu->pods + 1);
            gpu->mig_held = (uint8_t)(gpu->mig_held | (1u << k));
            gpu->mig_slices_used =
                (uint8_t)(gpu->mig_slices_used | gs_mig_compute_mask(gpu->mig_model, gpu->mig[k]));
            *inst = (struct gs_placement_mig){(uint8_t)g, (uint8_t)p, gpu->mig[k].start};
            return true;
        }
    return false;
}

/* Puts the placement's GPUs in ascending order (memory: with their MiB), MIG instances by GPU
 * then start, as gs_node_pick_gpus() gives them. At most 16 entries: insertion sort. */
static void order_placement(struct gs_placement *pl)
{
    for (uint32_t i = 1; i < pl->num_gpu; i++)
        for (uint32_t k = i; k > 0 && pl->gpu_index[k - 1] > pl->gpu_index[k]; k--) {
            uint8_t gi = pl->gpu_index[k];
            int32_t mm = pl->gpu_mem_mib[k];
            pl->gpu_index[k] = pl->gpu_index[k - 1];
            pl->gpu_mem_mib[k] = pl->gpu_mem_mib[k - 1];
            pl->gpu_index[k - 1] = gi;
            pl->gpu_mem_mib[k - 1] = mm;
        }
    for (uint32_t i = 1; i < pl->mig_count; i++)
        for (uint32_t k = i; k > 0; k--) {
            struct gs_placement_mig *x = &pl->mig[k - 1], *y = &pl->mig[k];
            if (x->gpu < y->gpu || (x->gpu == y->gpu && x->start <= y->start))
                break;
            struct gs_placement_mig t = *x;
            *x = *y;
            *y = t;
        }
}

/* The FGD placement of a memory or MIG request on a node and its score (see the top). */
static int kind_plan(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                     const struct gs_pod_req *req, struct gs_placement *pl, int32_t *score)
{
    bool mem = gs_req_kind(req) == GS_REQ_MEMORY;
    uint32_t need = mem ? req->num_gpu : req->mig_count;
    double f_before = gs_sched_node_frag(s, node, NULL), f_last = f_before;
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    struct gs_node copy = *n; /* see gs__fgd_milli_full() */
    struct gs_gpu *a = copy.gpus;
    memset(pl, 0, sizeof(*pl));
    pl->node = node;
    uint32_t used = 0;
    for (uint32_t step = 0; step < need; step++) {
        double best_f = INFINITY;
        int best = -1;
        int64_t mib = 0;
        struct gs_placement_mig inst = {0};
        for (uint32_t g = 0; g < n->gpu_count; g++) {
            struct gs_gpu keep = a[g];
            if (!unit_take(a, g, req, used, &mib, &inst))
                continue;
            double f = frag_after(s, n, cpu_after, a);
            a[g] = keep;
            if (f < best_f) {
                best_f = f;
                best = (int)g;
            }
        }
        if (best < 0 || !unit_take(a, (uint32_t)best, req, used, &mib, &inst)) {
            memset(pl, 0, sizeof(*pl));
            return GS_EUNSCHEDULABLE;
        }
        if (mem) {
            used |= UINT32_C(1) << best;
            pl->gpu_index[pl->num_gpu] = (uint8_t)best;
            pl->gpu_mem_mib[pl->num_gpu++] = (int32_t)mib;
        } else {
            pl->mig[pl->mig_count++] = inst;
        }
        f_last = best_f;
    }
    pl->gpu_milli = mem ? req->gpu_milli : 0;
    order_placement(pl);
    *score = gs__fgd_score_of(f_before, f_last);
    return GS_OK;
}

static bool fgd_kind(const struct gs_pod_req *req)
{
    enum gs_req_kind k = gs_req_kind(req);
    return k == GS_REQ_MEMORY || k == GS_REQ_MIG;
}

int gs__fgd_score_kind(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf)
{
    if (!fgd_kind(req))
        return GS__KIND_SHARED; /* time-sliced slots: best fit (docs/fgd-policies.md §3.7) */
    uint32_t cls;
    int err = gs__fgd_class(s, req, &cls);
    if (err)
        return err;
    for (uint32_t k = 0; k < nf; k++) {
        uint32_t node = s->feasible[k];
        const struct gs_node *n = gs_cluster_node(s->c, node);
        /* The score is a pure function of the node's state and the class: kept per (node,
         * class) while the node's generation stands, as for milli requests. */
        struct score_entry *ce = &s->cache[(size_t)node * s->cache_classes + cls];
        if (ce->gen != n->gen) {
            struct gs_placement pl;
            int32_t sc = 0;
            if (kind_plan(s, n, node, req, &pl, &sc) != GS_OK)
                sc = 0; /* not reached: the filter found the GPUs the plan takes */
            ce->gen = n->gen;
            ce->score = sc;
        }
        s->scores[k] = ce->score;
    }
    return GS_OK;
}

int gs__fgd_pick_kind(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                      const struct gs_pod_req *req, struct gs_placement *pl)
{
    if (!fgd_kind(req))
        return GS__KIND_SHARED;
    int32_t sc;
    return kind_plan(s, n, node, req, pl, &sc);
}
