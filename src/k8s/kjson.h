/*
 * Two readers of Kubernetes objects as jansson trees, shared by the translation (kworld*.c),
 * the label selector matcher and the webhook. Private to src/k8s; header-only.
 */
#ifndef GS_K8S_KJSON_H
#define GS_K8S_KJSON_H

#include <jansson.h>

/** Member `key` of object o as a string, or NULL (o NULL, no such member, not a string). */
static inline const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/** o[a], or o[a][b] when b is not NULL; NULL where a level is missing or not an object. */
static inline const json_t *jpath(const json_t *o, const char *a, const char *b)
{
    const json_t *x = json_object_get(o, a);
    return b ? json_object_get(x, b) : x;
}

#endif /* GS_K8S_KJSON_H */
