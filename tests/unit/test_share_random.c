/*
 * Randomised invariants of GPU sharing: one node mixes every mode (fractions with known memory,
 * whole, time-slicing with 3 and 5 slots, MIG with a mixed layout and seven 1g) beside a plain
 * fractions node, and seeded worlds (each under one of the six policies) place requests of every
 * kind, release them, adopt them back, bind random hand-made placements (which must be refused
 * unless they fit) and flip GPU health. After every step the node's books are recomputed from
 * the live placements and compared: milli, MiB, slots and MIG instances held per GPU; memory
 * never above the GPU's, slots never above the GPU's, no MIG instance held twice, and the
 * derived free values. At the end every pod is released and the GPUs are exactly as at the
 * start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/mig.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#define WORLDS 24
#define STEPS 3000
#define LIVE_MAX 256
#define MEM 81920 /* MiB per GPU */

struct live {
    struct gs_pod_req req;
    struct gs_placement pl;
};

struct world {
    struct gs_cluster *c;
    struct gs_sched *s;
    struct gs_rng rng;
    struct live live[LIVE_MAX];
    uint32_t n_live;
    struct gs_gpu start[2][GS_NODE_GPUS_MAX];
    uint64_t placed[4], refused_random, bound_random, adopted;
};

static const char *const profiles[] = {"1g.10gb", "1g.20gb", "2g.20gb",   "3g.40gb",
                                       "4g.40gb", "7g.80gb", "1g.10gb+me"};

static uint32_t below(struct world *w, uint32_t n)
{
    return gs_rng_below(&w->rng, n);
}

static void build(struct world *w, uint32_t policy, uint64_t seed)
{
    memset(w, 0, sizeof(*w));
    gs_rng_seed(&w->rng, seed);
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    const struct gs_mig_model *m = gs_mig_model_find("H100-80GB");
#define P(name) ((uint8_t)gs_mig_profile_find(m, name))
    struct gs_gpu_mode modes[8] = {
        {.sharing = GS_GPU_SHARE_MILLI},
        {.sharing = GS_GPU_SHARE_MILLI},
        {.sharing = GS_GPU_SHARE_WHOLE},
        {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 3},
        {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 5},
        {.sharing = GS_GPU_SHARE_MIG,
         .mig_count = 4,
         .mig = {{P("3g.40gb"), 4}, {P("2g.20gb"), 0}, {P("1g.10gb"), 2}, {P("1g.10gb+me"), 3}}},
        {.sharing = GS_GPU_SHARE_MIG,
         .mig_count = 7,
         .mig = {{P("1g.10gb"), 0},
                 {P("1g.10gb"), 1},
                 {P("1g.10gb"), 2},
                 {P("1g.10gb"), 3},
                 {P("1g.10gb"), 4},
                 {P("1g.10gb"), 5},
                 {P("1g.10gb"), 6}}},
        {.sharing = GS_GPU_SHARE_MILLI},
    };
#undef P
    struct gs_node_spec mixed = {.name = "mixed",
                                 .cpu_milli = 256000,
                                 .mem_mib = 1 << 20,
                                 .pods_max = 200,
                                 .gpu_count = 8,
                                 .gpu_model = "NVIDIA-H100-80GB-HBM3",
                                 .gpu_mem_mib = MEM,
                                 .gpu_modes = modes};
    struct gs_node_spec plain = {.name = "plain",
                                 .cpu_milli = 256000,
                                 .mem_mib = 1 << 20,
                                 .pods_max = 200,
                                 .gpu_count = 4,
                                 .gpu_model = "NVIDIA-H100-80GB-HBM3",
                                 .gpu_mem_mib = MEM};
    assert_int_equal(gs_cluster_add_node(w->c, &mixed, NULL), GS_OK);
    assert_int_equal(gs_cluster_add_node(w->c, &plain, NULL), GS_OK);
    for (uint32_t n = 0; n < 2; n++)
        memcpy(w->start[n], gs_cluster_node(w->c, n)->gpus, sizeof(w->start[n]));
    static char any[] = "";
    static struct gs_task_type t = {1000, 500, 1, GS_MODEL_ANY, any, 1, 1.0};
    static struct gs_workload wl = {&t, 1, 1, 1};
    struct gs_sched_config cfg = {.policy = gs_policy_name(policy), .workload = &wl};
    assert_int_equal(gs_sched_new(w->c, &cfg, &w->s), GS_OK);
}

static struct gs_pod_req random_req(struct world *w)
{
    struct gs_pod_req r = {.cpu_milli = below(w, 4) * 500,
                           .mem_mib = below(w, 4) * 1024,
                           .gpu_model_mask = GS_MODEL_ANY};
    switch (below(w, 4)) {
    case 0: /* milli: a fraction, or 1-3 whole GPUs */
        if (below(w, 2)) {
            r.num_gpu = 1;
            r.gpu_milli = 1 + (int32_t)below(w, 999);
        } else {
            r.num_gpu = 1 + below(w, 3);
            r.gpu_milli = 1000;
        }
        break;
    case 1: /* memory, MiB or %, with or without compute, on 1-2 GPUs */
        r.num_gpu = 1 + below(w, 2);
        if (below(w, 2))
            r.gpu_mem_mib = 1 + below(w, MEM);
        else
            r.gpu_mem_pct = (uint8_t)(1 + below(w, 100));
        r.gpu_milli = below(w, 2) ? (int32_t)below(w, 1000) : 0;
        break;
    case 2:
        r.timeslice_slots = (uint8_t)(1 + below(w, 3));
        break;
    default:
        r.mig_count = (uint8_t)(1 + below(w, 3));
        (void)snprintf(r.mig_profile, sizeof(r.mig_profile), "%s",
                       profiles[below(w, sizeof(profiles) / sizeof(profiles[0]))]);
        break;
    }
    return r;
}

/* A placement made up at random for a request: most do not fit and must be refused. */
static struct gs_placement random_placement(struct world *w, const struct gs_pod_req *r)
{
    struct gs_placement pl = {.node = below(w, 2)};
    uint32_t count = gs_cluster_node(w->c, pl.node)->gpu_count;
    if (r->mig_count) {
        pl.mig_count = r->mig_count;
        for (uint32_t i = 0; i < pl.mig_count; i++)
            pl.mig[i] = (struct gs_placement_mig){(uint8_t)below(w, count), (uint8_t)below(w, 7),
                                                  (uint8_t)below(w, 8)};
        return pl;
    }
    pl.num_gpu = r->timeslice_slots ? r->timeslice_slots : r->num_gpu;
    pl.gpu_milli = r->gpu_milli;
    for (uint32_t k = 0; k < pl.num_gpu; k++) {
        pl.gpu_index[k] = (uint8_t)below(w, count);
        pl.gpu_mem_mib[k] = (int32_t)(r->gpu_mem_pct ? MEM * r->gpu_mem_pct / 100 : r->gpu_mem_mib);
    }
    return pl;
}

static void add_live(struct world *w, const struct gs_pod_req *r, const struct gs_placement *pl)
{
    assert_true(w->n_live < LIVE_MAX);
    w->live[w->n_live++] = (struct live){*r, *pl};
}

/* The books of every GPU recomputed from the live placements, against the cluster's. */
static void check(struct world *w)
{
    for (uint32_t n = 0; n < 2; n++) {
        const struct gs_node *nd = gs_cluster_node(w->c, n);
        int64_t milli[GS_NODE_GPUS_MAX] = {0}, mem[GS_NODE_GPUS_MAX] = {0};
        uint32_t slots[GS_NODE_GPUS_MAX] = {0}, pods[GS_NODE_GPUS_MAX] = {0}, npods = 0;
        uint8_t held[GS_NODE_GPUS_MAX] = {0};
        for (uint32_t i = 0; i < w->n_live; i++) {
            const struct live *l = &w->live[i];
            if (l->pl.node != n)
                continue;
            npods++;
            if (l->req.mig_count) {
                uint32_t touched = 0;
                for (uint32_t k = 0; k < l->pl.mig_count; k++) {
                    const struct gs_placement_mig *m = &l->pl.mig[k];
                    const struct gs_gpu *g = &nd->gpus[m->gpu];
                    int idx = -1;
                    for (uint32_t j = 0; j < g->mig_count; j++)
                        if (g->mig[j].profile == m->profile && g->mig[j].start == m->start)
                            idx = (int)j;
                    assert_true(idx >= 0);
                    /* Never held twice. */
                    assert_false(held[m->gpu] >> idx & 1);
                    held[m->gpu] |= (uint8_t)(1u << idx);
                    if (!(touched >> m->gpu & 1))
                        pods[m->gpu]++;
                    touched |= 1u << m->gpu;
                }
                continue;
            }
            for (uint32_t k = 0; k < l->pl.num_gpu; k++) {
                uint32_t g = l->pl.gpu_index[k];
                const struct gs_gpu *gpu = &nd->gpus[g];
                pods[g]++;
                if (l->req.timeslice_slots) {
                    slots[g]++;
                    continue;
                }
                milli[g] += l->pl.gpu_milli;
                mem[g] += gs_req_kind(&l->req) == GS_REQ_MEMORY
                              ? l->pl.gpu_mem_mib[k]
                              : gpu->mem_mib * l->pl.gpu_milli / GS_GPU_MILLI;
            }
        }
        assert_int_equal(nd->pods, npods);
        uint32_t full = 0;
        for (uint32_t g = 0; g < nd->gpu_count; g++) {
            const struct gs_gpu *gpu = &nd->gpus[g];
            assert_int_equal(gpu->gpu_milli_used, milli[g]);
            assert_int_equal(gpu->mem_mib_used, mem[g]);
            assert_int_equal(gpu->replicas_used, slots[g]);
            assert_int_equal(gpu->mig_held, held[g]);
            assert_int_equal(gpu->pods, pods[g]);
            /* Never more granted than the GPU has. */
            assert_true(gpu->gpu_milli_used <= gpu->gpu_milli);
            assert_true(gpu->mem_mib_used <= gpu->mem_mib);
            assert_true(gpu->replicas_used <= gpu->replicas);
            assert_int_equal(gpu->mem_mib_free, gpu->mem_mib - gpu->mem_mib_used);
            /* What a milli request could still take fits in both compute and memory. */
            int32_t f = gpu->gpu_milli_free;
            assert_true(f >= 0 && gpu->gpu_milli_used + f <= gpu->gpu_milli);
            assert_true(gpu->mem_mib_used + gpu->mem_mib * f / GS_GPU_MILLI <= gpu->mem_mib);
            if (gpu->sharing == GS_GPU_SHARE_TIMESLICE || gpu->sharing == GS_GPU_SHARE_MIG ||
                !gpu->healthy)
                assert_int_equal(f, 0);
            full += f == GS_GPU_MILLI;
            /* Compute slices held: the union of the held instances' slices. */
            uint32_t slices = 0;
            for (uint32_t j = 0; j < gpu->mig_count; j++)
                if (held[g] >> j & 1)
                    slices |= gs_mig_compute_mask(gpu->mig_model, gpu->mig[j]);
            assert_int_equal(gpu->mig_slices_used, slices);
        }
        assert_int_equal(nd->gpus_full_free, full);
    }
}

static void step(struct world *w)
{
    uint32_t op = below(w, 100);
    if (op < 45) { /* place through the policy */
        struct gs_pod_req r = random_req(w);
        struct gs_placement pl;
        int err = gs_sched_place(w->s, &r, &w->rng, &pl);
        if (err == GS_OK && w->n_live < LIVE_MAX) {
            assert_int_equal(gs_cluster_bind(w->c, &r, &pl), GS_OK);
            add_live(w, &r, &pl);
            w->placed[gs_req_kind(&r)]++;
        } else if (err != GS_OK) {
            assert_int_equal(err, GS_EUNSCHEDULABLE);
        }
    } else if (op < 60) { /* a made-up placement: bound only if it fits */
        struct gs_pod_req r = random_req(w);
        struct gs_placement pl = random_placement(w, &r);
        if (w->n_live < LIVE_MAX && gs_cluster_bind(w->c, &r, &pl) == GS_OK) {
            add_live(w, &r, &pl);
            w->bound_random++;
        } else {
            w->refused_random++;
        }
    } else if (op < 90 && w->n_live > 0) { /* release one, sometimes adopt it back */
        uint32_t i = below(w, w->n_live);
        struct live l = w->live[i];
        assert_int_equal(gs_cluster_unbind(w->c, &l.req, &l.pl), GS_OK);
        w->live[i] = w->live[--w->n_live];
        if (below(w, 3) == 0) {
            assert_int_equal(gs_cluster_adopt(w->c, &l.req, &l.pl), GS_OK);
            add_live(w, &l.req, &l.pl);
            w->adopted++;
        }
    } else { /* flip a GPU's health */
        uint32_t n = below(w, 2);
        uint32_t g = below(w, gs_cluster_node(w->c, n)->gpu_count);
        bool h = gs_cluster_node(w->c, n)->gpus[g].healthy;
        assert_int_equal(gs_cluster_set_gpu_health(w->c, n, g, !h), GS_OK);
    }
    check(w);
}

static void test_all_modes_mixed_keep_exact_books(void **state)
{
    (void)state;
    uint64_t placed[4] = {0}, refused = 0, bound = 0, adopted = 0;
    for (uint32_t k = 0; k < WORLDS; k++) {
        struct world w;
        build(&w, k % GS_POLICY_COUNT, 1000 + k);
        for (uint32_t t = 0; t < STEPS; t++)
            step(&w);
        /* Everything released: the GPUs as they started (health restored first). */
        while (w.n_live > 0) {
            struct live *l = &w.live[--w.n_live];
            assert_int_equal(gs_cluster_unbind(w.c, &l->req, &l->pl), GS_OK);
        }
        for (uint32_t n = 0; n < 2; n++) {
            const struct gs_node *nd = gs_cluster_node(w.c, n);
            for (uint32_t g = 0; g < nd->gpu_count; g++) {
                assert_int_equal(gs_cluster_set_gpu_health(w.c, n, g, true), GS_OK);
                const struct gs_gpu *a = &nd->gpus[g], *b = &w.start[n][g];
                assert_int_equal(a->gpu_milli_used, 0);
                assert_int_equal(a->mem_mib_used, 0);
                assert_int_equal(a->replicas_used, 0);
                assert_int_equal(a->mig_held, 0);
                assert_int_equal(a->mig_slices_used, 0);
                assert_int_equal(a->pods, 0);
                assert_int_equal(a->gpu_milli_free, b->gpu_milli_free);
                assert_int_equal(a->mem_mib_free, b->mem_mib_free);
            }
        }
        check(&w);
        for (int i = 0; i < 4; i++)
            placed[i] += w.placed[i];
        refused += w.refused_random;
        bound += w.bound_random;
        adopted += w.adopted;
        gs_sched_free(w.s);
        gs_cluster_free(w.c);
    }
    /* The worlds exercised every kind, and both outcomes of made-up placements. */
    print_message("placed milli %llu memory %llu timeslice %llu mig %llu; made-up placements "
                  "bound %llu refused %llu; adopted %llu\n",
                  (unsigned long long)placed[0], (unsigned long long)placed[1],
                  (unsigned long long)placed[2], (unsigned long long)placed[3],
                  (unsigned long long)bound, (unsigned long long)refused,
                  (unsigned long long)adopted);
    for (int i = 0; i < 4; i++)
        assert_true(placed[i] > 100);
    assert_true(bound > 10 && refused > 1000 && adopted > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_modes_mixed_keep_exact_books),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
