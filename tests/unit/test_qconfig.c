/*
 * Tests of the queue configuration loader (include/gpusched/qconfig.h): the bundled example
 * parsed, applied to an engine and read back; quantities in internal units; weights and min
 * run times reaching the engine's behaviour; pod assignment by every kind of rule, including
 * the stability and weighted split of the name hash; and every error with the exact line,
 * column and field it must name. The tests run under ASan, which catches a leak on any error
 * path.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, close, unlink */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/qconfig.h"
#include "gpusched/tenant.h"
#include "gpusched/trace.h"

/* Lines 1 and 2 of every inline configuration. */
#define HDR "apiVersion: gpusched.io/v1\nkind: QueueConfig\n"
/* Lines 3 and 4: one leaf queue `a`. */
#define QA "queues:\n  - name: a\n"

/* ---- helpers ---------------------------------------------------------------------------- */

static struct gs_qconfig *parse_ok(const char *text)
{
    struct gs_qconfig *qc = NULL;
    struct gs_diag d;
    int rc = gs_qconfig_parse(text, strlen(text), "t.yaml", &qc, &d);
    if (rc != GS_OK) {
        char msg[700];
        gs_diag_format(&d, msg, sizeof msg);
        fail_msg("parse failed (%s): %s\ninput:\n%s", gs_errname(rc), msg, text);
    }
    assert_non_null(qc);
    return qc;
}

static void check_diag(const struct gs_diag *d, const char *input, uint64_t line, uint32_t column,
                       const char *field, const char *msg_part)
{
    if (d->line != line || d->column != column || strcmp(d->field, field) != 0 ||
        strstr(d->msg, msg_part) == NULL) {
        char text[700];
        gs_diag_format(d, text, sizeof text);
        fail_msg("input:\n%.600s\ngot:  %s\nwant: line %llu col %u field '%s' msg ~ '%s'", input,
                 text, (unsigned long long)line, column, field, msg_part);
    }
}

static void parse_fails(const char *text, size_t len, int rc_want, uint64_t line, uint32_t column,
                        const char *field, const char *msg_part)
{
    struct gs_qconfig *qc = (struct gs_qconfig *)1;
    struct gs_diag d;
    int rc = gs_qconfig_parse(text, len, "t.yaml", &qc, &d);
    if (rc != rc_want) {
        char msg[700];
        gs_diag_format(&d, msg, sizeof msg);
        fail_msg("want %s, got %s (%s)\ninput:\n%.600s", gs_errname(rc_want), gs_errname(rc), msg,
                 text);
    }
    assert_null(qc);
    assert_string_equal(d.file, "t.yaml");
    check_diag(&d, text, line, column, field, msg_part);
}

/* An engine over a one-node cluster. */
struct world {
    struct gs_cluster *c;
    struct gs_engine *e;
};

static void world_init(struct world *w, uint32_t gpus, bool preemption)
{
    struct gs_node_spec n = {.name = "n0",
                             .cpu_milli = 64000,
                             .mem_mib = 1 << 20,
                             .pods_max = 110,
                             .gpu_count = gpus,
                             .gpu_model = "A100"};
    struct gs_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = "bestfit";
    cfg.preemption = preemption;
    assert_int_equal(gs_cluster_new(&w->c), GS_OK);
    assert_int_equal(gs_cluster_add_node(w->c, &n, NULL), GS_OK);
    assert_int_equal(gs_engine_new(w->c, &cfg, &w->e), GS_OK);
}

static void world_fini(struct world *w)
{
    gs_engine_free(w->e);
    gs_cluster_free(w->c);
}

static void apply_ok(const struct gs_qconfig *qc, struct world *w)
{
    struct gs_diag d;
    int rc = gs_qconfig_apply(qc, w->e, &d);
    if (rc != GS_OK) {
        char msg[700];
        gs_diag_format(&d, msg, sizeof msg);
        fail_msg("apply failed (%s): %s", gs_errname(rc), msg);
    }
}

static struct gs_queue_info queue_info(const struct world *w, const char *name)
{
    struct gs_queue_info in;
    int id = gs_engine_find_queue(w->e, name);
    if (id < 0)
        fail_msg("no queue '%s' in the engine", name);
    assert_int_equal(gs_engine_queue_info(w->e, (uint32_t)id, &in), GS_OK);
    return in;
}

static const char *parent_name(const struct world *w, const struct gs_queue_info *in)
{
    struct gs_queue_info p;
    assert_int_equal(gs_engine_queue_info(w->e, in->parent, &p), GS_OK);
    return p.name;
}

static void check_class(const struct world *w, const char *name, int32_t value, bool preemptible)
{
    int id = gs_engine_find_priority_class(w->e, name);
    int32_t v = 0;
    bool p = !preemptible;
    if (id < 0)
        fail_msg("no PriorityClass '%s' in the engine", name);
    assert_true(gs_engine_priority_class(w->e, (uint32_t)id, &v, &p));
    assert_int_equal(v, value);
    assert_int_equal(p, preemptible);
}

static struct gs_trace_pod pod(const char *name, const char *qos, uint32_t num_gpu,
                               const char *gpu_spec)
{
    struct gs_trace_pod p;
    memset(&p, 0, sizeof p);
    p.name = (char *)name;
    p.qos = (char *)qos;
    p.num_gpu = num_gpu;
    p.gpu_milli = num_gpu ? 1000 : 0;
    p.gpu_spec = (char *)gpu_spec;
    p.phase = (char *)"";
    p.creation_time_s = p.deletion_time_s = p.scheduled_time_s = -1;
    return p;
}

static void assign_is(const struct gs_qconfig *qc, struct gs_trace_pod p, const char *queue,
                      const char *pclass)
{
    struct gs_qconfig_assignment a;
    assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_OK);
    assert_string_equal(a.queue, queue);
    assert_string_equal(a.priority_class, pclass);
}

static char *example_path(void)
{
    const char *root = getenv("GS_SOURCE_DIR");
    static char path[4096];
    if (root == NULL)
        root = ".";
    (void)snprintf(path, sizeof path, "%s/data/alibaba-gpu-v2023/queues.yaml", root);
    return path;
}

static struct gs_qconfig *load_example(void)
{
    struct gs_qconfig *qc = NULL;
    struct gs_diag d;
    int rc = gs_qconfig_load(example_path(), &qc, &d);
    if (rc != GS_OK) {
        char msg[700];
        gs_diag_format(&d, msg, sizeof msg);
        fail_msg("%s", msg);
    }
    return qc;
}

/* FNV-1a 64, written out again here so the test pins the documented hash. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211u;
    }
    return h;
}

/* ---- the example ------------------------------------------------------------------------ */

#define GI 1024 /* MiB */

/* The bundled example applied to an engine: seven queues with the documented tree, quotas in
 * milli-GPU, milli-CPU and MiB, department CPU/memory derived from the teams, and four
 * classes. The top-level quotas add up exactly to the cluster of the bundled node list. */
static void test_example_builds_the_documented_tree(void **state)
{
    (void)state;
    struct gs_qconfig *qc = load_example();
    struct world w;
    world_init(&w, 8, false);
    apply_ok(qc, &w);
    assert_int_equal(gs_engine_queue_count(w.e), 7);

    static const struct {
        const char *name, *parent;
        bool leaf;
        int64_t quota[GS_RES_COUNT], gpu_limit;
    } want[] = {
        {"applied", "root", false, {4200000, 72356000, 332661LL * GI}, GS_UNLIMITED},
        {"inference", "applied", true, {3700000, 63742000, 293059LL * GI}, GS_UNLIMITED},
        {"research", "applied", true, {500000, 8614000, 39602LL * GI}, 800000},
        {"training", "root", false, {2012000, 34662000, 159359LL * GI}, GS_UNLIMITED},
        {"llm-train", "training", true, {1200000, 20673000, 95045LL * GI}, GS_UNLIMITED},
        {"vision", "training", true, {812000, 13989000, 64314LL * GI}, GS_UNLIMITED},
    };
    int64_t top[GS_RES_COUNT] = {0, 0, 0};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct gs_queue_info in = queue_info(&w, want[i].name);
        assert_string_equal(parent_name(&w, &in), want[i].parent);
        assert_int_equal(in.leaf, want[i].leaf);
        for (int r = 0; r < GS_RES_COUNT; r++) {
            assert_int_equal(in.quota[r], want[i].quota[r]);
            if (r != GS_RES_GPU)
                assert_true(in.limit[r] == GS_UNLIMITED);
            if (strcmp(want[i].parent, "root") == 0)
                top[r] += in.quota[r];
        }
        assert_true(in.limit[GS_RES_GPU] == want[i].gpu_limit);
    }

    /* The quotas split exactly the cluster the example is written for. */
    struct gs_trace_nodes nodes;
    char path[4096];
    const char *root = getenv("GS_SOURCE_DIR");
    (void)snprintf(path, sizeof path, "%s/data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv",
                   root ? root : ".");
    assert_int_equal(gs_trace_read_nodes(path, &nodes, NULL), GS_OK);
    int64_t cap[GS_RES_COUNT] = {0, 0, 0};
    for (uint32_t i = 0; i < nodes.n; i++) {
        cap[GS_RES_GPU] += 1000 * (int64_t)nodes.v[i].gpu_count;
        cap[GS_RES_CPU] += nodes.v[i].cpu_milli;
        cap[GS_RES_MEM] += nodes.v[i].mem_mib;
    }
    gs_trace_nodes_fini(&nodes);
    assert_int_equal(cap[GS_RES_GPU], 6212000);
    for (int r = 0; r < GS_RES_COUNT; r++)
        assert_int_equal(top[r], cap[r]);

    check_class(&w, "latency-sensitive", 1000, false);
    check_class(&w, "guaranteed", 500, false);
    check_class(&w, "burstable", 50, true);
    check_class(&w, "best-effort", 10, true);
    assert_int_equal(gs_qconfig_min_runtime_ms(qc), 5 * 60 * 1000);
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* LS pods go to inference with the latency-sensitive class; every other QoS is hashed over the
 * three batch teams with its own class; a pod without QoS gets the default class. */
static void test_example_sends_ls_pods_to_inference(void **state)
{
    (void)state;
    struct gs_qconfig *qc = load_example();
    assign_is(qc, pod("openb-pod-0000", "LS", 1, ""), "inference", "latency-sensitive");
    assign_is(qc, pod("openb-pod-0001", "LS", 8, "V100M32"), "inference", "latency-sensitive");
    static const char *const qos[] = {"BE", "Burstable", "Guaranteed", ""};
    static const char *const cls[] = {"best-effort", "burstable", "guaranteed", "best-effort"};
    for (int i = 0; i < 4; i++) {
        struct gs_trace_pod p = pod("openb-pod-0002", qos[i], 1, "");
        struct gs_qconfig_assignment a;
        assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_OK);
        assert_true(strcmp(a.queue, "llm-train") == 0 || strcmp(a.queue, "vision") == 0 ||
                    strcmp(a.queue, "research") == 0);
        assert_string_equal(a.priority_class, cls[i]);
    }
    gs_qconfig_free(qc);
}

/* The hash is the documented one (FNV-1a 64 of the name, modulo the weight sum, walked over
 * the weights in file order); the same name always gives the same queue; and over 10,000
 * synthetic names each queue's share is within 2 points of its weight's (12 : 8 : 5). */
static void test_hash_is_stable_and_weighted(void **state)
{
    (void)state;
    struct gs_qconfig *qc = load_example();
    static const char *const names[] = {"llm-train", "vision", "research"};
    static const uint32_t weight[] = {12, 8, 5};
    uint32_t count[3] = {0, 0, 0};
    for (int i = 0; i < 10000; i++) {
        char name[32];
        (void)snprintf(name, sizeof name, "pod-%d", i);
        struct gs_trace_pod p = pod(name, "BE", 1, "");
        struct gs_qconfig_assignment a, b;
        assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_OK);
        assert_int_equal(gs_qconfig_assign(qc, &p, &b), GS_OK);
        assert_ptr_equal(a.queue, b.queue);
        uint64_t h = fnv1a(name) % 25;
        int want = h < 12 ? 0 : h < 20 ? 1 : 2;
        assert_string_equal(a.queue, names[want]);
        count[want]++;
    }
    for (int k = 0; k < 3; k++) {
        double share = count[k] / 10000.0, expect = weight[k] / 25.0;
        if (share < expect - 0.02 || share > expect + 0.02)
            fail_msg("%s got %.4f of the pods, want %.2f +- 0.02", names[k], share, expect);
    }
    gs_qconfig_free(qc);
}

/* ---- rules ------------------------------------------------------------------------------ */

static const char rules_cfg[] =
    HDR "queues:\n"
        "  - name: v100\n"
        "  - name: multi\n"
        "  - name: jobs\n"
        "  - name: rest\n"
        "  - name: dept\n"
        "  - name: team\n"
        "    parentQueue: dept\n"
        "priorityClasses:\n"
        "  - {name: low, value: 1}\n"
        "  - {name: mid, value: 50}\n"
        "  - {name: high, value: 200}\n"
        "assignment:\n"
        "  defaultQueue: rest\n"
        "  defaultPriorityClass: low\n"
        "  priorityByQoS: {Burstable: mid}\n"
        "  rules:\n"
        "    - match: {gpuModel: [V100M16, V100M32], qos: [BE, Burstable]}\n"
        "      queue: v100\n"
        "    - match: {numGpu: {min: 2, max: 8}}\n"
        "      queue: multi\n"
        "    - match: {namePrefix: job-, numGpu: {max: 0}}\n"
        "      queue: jobs\n"
        "      priorityClass: high\n";

/* Each condition alone and together; the first matching rule wins; the rule's class beats
 * the QoS map, which beats the default; no match falls back to the default queue. */
static void test_rules_match_model_count_prefix_and_qos(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(rules_cfg);
    /* gpuModel: any part of the spec among the models, and the QoS listed. */
    assign_is(qc, pod("p1", "BE", 1, "V100M32"), "v100", "low");
    assign_is(qc, pod("p2", "Burstable", 1, "T4|V100M16"), "v100", "mid");
    assign_is(qc, pod("p3", "LS", 1, "V100M16"), "rest", "low"); /* QoS not listed */
    assign_is(qc, pod("p4", "BE", 1, "V100M1"), "rest", "low");  /* no prefix match */
    assign_is(qc, pod("p5", "BE", 1, ""), "rest", "low");        /* any model: no match */
    /* numGpu range, inclusive; a V100 pod with 4 GPUs matched the earlier rule first. */
    assign_is(qc, pod("p6", "BE", 2, ""), "multi", "low");
    assign_is(qc, pod("p7", "BE", 8, "T4"), "multi", "low");
    assign_is(qc, pod("p8", "BE", 9, ""), "rest", "low");
    assign_is(qc, pod("p9", "BE", 4, "V100M32"), "v100", "low");
    /* namePrefix and a rule's own class. */
    assign_is(qc, pod("job-7", "Burstable", 0, ""), "jobs", "high");
    assign_is(qc, pod("job-8", "Burstable", 1, ""), "rest", "mid");
    assign_is(qc, pod("jo", "BE", 0, ""), "rest", "low");
    gs_qconfig_free(qc);
}

/* Without a default queue a pod that no rule matches has no queue; without any class source a
 * pod has no class. Both are GS_ENOENT with the output cleared. */
static void test_unmatched_pod_is_enoent(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(HDR QA "priorityClasses: [{name: c, value: 1}]\n"
                                            "assignment:\n"
                                            "  priorityByQoS: {LS: c}\n"
                                            "  rules:\n"
                                            "    - {match: {qos: [LS, BE]}, queue: a}\n");
    struct gs_qconfig_assignment a = {"x", "y"};
    struct gs_trace_pod p = pod("p", "Burstable", 1, "");
    assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_ENOENT);
    assert_null(a.queue);
    assert_null(a.priority_class);
    p = pod("p", "BE", 1, ""); /* a queue, but no class for BE */
    assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_ENOENT);
    p = pod("p", "LS", 1, "");
    assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_OK);
    gs_qconfig_free(qc);
    /* No assignment section at all. */
    qc = parse_ok(HDR QA);
    assert_int_equal(gs_qconfig_assign(qc, &p, &a), GS_ENOENT);
    assert_int_equal(gs_qconfig_min_runtime_ms(qc), 0);
    gs_qconfig_free(qc);
}

/* ---- quantities and what reaches the engine --------------------------------------------- */

/* Kubernetes quantities become milli-GPU, milli-CPU and MiB exactly. */
static void test_quantities_in_internal_units(void **state)
{
    (void)state;
    static const struct {
        const char *res, *text;
        int r;
        int64_t want;
    } cases[] = {
        {"gpu", "2", GS_RES_GPU, 2000},
        {"gpu", "0.5", GS_RES_GPU, 500},
        {"gpu", "\"0.5\"", GS_RES_GPU, 500},
        {"gpu", "500m", GS_RES_GPU, 500},
        {"gpu", "1.25", GS_RES_GPU, 1250},
        {"gpu", "0", GS_RES_GPU, 0},
        {"gpu", "6212", GS_RES_GPU, 6212000},
        {"gpu", "0.125", GS_RES_GPU, 125},
        {"cpu", "64", GS_RES_CPU, 64000},
        {"cpu", "250m", GS_RES_CPU, 250},
        {"cpu", "0.1", GS_RES_CPU, 100},
        {"cpu", "\"50000\"", GS_RES_CPU, 50000000},
        {"cpu", "1.500", GS_RES_CPU, 1500},
        {"memory", "512Gi", GS_RES_MEM, 524288},
        {"memory", "1Ti", GS_RES_MEM, 1048576},
        {"memory", "200Ti", GS_RES_MEM, 209715200},
        {"memory", "2048Mi", GS_RES_MEM, 2048},
        {"memory", "1.5Gi", GS_RES_MEM, 1536},
        {"memory", "1024Ki", GS_RES_MEM, 1},
        {"memory", "1048576", GS_RES_MEM, 1},
        {"memory", "1Pi", GS_RES_MEM, 1073741824},
        {"memory", "1048576k", GS_RES_MEM, 1000},
        {"memory", "0.5Mi", GS_RES_MEM, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        (void)snprintf(text, sizeof text,
                       HDR QA "    resources:\n      %s: {quota: %s, limit: %s}\n", cases[i].res,
                       cases[i].text, i % 2 ? "unlimited" : "-1");
        if (cases[i].want == 0 && strcmp(cases[i].text, "0.5Mi") == 0) {
            /* Half a MiB is not a whole number of MiB. */
            parse_fails(text, strlen(text), GS_EPARSE, 6, 17 + (uint32_t)strlen(cases[i].res),
                        "quota", "is not a whole number of MiB");
            continue;
        }
        struct gs_qconfig *qc = parse_ok(text);
        struct world w;
        world_init(&w, 1, false);
        apply_ok(qc, &w);
        struct gs_queue_info in = queue_info(&w, "a");
        if (in.quota[cases[i].r] != cases[i].want)
            fail_msg("%s %s: quota %lld, want %lld", cases[i].res, cases[i].text,
                     (long long)in.quota[cases[i].r], (long long)cases[i].want);
        for (int r = 0; r < GS_RES_COUNT; r++)
            assert_true(in.limit[r] == GS_UNLIMITED);
        world_fini(&w);
        gs_qconfig_free(qc);
    }
}

/* Over-quota weights reach the engine: two queues without quota and weights 0.5 and 1.5 on 4
 * GPUs of capacity, both wanting more, get fair shares of 1 and 3 GPUs. */
static void test_weights_reach_the_engine(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(HDR "queues:\n"
                                         "  - {name: a, resources: {gpu: {overQuotaWeight: 0.5}}}\n"
                                         "  - name: b\n"
                                         "    resources:\n"
                                         "      gpu: {overQuotaWeight: 1.50}\n"
                                         "      cpu: {overQuotaWeight: 1.5}\n"
                                         "priorityClasses: [{name: c, value: 1}]\n");
    struct world w;
    world_init(&w, 4, false);
    apply_ok(qc, &w);
    uint32_t pc = (uint32_t)gs_engine_find_priority_class(w.e, "c");
    for (int i = 0; i < 8; i++) {
        struct gs_tpod_spec s = {.name = "p",
                                 .queue = (uint32_t)gs_engine_find_queue(w.e, i % 2 ? "b" : "a"),
                                 .priority_class = pc,
                                 .gang = GS_NO_GANG,
                                 .req = {.cpu_milli = 1000,
                                         .num_gpu = 1,
                                         .gpu_milli = 1000,
                                         .gpu_model_mask = GS_MODEL_ANY},
                                 .runtime_estimate_ms = -1};
        assert_int_equal(gs_engine_submit(w.e, &s, 0, NULL), GS_OK);
    }
    int64_t cap[GS_RES_COUNT] = {4000, 64000, 1 << 20};
    gs_engine_compute_fair(w.e, cap);
    assert_int_equal(queue_info(&w, "a").fair[GS_RES_GPU], 1000);
    assert_int_equal(queue_info(&w, "b").fair[GS_RES_GPU], 3000);
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* Min run times are inherited: the team below a department with preemptMinRuntime 10m keeps a
 * low pod safe from a high one for 10 minutes, not the top-level 1 minute. */
static void test_min_runtime_is_inherited_by_the_engine(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(HDR "preemptMinRuntime: 1m\n"
                                         "queues:\n"
                                         "  - {name: dept, preemptMinRuntime: 10m}\n"
                                         "  - {name: team, parentQueue: dept}\n"
                                         "priorityClasses:\n"
                                         "  - {name: low, value: 10}\n"
                                         "  - {name: high, value: 1000}\n");
    assert_int_equal(gs_qconfig_min_runtime_ms(qc), 60000);
    struct world w;
    world_init(&w, 1, true);
    apply_ok(qc, &w);
    uint32_t team = (uint32_t)gs_engine_find_queue(w.e, "team");
    struct gs_tpod_spec low = {
        .name = "low",
        .queue = team,
        .priority_class = (uint32_t)gs_engine_find_priority_class(w.e, "low"),
        .gang = GS_NO_GANG,
        .req = {.cpu_milli = 1000, .num_gpu = 1, .gpu_milli = 1000, .gpu_model_mask = GS_MODEL_ANY},
        .runtime_estimate_ms = -1};
    struct gs_tpod_spec high = low;
    high.name = "high";
    high.priority_class = (uint32_t)gs_engine_find_priority_class(w.e, "high");
    uint32_t lo, hi;
    struct gs_tpod_info in;
    assert_int_equal(gs_engine_submit(w.e, &low, 0, &lo), GS_OK);
    assert_int_equal(gs_engine_cycle(w.e, 0, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_submit(w.e, &high, 1000, &hi), GS_OK);
    assert_int_equal(gs_engine_cycle(w.e, (int64_t)5 * 60000, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_pod_info(w.e, lo, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    assert_int_equal(gs_engine_cycle(w.e, (int64_t)10 * 60000, NULL, NULL), GS_OK);
    assert_int_equal(gs_engine_pod_info(w.e, hi, &in), GS_OK);
    assert_int_equal(in.state, GS_TPOD_RUNNING);
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* Sections may come in any order; anchors and aliases work; null optional values are unset. */
static void test_order_aliases_and_nulls(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok("assignment:\n"
                                     "  defaultQueue: b\n"
                                     "  defaultPriorityClass: c\n"
                                     "priorityClasses: [{name: c, value: -5, preemptible: ~}]\n"
                                     "queues:\n"
                                     "  - name: a\n"
                                     "    parentQueue: null\n"
                                     "    resources:\n"
                                     "      gpu: &g {quota: 1, limit: 2}\n"
                                     "  - name: b\n"
                                     "    parentQueue: root\n"
                                     "    resources: {gpu: *g, cpu: }\n"
                                     "kind: QueueConfig\n"
                                     "apiVersion: gpusched.io/v1\n");
    struct world w;
    world_init(&w, 1, false);
    apply_ok(qc, &w);
    assert_int_equal(queue_info(&w, "b").quota[GS_RES_GPU], 1000);
    assert_int_equal(queue_info(&w, "b").limit[GS_RES_GPU], 2000);
    assert_int_equal(queue_info(&w, "a").parent, GS_QUEUE_ROOT);
    check_class(&w, "c", -5, true); /* preemptible left to the engine: value < 100 */
    assign_is(qc, pod("p", "LS", 1, ""), "b", "c");
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* ---- files and apply -------------------------------------------------------------------- */

static void test_load_errors(void **state)
{
    (void)state;
    struct gs_qconfig *qc = (struct gs_qconfig *)1;
    struct gs_diag d;
    assert_int_equal(gs_qconfig_load("/nonexistent/q.yaml", &qc, &d), GS_EIO);
    assert_null(qc);
    assert_string_equal(d.file, "/nonexistent/q.yaml");
    assert_int_equal(d.line, 0);
    assert_non_null(strstr(d.msg, "cannot open"));

    /* A file one byte over the limit is refused before it is parsed. */
    char path[] = "/tmp/test_qconfig_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    for (uint32_t i = 0; i <= GS_QCONFIG_FILE_MAX; i++)
        assert_int_equal(fputc(i % 64 == 63 ? '\n' : '#', f), i % 64 == 63 ? '\n' : '#');
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gs_qconfig_load(path, &qc, &d), GS_EIO);
    assert_null(qc);
    assert_int_equal(d.line, 0);
    assert_non_null(strstr(d.msg, "over the limit of 4194304"));
    assert_int_equal(unlink(path), 0);

    /* A directory opens but cannot be read. */
    assert_int_equal(gs_qconfig_load("/tmp", &qc, &d), GS_EIO);
    assert_null(qc);
    assert_non_null(strstr(d.msg, "cannot read"));

    /* NULL diag is allowed. */
    assert_int_equal(gs_qconfig_load("/nonexistent/q.yaml", &qc, NULL), GS_EIO);
    gs_qconfig_free(NULL);
}

/* A buffer over 4 MiB is GS_EIO at line 0; exactly 4 MiB of comments is merely empty. */
static void test_buffer_size_limit(void **state)
{
    (void)state;
    size_t n = GS_QCONFIG_FILE_MAX + 1u;
    char *buf = malloc(n);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = i % 64 == 63 ? '\n' : '#';
    parse_fails(buf, n, GS_EIO, 0, 0, "", "file is 4194305 bytes, over the limit of 4194304");
    parse_fails(buf, n - 1, GS_EPARSE, 0, 0, "", "empty file");
    free(buf);
}

/* Applying twice: the engine refuses the first queue again, named at its line. */
static void test_apply_maps_engine_errors_to_lines(void **state)
{
    (void)state;
    struct gs_qconfig *qc = load_example();
    struct world w;
    struct gs_diag d;
    world_init(&w, 1, false);
    apply_ok(qc, &w);
    assert_int_equal(gs_qconfig_apply(qc, w.e, &d), GS_EEXIST);
    assert_non_null(strstr(d.file, "queues.yaml"));
    assert_int_equal(d.line, 33);
    assert_int_equal(d.column, 11);
    assert_string_equal(d.field, "name");
    assert_non_null(strstr(d.msg, "the engine refused queue 'applied'"));
    world_fini(&w);

    /* Classes: an engine that already has one of the names. */
    world_init(&w, 1, false);
    struct gs_priority_class_spec s = {"burstable", 1, -1};
    assert_int_equal(gs_engine_add_priority_class(w.e, &s, NULL), GS_OK);
    assert_int_equal(gs_qconfig_apply(qc, w.e, &d), GS_EEXIST);
    assert_int_equal(d.line, 77);
    assert_int_equal(d.column, 12);
    assert_non_null(strstr(d.msg, "PriorityClass 'burstable'"));
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* ---- errors ----------------------------------------------------------------------------- */

struct err_case {
    const char *text;
    uint64_t line;
    uint32_t column;
    const char *field;
    const char *msg;
};

static void run_cases(const struct err_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        parse_fails(cases[i].text, strlen(cases[i].text), GS_EPARSE, cases[i].line, cases[i].column,
                    cases[i].field, cases[i].msg);
}

#define RUN(cases) run_cases((cases), sizeof(cases) / sizeof((cases)[0]))

/* Malformed YAML and the structural limits of the tree builder. */
static void test_errors_yaml(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        {HDR "queues: [a, b\n", 4, 1, "", "malformed YAML: did not find expected ',' or ']'"},
        {HDR "queues:\n  - name: a\n - name: b\n", 5, 2, "", "malformed YAML"},
        {HDR "queues:\n\t- name: a\n", 4, 1, "",
         "malformed YAML: found character that cannot "
         "start any token"},
        {"", 0, 0, "", "empty file: no configuration"},
        {"# only a comment\n", 0, 0, "", "empty file"},
        {HDR QA "---\n" HDR, 5, 1, "", "a second YAML document"},
        {HDR "queues: !!seq [a]\n", 3, 9, "", "YAML tags are not supported"},
        {HDR "queues: *nope\n", 3, 9, "", "unknown alias '*nope'"},
        {HDR "queues: &q [*q]\n", 3, 13, "", "unknown alias '*q'"},
        {"[]\n", 1, 1, "", "expected a mapping with apiVersion, kind and queues, found a list"},
        {"hello\n", 1, 1, "", "found 'hello'"},
        {HDR "queues:\n  - name: a\xff\n", 4, 12, "",
         "malformed YAML: invalid leading UTF-8 octet (byte 0xff)"},
        {HDR "queues:\n  - name: a\x01\n", 4, 12, "",
         "control characters are not allowed (byte 0x01)"},
    };
    RUN(cases);
}

/* Nesting deeper than 32 levels, directly or through an alias; too many nodes through
 * aliases (a "billion laughs" document). */
static void test_errors_yaml_limits(void **state)
{
    (void)state;
    char text[512];
    size_t k = 0;
    for (int i = 0; i < 33; i++)
        text[k++] = '[';
    for (int i = 0; i < 33; i++)
        text[k++] = ']';
    text[k] = '\0';
    parse_fails(text, k, GS_EPARSE, 1, 33, "", "nesting deeper than 32 levels");
    /* 32 levels are fine for the builder; the schema then refuses the list. */
    parse_fails(text + 1, k - 2, GS_EPARSE, 1, 1, "", "expected a mapping");

    /* An anchored 31-level list used at level 2 would reach level 33. */
    k = (size_t)snprintf(text, sizeof text, "a: &x ");
    for (int i = 0; i < 31; i++)
        text[k++] = '[';
    for (int i = 0; i < 31; i++)
        text[k++] = ']';
    k += (size_t)snprintf(text + k, sizeof text - k, "\nb: [*x]\n");
    parse_fails(text, k, GS_EPARSE, 2, 5, "", "nesting deeper than 32 levels");

    /* Ten times ten times ... : 10^7 nodes from a few hundred bytes. */
    k = (size_t)snprintf(text, sizeof text, "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i <= 7; i++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, "
                              "*l%d]\n",
                              i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
                              i - 1);
    parse_fails(text, k, GS_EPARSE, 6, 55, "", "more than 1000000 YAML nodes");
}

/* The top level, unknown and repeated keys, wrong types. */
static void test_errors_keys_and_types(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        {"kind: QueueConfig\n" QA, 1, 1, "apiVersion", "missing required key 'apiVersion'"},
        {"apiVersion: v1\nkind: QueueConfig\n" QA, 1, 13, "apiVersion",
         "apiVersion must be 'gpusched.io/v1', found 'v1'"},
        {"apiVersion: gpusched.io/v1\nkind: Queue\n" QA, 2, 7, "kind",
         "kind must be 'QueueConfig', found 'Queue'"},
        {HDR, 1, 1, "queues", "missing required key 'queues'"},
        {HDR "queues: []\n", 3, 9, "queues", "no queues"},
        {HDR "queue:\n  - name: a\n", 3, 1, "queue",
         "unknown key 'queue' (allowed: apiVersion, kind, preemptMinRuntime, queues, "
         "priorityClasses, assignment, podGroups, sharing)"},
        {HDR QA "    resources:\n      gpu: {quota: 1, limt: 2}\n", 6, 23, "limt",
         "unknown key 'limt' (allowed: quota, limit, overQuotaWeight, byModel)"},
        {HDR QA "    resources:\n      gpus: {quota: 1}\n", 6, 7, "gpus",
         "unknown key 'gpus' (allowed: gpu, cpu, memory)"},
        {HDR QA "    name: b\n", 5, 5, "name", "duplicate key 'name' (first on line 4)"},
        {HDR "queues:\n  - name:\n", 4, 5, "name", "'name' needs a value"},
        {HDR "queues:\n  - parentQueue: x\n", 4, 5, "name", "missing required key 'name'"},
        {HDR "queues:\n  - name: \"\"\n", 4, 11, "name", "empty name"},
        {HDR "queues:\n  - name: \"a\\tb\"\n", 4, 11, "name", "control character (byte 0x09)"},
        {HDR "queues:\n  - name: [a]\n", 4, 11, "name", "expected a value, found a list"},
        {HDR "queues: {a: 1}\n", 3, 9, "queues", "expected a list, found a mapping"},
        {HDR "queues:\n  - a\n", 4, 5, "queues", "expected a mapping, found 'a'"},
        {HDR QA "    resources: [gpu]\n", 5, 16, "resources", "expected a mapping, found a list"},
        {HDR QA "    resources:\n      gpu: 4\n", 6, 12, "gpu", "expected a mapping, found '4'"},
        {HDR "queues:\n  - {[x]: 1}\n", 4, 6, "queues", "a key must be a string, found a list"},
        {HDR QA "priorityClasses:\n  - {name: x, value: \"10\"}\n", 6, 22, "value",
         "expected an integer, found '10'"},
        {HDR QA "priorityClasses:\n  - {name: x, value: 1.5}\n", 6, 22, "value",
         "expected an integer, found '1.5'"},
        {HDR QA "priorityClasses:\n  - {name: x, value: 3000000000}\n", 6, 22, "value",
         "'3000000000' is out of range (-2147483648 to 2147483647)"},
        {HDR QA "priorityClasses:\n  - {name: x}\n", 6, 5, "value", "missing required key 'value'"},
        {HDR QA "priorityClasses:\n  - {name: x, value: 1, preemptible: yes}\n", 6, 38,
         "preemptible", "expected true or false, found 'yes'"},
        {HDR QA "priorityClasses:\n  - {name: x, value: 1}\n  - {name: x, value: 2}\n", 7, 12,
         "name", "duplicate PriorityClass name 'x' (first on line 6)"},
        {HDR QA "priorityClasses: {x: 1}\n", 5, 18, "priorityClasses",
         "expected a list, found a mapping"},
        {HDR "queues:\n  - name: a\n  - name: a\n", 5, 11, "name",
         "duplicate queue name 'a' (first on line 4)"},
        {HDR "queues:\n  - name: root\n", 4, 11, "name", "'root' is the implicit top"},
        {HDR QA "assignment: [x]\n", 5, 13, "assignment", "expected a mapping, found a list"},
    };
    RUN(cases);
}

/* Queue and PriorityClass names are DNS-1123 subdomains (include/gpusched/names.h): lower-case
 * letters, digits, '-' and '.', starting and ending with a letter or digit, each dotted part too,
 * at most 253 characters. Positions: the name value starts at column 11 of line 4 for queues
 * ("  - name: " is 10 characters) and at column 12 of line 6 for classes ("  - {name: "). */
static void test_names_are_dns1123_subdomains(void **state)
{
    (void)state;
#define SUFFIX " (a DNS-1123 subdomain, as Kubernetes names objects)"
    static const struct err_case cases[] = {
        {HDR "queues:\n  - name: Team-A\n", 4, 11, "name",
         "invalid name 'Team-A': character 'T' (byte 0x54) at position 1 is not allowed: a name "
         "is lower-case letters, digits, '-' and '.'" SUFFIX},
        {HDR "queues:\n  - name: team_a\n", 4, 11, "name",
         "invalid name 'team_a': character '_' (byte 0x5f) at position 5 is not allowed"},
        {HDR "queues:\n  - name: \"team a\"\n", 4, 11, "name",
         "character ' ' (byte 0x20) at position 5 is not allowed"},
        {HDR "queues:\n  - name: -team\n", 4, 11, "name",
         "invalid name '-team': a name must start with a lower-case letter or a digit" SUFFIX},
        {HDR "queues:\n  - name: team-\n", 4, 11, "name",
         "invalid name 'team-': a name must end with a lower-case letter or a digit" SUFFIX},
        {HDR "queues:\n  - name: a.-b\n", 4, 11, "name",
         "invalid name 'a.-b': each '.'-separated part of a name must start and end with a "
         "lower-case letter or a digit (position 2)" SUFFIX},
        {HDR "queues:\n  - name: a..b\n", 4, 11, "name", "(position 2)"},
        {HDR QA "priorityClasses:\n  - {name: High, value: 1}\n", 6, 12, "name",
         "invalid name 'High': character 'H' (byte 0x48) at position 1 is not allowed"},
        {HDR QA "priorityClasses:\n  - {name: best.effort., value: 1}\n", 6, 12, "name",
         "invalid name 'best.effort.': a name must end with a lower-case letter or a digit"},
    };
#undef SUFFIX
    RUN(cases);

    /* Accepted: one character, a digit first, dashes and dots inside, as Kubernetes takes them. */
    gs_qconfig_free(parse_ok(HDR "queues:\n  - name: a\n  - name: 0team\n  - name: llm-train\n"
                                 "  - name: team.gpu-1.example\n"
                                 "priorityClasses:\n  - {name: system-node-critical, value: 1}\n"));
}

/* podGroups: the rule's keys, each refused value at its line and column. Lines 3-7 are the queues
 * (b is c's parent, so not a leaf), 8 the podGroups key, 9 the rule; columns count from the
 * rule's "  - {" (5 characters). */
static void test_pod_groups_rules_are_checked(void **state)
{
    (void)state;
#define PG HDR "queues:\n  - name: a\n  - name: c\n    parentQueue: b\n  - name: b\npodGroups:\n"
    static const struct err_case cases[] = {
        {PG "  - {window: 60s}\n", 9, 5, "minMember", "missing required key 'minMember'"},
        {PG "  - {minMember: 2}\n", 9, 5, "window", "missing required key 'window'"},
        {PG "  - {minMember: 1, window: 60s}\n", 9, 17, "minMember",
         "'1' is out of range (2 to 1000)"},
        {PG "  - {minMember: 2, window: 0}\n", 9, 28, "window",
         "a window of 0 groups nothing; give it a length"},
        {PG "  - {minMember: 2, window: 60s, minGpu: 0}\n", 9, 41, "minGpu",
         "'0' is out of range (1 to 1000000)"},
        {PG "  - {minMember: 2, window: 60s, queues: [nope]}\n", 9, 42, "queues",
         "unknown queue 'nope'"},
        {PG "  - {minMember: 2, window: 60s, queues: [b]}\n", 9, 42, "queues",
         "queue 'b' has child queues; pods can only be sent to a leaf queue"},
        {PG "  - {minMember: 2, window: 60s, queues: []}\n", 9, 41, "queues",
         "empty list; leave queues out to look at every queue"},
        {PG "  - {minMember: 2, window: 60s, size: 3}\n", 9, 33, "size",
         "unknown key 'size' (allowed: queues, minGpu, window, minMember, timeout)"},
        {PG "  - {minMember: 2, window: 60s, timeout: soon}\n", 9, 42, "timeout", "duration"},
    };
#undef PG
    RUN(cases);
}

/* Forming gangs, worked by hand. Queue a gets pods named a-*, queue b pods named b-*; the rule
 * looks at queue a only, pods of 2 GPUs or more, window 60 s, minMember 2. In arrival order:
 *   a-p0  2 GPU  t=0    opens group 1
 *   b-p6  2 GPU  t=0    queue b: no rule looks at it
 *   a-p1  2 GPU  t=30   same shape, 30 s <= 60 s: group 1 is full -> gang a-pg-1 {a-p0, a-p1}
 *                       (listed last in the file: arrival order, not file order, counts)
 *   a-p2  2 GPU  t=100  opens group 2
 *   a-p3  4 GPU  t=110  another shape: group 2 dissolves (a-p2 runs alone), opens group 3
 *   a-p4  4 GPU  t=200  90 s after a-p3: group 3 dissolves, opens group 4
 *   a-p5  4 GPU  t=250  50 s after a-p4, same shape -> gang a-pg-2 {a-p4, a-p5}
 *   a-p7  1 GPU  t=260  below minGpu: no rule looks at it */
static void test_pod_groups_form_gangs_of_consecutive_like_pods(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(HDR "queues:\n  - name: a\n  - name: b\n"
                                         "priorityClasses:\n  - {name: x, value: 1}\n"
                                         "assignment:\n  defaultPriorityClass: x\n  rules:\n"
                                         "    - {match: {namePrefix: a-}, queue: a}\n"
                                         "    - {match: {namePrefix: b-}, queue: b}\n"
                                         "podGroups:\n"
                                         "  - {queues: [a], minGpu: 2, window: 1m, minMember: 2, "
                                         "timeout: 10m}\n");
    assert_int_equal(gs_qconfig_pod_group_rules(qc), 1);
    static const char csv[] =
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "a-p0,8000,1024,2,1000,,BE,Running,0,900,0\n"
        "a-p2,8000,1024,2,1000,,BE,Running,100,900,100\n"
        "a-p3,8000,1024,4,1000,,BE,Running,110,900,110\n"
        "a-p4,8000,1024,4,1000,,BE,Running,200,900,200\n"
        "a-p5,8000,1024,4,1000,,BE,Running,250,900,250\n"
        "b-p6,8000,1024,2,1000,,BE,Running,0,900,0\n"
        "a-p7,8000,1024,1,1000,,BE,Running,260,900,260\n"
        "a-p1,8000,1024,2,1000,,BE,Running,30,900,30\n";
    struct gs_trace_pods pods;
    struct gs_diag d;
    assert_int_equal(gs_trace_parse_pods(csv, sizeof csv - 1, "p.csv", &pods, &d), GS_OK);
    struct gs_qconfig_gangs g;
    assert_int_equal(gs_qconfig_form_gangs(qc, &pods, &g), GS_OK);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.npods, 8);
    assert_string_equal(g.v[0].name, "a-pg-1");
    assert_int_equal(g.v[0].min_member, 2);
    assert_int_equal(g.v[0].timeout_ms, 600000);
    assert_int_equal(g.v[0].first_pod, 0); /* a-p0 */
    assert_int_equal(g.v[0].queue, 0);     /* a */
    assert_string_equal(g.v[1].name, "a-pg-2");
    assert_int_equal(g.v[1].first_pod, 3); /* a-p4 */
    /* File order: a-p0 a-p2 a-p3 a-p4 a-p5 b-p6 a-p7 a-p1. */
    const uint32_t N = GS_QCONFIG_NO_GANG;
    const uint32_t want[] = {0, N, N, 1, 1, N, N, 0};
    for (uint32_t i = 0; i < 8; i++)
        if (g.gang_of[i] != want[i])
            fail_msg("pod %s: gang %u, want %u", pods.v[i].name, g.gang_of[i], want[i]);
    gs_qconfig_gangs_fini(&g);
    gs_qconfig_gangs_fini(NULL);
    gs_trace_pods_fini(&pods);
    gs_qconfig_free(qc);

    /* No podGroups: no gangs, every pod alone. */
    qc = parse_ok(HDR QA);
    assert_int_equal(gs_qconfig_pod_group_rules(qc), 0);
    gs_qconfig_free(qc);
}

/* Quantities, weights and durations. */
static void test_errors_values(void **state)
{
    (void)state;
#define RES HDR QA "    resources:\n"
    static const struct err_case cases[] = {
        {RES "      memory: {quota: 12GB}\n", 6, 23, "quota", "memory '12GB' has a bad unit"},
        {RES "      gpu: {quota: 1Gi}\n", 6, 20, "quota", "gpu '1Gi' has a bad unit"},
        {RES "      cpu: {quota: 2 cores}\n", 6, 20, "quota", "cpu '2 cores' has a bad unit"},
        {RES "      cpu: {quota: 1e3}\n", 6, 20, "quota", "cpu '1e3' has a bad unit"},
        {RES "      cpu: {quota: m}\n", 6, 20, "quota", "cpu 'm' is not a quantity"},
        {RES "      cpu: {quota: 0.0001}\n", 6, 20, "quota",
         "cpu '0.0001' is finer than a thousandth"},
        {RES "      gpu: {quota: 0.5m}\n", 6, 20, "quota", "is finer than a thousandth"},
        {RES "      memory: {quota: 1.5Ki}\n", 6, 23, "quota",
         "memory '1.5Ki' is not a whole number of MiB"},
        {RES "      memory: {quota: 1G}\n", 6, 23, "quota", "is not a whole number of MiB"},
        {RES "      memory: {quota: 100000Pi}\n", 6, 23, "quota", "is too large"},
        {RES "      gpu: {quota: 99999999999999999999}\n", 6, 20, "quota", "is too large"},
        {RES "      gpu: {quota: -2}\n", 6, 20, "quota", "negative quota '-2'"},
        {RES "      gpu: {quota: -1}\n", 6, 20, "quota", "negative quota '-1'"},
        {RES "      gpu: {limit: -5}\n", 6, 20, "limit",
         "negative limit '-5' (only -1, meaning unlimited, may be negative)"},
        {RES "      gpu: {quota: unlimited}\n", 6, 20, "quota", "a quota cannot be unlimited"},
        {RES "      gpu: {quota: 4, limit: 2}\n", 6, 30, "limit",
         "gpu limit 2 is below the quota 4"},
        {RES "      memory: {quota: 2Gi, limit: 1536Mi}\n", 6, 35, "limit",
         "memory limit 1536Mi is below the quota 2Gi"},
        {RES "      gpu: {quota: 1.5, limit: 1.25}\n", 6, 32, "limit",
         "gpu limit 1.25 is below the quota 1.5"},
        {RES "      gpu: {quota: [1]}\n", 6, 20, "quota", "expected a value, found a list"},
        {RES "      gpu: {overQuotaWeight: -1}\n", 6, 30, "overQuotaWeight",
         "negative weight '-1'"},
        {RES "      gpu: {overQuotaWeight: two}\n", 6, 30, "overQuotaWeight",
         "expected a number, found 'two'"},
        {RES "      gpu: {overQuotaWeight: \"2\"}\n", 6, 30, "overQuotaWeight",
         "expected a number"},
        {RES "      gpu: {overQuotaWeight: 2000000}\n", 6, 30, "overQuotaWeight",
         "weight '2000000' is above 1000000"},
        {RES "      gpu: {overQuotaWeight: 2}\n      cpu: {overQuotaWeight: 1}\n", 7, 30,
         "overQuotaWeight",
         "overQuotaWeight 1 differs from the 2 given for gpu; a queue has one over-quota weight"},
        {HDR "preemptMinRuntime: 10\n" QA, 3, 20, "preemptMinRuntime",
         "bad duration '10': expected numbers with units ms, s, m, h"},
        {HDR "preemptMinRuntime: 10x\n" QA, 3, 20, "preemptMinRuntime", "bad duration '10x'"},
        {HDR "preemptMinRuntime: 1.5h\n" QA, 3, 20, "preemptMinRuntime", "bad duration '1.5h'"},
        {HDR "preemptMinRuntime: -1m\n" QA, 3, 20, "preemptMinRuntime", "negative duration '-1m'"},
        {HDR "preemptMinRuntime: 99999999999999h\n" QA, 3, 20, "preemptMinRuntime", "is too long"},
        {HDR QA "    preemptMinRuntime: h\n", 5, 24, "preemptMinRuntime", "bad duration 'h'"},
    };
#undef RES
    RUN(cases);
    /* Durations that are fine. */
    static const struct {
        const char *text;
        int64_t ms;
    } ok[] = {{"0", 0},           {"500ms", 500},      {"45s", 45000},    {"10m", 600000},
              {"1h30m", 5400000}, {"\"2h\"", 7200000}, {"1m1s1ms", 61001}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[128];
        (void)snprintf(text, sizeof text, HDR "preemptMinRuntime: %s\n" QA, ok[i].text);
        struct gs_qconfig *qc = parse_ok(text);
        assert_int_equal(gs_qconfig_min_runtime_ms(qc), ok[i].ms);
        gs_qconfig_free(qc);
    }
}

/* resources.gpu.byModel reaches the engine with the cluster's model ids: the world's node is
 * A100 (id 0); H100 and B200, named by no node, are added to the model table (ids 1 and 2).
 * Quantities are GPUs, as for the overall values; --cluster-scale 0.5 halves them, rounding down.
 */
static void test_by_model_reaches_the_engine(void **state)
{
    (void)state;
    static const char text[] =
        HDR "queues:\n"
            "  - name: dept\n"
            "    resources:\n"
            "      gpu: {quota: 8, byModel: {H100: {quota: 6, limit: 12}}}\n"
            "  - name: train\n"
            "    parentQueue: dept\n"
            "    resources:\n"
            "      gpu: {quota: 8, limit: 16, byModel: {H100: {quota: 4, limit: 8}, B200: {limit: "
            "2.5}}}\n";
    for (int scaled = 0; scaled < 2; scaled++) {
        struct gs_qconfig *qc = parse_ok(text);
        if (scaled)
            gs_qconfig_scale(qc, 0.5);
        struct world w;
        world_init(&w, 4, false);
        apply_ok(qc, &w);
        assert_int_equal(gs_cluster_model_find(w.c, "H100"), 1);
        assert_int_equal(gs_cluster_model_find(w.c, "B200"), 2);
        uint32_t train = (uint32_t)gs_engine_find_queue(w.e, "train");
        uint32_t dept = (uint32_t)gs_engine_find_queue(w.e, "dept");
        struct gs_queue_model_info mi;
        assert_int_equal(gs_engine_queue_model_info(w.e, train, 1, &mi), GS_OK);
        assert_true(mi.bounded);
        assert_int_equal(mi.quota_milli, scaled ? 2000 : 4000);
        assert_int_equal(mi.limit_milli, scaled ? 4000 : 8000);
        assert_int_equal(gs_engine_queue_model_info(w.e, train, 2, &mi), GS_OK);
        assert_true(mi.bounded);
        assert_int_equal(mi.quota_milli, 0);
        assert_int_equal(mi.limit_milli, scaled ? 1250 : 2500);
        assert_int_equal(gs_engine_queue_model_info(w.e, train, 0, &mi), GS_OK);
        assert_false(mi.bounded);
        assert_int_equal(gs_engine_queue_model_info(w.e, dept, 1, &mi), GS_OK);
        assert_int_equal(mi.quota_milli, scaled ? 3000 : 6000);
        assert_int_equal(mi.limit_milli, scaled ? 6000 : 12000);
        world_fini(&w);
        gs_qconfig_free(qc);
    }
}

/* byModel errors, each at its line, column and field. */
static void test_errors_by_model(void **state)
{
    (void)state;
#define RES HDR QA "    resources:\n"
    static const struct err_case cases[] = {
        {RES "      gpu: {byModel: {H100: {quota: 4, limit: 2}}}\n", 6, 47, "limit",
         "H100 limit 2 is below the quota 4"},
        {RES "      gpu: {byModel: {H100: {quota: 1, limt: 2}}}\n", 6, 40, "limt",
         "unknown key 'limt' (allowed: quota, limit)"},
        {RES "      gpu: {limit: 2, byModel: {H100: {quota: 4}}}\n", 6, 47, "quota",
         "H100 quota 4 is above the queue's gpu limit 2"},
        {RES "      gpu: {byModel: {H100: {quota: 1}, H100: {quota: 2}}}\n", 6, 41, "byModel",
         "duplicate model 'H100' (first on line 6)"},
        {RES "      gpu: {byModel: {}}\n", 6, 22, "byModel", "empty mapping"},
        {RES "      gpu: {byModel: [H100]}\n", 6, 22, "byModel",
         "expected a mapping, found a list"},
        {RES "      gpu: {byModel: {H100: {quota: 1Gi}}}\n", 6, 37, "quota",
         "gpu '1Gi' has a bad unit"},
        {RES "      gpu: {byModel: {H100: {quota: unlimited}}}\n", 6, 37, "quota",
         "a quota cannot be unlimited"},
        {RES "      gpu: {byModel: {\"A|B\": {quota: 1}}}\n", 6, 23, "byModel",
         "a model name cannot contain '|'"},
        {RES "      cpu: {byModel: {H100: {quota: 1}}}\n", 6, 13, "byModel",
         "unknown key 'byModel' (allowed: quota, limit, overQuotaWeight)"},
        {HDR "queues:\n"
             "  - name: dept\n"
             "    resources:\n"
             "      gpu: {byModel: {H100: {quota: 4}}}\n"
             "  - {name: a, parentQueue: dept, resources: {gpu: {byModel: {H100: {quota: 3}}}}}\n"
             "  - {name: b, parentQueue: dept, resources: {gpu: {byModel: {H100: {quota: 2}}}}}\n",
         6, 37, "quota", "the children's H100 quotas sum to 5, above this queue's H100 quota 4"},
    };
#undef RES
    RUN(cases);
}

/* The queue tree: parents, cycles, depth, quotas against the parent's. */
static void test_errors_tree(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        {HDR QA "    parentQueue: nope\n", 5, 18, "parentQueue", "unknown parent queue 'nope'"},
        {HDR "queues:\n"
             "  - name: c\n"
             "    parentQueue: a\n"
             "  - name: a\n"
             "    parentQueue: b\n"
             "  - name: b\n"
             "    parentQueue: a\n",
         7, 18, "parentQueue", "parent queues form a cycle: a -> b -> a"},
        {HDR QA "    parentQueue: a\n", 5, 18, "parentQueue", "parent queues form a cycle: a -> a"},
        {HDR "queues:\n"
             "  - name: d\n"
             "    resources:\n"
             "      gpu: {quota: 3}\n"
             "      cpu: {quota: 1}\n"
             "  - name: t1\n"
             "    parentQueue: d\n"
             "    resources:\n"
             "      gpu: {quota: 2}\n"
             "  - name: t2\n"
             "    parentQueue: d\n"
             "    resources:\n"
             "      gpu: {quota: 1.5}\n",
         6, 20, "quota", "the children's gpu quotas sum to 3.5, above this queue's quota 3"},
        {HDR "queues:\n"
             "  - name: d\n"
             "    resources:\n"
             "      gpu: {limit: 3}\n"
             "  - name: t\n"
             "    parentQueue: d\n"
             "    resources:\n"
             "      gpu: {quota: 4}\n",
         6, 20, "limit", "gpu limit 3 is below the quota 4 (the sum of the children's)"},
    };
    RUN(cases);

    /* A parent's unset quota is its children's sum; a set one only bounds them. */
    struct gs_qconfig *qc =
        parse_ok(HDR "queues:\n"
                     "  - {name: d, resources: {cpu: {quota: 10}}}\n"
                     "  - {name: t1, parentQueue: d, resources: {gpu: {quota: 2}}}\n"
                     "  - {name: t2, parentQueue: d, resources: {gpu: {quota: "
                     "1.5}, cpu: {quota: 4}}}\n");
    struct world w;
    world_init(&w, 1, false);
    apply_ok(qc, &w);
    assert_int_equal(queue_info(&w, "d").quota[GS_RES_GPU], 3500);
    assert_int_equal(queue_info(&w, "d").quota[GS_RES_CPU], 10000);
    assert_int_equal(queue_info(&w, "d").quota[GS_RES_MEM], 0);
    world_fini(&w);
    gs_qconfig_free(qc);

    /* Parents may come after their children in the file; the engine still gets parents
       first. */
    qc = parse_ok(HDR "queues:\n  - {name: t, parentQueue: d}\n  - {name: d}\n");
    world_init(&w, 1, false);
    apply_ok(qc, &w);
    struct gs_queue_info t = queue_info(&w, "t");
    assert_string_equal(parent_name(&w, &t), "d");
    assert_int_equal(gs_engine_find_queue(w.e, "d"), 1);
    world_fini(&w);
    gs_qconfig_free(qc);
}

/* 32 levels of queues are fine, 33 are not; 10,000 queues are fine, 10,001 are not. */
static void test_errors_tree_limits(void **state)
{
    (void)state;
    size_t cap = 1u << 20, k;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int depth = 32; depth <= 33; depth++) {
        k = (size_t)snprintf(text, cap, HDR "queues:\n  - name: q1\n");
        for (int i = 2; i <= depth; i++)
            k += (size_t)snprintf(text + k, cap - k, "  - {name: q%d, parentQueue: q%d}\n", i,
                                  i - 1);
        if (depth == 32) {
            gs_qconfig_free(parse_ok(text));
        } else {
            /* q33 is on line 3 + 33 = 36; its name at column 12. */
            parse_fails(text, k, GS_EPARSE, 36, 12, "name",
                        "queue 'q33' is nested more than 32 levels deep");
        }
    }
    for (int n = 10000; n <= 10001; n++) {
        k = (size_t)snprintf(text, cap, HDR "queues:\n");
        for (int i = 0; i < n; i++)
            k += (size_t)snprintf(text + k, cap - k, "  - {name: q%d}\n", i);
        if (n == 10000) {
            struct gs_qconfig *qc = parse_ok(text);
            struct world w;
            world_init(&w, 1, false);
            apply_ok(qc, &w);
            assert_int_equal(gs_engine_queue_count(w.e), 10001);
            world_fini(&w);
            gs_qconfig_free(qc);
        } else {
            /* The 10,001st entry is on line 4 + 10000, its mapping at column 5. */
            parse_fails(text, k, GS_EPARSE, 10004, 5, "queues", "more than 10000 queues");
        }
    }
    free(text);
}

/* Assignment: references to unknown or non-leaf queues and unknown classes or QoS names. */
static void test_errors_assignment(void **state)
{
    (void)state;
#define TREE                                                                                       \
    HDR "queues:\n"                                                                                \
        "  - name: dept\n"                                                                         \
        "  - {name: a, parentQueue: dept}\n"                                                       \
        "  - {name: b, parentQueue: dept}\n"                                                       \
        "priorityClasses: [{name: c, value: 1}]\n"                                                 \
        "assignment:\n"
    /* Lines: 3 queues, 4-6 the queues, 7 classes, 8 assignment, 9 on. */
    static const struct err_case cases[] = {
        {TREE "  defaultQueue: nope\n", 9, 17, "defaultQueue", "unknown queue 'nope'"},
        {TREE "  defaultQueue: dept\n", 9, 17, "defaultQueue",
         "queue 'dept' has child queues; pods can only be sent to a leaf queue"},
        {TREE "  defaultPriorityClass: nope\n", 9, 25, "defaultPriorityClass",
         "unknown PriorityClass 'nope'"},
        {TREE "  priorityByQoS: {LS: c, XX: c}\n", 9, 26, "XX",
         "unknown QoS 'XX' (allowed: LS, Guaranteed, Burstable, BE)"},
        {TREE "  priorityByQoS: {LS: c, BE: nope}\n", 9, 30, "BE", "unknown PriorityClass 'nope'"},
        {TREE "  priorityByQoS: {LS: c, LS: c}\n", 9, 26, "LS", "duplicate key 'LS'"},
        {TREE "  priorityByQoS: [LS]\n", 9, 18, "priorityByQoS",
         "expected a mapping, found a list"},
        {TREE "  rules:\n    - queue: nope\n", 10, 14, "queue", "unknown queue 'nope'"},
        {TREE "  rules:\n    - queue: dept\n", 10, 14, "queue",
         "queue 'dept' has child queues; pods can only be sent to a leaf queue"},
        {TREE "  rules:\n    - {queue: a, priorityClass: nope}\n", 10, 33, "priorityClass",
         "unknown PriorityClass 'nope'"},
        {TREE "  rules:\n    - hashQueues: {a: 1, dept: 2}\n", 10, 26, "dept",
         "queue 'dept' has child queues"},
        {TREE "  rules:\n    - hashQueues: {a: 1, zz: 2}\n", 10, 26, "zz", "unknown queue 'zz'"},
        {TREE "  rules:\n    - hashQueues: {a: 1, b: 0}\n", 10, 29, "b",
         "'0' is out of range (1 to 1000000)"},
        {TREE "  rules:\n    - hashQueues: {a: 1, a: 2}\n", 10, 26, "a",
         "duplicate key 'a' (first on line 10)"},
        {TREE "  rules:\n    - hashQueues: {}\n", 10, 19, "hashQueues", "no queues to hash over"},
        {TREE "  rules:\n    - {queue: a, hashQueues: {b: 1}}\n", 10, 30, "hashQueues",
         "a rule takes either queue or hashQueues, not both"},
        {TREE "  rules:\n    - match: {qos: [LS]}\n", 10, 7, "queue",
         "a rule needs queue or hashQueues"},
        {TREE "  rules:\n    - {match: {qos: [LS, Gold]}, queue: a}\n", 10, 26, "qos",
         "unknown QoS 'Gold' (allowed: LS, Guaranteed, Burstable, BE)"},
        {TREE "  rules:\n    - {match: {qos: LS}, queue: a}\n", 10, 21, "qos",
         "expected a list, found 'LS'"},
        {TREE "  rules:\n    - {match: {qos: []}, queue: a}\n", 10, 21, "qos", "empty list"},
        {TREE "  rules:\n    - {match: {gpuModel: [\"A|B\"]}, queue: a}\n", 10, 27, "gpuModel",
         "a model name cannot contain '|'"},
        {TREE "  rules:\n    - {match: {numGpu: {min: 4, max: 2}}, queue: a}\n", 10, 38, "max",
         "max 2 is below min 4"},
        {TREE "  rules:\n    - {match: {numGpu: {min: -1}}, queue: a}\n", 10, 30, "min",
         "negative value '-1'"},
        {TREE "  rules:\n    - {match: {gpu: [T4]}, queue: a}\n", 10, 16, "gpu",
         "unknown key 'gpu' (allowed: qos, gpuModel, numGpu, namePrefix)"},
        {TREE "  rules:\n    - {queue: a, when: x}\n", 10, 18, "when",
         "unknown key 'when' (allowed: match, queue, hashQueues, priorityClass)"},
    };
#undef TREE
    RUN(cases);
}

/* The remaining bounds: long names, too many classes, rules or models, huge quantities; and
 * anchored scalars, which are fine. */
static void test_errors_bounds(void **state)
{
    (void)state;
    static const struct err_case cases[] = {
        {HDR QA "    resources:\n      memory: {quota: 2Ti, limit: 1Ti}\n", 6, 35, "limit",
         "memory limit 1Ti is below the quota 2Ti"},
        {HDR QA "    resources:\n      memory: {quota: 0.2Mi}\n", 6, 23, "quota",
         "is not a whole number of MiB"},
        {HDR QA "    resources:\n      memory: {quota: 1000000P}\n", 6, 23, "quota",
         "is too large"},
        {HDR QA "    resources:\n      gpu: {quota: 200000000000000m}\n", 6, 20, "quota",
         "is too large"},
        {HDR "preemptMinRuntime: \"\"\n" QA, 3, 20, "preemptMinRuntime", "bad duration ''"},
        {HDR QA "assignment:\n  rules:\n    - {match: {gpuModel: []}, queue: a}\n", 7, 26,
         "gpuModel", "empty list"},
    };
    RUN(cases);

    size_t cap = 1u << 20, k;
    char *text = malloc(cap);
    assert_non_null(text);
    k = (size_t)snprintf(text, cap, HDR "queues:\n  - name: ");
    for (int i = 0; i < 254; i++)
        text[k++] = 'x';
    text[k++] = '\n';
    text[k] = '\0';
    parse_fails(text, k, GS_EPARSE, 4, 11, "name", "name longer than 253 bytes");
    text[k - 2] = '\n'; /* 253 bytes */
    text[k - 1] = '\0';
    gs_qconfig_free(parse_ok(text));

    k = (size_t)snprintf(text, cap, HDR QA "priorityClasses:\n");
    for (int i = 0; i <= 1000; i++)
        k += (size_t)snprintf(text + k, cap - k, "  - {name: c%d, value: %d}\n", i, i);
    parse_fails(text, k, GS_EPARSE, 1006, 5, "priorityClasses", "more than 1000 PriorityClasses");

    k = (size_t)snprintf(text, cap, HDR QA "assignment:\n  rules:\n");
    for (int i = 0; i <= 1000; i++)
        k += (size_t)snprintf(text + k, cap - k, "    - queue: a\n");
    parse_fails(text, k, GS_EPARSE, 1007, 7, "rules", "more than 1000 rules");

    k = (size_t)snprintf(text, cap,
                         HDR QA "assignment:\n  rules:\n    - queue: a\n      match:\n"
                                "        gpuModel:\n");
    for (int i = 0; i <= 64; i++)
        k += (size_t)snprintf(text + k, cap - k, "          - m%d\n", i);
    parse_fails(text, k, GS_EPARSE, 74, 13, "gpuModel", "more than 64 models");
    free(text);

    /* An anchored scalar reused as a reference. */
    struct gs_qconfig *qc =
        parse_ok(HDR "queues:\n  - name: &n a\n"
                     "priorityClasses: [{name: &c c, value: 1}]\n"
                     "assignment: {defaultQueue: *n, defaultPriorityClass: *c}\n");
    assign_is(qc, pod("p", "", 0, ""), "a", "c");
    gs_qconfig_free(qc);
}

/* ---- sharing rules ---------------------------------------------------------------------- */

static void test_sharing_rules_are_checked(void **state)
{
    (void)state;
#define SH HDR QA "sharing:\n"
    static const struct err_case cases[] = {
        {SH "  - {share: 10}\n", 6, 5, "kind", "missing required key 'kind'"},
        {SH "  - {kind: halves}\n", 6, 12, "kind", "unknown kind 'halves'"},
        {SH "  - {kind: memory}\n", 6, 5, "gpuMemMib", "missing required key 'gpuMemMib'"},
        {SH "  - {kind: mig}\n", 6, 5, "migProfile", "missing required key 'migProfile'"},
        {SH "  - {kind: timeslice, share: 0}\n", 6, 30, "share", "'0' is out of range (1 to 100)"},
        {SH "  - {kind: timeslice, gpuMemMib: 5}\n", 6, 34, "gpuMemMib",
         "gpuMemMib is for kind memory only"},
        {SH "  - {kind: timeslice, pods: some}\n", 6, 29, "pods", "unknown pods 'some'"},
    };
#undef SH
    RUN(cases);
}

/* Sharing rules worked by hand on four GPU pods and one CPU pod: with share 100 every pod a
 * rule looks at is turned, by the first rule that looks at it. */
static void test_sharing_rules_turn_pods_by_kind(void **state)
{
    (void)state;
    struct gs_qconfig *qc = parse_ok(HDR QA "sharing:\n"
                                            "  - {kind: memory, pods: shared, gpuMemMib: 16384}\n"
                                            "  - {kind: mig, pods: whole, migProfile: 1g.10gb}\n");
    assert_int_equal(gs_qconfig_sharing_rules(qc), 2);
    static const char csv[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                              "half,1,1,1,500\n"  /* memory: 16384 x 500 / 1000 = 8192 MiB */
                              "tiny,1,1,1,1\n"    /* memory: 16384 x 1 / 1000 = 16 MiB */
                              "two,1,1,2,1000\n"  /* mig: 2 instances of 1g.10gb */
                              "nine,1,1,9,1000\n" /* mig of 9 instances is refused: unchanged */
                              "cpu,1,1,0,0\n";    /* no GPU: unchanged */
    struct gs_trace_pods pods;
    struct gs_diag d;
    assert_int_equal(gs_trace_parse_pods(csv, strlen(csv), "p.csv", &pods, &d), GS_OK);
    uint32_t turned[3];
    assert_int_equal(gs_qconfig_apply_sharing(qc, &pods, 42, turned), GS_OK);
    assert_int_equal(turned[0], 2);
    assert_int_equal(turned[1], 1);
    assert_int_equal(turned[2], 0);
    assert_int_equal(pods.has_sharing, 1);
    assert_int_equal(pods.v[0].gpu_mem_mib, 8192);
    assert_int_equal(pods.v[0].gpu_milli, 0);
    assert_int_equal(pods.v[1].gpu_mem_mib, 16);
    assert_string_equal(pods.v[2].mig_profile, "1g.10gb");
    assert_int_equal(pods.v[2].num_gpu, 2);
    assert_string_equal(pods.v[3].mig_profile, "");
    assert_int_equal(pods.v[3].gpu_milli, 1000);
    assert_int_equal(pods.v[4].num_gpu, 0);
    gs_trace_pods_fini(&pods);
    gs_qconfig_free(qc);
}

/* share 50 over 200 like pods: the same seed turns the same pods; the count is near half. */
static void test_sharing_rules_draw_by_seed(void **state)
{
    (void)state;
    struct gs_qconfig *qc =
        parse_ok(HDR QA "sharing:\n  - {kind: timeslice, pods: any, share: 50}\n");
    char csv[16384];
    size_t len = (size_t)snprintf(csv, sizeof csv, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
    for (int i = 0; i < 200; i++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "p%d,1,1,1,1000\n", i);
    struct gs_trace_pods a, b, c;
    struct gs_diag d;
    uint32_t ta[3], tb[3], tc[3];
    assert_int_equal(gs_trace_parse_pods(csv, len, "p.csv", &a, &d), GS_OK);
    assert_int_equal(gs_trace_parse_pods(csv, len, "p.csv", &b, &d), GS_OK);
    assert_int_equal(gs_trace_parse_pods(csv, len, "p.csv", &c, &d), GS_OK);
    (void)gs_qconfig_apply_sharing(qc, &a, 7, ta);
    (void)gs_qconfig_apply_sharing(qc, &b, 7, tb);
    (void)gs_qconfig_apply_sharing(qc, &c, 8, tc);
    assert_int_equal(ta[2], tb[2]);
    assert_in_range(ta[2], 70, 130);
    bool same = true;
    for (uint32_t i = 0; i < a.n; i++) {
        assert_int_equal(a.v[i].timeslice_slots, b.v[i].timeslice_slots);
        same &= a.v[i].timeslice_slots == c.v[i].timeslice_slots;
    }
    assert_false(same); /* another seed, other pods */
    gs_trace_pods_fini(&a);
    gs_trace_pods_fini(&b);
    gs_trace_pods_fini(&c);
    gs_qconfig_free(qc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_builds_the_documented_tree),
        cmocka_unit_test(test_example_sends_ls_pods_to_inference),
        cmocka_unit_test(test_hash_is_stable_and_weighted),
        cmocka_unit_test(test_rules_match_model_count_prefix_and_qos),
        cmocka_unit_test(test_unmatched_pod_is_enoent),
        cmocka_unit_test(test_quantities_in_internal_units),
        cmocka_unit_test(test_weights_reach_the_engine),
        cmocka_unit_test(test_min_runtime_is_inherited_by_the_engine),
        cmocka_unit_test(test_order_aliases_and_nulls),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_buffer_size_limit),
        cmocka_unit_test(test_apply_maps_engine_errors_to_lines),
        cmocka_unit_test(test_errors_yaml),
        cmocka_unit_test(test_errors_yaml_limits),
        cmocka_unit_test(test_errors_keys_and_types),
        cmocka_unit_test(test_names_are_dns1123_subdomains),
        cmocka_unit_test(test_pod_groups_rules_are_checked),
        cmocka_unit_test(test_pod_groups_form_gangs_of_consecutive_like_pods),
        cmocka_unit_test(test_sharing_rules_are_checked),
        cmocka_unit_test(test_sharing_rules_turn_pods_by_kind),
        cmocka_unit_test(test_sharing_rules_draw_by_seed),
        cmocka_unit_test(test_errors_values),
        cmocka_unit_test(test_by_model_reaches_the_engine),
        cmocka_unit_test(test_errors_by_model),
        cmocka_unit_test(test_errors_tree),
        cmocka_unit_test(test_errors_tree_limits),
        cmocka_unit_test(test_errors_assignment),
        cmocka_unit_test(test_errors_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
