/*
 * A stand-in for libnvidia-ml.so.1, loaded by the NVML backend through GS_NVML_LIBRARY, so
 * that the backend's code paths (symbol table, versioned entry points, MIG enumeration and
 * profile names, NVLink peers via P2P status, NUMA node from sysfs, event delivery, a lost
 * GPU) run in the normal test run on machines without a GPU. It follows the ABI as the
 * backend declares it, so it checks the backend's logic, not its agreement with NVIDIA's
 * headers; that is what tests/device/run.sh does on a real GPU.
 *
 * The node: two "NVIDIA H200" GPUs joined by NVLink. GPU 0 is MIG-capable with MIG off and
 * answers every query. GPU 1 runs MIG with two devices (1g.18gb at index 0, 3g.71gb at
 * index 3; their GPU instances 9 and 2 start at slices 0 and 4) and reports no utilisation (as NVML
 * does under MIG). Their PCI bus ids are in domains no real machine uses, so sysfs has no NUMA node
 * for them (-1). The event set delivers XID 79 on GPU 1, then a double-bit ECC error on GPU 0, then
 * times out. With STUB_NVML_LOST=1 in the environment GPU 1's utilisation, temperature, power,
 * clock and ECC queries return "GPU is lost" (its identity and memory still answer); with
 * STUB_NVML_INIT_FAIL=1 nvmlInit_v2 fails with "driver not loaded".
 *
 * Processes: GPU 0 runs pids 4101 (3000 MiB) and 4102 (2500 MiB); its utilisation samples
 * are 4101 at 20 % (t 100 us) then 30 % (t 200 us) and 4102 at 25 % (t 150 us), so a first
 * read sees 30 % and 25 % and a later one, asking past t 200, none (both idle, 0 %). GPU 1
 * (MIG) runs pid 5001 in GPU instance 9 with memory "not available" and cannot sample
 * process utilisation. Both lists are first asked with a count of 1, so the backend's retry
 * on INSUFFICIENT_SIZE runs.
 */
#include <stdlib.h>
#include <string.h>

/* The backend's declarations (src/agent/nvml_abi.h); the opaque handles are defined here. */
#include "nvml_abi.h"

struct nvml_device_opaque {
    int gpu; /* 0 or 1 */
    int mig; /* -1 for the GPU itself, else the MIG device's slot */
};
struct nvml_event_set_opaque {
    int delivered;
};
struct nvml_gpu_instance_st {
    unsigned int id, start, size;
};

#define MIB (1024ULL * 1024ULL)

static struct nvml_device_opaque devs[2] = {{0, -1}, {1, -1}};
static struct nvml_device_opaque migs[2] = {{1, 0}, {1, 1}};
static struct nvml_event_set_opaque the_set;
static struct nvml_gpu_instance_st gis[2] = {{9, 0, 1}, {2, 4, 4}};

/* The declarations the compiler wants for exported functions (-Wmissing-prototypes). */
nvml_ret nvmlInit_v2(void);
nvml_ret nvmlShutdown(void);
const char *nvmlErrorString(nvml_ret rc);
nvml_ret nvmlDeviceGetCount_v2(unsigned int *n);
nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device *d);
nvml_ret nvmlDeviceGetName(nvml_device d, char *buf, unsigned int len);
nvml_ret nvmlDeviceGetUUID(nvml_device d, char *buf, unsigned int len);
nvml_ret nvmlDeviceGetMemoryInfo(nvml_device d, struct nvml_memory *m);
nvml_ret nvmlDeviceGetUtilizationRates(nvml_device d, struct nvml_utilization *u);
nvml_ret nvmlDeviceGetTemperature(nvml_device d, int sensor, unsigned int *t);
nvml_ret nvmlDeviceGetPowerUsage(nvml_device d, unsigned int *mw);
nvml_ret nvmlDeviceGetClockInfo(nvml_device d, int type, unsigned int *mhz);
nvml_ret nvmlDeviceGetPciInfo_v3(nvml_device d, struct nvml_pci_info *p);
nvml_ret nvmlDeviceGetTotalEccErrors(nvml_device d, int type, int counter, unsigned long long *n);
nvml_ret nvmlSystemGetDriverVersion(char *buf, unsigned int len);
nvml_ret nvmlSystemGetCudaDriverVersion_v2(int *v);
nvml_ret nvmlEventSetCreate(nvml_event_set *s);
nvml_ret nvmlDeviceRegisterEvents(nvml_device d, unsigned long long types, nvml_event_set s);
nvml_ret nvmlDeviceGetSupportedEventTypes(nvml_device d, unsigned long long *types);
nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms);
nvml_ret nvmlEventSetFree(nvml_event_set s);
nvml_ret nvmlDeviceGetMigMode(nvml_device d, unsigned int *cur, unsigned int *pending);
nvml_ret nvmlDeviceGetGpuInstanceId(nvml_device d, unsigned int *id);
nvml_ret nvmlDeviceGetComputeInstanceId(nvml_device d, unsigned int *id);
nvml_ret nvmlDeviceGetGpuInstanceById(nvml_device d, unsigned int id, nvml_gpu_instance *gi);
nvml_ret nvmlGpuInstanceGetInfo(nvml_gpu_instance gi, struct nvml_gpu_instance_info *info);
nvml_ret nvmlDeviceGetGpuInstanceId(nvml_device d, unsigned int *id)
{
    if (d->mig < 0)
        return 2; /* INVALID_ARGUMENT: not a MIG device */
    *id = gis[d->mig].id;
    return NVML_OK;
}

/* One compute instance per GPU instance, id 0 (the whole instance, as nvidia-smi makes it). */
nvml_ret nvmlDeviceGetComputeInstanceId(nvml_device d, unsigned int *id)
{
    if (d->mig < 0)
        return 2; /* INVALID_ARGUMENT: not a MIG device */
    *id = 0;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetGpuInstanceById(nvml_device d, unsigned int id, nvml_gpu_instance *gi)
{
    for (int k = 0; k < 2 && d->gpu == 1 && d->mig < 0; k++)
        if (gis[k].id == id) {
            *gi = &gis[k];
            return NVML_OK;
        }
    return NVML_ERR_NOT_FOUND;
}

nvml_ret nvmlGpuInstanceGetInfo(nvml_gpu_instance gi, struct nvml_gpu_instance_info *info)
{
    memset(info, 0, sizeof *info);
    info->device = &devs[1];
    info->id = gi->id;
    info->placement.start = gi->start;
    info->placement.size = gi->size;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetMaxMigDeviceCount(nvml_device d, unsigned int *n);
nvml_ret nvmlDeviceGetMigDeviceHandleByIndex(nvml_device d, unsigned int i, nvml_device *m);
nvml_ret nvmlDeviceGetCudaComputeCapability(nvml_device d, int *major, int *minor);
nvml_ret nvmlDeviceGetP2PStatus(nvml_device a, nvml_device b, int index, int *status);
nvml_ret nvmlDeviceGetComputeRunningProcesses_v3(nvml_device d, unsigned int *count,
                                                 struct nvml_process_info *infos);
nvml_ret nvmlDeviceGetProcessUtilization(nvml_device d,
                                         struct nvml_process_utilization_sample *samples,
                                         unsigned int *count, unsigned long long last_seen_us);

nvml_ret nvmlDeviceGetComputeRunningProcesses_v3(nvml_device d, unsigned int *count,
                                                 struct nvml_process_info *infos)
{
    static const struct nvml_process_info gpu0[2] = {{4101, 3000 * MIB, ~0U, ~0U},
                                                     {4102, 2500 * MIB, ~0U, ~0U}};
    static const struct nvml_process_info gpu1[1] = {{5001, ~0ULL, 9, 0}};
    if (d->mig >= 0)
        return NVML_ERR_NOT_SUPPORTED;
    const struct nvml_process_info *list = d->gpu == 0 ? gpu0 : gpu1;
    unsigned int n = d->gpu == 0 ? 2 : 1;
    if (*count < n) {
        *count = n;
        return NVML_ERR_INSUFFICIENT_SIZE;
    }
    memcpy(infos, list, n * sizeof *list);
    *count = n;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetProcessUtilization(nvml_device d,
                                         struct nvml_process_utilization_sample *samples,
                                         unsigned int *count, unsigned long long last_seen_us)
{
    static const struct nvml_process_utilization_sample all[3] = {
        {4101, 100, 20, 0, 0, 0}, {4102, 150, 25, 0, 0, 0}, {4101, 200, 30, 0, 0, 0}};
    if (d->gpu != 0 || d->mig >= 0)
        return NVML_ERR_NOT_SUPPORTED;
    unsigned int n = 0;
    for (unsigned int i = 0; i < 3; i++)
        n += all[i].time_stamp > last_seen_us;
    if (n == 0)
        return NVML_ERR_NOT_FOUND;
    if (samples == NULL || *count < n) {
        *count = n;
        return NVML_ERR_INSUFFICIENT_SIZE;
    }
    unsigned int k = 0;
    for (unsigned int i = 0; i < 3; i++)
        if (all[i].time_stamp > last_seen_us)
            samples[k++] = all[i];
    *count = k;
    return NVML_OK;
}

static int lost(nvml_device d)
{
    const char *e = getenv("STUB_NVML_LOST");
    return d->gpu == 1 && e != NULL && strcmp(e, "1") == 0;
}

static nvml_ret copy(char *buf, unsigned int len, const char *s)
{
    if (strlen(s) + 1 > len)
        return 7; /* INSUFFICIENT_SIZE */
    memcpy(buf, s, strlen(s) + 1);
    return NVML_OK;
}

nvml_ret nvmlInit_v2(void)
{
    const char *e = getenv("STUB_NVML_INIT_FAIL");
    return e != NULL && strcmp(e, "1") == 0 ? NVML_ERR_DRIVER_NOT_LOADED : NVML_OK;
}

nvml_ret nvmlShutdown(void)
{
    return NVML_OK;
}

const char *nvmlErrorString(nvml_ret rc)
{
    return rc == NVML_ERR_DRIVER_NOT_LOADED ? "Driver Not Loaded"
           : rc == NVML_ERR_GPU_IS_LOST     ? "GPU is lost"
                                            : "stub";
}

nvml_ret nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = 2;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device *d)
{
    if (i > 1)
        return 2;
    *d = &devs[i];
    return NVML_OK;
}

nvml_ret nvmlDeviceGetName(nvml_device d, char *buf, unsigned int len)
{
    if (d->mig >= 0)
        return copy(buf, len, d->mig == 0 ? "NVIDIA H200 MIG 1g.18gb" : "NVIDIA H200 MIG 3g.71gb");
    return copy(buf, len, "NVIDIA H200");
}

nvml_ret nvmlDeviceGetUUID(nvml_device d, char *buf, unsigned int len)
{
    if (d->mig >= 0)
        return copy(buf, len, d->mig == 0 ? "MIG-stub-1-a" : "MIG-stub-1-b");
    return copy(buf, len, d->gpu == 0 ? "GPU-stub-0" : "GPU-stub-1");
}

nvml_ret nvmlDeviceGetMemoryInfo(nvml_device d, struct nvml_memory *m)
{
    unsigned long long total = d->mig < 0 ? 143771 : d->mig == 0 ? 16384 : 69888;
    m->total = total * MIB;
    m->used = (d->gpu == 0 ? 1024 : 2048) * MIB;
    m->free = m->total - m->used;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetUtilizationRates(nvml_device d, struct nvml_utilization *u)
{
    if (lost(d))
        return NVML_ERR_GPU_IS_LOST;
    if (d->gpu == 1)
        return NVML_ERR_NOT_SUPPORTED; /* MIG mode */
    u->gpu = 55;
    u->memory = 20;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetTemperature(nvml_device d, int sensor, unsigned int *t)
{
    if (sensor != 0)
        return 2;
    *t = d->gpu == 0 ? 40 : 41;
    return lost(d) ? NVML_ERR_GPU_IS_LOST : NVML_OK;
}

nvml_ret nvmlDeviceGetPowerUsage(nvml_device d, unsigned int *mw)
{
    *mw = d->gpu == 0 ? 300250 : 95000;
    return lost(d) ? NVML_ERR_GPU_IS_LOST : NVML_OK;
}

nvml_ret nvmlDeviceGetClockInfo(nvml_device d, int type, unsigned int *mhz)
{
    if (type != 1 && type != 2)
        return 2;
    *mhz = type == 1 ? 1980 : 2619;
    return lost(d) ? NVML_ERR_GPU_IS_LOST : NVML_OK;
}

nvml_ret nvmlDeviceGetPciInfo_v3(nvml_device d, struct nvml_pci_info *p)
{
    memset(p, 0, sizeof *p);
    return copy(p->bus_id, sizeof p->bus_id, d->gpu == 0 ? "0000FFFE:FE:00.0" : "0000FFFF:FF:1F.7");
}

nvml_ret nvmlDeviceGetTotalEccErrors(nvml_device d, int type, int counter, unsigned long long *n)
{
    if (type != 1 || counter != 0)
        return 2;
    *n = d->gpu == 0 ? 0 : 3;
    return lost(d) ? NVML_ERR_GPU_IS_LOST : NVML_OK;
}

nvml_ret nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
    return copy(buf, len, "550.90.07");
}

nvml_ret nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    *v = 12040;
    return NVML_OK;
}

nvml_ret nvmlEventSetCreate(nvml_event_set *s)
{
    the_set.delivered = 0;
    *s = &the_set;
    return NVML_OK;
}

nvml_ret nvmlDeviceRegisterEvents(nvml_device d, unsigned long long types, nvml_event_set s)
{
    (void)d;
    return s == &the_set && types == 0xaULL ? NVML_OK : NVML_ERR_INVALID_ARGUMENT;
}

nvml_ret nvmlDeviceGetSupportedEventTypes(nvml_device d, unsigned long long *types)
{
    (void)d;
    *types = 0x1fULL;
    return NVML_OK;
}

nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms)
{
    (void)ms;
    memset(e, 0, sizeof *e);
    switch (s->delivered++) {
    case 0:
        e->device = &devs[1];
        e->event_type = 0x8; /* XID critical error */
        e->event_data = 79;
        return NVML_OK;
    case 1:
        e->device = &devs[0];
        e->event_type = 0x2; /* double-bit ECC */
        return NVML_OK;
    default:
        return NVML_ERR_TIMEOUT;
    }
}

nvml_ret nvmlEventSetFree(nvml_event_set s)
{
    return s == &the_set ? NVML_OK : NVML_ERR_INVALID_ARGUMENT;
}

nvml_ret nvmlDeviceGetMigMode(nvml_device d, unsigned int *cur, unsigned int *pending)
{
    *cur = *pending = d->gpu == 1 ? 1 : 0;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetMaxMigDeviceCount(nvml_device d, unsigned int *n)
{
    *n = d->gpu == 1 ? 7 : 0;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetMigDeviceHandleByIndex(nvml_device d, unsigned int i, nvml_device *m)
{
    if (d->gpu != 1 || (i != 0 && i != 3))
        return NVML_ERR_NOT_FOUND;
    *m = &migs[i == 0 ? 0 : 1];
    return NVML_OK;
}

nvml_ret nvmlDeviceGetCudaComputeCapability(nvml_device d, int *major, int *minor)
{
    (void)d;
    *major = 9;
    *minor = 0;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetP2PStatus(nvml_device a, nvml_device b, int index, int *status)
{
    *status = index == 2 && a != b ? 0 : 5;
    return NVML_OK;
}
