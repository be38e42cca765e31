/*
 * GPU metrics for Prometheus, with the names and labels of NVIDIA's dcgm-exporter, so that
 * existing dashboards and alerts keep working, plus the agent's own health metrics.
 *
 * Series (text exposition format 0.0.4):
 *   DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_GPU_TEMP,
 *   DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK,
 *   DCGM_FI_DEV_XID_ERRORS (value of the last XID) and DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, labelled
 *   gpu, UUID, device ("nvidia0"), modelName, Hostname. Every GPU has its own series, pods or
 *   not, with the device's values. A MIG device with its own values (gs_exporter_gpu.mig) has
 *   its own DCGM_FI_DEV_FB_USED and, where it has one (GPM), DCGM_FI_DEV_GPU_UTIL series: the
 *   GPU's labels plus GPU_I_ID and GPU_I_PROFILE, no pod labels.
 * Pod series (issue 9, dcgm-exporter #587): only DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED,
 *   and only for a GPU whose per-process values were read (gs_exporter_gpu.have_procs). Each
 *   carries the pod's own measured value, the sum over its processes (gs_exporter_podval),
 *   never the device's: on a time-sliced GPU the pod series add up to the device's. The
 *   render keeps the sums honest: when the pods' utilisation adds up to more than the device's
 *   plus GS_EXPORTER_UTIL_TOLERANCE_PCT points (the two are sampled over different windows),
 *   or their memory to more than the device's FB used, every pod value of that GPU is scaled
 *   by device/sum (rounded down). Device-only families (power, temperature, clocks, XID, ECC,
 *   FB free) have no pod series: a pod does not draw its own watts. A GPU without per-process
 *   values has no pod series at all rather than copies of the device's value.
 *   MIG (dcgm-exporter #587: MIG pods got the whole GPU's values): a value whose processes
 *   ran in a MIG GPU instance the GPU lists (info.mig with that gi_id) is bounded by that
 *   instance's own values (gs_exporter_gpu.mig), never the GPU's: its memory by the
 *   instance's memory used (the GPU's when the instance's is not known); its utilisation only
 *   where the instance has one (NVML's GPM, Hopper and later): the processes' sum, bounded by
 *   the instance's, or, when no process there reports one and the value is the instance's
 *   only one, the instance's own. Without an instance utilisation a MIG pod has no
 *   utilisation series at all.
 *   Labels of a pod series: the GPU's, then GPU_I_ID and GPU_I_PROFILE when the processes ran
 *   in a MIG GPU instance the GPU lists, then either
 *   - container, namespace, pod, pod_uid, container_id (when every value joined names the
 *     same one) and replica="0,2" (the time-slicing replicas it
 *     holds, ascending) when the value's pod name matches an attribution row of that GPU
 *     (kubelet's PodResources; the same pod, namespace and container mapped twice give one
 *     series), or
 *   - container, namespace and pod when known (the agent's watch of its node's pods names
 *     the cgroup's UID, podnames.h; container only when its runtime ID is in the pod's
 *     status), then pod_uid and container_id (the cgroup's; container_id "" for a process in
 *     the pod's own cgroup), when no row matches.
 *   A field the backend could not read is left out, not reported as 0.
 * Who holds a GPU (kubelet's PodResources), measured or not:
 *   gpusched_gpu_pod_info{<GPU labels>,[GPU_I_ID,]GPU_I_PROFILE?,container,namespace,pod,
 *   replica?} 1, one per attribution row that maps to a GPU (repeats joined), so that the
 *   names stay visible where the value series carry only a pod_uid.
 * Own series (one per GPU, no pod labels):
 *   gpusched_gpu_health{reason="none|xid|ecc_dbe|lost"} (1 Healthy, 0 Unhealthy),
 *   gpusched_gpu_reset_required (1 while an Unhealthy GPU waits for a reset or an operator),
 *   gpusched_gpu_xid_total{xid="79"} (every XID
 *   by code; xid="other" past the per-GPU code table), and
 *   gpusched_gpu_health_transitions_total{to="unhealthy"|"healthy"}.
 *
 * An attribution entry maps a device id, as kubelet's PodResources API reports it, to a
 * pod. A device id matches a GPU when it is the GPU's UUID, "<GPU UUID>::<n>" (a time-slicing
 * replica), one of the GPU's MIG UUIDs (optionally with "::<n>"), "nvidia<index>" or the
 * decimal index. The same pod, namespace and container mapped twice to one GPU (two replicas)
 * give one series.
 *
 * The HTTP side (libmicrohttpd, its own thread) serves GET /metrics ("text/plain;
 * version=0.0.4; charset=utf-8") and GET /healthz (200 "ok"), rendering from the last
 * snapshot handed to gs_exporter_update(). Rendering writes into one bounded buffer that is
 * reused from scrape to scrape: no allocation per line.
 */
#ifndef GPUSCHED_EXPORTER_H
#define GPUSCHED_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/gpu.h"
#include "gpusched/health.h"

/** Most attribution entries in a snapshot. */
#define GS_EXPORTER_ATTR_MAX 1024
/** Most per-pod values in a snapshot (a pod on two GPUs has two). */
#define GS_EXPORTER_PODVAL_MAX 1024
/** Points by which the pods' utilisation may exceed the device's before it is scaled down. */
#define GS_EXPORTER_UTIL_TOLERANCE_PCT 5
/** Default limit of one rendered scrape, bytes. */
#define GS_EXPORTER_DEFAULT_MAX_BYTES ((size_t)16 * 1024 * 1024)

/** A growable text buffer with a hard maximum (curl's "dynbuf" idea). Caller storage. */
struct gs_textbuf {
    char *data; /**< len bytes of text, NUL-terminated when data != NULL */
    size_t len; /**< bytes used, NUL excluded */
    size_t cap; /**< bytes allocated */
    size_t max; /**< most bytes len may reach */
};

/** Prepares an empty buffer that may grow to max_bytes (> 0). Allocates nothing. */
void gs_textbuf_init(struct gs_textbuf *b, size_t max_bytes);

/** Empties the buffer, keeping its allocation for reuse. */
void gs_textbuf_reset(struct gs_textbuf *b);

/** Frees the buffer's memory and empties it. NULL is a no-op. */
void gs_textbuf_fini(struct gs_textbuf *b);

/**
 * Appends n bytes.
 * @return GS_OK; GS_ELIMIT (would pass max: nothing appended); GS_ENOMEM (nothing appended).
 */
int gs_textbuf_append(struct gs_textbuf *b, const char *s, size_t n);

/** One row of the attribution table: a kubelet device id and the container holding it. */
struct gs_exporter_attr {
    char device_id[GS_GPU_UUID_LEN + 16]; /**< GPU UUID, "<UUID>::<n>", MIG UUID, "nvidiaN" */
    char pod[254];                        /**< pod name */
    char namespace_name[64];              /**< pod namespace */
    char container[64];                   /**< container name */
};

/**
 * What one pod (one container of it, when the cgroup says which) measurably uses on one GPU:
 * the sums over its processes there (gs_gpu_processes). Filled by the agent's loop; plain
 * value record, fields ordered by size.
 */
struct gs_exporter_podval {
    uint64_t mem_mib;        /**< Σ of the processes' GPU memory, MiB; valid when has_mem */
    uint32_t gpu;            /**< position in the snapshot's gpus (not the GPU index) */
    uint32_t util_pct;       /**< Σ of the processes' SM utilisation, % (raw: may pass 100
                                  when NVML's windows overlap; the render bounds the sums) */
    uint32_t gi_id;          /**< MIG GPU instance of the processes; valid when has_gi_id */
    bool has_mem;            /**< some process reported its memory */
    bool has_util;           /**< some process reported its utilisation */
    bool has_gi_id;          /**< the processes ran in MIG GPU instance gi_id */
    char pod_uid[64];        /**< metadata.uid from the cgroup path */
    char container_id[72];   /**< runtime's container ID from the cgroup path; "" unknown */
    char pod[254];           /**< pod name; "" when not known (then pod_uid labels it) */
    char namespace_name[64]; /**< pod namespace; "" when not known */
    char container[64];      /**< container name; "" when not known (a match then ignores it) */
};

/** One GPU of a snapshot. */
struct gs_exporter_gpu {
    struct gs_gpu_info info;             /**< static facts (index, UUID, model, MIG devices) */
    bool have_sample;                    /**< false when the GPU did not answer: no DCGM series */
    struct gs_gpu_sample sample;         /**< values; fields outside sample.valid are left out */
    bool have_health;                    /**< health and counters below are set */
    enum gs_health_state health;         /**< current health */
    enum gs_health_reason health_reason; /**< why Unhealthy (gs_health_reason_of); 0 Healthy */
    bool needs_reset;                    /**< Unhealthy until seen reset or cleared */
    struct gs_health_counters counters;  /**< XID and transition counters */
    bool have_procs; /**< the GPU's processes were read this period: the snapshot's podvals
                          for it are its pods' values (none: no process); false: no pod
                          series for the GPU */
    uint32_t n_mig;  /**< entries used in mig (0: no MIG device's own values) */
    struct gs_gpu_mig_sample mig[GS_GPU_MIG_MAX]; /**< the MIG devices' own values this period
                                                       (gs_gpu_mig_sample), by GPU instance id */
};

/** What a scrape shows. The arrays are borrowed for the duration of a call. */
struct gs_exporter_snapshot {
    char hostname[256];                      /**< value of the Hostname label */
    uint32_t n_gpus;                         /**< entries in gpus, <= GS_GPU_MAX */
    const struct gs_exporter_gpu *gpus;      /**< by position; may be NULL when n_gpus is 0 */
    uint32_t n_attr;                         /**< entries in attr, <= GS_EXPORTER_ATTR_MAX */
    const struct gs_exporter_attr *attr;     /**< may be NULL when n_attr is 0 */
    uint32_t n_podval;                       /**< entries in podval, <= GS_EXPORTER_PODVAL_MAX */
    const struct gs_exporter_podval *podval; /**< per-pod measured values; entries whose gpu
                                                  is >= n_gpus or not have_procs are ignored;
                                                  may be NULL when n_podval is 0 */
    bool have_assign;            /**< render the assignment counters below (the agent follows
                                      the scheduler's GPU choice: it has a Kubernetes config) */
    uint64_t assign_as_assigned; /**< Allocates of the GPUs the scheduler assigned */
    uint64_t assign_mismatch;    /**< Allocates where kubelet handed other GPUs than assigned
                                      (kubelet decided; for gpusched.io/gpu-slice the container
                                      got the assigned GPUs all the same) */
    uint64_t assign_fallbacks;   /**< GetPreferredAllocation answers that could not follow the
                                      assignment (a GPU Unhealthy, not offered, not here) */
};

/**
 * Renders a snapshot in Prometheus text format 0.0.4, appending to out. Pure: no I/O, no
 * clock; one allocation of scratch space for the attribution table and the per-pod values,
 * none per line. A per-pod value counts in one series only (the first attribution row it
 * matches, else its own pod_uid series), so the pod series of a GPU sum to the scaled total.
 * @return GS_OK; GS_ELIMIT (out's maximum reached; out holds a truncated prefix);
 *         GS_ENOMEM; GS_EINVAL (NULL, counts above their maxima, or an array NULL with a
 *         count above 0). Thread-safe for distinct buffers.
 */
int gs_exporter_render(const struct gs_exporter_snapshot *s, struct gs_textbuf *out);

/**
 * Escapes a label value for the text format (backslash, double quote and line feed) and
 * appends it to out. @return as gs_textbuf_append().
 */
int gs_exporter_escape_label(struct gs_textbuf *out, const char *value);

struct gs_exporter;

/**
 * Creates an exporter holding an empty snapshot; no thread, no socket yet.
 * @param max_bytes  limit of one rendered scrape (0: GS_EXPORTER_DEFAULT_MAX_BYTES); a scrape
 *                   over it is answered 500.
 * @return GS_OK; GS_ENOMEM; GS_EINVAL (out NULL).
 */
int gs_exporter_new(size_t max_bytes, struct gs_exporter **out);

/**
 * Replaces the snapshot that scrapes render (a deep copy, taken under the exporter's lock).
 * @return GS_OK; GS_EINVAL (counts above their maxima; the old snapshot stays); GS_ENOMEM
 *         (the old snapshot stays). Thread-safe against the HTTP thread.
 */
int gs_exporter_update(struct gs_exporter *e, const struct gs_exporter_snapshot *s);

/**
 * Renders the current snapshot, as a scrape would, into out (reset first).
 * @return as gs_exporter_render(). Thread-safe.
 */
int gs_exporter_scrape(struct gs_exporter *e, struct gs_textbuf *out);

/**
 * Starts serving /metrics and /healthz on its own thread (libmicrohttpd internal polling).
 * Bounds for clients that misbehave (any pod can reach the port): 256 connections, at most 8
 * from one address, each closed after 5 s without a byte and limited to 32 KiB of request;
 * HTTP/1.1 keep-alive and pipelining as libmicrohttpd does them.
 * @param bind_addr  numeric IPv4 or IPv6 address ("127.0.0.1", "0.0.0.0", "::").
 * @param port       TCP port; 0 picks a free one.
 * @param port_out   receives the bound port; may be NULL.
 * @return GS_OK; GS_EINVAL (bad address, already started); GS_EEXIST (the port is taken);
 *         GS_EIO (cannot bind or start otherwise). On failure gs_exporter_error() says why
 *         ("bind: Address already in use").
 */
int gs_exporter_start(struct gs_exporter *e, const char *bind_addr, uint16_t port,
                      uint16_t *port_out);

/** Why the last gs_exporter_start failed ("" none). Valid until the next start or free. */
const char *gs_exporter_error(const struct gs_exporter *e);

/** Stops serving (joins the HTTP thread). No-op when not started. */
void gs_exporter_stop(struct gs_exporter *e);

/** Stops and frees. NULL is a no-op. */
void gs_exporter_free(struct gs_exporter *e);

#endif /* GPUSCHED_EXPORTER_H */
