/*
 * Internal to the Kubernetes translation: the world's own state (struct gs_kworld, its pods) and
 * the helpers its files share, so that kworld.c (objects, pods, cycles) and kworld_node.c (Node
 * objects into the cluster) read one definition. Not for callers: they use gpusched/kworld.h.
 */
#ifndef GPUSCHED_K8S_KWORLD_INT_H
#define GPUSCHED_K8S_KWORLD_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpusched/kworld.h"
#include "gpusched/frag.h"
#include "gpusched/tenant.h"
#include "kjson.h"
#include "kworld_inv.h"
#include "kworld_pdb.h"
#include "kworld_queue.h"
#include "kworld_xres.h"

#define NO_ID UINT32_MAX
#define WL_SAMPLES 4096u /* GPU pod requests the learned workload is built from */
#define GPU_RES "nvidia.com/gpu"
#define GPU_SHARED_RES "nvidia.com/gpu.shared"
#define NO_CLASS "gpusched-no-priority-class"

/* One pod of ours or another scheduler's bound pod, by ns/name. */
struct kpod {
    char *key, *ns, *name, *uid;
    uint32_t engine_id; /* NO_ID while parked or staged */
    char *park;         /* why it waits outside the engine; NULL when in it */
    json_t *obj;        /* kept while parked, to try again */
    bool ended;
    bool ours;
};

struct gs_kworld {
    char *sched_name, *default_queue, *policy;
    struct gs_kworld_config cfg;
    struct gs_cluster *c;
    struct gs_engine *e;
    /* FGD's target workload, learned from the GPU pods seen (Weng et al., ATC '23, take it from
     * the trace; a live cluster only knows its arrivals): the last WL_SAMPLES requests, and the
     * workload rebuilt from them each time their count doubles (then every WL_SAMPLES). */
    struct gs_workload wls[2]; /* the engine's is wls[wl_cur] */
    int wl_cur;
    struct gs_pod_req *wl_seen; /* WL_SAMPLES entries, a ring */
    uint64_t wl_n;              /* GPU pods seen so far */
    uint64_t wl_next;           /* wl_n at which the workload is rebuilt next */
    uint32_t wl_builds;         /* rebuilds after the first */
    bool started;
    json_t *staged;    /* objects applied before the first cycle, in order (null: deleted) */
    json_t *staged_at; /* "kind\x1fns\x1fname" -> index in staged: O(1) per applied object */
    json_t *pod_keys;  /* "ns/name" -> index in pods */
    struct kpod *pods;
    uint32_t npods, cappods;
    uint32_t *of_engine; /* engine pod id -> index in pods */
    uint32_t cap_of_engine;
    json_t *queues;       /* name -> engine queue id */
    json_t *pclasses;     /* PriorityClass name -> {"value", "default", "never", and
                             "preemptible" when labelled gpusched.io/preemptible} */
    json_t *pc_ids;       /* engine class name -> id */
    json_t *gangs;        /* "ns/name" -> engine gang id */
    json_t *podgroups;    /* "ns/name" -> {"min", "timeout_s", "grace_s"} */
    json_t *avoid;        /* "ns/name" -> array of node names its placement must avoid */
    json_t *mode_due;     /* node name -> its Node, while a GPU's new mode waits for pods to go */
    struct gs__kinv inv;  /* the node agents' inventories: UUIDs, warnings given */
    struct gs__kpdbs pdb; /* PodDisruptionBudgets and the pods they may cover */
    /* Which Queue kind made each queue; Queue edits and deletes (kworld_queue.h). */
    struct gs__kqueues kq;
    uint32_t changes;
    uint32_t entering; /* index in pods of the pod being submitted or adopted, or NO_ID */
    char *err;         /* where messages go: the caller's buffer, or scratch */
    size_t errcap;
    char scratch[256];
};

/* A label or annotation value of an object, or NULL. */
static inline const char *gs__kmeta_kv(const json_t *obj, const char *map, const char *key)
{
    return jstr(jpath(json_object_get(obj, "metadata"), map, NULL), key);
}

/* Writes a message for the caller and evaluates to GS_EINVAL. */
#define gs__kfail(w, ...) ((void)snprintf((w)->err, (w)->errcap, __VA_ARGS__), GS_EINVAL)

/**
 * Applies a Node object (kworld_node.c): adds it to the cluster, or updates its capacity,
 * labels, taints, schedulability, GPU health and modes, or removes it (its pods are the
 * engine's to evict). @return GS_OK; GS_EINVAL with a message in w->err; GS_ENOMEM.
 */
int gs__kworld_apply_node(struct gs_kworld *w, enum gs_kchange change, const json_t *obj,
                          int64_t now_ms);

#endif /* GPUSCHED_K8S_KWORLD_INT_H */
