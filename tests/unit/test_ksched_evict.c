/*
 * The eviction mark (src/cli/sched_evict.c): what a leader writes on a victim and how the
 * accountant maps it back to the store's end reasons, from the annotation first and from the
 * DisruptionTarget condition alone (as the leader's messages read), including the conditions
 * other components write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sched_evict.h"

/* A pod with the annotation value `note` (or none) and one DisruptionTarget condition (or
 * none). */
static json_t *pod(const char *note, const char *reason, const char *msg)
{
    json_t *p = json_pack("{s:s,s:{s:s,s:{}},s:{s:[]}}", "kind", "Pod", "metadata", "name", "v",
                          "annotations", "status", "conditions");
    if (note)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"),
                            GS__EVICTED_ANNOTATION, json_string(note));
    if (reason)
        json_array_append_new(json_object_get(json_object_get(p, "status"), "conditions"),
                              json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "DisruptionTarget",
                                        "status", "True", "reason", reason, "message",
                                        msg ? msg : "", "lastTransitionTime",
                                        "2026-12-01T00:00:10Z"));
    return p;
}

static void test_annotation_round_trips_reason_preemptor_uid_and_time(void **state)
{
    (void)state;
    static const struct {
        const char *word;
        enum gs_usage_end end;
    } cases[] = {{"preemption", GS_USAGE_END_PREEMPTED},
                 {"reclaim", GS_USAGE_END_RECLAIMED},
                 {"gang", GS_USAGE_END_GANG},
                 {"node-lost", GS_USAGE_END_NODE_LOST}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *note = gs__evict_note(cases[i].word, "ns/hi", "0b1c-uid", 1764547210123);
        assert_non_null(note);
        /* The Eviction API rewrote the condition: the annotation still tells. */
        json_t *p = pod(note, "EvictionByEvictionAPI", "Eviction API: evicting");
        struct gs__evict_seen e;
        assert_true(gs__evict_of_pod(p, &e));
        assert_int_equal(e.end, cases[i].end);
        assert_string_equal(e.by_uid, "0b1c-uid");
        assert_int_equal(e.at_ms, 1764547210123);
        json_decref(p);
        free(note);
    }
    /* Without a preemptor (a gang release): no uid. */
    char *note = gs__evict_note("gang", NULL, NULL, 5);
    json_t *p = pod(note, NULL, NULL);
    struct gs__evict_seen e;
    assert_true(gs__evict_of_pod(p, &e));
    assert_int_equal(e.end, GS_USAGE_END_GANG);
    assert_string_equal(e.by_uid, "");
    json_decref(p);
    free(note);
}

static void test_condition_alone_maps_the_leaders_messages(void **state)
{
    (void)state;
    static const struct {
        const char *reason, *msg;
        enum gs_usage_end end;
        const char *uid;
    } cases[] = {
        {"PreemptionByScheduler",
         "gpusched: preempting to accommodate a higher priority pod ns/hi (uid u-1): node a1",
         GS_USAGE_END_PREEMPTED, "u-1"},
        {"PreemptionByScheduler", "gpusched: preempting to accommodate a higher priority pod ns/hi",
         GS_USAGE_END_PREEMPTED, ""},
        {"PreemptionByScheduler",
         "gpusched: reclaiming resources for ns/t (uid u-2), whose queue is below its fair share",
         GS_USAGE_END_RECLAIMED, "u-2"},
        {"PreemptionByScheduler",
         "gpusched: gang ns/pg could not bind all its members within 30 s and is released whole",
         GS_USAGE_END_GANG, ""},
        {"PreemptionByScheduler", "gpusched: node a1 is gone", GS_USAGE_END_NODE_LOST, ""},
        {"DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint",
         GS_USAGE_END_NODE_LOST, ""},
        {"DeletionByPodGC", "PodGC: node no longer exists", GS_USAGE_END_NODE_LOST, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *p = pod(NULL, cases[i].reason, cases[i].msg);
        struct gs__evict_seen e;
        assert_true(gs__evict_of_pod(p, &e));
        assert_int_equal(e.end, cases[i].end);
        assert_string_equal(e.by_uid, cases[i].uid);
        assert_int_equal(e.at_ms, 1796083210000); /* 2026-12-01T00:00:10Z */
        json_decref(p);
    }
}

static void test_other_disruptions_and_unmarked_pods_are_no_scheduler_eviction(void **state)
{
    (void)state;
    struct gs__evict_seen e = {.at_ms = 7};
    json_t *p = pod(NULL, "EvictionByEvictionAPI", "Eviction API: evicting"); /* a drain */
    assert_false(gs__evict_of_pod(p, &e));
    json_decref(p);
    p = pod(NULL, "TerminationByKubelet", "node pressure");
    assert_false(gs__evict_of_pod(p, &e));
    json_decref(p);
    p = pod(NULL, NULL, NULL);
    assert_false(gs__evict_of_pod(p, &e));
    json_decref(p);
    p = pod("{\"reason\": \"unknown\"}", NULL, NULL); /* a word it does not know: not a mark */
    assert_false(gs__evict_of_pod(p, &e));
    json_decref(p);
    p = pod("not json", NULL, NULL);
    assert_false(gs__evict_of_pod(p, &e));
    json_decref(p);
    assert_int_equal(e.at_ms, 7); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_annotation_round_trips_reason_preemptor_uid_and_time),
        cmocka_unit_test(test_condition_alone_maps_the_leaders_messages),
        cmocka_unit_test(test_other_disruptions_and_unmarked_pods_are_no_scheduler_eviction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
