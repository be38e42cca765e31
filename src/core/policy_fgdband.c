/*
 * FGD-band: FGD (policy_fgd.c) with a one-point tie band for pods of whole GPUs, a policy of
 * ours (issue 12, "a policy of ours that beats FGD").
 *
 * FGD's score is 100 x sigmoid(dF / 1000) truncated to an integer, and equal scores go to the
 * node of smallest random rank. Measured on the 13 openb traces, that random tie-break is worth
 * more than any deterministic refinement we tried: ranking by the exact dF, by free GPU, by
 * free CPU or by CPU/GPU balance all left more GPUs unallocated than FGD. The truncation makes
 * the band of nodes treated as equal depend on where dF falls in the sigmoid's steps, so two
 * nodes whose dF differ by a few milli-GPU can be one point apart and never tie. FGD-band
 * treats, for a pod of whole GPUs, every node within one point of the best score as tied with
 * it, so the random rank chooses among all near-best nodes. Shared (fractional) pods keep
 * FGD's strict order and its GPU pick: widening their band helped no trace.
 *
 * It is an online policy: it uses only the target workload FGD uses and the cluster state.
 * The scores are FGD's (and its three caches), then the band is applied over this decision's
 * feasible nodes; the engine then takes the highest score, smallest rank first, as always.
 */
#include "sched_int.h"

#include "gpusched/err.h"

/* Scores within FGDBAND_POINTS of the best count as the best (pods of whole GPUs only). */
#define FGDBAND_POINTS 1

static int score_fgdband(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    int err = gs__policy_fgd.score(s, req, nf, rng);
    if (err != GS_OK || is_share(req) || nf == 0)
        return err;
    int32_t best = s->scores[0];
    for (uint32_t k = 1; k < nf; k++)
        best = s->scores[k] > best ? s->scores[k] : best;
    for (uint32_t k = 0; k < nf; k++)
        if (s->scores[k] >= best - FGDBAND_POINTS)
            s->scores[k] = best;
    return GS_OK;
}

static uint32_t pick_share_fgdband(struct gs_sched *s, const struct gs_node *n,
                                   const struct gs_pod_req *req, struct gs_rng *rng)
{
    return gs__policy_fgd.pick_share(s, n, req, rng);
}

/* Memory and MIG requests: FGD's gradient and pick, without the band (it was measured on whole
 * milli GPUs only). */
const struct policy_ops gs__policy_fgdband = {
    "fgdband",      "07-FGD-band",      score_fgdband,    pick_share_fgdband,
    gs__pick_whole, gs__fgd_score_kind, gs__fgd_pick_kind};
