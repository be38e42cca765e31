/*
 * The NVML backend (contract in include/gpusched/gpu.h).
 *
 * libnvidia-ml.so.1 is opened with dlopen() when the agent starts, so the project builds and
 * runs its tests on machines without NVIDIA's headers or driver, and a node without a driver
 * gets a sentence rather than a loader failure. The few NVML types and prototypes used here
 * are declared below from the published NVML API reference (docs.nvidia.com/deploy/nvml-api):
 * the return code is an int-sized enum, devices and event sets are opaque pointers, and the
 * structs have the documented member order. Versioned entry points (nvmlInit_v2,
 * nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetPciInfo_v3,
 * nvmlEventSetWait_v2) are resolved by their versioned names, as nvml.h's macros would.
 *
 * Everything here only reads. Entry points that newer drivers added (compute capability, MIG
 * queries, P2P status) are optional: when one is missing the field is left unknown. The NUMA
 * node comes from sysfs (/sys/bus/pci/devices/<bus id>/numa_node). NVLink peers come from
 * nvmlDeviceGetP2PStatus(NVLINK), which also answers through an NVSwitch (where the remote
 * end of each link is the switch, not a GPU).
 *
 * Set GS_NVML_LIBRARY to load another file (a path or soname) instead of libnvidia-ml.so.1.
 */
#define _POSIX_C_SOURCE 200809L /* getenv, snprintf */

#include "gpusched/gpu.h"

#include "gpu_internal.h"
#include "gpusched/err.h"
#include "nvml_abi.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The NVML ABI subset: nvml_abi.h. */

struct nvml_api {
    nvml_ret (*init_v2)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*device_get_count_v2)(unsigned int *);
    nvml_ret (*device_get_handle_by_index_v2)(unsigned int, nvml_device *);
    nvml_ret (*device_get_name)(nvml_device, char *, unsigned int);
    nvml_ret (*device_get_uuid)(nvml_device, char *, unsigned int);
    nvml_ret (*device_get_memory_info)(nvml_device, struct nvml_memory *);
    nvml_ret (*device_get_utilization_rates)(nvml_device, struct nvml_utilization *);
    nvml_ret (*device_get_temperature)(nvml_device, int, unsigned int *);
    nvml_ret (*device_get_power_usage)(nvml_device, unsigned int *);
    nvml_ret (*device_get_clock_info)(nvml_device, int, unsigned int *);
    nvml_ret (*device_get_pci_info_v3)(nvml_device, struct nvml_pci_info *);
    nvml_ret (*device_get_total_ecc_errors)(nvml_device, int, int, unsigned long long *);
    nvml_ret (*system_get_driver_version)(char *, unsigned int);
    nvml_ret (*event_set_create)(nvml_event_set *);
    nvml_ret (*device_register_events)(nvml_device, unsigned long long, nvml_event_set);
    nvml_ret (*event_set_wait_v2)(nvml_event_set, struct nvml_event_data *, unsigned int);
    nvml_ret (*event_set_free)(nvml_event_set);
    /* optional */
    nvml_ret (*device_get_supported_event_types)(nvml_device, unsigned long long *);
    nvml_ret (*system_get_cuda_driver_version_v2)(int *);
    nvml_ret (*system_get_cuda_driver_version)(int *);
    nvml_ret (*device_get_mig_mode)(nvml_device, unsigned int *, unsigned int *);
    nvml_ret (*device_get_max_mig_device_count)(nvml_device, unsigned int *);
    nvml_ret (*device_get_mig_device_handle_by_index)(nvml_device, unsigned int, nvml_device *);
    nvml_ret (*device_get_cuda_compute_capability)(nvml_device, int *, int *);
    nvml_ret (*device_get_p2p_status)(nvml_device, nvml_device, int, int *);
    nvml_ret (*device_get_gpu_instance_id)(nvml_device, unsigned int *);
    nvml_ret (*device_get_compute_instance_id)(nvml_device, unsigned int *);
    nvml_ret (*device_get_gpu_instance_by_id)(nvml_device, unsigned int, nvml_gpu_instance *);
    nvml_ret (*gpu_instance_get_info)(nvml_gpu_instance, struct nvml_gpu_instance_info *);
    nvml_ret (*device_get_compute_running_processes_v3)(nvml_device, unsigned int *,
                                                        struct nvml_process_info *);
    nvml_ret (*device_get_process_utilization)(nvml_device,
                                               struct nvml_process_utilization_sample *,
                                               unsigned int *, unsigned long long);
    /* optional, only for dynamic MIG (gs_gpu_mig_destroy, gs_gpu_mig_create) */
    nvml_ret (*device_get_gpu_instance_profile_info)(nvml_device, unsigned int,
                                                     struct nvml_gpu_instance_profile_info *);
    nvml_ret (*device_create_gpu_instance_with_placement)(
        nvml_device, unsigned int, const struct nvml_gpu_instance_placement *, nvml_gpu_instance *);
    nvml_ret (*gpu_instance_create_compute_instance)(nvml_gpu_instance, unsigned int,
                                                     nvml_compute_instance *);
    nvml_ret (*gpu_instance_destroy)(nvml_gpu_instance);
    nvml_ret (*compute_instance_destroy)(nvml_compute_instance);
    nvml_ret (*gpu_instance_get_compute_instance_by_id)(nvml_gpu_instance, unsigned int,
                                                        nvml_compute_instance *);
};

/** Where each entry point goes, and whether the backend can work without it. */
static const struct {
    const char *name;
    size_t offset;
    bool required;
} symbols[] = {
#define REQ(f, n)                                                                                  \
    {                                                                                              \
        n, offsetof(struct nvml_api, f), true                                                      \
    }
#define OPT(f, n)                                                                                  \
    {                                                                                              \
        n, offsetof(struct nvml_api, f), false                                                     \
    }
    REQ(init_v2, "nvmlInit_v2"),
    REQ(shutdown, "nvmlShutdown"),
    OPT(error_string, "nvmlErrorString"),
    REQ(device_get_count_v2, "nvmlDeviceGetCount_v2"),
    REQ(device_get_handle_by_index_v2, "nvmlDeviceGetHandleByIndex_v2"),
    REQ(device_get_name, "nvmlDeviceGetName"),
    REQ(device_get_uuid, "nvmlDeviceGetUUID"),
    REQ(device_get_memory_info, "nvmlDeviceGetMemoryInfo"),
    REQ(device_get_utilization_rates, "nvmlDeviceGetUtilizationRates"),
    REQ(device_get_temperature, "nvmlDeviceGetTemperature"),
    REQ(device_get_power_usage, "nvmlDeviceGetPowerUsage"),
    REQ(device_get_clock_info, "nvmlDeviceGetClockInfo"),
    REQ(device_get_pci_info_v3, "nvmlDeviceGetPciInfo_v3"),
    REQ(device_get_total_ecc_errors, "nvmlDeviceGetTotalEccErrors"),
    REQ(system_get_driver_version, "nvmlSystemGetDriverVersion"),
    REQ(event_set_create, "nvmlEventSetCreate"),
    REQ(device_register_events, "nvmlDeviceRegisterEvents"),
    REQ(event_set_wait_v2, "nvmlEventSetWait_v2"),
    REQ(event_set_free, "nvmlEventSetFree"),
    OPT(device_get_supported_event_types, "nvmlDeviceGetSupportedEventTypes"),
    OPT(system_get_cuda_driver_version_v2, "nvmlSystemGetCudaDriverVersion_v2"),
    OPT(system_get_cuda_driver_version, "nvmlSystemGetCudaDriverVersion"),
    OPT(device_get_mig_mode, "nvmlDeviceGetMigMode"),
    OPT(device_get_max_mig_device_count, "nvmlDeviceGetMaxMigDeviceCount"),
    OPT(device_get_mig_device_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex"),
    OPT(device_get_cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability"),
    OPT(device_get_p2p_status, "nvmlDeviceGetP2PStatus"),
    OPT(device_get_gpu_instance_id, "nvmlDeviceGetGpuInstanceId"),
    OPT(device_get_compute_instance_id, "nvmlDeviceGetComputeInstanceId"),
    OPT(device_get_gpu_instance_by_id, "nvmlDeviceGetGpuInstanceById"),
    OPT(gpu_instance_get_info, "nvmlGpuInstanceGetInfo"),
    OPT(device_get_compute_running_processes_v3, "nvmlDeviceGetComputeRunningProcesses_v3"),
    OPT(device_get_process_utilization, "nvmlDeviceGetProcessUtilization"),
    OPT(device_get_gpu_instance_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo"),
    OPT(device_create_gpu_instance_with_placement, "nvmlDeviceCreateGpuInstanceWithPlacement"),
    OPT(gpu_instance_create_compute_instance, "nvmlGpuInstanceCreateComputeInstance"),
    OPT(gpu_instance_destroy, "nvmlGpuInstanceDestroy"),
    OPT(compute_instance_destroy, "nvmlComputeInstanceDestroy"),
    OPT(gpu_instance_get_compute_instance_by_id, "nvmlGpuInstanceGetComputeInstanceById"),
#undef REQ
#undef OPT
};

/* ---- backend state ------------------------------------------------------------------- */

/** How long a GPU the event wait named lost stays lost for sample(), ms. */
#define WAIT_LOST_HOLD_MS 1000

/** One GPU. */
struct nvml_gpu {
    nvml_device dev;            /**< handle, valid until nvmlShutdown; NULL while never had */
    bool events;                /**< registered for XID/DBE events */
    bool lost;                  /**< answered GPU_IS_LOST (or nothing): looked for again */
    bool told_lost;             /**< the loss went out as a GS_GPU_EVENT_LOST */
    uint64_t resets;            /**< times found again after a loss */
    int64_t wait_lost_ms;       /**< clock when the event wait last named it lost; -1 never */
    uint64_t xid_count;         /**< XID events delivered */
    uint64_t last_xid;          /**< last XID code delivered; 0 none */
    uint64_t util_seen_us;      /**< newest process utilisation sample read (NVML's us) */
    char uuid[GS_GPU_UUID_LEN]; /**< UUID as first read; "" unknown */
};

struct nvml {
    void *lib;             /**< dlopen handle */
    struct nvml_api api;   /**< entry points */
    bool initialised;      /**< nvmlInit_v2 succeeded */
    struct gs_clock clock; /**< time source */
    uint32_t n;            /**< GPUs */
    struct nvml_gpu gpu[GS_GPU_MAX];
    nvml_event_set events; /**< NULL when event creation failed */
    uint32_t n_registered; /**< GPUs registered in events */
};

static const char *nvml_text(const struct nvml *m, nvml_ret rc)
{
    if (m->api.error_string != NULL) {
        const char *s = m->api.error_string(rc);
        if (s != NULL)
            return s;
    }
    return "NVML error";
}

static struct nvml *impl(struct gs_gpu_backend *b)
{
    return b->impl;
}

/* ---- operations ---------------------------------------------------------------------- */

static int nvml_system(struct gs_gpu_backend *b, struct gs_gpu_system *out)
{
    struct nvml *m = impl(b);
    memset(out, 0, sizeof *out);
    nvml_ret rc =
        m->api.system_get_driver_version(out->driver_version, (unsigned)sizeof out->driver_version);
    if (rc != NVML_OK)
        return gs__gpu_fail(b, GS_EIO, "nvmlSystemGetDriverVersion: %s (%d)", nvml_text(m, rc), rc);
    out->driver_version[sizeof out->driver_version - 1] = '\0';
    int v = 0;
    rc = NVML_ERR_FUNCTION_NOT_FOUND;
    if (m->api.system_get_cuda_driver_version_v2 != NULL)
        rc = m->api.system_get_cuda_driver_version_v2(&v);
    if (rc != NVML_OK && m->api.system_get_cuda_driver_version != NULL)
        rc = m->api.system_get_cuda_driver_version(&v);
    out->cuda_driver_version = rc == NVML_OK && v > 0 ? v : 0;
    return GS_OK;
}

static int nvml_count(struct gs_gpu_backend *b, uint32_t *n_out)
{
    *n_out = impl(b)->n;
    return GS_OK;
}

/* NUMA node from sysfs for a bus id "00000000:18:00.0" (kernel form "0000:18:00.0"). */
static int32_t sysfs_numa_node(const char *bus_id)
{
    unsigned dom, bus, dev, fn;
    char path[128];
    /* The PCI bus id comes from NVML, in the kernel's fixed hexadecimal form. */
    if (sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) /* NOLINT(cert-err34-c) */
        return -1;
    (void)snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", dom, bus,
                   dev, fn);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int node = -1;
    /* sysfs text written by the kernel; out-of-range values are refused. */
    if (fscanf(f, "%d", &node) != 1 || node < -1 || node > 4095) /* NOLINT(cert-err34-c) */
        node = -1;
    (void)fclose(f);
    return node;
}

/* The profile of a MIG device from its name: "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb". */
static void mig_profile_from_name(const char *name, char *out, size_t cap)
{
    const char *p = strstr(name, "MIG ");
    const char *last = NULL;
    while (p != NULL) { /* the last "MIG " wins, in case a model name holds one */
        last = p;
        p = strstr(p + 4, "MIG ");
    }
    gs__strlcpy(out, last != NULL ? last + 4 : "", cap);
}

/*
 * The first slice of a MIG device's GPU instance: its GPU instance id, that instance, and its
 * placement (nvmlGpuInstanceGetInfo). Drivers may refuse the instance to an unprivileged
 * caller (NO_PERMISSION); the start is then unknown, as with drivers before NVML 11.
 */
static void read_mig_start(struct nvml *m, nvml_device gpu, nvml_device mig, struct gs_gpu_mig *out)
{
    unsigned gi_id = 0;
    nvml_gpu_instance gi = NULL;
    struct nvml_gpu_instance_info info;
    memset(&info, 0, sizeof info);
    if (m->api.device_get_gpu_instance_id != NULL &&
        m->api.device_get_gpu_instance_id(mig, &gi_id) == NVML_OK) {
        out->has_gi_id = true;
        out->gi_id = gi_id;
    }
    unsigned ci_id = 0;
    if (out->has_gi_id && m->api.device_get_compute_instance_id != NULL &&
        m->api.device_get_compute_instance_id(mig, &ci_id) == NVML_OK) {
        out->has_ci_id = true;
        out->ci_id = ci_id;
    }
    if (!out->has_gi_id || m->api.device_get_gpu_instance_by_id == NULL ||
        m->api.gpu_instance_get_info == NULL ||
        m->api.device_get_gpu_instance_by_id(gpu, gi_id, &gi) != NVML_OK ||
        m->api.gpu_instance_get_info(gi, &info) != NVML_OK || info.placement.start > 7)
        return;
    out->has_start = true;
    out->start_slot = info.placement.start;
}

static void read_mig(struct nvml *m, nvml_device dev, struct gs_gpu_info *g)
{
    unsigned cur = 0, pending = 0;
    if (m->api.device_get_mig_mode == NULL ||
        m->api.device_get_mig_mode(dev, &cur, &pending) != NVML_OK)
        return; /* NOT_SUPPORTED: not MIG-capable */
    g->mig_capable = true;
    g->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
    unsigned max = 0;
    if (!g->mig_enabled || m->api.device_get_max_mig_device_count == NULL ||
        m->api.device_get_mig_device_handle_by_index == NULL ||
        m->api.device_get_max_mig_device_count(dev, &max) != NVML_OK)
        return;
    for (unsigned i = 0; i < max && g->mig_count < GS_GPU_MIG_MAX; i++) {
        nvml_device mig;
        if (m->api.device_get_mig_device_handle_by_index(dev, i, &mig) != NVML_OK)
            continue; /* NOT_FOUND: no MIG device at this index */
        struct gs_gpu_mig *out = &g->mig[g->mig_count];
        memset(out, 0, sizeof *out);
        if (m->api.device_get_uuid(mig, out->uuid, (unsigned)sizeof out->uuid) != NVML_OK)
            continue;
        out->uuid[sizeof out->uuid - 1] = '\0';
        char name[GS_GPU_NAME_LEN];
        if (m->api.device_get_name(mig, name, (unsigned)sizeof name) == NVML_OK) {
            name[sizeof name - 1] = '\0';
            mig_profile_from_name(name, out->profile, sizeof out->profile);
        }
        struct nvml_memory mem;
        if (m->api.device_get_memory_info(mig, &mem) == NVML_OK)
            out->mem_mib = mem.total >> 20;
        read_mig_start(m, dev, mig, out);
        g->mig_count++;
    }
}

static int nvml_info(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_info *g)
{
    struct nvml *m = impl(b);
    if (index >= m->n)
        return gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (NVML reports %" PRIu32 ")", index,
                            m->n);
    struct nvml_gpu *ng = &m->gpu[index];
    nvml_device dev = ng->dev;
    memset(g, 0, sizeof *g);
    g->index = index;
    g->numa_node = -1;
    g->cc_major = -1;
    g->cc_minor = -1;
    if (dev == NULL) {
        /* No handle at open: a lost GPU, with no facts but its index. */
        g->lost = true;
        return gs__gpu_fail(b, GS_OK, "GPU %" PRIu32 " is lost (no NVML handle)", index);
    }

    nvml_ret rc = m->api.device_get_uuid(dev, g->uuid, (unsigned)sizeof g->uuid);
    if (rc == NVML_ERR_GPU_IS_LOST) {
        g->uuid[0] = '\0';
        g->lost = ng->lost = true;
        return gs__gpu_fail(b, GS_OK, "GPU %" PRIu32 " is lost (nvmlDeviceGetUUID)", index);
    }
    if (rc != NVML_OK)
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 ": nvmlDeviceGetUUID: %s (%d)", index,
                            nvml_text(m, rc), rc);
    g->uuid[sizeof g->uuid - 1] = '\0';
    gs__strlcpy(ng->uuid, g->uuid, sizeof ng->uuid);
    rc = m->api.device_get_name(dev, g->model, (unsigned)sizeof g->model);
    if (rc == NVML_ERR_GPU_IS_LOST) {
        g->model[0] = '\0';
        g->lost = ng->lost = true;
        return gs__gpu_fail(b, GS_OK, "GPU %" PRIu32 " is lost (nvmlDeviceGetName)", index);
    }
    if (rc != NVML_OK)
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 ": nvmlDeviceGetName: %s (%d)", index,
                            nvml_text(m, rc), rc);
    g->model[sizeof g->model - 1] = '\0';
    struct nvml_memory mem;
    rc = m->api.device_get_memory_info(dev, &mem);
    if (rc == NVML_ERR_GPU_IS_LOST) {
        g->lost = ng->lost = true;
        return gs__gpu_fail(b, GS_OK, "GPU %" PRIu32 " is lost (nvmlDeviceGetMemoryInfo)", index);
    }
    if (rc != NVML_OK)
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 ": nvmlDeviceGetMemoryInfo: %s (%d)", index,
                            nvml_text(m, rc), rc);
    g->mem_total_mib = mem.total >> 20;

    struct nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    if (m->api.device_get_pci_info_v3(dev, &pci) == NVML_OK) {
        pci.bus_id[sizeof pci.bus_id - 1] = '\0';
        gs__strlcpy(g->pci_bus_id, pci.bus_id, sizeof g->pci_bus_id);
    }
    /* The NUMA node kubelet's Topology Manager wants is the CPU side of the GPU's PCI device,
     * which sysfs gives. nvmlDeviceGetNumaNodeId answers another question (the node of the
     * GPU's own memory, on platforms such as Grace Hopper where it is one), so it is not used. */
    if (g->pci_bus_id[0] != '\0')
        g->numa_node = sysfs_numa_node(g->pci_bus_id);
    int maj, min;
    if (m->api.device_get_cuda_compute_capability != NULL &&
        m->api.device_get_cuda_compute_capability(dev, &maj, &min) == NVML_OK && maj >= 0 &&
        min >= 0) {
        g->cc_major = maj;
        g->cc_minor = min;
    }
    if (m->api.device_get_p2p_status != NULL) {
        for (uint32_t j = 0; j < m->n; j++) {
            int status;
            if (j != index && m->gpu[j].dev != NULL &&
                m->api.device_get_p2p_status(dev, m->gpu[j].dev, NVML_P2P_CAPS_INDEX_NVLINK,
                                             &status) == NVML_OK &&
                status == NVML_P2P_STATUS_OK)
                g->nvlink_peers[g->nvlink_peer_count++] = j;
        }
    }
    read_mig(m, dev, g);
    return GS_OK;
}

/*
 * One query of a sample. NOT_SUPPORTED (and NO_PERMISSION) leave the field out; GPU_IS_LOST
 * makes the whole sample fail; other errors leave the field out and are counted.
 */
static bool sample_ok(nvml_ret rc, bool *lost, int *failed)
{
    if (rc == NVML_OK)
        return true;
    if (rc == NVML_ERR_GPU_IS_LOST)
        *lost = true;
    else if (rc != NVML_ERR_NOT_SUPPORTED && rc != NVML_ERR_NO_PERMISSION)
        (*failed)++;
    return false;
}

static void register_gpu(struct nvml *m, uint32_t i);

/*
 * Looks for a lost GPU again: a fresh handle by index that answers with the UUID first read
 * (another GPU may have taken the index after a hot-unplug). @return true when found.
 */
static bool reacquire(struct nvml *m, uint32_t index)
{
    struct nvml_gpu *ng = &m->gpu[index];
    nvml_device dev = NULL;
    char uuid[GS_GPU_UUID_LEN];
    if (m->api.device_get_handle_by_index_v2(index, &dev) != NVML_OK || dev == NULL ||
        m->api.device_get_uuid(dev, uuid, (unsigned)sizeof uuid) != NVML_OK)
        return false;
    uuid[sizeof uuid - 1] = '\0';
    if (ng->uuid[0] != '\0' && strcmp(ng->uuid, uuid) != 0)
        return false;
    ng->dev = dev;
    return true;
}

static int nvml_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_sample *out)
{
    struct nvml *m = impl(b);
    if (index >= m->n)
        return gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (NVML reports %" PRIu32 ")", index,
                            m->n);
    struct nvml_gpu *ng = &m->gpu[index];
    bool was_lost = ng->lost || ng->dev == NULL;
    /* The event wait named it lost within the last WAIT_LOST_HOLD_MS (the agent polls it every
     * 100 ms): lost, whatever its queries answer. */
    int64_t now = m->clock.now_ms(m->clock.ctx);
    if (ng->wait_lost_ms >= 0 && now - ng->wait_lost_ms < WAIT_LOST_HOLD_MS) {
        ng->lost = true;
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost (the NVML event wait says so)",
                            index);
    }
    if (was_lost && !reacquire(m, index)) {
        ng->lost = true;
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost (NVML: GPU is lost)", index);
    }
    nvml_device dev = ng->dev;
    bool lost = false;
    int failed = 0;
    memset(out, 0, sizeof *out);

    struct nvml_utilization u;
    if (sample_ok(m->api.device_get_utilization_rates(dev, &u), &lost, &failed)) {
        out->util_pct = u.gpu > 100 ? 100 : u.gpu;
        out->valid |= GS_GPU_HAVE_UTIL;
    }
    struct nvml_memory mem;
    if (!lost && sample_ok(m->api.device_get_memory_info(dev, &mem), &lost, &failed)) {
        out->fb_used_mib = mem.used >> 20;
        out->fb_free_mib = mem.free >> 20;
        out->valid |= GS_GPU_HAVE_FB;
    }
    unsigned v;
    if (!lost &&
        sample_ok(m->api.device_get_temperature(dev, NVML_TEMPERATURE_GPU, &v), &lost, &failed)) {
        out->temp_c = v > INT32_MAX ? INT32_MAX : (int32_t)v;
        out->valid |= GS_GPU_HAVE_TEMP;
    }
    if (!lost && sample_ok(m->api.device_get_power_usage(dev, &v), &lost, &failed)) {
        out->power_mw = v;
        out->valid |= GS_GPU_HAVE_POWER;
    }
    if (!lost && sample_ok(m->api.device_get_clock_info(dev, NVML_CLOCK_SM, &v), &lost, &failed)) {
        out->sm_clock_mhz = v;
        out->valid |= GS_GPU_HAVE_SM_CLOCK;
    }
    if (!lost && sample_ok(m->api.device_get_clock_info(dev, NVML_CLOCK_MEM, &v), &lost, &failed)) {
        out->mem_clock_mhz = v;
        out->valid |= GS_GPU_HAVE_MEM_CLOCK;
    }
    unsigned long long ecc;
    if (!lost && sample_ok(m->api.device_get_total_ecc_errors(
                               dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc),
                           &lost, &failed)) {
        out->ecc_dbe_vol_total = ecc;
        out->valid |= GS_GPU_HAVE_ECC_DBE;
    }
    if (lost) {
        ng->lost = true;
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost (NVML: GPU is lost)", index);
    }
    if (out->valid == 0 && failed > 0) {
        ng->lost = true; /* so that answering again counts as found again */
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " answers no query", index);
    }
    if (was_lost) {
        ng->lost = false;
        ng->told_lost = false;
        ng->resets++;
        if (!ng->events)
            register_gpu(m, index);
    }
    out->resets = ng->resets;
    if (m->gpu[index].events) {
        out->xid_count = m->gpu[index].xid_count;
        out->last_xid = m->gpu[index].last_xid;
        out->valid |= GS_GPU_HAVE_XID;
    }
    return GS_OK;
}

/*
 * The event wait answered GPU_IS_LOST. NVIDIA's device plugin then marks every GPU Unhealthy
 * (k8s-device-plugin #231, #2038); here the loss is pinned on the GPU the answer names, or,
 * when it names none, on each GPU whose own query answers GPU_IS_LOST. Each loss is told once,
 * so a wait that keeps answering GPU_IS_LOST costs a few queries per call, not an event flood.
 */
static int lost_event(struct nvml *m, nvml_device named, struct gs_gpu_event *out)
{
    int64_t now = m->clock.now_ms(m->clock.ctx);
    for (uint32_t i = 0; i < m->n; i++) {
        struct nvml_gpu *ng = &m->gpu[i];
        if (named != NULL && ng->dev == named)
            ng->wait_lost_ms = now; /* still named: sample() keeps it lost */
        if (ng->told_lost)
            continue;
        bool lost = named != NULL ? ng->dev == named : ng->lost || ng->dev == NULL;
        if (!lost && named == NULL) {
            unsigned t;
            lost = m->api.device_get_temperature(ng->dev, NVML_TEMPERATURE_GPU, &t) ==
                   NVML_ERR_GPU_IS_LOST;
        }
        if (!lost)
            continue;
        ng->lost = ng->told_lost = true;
        memset(out, 0, sizeof *out);
        out->gpu_index = i;
        out->kind = GS_GPU_EVENT_LOST;
        out->t_ms = now;
        return GS_OK;
    }
    return GS_ENOENT;
}

static int nvml_wait_event(struct gs_gpu_backend *b, int64_t timeout_ms, struct gs_gpu_event *out)
{
    struct nvml *m = impl(b);
    int64_t start = m->clock.now_ms(m->clock.ctx);
    int64_t deadline = timeout_ms > INT64_MAX - start ? INT64_MAX : start + timeout_ms;
    if (m->events == NULL || m->n_registered == 0) {
        /* Nothing can arrive: wait out the timeout so a caller's loop does not spin. */
        m->clock.sleep_ms(m->clock.ctx, timeout_ms);
        return GS_ENOENT;
    }
    for (;;) {
        int64_t left = deadline - m->clock.now_ms(m->clock.ctx);
        if (left < 0)
            left = 0;
        struct nvml_event_data d;
        memset(&d, 0, sizeof d);
        nvml_ret rc =
            m->api.event_set_wait_v2(m->events, &d, left > UINT_MAX ? UINT_MAX : (unsigned)left);
        if (rc == NVML_ERR_TIMEOUT)
            return GS_ENOENT;
        if (rc == NVML_ERR_GPU_IS_LOST)
            return lost_event(m, d.device, out);
        if (rc != NVML_OK)
            return gs__gpu_fail(b, GS_EIO, "nvmlEventSetWait_v2: %s (%d)", nvml_text(m, rc), rc);
        uint32_t idx = GS_GPU_INDEX_ALL;
        for (uint32_t i = 0; i < m->n; i++)
            if (m->gpu[i].dev == d.device)
                idx = i;
        out->gpu_index = idx;
        out->t_ms = m->clock.now_ms(m->clock.ctx);
        if (d.event_type & NVML_EVENT_XID_CRITICAL) {
            out->kind = GS_GPU_EVENT_XID;
            out->xid = d.event_data;
            for (uint32_t i = 0; i < m->n; i++) {
                if (idx == i || idx == GS_GPU_INDEX_ALL) {
                    m->gpu[i].xid_count++;
                    m->gpu[i].last_xid = d.event_data;
                }
            }
            return GS_OK;
        }
        if (d.event_type & NVML_EVENT_DOUBLE_BIT_ECC) {
            out->kind = GS_GPU_EVENT_ECC_DBE;
            out->xid = 0;
            return GS_OK;
        }
        if (left == 0)
            return GS_ENOENT; /* an event of another type at the very end: nothing to report */
    }
}

/** Most entries asked of NVML's process and sample lists (a bound on one allocation). */
#define NVML_LIST_MAX 4096u

/*
 * Fills each process's SM utilisation from the samples newer than the last read, the newest
 * sample per pid winning. A process without a sample was idle all along: 0 %. Leaves
 * has_sm_util false when the driver cannot sample processes at all.
 */
static void read_process_util(struct nvml *m, struct nvml_gpu *ng, struct gs_gpu_proc *out,
                              uint32_t n)
{
    if (m->api.device_get_process_utilization == NULL)
        return;
    unsigned int count = 0;
    nvml_ret rc = m->api.device_get_process_utilization(ng->dev, NULL, &count, ng->util_seen_us);
    struct nvml_process_utilization_sample *smp = NULL;
    if (rc == NVML_ERR_INSUFFICIENT_SIZE && count > 0) {
        if (count > NVML_LIST_MAX)
            count = NVML_LIST_MAX;
        smp = calloc(count, sizeof *smp);
        if (smp == NULL)
            return;
        rc = m->api.device_get_process_utilization(ng->dev, smp, &count, ng->util_seen_us);
        if (count > NVML_LIST_MAX)
            count = NVML_LIST_MAX;
    } else if (rc == NVML_OK || rc == NVML_ERR_NOT_FOUND) {
        count = 0; /* no sample since the last read: every process idle */
        rc = NVML_OK;
    }
    if (rc == NVML_OK) {
        unsigned long long newest_us[GS_GPU_PROC_MAX] = {0};
        for (uint32_t i = 0; i < n; i++) {
            out[i].has_sm_util = true;
            out[i].sm_util_pct = 0;
        }
        for (unsigned int k = 0; k < count; k++) {
            if (smp[k].time_stamp > ng->util_seen_us)
                ng->util_seen_us = smp[k].time_stamp;
            for (uint32_t i = 0; i < n; i++) {
                if (out[i].pid != smp[k].pid || smp[k].time_stamp < newest_us[i])
                    continue;
                newest_us[i] = smp[k].time_stamp;
                out[i].sm_util_pct = smp[k].sm_util > 100 ? 100 : smp[k].sm_util;
            }
        }
    }
    free(smp);
}

/*
 * Each MIG device's own values: its memory used, from the MIG device handle. Utilisation per
 * GPU instance exists only through GPM (nvmlGpmMigSampleGet, Hopper and later), which this
 * backend does not load: no MIG device gets a utilisation value, and so no MIG pod a
 * utilisation series (docs/agent.md), rather than the whole GPU's (dcgm-exporter #587).
 */
static int nvml_mig_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_mig_sample *out,
                           uint32_t cap, uint32_t *n_out)
{
    struct nvml *m = impl(b);
    if (index >= m->n)
        return gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (NVML reports %" PRIu32 ")", index,
                            m->n);
    struct nvml_gpu *ng = &m->gpu[index];
    if (ng->lost || ng->dev == NULL)
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost", index);
    *n_out = 0;
    unsigned cur = 0, pending = 0, max = 0;
    if (m->api.device_get_mig_mode == NULL || m->api.device_get_max_mig_device_count == NULL ||
        m->api.device_get_mig_device_handle_by_index == NULL ||
        m->api.device_get_gpu_instance_id == NULL ||
        m->api.device_get_mig_mode(ng->dev, &cur, &pending) != NVML_OK ||
        cur != NVML_DEVICE_MIG_ENABLE ||
        m->api.device_get_max_mig_device_count(ng->dev, &max) != NVML_OK)
        return GS_OK; /* not in MIG mode, or no way to tell its instances apart */
    uint32_t n = 0;
    for (unsigned i = 0; i < max && n < cap; i++) {
        nvml_device mig;
        unsigned gi_id = 0;
        if (m->api.device_get_mig_device_handle_by_index(ng->dev, i, &mig) != NVML_OK ||
            m->api.device_get_gpu_instance_id(mig, &gi_id) != NVML_OK)
            continue;
        struct gs_gpu_mig_sample *o = &out[n++];
        memset(o, 0, sizeof *o);
        o->gi_id = gi_id;
        struct nvml_memory mem;
        if (m->api.device_get_memory_info(mig, &mem) == NVML_OK) {
            o->fb_used_mib = mem.used >> 20;
            o->valid |= GS_GPU_HAVE_FB;
        }
    }
    *n_out = n;
    return GS_OK;
}

static int nvml_processes(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_proc *out,
                          uint32_t cap, uint32_t *n_out)
{
    struct nvml *m = impl(b);
    if (index >= m->n)
        return gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (NVML reports %" PRIu32 ")", index,
                            m->n);
    if (m->api.device_get_compute_running_processes_v3 == NULL)
        return gs__gpu_fail(b, GS_ENOENT,
                            "this NVML has no nvmlDeviceGetComputeRunningProcesses_v3");
    struct nvml_gpu *ng = &m->gpu[index];
    if (ng->lost || ng->dev == NULL)
        return gs__gpu_fail(b, GS_EIO, "GPU %" PRIu32 " is lost", index);
    struct nvml_process_info *info = NULL;
    unsigned int count = GS_GPU_PROC_MAX;
    int err = GS_OK;
    nvml_ret rc = NVML_ERR_INSUFFICIENT_SIZE;
    /* Asked for GS_GPU_PROC_MAX first; a longer list is read whole (bounded) and cut. */
    for (int tries = 0; tries < 3 && rc == NVML_ERR_INSUFFICIENT_SIZE; tries++) {
        if (count == 0 || count > NVML_LIST_MAX)
            count = NVML_LIST_MAX;
        free(info);
        info = calloc(count, sizeof *info);
        if (info == NULL) {
            err = gs__gpu_fail(b, GS_ENOMEM, "out of memory");
            goto out;
        }
        unsigned int asked = count;
        rc = m->api.device_get_compute_running_processes_v3(ng->dev, &count, info);
        if (rc == NVML_OK && count > asked)
            count = asked;
    }
    if (rc == NVML_ERR_NOT_SUPPORTED || rc == NVML_ERR_FUNCTION_NOT_FOUND) {
        err = gs__gpu_fail(b, GS_ENOENT, "GPU %" PRIu32 " cannot list processes: %s", index,
                           nvml_text(m, rc));
        goto out;
    }
    if (rc != NVML_OK) {
        err =
            gs__gpu_fail(b, GS_EIO, "nvmlDeviceGetComputeRunningProcesses_v3 (GPU %" PRIu32 "): %s",
                         index, nvml_text(m, rc));
        goto out;
    }
    uint32_t n = count < cap ? count : cap;
    if (n > GS_GPU_PROC_MAX)
        n = GS_GPU_PROC_MAX;
    for (uint32_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].pid = info[i].pid;
        if (info[i].used_gpu_memory != NVML_VALUE_NOT_AVAILABLE_ULL) {
            out[i].mem_mib = info[i].used_gpu_memory >> 20;
            out[i].has_mem = true;
        }
        if (info[i].gpu_instance_id != NVML_VALUE_NOT_AVAILABLE_UINT) {
            out[i].gi_id = info[i].gpu_instance_id;
            out[i].has_gi_id = true;
        }
    }
    read_process_util(m, ng, out, n);
    *n_out = n;
out:
    free(info);
    return err;
}

static void nvml_close(struct gs_gpu_backend *b)
{
    struct nvml *m = impl(b);
    if (m != NULL) {
        if (m->events != NULL)
            (void)m->api.event_set_free(m->events);
        if (m->initialised)
            (void)m->api.shutdown();
        if (m->lib != NULL)
            (void)dlclose(m->lib);
        free(m);
    }
    free(b);
}

/* ---- MIG re-partition (dynamic MIG; never run against a GPU in this project's tests) ---- */

/* The GPU's handle for a change of its MIG layout, or why not. */
static int mig_target(struct gs_gpu_backend *b, uint32_t index, nvml_device *dev)
{
    struct nvml *m = impl(b);
    if (index >= m->n)
        return gs__gpu_fail(b, GS_ERANGE, "no GPU %" PRIu32 " (NVML reports %" PRIu32 ")", index,
                            m->n);
    static const struct {
        size_t offset;
        const char *name;
    } need[] = {
        {offsetof(struct nvml_api, device_get_mig_mode), "nvmlDeviceGetMigMode"},
        {offsetof(struct nvml_api, device_get_max_mig_device_count),
         "nvmlDeviceGetMaxMigDeviceCount"},
        {offsetof(struct nvml_api, device_get_mig_device_handle_by_index),
         "nvmlDeviceGetMigDeviceHandleByIndex"},
        {offsetof(struct nvml_api, device_get_gpu_instance_id), "nvmlDeviceGetGpuInstanceId"},
        {offsetof(struct nvml_api, device_get_gpu_instance_by_id), "nvmlDeviceGetGpuInstanceById"},
        {offsetof(struct nvml_api, gpu_instance_get_info), "nvmlGpuInstanceGetInfo"},
        {offsetof(struct nvml_api, device_get_gpu_instance_profile_info),
         "nvmlDeviceGetGpuInstanceProfileInfo"},
        {offsetof(struct nvml_api, device_create_gpu_instance_with_placement),
         "nvmlDeviceCreateGpuInstanceWithPlacement"},
        {offsetof(struct nvml_api, gpu_instance_create_compute_instance),
         "nvmlGpuInstanceCreateComputeInstance"},
        {offsetof(struct nvml_api, gpu_instance_destroy), "nvmlGpuInstanceDestroy"},
        {offsetof(struct nvml_api, compute_instance_destroy), "nvmlComputeInstanceDestroy"},
        {offsetof(struct nvml_api, device_get_compute_instance_id),
         "nvmlDeviceGetComputeInstanceId"},
        {offsetof(struct nvml_api, gpu_instance_get_compute_instance_by_id),
         "nvmlGpuInstanceGetComputeInstanceById"},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        void *sym;
        memcpy(&sym, (const char *)&m->api + need[i].offset, sizeof sym);
        if (sym == NULL)
            return gs__gpu_fail(b, GS_ENOENT,
                                "this NVML has no %s: it cannot change MIG layouts (driver too "
                                "old?)",
                                need[i].name);
    }
    *dev = m->gpu[index].dev;
    unsigned cur = 0, pending = 0;
    if (*dev == NULL || m->api.device_get_mig_mode(*dev, &cur, &pending) != NVML_OK ||
        cur != NVML_DEVICE_MIG_ENABLE)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 " is not in MIG mode", index);
    return GS_OK;
}

static int nvml_mig_destroy(struct gs_gpu_backend *b, uint32_t index, uint32_t start)
{
    struct nvml *m = impl(b);
    nvml_device dev = NULL;
    int rc = mig_target(b, index, &dev);
    if (rc != GS_OK)
        return rc;
    unsigned max = 0;
    if (m->api.device_get_max_mig_device_count(dev, &max) != NVML_OK)
        max = 0;
    for (unsigned i = 0; i < max; i++) {
        nvml_device mig;
        unsigned gi_id = 0, ci_id = 0;
        nvml_gpu_instance gi = NULL;
        struct nvml_gpu_instance_info info;
        memset(&info, 0, sizeof info);
        if (m->api.device_get_mig_device_handle_by_index(dev, i, &mig) != NVML_OK ||
            m->api.device_get_gpu_instance_id(mig, &gi_id) != NVML_OK ||
            m->api.device_get_gpu_instance_by_id(dev, gi_id, &gi) != NVML_OK ||
            m->api.gpu_instance_get_info(gi, &info) != NVML_OK || info.placement.start != start)
            continue;
        nvml_compute_instance ci = NULL;
        nvml_ret r = NVML_OK;
        if (m->api.device_get_compute_instance_id(mig, &ci_id) == NVML_OK &&
            m->api.gpu_instance_get_compute_instance_by_id(gi, ci_id, &ci) == NVML_OK)
            r = m->api.compute_instance_destroy(ci);
        if (r != NVML_OK)
            return gs__gpu_fail(
                b, GS_EIO, "nvmlComputeInstanceDestroy (GPU %" PRIu32 ", slice %" PRIu32 "): %s",
                index, start, nvml_text(m, r));
        r = m->api.gpu_instance_destroy(gi);
        if (r != NVML_OK)
            return gs__gpu_fail(b, GS_EIO,
                                "nvmlGpuInstanceDestroy (GPU %" PRIu32 ", slice %" PRIu32 "): %s",
                                index, start, nvml_text(m, r));
        return GS_OK;
    }
    return gs__gpu_fail(b, GS_ENOENT, "no GPU instance starts at slice %" PRIu32 " of GPU %" PRIu32,
                        start, index);
}

static int nvml_mig_create(struct gs_gpu_backend *b, uint32_t index, const char *profile,
                           uint32_t start)
{
    struct nvml *m = impl(b);
    nvml_device dev = NULL;
    int rc = mig_target(b, index, &dev);
    if (rc != GS_OK)
        return rc;
    /* The profile's slices from its name ("3g.40gb": 3), "+me" the media-extension one and a
     * 1g of twice the memory ("1g.20gb" beside "1g.10gb") the REV2 one, checked against what
     * NVML says of that profile id. */
    char *end = NULL;
    unsigned long c = strtoul(profile, &end, 10);
    if (end == profile || *end != 'g' || c == 0 || c > 7)
        return gs__gpu_fail(b, GS_EINVAL, "MIG profile %s: no slice count", profile);
    unsigned gi_prof = c == 1   ? NVML_GI_PROFILE_1_SLICE
                       : c == 2 ? NVML_GI_PROFILE_2_SLICE
                       : c == 3 ? NVML_GI_PROFILE_3_SLICE
                       : c == 4 ? NVML_GI_PROFILE_4_SLICE
                                : NVML_GI_PROFILE_7_SLICE;
    if (c == 1 && strstr(profile, "+me") != NULL)
        gi_prof = NVML_GI_PROFILE_1_SLICE_REV1;
    struct nvml_gpu_instance_profile_info pi;
    memset(&pi, 0, sizeof pi);
    nvml_ret r = m->api.device_get_gpu_instance_profile_info(dev, gi_prof, &pi);
    if (c == 1 && gi_prof == NVML_GI_PROFILE_1_SLICE && r == NVML_OK) {
        /* A 1g whose memory is twice the plain 1g's is REV2. */
        const char *dot = strchr(profile, '.');
        unsigned long long want = dot != NULL ? strtoull(dot + 1, &end, 10) : 0;
        if (want > 0 && strncmp(end, "gb", 2) == 0 && want * 1024 > pi.memory_size_mb * 3 / 2) {
            gi_prof = NVML_GI_PROFILE_1_SLICE_REV2;
            r = m->api.device_get_gpu_instance_profile_info(dev, gi_prof, &pi);
        }
    }
    if (r != NVML_OK || pi.slice_count != c)
        return gs__gpu_fail(b, GS_EINVAL, "GPU %" PRIu32 " has no MIG profile %s (%s)", index,
                            profile, r != NVML_OK ? nvml_text(m, r) : "slice count differs");
    struct nvml_gpu_instance_placement pl = {start, 0};
    nvml_gpu_instance gi = NULL;
    r = m->api.device_create_gpu_instance_with_placement(dev, pi.id, &pl, &gi);
    if (r != NVML_OK)
        return gs__gpu_fail(b, GS_EIO,
                            "nvmlDeviceCreateGpuInstanceWithPlacement (GPU %" PRIu32
                            ", %s at slice %" PRIu32 "): %s",
                            index, profile, start, nvml_text(m, r));
    unsigned ci_prof = c == 1 ? 0 : c == 2 ? 1 : c == 3 ? 2 : c == 4 ? 3 : 4;
    nvml_compute_instance ci = NULL;
    r = m->api.gpu_instance_create_compute_instance(gi, ci_prof, &ci);
    if (r != NVML_OK) {
        (void)m->api.gpu_instance_destroy(gi);
        return gs__gpu_fail(b, GS_EIO,
                            "nvmlGpuInstanceCreateComputeInstance (GPU %" PRIu32
                            ", %s at slice %" PRIu32 "): %s",
                            index, profile, start, nvml_text(m, r));
    }
    return GS_OK;
}

static const struct gs_gpu_ops nvml_ops = {
    .name = "nvml",
    .system = nvml_system,
    .count = nvml_count,
    .info = nvml_info,
    .sample = nvml_sample,
    .processes = nvml_processes,
    .mig_sample = nvml_mig_sample,
    .wait_event = nvml_wait_event,
    .mig_destroy = nvml_mig_destroy,
    .mig_create = nvml_mig_create,
    .close = nvml_close,
};

/* Registers GPU i for XID and double-bit ECC events where it supports them. */
static void register_gpu(struct nvml *m, uint32_t i)
{
    if (m->events == NULL || m->gpu[i].dev == NULL || m->gpu[i].events)
        return;
    unsigned long long want = NVML_EVENT_XID_CRITICAL | NVML_EVENT_DOUBLE_BIT_ECC;
    unsigned long long supported = want;
    if (m->api.device_get_supported_event_types != NULL &&
        m->api.device_get_supported_event_types(m->gpu[i].dev, &supported) != NVML_OK)
        supported = 0;
    want &= supported;
    if (want != 0 && m->api.device_register_events(m->gpu[i].dev, want, m->events) == NVML_OK) {
        m->gpu[i].events = true;
        m->n_registered++;
    }
}

/* Registers every GPU that supports them for XID and double-bit ECC events. */
static void register_events(struct nvml *m)
{
    if (m->api.event_set_create(&m->events) != NVML_OK) {
        m->events = NULL;
        return;
    }
    for (uint32_t i = 0; i < m->n; i++)
        register_gpu(m, i);
}

int gs_gpu_open_nvml(const struct gs_clock *clock, struct gs_gpu_backend **out, char *errbuf,
                     size_t cap)
{
    int err = GS_OK;
    char why[256] = "";
    struct nvml *m = NULL;
    struct gs_gpu_backend *b = NULL;

    if (out != NULL)
        *out = NULL;
    if (out == NULL || clock == NULL || clock->now_ms == NULL || clock->sleep_ms == NULL) {
        err = GS_EINVAL;
        (void)snprintf(why, sizeof why, "invalid argument");
        goto out;
    }
    m = calloc(1, sizeof *m);
    b = calloc(1, sizeof *b);
    if (m == NULL || b == NULL) {
        err = GS_ENOMEM;
        (void)snprintf(why, sizeof why, "out of memory");
        goto out;
    }
    m->clock = *clock;
    const char *lib = getenv("GS_NVML_LIBRARY");
    if (lib == NULL || lib[0] == '\0')
        lib = "libnvidia-ml.so.1";
    m->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (m->lib == NULL) {
        const char *e = dlerror();
        err = GS_ENOENT;
        (void)snprintf(why, sizeof why,
                       "cannot load %s (is the NVIDIA driver installed and visible in this "
                       "container?): %s",
                       lib, e != NULL ? e : "unknown error");
        goto out;
    }
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        void *sym = dlsym(m->lib, symbols[i].name);
        if (sym == NULL && symbols[i].required) {
            err = GS_ENOENT;
            (void)snprintf(why, sizeof why, "%s lacks %s (driver too old?)", lib, symbols[i].name);
            goto out;
        }
        /* POSIX guarantees object and function pointers convert; copy the bits. */
        memcpy((char *)&m->api + symbols[i].offset, &sym, sizeof sym);
    }
    nvml_ret rc = m->api.init_v2();
    if (rc != NVML_OK) {
        err = GS_EIO;
        (void)snprintf(why, sizeof why, "nvmlInit_v2: %s (%d)", nvml_text(m, rc), rc);
        goto out;
    }
    m->initialised = true;
    unsigned n = 0;
    rc = m->api.device_get_count_v2(&n);
    if (rc != NVML_OK) {
        err = GS_EIO;
        (void)snprintf(why, sizeof why, "nvmlDeviceGetCount_v2: %s (%d)", nvml_text(m, rc), rc);
        goto out;
    }
    m->n = n > GS_GPU_MAX ? GS_GPU_MAX : n;
    for (uint32_t i = 0; i < m->n; i++) {
        m->gpu[i].wait_lost_ms = -1;
        /* One GPU without a handle (GPU_IS_LOST, or any other answer) is a lost GPU, not a
         * backend that cannot open: the others still serve (k8s-device-plugin #231). */
        rc = m->api.device_get_handle_by_index_v2(i, &m->gpu[i].dev);
        if (rc != NVML_OK) {
            m->gpu[i].dev = NULL;
            m->gpu[i].lost = true;
        }
    }
    register_events(m);
    b->ops = &nvml_ops;
    b->impl = m;
    *out = b;
    m = NULL;
    b = NULL;
out:
    if (m != NULL) {
        if (m->initialised)
            (void)m->api.shutdown();
        if (m->lib != NULL)
            (void)dlclose(m->lib);
        free(m);
    }
    free(b);
    if (err != GS_OK && errbuf != NULL && cap > 0)
        gs__strlcpy(errbuf, why, cap);
    return err;
}
