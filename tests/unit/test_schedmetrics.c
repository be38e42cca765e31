/*
 * The scheduler's /metrics text (src/k8s/schedmetrics.c), every figure worked by hand:
 *  - the two latency histograms from known observations: exact cumulative bucket counts on
 *    kube-scheduler's bounds, _sum and _count;
 *  - the queue and node-pool series of a small world (kworld.h) after one best-fit cycle;
 *  - the pool cap and its left-out gauge; the render's length when the buffer is short.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpusched/err.h"
#include "gpusched/kworld.h"
#include "gpusched/schedmetrics.h"

/* The whole text of a scrape (caller frees). */
static char *render(struct gs_schedmetrics *m)
{
    size_t n = gs_schedmetrics_render(m, NULL, 0);
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    assert_int_equal(gs_schedmetrics_render(m, buf, n + 1), n);
    assert_int_equal(strlen(buf), n);
    return buf;
}

/* Asserts the text holds the sample line `series value`. */
static void expect_line(const char *text, const char *series, const char *value)
{
    char line[512];
    (void)snprintf(line, sizeof(line), "\n%s %s\n", series, value);
    if (!strstr(text, line))
        fail_msg("no line '%s %s' in:\n%s", series, value, text);
}

static void expect_absent(const char *text, const char *prefix)
{
    char line[512];
    (void)snprintf(line, sizeof(line), "\n%s", prefix);
    if (strstr(text, line))
        fail_msg("'%s' should not be there", prefix);
}

#define ATT "gpusched_scheduling_attempt_duration_seconds"
#define DEC "gpusched_scheduling_decision_duration_seconds"
#define POD "gpusched_pod_scheduling_duration_seconds"

static void test_histograms_count_what_was_observed(void **state)
{
    (void)state;
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    /* Before any cycle: counted, not observed. */
    gs_schedmetrics_attempt(m, GS_SCHED_SCHEDULED);
    /* A cycle of 9 ms that decided 3 pods: 3 ms each, in (0.002, 0.004]. */
    gs_schedmetrics_cycle(m, 0.009, 1, 3);
    gs_schedmetrics_attempt(m, GS_SCHED_SCHEDULED);
    gs_schedmetrics_attempt(m, GS_SCHED_SCHEDULED);
    gs_schedmetrics_attempt(m, GS_SCHED_UNSCHEDULABLE);
    /* One of 100 ms deciding 1: in (0.064, 0.128]. A cycle deciding none keeps that share. */
    gs_schedmetrics_cycle(m, 0.1, 0, 1);
    gs_schedmetrics_cycle(m, 5.0, 0, 0);
    gs_schedmetrics_attempt(m, GS_SCHED_ERROR);
    /* Pods: 5 ms (<= 0.01), 30 ms (0.02, 0.04], 100 s (81.92, 163.84], 6000 s (+Inf); a
     * negative (unknown) one is ignored. Sum 6100.035. */
    gs_schedmetrics_pod_scheduled(m, 0.005);
    gs_schedmetrics_pod_scheduled(m, 0.03);
    gs_schedmetrics_pod_scheduled(m, 100);
    gs_schedmetrics_pod_scheduled(m, 6000);
    gs_schedmetrics_pod_scheduled(m, -1);
    char *t = render(m);

    expect_line(t, "gpusched_scheduling_attempts_total{result=\"scheduled\"}", "3");
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"0.001\"}", "0");
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"0.002\"}", "0");
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"0.004\"}", "2");
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"16.384\"}", "2"); /* 0.001 x 2^14 */
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"+Inf\"}", "2");
    expect_line(t, ATT "_sum{result=\"scheduled\"}", "0.006");
    expect_line(t, ATT "_count{result=\"scheduled\"}", "2");
    expect_line(t, ATT "_bucket{result=\"unschedulable\",le=\"0.004\"}", "1");
    expect_line(t, ATT "_sum{result=\"unschedulable\"}", "0.003");
    expect_line(t, ATT "_bucket{result=\"error\",le=\"0.064\"}", "0");
    expect_line(t, ATT "_bucket{result=\"error\",le=\"0.128\"}", "1");
    expect_line(t, ATT "_sum{result=\"error\"}", "0.1");
    expect_line(t, ATT "_count{result=\"error\"}", "1");
    expect_absent(t, ATT "_bucket{result=\"scheduled\",le=\"32.768\"}"); /* 15 bounds only */
    /* The fine histogram holds the same four observations, every result together, in bounds
     * 4e-6 x 2^k: 3 ms x 3 in (0.002048, 0.004096], 100 ms in (0.065536, 0.131072]. */
    expect_line(t, DEC "_bucket{le=\"0.002048\"}", "0");
    expect_line(t, DEC "_bucket{le=\"0.004096\"}", "3");
    expect_line(t, DEC "_bucket{le=\"0.065536\"}", "3");
    expect_line(t, DEC "_bucket{le=\"0.131072\"}", "4");
    expect_line(t, DEC "_bucket{le=\"2.09715\"}", "4"); /* 4e-6 x 2^19, %g's 6 digits */
    expect_line(t, DEC "_bucket{le=\"+Inf\"}", "4");
    expect_line(t, DEC "_sum", "0.109");
    expect_line(t, DEC "_count", "4");
    expect_absent(t, DEC "_bucket{le=\"4.1943\"}"); /* 20 bounds only */

    expect_line(t, POD "_bucket{le=\"0.01\"}", "1");
    expect_line(t, POD "_bucket{le=\"0.02\"}", "1");
    expect_line(t, POD "_bucket{le=\"0.04\"}", "2");
    expect_line(t, POD "_bucket{le=\"81.92\"}", "2");
    expect_line(t, POD "_bucket{le=\"163.84\"}", "3");
    expect_line(t, POD "_bucket{le=\"5242.88\"}", "3"); /* 0.01 x 2^19, the last bound */
    expect_line(t, POD "_bucket{le=\"+Inf\"}", "4");
    expect_line(t, POD "_sum", "6100.035");
    expect_line(t, POD "_count", "4");
    /* The cycle histogram holds the three cycles: 9 ms, 100 ms, 5 s. */
    expect_line(t, "gpusched_cycle_duration_seconds_count", "3");
    expect_line(t, "gpusched_cycle_duration_seconds_bucket{le=\"0.01\"}", "1");
    expect_line(t, "gpusched_cycle_duration_seconds_bucket{le=\"2.5\"}", "2");
    expect_line(t, "gpusched_cycle_duration_seconds_bucket{le=\"+Inf\"}", "3");
    /* No snapshot yet: no queue or pool samples, the left-out gauges 0. */
    expect_absent(t, "gpusched_queue_allocated{");
    expect_absent(t, "gpusched_gpus{");
    expect_line(t, "gpusched_metrics_pools_left_out", "0");

    /* A short buffer gets what fits, NUL-terminated, and the whole length back. */
    char small[64];
    assert_int_equal(gs_schedmetrics_render(m, small, sizeof(small)), strlen(t));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, t, sizeof(small) - 1);
    free(t);
    gs_schedmetrics_free(m);
}

/* GET path from 127.0.0.1:port over HTTP/1.0; returns the whole answer, headers and body. */
static char *http_get(uint16_t port, const char *path, size_t *len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    for (;;) {
        if (got == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
        ssize_t r = read(fd, buf + got, cap - got);
        assert_true(r >= 0);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    (void)close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
}

static void apply(struct gs_kworld *w, const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        fail_msg("bad JSON at %d: %s", je.position, je.text);
    char err[256] = "";
    int rc = gs_kworld_apply(w, GS_KADDED, o, 0, err, sizeof(err));
    if (rc != GS_OK)
        fail_msg("apply: %s (%s)", gs_strerror(rc), err);
    json_decref(o);
}

static void add_node(struct gs_kworld *w, const char *name, const char *labels, int cap_gpu,
                     int alloc_gpu)
{
    char t[1024];
    (void)snprintf(t, sizeof(t),
                   "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
                   "\"labels\":%s},\"status\":{\"capacity\":{\"cpu\":\"32\",\"memory\":\"256Gi\","
                   "\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"},\"allocatable\":{\"cpu\":\"32\","
                   "\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"}}}",
                   name, labels, cap_gpu, alloc_gpu);
    apply(w, t);
}

/* A pending pod of queue team-a asking 1 CPU and 1 GiB, with `gpus` whole GPUs or the
 * annotations `ann`, and `extra` spec members (",\"nodeSelector\":{...}" or ""). */
static void add_pod(struct gs_kworld *w, const char *name, const char *gpus, const char *ann,
                    const char *extra)
{
    char t[1500];
    (void)snprintf(
        t, sizeof(t),
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
        "\"ns\",\"uid\":\"uid-%s\",\"labels\":{\"gpusched.io/queue\":\"team-a\"},"
        "\"annotations\":%s},\"spec\":{\"schedulerName\":\"gpusched\"%s,\"containers\":[{"
        "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"%s%s%s}}}]}}",
        name, name, ann, extra, gpus ? ",\"nvidia.com/gpu\":\"" : "", gpus ? gpus : "",
        gpus ? "\"" : "");
    apply(w, t);
}

/*
 * Nodes: a (A100, 4 GPUs), b (H100, capacity 2, allocatable 1: its GPU 1 unhealthy), c (no
 * product label, no GPU). Queue team-a: gpu quota 2 limit 4, cpu quota 8 no limit, memory
 * neither. Pods of team-a, 1 CPU and 1 GiB each: p1 2 whole GPUs, p2 a half GPU (KAI's
 * gpu-fraction) on the A100s, p3 8 GPUs (over the limit: pending). Best fit puts p1 on a (b has
 * one healthy GPU) and p2 on a's third GPU (its nodeSelector).
 *
 * Pools: A100 allocated 2.5 free 1.5 unhealthy 0; H100 0, 1, 1; "" 0, 0, 0.
 * Queue team-a: allocated gpu 2.5 GPUs, cpu 2 cores, memory 2 GiB = 2147483648 bytes; quota gpu
 * 2, cpu 8, memory 0; limit gpu 4, cpu and memory +Inf; pending 1.
 *
 * Fragmentation: the target workload is the three pods, p = 1/3 each: T1 2 whole GPUs, T2 500
 * milli on one, T3 8 GPUs. Node a after the cycle has idle 1000, 1000, 500, 0 milli: T1 fits
 * on the two free GPUs and the 500 left on the third is too small for a whole GPU (q2: 500);
 * T2 can use every idle GPU (0); T3 needs more GPUs than a has (q2, all idle: 2500); F(a) =
 * (500 + 0 + 2500) / 3 = 1000 milli = 1 GPU. Node b has 1000 idle on its healthy GPU (the
 * unhealthy one offers 0): T1 short of GPUs (1000), T2 fits (0), T3 short (1000); F(b) = 2000 / 3
 * milli = 0.666666667 GPU.
 */
static void test_queue_and_pool_series_of_a_small_world(void **state)
{
    (void)state;
    struct gs_kworld_config cfg = {.policy = "bestfit"};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    add_node(w, "a", "{\"nvidia.com/gpu.product\":\"A100\"}", 4, 4);
    add_node(w, "b", "{\"nvidia.com/gpu.product\":\"H100\"}", 2, 1);
    add_node(w, "c", "{}", 0, 0);
    apply(w, "{\"apiVersion\":\"scheduling.gpusched.io/v1alpha1\",\"kind\":\"Queue\",\"metadata\":"
             "{\"name\":\"team-a\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":2,\"limit\":4},"
             "\"cpu\":{\"quota\":8,\"limit\":-1}}}}");
    add_pod(w, "p1", "2", "{}", "");
    add_pod(w, "p2", NULL, "{\"gpu-fraction\":\"0.5\"}",
            ",\"nodeSelector\":{\"nvidia.com/gpu.product\":\"A100\"}");
    add_pod(w, "p3", "8", "{}", "");
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)), GS_OK);

    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    assert_int_equal(gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w),
                                             gs_kworld_workload(w, NULL), NULL),
                     GS_OK);
    char *t = render(m);
    expect_line(t, "gpusched_gpus{pool=\"A100\",state=\"allocated\"}", "2.5");
    expect_line(t, "gpusched_gpus{pool=\"A100\",state=\"free\"}", "1.5");
    expect_line(t, "gpusched_gpus{pool=\"A100\",state=\"unhealthy\"}", "0");
    expect_line(t, "gpusched_gpus{pool=\"H100\",state=\"allocated\"}", "0");
    expect_line(t, "gpusched_gpus{pool=\"H100\",state=\"free\"}", "1");
    expect_line(t, "gpusched_gpus{pool=\"H100\",state=\"unhealthy\"}", "1");
    expect_line(t, "gpusched_gpus{pool=\"\",state=\"free\"}", "0");
    expect_line(t, "gpusched_gpu_fragmentation{pool=\"A100\"}", "1");
    expect_line(t, "gpusched_gpu_fragmentation{pool=\"H100\"}", "0.666666667");
    expect_line(t, "gpusched_gpu_fragmentation{pool=\"\"}", "0");
    expect_line(t, "gpusched_queue_allocated{queue=\"team-a\",resource=\"gpu\"}", "2.5");
    expect_line(t, "gpusched_queue_allocated{queue=\"team-a\",resource=\"cpu\"}", "2");
    expect_line(t, "gpusched_queue_allocated{queue=\"team-a\",resource=\"memory\"}", "2147483648");
    expect_line(t, "gpusched_queue_quota{queue=\"team-a\",resource=\"gpu\"}", "2");
    expect_line(t, "gpusched_queue_quota{queue=\"team-a\",resource=\"cpu\"}", "8");
    expect_line(t, "gpusched_queue_quota{queue=\"team-a\",resource=\"memory\"}", "0");
    expect_line(t, "gpusched_queue_limit{queue=\"team-a\",resource=\"gpu\"}", "4");
    expect_line(t, "gpusched_queue_limit{queue=\"team-a\",resource=\"cpu\"}", "+Inf");
    expect_line(t, "gpusched_queue_pending_pods{queue=\"team-a\"}", "1");
    assert_non_null(strstr(t, "\ngpusched_queue_fair_share{queue=\"team-a\",resource=\"gpu\"} "));
    expect_line(t, "gpusched_metrics_queues_left_out", "0");
    expect_line(t, "gpusched_metrics_pools_left_out", "0");
    expect_absent(t, "gpusched_queue_model_fair_share{"); /* no byModel: no per-model division */
    free(t);

    /* Another label: every node lacks it, so one pool "" of all 6 GPUs (2.5 held, 1 bad). */
    assert_int_equal(gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w), NULL,
                                             "example.com/rack"),
                     GS_OK);
    t = render(m);
    expect_line(t, "gpusched_gpus{pool=\"\",state=\"allocated\"}", "2.5");
    expect_line(t, "gpusched_gpus{pool=\"\",state=\"free\"}", "2.5");
    expect_line(t, "gpusched_gpus{pool=\"\",state=\"unhealthy\"}", "1");
    expect_absent(t, "gpusched_gpu_fragmentation{"); /* no workload given */
    assert_non_null(strstr(t, "(node label example.com/rack)"));
    free(t);
    gs_schedmetrics_free(m);
    gs_kworld_free(w);
}

/*
 * Per-GPU-model series, present once a queue has spec.resources.gpu.byModel. Nodes a (A100, 4
 * GPUs) and b (H100, 2). Queue team-a: gpu quota 2, limit 4, byModel H100 quota 2. Pod p1 asks
 * 2 whole GPUs with a nodeSelector for the A100. As the cycle starts p1 is pending and may use
 * either model as far as its model mask goes (the mask is any; the selector is a node filter),
 * so it counts 2 GPUs of demand on each. H100, 2 GPUs: team-a wants 2, its H100 quota gives 2:
 * fair 2. A100, 4 GPUs: wants 2, no A100 entry gives 0, the 4 left by weight go to it up to its
 * want: fair 2. p1 lands on a: allocated A100 2, H100 0.
 */
static void test_queue_model_series(void **state)
{
    (void)state;
    struct gs_kworld_config cfg = {.policy = "bestfit"};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    add_node(w, "a", "{\"nvidia.com/gpu.product\":\"A100\"}", 4, 4);
    add_node(w, "b", "{\"nvidia.com/gpu.product\":\"H100\"}", 2, 2);
    apply(w, "{\"apiVersion\":\"scheduling.gpusched.io/v1alpha1\",\"kind\":\"Queue\",\"metadata\":"
             "{\"name\":\"team-a\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":2,\"limit\":4,"
             "\"byModel\":{\"H100\":{\"quota\":2}}}}}}");
    add_pod(w, "p1", "2", "{}", ",\"nodeSelector\":{\"nvidia.com/gpu.product\":\"A100\"}");
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)), GS_OK);
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    assert_int_equal(
        gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w), NULL, NULL), GS_OK);
    char *t = render(m);
    expect_line(t, "gpusched_queue_model_fair_share{queue=\"team-a\",model=\"H100\"}", "2");
    expect_line(t, "gpusched_queue_model_fair_share{queue=\"team-a\",model=\"A100\"}", "2");
    expect_line(t, "gpusched_queue_model_demand{queue=\"team-a\",model=\"H100\"}", "2");
    expect_line(t, "gpusched_queue_model_demand{queue=\"team-a\",model=\"A100\"}", "2");
    expect_line(t, "gpusched_queue_model_allocated{queue=\"team-a\",model=\"A100\"}", "2");
    expect_line(t, "gpusched_queue_model_allocated{queue=\"team-a\",model=\"H100\"}", "0");
    free(t);
    gs_schedmetrics_free(m);
    gs_kworld_free(w);
}

/* A pod asking device memory alone (KAI's gpu-memory: 20000 MiB) holds no milli: on an 80 GB
 * GPU (label nvidia.com/gpu.memory 81920 MiB) its allocated part is 20000 / 81920 = 0.244140625
 * of a GPU, the rest of the node's 2 GPUs free: 1.755859375. */
static void test_memory_fraction_counts_as_allocated(void **state)
{
    (void)state;
    struct gs_kworld_config cfg = {.policy = "bestfit"};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    add_node(w, "m", "{\"nvidia.com/gpu.product\":\"A100\",\"nvidia.com/gpu.memory\":\"81920\"}", 2,
             2);
    apply(w, "{\"apiVersion\":\"scheduling.gpusched.io/v1alpha1\",\"kind\":\"Queue\",\"metadata\":"
             "{\"name\":\"team-a\"},\"spec\":{}}");
    add_pod(w, "mem", NULL, "{\"gpu-memory\":\"20000\"}", "");
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)), GS_OK);
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    assert_int_equal(
        gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w), NULL, NULL), GS_OK);
    char *t = render(m);
    expect_line(t, "gpusched_gpus{pool=\"A100\",state=\"allocated\"}", "0.244140625");
    expect_line(t, "gpusched_gpus{pool=\"A100\",state=\"free\"}", "1.75585938");
    expect_line(t, "gpusched_queue_pending_pods{queue=\"team-a\"}", "0");
    free(t);
    gs_schedmetrics_free(m);
    gs_kworld_free(w);
}

/* GS_SCHEDMETRICS_POOLS_MAX + 6 nodes, each its own pool (two share one past the cap): 64 pools
 * shown, the other 6 distinct values counted once each; a label value's quote is escaped. */
static void test_pool_cap_counts_what_is_left_out(void **state)
{
    (void)state;
    struct gs_kworld_config cfg = {.policy = "bestfit"};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    for (int i = 0; i < GS_SCHEDMETRICS_POOLS_MAX + 7; i++) {
        char name[16], labels[64];
        (void)snprintf(name, sizeof(name), "n%d", i);
        int pool = i == GS_SCHEDMETRICS_POOLS_MAX + 6 ? GS_SCHEDMETRICS_POOLS_MAX : i;
        (void)snprintf(labels, sizeof(labels), "{\"rack\":\"r%d\"}", pool);
        add_node(w, name, labels, 1, 1);
    }
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 1000, NULL, err, sizeof(err)), GS_OK);
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    assert_int_equal(
        gs_schedmetrics_observe(m, gs_kworld_engine(w), gs_kworld_cluster(w), NULL, "rack"), GS_OK);
    char *t = render(m);
    expect_line(t, "gpusched_metrics_pools_left_out", "6");
    expect_line(t, "gpusched_gpus{pool=\"r63\",state=\"free\"}", "1");
    expect_absent(t, "gpusched_gpus{pool=\"r64\"");
    /* 64 pools: more than the 16 KiB a scrape's buffer starts with, so it grows; the body
     * served is the render, whole. */
    assert_true(strlen(t) > 16384);
    uint16_t port = 0;
    assert_int_equal(gs_schedmetrics_serve(m, "127.0.0.1:0", &port), GS_OK);
    size_t len = 0;
    char *answer = http_get(port, "/metrics", &len);
    assert_true(len > 12 && strncmp(answer, "HTTP/1.", 7) == 0 &&
                strncmp(answer + 9, "200", 3) == 0);
    const char *body = strstr(answer, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, t);
    free(answer);
    free(t);
    /* NULL engine: an empty snapshot. */
    assert_int_equal(gs_schedmetrics_observe(m, NULL, NULL, NULL, "a\"b"), GS_OK);
    t = render(m);
    expect_absent(t, "gpusched_gpus{");
    assert_non_null(strstr(t, "(node label a\\\"b)"));
    free(t);
    assert_int_equal(gs_schedmetrics_observe(NULL, NULL, NULL, NULL, NULL), GS_EINVAL);
    gs_schedmetrics_free(m);
    gs_kworld_free(w);
}

static void test_charge_series_appear_once_set(void **state)
{
    (void)state;
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    char *t = render(m);
    expect_absent(t, "gpusched_usage_charged"); /* no --accounting: not shown */
    free(t);
    /* Four pods at 25 % of one GPU for an hour: 3,600 GPU-seconds, 1 GPU now. */
    const struct gs_schedmetrics_charge rows[] = {{"train", 3600, 1.0}, {"q\"x", 0.5, 0.25}};
    assert_int_equal(gs_schedmetrics_set_charges(m, rows, 2), GS_OK);
    t = render(m);
    assert_non_null(strstr(t, "# TYPE gpusched_usage_charged_gpu_seconds_total counter\n"));
    assert_non_null(strstr(t, "# TYPE gpusched_usage_charged_gpus gauge\n"));
    expect_line(t, "gpusched_usage_charged_gpu_seconds_total{queue=\"train\"}", "3600");
    expect_line(t, "gpusched_usage_charged_gpus{queue=\"train\"}", "1");
    expect_line(t, "gpusched_usage_charged_gpu_seconds_total{queue=\"q\\\"x\"}", "0.5");
    expect_line(t, "gpusched_usage_charged_gpus{queue=\"q\\\"x\"}", "0.25");
    free(t);
    assert_int_equal(gs_schedmetrics_set_charges(m, NULL, 1), GS_EINVAL);
    assert_int_equal(gs_schedmetrics_set_charges(NULL, rows, 1), GS_EINVAL);
    gs_schedmetrics_free(m);
}

/* Decisions far under kube-scheduler's first bucket (1 ms) get their own buckets. */
static void test_fine_histogram_resolves_microseconds(void **state)
{
    (void)state;
    struct gs_schedmetrics *m = NULL;
    assert_int_equal(gs_schedmetrics_new(&m), GS_OK);
    /* 100 us deciding 10 pods: 10 us each, in (8e-06, 1.6e-05]; then 1 ms deciding 4: 250 us
     * each, in (0.000128, 0.000256]. */
    gs_schedmetrics_cycle(m, 0.0001, 0, 10);
    for (int i = 0; i < 10; i++)
        gs_schedmetrics_attempt(m, GS_SCHED_SCHEDULED);
    gs_schedmetrics_cycle(m, 0.001, 0, 4);
    for (int i = 0; i < 4; i++)
        gs_schedmetrics_attempt(m, i < 3 ? GS_SCHED_SCHEDULED : GS_SCHED_UNSCHEDULABLE);
    char *t = render(m);
    expect_line(t, DEC "_bucket{le=\"4e-06\"}", "0");
    expect_line(t, DEC "_bucket{le=\"8e-06\"}", "0");
    expect_line(t, DEC "_bucket{le=\"1.6e-05\"}", "10");
    expect_line(t, DEC "_bucket{le=\"0.000128\"}", "10");
    expect_line(t, DEC "_bucket{le=\"0.000256\"}", "14");
    expect_line(t, DEC "_count", "14");
    /* kube-scheduler's buckets see all 14 below 1 ms. */
    expect_line(t, ATT "_bucket{result=\"scheduled\",le=\"0.001\"}", "13");
    free(t);
    gs_schedmetrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histograms_count_what_was_observed),
        cmocka_unit_test(test_fine_histogram_resolves_microseconds),
        cmocka_unit_test(test_queue_and_pool_series_of_a_small_world),
        cmocka_unit_test(test_queue_model_series),
        cmocka_unit_test(test_memory_fraction_counts_as_allocated),
        cmocka_unit_test(test_pool_cap_counts_what_is_left_out),
        cmocka_unit_test(test_charge_series_appear_once_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
