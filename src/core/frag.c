/*
 * Target workload construction and per-node fragmentation (FGD paper, Sections 3-4).
 *
 * The fragmentation of a node is evaluated many times per scheduling decision, once per
 * candidate after-state, so gs_frag_node() is a straight loop over the workload's types with
 * one pass over at most 16 GPUs each, and no allocation.
 */
#include "gpusched/frag.h"

#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "alloc_int.h"

int64_t gs_cpu_nonzero(int64_t cpu_milli)
{
    return cpu_milli == 0 ? 100 : cpu_milli;
}

struct keyed {
    int64_t cpu;
    int32_t gpu_milli;
    uint32_t num_gpu;
    uint64_t mask;
    const char *spec;
    uint32_t count;
    const struct gs_pod_req *req; /* the first pod of the group: its kind's members */
};

#define CMP(x, y)                                                                                  \
    do {                                                                                           \
        if ((x) != (y))                                                                            \
            return (x) < (y) ? -1 : 1;                                                             \
    } while (0)

static int cmp_key(const struct keyed *a, const struct keyed *b)
{
    CMP(a->cpu, b->cpu);
    CMP(a->gpu_milli, b->gpu_milli);
    CMP(a->num_gpu, b->num_gpu);
    int c = strcmp(a->spec, b->spec);
    if (c != 0)
        return c;
    /* The kinds beyond milli: all 0 for milli pods, so milli keys compare as they always did. */
    const struct gs_pod_req *x = a->req, *y = b->req;
    CMP((int)gs_req_kind(x), (int)gs_req_kind(y));
    CMP(x->gpu_mem_mib, y->gpu_mem_mib);
    CMP(x->gpu_mem_pct, y->gpu_mem_pct);
    CMP(x->timeslice_slots, y->timeslice_slots);
    CMP(x->mig_count, y->mig_count);
    return strncmp(x->mig_profile, y->mig_profile, sizeof(x->mig_profile));
}

static int cmp_group(const void *pa, const void *pb)
{
    return cmp_key(pa, pb);
}

/* Popularity order: count descending, then key descending. */
static int cmp_popular(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return -cmp_key(a, b);
}

int gs_workload_build(const struct gs_pod_req *reqs, const char *const *specs, uint32_t n,
                      int threshold_pct, struct gs_workload *w)
{
    memset(w, 0, sizeof(*w));
    if (n == 0 || threshold_pct < 1 || threshold_pct > 100)
        return GS_EINVAL;
    int err = GS_ENOMEM;
    struct keyed *k = gs__malloc((size_t)n * sizeof(*k));
    if (!k)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        const char *s = specs && specs[i] ? specs[i] : "";
        k[i] = (struct keyed){gs_cpu_nonzero(reqs[i].cpu_milli),
                              reqs[i].gpu_milli,
                              reqs[i].num_gpu,
                              reqs[i].gpu_model_mask,
                              s,
                              1,
                              &reqs[i]};
    }
    qsort(k, n, sizeof(*k), cmp_group);
    uint32_t groups = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (groups > 0 && cmp_key(&k[groups - 1], &k[i]) == 0)
            k[groups - 1].count++;
        else
            k[groups++] = k[i];
    }
    qsort(k, groups, sizeof(*k), cmp_popular);
    double target = (double)threshold_pct * n / 100.0;
    uint32_t kept = 0, covered = 0;
    while (kept < groups && (double)covered < target)
        covered += k[kept++].count;
    w->types = gs__calloc(kept ? kept : 1, sizeof(*w->types)); /* gs__calloc(0) may return NULL */
    if (!w->types)
        goto out;
    for (uint32_t t = 0; t < kept; t++) {
        struct gs_task_type *tt = &w->types[t];
        size_t len = strlen(k[t].spec) + 1;
        tt->gpu_spec = gs__malloc(len);
        if (!tt->gpu_spec) {
            w->n_types = t;
            gs_workload_fini(w);
            goto out;
        }
        memcpy(tt->gpu_spec, k[t].spec, len);
        tt->cpu_milli = k[t].cpu;
        tt->gpu_milli = k[t].gpu_milli;
        tt->num_gpu = k[t].num_gpu;
        tt->gpu_model_mask = k[t].mask;
        tt->count = k[t].count;
        const struct gs_pod_req *r = k[t].req;
        tt->kind = (uint8_t)gs_req_kind(r);
        tt->gpu_mem_mib = r->gpu_mem_mib;
        tt->gpu_mem_pct = r->gpu_mem_pct;
        tt->timeslice_slots = r->timeslice_slots;
        tt->mig_count = r->mig_count;
        if (tt->kind == GS_REQ_MIG) {
            memcpy(tt->mig_profile, r->mig_profile, sizeof(tt->mig_profile));
            tt->mig_profile[sizeof(tt->mig_profile) - 1] = '\0';
            for (uint32_t i = 0; i < GS_FRAG_MIG_MODELS; i++) {
                const struct gs_mig_model *mm = gs_mig_model_at(i);
                int pi = mm ? gs_mig_profile_find(mm, tt->mig_profile) : -1;
                tt->mig_profile_at[i] = (int8_t)(pi < 0 ? -1 : pi + 1);
            }
        }
        /* The reference divides the type's frequency by the covered frequency. */
        tt->p = ((double)k[t].count / n) / ((double)covered / n);
    }
    w->n_types = kept;
    w->n_pods = n;
    w->n_pods_covered = covered;
    err = GS_OK;
out:
    gs__free(k);
    return err;
}

void gs_workload_fini(struct gs_workload *w)
{
    if (!w)
        return;
    for (uint32_t t = 0; t < w->n_types; t++)
        gs__free(w->types[t].gpu_spec);
    gs__free(w->types);
    memset(w, 0, sizeof(*w));
}

double gs_frag_node(const struct gs_workload *w, uint32_t model_id, int64_t cpu_milli_free,
                    const int32_t *gpu_free, uint32_t n_gpu, struct gs_frag *out)
{
    double q1 = 0, q2 = 0, q3 = 0, q4 = 0, xl = 0, xr = 0, na = 0;
    int64_t wt = 0; /* count-weighted fragment milli: the exact integer form of the total */
    int32_t idle = 0;
    for (uint32_t g = 0; g < n_gpu; g++)
        idle += gpu_free[g];
    uint64_t model_bit = model_id < 64 ? UINT64_C(1) << model_id : 0;
    for (uint32_t t = 0; t < w->n_types; t++) {
        const struct gs_task_type *m = &w->types[t];
        double p = m->p;
        bool cpu_fits = cpu_milli_free >= m->cpu_milli;
        if (m->kind != GS_REQ_MILLI) {
            /* Free milli alone cannot tell what memory, slots or instances are left. */
            q2 += p * idle;
            wt += (int64_t)m->count * idle;
            continue;
        }
        if (m->gpu_milli == 0) {
            /* A CPU-only task can use no GPU: all idle GPU is fragment to it. */
            if (cpu_fits)
                xl += p * idle;
            else
                xr += p * idle;
            wt += (int64_t)m->count * idle;
            continue;
        }
        if (m->gpu_model_mask != GS_MODEL_ANY && !(m->gpu_model_mask & model_bit)) {
            na += p * idle;
            wt += (int64_t)m->count * idle;
            continue;
        }
        uint32_t usable = 0;
        int32_t small = 0;
        for (uint32_t g = 0; g < n_gpu; g++) {
            if (gpu_free[g] >= m->gpu_milli)
                usable++;
            else
                small += gpu_free[g];
        }
        bool gpu_fits = usable >= m->num_gpu;
        if (cpu_fits && gpu_fits) {
            q2 += p * small;
            q3 += p * (idle - small);
            wt += (int64_t)m->count * small;
            continue;
        }
        if (!cpu_fits && !gpu_fits)
            q1 += p * idle;
        else if (!gpu_fits)
            q2 += p * idle;
        else
            q4 += p * idle;
        wt += (int64_t)m->count * idle;
    }
    double total = q1 + q2 + q4 + xl + xr + na;
    if (out)
        *out = (struct gs_frag){q1, q2, q3, q4, xl, xr, na, total, wt};
    return total;
}
