/*
 * `gpusched scheduler --accounting FILE`: the live scheduler's decisions into the usage store
 * (usage.h). Internal to the CLI; docs/usage-accounting.md says what is recorded and when.
 */
#ifndef GPUSCHED_CLI_SCHED_ACCT_H
#define GPUSCHED_CLI_SCHED_ACCT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/kworld.h"
#include "gpusched/schedmetrics.h"

struct gs__sched_acct;

/** What the scheduler's accounting did, for its exit log line. */
struct gs__sched_acct_stats {
    uint64_t opened;             /**< intervals opened */
    uint64_t closed;             /**< intervals ended by an event */
    uint64_t kept;               /**< intervals open in the file at start whose pods still ran */
    uint64_t recovered;          /**< intervals open in the file at start whose pods were gone,
                                      closed at the last heartbeat */
    uint64_t recovered_finished; /**< ... whose pods were seen Succeeded or Failed, closed at
                                      their containers' finish time */
    uint64_t commits;            /**< transactions committed */
    double commit_ms_total;      /**< wall time spent committing, ms */
    double commit_ms_max;        /**< longest commit, ms */
};

/**
 * Makes the accountant; the file is not touched until gs__sched_acct_start().
 * @param path       the SQLite file; borrowed, outlives it.
 * @param team_label the namespace (and pod) label naming a pod's team; borrowed.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__sched_acct_new(const char *path, const char *team_label, struct gs__sched_acct **out);

/**
 * Makes `a` a follower's (`gpusched accountant`): it records what the API server shows of
 * another process's decisions, not this world's. An adopted pod's interval starts at its bind
 * as the API server shows it (its PodScheduled=True condition's lastTransitionTime, else
 * status.startTime, else when first seen bound) and began to wait at its creation; a pod that
 * ends by deletion (or phase Failed) carrying the leader's eviction mark (sched_evict.h) ends at
 * the mark's decision time with its reason and preemptor uid; a finished one (phase Succeeded,
 * or Failed without a mark) at its containers' latest finishedAt, reason finished; other
 * deletions at the watch event's time, reason deleted. Times are kept inside [start, event].
 * Call before gs__sched_acct_start().
 */
void gs__sched_acct_follow(struct gs__sched_acct *a);

/**
 * Opens the store (creating it) and reads the intervals a previous writer left open: those of
 * pods adopted in the first cycle stay open (not opened twice); the rest are closed by
 * gs__sched_acct_reconcile(). Call once, when this replica first leads, before its first cycle.
 * @param msg  receives a sentence naming the file on failure.
 * @return GS_OK; gs_usage_open()'s errors.
 */
int gs__sched_acct_start(struct gs__sched_acct *a, char *msg, size_t cap);

/**
 * Notes what a watched object says that the world does not keep: a Namespace's team label, a
 * Pod's team label and PriorityClass name (by uid), and until the reconcile a finished Pod's
 * container finish time. Other kinds are ignored.
 */
void gs__sched_acct_observe(struct gs__sched_acct *a, const char *kind, bool deleted,
                            const json_t *obj);

/**
 * Records one world decision (called from the world's on_event, before anything else): BIND
 * (also adopted) opens an interval unless the pod has one open; EVICT (reason preemption,
 * reclaim, gang, node-lost), FINISH and DELETE end it. Reads the world's engine and cluster for
 * the queue, its path and the node's GPU model. Ignored before gs__sched_acct_start().
 */
void gs__sched_acct_event(struct gs__sched_acct *a, const struct gs_kworld *w,
                          const struct gs_kevent *ev);

/**
 * After the first cycle: ends the intervals left open by a previous writer whose pods were not
 * adopted (gone while no scheduler recorded): a pod observed (gs__sched_acct_observe()) in phase
 * Succeeded or Failed at its containers' latest state.terminated.finishedAt (at least the
 * interval's start), reason "finished"; the rest at the last committed heartbeat, reason
 * "recovered" (gs_usage_recover()); then opens capacity intervals of the world's GPUs and
 * snapshots its queues' quotas at now_ms (wall ms). Later calls do nothing.
 * @param w  the world after its first cycle; borrowed, outlives `a`.
 * @return GS_OK; GS_EIO; GS_ENOMEM.
 */
int gs__sched_acct_reconcile(struct gs__sched_acct *a, const struct gs_kworld *w, int64_t now_ms);

/**
 * Commits the open batch when the last commit is at least 1 s old (heartbeat now_ms, wall
 * clock): the bounded cost per loop turn is one commit a second. Every 60 s it also brings
 * capacity intervals (GPUs added, removed, changed health) and quota snapshots in line with
 * the world (gs_usage_recorder_sync()). Nothing before gs__sched_acct_reconcile().
 * @return GS_OK; GS_EIO.
 */
int gs__sched_acct_step(struct gs__sched_acct *a, int64_t now_ms);

/**
 * The GPUs charged per queue, live, for the scheduler's /metrics: each interval this process
 * opened (or adopted from a previous writer, from its adoption on) counts, while open, the GPUs
 * gs_usage_charge_gpus() charges for its grants, the same figure the store writes as its
 * gpus_charged; GPU-seconds accrue by the event times the world gives (wall ms) up to now_ms.
 * @param out  room for cap rows, by the leaf queue name ("-" for a pod without one) in the
 *             order queues were first charged; names borrowed until the next call on `a`.
 * @return the rows written (at most cap). 0 before gs__sched_acct_start().
 */
uint32_t gs__sched_acct_charges(struct gs__sched_acct *a, int64_t now_ms,
                                struct gs_schedmetrics_charge *out, uint32_t cap);

/** Commits and closes the store, frees `a`; NULL is a no-op. @return GS_OK; GS_EIO. */
int gs__sched_acct_free(struct gs__sched_acct *a, int64_t now_ms,
                        struct gs__sched_acct_stats *stats);

/** The store's last error text, or "" when none. */
const char *gs__sched_acct_errmsg(const struct gs__sched_acct *a);

#endif /* GPUSCHED_CLI_SCHED_ACCT_H */
