/*
 * The subcommands of the gpusched binary. Each takes the arguments after its name and returns
 * the process exit status (0 done, 1 internal error, 2 bad usage or bad input).
 */
#ifndef GPUSCHED_CLI_CMD_H
#define GPUSCHED_CLI_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The version printed by `gpusched version`. */
#define GS_VERSION "0.1.0"

/** The trace file formats, for the --help of simulate and replay (docs/trace-format.md). */
#define GS_CLI_TRACE_FORMAT_HELP                                                                   \
    "input files: CSV with a header line naming the columns, in any order (RFC 4180 quoting).\n"   \
    "  node list: sn (node name), cpu_milli (milli-cores), memory_mib (MiB), gpu (GPU count),\n"   \
    "    model (GPU model, e.g. V100M16; empty without GPUs); optional gpu_mem_mib (MiB per\n"     \
    "    GPU) and gpu_mode (every GPU of the node: fractions (default), whole, replicas:N, or\n"   \
    "    mig:<profile>[@start]+... with model a MIG table name such as A100-40GB).\n"              \
    "  pod list:  name, cpu_milli, memory_mib, num_gpu (GPUs), gpu_milli (per GPU: 1000 for\n"     \
    "    whole GPUs, 1-999 a share of one GPU with num_gpu 1, 0 with num_gpu 0); optional\n"       \
    "    gpu_spec (GPU models the pod accepts, joined by '|'; empty: any), qos, pod_phase,\n"      \
    "    creation_time, deletion_time, scheduled_time (seconds; replay needs all three).\n"        \
    "    Sharing, at most one per row: gpu_mem_mib (MiB on each of num_gpu GPUs, gpu_milli\n"      \
    "    0-999 compute), mig_profile (num_gpu instances, gpu_milli 0), timeslice_slots\n"          \
    "    (slots on distinct time-sliced GPUs, num_gpu and gpu_milli 0).\n"                         \
    "    Other columns are ignored, with a note naming them.\n"

/** `gpusched simulate`: replay trace pod lists through the placement policies. */
int gs_cmd_simulate(int argc, char **argv);

/** `gpusched replay`: time-based replay through queues, quotas and priorities. */
int gs_cmd_replay(int argc, char **argv);

/** `gpusched agent`: the node agent (device plugin, GPU health, metrics) and its labels. */
int gs_cmd_agent(int argc, char **argv);

/** `gpusched scheduler`: the core as a second Kubernetes scheduler against an API server. */
int gs_cmd_scheduler(int argc, char **argv);

/**
 * `gpusched accountant`: the scheduler's informers and world, following the leader's decisions
 * on the API server into the usage store (cmd_accountant.c); no Lease, binds or writes.
 */
int gs_cmd_accountant(int argc, char **argv);

/** `gpusched report usage`: GPU-hours and more from a usage accounting database. */
int gs_cmd_report(int argc, char **argv);

/** `gpusched whatif`: a cluster dump through the scheduler's translation and core, offline. */
int gs_cmd_whatif(int argc, char **argv);

/** `gpusched bound`: the offline lower bound on unallocated GPU % (cmd_bound.c). */
int gs_cmd_bound(int argc, char **argv);

/**
 * Splits `--name=value`: copies `--name` into name (cap bytes) and points *value after the '='.
 * @return 1 when split; 0 when arg has no '=', is not a long option, or the name does not fit
 *         (name and *value untouched).
 */
int gs__cli_split(const char *arg, char *name, size_t cap, const char **value);

/**
 * Takes the value of option `opt` of command `cmd` ("simulate"), one that needs a value: the
 * text after '=' (inline_v, from gs__cli_split()) or else the next argument, which *i is then
 * moved onto. An empty value ("--nodes=" or "--nodes ''") is as missing as none.
 * @param value  the candidate: what gs__cli_split() gave, or the next argument (NULL at the end).
 * @param i      the index of the option's argument; advanced past a separate value on success.
 * @return 0; 2 after printing "gpusched CMD: OPT needs a value" (*i untouched).
 */
int gs__cli_value(const char *cmd, const char *opt, int inline_v, const char *value, int *i);

/**
 * Checks an --out directory of command `cmd` before anything is read: not empty, and not an
 * existing file other than a directory (it need not exist yet).
 * @return 0; 2 after printing "gpusched CMD: --out: empty directory name" or "gpusched CMD:
 *         --out DIR: exists and is not a directory".
 */
int gs__cli_out_dir(const char *cmd, const char *dir);

/** gs_policy_find() on the name in lower case ("FGD" finds fgd); -1 when unknown. */
int gs__cli_policy_find(const char *name);

/**
 * Reads a --policy value for command `cmd` ("whatif"): any case, as gs__cli_policy_find().
 * @param name  the value; on success *name is pointed at the canonical name (static storage).
 * @return 0, or 2 after printing "gpusched CMD: --policy: unknown policy 'X' (the names)".
 */
int gs__cli_policy_arg(const char *cmd, const char **name);

/** The option that turns on KAI-Scheduler's preemptible rule (gs_kworld_config.kai_preemptible)
 *  and its threshold when none is given. */
#define GS_CLI_KAI_THRESHOLD_OPT "--kai-preemptible-threshold"
#define GS_CLI_KAI_THRESHOLD_DEFAULT 100

/**
 * Reads `--kai-preemptible-threshold[=N]` for command `cmd` ("whatif"): the option alone means
 * N = 100 (KAI-Scheduler's rule: classes of value 100 and above are not preemptible); N is a
 * whole number from -2147483648 to 2147483647, as PriorityClass values are. The value is only
 * ever after '=' (a bare next argument is not taken).
 * @param arg  one command-line argument, whole.
 * @param out  receives N when arg is the option.
 * @return 0 arg is another option (out untouched); 1 read; 2 after printing
 *         "gpusched CMD: --kai-preemptible-threshold must be ..." for a bad N.
 */
int gs__cli_kai_threshold(const char *cmd, const char *arg, int32_t *out);

struct gs__stage_report;

/**
 * Says on stderr what committing a result set into `dir` did (gs__stage_commit()): the earlier
 * set it replaced, with the files of it this run does not write (removed), and other files
 * left in place. Nothing when `dir` was new and empty.
 * @param cmd  the command's name for the prefix ("simulate").
 */
void gs__cli_stage_notes(const char *cmd, const char *dir, const struct gs__stage_report *rep);

struct gs_kube_config;

/**
 * Loads the API server configuration: the kubeconfig file, or with kubeconfig NULL the
 * default search ($KUBECONFIG; in a pod its service account; ~/.kube/config). On failure it says
 * why on stderr, prefixed "gpusched CMD: ".
 * @param cfg  receives it; release with gs_kube_config_fini() after a 0 return.
 * @return 0; 2 (cannot be read: bad usage or input).
 */
int gs__cli_kube_config(const char *cmd, const char *kubeconfig, struct gs_kube_config *cfg);

struct gs_kworld_config;

/**
 * The translation's configuration for scheduler and whatif alike: preemption and reclaim on,
 * backfill off, with the given scheduler name, default queue and policy (NULL: the
 * translation's defaults; borrowed, must outlive the world) and KAI-Scheduler's preemptible
 * rule (kai_preemptible, its threshold). No callbacks: the caller sets on_event, on_warning
 * and ctx.
 */
void gs__cli_kworld_config(struct gs_kworld_config *wc, const char *scheduler_name,
                           const char *default_queue, const char *policy, bool kai_preemptible,
                           int32_t kai_threshold);

struct gs_trace_unfit;

/**
 * Warns on stderr, once per kind with its count and a first example, about the pods of
 * `pods_path` that can never run (see gs_trace_unfit()); nothing when there are none.
 * @param cmd  the command's name for the message prefix ("simulate").
 */
void gs__cli_warn_unfit(const char *cmd, const char *pods_path, const struct gs_trace_unfit *u);

#endif /* GPUSCHED_CLI_CMD_H */
