/*
 * Builders shared by the unit tests of the GPU sharing modes (test_share.c) and of FGD's
 * fragmentation over them (test_frag_modes.c): a cluster, a node of given GPUs and modes,
 * the request kinds, and pick-then-bind. Each fails the running cmocka test on an unexpected
 * return code. Linked into those two tests only (tests/CMakeLists.txt).
 */
#ifndef GPUSCHED_TESTS_SHARE_FIXTURE_H
#define GPUSCHED_TESTS_SHARE_FIXTURE_H

#include <stdint.h>

#include "gpusched/cluster.h"

/** An empty cluster; the caller frees it with gs_cluster_free(). */
struct gs_cluster *fx_new_cluster(void);

/**
 * Adds a node of 64 cores (64000 mCPU), 256 GiB (262144 MiB), 110 pods and `gpus` GPUs of
 * `model`, each of gpu_mem_mib MiB, in the modes `modes` (NULL: fractions; borrowed).
 * @return the node's id.
 */
uint32_t fx_add_node(struct gs_cluster *c, const char *name, uint32_t gpus, const char *model,
                     int64_t gpu_mem_mib, const struct gs_gpu_mode *modes);

/** 1000 mCPU, 1024 MiB and, on each of num_gpu GPUs, mib MiB (or pct % of the GPU's memory)
 *  of GPU memory with milli compute (0-999), any model. */
struct gs_pod_req fx_mem_req(uint32_t num_gpu, int64_t mib, uint8_t pct, int32_t milli);

/** 1000 mCPU, 1024 MiB and `count` MIG instances of `profile` ("1g.10gb"), any model. */
struct gs_pod_req fx_mig_req(const char *profile, uint8_t count);

/** Picks GPUs for r on `node` with the core's own pick (gs_node_pick_gpus()), checks that
 *  gs_node_fits() agrees, binds it and returns the placement. */
struct gs_placement fx_place(struct gs_cluster *c, uint32_t node, const struct gs_pod_req *r);

#endif /* GPUSCHED_TESTS_SHARE_FIXTURE_H */
