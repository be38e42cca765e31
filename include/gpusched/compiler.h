/*
 * Compiler attributes, in one place, for every layer (util, core, rpc, agent, k8s, sim, cli).
 * Each macro expands to nothing on a compiler that is neither GCC nor Clang, so the code stays
 * plain C11; none of them changes what correct code does, they only let the compiler check more.
 */
#ifndef GPUSCHED_COMPILER_H
#define GPUSCHED_COMPILER_H

#if defined(__GNUC__) || defined(__clang__)
/** The function takes a printf format at argument f (1-based) and its arguments from a on. */
#define GS_PRINTF(f, a) __attribute__((format(printf, f, a)))
/** Ignoring the function's return value is a mistake (an error code, an owned pointer). */
#define GS_NODISCARD __attribute__((warn_unused_result))
/** The entity may be unused without a warning (a parameter kept for an interface). */
#define GS_UNUSED __attribute__((unused))
/** The object is aligned to n bytes (a power of two). */
#define GS_ALIGNED(n) __attribute__((aligned(n)))
#else
#define GS_PRINTF(f, a)
#define GS_NODISCARD
#define GS_UNUSED
#define GS_ALIGNED(n)
#endif

#endif /* GPUSCHED_COMPILER_H */
