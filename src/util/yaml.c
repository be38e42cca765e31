/*
 * The shared libyaml walker and tree loader (contract in src/util/yaml.h).
 *
 * gs__yaml_walk() owns the libyaml parser: it turns libyaml's errors and marks into positioned
 * diagnostics and applies the limits that must stop libyaml early (input size, depth as
 * collections open, tags, aliases, documents, node count) before any reader sees an event.
 * gs__yaml_load() is one such reader: a small tree builder with a stack of open collections and
 * a stack of pending children, which also counts aliases by the weight of what they stand for.
 */
#include "util/yaml.h"

#include "gpusched/err.h"
#include "util/strmap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

int gs__yaml_fail(struct gs_diag *d, int err, const struct gs_yaml_pos *at, const char *field,
                  const char *fmt, ...)
{
    va_list ap;
    d->line = at ? at->line : 0;
    d->column = at ? at->col : 0;
    (void)snprintf(d->field, sizeof d->field, "%s", field ? field : "");
    va_start(ap, fmt);
    (void)vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    return err;
}

static int oom(struct gs_diag *d)
{
    return gs__yaml_fail(d, GS_ENOMEM, NULL, "", "out of memory");
}

static struct gs_yaml_pos mark_pos(yaml_mark_t m)
{
    struct gs_yaml_pos p;
    p.line = m.line >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.line + 1;
    p.col = m.column >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.column + 1;
    return p;
}

/* ---- the walker ------------------------------------------------------------------------- */

/* Turns libyaml's error into a diagnostic. */
static int yaml_fail(struct gs_diag *d, const yaml_parser_t *p, const char *buf, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return oom(d);
    const char *problem = p->problem ? p->problem : "cannot parse";
    struct gs_yaml_pos at;
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset, not a mark. */
        size_t off = p->problem_offset < len ? p->problem_offset : len;
        at.line = 1;
        at.col = 1;
        for (size_t i = 0; i < off; i++) {
            if (buf[i] == '\n') {
                at.line++;
                at.col = 1;
            } else {
                at.col++;
            }
        }
        if (p->problem_value != -1)
            return gs__yaml_fail(d, GS_EPARSE, &at, "", "malformed YAML: %s (byte 0x%02x)", problem,
                                 (unsigned)p->problem_value & 0xffu);
        return gs__yaml_fail(d, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
    }
    at = mark_pos(p->problem_mark);
    if (p->context != NULL) {
        struct gs_yaml_pos ctx = mark_pos(p->context_mark);
        return gs__yaml_fail(d, GS_EPARSE, &at, "", "malformed YAML: %s (%s at line %u, column %u)",
                             problem, p->context, ctx.line, ctx.col);
    }
    return gs__yaml_fail(d, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
}

/* Refuses a tag unless the reader takes them. */
static int check_tag(const struct gs_yaml_limits *lim, struct gs_diag *d, const yaml_char_t *tag,
                     yaml_mark_t m)
{
    if (tag == NULL || lim->tags)
        return GS_OK;
    struct gs_yaml_pos at = mark_pos(m);
    return gs__yaml_fail(d, GS_EPARSE, &at, "", "YAML tags are not supported (found '%.60s')",
                         (const char *)tag);
}

/* Counts one more node; fails past the limit. */
static int count_node(const struct gs_yaml_limits *lim, struct gs_diag *d, uint64_t *nodes,
                      const struct gs_yaml_pos *at)
{
    if (++*nodes > lim->nodes_max)
        return gs__yaml_fail(d, GS_EPARSE, at, "",
                             "more than %llu YAML nodes (an alias counts each time it is used)",
                             (unsigned long long)lim->nodes_max);
    return GS_OK;
}

/* Checks one libyaml event and hands it on; sets *done at the end of the stream. */
static int on_event(const struct gs_yaml_limits *lim, const yaml_event_t *ev, uint32_t *depth,
                    uint32_t *docs, uint64_t *nodes, gs_yaml_event_fn fn, void *ctx,
                    struct gs_diag *d, bool *done)
{
    struct gs_yaml_event out;
    memset(&out, 0, sizeof out);
    out.at = mark_pos(ev->start_mark);
    out.depth = *depth;
    int rc;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if ((*docs)++ > 0)
            return gs__yaml_fail(d, GS_EPARSE, &out.at, "",
                                 "a second YAML document; %s is one "
                                 "document",
                                 lim->what ? lim->what : "the input");
        return GS_OK;
    case YAML_STREAM_END_EVENT:
        *done = true;
        return GS_OK;
    case YAML_SCALAR_EVENT:
        if ((rc = check_tag(lim, d, ev->data.scalar.tag, ev->start_mark)) != GS_OK ||
            (rc = count_node(lim, d, nodes, &out.at)) != GS_OK)
            return rc;
        if (ev->data.scalar.anchor != NULL && !lim->aliases)
            return gs__yaml_fail(d, GS_EPARSE, &out.at, "", "YAML aliases are not accepted");
        out.kind = GS_YAML_EV_SCALAR;
        out.plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        out.tagged = ev->data.scalar.tag != NULL;
        out.text = (const char *)ev->data.scalar.value;
        out.len = ev->data.scalar.length;
        out.anchor = (const char *)ev->data.scalar.anchor;
        return fn(ctx, &out, d);
    case YAML_ALIAS_EVENT:
        if (!lim->aliases)
            return gs__yaml_fail(d, GS_EPARSE, &out.at, "", "YAML aliases are not accepted");
        if ((rc = count_node(lim, d, nodes, &out.at)) != GS_OK)
            return rc;
        out.kind = GS_YAML_EV_ALIAS;
        out.text = (const char *)ev->data.alias.anchor;
        out.len = strlen(out.text);
        return fn(ctx, &out, d);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
        const yaml_char_t *tag = seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag;
        const yaml_char_t *anchor =
            seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
        if ((rc = check_tag(lim, d, tag, ev->start_mark)) != GS_OK)
            return rc;
        if (*depth >= lim->depth_max)
            return gs__yaml_fail(d, GS_EPARSE, &out.at, "", "nesting deeper than %u levels",
                                 lim->depth_max);
        if ((rc = count_node(lim, d, nodes, &out.at)) != GS_OK)
            return rc;
        if (anchor != NULL && !lim->aliases)
            return gs__yaml_fail(d, GS_EPARSE, &out.at, "", "YAML aliases are not accepted");
        out.kind = seq ? GS_YAML_EV_SEQ_START : GS_YAML_EV_MAP_START;
        out.tagged = tag != NULL;
        out.anchor = (const char *)anchor;
        (*depth)++;
        return fn(ctx, &out, d);
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        (*depth)--;
        out.kind = GS_YAML_EV_END;
        out.depth = *depth;
        return fn(ctx, &out, d);
    default:
        return GS_OK;
    }
}

int gs__yaml_walk(const char *buf, size_t len, const struct gs_yaml_limits *lim,
                  gs_yaml_event_fn fn, void *ctx, struct gs_diag *diag)
{
    yaml_parser_t p;
    yaml_event_t ev;
    uint32_t depth = 0, docs = 0;
    uint64_t nodes = 0;
    bool done = false;
    int rc = GS_OK;

    if (len > lim->bytes_max)
        return gs__yaml_fail(diag, GS_EIO, NULL, "", "input is %zu bytes, over the limit of %zu",
                             len, lim->bytes_max);
    if (!yaml_parser_initialize(&p))
        return oom(diag);
    yaml_parser_set_input_string(&p, (const unsigned char *)(len ? buf : ""), len);
    while (!done && rc == GS_OK) {
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_fail(diag, &p, buf, len);
            break;
        }
        rc = on_event(lim, &ev, &depth, &docs, &nodes, fn, ctx, diag, &done);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ---- the tree loader -------------------------------------------------------------------- */

/** A container being built. */
struct open {
    struct gs_yaml_node *node; /**< the container */
    size_t base;               /**< its first child in the pending stack */
    char *anchor;              /**< anchor to register at its end, or NULL */
    uint64_t weight;           /**< 1 + the weights of the children so far */
    uint32_t height;           /**< the deepest child so far */
};

/** State of one load. */
struct loader {
    const struct gs_yaml_limits *lim;
    struct gs_yaml_doc *doc;
    struct gs_strmap anchors;   /**< anchor name -> node */
    struct gs_yaml_node **pend; /**< children of the open containers */
    size_t npend, cappend;
    struct open *open; /**< lim->depth_max open containers, outermost first */
    uint32_t depth;    /**< entries in open */
};

/* Adds a finished node to the open container (or makes it the document). */
static int add_child(struct loader *l, struct gs_yaml_node *n, const struct gs_yaml_pos *at,
                     struct gs_diag *d)
{
    if (l->depth == 0) {
        l->doc->root = n;
        return GS_OK;
    }
    struct open *o = &l->open[l->depth - 1];
    if ((uint64_t)l->depth + n->height > l->lim->depth_max)
        return gs__yaml_fail(d, GS_EPARSE, at, "", "nesting deeper than %u levels",
                             l->lim->depth_max);
    o->weight += n->weight;
    if (o->weight > l->lim->nodes_max)
        return gs__yaml_fail(d, GS_EPARSE, at, "",
                             "more than %llu YAML nodes (an alias counts each time it is used)",
                             (unsigned long long)l->lim->nodes_max);
    if (n->height > o->height)
        o->height = n->height;
    if (l->npend == l->cappend) {
        size_t ncap = l->cappend ? 2 * l->cappend : 256;
        struct gs_yaml_node **np = realloc(l->pend, ncap * sizeof(struct gs_yaml_node *));
        if (np == NULL)
            return oom(d);
        l->pend = np;
        l->cappend = ncap;
    }
    l->pend[l->npend++] = n;
    return GS_OK;
}

static int add_anchor(struct loader *l, const char *anchor, struct gs_yaml_node *n,
                      struct gs_diag *d)
{
    size_t k = strlen(anchor);
    char *a = gs__arena_strndup(&l->doc->ar, anchor, k);
    if (a == NULL || gs__strmap_put(&l->anchors, a, k, n) != GS_OK)
        return oom(d);
    return GS_OK;
}

static int load_event(void *ctx, const struct gs_yaml_event *ev, struct gs_diag *d)
{
    struct loader *l = ctx;
    struct gs_arena *ar = &l->doc->ar;
    struct gs_yaml_node *n;
    switch (ev->kind) {
    case GS_YAML_EV_SCALAR:
        if ((n = gs__arena_alloc(ar, sizeof *n)) == NULL)
            return oom(d);
        n->kind = GS_YAML_SCALAR;
        n->plain = ev->plain;
        n->at = ev->at;
        n->n = ev->len > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->len;
        n->height = 0;
        n->weight = 1;
        if ((n->u.s = gs__arena_strndup(ar, ev->text, n->n)) == NULL)
            return oom(d);
        if (ev->anchor != NULL) {
            int rc = add_anchor(l, ev->anchor, n, d);
            if (rc)
                return rc;
        }
        return add_child(l, n, &n->at, d);
    case GS_YAML_EV_ALIAS:
        /* An anchor is registered when its node ends, so an alias inside its own anchor's node
           is unknown here and the tree stays acyclic. */
        n = gs__strmap_get(&l->anchors, ev->text, ev->len);
        if (n == NULL)
            return gs__yaml_fail(d, GS_EPARSE, &ev->at, "", "unknown alias '*%.60s'", ev->text);
        return add_child(l, n, &ev->at, d);
    case GS_YAML_EV_SEQ_START:
    case GS_YAML_EV_MAP_START: {
        if ((n = gs__arena_alloc(ar, sizeof *n)) == NULL)
            return oom(d);
        n->kind = ev->kind == GS_YAML_EV_SEQ_START ? GS_YAML_SEQ : GS_YAML_MAP;
        n->at = ev->at;
        struct open *o = &l->open[l->depth++]; /* the walker keeps depth <= depth_max */
        o->node = n;
        o->base = l->npend;
        o->anchor = NULL;
        o->weight = 1;
        o->height = 0;
        if (ev->anchor != NULL &&
            (o->anchor = gs__arena_strndup(ar, ev->anchor, strlen(ev->anchor))) == NULL)
            return oom(d);
        return GS_OK;
    }
    case GS_YAML_EV_END: {
        /* libyaml pairs every end with a start; a walker that did not would be caught here. */
        if (l->depth == 0 || l->open[l->depth - 1].node == NULL)
            return gs__yaml_fail(d, GS_EPARSE, &ev->at, "",
                                 "malformed YAML: an end without a start");
        struct open *o = &l->open[l->depth - 1];
        n = o->node;
        size_t k = l->npend - o->base;
        n->u.items = gs__arena_alloc(ar, (k ? k : 1) * sizeof(struct gs_yaml_node *));
        if (n->u.items == NULL)
            return oom(d);
        if (k > 0)
            memcpy(n->u.items, l->pend + o->base, k * sizeof(struct gs_yaml_node *));
        n->n = (uint32_t)(n->kind == GS_YAML_MAP ? k / 2 : k);
        n->height = o->height + 1;
        n->weight = (uint32_t)o->weight;
        l->npend = o->base;
        char *anchor = o->anchor;
        l->depth--;
        if (anchor != NULL && gs__strmap_put(&l->anchors, anchor, strlen(anchor), n) != GS_OK)
            return oom(d);
        return add_child(l, n, &n->at, d);
    }
    }
    return GS_OK;
}

int gs__yaml_load(const char *buf, size_t len, const struct gs_yaml_limits *lim,
                  struct gs_yaml_doc *doc, struct gs_diag *diag)
{
    struct loader l;
    memset(&l, 0, sizeof l);
    memset(doc, 0, sizeof *doc);
    l.lim = lim;
    l.doc = doc;
    l.open = calloc(lim->depth_max ? lim->depth_max : 1, sizeof *l.open);
    if (l.open == NULL)
        return oom(diag);
    int rc = gs__yaml_walk(buf, len, lim, load_event, &l, diag);
    free(l.open);
    free(l.pend);
    gs__strmap_fini(&l.anchors);
    if (rc != GS_OK)
        gs__yaml_doc_fini(doc);
    return rc;
}

void gs__yaml_doc_fini(struct gs_yaml_doc *doc)
{
    if (doc == NULL)
        return;
    gs__arena_fini(&doc->ar);
    doc->root = NULL;
}

/* ---- node helpers ----------------------------------------------------------------------- */

bool gs__yaml_is_null(const struct gs_yaml_node *n)
{
    if (n->kind != GS_YAML_SCALAR || !n->plain)
        return false;
    const char *s = n->u.s;
    return n->n == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

bool gs__yaml_text_is(const struct gs_yaml_node *n, const char *lit)
{
    return n->kind == GS_YAML_SCALAR && n->n == strlen(lit) && memcmp(n->u.s, lit, n->n) == 0;
}

const struct gs_yaml_node *gs__yaml_map_get(const struct gs_yaml_node *map, const char *key)
{
    if (map->kind != GS_YAML_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->n; i++)
        if (gs__yaml_text_is(map->u.items[2 * (size_t)i], key))
            return map->u.items[2 * (size_t)i + 1];
    return NULL;
}

const char *gs__yaml_kind_name(const struct gs_yaml_node *n)
{
    return n->kind == GS_YAML_SEQ ? "a list" : n->kind == GS_YAML_MAP ? "a mapping" : "a scalar";
}

const char *gs__yaml_describe(const struct gs_yaml_node *n, char *buf, size_t cap)
{
    if (n->kind == GS_YAML_SEQ)
        return "a list";
    if (n->kind == GS_YAML_MAP)
        return "a mapping";
    int len = (int)(n->n > 40 ? 40 : n->n);
    (void)snprintf(buf, cap, "'%.*s'%s", len, n->u.s, n->n > 40 ? "..." : "");
    return buf;
}
