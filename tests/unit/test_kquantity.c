/*
 * Kubernetes quantities and times, each expected value worked by hand from the suffix tables of
 * k8s.io/apimachinery's resource.Quantity and from RFC 3339.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpusched/kquantity.h"

static int64_t q(const char *s, double unit, bool up)
{
    int64_t v = -12345;
    assert_int_equal(gs_kquantity(s, unit, up, &v), 0);
    return v;
}

static void test_cpu_to_milli_cores(void **state)
{
    (void)state;
    assert_int_equal(q("4", 1e-3, true), 4000);
    assert_int_equal(q("500m", 1e-3, true), 500);
    assert_int_equal(q("1.5", 1e-3, true), 1500);
    assert_int_equal(q("0.1", 1e-3, true), 100);     /* no binary noise: 0.1 x 1000 is 100 */
    assert_int_equal(q("100u", 1e-3, true), 1);      /* 0.1 milli rounds up for a request */
    assert_int_equal(q("100u", 1e-3, false), 0);     /* and down for a capacity */
    assert_int_equal(q("2e3", 1e-3, true), 2000000); /* 2000 cores */
    assert_int_equal(q("+3", 1e-3, true), 3000);
}

static void test_memory_to_mib(void **state)
{
    (void)state;
    assert_int_equal(q("16Gi", 1048576.0, true), 16384);
    assert_int_equal(q("512Mi", 1048576.0, true), 512);
    assert_int_equal(q("1G", 1048576.0, false), 953); /* 10^9 / 2^20 = 953.67 */
    assert_int_equal(q("1G", 1048576.0, true), 954);
    assert_int_equal(q("128974848", 1048576.0, true), 123); /* 123 x 2^20 bytes exactly */
    assert_int_equal(q("1Ti", 1048576.0, true), 1048576);
    assert_int_equal(q("1.5Gi", 1048576.0, true), 1536);
}

static void test_bad_quantities_are_refused(void **state)
{
    (void)state;
    int64_t v;
    const char *bad[] = {
        "", "lots", "-1", "1 Gi", " 1", "1Gb", "1.2.3", "e3", "1e", "Gi", "99999999999999999999Ei"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gs_kquantity(bad[i], 1.0, true, &v), -1);
    assert_int_equal(gs_kquantity(NULL, 1.0, true, &v), -1);
}

static void test_rfc3339_times(void **state)
{
    (void)state;
    int64_t t;
    assert_int_equal(gs_ktime_ms("1970-01-01T00:00:00Z", &t), 0);
    assert_int_equal(t, 0);
    /* 2026-12-01: 20,788 days after the epoch (56 years, 14 leap days, 334 days of 2026). */
    assert_int_equal(gs_ktime_ms("2026-12-01T20:03:27Z", &t), 0);
    assert_int_equal(t, (20788LL * 86400 + 20 * 3600 + 3 * 60 + 27) * 1000);
    assert_int_equal(gs_ktime_ms("2026-12-01T22:03:27.250+02:00", &t), 0);
    assert_int_equal(t, (20788LL * 86400 + 20 * 3600 + 3 * 60 + 27) * 1000 + 250);
    assert_int_equal(gs_ktime_ms("2000-02-29T00:00:00Z", &t), 0);
    assert_int_equal(t, 951782400000LL);
    assert_int_equal(gs_ktime_ms("2026-13-01T00:00:00Z", &t), -1);
    assert_int_equal(gs_ktime_ms("2026-12-01 20:03", &t), -1);
    assert_int_equal(gs_ktime_ms("2026-12-01T20:03:27", &t), -1); /* no zone */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_to_milli_cores),
        cmocka_unit_test(test_memory_to_mib),
        cmocka_unit_test(test_bad_quantities_are_refused),
        cmocka_unit_test(test_rfc3339_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
