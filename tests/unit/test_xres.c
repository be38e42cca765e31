/*
 * Other resources (cluster.h, GS_XRES_MAX): extended resources, ephemeral-storage and hugepages
 * checked against a node's allocatable as kube-scheduler's NodeResourcesFit does, debited on
 * bind, released exactly on unbind, kept when allocatable drops below what pods hold, created on
 * adopt, named in the "why pending" message, and counted by the engine's gang slot estimate.
 * Every expected value is worked by hand in the comments.
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
#include "gpusched/tenant.h"

#define FOO "example.com/foo"
#define BAR "example.com/bar"
#define HUGE "hugepages-2Mi"

struct world {
    struct gs_cluster *c;
    uint32_t foo, bar, huge; /* resource ids */
    uint32_t a, b, cpu; /* nodes: a offers foo 2; b foo 1 + bar 1 + 1 GiB hugepages; cpu none */
};

static uint32_t add_node(struct gs_cluster *c, const char *name, uint32_t gpus)
{
    struct gs_node_spec s = {name, 32000, 65536, 110, gpus, gpus ? "A100" : NULL, 81920};
    uint32_t id = UINT32_MAX;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    return id;
}

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    assert_int_equal(gs_cluster_xres_id(w->c, FOO, &w->foo), GS_OK);
    assert_int_equal(gs_cluster_xres_id(w->c, BAR, &w->bar), GS_OK);
    assert_int_equal(gs_cluster_xres_id(w->c, HUGE, &w->huge), GS_OK);
    w->a = add_node(w->c, "a", 2);
    w->b = add_node(w->c, "b", 2);
    w->cpu = add_node(w->c, "cpu", 0);
    const struct gs_xres on_a[] = {{w->foo, 2}};
    const struct gs_xres on_b[] = {{w->huge, INT64_C(1) << 30}, {w->bar, 1}, {w->foo, 1}};
    assert_int_equal(gs_cluster_set_xres(w->c, w->a, on_a, 1), GS_OK);
    assert_int_equal(gs_cluster_set_xres(w->c, w->b, on_b, 3), GS_OK);
}

static struct gs_pod_req ask(uint32_t num_gpu, uint32_t id, int64_t qty)
{
    struct gs_pod_req r = GS_POD_REQ(1000, 1024, num_gpu, num_gpu ? 1000 : 0, GS_MODEL_ANY);
    r.xres_count = 1;
    r.xres[0] = (struct gs_xres){id, qty};
    return r;
}

static struct gs_placement on(uint32_t node, uint32_t num_gpu)
{
    struct gs_placement pl = {.node = node, .num_gpu = num_gpu, .gpu_milli = 1000};
    for (uint32_t g = 0; g < num_gpu; g++)
        pl.gpu_index[g] = (uint8_t)g;
    if (num_gpu == 0)
        pl.gpu_milli = 0;
    return pl;
}

static const struct gs_node_xres *entry(const struct world *w, uint32_t node, uint32_t id)
{
    const struct gs_node *n = gs_cluster_node(w->c, node);
    for (uint32_t k = 0; k < n->xres_count; k++)
        if (n->xres[k].id == id)
            return &n->xres[k];
    return NULL;
}

/* Names get ids in order of first use; the same name again is the same id. */
static void test_names(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    assert_int_equal(w.foo, 0);
    assert_int_equal(w.bar, 1);
    assert_int_equal(w.huge, 2);
    uint32_t again = 99;
    assert_int_equal(gs_cluster_xres_id(w.c, BAR, &again), GS_OK);
    assert_int_equal(again, 1);
    assert_string_equal(gs_cluster_xres_name(w.c, 2), HUGE);
    assert_null(gs_cluster_xres_name(w.c, 3));
    assert_int_equal(gs_cluster_xres_id(w.c, "", &again), GS_EINVAL);
    /* 3 names taken; 61 more fill the table; the 65th is refused. */
    for (int k = 0; k < GS_XRES_MAX - 3; k++) {
        char name[32];
        (void)snprintf(name, sizeof(name), "example.com/r%d", k);
        assert_int_equal(gs_cluster_xres_id(w.c, name, &again), GS_OK);
    }
    assert_int_equal(gs_cluster_xres_id(w.c, "example.com/one-too-many", &again), GS_ELIMIT);
    gs_cluster_free(w.c);
}

/* The node's list is kept sorted by id whatever order it was given in. */
static void test_set_sorts_and_validates(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    const struct gs_node *b = gs_cluster_node(w.c, w.b);
    assert_int_equal(b->xres_count, 3);
    assert_int_equal(b->xres[0].id, w.foo);
    assert_int_equal(b->xres[1].id, w.bar);
    assert_int_equal(b->xres[2].id, w.huge);
    assert_int_equal(b->xres[2].allocatable, INT64_C(1073741824));
    const struct gs_xres dup[] = {{w.foo, 1}, {w.foo, 2}};
    const struct gs_xres neg[] = {{w.foo, -1}};
    const struct gs_xres unknown[] = {{7, 1}};
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, dup, 2), GS_EINVAL);
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, neg, 1), GS_EINVAL);
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, unknown, 1), GS_EINVAL);
    assert_int_equal(gs_cluster_set_xres(w.c, 17, NULL, 0), GS_EINVAL);
    assert_int_equal(entry(&w, w.a, w.foo)->allocatable, 2); /* unchanged by the failures */
    gs_cluster_free(w.c);
}

/* foo 2 fits a only; after it binds there, foo 1 fits b only; unbind gives a back exactly. */
static void test_fit_bind_unbind(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_pod_req two = ask(1, w.foo, 2), one = ask(0, w.foo, 1);
    assert_true(gs_node_fits(gs_cluster_node(w.c, w.a), &two));
    assert_false(gs_node_fits(gs_cluster_node(w.c, w.b), &two));   /* b offers 1 */
    assert_false(gs_node_fits(gs_cluster_node(w.c, w.cpu), &one)); /* cpu offers none */
    const struct gs_node_fit *fit = gs_cluster_fit_array(w.c);
    assert_true(gs_cluster_fits_at(w.c, fit, w.a, &two));
    assert_false(gs_cluster_fits_at(w.c, fit, w.b, &two));
    struct gs_placement pa = on(w.a, 1);
    assert_int_equal(gs_cluster_bind(w.c, &two, &pa), GS_OK);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 2);
    assert_false(gs_node_fits(gs_cluster_node(w.c, w.a), &one)); /* 2 - 2 = 0 free */
    assert_true(gs_node_fits(gs_cluster_node(w.c, w.b), &one));
    /* A bind that does not fit is refused and changes nothing. */
    struct gs_placement pa0 = on(w.a, 0);
    assert_int_equal(gs_cluster_bind(w.c, &one, &pa0), GS_EINVAL);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 2);
    assert_int_equal(gs_cluster_unbind(w.c, &two, &pa), GS_OK);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 0);
    /* Releasing again would make used negative: refused. */
    assert_int_equal(gs_cluster_unbind(w.c, &two, &pa), GS_EINVAL);
    gs_cluster_free(w.c);
}

/* Bad requests: qty 0, an unknown id, the same resource twice, too many entries. */
static void test_bad_requests(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_placement pa = on(w.a, 0);
    struct gs_pod_req zero = ask(0, w.foo, 0);
    struct gs_pod_req unknown = ask(0, 40, 1);
    struct gs_pod_req twice = ask(0, w.foo, 1);
    twice.xres_count = 2;
    twice.xres[1] = (struct gs_xres){w.foo, 1};
    struct gs_pod_req many = ask(0, w.foo, 1);
    many.xres_count = GS_POD_XRES_MAX + 1;
    assert_int_equal(gs_cluster_bind(w.c, &zero, &pa), GS_EINVAL);
    assert_int_equal(gs_cluster_bind(w.c, &unknown, &pa), GS_EINVAL);
    assert_int_equal(gs_cluster_bind(w.c, &twice, &pa), GS_EINVAL);
    assert_int_equal(gs_cluster_adopt(w.c, &many, &pa), GS_EINVAL);
    assert_int_equal(gs_cluster_node(w.c, w.a)->pods, 0);
    gs_cluster_free(w.c);
}

/* Allocatable may drop below what pods hold (and the resource may vanish): the pods stay, the
 * entry keeps their use, nothing more fits, and unbind brings it back to exactly 0. */
static void test_allocatable_drops_below_used(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_pod_req two = ask(0, w.foo, 2), one = ask(0, w.foo, 1);
    struct gs_placement pa = on(w.a, 0);
    assert_int_equal(gs_cluster_bind(w.c, &two, &pa), GS_OK);
    const struct gs_xres less[] = {{w.foo, 1}};
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, less, 1), GS_OK);
    assert_int_equal(entry(&w, w.a, w.foo)->allocatable, 1);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 2);
    assert_false(gs_node_fits(gs_cluster_node(w.c, w.a), &one));
    assert_int_equal(gs_node_xres_copies(gs_cluster_node(w.c, w.a), &one), 0);
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, NULL, 0), GS_OK); /* no longer offered */
    assert_int_equal(entry(&w, w.a, w.foo)->allocatable, 0);
    assert_int_equal(gs_cluster_unbind(w.c, &two, &pa), GS_OK);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 0);
    /* Nothing held and nothing offered: the next replacement drops the entry. */
    assert_int_equal(gs_cluster_set_xres(w.c, w.a, NULL, 0), GS_OK);
    assert_null(entry(&w, w.a, w.foo));
    gs_cluster_free(w.c);
}

/* An adopted pod holding a resource the node does not list gets an entry (allocatable 0). */
static void test_adopt_creates_entry(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_pod_req bar = ask(0, w.bar, 3);
    struct gs_placement pc = on(w.cpu, 0);
    assert_int_equal(gs_cluster_bind(w.c, &bar, &pc), GS_EINVAL);
    assert_int_equal(gs_cluster_adopt(w.c, &bar, &pc), GS_OK);
    assert_int_equal(entry(&w, w.cpu, w.bar)->allocatable, 0);
    assert_int_equal(entry(&w, w.cpu, w.bar)->used, 3);
    assert_int_equal(gs_cluster_unbind(w.c, &bar, &pc), GS_OK);
    assert_int_equal(entry(&w, w.cpu, w.bar)->used, 0);
    gs_cluster_free(w.c);
}

/* foo 3 + bar 1 with one GPU: cpu has no GPU and counts under the GPU model filter, which comes
 * before resources; a lacks both (foo 2 < 3, no bar); b lacks foo only (1 < 3, bar 1 >= 1):
 * foo short on 2 nodes, bar on 1, the reasons sorted as strings. */
static void test_explain_names_each_resource(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_pod_req r = ask(1, w.foo, 3);
    r.xres_count = 2;
    r.xres[1] = (struct gs_xres){w.bar, 1};
    struct gs_unsched u;
    assert_int_equal(gs_explain(w.c, &r, GS_FILTER_DEFAULT, &u), GS_OK);
    assert_int_equal(u.model, 1);
    assert_int_equal(u.xres[0], 2);
    assert_int_equal(u.xres[1], 1);
    assert_int_equal(u.fit, 0);
    char msg[256];
    (void)gs_explain_format(&u, &r, msg, sizeof(msg));
    assert_string_equal(msg, "0/3 nodes are available: 1 Insufficient example.com/bar, 1 node(s) "
                             "didn't match Pod's GPU model, 2 Insufficient example.com/foo.");
    gs_cluster_free(w.c);
}

/* The engine places by them: four pods of foo 1 (one GPU each) on a (foo 2) and b (foo 1):
 * three bind, the fourth waits. Its reason: cpu fails the GPU model; a lacks GPUs (both held)
 * and foo, counted under each as kube-scheduler does; b lacks foo (its second GPU is free). */
static void test_engine_places_and_explains(void **state)
{
    (void)state;
    struct world w;
    world_init(&w);
    struct gs_engine *e = NULL;
    struct gs_engine_config cfg = {.policy = "bestfit"};
    assert_int_equal(gs_engine_new(w.c, &cfg, &e), GS_OK);
    struct gs_queue_spec q = {
        "research", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
    uint32_t qid, pc;
    assert_int_equal(gs_engine_add_queue(e, &q, &qid), GS_OK);
    struct gs_priority_class_spec pcs = {"normal", 10, 1};
    assert_int_equal(gs_engine_add_priority_class(e, &pcs, &pc), GS_OK);
    uint32_t pods[4];
    for (int i = 0; i < 4; i++) {
        struct gs_tpod_spec s = {"p", qid, pc, GS_NO_GANG, ask(1, w.foo, 1), -1};
        assert_int_equal(gs_engine_submit(e, &s, 0, &pods[i]), GS_OK);
    }
    assert_int_equal(gs_engine_cycle(e, 1000, NULL, NULL), GS_OK);
    uint32_t running = 0, on_a = 0;
    for (int i = 0; i < 4; i++) {
        struct gs_tpod_info in;
        assert_int_equal(gs_engine_pod_info(e, pods[i], &in), GS_OK);
        if (in.state == GS_TPOD_RUNNING) {
            running++;
            on_a += in.pl.node == w.a;
        }
    }
    assert_int_equal(running, 3);
    assert_int_equal(on_a, 2);
    assert_int_equal(entry(&w, w.a, w.foo)->used, 2);
    assert_int_equal(entry(&w, w.b, w.foo)->used, 1);
    assert_string_equal(gs_engine_pod_reason(e, pods[3]),
                        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't "
                        "match Pod's GPU model, 2 Insufficient example.com/foo.");
    char msg[256];
    assert_int_equal(gs_engine_check(e, msg, sizeof(msg)), GS_OK);
    gs_engine_free(e);
    gs_cluster_free(w.c);
}

/* A gang of 3 × (1 GPU, foo 1) has room for only 3 of foo over a and b (2 + 1): it starts; a
 * gang of 4 would need a fourth and waits whole. */
static void test_gang_counts_xres(void **state)
{
    (void)state;
    for (uint32_t members = 3; members <= 4; members++) {
        struct world w;
        world_init(&w);
        struct gs_engine *e = NULL;
        struct gs_engine_config cfg = {.policy = "bestfit"};
        assert_int_equal(gs_engine_new(w.c, &cfg, &e), GS_OK);
        struct gs_queue_spec q = {
            "research", GS_QUEUE_ROOT, {0, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1, 0};
        uint32_t qid, pc, g;
        assert_int_equal(gs_engine_add_queue(e, &q, &qid), GS_OK);
        struct gs_priority_class_spec pcs = {"normal", 10, 1};
        assert_int_equal(gs_engine_add_priority_class(e, &pcs, &pc), GS_OK);
        struct gs_gang_spec gs = {"g", members, 0};
        assert_int_equal(gs_engine_add_gang(e, &gs, &g), GS_OK);
        for (uint32_t i = 0; i < members; i++) {
            struct gs_tpod_spec s = {"m", qid, pc, g, ask(1, w.foo, 1), -1};
            uint32_t id;
            assert_int_equal(gs_engine_submit(e, &s, 0, &id), GS_OK);
        }
        assert_int_equal(gs_engine_cycle(e, 1000, NULL, NULL), GS_OK);
        struct gs_gang_info gi;
        assert_int_equal(gs_engine_gang_info(e, g, &gi), GS_OK);
        assert_int_equal(gi.running, members == 3 ? 3 : 0);
        char msg[256];
        assert_int_equal(gs_engine_check(e, msg, sizeof(msg)), GS_OK);
        gs_engine_free(e);
        gs_cluster_free(w.c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_set_sorts_and_validates),
        cmocka_unit_test(test_fit_bind_unbind),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_allocatable_drops_below_used),
        cmocka_unit_test(test_adopt_creates_entry),
        cmocka_unit_test(test_explain_names_each_resource),
        cmocka_unit_test(test_engine_places_and_explains),
        cmocka_unit_test(test_gang_counts_xres),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
