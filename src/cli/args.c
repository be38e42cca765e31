/*
 * Small command-line helpers shared by the subcommands: `--name=value` as well as `--name value`,
 * and policy names in any case. See src/cli/cmd.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cmd.h"
#include "util/file.h"
#include "gpusched/sched.h"
#include "gpusched/trace.h"

int gs__cli_split(const char *arg, char *name, size_t cap, const char **value)
{
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (!eq || (size_t)(eq - arg) >= cap)
        return 0;
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    *value = eq + 1;
    return 1;
}

int gs__cli_value(const char *cmd, const char *opt, int inline_v, const char *value, int *i)
{
    if (!value || !*value) { /* "--nodes=" is as missing as "--nodes" */
        (void)fprintf(stderr, "gpusched %s: %s needs a value\n", cmd, opt);
        return 2;
    }
    if (!inline_v)
        (*i)++;
    return 0;
}

int gs__cli_out_dir(const char *cmd, const char *dir)
{
    struct stat st;
    if (!*dir) {
        (void)fprintf(stderr, "gpusched %s: --out: empty directory name\n", cmd);
        return 2;
    }
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        (void)fprintf(stderr, "gpusched %s: --out %s: exists and is not a directory\n", cmd, dir);
        return 2;
    }
    return 0;
}

int gs__cli_kai_threshold(const char *cmd, const char *arg, int32_t *out)
{
    size_t n = strlen(GS_CLI_KAI_THRESHOLD_OPT);
    if (strncmp(arg, GS_CLI_KAI_THRESHOLD_OPT, n) != 0 || (arg[n] != '\0' && arg[n] != '='))
        return 0;
    if (arg[n] == '\0') {
        *out = GS_CLI_KAI_THRESHOLD_DEFAULT;
        return 1;
    }
    const char *val = arg + n + 1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (!*val || *end || errno || v < INT32_MIN || v > INT32_MAX) {
        (void)fprintf(stderr,
                      "gpusched %s: " GS_CLI_KAI_THRESHOLD_OPT " must be a whole number from "
                      "-2147483648 to 2147483647 (a PriorityClass value), not '%s'\n",
                      cmd, val);
        return 2;
    }
    *out = (int32_t)v;
    return 1;
}

int gs__cli_policy_find(const char *name)
{
    char low[32];
    size_t n = strlen(name);
    if (n >= sizeof(low))
        return -1;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    return gs_policy_find(low);
}

int gs__cli_policy_arg(const char *cmd, const char **name)
{
    int id = gs__cli_policy_find(*name);
    if (id < 0) {
        (void)fprintf(stderr,
                      "gpusched %s: --policy: unknown policy '%s' (random, dotprod, clustering, "
                      "packing, bestfit, fgd, fgdband, fgdfill)\n",
                      cmd, *name);
        return 2;
    }
    *name = gs_policy_name((uint32_t)id);
    return 0;
}

void gs__cli_warn_unfit(const char *cmd, const char *pods_path, const struct gs_trace_unfit *u)
{
    if (u->unknown_model)
        (void)fprintf(
            stderr,
            "gpusched %s: warning: %s: %u pod%s ask%s for a GPU model no node has (first: "
            "%s, gpu_spec '%s'); they can never run and count as failed\n",
            cmd, pods_path, u->unknown_model, u->unknown_model == 1 ? "" : "s",
            u->unknown_model == 1 ? "s" : "", u->unknown_pod, u->unknown_spec);
    if (u->model_case)
        (void)fprintf(stderr,
                      "gpusched %s: warning: %s: %u pod%s name%s a GPU model in another case than "
                      "the nodes (first: gpu_spec '%s'; names match exactly); they can never run "
                      "and count as failed\n",
                      cmd, pods_path, u->model_case, u->model_case == 1 ? "" : "s",
                      u->model_case == 1 ? "s" : "", u->case_spec);
    if (u->too_big)
        (void)fprintf(stderr,
                      "gpusched %s: warning: %s: %u pod%s ask%s for more GPUs, CPU or memory than "
                      "any one node of their GPU model has (first: %s asks %u GPUs, %lld mCPU, "
                      "%lld MiB; such nodes have at most %u GPUs, %lld mCPU, %lld MiB); they can "
                      "never run and count as failed\n",
                      cmd, pods_path, u->too_big, u->too_big == 1 ? "" : "s",
                      u->too_big == 1 ? "s" : "", u->big_pod, u->big_num_gpu,
                      (long long)u->big_cpu_milli, (long long)u->big_mem_mib, u->max_gpus,
                      (long long)u->max_cpu_milli, (long long)u->max_mem_mib);
}

void gs__cli_stage_notes(const char *cmd, const char *dir, const struct gs__stage_report *rep)
{
    if (rep->had_set && rep->removed)
        (void)fprintf(stderr,
                      "gpusched %s: note: %s: replaced the earlier result set (%u files written "
                      "again); removed %u of its files this run does not write: %s\n",
                      cmd, dir, rep->replaced, rep->removed, rep->removed_names);
    else if (rep->had_set)
        (void)fprintf(stderr,
                      "gpusched %s: note: %s: replaced the earlier result set (%u files written "
                      "again)\n",
                      cmd, dir, rep->replaced);
    if (rep->unvouched[0])
        (void)fprintf(stderr, "gpusched %s: note: %s also holds files this run did not write: %s\n",
                      cmd, dir, rep->unvouched);
}
