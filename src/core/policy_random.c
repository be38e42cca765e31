/*
 * The random policy: one feasible node drawn uniformly; a shared pod on a random fitting GPU
 * (FGD paper, USENIX ATC '23, baseline "Random").
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* Shared pod, random: reservoir sampling over fitting GPUs in index order, one draw each. */
static uint32_t pick_share_random(struct gs_sched *s, const struct gs_node *n,
                                  const struct gs_pod_req *req, struct gs_rng *rng)
{
    (void)s;
    uint32_t pick = 0, seen = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        if (n->gpus[g].gpu_milli_free < req->gpu_milli || n->gpus[g].sharing != GS_GPU_SHARE_MILLI)
            continue;
        seen++;
        if (gs_rng_below(rng, seen) == 0)
            pick = g;
    }
    return pick;
}

/* ---- random ------------------------------------------------------------------------------- */

/* The draw of one of nf feasible nodes, for score_random() and the placement index. */
static uint32_t draw_random(struct gs_rng *rng, uint32_t nf)
{
    return gs_rng_below(rng, nf);
}

static int score_random(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                        struct gs_rng *rng)
{
    (void)req;
    uint32_t chosen = draw_random(rng, nf);
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = k == chosen ? 100 : 0;
    return GS_OK;
}

const struct policy_ops gs__policy_random = {
    "random", "01-Random", score_random, pick_share_random, gs__pick_whole, NULL,
    NULL,     NULL,        NULL,         draw_random};
