/*
 * libFuzzer target for the device plugin's configuration reader (src/agent/devplugin_config.c)
 * and what a configuration drives: the resource model (src/agent/devplugin_model.c) built on a
 * fixed 4-GPU node (two NVLinked whole GPUs, one more, one in MIG mode with three devices),
 * and the ListAndWatch, GetPreferredAllocation and Allocate handlers on every resource.
 *
 * Besides the sanitizers' checks it asserts the contracts: on failure a diagnostic with a
 * message and a NUL-terminated key; on success values in their documented ranges; a model
 * whose resources are sorted, hold valid IDs of at most 63 characters that gs_dp_model_find
 * finds again, and handlers that answer OK (or a gRPC status, never a library error) for
 * requests built from the model. A broken promise aborts, which the fuzzer reports.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/devplugin.h"
#include "gpusched/err.h"

#include "deviceplugin/v1beta1/api.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void node(struct gs_gpu_info *g)
{
    memset(g, 0, 4 * sizeof *g);
    for (uint32_t i = 0; i < 4; i++) {
        g[i].index = i;
        (void)snprintf(g[i].uuid, sizeof g[i].uuid, "GPU-0000000%u-aaaa-4bbb-8ccc-dddddddddddd",
                       (unsigned)i);
        (void)snprintf(g[i].model, sizeof g[i].model, "NVIDIA H200");
        g[i].mem_total_mib = 143771;
        g[i].numa_node = i < 2 ? 0 : 1;
    }
    g[0].nvlink_peer_count = 1;
    g[0].nvlink_peers[0] = 1;
    g[1].nvlink_peer_count = 1;
    g[1].nvlink_peers[0] = 0;
    g[3].mig_capable = g[3].mig_enabled = true;
    g[3].mig_count = 3;
    const char *prof[3] = {"1g.18gb", "1g.18gb", "3g.71gb+me"};
    for (uint32_t m = 0; m < 3; m++) {
        (void)snprintf(g[3].mig[m].profile, sizeof g[3].mig[m].profile, "%s", prof[m]);
        (void)snprintf(g[3].mig[m].uuid, sizeof g[3].mig[m].uuid,
                       "MIG-0000000%u-eeee-4fff-8000-111111111111", (unsigned)m);
        g[3].mig[m].mem_mib = 16384;
    }
}

static void drive(const struct gs_dp_config *cfg, const struct gs_dp_model *m,
                  const enum gs_health_state *health)
{
    for (uint32_t r = 0; r < m->n_resources; r++) {
        const struct gs_dp_resource *res = &m->resources[r];
        check(r == 0 || strcmp(m->resources[r - 1].name, res->name) < 0);
        check(res->n_devices > 0 && res->n_devices <= GS_DP_DEVICES_MAX);
        check(strncmp(res->endpoint, "gpusched-", 9) == 0 && strchr(res->endpoint, '/') == NULL);
        for (uint32_t d = 0; d < res->n_devices; d++) {
            check(strlen(res->devices[d].id) <= 63 && res->devices[d].id[0] != '\0');
            check(gs_dp_model_find(res, res->devices[d].id) == (int32_t)d);
            check(res->devices[d].gpu < m->n_gpus);
        }
        struct gs_dp_view v = {cfg, m, r, health, NULL, NULL, NULL};
        struct gs_dp_answer a;
        check(gs_dp_handle_list(&v, &a) == GS_OK && a.status == 0);
        gs_dp_answer_fini(&a);

        /* Every device offered, the first one required, half of them asked for. */
        uint32_t n = res->n_devices < 64 ? res->n_devices : 64;
        char *ids[64];
        for (uint32_t d = 0; d < n; d++)
            ids[d] = res->devices[d].id;
        V1beta1__ContainerPreferredAllocationRequest cpr =
            V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        cpr.n_available_deviceids = n;
        cpr.available_deviceids = ids;
        cpr.n_must_include_deviceids = 1;
        cpr.must_include_deviceids = ids;
        cpr.allocation_size = (int32_t)(n / 2 + 1);
        V1beta1__ContainerPreferredAllocationRequest *cprp = &cpr;
        V1beta1__PreferredAllocationRequest pr = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        pr.n_container_requests = 1;
        pr.container_requests = &cprp;
        uint8_t buf[8192];
        size_t len = v1beta1__preferred_allocation_request__pack(&pr, buf);
        check(gs_dp_handle_preferred(&v, buf, len, &a) == GS_OK && a.status == 0);
        V1beta1__PreferredAllocationResponse *resp =
            v1beta1__preferred_allocation_response__unpack(NULL, a.len, a.data);
        check(resp != NULL && resp->n_container_responses == 1);
        /* Devices on Unhealthy GPUs are never proposed: the answer is must_include plus as
         * many Healthy offered devices as fit. */
        uint32_t healthy_others = 0;
        for (uint32_t d = 1; d < n; d++)
            healthy_others += health[res->devices[d].gpu] == GS_HEALTH_HEALTHY ? 1u : 0u;
        uint32_t want = n / 2 + 1 < 1 + healthy_others ? n / 2 + 1 : 1 + healthy_others;
        check(resp->container_responses[0]->n_deviceids == want);
        for (size_t k = 1; k < resp->container_responses[0]->n_deviceids; k++) {
            int32_t pos = gs_dp_model_find(res, resp->container_responses[0]->deviceids[k]);
            check(pos >= 0 && health[res->devices[pos].gpu] == GS_HEALTH_HEALTHY);
        }
        check(strcmp(resp->container_responses[0]->deviceids[0], ids[0]) == 0);
        v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
        gs_dp_answer_fini(&a);

        V1beta1__ContainerAllocateRequest car = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        car.n_devices_ids = n < 2 ? n : 2;
        car.devices_ids = ids;
        V1beta1__ContainerAllocateRequest *carp = &car;
        V1beta1__AllocateRequest ar = V1BETA1__ALLOCATE_REQUEST__INIT;
        ar.n_container_requests = 1;
        ar.container_requests = &carp;
        len = v1beta1__allocate_request__pack(&ar, buf);
        check(gs_dp_handle_allocate(&v, buf, len, &a) == GS_OK);
        check(a.status == 0 || a.status == 3 || a.status == 9);
        gs_dp_answer_fini(&a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gs_dp_config cfg;
    static struct gs_gpu_info gpus[4];
    struct gs_diag d;
    const char *buf = size > 0 ? (const char *)data : "";

    int rc = gs_dp_config_parse(buf, size, "fuzz", &cfg, &d);
    if (rc != GS_OK) {
        check(rc == GS_EPARSE || rc == GS_ENOMEM || rc == GS_EIO);
        check(d.msg[0] != '\0');
        check(memchr(d.field, '\0', sizeof d.field) != NULL);
        char text[800];
        int len = gs_diag_format(&d, text, sizeof text);
        check(len > 0 && (size_t)len == strlen(text));
        return 0;
    }
    check(cfg.mig_strategy <= GS_MIG_STRATEGY_MIXED);
    check(cfg.list_envvar || cfg.list_cdi);
    check(cfg.n_ts <= GS_DP_TS_MAX && cfg.refresh_ms >= 100);
    check(cfg.health.n_ignored <= GS_HEALTH_IGNORED_MAX);
    check(cfg.health.probe_retry_ms > 0);
    for (uint32_t i = 0; i < cfg.n_ts; i++) {
        check(cfg.ts[i].replicas >= 2 && cfg.ts[i].replicas <= GS_DP_REPLICAS_MAX);
        check(cfg.ts[i].n_devices <= GS_DP_SELECT_MAX);
        check(strncmp(cfg.ts[i].name, "nvidia.com/", 11) == 0);
    }

    node(gpus);
    struct gs_dp_model m;
    char err[256];
    rc = gs_dp_model_build(&cfg, gpus, 4, &m, err, sizeof err);
    if (rc != GS_OK) {
        check(rc == GS_EINVAL || rc == GS_ELIMIT || rc == GS_ENOMEM);
        check(err[0] != '\0' && m.n_resources == 0);
        return 0;
    }
    enum gs_health_state health[4] = {GS_HEALTH_HEALTHY, GS_HEALTH_UNHEALTHY, GS_HEALTH_HEALTHY,
                                      GS_HEALTH_HEALTHY};
    drive(&cfg, &m, health);
    gs_dp_model_fini(&m);
    return 0;
}
