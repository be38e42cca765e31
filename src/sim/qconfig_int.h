/*
 * Internal header of the queue configuration loader (src/sim/qconfig*.c; contract in
 * include/gpusched/qconfig.h, format in docs/queues.md). Not part of the public API.
 *
 * The loader is split along its stages:
 *   (src/util/yaml.c  the shared YAML walker builds the positioned tree, with this reader's
 *                     limits: depth, nodes, aliases allowed, no tags, one document)
 *   qconfig_schema.c  diagnostics and the typed readers of one node (names, numbers,
 *                     quantities, durations, references)
 *   qconfig.c         the sections (queues, PriorityClasses, assignment, top level), load, free
 *   qconfig_apply.c   creating the queues in an engine, and mapping pods to queues
 */
#ifndef GPUSCHED_SIM_QCONFIG_INT_H
#define GPUSCHED_SIM_QCONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/compiler.h"
#include "gpusched/qconfig.h"
#include "util/arena.h"
#include "util/strmap.h"
#include "util/yaml.h"

/** Most YAML nodes in a document, an alias counting again each time it is used. */
#define NODES_MAX 1000000u
/** Longest queue, PriorityClass or model name, bytes (a Kubernetes object name's limit). */
#define NAME_MAX_LEN 253u
/** Most PriorityClasses. */
#define CLASSES_MAX 1000u
/** Most assignment rules. */
#define RULES_MAX 1000u
/** Most entries in one match list (qos, gpuModel). */
#define LIST_MAX 64u
/** Largest quantity in internal units (milli-GPU, milli-CPU, MiB); sums of 10,000 fit int64. */
#define QUANTITY_MAX 100000000000000LL
/** Largest duration, ms (about 31 years). */
#define DURATION_MAX_MS 1000000000000LL
/** Largest overQuotaWeight. */
#define WEIGHT_MAX 1000000.0
/** Largest hashQueues weight. */
#define HASH_WEIGHT_MAX 1000000
/** Largest numGpu bound. */
#define NUM_GPU_MAX 1000000
/** "No index". */
#define NONE UINT32_MAX
/** The one apiVersion and kind accepted. */
#define API_VERSION "gpusched.io/v1"
#define KIND "QueueConfig"

/* ---- the configuration ------------------------------------------------------------------ */

/** One configured queue. */
/** One per-model bound of a queue (resources.gpu.byModel.<model>). */
struct qmodel {
    const char *model;           /**< GPU model name, in the configuration's arena */
    int64_t quota;               /**< milli-GPU, 0 when not given */
    int64_t limit;               /**< milli-GPU or GS_UNLIMITED */
    int64_t child_sum;           /**< the children's quotas for the model (link_queues()) */
    struct gs_yaml_pos at;       /**< the model's key */
    struct gs_yaml_pos quota_at; /**< its `quota` value (its key's position when absent) */
};

struct qqueue {
    const char *name;             /**< in the configuration's arena */
    uint32_t parent;              /**< index of the parent; NONE for a top-level queue */
    uint32_t children;            /**< number of child queues (0: a leaf) */
    uint32_t depth;               /**< 1 for a top-level queue */
    int64_t quota[GS_RES_COUNT];  /**< internal units; derived for unset parents */
    int64_t limit[GS_RES_COUNT];  /**< internal units or GS_UNLIMITED */
    bool quota_set[GS_RES_COUNT]; /**< the file gave the quota */
    double weight;                /**< over-quota weight (one per queue) */
    int weight_from;              /**< resource that set the weight, -1 none */
    int64_t min_runtime_ms;       /**< own value, then resolved (inherited) */
    bool min_runtime_set;         /**< the file gave preemptMinRuntime */
    struct gs_yaml_pos at;        /**< the queue's `name` value */
    struct gs_yaml_pos parent_at; /**< its `parentQueue` value (0 when absent) */
    struct gs_yaml_pos quota_at[GS_RES_COUNT]; /**< each `quota` value */
    struct gs_yaml_pos limit_at[GS_RES_COUNT]; /**< each `limit` value */
    struct qmodel *models; /**< resources.gpu.byModel entries, file order (arena) */
    uint32_t nmodels;
};

/** One PriorityClass. */
struct qclass {
    const char *name;      /**< in the configuration's arena */
    int32_t value;         /**< priority */
    int preemptible;       /**< 1, 0, or -1 (the engine's default) */
    struct gs_yaml_pos at; /**< its `name` value */
};

/** One weighted target of a hashed rule. */
struct hashq {
    uint32_t queue;  /**< leaf queue index */
    uint32_t weight; /**< >= 1 */
};

/** One assignment rule. */
struct qrule {
    uint8_t qos_mask;    /**< bit i: QoS i matches; 0: any QoS */
    const char **models; /**< gpuModel entries; nmodels == 0: any */
    uint32_t nmodels;
    bool has_num;       /**< numGpu given */
    uint32_t num_min;   /**< inclusive */
    uint32_t num_max;   /**< inclusive */
    const char *prefix; /**< namePrefix or NULL */
    size_t prefix_len;
    uint32_t queue;     /**< fixed target, or NONE when hashed */
    struct hashq *hash; /**< nhash weighted targets (file order) */
    uint32_t nhash;
    uint64_t weight_sum; /**< sum of the hash weights */
    uint32_t pclass;     /**< PriorityClass index or NONE */
};

/** One podGroups rule: how the replay forms gangs of trace pods (docs/queues.md). */
struct qpgroup {
    uint32_t *queues;   /**< leaf queue indices the rule looks at (file order) */
    uint32_t nqueues;   /**< 0: every leaf queue */
    uint32_t min_gpu;   /**< pods asking at least this many GPUs */
    uint32_t size;      /**< pods per gang, its min_member, >= 2 */
    int64_t window_ms;  /**< a group's pods arrive within this of its first, > 0 */
    int64_t timeout_ms; /**< the gangs' timeout; 0: none */
};

/** Kinds a sharing rule turns pods into (docs/queues.md, "Sharing rules"). */
enum qshare_kind { QSHARE_MEMORY, QSHARE_MIG, QSHARE_TIMESLICE };
/** Which pods a sharing rule looks at. */
enum qshare_pods { QSHARE_PODS_SHARED, QSHARE_PODS_WHOLE, QSHARE_PODS_ANY };

/** One sharing rule. */
struct qshare {
    uint8_t kind;            /**< enum qshare_kind */
    uint8_t pods;            /**< enum qshare_pods */
    uint32_t share_pct;      /**< % of the pods looked at that it turns, 1..100 */
    int64_t gpu_mem_mib;     /**< MEMORY: the GPU memory a whole GPU stands for, MiB */
    const char *mig_profile; /**< MIG: the profile (arena), else NULL */
};

/** QoS names of the openb trace, in the order of qos_map. */
extern const char *const gs__qc_qos_names[];
#define QOS_COUNT 4

struct gs_qconfig {
    struct gs_arena ar; /**< everything below */
    char name[256];     /**< source name for diagnostics */
    struct qqueue *q;   /**< nq queues, file order */
    uint32_t nq;
    uint32_t *order;   /**< queue indices, every parent before its children */
    struct qclass *pc; /**< npc classes, file order */
    uint32_t npc;
    struct qrule *rules; /**< nrules rules, file order */
    uint32_t nrules;
    uint32_t default_queue;        /**< index or NONE */
    uint32_t default_class;        /**< index or NONE */
    uint32_t qos_class[QOS_COUNT]; /**< priorityByQoS: class index or NONE */
    int64_t min_runtime_ms;        /**< top-level preemptMinRuntime, 0 when unset */
    struct qpgroup *pg;            /**< npg podGroups rules, file order */
    uint32_t npg;
    struct qshare *sh; /**< nsh sharing rules, file order */
    uint32_t nsh;
};

extern const char *const gs__qc_res_names[GS_RES_COUNT];

/** State of one parse. */
struct pctx {
    struct gs_diag *d;       /**< the caller's or scratch */
    struct gs_qconfig *qc;   /**< being filled */
    struct gs_yaml_doc doc;  /**< the document's tree (util/yaml.h) */
    struct gs_strmap qnames; /**< queue name -> struct qqueue */
    struct gs_strmap cnames; /**< class name -> struct qclass */
};

/** As gs__qc_fail_at() with GS_EPARSE at a node. */
#define FAIL(c, node, field, ...) gs__qc_fail_at((c), GS_EPARSE, &(node)->at, (field), __VA_ARGS__)

/* ---- qconfig_schema.c ---------------------------------------------------------------------- */

/** Records an error at a position (NULL: the whole file) and returns err. */
GS_PRINTF(5, 6)
int gs__qc_fail_at(struct pctx *c, int err, const struct gs_yaml_pos *at, const char *field,
                   const char *fmt, ...);

/** Records "out of memory" for the whole file; returns GS_ENOMEM. */
int gs__qc_oom(struct pctx *c);

/** Formats a quantity in the file's units for messages. */
const char *gs__qc_fmt_qty(char *buf, size_t cap, int r, int64_t v);

/** Fails unless n is of the given kind. */
int gs__qc_need_kind(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                     enum gs_yaml_kind kind);

/*
 * Checks that n is a mapping whose keys are all in `keys` (NULL-terminated) and none repeats.
 * `field` names where the mapping sits, for a wrong type.
 */
int gs__qc_check_map(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                     const char *const *keys);

/** The value of key in a checked mapping, or NULL when absent or null. */
const struct gs_yaml_node *gs__qc_get(const struct gs_yaml_node *map, const char *key);

/** As get(), failing when the key is absent or null. */
int gs__qc_require(struct pctx *c, const struct gs_yaml_node *map, const char *key,
                   const struct gs_yaml_node **out);

/** A string: a non-null scalar without NUL or control bytes, 1..NAME_MAX_LEN bytes, copied. */
int gs__qc_get_name(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                    const char **out);

/** As gs__qc_get_name(), and the name must be a DNS-1123 subdomain (queues, PriorityClasses):
 * "invalid name 'X': WHY (a DNS-1123 subdomain, as Kubernetes names objects)". */
int gs__qc_get_object_name(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                           const char **out);

/** A decimal integer written plainly (a quoted "5" is a string, as Kubernetes reads it). */
int gs__qc_get_int(struct pctx *c, const struct gs_yaml_node *n, const char *field, int64_t min,
                   int64_t max, int64_t *out);

int gs__qc_get_bool(struct pctx *c, const struct gs_yaml_node *n, const char *field, bool *out);

/** A weight: a plain decimal number ("1", "0.5"), 0..WEIGHT_MAX, read without locale. */
int gs__qc_get_weight(struct pctx *c, const struct gs_yaml_node *n, const char *field, double *out);

/** A quota (limit == false) or a limit of resource r. */
int gs__qc_get_quantity(struct pctx *c, const struct gs_yaml_node *n, const char *field, int r,
                        bool limit, int64_t *out);

/** A duration "1h30m", "10m", "45s", "500ms" or "0", Go's time.ParseDuration without fractions. */
int gs__qc_get_duration(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                        int64_t *out);

int gs__qc_qos_index(const char *s, size_t len);

int gs__qc_bad_qos(struct pctx *c, const struct gs_yaml_node *n, const char *field);

/** A reference to a leaf queue by name. */
int gs__qc_leaf_ref(struct pctx *c, const struct gs_yaml_node *n, const char *field, uint32_t *out);

/** A reference to a PriorityClass by name. */
int gs__qc_class_ref(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                     uint32_t *out);

#endif /* GPUSCHED_SIM_QCONFIG_INT_H */
