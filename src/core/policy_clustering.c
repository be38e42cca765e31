/*
 * GPU clustering: pods of one kind together (FGD paper baseline "GpuClustering").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- clustering --------------------------------------------------------------------------- */

/* The score of node n for a pod of tag `tag` (gs_req_tag()). */
static int32_t clustering_node(const struct gs_node *n, int tag)
{
    if (tag < 0)
        return 0;
    int32_t b = 25 * (MAX_SPEC_GPU_MILLI - n->gpu_milli_free_total) / MAX_SPEC_GPU_MILLI;
    uint32_t same = n->tag_count[tag];
    if (n->gpu_pods == 0)
        return 25 + b;
    if (same == n->gpu_pods)
        return 75 + b;
    if (same > 0)
        return 50 + b;
    return b;
}

static int score_clustering(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                            struct gs_rng *rng)
{
    (void)rng;
    int tag = gs_req_tag(req);
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = clustering_node(gs_cluster_node(s->c, s->feasible[k]), tag);
    return GS_OK;
}

/* One node's score for the placement index (sched_index.c): score_clustering()'s for it. */
static int node_score_clustering(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req,
                                 uint32_t cls, int32_t *score)
{
    (void)cls;
    *score = clustering_node(gs_cluster_node(s->c, node), gs_req_tag(req));
    return GS_OK;
}

const struct policy_ops gs__policy_clustering = {
    "clustering", "03-GpuClustering",   score_clustering, gs__pick_share_best, gs__pick_whole, NULL,
    NULL,         node_score_clustering};
