/*
 * The builders of share_fixture.h, for test_share.c and test_frag_modes.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "share_fixture.h"

#include "gpusched/cluster.h"
#include "gpusched/err.h"

struct gs_cluster *fx_new_cluster(void)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    return c;
}

uint32_t fx_add_node(struct gs_cluster *c, const char *name, uint32_t gpus, const char *model,
                     int64_t gpu_mem_mib, const struct gs_gpu_mode *modes)
{
    struct gs_node_spec s = {.name = name,
                             .cpu_milli = 64000,
                             .mem_mib = 262144,
                             .pods_max = 110,
                             .gpu_count = gpus,
                             .gpu_model = model,
                             .gpu_mem_mib = gpu_mem_mib,
                             .gpu_modes = modes};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    return id;
}

struct gs_pod_req fx_mem_req(uint32_t num_gpu, int64_t mib, uint8_t pct, int32_t milli)
{
    return (struct gs_pod_req){.cpu_milli = 1000,
                               .mem_mib = 1024,
                               .num_gpu = num_gpu,
                               .gpu_milli = milli,
                               .gpu_model_mask = GS_MODEL_ANY,
                               .gpu_mem_mib = mib,
                               .gpu_mem_pct = pct};
}

struct gs_pod_req fx_mig_req(const char *profile, uint8_t count)
{
    struct gs_pod_req r = {
        .cpu_milli = 1000, .mem_mib = 1024, .gpu_model_mask = GS_MODEL_ANY, .mig_count = count};
    (void)snprintf(r.mig_profile, sizeof(r.mig_profile), "%s", profile);
    return r;
}

struct gs_placement fx_place(struct gs_cluster *c, uint32_t node, const struct gs_pod_req *r)
{
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, node), node, r, &pl), GS_OK);
    assert_true(gs_node_fits(gs_cluster_node(c, node), r));
    assert_int_equal(gs_cluster_bind(c, r, &pl), GS_OK);
    return pl;
}
