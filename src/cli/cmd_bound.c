/*
 * gpusched bound: the offline lower bound on unallocated GPU % at 100 % arrived workload for
 * the simulator's runs of a trace (include/gpusched/bound.h), one line per seed, and beside it
 * what chosen policies leave on the same runs (seed means), with the gap.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gpusched/bound.h"
#include "gpusched/err.h"
#include "gpusched/sched.h"
#include "gpusched/sim.h"

static const char *const usage_bound =
    "usage: gpusched bound --nodes FILE --pods FILE [--seeds N-M] [--tune X] [--policy LIST]\n"
    "                      [--columns N] [--rounds N] [--pricing-nodes N]\n"
    "\n"
    "A lower bound on the unallocated GPU % that any placement of a simulator run's arrivals\n"
    "could reach at 100 % arrived workload (simulate's first column), beside what the policies\n"
    "leave on the same runs. Two linear programmes over pod shapes and node types, solved with\n"
    "GLPK: an aggregate one (each type's CPU, memory, pods and GPUs in total) and a\n"
    "configuration one (whole-node packings, GPU by GPU, by column generation; when stopped\n"
    "by a cap its value is no bound and Farley's or the Lagrangian bound is taken). The\n"
    "bound is the larger. Milli-GPU requests only.\n"
    "\n"
    "options:\n"
    "  --nodes FILE        node list\n"
    "  --pods FILE         pod list\n"
    "  --seeds N-M         seeds of the runs (default 42-51), as simulate draws them\n"
    "  --tune X            GPU request as a multiple of capacity (default 1.3, as simulate)\n"
    "  --policy LIST       policies run beside the bound, comma list, or none (default\n"
    "                      bestfit,fgd,fgdband)\n"
    "  --columns N         column generation: most configurations (default 20000)\n"
    "  --rounds N          column generation: most rounds (default 2000)\n"
    "  --pricing-nodes N   column generation: most search nodes per pricing (default 50000;\n"
    "                      10 and then 100 times as many when a round finds nothing)\n"
    "  -h, --help          this text\n"
    "\n"
    "columns: aggregate% and config LP% are the two programmes' unallocated GPU % (config LP%\n"
    "is a bound only when stop is converged), bound% the bound; stop is converged, column cap,\n"
    "round cap or search cap (no column found, a pricing cut by --pricing-nodes).\n"
    "\n"
    "exit status:\n"
    "  0  done\n"
    "  1  internal error (out of memory)\n"
    "  2  bad usage or bad input (the message names the option, or file, line and field), or\n"
    "     requests the programme does not cover (memory, MIG, time-sliced)\n";

/* Reads a whole number in [lo, hi] for option `opt`; returns 0 or 2 after the message. */
static int read_count(const char *opt, const char *v, unsigned long long lo, unsigned long long hi,
                      unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || *v < '0' || *v > '9' || x < lo || x > hi) {
        (void)fprintf(stderr, "gpusched bound: %s: expected %llu..%llu, got '%s'\n", opt, lo, hi,
                      v);
        return 2;
    }
    *out = x;
    return 0;
}

/* Splits a --policy list into registry indices; returns their number, or -1 after the
 * message. */
static int read_policies(const char *v, int *pol)
{
    if (strcmp(v, "none") == 0)
        return 0;
    char buf[256];
    if (strlen(v) >= sizeof(buf)) {
        (void)fprintf(stderr, "gpusched bound: --policy: list too long\n");
        return -1;
    }
    (void)snprintf(buf, sizeof(buf), "%s", v);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *name = tok;
        if (gs__cli_policy_arg("bound", &name) != 0)
            return -1;
        int id = gs_policy_find(name);
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen |= pol[k] == id;
        if (!seen && n < GS_POLICY_COUNT)
            pol[n++] = id;
    }
    return n;
}

static const char *stop_name(const struct gs_bound_cg_result *cg)
{
    return cg->converged    ? "converged"
           : cg->column_cap ? "column cap"
           : cg->round_cap  ? "round cap"
                            : "search cap";
}

/* Mean and sample standard deviation (n - 1) of x[0..n). */
static void mean_std(const double *x, uint32_t n, double *mean, double *std)
{
    double s = 0, v = 0;
    for (uint32_t k = 0; k < n; k++)
        s += x[k];
    *mean = n ? s / n : 0;
    for (uint32_t k = 0; k < n; k++)
        v += (x[k] - *mean) * (x[k] - *mean);
    *std = n > 1 ? sqrt(v / (n - 1)) : 0;
}

int gs_cmd_bound(int argc, char **argv)
{
    static const char *const opts[] = {"--nodes",  "--pods",    "--seeds",  "--tune",
                                       "--policy", "--columns", "--rounds", "--pricing-nodes"};
    const char *nodes = NULL, *pods = NULL;
    unsigned long long seed_lo = 42, seed_hi = 51;
    double tune = 1.3;
    int pol[GS_POLICY_COUNT] = {gs_policy_find("bestfit"), gs_policy_find("fgd"),
                                gs_policy_find("fgdband")};
    int np = 3;
    struct gs_bound_cg_limits lim = {GS_BOUND_CG_COLUMNS_MAX, GS_BOUND_CG_ROUNDS_MAX,
                                     GS_BOUND_CG_NODES_MAX};
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
        bool known = false;
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++)
            known |= strcmp(a, opts[k]) == 0;
        if (!known) {
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
        unsigned long long x = 0;
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
        } else if (strcmp(a, "--tune") == 0) {
            errno = 0;
            tune = strtod(v, &end);
            if (errno || *end || !(tune > 0) || tune > 100) {
                (void)fprintf(stderr, "gpusched bound: --tune: expected (0, 100], got '%s'\n", v);
                return 2;
            }
        } else if (strcmp(a, "--policy") == 0) {
            if ((np = read_policies(v, pol)) < 0)
                return 2;
        } else if (strcmp(a, "--columns") == 0) {
            if (read_count(a, v, 1, 10000000, &x))
                return 2;
            lim.columns_max = (uint32_t)x;
        } else if (strcmp(a, "--rounds") == 0) {
            if (read_count(a, v, 1, 10000000, &x))
                return 2;
            lim.rounds_max = (uint32_t)x;
        } else {
            if (read_count(a, v, 1, 1000000000000ULL, &x))
                return 2;
            lim.pricing_nodes_max = x;
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
    uint32_t nseeds = (uint32_t)(seed_hi - seed_lo + 1);
    double *bound = calloc(nseeds, sizeof(*bound));
    double *unalloc = calloc((size_t)nseeds * (np > 0 ? (size_t)np : 1), sizeof(*unalloc));
    struct gs_sim_result *res = malloc(sizeof(*res));
    int rc = 0;
    if (!bound || !unalloc || !res) {
        (void)fprintf(stderr, "gpusched bound: %s\n", gs_strerror(GS_ENOMEM));
        rc = 1;
        goto out;
    }
    printf("%s: offline bound, tune %.2g, seeds %llu-%llu\n", gs_sim_input_name(in), tune, seed_lo,
           seed_hi);
    printf("  %6s %6s %6s %5s %8s %10s %10s %7s %7s %6s  %s\n", "seed", "pods", "shapes", "types",
           "arrived%", "aggregate%", "config LP%", "bound%", "columns", "rounds", "stop");
    uint32_t n = 0, capped = 0;
    for (unsigned long long seed = seed_lo; seed <= seed_hi; seed++, n++) {
        struct gs_bound_result b;
        err = gs_bound_sim(in, seed, tune, &lim, &b);
        if (err) {
            (void)fprintf(stderr, "gpusched bound: seed %llu: %s%s\n", seed, gs_strerror(err),
                          err == GS_EINVAL ? " (milli-GPU requests only)" : "");
            rc = err == GS_ENOMEM ? 1 : 2;
            goto out;
        }
        printf("  %6llu %6u %6u %5u %8.2f %10.2f %10.2f %7.2f %7u %6u  %s\n", seed, b.pods,
               b.shapes, b.types, b.arrived_pct, b.agg_unalloc_min_pct, b.cg_lp_pct,
               b.unalloc_min_pct, b.cg.columns, b.cg.rounds, stop_name(&b.cg));
        capped += !b.cg.converged;
        bound[n] = b.unalloc_min_pct;
        for (int k = 0; k < np; k++) {
            struct gs_sim_run_config cfg = {(uint32_t)pol[k], seed, tune};
            if ((err = gs_sim_run(in, &cfg, res)) != GS_OK) {
                (void)fprintf(stderr, "gpusched bound: %s, seed %llu: %s\n",
                              gs_policy_name((uint32_t)pol[k]), seed, gs_strerror(err));
                rc = err == GS_ENOMEM ? 1 : 2;
                goto out;
            }
            unalloc[(size_t)k * nseeds + n] = 100.0 - res->alloc_pct[100];
        }
    }
    double bm, bs;
    mean_std(bound, n, &bm, &bs);
    printf("  unallocated GPU %% @100%%, mean \xc2\xb1 std over the seeds; gap: points above the "
           "bound\n");
    printf("    %-10s %6.2f \xc2\xb1 %5.2f\n", "bound", bm, bs);
    for (int k = 0; k < np; k++) {
        double m, sd;
        mean_std(unalloc + (size_t)k * nseeds, n, &m, &sd);
        printf("    %-10s %6.2f \xc2\xb1 %5.2f   gap %5.2f\n", gs_policy_name((uint32_t)pol[k]), m,
               sd, m - bm);
    }
    printf("  no placement of these arrivals leaves fewer GPUs unallocated than the bound%s\n",
           capped ? " (column generation stopped by a cap on some seeds: their bound is Farley's "
                    "or the Lagrangian one)"
                  : "");
out:
    free(bound);
    free(unalloc);
    free(res);
    gs_sim_input_free(in);
    return rc;
}
