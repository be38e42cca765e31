/*
 * The KAI Queue fields gpusched ignores (src/k8s/kworld_kai.c): the list said in the one
 * warning per queue, its order (as written), and a list too long for the buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "k8s/kworld_kai.h"

static unsigned ignored(const char *spec_json, char *buf, size_t cap)
{
    json_error_t je;
    json_t *spec = spec_json ? json_loads(spec_json, 0, &je) : NULL;
    if (spec_json)
        assert_non_null(spec);
    unsigned n = gs__kai_queue_ignored(spec, buf, cap);
    json_decref(spec);
    return n;
}

/* Everything gpusched reads, and nothing else: no field is ignored. */
static void test_read_fields_are_not_listed(void **state)
{
    (void)state;
    char buf[256];
    assert_int_equal(ignored("{\"parentQueue\": \"lab\", \"resources\": {"
                             "\"gpu\": {\"quota\": 1, \"limit\": 2, \"overQuotaWeight\": 1},"
                             "\"cpu\": {\"quota\": 500}, \"memory\": {\"limit\": -1}}}",
                             buf, sizeof buf),
                     0);
    assert_string_equal(buf, "");
    assert_int_equal(ignored(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_int_equal(ignored("[1]", buf, sizeof buf), 0);
}

/* Fields at each level, in the order written: a spec field, a resource gpusched does not
 * know, a field of a known resource, a resource that is not an object, and resources that is
 * not an object. */
static void test_each_level_in_order(void **state)
{
    (void)state;
    char buf[256];
    assert_int_equal(ignored("{\"priority\": 3, \"resources\": {\"nic\": {\"quota\": 1},"
                             "\"gpu\": {\"quota\": 1, \"burst\": 2}, \"cpu\": 4},"
                             "\"preemptMinRuntime\": \"1m\"}",
                             buf, sizeof buf),
                     5);
    assert_string_equal(buf, "spec.priority, spec.resources.nic, spec.resources.gpu.burst, "
                             "spec.resources.cpu, spec.preemptMinRuntime");
    assert_int_equal(ignored("{\"resources\": 7}", buf, sizeof buf), 1);
    assert_string_equal(buf, "spec.resources");
}

/* A list longer than the buffer ends in "..." and still counts every field: with 16 bytes,
 * "spec.displayName" (16 characters) does not fit, so the first 12 and "..." are kept. */
static void test_long_list_is_cut_with_dots(void **state)
{
    (void)state;
    char buf[16];
    assert_int_equal(ignored("{\"displayName\": \"x\", \"priority\": 1}", buf, sizeof buf), 2);
    assert_string_equal(buf, "spec.display...");
    char buf2[24]; /* "spec.a, spec.b" fits (14), ", spec.ccccccccccc" does not */
    assert_int_equal(ignored("{\"a\": 1, \"b\": 2, \"ccccccccccc\": 3}", buf2, sizeof buf2), 3);
    assert_string_equal(buf2, "spec.a, spec.b, spec...");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_fields_are_not_listed),
        cmocka_unit_test(test_each_level_in_order),
        cmocka_unit_test(test_long_list_is_cut_with_dots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
