/*
 * The core's allocator over the C library (see alloc_int.h). Alone in its file so that a test
 * defining these functions replaces them at link time.
 */
#include "alloc_int.h"

#include <stdlib.h>

void *gs__malloc(size_t n)
{
    return malloc(n);
}

void *gs__calloc(size_t count, size_t size)
{
    return calloc(count, size);
}

void *gs__realloc(void *p, size_t n)
{
    return realloc(p, n);
}

void gs__free(void *p)
{
    free(p);
}
