/*
 * The translation with dynamic MIG (gs_kworld_config.dynamic_mig): the BIND of a MIG pod that
 * fits no layout carries the re-partition against the node's inventory, the old inventory read
 * again while the plan is in flight does not undo the planned layout, the instances being
 * destroyed are not given to another pod, and once the pod is forgotten (a failed plan) the
 * node's layout comes back. Without the option the pod waits.
 *
 * Worked by hand (src/core/mig.c, H100-80GB): seven free 1g.10gb at starts 0..6; 3g.40gb takes
 * four memory slices at start 0 or 4. At 4 it replaces the 1g.10gb at 4, 5, 6 (three), at 0
 * those at 0..3 (four): the plan destroys 4, 5, 6 and creates 3g.40gb at 4, and the layout after
 * is 1g.10gb at 0..3 and 3g.40gb at 4 (five instances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/kworld.h"

struct seen {
    uint32_t binds, pending;
    bool change;              /* the last BIND had a mig_change */
    struct gs_kmig_change mc; /* its copy (profiles are static strings) */
    char profile[16];         /* the last BIND's first MIG instance */
    int32_t start;
};

static void on_event(void *ctx, const struct gs_kevent *ev)
{
    struct seen *s = ctx;
    if (ev->kind == GS_KEV_PENDING)
        s->pending++;
    if (ev->kind != GS_KEV_BIND || ev->adopted)
        return;
    s->binds++;
    s->change = ev->mig_change != NULL;
    if (ev->mig_change)
        s->mc = *ev->mig_change;
    (void)snprintf(s->profile, sizeof(s->profile), "%s",
                   ev->n_gpus && ev->gpus[0].mig_profile ? ev->gpus[0].mig_profile : "");
    s->start = ev->n_gpus ? ev->gpus[0].mig_start : -2;
}

/* Node n1 whose inventory shows GPU 0 with the given MIG devices (JSON array text). */
static json_t *node(const char *mig)
{
    char inv[1024];
    (void)snprintf(inv, sizeof(inv),
                   "{\"version\":1,\"gpus\":[{\"index\":0,\"uuid\":\"GPU-h\",\"model\":\"NVIDIA "
                   "H100 80GB HBM3\",\"mem_mib\":81559,\"mode\":\"mig\",\"health\":\"Healthy\","
                   "\"mig\":%s}]}",
                   mig);
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "v1",
                     "kind", "Node", "metadata", "name", "n1", "annotations", "gpusched.io/gpus",
                     inv, "status", "allocatable", "cpu", "32", "memory", "256Gi", "pods", "110",
                     "nvidia.com/mig-1g.10gb", "7");
}

static const char SEVEN[] =
    "[{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"1g.10gb\",\"start\":1},"
    "{\"profile\":\"1g.10gb\",\"start\":2},{\"profile\":\"1g.10gb\",\"start\":3},"
    "{\"profile\":\"1g.10gb\",\"start\":4},{\"profile\":\"1g.10gb\",\"start\":5},"
    "{\"profile\":\"1g.10gb\",\"start\":6}]";

static json_t *pod(const char *name, const char *uid, const char *resource)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}", "apiVersion",
                     "v1", "kind", "Pod", "metadata", "name", name, "namespace", "ns", "uid", uid,
                     "creationTimestamp", "2026-01-01T00:00:00Z", "spec", "schedulerName",
                     "gpusched", "containers", "name", "c", "resources", "limits", resource, "1");
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

static const struct gs_gpu *gpu0(const struct gs_kworld *w)
{
    const struct gs_node *n = gs_cluster_node(gs_kworld_cluster(w), 0);
    assert_non_null(n);
    return &n->gpus[0];
}

static struct gs_kworld *world(struct seen *s, bool dynamic)
{
    struct gs_kworld_config cfg = {
        .policy = "bestfit", .dynamic_mig = dynamic, .on_event = on_event, .ctx = s};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    apply(w, GS_KADDED, node(SEVEN));
    apply(w, GS_KADDED, pod("p", "u-p", "nvidia.com/mig-3g.40gb"));
    return w;
}

static void without_the_option_the_pod_waits(void **st)
{
    (void)st;
    struct seen s = {0};
    struct gs_kworld *w = world(&s, false);
    cycle(w);
    assert_int_equal(s.binds, 0);
    assert_int_equal(s.pending, 1);
    assert_int_equal(gpu0(w)->mig_count, 7);
    gs_kworld_free(w);
}

static void bind_carries_the_plan_and_it_holds(void **st)
{
    (void)st;
    struct seen s = {0};
    struct gs_kworld *w = world(&s, true);
    cycle(w);
    assert_int_equal(s.binds, 1);
    assert_true(s.change);
    assert_string_equal(s.profile, "3g.40gb");
    assert_int_equal(s.start, 4);
    assert_int_equal(s.mc.gpu, 0);
    assert_true(s.mc.known);
    assert_int_equal(s.mc.n_destroy, 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_string_equal(s.mc.destroy[i].profile, "1g.10gb");
        assert_int_equal(s.mc.destroy[i].start, 4 + (int32_t)i);
    }
    assert_int_equal(s.mc.n_create, 1);
    assert_string_equal(s.mc.create[0].profile, "3g.40gb");
    assert_int_equal(s.mc.create[0].start, 4);
    assert_int_equal(s.mc.n_layout, 5);
    assert_string_equal(s.mc.layout[4].profile, "3g.40gb");
    struct gs_kmig_slot inv[8];
    uint32_t n = 0;
    assert_int_equal(gs_kworld_inventory_mig(w, "n1", 0, inv, 8, &n), GS_OK);
    assert_int_equal(n, 7); /* the node still shows the old layout */
    assert_int_equal(gs_kworld_inventory_mig(w, "n1", 1, inv, 8, &n), GS_ENOENT);

    /* The old inventory again (the agent has not acted yet): the planned layout stays. */
    apply(w, GS_KMODIFIED, node(SEVEN));
    cycle(w);
    assert_int_equal(gpu0(w)->mig_count, 5);
    assert_int_equal(gpu0(w)->mig[4].start, 4);
    assert_int_equal(gpu0(w)->mig_held, 1u << 4);
    /* A 1g.10gb pod gets one of 0..3, never an instance being destroyed. */
    apply(w, GS_KADDED, pod("q", "u-q", "nvidia.com/mig-1g.10gb"));
    cycle(w);
    assert_int_equal(s.binds, 2);
    assert_false(s.change);
    assert_string_equal(s.profile, "1g.10gb");
    assert_true(s.start >= 0 && s.start <= 3);
    int32_t q_start = s.start;

    /* The plan fails: p is forgotten; the node's layout (seven 1g.10gb) comes back at the next
     * cycle without a new Node event, q's instance still held. */
    assert_int_equal(gs_kworld_forget_pod(w, "ns", "p", 2000), GS_OK);
    cycle(w); /* the Node kept since its mode waited is applied again at the cycle */
    assert_int_equal(gpu0(w)->mig_count, 7);
    assert_int_equal(gpu0(w)->mig_held, 1u << q_start);
    gs_kworld_free(w);
}

/* The agent carried it out: the new inventory equals the planned layout and changes nothing. */
static void new_inventory_matches(void **st)
{
    (void)st;
    struct seen s = {0};
    struct gs_kworld *w = world(&s, true);
    cycle(w);
    assert_int_equal(s.binds, 1);
    apply(w, GS_KMODIFIED,
          node("[{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"1g.10gb\",\"start\":1},"
               "{\"profile\":\"1g.10gb\",\"start\":2},{\"profile\":\"1g.10gb\",\"start\":3},"
               "{\"profile\":\"3g.40gb\",\"start\":4}]"));
    cycle(w);
    struct gs_kmig_slot inv[8];
    uint32_t n = 0;
    assert_int_equal(gs_kworld_inventory_mig(w, "n1", 0, inv, 8, &n), GS_OK);
    assert_int_equal(n, 5);
    assert_string_equal(inv[4].profile, "3g.40gb");
    assert_int_equal(inv[4].start, 4);
    assert_int_equal(gpu0(w)->mig_count, 5);
    assert_int_equal(gpu0(w)->mig_held, 1u << 4);
    assert_int_equal(s.binds, 1);
    gs_kworld_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(without_the_option_the_pod_waits),
        cmocka_unit_test(bind_carries_the_plan_and_it_holds),
        cmocka_unit_test(new_inventory_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
