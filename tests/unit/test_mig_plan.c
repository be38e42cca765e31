/*
 * Unit tests of the dynamic MIG re-partition planner (include/gpusched/mig_plan.h): hand-worked
 * plans on the real geometry tables with the reasoning beside each expected value, the errors,
 * and a seeded invariant test over random layouts of every model whose fewest-destroyed check is
 * an independent brute force (every destroy set by itself, every start set as a bitmask).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/mig.h"
#include "gpusched/mig_plan.h"
#include "gpusched/rng.h"

/* One instance of a test layout: profile name, start slot, held by a pod. */
struct inst {
    const char *profile;
    uint8_t start;
    bool used;
};

static const struct gs_mig_model *model(const char *name)
{
    const struct gs_mig_model *m = gs_mig_model_find(name);
    assert_non_null(m);
    return m;
}

static uint8_t prof(const struct gs_mig_model *m, const char *name)
{
    int p = gs_mig_profile_find(m, name);
    assert_true(p >= 0);
    return (uint8_t)p;
}

static uint32_t slots(const struct gs_mig_model *m, const struct inst *in, uint32_t n,
                      struct gs_mig_slot *out)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = (struct gs_mig_slot){{prof(m, in[i].profile), in[i].start}, in[i].used};
    return n;
}

static void expect_op(const struct gs_mig_model *m, const struct gs_mig_op *op,
                      enum gs_mig_op_kind kind, const char *profile, uint8_t start)
{
    assert_int_equal(op->op, kind);
    assert_string_equal(m->profiles[op->in.profile].name, profile);
    assert_int_equal(op->in.start, start);
}

static void expect_instance(const struct gs_mig_model *m, struct gs_mig_instance in,
                            const char *profile, uint8_t start)
{
    assert_string_equal(m->profiles[in.profile].name, profile);
    assert_int_equal(in.start, start);
}

#define N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/*
 * H100-80GB cut into seven free 1g.10gb (starts 0..6; memory slice 7 unused), asked one
 * 3g.40gb (3 compute slices, 4 memory slices, starts {0,4}). Rule 1: the seven 1g hold all 7
 * compute slices, so at least 3 must go; 3g at 4 takes memory slices 4-7 and overlaps only the
 * 1g at 4, 5 and 6 (slice 7 is empty): 3 destroyed. 3g at 0 takes slices 0-3: four 1g, so it
 * loses on rule 1. The layout after: 1g at 0..3 (kept, input order), then 3g at 4; the request
 * gets the new one, index 4. Score: the four spare 1g give a(1g.10gb) = 4 x 1 compute slice; no
 * memory slice and no compute slice is left, so every other profile's room is 0: score 4.
 */
static void test_h100_seven_1g_to_one_3g_destroys_the_upper_three(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    struct inst in[7];
    for (uint8_t s = 0; s < 7; s++)
        in[s] = (struct inst){"1g.10gb", s, false};
    struct gs_mig_slot cur[7];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, 7, cur), prof(m, "3g.40gb"), 1, &plan), GS_OK);
    assert_int_equal(plan.n_destroyed, 3);
    assert_int_equal(plan.n_created, 1);
    assert_int_equal(plan.n_ops, 4);
    expect_op(m, &plan.ops[0], GS_MIG_OP_DESTROY, "1g.10gb", 4);
    expect_op(m, &plan.ops[1], GS_MIG_OP_DESTROY, "1g.10gb", 5);
    expect_op(m, &plan.ops[2], GS_MIG_OP_DESTROY, "1g.10gb", 6);
    expect_op(m, &plan.ops[3], GS_MIG_OP_CREATE, "3g.40gb", 4);
    assert_int_equal(plan.n_layout, 5);
    for (uint8_t s = 0; s < 4; s++)
        expect_instance(m, plan.layout[s], "1g.10gb", s);
    expect_instance(m, plan.layout[4], "3g.40gb", 4);
    assert_int_equal(plan.n_granted, 1);
    assert_int_equal(plan.granted[0], 4);
    assert_int_equal(plan.score, 4);
    assert_int_equal(gs_mig_layout_check(m, plan.layout, plan.n_layout, NULL, 0), GS_OK);
}

/*
 * A free instance of the profile already there: no operation. H100-80GB with 1g.10gb free at 0
 * and 1, 2g.20gb used at 2, 3g.40gb used at 4 (1+1+2+3 = 7 compute slices). One 1g.10gb: the
 * empty destroy set (size 0) serves it from the first free 1g in input order, index 0. Score:
 * the 1g at 1 is spare (1 x 1); the compute slices are all taken, so no room: score 1.
 */
static void test_request_served_by_a_free_instance_needs_no_operation(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    static const struct inst in[] = {
        {"1g.10gb", 0, false}, {"1g.10gb", 1, false}, {"2g.20gb", 2, true}, {"3g.40gb", 4, true}};
    struct gs_mig_slot cur[4];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, N(in), cur), prof(m, "1g.10gb"), 1, &plan),
        GS_OK);
    assert_int_equal(plan.n_ops, 0);
    assert_int_equal(plan.n_destroyed, 0);
    assert_int_equal(plan.n_created, 0);
    assert_int_equal(plan.n_layout, 4);
    assert_int_equal(plan.n_granted, 1);
    assert_int_equal(plan.granted[0], 0);
    assert_int_equal(plan.score, 1);
    /* Size 0 has exactly one candidate: the layout as it is. */
    assert_int_equal(plan.evaluated, 1);
}

/*
 * Empty memory slices are used before anything is destroyed. H100-80GB holding only 4g.40gb at
 * 0 (used): one 3g.40gb fits at 4 in the empty slices 4-7 (4 + 3 = 7 compute slices), so the
 * plan creates without destroying: ops = [create 3g.40gb at 4].
 */
static void test_empty_slices_are_used_before_destroying(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    static const struct inst in[] = {{"4g.40gb", 0, true}};
    struct gs_mig_slot cur[1];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, N(in), cur), prof(m, "3g.40gb"), 1, &plan),
        GS_OK);
    assert_int_equal(plan.n_destroyed, 0);
    assert_int_equal(plan.n_ops, 1);
    expect_op(m, &plan.ops[0], GS_MIG_OP_CREATE, "3g.40gb", 4);
    assert_int_equal(plan.granted[0], 1);
}

/*
 * Used instances in the way: H100-80GB with seven 1g.10gb, those at 1 and 5 held by pods. A
 * 3g.40gb needs memory slices 0-3 (start 0) or 4-7 (start 4); the held 1g at 1 is in the first
 * run and the one at 5 in the second, and neither may be destroyed: GS_ENOENT, and the plan is
 * left as it was. A 7g.80gb (all 8 slices) is refused as well. With only the 1g at 1 held, 3g
 * at 4 is possible again (the 1g at 4, 5, 6 are free).
 */
static void test_used_instances_in_the_way_give_enoent(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    struct inst in[7];
    for (uint8_t s = 0; s < 7; s++)
        in[s] = (struct inst){"1g.10gb", s, s == 1 || s == 5};
    struct gs_mig_slot cur[7];
    struct gs_mig_plan plan, before;
    memset(&plan, 0xab, sizeof(plan));
    memcpy(&before, &plan, sizeof(plan));
    slots(m, in, 7, cur);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 7, prof(m, "3g.40gb"), 1, &plan), GS_ENOENT);
    assert_memory_equal(&plan, &before, sizeof(plan));
    assert_int_equal(gs_mig_plan_repartition(m, cur, 7, prof(m, "7g.80gb"), 1, &plan), GS_ENOENT);
    cur[5].used = false;
    assert_int_equal(gs_mig_plan_repartition(m, cur, 7, prof(m, "3g.40gb"), 1, &plan), GS_OK);
    assert_int_equal(plan.n_destroyed, 3);
    expect_op(m, &plan.ops[3], GS_MIG_OP_CREATE, "3g.40gb", 4);
}

/*
 * Two instances on one card, one kept and one new. H100-80GB with 3g.40gb free at 0 and
 * 1g.10gb free at 4, 5, 6; two 3g.40gb asked. The kept 3g at 0 serves one; the other can only
 * go at 4, over the three 1g: destroy set {1,2,3}, size 3. A set holding the 3g at 0 would have
 * to create both 3g, so it must also clear 4-6: size 4. The layout after: 3g at 0 (kept, index
 * 0), 3g at 4 (new, index 1); granted kept first: [0, 1]. Nothing is spare or left: score 0.
 */
static void test_h100_two_3g_on_one_card_one_kept_one_new(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    static const struct inst in[] = {
        {"3g.40gb", 0, false}, {"1g.10gb", 4, false}, {"1g.10gb", 5, false}, {"1g.10gb", 6, false}};
    struct gs_mig_slot cur[4];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, N(in), cur), prof(m, "3g.40gb"), 2, &plan),
        GS_OK);
    assert_int_equal(plan.n_destroyed, 3);
    assert_int_equal(plan.n_created, 1);
    expect_op(m, &plan.ops[0], GS_MIG_OP_DESTROY, "1g.10gb", 4);
    expect_op(m, &plan.ops[1], GS_MIG_OP_DESTROY, "1g.10gb", 5);
    expect_op(m, &plan.ops[2], GS_MIG_OP_DESTROY, "1g.10gb", 6);
    expect_op(m, &plan.ops[3], GS_MIG_OP_CREATE, "3g.40gb", 4);
    assert_int_equal(plan.n_layout, 2);
    expect_instance(m, plan.layout[0], "3g.40gb", 0);
    expect_instance(m, plan.layout[1], "3g.40gb", 4);
    assert_int_equal(plan.n_granted, 2);
    assert_int_equal(plan.granted[0], 0);
    assert_int_equal(plan.granted[1], 1);
    assert_int_equal(plan.score, 0);
}

/*
 * Two new instances on one card, tie broken by enumeration order. A100-40GB cut into seven free
 * 1g.5gb, asked two 2g.10gb (2 compute slices, starts {0,2,4}). Compute: 7 - d kept + 4 <= 7,
 * so d >= 4; the start pairs (0,2), (0,4), (2,4) each clear exactly four 1g: masks {0,1,2,3} =
 * 15, {0,1,4,5} = 51, {2,3,4,5} = 60. Each leaves three spare 1g and no compute slice: score 3
 * for all, one creation each (2), so the lowest mask wins: destroy 0-3, create 2g at 0 and 2.
 */
static void test_a100_40gb_two_2g_tie_goes_to_the_lowest_mask(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("A100-40GB");
    struct inst in[7];
    for (uint8_t s = 0; s < 7; s++)
        in[s] = (struct inst){"1g.5gb", s, false};
    struct gs_mig_slot cur[7];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, 7, cur), prof(m, "2g.10gb"), 2, &plan), GS_OK);
    assert_int_equal(plan.n_destroyed, 4);
    for (uint8_t s = 0; s < 4; s++)
        expect_op(m, &plan.ops[s], GS_MIG_OP_DESTROY, "1g.5gb", s);
    expect_op(m, &plan.ops[4], GS_MIG_OP_CREATE, "2g.10gb", 0);
    expect_op(m, &plan.ops[5], GS_MIG_OP_CREATE, "2g.10gb", 2);
    assert_int_equal(plan.n_granted, 2);
    assert_int_equal(plan.score, 3);
}

/*
 * The future score decides between two single destroys, against enumeration order. A100-40GB:
 * 2g.10gb free at 0 (index 0), 1g.5gb used at 2 and 3, 1g.10gb (the two-slice 1g, starts
 * {0,2,4,6}) free at 4 (index 3), 1g.5gb used at 6: 2+1+1+1+1 = 6 compute slices, memory slice 7
 * empty. One 1g.5gb (starts 0..6): none is free and slice 7 is no start of it, so one instance
 * must go (rule 1: size 1).
 *   Destroy the 2g at 0 (mask 1), create 1g.5gb at 0: spare 1g.10gb at 4; compute 5 of 7, empty
 *   slices 1 and 7. a(1g.5gb) = room at 1 = 1; a(1g.5gb+me) = 1; a(1g.10gb) = 1 spare + no run
 *   (0-1 and 6-7 are half taken) = 1; a(2g.10gb) = 0 (0-1 half taken). Score 1+1+1 = 3.
 *   Destroy the 1g.10gb at 4 (mask 8), create 1g.5gb at 4: spare 2g at 0; compute 6 of 7, empty
 *   slices 5 and 7. a(1g.5gb) = 1 (at 5); a(+me) = 1; a(1g.10gb) = 0; a(2g.10gb) = 1 spare x 2
 *   compute slices = 2. Score 1+1+2 = 4.
 * Mask 8 wins on the score (4 > 3): keeping the 2g keeps room for a 2-slice request. Creating at
 * 5 instead of 4 scores the same (empty 4 and 7 give the same rooms), so start 4, the lower.
 */
static void test_a100_40gb_score_keeps_the_larger_free_instance(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("A100-40GB");
    static const struct inst in[] = {{"2g.10gb", 0, false},
                                     {"1g.5gb", 2, true},
                                     {"1g.5gb", 3, true},
                                     {"1g.10gb", 4, false},
                                     {"1g.5gb", 6, true}};
    struct gs_mig_slot cur[5];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, N(in), cur), prof(m, "1g.5gb"), 1, &plan),
        GS_OK);
    assert_int_equal(plan.n_ops, 2);
    expect_op(m, &plan.ops[0], GS_MIG_OP_DESTROY, "1g.10gb", 4);
    expect_op(m, &plan.ops[1], GS_MIG_OP_CREATE, "1g.5gb", 4);
    assert_int_equal(plan.score, 4);
    assert_int_equal(plan.n_layout, 5);
    expect_instance(m, plan.layout[0], "2g.10gb", 0);
    expect_instance(m, plan.layout[4], "1g.5gb", 4);
    assert_int_equal(plan.granted[0], 4);
}

/*
 * A30-24GB (4 compute, 4 memory slices; 1g.6gb at {0..3}, 2g.12gb at {0,2}). 2g.12gb free at 0,
 * 1g.6gb used at 2, 1g.6gb free at 3; two 1g.6gb asked. The free 1g at 3 serves one (kept,
 * layout index 1); one more needs a compute slice (2+1+1 = 4 taken), so the 2g goes (the only
 * free instance but the one taken): create 1g.6gb at 0 or 1. At 0: compute 3 of 4, empty
 * slice 1: a(1g.6gb) = 1, a(1g.6gb+me) = 1, the 2g profiles and 4g no run: score 2; at 1 the same
 * with slice 0 empty, so start 0. Granted kept first: [1, 2].
 */
static void test_a30_two_1g_one_kept_one_from_the_2g(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("A30-24GB");
    static const struct inst in[] = {
        {"2g.12gb", 0, false}, {"1g.6gb", 2, true}, {"1g.6gb", 3, false}};
    struct gs_mig_slot cur[3];
    struct gs_mig_plan plan;
    assert_int_equal(
        gs_mig_plan_repartition(m, cur, slots(m, in, N(in), cur), prof(m, "1g.6gb"), 2, &plan),
        GS_OK);
    assert_int_equal(plan.n_ops, 2);
    expect_op(m, &plan.ops[0], GS_MIG_OP_DESTROY, "2g.12gb", 0);
    expect_op(m, &plan.ops[1], GS_MIG_OP_CREATE, "1g.6gb", 0);
    assert_int_equal(plan.n_layout, 3);
    expect_instance(m, plan.layout[0], "1g.6gb", 2);
    expect_instance(m, plan.layout[1], "1g.6gb", 3);
    expect_instance(m, plan.layout[2], "1g.6gb", 0);
    assert_int_equal(plan.n_granted, 2);
    assert_int_equal(plan.granted[0], 1);
    assert_int_equal(plan.granted[1], 2);
    assert_int_equal(plan.score, 2);
}

/*
 * A30-24GB: 1g.6gb free at 0 and 1, used at 3, free at 2; one 2g.12gb. Start 2 (slices 2-3)
 * holds the used 1g at 3; start 0 needs the 1g at 0 and 1 gone: size 2, mask {0,1}. The 1g at 2
 * stays spare and compute is full: score 1. Two 2g.12gb cannot fit (the used 1g at 3 blocks the
 * second): GS_ENOENT.
 */
static void test_a30_2g_around_a_used_1g(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("A30-24GB");
    static const struct inst in[] = {
        {"1g.6gb", 0, false}, {"1g.6gb", 1, false}, {"1g.6gb", 3, true}, {"1g.6gb", 2, false}};
    struct gs_mig_slot cur[4];
    struct gs_mig_plan plan;
    uint32_t n = slots(m, in, N(in), cur);
    assert_int_equal(gs_mig_plan_repartition(m, cur, n, prof(m, "2g.12gb"), 1, &plan), GS_OK);
    assert_int_equal(plan.n_ops, 3);
    expect_op(m, &plan.ops[0], GS_MIG_OP_DESTROY, "1g.6gb", 0);
    expect_op(m, &plan.ops[1], GS_MIG_OP_DESTROY, "1g.6gb", 1);
    expect_op(m, &plan.ops[2], GS_MIG_OP_CREATE, "2g.12gb", 0);
    assert_int_equal(plan.score, 1);
    assert_int_equal(gs_mig_plan_repartition(m, cur, n, prof(m, "2g.12gb"), 2, &plan), GS_ENOENT);
}

/* Bad arguments: GS_EINVAL, the plan untouched. */
static void test_bad_arguments_are_einval(void **state)
{
    (void)state;
    const struct gs_mig_model *m = model("H100-80GB");
    struct gs_mig_slot cur[GS_MIG_INSTANCES_MAX + 1];
    memset(cur, 0, sizeof(cur));
    cur[0] = (struct gs_mig_slot){{prof(m, "3g.40gb"), 0}, false};
    cur[1] = (struct gs_mig_slot){{prof(m, "2g.20gb"), 2}, false}; /* overlaps slices 2-3 */
    struct gs_mig_plan plan, before;
    memset(&plan, 0x5a, sizeof(plan));
    memcpy(&before, &plan, sizeof(plan));
    uint32_t p1g = prof(m, "1g.10gb");
    assert_int_equal(gs_mig_plan_repartition(NULL, cur, 0, p1g, 1, &plan), GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 0, p1g, 1, NULL), GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, NULL, 1, p1g, 1, &plan), GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, GS_MIG_INSTANCES_MAX + 1, p1g, 1, &plan),
                     GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 0, m->n_profiles, 1, &plan), GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 0, p1g, 0, &plan), GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 0, p1g, GS_MIG_INSTANCES_MAX + 1, &plan),
                     GS_EINVAL);
    assert_int_equal(gs_mig_plan_repartition(m, cur, 2, p1g, 1, &plan), GS_EINVAL);
    cur[1].in.start = 3; /* not a start of 2g */
    assert_int_equal(gs_mig_plan_repartition(m, cur, 2, p1g, 1, &plan), GS_EINVAL);
    assert_memory_equal(&plan, &before, sizeof(plan));
    /* An empty GPU and NULL cur with n == 0 are fine: 7 x 1g.10gb on it. */
    assert_int_equal(gs_mig_plan_repartition(m, NULL, 0, p1g, 7, &plan), GS_OK);
    assert_int_equal(plan.n_created, 7);
    /* More than the profile allows on one GPU is no error in the request, just no plan. */
    assert_int_equal(gs_mig_plan_repartition(m, NULL, 0, prof(m, "3g.40gb"), 3, &plan), GS_ENOENT);
}

/* ---- the invariant test ----------------------------------------------------------------- */

/* Whether `count` instances of profile p fit beside the instances kept[0..nk) (the brute force:
 * every subset of the profile's starts as a bitmask, judged by gs_mig_layout_check()). */
static bool fits_beside(const struct gs_mig_model *m, const struct gs_mig_instance *kept,
                        uint32_t nk, uint32_t p, uint32_t count)
{
    const struct gs_mig_profile *pr = &m->profiles[p];
    for (uint32_t set = 0; set < (1u << pr->n_starts); set++) {
        if ((uint32_t)__builtin_popcount(set) != count || nk + count > GS_MIG_INSTANCES_MAX)
            continue;
        struct gs_mig_instance l[GS_MIG_INSTANCES_MAX];
        memcpy(l, kept, sizeof(l[0]) * nk);
        uint32_t nl = nk;
        for (uint32_t k = 0; k < pr->n_starts; k++)
            if (set >> k & 1)
                l[nl++] = (struct gs_mig_instance){(uint8_t)p, pr->starts[k]};
        if (gs_mig_layout_check(m, l, nl, NULL, 0) == GS_OK)
            return true;
    }
    return false;
}

/* The fewest free instances any plan must destroy, by brute force over every destroy set; the
 * kept free instances of p serve first. Returns -1 when no destroy set works. */
static int fewest_destroyed(const struct gs_mig_model *m, const struct gs_mig_slot *cur, uint32_t n,
                            uint32_t p, uint32_t count)
{
    int best = -1;
    for (uint32_t mask = 0; mask < (1u << n); mask++) {
        bool ok = true;
        struct gs_mig_instance kept[GS_MIG_INSTANCES_MAX];
        uint32_t nk = 0, serving = 0;
        for (uint32_t i = 0; i < n && ok; i++) {
            if (mask >> i & 1) {
                ok = !cur[i].used;
                continue;
            }
            kept[nk++] = cur[i].in;
            if (!cur[i].used && cur[i].in.profile == p && serving < count)
                serving++;
        }
        int size = __builtin_popcount(mask);
        if (!ok || (best >= 0 && size >= best))
            continue;
        if (serving == count || fits_beside(m, kept, nk, p, count - serving))
            best = size;
    }
    return best;
}

/* A random valid layout: up to 12 tries of a random profile at a random allowed start. */
static uint32_t random_layout(struct gs_rng *rng, const struct gs_mig_model *m,
                              struct gs_mig_slot *cur)
{
    struct gs_mig_instance l[GS_MIG_INSTANCES_MAX];
    uint32_t n = 0;
    for (int t = 0; t < 12 && n < GS_MIG_INSTANCES_MAX; t++) {
        uint32_t p = gs_rng_below(rng, m->n_profiles);
        const struct gs_mig_profile *pr = &m->profiles[p];
        l[n] = (struct gs_mig_instance){(uint8_t)p, pr->starts[gs_rng_below(rng, pr->n_starts)]};
        if (gs_mig_layout_check(m, l, n + 1, NULL, 0) == GS_OK)
            n++;
    }
    for (uint32_t i = 0; i < n; i++)
        cur[i] = (struct gs_mig_slot){l[i], gs_rng_below(rng, 3) == 0};
    return n;
}

/* Checks one plan against its input: valid result, used instances kept in place, destroys only
 * of free input instances, the layout = kept + created, the grant, and rule 1 by brute force. */
static void check_plan(const struct gs_mig_model *m, const struct gs_mig_slot *cur, uint32_t n,
                       uint32_t p, uint32_t count, const struct gs_mig_plan *plan)
{
    assert_int_equal(gs_mig_layout_check(m, plan->layout, plan->n_layout, NULL, 0), GS_OK);
    assert_int_equal(plan->n_ops, plan->n_destroyed + plan->n_created);
    assert_true(plan->evaluated >= 1 && plan->evaluated <= GS_MIG_PLAN_EVAL_MAX);
    /* Destroys first, ascending start, each a free input instance; then creates of p. */
    bool destroyed[GS_MIG_INSTANCES_MAX] = {false};
    for (uint32_t k = 0; k < plan->n_ops; k++) {
        const struct gs_mig_op *op = &plan->ops[k];
        if (k < plan->n_destroyed) {
            assert_int_equal(op->op, GS_MIG_OP_DESTROY);
            if (k > 0)
                assert_true(op->in.start > plan->ops[k - 1].in.start);
            bool hit = false;
            for (uint32_t i = 0; i < n; i++)
                if (cur[i].in.profile == op->in.profile && cur[i].in.start == op->in.start) {
                    assert_false(cur[i].used);
                    assert_false(destroyed[i]);
                    destroyed[i] = hit = true;
                }
            assert_true(hit);
        } else {
            assert_int_equal(op->op, GS_MIG_OP_CREATE);
            assert_int_equal(op->in.profile, p);
            if (k > plan->n_destroyed)
                assert_true(op->in.start > plan->ops[k - 1].in.start);
        }
    }
    /* Layout: the kept instances in input order, then the created ones as in the ops. */
    uint32_t j = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (destroyed[i])
            continue;
        assert_true(j < plan->n_layout);
        assert_memory_equal(&plan->layout[j], &cur[i].in, sizeof(cur[i].in));
        j++;
    }
    assert_int_equal(j + plan->n_created, plan->n_layout);
    for (uint32_t k = 0; k < plan->n_created; k++)
        assert_memory_equal(&plan->layout[j + k], &plan->ops[plan->n_destroyed + k].in,
                            sizeof(struct gs_mig_instance));
    /* The grant: count distinct instances of p, none held by a pod. */
    assert_int_equal(plan->n_granted, count);
    uint32_t seen = 0;
    for (uint32_t g = 0; g < plan->n_granted; g++) {
        uint32_t x = plan->granted[g];
        assert_true(x < plan->n_layout);
        assert_false(seen >> x & 1);
        seen |= 1u << x;
        assert_int_equal(plan->layout[x].profile, p);
        uint32_t kept_i = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (destroyed[i])
                continue;
            if (kept_i++ == x)
                assert_false(cur[i].used);
        }
    }
    assert_int_equal(fewest_destroyed(m, cur, n, p, count), (int)plan->n_destroyed);
}

/*
 * For every model, 1,500 random layouts (a third of the instances held) and a random request
 * (any profile, 1..3 instances): a plan is valid and checked as above, and the same call twice
 * gives the same bytes; GS_ENOENT only when the brute force finds no destroy set at all.
 */
static void test_random_layouts_of_every_model_keep_the_invariants(void **state)
{
    (void)state;
    struct gs_rng rng;
    gs_rng_seed(&rng, 8);
    uint32_t plans = 0, refusals = 0, zero_ops = 0;
    for (uint32_t mi = 0; mi < gs_mig_model_count(); mi++) {
        const struct gs_mig_model *m = gs_mig_model_at(mi);
        for (int t = 0; t < 1500; t++) {
            struct gs_mig_slot cur[GS_MIG_INSTANCES_MAX];
            uint32_t n = random_layout(&rng, m, cur);
            uint32_t p = gs_rng_below(&rng, m->n_profiles);
            uint32_t count = 1 + gs_rng_below(&rng, 3);
            struct gs_mig_plan a, b;
            memset(&a, 0, sizeof(a));
            memset(&b, 0xff, sizeof(b));
            int rc = gs_mig_plan_repartition(m, cur, n, p, count, &a);
            assert_int_equal(gs_mig_plan_repartition(m, cur, n, p, count, &b), rc);
            if (rc == GS_ENOENT) {
                assert_int_equal(fewest_destroyed(m, cur, n, p, count), -1);
                refusals++;
                continue;
            }
            assert_int_equal(rc, GS_OK);
            assert_memory_equal(&a, &b, sizeof(a));
            check_plan(m, cur, n, p, count, &a);
            plans++;
            zero_ops += a.n_ops == 0;
        }
    }
    /* The mix covers every outcome (figures of seed 8, to see the test exercises each). */
    print_message("%u plans (%u with no operation), %u refusals\n", plans, zero_ops, refusals);
    assert_true(plans > 1000 && refusals > 100 && zero_ops > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h100_seven_1g_to_one_3g_destroys_the_upper_three),
        cmocka_unit_test(test_request_served_by_a_free_instance_needs_no_operation),
        cmocka_unit_test(test_empty_slices_are_used_before_destroying),
        cmocka_unit_test(test_used_instances_in_the_way_give_enoent),
        cmocka_unit_test(test_h100_two_3g_on_one_card_one_kept_one_new),
        cmocka_unit_test(test_a100_40gb_two_2g_tie_goes_to_the_lowest_mask),
        cmocka_unit_test(test_a100_40gb_score_keeps_the_larger_free_instance),
        cmocka_unit_test(test_a30_two_1g_one_kept_one_from_the_2g),
        cmocka_unit_test(test_a30_2g_around_a_used_1g),
        cmocka_unit_test(test_bad_arguments_are_einval),
        cmocka_unit_test(test_random_layouts_of_every_model_keep_the_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
