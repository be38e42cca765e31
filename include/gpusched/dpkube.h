/*
 * The node agent's Kubernetes side: what it publishes on its Node and how it learns which GPUs
 * the scheduler chose for the pod kubelet is admitting.
 *
 * - gs_dp_inventory_json: the node's GPUs as the Node annotation `gpusched.io/gpus` (schema:
 *   docs/schemas/node-gpus.schema.json; the scheduler reads it in src/k8s/kworld_inventory.c).
 *   Pure.
 * - gs_dp_assign_*: a table of the pods bound to this node with their assignment (pod
 *   annotation `gpusched.io/assigned-gpus`, written by `gpusched scheduler` in the Binding).
 *   Kubelet's device-plugin calls carry no pod name, so the agent does what HAMi's device
 *   plugin does (pkg/device-plugin/nvidiadevice: GetPendingPod): the call is for the oldest
 *   bound pod not yet allocated whose assignment asks for that resource and count. Pure; the
 *   agent (devplugin_kube.c) fills it from a watch and locks it.
 *
 * The agent uses the Kubernetes API client (gpusched_k8s); the client never uses the agent.
 */
#ifndef GPUSCHED_DPKUBE_H
#define GPUSCHED_DPKUBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpusched/cluster.h" /* struct gs_gpu_mode, the core's model of a GPU's mode */
#include "gpusched/devplugin.h"
#include "gpusched/gpu.h"
#include "gpusched/health.h"
#include "gpusched/kmigplan.h"

/** The Node annotation holding the agent's inventory. */
#define GS_DP_INVENTORY_ANNOTATION "gpusched.io/gpus"
/** The pod annotation holding the scheduler's GPU choice. */
#define GS_DP_ASSIGNED_ANNOTATION "gpusched.io/assigned-gpus"
/**
 * The pod annotation the agent writes after kubelet's Allocate: how many of the pod's assigned
 * GPUs were handed out ("2"), so an agent that restarts never claims them again.
 */
#define GS_DP_ALLOCATED_ANNOTATION "gpusched.io/allocated-gpus"
/** Version written in the inventory's "version" member. */
#define GS_DP_INVENTORY_VERSION 1

/**
 * GPU g of the agent's model in the core's terms (struct gs_gpu_mode, cluster.h), the one
 * model of a GPU's mode that the inventory is written from and the scheduler places on: MIG
 * when the model advertises MIG devices of the GPU, the layout built by the core's
 * gs_mig_mode_build() from the GPU's MIG devices (profiles in the core's geometry table for
 * the GPU's model, gs_mig_model_find() of its NVML name); else fractions (MILLI) when it
 * advertises gpusched.io/gpu-slice slices of it; else TIMESLICE with its replica count when it
 * advertises more than one replica of it; else WHOLE.
 * @param m     the model (borrowed).
 * @param g     GPU index, < m->n_gpus.
 * @param mode  receives the mode. A MIG GPU whose layout the core cannot place on (model not
 *              in the table, unknown profile or start, a layout the hardware does not allow)
 *              has sharing MIG and mig_count 0, and `why` says what the scheduler will say.
 * @param why   receives "" or that reason, cut to cap bytes; may be NULL.
 * @return GS_OK; GS_EINVAL for NULL arguments or g out of range.
 */
int gs_dp_gpu_mode(const struct gs_dp_model *m, uint32_t g, struct gs_gpu_mode *mode, char *why,
                   size_t cap);

/**
 * Builds the inventory document: {"version":1,"gpus":[{"index","uuid","model","mem_mib",
 * "mode","health","numa_node","nvlink_peers","replicas","resources","mig"}...]}, one entry per
 * GPU in index order. mode is gs_gpu_sharing_name() of gs_dp_gpu_mode()'s sharing: "mig",
 * "fractions", "replicas" or "whole"; replicas is the
 * replica count of a time-sliced GPU (1 otherwise); resources the advertised resources with a
 * device on the GPU; mig every MIG device of the GPU with profile, start (null unknown), uuid,
 * mem_mib and replicas; health "Healthy" or "Unhealthy" from the health array.
 * @param m       the model (borrowed).
 * @param health  per GPU index, m->n_gpus entries.
 * @param out     receives compact JSON text, malloc'd, NUL-terminated; the caller frees it.
 * @return GS_OK; GS_EINVAL (NULL arguments); GS_ENOMEM.
 */
int gs_dp_inventory_json(const struct gs_dp_model *m, const enum gs_health_state *health,
                         char **out);

/* ---- the assignment table -------------------------------------------------------------- */

/** The pods bound to one node. Opaque; not thread-safe (the agent locks it). */
struct gs_dp_assign;

/** @return GS_OK; GS_ENOMEM. */
int gs_dp_assign_new(struct gs_dp_assign **out);

/** NULL is a no-op. */
void gs_dp_assign_free(struct gs_dp_assign *t);

/** Forgets every pod (before a relist delivers them again); allocation marks survive by uid. */
void gs_dp_assign_clear(struct gs_dp_assign *t);

/**
 * Adds or replaces a pod from its object (ADDED or MODIFIED of a watch). Only pods that are
 * Pending (status.phase "Pending" or none, no deletionTimestamp) and carry an assignment can
 * be claimed; others are
 * kept out of the table. A gpusched.io/allocated-gpus annotation of N (decimal) counts N of
 * its GPUs as handed out already (what an earlier run of the agent wrote). An assignment that is
 * not JSON {"gpus":[{"index":N,...}]} with indices 0..63 is ignored (the pod cannot be claimed) and
 * reported through `why`; so is one whose entry has a "milli" outside 0..1000, a "mem_mib" that
 * is not a positive integer (at most 2^40), or a "mig" without a non-empty "profile" (under 32
 * bytes) and a "start" slot 0..7 or null (any instance of the profile on that GPU, -1 in the
 * claim; docs/schemas/assigned-gpus.schema.json). These members are
 * optional here; what an entry has is copied into the claims made of it.
 * @param pod   a Pod object (borrowed).
 * @param why   receives a sentence when the pod's assignment is unreadable ("" otherwise);
 *              cap bytes; may be NULL.
 * @return GS_OK; GS_EINVAL (not a Pod with metadata.uid of at most 63 bytes, namespace and
 *         name; the table is unchanged); GS_ENOMEM.
 */
int gs_dp_assign_update(struct gs_dp_assign *t, const json_t *pod, char *why, size_t cap);

/** Removes a pod by uid (DELETED). Unknown uids are ignored. */
void gs_dp_assign_remove(struct gs_dp_assign *t, const char *uid);

/**
 * Finds the pod a container request of `count` devices of `resource` is for: among pods not
 * yet allocated, the oldest (metadata.creationTimestamp, then order of arrival in the table)
 * that has a container or init container whose limit (else request) of `resource` is `count`
 * and at least `count` assigned GPUs not yet handed out; the claim is the next `count` of
 * them in the assignment's order, each with its milli, mem_mib and MIG instance (a pod asking
 * `nvidia.com/mig-1g.18gb: 2` claims two entries, which may be on one GPU).
 * @return GS_OK (out filled); GS_ENOENT (no such pod); GS_EINVAL (NULL arguments, count 0).
 */
int gs_dp_assign_match(const struct gs_dp_assign *t, const char *resource, uint32_t count,
                       struct gs_dp_claim *out);

/**
 * Records that kubelet allocated a claim's container: its GPUs are handed out, and the pod is
 * allocated once all its assigned GPUs are (it is then never claimed again, even after a
 * relist).
 * @param given  receives the pod's GPUs handed out so far (for gpusched.io/allocated-gpus);
 *               may be NULL.
 * @return GS_OK; GS_ENOENT (unknown uid); GS_ENOMEM.
 */
int gs_dp_assign_consume(struct gs_dp_assign *t, const char *uid, uint32_t count, uint32_t *given);

/** Pods in the table (claimable or not), for logs and tests. */
uint32_t gs_dp_assign_count(const struct gs_dp_assign *t);

/* ---- dynamic MIG: carrying out a plan ----------------------------------------------------- */

/**
 * Whether MIG device `mig` of GPU `gpu` is held by a container; on true `who` receives who
 * holds it (cap bytes).
 */
typedef bool (*gs_dp_mig_used_fn)(void *ctx, uint32_t gpu, const struct gs_gpu_mig *mig, char *who,
                                  size_t cap);

/**
 * Carries out a re-partition plan (kmigplan.h) on the backend: checks it all first, then
 * destroys the instances in the plan's order, then creates the new ones. Checked before any
 * change: the GPU exists and is in MIG mode, its UUID is the plan's (when the plan names one),
 * its model is in the core's MIG table, every instance to destroy exists (profile at that start)
 * and is free (`used` says no), and the layout after the plan passes gs_mig_layout_check().
 * @param used  may be NULL (nothing is held).
 * @param why   receives on failure one sentence ("GPU 0: instance 1g.10gb at slice 4
 *              (MIG-...) is in use by pod uid U"); cap bytes.
 * @return GS_OK (done); GS_EINVAL (refused, nothing changed); GS_EIO (an operation failed
 *         part way: the layout is what the backend now reports, `why` names the step).
 */
int gs_dp_mig_execute(struct gs_gpu_backend *b, const struct gs_kmig_plan *p,
                      gs_dp_mig_used_fn used, void *ctx, char *why, size_t cap);

#endif /* GPUSCHED_DPKUBE_H */
