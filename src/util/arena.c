/*
 * The bump allocator of src/util/arena.h.
 */
#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Returns n zeroed bytes aligned for any type, or NULL when out of memory. */
void *gs__arena_alloc(struct gs_arena *a, size_t n)
{
    const size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX / 2)
        return NULL;
    n = n == 0 ? align : (n + align - 1) / align * align;
    struct gs_arena_chunk *c = a->head;
    if (c != NULL && c->cap - c->used >= n) {
        void *p = (unsigned char *)c->data + c->used;
        c->used += n;
        memset(p, 0, n);
        return p;
    }
    size_t cap = n > GS_ARENA_CHUNK ? n : GS_ARENA_CHUNK;
    c = malloc(sizeof *c + cap);
    if (c == NULL)
        return NULL;
    c->cap = cap;
    c->used = n;
    memset(c->data, 0, n);
    if (a->head != NULL && n > GS_ARENA_CHUNK) {
        /* A big block gets its own chunk behind the current one, whose room stays usable. */
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
    }
    return c->data;
}

/* Copies n bytes of s and a terminating NUL; NULL when out of memory. */
char *gs__arena_strndup(struct gs_arena *a, const char *s, size_t n)
{
    char *p = gs__arena_alloc(a, n + 1);
    if (p != NULL) {
        if (n > 0)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void gs__arena_fini(struct gs_arena *a)
{
    if (a == NULL)
        return;
    struct gs_arena_chunk *c = a->head;
    while (c != NULL) {
        struct gs_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}
