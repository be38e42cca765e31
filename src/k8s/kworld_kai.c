/*
 * KAI-Scheduler's Queue fields the translation does not read (kworld_kai.h).
 */
#include "kworld_kai.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Appends ", " (after the first) and the path prefix.key to buf. */
static void note(char *buf, size_t cap, size_t *len, unsigned *n, const char *prefix,
                 const char *key)
{
    bool first = (*n)++ == 0;
    if (*len + 1 >= cap)
        return; /* already full, "..." written */
    int w = snprintf(buf + *len, cap - *len, "%s%s%s", first ? "" : ", ", prefix, key);
    if (w < 0 || (size_t)w >= cap - *len) {
        (void)snprintf(buf + cap - 4, 4, "...");
        *len = cap - 1;
    } else {
        *len += (size_t)w;
    }
}

unsigned gs__kai_queue_ignored(const json_t *spec, char *buf, size_t cap)
{
    static const char *const resources[] = {"gpu", "cpu", "memory"};
    static const char *const fields[] = {"quota", "limit", "overQuotaWeight"};
    size_t len = 0;
    unsigned n = 0;
    buf[0] = '\0';
    if (!json_is_object(spec))
        return 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)spec, k, v)
    {
        if (strcmp(k, "parentQueue") == 0)
            continue;
        if (strcmp(k, "resources") != 0 || !json_is_object(v)) {
            note(buf, cap, &len, &n, "spec.", k);
            continue;
        }
        const char *rk;
        const json_t *rv;
        json_object_foreach((json_t *)v, rk, rv)
        {
            size_t r = 0;
            while (r < 3 && strcmp(rk, resources[r]) != 0)
                r++;
            if (r == 3 || !json_is_object(rv)) {
                note(buf, cap, &len, &n, "spec.resources.", rk);
                continue;
            }
            char prefix[64];
            (void)snprintf(prefix, sizeof(prefix), "spec.resources.%s.", rk);
            const char *fk;
            const json_t *fv;
            json_object_foreach((json_t *)rv, fk, fv)
            {
                (void)fv;
                size_t f = 0;
                while (f < 3 && strcmp(fk, fields[f]) != 0)
                    f++;
                if (f == 3)
                    note(buf, cap, &len, &n, prefix, fk);
            }
        }
    }
    return n;
}
