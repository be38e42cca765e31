/*
 * A bump allocator for work with one lifetime (a parse, a configuration): allocations are never
 * freed one by one, everything goes at once with gs__arena_fini(). Internal (src/util).
 * Thread-safety: none; one arena per thread at a time.
 */
#ifndef GPUSCHED_UTIL_ARENA_H
#define GPUSCHED_UTIL_ARENA_H

#include <stddef.h>

/** Bytes per arena chunk; a larger allocation gets a chunk of its own. */
#define GS_ARENA_CHUNK 65536u

/** One block of an arena. */
struct gs_arena_chunk {
    struct gs_arena_chunk *next; /**< older chunk */
    size_t used, cap;            /**< bytes of data handed out / available */
    max_align_t data[];          /**< the memory */
};

/** An arena. Caller storage; zero it to start (no _init needed). */
struct gs_arena {
    struct gs_arena_chunk *head; /**< the chunk being filled, then older ones */
};

/**
 * Returns n zeroed bytes aligned for any type, valid until gs__arena_fini(); NULL when out of
 * memory (the arena is unchanged) or n is over SIZE_MAX / 2. n == 0 still gives a unique block.
 */
void *gs__arena_alloc(struct gs_arena *a, size_t n);

/** Copies n bytes of s (borrowed) and a terminating NUL into the arena; NULL when out of memory. */
char *gs__arena_strndup(struct gs_arena *a, const char *s, size_t n);

/** Frees every chunk and leaves the arena empty (usable again). NULL is a no-op. */
void gs__arena_fini(struct gs_arena *a);

#endif /* GPUSCHED_UTIL_ARENA_H */
