/*
 * Randomised check of the multi-tenant engine: seeded random clusters, queue trees,
 * PriorityClasses, gangs (some with members of mixed PriorityClasses) and workloads, driven
 * through 180,000 events (submit, finish, delete, queue cap change, scheduling cycle) with the
 * invariant checker after every one. The event stream is checked too: every EVICT follows a
 * BIND of the same pod, and no pod is evicted by a member of its own gang. Reproducible: a
 * failure prints the world seed and event number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/rng.h"
#include "gpusched/tenant.h"

#define WORLDS 25
#define EVENTS_PER_WORLD 4000
#define GANG_WORLDS 10
#define MODEL_WORLDS 10 /* teams with per-GPU-model entries, reclaim on; every other gang-heavy */
#define MEMORY_WORLDS                                                                              \
    8 /* GPUs with memory per model and memory-fraction pods, per-model entries                    \
         on every other, so pending charges and bind re-charges meet                               \
         preemption, reclaim and gang rollbacks */
#define PODS_MAX (EVENTS_PER_WORLD * 6)

/* What the event stream has said so far, per pod id. */
struct stream {
    uint32_t gang[PODS_MAX]; /* gang of each pod, as submitted */
    bool bound[PODS_MAX];    /* reported bound and not since evicted, finished or deleted */
    uint32_t bad;            /* first broken rule: 0 none, 1 evict of unbound, 2 own gang */
    uint32_t bad_pod;
};

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct stream *s = ctx;
    if (ev->kind == GS_EV_BIND || ev->kind == GS_EV_BACKFILL) {
        s->bound[ev->pod] = true;
    } else if (ev->kind == GS_EV_EVICT) {
        if (!s->bound[ev->pod] && !s->bad) {
            s->bad = 1;
            s->bad_pod = ev->pod;
        }
        if (ev->by != UINT32_MAX && s->gang[ev->pod] != GS_NO_GANG &&
            s->gang[ev->by] == s->gang[ev->pod] && !s->bad) {
            s->bad = 2;
            s->bad_pod = ev->pod;
        }
        s->bound[ev->pod] = false;
    }
}

static void check_or_fail(struct gs_engine *e, uint64_t seed, int event)
{
    char msg[512];
    if (gs_engine_check(e, msg, sizeof(msg)) != GS_OK)
        fail_msg("world seed %llu, event %d: %s", (unsigned long long)seed, event, msg);
}

/* gang_heavy: half the submissions are gangs, all of mixed PriorityClasses, with preemption on,
 * so that gangs meet their own members as possible victims. */
/* by_model: each team also gets a per-GPU-model entry (a random model, quota within its GPU
 * quota, a limit or none), reclaim on, so per-model limits and reclaim meet everything else. */
/* memory: the GPUs have memory (A100 40 GiB, H100 80 GiB, T4 16 GiB) and a fifth of the GPU
 * pods ask a memory fraction (4-16 GiB, some with a compute share), charged by the smallest
 * GPU memory they may use while pending and re-charged where they land (gs_engine_check()
 * verifies both for every pod). */
static void run_world(uint64_t seed, bool gang_heavy, bool by_model, bool memory,
                      uint64_t *events_done, uint64_t *evictions)
{
    static struct stream st_ev;
    memset(&st_ev, 0, sizeof(st_ev));
    struct gs_rng rng;
    gs_rng_seed(&rng, seed);
    struct gs_cluster *c;
    assert_int_equal(gs_cluster_new(&c), GS_OK);
    const char *models[] = {"A100", "H100", "T4"};
    static const int64_t model_mem_mib[] = {40960, 81920, 16384};
    uint32_t nodes = 2 + gs_rng_below(&rng, 8);
    char name[32];
    for (uint32_t i = 0; i < nodes; i++) {
        (void)snprintf(name, sizeof(name), "n%u", i);
        uint32_t gpus = 1 + gs_rng_below(&rng, 8);
        int64_t cpu_milli = 16000 + 16000 * (int64_t)gs_rng_below(&rng, 4);
        uint32_t mi = gs_rng_below(&rng, 3);
        struct gs_node_spec s = {name, cpu_milli, 262144, 110, gpus, models[mi], 0};
        s.gpu_mem_mib = memory ? model_mem_mib[mi] : 0;
        assert_int_equal(gs_cluster_add_node(c, &s, NULL), GS_OK);
    }
    uint32_t flags = gs_rng_below(&rng, 8) | (gang_heavy ? 1u : 0u) | (by_model ? 2u : 0u);
    struct gs_engine_config cfg = {.policy = gs_rng_below(&rng, 2) ? "bestfit" : "packing",
                                   .preemption = (flags & 1) != 0,
                                   .reclaim = (flags & 2) != 0,
                                   .backfill = (flags & 4) != 0,
                                   .on_event = on_event,
                                   .ctx = &st_ev};
    struct gs_engine *e;
    assert_int_equal(gs_engine_new(c, &cfg, &e), GS_OK);
    /* Queue tree: up to 2 departments with up to 3 teams each, quotas within the parent. */
    uint32_t leaves[8], nleaves = 0;
    double weights[16];           /* per queue id, as added */
    int64_t min_runtimes[16];     /* per queue id, as added */
    struct gs_model_quota mq[16]; /* per queue id: its per-model entry, when by_model */
    uint32_t depts = 1 + gs_rng_below(&rng, 2);
    for (uint32_t d = 0; d < depts; d++) {
        (void)snprintf(name, sizeof(name), "dept%u", d);
        int64_t dq = 1000 * (int64_t)gs_rng_below(&rng, 8);
        struct gs_queue_spec ds = {name,
                                   GS_QUEUE_ROOT,
                                   {dq, 8000, 0},
                                   {GS_UNLIMITED, GS_UNLIMITED, GS_UNLIMITED},
                                   (double)gs_rng_below(&rng, 3),
                                   0};
        uint32_t did;
        assert_int_equal(gs_engine_add_queue(e, &ds, &did), GS_OK);
        uint32_t teams = 1 + gs_rng_below(&rng, 3);
        int64_t left = dq;
        for (uint32_t t = 0; t < teams; t++) {
            (void)snprintf(name, sizeof(name), "team%u.%u", d, t);
            int64_t tq =
                left > 0 ? 1000 * (int64_t)gs_rng_below(&rng, (uint32_t)(left / 1000) + 1) : 0;
            left -= tq;
            int64_t lim = gs_rng_below(&rng, 3) == 0 ? tq + 1000 * (int64_t)gs_rng_below(&rng, 4)
                                                     : GS_UNLIMITED;
            struct gs_queue_spec ts = {name,
                                       did,
                                       {tq, 0, 0},
                                       {lim, GS_UNLIMITED, GS_UNLIMITED},
                                       (double)gs_rng_below(&rng, 4),
                                       (int64_t)gs_rng_below(&rng, 3) * 50};
            struct gs_model_quota m = {0, 0, GS_UNLIMITED};
            if (by_model) {
                assert_int_equal(gs_cluster_model_id(c, models[gs_rng_below(&rng, 3)], &m.model),
                                 GS_OK);
                m.quota_milli = 1000 * (int64_t)gs_rng_below(&rng, (uint32_t)(tq / 1000) + 1);
                if (gs_rng_below(&rng, 2))
                    m.limit_milli = m.quota_milli + 1000 * (int64_t)gs_rng_below(&rng, 4);
                ts.by_model = &m;
                ts.n_by_model = 1;
            }
            assert_int_equal(gs_engine_add_queue(e, &ts, &leaves[nleaves]), GS_OK);
            mq[leaves[nleaves]] = m;
            weights[leaves[nleaves]] = ts.over_quota_weight;
            min_runtimes[leaves[nleaves]] = ts.min_runtime_ms;
            nleaves++;
        }
    }
    uint32_t classes = 0;
    int32_t values[] = {0, 50, 100, 1000};
    for (; classes < 4; classes++) {
        (void)snprintf(name, sizeof(name), "pc%u", classes);
        struct gs_priority_class_spec ps = {name, values[classes], -1};
        assert_int_equal(gs_engine_add_priority_class(e, &ps, NULL), GS_OK);
    }
    uint32_t ngangs = 0;
    int64_t now = 0;
    for (int ev = 0; ev < EVENTS_PER_WORLD; ev++) {
        uint32_t kind = gs_rng_below(&rng, 11);
        uint32_t npods = gs_engine_pod_count(e);
        if (kind < 4) {
            /* Submit a pod or a small gang. */
            uint32_t q = leaves[gs_rng_below(&rng, nleaves)];
            uint32_t pc = gs_rng_below(&rng, classes);
            uint32_t shape = gs_rng_below(&rng, 4);
            struct gs_pod_req req =
                GS_POD_REQ(1000 * (1 + (int64_t)gs_rng_below(&rng, 8)), 1024, 0, 0, GS_MODEL_ANY);
            if (shape == 1) {
                req.num_gpu = 1;
                req.gpu_milli = 100 * (1 + (int32_t)gs_rng_below(&rng, 9));
            } else if (shape >= 2) {
                req.num_gpu = 1 + gs_rng_below(&rng, shape == 3 ? 4 : 1);
                req.gpu_milli = 1000;
            }
            if (memory && req.num_gpu > 0 && gs_rng_below(&rng, 5) == 0) {
                req.gpu_mem_mib = 4096 * (1 + (int64_t)gs_rng_below(&rng, 4));
                req.gpu_milli = gs_rng_below(&rng, 2) ? 0 : 100 * (int32_t)gs_rng_below(&rng, 9);
            }
            if (gs_rng_below(&rng, 5) == 0) {
                const char *m = models[gs_rng_below(&rng, 3)];
                req.gpu_model_mask = gs_cluster_model_mask(c, m, strlen(m));
            }
            uint32_t members = 1, gang = GS_NO_GANG;
            bool mixed = false; /* members of mixed PriorityClasses */
            if (gs_rng_below(&rng, gang_heavy ? 2 : 6) == 0) {
                mixed = gang_heavy || gs_rng_below(&rng, 2) == 0;
                members = 2 + gs_rng_below(&rng, 4);
                (void)snprintf(name, sizeof(name), "g%u", ngangs++);
                struct gs_gang_spec gs = {name, members - gs_rng_below(&rng, 2),
                                          (int64_t)gs_rng_below(&rng, 2) * 500};
                assert_int_equal(gs_engine_add_gang(e, &gs, &gang), GS_OK);
            }
            for (uint32_t m = 0; m < members; m++) {
                uint32_t mpc = mixed ? gs_rng_below(&rng, classes) : pc;
                struct gs_tpod_spec s = {"p",  q,   mpc,
                                         gang, req, (int64_t)gs_rng_below(&rng, 3) * 100 - 1};
                uint32_t id;
                int err = gs_engine_submit(e, &s, now, &id);
                /* A gang whose minimum can never fit under its queues' caps is refused. */
                if (err == GS_ELIMIT && gang != GS_NO_GANG) {
                    struct gs_gang_info gi;
                    assert_int_equal(gs_engine_gang_info(e, gang, &gi), GS_OK);
                    assert_true(gi.refused && strstr(gi.reason, "at minimum but queue") != NULL);
                } else {
                    assert_int_equal(err, GS_OK);
                }
                assert_true(id < PODS_MAX);
                st_ev.gang[id] = gang;
            }
        } else if (kind < 6 && npods > 0) {
            uint32_t p = gs_rng_below(&rng, npods);
            struct gs_tpod_info in;
            gs_engine_pod_info(e, p, &in);
            if (in.state == GS_TPOD_RUNNING) {
                assert_int_equal(gs_engine_finish(e, p, now), GS_OK);
                st_ev.bound[p] = false;
            }
        } else if (kind == 6 && npods > 0) {
            uint32_t p = gs_rng_below(&rng, npods);
            struct gs_tpod_info in;
            gs_engine_pod_info(e, p, &in);
            int err = gs_engine_delete(e, p, now);
            assert_int_equal(err, in.state <= GS_TPOD_RUNNING ? GS_OK : GS_EINVAL);
            st_ev.bound[p] = false;
        } else if (kind == 10) {
            /* A team's GPU limit changes (never below what it holds): refused gangs are judged
             * again. */
            uint32_t q = leaves[gs_rng_below(&rng, nleaves)];
            struct gs_queue_info qi;
            assert_int_equal(gs_engine_queue_info(e, q, &qi), GS_OK);
            int64_t floor = qi.allocated[GS_RES_GPU] > qi.quota[GS_RES_GPU]
                                ? qi.allocated[GS_RES_GPU]
                                : qi.quota[GS_RES_GPU];
            struct gs_queue_spec us = {qi.name,
                                       qi.parent,
                                       {qi.quota[0], qi.quota[1], qi.quota[2]},
                                       {qi.limit[0], qi.limit[1], qi.limit[2]},
                                       0,
                                       0};
            us.limit[GS_RES_GPU] = gs_rng_below(&rng, 3) == 0
                                       ? GS_UNLIMITED
                                       : floor + 1000 * (int64_t)gs_rng_below(&rng, 3);
            /* Weight and min runtime are not in gs_queue_info: keep them as they were made. */
            us.over_quota_weight = weights[q];
            us.min_runtime_ms = min_runtimes[q];
            us.by_model = by_model ? &mq[q] : NULL; /* entries are replaced whole: keep it */
            us.n_by_model = by_model ? 1 : 0;
            assert_int_equal(gs_engine_update_queue(e, q, &us), GS_OK);
            /* Below what it holds: taken, nothing evicted; check_or_fail() below holds the
             * engine to starting nothing more there until it is back under. */
            struct gs_queue_spec low = us;
            if (gs_rng_below(&rng, 4) == 0 && qi.allocated[GS_RES_GPU] > qi.quota[GS_RES_GPU]) {
                low.limit[GS_RES_GPU] = qi.allocated[GS_RES_GPU] - 1;
                assert_int_equal(gs_engine_update_queue(e, q, &low), GS_OK);
            }
        } else {
            now += gs_rng_below(&rng, 100);
            struct gs_cycle_stats st;
            assert_int_equal(gs_engine_cycle(e, now, &rng, &st), GS_OK);
            *evictions += st.evicted;
        }
        check_or_fail(e, seed, ev);
        if (st_ev.bad)
            fail_msg("world seed %llu, event %d: pod %u %s", (unsigned long long)seed, ev,
                     st_ev.bad_pod,
                     st_ev.bad == 1 ? "evicted but never reported bound"
                                    : "evicted by a member of its own gang");
        for (uint32_t g = 0; g < ngangs; g++) {
            struct gs_gang_info gi;
            assert_int_equal(gs_engine_gang_info(e, g, &gi), GS_OK);
            if (gi.refused != (gi.reason[0] != '\0'))
                fail_msg("world seed %llu, event %d: gang %s refused %d with reason '%s'",
                         (unsigned long long)seed, ev, gi.name, gi.refused, gi.reason);
        }
        (*events_done)++;
    }
    gs_engine_free(e);
    gs_cluster_free(c);
}

static void test_random_workloads_keep_every_invariant(void **state)
{
    (void)state;
    uint64_t events = 0, evictions = 0;
    for (uint64_t w = 0; w < WORLDS; w++)
        run_world(1000 + w, false, false, false, &events, &evictions);
    for (uint64_t w = 0; w < GANG_WORLDS; w++)
        run_world(2000 + w, true, false, false, &events, &evictions);
    uint64_t model_evictions = 0;
    for (uint64_t w = 0; w < MODEL_WORLDS; w++)
        run_world(3000 + w, w % 2 == 1, true, false, &events, &model_evictions);
    assert_true(model_evictions > 0);
    evictions += model_evictions;
    uint64_t memory_evictions = 0;
    for (uint64_t w = 0; w < MEMORY_WORLDS; w++)
        run_world(4000 + w, w % 3 == 2, w % 2 == 1, true, &events, &memory_evictions);
    assert_true(memory_evictions > 0);
    evictions += memory_evictions;
    assert_true(events >= 100000);
    /* The worlds must exercise eviction paths, or the check proves little. */
    assert_true(evictions > 0);
    print_message("%llu events, %llu evictions (%llu in worlds with per-model entries), all "
                  "invariants held\n",
                  (unsigned long long)events, (unsigned long long)evictions,
                  (unsigned long long)model_evictions);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_workloads_keep_every_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
