/*
 * An events.k8s.io/v1 Event recorder for pods, aggregating as client-go's events recorder
 * (k8s.io/client-go/tools/events) does: the same reason about the same pod within a series
 * window is one Event whose `series` (count, lastObservedTime) grows, and an Event is written at
 * most once per repeat period; a count that grew meanwhile is patched in by gs_kevents_flush().
 * The Event's note stays the first occurrence's: the API keeps a note immutable (a patch of it
 * is answered 422). Used by `gpusched scheduler` (Scheduled, FailedScheduling, Preempted).
 *
 * A fixed table of slots keyed by a hash of namespace, pod and reason holds the series; a
 * collision only starts a new Event early. Failures to write are reported through the log
 * callback and otherwise ignored: an Event is for people. Not thread-safe; one recorder per
 * client, used by the client's thread. Events API: kubernetes/api events/v1 (Event,
 * EventSeries).
 */
#ifndef GPUSCHED_KEVENTS_H
#define GPUSCHED_KEVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/kube.h"

/** Options of a recorder; zero-initialise and set what differs from the defaults. */
struct gs_kevents_opts {
    const char *controller; /**< reportingController (copied); NULL = "gpusched" */
    const char *instance;   /**< reportingInstance (copied; required), e.g. the holder identity */
    int64_t repeat_ms;      /**< least time between two writes of one Event; 0 = 10000 */
    int64_t series_ms;      /**< window of one series from its first occurrence; 0 = 600000 */
    /** Receives a sentence for each write that failed; may be NULL. */
    void (*log)(void *ud, const char *msg);
    void *log_ud; /**< passed to log */
};

/** Counters of a recorder. */
struct gs_kevents_stats {
    uint64_t created;  /**< Events created (POST accepted) */
    uint64_t counted;  /**< occurrences counted into an existing Event's series */
    uint64_t patched;  /**< series patches accepted */
    uint64_t failures; /**< writes refused or failed */
};

/** A recorder. Opaque. */
struct gs_kevents;

/**
 * Makes a recorder writing through client c (borrowed). Nothing is sent. New Events are created
 * with async requests of c, answered inside gs_kube_client_step: free c (which drops requests
 * still in flight without answering them), or step it until gs_kube_client_in_flight() is 0,
 * before freeing the recorder.
 * @return GS_OK; GS_EINVAL (NULL c, out or instance); GS_ENOMEM.
 */
int gs_kevents_new(struct gs_kube_client *c, const struct gs_kevents_opts *opts,
                   struct gs_kevents **out);

/** Frees a recorder (counts not yet written are lost: flush first) and what it keeps for creates
 *  the client never answered; the client must be gone or idle (see gs_kevents_new). NULL is a
 *  no-op. */
void gs_kevents_free(struct gs_kevents *r);

/**
 * Records one occurrence of an Event about a pod: a new Event (POST, name "POD.<hex ns>" as
 * client-go makes it) when none of this reason about this pod is in its series window, else
 * one more in its series, patched at once when the repeat period since the last write is over.
 * A new Event is sent without waiting (its answer comes in gs_kube_client_step; a refused one
 * is logged and its slot freed); a series patch blocks for one request.
 * @param ns, pod, uid  the pod (uid may be NULL or "");
 * @param type          "Normal" or "Warning";
 * @param reason        e.g. "FailedScheduling"; @param action  e.g. "Scheduling";
 * @param note          human text, cut to the API's 1 kB.
 */
void gs_kevents_post(struct gs_kevents *r, const char *ns, const char *pod, const char *uid,
                     const char *type, const char *reason, const char *action, const char *note);

/**
 * Patches the series counts that grew since their Event was last written and whose repeat
 * period is over (all of them with force). Call it about once a second and at exit.
 */
void gs_kevents_flush(struct gs_kevents *r, bool force);

/**
 * Counts the Event creates sent and not answered yet: running, or waiting behind other requests
 * for one of the client's slots (Events wait behind Bindings: kube.h). Those left when the
 * client is freed are dropped, the API server having maybe never seen them.
 * @param reason  count only the Events of this reason ("Scheduled"; compared on its first 63
 *                characters); NULL counts them all.
 * @return the count; 0 for a NULL recorder.
 */
uint64_t gs_kevents_unanswered(const struct gs_kevents *r, const char *reason);

/** Copies the counters. */
void gs_kevents_get_stats(const struct gs_kevents *r, struct gs_kevents_stats *st);

#endif /* GPUSCHED_KEVENTS_H */
