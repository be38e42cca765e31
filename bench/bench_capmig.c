/*
 * Benchmark of the MIG packing the Kubernetes translation runs for a Node without the agent's
 * inventory (src/k8s/kworld_capmig.c, gs__kcap_pack): the time to rebuild a node's per-GPU
 * layouts from the device plugin's nvidia.com/mig-<profile> counts, on H100-80GB, from a
 * typical node (7 x 1g.10gb + 2 x 3g.40gb) to mixes of every profile near the search's limit
 * (GS_KCAP_STATES_MAX). The scheduler runs it at each change of a MIG node's Node object; the
 * median and the slowest of the repeats are printed per mix.
 *
 *   bench_capmig [--repeat N]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "k8s/kworld_capmig.h"

#include "bench_util.h"

/* Instances per profile, in the H100-80GB table's order: 1g.10gb, 1g.10gb+me, 1g.20gb,
 * 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb. */
struct mix {
    const char *what;
    uint16_t n[7];
    uint32_t room;
};

static const struct mix mixes[] = {
    {"7 x 1g + 2 x 3g (one node's usual)", {7, 0, 0, 0, 2, 0, 0}, 8},
    {"56 x 1g.10gb on 8 GPUs", {56, 0, 0, 0, 0, 0, 0}, 8},
    {"60 x 1g + 20 x 1g.20gb", {60, 0, 20, 0, 0, 0, 0}, 16},
    {"every profile, 12 GPUs' worth", {20, 1, 8, 8, 6, 2, 1}, 16},
    {"every profile but 7g, 15 GPUs' worth", {20, 1, 12, 12, 7, 4, 0}, 16},
    {"no packing on 12 GPUs", {30, 2, 12, 6, 6, 3, 0}, 12},
};

int main(int argc, char **argv)
{
    int repeat = 21;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
    if (repeat < 1 || repeat > 10000) {
        (void)fprintf(stderr, "usage: bench_capmig [--repeat 1..10000]\n");
        return 2;
    }
    const struct gs_mig_model *m = gs_mig_model_find("H100-80GB");
    double *t = malloc(sizeof(*t) * (size_t)repeat);
    if (!m || !t)
        return 1;
    (void)printf("%-40s %6s %5s %12s %12s\n", "H100-80GB mix", "result", "GPUs", "median ms",
                 "max ms");
    for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k++) {
        struct gs__kcap_counts c;
        memset(&c, 0, sizeof c);
        c.model = m;
        memcpy(c.n, mixes[k].n, sizeof mixes[k].n);
        struct gs_gpu_mode l[GS_NODE_GPUS_MAX];
        uint32_t gpus = 0;
        int rc = GS_OK;
        for (int r = 0; r < repeat; r++) {
            double t0 = now_us();
            rc = gs__kcap_pack(&c, mixes[k].room, l, &gpus);
            t[r] = now_us() - t0;
        }
        qsort(t, (size_t)repeat, sizeof(*t), cmp_double);
        (void)printf("%-40s %6s %5u %12.3f %12.3f\n", mixes[k].what,
                     rc == GS_OK       ? "packed"
                     : rc == GS_ENOENT ? "none"
                                       : gs_strerror(rc),
                     gpus, t[repeat / 2] / 1e3, t[repeat - 1] / 1e3);
    }
    free(t);
    return 0;
}
