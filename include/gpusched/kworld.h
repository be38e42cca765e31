/*
 * Kubernetes objects into the core: the one translation from Node, Pod, PriorityClass, Queue and
 * PodGroup objects (as the API server sends them, jansson values) to the cluster and tenancy
 * engine, used by `gpusched scheduler` (fed by its watches) and `gpusched whatif` (fed by a
 * cluster dump and a timeline). Both drive it the same way: objects arrive as ADDED, MODIFIED
 * and DELETED, scheduling cycles run, and decisions come back as events naming pods and nodes.
 *
 * What users write, and what it becomes:
 *  - Node: status.allocatable cpu, memory, pods; `nvidia.com/gpu` capacity N is N whole GPUs of
 *    the model in label `nvidia.com/gpu.product` with memory `nvidia.com/gpu.memory` (MiB);
 *    allocatable below capacity marks the highest GPU indices unhealthy;
 *    `nvidia.com/mig-<profile>` capacities (the device plugin's mixed strategy) are MIG
 *    instances, packed onto the fewest GPUs after the N whose layouts hold exactly those
 *    counts, and with label `nvidia.com/mig.strategy: single` the N are MIG devices, each
 *    placed whole (src/k8s/kworld_capmig.h; a count no layout holds is a warning naming node
 *    and profile, and the node keeps its N GPUs); labels, spec.taints, spec.unschedulable.
 *    When the node agent's inventory (annotation `gpusched.io/gpus`,
 *    docs/schemas/node-gpus.schema.json) is there it is preferred: its GPUs by index, the
 *    model of GPU 0, the smallest memory, UUIDs (BIND events carry them), and a GPU is usable
 *    only when Healthy in mode whole or replicas; a bad one is a warning naming the node and
 *    field (on_warning), and the node is read from capacity.
 *  - Pod: requests (max of the containers' sum and the largest init container, plus overhead;
 *    a limit stands in for a missing request, as the API defaults it); `nvidia.com/gpu: N`
 *    whole GPUs; a fraction as KAI writes it (annotation `gpu-fraction: "0.5"`) or as HAMi does
 *    (`nvidia.com/gpucores: 50` with one GPU); nodeSelector, node affinity, tolerations;
 *    spec.priority, else its PriorityClass, else the globalDefault class, else 0;
 *    spec.preemptionPolicy (else its class's): Never pods are ordered by priority but never
 *    preempt (they still reclaim, tenant.h gs_tpod_spec.preempt_never); the queue from
 *    label `gpusched.io/queue`, `kai.scheduler/queue` or `kueue.x-k8s.io/queue-name`, else the
 *    default queue; a gang from label `scheduling.x-k8s.io/pod-group` or annotation
 *    `scheduling.k8s.io/group-name`. Pods with spec.nodeName are running there (ours charged
 *    to their queue, with the GPUs of annotation `gpusched.io/assigned-gpus` when present;
 *    other schedulers' pods hold capacity only); Succeeded and Failed pods hold nothing.
 *  - Queue (`scheduling.gpusched.io/v1alpha1`, and KAI's `scheduling.run.ai/v2` with its
 *    units): spec.parentQueue, spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight},
 *    -1 unlimited; gpu in GPUs (fractions allowed), cpu in cores, memory a quantity (KAI: cpu
 *    in millicores, memory in MB); and spec.resources.gpu.byModel.<model>.{quota,limit} in
 *    GPUs, per GPU model (the nodes' nvidia.com/gpu.product value; gs_queue_spec.by_model;
 *    KAI's Queue has no such field); the other fields of a KAI Queue's spec are named in one
 *    warning (on_warning) when the queue is created.
 *  - PriorityClass: value, globalDefault, preemptionPolicy; label `gpusched.io/preemptible`
 *    ("false": never a victim; any other value: preemptible); without the label a class is
 *    preemptible, or with kai_preemptible iff its value is below kai_preemptible_threshold.
 *  - PodGroup (`scheduling.x-k8s.io`, Volcano's `scheduling.volcano.sh`): spec.minMember,
 *    spec.scheduleTimeoutSeconds.
 *  - PodDisruptionBudget (`policy/v1`): spec.selector (matchLabels, matchExpressions) over the
 *    labels of the pods of its namespace (less those in status.disruptedPods, whose eviction
 *    was admitted), status.disruptionsAllowed (0 until written); the
 *    engine's disruption budgets (tenant.h), which preemption prefers not to exceed. As in
 *    kube-scheduler's preemption, an empty selector covers no pod; at most GS_POD_BUDGETS_MAX
 *    budgets count per pod.
 * Pods that ask for what the core does not place yet (GPU memory fractions, MIG profiles, pod
 * affinity, topology spread) and pods with schedulingGates wait with a reason that says so.
 *
 * Objects are held until the first cycle (gs_kworld_cycle()), a later change of the same object
 * replacing the one held, so the order of a dump or of several watches does not matter: then
 * queues, classes and gangs are created before pods, and FGD's target workload is built from the
 * pods known at that moment. Later objects apply at once, incrementally: a Queue that comes
 * again (MODIFIED, or a relist's ADDED) updates its queue in place and evicts nothing (a lowered
 * limit stops new placements while the queue is above it); a changed spec.parentQueue is a
 * warning (on_warning) and the queue keeps its parent; a DELETED Queue's pending pods wait with
 * "queue NAME does not exist" and its running pods stay charged until they end, until a Queue of
 * that name comes again; a Queue of another API group than the one that made a queue of its
 * name is refused with a warning. A PodGroup edited before its gang starts sets its minimum
 * (after: a warning). src/k8s/kworld_queue.h has the details.
 *
 * Single-threaded; the callback runs inside gs_kworld_apply() and gs_kworld_cycle().
 */
#ifndef GPUSCHED_KWORLD_H
#define GPUSCHED_KWORLD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/tenant.h"

/** The scheduler name pods write in spec.schedulerName for gpusched. */
#define GS_KWORLD_SCHEDULER "gpusched"

/** What happened to a pod. */
enum gs_kevent_kind {
    GS_KEV_BIND = 0,    /**< place it (or, with adopted, it was running already) */
    GS_KEV_EVICT = 1,   /**< evict it: reason "preemption", "reclaim", "gang" or "node-lost" */
    GS_KEV_FINISH = 2,  /**< it finished */
    GS_KEV_DELETE = 3,  /**< it was deleted */
    GS_KEV_PENDING = 4, /**< it waits; reason says why (once per change) */
};

/** One GPU of a decision. */
struct gs_kgpu {
    uint32_t index;          /**< device index on the node, 0-based */
    int32_t milli;           /**< milli-GPU taken on it: 1000 whole, 1..999 a compute share;
                                  0 for a memory-only share, a time-sliced slot or a MIG
                                  instance */
    const char *uuid;        /**< its UUID from the node agent's inventory; NULL when unknown */
    int64_t mem_mib;         /**< device memory taken on it for a memory request, MiB; 0 for
                                  other kinds */
    const char *mig_profile; /**< MIG: the instance's profile, "3g.71gb" (static storage);
                                  NULL for other kinds. One entry per instance, so a GPU with
                                  two of the pod's instances appears twice */
    int32_t mig_start;       /**< MIG: the instance's start slot; -1 for other kinds, and
                                  on a node whose MIG was read from capacity (no inventory:
                                  the start there is the core's reconstruction, unknown to the
                                  node, whose device plugin picks the instance) */
};

/** One MIG instance by profile and start, as a plan or an inventory names it. */
struct gs_kmig_slot {
    const char *profile; /**< "1g.10gb" (borrowed) */
    int32_t start;       /**< start slot; -1 when the inventory gave none */
};

/**
 * Dynamic MIG (gs_kworld_config.dynamic_mig): the re-partition a BIND needs before the pod can
 * start. The engine has already placed the pod on the planned layout (it holds the new
 * instance); the node still shows the old one until its agent carries the plan out.
 */
struct gs_kmig_change {
    uint32_t gpu;                                      /**< the GPU's index on the node */
    bool known;                                        /**< false: the node has no agent
                                                            inventory, so the old layout's
                                                            starts are unknown and no plan can be
                                                            written; the lists are then empty */
    uint32_t n_destroy, n_create, n_layout;            /**< entries used */
    struct gs_kmig_slot destroy[GS_MIG_INSTANCES_MAX]; /**< in the inventory, not planned:
                                                            ascending start */
    struct gs_kmig_slot create[GS_MIG_INSTANCES_MAX];  /**< planned, not in the inventory:
                                                            ascending start */
    struct gs_kmig_slot layout[GS_MIG_INSTANCES_MAX];  /**< the whole planned layout, ascending
                                                            start */
};

/** One decision, valid during the callback. Strings borrowed. */
struct gs_kevent {
    enum gs_kevent_kind kind;
    const char *ns, *name, *uid; /**< the pod */
    const char *node;            /**< BIND/EVICT: the node; else NULL */
    uint32_t n_gpus;             /**< entries in gpus */
    struct gs_kgpu gpus[GS_NODE_GPUS_MAX];
    bool adopted;       /**< BIND of a pod that was already running */
    const char *reason; /**< EVICT: the reason word; PENDING: the message; else NULL */
    const char *by;     /**< EVICT: "ns/name" of the pod that caused it, or NULL */
    const char *by_uid; /**< EVICT: metadata.uid of that pod, or NULL with by */
    const char *detail; /**< EVICT by preemption or reclaim: why (the engine's sentence,
                             gs_event.text); BIND of a pod that evicted others: whom; else
                             NULL. Valid during the callback */
    const char *gang;   /**< BIND: "ns/podgroup" of the pod's gang, or NULL */
    const char *queue;  /**< the name of the pod's queue (its leaf); NULL when the engine has
                             none for it (a pod that is already gone) */
    int64_t now_ms;
    const struct gs_kmig_change *mig_change; /**< BIND (not adopted) whose GPU the engine
                                                  re-partitioned for it (dynamic_mig); else
                                                  NULL */
};

/** Configuration. Borrowed by gs_kworld_new(); strings copied. */
struct gs_kworld_config {
    const char *scheduler_name; /**< pods of this spec.schedulerName are ours; NULL: "gpusched" */
    const char *default_queue;  /**< queue of pods without a queue label; NULL: "default" (made
                                     at the first cycle when no Queue has that name) */
    const char *policy;         /**< placement policy; NULL: "fgd" */
    bool preemption, reclaim, backfill;
    bool kai_preemptible;              /**< KAI-Scheduler's rule for PriorityClasses without the
                                            gpusched.io/preemptible label: preemptible iff the
                                            priority is below kai_preemptible_threshold. false:
                                            every such class is preemptible. The label wins
                                            either way */
    int32_t kai_preemptible_threshold; /**< with kai_preemptible: the first priority value that
                                            is not preemptible (KAI: 100) */
    bool observe;     /**< follow another scheduler's decisions only (`gpusched accountant`): a pod
                           of ours enters the engine when the API server shows it bound (adopted,
                           with its gpusched.io/assigned-gpus), never while it waits, and outside
                           any gang; gs_kworld_cycle() builds the engine and enters parked pods
                           but places, preempts and reclaims nothing. Its events are ADOPT binds,
                           FINISH, DELETE, and EVICT node-lost when a Node goes */
    bool dynamic_mig; /**< the engine's dynamic MIG (tenant.h gs_engine_config.dynamic_mig, with
                           no start delay): a MIG pod that fits no layout as it is may be bound
                           on a GPU re-partitioned for it; its BIND carries mig_change. A GPU
                           that holds pods keeps its layout when its Node's inventory says
                           otherwise (as any mode change waits), so a planned layout is not
                           undone while the pod it is for is held. Off by default */
    void (*on_event)(void *ctx, const struct gs_kevent *ev); /**< may be NULL */
    void (*on_warning)(void *ctx, const char *msg);          /**< a problem that costs nothing but
                                                                  detail (a bad node inventory, read as
                                                                  capacity instead), said once per
                                                                  node and text; may be NULL */
    void *ctx; /**< passed to on_event and on_warning */
};

struct gs_kworld;

/**
 * Creates an empty world. @return GS_OK, GS_ENOENT (unknown policy), GS_ENOMEM.
 */
int gs_kworld_new(const struct gs_kworld_config *cfg, struct gs_kworld **out);

/** Frees a world. NULL is a no-op. */
void gs_kworld_free(struct gs_kworld *w);

/**
 * The target workload the engine scores with (FGD, and the fragmentation measure). At the first
 * cycle it is built from the GPU pods of what was applied before it (one whole GPU when there
 * were none), of every kind (milli, memory, MIG, time-sliced; frag.h); after that from the last
 * 4,096 GPU pods seen, ours and other schedulers' alike,
 * rebuilt at a cycle's start each time their count has doubled since (at least 16), then every
 * 4,096 pods. Weng et al. (USENIX ATC '23) take the workload from the trace; a live cluster
 * knows only what has arrived.
 * @param rebuilds  receives how many times it was rebuilt after the first cycle; may be NULL.
 * @return borrowed, valid until the next gs_kworld_cycle(); NULL before the first cycle.
 */
const struct gs_workload *gs_kworld_workload(const struct gs_kworld *w, uint32_t *rebuilds);

/** Kinds of change, as a watch reports them. */
enum gs_kchange {
    GS_KADDED = 0,
    GS_KMODIFIED = 1,
    GS_KDELETED = 2,
};

/**
 * Applies one object change. Objects of kinds it does not use are ignored (return GS_OK).
 * @param obj   the object (apiVersion, kind, metadata, spec, status); borrowed.
 * @param err   receives a message naming the object and field on GS_EINVAL.
 * @return GS_OK; GS_EINVAL for an object it cannot read, a Queue edit the engine refuses (a
 *         limit below the quota, children's quotas above the parent's) or the delete of a Queue
 *         that child queues still name (the world is unchanged); GS_ENOMEM.
 */
int gs_kworld_apply(struct gs_kworld *w, enum gs_kchange change, const json_t *obj, int64_t now_ms,
                    char *err, size_t cap);

/**
 * Runs one scheduling cycle (the first one builds the engine from what was applied); with
 * gs_kworld_config.observe it only builds the engine and enters parked pods (no placement).
 * @param changes  receives the number of binds and evictions it made; may be NULL.
 * @return GS_OK; GS_EINVAL (objects that cannot be set up, with a message in err); GS_ENOMEM.
 */
int gs_kworld_cycle(struct gs_kworld *w, int64_t now_ms, uint32_t *changes, char *err, size_t cap);

/** Marks pod ns/name finished (Succeeded). @return GS_OK; GS_ENOENT; GS_EINVAL not running. */
int gs_kworld_finish_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms);

/** Deletes pod ns/name. @return GS_OK; GS_ENOENT. */
int gs_kworld_delete_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms);

/**
 * Forgets pod ns/name (a bind the API server refused): the engine drops it and releases what it
 * held, and the next GS_KADDED of that name enters it afresh. @return GS_OK; GS_ENOENT.
 */
int gs_kworld_forget_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms);

/**
 * Makes pod ns/name avoid a node from its next entry on (a preemption there was blocked by a
 * PodDisruptionBudget): its required node affinity gets `metadata.name NotIn [nodes]` ANDed into
 * every term. Takes effect when the pod next enters the engine (after gs_kworld_forget_pod() and
 * its object applied again); a running pod is not moved. Kept until gs_kworld_avoid_clear(), also
 * across forgetting.
 * @param node  a node name; copied. Adding one already avoided changes nothing.
 * @return GS_OK; GS_ENOMEM.
 */
int gs_kworld_avoid_node(struct gs_kworld *w, const char *ns, const char *name, const char *node);

/** Forgets the nodes pod ns/name avoids (from its next entry on). Unknown pods: a no-op. */
void gs_kworld_avoid_clear(struct gs_kworld *w, const char *ns, const char *name);

/** Cordons or uncordons a node. @return GS_OK; GS_ENOENT. */
int gs_kworld_cordon(struct gs_kworld *w, const char *node, bool unschedulable);

/** Marks GPU `gpu` of a node healthy or not. @return GS_OK; GS_ENOENT; GS_EINVAL bad index. */
int gs_kworld_gpu_health(struct gs_kworld *w, const char *node, uint32_t gpu, bool healthy);

/** Removes a node (its pods evicted node-lost). @return GS_OK; GS_ENOENT. */
int gs_kworld_delete_node(struct gs_kworld *w, const char *node, int64_t now_ms);

/** The reason of a pod that waits for its spec.schedulingGates to go (Kubernetes' own
 * PodScheduled reason for it is SchedulingGated). */
#define GS_KWORLD_REASON_GATED "scheduling gates"

/**
 * Calls fn for every pod of ours that neither runs nor has ended, with its reason (for a pod no
 * cycle has judged: "waiting in its queue: a pod ahead of it (higher priority or older) cannot
 * be placed yet"), in order of arrival.
 * @param fn   called with ctx, the pod's namespace and name, its metadata.uid (NULL when the
 *             object had none, e.g. a hand-written cluster file) and its reason (a pod behind
 *             its schedulingGates: GS_KWORLD_REASON_GATED); every string is the world's, valid
 *             during the call only. fn must not change the world.
 * @param ctx  passed to fn as is.
 */
void gs_kworld_each_pending(struct gs_kworld *w,
                            void (*fn)(void *ctx, const char *ns, const char *name, const char *uid,
                                       const char *reason),
                            void *ctx);

/**
 * The MIG devices of GPU `gpu` in a node's last good agent inventory (gpusched.io/gpus), as
 * given (dynamic MIG: whether the agent has carried a plan out).
 * @param out  receives up to cap entries; profiles valid until the node is applied again.
 * @return GS_OK; GS_ENOENT (no good inventory, or no such GPU in it).
 */
int gs_kworld_inventory_mig(const struct gs_kworld *w, const char *node, uint32_t gpu,
                            struct gs_kmig_slot *out, uint32_t cap, uint32_t *n);

/** The cluster, for reading (NULL before the first cycle). */
const struct gs_cluster *gs_kworld_cluster(const struct gs_kworld *w);

/** The engine, for reading (NULL before the first cycle). */
const struct gs_engine *gs_kworld_engine(const struct gs_kworld *w);

#endif /* GPUSCHED_KWORLD_H */
