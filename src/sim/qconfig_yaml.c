/*
 * The queue configuration's YAML stage (see qconfig_int.h): a scratch arena, a string map, and
 * the tree builder. libyaml's event parser feeds a small tree builder that keeps every node's
 * source position (libyaml's 0-based marks, made 1-based) and enforces the limits that protect
 * everything after it: nesting depth, the number of nodes with aliases expanded (so a "billion
 * laughs" document stops early), no tags, one document. Building from events rather than with
 * yaml_parser_load() is what lets the depth limit stop libyaml itself before it stacks up a
 * deeply nested input.
 */
#include "qconfig_int.h"

#include "gpusched/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------------------ */

/* Returns n zeroed bytes aligned for any type, or NULL when out of memory. */
void *gs__qc_arena_alloc(struct arena *a, size_t n)
{
    const size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX / 2)
        return NULL;
    n = n == 0 ? align : (n + align - 1) / align * align;
    struct chunk *c = a->head;
    if (c != NULL && c->cap - c->used >= n) {
        void *p = (unsigned char *)c->data + c->used;
        c->used += n;
        memset(p, 0, n);
        return p;
    }
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    c = malloc(sizeof *c + cap);
    if (c == NULL)
        return NULL;
    c->cap = cap;
    c->used = n;
    memset(c->data, 0, n);
    if (a->head != NULL && n > ARENA_CHUNK) {
        /* A big block gets its own chunk behind the current one, whose room stays usable. */
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
    }
    return c->data;
}

/* Copies n bytes of s and a terminating NUL; NULL when out of memory. */
char *gs__qc_arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *p = gs__qc_arena_alloc(a, n + 1);
    if (p != NULL) {
        if (n > 0)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void gs__qc_arena_fini(struct arena *a)
{
    struct chunk *c = a->head;
    while (c != NULL) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- string map ------------------------------------------------------------------------- */

/* FNV-1a, 64 bit: the rules' stable hash and the string map's. */
uint64_t gs__qc_fnv1a(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}

static struct smap_ent *smap_slot(const struct smap *m, const char *key, size_t len)
{
    size_t i = (size_t)gs__qc_fnv1a(key, len) & (m->cap - 1);
    for (;;) {
        struct smap_ent *e = &m->v[i];
        if (e->key == NULL || (e->len == len && memcmp(e->key, key, len) == 0))
            return e;
        i = (i + 1) & (m->cap - 1);
    }
}

/* Returns what key maps to, or NULL. */
void *gs__qc_smap_get(const struct smap *m, const char *key, size_t len)
{
    if (m->cap == 0)
        return NULL;
    struct smap_ent *e = smap_slot(m, key, len);
    return e->key != NULL ? e->val : NULL;
}

/* Maps key (borrowed, must outlive the map) to val, replacing an earlier value. */
int gs__qc_smap_put(struct smap *m, const char *key, size_t len, void *val)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t ncap = m->cap ? 2 * m->cap : 16;
        struct smap_ent *nv = calloc(ncap, sizeof *nv);
        if (nv == NULL)
            return GS_ENOMEM;
        struct smap old = *m;
        m->v = nv;
        m->cap = ncap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.v[i].key != NULL)
                *smap_slot(m, old.v[i].key, old.v[i].len) = old.v[i];
        free(old.v);
    }
    struct smap_ent *e = smap_slot(m, key, len);
    if (e->key == NULL)
        m->n++;
    *e = (struct smap_ent){key, len, val};
    return GS_OK;
}

void gs__qc_smap_fini(struct smap *m)
{
    free(m->v);
    *m = (struct smap){NULL, 0, 0};
}

/* ---- tree building ---------------------------------------------------------------------- */

/* Adds a finished node to the open container (or makes it the document). */
static int add_child(struct pctx *c, struct ynode *n, const struct pos *at)
{
    if (c->depth == 0) {
        c->root = n;
        return GS_OK;
    }
    struct open *o = &c->open[c->depth - 1];
    if (c->depth + n->height > GS_QCONFIG_DEPTH_MAX)
        return gs__qc_fail_at(c, GS_EPARSE, at, "", "nesting deeper than %u levels",
                              GS_QCONFIG_DEPTH_MAX);
    o->weight += n->weight;
    if (o->weight > NODES_MAX)
        return gs__qc_fail_at(c, GS_EPARSE, at, "",
                              "more than %u YAML nodes (an alias counts each time it is used)",
                              NODES_MAX);
    if (n->height > o->height)
        o->height = n->height;
    if (c->npend == c->cappend) {
        size_t ncap = c->cappend ? 2 * c->cappend : 256;
        struct ynode **np = realloc(c->pend, ncap * sizeof(struct ynode *));
        if (np == NULL)
            return gs__qc_oom(c);
        c->pend = np;
        c->cappend = ncap;
    }
    c->pend[c->npend++] = n;
    return GS_OK;
}

/* Refuses tags: nothing in the format needs one and ignoring them would mislead. */
static int check_tag(struct pctx *c, const yaml_char_t *tag, yaml_mark_t m)
{
    if (tag == NULL)
        return GS_OK;
    struct pos at = gs__qc_mark_pos(m);
    return gs__qc_fail_at(c, GS_EPARSE, &at, "", "YAML tags are not supported (found '%.60s')",
                          (const char *)tag);
}

static char *dup_anchor(struct pctx *c, const yaml_char_t *anchor)
{
    if (anchor == NULL)
        return NULL;
    return gs__qc_arena_strndup(&c->tmp, (const char *)anchor, strlen((const char *)anchor));
}

static int on_scalar(struct pctx *c, const yaml_event_t *ev)
{
    int rc = check_tag(c, ev->data.scalar.tag, ev->start_mark);
    if (rc)
        return rc;
    struct ynode *n = gs__qc_arena_alloc(&c->tmp, sizeof *n);
    if (n == NULL)
        return gs__qc_oom(c);
    n->kind = Y_SCALAR;
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    n->at = gs__qc_mark_pos(ev->start_mark);
    n->n = (uint32_t)ev->data.scalar.length; /* at most the 4 MiB input */
    n->height = 0;
    n->weight = 1;
    n->u.s =
        gs__qc_arena_strndup(&c->tmp, (const char *)ev->data.scalar.value, ev->data.scalar.length);
    if (n->u.s == NULL)
        return gs__qc_oom(c);
    if (ev->data.scalar.anchor != NULL) {
        char *a = dup_anchor(c, ev->data.scalar.anchor);
        if (a == NULL || gs__qc_smap_put(&c->anchors, a, strlen(a), n) != GS_OK)
            return gs__qc_oom(c);
    }
    return add_child(c, n, &n->at);
}

static int on_alias(struct pctx *c, const yaml_event_t *ev)
{
    const char *a = (const char *)ev->data.alias.anchor;
    struct pos at = gs__qc_mark_pos(ev->start_mark);
    /* An anchor is registered when its node ends, so an alias inside its own anchor's node is
       unknown here and the tree stays acyclic. */
    struct ynode *n = gs__qc_smap_get(&c->anchors, a, strlen(a));
    if (n == NULL)
        return gs__qc_fail_at(c, GS_EPARSE, &at, "", "unknown alias '*%.60s'", a);
    return add_child(c, n, &at);
}

static int on_start(struct pctx *c, const yaml_event_t *ev, enum ykind kind)
{
    const yaml_char_t *tag =
        kind == Y_SEQ ? ev->data.sequence_start.tag : ev->data.mapping_start.tag;
    const yaml_char_t *anchor =
        kind == Y_SEQ ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
    struct pos at = gs__qc_mark_pos(ev->start_mark);
    int rc = check_tag(c, tag, ev->start_mark);
    if (rc)
        return rc;
    if (c->depth == GS_QCONFIG_DEPTH_MAX)
        return gs__qc_fail_at(c, GS_EPARSE, &at, "", "nesting deeper than %u levels",
                              GS_QCONFIG_DEPTH_MAX);
    struct ynode *n = gs__qc_arena_alloc(&c->tmp, sizeof *n);
    if (n == NULL)
        return gs__qc_oom(c);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->at = at;
    struct open *o = &c->open[c->depth++];
    o->node = n;
    o->base = c->npend;
    o->anchor = NULL;
    o->weight = 1;
    o->height = 0;
    if (anchor != NULL && (o->anchor = dup_anchor(c, anchor)) == NULL)
        return gs__qc_oom(c);
    return GS_OK;
}

static int on_end(struct pctx *c)
{
    struct open *o = &c->open[c->depth - 1];
    struct ynode *n = o->node;
    size_t k = c->npend - o->base;
    n->u.items = gs__qc_arena_alloc(&c->tmp, (k ? k : 1) * sizeof(struct ynode *));
    if (n->u.items == NULL)
        return gs__qc_oom(c);
    if (k > 0)
        memcpy(n->u.items, c->pend + o->base, k * sizeof(struct ynode *));
    n->n = (uint32_t)(n->kind == Y_MAP ? k / 2 : k);
    n->height = o->height + 1;
    n->weight = (uint32_t)o->weight;
    c->npend = o->base;
    char *anchor = o->anchor;
    c->depth--;
    if (anchor != NULL && gs__qc_smap_put(&c->anchors, anchor, strlen(anchor), n) != GS_OK)
        return gs__qc_oom(c);
    return add_child(c, n, &n->at);
}

/* Turns libyaml's error into a diagnostic. */
static int yaml_fail(struct pctx *c, const yaml_parser_t *p, const char *buf, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return gs__qc_oom(c);
    const char *problem = p->problem ? p->problem : "cannot parse";
    struct pos at;
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
            return gs__qc_fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s (byte 0x%02x)",
                                  problem, (unsigned)p->problem_value & 0xffu);
        return gs__qc_fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
    }
    at = gs__qc_mark_pos(p->problem_mark);
    if (p->context != NULL) {
        struct pos ctx = gs__qc_mark_pos(p->context_mark);
        return gs__qc_fail_at(c, GS_EPARSE, &at, "",
                              "malformed YAML: %s (%s at line %u, column %u)", problem, p->context,
                              ctx.line, ctx.col);
    }
    return gs__qc_fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
}

/* Builds the tree of the one document in buf. */
int gs__qc_build_tree(struct pctx *c, const char *buf, size_t len)
{
    yaml_parser_t p;
    yaml_event_t ev;
    int rc = GS_OK;
    bool done = false;

    if (!yaml_parser_initialize(&p))
        return gs__qc_oom(c);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    while (!done && rc == GS_OK) {
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_fail(c, &p, buf, len);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (c->docs++ > 0) {
                struct pos at = gs__qc_mark_pos(ev.start_mark);
                rc = gs__qc_fail_at(c, GS_EPARSE, &at, "",
                                    "a second YAML document; a configuration is one document");
            }
            break;
        case YAML_SCALAR_EVENT:
            rc = on_scalar(c, &ev);
            break;
        case YAML_ALIAS_EVENT:
            rc = on_alias(c, &ev);
            break;
        case YAML_SEQUENCE_START_EVENT:
            rc = on_start(c, &ev, Y_SEQ);
            break;
        case YAML_MAPPING_START_EVENT:
            rc = on_start(c, &ev, Y_MAP);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            rc = on_end(c);
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    if (rc == GS_OK && c->root == NULL)
        rc = gs__qc_fail_at(c, GS_EPARSE, NULL, "", "empty file: no configuration");
    return rc;
}
