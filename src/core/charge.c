/*
 * Charging by capacity (include/gpusched/charge.h): the share of a GPU a grant takes and the
 * GPU-hours of holding it. Pure arithmetic over plain values.
 */
#include "gpusched/charge.h"

#include "gpusched/err.h"

int gs_charge_share(const struct gs_charge_grant *g, double *share)
{
    *share = 0;
    switch (g->sharing) {
    case GS_GPU_SHARE_MILLI: {
        if (g->gpu_milli < 1 || g->gpu_milli > GS_GPU_MILLI || g->mem_mib < 0 ||
            g->gpu_mem_mib < 0 || (g->gpu_mem_mib > 0 && g->mem_mib > g->gpu_mem_mib))
            return GS_EINVAL;
        double s = (double)g->gpu_milli / GS_GPU_MILLI;
        /* Memory counts only when both sides are known: an unknown GPU memory must not turn a
         * memory request into a whole GPU, nor an unknown request into nothing. */
        if (g->mem_mib > 0 && g->gpu_mem_mib > 0) {
            double m = (double)g->mem_mib / (double)g->gpu_mem_mib;
            if (m > s)
                s = m;
        }
        *share = s;
        return GS_OK;
    }
    case GS_GPU_SHARE_MIG:
        if (g->mig_slices < 1 || g->gpu_mig_slices < g->mig_slices)
            return GS_EINVAL;
        *share = (double)g->mig_slices / (double)g->gpu_mig_slices;
        return GS_OK;
    case GS_GPU_SHARE_TIMESLICE:
        if (g->replicas < 1)
            return GS_EINVAL;
        *share = 1.0 / (double)g->replicas;
        return GS_OK;
    default:
        return GS_EINVAL;
    }
}

int64_t gs_charge_overlap_ms(int64_t start_ms, int64_t end_ms, int64_t from_ms, int64_t to_ms)
{
    int64_t a = start_ms > from_ms ? start_ms : from_ms;
    int64_t b = end_ms < to_ms ? end_ms : to_ms;
    return b > a ? b - a : 0;
}

int gs_charge_gpu_hours(const struct gs_charge_grant *g, uint32_t num_gpu, int64_t held_ms,
                        double *gpu_hours)
{
    *gpu_hours = 0;
    double s;
    if (num_gpu > GS_NODE_GPUS_MAX || held_ms < 0)
        return GS_EINVAL;
    int err = gs_charge_share(g, &s);
    if (err)
        return err;
    *gpu_hours = (double)num_gpu * s * (double)held_ms / 3600000.0;
    return GS_OK;
}
