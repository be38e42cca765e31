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

#include <stdio.h>
#include <string.h>

#include "gpusched/charge.h"
#include "gpusched/filter.h"
#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "gpusched/tenant.h"

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

/* ---- charging placements and requests on a cluster (issue 8, "Quota charged by what is used")
 */

static struct gs_cluster *cluster_of(const char *model, uint32_t gpus, int64_t gpu_mem_mib,
                                     const struct gs_gpu_mode *modes)
{
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    struct gs_node_spec s = {.name = "n0",
                             .cpu_milli = 64000,
                             .mem_mib = 262144,
                             .pods_max = 110,
                             .gpu_count = gpus,
                             .gpu_model = model,
                             .gpu_mem_mib = gpu_mem_mib,
                             .gpu_modes = modes};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    return c;
}

static void test_fraction_by_memory_on_an_80gb_gpu(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster_of("H100-80GB", 1, 81920, NULL);
    /* 20480 MiB and 100 milli of compute on a GPU of 81920 MiB: memory share 20480 / 81920 =
     * 0.25, compute 0.1; the larger, 0.25 GPU = 250 milli. */
    struct gs_pod_req r = {
        .num_gpu = 1, .gpu_milli = 100, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 20480};
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &r, &pl), GS_OK);
    double g;
    assert_int_equal(gs_charge_placement(c, &r, &pl, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    assert_int_equal(gs_charge_milli(g), 250);
    /* Pending, on a cluster whose only GPUs are these: the same 0.25. */
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    /* Memory only (no compute share): still 0.25; a 500 milli share on the same GPU takes
     * floor(81920 x 0.5) = 40960 MiB and is charged 0.5, its compute share. */
    r.gpu_milli = 0;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &r, &pl), GS_OK);
    assert_int_equal(gs_charge_placement(c, &r, &pl, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    struct gs_pod_req half = {.num_gpu = 1, .gpu_milli = 500, .gpu_model_mask = GS_MODEL_ANY};
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &half, &pl), GS_OK);
    assert_int_equal(gs_charge_placement(c, &half, &pl, &g), GS_OK);
    assert_near(g, 0.5, 1e-12);
    gs_cluster_free(c);
}

static void test_pending_memory_charge_ignores_cpu_only_nodes(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster_of("H100-80GB", 2, 81920, NULL);
    /* A CPU-only node and a one-GPU 40 GB node besides. Issue 8 charges a pending memory
     * request "by the smallest GPU memory among the GPUs it may use". 20480 MiB on each of 2
     * GPUs: only the H100 node has 2 GPUs, so the A100 cannot be used; 20480 / 81920 = 0.25 per
     * GPU, 2 GPUs: 0.5. The CPU-only node gives no placeholder charge. */
    struct gs_node_spec cpu = {.name = "cpu", .cpu_milli = 64000, .mem_mib = 1024, .pods_max = 10};
    struct gs_node_spec a100 = {.name = "a100",
                                .cpu_milli = 64000,
                                .mem_mib = 1024,
                                .pods_max = 10,
                                .gpu_count = 1,
                                .gpu_model = "A100-40GB",
                                .gpu_mem_mib = 40960};
    assert_int_equal(gs_cluster_add_node(c, &cpu, NULL), GS_OK);
    assert_int_equal(gs_cluster_add_node(c, &a100, NULL), GS_OK);
    struct gs_pod_req r = {.num_gpu = 2, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 20480};
    double g;
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.5, 1e-12);
    /* One GPU: both nodes can take it; the smallest memory is the A100's 40960 MiB, 20480 /
     * 40960 = 0.5 (not the 0.25 it would be on the H100). */
    r.num_gpu = 1;
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.5, 1e-12);
    /* Only H100-80GB allowed: 20480 / 81920 = 0.25. */
    r.gpu_model_mask = UINT64_C(1) << gs_cluster_model_find(c, "H100-80GB");
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    /* 49152 MiB (48 GiB) does not fit the A100's 40960: only the H100, 49152 / 81920 = 0.6. */
    r.gpu_model_mask = GS_MODEL_ANY;
    r.gpu_mem_mib = 49152;
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.6, 1e-12);
    /* Only A100-40GB allowed and 2 GPUs asked: no node of that model has 2, charged 0. */
    r.num_gpu = 2;
    r.gpu_mem_mib = 20480;
    r.gpu_model_mask = UINT64_C(1) << gs_cluster_model_find(c, "A100-40GB");
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0, 0);
    /* A cluster of CPU-only nodes: nothing can take it, charged 0. */
    struct gs_cluster *cpus;
    assert_int_equal(gs_cluster_new(&cpus), GS_OK);
    assert_int_equal(gs_cluster_add_node(cpus, &cpu, NULL), GS_OK);
    r.gpu_model_mask = GS_MODEL_ANY;
    assert_int_equal(gs_charge_request(cpus, &r, &g), GS_OK);
    assert_near(g, 0, 0);
    gs_cluster_free(cpus);
    gs_cluster_free(c);
}

static void test_mig_3g_instance_and_timeslice_slots(void **state)
{
    (void)state;
    const struct gs_mig_model *m = gs_mig_model_find("A100-80GB");
    uint8_t g3 = (uint8_t)gs_mig_profile_find(m, "3g.40gb");
    struct gs_gpu_mode modes[2] = {
        {.sharing = GS_GPU_SHARE_MIG, .mig_count = 2, .mig = {{g3, 4}, {g3, 0}}},
        {.sharing = GS_GPU_SHARE_TIMESLICE, .replicas = 4}};
    struct gs_cluster *c = cluster_of("NVIDIA-A100-SXM4-80GB", 2, 81920, modes);
    /* A 3g instance: 3 of the GPU's 7 compute slices, 3/7 = 0.428571...; 428 milli (down). */
    struct gs_pod_req r = {.gpu_model_mask = GS_MODEL_ANY, .mig_count = 1};
    (void)snprintf(r.mig_profile, sizeof(r.mig_profile), "3g.40gb");
    struct gs_placement pl;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &r, &pl), GS_OK);
    assert_int_equal(pl.mig[0].start, 0); /* lowest start of the two 3g */
    double g;
    assert_int_equal(gs_charge_placement(c, &r, &pl, &g), GS_OK);
    assert_near(g, 3.0 / 7.0, 1e-12);
    assert_int_equal(gs_charge_milli(g), 428);
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK); /* pending: the same on any model */
    assert_near(g, 3.0 / 7.0, 1e-12);
    /* Both 3g: 6/7; seven 1g of 7 sum to 7 x 142 = 994 milli, never above 1000. */
    r.mig_count = 2;
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &r, &pl), GS_OK);
    assert_int_equal(gs_charge_placement(c, &r, &pl, &g), GS_OK);
    assert_near(g, 6.0 / 7.0, 1e-12);
    assert_int_equal(7 * gs_charge_milli(1.0 / 7.0), 994);
    /* A time-sliced slot of a GPU offering 4: 1/4. */
    struct gs_pod_req t = {.gpu_model_mask = GS_MODEL_ANY, .timeslice_slots = 1};
    assert_int_equal(gs_node_pick_gpus(gs_cluster_node(c, 0), 0, &t, &pl), GS_OK);
    assert_int_equal(gs_charge_placement(c, &t, &pl, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    assert_int_equal(gs_charge_request(c, &t, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    gs_cluster_free(c);
}

static void on_event(void *ctx, const struct gs_event *ev)
{
    (void)ctx;
    (void)ev;
}

/* Two pods each asking 60 % of an 80 GB GPU's memory against a queue limit of 1 GPU: each is
 * charged 0.6 GPU (600 milli); two would be 1200 > 1000, so one runs and one waits, though the
 * node has a second GPU with all its memory free. */
static void test_two_sixty_percent_pods_against_a_quota_of_one_gpu(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster_of("H100-80GB", 2, 81920, NULL);
    struct gs_engine *e;
    struct gs_engine_config cfg = {.policy = "bestfit", .on_event = on_event};
    assert_int_equal(gs_engine_new(c, &cfg, &e), GS_OK);
    struct gs_queue_spec qs = {
        "team", GS_QUEUE_ROOT, {1000, 64000, 262144}, {1000, GS_UNLIMITED, GS_UNLIMITED}, 0, 0};
    uint32_t q, pc;
    assert_int_equal(gs_engine_add_queue(e, &qs, &q), GS_OK);
    struct gs_priority_class_spec ps = {"normal", 10, -1};
    assert_int_equal(gs_engine_add_priority_class(e, &ps, &pc), GS_OK);
    struct gs_tpod_spec sp = {
        "p",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 100, .num_gpu = 1, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_pct = 60},
        -1};
    uint32_t a, b;
    assert_int_equal(gs_engine_submit(e, &sp, 0, &a), GS_OK);
    assert_int_equal(gs_engine_submit(e, &sp, 1, &b), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 10, NULL, NULL), GS_OK);
    struct gs_tpod_info ia, ib;
    assert_int_equal(gs_engine_pod_info(e, a, &ia), GS_OK);
    assert_int_equal(gs_engine_pod_info(e, b, &ib), GS_OK);
    if (ia.state != GS_TPOD_RUNNING)
        print_error("pending: %s\n", ia.reason ? ia.reason : "(no reason)");
    assert_int_equal(ia.state, GS_TPOD_RUNNING);
    assert_int_equal(ib.state, GS_TPOD_PENDING);
    struct gs_queue_info qi;
    assert_int_equal(gs_engine_queue_info(e, q, &qi), GS_OK);
    assert_int_equal(qi.allocated[GS_RES_GPU], 600);
    char msg[256];
    assert_int_equal(gs_engine_check(e, msg, sizeof(msg)), GS_OK);
    gs_engine_free(e);
    gs_cluster_free(c);
}

static struct gs_engine *engine_with_queue(struct gs_cluster *c, uint32_t *q, uint32_t *pc)
{
    struct gs_engine *e;
    struct gs_engine_config cfg = {.policy = "bestfit", .on_event = on_event};
    assert_int_equal(gs_engine_new(c, &cfg, &e), GS_OK);
    struct gs_queue_spec qs = {
        "team", GS_QUEUE_ROOT, {4000, 64000, 262144}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 0,
        0};
    assert_int_equal(gs_engine_add_queue(e, &qs, q), GS_OK);
    struct gs_priority_class_spec ps = {"normal", 10, -1};
    assert_int_equal(gs_engine_add_priority_class(e, &ps, pc), GS_OK);
    return e;
}

static void assert_queue_gpu(const struct gs_engine *e, uint32_t q, int64_t allocated,
                             int64_t demand)
{
    struct gs_queue_info qi;
    assert_int_equal(gs_engine_queue_info(e, q, &qi), GS_OK);
    assert_int_equal(qi.allocated[GS_RES_GPU], allocated);
    assert_int_equal(qi.demand[GS_RES_GPU], demand);
    char msg[256] = "";
    if (gs_engine_check(e, msg, sizeof(msg)) != GS_OK)
        print_error("%s\n", msg);
    assert_int_equal(gs_engine_check(e, msg, sizeof(msg)), GS_OK);
}

/*
 * Issue 8's rule charges each fraction the larger of its compute and memory share, so two pods
 * that fit one 80 GiB GPU together, 900 milli + 8 GiB and 99 milli + 72 GiB (compute 0.999,
 * memory 80 GiB), are charged max(0.9, 8/80 = 0.1) = 0.9 and max(0.099, 72/80 = 0.9) = 0.9:
 * 1.80 GPUs on one GPU. The engine's quota books say 1800 milli, and usage accounting charges
 * the same grants 1.80 GPU-hours in an hour (test_usage_store,
 * test_two_memory_requests_on_one_gpu_are_charged_1_80): one rule for both.
 */
static void test_two_memory_pods_on_one_gpu_are_charged_1_80_by_quota_and_accounting(void **state)
{
    (void)state;
    struct gs_cluster *c = cluster_of("H100-80GB", 1, 81920, NULL);
    uint32_t q, pc, a, b;
    struct gs_engine *e = engine_with_queue(c, &q, &pc);
    struct gs_tpod_spec sa = {"compute",
                              q,
                              pc,
                              GS_NO_GANG,
                              {.cpu_milli = 100,
                               .num_gpu = 1,
                               .gpu_milli = 900,
                               .gpu_model_mask = GS_MODEL_ANY,
                               .gpu_mem_mib = 8192},
                              -1};
    struct gs_tpod_spec sb = sa;
    sb.name = "memory";
    sb.req.gpu_milli = 99;
    sb.req.gpu_mem_mib = 73728;
    assert_int_equal(gs_engine_submit(e, &sa, 0, &a), GS_OK);
    assert_int_equal(gs_engine_submit(e, &sb, 0, &b), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 1, NULL, NULL), GS_OK);
    struct gs_tpod_info ia, ib;
    assert_int_equal(gs_engine_pod_info(e, a, &ia), GS_OK);
    assert_int_equal(gs_engine_pod_info(e, b, &ib), GS_OK);
    assert_int_equal(ia.state, GS_TPOD_RUNNING);
    assert_int_equal(ib.state, GS_TPOD_RUNNING);
    assert_int_equal(ia.pl.gpu_index[0], 0);
    assert_int_equal(ib.pl.gpu_index[0], 0);
    assert_queue_gpu(e, q, 1800, 1800);
    /* Accounting's side, through the same gs_charge_share(): 0.9 + 0.9 GPU-hours in one hour. */
    struct gs_charge_grant ga = {
        .sharing = GS_GPU_SHARE_MILLI, .gpu_milli = 900, .mem_mib = 8192, .gpu_mem_mib = 81920};
    struct gs_charge_grant gb = ga;
    gb.gpu_milli = 99;
    gb.mem_mib = 73728;
    double ha, hb;
    assert_int_equal(gs_charge_gpu_hours(&ga, 1, H_MS, &ha), GS_OK);
    assert_int_equal(gs_charge_gpu_hours(&gb, 1, H_MS, &hb), GS_OK);
    assert_near(ha + hb, 1.8, 1e-12);
    gs_engine_free(e);
    gs_cluster_free(c);
}

/* A node of one model: n GPUs of mem_mib MiB each. */
static void add_gpu_node(struct gs_cluster *c, const char *name, const char *model, int64_t mem_mib)
{
    struct gs_node_spec s = {.name = name,
                             .cpu_milli = 64000,
                             .mem_mib = 262144,
                             .pods_max = 110,
                             .gpu_count = 1,
                             .gpu_model = model,
                             .gpu_mem_mib = mem_mib};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
}

/*
 * A pending memory pod is charged against the smallest GPU memory it may use and re-charged
 * exactly where it lands. Nodes: h100 (one 81920 MiB GPU) and h200 (one 144384 MiB = 141 GiB
 * GPU). A whole-GPU pod pinned to the H100 fills it; then a 40960 MiB memory pod:
 *  - pending: 40960 / 81920 = 0.5, 500 milli (the H100 has the smallest memory);
 *  - bound on the H200 (the only room): 40960 / 144384 = 0.28369..., floor 283 milli;
 *  - the H200 node lost: pending again at 500; finished where it ran: its 283 leave exactly.
 */
static void test_pending_memory_pod_is_recharged_exactly_at_bind(void **state)
{
    (void)state;
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    add_gpu_node(c, "h100", "H100-80GB", 81920);
    add_gpu_node(c, "h200", "H200-141GB", 144384);
    uint32_t q, pc, whole, mem;
    struct gs_engine *e = engine_with_queue(c, &q, &pc);
    struct gs_tpod_spec sw = {
        "whole",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 100,
         .num_gpu = 1,
         .gpu_milli = 1000,
         .gpu_model_mask = UINT64_C(1) << gs_cluster_model_find(c, "H100-80GB")},
        -1};
    struct gs_tpod_spec sm = {
        "mem",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 100, .num_gpu = 1, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 40960},
        -1};
    assert_int_equal(gs_engine_submit(e, &sw, 0, &whole), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 1, NULL, NULL), GS_OK);
    assert_queue_gpu(e, q, 1000, 1000);
    assert_int_equal(gs_engine_submit(e, &sm, 2, &mem), GS_OK);
    assert_queue_gpu(e, q, 1000, 1000 + 500); /* pending at 500 */
    assert_int_equal(gs_engine_cycle(e, 3, NULL, NULL), GS_OK);
    struct gs_tpod_info im;
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_RUNNING);
    assert_int_equal(im.pl.node, 1); /* h200 */
    assert_queue_gpu(e, q, 1000 + 283, 1000 + 283);
    struct gs_queue_model_info mi;
    assert_int_equal(
        gs_engine_queue_model_info(e, q, (uint32_t)gs_cluster_model_find(c, "H200-141GB"), &mi),
        GS_OK);
    assert_int_equal(mi.allocated_milli, 283);
    /* The H200 node lost: the pod waits again at its pending charge. */
    assert_int_equal(gs_engine_remove_node(e, 1, 4), GS_OK);
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_PENDING);
    assert_queue_gpu(e, q, 1000, 1000 + 500);
    /* Back on a new H200 and finished: it gives back exactly the 283 it was charged. */
    add_gpu_node(c, "h200b", "H200-141GB", 144384);
    assert_int_equal(gs_engine_cycle(e, 5, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_RUNNING);
    assert_queue_gpu(e, q, 1000 + 283, 1000 + 283);
    assert_int_equal(gs_engine_finish(e, mem, 6), GS_OK);
    assert_queue_gpu(e, q, 1000, 1000);
    gs_engine_free(e);
    gs_cluster_free(c);
}

/*
 * Issue 8: a pending memory request is charged by "the GPUs it may use: those on nodes that
 * pass the pod's filters now". Nodes: big (one 81920 MiB H100) and small (one 40960 MiB A100,
 * tainted gpu=small:NoSchedule). A 20480 MiB request:
 *  - over every node (gs_charge_request()): the A100's 20480 / 40960 = 0.5;
 *  - for a pod without the toleration: only big passes, 20480 / 81920 = 0.25;
 *  - for a pod tolerating gpu=small: 0.5 again.
 * In the engine a pod of the default class waits (its 96 CPUs fit no node) charged 250; once the
 * taint is lifted the next cycle re-charges it at 500, and cordoning the A100 brings back 250.
 */
static void test_pending_memory_charge_is_over_nodes_the_filter_passes(void **state)
{
    (void)state;
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    add_gpu_node(c, "big", "H100-80GB", 81920);
    add_gpu_node(c, "small", "A100-40GB", 40960);
    char key[] = "gpu", value[] = "small";
    struct gs_taint t = {.key = key, .value = value, .effect = GS_TAINT_NO_SCHEDULE};
    assert_int_equal(gs_cluster_set_taints(c, 1, &t, 1), GS_OK);
    struct gs_pod_req r = {.num_gpu = 1, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 20480};
    double g;
    assert_int_equal(gs_charge_request(c, &r, &g), GS_OK);
    assert_near(g, 0.5, 1e-12);
    assert_int_equal(gs_charge_request_class(c, &r, GS_FILTER_DEFAULT, &g), GS_OK);
    assert_near(g, 0.25, 1e-12);
    struct gs_toleration tol = {.key = "gpu", .op = GS_TOL_EQUAL, .value = "small"};
    struct gs_filter_spec fs = {.tolerations = &tol, .n_tolerations = 1};
    uint32_t tolerant;
    assert_int_equal(gs_filter_intern(c, &fs, &tolerant), GS_OK);
    assert_int_equal(gs_charge_request_class(c, &r, tolerant, &g), GS_OK);
    assert_near(g, 0.5, 1e-12);
    /* MILLI does not depend on the nodes: 0.3 whatever the class passes. */
    struct gs_pod_req m = {.num_gpu = 1, .gpu_milli = 300, .gpu_model_mask = GS_MODEL_ANY};
    assert_int_equal(gs_charge_request_class(c, &m, GS_FILTER_DEFAULT, &g), GS_OK);
    assert_near(g, 0.3, 1e-12);
    gs_filter_release(c, tolerant);

    uint32_t q, pc, mem;
    struct gs_engine *e = engine_with_queue(c, &q, &pc);
    struct gs_tpod_spec sm = {
        "mem",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 96000, .num_gpu = 1, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 20480},
        -1};
    assert_int_equal(gs_engine_submit(e, &sm, 0, &mem), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 1, NULL, NULL), GS_OK);
    assert_queue_gpu(e, q, 0, 250);
    uint64_t gen = gs_filter_gen(c);
    assert_int_equal(gs_cluster_set_taints(c, 1, NULL, 0), GS_OK);
    assert_true(gs_filter_gen(c) != gen);
    assert_int_equal(gs_engine_cycle(e, 2, NULL, NULL), GS_OK);
    assert_queue_gpu(e, q, 0, 500);
    /* A label change that flips no class's node set leaves the counter where it was. */
    gen = gs_filter_gen(c);
    assert_int_equal(gs_cluster_set_label(c, 1, "zone", "a"), GS_OK);
    assert_true(gs_filter_gen(c) == gen);
    assert_int_equal(gs_cluster_set_unschedulable(c, 1, true), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 3, NULL, NULL), GS_OK);
    assert_queue_gpu(e, q, 0, 250);
    struct gs_tpod_info im;
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_PENDING);
    gs_engine_free(e);
    gs_cluster_free(c);
}

/*
 * A pending charge is estimated again when the cluster's GPUs change, so a GPU with less
 * memory than any before cannot land a pod above its queue's limit. Queue limit 1.4 GPUs. Node
 * h200 (one 144384 MiB GPU) takes a whole-GPU pod: 1000. A 40960 MiB pod then waits (no room),
 * charged 40960 / 144384 = 283 (the only GPU). Node h100 (one 81920 MiB GPU) is added: the
 * estimate becomes 40960 / 81920 = 500, and 1000 + 500 = 1500 > 1400, so the pod stays pending
 * at its limit; charged the old 283 it would have passed (1283) and landed at 1500.
 */
static void test_pending_charge_follows_a_smaller_gpu_added_later(void **state)
{
    (void)state;
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    add_gpu_node(c, "h200", "H200-141GB", 144384);
    struct gs_engine *e;
    struct gs_engine_config cfg = {.policy = "bestfit", .on_event = on_event};
    assert_int_equal(gs_engine_new(c, &cfg, &e), GS_OK);
    struct gs_queue_spec qs = {
        "team", GS_QUEUE_ROOT, {1000, 64000, 262144}, {1400, GS_UNLIMITED, GS_UNLIMITED}, 0, 0};
    uint32_t q, pc, whole, mem;
    assert_int_equal(gs_engine_add_queue(e, &qs, &q), GS_OK);
    struct gs_priority_class_spec ps = {"normal", 10, -1};
    assert_int_equal(gs_engine_add_priority_class(e, &ps, &pc), GS_OK);
    struct gs_tpod_spec sw = {
        "whole",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 100, .num_gpu = 1, .gpu_milli = 1000, .gpu_model_mask = GS_MODEL_ANY},
        -1};
    struct gs_tpod_spec sm = {
        "mem",
        q,
        pc,
        GS_NO_GANG,
        {.cpu_milli = 100, .num_gpu = 1, .gpu_model_mask = GS_MODEL_ANY, .gpu_mem_mib = 40960},
        -1};
    assert_int_equal(gs_engine_submit(e, &sw, 0, &whole), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 1, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_submit(e, &sm, 2, &mem), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 3, NULL, NULL), GS_OK);
    assert_queue_gpu(e, q, 1000, 1000 + 283);
    add_gpu_node(c, "h100", "H100-80GB", 81920);
    assert_int_equal(gs_engine_cycle(e, 4, NULL, NULL), GS_OK);
    struct gs_tpod_info im;
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_PENDING);
    assert_non_null(im.reason);
    assert_non_null(strstr(im.reason, "limit of 1.4 GPUs"));
    assert_queue_gpu(e, q, 1000, 1000 + 500);
    /* The whole pod ends: 500 fits the limit, and the pod lands on the H100 (best fit on
     * memory: 81920 MiB free is tighter than 144384) at exactly 500. */
    assert_int_equal(gs_engine_finish(e, whole, 5), GS_OK);
    assert_int_equal(gs_engine_cycle(e, 6, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_pod_info(e, mem, &im), GS_OK);
    assert_int_equal(im.state, GS_TPOD_RUNNING);
    assert_int_equal(im.pl.node, 1);
    assert_queue_gpu(e, q, 500, 500);
    gs_engine_free(e);
    gs_cluster_free(c);
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
        cmocka_unit_test(test_fraction_by_memory_on_an_80gb_gpu),
        cmocka_unit_test(test_pending_memory_charge_ignores_cpu_only_nodes),
        cmocka_unit_test(test_mig_3g_instance_and_timeslice_slots),
        cmocka_unit_test(test_two_sixty_percent_pods_against_a_quota_of_one_gpu),
        cmocka_unit_test(test_two_memory_pods_on_one_gpu_are_charged_1_80_by_quota_and_accounting),
        cmocka_unit_test(test_pending_memory_pod_is_recharged_exactly_at_bind),
        cmocka_unit_test(test_pending_charge_follows_a_smaller_gpu_added_later),
        cmocka_unit_test(test_pending_memory_charge_is_over_nodes_the_filter_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
