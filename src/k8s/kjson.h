/*
 * Readers of Kubernetes objects as jansson trees, shared by the translation (kworld*.c),
 * the label selector matcher and the webhook. Private to src/k8s; header-only.
 */
#ifndef GS_K8S_KJSON_H
#define GS_K8S_KJSON_H

#include <jansson.h>
#include <stdio.h>

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

/**
 * The value v as a message shows it: a string in double quotes (cut at 40 bytes, "..." added),
 * a number as written, or its JSON type ("an object", "a list", "true", "null").
 * @param buf  receives the text; cap bytes (48 or more shows a cut string whole).
 * @return buf.
 */
static inline const char *jshow(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        (void)snprintf(buf, cap, "\"%.40s%s\"", s, json_string_length(v) > 40 ? "..." : "");
    } else if (json_is_integer(v)) {
        (void)snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        (void)snprintf(buf, cap, "%g", json_real_value(v));
    } else {
        (void)snprintf(buf, cap, "%s",
                       json_is_object(v)  ? "an object"
                       : json_is_array(v) ? "a list"
                       : json_is_true(v)  ? "true"
                       : json_is_false(v) ? "false"
                                          : "null");
    }
    return buf;
}

#endif /* GS_K8S_KJSON_H */
