/*
 * Queue and PriorityClass configuration in YAML (read with libyaml), shaped like KAI-Scheduler's
 * Queue (spec.parentQueue, spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}) and
 * Kueue's ClusterQueue, plus the rules that map trace pods to queues and PriorityClasses (the
 * trace has no team column). docs/queues.md documents the format with an example;
 * data/alibaba-gpu-v2023/queues.yaml is the example for the bundled trace.
 *
 * Units in the file follow Kubernetes: GPUs as a count (fractions allowed, "0.5"), CPU as cores
 * or milli-cores ("64", "500m"), memory with binary suffixes ("512Gi", "1Ti", "2048Mi");
 * limits may be "unlimited" (or -1). Inside gpusched they become milli-GPU, milli-CPU and MiB.
 */
#ifndef GPUSCHED_QCONFIG_H
#define GPUSCHED_QCONFIG_H

#include <stdint.h>

#include "gpusched/tenant.h"
#include "gpusched/trace.h"

struct gs_qconfig;

/**
 * Reads and validates a configuration file.
 * Errors name the line (and column) of the offending node: malformed YAML, unknown key, a value
 * of the wrong type or unit, negative quantities, a limit below its quota, an unknown parent
 * queue, a cycle of parents, children's quotas above their parent's, duplicate names, a rule
 * naming an unknown queue or PriorityClass, a pod rule that can send pods to a non-leaf queue.
 * @param path  the file.
 * @param out   receives the configuration; free with gs_qconfig_free().
 * @param diag  filled on error (file, line, column, field = the key, msg); may be NULL.
 * @return GS_OK; GS_EIO (cannot read); GS_EPARSE (invalid, see diag); GS_ENOMEM.
 */
int gs_qconfig_load(const char *path, struct gs_qconfig **out, struct gs_diag *diag);

/** As gs_qconfig_load() on a buffer; `name` is used in diagnostics. */
int gs_qconfig_parse(const char *buf, size_t len, const char *name, struct gs_qconfig **out,
                     struct gs_diag *diag);

/** Frees a configuration. NULL is a no-op. */
void gs_qconfig_free(struct gs_qconfig *qc);

/**
 * Creates the configured queues (parents before children) and PriorityClasses in an engine that
 * has none yet.
 * @return GS_OK; an engine error (GS_EINVAL, GS_EEXIST, GS_ENOMEM) with diag naming the queue's
 *         line; the engine may then hold part of the tree and should be discarded.
 */
int gs_qconfig_apply(const struct gs_qconfig *qc, struct gs_engine *e, struct gs_diag *diag);

/** What the mapping rules decided for one pod. */
struct gs_qconfig_assignment {
    const char *queue;          /**< leaf queue name (borrowed from the configuration) */
    const char *priority_class; /**< PriorityClass name (borrowed) */
};

/**
 * Maps a trace pod to its queue and PriorityClass by the configured rules, in order: the first
 * rule whose match (qos, GPU model spec, GPU count range, name prefix) holds decides; a rule may
 * pick its queue by a stable hash of the pod name over weighted queues (FNV-1a 64 of the name,
 * modulo the weight sum, so the same pod always lands in the same queue). The PriorityClass
 * comes from the rule if it names one, else from the QoS map, else the default class.
 * @return GS_OK, or GS_ENOENT when no rule matches and there is no default queue.
 */
int gs_qconfig_assign(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                      struct gs_qconfig_assignment *out);

/** Returns the default min run time (ms) before a preemptible pod may be evicted. */
int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc);

#endif /* GPUSCHED_QCONFIG_H */
