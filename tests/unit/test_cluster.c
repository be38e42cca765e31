/*
 * Unit tests of the cluster model: adding nodes, GPU models and model masks, labels, the
 * feasibility filter (gs_node_fits, §2.1 of docs/fgd-policies.md) and bind/unbind.
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

static struct gs_cluster *new_cluster(void)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    assert_non_null(c);
    return c;
}

static struct gs_node_spec spec(const char *name, uint32_t gpus, const char *model)
{
    struct gs_node_spec s = {name, 32000, 65536, 110, gpus, model, 16384};
    return s;
}

static struct gs_pod_req req(int64_t cpu_milli, int64_t mem_mib, uint32_t num_gpu,
                             int32_t gpu_milli)
{
    struct gs_pod_req r = GS_POD_REQ(cpu_milli, mem_mib, num_gpu, gpu_milli, GS_MODEL_ANY);
    return r;
}

static struct gs_placement place1(uint32_t node, uint8_t gpu, int32_t gpu_milli)
{
    struct gs_placement pl = {.node = node, .num_gpu = 1, .gpu_milli = gpu_milli};
    pl.gpu_index[0] = gpu;
    return pl;
}

/* Everything a bind changes on a node, except the generation. */
static void expect_same_state(const struct gs_node *a, const struct gs_node *b)
{
    assert_int_equal(a->cpu_milli_free, b->cpu_milli_free);
    assert_int_equal(a->mem_mib_free, b->mem_mib_free);
    assert_int_equal(a->pods, b->pods);
    assert_int_equal(a->gpu_count, b->gpu_count);
    assert_memory_equal(a->gpus, b->gpus, sizeof(a->gpus[0]) * a->gpu_count);
    assert_int_equal(a->gpu_milli_free_total, b->gpu_milli_free_total);
    assert_memory_equal(a->gpu_free_desc, b->gpu_free_desc,
                        sizeof(a->gpu_free_desc[0]) * a->gpu_count);
    assert_int_equal(a->gpus_full_free, b->gpus_full_free);
    assert_int_equal(a->gpu_pods, b->gpu_pods);
    assert_memory_equal(a->tag_count, b->tag_count, sizeof(a->tag_count));
}

/* ---- adding nodes ------------------------------------------------------------------------- */

static void test_add_node_numbers_nodes_and_copies_the_spec(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    char name[8] = "gpu-a";
    struct gs_node_spec s = {name, 96000, 786432, 1001, 4, "V100M32", 32768};
    uint32_t id = 99;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    assert_int_equal(id, 0);
    name[0] = 'X'; /* the cluster keeps its own copy */
    struct gs_node_spec cpu = {"cpu-b", 8000, 1024, 10, 0, NULL, 0};
    assert_int_equal(gs_cluster_add_node(c, &cpu, NULL), GS_OK); /* id may be NULL */
    assert_int_equal(gs_cluster_node_count(c), 2);
    assert_int_equal(gs_cluster_gpu_count(c), 4);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 0);

    const struct gs_node *n = gs_cluster_node(c, 0);
    assert_string_equal(n->name, "gpu-a");
    assert_string_equal(gs_cluster_model_name(c, n->model_id), "V100M32");
    assert_int_equal(n->cpu_milli, 96000);
    assert_int_equal(n->cpu_milli_free, 96000);
    assert_int_equal(n->mem_mib, 786432);
    assert_int_equal(n->mem_mib_free, 786432);
    assert_int_equal(n->pods_max, 1001);
    assert_int_equal(n->pods, 0);
    assert_int_equal(n->gpu_count, 4);
    for (uint32_t g = 0; g < 4; g++) {
        assert_int_equal(n->gpus[g].gpu_milli, 1000);
        assert_int_equal(n->gpus[g].gpu_milli_free, 1000);
        assert_int_equal(n->gpus[g].mem_mib, 32768);
        assert_int_equal(n->gpus[g].mem_mib_free, 32768);
        assert_int_equal(n->gpus[g].pods, 0);
        assert_int_equal(n->gpu_free_desc[g], 1000);
    }
    assert_int_equal(n->gpu_milli_free_total, 4000);
    assert_int_equal(n->gpus_full_free, 4);
    assert_int_equal(n->gpu_pods, 0);
    assert_true(n->gen > 0);

    const struct gs_node *m = gs_cluster_node(c, 1);
    assert_string_equal(m->name, "cpu-b");
    assert_int_equal(m->gpu_count, 0);
    assert_int_equal(m->gpu_milli_free_total, 0);
    assert_true(m->gen != n->gen);
    assert_null(gs_cluster_node(c, 2));
    gs_cluster_free(c);
}

static void test_add_node_rejects_duplicate_name_and_leaves_cluster_unchanged(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("a", 2, "V100M32");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    struct gs_node_spec dup = spec("a", 8, "T4");
    uint32_t id = 77;
    assert_int_equal(gs_cluster_add_node(c, &dup, &id), GS_EEXIST);
    assert_int_equal(id, 77);
    assert_int_equal(gs_cluster_node_count(c), 1);
    assert_int_equal(gs_cluster_gpu_count(c), 2);
    assert_int_equal(gs_cluster_model_find(c, "T4"), -1); /* the failed node's model not added */
    gs_cluster_free(c);
}

static void test_add_node_finds_duplicates_among_many_nodes(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "node-%04d", i);
        struct gs_node_spec s = spec(name, (uint32_t)(i % 9), i % 2 ? "A100" : "T4");
        uint32_t id;
        assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
        assert_int_equal(id, (uint32_t)i);
    }
    for (int i = 0; i < 300; i += 37) {
        snprintf(name, sizeof(name), "node-%04d", i);
        struct gs_node_spec s = spec(name, 1, "T4");
        assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EEXIST);
        assert_string_equal(gs_cluster_node(c, (uint32_t)i)->name, name);
    }
    assert_int_equal(gs_cluster_node_count(c), 300);
    /* GPUs: i % 9 over i = 0..299: 33 full cycles of 0..8 (36 each) = 1188, plus i = 297..299
     * giving 0 + 1 + 2 = 3: 1191. */
    assert_int_equal(gs_cluster_gpu_count(c), 1191);
    gs_cluster_free(c);
}

static void test_add_node_rejects_bad_specs(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("ok16", 16, "H100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK); /* 16 = GS_NODE_GPUS_MAX */

    s = spec("too-many", 17, "H100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("no-model", 2, NULL);
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("empty-model", 2, "");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("", 0, NULL);
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec(NULL, 0, NULL);
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("neg-cpu", 0, NULL);
    s.cpu_milli = -1;
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("neg-mem", 0, NULL);
    s.mem_mib = -1;
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    s = spec("no-pods", 0, NULL);
    s.pods_max = 0;
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_EINVAL);
    assert_int_equal(gs_cluster_node_count(c), 1);
    assert_int_equal(gs_cluster_gpu_count(c), 16);

    /* A CPU-only node needs no model, and its model text is ignored. */
    s = spec("cpu", 0, NULL);
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("cpu2", 0, "");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    gs_cluster_free(c);
}

/* ---- models and masks --------------------------------------------------------------------- */

static void test_model_ids_count_from_zero_in_order_of_first_use(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    uint32_t id = 99;
    assert_int_equal(gs_cluster_model_id(c, "T4", &id), GS_OK);
    assert_int_equal(id, 0);
    assert_int_equal(gs_cluster_model_id(c, "A100", &id), GS_OK);
    assert_int_equal(id, 1);
    assert_int_equal(gs_cluster_model_id(c, "T4", &id), GS_OK);
    assert_int_equal(id, 0);
    struct gs_node_spec s = spec("n", 1, "V100M32");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    assert_int_equal(gs_cluster_node(c, 0)->model_id, 2);
    assert_int_equal(gs_cluster_model_find(c, "V100M32"), 2);
    assert_int_equal(gs_cluster_model_find(c, "V100"), -1);
    assert_string_equal(gs_cluster_model_name(c, 1), "A100");
    assert_null(gs_cluster_model_name(c, 3));
    assert_int_equal(gs_cluster_model_id(c, "", &id), GS_EINVAL);
    gs_cluster_free(c);
}

static void test_model_limit_is_64_and_failed_add_leaves_cluster_unchanged(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    char name[32];
    uint32_t id;
    for (int m = 0; m < GS_MODELS_MAX; m++) {
        snprintf(name, sizeof(name), "M%d", m);
        assert_int_equal(gs_cluster_model_id(c, name, &id), GS_OK);
        assert_int_equal(id, (uint32_t)m);
    }
    assert_int_equal(gs_cluster_model_id(c, "one-too-many", &id), GS_ELIMIT);
    assert_int_equal(gs_cluster_model_id(c, "M63", &id), GS_OK); /* known names still work */
    assert_int_equal(id, 63);
    struct gs_node_spec s = spec("n", 1, "one-too-many");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_ELIMIT);
    assert_int_equal(gs_cluster_node_count(c), 0);
    s = spec("n", 1, "M5");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK); /* "n" was not taken */
    /* Model 63 is the top bit of a mask. */
    assert_true(gs_cluster_model_mask(c, "M63", 3) == (UINT64_C(1) << 63));
    gs_cluster_free(c);
}

static void test_model_mask_parses_bar_separated_names(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("a", 1, "V100M16"); /* id 0 */
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("b", 1, "V100M32"); /* id 1 */
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("c", 1, "T4"); /* id 2 */
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);

    assert_true(gs_cluster_model_mask(c, "V100M16|V100M32", 15) == 0x3);
    assert_true(gs_cluster_model_mask(c, "T4", 2) == 0x4);
    /* Empty or missing list: any model. */
    assert_true(gs_cluster_model_mask(c, "", 0) == GS_MODEL_ANY);
    assert_true(gs_cluster_model_mask(c, NULL, 0) == GS_MODEL_ANY);
    /* Empty parts are skipped. */
    assert_true(gs_cluster_model_mask(c, "|T4||", 5) == 0x4);
    assert_true(gs_cluster_model_mask(c, "||", 2) == GS_MODEL_ANY);
    /* Unknown names match nothing; exact match only (no prefixes). */
    assert_true(gs_cluster_model_mask(c, "A100", 4) == 0);
    assert_true(gs_cluster_model_mask(c, "V100", 4) == 0);
    assert_true(gs_cluster_model_mask(c, "V100M32X", 8) == 0);
    assert_true(gs_cluster_model_mask(c, "A100|T4", 7) == 0x4);
    /* Only len bytes are read. */
    assert_true(gs_cluster_model_mask(c, "T4|V100M16", 2) == 0x4);
    assert_true(gs_cluster_model_mask(c, "V100M32|T4", 6) == 0); /* "V100M3" */
    gs_cluster_free(c);
}

/* ---- labels ------------------------------------------------------------------------------- */

static void test_labels_set_replace_and_look_up(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("a", 1, "T4");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    assert_null(gs_node_label(n, "zone"));
    uint64_t gen = n->gen;
    assert_int_equal(gs_cluster_set_label(c, 0, "zone", "eu-1"), GS_OK);
    assert_int_equal(gs_cluster_set_label(c, 0, "rack", "r7"), GS_OK);
    assert_true(n->gen != gen); /* a label change is a node change */
    assert_string_equal(gs_node_label(n, "zone"), "eu-1");
    assert_string_equal(gs_node_label(n, "rack"), "r7");
    assert_null(gs_node_label(n, "zon")); /* a key prefix is not a key */
    assert_null(gs_node_label(n, "zone1"));
    assert_int_equal(gs_cluster_set_label(c, 0, "zone", "eu-2"), GS_OK);
    assert_string_equal(gs_node_label(n, "zone"), "eu-2");
    assert_int_equal(n->label_count, 2);
    assert_int_equal(gs_cluster_set_label(c, 0, "empty", ""), GS_OK);
    assert_string_equal(gs_node_label(n, "empty"), "");
    assert_int_equal(gs_cluster_set_label(c, 0, "", "x"), GS_EINVAL);
    assert_int_equal(gs_cluster_set_label(c, 1, "zone", "x"), GS_EINVAL); /* no node 1 */
    assert_int_equal(n->label_count, 3);
    gs_cluster_free(c);
}

/* ---- the filter --------------------------------------------------------------------------- */

static void test_node_fits_checks_cpu_memory_and_pod_limit(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = {"n", 8000, 1000, 2, 1, "T4", 0};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    struct gs_pod_req r = req(8000, 1000, 0, 0);
    assert_true(gs_node_fits(n, &r)); /* exactly the allocatable amounts */
    r.cpu_milli = 8001;
    assert_false(gs_node_fits(n, &r));
    r = req(8000, 1001, 0, 0);
    assert_false(gs_node_fits(n, &r));
    r = req(8000, 1000, 1, 1000);
    assert_true(gs_node_fits(n, &r)); /* GPU pods are held to CPU and memory too */
    r.cpu_milli = 8001;
    assert_false(gs_node_fits(n, &r));

    /* Pod limit 2: after two pods a third no longer fits, even a 0m/0MiB one. */
    struct gs_pod_req small = req(1000, 100, 0, 0);
    struct gs_placement pl = {.node = 0};
    assert_int_equal(gs_cluster_bind(c, &small, &pl), GS_OK);
    struct gs_pod_req zero = req(0, 0, 0, 0);
    assert_true(gs_node_fits(n, &zero));
    assert_int_equal(gs_cluster_bind(c, &small, &pl), GS_OK);
    assert_false(gs_node_fits(n, &zero));
    /* 6000m and 800MiB left: what remains still fits by resources, not by count. */
    assert_int_equal(n->cpu_milli_free, 6000);
    assert_int_equal(n->mem_mib_free, 800);
    gs_cluster_free(c);
}

static void test_node_fits_checks_gpu_model(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("m16", 2, "V100M16");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("m32", 2, "V100M32");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("cpu", 0, NULL);
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *m16 = gs_cluster_node(c, 0);
    const struct gs_node *m32 = gs_cluster_node(c, 1);
    const struct gs_node *cpu = gs_cluster_node(c, 2);
    struct gs_pod_req r = req(1000, 100, 1, 500);
    r.gpu_model_mask = gs_cluster_model_mask(c, "V100M32", 7);
    assert_false(gs_node_fits(m16, &r));
    assert_true(gs_node_fits(m32, &r));
    assert_false(gs_node_fits(cpu, &r)); /* no GPU at all */
    r.gpu_model_mask = GS_MODEL_ANY;
    assert_true(gs_node_fits(m16, &r));
    assert_true(gs_node_fits(m32, &r));
    assert_false(gs_node_fits(cpu, &r));
    r.gpu_model_mask = gs_cluster_model_mask(c, "H100", 4); /* 0: matches nothing */
    assert_false(gs_node_fits(m16, &r));
    assert_false(gs_node_fits(m32, &r));
    /* A CPU-only pod passes the GPU checks on every node, whatever its mask. */
    struct gs_pod_req cpu_pod = req(1000, 100, 0, 0);
    cpu_pod.gpu_model_mask = 0;
    assert_true(gs_node_fits(m16, &cpu_pod));
    assert_true(gs_node_fits(m32, &cpu_pod));
    assert_true(gs_node_fits(cpu, &cpu_pod));
    gs_cluster_free(c);
}

static void test_node_fits_needs_num_gpu_gpus_each_with_gpu_milli_free(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("n", 4, "A100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    /* Free by index: 1000, 600, 1000, 300. */
    struct gs_pod_req p400 = req(0, 0, 1, 400);
    struct gs_placement pl = place1(0, 1, 400);
    assert_int_equal(gs_cluster_bind(c, &p400, &pl), GS_OK);
    struct gs_pod_req p700 = req(0, 0, 1, 700);
    pl = place1(0, 3, 700);
    assert_int_equal(gs_cluster_bind(c, &p700, &pl), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    /* Descending free list: 1000, 1000, 600, 300. */
    assert_int_equal(n->gpu_free_desc[0], 1000);
    assert_int_equal(n->gpu_free_desc[1], 1000);
    assert_int_equal(n->gpu_free_desc[2], 600);
    assert_int_equal(n->gpu_free_desc[3], 300);
    assert_int_equal(n->gpus_full_free, 2);
    assert_int_equal(n->gpu_milli_free_total, 2900);

    struct gs_pod_req r = req(1000, 100, 2, 1000);
    assert_true(gs_node_fits(n, &r)); /* 2nd largest = 1000 */
    r.num_gpu = 3;
    assert_false(gs_node_fits(n, &r)); /* 3rd largest = 600 < 1000 */
    r.num_gpu = 5;
    assert_false(gs_node_fits(n, &r)); /* more GPUs than the node has */
    r = req(1000, 100, 1, 1000);
    assert_true(gs_node_fits(n, &r));

    /* Take the two whole GPUs: now the largest free is 600. */
    struct gs_pod_req two = req(0, 0, 2, 1000);
    struct gs_placement pl2 = {.node = 0, .num_gpu = 2, .gpu_milli = 1000};
    pl2.gpu_index[0] = 0;
    pl2.gpu_index[1] = 2;
    assert_int_equal(gs_cluster_bind(c, &two, &pl2), GS_OK);
    r = req(1000, 100, 1, 600);
    assert_true(gs_node_fits(n, &r));
    r.gpu_milli = 601;
    assert_false(gs_node_fits(n, &r));
    r.gpu_milli = 1000;
    assert_false(gs_node_fits(n, &r));
    gs_cluster_free(c);
}

/* ---- bind and unbind ---------------------------------------------------------------------- */

static void test_bind_then_unbind_restores_state_and_bumps_gen(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("n", 4, "A100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    s = spec("other", 2, "A100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    const struct gs_node *other = gs_cluster_node(c, 1);
    struct gs_node before = *n;
    uint64_t other_gen = other->gen;

    /* A shared pod on GPU2. */
    struct gs_pod_req share = req(3000, 2048, 1, 250);
    struct gs_placement pl = place1(0, 2, 250);
    assert_int_equal(gs_cluster_bind(c, &share, &pl), GS_OK);
    assert_true(n->gen != before.gen);
    uint64_t gen1 = n->gen;
    assert_int_equal(n->cpu_milli_free, 32000 - 3000);
    assert_int_equal(n->mem_mib_free, 65536 - 2048);
    assert_int_equal(n->pods, 1);
    assert_int_equal(n->gpus[2].gpu_milli_free, 750);
    assert_int_equal(n->gpus[2].pods, 1);
    assert_int_equal(n->gpu_milli_free_total, 3750);
    assert_int_equal(n->gpus_full_free, 3);
    assert_int_equal(n->gpu_pods, 1);
    assert_int_equal(n->tag_count[GS_TAG_SHARE], 1);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 250);

    /* A 2-GPU pod on GPUs 0 and 3. */
    struct gs_pod_req two = req(8000, 4096, 2, 1000);
    struct gs_placement pl2 = {.node = 0, .num_gpu = 2, .gpu_milli = 1000};
    pl2.gpu_index[0] = 0;
    pl2.gpu_index[1] = 3;
    assert_int_equal(gs_cluster_bind(c, &two, &pl2), GS_OK);
    assert_true(n->gen != gen1);
    assert_int_equal(n->gpu_milli_free_total, 1750); /* 0 + 1000 + 750 + 0 */
    assert_int_equal(n->gpus_full_free, 1);
    assert_int_equal(n->gpu_pods, 2);
    assert_int_equal(n->tag_count[2], 1);
    assert_int_equal(n->gpu_free_desc[0], 1000);
    assert_int_equal(n->gpu_free_desc[1], 750);
    assert_int_equal(n->gpu_free_desc[2], 0);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 2250);

    /* A CPU-only pod: no tag, no GPU. */
    struct gs_pod_req cpu = req(1000, 512, 0, 0);
    struct gs_placement plc = {.node = 0};
    assert_int_equal(gs_cluster_bind(c, &cpu, &plc), GS_OK);
    assert_int_equal(n->pods, 3);
    assert_int_equal(n->gpu_pods, 2);

    /* Release in another order than binding; every step is a new generation. */
    uint64_t gens[4] = {n->gen, 0, 0, 0};
    assert_int_equal(gs_cluster_unbind(c, &share, &pl), GS_OK);
    gens[1] = n->gen;
    assert_int_equal(gs_cluster_unbind(c, &cpu, &plc), GS_OK);
    gens[2] = n->gen;
    assert_int_equal(gs_cluster_unbind(c, &two, &pl2), GS_OK);
    gens[3] = n->gen;
    for (int i = 0; i < 4; i++) {
        assert_true(gens[i] != before.gen);
        for (int j = 0; j < i; j++)
            assert_true(gens[i] != gens[j]);
    }
    expect_same_state(n, &before);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 0);
    assert_int_equal(other->gen, other_gen); /* other nodes untouched */
    gs_cluster_free(c);
}

static void test_bind_that_does_not_fit_returns_einval_and_changes_nothing(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = {"n", 8000, 4096, 110, 2, "A100", 0};
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    struct gs_pod_req p600 = req(1000, 100, 1, 600);
    struct gs_placement pl = place1(0, 0, 600);
    assert_int_equal(gs_cluster_bind(c, &p600, &pl), GS_OK); /* GPU0 free 400 */
    struct gs_node before = *n;

    struct gs_pod_req r = req(1000, 100, 1, 500);
    pl = place1(0, 0, 500); /* GPU0 has only 400 */
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_EINVAL);
    pl = place1(0, 2, 500); /* no GPU2 */
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_EINVAL);
    pl = place1(1, 1, 500); /* no node 1 */
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_EINVAL);
    pl = place1(0, 1, 400); /* placement milli differs from the request */
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_EINVAL);
    struct gs_pod_req big_cpu = req(7001, 100, 1, 500); /* 7000m left */
    pl = place1(0, 1, 500);
    assert_int_equal(gs_cluster_bind(c, &big_cpu, &pl), GS_EINVAL);
    struct gs_pod_req big_mem = req(1000, 3997, 1, 500); /* 3996 MiB left */
    assert_int_equal(gs_cluster_bind(c, &big_mem, &pl), GS_EINVAL);
    struct gs_pod_req two = req(1000, 100, 2, 1000);
    struct gs_placement pl2 = {.node = 0, .num_gpu = 2, .gpu_milli = 1000};
    pl2.gpu_index[0] = 1;
    pl2.gpu_index[1] = 1; /* the same GPU twice */
    assert_int_equal(gs_cluster_bind(c, &two, &pl2), GS_EINVAL);
    pl2.num_gpu = 1; /* fewer GPUs than requested */
    assert_int_equal(gs_cluster_bind(c, &two, &pl2), GS_EINVAL);
    struct gs_pod_req one = req(1000, 100, 1, 1000);
    pl = place1(0, 0, 1000); /* GPU0 is not fully free */
    assert_int_equal(gs_cluster_bind(c, &one, &pl), GS_EINVAL);

    expect_same_state(n, &before);
    assert_true(n->gen == before.gen);
    assert_int_equal(gs_cluster_gpu_milli_used(c), 600);
    gs_cluster_free(c);
}

static void test_unbind_of_what_was_not_bound_returns_einval(void **state)
{
    (void)state;
    struct gs_cluster *c = new_cluster();
    struct gs_node_spec s = spec("n", 2, "A100");
    assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    const struct gs_node *n = gs_cluster_node(c, 0);
    struct gs_pod_req r = req(1000, 100, 1, 300);
    struct gs_placement pl = place1(0, 0, 300);
    assert_int_equal(gs_cluster_unbind(c, &r, &pl), GS_EINVAL); /* nothing bound yet */
    assert_int_equal(gs_cluster_bind(c, &r, &pl), GS_OK);
    struct gs_node before = *n;
    struct gs_placement wrong = place1(0, 1, 300); /* GPU1 holds nothing */
    assert_int_equal(gs_cluster_unbind(c, &r, &wrong), GS_EINVAL);
    struct gs_pod_req bigger = req(1000, 100, 1, 400); /* would free more than was taken */
    struct gs_placement pl400 = place1(0, 0, 400);
    assert_int_equal(gs_cluster_unbind(c, &bigger, &pl400), GS_EINVAL);
    expect_same_state(n, &before);
    assert_true(n->gen == before.gen);
    assert_int_equal(gs_cluster_unbind(c, &r, &pl), GS_OK);
    assert_int_equal(gs_cluster_unbind(c, &r, &pl), GS_EINVAL); /* only once */
    gs_cluster_free(c);
}

static void test_req_tag_classifies_shared_whole_and_cpu_pods(void **state)
{
    (void)state;
    struct gs_pod_req r = req(1000, 0, 0, 0);
    assert_int_equal(gs_req_tag(&r), -1);
    r = req(1000, 0, 1, 999);
    assert_int_equal(gs_req_tag(&r), GS_TAG_SHARE);
    r = req(1000, 0, 1, 1000);
    assert_int_equal(gs_req_tag(&r), 1);
    r = req(1000, 0, 8, 1000);
    assert_int_equal(gs_req_tag(&r), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_node_numbers_nodes_and_copies_the_spec),
        cmocka_unit_test(test_add_node_rejects_duplicate_name_and_leaves_cluster_unchanged),
        cmocka_unit_test(test_add_node_finds_duplicates_among_many_nodes),
        cmocka_unit_test(test_add_node_rejects_bad_specs),
        cmocka_unit_test(test_model_ids_count_from_zero_in_order_of_first_use),
        cmocka_unit_test(test_model_limit_is_64_and_failed_add_leaves_cluster_unchanged),
        cmocka_unit_test(test_model_mask_parses_bar_separated_names),
        cmocka_unit_test(test_labels_set_replace_and_look_up),
        cmocka_unit_test(test_node_fits_checks_cpu_memory_and_pod_limit),
        cmocka_unit_test(test_node_fits_checks_gpu_model),
        cmocka_unit_test(test_node_fits_needs_num_gpu_gpus_each_with_gpu_milli_free),
        cmocka_unit_test(test_bind_then_unbind_restores_state_and_bumps_gen),
        cmocka_unit_test(test_bind_that_does_not_fit_returns_einval_and_changes_nothing),
        cmocka_unit_test(test_unbind_of_what_was_not_bound_returns_einval),
        cmocka_unit_test(test_req_tag_classifies_shared_whole_and_cpu_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
