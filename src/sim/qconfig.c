/*
 * Queue configuration loader (contract in include/gpusched/qconfig.h, format in docs/queues.md).
 *
 * The text is read in two stages. libyaml's event parser first feeds a small tree builder that
 * keeps every node's source position (libyaml's 0-based marks, made 1-based) and enforces the
 * limits that protect everything after it: nesting depth, the number of nodes with aliases
 * expanded (so a "billion laughs" document stops early), no tags, one document. Building from
 * events rather than with yaml_parser_load() is what lets the depth limit stop libyaml itself
 * before it stacks up a deeply nested input. The tree is then walked along the fixed schema:
 * every mapping is checked for unknown and repeated keys, every value for type, unit and range,
 * and cross-references (parents, rule targets, PriorityClasses) are resolved by name through
 * hash tables, so a file with 10,000 queues takes linear time. The first problem stops the read
 * with the position of the offending node and the key it belongs to.
 *
 * Sections are read in a fixed order whatever their order in the file (apiVersion, kind,
 * preemptMinRuntime, queues, priorityClasses, assignment), because the later ones refer to the
 * earlier ones. The tree lives in a scratch arena freed when parsing ends; the configuration
 * keeps what it needs (names, positions for apply's diagnostics) in its own arena.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat, strerror_r (XSI form) */

#include "gpusched/qconfig.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "util/file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/** Most YAML nodes in a document, an alias counting again each time it is used. */
#define NODES_MAX 1000000u
/** Longest queue, PriorityClass or model name, bytes (a Kubernetes object name's limit). */
#define NAME_MAX_LEN 253u
/** Most PriorityClasses. */
#define CLASSES_MAX 1000u
/** Most assignment rules. */
#define RULES_MAX 1000u
/** Most entries in one match list (qos, gpuModel). */
#define LIST_MAX 64u
/** Largest quantity in internal units (milli-GPU, milli-CPU, MiB); sums of 10,000 fit int64. */
#define QUANTITY_MAX 100000000000000LL
/** Largest duration, ms (about 31 years). */
#define DURATION_MAX_MS 1000000000000LL
/** Largest overQuotaWeight. */
#define WEIGHT_MAX 1000000.0
/** Largest hashQueues weight. */
#define HASH_WEIGHT_MAX 1000000
/** Largest numGpu bound. */
#define NUM_GPU_MAX 1000000
/** "No index". */
#define NONE UINT32_MAX
/** Bytes per arena chunk. */
#define ARENA_CHUNK 65536u
/** The one apiVersion and kind accepted. */
#define API_VERSION "gpusched.io/v1"
#define KIND "QueueConfig"

/* ---- arena ------------------------------------------------------------------------------ */

/** One block of an arena. */
struct chunk {
    struct chunk *next; /**< older chunk */
    size_t used, cap;   /**< bytes of data handed out / available */
    max_align_t data[]; /**< the memory */
};

/** A bump allocator; everything in it is freed at once by arena_fini(). */
struct arena {
    struct chunk *head; /**< the chunk being filled, then older ones */
};

/* Returns n zeroed bytes aligned for any type, or NULL when out of memory. */
static void *arena_alloc(struct arena *a, size_t n)
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
static char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (p != NULL) {
        if (n > 0)
            memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void arena_fini(struct arena *a)
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
static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h;
}

/** One entry of a string map; the key is borrowed. */
struct smap_ent {
    const char *key; /**< NULL for an empty slot */
    size_t len;      /**< key bytes */
    void *val;       /**< what the key maps to */
};

/** Open-addressing hash map from byte strings to pointers; at most half full. */
struct smap {
    struct smap_ent *v; /**< cap slots */
    size_t cap, n;      /**< slots (a power of two or 0) / entries */
};

static struct smap_ent *smap_slot(const struct smap *m, const char *key, size_t len)
{
    size_t i = (size_t)fnv1a(key, len) & (m->cap - 1);
    for (;;) {
        struct smap_ent *e = &m->v[i];
        if (e->key == NULL || (e->len == len && memcmp(e->key, key, len) == 0))
            return e;
        i = (i + 1) & (m->cap - 1);
    }
}

/* Returns what key maps to, or NULL. */
static void *smap_get(const struct smap *m, const char *key, size_t len)
{
    if (m->cap == 0)
        return NULL;
    struct smap_ent *e = smap_slot(m, key, len);
    return e->key != NULL ? e->val : NULL;
}

/* Maps key (borrowed, must outlive the map) to val, replacing an earlier value. */
static int smap_put(struct smap *m, const char *key, size_t len, void *val)
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

static void smap_fini(struct smap *m)
{
    free(m->v);
    *m = (struct smap){NULL, 0, 0};
}

/* ---- the configuration ------------------------------------------------------------------ */

/** A source position, 1-based; 0/0 when unknown. */
struct pos {
    uint32_t line, col;
};

/** One configured queue. */
struct qqueue {
    const char *name;                  /**< in the configuration's arena */
    uint32_t parent;                   /**< index of the parent; NONE for a top-level queue */
    uint32_t children;                 /**< number of child queues (0: a leaf) */
    uint32_t depth;                    /**< 1 for a top-level queue */
    int64_t quota[GS_RES_COUNT];       /**< internal units; derived for unset parents */
    int64_t limit[GS_RES_COUNT];       /**< internal units or GS_UNLIMITED */
    bool quota_set[GS_RES_COUNT];      /**< the file gave the quota */
    double weight;                     /**< over-quota weight (one per queue) */
    int weight_from;                   /**< resource that set the weight, -1 none */
    int64_t min_runtime_ms;            /**< own value, then resolved (inherited) */
    bool min_runtime_set;              /**< the file gave preemptMinRuntime */
    struct pos at;                     /**< the queue's `name` value */
    struct pos parent_at;              /**< its `parentQueue` value (0 when absent) */
    struct pos quota_at[GS_RES_COUNT]; /**< each `quota` value */
    struct pos limit_at[GS_RES_COUNT]; /**< each `limit` value */
};

/** One PriorityClass. */
struct qclass {
    const char *name; /**< in the configuration's arena */
    int32_t value;    /**< priority */
    int preemptible;  /**< 1, 0, or -1 (the engine's default) */
    struct pos at;    /**< its `name` value */
};

/** One weighted target of a hashed rule. */
struct hashq {
    uint32_t queue;  /**< leaf queue index */
    uint32_t weight; /**< >= 1 */
};

/** One assignment rule. */
struct qrule {
    uint8_t qos_mask;    /**< bit i: QoS i matches; 0: any QoS */
    const char **models; /**< gpuModel entries; nmodels == 0: any */
    uint32_t nmodels;
    bool has_num;       /**< numGpu given */
    uint32_t num_min;   /**< inclusive */
    uint32_t num_max;   /**< inclusive */
    const char *prefix; /**< namePrefix or NULL */
    size_t prefix_len;
    uint32_t queue;     /**< fixed target, or NONE when hashed */
    struct hashq *hash; /**< nhash weighted targets (file order) */
    uint32_t nhash;
    uint64_t weight_sum; /**< sum of the hash weights */
    uint32_t pclass;     /**< PriorityClass index or NONE */
};

/** QoS names of the openb trace, in the order of qos_map. */
static const char *const qos_names[] = {"LS", "Guaranteed", "Burstable", "BE"};
#define QOS_COUNT 4

struct gs_qconfig {
    struct arena ar;  /**< everything below */
    char name[256];   /**< source name for diagnostics */
    struct qqueue *q; /**< nq queues, file order */
    uint32_t nq;
    uint32_t *order;   /**< queue indices, every parent before its children */
    struct qclass *pc; /**< npc classes, file order */
    uint32_t npc;
    struct qrule *rules; /**< nrules rules, file order */
    uint32_t nrules;
    uint32_t default_queue;        /**< index or NONE */
    uint32_t default_class;        /**< index or NONE */
    uint32_t qos_class[QOS_COUNT]; /**< priorityByQoS: class index or NONE */
    int64_t min_runtime_ms;        /**< top-level preemptMinRuntime, 0 when unset */
};

static const char *const res_names[GS_RES_COUNT] = {"gpu", "cpu", "memory"};

/* ---- YAML tree -------------------------------------------------------------------------- */

enum ykind { Y_SCALAR, Y_SEQ, Y_MAP };

/** One YAML node. An alias is the anchored node itself, so the tree may share subtrees. */
struct ynode {
    uint8_t kind;    /**< enum ykind */
    bool plain;      /**< scalar written without quotes (may be null, a number, a bool) */
    struct pos at;   /**< where it starts */
    uint32_t n;      /**< scalar: bytes; sequence: items; mapping: pairs */
    uint32_t height; /**< 0 for a scalar, 1 + the deepest child for a container */
    uint32_t weight; /**< nodes in the subtree, aliases expanded */
    union {
        char *s;              /**< scalar text, NUL-terminated (may hold NULs before) */
        struct ynode **items; /**< sequence items; mapping key0, value0, key1, ... */
    } u;
};

/** A container being built. */
struct open {
    struct ynode *node; /**< the container */
    size_t base;        /**< its first child in the pending stack */
    char *anchor;       /**< anchor to register at its end, or NULL */
    uint64_t weight;    /**< 1 + the weights of the children so far */
    uint32_t height;    /**< the deepest child so far */
};

/** State of one parse. */
struct pctx {
    struct gs_diag *d;     /**< the caller's or scratch */
    struct gs_qconfig *qc; /**< being filled */
    struct arena tmp;      /**< the tree, anchors */
    struct smap anchors;   /**< anchor name -> node */
    struct ynode **pend;   /**< children of the open containers */
    size_t npend, cappend;
    struct open open[GS_QCONFIG_DEPTH_MAX]; /**< open containers, outermost first */
    uint32_t depth;                         /**< entries in open */
    struct ynode *root;                     /**< the document, once complete */
    uint32_t docs;                          /**< documents begun */
    struct smap qnames;                     /**< queue name -> struct qqueue */
    struct smap cnames;                     /**< class name -> struct qclass */
};

/* ---- diagnostics ------------------------------------------------------------------------ */

/* Records an error at a position (NULL: the whole file) and returns err. */
GS_PRINTF(5, 6)
static int fail_at(struct pctx *c, int err, const struct pos *at, const char *field,
                   const char *fmt, ...)
{
    va_list ap;
    c->d->line = at ? at->line : 0;
    c->d->column = at ? at->col : 0;
    (void)snprintf(c->d->field, sizeof c->d->field, "%s", field ? field : "");
    va_start(ap, fmt);
    (void)vsnprintf(c->d->msg, sizeof c->d->msg, fmt, ap);
    va_end(ap);
    return err;
}

/* As fail_at() with GS_EPARSE at a node. */
#define FAIL(c, node, field, ...) fail_at((c), GS_EPARSE, &(node)->at, (field), __VA_ARGS__)

static int oom(struct pctx *c)
{
    return fail_at(c, GS_ENOMEM, NULL, "", "out of memory");
}

static struct pos mark_pos(yaml_mark_t m)
{
    struct pos p;
    p.line = m.line >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.line + 1;
    p.col = m.column >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.column + 1;
    return p;
}

/* Describes a node for "found ..." in messages. */
static const char *describe(const struct ynode *n, char *buf, size_t cap)
{
    if (n->kind == Y_SEQ)
        return "a list";
    if (n->kind == Y_MAP)
        return "a mapping";
    int len = (int)(n->n > 40 ? 40 : n->n);
    (void)snprintf(buf, cap, "'%.*s'%s", len, n->u.s, n->n > 40 ? "..." : "");
    return buf;
}

/* Formats a quantity in the file's units for messages. */
static const char *fmt_qty(char *buf, size_t cap, int r, int64_t v)
{
    if (v == GS_UNLIMITED) {
        (void)snprintf(buf, cap, "unlimited");
    } else if (r == GS_RES_MEM) {
        if (v > 0 && v % 1048576 == 0)
            (void)snprintf(buf, cap, "%lldTi", (long long)(v / 1048576));
        else if (v > 0 && v % 1024 == 0)
            (void)snprintf(buf, cap, "%lldGi", (long long)(v / 1024));
        else
            (void)snprintf(buf, cap, "%lldMi", (long long)v);
    } else if (v % 1000 == 0) {
        (void)snprintf(buf, cap, "%lld", (long long)(v / 1000));
    } else {
        (void)snprintf(buf, cap, "%lld.%03lld", (long long)(v / 1000), (long long)(v % 1000));
        size_t len = strlen(buf);
        while (len > 0 && buf[len - 1] == '0')
            buf[--len] = '\0';
    }
    return buf;
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
        return fail_at(c, GS_EPARSE, at, "", "nesting deeper than %u levels", GS_QCONFIG_DEPTH_MAX);
    o->weight += n->weight;
    if (o->weight > NODES_MAX)
        return fail_at(c, GS_EPARSE, at, "",
                       "more than %u YAML nodes (an alias counts each time it is used)", NODES_MAX);
    if (n->height > o->height)
        o->height = n->height;
    if (c->npend == c->cappend) {
        size_t ncap = c->cappend ? 2 * c->cappend : 256;
        struct ynode **np = realloc(c->pend, ncap * sizeof(struct ynode *));
        if (np == NULL)
            return oom(c);
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
    struct pos at = mark_pos(m);
    return fail_at(c, GS_EPARSE, &at, "", "YAML tags are not supported (found '%.60s')",
                   (const char *)tag);
}

static char *dup_anchor(struct pctx *c, const yaml_char_t *anchor)
{
    if (anchor == NULL)
        return NULL;
    return arena_strndup(&c->tmp, (const char *)anchor, strlen((const char *)anchor));
}

static int on_scalar(struct pctx *c, const yaml_event_t *ev)
{
    int rc = check_tag(c, ev->data.scalar.tag, ev->start_mark);
    if (rc)
        return rc;
    struct ynode *n = arena_alloc(&c->tmp, sizeof *n);
    if (n == NULL)
        return oom(c);
    n->kind = Y_SCALAR;
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    n->at = mark_pos(ev->start_mark);
    n->n = (uint32_t)ev->data.scalar.length; /* at most the 4 MiB input */
    n->height = 0;
    n->weight = 1;
    n->u.s = arena_strndup(&c->tmp, (const char *)ev->data.scalar.value, ev->data.scalar.length);
    if (n->u.s == NULL)
        return oom(c);
    if (ev->data.scalar.anchor != NULL) {
        char *a = dup_anchor(c, ev->data.scalar.anchor);
        if (a == NULL || smap_put(&c->anchors, a, strlen(a), n) != GS_OK)
            return oom(c);
    }
    return add_child(c, n, &n->at);
}

static int on_alias(struct pctx *c, const yaml_event_t *ev)
{
    const char *a = (const char *)ev->data.alias.anchor;
    struct pos at = mark_pos(ev->start_mark);
    /* An anchor is registered when its node ends, so an alias inside its own anchor's node is
       unknown here and the tree stays acyclic. */
    struct ynode *n = smap_get(&c->anchors, a, strlen(a));
    if (n == NULL)
        return fail_at(c, GS_EPARSE, &at, "", "unknown alias '*%.60s'", a);
    return add_child(c, n, &at);
}

static int on_start(struct pctx *c, const yaml_event_t *ev, enum ykind kind)
{
    const yaml_char_t *tag =
        kind == Y_SEQ ? ev->data.sequence_start.tag : ev->data.mapping_start.tag;
    const yaml_char_t *anchor =
        kind == Y_SEQ ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
    struct pos at = mark_pos(ev->start_mark);
    int rc = check_tag(c, tag, ev->start_mark);
    if (rc)
        return rc;
    if (c->depth == GS_QCONFIG_DEPTH_MAX)
        return fail_at(c, GS_EPARSE, &at, "", "nesting deeper than %u levels",
                       GS_QCONFIG_DEPTH_MAX);
    struct ynode *n = arena_alloc(&c->tmp, sizeof *n);
    if (n == NULL)
        return oom(c);
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
        return oom(c);
    return GS_OK;
}

static int on_end(struct pctx *c)
{
    struct open *o = &c->open[c->depth - 1];
    struct ynode *n = o->node;
    size_t k = c->npend - o->base;
    n->u.items = arena_alloc(&c->tmp, (k ? k : 1) * sizeof(struct ynode *));
    if (n->u.items == NULL)
        return oom(c);
    if (k > 0)
        memcpy(n->u.items, c->pend + o->base, k * sizeof(struct ynode *));
    n->n = (uint32_t)(n->kind == Y_MAP ? k / 2 : k);
    n->height = o->height + 1;
    n->weight = (uint32_t)o->weight;
    c->npend = o->base;
    char *anchor = o->anchor;
    c->depth--;
    if (anchor != NULL && smap_put(&c->anchors, anchor, strlen(anchor), n) != GS_OK)
        return oom(c);
    return add_child(c, n, &n->at);
}

/* Turns libyaml's error into a diagnostic. */
static int yaml_fail(struct pctx *c, const yaml_parser_t *p, const char *buf, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return oom(c);
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
            return fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s (byte 0x%02x)", problem,
                           (unsigned)p->problem_value & 0xffu);
        return fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
    }
    at = mark_pos(p->problem_mark);
    if (p->context != NULL) {
        struct pos ctx = mark_pos(p->context_mark);
        return fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s (%s at line %u, column %u)",
                       problem, p->context, ctx.line, ctx.col);
    }
    return fail_at(c, GS_EPARSE, &at, "", "malformed YAML: %s", problem);
}

/* Builds the tree of the one document in buf. */
static int build_tree(struct pctx *c, const char *buf, size_t len)
{
    yaml_parser_t p;
    yaml_event_t ev;
    int rc = GS_OK;
    bool done = false;

    if (!yaml_parser_initialize(&p))
        return oom(c);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    while (!done && rc == GS_OK) {
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_fail(c, &p, buf, len);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (c->docs++ > 0) {
                struct pos at = mark_pos(ev.start_mark);
                rc = fail_at(c, GS_EPARSE, &at, "",
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
        rc = fail_at(c, GS_EPARSE, NULL, "", "empty file: no configuration");
    return rc;
}

/* ---- schema helpers --------------------------------------------------------------------- */

static bool is_null(const struct ynode *n)
{
    if (n->kind != Y_SCALAR || !n->plain)
        return false;
    const char *s = n->u.s;
    return n->n == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* True when a scalar's text is exactly lit. */
static bool text_is(const struct ynode *n, const char *lit)
{
    return n->kind == Y_SCALAR && n->n == strlen(lit) && memcmp(n->u.s, lit, n->n) == 0;
}

static int need_kind(struct pctx *c, const struct ynode *n, const char *field, enum ykind kind)
{
    char buf[64];
    static const char *const want[] = {"a value", "a list", "a mapping"};
    if (n->kind == kind && !(kind == Y_SCALAR && is_null(n)))
        return GS_OK;
    return FAIL(c, n, field, "expected %s, found %s", want[kind],
                is_null(n) ? "null" : describe(n, buf, sizeof buf));
}

/*
 * Checks that n is a mapping whose keys are all in `keys` (NULL-terminated) and none repeats.
 * `field` names where the mapping sits, for a wrong type.
 */
static int check_map(struct pctx *c, const struct ynode *n, const char *field,
                     const char *const *keys)
{
    int rc = need_kind(c, n, field, Y_MAP);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < n->n; i++) {
        const struct ynode *k = n->u.items[2 * (size_t)i];
        char buf[64];
        if (k->kind != Y_SCALAR)
            return FAIL(c, k, field, "a key must be a string, found %s",
                        describe(k, buf, sizeof buf));
        size_t j = 0;
        while (keys[j] != NULL && !text_is(k, keys[j]))
            j++;
        if (keys[j] == NULL) {
            char allowed[200];
            size_t len = 0;
            allowed[0] = '\0';
            for (size_t m = 0; keys[m] != NULL && len < sizeof allowed; m++) {
                int w =
                    snprintf(allowed + len, sizeof allowed - len, "%s%s", m ? ", " : "", keys[m]);
                if (w > 0)
                    len += (size_t)w;
            }
            return FAIL(c, k, k->u.s, "unknown key '%.60s' (allowed: %s)", k->u.s, allowed);
        }
        for (uint32_t m = 0; m < i; m++)
            if (text_is(n->u.items[2 * (size_t)m], keys[j]))
                return FAIL(c, k, keys[j], "duplicate key '%s' (first on line %u)", keys[j],
                            n->u.items[2 * (size_t)m]->at.line);
    }
    return GS_OK;
}

/* The value of key in a checked mapping, or NULL when absent or null. */
static const struct ynode *get(const struct ynode *map, const char *key)
{
    for (uint32_t i = 0; i < map->n; i++)
        if (text_is(map->u.items[2 * (size_t)i], key)) {
            const struct ynode *v = map->u.items[2 * (size_t)i + 1];
            return is_null(v) ? NULL : v;
        }
    return NULL;
}

/* As get(), failing when the key is absent or null. */
static int require(struct pctx *c, const struct ynode *map, const char *key,
                   const struct ynode **out)
{
    *out = get(map, key);
    if (*out != NULL)
        return GS_OK;
    for (uint32_t i = 0; i < map->n; i++)
        if (text_is(map->u.items[2 * (size_t)i], key))
            return FAIL(c, map->u.items[2 * (size_t)i], key, "'%s' needs a value", key);
    return FAIL(c, map, key, "missing required key '%s'", key);
}

/* A string: a non-null scalar without NUL or control bytes, 1..NAME_MAX_LEN bytes, copied. */
static int get_name(struct pctx *c, const struct ynode *n, const char *field, const char **out)
{
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    if (n->n == 0)
        return FAIL(c, n, field, "empty name");
    if (n->n > NAME_MAX_LEN)
        return FAIL(c, n, field, "name longer than %u bytes", NAME_MAX_LEN);
    for (uint32_t i = 0; i < n->n; i++)
        if ((unsigned char)n->u.s[i] < 0x20 || n->u.s[i] == 0x7f)
            return FAIL(c, n, field, "control character (byte 0x%02x) in a name",
                        (unsigned)(unsigned char)n->u.s[i]);
    *out = arena_strndup(&c->qc->ar, n->u.s, n->n);
    return *out ? GS_OK : oom(c);
}

/* A decimal integer written plainly (a quoted "5" is a string, as Kubernetes reads it). */
static int get_int(struct pctx *c, const struct ynode *n, const char *field, int64_t min,
                   int64_t max, int64_t *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
    bool neg = s[0] == '-';
    if (!n->plain || i == n->n)
        return FAIL(c, n, field, "expected an integer, found %s", describe(n, buf, sizeof buf));
    int64_t v = 0;
    bool big = false;
    for (; i < n->n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FAIL(c, n, field, "expected an integer, found %s", describe(n, buf, sizeof buf));
        if (v > (INT64_MAX - (s[i] - '0')) / 10)
            big = true;
        else
            v = v * 10 + (s[i] - '0');
    }
    if (neg)
        v = -v;
    if (neg && min >= 0 && v != 0)
        return FAIL(c, n, field, "negative value %s", describe(n, buf, sizeof buf));
    if (big || v < min || v > max)
        return FAIL(c, n, field, "%s is out of range (%lld to %lld)", describe(n, buf, sizeof buf),
                    (long long)min, (long long)max);
    *out = v;
    return GS_OK;
}

static int get_bool(struct pctx *c, const struct ynode *n, const char *field, bool *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    if (n->plain && (text_is(n, "true") || text_is(n, "True") || text_is(n, "TRUE"))) {
        *out = true;
        return GS_OK;
    }
    if (n->plain && (text_is(n, "false") || text_is(n, "False") || text_is(n, "FALSE"))) {
        *out = false;
        return GS_OK;
    }
    return FAIL(c, n, field, "expected true or false, found %s", describe(n, buf, sizeof buf));
}

/* A weight: a plain decimal number ("1", "0.5"), 0..WEIGHT_MAX, read without locale. */
static int get_weight(struct pctx *c, const struct ynode *n, const char *field, double *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    uint32_t i = 0, digits = 0, frac = 0;
    int64_t m = 0;
    bool dot = false;
    if (n->plain && s[0] == '-' && n->n > 1)
        return FAIL(c, n, field, "negative weight %s", describe(n, buf, sizeof buf));
    for (; n->plain && i < n->n; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
        } else if (s[i] >= '0' && s[i] <= '9' && digits < 15) {
            m = m * 10 + (s[i] - '0');
            digits++;
            frac += dot;
        } else {
            break;
        }
    }
    if (!n->plain || i != n->n || digits == 0)
        return FAIL(c, n, field, "expected a number, found %s", describe(n, buf, sizeof buf));
    double v = (double)m;
    while (frac-- > 0)
        v /= 10;
    if (v > WEIGHT_MAX)
        return FAIL(c, n, field, "weight %s is above %.0f", describe(n, buf, sizeof buf),
                    WEIGHT_MAX);
    *out = v;
    return GS_OK;
}

/*
 * Parses a Kubernetes-style quantity ("3", "0.5", "500m", "64Gi", "1.5Ti") into internal
 * units: milli for GPU and CPU, MiB for memory. The value is kept exact as mantissa x 2^p2 x
 * 5^p5 so that any suffix and any number of decimals is either exact or refused. Returns NULL,
 * or a message fragment for a bad value (the caller adds the text).
 */
static const char *parse_quantity(const char *s, size_t len, int r, int64_t *out)
{
    static const struct {
        const char *sfx;
        int p2, p5;
    } mem_sfx[] = {
        {"", 0, 0},  {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0},
        {"k", 3, 3}, {"M", 6, 6},   {"G", 9, 9},   {"T", 12, 12}, {"P", 15, 15},
    };
    size_t i = 0;
    int64_t m = 0;
    int digits = 0, frac = 0;
    bool dot = false;

    for (; i < len; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
        } else if (s[i] >= '0' && s[i] <= '9') {
            if (m > (INT64_MAX - 9) / 10)
                return "is too large";
            m = m * 10 + (s[i] - '0');
            digits++;
            frac += dot;
        } else {
            break;
        }
    }
    if (digits == 0)
        return r == GS_RES_MEM ? "is not a quantity: expected a number with an optional unit "
                                 "(Ki, Mi, Gi, Ti, Pi or k, M, G, T, P)"
                               : "is not a quantity: expected a number, optionally with 'm' "
                                 "for thousandths";
    const char *sfx = s + i;
    size_t sfx_len = len - i;
    int p2 = -frac, p5 = -frac;
    if (r == GS_RES_MEM) {
        size_t k = 0;
        while (k < sizeof mem_sfx / sizeof mem_sfx[0] &&
               !(strlen(mem_sfx[k].sfx) == sfx_len && memcmp(mem_sfx[k].sfx, sfx, sfx_len) == 0))
            k++;
        if (k == sizeof mem_sfx / sizeof mem_sfx[0])
            return "has a bad unit: memory takes Ki, Mi, Gi, Ti, Pi (or k, M, G, T, P; none "
                   "means bytes)";
        p2 += mem_sfx[k].p2 - 20; /* bytes to MiB */
        p5 += mem_sfx[k].p5;
    } else if (sfx_len == 1 && sfx[0] == 'm') {
        /* already in thousandths */
    } else if (sfx_len == 0) {
        p2 += 3;
        p5 += 3;
    } else {
        return r == GS_RES_GPU ? "has a bad unit: GPUs are a count, optionally with 'm' for "
                                 "milli-GPU"
                               : "has a bad unit: CPU is cores, or milli-cores with 'm'";
    }
    for (; p2 < 0; p2++) {
        if (m % 2 != 0)
            return r == GS_RES_MEM ? "is not a whole number of MiB" : "is finer than a thousandth";
        m /= 2;
    }
    for (; p5 < 0; p5++) {
        if (m % 5 != 0)
            return r == GS_RES_MEM ? "is not a whole number of MiB" : "is finer than a thousandth";
        m /= 5;
    }
    for (; p2 > 0 && m != 0; p2--) {
        if (m > QUANTITY_MAX / 2)
            return "is too large";
        m *= 2;
    }
    for (; p5 > 0 && m != 0; p5--) {
        if (m > QUANTITY_MAX / 5)
            return "is too large";
        m *= 5;
    }
    if (m > QUANTITY_MAX)
        return "is too large";
    *out = m;
    return NULL;
}

/* A quota (limit == false) or a limit of resource r. */
static int get_quantity(struct pctx *c, const struct ynode *n, const char *field, int r, bool limit,
                        int64_t *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    if (limit && (text_is(n, "unlimited") || text_is(n, "-1"))) {
        *out = GS_UNLIMITED;
        return GS_OK;
    }
    if (n->n > 0 && n->u.s[0] == '-')
        return FAIL(c, n, field, "negative %s %s%s", field, describe(n, buf, sizeof buf),
                    limit ? " (only -1, meaning unlimited, may be negative)" : "");
    if (text_is(n, "unlimited"))
        return FAIL(c, n, field,
                    "a quota cannot be unlimited; leave it out for 0 (or the sum "
                    "of the children's) and set the limit instead");
    const char *why = parse_quantity(n->u.s, n->n, r, out);
    if (why != NULL)
        return FAIL(c, n, field, "%s %s %s", res_names[r], describe(n, buf, sizeof buf), why);
    return GS_OK;
}

/* A duration "1h30m", "10m", "45s", "500ms" or "0", Go's time.ParseDuration without fractions. */
static int get_duration(struct pctx *c, const struct ynode *n, const char *field, int64_t *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    size_t i = 0;
    int64_t total = 0;
    if (n->n > 0 && s[0] == '-')
        return FAIL(c, n, field, "negative duration %s", describe(n, buf, sizeof buf));
    if (text_is(n, "0")) {
        *out = 0;
        return GS_OK;
    }
    while (i < n->n) {
        int64_t v = 0;
        size_t d0 = i;
        for (; i < n->n && s[i] >= '0' && s[i] <= '9'; i++)
            v = v > DURATION_MAX_MS ? v : v * 10 + (s[i] - '0'); /* saturates past the max */
        int64_t unit = 0;
        if (i + 1 < n->n && s[i] == 'm' && s[i + 1] == 's') {
            unit = 1;
            i += 2;
        } else if (i < n->n && s[i] == 's') {
            unit = 1000;
            i++;
        } else if (i < n->n && s[i] == 'm') {
            unit = 60000;
            i++;
        } else if (i < n->n && s[i] == 'h') {
            unit = 3600000;
            i++;
        }
        if (i == d0 || unit == 0 || (s[d0] < '0' || s[d0] > '9'))
            return FAIL(c, n, field,
                        "bad duration %s: expected numbers with units ms, s, m, h (\"1h30m\")",
                        describe(n, buf, sizeof buf));
        if (v > DURATION_MAX_MS / unit || total > DURATION_MAX_MS - v * unit)
            return FAIL(c, n, field, "duration %s is too long", describe(n, buf, sizeof buf));
        total += v * unit;
    }
    if (n->n == 0)
        return FAIL(c, n, field, "bad duration ''");
    *out = total;
    return GS_OK;
}

static int qos_index(const char *s, size_t len)
{
    for (int i = 0; i < QOS_COUNT; i++)
        if (strlen(qos_names[i]) == len && memcmp(qos_names[i], s, len) == 0)
            return i;
    return -1;
}

static int bad_qos(struct pctx *c, const struct ynode *n, const char *field)
{
    char buf[64];
    return FAIL(c, n, field, "unknown QoS %s (allowed: LS, Guaranteed, Burstable, BE)",
                describe(n, buf, sizeof buf));
}

/* A reference to a leaf queue by name. */
static int leaf_ref(struct pctx *c, const struct ynode *n, const char *field, uint32_t *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    const struct qqueue *q = smap_get(&c->qnames, n->u.s, n->n);
    if (q == NULL)
        return FAIL(c, n, field, "unknown queue %s", describe(n, buf, sizeof buf));
    if (q->children > 0)
        return FAIL(c, n, field, "queue %s has child queues; pods can only be sent to a leaf queue",
                    describe(n, buf, sizeof buf));
    *out = (uint32_t)(q - c->qc->q);
    return GS_OK;
}

/* A reference to a PriorityClass by name. */
static int class_ref(struct pctx *c, const struct ynode *n, const char *field, uint32_t *out)
{
    char buf[64];
    int rc = need_kind(c, n, field, Y_SCALAR);
    if (rc)
        return rc;
    const struct qclass *pc = smap_get(&c->cnames, n->u.s, n->n);
    if (pc == NULL)
        return FAIL(c, n, field, "unknown PriorityClass %s", describe(n, buf, sizeof buf));
    *out = (uint32_t)(pc - c->qc->pc);
    return GS_OK;
}

/* ---- queues ----------------------------------------------------------------------------- */

static int parse_resource(struct pctx *c, const struct ynode *m, int r, struct qqueue *q)
{
    static const char *const keys[] = {"quota", "limit", "overQuotaWeight", NULL};
    char a[32], b[32];
    int rc = check_map(c, m, res_names[r], keys);
    if (rc)
        return rc;
    const struct ynode *quota = get(m, "quota"), *limit = get(m, "limit");
    const struct ynode *w = get(m, "overQuotaWeight");
    if (quota != NULL) {
        if ((rc = get_quantity(c, quota, "quota", r, false, &q->quota[r])) != GS_OK)
            return rc;
        q->quota_set[r] = true;
        q->quota_at[r] = quota->at;
    }
    if (limit != NULL) {
        if ((rc = get_quantity(c, limit, "limit", r, true, &q->limit[r])) != GS_OK)
            return rc;
        q->limit_at[r] = limit->at;
        if (q->limit[r] < q->quota[r])
            return FAIL(c, limit, "limit", "%s limit %s is below the quota %s", res_names[r],
                        fmt_qty(a, sizeof a, r, q->limit[r]), fmt_qty(b, sizeof b, r, q->quota[r]));
    }
    if (w != NULL) {
        double v = 0;
        if ((rc = get_weight(c, w, "overQuotaWeight", &v)) != GS_OK)
            return rc;
        if (q->weight_from >= 0 && v != q->weight)
            return FAIL(c, w, "overQuotaWeight",
                        "overQuotaWeight %g differs from the %g given for %s; a queue has one "
                        "over-quota weight",
                        v, q->weight, res_names[q->weight_from]);
        q->weight = v;
        q->weight_from = r;
    }
    return GS_OK;
}

/* Reads one queue entry; its parent is kept as a name node in parents[i]. */
static int parse_queue(struct pctx *c, const struct ynode *m, struct qqueue *q,
                       const struct ynode **parent)
{
    static const char *const keys[] = {"name", "parentQueue", "resources", "preemptMinRuntime",
                                       NULL};
    static const char *const rkeys[] = {"gpu", "cpu", "memory", NULL};
    const struct ynode *n;
    int rc = check_map(c, m, "queues", keys);
    if (rc)
        return rc;
    if ((rc = require(c, m, "name", &n)) != GS_OK || (rc = get_name(c, n, "name", &q->name)))
        return rc;
    q->at = n->at;
    if (strcmp(q->name, "root") == 0)
        return FAIL(c, n, "name", "'root' is the implicit top of the tree; name queues otherwise");
    const struct qqueue *first = smap_get(&c->qnames, q->name, n->n);
    if (first != NULL)
        return FAIL(c, n, "name", "duplicate queue name '%s' (first on line %u)", q->name,
                    first->at.line);
    if (smap_put(&c->qnames, q->name, n->n, q) != GS_OK)
        return oom(c);
    *parent = get(m, "parentQueue");
    if (*parent != NULL) {
        const char *pname;
        if ((rc = get_name(c, *parent, "parentQueue", &pname)) != GS_OK)
            return rc;
        q->parent_at = (*parent)->at;
        if (strcmp(pname, "root") == 0)
            *parent = NULL;
    }
    const struct ynode *res = get(m, "resources");
    if (res != NULL) {
        if ((rc = check_map(c, res, "resources", rkeys)) != GS_OK)
            return rc;
        for (int r = 0; r < GS_RES_COUNT; r++) {
            const struct ynode *rm = get(res, res_names[r]);
            if (rm != NULL && (rc = parse_resource(c, rm, r, q)) != GS_OK)
                return rc;
        }
    }
    const struct ynode *mr = get(m, "preemptMinRuntime");
    if (mr != NULL) {
        if ((rc = get_duration(c, mr, "preemptMinRuntime", &q->min_runtime_ms)) != GS_OK)
            return rc;
        q->min_runtime_set = true;
    }
    return GS_OK;
}

/* Finds a cycle of parents through queue k and reports it at its first member in file order. */
static int report_cycle(struct pctx *c, uint32_t k)
{
    const struct qqueue *q = c->qc->q;
    uint32_t first = k;
    for (uint32_t j = q[k].parent; j != k; j = q[j].parent)
        if (j < first)
            first = j;
    char chain[200];
    size_t len = 0;
    uint32_t j = first;
    do {
        int w = snprintf(chain + len, sizeof chain - len, "%s -> ", q[j].name);
        if (w < 0 || (size_t)w >= sizeof chain - len)
            break;
        len += (size_t)w;
        j = q[j].parent;
    } while (j != first);
    if (len < sizeof chain)
        (void)snprintf(chain + len, sizeof chain - len, "%s", q[first].name);
    return fail_at(c, GS_EPARSE, &q[first].parent_at, "parentQueue",
                   "parent queues form a cycle: %s", chain);
}

/*
 * Links parents, then checks the tree: no cycle, not too deep; derives unset parent quotas as
 * their children's sum; checks children's sums against set quotas and limits against derived
 * quotas; resolves inherited min run times; fixes the order apply adds queues in.
 */
static int link_queues(struct pctx *c, const struct ynode **parents)
{
    struct gs_qconfig *qc = c->qc;
    struct qqueue *q = qc->q;
    uint32_t nq = qc->nq;
    char a[32], b[32];
    int rc = GS_OK;

    for (uint32_t i = 0; i < nq; i++) {
        if (parents[i] == NULL)
            continue;
        struct qqueue *p = smap_get(&c->qnames, parents[i]->u.s, parents[i]->n);
        if (p == NULL)
            return FAIL(c, parents[i], "parentQueue", "unknown parent queue '%s'", parents[i]->u.s);
        q[i].parent = (uint32_t)(p - q);
    }
    /* Cycles: walk up from each queue, stamping the walk; meeting the stamp again is a cycle. */
    uint32_t *stamp = calloc(nq ? nq : 1, sizeof *stamp);
    qc->order = arena_alloc(&qc->ar, (nq ? nq : 1) * sizeof *qc->order);
    if (stamp == NULL || qc->order == NULL) {
        free(stamp);
        return oom(c);
    }
    for (uint32_t i = 0; i < nq && rc == GS_OK; i++) {
        uint32_t j = i;
        while (j != NONE && stamp[j] == 0) {
            stamp[j] = i + 1;
            j = q[j].parent;
        }
        if (j != NONE && stamp[j] == i + 1)
            rc = report_cycle(c, j);
    }
    free(stamp);
    if (rc)
        return rc;
    /* Depths, each walk cut just past the limit; the first queue too deep in file order fails. */
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t d = 0;
        for (uint32_t j = i; j != NONE && d <= GS_QCONFIG_DEPTH_MAX; j = q[j].parent)
            d++;
        if (d > GS_QCONFIG_DEPTH_MAX)
            return fail_at(c, GS_EPARSE, &q[i].at, "name",
                           "queue '%s' is nested more than %u levels deep", q[i].name,
                           GS_QCONFIG_DEPTH_MAX);
        q[i].depth = d;
        if (q[i].parent != NONE)
            q[q[i].parent].children++;
    }
    /* Order: file order with each queue moved after its parent (its unadded ancestors are
       added first, top down). */
    bool *added = calloc(nq ? nq : 1, sizeof *added);
    if (added == NULL)
        return oom(c);
    uint32_t no = 0;
    for (uint32_t i = 0; i < nq; i++) {
        uint32_t chain[GS_QCONFIG_DEPTH_MAX], len = 0;
        for (uint32_t j = i; j != NONE && !added[j]; j = q[j].parent)
            chain[len++] = j;
        while (len > 0) {
            uint32_t k = chain[--len];
            added[k] = true;
            qc->order[no++] = k;
        }
    }
    free(added);
    /* Children's sums, children before parents. */
    int64_t(*sum)[GS_RES_COUNT] = calloc(nq ? nq : 1, sizeof *sum);
    if (sum == NULL)
        return oom(c);
    for (uint32_t k = nq; k-- > 0;) {
        struct qqueue *x = &q[qc->order[k]];
        for (int r = 0; r < GS_RES_COUNT; r++) {
            if (x->children > 0 && !x->quota_set[r])
                x->quota[r] = sum[qc->order[k]][r];
            if (x->parent != NONE)
                sum[x->parent][r] += x->quota[r];
        }
    }
    for (uint32_t i = 0; i < nq && rc == GS_OK; i++) {
        for (int r = 0; r < GS_RES_COUNT && rc == GS_OK; r++) {
            if (q[i].children == 0)
                continue;
            if (q[i].quota_set[r] && sum[i][r] > q[i].quota[r])
                rc = fail_at(c, GS_EPARSE, &q[i].quota_at[r], "quota",
                             "the children's %s quotas sum to %s, above this queue's quota %s",
                             res_names[r], fmt_qty(a, sizeof a, r, sum[i][r]),
                             fmt_qty(b, sizeof b, r, q[i].quota[r]));
            else if (!q[i].quota_set[r] && q[i].limit[r] < q[i].quota[r])
                rc = fail_at(c, GS_EPARSE, &q[i].limit_at[r], "limit",
                             "%s limit %s is below the quota %s (the sum of the children's)",
                             res_names[r], fmt_qty(a, sizeof a, r, q[i].limit[r]),
                             fmt_qty(b, sizeof b, r, q[i].quota[r]));
        }
    }
    free(sum);
    if (rc)
        return rc;
    /* Min run times: own, else the parent's (resolved first), else the top-level default. */
    for (uint32_t k = 0; k < nq; k++) {
        struct qqueue *x = &q[qc->order[k]];
        if (!x->min_runtime_set)
            x->min_runtime_ms =
                x->parent != NONE ? q[x->parent].min_runtime_ms : qc->min_runtime_ms;
    }
    return GS_OK;
}

static int parse_queues(struct pctx *c, const struct ynode *seq)
{
    struct gs_qconfig *qc = c->qc;
    int rc = need_kind(c, seq, "queues", Y_SEQ);
    if (rc)
        return rc;
    if (seq->n > GS_QCONFIG_QUEUES_MAX)
        return FAIL(c, seq->u.items[GS_QCONFIG_QUEUES_MAX], "queues", "more than %u queues",
                    GS_QCONFIG_QUEUES_MAX);
    if (seq->n == 0)
        return FAIL(c, seq, "queues", "no queues; a configuration needs at least one");
    qc->q = arena_alloc(&qc->ar, seq->n * sizeof *qc->q);
    const struct ynode **parents = calloc(seq->n, sizeof(const struct ynode *));
    if (qc->q == NULL || parents == NULL) {
        free(parents);
        return oom(c);
    }
    for (uint32_t i = 0; i < seq->n && rc == GS_OK; i++) {
        struct qqueue *q = &qc->q[i];
        memset(q, 0, sizeof *q);
        q->parent = NONE;
        q->weight = 1;
        q->weight_from = -1;
        for (int r = 0; r < GS_RES_COUNT; r++)
            q->limit[r] = GS_UNLIMITED;
        rc = parse_queue(c, seq->u.items[i], q, &parents[i]);
        qc->nq = i + 1;
    }
    if (rc == GS_OK)
        rc = link_queues(c, parents);
    free(parents);
    return rc;
}

/* ---- PriorityClasses -------------------------------------------------------------------- */

static int parse_classes(struct pctx *c, const struct ynode *seq)
{
    static const char *const keys[] = {"name", "value", "preemptible", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = need_kind(c, seq, "priorityClasses", Y_SEQ);
    if (rc)
        return rc;
    if (seq->n > CLASSES_MAX)
        return FAIL(c, seq->u.items[CLASSES_MAX], "priorityClasses", "more than %u PriorityClasses",
                    CLASSES_MAX);
    qc->pc = arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->pc);
    if (qc->pc == NULL)
        return oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct ynode *m = seq->u.items[i], *n, *v;
        struct qclass *pc = &qc->pc[i];
        int64_t value = 0;
        if ((rc = check_map(c, m, "priorityClasses", keys)) != GS_OK ||
            (rc = require(c, m, "name", &n)) != GS_OK ||
            (rc = get_name(c, n, "name", &pc->name)) != GS_OK)
            return rc;
        pc->at = n->at;
        const struct qclass *first = smap_get(&c->cnames, pc->name, n->n);
        if (first != NULL)
            return FAIL(c, n, "name", "duplicate PriorityClass name '%s' (first on line %u)",
                        pc->name, first->at.line);
        if (smap_put(&c->cnames, pc->name, n->n, pc) != GS_OK)
            return oom(c);
        if ((rc = require(c, m, "value", &v)) != GS_OK ||
            (rc = get_int(c, v, "value", INT32_MIN, INT32_MAX, &value)) != GS_OK)
            return rc;
        pc->value = (int32_t)value;
        pc->preemptible = -1;
        const struct ynode *p = get(m, "preemptible");
        if (p != NULL) {
            bool b = false;
            if ((rc = get_bool(c, p, "preemptible", &b)) != GS_OK)
                return rc;
            pc->preemptible = b;
        }
        qc->npc = i + 1;
    }
    return GS_OK;
}

/* ---- assignment ------------------------------------------------------------------------- */

static int parse_match(struct pctx *c, const struct ynode *m, struct qrule *rule)
{
    static const char *const keys[] = {"qos", "gpuModel", "numGpu", "namePrefix", NULL};
    static const char *const nkeys[] = {"min", "max", NULL};
    int rc = check_map(c, m, "match", keys);
    if (rc)
        return rc;
    const struct ynode *qos = get(m, "qos"), *models = get(m, "gpuModel");
    const struct ynode *num = get(m, "numGpu"), *prefix = get(m, "namePrefix");
    if (qos != NULL) {
        if ((rc = need_kind(c, qos, "qos", Y_SEQ)) != GS_OK)
            return rc;
        if (qos->n == 0)
            return FAIL(c, qos, "qos", "empty list; leave qos out to match any QoS");
        for (uint32_t i = 0; i < qos->n; i++) {
            const struct ynode *e = qos->u.items[i];
            if ((rc = need_kind(c, e, "qos", Y_SCALAR)) != GS_OK)
                return rc;
            int k = qos_index(e->u.s, e->n);
            if (k < 0)
                return bad_qos(c, e, "qos");
            rule->qos_mask |= (uint8_t)(1u << k);
        }
    }
    if (models != NULL) {
        if ((rc = need_kind(c, models, "gpuModel", Y_SEQ)) != GS_OK)
            return rc;
        if (models->n == 0)
            return FAIL(c, models, "gpuModel", "empty list; leave gpuModel out to match any");
        if (models->n > LIST_MAX)
            return FAIL(c, models->u.items[LIST_MAX], "gpuModel", "more than %u models", LIST_MAX);
        rule->models = arena_alloc(&c->qc->ar, models->n * sizeof *rule->models);
        if (rule->models == NULL)
            return oom(c);
        for (uint32_t i = 0; i < models->n; i++) {
            const struct ynode *e = models->u.items[i];
            if ((rc = get_name(c, e, "gpuModel", &rule->models[i])) != GS_OK)
                return rc;
            if (strchr(rule->models[i], '|') != NULL)
                return FAIL(c, e, "gpuModel", "a model name cannot contain '|'");
        }
        rule->nmodels = models->n;
    }
    if (num != NULL) {
        const struct ynode *lo, *hi;
        int64_t v = 0;
        if ((rc = check_map(c, num, "numGpu", nkeys)) != GS_OK)
            return rc;
        rule->has_num = true;
        rule->num_max = NUM_GPU_MAX;
        if ((lo = get(num, "min")) != NULL) {
            if ((rc = get_int(c, lo, "min", 0, NUM_GPU_MAX, &v)) != GS_OK)
                return rc;
            rule->num_min = (uint32_t)v;
        }
        if ((hi = get(num, "max")) != NULL) {
            if ((rc = get_int(c, hi, "max", 0, NUM_GPU_MAX, &v)) != GS_OK)
                return rc;
            rule->num_max = (uint32_t)v;
            if (rule->num_max < rule->num_min)
                return FAIL(c, hi, "max", "max %u is below min %u", rule->num_max, rule->num_min);
        }
    }
    if (prefix != NULL) {
        if ((rc = get_name(c, prefix, "namePrefix", &rule->prefix)) != GS_OK)
            return rc;
        rule->prefix_len = prefix->n;
    }
    return GS_OK;
}

static int parse_hash(struct pctx *c, const struct ynode *m, struct qrule *rule)
{
    int rc = need_kind(c, m, "hashQueues", Y_MAP);
    if (rc)
        return rc;
    if (m->n == 0)
        return FAIL(c, m, "hashQueues", "no queues to hash over");
    rule->hash = arena_alloc(&c->qc->ar, m->n * sizeof *rule->hash);
    if (rule->hash == NULL)
        return oom(c);
    uint32_t nq = c->qc->nq;
    uint32_t *first = calloc((size_t)nq + 1, sizeof *first);
    if (first == NULL)
        return oom(c);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct ynode *k = m->u.items[2 * (size_t)i], *v = m->u.items[2 * (size_t)i + 1];
        char buf[64];
        const char *field = k->kind == Y_SCALAR ? k->u.s : "hashQueues";
        int64_t w = 0;
        if (k->kind != Y_SCALAR) {
            free(first);
            return FAIL(c, k, "hashQueues", "a key must be a queue name, found %s",
                        describe(k, buf, sizeof buf));
        }
        if ((rc = leaf_ref(c, k, field, &rule->hash[i].queue)) != GS_OK) {
            free(first);
            return rc;
        }
        /* first[q] = 1 + the entry that named queue q: duplicates found in O(1). */
        uint32_t q = rule->hash[i].queue;
        if (q < nq && first[q]) {
            uint32_t j = first[q] - 1;
            free(first);
            return FAIL(c, k, field, "duplicate key '%.60s' (first on line %u)", k->u.s,
                        m->u.items[2 * (size_t)j]->at.line);
        }
        if (q < nq)
            first[q] = i + 1;
        if ((rc = get_int(c, v, field, 1, HASH_WEIGHT_MAX, &w)) != GS_OK) {
            free(first);
            return rc;
        }
        rule->hash[i].weight = (uint32_t)w;
        rule->weight_sum += (uint64_t)w;
    }
    free(first);
    rule->nhash = m->n;
    return GS_OK;
}

static int parse_rules(struct pctx *c, const struct ynode *seq)
{
    static const char *const keys[] = {"match", "queue", "hashQueues", "priorityClass", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = need_kind(c, seq, "rules", Y_SEQ);
    if (rc)
        return rc;
    if (seq->n > RULES_MAX)
        return FAIL(c, seq->u.items[RULES_MAX], "rules", "more than %u rules", RULES_MAX);
    qc->rules = arena_alloc(&qc->ar, (seq->n ? seq->n : 1) * sizeof *qc->rules);
    if (qc->rules == NULL)
        return oom(c);
    for (uint32_t i = 0; i < seq->n; i++) {
        const struct ynode *m = seq->u.items[i];
        struct qrule *rule = &qc->rules[i];
        memset(rule, 0, sizeof *rule);
        rule->queue = NONE;
        rule->pclass = NONE;
        if ((rc = check_map(c, m, "rules", keys)) != GS_OK)
            return rc;
        const struct ynode *match = get(m, "match"), *queue = get(m, "queue");
        const struct ynode *hash = get(m, "hashQueues"), *pc = get(m, "priorityClass");
        if (match != NULL && (rc = parse_match(c, match, rule)) != GS_OK)
            return rc;
        if (queue != NULL && hash != NULL)
            return FAIL(c, hash, "hashQueues", "a rule takes either queue or hashQueues, not both");
        if (queue == NULL && hash == NULL)
            return FAIL(c, m, "queue", "a rule needs queue or hashQueues");
        if (queue != NULL && (rc = leaf_ref(c, queue, "queue", &rule->queue)) != GS_OK)
            return rc;
        if (hash != NULL && (rc = parse_hash(c, hash, rule)) != GS_OK)
            return rc;
        if (pc != NULL && (rc = class_ref(c, pc, "priorityClass", &rule->pclass)) != GS_OK)
            return rc;
        qc->nrules = i + 1;
    }
    return GS_OK;
}

static int parse_assignment(struct pctx *c, const struct ynode *m)
{
    static const char *const keys[] = {"defaultQueue", "defaultPriorityClass", "priorityByQoS",
                                       "rules", NULL};
    struct gs_qconfig *qc = c->qc;
    int rc = check_map(c, m, "assignment", keys);
    if (rc)
        return rc;
    const struct ynode *dq = get(m, "defaultQueue"), *dc = get(m, "defaultPriorityClass");
    const struct ynode *map = get(m, "priorityByQoS"), *rules = get(m, "rules");
    if (dq != NULL && (rc = leaf_ref(c, dq, "defaultQueue", &qc->default_queue)) != GS_OK)
        return rc;
    if (dc != NULL && (rc = class_ref(c, dc, "defaultPriorityClass", &qc->default_class)) != GS_OK)
        return rc;
    if (map != NULL) {
        if ((rc = need_kind(c, map, "priorityByQoS", Y_MAP)) != GS_OK)
            return rc;
        for (uint32_t i = 0; i < map->n; i++) {
            const struct ynode *k = map->u.items[2 * (size_t)i],
                               *v = map->u.items[2 * (size_t)i + 1];
            char buf[64];
            if (k->kind != Y_SCALAR)
                return FAIL(c, k, "priorityByQoS", "a key must be a QoS name, found %s",
                            describe(k, buf, sizeof buf));
            int q = qos_index(k->u.s, k->n);
            if (q < 0)
                return bad_qos(c, k, k->u.s);
            if (qc->qos_class[q] != NONE)
                return FAIL(c, k, k->u.s, "duplicate key '%s'", qos_names[q]);
            if ((rc = class_ref(c, v, qos_names[q], &qc->qos_class[q])) != GS_OK)
                return rc;
        }
    }
    if (rules != NULL && (rc = parse_rules(c, rules)) != GS_OK)
        return rc;
    return GS_OK;
}

/* ---- top level -------------------------------------------------------------------------- */

static int parse_root(struct pctx *c, const struct ynode *root)
{
    static const char *const keys[] = {
        "apiVersion", "kind", "preemptMinRuntime", "queues", "priorityClasses", "assignment", NULL};
    struct gs_qconfig *qc = c->qc;
    const struct ynode *n;
    char buf[64];
    int rc;

    if (root->kind != Y_MAP)
        return FAIL(c, root, "", "expected a mapping with apiVersion, kind and queues, found %s",
                    is_null(root) ? "null" : describe(root, buf, sizeof buf));
    if ((rc = check_map(c, root, "", keys)) != GS_OK)
        return rc;
    if ((rc = require(c, root, "apiVersion", &n)) != GS_OK)
        return rc;
    if (!text_is(n, API_VERSION))
        return FAIL(c, n, "apiVersion", "apiVersion must be '" API_VERSION "', found %s",
                    describe(n, buf, sizeof buf));
    if ((rc = require(c, root, "kind", &n)) != GS_OK)
        return rc;
    if (!text_is(n, KIND))
        return FAIL(c, n, "kind", "kind must be '" KIND "', found %s",
                    describe(n, buf, sizeof buf));
    if ((n = get(root, "preemptMinRuntime")) != NULL &&
        (rc = get_duration(c, n, "preemptMinRuntime", &qc->min_runtime_ms)) != GS_OK)
        return rc;
    if ((rc = require(c, root, "queues", &n)) != GS_OK || (rc = parse_queues(c, n)) != GS_OK)
        return rc;
    if ((n = get(root, "priorityClasses")) != NULL && (rc = parse_classes(c, n)) != GS_OK)
        return rc;
    if ((n = get(root, "assignment")) != NULL && (rc = parse_assignment(c, n)) != GS_OK)
        return rc;
    return GS_OK;
}

int gs_qconfig_parse(const char *buf, size_t len, const char *name, struct gs_qconfig **out,
                     struct gs_diag *diag)
{
    struct gs_diag scratch;
    struct pctx c;
    int rc;

    *out = NULL;
    memset(&c, 0, sizeof c);
    c.d = diag ? diag : &scratch;
    memset(c.d, 0, sizeof *c.d);
    (void)snprintf(c.d->file, sizeof c.d->file, "%s", name ? name : "");
    if (buf == NULL)
        len = 0;
    if (len > GS_QCONFIG_FILE_MAX)
        return fail_at(&c, GS_EIO, NULL, "", "file is %zu bytes, over the limit of %u", len,
                       GS_QCONFIG_FILE_MAX);
    c.qc = calloc(1, sizeof *c.qc);
    if (c.qc == NULL)
        return oom(&c);
    (void)snprintf(c.qc->name, sizeof c.qc->name, "%s", name ? name : "");
    c.qc->default_queue = NONE;
    c.qc->default_class = NONE;
    for (int i = 0; i < QOS_COUNT; i++)
        c.qc->qos_class[i] = NONE;
    rc = build_tree(&c, len ? buf : "", len);
    if (rc == GS_OK)
        rc = parse_root(&c, c.root);
    arena_fini(&c.tmp);
    free(c.pend);
    smap_fini(&c.anchors);
    smap_fini(&c.qnames);
    smap_fini(&c.cnames);
    if (rc != GS_OK) {
        gs_qconfig_free(c.qc);
        return rc;
    }
    memset(c.d, 0, sizeof *c.d);
    *out = c.qc;
    return GS_OK;
}

int gs_qconfig_load(const char *path, struct gs_qconfig **out, struct gs_diag *diag)
{
    char *buf;
    size_t len;
    *out = NULL;
    int rc = gs__read_file(path, GS_QCONFIG_FILE_MAX, &buf, &len, diag);
    if (rc != GS_OK)
        return rc;
    rc = gs_qconfig_parse(buf, len, path, out, diag);
    free(buf);
    return rc;
}

void gs_qconfig_free(struct gs_qconfig *qc)
{
    if (qc == NULL)
        return;
    arena_fini(&qc->ar);
    free(qc);
}

/* ---- apply and assign ------------------------------------------------------------------- */

int gs_qconfig_apply(const struct gs_qconfig *qc, struct gs_engine *e, struct gs_diag *diag)
{
    struct gs_diag scratch;
    struct gs_diag *d = diag ? diag : &scratch;
    uint32_t *eid = calloc(qc->nq ? qc->nq : 1, sizeof *eid);
    int rc = GS_OK;

    memset(d, 0, sizeof *d);
    (void)snprintf(d->file, sizeof d->file, "%s", qc->name);
    if (eid == NULL) {
        (void)snprintf(d->msg, sizeof d->msg, "out of memory");
        return GS_ENOMEM;
    }
    for (uint32_t k = 0; k < qc->nq; k++) {
        uint32_t i = qc->order[k];
        const struct qqueue *q = &qc->q[i];
        struct gs_queue_spec spec;
        spec.name = q->name;
        spec.parent = q->parent == NONE ? GS_QUEUE_ROOT : eid[q->parent];
        memcpy(spec.quota, q->quota, sizeof spec.quota);
        memcpy(spec.limit, q->limit, sizeof spec.limit);
        spec.over_quota_weight = q->weight;
        spec.min_runtime_ms = q->min_runtime_ms;
        rc = gs_engine_add_queue(e, &spec, &eid[i]);
        if (rc != GS_OK) {
            d->line = q->at.line;
            d->column = q->at.col;
            (void)snprintf(d->field, sizeof d->field, "name");
            (void)snprintf(d->msg, sizeof d->msg, "the engine refused queue '%.100s': %s", q->name,
                           gs_strerror(rc));
            goto out;
        }
    }
    for (uint32_t i = 0; i < qc->npc; i++) {
        const struct qclass *pc = &qc->pc[i];
        struct gs_priority_class_spec spec = {pc->name, pc->value, pc->preemptible};
        rc = gs_engine_add_priority_class(e, &spec, NULL);
        if (rc != GS_OK) {
            d->line = pc->at.line;
            d->column = pc->at.col;
            (void)snprintf(d->field, sizeof d->field, "name");
            (void)snprintf(d->msg, sizeof d->msg, "the engine refused PriorityClass '%.100s': %s",
                           pc->name, gs_strerror(rc));
            goto out;
        }
    }
out:
    free(eid);
    if (rc == GS_OK)
        memset(d, 0, sizeof *d);
    return rc;
}

/* True when one of the '|'-separated parts of spec is among the rule's models. */
static bool model_matches(const struct qrule *rule, const char *spec)
{
    while (*spec != '\0') {
        size_t len = strcspn(spec, "|");
        for (uint32_t i = 0; i < rule->nmodels; i++)
            if (strlen(rule->models[i]) == len && memcmp(rule->models[i], spec, len) == 0)
                return true;
        spec += len;
        if (*spec == '|')
            spec++;
    }
    return false;
}

static bool rule_matches(const struct qrule *rule, const struct gs_trace_pod *pod, int qos,
                         const char *name)
{
    if (rule->qos_mask != 0 && (qos < 0 || !(rule->qos_mask & (1u << qos))))
        return false;
    if (rule->nmodels > 0 && !model_matches(rule, pod->gpu_spec ? pod->gpu_spec : ""))
        return false;
    if (rule->has_num && (pod->num_gpu < rule->num_min || pod->num_gpu > rule->num_max))
        return false;
    if (rule->prefix != NULL && strncmp(name, rule->prefix, rule->prefix_len) != 0)
        return false;
    return true;
}

int gs_qconfig_assign(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                      struct gs_qconfig_assignment *out)
{
    const char *name = pod->name ? pod->name : "";
    const char *qos_text = pod->qos ? pod->qos : "";
    int qos = qos_index(qos_text, strlen(qos_text));
    uint32_t queue = qc->default_queue, pclass = NONE;

    out->queue = NULL;
    out->priority_class = NULL;
    for (uint32_t i = 0; i < qc->nrules; i++) {
        const struct qrule *rule = &qc->rules[i];
        if (!rule_matches(rule, pod, qos, name))
            continue;
        queue = rule->queue;
        if (queue == NONE) {
            uint64_t h = fnv1a(name, strlen(name)) % rule->weight_sum;
            uint32_t j = 0;
            while (h >= rule->hash[j].weight) {
                h -= rule->hash[j].weight;
                j++;
            }
            queue = rule->hash[j].queue;
        }
        pclass = rule->pclass;
        break;
    }
    if (pclass == NONE && qos >= 0)
        pclass = qc->qos_class[qos];
    if (pclass == NONE)
        pclass = qc->default_class;
    /* On failure, a found queue is still reported so the caller can say what is missing. */
    if (queue != NONE)
        out->queue = qc->q[queue].name;
    if (queue == NONE || pclass == NONE)
        return GS_ENOENT;
    out->queue = qc->q[queue].name;
    out->priority_class = qc->pc[pclass].name;
    return GS_OK;
}

int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc)
{
    return qc ? qc->min_runtime_ms : 0;
}
