/*
 * YAML (and JSON, which libyaml reads as YAML) into jansson values, for cluster dumps written by
 * `kubectl get ... -o yaml` or `-o json` and for whatif timelines.
 *
 * The text is streamed through the shared YAML walker (src/util/yaml.h) with this reader's
 * limits, and each event goes straight into the jansson value being built, so a cluster dump
 * has no YAML tree of its own beside its JSON. Plain scalars are typed as the YAML core schema
 * does (null, ~, true, false, integers, floats); quoted or tagged ones stay strings. Aliases are
 * refused (they can expand without bound), and so are documents nested deeper than 64 levels.
 * Errors name the file, line and column.
 */
#define _POSIX_C_SOURCE 200809L /* strndup */

#include "k8s/yamljson.h"

#include "gpusched/diag.h"
#include "gpusched/err.h"
#include "util/yaml.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Deepest nesting of a document. */
#define DEPTH_MAX 64u

/* A cluster dump is far larger than a configuration: 1 GiB of text, 10^8 nodes. */
static const struct gs_yaml_limits limits = {
    .bytes_max = (size_t)1 << 30,
    .depth_max = DEPTH_MAX,
    .nodes_max = 100000000u,
    .aliases = false,
    .tags = true,
    .what = "a Kubernetes object file",
};

/** One open collection. */
struct level {
    json_t *value; /**< the object or array being filled (owned) */
    bool map;      /**< an object */
    char *key;     /**< an object's key waiting for its value, or NULL */
};

struct ctx {
    struct level stack[DEPTH_MAX]; /**< open collections, outermost first */
    uint32_t depth;                /**< entries in stack */
    json_t *doc;                   /**< the finished document (owned) */
};

static json_t *scalar(const struct gs_yaml_event *ev)
{
    const char *v = ev->text;
    size_t len = ev->len;
    if (!ev->plain || ev->tagged)
        return json_stringn(v, len);
    if (len == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
        strcmp(v, "NULL") == 0)
        return json_null();
    if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0)
        return json_true();
    if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0)
        return json_false();
    char *end = NULL;
    errno = 0;
    long long i = strtoll(v, &end, 10);
    if (end && *end == '\0' && errno == 0 && (isdigit((unsigned char)v[0]) || v[0] == '-'))
        return json_integer(i);
    errno = 0;
    double d = strtod(v, &end);
    if (end && *end == '\0' && errno == 0 &&
        (isdigit((unsigned char)v[0]) || v[0] == '-' || v[0] == '.') && strchr(v, 'x') == NULL)
        return json_real(d);
    return json_stringn(v, len);
}

/* Puts a finished value (a new reference, taken) into the open collection or the document. */
static int place(struct ctx *c, json_t *val, const struct gs_yaml_event *ev, struct gs_diag *d)
{
    if (val == NULL)
        return gs__yaml_fail(d, GS_ENOMEM, &ev->at, "", "out of memory");
    if (c->depth == 0) {
        c->doc = val;
        return GS_OK;
    }
    struct level *l = &c->stack[c->depth - 1];
    int bad;
    if (l->map) {
        bad = json_object_set_new(l->value, l->key, val);
        free(l->key);
        l->key = NULL;
    } else {
        bad = json_array_append_new(l->value, val);
    }
    return bad ? gs__yaml_fail(d, GS_ENOMEM, &ev->at, "", "out of memory") : GS_OK;
}

static int on_event(void *ctx, const struct gs_yaml_event *ev, struct gs_diag *d)
{
    struct ctx *c = ctx;
    struct level *top = c->depth > 0 ? &c->stack[c->depth - 1] : NULL;
    bool want_key = top != NULL && top->map && top->key == NULL;
    if (want_key && ev->kind != GS_YAML_EV_SCALAR && ev->kind != GS_YAML_EV_END)
        return gs__yaml_fail(d, GS_EPARSE, &ev->at, "", "a mapping key must be a scalar");
    switch (ev->kind) {
    case GS_YAML_EV_SCALAR:
        if (want_key) {
            top->key = strndup(ev->text, ev->len);
            return top->key ? GS_OK : gs__yaml_fail(d, GS_ENOMEM, &ev->at, "", "out of memory");
        }
        return place(c, scalar(ev), ev, d);
    case GS_YAML_EV_SEQ_START:
    case GS_YAML_EV_MAP_START: {
        bool map = ev->kind == GS_YAML_EV_MAP_START;
        json_t *v = map ? json_object() : json_array();
        if (v == NULL)
            return gs__yaml_fail(d, GS_ENOMEM, &ev->at, "", "out of memory");
        c->stack[c->depth++] = (struct level){v, map, NULL}; /* the walker bounds depth */
        return GS_OK;
    }
    case GS_YAML_EV_END: {
        struct level l = c->stack[--c->depth];
        free(l.key);
        return place(c, l.value, ev, d);
    }
    case GS_YAML_EV_ALIAS: /* refused by the limits before it gets here */
        return gs__yaml_fail(d, GS_EPARSE, &ev->at, "", "YAML aliases are not accepted");
    }
    return GS_OK;
}

int gs_yaml_to_json(const char *file, const char *text, size_t len, json_t **out, char *err,
                    size_t cap)
{
    struct ctx c;
    struct gs_diag d;
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    (void)snprintf(d.file, sizeof d.file, "%s", file ? file : "<input>");
    *out = NULL;
    int rc = gs__yaml_walk(text, len, &limits, on_event, &c, &d);
    while (c.depth > 0) {
        struct level *l = &c.stack[--c.depth];
        free(l->key);
        json_decref(l->value);
    }
    if (rc != GS_OK) {
        json_decref(c.doc);
        (void)gs_diag_format(&d, err, cap);
        return -1;
    }
    *out = c.doc ? c.doc : json_null();
    return 0;
}
