/*
 * kworld's calls for a scheduler whose binds and evictions can be refused: a pod forgotten after
 * a refused bind enters again (same uid) and is placed afresh, its old GPUs free; a pod told to
 * avoid a node (a preemption there was blocked by a PodDisruptionBudget) is placed elsewhere,
 * and again there once the avoided nodes are cleared. Each expected node is worked by hand from
 * best fit: node a has 2 GPUs, node b 4; a 1-GPU pod leaves 1 free on a and 3 on b, so a fits
 * best.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kworld.h"

struct seen {
    char node[64];  /* the last BIND's node ("" for none) */
    uint32_t gpu0;  /* its first GPU */
    uint32_t binds; /* BINDs that were not adoptions */
};

static void on_event(void *ctx, const struct gs_kevent *ev)
{
    struct seen *s = ctx;
    if (ev->kind == GS_KEV_BIND && !ev->adopted) {
        (void)snprintf(s->node, sizeof(s->node), "%s", ev->node ? ev->node : "");
        s->gpu0 = ev->n_gpus ? ev->gpus[0].index : UINT32_MAX;
        s->binds++;
    }
}

static json_t *node(const char *name, int gpus)
{
    char g[16];
    (void)snprintf(g, sizeof(g), "%d", gpus);
    return json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "v1", "kind",
                     "Node", "metadata", "name", name, "status", "allocatable", "cpu", "32",
                     "memory", "256Gi", "pods", "110", "nvidia.com/gpu", g);
}

static json_t *pod(const char *name, const char *uid)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}", "apiVersion",
                     "v1", "kind", "Pod", "metadata", "name", name, "namespace", "ns", "uid", uid,
                     "creationTimestamp", "2026-01-01T00:00:00Z", "spec", "schedulerName",
                     "gpusched", "containers", "name", "c", "resources", "limits", "nvidia.com/gpu",
                     "1");
}

static void apply(struct gs_kworld *w, enum gs_kchange ch, json_t *obj)
{
    char err[256] = "";
    int rc = gs_kworld_apply(w, ch, obj, 0, err, sizeof(err));
    if (rc != GS_OK)
        fail_msg("apply: %s (%s)", gs_strerror(rc), err);
    json_decref(obj);
}

static void cycle(struct gs_kworld *w)
{
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)), GS_OK);
}

static struct gs_kworld *world(struct seen *s)
{
    struct gs_kworld_config cfg = {.policy = "bestfit", .on_event = on_event, .ctx = s};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    apply(w, GS_KADDED, node("a", 2));
    apply(w, GS_KADDED, node("b", 4));
    return w;
}

static void test_forgotten_pod_enters_again_with_the_same_uid(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_string_equal(s.node, "a"); /* best fit: 1 GPU left on a, 3 on b */
    assert_int_equal(s.gpu0, 0);
    /* The bind is refused: forgotten, then read again (same uid) and placed afresh on the GPU
     * it gave back. Before the engine forgot the uid too, the second entry was refused as a
     * duplicate and the pod waited for ever. */
    assert_int_equal(gs_kworld_forget_pod(w, "ns", "p", 0), GS_OK);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_int_equal(s.binds, 2);
    assert_string_equal(s.node, "a");
    assert_int_equal(s.gpu0, 0);
    /* Another pod after it still gets its own id's events: q is placed on a's other GPU. */
    apply(w, GS_KADDED, pod("q", "uid-q"));
    cycle(w);
    assert_int_equal(s.binds, 3);
    assert_string_equal(s.node, "a");
    assert_int_equal(s.gpu0, 1);
    gs_kworld_free(w);
}

static void test_avoided_node_is_skipped_until_cleared(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_string_equal(s.node, "a");
    assert_int_equal(gs_kworld_avoid_node(w, "ns", "p", "a"), GS_OK);
    assert_int_equal(gs_kworld_avoid_node(w, "ns", "p", "a"), GS_OK); /* once is enough */
    assert_int_equal(gs_kworld_forget_pod(w, "ns", "p", 0), GS_OK);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_int_equal(s.binds, 2);
    assert_string_equal(s.node, "b"); /* a is avoided: the only other node */
    gs_kworld_avoid_clear(w, "ns", "p");
    assert_int_equal(gs_kworld_forget_pod(w, "ns", "p", 0), GS_OK);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_int_equal(s.binds, 3);
    assert_string_equal(s.node, "a");         /* cleared: best fit again */
    gs_kworld_avoid_clear(w, "ns", "nobody"); /* unknown: a no-op */
    gs_kworld_free(w);
}

static void test_avoiding_every_node_leaves_the_pod_pending(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    assert_int_equal(gs_kworld_avoid_node(w, "ns", "p", "a"), GS_OK);
    assert_int_equal(gs_kworld_avoid_node(w, "ns", "p", "b"), GS_OK);
    apply(w, GS_KADDED, pod("p", "uid-p"));
    cycle(w);
    assert_int_equal(s.binds, 0);
    gs_kworld_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forgotten_pod_enters_again_with_the_same_uid),
        cmocka_unit_test(test_avoided_node_is_skipped_until_cleared),
        cmocka_unit_test(test_avoiding_every_node_leaves_the_pod_pending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
