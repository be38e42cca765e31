/*
 * Internal to the fake GPU backend: its state, shared by the reader (gpu_fake_yaml.c: the YAML
 * file into this state) and the running backend (gpu_fake.c: the operations, the script's
 * replay and the MIG re-partition). Not part of the public API.
 */
#ifndef GPUSCHED_AGENT_GPU_FAKE_INT_H
#define GPUSCHED_AGENT_GPU_FAKE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "gpusched/gpu.h"

/** Largest accepted file, bytes. */
#define FAKE_FILE_MAX ((size_t)4 * 1024 * 1024)
/** Most script entries. */
#define FAKE_STEPS_MAX 100000u
/** Most scripted MIG layouts ("mig:" script entries). */
#define FAKE_LAYOUTS_MAX 1024u
/** Largest accepted t_ms: about 31 years, far from int64 overflow when added to a clock. */
#define FAKE_T_MAX_MS 1000000000000LL
/** Deepest nesting a fake node file may have (its schema needs 5). */
#define FAKE_DEPTH_MAX 16
/** Most YAML nodes in a fake node file (64 GPUs and a long script fit far below). */
#define FAKE_NODES_MAX 1000000

/** Every sample field, for GPUs that support them all. */
#define ALL_FIELDS                                                                                 \
    (GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB | GS_GPU_HAVE_TEMP | GS_GPU_HAVE_POWER |                    \
     GS_GPU_HAVE_SM_CLOCK | GS_GPU_HAVE_MEM_CLOCK | GS_GPU_HAVE_ECC_DBE | GS_GPU_HAVE_XID)

/** What a script entry does. */
enum step_kind {
    STEP_SET,  /**< change sample values */
    STEP_XID,  /**< raise an XID */
    STEP_ECC,  /**< raise double-bit ECC errors */
    STEP_LOST, /**< mark the GPU lost (sample fails) or found again */
    STEP_MIG,  /**< replace the GPU's MIG mode and instances (an operator re-partitioned it) */
};

/** One script entry. */
struct step {
    int64_t t_ms;             /**< due time, ms after open */
    uint32_t gpu;             /**< GPU index */
    enum step_kind kind;      /**< what it does */
    uint32_t set_mask;        /**< STEP_SET: gs_gpu_field bits of the values it sets */
    struct gs_gpu_sample set; /**< STEP_SET: the values (fb_used_mib for GS_GPU_HAVE_FB) */
    uint64_t n;               /**< STEP_XID: the code; STEP_ECC: error count (>= 1) */
    bool lost;                /**< STEP_LOST: new state */
    uint32_t layout;          /**< STEP_MIG: position in fake.layouts */
    size_t seq;               /**< position in the file, for a stable sort */
};

/** One fake GPU. */
struct fake_gpu {
    struct gs_gpu_info info;  /**< static facts */
    struct gs_gpu_sample cur; /**< current values; cur.valid = supported fields */
    bool lost;                /**< sample() fails while set */
    uint64_t resets;          /**< times a "lost: false" entry found the GPU again */
    bool no_procs;            /**< "unsupported: [processes]": processes() answers GS_ENOENT */
    uint32_t n_procs;         /**< entries used in procs */
    struct gs_gpu_proc procs[GS_GPU_PROC_MAX]; /**< the "processes:" list, in file order */
};

/** The backend's state. */
struct fake {
    struct gs_clock clock;           /**< time source */
    int64_t t0_ms;                   /**< clock at open */
    struct gs_gpu_system sys;        /**< driver facts */
    uint32_t n;                      /**< GPUs */
    struct fake_gpu gpu[GS_GPU_MAX]; /**< by index */
    struct step *steps;              /**< script, sorted by t_ms */
    size_t n_steps;                  /**< entries in steps */
    size_t cap_steps;                /**< allocated entries */
    struct gs_gpu_info *layouts;     /**< STEP_MIG layouts: mig_enabled, mig_count, mig only */
    uint32_t n_layouts;              /**< entries used in layouts */
    uint32_t layout_gpu[FAKE_LAYOUTS_MAX];            /**< the GPU each layout is for */
    const yaml_node_t *layout_node[FAKE_LAYOUTS_MAX]; /**< where it was read (parse only) */
    size_t applied;                                   /**< steps[0, applied) have taken effect */
    size_t delivered; /**< event steps before this were returned by wait_event */
};

/** The operations of the fake backend (gpu_fake.c); gs_gpu_parse_fake() hands them out. */
extern const struct gs_gpu_ops gs__fake_ops;

#endif /* GPUSCHED_AGENT_GPU_FAKE_INT_H */
