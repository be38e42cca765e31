/*
 * PodDisruptionBudgets through kworld, as the scheduler's watch delivers them after the first
 * cycle: a budget reaches the running pods its selector covers, and leaves them when it is
 * deleted, when its pod's labels change, when its selector is empty, or when it lists the pod in
 * status.disruptedPods. The cluster is that of
 * tests/data/whatif/pdb.yaml: nodes n1 and n2 with 1 GPU each run db (app=db, started 11:00) and
 * batch (app=batch, started 10:00), both of priority 10, and a pod of priority 50 asking 1 GPU
 * must evict one. Without a budget in the way every level ties but start: db started later, so
 * db goes (kube-scheduler's latest-start rule); with db protected, batch goes.
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

/* The clock: 2026-12-02T00:00:00Z, after both pods started (victims must have started). */
#define NOW_MS INT64_C(1796169600000)

static void on_event(void *ctx, const struct gs_kevent *ev)
{
    char *evicted = ctx;
    if (ev->kind == GS_KEV_EVICT)
        (void)snprintf(evicted, 64, "%s", ev->name);
}

static void apply(struct gs_kworld *w, enum gs_kchange ch, const char *text)
{
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    if (!obj)
        fail_msg("test JSON: %s at %d", je.text, je.position);
    char err[256] = "";
    int rc = gs_kworld_apply(w, ch, obj, NOW_MS, err, sizeof(err));
    if (rc != GS_OK)
        fail_msg("apply: %s (%s)", gs_strerror(rc), err);
    json_decref(obj);
}

static void cycle(struct gs_kworld *w, int64_t now_ms)
{
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, now_ms, NULL, err, sizeof(err)), GS_OK);
}

#define NODE(n)                                                                                    \
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"" n "\",\"labels\":"        \
    "{\"nvidia.com/gpu.product\":\"H100\"}},\"status\":{\"allocatable\":{\"cpu\":\"32\","          \
    "\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"1\"}}}"
#define RUNNING(name, app, node, start)                                                            \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"namespace\":"   \
    "\"t\",\"uid\":\"" name "\",\"labels\":{\"app\":\"" app "\"}},\"spec\":{\"schedulerName\":"    \
    "\"gpusched\",\"nodeName\":\"" node "\",\"priorityClassName\":\"low\",\"containers\":[{"       \
    "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]},\"status\":{\"phase\":"   \
    "\"Running\",\"startTime\":\"" start "\"}}"
#define URGENT                                                                                     \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"urgent\",\"namespace\":"     \
    "\"t\",\"uid\":\"u\"},\"spec\":{\"schedulerName\":\"gpusched\",\"priorityClassName\":"         \
    "\"high\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}"  \
    "]}}"
/* A budget in namespace t with a selector (JSON) and a status (JSON, or empty for none). */
#define PDB(name, selector, status)                                                                \
    "{\"apiVersion\":\"policy/"                                                                    \
    "v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"" name                         \
    "\",\"namespace\":\"t\"},\"spec\":{\"minAvailable\":1,\"selector\":" selector "}" status "}"

/* The cluster of the header, run through its first cycle (both pods adopted). */
static struct gs_kworld *world(char *evicted)
{
    struct gs_kworld_config cfg = {
        .policy = "bestfit", .preemption = true, .on_event = on_event, .ctx = evicted};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    apply(w, GS_KADDED,
          "{\"apiVersion\":\"scheduling.k8s.io/v1\",\"kind\":\"PriorityClass\","
          "\"metadata\":{\"name\":\"low\"},\"value\":10}");
    apply(w, GS_KADDED,
          "{\"apiVersion\":\"scheduling.k8s.io/v1\",\"kind\":\"PriorityClass\","
          "\"metadata\":{\"name\":\"high\"},\"value\":50}");
    apply(w, GS_KADDED, NODE("n1"));
    apply(w, GS_KADDED, NODE("n2"));
    apply(w, GS_KADDED, RUNNING("db", "db", "n1", "2026-12-01T11:00:00Z"));
    apply(w, GS_KADDED, RUNNING("batch", "batch", "n2", "2026-12-01T10:00:00Z"));
    cycle(w, NOW_MS);
    evicted[0] = '\0';
    return w;
}

/* The preemptor arrives; returns who was evicted in its cycle. */
static void preempt(struct gs_kworld *w, const char *evicted, const char *want)
{
    apply(w, GS_KADDED, URGENT);
    cycle(w, NOW_MS + 1000);
    assert_string_equal(evicted, want);
}

static void test_no_budget_evicts_the_latest_started(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

/* t/db arrives after the first cycle, as a watch event, and covers the running db. */
static void test_budget_from_the_watch_protects_its_running_pod(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(
        w, GS_KADDED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":0}"));
    preempt(w, evicted, "batch");
    gs_kworld_free(w);
}

/* No status yet (the disruption controller has not counted): no disruption allowed. */
static void test_budget_without_status_allows_no_disruption(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(w, GS_KADDED,
          PDB("db",
              "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"},"
              "{\"key\":\"app\",\"operator\":\"NotIn\",\"values\":[\"batch\"]}]}",
              ""));
    preempt(w, evicted, "batch");
    gs_kworld_free(w);
}

/* A budget that allows a disruption protects nothing: the order is as without it. */
static void test_budget_with_room_changes_nothing(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(
        w, GS_KADDED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":0}"));
    apply(
        w, GS_KMODIFIED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":1}"));
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

static void test_deleted_budget_protects_nothing(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(
        w, GS_KADDED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":0}"));
    apply(
        w, GS_KDELETED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":0}"));
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

/* db's labels change (app=web): t/db no longer covers it. */
static void test_relabelled_pod_leaves_its_budget(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(
        w, GS_KADDED,
        PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}", ",\"status\":{\"disruptionsAllowed\":0}"));
    apply(w, GS_KMODIFIED, RUNNING("db", "web", "n1", "2026-12-01T11:00:00Z"));
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

/* kube-scheduler's preemption reads an empty selector as covering no pod. */
static void test_empty_selector_covers_no_pod(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(w, GS_KADDED, PDB("all", "{}", ",\"status\":{\"disruptionsAllowed\":0}"));
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

/* db is in t/db's status.disruptedPods (its eviction admitted, not gone yet): kube-scheduler
 * no longer counts it against the budget, so nothing protects it. */
static void test_pod_in_disrupted_pods_is_not_protected(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    apply(w, GS_KADDED,
          PDB("db", "{\"matchLabels\":{\"app\":\"db\"}}",
              ",\"status\":{\"disruptionsAllowed\":0,\"disruptedPods\":{\"db\":"
              "\"2026-12-01T23:59:00Z\"}}"));
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

/* A bad selector is refused naming the object and field; the world is unchanged. */
static void test_bad_selector_is_refused_with_its_field(void **state_)
{
    (void)state_;
    char evicted[64];
    struct gs_kworld *w = world(evicted);
    json_t *obj = json_loads(
        PDB("db", "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\"}]}", ""), 0, NULL);
    char err[256] = "";
    assert_int_equal(gs_kworld_apply(w, GS_KADDED, obj, NOW_MS, err, sizeof(err)), GS_EINVAL);
    assert_string_equal(err, "PodDisruptionBudget t/db: spec.selector.matchExpressions[0].values "
                             "must be non-empty for In and NotIn");
    json_decref(obj);
    preempt(w, evicted, "db");
    gs_kworld_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_budget_evicts_the_latest_started),
        cmocka_unit_test(test_budget_from_the_watch_protects_its_running_pod),
        cmocka_unit_test(test_budget_without_status_allows_no_disruption),
        cmocka_unit_test(test_budget_with_room_changes_nothing),
        cmocka_unit_test(test_deleted_budget_protects_nothing),
        cmocka_unit_test(test_relabelled_pod_leaves_its_budget),
        cmocka_unit_test(test_empty_selector_covers_no_pod),
        cmocka_unit_test(test_pod_in_disrupted_pods_is_not_protected),
        cmocka_unit_test(test_bad_selector_is_refused_with_its_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
