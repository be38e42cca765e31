/*
 * The scheduler's reading of the node agent's inventory (Node annotation gpusched.io/gpus,
 * src/k8s/kworld_inventory.c): a good one gives the GPUs, model, smallest memory, usable GPUs
 * and UUIDs; every kind of bad one gives one sentence naming the node and the field, and
 * nothing else. What the scheduler then does with a node (whatif) is in
 * tests/data/whatif/inventory.yaml.
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
#include "k8s/kworld_inv.h"

/* A Node named n1 whose annotation is `text` (a JSON value given as JSON text). */
static json_t *node_with(const char *json_value)
{
    json_error_t e;
    json_t *v = json_loads(json_value, JSON_DECODE_ANY, &e);
    if (v == NULL)
        fail_msg("bad test value: %s", e.text);
    json_t *n = json_pack("{s:s,s:{s:s,s:{s:o}}}", "kind", "Node", "metadata", "name", "n1",
                          "annotations", "gpusched.io/gpus", v);
    assert_non_null(n);
    return n;
}

static json_t *node_text(const char *text)
{
    json_t *s = json_string(text);
    char *d = json_dumps(s, JSON_ENCODE_ANY);
    json_decref(s);
    json_t *n = node_with(d);
    free(d);
    return n;
}

#define G(i, uuid, mem, mode, health)                                                              \
    "{\"index\":" #i ",\"uuid\":\"" uuid "\",\"model\":\"NVIDIA H200\",\"mem_mib\":" #mem          \
    ",\"mode\":\"" mode "\",\"health\":\"" health "\"}"

static void test_good_inventory_gives_gpus_uuids_and_usable_ones(void **state)
{
    (void)state;
    json_t *n =
        node_text("{\"version\":1,\"gpus\":[" G(0, "GPU-a", 143771, "whole", "Healthy") "," G(
            1, "GPU-b", 81920, "replicas",
            "Healthy") "," G(2, "GPU-c", 143771, "mig",
                             "Healthy") "," G(3, "GPU-d", 143771, "whole",
                                              "Unhealthy") "],\"extra\":true}");
    struct gs__knode_gpus g;
    char warn[300] = "";
    assert_int_equal(gs__kworld_node_gpus(n, "n1", &g, warn, sizeof warn), 1);
    assert_string_equal(warn, "");
    assert_int_equal(g.n, 4);
    assert_string_equal(g.model, "NVIDIA H200");
    assert_int_equal(g.mem_mib, 81920); /* the smallest */
    /* Healthy: usable (a MIG GPU's layout is judged by gs__kinv_modes); Unhealthy never. */
    assert_true(g.usable[0]);
    assert_true(g.usable[1]);
    assert_true(g.usable[2]);
    assert_false(g.usable[3]);
    assert_int_equal(g.mode[0], GS_GPU_SHARE_WHOLE);
    assert_int_equal(g.mode[1], GS_GPU_SHARE_TIMESLICE);
    assert_int_equal(g.mode[2], GS_GPU_SHARE_MIG);
    assert_int_equal(g.replicas[1], 1); /* absent: 1 */
    assert_int_equal(g.mig_n[2], 0);
    assert_string_equal(g.uuid[3], "GPU-d");
    json_decref(n);
    /* No annotation: 0, nothing said. */
    json_t *bare = json_pack("{s:s,s:{s:s}}", "kind", "Node", "metadata", "name", "n1");
    assert_int_equal(gs__kworld_node_gpus(bare, "n1", &g, warn, sizeof warn), 0);
    json_decref(bare);
}

/* want is the field and problem; a trailing '*' matches any text there (jansson's words). */
static void bad(json_t *n, const char *want)
{
    struct gs__knode_gpus g;
    char warn[400] = "";
    assert_int_equal(gs__kworld_node_gpus(n, "n1", &g, warn, sizeof warn), -1);
    char full[500];
    (void)snprintf(full, sizeof full,
                   "node n1: annotation gpusched.io/gpus: %s; GPUs read from status.capacity",
                   want);
    size_t star = strcspn(full, "*");
    if (full[star] == '*') {
        assert_memory_equal(warn, full, star);
        assert_non_null(strstr(warn, "; GPUs read from status.capacity"));
    } else {
        assert_string_equal(warn, full);
    }
    assert_int_equal(g.n, 0);
    json_decref(n);
}

static void test_bad_inventories_name_the_node_and_field(void **state)
{
    (void)state;
    bad(node_with("42"), "not a string");
    bad(node_text("{\"gpus\":["), "not JSON: *");
    bad(node_text("[]"), "not a JSON object");
    bad(node_text("{\"version\":2,\"gpus\":[]}"),
        "version: not 1 (this scheduler reads version 1)");
    bad(node_text("{\"gpus\":{}}"), "gpus: not a list");
    bad(node_text("{\"gpus\":[" G(1, "GPU-a", 1, "whole", "Healthy") "]}"),
        "gpus[0].index: not 0 (entries are in index order from 0)");
    bad(node_text("{\"gpus\":[" G(0, "", 1, "whole", "Healthy") "]}"),
        "gpus[0].uuid: not a non-empty string of at most 95 bytes");
    bad(node_text("{\"gpus\":[" G(0, "GPU-a", 0, "whole", "Healthy") "]}"),
        "gpus[0].mem_mib: not a positive integer");
    bad(node_text("{\"gpus\":[" G(0, "GPU-a", 1, "half", "Healthy") "]}"),
        "gpus[0].mode: not whole, replicas, fractions or mig");
    bad(node_text("{\"gpus\":[" G(0, "GPU-a", 1, "whole", "ok") "]}"),
        "gpus[0].health: not Healthy or Unhealthy");
    bad(node_text("{\"gpus\":[" G(0, "GPU-a", 1, "whole", "Healthy") "," G(1, "GPU-a", 1, "whole",
                                                                           "Healthy") "]}"),
        "gpus[1].uuid: GPU-a is also gpus[0]'s");
    bad(node_text("{\"gpus\":[1]}"), "gpus[0]: not an object");
    /* 17 GPUs: over the core's 16 per node. */
    char many[4096] = "{\"gpus\":[";
    for (int i = 0; i < 17; i++)
        strcat(many, i ? ",{}" : "{}");
    strcat(many, "]}");
    bad(node_text(many), "gpus: 17 GPUs, more than the 16 a node holds here");
}

/* A whole, Healthy GPU of index i whose member nvlink_peers is `peers` (JSON text). */
#define GP(i, peers)                                                                               \
    "{\"index\":" #i ",\"uuid\":\"GPU-" #i "\",\"model\":\"NVIDIA H200\",\"mem_mib\":1,"           \
    "\"mode\":\"whole\",\"health\":\"Healthy\",\"nvlink_peers\":" peers "}"

static void test_nvlink_peers_become_masks(void **state)
{
    (void)state;
    /* Pairs (0,1) and (2,3), GPU 2 naming its partner only from one end; GPU 4 without the
     * member. Masks: bit j of nvlink[g] for each peer j named by gpus[g] (0x2 = GPU 1). */
    json_t *n = node_text("{\"gpus\":[" GP(0, "[1]") "," GP(1, "[0]") "," GP(2, "[3]") "," GP(
        3, "[]") "," G(4, "GPU-4", 1, "whole", "Healthy") "]}");
    struct gs__knode_gpus g;
    char warn[300] = "";
    assert_int_equal(gs__kworld_node_gpus(n, "n1", &g, warn, sizeof warn), 1);
    assert_string_equal(warn, "");
    assert_int_equal(g.nvlink[0], 0x2);
    assert_int_equal(g.nvlink[1], 0x1);
    assert_int_equal(g.nvlink[2], 0x8);
    assert_int_equal(g.nvlink[3], 0x0); /* the core fills in the other end */
    assert_int_equal(g.nvlink[4], 0x0);
    json_decref(n);
}

static void test_bad_nvlink_peers_name_the_field(void **state)
{
    (void)state;
    bad(node_text("{\"gpus\":[" GP(0, "{}") "]}"), "gpus[0].nvlink_peers: not a list");
    bad(node_text("{\"gpus\":[" GP(0, "[\"1\"]") "," GP(1, "[]") "]}"),
        "gpus[0].nvlink_peers[0]: not an integer");
    bad(node_text("{\"gpus\":[" GP(0, "[1]") "," GP(1, "[0,2]") "]}"),
        "gpus[1].nvlink_peers[1]: 2 is not a GPU of this node (0..1)");
    bad(node_text("{\"gpus\":[" GP(0, "[-1]") "," GP(1, "[]") "]}"),
        "gpus[0].nvlink_peers[0]: -1 is not a GPU of this node (0..1)");
    bad(node_text("{\"gpus\":[" GP(0, "[1]") "," GP(1, "[1]") "]}"),
        "gpus[1].nvlink_peers[0]: 1 is the GPU itself");
    bad(node_text("{\"gpus\":[" GP(0, "[1,1]") "," GP(1, "[]") "]}"),
        "gpus[0].nvlink_peers[1]: 1 is named twice");
}

static int n_warned;
static char warned[4][200];

static void on_warn(void *ctx, const char *msg)
{
    (void)ctx;
    if (n_warned < 4)
        (void)snprintf(warned[n_warned], sizeof warned[0], "%s", msg);
    n_warned++;
}

#define GM(i, mode, extra)                                                                         \
    "{\"index\":" #i ",\"uuid\":\"GPU-" #i "\",\"model\":\"NVIDIA H200\",\"mem_mib\":143771"       \
    ",\"mode\":\"" mode "\",\"health\":\"Healthy\"" extra "}"

/* GM with the extra members from a variable (the MIG lists are too long for a literal). */
static char gmx_buf[8][400];
static const char *gmx(int slot, const char *head, const char *extra)
{
    (void)snprintf(gmx_buf[slot], sizeof gmx_buf[slot], "%.*s%s}", (int)strlen(head) - 1, head,
                   extra);
    return gmx_buf[slot];
}
#define GMX(i, mode, extra) gmx(i, GM(i, mode, ""), extra)

/* H200-141GB's profiles by index (src/core/mig.c): 1g.18gb 0, 1g.18gb+me 1, 1g.35gb 2,
 * 2g.35gb 3, 3g.71gb 4, 4g.71gb 5, 7g.141gb 6; 3g starts at 0 or 4, 2g at 0, 2 or 4. */
static void test_modes_come_from_the_inventory_and_bad_mig_layouts_warn(void **state)
{
    (void)state;
    /* GPU 3: 3g at 4 and at 0 (valid); 4: 3g at 0 and 2g at 2 (overlap); 5: start unknown. */
    static const char mig3[] = ",\"mig\":[{\"profile\":\"3g.71gb\",\"start\":4},"
                               "{\"profile\":\"3g.71gb\",\"start\":0}]";
    static const char mig4[] = ",\"mig\":[{\"profile\":\"3g.71gb\",\"start\":0},"
                               "{\"profile\":\"2g.35gb\",\"start\":2}]";
    static const char mig5[] = ",\"mig\":[{\"profile\":\"1g.18gb\",\"start\":null}]";
    char text[2048];
    (void)snprintf(text, sizeof text, "{\"version\":1,\"gpus\":[%s,%s,%s,%s,%s,%s,%s,%s]}",
                   GM(0, "whole", ""), GM(1, "replicas", ",\"replicas\":4"), GM(2, "fractions", ""),
                   GMX(3, "mig", mig3), GMX(4, "mig", mig4), GMX(5, "mig", mig5), GM(6, "mig", ""),
                   GM(7, "replicas", ",\"replicas\":1"));
    json_t *n = node_text(text);
    struct gs__kinv k;
    assert_int_equal(gs__kinv_init(&k), GS_OK);
    struct gs__knode_gpus g;
    int have = 0;
    assert_int_equal(gs__kinv_read(&k, n, "n1", &g, &have, on_warn, NULL), GS_OK);
    assert_int_equal(have, 1);
    struct gs_gpu_mode m[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    const char *model = NULL;
    n_warned = 0;
    assert_int_equal(gs__kinv_modes(&k, &g, "n1", NULL, m, usable, &model, on_warn, NULL), GS_OK);
    assert_string_equal(model, "NVIDIA H200");
    assert_int_equal(m[0].sharing, GS_GPU_SHARE_WHOLE);
    assert_int_equal(m[1].sharing, GS_GPU_SHARE_TIMESLICE);
    assert_int_equal(m[1].replicas, 4);
    assert_int_equal(m[2].sharing, GS_GPU_SHARE_MILLI);
    assert_int_equal(m[3].sharing, GS_GPU_SHARE_MIG);
    assert_int_equal(m[3].mig_count, 2);
    assert_int_equal(m[3].mig[0].profile, 4);
    assert_int_equal(m[3].mig[0].start, 4);
    assert_int_equal(m[3].mig[1].start, 0);
    for (int i = 0; i < 4; i++)
        assert_true(usable[i]);
    /* 4: overlapping instances; 5: a start unknown; 6: MIG without instances (no warning). */
    assert_false(usable[4]);
    assert_false(usable[5]);
    assert_false(usable[6]);
    assert_int_equal(m[4].sharing, GS_GPU_SHARE_WHOLE);
    /* 7: one replica is a whole GPU. */
    assert_int_equal(m[7].sharing, GS_GPU_SHARE_WHOLE);
    assert_true(usable[7]);
    assert_int_equal(n_warned, 2);
    assert_non_null(strstr(warned[0], "node n1: GPU 4: MIG layout: "));
    assert_non_null(strstr(warned[0], "overlaps"));
    assert_string_equal(warned[1], "node n1: GPU 5: mig[0].start is unknown; unusable");
    /* Said once: the same inventory again warns no more. */
    assert_int_equal(gs__kinv_modes(&k, &g, "n1", NULL, m, usable, &model, on_warn, NULL), GS_OK);
    assert_int_equal(n_warned, 2);
    gs__kinv_fini(&k);
    json_decref(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_inventory_gives_gpus_uuids_and_usable_ones),
        cmocka_unit_test(test_bad_inventories_name_the_node_and_field),
        cmocka_unit_test(test_modes_come_from_the_inventory_and_bad_mig_layouts_warn),
        cmocka_unit_test(test_nvlink_peers_become_masks),
        cmocka_unit_test(test_bad_nvlink_peers_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
