/*
 * The cluster model of the scheduling core: nodes, their GPUs, and what pods request.
 *
 * A cluster is a set of nodes. Each node has CPU (milli-cores), memory (MiB), a pod limit,
 * labels, one GPU model and up to GS_NODE_GPUS_MAX GPUs. Each GPU is a record of capacities
 * and what is free of them: milli-GPU (1000 = one whole GPU) is the unit every placement
 * policy reasons in; device memory, MIG slices and time-slicing replicas sit beside it in the
 * same record so that memory-based fractions, MIG instances and replicas are further columns
 * of the same state, not a different model.
 *
 * The cluster is single-threaded state: it does no I/O and keeps no globals; two clusters may
 * be used from two threads at once. Every change to a node bumps that node's generation
 * counter, which is how the placement policies keep per-node caches exact without being told.
 */
#ifndef GPUSCHED_CLUSTER_H
#define GPUSCHED_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/mig.h"

/** Most GPUs one node may have (the bound of per-node arrays). */
#define GS_NODE_GPUS_MAX 16
/** Most distinct GPU models in one cluster (a model set is a 64-bit mask). */
#define GS_MODELS_MAX 64
/** A model mask that allows every GPU model. */
#define GS_MODEL_ANY UINT64_MAX
/** Capacity of one whole GPU in milli-GPU. */
#define GS_GPU_MILLI 1000
/**
 * Most distinct names of other resources in one cluster. "Other resources" are what a pod may
 * request beyond CPU, memory and GPUs and kube-scheduler's NodeResourcesFit checks against a
 * node's status.allocatable: extended resources (`example.com/foo`, `rdma/hca`),
 * `ephemeral-storage`, `hugepages-<size>`.
 */
#define GS_XRES_MAX 64
/** Most other resources one pod may request. */
#define GS_POD_XRES_MAX 4
/** Most other resources one node may offer. */
#define GS_NODE_XRES_MAX 32

/**
 * How a GPU is shared between pods: each GPU is in exactly one mode; a node may mix them. A new
 * GPU is in GS_GPU_SHARE_MILLI, the milli-GPU model of the FGD paper, so nothing changes for a
 * caller that never sets a mode (gs_cluster_set_gpu_mode()).
 */
enum gs_gpu_sharing {
    GS_GPU_SHARE_MILLI = 0,     /**< fractions: milli-GPU and device memory, both debited; a
                                     whole-GPU pod takes it when nothing holds it */
    GS_GPU_SHARE_TIMESLICE = 1, /**< time-slicing: `replicas` equal slots, no isolation */
    GS_GPU_SHARE_MIG = 2,       /**< MIG: a layout of instances, each free or held by a pod */
    GS_GPU_SHARE_WHOLE = 3,     /**< whole: one pod asking for whole GPUs at a time */
};

/**
 * One GPU of a node. Plain value record, owned by its node.
 *
 * What pods hold is kept in the `_used` members; the `_free` members are derived from them and
 * are what placement reads: max(0, capacity - used), and 0 on an unhealthy GPU, so that a GPU
 * that fails takes no new work, keeps its running pods, and never shows negative free capacity.
 *
 * `gpu_milli_free` is the milli-GPU a milli request can still take, which is what every policy
 * and the fit view read: on a fractions GPU with known memory it is also bounded by the memory
 * left (a milli request m takes floor(mem_mib x m / 1000) MiB, KAI's meaning of a fraction), on
 * a whole GPU it is 1000 while nothing holds it and 0 after, and on a time-sliced or MIG GPU it
 * is 0 (milli requests never land there).
 */
struct gs_gpu {
    int32_t gpu_milli;       /**< capacity in milli-GPU; GS_GPU_MILLI for every real GPU */
    int32_t gpu_milli_free;  /**< derived: capacity open to new pods, 0..gpu_milli */
    int32_t gpu_milli_used;  /**< milli-GPU bound to pods, 0..gpu_milli */
    bool healthy;            /**< false: takes no new pods (running ones stay) */
    int64_t mem_mib;         /**< device memory in MiB; 0 when unknown */
    int64_t mem_mib_free;    /**< device memory not yet bound to pods, MiB */
    uint8_t sharing;         /**< enum gs_gpu_sharing */
    uint8_t replicas;        /**< time-slicing replicas offered (1 when not time-sliced) */
    uint8_t replicas_used;   /**< time-slicing replicas bound to pods */
    uint8_t mig_slices;      /**< MIG compute slices of the GPU (7 on A100/H100, 0 without MIG) */
    uint8_t mig_slices_used; /**< bitmap of MIG compute slices held by instances */
    uint16_t pods;           /**< pods holding any share of this GPU */
    int64_t mem_mib_used;    /**< fractions: device memory bound to pods, MiB, 0..mem_mib */
    const struct gs_mig_model *mig_model; /**< MIG: the model's geometry (static), else NULL */
    uint8_t mig_count;                    /**< MIG: instances in the layout, 0..8 */
    uint8_t mig_held;                     /**< MIG: bit k set while a pod holds mig[k] */
    struct gs_mig_instance mig[GS_MIG_INSTANCES_MAX]; /**< MIG: the layout, ascending start */
};

/** A GPU's sharing mode as a caller sets it (gs_cluster_set_gpu_mode()). Plain value record. */
struct gs_gpu_mode {
    uint8_t sharing;   /**< enum gs_gpu_sharing */
    uint8_t replicas;  /**< TIMESLICE: slots offered, 1..255; ignored otherwise */
    uint8_t mig_count; /**< MIG: instances in mig[], 1..GS_MIG_INSTANCES_MAX */
    struct gs_mig_instance mig[GS_MIG_INSTANCES_MAX]; /**< MIG: the layout, any order; it must
                                                           pass gs_mig_layout_check() for the
                                                           node's GPU model */
};

/**
 * The name of a sharing mode in the node agent's inventory (Node annotation gpusched.io/gpus,
 * docs/schemas/node-gpus.schema.json) and in reports: "whole", "replicas" (time-slicing),
 * "fractions" (milli and memory), "mig". One table for the agent that writes the inventory,
 * the scheduler that reads it and the replay's reports.
 * @return static storage; NULL for a value outside enum gs_gpu_sharing.
 */
const char *gs_gpu_sharing_name(enum gs_gpu_sharing s);

/**
 * The sharing mode of a name of gs_gpu_sharing_name() (exactly, case-sensitively).
 * @param name  borrowed; NULL matches nothing.
 * @return GS_OK with *out set; GS_EINVAL for any other name (*out untouched).
 */
int gs_gpu_sharing_parse(const char *name, enum gs_gpu_sharing *out);

/** A MIG instance as a device reports it: the profile's name and the start slot if known. */
struct gs_mig_device {
    const char *profile; /**< "1g.18gb" as NVML and the inventory spell it; borrowed */
    int start;           /**< first memory slice, 0..7, or -1 when not known */
};

/**
 * The core's mode of a MIG GPU from its devices: each profile looked up in the model's
 * geometry (gs_mig_profile_find()), each start known, and the layout passing
 * gs_mig_layout_check(). The node agent (what it publishes) and the scheduler (what it reads
 * from the agent) both build MIG GPUs with it, so they judge a layout alike.
 * @param model  the GPU's model (gs_mig_model_find()); NULL when not in the table.
 * @param dev    borrowed, n entries; may be NULL when n == 0.
 * @param n      devices, 1..GS_MIG_INSTANCES_MAX.
 * @param out    receives a MIG mode with the layout in the order given; on failure a whole GPU
 *               (the caller marks it unusable).
 * @param why    receives "" or the first fault ("model X is not in the MIG table", "mig[1]
 *               .profile 5g.40gb is not a profile of H100-80GB", "mig[0].start is unknown",
 *               "MIG layout: ..." with gs_mig_layout_check()'s reason); cut to cap bytes; may be
 *               NULL.
 * @return GS_OK; GS_EINVAL (why says it) for no model, no or too many devices, or a fault.
 */
int gs_mig_mode_build(const struct gs_mig_model *model, const struct gs_mig_device *dev, uint32_t n,
                      struct gs_gpu_mode *out, char *why, size_t cap);

/** Effects of a Kubernetes taint (core/v1 Taint.effect). */
enum gs_taint_effect {
    GS_TAINT_NO_SCHEDULE = 1,        /**< `NoSchedule`: pods that do not tolerate it never land */
    GS_TAINT_PREFER_NO_SCHEDULE = 2, /**< `PreferNoSchedule`: a score, not a filter */
    GS_TAINT_NO_EXECUTE = 3,         /**< `NoExecute`: filters like NoSchedule here (evicting
                                          running pods is the taint manager's job) */
};

/** A node taint. In a spec the strings are borrowed; in a node they are owned. */
struct gs_taint {
    char *key;      /**< non-empty */
    char *value;    /**< may be empty, never NULL in a node */
    uint8_t effect; /**< enum gs_taint_effect */
};

/** An amount of another resource (see GS_XRES_MAX). Plain value record. */
struct gs_xres {
    uint32_t id; /**< resource name id from gs_cluster_xres_id() */
    int64_t qty; /**< amount in the resource's base unit (a count; bytes for storage), >= 0 */
};

/** Another resource of a node: what it offers and what bound pods hold. Plain value record. */
struct gs_node_xres {
    uint32_t id;         /**< resource name id */
    int64_t allocatable; /**< status.allocatable, >= 0 (0: the node does not offer it) */
    int64_t used;        /**< requested by bound pods, >= 0; may exceed allocatable after an
                              adopt or a drop of allocatable (free is then 0, never negative) */
};

/** Clustering tags (FGD paper's GPU Clustering policy): tag 0 is a shared GPU, tag k is k GPUs. */
#define GS_TAG_SHARE 0

/**
 * A node as the placement code reads it. Read-only outside src/core: change it only through
 * gs_cluster_bind()/gs_cluster_unbind(), which keep the derived members exact.
 */
struct gs_node {
    char *name;             /**< node name, owned by the cluster; NULL while the slot is free */
    bool present;           /**< false: the slot is free (node removed); read nothing else */
    bool unschedulable;     /**< cordoned (Kubernetes spec.unschedulable): no new pods */
    uint32_t incarnation;   /**< bumped each time the slot gets a new node (see handles) */
    uint32_t model_id;      /**< GPU model (see gs_cluster_model_name()); any value if no GPU */
    int64_t cpu_milli;      /**< allocatable CPU, milli-cores */
    int64_t cpu_milli_free; /**< derived: max(0, cpu_milli - cpu_milli_used) */
    int64_t cpu_milli_used; /**< CPU requested by bound pods, milli-cores */
    int64_t mem_mib;        /**< allocatable memory, MiB */
    int64_t mem_mib_free;   /**< derived: max(0, mem_mib - mem_mib_used) */
    int64_t mem_mib_used;   /**< memory requested by bound pods, MiB */
    int32_t pods_max;       /**< most pods the node accepts (kubelet's maxPods) */
    int32_t pods;           /**< pods bound to the node */
    uint32_t gpu_count;     /**< GPUs on the node, 0..GS_NODE_GPUS_MAX */
    struct gs_gpu gpus[GS_NODE_GPUS_MAX]; /**< GPUs by device index */
    /* Derived state, recomputed on every change of the node. */
    int32_t gpu_milli_free_total;             /**< sum of gpus[i].gpu_milli_free */
    int32_t gpu_free_desc[GS_NODE_GPUS_MAX];  /**< the free milli values, descending */
    uint32_t gpus_full_free;                  /**< GPUs with nothing bound */
    uint32_t gpu_pods;                        /**< bound pods that request GPU */
    uint32_t tag_count[GS_NODE_GPUS_MAX + 1]; /**< bound GPU pods per clustering tag */
    uint64_t gen;                             /**< bumped on every change; never repeats */
    char **labels;                            /**< `key=value` strings, owned; may be NULL */
    uint32_t label_count;                     /**< entries in labels */
    struct gs_taint *taints;                  /**< owned copies (strings owned); may be NULL */
    uint32_t taint_count;                     /**< entries in taints */
    uint32_t healthy_gpus;                    /**< GPUs with healthy set */
    uint8_t share_flags;                      /**< derived: GS_FIT_HAS_* of its GPUs' modes */
    struct gs_node_xres *xres;                /**< other resources, owned, ascending id; may
                                                   be NULL */
    uint32_t xres_count;                      /**< entries in xres */
    uint16_t nvlink[GS_NODE_GPUS_MAX];        /**< bit j of nvlink[g]: GPU g reaches GPU j over
                                                   NVLink (symmetric, no self bit, j below
                                                   gpu_count); all 0 when not known
                                                   (gs_cluster_set_nvlink()) */
    bool has_nvlink;                          /**< derived: some nvlink[g] is not 0; only then
                                                   do whole-GPU picks weigh topology */
};
_Static_assert(GS_NODE_GPUS_MAX <= 16, "gs_node.nvlink holds one bit per GPU in 16 bits");

/**
 * The part of a node the feasibility filter reads, packed into one 64-byte cache line so that a
 * scan over 10,000 nodes stays in L2. Kept by the cluster, updated with every change of the node.
 */
struct gs_node_fit {
    int64_t cpu_milli_free;                  /**< as gs_node */
    int64_t mem_mib_free;                    /**< as gs_node */
    int32_t pods_left;                       /**< pods_max - pods */
    uint16_t model_id;                       /**< as gs_node (GPU nodes) */
    uint8_t gpu_count;                       /**< as gs_node */
    uint8_t share_flags;                     /**< GS_FIT_HAS_*: which modes the GPUs are in */
    int16_t gpu_free_desc[GS_NODE_GPUS_MAX]; /**< as gs_node, 0 past gpu_count */
    int32_t gpu_milli_free_total;            /**< as gs_node */
    uint32_t gpus_full_free;                 /**< as gs_node */
};
_Static_assert(sizeof(struct gs_node_fit) == 64, "one cache line per node");

/** gs_node_fit.share_flags: the node has a GPU in whole mode. */
#define GS_FIT_HAS_WHOLE 0x01u
/** gs_node_fit.share_flags: the node has a healthy time-sliced GPU. */
#define GS_FIT_HAS_TIMESLICE 0x02u
/** gs_node_fit.share_flags: the node has a healthy MIG GPU. */
#define GS_FIT_HAS_MIG 0x04u
/** gs_node_fit.share_flags: the node has a healthy fractions GPU with known memory. */
#define GS_FIT_HAS_MEM 0x08u

/** Kinds of GPU request, told apart by which members of gs_pod_req are set (gs_req_kind()). */
enum gs_req_kind {
    GS_REQ_MILLI = 0,     /**< num_gpu GPUs of gpu_milli each (whole GPUs, or one fraction) */
    GS_REQ_MEMORY = 1,    /**< num_gpu fractions GPUs, each gpu_mem_mib or gpu_mem_pct of its
                               memory and gpu_milli (0 = none) of its compute */
    GS_REQ_TIMESLICE = 2, /**< timeslice_slots slots, one on each of as many time-sliced GPUs */
    GS_REQ_MIG = 3,       /**< mig_count MIG instances of profile mig_profile (two may share a
                               card) */
};

/**
 * What one pod requests. Plain value record; zero members beyond gpu_model_mask give the
 * milli-GPU request the core has always placed. Check one with gs_pod_req_validate().
 */
struct gs_pod_req {
    int64_t cpu_milli; /**< CPU request, milli-cores, >= 0 */
    int64_t mem_mib;   /**< memory request, MiB, >= 0 */
    uint32_t num_gpu;  /**< GPUs requested, 0..GS_NODE_GPUS_MAX */
    int32_t
        gpu_milli; /**< milli-GPU per GPU, 1..1000 if num_gpu > 0 (< 1000 only if num_gpu == 1) */
    uint64_t gpu_model_mask; /**< allowed GPU models, bit i = model id i; GS_MODEL_ANY for any */
    int64_t gpu_mem_mib;     /**< MEMORY: device memory per GPU, MiB (`gpu-memory`, HAMi
                                  `gpumem`); 0 when the request gives a percentage or no memory */
    uint8_t gpu_mem_pct;     /**< MEMORY: device memory per GPU as a percentage of the GPU's,
                                  1..100 (HAMi `gpumem-percentage`); 0 when not used */
    uint8_t timeslice_slots; /**< TIMESLICE: slots, each on a distinct time-sliced GPU, 1..16 */
    uint8_t mig_count;       /**< MIG: instances of mig_profile, 1..GS_PLACEMENT_MIG_MAX */
    char mig_profile[GS_MIG_NAME_MAX];    /**< MIG: profile name, e.g. "1g.10gb"; NUL-terminated */
    uint32_t xres_count;                  /**< entries used in xres, 0..GS_POD_XRES_MAX */
    struct gs_xres xres[GS_POD_XRES_MAX]; /**< other resources asked, distinct ids, qty > 0 */
};

/**
 * A request for CPU, memory and GPUs only (no other resources), as a compound literal:
 * GS_POD_REQ(cpu_milli, mem_mib, num_gpu, gpu_milli, gpu_model_mask).
 */
#define GS_POD_REQ(cpu_milli_, mem_mib_, num_gpu_, gpu_milli_, model_mask_)                        \
    ((struct gs_pod_req){.cpu_milli = (cpu_milli_),                                                \
                         .mem_mib = (mem_mib_),                                                    \
                         .num_gpu = (num_gpu_),                                                    \
                         .gpu_milli = (gpu_milli_),                                                \
                         .gpu_model_mask = (model_mask_)})

/**
 * Whether two requests ask for the same thing (member by member; padding ignored).
 */
bool gs_pod_req_equal(const struct gs_pod_req *a, const struct gs_pod_req *b);

/** Returns the kind of a request, from the members it sets (MIG, then TIMESLICE, MEMORY). */
static inline enum gs_req_kind gs_req_kind(const struct gs_pod_req *req)
{
    if (req->mig_count)
        return GS_REQ_MIG;
    if (req->timeslice_slots)
        return GS_REQ_TIMESLICE;
    if (req->gpu_mem_mib || req->gpu_mem_pct)
        return GS_REQ_MEMORY;
    return GS_REQ_MILLI;
}

/** Whether a request asks for any GPU (num_gpu > 0 or a kind beyond milli). */
static inline bool gs_req_wants_gpu(const struct gs_pod_req *req)
{
    return req->num_gpu > 0 || gs_req_kind(req) != GS_REQ_MILLI;
}

/** Longest reason gs_pod_req_validate() writes, bytes with the NUL. */
#define GS_REQ_REASON_MAX 160

/**
 * Checks a request of any kind. Rules: CPU and memory >= 0; num_gpu <= GS_NODE_GPUS_MAX;
 * MILLI: gpu_milli in 1..1000 when num_gpu > 0, below 1000 only with num_gpu == 1; MEMORY:
 * num_gpu >= 1, exactly one of gpu_mem_mib (> 0) and gpu_mem_pct (1..100), gpu_milli 0..999;
 * TIMESLICE: slots 1..GS_NODE_GPUS_MAX with num_gpu, gpu_milli and memory 0; MIG: mig_count
 * 1..GS_PLACEMENT_MIG_MAX, a non-empty NUL-terminated mig_profile, and every other GPU member 0.
 * @param reason  receives a sentence naming the field, e.g. "gpu_mem_pct 120: above 100"; ""
 *                when valid. May be NULL; cut to cap bytes.
 * @return GS_OK or GS_EINVAL. Pure.
 */
int gs_pod_req_validate(const struct gs_pod_req *req, char *reason, size_t cap);

/** Most MIG instances one pod may take. */
#define GS_PLACEMENT_MIG_MAX 8

/** One MIG instance a placement takes. Plain value record. */
struct gs_placement_mig {
    uint8_t gpu;     /**< device index on the node */
    uint8_t profile; /**< profile index in that GPU's model (gs_mig_model.profiles) */
    uint8_t start;   /**< the instance's start slot */
};

/**
 * Where a pod goes: the node and what it takes there, per GPU, so that a release gives back
 * exactly that and an adopt after a restart takes exactly that. Plain value record.
 *  - MILLI: gpu_index[0..num_gpu) with gpu_milli each; the memory a milli share takes on a
 *    fractions GPU follows from it (floor(mem_mib x gpu_milli / 1000)) and gpu_mem_mib[] is
 *    not read.
 *  - MEMORY: gpu_index[0..num_gpu) with gpu_milli and gpu_mem_mib[k] MiB on gpu_index[k].
 *  - TIMESLICE: gpu_index[0..num_gpu) (num_gpu == slots), one slot on each.
 *  - MIG: num_gpu == 0, the instances in mig[0..mig_count).
 */
struct gs_placement {
    uint32_t node;                         /**< node index in the cluster */
    uint32_t num_gpu;                      /**< entries used in gpu_index */
    uint8_t gpu_index[GS_NODE_GPUS_MAX];   /**< device indices on the node, ascending */
    int32_t gpu_milli;                     /**< milli-GPU taken on each of those GPUs */
    int32_t gpu_mem_mib[GS_NODE_GPUS_MAX]; /**< MEMORY: device memory taken on gpu_index[k], MiB */
    uint8_t mig_count;                     /**< MIG: entries used in mig */
    struct gs_placement_mig mig[GS_PLACEMENT_MIG_MAX]; /**< MIG: the instances, by GPU then start */
};

/** How to create a node. Borrowed by gs_cluster_add_node(), which copies what it keeps. */
struct gs_node_spec {
    const char *name;      /**< unique node name, non-empty */
    int64_t cpu_milli;     /**< allocatable CPU, milli-cores, >= 0 */
    int64_t mem_mib;       /**< allocatable memory, MiB, >= 0 */
    int32_t pods_max;      /**< pod limit, >= 1 */
    uint32_t gpu_count;    /**< 0..GS_NODE_GPUS_MAX */
    const char *gpu_model; /**< model name when gpu_count > 0 (e.g. "A100"), else ignored */
    int64_t gpu_mem_mib;   /**< memory per GPU in MiB, 0 when unknown */
    const struct gs_gpu_mode *gpu_modes; /**< gpu_count modes, by device index, each checked as
                                              gs_cluster_set_gpu_mode() checks it; NULL: every
                                              GPU in fractions mode */
};

struct gs_cluster;

/**
 * Creates an empty cluster.
 * @param out  receives the cluster; caller owns it and frees it with gs_cluster_free().
 * @return GS_OK, or GS_ENOMEM (then *out is NULL).
 */
int gs_cluster_new(struct gs_cluster **out);

/** Frees a cluster and everything it owns. NULL is a no-op. */
void gs_cluster_free(struct gs_cluster *c);

/**
 * Finds or adds a GPU model name and returns its id (ids count from 0 in order of first use).
 * @param name  model name, non-empty; copied.
 * @param id    receives the id.
 * @return GS_OK; GS_EINVAL for an empty name; GS_ELIMIT past GS_MODELS_MAX models; GS_ENOMEM.
 */
int gs_cluster_model_id(struct gs_cluster *c, const char *name, uint32_t *id);

/**
 * Looks up a GPU model without adding it.
 * @return its id, or -1 if the cluster has no such model.
 */
int gs_cluster_model_find(const struct gs_cluster *c, const char *name);

/** Returns the name of model `id` (borrowed, valid while the cluster lives), or NULL. */
const char *gs_cluster_model_name(const struct gs_cluster *c, uint32_t id);

/**
 * Turns a `|`-separated list of model names (the trace's gpu_spec, e.g. "V100M16|V100M32") into
 * a model mask. Empty parts are skipped; an empty or NULL list means any model; names the
 * cluster does not have match no node.
 * @param spec  the list; borrowed.
 * @param len   bytes of spec to read.
 * @return the mask (GS_MODEL_ANY for an empty list).
 */
uint64_t gs_cluster_model_mask(const struct gs_cluster *c, const char *spec, size_t len);

/**
 * Adds a node with all its GPUs free.
 * @param spec  the node; borrowed, strings copied.
 * @param id    receives the node index (nodes are numbered 0.. in order of adding); may be NULL.
 * @return GS_OK; GS_EINVAL for a bad spec (empty name, negative quantity, too many GPUs, a GPU
 *         node without model); GS_EEXIST for a duplicate name; GS_ELIMIT for too many models;
 *         GS_ENOMEM. On failure the cluster is unchanged.
 */
int gs_cluster_add_node(struct gs_cluster *c, const struct gs_node_spec *spec, uint32_t *id);

/**
 * Adds a `key=value` label to a node (a later value for the same key replaces the earlier).
 * @return GS_OK; GS_EINVAL (bad node, empty key); GS_ENOMEM (node unchanged).
 */
int gs_cluster_set_label(struct gs_cluster *c, uint32_t node, const char *key, const char *value);

/**
 * Returns the value of a node label, or NULL when the node has no such label.
 * The string is borrowed and valid until the label changes.
 */
const char *gs_node_label(const struct gs_node *n, const char *key);

/**
 * Returns the number of node slots: every index below it is a node or a free slot left by
 * gs_cluster_remove_node() (check gs_node.present). Without removals, the number of nodes.
 */
uint32_t gs_cluster_node_count(const struct gs_cluster *c);

/** Returns the number of nodes present (slots minus free slots). */
uint32_t gs_cluster_nodes_present(const struct gs_cluster *c);

/**
 * Returns node slot `i` (read-only, valid until the next gs_cluster_add_node()), or NULL past
 * the end. A free slot is returned with present == false.
 */
const struct gs_node *gs_cluster_node(const struct gs_cluster *c, uint32_t i);

/** Finds a present node by name. @return its index, or -1. O(1). */
int gs_cluster_find_node(const struct gs_cluster *c, const char *name);

/**
 * A node handle: index in the low 32 bits, the slot's incarnation in the high 32 bits. An index
 * is reused after a removal; a handle never is, so a holder can tell a stale reference.
 */
uint64_t gs_cluster_node_handle(const struct gs_cluster *c, uint32_t i);

/**
 * Resolves a handle from gs_cluster_node_handle().
 * @param index  receives the node index.
 * @return GS_OK; GS_ENOENT when the node was removed (its slot may hold another node now).
 */
int gs_cluster_node_resolve(const struct gs_cluster *c, uint64_t handle, uint32_t *index);

/**
 * Removes a node that has no pods bound (unbind them first: the engine does, with reason
 * node-lost). Its index goes on a free list and is reused by a later gs_cluster_add_node(); its
 * name may be added again at once.
 * @return GS_OK; GS_EINVAL for a free slot or an index past the end; GS_EEXIST while pods are
 *         bound (nothing changed).
 */
int gs_cluster_remove_node(struct gs_cluster *c, uint32_t i);

/** What gs_cluster_update_node() changes. Plain value record. */
struct gs_node_update {
    int64_t cpu_milli;     /**< allocatable CPU, milli-cores, >= 0 */
    int64_t mem_mib;       /**< allocatable memory, MiB, >= 0 */
    int32_t pods_max;      /**< pod limit, >= 1 */
    uint32_t gpu_count;    /**< GPUs, 0..GS_NODE_GPUS_MAX: more adds free healthy GPUs at the
                                end; fewer drops the last ones, which must hold no pod */
    const char *gpu_model; /**< model when gpu_count > 0; may change only while no pod holds
                                a GPU of the node (its MIG GPUs then go back to fractions);
                                NULL keeps the current one */
    int64_t gpu_mem_mib;   /**< memory of added GPUs, MiB, >= 0 */
};

/**
 * Changes a node's allocatable CPU, memory and pod limit (Kubernetes status.allocatable), and
 * its GPUs (a kubelet that registers before its device plugin reports GPUs later). Allocatable
 * may drop below what bound pods hold (kubelet reserved more): the pods stay, the free values
 * are 0 (never negative) until enough of them leave.
 * @return GS_OK; GS_EINVAL for a bad node, negative values, too many GPUs, a GPU to drop that
 *         holds pods, a model change while GPUs hold pods, or GPUs without a model; GS_ELIMIT
 *         for too many models; GS_ENOMEM. The node is unchanged on failure.
 */
int gs_cluster_update_node(struct gs_cluster *c, uint32_t i, const struct gs_node_update *u);

/**
 * Puts one GPU in a sharing mode: fractions, whole, time-slicing with `replicas` slots, or MIG
 * with a layout of instances (sorted by start and kept; all free). The GPU must hold no pod.
 * A MIG mode needs the node's GPU model in the MIG table (gs_mig_model_find() of its name) and
 * a layout that passes gs_mig_layout_check().
 * @param mode    borrowed.
 * @param reason  receives why a mode was refused ("" on success); may be NULL; cut to cap.
 * @return GS_OK; GS_EINVAL for a bad node or GPU index, a GPU holding pods, an unknown mode,
 *         replicas 0, a model without MIG geometry or an invalid layout. Unchanged on failure.
 */
int gs_cluster_set_gpu_mode(struct gs_cluster *c, uint32_t i, uint32_t gpu,
                            const struct gs_gpu_mode *mode, char *reason, size_t cap);

/**
 * Re-partitions one MIG GPU while pods may hold some of its instances (dynamic MIG,
 * include/gpusched/mig_plan.h): the layout becomes layout[0..n) (kept sorted by start). Every
 * instance a pod holds now must be in the new layout with the same profile and start, and stays
 * held; the others are free. The engine applies a gs_mig_plan's layout with it and, to undo a
 * trial, the layout that was there before.
 * @param layout  borrowed; 1..GS_MIG_INSTANCES_MAX instances that pass gs_mig_layout_check()
 *                for the GPU's model.
 * @param reason  receives why the layout was refused ("" on success); may be NULL; cut to cap.
 * @return GS_OK; GS_EINVAL for a bad node or GPU index, a GPU not in MIG mode, n out of range,
 *         an invalid layout, or a held instance the new layout lacks. Unchanged on failure.
 */
int gs_cluster_set_mig_layout(struct gs_cluster *c, uint32_t i, uint32_t gpu,
                              const struct gs_mig_instance *layout, uint32_t n, char *reason,
                              size_t cap);

/**
 * Replaces the NVLink peers of a node's GPUs: GPU g reaches GPU j over NVLink when bit j of
 * peers[g] is set. A link either end names counts for both (the stored masks are symmetric).
 * Whole-GPU picks on the node then prefer GPUs joined by NVLink and keep pairs whole
 * (gs_topo_pick(), include/gpusched/topo.h); a node with no link places whole GPUs on the lowest
 * free indices, as before. The peers are what the node agent reads from NVML's topology API
 * (nvmlDeviceGetNvLinkRemotePciInfo_v2) and publishes as `nvlink_peers` in the Node annotation
 * gpusched.io/gpus (source: NVIDIA k8s-device-plugin issue #1193). Shrinking the node's GPUs
 * (gs_cluster_update_node()) drops the links of the GPUs that go.
 * @param peers  n masks, borrowed; NULL with n == 0 clears every link.
 * @param n      the node's gpu_count, or 0 to clear.
 * @return GS_OK (a new generation only when a link changed); GS_EINVAL for a bad node, n that
 *         is neither 0 nor gpu_count, a self bit (bit g of peers[g]) or a bit at or past
 *         gpu_count. The node is unchanged on failure.
 */
int gs_cluster_set_nvlink(struct gs_cluster *c, uint32_t i, const uint16_t *peers, uint32_t n);

/**
 * Cordons (true) or uncordons (false) a node: Kubernetes spec.unschedulable. A cordoned node
 * takes no new pods unless they tolerate `node.kubernetes.io/unschedulable:NoSchedule`; running
 * pods stay. @return GS_OK; GS_EINVAL for a bad node.
 */
int gs_cluster_set_unschedulable(struct gs_cluster *c, uint32_t i, bool unschedulable);

/**
 * Marks one GPU healthy or unhealthy (the device plugin's health, an XID, allocatable below
 * capacity). An unhealthy GPU takes no new pods; pods already on it keep running and release
 * exactly what they hold. @return GS_OK; GS_EINVAL for a bad node or GPU index.
 */
int gs_cluster_set_gpu_health(struct gs_cluster *c, uint32_t i, uint32_t gpu, bool healthy);

/**
 * Replaces a node's taints with copies of `taints[0..n)` (core/v1 Node spec.taints).
 * @return GS_OK; GS_EINVAL (bad node, empty key, unknown effect); GS_ENOMEM (node unchanged).
 */
int gs_cluster_set_taints(struct gs_cluster *c, uint32_t i, const struct gs_taint *taints,
                          uint32_t n);

/**
 * Replaces all labels of a node with `kv[0..n)`, each `key=value`.
 * @return GS_OK; GS_EINVAL (bad node, an entry without '=' or with an empty key); GS_ENOMEM
 *         (node unchanged).
 */
int gs_cluster_set_labels(struct gs_cluster *c, uint32_t i, const char *const *kv, uint32_t n);

/**
 * Finds or adds the name of another resource (see GS_XRES_MAX) and returns its id. Names are
 * never removed; ids count from 0 in order of first use.
 * @param name  resource name as Kubernetes writes it (`example.com/foo`, `hugepages-2Mi`),
 *              non-empty; copied.
 * @param id    receives the id.
 * @return GS_OK; GS_EINVAL for an empty name; GS_ELIMIT past GS_XRES_MAX names; GS_ENOMEM.
 */
int gs_cluster_xres_id(struct gs_cluster *c, const char *name, uint32_t *id);

/** Returns the name of other resource `id` (borrowed, valid while the cluster lives), or NULL. */
const char *gs_cluster_xres_name(const struct gs_cluster *c, uint32_t id);

/**
 * Replaces what a node offers of other resources (its status.allocatable beyond CPU, memory,
 * pods and GPUs) with `alloc[0..n)`. What bound pods hold is kept by id; a resource that pods
 * hold and the new list lacks stays with allocatable 0 (the pods keep running).
 * @param alloc  distinct ids from gs_cluster_xres_id(), qty >= 0; borrowed.
 * @return GS_OK; GS_EINVAL (bad node, unknown or repeated id, negative qty); GS_ELIMIT past
 *         GS_NODE_XRES_MAX entries; GS_ENOMEM. The node is unchanged on failure.
 */
int gs_cluster_set_xres(struct gs_cluster *c, uint32_t i, const struct gs_xres *alloc, uint32_t n);

/**
 * Whether node `n` has free every other resource `req` asks (allocatable - used >= qty).
 * True for a request without other resources. Pure; O(req->xres_count + n->xres_count).
 */
bool gs_node_xres_fits(const struct gs_node *n, const struct gs_pod_req *req);

/**
 * How many copies of `req` the node's free other resources allow: the minimum over the asked
 * resources of free / qty, or INT64_MAX for a request without other resources. Pure.
 */
int64_t gs_node_xres_copies(const struct gs_node *n, const struct gs_pod_req *req);

/**
 * Returns the capacity that new pods can use: per resource the sum over present nodes of
 * allocatable CPU and memory, and 1000 milli-GPU per healthy GPU. Quotas and fair share are
 * computed against it.
 */
void gs_cluster_capacity(const struct gs_cluster *c, int64_t *cpu_milli, int64_t *mem_mib,
                         int64_t *gpu_milli);

/**
 * Returns a number that grows with every change of any node (a bind, a release, labels, taints,
 * cordon, health, allocatable, an added or removed node): equal values mean nothing changed.
 */
uint64_t gs_cluster_changes(const struct gs_cluster *c);

/**
 * Returns how many times a node got a new generation so far: once per added or removed node,
 * resize (gs_cluster_update_node()), GPU health change, bind, adopt and unbind, and once per
 * change of labels, taints, cordon or other resources. With gs_cluster_refreshed_node() a
 * caller keeps a per-node sum or index exact by visiting only the nodes refreshed since it
 * last looked.
 */
uint64_t gs_cluster_refreshes(const struct gs_cluster *c);

/**
 * Finds the node of refresh number k (0-based, k < gs_cluster_refreshes()). The cluster keeps
 * the last 65,536 refreshes only.
 * @param node  receives the node index (the slot; the node may since have been removed).
 * @return true; false when k is not yet made or already forgotten (the caller must then look
 *         at every node).
 */
bool gs_cluster_refreshed_node(const struct gs_cluster *c, uint64_t k, uint32_t *node);

/** Returns a number that changes whenever capacity (gs_cluster_capacity()) or a GPU's sharing
 *  mode (gs_cluster_set_gpu_mode()) may have changed. */
uint64_t gs_cluster_capacity_gen(const struct gs_cluster *c);

/** Returns the total GPU count of the cluster. */
uint32_t gs_cluster_gpu_count(const struct gs_cluster *c);

/** Returns the milli-GPU bound to pods over the whole cluster. */
int64_t gs_cluster_gpu_milli_used(const struct gs_cluster *c);

/**
 * The feasibility filter: whether `req` fits on node `n` as it is now. Checks CPU, memory and
 * pod count (Kubernetes NodeResourcesFit), the GPU model, and the GPUs by kind: MILLI, that
 * `num_gpu` GPUs each have at least `gpu_milli` free (a fraction only on a fractions GPU);
 * MEMORY, TIMESLICE and MIG, that gs_node_pick_gpus() finds GPUs for it. A pod asking for no
 * GPU passes the GPU checks on any node. Other resources are checked as gs_node_xres_fits() does.
 * Pure; O(1) for milli requests plus the other resources asked, O(GPUs) otherwise.
 */
bool gs_node_fits(const struct gs_node *n, const struct gs_pod_req *req);

/**
 * Chooses what a request takes on a node, for every kind (the one pick that placement, the fit
 * check and what-if share): MILLI, a fraction on the fractions GPU with the least milli free
 * that fits, whole GPUs the lowest fully free ones, or on a node with NVLink peers
 * (gs_cluster_set_nvlink()) the fully free ones gs_topo_pick() chooses; MEMORY, the fractions GPUs
 * (with known memory) with the least memory free that fit, lowest index on ties; TIMESLICE,
 * distinct time-sliced GPUs with the fewest free slots first; MIG, free instances of the profile,
 * by GPU index and then lowest start slot first (two on one card when the layout has them). CPU,
 * memory and pod count are checked too.
 * @param pl  receives the placement (node set to `node_index`), ready for gs_cluster_bind().
 * @return GS_OK; GS_EUNSCHEDULABLE when it does not fit (pl then zeroed); GS_EINVAL for a
 *         request that fails gs_pod_req_validate(). Pure.
 */
int gs_node_pick_gpus(const struct gs_node *n, uint32_t node_index, const struct gs_pod_req *req,
                      struct gs_placement *pl);

/**
 * Returns the packed filter view of every node (gs_cluster_node_count() entries, node order),
 * valid until the next gs_cluster_add_node().
 */
const struct gs_node_fit *gs_cluster_fit_array(const struct gs_cluster *c);

/**
 * Whether gs_fit_ok() alone decides `req` on this node: milli requests, except a fraction on a
 * node with a whole-mode GPU (the view cannot tell which free GPU is in which mode).
 */
static inline bool gs_fit_decides(const struct gs_node_fit *f, const struct gs_pod_req *req)
{
    if (gs_req_kind(req) != GS_REQ_MILLI)
        return false;
    return !(f->share_flags & GS_FIT_HAS_WHOLE) || req->num_gpu != 1 ||
           req->gpu_milli >= GS_GPU_MILLI;
}

/**
 * gs_node_fits() on the packed view, one cache line read, other resources aside: the same
 * answer where gs_fit_decides(); elsewhere a necessary condition (false means it does not fit;
 * true means ask gs_node_fits()). A request with other resources must also pass
 * gs_node_xres_fits() (the view has no room for them). gs_cluster_fits_at() does both.
 */
/**
 * gs_fit_ok() for a request known to be of kind GS_REQ_MILLI (the kind test left to the caller,
 * once per decision): the filter's hot loop.
 */
static inline bool gs_fit_ok_milli(const struct gs_node_fit *f, const struct gs_pod_req *req)
{
    if (req->cpu_milli > f->cpu_milli_free || req->mem_mib > f->mem_mib_free || f->pods_left <= 0)
        return false;
    if (req->num_gpu == 0)
        return true;
    if (req->num_gpu > f->gpu_count)
        return false;
    if (req->gpu_model_mask != GS_MODEL_ANY &&
        (f->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << f->model_id))))
        return false;
    return f->gpu_free_desc[req->num_gpu - 1] >= req->gpu_milli;
}

static inline bool gs_fit_ok(const struct gs_node_fit *f, const struct gs_pod_req *req)
{
    enum gs_req_kind kind = gs_req_kind(req);
    if (kind == GS_REQ_MILLI)
        return gs_fit_ok_milli(f, req);
    if (req->cpu_milli > f->cpu_milli_free || req->mem_mib > f->mem_mib_free || f->pods_left <= 0)
        return false;
    if (req->gpu_model_mask != GS_MODEL_ANY &&
        (f->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << f->model_id))))
        return false;
    unsigned need = kind == GS_REQ_MIG         ? GS_FIT_HAS_MIG
                    : kind == GS_REQ_TIMESLICE ? GS_FIT_HAS_TIMESLICE
                                               : GS_FIT_HAS_MEM;
    return (f->share_flags & need) != 0;
}

/**
 * gs_node_fits() for node slot `i` through the packed view: one cache line for a milli request
 * without other resources; the node itself is read when the request asks other resources, or
 * the view does not decide it (gs_fit_decides()).
 * @param fit  gs_cluster_fit_array(c).
 */
static inline bool gs_cluster_fits_at(const struct gs_cluster *c, const struct gs_node_fit *fit,
                                      uint32_t i, const struct gs_pod_req *req)
{
    if (!gs_fit_ok(&fit[i], req))
        return false;
    if (!gs_fit_decides(&fit[i], req))
        return gs_node_fits(gs_cluster_node(c, i), req);
    return req->xres_count == 0 || gs_node_xres_fits(gs_cluster_node(c, i), req);
}

/**
 * Binds a pod to the node and GPUs of a placement.
 * @param req  the pod's request; borrowed.
 * @param pl   the placement: existing node, num_gpu == req->num_gpu distinct GPUs each with
 *             at least req->gpu_milli free, pl->gpu_milli == req->gpu_milli (MILLI); for the
 *             other kinds what gs_node_pick_gpus() writes: GPUs in the kind's mode, MEMORY
 *             with gpu_mem_mib[k] the request's MiB on that GPU and that much free, one free
 *             slot on each TIMESLICE GPU, MIG instances of the layout, of the request's
 *             profile, free, distinct.
 * @return GS_OK; GS_EINVAL if the placement does not fit (the cluster is then unchanged).
 */
int gs_cluster_bind(struct gs_cluster *c, const struct gs_pod_req *req,
                    const struct gs_placement *pl);

/**
 * Binds a pod that is already running (adopted after a restart, or bound by another
 * scheduler): like gs_cluster_bind() but CPU, memory and pod count may exceed allocatable (the
 * kubelet admitted it; free values stay at 0, never negative), the node may be cordoned and its
 * GPUs unhealthy. GPUs are never over-committed.
 * @return GS_OK; GS_EINVAL for a free slot or a GPU over its capacity (cluster unchanged).
 */
int gs_cluster_adopt(struct gs_cluster *c, const struct gs_pod_req *req,
                     const struct gs_placement *pl);

/**
 * Releases what gs_cluster_bind() took for the same request and placement.
 * @return GS_OK; GS_EINVAL if the release would make any quantity exceed its capacity
 *         (the cluster is then unchanged).
 */
int gs_cluster_unbind(struct gs_cluster *c, const struct gs_pod_req *req,
                      const struct gs_placement *pl);

/**
 * Returns the clustering tag of a request: GS_TAG_SHARE for one shared GPU, k for k whole GPUs,
 * -1 for a pod without GPU.
 */
int gs_req_tag(const struct gs_pod_req *req);

#endif /* GPUSCHED_CLUSTER_H */
