/*
 * GPU packing: fill used GPUs, then used nodes, before idle ones (FGD paper baseline
 * "GpuPacking").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- packing ------------------------------------------------------------------------------ */

static int32_t packing_node(const struct gs_node *n, const struct gs_pod_req *req)
{
    int32_t f = (int32_t)n->gpus_full_free;
    if ((uint32_t)f == n->gpu_count)
        return 33 - f > f ? 33 - f : f;
    /* Walk GPUs by increasing free milli, taking those that fit until num_gpu are taken. */
    uint32_t taken = 0, fresh = 0;
    int32_t pct_sum = 0;
    for (uint32_t r = n->gpu_count; r-- > 0 && taken < req->num_gpu;) {
        int32_t free_milli = n->gpu_free_desc[r];
        if (free_milli < req->gpu_milli)
            continue;
        taken++;
        if (free_milli == GS_GPU_MILLI)
            fresh++;
        pct_sum += free_milli * 100 / GS_GPU_MILLI;
    }
    if (fresh > 0)
        return 50 - (int32_t)fresh > 33 ? 50 - (int32_t)fresh : 33;
    return 100 - pct_sum / 10 > 50 ? 100 - pct_sum / 10 : 50;
}

static int score_packing(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node *n = gs_cluster_node(s->c, s->feasible[k]);
        s->scores[k] = req->num_gpu == 0 || req->gpu_milli <= 0 ? 0 : packing_node(n, req);
    }
    return GS_OK;
}

/* One node's score for the placement index (sched_index.c): score_packing()'s for it. */
static int node_score_packing(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req,
                              uint32_t cls, int32_t *score)
{
    (void)cls;
    *score = req->num_gpu == 0 || req->gpu_milli <= 0
                 ? 0
                 : packing_node(gs_cluster_node(s->c, node), req);
    return GS_OK;
}

const struct policy_ops gs__policy_packing = {
    "packing", "04-GpuPacking",   score_packing, gs__pick_share_best, gs__pick_whole, NULL,
    NULL,      node_score_packing};
