/*
 * Usage reports over an accounting database (usage.h): GPU-hours charged by capacity
 * (charge.h) per team, queue, namespace, GPU model, node or PriorityClass over a period, with
 * the idle capacity that makes the totals add up to the cluster's capacity-hours, GPU-hours used
 * from utilisation samples (when there are any), quota attainment, preemptions suffered and
 * caused, and wait times. Written as a table, CSV, JSON or one self-contained HTML page.
 *
 * Period rules: an interval counts only for the part of it inside [from, to); an interval still
 * open counts as running until the store's last committed heartbeat (what the writer last knew).
 * Preemptions count in the period of the eviction; waits in the period of the start.
 */
#ifndef GPUSCHED_USAGE_REPORT_H
#define GPUSCHED_USAGE_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpusched/usage.h"

/** What the rows are grouped by. */
enum gs_usage_by {
    GS_USAGE_BY_TEAM = 0,
    GS_USAGE_BY_QUEUE = 1,
    GS_USAGE_BY_NAMESPACE = 2,
    GS_USAGE_BY_MODEL = 3,
    GS_USAGE_BY_NODE = 4,
    GS_USAGE_BY_PRIORITYCLASS = 5,
    GS_USAGE_BY_PROFILE = 6, /**< what a pod holds of a GPU: its MIG profile ("1g.10gb"), or
                                  "whole-gpu", "fraction" (milli or memory share),
                                  "time-sliced" (a replica); kinds of a pod's GPUs that differ
                                  joined by '+'; "no-gpu" for a pod without GPUs */
};

/** Output formats. */
enum gs_usage_format {
    GS_USAGE_TABLE = 0,
    GS_USAGE_CSV = 1,
    GS_USAGE_JSON = 2,
    GS_USAGE_HTML = 3,
    GS_USAGE_PROMETHEUS = 4, /**< text exposition format: gauges per group in GPU-seconds
                                  (Prometheus base units), for node_exporter's textfile
                                  collector or a scrape target's body */
};

/** What to report. */
struct gs_usage_report_options {
    int64_t from_ms;       /**< period start, Unix ms; INT64_MIN: the first record */
    int64_t to_ms;         /**< period end (exclusive), Unix ms; INT64_MAX: the last heartbeat */
    enum gs_usage_by by;   /**< grouping */
    int64_t idle_min_ms;   /**< idle allocation: held at least this long in the period
                                (0: 1 h) */
    double idle_util_pct;  /**< ... and used under this % of what it was charged (0: 5) */
    int32_t tz_offset_min; /**< times are printed at this offset from UTC, minutes (--tz),
                                when tz_offset_at is NULL */
    /** The offset from UTC, minutes, of a time zone at Unix ms `ms` (DST applied per time), or
     *  NULL: tz_offset_min everywhere. The CLI passes one over the C library's tz database;
     *  the report stays free of the process's time zone state. Called while writing. */
    int32_t (*tz_offset_at)(int64_t ms, void *ctx);
    void *tz_ctx; /**< passed to tz_offset_at; borrowed, outlives the report */
};

/** One group's figures. */
struct gs_usage_row {
    char *key;                      /**< group value ("-" when not recorded), owned */
    double charged_gpu_h;           /**< GPU-hours charged */
    double used_gpu_h;              /**< GPU-hours used, from samples; NAN without samples */
    double used_pct;                /**< 100 x used_gpu_h / charged_gpu_h: how much of what
                                         was charged was used; NAN without samples (or with
                                         nothing charged) */
    double quota_gpu_h;             /**< quota GPU-hours over the period; NAN when the group is
                                         not a queue (team: its top-level queue) */
    uint64_t preemptions_suffered;  /**< its intervals ended by eviction in the period */
    uint64_t preemptions_caused;    /**< evictions in the period its pods caused */
    uint32_t intervals;             /**< intervals overlapping the period */
    uint32_t starts;                /**< intervals starting in the period (wait is over these) */
    double wait_mean_s, wait_p95_s; /**< queued to start, NAN without starts */
};

/** An idle allocation: held long, used little. */
struct gs_usage_idle {
    char *pod_uid, *name, *key; /**< owned */
    double held_h;              /**< hours inside the period */
    double charged_gpu_h, used_gpu_h;
};

/** A report. Built by gs_usage_report_build(), freed by gs_usage_report_free(). */
struct gs_usage_report {
    enum gs_usage_by by;
    int64_t from_ms, to_ms;    /**< the period actually reported */
    int64_t records_from_ms;   /**< the store's first record (earliest start) */
    int64_t records_to_ms;     /**< the store's last committed heartbeat */
    int32_t tz_offset_min;     /**< from the options: offset of printed times, minutes */
    double capacity_gpu_h;     /**< GPU-hours of the GPUs present (healthy or not) */
    double unhealthy_gpu_h;    /**< the part of capacity_gpu_h on unhealthy GPUs */
    double charged_gpu_h;      /**< sum over rows */
    double idle_gpu_h;         /**< capacity_gpu_h - charged_gpu_h */
    uint64_t util_samples;     /**< utilisation samples in the period */
    struct gs_usage_row *rows; /**< nrows, by charged GPU-hours descending, then key */
    uint32_t nrows;
    struct gs_usage_idle *idle; /**< nidle idle allocations, longest first */
    uint32_t nidle;
    /* Over time, for the HTML charts: nbuckets equal buckets of bucket_ms from from_ms,
     * charged GPU-hours per bucket and row (row-major by bucket), and capacity per bucket. */
    uint32_t nbuckets;
    int64_t bucket_ms;
    double *bucket_charged;  /**< nbuckets x nrows */
    double *bucket_capacity; /**< nbuckets */
    /* Per queue over the period: mean allocated and fair share, % of capacity (snapshots). */
    uint32_t nqueues;
    char **queue_names;      /**< owned */
    double *queue_alloc_pct; /**< nqueues */
    double *queue_fair_pct;  /**< nqueues */

    /** The time zone of printed times, from the options (NULL: tz_offset_min). */
    int32_t (*tz_offset_at)(int64_t ms, void *ctx);
    void *tz_ctx; /**< from the options */
};

/** Returns the name of a grouping ("team"), or NULL. */
const char *gs_usage_by_name(enum gs_usage_by by);

/** Finds a grouping by name. @return GS_OK or GS_ENOENT. */
int gs_usage_by_find(const char *name, enum gs_usage_by *by);

/**
 * Parses a time: RFC 3339 ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00.5+01:00") or a date
 * ("2026-12-01", midnight UTC).
 * @param ms  receives Unix ms.
 * @return GS_OK or GS_EPARSE.
 */
int gs_usage_parse_time(const char *s, int64_t *ms);

/** Formats Unix ms as RFC 3339 UTC ("2026-12-01T10:00:00Z") into buf (at least 32 bytes). */
void gs_usage_format_time(int64_t ms, char *buf, size_t cap);

/**
 * Formats Unix ms as RFC 3339 at a fixed offset from UTC: "2026-12-01T11:00:00+01:00" for
 * tz_offset_min 60, "...Z" for 0. buf: at least 32 bytes.
 */
void gs_usage_format_time_tz(int64_t ms, int32_t tz_offset_min, char *buf, size_t cap);

/**
 * Formats Unix ms as RFC 3339 in a report's time zone: at tz_offset_at(ms) when the report has
 * one (so each time gets its own DST offset), else at tz_offset_min. buf: at least 32 bytes.
 */
void gs_usage_report_format_time(const struct gs_usage_report *r, int64_t ms, char *buf,
                                 size_t cap);

/**
 * Parses a fixed --tz value: "UTC", "Z" or an offset "+HH:MM" / "-HH:MM" (up to 23:59). Zone
 * names (Europe/Berlin) are the CLI's (src/cli/tz.h), through tz_offset_at.
 * @param tz_offset_min  receives minutes east of UTC.
 * @return GS_OK or GS_EPARSE.
 */
int gs_usage_parse_tz(const char *s, int32_t *tz_offset_min);

/**
 * Builds a report from a store (read-only queries).
 * @param out  receives the report; free with gs_usage_report_free().
 * @param msg  receives a sentence naming the file on failure.
 * @return GS_OK; GS_EINVAL (from >= to, a bad grouping); GS_ENOENT (the store holds nothing to
 *         report); GS_EIO (a query failed: a corrupt file); GS_ENOMEM.
 */
int gs_usage_report_build(struct gs_usage_store *s, const struct gs_usage_report_options *opt,
                          struct gs_usage_report **out, char *msg, size_t cap);

/**
 * Writes a report. HTML is one self-contained page (inline CSS and SVG, no script, no network).
 * @return GS_OK or GS_EIO (a write failed).
 */
int gs_usage_report_write(const struct gs_usage_report *r, enum gs_usage_format fmt, FILE *f);

/** Frees a report. NULL is a no-op. */
void gs_usage_report_free(struct gs_usage_report *r);

/**
 * Writes the chargeback export: CSV with one row per pod per UTC day it held GPUs in [from, to)
 * (columns day, pod_uid, namespace, name, team, queue, priority_class, node, model,
 * held_hours, charged_gpu_hours; a pod on two nodes in one day has a row per node). Open
 * intervals run to the last committed heartbeat.
 * @param rows  receives the number of rows written; may be NULL.
 * @return GS_OK; GS_EINVAL (from >= to); GS_EIO (a query or a write failed; msg says which).
 */
int gs_usage_export_daily(struct gs_usage_store *s, int64_t from_ms, int64_t to_ms, FILE *f,
                          uint64_t *rows, char *msg, size_t cap);

/** What gs_usage_compact() did. */
struct gs_usage_compact_stats {
    uint64_t samples_in;        /**< raw utilisation samples older than the cutoff, replaced */
    uint64_t samples_out;       /**< hourly means written for them */
    uint64_t intervals_deleted; /**< allocation intervals deleted (with delete_intervals) */
    uint64_t capacity_deleted;  /**< capacity intervals deleted (with delete_intervals) */
};

/**
 * Retention: replaces the utilisation samples before cutoff_ms by hourly means per pod and GPU
 * (t_ms = the hour's start), and, only with delete_intervals, deletes the allocation intervals
 * (and their GPUs) and capacity intervals that ended before cutoff_ms. Quota snapshots are kept.
 * One transaction: on failure nothing changes. Needs a store opened for writing, with no batch
 * open (gs_usage_commit() first).
 * @return GS_OK; GS_EINVAL (read-only store, a batch open); GS_EIO.
 */
int gs_usage_compact(struct gs_usage_store *s, int64_t cutoff_ms, bool delete_intervals,
                     struct gs_usage_compact_stats *st, char *msg, size_t cap);

/** Writes the HTML page (report_html.c). @return GS_OK or GS_EIO. */
int gs__usage_report_html(const struct gs_usage_report *r, FILE *f);

#endif /* GPUSCHED_USAGE_REPORT_H */
