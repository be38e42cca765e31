/*
 * GPU clustering: pods of one kind together (FGD paper baseline "GpuClustering").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- clustering --------------------------------------------------------------------------- */

static int score_clustering(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                            struct gs_rng *rng)
{
    (void)rng;
    int tag = gs_req_tag(req);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node *n = gs_cluster_node(s->c, s->feasible[k]);
        if (tag < 0) {
            s->scores[k] = 0;
            continue;
        }
        int32_t b = 25 * (MAX_SPEC_GPU_MILLI - n->gpu_milli_free_total) / MAX_SPEC_GPU_MILLI;
        uint32_t same = n->tag_count[tag];
        if (n->gpu_pods == 0)
            s->scores[k] = 25 + b;
        else if (same == n->gpu_pods)
            s->scores[k] = 75 + b;
        else if (same > 0)
            s->scores[k] = 50 + b;
        else
            s->scores[k] = b;
    }
    return GS_OK;
}

const struct policy_ops gs__policy_clustering = {"clustering",
                                                 "03-GpuClustering",
                                                 score_clustering,
                                                 gs__pick_share_best,
                                                 gs__pick_whole_lowest,
                                                 NULL,
                                                 NULL};
