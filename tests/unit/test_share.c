/*
 * Unit tests of the per-GPU sharing modes (cluster.h: gs_cluster_set_gpu_mode(),
 * gs_node_pick_gpus(), bind/adopt/unbind of every request kind). Each expected value is worked
 * out by hand beside it from the rules in the header: what a mode offers, which GPU the pick
 * takes, and what a release gives back.
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
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/frag.h"
#include "gpusched/mig.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#include "share_fixture.h"

#define GIB80 81920 /* an 80 GB GPU's memory in these tests, MiB */

static struct gs_pod_req milli_req(uint32_t num_gpu, int32_t milli)
{
    return (struct gs_pod_req){.cpu_milli = 1000,
                               .mem_mib = 1024,
                               .num_gpu = num_gpu,
                               .gpu_milli = milli,
                               .gpu_model_mask = GS_MODEL_ANY};
}

static struct gs_pod_req ts_req(uint8_t slots)
{
    return (struct gs_pod_req){.cpu_milli = 1000,
                               .mem_mib = 1024,
                               .gpu_model_mask = GS_MODEL_ANY,
                               .timeslice_slots = slots};
}

static void expect_no_fit(struct gs_cluster *c, uint32_t node, const struct gs_pod_req *r)
{
    struct gs_placement pl;
    assert_false(gs_node_fits(gs_cluster_node(c, node), r));
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, node), node, r, &pl), GS_EUNSCHEDULABLE);
}

static void test_memory_fractions_debit_mib_and_bound_milli(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 2, "H100-80GB", GIB80, NULL);
    const struct gs_node *nd = gs_cluster_node(c, n);
    /* 30000 MiB, no compute: both GPUs have 81920 free; best fit ties, lowest index: GPU 0. */
    struct gs_pod_req m30 = fx_mem_req(1, 30000, 0, 0);
    struct gs_placement p30 = fx_place(c, n, &m30);
    assert_int_equal(p30.gpu_index[0], 0);
    assert_int_equal(p30.gpu_mem_mib[0], 30000);
    assert_int_equal(nd->gpus[0].mem_mib_used, 30000);
    assert_int_equal(nd->gpus[0].mem_mib_free, 51920);
    assert_int_equal(nd->gpus[0].gpu_milli_used, 0);
    /* A milli request m takes floor(81920 m / 1000) MiB; the largest m that fits in 51920 MiB:
     * 81920 x 633 / 1000 = 51855.36 fits, 634 gives 51937.28 > 51920. So 633 milli open. */
    assert_int_equal(nd->gpus[0].gpu_milli_free, 633);
    assert_int_equal(nd->gpus_full_free, 1);
    /* 700 milli: only GPU 1 (1000 free) has room; it takes floor(81920 x 0.7) = 57344 MiB. */
    struct gs_pod_req m700 = milli_req(1, 700);
    struct gs_placement p700 = fx_place(c, n, &m700);
    assert_int_equal(p700.gpu_index[0], 1);
    assert_int_equal(nd->gpus[1].mem_mib_used, 57344);
    assert_int_equal(nd->gpus[1].gpu_milli_free, 300);
    /* 40000 MiB: GPU 0 has 51920 free, GPU 1 81920 - 57344 = 24576: GPU 0. */
    struct gs_pod_req m40 = fx_mem_req(1, 40000, 0, 0);
    struct gs_placement p40 = fx_place(c, n, &m40);
    assert_int_equal(p40.gpu_index[0], 0);
    assert_int_equal(nd->gpus[0].mem_mib_free, 11920);
    /* 20000 MiB: GPU 0 has 11920, GPU 1 24576: GPU 1, leaving 4576. */
    struct gs_pod_req m20 = fx_mem_req(1, 20000, 0, 0);
    struct gs_placement p20 = fx_place(c, n, &m20);
    assert_int_equal(p20.gpu_index[0], 1);
    assert_int_equal(nd->gpus[1].mem_mib_free, 4576);
    /* 12000 MiB fits on neither GPU (11920 and 4576 free). */
    struct gs_pod_req m12 = fx_mem_req(1, 12000, 0, 0);
    expect_no_fit(c, n, &m12);
    /* A hand-made placement that over-grants memory is refused, the node unchanged. */
    struct gs_placement over = {.node = n, .num_gpu = 1, .gpu_index = {0}, .gpu_mem_mib = {12000}};
    assert_int_equal(gs_cluster_bind(c, &m12, &over), GS_EINVAL);
    assert_int_equal(gs_cluster_adopt(c, &m12, &over), GS_EINVAL);
    assert_int_equal(nd->gpus[0].mem_mib_used, 70000);
    /* A placement whose MiB disagree with the request is refused too. */
    struct gs_placement wrong = {.node = n, .num_gpu = 1, .gpu_index = {0}, .gpu_mem_mib = {100}};
    struct gs_pod_req m1k = fx_mem_req(1, 1000, 0, 0);
    assert_int_equal(gs_cluster_bind(c, &m1k, &wrong), GS_EINVAL);
    /* Unbind is exact: 40000 back on GPU 0, then the 700 milli gives back 57344 MiB. */
    assert_int_equal(gs_cluster_unbind(c, &m40, &p40), GS_OK);
    assert_int_equal(nd->gpus[0].mem_mib_used, 30000);
    assert_int_equal(gs_cluster_unbind(c, &m700, &p700), GS_OK);
    assert_int_equal(nd->gpus[1].mem_mib_used, 20000);
    assert_int_equal(nd->gpus[1].gpu_milli_used, 0);
    assert_int_equal(gs_cluster_unbind(c, &m20, &p20), GS_OK);
    assert_int_equal(gs_cluster_unbind(c, &m30, &p30), GS_OK);
    assert_int_equal(nd->gpus[0].mem_mib_used + nd->gpus[1].mem_mib_used, 0);
    assert_int_equal(nd->gpus_full_free, 2);
    /* A second release of the same grant is refused. */
    assert_int_equal(gs_cluster_unbind(c, &m30, &p30), GS_EINVAL);
    gs_cluster_free(c);
}

static void test_memory_percent_and_compute_on_n_gpus(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 2, "H100-80GB", GIB80, NULL);
    const struct gs_node *nd = gs_cluster_node(c, n);
    /* 60 % of 81920 = 49152 MiB on each of 2 GPUs, with 300 milli of compute on each. */
    struct gs_pod_req p60 = fx_mem_req(2, 0, 60, 300);
    struct gs_placement pl = fx_place(c, n, &p60);
    assert_int_equal(pl.num_gpu, 2);
    assert_int_equal(pl.gpu_mem_mib[0], 49152);
    assert_int_equal(pl.gpu_mem_mib[1], 49152);
    assert_int_equal(nd->gpus[0].gpu_milli_used, 300);
    assert_int_equal(nd->gpus[1].mem_mib_used, 49152);
    /* Another 60 %: 49152 > 81920 - 49152 = 32768 on both: no fit (memory never over-granted). */
    struct gs_pod_req again = fx_mem_req(1, 0, 60, 0);
    expect_no_fit(c, n, &again);
    /* 40 % = 32768 fits exactly on one. */
    struct gs_pod_req p40 = fx_mem_req(1, 0, 40, 0);
    struct gs_placement pl40 = fx_place(c, n, &p40);
    assert_int_equal(nd->gpus[pl40.gpu_index[0]].mem_mib_free, 0);
    assert_int_equal(nd->gpus[pl40.gpu_index[0]].gpu_milli_free, 0); /* no memory: no milli */
    assert_int_equal(gs_cluster_unbind(c, &p60, &pl), GS_OK);
    assert_int_equal(gs_cluster_unbind(c, &p40, &pl40), GS_OK);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 0);
    /* A GPU whose memory is unknown takes no memory request. */
    uint32_t u = fx_add_node(c, "unknown", 1, "H100-80GB", 0, NULL);
    struct gs_pod_req m1 = fx_mem_req(1, 1, 0, 0);
    expect_no_fit(c, u, &m1);
    gs_cluster_free(c);
}

static void test_whole_mode_takes_only_whole_gpus(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    struct gs_gpu_mode modes[2] = {{.sharing = GS_GPU_SHARE_WHOLE},
                                   {.sharing = GS_GPU_SHARE_MILLI}};
    uint32_t n = fx_add_node(c, "a", 2, "A100", 40960, modes);
    const struct gs_node *nd = gs_cluster_node(c, n);
    const struct gs_node_fit *fit = &gs_cluster_fit_array(c)[n];
    assert_true(fit->share_flags & GS_FIT_HAS_WHOLE);
    /* 500 milli: GPU 0 is whole-only, so GPU 1. */
    struct gs_pod_req half = milli_req(1, 500);
    struct gs_placement ph = fx_place(c, n, &half);
    assert_int_equal(ph.gpu_index[0], 1);
    /* 600 milli: GPU 1 has 500 left, GPU 0 has 1000 but takes no fraction: no fit, though the
     * fit view's largest free value (1000) would say yes; it does not decide here. */
    struct gs_pod_req six = milli_req(1, 600);
    assert_true(gs_fit_ok(fit, &six));
    assert_false(gs_fit_decides(fit, &six));
    expect_no_fit(c, n, &six);
    struct gs_placement bad = {.node = n, .num_gpu = 1, .gpu_index = {0}, .gpu_milli = 600};
    assert_int_equal(gs_cluster_bind(c, &six, &bad), GS_EINVAL);
    /* One whole GPU: GPU 0, the only fully free one. */
    struct gs_pod_req one = milli_req(1, 1000);
    struct gs_placement p1 = fx_place(c, n, &one);
    assert_int_equal(p1.gpu_index[0], 0);
    assert_int_equal(nd->gpus[0].gpu_milli_free, 0);
    assert_int_equal(nd->gpus[0].mem_mib_used, 40960); /* a whole GPU takes all its memory */
    assert_int_equal(gs_cluster_unbind(c, &one, &p1), GS_OK);
    assert_int_equal(nd->gpus[0].gpu_milli_free, 1000);
    assert_int_equal(gs_cluster_unbind(c, &half, &ph), GS_OK);
    gs_cluster_free(c);
}

static void test_timeslice_slots_on_distinct_gpus(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    struct gs_gpu_mode modes[3] = {{.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4},
                                   {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 2},
                                   {.sharing = GS_GPU_SHARE_MILLI}};
    uint32_t n = fx_add_node(c, "a", 3, "T4", 15360, modes);
    const struct gs_node *nd = gs_cluster_node(c, n);
    /* Time-sliced GPUs take no milli request: GPU 2 alone is open to milli. */
    assert_int_equal(nd->gpus[0].gpu_milli_free, 0);
    assert_int_equal(nd->gpu_milli_free_total, 1000);
    assert_int_equal(nd->gpus_full_free, 1);
    /* 2 slots: the two time-sliced GPUs, fewest free first (GPU 1: 2, GPU 0: 4). */
    struct gs_pod_req two = ts_req(2);
    struct gs_placement p2 = fx_place(c, n, &two);
    assert_int_equal(p2.num_gpu, 2);
    assert_int_equal(p2.gpu_index[0], 0);
    assert_int_equal(p2.gpu_index[1], 1);
    assert_int_equal(nd->gpus[0].replicas_used, 1);
    assert_int_equal(nd->gpus[1].replicas_used, 1);
    /* 1 slot: GPU 1 has 1 free, GPU 0 has 3: GPU 1, which is then full. */
    struct gs_pod_req one = ts_req(1);
    struct gs_placement p1 = fx_place(c, n, &one);
    assert_int_equal(p1.gpu_index[0], 1);
    assert_int_equal(nd->gpus[1].replicas_used, 2);
    /* 2 slots on distinct GPUs: only GPU 0 has slots left: no fit. */
    expect_no_fit(c, n, &two);
    /* A placement putting 2 slots on one GPU, or a slot on a full or milli GPU, is refused. */
    struct gs_placement dup = {.node = n, .num_gpu = 2, .gpu_index = {0, 0}};
    assert_int_equal(gs_cluster_bind(c, &two, &dup), GS_EINVAL);
    struct gs_placement full = {.node = n, .num_gpu = 1, .gpu_index = {1}};
    assert_int_equal(gs_cluster_bind(c, &one, &full), GS_EINVAL);
    assert_int_equal(gs_cluster_adopt(c, &one, &full), GS_EINVAL);
    struct gs_placement milli_gpu = {.node = n, .num_gpu = 1, .gpu_index = {2}};
    assert_int_equal(gs_cluster_bind(c, &one, &milli_gpu), GS_EINVAL);
    /* Releases are exact; adopting after a restart restores the same slots. */
    assert_int_equal(gs_cluster_unbind(c, &two, &p2), GS_OK);
    assert_int_equal(nd->gpus[0].replicas_used, 0);
    assert_int_equal(nd->gpus[1].replicas_used, 1);
    assert_int_equal(gs_cluster_adopt(c, &two, &p2), GS_OK);
    assert_int_equal(nd->gpus[1].replicas_used, 2);
    assert_int_equal(nd->gpus[1].pods, 2);
    gs_cluster_free(c);
}

static void test_mig_instances_lowest_start_two_on_one_card(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    const struct gs_mig_model *a100 = gs_mig_model_find("A100-40GB");
    uint8_t g1 = (uint8_t)gs_mig_profile_find(a100, "1g.5gb");
    uint8_t g2 = (uint8_t)gs_mig_profile_find(a100, "2g.10gb");
    uint8_t g3 = (uint8_t)gs_mig_profile_find(a100, "3g.20gb");
    /* GPU 0: 3g@4, 2g@0, 1g@3, 1g@2 (given out of order); GPU 1: seven 1g. */
    struct gs_gpu_mode modes[2] = {
        {.sharing = GS_GPU_SHARE_MIG, .mig_count = 4, .mig = {{g3, 4}, {g2, 0}, {g1, 3}, {g1, 2}}},
        {.sharing = GS_GPU_SHARE_MIG,
         .mig_count = 7,
         .mig = {{g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g1, 4}, {g1, 5}, {g1, 6}}},
    };
    uint32_t n = fx_add_node(c, "a", 2, "NVIDIA-A100-SXM4-40GB", 40960, modes);
    const struct gs_node *nd = gs_cluster_node(c, n);
    /* Kept by start: 2g@0, 1g@2, 1g@3, 3g@4. */
    assert_int_equal(nd->gpus[0].mig[0].start, 0);
    assert_int_equal(nd->gpus[0].mig[1].start, 2);
    assert_int_equal(nd->gpus[0].mig[3].start, 4);
    assert_int_equal(nd->gpus[0].mig_slices, 7);
    assert_int_equal(nd->gpu_milli_free_total, 0); /* MIG GPUs take no milli request */
    assert_true(gs_cluster_fit_array(c)[n].share_flags & GS_FIT_HAS_MIG);
    /* Two 1g.5gb: GPU 0's at starts 2 and 3, both on one card. */
    struct gs_pod_req two = fx_mig_req("1g.5gb", 2);
    struct gs_placement p2 = fx_place(c, n, &two);
    assert_int_equal(p2.mig_count, 2);
    assert_int_equal(p2.mig[0].gpu, 0);
    assert_int_equal(p2.mig[0].start, 2);
    assert_int_equal(p2.mig[1].gpu, 0);
    assert_int_equal(p2.mig[1].start, 3);
    assert_int_equal(nd->gpus[0].pods, 1);       /* one pod, though two instances */
    assert_int_equal(nd->gpus[0].mig_held, 0x6); /* instances 1 and 2 of the layout */
    /* Compute slices 2 and 3 held: bitmap 0b1100. */
    assert_int_equal(nd->gpus[0].mig_slices_used, 0x0c);
    /* One more 1g.5gb: none left on GPU 0, GPU 1's lowest start, 0. */
    struct gs_pod_req one = fx_mig_req("1g.5gb", 1);
    struct gs_placement p1 = fx_place(c, n, &one);
    assert_int_equal(p1.mig[0].gpu, 1);
    assert_int_equal(p1.mig[0].start, 0);
    /* 3g.20gb: GPU 0 at 4; a second finds none. The "mig-" resource spelling works too. */
    struct gs_pod_req three = fx_mig_req("mig-3g.20gb", 1);
    struct gs_placement p3 = fx_place(c, n, &three);
    assert_int_equal(p3.mig[0].gpu, 0);
    assert_int_equal(p3.mig[0].start, 4);
    expect_no_fit(c, n, &three);
    /* A profile of no GPU here, and a held instance bound again, are refused. */
    struct gs_pod_req h200 = fx_mig_req("1g.18gb", 1);
    expect_no_fit(c, n, &h200);
    assert_int_equal(gs_cluster_bind(c, &one, &p1), GS_EINVAL);
    assert_int_equal(gs_cluster_adopt(c, &one, &p1), GS_EINVAL);
    /* The same instance twice in one placement is refused. */
    struct gs_placement twice = {.node = n, .mig_count = 2, .mig = {{1, g1, 5}, {1, g1, 5}}};
    assert_int_equal(gs_cluster_bind(c, &two, &twice), GS_EINVAL);
    /* Release is exact; adopt restores the instances by profile and start. */
    assert_int_equal(gs_cluster_unbind(c, &two, &p2), GS_OK);
    assert_int_equal(nd->gpus[0].mig_held, 0x8); /* the 3g stays */
    assert_int_equal(nd->gpus[0].mig_slices_used, 0x70);
    assert_int_equal(gs_cluster_adopt(c, &two, &p2), GS_OK);
    assert_int_equal(nd->gpus[0].mig_held, 0xe);
    /* The GPU's mode cannot change while it holds pods. */
    char why[160];
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_WHOLE};
    assert_int_equal(gs_cluster_set_gpu_mode(c, n, 0, &whole, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU 0 holds 2 pod(s): its mode changes only when free");
    gs_cluster_free(c);
}

static void test_mode_changes_checked_with_reasons(void **state)
{
    (void)state;
    struct gs_cluster *c = fx_new_cluster();
    uint32_t plain = fx_add_node(c, "plain", 1, "A100", 40960, NULL);
    uint32_t h100 = fx_add_node(c, "h100", 1, "NVIDIA-H100-80GB-HBM3", GIB80, NULL);
    const struct gs_mig_model *m = gs_mig_model_find("H100-80GB");
    uint8_t g3 = (uint8_t)gs_mig_profile_find(m, "3g.40gb");
    uint8_t g2 = (uint8_t)gs_mig_profile_find(m, "2g.20gb");
    char why[200];
    struct gs_gpu_mode mig = {.sharing = GS_GPU_SHARE_MIG, .mig_count = 1, .mig = {{g3, 0}}};
    assert_int_equal(gs_cluster_set_gpu_mode(c, plain, 0, &mig, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU model A100 has no MIG geometry in the table");
    struct gs_gpu_mode overlap = {
        .sharing = GS_GPU_SHARE_MIG, .mig_count = 2, .mig = {{g3, 0}, {g2, 2}}};
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &overlap, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "instance 1 (2g.20gb at 2) overlaps instance 0 (3g.40gb at 0) in "
                             "memory slices 2-3");
    struct gs_gpu_mode ts0 = {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 0};
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &ts0, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "time-slicing with 0 replicas");
    struct gs_gpu_mode odd = {.sharing = 9};
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &odd, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "unknown sharing mode 9");
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 1, &mig, why, sizeof(why)), GS_EINVAL);
    /* A node spec with a bad mode is refused whole; the cluster keeps its two nodes. */
    struct gs_node_spec s = {.name = "bad",
                             .cpu_milli = 1000,
                             .mem_mib = 1024,
                             .pods_max = 10,
                             .gpu_count = 1,
                             .gpu_model = "A100",
                             .gpu_modes = &mig};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    assert_int_equal(gs_cluster_nodes_present(c), 2);
    /* A valid change: the generation moves and the fit view shows the mode. */
    uint64_t gen = gs_cluster_node(c, h100)->gen;
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &mig, why, sizeof(why)), GS_OK);
    assert_string_equal(why, "");
    assert_true(gs_cluster_node(c, h100)->gen > gen);
    assert_int_equal(gs_cluster_fit_array(c)[h100].share_flags, GS_FIT_HAS_MIG);
    /* The node's model changes (no pod holds a GPU): the MIG layout of the old geometry goes,
     * the GPU is in fractions mode again. */
    struct gs_node_update up = {.cpu_milli = 64000,
                                .mem_mib = 262144,
                                .pods_max = 110,
                                .gpu_count = 1,
                                .gpu_model = "NVIDIA-H200",
                                .gpu_mem_mib = GIB80};
    assert_int_equal(gs_cluster_update_node(c, h100, &up), GS_OK);
    assert_int_equal(gs_cluster_node(c, h100)->gpus[0].sharing, GS_GPU_SHARE_MILLI);
    assert_int_equal(gs_cluster_fit_array(c)[h100].share_flags, GS_FIT_HAS_MEM);
    /* Profile indices are the model's: index 4 is 3g.71gb on the H200. */
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &mig, why, sizeof(why)), GS_OK);
    const struct gs_gpu *g0 = &gs_cluster_node(c, h100)->gpus[0];
    assert_string_equal(g0->mig_model->name, "H200-141GB");
    assert_string_equal(g0->mig_model->profiles[g0->mig[0].profile].name, "3g.71gb");
    /* Back to fractions: all of it free again. */
    struct gs_gpu_mode frac = {.sharing = GS_GPU_SHARE_MILLI};
    assert_int_equal(gs_cluster_set_gpu_mode(c, h100, 0, &frac, NULL, 0), GS_OK);
    assert_int_equal(gs_cluster_node(c, h100)->gpus[0].gpu_milli_free, 1000);
    assert_int_equal(gs_cluster_node(c, h100)->gpus[0].mig_model, NULL);
    gs_cluster_free(c);
}

static void test_request_validation_names_the_field(void **state)
{
    (void)state;
    static const struct {
        struct gs_pod_req req;
        const char *reason;
    } cases[] = {
        {{.cpu_milli = -1}, "cpu_milli -1: negative"},
        {{.mem_mib = -5}, "mem_mib -5: negative"},
        {{.num_gpu = 17, .gpu_milli = 1000}, "num_gpu 17: above 16"},
        {{.num_gpu = 1, .gpu_milli = 0}, "gpu_milli 0: outside 1..1000"},
        {{.num_gpu = 2, .gpu_milli = 500},
         "gpu_milli 500 with num_gpu 2: a fraction is of one GPU (ask for memory per GPU to "
         "share several)"},
        {{.gpu_mem_mib = 100}, "gpu memory asked with num_gpu 0: name the GPUs"},
        {{.num_gpu = 1, .gpu_mem_mib = -3}, "gpu_mem_mib -3: negative"},
        {{.num_gpu = 1, .gpu_mem_mib = 10, .gpu_mem_pct = 10},
         "gpu_mem_mib 10 and gpu_mem_pct 10: give memory one way only"},
        {{.num_gpu = 1, .gpu_mem_pct = 120}, "gpu_mem_pct 120: above 100"},
        {{.num_gpu = 1, .gpu_milli = 1000, .gpu_mem_pct = 50},
         "gpu_milli 1000 with gpu memory: a compute share is 0..999 (a whole GPU takes all its "
         "memory)"},
        {{.timeslice_slots = 17}, "timeslice_slots 17: above 16 (one per GPU)"},
        {{.num_gpu = 1, .gpu_milli = 1000, .timeslice_slots = 1},
         "timeslice_slots 1 with num_gpu, gpu_milli or gpu memory: a time-sliced pod asks for "
         "slots only"},
        {{.mig_count = 9, .mig_profile = "1g.10gb"}, "mig_count 9: above 8"},
        {{.mig_count = 1}, "mig_count 1 without mig_profile"},
        {{.mig_count = 1, .mig_profile = "1g.10gb", .num_gpu = 1, .gpu_milli = 1000},
         "mig_count 1 with num_gpu, gpu_milli, gpu memory or slots: a MIG pod asks for instances "
         "only"},
    };
    char why[GS_REQ_REASON_MAX];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(gs_pod_req_validate(&cases[i].req, why, sizeof(why)), GS_EINVAL);
        assert_string_equal(why, cases[i].reason);
    }
    struct gs_pod_req unterminated = {.mig_count = 1};
    memset(unterminated.mig_profile, 'x', sizeof(unterminated.mig_profile));
    assert_int_equal(gs_pod_req_validate(&unterminated, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "mig_profile: not NUL-terminated within 16 bytes");
    /* Valid of each kind; the kind follows from the members set. */
    struct gs_pod_req ok[] = {
        {.cpu_milli = 100},
        {.num_gpu = 4, .gpu_milli = 1000},
        {.num_gpu = 1, .gpu_milli = 250},
        {.num_gpu = 2, .gpu_mem_mib = 8192, .gpu_milli = 300},
        {.num_gpu = 1, .gpu_mem_pct = 100},
        {.timeslice_slots = 3},
        {.mig_count = 2, .mig_profile = "1g.18gb"},
    };
    enum gs_req_kind kinds[] = {GS_REQ_MILLI,  GS_REQ_MILLI,     GS_REQ_MILLI, GS_REQ_MEMORY,
                                GS_REQ_MEMORY, GS_REQ_TIMESLICE, GS_REQ_MIG};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(gs_pod_req_validate(&ok[i], why, sizeof(why)), GS_OK);
        assert_string_equal(why, "");
        assert_int_equal(gs_req_kind(&ok[i]), kinds[i]);
    }
    assert_false(gs_req_wants_gpu(&ok[0]));
    assert_true(gs_req_wants_gpu(&ok[5]));
    /* A bad request is refused by the pick, not placed. */
    struct gs_cluster *c = fx_new_cluster();
    uint32_t n = fx_add_node(c, "a", 1, "A100", 40960, NULL);
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, n), n, &cases[3].req, &pl), GS_EINVAL);
    gs_cluster_free(c);
}

/* A cluster of one node per mode: fractions (two, one with 60000 MiB held on GPU 0),
 * time-slicing (2 GPUs x 4 slots), MIG (an A100-40GB as seven 1g) and whole (2 GPUs). */
struct mixed {
    struct gs_cluster *c;
    uint32_t frac, frac2, ts, mig, whole;
};

static struct mixed mixed_cluster(void)
{
    struct mixed m = {.c = fx_new_cluster()};
    m.frac = fx_add_node(m.c, "frac", 2, "H100-80GB", GIB80, NULL);
    m.frac2 = fx_add_node(m.c, "frac2", 2, "H100-80GB", GIB80, NULL);
    struct gs_gpu_mode ts[2] = {{.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4},
                                {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4}};
    m.ts = fx_add_node(m.c, "ts", 2, "T4", 15360, ts);
    const struct gs_mig_model *a100 = gs_mig_model_find("A100-40GB");
    uint8_t g1 = (uint8_t)gs_mig_profile_find(a100, "1g.5gb");
    struct gs_gpu_mode mig = {
        .sharing = GS_GPU_SHARE_MIG,
        .mig_count = 7,
        .mig = {{g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g1, 4}, {g1, 5}, {g1, 6}}};
    m.mig = fx_add_node(m.c, "mig", 1, "A100-40GB", 40960, &mig);
    struct gs_gpu_mode whole[2] = {{.sharing = GS_GPU_SHARE_WHOLE},
                                   {.sharing = GS_GPU_SHARE_WHOLE}};
    m.whole = fx_add_node(m.c, "whole", 2, "A100", 40960, whole);
    struct gs_pod_req held = fx_mem_req(1, 60000, 0, 0);
    struct gs_placement pl = {
        .node = m.frac2, .num_gpu = 1, .gpu_index = {0}, .gpu_mem_mib = {60000}};
    assert_int_equal(gs_cluster_bind(m.c, &held, &pl), GS_OK);
    return m;
}

static struct gs_placement sched_place(struct gs_sched *s, struct gs_cluster *c,
                                       const struct gs_pod_req *r, struct gs_rng *rng)
{
    struct gs_placement pl;
    assert_int_equal(gs_sched_place(s, r, rng, &pl), GS_OK);
    assert_int_equal(gs_cluster_bind(c, r, &pl), GS_OK);
    return pl;
}

static void test_every_policy_places_each_kind_on_a_mixed_cluster(void **state)
{
    (void)state;
    static char any[] = "";
    struct gs_task_type t = {1000, 500, 1, GS_MODEL_ANY, any, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1};
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++) {
        struct mixed m = mixed_cluster();
        struct gs_sched_config cfg = {.policy = gs_policy_name(p), .workload = &w};
        struct gs_sched *s;
        assert_int_equal(gs_sched_new(m.c, &cfg, &s), GS_OK);
        struct gs_rng rng;
        gs_rng_seed(&rng, 42);
        /* 20000 MiB: only the fractions nodes take memory. Free memory on their fractions GPUs:
         * frac 2 x 81920 = 163840, frac2 21920 + 81920 = 103840; best fit scores frac2 100 and
         * frac 0. On frac2, GPU 0 is left with 1920 MiB, GPU 1 with 61920: GPU 0. */
        struct gs_pod_req mem = fx_mem_req(1, 20000, 0, 0);
        struct gs_placement pm = sched_place(s, m.c, &mem, &rng);
        assert_int_equal(pm.node, m.frac2);
        assert_int_equal(pm.gpu_index[0], 0);
        /* 2 time-slice slots: the ts node, one on each GPU. */
        struct gs_pod_req ts = ts_req(2);
        struct gs_placement pt = sched_place(s, m.c, &ts, &rng);
        assert_int_equal(pt.node, m.ts);
        assert_int_equal(pt.num_gpu, 2);
        /* Two 1g.5gb: the MIG node's starts 0 and 1. */
        struct gs_pod_req mig = fx_mig_req("1g.5gb", 2);
        struct gs_placement pg = sched_place(s, m.c, &mig, &rng);
        assert_int_equal(pg.node, m.mig);
        assert_int_equal(pg.mig[0].start, 0);
        assert_int_equal(pg.mig[1].start, 1);
        /* 500 milli: a fractions GPU, never the whole-mode node, never the MIG or ts node. */
        struct gs_pod_req half = milli_req(1, 500);
        struct gs_placement ph = sched_place(s, m.c, &half, &rng);
        assert_true(ph.node == m.frac || ph.node == m.frac2);
        /* Two whole GPUs: a node with two free; the whole node always has them. */
        struct gs_pod_req two = milli_req(2, 1000);
        struct gs_placement p2 = sched_place(s, m.c, &two, &rng);
        assert_true(p2.node == m.whole || p2.node == m.frac || p2.node == m.frac2);
        /* Everything released exactly: memory back to the one pod set up, MIG all free. */
        assert_int_equal(gs_cluster_unbind(m.c, &mem, &pm), GS_OK);
        assert_int_equal(gs_cluster_unbind(m.c, &ts, &pt), GS_OK);
        assert_int_equal(gs_cluster_unbind(m.c, &mig, &pg), GS_OK);
        assert_int_equal(gs_cluster_unbind(m.c, &half, &ph), GS_OK);
        assert_int_equal(gs_cluster_unbind(m.c, &two, &p2), GS_OK);
        assert_int_equal(gs_cluster_node(m.c, m.frac2)->gpus[0].mem_mib_used, 60000);
        assert_int_equal(gs_cluster_node(m.c, m.mig)->gpus[0].mig_held, 0);
        assert_int_equal(gs_cluster_gpu_milli_used(m.c), 0);
        gs_sched_free(s);
        gs_cluster_free(m.c);
    }
}

static void explain_text(struct gs_cluster *c, const struct gs_pod_req *r, char *buf, size_t cap)
{
    struct gs_unsched u;
    assert_int_equal(gs_explain(c, r, GS_FILTER_DEFAULT, &u), GS_OK);
    gs_explain_format(&u, r, buf, cap);
}

static void test_unschedulable_reasons_per_kind(void **state)
{
    (void)state;
    struct mixed m = mixed_cluster();
    char msg[512];
    /* 90000 MiB: more than any GPU has. frac and frac2 lack memory; ts, mig and whole have no
     * fractions GPU with memory (3). */
    struct gs_pod_req big = fx_mem_req(1, 90000, 0, 0);
    explain_text(m.c, &big, msg, sizeof(msg));
    assert_string_equal(msg, "0/5 nodes are available: 2 Insufficient GPU memory, 3 node(s) had "
                             "no GPU with known memory in fractions mode.");
    /* 3 slots on distinct GPUs: the ts node has 2 GPUs; the other 4 have none time-sliced. */
    struct gs_pod_req ts3 = ts_req(3);
    explain_text(m.c, &ts3, msg, sizeof(msg));
    assert_string_equal(msg, "0/5 nodes are available: 1 Insufficient time-sliced GPU slots, 4 "
                             "node(s) had no time-sliced GPU.");
    /* Eight 1g.5gb: the MIG node has seven; a 3g.20gb is in no layout. */
    struct gs_pod_req g8 = fx_mig_req("1g.5gb", 8);
    explain_text(m.c, &g8, msg, sizeof(msg));
    assert_string_equal(msg, "0/5 nodes are available: 1 Insufficient nvidia.com/mig-1g.5gb, 4 "
                             "node(s) had no MIG GPU with profile 1g.5gb.");
    struct gs_pod_req g3 = fx_mig_req("3g.20gb", 1);
    explain_text(m.c, &g3, msg, sizeof(msg));
    assert_string_equal(msg, "0/5 nodes are available: 5 node(s) had no MIG GPU with profile "
                             "3g.20gb.");
    /* 3 whole GPUs: no node has 3 GPUs (milli reasons as before). Free whole GPUs: frac 2,
     * frac2 1 (GPU 0 holds memory), whole 2; the ts and MIG GPUs take no milli request. 5 >= 3
     * and the largest block is 2: fragmented. */
    struct gs_pod_req w3 = milli_req(3, 1000);
    explain_text(m.c, &w3, msg, sizeof(msg));
    assert_string_equal(msg, "0/5 nodes are available: 5 Insufficient nvidia.com/gpu. free GPU "
                             "capacity is fragmented: largest free block 2 of the 3 GPUs asked");
    struct gs_unsched u;
    assert_int_equal(gs_explain(m.c, &w3, GS_FILTER_DEFAULT, &u), GS_OK);
    assert_int_equal(u.gpu_free, 5);
    gs_cluster_free(m.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_fractions_debit_mib_and_bound_milli),
        cmocka_unit_test(test_memory_percent_and_compute_on_n_gpus),
        cmocka_unit_test(test_whole_mode_takes_only_whole_gpus),
        cmocka_unit_test(test_timeslice_slots_on_distinct_gpus),
        cmocka_unit_test(test_mig_instances_lowest_start_two_on_one_card),
        cmocka_unit_test(test_mode_changes_checked_with_reasons),
        cmocka_unit_test(test_request_validation_names_the_field),
        cmocka_unit_test(test_every_policy_places_each_kind_on_a_mixed_cluster),
        cmocka_unit_test(test_unschedulable_reasons_per_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
