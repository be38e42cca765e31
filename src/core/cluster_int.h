/*
 * Internal view of the cluster, shared by cluster.c (nodes, binding) and filter.c (filter
 * classes and their node sets). Nothing outside src/core includes it.
 */
#ifndef GPUSCHED_CLUSTER_INT_H
#define GPUSCHED_CLUSTER_INT_H

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
    struct filter_pin *pins; /* pinned filters by index (id & ~GS_FILTER_PINNED) */
    uint32_t pins_len, pins_cap;
    uint32_t pins_live;  /* entries with refs > 0 */
    uint32_t pin_free;   /* first free entry below pins_len, UINT32_MAX none */
    uint32_t *node_pins; /* per node slot: first pin naming it, UINT32_MAX none; node_pins_cap */
    uint32_t node_pins_cap;
};

/* Refreshes the journal of struct gs_cluster remembers (gs_cluster_refreshed_node()). */
#define GS__REFRESH_RING 256

struct gs_cluster {
    /* Node refreshes (node_refresh: add, remove, resize, bind, release, health) so far, and the
     * node index of refresh k at refreshed[k % GS__REFRESH_RING]: the journal that lets a
     * per-node total be kept up to date by visiting only the nodes that changed. */
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

#endif /* GPUSCHED_CLUSTER_INT_H */
