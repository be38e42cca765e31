/*
 * Best fit: the node left with the least free CPU and GPU (FGD paper baseline "BestFit").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* ---- bestfit ------------------------------------------------------------------------------ */

/* The raw score of one node (its packed view), before the rescale. */
static int32_t bestfit_raw(const struct gs_node_fit *n, const struct gs_pod_req *req)
{
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    int64_t gpu = (int64_t)req->num_gpu * req->gpu_milli;
    double r = 0.5 * (double)(n->cpu_milli_free - cpu) / MAX_SPEC_CPU_MILLI +
               0.5 * (double)(n->gpu_milli_free_total - gpu) / MAX_SPEC_GPU_MILLI;
    return (int32_t)(100.0 * (1.0 - r));
}

static int score_bestfit(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++) {
        int32_t raw = bestfit_raw(&fit[s->feasible[k]], req);
        s->scores[k] = raw;
        lo = raw < lo ? raw : lo;
        hi = raw > hi ? raw : hi;
    }
    /* Min-max rescale over this cycle's feasible nodes, integer (the reference NormalizeScore). */
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = hi == lo ? 0 : (s->scores[k] - lo) * 100 / (hi - lo);
    return GS_OK;
}

/*
 * One node's score for the placement index (sched_index.c): the raw score. The rescale
 * (raw - lo) x 100 / (hi - lo) is 100 exactly for raw == hi and below for every raw < hi (the
 * integer quotient of a number below hi - lo times 100 by hi - lo), so the nodes of highest
 * rescaled score are those of highest raw score, and the engine's choice (smallest rank among
 * them) is the same on either; with hi == lo every node ties either way.
 */
static int node_score_bestfit(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req,
                              uint32_t cls, int32_t *score)
{
    (void)cls;
    *score = bestfit_raw(&gs_cluster_fit_array(s->c)[node], req);
    return GS_OK;
}

const struct policy_ops gs__policy_bestfit = {
    "bestfit",      "05-BestFit", score_bestfit, gs__pick_share_best,
    gs__pick_whole, NULL,         NULL,          node_score_bestfit};
