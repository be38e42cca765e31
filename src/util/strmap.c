/*
 * The string map of src/util/strmap.h.
 */
#include "util/strmap.h"

#include "gpusched/err.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bit: the rules' stable hash and the string map's. */
uint64_t gs__fnv1a(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}

static struct gs_strmap_ent *slot(const struct gs_strmap *m, const char *key, size_t len)
{
    size_t i = (size_t)gs__fnv1a(key, len) & (m->cap - 1);
    for (;;) {
        struct gs_strmap_ent *e = &m->v[i];
        if (e->key == NULL || (e->len == len && memcmp(e->key, key, len) == 0))
            return e;
        i = (i + 1) & (m->cap - 1);
    }
}

/* Returns what key maps to, or NULL. */
void *gs__strmap_get(const struct gs_strmap *m, const char *key, size_t len)
{
    if (m->cap == 0)
        return NULL;
    struct gs_strmap_ent *e = slot(m, key, len);
    return e->key != NULL ? e->val : NULL;
}

/* Maps key (borrowed, must outlive the map) to val, replacing an earlier value. */
int gs__strmap_put(struct gs_strmap *m, const char *key, size_t len, void *val)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t ncap = m->cap ? 2 * m->cap : 16;
        struct gs_strmap_ent *nv = calloc(ncap, sizeof *nv);
        if (nv == NULL)
            return GS_ENOMEM;
        struct gs_strmap old = *m;
        m->v = nv;
        m->cap = ncap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.v[i].key != NULL)
                *slot(m, old.v[i].key, old.v[i].len) = old.v[i];
        free(old.v);
    }
    struct gs_strmap_ent *e = slot(m, key, len);
    if (e->key == NULL)
        m->n++;
    *e = (struct gs_strmap_ent){key, len, val};
    return GS_OK;
}

void gs__strmap_fini(struct gs_strmap *m)
{
    if (m == NULL)
        return;
    free(m->v);
    *m = (struct gs_strmap){NULL, 0, 0};
}
