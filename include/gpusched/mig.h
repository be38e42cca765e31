/*
 * MIG geometry as data: the GPU-instance profiles of each MIG-capable GPU model, where each may
 * start, and whether a layout of instances is one the hardware can hold.
 *
 * A MIG GPU is cut into compute slices (7 on A100/H100/H200/B200, 4 on A30) and memory slices
 * (8, or 4 on A30). A GPU-instance profile such as `1g.10gb` takes a number of compute slices and
 * a contiguous run of memory slices; `nvidia-smi mig -lgipp` lists, per profile, the memory
 * slices where such a run may start (`{0,2,4}:2` is "start at 0, 2 or 4, two slices long"). Two
 * instances may coexist only when their memory runs do not overlap, which is the check NVML
 * makes when it creates an instance (nvmlDeviceGetGpuInstancePossiblePlacements_v2: "Creation of
 * new GPU instance will fail if there is overlap with the already occupied memory slices").
 * An instance at memory start s with c compute slices holds compute slices s..s+c-1: every
 * listed placement keeps that range inside the GPU's compute slices, and memory-disjoint
 * instances get disjoint compute ranges (c is never more than the run's length).
 *
 * Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
 * (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): the
 * profile tables (fraction of memory and SMs, number of instances available) per product and
 * the placement diagrams, with the A100-80GB, H100, H200 and B200 profile names as the guide
 * spells them. Memory in MiB is kept only where an `nvidia-smi mig -lgip` listing gives it
 * (H100-80GB: 9.75, 19.62, 39.50 and 79.25 GiB, times 1024, to the listing's two decimals);
 * elsewhere it is 0 and gs_mig_profile_mem_mib() derives it from the memory slices. Profiles of
 * later drivers that this table does not list (for example the
 * `+gfx` and `-me` variants) are unknown profiles here.
 *
 * The table is static, read-only data: every function here is pure and thread-safe.
 */
#ifndef GPUSCHED_MIG_H
#define GPUSCHED_MIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Most profiles of one model in the table. */
#define GS_MIG_PROFILES_MAX 8
/** Most start slots of one profile. */
#define GS_MIG_STARTS_MAX 8
/** Most instances one GPU can hold (7 compute slices, so 7 instances; one spare). */
#define GS_MIG_INSTANCES_MAX 8
/** Longest profile name, bytes with the NUL ("1g.18gb+me" is 11). */
#define GS_MIG_NAME_MAX 16

/** One GPU-instance profile of a model. Plain, static, read-only value. */
struct gs_mig_profile {
    const char *name;                  /**< as NVIDIA spells it, e.g. "1g.10gb", "1g.10gb+me" */
    uint8_t compute_slices;            /**< compute slices it takes (the "1" of 1g) */
    uint8_t mem_slices;                /**< memory slices it takes, the placement's length */
    uint8_t max_count;                 /**< most instances of it on one GPU ("instances
                                            available" in the guide's table) */
    uint8_t n_starts;                  /**< entries in starts */
    uint8_t starts[GS_MIG_STARTS_MAX]; /**< allowed first memory slices, ascending */
    int64_t mem_mib;                   /**< memory of the instance, MiB, as `nvidia-smi mig
                                            -lgip` reports it; 0 when not in the table */
};

/** One MIG-capable GPU model. Plain, static, read-only value. */
struct gs_mig_model {
    const char *name;       /**< canonical name, e.g. "A100-40GB", "H200-141GB", "B200" */
    uint8_t compute_slices; /**< compute slices of the GPU (7, or 4 on A30) */
    uint8_t mem_slices;     /**< memory slices of the GPU (8, or 4 on A30) */
    uint8_t n_profiles;     /**< entries in profiles */
    struct gs_mig_profile profiles[GS_MIG_PROFILES_MAX]; /**< by index; a layout names them by
                                                              this index */
};

/** One GPU instance of a layout: a profile of the model, placed at a start slot. */
struct gs_mig_instance {
    uint8_t profile; /**< index into the model's profiles[] */
    uint8_t start;   /**< first memory slice */
};

/** Returns the number of models in the table. */
uint32_t gs_mig_model_count(void);

/** Returns model `i` of the table (static storage), or NULL past the end. */
const struct gs_mig_model *gs_mig_model_at(uint32_t i);

/**
 * Finds a model by name. Accepts the canonical names ("A100-40GB", "A30-24GB", "H100-94GB",
 * "B200") and the `nvidia.com/gpu.product` label spellings of GPU Feature Discovery
 * ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL",
 * "NVIDIA-H200", "NVIDIA-B200", "NVIDIA-A30"), case-insensitively, with '-', '_' or ' ' between
 * words. A name whose memory size is needed but missing ("A100") or not a MIG size of the
 * family ("H100-96GB") matches nothing.
 * @param name  borrowed; NULL matches nothing.
 * @return the model (static storage), or NULL.
 */
const struct gs_mig_model *gs_mig_model_find(const char *name);

/**
 * Finds a profile of a model by its name ("1g.10gb"; an optional leading "MIG " or "mig-" is
 * skipped, so the resource name suffix `mig-1g.10gb` also matches).
 * @return the profile index, or -1 when the model has no such profile.
 */
int gs_mig_profile_find(const struct gs_mig_model *m, const char *name);

/**
 * Memory of one instance of profile `p`, MiB: the table's figure when it has one, else the
 * GPU's memory times the profile's share of the memory slices (rounded down).
 * @param gpu_mem_mib  the GPU's device memory, MiB, >= 0 (only used when the table has none).
 * @return MiB, or 0 for a bad profile index.
 */
int64_t gs_mig_profile_mem_mib(const struct gs_mig_model *m, uint32_t p, int64_t gpu_mem_mib);

/** Bitmap of the memory slices instance `in` takes (bit k = slice k); 0 for a bad instance. */
uint32_t gs_mig_mem_mask(const struct gs_mig_model *m, struct gs_mig_instance in);

/** Bitmap of the compute slices instance `in` takes; 0 for a bad instance. */
uint32_t gs_mig_compute_mask(const struct gs_mig_model *m, struct gs_mig_instance in);

/**
 * Checks a layout: instances in[0..n) in the order given, each judged against the ones before
 * it. The first fault found is reported, in this order for each instance: unknown profile; a
 * start slot the profile cannot use; more instances of the profile than it allows; memory
 * slices exceeded (the instances so far take more memory slices than the GPU has); compute
 * slices exceeded; memory slices overlapping an earlier instance.
 * @param in      borrowed; may be NULL when n == 0.
 * @param n       instances, 0..GS_MIG_INSTANCES_MAX (an empty layout is valid).
 * @param reason  receives a NUL-terminated sentence naming the instance by position, profile
 *                and start, e.g. "instance 2 (2g.10gb at 2) overlaps instance 1 (3g.20gb at 0)
 *                in memory slices 2-3"; "" on success. May be NULL; cut to cap bytes.
 * @return GS_OK; GS_EINVAL for an invalid layout, a NULL model or n above the maximum.
 */
int gs_mig_layout_check(const struct gs_mig_model *m, const struct gs_mig_instance *in, uint32_t n,
                        char *reason, size_t cap);

/**
 * Counts the maximal layouts of a model: sets of instances (profile and start) that pass
 * gs_mig_layout_check() and to which no further instance of an allowed profile can be added.
 * Sets are unordered: the same instances in another order count once. Exhaustive search over
 * the placements; a few thousand layouts for a 7-slice GPU.
 * @param profile_mask  bit p allows profile p; other profiles are never placed.
 * @param count         receives the number of maximal layouts.
 * @return GS_OK; GS_EINVAL for a NULL model.
 */
int gs_mig_count_maximal_layouts(const struct gs_mig_model *m, uint32_t profile_mask,
                                 uint64_t *count);

#endif /* GPUSCHED_MIG_H */
