/*
 * The node agent and the core agree about a node (issue 8, "Must show" 4): the agent's model
 * of a mixed node (whole, time-sliced, MIG and fractions GPUs, and two MIG GPUs whose layouts
 * the hardware does not allow or that lack a start) gives, through gs_dp_gpu_mode(), the core's
 * per-GPU modes; the inventory the agent publishes from them, read back by the scheduler's
 * reader (src/k8s/kworld_inventory.c), gives the same modes and refuses the same GPUs for the
 * same reasons. Expected modes are worked out by hand from NVIDIA's MIG user guide for the
 * H100 80GB (3g.40gb may start at slices 0 and 4 only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/devplugin.h"
#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "k8s/kworld_inv.h"

#define NGPU 6

static void mig_dev(struct gs_gpu_info *g, const char *profile, int start, uint64_t mem_mib)
{
    struct gs_gpu_mig *d = &g->mig[g->mig_count];
    (void)snprintf(d->profile, sizeof d->profile, "%s", profile);
    (void)snprintf(d->uuid, sizeof d->uuid, "MIG-%u-%u", (unsigned)g->index,
                   (unsigned)g->mig_count);
    d->mem_mib = mem_mib;
    d->has_start = start >= 0;
    d->start_slot = start >= 0 ? (uint32_t)start : 0;
    g->mig_capable = g->mig_enabled = true;
    g->mig_count++;
}

struct warned {
    char text[1200];
};

static void on_warn(void *ctx, const char *msg)
{
    struct warned *w = ctx;
    size_t n = strlen(w->text);
    (void)snprintf(w->text + n, sizeof w->text - n, "%s\n", msg);
}

static void test_agent_and_scheduler_build_one_model_of_a_mixed_node(void **state)
{
    (void)state;
    /* GPU 0 whole; 1 time-sliced 4 ways; 2 MIG 1g.10gb at 0 and 3g.40gb at 4 (valid); 3
     * fractions (4 slices); 4 MIG 3g.40gb at 2 (a start 3g cannot use); 5 MIG 1g.10gb with no
     * start known. All "NVIDIA H100 80GB HBM3", the core's H100-80GB. */
    struct gs_gpu_info g[NGPU];
    memset(g, 0, sizeof g);
    for (uint32_t i = 0; i < NGPU; i++) {
        g[i].index = i;
        (void)snprintf(g[i].uuid, sizeof g[i].uuid, "GPU-%u", (unsigned)i);
        (void)snprintf(g[i].model, sizeof g[i].model, "NVIDIA H100 80GB HBM3");
        g[i].mem_total_mib = 81559;
        g[i].numa_node = 0;
    }
    mig_dev(&g[2], "1g.10gb", 0, 9856);
    mig_dev(&g[2], "3g.40gb", 4, 40192);
    mig_dev(&g[4], "3g.40gb", 2, 40192);
    mig_dev(&g[5], "1g.10gb", -1, 9856);
    const char *yaml =
        "version: v1\nflags: {migStrategy: mixed}\nsharing: {timeSlicing: {resources: [{name: "
        "nvidia.com/gpu, replicas: 4, devices: [1]}]}, fractions: {slicesPerGpu: 4, devices: "
        "[3]}}\n";
    struct gs_dp_config c;
    struct gs_diag d;
    if (gs_dp_config_parse(yaml, strlen(yaml), "t.yaml", &c, &d) != GS_OK) {
        char buf[700];
        gs_diag_format(&d, buf, sizeof buf);
        fail_msg("config: %s", buf);
    }
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, NGPU, &m, NULL, 0), GS_OK);

    /* The agent's side: the core's modes of its model. */
    struct gs_gpu_mode am[NGPU];
    char why[NGPU][200];
    for (uint32_t i = 0; i < NGPU; i++)
        assert_int_equal(gs_dp_gpu_mode(&m, i, &am[i], why[i], sizeof why[i]), GS_OK);
    assert_int_equal(gs_dp_gpu_mode(&m, NGPU, &am[0], NULL, 0), GS_EINVAL);
    const struct gs_mig_model *h100 = gs_mig_model_find("H100-80GB");
    assert_non_null(h100);
    int p1g = gs_mig_profile_find(h100, "1g.10gb"), p3g = gs_mig_profile_find(h100, "3g.40gb");
    assert_true(p1g >= 0 && p3g >= 0);
    assert_int_equal(am[0].sharing, GS_GPU_SHARE_WHOLE);
    assert_int_equal(am[1].sharing, GS_GPU_SHARE_TIMESLICE);
    assert_int_equal(am[1].replicas, 4);
    assert_int_equal(am[2].sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(am[2].mig_count, 2);
    assert_int_equal(am[2].mig[0].profile, p1g);
    assert_int_equal(am[2].mig[0].start, 0);
    assert_int_equal(am[2].mig[1].profile, p3g);
    assert_int_equal(am[2].mig[1].start, 4);
    assert_string_equal(why[2], "");
    assert_int_equal(am[3].sharing, GS_GPU_SHARE_MILLI);
    assert_int_equal(am[4].sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(am[4].mig_count, 0);
    assert_string_equal(why[4], "MIG layout: instance 0 (3g.40gb at 2): start slot 2 is not a "
                                "placement of 3g.40gb on H100-80GB (allowed 0,4)");
    assert_int_equal(am[5].mig_count, 0);
    assert_string_equal(why[5], "mig[0].start is unknown");

    /* The inventory the agent publishes, read by the scheduler. */
    enum gs_health_state h[NGPU];
    for (uint32_t i = 0; i < NGPU; i++)
        h[i] = GS_HEALTH_HEALTHY;
    char *text = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &text), GS_OK);
    json_t *node =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GS_DP_INVENTORY_ANNOTATION, text);
    assert_non_null(node);
    free(text);
    struct gs__knode_gpus inv;
    char warn[400] = "";
    assert_int_equal(gs__kworld_node_gpus(node, "n1", &inv, warn, sizeof warn), 1);
    json_decref(node);
    assert_int_equal(inv.n, NGPU);
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    struct gs_gpu_mode sm[NGPU];
    bool usable[NGPU];
    const char *model = NULL;
    struct warned w = {""};
    assert_int_equal(
        gs__kinv_modes(&k, &inv, "n1", "NVIDIA-H100-80GB-HBM3", sm, usable, &model, on_warn, &w),
        GS_OK);
    for (uint32_t i = 0; i < NGPU; i++) {
        bool refused = why[i][0] != '\0';
        if (usable[i] == refused)
            fail_msg("GPU %u: agent says \"%s\", scheduler usable %d", (unsigned)i, why[i],
                     usable[i]);
        if (refused) {
            /* The scheduler refuses it with the same reason, naming node and GPU. */
            char line[sizeof why[0] + 64];
            (void)snprintf(line, sizeof line, "node n1: GPU %u: %.199s; unusable", (unsigned)i,
                           why[i]);
            if (!strstr(w.text, line))
                fail_msg("GPU %u: no warning \"%s\" in:\n%s", (unsigned)i, line, w.text);
            continue;
        }
        assert_int_equal(sm[i].sharing, am[i].sharing);
        assert_int_equal(sm[i].sharing == GS_GPU_SHARE_TIMESLICE ? sm[i].replicas : 1,
                         am[i].sharing == GS_GPU_SHARE_TIMESLICE ? am[i].replicas : 1);
        assert_int_equal(sm[i].mig_count, am[i].mig_count);
        for (uint32_t j = 0; j < am[i].mig_count; j++) {
            assert_int_equal(sm[i].mig[j].profile, am[i].mig[j].profile);
            assert_int_equal(sm[i].mig[j].start, am[i].mig[j].start);
        }
    }
    gs__kinv_fini(&k);
    gs_dp_model_fini(&m);
}

/* The one table of mode names, as the inventory and the replay's reports spell them. */
static void test_mode_names_round_trip(void **state)
{
    (void)state;
    static const char *const names[] = {"fractions", "replicas", "mig", "whole"};
    for (int s = 0; s < 4; s++) {
        assert_string_equal(gs_gpu_sharing_name((enum gs_gpu_sharing)s), names[s]);
        enum gs_gpu_sharing back;
        assert_int_equal(gs_gpu_sharing_parse(names[s], &back), GS_OK);
        assert_int_equal(back, s);
    }
    enum gs_gpu_sharing x = GS_GPU_SHARE_WHOLE;
    assert_null(gs_gpu_sharing_name((enum gs_gpu_sharing)4));
    assert_int_equal(gs_gpu_sharing_parse("Whole", &x), GS_EINVAL);
    assert_int_equal(gs_gpu_sharing_parse(NULL, &x), GS_EINVAL);
    assert_int_equal(x, GS_GPU_SHARE_WHOLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_and_scheduler_build_one_model_of_a_mixed_node),
        cmocka_unit_test(test_mode_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
