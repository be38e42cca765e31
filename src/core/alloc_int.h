/*
 * The core's allocation seam: every allocation in src/core goes through these four functions,
 * so that a test can make any one of them fail (SQLite's test_malloc.c and libuv's replaceable
 * allocator serve the same end). alloc.c defines them over the C library; a test that defines
 * them itself is linked with its own instead (the archive member alloc.o then is not pulled
 * in), so the core keeps no allocator state and no globals. tests/unit/test_oom.c fails the
 * N-th allocation for every N of a scenario and checks the engine's invariants after each.
 *
 * Contracts are those of malloc, calloc, realloc and free: NULL on failure (realloc leaves the
 * block as it was); gs__free(NULL) is a no-op.
 */
#ifndef GPUSCHED_ALLOC_INT_H
#define GPUSCHED_ALLOC_INT_H

#include <stddef.h>

void *gs__malloc(size_t n);
void *gs__calloc(size_t count, size_t size);
void *gs__realloc(void *p, size_t n);
void gs__free(void *p);

#endif /* GPUSCHED_ALLOC_INT_H */
