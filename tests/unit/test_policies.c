/*
 * Unit tests of the six placement policies (gs_sched_score_nodes, gs_sched_place).
 *
 * Every expected score and choice below was worked out by hand from the specification
 * (docs/fgd-policies.md, sections 2 and 3), never copied from the code's output; the
 * comment next to each value shows the arithmetic. The clusters are two to four nodes built
 * with gs_cluster_add_node() and filled with gs_cluster_bind(), so each node's free CPU and
 * free milli-GPU per device index are known exactly.
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
#include "gpusched/frag.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

#define MAX_NODES 8

/* ---- helpers ------------------------------------------------------------------------------ */

static uint32_t add_node(struct gs_cluster *c, const char *name, int64_t cpu_milli, uint32_t gpus,
                         const char *model)
{
    struct gs_node_spec sp = {
        .name = name,
        .cpu_milli = cpu_milli,
        .mem_mib = 262144,
        .pods_max = 110,
        .gpu_count = gpus,
        .gpu_model = model,
        .gpu_mem_mib = 0,
    };
    uint32_t id = UINT32_MAX;
    assert_int_equal(gs_cluster_add_node(c, &sp, &id), GS_OK);
    return id;
}

static struct gs_cluster *new_cluster(void)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    assert_non_null(c);
    return c;
}

static struct gs_pod_req cpu_req(int64_t cpu_milli)
{
    struct gs_pod_req r = GS_POD_REQ(cpu_milli, 1024, 0, 0, GS_MODEL_ANY);
    return r;
}

static struct gs_pod_req share_req(int64_t cpu_milli, int32_t gpu_milli)
{
    struct gs_pod_req r = GS_POD_REQ(cpu_milli, 1024, 1, gpu_milli, GS_MODEL_ANY);
    return r;
}

static struct gs_pod_req whole_req(int64_t cpu_milli, uint32_t num_gpu)
{
    struct gs_pod_req r = GS_POD_REQ(cpu_milli, 1024, num_gpu, GS_GPU_MILLI, GS_MODEL_ANY);
    return r;
}

/* Binds a CPU-only pod to a node. */
static void bind_cpu(struct gs_cluster *c, uint32_t node, int64_t cpu_milli)
{
    struct gs_pod_req r = cpu_req(cpu_milli);
    struct gs_placement pl = {.node = node};
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
}

/* Binds a shared pod (gpu_milli < 1000) to one GPU of a node. */
static void bind_share(struct gs_cluster *c, uint32_t node, uint8_t gpu, int64_t cpu_milli,
                       int32_t gpu_milli)
{
    struct gs_pod_req r = share_req(cpu_milli, gpu_milli);
    struct gs_placement pl = {.node = node, .num_gpu = 1, .gpu_milli = gpu_milli};
    pl.gpu_index[0] = gpu;
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
}

/* Binds a pod taking one whole GPU. */
static void bind_whole1(struct gs_cluster *c, uint32_t node, uint8_t gpu, int64_t cpu_milli)
{
    struct gs_pod_req r = whole_req(cpu_milli, 1);
    struct gs_placement pl = {.node = node, .num_gpu = 1, .gpu_milli = GS_GPU_MILLI};
    pl.gpu_index[0] = gpu;
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
}

static struct gs_sched *new_sched(struct gs_cluster *c, const char *policy, const uint32_t *rank,
                                  const struct gs_workload *w)
{
    struct gs_sched_config cfg = {.policy = policy, .node_rank = rank, .workload = w};
    struct gs_sched *s = NULL;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_OK);
    assert_non_null(s);
    return s;
}

/*
 * Scores and checks every node against `want` (-1 = infeasible). For the policies that do not
 * draw, also checks that the random source was left untouched.
 */
static void expect_scores(struct gs_sched *s, const char *policy, const struct gs_pod_req *req,
                          const int32_t *want, uint32_t n)
{
    int32_t got[MAX_NODES];
    struct gs_rng rng, before;
    gs_rng_seed(&rng, 1);
    before = rng;
    int feasible = 0;
    for (uint32_t i = 0; i < n; i++)
        feasible += want[i] >= 0;
    assert_int_equal(gs_sched_score_nodes(s, req, &rng, got), feasible);
    for (uint32_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            print_error("%s: node %u scored %d, expected %d\n", policy, i, (int)got[i],
                        (int)want[i]);
        assert_int_equal(got[i], want[i]);
    }
    if (strcmp(policy, "random") != 0)
        assert_memory_equal(&rng, &before, sizeof(rng));
}

/* Places and checks the node and the GPU indices (ascending) chosen. */
static void expect_place(struct gs_sched *s, const struct gs_pod_req *req, uint32_t node,
                         const uint8_t *gpus, uint32_t num_gpu)
{
    struct gs_rng rng;
    gs_rng_seed(&rng, 1);
    struct gs_placement pl;
    memset(&pl, 0xa5, sizeof(pl));
    assert_int_equal(gs_sched_place(s, req, &rng, &pl), GS_OK);
    assert_int_equal(pl.node, node);
    assert_int_equal(pl.num_gpu, num_gpu);
    for (uint32_t g = 0; g < num_gpu; g++)
        assert_int_equal(pl.gpu_index[g], gpus[g]);
    if (num_gpu > 0)
        assert_int_equal(pl.gpu_milli, req->gpu_milli);
}

/* ---- registry and configuration ----------------------------------------------------------- */

static void test_registry_lists_six_paper_policies_in_order_then_ours(void **state)
{
    (void)state;
    static const char *const names[] = {"random",  "dotprod", "clustering", "packing",
                                        "bestfit", "fgd",     "fgdband",    "fgdfill"};
    static const char *const labels[] = {"01-Random",     "02-DotProd", "03-GpuClustering",
                                         "04-GpuPacking", "05-BestFit", "06-FGD",
                                         "07-FGD-band",   "08-FGD-fill"};
    assert_int_equal(GS_POLICY_COUNT, 8);
    assert_int_equal(GS_POLICY_PAPER_COUNT, 6);
    for (uint32_t i = 0; i < GS_POLICY_COUNT; i++) {
        assert_string_equal(gs_policy_name(i), names[i]);
        assert_string_equal(gs_policy_label(i), labels[i]);
        assert_int_equal(gs_policy_find(names[i]), (int)i);
    }
    assert_null(gs_policy_name(GS_POLICY_COUNT));
    assert_null(gs_policy_label(GS_POLICY_COUNT));
    assert_int_equal(gs_policy_find("tetris"), -1);
}

static void test_sched_new_rejects_unknown_policy_bad_rank_and_fgd_without_workload(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "a", 8000, 1, "T4");
    add_node(c, "b", 8000, 1, "T4");
    struct gs_sched *s = (struct gs_sched *)&s; /* must be reset to NULL on failure */
    struct gs_sched_config cfg = {.policy = "tetris"};
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_ENOENT);
    assert_null(s);
    cfg.policy = "fgd";
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_EINVAL);
    assert_null(s);
    cfg.policy = "fgdband";
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_EINVAL);
    assert_null(s);
    cfg.policy = "fgdfill";
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_EINVAL);
    assert_null(s);
    static const uint32_t dup_rank[] = {0, 0}; /* not a permutation */
    static const uint32_t big_rank[] = {0, 2}; /* 2 is out of range for 2 nodes */
    cfg.policy = "packing";
    cfg.node_rank = dup_rank;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_EINVAL);
    cfg.node_rank = big_rank;
    assert_int_equal(gs_sched_new(c, &cfg, &s), GS_EINVAL);
    gs_cluster_free(c);
}

static void test_place_rejects_malformed_request(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "a", 8000, 4, "T4");
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_rng rng;
    gs_rng_seed(&rng, 1);
    struct gs_placement pl;
    /* Two GPUs of 500 milli each: only a single GPU may be shared. */
    struct gs_pod_req r = GS_POD_REQ(1000, 0, 2, 500, GS_MODEL_ANY);
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_EINVAL);
    r = share_req(1000, 0); /* a GPU pod asking 0 milli */
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_EINVAL);
    r = share_req(1000, 1001); /* more than one GPU's worth */
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_EINVAL);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- random ------------------------------------------------------------------------------- */

/* Three feasible nodes and one that the model filter removes. */
static struct gs_cluster *random_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    add_node(c, "n0", 32000, 4, "V100M32");
    add_node(c, "n1", 32000, 8, "V100M32");
    add_node(c, "n2", 16000, 2, "V100M32");
    add_node(c, "n3", 32000, 8, "T4");
    return c;
}

static void test_random_gives_100_to_one_feasible_node_and_0_to_the_rest(void **state)
{
    (void)state;
    struct gs_cluster *c = random_cluster();
    struct gs_sched *s = new_sched(c, "random", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 500);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    for (uint64_t seed = 0; seed < 20; seed++) {
        struct gs_rng rng;
        gs_rng_seed(&rng, seed);
        int32_t sc[4];
        assert_int_equal(gs_sched_score_nodes(s, &r, &rng, sc), 3);
        /* §3.1: PreScore marks one feasible node; it gets 100, every other feasible node 0. */
        int hundreds = 0, zeros = 0;
        for (int i = 0; i < 3; i++) {
            hundreds += sc[i] == 100;
            zeros += sc[i] == 0;
        }
        assert_int_equal(hundreds, 1);
        assert_int_equal(zeros, 2);
        assert_int_equal(sc[3], -1); /* T4 node: model not allowed */
    }
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_random_same_seed_gives_same_choices(void **state)
{
    (void)state;
    struct gs_cluster *c = random_cluster();
    struct gs_sched *s = new_sched(c, "random", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 300);
    struct gs_rng a, b;
    gs_rng_seed(&a, 12345);
    gs_rng_seed(&b, 12345);
    for (int k = 0; k < 200; k++) {
        struct gs_placement pa, pb;
        memset(&pa, 0, sizeof(pa));
        memset(&pb, 0, sizeof(pb));
        assert_int_equal(gs_sched_place(s, &r, &a, &pa), GS_OK);
        assert_int_equal(gs_sched_place(s, &r, &b, &pb), GS_OK);
        assert_int_equal(pa.node, pb.node);
        assert_int_equal(pa.gpu_index[0], pb.gpu_index[0]);
    }
    /* Both streams consumed the same number of draws. */
    assert_memory_equal(&a, &b, sizeof(a));
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_random_chooses_every_feasible_node_roughly_uniformly(void **state)
{
    (void)state;
    struct gs_cluster *c = random_cluster();
    struct gs_sched *s = new_sched(c, "random", NULL, NULL);
    struct gs_pod_req r = whole_req(1000, 2);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    struct gs_rng rng;
    gs_rng_seed(&rng, 2023);
    uint32_t hits[4] = {0};
    const uint32_t draws = 3000;
    for (uint32_t k = 0; k < draws; k++) {
        struct gs_placement pl;
        assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
        assert_true(pl.node < 4);
        hits[pl.node]++;
        /* Whole GPUs even under random: the first two fully free GPUs. */
        assert_int_equal(pl.num_gpu, 2);
        assert_int_equal(pl.gpu_index[0], 0);
        assert_int_equal(pl.gpu_index[1], 1);
    }
    /* Uniform over 3 feasible nodes: mean 1000, sd sqrt(3000*1/3*2/3) = 25.8; the bound
     * 800..1200 is more than 7 sd wide on each side. */
    for (int i = 0; i < 3; i++) {
        assert_in_range(hits[i], 800, 1200);
    }
    assert_int_equal(hits[3], 0); /* the T4 node is never feasible */
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_random_gpu_reservoir_only_picks_gpus_that_fit(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t n = add_node(c, "n0", 64000, 5, "V100M32");
    add_node(c, "n1", 64000, 2, "T4");
    bind_share(c, n, 1, 1000, 800); /* GPU1 free 200 */
    bind_share(c, n, 3, 1000, 500); /* GPU3 free 500 */
    bind_whole1(c, n, 4, 1000);     /* GPU4 free 0 */
    /* Free list by index: 1000, 200, 1000, 500, 0. A 400-milli pod fits GPUs 0, 2 and 3. */
    struct gs_sched *s = new_sched(c, "random", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 400);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    struct gs_rng rng;
    gs_rng_seed(&rng, 99);
    uint32_t hits[5] = {0};
    for (int k = 0; k < 3000; k++) {
        struct gs_placement pl;
        assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
        assert_int_equal(pl.node, n);
        assert_int_equal(pl.num_gpu, 1);
        assert_true(pl.gpu_index[0] < 5);
        hits[pl.gpu_index[0]]++;
    }
    /* Reservoir over 3 candidates: each 1/3, mean 1000 of 3000 (sd 25.8). */
    assert_int_equal(hits[1], 0);
    assert_int_equal(hits[4], 0);
    assert_in_range(hits[0], 800, 1200);
    assert_in_range(hits[2], 800, 1200);
    assert_in_range(hits[3], 800, 1200);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_random_single_feasible_node_draws_nothing(void **state)
{
    (void)state;
    struct gs_cluster *c = random_cluster();
    struct gs_sched *s = new_sched(c, "random", NULL, NULL);
    /* Only n3 has the T4 model, so it is the one feasible node: §2.2 shortcut, score 100,
     * no PreScore draw. A whole-GPU pick draws nothing either (§2.4). */
    struct gs_pod_req r = whole_req(1000, 1);
    r.gpu_model_mask = gs_cluster_model_mask(c, "T4", 2);
    struct gs_rng rng, before;
    gs_rng_seed(&rng, 5);
    before = rng;
    int32_t sc[4];
    assert_int_equal(gs_sched_score_nodes(s, &r, &rng, sc), 1);
    assert_int_equal(sc[0], -1);
    assert_int_equal(sc[1], -1);
    assert_int_equal(sc[2], -1);
    assert_int_equal(sc[3], 100);
    assert_memory_equal(&rng, &before, sizeof(rng));
    struct gs_placement pl;
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_OK);
    assert_int_equal(pl.node, 3);
    assert_int_equal(pl.gpu_index[0], 0);
    assert_memory_equal(&rng, &before, sizeof(rng));
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- dotprod ------------------------------------------------------------------------------ */

/*
 * A: 64000m CPU, 8 idle GPUs.
 * B: 32000m CPU, 4 GPUs; a 4000m/500-milli pod on GPU0, so cpuLeft 28000, GPU free 500,1000,
 *    1000,1000 (total 3500).
 */
static struct gs_cluster *dotprod_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    add_node(c, "a", 64000, 8, "V100M32");
    uint32_t b = add_node(c, "b", 32000, 4, "V100M32");
    bind_share(c, b, 0, 4000, 500);
    return c;
}

static void test_dotprod_prefers_node_with_least_free_in_requested_dimensions(void **state)
{
    (void)state;
    struct gs_cluster *c = dotprod_cluster();
    struct gs_sched *s = new_sched(c, "dotprod", NULL, NULL);
    struct gs_pod_req r = whole_req(8000, 1);
    /* Pod vector: (8000/128000, 1000/8000) = (0.0625, 0.125).
     * A: (64000/128000, 8000/8000) = (0.5, 1): dot = 0.03125 + 0.125 = 0.15625;
     *    100 x (1 - 0.078125) = 92.1875 -> 92.
     * B: (28000/128000, 3500/8000) = (0.21875, 0.4375): dot = 0.013671875 + 0.0546875
     *    = 0.068359375; 100 x (1 - 0.0341796875) = 96.58203125 -> 96. */
    const int32_t want[] = {92, 96};
    expect_scores(s, "dotprod", &r, want, 2);
    /* B wins; whole GPU: first fully free index is 1 (GPU0 has 500 free). */
    const uint8_t gpus[] = {1};
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_dotprod_ranks_cpu_only_pod_by_cpu_alone(void **state)
{
    (void)state;
    struct gs_cluster *c = dotprod_cluster();
    struct gs_sched *s = new_sched(c, "dotprod", NULL, NULL);
    struct gs_pod_req r = cpu_req(16000);
    /* Pod vector (16000/128000, 0) = (0.125, 0): the GPU dimension drops out.
     * A: 0.5 x 0.125 = 0.0625; 100 x (1 - 0.03125) = 96.875 -> 96.
     * B: 0.21875 x 0.125 = 0.02734375; 100 x (1 - 0.013671875) = 98.6328125 -> 98. */
    const int32_t want[] = {96, 98};
    expect_scores(s, "dotprod", &r, want, 2);
    expect_place(s, &r, 1, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_dotprod_shared_pod_takes_best_fit_gpu(void **state)
{
    (void)state;
    struct gs_cluster *c = dotprod_cluster();
    struct gs_sched *s = new_sched(c, "dotprod", NULL, NULL);
    struct gs_pod_req r = share_req(4000, 500);
    /* Pod vector (4000/128000, 500/8000) = (0.03125, 0.0625).
     * A: 0.5 x 0.03125 + 1 x 0.0625 = 0.078125; 100 x (1 - 0.0390625) = 96.09375 -> 96.
     * B: 0.21875 x 0.03125 + 0.4375 x 0.0625 = 0.0068359375 + 0.02734375 = 0.0341796875;
     *    100 x (1 - 0.01708984375) = 98.291015625 -> 98. */
    const int32_t want[] = {96, 98};
    expect_scores(s, "dotprod", &r, want, 2);
    /* §0/§2.4: DotProd picks the GPU by best fit: GPU0 (500 free) is the tightest that fits. */
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- ties --------------------------------------------------------------------------------- */

static void test_tie_goes_to_lower_rank_and_flips_with_rank(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "n0", 32000, 4, "V100M32");
    add_node(c, "n1", 32000, 4, "V100M32");
    add_node(c, "n2", 64000, 8, "V100M32");
    struct gs_pod_req r = whole_req(8000, 1);
    /* n0, n1: (0.25, 0.5).(0.0625, 0.125) = 0.015625 + 0.0625 = 0.078125;
     *         100 x (1 - 0.0390625) = 96.09375 -> 96 each: a tie.
     * n2:     (0.5, 1).(0.0625, 0.125) = 0.15625; 100 x 0.921875 = 92.1875 -> 92. */
    const int32_t want[] = {96, 96, 92};
    const uint8_t gpu0[] = {0};
    struct gs_sched *s = new_sched(c, "dotprod", NULL, NULL);
    expect_scores(s, "dotprod", &r, want, 3);
    expect_place(s, &r, 0, gpu0, 1); /* no rank given: rank = index, n0 wins */
    gs_sched_free(s);

    static const uint32_t rank_flip[] = {1, 0, 2}; /* n1 now ranks before n0 */
    s = new_sched(c, "dotprod", rank_flip, NULL);
    expect_place(s, &r, 1, gpu0, 1);
    gs_sched_free(s);

    static const uint32_t rank_back[] = {0, 2, 1}; /* n0 before n1 again */
    s = new_sched(c, "dotprod", rank_back, NULL);
    expect_place(s, &r, 0, gpu0, 1);
    gs_sched_free(s);

    /* Rank only breaks ties: n2 ranks first but scores lower (92 < 96), so n1 (rank 1) wins. */
    static const uint32_t rank_n2_first[] = {2, 1, 0};
    s = new_sched(c, "dotprod", rank_n2_first, NULL);
    expect_place(s, &r, 1, gpu0, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- clustering --------------------------------------------------------------------------- */

/*
 * n0: 8 GPUs, a shared pod (300 milli) on GPU0: tags {share}, free 7700.
 * n1: 2 GPUs, a 1-GPU pod on GPU0: tags {1-gpu}, free 1000.
 * n2: 8 GPUs, a shared pod (200) on GPU0 and a 1-GPU pod on GPU1: tags {share, 1-gpu},
 *     free 8000 - 200 - 1000 = 6800.
 * n3: 4 GPUs, one CPU-only pod: no GPU pod, free 4000.
 */
static struct gs_cluster *clustering_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    uint32_t n0 = add_node(c, "n0", 64000, 8, "V100M32");
    uint32_t n1 = add_node(c, "n1", 64000, 2, "V100M32");
    uint32_t n2 = add_node(c, "n2", 64000, 8, "V100M32");
    uint32_t n3 = add_node(c, "n3", 64000, 4, "V100M32");
    bind_share(c, n0, 0, 1000, 300);
    bind_whole1(c, n1, 0, 1000);
    bind_share(c, n2, 0, 1000, 200);
    bind_whole1(c, n2, 1, 1000);
    bind_cpu(c, n3, 2000);
    return c;
}

static void test_clustering_shared_pod_prefers_node_with_only_shared_pods(void **state)
{
    (void)state;
    struct gs_cluster *c = clustering_cluster();
    struct gs_sched *s = new_sched(c, "clustering", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 500); /* tag share-gpu */
    /* b = 25 x (8000 - free) / 8000, integer, multiply first:
     * n0: b = 25 x 300 / 8000 = 7500 / 8000 = 0; only the pod's tag: 75 + 0 = 75.
     * n1: b = 25 x 7000 / 8000 = 175000 / 8000 = 21 (21.875); only other tags: 21.
     * n2: b = 25 x 1200 / 8000 = 30000 / 8000 = 3 (3.75; dividing first would give 0);
     *     the pod's tag and another: 50 + 3 = 53.
     * n3: b = 25 x 4000 / 8000 = 12 (12.5); only a CPU pod counts as no GPU pod: 25 + 12 = 37. */
    const int32_t want[] = {75, 21, 53, 37};
    expect_scores(s, "clustering", &r, want, 4);
    /* n0 wins; best fit GPU: GPU0 has 700 free >= 500, the smallest that fits. */
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 0, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_clustering_whole_gpu_pod_prefers_node_with_same_tag(void **state)
{
    (void)state;
    struct gs_cluster *c = clustering_cluster();
    struct gs_sched *s = new_sched(c, "clustering", NULL, NULL);
    struct gs_pod_req r = whole_req(1000, 1); /* tag 1-gpu */
    /* n0: only share tags (other): b = 0 -> 0.
     * n1: only 1-gpu (same): 75 + 21 = 96.
     * n2: 1-gpu and share: 50 + 3 = 53.
     * n3: no GPU pod: 25 + 12 = 37. */
    const int32_t want[] = {0, 96, 53, 37};
    expect_scores(s, "clustering", &r, want, 4);
    const uint8_t gpus[] = {1}; /* n1's GPU0 is taken; GPU1 is the first fully free */
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_clustering_idle_small_node_beats_idle_big_node(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "big", 64000, 8, "V100M32");
    add_node(c, "small", 64000, 2, "V100M32");
    struct gs_sched *s = new_sched(c, "clustering", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 250);
    /* big:   25 + 25 x 0 / 8000 = 25.
     * small: 25 + 25 x 6000 / 8000 = 25 + 150000 / 8000 = 25 + 18 (18.75) = 43. */
    const int32_t want[] = {25, 43};
    expect_scores(s, "clustering", &r, want, 2);
    const uint8_t gpus[] = {0}; /* both GPUs free 1000: tie, lowest index */
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_clustering_cpu_only_pod_scores_zero_and_goes_to_lowest_rank(void **state)
{
    (void)state;
    struct gs_cluster *c = clustering_cluster();
    struct gs_pod_req r = cpu_req(4000);
    /* §3.3: a CPU-only pod gets 0 on every node. */
    const int32_t want[] = {0, 0, 0, 0};
    struct gs_sched *s = new_sched(c, "clustering", NULL, NULL);
    expect_scores(s, "clustering", &r, want, 4);
    expect_place(s, &r, 0, NULL, 0);
    gs_sched_free(s);
    static const uint32_t rank[] = {3, 2, 0, 1}; /* n2 has rank 0 */
    s = new_sched(c, "clustering", rank, NULL);
    expect_place(s, &r, 2, NULL, 0);
    gs_sched_free(s);
    static const uint32_t rank2[] = {3, 0, 2, 1}; /* now n1 */
    s = new_sched(c, "clustering", rank2, NULL);
    expect_place(s, &r, 1, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- packing ------------------------------------------------------------------------------ */

static void test_packing_idle_node_scores_max_of_33_minus_f_and_f(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "g1", 64000, 1, "V100M32");
    uint32_t g2 = add_node(c, "g2", 64000, 2, "V100M32");
    add_node(c, "g4", 64000, 4, "V100M32");
    add_node(c, "g8", 64000, 8, "V100M32");
    add_node(c, "g16", 64000, 16, "V100M32");
    bind_cpu(c, g2, 8000); /* a node with only CPU pods still counts as idle */
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_pod_req r = whole_req(1000, 1);
    /* f = number of GPUs (all fully free):
     * 1: max(32, 1) = 32; 2: max(31, 2) = 31; 4: max(29, 4) = 29; 8: max(25, 8) = 25;
     * 16: max(17, 16) = 17. */
    const int32_t want[] = {32, 31, 29, 25, 17};
    expect_scores(s, "packing", &r, want, 5);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 0, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/*
 * n0: 8 idle GPUs.
 * n1: 4 GPUs, free by index 1000, 400, 1000, 700.
 * n2: 2 GPUs, free by index 900, 1000.
 */
static struct gs_cluster *packing_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    add_node(c, "n0", 64000, 8, "V100M32");
    uint32_t n1 = add_node(c, "n1", 64000, 4, "V100M32");
    uint32_t n2 = add_node(c, "n2", 64000, 2, "V100M32");
    bind_share(c, n1, 1, 1000, 600);
    bind_share(c, n1, 3, 1000, 300);
    bind_share(c, n2, 0, 1000, 100);
    return c;
}

static void test_packing_shared_pod_prefers_tightest_partly_used_gpu(void **state)
{
    (void)state;
    struct gs_cluster *c = packing_cluster();
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 300);
    /* n0 idle, f = 8: max(25, 8) = 25.
     * n1 walk ascending 400, 700, 1000, 1000: 400 >= 300 taken, u = 0;
     *    s = 400 x 100 / 1000 = 40; max(100 - 40 / 10, 50) = 96.
     * n2 walk 900, 1000: 900 taken, u = 0; s = 90; 100 - 9 = 91. */
    const int32_t want[] = {25, 96, 91};
    expect_scores(s, "packing", &r, want, 3);
    const uint8_t gpus[] = {1}; /* best fit on n1: GPU1 (400) */
    expect_place(s, &r, 1, gpus, 1);

    r = share_req(1000, 500);
    /* n1: 400 < 500 skipped, 700 taken: s = 70, 100 - 7 = 93. n2: 900: 91. n0: 25. */
    const int32_t want500[] = {25, 93, 91};
    expect_scores(s, "packing", &r, want500, 3);
    const uint8_t gpus500[] = {3}; /* best fit on n1: GPU3 (700) */
    expect_place(s, &r, 1, gpus500, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_packing_whole_gpu_prefers_free_gpu_on_partly_used_node(void **state)
{
    (void)state;
    struct gs_cluster *c = packing_cluster();
    struct gs_pod_req r = whole_req(1000, 1);
    /* n0 idle: 25.
     * n1 walk 400 (no), 700 (no), 1000 taken, fully free: u = 1, max(50 - 1, 33) = 49.
     * n2 walk 900 (no), 1000 taken: u = 1: 49. n1 and n2 tie. */
    const int32_t want[] = {25, 49, 49};
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    expect_scores(s, "packing", &r, want, 3);
    const uint8_t n1_gpu[] = {0}; /* n1's first fully free GPU */
    expect_place(s, &r, 1, n1_gpu, 1);
    gs_sched_free(s);

    static const uint32_t rank[] = {0, 2, 1}; /* n2 ranks before n1: the winner flips */
    s = new_sched(c, "packing", rank, NULL);
    const uint8_t n2_gpu[] = {1}; /* n2's GPU0 holds 100 milli; GPU1 is the first fully free */
    expect_place(s, &r, 2, n2_gpu, 1);
    gs_sched_free(s);

    /* Two whole GPUs: n1 walk takes the two 1000s, u = 2: max(48, 33) = 48. n2 has one fully
     * free GPU only: infeasible. n0: 25. */
    r = whole_req(1000, 2);
    const int32_t want2[] = {25, 48, -1};
    s = new_sched(c, "packing", NULL, NULL);
    expect_scores(s, "packing", &r, want2, 3);
    const uint8_t n1_gpus[] = {0, 2};
    expect_place(s, &r, 1, n1_gpus, 2);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_packing_cpu_only_pod_scores_zero_everywhere(void **state)
{
    (void)state;
    struct gs_cluster *c = packing_cluster();
    struct gs_pod_req r = cpu_req(2000);
    const int32_t want[] = {0, 0, 0};
    static const uint32_t rank[] = {2, 1, 0};
    struct gs_sched *s = new_sched(c, "packing", rank, NULL);
    expect_scores(s, "packing", &r, want, 3);
    expect_place(s, &r, 2, NULL, 0); /* all 0: rank 0 is n2 */
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_eight_gpu_pod_takes_first_eight_fully_free_gpus(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t n0 = add_node(c, "n0", 64000, 8, "V100M32");
    uint32_t n1 = add_node(c, "n1", 64000, 10, "V100M32");
    add_node(c, "n2", 64000, 16, "V100M32");
    bind_share(c, n0, 3, 1000, 500); /* n0: only 7 fully free GPUs: infeasible */
    bind_share(c, n1, 2, 1000, 300); /* n1: 9 fully free GPUs (all but GPU2) */
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_pod_req r = whole_req(8000, 8);
    /* n1 not idle: walk 700 (no), then eight 1000s, all fully free: u = 8, max(42, 33) = 42.
     * n2 idle, f = 16: max(17, 16) = 17. */
    const int32_t want[] = {-1, 42, 17};
    expect_scores(s, "packing", &r, want, 3);
    const uint8_t gpus[] = {0, 1, 3, 4, 5, 6, 7, 8}; /* skips GPU2 (700 free) */
    expect_place(s, &r, n1, gpus, 8);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_eight_gpu_pod_gpu_choice_is_the_same_under_every_policy(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t n0 = add_node(c, "n0", 64000, 8, "V100M32");
    uint32_t n1 = add_node(c, "n1", 64000, 12, "V100M32");
    bind_share(c, n0, 0, 1000, 100); /* n0 cannot host 8 whole GPUs */
    bind_share(c, n1, 0, 1000, 500);
    bind_whole1(c, n1, 4, 1000);
    /* n1 fully free GPUs by index: 1, 2, 3, 5, 6, 7, 8, 9, 10, 11. First eight: 1..3, 5..9. */
    static char any[] = "";
    struct gs_task_type t = {1000, 1000, 1, GS_MODEL_ANY, any, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1};
    struct gs_pod_req r = whole_req(8000, 8);
    const uint8_t gpus[] = {1, 2, 3, 5, 6, 7, 8, 9};
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++) {
        struct gs_sched *s = new_sched(c, gs_policy_name(p), NULL, &w);
        /* One feasible node: the shortcut scores it 100. */
        const int32_t want[] = {-1, 100};
        expect_scores(s, gs_policy_name(p), &r, want, 2);
        expect_place(s, &r, n1, gpus, 8);
        gs_sched_free(s);
    }
    gs_cluster_free(c);
}

/* ---- bestfit ------------------------------------------------------------------------------ */

/* a: 64000m CPU, 8 idle GPUs. b: 32000m, 2 idle GPUs. c: 16000m, 4 idle GPUs. */
static struct gs_cluster *bestfit_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    add_node(c, "a", 64000, 8, "V100M32");
    add_node(c, "b", 32000, 2, "V100M32");
    add_node(c, "c", 16000, 4, "V100M32");
    return c;
}

static void test_bestfit_rescales_raw_scores_min_max(void **state)
{
    (void)state;
    struct gs_cluster *c = bestfit_cluster();
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    struct gs_pod_req r = share_req(4000, 500);
    /* r = 0.5 (cpuLeft - 4000) / 128000 + 0.5 (gpuLeft - 500) / 8000; raw = trunc(100 (1 - r)).
     * a: 0.5 x 60000/128000 + 0.5 x 7500/8000 = 0.234375 + 0.46875 = 0.703125 -> 29.6875 -> 29
     * b: 0.5 x 28000/128000 + 0.5 x 1500/8000 = 0.109375 + 0.09375 = 0.203125 -> 79.6875 -> 79
     * c: 0.5 x 12000/128000 + 0.5 x 3500/8000 = 0.046875 + 0.21875 = 0.265625 -> 73.4375 -> 73
     * min 29, max 79: a (29-29) x 100 / 50 = 0; b 5000 / 50 = 100; c 4400 / 50 = 88. */
    const int32_t want[] = {0, 100, 88};
    expect_scores(s, "bestfit", &r, want, 3);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 1, gpus, 1);

    /* CPU-only, 8000m: the GPU term is 0.5 x gpuLeft / 8000.
     * a: 0.5 x 56000/128000 + 0.5 = 0.21875 + 0.5 = 0.71875 -> 28.125 -> 28
     * b: 0.5 x 24000/128000 + 0.5 x 2000/8000 = 0.09375 + 0.125 = 0.21875 -> 78.125 -> 78
     * c: 0.5 x 8000/128000 + 0.5 x 4000/8000 = 0.03125 + 0.25 = 0.28125 -> 71.875 -> 71
     * min 28, max 78: a 0; b 100; c 43 x 100 / 50 = 86. */
    r = cpu_req(8000);
    const int32_t want_cpu[] = {0, 100, 86};
    expect_scores(s, "bestfit", &r, want_cpu, 3);
    expect_place(s, &r, 1, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_bestfit_rescale_truncates_and_ignores_infeasible_nodes(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "a", 64000, 8, "V100M32");
    add_node(c, "c", 16000, 4, "V100M32");
    add_node(c, "d", 48000, 4, "V100M32");
    add_node(c, "e", 2000, 8, "V100M32");
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    struct gs_pod_req r = share_req(4000, 500);
    /* a: 29, c: 73 (as in the test above).
     * d: 0.5 x 44000/128000 + 0.5 x 3500/8000 = 0.171875 + 0.21875 = 0.390625
     *    -> 60.9375 -> 60.
     * e: 2000m < 4000m, infeasible: not part of min/max.
     * min 29, max 73: a 0; c 100; d (60 - 29) x 100 / 44 = 3100 / 44 = 70 (70.45). */
    const int32_t want[] = {0, 100, 70, -1};
    expect_scores(s, "bestfit", &r, want, 4);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_bestfit_equal_raw_scores_all_become_zero(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "x", 32000, 4, "V100M32");
    add_node(c, "y", 32000, 4, "V100M32");
    struct gs_pod_req r = whole_req(4000, 1);
    /* Same raw score on both; max = min, so every node gets 0 and rank decides. */
    const int32_t want[] = {0, 0};
    const uint8_t gpus[] = {0};
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    expect_scores(s, "bestfit", &r, want, 2);
    expect_place(s, &r, 0, gpus, 1);
    gs_sched_free(s);
    static const uint32_t rank[] = {1, 0};
    s = new_sched(c, "bestfit", rank, NULL);
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_best_fit_gpu_pick_is_smallest_free_that_fits_lowest_index_on_tie(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t n = add_node(c, "n", 64000, 5, "V100M32");
    add_node(c, "other", 64000, 1, "T4");
    bind_share(c, n, 1, 1000, 400); /* 600 */
    bind_share(c, n, 2, 1000, 700); /* 300 */
    bind_share(c, n, 3, 1000, 400); /* 600 */
    bind_share(c, n, 4, 1000, 750); /* 250 */
    /* Free by index: 1000, 600, 300, 600, 250. */
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 500);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    const uint8_t g1[] = {1}; /* fits: 1000, 600, 600; smallest 600, GPU1 before GPU3 */
    expect_place(s, &r, n, g1, 1);
    r.gpu_milli = 250;
    const uint8_t g4[] = {4}; /* every GPU fits; 250 is the smallest */
    expect_place(s, &r, n, g4, 1);
    r.gpu_milli = 300;
    const uint8_t g2[] = {2}; /* fits 1000, 600, 300, 600: 300 */
    expect_place(s, &r, n, g2, 1);
    r.gpu_milli = 700;
    const uint8_t g0[] = {0}; /* only the fully free GPU0 fits */
    expect_place(s, &r, n, g0, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- shortcut and model constraints ------------------------------------------------------- */

static void test_single_feasible_node_scores_100_without_policy_code(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "small", 4000, 2, "V100M32");
    add_node(c, "big", 64000, 2, "V100M32");
    struct gs_pod_req r = cpu_req(8000); /* only "big" has the CPU */
    /* Clustering would give a CPU-only pod 0 and BestFit's rescale would give 0 (max = min),
     * so 100 can only come from the shortcut. */
    const int32_t want[] = {-1, 100};
    static const char *const pols[] = {"clustering", "bestfit", "packing", "dotprod"};
    for (int p = 0; p < 4; p++) {
        struct gs_sched *s = new_sched(c, pols[p], NULL, NULL);
        expect_scores(s, pols[p], &r, want, 2);
        expect_place(s, &r, 1, NULL, 0);
        gs_sched_free(s);
    }
    gs_cluster_free(c);
}

static struct gs_cluster *models_cluster(void)
{
    struct gs_cluster *c = new_cluster();
    add_node(c, "m16", 64000, 8, "V100M16");
    add_node(c, "m32", 64000, 4, "V100M32");
    add_node(c, "t4", 64000, 2, "T4");
    add_node(c, "cpu", 64000, 0, NULL);
    return c;
}

static void test_pod_allowed_one_model_only_goes_to_that_model(void **state)
{
    (void)state;
    struct gs_cluster *c = models_cluster();
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_pod_req r = share_req(1000, 500);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    const int32_t only32[] = {-1, 100, -1, -1}; /* one feasible node: shortcut */
    expect_scores(s, "packing", &r, only32, 4);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 1, gpus, 1);

    /* Either V100: m16 idle f = 8: max(25, 8) = 25; m32 idle f = 4: max(29, 4) = 29. */
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M16|V100M32", 15);
    const int32_t both[] = {25, 29, -1, -1};
    expect_scores(s, "packing", &r, both, 4);
    expect_place(s, &r, 1, gpus, 1);

    /* Any model (empty spec): the T4 node (f = 2: 31) now wins; the CPU node has no GPU. */
    r.gpu_model_mask = gs_cluster_model_mask(c, "", 0);
    const int32_t any[] = {25, 29, 31, -1};
    expect_scores(s, "packing", &r, any, 4);
    expect_place(s, &r, 2, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_spec_naming_missing_model_is_unschedulable(void **state)
{
    (void)state;
    struct gs_cluster *c = models_cluster();
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    struct gs_pod_req r = whole_req(1000, 1);
    r.gpu_model_mask = gs_cluster_model_mask(c, "A100", 4);
    assert_true(r.gpu_model_mask == 0);
    const int32_t none[] = {-1, -1, -1, -1};
    expect_scores(s, "bestfit", &r, none, 4);
    struct gs_rng rng;
    gs_rng_seed(&rng, 1);
    struct gs_placement pl;
    assert_int_equal(gs_sched_place(s, &r, &rng, &pl), GS_EUNSCHEDULABLE);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_cpu_only_pod_ignores_model_constraint(void **state)
{
    (void)state;
    struct gs_cluster *c = models_cluster();
    struct gs_sched *s = new_sched(c, "packing", NULL, NULL);
    struct gs_pod_req r = cpu_req(1000);
    r.gpu_model_mask = 0; /* §2.1: a CPU-only pod always passes Open-Gpu-Share */
    /* The node without GPUs fits, so it is the only candidate (kubernetes#129229; the one
     * feasible node scores 100 without policy code). */
    const int32_t gpu_free_first[] = {-1, -1, -1, 100};
    expect_scores(s, "packing", &r, gpu_free_first, 4);
    expect_place(s, &r, 3, NULL, 0);
    /* With node "cpu" full (64000 of 64000 milli-CPU), every GPU node passes in spite of the
     * empty model mask: all score 0 under packing, the tie goes to node 0. */
    bind_cpu(c, 3, 64000);
    const int32_t all[] = {0, 0, 0, -1};
    expect_scores(s, "packing", &r, all, 4);
    expect_place(s, &r, 0, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/*
 * A pod that asks for no GPU goes to a node without GPUs when one fits (kubernetes#129229),
 * under every policy; among such nodes the policy chooses; GPU pods are untouched; a CPU pod
 * that fits no GPU-less node goes to a GPU node as before.
 * Nodes: g0 (32000m, 4 GPUs), c1 (16000m, no GPU), g2 (64000m, 8 GPUs), c3 (32000m, no GPU).
 */
static void test_cpu_only_pod_goes_to_a_node_without_gpus_when_one_fits(void **state)
{
    (void)state;
    static const char *const names[] = {"random", "dotprod", "clustering", "packing", "bestfit"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct gs_cluster *c = new_cluster();
        add_node(c, "g0", 32000, 4, "V100M32");
        add_node(c, "c1", 16000, 0, NULL);
        add_node(c, "g2", 64000, 8, "V100M32");
        add_node(c, "c3", 32000, 0, NULL);
        struct gs_sched *s = new_sched(c, names[i], NULL, NULL);
        struct gs_rng rng;
        gs_rng_seed(&rng, 7);
        struct gs_pod_req cpu = cpu_req(8000);
        struct gs_placement pl;
        assert_int_equal(gs_sched_place(s, &cpu, &rng, &pl), GS_OK);
        assert_true(pl.node == 1 || pl.node == 3); /* c1 or c3, whatever the policy */
        assert_int_equal(pl.num_gpu, 0);
        /* A GPU pod still goes to a GPU node (c1 and c3 have none to give). */
        struct gs_pod_req gpu = whole_req(1000, 1);
        assert_int_equal(gs_sched_place(s, &gpu, &rng, &pl), GS_OK);
        assert_true(pl.node == 0 || pl.node == 2);
        /* 24000m fits c3 (32000m) but not c1 (16000m): c3, the one GPU-less node that fits. */
        struct gs_pod_req big = cpu_req(24000);
        assert_int_equal(gs_sched_place(s, &big, &rng, &pl), GS_OK);
        assert_int_equal(pl.node, 3);
        /* 40000m fits neither c1 nor c3: the GPU node g2 (64000m) is the only one. */
        struct gs_pod_req huge = cpu_req(40000);
        assert_int_equal(gs_sched_place(s, &huge, &rng, &pl), GS_OK);
        assert_int_equal(pl.node, 2);
        gs_sched_free(s);
        gs_cluster_free(c);
    }
}

/* Among GPU-less nodes the policy's scores decide: bestfit rescales the raw scores of c1 and
 * c3 alone (the GPU nodes are not candidates: -1). r = 0.5 (cpuLeft - 8000) / 128000 + 0.5 x
 * gpuLeft / 8000, raw = trunc(100 (1 - r)), gpuLeft 0 on both:
 *   c1: 0.5 x 8000/128000 = 0.03125 -> 96.875 -> 96;  c3: 0.5 x 24000/128000 = 0.09375 -> 90
 * min 90, max 96: c1 (96 - 90) x 100 / 6 = 100; c3 0. */
static void test_bestfit_among_gpu_free_nodes_only(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "g0", 32000, 4, "V100M32");
    add_node(c, "c1", 16000, 0, NULL);
    add_node(c, "g2", 64000, 8, "V100M32");
    add_node(c, "c3", 32000, 0, NULL);
    struct gs_sched *s = new_sched(c, "bestfit", NULL, NULL);
    struct gs_pod_req r = cpu_req(8000);
    const int32_t want[] = {-1, 100, -1, 0};
    expect_scores(s, "bestfit", &r, want, 4);
    expect_place(s, &r, 1, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/* ---- fgd ---------------------------------------------------------------------------------- */

static char any_spec[] = "";

static void test_fgd_prefers_node_that_keeps_whole_gpus_free(void **state)
{
    (void)state;
    /* Target workload: 1-GPU tasks (p 0.5) and 2-GPU tasks (p 0.5), 1000m CPU each. */
    struct gs_task_type t[2] = {
        {1000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 0.5},
        {1000, 1000, 2, GS_MODEL_ANY, any_spec, 1, 0.5},
    };
    struct gs_workload w = {t, 2, 2, 2};
    struct gs_cluster *c = new_cluster();
    add_node(c, "pair", 32000, 2, "V100M32");
    add_node(c, "single", 32000, 1, "V100M32");
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    struct gs_pod_req r = whole_req(1000, 1);
    /* pair before (1000, 1000): both types fit, no small GPU: F = 0.
     *   after (0, 1000): 1-GPU fits, small = 0 -> 0; 2-GPU: GPU short, cpu fits: Q2 =
     *   0.5 x 1000 = 500. dF = 0 - 500 = -500; 100 x sigmoid(-0.5) = 37.75 -> 37.
     * single before (1000): 1-GPU fits -> 0; 2-GPU GPU short -> 0.5 x 1000 = 500. F = 500.
     *   after (0): idle 0 -> F = 0. dF = 500; 100 x sigmoid(0.5) = 62.25 -> 62. */
    const int32_t want[] = {37, 62};
    expect_scores(s, "fgd", &r, want, 2);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 1, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

/*
 * FGD-band on nodes "two" (2 free GPUs, rank 0) and "four" (4 free GPUs, rank 1), a 1-GPU pod,
 * workload T0 = 1-GPU tasks (count 50 - k2) and T1 = 2-GPU tasks (count k2), 1000m CPU each.
 *   two: before (1000, 1000), both fit, F = 0; after (0, 1000): T0 fits, nothing small; T1 GPU
 *        short, Q2 = p1 x 1000. dF = -p1 x 1000.
 *   four: after 3 free GPUs both still fit: F 0 -> 0, dF = 0, 100 x sigmoid(0) = 50.
 * k2 = 1 (p1 0.02): two scores 100 x sigmoid(-0.02) = 49.50 -> 49, one point under four's 50:
 *   FGD takes four; FGD-band counts 49 as tied with 50 and takes two, the smaller rank.
 * k2 = 3 (p1 0.06): two scores 100 x sigmoid(-0.06) = 48.50 -> 48, two points under: outside
 *   the band, both policies take four.
 */
static void test_fgdband_ties_whole_gpu_pod_within_one_point_of_best(void **state)
{
    (void)state;
    static const uint32_t rank[] = {0, 1};
    const uint32_t k2s[] = {1, 3};
    const int32_t two_fgd[] = {49, 48}, two_band[] = {50, 48};
    const uint32_t band_node[] = {0, 1};
    for (int k = 0; k < 2; k++) {
        double p1 = k2s[k] / 50.0;
        struct gs_task_type t[2] = {
            {1000, 1000, 1, GS_MODEL_ANY, any_spec, 50 - k2s[k], 1.0 - p1},
            {1000, 1000, 2, GS_MODEL_ANY, any_spec, k2s[k], p1},
        };
        struct gs_workload w = {t, 2, 50, 50};
        struct gs_cluster *c = new_cluster();
        add_node(c, "two", 32000, 2, "V100M32");
        add_node(c, "four", 32000, 4, "V100M32");
        struct gs_pod_req r = whole_req(1000, 1);
        const uint8_t gpus[] = {0};
        struct gs_sched *f = new_sched(c, "fgd", rank, &w);
        const int32_t want_fgd[] = {two_fgd[k], 50};
        expect_scores(f, "fgd", &r, want_fgd, 2);
        expect_place(f, &r, 1, gpus, 1);
        struct gs_sched *b = new_sched(c, "fgdband", rank, &w);
        const int32_t want_band[] = {two_band[k], 50};
        expect_scores(b, "fgdband", &r, want_band, 2);
        expect_place(b, &r, band_node[k], gpus, 1);
        /* A shared pod keeps FGD's strict scores (no band). */
        struct gs_pod_req sh = share_req(1000, 500);
        int32_t sf[2], sb[2];
        struct gs_rng rng;
        gs_rng_seed(&rng, 1);
        assert_int_equal(gs_sched_score_nodes(f, &sh, &rng, sf), 2);
        assert_int_equal(gs_sched_score_nodes(b, &sh, &rng, sb), 2);
        assert_memory_equal(sf, sb, sizeof(sf));
        gs_sched_free(f);
        gs_sched_free(b);
        gs_cluster_free(c);
    }
}

/*
 * FGD-fill against FGD where the next pod sees no difference and the pods after it do: nodes
 * "roomy" (2 GPUs, 8000m CPU, rank 0) and "tight" (2 GPUs, 5000m CPU, rank 1), a 1-GPU pod of
 * 1000m CPU, a workload of one type T, 1-GPU tasks of 4000m CPU (p 1).
 *   FGD: before and after, T fits on both nodes and no GPU is small: F 0 -> 0, dF = 0, both 50;
 *   the tie goes to the smaller rank, roomy.
 *   FGD-fill adds dW, W the idle GPU left once T pods fill the node (one type: every rollout
 *   the same). roomy before (8000, 2 GPUs): T, T -> (0, 0 GPUs), W 0; after (7000, 1): T ->
 *   (3000, 0), W 0; dW 0: score 50. tight before (5000, 2): T -> (1000, 1), T no longer fits
 *   its CPU, W = 1000; after (4000, 1): T -> (0, 0), W 0; dW = -1000: score 100 x sigmoid(1) =
 *   73.1 -> 73. FGD-fill takes tight: the small-CPU pod uses the GPU tight's CPU would strand.
 */
static void test_fgdfill_uses_gpu_that_cpu_would_strand_where_fgd_ties(void **state)
{
    (void)state;
    static const uint32_t rank[] = {0, 1};
    struct gs_task_type t[1] = {{4000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 1.0}};
    struct gs_workload w = {t, 1, 1, 1};
    struct gs_cluster *c = new_cluster();
    add_node(c, "roomy", 8000, 2, "V100M32");
    add_node(c, "tight", 5000, 2, "V100M32");
    struct gs_pod_req r = whole_req(1000, 1);
    const uint8_t gpus[] = {0};
    struct gs_sched *f = new_sched(c, "fgd", rank, &w);
    const int32_t want_fgd[] = {50, 50};
    expect_scores(f, "fgd", &r, want_fgd, 2);
    expect_place(f, &r, 0, gpus, 1);
    struct gs_sched *l = new_sched(c, "fgdfill", rank, &w);
    const int32_t want_fill[] = {50, 73};
    expect_scores(l, "fgdfill", &r, want_fill, 2);
    expect_place(l, &r, 1, gpus, 1);
    gs_sched_free(f);
    gs_sched_free(l);
    gs_cluster_free(c);
}

/*
 * FGD-fill's GPU for a shared pod: the one of least dF + dW. Node "n" (2 GPUs, 32000m CPU) has
 * GPU 0 at 600 free (400 bound) and GPU 1 whole; the pod asks 600 milli; one type T, 600-milli
 * tasks of 1000m CPU (p 1). On GPU 0: after (0, 1000); T fits GPU 1 once, W 400 (1000 - 600),
 * F: T fits, small 0: 0. On GPU 1: after (600, 400); F: T fits, small = 400: 400, and W: T on
 * GPU 0 -> (0, 400), W 400. Before: (600, 1000), F 0 (T fits, none small), W: T on GPU 0 (best
 * fit) -> (0, 1000), T on GPU 1 -> (0, 400): W 400. dF + dW: GPU 0, 0 + 0 (score 50); GPU 1,
 * 400 + 0 (40): GPU 0, and the node scores 50. Node "m" (2 whole GPUs; a second node, so that
 * the engine scores): after (400, 1000), F 400 (small 400); W 800 before and after (T, T on
 * (1000, 1000) leave (400, 400)): dF + dW = 400, score 100 x sigmoid(-0.4) = 40.1 -> 40.
 */
static void test_fgdfill_shared_pod_takes_gpu_of_least_df_plus_dw(void **state)
{
    (void)state;
    struct gs_task_type t[1] = {{1000, 600, 1, GS_MODEL_ANY, any_spec, 1, 1.0}};
    struct gs_workload w = {t, 1, 1, 1};
    struct gs_cluster *c = new_cluster();
    uint32_t n = add_node(c, "n", 32000, 2, "V100M32");
    add_node(c, "m", 32000, 2, "V100M32");
    bind_share(c, n, 0, 1000, 400);
    struct gs_sched *l = new_sched(c, "fgdfill", NULL, &w);
    struct gs_pod_req r = share_req(1000, 600);
    const int32_t want[] = {50, 40};
    expect_scores(l, "fgdfill", &r, want, 2);
    const uint8_t gpus[] = {0};
    expect_place(l, &r, 0, gpus, 1);
    gs_sched_free(l);
    gs_cluster_free(c);
}

static void test_fgd_shared_pod_picks_first_gpu_reaching_max_truncated_score(void **state)
{
    (void)state;
    /* Types (1000m CPU, one GPU): T1 500 milli p 0.125, T2 900 p 0.25, T3 100 p 0.625. */
    struct gs_task_type t[3] = {
        {1000, 500, 1, GS_MODEL_ANY, any_spec, 1, 0.125},
        {1000, 900, 1, GS_MODEL_ANY, any_spec, 1, 0.25},
        {1000, 100, 1, GS_MODEL_ANY, any_spec, 1, 0.625},
    };
    struct gs_workload w = {t, 3, 3, 3};
    struct gs_cluster *c = new_cluster();
    uint32_t a = add_node(c, "a", 32000, 3, "V100M32");
    uint32_t b = add_node(c, "b", 32000, 1, "V100M32");
    bind_share(c, a, 1, 1000, 200); /* a: 1000, 800, 400 */
    bind_share(c, a, 2, 1000, 600);
    bind_share(c, b, 0, 1000, 50); /* b: 950 */
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    struct gs_pod_req r = share_req(1000, 100);
    /* a before (1000, 800, 400): T1 fits, small {400}: 0.125 x 400 = 50; T2 fits (1000),
     *   small {800, 400}: 0.25 x 1200 = 300; T3 fits, small none: 0. F = 350.
     *   GPU0 -> (900, 800, 400): T1 50; T2 fits (900 >= 900), small 1200: 300. F = 350,
     *     dF = 0: exactly 50.
     *   GPU1 -> (1000, 700, 400): T1 50; T2 small 1100: 275. F = 325, dF = 25:
     *     100 x sigmoid(0.025) = 50.62 -> 50.
     *   GPU2 -> (1000, 800, 300): T1 small 300: 37.5; T2 small 1100: 275. F = 312.5,
     *     dF = 37.5: 100 x sigmoid(0.0375) = 50.94 -> 50.
     *   All truncate to 50: node score 50, and GPU0 is the first index reaching it (best fit
     *   would take GPU2, and an argmax over the floats would take GPU2 too).
     * b before (950): all three fit, nothing small: F = 0.
     *   after (850): T2 GPU short, cpu fits: Q2 = 0.25 x 850 = 212.5. dF = -212.5:
     *   100 x sigmoid(-0.2125) = 44.71 -> 44. */
    const int32_t want[] = {50, 44};
    expect_scores(s, "fgd", &r, want, 2);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, a, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_shared_pod_avoids_gpu_that_best_fit_would_take(void **state)
{
    (void)state;
    struct gs_task_type t = {1000, 700, 1, GS_MODEL_ANY, any_spec, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1};
    struct gs_cluster *c = new_cluster();
    uint32_t a = add_node(c, "a", 32000, 2, "V100M32");
    add_node(c, "b", 32000, 1, "V100M32");
    bind_share(c, a, 0, 1000, 200); /* a: 800, 900 */
    bind_share(c, a, 1, 1000, 100);
    struct gs_pod_req r = share_req(1000, 200);
    /* a before (800, 900): both >= 700, F = 0.
     *   GPU0 -> (600, 900): small 600: F = 600, dF = -600: 100 x sigmoid(-0.6) = 35.43 -> 35.
     *   GPU1 -> (800, 700): nothing small: F = 0, dF = 0: 50.
     *   Node score 50, GPU1 (best fit would take GPU0, 800).
     * b before (1000): F = 0; after (800) >= 700: F = 0: 50. A tie at 50. */
    const int32_t want[] = {50, 50};
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    expect_scores(s, "fgd", &r, want, 2);
    const uint8_t g1[] = {1};
    expect_place(s, &r, a, g1, 1);
    gs_sched_free(s);
    static const uint32_t rank[] = {1, 0};
    s = new_sched(c, "fgd", rank, &w);
    const uint8_t g0[] = {0};
    expect_place(s, &r, 1, g0, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_cpu_only_pod_avoids_node_where_target_tasks_lose_cpu(void **state)
{
    (void)state;
    struct gs_task_type t = {8000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1};
    struct gs_cluster *c = new_cluster();
    add_node(c, "tight", 10000, 1, "V100M32");
    add_node(c, "roomy", 20000, 1, "V100M32");
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    struct gs_pod_req r = cpu_req(4000);
    /* tight: before cpu 10000 >= 8000, GPU fits: F = 0. After cpu 6000 < 8000, GPU fits:
     *   Q4 = 1 x 1000. dF = -1000: 100 x sigmoid(-1) = 26.89 -> 26.
     * roomy: after cpu 16000 still fits: F = 0 before and after: 50. */
    const int32_t want[] = {26, 50};
    expect_scores(s, "fgd", &r, want, 2);
    expect_place(s, &r, 1, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_scores_follow_cluster_changes(void **state)
{
    (void)state;
    /* The FGD caches are keyed on node generations: a bind between two decisions must show. */
    struct gs_task_type t[2] = {
        {1000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 0.5},
        {1000, 1000, 2, GS_MODEL_ANY, any_spec, 1, 0.5},
    };
    struct gs_workload w = {t, 2, 2, 2};
    struct gs_cluster *c = new_cluster();
    uint32_t p = add_node(c, "pair", 32000, 2, "V100M32");
    add_node(c, "single", 32000, 1, "V100M32");
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    struct gs_pod_req r = whole_req(1000, 1);
    const int32_t want[] = {37, 62}; /* as in test_fgd_prefers_node_that_keeps_whole_gpus_free */
    expect_scores(s, "fgd", &r, want, 2);
    bind_whole1(c, p, 0, 1000);
    /* pair now (0, 1000), cpu 31000: before: 1-GPU fits, small 0 -> 0; 2-GPU short -> 0.5 x
     *   1000 = 500. After (0, 0): idle 0 -> 0. dF = 500: 62. single unchanged: 62. Tie. */
    const int32_t want2[] = {62, 62};
    expect_scores(s, "fgd", &r, want2, 2);
    const uint8_t gpus[] = {1};
    expect_place(s, &r, p, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_set_workload_drops_scores_of_the_old_one(void **state)
{
    (void)state;
    /* A live scheduler learns its workload: after the swap the cached scores must not stay. */
    struct gs_task_type t1[1] = {{1000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 1.0}};
    struct gs_workload w1 = {t1, 1, 1, 1};
    struct gs_task_type t2[2] = {
        {1000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 0.5},
        {1000, 1000, 2, GS_MODEL_ANY, any_spec, 1, 0.5},
    };
    struct gs_workload w2 = {t2, 2, 2, 2};
    struct gs_cluster *c = new_cluster();
    add_node(c, "pair", 32000, 2, "V100M32");
    add_node(c, "single", 32000, 1, "V100M32");
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w1);
    struct gs_pod_req r = whole_req(1000, 1);
    /* Only 1-GPU tasks: pair (1000, 1000) -> (0, 1000): the task fits before and after, no GPU
     *   too small to hold it: F = 0 both, dF = 0: 100 x sigmoid(0) = 50. single (1000) -> (0):
     *   F = 0 before, nothing idle after: dF = 0: 50. */
    const int32_t want1[] = {50, 50};
    expect_scores(s, "fgd", &r, want1, 2);
    /* Half 2-GPU tasks: the scores of test_fgd_prefers_node_that_keeps_whole_gpus_free. */
    assert_int_equal(gs_sched_set_workload(s, &w2), GS_OK);
    const int32_t want2[] = {37, 62};
    expect_scores(s, "fgd", &r, want2, 2);
    /* FGD without a workload is refused and the current one stays. */
    assert_int_equal(gs_sched_set_workload(s, NULL), GS_EINVAL);
    expect_scores(s, "fgd", &r, want2, 2);
    assert_int_equal(gs_sched_set_workload(s, &w1), GS_OK);
    expect_scores(s, "fgd", &r, want1, 2);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_identical_states_on_different_models_score_differently(void **state)
{
    (void)state;
    /* T1: 1-GPU tasks allowed only on model "B" (p 0.5); T2: 500-milli tasks, any model. */
    struct gs_cluster *c = new_cluster();
    add_node(c, "x", 32000, 2, "A");
    add_node(c, "y", 32000, 2, "B");
    struct gs_task_type t[2] = {
        {1000, 1000, 1, gs_cluster_model_mask(c, "B", 1), any_spec, 1, 0.5},
        {1000, 500, 1, GS_MODEL_ANY, any_spec, 1, 0.5},
    };
    struct gs_workload w = {t, 2, 2, 2};
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    struct gs_pod_req r = whole_req(1000, 1);
    /* x (model A) before (1000, 1000): T1 not allowed: NA = 0.5 x 2000 = 1000; T2 fits,
     *   nothing small: 0. F = 1000. After (0, 1000): NA = 0.5 x 1000 = 500; T2 0. F = 500.
     *   dF = 500: 100 x sigmoid(0.5) = 62.25 -> 62.
     * y (model B): T1 and T2 fit before and after with nothing small (a 0-free GPU adds 0):
     *   F = 0 both: 50. Same free lists and CPU, different model: different scores. */
    const int32_t want[] = {62, 50};
    expect_scores(s, "fgd", &r, want, 2);
    const uint8_t gpus[] = {0};
    expect_place(s, &r, 0, gpus, 1);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_fgd_cached_scores_stay_exact_across_many_request_classes(void **state)
{
    (void)state;
    struct gs_task_type t = {8000, 1000, 1, GS_MODEL_ANY, any_spec, 1, 1.0};
    struct gs_workload w = {&t, 1, 1, 1};
    struct gs_cluster *c = new_cluster();
    add_node(c, "p", 20000, 1, "V100M32");
    add_node(c, "q", 20000, 1, "V100M32");
    struct gs_sched *s = new_sched(c, "fgd", NULL, &w);
    /* A CPU-only pod of k x 1000m leaves 20000 - 1000k. While that is >= 8000 (k <= 12) the
     * target type still fits: F = 0 before and after, score 50. For k >= 13 it becomes CPU
     * short: Q4 = 1000, dF = -1000: 100 x sigmoid(-1) = 26.89 -> 26. Two passes over 20
     * request classes, so the second pass reads what the first cached. */
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t k = 1; k <= 20; k++) {
            struct gs_pod_req r = cpu_req(k * 1000);
            int32_t sc = k <= 12 ? 50 : 26;
            const int32_t want[] = {sc, sc};
            expect_scores(s, "fgd", &r, want, 2);
        }
    }
    /* Nodes added after the scheduler was created are scored too. */
    add_node(c, "r", 30000, 1, "V100M32");
    struct gs_pod_req r = cpu_req(13000);
    /* p, q: 26 as above; r: 30000 - 13000 = 17000 >= 8000: 50. */
    const int32_t want[] = {26, 26, 50};
    expect_scores(s, "fgd", &r, want, 3);
    expect_place(s, &r, 2, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_nodes_added_after_scheduler_rank_after_ranked_nodes(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    add_node(c, "n0", 8000, 1, "T4");
    uint32_t n1 = add_node(c, "n1", 8000, 1, "T4");
    static const uint32_t rank[] = {1, 0};
    struct gs_sched *s = new_sched(c, "packing", rank, NULL);
    add_node(c, "n2", 8000, 1, "T4"); /* rank 2: after every node the config ranked */
    struct gs_pod_req r = cpu_req(4000);
    const int32_t want[] = {0, 0, 0};
    expect_scores(s, "packing", &r, want, 3);
    expect_place(s, &r, 1, NULL, 0); /* rank 0 */
    bind_cpu(c, n1, 8000);           /* n1 full: n0 (rank 1) beats n2 (rank 2) */
    const int32_t want2[] = {0, -1, 0};
    expect_scores(s, "packing", &r, want2, 3);
    expect_place(s, &r, 0, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

static void test_scheduler_follows_cluster_growing_past_its_first_capacity(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t n0 = add_node(c, "n0", 8000, 1, "T4");
    uint32_t n1 = add_node(c, "n1", 8000, 1, "T4");
    static const uint32_t rank[] = {1, 0};
    struct gs_sched *s = new_sched(c, "clustering", rank, NULL);
    char name[32];
    for (int i = 2; i < 200; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        add_node(c, name, 8000, 1, "T4");
    }
    /* CPU-only pod under clustering: 0 on every node, so rank alone decides. n1 (rank 0), then
     * n0 (rank 1), then the nodes added later by index: n2 first. */
    struct gs_pod_req r = cpu_req(8000);
    expect_place(s, &r, n1, NULL, 0);
    bind_cpu(c, n1, 8000);
    expect_place(s, &r, n0, NULL, 0);
    bind_cpu(c, n0, 8000);
    expect_place(s, &r, 2, NULL, 0);
    gs_sched_free(s);
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_lists_six_paper_policies_in_order_then_ours),
        cmocka_unit_test(test_sched_new_rejects_unknown_policy_bad_rank_and_fgd_without_workload),
        cmocka_unit_test(test_place_rejects_malformed_request),
        cmocka_unit_test(test_random_gives_100_to_one_feasible_node_and_0_to_the_rest),
        cmocka_unit_test(test_random_same_seed_gives_same_choices),
        cmocka_unit_test(test_random_chooses_every_feasible_node_roughly_uniformly),
        cmocka_unit_test(test_random_gpu_reservoir_only_picks_gpus_that_fit),
        cmocka_unit_test(test_random_single_feasible_node_draws_nothing),
        cmocka_unit_test(test_dotprod_prefers_node_with_least_free_in_requested_dimensions),
        cmocka_unit_test(test_dotprod_ranks_cpu_only_pod_by_cpu_alone),
        cmocka_unit_test(test_dotprod_shared_pod_takes_best_fit_gpu),
        cmocka_unit_test(test_tie_goes_to_lower_rank_and_flips_with_rank),
        cmocka_unit_test(test_clustering_shared_pod_prefers_node_with_only_shared_pods),
        cmocka_unit_test(test_clustering_whole_gpu_pod_prefers_node_with_same_tag),
        cmocka_unit_test(test_clustering_idle_small_node_beats_idle_big_node),
        cmocka_unit_test(test_clustering_cpu_only_pod_scores_zero_and_goes_to_lowest_rank),
        cmocka_unit_test(test_packing_idle_node_scores_max_of_33_minus_f_and_f),
        cmocka_unit_test(test_packing_shared_pod_prefers_tightest_partly_used_gpu),
        cmocka_unit_test(test_packing_whole_gpu_prefers_free_gpu_on_partly_used_node),
        cmocka_unit_test(test_packing_cpu_only_pod_scores_zero_everywhere),
        cmocka_unit_test(test_eight_gpu_pod_takes_first_eight_fully_free_gpus),
        cmocka_unit_test(test_eight_gpu_pod_gpu_choice_is_the_same_under_every_policy),
        cmocka_unit_test(test_bestfit_rescales_raw_scores_min_max),
        cmocka_unit_test(test_bestfit_rescale_truncates_and_ignores_infeasible_nodes),
        cmocka_unit_test(test_bestfit_equal_raw_scores_all_become_zero),
        cmocka_unit_test(test_best_fit_gpu_pick_is_smallest_free_that_fits_lowest_index_on_tie),
        cmocka_unit_test(test_single_feasible_node_scores_100_without_policy_code),
        cmocka_unit_test(test_pod_allowed_one_model_only_goes_to_that_model),
        cmocka_unit_test(test_spec_naming_missing_model_is_unschedulable),
        cmocka_unit_test(test_cpu_only_pod_ignores_model_constraint),
        cmocka_unit_test(test_cpu_only_pod_goes_to_a_node_without_gpus_when_one_fits),
        cmocka_unit_test(test_bestfit_among_gpu_free_nodes_only),
        cmocka_unit_test(test_fgd_prefers_node_that_keeps_whole_gpus_free),
        cmocka_unit_test(test_fgdband_ties_whole_gpu_pod_within_one_point_of_best),
        cmocka_unit_test(test_fgdfill_uses_gpu_that_cpu_would_strand_where_fgd_ties),
        cmocka_unit_test(test_fgdfill_shared_pod_takes_gpu_of_least_df_plus_dw),
        cmocka_unit_test(test_fgd_shared_pod_picks_first_gpu_reaching_max_truncated_score),
        cmocka_unit_test(test_fgd_shared_pod_avoids_gpu_that_best_fit_would_take),
        cmocka_unit_test(test_fgd_cpu_only_pod_avoids_node_where_target_tasks_lose_cpu),
        cmocka_unit_test(test_fgd_scores_follow_cluster_changes),
        cmocka_unit_test(test_fgd_set_workload_drops_scores_of_the_old_one),
        cmocka_unit_test(test_fgd_identical_states_on_different_models_score_differently),
        cmocka_unit_test(test_fgd_cached_scores_stay_exact_across_many_request_classes),
        cmocka_unit_test(test_nodes_added_after_scheduler_rank_after_ranked_nodes),
        cmocka_unit_test(test_scheduler_follows_cluster_growing_past_its_first_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
