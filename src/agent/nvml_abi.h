/*
 * The subset of NVML's ABI that the agent uses, declared once from the published NVML API
 * reference (docs.nvidia.com/deploy/nvml-api): the return code is an int-sized enum, devices,
 * event sets and GPU instances are opaque pointers, and the structs have the documented member
 * order and types. The NVML backend (gpu_nvml.c) calls through it; the stand-in libraries of
 * the tests (tests/agent/nvml_stub.c, nvml_fault_stub.c) implement it, defining the opaque
 * structs (struct nvml_device_opaque, struct nvml_event_set_opaque, struct
 * nvml_gpu_instance_st) as they need, so the stubs and the backend cannot disagree on a layout.
 *
 * Declarations only: no function, no storage.
 */
#ifndef GS_AGENT_NVML_ABI_H
#define GS_AGENT_NVML_ABI_H

typedef int nvml_ret; /* nvmlReturn_t */
typedef struct nvml_device_opaque *nvml_device;
typedef struct nvml_event_set_opaque *nvml_event_set;

enum {
    NVML_OK = 0,
    NVML_ERR_INVALID_ARGUMENT = 2,
    NVML_ERR_NOT_SUPPORTED = 3,
    NVML_ERR_NO_PERMISSION = 4,
    NVML_ERR_NOT_FOUND = 6,
    NVML_ERR_INSUFFICIENT_SIZE = 7,
    NVML_ERR_DRIVER_NOT_LOADED = 9,
    NVML_ERR_TIMEOUT = 10,
    NVML_ERR_FUNCTION_NOT_FOUND = 13,
    NVML_ERR_GPU_IS_LOST = 15,
    NVML_ERR_UNKNOWN = 999,
};

enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_VOLATILE_ECC = 0,
    NVML_DEVICE_MIG_ENABLE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_STATUS_OK = 0,
};

#define NVML_EVENT_DOUBLE_BIT_ECC 0x2ULL
#define NVML_EVENT_XID_CRITICAL 0x8ULL

/* nvmlMemory_t: bytes. */
struct nvml_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

/* nvmlUtilization_t: percent over the last sample period. */
struct nvml_utilization {
    unsigned int gpu;
    unsigned int memory;
};

/* nvmlPciInfo_t (filled by nvmlDeviceGetPciInfo_v3). */
struct nvml_pci_info {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
};

/* nvmlEventData_t. */
struct nvml_event_data {
    nvml_device device;
    unsigned long long event_type;
    unsigned long long event_data;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
};

/* nvmlGpuInstance_t: an opaque handle. */
typedef struct nvml_gpu_instance_st *nvml_gpu_instance;

/* nvmlGpuInstancePlacement_t and nvmlGpuInstanceInfo_t (NVML 11.0 and later). */
struct nvml_gpu_instance_placement {
    unsigned int start;
    unsigned int size;
};
struct nvml_gpu_instance_info {
    nvml_device device;
    unsigned int id;
    unsigned int profile_id;
    struct nvml_gpu_instance_placement placement;
};

/* nvmlComputeInstance_t: an opaque handle. */
typedef struct nvml_compute_instance_st *nvml_compute_instance;

/* nvmlGpuInstanceProfileInfo_t (v1, nvmlDeviceGetGpuInstanceProfileInfo). */
struct nvml_gpu_instance_profile_info {
    unsigned int id;
    unsigned int is_p2p_supported;
    unsigned int slice_count;
    unsigned int instance_count;
    unsigned int multiprocessor_count;
    unsigned int copy_engine_count;
    unsigned int decoder_count;
    unsigned int encoder_count;
    unsigned int jpeg_count;
    unsigned int ofa_count;
    unsigned long long memory_size_mb;
};

/* NVML_GPU_INSTANCE_PROFILE_*: 1, 2, 3, 4, 7 slices; 1 slice with the media extensions
 * (REV1, "+me"); 1 slice with twice the memory (REV2, "1g.20gb"). NVML_COMPUTE_INSTANCE_PROFILE_*
 * of 1, 2, 3, 4, 7 slices use the same numbers as the first five. */
enum {
    NVML_GI_PROFILE_1_SLICE = 0,
    NVML_GI_PROFILE_2_SLICE = 1,
    NVML_GI_PROFILE_3_SLICE = 2,
    NVML_GI_PROFILE_4_SLICE = 3,
    NVML_GI_PROFILE_7_SLICE = 4,
    NVML_GI_PROFILE_1_SLICE_REV1 = 7,
    NVML_GI_PROFILE_1_SLICE_REV2 = 9,
};

/*
 * nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it (the v2/v3 layout):
 * the process id, its GPU memory in bytes (NVML_VALUE_NOT_AVAILABLE when the driver cannot
 * say, e.g. without permission under Windows WDDM), and under MIG the GPU and compute instance
 * it runs in (NVML_VALUE_NOT_AVAILABLE_UINT when the GPU is not in MIG mode).
 */
struct nvml_process_info {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
};

/*
 * nvmlProcessUtilizationSample_t from nvmlDeviceGetProcessUtilization: one process's
 * utilisation over one of the driver's sample periods, in percent, stamped in microseconds
 * (the CPU clock); the call returns the samples newer than the timestamp it is given.
 */
struct nvml_process_utilization_sample {
    unsigned int pid;
    unsigned long long time_stamp;
    unsigned int sm_util;
    unsigned int mem_util;
    unsigned int enc_util;
    unsigned int dec_util;
};

/* "Not available" as NVML writes it in an unsigned long long or an unsigned int field. */
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)
#define NVML_VALUE_NOT_AVAILABLE_UINT (~0U)

/** The entry points used, filled by dlsym(). */

#endif /* GS_AGENT_NVML_ABI_H */
