/*
 * Framing parser of watch streams (contract in include/gpusched/kube.h). It does no I/O: the
 * informer feeds it the body bytes libcurl hands over, in whatever pieces they come, and tests
 * and the fuzzer feed it anything.
 *
 * The API server writes each event as one JSON object and a newline (its json.Framer). The
 * parser does not rely on the newline: it finds each object's end by counting braces outside
 * strings (minding backslash escapes), carrying that small scanner state between feeds, so an
 * event split at any byte is reassembled, several events in one piece come out in order, and
 * each byte is scanned once. Only the incomplete event's bytes are kept, and an event over the
 * bound fails before more is buffered, so memory stays under max_event_bytes whatever the
 * server sends. A completed object is decoded with jansson and checked for the event shape.
 */
#include "kube_int.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs_kube_watch_parser {
    struct gs__kube_buf buf; /**< bytes of the event being received */
    size_t max_event;        /**< bound on one event */
    uint64_t offset;         /**< stream bytes consumed before the current feed position */
    uint64_t event_start;    /**< stream offset of the current event's '{' */
    uint32_t depth;          /**< brace/bracket depth inside the current event; 0 between */
    bool in_event;           /**< inside an object */
    bool in_string;          /**< inside a JSON string */
    bool escape;             /**< the previous string byte was a backslash */
    int err;                 /**< sticky failure; GS_OK while fine */
    char msg[256];           /**< the failure's sentence */
};

int gs__kube_buf_add(struct gs__kube_buf *b, const void *data, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return GS_ELIMIT;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap > 0 ? b->cap : 4096;
        while (ncap < b->len + n + 1)
            ncap = ncap > ((size_t)-1) / 2 ? b->len + n + 1 : ncap * 2;
        if (ncap > b->max + 1)
            ncap = b->max + 1;
        char *np = realloc(b->p, ncap);
        if (np == NULL)
            return GS_ENOMEM;
        b->p = np;
        b->cap = ncap;
    }
    if (n > 0)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return GS_OK;
}

void gs__kube_buf_free(struct gs__kube_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}

int gs_kube_watch_parser_new(size_t max_event_bytes, struct gs_kube_watch_parser **out)
{
    if (out == NULL)
        return GS_EINVAL;
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return GS_ENOMEM;
    (*out)->max_event = max_event_bytes > 0 ? max_event_bytes : GS_KUBE_WATCH_MAX_EVENT_BYTES;
    (*out)->buf.max = (*out)->max_event;
    return GS_OK;
}

void gs_kube_watch_parser_free(struct gs_kube_watch_parser *p)
{
    if (p == NULL)
        return;
    gs__kube_buf_free(&p->buf);
    free(p);
}

void gs_kube_watch_parser_reset(struct gs_kube_watch_parser *p)
{
    size_t max = p->max_event;
    gs__kube_buf_free(&p->buf);
    memset(p, 0, sizeof *p);
    p->max_event = max;
    p->buf.max = max;
}

const char *gs_kube_watch_parser_error(const struct gs_kube_watch_parser *p)
{
    return p->msg;
}

GS_PRINTF(4, 5)
static int fail(struct gs_kube_watch_parser *p, int err, uint64_t at, const char *fmt, ...)
{
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    (void)snprintf(p->msg, sizeof p->msg, "byte %llu: %s", (unsigned long long)at, text);
    p->err = err;
    gs__kube_buf_free(&p->buf);
    return err;
}

/* Maps the "type" string; -1 for an unknown one. */
static int event_type(const char *s)
{
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Decodes the buffered object and hands it to cb. */
static int deliver(struct gs_kube_watch_parser *p, gs_kube_watch_event_fn cb, void *ud)
{
    json_error_t jerr;
    json_t *root = json_loadb(p->buf.p, p->buf.len, JSON_DISABLE_EOF_CHECK, &jerr);
    struct gs_kube_watch_event ev;
    int rc = GS_OK;
    uint64_t at = p->event_start;
    p->buf.len = 0;
    if (root == NULL)
        return fail(p, GS_EPARSE, at, "bad JSON in event: %.120s (after %d bytes of it)", jerr.text,
                    jerr.position);
    memset(&ev, 0, sizeof ev);
    ev.reason = "";
    ev.message = "";
    json_t *type = json_object_get(root, "type");
    if (type == NULL) {
        rc = fail(p, GS_EPARSE, at, "event has no \"type\"");
        goto out;
    }
    if (!json_is_string(type) || event_type(json_string_value(type)) < 0) {
        rc = fail(p, GS_EPARSE, at, "unknown event type %.40s",
                  json_is_string(type) ? json_string_value(type) : "(not a string)");
        goto out;
    }
    ev.type = (enum gs_kube_event_type)event_type(json_string_value(type));
    ev.object = json_object_get(root, "object");
    if (!json_is_object(ev.object)) {
        rc = fail(p, GS_EPARSE, at, "%s event has no \"object\" object", json_string_value(type));
        goto out;
    }
    json_t *rv = json_object_get(json_object_get(ev.object, "metadata"), "resourceVersion");
    if (json_is_string(rv))
        ev.resource_version = json_string_value(rv);
    if (ev.type == GS_KUBE_EVENT_ERROR) {
        json_t *code = json_object_get(ev.object, "code");
        json_t *reason = json_object_get(ev.object, "reason");
        json_t *message = json_object_get(ev.object, "message");
        if (json_is_integer(code))
            ev.status_code = (long)json_integer_value(code);
        if (json_is_string(reason))
            ev.reason = json_string_value(reason);
        if (json_is_string(message))
            ev.message = json_string_value(message);
    }
    rc = cb != NULL ? cb(ud, &ev) : GS_OK;
out:
    json_decref(root);
    return rc;
}

int gs_kube_watch_parser_feed(struct gs_kube_watch_parser *p, const void *data, size_t len,
                              gs_kube_watch_event_fn cb, void *ud)
{
    const unsigned char *d = data;
    size_t i = 0;
    if (p->err != GS_OK)
        return p->err;
    while (i < len) {
        if (!p->in_event) {
            unsigned char c = d[i];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                i++;
                continue;
            }
            if (c != '{')
                return fail(p, GS_EPARSE, p->offset + i,
                            "expected '{' to start an event, found byte 0x%02x", c);
            p->in_event = true;
            p->event_start = p->offset + i;
            p->depth = 0;
        }
        /* Scan to the end of the object or of the data, whichever is first. */
        size_t start = i;
        bool done = false;
        for (; i < len; i++) {
            unsigned char c = d[i];
            if (p->in_string) {
                if (p->escape)
                    p->escape = false;
                else if (c == '\\')
                    p->escape = true;
                else if (c == '"')
                    p->in_string = false;
                continue;
            }
            if (c == '"') {
                p->in_string = true;
            } else if (c == '{' || c == '[') {
                p->depth++;
            } else if (c == '}' || c == ']') {
                /* Mismatched kinds are left to jansson; only the count frames. */
                if (--p->depth == 0) {
                    i++;
                    done = true;
                    break;
                }
            }
        }
        int rc = gs__kube_buf_add(&p->buf, d + start, i - start);
        if (rc == GS_ELIMIT)
            return fail(p, GS_ELIMIT, p->event_start, "event longer than %zu bytes", p->max_event);
        if (rc != GS_OK)
            return fail(p, rc, p->event_start, "out of memory");
        if (!done)
            break;
        p->in_event = false;
        p->offset += i;
        /* `i` is relative to this feed; keep offsets right by rebasing. */
        d += i;
        len -= i;
        i = 0;
        /* A callback's stop leaves the parser usable; the rest of this feed is dropped. */
        rc = deliver(p, cb, ud);
        if (rc != GS_OK)
            return rc;
    }
    p->offset += i;
    return GS_OK;
}

int gs_kube_watch_parser_finish(struct gs_kube_watch_parser *p)
{
    if (p->err != GS_OK)
        return p->err;
    if (p->in_event)
        return fail(p, GS_EPARSE, p->event_start, "stream ends inside an event");
    return GS_OK;
}
