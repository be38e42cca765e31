/*
 * Unit tests of MIG geometry (include/gpusched/mig.h): the table per model, the lookup by the
 * names GPU Feature Discovery writes, the layout check with its exact reasons, and the count of
 * maximal layouts against figures worked out by hand in the comments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/mig.h"

/* Builds a layout from "profile@start" pairs of one model. */
static uint32_t layout(const struct gs_mig_model *m, struct gs_mig_instance *out,
                       const char *const *names, const uint8_t *starts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int p = gs_mig_profile_find(m, names[i]);
        assert_true(p >= 0);
        out[i] = (struct gs_mig_instance){(uint8_t)p, starts[i]};
    }
    return n;
}

static void expect_valid(const char *model, const char *const *names, const uint8_t *starts,
                         uint32_t n)
{
    const struct gs_mig_model *m = gs_mig_model_find(model);
    assert_non_null(m);
    struct gs_mig_instance in[GS_MIG_INSTANCES_MAX];
    layout(m, in, names, starts, n);
    char why[256];
    int err = gs_mig_layout_check(m, in, n, why, sizeof(why));
    if (err)
        print_error("%s: %s\n", model, why);
    assert_int_equal(err, GS_OK);
    assert_string_equal(why, "");
}

static void expect_invalid(const char *model, const char *const *names, const uint8_t *starts,
                           uint32_t n, const char *reason)
{
    const struct gs_mig_model *m = gs_mig_model_find(model);
    assert_non_null(m);
    struct gs_mig_instance in[GS_MIG_INSTANCES_MAX];
    layout(m, in, names, starts, n);
    char why[256];
    assert_int_equal(gs_mig_layout_check(m, in, n, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, reason);
}

static void test_product_labels_find_their_model(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"A30-24GB", "A30-24GB"},
        {"NVIDIA-A30", "A30-24GB"},
        {"NVIDIA-A100-SXM4-40GB", "A100-40GB"},
        {"NVIDIA-A100-PCIE-40GB", "A100-40GB"},
        {"NVIDIA-A100-80GB-PCIe", "A100-80GB"},
        {"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
        {"NVIDIA-H100-80GB-HBM3", "H100-80GB"},
        {"NVIDIA-H100-PCIe", "H100-80GB"},
        {"NVIDIA-H100-NVL", "H100-94GB"},
        {"h100_94gb", "H100-94GB"},
        {"NVIDIA-H200", "H200-141GB"},
        {"NVIDIA H200 NVL", "H200-141GB"},
        {"NVIDIA-B200", "B200"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct gs_mig_model *m = gs_mig_model_find(cases[i][0]);
        if (!m)
            print_error("no model for %s\n", cases[i][0]);
        assert_non_null(m);
        assert_string_equal(m->name, cases[i][1]);
    }
    /* No memory size for an A100 (40 or 80?), a size the family has no MIG table for, GPUs
     * without MIG, and nonsense. */
    assert_null(gs_mig_model_find("A100"));
    assert_null(gs_mig_model_find("NVIDIA-H100-96GB"));
    assert_null(gs_mig_model_find("Tesla-V100-SXM2-16GB"));
    assert_null(gs_mig_model_find("NVIDIA-A100-40GB-80GB"));
    assert_null(gs_mig_model_find(""));
    assert_null(gs_mig_model_find(NULL));
}

static void test_every_model_has_the_seven_profile_shapes(void **state)
{
    (void)state;
    assert_int_equal(gs_mig_model_count(), 7);
    for (uint32_t i = 0; i < gs_mig_model_count(); i++) {
        const struct gs_mig_model *m = gs_mig_model_at(i);
        for (uint32_t p = 0; p < m->n_profiles; p++) {
            const struct gs_mig_profile *pr = &m->profiles[p];
            assert_true(strlen(pr->name) < GS_MIG_NAME_MAX);
            for (uint32_t k = 0; k < pr->n_starts; k++) {
                struct gs_mig_instance in = {(uint8_t)p, pr->starts[k]};
                /* Every listed placement lies inside the GPU, in memory and compute. */
                assert_int_not_equal(gs_mig_mem_mask(m, in), 0);
                assert_int_not_equal(gs_mig_compute_mask(m, in), 0);
                if (k)
                    assert_true(pr->starts[k] > pr->starts[k - 1]);
            }
        }
    }
    assert_null(gs_mig_model_at(7));
    /* Spot values from the guide's tables: H200's 1g is 1g.18gb, seven of them; its two-slice
     * 1g is 1g.35gb at 0, 2, 4, 6; B200's whole-GPU profile is 7g.180gb. */
    const struct gs_mig_model *h200 = gs_mig_model_find("H200-141GB");
    int p = gs_mig_profile_find(h200, "1g.18gb");
    assert_int_equal(p, 0);
    assert_int_equal(h200->profiles[p].max_count, 7);
    p = gs_mig_profile_find(h200, "mig-1g.35gb");
    assert_true(p >= 0);
    assert_int_equal(h200->profiles[p].mem_slices, 2);
    assert_int_equal(h200->profiles[p].n_starts, 4);
    assert_int_equal(h200->profiles[p].starts[3], 6);
    assert_true(gs_mig_profile_find(gs_mig_model_find("B200"), "7g.180gb") >= 0);
    assert_int_equal(gs_mig_profile_find(h200, "1g.10gb"), -1);
    /* A30: 4g.24gb takes all 4 memory slices from 0. */
    const struct gs_mig_model *a30 = gs_mig_model_find("A30-24GB");
    p = gs_mig_profile_find(a30, "4g.24gb");
    assert_int_equal(gs_mig_mem_mask(a30, (struct gs_mig_instance){(uint8_t)p, 0}), 0xf);
}

static void test_profile_memory_from_listing_or_slices(void **state)
{
    (void)state;
    const struct gs_mig_model *h100 = gs_mig_model_find("H100-80GB");
    /* -lgip lists 3g.40gb as 39.50 GiB: 39.5 * 1024 = 40448 MiB, whatever the GPU memory. */
    assert_int_equal(
        gs_mig_profile_mem_mib(h100, (uint32_t)gs_mig_profile_find(h100, "3g.40gb"), 81559), 40448);
    /* No listing for H200: 2 of 8 memory slices of 143771 MiB = 35942 (143771 / 4 = 35942.75). */
    const struct gs_mig_model *h200 = gs_mig_model_find("H200-141GB");
    assert_int_equal(
        gs_mig_profile_mem_mib(h200, (uint32_t)gs_mig_profile_find(h200, "2g.35gb"), 143771),
        35942);
    assert_int_equal(gs_mig_profile_mem_mib(h200, 99, 143771), 0);
}

static void test_a100_valid_layouts_accepted(void **state)
{
    (void)state;
    /* 2g at 0 (memory 0-1), 1g at 2 and 3, 3g at 4 (memory 4-7): 2+1+1+3 = 7 compute slices. */
    expect_valid("A100-40GB", (const char *const[]){"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"},
                 (const uint8_t[]){4, 0, 2, 3}, 4);
    /* Seven 1g, one per memory slice 0..6 (slice 7 stays unused, as the guide draws it). */
    expect_valid(
        "A100-40GB",
        (const char *const[]){"1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"},
        (const uint8_t[]){0, 1, 2, 3, 4, 5, 6}, 7);
    /* 4g at 0 (memory 0-3), 2g at 4, 1g at 6. */
    expect_valid("A100-40GB", (const char *const[]){"4g.20gb", "2g.10gb", "1g.5gb"},
                 (const uint8_t[]){0, 4, 6}, 3);
    /* 4g + 3g, 3g + 3g, the whole GPU, and the empty layout. */
    expect_valid("A100-80GB", (const char *const[]){"4g.40gb", "3g.40gb"}, (const uint8_t[]){0, 4},
                 2);
    expect_valid("A100-80GB", (const char *const[]){"3g.40gb", "3g.40gb"}, (const uint8_t[]){0, 4},
                 2);
    expect_valid("A100-80GB", (const char *const[]){"7g.80gb"}, (const uint8_t[]){0}, 1);
    expect_valid("A100-80GB", NULL, NULL, 0);
    /* The two-slice 1g of A100-80GB at 6 takes memory 6-7: beside 3g at 0 and 2g at 4. */
    expect_valid("A100-80GB", (const char *const[]){"3g.40gb", "2g.20gb", "1g.20gb"},
                 (const uint8_t[]){0, 4, 6}, 3);
}

static void test_other_models_valid_layouts_accepted(void **state)
{
    (void)state;
    /* A30: 2g at 0 and 1g at 2 and 3; one 1g with media extensions among them. */
    expect_valid("A30-24GB", (const char *const[]){"2g.12gb", "1g.6gb", "1g.6gb+me"},
                 (const uint8_t[]){0, 2, 3}, 3);
    expect_valid("A30-24GB", (const char *const[]){"4g.24gb"}, (const uint8_t[]){0}, 1);
    /* H100-80GB: 3g + 2g + 1g + 1g as on the A100; one 1g.10gb+me. */
    expect_valid("NVIDIA-H100-80GB-HBM3",
                 (const char *const[]){"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb+me"},
                 (const uint8_t[]){4, 0, 2, 3}, 4);
    /* H100-94GB: four 1g.24gb, each two memory slices. */
    expect_valid("H100-94GB", (const char *const[]){"1g.24gb", "1g.24gb", "1g.24gb", "1g.24gb"},
                 (const uint8_t[]){0, 2, 4, 6}, 4);
    /* H200: two 1g.18gb on one card next to a 4g and a 2g (the HAMi #2403 case). */
    expect_valid("H200-141GB", (const char *const[]){"4g.71gb", "2g.35gb", "1g.18gb"},
                 (const uint8_t[]){0, 4, 6}, 3);
    expect_valid("H200-141GB", (const char *const[]){"1g.18gb", "1g.18gb", "3g.71gb"},
                 (const uint8_t[]){0, 1, 4}, 3);
    /* B200: 7g alone; 3g + 3g. */
    expect_valid("B200", (const char *const[]){"7g.180gb"}, (const uint8_t[]){0}, 1);
    expect_valid("B200", (const char *const[]){"3g.90gb", "3g.90gb"}, (const uint8_t[]){4, 0}, 2);
}

static void test_invalid_layouts_refused_with_the_reason(void **state)
{
    (void)state;
    /* 2g at 2 takes memory 2-3, inside 3g at 0 (memory 0-3). */
    expect_invalid("A100-40GB", (const char *const[]){"3g.20gb", "2g.10gb"},
                   (const uint8_t[]){0, 2}, 2,
                   "instance 1 (2g.10gb at 2) overlaps instance 0 (3g.20gb at 0) in memory "
                   "slices 2-3");
    /* 1g at 3 lies in 4g's memory 0-3: one slice. */
    expect_invalid("A100-40GB", (const char *const[]){"4g.20gb", "1g.5gb"}, (const uint8_t[]){0, 3},
                   2,
                   "instance 1 (1g.5gb at 3) overlaps instance 0 (4g.20gb at 0) in memory slice 3");
    /* 1g may not start at 7, 3g not at 2, 2g not at 1, 4g not at 4. */
    expect_invalid("A100-40GB", (const char *const[]){"1g.5gb"}, (const uint8_t[]){7}, 1,
                   "instance 0 (1g.5gb at 7): start slot 7 is not a placement of 1g.5gb on "
                   "A100-40GB (allowed 0,1,2,3,4,5,6)");
    expect_invalid("H200-141GB", (const char *const[]){"1g.18gb", "3g.71gb"},
                   (const uint8_t[]){0, 2}, 2,
                   "instance 1 (3g.71gb at 2): start slot 2 is not a placement of 3g.71gb on "
                   "H200-141GB (allowed 0,4)");
    expect_invalid("A30-24GB", (const char *const[]){"2g.12gb"}, (const uint8_t[]){1}, 1,
                   "instance 0 (2g.12gb at 1): start slot 1 is not a placement of 2g.12gb on "
                   "A30-24GB (allowed 0,2)");
    expect_invalid("B200", (const char *const[]){"4g.90gb"}, (const uint8_t[]){4}, 1,
                   "instance 0 (4g.90gb at 4): start slot 4 is not a placement of 4g.90gb on "
                   "B200 (allowed 0)");
    /* 7g takes all 8 memory slices; one more 1g makes 9. */
    expect_invalid("H100-94GB", (const char *const[]){"7g.94gb", "1g.12gb"},
                   (const uint8_t[]){0, 0}, 2,
                   "instance 1 (1g.12gb at 0): memory slices exceeded: 9 of the GPU's 8");
    /* Only one instance with media extensions per GPU. */
    expect_invalid("A100-80GB", (const char *const[]){"1g.10gb+me", "1g.10gb+me"},
                   (const uint8_t[]){0, 1}, 2,
                   "instance 1 (1g.10gb+me at 1): more than 1 instance(s) of 1g.10gb+me");
    /* An index past the model's profiles. */
    const struct gs_mig_model *m = gs_mig_model_find("A100-40GB");
    struct gs_mig_instance bad = {9, 0};
    char why[128];
    assert_int_equal(gs_mig_layout_check(m, &bad, 1, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "instance 0: unknown profile 9 of A100-40GB");
    assert_int_equal(gs_mig_profile_find(m, "1g.6gb"), -1); /* an A30 name on an A100 */
    /* Too many instances for any GPU; a NULL model; the reason is cut to cap. */
    struct gs_mig_instance nine[9] = {{0, 0}};
    assert_int_equal(gs_mig_layout_check(m, nine, 9, why, sizeof(why)), GS_EINVAL);
    assert_string_equal(why, "9 instances: a GPU holds at most 8");
    assert_int_equal(gs_mig_layout_check(NULL, NULL, 0, why, sizeof(why)), GS_EINVAL);
    assert_int_equal(gs_mig_layout_check(m, &bad, 1, why, 11), GS_EINVAL);
    assert_string_equal(why, "instance 0");
    assert_int_equal(gs_mig_layout_check(m, &bad, 1, NULL, 0), GS_EINVAL);
}

/* Profiles by the shape of their name's first part, for masks of the enumeration. */
static uint32_t mask_of(const struct gs_mig_model *m, const char *const *names, uint32_t n)
{
    uint32_t mask = 0;
    for (uint32_t i = 0; i < n; i++) {
        int p = gs_mig_profile_find(m, names[i]);
        assert_true(p >= 0);
        mask |= UINT32_C(1) << p;
    }
    return mask;
}

/*
 * The counts, by hand.
 *
 * A 7-slice GPU (A100, H100, H200, B200): every placement except 7g lies in the left half
 * (memory 0-3) or the right half (memory 4-7), so a maximal layout without 7g is a maximal
 * left part next to a maximal right part, and the count is 1 (7g) + L x R.
 *  - Base profiles (1g, 2g, 3g, 4g, 7g), the configurations the guide draws for A100:
 *    left = {4g, 3g@0, 2g 2g, 2g 1g 1g, 1g 1g 2g, 1g x4} = 6; right = {3g@4, 2g@4 + 1g@6,
 *    1g@4 1g@5 1g@6} = 3 (slice 7 is reachable only by 3g@4 or 7g); 1 + 6 x 3 = 19.
 *  - All seven profiles: the two-slice 1g (at 0,2,4,6) is a third way to fill a pair of memory
 *    slices; left = 4g, 3g@0, or each pair (0-1), (2-3) one of {2g, two-slice 1g, 1g 1g}:
 *    2 + 3 x 3 = 11; right = 3g@4, or pair (4-5) one of the three and pair (6-7) one of
 *    {two-slice 1g@6, 1g@6}: 1 + 3 x 2 = 7. Media extensions: a layout with k one-slice 1g
 *    appears once as is and once per 1g turned into the single +me, 1 + k times. Summing k:
 *    over the 11 lefts, each pair has 1g 1g (k=2) in 1 of 3 choices, times 3 for the other
 *    pair, for 2 pairs: 2 x 3 x 2 = 12; over the 7 rights, pair (4-5) gives 2 x 2 = 4 and
 *    1g@6 gives 1 x 3 = 3: 7. Layouts without 7g:
 *    sum over (l, r) of (1 + k_l + k_r) = 11 x 7 + 12 x 7 + 11 x 7 = 238; with 7g: 239.
 * A30 (4 slices): base {1g, 2g, 4g}: {4g, 2g 2g, 2g 1g 1g, 1g 1g 2g, 1g x4} = 5. All five
 * profiles: 4g: 1; 2g 2g: none or one of the two as 2g+me: 3; 2g 1g 1g: (2 for the 2g) x
 * (none or one of the two 1g as +me: 3) = 6, and 6 mirrored; 1g x4: 1 + 4 = 5; total 21.
 */
static void test_maximal_layout_counts_match_the_hand_count(void **state)
{
    (void)state;
    uint64_t count;
    for (uint32_t i = 0; i < gs_mig_model_count(); i++) {
        const struct gs_mig_model *m = gs_mig_model_at(i);
        const struct gs_mig_profile *pr = m->profiles;
        bool a30 = m->compute_slices == 4;
        assert_int_equal(gs_mig_count_maximal_layouts(m, UINT32_MAX, &count), GS_OK);
        assert_int_equal(count, a30 ? 21 : 239);
        uint32_t base =
            a30 ? mask_of(m, (const char *const[]){pr[0].name, pr[2].name, pr[4].name}, 3)
                : mask_of(m,
                          (const char *const[]){pr[0].name, pr[3].name, pr[4].name, pr[5].name,
                                                pr[6].name},
                          5);
        assert_int_equal(gs_mig_count_maximal_layouts(m, base, &count), GS_OK);
        assert_int_equal(count, a30 ? 5 : 19);
    }
    /* Only 1g: seven on a 7-slice GPU, one layout. Nothing allowed: the empty layout. */
    const struct gs_mig_model *m = gs_mig_model_find("A100-40GB");
    assert_int_equal(gs_mig_count_maximal_layouts(m, 1, &count), GS_OK);
    assert_int_equal(count, 1);
    assert_int_equal(gs_mig_count_maximal_layouts(m, 0, &count), GS_OK);
    assert_int_equal(count, 1);
    assert_int_equal(gs_mig_count_maximal_layouts(NULL, 0, &count), GS_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_product_labels_find_their_model),
        cmocka_unit_test(test_every_model_has_the_seven_profile_shapes),
        cmocka_unit_test(test_profile_memory_from_listing_or_slices),
        cmocka_unit_test(test_a100_valid_layouts_accepted),
        cmocka_unit_test(test_other_models_valid_layouts_accepted),
        cmocka_unit_test(test_invalid_layouts_refused_with_the_reason),
        cmocka_unit_test(test_maximal_layout_counts_match_the_hand_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
