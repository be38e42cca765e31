/*
 * GPU backends of the node agent: one table of operations (struct gs_gpu_ops) and two
 * implementations behind it.
 *
 * - "nvml" loads libnvidia-ml.so.1 at run time with dlopen() and asks the driver. Nothing of
 *   NVIDIA's is needed to build; a node without the driver gets a clear error, not a crash.
 *   The backend only reads: it never changes MIG mode, clocks, persistence or anything else.
 * - "fake" reads a YAML description of GPUs and a script of timed changes and events, and
 *   replays it against a clock the caller supplies, so tests drive time and a laptop can run
 *   the agent (see deploy/fake-gpus.yaml for the format).
 *
 * Everything the agent needs from a GPU goes through this table: static information
 * (gs_gpu_info), a sample of current values (gs_gpu_sample) and a blocking wait for critical
 * events (XID errors, double-bit ECC errors). A backend is not thread-safe: one thread at a
 * time may call into it (the agent's GPU loop owns it and hands copies to the exporter).
 */
#ifndef GPUSCHED_GPU_H
#define GPUSCHED_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/diag.h" /* struct gs_diag */

/** Most GPUs one backend exposes. */
#define GS_GPU_MAX 64
/** Most MIG devices reported per GPU (an H100/H200 has at most 7 GPU instances). */
#define GS_GPU_MIG_MAX 16
/** Buffer size of a UUID ("GPU-…", "MIG-…"), NUL included (NVML's v2 UUID buffer size). */
#define GS_GPU_UUID_LEN 96
/** Buffer size of a model name, NUL included (NVML's v2 name buffer size). */
#define GS_GPU_NAME_LEN 96
/** Buffer size of a PCI bus id ("00000000:18:00.0"), NUL included. */
#define GS_GPU_PCI_LEN 32
/** Buffer size of a MIG profile name ("1g.18gb"), NUL included. */
#define GS_GPU_PROFILE_LEN 32
/** Buffer size of a driver version string ("550.54.15"), NUL included. */
#define GS_GPU_VERSION_LEN 80
/** gpu_index of an event that concerns every GPU (the driver did not say which one). */
#define GS_GPU_INDEX_ALL UINT32_MAX
/** Most processes gs_gpu_processes() reports for one GPU (more are cut off: n_out says so). */
#define GS_GPU_PROC_MAX 128

/** Facts about the whole node's driver. */
struct gs_gpu_system {
    char driver_version[GS_GPU_VERSION_LEN]; /**< kernel driver, "550.54.15"; "" unknown */
    int32_t cuda_driver_version; /**< CUDA version the driver supports, 1000*major + 10*minor
                                      (12040 = 12.4); 0 unknown */
};

/** One MIG device (GPU instance + compute instance) of a GPU. */
struct gs_gpu_mig {
    char profile[GS_GPU_PROFILE_LEN]; /**< "1g.18gb", "3g.71gb"; "" when unknown */
    char uuid[GS_GPU_UUID_LEN];       /**< "MIG-…" */
    uint64_t mem_mib;                 /**< memory of the MIG device, MiB */
    bool has_start;                   /**< start_slot is known */
    uint32_t start_slot;              /**< first memory/compute slice of the GPU instance
                                           (NVML's placement.start); valid when has_start */
    bool has_gi_id;                   /**< gi_id is known */
    uint32_t gi_id;                   /**< NVML's GPU instance id (dcgm-exporter's GPU_I_ID);
                                           valid when has_gi_id */
    bool has_ci_id;                   /**< ci_id is known */
    uint32_t ci_id;                   /**< compute instance id within the GPU instance
                                           (dcgm-exporter's GPU_CI_ID); valid when has_ci_id */
};

/** Static facts about one GPU. Plain value record. */
struct gs_gpu_info {
    uint32_t index;                  /**< 0-based index, as nvidia-smi and /dev/nvidiaN */
    char uuid[GS_GPU_UUID_LEN];      /**< "GPU-…" */
    char model[GS_GPU_NAME_LEN];     /**< "NVIDIA H200" */
    uint64_t mem_total_mib;          /**< framebuffer size, MiB */
    int32_t numa_node;               /**< NUMA node of the GPU's PCI device; -1 unknown */
    char pci_bus_id[GS_GPU_PCI_LEN]; /**< "00000000:18:00.0" (NVML's form); "" unknown */
    int32_t cc_major;           /**< CUDA compute capability major (9 for Hopper); -1 unknown */
    int32_t cc_minor;           /**< compute capability minor; -1 unknown */
    uint32_t nvlink_peer_count; /**< entries used in nvlink_peers */
    uint32_t nvlink_peers[GS_GPU_MAX]; /**< indices of GPUs reachable over NVLink, ascending */
    bool lost; /**< the GPU did not answer when read (no handle, GPU_IS_LOST): index, and uuid
                    when it answered, are the only facts; uuid "" when not even that */
    bool mig_capable;                      /**< the GPU supports MIG */
    bool mig_enabled;                      /**< MIG mode is currently on */
    uint32_t mig_count;                    /**< entries used in mig */
    struct gs_gpu_mig mig[GS_GPU_MIG_MAX]; /**< MIG devices, in the backend's order */
};

/** Bits of gs_gpu_sample.valid: which fields the backend could read. */
enum gs_gpu_field {
    GS_GPU_HAVE_UTIL = 1u << 0,      /**< util_pct */
    GS_GPU_HAVE_FB = 1u << 1,        /**< fb_used_mib and fb_free_mib */
    GS_GPU_HAVE_TEMP = 1u << 2,      /**< temp_c */
    GS_GPU_HAVE_POWER = 1u << 3,     /**< power_mw */
    GS_GPU_HAVE_SM_CLOCK = 1u << 4,  /**< sm_clock_mhz */
    GS_GPU_HAVE_MEM_CLOCK = 1u << 5, /**< mem_clock_mhz */
    GS_GPU_HAVE_ECC_DBE = 1u << 6,   /**< ecc_dbe_vol_total */
    GS_GPU_HAVE_XID = 1u << 7,       /**< xid_count and last_xid */
};

/** Current values of one GPU. Fields whose bit is not in `valid` are 0 and meaningless. */
struct gs_gpu_sample {
    uint32_t valid;             /**< set of enum gs_gpu_field bits */
    uint32_t util_pct;          /**< GPU utilisation over the last sample period, 0..100 % */
    uint64_t fb_used_mib;       /**< framebuffer used, MiB */
    uint64_t fb_free_mib;       /**< framebuffer free, MiB */
    int32_t temp_c;             /**< GPU core temperature, degrees Celsius */
    uint64_t power_mw;          /**< power draw, milliwatts */
    uint32_t sm_clock_mhz;      /**< current SM clock, MHz */
    uint32_t mem_clock_mhz;     /**< current memory clock, MHz */
    uint64_t ecc_dbe_vol_total; /**< double-bit (uncorrected) ECC errors since driver load */
    uint64_t xid_count;         /**< XID events the backend has seen for the GPU since open */
    uint64_t last_xid;          /**< code of the last XID seen; 0 none yet */
    uint64_t resets;            /**< times the backend lost the GPU and found it again since
                                     open (a reset seen); always set on GS_OK */
};

/**
 * Current values of one MIG device (GPU instance) of a GPU in MIG mode, as its own device:
 * what the pods on it use, never the whole GPU's (dcgm-exporter #587). Plain value record.
 */
struct gs_gpu_mig_sample {
    uint64_t fb_used_mib; /**< memory used in the instance, MiB; valid with GS_GPU_HAVE_FB */
    uint32_t gi_id;       /**< GPU instance id (gs_gpu_mig.gi_id) the values are of */
    uint32_t util_pct;    /**< the instance's SM activity over the last period, 0..100 %
                               (NVML: only through GPM, Hopper and later); valid with
                               GS_GPU_HAVE_UTIL */
    uint32_t valid;       /**< GS_GPU_HAVE_FB and GS_GPU_HAVE_UTIL bits */
};

/**
 * One compute process on a GPU, as the driver accounts it. Plain value record; fields are
 * ordered by size (no padding).
 */
struct gs_gpu_proc {
    uint64_t mem_mib;     /**< GPU memory the process uses, MiB (NVML's usedGpuMemory rounded
                               down); 0 when has_mem is false */
    uint32_t pid;         /**< process id in the host's (the driver's) PID namespace */
    uint32_t sm_util_pct; /**< SM utilisation of the process over the last sample period,
                               0..100 %; 0 when has_sm_util is false */
    uint32_t gi_id;       /**< MIG GPU instance id the process runs in (NVML's gpuInstanceId,
                               dcgm-exporter's GPU_I_ID); valid when has_gi_id */
    bool has_mem;         /**< mem_mib is known (NVML can answer "not available") */
    bool has_sm_util;     /**< sm_util_pct is known (a process idle for the whole period has
                               no utilisation sample: it counts as 0 %) */
    bool has_gi_id;       /**< the GPU is in MIG mode and gi_id is set */
};

/** What a critical event is. */
enum gs_gpu_event_kind {
    GS_GPU_EVENT_XID = 1,     /**< an XID (driver-reported error); `xid` holds its code */
    GS_GPU_EVENT_ECC_DBE = 2, /**< a double-bit (uncorrectable) ECC error */
    GS_GPU_EVENT_LOST = 3,    /**< the GPU stopped answering (NVML's GPU_IS_LOST, from the
                                   event wait or a query); told once per loss */
};

/** One critical event. */
struct gs_gpu_event {
    uint32_t gpu_index;          /**< GPU it concerns, or GS_GPU_INDEX_ALL */
    enum gs_gpu_event_kind kind; /**< what happened */
    uint64_t xid;                /**< XID code for GS_GPU_EVENT_XID, else 0 */
    int64_t t_ms;                /**< backend clock when delivered, ms */
};

/**
 * A time source in milliseconds with a matching sleep. The agent passes
 * gs_clock_monotonic(); tests pass a clock they advance themselves, whose sleep just adds
 * to the time, so a "wait 5 s" in a test takes no real time.
 */
struct gs_clock {
    int64_t (*now_ms)(void *ctx);            /**< current time, ms, never decreasing */
    void (*sleep_ms)(void *ctx, int64_t ms); /**< waits ms (> 0) milliseconds */
    void *ctx;                               /**< passed to both */
};

/**
 * Returns a clock on CLOCK_MONOTONIC whose sleep is nanosleep().
 * @return a value; thread-safe.
 */
struct gs_clock gs_clock_monotonic(void);

struct gs_gpu_backend;

/**
 * The operations of a backend. Each returns GS_OK or a negative gs_err code and, on failure,
 * leaves its output unspecified and a sentence in the backend's error text
 * (gs_gpu_last_error()). Call them through the gs_gpu_* wrappers below.
 */
struct gs_gpu_ops {
    /** "nvml", "fake" */
    const char *name;
    /** As gs_gpu_system(); arguments already checked. */
    int (*system)(struct gs_gpu_backend *b, struct gs_gpu_system *out);
    /** As gs_gpu_count(). */
    int (*count)(struct gs_gpu_backend *b, uint32_t *n_out);
    /** As gs_gpu_info(); checks the index itself. */
    int (*info)(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_info *out);
    /** As gs_gpu_sample(); checks the index itself. */
    int (*sample)(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_sample *out);
    /** As gs_gpu_processes(); checks the index itself; out has cap >= 1 entries. NULL when
     *  the backend cannot read processes (gs_gpu_processes() then answers GS_ENOENT). */
    int (*processes)(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_proc *out,
                     uint32_t cap, uint32_t *n_out);
    /** As gs_gpu_mig_sample(); checks the index itself; out has cap >= 1 entries. NULL when
     *  the backend cannot read MIG devices' own values (gs_gpu_mig_sample() answers
     *  GS_ENOENT). */
    int (*mig_sample)(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_mig_sample *out,
                      uint32_t cap, uint32_t *n_out);
    /** As gs_gpu_wait_event(); timeout_ms >= 0. */
    int (*wait_event)(struct gs_gpu_backend *b, int64_t timeout_ms, struct gs_gpu_event *out);
    /** As gs_gpu_mig_destroy(); checks the index itself. NULL when the backend cannot change
     *  a MIG layout (gs_gpu_mig_destroy() then answers GS_ENOENT). */
    int (*mig_destroy)(struct gs_gpu_backend *b, uint32_t index, uint32_t start);
    /** As gs_gpu_mig_create(); checks the index itself; profile non-NULL. NULL as above. */
    int (*mig_create)(struct gs_gpu_backend *b, uint32_t index, const char *profile,
                      uint32_t start);
    /** Releases everything, b included. */
    void (*close)(struct gs_gpu_backend *b);
};

/** A backend instance: the table and the implementation's state. */
struct gs_gpu_backend {
    const struct gs_gpu_ops *ops; /**< never NULL */
    void *impl;                   /**< owned by the implementation */
    char err[256];                /**< last error text, "" none */
};

/**
 * Opens the NVML backend: dlopen("libnvidia-ml.so.1") (or the file named by the environment
 * variable GS_NVML_LIBRARY), resolves the versioned entry points, nvmlInit_v2(), enumerates
 * GPUs (a count above GS_GPU_MAX keeps the first GS_GPU_MAX; a GPU NVML gives no handle for
 * is kept as lost, see gs_gpu_info) and registers for XID and double-bit ECC events where the
 * GPU supports them. Only reads: never changes MIG mode,
 * clocks, persistence or any other setting.
 * @param clock   time source for event timestamps and the no-event wait; copied.
 * @param out     receives the backend on GS_OK; close with gs_gpu_close().
 * @param errbuf  receives a sentence on failure ("cannot load libnvidia-ml.so.1 (is the NVIDIA
 *                driver installed …?): …"); may be NULL; cap bytes, NUL-terminated.
 * @return GS_OK; GS_ENOENT (library or a required symbol missing); GS_EIO (nvmlInit_v2 or
 *         the GPU count failed, e.g. driver not loaded); GS_EINVAL; GS_ENOMEM.
 * Sources: NVML API reference (docs.nvidia.com/deploy/nvml-api). Call from one thread.
 */
int gs_gpu_open_nvml(const struct gs_clock *clock, struct gs_gpu_backend **out, char *errbuf,
                     size_t cap);

/**
 * Opens the fake backend from a YAML file (format: deploy/fake-gpus.yaml). The script's t_ms
 * are relative to the clock's reading at open. Every later call first applies the script
 * entries that are due: "set" entries change the sample values, "xid" and "ecc_dbe" entries
 * count and queue an event, "lost" makes sample() fail with GS_EIO (a GPU that fell off the
 * bus) until a later entry clears it, which counts as a reset seen (gs_gpu_sample.resets),
 * "mig" replaces the GPU's MIG mode and instances (what gs_gpu_info() reports from then on).
 * wait_event() delivers queued events in script order and otherwise sleeps on the clock until the
 * next scripted event or the timeout.
 * @param path   YAML file; at most 4 MiB.
 * @param clock  time source; copied; its ctx must outlive the backend.
 * @param out    receives the backend on GS_OK; close with gs_gpu_close().
 * @param diag   filled on error with file, line, column and the offending key; may be NULL.
 * @return GS_OK; GS_EIO (cannot read); GS_EPARSE (not YAML, unknown or duplicate key, wrong
 *         type, value out of range, index or UUID repeated, NVLink peer or script GPU that does
 *         not exist); GS_ENOMEM.
 */
int gs_gpu_open_fake(const char *path, const struct gs_clock *clock, struct gs_gpu_backend **out,
                     struct gs_diag *diag);

/** As gs_gpu_open_fake() on a buffer of len bytes; `name` is used in diagnostics. */
int gs_gpu_parse_fake(const char *buf, size_t len, const char *name, const struct gs_clock *clock,
                      struct gs_gpu_backend **out, struct gs_diag *diag);

/**
 * Driver facts. @return as the backend; GS_EINVAL for NULL arguments.
 */
int gs_gpu_system(struct gs_gpu_backend *b, struct gs_gpu_system *out);

/** Number of GPUs (0..GS_GPU_MAX). @return GS_OK; GS_EINVAL for NULL arguments. */
int gs_gpu_count(struct gs_gpu_backend *b, uint32_t *n_out);

/**
 * Facts of GPU `index`: static ones, and its current MIG mode and instances (read anew on each
 * call, so a re-partitioned GPU shows its new layout). A GPU that is lost (no NVML handle, or
 * GPU_IS_LOST from its queries) is GS_OK with `lost` set, only what it told filled in and the
 * reason in gs_gpu_last_error(), so that one bad GPU does not stop the agent from reading the
 * others.
 * @return GS_OK; GS_ERANGE (no such index); GS_EIO (the driver failed otherwise); GS_EINVAL.
 */
int gs_gpu_info(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_info *out);

/**
 * Current values of GPU `index`. A field the GPU does not support is left out of `valid`,
 * which is not an error. A GPU the backend has lost is looked for again on each call (NVML:
 * its handle acquired again by index, the same UUID answering); when it answers, `resets`
 * goes up by one.
 * @return GS_OK; GS_ERANGE (no such index); GS_EIO (the GPU does not answer at all, e.g.
 *         XID 79 "fallen off the bus"); GS_EINVAL.
 */
int gs_gpu_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_sample *out);

/**
 * The compute processes on GPU `index` and, for each, its memory and its SM utilisation over
 * the last sample period (NVML: nvmlDeviceGetComputeRunningProcesses_v3 and
 * nvmlDeviceGetProcessUtilization since the previous call's newest sample; the fake backend:
 * the GPU's scripted "processes:" list). Processes are reported in the backend's order, one
 * entry per pid; a process NVML lists in two MIG compute instances counts once per entry.
 * @param out    caller storage for cap entries (cap >= 1); on GS_OK entries [0, *n_out) are
 *               filled.
 * @param n_out  receives the number of processes filled in (at most cap; a GPU with more
 *               processes than cap is cut at cap, not an error).
 * @return GS_OK; GS_ENOENT (the backend or driver cannot read processes: NVML without the
 *         entry points, or NOT_SUPPORTED on this GPU; not a fault of the GPU); GS_ERANGE (no
 *         such index); GS_EIO (the driver failed, the GPU is lost); GS_EINVAL (NULL, cap 0).
 *         On failure *n_out is 0. Call from the thread that owns the backend.
 */
int gs_gpu_processes(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_proc *out,
                     uint32_t cap, uint32_t *n_out);

/**
 * The current values of each MIG device (GPU instance) of GPU `index`, one entry per GPU
 * instance whose id the backend knows, in the order of gs_gpu_info's mig. NVML: the memory
 * used of each MIG device handle (nvmlDeviceGetMemoryInfo) and nothing for utilisation, which
 * NVML gives per instance only through GPM (nvmlGpmMigSampleGet, Hopper and later), not
 * loaded by this backend; the fake backend: the instances' scripted memory_used_mib and
 * gpm_util_pct. A GPU not in MIG mode has none (GS_OK, *n_out 0).
 * @param out    caller storage for cap entries (cap >= 1); [0, *n_out) filled on GS_OK.
 * @return GS_OK; GS_ENOENT (the backend cannot read them); GS_ERANGE (no such index); GS_EIO
 *         (the GPU is lost); GS_EINVAL (NULL, cap 0). On failure *n_out is 0. Call from the
 *         thread that owns the backend.
 */
int gs_gpu_mig_sample(struct gs_gpu_backend *b, uint32_t index, struct gs_gpu_mig_sample *out,
                      uint32_t cap, uint32_t *n_out);

/**
 * Waits up to timeout_ms (>= 0; 0 polls) for the next XID, double-bit ECC or LOST event. When
 * NVML's wait answers GPU_IS_LOST, the GPU it names (or, when it names none, each GPU whose
 * own query answers GPU_IS_LOST) is told once as GS_GPU_EVENT_LOST; a loss already told gives
 * GS_ENOENT, not a new event or an error.
 * @return GS_OK with *out filled; GS_ENOENT when no event came within the timeout;
 *         GS_EIO (the driver failed); GS_EINVAL.
 */
int gs_gpu_wait_event(struct gs_gpu_backend *b, int64_t timeout_ms, struct gs_gpu_event *out);

/**
 * Destroys the MIG GPU instance that starts at memory slice `start` of GPU `index` (dynamic MIG,
 * docs/internals/sharing.md), with its compute instances. The caller has checked that no
 * container uses it. Fake backend: the instance leaves the layout gs_gpu_info() reports. NVML:
 * the compute instances of the MIG device whose GPU instance has that placement start
 * (nvmlDeviceGetComputeInstanceId, nvmlGpuInstanceGetComputeInstanceById,
 * nvmlComputeInstanceDestroy), then the GPU instance (nvmlGpuInstanceDestroy); it needs root.
 * @return GS_OK; GS_ENOENT (no instance starts there, or the backend or driver cannot change
 *         MIG layouts: a missing entry point is named in gs_gpu_last_error()); GS_ERANGE (no
 *         such GPU); GS_EINVAL (not in MIG mode); GS_EIO (the driver refused).
 */
int gs_gpu_mig_destroy(struct gs_gpu_backend *b, uint32_t index, uint32_t start);

/**
 * Creates a MIG GPU instance of `profile` ("3g.40gb", a profile of the GPU's model in the core's
 * geometry table, mig.h) at memory slice `start` of GPU `index`, with one compute instance
 * taking all of it. Fake backend: the instance joins the layout (UUID "MIG-<GPU UUID minus
 * GPU->-gi<id>", the profile's memory from the table, the next free GPU instance id). NVML:
 * nvmlDeviceGetGpuInstanceProfileInfo, nvmlDeviceCreateGpuInstanceWithPlacement,
 * nvmlGpuInstanceCreateComputeInstance.
 * @return GS_OK; GS_ENOENT (as gs_gpu_mig_destroy()); GS_ERANGE (no such GPU); GS_EINVAL (not
 *         in MIG mode, a profile the model does not have, a start the profile does not allow);
 *         GS_ECONFLICT (its slices overlap an instance); GS_EIO (the driver refused).
 */
int gs_gpu_mig_create(struct gs_gpu_backend *b, uint32_t index, const char *profile,
                      uint32_t start);

/** Text of the last failure of this backend ("" none). Valid until the next call on b. */
const char *gs_gpu_last_error(const struct gs_gpu_backend *b);

/** Closes a backend and frees it. NULL is a no-op. */
void gs_gpu_close(struct gs_gpu_backend *b);

#endif /* GPUSCHED_GPU_H */
