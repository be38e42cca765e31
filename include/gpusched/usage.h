/*
 * Usage accounting: a durable record of who held which GPU share when, in one SQLite file.
 *
 * The store keeps allocation intervals (a pod's hold on its GPUs from a bind to its end, with
 * why it ended), capacity intervals (a GPU present and healthy, or unhealthy, from when to when),
 * queue quota snapshots and utilisation samples; docs/usage-accounting.md gives the schema. It is
 * written through one interface: the recorder below turns the engine's event stream (tenant.h)
 * into intervals, so the replay and the Kubernetes scheduler record the same way.
 *
 * Durability: writes are batched in transactions that commit every `batch_events` events or
 * every `batch_ms` of event time, whichever comes first; each commit also writes a heartbeat
 * (the event time of the batch). A crash loses at most the open batch; an interval open at the
 * crash is closed by gs_usage_recover() at the last committed heartbeat (when it was last known
 * running), unless the caller says it is still running. The database runs in WAL mode.
 *
 * One writer per file (SQLite allows one; in a cluster only the leader's accountant writes).
 * A store is not thread-safe; the file may be read by other processes while it is written.
 * The store depends on the core (charge.h, tenant.h), never the reverse.
 */
#ifndef GPUSCHED_USAGE_H
#define GPUSCHED_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/tenant.h"

/** The schema version this build writes (PRAGMA user_version). */
#define GS_USAGE_SCHEMA_VERSION 2
/** The oldest schema a read-only open reads as it is: version 2 only added a unique key on
 *  utilisation samples, so a report of a version-1 file needs no migration (a writer's open
 *  still migrates it). */
#define GS_USAGE_SCHEMA_READ_MIN 1

/** Why an allocation interval ended. Stored as the text of gs_usage_end_name(). */
enum gs_usage_end {
    GS_USAGE_END_OPEN = 0,      /**< not ended (still running) */
    GS_USAGE_END_FINISHED = 1,  /**< "finished": the pod ran to its end */
    GS_USAGE_END_PREEMPTED = 2, /**< "evicted-preemption": a higher-priority pod took the room */
    GS_USAGE_END_RECLAIMED = 3, /**< "evicted-reclaim": its queue's lent quota was taken back */
    GS_USAGE_END_GANG = 4,      /**< "evicted-gang": another member of its gang was evicted */
    GS_USAGE_END_DELETED = 5,   /**< "deleted": deleted before it finished */
    GS_USAGE_END_NODE_LOST = 6, /**< "node-lost": its node went away */
    GS_USAGE_END_RECOVERED = 7, /**< "recovered": open at a writer crash, closed at restart at
                                     the last committed heartbeat */
};

/** Returns the stored name of an end reason ("finished"), or "?" for an unknown value. */
const char *gs_usage_end_name(enum gs_usage_end r);

/** What a pod holds on one of its GPUs. Plain value record; strings borrowed. */
struct gs_usage_gpu {
    const char *gpu_uuid;    /**< GPU UUID, or NULL when not known (replay) */
    const char *mig_profile; /**< MIG profile ("1g.10gb"), or NULL */
    int64_t mem_mib;         /**< device memory granted, MiB; 0 unknown */
    int64_t gpu_mem_mib;     /**< the GPU's device memory, MiB; 0 unknown */
    uint32_t gpu_index;      /**< device index on the node */
    int32_t gpu_milli;       /**< milli-GPU granted (whole GPU: 1000) */
    int32_t mig_instance;    /**< MIG instance id, -1 when none */
    int32_t replica_slot;    /**< time-slicing replica slot, -1 when none */
    uint8_t sharing;         /**< enum gs_gpu_sharing */
    uint8_t mig_slices;      /**< MIG: slices of the instance */
    uint8_t gpu_mig_slices;  /**< MIG: slices of the GPU */
    uint8_t replicas;        /**< time-slicing: replicas the GPU offers */
};

/**
 * What an engine placement grants per GPU, in the store's terms (charge.h says how each is
 * charged): a MIG GPU's instances of the pod as one grant of their compute slices (the first
 * instance's profile and start named); a time-sliced GPU one replica of its N; otherwise the
 * milli and, for a memory request, the MiB, with the GPU's memory. The live scheduler's
 * accountant and the replay's recorder both write what it returns.
 * @param pl     the placement; borrowed.
 * @param node   its node as the cluster holds it now; borrowed.
 * @param uuids  GS_NODE_GPUS_MAX GPU UUIDs by device index (NULL entries: unknown), or NULL.
 * @param out    room for GS_NODE_GPUS_MAX grants.
 * @return the grants written. Pure.
 */
uint32_t gs_usage_grants(const struct gs_placement *pl, const struct gs_node *node,
                         const char *const *uuids, struct gs_usage_gpu *out);

/**
 * The GPUs an interval with these grants is charged: the sum of gs_charge_share() over them
 * (charge.h), what gs_usage_begin_interval() stores as the interval's gpus_charged, so a live
 * counter fed by it agrees with the store.
 * @param gpus  n grants; borrowed.
 * @param bad   receives the index of the first grant that cannot be charged; may be NULL.
 * @param out   receives the GPUs charged (0 on failure).
 * @return GS_OK; GS_EINVAL (n above GS_NODE_GPUS_MAX, a grant gs_charge_share() refuses or of
 *         an unknown sharing mode). Pure.
 */
int gs_usage_charge_gpus(const struct gs_usage_gpu *gpus, uint32_t n, uint32_t *bad, double *out);

/** An allocation interval as written. Strings borrowed, copied by the store. */
struct gs_usage_interval {
    const char *pod_uid;        /**< unique per pod; non-empty */
    const char *ns;             /**< namespace, or NULL */
    const char *name;           /**< pod name, or NULL */
    const char *queue;          /**< leaf queue name, or NULL */
    const char *queue_path;     /**< "dept/team/queue" from below the root, or NULL */
    const char *team;           /**< team (gpusched.io/team label, else the queue's top-level
                                     ancestor), or NULL */
    const char *priority_class; /**< PriorityClass name, or NULL */
    const char *node;           /**< node name, or NULL for a pod holding no GPU */
    const char *model;          /**< GPU model of the node, or NULL */
    int64_t queued_ms;          /**< when it last began to wait (submit or eviction), Unix ms */
    int64_t start_ms;           /**< bind time, Unix ms */
};

/** A capacity interval: one GPU present in one state. Strings borrowed. */
struct gs_usage_capacity {
    const char *node;     /**< node name, non-empty */
    const char *model;    /**< GPU model, or NULL */
    uint32_t gpu_index;   /**< device index */
    const char *gpu_uuid; /**< or NULL */
    bool healthy;         /**< false: present but unhealthy */
    int64_t start_ms;     /**< Unix ms */
};

/** A queue quota snapshot. Strings borrowed. */
struct gs_usage_quota {
    int64_t t_ms;                /**< Unix ms */
    const char *queue;           /**< queue name */
    const char *queue_path;      /**< path from below the root */
    int64_t gpu_quota_milli;     /**< guaranteed milli-GPU (GS_UNLIMITED stored as -1) */
    int64_t gpu_limit_milli;     /**< cap, milli-GPU (GS_UNLIMITED stored as -1) */
    int64_t gpu_fair_milli;      /**< fair share at the snapshot */
    int64_t gpu_allocated_milli; /**< allocated at the snapshot */
};

/** How to open a store. */
struct gs_usage_options {
    uint32_t batch_events; /**< commit after this many events (0: 1000) */
    int64_t batch_ms;      /**< commit when an event is this much later than the last commit
                                (event time, ms; 0: 1000) */
    bool read_only;        /**< open for reports only: no migration, no writes */
    bool relaxed_sync;     /**< synchronous=NORMAL instead of FULL: a commit survives a crash
                                of the process but not a power cut (WAL synced at checkpoints
                                only); for stores that can be rebuilt, e.g. a replay's */
    bool existing_only;    /**< for writing, but only a store that exists already: no file is
                                created and an empty one is refused (GS_ENOENT, GS_EPARSE); an
                                older schema is migrated (report compact, report ingest) */
    bool alongside_writer; /**< for writing beside the store's one writer: no writer lock is
                                taken (its transactions wait for the writer's, SQLite's busy
                                timeout, 5 s); for adding utilisation samples (report ingest),
                                never for intervals */
};

struct gs_usage_store;

/**
 * Opens (and creates, unless read_only) an accounting database and brings its schema to
 * GS_USAGE_SCHEMA_VERSION by its migrations, in WAL mode. A store has one writer: opening for
 * writing (not read_only, not alongside_writer) takes an exclusive flock(2) on PATH-writer.lock,
 * held until gs_usage_close() (which removes the file) or the process's exit however it ends
 * (the kernel drops it; the file may stay and is taken over). Readers take no lock.
 * @param path  the file; borrowed.
 * @param opt   NULL for defaults.
 * @param out   receives the store; free with gs_usage_close().
 * @param msg   receives a sentence naming the file on failure (cap bytes), e.g. "x.db: not a
 *              gpusched accounting database (it has tables of another application)".
 * @return GS_OK; GS_ECONFLICT (another process holds the writer lock: msg names the lock file
 *         and the holder's pid); GS_EIO (cannot open or write; a file that is not SQLite or is
 *         corrupt; the lock file cannot be created);
 *         GS_EPARSE (a SQLite file of another application, or a newer schema than this build
 *         knows; read_only or existing_only: an empty one); GS_ENOENT (read_only or
 *         existing_only and no such file); GS_ENOMEM. *out is NULL on failure.
 */
int gs_usage_open(const char *path, const struct gs_usage_options *opt, struct gs_usage_store **out,
                  char *msg, size_t cap);

/**
 * Commits the open batch (heartbeat at the last event time seen) and closes the store.
 * NULL is a no-op. @return GS_OK, or GS_EIO when the last commit failed (the batch is lost).
 */
int gs_usage_close(struct gs_usage_store *s);

/** The last error's text (names the file), valid until the next call on the store. */
const char *gs_usage_errmsg(const struct gs_usage_store *s);

/**
 * Opens an allocation interval (end unset) inside the current batch.
 * @param gpus  n grants, one per GPU held (n = 0 for a pod without GPU); borrowed.
 * @param id    receives the interval's id, for gs_usage_end_interval().
 * @return GS_OK; GS_EINVAL (empty uid, n above GS_NODE_GPUS_MAX, a grant gs_charge_share()
 *         refuses); GS_EEXIST (an interval of this pod with this start exists); GS_EIO.
 */
int gs_usage_begin_interval(struct gs_usage_store *s, const struct gs_usage_interval *iv,
                            const struct gs_usage_gpu *gpus, uint32_t n, int64_t *id);

/**
 * Ends an open interval.
 * @param end_ms  Unix ms, >= its start.
 * @param by_uid  EVICT: the uid of the pod that caused it, or NULL.
 * @return GS_OK; GS_ENOENT (no open interval with this id); GS_EINVAL (end before start, reason
 *         GS_USAGE_END_OPEN); GS_EIO.
 */
int gs_usage_end_interval(struct gs_usage_store *s, int64_t id, int64_t end_ms,
                          enum gs_usage_end reason, const char *by_uid);

/** Opens a capacity interval. @param id receives its id. @return GS_OK; GS_EINVAL; GS_EIO. */
int gs_usage_begin_capacity(struct gs_usage_store *s, const struct gs_usage_capacity *c,
                            int64_t *id);

/**
 * Ends a capacity interval ("removed" or "health-changed" as reason text, borrowed).
 * @return GS_OK; GS_ENOENT; GS_EIO.
 */
int gs_usage_end_capacity(struct gs_usage_store *s, int64_t id, int64_t end_ms, const char *reason);

/** Records a queue quota snapshot. @return GS_OK; GS_EINVAL (no queue name); GS_EIO. */
int gs_usage_add_quota(struct gs_usage_store *s, const struct gs_usage_quota *q);

/**
 * Records a utilisation sample: the share of one GPU's compute a pod used over the sample, from
 * the agent's per-pod metrics or a Prometheus query (usage_ingest.h). A sample is keyed by
 * (pod uid, node, GPU index, time): writing the same key again replaces its value, so a period
 * written twice holds its samples once.
 * @param t_ms      the sample's time, Unix ms.
 * @param node      the node's name, or NULL (NULL keys never collide).
 * @param util_pct  0..100, % of the whole GPU.
 * @return GS_OK; GS_EINVAL (empty uid, util outside 0..100); GS_EIO.
 */
int gs_usage_add_util(struct gs_usage_store *s, int64_t t_ms, const char *pod_uid, const char *node,
                      uint32_t gpu_index, double util_pct);

/**
 * Counts one event at event time now_ms and commits the batch when it holds batch_events
 * events or now_ms is batch_ms past the last commit. Called by the recorder after each event.
 * @param committed  set true when this call committed; may be NULL.
 * @return GS_OK; GS_EIO (the batch is rolled back and lost; the store stays usable).
 */
int gs_usage_tick(struct gs_usage_store *s, int64_t now_ms, bool *committed);

/**
 * Commits the open batch now with heartbeat now_ms (Unix ms). @return GS_OK; GS_EIO as above.
 */
int gs_usage_commit(struct gs_usage_store *s, int64_t now_ms);

/**
 * Counts the allocation intervals whose pod uid begins with prefix (committed or in the open
 * batch), so a writer can refuse to record what the store already holds: a replay's pods are
 * "replay-<start s>-<n>", the same for every run from the same --start-time.
 * @param prefix  compared byte for byte (no pattern characters); borrowed.
 * @param n       receives the count.
 * @return GS_OK; GS_EINVAL (NULL prefix); GS_EIO (the message names the store).
 */
int gs_usage_count_uid_prefix(struct gs_usage_store *s, const char *prefix, int64_t *n);

/**
 * Drops the open batch (rolls its transaction back): what was written since the last commit is
 * lost, the store stays usable. No-op without an open batch. For a writer that meets an error
 * half-way through what it meant to commit together (report ingest).
 */
void gs_usage_rollback(struct gs_usage_store *s);

/**
 * Closes the intervals a crashed writer left open: each one whose pod uid is not in running[]
 * ends at the last committed heartbeat (never before its own start) with reason "recovered";
 * intervals of running pods stay open. Call once after gs_usage_open() by a new writer.
 * @param running  n uids of pods the caller knows are running now (reconciled against the
 *                 cluster); borrowed; NULL when n == 0.
 * @param closed   receives the number of intervals closed; may be NULL.
 * @return GS_OK; GS_EIO.
 */
int gs_usage_recover(struct gs_usage_store *s, const char *const *running, uint32_t n,
                     uint32_t *closed);

/**
 * The underlying SQLite handle (type sqlite3 *), for the report and tests to read with their own
 * queries. Borrowed; valid until gs_usage_close().
 */
void *gs_usage_db(struct gs_usage_store *s);

/* ---- the recorder: the engine's events into the store ----------------------------------- */

/** How a recorder names what it records. Borrowed by gs_usage_recorder_new(). */
struct gs_usage_recorder_config {
    struct gs_usage_store *store; /**< borrowed; outlives the recorder */
    int64_t epoch_ms;       /**< Unix ms added to the engine's now_ms (replay: --start-time) */
    const char *uid_prefix; /**< for pods without a uid: uid = prefix + pod handle (copied;
                                 NULL = "pod-") */
};

struct gs_usage_recorder;

/** Creates a recorder. @return GS_OK; GS_EINVAL (no store); GS_ENOMEM. */
int gs_usage_recorder_new(const struct gs_usage_recorder_config *cfg,
                          struct gs_usage_recorder **out);

/** Frees a recorder (not its store). NULL is a no-op. */
void gs_usage_recorder_free(struct gs_usage_recorder *r);

/** What the caller knows of a pod that the engine does not. Strings borrowed. */
struct gs_usage_pod_names {
    const char *team;           /**< the gpusched.io/team label (pod, else namespace), or NULL:
                                     the queue's top-level ancestor */
    const char *priority_class; /**< PriorityClass name, or NULL (not recorded) */
};

/**
 * Records one engine event: BIND/BACKFILL/ADOPT open an interval (pod, queue and its path, team,
 * PriorityClass, node and per GPU what the placement grants); EVICT, FINISH and DELETE of a
 * running pod end it with the matching reason (and the preemptor's uid); SUBMIT and EVICT set
 * when the pod began waiting. Then counts the event (gs_usage_tick()). Call it from the engine's
 * on_event callback; it reads the engine and cluster, never changes them. The first error is
 * kept (gs_usage_recorder_error()) and later events are ignored.
 * @param names  for BIND/BACKFILL/ADOPT: what the engine does not know; may be NULL.
 */
void gs_usage_recorder_on_event(struct gs_usage_recorder *r, const struct gs_cluster *c,
                                const struct gs_engine *e, const struct gs_event *ev,
                                const struct gs_usage_pod_names *names);

/**
 * Brings capacity intervals in line with the cluster at now_ms (engine time): opens one for each
 * GPU that is new or changed health, ends those of GPUs that went away or changed health. Also
 * records a quota snapshot of each queue whose quota, limit, fair share, allocation, name or path
 * changed since the recorder's last snapshot of it (the report reads snapshots as a step
 * function, so an unchanged one is not written). Call at the start and whenever nodes may have
 * changed (the replay calls it on each sample).
 * @return GS_OK, or the first error (kept as for events).
 */
int gs_usage_recorder_sync(struct gs_usage_recorder *r, const struct gs_cluster *c,
                           const struct gs_engine *e, int64_t now_ms);

/**
 * Ends every open capacity interval at now_ms (engine time; the recording stops) and commits.
 * Allocation intervals of pods still running stay open: they are running.
 * @return GS_OK, or the first error.
 */
int gs_usage_recorder_finish(struct gs_usage_recorder *r, int64_t now_ms);

/** The first error, GS_OK when none. */
int gs_usage_recorder_error(const struct gs_usage_recorder *r);

#endif /* GPUSCHED_USAGE_H */
