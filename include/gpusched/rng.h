/*
 * The random source of the scheduling core.
 *
 * The core never owns randomness: every function that needs random draws takes a struct gs_rng
 * from its caller, so the same seed gives byte-identical decisions. The generator is
 * xoshiro256** (D. Blackman and S. Vigna, "Scrambled Linear Pseudorandom Number Generators",
 * ACM TOMS 47(4), 2021), seeded by expanding one 64-bit seed with SplitMix64 as its authors
 * recommend. Bounded draws use Lemire's multiply-and-reject method ("Fast Random Integer
 * Generation in an Interval", ACM TOMACS 29(1), 2019), which is exactly uniform.
 */
#ifndef GPUSCHED_RNG_H
#define GPUSCHED_RNG_H

#include <stdint.h>

/** Generator state. Plain value: copy it to fork a stream, compare it to check replay. */
struct gs_rng {
    uint64_t s[4]; /**< xoshiro256** state; never all zero after gs_rng_seed(). */
};

/**
 * Seeds the generator.
 * @param rng   caller storage; fully overwritten.
 * @param seed  any 64-bit value; equal seeds give equal streams on every platform.
 */
void gs_rng_seed(struct gs_rng *rng, uint64_t seed);

/**
 * Returns the next 64 random bits and advances the state.
 * @param rng  a seeded generator.
 */
uint64_t gs_rng_next(struct gs_rng *rng);

/**
 * Returns a uniformly distributed integer in [0, n).
 * @param rng  a seeded generator; advanced by one or (rarely) more draws.
 * @param n    the bound; n == 0 returns 0 and draws nothing.
 */
uint32_t gs_rng_below(struct gs_rng *rng, uint32_t n);

/**
 * Shuffles an array of uint32_t in place with Fisher-Yates (from the last element down).
 * @param rng  a seeded generator; advanced by n - 1 bounded draws.
 * @param v    array of n elements (may be NULL when n == 0).
 */
void gs_rng_shuffle_u32(struct gs_rng *rng, uint32_t *v, uint32_t n);

#endif /* GPUSCHED_RNG_H */
