/*
 * GPU fragmentation with respect to a target workload, as defined by the FGD paper:
 * Q. Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
 * Fragmentation Gradient Descent", USENIX ATC 2023, Sections 3-4, and as its reference
 * simulator computes it (kubernetes-scheduler-simulator, pkg/utils/frag.go; restated in
 * docs/internals/fgd.md).
 *
 * The target workload is the set of most frequent task types (CPU, per-GPU milli, GPU count,
 * allowed models) that together cover a given share of the pods, each with its probability.
 * A node's fragmentation F(n) is the expected amount of its idle GPU milli that a task drawn
 * from the target workload could not use.
 */
#ifndef GPUSCHED_FRAG_H
#define GPUSCHED_FRAG_H

#include <stdint.h>

#include "gpusched/cluster.h"

/** One task type of a target workload. */
struct gs_task_type {
    int64_t cpu_milli;       /**< CPU request (non-zero form: a 0 request counts as 100) */
    int32_t gpu_milli;       /**< milli-GPU per GPU, 0 for a CPU-only type */
    uint32_t num_gpu;        /**< GPUs */
    uint64_t gpu_model_mask; /**< allowed models (GS_MODEL_ANY for any) */
    char *gpu_spec;          /**< the spec text the type was keyed on ("" for any); owned */
    uint32_t count;          /**< pods of this type in the source list */
    double p;                /**< probability in the target workload; the p values sum to 1 */
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
 * Pods are grouped by (non-zero CPU, gpu_milli, num_gpu, spec text); types are sorted by count
 * descending, ties by the key descending (cpu, gpu_milli, num_gpu, then spec compared
 * byte-wise); types are kept until their running count reaches threshold_pct % of the pods
 * (the type that crosses is kept); p = count / covered.
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
 * Returns the non-zero CPU request the scores use: a request of 0 counts as 100 milli-cores
 * (Kubernetes' DefaultMilliCPURequest for scoring).
 */
int64_t gs_cpu_nonzero(int64_t cpu_milli);

#endif /* GPUSCHED_FRAG_H */
