/*
 * The offline bound (issue 12): a lower bound on the unallocated GPU % that any placement could
 * reach on a simulator run's arrivals, so that a policy's result can be read against the limit.
 *
 * A linear programme over pod shapes and node types, not over single pods, to stay small: a
 * shape is a distinct (CPU, memory, GPUs, milli-GPU per GPU) among the arrived pods, a type a
 * distinct (CPU, memory, pod limit, GPUs, GPU model) among the nodes. x[s][t] >= 0 is how many
 * pods of shape s go to nodes of type t, only where one such pod fits on an empty node of the
 * type (the core's gs_node_fits(), model constraint included). Per shape the pods placed are at
 * most those that arrived; per type the sums of CPU, memory, pods and milli-GPU are at most the
 * type's nodes' total; and, per type, the pods that need a GPU to themselves (whole GPUs, each
 * counted num_gpu times, and fractions above 500 milli, of which no two share a GPU) are at
 * most its GPUs; and x[s][t] is at most the type's nodes times the pods of shape s that fit on
 * one empty node of it (by CPU, memory, pod limit and GPUs), since a pod never spans nodes. The
 * objective is the milli-GPU placed. Every placement of the arrived pods is
 * a feasible point (sum its pods by shape and type), so the optimum bounds the GPU any policy
 * allocates from above, and 100 - 100 x optimum / capacity bounds its unallocated GPU % from
 * below. The relaxation ignores how pods split over the nodes of a type and the order of
 * arrival, so the bound is not reachable in general.
 *
 * Solved with GLPK's simplex (glp_simplex, GNU Linear Programming Kit, Debian libglpk-dev),
 * which this module links; the core does not. Milli-GPU requests only (the FGD traces).
 */
#ifndef GPUSCHED_BOUND_H
#define GPUSCHED_BOUND_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/sim.h"

/** A pod shape and how many pods have it. Plain value record. */
struct gs_bound_shape {
    int64_t cpu_milli; /**< CPU per pod, milli-cores */
    int64_t mem_mib;   /**< memory per pod, MiB */
    uint32_t num_gpu;  /**< GPUs per pod */
    int32_t gpu_milli; /**< milli-GPU per GPU (1..1000; 0 with num_gpu 0) */
    double count;      /**< pods of the shape, >= 0 */
};

/** A node type and how many nodes have it. Plain value record. */
struct gs_bound_type {
    int64_t cpu_milli;  /**< CPU per node, milli-cores */
    int64_t mem_mib;    /**< memory per node, MiB */
    int64_t pods_max;   /**< pod limit per node */
    uint32_t gpu_count; /**< GPUs per node */
    double count;       /**< nodes of the type, >= 0 */
};

/**
 * Solves the programme above for given shapes and types.
 * @param shapes  shapes[0..ns); borrowed.
 * @param types   types[0..nt); borrowed.
 * @param fits    ns x nt flags, row-major by shape: fits[s * nt + t] when a pod of shape s fits
 *                on an empty node of type t; borrowed.
 * @param gpu_milli_max  receives the optimum: milli-GPU placed at most.
 * @return GS_OK; GS_EINVAL for NULL arguments or a negative count; GS_ELIMIT when the
 *         programme has more than 2^30 variables; GS_ENOMEM; GS_ERANGE when GLPK does not reach
 *         an optimal basis (its status is then not a bound).
 */
int gs_bound_lp(const struct gs_bound_shape *shapes, uint32_t ns, const struct gs_bound_type *types,
                uint32_t nt, const bool *fits, double *gpu_milli_max);

/** The bound of one simulator run. Plain value record. */
struct gs_bound_result {
    uint64_t seed;             /**< the run's seed */
    uint32_t pods;             /**< pods arrived when the arrived GPU request reaches 100 % of
                                    capacity (the last event of the simulator's column 100) */
    uint32_t shapes;           /**< distinct shapes among them */
    uint32_t types;            /**< distinct node types */
    int64_t arrived_gpu_milli; /**< GPU those pods ask, milli */
    double arrived_pct;        /**< that, % of the cluster's GPU capacity */
    double alloc_max_milli;    /**< the programme's optimum, milli-GPU */
    double unalloc_min_pct;    /**< 100 - 100 x alloc_max_milli / capacity: no placement of
                                    these arrivals leaves fewer GPUs unallocated */
};

/**
 * The bound for the arrivals of simulator run (seed, tune) of `in` at 100 % arrived workload:
 * the same pod list gs_sim_run() draws (gs_sim_arrivals()), cut after the last pod whose
 * arrival keeps the arrived request in column 100 (rint(arrived / capacity x 100) <= 100). The
 * simulator's "unallocated GPU % @100%" of that run averages the events of column 100, each of
 * which has at most these pods arrived, so it is at least unalloc_min_pct.
 * @param out  receives the result.
 * @return GS_OK; GS_EINVAL for an input with memory, MIG or time-sliced requests (milli only)
 *         or a bad tune; the errors of gs_bound_lp() and gs_sim_arrivals().
 */
int gs_bound_sim(const struct gs_sim_input *in, uint64_t seed, double tune,
                 struct gs_bound_result *out);

#endif /* GPUSCHED_BOUND_H */
