/*
 * The live scheduler's FGD target workload (gs_kworld_workload): built at the first cycle from
 * the GPU pods applied before it, then learned from the GPU pods that arrive, rebuilt when
 * their count doubles. Expected types and probabilities are counted by hand from the pods made.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/kworld.h"

static void apply(struct gs_kworld *w, const char *text)
{
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    assert_non_null(o);
    char err[256] = "";
    int rc = gs_kworld_apply(w, GS_KADDED, o, 0, err, sizeof(err));
    if (rc != GS_OK)
        print_message("apply: %s\n", err);
    assert_int_equal(rc, GS_OK);
    json_decref(o);
}

static void node(struct gs_kworld *w, const char *name, int gpus)
{
    char t[512];
    (void)snprintf(t, sizeof(t),
                   "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"},"
                   "\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"256Gi\","
                   "\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"}}}",
                   name, gpus);
    apply(w, t);
}

/* A pod of ours: `gpus` whole GPUs, or a KAI gpu-fraction when `fraction` is not NULL. */
static void pod(struct gs_kworld *w, int i, int gpus, const char *fraction)
{
    char t[1024], ann[128] = "", lim[96] = "";
    if (fraction)
        (void)snprintf(ann, sizeof(ann), ",\"annotations\":{\"gpu-fraction\":\"%s\"}", fraction);
    else
        (void)snprintf(lim, sizeof(lim), "\"limits\":{\"nvidia.com/gpu\":\"%d\"},", gpus);
    (void)snprintf(t, sizeof(t),
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\","
                   "\"namespace\":\"t\",\"uid\":\"u%d\"%s},\"spec\":{\"schedulerName\":"
                   "\"gpusched\",\"containers\":[{\"name\":\"c\",\"resources\":{%s"
                   "\"requests\":{\"cpu\":\"1\"}}}]}}",
                   i, i, ann, lim);
    apply(w, t);
}

static struct gs_kworld *world(void)
{
    struct gs_kworld_config cfg = {.policy = "fgd", .preemption = true, .reclaim = true};
    struct gs_kworld *w = NULL;
    assert_int_equal(gs_kworld_new(&cfg, &w), GS_OK);
    return w;
}

static void cycle(struct gs_kworld *w)
{
    char err[256] = "";
    assert_int_equal(gs_kworld_cycle(w, 0, NULL, err, sizeof(err)), GS_OK);
}

/* p of the type with (gpu_milli, num_gpu), or -1 when there is none. */
static double p_of(const struct gs_workload *wl, int32_t milli, uint32_t n)
{
    for (uint32_t i = 0; i < wl->n_types; i++)
        if (wl->types[i].gpu_milli == milli && wl->types[i].num_gpu == n)
            return wl->types[i].p;
    return -1;
}

static void test_workload_learned_from_arrivals(void **state)
{
    (void)state;
    struct gs_kworld *w = world();
    assert_null(gs_kworld_workload(w, NULL));
    for (int i = 0; i < 8; i++) {
        char n[16];
        (void)snprintf(n, sizeof(n), "n%d", i);
        node(w, n, 8);
    }
    cycle(w);
    uint32_t rebuilds = 99;
    const struct gs_workload *wl = gs_kworld_workload(w, &rebuilds);
    /* No GPU pod yet: one whole GPU stands for the workload. */
    assert_non_null(wl);
    assert_int_equal(wl->n_types, 1);
    assert_true(p_of(wl, 1000, 1) == 1.0);
    assert_int_equal(rebuilds, 0);
    /* 15 arrivals: below the first rebuild at 16, the workload stays. */
    for (int i = 0; i < 15; i++)
        pod(w, i, 1, i < 11 ? "0.25" : NULL);
    cycle(w);
    wl = gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 0);
    assert_int_equal(wl->n_types, 1);
    /* The 16th: 12 pods of 250 milli, 4 of one whole GPU -> p 0.75 and 0.25. */
    pod(w, 15, 1, "0.25");
    cycle(w);
    wl = gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 1);
    assert_int_equal(wl->n_types, 2);
    assert_true(p_of(wl, 250, 1) == 0.75);
    assert_true(p_of(wl, 1000, 1) == 0.25);
    /* 16 more 2-GPU pods: 32 seen, the next rebuild: 12/32, 4/32, 16/32. */
    for (int i = 16; i < 32; i++)
        pod(w, i, 2, NULL);
    cycle(w);
    wl = gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 2);
    assert_int_equal(wl->n_types, 3);
    assert_true(p_of(wl, 250, 1) == 12.0 / 32);
    assert_true(p_of(wl, 1000, 1) == 4.0 / 32);
    assert_true(p_of(wl, 1000, 2) == 16.0 / 32);
    gs_kworld_free(w);
}

static void test_workload_from_the_dump_first(void **state)
{
    (void)state;
    struct gs_kworld *w = world();
    node(w, "a", 8);
    node(w, "b", 8);
    /* Applied before the first cycle (a dump or the informers' lists): 8 x 1 GPU, 2 x 2 GPUs. */
    for (int i = 0; i < 10; i++)
        pod(w, i, i < 8 ? 1 : 2, NULL);
    cycle(w);
    uint32_t rebuilds = 99;
    const struct gs_workload *wl = gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 0);
    assert_int_equal(wl->n_types, 2);
    assert_true(p_of(wl, 1000, 1) == 0.8);
    assert_true(p_of(wl, 1000, 2) == 0.2);
    /* The first rebuild waits for twice the dump's pods: 19 seen is not yet. */
    for (int i = 10; i < 19; i++)
        pod(w, i, 1, "0.5");
    cycle(w);
    (void)gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 0);
    pod(w, 19, 1, "0.5");
    cycle(w);
    wl = gs_kworld_workload(w, &rebuilds);
    assert_int_equal(rebuilds, 1);
    /* 20 seen: 8 x 1 GPU, 2 x 2 GPUs, 10 x 500 milli. */
    assert_true(p_of(wl, 500, 1) == 0.5);
    assert_true(p_of(wl, 1000, 1) == 0.4);
    assert_true(p_of(wl, 1000, 2) == 0.1);
    gs_kworld_free(w);
}

/* A pod of ours with the given annotations and limits (JSON members, may be ""). */
static void pod_with(struct gs_kworld *w, int i, const char *ann, const char *lim)
{
    char t[1024];
    (void)snprintf(t, sizeof(t),
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\","
                   "\"namespace\":\"t\",\"uid\":\"u%d\",\"annotations\":{%s}},\"spec\":{"
                   "\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\",\"resources\":"
                   "{\"limits\":{%s},\"requests\":{\"cpu\":\"1\"}}}]}}",
                   i, i, ann, lim);
    apply(w, t);
}

static void test_workload_takes_memory_and_mig_pods(void **state)
{
    (void)state;
    /* Before the first cycle: 2 pods of one whole GPU, one KAI gpu-memory 40000 MiB pod, one
     * nvidia.com/mig-3g.40gb pod. All four are GPU pods of the workload (they were left out
     * when FGD measured milli only): p 2/4, 1/4 and 1/4. */
    struct gs_kworld *w = world();
    node(w, "a", 8);
    pod_with(w, 0, "", "\"nvidia.com/gpu\":\"1\"");
    pod_with(w, 1, "", "\"nvidia.com/gpu\":\"1\"");
    pod_with(w, 2, "\"gpu-memory\":\"40000\"", "");
    pod_with(w, 3, "", "\"nvidia.com/mig-3g.40gb\":\"1\"");
    cycle(w);
    const struct gs_workload *wl = gs_kworld_workload(w, NULL);
    assert_non_null(wl);
    assert_int_equal(wl->n_types, 3);
    assert_true(gs_workload_has_modes(wl));
    int seen = 0;
    for (uint32_t i = 0; i < wl->n_types; i++) {
        const struct gs_task_type *t = &wl->types[i];
        if (t->kind == GS_REQ_MILLI) {
            assert_int_equal(t->gpu_milli, 1000);
            assert_true(t->p == 0.5);
            seen |= 1;
        } else if (t->kind == GS_REQ_MEMORY) {
            assert_int_equal(t->gpu_mem_mib, 40000);
            assert_true(t->p == 0.25);
            seen |= 2;
        } else {
            assert_int_equal(t->kind, GS_REQ_MIG);
            assert_string_equal(t->mig_profile, "3g.40gb");
            assert_int_equal(t->mig_count, 1);
            assert_true(t->p == 0.25);
            seen |= 4;
        }
    }
    assert_int_equal(seen, 7);
    gs_kworld_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workload_learned_from_arrivals),
        cmocka_unit_test(test_workload_from_the_dump_first),
        cmocka_unit_test(test_workload_takes_memory_and_mig_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
