/*
 * The NVML backend's MIG re-partition (src/agent/gpu_nvml.c) against the stand-in library of
 * tests/agent/nvml_stub.c (GS_NVML_LIBRARY), which has no GPU-instance creation entry points,
 * as an NVML older than MIG's create calls would not: both operations refuse with a reason
 * naming the first missing entry point, and a plan carried out through the backend fails at
 * its first destroy with that reason (nothing is changed: the stub's GPU 1 keeps its 1g.18gb
 * at 0 and 3g.71gb at 4). Checked before the library: an index past the GPUs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/gpu.h"
#include "gpusched/kmigplan.h"

static const char MISSING[] = "this NVML has no nvmlDeviceGetGpuInstanceProfileInfo: it cannot "
                              "change MIG layouts (driver too old?)";

static struct gs_gpu_backend *open_stub(void)
{
    struct gs_clock clk = gs_clock_monotonic();
    struct gs_gpu_backend *b = NULL;
    char err[300] = "";
    if (gs_gpu_open_nvml(&clk, &b, err, sizeof(err)) != GS_OK)
        fail_msg("nvml stub: %s (GS_NVML_LIBRARY=%s)", err,
                 getenv("GS_NVML_LIBRARY") ? getenv("GS_NVML_LIBRARY") : "unset");
    return b;
}

static void operations_refused_naming_the_entry_point(void **st)
{
    (void)st;
    struct gs_gpu_backend *b = open_stub();
    assert_int_equal(gs_gpu_mig_destroy(b, 1, 4), GS_ENOENT);
    assert_string_equal(gs_gpu_last_error(b), MISSING);
    assert_int_equal(gs_gpu_mig_create(b, 1, "3g.71gb", 4), GS_ENOENT);
    assert_string_equal(gs_gpu_last_error(b), MISSING);
    assert_int_equal(gs_gpu_mig_create(b, 2, "3g.71gb", 4), GS_ERANGE);
    assert_string_equal(gs_gpu_last_error(b), "no GPU 2 (NVML reports 2)");
    gs_gpu_close(b);
}

static void plan_fails_at_its_first_step(void **st)
{
    (void)st;
    struct gs_gpu_backend *b = open_stub();
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 1, &g), GS_OK);
    assert_int_equal(g.mig_count, 2);
    struct gs_kmig_plan p;
    memset(&p, 0, sizeof(p));
    (void)snprintf(p.id, sizeof(p.id), "n-gpu1-1");
    p.gpu = 1;
    (void)snprintf(p.uuid, sizeof(p.uuid), "%s", g.uuid);
    p.n_destroy = 1;
    (void)snprintf(p.destroy[0].profile, sizeof(p.destroy[0].profile), "1g.18gb");
    p.destroy[0].start = 0;
    p.n_create = 1;
    (void)snprintf(p.create[0].profile, sizeof(p.create[0].profile), "2g.35gb");
    p.create[0].start = 0;
    (void)snprintf(p.pod, sizeof(p.pod), "ns/x");
    char why[400] = "";
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EIO);
    char want[400];
    (void)snprintf(want, sizeof(want), "GPU 1: destroying 1g.18gb at slice 0 failed: %s", MISSING);
    assert_string_equal(why, want);
    assert_int_equal(gs_gpu_info(b, 1, &g), GS_OK);
    assert_int_equal(g.mig_count, 2);
    gs_gpu_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(operations_refused_naming_the_entry_point),
        cmocka_unit_test(plan_fails_at_its_first_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
