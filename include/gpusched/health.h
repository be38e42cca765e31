/*
 * Per-GPU health, as the device plugin reports it to kubelet ("Healthy" / "Unhealthy").
 *
 * A GPU turns Unhealthy on a critical event: a double-bit ECC error, an XID that is not on
 * the ignore list, or the GPU not answering (NVML's GPU_IS_LOST from a query or from the event
 * wait, a sample that fails as a whole, a failed probe). The default ignore list is the one
 * NVIDIA's device plugin ships, the XIDs an application causes (13, 31, 43, 45, 68, 109).
 *
 * How it recovers depends on the cause. Unlike NVIDIA's plugin, which never marks a GPU
 * healthy again (k8s-device-plugin issues #234 and #1014), a GPU Unhealthy for a *contained*
 * error (XID 94, a double-bit ECC error and every other critical XID not on the reset list)
 * recovers: once no new critical error has come for a quiet period, a caller-supplied probe
 * (a backend query of the GPU) is run, and when it succeeds the GPU is Healthy again; when it
 * fails the probe is retried after probe_retry_ms. A new critical error while Unhealthy
 * restarts the quiet period. A GPU Unhealthy for an error that NVIDIA documents as needing a
 * GPU reset (the reset list: default 48, 62, 64, 74, 79, 95, 119, 120, 140; XID 79 "fallen
 * off the bus", 95 "uncontained ECC error") or because it stopped answering is Healthy again
 * only when it is seen reset: the backend lost the GPU and found it again (its `resets`
 * count, handed back by the probe, went up), or an operator clears it (gs_health_clear). A
 * successful probe alone is not enough: a GPU that fell off the bus may still answer cached
 * queries. The source of the reset list is NVIDIA's XID catalog
 * (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket": RESET_GPU) and its memory error
 * management guide (a contained error needs no reset); docs/agent.md has the table.
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
/** Most XID codes on the reset list. */
#define GS_HEALTH_RESET_MAX 64

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
    GS_HEALTH_REASON_LOST = 4,      /**< the GPU does not answer (GPU_IS_LOST, failed sample) */
    GS_HEALTH_REASON_RESET = 5,     /**< the backend found the GPU again after losing it */
    GS_HEALTH_REASON_CLEARED = 6,   /**< an operator cleared it (gs_health_clear) */
};

/** Settings. Fill with gs_health_config_default(), then change what differs. */
struct gs_health_config {
    uint32_t n_ignored;                           /**< entries used in ignored_xids */
    uint64_t ignored_xids[GS_HEALTH_IGNORED_MAX]; /**< XIDs that never make a GPU Unhealthy */
    int64_t quiet_ms;       /**< quiet period before the first probe; < 0: never recover */
    int64_t probe_retry_ms; /**< wait after a failed probe before the next, > 0 */
    uint32_t n_reset;       /**< entries used in reset_xids */
    uint64_t reset_xids[GS_HEALTH_RESET_MAX]; /**< XIDs after which only a reset (or an
                                                   operator) makes the GPU Healthy again */
};

/** One transition, as handed to the log callback. */
struct gs_health_transition {
    uint32_t gpu;                 /**< GPU index */
    enum gs_health_state from;    /**< state before */
    enum gs_health_state to;      /**< state after */
    enum gs_health_reason reason; /**< why */
    uint64_t xid;                 /**< the XID for GS_HEALTH_REASON_XID, else 0 */
    bool needs_reset;             /**< to Unhealthy: only a reset or an operator recovers it */
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
    uint64_t failed_samples; /**< samples fed with a failure (gs_health_on_sample) */
    uint64_t ecc_dbe_events; /**< double-bit ECC events */
    uint64_t xid_total;      /**< XID events of every code, ignored ones included */
    uint32_t n_xid;          /**< entries used in xid */
    struct gs_health_xid_count xid[GS_HEALTH_XID_CODES_MAX]; /**< by code, ascending */
    uint64_t xid_other; /**< XIDs whose code did not fit in xid */
};

/**
 * Runs a recovery probe of one GPU: a cheap query that fails when the GPU does not answer.
 * @param resets  on GS_OK, receives the backend's count of times it lost the GPU and found it
 *                again (gs_gpu_sample.resets); left alone when the probe does not know.
 * @return GS_OK when the GPU answers; any negative code otherwise.
 */
typedef int (*gs_health_probe_fn)(void *ctx, uint32_t gpu, uint64_t *resets);

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
 * device plugin), reset XIDs 48, 62, 64, 74, 79, 95, 119, 120, 140, quiet_ms
 * GS_HEALTH_DEFAULT_QUIET_MS, probe_retry_ms GS_HEALTH_DEFAULT_PROBE_RETRY_MS.
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
 * Replaces the reset list, in the syntax of gs_health_config_set_ignored.
 * @return as gs_health_config_set_ignored (GS_ELIMIT past GS_HEALTH_RESET_MAX codes).
 */
int gs_health_config_set_reset(struct gs_health_config *cfg, const char *list);

/** Whether cfg puts the XID code on the reset list. */
bool gs_health_xid_needs_reset(const struct gs_health_config *cfg, uint64_t xid);

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
 * Feeds one event from a GPU backend. Counts it; a double-bit ECC error, a non-ignored XID or
 * GS_GPU_EVENT_LOST makes the GPU Unhealthy (logged once, on the transition) and restarts its
 * quiet period; an XID on the reset list and LOST also mark it as needing a reset (kept until
 * it recovers, even if a contained error follows). An event for GS_GPU_INDEX_ALL applies to
 * every GPU.
 * @return GS_OK; GS_ERANGE (gpu_index not below n_gpus, state unchanged); GS_EINVAL.
 */
int gs_health_on_event(struct gs_health *h, const struct gs_gpu_event *ev);

/**
 * Feeds the outcome of one regular sample of a GPU (the agent samples every GPU each refresh
 * period). A failure (rc < 0: the GPU answers no query, GPU_IS_LOST) makes it Unhealthy with
 * reason LOST, needing a reset, and is counted in failed_samples. A success whose `resets` is
 * above the count seen when the GPU last needed a reset makes it Healthy (reason RESET) at
 * once. Any other success changes nothing (contained errors recover through gs_health_tick).
 * @param rc      the gs_gpu_sample return code.
 * @param resets  gs_gpu_sample.resets of a successful sample; ignored on failure.
 * @return GS_OK; GS_ERANGE (no such GPU); GS_EINVAL (NULL).
 */
int gs_health_on_sample(struct gs_health *h, uint32_t gpu, int rc, uint64_t resets);

/**
 * An operator's word that the GPU is fine (after a manual reset, say): an Unhealthy GPU is
 * Healthy again at once, reason CLEARED, whatever made it Unhealthy. A Healthy GPU is left
 * alone. @return GS_OK (1 when it changed the state, 0 when it was Healthy); GS_ERANGE;
 * GS_EINVAL.
 */
int gs_health_clear(struct gs_health *h, uint32_t gpu);

/**
 * Runs the recovery probes that are due: for each Unhealthy GPU whose quiet period is over
 * and whose retry time has come, calls the probe. A GPU Unhealthy for a contained error is
 * Healthy again when the probe succeeds (reason RECOVERED); one that needs a reset only when
 * the probe succeeds with a `resets` count above the one it had when it needed the reset
 * (reason RESET); otherwise the probe is retried after probe_retry_ms (a failed probe is
 * counted in probe_failures and, for a contained error, turns it into one that needs a reset:
 * the GPU stopped answering).
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
 * Why an Unhealthy GPU is Unhealthy (the reason of its last transition to Unhealthy:
 * XID, ECC_DBE or LOST); 0 for a Healthy GPU or an index out of range.
 */
enum gs_health_reason gs_health_reason_of(const struct gs_health *h, uint32_t gpu);

/** Whether an Unhealthy GPU waits for a reset (or an operator); false when Healthy. */
bool gs_health_needs_reset(const struct gs_health *h, uint32_t gpu);

/**
 * The reason as a metric label value: "xid", "ecc_dbe", "lost", "recovered", "reset",
 * "cleared"; "none" for 0.
 */
const char *gs_health_reason_name(enum gs_health_reason r);

/**
 * Copies a GPU's counters.
 * @return GS_OK; GS_ERANGE (no such GPU); GS_EINVAL.
 */
int gs_health_counters(const struct gs_health *h, uint32_t gpu, struct gs_health_counters *out);

/** "Healthy" or "Unhealthy", the strings of the device plugin API. */
const char *gs_health_state_name(enum gs_health_state s);

#endif /* GPUSCHED_HEALTH_H */
