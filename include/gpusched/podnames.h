/*
 * The names of the pods bound to this node, by UID (issue 9: a pod's GPU values carry
 * dcgm-exporter's pod, namespace and container labels).
 *
 * A process's cgroup tells only its pod's UID and its container's runtime ID (podmap.h). The
 * agent's Kubernetes thread watches every pod bound to its node (fieldSelector spec.nodeName)
 * and keeps this table from the watch: ADDED and MODIFIED add or replace a pod, DELETED
 * removes it, a relist empties it first. Per pod it keeps the namespace, the name, and each
 * container (init and ephemeral ones included) whose status names a runtime ID
 * (status.containerStatuses[].containerID, "containerd://<id>"), so that a cgroup's container
 * ID gives the container's name.
 *
 * Bounded: at most max_pods pods (a pod past it is not added and the update says so) and
 * GS_PODNAMES_CONTAINERS_MAX containers per pod (the rest are left out); each pod costs one
 * allocation sized to its containers. Lookups hash the UID. Pure (no I/O, no clock) and not
 * thread-safe: the agent holds its Kubernetes mutex around every call.
 */
#ifndef GPUSCHED_PODNAMES_H
#define GPUSCHED_PODNAMES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpusched/exporter.h"

/** Default most pods the agent keeps (kubelet's maxPods is 110 by default, 250 at most in
 *  most managed clusters). */
#define GS_PODNAMES_DEFAULT_MAX 4096
/** Most containers kept per pod (init, ephemeral and app containers together). */
#define GS_PODNAMES_CONTAINERS_MAX 64

/** The table. Opaque. */
struct gs_podnames;

/**
 * Creates an empty table.
 * @param max_pods  most pods kept (1..1,000,000); 0 means GS_PODNAMES_DEFAULT_MAX.
 * @return GS_OK; GS_ENOMEM; GS_EINVAL (out NULL, max_pods too large).
 */
int gs_podnames_new(uint32_t max_pods, struct gs_podnames **out);

/** Frees the table. NULL is a no-op. */
void gs_podnames_free(struct gs_podnames *t);

/** Forgets every pod (a relist delivers them again). */
void gs_podnames_clear(struct gs_podnames *t);

/**
 * Adds or replaces a pod from its object (a watch's ADDED or MODIFIED). Containers whose
 * status has no containerID (not started yet), or an ID that does not fit
 * (GS_PODMAP_CID_LEN) or a name of 64 bytes or more, are left out; so is a status entry that
 * is not an object.
 * @param pod  a Pod object (borrowed).
 * @return GS_OK; GS_EINVAL (t or pod NULL, or no metadata.uid of 1..63 bytes, namespace of
 *         1..63 and name of 1..253: the table is unchanged); GS_ELIMIT (a new pod while the
 *         table holds max_pods: not added; a pod already there is still replaced);
 *         GS_ENOMEM (the table is unchanged).
 */
int gs_podnames_update(struct gs_podnames *t, const json_t *pod);

/** Removes a pod by UID (DELETED). Unknown UIDs and NULL are ignored. */
void gs_podnames_remove(struct gs_podnames *t, const char *uid);

/** @return the number of pods held. */
uint32_t gs_podnames_count(const struct gs_podnames *t);

/**
 * The names of pod uid: its namespace and name, and the name of the container whose runtime
 * ID is container_id ("" when container_id is "" or names no container of the pod).
 * @param ns         receives the namespace; 64 bytes.
 * @param name       receives the pod name; 254 bytes.
 * @param container  receives the container name or ""; 64 bytes.
 * @return true when the pod is known (outputs written); false otherwise (outputs untouched).
 */
bool gs_podnames_find(const struct gs_podnames *t, const char *uid, const char *container_id,
                      char ns[64], char name[254], char container[64]);

/**
 * Names the per-pod values of a snapshot: each value whose pod_uid the table knows gets its
 * namespace_name, pod and container (gs_podnames_find); the others are left as they are
 * (named by their UID only).
 * @return the number of values named.
 */
uint32_t gs_podnames_fill(const struct gs_podnames *t, struct gs_exporter_podval *v, uint32_t n);

#endif /* GPUSCHED_PODNAMES_H */
