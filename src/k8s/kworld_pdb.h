/*
 * Internal to the Kubernetes translation (kworld*.c): policy/v1 PodDisruptionBudgets read into
 * the tenancy engine's disruption budgets (tenant.h, gs_engine_add_budget()), and which budgets
 * cover each pod. A budget covers the pods of its namespace that its spec.selector matches
 * (matchLabels and matchExpressions ANDed), with kube-scheduler's reading for preemption
 * (filterPodsWithPDBViolation): a nil or empty selector matches nothing, and a pod without
 * labels is covered by none. Its allowance is status.disruptionsAllowed (0 while the disruption
 * controller has not written one, so a new budget protects at once, as in kube-scheduler).
 */
#ifndef GPUSCHED_K8S_KWORLD_PDB_H
#define GPUSCHED_K8S_KWORLD_PDB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/kworld.h"
#include "gpusched/tenant.h"

/** The budgets and the pods they may cover. Zeroed, then gs__kpdb_init(). */
struct gs__kpdbs {
    json_t *pdbs; /**< "ns/name" -> {"ns", "sel" (the selector, a copy), "dis" (a copy of
                       status.disruptedPods), "id" (budget id)} */
    json_t *pods; /**< "ns/name" -> {"ns", "name", "labels", "h" (gs_engine_pod_handle())}, pods
                       in the engine */
};

/** @return GS_OK; GS_ENOMEM. */
int gs__kpdb_init(struct gs__kpdbs *s);

/** Frees what s holds; a zeroed s is a no-op. */
void gs__kpdb_fini(struct gs__kpdbs *s);

/**
 * Applies one PodDisruptionBudget change: creates the engine's budget (or finds it again by
 * "ns/name" after a delete), sets its allowance, and when its selector or status.disruptedPods
 * changed (or it came or went) gives every pod of its namespace in the engine its budgets again.
 * @param e    the engine (after the first cycle); borrowed.
 * @param obj  the object; borrowed.
 * @param err  on GS_EINVAL: "PodDisruptionBudget ns/name: FIELD ..." (cap bytes).
 * @return GS_OK; GS_EINVAL a missing name, a selector, allowance or disruptedPods that cannot be
 *         read (nothing changed); GS_ENOMEM.
 */
int gs__kpdb_apply(struct gs__kpdbs *s, struct gs_engine *e, enum gs_kchange change,
                   const json_t *obj, char *err, size_t cap);

/**
 * The budgets covering pod ns/name with metadata.labels `labels` (NULL: none): their ids in
 * out[0..), the rest 0; beyond GS_POD_BUDGETS_MAX the first ones in the order the budgets
 * arrived. A budget listing the pod in status.disruptedPods (its eviction admitted, the pod not
 * gone yet) does not cover it, as kube-scheduler skips it. `name` may be NULL (not checked).
 * @return how many budgets match (may exceed GS_POD_BUDGETS_MAX).
 */
uint32_t gs__kpdb_match(const struct gs__kpdbs *s, const char *ns, const char *name,
                        const json_t *labels, uint32_t out[GS_POD_BUDGETS_MAX]);

/**
 * Records a pod the engine holds (engine id `pod`) under key "ns/name" with its labels, so that
 * budget changes reach it, and gives it its budgets now (a pod entering the engine, or one whose
 * labels changed). Replaces what was recorded under key. Entries of pods the engine forgot are
 * dropped when next met.
 * @param labels  its metadata.labels (NULL: none); a reference is kept.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__kpdb_track(struct gs__kpdbs *s, struct gs_engine *e, const char *key, const char *ns,
                   const json_t *labels, uint32_t pod);

/** Forgets the pod recorded under key (it ended). Unknown keys: a no-op. */
void gs__kpdb_untrack(struct gs__kpdbs *s, const char *key);

#endif /* GPUSCHED_K8S_KWORLD_PDB_H */
