/*
 * GPU metrics for Prometheus, with the names and labels of NVIDIA's dcgm-exporter, so that
 * existing dashboards and alerts keep working, plus the agent's own health metrics.
 *
 * Series (text exposition format 0.0.4):
 *   DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_GPU_TEMP,
 *   DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK,
 *   DCGM_FI_DEV_XID_ERRORS (value of the last XID) and DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, labelled
 *   gpu, UUID, device ("nvidia0"), modelName, Hostname, and container, namespace, pod when the
 *   attribution table maps the GPU to a pod. Every GPU has its own series without pod
 *   labels; a GPU used by pods (time-slicing, MIG) gets one more series per pod, each with
 *   the GPU's values (dcgm-exporter issues #151 and #307 show only one of them; per-process
 *   values are not read yet). A pod series on time-sliced replicas gets replica="0,2" (the
 *   replicas it holds, ascending); one on a MIG device GPU_I_ID (when known) and
 *   GPU_I_PROFILE ("1g.18gb").
 *   A field the backend could not read is left out, not reported as 0.
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
};

/** What a scrape shows. The arrays are borrowed for the duration of a call. */
struct gs_exporter_snapshot {
    char hostname[256];                  /**< value of the Hostname label */
    uint32_t n_gpus;                     /**< entries in gpus, <= GS_GPU_MAX */
    const struct gs_exporter_gpu *gpus;  /**< by position; may be NULL when n_gpus is 0 */
    uint32_t n_attr;                     /**< entries in attr, <= GS_EXPORTER_ATTR_MAX */
    const struct gs_exporter_attr *attr; /**< may be NULL when n_attr is 0 */
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
 * clock; one allocation of scratch space for the attribution table, none per line.
 * @return GS_OK; GS_ELIMIT (out's maximum reached; out holds a truncated prefix);
 *         GS_ENOMEM; GS_EINVAL (NULL, or counts above their maxima).
 * Thread-safe for distinct buffers.
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
