/*
 * A Pod's GPU ask into the core's request kinds, and the assignment annotation back into a
 * placement (src/k8s/kworld_gpus.c), each case worked by hand from the vocabularies' meaning.
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
#include "k8s/kworld_gpus.h"

/* A Pod from compact JSON; `limits` the first container's limits, `ann` its annotations. */
static json_t *pod(const char *limits, const char *ann)
{
    char text[1200];
    (void)snprintf(text, sizeof text,
                   "{\"metadata\":{\"name\":\"p\",\"annotations\":%s},"
                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":%s}}]}}",
                   ann ? ann : "{}", limits ? limits : "{}");
    json_t *p = json_loads(text, 0, NULL);
    assert_non_null(p);
    return p;
}

static int read_ask(json_t *p, struct gs_pod_req *rq, char *why, size_t cap)
{
    memset(rq, 0, sizeof *rq);
    why[0] = '\0';
    int rc = gs__kworld_pod_gpus(p, json_object_get(p, "spec"), rq, why, cap);
    json_decref(p);
    return rc;
}

static void test_each_vocabulary_becomes_its_request_kind(void **state)
{
    (void)state;
    struct gs_pod_req rq;
    char why[256];
    /* KAI gpu-memory 40000 MiB on 1 GPU: MEMORY, no compute share. */
    assert_int_equal(read_ask(pod(NULL, "{\"gpu-memory\":\"40000\"}"), &rq, why, sizeof why), 0);
    assert_int_equal(gs_req_kind(&rq), GS_REQ_MEMORY);
    assert_int_equal(rq.num_gpu, 1);
    assert_int_equal(rq.gpu_mem_mib, 40000);
    assert_int_equal(rq.gpu_milli, 0);
    /* ... on 3 devices. */
    assert_int_equal(
        read_ask(pod(NULL, "{\"gpu-memory\":\"1000\",\"gpu-fraction-num-devices\":\"3\"}"), &rq,
                 why, sizeof why),
        0);
    assert_int_equal(rq.num_gpu, 3);
    assert_int_equal(rq.gpu_mem_mib, 1000);
    /* KAI gpu-fraction 0.25 on 2 devices: 250 milli and 25 % of memory on each. */
    assert_int_equal(
        read_ask(pod(NULL, "{\"gpu-fraction\":\"0.25\",\"gpu-fraction-num-devices\":\"2\"}"), &rq,
                 why, sizeof why),
        0);
    assert_int_equal(rq.num_gpu, 2);
    assert_int_equal(rq.gpu_milli, 250);
    assert_int_equal(rq.gpu_mem_pct, 25);
    /* ... 0.333 rounds the memory share up to 34 %. */
    assert_int_equal(
        read_ask(pod(NULL, "{\"gpu-fraction\":\"0.333\",\"gpu-fraction-num-devices\":\"2\"}"), &rq,
                 why, sizeof why),
        0);
    assert_int_equal(rq.gpu_mem_pct, 34);
    /* KAI gpu-fraction 0.5 on one device: the milli request it always was. */
    assert_int_equal(read_ask(pod(NULL, "{\"gpu-fraction\":\"0.5\"}"), &rq, why, sizeof why), 0);
    assert_int_equal(gs_req_kind(&rq), GS_REQ_MILLI);
    assert_int_equal(rq.gpu_milli, 500);
    /* HAMi: 2 GPUs of 30000 MiB and 30 % compute each. */
    assert_int_equal(read_ask(pod("{\"nvidia.com/gpu\":2,\"nvidia.com/gpumem\":30000,"
                                  "\"nvidia.com/gpucores\":30}",
                                  NULL),
                              &rq, why, sizeof why),
                     0);
    assert_int_equal(gs_req_kind(&rq), GS_REQ_MEMORY);
    assert_int_equal(rq.num_gpu, 2);
    assert_int_equal(rq.gpu_mem_mib, 30000);
    assert_int_equal(rq.gpu_milli, 300);
    /* HAMi percentage as a resource. */
    assert_int_equal(
        read_ask(pod("{\"nvidia.com/gpu\":1,\"nvidia.com/gpumem-percentage\":15}", NULL), &rq, why,
                 sizeof why),
        0);
    assert_int_equal(rq.gpu_mem_pct, 15);
    assert_int_equal(rq.gpu_mem_mib, 0);
    /* Two MIG instances of one profile. */
    assert_int_equal(read_ask(pod("{\"nvidia.com/mig-3g.40gb\":2}", NULL), &rq, why, sizeof why),
                     0);
    assert_int_equal(gs_req_kind(&rq), GS_REQ_MIG);
    assert_int_equal(rq.mig_count, 2);
    assert_string_equal(rq.mig_profile, "3g.40gb");
    assert_int_equal(rq.num_gpu, 0);
    /* Three time-sliced slots. */
    assert_int_equal(read_ask(pod("{\"nvidia.com/gpu.shared\":3}", NULL), &rq, why, sizeof why), 0);
    assert_int_equal(gs_req_kind(&rq), GS_REQ_TIMESLICE);
    assert_int_equal(rq.timeslice_slots, 3);
    /* Whole GPUs, unchanged. */
    assert_int_equal(read_ask(pod("{\"nvidia.com/gpu\":4}", NULL), &rq, why, sizeof why), 0);
    assert_int_equal(rq.num_gpu, 4);
    assert_int_equal(rq.gpu_milli, 1000);
}

static void test_mixes_that_are_no_request_say_why(void **state)
{
    (void)state;
    struct gs_pod_req rq;
    char why[256];
    assert_int_equal(read_ask(pod("{\"nvidia.com/gpu.shared\":1,\"nvidia.com/gpu\":1}", NULL), &rq,
                              why, sizeof why),
                     1);
    assert_string_equal(why, "not a GPU request: timeslice_slots 1 with num_gpu, gpu_milli or gpu "
                             "memory: a time-sliced pod asks for slots only");
    assert_int_equal(
        read_ask(pod("{\"nvidia.com/mig-1g.10gb\":1,\"nvidia.com/mig-2g.20gb\":1}", NULL), &rq, why,
                 sizeof why),
        1);
    assert_string_equal(why,
                        "asks MIG instances of two profiles (1g.10gb and 2g.20gb): one profile "
                        "per pod");
    /* 300 % is not wrapped to 44: the type's largest value is what validation sees. */
    assert_int_equal(
        read_ask(pod("{\"nvidia.com/gpu\":1,\"nvidia.com/gpumem-percentage\":300}", NULL), &rq, why,
                 sizeof why),
        1);
    assert_string_equal(why, "not a GPU request: gpu_mem_pct 255: above 100");
    assert_int_equal(read_ask(pod("{\"nvidia.com/gpumem\":100}", NULL), &rq, why, sizeof why), 1);
    assert_string_equal(why, "not a GPU request: gpu memory asked with num_gpu 0: name the GPUs");
    assert_int_equal(
        read_ask(pod("{\"nvidia.com/gpu\":3}", "{\"gpu-memory\":\"10\"}"), &rq, why, sizeof why),
        1);
    assert_non_null(strstr(why, "nvidia.com/gpu 3 beside a KAI fraction of 1 device(s)"));
    assert_int_equal(read_ask(pod(NULL, "{\"gpu-memory\":\"lots\"}"), &rq, why, sizeof why), 1);
    assert_string_equal(why, "annotation gpu-memory must be a positive number of MiB");
}

/* A node with GPU 0 in fractions mode and GPU 1 in MIG mode (H100-80GB, 3g.40gb at 0 and 4). */
static struct gs_cluster *mixed_node(void)
{
    struct gs_cluster *c = NULL;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    const struct gs_mig_model *mm = gs_mig_model_find("H100-80GB");
    assert_non_null(mm);
    int p3 = gs_mig_profile_find(mm, "3g.40gb");
    assert_true(p3 >= 0);
    struct gs_gpu_mode modes[2] = {{.sharing = GS_GPU_SHARE_MILLI, .replicas = 1},
                                   {.sharing = GS_GPU_SHARE_MIG,
                                    .replicas = 1,
                                    .mig_count = 2,
                                    .mig = {{(uint8_t)p3, 0}, {(uint8_t)p3, 4}}}};
    struct gs_node_spec s = {"n1", 64000, 512 * 1024, 110, 2, "H100-80GB", 81920, modes};
    uint32_t id;
    assert_int_equal(gs_cluster_add_node(c, &s, &id), GS_OK);
    return c;
}

static void assigned(struct gs_cluster *c, const char *ann, const struct gs_pod_req *rq,
                     struct gs_placement *pl)
{
    char a[600];
    (void)snprintf(a, sizeof a, "{\"gpusched.io/assigned-gpus\":%s}", ann);
    json_t *p = pod(NULL, a);
    memset(pl, 0, sizeof *pl);
    gs__kworld_assigned(p, rq, c, 0, pl);
    json_decref(p);
}

static void test_assignments_read_back_exactly(void **state)
{
    (void)state;
    struct gs_cluster *c = mixed_node();
    struct gs_placement pl;
    struct gs_pod_req mig = {.mig_count = 1};
    (void)snprintf(mig.mig_profile, sizeof mig.mig_profile, "3g.40gb");
    assigned(c,
             "\"{\\\"gpus\\\":[{\\\"index\\\":1,\\\"milli\\\":0,\\\"mig\\\":{\\\"profile\\\":"
             "\\\"3g.40gb\\\",\\\"start\\\":4}}]}\"",
             &mig, &pl);
    assert_int_equal(pl.mig_count, 1);
    assert_int_equal(pl.num_gpu, 0);
    assert_int_equal(pl.mig[0].gpu, 1);
    assert_int_equal(pl.mig[0].start, 4);
    assert_int_equal(pl.mig[0].profile,
                     gs_mig_profile_find(gs_mig_model_find("H100-80GB"), "3g.40gb"));
    /* A profile GPU 1's model does not have: GPUs unknown. */
    assigned(c,
             "\"{\\\"gpus\\\":[{\\\"index\\\":1,\\\"milli\\\":0,\\\"mig\\\":{\\\"profile\\\":"
             "\\\"9g.1gb\\\",\\\"start\\\":0}}]}\"",
             &mig, &pl);
    assert_int_equal(pl.mig_count, 0);
    /* Memory: mem_mib per GPU. */
    struct gs_pod_req mem = {.num_gpu = 1, .gpu_mem_mib = 50000};
    assigned(c, "\"{\\\"gpus\\\":[{\\\"index\\\":0,\\\"milli\\\":0,\\\"mem_mib\\\":50000}]}\"",
             &mem, &pl);
    assert_int_equal(pl.num_gpu, 1);
    assert_int_equal(pl.gpu_index[0], 0);
    assert_int_equal(pl.gpu_mem_mib[0], 50000);
    /* A memory entry without mem_mib, or two entries for one GPU asked: GPUs unknown. */
    assigned(c, "\"{\\\"gpus\\\":[{\\\"index\\\":0,\\\"milli\\\":0}]}\"", &mem, &pl);
    assert_int_equal(pl.num_gpu, 0);
    assigned(c,
             "\"{\\\"gpus\\\":[{\\\"index\\\":0,\\\"milli\\\":0,\\\"mem_mib\\\":1},{\\\"index\\\":"
             "1,\\\"milli\\\":0,\\\"mem_mib\\\":1}]}\"",
             &mem, &pl);
    assert_int_equal(pl.num_gpu, 0);
    /* An index past the node's GPUs, and text that is not JSON. */
    assigned(c, "\"{\\\"gpus\\\":[{\\\"index\\\":7,\\\"milli\\\":0,\\\"mem_mib\\\":1}]}\"", &mem,
             &pl);
    assert_int_equal(pl.num_gpu, 0);
    assigned(c, "\"{gpus\"", &mem, &pl);
    assert_int_equal(pl.num_gpu, 0);
    gs_cluster_free(c);
}

/* A node whose MIG was read from capacity has assignments without starts: adoption takes the
 * first instances of the profile on that GPU that no pod holds, each once. */
static void test_assignments_without_start_take_free_instances(void **state)
{
    (void)state;
    struct gs_cluster *c = mixed_node();
    struct gs_placement pl;
    struct gs_pod_req two = {.mig_count = 2};
    (void)snprintf(two.mig_profile, sizeof two.mig_profile, "3g.40gb");
#define NULL_3G                                                                                    \
    "{\\\"index\\\":1,\\\"milli\\\":0,\\\"mig\\\":{\\\"profile\\\":\\\"3g.40gb\\\",\\\"start\\\":" \
    "null}}"
    /* Two on GPU 1's two 3g's (at 0 and 4): 0, then 4, not 0 twice. */
    assigned(c, "\"{\\\"gpus\\\":[" NULL_3G "," NULL_3G "]}\"", &two, &pl);
    assert_int_equal(pl.mig_count, 2);
    assert_int_equal(pl.mig[0].gpu, 1);
    assert_int_equal(pl.mig[0].start, 0);
    assert_int_equal(pl.mig[1].gpu, 1);
    assert_int_equal(pl.mig[1].start, 4);
    /* With the 3g at 0 held by a pod, one without a start is the one at 4. */
    struct gs_pod_req one = {.mig_count = 1, .gpu_model_mask = GS_MODEL_ANY};
    (void)snprintf(one.mig_profile, sizeof one.mig_profile, "3g.40gb");
    struct gs_placement held = {.node = 0, .mig_count = 1};
    held.mig[0] = (struct gs_placement_mig){1, pl.mig[0].profile, 0};
    assert_int_equal(gs_cluster_bind(c, &one, &held), GS_OK);
    assigned(c, "\"{\\\"gpus\\\":[" NULL_3G "]}\"", &one, &pl);
    assert_int_equal(pl.mig_count, 1);
    assert_int_equal(pl.mig[0].start, 4);
    /* Two asked, one free: GPUs unknown (the core charges the first that fit). */
    assigned(c, "\"{\\\"gpus\\\":[" NULL_3G "," NULL_3G "]}\"", &two, &pl);
    assert_int_equal(pl.mig_count, 0);
#undef NULL_3G
    gs_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_vocabulary_becomes_its_request_kind),
        cmocka_unit_test(test_mixes_that_are_no_request_say_why),
        cmocka_unit_test(test_assignments_read_back_exactly),
        cmocka_unit_test(test_assignments_without_start_take_free_instances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
