/*
 * Filter classes: interned node filters (nodeSelector, node affinity, tolerations) and, per
 * class, the exact set of nodes that pass it. See include/gpusched/filter.h for the semantics.
 *
 * A class is identified by a canonical serialisation of its spec (counts and length-prefixed
 * strings in field order), which is also what equality and the hash table compare; the class
 * keeps a deep copy of the spec in one owned block for matching. Node sets are bitmaps over node
 * slots, kept exact by gs__filter_node_changed(), which cluster.c calls on every change of a
 * node's labels, taints, cordon or presence: a change costs one match per class for that node.
 *
 * A filter whose required affinity names exactly one node (a DaemonSet's matchFields
 * metadata.name, or kubernetes.io/hostname In [x]) is *pinned* instead: it is that node plus the
 * class of the rest of the filter, so 10,000 such pods for 10,000 nodes make no class (no node
 * set of 10,000 bits each, no work per node change) and are judged against their node directly.
 */
#include "gpusched/filter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"
#include "gpusched/err.h"

#define FIELD_NAME "metadata.name"
#define HOSTNAME_LABEL "kubernetes.io/hostname"
#define NO_PIN UINT32_MAX

/* ---- canonical key ------------------------------------------------------------------------ */

struct keybuf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

static void kb_put(struct keybuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = gs__realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void kb_u32(struct keybuf *b, uint32_t v)
{
    kb_put(b, &v, sizeof(v));
}

static void kb_str(struct keybuf *b, const char *s)
{
    uint32_t n = s ? (uint32_t)strlen(s) : 0;
    kb_u32(b, n);
    if (n)
        kb_put(b, s, n);
}

static void kb_term(struct keybuf *b, const struct gs_sel_term *t)
{
    kb_u32(b, t->n_exprs);
    for (uint32_t e = 0; e < t->n_exprs; e++) {
        const struct gs_sel_expr *x = &t->exprs[e];
        kb_str(b, x->key);
        kb_u32(b, (uint32_t)x->op | (x->field ? 0x100u : 0));
        kb_u32(b, x->n_values);
        for (uint32_t v = 0; v < x->n_values; v++)
            kb_str(b, x->values[v]);
    }
}

static void kb_spec(struct keybuf *b, const struct gs_filter_spec *s)
{
    kb_u32(b, s->n_node_selector);
    for (uint32_t i = 0; i < s->n_node_selector; i++)
        kb_str(b, s->node_selector[i]);
    kb_u32(b, s->n_required);
    for (uint32_t i = 0; i < s->n_required; i++)
        kb_term(b, &s->required[i]);
    kb_u32(b, s->n_preferred);
    for (uint32_t i = 0; i < s->n_preferred; i++) {
        kb_u32(b, (uint32_t)s->preferred[i].weight);
        kb_term(b, &s->preferred[i].term);
    }
    kb_u32(b, s->n_tolerations);
    for (uint32_t i = 0; i < s->n_tolerations; i++) {
        const struct gs_toleration *t = &s->tolerations[i];
        kb_str(b, t->key);
        kb_u32(b, (uint32_t)t->op | ((uint32_t)t->effect << 8));
        kb_str(b, t->op == GS_TOL_EQUAL ? t->value : NULL);
    }
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h ? h : 1;
}

/* ---- validation --------------------------------------------------------------------------- */

static bool parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool term_valid(const struct gs_sel_term *t)
{
    if (t->n_exprs && !t->exprs)
        return false;
    for (uint32_t e = 0; e < t->n_exprs; e++) {
        const struct gs_sel_expr *x = &t->exprs[e];
        int64_t v;
        if (!x->key || !*x->key || x->op > GS_SEL_LT || (x->n_values && !x->values))
            return false;
        for (uint32_t k = 0; k < x->n_values; k++)
            if (!x->values[k])
                return false;
        if (x->field && (strcmp(x->key, FIELD_NAME) != 0 || x->op > GS_SEL_NOT_IN))
            return false;
        switch (x->op) {
        case GS_SEL_IN:
        case GS_SEL_NOT_IN:
            if (x->n_values == 0)
                return false;
            break;
        case GS_SEL_EXISTS:
        case GS_SEL_DOES_NOT_EXIST:
            if (x->n_values != 0)
                return false;
            break;
        default: /* Gt, Lt */
            if (x->n_values != 1 || !parse_i64(x->values[0], &v))
                return false;
            break;
        }
    }
    return true;
}

static bool spec_valid(const struct gs_filter_spec *s)
{
    if ((s->n_node_selector && !s->node_selector) || (s->n_required && !s->required) ||
        (s->n_preferred && !s->preferred) || (s->n_tolerations && !s->tolerations))
        return false;
    for (uint32_t i = 0; i < s->n_node_selector; i++) {
        const char *kv = s->node_selector[i];
        if (!kv || kv[0] == '=' || !strchr(kv, '='))
            return false;
    }
    for (uint32_t i = 0; i < s->n_required; i++)
        if (!term_valid(&s->required[i]))
            return false;
    for (uint32_t i = 0; i < s->n_preferred; i++)
        if (s->preferred[i].weight < 1 || s->preferred[i].weight > 100 ||
            !term_valid(&s->preferred[i].term))
            return false;
    for (uint32_t i = 0; i < s->n_tolerations; i++) {
        const struct gs_toleration *t = &s->tolerations[i];
        if (t->op > GS_TOL_EXISTS || t->effect > GS_TAINT_NO_EXECUTE)
            return false;
        if (t->op == GS_TOL_EQUAL && (!t->key || !*t->key))
            return false;
    }
    return true;
}

static bool spec_empty(const struct gs_filter_spec *s)
{
    return !s || (s->n_node_selector == 0 && s->n_required == 0 && s->n_preferred == 0 &&
                  s->n_tolerations == 0);
}

/* ---- deep copy into one block ------------------------------------------------------------- */

struct bump {
    char *p;
    size_t used, cap;
};

static void *bump_take(struct bump *b, size_t n, size_t align)
{
    size_t at = (b->used + align - 1) & ~(align - 1);
    if (!b->p) { /* sizing pass */
        b->used = at + n;
        return NULL;
    }
    b->used = at + n;
    return b->p + at;
}

static const char *bump_str(struct bump *b, const char *s)
{
    size_t n = s ? strlen(s) + 1 : 1;
    char *d = bump_take(b, n, 1);
    if (d) {
        if (s)
            memcpy(d, s, n);
        else
            d[0] = '\0';
    }
    return d;
}

static void copy_term(struct bump *b, const struct gs_sel_term *src, struct gs_sel_term *dst)
{
    struct gs_sel_expr *ex = bump_take(b, src->n_exprs * sizeof(*ex), _Alignof(struct gs_sel_expr));
    for (uint32_t e = 0; e < src->n_exprs; e++) {
        const struct gs_sel_expr *x = &src->exprs[e];
        const char **vals = bump_take(b, x->n_values * sizeof(*vals), _Alignof(const char *));
        const char *key = bump_str(b, x->key);
        for (uint32_t v = 0; v < x->n_values; v++) {
            const char *val = bump_str(b, x->values[v]);
            if (vals)
                vals[v] = val;
        }
        if (ex)
            ex[e] = (struct gs_sel_expr){key, x->op, x->field, vals, x->n_values};
    }
    if (dst)
        *dst = (struct gs_sel_term){ex, src->n_exprs};
}

/* Lays the copy out in b (a sizing pass when b->p is NULL); fills *out on the real pass. */
static void copy_spec(struct bump *b, const struct gs_filter_spec *s, struct gs_filter_spec *out)
{
    const char **sel = bump_take(b, s->n_node_selector * sizeof(*sel), _Alignof(const char *));
    for (uint32_t i = 0; i < s->n_node_selector; i++) {
        const char *v = bump_str(b, s->node_selector[i]);
        if (sel)
            sel[i] = v;
    }
    struct gs_sel_term *req =
        bump_take(b, s->n_required * sizeof(*req), _Alignof(struct gs_sel_term));
    for (uint32_t i = 0; i < s->n_required; i++)
        copy_term(b, &s->required[i], req ? &req[i] : NULL);
    struct gs_pref_term *pref =
        bump_take(b, s->n_preferred * sizeof(*pref), _Alignof(struct gs_pref_term));
    for (uint32_t i = 0; i < s->n_preferred; i++) {
        if (pref)
            pref[i].weight = s->preferred[i].weight;
        copy_term(b, &s->preferred[i].term, pref ? &pref[i].term : NULL);
    }
    struct gs_toleration *tol =
        bump_take(b, s->n_tolerations * sizeof(*tol), _Alignof(struct gs_toleration));
    for (uint32_t i = 0; i < s->n_tolerations; i++) {
        const struct gs_toleration *t = &s->tolerations[i];
        const char *key = bump_str(b, t->key);
        const char *val = bump_str(b, t->value);
        if (tol)
            tol[i] = (struct gs_toleration){key, t->op, val, t->effect};
    }
    if (out)
        *out = (struct gs_filter_spec){sel,  s->n_node_selector, req, s->n_required,
                                       pref, s->n_preferred,     tol, s->n_tolerations};
}

/* ---- matching ----------------------------------------------------------------------------- */

static bool expr_match(const struct gs_node *n, const struct gs_sel_expr *x)
{
    const char *v = x->field ? n->name : gs_node_label(n, x->key);
    bool any = false;
    int64_t have, want;
    switch (x->op) {
    case GS_SEL_IN:
    case GS_SEL_NOT_IN:
        for (uint32_t k = 0; v && k < x->n_values && !any; k++)
            any = strcmp(v, x->values[k]) == 0;
        return x->op == GS_SEL_IN ? any : !any;
    case GS_SEL_EXISTS:
        return v != NULL;
    case GS_SEL_DOES_NOT_EXIST:
        return v == NULL;
    default:
        if (!parse_i64(v, &have) || !parse_i64(x->values[0], &want))
            return false;
        return x->op == GS_SEL_GT ? have > want : have < want;
    }
}

static bool term_match(const struct gs_node *n, const struct gs_sel_term *t)
{
    if (t->n_exprs == 0)
        return false; /* an empty term matches nothing (Kubernetes) */
    for (uint32_t e = 0; e < t->n_exprs; e++)
        if (!expr_match(n, &t->exprs[e]))
            return false;
    return true;
}

static bool affinity_match(const struct gs_node *n, const struct gs_filter_spec *s)
{
    for (uint32_t i = 0; i < s->n_node_selector; i++) {
        const char *kv = s->node_selector[i];
        const char *eq = strchr(kv, '=');
        size_t klen = (size_t)(eq - kv);
        bool found = false;
        for (uint32_t l = 0; l < n->label_count && !found; l++)
            found = strncmp(n->labels[l], kv, klen + 1) == 0 && strcmp(n->labels[l], kv) == 0;
        if (!found)
            return false;
    }
    if (s->n_required == 0)
        return true;
    for (uint32_t i = 0; i < s->n_required; i++)
        if (term_match(n, &s->required[i]))
            return true;
    return false;
}

static bool tolerates(const struct gs_filter_spec *s, const char *key, const char *value,
                      uint8_t effect)
{
    for (uint32_t i = 0; i < s->n_tolerations; i++) {
        const struct gs_toleration *t = &s->tolerations[i];
        if (t->effect && t->effect != effect)
            continue;
        if (t->key && *t->key && strcmp(t->key, key) != 0)
            continue;
        if (t->op == GS_TOL_EXISTS || strcmp(t->value ? t->value : "", value) == 0)
            return true;
    }
    return false;
}

static enum gs_filter_verdict judge(const struct filter_class *fc, const struct gs_node *n,
                                    const struct gs_taint **taint)
{
    if (!n->present)
        return GS_FILTER_ABSENT;
    if (n->unschedulable && !fc->tolerates_cordon)
        return GS_FILTER_UNSCHEDULABLE;
    for (uint32_t t = 0; t < n->taint_count; t++) {
        const struct gs_taint *tt = &n->taints[t];
        if (tt->effect == GS_TAINT_PREFER_NO_SCHEDULE)
            continue;
        if (!tolerates(&fc->spec, tt->key, tt->value, tt->effect)) {
            if (taint)
                *taint = tt;
            return GS_FILTER_TAINT;
        }
    }
    return affinity_match(n, &fc->spec) ? GS_FILTER_PASS : GS_FILTER_AFFINITY;
}

bool gs__node_has_prefer_taint(const struct gs_node *n)
{
    for (uint32_t t = 0; n->present && t < n->taint_count; t++)
        if (n->taints[t].effect == GS_TAINT_PREFER_NO_SCHEDULE)
            return true;
    return false;
}

/* ---- the class table ---------------------------------------------------------------------- */

/* Sets or clears bit i; returns whether it changed. */
static bool set_bit(uint64_t *set, uint32_t i, bool on)
{
    uint64_t was = set[i / 64];
    if (on)
        set[i / 64] |= UINT64_C(1) << (i % 64);
    else
        set[i / 64] &= ~(UINT64_C(1) << (i % 64));
    return set[i / 64] != was;
}

static void class_fill(struct gs_cluster *c, struct filter_class *fc)
{
    memset(fc->nodes, 0, (size_t)c->ft.words_cap * sizeof(uint64_t));
    for (uint32_t i = 0; i < c->nodes_len; i++)
        (void)set_bit(fc->nodes, i, judge(fc, &c->nodes[i], NULL) == GS_FILTER_PASS);
}

static void class_clear(struct filter_class *fc)
{
    gs__free(fc->blob);
    gs__free(fc->key);
    gs__free(fc->nodes);
    memset(fc, 0, sizeof(*fc));
}

static int slots_rebuild(struct filter_table *ft, uint32_t cap)
{
    uint32_t *slots = gs__calloc(cap, sizeof(*slots));
    if (!slots)
        return GS_ENOMEM;
    for (uint32_t id = 1; id < ft->len; id++) {
        if (!ft->cls[id].hash)
            continue;
        uint32_t j = (uint32_t)ft->cls[id].hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = id + 1;
    }
    gs__free(ft->slots);
    ft->slots = slots;
    ft->slots_cap = cap;
    return GS_OK;
}

int gs__filter_init(struct gs_cluster *c)
{
    struct filter_table *ft = &c->ft;
    memset(ft, 0, sizeof(*ft));
    ft->cls = gs__calloc(16, sizeof(*ft->cls));
    if (!ft->cls)
        return GS_ENOMEM;
    ft->cap = 16;
    ft->len = 1;
    ft->live = 1;
    ft->pin_free = NO_PIN;
    ft->cls[0].hash = 1; /* the default class: empty spec, never in the hash table */
    ft->cls[0].refs = 1;
    if (slots_rebuild(ft, 64) != GS_OK) {
        gs__free(ft->cls);
        return GS_ENOMEM;
    }
    return GS_OK;
}

void gs__filter_fini(struct gs_cluster *c)
{
    struct filter_table *ft = &c->ft;
    for (uint32_t id = 0; id < ft->len; id++)
        class_clear(&ft->cls[id]);
    gs__free(ft->cls);
    gs__free(ft->slots);
    gs__free(ft->pins);
    gs__free(ft->node_pins);
    memset(ft, 0, sizeof(*ft));
}

int gs__filter_reserve(struct gs_cluster *c, uint32_t nodes_cap)
{
    struct filter_table *ft = &c->ft;
    if (nodes_cap > ft->node_pins_cap) {
        uint32_t *np = gs__realloc(ft->node_pins, (size_t)nodes_cap * sizeof(*np));
        if (!np)
            return GS_ENOMEM;
        for (uint32_t i = ft->node_pins_cap; i < nodes_cap; i++)
            np[i] = NO_PIN;
        ft->node_pins = np;
        ft->node_pins_cap = nodes_cap;
    }
    uint32_t words = (nodes_cap + 63) / 64;
    if (words <= ft->words_cap)
        return GS_OK;
    for (uint32_t id = 0; id < ft->len; id++) {
        struct filter_class *fc = &ft->cls[id];
        if (!fc->hash)
            continue;
        uint64_t *set = gs__realloc(fc->nodes, (size_t)words * sizeof(*set));
        if (!set)
            return GS_ENOMEM; /* the classes already grown keep their larger sets */
        memset(set + ft->words_cap, 0, (size_t)(words - ft->words_cap) * sizeof(*set));
        fc->nodes = set;
    }
    ft->words_cap = words;
    return GS_OK;
}

void gs__filter_node_changed(struct gs_cluster *c, uint32_t i, bool had_prefer)
{
    struct filter_table *ft = &c->ft;
    const struct gs_node *n = &c->nodes[i];
    bool has_prefer = gs__node_has_prefer_taint(n);
    ft->prefer_tainted += (uint32_t)has_prefer - (uint32_t)had_prefer;
    bool changed = false;
    for (uint32_t id = 0; id < ft->len; id++) {
        struct filter_class *fc = &ft->cls[id];
        if (fc->hash)
            changed |= set_bit(fc->nodes, i, judge(fc, n, NULL) == GS_FILTER_PASS);
    }
    if (changed)
        ft->gen++;
}

uint64_t gs_filter_gen(const struct gs_cluster *c)
{
    return c->ft.gen;
}

static int32_t find_class(const struct filter_table *ft, const uint8_t *key, size_t len, uint64_t h)
{
    for (uint32_t j = (uint32_t)h & (ft->slots_cap - 1);; j = (j + 1) & (ft->slots_cap - 1)) {
        uint32_t v = ft->slots[j];
        if (!v)
            return -1;
        const struct filter_class *fc = &ft->cls[v - 1];
        if (fc->hash == h && fc->key_len == len && memcmp(fc->key, key, len) == 0)
            return (int32_t)(v - 1);
    }
}

/* A free table entry: a new one, else the least recently released cached class. */
static int take_entry(struct gs_cluster *c, uint32_t *id, bool *recycled)
{
    struct filter_table *ft = &c->ft;
    *recycled = false;
    for (uint32_t k = 1; k < ft->len; k++) {
        if (!ft->cls[k].hash) {
            *id = k;
            return GS_OK;
        }
    }
    if (ft->len < GS_FILTER_CLASSES_MAX) {
        if (ft->len == ft->cap) {
            struct filter_class *cls = gs__realloc(ft->cls, (size_t)ft->cap * 2 * sizeof(*cls));
            if (!cls)
                return GS_ENOMEM;
            memset(cls + ft->cap, 0, (size_t)ft->cap * sizeof(*cls));
            ft->cls = cls;
            ft->cap *= 2;
        }
        *id = ft->len;
        return GS_OK;
    }
    uint32_t best = 0;
    for (uint32_t k = 1; k < ft->len; k++)
        if (ft->cls[k].refs == 0 &&
            (best == 0 || ft->cls[k].released_seq < ft->cls[best].released_seq))
            best = k;
    if (best == 0)
        return GS_ELIMIT;
    *id = best;
    *recycled = true;
    return GS_OK;
}

/* ---- pinned filters ----------------------------------------------------------------------- */

/* The node a spec pins, or NULL: required affinity of exactly one term holding exactly one
 * expression, matchFields metadata.name In [x] or kubernetes.io/hostname In [x]. */
static const char *pin_target(const struct gs_filter_spec *s, bool *by_label)
{
    if (s->n_required != 1 || s->required[0].n_exprs != 1)
        return NULL;
    const struct gs_sel_expr *x = &s->required[0].exprs[0];
    if (x->op != GS_SEL_IN || x->n_values != 1 || !x->values[0] || !*x->values[0])
        return NULL;
    *by_label = !x->field;
    return strcmp(x->key, x->field ? FIELD_NAME : HOSTNAME_LABEL) == 0 ? x->values[0] : NULL;
}

static bool label_is(const struct gs_node *n, const char *key, const char *value)
{
    const char *v = gs_node_label(n, key);
    return v && strcmp(v, value) == 0;
}

/* Interns spec as a pin of `node`: the pin of an equal base on the same node is shared. */
static int intern_pin(struct gs_cluster *c, const struct gs_filter_spec *spec, uint32_t node,
                      bool by_label, uint32_t *out)
{
    struct filter_table *ft = &c->ft;
    struct gs_filter_spec rest = *spec;
    rest.required = NULL;
    rest.n_required = 0;
    uint32_t base;
    int err = gs_filter_intern(c, &rest, &base); /* no pin in it; one reference, kept by a pin */
    if (err)
        return err;
    uint32_t inc = c->nodes[node].incarnation;
    for (uint32_t k = ft->node_pins[node]; k != NO_PIN; k = ft->pins[k].next) {
        struct filter_pin *p = &ft->pins[k];
        if (p->base == base && p->incarnation == inc && p->by_label == by_label) {
            p->refs++;
            gs_filter_release(c, base); /* the pin holds its own */
            *out = GS_FILTER_PINNED | k;
            return GS_OK;
        }
    }
    uint32_t k = ft->pin_free;
    if (k == NO_PIN) {
        if (ft->pins_len == ~GS_FILTER_PINNED) {
            gs_filter_release(c, base);
            return GS_ELIMIT;
        }
        if (ft->pins_len == ft->pins_cap) {
            uint32_t cap = ft->pins_cap ? ft->pins_cap * 2 : 64;
            struct filter_pin *np = gs__realloc(ft->pins, (size_t)cap * sizeof(*np));
            if (!np) {
                gs_filter_release(c, base);
                return GS_ENOMEM;
            }
            ft->pins = np;
            ft->pins_cap = cap;
        }
        k = ft->pins_len++;
    } else {
        ft->pin_free = ft->pins[k].next;
    }
    ft->pins[k] = (struct filter_pin){node, inc, base, 1, ft->node_pins[node], by_label};
    ft->node_pins[node] = k;
    ft->pins_live++;
    *out = GS_FILTER_PINNED | k;
    return GS_OK;
}

static const struct filter_pin *pin_at(const struct gs_cluster *c, uint32_t cls)
{
    uint32_t k = cls & ~GS_FILTER_PINNED;
    return (cls & GS_FILTER_PINNED) && k < c->ft.pins_len && c->ft.pins[k].refs ? &c->ft.pins[k]
                                                                                : NULL;
}

/* Whether node slot i is the node pin p names (the same node, still carrying the label). */
static bool pin_is(const struct gs_cluster *c, const struct filter_pin *p, uint32_t i)
{
    if (i != p->node || i >= c->nodes_len)
        return false;
    const struct gs_node *n = &c->nodes[i];
    return n->present && n->incarnation == p->incarnation &&
           (!p->by_label || label_is(n, HOSTNAME_LABEL, n->name));
}

static void pin_release(struct gs_cluster *c, uint32_t k)
{
    struct filter_table *ft = &c->ft;
    struct filter_pin *p = &ft->pins[k];
    if (--p->refs > 0)
        return;
    for (uint32_t *link = &ft->node_pins[p->node]; *link != NO_PIN; link = &ft->pins[*link].next) {
        if (*link == k) {
            *link = p->next;
            break;
        }
    }
    uint32_t base = p->base;
    p->next = ft->pin_free;
    ft->pin_free = k;
    ft->pins_live--;
    gs_filter_release(c, base);
}

bool gs_filter_pinned(const struct gs_cluster *c, uint32_t cls, uint32_t *node)
{
    const struct filter_pin *p = pin_at(c, cls);
    if (p && node)
        *node = p->node;
    return p != NULL;
}

uint32_t gs_filter_base(const struct gs_cluster *c, uint32_t cls)
{
    const struct filter_pin *p = pin_at(c, cls);
    return p ? p->base : cls;
}

uint32_t gs_filter_pin_count(const struct gs_cluster *c)
{
    return c->ft.pins_live;
}

int gs_filter_intern(struct gs_cluster *c, const struct gs_filter_spec *spec, uint32_t *out)
{
    struct filter_table *ft = &c->ft;
    if (spec_empty(spec)) {
        *out = GS_FILTER_DEFAULT;
        return GS_OK;
    }
    if (!spec_valid(spec))
        return GS_EINVAL;
    bool by_label = false;
    const char *target = pin_target(spec, &by_label);
    if (target) {
        int node = gs_cluster_find_node(c, target);
        /* The named node must exist now and, for the label, carry it; otherwise (a node still
         * to come, a hostname label that is not the node's name) an ordinary class keeps the
         * set exact as nodes change. */
        if (node >= 0 && (uint32_t)node < ft->node_pins_cap &&
            (!by_label || label_is(&c->nodes[node], HOSTNAME_LABEL, target)))
            return intern_pin(c, spec, (uint32_t)node, by_label, out);
    }
    struct keybuf kb = {0};
    kb_spec(&kb, spec);
    if (kb.oom) {
        gs__free(kb.p);
        return GS_ENOMEM;
    }
    uint64_t h = hash_bytes(kb.p, kb.len);
    int32_t found = find_class(ft, kb.p, kb.len, h);
    if (found >= 0) {
        gs__free(kb.p);
        struct filter_class *fc = &ft->cls[found];
        if (fc->refs++ == 0)
            ft->live++;
        *out = (uint32_t)found;
        return GS_OK;
    }
    uint32_t id;
    bool recycled;
    int err = take_entry(c, &id, &recycled);
    struct bump sz = {0};
    copy_spec(&sz, spec, NULL);
    char *blob = err ? NULL : gs__malloc(sz.used ? sz.used : 1);
    uint64_t *nodes = err ? NULL : gs__calloc(ft->words_cap ? ft->words_cap : 1, sizeof(uint64_t));
    if (!err && (!blob || !nodes))
        err = GS_ENOMEM;
    if (!err && (ft->len + 1) * 2 > ft->slots_cap)
        err = slots_rebuild(ft, ft->slots_cap * 2);
    if (err) {
        gs__free(blob);
        gs__free(nodes);
        gs__free(kb.p);
        return err;
    }
    if (recycled)
        class_clear(&ft->cls[id]);
    struct filter_class *fc = &ft->cls[id];
    struct bump b = {blob, 0, sz.used};
    copy_spec(&b, spec, &fc->spec);
    fc->blob = blob;
    fc->key = kb.p;
    fc->key_len = kb.len;
    fc->hash = h;
    fc->refs = 1;
    fc->nodes = nodes;
    fc->tolerates_cordon = tolerates(&fc->spec, GS_TAINT_UNSCHEDULABLE, "", GS_TAINT_NO_SCHEDULE);
    if (id == ft->len)
        ft->len++;
    ft->live++;
    if (recycled) {
        err = slots_rebuild(ft, ft->slots_cap); /* drop the recycled key; may only fail on OOM */
        if (err) {
            class_clear(fc);
            ft->live--;
            return err;
        }
    } else {
        uint32_t j = (uint32_t)h & (ft->slots_cap - 1);
        while (ft->slots[j])
            j = (j + 1) & (ft->slots_cap - 1);
        ft->slots[j] = id + 1;
    }
    class_fill(c, fc);
    *out = id;
    return GS_OK;
}

void gs_filter_ref(struct gs_cluster *c, uint32_t cls)
{
    struct filter_table *ft = &c->ft;
    if (pin_at(c, cls)) {
        ft->pins[cls & ~GS_FILTER_PINNED].refs++;
        return;
    }
    if (cls == GS_FILTER_DEFAULT || cls >= ft->len || !ft->cls[cls].hash)
        return;
    if (ft->cls[cls].refs++ == 0)
        ft->live++;
}

void gs_filter_release(struct gs_cluster *c, uint32_t cls)
{
    struct filter_table *ft = &c->ft;
    if (pin_at(c, cls)) {
        pin_release(c, cls & ~GS_FILTER_PINNED);
        return;
    }
    if (cls == GS_FILTER_DEFAULT || cls >= ft->len || !ft->cls[cls].hash || !ft->cls[cls].refs)
        return;
    if (--ft->cls[cls].refs == 0) {
        ft->live--;
        ft->cls[cls].released_seq = ++ft->release_seq;
    }
}

uint32_t gs_filter_class_count(const struct gs_cluster *c)
{
    return c->ft.live;
}

static const struct filter_class *class_at(const struct gs_cluster *c, uint32_t cls)
{
    return cls < c->ft.len && c->ft.cls[cls].hash ? &c->ft.cls[cls] : NULL;
}

const uint64_t *gs_filter_nodes(const struct gs_cluster *c, uint32_t cls)
{
    const struct filter_class *fc = class_at(c, cls);
    return fc ? fc->nodes : NULL;
}

bool gs_filter_valid(const struct gs_cluster *c, uint32_t cls)
{
    return class_at(c, cls) || pin_at(c, cls);
}

bool gs_filter_pass(const struct gs_cluster *c, uint32_t cls, uint32_t i)
{
    const struct filter_pin *p = pin_at(c, cls);
    if (p)
        return pin_is(c, p, i) && gs_filter_pass(c, p->base, i);
    const struct filter_class *fc = class_at(c, cls);
    return fc && i < c->nodes_len && (fc->nodes[i / 64] >> (i % 64) & 1);
}

enum gs_filter_verdict gs_filter_check(const struct gs_cluster *c, uint32_t cls, uint32_t i,
                                       const struct gs_taint **taint)
{
    const struct filter_pin *p = pin_at(c, cls);
    if (p) {
        /* As the whole filter would: cordon and taints first (the rest of the filter), then
         * the affinity that names one node. */
        enum gs_filter_verdict v = gs_filter_check(c, p->base, i, taint);
        return v != GS_FILTER_PASS || pin_is(c, p, i) ? v : GS_FILTER_AFFINITY;
    }
    const struct filter_class *fc = class_at(c, cls);
    if (!fc || i >= c->nodes_len)
        return GS_FILTER_ABSENT;
    return judge(fc, &c->nodes[i], taint);
}

bool gs_filter_has_preferences(const struct gs_cluster *c, uint32_t cls)
{
    const struct filter_class *fc = class_at(c, gs_filter_base(c, cls));
    return fc && fc->spec.n_preferred > 0;
}

uint32_t gs_filter_prefer_tainted_nodes(const struct gs_cluster *c)
{
    return c->ft.prefer_tainted;
}

void gs_filter_raw_scores(const struct gs_cluster *c, uint32_t cls, uint32_t i, int64_t *affinity,
                          int64_t *taints)
{
    const struct filter_class *fc = class_at(c, gs_filter_base(c, cls));
    *affinity = *taints = 0;
    if (!fc || i >= c->nodes_len || !c->nodes[i].present)
        return;
    const struct gs_node *n = &c->nodes[i];
    for (uint32_t k = 0; k < fc->spec.n_preferred; k++)
        if (term_match(n, &fc->spec.preferred[k].term))
            *affinity += fc->spec.preferred[k].weight;
    for (uint32_t t = 0; t < n->taint_count; t++)
        if (n->taints[t].effect == GS_TAINT_PREFER_NO_SCHEDULE &&
            !tolerates(&fc->spec, n->taints[t].key, n->taints[t].value,
                       GS_TAINT_PREFER_NO_SCHEDULE))
            (*taints)++;
}
