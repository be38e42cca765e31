/*
 * Unit tests of the agent's Kubernetes side, its pure parts (include/gpusched/dpkube.h and the
 * claim hooks of the handlers in devplugin.h): the inventory text of a node with whole,
 * time-sliced and MIG GPUs; the assignment table choosing the oldest pending pod of a resource
 * and count; GetPreferredAllocation following a claim only when its GPUs are offered, healthy
 * and the same GPUs; Allocate reporting a mismatch; MIG claims naming the instance by GPU and
 * start (two on one card); the claim's memory and compute shares in the container's
 * environment. Expected values are worked out by hand
 * beside each assertion. The daemon's side against a real API server is tests/k8s/agent_e2e.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/devplugin.h"
#include "gpusched/dpkube.h"
#include "gpusched/err.h"

#include "dp_fixture.h"

/* ---- inventory ---------------------------------------------------------------------------- */

static void test_inventory_names_modes_mig_instances_and_health(void **state)
{
    (void)state;
    /* GPU 0 whole, NVLink to 1; GPU 1 time-sliced 4 ways; GPU 2 MIG (mixed): 1g.18gb at
     * slot 0 and 3g.71gb with no known start. NUMA: 0, 0, 1 (two GPUs per node). */
    struct gs_gpu_info g[3];
    dpfx_make_node(g, 3, 2, 2);
    g[2].mig_capable = g[2].mig_enabled = true;
    g[2].mig_count = 2;
    (void)snprintf(g[2].mig[0].profile, sizeof g[2].mig[0].profile, "1g.18gb");
    (void)snprintf(g[2].mig[0].uuid, sizeof g[2].mig[0].uuid, "MIG-2-0");
    g[2].mig[0].mem_mib = 16384;
    g[2].mig[0].has_start = true;
    g[2].mig[0].start_slot = 0;
    (void)snprintf(g[2].mig[1].profile, sizeof g[2].mig[1].profile, "3g.71gb");
    (void)snprintf(g[2].mig[1].uuid, sizeof g[2].mig[1].uuid, "MIG-2-1");
    g[2].mig[1].mem_mib = 65536;
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\nsharing: {timeSlicing: {resources: "
                  "[{name: nvidia.com/gpu, replicas: 4, devices: [1]}]}}\n",
                  &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 3, &m, NULL, 0), GS_OK);
    enum gs_health_state h[3] = {GS_HEALTH_UNHEALTHY, GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    char *text = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &text), GS_OK);
    /* Keys sorted, compact. GPU 1's replicas share nvidia.com/gpu (no rename); GPU 2 is not
     * advertised whole under mixed, only its MIG devices, each under its profile's resource. */
    assert_string_equal(
        text,
        "{\"gpus\":["
        "{\"health\":\"Unhealthy\",\"index\":0,\"mem_mib\":143771,\"mig\":[],\"mode\":\"whole\","
        "\"model\":\"NVIDIA H200\",\"numa_node\":0,\"nvlink_peers\":[1],\"replicas\":1,"
        "\"resources\":[\"nvidia.com/gpu\"],\"uuid\":\"GPU-0\"},"
        "{\"health\":\"Healthy\",\"index\":1,\"mem_mib\":143771,\"mig\":[],\"mode\":\"replicas\","
        "\"model\":\"NVIDIA H200\",\"numa_node\":0,\"nvlink_peers\":[0],\"replicas\":4,"
        "\"resources\":[\"nvidia.com/gpu\"],\"uuid\":\"GPU-1\"},"
        "{\"health\":\"Healthy\",\"index\":2,\"mem_mib\":143771,\"mig\":["
        "{\"advertised\":true,\"mem_mib\":16384,\"profile\":\"1g.18gb\",\"replicas\":1,"
        "\"start\":0,\"uuid\":\"MIG-2-0\"},"
        "{\"advertised\":true,\"mem_mib\":65536,\"profile\":\"3g.71gb\",\"replicas\":1,"
        "\"start\":null,\"uuid\":\"MIG-2-1\"}],\"mode\":\"mig\",\"model\":\"NVIDIA H200\","
        "\"numa_node\":1,\"nvlink_peers\":[],\"replicas\":1,"
        "\"resources\":[\"nvidia.com/mig-1g.18gb\",\"nvidia.com/mig-3g.71gb\"],"
        "\"uuid\":\"GPU-2\"}],\"version\":1}");
    free(text);
    /* The same node and health give the same bytes (the agent compares them to skip PATCHes). */
    char *again = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &again), GS_OK);
    h[0] = GS_HEALTH_HEALTHY;
    char *healed = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &healed), GS_OK);
    assert_non_null(strstr(again, "{\"health\":\"Unhealthy\",\"index\":0,"));
    assert_null(strstr(healed, "Unhealthy"));
    free(again);
    free(healed);
    assert_int_equal(gs_dp_inventory_json(&m, NULL, &text), GS_EINVAL);
    gs_dp_model_fini(&m);
}

/* ---- the assignment table -------------------------------------------------------------- */

/* A Pod object; containers is the JSON of spec.containers, ann the assignment or NULL. */
static json_t *pod(const char *name, const char *created, const char *phase, const char *containers,
                   const char *ann)
{
    char text[2048];
    char annj[700] = "";
    if (ann != NULL) {
        json_t *s = json_string(ann);
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        (void)snprintf(annj, sizeof annj, ",\"annotations\":{\"gpusched.io/assigned-gpus\":%s}", d);
        free(d);
        json_decref(s);
    }
    (void)snprintf(text, sizeof text,
                   "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"t\","
                   "\"uid\":\"u-%s\",\"creationTimestamp\":\"%s\"%s},"
                   "\"spec\":{\"nodeName\":\"n1\",\"containers\":%s},"
                   "\"status\":{\"phase\":\"%s\"}}",
                   name, name, created, annj, containers, phase);
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    if (o == NULL)
        fail_msg("bad test pod %s: %s", name, e.text);
    return o;
}

static void add(struct gs_dp_assign *t, json_t *p, const char *want_why)
{
    char why[300];
    assert_int_equal(gs_dp_assign_update(t, p, why, sizeof why), GS_OK);
    if (want_why == NULL)
        assert_string_equal(why, "");
    else
        assert_non_null(strstr(why, want_why));
    json_decref(p);
}

#define GPU2 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]"
#define GPU1 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]"

static void test_inventory_of_a_gpu_lost_at_start_keeps_the_schema(void **state)
{
    (void)state;
    /* GPU 0 answered nothing when read (no UUID, model or memory): not advertised, and in the
     * inventory "lost-0", Unhealthy even when the health machine has found it again (kubelet
     * does not have it), with the model and memory of GPU 1, so that the scheduler neither
     * refuses the annotation (empty uuid) nor takes 0 MiB as the node's GPU memory. */
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 2, 2);
    memset(&g[0], 0, sizeof g[0]);
    g[0].index = 0;
    g[0].lost = true;
    g[0].numa_node = -1;
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 1);
    assert_int_equal(m.resources[0].n_devices, 1); /* GPU 1 only */
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    char *text = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &text), GS_OK);
    assert_string_equal(
        text,
        "{\"gpus\":["
        "{\"health\":\"Unhealthy\",\"index\":0,\"mem_mib\":143771,\"mig\":[],\"mode\":\"whole\","
        "\"model\":\"NVIDIA H200\",\"numa_node\":null,\"nvlink_peers\":[],\"replicas\":1,"
        "\"resources\":[],\"uuid\":\"lost-0\"},"
        "{\"health\":\"Healthy\",\"index\":1,\"mem_mib\":143771,\"mig\":[],\"mode\":\"whole\","
        "\"model\":\"NVIDIA H200\",\"numa_node\":0,\"nvlink_peers\":[0],\"replicas\":1,"
        "\"resources\":[\"nvidia.com/gpu\"],\"uuid\":\"GPU-1\"}],\"version\":1}");
    free(text);
    gs_dp_model_fini(&m);
}

static void test_assign_takes_oldest_pending_pod_of_that_resource_and_count(void **state)
{
    (void)state;
    struct gs_dp_assign *t = NULL;
    assert_int_equal(gs_dp_assign_new(&t), GS_OK);
    add(t,
        pod("a", "2026-12-01T10:00:02Z", "Pending", GPU2,
            "{\"gpus\":[{\"index\":3,\"milli\":1000},{\"index\":1,\"milli\":1000}]}"),
        NULL);
    add(t,
        pod("b", "2026-12-01T10:00:01Z", "Pending", GPU1,
            "{\"gpus\":[{\"index\":0,\"milli\":1000,\"uuid\":\"GPU-0\"}]}"),
        NULL);
    /* Older, but Running: kubelet admitted it long ago. */
    add(t,
        pod("c", "2026-12-01T09:00:00Z", "Running", GPU2,
            "{\"gpus\":[{\"index\":4},{\"index\":5}]}"),
        NULL);
    /* Older, Pending, but being deleted: kubelet will not admit it. */
    json_t *del = pod("z", "2026-12-01T09:30:00Z", "Pending", GPU2,
                      "{\"gpus\":[{\"index\":6},{\"index\":7}]}");
    json_object_set_new(json_object_get(del, "metadata"), "deletionTimestamp",
                        json_string("2026-12-01T11:00:00Z"));
    add(t, del, NULL);
    /* Oldest of all, but no assignment (another scheduler's pod). */
    add(t, pod("d", "2026-12-01T08:00:00Z", "Pending", GPU2, NULL), NULL);
    /* An unreadable assignment is reported and the pod left out. */
    add(t, pod("e", "2026-12-01T08:00:00Z", "Pending", GPU2, "{\"gpus\":[{\"index\":-1}]}"),
        "gpus[0].index is not a GPU index 0..63");
    add(t, pod("f", "2026-12-01T08:00:00Z", "Pending", GPU2, "not json"), "is not JSON");
    assert_int_equal(gs_dp_assign_count(t), 4); /* a, b, c, z */
    /* A uid a claim cannot carry whole (64 bytes) could never be consumed: refused. */
    json_t *lu = pod("long", "2026-12-01T08:00:00Z", "Pending", GPU1, "{\"gpus\":[{\"index\":0}]}");
    json_object_set_new(
        json_object_get(lu, "metadata"), "uid",
        json_string("0123456789012345678901234567890123456789012345678901234567890123"));
    assert_int_equal(gs_dp_assign_update(t, lu, NULL, 0), GS_EINVAL);
    json_decref(lu);
    assert_int_equal(gs_dp_assign_count(t), 4);

    struct gs_dp_claim cl;
    /* 2 GPUs: only a asks 2 and is pending; the claim keeps the assignment's order 3, 1. */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 2, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/a");
    assert_string_equal(cl.uid, "u-a");
    assert_int_equal(cl.n_gpus, 2);
    assert_int_equal(cl.gpu[0], 3);
    assert_int_equal(cl.gpu[1], 1);
    assert_string_equal(cl.uuid[0], "");
    /* 1 GPU: b (a asks 2 in its one container). */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/b");
    assert_string_equal(cl.uuid[0], "GPU-0");
    /* Nobody asks 3, nor another resource. */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 3, &cl), GS_ENOENT);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 2, &cl), GS_ENOENT);

    /* A newer pod asking 2 with the same timestamp as a comes after it (arrival order). */
    add(t,
        pod("g", "2026-12-01T10:00:02Z", "Pending", GPU2,
            "{\"gpus\":[{\"index\":6},{\"index\":7}]}"),
        NULL);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 2, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/a");
    /* Allocated: a is never claimed again, even after a relist brings it back. */
    assert_int_equal(gs_dp_assign_consume(t, "u-a", 2, NULL), GS_OK);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 2, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/g");
    gs_dp_assign_clear(t);
    assert_int_equal(gs_dp_assign_count(t), 0);
    add(t,
        pod("a", "2026-12-01T10:00:02Z", "Pending", GPU2,
            "{\"gpus\":[{\"index\":3},{\"index\":1}]}"),
        NULL);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 2, &cl), GS_ENOENT);
    assert_int_equal(gs_dp_assign_consume(t, "u-nobody", 1, NULL), GS_ENOENT);

    /* Two containers of 1 GPU each: the first call gets the first assigned GPU, the next the
     * second; then the pod is allocated. */
    add(t,
        pod("h", "2026-12-01T11:00:00Z", "Pending",
            "[{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}},"
            "{\"name\":\"y\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]",
            "{\"gpus\":[{\"index\":5},{\"index\":6}]}"),
        NULL);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_int_equal(cl.gpu[0], 5);
    assert_int_equal(gs_dp_assign_consume(t, "u-h", 1, NULL), GS_OK);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_int_equal(cl.gpu[0], 6);
    assert_int_equal(gs_dp_assign_consume(t, "u-h", 1, NULL), GS_OK);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_ENOENT);
    /* What an earlier run of the agent wrote on the pod counts as handed out: of i's two
     * 1-GPU containers, the first (GPU 1) was allocated, so the claim is GPU 2; j is done; a
     * mark that is not a count in 0..16 is ignored (k is claimable from its first GPU). */
    const char *two1 = "[{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}},"
                       "{\"name\":\"y\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]";
    json_t *pi = pod("i", "2026-12-01T12:00:00Z", "Pending", two1,
                     "{\"gpus\":[{\"index\":1},{\"index\":2}]}");
    json_t *pj = pod("j", "2026-12-01T11:30:00Z", "Pending", two1,
                     "{\"gpus\":[{\"index\":3},{\"index\":4}]}");
    json_t *pk = pod("k", "2026-12-01T12:30:00Z", "Pending", two1,
                     "{\"gpus\":[{\"index\":6},{\"index\":7}]}");
    json_object_set_new(json_object_get(json_object_get(pi, "metadata"), "annotations"),
                        GS_DP_ALLOCATED_ANNOTATION, json_string("1"));
    json_object_set_new(json_object_get(json_object_get(pj, "metadata"), "annotations"),
                        GS_DP_ALLOCATED_ANNOTATION, json_string("2"));
    json_object_set_new(json_object_get(json_object_get(pk, "metadata"), "annotations"),
                        GS_DP_ALLOCATED_ANNOTATION, json_string("17"));
    add(t, pi, NULL);
    add(t, pj, NULL);
    add(t, pk, NULL);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/i"); /* j (older) is done */
    assert_int_equal(cl.gpu[0], 2);
    uint32_t given = 0;
    assert_int_equal(gs_dp_assign_consume(t, "u-i", 1, &given), GS_OK);
    assert_int_equal(given, 2);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/k");
    assert_int_equal(cl.gpu[0], 6);
    gs_dp_assign_remove(t, "u-i");
    gs_dp_assign_remove(t, "u-j");
    gs_dp_assign_remove(t, "u-k");
    /* Deleted pods go. */
    gs_dp_assign_remove(t, "u-h");
    assert_int_equal(gs_dp_assign_count(t), 1);
    gs_dp_assign_free(t);
}

/* ---- handlers following a claim ----------------------------------------------------------- */

struct hook {
    const char *resource;     /* the resource claim() answers for; NULL: nvidia.com/gpu */
    struct gs_dp_claim claim; /* what claim() answers */
    bool have;                /* false: claim() says GS_ENOENT */
    int calls;                /* outcomes told */
    bool honoured, allocate;  /* the last outcome */
    bool gave, no_claim;      /* the last outcome: gave_assigned, claim NULL */
    char why[640], ids[512];
};

static int hook_claim(void *ctx, const char *resource, uint32_t count, struct gs_dp_claim *out)
{
    struct hook *h = ctx;
    if (!h->have || strcmp(resource, h->resource ? h->resource : "nvidia.com/gpu") != 0 ||
        count != h->claim.n_gpus)
        return GS_ENOENT;
    *out = h->claim;
    return GS_OK;
}

static void hook_outcome(void *ctx, const struct gs_dp_claim_outcome *o)
{
    struct hook *h = ctx;
    h->calls++;
    h->honoured = o->honoured;
    h->allocate = o->allocate;
    h->gave = o->gave_assigned;
    h->no_claim = o->claim == NULL;
    (void)snprintf(h->why, sizeof h->why, "%s", o->why);
    (void)snprintf(h->ids, sizeof h->ids, "%s", o->ids);
}

/* Allocate of one container; returns the gRPC status. */
static int allocate(const struct gs_dp_view *v, const char *const *ids, size_t n)
{
    int status;
    V1beta1__AllocateResponse *r = dpfx_allocate(v, ids, n, &status);
    if (r)
        v1beta1__allocate_response__free_unpacked(r, NULL);
    return status;
}

/* Allocate of one container; *env receives its environment as "K=V;..." sorted by key (static
 * storage), "" for a refused call. Returns the gRPC status. */
static int allocate_env(const struct gs_dp_view *v, const char *const *ids, size_t n,
                        const char **env)
{
    static char out[2048];
    out[0] = '\0';
    *env = out;
    int status;
    V1beta1__AllocateResponse *r = dpfx_allocate(v, ids, n, &status);
    if (status == 0) {
        assert_non_null(r);
        const V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        /* Sorted by key: a handful of entries, so a selection by the smallest unprinted key. */
        const char *last = "";
        for (size_t k = 0; k < c->n_envs; k++) {
            const char *best = NULL, *val = NULL;
            for (size_t i = 0; i < c->n_envs; i++)
                if (strcmp(c->envs[i]->key, last) > 0 &&
                    (best == NULL || strcmp(c->envs[i]->key, best) < 0)) {
                    best = c->envs[i]->key;
                    val = c->envs[i]->value;
                }
            if (best == NULL)
                break;
            size_t used = strlen(out);
            (void)snprintf(out + used, sizeof out - used, "%s%s=%s", k ? ";" : "", best, val);
            last = best;
        }
        v1beta1__allocate_response__free_unpacked(r, NULL);
    }
    return status;
}

#define MIG1G2 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.18gb\":\"2\"}}}]"
#define MIG1G1 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.18gb\":1}}}]"

static void test_assign_carries_mig_instances_and_memory_shares(void **state)
{
    (void)state;
    struct gs_dp_assign *t = NULL;
    assert_int_equal(gs_dp_assign_new(&t), GS_OK);
    /* m1 (newer) asks two 1g.18gb instances, both on GPU 6 at starts 3 and 5; m2 (older by one
     * second) asks one, at start 0 of GPU 6; f is a memory fraction on GPU 1. */
    add(t,
        pod("m1", "2026-12-01T10:00:01Z", "Pending", MIG1G2,
            "{\"gpus\":[{\"index\":6,\"milli\":0,\"uuid\":\"GPU-6\",\"mig\":{\"profile\":"
            "\"1g.18gb\",\"start\":3}},{\"index\":6,\"milli\":0,\"uuid\":\"GPU-6\","
            "\"mig\":{\"profile\":\"1g.18gb\",\"start\":5}}]}"),
        NULL);
    add(t,
        pod("m2", "2026-12-01T10:00:00Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":6,\"milli\":0,\"mig\":{\"profile\":\"1g.18gb\","
            "\"start\":0}}]}"),
        NULL);
    add(t,
        pod("f", "2026-12-01T09:00:00Z", "Pending", GPU1,
            "{\"gpus\":[{\"index\":1,\"milli\":300,\"mem_mib\":20000}]}"),
        NULL);
    /* Entries whose share is wrong are refused with the member named. */
    add(t,
        pod("b1", "2026-12-01T08:00:00Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":6,\"mig\":{\"profile\":\"1g.18gb\",\"start\":8}}]}"),
        "gpus[0].mig.start is not a slot 0..7");
    add(t,
        pod("b2", "2026-12-01T08:00:00Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":6,\"mig\":{\"start\":1}}]}"),
        "gpus[0].mig.profile is not a profile name of 1..31 bytes");
    add(t,
        pod("b3", "2026-12-01T08:00:00Z", "Pending", GPU1,
            "{\"gpus\":[{\"index\":1,\"milli\":1001}]}"),
        "gpus[0].milli is not a count 0..1000");
    add(t,
        pod("b4", "2026-12-01T08:00:00Z", "Pending", GPU2,
            "{\"gpus\":[{\"index\":1,\"milli\":0,\"mem_mib\":512},{\"index\":2,\"milli\":0,"
            "\"mem_mib\":0}]}"),
        "gpus[1].mem_mib is not a positive count of MiB");
    assert_int_equal(gs_dp_assign_count(t), 3); /* m1, m2, f */

    struct gs_dp_claim cl;
    /* One instance: m2 (the only pod asking one; it is older anyway), start 0 of GPU 6. */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/m2");
    assert_int_equal(cl.n_gpus, 1);
    assert_int_equal(cl.gpu[0], 6);
    assert_string_equal(cl.mig_profile[0], "1g.18gb");
    assert_int_equal(cl.mig_start[0], 0);
    assert_int_equal(cl.milli[0], 0);
    /* Two: m1's two entries in the assignment's order, both on GPU 6. */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 2, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/m1");
    assert_int_equal(cl.gpu[0], 6);
    assert_int_equal(cl.gpu[1], 6);
    assert_int_equal(cl.mig_start[0], 3);
    assert_int_equal(cl.mig_start[1], 5);
    assert_string_equal(cl.uuid[1], "GPU-6");
    /* The fraction: its milli and memory; no MIG. */
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/gpu", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/f");
    assert_int_equal(cl.milli[0], 300);
    assert_int_equal(cl.mem_mib[0], 20000);
    assert_string_equal(cl.mig_profile[0], "");
    assert_int_equal(cl.mig_start[0], -1);
    /* Two pods asking one instance each: oldest first, the next after the first is handed out. */
    add(t,
        pod("m3", "2026-12-01T10:00:02Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":6,\"milli\":0,\"mig\":{\"profile\":\"1g.18gb\","
            "\"start\":6}}]}"),
        NULL);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/m2");
    assert_int_equal(gs_dp_assign_consume(t, "u-m2", 1, NULL), GS_OK);
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 1, &cl), GS_OK);
    assert_string_equal(cl.pod, "t/m3");
    assert_int_equal(cl.mig_start[0], 6);
    gs_dp_assign_free(t);
}

/* n H200s; GPU `mig_gpu` runs MIG with seven 1g.18gb devices "MIG-<g>-<s>" at starts 0..6. */
static void make_mig_node(struct gs_gpu_info *g, uint32_t n, uint32_t mig_gpu)
{
    dpfx_make_node(g, n, n, 0);
    struct gs_gpu_info *m = &g[mig_gpu];
    m->mig_capable = m->mig_enabled = true;
    m->mig_count = 7;
    for (uint32_t s = 0; s < 7; s++) {
        (void)snprintf(m->mig[s].profile, sizeof m->mig[s].profile, "1g.18gb");
        (void)snprintf(m->mig[s].uuid, sizeof m->mig[s].uuid, "MIG-%u-%u", (unsigned)mig_gpu,
                       (unsigned)s);
        m->mig[s].mem_mib = 16384;
        m->mig[s].has_start = true;
        m->mig[s].start_slot = s;
    }
}

static void mig_entry(struct gs_dp_claim *cl, uint32_t k, uint32_t gpu, int32_t start)
{
    cl->gpu[k] = gpu;
    (void)snprintf(cl->uuid[k], sizeof cl->uuid[k], "GPU-%u", (unsigned)gpu);
    (void)snprintf(cl->mig_profile[k], sizeof cl->mig_profile[k], "1g.18gb");
    cl->mig_start[k] = start;
}

static void test_preferred_and_allocate_follow_the_claimed_mig_instances(void **state)
{
    (void)state;
    /* GPU 0 whole, GPU 1 MIG: 1g.18gb at starts 0..6 under nvidia.com/mig-1g.18gb (mixed), the
     * resources sorted by name: nvidia.com/gpu is 0, nvidia.com/mig-1g.18gb 1. */
    struct gs_gpu_info g[2];
    make_mig_node(g, 2, 1);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_resource(&m, "nvidia.com/mig-1g.18gb"), 1);
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct hook k;
    memset(&k, 0, sizeof k);
    k.resource = "nvidia.com/mig-1g.18gb";
    k.have = true;
    (void)snprintf(k.claim.pod, sizeof k.claim.pod, "t/p");
    (void)snprintf(k.claim.uid, sizeof k.claim.uid, "u-p");
    k.claim.n_gpus = 1;
    mig_entry(&k.claim, 0, 1, 3);
    struct gs_dp_view v = {&c, &m, 1, h, hook_claim, hook_outcome, &k};
    const char *all[] = {"MIG-1-0", "MIG-1-1", "MIG-1-2", "MIG-1-3",
                         "MIG-1-4", "MIG-1-5", "MIG-1-6"};

    /* Without a claim the packing takes the first device of the GPU (MIG-1-0)... */
    k.have = false;
    assert_string_equal(dpfx_prefer(&v, all, 7, NULL, 0, 1), "MIG-1-0");
    /* ...with one, the instance at start 3, not another 1g.18gb of the same GPU. */
    k.have = true;
    assert_string_equal(dpfx_prefer(&v, all, 7, NULL, 0, 1), "MIG-1-3");
    assert_true(k.honoured);
    /* Start 3 held by another pod (not offered): the packing's choice, and why. */
    const char *no3[] = {"MIG-1-0", "MIG-1-1", "MIG-1-2", "MIG-1-4", "MIG-1-5", "MIG-1-6"};
    assert_string_equal(dpfx_prefer(&v, no3, 6, NULL, 0, 1), "MIG-1-0");
    assert_false(k.honoured);
    assert_string_equal(k.why,
                        "assigned MIG instance 1g.18gb at start 3 of GPU 1 (GPU-1) is not offered");
    /* A start the node has no such instance at (its layout changed under the scheduler). */
    k.claim.mig_start[0] = 7;
    assert_string_equal(dpfx_prefer(&v, all, 7, NULL, 0, 1), "MIG-1-0");
    assert_string_equal(k.why, "assigned MIG instance 1g.18gb at start 7 of GPU 1 (GPU-1) is not "
                               "a device of this resource here");
    /* Two instances on one card: starts 5 and 2, in the assignment's order. */
    k.claim.n_gpus = 2;
    mig_entry(&k.claim, 0, 1, 5);
    mig_entry(&k.claim, 1, 1, 2);
    assert_string_equal(dpfx_prefer(&v, all, 7, NULL, 0, 2), "MIG-1-5,MIG-1-2");
    assert_true(k.honoured);
    /* must_include one of them: it first, then the other. */
    const char *must2[] = {"MIG-1-2"};
    assert_string_equal(dpfx_prefer(&v, all, 7, must2, 1, 2), "MIG-1-2,MIG-1-5");
    assert_true(k.honoured);

    /* Allocate of both, in any order: as assigned; the environment names both MIG devices and
     * sets no limit (a MIG instance is its own isolation). */
    const char *env = NULL;
    const char *both[] = {"MIG-1-2", "MIG-1-5"};
    assert_int_equal(allocate_env(&v, both, 2, &env), 0);
    assert_true(k.allocate);
    assert_true(k.honoured);
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=MIG-1-2,MIG-1-5");
    /* Another instance of the same profile on the same GPU is a mismatch, told with the
     * instances on both sides (sorted by GPU and start); kubelet's choice stands. */
    const char *other[] = {"MIG-1-0", "MIG-1-5"};
    assert_int_equal(allocate_env(&v, other, 2, &env), 0);
    assert_false(k.honoured);
    assert_string_equal(k.why, "kubelet allocated MIG instances 1:1g.18gb@0,1:1g.18gb@5, the "
                               "scheduler assigned 1:1g.18gb@2,1:1g.18gb@5");
    assert_string_equal(k.ids, "MIG-1-0,MIG-1-5");
    gs_dp_model_fini(&m);
}

static void test_allocate_passes_the_claimed_memory_and_compute_shares(void **state)
{
    (void)state;
    struct gs_gpu_info g[4];
    dpfx_make_node(g, 4, 4, 0);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 4, &m, NULL, 0), GS_OK);
    enum gs_health_state h[4] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY,
                                 GS_HEALTH_HEALTHY};
    struct hook k;
    memset(&k, 0, sizeof k);
    k.have = true;
    (void)snprintf(k.claim.pod, sizeof k.claim.pod, "t/f");
    (void)snprintf(k.claim.uid, sizeof k.claim.uid, "u-f");
    struct gs_dp_view v = {&c, &m, 0, h, hook_claim, hook_outcome, &k};
    const char *env = NULL;

    /* No claim: no limits. */
    k.have = false;
    const char *g0[] = {"GPU-0"};
    assert_int_equal(allocate_env(&v, g0, 1, &env), 0);
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=GPU-0");
    k.have = true;
    /* 300 milli and 20,000 MiB on GPU 0: the memory limit of visible device 0 in MiB with
     * HAMi's "m" suffix, and 300 / 10 = 30 % of the SMs. */
    k.claim.n_gpus = 1;
    k.claim.gpu[0] = 0;
    k.claim.milli[0] = 300;
    k.claim.mem_mib[0] = 20000;
    assert_int_equal(allocate_env(&v, g0, 1, &env), 0);
    assert_true(k.honoured);
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;CUDA_DEVICE_SM_LIMIT=30;"
                             "NVIDIA_VISIBLE_DEVICES=GPU-0");
    /* Kubelet gave GPU 2 instead: a mismatch, and the pod's share goes with the GPU it got. */
    const char *g2[] = {"GPU-2"};
    assert_int_equal(allocate_env(&v, g2, 1, &env), 0);
    assert_false(k.honoured);
    assert_string_equal(k.why, "kubelet allocated GPUs 2, the scheduler assigned 0");
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;CUDA_DEVICE_SM_LIMIT=30;"
                             "NVIDIA_VISIBLE_DEVICES=GPU-2");
    /* A memory-only share (milli 0): no SM limit. */
    k.claim.milli[0] = 0;
    assert_int_equal(allocate_env(&v, g0, 1, &env), 0);
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;NVIDIA_VISIBLE_DEVICES=GPU-0");
    /* The same pod on two GPUs, assigned 3 (8,000 MiB, memory only) then 1 (12,000 MiB, 250
     * milli); kubelet lists GPU-1 first, so visible device 0 is GPU 1 and gets GPU 1's entry:
     * LIMIT_0 = 12000m, LIMIT_1 = 8000m; SM limit the smallest compute share, 250 / 10 = 25. */
    k.claim.n_gpus = 2;
    k.claim.gpu[0] = 3;
    k.claim.milli[0] = 0;
    k.claim.mem_mib[0] = 8000;
    k.claim.gpu[1] = 1;
    k.claim.milli[1] = 250;
    k.claim.mem_mib[1] = 12000;
    const char *g13[] = {"GPU-1", "GPU-3"};
    assert_int_equal(allocate_env(&v, g13, 2, &env), 0);
    assert_true(k.honoured);
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=12000m;CUDA_DEVICE_MEMORY_LIMIT_1=8000m;"
                             "CUDA_DEVICE_SM_LIMIT=25;NVIDIA_VISIBLE_DEVICES=GPU-1,GPU-3");
    /* A whole-GPU claim (1000 milli, no memory) adds nothing; 5 milli is at least 1 %. */
    k.claim.n_gpus = 1;
    k.claim.gpu[0] = 0;
    k.claim.milli[0] = 1000;
    k.claim.mem_mib[0] = 0;
    assert_int_equal(allocate_env(&v, g0, 1, &env), 0);
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=GPU-0");
    k.claim.milli[0] = 5;
    assert_int_equal(allocate_env(&v, g0, 1, &env), 0);
    assert_string_equal(env, "CUDA_DEVICE_SM_LIMIT=1;NVIDIA_VISIBLE_DEVICES=GPU-0");
    gs_dp_model_fini(&m);
}

/* ---- gpusched.io/gpu-slice -------------------------------------------------------------- */

static void test_inventory_names_fractions_gpus(void **state)
{
    (void)state;
    /* Two GPUs, NUMA 0 and 1, no NVLink; GPU 1 in fractions (4 slices), GPU 0 whole. */
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nsharing: {fractions: {slicesPerGpu: 4, devices: [1]}}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    char *text = NULL;
    assert_int_equal(gs_dp_inventory_json(&m, h, &text), GS_OK);
    /* Mode fractions, replicas 1 (slices are not time-slicing replicas), its one resource the
     * slice resource. */
    assert_string_equal(
        text,
        "{\"gpus\":["
        "{\"health\":\"Healthy\",\"index\":0,\"mem_mib\":143771,\"mig\":[],\"mode\":\"whole\","
        "\"model\":\"NVIDIA H200\",\"numa_node\":0,\"nvlink_peers\":[],\"replicas\":1,"
        "\"resources\":[\"nvidia.com/gpu\"],\"uuid\":\"GPU-0\"},"
        "{\"health\":\"Healthy\",\"index\":1,\"mem_mib\":143771,\"mig\":[],"
        "\"mode\":\"fractions\",\"model\":\"NVIDIA H200\",\"numa_node\":1,\"nvlink_peers\":[],"
        "\"replicas\":1,\"resources\":[\"gpusched.io/gpu-slice\"],\"uuid\":\"GPU-1\"}],"
        "\"version\":1}");
    free(text);
    gs_dp_model_fini(&m);
}

static const char *annotation(const V1beta1__ContainerAllocateResponse *c, const char *key)
{
    for (size_t i = 0; i < c->n_annotations; i++)
        if (strcmp(c->annotations[i]->key, key) == 0)
            return c->annotations[i]->value;
    return NULL;
}

static void test_slices_follow_the_assigned_gpu(void **state)
{
    (void)state;
    /* Two GPUs in fractions, 10 slices each: gpusched.io/gpu-slice is the only resource (0).
     * Pod p was assigned 250 milli and 20,000 MiB on GPU 1 and asks one slice. */
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 2, 0);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nsharing: {fractions: {}}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_resource(&m, "gpusched.io/gpu-slice"), 0);
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct hook k;
    memset(&k, 0, sizeof k);
    k.resource = "gpusched.io/gpu-slice";
    k.have = true;
    (void)snprintf(k.claim.pod, sizeof k.claim.pod, "t/p");
    (void)snprintf(k.claim.uid, sizeof k.claim.uid, "u-p");
    k.claim.n_gpus = 1;
    k.claim.gpu[0] = 1;
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-1");
    k.claim.milli[0] = 250;
    k.claim.mem_mib[0] = 20000;
    struct gs_dp_view v = {&c, &m, 0, h, hook_claim, hook_outcome, &k};
    const char *all[20];
    char idbuf[20][GS_DP_DEVICE_ID_LEN];
    for (uint32_t i = 0; i < 20; i++) {
        (void)snprintf(idbuf[i], sizeof idbuf[i], "GPU-%u::slice-%u", (unsigned)(i / 10),
                       (unsigned)(i % 10));
        all[i] = idbuf[i];
    }

    /* GetPreferredAllocation. No claim: the packing's lowest unit, GPU 0's first slice. */
    k.have = false;
    assert_string_equal(dpfx_prefer(&v, all, 20, NULL, 0, 1), "GPU-0::slice-0");
    /* With the claim: the first offered slice of GPU 1. */
    k.have = true;
    assert_string_equal(dpfx_prefer(&v, all, 20, NULL, 0, 1), "GPU-1::slice-0");
    assert_true(k.honoured);
    assert_false(k.allocate);
    /* Other pods hold GPU 1's slices but 7 (kubelet offers 0..9 of GPU 0 and slice-7). */
    const char *seven[] = {all[0], all[1], all[2], all[3], all[4], all[5],
                           all[6], all[7], all[8], all[9], all[17]};
    assert_string_equal(dpfx_prefer(&v, seven, 11, NULL, 0, 1), "GPU-1::slice-7");
    assert_true(k.honoured);
    /* None of GPU 1 offered: the packing's choice, and why. */
    assert_string_equal(dpfx_prefer(&v, all, 10, NULL, 0, 1), "GPU-0::slice-0");
    assert_false(k.honoured);
    assert_string_equal(k.why, "no device of assigned GPU 1 (GPU-1) is offered");
    /* GPU 1 Unhealthy: its slices are never proposed, the claim not followed. */
    h[1] = GS_HEALTH_UNHEALTHY;
    assert_string_equal(dpfx_prefer(&v, all, 20, NULL, 0, 1), "GPU-0::slice-0");
    assert_false(k.honoured);
    assert_string_equal(k.why, "assigned GPU 1 (GPU-1) is Unhealthy");
    h[1] = GS_HEALTH_HEALTHY;

    /* Allocate of a slice of GPU 1: as assigned; 250 milli / 10 = 25 % of the SMs and the
     * memory limit of visible device 0. */
    int status = -1;
    const char *s13[] = {"GPU-1::slice-3"};
    V1beta1__AllocateResponse *r = dpfx_allocate(&v, s13, 1, &status);
    assert_int_equal(status, 0);
    assert_true(k.allocate && k.honoured && !k.gave);
    const char *env = NULL;
    assert_int_equal(allocate_env(&v, s13, 1, &env), 0);
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;CUDA_DEVICE_SM_LIMIT=25;"
                             "NVIDIA_VISIBLE_DEVICES=GPU-1");
    v1beta1__allocate_response__free_unpacked(r, NULL);

    /* Kubelet handed a slice of GPU 0: the container gets GPU 1 all the same (device node
     * /dev/nvidia1, the UUID in gpusched.io/gpus), kubelet's ID stays in gpusched.io/devices,
     * and the mismatch is told with gave_assigned. */
    const char *s03[] = {"GPU-0::slice-3"};
    r = dpfx_allocate(&v, s03, 1, &status);
    assert_int_equal(status, 0);
    const V1beta1__ContainerAllocateResponse *cr = r->container_responses[0];
    assert_false(k.honoured);
    assert_true(k.gave);
    assert_string_equal(k.why, "kubelet allocated GPUs 0, the scheduler assigned 1");
    assert_string_equal(k.ids, "GPU-0::slice-3");
    assert_int_equal(cr->n_devices, 4); /* /dev/nvidia1 and the three control nodes */
    assert_string_equal(cr->devices[0]->host_path, "/dev/nvidia1");
    assert_string_equal(annotation(cr, "gpusched.io/gpus"), "GPU-1");
    assert_string_equal(annotation(cr, "gpusched.io/devices"), "GPU-0::slice-3");
    assert_string_equal(annotation(cr, "gpusched.io/resource"), "gpusched.io/gpu-slice");
    v1beta1__allocate_response__free_unpacked(r, NULL);
    assert_int_equal(allocate_env(&v, s03, 1, &env), 0);
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;CUDA_DEVICE_SM_LIMIT=25;"
                             "NVIDIA_VISIBLE_DEVICES=GPU-1");

    /* Two slices, one of each GPU, for a claim of two entries both on GPU 1 (500 milli each):
     * the container gets GPU 1 once. */
    k.claim.n_gpus = 2;
    k.claim.gpu[1] = 1;
    (void)snprintf(k.claim.uuid[1], sizeof k.claim.uuid[1], "GPU-1");
    k.claim.milli[0] = k.claim.milli[1] = 500;
    k.claim.mem_mib[0] = k.claim.mem_mib[1] = 0;
    const char *both[] = {"GPU-0::slice-0", "GPU-1::slice-0"};
    assert_int_equal(allocate_env(&v, both, 2, &env), 0);
    assert_true(k.gave);
    assert_string_equal(k.why, "kubelet allocated GPUs 0,1, the scheduler assigned 1,1");
    assert_string_equal(env, "CUDA_DEVICE_SM_LIMIT=50;NVIDIA_VISIBLE_DEVICES=GPU-1");
    k.claim.n_gpus = 1;
    k.claim.milli[0] = 250;
    k.claim.mem_mib[0] = 20000;

    /* The assigned GPU cannot be given (Unhealthy now; another UUID here): kubelet's GPU, and
     * why; the pod's share goes with the GPU it got. */
    h[1] = GS_HEALTH_UNHEALTHY;
    assert_int_equal(allocate_env(&v, s03, 1, &env), 0);
    assert_false(k.honoured || k.gave);
    assert_string_equal(k.why, "kubelet allocated GPUs 0, the scheduler assigned 1; the assigned "
                               "GPUs cannot be given: assigned GPU 1 (GPU-1) is Unhealthy");
    assert_string_equal(env, "CUDA_DEVICE_MEMORY_LIMIT_0=20000m;CUDA_DEVICE_SM_LIMIT=25;"
                             "NVIDIA_VISIBLE_DEVICES=GPU-0");
    h[1] = GS_HEALTH_HEALTHY;
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-elsewhere");
    assert_int_equal(allocate_env(&v, s03, 1, &env), 0);
    assert_false(k.gave);
    assert_non_null(strstr(k.why, "cannot be given: assigned GPU 1 is GPU-elsewhere on the "
                                  "scheduler's side but GPU-1 here"));
    assert_non_null(strstr(env, "NVIDIA_VISIBLE_DEVICES=GPU-0"));
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-1");

    /* No pod's assignment asks for the slice: the GPU of the slice kubelet handed, told with
     * no claim (the agent logs it as a warning), no limits. */
    k.have = false;
    k.calls = 0;
    assert_int_equal(allocate_env(&v, s03, 1, &env), 0);
    assert_int_equal(k.calls, 1);
    assert_true(k.no_claim && k.allocate && !k.honoured && !k.gave);
    assert_string_equal(k.why,
                        "no pending pod bound here has an assignment for 1 gpusched.io/gpu-slice");
    assert_string_equal(k.ids, "GPU-0::slice-3");
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=GPU-0");
    gs_dp_model_fini(&m);
}

static void test_slices_whose_assigned_gpu_has_none_follow_kubelet(void **state)
{
    (void)state;
    /* GPU 0 in fractions, GPU 1 whole: an assignment naming GPU 1 for a slice (a stale
     * inventory on the scheduler's side) cannot be given by the slice resource. */
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 2, 0);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nsharing: {fractions: {slicesPerGpu: 2, devices: [0]}}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct hook k;
    memset(&k, 0, sizeof k);
    k.resource = "gpusched.io/gpu-slice";
    k.have = true;
    (void)snprintf(k.claim.pod, sizeof k.claim.pod, "t/q");
    k.claim.n_gpus = 1;
    k.claim.gpu[0] = 1;
    k.claim.milli[0] = 400;
    struct gs_dp_view v = {&c, &m, 0, h, hook_claim, hook_outcome, &k};
    const char *env = NULL;
    const char *s0[] = {"GPU-0::slice-1"};
    assert_int_equal(allocate_env(&v, s0, 1, &env), 0);
    assert_false(k.honoured || k.gave);
    assert_string_equal(k.why, "kubelet allocated GPUs 0, the scheduler assigned 1; the assigned "
                               "GPUs cannot be given: assigned GPU 1 (GPU-1) has no "
                               "gpusched.io/gpu-slice device here");
    assert_string_equal(env, "CUDA_DEVICE_SM_LIMIT=40;NVIDIA_VISIBLE_DEVICES=GPU-0");
    /* Whole GPUs are never redirected: kubelet's choice stands (resource 1, nvidia.com/gpu). */
    k.resource = "nvidia.com/gpu";
    k.claim.gpu[0] = 0;
    v.resource = 1;
    const char *w1[] = {"GPU-1"};
    assert_int_equal(allocate_env(&v, w1, 1, &env), 0);
    assert_false(k.honoured || k.gave);
    assert_string_equal(k.why, "kubelet allocated GPUs 1, the scheduler assigned 0");
    assert_string_equal(env, "CUDA_DEVICE_SM_LIMIT=40;NVIDIA_VISIBLE_DEVICES=GPU-1");
    /* No claim for a whole GPU: nothing told (only slices warn). */
    k.have = false;
    k.calls = 0;
    assert_int_equal(allocate_env(&v, w1, 1, &env), 0);
    assert_int_equal(k.calls, 0);
    gs_dp_model_fini(&m);
}

static void test_mig_start_null_matches_any_instance_of_the_profile(void **state)
{
    (void)state;
    /* Both GPUs MIG, seven 1g.18gb each at starts 0..6 ("MIG-<g>-<s>"). The assignment, read
     * from an annotation whose start is null, names GPU 1 and the profile only. */
    struct gs_gpu_info g[2];
    make_mig_node(g, 2, 1);
    g[0].mig_capable = g[0].mig_enabled = true;
    g[0].mig_count = 7;
    for (uint32_t s = 0; s < 7; s++) {
        g[0].mig[s] = g[1].mig[s];
        (void)snprintf(g[0].mig[s].uuid, sizeof g[0].mig[s].uuid, "MIG-0-%u", (unsigned)s);
    }
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 1);

    struct gs_dp_assign *t = NULL;
    assert_int_equal(gs_dp_assign_new(&t), GS_OK);
    add(t,
        pod("n", "2026-12-01T10:00:00Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":1,\"uuid\":\"GPU-1\",\"milli\":0,"
            "\"mig\":{\"profile\":\"1g.18gb\",\"start\":null}}]}"),
        NULL);
    /* A start out of 0..7 is refused, naming the member (the pod is not claimable). */
    add(t,
        pod("x", "2026-12-01T09:00:00Z", "Pending", MIG1G1,
            "{\"gpus\":[{\"index\":1,\"milli\":0,\"mig\":{\"profile\":\"1g.18gb\",\"start\":8}}]}"),
        "gpus[0].mig.start is not a slot 0..7 or null");
    struct hook k;
    memset(&k, 0, sizeof k);
    k.resource = "nvidia.com/mig-1g.18gb";
    k.have = true;
    assert_int_equal(gs_dp_assign_match(t, "nvidia.com/mig-1g.18gb", 1, &k.claim), GS_OK);
    assert_string_equal(k.claim.pod, "t/n");
    assert_int_equal(k.claim.gpu[0], 1);
    assert_int_equal(k.claim.mig_start[0], -1);
    assert_string_equal(k.claim.mig_profile[0], "1g.18gb");
    gs_dp_assign_free(t);

    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct gs_dp_view v = {&c, &m, 0, h, hook_claim, hook_outcome, &k};
    const char *all[] = {"MIG-0-0", "MIG-0-1", "MIG-0-2", "MIG-0-3", "MIG-0-4",
                         "MIG-0-5", "MIG-0-6", "MIG-1-0", "MIG-1-1", "MIG-1-2",
                         "MIG-1-3", "MIG-1-4", "MIG-1-5", "MIG-1-6"};
    /* No claim: the packing's lowest GPU, MIG-0-0; with it, GPU 1's first offered instance. */
    k.have = false;
    assert_string_equal(dpfx_prefer(&v, all, 14, NULL, 0, 1), "MIG-0-0");
    k.have = true;
    assert_string_equal(dpfx_prefer(&v, all, 14, NULL, 0, 1), "MIG-1-0");
    assert_true(k.honoured);
    /* Starts 0..3 of GPU 1 held: start 4 will do. */
    const char *late[] = {"MIG-0-0", "MIG-1-4", "MIG-1-5"};
    assert_string_equal(dpfx_prefer(&v, late, 3, NULL, 0, 1), "MIG-1-4");
    assert_true(k.honoured);
    /* None of GPU 1 offered: the packing's choice, the reason naming no start. */
    assert_string_equal(dpfx_prefer(&v, all, 7, NULL, 0, 1), "MIG-0-0");
    assert_false(k.honoured);
    assert_string_equal(k.why, "assigned MIG instance 1g.18gb at any start of GPU 1 (GPU-1) is "
                               "not offered");
    /* Allocate of any instance on GPU 1: as assigned; of one on GPU 0: a mismatch, the
     * assigned side named "@any". */
    const char *env = NULL;
    const char *i15[] = {"MIG-1-5"};
    assert_int_equal(allocate_env(&v, i15, 1, &env), 0);
    assert_true(k.honoured);
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=MIG-1-5");
    const char *i02[] = {"MIG-0-2"};
    assert_int_equal(allocate_env(&v, i02, 1, &env), 0);
    assert_false(k.honoured || k.gave);
    assert_string_equal(k.why, "kubelet allocated MIG instances 0:1g.18gb@2, the scheduler "
                               "assigned 1:1g.18gb@any");
    assert_string_equal(env, "NVIDIA_VISIBLE_DEVICES=MIG-0-2");
    /* Two entries of start null on GPU 1 take two instances; one at start 3 and one null, the
     * null one any but 3. */
    k.claim.n_gpus = 2;
    mig_entry(&k.claim, 0, 1, -1);
    mig_entry(&k.claim, 1, 1, 3);
    assert_string_equal(dpfx_prefer(&v, all, 14, NULL, 0, 2), "MIG-1-0,MIG-1-3");
    assert_true(k.honoured);
    const char *i16_13[] = {"MIG-1-6", "MIG-1-3"};
    assert_int_equal(allocate_env(&v, i16_13, 2, &env), 0);
    assert_true(k.honoured);
    /* Handed the other way round: start 3 answers the entry of start 3, not the null one. */
    const char *i13_16[] = {"MIG-1-3", "MIG-1-6"};
    assert_int_equal(allocate_env(&v, i13_16, 2, &env), 0);
    assert_true(k.honoured);
    /* Two of another start than 3: a mismatch. The null entry took MIG-1-4 (key 16 + 4 + 1),
     * start 3 is key 16 + 3 + 1, so the assigned side sorts "1:1g.18gb@3,1:1g.18gb@any". */
    const char *i14_16[] = {"MIG-1-4", "MIG-1-6"};
    assert_int_equal(allocate_env(&v, i14_16, 2, &env), 0);
    assert_false(k.honoured);
    assert_string_equal(k.why, "kubelet allocated MIG instances 1:1g.18gb@4,1:1g.18gb@6, the "
                               "scheduler assigned 1:1g.18gb@3,1:1g.18gb@any");
    gs_dp_model_fini(&m);
}

static void test_preferred_follows_the_claim_only_when_offered_healthy_and_same(void **state)
{
    (void)state;
    /* 8 GPUs, NVLink quads {0-3} {4-7}, NUMA pairs: the topology choice for 2 is GPU-0,GPU-1
     * (test_devplugin_unit.c). The scheduler assigned GPUs 5 and 2, in that order. */
    struct gs_gpu_info g[8];
    dpfx_make_node(g, 8, 2, 4);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    enum gs_health_state h[8] = {GS_HEALTH_HEALTHY};
    struct hook k;
    memset(&k, 0, sizeof k);
    k.have = true;
    (void)snprintf(k.claim.pod, sizeof k.claim.pod, "t/p");
    (void)snprintf(k.claim.uid, sizeof k.claim.uid, "u-p");
    k.claim.n_gpus = 2;
    k.claim.gpu[0] = 5;
    k.claim.gpu[1] = 2;
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-5");
    struct gs_dp_view v = {&c, &m, 0, h, hook_claim, hook_outcome, &k};
    const char *all[] = {"GPU-7", "GPU-6", "GPU-5", "GPU-4", "GPU-3", "GPU-2", "GPU-1", "GPU-0"};

    assert_string_equal(dpfx_prefer(&v, all, 8, NULL, 0, 2), "GPU-5,GPU-2");
    assert_int_equal(k.calls, 1);
    assert_true(k.honoured);
    assert_false(k.allocate);
    assert_string_equal(k.ids, "GPU-5,GPU-2");
    /* must_include among the claimed GPUs comes first, the rest follows. */
    const char *must2[] = {"GPU-2"};
    assert_string_equal(dpfx_prefer(&v, all, 8, must2, 1, 2), "GPU-2,GPU-5");
    assert_true(k.honoured);
    /* must_include outside them: kubelet insists, so the topology choice with it. */
    const char *must7[] = {"GPU-7"};
    assert_string_equal(dpfx_prefer(&v, all, 8, must7, 1, 2), "GPU-7,GPU-6");
    assert_false(k.honoured);
    assert_string_equal(k.why, "kubelet insists on GPU-7, not of the assigned GPUs");
    /* GPU 5 not offered (kubelet leaves out what it gave others or holds Unhealthy): the
     * topology choice, a pair of the broken quad {4,6,7} on one NUMA node, so {0-3} stays
     * whole. */
    const char *no5[] = {"GPU-7", "GPU-6", "GPU-4", "GPU-3", "GPU-2", "GPU-1", "GPU-0"};
    assert_string_equal(dpfx_prefer(&v, no5, 7, NULL, 0, 2), "GPU-6,GPU-7");
    assert_string_equal(k.why, "no device of assigned GPU 5 (GPU-5) is offered");
    /* GPU 5 Unhealthy on our side although offered: never proposed, so the topology choice
     * is the one without GPU 5 above (before issue 9 it was GPU-0,GPU-1 over all eight). */
    h[5] = GS_HEALTH_UNHEALTHY;
    assert_string_equal(dpfx_prefer(&v, all, 8, NULL, 0, 2), "GPU-6,GPU-7");
    assert_string_equal(k.why, "assigned GPU 5 (GPU-5) is Unhealthy");
    h[5] = GS_HEALTH_HEALTHY;
    /* The scheduler's UUID is another GPU's: never follow an index alone then. */
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-other");
    assert_string_equal(dpfx_prefer(&v, all, 8, NULL, 0, 2), "GPU-0,GPU-1");
    assert_string_equal(k.why,
                        "assigned GPU 5 is GPU-other on the scheduler's side but GPU-5 here");
    (void)snprintf(k.claim.uuid[0], sizeof k.claim.uuid[0], "GPU-5");
    /* No claim for 3 GPUs: today's choice, nothing told. */
    int calls = k.calls;
    assert_string_equal(dpfx_prefer(&v, all, 8, NULL, 0, 3), "GPU-0,GPU-1,GPU-2");
    assert_int_equal(k.calls, calls);

    /* Allocate of the assigned GPUs, in any order: as assigned. */
    const char *same[] = {"GPU-2", "GPU-5"};
    assert_int_equal(allocate(&v, same, 2), 0);
    assert_true(k.allocate);
    assert_true(k.honoured);
    assert_string_equal(k.ids, "GPU-2,GPU-5");
    /* Of others: kubelet decides (status OK), the mismatch is told. */
    const char *other[] = {"GPU-1", "GPU-0"};
    assert_int_equal(allocate(&v, other, 2), 0);
    assert_false(k.honoured);
    assert_string_equal(k.why, "kubelet allocated GPUs 0,1, the scheduler assigned 2,5");
    assert_string_equal(k.ids, "GPU-1,GPU-0");
    /* A refused Allocate (Unhealthy) tells nothing: nothing was allocated. */
    calls = k.calls;
    h[2] = GS_HEALTH_UNHEALTHY;
    assert_int_equal(allocate(&v, same, 2), 9); /* FAILED_PRECONDITION */
    assert_int_equal(k.calls, calls);
    gs_dp_model_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory_names_modes_mig_instances_and_health),
        cmocka_unit_test(test_inventory_of_a_gpu_lost_at_start_keeps_the_schema),
        cmocka_unit_test(test_assign_takes_oldest_pending_pod_of_that_resource_and_count),
        cmocka_unit_test(test_preferred_follows_the_claim_only_when_offered_healthy_and_same),
        cmocka_unit_test(test_assign_carries_mig_instances_and_memory_shares),
        cmocka_unit_test(test_preferred_and_allocate_follow_the_claimed_mig_instances),
        cmocka_unit_test(test_allocate_passes_the_claimed_memory_and_compute_shares),
        cmocka_unit_test(test_inventory_names_fractions_gpus),
        cmocka_unit_test(test_slices_follow_the_assigned_gpu),
        cmocka_unit_test(test_slices_whose_assigned_gpu_has_none_follow_kubelet),
        cmocka_unit_test(test_mig_start_null_matches_any_instance_of_the_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
