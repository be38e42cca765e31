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

/*
 * The configuration programme (Gilmore and Gomory, "A linear programming approach to the
 * cutting-stock problem", Operations Research 9(6):849-859, 1961), which sees how pods split
 * over single nodes and GPUs where gs_bound_lp() sees only each type's totals.
 *
 * A configuration of type t is a multiset of pods (counts n_s per shape) that one empty node of
 * the type holds: CPU, memory and pod limit summed, every pod on GPUs of the node (num_gpu whole
 * GPUs for a whole-GPU shape, a share of one GPU otherwise, the shares on a GPU summing to at
 * most 1000 milli), only shapes that fit the type (`fits`), and n_s at most the pods of the
 * shape. lambda[t][p] >= 0 is how many nodes of type t take configuration p:
 *
 *   maximise  sum gpu(p) lambda[t][p]                 (gpu(p): milli-GPU p holds)
 *   s.t.      sum_p lambda[t][p] <= N_t               for each type (its nodes)
 *             sum_{t,p} n_s(p) lambda[t][p] <= c_s    for each shape that asks a GPU (arrived)
 *
 * Every placement of the arrivals gives a feasible point (count its nodes by configuration), so
 * the optimum bounds the GPU any placement allocates from above, and it is never above
 * gs_bound_lp()'s: each configuration meets every row of that programme node by node. Shapes
 * that ask no GPU are left out: leaving a pod unplaced is always allowed, and such a pod only
 * takes room.
 *
 * Column generation (ibid.; Lübbecke and Desrosiers, "Selected topics in column generation",
 * Operations Research 53(6):1007-1023, 2005): the master over the configurations found so far
 * is solved with GLPK's simplex; with its duals mu_t (types) and pi_s (shapes) each type is
 * priced, max over its configurations of sum_s n_s (gpu_s - pi_s), an integer knapsack solved
 * exactly by branch and bound that places every pod on a GPU (pods of a shape in
 * non-increasing order of the free milli they land on, a bound from each resource alone); a
 * configuration whose reduced cost gpu(p) - mu_t - pi . n(p) is positive joins the master.
 * When none does, the master's value is the programme's optimum.
 *
 * Stopped early (a cap on columns or rounds, or a pricing that reached its node cap and gives
 * only an upper bound on its optimum), the master's value is not a bound. Two that are, each
 * from weak duality with the last duals y = (mu, pi) >= 0, and the smaller is taken:
 *  - Farley's (A. A. Farley, "A note on bounding a class of linear programming problems,
 *    including cutting stock problems", Operations Research 38(5):922-923, 1990), in the form
 *    for a maximisation with non-negative rows: theta y is dual feasible for
 *    theta = max(1, max_p gpu(p) / (mu_t + pi . n(p))), so the optimum is at most
 *    theta x (sum N_t mu_t + sum c_s pi_s) = z / (1 - max_p rc(p) / gpu(p)) where the duals are
 *    the master's (z its value, rc the reduced cost). theta per type is found by Dinkelbach's
 *    method on the same pricing with values gpu_s - theta pi_s;
 *  - the Lagrangian one (ibid., Lübbecke and Desrosiers section 2.1):
 *    sum c_s pi_s + sum N_t max(0, max_p sum_s n_s (gpu_s - pi_s)).
 * Both equal the master's value when column generation has converged.
 */

/** Default caps of gs_bound_cg(). */
#define GS_BOUND_CG_COLUMNS_MAX 20000u
#define GS_BOUND_CG_ROUNDS_MAX 2000u
#define GS_BOUND_CG_NODES_MAX 50000u

/** Caps on the work of gs_bound_cg(). Plain value record. */
struct gs_bound_cg_limits {
    uint32_t columns_max;       /**< configurations in the master, >= 1 */
    uint32_t rounds_max;        /**< rounds (master solve + pricing of every type), >= 1 */
    uint64_t pricing_nodes_max; /**< search nodes per pricing, >= 1; past it the pricing
                                     gives an upper bound instead of its optimum. A round
                                     that finds no column while a pricing was cut is priced
                                     again with 10, then 100 times as many (kept after) */
};

/** What gs_bound_cg() found. Plain value record; milli-GPU. */
struct gs_bound_cg_result {
    double lp_milli;        /**< the last master's value: the programme's optimum when
                                 converged, otherwise only a value some LP point reaches */
    double farley_milli;    /**< Farley's upper bound (INFINITY where not finite) */
    double lagrange_milli;  /**< the Lagrangian upper bound, smallest over the rounds */
    double gpu_milli_max;   /**< the bound: the smaller of the two (and of the capacity and the
                                 GPU asked); the optimum when converged */
    uint32_t columns;       /**< configurations generated */
    uint32_t rounds;        /**< rounds made */
    bool converged;         /**< no configuration with a positive reduced cost remains */
    bool column_cap;        /**< stopped on columns_max */
    bool round_cap;         /**< stopped on rounds_max (and not on columns_max) */
    bool search_cap;        /**< stopped with no column to add while a pricing cut at
                                 pricing_nodes_max could not rule one out */
    bool pricing_truncated; /**< some pricing reached pricing_nodes_max */
};

/**
 * Solves the configuration programme above by column generation.
 * @param shapes  shapes[0..ns), as for gs_bound_lp(); counts are read as floor(count);
 *                borrowed. A share of a GPU (gpu_milli < 1000) must have num_gpu 1.
 * @param types   types[0..nt); counts as floor(count); at most GS_NODE_GPUS_MAX GPUs; borrowed.
 * @param fits    ns x nt flags as for gs_bound_lp(); borrowed.
 * @param limits  caps; NULL for the defaults above.
 * @param out     receives the result (zeroed first).
 * @return GS_OK; GS_EINVAL for NULL arguments, a negative count or resource, an inconsistent
 *         shape or a zero cap; GS_ELIMIT when a pricing's search could go deeper than 4,096
 *         levels (the pods one node of a type holds plus the shapes that fit it) or the master
 *         would exceed GLPK's sizes; GS_ENOMEM; GS_ERANGE when GLPK does not reach an
 *         optimal basis.
 */
int gs_bound_cg(const struct gs_bound_shape *shapes, uint32_t ns, const struct gs_bound_type *types,
                uint32_t nt, const bool *fits, const struct gs_bound_cg_limits *limits,
                struct gs_bound_cg_result *out);

/** The bound of one simulator run. Plain value record. */
struct gs_bound_result {
    uint64_t seed;                /**< the run's seed */
    uint32_t pods;                /**< pods arrived when the arrived GPU request reaches 100 % of
                                       capacity (the last event of the simulator's column 100) */
    uint32_t shapes;              /**< distinct shapes among them */
    uint32_t types;               /**< distinct node types */
    int64_t arrived_gpu_milli;    /**< GPU those pods ask, milli */
    double arrived_pct;           /**< that, % of the cluster's GPU capacity */
    double alloc_max_milli;       /**< the smaller of the two programmes' bounds, milli-GPU */
    double unalloc_min_pct;       /**< 100 - 100 x alloc_max_milli / capacity: no placement of
                                       these arrivals leaves fewer GPUs unallocated */
    struct gs_bound_cg_result cg; /**< the configuration programme's run */
    double cg_lp_pct;             /**< 100 - 100 x cg.lp_milli / capacity: the configuration
                                       programme's value (its bound when cg.converged) */
    double cg_unalloc_min_pct;    /**< 100 - 100 x cg.gpu_milli_max / capacity, >= 0: its bound */
    double agg_unalloc_min_pct;   /**< gs_bound_lp()'s bound, same unit */
};

/**
 * The bound for the arrivals of simulator run (seed, tune) of `in` at 100 % arrived workload,
 * from both programmes (gs_bound_lp() and gs_bound_cg() with `limits`, NULL for the defaults;
 * unalloc_min_pct is the larger, alloc_max_milli the smaller optimum):
 * the same pod list gs_sim_run() draws (gs_sim_arrivals()), cut after the last pod whose
 * arrival keeps the arrived request in column 100 (rint(arrived / capacity x 100) <= 100). The
 * simulator's "unallocated GPU % @100%" of that run averages the events of column 100, each of
 * which has at most these pods arrived, so it is at least unalloc_min_pct.
 * @param out  receives the result.
 * @return GS_OK; GS_EINVAL for an input with memory, MIG or time-sliced requests (milli only)
 *         or a bad tune; the errors of gs_bound_lp(), gs_bound_cg() and gs_sim_arrivals().
 */
int gs_bound_sim(const struct gs_sim_input *in, uint64_t seed, double tune,
                 const struct gs_bound_cg_limits *limits, struct gs_bound_result *out);

#endif /* GPUSCHED_BOUND_H */
