/*
 * Internal to the Kubernetes translation (kworld*.c): other resources (cluster.h, GS_XRES_MAX)
 * read from Node and Pod objects. Every resource name a pod requests or a node offers is one of
 * them except those the translation reads itself: `cpu`, `memory`, `pods`, and the GPU names
 * (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `nvidia.com/mig-*`, HAMi's `nvidia.com/gpumem`,
 * `nvidia.com/gpumem-percentage`, `nvidia.com/gpucores`, and the agent's `gpusched.io/gpu-slice`,
 * which stands for the fraction the pod asks). kube-scheduler's NodeResourcesFit checks them all
 * against status.allocatable; so does the core.
 */
#ifndef GPUSCHED_K8S_KWORLD_XRES_H
#define GPUSCHED_K8S_KWORLD_XRES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpusched/cluster.h"

/**
 * A quantity field of an object, a JSON string ("500m", "16Gi") or number, in units of `unit`
 * (1e-3 for milli-cores, 1048576 for MiB, 1 for counts and bytes), rounded up when `up`.
 * @return 0; -1 when it is not a non-negative quantity.
 */
int gs__kquantity_json(const json_t *v, double unit, bool up, int64_t *out);

/**
 * What a pod spec asks of resource `res`, as the API defines a pod's request: max(sum over
 * containers, largest init container) plus overhead; a container without a request of it takes
 * its limit. Rounded up to `unit`s (see gs__kquantity_json()).
 * @return 0; -1 when a value is not a quantity or the sum overflows.
 */
int gs__kpod_request(const json_t *spec, const char *res, double unit, int64_t *out);

/**
 * gs__kpod_request() that says why it failed.
 * @param why  on -1 receives the field and value at fault ("spec.containers[0].resources.limits.
 *             memory is \"12Qi\", not a quantity") or the sum that overflows; cap bytes; may be
 *             NULL (then as gs__kpod_request()).
 * @return 0; -1.
 */
int gs__kpod_request_why(const json_t *spec, const char *res, double unit, int64_t *out, char *why,
                         size_t cap);

/** Whether a resource name is read by the translation itself (not an other resource). */
bool gs__kxres_own(const char *name);

/**
 * Sets node `node`'s other resources from its status.allocatable map (each value a Kubernetes
 * quantity, rounded down to the base unit: a count, or bytes).
 * @param alloc  the allocatable (or capacity) object; borrowed; NULL means none.
 * @param name   the node's name, for messages.
 * @param err    on GS_EINVAL: "node N: status.allocatable.R is \"V\", not a quantity"; errcap
 * bytes.
 * @param warn   set (warncap bytes, else "") when resources beyond GS_NODE_XRES_MAX or the
 *               cluster's GS_XRES_MAX names were left out.
 * @return GS_OK; GS_EINVAL; GS_ENOMEM.
 */
int gs__kxres_node(struct gs_cluster *c, uint32_t node, const json_t *alloc, const char *name,
                   char *err, size_t errcap, char *warn, size_t warncap);

/**
 * Adds to `req` the other resources a pod spec asks: per name, max(sum over containers, largest
 * init container) plus overhead, a missing request taking the limit; rounded up.
 * @param spec    the pod's spec; borrowed.
 * @param reason  on 1: why the pod cannot be placed ("asks more than 4 other resources", "a
 *                request for R is not a quantity", ...); cap bytes.
 * @return 0; 1 (reason written); GS_ENOMEM.
 */
int gs__kxres_pod(struct gs_cluster *c, const json_t *spec, struct gs_pod_req *req, char *reason,
                  size_t cap);

#endif /* GPUSCHED_K8S_KWORLD_XRES_H */
