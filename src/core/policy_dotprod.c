/*
 * The dot-product policy (Tetris-style alignment of request and free resources; FGD paper
 * baseline "DotProd").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- dotprod ------------------------------------------------------------------------------ */

/* The score of one node (its packed view) for req. */
static int32_t dotprod_node(const struct gs_node_fit *n, const struct gs_pod_req *req)
{
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    if (n->cpu_milli_free < cpu)
        return 0;
    double p_cpu = (double)cpu / MAX_SPEC_CPU_MILLI;
    double p_gpu = (double)((int64_t)req->num_gpu * req->gpu_milli) / MAX_SPEC_GPU_MILLI;
    double n_cpu = (double)n->cpu_milli_free / MAX_SPEC_CPU_MILLI;
    double n_gpu = (double)n->gpu_milli_free_total / MAX_SPEC_GPU_MILLI;
    double dot = n_cpu * p_cpu + n_gpu * p_gpu;
    return (int32_t)(100.0 * (1.0 - dot / 2.0));
}

static int score_dotprod(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = dotprod_node(&fit[s->feasible[k]], req);
    return GS_OK;
}

/* One node's score for the placement index (sched_index.c). */
static int node_score_dotprod(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req,
                              uint32_t cls, int32_t *score)
{
    (void)cls;
    *score = dotprod_node(&gs_cluster_fit_array(s->c)[node], req);
    return GS_OK;
}

const struct policy_ops gs__policy_dotprod = {
    "dotprod",      "02-DotProd", score_dotprod, gs__pick_share_best,
    gs__pick_whole, NULL,         NULL,          node_score_dotprod};
