/*
 * Readers for cluster traces in the layout of Alibaba's cluster-trace-gpu-v2023 ("openb"):
 * a node list (`sn,cpu_milli,memory_mib,gpu,model`) and a pod list
 * (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
 * deletion_time,scheduled_time]`; the multigpu* files carry only the first five columns).
 *
 * Columns are found by their header names, so any column order is accepted. RFC 4180 quoting,
 * CRLF line ends and a UTF-8 byte-order mark are read (parsing is libcsv's). Every value is
 * checked; the first problem stops the read with a diagnostic naming file, line, column and
 * field, and nothing is returned. Lines are limited to GS_TRACE_LINE_MAX bytes.
 *
 * The rules, beyond the column lists below:
 * - Header names match exactly (case and spaces count). A repeated known name is an error at
 *   its column; a missing required one is an error on the header line, column 0. An unknown
 *   name is an error in a node list; in a pod list it is a user's own column, ignored and
 *   named in gs_trace_pods.ignored_columns (its fields still count for the row's width). A file
 *   has at most 64 columns ("too many columns: at most 64").
 * - Numbers are plain decimal: one or more ASCII digits, nothing else ("+1", " 1", "1.0",
 *   "1e3" and "" are errors; leading zeros are fine), at most INT64_MAX. "-N" is reported as a
 *   negative value. Only the three time columns may be empty (read as -1).
 * - Text fields are taken as they are (no trimming; quotes removed). An empty name, and a NUL
 *   byte in any field, are errors. qos and pod_phase are not checked against a list.
 * - Node names must be unique; pod names are not checked.
 * - Blank lines (nothing but a line end) are allowed only at the end of the file.
 * - A record, with any line breaks inside its quoted fields, is also limited to
 *   GS_TRACE_LINE_MAX bytes, so an unclosed quote cannot buffer the rest of a file.
 *
 * Diagnostics (struct gs_diag): `line` is the physical line (a line ends at LF, at a lone CR,
 * and once at CR LF) on which the record starts, so a quoted line break moves later
 * records down. Exceptions: a quoting error ('"' inside an unquoted field, text after a
 * closing quote) and an over-long line name the line of the offending byte. `column` is the
 * 1-based field number, 0 when the problem is not one field (long line or record, blank
 * line). Checks that tie num_gpu to gpu_milli are reported at gpu_milli. Problems with the
 * whole input (empty file, header only, too big, unreadable) have line 0. Messages:
 *   "empty file: no header", "no rows after the header", "unknown column 'x'",
 *   "duplicate column 'x' (also column N)", "missing required column 'x' in the header",
 *   "missing column: the row has K fields, the header N" (at column K+1),
 *   "extra column: the row has K fields, the header N" (at column N+1, field ""),
 *   "not a whole number: 'v'", "empty value; a whole number is required", "negative value -v",
 *   "value v is out of range (over 9223372036854775807)", "line longer than 65536 bytes",
 *   "record longer than 65536 bytes (an unclosed quote?)", "blank line before the end of the
 *   file", "bad quoting: ...", "quoted field not closed at the end of the file",
 *   "cannot open: <strerror>", "cannot read: <strerror>", "file is N bytes, over the limit of M".
 *
 * Thread-safety: the readers keep no global state; separate calls may run concurrently.
 */
#ifndef GPUSCHED_TRACE_H
#define GPUSCHED_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "gpusched/cluster.h" /* struct gs_gpu_mode, struct gs_pod_req */
#include "gpusched/diag.h"    /* struct gs_diag, gs_diag_format */

/**
 * Longest accepted line, bytes, its line end (LF or CRLF) not counted; also the longest
 * record. A longer one is an error, not a reason to allocate more.
 */
#define GS_TRACE_LINE_MAX 65536
/** Largest accepted trace file, bytes. */
#define GS_TRACE_FILE_MAX (512u * 1024u * 1024u)

/** One node of a node list. */
struct gs_trace_node {
    char *name;          /**< `sn`; owned by the list */
    int64_t cpu_milli;   /**< CPU capacity, milli-cores */
    int64_t mem_mib;     /**< memory capacity, MiB */
    uint32_t gpu_count;  /**< GPUs, 0..16 */
    char *model;         /**< GPU model; "" iff gpu_count == 0; owned by the list */
    int64_t gpu_mem_mib; /**< optional `gpu_mem_mib`: device memory per GPU, MiB; 0 unknown */
    struct gs_gpu_mode gpu_mode; /**< optional `gpu_mode`, the mode of every GPU of the node;
                                      fractions (GS_GPU_SHARE_MILLI) when absent or empty */
};

/** A node list. Caller storage: zero it or let a reader fill it; release with _fini. */
struct gs_trace_nodes {
    struct gs_trace_node *v; /**< n entries, file order */
    uint32_t n;
    int has_modes; /**< 1 when the header has a `gpu_mode` column (reports then show modes) */
};

/** One pod of a pod list. */
struct gs_trace_pod {
    char *name;        /**< owned by the list */
    int64_t cpu_milli; /**< CPU request, milli-cores */
    int64_t mem_mib;   /**< memory request, MiB */
    uint32_t num_gpu;  /**< GPUs, 0..16 */
    int32_t gpu_milli; /**< milli-GPU per GPU: 0 iff num_gpu == 0; < 1000 only if num_gpu == 1 */
    char *gpu_spec;    /**< allowed models joined by '|', "" for any; owned */
    char *qos;         /**< as in the file (openb: "LS", "BE", "Burstable", "Guaranteed");
                            "" when absent or empty; owned */
    char *phase;       /**< pod_phase as in the file, "" when absent or empty; owned */
    int64_t creation_time_s;  /**< seconds from trace start; -1 when absent or empty */
    int64_t deletion_time_s;  /**< -1 when absent or empty */
    int64_t scheduled_time_s; /**< -1 when absent or empty (never scheduled) */
    /* Optional sharing columns; at most one of the three is set on a row. */
    int64_t gpu_mem_mib;               /**< `gpu_mem_mib`: memory request per GPU, MiB (0 none);
                                            num_gpu GPUs, gpu_milli 0..999 compute each */
    char mig_profile[GS_MIG_NAME_MAX]; /**< `mig_profile`: MIG profile ("" none); num_gpu is
                                            the instance count, gpu_milli 0 */
    uint8_t timeslice_slots;           /**< `timeslice_slots`: time-sliced slots (0 none);
                                            num_gpu and gpu_milli 0 */
};

/** A pod list. Caller storage: zero it or let a reader fill it; release with _fini. */
/** Room for the names of a pod list's ignored columns, truncated with "..." beyond it. */
#define GS_TRACE_IGNORED_MAX 256

struct gs_trace_pods {
    struct gs_trace_pod *v; /**< n entries, file order */
    uint32_t n;
    int has_times;   /**< 1 when the file has all three time columns (any one present is
                          still read into its member) */
    int has_sharing; /**< 1 when the header has any of gpu_mem_mib, mig_profile,
                          timeslice_slots */
    /** Header names that are not pod-list columns, comma-separated ("" when none): a user's own
     *  columns are ignored, and the caller names them in one note. */
    char ignored_columns[GS_TRACE_IGNORED_MAX];
};

/**
 * Reads a node list file.
 * @param path  file to read.
 * @param out   on GS_OK receives the nodes (caller frees with gs_trace_nodes_fini()); on error
 *              it is left empty.
 * @param diag  filled on error; may be NULL.
 * @return GS_OK; GS_EIO (cannot open/read, over GS_TRACE_FILE_MAX); GS_EPARSE (malformed:
 *         missing/extra/unknown/repeated column, bad quoting, non-numeric, negative or
 *         overflowing value, more than 16 GPUs, GPU node without model or model without GPUs,
 *         empty or duplicate name, empty file, header only, blank line before the end, line
 *         or record too long); GS_ENOMEM. The file is read in chunks, never whole.
 */
int gs_trace_read_nodes(const char *path, struct gs_trace_nodes *out, struct gs_diag *diag);

/**
 * As gs_trace_read_nodes() on a buffer (borrowed; need not be NUL-terminated; a buffer over
 * GS_TRACE_FILE_MAX gives GS_EIO). `name` is copied into diagnostics; NULL gives "".
 */
int gs_trace_parse_nodes(const char *buf, size_t len, const char *name, struct gs_trace_nodes *out,
                         struct gs_diag *diag);

/**
 * Reads a pod list file (either layout).
 * @return as gs_trace_read_nodes(), plus GS_EPARSE for gpu_milli over 1000, a shared request
 *         (gpu_milli < 1000) with num_gpu > 1, gpu_milli without GPUs or GPUs without gpu_milli.
 */
int gs_trace_read_pods(const char *path, struct gs_trace_pods *out, struct gs_diag *diag);

/** As gs_trace_read_pods() on a buffer, as gs_trace_parse_nodes() does. */
int gs_trace_parse_pods(const char *buf, size_t len, const char *name, struct gs_trace_pods *out,
                        struct gs_diag *diag);

/**
 * Orders the indices of a node list by node name (strcmp; equal names keep file order), in
 * O(n log n).
 * @param nodes  n nodes (borrowed).
 * @param order  receives n indices (caller storage).
 * @return GS_OK or GS_ENOMEM (order untouched).
 */
int gs_trace_nodes_order_by_name(const struct gs_trace_node *nodes, uint32_t n, uint32_t *order);

/**
 * Reads one `gpu_mode` value (docs/trace-format.md): "" or `fractions`, `whole`,
 * `replicas:N` (N 1..255), or `mig:<profile>[@start]+...`. A MIG layout's missing starts are
 * found by a search (see src/sim/trace_mode.c) and the layout is then judged by
 * gs_mig_layout_check() for the MIG model gs_mig_model_find(model) names.
 * @param text    the value, len bytes, borrowed (need not be NUL-terminated).
 * @param model   the node's GPU model name; borrowed; for MIG it must be in the MIG table.
 * @param out     receives the mode (fractions on failure).
 * @param reason  receives a sentence on failure ("" on success); may be NULL; cut to cap.
 * @return GS_OK or GS_EINVAL. Pure.
 */
int gs_trace_parse_gpu_mode(const char *text, size_t len, const char *model,
                            struct gs_gpu_mode *out, char *reason, size_t cap);

/**
 * Turns a pod of a pod list into a core request of its kind: MIG when mig_profile is set
 * (mig_count = num_gpu), TIMESLICE when timeslice_slots is, else MILLI or MEMORY.
 * @param model_mask  the pod's allowed models (gs_cluster_model_mask() of its gpu_spec).
 * @param out         receives the request (filled even when invalid).
 * @return gs_pod_req_validate()'s answer: GS_OK or GS_EINVAL.
 */
int gs_trace_pod_req(const struct gs_trace_pod *p, uint64_t model_mask, struct gs_pod_req *out);

/**
 * The core's spec of a node of a node list, with its GPU memory and (when not fractions) its
 * mode on every GPU.
 * @param tn        borrowed; out borrows its strings.
 * @param pods_max  the pod limit to give the node.
 * @param modes     caller storage of GS_NODE_GPUS_MAX entries, borrowed by out->gpu_modes.
 */
void gs_trace_node_spec(const struct gs_trace_node *tn, int32_t pods_max, struct gs_gpu_mode *modes,
                        struct gs_node_spec *out);

/** Frees a node list and zeroes it. NULL is a no-op. */
void gs_trace_nodes_fini(struct gs_trace_nodes *nodes);

/** Frees a pod list and zeroes it. NULL is a no-op. */
void gs_trace_pods_fini(struct gs_trace_pods *pods);

/**
 * Pods of a list that no node of a node list can ever run, by kind, each with a first example
 * (borrowed from the lists, valid while they live). The kinds are exclusive, counted in order.
 */
struct gs_trace_unfit {
    uint32_t unknown_model;   /**< GPU pods whose gpu_spec names no model any node has */
    const char *unknown_pod;  /**< the first such pod's name, NULL when none */
    const char *unknown_spec; /**< its gpu_spec */
    uint32_t model_case;      /**< GPU pods whose gpu_spec matches a model only ignoring
                                   case ("v100m16" for V100M16) */
    const char *case_spec;    /**< the first such gpu_spec, NULL when none */
    uint32_t too_big;         /**< pods that ask more GPUs, CPU or memory than any node
                                   (of an allowed model) has */
    const char *big_pod;      /**< the first such pod's name, NULL when none */
    uint32_t big_num_gpu;     /**< its GPU count */
    int64_t big_cpu_milli;    /**< its CPU request, milli-cores */
    int64_t big_mem_mib;      /**< its memory request, MiB */
    uint32_t max_gpus;        /**< for it: the most GPUs on one node of an allowed model */
    int64_t max_cpu_milli;    /**< the most CPU on one such node, milli-cores */
    int64_t max_mem_mib;      /**< the most memory on one such node, MiB */
};

/**
 * Finds the pods that can never run on the nodes, whatever the placement: a gpu_spec naming no
 * model of the nodes (exact, case-sensitive, as placement matches), or a request larger than
 * every node of an allowed model. CPU-only pods are checked for CPU and memory only.
 * @param out  filled; zero counts when every pod fits somewhere.
 * @return GS_OK or GS_ENOMEM.
 */
int gs_trace_unfit(const struct gs_trace_nodes *nodes, const struct gs_trace_pods *pods,
                   struct gs_trace_unfit *out);

#endif /* GPUSCHED_TRACE_H */
