/*
 * Internal to the Kubernetes translation (kworld*.c): the MIG instances of a Node that has no
 * agent inventory (gpusched.io/gpus), read from what the NVIDIA device plugin and GPU Feature
 * Discovery publish. Not part of include/gpusched/kworld.h.
 *
 * Mixed strategy (GFD label `nvidia.com/mig.strategy: mixed`, or any `nvidia.com/mig-<profile>`
 * capacity): `status.capacity` `nvidia.com/gpu: W` is W GPUs without MIG, and each
 * `nvidia.com/mig-<profile>: c` is c MIG devices of that GPU-instance profile of the model in
 * label `nvidia.com/gpu.product`; label `nvidia.com/gpu.count` is every physical GPU. Which GPU
 * holds which instance is not published, so the layouts are rebuilt: the fewest GPUs whose
 * layouts the hardware allows (gs_mig_layout_check over the model's geometry, mig.h) and that
 * hold exactly the advertised counts. MIG starts are the rebuilt ones, known to the core only:
 * the scheduler's assignment then records the profile without a start (the device plugin picks
 * the instance).
 *
 * Single strategy (`nvidia.com/mig.strategy: single`): `nvidia.com/gpu: N` counts MIG devices,
 * all of the profile the product label ends in (`A100-SXM4-40GB-MIG-1g.5gb`); pods ask for them
 * as `nvidia.com/gpu` and get one device each, so each is one whole device of the core, with the
 * instance's memory (label `nvidia.com/gpu.memory`).
 */
#ifndef GPUSCHED_K8S_KWORLD_CAPMIG_H
#define GPUSCHED_K8S_KWORLD_CAPMIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h" /* GS_NODE_GPUS_MAX, struct gs_gpu_mode */
#include "gpusched/mig.h"
#include "kworld_inv.h"

/** The label GFD writes with the device plugin's MIG strategy ("single", "mixed", "none"). */
#define GS_KCAP_STRATEGY "nvidia.com/mig.strategy"

/** Most distinct per-GPU layouts (instance counts per profile) the search keeps. */
#define GS_KCAP_LAYOUTS_MAX 4096
/** Most states (combinations of remaining instance counts) the search visits. */
#define GS_KCAP_STATES_MAX 400000

/** A request to pack: instances per profile of a model. Plain value record. */
struct gs__kcap_counts {
    const struct gs_mig_model *model; /**< the GPU model (static storage) */
    uint16_t n[GS_MIG_PROFILES_MAX];  /**< instances per profile index of `model` */
};

/**
 * Packs MIG instances onto the fewest GPUs of one model: a list of per-GPU layouts, each passing
 * gs_mig_layout_check(), whose instances of each profile add up to exactly `want->n`. Among
 * packings of as many GPUs the first found in a fixed order is returned (deterministic): the
 * first GPU holds the profile with the most compute slices, in the first layout (instances by
 * profile index, then start, enumerated depth first) that a packing completes. Cost: 0.006 ms
 * for a usual node, 14 ms for the slowest mix bench/bench_capmig found (Release).
 * @param want        borrowed; profiles with n = 0 are never placed.
 * @param max_gpus    most GPUs the packing may use, 0..GS_NODE_GPUS_MAX.
 * @param layouts     receives the layouts of the GPUs 0..*n_gpus-1 (any order of instances,
 *                    ascending start within a GPU); GS_NODE_GPUS_MAX entries.
 * @param n_gpus      receives the GPUs used (0 when `want` is empty).
 * @return GS_OK; GS_ENOENT when no packing on max_gpus GPUs or fewer holds the counts; GS_ELIMIT
 *         when the search is too large (more than GS_KCAP_STATES_MAX states or
 *         GS_KCAP_LAYOUTS_MAX layouts); GS_EINVAL for a NULL model; GS_ENOMEM. Pure.
 */
int gs__kcap_pack(const struct gs__kcap_counts *want, uint32_t max_gpus,
                  struct gs_gpu_mode layouts[GS_NODE_GPUS_MAX], uint32_t *n_gpus);

/**
 * The GPUs of a Node without a good inventory, when its capacity speaks of MIG (see the top of
 * this file); otherwise the W GPUs in `whole_mode`, as the node was always read.
 * GPU order: the W GPUs without MIG first (mode `whole`, usable below allocatable W, the
 * highest indices the unhealthy ones), then the rebuilt MIG GPUs, then physical GPUs left over
 * (`nvidia.com/gpu.count` minus both: MIG GPUs whose instances the packing put elsewhere), which
 * are unusable. A profile whose allocatable is below its capacity makes the MIG GPUs holding it
 * unusable, from the highest index, until no more of it is usable than allocatable.
 * When the MIG capacity cannot be modelled (model not in the MIG table, a profile not of the
 * model, counts that fit no layouts on the GPUs there are, a quantity that is not a count) the
 * node keeps its W GPUs and no MIG GPU, with one warning naming node and profile (said once per
 * node and text through gs__kinv's memory; `warn` may be NULL). Single strategy beyond
 * GS_NODE_GPUS_MAX devices keeps that many, with a warning.
 * @param obj       the Node (borrowed).
 * @param name      its metadata.name.
 * @param product   label nvidia.com/gpu.product, or NULL.
 * @param whole     W from status.capacity nvidia.com/gpu (after time-slicing's division).
 * @param whole_alloc  W from status.allocatable, <= whole.
 * @param whole_mode   the mode of the GPUs without MIG (fractions, or time-sliced).
 * @param modes     receives the modes of GPUs 0..*n-1.
 * @param usable    receives their health.
 * @param n         receives the GPU count (`whole` when the node is not a MIG node: its W GPUs
 *                  in `whole_mode`).
 * @param set_modes set to true when the modes are to be set on the node (a MIG node of either
 *                  strategy); left alone otherwise.
 * @return GS_OK; GS_ENOMEM.
 */
int gs__kcap_read(struct gs__kinv *k, const json_t *obj, const char *name, const char *product,
                  uint32_t whole, uint32_t whole_alloc, const struct gs_gpu_mode *whole_mode,
                  struct gs_gpu_mode modes[GS_NODE_GPUS_MAX], bool usable[GS_NODE_GPUS_MAX],
                  uint32_t *n, bool *set_modes, void (*warn)(void *ctx, const char *msg),
                  void *ctx);

/** Whether a Node's labels name the single MIG strategy. */
bool gs__kcap_single(const json_t *obj);

#endif /* GPUSCHED_K8S_KWORLD_CAPMIG_H */
