/*
 * GPU topology of the scheduling core: which whole GPUs of one machine a multi-GPU request
 * should take, given which GPUs are joined by NVLink (and, where known, on which NUMA node each
 * sits). One function for both places that choose whole GPUs: the scheduler's pick on a node
 * (gs_node_pick_gpus() and every policy's whole-GPU pick, on nodes whose NVLink peers are known,
 * gs_cluster_set_nvlink()) and the node agent's GetPreferredAllocation for whole GPUs, so that
 * the two cannot prefer different GPUs for the same request.
 *
 * Pure: no I/O, no globals, no allocation; safe from any thread on distinct arguments.
 *
 * Sources: NVIDIA k8s-device-plugin issue #1193 (a 2-GPU request should land on an NVLink pair,
 * and a 1-GPU request should not break a pair while a GPU whose partner is taken is free); the
 * NVML topology API (nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlDeviceGetTopologyCommonAncestor)
 * the agent reads the peers and NUMA nodes from. docs/internals/sharing.md, "Topology".
 */
#ifndef GPUSCHED_TOPO_H
#define GPUSCHED_TOPO_H

#include <stdint.h>

/** Most GPUs gs_topo_pick() judges (a GPU set is a 64-bit mask; the agent's GS_GPU_MAX). */
#define GS_TOPO_GPUS_MAX 64
/** Up to this many candidate GPUs the choice is exact (every subset); past it, greedy. */
#define GS_TOPO_EXACT_MAX 16

/**
 * Chooses `want` GPUs from `avail` (beyond the `must` ones a request already holds) for a
 * whole-GPU request, best first by, in order:
 *   1. NVLink pairs inside the chosen set together with `must` (more is better);
 *   2. most of those GPUs on one NUMA node (GPUs of unknown NUMA node count as one node);
 *   3. fewest NVLink links from the set to available GPUs left outside it (fewer is better:
 *      this keeps pairs whole for later requests; on a node with pairs (0,1),(2,3),(4,5),(6,7)
 *      and GPU 0 taken, a 1-GPU request takes GPU 1, not GPU 2 whose partner 3 is free);
 * then, among equal sets, the most GPUs on the NUMA node of the lowest `must` GPU, then the
 * lowest indices (the first set in lexicographic order of its ascending GPU indices). A machine
 * without any link therefore gets the lowest `want` available GPUs (when the NUMA nodes are
 * unknown or all equal), the choice the scheduler made before it knew topology.
 *
 * With at most GS_TOPO_EXACT_MAX candidates (avail minus must) every subset of `want` of them
 * is scored (C(16, 8) = 12,870 at most, each in O(want)); past that, a greedy completion from
 * every candidate as seed (from `must` alone when it is not empty), adding each time the GPU
 * with the most links into the set, then the most on the NUMA node shared with the set, then
 * the fewest links cut, the lowest index on ties, and the best completed set by the order above
 * (the first seed on ties). The greedy choice can miss the best set; the exact one cannot.
 *
 * @param n_gpus     GPUs of the machine, 0..GS_TOPO_GPUS_MAX; GPU indices are 0..n_gpus-1.
 * @param nvlink     n_gpus masks, borrowed: bit j of nvlink[i] says GPU i reaches GPU j over
 *                   NVLink. A link either end names counts for both; a self bit and bits at or
 *                   past n_gpus are ignored. May be NULL only when n_gpus is 0.
 * @param numa_node  n_gpus NUMA nodes (>= 0; -1 unknown), borrowed; NULL when none is known.
 * @param avail      mask of GPUs the request may take (free, healthy, offered).
 * @param must       mask of GPUs the request holds already (kubelet's must_include); scored
 *                   with the set, never returned in *out. 0 for none.
 * @param want       GPUs to choose beyond `must`, 0..GS_TOPO_GPUS_MAX.
 * @param out        receives the chosen mask (want bits, all in avail & ~must) on GS_OK; 0 on
 *                   failure.
 * @return GS_OK; GS_EUNSCHEDULABLE when avail & ~must has fewer than `want` GPUs; GS_EINVAL
 *         for n_gpus or want past GS_TOPO_GPUS_MAX, nvlink or out NULL (out NULL: nothing
 *         written), or a bit of avail or must at or past n_gpus.
 */
int gs_topo_pick(uint32_t n_gpus, const uint64_t *nvlink, const int32_t *numa_node, uint64_t avail,
                 uint64_t must, uint32_t want, uint64_t *out);

#endif /* GPUSCHED_TOPO_H */
