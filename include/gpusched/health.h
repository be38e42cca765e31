/*
 * Per-GPU health, as the device plugin reports it to kubelet ("Healthy" / "Unhealthy").
 *
 * A GPU turns Unhealthy on a critical event: a double-bit ECC error, or an XID that is not on
 * the ignore list. The default list is the one NVIDIA's device plugin ships, the XIDs an
 * application causes (13, 31, 43, 45, 68, 109). Unlike that plugin, which never marks a GPU
 * healthy again (k8s-device-plugin issues #234 and #1014), a GPU here recovers: once no new
 * critical error has come for a quiet period, a caller-supplied probe (typically a backend
 * query of the GPU) is run, and when it succeeds the GPU is Healthy again; when it fails the
 * probe is retried after probe_retry_ms. A new critical error while Unhealthy restarts the
 * quiet period.
 *
 * The machine is pure: time comes from an injected clock, the probe and the log are
 * callbacks, and nothing here does I/O. Every transition goes to the log callback and is
 * counted; every XID is counted by code, ignored ones included.
 *
 * Not thread-safe: one thread owns a gs_health (the agent's GPU loop) and hands copies of the
 * counters to others (the exporter).
 */
#ifndef GPUSCHED_HEALTH_H
#define GPUSCHED_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/gpu.h"

/** Most XID codes on the ignore list. */
#define GS_HEALTH_IGNORED_MAX 64
/** Distinct XID codes counted per GPU; XIDs of further codes go to xid_other. */
#define GS_HEALTH_XID_CODES_MAX 32
/** Default quiet period before a recovery probe, ms (5 minutes). */
#define GS_HEALTH_DEFAULT_QUIET_MS 300000
/** Default wait between failed probes, ms. */
#define GS_HEALTH_DEFAULT_PROBE_RETRY_MS 30000

/** The two states of the device plugin API. */
enum gs_health_state {
    GS_HEALTH_HEALTHY = 0,
    GS_HEALTH_UNHEALTHY = 1,
};

/** Why a transition happened. */
enum gs_health_reason {
    GS_HEALTH_REASON_XID = 1,       /**< a critical (not ignored) XID */
    GS_HEALTH_REASON_ECC_DBE = 2,   /**< a double-bit ECC error */
    GS_HEALTH_REASON_RECOVERED = 3, /**< quiet period over and the probe succeeded */
};

/** Settings. Fill with gs_health_config_default(), then change what differs. */
struct gs_health_config {
    uint32_t n_ignored;                           /**< entries used in ignored_xids */
    uint64_t ignored_xids[GS_HEALTH_IGNORED_MAX]; /**< XIDs that never make a GPU Unhealthy */
    int64_t quiet_ms;       /**< quiet period before the first probe; < 0: never recover */
    int64_t probe_retry_ms; /**< wait after a failed probe before the next, > 0 */
};

/** One transition, as handed to the log callback. */
struct gs_health_transition {
    uint32_t gpu;                 /**< GPU index */
    enum gs_health_state from;    /**< state before */
    enum gs_health_state to;      /**< state after */
    enum gs_health_reason reason; /**< why */
    uint64_t xid;                 /**< the XID for GS_HEALTH_REASON_XID, else 0 */
    int64_t t_ms;                 /**< clock at the transition */
    const char *text;             /**< one line for a log, e.g. "GPU 3: XID 79: Healthy ->
                                       Unhealthy"; valid during the callback only */
};

/** Count of one XID code. */
struct gs_health_xid_count {
    uint64_t xid;   /**< the code */
    uint64_t count; /**< events seen */
};

/** Counters of one GPU since gs_health_new(). Plain value record. */
struct gs_health_counters {
    uint64_t to_unhealthy;   /**< transitions Healthy -> Unhealthy */
    uint64_t recoveries;     /**< transitions Unhealthy -> Healthy */
    uint64_t probe_failures; /**< recovery probes that failed */
    uint64_t ecc_dbe_events; /**< double-bit ECC events */
    uint64_t xid_total;      /**< XID events of every code, ignored ones included */
    uint32_t n_xid;          /**< entries used in xid */
    struct gs_health_xid_count xid[GS_HEALTH_XID_CODES_MAX]; /**< by code, ascending */
    uint64_t xid_other; /**< XIDs whose code did not fit in xid */
};

/**
 * Runs a recovery probe of one GPU: a cheap query that fails when the GPU does not answer.
 * @return GS_OK when the GPU answers; any negative code otherwise.
 */
typedef int (*gs_health_probe_fn)(void *ctx, uint32_t gpu);

/** Receives each transition; must not call back into the gs_health. */
typedef void (*gs_health_log_fn)(void *ctx, const struct gs_health_transition *t);

/** The caller's side of a gs_health. */
struct gs_health_callbacks {
    gs_health_probe_fn probe; /**< required */
    gs_health_log_fn log;     /**< may be NULL */
    void *ctx;                /**< passed to both */
};

struct gs_health;

/**
 * Fills a config with the defaults: ignored XIDs 13, 31, 43, 45, 68, 109 (those of NVIDIA's
 * device plugin), quiet_ms GS_HEALTH_DEFAULT_QUIET_MS, probe_retry_ms
 * GS_HEALTH_DEFAULT_PROBE_RETRY_MS.
 */
void gs_health_config_default(struct gs_health_config *cfg);

/**
 * Replaces the ignore list with a comma-separated list of XID codes ("13, 31,43"); "" empties
 * it (every XID is then critical). Spaces around codes are allowed.
 * @return GS_OK; GS_EPARSE (not a list of decimal codes 1..2^32-1); GS_ELIMIT (more than
 *         GS_HEALTH_IGNORED_MAX codes); GS_EINVAL (NULL). On failure cfg is unchanged.
 */
int gs_health_config_set_ignored(struct gs_health_config *cfg, const char *list);

/** Whether cfg ignores the XID code. */
bool gs_health_xid_ignored(const struct gs_health_config *cfg, uint64_t xid);

/**
 * Creates the machine for n_gpus GPUs, all Healthy.
 * @param cfg    copied.
 * @param clock  only now_ms is used; copied; its ctx must outlive the gs_health.
 * @param cb     copied; probe required.
 * @param out    receives the machine; free with gs_health_free().
 * @return GS_OK; GS_EINVAL (NULL argument, n_gpus > GS_GPU_MAX, probe_retry_ms <= 0, more
 *         than GS_HEALTH_IGNORED_MAX ignored XIDs); GS_ENOMEM.
 */
int gs_health_new(const struct gs_health_config *cfg, uint32_t n_gpus, const struct gs_clock *clock,
                  const struct gs_health_callbacks *cb, struct gs_health **out);

/** Frees the machine. NULL is a no-op. */
void gs_health_free(struct gs_health *h);

/**
 * Feeds one event from a GPU backend. Counts it; a double-bit ECC error or a non-ignored XID
 * makes the GPU Unhealthy (logged once, on the transition) and restarts its quiet period. An
 * event for GS_GPU_INDEX_ALL applies to every GPU.
 * @return GS_OK; GS_ERANGE (gpu_index not below n_gpus, state unchanged); GS_EINVAL.
 */
int gs_health_on_event(struct gs_health *h, const struct gs_gpu_event *ev);

/**
 * Runs the recovery probes that are due: for each Unhealthy GPU whose quiet period is over
 * and whose retry time has come, calls the probe; success makes it Healthy (logged).
 * @return the number of GPUs that recovered (>= 0); GS_EINVAL for NULL.
 */
int gs_health_tick(struct gs_health *h);

/**
 * Time at which gs_health_tick() next has work (a probe falls due), for the caller's wait.
 * @return clock time in ms; INT64_MAX when every GPU is Healthy or recovery is off.
 */
int64_t gs_health_next_due_ms(const struct gs_health *h);

/** State of a GPU; GS_HEALTH_UNHEALTHY for an index out of range. */
enum gs_health_state gs_health_state(const struct gs_health *h, uint32_t gpu);

/**
 * Copies a GPU's counters.
 * @return GS_OK; GS_ERANGE (no such GPU); GS_EINVAL.
 */
int gs_health_counters(const struct gs_health *h, uint32_t gpu, struct gs_health_counters *out);

/** "Healthy" or "Unhealthy", the strings of the device plugin API. */
const char *gs_health_state_name(enum gs_health_state s);

#endif /* GPUSCHED_HEALTH_H */
