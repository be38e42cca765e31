/*
 * Operations endpoints of `gpusched scheduler`: /healthz, /readyz and /metrics (Prometheus text
 * exposition format 0.0.4) over libmicrohttpd, whose internal thread serves them. The scheduler
 * loop records what it does through the gs_schedmetrics_* calls; a scrape renders the counters.
 * Every series is listed in docs/internals/live-cluster.md ("Metrics"); names and histogram
 * buckets follow kube-scheduler's where it has one (pkg/scheduler/metrics/metrics.go):
 *  - gpusched_scheduling_attempt_duration_seconds{result}: kube-scheduler's
 *    scheduler_scheduling_attempt_duration_seconds buckets, ExponentialBuckets(0.001, 2, 15);
 *  - gpusched_pod_scheduling_duration_seconds: scheduler_pod_scheduling_sli_duration_seconds'
 *    buckets, ExponentialBuckets(0.01, 2, 20);
 *  - gpusched_scheduling_decision_duration_seconds: ours, the attempts' observations for every
 *    result in ExponentialBuckets(4e-6, 2, 20), 4 us to 2.1 s, since a decision of the core
 *    takes tens of microseconds and kube-scheduler's buckets put all of them in the first.
 *
 * Thread-safety: every function may be called from any thread; one mutex guards the counters,
 * held for a few additions by the recorders and for one render by a scrape.
 */
#ifndef GPUSCHED_SCHEDMETRICS_H
#define GPUSCHED_SCHEDMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_engine;
struct gs_cluster;
struct gs_workload;

/** Most node pools shown; those past it are counted in gpusched_metrics_pools_left_out. */
#define GS_SCHEDMETRICS_POOLS_MAX 64

/** Most queues shown; those past it are counted in gpusched_metrics_queues_left_out. */
#define GS_SCHEDMETRICS_QUEUES_MAX 512

/** The node label whose value names a node's pool unless the caller picks another. */
#define GS_SCHEDMETRICS_POOL_LABEL "nvidia.com/gpu.product"

/** Outcome of one pod's scheduling attempt. */
enum gs_sched_result {
    GS_SCHED_SCHEDULED = 0,     /**< bound */
    GS_SCHED_UNSCHEDULABLE = 1, /**< it waits, with a reason */
    GS_SCHED_ERROR = 2,         /**< the bind was refused or failed */
};

/** Counters and the HTTP server. Opaque. */
struct gs_schedmetrics;

/** @return GS_OK; GS_EINVAL (NULL out); GS_ENOMEM. Nothing is served yet. */
int gs_schedmetrics_new(struct gs_schedmetrics **out);

/** Stops the server (waiting for its thread) and frees. NULL is a no-op. */
void gs_schedmetrics_free(struct gs_schedmetrics *m);

/**
 * Serves /healthz (200 "ok" while the process runs), /readyz (200 "ok" once set ready, else 503)
 * and /metrics on addr, from libmicrohttpd's own thread. Not thread-safe against itself or
 * gs_schedmetrics_free: call it once, from the owner's thread.
 * @param addr      "HOST:PORT" with a numeric host, e.g. "127.0.0.1:10259" or "[::1]:10259";
 *                  port 0 picks a free one.
 * @param port_out  receives the port bound; may be NULL.
 * @return GS_OK; GS_EINVAL (bad address, already serving); GS_EIO (cannot bind).
 */
int gs_schedmetrics_serve(struct gs_schedmetrics *m, const char *addr, uint16_t *port_out);

/**
 * Counts one attempt of the given result (gpusched_scheduling_attempts_total) and observes its
 * decision time in gpusched_scheduling_attempt_duration_seconds{result} and in
 * gpusched_scheduling_decision_duration_seconds (every result, finer buckets): the per-pod share of
 * the last cycle recorded with gs_schedmetrics_cycle() (its duration over the pods it decided).
 * The core decides every pending pod in one pass with shared state (fair shares, the queue
 * order), so a pod's own time is not separable; the share is the mean decision time of the
 * pods of that cycle. A pod bound later than the cycle that decided it (a preemptor whose
 * victims had to leave, a gang member's retried Binding) is charged the latest cycle's share.
 * Before any cycle with a decision the attempt is counted but not observed.
 */
void gs_schedmetrics_attempt(struct gs_schedmetrics *m, enum gs_sched_result r);

/** Counts one Binding sent: ok true when the server accepted it. */
void gs_schedmetrics_bind(struct gs_schedmetrics *m, bool ok);

/**
 * Counts one eviction. @param reason  "preemption", "reclaim", "gang", "node-lost"; anything
 * else (or NULL) is counted as "other".
 */
void gs_schedmetrics_eviction(struct gs_schedmetrics *m, const char *reason);

/**
 * Records one cycle: its duration in gpusched_cycle_duration_seconds and the pods pending after
 * it (gpusched_pending_pods).
 * @param seconds  the cycle's duration (the core's decisions and their translation), >= 0.
 * @param pending  pods of ours waiting after it.
 * @param decided  pods it decided (bound or found unschedulable; evictions are not decisions):
 *                 when > 0, seconds / decided becomes the share gs_schedmetrics_attempt()
 *                 observes; 0 keeps the last share.
 */
void gs_schedmetrics_cycle(struct gs_schedmetrics *m, double seconds, uint32_t pending,
                           uint32_t decided);

/**
 * Observes one pod bound, in gpusched_pod_scheduling_duration_seconds.
 * @param seconds  from the pod's creation (metadata.creationTimestamp, whole seconds; when it
 *                 was first seen if that is earlier or there is none) to the Binding's
 *                 acceptance; negative (unknown) is ignored.
 */
void gs_schedmetrics_pod_scheduled(struct gs_schedmetrics *m, double seconds);

/**
 * Takes a snapshot of the queue and node-pool series from the engine and its cluster, replacing
 * the last one (the work is done before the mutex is taken; the swap under it). It passes over
 * every node (about 14 ms at 5,000 nodes in a Debug build, bench/bench_schedmetrics.c), so the
 * scheduler calls it once a second, not once a cycle:
 *  - per queue (engine ids 1.., at most GS_SCHEDMETRICS_QUEUES_MAX): allocated, fair share,
 *    quota and limit by resource (gpu in GPUs, cpu in cores, memory in bytes), pending pods;
 *  - per pool (the value of node label pool_label, "" for nodes without it, at most
 *    GS_SCHEDMETRICS_POOLS_MAX in node order): GPUs allocated, free and unhealthy (a healthy
 *    GPU's allocated part is the share its pods hold: milli used / capacity (on a
 *    fractions GPU with known memory the larger of that and memory used / memory), time-slicing
 *    replicas used / offered, MIG compute slices held / slices; free is the rest; an unhealthy
 *    GPU counts whole as unhealthy), and the FGD fragmentation (frag.h, gs_frag_node() of each
 *    node under the workload w: the expected idle GPU a task of the target workload could not
 *    use) summed over the pool's nodes, in GPUs. Without a workload no fragmentation is shown.
 * @param e           the engine; NULL clears the snapshot. Borrowed during the call.
 * @param c           its cluster; NULL shows no pools. Borrowed during the call.
 * @param w           the target workload (gs_kworld_workload()); may be NULL.
 * @param pool_label  the node label naming pools; NULL means GS_SCHEDMETRICS_POOL_LABEL.
 * @return GS_OK; GS_EINVAL (m NULL); GS_ENOMEM (the last snapshot is kept).
 */
int gs_schedmetrics_observe(struct gs_schedmetrics *m, const struct gs_engine *e,
                            const struct gs_cluster *c, const struct gs_workload *w,
                            const char *pool_label);

/** One queue's charged GPUs as the accounting counts them (gs_schedmetrics_set_charges()). */
struct gs_schedmetrics_charge {
    const char *queue;  /**< leaf queue name; borrowed during the call */
    double gpu_seconds; /**< GPU-seconds charged so far by this process (a counter), >= 0 */
    double gpus;        /**< GPUs charged now (a gauge), >= 0 */
};

/**
 * Replaces the usage accounting series (the scheduler's --accounting, docs/usage-accounting.md):
 * gpusched_usage_charged_gpu_seconds_total{queue} (counter) and gpusched_usage_charged_gpus{queue}
 * (gauge), charged by capacity as the store charges (usage.h, gs_usage_charge_gpus()). Until
 * the first call neither family is shown. At most GS_SCHEDMETRICS_QUEUES_MAX rows are kept.
 * @param rows  n rows; borrowed (names copied).
 * @return GS_OK; GS_EINVAL (m NULL, rows NULL with n > 0); GS_ENOMEM (the last rows are kept).
 */
int gs_schedmetrics_set_charges(struct gs_schedmetrics *m,
                                const struct gs_schedmetrics_charge *rows, uint32_t n);

/** Counts one relist of a watched collection after its first list (gpusched_watch_relists_total).
 */
void gs_schedmetrics_relist(struct gs_schedmetrics *m);

/** Sets gpusched_leader (1 while this replica leads or no election runs). */
void gs_schedmetrics_set_leader(struct gs_schedmetrics *m, bool leader);

/** Sets readiness (caches synced). */
void gs_schedmetrics_set_ready(struct gs_schedmetrics *m, bool ready);

/**
 * Renders the metrics as /metrics serves them.
 * @param buf  receives the text, NUL-terminated, truncated to cap (buf may be NULL when cap is 0).
 * @return the length of the whole text (as snprintf: >= cap means it was truncated).
 */
size_t gs_schedmetrics_render(struct gs_schedmetrics *m, char *buf, size_t cap);

#endif /* GPUSCHED_SCHEDMETRICS_H */
