/*
 * Tests of the GPU Feature Discovery-style labels (include/gpusched/gfd_labels.h): the exact
 * label file of the example H200 node (deploy/fake-gpus.yaml) with MIG strategy "mixed", the
 * "single" strategy's overrides and its refusal of a node that does not fit it, driver and
 * CUDA version splitting, value sanitising, and the limits.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/gfd_labels.h"
#include "gpusched/gpu.h"

static int64_t zero_now(void *ctx)
{
    (void)ctx;
    return 0;
}

static void no_sleep(void *ctx, int64_t ms)
{
    (void)ctx;
    (void)ms;
}

/* Reads every GPU of a fake node file. */
static uint32_t load(const char *rel, struct gs_gpu_system *sys, struct gs_gpu_info *gpus)
{
    char path[1024];
    const char *src = getenv("GS_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/%s", src != NULL ? src : ".", rel);
    struct gs_clock c = {.now_ms = zero_now, .sleep_ms = no_sleep, .ctx = NULL};
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    assert_int_equal(gs_gpu_open_fake(path, &c, &b, &d), GS_OK);
    uint32_t n;
    assert_int_equal(gs_gpu_count(b, &n), GS_OK);
    assert_int_equal(gs_gpu_system(b, sys), GS_OK);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(gs_gpu_info(b, i, &gpus[i]), GS_OK);
    gs_gpu_close(b);
    return n;
}

static char *write_text(const struct gs_gfd_labels *l)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(gs_gfd_labels_write(l, f), GS_OK);
    fclose(f);
    return text;
}

static void test_example_h200_node_with_mixed_strategy(void **state)
{
    (void)state;
    struct gs_gpu_system sys;
    static struct gs_gpu_info gpus[GS_GPU_MAX];
    uint32_t n = load("deploy/fake-gpus.yaml", &sys, gpus);
    struct gs_gfd_options o = {
        .replicas = 1, .mig_strategy = GS_MIG_STRATEGY_MIXED, .timestamp_s = 1767225600};
    struct gs_gfd_labels l;
    assert_int_equal(gs_gfd_labels(&sys, gpus, n, &o, &l), GS_OK);
    char *text = write_text(&l);
    const char *want = "nvidia.com/cuda.driver-version.full=550.90.07\n"
                       "nvidia.com/cuda.driver-version.major=550\n"
                       "nvidia.com/cuda.driver-version.minor=90\n"
                       "nvidia.com/cuda.driver-version.revision=07\n"
                       "nvidia.com/cuda.driver.major=550\n"
                       "nvidia.com/cuda.driver.minor=90\n"
                       "nvidia.com/cuda.driver.rev=07\n"
                       "nvidia.com/cuda.runtime-version.full=12.4\n"
                       "nvidia.com/cuda.runtime-version.major=12\n"
                       "nvidia.com/cuda.runtime-version.minor=4\n"
                       "nvidia.com/cuda.runtime.major=12\n"
                       "nvidia.com/cuda.runtime.minor=4\n"
                       "nvidia.com/gfd.timestamp=1767225600\n"
                       "nvidia.com/gpu.compute.major=9\n"
                       "nvidia.com/gpu.compute.minor=0\n"
                       "nvidia.com/gpu.count=8\n"
                       "nvidia.com/gpu.family=hopper\n"
                       "nvidia.com/gpu.memory=143771\n"
                       "nvidia.com/gpu.product=NVIDIA-H200\n"
                       "nvidia.com/gpu.replicas=1\n"
                       "nvidia.com/mig-1g.18gb.count=9\n"
                       "nvidia.com/mig-1g.18gb.memory=16384\n"
                       "nvidia.com/mig-1g.18gb.slices.gi=1\n"
                       "nvidia.com/mig-2g.35gb.count=1\n"
                       "nvidia.com/mig-2g.35gb.memory=33536\n"
                       "nvidia.com/mig-2g.35gb.slices.gi=2\n"
                       "nvidia.com/mig-3g.71gb.count=1\n"
                       "nvidia.com/mig-3g.71gb.memory=69888\n"
                       "nvidia.com/mig-3g.71gb.slices.gi=3\n"
                       "nvidia.com/mig.capable=true\n"
                       "nvidia.com/mig.strategy=mixed\n";
    if (strcmp(text, want) != 0)
        print_message("got:\n%s", text);
    assert_string_equal(text, want);
    free(text);
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.count"), "8");
    assert_null(gs_gfd_label_get(&l, "nvidia.com/gpu.machine"));

    /* Strategy single does not fit a node where some GPUs run without MIG. */
    o.mig_strategy = GS_MIG_STRATEGY_SINGLE;
    assert_int_equal(gs_gfd_labels(&sys, gpus, n, &o, &l), GS_EINVAL);
    assert_int_equal(l.n, 0);
}

static void test_single_strategy_overrides_product_count_and_memory(void **state)
{
    (void)state;
    struct gs_gpu_system sys = {.driver_version = "550.120", .cuda_driver_version = 12080};
    struct gs_gpu_info g[2];
    memset(g, 0, sizeof g);
    for (int i = 0; i < 2; i++) {
        snprintf(g[i].model, sizeof g[i].model, "NVIDIA A100-SXM4-40GB");
        g[i].mem_total_mib = 40960;
        g[i].cc_major = 8;
        g[i].cc_minor = 0;
        g[i].mig_capable = true;
        g[i].mig_enabled = true;
        g[i].mig_count = 7;
        for (int k = 0; k < 7; k++) {
            snprintf(g[i].mig[k].profile, sizeof g[i].mig[k].profile, "1g.5gb");
            g[i].mig[k].mem_mib = 4864;
        }
    }
    struct gs_gfd_options o = {.replicas = 2, .mig_strategy = GS_MIG_STRATEGY_SINGLE};
    struct gs_gfd_labels l;
    assert_int_equal(gs_gfd_labels(&sys, g, 2, &o, &l), GS_OK);
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.product"),
                        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.count"), "14");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.memory"), "4864");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.replicas"), "2");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.slices.gi"), "1");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.family"), "ampere");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/mig.strategy"), "single");
    /* A driver version without revision gives an empty revision, as GFD does. */
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/cuda.driver-version.minor"), "120");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/cuda.driver-version.revision"), "");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/cuda.runtime-version.full"), "12.8");
    assert_null(gs_gfd_label_get(&l, "nvidia.com/gfd.timestamp"));
    for (uint32_t i = 1; i < l.n; i++)
        assert_true(strcmp(l.v[i - 1].key, l.v[i].key) < 0);

    /* Two profiles: single refuses. */
    snprintf(g[1].mig[3].profile, sizeof g[1].mig[3].profile, "2g.10gb");
    assert_int_equal(gs_gfd_labels(&sys, g, 2, &o, &l), GS_EINVAL);
}

static void test_plain_node_values_are_sanitised(void **state)
{
    (void)state;
    struct gs_gpu_system sys = {.driver_version = "", .cuda_driver_version = 0};
    struct gs_gpu_info g;
    memset(&g, 0, sizeof g);
    snprintf(g.model, sizeof g.model, " NVIDIA GeForce RTX 4090 (rev a1)/x ");
    g.mem_total_mib = 24564;
    g.cc_major = -1;
    g.cc_minor = -1;
    struct gs_gfd_labels l;
    assert_int_equal(gs_gfd_labels(&sys, &g, 1, NULL, &l), GS_OK);
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.product"),
                        "NVIDIA-GeForce-RTX-4090--rev-a1--x");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/mig.capable"), "false");
    assert_null(gs_gfd_label_get(&l, "nvidia.com/mig.strategy"));
    assert_null(gs_gfd_label_get(&l, "nvidia.com/gpu.family"));
    assert_null(gs_gfd_label_get(&l, "nvidia.com/cuda.driver.major"));
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/gpu.replicas"), "1");

    /* A long model is cut to 63 characters. */
    memset(g.model, 'A', 90);
    g.model[90] = '\0';
    assert_int_equal(gs_gfd_labels(&sys, &g, 1, NULL, &l), GS_OK);
    assert_int_equal(strlen(gs_gfd_label_get(&l, "nvidia.com/gpu.product")), 63);

    assert_int_equal(gs_gfd_labels(&sys, &g, 0, NULL, &l), GS_OK);
    assert_int_equal(l.n, 0);
    assert_int_equal(gs_gfd_labels(NULL, &g, 1, NULL, &l), GS_EINVAL);
}

static void test_mixed_profiles_with_plus_and_too_many_labels(void **state)
{
    (void)state;
    struct gs_gpu_system sys = {.driver_version = "550.54.15", .cuda_driver_version = 12040};
    static struct gs_gpu_info g[GS_GPU_MAX];
    memset(g, 0, sizeof g);
    for (uint32_t i = 0; i < 4; i++) {
        snprintf(g[i].model, sizeof g[i].model, "NVIDIA H100 80GB HBM3");
        g[i].mig_capable = true;
        g[i].mig_enabled = i == 0;
        g[i].cc_major = 9;
        g[i].cc_minor = 0;
    }
    g[0].mig_count = 1;
    snprintf(g[0].mig[0].profile, sizeof g[0].mig[0].profile, "1g.10gb+me");
    g[0].mig[0].mem_mib = 9856;
    struct gs_gfd_options o = {.mig_strategy = GS_MIG_STRATEGY_MIXED};
    struct gs_gfd_labels l;
    assert_int_equal(gs_gfd_labels(&sys, g, 4, &o, &l), GS_OK);
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/mig-1g.10gb.me.count"), "1");
    assert_string_equal(gs_gfd_label_get(&l, "nvidia.com/mig-1g.10gb.me.memory"), "9856");

    /* 64 GPUs with 16 distinct profiles each: over GS_GFD_LABELS_MAX. */
    for (uint32_t i = 0; i < GS_GPU_MAX; i++) {
        g[i].mig_capable = g[i].mig_enabled = true;
        g[i].mig_count = GS_GPU_MIG_MAX;
        for (uint32_t k = 0; k < GS_GPU_MIG_MAX; k++)
            snprintf(g[i].mig[k].profile, sizeof g[i].mig[k].profile, "%ug.%ugb", k + 1,
                     (unsigned)(i * 100 + k));
    }
    assert_int_equal(gs_gfd_labels(&sys, g, GS_GPU_MAX, &o, &l), GS_ELIMIT);
    assert_int_equal(l.n, 0);
}

static void test_strategy_names_parse(void **state)
{
    (void)state;
    enum gs_mig_strategy s = GS_MIG_STRATEGY_NONE;
    assert_int_equal(gs_gfd_mig_strategy_parse("mixed", &s), GS_OK);
    assert_int_equal(s, GS_MIG_STRATEGY_MIXED);
    assert_int_equal(gs_gfd_mig_strategy_parse("single", &s), GS_OK);
    assert_int_equal(s, GS_MIG_STRATEGY_SINGLE);
    assert_int_equal(gs_gfd_mig_strategy_parse("none", &s), GS_OK);
    assert_int_equal(s, GS_MIG_STRATEGY_NONE);
    assert_int_equal(gs_gfd_mig_strategy_parse("Mixed", &s), GS_EINVAL);
    assert_int_equal(s, GS_MIG_STRATEGY_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_h200_node_with_mixed_strategy),
        cmocka_unit_test(test_single_strategy_overrides_product_count_and_memory),
        cmocka_unit_test(test_plain_node_values_are_sanitised),
        cmocka_unit_test(test_mixed_profiles_with_plus_and_too_many_labels),
        cmocka_unit_test(test_strategy_names_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
