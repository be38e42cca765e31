/*
 * gpusched bound: the offline lower bound on unallocated GPU % at 100 % arrived workload for
 * the simulator's runs of a trace (include/gpusched/bound.h), one line per seed and the mean,
 * to read beside `gpusched simulate`'s table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gpusched/bound.h"
#include "gpusched/err.h"
#include "gpusched/sim.h"

static const char *const usage_bound =
    "usage: gpusched bound --nodes FILE --pods FILE [--seeds N-M] [--tune X]\n"
    "\n"
    "A lower bound on the unallocated GPU % that any placement of a simulator run's arrivals\n"
    "could reach at 100 % arrived workload (simulate's first column): a linear programme over\n"
    "pod shapes and node types (CPU, memory, pods, milli-GPU and GPUs held alone per type),\n"
    "solved with GLPK. Milli-GPU requests only.\n"
    "\n"
    "options:\n"
    "  --nodes FILE   node list\n"
    "  --pods FILE    pod list\n"
    "  --seeds N-M    seeds of the runs (default 42-51), as simulate draws them\n"
    "  --tune X       GPU request as a multiple of capacity (default 1.3, as simulate)\n"
    "  -h, --help     this text\n"
    "\n"
    "exit status:\n"
    "  0  done\n"
    "  1  internal error (out of memory)\n"
    "  2  bad usage or bad input (the message names the option, or file, line and field), or\n"
    "     requests the programme does not cover (memory, MIG, time-sliced)\n";

int gs_cmd_bound(int argc, char **argv)
{
    const char *nodes = NULL, *pods = NULL;
    unsigned long long seed_lo = 42, seed_hi = 51;
    double tune = 1.3;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char name[32];
        int inline_v = gs__cli_split(a, name, sizeof(name), &v);
        if (inline_v)
            a = name;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage_bound, stdout);
            return 0;
        }
        if (strcmp(a, "--nodes") != 0 && strcmp(a, "--pods") != 0 && strcmp(a, "--seeds") != 0 &&
            strcmp(a, "--tune") != 0) {
            (void)fprintf(stderr, "gpusched bound: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!v || !*v) {
            (void)fprintf(stderr, "gpusched bound: %s needs a value\n", a);
            return 2;
        }
        if (!inline_v)
            i++;
        char *end;
        if (strcmp(a, "--nodes") == 0) {
            nodes = v;
        } else if (strcmp(a, "--pods") == 0) {
            pods = v;
        } else if (strcmp(a, "--seeds") == 0) {
            errno = 0;
            seed_lo = strtoull(v, &end, 10);
            seed_hi = seed_lo;
            if (!errno && *end == '-')
                seed_hi = strtoull(end + 1, &end, 10);
            if (errno || *end || *v < '0' || *v > '9' || seed_hi < seed_lo ||
                seed_hi - seed_lo > 999) {
                (void)fprintf(stderr,
                              "gpusched bound: --seeds: expected N or N-M (at most 1000 seeds), "
                              "got '%s'\n",
                              v);
                return 2;
            }
        } else {
            errno = 0;
            tune = strtod(v, &end);
            if (errno || *end || !(tune > 0) || tune > 100) {
                (void)fprintf(stderr, "gpusched bound: --tune: expected (0, 100], got '%s'\n", v);
                return 2;
            }
        }
    }
    if (!nodes || !pods) {
        (void)fprintf(stderr, "gpusched bound: --nodes and --pods are required (see --help)\n");
        return 2;
    }
    struct gs_sim_input *in = NULL;
    struct gs_diag d;
    memset(&d, 0, sizeof(d));
    int err = gs_sim_input_load(nodes, pods, NULL, &in, &d);
    if (err) {
        char msg[512];
        gs_diag_format(&d, msg, sizeof(msg));
        (void)fprintf(stderr, "gpusched bound: %s\n", *msg ? msg : gs_strerror(err));
        return err == GS_ENOMEM ? 1 : 2;
    }
    printf("%s: offline bound, tune %.2g, seeds %llu-%llu\n", gs_sim_input_name(in), tune, seed_lo,
           seed_hi);
    printf("  %6s %6s %7s %6s %10s %12s %24s\n", "seed", "pods", "shapes", "types", "arrived%",
           "alloc max%", "unallocated GPU % >=");
    double sum = 0, sum2 = 0;
    uint32_t n = 0;
    int rc = 0;
    for (unsigned long long seed = seed_lo; seed <= seed_hi; seed++) {
        struct gs_bound_result b;
        err = gs_bound_sim(in, seed, tune, NULL, &b);
        if (err) {
            (void)fprintf(stderr, "gpusched bound: seed %llu: %s%s\n", seed, gs_strerror(err),
                          err == GS_EINVAL ? " (milli-GPU requests only)" : "");
            rc = err == GS_ENOMEM ? 1 : 2;
            break;
        }
        printf("  %6llu %6u %7u %6u %10.2f %12.2f %24.2f\n", seed, b.pods, b.shapes, b.types,
               b.arrived_pct, 100.0 - b.unalloc_min_pct, b.unalloc_min_pct);
        sum += b.unalloc_min_pct;
        sum2 += b.unalloc_min_pct * b.unalloc_min_pct;
        n++;
    }
    if (n > 0 && rc == 0) {
        double mean = sum / n;
        double var = n > 1 ? (sum2 - n * mean * mean) / (n - 1) : 0;
        printf("  mean %.2f \xc2\xb1 %.2f %% of the GPUs must stay unallocated at 100 %% arrived, "
               "whatever the placement\n",
               mean, var > 0 ? sqrt(var) : 0.0);
    }
    gs_sim_input_free(in);
    return rc;
}
