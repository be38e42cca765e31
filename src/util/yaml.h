/*
 * The one libyaml document walker of the tree, shared by every YAML reader: the queue
 * configuration (src/sim/qconfig*.c), the device plugin's configuration
 * (src/agent/devplugin_config.c), the kubeconfig (src/k8s/config.c) and Kubernetes objects as
 * JSON values (src/k8s/yamljson.c). Internal (src/util; target gsyaml, which links libyaml).
 *
 * Two levels over one event loop:
 * - gs__yaml_walk() streams libyaml's events to a callback, each with its 1-based source position,
 *   after enforcing the reader's limits (struct gs_yaml_limits: input size, nesting depth, node
 *   count, aliases, tags, one document). A large input (a cluster dump) is converted as it is
 *   read, with no tree of its own.
 * - gs__yaml_load() builds a positioned tree (struct gs_yaml_node) in an arena, for readers that
 *   walk a fixed schema and want to look keys up; aliases, when allowed, are the anchored node
 *   itself (the tree may share subtrees) and count again each time they are used, so a "billion
 *   laughs" document stops at nodes_max.
 *
 * Building from events rather than with yaml_parser_load() is what lets the depth limit stop
 * libyaml itself before it stacks up a deeply nested input.
 *
 * Errors fill a struct gs_diag: line and column (1-based, columns count characters) of the
 * offending event, field "" and one of these messages (the walker never touches diag->file):
 *   "input is N bytes, over the limit of M" (GS_EIO, line 0),
 *   "malformed YAML: PROBLEM (CONTEXT at line L, column C)", "malformed YAML: PROBLEM (byte 0xNN)",
 *   "malformed YAML: PROBLEM",
 *   "nesting deeper than N levels", "more than N YAML nodes (an alias counts each time it is
 * used)", "YAML tags are not supported (found 'T')", "YAML aliases are not accepted", "unknown
 * alias '*A'", "a second YAML document; WHAT is one document", "out of memory" (GS_ENOMEM, line 0).
 *
 * Thread-safety: no global state; separate calls may run concurrently.
 */
#ifndef GPUSCHED_UTIL_YAML_H
#define GPUSCHED_UTIL_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/compiler.h"
#include "gpusched/diag.h"
#include "util/arena.h"

/** What one reader accepts. Each reader keeps its own (a cluster dump is far larger than a queue
 * configuration). */
struct gs_yaml_limits {
    size_t bytes_max;   /**< largest input, bytes; a longer one gives GS_EIO */
    uint32_t depth_max; /**< deepest nesting of collections (a flat mapping is 1), 1..1024 */
    uint64_t nodes_max; /**< most nodes (scalars and collections; an alias counts its anchored
                             subtree again in gs__yaml_load(), and 1 in gs__yaml_walk()) */
    bool aliases;       /**< anchors and aliases allowed; false: an alias is an error */
    bool tags;          /**< tags allowed (and ignored); false: a tag is an error */
    const char *what;   /**< what the one document is, for the second-document message
                             ("a configuration"); NULL: "the input" */
};

/** A source position, 1-based; 0/0 when unknown. */
struct gs_yaml_pos {
    uint32_t line; /**< 1-based line */
    uint32_t col;  /**< 1-based column, in characters */
};

/** The kinds of events handed to a walker callback. */
enum gs_yaml_event_kind {
    GS_YAML_EV_SCALAR,    /**< a scalar: text, len, plain */
    GS_YAML_EV_SEQ_START, /**< a sequence begins */
    GS_YAML_EV_MAP_START, /**< a mapping begins */
    GS_YAML_EV_END,       /**< the innermost open sequence or mapping ends */
    GS_YAML_EV_ALIAS,     /**< an alias (only when limits allow them): text is the anchor name */
};

/** One event. Everything it points at is borrowed for the callback's duration. */
struct gs_yaml_event {
    enum gs_yaml_event_kind kind; /**< what happened */
    struct gs_yaml_pos at;        /**< where the node starts (for END: where it ends) */
    uint32_t depth;               /**< collections open around the node (0 for the document) */
    bool plain;                   /**< a scalar written without quotes (may be null, a number) */
    bool tagged;                  /**< the node carries a tag (only when limits allow tags) */
    const char *text;             /**< scalar text (NUL-terminated; may hold NULs before) or
                                       alias name; NULL for collections */
    size_t len;                   /**< bytes of text */
    const char *anchor;           /**< anchor name of a scalar or collection start, or NULL */
};

/**
 * Receives one event. Returns GS_OK to go on, or an error code to stop the walk; a callback that
 * stops fills the diagnostic itself (gs__yaml_fail()) and its code is what gs__yaml_walk()
 * returns.
 */
typedef int (*gs_yaml_event_fn)(void *ctx, const struct gs_yaml_event *ev, struct gs_diag *d);

/**
 * Streams the events of the one document in buf to fn, under lim.
 * @param buf   the text (borrowed; need not be NUL-terminated); NULL with len 0 reads as empty.
 * @param lim   the reader's limits (borrowed).
 * @param fn    the callback; ctx is passed to it.
 * @param diag  filled on error as the header comment says (file untouched); must not be NULL.
 * @return GS_OK (an empty document gives no events); GS_EPARSE; GS_EIO (too big); GS_ENOMEM;
 *         or the callback's error.
 */
int gs__yaml_walk(const char *buf, size_t len, const struct gs_yaml_limits *lim,
                  gs_yaml_event_fn fn, void *ctx, struct gs_diag *diag);

/** Kinds of tree nodes. */
enum gs_yaml_kind { GS_YAML_SCALAR, GS_YAML_SEQ, GS_YAML_MAP };

/** One node of a loaded document. */
struct gs_yaml_node {
    uint8_t kind;          /**< enum gs_yaml_kind */
    bool plain;            /**< scalar written without quotes (may be null, a number, a bool) */
    struct gs_yaml_pos at; /**< where it starts */
    uint32_t n;            /**< scalar: bytes; sequence: items; mapping: pairs */
    uint32_t height;       /**< 0 for a scalar, 1 + the deepest child for a container */
    uint32_t weight;       /**< nodes in the subtree, aliases expanded */
    union {
        char *s;                     /**< scalar text, NUL-terminated (may hold NULs before) */
        struct gs_yaml_node **items; /**< sequence items; mapping key0, value0, key1, ... */
    } u;
};

/** A loaded document. Caller storage; zero it, fill it with gs__yaml_load(), free with _fini. */
struct gs_yaml_doc {
    struct gs_arena ar;        /**< every node and string */
    struct gs_yaml_node *root; /**< the document's node; NULL for an empty document */
};

/**
 * Loads the one document in buf as a tree, under lim.
 * @param doc   zeroed caller storage; on GS_OK holds the tree (root NULL when the document is
 *              empty), on error it is left empty. Free with gs__yaml_doc_fini() either way.
 * @return as gs__yaml_walk().
 */
int gs__yaml_load(const char *buf, size_t len, const struct gs_yaml_limits *lim,
                  struct gs_yaml_doc *doc, struct gs_diag *diag);

/** Frees a document's tree. NULL is a no-op. */
void gs__yaml_doc_fini(struct gs_yaml_doc *doc);

/** True for a null node: a plain scalar "", "~", "null", "Null" or "NULL" (the core schema). */
bool gs__yaml_is_null(const struct gs_yaml_node *n);

/** True when n is a scalar whose text is exactly lit (same bytes, no NUL inside). */
bool gs__yaml_text_is(const struct gs_yaml_node *n, const char *lit);

/** The value of key in a mapping (the first pair with that key), or NULL when absent. */
const struct gs_yaml_node *gs__yaml_map_get(const struct gs_yaml_node *map, const char *key);

/** "a scalar", "a list" or "a mapping". */
const char *gs__yaml_kind_name(const struct gs_yaml_node *n);

/**
 * Describes a node for "found ..." in messages: "a list", "a mapping", or a scalar's text quoted
 * and cut to 40 bytes ("'abc'", "'aaaa...'"), formatted into buf.
 * @return buf or a string literal.
 */
const char *gs__yaml_describe(const struct gs_yaml_node *n, char *buf, size_t cap);

/**
 * Fills a diagnostic (line, column, field, msg; file untouched) and returns err.
 * @param at     the position, or NULL for the whole input (line 0).
 * @param field  the key concerned; NULL gives "".
 */
int gs__yaml_fail(struct gs_diag *d, int err, const struct gs_yaml_pos *at, const char *field,
                  const char *fmt, ...) GS_PRINTF(5, 6);

#endif /* GPUSCHED_UTIL_YAML_H */
