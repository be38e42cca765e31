/*
 * gs_round_half_even() at two decimals, the simulator's per-event rounding: its printf-free
 * path must give exactly what the printf path (and Python's round(), which made the published
 * results) gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gpusched/rng.h"
#include "gpusched/sim.h"

/* The printf path: glibc rounds the exact binary value, ties to even. */
static double by_printf(double x)
{
    char buf[64];
    (void)snprintf(buf, sizeof(buf), "%.2f", x);
    return strtod(buf, NULL);
}

static void test_round_two_decimals_matches_python_round(void **state)
{
    (void)state;
    /* Each expected value is Python 3's round(x, 2): 2.675 and 1.005 are stored below the
     * written value (2.67499..., 1.00499...), 0.135 above it (0.13500...0888); 0.125, 0.375
     * and 88.125 are exact binary ties and go to the even hundredth. */
    static const double cases[][2] = {
        {2.675, 2.67}, {0.125, 0.12},   {0.375, 0.38}, {1.005, 1.0},
        {0.285, 0.28}, {0.135, 0.14},   {0.145, 0.14}, {88.125, 88.12},
        {50.0, 50.0},  {99.995, 100.0}, {0.0, 0.0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double got = gs_round_half_even(cases[i][0], 2);
        if (got != cases[i][1])
            fail_msg("round(%.17g, 2): got %.17g, want %.17g", cases[i][0], got, cases[i][1]);
    }
}

static void test_round_two_decimals_matches_printf_path(void **state)
{
    (void)state;
    struct gs_rng rng;
    gs_rng_seed(&rng, 12);
    /* The simulator's values, used milli-GPU / GPUs / 10 for clusters of 1 to 20,000 GPUs,
     * where hundredths and their midpoints are met exactly and nearly, and random ones. */
    for (uint32_t k = 0; k < 400000; k++) {
        double gpus = 1 + (double)gs_rng_below(&rng, 20000);
        double used = (double)gs_rng_below(&rng, (uint32_t)gpus * 1000 + 1);
        double x = k % 2 ? used / gpus / 10.0 : (double)gs_rng_below(&rng, 1u << 30) / 1024.0;
        double got = gs_round_half_even(x, 2), want = by_printf(x);
        if (got != want)
            fail_msg("round(%.17g, 2): got %.17g, printf path %.17g", x, got, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_two_decimals_matches_python_round),
        cmocka_unit_test(test_round_two_decimals_matches_printf_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
