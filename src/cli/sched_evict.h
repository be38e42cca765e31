/*
 * How a gpusched eviction is told on the victim, so that a process that only watches the API
 * server (`gpusched accountant`) records it as the leader decided it: the leader writes the
 * annotation gpusched.io/evicted with its DisruptionTarget condition, in one status patch,
 * before the Eviction; the follower reads it back (else the condition alone). Pure: no I/O.
 * Internal to the CLI; docs/usage-accounting.md ("The accountant") says what is read.
 */
#ifndef GPUSCHED_CLI_SCHED_EVICT_H
#define GPUSCHED_CLI_SCHED_EVICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpusched/usage.h"

/** The victim's annotation: {"reason": WORD, "by": "ns/name", "byUid": UID, "atMs": MS}. */
#define GS__EVICTED_ANNOTATION "gpusched.io/evicted"

/** What a victim says of its eviction (gs__evict_of_pod()). */
struct gs__evict_seen {
    int64_t at_ms;         /**< when the leader decided it, Unix ms; -1 when unknown */
    enum gs_usage_end end; /**< evicted-preemption, -reclaim, -gang or node-lost */
    char by_uid[128];      /**< the preemptor's metadata.uid; "" when none or unknown */
};

/**
 * The annotation's value for a victim.
 * @param word    the world's eviction word: "preemption", "reclaim", "gang" or "node-lost".
 * @param by      "ns/name" of the pod that caused it, or NULL; by_uid its uid, or NULL.
 * @param at_ms   the decision's wall time, Unix ms.
 * @return a new string the caller frees; NULL when out of memory.
 */
char *gs__evict_note(const char *word, const char *by, const char *by_uid, int64_t at_ms);

/**
 * Reads how a pod was evicted by a scheduler. First the annotation GS__EVICTED_ANNOTATION
 * (reason word, byUid, atMs); else a DisruptionTarget condition of status True: reason
 * PreemptionByScheduler read by its message as gs__sched_mark_disruption_target() writes it
 * ("reclaiming resources for" -> reclaim, "gang ... released whole" -> gang, "node ... is gone"
 * -> node-lost, any other -> preemption; "(uid U)" after the preemptor's name gives by_uid), at
 * its lastTransitionTime; DeletionByTaintManager and DeletionByPodGC (the node went unready or
 * away) -> node-lost. Other reasons (EvictionByEvictionAPI alone: a drain; TerminationByKubelet)
 * are not a scheduler's eviction.
 * @param pod  a Pod object; borrowed.
 * @return true with *out filled; false (out untouched) when the pod carries no such mark.
 */
bool gs__evict_of_pod(const json_t *pod, struct gs__evict_seen *out);

#endif /* GPUSCHED_CLI_SCHED_EVICT_H */
