/*
 * A stand-in for libnvidia-ml.so.1 (loaded through GS_NVML_LIBRARY) that can change a MIG
 * layout, for the NVML backend's dynamic MIG operations (gs_gpu_mig_destroy, gs_gpu_mig_create
 * in src/agent/gpu_nvml.c) on machines without a GPU. It follows the ABI as the backend declares
 * it (src/agent/nvml_abi.h), so it checks the backend's use of the calls, not NVIDIA's headers.
 *
 * The node: one "NVIDIA H100 80GB HBM3" in MIG mode with seven 1g.10gb GPU instances at slices
 * 0..6 (GPU instance ids 1..7, one compute instance each). GPU-instance profiles answer as the
 * NVML reference lists their ids: 0 (1 slice, 9984 MiB), 1 (2), 2 (3), 3 (4), 4 (7), 7 (1 slice
 * with the media extensions) and 9 (1 slice, 19968 MiB). Creating a GPU instance checks the
 * profile's placement (start a multiple of the memory slices it takes, as the H100's 1g, 2g, 3g
 * and 4g profiles allow) and overlap; a compute instance must take the whole GPU instance
 * (compute profile = GPU profile). Every create and destroy is appended to the file named by
 * STUB_NVML_LOG, one line each, so a test can check what the backend asked for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"

#define MIB (1024ULL * 1024ULL)
#define SLOTS 8

struct nvml_device_opaque {
    int mig; /* -1 for the GPU itself, else the slot in gis */
};
struct nvml_event_set_opaque {
    int unused;
};
struct nvml_gpu_instance_st {
    int used;             /* the slot holds a GPU instance */
    unsigned int id;      /* GPU instance id */
    unsigned int profile; /* GPU-instance profile id */
    unsigned int start, size;
    int ci; /* it has its compute instance */
};
struct nvml_compute_instance_st {
    int gi; /* slot of its GPU instance */
};

static struct nvml_device_opaque gpu = {-1};
static struct nvml_device_opaque migdev[SLOTS] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static struct nvml_gpu_instance_st gis[SLOTS];
static struct nvml_compute_instance_st cis[SLOTS];
static struct nvml_event_set_opaque the_set;
static int ready;

/* Profile id -> slices and memory, MiB. */
static int prof(unsigned int id, unsigned int *slices, unsigned long long *mib, const char **name)
{
    static const struct {
        unsigned int id, slices;
        unsigned long long mib;
        const char *name;
    } t[] = {{0, 1, 9984, "1g.10gb"},  {1, 2, 20096, "2g.20gb"}, {2, 3, 40448, "3g.40gb"},
             {3, 4, 40448, "4g.40gb"}, {4, 7, 81152, "7g.80gb"}, {7, 1, 9984, "1g.10gb+me"},
             {9, 1, 20096, "1g.20gb"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].id == id) {
            *slices = t[i].slices;
            *mib = t[i].mib;
            *name = t[i].name;
            return 1;
        }
    return 0;
}

/* Memory slices a profile takes on an H100 (1g.20gb takes two, 4g and 7g all of a half or
 * all). */
static unsigned int mem_slices(unsigned int id)
{
    return id == 9 ? 2 : id == 1 ? 2 : id == 2 ? 4 : id == 3 ? 4 : id == 4 ? 8 : 1;
}

static void setup(void)
{
    if (ready)
        return;
    ready = 1;
    for (unsigned int s = 0; s < 7; s++)
        gis[s] = (struct nvml_gpu_instance_st){1, s + 1, 0, s, 1, 1};
}

static void log_line(const char *line)
{
    const char *path = getenv("STUB_NVML_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    (void)fprintf(f, "%s\n", line);
    (void)fclose(f);
}

static nvml_ret copy(char *buf, unsigned int len, const char *s)
{
    if (strlen(s) + 1 > len)
        return NVML_ERR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_OK;
}

/* Every entry point the backend requires, answering for one healthy GPU. */
nvml_ret nvmlInit_v2(void);
nvml_ret nvmlShutdown(void);
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
nvml_ret nvmlEventSetCreate(nvml_event_set *s);
nvml_ret nvmlDeviceRegisterEvents(nvml_device d, unsigned long long types, nvml_event_set s);
nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms);
nvml_ret nvmlEventSetFree(nvml_event_set s);
/* MIG reading and changing. */
nvml_ret nvmlDeviceGetMigMode(nvml_device d, unsigned int *cur, unsigned int *pending);
nvml_ret nvmlDeviceGetMaxMigDeviceCount(nvml_device d, unsigned int *n);
nvml_ret nvmlDeviceGetMigDeviceHandleByIndex(nvml_device d, unsigned int i, nvml_device *m);
nvml_ret nvmlDeviceGetGpuInstanceId(nvml_device d, unsigned int *id);
nvml_ret nvmlDeviceGetGpuInstanceById(nvml_device d, unsigned int id, nvml_gpu_instance *gi);
nvml_ret nvmlGpuInstanceGetInfo(nvml_gpu_instance gi, struct nvml_gpu_instance_info *info);
nvml_ret nvmlDeviceGetGpuInstanceProfileInfo(nvml_device d, unsigned int profile,
                                             struct nvml_gpu_instance_profile_info *info);
nvml_ret nvmlDeviceCreateGpuInstanceWithPlacement(nvml_device d, unsigned int profile,
                                                  const struct nvml_gpu_instance_placement *pl,
                                                  nvml_gpu_instance *gi);
nvml_ret nvmlGpuInstanceCreateComputeInstance(nvml_gpu_instance gi, unsigned int profile,
                                              nvml_compute_instance *ci);
nvml_ret nvmlGpuInstanceDestroy(nvml_gpu_instance gi);
nvml_ret nvmlComputeInstanceDestroy(nvml_compute_instance ci);
nvml_ret nvmlDeviceGetComputeInstanceId(nvml_device d, unsigned int *id);
nvml_ret nvmlGpuInstanceGetComputeInstanceById(nvml_gpu_instance gi, unsigned int id,
                                               nvml_compute_instance *ci);

nvml_ret nvmlInit_v2(void)
{
    setup();
    return NVML_OK;
}
nvml_ret nvmlShutdown(void)
{
    return NVML_OK;
}
nvml_ret nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = 1;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device *d)
{
    if (i != 0)
        return NVML_ERR_INVALID_ARGUMENT;
    *d = &gpu;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetName(nvml_device d, char *buf, unsigned int len)
{
    unsigned int s;
    unsigned long long m;
    const char *name = "";
    if (d->mig < 0)
        return copy(buf, len, "NVIDIA H100 80GB HBM3");
    if (!gis[d->mig].used || !prof(gis[d->mig].profile, &s, &m, &name))
        return NVML_ERR_NOT_FOUND;
    char full[96];
    (void)snprintf(full, sizeof full, "NVIDIA H100 80GB HBM3 MIG %s", name);
    return copy(buf, len, full);
}
nvml_ret nvmlDeviceGetUUID(nvml_device d, char *buf, unsigned int len)
{
    if (d->mig < 0)
        return copy(buf, len, "GPU-migstub-0");
    char u[64];
    (void)snprintf(u, sizeof u, "MIG-migstub-gi%u", gis[d->mig].id);
    return copy(buf, len, u);
}
nvml_ret nvmlDeviceGetMemoryInfo(nvml_device d, struct nvml_memory *m)
{
    unsigned int s;
    unsigned long long mib = 81559;
    const char *name;
    if (d->mig >= 0 && !prof(gis[d->mig].profile, &s, &mib, &name))
        return NVML_ERR_NOT_FOUND;
    m->total = mib * MIB;
    m->used = 0;
    m->free = m->total;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetUtilizationRates(nvml_device d, struct nvml_utilization *u)
{
    (void)d;
    (void)u;
    return NVML_ERR_NOT_SUPPORTED; /* MIG mode */
}
nvml_ret nvmlDeviceGetTemperature(nvml_device d, int sensor, unsigned int *t)
{
    (void)d;
    (void)sensor;
    *t = 40;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetPowerUsage(nvml_device d, unsigned int *mw)
{
    (void)d;
    *mw = 90000;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetClockInfo(nvml_device d, int type, unsigned int *mhz)
{
    (void)d;
    *mhz = type == 1 ? 1980 : 2619;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetPciInfo_v3(nvml_device d, struct nvml_pci_info *p)
{
    (void)d;
    memset(p, 0, sizeof *p);
    return copy(p->bus_id, sizeof p->bus_id, "0000FFFD:FD:00.0");
}
nvml_ret nvmlDeviceGetTotalEccErrors(nvml_device d, int type, int counter, unsigned long long *n)
{
    (void)d;
    (void)type;
    (void)counter;
    *n = 0;
    return NVML_OK;
}
nvml_ret nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
    return copy(buf, len, "550.90.07");
}
nvml_ret nvmlEventSetCreate(nvml_event_set *s)
{
    *s = &the_set;
    return NVML_OK;
}
nvml_ret nvmlDeviceRegisterEvents(nvml_device d, unsigned long long types, nvml_event_set s)
{
    (void)d;
    (void)types;
    (void)s;
    return NVML_OK;
}
nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms)
{
    (void)s;
    (void)e;
    (void)ms;
    return NVML_ERR_TIMEOUT;
}
nvml_ret nvmlEventSetFree(nvml_event_set s)
{
    (void)s;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetMigMode(nvml_device d, unsigned int *cur, unsigned int *pending)
{
    (void)d;
    *cur = *pending = 1;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetMaxMigDeviceCount(nvml_device d, unsigned int *n)
{
    *n = d->mig < 0 ? 7 : 0;
    return NVML_OK;
}
/* MIG device i is the i-th GPU instance slot in use. */
nvml_ret nvmlDeviceGetMigDeviceHandleByIndex(nvml_device d, unsigned int i, nvml_device *m)
{
    if (d->mig >= 0)
        return NVML_ERR_INVALID_ARGUMENT;
    unsigned int k = 0;
    for (int s = 0; s < SLOTS; s++)
        if (gis[s].used && gis[s].ci && k++ == i) {
            *m = &migdev[s];
            return NVML_OK;
        }
    return NVML_ERR_NOT_FOUND;
}
nvml_ret nvmlDeviceGetGpuInstanceId(nvml_device d, unsigned int *id)
{
    if (d->mig < 0 || !gis[d->mig].used)
        return NVML_ERR_INVALID_ARGUMENT;
    *id = gis[d->mig].id;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetGpuInstanceById(nvml_device d, unsigned int id, nvml_gpu_instance *gi)
{
    for (int s = 0; s < SLOTS && d->mig < 0; s++)
        if (gis[s].used && gis[s].id == id) {
            *gi = &gis[s];
            return NVML_OK;
        }
    return NVML_ERR_NOT_FOUND;
}
nvml_ret nvmlGpuInstanceGetInfo(nvml_gpu_instance gi, struct nvml_gpu_instance_info *info)
{
    memset(info, 0, sizeof *info);
    info->device = &gpu;
    info->id = gi->id;
    info->profile_id = gi->profile;
    info->placement.start = gi->start;
    info->placement.size = gi->size;
    return NVML_OK;
}
nvml_ret nvmlDeviceGetGpuInstanceProfileInfo(nvml_device d, unsigned int profile,
                                             struct nvml_gpu_instance_profile_info *info)
{
    unsigned int s;
    unsigned long long mib;
    const char *name;
    if (d->mig >= 0 || !prof(profile, &s, &mib, &name))
        return NVML_ERR_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->id = profile;
    info->slice_count = s;
    info->memory_size_mb = mib;
    return NVML_OK;
}
nvml_ret nvmlDeviceCreateGpuInstanceWithPlacement(nvml_device d, unsigned int profile,
                                                  const struct nvml_gpu_instance_placement *pl,
                                                  nvml_gpu_instance *gi)
{
    unsigned int s, size = mem_slices(profile), next = 1;
    unsigned long long mib;
    const char *name;
    if (d->mig >= 0 || !prof(profile, &s, &mib, &name) || pl->start % size != 0 ||
        pl->start + size > 8)
        return NVML_ERR_INVALID_ARGUMENT;
    int free_slot = -1;
    for (int k = 0; k < SLOTS; k++) {
        if (!gis[k].used) {
            if (free_slot < 0)
                free_slot = k;
            continue;
        }
        if (pl->start < gis[k].start + gis[k].size && gis[k].start < pl->start + size)
            return NVML_ERR_INSUFFICIENT_SIZE; /* NVML: the slices are taken */
        if (gis[k].id >= next)
            next = gis[k].id + 1;
    }
    if (free_slot < 0)
        return NVML_ERR_INSUFFICIENT_SIZE;
    gis[free_slot] = (struct nvml_gpu_instance_st){1, next, profile, pl->start, size, 0};
    *gi = &gis[free_slot];
    char line[80];
    (void)snprintf(line, sizeof line, "create gi profile=%u start=%u id=%u", profile, pl->start,
                   next);
    log_line(line);
    return NVML_OK;
}
nvml_ret nvmlGpuInstanceCreateComputeInstance(nvml_gpu_instance gi, unsigned int profile,
                                              nvml_compute_instance *ci)
{
    int slot = (int)(gi - gis);
    if (slot < 0 || slot >= SLOTS || !gi->used || gi->ci)
        return NVML_ERR_INVALID_ARGUMENT;
    /* The compute profile that takes the whole GPU instance has its profile's number. */
    unsigned int want = gi->profile == 7 || gi->profile == 9 ? 0 : gi->profile;
    if (profile != want)
        return NVML_ERR_INVALID_ARGUMENT;
    gi->ci = 1;
    cis[slot].gi = slot;
    *ci = &cis[slot];
    char line[80];
    (void)snprintf(line, sizeof line, "create ci profile=%u gi=%u", profile, gi->id);
    log_line(line);
    return NVML_OK;
}
nvml_ret nvmlGpuInstanceDestroy(nvml_gpu_instance gi)
{
    if (!gi->used || gi->ci)
        return NVML_ERR_INVALID_ARGUMENT; /* NVML: IN_USE while a compute instance exists */
    char line[80];
    (void)snprintf(line, sizeof line, "destroy gi id=%u start=%u", gi->id, gi->start);
    log_line(line);
    gi->used = 0;
    return NVML_OK;
}
nvml_ret nvmlComputeInstanceDestroy(nvml_compute_instance ci)
{
    struct nvml_gpu_instance_st *gi = &gis[ci->gi];
    if (!gi->used || !gi->ci)
        return NVML_ERR_INVALID_ARGUMENT;
    gi->ci = 0;
    char line[80];
    (void)snprintf(line, sizeof line, "destroy ci gi=%u", gi->id);
    log_line(line);
    return NVML_OK;
}
nvml_ret nvmlDeviceGetComputeInstanceId(nvml_device d, unsigned int *id)
{
    if (d->mig < 0 || !gis[d->mig].used || !gis[d->mig].ci)
        return NVML_ERR_INVALID_ARGUMENT;
    *id = 0;
    return NVML_OK;
}
nvml_ret nvmlGpuInstanceGetComputeInstanceById(nvml_gpu_instance gi, unsigned int id,
                                               nvml_compute_instance *ci)
{
    int slot = (int)(gi - gis);
    if (slot < 0 || slot >= SLOTS || !gi->ci || id != 0)
        return NVML_ERR_NOT_FOUND;
    cis[slot].gi = slot;
    *ci = &cis[slot];
    return NVML_OK;
}
