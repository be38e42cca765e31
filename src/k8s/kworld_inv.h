/*
 * Internal to the Kubernetes translation (kworld*.c): the node agent's GPU inventory, Node
 * annotation gpusched.io/gpus (docs/schemas/node-gpus.schema.json), read into what the core
 * places on. Not part of the public API in include/gpusched/kworld.h.
 */
#ifndef GPUSCHED_K8S_KWORLD_INV_H
#define GPUSCHED_K8S_KWORLD_INV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h" /* GS_NODE_GPUS_MAX, struct gs_gpu_mode */
#include "gpusched/kworld.h"  /* struct gs_kmig_slot */
#include "gpusched/mig.h"

/** The annotation. */
#define GS_KWORLD_INVENTORY "gpusched.io/gpus"

/** A Node's GPUs as its agent published them. Plain value record. */
struct gs__knode_gpus {
    uint32_t n;                         /**< GPUs, indices 0..n-1, <= GS_NODE_GPUS_MAX */
    char model[96];                     /**< model of GPU 0 (the core has one per node) */
    int64_t mem_mib;                    /**< smallest memory of the GPUs, MiB */
    bool usable[GS_NODE_GPUS_MAX];      /**< health "Healthy" (a MIG GPU may still be unusable
                                             when its layout does not check: gs__kinv_modes) */
    char uuid[GS_NODE_GPUS_MAX][96];    /**< "GPU-..." by index */
    uint8_t mode[GS_NODE_GPUS_MAX];     /**< enum gs_gpu_sharing of member `mode`: whole WHOLE,
                                             replicas TIMESLICE, fractions MILLI, mig MIG */
    int64_t replicas[GS_NODE_GPUS_MAX]; /**< member `replicas`; 1 when absent, -1 when not an
                                             integer */
    uint8_t mig_n[GS_NODE_GPUS_MAX];    /**< entries of member `mig`, 0..GS_MIG_INSTANCES_MAX,
                                             or GS_MIG_INSTANCES_MAX + 1 for more */
    struct gs__kmig {
        char profile[GS_MIG_NAME_MAX]; /**< "1g.18gb"; "" when absent, empty or too long */
        int start;                     /**< member `start`, 0..7; -1 when null or absent */
    } mig[GS_NODE_GPUS_MAX][GS_MIG_INSTANCES_MAX]; /**< the MIG devices, in the given order */
    uint16_t nvlink[GS_NODE_GPUS_MAX]; /**< member `nvlink_peers` as masks: bit j of nvlink[g]
                                            when gpus[g] names GPU j (0 when absent); for
                                            gs_cluster_set_nvlink() */
};

/**
 * Reads the annotation of a Node object.
 * @param node  the Node (borrowed).
 * @param name  its metadata.name, for the warning.
 * @param out   filled when the annotation is there and good; zeroed otherwise.
 * @param warn  receives, when the annotation is there but bad, one sentence naming the node,
 *              the annotation and the field ("node n1: annotation gpusched.io/gpus:
 *              gpus[1].uuid: not a string; GPUs read from status.capacity"); cap bytes.
 *              An `nvlink_peers` member that is not a list of distinct GPU indices of the
 *              node other than the GPU itself is bad ("gpus[2].nvlink_peers[0]: 9 is not a
 *              GPU of this node (0..7)").
 * @return 1 read (out filled), 0 no annotation, -1 bad (warn filled); never crashes on any
 *         input.
 */
int gs__kworld_node_gpus(const json_t *node, const char *name, struct gs__knode_gpus *out,
                         char *warn, size_t cap);

/** What the translation keeps of the inventories: UUIDs by node, the warnings given. */
struct gs__kinv {
    json_t *uuids;       /**< node name -> [GPU UUID by index] of its last good inventory */
    json_t *warned;      /**< node name -> the last warning given about it (said once) */
    json_t *mode_warned; /**< node name -> the last GPU-mode warnings given (said once) */
    json_t *cap_warned;  /**< node name -> the last MIG-from-capacity warning given
                              (kworld_capmig.c; said once) */
    json_t *migs;        /**< node name -> [per GPU: [[profile, start], ...]] of its last good
                              inventory (dynamic MIG) */
};

/** @return GS_OK; GS_ENOMEM. */
int gs__kinv_init(struct gs__kinv *k);

/** Releases; a zeroed record is a no-op. */
void gs__kinv_fini(struct gs__kinv *k);

/**
 * Reads a Node's inventory (gs__kworld_node_gpus) and keeps its UUIDs: a good one replaces
 * the node's UUIDs; a bad one forgets them and tells `warn` (once per node and text); none
 * forgets them.
 * @param have  receives 1, 0 or -1 as gs__kworld_node_gpus returns them.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__kinv_read(struct gs__kinv *k, const json_t *node, const char *name,
                  struct gs__knode_gpus *out, int *have, void (*warn)(void *ctx, const char *msg),
                  void *ctx);

/**
 * The core's mode of each GPU of a good inventory: whole, time-sliced with its replicas (a
 * replicas GPU of one replica is whole),
 * fractions, or MIG with its instances (profile and start), the MIG model found by
 * gs_mig_model_find() of the inventory's model, else of `product` (the node's
 * nvidia.com/gpu.product label). A MIG GPU without instances is unusable; one whose model is
 * not in the MIG table, whose instances name an unknown profile, lack a start, or do not pass
 * gs_mig_layout_check(), and a replicas GPU without a count in 1..255, is unusable with one
 * warning naming node, GPU and fault (said once per node and text; `warn` may be NULL).
 * @param inv      a good inventory (gs__kinv_read's *have == 1); borrowed.
 * @param out      receives inv->n modes (an unusable GPU's is WHOLE).
 * @param usable   receives inv->n flags: Healthy and a mode that checks.
 * @param model    receives the model name for the core (the inventory's, or `product` when only
 *                 that one is in the MIG table and the node has MIG GPUs); borrowed from inv or
 *                 product.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__kinv_modes(struct gs__kinv *k, const struct gs__knode_gpus *inv, const char *name,
                   const char *product, struct gs_gpu_mode *out, bool *usable, const char **model,
                   void (*warn)(void *ctx, const char *msg), void *ctx);

/** Whether GPU `g` is in mode `m` already (sharing, replicas, and the MIG layout in any order). */
bool gs__kinv_mode_equal(const struct gs_gpu *g, const struct gs_gpu_mode *m);

/** Forgets a node (DELETED). */
void gs__kinv_forget(struct gs__kinv *k, const char *name);

/** The UUID of GPU `index` of a node; NULL when unknown (no inventory). Valid until the next
 * gs__kinv_read or gs__kinv_forget of that node. */
const char *gs__kinv_uuid(const struct gs__kinv *k, const char *node, uint32_t index);

/**
 * The MIG devices of GPU `index` in a node's last good inventory, as given (profile, start;
 * start -1 when absent). @param out receives up to cap entries, valid until the next
 * gs__kinv_read or gs__kinv_forget of that node. @return GS_OK; GS_ENOENT (no inventory, or no
 * such GPU in it).
 */
int gs__kinv_mig(const struct gs__kinv *k, const char *node, uint32_t index,
                 struct gs_kmig_slot *out, uint32_t cap, uint32_t *n);

#endif /* GPUSCHED_K8S_KWORLD_INV_H */
