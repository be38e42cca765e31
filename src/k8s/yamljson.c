/*
 * YAML (and JSON, which libyaml reads as YAML) into jansson values, for cluster dumps written by
 * `kubectl get ... -o yaml` or `-o json` and for whatif timelines.
 *
 * Plain scalars are typed as the YAML core schema does (null, ~, true, false, integers, floats);
 * quoted ones stay strings. Aliases are refused (they can expand without bound), and so are
 * documents nested deeper than a bound. Errors name the file, line and column.
 */
#define _POSIX_C_SOURCE 200809L /* strndup */

#include "k8s/yamljson.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define DEPTH_MAX 64

struct ctx {
    yaml_parser_t parser;
    const char *file;
    char *err;
    size_t cap;
};

static void fail(struct ctx *c, const yaml_mark_t *m, const char *what)
{
    (void)snprintf(c->err, c->cap, "%s:%zu:%zu: %s", c->file, m->line + 1, m->column + 1, what);
}

static json_t *scalar(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || ev->data.scalar.tag)
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

static json_t *node(struct ctx *c, yaml_event_t *first, int depth);

static json_t *collection(struct ctx *c, yaml_event_t *start, int depth)
{
    bool map = start->type == YAML_MAPPING_START_EVENT;
    if (depth >= DEPTH_MAX) {
        fail(c, &start->start_mark, "nested too deep");
        return NULL;
    }
    json_t *out = map ? json_object() : json_array();
    if (!out) {
        fail(c, &start->start_mark, "out of memory");
        return NULL;
    }
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&c->parser, &ev)) {
            fail(c, &c->parser.problem_mark, c->parser.problem ? c->parser.problem : "bad YAML");
            json_decref(out);
            return NULL;
        }
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return out;
        }
        if (map) {
            if (ev.type != YAML_SCALAR_EVENT) {
                fail(c, &ev.start_mark, "a mapping key must be a scalar");
                yaml_event_delete(&ev);
                json_decref(out);
                return NULL;
            }
            char *key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
            yaml_mark_t km = ev.start_mark;
            yaml_event_delete(&ev);
            yaml_event_t vev;
            if (!key || !yaml_parser_parse(&c->parser, &vev)) {
                fail(c, key ? &c->parser.problem_mark : &km, key ? "bad YAML" : "out of memory");
                free(key);
                json_decref(out);
                return NULL;
            }
            json_t *val = node(c, &vev, depth + 1);
            if (!val || json_object_set_new(out, key, val) != 0) {
                if (val)
                    fail(c, &km, "out of memory");
                free(key);
                json_decref(out);
                return NULL;
            }
            free(key);
        } else {
            json_t *val = node(c, &ev, depth + 1);
            if (!val || json_array_append_new(out, val) != 0) {
                json_decref(out);
                return NULL;
            }
        }
    }
}

/* Builds the value that starts with event `first` (consumed). */
static json_t *node(struct ctx *c, yaml_event_t *first, int depth)
{
    json_t *out = NULL;
    switch (first->type) {
    case YAML_SCALAR_EVENT:
        out = scalar(first);
        if (!out)
            fail(c, &first->start_mark, "out of memory");
        break;
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT:
        out = collection(c, first, depth);
        break;
    case YAML_ALIAS_EVENT:
        fail(c, &first->start_mark, "YAML aliases are not accepted");
        break;
    default:
        fail(c, &first->start_mark, "unexpected YAML event");
        break;
    }
    yaml_event_delete(first);
    return out;
}

int gs_yaml_to_json(const char *file, const char *text, size_t len, json_t **out, char *err,
                    size_t cap)
{
    struct ctx c = {.file = file ? file : "<input>", .err = err, .cap = cap};
    *out = NULL;
    if (!yaml_parser_initialize(&c.parser)) {
        (void)snprintf(err, cap, "%s: out of memory", c.file);
        return -1;
    }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)text, len);
    json_t *doc = NULL;
    int rc = -1;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&c.parser, &ev)) {
            fail(&c, &c.parser.problem_mark, c.parser.problem ? c.parser.problem : "bad YAML");
            break;
        }
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            rc = 0;
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
            t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (doc) {
            fail(&c, &ev.start_mark, "more than one YAML document");
            yaml_event_delete(&ev);
            break;
        }
        doc = node(&c, &ev, 0);
        if (!doc)
            break;
    }
    yaml_parser_delete(&c.parser);
    if (rc != 0) {
        json_decref(doc);
        return -1;
    }
    *out = doc ? doc : json_null();
    return 0;
}
