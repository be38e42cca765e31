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
 *
 * Queue and PriorityClass names are DNS-1123 subdomains of at most 253 characters, as Kubernetes
 * names objects (include/gpusched/names.h; docs/queues.md, "Names").
 */
#ifndef GPUSCHED_QCONFIG_H
#define GPUSCHED_QCONFIG_H

#include <stdint.h>

#include "gpusched/tenant.h"
#include "gpusched/trace.h"

/** Largest accepted file, bytes; a longer one gives GS_EIO. */
#define GS_QCONFIG_FILE_MAX 4194304u /* 4 MiB */
/** Most queues in one file. */
#define GS_QCONFIG_QUEUES_MAX 10000u
/** Deepest nesting, both of YAML collections and of the queue tree (a top-level queue is 1). */
#define GS_QCONFIG_DEPTH_MAX 32u

struct gs_qconfig;

/**
 * Reads and validates a configuration file.
 * Errors name the line (and column) of the offending node: malformed YAML, unknown key, a value
 * of the wrong type or unit, a queue or PriorityClass name that is not a DNS-1123 subdomain,
 * negative quantities, a limit below its quota, an unknown parent
 * queue, a cycle of parents, children's quotas above their parent's, duplicate names, a rule
 * naming an unknown queue or PriorityClass, a pod rule that can send pods to a non-leaf queue,
 * an unknown QoS name; and the bounds: nesting (YAML or queue tree) deeper than
 * GS_QCONFIG_DEPTH_MAX, more than GS_QCONFIG_QUEUES_MAX queues, more than 1,000,000 YAML nodes
 * with aliases expanded. Lines and columns are 1-based (columns count characters); `field` is
 * the mapping key the offending node belongs to (an unknown key's own text), "" when none. The
 * first problem stops the read; docs/queues.md lists every message.
 * @param path  the file.
 * @param out   receives the configuration, or NULL on error; free with gs_qconfig_free().
 * @param diag  filled on error (file, line, column, field, msg; line 0 when the problem is the
 *              whole file), zeroed on success; may be NULL.
 * @return GS_OK; GS_EIO (cannot open or read, or over GS_QCONFIG_FILE_MAX bytes); GS_EPARSE
 *         (invalid, see diag); GS_ENOMEM.
 * Thread-safety: keeps no global state; separate calls may run concurrently.
 */
int gs_qconfig_load(const char *path, struct gs_qconfig **out, struct gs_diag *diag);

/**
 * As gs_qconfig_load() on a buffer (borrowed; need not be NUL-terminated; NULL reads as empty).
 * `name` is copied into diagnostics; NULL gives "". A buffer over GS_QCONFIG_FILE_MAX gives
 * GS_EIO.
 */
int gs_qconfig_parse(const char *buf, size_t len, const char *name, struct gs_qconfig **out,
                     struct gs_diag *diag);

/** Frees a configuration. NULL is a no-op. */
void gs_qconfig_free(struct gs_qconfig *qc);

/**
 * Creates the configured queues and PriorityClasses in an engine that has none yet. Queues are
 * added in file order, except that a queue listed before its parent is added right after it,
 * so ids follow the file when parents come first. Each queue gets its quotas (a parent without
 * a quota for a resource gets its children's sum), limits, over-quota weight and min run time
 * (its own preemptMinRuntime, else its nearest ancestor's, else the top-level one).
 * @param qc    borrowed; the engine copies what it keeps.
 * @param diag  filled on error with the position of the refused queue's or class's name;
 *              zeroed on success; may be NULL.
 * @return GS_OK; an engine error (GS_EINVAL, GS_EEXIST, GS_ENOENT, GS_ENOMEM); the engine may
 *         then hold part of the tree and should be discarded.
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
 * docs/queues.md gives the matching rules exactly.
 * @param pod  borrowed; NULL name, qos or gpu_spec read as "".
 * @param out  filled on GS_OK; on GS_ENOENT, queue is the queue found (NULL if none) and
 *             priority_class is NULL.
 * @return GS_OK; GS_ENOENT when no rule matches and there is no default queue, or when no
 *         PriorityClass applies (no rule class, no QoS entry, no default).
 * Thread-safety: reads the configuration only; concurrent calls are safe.
 */
int gs_qconfig_assign(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                      struct gs_qconfig_assignment *out);

/**
 * Returns the top-level preemptMinRuntime (ms): how long a preemptible pod runs before it may
 * be evicted, for queues that set none themselves; 0 when unset or qc is NULL.
 */
int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc);

#endif /* GPUSCHED_QCONFIG_H */
