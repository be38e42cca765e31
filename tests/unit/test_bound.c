/*
 * Tests of the offline bound (include/gpusched/bound.h): the linear programme on instances
 * solved by hand, and the bound of a simulator run against what the policies reach on the same
 * arrivals (a bound must never be beaten).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <glpk.h>
#include <math.h>

#include "gpusched/bound.h"
#include "gpusched/err.h"
#include "gpusched/sched.h"
#include "gpusched/sim.h"

/*
 * One type: 2 nodes of 2 GPUs and 10 cores each (20,000 milli-cores, 4 GPUs in all). Shapes:
 * A, 4 pods of 1 whole GPU and 6 cores; B, 2 pods of 600 milli-GPU and 1 core. Variables a, b
 * (pods of A and B placed). Rows: a <= 4, b <= 2; CPU 6000a + 1000b <= 20000; milli-GPU
 * 1000a + 600b <= 4000; GPUs held alone a + b <= 4 (B is above half a GPU); per node at most
 * floor(10000 / 6000) = 1 A, so a <= 2, and min(10 by CPU, 2 GPUs alone) = 2 B, so b <= 4.
 * Maximise 1000a + 600b: a = 2, b = 2 meets every row (CPU 14000, milli 3200, alone 4), and
 * both variables are at their caps, so the optimum is 3200: at least 20 % of the GPUs stay
 * unallocated. Here that is the integer optimum too (one A and one B per node). Without the
 * per-node caps the programme would reach 3680 (a = 3.2, b = 0.8, where CPU and the alone row
 * meet), which no placement can: three 6-core pods do not fit on two 10-core nodes.
 */
static void test_lp_of_two_shapes_on_one_type_is_solved_as_by_hand(void **state)
{
    (void)state;
    struct gs_bound_shape shapes[] = {{6000, 1024, 1, 1000, 4}, {1000, 1024, 1, 600, 2}};
    struct gs_bound_type types[] = {{10000, 65536, 110, 2, 2}};
    bool fits[] = {true, true};
    double opt = -1;
    assert_int_equal(gs_bound_lp(shapes, 2, types, 1, fits, &opt), GS_OK);
    assert_true(opt > 3200 - 1e-6 && opt < 3200 + 1e-6);
    /* With B at 500 milli two of them may share a GPU, so B holds no GPU alone: a <= 2 still,
     * b <= 2 by count; a = 2, b = 2 gives 2000 + 1000 = 3000 (CPU 14000, milli 3000). */
    shapes[1].gpu_milli = 500;
    assert_int_equal(gs_bound_lp(shapes, 2, types, 1, fits, &opt), GS_OK);
    assert_true(opt > 3000 - 1e-6 && opt < 3000 + 1e-6);
}

/*
 * Two types, one shape that fits only the second: 3 pods of 4 GPUs; type 0 has 2 nodes of 2
 * GPUs (no 4-GPU pod fits there), type 1 one node of 8 GPUs: at most 2 pods (8 GPUs, alone row
 * 4a <= 8, per node floor(8 / 4) = 2), so 8000 milli of the 12 GPUs' 12,000.
 */
static void test_lp_places_a_shape_only_where_it_fits(void **state)
{
    (void)state;
    struct gs_bound_shape shapes[] = {{1000, 1024, 4, 1000, 3}};
    struct gs_bound_type types[] = {{64000, 262144, 110, 2, 2}, {64000, 262144, 110, 8, 1}};
    bool fits[] = {false, true};
    double opt = -1;
    assert_int_equal(gs_bound_lp(shapes, 1, types, 2, fits, &opt), GS_OK);
    assert_true(opt > 8000 - 1e-6 && opt < 8000 + 1e-6);
    fits[1] = false;
    assert_int_equal(gs_bound_lp(shapes, 1, types, 2, fits, &opt), GS_OK);
    assert_true(opt == 0);
    shapes[0].count = -1;
    assert_int_equal(gs_bound_lp(shapes, 1, types, 2, fits, &opt), GS_EINVAL);
}

/*
 * The configuration programme on an instance worked by hand. Types: A, 2 nodes of 1 GPU and 8
 * cores; B, 1 node of 2 GPUs and 2 cores (4,000 milli-GPU in all). Shapes: S1, 4 pods of 600
 * milli and 1 core; S2, 1 pod of a whole GPU and 3 cores (no room on B); S3, 2 pods of 300
 * milli and 1 core (4,000 milli asked). Configurations of A: {S2} 1000, {S1, S3} 900, {S3, S3}
 * 600, {S1} 600, {S3} 300; of B (two pods at most, by CPU): {S1 | S1} 1200 and less. Placing
 * {S2} and {S1, S3} on the A nodes and {S1 | S1} on B gives 3,100; the duals mu_A 900, mu_B
 * 1200, pi_S2 100, pi_S1 = pi_S3 = 0 price every configuration at or above its milli-GPU
 * ({S2}: 900 + 100) and cost 2 x 900 + 1200 + 100 = 3,100, so 3,100 is the optimum: 22.5 % of
 * the GPUs stay unallocated. The aggregate programme (gs_bound_lp()) reaches 3,200 (A's 2,000
 * milli as S2 + S1 + 4/3 S3, B's two pods as S1), since it does not see that a 600-milli pod
 * leaves a third of its GPU to 300-milli pods only.
 */
static void test_cg_of_two_types_three_shapes_is_solved_as_by_hand(void **state)
{
    (void)state;
    struct gs_bound_shape shapes[] = {
        {1000, 1024, 1, 600, 4}, {3000, 1024, 1, 1000, 1}, {1000, 1024, 1, 300, 2}};
    struct gs_bound_type types[] = {{8000, 65536, 110, 1, 2}, {2000, 65536, 110, 2, 1}};
    bool fits[] = {true, true, true, false, true, true};
    struct gs_bound_cg_result r;
    assert_int_equal(gs_bound_cg(shapes, 3, types, 2, fits, NULL, &r), GS_OK);
    assert_true(r.converged && !r.column_cap && !r.round_cap && !r.pricing_truncated);
    assert_true(fabs(r.lp_milli - 3100) < 1e-6);
    assert_true(fabs(r.gpu_milli_max - 3100) < 1e-6);
    assert_true(fabs(r.farley_milli - 3100) < 1e-6 && fabs(r.lagrange_milli - 3100) < 1e-6);
    double agg = -1;
    assert_int_equal(gs_bound_lp(shapes, 3, types, 2, fits, &agg), GS_OK);
    assert_true(fabs(agg - 3200) < 1e-6);
    /*
     * Stopped after the first round's two columns ({S2} on A, {S1 | S1} on B, the best packings
     * at zero duals): the master places both, 2,200, with duals mu_A 0, pi_S2 1000, mu_B 1200.
     * Its value is no bound; the Lagrangian bound of the first round (zero duals: every node at
     * its best packing, 2 x 1000 + 1200 = 3,200) is, and Farley's is infinite ({S1} on A has a
     * zero dual price).
     */
    struct gs_bound_cg_limits lim = {2, 100, 1000};
    assert_int_equal(gs_bound_cg(shapes, 3, types, 2, fits, &lim, &r), GS_OK);
    assert_true(!r.converged && r.column_cap && r.columns == 2);
    assert_true(fabs(r.lp_milli - 2200) < 1e-6);
    assert_true(isinf(r.farley_milli));
    assert_true(fabs(r.lagrange_milli - 3200) < 1e-6 && fabs(r.gpu_milli_max - 3200) < 1e-6);
    /* Bad input is refused. */
    assert_int_equal(gs_bound_cg(shapes, 3, types, 2, fits, NULL, NULL), GS_EINVAL);
    shapes[0].num_gpu = 2; /* a share of two GPUs */
    assert_int_equal(gs_bound_cg(shapes, 3, types, 2, fits, NULL, &r), GS_EINVAL);
    shapes[0].num_gpu = 1;
    lim.columns_max = 0;
    assert_int_equal(gs_bound_cg(shapes, 3, types, 2, fits, &lim, &r), GS_EINVAL);
}

/* A small deterministic generator for the randomised test (xorshift64*). */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* Whether `left` shares (milli each) fit into the GPUs with free milli free[0..g). */
static bool shares_fit(const int32_t *share, uint32_t left, int32_t *free, uint32_t g)
{
    if (left == 0)
        return true;
    for (uint32_t k = 0; k < g; k++) {
        if (free[k] < share[left - 1])
            continue;
        free[k] -= share[left - 1];
        bool ok = shares_fit(share, left - 1, free, g);
        free[k] += share[left - 1];
        if (ok)
            return true;
    }
    return false;
}

/* Whether one empty node of type t holds n[s] pods of each shape, by brute force. */
static bool packing_fits(const struct gs_bound_shape *sh, uint32_t ns,
                         const struct gs_bound_type *ty, const uint32_t *n)
{
    int64_t cpu = 0, mem = 0, pods = 0;
    uint32_t whole = 0, nshare = 0;
    int32_t share[64];
    for (uint32_t s = 0; s < ns; s++) {
        cpu += n[s] * sh[s].cpu_milli;
        mem += n[s] * sh[s].mem_mib;
        pods += n[s];
        for (uint32_t k = 0; k < n[s]; k++) {
            if (sh[s].gpu_milli >= 1000)
                whole += sh[s].num_gpu;
            else
                share[nshare++] = sh[s].gpu_milli;
        }
    }
    if (cpu > ty->cpu_milli || mem > ty->mem_mib || pods > ty->pods_max || whole > ty->gpu_count)
        return false;
    int32_t free[16];
    for (uint32_t k = 0; k < ty->gpu_count - whole; k++)
        free[k] = 1000;
    return shares_fit(share, nshare, free, ty->gpu_count - whole);
}

/* The configuration programme with every configuration enumerated, solved by GLPK at once. */
static double cg_by_enumeration(const struct gs_bound_shape *sh, uint32_t ns,
                                const struct gs_bound_type *ty, uint32_t nt, const bool *fits)
{
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MAX);
    glp_add_rows(lp, (int)(nt + ns));
    for (uint32_t t = 0; t < nt; t++)
        glp_set_row_bnds(lp, (int)t + 1, GLP_UP, 0, ty[t].count);
    for (uint32_t s = 0; s < ns; s++)
        glp_set_row_bnds(lp, (int)(nt + s) + 1, GLP_UP, 0, sh[s].count);
    for (uint32_t t = 0; t < nt; t++) {
        uint32_t n[3] = {0, 0, 0};
        for (n[0] = 0; n[0] <= (uint32_t)sh[0].count; n[0]++)
            for (n[1] = 0; n[1] <= (ns > 1 ? (uint32_t)sh[1].count : 0); n[1]++)
                for (n[2] = 0; n[2] <= (ns > 2 ? (uint32_t)sh[2].count : 0); n[2]++) {
                    bool ok = true;
                    for (uint32_t s = 0; s < ns; s++)
                        ok &= n[s] == 0 || fits[s * nt + t];
                    if (!ok || !packing_fits(sh, ns, &ty[t], n))
                        continue;
                    int ind[5] = {0, (int)t + 1};
                    double val[5] = {0, 1};
                    int len = 1;
                    double gpu = 0;
                    for (uint32_t s = 0; s < ns; s++) {
                        if (!n[s])
                            continue;
                        ind[++len] = (int)(nt + s) + 1;
                        val[len] = n[s];
                        gpu += n[s] * (double)sh[s].num_gpu * sh[s].gpu_milli;
                    }
                    int col = glp_add_cols(lp, 1);
                    glp_set_col_bnds(lp, col, GLP_LO, 0, 0);
                    glp_set_obj_coef(lp, col, gpu);
                    glp_set_mat_col(lp, col, len, ind, val);
                }
    }
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    double z = NAN;
    if (glp_get_num_cols(lp) == 0)
        z = 0;
    else if (glp_simplex(lp, &parm) == 0 && glp_get_status(lp) == GLP_OPT)
        z = glp_get_obj_val(lp);
    glp_delete_prob(lp);
    return z;
}

/*
 * Random small instances (1-2 types of 1-3 GPUs, 1-3 shapes of up to 4 pods): column
 * generation converged reaches the optimum of the programme with every configuration listed
 * (found by brute force), at most the aggregate programme's; stopped early (1-3 columns, or
 * pricings cut after a few nodes) its master's value is at most the optimum and its bounds,
 * Farley's and the Lagrangian one, at least.
 */
static void test_cg_agrees_with_enumeration_and_bounds_hold_when_stopped(void **state)
{
    (void)state;
    static const int32_t millis[] = {200, 250, 300, 400, 500, 600, 700, 1000};
    uint64_t seed = 12;
    for (int trial = 0; trial < 300; trial++) {
        struct gs_bound_shape sh[3];
        struct gs_bound_type ty[2];
        bool fits[6];
        uint32_t ns = 1 + rnd(&seed) % 3, nt = 1 + rnd(&seed) % 2;
        for (uint32_t s = 0; s < ns; s++) {
            int32_t m = millis[rnd(&seed) % 8];
            sh[s] = (struct gs_bound_shape){(int64_t)(1 + rnd(&seed) % 4) * 1000, 1024,
                                            m == 1000 ? 1 + (uint32_t)(rnd(&seed) % 2) : 1, m,
                                            (double)(1 + rnd(&seed) % 4)};
        }
        for (uint32_t t = 0; t < nt; t++)
            ty[t] = (struct gs_bound_type){
                (int64_t)(2 + rnd(&seed) % 8) * 1000, 65536, 1 + (int64_t)(rnd(&seed) % 6),
                1 + (uint32_t)(rnd(&seed) % 3), (double)(1 + rnd(&seed) % 3)};
        for (uint32_t k = 0; k < ns * nt; k++)
            fits[k] = rnd(&seed) % 5 != 0;
        double z = cg_by_enumeration(sh, ns, ty, nt, fits);
        assert_false(isnan(z));
        struct gs_bound_cg_result r;
        assert_int_equal(gs_bound_cg(sh, ns, ty, nt, fits, NULL, &r), GS_OK);
        if (!r.converged || fabs(r.lp_milli - z) > 1e-6 || fabs(r.gpu_milli_max - z) > 1e-6)
            fail_msg("trial %d: column generation %.6f (bound %.6f, converged %d), "
                     "enumeration %.6f",
                     trial, r.lp_milli, r.gpu_milli_max, r.converged, z);
        double agg;
        assert_int_equal(gs_bound_lp(sh, ns, ty, nt, fits, &agg), GS_OK);
        assert_true(z <= agg + 1e-6);
        struct gs_bound_cg_limits lim = {1 + (uint32_t)(rnd(&seed) % 3), 100, 1 + rnd(&seed) % 4};
        assert_int_equal(gs_bound_cg(sh, ns, ty, nt, fits, &lim, &r), GS_OK);
        if (r.lp_milli > z + 1e-6 || r.farley_milli < z - 1e-6 || r.lagrange_milli < z - 1e-6 ||
            r.gpu_milli_max < z - 1e-6)
            fail_msg("trial %d stopped: master %.6f, Farley %.6f, Lagrangian %.6f, optimum %.6f",
                     trial, r.lp_milli, r.farley_milli, r.lagrange_milli, z);
    }
}

/* Every policy's unallocated GPU % at 100 % arrived on run (seed, 1.3) of `in` is at least
 * the bound; returns the bound. */
static double check_policies(const struct gs_sim_input *in, uint64_t seed, const int *policies,
                             int np, struct gs_bound_result *b)
{
    assert_int_equal(gs_bound_sim(in, seed, 1.3, NULL, b), GS_OK);
    assert_true(b->cg.converged);
    /* The configuration programme is never looser than the aggregate one. */
    assert_true(b->cg_unalloc_min_pct >= b->agg_unalloc_min_pct - 1e-9);
    assert_true(b->unalloc_min_pct >= b->cg_unalloc_min_pct - 1e-9);
    for (int k = 0; k < np; k++) {
        struct gs_sim_run_config cfg = {(uint32_t)policies[k], seed, 1.3};
        struct gs_sim_result *res = malloc(sizeof(*res));
        assert_non_null(res);
        assert_int_equal(gs_sim_run(in, &cfg, res), GS_OK);
        double unalloc = 100.0 - res->alloc_pct[100];
        if (!(b->unalloc_min_pct <= unalloc + 1e-9))
            fail_msg("%s, seed %llu: %.3f %% unallocated, below the bound %.3f %%",
                     gs_policy_name((uint32_t)policies[k]), (unsigned long long)seed, unalloc,
                     b->unalloc_min_pct);
        free(res);
    }
    return b->unalloc_min_pct;
}

static struct gs_sim_input *load(const char *nodes_rel, const char *pods_rel)
{
    const char *src = getenv("GS_SOURCE_DIR");
    char nodes[1024], pods[1024];
    (void)snprintf(nodes, sizeof nodes, "%s/%s", src ? src : ".", nodes_rel);
    (void)snprintf(pods, sizeof pods, "%s/%s", src ? src : ".", pods_rel);
    struct gs_sim_input *in = NULL;
    struct gs_diag d;
    assert_int_equal(gs_sim_input_load(nodes, pods, NULL, &in, &d), GS_OK);
    return in;
}

/*
 * On the bundled openb trace (the default pod list), seed 42, tune 1.3: the arrivals are cut in
 * column 100 (arrived request within [99.5 %, 100.5 %) of the 6,212 GPUs, by the column's
 * definition), and the bound is at most what bestfit, FGD and FGD-band leave unallocated there.
 * The aggregate programme places the whole capacity here (0 %); the configuration programme
 * does not (docs/internals/defrag.md).
 */
static void test_bound_is_never_beaten_by_a_policy_on_the_default_trace(void **state)
{
    (void)state;
    struct gs_sim_input *in = load("data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv",
                                   "data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv");
    int pol[] = {gs_policy_find("bestfit"), gs_policy_find("fgd"), gs_policy_find("fgdband")};
    for (int k = 0; k < 3; k++)
        assert_true(pol[k] >= 0);
    struct gs_bound_result b;
    check_policies(in, 42, pol, 3, &b);
    assert_true(b.arrived_gpu_milli >= 6212LL * 995 && b.arrived_gpu_milli < 6212LL * 1005);
    assert_true(b.pods > 0 && b.shapes > 1 && b.types > 1 && b.shapes <= b.pods);
    assert_true(b.agg_unalloc_min_pct < 1e-6);
    assert_true(b.cg_unalloc_min_pct > 0 && b.cg_unalloc_min_pct < 100);
    gs_sim_input_free(in);
}

/* On the 50-node slice, seeds 42-44: no policy of the registry beats the bound. */
static void test_bound_is_never_beaten_by_any_policy_on_the_slice(void **state)
{
    (void)state;
    struct gs_sim_input *in = load("tests/data/slice_nodes.csv", "tests/data/slice_pods.csv");
    int pol[GS_POLICY_COUNT];
    for (int k = 0; k < GS_POLICY_COUNT; k++)
        pol[k] = k;
    for (uint64_t seed = 42; seed <= 44; seed++) {
        struct gs_bound_result b;
        check_policies(in, seed, pol, GS_POLICY_COUNT, &b);
    }
    gs_sim_input_free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lp_of_two_shapes_on_one_type_is_solved_as_by_hand),
        cmocka_unit_test(test_lp_places_a_shape_only_where_it_fits),
        cmocka_unit_test(test_cg_of_two_types_three_shapes_is_solved_as_by_hand),
        cmocka_unit_test(test_cg_agrees_with_enumeration_and_bounds_hold_when_stopped),
        cmocka_unit_test(test_bound_is_never_beaten_by_a_policy_on_the_default_trace),
        cmocka_unit_test(test_bound_is_never_beaten_by_any_policy_on_the_slice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
