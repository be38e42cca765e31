/*
 * The dynamic MIG annotations (include/gpusched/kmigplan.h, src/k8s/kmigplan.c): a plan and an
 * outcome written and read back are the same values, the text is the documented one, and every
 * kind of bad text is refused with one sentence naming its field.
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
#include "gpusched/kmigplan.h"

/* Seven 1g.10gb of an H100 80GB at starts 0..6: destroy the three at 0, 1, 2 for one 3g.40gb
 * at start 0 (3g.40gb's allowed starts are 0 and 4). */
static struct gs_kmig_plan plan_h100(void)
{
    struct gs_kmig_plan p;
    memset(&p, 0, sizeof(p));
    (void)snprintf(p.id, sizeof(p.id), "n1-0-1");
    p.gpu = 0;
    (void)snprintf(p.uuid, sizeof(p.uuid), "GPU-aaaa");
    p.n_destroy = 3;
    for (uint32_t i = 0; i < 3; i++) {
        (void)snprintf(p.destroy[i].profile, sizeof(p.destroy[i].profile), "1g.10gb");
        p.destroy[i].start = i;
    }
    p.n_create = 1;
    (void)snprintf(p.create[0].profile, sizeof(p.create[0].profile), "3g.40gb");
    p.create[0].start = 0;
    (void)snprintf(p.pod, sizeof(p.pod), "team-a/train");
    (void)snprintf(p.created, sizeof(p.created), "2026-01-02T03:04:05Z");
    return p;
}

static const char PLAN_TEXT[] =
    "{\"id\":\"n1-0-1\",\"gpu\":0,\"uuid\":\"GPU-aaaa\",\"destroy\":[{\"profile\":\"1g.10gb\","
    "\"start\":0},{\"profile\":\"1g.10gb\",\"start\":1},{\"profile\":\"1g.10gb\",\"start\":2}],"
    "\"create\":[{\"profile\":\"3g.40gb\",\"start\":0}],\"pod\":\"team-a/train\","
    "\"created\":\"2026-01-02T03:04:05Z\"}";

static void plan_written_as_documented(void **st)
{
    (void)st;
    struct gs_kmig_plan p = plan_h100();
    char *t = gs_kmig_plan_write(&p);
    assert_non_null(t);
    assert_string_equal(t, PLAN_TEXT);
    free(t);
    assert_null(gs_kmig_plan_write(NULL));
}

static void plan_read_back(void **st)
{
    (void)st;
    struct gs_kmig_plan p;
    char err[256] = "";
    assert_int_equal(gs_kmig_plan_read(PLAN_TEXT, &p, err, sizeof(err)), GS_OK);
    assert_string_equal(p.id, "n1-0-1");
    assert_int_equal(p.gpu, 0);
    assert_string_equal(p.uuid, "GPU-aaaa");
    assert_int_equal(p.n_destroy, 3);
    assert_string_equal(p.destroy[2].profile, "1g.10gb");
    assert_int_equal(p.destroy[2].start, 2);
    assert_int_equal(p.n_create, 1);
    assert_string_equal(p.create[0].profile, "3g.40gb");
    assert_int_equal(p.create[0].start, 0);
    assert_string_equal(p.pod, "team-a/train");
    assert_string_equal(p.created, "2026-01-02T03:04:05Z");
    /* No destroy at all (the slices were empty) is a plan too. */
    assert_int_equal(gs_kmig_plan_read("{\"id\":\"x\",\"gpu\":3,\"uuid\":\"\",\"destroy\":[],"
                                       "\"create\":[{\"profile\":\"7g.80gb\",\"start\":0}],"
                                       "\"pod\":\"a/b\",\"created\":\"t\"}",
                                       &p, err, sizeof(err)),
                     GS_OK);
    assert_int_equal(p.gpu, 3);
    assert_int_equal(p.n_destroy, 0);
    assert_string_equal(p.uuid, "");
}

/* Replaces the first `from` of PLAN_TEXT by `to` and expects the reader's sentence. */
static void refused(const char *from, const char *to, const char *want)
{
    char text[1024];
    const char *at = strstr(PLAN_TEXT, from);
    assert_non_null(at);
    (void)snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - PLAN_TEXT), PLAN_TEXT, to,
                   at + strlen(from));
    struct gs_kmig_plan p;
    char err[256] = "";
    assert_int_equal(gs_kmig_plan_read(text, &p, err, sizeof(err)), GS_EINVAL);
    if (strstr(err, want) == NULL)
        fail_msg("text %s: error \"%s\", wanted \"%s\"", text, err, want);
}

static void plan_bad_fields_named(void **st)
{
    (void)st;
    refused("\"gpu\":0", "\"gpu\":64", "gpu: not an integer in 0..63");
    refused("\"gpu\":0", "\"gpu\":-1", "gpu: not an integer in 0..63");
    refused("\"gpu\":0", "\"gpu\":\"0\"", "gpu: not an integer in 0..63");
    refused("\"gpu\":0,", "", "gpu: missing");
    refused("\"id\":\"n1-0-1\"", "\"id\":\"\"", "id: empty");
    refused("\"id\":\"n1-0-1\"", "\"id\":7", "id: not a string");
    refused("\"uuid\":\"GPU-aaaa\"", "\"uuid\":null", "uuid: not a string");
    refused("{\"profile\":\"1g.10gb\",\"start\":1}", "{\"profile\":\"1g.10gb\",\"start\":8}",
            "destroy[1].start: not an integer in 0..7");
    refused("{\"profile\":\"1g.10gb\",\"start\":1}", "{\"start\":1}",
            "destroy[1].profile: missing");
    refused("{\"profile\":\"1g.10gb\",\"start\":1}", "7", "destroy[1]: not an object");
    refused("{\"profile\":\"3g.40gb\",\"start\":0}",
            "{\"profile\":\"3g.40gb\",\"start\":0,\"size\":3}", "create[0].size: unknown member");
    refused("[{\"profile\":\"3g.40gb\",\"start\":0}]", "[]", "create: empty");
    refused("[{\"profile\":\"3g.40gb\",\"start\":0}]", "{}", "create: not an array");
    refused("{\"profile\":\"3g.40gb\"", "{\"profile\":\"3g.40gb-much-too-long-name\"",
            "create[0].profile: longer than 15 bytes");
    refused("\"pod\":\"team-a/train\"", "\"pod\":\"train\"", "pod: not \"namespace/name\"");
    refused("\"created\":\"2026-01-02T03:04:05Z\"}", "\"created\":\"t\",\"extra\":1}",
            "extra: unknown member");
    refused("{\"id\"", "[{\"id\"", "mig-plan: not JSON");
    struct gs_kmig_plan p;
    char err[256] = "";
    assert_int_equal(gs_kmig_plan_read("[1]", &p, err, sizeof(err)), GS_EINVAL);
    assert_string_equal(err, "mig-plan: not a JSON object");
    assert_int_equal(gs_kmig_plan_read(NULL, &p, err, sizeof(err)), GS_EINVAL);
    assert_int_equal(gs_kmig_plan_read("{\"id\":\"a\",\"id\":\"b\"}", &p, err, sizeof(err)),
                     GS_EINVAL);
    assert_non_null(strstr(err, "not JSON"));
    /* Nine destroys: more than a GPU holds. */
    char nine[1024] = "{\"id\":\"x\",\"gpu\":0,\"uuid\":\"\",\"destroy\":[";
    for (int i = 0; i < 9; i++)
        (void)snprintf(nine + strlen(nine), sizeof(nine) - strlen(nine),
                       "%s{\"profile\":\"1g.10gb\",\"start\":0}", i ? "," : "");
    (void)snprintf(nine + strlen(nine), sizeof(nine) - strlen(nine),
                   "],\"create\":[],\"pod\":\"a/b\",\"created\":\"t\"}");
    assert_int_equal(gs_kmig_plan_read(nine, &p, err, sizeof(err)), GS_EINVAL);
    assert_string_equal(err, "destroy: more than 8 instances");
}

static void status_round_trip(void **st)
{
    (void)st;
    struct gs_kmig_status s = {"n1-0-1", false, "instance 1g.10gb at start 1 is allocated"};
    char *t = gs_kmig_status_write(&s);
    assert_non_null(t);
    assert_string_equal(t, "{\"id\":\"n1-0-1\",\"state\":\"failed\",\"reason\":\"instance 1g.10gb "
                           "at start 1 is allocated\"}");
    struct gs_kmig_status r;
    char err[256] = "";
    assert_int_equal(gs_kmig_status_read(t, &r, err, sizeof(err)), GS_OK);
    free(t);
    assert_string_equal(r.id, "n1-0-1");
    assert_false(r.done);
    assert_string_equal(r.reason, "instance 1g.10gb at start 1 is allocated");
    assert_int_equal(gs_kmig_status_read("{\"id\":\"p\",\"state\":\"done\"}", &r, err, sizeof(err)),
                     GS_OK);
    assert_true(r.done);
    assert_string_equal(r.reason, "");
    assert_int_equal(gs_kmig_status_read("{\"id\":\"p\",\"state\":\"ok\"}", &r, err, sizeof(err)),
                     GS_EINVAL);
    assert_string_equal(err, "state: not \"done\" or \"failed\"");
    assert_int_equal(gs_kmig_status_read("{\"state\":\"done\"}", &r, err, sizeof(err)), GS_EINVAL);
    assert_string_equal(err, "id: missing");
    assert_int_equal(
        gs_kmig_status_read("{\"id\":\"p\",\"state\":\"done\",\"reason\":1}", &r, err, sizeof(err)),
        GS_EINVAL);
    assert_string_equal(err, "reason: not a string");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_written_as_documented),
        cmocka_unit_test(plan_read_back),
        cmocka_unit_test(plan_bad_fields_named),
        cmocka_unit_test(status_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
