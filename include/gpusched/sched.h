/*
 * Placement: choose a node and GPUs for one pod under a named policy.
 *
 * One decision is filter (gs_node_fits() on every node), score (the policy gives each feasible
 * node an integer in 0..100), select (highest score; ties go to the node of smallest rank) and
 * GPU pick inside the chosen node (policy-specific). The six policies are those compared in the
 * FGD paper (Weng et al., USENIX ATC 2023), implemented as its reference simulator runs them;
 * docs/internals/fgd.md restates each rule and its source:
 *
 *   random      uniform over feasible nodes; random GPU among those that fit
 *   dotprod     smallest dot product of free (CPU, GPU) and the request; best-fit GPU
 *   clustering  prefer nodes whose GPU pods have the same shape (GPU Clustering); best-fit GPU
 *   packing     prefer partly used GPUs, then partly used nodes, then idle nodes; best-fit GPU
 *   bestfit     least residual CPU+GPU after placement, min-max rescaled; best-fit GPU
 *   fgd         largest drop of node fragmentation (Fragmentation Gradient Descent); FGD GPU pick
 *
 * These rules are for milli-GPU requests (gs_req_kind() GS_REQ_MILLI); a fraction never goes to
 * a GPU in whole mode, and no milli request to a time-sliced or MIG GPU. Requests of the other
 * kinds (GPU memory, time-slice slots, MIG instances; cluster.h) are scored by random,
 * dotprod, clustering, packing and bestfit the same way, best fit on what the kind takes: the
 * feasible node left with the least of it free (MiB on fractions GPUs, free slots, free
 * instances) scores 100, the one with the most 0, min-max scaled; the GPUs are then those
 * gs_node_pick_gpus() chooses. fgd, fgdband and fgdfill score memory and MIG requests by the drop
 * of the fragmentation measure over every mode (frag.h, gs_frag_node_gpus(); docs/fgd-policies.md
 * §3.7) and take the GPUs (instances) that drop chose; time-slice slots keep best fit.
 *
 * A scheduler borrows its cluster and keeps caches keyed on node generations, so binding and
 * unbinding through gs_cluster_bind()/gs_cluster_unbind() is always seen. Not thread-safe: one
 * scheduler per thread; separate schedulers on separate clusters run in parallel freely.
 */
#ifndef GPUSCHED_SCHED_H
#define GPUSCHED_SCHED_H

#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"

/** Number of placement policies in the registry. */
#define GS_POLICY_COUNT 8
/** The first GS_POLICY_PAPER_COUNT are the FGD paper's six (what `simulate --policy all` runs);
 *  after them come policies of ours ("fgdband", src/core/policy_fgdband.c; "fgdfill",
 *  src/core/policy_fgdfill.c). */
#define GS_POLICY_PAPER_COUNT 6

/** Returns the name of policy i (0..GS_POLICY_COUNT-1), e.g. "fgd"; NULL past the end. */
const char *gs_policy_name(uint32_t i);

/** Returns the label of policy i as the FGD experiments name it, e.g. "06-FGD"; NULL past the end.
 */
const char *gs_policy_label(uint32_t i);

/** Returns the registry index of a policy name, or -1 when there is none. */
int gs_policy_find(const char *name);

/** How to create a scheduler. Borrowed by gs_sched_new(). */
struct gs_sched_config {
    const char *policy;                 /**< a policy name, see gs_policy_name() */
    const uint32_t *node_rank;          /**< tie-break rank per node index (lower wins; copied), or
                                             NULL for rank = node index. Length = nodes at creation;
                                             nodes added later rank after them by index. */
    const struct gs_workload *workload; /**< target workload for fgd and for fragmentation
                                        metrics; borrowed, must outlive the scheduler. Required
                                        by fgd, optional otherwise. */
    uint32_t nodes_to_find;             /**< stop filtering once this many feasible nodes are found
                                             (0 = filter and score every node). The scan starts where
                                             the previous one stopped, as kube-scheduler's
                                             percentageOfNodesToScore does; see
                                             gs_sched_adaptive_nodes_to_find(). */
};

/**
 * kube-scheduler's adaptive number of feasible nodes to find (percentageOfNodesToScore unset):
 * all nodes below 100; else max(100, n x max(5, 50 - n/125) / 100). For 10,000 nodes: 500.
 * Source: kubernetes pkg/scheduler/schedule_one.go, numFeasibleNodesToFind.
 */
uint32_t gs_sched_adaptive_nodes_to_find(uint32_t n_nodes);

struct gs_sched;

/**
 * Creates a scheduler over a cluster.
 * @param c    the cluster; borrowed, must outlive the scheduler.
 * @param cfg  configuration; borrowed (node_rank is copied).
 * @param out  receives the scheduler; free with gs_sched_free().
 * @return GS_OK; GS_ENOENT for an unknown policy; GS_EINVAL for fgd without a workload or a
 *         node_rank that is not a permutation; GS_ENOMEM. *out is NULL on failure.
 */
int gs_sched_new(struct gs_cluster *c, const struct gs_sched_config *cfg, struct gs_sched **out);

/** Frees a scheduler (not its cluster). NULL is a no-op. */
void gs_sched_free(struct gs_sched *s);

/**
 * Replaces the target workload (FGD's, and the fragmentation measure's) of a running scheduler,
 * for a live cluster whose pods are only known as they arrive. Every cached fragmentation and
 * FGD score is dropped, so later scores are those of a scheduler made with `w` (Weng et al.,
 * "Beware of Fragmentation", USENIX ATC '23, define F against the target workload).
 * @param w  borrowed; outlives the scheduler or the next call; NULL or empty is refused for fgd.
 * @return GS_OK; GS_EINVAL (fgd and no workload types; the old workload stays).
 */
int gs_sched_set_workload(struct gs_sched *s, const struct gs_workload *w);

/**
 * Chooses a node and GPUs for one pod, without binding it.
 *
 * A pod that asks for no GPU (num_gpu == 0) goes to a node without GPUs when one of the feasible
 * nodes has none (kubernetes/kubernetes#129229): that rule ranks above every score, so the GPU
 * nodes are dropped from the candidates before the policy scores the rest (and
 * gs_sched_score_nodes() reports them -1). Only when no feasible node is GPU-less does such a pod
 * go to a GPU node, chosen by the policy as for any pod. With a bounded scan (nodes_to_find) the
 * rule applies to the nodes the scan found.
 *
 * Cost: for a milli request without other resources, with every node scanned (nodes_to_find 0)
 * and no filter scores, the six paper policies answer from a per-request-class index
 * (src/core/sched_index.c) in O(nodes changed since the class was last asked x log nodes)
 * rather than O(nodes); the choice, and the random policy's draws, are those of the scan.
 * Memory: 16 bytes per node and request class, at most 64 MiB (the least recently used class
 * gives way). Other requests, FGD-band and bounded scans visit every node.
 * @param req  the request; borrowed; it must pass gs_pod_req_validate() (for milli requests:
 *             gpu_milli 1..1000 when num_gpu > 0, under 1000 only with num_gpu == 1).
 * @param rng  random source for the policies that draw (random); others do not touch it.
 * @param pl   receives the placement on GS_OK.
 * @return GS_OK; GS_EUNSCHEDULABLE when no node fits; GS_EINVAL for a malformed request;
 *         GS_ENOMEM. The cluster is never changed; caches may be filled.
 */
int gs_sched_place(struct gs_sched *s, const struct gs_pod_req *req, struct gs_rng *rng,
                   struct gs_placement *pl);

/**
 * gs_sched_place() for a pod with a node filter: only nodes that pass filter class `cls`
 * (gpusched/filter.h: nodeSelector, node affinity, taints and tolerations, cordon) are feasible,
 * and the class's preferred node affinity and the nodes' PreferNoSchedule taints add their
 * kube-scheduler scores (NodeAffinity weight 2, TaintToleration weight 3, each normalised to
 * 0..100) to the policy's score. gs_sched_place() is this with GS_FILTER_DEFAULT.
 * @return as gs_sched_place(); GS_EINVAL also for an unknown class.
 */
int gs_sched_place_class(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                         struct gs_rng *rng, struct gs_placement *pl);

/**
 * Scores every node for one pod, as gs_sched_place() would before selecting.
 * @param scores  array of gs_cluster_node_count() entries; receives each feasible node's score
 *                (0..100 after normalisation) and -1 for an infeasible node (for a pod without
 *                GPUs, also for GPU nodes when a GPU-less node fits: see gs_sched_place()). When
 * exactly one node is feasible, it gets 100 and no policy code runs (the kube-scheduler shortcut
 * the reference keeps).
 * @param rng     as for gs_sched_place().
 * @return the number of feasible nodes (>= 0), or GS_EINVAL / GS_ENOMEM.
 */
int gs_sched_score_nodes(struct gs_sched *s, const struct gs_pod_req *req, struct gs_rng *rng,
                         int32_t *scores);

/**
 * Returns the fragmentation F of node i under the scheduler's workload (cached per node state):
 * gs_frag_node() for a workload of milli types on a node of fractions GPUs, else
 * gs_frag_node_gpus() (the two agree bit for bit where both apply).
 * @param out  receives the buckets; may be NULL.
 * @return F in milli-GPU; 0 when the scheduler has no workload or i is out of range.
 */
double gs_sched_node_frag(struct gs_sched *s, uint32_t i, struct gs_frag *out);

/**
 * Returns the fragmentation of the whole cluster: the sum of F over nodes, kept in integer
 * fixed point (struct gs_frag's total_count_milli) and divided by the workload's covered pods
 * once, so the value does not depend on the order nodes changed in. Only nodes refreshed since
 * the last call (gs_cluster_refreshed_node()) are recomputed: O(changed nodes), O(nodes) on the
 * first call, after a new workload, or when more than 65,536 refreshes passed.
 * @return F in milli-GPU; 0 without a workload.
 */
double gs_sched_cluster_frag(struct gs_sched *s);

#endif /* GPUSCHED_SCHED_H */
