/*
 * The names of the pods bound to a node, by UID (include/gpusched/podnames.h): what the agent's
 * watch keeps so that the per-pod GPU values carry pod, namespace and container.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/podnames.h"

static json_t *pod_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    assert_non_null(j);
    return j;
}

static int update(struct gs_podnames *t, const char *text)
{
    json_t *j = pod_json(text);
    int rc = gs_podnames_update(t, j);
    json_decref(j);
    return rc;
}

#define CID_A "aaaa000000000000000000000000000000000000000000000000000000000001"
#define CID_B "bbbb000000000000000000000000000000000000000000000000000000000002"
#define CID_I "1111000000000000000000000000000000000000000000000000000000000003"

static const char *const TRAIN =
    "{\"metadata\":{\"uid\":\"u-train\",\"namespace\":\"ml\",\"name\":\"train-0\"},"
    "\"status\":{\"phase\":\"Running\","
    "\"initContainerStatuses\":[{\"name\":\"fetch\",\"containerID\":\"containerd://" CID_I "\"}],"
    "\"containerStatuses\":[{\"name\":\"main\",\"containerID\":\"containerd://" CID_A "\"},"
    "{\"name\":\"side\",\"containerID\":\"cri-o://" CID_B "\"},"
    "{\"name\":\"waiting\"},7]}}";

static void test_podnames_names_containers_by_runtime_id(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(0, &t), GS_OK);
    assert_int_equal(update(t, TRAIN), GS_OK);
    assert_int_equal(gs_podnames_count(t), 1);
    char ns[64], name[254], ctr[64];
    /* The "<runtime>://" prefix is not part of the ID a cgroup path carries. */
    assert_true(gs_podnames_find(t, "u-train", CID_A, ns, name, ctr));
    assert_string_equal(ns, "ml");
    assert_string_equal(name, "train-0");
    assert_string_equal(ctr, "main");
    assert_true(gs_podnames_find(t, "u-train", CID_B, ns, name, ctr));
    assert_string_equal(ctr, "side");
    assert_true(gs_podnames_find(t, "u-train", CID_I, ns, name, ctr));
    assert_string_equal(ctr, "fetch");
    /* A process in the pod's own cgroup, or a container the status does not name yet. */
    assert_true(gs_podnames_find(t, "u-train", "", ns, name, ctr));
    assert_string_equal(ctr, "");
    assert_true(gs_podnames_find(t, "u-train", "cccc", ns, name, ctr));
    assert_string_equal(ctr, "");
    strcpy(ns, "untouched");
    assert_false(gs_podnames_find(t, "u-other", CID_A, ns, name, ctr));
    assert_string_equal(ns, "untouched");
    gs_podnames_free(t);
}

static void test_podnames_modified_replaces_and_deleted_removes(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(0, &t), GS_OK);
    /* Pending: no container started, so no container IDs yet; the pod is named all the same. */
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"ml\",\"name\":\"p\"},"
                               "\"status\":{\"phase\":\"Pending\"}}"),
                     GS_OK);
    char ns[64], name[254], ctr[64];
    assert_true(gs_podnames_find(t, "u1", CID_A, ns, name, ctr));
    assert_string_equal(ctr, "");
    /* Running, with its container's ID: the same entry, replaced. */
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"ml\",\"name\":\"p\"},"
                               "\"status\":{\"containerStatuses\":[{\"name\":\"c\","
                               "\"containerID\":\"docker://" CID_A "\"}]}}"),
                     GS_OK);
    assert_int_equal(gs_podnames_count(t), 1);
    assert_true(gs_podnames_find(t, "u1", CID_A, ns, name, ctr));
    assert_string_equal(ctr, "c");
    gs_podnames_remove(t, "u1");
    gs_podnames_remove(t, "u1"); /* twice, and unknown: ignored */
    gs_podnames_remove(t, NULL);
    assert_int_equal(gs_podnames_count(t), 0);
    assert_false(gs_podnames_find(t, "u1", CID_A, ns, name, ctr));
    gs_podnames_free(t);
    gs_podnames_free(NULL);
}

static void test_podnames_refuses_pods_without_identity(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(0, &t), GS_OK);
    assert_int_equal(update(t, "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p\"}}"), GS_EINVAL);
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"\",\"namespace\":\"ml\",\"name\":\"p\"}}"),
                     GS_EINVAL);
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":7,\"namespace\":\"ml\",\"name\":\"p\"}}"),
                     GS_EINVAL);
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"u\",\"name\":\"p\"}}"), GS_EINVAL);
    assert_int_equal(update(t, "[1,2]"), GS_EINVAL);
    /* A 64-byte UID does not fit a cgroup's (63 at most): refused, not cut. */
    char text[512];
    (void)snprintf(text, sizeof text,
                   "{\"metadata\":{\"uid\":\"%064d\",\"namespace\":\"ml\",\"name\":\"p\"}}", 0);
    assert_int_equal(update(t, text), GS_EINVAL);
    /* A container ID too long for a cgroup's, and a name of 64 bytes: left out, pod kept. */
    (void)snprintf(text, sizeof text,
                   "{\"metadata\":{\"uid\":\"u2\",\"namespace\":\"ml\",\"name\":\"p\"},"
                   "\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":"
                   "\"containerd://%080d\"},{\"name\":\"%064d\",\"containerID\":\"x://%s\"}]}}",
                   0, 0, CID_B);
    assert_int_equal(update(t, text), GS_OK);
    char ns[64], name[254], ctr[64];
    assert_true(gs_podnames_find(t, "u2", CID_B, ns, name, ctr));
    assert_string_equal(ctr, "");
    assert_int_equal(gs_podnames_count(t), 1);
    assert_int_equal(gs_podnames_update(NULL, NULL), GS_EINVAL);
    assert_int_equal(gs_podnames_new(2000000, &t), GS_EINVAL);
    gs_podnames_free(t);
}

static void test_podnames_is_bounded(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(2, &t), GS_OK);
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"a\"}}"),
                     GS_OK);
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"b\",\"namespace\":\"n\",\"name\":\"b\"}}"),
                     GS_OK);
    /* Full: a new pod is not added; one already there is still replaced. */
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"c\",\"namespace\":\"n\",\"name\":\"c\"}}"),
                     GS_ELIMIT);
    assert_int_equal(
        update(t, "{\"metadata\":{\"uid\":\"b\",\"namespace\":\"n\",\"name\":\"b2\"}}"), GS_OK);
    assert_int_equal(gs_podnames_count(t), 2);
    char ns[64], name[254], ctr[64];
    assert_false(gs_podnames_find(t, "c", "", ns, name, ctr));
    assert_true(gs_podnames_find(t, "b", "", ns, name, ctr));
    assert_string_equal(name, "b2");
    /* A delete makes room. */
    gs_podnames_remove(t, "a");
    assert_int_equal(update(t, "{\"metadata\":{\"uid\":\"c\",\"namespace\":\"n\",\"name\":\"c\"}}"),
                     GS_OK);
    gs_podnames_clear(t);
    assert_int_equal(gs_podnames_count(t), 0);
    assert_false(gs_podnames_find(t, "b", "", ns, name, ctr));
    gs_podnames_free(t);
}

/* 3,000 pods, every other one deleted: each lookup finds exactly the pods still there. */
static void test_podnames_many_pods_through_adds_and_deletes(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(0, &t), GS_OK);
    char text[256], uid[64], want[64];
    for (int i = 0; i < 3000; i++) {
        (void)snprintf(
            text, sizeof text,
            "{\"metadata\":{\"uid\":\"uid-%d\",\"namespace\":\"ns%d\",\"name\":\"pod-%d\"}}", i,
            i % 7, i);
        assert_int_equal(update(t, text), GS_OK);
    }
    for (int i = 0; i < 3000; i += 2) {
        (void)snprintf(uid, sizeof uid, "uid-%d", i);
        gs_podnames_remove(t, uid);
    }
    assert_int_equal(gs_podnames_count(t), 1500);
    char ns[64], name[254], ctr[64];
    for (int i = 0; i < 3000; i++) {
        (void)snprintf(uid, sizeof uid, "uid-%d", i);
        bool found = gs_podnames_find(t, uid, "", ns, name, ctr);
        assert_int_equal(found, i % 2 == 1);
        if (found) {
            (void)snprintf(want, sizeof want, "pod-%d", i);
            assert_string_equal(name, want);
        }
    }
    gs_podnames_free(t);
}

static void test_podnames_fill_names_known_values_only(void **state)
{
    (void)state;
    struct gs_podnames *t;
    assert_int_equal(gs_podnames_new(0, &t), GS_OK);
    assert_int_equal(update(t, TRAIN), GS_OK);
    struct gs_exporter_podval v[3];
    memset(v, 0, sizeof v);
    strcpy(v[0].pod_uid, "u-train");
    strcpy(v[0].container_id, CID_B);
    strcpy(v[1].pod_uid, "u-train"); /* the pod's own cgroup */
    strcpy(v[2].pod_uid, "u-gone");
    assert_int_equal(gs_podnames_fill(t, v, 3), 2);
    assert_string_equal(v[0].pod, "train-0");
    assert_string_equal(v[0].namespace_name, "ml");
    assert_string_equal(v[0].container, "side");
    assert_string_equal(v[1].pod, "train-0");
    assert_string_equal(v[1].container, "");
    assert_string_equal(v[2].pod, "");
    assert_string_equal(v[2].namespace_name, "");
    assert_int_equal(gs_podnames_fill(t, NULL, 3), 0);
    gs_podnames_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_podnames_names_containers_by_runtime_id),
        cmocka_unit_test(test_podnames_modified_replaces_and_deleted_removes),
        cmocka_unit_test(test_podnames_refuses_pods_without_identity),
        cmocka_unit_test(test_podnames_is_bounded),
        cmocka_unit_test(test_podnames_many_pods_through_adds_and_deletes),
        cmocka_unit_test(test_podnames_fill_names_known_values_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
