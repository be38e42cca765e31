/*
 * Benchmark of the dynamic MIG re-partition planner (src/core/mig_plan.c,
 * gs_mig_plan_repartition): the cost of one plan, the per-decision cost the engine pays for a
 * MIG request with no free instance on one GPU. Per model, random valid layouts (up to 12 tries
 * of a random profile at a random allowed start, a third of the instances held by pods) and a
 * random request (any profile, 1..3 instances); each case is timed over a batch of calls and
 * the per-call ns kept, then the median, the 99th percentile and the worst are printed with the
 * share of cases that get a plan. A last line times the largest search of the table: seven free
 * 1g.10gb on an H100-80GB asked one 7g.80gb (every one of the 128 destroy sets of sizes 0..7 is
 * tried before the only plan, all seven destroyed).
 *
 *   bench_migplan [--cases N] [--batch N] [--seed S]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "gpusched/mig_plan.h"
#include "gpusched/rng.h"

#include "bench_util.h"

/* A random valid layout of m, a third of its instances held. */
static uint32_t random_layout(struct gs_rng *rng, const struct gs_mig_model *m,
                              struct gs_mig_slot *cur)
{
    struct gs_mig_instance l[GS_MIG_INSTANCES_MAX];
    uint32_t n = 0;
    for (int t = 0; t < 12 && n < GS_MIG_INSTANCES_MAX; t++) {
        uint32_t p = gs_rng_below(rng, m->n_profiles);
        const struct gs_mig_profile *pr = &m->profiles[p];
        l[n] = (struct gs_mig_instance){(uint8_t)p, pr->starts[gs_rng_below(rng, pr->n_starts)]};
        if (gs_mig_layout_check(m, l, n + 1, NULL, 0) == GS_OK)
            n++;
    }
    for (uint32_t i = 0; i < n; i++)
        cur[i] = (struct gs_mig_slot){l[i], gs_rng_below(rng, 3) == 0};
    return n;
}

/* Per-call ns of `batch` identical calls; *rc and *evaluated from the last. */
static double time_plan(const struct gs_mig_model *m, const struct gs_mig_slot *cur, uint32_t n,
                        uint32_t p, uint32_t count, int batch, int *rc, uint32_t *evaluated)
{
    struct gs_mig_plan plan;
    plan.evaluated = 0;
    double t0 = now_us();
    for (int b = 0; b < batch; b++)
        *rc = gs_mig_plan_repartition(m, cur, n, p, count, &plan);
    double ns = (now_us() - t0) * 1e3 / batch;
    *evaluated = *rc == GS_OK ? plan.evaluated : 0;
    return ns;
}

static int usage(void)
{
    (void)fprintf(stderr, "usage: bench_migplan [--cases 1..1000000] [--batch 1..10000] "
                          "[--seed S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long cases = 20000, batch = 16;
    unsigned long long seed = 42;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "--cases") == 0)
            cases = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[++i], NULL, 10);
        else
            return usage();
    }
    if (cases < 1 || cases > 1000000 || batch < 1 || batch > 10000)
        return usage();
    double *t = malloc(sizeof(*t) * (size_t)cases);
    if (!t)
        return 1;
    struct gs_rng rng;
    gs_rng_seed(&rng, seed);
    (void)printf("%-11s %7s %6s %9s %9s %9s %11s\n", "model", "cases", "plan%", "p50 ns", "p99 ns",
                 "max ns", "max evals");
    for (uint32_t mi = 0; mi < gs_mig_model_count(); mi++) {
        const struct gs_mig_model *m = gs_mig_model_at(mi);
        long planned = 0;
        uint32_t max_evals = 0;
        for (long c = 0; c < cases; c++) {
            struct gs_mig_slot cur[GS_MIG_INSTANCES_MAX];
            uint32_t n = random_layout(&rng, m, cur);
            uint32_t p = gs_rng_below(&rng, m->n_profiles);
            uint32_t count = 1 + gs_rng_below(&rng, 3);
            int rc = GS_OK;
            uint32_t evals = 0;
            t[c] = time_plan(m, cur, n, p, count, (int)batch, &rc, &evals);
            planned += rc == GS_OK;
            if (evals > max_evals)
                max_evals = evals;
        }
        qsort(t, (size_t)cases, sizeof(*t), cmp_double);
        (void)printf("%-11s %7ld %5.1f%% %9.0f %9.0f %9.0f %11u\n", m->name, cases,
                     100.0 * (double)planned / (double)cases, t[cases / 2],
                     t[(size_t)((double)cases * 0.99)], t[cases - 1], max_evals);
    }
    /* The largest search: H100-80GB, seven free 1g.10gb, one 7g.80gb. */
    const struct gs_mig_model *h100 = gs_mig_model_find("H100-80GB");
    int p1 = gs_mig_profile_find(h100, "1g.10gb"), p7 = gs_mig_profile_find(h100, "7g.80gb");
    if (p1 < 0 || p7 < 0) {
        free(t);
        return 1;
    }
    struct gs_mig_slot seven[7];
    for (uint8_t s = 0; s < 7; s++)
        seven[s] = (struct gs_mig_slot){{(uint8_t)p1, s}, false};
    int reps = (int)(cases < 1001 ? cases : 1001);
    int rc = GS_OK;
    uint32_t evals = 0;
    for (int r = 0; r < reps; r++)
        t[r] = time_plan(h100, seven, 7, (uint32_t)p7, 1, (int)batch, &rc, &evals);
    qsort(t, (size_t)reps, sizeof(*t), cmp_double);
    (void)printf("H100-80GB 7 x 1g.10gb -> 7g.80gb: %s, %u evaluated, p50 %.0f ns, p99 %.0f ns\n",
                 rc == GS_OK ? "planned" : gs_strerror(rc), evals, t[reps / 2],
                 t[(size_t)((double)reps * 0.99)]);
    free(t);
    return 0;
}
