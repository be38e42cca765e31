/*
 * Charging by capacity (include/gpusched/charge.h): the share of a GPU a grant takes, the
 * GPU-hours of holding it, and the charge of a placement or a pending request on a cluster.
 */
#include "gpusched/charge.h"

#include <math.h>

#include "cluster_int.h"
#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/mig.h"

int gs_charge_share(const struct gs_charge_grant *g, double *share)
{
    *share = 0;
    switch (g->sharing) {
    case GS_GPU_SHARE_MILLI: {
        if (g->gpu_milli < 0 || g->gpu_milli > GS_GPU_MILLI || g->mem_mib < 0 ||
            g->gpu_mem_mib < 0 || (g->gpu_mem_mib > 0 && g->mem_mib > g->gpu_mem_mib))
            return GS_EINVAL;
        if (g->gpu_milli == 0 && (g->mem_mib == 0 || g->gpu_mem_mib == 0))
            return GS_EINVAL; /* nothing granted that could be charged */
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

int64_t gs_charge_milli(double gpus)
{
    /* The small epsilon keeps a share such as 0.6 (0.59999...) at 600, not 599. */
    return gpus > 0 ? (int64_t)floor(gpus * GS_GPU_MILLI + 1e-9) : 0;
}

/* The share of one GPU a request of kind MEMORY or TIMESLICE would take on g; -1 if none. */
static double share_on(const struct gs_gpu *g, const struct gs_pod_req *req)
{
    double s = -1;
    if (gs_req_kind(req) == GS_REQ_TIMESLICE) {
        struct gs_charge_grant cg = {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = g->replicas};
        if (g->sharing != GS_GPU_SHARE_TIMESLICE || gs_charge_share(&cg, &s) != GS_OK)
            return -1;
        return s;
    }
    if (g->sharing != GS_GPU_SHARE_MILLI || g->mem_mib <= 0)
        return -1;
    int64_t ask = req->gpu_mem_pct ? g->mem_mib * req->gpu_mem_pct / 100 : req->gpu_mem_mib;
    struct gs_charge_grant cg = {.sharing = GS_GPU_SHARE_MILLI,
                                 .gpu_milli = req->gpu_milli,
                                 .mem_mib = ask,
                                 .gpu_mem_mib = g->mem_mib};
    return ask > 0 && gs_charge_share(&cg, &s) == GS_OK ? s : -1;
}

/* The pending charge over the nodes that pass filter class cls, or over every node when
 * !filtered. */
static int charge_request(const struct gs_cluster *c, const struct gs_pod_req *req, bool filtered,
                          uint32_t cls, double *gpus)
{
    *gpus = 0;
    if (gs_pod_req_validate(req, NULL, 0) != GS_OK)
        return GS_EINVAL;
    switch (gs_req_kind(req)) {
    case GS_REQ_MILLI:
        *gpus = (double)req->num_gpu * req->gpu_milli / GS_GPU_MILLI;
        return GS_OK;
    case GS_REQ_MIG:
        for (uint32_t i = 0; i < gs_mig_model_count(); i++) {
            const struct gs_mig_model *m = gs_mig_model_at(i);
            int p = gs_mig_profile_find(m, req->mig_profile);
            if (p < 0)
                continue;
            double s;
            struct gs_charge_grant cg = {.sharing = GS_GPU_SHARE_MIG,
                                         .mig_slices = m->profiles[p].compute_slices,
                                         .gpu_mig_slices = m->compute_slices};
            if (gs_charge_share(&cg, &s) != GS_OK)
                return GS_EINVAL;
            *gpus = req->mig_count * s;
            return GS_OK;
        }
        return GS_OK; /* a profile of no known model: it can land nowhere */
    case GS_REQ_MEMORY:
    case GS_REQ_TIMESLICE: {
        /* Issue 8: "a pending memory request by the smallest GPU memory among the GPUs it may
         * use". The largest share any usable GPU would charge (for memory, that of the GPU
         * with the least memory; for slots, that of the GPU with the fewest replicas) is never
         * below what it is charged where it lands, so a queue's limit that admits the pending
         * charge also admits the landed one. A memory pod takes num_gpu GPUs of one node: a
         * node with fewer GPUs that could take it cannot be used. */
        double worst = -1;
        for (uint32_t i = 0; i < gs_cluster_node_count(c); i++) {
            const struct gs_node *n = gs_cluster_node(c, i);
            if (!n->present || n->gpu_count == 0 ||
                (req->gpu_model_mask != GS_MODEL_ANY &&
                 (n->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << n->model_id)))) ||
                (filtered && !gs_filter_pass(c, cls, i)))
                continue;
            double node_worst = -1;
            uint32_t usable = 0;
            for (uint32_t g = 0; g < n->gpu_count; g++) {
                double s = n->gpus[g].healthy ? share_on(&n->gpus[g], req) : -1;
                if (s < 0)
                    continue;
                usable++;
                if (s > node_worst)
                    node_worst = s;
            }
            if (gs_req_kind(req) == GS_REQ_MEMORY && usable < req->num_gpu)
                continue;
            if (node_worst > worst)
                worst = node_worst;
        }
        uint32_t per = gs_req_kind(req) == GS_REQ_TIMESLICE ? req->timeslice_slots : req->num_gpu;
        *gpus = worst > 0 ? per * worst : 0;
        return GS_OK;
    }
    }
    return GS_EINVAL;
}

int gs_charge_request(const struct gs_cluster *c, const struct gs_pod_req *req, double *gpus)
{
    return charge_request(c, req, false, 0, gpus);
}

int gs_charge_request_class(const struct gs_cluster *c, const struct gs_pod_req *req, uint32_t cls,
                            double *gpus)
{
    return charge_request(c, req, true, cls, gpus);
}

int gs_charge_placement(const struct gs_cluster *c, const struct gs_pod_req *req,
                        const struct gs_placement *pl, double *gpus)
{
    *gpus = 0;
    const struct gs_node *n = gs_cluster_node(c, pl->node);
    if (!n || !n->present || gs_pod_req_validate(req, NULL, 0) != GS_OK)
        return GS_EINVAL;
    double sum = 0, s;
    enum gs_req_kind kind = gs_req_kind(req);
    if (kind == GS_REQ_MIG) {
        for (uint32_t i = 0; i < pl->mig_count && i < GS_PLACEMENT_MIG_MAX; i++) {
            const struct gs_placement_mig *m = &pl->mig[i];
            const struct gs_gpu *g = m->gpu < n->gpu_count ? &n->gpus[m->gpu] : NULL;
            if (!g || g->sharing != GS_GPU_SHARE_MIG || !g->mig_model ||
                m->profile >= g->mig_model->n_profiles)
                return GS_EINVAL;
            struct gs_charge_grant cg = {.sharing = GS_GPU_SHARE_MIG,
                                         .mig_slices =
                                             g->mig_model->profiles[m->profile].compute_slices,
                                         .gpu_mig_slices = g->mig_model->compute_slices};
            if (gs_charge_share(&cg, &s) != GS_OK)
                return GS_EINVAL;
            sum += s;
        }
        *gpus = sum;
        return GS_OK;
    }
    for (uint32_t k = 0; k < pl->num_gpu && k < GS_NODE_GPUS_MAX; k++) {
        if (pl->gpu_index[k] >= n->gpu_count)
            return GS_EINVAL;
        const struct gs_gpu *g = &n->gpus[pl->gpu_index[k]];
        struct gs_charge_grant cg = {.sharing = GS_GPU_SHARE_MILLI,
                                     .gpu_milli = pl->gpu_milli,
                                     .gpu_mem_mib = g->mem_mib > 0 ? g->mem_mib : 0};
        if (kind == GS_REQ_TIMESLICE) {
            cg = (struct gs_charge_grant){.sharing = GS_GPU_SHARE_TIMESLICE,
                                          .replicas = g->replicas};
            if (g->sharing != GS_GPU_SHARE_TIMESLICE)
                return GS_EINVAL;
        } else if (kind == GS_REQ_MEMORY) {
            cg.mem_mib = pl->gpu_mem_mib[k];
        } else {
            cg.mem_mib = gs__milli_mem_mib(g, pl->gpu_milli);
        }
        if (gs_charge_share(&cg, &s) != GS_OK)
            return GS_EINVAL;
        sum += s;
    }
    *gpus = sum;
    return GS_OK;
}
