/*
 * Unit tests of the core's random source (xoshiro256** seeded by SplitMix64, Lemire bounded
 * draws, Fisher-Yates shuffle).
 *
 * The known-answer values come from an independent transcription of the published algorithms
 * (Blackman and Vigna's SplitMix64 and xoshiro256**, Lemire's multiply-and-reject) in Python,
 * not from this code; SplitMix64's first output for seed 0, 0xe220a8397b1dcdaf, is the widely
 * quoted reference value. The statistical checks use bounds several standard deviations wide.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/rng.h"

static void test_seed_expands_with_splitmix64(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 0);
    assert_true(r.s[0] == UINT64_C(0xe220a8397b1dcdaf));
    assert_true(r.s[1] == UINT64_C(0x6e789e6aa1b965f4));
    assert_true(r.s[2] == UINT64_C(0x06c45d188009454f));
    assert_true(r.s[3] == UINT64_C(0xf88bb8a8724c81ec));
}

static void test_next_matches_xoshiro256starstar_reference(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 0);
    assert_true(gs_rng_next(&r) == UINT64_C(0x99ec5f36cb75f2b4));
    assert_true(gs_rng_next(&r) == UINT64_C(0xbf6e1f784956452a));
    assert_true(gs_rng_next(&r) == UINT64_C(0x1a5f849d4933e6e0));
    gs_rng_seed(&r, 42);
    assert_true(gs_rng_next(&r) == UINT64_C(0x15780b2e0c2ec716));
    assert_true(gs_rng_next(&r) == UINT64_C(0x6104d9866d113a7e));
    assert_true(gs_rng_next(&r) == UINT64_C(0xae17533239e499a1));
}

static void test_same_seed_gives_same_stream_and_different_seeds_differ(void **state)
{
    (void)state;
    struct gs_rng a, b, c;
    gs_rng_seed(&a, 2023);
    gs_rng_seed(&b, 2023);
    gs_rng_seed(&c, 2024);
    int same_as_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = gs_rng_next(&a);
        assert_true(x == gs_rng_next(&b));
        same_as_c += x == gs_rng_next(&c);
    }
    assert_int_equal(same_as_c, 0);
    assert_memory_equal(&a, &b, sizeof(a));
    /* A copied state replays the same stream. */
    struct gs_rng fork = a;
    for (int i = 0; i < 10; i++)
        assert_true(gs_rng_next(&fork) == gs_rng_next(&a));
}

static void test_below_matches_lemire_reference(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 42);
    static const uint32_t want6[] = {0, 2, 4, 5, 5, 4, 4, 5, 4, 3};
    for (int i = 0; i < 10; i++)
        assert_int_equal(gs_rng_below(&r, 6), want6[i]);
    gs_rng_seed(&r, 42);
    static const uint32_t want1000[] = {83, 378, 680, 924, 991};
    for (int i = 0; i < 5; i++)
        assert_int_equal(gs_rng_below(&r, 1000), want1000[i]);
}

static void test_below_stays_in_bounds(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 7);
    static const uint32_t bounds[] = {1, 2, 3, 7, 10, 1000, 1u << 31, (1u << 31) + 1, UINT32_MAX};
    for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++)
        for (int i = 0; i < 2000; i++)
            assert_true(gs_rng_below(&r, bounds[b]) < bounds[b]);
}

static void test_below_zero_returns_zero_without_drawing(void **state)
{
    (void)state;
    struct gs_rng r, before;
    gs_rng_seed(&r, 11);
    before = r;
    assert_int_equal(gs_rng_below(&r, 0), 0);
    assert_memory_equal(&r, &before, sizeof(r));
    /* n = 1 always gives 0 but still consumes a draw. */
    assert_int_equal(gs_rng_below(&r, 1), 0);
    assert_memory_not_equal(&r, &before, sizeof(r));
}

static void test_below_is_roughly_uniform(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 99);
    uint32_t counts[6] = {0};
    const uint32_t draws = 60000;
    for (uint32_t i = 0; i < draws; i++)
        counts[gs_rng_below(&r, 6)]++;
    /* Mean 10000 each, sd sqrt(60000 x 1/6 x 5/6) = 91; +-500 is more than 5 sd. */
    for (int k = 0; k < 6; k++)
        assert_in_range(counts[k], 9500, 10500);

    /* A bound that is not a power of two and close to 2^32 / 3: a biased modulo reduction
     * would put about 65% of the draws in the lower half. Expect 50% +- 2%. */
    const uint32_t n = 3000000000u;
    uint32_t low = 0;
    for (uint32_t i = 0; i < 20000; i++)
        low += gs_rng_below(&r, n) < n / 2;
    assert_in_range(low, 9600, 10400);
}

static void test_shuffle_is_a_permutation(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 5);
    uint32_t v[100];
    for (uint32_t i = 0; i < 100; i++)
        v[i] = i;
    gs_rng_shuffle_u32(&r, v, 100);
    uint8_t seen[100] = {0};
    uint32_t moved = 0;
    for (uint32_t i = 0; i < 100; i++) {
        assert_true(v[i] < 100);
        assert_int_equal(seen[v[i]], 0);
        seen[v[i]] = 1;
        moved += v[i] != i;
    }
    /* A uniform permutation of 100 keeps about one element in place; 90 moved is generous. */
    assert_true(moved >= 90);

    /* Same seed, same permutation. */
    struct gs_rng a, b;
    gs_rng_seed(&a, 77);
    gs_rng_seed(&b, 77);
    uint32_t x[50], y[50];
    for (uint32_t i = 0; i < 50; i++)
        x[i] = y[i] = i * 3;
    gs_rng_shuffle_u32(&a, x, 50);
    gs_rng_shuffle_u32(&b, y, 50);
    assert_memory_equal(x, y, sizeof(x));
}

static void test_shuffle_of_zero_or_one_element_draws_nothing(void **state)
{
    (void)state;
    struct gs_rng r, before;
    gs_rng_seed(&r, 3);
    before = r;
    gs_rng_shuffle_u32(&r, NULL, 0);
    uint32_t one = 42;
    gs_rng_shuffle_u32(&r, &one, 1);
    assert_int_equal(one, 42);
    assert_memory_equal(&r, &before, sizeof(r));
}

static void test_shuffle_of_three_reaches_all_six_orders_evenly(void **state)
{
    (void)state;
    struct gs_rng r;
    gs_rng_seed(&r, 31337);
    uint32_t counts[6] = {0};
    for (int i = 0; i < 30000; i++) {
        uint32_t v[3] = {0, 1, 2};
        gs_rng_shuffle_u32(&r, v, 3);
        /* Index the order: first element x 2 + (second > third). */
        counts[v[0] * 2 + (v[1] > v[2])]++;
    }
    /* 5000 each, sd sqrt(30000 x 1/6 x 5/6) = 64.5; +-400 is over 6 sd. */
    for (int k = 0; k < 6; k++)
        assert_in_range(counts[k], 4600, 5400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_expands_with_splitmix64),
        cmocka_unit_test(test_next_matches_xoshiro256starstar_reference),
        cmocka_unit_test(test_same_seed_gives_same_stream_and_different_seeds_differ),
        cmocka_unit_test(test_below_matches_lemire_reference),
        cmocka_unit_test(test_below_stays_in_bounds),
        cmocka_unit_test(test_below_zero_returns_zero_without_drawing),
        cmocka_unit_test(test_below_is_roughly_uniform),
        cmocka_unit_test(test_shuffle_is_a_permutation),
        cmocka_unit_test(test_shuffle_of_zero_or_one_element_draws_nothing),
        cmocka_unit_test(test_shuffle_of_three_reaches_all_six_orders_evenly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
