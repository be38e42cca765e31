/*
 * Benchmark of the multi-tenant engine at large-cluster scale (issue 3's targets):
 *   1. scheduling decisions on 10,000 nodes / 80,000 GPUs of four models with 100,000 pending
 *      pods in 50 queues (5 departments x 10 teams): median and p99 time per decision,
 *      including queue ordering (one job tried per cycle, timed around the cycle);
 *   2. one preemption decision with 20,000 running pods filling the cluster; again with every pod
 *      covered by one of 50 disruption budgets (one per queue, every other one spent), so that
 *      each node's victims are classified and the violating ones ordered last;
 *   3. a 512-pod gang placed on a free cluster, and refused on a cluster with 300 free GPUs;
 *   4. the live cluster (the issue "The core for a live cluster"): decisions when half of the
 *      pending pods carry a nodeSelector (one of 4 zones) or a toleration (10% of the nodes
 *      tainted); the cost of a node update (a label change re-judged in every filter class, a
 *      GPU health flip); adopting 100,000 running pods (60,000 one-GPU, 40,000 fractional or
 *      CPU-only) after a restart; and the memory of the engine per node and per pod.
 * The engine keeps its state incrementally; nothing is rebuilt per cycle.
 *
 * With --policy fgd (or fgdband) the engine's target workload is learned from 10,000 requests drawn
 * from the same mix the benchmark submits (random_req, its own seed), as a live scheduler learns it
 * from the pods it sees.
 *
 *   bench_tenant [--policy bestfit|fgd|...] [--decisions N] [--full-scan]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"
#include "gpusched/tenant.h"

#include "bench_util.h"

#define NODES 10000
#define QUEUES 50

/* Every failure of the benchmark's own setup ends here, with where it happened. */
static _Noreturn void die_at(int line)
{
    fprintf(stderr, "bench_tenant: step at bench/bench_tenant.c:%d failed\n", line);
    exit(1);
}
#define die() die_at(__LINE__)

/* The target workload of an fgd engine (make_engine); built in main. */
static struct gs_workload target_workload;

static const char *models[] = {"A100", "H100", "L40S", "T4"};

static struct gs_cluster *make_cluster(void)
{
    struct gs_cluster *c;
    if (gs_cluster_new(&c))
        die();
    char name[32];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof(name), "node-%05d", i);
        int m = i % 10 < 4 ? 0 : i % 10 < 7 ? 1 : i % 10 < 9 ? 2 : 3;
        struct gs_node_spec s = {name, 128000, 1048576, 256, 8, models[m], 0};
        if (gs_cluster_add_node(c, &s, NULL))
            die();
    }
    return c;
}

/* BENCH_REASONS=1 prints the first reasons pods wait, to see why a run places little. */
static int reasons_left = 5;
static void on_event(void *ctx, const struct gs_event *ev)
{
    (void)ctx;
    if (ev->kind == GS_EV_UNSCHEDULABLE && reasons_left > 0 && getenv("BENCH_REASONS")) {
        reasons_left--;
        printf("reason: pod %u: %s\n", ev->pod, ev->text);
    }
}

struct setup {
    struct gs_cluster *c;
    struct gs_engine *e;
    uint32_t leaves[QUEUES];
    uint32_t pc[3];
};

static void make_engine(struct setup *s, const char *policy, uint32_t to_find, bool preempt,
                        uint32_t attempts_max)
{
    s->c = make_cluster();
    struct gs_engine_config cfg = {.policy = policy,
                                   .workload = target_workload.n_types ? &target_workload : NULL,
                                   .preemption = preempt,
                                   .reclaim = preempt,
                                   .nodes_to_find = to_find,
                                   .cycle_attempts_max = attempts_max,
                                   .on_event = on_event};
    int err = gs_engine_new(s->c, &cfg, &s->e);
    if (err) {
        fprintf(stderr, "bench_tenant: engine with policy %s: %s\n", policy, gs_strerror(err));
        exit(1);
    }
    char name[32];
    for (int d = 0; d < 5; d++) {
        snprintf(name, sizeof(name), "dept%d", d);
        struct gs_queue_spec ds = {
            name, GS_QUEUE_ROOT, {16000000, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED}, 1,
            0};
        uint32_t did;
        if (gs_engine_add_queue(s->e, &ds, &did))
            die();
        for (int t = 0; t < 10; t++) {
            snprintf(name, sizeof(name), "team%d.%d", d, t);
            struct gs_queue_spec ts = {
                name,      did, {1600000, 0, 0}, {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED},
                1 + t % 3, 0};
            if (gs_engine_add_queue(s->e, &ts, &s->leaves[d * 10 + t]))
                die();
        }
    }
    const char *pcn[] = {"low", "normal", "high"};
    int32_t pcv[] = {10, 50, 90};
    for (int i = 0; i < 3; i++) {
        struct gs_priority_class_spec ps = {pcn[i], pcv[i], -1};
        if (gs_engine_add_priority_class(s->e, &ps, &s->pc[i]))
            die();
    }
}

static void free_setup(struct setup *s)
{
    gs_engine_free(s->e);
    gs_cluster_free(s->c);
}

static struct gs_pod_req random_req(struct gs_rng *rng, const struct gs_cluster *c)
{
    struct gs_pod_req r = GS_POD_REQ(4000, 16384, 1, 1000, GS_MODEL_ANY);
    uint32_t k = gs_rng_below(rng, 100);
    if (k < 40) {
        r.num_gpu = 1;
    } else if (k < 70) {
        r.gpu_milli = 100 * (1 + (int32_t)gs_rng_below(rng, 9));
    } else if (k < 85) {
        r.num_gpu = 2;
    } else if (k < 95) {
        r.num_gpu = 4;
    } else {
        r.num_gpu = 8;
    }
    r.cpu_milli = 2000 * r.num_gpu;
    if (gs_rng_below(rng, 10) == 0) {
        const char *m = models[gs_rng_below(rng, 4)];
        r.gpu_model_mask = gs_cluster_model_mask(c, m, strlen(m));
    }
    return r;
}

/* Runs n cycles of one job each, timing every one into t[0..n) (sorted on return); returns the
 * pods they bound. */
static uint32_t time_cycles(struct gs_engine *e, struct gs_rng *rng, int n, double *t)
{
    uint32_t bound = 0;
    for (int i = 0; i < n; i++) {
        struct gs_cycle_stats st;
        double a = now_us();
        if (gs_engine_cycle(e, i, rng, &st))
            die();
        t[i] = now_us() - a;
        bound += st.bound;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return bound;
}

/* The target workload for fgd: 10,000 requests of the benchmark's mix (its own seed). */
static void build_target_workload(void)
{
    enum { SAMPLE = 10000 };
    struct gs_cluster *c = make_cluster(); /* the same model ids as every run's cluster */
    struct gs_pod_req *reqs = calloc(SAMPLE, sizeof(*reqs));
    const char **specs = calloc(SAMPLE, sizeof(*specs));
    if (!reqs || !specs)
        die();
    struct gs_rng rng;
    gs_rng_seed(&rng, 7);
    for (int i = 0; i < SAMPLE; i++) {
        reqs[i] = random_req(&rng, c);
        specs[i] = "";
        for (int m = 0; m < 4; m++)
            if (reqs[i].gpu_model_mask == gs_cluster_model_mask(c, models[m], strlen(models[m])))
                specs[i] = models[m];
    }
    if (gs_workload_build(reqs, specs, SAMPLE, 95, &target_workload))
        die();
    free(reqs);
    free(specs);
    gs_cluster_free(c);
}

static void decisions(const char *policy, uint32_t to_find, int n_decisions)
{
    struct setup s;
    make_engine(&s, policy, to_find, false, 1);
    struct gs_rng rng;
    gs_rng_seed(&rng, 7);
    for (int i = 0; i < 100000; i++) {
        struct gs_tpod_spec ps = {"p",
                                  s.leaves[gs_rng_below(&rng, QUEUES)],
                                  s.pc[gs_rng_below(&rng, 3)],
                                  GS_NO_GANG,
                                  random_req(&rng, s.c),
                                  -1};
        if (gs_engine_submit(s.e, &ps, 0, NULL))
            die();
    }
    double *t = malloc((size_t)n_decisions * sizeof(*t));
    uint32_t bound = time_cycles(s.e, &rng, n_decisions, t);
    printf("decisions (%s, %s): %d decisions with 100,000 pending pods in 50 queues, %u pods "
           "placed: median %.1f us, p99 %.1f us, max %.1f us\n",
           policy, to_find ? "bounded scan" : "full scan", n_decisions, bound, t[n_decisions / 2],
           t[(int)(n_decisions * 0.99)], t[n_decisions - 1]);
    free(t);
    free_setup(&s);
}

static void preemption(const char *policy, uint32_t to_find, bool budgets)
{
    struct setup s;
    /* One job per cycle, so the timed cycle is the preemptor's decision alone (the victim's
     * own retry would follow in the same cycle otherwise). */
    make_engine(&s, policy, to_find, true, 1);
    struct gs_rng rng;
    gs_rng_seed(&rng, 11);
    uint32_t budget[QUEUES] = {0};
    for (int q = 0; budgets && q < QUEUES; q++) {
        char name[32];
        (void)snprintf(name, sizeof(name), "ns/pdb-%d", q);
        if (gs_engine_add_budget(s.e, name, q % 2 ? 0 : 100000, &budget[q]))
            die();
    }
    /* 20,000 low-priority 4-GPU pods fill the 80,000 GPUs, spread over the 50 queues. */
    for (int i = 0; i < 20000; i++) {
        struct gs_tpod_spec ps = {"low",
                                  s.leaves[i % QUEUES],
                                  s.pc[0],
                                  GS_NO_GANG,
                                  GS_POD_REQ(8000, 16384, 4, 1000, GS_MODEL_ANY),
                                  -1};
        struct gs_pod_ident id = {
            NULL, "ns", NULL, GS_FILTER_DEFAULT, 0, false, {budget[i % QUEUES]}};
        if (gs_engine_submit_pod(s.e, &ps, &id, 0, NULL))
            die();
    }
    struct gs_cycle_stats st;
    double a = now_us();
    do {
        if (gs_engine_cycle(s.e, 0, &rng, &st))
            die();
    } while (st.bound > 0);
    double fill = now_us() - a;
    uint32_t running = 0;
    for (uint32_t q = 0; q < gs_engine_queue_count(s.e); q++) {
        struct gs_queue_info qi;
        gs_engine_queue_info(s.e, q, &qi);
        running += qi.running;
    }
    struct gs_tpod_spec hp = {
        "urgent", s.leaves[7], s.pc[2], GS_NO_GANG, GS_POD_REQ(8000, 16384, 4, 1000, GS_MODEL_ANY),
        -1};
    uint32_t id;
    gs_engine_submit(s.e, &hp, 1000, &id);
    a = now_us();
    if (gs_engine_cycle(s.e, 1000, &rng, &st))
        die();
    double t = now_us() - a;
    struct gs_tpod_info in;
    gs_engine_pod_info(s.e, id, &in);
    printf("preemption (%s%s): %u running pods (%.0f ms to place them); one preemption decision "
           "%.2f ms, %u evicted, preemptor %s\n",
           policy, budgets ? ", 50 budgets" : "", running, fill / 1000, t / 1000, st.evicted,
           in.state == GS_TPOD_RUNNING ? "running" : "NOT running");
    free_setup(&s);
}

static void gang(const char *policy, uint32_t to_find)
{
    struct setup s;
    make_engine(&s, policy, to_find, false, 0);
    struct gs_rng rng;
    gs_rng_seed(&rng, 13);
    struct gs_gang_spec gs = {"train-512", 512, 0};
    uint32_t g;
    gs_engine_add_gang(s.e, &gs, &g);
    for (int i = 0; i < 512; i++) {
        struct gs_tpod_spec ps = {
            "w", s.leaves[3], s.pc[1], g, GS_POD_REQ(4000, 16384, 1, 1000, GS_MODEL_ANY), -1};
        gs_engine_submit(s.e, &ps, 0, NULL);
    }
    struct gs_cycle_stats st;
    double a = now_us();
    gs_engine_cycle(s.e, 0, &rng, &st);
    double placed = now_us() - a;
    uint32_t bound = st.bound;
    free_setup(&s);

    /* Refusal by capacity: 300 GPUs free in all, under the 512 the gang needs. */
    make_engine(&s, policy, to_find, false, 0);
    for (int i = 0; i < 79700; i++) {
        struct gs_tpod_spec ps = {"fill",
                                  s.leaves[i % QUEUES],
                                  s.pc[0],
                                  GS_NO_GANG,
                                  GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY),
                                  -1};
        gs_engine_submit(s.e, &ps, 0, NULL);
    }
    gs_engine_cycle(s.e, 0, &rng, &st);
    gs_engine_add_gang(s.e, &gs, &g);
    for (int i = 0; i < 512; i++) {
        struct gs_tpod_spec ps = {
            "w", s.leaves[3], s.pc[1], g, GS_POD_REQ(1000, 1024, 1, 1000, GS_MODEL_ANY), -1};
        gs_engine_submit(s.e, &ps, 1, NULL);
    }
    a = now_us();
    gs_engine_cycle(s.e, 1, &rng, &st);
    double refused = now_us() - a;
    free_setup(&s);

    /* Refusal by shape: 512 members of 8 whole GPUs. 300 nodes are free and 2,000 more have 3
     * GPUs free, so the free total (8,400 GPUs) passes the capacity check; 300 members are
     * placed before the 301st finds no node, and all are rolled back. */
    make_engine(&s, policy, to_find, false, 0);
    for (int i = 0; i < NODES - 300; i++) {
        uint32_t gpus = i < 2000 ? 5 : 8; /* 5 + 5 > 8: one per node, 3 GPUs left free */
        struct gs_tpod_spec ps = {"fill",
                                  s.leaves[i % QUEUES],
                                  s.pc[0],
                                  GS_NO_GANG,
                                  GS_POD_REQ(1000, 1024, gpus, 1000, GS_MODEL_ANY),
                                  -1};
        gs_engine_submit(s.e, &ps, 0, NULL);
    }
    gs_engine_cycle(s.e, 0, &rng, &st);
    struct gs_gang_spec gs8 = {"train-512x8", 512, 0};
    gs_engine_add_gang(s.e, &gs8, &g);
    for (int i = 0; i < 512; i++) {
        struct gs_tpod_spec ps = {
            "w8", s.leaves[3], s.pc[1], g, GS_POD_REQ(8000, 16384, 8, 1000, GS_MODEL_ANY), -1};
        gs_engine_submit(s.e, &ps, 1, NULL);
    }
    a = now_us();
    gs_engine_cycle(s.e, 1, &rng, &st);
    double refused_slots = now_us() - a;
    uint32_t bound_slots = st.bound;
    /* The same gang with one member unlike the others: no slot bound applies, so 300 members
     * are placed on the real state before the 301st finds no node, then all rolled back. */
    struct gs_gang_spec gs8b = {"train-512x8-mixed", 512, 0};
    gs_engine_add_gang(s.e, &gs8b, &g);
    for (int i = 0; i < 512; i++) {
        struct gs_tpod_spec ps = {"w8",
                                  s.leaves[4],
                                  s.pc[1],
                                  g,
                                  GS_POD_REQ(i == 0 ? 8001 : 8000, 16384, 8, 1000, GS_MODEL_ANY),
                                  -1};
        gs_engine_submit(s.e, &ps, 2, NULL);
    }
    a = now_us();
    gs_engine_cycle(s.e, 2, &rng, &st);
    double refused_trial = now_us() - a;
    printf("gang (%s): 512-pod gang placed in %.2f ms (%u bound); refused with 300 GPUs free "
           "in %.3f ms; 512 x 8-GPU gang on 300 free nodes refused by the slot bound in %.3f ms "
           "(%u bound), and with unlike members after 300 trial placements in %.2f ms (%u bound)\n",
           policy, placed / 1000, bound, refused / 1000, refused_slots / 1000, bound_slots,
           refused_trial / 1000, st.bound);
    free_setup(&s);
}

/* Bytes the allocator has handed out and not yet taken back (glibc's mallinfo2). */
static long heap_bytes(void)
{
    return (long)mallinfo2().uordblks;
}

static void live(const char *policy, uint32_t to_find, int n_decisions)
{
    long rss0 = heap_bytes();
    struct setup s;
    make_engine(&s, policy, to_find, false, 1);
    long rss_nodes = heap_bytes();
    /* Zones z0..z3 on every node; every tenth node tainted dedicated=infer:NoSchedule. */
    struct gs_taint taint = {"dedicated", "infer", GS_TAINT_NO_SCHEDULE};
    for (uint32_t i = 0; i < NODES; i++) {
        char zone[8];
        (void)snprintf(zone, sizeof(zone), "z%u", (i / 10) % 4); /* every model in every zone */
        if (gs_cluster_set_label(s.c, i, "zone", zone) ||
            (i % 10 == 0 && gs_cluster_set_taints(s.c, i, &taint, 1)))
            die();
    }
    uint32_t cls[5];
    for (int z = 0; z < 4; z++) {
        char kv[16];
        (void)snprintf(kv, sizeof(kv), "zone=z%d", z);
        const char *sel[] = {kv};
        struct gs_filter_spec f = {.node_selector = sel, .n_node_selector = 1};
        if (gs_filter_intern(s.c, &f, &cls[z]))
            die();
    }
    struct gs_toleration tol = {"dedicated", GS_TOL_EQUAL, "infer", GS_TAINT_NO_SCHEDULE};
    struct gs_filter_spec ft = {.tolerations = &tol, .n_tolerations = 1};
    if (gs_filter_intern(s.c, &ft, &cls[4]))
        die();
    struct gs_rng rng;
    gs_rng_seed(&rng, 7);
    long rss_before_pods = heap_bytes();
    for (int i = 0; i < 100000; i++) {
        struct gs_tpod_spec ps = {"p",
                                  s.leaves[gs_rng_below(&rng, QUEUES)],
                                  s.pc[gs_rng_below(&rng, 3)],
                                  GS_NO_GANG,
                                  random_req(&rng, s.c),
                                  -1};
        char uid[24];
        (void)snprintf(uid, sizeof(uid), "uid-%d", i);
        struct gs_pod_ident id = {uid, "ns", "p", i % 2 ? cls[gs_rng_below(&rng, 5)] : 0, 0, false};
        if (gs_engine_submit_pod(s.e, &ps, &id, 0, NULL))
            die();
    }
    long rss_pods = heap_bytes();
    double *t = malloc((size_t)n_decisions * sizeof(*t));
    uint32_t bound = time_cycles(s.e, &rng, n_decisions, t);
    printf("live decisions (%s, %s): %d decisions, half of 100,000 pending pods with a zone "
           "nodeSelector or a toleration, %u placed: median %.1f us, p99 %.1f us\n",
           policy, to_find ? "bounded scan" : "full scan", n_decisions, bound, t[n_decisions / 2],
           t[(int)(n_decisions * 0.99)]);
    /* Node updates: a label change (re-judged in the 6 classes) and a GPU health flip. */
    double a = now_us();
    for (uint32_t i = 0; i < NODES; i++) {
        char zone[8];
        (void)snprintf(zone, sizeof(zone), "z%u", (i / 10 + 1) % 4);
        if (gs_cluster_set_label(s.c, i, "zone", zone))
            die();
    }
    double label_us = (now_us() - a) / NODES;
    a = now_us();
    for (uint32_t i = 0; i < NODES; i++)
        if (gs_cluster_set_gpu_health(s.c, i, i % 8, false) ||
            gs_cluster_set_gpu_health(s.c, i, i % 8, true))
            die();
    double health_us = (now_us() - a) / (2.0 * NODES);
    printf("live node update: label change %.2f us per node (%u filter classes), GPU health "
           "flip %.2f us\n",
           label_us, gs_filter_class_count(s.c), health_us);
    printf("live memory: %.0f B per node (cluster, fit view, scheduler and engine arrays, 50 "
           "queues), %.0f B per pending pod with uid, namespace and filter class\n",
           (double)(rss_nodes - rss0) / NODES, (double)(rss_pods - rss_before_pods) / 1e5);
    free(t);
    free_setup(&s);

    /* Adopt after a restart: 100,000 running pods on a fresh engine of the same cluster. */
    make_engine(&s, policy, to_find, false, 1);
    a = now_us();
    for (int i = 0; i < 100000; i++) {
        uint32_t node = (uint32_t)(i % NODES);
        struct gs_tpod_spec ps = {"run",
                                  s.leaves[i % QUEUES],
                                  s.pc[1],
                                  GS_NO_GANG,
                                  GS_POD_REQ(1000, 4096, 1, 1000, GS_MODEL_ANY),
                                  -1};
        struct gs_placement pl = {node, 0, {0}, 0}; /* GPUs from the node's free ones */
        if (i >= 60000) {
            if (i % 2) {
                ps.req.num_gpu = 0;
                ps.req.gpu_milli = 0;
            } else {
                ps.req.gpu_milli = 250;
            }
        }
        char uid[24];
        (void)snprintf(uid, sizeof(uid), "run-%d", i);
        struct gs_pod_ident id = {uid, "ns", "run", 0, 0, false};
        if (gs_engine_adopt(s.e, &ps, &id, &pl, 0, NULL))
            die();
    }
    double adopt_ms = (now_us() - a) / 1000;
    char msg[128];
    if (gs_engine_check(s.e, msg, sizeof(msg)))
        die();
    printf("live adopt: 100,000 running pods (60,000 one-GPU, 20,000 x 250 milli, 20,000 "
           "CPU-only) in %.0f ms\n",
           adopt_ms);
    free_setup(&s);
}

static int usage(const char *why, const char *arg)
{
    fprintf(stderr, "bench_tenant: %s%s%s\n", why, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "usage: bench_tenant [--policy P] [--decisions N] [--full-scan]\n"
                    "  --policy P       a policy name (default bestfit): ");
    for (uint32_t p = 0; p < GS_POLICY_COUNT; p++)
        fprintf(stderr, "%s%s", p ? ", " : "", gs_policy_name(p));
    fprintf(stderr, "\n  --decisions N    decisions timed, 100..1000000 (default 20000)\n"
                    "  --full-scan      score every node (default: kube-scheduler's bound)\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *policy = "bestfit";
    int n = 20000;
    bool full = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 || strcmp(argv[i], "--decisions") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0')
                return usage("missing value of", argv[i]);
            const char *v = argv[++i];
            if (argv[i - 1][2] == 'p') {
                policy = v;
                continue;
            }
            char *end = NULL;
            long d = strtol(v, &end, 10);
            if (*end != '\0' || d < 100 || d > 1000000)
                return usage("--decisions: expected 100..1000000, got", v);
            n = (int)d;
        } else if (strcmp(argv[i], "--full-scan") == 0) {
            full = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage("the multi-tenant engine at 10,000 nodes", NULL);
            return 0;
        } else {
            return usage("unknown argument", argv[i]);
        }
    }
    if (gs_policy_find(policy) < 0)
        return usage("--policy: unknown policy", policy);
    /* FGD and FGD-band score against a target workload and refuse to start without one. */
    if (strncmp(policy, "fgd", 3) == 0)
        build_target_workload();
    uint32_t to_find = full ? 0 : gs_sched_adaptive_nodes_to_find(NODES);
    printf("cluster: %d nodes, %d GPUs (A100 40%%, H100 30%%, L40S 20%%, T4 10%%); node scan: %s\n",
           NODES, NODES * 8, full ? "every node" : "kube-scheduler adaptive (500 feasible nodes)");
    decisions(policy, to_find, n);
    preemption(policy, to_find, false);
    preemption(policy, to_find, true);
    gang(policy, to_find);
    live(policy, to_find, n);
    gs_workload_fini(&target_workload);
    return 0;
}
