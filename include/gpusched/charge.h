/*
 * Charging by capacity: how much of a GPU a pod's grant is, the one place that says it.
 *
 * Chargeback tools that charge a pod holding a quarter of a GPU as a whole GPU (HAMi #3073,
 * OpenCost #3828) make per-team totals that add up to more than the cluster. Here a grant is
 * charged by the share of the GPU's capacity it takes, so the charges of compute fractions, MIG
 * instances and replicas on one GPU never sum above 1. The rules are those of issue 8, "Quota
 * charged by what is used", which sets no cap per GPU: memory grants, each charged the larger of
 * its shares, can sum above 1 (900 milli + 8 GiB and 99 milli + 72 GiB on one 80 GiB GPU are
 * 0.9 + 0.9 = 1.8), and idle capacity is then negative:
 *  - a compute fraction (milli-GPU): gpu_milli / 1000;
 *  - when the GPU's memory and the grant's memory are both known: the larger of the compute
 *    share and the memory share (mem_mib / GPU mem_mib), because a pod holding 80 % of a GPU's
 *    memory keeps others off it whatever compute it asks for;
 *  - a MIG instance: its compute slices over the GPU's (a 1g instance of 7 slices is 1/7);
 *  - a time-sliced replica of a GPU offering N replicas: 1/N;
 *  - N GPUs each with the same grant: N x that share (gs_charge_gpu_hours()).
 *
 * gs_charge_share() is the one rule; gs_charge_placement() applies it to what a placement
 * takes on the cluster's GPUs (the engine's quota books and usage accounting both charge
 * through it), gs_charge_request() to a pod not yet placed.
 *
 * Pure: no state, no I/O; the cluster functions only read the cluster.
 */
#ifndef GPUSCHED_CHARGE_H
#define GPUSCHED_CHARGE_H

#include <stdint.h>

#include "gpusched/cluster.h"

/** What a pod was granted on one GPU. Plain value record. */
struct gs_charge_grant {
    uint8_t sharing;        /**< enum gs_gpu_sharing of the GPU */
    int32_t gpu_milli;      /**< MILLI: milli-GPU granted, 0..GS_GPU_MILLI (0 only for a memory
                                 grant: mem_mib and gpu_mem_mib both > 0) */
    int64_t mem_mib;        /**< MILLI: device memory granted, MiB; 0 when not known */
    int64_t gpu_mem_mib;    /**< MILLI: the GPU's device memory, MiB; 0 when not known */
    uint8_t mig_slices;     /**< MIG: compute slices of the instance (1 for 1g), >= 1 */
    uint8_t gpu_mig_slices; /**< MIG: compute slices of the GPU (7 on A100/H100), >= mig_slices */
    uint8_t replicas;       /**< TIMESLICE: replicas the GPU offers (N), >= 1 */
};

/**
 * The share of one GPU's capacity a grant takes.
 * @param g      borrowed.
 * @param share  receives the share in GPUs, in (0, 1].
 * @return GS_OK; GS_EINVAL for an unknown sharing mode or a value outside the ranges above
 *         (gpu_milli outside 0..1000, or 0 without known memory, negative memory, memory
 *         granted above the GPU's, no slices, slices above the GPU's, no replicas); *share is
 *         then 0.
 */
int gs_charge_share(const struct gs_charge_grant *g, double *share);

/**
 * The GPUs a placement is charged: the sum of gs_charge_share() over what it takes on each GPU
 * it lands on. MILLI: gpu_milli with the MiB a milli share takes (so gpu_milli / 1000 on a
 * fractions GPU; a GPU in whole mode is 1 each); MEMORY: the larger of gpu_milli / 1000 and
 * gpu_mem_mib[k] / the GPU's memory; TIMESLICE: 1/N per slot of a GPU offering N; MIG: compute
 * slices over the GPU's per instance (a 3g of 7 is 3/7).
 * @param req  the request the placement is for; borrowed.
 * @param pl   a placement of it on the cluster (node present, GPUs in the kind's mode).
 * @param gpus receives the charge in GPUs, >= 0.
 * @return GS_OK; GS_EINVAL for a placement that does not match the cluster; *gpus is then 0.
 */
int gs_charge_placement(const struct gs_cluster *c, const struct gs_pod_req *req,
                        const struct gs_placement *pl, double *gpus);

/**
 * The GPUs a pod not yet placed is charged. MILLI: num_gpu x gpu_milli / 1000. MIG: mig_count x
 * the profile's compute slices over its GPU's (the same on every model that has the profile
 * name). MEMORY and TIMESLICE, whose share depends on the GPU: per GPU asked, the largest share
 * over the GPUs it may use: healthy GPUs that can take it (memory: its MiB fit the GPU's) of
 * present nodes of the models it may use, and for MEMORY only nodes with num_gpu such GPUs.
 * For memory that is the share of the GPU with the smallest memory (issue 8: "a pending memory
 * request by the smallest GPU memory among the GPUs it may use"); for slots, of the GPU with
 * the fewest replicas. The charge is thus never below gs_charge_placement() wherever it lands,
 * and the engine re-charges it exactly at bind. GPU-less nodes count for nothing; 0 when no
 * GPU can take it. O(GPUs of the cluster) for those two kinds, O(1) otherwise. Every node
 * counts whatever its labels and taints; gs_charge_request_class() asks only those the pod's
 * node filter passes.
 * @param gpus receives the charge in GPUs, >= 0.
 * @return GS_OK; GS_EINVAL for a request that fails gs_pod_req_validate() (*gpus then 0).
 */
int gs_charge_request(const struct gs_cluster *c, const struct gs_pod_req *req, double *gpus);

/**
 * gs_charge_request() over the GPUs of the nodes that pass node filter class `cls`
 * (gpusched/filter.h: nodeSelector, required node affinity, taints and tolerations, cordon) as
 * the cluster is now: issue 8's "GPUs it may use: those on nodes that pass the pod's filters
 * now". A 40 GB GPU on a node whose taint the pod does not tolerate does not make a memory
 * request's pending charge that of 40 GB. MILLI and MIG charges do not depend on the nodes and
 * are gs_charge_request()'s. The answer changes when gs_filter_gen() moves.
 * @param cls  a filter class id from gs_filter_intern() (or GS_FILTER_DEFAULT, or a pinned id);
 *             an unknown id passes no node (charge 0).
 * @return as gs_charge_request().
 */
int gs_charge_request_class(const struct gs_cluster *c, const struct gs_pod_req *req, uint32_t cls,
                            double *gpus);

/**
 * A charge in GPUs as integer milli-GPU for the quota books, rounded down, so that rounding
 * never takes the charges of the pods on one GPU above what their shares sum to (seven 1g of 7
 * are 7 x 142 = 994, not 1001).
 */
int64_t gs_charge_milli(double gpus);

/**
 * The time a half-open interval [start_ms, end_ms) spends inside [from_ms, to_ms), in ms:
 * a pod spanning a report's period boundary counts only its inside part.
 * @return the overlap, >= 0 (0 when they do not meet or an interval is empty).
 */
int64_t gs_charge_overlap_ms(int64_t start_ms, int64_t end_ms, int64_t from_ms, int64_t to_ms);

/**
 * GPU-hours charged for holding `num_gpu` GPUs with the same grant on each for `held_ms`:
 * num_gpu x gs_charge_share() x held_ms / 3,600,000.
 * @param held_ms    time held, ms, >= 0 (see gs_charge_overlap_ms()).
 * @param gpu_hours  receives the charge, GPU-hours.
 * @return GS_OK; GS_EINVAL for a bad grant (as gs_charge_share()), num_gpu above
 *         GS_NODE_GPUS_MAX or a negative time; *gpu_hours is then 0.
 */
int gs_charge_gpu_hours(const struct gs_charge_grant *g, uint32_t num_gpu, int64_t held_ms,
                        double *gpu_hours);

#endif /* GPUSCHED_CHARGE_H */
