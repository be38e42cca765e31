/*
 * The dot-product policy (Tetris-style alignment of request and free resources; FGD paper
 * baseline "DotProd").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- dotprod ------------------------------------------------------------------------------ */

static int score_dotprod(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    double p_cpu = (double)cpu / MAX_SPEC_CPU_MILLI;
    double p_gpu = (double)((int64_t)req->num_gpu * req->gpu_milli) / MAX_SPEC_GPU_MILLI;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node_fit *n = &fit[s->feasible[k]];
        if (n->cpu_milli_free < cpu) {
            s->scores[k] = 0;
            continue;
        }
        double n_cpu = (double)n->cpu_milli_free / MAX_SPEC_CPU_MILLI;
        double n_gpu = (double)n->gpu_milli_free_total / MAX_SPEC_GPU_MILLI;
        double dot = n_cpu * p_cpu + n_gpu * p_gpu;
        s->scores[k] = (int32_t)(100.0 * (1.0 - dot / 2.0));
    }
    return GS_OK;
}

const struct policy_ops gs__policy_dotprod = {
    "dotprod", "02-DotProd", score_dotprod, gs__pick_share_best, gs__pick_whole_lowest, NULL, NULL};
