/*
 * Node labels in the style of NVIDIA GPU Feature Discovery (GFD), computed from a GPU
 * backend's information, so that node selectors and affinities written for GFD keep working
 * on nodes run by the gpusched agent.
 *
 * Labels (names and meanings from GFD's README, docs/gpu-feature-discovery in
 * NVIDIA/k8s-device-plugin):
 *   nvidia.com/gpu.count, gpu.product (model, spaces as '-'), gpu.memory (MiB), gpu.replicas,
 *   gpu.compute.major/minor and gpu.family (from the compute capability, when known),
 *   cuda.driver-version.{full,major,minor,revision} and the older cuda.driver.{major,minor,
 *   rev} (kernel driver version "550.54.15"), cuda.runtime-version.{full,major,minor} and the
 *   older cuda.runtime.{major,minor} (the CUDA version the driver supports), mig.capable,
 *   mig.strategy (when any GPU is MIG-capable), gfd.timestamp (when asked for).
 * MIG strategy "single" (every GPU runs MIG with one profile) overrides gpu.product
 *   ("<model>-MIG-<profile>"), gpu.count (MIG devices) and gpu.memory (per MIG device) and adds
 *   gpu.slices.gi; "mixed" adds nvidia.com/mig-<profile>.{count,memory,slices.gi} per profile
 *   ('+' in a profile becomes '.', as label names allow no '+').
 * Values are made valid Kubernetes label values: at most 63 characters of [A-Za-z0-9._-],
 * other characters replaced by '-', starting and ending alphanumeric.
 *
 * Pure: no I/O except the writer, which prints to a caller's FILE.
 */
#ifndef GPUSCHED_GFD_LABELS_H
#define GPUSCHED_GFD_LABELS_H

#include <stdint.h>
#include <stdio.h>

#include "gpusched/gpu.h"

/** Most labels produced. */
#define GS_GFD_LABELS_MAX 128
/** Buffer size of a label key, NUL included. */
#define GS_GFD_KEY_LEN 128
/** Buffer size of a label value (63 characters), NUL included. */
#define GS_GFD_VALUE_LEN 64

/** How MIG devices are advertised (the device plugin's migStrategy). */
enum gs_mig_strategy {
    GS_MIG_STRATEGY_NONE = 0,   /**< MIG devices are not advertised */
    GS_MIG_STRATEGY_SINGLE = 1, /**< all GPUs share one profile, advertised as nvidia.com/gpu */
    GS_MIG_STRATEGY_MIXED = 2,  /**< each profile is its own resource nvidia.com/mig-<profile> */
};

/** What the caller decides. */
struct gs_gfd_options {
    uint32_t replicas;                 /**< nvidia.com/gpu.replicas (time-slicing); 0 means 1 */
    enum gs_mig_strategy mig_strategy; /**< nvidia.com/mig.strategy */
    int64_t timestamp_s;               /**< nvidia.com/gfd.timestamp; <= 0 leaves it out */
};

/** One label. */
struct gs_gfd_label {
    char key[GS_GFD_KEY_LEN];     /**< "nvidia.com/gpu.product" */
    char value[GS_GFD_VALUE_LEN]; /**< "NVIDIA-H200" */
};

/** A label set, sorted by key. Caller storage. */
struct gs_gfd_labels {
    uint32_t n;                               /**< labels used */
    struct gs_gfd_label v[GS_GFD_LABELS_MAX]; /**< sorted by key (strcmp) */
};

/**
 * Parses "none", "single" or "mixed".
 * @return GS_OK; GS_EINVAL (anything else; *out unchanged).
 */
int gs_gfd_mig_strategy_parse(const char *text, enum gs_mig_strategy *out);

/**
 * Computes the labels of a node.
 * @param sys   driver facts (empty fields leave their labels out).
 * @param gpus  n entries; gpus[0] gives product, memory and compute capability (as GFD, which
 *              reads the first GPU). n == 0 gives no labels.
 * @param opt   choices; NULL means replicas 1, strategy none, no timestamp.
 * @param out   filled, sorted by key; emptied on failure.
 * @return GS_OK; GS_EINVAL (NULL; or strategy single while the GPUs do not all run MIG with
 *         one profile); GS_ELIMIT (more than GS_GFD_LABELS_MAX labels).
 */
int gs_gfd_labels(const struct gs_gpu_system *sys, const struct gs_gpu_info *gpus, uint32_t n,
                  const struct gs_gfd_options *opt, struct gs_gfd_labels *out);

/** The value of a label, or NULL when absent. */
const char *gs_gfd_label_get(const struct gs_gfd_labels *l, const char *key);

/**
 * Writes "key=value\n" per label, in key order (the format of an NFD features.d file).
 * @return GS_OK; GS_EIO (a write failed); GS_EINVAL (NULL).
 */
int gs_gfd_labels_write(const struct gs_gfd_labels *l, FILE *f);

#endif /* GPUSCHED_GFD_LABELS_H */
