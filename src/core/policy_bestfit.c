/*
 * Best fit: the node left with the least free CPU and GPU (FGD paper baseline "BestFit").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- bestfit ------------------------------------------------------------------------------ */

static int score_bestfit(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    int64_t gpu = (int64_t)req->num_gpu * req->gpu_milli;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node_fit *n = &fit[s->feasible[k]];
        double r = 0.5 * (double)(n->cpu_milli_free - cpu) / MAX_SPEC_CPU_MILLI +
                   0.5 * (double)(n->gpu_milli_free_total - gpu) / MAX_SPEC_GPU_MILLI;
        int32_t raw = (int32_t)(100.0 * (1.0 - r));
        s->scores[k] = raw;
        lo = raw < lo ? raw : lo;
        hi = raw > hi ? raw : hi;
    }
    /* Min-max rescale over this cycle's feasible nodes, integer (the reference NormalizeScore). */
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = hi == lo ? 0 : (s->scores[k] - lo) * 100 / (hi - lo);
    return GS_OK;
}

const struct policy_ops gs__policy_bestfit = {
    "bestfit", "05-BestFit", score_bestfit, gs__pick_share_best, gs__pick_whole_lowest, NULL, NULL};
