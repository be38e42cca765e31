/*
 * GPU fragmentation with respect to a target workload, as defined by the FGD paper:
 * Q. Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
 * Fragmentation Gradient Descent", USENIX ATC 2023, Sections 3-4, and as its reference
 * simulator computes it (kubernetes-scheduler-simulator, pkg/utils/frag.go; restated in
 * docs/internals/fgd.md).
 *
 * The target workload is the set of most frequent task types (CPU, per-GPU milli, GPU count,
 * allowed models, and for the sharing modes beyond milli the device memory, the time-sliced
 * slots or the MIG profile and count) that together cover a given share of the pods, each with
 * its probability. A node's fragmentation F(n) is the expected amount of its idle GPU that a
 * task drawn from the target workload could not use, in milli-GPU (1000 = one GPU).
 *
 * Two forms. gs_frag_node() is the paper's: it reads only each GPU's free milli, which is all a
 * milli workload on fractions GPUs needs (the 13-trace comparison runs on it). gs_frag_node_gpus()
 * reads each GPU's whole record and extends the measure to memory fractions, MIG instances and
 * time-sliced slots (docs/fgd-policies.md §3.7); for a workload of milli types only on a node of
 * fractions GPUs it gives bit-for-bit the same buckets as gs_frag_node().
 */
#ifndef GPUSCHED_FRAG_H
#define GPUSCHED_FRAG_H

#include <stdint.h>

#include "gpusched/cluster.h"

/** Most MIG models a task type caches its profile index for (the table has 7). */
#define GS_FRAG_MIG_MODELS 8

/**
 * One task type of a target workload. The members after `p` are zero for a milli type, so a
 * type written as {cpu, milli, num_gpu, mask, spec, count, p} is the paper's milli type.
 */
struct gs_task_type {
    int64_t cpu_milli;       /**< CPU request (non-zero form: a 0 request counts as 100) */
    int32_t gpu_milli;       /**< milli-GPU per GPU, 0 for a CPU-only type */
    uint32_t num_gpu;        /**< GPUs */
    uint64_t gpu_model_mask; /**< allowed models (GS_MODEL_ANY for any) */
    char *gpu_spec;          /**< the spec text the type was keyed on ("" for any); owned */
    uint32_t count;          /**< pods of this type in the source list */
    double p;                /**< probability in the target workload; the p values sum to 1 */
    uint8_t kind;            /**< enum gs_req_kind of the type's requests (GS_REQ_MILLI = 0) */
    int64_t gpu_mem_mib;     /**< MEMORY: device memory per GPU, MiB (0 with gpu_mem_pct) */
    uint8_t gpu_mem_pct;     /**< MEMORY: device memory per GPU, percent of the GPU's */
    uint8_t timeslice_slots; /**< TIMESLICE: slots on distinct time-sliced GPUs */
    uint8_t mig_count;       /**< MIG: instances of mig_profile */
    char mig_profile[GS_MIG_NAME_MAX]; /**< MIG: profile name ("1g.5gb"), NUL-terminated */
    /** MIG: the profile's index in MIG model i of the table (gs_mig_model_at(i)) plus one, -1
     *  when that model has no such profile, 0 when not resolved (then looked up by name);
     *  gs_workload_build() fills it. */
    int8_t mig_profile_at[GS_FRAG_MIG_MODELS];
};

/** A target workload: task types in descending popularity. Caller storage, see _init/_fini. */
struct gs_workload {
    struct gs_task_type *types; /**< owned array of n_types */
    uint32_t n_types;           /**< types kept */
    uint32_t n_pods;            /**< pods in the source list */
    uint32_t n_pods_covered;    /**< pods of the kept types */
};

/** The fragmentation of one node by the paper's classes; each member is p-weighted milli-GPU. */
struct gs_frag {
    double q1;    /**< neither CPU nor GPU fits: all idle GPU */
    double q2;    /**< GPU short (all idle), or the task fits and these GPUs are too small */
    double q3;    /**< usable idle GPU: not fragmentation */
    double q4;    /**< CPU short: all idle GPU */
    double xl;    /**< CPU-only task that fits: all idle GPU */
    double xr;    /**< CPU-only task that does not fit: all idle GPU */
    double na;    /**< GPU model not allowed for the task: all idle GPU */
    double total; /**< q1 + q2 + q4 + xl + xr + na, summed in that order */
    /** The same total in integer fixed point: the sum over types of count x the milli-GPU the
     *  type counts as fragment, so total == total_count_milli / n_pods_covered up to the
     *  rounding of `total`. Sums of it over nodes are exact in any order (cluster totals kept
     *  incrementally round the same way as totals summed afresh). */
    int64_t total_count_milli;
};

/**
 * Builds the target workload from a pod list (GetTypicalPods in the reference simulator).
 * Pods are grouped by (non-zero CPU, gpu_milli, num_gpu, spec text, then for the other kinds
 * the kind, gpu_mem_mib, gpu_mem_pct, timeslice_slots, mig_count and mig_profile); types are
 * sorted by count descending, ties by the key descending (cpu, gpu_milli, num_gpu, spec
 * compared byte-wise, then the other kinds' members in that order; they are all 0 for milli
 * pods, so a milli pod list gives the paper's types and order); types are kept until their running
 * count reaches threshold_pct % of the pods (the type that crosses is kept); p = count / covered.
 * @param reqs           n pod requests; borrowed. gpu_model_mask is copied into the types.
 * @param specs          n spec strings (NULL entries or a NULL array mean ""); borrowed.
 * @param n              pods, >= 1.
 * @param threshold_pct  1..100; the paper uses 95.
 * @param w              caller storage; on GS_OK owns its types (free with gs_workload_fini()).
 * @return GS_OK; GS_EINVAL (n == 0 or bad threshold); GS_ENOMEM (w left empty).
 */
int gs_workload_build(const struct gs_pod_req *reqs, const char *const *specs, uint32_t n,
                      int threshold_pct, struct gs_workload *w);

/** Frees what a workload owns and zeroes it. NULL or an empty workload is a no-op. */
void gs_workload_fini(struct gs_workload *w);

/**
 * Computes the fragmentation of one node state (NodeGpuShareFragAmount in the reference).
 * Reads only the free milli of each GPU, so it judges milli types; a type of another kind
 * counts all idle as fragment here (q2), for want of the GPUs' memory, slots and layouts: use
 * gs_frag_node_gpus() for a workload with such types.
 * @param w            the target workload.
 * @param model_id     the node's GPU model id.
 * @param cpu_milli_free  the node's free CPU, milli-cores.
 * @param gpu_free     free milli of each GPU, any order (n_gpu entries).
 * @param n_gpu        GPUs, 0..GS_NODE_GPUS_MAX.
 * @param out          receives the buckets; may be NULL.
 * @return F, the sum of every bucket except q3, in milli-GPU.
 */
double gs_frag_node(const struct gs_workload *w, uint32_t model_id, int64_t cpu_milli_free,
                    const int32_t *gpu_free, uint32_t n_gpu, struct gs_frag *out);

/**
 * Computes the fragmentation of one node from its GPUs' records: the measure of
 * gs_frag_node() extended to every sharing mode (docs/fgd-policies.md §3.7).
 *
 * Each GPU g offers an idle amount in milli-GPU: a fractions or whole GPU its gpu_milli_free;
 * a time-sliced GPU floor(1000 x free slots / replicas); a MIG GPU the sum over its free
 * instances of floor(1000 x the profile's compute slices / the GPU's); an unhealthy GPU 0. A
 * MEMORY type measures a fractions GPU with known memory by its memory instead, the largest m
 * with floor(mem_mib x m / 1000) <= mem_mib_free (its free memory as milli-GPU).
 * A type m serves GPU g when: MILLI sharing (one GPU, milli < 1000), g is a fractions GPU with
 * gpu_milli_free >= milli; MILLI whole, gpu_milli_free >= 1000; MEMORY, g is a healthy
 * fractions GPU with known memory, the request's MiB fit its free memory and gpu_milli_used +
 * milli <= gpu_milli; TIMESLICE, g is a healthy time-sliced GPU with a free slot; MIG, g is a
 * healthy MIG GPU and the usable part is its free instances of the profile (counted one by
 * one). m fits the node when its CPU fits and the GPUs (instances for MIG) it serves number
 * at least its count; then only the idle m cannot use counts (q2), else all idle counts (q1,
 * q2 or q4 as in gs_frag_node()). CPU-only types and types whose model mask excludes the node
 * count all idle (xl/xr, na).
 * @param w          the target workload.
 * @param model_id   the node's GPU model id.
 * @param cpu_milli_free  the node's free CPU, milli-cores.
 * @param gpus       the node's GPUs (n_gpu records, by device index), as struct gs_node holds
 *                   them (derived members exact); borrowed.
 * @param n_gpu      GPUs, 0..GS_NODE_GPUS_MAX.
 * @param out        receives the buckets; may be NULL.
 * @return F, the sum of every bucket except q3, in milli-GPU. Pure; no allocation.
 */
double gs_frag_node_gpus(const struct gs_workload *w, uint32_t model_id, int64_t cpu_milli_free,
                         const struct gs_gpu *gpus, uint32_t n_gpu, struct gs_frag *out);

/** Whether a workload has a type of a kind beyond milli (so gs_frag_node() cannot judge it). */
bool gs_workload_has_modes(const struct gs_workload *w);

/**
 * Returns the non-zero CPU request the scores use: a request of 0 counts as 100 milli-cores
 * (Kubernetes' DefaultMilliCPURequest for scoring).
 */
int64_t gs_cpu_nonzero(int64_t cpu_milli);

#endif /* GPUSCHED_FRAG_H */
