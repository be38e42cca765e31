/*
 * The binary heap of src/util/heap.h: the textbook array layout (children of i at 2i+1, 2i+2),
 * sifting a hole rather than swapping, so each level costs one record copy.
 */
#include "util/heap.h"

#include "gpusched/err.h"

#include <stdlib.h>
#include <string.h>

static unsigned char *at(const struct gs_heap *h, uint32_t i)
{
    return h->v + (size_t)i * h->elem_size;
}

void gs__heap_init(struct gs_heap *h, size_t elem_size, gs_heap_before_fn before, void *ctx)
{
    *h = (struct gs_heap){.elem_size = elem_size,
                          .before = before,
                          .ctx = ctx,
                          .realloc_fn = realloc,
                          .free_fn = free};
}

void gs__heap_set_alloc(struct gs_heap *h, gs_heap_realloc_fn realloc_fn, gs_heap_free_fn free_fn)
{
    h->realloc_fn = realloc_fn;
    h->free_fn = free_fn;
}

void gs__heap_fini(struct gs_heap *h)
{
    if (h == NULL)
        return;
    if (h->v != NULL)
        h->free_fn(h->v);
    h->v = NULL;
    h->n = 0;
    h->cap = 0;
}

int gs__heap_push(struct gs_heap *h, const void *elem)
{
    if (h->n == h->cap) {
        if (h->cap >= UINT32_MAX / 2)
            return GS_ELIMIT;
        uint32_t cap = h->cap ? h->cap * 2 : 16;
        unsigned char *v = h->realloc_fn(h->v, ((size_t)cap + 1) * h->elem_size);
        if (v == NULL)
            return GS_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    uint32_t i = h->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!h->before(elem, at(h, parent), h->ctx))
            break;
        memcpy(at(h, i), at(h, parent), h->elem_size);
        i = parent;
    }
    memcpy(at(h, i), elem, h->elem_size);
    return GS_OK;
}

const void *gs__heap_top(const struct gs_heap *h)
{
    return h->n > 0 ? h->v : NULL;
}

bool gs__heap_pop(struct gs_heap *h, void *out)
{
    if (h->n == 0)
        return false;
    if (out != NULL)
        memcpy(out, at(h, 0), h->elem_size);
    if (--h->n == 0)
        return true;
    /* The last record moves to the scratch slot and sinks from the root's hole. */
    unsigned char *last = at(h, h->cap);
    memcpy(last, at(h, h->n), h->elem_size);
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        const unsigned char *mv = last;
        if (l < h->n && h->before(at(h, l), mv, h->ctx)) {
            m = l;
            mv = at(h, l);
        }
        if (r < h->n && h->before(at(h, r), mv, h->ctx))
            m = r;
        if (m == i)
            break;
        memcpy(at(h, i), at(h, m), h->elem_size);
        i = m;
    }
    memcpy(at(h, i), last, h->elem_size);
    return true;
}
