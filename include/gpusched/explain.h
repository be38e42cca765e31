/*
 * Why a pod cannot be placed: the counts per filter that kube-scheduler shows in a pod's
 * PodScheduled condition, plus the GPU facts it cannot show (fragmentation).
 *
 * gs_explain() judges every node against one request and filter class and counts each node
 * under the first filter it fails, in the order: unschedulable (cordoned), taints, node
 * affinity/selector, GPU model, resources. Within resources a node is counted under each
 * resource it lacks, as kube-scheduler's NodeResourcesFit reports them. gs_explain_format()
 * writes the message kube-scheduler users know (FitError in pkg/scheduler/framework):
 *
 *   "0/<N> nodes are available: <count> <reason>, <count> <reason>."
 *
 * with the reason strings sorted as strings (as kube-scheduler sorts them) and these templates:
 *
 *   "node(s) were unschedulable"
 *   "node(s) had untolerated taint {<key>: <value>}"      the first such taint seen
 *   "node(s) didn't match Pod's node affinity/selector"
 *   "node(s) didn't match Pod's GPU model"
 *   "Too many pods"
 *   "Insufficient cpu"
 *   "Insufficient memory"
 *   "Insufficient nvidia.com/gpu"
 *   "Insufficient <name>"                                 each other resource asked
 *                                                         (extended resources, hugepages ...)
 *   "Insufficient GPU memory"                             a memory request (gpu_mem_*)
 *   "Insufficient time-sliced GPU slots"                  a time-slice request
 *   "Insufficient nvidia.com/mig-<profile>"               a MIG request
 *   "node(s) had no GPU with known memory in fractions mode"   memory request, no such GPU
 *   "node(s) had no time-sliced GPU"                      time-slice request, no such GPU
 *   "node(s) had no MIG GPU with profile <profile>"       MIG request, no such GPU
 *
 * followed, when the free GPU capacity of the nodes that pass every other check adds up to the
 * ask but no node (or no GPU, for a fraction) holds it, by
 *
 *   " free GPU capacity is fragmented: largest free block <b> of the <n> GPUs asked"
 *   " free GPU capacity is fragmented: largest free share <m> of the <a> milli-GPU asked"
 *
 * Pure; O(nodes). Meant for the failure path only.
 */
#ifndef GPUSCHED_EXPLAIN_H
#define GPUSCHED_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h"

/** Longest taint key/value kept for the message, bytes (longer ones are cut). */
#define GS_EXPLAIN_TAINT_MAX 128

/** The counts behind one "why pending" message. Plain value record. */
struct gs_unsched {
    uint32_t nodes;                         /**< nodes present */
    uint32_t unschedulable;                 /**< cordoned */
    uint32_t taint;                         /**< an untolerated NoSchedule/NoExecute taint */
    char taint_key[GS_EXPLAIN_TAINT_MAX];   /**< the first such taint */
    char taint_value[GS_EXPLAIN_TAINT_MAX]; /**< its value */
    uint32_t affinity;                      /**< nodeSelector or required node affinity */
    uint32_t model;                         /**< GPU model not allowed (or no GPUs for a GPU pod) */
    uint32_t pods;                          /**< pod limit reached */
    uint32_t cpu;                           /**< not enough free CPU */
    uint32_t mem;                           /**< not enough free memory */
    uint32_t gpu;                           /**< not enough free GPU (a milli request) */
    uint32_t gpu_mem;   /**< memory request: GPUs in fractions mode, too little memory free */
    uint32_t gpu_slots; /**< time-slice request: time-sliced GPUs, too few slots free */
    uint32_t mig;       /**< MIG request: GPUs with the profile, too few instances free */
    uint32_t gpu_mode;  /**< a request beyond milli: no GPU of the node is in the mode it needs
                             (for MIG: no MIG GPU whose layout has the profile) */
    uint32_t xres[GS_POD_XRES_MAX];         /**< per other resource asked (req->xres order):
                                                 not enough free of it */
    const char *xres_name[GS_POD_XRES_MAX]; /**< their names, borrowed from the cluster (valid
                                                 while it lives); NULL for unknown ids */
    uint32_t fit;           /**< nodes where the pod fits now (0 for a pod that cannot run) */
    uint32_t gpu_free;      /**< whole-GPU ask: free GPUs with gpu_milli open, summed over the
                                 nodes that pass every other check */
    uint32_t largest_block; /**< the most such GPUs on one node */
    int64_t share_free;     /**< fraction ask: free milli-GPU summed over those nodes' GPUs */
    int32_t largest_share;  /**< the most free milli-GPU on one GPU of those nodes */
    bool fragmented;        /**< the free capacity adds up to the ask, no node holds it */
};

/**
 * Counts why `req` (with filter class `cls`) fits on no node.
 * @param out  receives the counts.
 * @return GS_OK; GS_EINVAL for an unknown class.
 */
int gs_explain(const struct gs_cluster *c, const struct gs_pod_req *req, uint32_t cls,
               struct gs_unsched *out);

/**
 * Writes the message for counts from gs_explain() (templates above), NUL-terminated and cut to
 * `cap` bytes.
 * @return the length the whole message needs (as snprintf), excluding the NUL.
 */
size_t gs_explain_format(const struct gs_unsched *u, const struct gs_pod_req *req, char *buf,
                         size_t cap);

#endif /* GPUSCHED_EXPLAIN_H */
