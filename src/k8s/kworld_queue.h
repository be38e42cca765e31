/*
 * Internal to the Kubernetes translation (kworld*.c): Queue objects that change while the
 * scheduler runs. A Queue known to the engine that comes again (MODIFIED, or ADDED by a relist)
 * updates the engine's queue in place (gs_engine_update_queue(): nothing is evicted, a lowered
 * limit applies to later placements); a DELETED one is deleted in the engine
 * (gs_engine_delete_queue(): its pending pods wait with "queue NAME does not exist", its running
 * pods stay charged until they end) and its name no longer takes new pods; the same name created
 * again brings it back. A queue is not moved: a changed spec.parentQueue is a warning and the
 * queue stays under its parent. Two Queue kinds (gpusched's, KAI's) may both name a queue: the
 * first one seen makes it, the other is refused with a warning. PodGroups edited after their
 * gang exists are here too (gs__kqueue_gang_changed()).
 */
#ifndef GPUSCHED_K8S_KWORLD_QUEUE_H
#define GPUSCHED_K8S_KWORLD_QUEUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/tenant.h"

/** Who made each queue. Zeroed, then gs__kqueue_init(). */
struct gs__kqueues {
    json_t *groups; /**< queue name -> the API group ("scheduling.run.ai") of its Queue object;
                         no entry for a queue without one (the default queue made at start) or
                         deleted */
    json_t *warned; /**< "name\x1fgroup" of the Queues refused as another kind's name */
    void (*on_warning)(void *ctx, const char *msg); /**< may be NULL */
    void *ctx;
};

/** @return GS_OK; GS_ENOMEM. */
int gs__kqueue_init(struct gs__kqueues *s, void (*on_warning)(void *ctx, const char *msg),
                    void *ctx);

/** Frees what s holds; a zeroed s is a no-op. */
void gs__kqueue_fini(struct gs__kqueues *s);

/**
 * Whether a Queue object of apiVersion `api` (NULL: none) named `name` is refused because a
 * Queue of another API group made the queue of that name; warns (once per name and group
 * while the other holds it) when so.
 */
bool gs__kqueue_other_kind(struct gs__kqueues *s, const char *name, const char *api);

/**
 * Records that the Queue object of apiVersion `api` made or updated queue `name`.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__kqueue_own(struct gs__kqueues *s, const char *name, const char *api);

/**
 * Updates engine queue `id` (named q->name) from a Queue object read again. A q->parent other
 * than the queue's is a warning naming both (`parent` is the new spec.parentQueue, NULL or ""
 * for none) and the queue keeps its parent. Puts the name back in `queues` (name -> engine id,
 * the queues pods may name) after a delete, and records `api` as its owner.
 * @param q    the spec as read; q->parent may be changed to the queue's own.
 * @param err  on GS_EINVAL: "Queue NAME: ..." (cap bytes).
 * @return GS_OK; GS_EINVAL the engine refused the new spec (the queue keeps its old one);
 *         GS_ENOMEM.
 */
int gs__kqueue_update(struct gs__kqueues *s, struct gs_engine *e, json_t *queues, uint32_t id,
                      struct gs_queue_spec *q, const char *parent, const char *api, char *err,
                      size_t cap);

/**
 * Applies a DELETED Queue object: deletes its queue in the engine and drops its name from
 * `queues`. A Queue of another API group than the one that made the queue, or of a name not
 * known, changes nothing.
 * @param err  on GS_EINVAL: "Queue NAME: ..." (cap bytes).
 * @return GS_OK; GS_EINVAL a queue with child queues that are not deleted (it stays as it was);
 *         GS_ENOMEM.
 */
int gs__kqueue_delete(struct gs__kqueues *s, struct gs_engine *e, json_t *queues, const json_t *obj,
                      char *err, size_t cap);

/**
 * A PodGroup edited once its gang exists (its first member came): spec.minMember applies while
 * the gang has not started (gs_engine_set_gang_min_member()), else a warning names the PodGroup
 * and says the gang keeps its minimum; the grace period applies always.
 * @param key       "ns/name" of the PodGroup, for the warning.
 * @param gang      its engine gang id.
 * @param min       spec.minMember, >= 1.
 * @param grace_s   its grace period, s (0 ..= 1e9).
 * @return GS_OK; GS_EINVAL an unknown gang.
 */
int gs__kqueue_gang_changed(struct gs__kqueues *s, struct gs_engine *e, const char *key,
                            uint32_t gang, long long min, long long grace_s);

#endif
