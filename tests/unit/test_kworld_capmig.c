/*
 * MIG read from a Node's capacity without the agent's inventory (src/k8s/kworld_capmig.c):
 * the packing of advertised instance counts onto the fewest GPUs, worked by hand from the
 * geometry of include/gpusched/mig.h (H100-80GB: 7 compute and 8 memory slices; 1g.10gb starts
 * at 0..6 and takes 1 memory slice, 2g.20gb at 0, 2, 4 and takes 2, 3g.40gb at 0 or 4 and takes
 * 4 (3 compute), 4g.40gb at 0 and takes 4 (4 compute), 7g.80gb at 0 and takes 8), and what a
 * Node object becomes: GPU order, health from allocatable, warnings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "k8s/kworld_capmig.h"

static const struct gs_mig_model *h100(void)
{
    const struct gs_mig_model *m = gs_mig_model_find("NVIDIA-H100-80GB-HBM3");
    assert_non_null(m);
    return m;
}

/* Counts of the H100 by profile name. */
static struct gs__kcap_counts counts(int n, ...)
{
    struct gs__kcap_counts c;
    memset(&c, 0, sizeof c);
    c.model = h100();
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *prof = va_arg(ap, const char *);
        int k = va_arg(ap, int);
        int p = gs_mig_profile_find(c.model, prof);
        assert_true(p >= 0);
        c.n[p] = (uint16_t)k;
    }
    va_end(ap);
    return c;
}

/* "1g.10gb@0,1g.10gb@1" for a GPU's layout. */
static void layout_text(const struct gs_gpu_mode *m, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < m->mig_count && len < cap; i++) {
        int w = snprintf(out + len, cap - len, "%s%s@%u", i ? "," : "",
                         h100()->profiles[m->mig[i].profile].name, (unsigned)m->mig[i].start);
        len += w > 0 ? (size_t)w : 0;
    }
}

static void test_seven_1g_and_two_3g_take_two_h100s(void **state)
{
    (void)state;
    /* 7 x 1 + 2 x 3 = 13 compute slices > 7: not one GPU; two. The search takes the profile
     * with the most compute slices (3g) first: the first layout holding a 3g in enumeration
     * order (profile, then start, depth first) whose rest fits one GPU is 1g at 0..3 with 3g
     * at 4 (memory 4-7); the rest, 3 x 1g and a 3g, is 1g at 0..2 with 3g at 4. */
    struct gs__kcap_counts c = counts(2, "1g.10gb", 7, "3g.40gb", 2);
    struct gs_gpu_mode l[GS_NODE_GPUS_MAX];
    uint32_t n = 99;
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 2);
    char t[200];
    layout_text(&l[0], t, sizeof t);
    assert_string_equal(t, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,3g.40gb@4");
    layout_text(&l[1], t, sizeof t);
    assert_string_equal(t, "1g.10gb@0,1g.10gb@1,1g.10gb@2,3g.40gb@4");
    for (uint32_t g = 0; g < n; g++) {
        assert_int_equal(l[g].sharing, GS_GPU_SHARE_MIG);
        assert_int_equal(gs_mig_layout_check(c.model, l[g].mig, l[g].mig_count, NULL, 0), GS_OK);
    }
    /* One GPU too few. */
    assert_int_equal(gs__kcap_pack(&c, 1, l, &n), GS_ENOENT);
    assert_int_equal(n, 0);
}

static void test_one_gpu_when_the_counts_tile_it(void **state)
{
    (void)state;
    struct gs_gpu_mode l[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    char t[200];
    /* 4g at 0 (memory 0-3, 4 compute) beside 3g at 4 (memory 4-7, 3 compute): 7 of 7. */
    struct gs__kcap_counts c = counts(2, "4g.40gb", 1, "3g.40gb", 1);
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 1);
    layout_text(&l[0], t, sizeof t);
    assert_string_equal(t, "4g.40gb@0,3g.40gb@4");
    /* 2g's at 0, 2, 4 (6 compute) and a 1g at 6 (the 7th). */
    c = counts(2, "2g.20gb", 3, "1g.10gb", 1);
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 1);
    layout_text(&l[0], t, sizeof t);
    assert_string_equal(t, "2g.20gb@0,2g.20gb@2,2g.20gb@4,1g.10gb@6");
}

static void test_counts_past_one_gpu_spill_to_the_next(void **state)
{
    (void)state;
    struct gs_gpu_mode l[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    /* Eight 1g's: at most 7 per GPU, so 2 GPUs. */
    struct gs__kcap_counts c = counts(1, "1g.10gb", 8);
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(l[0].mig_count + l[1].mig_count, 8);
    /* A 3g at 4 (memory 4-7) leaves memory 0-3 for two 2g's at 0 and 2: 3 + 2 + 2 = 7 compute
     * slices, one GPU. A third 2g makes 9 compute slices: two GPUs. */
    c = counts(2, "2g.20gb", 2, "3g.40gb", 1);
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 1);
    char t[200];
    layout_text(&l[0], t, sizeof t);
    assert_string_equal(t, "2g.20gb@0,2g.20gb@2,3g.40gb@4");
    c = counts(2, "2g.20gb", 3, "3g.40gb", 1);
    assert_int_equal(gs__kcap_pack(&c, 8, l, &n), GS_OK);
    assert_int_equal(n, 2);
}

static void test_impossible_counts_are_refused(void **state)
{
    (void)state;
    struct gs_gpu_mode l[GS_NODE_GPUS_MAX];
    uint32_t n = 5;
    /* A 7g takes all 8 memory slices: a 1g beside it needs a second GPU. */
    struct gs__kcap_counts c = counts(2, "7g.80gb", 1, "1g.10gb", 1);
    assert_int_equal(gs__kcap_pack(&c, 1, l, &n), GS_ENOENT);
    assert_int_equal(n, 0);
    assert_int_equal(gs__kcap_pack(&c, 2, l, &n), GS_OK);
    assert_int_equal(n, 2);
    /* 200 instances cannot sit on 16 GPUs of at most 8 instances each. */
    c = counts(1, "1g.10gb", 200);
    assert_int_equal(gs__kcap_pack(&c, 16, l, &n), GS_ENOENT);
    /* Nothing asked: no GPU. */
    c = counts(0);
    assert_int_equal(gs__kcap_pack(&c, 16, l, &n), GS_OK);
    assert_int_equal(n, 0);
    c.model = NULL;
    assert_int_equal(gs__kcap_pack(&c, 16, l, &n), GS_EINVAL);
}

/* ---- Node objects ----------------------------------------------------------------------- */

struct said {
    int n;
    char last[600];
};

static void on_warn(void *ctx, const char *msg)
{
    struct said *s = ctx;
    s->n++;
    (void)snprintf(s->last, sizeof s->last, "%s", msg);
}

static json_t *node(const char *labels, const char *capacity, const char *allocatable)
{
    char text[2000];
    (void)snprintf(text, sizeof text,
                   "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":%s},"
                   "\"status\":{\"capacity\":%s,\"allocatable\":%s}}",
                   labels, capacity, allocatable);
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    if (!o)
        fail_msg("bad test node: %s", e.text);
    return o;
}

#define MIXED_LABELS                                                                               \
    "{\"nvidia.com/mig.strategy\":\"mixed\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"," \
    "\"nvidia.com/gpu.count\":\"4\"}"

static void test_mixed_node_puts_whole_gpus_first_then_mig_then_leftovers(void **state)
{
    (void)state;
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    /* 4 GPUs: 1 without MIG; 1g.10gb: 7 + 3g.40gb: 2 need 2 (above); the 4th is left over. */
    json_t *o = node(MIXED_LABELS,
                     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.10gb\":\"7\","
                     "\"nvidia.com/mig-3g.40gb\":\"2\"}",
                     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.10gb\":\"7\","
                     "\"nvidia.com/mig-3g.40gb\":\"1\"}");
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_MILLI, .replicas = 1};
    struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    bool set = false;
    struct said s = {0, ""};
    assert_int_equal(gs__kcap_read(&k, o, "n1", "NVIDIA-H100-80GB-HBM3", 1, 1, &whole, modes,
                                   usable, &n, &set, on_warn, &s),
                     GS_OK);
    assert_int_equal(n, 4);
    assert_true(set);
    assert_int_equal(s.n, 0);
    assert_int_equal(modes[0].sharing, GS_GPU_SHARE_MILLI);
    assert_true(usable[0]);
    /* GPU 1: 4 x 1g and a 3g; GPU 2: 3 x 1g and a 3g (the packing above). */
    assert_int_equal(modes[1].sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(modes[1].mig_count, 5);
    assert_true(usable[1]);
    /* 3g.40gb allocatable 1 of 2: the highest GPU holding one (2) is unusable; GPU 1's 3g is
     * the one left. */
    assert_int_equal(modes[2].sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(modes[2].mig_count, 4);
    assert_false(usable[2]);
    /* Left over: its instances were packed elsewhere; it takes nothing. */
    assert_int_equal(modes[3].sharing, GS_GPU_SHARE_WHOLE);
    assert_false(usable[3]);
    json_decref(o);
    gs__kinv_fini(&k);
}

static void test_unusable_mig_capacity_warns_once_naming_node_and_profile(void **state)
{
    (void)state;
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    json_t *o = node(MIXED_LABELS, "{\"nvidia.com/gpu\":\"2\",\"nvidia.com/mig-5g.60gb\":\"1\"}",
                     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-5g.60gb\":\"1\"}");
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_MILLI, .replicas = 1};
    struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    bool set = false;
    struct said s = {0, ""};
    for (int i = 0; i < 2; i++)
        assert_int_equal(gs__kcap_read(&k, o, "n1", "NVIDIA-H100-80GB-HBM3", 2, 1, &whole, modes,
                                       usable, &n, &set, on_warn, &s),
                         GS_OK);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.last, "node n1: nvidia.com/mig-5g.60gb: 5g.60gb is not a MIG profile of "
                                "H100-80GB; its MIG capacity is unusable");
    /* The GPUs without MIG stay, the highest the unhealthy one. */
    assert_int_equal(n, 2);
    assert_false(set);
    assert_true(usable[0]);
    assert_false(usable[1]);
    json_decref(o);
    /* A model the MIG table does not know. */
    o = node("{\"nvidia.com/gpu.product\":\"Tesla-T4\"}", "{\"nvidia.com/mig-1g.10gb\":\"1\"}",
             "{\"nvidia.com/mig-1g.10gb\":\"1\"}");
    assert_int_equal(
        gs__kcap_read(&k, o, "n1", "Tesla-T4", 0, 0, &whole, modes, usable, &n, &set, on_warn, &s),
        GS_OK);
    assert_int_equal(n, 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.last, "node n1: nvidia.com/mig-1g.10gb: GPU model Tesla-T4 is not in the "
                                "MIG table; its MIG capacity is unusable");
    json_decref(o);
    gs__kinv_fini(&k);
}

static void test_single_strategy_devices_are_whole_and_capped(void **state)
{
    (void)state;
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    /* 8 A100s of 7 x 1g.5gb each: 56 devices; 16 are kept. */
    json_t *o = node("{\"nvidia.com/mig.strategy\":\"single\","
                     "\"nvidia.com/gpu.product\":\"A100-SXM4-40GB-MIG-1g.5gb\"}",
                     "{\"nvidia.com/gpu\":\"56\"}", "{\"nvidia.com/gpu\":\"56\"}");
    assert_true(gs__kcap_single(o));
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_MILLI, .replicas = 1};
    struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    bool set = false;
    struct said s = {0, ""};
    assert_int_equal(gs__kcap_read(&k, o, "n1", "A100-SXM4-40GB-MIG-1g.5gb", 56, 56, &whole, modes,
                                   usable, &n, &set, on_warn, &s),
                     GS_OK);
    assert_int_equal(n, 16);
    assert_true(set);
    for (uint32_t g = 0; g < n; g++) {
        assert_int_equal(modes[g].sharing, GS_GPU_SHARE_WHOLE);
        assert_true(usable[g]);
    }
    assert_int_equal(s.n, 1);
    assert_string_equal(s.last, "node n1: 56 MIG devices (nvidia.com/gpu with "
                                "nvidia.com/mig.strategy single), more than the 16 a node holds "
                                "here; 16 are used");
    json_decref(o);
    gs__kinv_fini(&k);
}

static void test_node_without_mig_capacity_is_read_as_before(void **state)
{
    (void)state;
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    json_t *o = node("{}", "{\"nvidia.com/gpu\":\"4\",\"nvidia.com/mig-1g.10gb\":\"0\"}",
                     "{\"nvidia.com/gpu\":\"3\"}");
    struct gs_gpu_mode whole = {.sharing = GS_GPU_SHARE_MILLI, .replicas = 1};
    struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    bool set = false;
    assert_int_equal(
        gs__kcap_read(&k, o, "n1", NULL, 4, 3, &whole, modes, usable, &n, &set, NULL, NULL), GS_OK);
    assert_int_equal(n, 4);
    assert_false(set);
    assert_true(usable[2]);
    assert_false(usable[3]);
    json_decref(o);
    gs__kinv_fini(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seven_1g_and_two_3g_take_two_h100s),
        cmocka_unit_test(test_one_gpu_when_the_counts_tile_it),
        cmocka_unit_test(test_counts_past_one_gpu_spill_to_the_next),
        cmocka_unit_test(test_impossible_counts_are_refused),
        cmocka_unit_test(test_mixed_node_puts_whole_gpus_first_then_mig_then_leftovers),
        cmocka_unit_test(test_unusable_mig_capacity_warns_once_naming_node_and_profile),
        cmocka_unit_test(test_single_strategy_devices_are_whole_and_capped),
        cmocka_unit_test(test_node_without_mig_capacity_is_read_as_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
