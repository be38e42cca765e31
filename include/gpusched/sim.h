/*
 * The trace simulator: one experiment run = one trace x policy x seed, following the method of
 * the FGD paper's experiments (Weng et al., USENIX ATC 2023, Section 6; the reference simulator
 * kubernetes-scheduler-simulator, restated in docs/internals/fgd.md section 1):
 *
 *   1. the target workload is built from the trace's pods as given;
 *   2. pods are sorted by name and shuffled with the seed;
 *   3. the pod list is inflated (clones of pods drawn with replacement, appended) or deflated
 *      (random pods removed) until its GPU request is `tune` x the cluster's GPU capacity;
 *   4. a random permutation of the name-sorted nodes is the tie-break rank;
 *   5. pods arrive one at a time, are placed or fail (no retry), and never leave;
 *   6. after every pod the allocated GPU, the fragmentation and the arrived GPU request are
 *      recorded, and bucketed by arrived workload in % of capacity (columns 0..130).
 *
 * All randomness comes from one gs_rng seeded with the seed, drawn in the order above, so a run
 * is a pure function of (trace, policy, seed, tune). Runs share a read-only gs_sim_input and may
 * execute in parallel threads.
 */
#ifndef GPUSCHED_SIM_H
#define GPUSCHED_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/frag.h"
#include "gpusched/trace.h"

/** Most pods one run may arrive after tuning (bounds time and memory of a run). */
#define GS_SIM_PODS_MAX 10000000u

/** Result columns: arrived workload 0..130 % of cluster GPU capacity. */
#define GS_SIM_COLUMNS 131

/** A loaded trace, ready for runs. Opaque; read-only once loaded. */
struct gs_sim_input;

/**
 * Loads a node list and a pod list and derives what every run shares (requests, target
 * workload with the 95% threshold).
 * @param workload_name  name for result rows (e.g. "openb_pod_list_default"); copied. NULL
 *                       takes the pod file's base name without ".csv".
 * @param out   receives the input; free with gs_sim_input_free().
 * @param diag  filled on a trace error; may be NULL.
 * @return GS_OK; the trace readers' errors; GS_EPARSE when a pod's GPU model constraint or
 *         size can never be met is NOT an error (it just fails); GS_EINVAL for an empty
 *         cluster (no GPU); GS_ENOMEM.
 */
int gs_sim_input_load(const char *nodes_path, const char *pods_path, const char *workload_name,
                      struct gs_sim_input **out, struct gs_diag *diag);

/** Frees an input. NULL is a no-op. */
void gs_sim_input_free(struct gs_sim_input *in);

/** Returns the workload name of an input (borrowed). */
const char *gs_sim_input_name(const struct gs_sim_input *in);

/** Returns the target workload of an input (borrowed). */
const struct gs_workload *gs_sim_input_workload(const struct gs_sim_input *in);

/** Returns the number of pods in the trace (before tuning). */
uint32_t gs_sim_input_pod_count(const struct gs_sim_input *in);

/** Returns the pod list's ignored column names, comma-separated, "" when none (borrowed; see
 *  gs_trace_pods.ignored_columns). */
const char *gs_sim_input_ignored_columns(const struct gs_sim_input *in);

/**
 * gs_trace_unfit() on the input's node and pod lists: the pods that can never run there (they
 * count as failed pods). Examples are borrowed, valid while `in` lives.
 * @return GS_OK or GS_ENOMEM.
 */
int gs_sim_input_unfit(const struct gs_sim_input *in, struct gs_trace_unfit *out);

/** What one run is. */
struct gs_sim_run_config {
    uint32_t policy; /**< registry index (gs_policy_find()) */
    uint64_t seed;   /**< seed of the run's random stream (the paper uses 42..51) */
    double tune;     /**< target GPU request as a multiple of cluster GPU capacity, > 0 */
};

/** What one run produced. Plain value record. */
/** Entries of the per-mode members of gs_sim_result: one per enum gs_gpu_sharing value. */
#define GS_SIM_MODES 4

struct gs_sim_result {
    uint32_t policy; /**< registry index */
    uint64_t seed;
    double tune;
    uint32_t total_gpus;       /**< cluster GPU count */
    uint32_t pods;             /**< pods that arrived (after tuning) */
    uint32_t pods_failed;      /**< pods no node could host */
    int64_t arrived_gpu_milli; /**< GPU requested by all arrived pods (failed ones included) */
    int64_t used_gpu_milli;    /**< GPU allocated at the end */
    /** Allocation rate, % of cluster GPU, per arrived-workload column; NaN where no event. */
    double alloc_pct[GS_SIM_COLUMNS];
    /** Fragmented GPU, % of cluster GPU capacity, per column; NaN where no event. */
    double frag_pct[GS_SIM_COLUMNS];
    /** Fragmented / idle GPU, %, per column; NaN where no event. */
    double frag_ratio_pct[GS_SIM_COLUMNS];
    /** 1 when the input names sharing (a node list gpu_mode column or a pod list sharing
     *  column, docs/trace-format.md); the mode members below are 0 otherwise. */
    int mixed;
    uint32_t mode_gpus[GS_SIM_MODES];      /**< GPUs per mode (enum gs_gpu_sharing) */
    uint32_t mode_pods[GS_SIM_MODES];      /**< pods placed on GPUs of each mode */
    int64_t mode_used_milli[GS_SIM_MODES]; /**< GPU charged at the end per mode, milli: each
                                                pod's gs_charge_milli(gs_charge_placement()) */
};

/**
 * Runs one experiment.
 * @param in   a loaded input; only read (several runs may share it across threads).
 * @param cfg  the run.
 * @param res  receives the result.
 * @return GS_OK; GS_EINVAL (bad policy index or tune); GS_ELIMIT (tuning would need more than
 *         GS_SIM_PODS_MAX pods); GS_ENOMEM.
 */
int gs_sim_run(const struct gs_sim_input *in, const struct gs_sim_run_config *cfg,
               struct gs_sim_result *res);

/**
 * The pod list run (seed, tune) arrives, in arrival order: what gs_sim_run() draws first from
 * its random stream (steps 2-3 of the method), for callers that study the same arrivals
 * (gpusched bound).
 * @param list  receives a malloc'd array of pod indices into the input's pod list (free()).
 * @param len   receives its length.
 * @return GS_OK; GS_EINVAL for a bad tune; GS_ELIMIT; GS_ENOMEM.
 */
int gs_sim_arrivals(const struct gs_sim_input *in, uint64_t seed, double tune, uint32_t **list,
                    uint32_t *len);

/** The request of pod `i` of the input's pod list (borrowed), model mask for the cluster of
 *  gs_sim_input_cluster(); NULL past the end. */
const struct gs_pod_req *gs_sim_input_req(const struct gs_sim_input *in, uint32_t i);

/** Whether the input names sharing modes (a node gpu_mode or a pod sharing column). */
bool gs_sim_input_mixed(const struct gs_sim_input *in);

/**
 * Builds the cluster every run starts from (nodes in name order, all free).
 * @param out  receives it; free with gs_cluster_free().
 * @return GS_OK or the cluster's errors (GS_ENOMEM).
 */
int gs_sim_input_cluster(const struct gs_sim_input *in, struct gs_cluster **out);

/**
 * Rounds half to even at `decimals` decimal places on the exact binary value, as Python's
 * round() does (the published results were made with it).
 */
double gs_round_half_even(double x, int decimals);

#endif /* GPUSCHED_SIM_H */
