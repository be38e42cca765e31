/*
 * Queue and PriorityClass configuration in YAML (read with libyaml), shaped like KAI-Scheduler's
 * Queue (spec.parentQueue, spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}, and
 * per-GPU-model bounds resources.gpu.byModel.<model>.{quota,limit}) and Kueue's ClusterQueue,
 * plus the rules that map trace pods to queues and PriorityClasses (the trace has no team
 * column). docs/queues.md documents the format with an example;
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
 * negative quantities, a limit below its quota (overall or per GPU model), a per-model quota above
 * the queue's gpu limit, children's per-model quotas above their parent's, an unknown parent
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
 * (its own preemptMinRuntime, else its nearest ancestor's, else the top-level one), and its
 * per-GPU-model entries with model ids from the engine's cluster (gs_engine_cluster(); a model
 * no node has yet is added to the cluster's table).
 * @param qc    borrowed; the engine copies what it keeps.
 * @param diag  filled on error with the position of the refused queue's or class's name (of
 *              the byModel key when the cluster refuses a model: too many models);
 *              zeroed on success; may be NULL.
 * @return GS_OK; an engine error (GS_EINVAL, GS_EEXIST, GS_ENOENT, GS_ENOMEM); the engine may
 *         then hold part of the tree and should be discarded.
 */
int gs_qconfig_apply(const struct gs_qconfig *qc, struct gs_engine *e, struct gs_diag *diag);

/**
 * Scales every queue's quotas and finite limits by `factor` (0 < factor < 1; other values change
 * nothing), rounding down, for a replay on a fraction of the cluster (--cluster-scale): a limit
 * of 800 GPUs means nothing on a 621-GPU cluster. Rounding down keeps children's quotas within
 * their parent's and every limit at or above its quota. Call before gs_qconfig_apply().
 */
void gs_qconfig_scale(struct gs_qconfig *qc, double factor);

/** Number of configured queues (0 for NULL). */
uint32_t gs_qconfig_queue_count(const struct gs_qconfig *qc);

/**
 * Queue i's name (borrowed; NULL when i is out of range) and its GPU quota and limit in
 * milli-GPU (the limit GS_UNLIMITED when unlimited), as gs_qconfig_apply() would set them.
 */
const char *gs_qconfig_queue_gpu(const struct gs_qconfig *qc, uint32_t i, int64_t *quota_milli,
                                 int64_t *limit_milli);

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

/** "No gang" in gs_qconfig_gangs.gang_of. */
#define GS_QCONFIG_NO_GANG UINT32_MAX

/** One gang formed from trace pods by the podGroups rules. */
struct gs_qconfig_gang {
    char *name;     /**< "QUEUE-pg-K": its queue and its number K (1, 2, ...) there; owned */
    uint32_t queue; /**< its leaf queue's index in file order (as gs_qconfig_assign names it) */
    uint32_t min_member; /**< the rule's minMember: the gang has exactly this many pods */
    int64_t timeout_ms;  /**< the rule's timeout; 0: none */
    uint32_t first_pod;  /**< index in the pod list of its first pod to arrive */
};

/** The gangs of a pod list. Caller storage; filled by gs_qconfig_form_gangs(); _fini frees. */
struct gs_qconfig_gangs {
    struct gs_qconfig_gang *v; /**< n gangs, in order of their first pod's arrival */
    uint32_t n;
    uint32_t *gang_of; /**< per pod of the list: its gang's index in v, or GS_QCONFIG_NO_GANG */
    uint32_t npods;    /**< entries in gang_of */
};

/**
 * Forms gangs from a trace's pods by the configuration's podGroups rules (docs/queues.md,
 * "Pod groups"). Pods are taken in arrival order (creation time, a missing one read as 0, then
 * list order). A pod is looked at by the first rule whose queues hold its queue (by
 * gs_qconfig_assign()) and whose minGpu it asks at least; each (rule, queue) pair keeps one open
 * group. The pod joins that group when it has the group's shape (GPUs, milli-GPU per GPU, CPU,
 * memory and GPU model spec equal), arrived at most `window` after the group's first pod, and
 * the group holds fewer than minMember pods; otherwise the open group is closed and the pod opens
 * a new one. A group that reaches minMember pods is a gang; a group closed, or left open at the
 * end, with fewer is not, and its pods run alone. Pods no rule looks at, and pods the rules map to
 * no queue, are in no gang.
 * @param qc    borrowed.
 * @param pods  borrowed.
 * @param out   caller storage; on GS_OK the gangs (n may be 0; gang_of has pods->n entries); on
 *              error left empty.
 * @return GS_OK or GS_ENOMEM.
 * Thread-safety: reads the configuration only.
 */
int gs_qconfig_form_gangs(const struct gs_qconfig *qc, const struct gs_trace_pods *pods,
                          struct gs_qconfig_gangs *out);

/** Frees what gs_qconfig_form_gangs() filled and zeroes it. NULL is a no-op. */
void gs_qconfig_gangs_fini(struct gs_qconfig_gangs *g);

/** The number of sharing rules (0 when there are none or qc is NULL). */
uint32_t gs_qconfig_sharing_rules(const struct gs_qconfig *qc);

/**
 * Turns part of a trace's GPU pods into memory, MIG or time-sliced requests by the sharing
 * rules (docs/queues.md, "Sharing rules"), in place. A pod is turned by the first rule that
 * looks at it (pods: shared, whole or any) and draws it (share %, from the seed, the pod's
 * index and the rule's); memory: gpu_mem_mib = gpuMemMib x gpu_milli / 1000 (at least 1) and
 * no compute share; mig: num_gpu instances of migProfile; timeslice: num_gpu slots. A result
 * gs_pod_req_validate() refuses (more than 8 instances) leaves the pod as it was, and so do
 * pods that ask no GPU or whose row already names a kind. Sets pods->has_sharing when there is
 * a rule. The same seed turns the same pods.
 * @param converted  receives the pods turned, by kind: memory, mig, timeslice.
 * @return GS_OK (no rule: nothing changes).
 */
int gs_qconfig_apply_sharing(const struct gs_qconfig *qc, struct gs_trace_pods *pods, uint64_t seed,
                             uint32_t converted[3]);

/** The number of podGroups rules (0 when there are none or qc is NULL). */
uint32_t gs_qconfig_pod_group_rules(const struct gs_qconfig *qc);

/**
 * Returns the top-level preemptMinRuntime (ms): how long a preemptible pod runs before it may
 * be evicted, for queues that set none themselves; 0 when unset or qc is NULL.
 */
int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc);

#endif /* GPUSCHED_QCONFIG_H */
