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

#include "gpusched/cluster.h" /* GS_NODE_GPUS_MAX */

/** The annotation. */
#define GS_KWORLD_INVENTORY "gpusched.io/gpus"

/** A Node's GPUs as its agent published them. Plain value record. */
struct gs__knode_gpus {
    uint32_t n;                      /**< GPUs, indices 0..n-1, <= GS_NODE_GPUS_MAX */
    char model[96];                  /**< model of GPU 0 (the core has one per node) */
    int64_t mem_mib;                 /**< smallest memory of the GPUs, MiB */
    bool usable[GS_NODE_GPUS_MAX];   /**< Healthy and placeable as a whole GPU: mode
                                          "whole" or "replicas" (MIG and fraction slices
                                          wait for the core's GPU sharing) */
    char uuid[GS_NODE_GPUS_MAX][96]; /**< "GPU-..." by index */
};

/**
 * Reads the annotation of a Node object.
 * @param node  the Node (borrowed).
 * @param name  its metadata.name, for the warning.
 * @param out   filled when the annotation is there and good; zeroed otherwise.
 * @param warn  receives, when the annotation is there but bad, one sentence naming the node,
 *              the annotation and the field ("node n1: annotation gpusched.io/gpus:
 *              gpus[1].uuid: not a string; GPUs read from status.capacity"); cap bytes.
 * @return 1 read (out filled), 0 no annotation, -1 bad (warn filled); never crashes on any
 *         input.
 */
int gs__kworld_node_gpus(const json_t *node, const char *name, struct gs__knode_gpus *out,
                         char *warn, size_t cap);

/** What the translation keeps of the inventories: UUIDs by node, the warnings given. */
struct gs__kinv {
    json_t *uuids;  /**< node name -> [GPU UUID by index] of its last good inventory */
    json_t *warned; /**< node name -> the last warning given about it (said once) */
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

/** Forgets a node (DELETED). */
void gs__kinv_forget(struct gs__kinv *k, const char *name);

/** The UUID of GPU `index` of a node; NULL when unknown (no inventory). Valid until the next
 * gs__kinv_read or gs__kinv_forget of that node. */
const char *gs__kinv_uuid(const struct gs__kinv *k, const char *node, uint32_t index);

#endif /* GPUSCHED_K8S_KWORLD_INV_H */
