/*
 * The NVML backend's MIG re-partition (src/agent/gpu_nvml.c) against tests/agent/nvml_mig_stub.c
 * (GS_NVML_LIBRARY), a stand-in that changes its layout: an H100 80GB of seven 1g.10gb (GPU
 * instances 1..7 at slices 0..6). The plan the core makes for a 3g.40gb there (destroy 4, 5, 6;
 * create 3g.40gb at 4, tests/agent/test_dp_migplan.c) goes through the backend: each destroy
 * removes the compute instance, then the GPU instance, of the MIG device at that slice; the
 * create asks for GPU-instance profile 2 (3 slices, checked against its profile info) at slice
 * 4, then compute profile 2 (all of it). The stub logs the calls in STUB_NVML_LOG; the layout
 * read back is 1g.10gb at 0..3 and 3g.40gb at 4 (GPU instance 5, the next free id). An overlap
 * the library refuses is GS_EIO naming the call.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, setenv */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/gpu.h"
#include "gpusched/kmigplan.h"

static void plan_through_nvml(void **st)
{
    (void)st;
    char log[] = "/tmp/gs-nvml-mig-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    (void)close(fd);
    assert_int_equal(setenv("STUB_NVML_LOG", log, 1), 0);
    struct gs_clock clk = gs_clock_monotonic();
    struct gs_gpu_backend *b = NULL;
    char err[300] = "";
    if (gs_gpu_open_nvml(&clk, &b, err, sizeof(err)) != GS_OK)
        fail_msg("nvml mig stub: %s", err);
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_true(g.mig_enabled);
    assert_int_equal(g.mig_count, 7);
    for (uint32_t i = 0; i < 7; i++) {
        assert_string_equal(g.mig[i].profile, "1g.10gb");
        assert_true(g.mig[i].has_start);
        assert_int_equal(g.mig[i].start_slot, i);
    }
    struct gs_kmig_plan p;
    memset(&p, 0, sizeof(p));
    (void)snprintf(p.id, sizeof(p.id), "n-gpu0-1");
    (void)snprintf(p.uuid, sizeof(p.uuid), "GPU-migstub-0");
    p.n_destroy = 3;
    for (uint32_t i = 0; i < 3; i++) {
        (void)snprintf(p.destroy[i].profile, sizeof(p.destroy[i].profile), "1g.10gb");
        p.destroy[i].start = 4 + i;
    }
    p.n_create = 1;
    (void)snprintf(p.create[0].profile, sizeof(p.create[0].profile), "3g.40gb");
    p.create[0].start = 4;
    char why[400] = "";
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_OK);
    assert_string_equal(why, "");
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 5);
    for (uint32_t i = 0; i < 4; i++) {
        assert_string_equal(g.mig[i].profile, "1g.10gb");
        assert_int_equal(g.mig[i].start_slot, i);
    }
    assert_string_equal(g.mig[4].profile, "3g.40gb");
    assert_int_equal(g.mig[4].start_slot, 4);
    assert_int_equal(g.mig[4].gi_id, 5);
    assert_int_equal(g.mig[4].mem_mib, 40448);
    assert_string_equal(g.mig[4].uuid, "MIG-migstub-gi5");

    /* A 1g.10gb at slice 4 overlaps the new 3g.40gb: the library refuses it. */
    assert_int_equal(gs_gpu_mig_create(b, 0, "1g.10gb", 4), GS_EIO);
    assert_string_equal(gs_gpu_last_error(b), "nvmlDeviceCreateGpuInstanceWithPlacement (GPU 0, "
                                              "1g.10gb at slice 4): NVML error");
    assert_int_equal(gs_gpu_mig_destroy(b, 0, 7), GS_ENOENT);
    assert_string_equal(gs_gpu_last_error(b), "no GPU instance starts at slice 7 of GPU 0");
    gs_gpu_close(b);

    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char text[1024] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    (void)fclose(f);
    (void)unlink(log);
    assert_string_equal(text, "destroy ci gi=5\n"
                              "destroy gi id=5 start=4\n"
                              "destroy ci gi=6\n"
                              "destroy gi id=6 start=5\n"
                              "destroy ci gi=7\n"
                              "destroy gi id=7 start=6\n"
                              "create gi profile=2 start=4 id=5\n"
                              "create ci profile=2 gi=5\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_through_nvml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
