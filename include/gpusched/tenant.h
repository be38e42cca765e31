/*
 * Multi-tenant scheduling: queues with quotas, fair share, PriorityClasses, preemption and
 * reclaim, gangs (PodGroups) and backfill, on top of the placement core (sched.h).
 *
 * The model follows what users of KAI-Scheduler, Kueue and Volcano already write:
 *  - a queue tree (root -> departments -> teams; only leaves hold pods) with, per resource
 *    (milli-GPU, milli-CPU, memory MiB), a guaranteed `quota`, a hard `limit` and an
 *    `over_quota_weight` that divides what is left over (KAI's Queue; Kueue's nominalQuota and
 *    borrowingLimit);
 *  - PriorityClasses: a value and a preemptible flag (default: preemptible below 100, as KAI);
 *  - PodGroups with `min_member` (all-or-nothing gangs) and a timeout;
 *  - preemption by priority: inside a queue of any lower-priority pod, across queues only of
 *    pods running above their queue's quota, by a pod whose queue stays within its own (as
 *    KAI-Scheduler and Volcano bound preemption by quotas); reclaim of lent quota between
 *    queues;
 *  - EASY backfill (Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995) around the
 *    reservation of a blocked head job.
 * docs/internals/tenancy.md states every rule and why.
 *
 * The engine is pure like the rest of the core: time is passed in (now_ms), randomness comes
 * from the caller's gs_rng, and every decision is reported through a callback. It borrows a
 * cluster and binds/unbinds pods in it. Not thread-safe.
 */
#ifndef GPUSCHED_TENANT_H
#define GPUSCHED_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"

/** Resources that quotas and fair share are kept in. */
enum gs_res {
    GS_RES_GPU = 0, /**< milli-GPU (num_gpu x gpu_milli) */
    GS_RES_CPU = 1, /**< milli-CPU */
    GS_RES_MEM = 2, /**< memory, MiB */
    GS_RES_COUNT = 3
};

/** A quota or limit value meaning "no bound". */
#define GS_UNLIMITED INT64_MAX
/** "No gang" in a pod spec. */
#define GS_NO_GANG UINT32_MAX
/** The root queue's id; every queue tree hangs below it. */
#define GS_QUEUE_ROOT 0u

/**
 * A queue's bound on the GPUs of one model (the Queue's spec.resources.gpu.byModel entry; Kueue's
 * nominalQuota and borrowingLimit of one ResourceFlavor). A queue's pods are charged, per model,
 * the milli-GPU they hold on nodes of that model (a pod that may use several models is charged to
 * the one it lands on); the queue's overall GPU quota and limit still apply. A model without an
 * entry is bound by the overall values only. docs/queues.md ("GPU models") states the rules.
 */
struct gs_model_quota {
    uint32_t model;      /**< GPU model id of the engine's cluster (gs_cluster_model_id()) */
    int64_t quota_milli; /**< milli-GPU of this model guaranteed to the queue, >= 0: a queue below
                              it may reclaim GPUs of this model from queues above theirs */
    int64_t limit_milli; /**< cap on the milli-GPU of this model its subtree holds, >= quota, or
                              GS_UNLIMITED */
};

/** A queue. Borrowed by gs_engine_add_queue(), which copies it. */
struct gs_queue_spec {
    const char *name;            /**< unique, non-empty */
    uint32_t parent;             /**< parent queue id (GS_QUEUE_ROOT for a top-level queue) */
    int64_t quota[GS_RES_COUNT]; /**< guaranteed amount per resource, >= 0 */
    int64_t limit[GS_RES_COUNT]; /**< hard cap per resource (>= quota) or GS_UNLIMITED */
    double over_quota_weight;    /**< share of the leftover, >= 0 (0: never borrows) */
    int64_t min_runtime_ms;      /**< its pods are never evicted before running this long */
    /** Per-GPU-model bounds: n_by_model entries, distinct models (borrowed, copied); NULL when
     *  n_by_model is 0 (no per-model bounds). */
    const struct gs_model_quota *by_model;
    uint32_t n_by_model; /**< entries in by_model, <= GS_MODELS_MAX */
};

/** A PriorityClass. */
struct gs_priority_class_spec {
    const char *name; /**< unique, non-empty */
    int32_t value;    /**< higher runs first and may preempt lower */
    int preemptible;  /**< 1 yes, 0 no, -1 default (preemptible iff value < 100) */
};

/** The grace period of a PodGroup that names none (gpusched.io/gang-grace-seconds) and has no
 *  scheduleTimeoutSeconds: 300 s. The engine applies what gs_engine_set_gang_grace() says;
 *  callers that read PodGroups (kworld.h) use this default. */
#define GS_GANG_GRACE_DEFAULT_MS 300000

/** A PodGroup (gang). */
struct gs_gang_spec {
    const char *name;    /**< unique, non-empty */
    uint32_t min_member; /**< pods that must run together, >= 1 */
    int64_t timeout_ms;  /**< a gang not started this long after its first pod arrived fails;
                              0 = wait for ever */
};

/** A pod submitted to the engine. */
struct gs_tpod_spec {
    const char *name;            /**< for reports; copied; may repeat */
    uint32_t queue;              /**< a leaf queue id */
    uint32_t priority_class;     /**< a PriorityClass id */
    uint32_t gang;               /**< a gang id or GS_NO_GANG */
    struct gs_pod_req req;       /**< what it requests */
    int64_t runtime_estimate_ms; /**< expected run time for backfill, or -1 when unknown */
    bool preempt_never;          /**< Kubernetes' preemptionPolicy Never: ordered by priority
                                      like any pod, but never evicts a lower-priority pod of its
                                      queue to fit (priority preemption); it still reclaims
                                      quota its queue lent (reclaim), and may itself be a victim
                                      (docs/internals/tenancy.md) */
};

/** States of a pod. Every pod is in exactly one. */
enum gs_tpod_state {
    GS_TPOD_PENDING = 0,   /**< waiting in its queue (also after an eviction) */
    GS_TPOD_RUNNING = 1,   /**< bound to a node */
    GS_TPOD_SUCCEEDED = 2, /**< finished (gs_engine_finish()) */
    GS_TPOD_FAILED = 3,    /**< gave up: gang timeout, or removed */
};

/** Why a pod was evicted. */
enum gs_evict_reason {
    GS_EVICT_NONE = 0,
    GS_EVICT_PREEMPT = 1,   /**< a higher-priority pod needed the room: of the same queue, or of
                                 a queue within its quota while the victim's ran above its own */
    GS_EVICT_RECLAIM = 2,   /**< a queue below its fair share took back lent quota */
    GS_EVICT_GANG = 3,      /**< another member of its gang was evicted */
    GS_EVICT_NODE_LOST = 4, /**< its node was removed (gs_engine_remove_node()) */
    GS_EVICT_DEFRAG = 5,    /**< moved by a defragmentation plan (gs_engine_migrate()) */
};

/** What the engine reports. */
enum gs_event_kind {
    GS_EV_BIND = 0,          /**< pod started on pl */
    GS_EV_EVICT = 1,         /**< pod evicted (reason, by = the pod that caused it); only ever of a
                                  pod reported bound before (a bind undone inside one trial
                                  reports neither) */
    GS_EV_GANG_TIMEOUT = 2,  /**< pod's gang timed out: a pending member of a gang that did not
                                  start within timeout_ms (the pod FAILED), or a running member
                                  of a gang released at the end of its grace period (after its
                                  EVICT, reason GANG; `text` says "gang G did not get back to
                                  min_member M within its grace period of S s") */
    GS_EV_BACKFILL = 3,      /**< pod started ahead of a reservation without delaying it */
    GS_EV_SUBMIT = 4,        /**< pod entered its queue (gs_engine_submit_pod()) */
    GS_EV_FINISH = 5,        /**< running pod finished (gs_engine_finish()) */
    GS_EV_DELETE = 6,        /**< pod deleted before it finished (gs_engine_delete()) */
    GS_EV_UNSCHEDULABLE = 7, /**< pod tried and not placed; `reason` text changed since the
                                  last such event of this pod (once per change, not per cycle) */
    GS_EV_ADOPT = 8,         /**< running pod handed to the engine (gs_engine_adopt()); counts
                                  as a bind: pl says where */
};

/** One decision. Valid during the callback only. */
struct gs_event {
    enum gs_event_kind kind;
    uint32_t pod;                  /**< the pod bound, evicted or failed */
    uint32_t by;                   /**< EVICT: the preemptor pod; else UINT32_MAX */
    enum gs_evict_reason reason;   /**< EVICT only */
    const struct gs_placement *pl; /**< BIND/BACKFILL/ADOPT, and EVICT/FINISH/DELETE of a
                                        running pod: where it is or was; else NULL */
    int64_t now_ms;
    const char *text; /**< UNSCHEDULABLE: the reason (explain.h templates, or a quota or gang
                           message; for a pod that fits no node even when empty, a last
                           sentence "It fits no node ..." says so). EVICT of reason PREEMPT or
                           RECLAIM: why, to follow the preemptor's name ("priority 100 > 10;
                           queue a is within its quota of 1 GPU, queue b ran above its quota of
                           1 GPU (it holds 1 GPU after the eviction)"; within one queue
                           "priority 100 > 10 in queue q"; reclaim "queue b lent what queue a
                           is guaranteed (it holds ...)"). BIND/BACKFILL of a pod that
                           evicted others to fit: whom, e.g. "preempted ns/b1 (priority 10,
                           queue b above its quota of 1 GPU)". Else NULL. Valid during the
                           callback. */
    uint32_t mig_repartitions; /**< BIND/BACKFILL: MIG GPUs re-partitioned for this pod (dynamic
                                    MIG, gs_engine_config.dynamic_mig): 0 or 1; else 0 */
    int64_t start_delay_ms;    /**< BIND/BACKFILL: how long after now_ms the pod really starts:
                                    gs_engine_config.mig_repartition_ms when its GPU was
                                    re-partitioned for it, else 0 */
};

/** Engine configuration. Borrowed by gs_engine_new(). */
struct gs_engine_config {
    const char *policy; /**< placement policy (gs_policy_name()); NULL = "bestfit" */
    const struct gs_workload *workload; /**< for "fgd"; borrowed, outlives the engine */
    const uint32_t *node_rank;          /**< tie-break rank per node, or NULL (node index) */
    bool preemption;                    /**< allow priority preemption inside a queue */
    bool reclaim;                       /**< allow reclaim between queues */
    bool backfill;                      /**< EASY backfill for pods with runtime estimates */
    uint32_t nodes_to_find;             /**< bounded node scan per placement (gs_sched_config);
                                             0 = every node */
    uint32_t cycle_attempts_max;        /**< stop a cycle after this many jobs tried (0 = no bound);
                                             the rest wait for the next cycle */
    bool evict_ends_pod;                /**< an evicted pod ends (FAILED) instead of waiting
                                             again: in Kubernetes an evicted pod is gone and its
                                             controller makes a new one */
    /** Dynamic MIG (include/gpusched/mig_plan.h): a MIG pod that fits no node as the layouts
     *  are may take a GPU re-partitioned for it, destroying only free instances: of every MIG
     *  GPU (healthy, on a node that passes the pod's filters and has its CPU, memory, pod slot
     *  and other resources), the plan of gs_mig_plan_repartition() with the fewest instances
     *  destroyed, then the highest future score, then the lowest node rank and GPU index; the
     *  GPU's layout changes (gs_cluster_set_mig_layout(), undone with a failed trial) and the
     *  pod takes the plan's instances. Off by default. Victim searches do not plan. */
    bool dynamic_mig;
    int64_t mig_repartition_ms; /**< dynamic MIG: how long a re-partition takes before the pod
                                     starts (BIND's start_delay_ms and the pod's start_ms), ms,
                                     >= 0; the replay's default is 10 s */
    /** Called for every decision, in order; may be NULL. May read the engine (the *_info and
     *  find functions), must not change it. */
    void (*on_event)(void *ctx, const struct gs_event *ev);
    void *ctx; /**< passed to on_event */
};

/** Counters of one scheduling cycle. */
struct gs_cycle_stats {
    uint32_t attempts;   /**< jobs (pods or gangs) tried */
    uint32_t bound;      /**< pods bound */
    uint32_t evicted;    /**< pods evicted */
    uint32_t backfilled; /**< pods started by backfill */
};

/** A queue's state, as read by reports and tests. */
struct gs_queue_info {
    const char *name;                /**< borrowed */
    uint32_t parent;                 /**< parent id; UINT32_MAX for the root */
    bool leaf;                       /**< holds pods */
    int64_t allocated[GS_RES_COUNT]; /**< requests of its running pods (subtree) */
    int64_t demand[GS_RES_COUNT];    /**< requests of running + pending pods (subtree) */
    int64_t fair[GS_RES_COUNT];      /**< fair share from the last cycle */
    int64_t quota[GS_RES_COUNT];
    int64_t limit[GS_RES_COUNT];
    uint32_t pending;            /**< pending pods (leaf) */
    uint32_t running;            /**< running pods (leaf) */
    uint64_t evictions_suffered; /**< its pods evicted */
    uint64_t evictions_caused;   /**< evictions its pods caused */
};

/** A gang's state, as read by reports, tests and PodGroup status writers. */
struct gs_gang_info {
    const char *name;    /**< borrowed */
    uint32_t min_member; /**< from its spec */
    uint32_t members;    /**< pods submitted to it, in any state */
    uint32_t pending, running, succeeded;
    bool started; /**< reached min_member once */
    bool refused; /**< its minimum can never fit under its queues' caps; its pods wait untried */
    const char *reason; /**< why it is refused ("" when not), e.g. "gang g needs 2 GPUs at minimum
                             but queue q is limited to 1 GPU"; borrowed, valid until the next call
                             that changes the engine; at most 319 bytes (a long gang name is cut) */
    int64_t grace_ms;   /**< gs_engine_set_gang_grace(); 0 none */
    int64_t grace_until_ms; /**< in its grace period (running below min_member after losing
                                 members): when it ends, ms; -1 otherwise */
    uint32_t holds;         /**< placements it holds for its replacements (lost members'
                                 capacity, bound in the cluster, usable by its own pods only) */
};

/** A pod's state, as read by reports and tests. */
struct gs_tpod_info {
    const char *name; /**< borrowed */
    enum gs_tpod_state state;
    uint32_t queue, priority_class, gang;
    struct gs_placement pl; /**< valid while RUNNING */
    int64_t submit_ms;      /**< first submission */
    int64_t start_ms;       /**< last start; -1 if never started */
    int64_t end_ms;         /**< SUCCEEDED/FAILED time; -1 otherwise */
    uint32_t evictions;     /**< times evicted */
    enum gs_evict_reason last_evict_reason;
    const char *uid;       /**< Kubernetes metadata.uid, borrowed; NULL without identity */
    const char *ns;        /**< namespace, borrowed; NULL without identity */
    uint32_t filter_class; /**< node filter class (filter.h) */
    bool adopted;          /**< came in running through gs_engine_adopt() */
    bool foreign;          /**< bound by another scheduler: capacity only, never a victim */
    const char *reason;    /**< why it waits (last UNSCHEDULABLE text), borrowed; NULL if none */
};

/** The most disruption budgets one pod may be covered by. Kubernetes allows any number (the
 *  Eviction API then refuses the eviction outright); kube-scheduler counts a victim as violating
 *  when any of them has no disruption left, which a few are enough to express. */
#define GS_POD_BUDGETS_MAX 4

/**
 * What a live cluster knows of a pod beyond its request. Borrowed by gs_engine_submit_pod() and
 * gs_engine_adopt(); strings copied.
 */
struct gs_pod_ident {
    const char *uid;       /**< metadata.uid, unique among the engine's pods; NULL for none */
    const char *ns;        /**< metadata.namespace; NULL for none */
    const char *name;      /**< metadata.name; replaces gs_tpod_spec.name when not NULL */
    uint32_t filter_class; /**< a filter class of the engine's cluster (filter.h); the engine
                                takes its own reference and drops it when the pod is forgotten */
    int64_t created_ms;    /**< metadata.creationTimestamp; orders "newest first" */
    bool foreign;          /**< adopt only: bound by another scheduler (see gs_engine_adopt()) */
    /** The disruption budgets (gs_engine_add_budget() ids) whose selectors match the pod; 0 =
     *  none, entries may be left 0 in any place. */
    uint32_t budgets[GS_POD_BUDGETS_MAX];
};

struct gs_engine;

/**
 * Creates an engine over a cluster. The cluster must not be changed behind the engine's back
 * while pods are bound through it.
 * @param c    borrowed; outlives the engine.
 * @param out  receives the engine; free with gs_engine_free().
 * @return GS_OK; GS_ENOENT unknown policy; GS_EINVAL (fgd without workload, bad rank, a negative
 *         mig_repartition_ms); GS_ENOMEM.
 */
int gs_engine_new(struct gs_cluster *c, const struct gs_engine_config *cfg, struct gs_engine **out);

/** Returns the cluster the engine was created over (borrowed), e.g. to look up model ids for
 *  gs_queue_spec.by_model with gs_cluster_model_id(). */
struct gs_cluster *gs_engine_cluster(const struct gs_engine *e);

/** Frees an engine (not the cluster; bound pods stay bound). NULL is a no-op. */
void gs_engine_free(struct gs_engine *e);

/**
 * Replaces the engine's target workload (see gs_sched_set_workload()): a live scheduler learns
 * the workload from the pods it sees. Placements already made stay; later decisions and the
 * fragmentation measure use `w`.
 * @param w  borrowed; must outlive the engine or the next call.
 * @return GS_OK; GS_EINVAL (policy fgd and `w` NULL or without types; nothing changes).
 */
int gs_engine_set_workload(struct gs_engine *e, const struct gs_workload *w);

/**
 * Adds a queue under an existing parent. A parent that has pods cannot get children.
 * @param id  receives the queue id (1, 2, ... in order of adding); may be NULL.
 * @return GS_OK; GS_EEXIST duplicate name; GS_ENOENT unknown parent; GS_EINVAL a name that is
 *         not a DNS-1123 subdomain of at most 253 characters (gpusched/names.h), negative values,
 *         limit below quota, or
 * children's quotas summing above the parent's quota for a resource where the parent has a finite
 * quota; per-model entries (by_model) with a model the cluster does not know, a model twice, a
 * quota below 0 or above the entry's limit or above the queue's overall GPU limit, or children's
 * quotas for a model summing above the parent's entry for it; GS_ENOMEM. Unchanged on failure.
 */
int gs_engine_add_queue(struct gs_engine *e, const struct gs_queue_spec *spec, uint32_t *id);

/**
 * Changes a queue's quota, limit, over-quota weight and min_runtime_ms (a Queue object edited in
 * the cluster), for the next cycle's fair shares, and undoes gs_engine_delete_queue() (the Queue
 * created again). As in Kubernetes, an edit evicts nothing by itself: running pods keep running,
 * also when the new limit is below what the queue's subtree holds now; the queue then starts no
 * pod until it is back under the limit (as after gs_engine_adopt() over a limit), and reclaim may
 * take its pods back as from any queue above its fair share. Every gang in the queue's subtree
 * is judged again against the new caps (see gs_engine_submit()), so a refused gang may become
 * schedulable and the other way round; its pending pods' reasons are worked out again at the
 * next cycle.
 * @param id    a queue id other than GS_QUEUE_ROOT.
 * @param spec  borrowed; name and parent must be the queue's own (a queue is not renamed or moved).
 * @return GS_OK; GS_EINVAL an unknown id or the root, another name or parent, negative values,
 *         limit below quota, the queue's quota making its siblings' quotas sum above their
 *         parent's finite quota, or a finite quota below the sum of its children's; the
 *         per-model entries (which replace the old ones whole) under the rules of
 *         gs_engine_add_queue(), and no model limit below what the subtree holds of that model
 *         now. Unchanged on failure.
 */
int gs_engine_update_queue(struct gs_engine *e, uint32_t id, const struct gs_queue_spec *spec);

/**
 * Deletes a queue (its Queue object was deleted in the cluster). Its id and name stay taken, its
 * place in the tree and its books stay, but it guarantees nothing and starts nothing from now on:
 * quota and limit 0 (so fair shares give it nothing and reclaim may take back what it holds),
 * its pending pods stay pending with the reason "queue NAME does not exist" (a gang of it is not
 * refused but waits), and its running pods keep running, charged to it, until they end.
 * gs_engine_update_queue() with the queue's name and parent brings it back.
 * @param id  a queue id other than GS_QUEUE_ROOT.
 * @return GS_OK (also for a queue deleted already); GS_EINVAL an unknown id, the root, or a queue
 *         with a child queue that is not deleted. Unchanged on failure.
 */
int gs_engine_delete_queue(struct gs_engine *e, uint32_t id);

/** Finds a queue by name; returns its id or -1. */
int gs_engine_find_queue(const struct gs_engine *e, const char *name);

/**
 * Adds a PriorityClass.
 * @return GS_OK; GS_EEXIST; GS_EINVAL (a name as for queues is required); GS_ENOMEM.
 */
int gs_engine_add_priority_class(struct gs_engine *e, const struct gs_priority_class_spec *spec,
                                 uint32_t *id);

/** Finds a PriorityClass by name; returns its id or -1. */
int gs_engine_find_priority_class(const struct gs_engine *e, const char *name);

/**
 * Adds a disruption budget (a policy/v1 PodDisruptionBudget): how many of the pods it covers may
 * be disrupted now (its status.disruptionsAllowed). Pods name the budgets covering them in
 * gs_pod_ident.budgets or through gs_engine_set_pod_budgets(). Budgets are a preference, as in
 * kube-scheduler: victim selection reprieves pods whose eviction would exceed a budget first and
 * prefers the node with the fewest such victims, but evicts them when nothing else makes room
 * (the Eviction API then answers 429 and the caller decides; gs_engine_cycle()).
 * A budget is never removed: for a deleted PodDisruptionBudget, drop it from its pods
 * (gs_engine_set_pod_budgets()); its id then names nothing in use.
 * @param name                 "namespace/name", non-empty, unique; copied.
 * @param disruptions_allowed  >= 0.
 * @param id                   receives the budget id (1, 2, ... in order of adding; 0 is "none");
 *                             may be NULL.
 * @return GS_OK; GS_EEXIST duplicate name; GS_EINVAL empty or NULL name, negative allowance;
 *         GS_ENOMEM. Unchanged on failure.
 */
int gs_engine_add_budget(struct gs_engine *e, const char *name, int32_t disruptions_allowed,
                         uint32_t *id);

/** Finds a disruption budget by name ("namespace/name"). @return its id (>= 1), or -1. O(budgets).
 */
int64_t gs_engine_find_budget(const struct gs_engine *e, const char *name);

/**
 * Sets a budget's disruptions allowed now (its status.disruptionsAllowed changed). The engine
 * also lowers it by one for each pod covered by it that a committed trial evicts (not below 0),
 * as the Eviction API does; the caller's next value, read from the cluster, replaces that.
 * @param id  a budget id.
 * @param disruptions_allowed  >= 0.
 * @return GS_OK; GS_EINVAL for an unknown id or a negative allowance (nothing changes).
 */
int gs_engine_set_budget_allowed(struct gs_engine *e, uint32_t id, int32_t disruptions_allowed);

/**
 * Reads a budget. @param name receives its name (borrowed, valid for the engine's life); may be
 * NULL. @param disruptions_allowed receives the allowance now; may be NULL.
 * @return GS_OK; GS_EINVAL for an unknown id.
 */
int gs_engine_budget_info(const struct gs_engine *e, uint32_t id, const char **name,
                          int32_t *disruptions_allowed);

/**
 * Replaces the budgets covering a pod (a PodDisruptionBudget was created, changed its selector
 * or was deleted, or the pod's labels changed).
 * @param pod  a pod id in any state but forgotten.
 * @param ids  n budget ids, each >= 1 (borrowed); may be NULL when n is 0.
 * @param n    0 ..= GS_POD_BUDGETS_MAX.
 * @return GS_OK; GS_EINVAL an unknown pod or budget, n too large (nothing changes).
 */
int gs_engine_set_pod_budgets(struct gs_engine *e, uint32_t pod, const uint32_t *ids, uint32_t n);

/** Adds a PodGroup, with no grace period. @return GS_OK; GS_EEXIST; GS_EINVAL (min_member 0);
 *  GS_ENOMEM. */
int gs_engine_add_gang(struct gs_engine *e, const struct gs_gang_spec *spec, uint32_t *id);

/**
 * Changes a gang's min_member (its PodGroup's spec.minMember was edited) while none of its
 * members has run: a gang that started, or has a member running or finished, keeps its minimum.
 * The gang is judged again (gs_engine_submit()), and its members' reasons at the next cycle.
 * @param gang        a gang id.
 * @param min_member  >= 1.
 * @return GS_OK; GS_EINVAL an unknown gang, min_member 0, or a gang that has started or has a
 *         member running or finished (nothing changes).
 */
int gs_engine_set_gang_min_member(struct gs_engine *e, uint32_t gang, uint32_t min_member);

/**
 * Sets a gang's grace period: how long a running gang that lost members (deleted, or their node
 * removed) below min_member keeps running while replacements come, the capacity the lost
 * members freed on nodes that remain being held for them (gs_engine_delete() has the rules).
 * 0, the default, means none: such a gang is released whole at once. A change applies to a
 * grace period in progress (it ends at its start + the new value).
 * @param gang      a gang id.
 * @param grace_ms  >= 0.
 * @return GS_OK; GS_EINVAL for an unknown gang or a negative grace.
 */
int gs_engine_set_gang_grace(struct gs_engine *e, uint32_t gang, int64_t grace_ms);

/**
 * Submits a pod; it waits in its queue until a cycle places it.
 *
 * A gang is judged each time a member arrives (and when a member leaves or finishes, and in
 * gs_engine_update_queue()): it is *refused* while its minimum can never fit under the cap of
 * its queue or of an ancestor (the limit; for a queue of over-quota weight 0, also its quota).
 * Its minimum is min_member less its finished members, running at once; per resource, what that
 * takes at least is the sum of the smallest requests among its pending and running members (all
 * of them while there are fewer than the minimum). A refused gang's pods stay pending and are
 * not tried; gs_engine_gang_info() gives the reason.
 *
 * @param now_ms  submission time.
 * @param id      receives the pod id (0, 1, ...); may be NULL.
 * @return GS_OK; GS_ELIMIT: the pod WAS added (*id is set) but its gang is now refused: the one
 *         non-zero return after which the engine has changed, because the pod exists in the
 *         cluster whatever the engine says, and the gang may become schedulable when a cap is
 *         raised; GS_EINVAL (not a leaf queue, unknown class or gang, malformed request, a gang
 *         member of another queue); GS_ENOMEM. Unchanged on GS_EINVAL and GS_ENOMEM.
 */
int gs_engine_submit(struct gs_engine *e, const struct gs_tpod_spec *spec, int64_t now_ms,
                     uint32_t *id);

/**
 * Submits a pod with its live-cluster identity: as gs_engine_submit(), and the pod is found by
 * gs_engine_find_pod() and placed only on nodes passing its filter class. Emits SUBMIT.
 * @param ident  borrowed; NULL is gs_engine_submit().
 * @return as gs_engine_submit(); GS_EEXIST when a live pod has the same uid; GS_EINVAL for an
 *         unknown filter class.
 */
int gs_engine_submit_pod(struct gs_engine *e, const struct gs_tpod_spec *spec,
                         const struct gs_pod_ident *ident, int64_t now_ms, uint32_t *id);

/**
 * Hands the engine a pod that is already running: bound by us before a restart, or by another
 * scheduler. It is charged to its queue (books only: adopt never fails because the queue is
 * over its limit; that queue then takes no new pods until it is back under). With
 * ident->foreign it counts against capacity only: it belongs to no queue's books, is never a
 * victim, and fair shares are computed on the capacity left beside foreign pods.
 * A placement with num_gpu == 0 for a GPU request means "GPUs unknown": the pod is charged to
 * the lowest-indexed healthy GPUs of its node that can take it (whole GPUs: untouched ones;
 * a fraction: the first with room), until the caller knows better. Emits ADOPT.
 * @param pl        the node, and the GPUs when known (as gs_cluster_adopt()).
 * @param start_ms  when it started (its start time for min_runtime and victim order).
 * @return GS_OK; GS_EINVAL (bad queue, class, gang or request, a free node slot, GPUs over their
 *         capacity: the engine never over-commits a GPU); GS_EEXIST duplicate uid; GS_ENOMEM.
 *         Nothing changes on failure, except that capacity held for gangs on the node may have
 *         been given up: a running pod takes precedence over a hold (gs_engine_delete()).
 */
int gs_engine_adopt(struct gs_engine *e, const struct gs_tpod_spec *spec,
                    const struct gs_pod_ident *ident, const struct gs_placement *pl,
                    int64_t start_ms, uint32_t *id);

/**
 * Forgets a pod that has ended (SUCCEEDED or FAILED): drops its uid from the index and its
 * filter class reference, and (unless it belongs to a gang, whose history it stays part of)
 * frees its slot for a later pod. Its id then names nothing, or a later pod; pod handles
 * (gs_engine_pod_handle()) tell them apart.
 * @return GS_OK; GS_EINVAL for a pod that is pending, running or unknown.
 */
int gs_engine_forget(struct gs_engine *e, uint32_t pod);

/** Finds a pod by uid. @return its id, or -1. O(1). */
int64_t gs_engine_find_pod(const struct gs_engine *e, const char *uid);

/** A pod handle: id in the low 32 bits, the slot's generation above. */
uint64_t gs_engine_pod_handle(const struct gs_engine *e, uint32_t pod);

/** Resolves a pod handle. @return GS_OK; GS_ENOENT when the pod was forgotten. */
int gs_engine_pod_resolve(const struct gs_engine *e, uint64_t handle, uint32_t *pod);

/**
 * Removes a node from the engine's cluster: every pod on it is evicted with reason
 * GS_EVICT_NODE_LOST; a gang that drops below min_member with members still running enters its
 * grace period (see gs_engine_delete(); nothing is held, the node is gone), or, without one,
 * loses its other running members with GS_EVICT_GANG. Capacity held for gangs on the node is
 * given up. Then the node is removed (gs_cluster_remove_node()).
 * @return GS_OK; GS_EINVAL for a bad node; GS_ENOMEM (nothing changed).
 */
int gs_engine_remove_node(struct gs_engine *e, uint32_t node, int64_t now_ms);

/**
 * Moves running pods to other placements, as a defragmentation plan (defrag.h) is carried out:
 * every pod is evicted (EVICT, reason GS_EVICT_DEFRAG), then each is bound at its new placement
 * in order (BIND, start_delay_ms = restart_delay_ms: it restarts and runs its whole run time
 * again from then). Evicting all first makes every bind of a plan's order fit: each then sees
 * at least what the plan left free at that step. Queue books do not change in total (the same
 * requests leave and come back); quotas are not checked again. All or nothing.
 * @param pods             engine pod ids, pods[0..n), distinct, n >= 1; borrowed.
 * @param pls              pls[i] is where pods[i] goes, as gs_node_pick_gpus() gives it;
 *                         borrowed.
 * @param restart_delay_ms how long a restart takes, ms, >= 0 (start_ms is now_ms + this).
 * @return GS_OK; GS_EINVAL for a pod that is not running, a gang member, a foreign pod, a
 *         repeated pod, a negative delay, or a placement that does not fit (nothing changed
 *         then); GS_ENOMEM (nothing changed).
 */
int gs_engine_migrate(struct gs_engine *e, const uint32_t *pods, const struct gs_placement *pls,
                      uint32_t n, int64_t now_ms, int64_t restart_delay_ms);

/**
 * Marks a running pod as finished and releases what it held.
 * @return GS_OK; GS_EINVAL if the pod is not running.
 */
int gs_engine_finish(struct gs_engine *e, uint32_t pod, int64_t now_ms);

/**
 * Deletes a pod that has not finished (a user deleted it, its controller gave up, the kubelet
 * evicted it, a drain): a pending pod leaves its queue, a running one releases what it held;
 * either ends FAILED. Emits DELETE.
 *
 * Gangs that lose members: when a running member goes and its gang is left with members running
 * but fewer than min_member (finished ones count), the gang's grace period decides
 * (gs_engine_set_gang_grace()). With none, its other running members are evicted at once
 * (reason GANG). Otherwise they keep running for the grace period from the first such loss (its
 * grace period, gs_gang_info.grace_until_ms) while replacements (new members,
 * gs_engine_submit_pod()) come; what the lost member held is *held* for them: it stays bound in the
 * cluster, so no other pod can take it, until the gang's next trial gives it back to the gang's own
 * members. The gang's pending members are ordered, among pods of equal priority in its queue, by
 * the gang's first submission, so they come before newer pods. The grace period ends when the gang
 * is back at min_member, or when nothing of it runs; a cycle at or after its end
 * (gs_engine_cycle()) releases the gang whole: its running members are evicted with reason GANG,
 * its holds go back to the cluster, each released member gets a GANG_TIMEOUT event, and the gang
 * starts over (its schedule timeout counted from then).
 *
 * @param now_ms  when it was deleted; starts a grace period.
 * @return GS_OK; GS_EINVAL if the pod is unknown or already SUCCEEDED/FAILED; GS_ENOMEM
 *         (nothing changed).
 */
int gs_engine_delete(struct gs_engine *e, uint32_t pod, int64_t now_ms);

/**
 * The reason a pod waits, as the last UNSCHEDULABLE event said (NULL if it was never tried
 * and refused). Borrowed, valid until the pod is tried again.
 */
const char *gs_engine_pod_reason(const struct gs_engine *e, uint32_t pod);

/**
 * Runs one scheduling cycle at time now_ms: computes fair shares, serves queues in order of how
 * far below their share they are, places jobs (gangs all-or-nothing; refused gangs, and gangs
 * with fewer members than min_member, are not tried and block nothing behind them), preempts,
 * reclaims and backfills as configured, and fails gangs past their timeout. First it releases every
 * gang whose grace period ended at or before now_ms (see gs_engine_delete()). Victims: a gang
 * member is evicted alone while its gang keeps min_member (running or finished) without it, newest
 * first, else with its whole gang; a job never evicts a member of its own gang or a pod it bound in
 * the same trial; reclaim is judged on what moves on both sides (the victim or its whole gang; the
 * preemptor and the gang members that start with it).
 *
 * Priority preemption (cfg.preemption) takes pods of lower priority than the preemptor: of its
 * own queue, any; of another queue, only what runs above that queue's quota: below the two
 * queues' common ancestor, the preemptor's queue and each of its ancestors must stay within
 * their quota with what it gains, and the victim's queue and each of its ancestors keep at
 * least their quota after what is taken from them (on the resource the preemptor needs: GPU
 * for a GPU pod, else CPU). A pod that fits no node even when empty (no node passing its
 * filters has the GPUs, CPU, memory it asks) holds up nothing behind it in its queue.
 *
 * Victims and their node follow kube-scheduler's DefaultPreemption (SelectVictimsOnNode and
 * pickOneNodeForPreemption, pkg/scheduler/framework/plugins/defaultpreemption and
 * framework/preemption). On each node the pods the preemptor may evict are ranked by importance
 * (higher priority, then earlier start); walking them in that order, a pod *violates* a budget
 * when one of its budgets has no disruption left after the more important ones took theirs.
 * The preemptor fits with all of them gone, and pods are then given back (reprieved) while it
 * still fits: violating ones first, each group most important first. The node chosen is, in
 * order: the fewest violating victims; the lowest highest victim priority; the lowest sum of
 * victim priorities (each counted as priority + 2^31, so a victim more never lowers it); the
 * fewest victims; the latest start among the highest-priority victims' earliest one; the first
 * node in node order. Victims count a gang's other members when it goes whole.
 * @param rng  for policies that draw; may be NULL for those that do not.
 * @param st   receives the cycle's counters; may be NULL.
 * @return GS_OK or GS_ENOMEM (then the cycle stopped part way; state is consistent).
 */
int gs_engine_cycle(struct gs_engine *e, int64_t now_ms, struct gs_rng *rng,
                    struct gs_cycle_stats *st);

/**
 * Checks every invariant: no GPU above capacity and the cluster's use equal to the sum of the
 * running pods and the gangs' holds; no queue above its limit; no running gang below min_member
 * outside its grace period (or adopted so), holds only in a grace period; no refused gang
 * running; every pod in exactly one state and counted once; every eviction with a reason.
 * @param msg  receives the first violation (cap bytes).
 * @return GS_OK, or GS_EINVAL with a message.
 */
int gs_engine_check(const struct gs_engine *e, char *msg, size_t cap);

/** Returns the number of queues including the root. */
uint32_t gs_engine_queue_count(const struct gs_engine *e);

/** Fills `out` for queue `id`. @return GS_OK or GS_EINVAL. */
int gs_engine_queue_info(const struct gs_engine *e, uint32_t id, struct gs_queue_info *out);

/**
 * Writes queue `id`'s path from its top-level queue down, names joined by '/' ("org/team/dev";
 * a top-level queue is its own name; the root is ""), as usage records and reports name queues.
 * @param buf  receives the path, NUL-terminated, cut at cap - 1 bytes on a name boundary
 *             (cap > 0).
 * @param top  if not NULL, receives the top-level queue's name (owned by the engine, valid until
 *             it is freed), or NULL for the root or a bad id.
 * @return GS_OK; GS_EINVAL for a bad id (buf "") or a path longer than cap (buf holds the whole
 *         names that fit).
 */
int gs_engine_queue_path(const struct gs_engine *e, uint32_t id, char *buf, size_t cap,
                         const char **top);

/** A queue's books for one GPU model. */
struct gs_queue_model_info {
    bool bounded;            /**< the queue has a by_model entry for the model */
    int64_t quota_milli;     /**< the entry's quota; 0 without one */
    int64_t limit_milli;     /**< the entry's limit; GS_UNLIMITED without one */
    int64_t allocated_milli; /**< milli-GPU its subtree's running pods hold on nodes of the
                                  model (memory, slot and MIG pods at their charge, charge.h) */
    bool fair_known;         /**< the last cycle divided the model's GPUs (some queue of the
                                  engine has per-model entries); the two below are 0 otherwise */
    int64_t demand_milli;    /**< milli-GPU of the model its subtree wants: what it holds there
                                  plus every pending pod that may use the model (a pod that may
                                  use several models counts on each), at the last cycle */
    int64_t fair_milli;      /**< its fair share of the model's GPUs from the last cycle: the
                                  model's GPUs divided as gs_engine_compute_fair() divides the
                                  cluster's, with the entry's quota (0 without one) and limit
                                  (else the overall GPU limit) and the demand above */
};

/**
 * Reads queue `id`'s per-model bound, allocation, demand and fair share for GPU model `model`.
 * Each model's GPUs are divided on their own, so a queue's unused share of one model is never
 * counted as a share of another (issue 8's per-GPU-model quotas; Kueue's ResourceFlavors).
 * @return GS_OK; GS_EINVAL for a bad queue id or a model id >= GS_MODELS_MAX.
 */
int gs_engine_queue_model_info(const struct gs_engine *e, uint32_t id, uint32_t model,
                               struct gs_queue_model_info *out);

/** Returns the number of gangs added. */
uint32_t gs_engine_gang_count(const struct gs_engine *e);

/** Fills `out` for gang `id`. @return GS_OK or GS_EINVAL. */
int gs_engine_gang_info(const struct gs_engine *e, uint32_t id, struct gs_gang_info *out);

/** Returns the number of pods submitted. */
uint32_t gs_engine_pod_count(const struct gs_engine *e);

/** Fills `out` for pod `id`. @return GS_OK or GS_EINVAL. */
int gs_engine_pod_info(const struct gs_engine *e, uint32_t id, struct gs_tpod_info *out);

/** Returns the PriorityClass value and preemptibility of class `id` (false if unknown). */
bool gs_engine_priority_class(const struct gs_engine *e, uint32_t id, int32_t *value,
                              bool *preemptible);

/**
 * Computes fair shares of a queue tree for `capacity` (exposed for tests and reports; the
 * engine calls it every cycle). Top-down per resource: each child first gets min(quota,
 * demand); what is left is divided among children with unmet demand in proportion to their
 * over-quota weights (water-filling: a child capped by its demand or limit returns its excess
 * to the others), in integer units with the remainder going to children in id order.
 */
void gs_engine_compute_fair(struct gs_engine *e, const int64_t capacity[GS_RES_COUNT]);

#endif /* GPUSCHED_TENANT_H */
