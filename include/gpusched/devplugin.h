/*
 * The node agent's Kubernetes device plugin: configuration, the resource model built from a
 * GPU backend, the pure request handlers of the v1beta1 DevicePlugin service, and the agent
 * daemon that serves them to kubelet next to the health machine and the metrics exporter.
 *
 * Contract sources: kubernetes/kubelet pkg/apis/deviceplugin/v1beta1 (api.proto, constants.go),
 * the device plugin page of the Kubernetes docs, kubelet's devicemanager (registration,
 * restart, ListAndWatch semantics), and NVIDIA's k8s-device-plugin for the configuration file
 * (version v1: flags.migStrategy, sharing.timeSlicing), resource names (nvidia.com/gpu,
 * nvidia.com/mig-<profile>, nvidia.com/gpu.shared) and replica IDs ("<uuid>::<n>"). See
 * docs/agent.md for the user's view and docs/kubernetes-contracts.md section 3.1.
 *
 * Layers, each usable alone:
 * - gs_dp_config_*: the YAML configuration, every key checked, errors with file, line,
 *   column and key (struct gs_diag).
 * - gs_dp_model_*: which resources the node advertises and their devices: whole GPUs, MIG
 *   devices (MIG strategy none, single or mixed) and time-sliced replicas, with NUMA node and
 *   NVLink facts for preferred allocations. Pure.
 * - gs_dp_handle_*: the DevicePlugin methods as functions from request bytes to an answer
 *   (response bytes or a gRPC status), given the model and the GPUs' health. Pure, so unit
 *   tests and fuzzers drive them without sockets.
 * - gs_dp_agent_*: the daemon. One thread runs one poll() loop over the gRPC servers (one
 *   UNIX socket per resource), inotify on the device-plugin directory, the backend's events
 *   and the timers; two helper threads make the blocking calls to kubelet (Register, whose
 *   answer waits for kubelet to dial back into our loop, and PodResources List); the exporter
 *   serves HTTP on its own thread.
 */
#ifndef GPUSCHED_DEVPLUGIN_H
#define GPUSCHED_DEVPLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/gfd_labels.h" /* enum gs_mig_strategy */
#include "gpusched/gpu.h"
#include "gpusched/health.h"
#include "gpusched/diag.h" /* struct gs_diag */
#include "gpusched/kube.h" /* struct gs_kube_config */
#include "gpusched/log.h"  /* gs_log_fn */

/** Buffer size of an extended resource name ("nvidia.com/mig-1g.18gb.shared"), NUL included. */
#define GS_DP_RESOURCE_NAME_LEN 128
/** Buffer size of a kubelet device ID: at most 63 characters (v1beta1 api.proto), NUL. */
#define GS_DP_DEVICE_ID_LEN 64
/** Buffer size of a socket file name inside the device-plugin directory, NUL included. */
#define GS_DP_ENDPOINT_LEN 160
/** Buffer size of a file system path in the configuration, NUL included. */
#define GS_DP_PATH_LEN 256
/** Most time-slicing entries (sharing.timeSlicing.resources). */
#define GS_DP_TS_MAX 16
/** Most device selectors in one time-slicing entry. */
#define GS_DP_SELECT_MAX 64
/** Most replicas of one device. */
#define GS_DP_REPLICAS_MAX 256
/** The resource of fraction tickets (added to pods by the webhook). */
#define GS_DP_SLICE_RESOURCE "gpusched.io/gpu-slice"
/** Slice devices per fractions GPU when sharing.fractions.slicesPerGpu is not given. */
#define GS_DP_SLICES_DEFAULT 10
/** Most resources one node advertises. */
#define GS_DP_RESOURCES_MAX 32
/** Most devices of one resource (keeps a ListAndWatch message far below 4 MiB). */
#define GS_DP_DEVICES_MAX 16384
/** Largest configuration file, bytes. */
#define GS_DP_CONFIG_FILE_MAX (1024u * 1024u)

/** Default directory of kubelet's device plugin sockets (DevicePluginPath). */
#define GS_DP_DEFAULT_PLUGIN_DIR "/var/lib/kubelet/device-plugins"
/** Default socket of kubelet's PodResources API. */
#define GS_DP_DEFAULT_POD_RESOURCES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
/** Default metrics address (dcgm-exporter's port). */
#define GS_DP_DEFAULT_METRICS_ADDR "0.0.0.0:9400"
/**
 * File in the device plugin directory by which an operator clears GPUs' health: its text names
 * GPUs by index or UUID (or "all"), separated by spaces, commas or lines; the agent makes each
 * Unhealthy one Healthy (reason cleared) and removes the file. Only root on the node can write
 * the directory.
 */
#define GS_DP_CLEAR_HEALTH_FILE "gpusched-clear-health"
/** Default period of metric samples and pod attribution, ms. */
#define GS_DP_DEFAULT_REFRESH_MS 1000
/**
 * Default period of rediscovery, ms: the backend's GPUs and MIG layouts are read again this
 * often and a changed MIG layout is advertised (issue 9 asks for <= 30 s).
 */
#define GS_DP_DEFAULT_REDISCOVER_MS 30000
/** Shortest rediscovery period other than 0 (off), ms. */
#define GS_DP_REDISCOVER_MIN_MS 100

/** How devices are named to the container runtime (NVIDIA's deviceIDStrategy). */
enum gs_dp_id_strategy {
    GS_DP_ID_UUID = 0,  /**< "GPU-…" / "MIG-…" */
    GS_DP_ID_INDEX = 1, /**< "3" / "6:1" (GPU index : MIG device position) */
};

/** One entry of sharing.timeSlicing.resources. */
struct gs_dp_ts_entry {
    char name[GS_DP_RESOURCE_NAME_LEN]; /**< resource it shares: nvidia.com/gpu, nvidia.com/mig-P */
    char rename[GS_DP_RESOURCE_NAME_LEN]; /**< resource the replicas go to; "" = default (name,
                                               or name + ".shared" under renameByDefault) */
    uint32_t replicas;                    /**< replicas per device, 2..GS_DP_REPLICAS_MAX */
    bool all_devices;                     /**< `devices: all` or no `devices` key */
    uint32_t n_devices;                   /**< selectors used in devices */
    char devices[GS_DP_SELECT_MAX][GS_GPU_UUID_LEN]; /**< GPU index ("3"), "G:M", GPU or MIG UUID */
    uint32_t line; /**< 1-based line of the entry in the file, 0 unknown */
};

/** The agent's configuration. Fill with gs_dp_config_default() or gs_dp_config_parse(). */
struct gs_dp_config {
    enum gs_mig_strategy mig_strategy;      /**< flags.migStrategy */
    bool list_envvar;                       /**< flags.plugin.deviceListStrategy has envvar */
    bool list_cdi;                          /**< … has cdi-cri: Allocate returns CDI names */
    enum gs_dp_id_strategy id_strategy;     /**< flags.plugin.deviceIDStrategy */
    bool rename_by_default;                 /**< sharing.timeSlicing.renameByDefault */
    bool fail_requests_greater_than_one;    /**< sharing.timeSlicing.failRequestsGreaterThanOne */
    uint32_t n_ts;                          /**< entries used in ts */
    struct gs_dp_ts_entry ts[GS_DP_TS_MAX]; /**< sharing.timeSlicing.resources */
    bool has_fractions;                     /**< sharing.fractions is present */
    struct gs_dp_ts_entry fractions;        /**< sharing.fractions, read only when
                                                 has_fractions: name GS_DP_SLICE_RESOURCE,
                                                 replicas = slicesPerGpu (1..256, default
                                                 GS_DP_SLICES_DEFAULT), devices = the GPUs
                                                 advertised as slices (mode fractions; indices
                                                 or GPU UUIDs, all_devices for `all` or no
                                                 key), line = the mapping's line */
    struct gs_health_config health;         /**< health.{ignoredXids, recoveryQuietPeriod,
                                                 probeInterval} */
    char metrics_addr[GS_DP_PATH_LEN];      /**< exporter.listenAddress "HOST:PORT"; "" = off */
    int64_t refresh_ms;                     /**< exporter.refreshInterval, > 0 */
    int64_t rediscover_ms;                  /**< flags.rediscoverInterval: period of re-reading
                                                 the GPUs' MIG layouts; 0 = never (the list
                                                 read at start stays), else >=
                                                 GS_DP_REDISCOVER_MIN_MS */
    char plugin_dir[GS_DP_PATH_LEN];        /**< kubelet.devicePluginDir */
    char pod_resources_socket[GS_DP_PATH_LEN]; /**< kubelet.podResourcesSocket; "" = no
                                                    pod attribution */
    char proc_root[GS_DP_PATH_LEN]; /**< where processes' cgroups are read for per-pod GPU
                                         values (`--proc-root`, default "/proc"; the host's
                                         needs hostPID); "" = no per-pod values */
    bool mig_dynamic; /**< mig.dynamic: carry out the scheduler's MIG re-partition plans (Node
                           annotation gpusched.io/mig-plan, docs/agent.md); default false:
                           plans are ignored (said once in the log) */
};

/**
 * Fills a configuration with the defaults: strategy none, envvar list, UUID names, no
 * sharing, health defaults (gs_health_config_default), metrics on GS_DP_DEFAULT_METRICS_ADDR
 * every GS_DP_DEFAULT_REFRESH_MS, kubelet's default paths.
 */
void gs_dp_config_default(struct gs_dp_config *cfg);

/**
 * Parses a configuration (format: deploy/agent-config.yaml, docs/agent.md). Keys absent from
 * the text keep their defaults. Every key is checked: unknown or repeated keys, wrong types
 * and values out of range are errors; so is one GPU taken by sharing.fractions and a
 * sharing.timeSlicing entry of nvidia.com/gpu with the same selector (or either by `all`),
 * reported at the document with both lines (selectors of different spellings are told apart
 * by gs_dp_model_build).
 * @param buf   the YAML text, len bytes (need not be NUL-terminated); at most
 *              GS_DP_CONFIG_FILE_MAX bytes.
 * @param name  file name for diagnostics; may be NULL.
 * @param cfg   filled on success; unspecified on failure.
 * @param diag  on failure: file, 1-based line and column of the offending node, the key in
 *              `field` and a sentence naming the key's path in `msg`; may be NULL.
 * @return GS_OK; GS_EPARSE (not YAML, not this schema, a bad value); GS_EIO (too big);
 *         GS_ENOMEM; GS_EINVAL (NULL buf or cfg).
 */
int gs_dp_config_parse(const char *buf, size_t len, const char *name, struct gs_dp_config *cfg,
                       struct gs_diag *diag);

/**
 * Reads and parses a configuration file. @return as gs_dp_config_parse, plus GS_EIO when
 * the file cannot be read (reason in diag).
 */
int gs_dp_config_read(const char *path, struct gs_dp_config *cfg, struct gs_diag *diag);

/**
 * Replicas a node advertises for whole GPUs under the nvidia.com/gpu entry of the
 * configuration (GFD's nvidia.com/gpu.replicas); 1 when that resource is not shared.
 */
uint32_t gs_dp_config_gpu_replicas(const struct gs_dp_config *cfg);

/* ---- resource model ----------------------------------------------------------------------- */

/** One device as kubelet sees it. Plain value record. */
struct gs_dp_device {
    char id[GS_DP_DEVICE_ID_LEN]; /**< GPU UUID, MIG UUID, "<either>::<n>" for a replica, or
                                       "<GPU UUID>::slice-<n>" for a slice */
    uint32_t gpu;                 /**< index of the physical GPU */
    int32_t mig;                  /**< position in gs_gpu_info.mig, -1 for a whole GPU */
    uint32_t replica;             /**< n of "::<n>", 0 when not a replica */
    uint32_t replicas;            /**< replicas of the underlying device, 0 when not shared */
    uint32_t slices;              /**< slices of a fractions GPU ("<uuid>::slice-<n>", n in
                                       replica), 0 when not a slice */
    int32_t numa_node;            /**< NUMA node of the GPU, -1 unknown (no topology sent) */
    bool retired;                 /**< gone from the hardware (its GPU was re-partitioned) but
                                       held by a container: listed Unhealthy, never proposed,
                                       Allocate refuses it (gs_dp_model_retain); mig is -1 */
};

/** One advertised resource: one socket, one registration, one ListAndWatch list. */
struct gs_dp_resource {
    char name[GS_DP_RESOURCE_NAME_LEN]; /**< "nvidia.com/gpu" */
    char endpoint[GS_DP_ENDPOINT_LEN];  /**< "gpusched-nvidia.com-gpu.sock" */
    uint32_t n_devices;                 /**< entries in devices, 1..GS_DP_DEVICES_MAX; 0 for
                                             a resource withdrawn by a rediscovery */
    struct gs_dp_device *devices;       /**< in GPU, MIG, replica order; owned */
    uint32_t *by_id;                    /**< device positions sorted by id; owned */
};

/** Everything a node advertises. Caller storage; gs_dp_model_fini releases it. */
struct gs_dp_model {
    uint32_t n_gpus;                /**< GPUs of the backend, <= GS_GPU_MAX */
    struct gs_gpu_info *gpus;       /**< by index; owned */
    uint64_t nvlink[GS_GPU_MAX];    /**< bit j of nvlink[i]: GPU i reaches GPU j over NVLink */
    uint32_t dev_minor[GS_GPU_MAX]; /**< N of /dev/nvidiaN per GPU: the index after
                                         gs_dp_model_build; the agent puts the driver's minor
                                         number here when /proc/driver/nvidia tells it */
    uint32_t n_resources;           /**< entries in resources, sorted by name (after
                                         gs_dp_model_carry: in the order first advertised) */
    struct gs_dp_resource resources[GS_DP_RESOURCES_MAX]; /**< advertised resources */
    uint32_t n_unmatched;            /**< sharing selectors that matched no device here */
    char unmatched[GS_GPU_UUID_LEN]; /**< the first of them ("" none), for a log line */
};

/**
 * Builds the model: whole GPUs under nvidia.com/gpu and MIG devices according to the MIG
 * strategy (none: every GPU whole, MIG mode or not; single: every GPU must run MIG with one
 * profile, its MIG devices are nvidia.com/gpu, or no GPU runs MIG; mixed: GPUs not in MIG
 * mode are nvidia.com/gpu, MIG devices nvidia.com/mig-<profile>), then time-slicing: each
 * selected device becomes replicas "<id>::0".."<id>::<R-1>" under the entry's resource, then
 * sharing.fractions: each selected whole GPU becomes slices "<uuid>::slice-0".."::slice-<S-1>"
 * (S = slicesPerGpu) under GS_DP_SLICE_RESOURCE (slices set, replicas 0; under `all` GPUs whose
 * units are MIG devices are skipped). Selectors that match no device of the node are counted in
 * n_unmatched, not errors (one ConfigMap may serve many nodes). Resource socket names are
 * "gpusched-<name>.sock" with every character outside [A-Za-z0-9._-] made '-'.
 * @param gpus  n GPU records with index == position (as both backends give); copied.
 * @param out   filled on success, zeroed on failure.
 * @param err   receives a sentence on failure; cap bytes; may be NULL.
 * @return GS_OK; GS_EINVAL (a GPU index out of place; single strategy on a node that does
 *         not fit it; a device selected by two sharing entries; a GPU selected by
 *         sharing.fractions and a time-slicing entry, or a MIG GPU named by sharing.fractions
 *         ("a GPU is in one mode", with both entries' lines); a device ID over 63
 *         characters; a shared or renamed resource that is not of the form domain/name);
 *         GS_ELIMIT (over GS_DP_RESOURCES_MAX resources or GS_DP_DEVICES_MAX devices);
 *         GS_ENOMEM.
 */
int gs_dp_model_build(const struct gs_dp_config *cfg, const struct gs_gpu_info *gpus, uint32_t n,
                      struct gs_dp_model *out, char *err, size_t cap);

/** Releases a model's memory and zeroes it. NULL is a no-op. */
void gs_dp_model_fini(struct gs_dp_model *m);

/**
 * Finds a device of a resource by kubelet ID (binary search).
 * @return the position in r->devices, or -1 when the resource has no such device.
 */
int32_t gs_dp_model_find(const struct gs_dp_resource *r, const char *id);

/** Position of a resource by name, or -1. */
int32_t gs_dp_model_resource(const struct gs_dp_model *m, const char *name);

/* ---- rediscovery ---------------------------------------------------------------------------- */

/**
 * Whether a GPU's facts that shape the model are the same in two readings: its UUID, MIG mode
 * and MIG devices (UUID, profile, memory, start slot, in backend order). NULL equals only NULL.
 */
bool gs_dp_gpu_layout_same(const struct gs_gpu_info *was, const struct gs_gpu_info *now);

/** What a rediscovery does to one resource position (gs_dp_model_carry). */
enum gs_dp_res_change {
    GS_DP_RES_SAME = 0,  /**< the same device IDs in the same order (or still empty) */
    GS_DP_RES_CHANGED,   /**< devices added or removed (or back after being withdrawn): a new
                              list on the same socket */
    GS_DP_RES_ADDED,     /**< a new resource at a new position: a new socket and Register */
    GS_DP_RES_WITHDRAWN, /**< it had devices and the node has none of it now: kept at its
                              position with an empty list (kubelet then counts 0 of it) */
    GS_DP_RES_REPLACED,  /**< every position was taken: one whose resource was already empty
                              before this rediscovery goes to a new resource (its old socket
                              closes, a new one registers) */
};

/**
 * Lays a freshly built model out in the previous model's resource order, so that a position
 * keeps its resource (and the agent its socket) across rediscoveries: each resource of prev
 * stays at its position, with an empty list (name and endpoint kept, n_devices 0) when next
 * has no such resource; resources new in next take the positions after prev's, or, when all
 * GS_DP_RESOURCES_MAX are used, positions whose resource is empty in prev and absent from next.
 * Models after a carry are in this order, not sorted by name.
 * @param prev    the model advertised now; borrowed, unchanged.
 * @param next    built by gs_dp_model_build from the new GPU facts; its resources are moved
 *                in place (owned arrays move with them); unchanged on failure.
 * @param change  GS_DP_RESOURCES_MAX entries: receives what happens at each position of the
 *                carried next (positions past its n_resources are GS_DP_RES_SAME).
 * @param err     receives a sentence on failure; cap bytes; may be NULL.
 * @return GS_OK; GS_EINVAL (NULL arguments); GS_ELIMIT (a new resource finds no position);
 *         GS_ENOMEM.
 */
int gs_dp_model_carry(const struct gs_dp_model *prev, struct gs_dp_model *next,
                      enum gs_dp_res_change *change, char *err, size_t cap);

/**
 * Keeps the devices a container holds when the hardware took them away (an operator
 * re-partitioned a GPU under a pod): each device of prev whose ID is in in_use and in no
 * resource of next is appended to next's resource at the same position (same name), retired
 * (mig -1), so that kubelet sees it Unhealthy rather than gone. Retired devices of prev no
 * longer in in_use are dropped (next, built afresh, lacks them). Call after gs_dp_model_carry.
 * @param in_use    n_in_use device IDs containers hold (kubelet's PodResources); borrowed.
 * @param n_retained  receives how many devices next now holds retired; may be NULL.
 * @return GS_OK; GS_EINVAL (NULL arguments); GS_ELIMIT (over GS_DP_DEVICES_MAX); GS_ENOMEM.
 *         On failure next may hold some of the retained devices: free it.
 */
int gs_dp_model_retain(const struct gs_dp_model *prev, struct gs_dp_model *next,
                       const char *const *in_use, uint32_t n_in_use, uint32_t *n_retained);

/**
 * The withdrawal step between prev and a carried next: prev's positions (n_resources =
 * prev->n_resources), each with the devices of next's resource at that position that prev's
 * resource there lists too (so only removals: every list is a subset of both models'); a
 * GS_DP_RES_REPLACED position keeps prev's empty resource. GPUs, NVLink and device minors are
 * next's. Sent before next, it makes sure no device ID and no GPU is advertised twice.
 * @param change  from gs_dp_model_carry(prev, next, …).
 * @param out     caller storage; filled on success (free with gs_dp_model_fini), zeroed on
 *                failure.
 * @return GS_OK; GS_EINVAL (NULL arguments, next with fewer positions than prev); GS_ENOMEM.
 */
int gs_dp_model_withdrawal(const struct gs_dp_model *prev, const struct gs_dp_model *next,
                           const enum gs_dp_res_change *change, struct gs_dp_model *out);

/* ---- request handlers --------------------------------------------------------------------- */

/** The outcome of one handled call. Caller storage; gs_dp_answer_fini releases it. */
struct gs_dp_answer {
    int status;        /**< enum gs_grpc_status; 0 = OK and data holds the response */
    char message[256]; /**< for a failure, the grpc-message sentence */
    uint8_t *data;     /**< response protobuf bytes (malloc'd; NULL when empty) */
    size_t len;        /**< bytes in data */
};

/** Frees an answer's data and zeroes it. NULL is a no-op. */
void gs_dp_answer_fini(struct gs_dp_answer *a);

/** Most GPUs of one assignment (the scheduler's per-node limit). */
#define GS_DP_ASSIGN_GPUS_MAX 16

/**
 * The scheduler's GPU choice for one container request (pod annotation
 * gpusched.io/assigned-gpus, matched to the call by gs_dp_assign_match in dpkube.h).
 */
struct gs_dp_claim {
    char pod[320];                       /**< "namespace/name" */
    char uid[64];                        /**< metadata.uid */
    uint32_t n_gpus;                     /**< GPUs for this container, = the count asked */
    uint32_t gpu[GS_DP_ASSIGN_GPUS_MAX]; /**< their indices on the node */
    char uuid[GS_DP_ASSIGN_GPUS_MAX][GS_GPU_UUID_LEN]; /**< their UUIDs; "" when the
                                                            assignment named none */
    int32_t milli[GS_DP_ASSIGN_GPUS_MAX];   /**< milli-GPU taken on each: 1000 whole, 1..999 a
                                                 compute share, 0 a memory-only share, slot or
                                                 MIG instance; -1 when the entry says none */
    int64_t mem_mib[GS_DP_ASSIGN_GPUS_MAX]; /**< device memory taken on each, MiB, for a
                                                 memory request; 0 when the entry says none */
    char mig_profile[GS_DP_ASSIGN_GPUS_MAX][GS_GPU_PROFILE_LEN]; /**< the MIG instance's
                                                                      profile ("1g.18gb");
                                                                      "" for other kinds: the
                                                                      entry is a MIG entry iff
                                                                      this is set */
    int32_t mig_start[GS_DP_ASSIGN_GPUS_MAX]; /**< the MIG instance's start slot 0..7 (NVML
                                                   placement.start), -1 for the annotation's
                                                   null: any instance of the profile on that
                                                   GPU; read only for a MIG entry (-1
                                                   otherwise from the table) */
};

/** What became of a claim in one call (told through gs_dp_view.on_claim). */
struct gs_dp_claim_outcome {
    const struct gs_dp_claim *claim; /**< the claim (borrowed for the callback); NULL only for an
                                          Allocate of gpusched.io/gpu-slice devices that no claim
                                          answers: the container got the GPUs of the slices
                                          kubelet handed, why says so (a warning to log) */
    bool allocate;                   /**< false: GetPreferredAllocation; true: Allocate */
    bool honoured;                   /**< the devices are those of the claimed GPUs */
    const char *why;                 /**< when not honoured: a sentence; "" otherwise */
    const char *ids;                 /**< the device IDs answered or allocated, comma-joined */
    bool gave_assigned;              /**< Allocate of slices of other GPUs than claimed (not
                                          honoured): the container got the claim's GPUs, not
                                          the slices' (false when one of them could not be
                                          given: why then says which and why) */
};

/**
 * Finds the claim of a container request: count devices of resource. Returns GS_OK with out
 * filled, GS_ENOENT when no pod's assignment asks for it.
 */
typedef int (*gs_dp_claim_fn)(void *ctx, const char *resource, uint32_t count,
                              struct gs_dp_claim *out);

/** Receives a claim's outcome; for Allocate, the agent marks the claim's GPUs handed out. */
typedef void (*gs_dp_claim_outcome_fn)(void *ctx, const struct gs_dp_claim_outcome *o);

/** What the handlers look at besides the request. All borrowed for the call. */
struct gs_dp_view {
    const struct gs_dp_config *cfg;     /**< sharing flags, list and ID strategies */
    const struct gs_dp_model *model;    /**< the node's devices */
    uint32_t resource;                  /**< which resource's socket the call came on */
    const enum gs_health_state *health; /**< per GPU index, model->n_gpus entries */
    gs_dp_claim_fn claim;               /**< NULL: no assignments to honour */
    gs_dp_claim_outcome_fn on_claim;    /**< NULL: outcomes are not reported */
    void *claim_ctx;                    /**< passed to both */
};

/**
 * GetDevicePluginOptions: pre_start_required and get_preferred_allocation_available, both
 * true. @return GS_OK (answer filled); GS_ENOMEM.
 */
int gs_dp_handle_options(struct gs_dp_answer *out);

/**
 * The full ListAndWatchResponse of a resource: every device with its GPU's health
 * ("Healthy"/"Unhealthy") and its NUMA node as topology (none when unknown).
 * @return GS_OK; GS_ENOMEM; GS_ERANGE (over GS_GRPC_MAX_MESSAGE_BYTES).
 */
int gs_dp_handle_list(const struct gs_dp_view *v, struct gs_dp_answer *out);

/**
 * GetPreferredAllocation, per container request: must_include first (in the given order),
 * then, when view.claim answers a claim of allocation_size devices of the resource and each
 * claimed unit (a GPU, or a slice of it for gpusched.io/gpu-slice; for a MIG entry the MIG
 * device of that GPU with that profile and start slot, any instance of the profile for start -1)
 * is offered, Healthy and the same GPU as the claim's UUID, its devices; else (the reason
 * told to view.on_claim) a deterministic choice among the available IDs. Whole GPUs: the core's
 * gs_topo_pick() (include/gpusched/topo.h, the scheduler's whole-GPU choice) on the model's
 * NVLink masks and NUMA nodes: the set with the most NVLink links inside it, then the most GPUs
 * on one NUMA node, then the fewest NVLink links to available GPUs left outside (leaving
 * connected groups whole), then the lowest indices; exact up to 16 candidates, greedy beyond.
 * Replicas and MIG devices are packed by the unit whose capacity they share (the GPU;
 * for replicas of a MIG device, that device): units already holding the container's devices
 * first, then the same NUMA node, then a unit that fits the rest of the request, then units
 * already partly in use by others, then shared slots before whole GPUs, then the fewest free
 * slots (best fit), the lowest index. IDs the resource does not know are never chosen (except from
 * must_include). A request that cannot be filled gets the best shorter list.
 * @return GS_OK with status OK, or status INVALID_ARGUMENT for bytes that are not a
 *         PreferredAllocationRequest or more must_include IDs than allocation_size;
 *         GS_ENOMEM.
 */
int gs_dp_handle_preferred(const struct gs_dp_view *v, const uint8_t *req, size_t len,
                           struct gs_dp_answer *out);

/**
 * Allocate, per container request: NVIDIA_VISIBLE_DEVICES (the distinct GPU/MIG devices
 * behind the IDs, in request order, named by UUID or index; "void" when the envvar list
 * strategy is off), device nodes /dev/nvidia<i> of each GPU and /dev/nvidiactl,
 * /dev/nvidia-uvm, /dev/nvidia-uvm-tools with permissions "rw", annotations
 * gpusched.io/resource, gpusched.io/devices (the IDs) and gpusched.io/gpus (the UUIDs), CDI
 * names nvidia.com/gpu=<uuid or index> when the cdi-cri list strategy is on, and for replicas
 * GPUSCHED_GPU_REPLICAS / annotation gpusched.io/replicas ("<uuid>=<k>/<R>,…") and
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (100 k / R, the smallest over the GPUs, at least 1).
 * With a claim (view.claim answers one for the container's count of the resource, looked up
 * after every container is built, in request order): CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m for the
 * i-th unit of NVIDIA_VISIBLE_DEVICES whose claim entry has mem_mib, and CUDA_DEVICE_SM_LIMIT
 * (percent: the smallest milli of 1..999 among the entries, / 10, at least 1), HAMi's names for
 * its in-container limiter; each unit takes the entry of the same GPU (MIG: GPU and start), else
 * the next one left. Then view.on_claim hears whether the units kubelet chose are the claim's
 * (as multisets of GPU, or GPU and MIG start; a MIG entry of start -1 matches any instance of its
 * profile on its GPU), with the reason when not ("kubelet allocated GPUs 0,1, the scheduler
 * assigned 2,5"; "kubelet allocated MIG instances 6:1g.18gb@0, the scheduler assigned
 * 6:1g.18gb@3"). Kubelet's choice stands, except for gpusched.io/gpu-slice devices (tickets of a
 * fractions GPU, which kubelet picks without knowing the assignment): slices of other GPUs than
 * claimed give the container the claim's GPUs (NVIDIA_VISIBLE_DEVICES, device nodes, CDI names
 * and annotation gpusched.io/gpus of those; gpusched.io/devices keeps kubelet's IDs; outcome
 * gave_assigned) when each is on the node, the same UUID, Healthy and has a slice device here;
 * else, and for slices no claim answers (outcome claim NULL), the GPUs of the slices kubelet
 * handed. A refused call reports nothing.
 * @return GS_OK with status OK; or status INVALID_ARGUMENT (undecodable request, a container
 *         with no IDs or an ID twice, an ID the resource does not have, more than one replica
 *         under failRequestsGreaterThanOne), FAILED_PRECONDITION (an ID on an Unhealthy GPU);
 *         GS_ENOMEM.
 */
int gs_dp_handle_allocate(const struct gs_dp_view *v, const uint8_t *req, size_t len,
                          struct gs_dp_answer *out);

/**
 * PreStartContainer: nothing to prepare; an empty response for any decodable request.
 * @return GS_OK (status OK or INVALID_ARGUMENT); GS_ENOMEM.
 */
int gs_dp_handle_prestart(const uint8_t *req, size_t len, struct gs_dp_answer *out);

/* ---- the agent ---------------------------------------------------------------------------- */

/** Receives one log line (no trailing newline): the project's one log sink
 * (include/gpusched/log.h). Called on the agent's loop thread, and on its Kubernetes thread
 * when gs_dp_agent_options.kube is set: it must be thread-safe then. */
typedef gs_log_fn gs_dp_log_fn;

/** How to start an agent. */
struct gs_dp_agent_options {
    const struct gs_dp_config *cfg;    /**< copied */
    struct gs_gpu_backend *backend;    /**< borrowed; used only by the agent's loop thread until
                                            gs_dp_agent_free; the caller closes it after */
    const char *node_name;             /**< Hostname label of metrics; copied; NULL = "" */
    const struct gs_kube_config *kube; /**< the API server to publish the inventory on (Node
                                            annotation gpusched.io/gpus) and to read pod
                                            assignments from; borrowed for gs_dp_agent_new;
                                            NULL: no Kubernetes side (node_name then may be "") */
    gs_dp_log_fn log;                  /**< NULL: lines go to stderr; called on the loop thread,
                                            and on the Kubernetes thread when kube is set */
    void *log_ctx;                     /**< passed to log */
};

struct gs_dp_agent;

/**
 * Reads the GPUs, builds the model, creates the health machine and, unless metrics_addr is
 * "", starts the metrics server (so a bad address fails here). Serves nothing yet. A GPU that
 * cannot be read (lost: no handle, GPU_IS_LOST, any error of gs_gpu_info) does not fail it:
 * it is logged, starts Unhealthy (reason lost), and is left out of the device list when its
 * UUID is unknown.
 * @param out  receives the agent; free with gs_dp_agent_free.
 * @param err  receives a sentence on failure; cap bytes; may be NULL.
 * @return GS_OK; GS_EINVAL (bad options, model errors, bad metrics address, a socket path
 *         over 107 bytes); GS_EIO (the backend cannot count its GPUs, the metrics port cannot
 *         be bound: the sentence in err says why, "bind: Address already in use");
 *         GS_ENOMEM.
 */
int gs_dp_agent_new(const struct gs_dp_agent_options *opt, struct gs_dp_agent **out, char *err,
                    size_t cap);

/**
 * Runs the agent until gs_dp_agent_stop: listens on one socket per resource in the plugin
 * directory, registers each with kubelet, serves the DevicePlugin methods, watches the
 * directory for kubelet restarts (re-creating sockets and registering again), polls the
 * backend's events every 100 ms into the health machine and pushes the full device list to
 * every open ListAndWatch stream of every resource whose devices changed health, samples every
 * GPU every refresh_ms (the samples feed health too) and refreshes metrics and pod attribution
 * then, registers exactly once per kubelet.sock file, and clears the health of the GPUs an
 * operator names in GS_DP_CLEAR_HEALTH_FILE. Every cfg.rediscover_ms (unless 0) it reads every
 * GPU's facts again; when a MIG layout changed (or a GPU lost at start answers with its UUID)
 * it builds the new model (gs_dp_model_build, laid out by gs_dp_model_carry), sends the
 * withdrawal step (gs_dp_model_withdrawal) to the streams whose lists lose devices, and 200 ms
 * later the new lists, sockets and Registers for new resources, and the inventory; a withdrawn
 * resource keeps its socket with an empty list; a model that cannot be built is logged and the
 * current one stays. Makes the plugin directory when it is missing and its parent exists.
 * Call once, from one thread.
 * @return GS_OK after a stop; GS_EIO when the plugin directory cannot be watched or a socket
 *         cannot be created at start (reason logged); GS_ENOMEM.
 */
int gs_dp_agent_run(struct gs_dp_agent *a);

/** Makes gs_dp_agent_run return soon. Async-signal-safe and thread-safe. */
void gs_dp_agent_stop(struct gs_dp_agent *a);

/** The bound metrics port, 0 when metrics are off. */
uint16_t gs_dp_agent_metrics_port(const struct gs_dp_agent *a);

/**
 * The model the agent advertises. A rediscovery replaces it on the loop thread: read it before
 * gs_dp_agent_run or after it returned; valid until the next rediscovery or gs_dp_agent_free.
 */
const struct gs_dp_model *gs_dp_agent_model(const struct gs_dp_agent *a);

/**
 * Stops the metrics server and helper threads, closes every socket (removing the files) and
 * frees. Does not close the backend. NULL is a no-op.
 */
void gs_dp_agent_free(struct gs_dp_agent *a);

#endif /* GPUSCHED_DEVPLUGIN_H */
