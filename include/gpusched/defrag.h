/*
 * The defragmentation planner (issue 12): for a pending pod that fits on no node as the cluster
 * is, the smallest set of running pods to move (evict and restart elsewhere) so that it fits,
 * as an operation list a scheduler carries out through evictions (Volcano issue #3948 asks for
 * exactly this; KAI Scheduler's consolidation action does part of it).
 *
 * Model. A plan is a sequence of operations over the cluster: EVICT a running pod from its
 * node, PLACE a pod (the pending one or an evicted one) on a node and GPUs. Every PLACE is what
 * gs_node_pick_gpus() picks on that node in the state the operations before it leave, and
 * gs_cluster_bind() accepts it, so replaying the list from the first operation on is valid at
 * every step: the core's own fit check and GPU pick, one code path, nothing re-implemented.
 * Only pods the caller marks movable are evicted (its rules: the owner restarts it, it is past
 * its minimum run time, no disruption budget forbids it). An evicted pod may land on any node,
 * its own included (other GPUs of the same node: a fraction moved onto another fraction's GPU
 * frees a whole GPU), but never back on exactly the placement it left.
 *
 * Choice, in this order: (1) fewest pods moved; (2) fewest GPUs moved (the sum of the moved
 * pods' charge, gs_charge_placement() at their present placement, in milli-GPU); (3) the first
 * plan in search order. Where the moved pods land does not change (1) or (2), so any landing
 * that fits is as good as another once the moved set is fixed.
 *
 * Search: iterative deepening on the pods moved, k = 1..budget; at depth k a depth-first
 * branch and bound on the GPUs moved finds the best plan of k moves, and the first k that has
 * one ends the search (no plan of fewer moves exists, by the depths before). A state keeps the
 * pods still to place ("homeless": the pending pod, then evicted ones); the largest homeless
 * pod is placed next, either (a) on a node where it fits as it is, or (b) on a node after
 * evicting a *minimal* set E of that node's movable, not yet moved pods (no proper subset of E
 * makes room; a superset moves the same pods as E followed by a later pod evicting the rest
 * for itself, so nothing is lost), whose pods become homeless. Pruning: a branch whose moves or
 * GPUs moved reach the best found stops; in (a) the last homeless pod takes the first node it
 * fits (no later pod can depend on where it went), and nodes whose packed fit view is equal
 * and that hold no movable pod are tried once; in (b) a node is tried only when the pod fits
 * there with all its movable pods gone, and subsets are enumerated by size.
 *
 * Complexity. With N nodes, at most m movable pods per node and budget k: one expansion costs
 * O(N x (m + C(m, <=k))) fit trials in (b) plus O(N) in (a), and the tree has at most k + 1
 * levels (one per pod placed: the pending one and at most k evicted), so the worst case is
 * O((N x C(m, <=k))^(k+1)) trials; the prunings above keep real cases far below it, and an
 * arithmetic test (what the pods of a set hold, added back to the node's free CPU, memory and
 * GPUs) skips a node or a set that cannot make room before any trial eviction. `evals_max` bounds
 * the trials (fit checks and trial evictions): a search that reaches it stops, with GS_ELIMIT when
 * no plan was found yet, or with the best plan found so far and `exact` false.
 *
 * State: the planner changes the cluster while it searches (trial unbinds and binds, each
 * undone in reverse order) and leaves every node's bound resources as it found them; node
 * generations advance, so caches keyed on them refresh. Pure core code: no I/O, no globals,
 * allocation through the core's seam. Not thread-safe on one cluster.
 */
#ifndef GPUSCHED_DEFRAG_H
#define GPUSCHED_DEFRAG_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/cluster.h"

/** Most pods one plan may move. */
#define GS_DEFRAG_BUDGET_MAX 6
/** Most operations of a plan: one EVICT and one PLACE per moved pod, and the pending PLACE. */
#define GS_DEFRAG_OPS_MAX (2 * GS_DEFRAG_BUDGET_MAX + 1)
/** Trials a search makes at most when the caller gives 0. */
#define GS_DEFRAG_EVALS_DEFAULT 2000000u
/** gs_defrag_op.pod of the pending pod. */
#define GS_DEFRAG_PENDING UINT32_MAX

/** A running pod as the planner reads it. Plain value record, borrowed. */
struct gs_defrag_pod {
    struct gs_pod_req req;  /**< its request */
    struct gs_placement pl; /**< where it runs now: bound in the cluster exactly so */
    bool movable;           /**< the caller allows evicting it (restartable, past its minimum
                                 run time); false: it stays where it is */
};

/** What the planner may do. Plain value record. */
struct gs_defrag_config {
    uint32_t budget_pods; /**< most pods moved, 1..GS_DEFRAG_BUDGET_MAX */
    uint64_t evals_max;   /**< most trials (gs_node_fits() calls and trial evictions), 0:
                               GS_DEFRAG_EVALS_DEFAULT */
};

/** Kinds of operation. */
enum gs_defrag_op_kind {
    GS_DEFRAG_EVICT = 0, /**< evict pod `pod` from pl (where it ran) */
    GS_DEFRAG_PLACE = 1, /**< bind pod `pod` (or the pending pod) at pl */
};

/** One operation of a plan. */
struct gs_defrag_op {
    enum gs_defrag_op_kind kind;
    uint32_t pod;           /**< index into the caller's pods, or GS_DEFRAG_PENDING */
    struct gs_placement pl; /**< EVICT: the placement it leaves; PLACE: the one it takes */
};

/** A plan. Plain value record, filled by gs_defrag_plan(). */
struct gs_defrag_plan {
    uint32_t pods_moved;                        /**< pods evicted and placed again, 0..budget */
    int64_t gpu_milli_moved;                    /**< their charge at their old placement, milli */
    uint32_t n_ops;                             /**< entries in ops */
    struct gs_defrag_op ops[GS_DEFRAG_OPS_MAX]; /**< in the order to carry them out */
    struct gs_placement pending_pl;             /**< where the pending pod goes (also in ops) */
    uint64_t evals;                             /**< trials made (fit checks, trial evictions) */
    bool exact;                                 /**< the search ran to its end: the plan is the
                                                     best by the rules above */
};

/**
 * Plans the moves that let `pending` start.
 * @param c        the cluster; every pods[i] is bound in it at pods[i].pl. Changed during the
 *                 call and given back with the same bound resources (see "State" above).
 * @param pods     the running pods the planner may consider, pods[0..n); borrowed. Pods of the
 *                 cluster not listed stay where they are.
 * @param n        entries in pods.
 * @param pending  the request to make room for; borrowed; must pass gs_pod_req_validate().
 * @param cfg      budget and evaluation bound; borrowed.
 * @param out      receives the plan; zero moves and one PLACE when `pending` fits as it is.
 * @return GS_OK; GS_ENOENT when no plan of at most budget_pods moves exists (the search was
 *         complete); GS_ELIMIT when evals_max was reached before any plan was found;
 *         GS_EINVAL for NULL arguments, a budget out of range, an invalid request or a pod
 *         whose placement does not match the cluster; GS_ENOMEM. On failure *out is zeroed and
 *         the cluster is as it was.
 */
int gs_defrag_plan(struct gs_cluster *c, const struct gs_defrag_pod *pods, uint32_t n,
                   const struct gs_pod_req *pending, const struct gs_defrag_config *cfg,
                   struct gs_defrag_plan *out);

#endif /* GPUSCHED_DEFRAG_H */
