/*
 * gpusched: the command-line entry point. One binary, one subcommand per capability:
 *
 *   gpusched simulate ...   replay a trace through the placement policies (FGD experiment method)
 *   gpusched replay ...     time-based replay through queues, quotas, priorities and gangs
 *   gpusched agent ...      the node agent: GPU device plugin, health and metrics
 *   gpusched scheduler ...  a second Kubernetes scheduler against a real API server
 *   gpusched accountant ... usage accounting of the scheduler's decisions, from the API server
 *   gpusched whatif ...     a Kubernetes cluster dump through the scheduler, offline
 *   gpusched bound ...      a lower bound on unallocated GPU % (LP over pod shapes, GLPK)
 *   gpusched report ...     usage reports from an accounting database
 *   gpusched version
 *
 * Exit codes of every subcommand: 0 success; 1 internal failure (out of memory, cannot write
 * output); 2 bad usage or bad input (a message names the option, or the file, line and column).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"

static const char *const usage_main =
    "usage: gpusched <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate   replay a cluster trace through the placement policies and compare them\n"
    "  replay     replay a trace over time through queues, quotas and PriorityClasses\n"
    "  agent      run the node agent: GPU device plugin, health and metrics\n"
    "  scheduler  schedule pods (schedulerName: gpusched) on a Kubernetes API server\n"
    "  accountant record the scheduler's allocations in a usage store from the API server\n"
    "             (one writer beside any number of scheduler replicas)\n"
    "  whatif     run a Kubernetes cluster dump through the scheduler offline\n"
    "  bound      a lower bound on unallocated GPU % for simulate's runs (an LP, GLPK)\n"
    "  report     usage reports (GPU-hours per team, queue, ...) from an accounting database,\n"
    "             and GPU utilisation into it from Prometheus (report ingest)\n"
    "  version    print the version\n"
    "\n"
    "Run 'gpusched <command> --help' for a command's options.\n"
    "\n"
    "exit status (every command):\n"
    "  0  done\n"
    "  1  a runtime failure: internal error, results that cannot be written, GPUs or sockets\n"
    "     (agent), a lost Lease (scheduler)\n"
    "  2  bad usage or bad input (the message names the option, or the file, line and field)\n"
    "  3  whatif only: the scheduling did not settle within --max-cycles\n";

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"simulate", gs_cmd_simulate}, {"agent", gs_cmd_agent},
    {"replay", gs_cmd_replay},     {"whatif", gs_cmd_whatif},
    {"bound", gs_cmd_bound},       {"scheduler", gs_cmd_scheduler},
    {"report", gs_cmd_report},     {"accountant", gs_cmd_accountant},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        (void)fputs(usage_main, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        (void)fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("gpusched %s\n", GS_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    (void)fprintf(stderr, "gpusched: unknown command '%s'\n%s", cmd, usage_main);
    return 2;
}
