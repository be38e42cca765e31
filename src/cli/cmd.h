/*
 * The subcommands of the gpusched binary. Each takes the arguments after its name and returns
 * the process exit status (0 done, 1 internal error, 2 bad usage or bad input).
 */
#ifndef GPUSCHED_CLI_CMD_H
#define GPUSCHED_CLI_CMD_H

/** The version printed by `gpusched version`. */
#define GS_VERSION "0.1.0"

/** `gpusched simulate`: replay trace pod lists through the placement policies. */
int gs_cmd_simulate(int argc, char **argv);

/** `gpusched replay`: time-based replay through queues, quotas and priorities. */
int gs_cmd_replay(int argc, char **argv);

/** `gpusched agent`: the node agent (device plugin, GPU health, metrics) and its labels. */
int gs_cmd_agent(int argc, char **argv);

/** `gpusched scheduler`: the core as a second Kubernetes scheduler against an API server. */
int gs_cmd_scheduler(int argc, char **argv);

/** `gpusched whatif`: a cluster dump through the scheduler's translation and core, offline. */
int gs_cmd_whatif(int argc, char **argv);

#endif /* GPUSCHED_CLI_CMD_H */
