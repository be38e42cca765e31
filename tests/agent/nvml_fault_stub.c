/*
 * A stand-in for libnvidia-ml.so.1 whose faults a test scripts while the agent runs, for the
 * cases where NVML's own error codes matter (issue 9: one lost GPU must not take the node's
 * other GPUs down; a GPU that fails every query is Unhealthy; the event wait answering
 * GPU_IS_LOST; a GPU seen reset). Loaded by the NVML backend through GS_NVML_LIBRARY.
 *
 * The node: eight "NVIDIA H200" GPUs, UUIDs GPU-f0000000-0000-4000-8000-00000000000<i>, no
 * MIG, no NVLink, PCI bus ids in a domain no machine has (no NUMA node). Every GPU answers
 * every query until the fault file says otherwise.
 *
 * The fault file is named by STUB_NVML_FAULTS and read again whenever its size or time of
 * change differs, so a test changes the faults by writing a new file and renaming it over
 * the old one. One fault per line, `#` starts a comment:
 *   handle_lost G     nvmlDeviceGetHandleByIndex_v2(G) answers GPU_IS_LOST (15)
 *   uuid_lost G       nvmlDeviceGetUUID of G answers GPU_IS_LOST
 *   query_lost G      name, memory, utilisation, temperature, power, clocks and ECC of G
 *                     answer GPU_IS_LOST
 *   query_fail G      the sample queries of G answer NVML_ERR_UNKNOWN (999), not GPU_IS_LOST
 *   wait_lost G       nvmlEventSetWait_v2 answers GPU_IS_LOST naming G; G = -1 names none
 *   xid G CODE N      event N (any number, delivered once) is XID CODE on G
 * Without STUB_NVML_FAULTS nothing fails.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The backend's declarations (src/agent/nvml_abi.h); the opaque handles are defined here. */
#include "nvml_abi.h"

struct nvml_device_opaque {
    int gpu;
};
struct nvml_event_set_opaque {
    int unused;
};

enum { N_GPUS = 8, MAX_XIDS = 64 };
#define MIB (1024ULL * 1024ULL)

static struct nvml_device_opaque devs[N_GPUS] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static struct nvml_event_set_opaque the_set;

/** The faults as last read. */
static struct {
    long long size;
    long long ctime_ns;
    long long mtime_ns;
    int handle_lost[N_GPUS], uuid_lost[N_GPUS], query_lost[N_GPUS], query_fail[N_GPUS];
    int wait_lost; /* GPU, -1 none named, -2 off */
    int n_xid;
    int xid_gpu[MAX_XIDS], xid_code[MAX_XIDS], xid_id[MAX_XIDS];
} f = {.size = -1, .wait_lost = -2};

/** Event ids delivered already (across re-reads). */
static int delivered[MAX_XIDS];
static int n_delivered;

static void reload(void)
{
    const char *path = getenv("STUB_NVML_FAULTS");
    struct stat st;
    if (path == NULL || stat(path, &st) != 0)
        return;
    long long ct = (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
    long long mt = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    if ((long long)st.st_size == f.size && ct == f.ctime_ns && mt == f.mtime_ns)
        return;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return;
    memset(&f, 0, sizeof f);
    f.size = (long long)st.st_size;
    f.ctime_ns = ct;
    f.mtime_ns = mt;
    f.wait_lost = -2;
    char line[256];
    while (fgets(line, sizeof line, fp) != NULL) {
        char key[32];
        int g = 0, code = 0, id = 0;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        int n = sscanf(line, "%31s %d %d %d", key, &g, &code, &id); /* NOLINT(cert-err34-c) */
        if (n < 2 || g < -1 || g >= N_GPUS)
            continue;
        if (strcmp(key, "wait_lost") == 0)
            f.wait_lost = g;
        else if (g < 0)
            continue;
        else if (strcmp(key, "handle_lost") == 0)
            f.handle_lost[g] = 1;
        else if (strcmp(key, "uuid_lost") == 0)
            f.uuid_lost[g] = 1;
        else if (strcmp(key, "query_lost") == 0)
            f.query_lost[g] = 1;
        else if (strcmp(key, "query_fail") == 0)
            f.query_fail[g] = 1;
        else if (strcmp(key, "xid") == 0 && n == 4 && f.n_xid < MAX_XIDS) {
            f.xid_gpu[f.n_xid] = g;
            f.xid_code[f.n_xid] = code;
            f.xid_id[f.n_xid++] = id;
        }
    }
    (void)fclose(fp);
}

/* The answer of a sample query of d: NVML_ERR_GPU_IS_LOST, NVML_ERR_UNKNOWN or NVML_OK. */
static nvml_ret query(nvml_device d)
{
    reload();
    if (f.query_lost[d->gpu])
        return NVML_ERR_GPU_IS_LOST;
    return f.query_fail[d->gpu] ? NVML_ERR_UNKNOWN : NVML_OK;
}

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
nvml_ret nvmlEventSetCreate(nvml_event_set *s);
nvml_ret nvmlDeviceRegisterEvents(nvml_device d, unsigned long long types, nvml_event_set s);
nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms);
nvml_ret nvmlEventSetFree(nvml_event_set s);

nvml_ret nvmlInit_v2(void)
{
    return NVML_OK;
}

nvml_ret nvmlShutdown(void)
{
    return NVML_OK;
}

const char *nvmlErrorString(nvml_ret rc)
{
    return rc == NVML_ERR_GPU_IS_LOST ? "GPU is lost"
           : rc == NVML_ERR_UNKNOWN   ? "Unknown Error"
                                      : "stub";
}

nvml_ret nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = N_GPUS;
    return NVML_OK;
}

nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device *d)
{
    if (i >= N_GPUS)
        return NVML_ERR_INVALID_ARGUMENT;
    reload();
    if (f.handle_lost[i])
        return NVML_ERR_GPU_IS_LOST;
    *d = &devs[i];
    return NVML_OK;
}

static nvml_ret copy(char *buf, unsigned int len, const char *s)
{
    if (strlen(s) + 1 > len)
        return 7; /* INSUFFICIENT_SIZE */
    memcpy(buf, s, strlen(s) + 1);
    return NVML_OK;
}

nvml_ret nvmlDeviceGetName(nvml_device d, char *buf, unsigned int len)
{
    reload();
    return f.query_lost[d->gpu] ? NVML_ERR_GPU_IS_LOST : copy(buf, len, "NVIDIA H200");
}

nvml_ret nvmlDeviceGetUUID(nvml_device d, char *buf, unsigned int len)
{
    reload();
    if (f.uuid_lost[d->gpu])
        return NVML_ERR_GPU_IS_LOST;
    char uuid[64];
    (void)snprintf(uuid, sizeof uuid, "GPU-f0000000-0000-4000-8000-00000000000%d", d->gpu);
    return copy(buf, len, uuid);
}

nvml_ret nvmlDeviceGetMemoryInfo(nvml_device d, struct nvml_memory *m)
{
    nvml_ret rc = query(d);
    m->total = 143771 * MIB;
    m->used = (1000 + 100 * (unsigned long long)d->gpu) * MIB;
    m->free = m->total - m->used;
    return rc;
}

nvml_ret nvmlDeviceGetUtilizationRates(nvml_device d, struct nvml_utilization *u)
{
    u->gpu = 10 + (unsigned)d->gpu;
    u->memory = 5;
    return query(d);
}

nvml_ret nvmlDeviceGetTemperature(nvml_device d, int sensor, unsigned int *t)
{
    if (sensor != 0)
        return NVML_ERR_INVALID_ARGUMENT;
    *t = 40;
    return query(d);
}

nvml_ret nvmlDeviceGetPowerUsage(nvml_device d, unsigned int *mw)
{
    *mw = 100000;
    return query(d);
}

nvml_ret nvmlDeviceGetClockInfo(nvml_device d, int type, unsigned int *mhz)
{
    *mhz = type == 1 ? 1980 : 2619;
    return query(d);
}

nvml_ret nvmlDeviceGetPciInfo_v3(nvml_device d, struct nvml_pci_info *p)
{
    memset(p, 0, sizeof *p);
    (void)snprintf(p->bus_id, sizeof p->bus_id, "0000FFF0:%02X:00.0", (unsigned)d->gpu);
    return NVML_OK;
}

nvml_ret nvmlDeviceGetTotalEccErrors(nvml_device d, int type, int counter, unsigned long long *n)
{
    (void)type;
    (void)counter;
    *n = 0;
    return query(d);
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
    return s == &the_set ? NVML_OK : NVML_ERR_INVALID_ARGUMENT;
}

nvml_ret nvmlEventSetWait_v2(nvml_event_set s, struct nvml_event_data *e, unsigned int ms)
{
    (void)s;
    (void)ms; /* the agent polls with 0; never sleep */
    memset(e, 0, sizeof *e);
    reload();
    for (int i = 0; i < f.n_xid; i++) {
        int seen = 0;
        for (int j = 0; j < n_delivered && !seen; j++)
            seen = delivered[j] == f.xid_id[i];
        if (seen || n_delivered == MAX_XIDS)
            continue;
        delivered[n_delivered++] = f.xid_id[i];
        e->device = &devs[f.xid_gpu[i]];
        e->event_type = 0x8; /* XID critical error */
        e->event_data = (unsigned long long)f.xid_code[i];
        return NVML_OK;
    }
    if (f.wait_lost >= -1) {
        e->device = f.wait_lost >= 0 ? &devs[f.wait_lost] : NULL;
        return NVML_ERR_GPU_IS_LOST;
    }
    return NVML_ERR_TIMEOUT;
}

nvml_ret nvmlEventSetFree(nvml_event_set s)
{
    return s == &the_set ? NVML_OK : NVML_ERR_INVALID_ARGUMENT;
}
