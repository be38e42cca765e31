/*
 * Queues and PodGroups changed while the scheduler runs (kworld_queue.h): a Queue's edit
 * (MODIFIED, or ADDED again by a relist) updates the engine's queue in place; a DELETED one
 * stops new placements with "queue NAME does not exist" and evicts nothing; created again it
 * takes pods again; a parentQueue change and a second Queue kind of one name are warnings; a
 * PodGroup's minMember edited before its gang starts applies. Node a has 4 GPUs; every pod asks
 * for 1 GPU, so a queue limited to N GPUs runs N of them (worked by hand in each test).
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
    uint32_t binds, evicts, warnings;
    char warning[512]; /* the last one */
};

static void on_event(void *ctx, const struct gs_kevent *ev)
{
    struct seen *s = ctx;
    s->binds += ev->kind == GS_KEV_BIND && !ev->adopted;
    s->evicts += ev->kind == GS_KEV_EVICT;
}

static void on_warning(void *ctx, const char *msg)
{
    struct seen *s = ctx;
    s->warnings++;
    (void)snprintf(s->warning, sizeof(s->warning), "%s", msg);
}

static json_t *node(const char *name, int gpus)
{
    char g[16];
    (void)snprintf(g, sizeof(g), "%d", gpus);
    return json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "v1", "kind",
                     "Node", "metadata", "name", name, "status", "allocatable", "cpu", "32",
                     "memory", "256Gi", "pods", "110", "nvidia.com/gpu", g);
}

/* A Queue of API group api ("scheduling.gpusched.io/v1alpha1" or KAI's "scheduling.run.ai/v2")
 * with a GPU limit (GPUs; -1 none) under parent (NULL: none). */
static json_t *queue(const char *api, const char *name, const char *parent, int gpu_limit)
{
    json_t *q = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:i,s:i}}}}", "apiVersion", api, "kind",
                          "Queue", "metadata", "name", name, "spec", "resources", "gpu", "quota", 0,
                          "limit", gpu_limit);
    if (parent)
        json_object_set_new(json_object_get(q, "spec"), "parentQueue", json_string(parent));
    return q;
}

#define GS_Q "scheduling.gpusched.io/v1alpha1"
#define KAI_Q "scheduling.run.ai/v2"

/* A 1-GPU pod of ours in queue q, of PodGroup pg when not NULL. */
static json_t *pod(const char *name, const char *q, const char *pg)
{
    char uid[80];
    (void)snprintf(uid, sizeof(uid), "uid-%s", name);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{s:s}},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                          "ns", "uid", uid, "creationTimestamp", "2026-01-01T00:00:00Z", "labels",
                          "gpusched.io/queue", q, "spec", "schedulerName", "gpusched", "containers",
                          "name", "c", "resources", "limits", "nvidia.com/gpu", "1");
    if (pg)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "labels"),
                            "scheduling.x-k8s.io/pod-group", json_string(pg));
    return p;
}

static json_t *podgroup(const char *api, const char *name, int min)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:i}}", "apiVersion", api, "kind", "PodGroup",
                     "metadata", "name", name, "namespace", "ns", "spec", "minMember", min);
}

static int apply_rc(struct gs_kworld *w, enum gs_kchange ch, json_t *obj, char *err, size_t cap)
{
    int rc = gs_kworld_apply(w, ch, obj, 0, err, cap);
    json_decref(obj);
    return rc;
}

static void apply(struct gs_kworld *w, enum gs_kchange ch, json_t *obj)
{
    char err[256] = "";
    int rc = apply_rc(w, ch, obj, err, sizeof(err));
    if (rc != GS_OK)
        fail_msg("apply: %s (%s)", gs_strerror(rc), err);
}

static void cycle(struct gs_kworld *w, int64_t now_ms)
{
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, now_ms, NULL, err, sizeof(err)), GS_OK);
}

struct reason {
    const char *name;
    char text[256];
};

static void pick(void *ctx, const char *ns, const char *name, const char *uid, const char *why)
{
    (void)ns;
    (void)uid;
    struct reason *r = ctx;
    if (strcmp(name, r->name) == 0)
        (void)snprintf(r->text, sizeof(r->text), "%s", why);
}

/* Why pod `name` waits; "" when it does not. */
static const char *reason_of(struct gs_kworld *w, const char *name)
{
    static struct reason r;
    r.name = name;
    r.text[0] = '\0';
    gs_kworld_each_pending(w, pick, &r);
    return r.text;
}

static struct gs_kworld *world(struct seen *s)
{
    struct gs_kworld_config cfg = {
        .policy = "bestfit", .on_event = on_event, .on_warning = on_warning, .ctx = s};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    apply(w, GS_KADDED, node("a", 4));
    return w;
}

/* Queue team (limit 1 GPU) runs p0; p1, p2 wait at the limit. MODIFIED to 4 GPUs: both bind at
 * the next cycle (3 binds). A relist's ADDED of the same Queue is an update, not "entry already
 * exists". MODIFIED to 1 GPU while it holds 3: nothing is evicted, p3 waits at the limit. */
static void test_queue_edit_applies_at_the_next_cycle(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, pod("p0", "team", NULL));
    apply(w, GS_KADDED, pod("p1", "team", NULL));
    apply(w, GS_KADDED, pod("p2", "team", NULL));
    cycle(w, 1000);
    assert_int_equal(s.binds, 1);
    const char *r1 = reason_of(w, "p1");
    assert_string_equal(r1, "queue team is at its limit of 1 GPU");
    apply(w, GS_KMODIFIED, queue(GS_Q, "team", NULL, 4));
    cycle(w, 2000);
    assert_int_equal(s.binds, 3);
    assert_string_equal(reason_of(w, "p1"), "");
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, 4)); /* relist */
    apply(w, GS_KMODIFIED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, pod("p3", "team", NULL));
    cycle(w, 3000);
    assert_int_equal(s.binds, 3);
    assert_int_equal(s.evicts, 0);
    assert_string_equal(reason_of(w, "p3"), "queue team is at its limit of 1 GPU");
    /* A bad edit is refused with the field's message and the queue keeps its spec. */
    json_t *bad = queue(GS_Q, "team", NULL, 4);
    json_object_set_new(
        json_object_get(json_object_get(json_object_get(bad, "spec"), "resources"), "gpu"), "quota",
        json_integer(8));
    char err[256] = "";
    assert_int_equal(apply_rc(w, GS_KMODIFIED, bad, err, sizeof(err)), GS_EINVAL);
    assert_non_null(strstr(err, "Queue team: the change is refused by the engine"));
    cycle(w, 4000);
    assert_string_equal(reason_of(w, "p3"), "queue team is at its limit of 1 GPU");
    assert_int_equal(s.warnings, 0);
    gs_kworld_free(w);
}

/* Queue team (limit 1) runs p0, p1 waits. DELETED: p0 keeps running (no evict), p1 waits with
 * "queue team does not exist", and so does a new pod p2. Created again with limit 3: p1 and p2
 * bind (1 + 2 = 3 GPUs). */
static void test_deleted_queue_holds_its_pods_until_created_again(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, pod("p0", "team", NULL));
    apply(w, GS_KADDED, pod("p1", "team", NULL));
    cycle(w, 1000);
    assert_int_equal(s.binds, 1);
    apply(w, GS_KDELETED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, pod("p2", "team", NULL));
    cycle(w, 2000);
    assert_int_equal(s.binds, 1);
    assert_int_equal(s.evicts, 0);
    assert_string_equal(reason_of(w, "p1"), "queue team does not exist");
    assert_string_equal(reason_of(w, "p2"), "queue team does not exist");
    apply(w, GS_KDELETED, queue(GS_Q, "team", NULL, 1)); /* twice: nothing more */
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, 3));
    cycle(w, 3000);
    assert_int_equal(s.binds, 3);
    assert_string_equal(reason_of(w, "p1"), "");
    assert_string_equal(reason_of(w, "p2"), "");
    gs_kworld_free(w);
}

/* A parentQueue change is a warning; the queue stays under its parent and takes the rest of
 * the edit (limit 1 -> 2: p1 binds). */
static void test_parent_change_is_a_warning(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, queue(GS_Q, "dept", NULL, -1));
    apply(w, GS_KADDED, queue(GS_Q, "other", NULL, -1));
    apply(w, GS_KADDED, queue(GS_Q, "team", "dept", 1));
    apply(w, GS_KADDED, pod("p0", "team", NULL));
    apply(w, GS_KADDED, pod("p1", "team", NULL));
    cycle(w, 1000);
    assert_int_equal(s.binds, 1);
    apply(w, GS_KMODIFIED, queue(GS_Q, "team", "other", 2));
    assert_int_equal(s.warnings, 1);
    assert_string_equal(s.warning,
                        "Queue team: spec.parentQueue changed from dept to other; the queue stays "
                        "under dept (a queue is not moved while the scheduler runs: restart it "
                        "to move the queue)");
    cycle(w, 2000);
    assert_int_equal(s.binds, 2);
    /* A queue that still has a child cannot go: an error, and dept keeps working. */
    char err[256] = "";
    assert_int_equal(apply_rc(w, GS_KDELETED, queue(GS_Q, "dept", NULL, -1), err, sizeof(err)),
                     GS_EINVAL);
    assert_string_equal(err, "Queue dept: deleted while child queues name it as their parent; it "
                             "keeps its spec until they are deleted");
    gs_kworld_free(w);
}

/* gpusched's Queue team (limit 1) came first, before the first cycle, then KAI's Queue team
 * (limit 4): refused with a warning, so team runs 1 of 2 pods. KAI's edit and delete change
 * nothing; once gpusched's Queue is deleted, KAI's may make the queue (limit 4: p1 binds). */
static void test_second_queue_kind_of_one_name_is_refused(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, queue(KAI_Q, "team", NULL, 4));
    apply(w, GS_KADDED, pod("p0", "team", NULL));
    apply(w, GS_KADDED, pod("p1", "team", NULL));
    cycle(w, 1000);
    assert_int_equal(s.binds, 1);
    assert_int_equal(s.warnings, 1);
    assert_string_equal(s.warning, "Queue team of scheduling.run.ai is ignored: the Queue team of "
                                   "scheduling.gpusched.io made that queue, and one name names one "
                                   "queue (rename one of them)");
    apply(w, GS_KMODIFIED, queue(KAI_Q, "team", NULL, 4));
    apply(w, GS_KDELETED, queue(KAI_Q, "team", NULL, 4));
    cycle(w, 2000);
    assert_int_equal(s.binds, 1);
    assert_int_equal(s.warnings, 1); /* said once */
    assert_string_equal(reason_of(w, "p1"), "queue team is at its limit of 1 GPU");
    apply(w, GS_KDELETED, queue(GS_Q, "team", NULL, 1));
    apply(w, GS_KADDED, queue(KAI_Q, "team", NULL, 4));
    cycle(w, 3000);
    assert_int_equal(s.binds, 2);
    gs_kworld_free(w);
}

/* PodGroup g (minMember 3) has 2 members: they wait ("2 of 3 members exist"). Its minMember
 * edited to 2 (Volcano's group): both bind at the next cycle. An edit after it started is a
 * warning and the gang keeps min_member 2. */
static void test_podgroup_min_member_edit_before_start(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gs_kworld *w = world(&s);
    apply(w, GS_KADDED, queue(GS_Q, "team", NULL, -1));
    apply(w, GS_KADDED, podgroup("scheduling.volcano.sh/v1beta1", "g", 3));
    apply(w, GS_KADDED, pod("m0", "team", "g"));
    apply(w, GS_KADDED, pod("m1", "team", "g"));
    cycle(w, 1000);
    assert_int_equal(s.binds, 0);
    assert_string_equal(reason_of(w, "m0"), "gang ns/g (min_member 3, 0 running): 2 of 3 members "
                                            "exist");
    apply(w, GS_KMODIFIED, podgroup("scheduling.volcano.sh/v1beta1", "g", 2));
    cycle(w, 2000);
    assert_int_equal(s.binds, 2);
    apply(w, GS_KMODIFIED, podgroup("scheduling.volcano.sh/v1beta1", "g", 1));
    assert_int_equal(s.warnings, 1);
    assert_string_equal(s.warning, "PodGroup ns/g: spec.minMember 1 is not applied: its gang has "
                                   "started, and keeps min_member 2");
    gs_kworld_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_edit_applies_at_the_next_cycle),
        cmocka_unit_test(test_deleted_queue_holds_its_pods_until_created_again),
        cmocka_unit_test(test_parent_change_is_a_warning),
        cmocka_unit_test(test_second_queue_kind_of_one_name_is_refused),
        cmocka_unit_test(test_podgroup_min_member_edit_before_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
