/*
 * Operations endpoints of `gpusched scheduler`: /healthz, /readyz and /metrics (Prometheus text
 * exposition format 0.0.4) over libmicrohttpd, whose internal thread serves them. The scheduler
 * loop records what it does through the gs_schedmetrics_* calls; a scrape renders the counters.
 *
 * Thread-safety: every function may be called from any thread; one mutex guards the counters,
 * held for a few additions by the recorders and for one render by a scrape.
 */
#ifndef GPUSCHED_SCHEDMETRICS_H
#define GPUSCHED_SCHEDMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/** Counts one attempt of the given result. */
void gs_schedmetrics_attempt(struct gs_schedmetrics *m, enum gs_sched_result r);

/** Counts one Binding sent: ok true when the server accepted it. */
void gs_schedmetrics_bind(struct gs_schedmetrics *m, bool ok);

/**
 * Counts one eviction. @param reason  "preemption", "reclaim", "gang", "node-lost"; anything
 * else (or NULL) is counted as "other".
 */
void gs_schedmetrics_eviction(struct gs_schedmetrics *m, const char *reason);

/** Records one cycle's duration (seconds) and the pods pending after it. */
void gs_schedmetrics_cycle(struct gs_schedmetrics *m, double seconds, uint32_t pending);

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
