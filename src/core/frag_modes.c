/*
 * FGD's fragmentation measure for every sharing mode (frag.h, gs_frag_node_gpus(); the
 * formulas are in docs/fgd-policies.md §3.7).
 *
 * The paper's measure (gs_frag_node(), frag.c) reads the free milli of each GPU. This one reads
 * each GPU's record, so that a memory fraction is judged by the device memory it needs and the
 * compute share beside it, a MIG request by the free instances of its profile, and a
 * time-sliced request by the free slots. For a workload of milli types on fractions GPUs the
 * per-GPU amounts and the served test are the free milli and "free >= milli", the same
 * integers gs_frag_node() sums, in the same order, so the buckets are bit-for-bit equal
 * (tests/unit/test_frag_modes.c checks it on random nodes).
 *
 * Like gs_frag_node() it runs once per candidate after-state: one pass over the GPUs for the
 * idle amounts, then per type one pass over at most 16 GPUs, no allocation.
 */
#include <string.h>

#include "cluster_int.h"
#include "gpusched/frag.h"

bool gs_workload_has_modes(const struct gs_workload *w)
{
    for (uint32_t t = 0; w && t < w->n_types; t++)
        if (w->types[t].kind != GS_REQ_MILLI)
            return true;
    return false;
}

/* Milli-GPU share of one MIG instance: floor(1000 x its compute slices / the GPU's). */
static int32_t mig_share(const struct gs_gpu *g, uint32_t k)
{
    const struct gs_mig_model *mm = g->mig_model;
    if (!mm || mm->compute_slices == 0 || g->mig[k].profile >= mm->n_profiles)
        return 0;
    return GS_GPU_MILLI * mm->profiles[g->mig[k].profile].compute_slices / mm->compute_slices;
}

/* The idle amount of a GPU in milli-GPU, as every type but MEMORY measures it. */
static int32_t gpu_idle(const struct gs_gpu *g)
{
    if (!g->healthy)
        return 0;
    switch (g->sharing) {
    case GS_GPU_SHARE_TIMESLICE:
        return g->replicas > g->replicas_used
                   ? GS_GPU_MILLI * (g->replicas - g->replicas_used) / g->replicas
                   : 0;
    case GS_GPU_SHARE_MIG: {
        int32_t idle = 0;
        for (uint32_t k = 0; k < g->mig_count; k++)
            if (!(g->mig_held >> k & 1))
                idle += mig_share(g, k);
        return idle;
    }
    default:
        return g->gpu_milli_free;
    }
}

/* The idle amount as a MEMORY type measures it: a fractions GPU with known memory by its free
 * memory, the largest m with floor(mem_mib x m / 1000) <= MiB free (capped at the GPU's milli),
 * any other GPU as gpu_idle(). */
static int32_t gpu_idle_mem(const struct gs_gpu *g)
{
    if (!g->healthy || g->sharing != GS_GPU_SHARE_MILLI || g->mem_mib <= 0)
        return gpu_idle(g);
    int64_t mem_free = g->mem_mib - g->mem_mib_used;
    mem_free = mem_free > 0 ? mem_free : 0;
    int64_t by_mem = ((mem_free + 1) * GS_GPU_MILLI - 1) / g->mem_mib;
    return (int32_t)(by_mem < g->gpu_milli ? by_mem : g->gpu_milli);
}

/* Profile index of a MIG type on a GPU of model mm, or -1. */
static int mig_profile_of(const struct gs_task_type *m, const struct gs_mig_model *mm)
{
    for (uint32_t i = 0; i < GS_FRAG_MIG_MODELS; i++)
        if (gs_mig_model_at(i) == mm && m->mig_profile_at[i] != 0)
            return m->mig_profile_at[i] < 0 ? -1 : m->mig_profile_at[i] - 1;
    return gs_mig_profile_find(mm, m->mig_profile);
}

/* MiB a MEMORY type asks of a fractions GPU with known memory (0: it cannot go there). */
static int64_t mem_ask(const struct gs_gpu *g, const struct gs_task_type *m)
{
    if (g->sharing != GS_GPU_SHARE_MILLI || g->mem_mib <= 0)
        return 0;
    return m->gpu_mem_pct ? g->mem_mib * m->gpu_mem_pct / 100 : m->gpu_mem_mib;
}

/* What type m can use of the node's GPUs: the GPUs (MIG: instances) it serves into *serve and
 * their idle amount (in m's measure) as the return value. */
static int32_t usable_of(const struct gs_task_type *m, const struct gs_gpu *gpus, uint32_t n_gpu,
                         const int32_t *idle, const int32_t *idle_mem, uint32_t *serve)
{
    int32_t usable = 0;
    uint32_t n = 0;
    bool share = m->num_gpu == 1 && m->gpu_milli < GS_GPU_MILLI;
    for (uint32_t g = 0; g < n_gpu; g++) {
        const struct gs_gpu *gpu = &gpus[g];
        switch (m->kind) {
        case GS_REQ_MILLI:
            if (gpu->gpu_milli_free >= m->gpu_milli &&
                (!share || gpu->sharing == GS_GPU_SHARE_MILLI)) {
                n++;
                usable += idle[g];
            }
            break;
        case GS_REQ_MEMORY: {
            int64_t ask = mem_ask(gpu, m);
            if (gpu->healthy && ask > 0 && ask <= gpu->mem_mib - gpu->mem_mib_used &&
                gpu->gpu_milli_used + m->gpu_milli <= gpu->gpu_milli) {
                n++;
                usable += idle_mem[g];
            }
            break;
        }
        case GS_REQ_TIMESLICE:
            if (gpu->healthy && gpu->sharing == GS_GPU_SHARE_TIMESLICE &&
                gpu->replicas_used < gpu->replicas) {
                n++;
                usable += idle[g];
            }
            break;
        case GS_REQ_MIG: {
            if (!gpu->healthy || gpu->sharing != GS_GPU_SHARE_MIG || !gpu->mig_model)
                break;
            int p = mig_profile_of(m, gpu->mig_model);
            for (uint32_t k = 0; p >= 0 && k < gpu->mig_count; k++)
                if (gpu->mig[k].profile == (uint8_t)p && !(gpu->mig_held >> k & 1)) {
                    n++;
                    usable += mig_share(gpu, k);
                }
            break;
        }
        default:
            break;
        }
    }
    *serve = n;
    return usable;
}

static uint32_t need_of(const struct gs_task_type *m)
{
    switch (m->kind) {
    case GS_REQ_TIMESLICE:
        return m->timeslice_slots;
    case GS_REQ_MIG:
        return m->mig_count;
    default:
        return m->num_gpu;
    }
}

double gs_frag_node_gpus(const struct gs_workload *w, uint32_t model_id, int64_t cpu_milli_free,
                         const struct gs_gpu *gpus, uint32_t n_gpu, struct gs_frag *out)
{
    double q1 = 0, q2 = 0, q3 = 0, q4 = 0, xl = 0, xr = 0, na = 0;
    int64_t wt = 0; /* count-weighted fragment milli: the exact integer form of the total */
    int32_t idle[GS_NODE_GPUS_MAX], idle_mem[GS_NODE_GPUS_MAX];
    int32_t idle_total = 0, idle_mem_total = 0;
    n_gpu = n_gpu < GS_NODE_GPUS_MAX ? n_gpu : GS_NODE_GPUS_MAX;
    for (uint32_t g = 0; g < n_gpu; g++) {
        idle[g] = gpu_idle(&gpus[g]);
        idle_mem[g] = gpu_idle_mem(&gpus[g]);
        idle_total += idle[g];
        idle_mem_total += idle_mem[g];
    }
    uint64_t model_bit = model_id < 64 ? UINT64_C(1) << model_id : 0;
    for (uint32_t t = 0; t < w->n_types; t++) {
        const struct gs_task_type *m = &w->types[t];
        double p = m->p;
        int32_t all = m->kind == GS_REQ_MEMORY ? idle_mem_total : idle_total;
        bool cpu_fits = cpu_milli_free >= m->cpu_milli;
        if (m->kind == GS_REQ_MILLI && m->gpu_milli == 0) {
            /* A CPU-only task can use no GPU: all idle GPU is fragment to it. */
            if (cpu_fits)
                xl += p * all;
            else
                xr += p * all;
            wt += (int64_t)m->count * all;
            continue;
        }
        if (m->gpu_model_mask != GS_MODEL_ANY && !(m->gpu_model_mask & model_bit)) {
            na += p * all;
            wt += (int64_t)m->count * all;
            continue;
        }
        uint32_t serve;
        int32_t usable = usable_of(m, gpus, n_gpu, idle, idle_mem, &serve);
        int32_t small = all - usable;
        bool gpu_fits = serve >= need_of(m);
        if (cpu_fits && gpu_fits) {
            q2 += p * small;
            q3 += p * (all - small);
            wt += (int64_t)m->count * small;
            continue;
        }
        if (!cpu_fits && !gpu_fits)
            q1 += p * all;
        else if (!gpu_fits)
            q2 += p * all;
        else
            q4 += p * all;
        wt += (int64_t)m->count * all;
    }
    double total = q1 + q2 + q4 + xl + xr + na;
    if (out)
        *out = (struct gs_frag){q1, q2, q3, q4, xl, xr, na, total, wt};
    return total;
}
