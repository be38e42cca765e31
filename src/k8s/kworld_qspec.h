/*
 * Internal to the Kubernetes translation (kworld*.c): the resource amounts of a Queue object
 * (gpusched's scheduling.gpusched.io/v1alpha1 Queue, or KAI-Scheduler's scheduling.run.ai Queue)
 * and gpusched's per-GPU-model bounds, spec.resources.gpu.byModel (docs/queues.md, "GPU models";
 * KAI's Queue has no such field).
 */
#ifndef GPUSCHED_K8S_KWORLD_QSPEC_H
#define GPUSCHED_K8S_KWORLD_QSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/tenant.h"

/**
 * Converts one Queue resource field to the engine's unit (milli-GPU, milli-CPU, MiB).
 * @param v     the field's value; NULL gives `dflt`. A negative number means unlimited.
 * @param res   GS_RES_GPU (GPUs, fractions allowed), GS_RES_CPU (cores; KAI: millicores) or
 *              GS_RES_MEM (a quantity; KAI: MB).
 * @param kai   the Queue is KAI-Scheduler's.
 * @param out   receives the amount, or GS_UNLIMITED.
 * @return 0; -1 when v is not a quantity.
 */
int gs__kqueue_amount(const json_t *v, int res, bool kai, int64_t dflt, int64_t *out);

/**
 * Reads spec.resources.gpu.byModel: a mapping from GPU model (the value of the nodes'
 * nvidia.com/gpu.product label) to {quota, limit} in GPUs, as the overall gpu values are
 * written (a quantity or a number; quota absent: 0; limit absent or -1: unlimited).
 * @param by_model  the byModel value; NULL: no entries.
 * @param c         the cluster whose model table gives the ids (a model no node has yet is
 *                  added to it, so nodes that come later are bound too).
 * @param out       caller storage for GS_MODELS_MAX entries; *n receives how many were read.
 * @param why       on error receives the field at fault and why
 *                  ("spec.resources.gpu.byModel.H100.limit: 2 is below the quota 4"); cap bytes.
 * @return 0; -1 with why (nothing else is changed but the model table).
 */
int gs__kqueue_by_model(const json_t *by_model, struct gs_cluster *c, struct gs_model_quota *out,
                        uint32_t *n, char *why, size_t cap);

#endif /* GPUSCHED_K8S_KWORLD_QSPEC_H */
