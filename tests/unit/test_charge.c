/*
 * Unit tests of charging by capacity (include/gpusched/charge.h). Every expected value is
 * worked out by hand beside it from the rules in the header (issue 8's "Quota charged by what
 * is used"), never copied from the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"

#define H_MS INT64_C(3600000)

/* cmocka's assert_float_equal compares as float; these values need double precision. */
#define assert_near(a, b, eps) assert_near_at((a), (b), (eps), __FILE__, __LINE__)
static void assert_near_at(double a, double b, double eps, const char *file, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("%.15g != %.15g (within %g)\n", a, b, eps);
        _fail(file, line);
    }
}

static struct gs_charge_grant milli(int32_t m)
{
    return (struct gs_charge_grant){.sharing = GS_GPU_SHARE_MILLI, .gpu_milli = m};
}

static void test_quarter_gpu_is_a_quarter(void **state)
{
    (void)state;
    double s;
    struct gs_charge_grant g = milli(250);
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 0.25, 1e-12); /* 250 / 1000 */
}

static void test_four_quarter_pods_for_an_hour_make_one_gpu_hour(void **state)
{
    (void)state;
    struct gs_charge_grant g = milli(250);
    double total = 0, h;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(gs_charge_gpu_hours(&g, 1, H_MS, &h), GS_OK);
        total += h;
    }
    assert_near(total, 1.0, 1e-12); /* 4 x 0.25 x 1 h */
    /* Three of them leave 1 - 0.75 = 0.25 GPU-hours of the GPU's hour idle. */
    assert_near(1.0 - 3 * h, 0.25, 1e-12);
}

static void test_memory_share_wins_when_larger(void **state)
{
    (void)state;
    double s;
    /* 100 milli (0.1) but 40,960 of 81,920 MiB (0.5): charged 0.5. */
    struct gs_charge_grant g = {
        .sharing = GS_GPU_SHARE_MILLI, .gpu_milli = 100, .mem_mib = 40960, .gpu_mem_mib = 81920};
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 0.5, 1e-12);
    /* 600 milli and 8,192 of 81,920 MiB (0.1): compute wins, 0.6. */
    g.gpu_milli = 600;
    g.mem_mib = 8192;
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 0.6, 1e-12);
    /* GPU memory unknown: compute only, 0.6. */
    g.gpu_mem_mib = 0;
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 0.6, 1e-12);
}

static void test_mig_instance_by_its_slices(void **state)
{
    (void)state;
    double s;
    struct gs_charge_grant g = {.sharing = GS_GPU_SHARE_MIG, .mig_slices = 1, .gpu_mig_slices = 7};
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 1.0 / 7.0, 1e-12); /* 1g of 7 */
    g.mig_slices = 3;
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 3.0 / 7.0, 1e-12); /* 3g of 7 */
    /* A 1g instance held for 7 hours is one GPU-hour: 7 x 1/7. */
    g.mig_slices = 1;
    double h;
    assert_int_equal(gs_charge_gpu_hours(&g, 1, 7 * H_MS, &h), GS_OK);
    assert_near(h, 1.0, 1e-12);
}

static void test_time_sliced_replica_is_one_over_n(void **state)
{
    (void)state;
    double s;
    struct gs_charge_grant g = {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4};
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 0.25, 1e-12); /* 1/4 */
    g.replicas = 1;
    assert_int_equal(gs_charge_share(&g, &s), GS_OK);
    assert_near(s, 1.0, 1e-12);
}

static void test_eight_gpu_pod_evicted_after_half_an_hour_is_four_gpu_hours(void **state)
{
    (void)state;
    struct gs_charge_grant g = milli(1000);
    double h;
    assert_int_equal(gs_charge_gpu_hours(&g, 8, H_MS / 2, &h), GS_OK);
    assert_near(h, 4.0, 1e-12); /* 8 x 1 x 0.5 h */
}

static void test_only_the_inside_of_a_period_counts(void **state)
{
    (void)state;
    /* A pod from 10:30 to 12:30 and a period 11:00-12:00: one hour inside. */
    assert_int_equal(
        gs_charge_overlap_ms(10 * H_MS + H_MS / 2, 12 * H_MS + H_MS / 2, 11 * H_MS, 12 * H_MS),
        H_MS);
    /* Starting at 11:45, ending at 13:00: 15 minutes inside. */
    assert_int_equal(
        gs_charge_overlap_ms(11 * H_MS + 3 * H_MS / 4, 13 * H_MS, 11 * H_MS, 12 * H_MS), H_MS / 4);
    /* Entirely before, touching at the boundary, inside, empty. */
    assert_int_equal(gs_charge_overlap_ms(0, 11 * H_MS, 11 * H_MS, 12 * H_MS), 0);
    assert_int_equal(gs_charge_overlap_ms(11 * H_MS + 1, 11 * H_MS + 2, 11 * H_MS, 12 * H_MS), 1);
    assert_int_equal(gs_charge_overlap_ms(5, 5, 0, 10), 0);
}

static void test_bad_grants_are_refused_with_zero(void **state)
{
    (void)state;
    double s = 9, h = 9;
    struct gs_charge_grant g = milli(0);
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    assert_true(s == 0);
    g = milli(1001);
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    g = (struct gs_charge_grant){
        .sharing = GS_GPU_SHARE_MILLI, .gpu_milli = 500, .mem_mib = 9, .gpu_mem_mib = 8};
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    g = (struct gs_charge_grant){.sharing = GS_GPU_SHARE_MIG, .mig_slices = 8, .gpu_mig_slices = 7};
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    g = (struct gs_charge_grant){.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 0};
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    g = (struct gs_charge_grant){.sharing = 9};
    assert_int_equal(gs_charge_share(&g, &s), GS_EINVAL);
    g = milli(500);
    assert_int_equal(gs_charge_gpu_hours(&g, 1, -1, &h), GS_EINVAL);
    assert_true(h == 0);
    assert_int_equal(gs_charge_gpu_hours(&g, GS_NODE_GPUS_MAX + 1, 1, &h), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quarter_gpu_is_a_quarter),
        cmocka_unit_test(test_four_quarter_pods_for_an_hour_make_one_gpu_hour),
        cmocka_unit_test(test_memory_share_wins_when_larger),
        cmocka_unit_test(test_mig_instance_by_its_slices),
        cmocka_unit_test(test_time_sliced_replica_is_one_over_n),
        cmocka_unit_test(test_eight_gpu_pod_evicted_after_half_an_hour_is_four_gpu_hours),
        cmocka_unit_test(test_only_the_inside_of_a_period_counts),
        cmocka_unit_test(test_bad_grants_are_refused_with_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
