/*
 * Result files of the simulator: the published-results CSV layout, summaries and plots.
 * Internal to the simulator and CLI. Every file is written atomically: to a temporary name in
 * the same directory, flushed, closed, then renamed over the target, so a reader sees either
 * the old file or the whole new one.
 */
#ifndef GPUSCHED_SIM_REPORT_H
#define GPUSCHED_SIM_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "gpusched/sim.h"

/** One finished run with the name of its workload (both borrowed). */
struct gs_report_run {
    const char *workload;
    const struct gs_sim_result *res;
};

/** Which per-column metric a results file holds. */
enum gs_report_metric {
    GS_REPORT_ALLOC = 0,      /**< allocation rate, % (analysis_allo_discrete.csv) */
    GS_REPORT_FRAG = 1,       /**< fragmented GPU, % of capacity (analysis_frag_discrete.csv) */
    GS_REPORT_FRAG_RATIO = 2, /**< fragmented / idle GPU, % (analysis_frag_ratio_discrete.csv) */
};

/**
 * Writes runs in the layout `workload,sc_policy,tune,seed,total_gpus,0..130`, one row per run
 * in the given order; numbers printed as Python prints floats, empty cells where NaN.
 * @param err  receives a message on failure (cap bytes).
 * @return GS_OK or GS_EIO (the target is then untouched).
 */
int gs_report_write_columns(const char *path, const struct gs_report_run *runs, size_t n,
                            enum gs_report_metric metric, char *err, size_t cap);

/**
 * Writes one row per run: workload, policy, seed, tune, pods, failed pods, arrived and used
 * GPU milli, unallocated GPU % at 100% arrived, fragmented GPU % at 80% arrived.
 * @return GS_OK or GS_EIO.
 */
int gs_report_write_runs(const char *path, const struct gs_report_run *runs, size_t n, char *err,
                         size_t cap);

/** Aggregate of one (workload, policy) over its seeds. */
struct gs_report_agg {
    const char *workload;             /**< borrowed */
    unsigned policy;                  /**< registry index */
    unsigned seeds;                   /**< runs aggregated */
    double unalloc_mean, unalloc_std; /**< unallocated GPU % at 100% arrived (sample std) */
    double frag_mean, frag_std;       /**< fragmented GPU % at 80% arrived (sample std) */
    double failed_mean;               /**< failed pods per run */
};

/**
 * Aggregates runs per (workload, policy) in order of first appearance.
 * @param out  array of at least n entries; receives the aggregates.
 * @return the number of aggregates written.
 */
size_t gs_report_aggregate(const struct gs_report_run *runs, size_t n, struct gs_report_agg *out);

/** Writes aggregates as CSV (summary.csv). @return GS_OK or GS_EIO. */
int gs_report_write_summary(const char *path, const struct gs_report_agg *agg, size_t n, char *err,
                            size_t cap);

/**
 * Plots one metric (mean over seeds) against arrived workload for one workload, one line per
 * policy (distinct colour, dash type and point shape), to a PNG with gnuplot. The allocation
 * plot (the FGD paper's Fig. 9 form) has a second panel zooming into arrived 80-130 %, where the
 * policies part; the fragmentation plot is the paper's Fig. 7 form (fragmented GPU % of capacity).
 * @param runs     all runs; only those of `workload` are drawn.
 * @param metric   GS_REPORT_ALLOC, GS_REPORT_FRAG or GS_REPORT_FRAG_RATIO.
 * @param gnuplot  the program to run ("gnuplot").
 * @return GS_OK; GS_EIO when gnuplot is missing or fails (message in err).
 */
int gs_report_plot_metric(const char *png_path, const char *workload,
                          const struct gs_report_run *runs, size_t n, enum gs_report_metric metric,
                          const char *gnuplot, char *err, size_t cap);

/**
 * Opens a temporary file beside `path` for an atomic write.
 * @param tmp  receives the temporary name (caller frees it; gs_report_tmp_commit() does).
 * @return the open file, or NULL with a message in err.
 */
FILE *gs_report_tmp_open(const char *path, char **tmp, char *err, size_t cap);

/**
 * Closes a file from gs_report_tmp_open() and renames it over `path`; on any failure removes
 * the temporary and leaves `path` untouched. Frees `tmp`.
 * @return GS_OK or GS_EIO (message in err).
 */
int gs_report_tmp_commit(FILE *f, char *tmp, const char *path, char *err, size_t cap);

/**
 * Quotes text for a gnuplot single-quoted string: doubles each quote and replaces control
 * characters, so names and paths from outside can never end the string and run commands.
 * @return a malloc'd copy (caller frees), or NULL when out of memory.
 */
char *gs_report_gp_quote(const char *in);

/**
 * Runs gnuplot on a script file and waits for it. Its stderr is read, not passed on: warnings
 * about a plot it draws are dropped, and when it fails its last line goes into err.
 * @param gnuplot  the program (looked up in PATH).
 * @param script   path of the script file.
 * @param err      on failure "gnuplot failed (WHAT IT SAID); no plot written"; cap bytes.
 * @return GS_OK, or GS_EIO when it cannot run or fails (message in err).
 */
int gs_report_gnuplot(const char *gnuplot, const char *script, char *err, size_t cap);

/** Formats a double as Python's repr() would (shortest round-trip form, at least one decimal). */
void gs_report_format_py(double v, char *buf, size_t cap);

struct gs_replay;

/**
 * Writes the results of a replay into `dir` (which must exist): queues.csv (one row per leaf
 * queue: pods, started, completed, pending at the end, wait p50/p95/p99, job completion time,
 * GPU-hours, mean share and fair share, evictions suffered and caused), share.csv (allocated and
 * fair GPU % per queue per sample), utilisation.csv (cluster GPU allocation and pod counts per
 * sample), waits.csv (every started pod's wait) and, with `plot`, share.png and wait.png.
 * @param plot_failed  set to 1 when a plot could not be drawn (message in err; the CSV files
 *                     are written and GS_OK returned), else 0.
 * @return GS_OK or GS_EIO (message in err; files already written stay complete).
 */
int gs_report_write_replay(const struct gs_replay *r, const char *dir, int plot, char *err,
                           size_t cap, int *plot_failed);

#endif /* GPUSCHED_SIM_REPORT_H */
