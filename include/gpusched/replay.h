/*
 * Time-based replay of a trace through the multi-tenant engine (tenant.h): pods arrive at their
 * creation time, wait in their queue, run for their observed run time, then leave. A virtual
 * clock drives the events; no wall clock is read, so a replay is a pure function of its inputs.
 *
 * Run time of a pod: deletion_time - scheduled_time when the trace saw it scheduled. A pod the
 * trace never saw running (pod_phase Pending, no scheduled_time) is submitted at its creation
 * time and deleted at its deletion time: if the replay starts it before that, it runs until
 * then. An evicted pod goes back to its queue and, when restarted, runs its whole run time again
 * (no checkpointing is assumed).
 *
 * Gangs: the queues file's podGroups rules group trace pods into PodGroups (gs_qconfig_form_gangs,
 * docs/queues.md "Pod groups"), which the engine places all or nothing; a gang that has not
 * started within its rule's timeout fails and its pods never run.
 *
 * The openb trace is a sample of pods spread over 149 days: replayed as recorded it keeps at
 * most ~66 GPUs of 6,212 busy, so nothing ever waits. `arrival_speedup` compresses arrival times
 * (run times unchanged) to raise the offered load into the range where queues compete.
 */
#ifndef GPUSCHED_REPLAY_H
#define GPUSCHED_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/qconfig.h"
#include "gpusched/tenant.h"
#include "gpusched/trace.h"

/** How to replay. */
struct gs_replay_config {
    const char *policy;     /**< placement policy, e.g. "fgd" (default) or "bestfit" */
    bool preemption;        /**< priority preemption inside queues (default on) */
    bool reclaim;           /**< reclaim between queues (default on) */
    bool backfill;          /**< EASY backfill with the trace's run times as estimates */
    int64_t sample_ms;      /**< period of the share/utilisation samples (default 1 h) */
    int64_t retry_ms;       /**< extra cycle period while pods wait (default 10 min) */
    uint64_t seed;          /**< random source (node tie-break rank) */
    double arrival_speedup; /**< arrivals at creation_time / speed-up, run times unchanged:
                                 offered load x speed-up (1 = as recorded) */
    /** Sees every engine event (e.g. the usage recorder); may be NULL. `pod` is the trace pod,
     *  NULL for SUBMIT (the engine reports it before the replay knows the pod's id). Must not
     *  change the engine or cluster. */
    void (*tap_event)(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                      const struct gs_event *ev, const struct gs_trace_pod *pod);
    /** Called at every sample time (the first at the first event); may be NULL. */
    void (*tap_sample)(void *ctx, const struct gs_cluster *c, const struct gs_engine *e,
                       int64_t t_ms);
    void *tap_ctx;    /**< passed to the taps */
    bool dynamic_mig; /**< dynamic MIG (gs_engine_config.dynamic_mig): a MIG pod that fits no
                           layout as it is may take a GPU re-partitioned for it (default off) */
    int64_t mig_repartition_ms; /**< dynamic MIG: how long a re-partition takes, ms, >= 0: the
                                     pod starts that long after its bind, and its run ends
                                     that much later (the command's default is 10 s) */
    /** Defragmentation (defrag.h): after a cycle, the pod that has waited longest past
     *  defrag_wait_ms (not in a gang) and fits on no node as the cluster is gets a plan; its
     *  moves are carried out (gs_engine_migrate(): the moved pods restart at the plan's
     *  placements after defrag_restart_ms and run their whole run time again) and a cycle runs
     *  again at once, in which the pod starts unless another takes the room first. Movable:
     *  running pods outside gangs that have run at least defrag_wait_ms and the
     *  queues file's preemptMinRuntime since their last start (plans cannot keep restarting a
     *  pod).
     *  One plan per cycle; a pod is tried again defrag_wait_ms after its last try. */
    bool defrag;
    int64_t defrag_wait_ms;    /**< wait before a pod gets a plan, ms, >= 0 */
    uint32_t defrag_moves;     /**< most pods one plan moves, 1..GS_DEFRAG_BUDGET_MAX (0: 2) */
    int64_t defrag_restart_ms; /**< how long a moved pod takes to restart, ms, >= 0 */
};

/** What the defragmentation planner did in a replay (all 0 without defrag). */
struct gs_replay_defrag {
    uint64_t searches;           /**< planner calls */
    uint64_t plans;              /**< plans carried out (at least one move) */
    uint64_t no_plan;            /**< searches without a plan within the budget or bound */
    uint64_t pods_moved;         /**< pods moved by the plans */
    int64_t gpu_milli_moved;     /**< their GPU charge, milli */
    uint64_t started;            /**< planned-for pods that started in the cycle right after */
    int64_t gpu_milli_recovered; /**< those pods' GPU charge, milli: GPU that was free but in
                                      pieces too small, put to use */
    uint64_t evals;              /**< fit trials over all searches */
};

/** Per-queue results. */
struct gs_replay_queue {
    const char *name;                          /**< borrowed from the engine */
    uint32_t pods;                             /**< pods submitted to it */
    uint32_t started;                          /**< pods that ever started */
    uint32_t completed;                        /**< pods that ran to their end */
    uint32_t pending_end;                      /**< still waiting when the trace ended */
    double wait_p50_s, wait_p95_s, wait_p99_s; /**< creation to first start, started pods */
    double jct_mean_s, jct_p50_s;              /**< creation to completion, completed pods */
    double gpu_hours;      /**< milli-GPU x time of its running pods, in GPU-hours */
    double share_mean_pct; /**< mean allocated GPU, % of cluster, over samples */
    double fair_mean_pct;  /**< mean fair share GPU, % of cluster, over samples */
    uint64_t evictions_suffered, evictions_caused;
    double wait_mean_s;      /**< mean wait of its started pods, s; NaN when none started */
    uint32_t defrag_started; /**< its pods started right after a plan made room for them */
    uint32_t defrag_moved;   /**< moves its pods underwent in plans */
};

/** One sample of the cluster over time. */
struct gs_replay_sample {
    int64_t t_ms;         /**< virtual time */
    double gpu_alloc_pct; /**< allocated GPU, % of cluster */
    uint32_t pending;     /**< pods waiting */
    uint32_t running;     /**< pods running */
};

/** Most samples a replay keeps; later ones are dropped (choose a longer sample period). */
#define GS_REPLAY_SAMPLES_MAX 200000

struct gs_replay;

/**
 * Replays a trace.
 * @param nodes  node list; borrowed.
 * @param pods   pod list with time columns (has_times); borrowed.
 * @param qc     queue configuration; borrowed.
 * @param out    receives the results; free with gs_replay_free().
 * @param diag   filled when the input cannot be replayed (no time columns, a pod the rules
 *               map nowhere); may be NULL.
 * @return GS_OK; GS_EINVAL (see diag); GS_ENOMEM.
 */
int gs_replay_run(const struct gs_trace_nodes *nodes, const struct gs_trace_pods *pods,
                  const struct gs_qconfig *qc, const struct gs_replay_config *cfg,
                  struct gs_replay **out, struct gs_diag *diag);

/** Frees replay results. NULL is a no-op. */
void gs_replay_free(struct gs_replay *r);

/** Returns the number of leaf queues in the results and fills `*q` with their array. */
uint32_t gs_replay_queues(const struct gs_replay *r, const struct gs_replay_queue **q);

/** Returns the number of samples and fills `*s` with their array. */
uint32_t gs_replay_samples(const struct gs_replay *r, const struct gs_replay_sample **s);

/**
 * Returns per-queue allocated and fair GPU shares over time: `*alloc_pct` and `*fair_pct` are
 * arrays of samples x queues values (row-major by sample).
 */
void gs_replay_shares(const struct gs_replay *r, const double **alloc_pct, const double **fair_pct);

/**
 * Returns the wait of every started pod: `*queue` (leaf index into gs_replay_queues) and
 * `*wait_s` arrays of the returned length, in pod order.
 */
uint32_t gs_replay_waits(const struct gs_replay *r, const uint32_t **queue, const double **wait_s);

/** The names of the pods of gs_replay_waits(), in the same order (borrowed from the replay). */
const char *const *gs_replay_wait_pods(const struct gs_replay *r);

/** Entries of gs_replay_evictions_by_reason(): one per enum gs_evict_reason value. */
#define GS_REPLAY_EVICT_REASONS 6

/** Evictions counted by reason, indexed by enum gs_evict_reason (preemption, reclaim, gang,
 *  node lost, defrag; index 0 stays 0); they add up to gs_replay_totals()' evictions. */
void gs_replay_evictions_by_reason(const struct gs_replay *r,
                                   uint64_t out[GS_REPLAY_EVICT_REASONS]);

/**
 * Gangs formed by the queues file's podGroups rules (gs_qconfig_form_gangs()): how many,
 * how many reached their minMember running at once, and how many failed at their timeout
 * without starting (their pods then never run). All 0 without podGroups rules.
 */
void gs_replay_gangs(const struct gs_replay *r, uint32_t *formed, uint32_t *started,
                     uint32_t *timed_out);

/** Entries of gs_replay_modes(): one per enum gs_gpu_sharing value. */
#define GS_REPLAY_MODES 4

/** What one GPU sharing mode did over a replay. Plain value record. */
struct gs_replay_mode {
    uint32_t gpus;         /**< GPUs of the cluster in this mode */
    uint32_t pods_started; /**< starts (binds, backfills) that landed on GPUs of this mode */
    uint64_t gpu_milli_ms; /**< charged milli-GPU x ms: the engine's rule per pod
                                (gs_charge_milli() of gs_charge_placement()), so the modes add
                                up to the queues' GPU-hours exactly */
    double gpu_hours;      /**< gpu_milli_ms in GPU-hours */
    double alloc_pct;      /**< gpu_milli_ms over the mode's GPUs x 1000 x the replay's length,
                                %; NaN without GPUs in the mode or replay time */
    double peak_fill_pct;  /**< the fullest any GPU of the mode was right after a pod landed on
                                it: fractions the larger of milli and memory used, whole milli,
                                time-sliced slots, MIG compute slices held, % of its capacity
                                (never above 100 unless a GPU was over-granted) */
};

/**
 * Per-mode results, kept when the input names sharing: the node list has a `gpu_mode` column
 * or the pod list a sharing column (docs/trace-format.md).
 * @param out  receives GS_REPLAY_MODES entries by enum gs_gpu_sharing (zeroed when not kept).
 * @return 1 when kept, 0 when the input named no sharing (reports then show no modes).
 */
int gs_replay_modes(const struct gs_replay *r, struct gs_replay_mode out[GS_REPLAY_MODES]);

/** The name of a mode in reports ("fractions", "replicas", "mig", "whole"); "" past the end. */
const char *gs_replay_mode_name(uint32_t mode);

/** MIG GPUs re-partitioned for pods that started (dynamic MIG; 0 when it is off). */
uint64_t gs_replay_mig_repartitions(const struct gs_replay *r);

/** Fills `out` with what the defragmentation planner did (zeros without defrag). */
void gs_replay_defrag(const struct gs_replay *r, struct gs_replay_defrag *out);

/** Totals: pods replayed, bind events, evictions, cycles run, final virtual time. */
void gs_replay_totals(const struct gs_replay *r, uint32_t *pods, uint64_t *binds,
                      uint64_t *evictions, uint64_t *cycles, int64_t *end_ms);

#endif /* GPUSCHED_REPLAY_H */
