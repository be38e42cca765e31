/*
 * An open-addressing hash map from byte strings to pointers (FNV-1a, linear probing, at most half
 * full), for name lookups in the readers. Keys are borrowed. Internal (src/util).
 * Thread-safety: none for writers; concurrent gets on an unchanging map are safe.
 */
#ifndef GPUSCHED_UTIL_STRMAP_H
#define GPUSCHED_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

/** One entry; the key is borrowed. */
struct gs_strmap_ent {
    const char *key; /**< NULL for an empty slot */
    size_t len;      /**< key bytes */
    void *val;       /**< what the key maps to */
};

/** A map. Caller storage; zero it to start; release with gs__strmap_fini(). */
struct gs_strmap {
    struct gs_strmap_ent *v; /**< cap slots */
    size_t cap, n;           /**< slots (a power of two or 0) / entries */
};

/**
 * FNV-1a, 64 bit, of n bytes (Fowler, Noll, Vo; offset basis 14695981039346656037, prime
 * 1099511628211): the map's hash, and a stable hash for callers that need one.
 */
uint64_t gs__fnv1a(const char *s, size_t n);

/** What the key (len bytes, borrowed) maps to, or NULL. */
void *gs__strmap_get(const struct gs_strmap *m, const char *key, size_t len);

/**
 * Maps key (len bytes; borrowed: it must outlive the map) to val, replacing an earlier value.
 * @return GS_OK or GS_ENOMEM (the map unchanged).
 */
int gs__strmap_put(struct gs_strmap *m, const char *key, size_t len, void *val);

/** Frees the slots and leaves the map empty. NULL is a no-op. */
void gs__strmap_fini(struct gs_strmap *m);

#endif /* GPUSCHED_UTIL_STRMAP_H */
