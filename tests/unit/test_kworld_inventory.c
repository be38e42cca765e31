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
    /* whole and replicas Healthy: usable; MIG not yet; Unhealthy never. */
    assert_true(g.usable[0]);
    assert_true(g.usable[1]);
    assert_false(g.usable[2]);
    assert_false(g.usable[3]);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_inventory_gives_gpus_uuids_and_usable_ones),
        cmocka_unit_test(test_bad_inventories_name_the_node_and_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
