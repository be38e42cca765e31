/*
 * The fixtures of dp_fixture.h, for test_devplugin_unit.c and test_dpkube_unit.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dp_fixture.h"

#include "gpusched/err.h"

void dpfx_make_node(struct gs_gpu_info *g, uint32_t n, uint32_t per_numa, uint32_t nvl)
{
    memset(g, 0, n * sizeof *g);
    for (uint32_t i = 0; i < n; i++) {
        g[i].index = i;
        (void)snprintf(g[i].uuid, sizeof g[i].uuid, "GPU-%u", (unsigned)i);
        (void)snprintf(g[i].model, sizeof g[i].model, "NVIDIA H200");
        g[i].mem_total_mib = 143771;
        g[i].numa_node = (int32_t)(i / per_numa);
        if (nvl > 0)
            for (uint32_t j = (i / nvl) * nvl; j < (i / nvl + 1) * nvl && j < n; j++)
                if (j != i)
                    g[i].nvlink_peers[g[i].nvlink_peer_count++] = j;
    }
}

void dpfx_parse_ok(const char *text, struct gs_dp_config *cfg)
{
    struct gs_diag d;
    int rc = gs_dp_config_parse(text, strlen(text), "t.yaml", cfg, &d);
    if (rc != GS_OK) {
        char buf[700];
        gs_diag_format(&d, buf, sizeof buf);
        fail_msg("unexpected parse error: %s", buf);
    }
}

uint8_t *dpfx_pack_preferred(const char *const *avail, size_t n_avail, const char *const *must,
                             size_t n_must, int size, size_t *len)
{
    V1beta1__ContainerPreferredAllocationRequest q =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    q.n_available_deviceids = n_avail;
    q.available_deviceids = (char **)avail;
    q.n_must_include_deviceids = n_must;
    q.must_include_deviceids = (char **)must;
    q.allocation_size = size;
    V1beta1__ContainerPreferredAllocationRequest *qp = &q;
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    req.n_container_requests = 1;
    req.container_requests = &qp;
    uint8_t *buf = malloc(v1beta1__preferred_allocation_request__get_packed_size(&req) + 1);
    assert_non_null(buf);
    *len = v1beta1__preferred_allocation_request__pack(&req, buf);
    return buf;
}

const char *dpfx_prefer(const struct gs_dp_view *v, const char *const *avail, size_t n_avail,
                        const char *const *must, size_t n_must, int size)
{
    static char out[4096];
    size_t len;
    uint8_t *buf = dpfx_pack_preferred(avail, n_avail, must, n_must, size, &len);
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_preferred(v, buf, len, &a), GS_OK);
    free(buf);
    assert_int_equal(a.status, 0);
    V1beta1__PreferredAllocationResponse *r =
        v1beta1__preferred_allocation_response__unpack(NULL, a.len, a.data);
    assert_non_null(r);
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < r->container_responses[0]->n_deviceids && used < sizeof out; i++) {
        int w = snprintf(out + used, sizeof out - used, "%s%s", i > 0 ? "," : "",
                         r->container_responses[0]->deviceids[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
    gs_dp_answer_fini(&a);
    return out;
}

V1beta1__AllocateResponse *dpfx_allocate(const struct gs_dp_view *v, const char *const *ids,
                                         size_t n, int *status)
{
    V1beta1__ContainerAllocateRequest q = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    q.n_devices_ids = n;
    q.devices_ids = (char **)ids;
    V1beta1__ContainerAllocateRequest *qp = &q;
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    req.n_container_requests = 1;
    req.container_requests = &qp;
    uint8_t *buf = malloc(v1beta1__allocate_request__get_packed_size(&req) + 1);
    assert_non_null(buf);
    size_t len = v1beta1__allocate_request__pack(&req, buf);
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_allocate(v, buf, len, &a), GS_OK);
    free(buf);
    *status = a.status;
    V1beta1__AllocateResponse *r =
        a.status == 0 ? v1beta1__allocate_response__unpack(NULL, a.len, a.data) : NULL;
    gs_dp_answer_fini(&a);
    return r;
}
