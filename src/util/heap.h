/*
 * A binary min-heap of fixed-size records, ordered by a caller's "before" relation: the one
 * priority queue of the tree (the replay's event queue, the engine's per-flavor pending heaps).
 * Internal to the project (src/util, the lowest layer): no I/O, no globals, no clock, so the
 * pure core may use it.
 *
 * Records are copied in and out by value (memcpy of elem_size bytes). The relation must be a
 * strict weak order; records it holds equal come out in no promised order, so a caller that
 * needs a stable order adds a sequence number to its records (as the replay does).
 *
 * Thread-safety: none; one heap is used by one thread at a time.
 */
#ifndef GPUSCHED_UTIL_HEAP_H
#define GPUSCHED_UTIL_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** True when record a must leave the heap before record b. ctx is the heap's ctx. */
typedef bool (*gs_heap_before_fn)(const void *a, const void *b, void *ctx);
/** An allocator with realloc()'s contract (NULL on failure, the block untouched). */
typedef void *(*gs_heap_realloc_fn)(void *p, size_t n);
/** The matching free(). */
typedef void (*gs_heap_free_fn)(void *p);

/** A heap. Caller storage: set up with gs__heap_init(), released with gs__heap_fini(). */
struct gs_heap {
    unsigned char *v;         /**< cap + 1 records (the last is scratch), malloc'd; NULL empty */
    uint32_t n;               /**< records held */
    uint32_t cap;             /**< records v has room for, scratch not counted */
    size_t elem_size;         /**< bytes per record, > 0 */
    gs_heap_before_fn before; /**< the order */
    void *ctx;                /**< passed to before; borrowed */
    gs_heap_realloc_fn realloc_fn; /**< grows v: realloc() unless gs__heap_set_alloc() */
    gs_heap_free_fn free_fn;       /**< frees v: free() unless gs__heap_set_alloc() */
};

/**
 * Sets up an empty heap; allocates nothing.
 * @param elem_size  bytes per record, > 0.
 * @param before     the order (see gs_heap_before_fn); not NULL.
 * @param ctx        handed to before; borrowed for the heap's life; may be NULL.
 */
void gs__heap_init(struct gs_heap *h, size_t elem_size, gs_heap_before_fn before, void *ctx);

/**
 * Makes an empty heap allocate through `realloc_fn` and `free_fn` (the core's allocation seam,
 * src/core/alloc_int.h, so that its out-of-memory test reaches the heaps). Call before the first
 * push. Both not NULL.
 */
void gs__heap_set_alloc(struct gs_heap *h, gs_heap_realloc_fn realloc_fn, gs_heap_free_fn free_fn);

/** Frees the records and leaves the heap empty (usable again). NULL is a no-op. */
void gs__heap_fini(struct gs_heap *h);

/**
 * Adds a copy of the record at elem (elem_size bytes), in O(log n).
 * @return GS_OK; GS_ENOMEM (the heap is unchanged); GS_ELIMIT at UINT32_MAX - 1 records.
 */
int gs__heap_push(struct gs_heap *h, const void *elem);

/** The first record (valid until the next push or pop), or NULL when the heap is empty. */
const void *gs__heap_top(const struct gs_heap *h);

/**
 * Removes the first record, in O(log n), copying it to out when out is not NULL.
 * @return true, or false when the heap was empty (out untouched).
 */
bool gs__heap_pop(struct gs_heap *h, void *out);

/** Records held. */
static inline uint32_t gs__heap_len(const struct gs_heap *h)
{
    return h->n;
}

#endif /* GPUSCHED_UTIL_HEAP_H */
