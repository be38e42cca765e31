/*
 * Internal to the Kubernetes translation (kworld*.c): a Pod's GPU ask into a core request of
 * any kind (whole GPUs, milli or memory fractions, time-sliced slots, MIG instances), and the
 * assignment annotation gpusched.io/assigned-gpus (docs/schemas/assigned-gpus.schema.json)
 * back into the placement a running pod holds. Not part of include/gpusched/kworld.h.
 */
#ifndef GPUSCHED_K8S_KWORLD_GPUS_H
#define GPUSCHED_K8S_KWORLD_GPUS_H

#include <jansson.h>
#include <stddef.h>

#include "gpusched/cluster.h"

/**
 * Reads what a Pod asks of GPUs into `rq`'s GPU members (num_gpu, gpu_milli, gpu_mem_mib,
 * gpu_mem_pct, timeslice_slots, mig_count, mig_profile); the other members are left alone.
 * Vocabulary: `nvidia.com/gpu: N` (whole GPUs); KAI annotations `gpu-fraction` (share, 0..1),
 * `gpu-memory` (MiB) and `gpu-fraction-num-devices` (N GPUs, default 1); HAMi resources
 * `nvidia.com/gpumem` (MiB per GPU), `nvidia.com/gpumem-percentage` (percent per GPU) and
 * `nvidia.com/gpucores` (percent of compute) beside `nvidia.com/gpu: N`;
 * `nvidia.com/mig-<profile>: N` (one profile per pod, N instances, two may share a card);
 * `nvidia.com/gpu.shared: N` (N time-sliced slots on distinct GPUs). Whether the mix is a
 * request is decided by one call of gs_pod_req_validate().
 * @param obj     the Pod (borrowed).
 * @param spec    its spec (borrowed).
 * @param reason  receives why the ask is not a request; cap bytes.
 * @return 0 read; 1 not a request (reason filled). Never crashes on any input.
 */
int gs__kworld_pod_gpus(const json_t *obj, const json_t *spec, struct gs_pod_req *rq, char *reason,
                        size_t cap);

/**
 * Reads annotation gpusched.io/assigned-gpus of a bound Pod into `pl` (whose node is set by
 * the caller): per GPU `index` with `milli` (MILLI), `mem_mib` (MEMORY), one slot each
 * (TIMESLICE), or `mig: {"profile", "start"}` (MIG, the profile looked up in the model of GPU
 * `index` of node `node` of `c`; a null `start`, written for a node whose MIG was read from
 * capacity, takes the first instance of the profile on that GPU that no pod holds). When the
 * annotation is missing, malformed or does not match the request's count, `pl` keeps no GPUs
 * ("GPUs unknown": the core charges the first that fit, gs_engine_adopt()).
 */
void gs__kworld_assigned(const json_t *obj, const struct gs_pod_req *rq, const struct gs_cluster *c,
                         uint32_t node, struct gs_placement *pl);

#endif /* GPUSCHED_K8S_KWORLD_GPUS_H */
