/*
 * Dynamic MIG on the node agent (src/agent/devplugin_migplan.c, the fake backend's
 * gs_gpu_mig_destroy/gs_gpu_mig_create in src/agent/gpu_fake.c): a plan carried out on a fake
 * H100 80GB laid out as seven free 1g.10gb, and the plans refused before anything changes.
 *
 * Hand-worked: an H100-80GB has 8 memory slices; 1g.10gb takes one (starts 0..6), 3g.40gb takes
 * four and may start at 0 or 4 (src/core/mig.c). A 3g.40gb at 4 covers the slices of the
 * 1g.10gb at 4, 5 and 6 (three destroyed); at 0 it would cover those at 0..3 (four). The core's
 * planner (fewest destroyed) therefore plans destroy 4, 5, 6 and create 3g.40gb at 4, and the
 * layout after is 1g.10gb at 0..3 plus 3g.40gb at 4 (memory 40448 MiB from the table).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/gpu.h"
#include "gpusched/kmigplan.h"
#include "gpusched/mig.h"
#include "gpusched/mig_plan.h"

static const char FAKE[] =
    "driver_version: \"550.90.07\"\n"
    "gpus:\n"
    "  - index: 0\n"
    "    uuid: GPU-00000000-0000-0000-0000-0000000000aa\n"
    "    model: NVIDIA H100 80GB HBM3\n"
    "    memory_mib: 81559\n"
    "    mig:\n"
    "      enabled: true\n"
    "      instances:\n"
    "        - {profile: 1g.10gb, uuid: MIG-a0, memory_mib: 9984, start: 0}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a1, memory_mib: 9984, start: 1}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a2, memory_mib: 9984, start: 2}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a3, memory_mib: 9984, start: 3}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a4, memory_mib: 9984, start: 4}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a5, memory_mib: 9984, start: 5}\n"
    "        - {profile: 1g.10gb, uuid: MIG-a6, memory_mib: 9984, start: 6}\n";

static struct gs_gpu_backend *open_fake(void)
{
    struct gs_clock clk = gs_clock_monotonic();
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    int rc = gs_gpu_parse_fake(FAKE, strlen(FAKE), "h100.yaml", &clk, &b, &d);
    if (rc != GS_OK)
        fail_msg("fake: %s", d.msg);
    return b;
}

static struct gs_kmig_plan plan_3g_at_4(void)
{
    struct gs_kmig_plan p;
    memset(&p, 0, sizeof(p));
    (void)snprintf(p.id, sizeof(p.id), "n1-gpu0-1");
    (void)snprintf(p.uuid, sizeof(p.uuid), "GPU-00000000-0000-0000-0000-0000000000aa");
    p.n_destroy = 3;
    for (uint32_t i = 0; i < 3; i++) {
        (void)snprintf(p.destroy[i].profile, sizeof(p.destroy[i].profile), "1g.10gb");
        p.destroy[i].start = 4 + i;
    }
    p.n_create = 1;
    (void)snprintf(p.create[0].profile, sizeof(p.create[0].profile), "3g.40gb");
    p.create[0].start = 4;
    (void)snprintf(p.pod, sizeof(p.pod), "ns/train");
    (void)snprintf(p.created, sizeof(p.created), "2026-01-02T03:04:05Z");
    return p;
}

/* The core plans exactly this for a 3g.40gb on seven free 1g.10gb. */
static void core_plans_the_same(void **st)
{
    (void)st;
    const struct gs_mig_model *m = gs_mig_model_find("NVIDIA H100 80GB HBM3");
    assert_non_null(m);
    int p1 = gs_mig_profile_find(m, "1g.10gb"), p3 = gs_mig_profile_find(m, "3g.40gb");
    assert_true(p1 >= 0 && p3 >= 0);
    struct gs_mig_slot cur[7];
    for (uint8_t i = 0; i < 7; i++)
        cur[i] = (struct gs_mig_slot){{(uint8_t)p1, i}, false};
    struct gs_mig_plan plan;
    assert_int_equal(gs_mig_plan_repartition(m, cur, 7, (uint32_t)p3, 1, &plan), GS_OK);
    assert_int_equal(plan.n_destroyed, 3);
    assert_int_equal(plan.n_created, 1);
    assert_int_equal(plan.ops[0].in.start, 4);
    assert_int_equal(plan.ops[1].in.start, 5);
    assert_int_equal(plan.ops[2].in.start, 6);
    assert_int_equal(plan.ops[3].op, GS_MIG_OP_CREATE);
    assert_int_equal(plan.ops[3].in.profile, p3);
    assert_int_equal(plan.ops[3].in.start, 4);
}

static void plan_carried_out(void **st)
{
    (void)st;
    struct gs_gpu_backend *b = open_fake();
    struct gs_kmig_plan p = plan_3g_at_4();
    char why[300] = "";
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_OK);
    assert_string_equal(why, "");
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 5);
    for (uint32_t i = 0; i < 4; i++) {
        assert_string_equal(g.mig[i].profile, "1g.10gb");
        assert_int_equal(g.mig[i].start_slot, i);
    }
    assert_string_equal(g.mig[4].profile, "3g.40gb");
    assert_true(g.mig[4].has_start);
    assert_int_equal(g.mig[4].start_slot, 4);
    assert_int_equal(g.mig[4].mem_mib, 40448);
    assert_string_equal(g.mig[4].uuid, "MIG-00000000-0000-0000-0000-0000000000aa-gi1");
    /* The same plan again: its instances are gone, so it is refused and nothing changes. */
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU 0 has no instance 1g.10gb at slice 4 to destroy");
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 5);
    gs_gpu_close(b);
}

/* 1g.10gb at slice 5 is held by a container. */
static bool held_at_5(void *ctx, uint32_t gpu, const struct gs_gpu_mig *mig, char *who, size_t cap)
{
    (void)ctx;
    if (gpu == 0 && mig->start_slot == 5) {
        (void)snprintf(who, cap, "pod ns/infer");
        return true;
    }
    return false;
}

static void allocated_instance_refused(void **st)
{
    (void)st;
    struct gs_gpu_backend *b = open_fake();
    struct gs_kmig_plan p = plan_3g_at_4();
    char why[300] = "";
    assert_int_equal(gs_dp_mig_execute(b, &p, held_at_5, NULL, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why,
                        "GPU 0: instance 1g.10gb at slice 5 (MIG-a5) is in use by pod ns/infer");
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 7); /* nothing destroyed, not even slice 4 */
    gs_gpu_close(b);
}

static void bad_plans_refused_untouched(void **st)
{
    (void)st;
    struct gs_gpu_backend *b = open_fake();
    char why[300] = "";
    struct gs_kmig_plan p = plan_3g_at_4();
    p.create[0].start = 2; /* 3g.40gb starts at 0 or 4 only */
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_non_null(strstr(why, "GPU 0: the layout after the plan is not valid"));
    p = plan_3g_at_4();
    p.n_destroy = 2; /* slice 6 stays: the 3g.40gb at 4 would overlap it */
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_non_null(strstr(why, "the layout after the plan is not valid"));
    p = plan_3g_at_4();
    (void)snprintf(p.uuid, sizeof(p.uuid), "GPU-other");
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why,
                        "GPU 0 is GPU-00000000-0000-0000-0000-0000000000aa, not GPU-other as the "
                        "plan says");
    p = plan_3g_at_4();
    p.gpu = 1;
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU 1 does not exist (the node has 1)");
    p = plan_3g_at_4();
    (void)snprintf(p.create[0].profile, sizeof(p.create[0].profile), "3g.71gb");
    assert_int_equal(gs_dp_mig_execute(b, &p, NULL, NULL, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "GPU 0 (H100-80GB) has no MIG profile 3g.71gb");
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 7);
    /* The backend's own checks. */
    assert_int_equal(gs_gpu_mig_create(b, 0, "1g.10gb", 3), GS_ECONFLICT);
    assert_int_equal(gs_gpu_mig_destroy(b, 0, 7), GS_ENOENT);
    assert_int_equal(gs_gpu_mig_destroy(b, 2, 0), GS_ERANGE);
    gs_gpu_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(core_plans_the_same),
        cmocka_unit_test(plan_carried_out),
        cmocka_unit_test(allocated_instance_refused),
        cmocka_unit_test(bad_plans_refused_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
