/*
 * Dynamic MIG re-partition, the planner (issue 8): for one MIG GPU, its current layout (each
 * instance used or free) and a request for `count` instances of one profile, the re-partition
 * that makes the request fit, as the operation list an agent would carry out.
 *
 * Rules. Only free instances are destroyed; every used instance stays where it is. The request is
 * served by free instances of the profile that are kept and by new instances created in the
 * memory slices no kept instance takes. The resulting layout passes gs_mig_layout_check().
 *
 * Choice, in this order:
 *  1. fewest instances destroyed;
 *  2. the highest future score of the resulting layout: score = sum over the model's profiles p
 *     of compute_slices(p) x a(p), where a(p) is the number of further requests for one instance
 *     of p the layout could serve without destroying anything: the kept free instances of p that
 *     the request does not take, plus the most new instances of p that fit in the memory slices
 *     no instance takes (greedy from the lowest allowed start, which is optimal for equal-length
 *     runs), capped by the compute slices left and by p's most instances per GPU. The weight
 *     c(p) makes room for a large instance count more than room for a small one, so contiguous
 *     free slices score above the same number scattered;
 *  3. fewer instances created, then the first in enumeration order: destroy sets by the input
 *     indices as a bitmask, lowest mask first among equal sizes; new starts lexicographically
 *     lowest.
 *
 * Search: every subset of the free instances (at most 2^8) times every set of `count` allowed
 * starts of the profile (at most C(7,k)); bounded by GS_MIG_PLAN_EVAL_MAX evaluations. Destroy
 * sets are tried by size, smallest first, and the first size holding a plan ends the search
 * (rule 1 prefers it to any larger set); a start set whose new instances overlap a kept one or
 * each other is skipped without being evaluated. The table's models have at most 7 instances
 * and 7 starts (128 x 35 candidates), so the bound is never reached for them. The compute cap of
 * a(p) never binds on the table's geometry (no profile takes more compute than memory slices)
 * but is kept as the definition says. Pure, no allocation, thread-safe. Measured in
 * bench/bench_migplan.c.
 */
#ifndef GPUSCHED_MIG_PLAN_H
#define GPUSCHED_MIG_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/mig.h"

/** Most operations of one plan: destroy every instance, then create as many. */
#define GS_MIG_PLAN_OPS_MAX (2 * GS_MIG_INSTANCES_MAX)
/** Most candidate layouts one plan evaluates (256 destroy sets x 35 start sets, rounded up). */
#define GS_MIG_PLAN_EVAL_MAX 16384

/** One instance of a GPU's current layout. */
struct gs_mig_slot {
    struct gs_mig_instance in; /**< profile index and start slot */
    bool used;                 /**< held by a pod: the planner never destroys it */
};

/** What one operation does. */
enum gs_mig_op_kind {
    GS_MIG_OP_DESTROY = 0, /**< destroy the GPU instance at `start` */
    GS_MIG_OP_CREATE = 1,  /**< create a GPU instance of `profile` at `start` */
};

/** One operation of a plan. */
struct gs_mig_op {
    enum gs_mig_op_kind op;
    struct gs_mig_instance in; /**< profile index and start slot */
};

/** A re-partition plan. Plain value, filled by gs_mig_plan_repartition(). */
struct gs_mig_plan {
    uint32_t n_ops;                            /**< entries in ops */
    struct gs_mig_op ops[GS_MIG_PLAN_OPS_MAX]; /**< destroys (ascending start), then creates
                                                    (ascending start): the agent's order */
    uint32_t n_destroyed;                      /**< destroy operations */
    uint32_t n_created;                        /**< create operations */
    uint32_t n_layout;                         /**< entries in layout */
    struct gs_mig_instance layout[GS_MIG_INSTANCES_MAX]; /**< the layout after the plan: kept
                                                              instances in input order, then
                                                              the created ones */
    uint32_t n_granted;                                  /**< == the request's count */
    uint8_t granted[GS_MIG_INSTANCES_MAX]; /**< indices into layout of the instances the
                                                request gets (kept free ones first) */
    uint32_t score;                        /**< the future score defined above */
    uint32_t evaluated;                    /**< candidate layouts evaluated (destroy set x
                                                start set, overlap-free), 1..
                                                GS_MIG_PLAN_EVAL_MAX */
};

/**
 * Plans the re-partition of one GPU for `count` instances of `profile`.
 * @param m        the GPU's model; borrowed.
 * @param cur      the current layout, cur[0..n); borrowed; may be NULL when n == 0. It must pass
 *                 gs_mig_layout_check().
 * @param n        instances in cur, 0..GS_MIG_INSTANCES_MAX.
 * @param profile  index into m->profiles.
 * @param count    instances asked, 1..GS_MIG_INSTANCES_MAX.
 * @param out      receives the plan (zero operations when enough free instances of the
 *                 profile exist already); untouched on error.
 * @return GS_OK; GS_ENOENT when no plan destroying only free instances fits the request (also
 *         for more instances than the profile allows on one GPU); GS_EINVAL for a NULL model
 *         or out, a NULL cur with n > 0, n above GS_MIG_INSTANCES_MAX, a bad profile or count,
 *         or a current layout that fails gs_mig_layout_check().
 */
int gs_mig_plan_repartition(const struct gs_mig_model *m, const struct gs_mig_slot *cur, uint32_t n,
                            uint32_t profile, uint32_t count, struct gs_mig_plan *out);

#endif /* GPUSCHED_MIG_PLAN_H */
