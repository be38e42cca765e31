/*
 * Dynamic MIG in a live cluster (issue 8): the two Node annotations by which `gpusched
 * scheduler --dynamic-mig` asks a node agent to re-partition one MIG GPU and the agent answers.
 *
 *  - gpusched.io/mig-plan (docs/schemas/mig-plan.schema.json), written by the scheduler:
 *    {"id": "...", "gpu": 0, "uuid": "GPU-...", "destroy": [{"profile": "1g.10gb",
 *    "start": 0}, ...], "create": [{"profile": "3g.40gb", "start": 0}], "pod": "ns/name",
 *    "created": "2026-01-02T03:04:05Z"}. The agent destroys, in the order given, the GPU
 *    instances named by profile and start (each must exist and hold no container), then
 *    creates the new ones at their starts, and republishes its inventory (gpusched.io/gpus).
 *  - gpusched.io/mig-plan-status (docs/schemas/mig-plan-status.schema.json), written by the
 *    agent: {"id": "...", "state": "done" | "failed", "reason": "..."} for the plan of that id.
 *
 * The scheduler binds the pod once the inventory shows the planned layout; it removes the plan
 * after a failure or its timeout. Plain values, no allocation but the writers' result.
 */
#ifndef GPUSCHED_KMIGPLAN_H
#define GPUSCHED_KMIGPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/mig.h"

/** The annotation of the plan (the scheduler writes it). */
#define GS_KMIGPLAN_ANNOTATION "gpusched.io/mig-plan"
/** The annotation of the outcome (the agent writes it). */
#define GS_KMIGPLAN_STATUS_ANNOTATION "gpusched.io/mig-plan-status"
/** Buffer size of a plan id, NUL included. */
#define GS_KMIGPLAN_ID_LEN 64
/** Buffer size of a GPU UUID, NUL included. */
#define GS_KMIGPLAN_UUID_LEN 96
/** Buffer size of the pod's "ns/name", NUL included (63 + 1 + 253 + NUL). */
#define GS_KMIGPLAN_POD_LEN 320
/** Buffer size of the creation time, RFC 3339 UTC "2026-01-02T03:04:05Z", NUL included. */
#define GS_KMIGPLAN_TIME_LEN 32
/** Buffer size of a status reason, NUL included (longer ones are cut). */
#define GS_KMIGPLAN_REASON_LEN 512

/** One GPU instance of a plan: its profile and start slot. */
struct gs_kmig_inst {
    char profile[GS_MIG_NAME_MAX]; /**< "1g.10gb" */
    uint32_t start;                /**< memory slice it starts at, 0..7 */
};

/** A re-partition plan for one GPU. Plain value record. */
struct gs_kmig_plan {
    char id[GS_KMIGPLAN_ID_LEN];     /**< unique per plan, never empty */
    uint32_t gpu;                    /**< device index on the node, 0..63 */
    char uuid[GS_KMIGPLAN_UUID_LEN]; /**< the GPU's UUID from the inventory; "" when unknown */
    uint32_t n_destroy, n_create;    /**< entries used, 0..GS_MIG_INSTANCES_MAX each; at least
                                          one create */
    struct gs_kmig_inst destroy[GS_MIG_INSTANCES_MAX]; /**< the instances to destroy, in order */
    struct gs_kmig_inst create[GS_MIG_INSTANCES_MAX];  /**< the instances to create, in order */
    char pod[GS_KMIGPLAN_POD_LEN];                     /**< "ns/name" of the pod it is for */
    char created[GS_KMIGPLAN_TIME_LEN];                /**< when the scheduler wrote it */
};

/** The agent's outcome. */
struct gs_kmig_status {
    char id[GS_KMIGPLAN_ID_LEN];         /**< the plan's id */
    bool done;                           /**< state "done"; false: "failed" */
    char reason[GS_KMIGPLAN_REASON_LEN]; /**< why it failed; "" when done */
};

/**
 * The plan as the annotation's JSON text (compact, keys in the order above).
 * @return a malloc'd NUL-terminated string the caller frees; NULL when out of memory or p is
 *         NULL.
 */
char *gs_kmig_plan_write(const struct gs_kmig_plan *p);

/**
 * Reads the annotation's text. Every member is required ("uuid" may be ""); unknown members are
 * refused, so a newer writer is not half-understood.
 * @param text  NUL-terminated JSON; borrowed.
 * @param out   filled on GS_OK; unspecified otherwise.
 * @param err   receives on GS_EINVAL one sentence naming the field ("create[0].start: not an
 *              integer in 0..7"); cap bytes, may be NULL.
 * @return GS_OK; GS_EINVAL (not JSON, not an object, a missing, unknown or bad member); never
 *         crashes on any input.
 */
int gs_kmig_plan_read(const char *text, struct gs_kmig_plan *out, char *err, size_t cap);

/** The outcome as JSON text, as gs_kmig_plan_write(). */
char *gs_kmig_status_write(const struct gs_kmig_status *s);

/** Reads an outcome, as gs_kmig_plan_read() ("reason" may be absent when done). */
int gs_kmig_status_read(const char *text, struct gs_kmig_status *out, char *err, size_t cap);

#endif /* GPUSCHED_KMIGPLAN_H */
