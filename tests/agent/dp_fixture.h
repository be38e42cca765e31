/*
 * Fixtures shared by the device plugin's unit tests (test_devplugin_unit.c) and those of its
 * Kubernetes side (test_dpkube_unit.c): a synthetic node of H200s, a configuration that must
 * parse, and GetPreferredAllocation / Allocate calls for one container through the pure
 * handlers (gs_dp_handle_preferred(), gs_dp_handle_allocate()). Each fails the running cmocka
 * test on an unexpected return code. Linked into those two tests only (tests/agent).
 */
#ifndef GPUSCHED_TESTS_DP_FIXTURE_H
#define GPUSCHED_TESTS_DP_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/devplugin.h"

/**
 * Fills g[0..n) with n GPUs "GPU-<i>" of index i, model "NVIDIA H200", 143771 MiB, on NUMA
 * node i / per_numa (per_numa >= 1), with NVLink to the others of its group of `nvl` GPUs
 * (0: none); no MIG.
 */
void dpfx_make_node(struct gs_gpu_info *g, uint32_t n, uint32_t per_numa, uint32_t nvl);

/** Parses the configuration text (as file "t.yaml") into cfg; fails the test, with the
 *  formatted diagnostic, when it does not parse. */
void dpfx_parse_ok(const char *text, struct gs_dp_config *cfg);

/**
 * Packs one container's PreferredAllocationRequest: the available and must-include device ids
 * (borrowed) and the allocation size.
 * @param len  receives the packed length.
 * @return the bytes, malloc'd (the caller frees them).
 */
uint8_t *dpfx_pack_preferred(const char *const *avail, size_t n_avail, const char *const *must,
                             size_t n_must, int size, size_t *len);

/**
 * GetPreferredAllocation for one container through view v; the call must succeed (status 0).
 * @return the preferred ids joined "id,id" (static storage, valid until the next call).
 */
const char *dpfx_prefer(const struct gs_dp_view *v, const char *const *avail, size_t n_avail,
                        const char *const *must, size_t n_must, int size);

/**
 * Allocate of one container with the device ids ids[0..n) (borrowed) through view v.
 * @param status  receives the gRPC status of the answer (0: granted).
 * @return the unpacked response (free with v1beta1__allocate_response__free_unpacked()), NULL
 *         for a refused call.
 */
V1beta1__AllocateResponse *dpfx_allocate(const struct gs_dp_view *v, const char *const *ids,
                                         size_t n, int *status);

#endif /* GPUSCHED_TESTS_DP_FIXTURE_H */
