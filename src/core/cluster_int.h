/*
 * Internal view of the cluster, shared by cluster.c (nodes, binding) and filter.c (filter
 * classes and their node sets). Nothing outside src/core includes it.
 */
#ifndef GPUSCHED_CLUSTER_INT_H
#define GPUSCHED_CLUSTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_int.h"
#include "gpusched/cluster.h"
#include "gpusched/filter.h"

/* One interned filter class: an owned deep copy of a gs_filter_spec, laid out in one block. */
struct filter_class {
    struct gs_filter_spec spec; /* points into blob */
    char *blob;                 /* owned: the copy's arrays and strings */
    uint8_t *key;               /* canonical serialisation, owned; equality and hash */
    size_t key_len;
    uint64_t hash;         /* of key; 0 = free entry */
    uint32_t refs;         /* pods holding it; 0 = cached for reuse */
    uint64_t released_seq; /* when refs last fell to 0 (recycling order) */
    uint64_t *nodes;       /* node set, words_cap words */
    bool tolerates_cordon; /* tolerates node.kubernetes.io/unschedulable:NoSchedule */
};

/* A pinned filter: a pod's filter whose required affinity names exactly one node, kept as that
 * node and the class of the rest of the filter instead of a class with a node set of its own
 * (filter.h, gs_filter_intern()). */
struct filter_pin {
    uint32_t node;        /* node slot */
    uint32_t incarnation; /* the slot's incarnation then: a later node in the slot is not it */
    uint32_t base;        /* class of the rest of the filter; the pin holds one reference */
    uint32_t refs;        /* pods holding it; 0 = free entry */
    uint32_t next;        /* next pin of the same slot, or of the free list; UINT32_MAX ends */
    bool by_label;        /* named by kubernetes.io/hostname (checked again on each use) */
};

struct filter_table {
    struct filter_class *cls; /* classes by id, len entries (id 0 = default) */
    uint32_t len, cap;
    uint32_t live;      /* entries with refs > 0, plus the default class */
    uint32_t words_cap; /* words in each node set */
    uint32_t *slots;    /* open addressing by hash: class id + 1, 0 empty; slots_cap entries */
    uint32_t slots_cap;
    uint64_t release_seq;
    uint32_t prefer_tainted; /* present nodes with a PreferNoSchedule taint */
    uint64_t gen;            /* moves when any class's node set changed (gs_filter_gen()) */
    struct filter_pin *pins; /* pinned filters by index (id & ~GS_FILTER_PINNED) */
    uint32_t pins_len, pins_cap;
    uint32_t pins_live;  /* entries with refs > 0 */
    uint32_t pin_free;   /* first free entry below pins_len, UINT32_MAX none */
    uint32_t *node_pins; /* per node slot: first pin naming it, UINT32_MAX none; node_pins_cap */
    uint32_t node_pins_cap;
};

/* Refreshes the journal of struct gs_cluster remembers (gs_cluster_refreshed_node()), 256 KiB:
 * enough that the placement index (sched_index.c) of a request class asked again within 65,536
 * decisions catches up from the journal rather than rebuilding from every node. */
#define GS__REFRESH_RING 65536

struct gs_cluster {
    /* Node refreshes so far (every new generation of a node: node_refresh on add, remove,
     * resize, bind, release, health, and gs__node_bump on labels, taints, cordon and other
     * resources), and the node index of refresh k at refreshed[k % GS__REFRESH_RING]: the
     * journal that lets a per-node total or index be kept up to date by visiting only the nodes
     * that changed. */
    uint64_t refreshes;
    uint32_t refreshed[GS__REFRESH_RING];

    struct gs_node *nodes;   /* node slots, nodes_len used of nodes_cap */
    struct gs_node_fit *fit; /* packed filter view, same indices and capacity */
    uint32_t nodes_len;
    uint32_t nodes_cap;
    uint32_t nodes_present; /* slots holding a node */
    uint32_t *free_slots;   /* indices of free slots (a stack), free_len of nodes_cap */
    uint32_t free_len;
    uint32_t *name_index;    /* open addressing: node index + 1, 0 = empty; name_index_cap slots */
    uint32_t name_index_cap; /* power of two, at least twice nodes_len */
    char *models[GS_MODELS_MAX]; /* model names by id, owned */
    uint32_t models_len;
    char *xres_names[GS_XRES_MAX]; /* other resources' names by id, owned */
    uint32_t xres_len;
    uint32_t gpu_count;     /* sum of present nodes' gpu_count */
    int64_t gpu_milli_used; /* sum over GPUs of gpu_milli_used */
    uint64_t next_gen;      /* source of node generations */
    uint64_t capacity_gen;  /* bumped when gs_cluster_capacity() may change */
    struct filter_table ft;
};

/* How a placement is judged: a new pod needs free healthy capacity; an adopted one only room
 * within capacity; a release needs that much held. */
enum gs__bind_mode { GS__BIND_NEW, GS__BIND_ADOPT, GS__BIND_RELEASE };

/* share.c: the milli-GPU a milli request can take on g now (gs_gpu.gpu_milli_free). */
int32_t gs__gpu_milli_open(const struct gs_gpu *g);
/* share.c: the MiB a milli share takes on g: floor(mem_mib x milli / 1000), 0 if unknown. */
int64_t gs__milli_mem_mib(const struct gs_gpu *g, int32_t milli);
/* share.c: whether the GPU half of req fits on n (CPU, memory, pods and other resources
 * aside; the GPU model is checked). */
bool gs__share_gpus_fit(const struct gs_node *n, const struct gs_pod_req *req);
/* share.c: the GPUs a whole-GPU milli request of num GPUs takes on n, written ascending to
 * gpu_index: the lowest fully free ones, or on a node with NVLink peers (has_nvlink) the fully
 * free ones gs_topo_pick() chooses. Returns how many it wrote: num, or fewer (then all the
 * fully free GPUs, lowest first) when the node has fewer free. */
uint32_t gs__pick_whole_gpus(const struct gs_node *n, uint32_t num, uint8_t *gpu_index);
/* share.c: whether n has a healthy GPU in the mode a request beyond milli needs (for MIG, a
 * layout with the profile). */
bool gs__share_mode_present(const struct gs_node *n, const struct gs_pod_req *req);
/* share.c: whether gs_node_pick_gpus() finds GPUs for req on n. */
bool gs__share_fits(const struct gs_node *n, const struct gs_pod_req *req);
/* share.c: whether the GPU half of a placement is right for req on n in the given mode. */
bool gs__share_valid(const struct gs_node *n, const struct gs_pod_req *req,
                     const struct gs_placement *pl, enum gs__bind_mode mode);
/* share.c: applies (sign +1) or releases (-1) the GPU half of a valid placement; returns the
 * milli-GPU it added (negative when released). Derived members are the caller's to refresh. */
int64_t gs__share_apply(struct gs_node *n, const struct gs_pod_req *req,
                        const struct gs_placement *pl, int sign);
/* share.c: checks a mode for a GPU of model `model_name`; *mig_model receives its geometry. */
int gs__gpu_mode_check(const char *model_name, const struct gs_gpu_mode *mode,
                       const struct gs_mig_model **mig_model, char *reason, size_t cap);
/* share.c: puts a GPU that holds no pod in a checked mode. */
void gs__gpu_mode_apply(struct gs_gpu *g, const struct gs_gpu_mode *mode,
                        const struct gs_mig_model *mig_model);

/* filter.c: set up and tear down the class table (class 0 created). */
int gs__filter_init(struct gs_cluster *c);
void gs__filter_fini(struct gs_cluster *c);
/* filter.c: node sets grow to `nodes_cap` nodes. */
int gs__filter_reserve(struct gs_cluster *c, uint32_t nodes_cap);
/* filter.c: node i's labels, taints, cordon or presence changed; re-judge it in every class.
 * `had_prefer` says whether it had a PreferNoSchedule taint before the change. */
void gs__filter_node_changed(struct gs_cluster *c, uint32_t i, bool had_prefer);
/* filter.c: whether a node has a PreferNoSchedule taint. */
bool gs__node_has_prefer_taint(const struct gs_node *n);

/* cluster_xres.c: frees the name table. */
void gs__xres_names_free(struct gs_cluster *c);
/* cluster_xres.c: the request's other resources are well formed (known distinct ids, qty > 0). */
bool gs__xres_req_valid(const struct gs_cluster *c, const struct gs_pod_req *req);
/* cluster_xres.c: gives the node an entry (allocatable 0) for each resource of req it lacks,
 * before an adopt. GS_OK; GS_ELIMIT; GS_ENOMEM (node unchanged). */
int gs__xres_reserve(struct gs_node *n, const struct gs_pod_req *req);
/* cluster_xres.c: the node holds at least what req asks of each other resource. */
bool gs__xres_release_ok(const struct gs_node *n, const struct gs_pod_req *req);
/* cluster_xres.c: adds (sign +1) or removes (-1) what req asks; entries must exist. */
void gs__xres_apply(struct gs_node *n, const struct gs_pod_req *req, int sign);

/* Gives node n a new generation and names it in the refresh journal: a change of what the
 * node offers beyond its derived members (labels, taints, cordon, other resources). */
static inline void gs__node_bump(struct gs_cluster *c, struct gs_node *n)
{
    n->gen = c->next_gen++;
    c->refreshed[c->refreshes++ % GS__REFRESH_RING] = (uint32_t)(n - c->nodes);
}

/* gs_cluster_refreshed_node() inline, for the core's hot loops (sched.c, sched_index.c). */
static inline bool gs__journal_at(const struct gs_cluster *c, uint64_t k, uint32_t *node)
{
    if (k >= c->refreshes || c->refreshes - k > GS__REFRESH_RING)
        return false;
    *node = c->refreshed[k % GS__REFRESH_RING];
    return true;
}

#endif /* GPUSCHED_CLUSTER_INT_H */
