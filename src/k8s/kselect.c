/*
 * What a pod writes about where it may run (nodeSelector, required and preferred node affinity,
 * tolerations) into the core's filter spec (filter.h), for kworld's one translation of a pod;
 * and the pod object with the nodes it must avoid written into its affinity. Split from
 * kworld.c; contracts in kselect.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "kselect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "kjson.h"

static int sel_op(const char *s)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    for (int i = 0; s && i < 6; i++)
        if (strcmp(s, ops[i]) == 0)
            return i;
    return -1;
}

/* Counts the expressions and values of a list of NodeSelectorTerms. */
static void count_terms(const json_t *terms, bool pref, size_t *n_expr, size_t *n_val)
{
    for (size_t i = 0; i < json_array_size(terms); i++) {
        const json_t *t = json_array_get(terms, i);
        if (pref)
            t = json_object_get(t, "preference");
        const char *lists[2] = {"matchExpressions", "matchFields"};
        for (int l = 0; l < 2; l++) {
            const json_t *ex = json_object_get(t, lists[l]);
            *n_expr += json_array_size(ex);
            for (size_t k = 0; k < json_array_size(ex); k++)
                *n_val += json_array_size(json_object_get(json_array_get(ex, k), "values"));
        }
    }
}

static int fill_term(const json_t *t, struct gs_sel_term *out, struct gs_sel_expr *exprs,
                     size_t *ne, const char **values, size_t *nv)
{
    out->exprs = &exprs[*ne];
    out->n_exprs = 0;
    const char *lists[2] = {"matchExpressions", "matchFields"};
    for (int l = 0; l < 2; l++) {
        const json_t *ex = json_object_get(t, lists[l]);
        for (size_t k = 0; k < json_array_size(ex); k++) {
            const json_t *x = json_array_get(ex, k);
            int op = sel_op(jstr(x, "operator"));
            if (op < 0 || !jstr(x, "key"))
                return -1;
            struct gs_sel_expr *e = &exprs[(*ne)++];
            e->key = jstr(x, "key");
            e->op = (uint8_t)op;
            e->field = l == 1;
            e->values = &values[*nv];
            e->n_values = 0;
            const json_t *vals = json_object_get(x, "values");
            for (size_t v = 0; v < json_array_size(vals); v++) {
                const char *s = json_string_value(json_array_get(vals, v));
                if (!s)
                    return -1;
                values[(*nv)++] = s;
                e->n_values++;
            }
            out->n_exprs++;
        }
    }
    return 0;
}

int gs__kfilter_read(struct gs__kfilter *t, const json_t *spec)
{
    const json_t *ns = json_object_get(spec, "nodeSelector");
    const json_t *na = jpath(json_object_get(spec, "affinity"), "nodeAffinity", NULL);
    const json_t *req = jpath(json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution"),
                              "nodeSelectorTerms", NULL);
    const json_t *pref = json_object_get(na, "preferredDuringSchedulingIgnoredDuringExecution");
    const json_t *tol = json_object_get(spec, "tolerations");
    size_t n_expr = 0, n_val = 0;
    count_terms(req, false, &n_expr, &n_val);
    count_terms(pref, true, &n_expr, &n_val);
    size_t nsel = json_object_size(ns), nreq = json_array_size(req), npref = json_array_size(pref);
    size_t ntol = json_array_size(tol);
    t->selector = calloc(nsel + 1, sizeof(*t->selector) * 2);
    t->req_terms = calloc(nreq + 1, sizeof(*t->req_terms));
    t->pref_terms = calloc(npref + 1, sizeof(*t->pref_terms));
    t->exprs = calloc(n_expr + 1, sizeof(*t->exprs));
    t->values = calloc(n_val + 1, sizeof(*t->values));
    t->tols = calloc(ntol + 1, sizeof(*t->tols));
    if (!t->selector || !t->req_terms || !t->pref_terms || !t->exprs || !t->values || !t->tols)
        return GS_ENOMEM;
    /* nodeSelector entries as "key=value": built into one block after the pointers. */
    size_t bytes = 0;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)ns, key, val) bytes +=
        strlen(key) + strlen(json_string_value(val) ? json_string_value(val) : "") + 2;
    char *blk = bytes ? malloc(bytes) : NULL;
    if (bytes && !blk)
        return GS_ENOMEM;
    t->sel_block = blk;
    uint32_t k = 0;
    char *at = blk;
    json_object_foreach((json_t *)ns, key, val)
    {
        const char *v = json_string_value(val) ? json_string_value(val) : "";
        int n = sprintf(at, "%s=%s", key, v);
        t->selector[k++] = at;
        at += n + 1;
    }
    t->f.node_selector = t->selector;
    t->f.n_node_selector = k;
    size_t ne = 0, nv = 0;
    for (size_t i = 0; i < nreq; i++)
        if (fill_term(json_array_get(req, i), &t->req_terms[i], t->exprs, &ne, t->values, &nv))
            return GS_EINVAL;
    t->f.required = t->req_terms;
    t->f.n_required = (uint32_t)nreq;
    for (size_t i = 0; i < npref; i++) {
        const json_t *p = json_array_get(pref, i);
        t->pref_terms[i].weight = (int32_t)json_integer_value(json_object_get(p, "weight"));
        if (fill_term(json_object_get(p, "preference"), &t->pref_terms[i].term, t->exprs, &ne,
                      t->values, &nv))
            return GS_EINVAL;
    }
    t->f.preferred = t->pref_terms;
    t->f.n_preferred = (uint32_t)npref;
    for (size_t i = 0; i < ntol; i++) {
        const json_t *x = json_array_get(tol, i);
        const char *op = jstr(x, "operator"), *eff = jstr(x, "effect");
        struct gs_toleration *o = &t->tols[i];
        o->key = jstr(x, "key");
        o->op = op && strcmp(op, "Exists") == 0 ? GS_TOL_EXISTS : GS_TOL_EQUAL;
        if (op && strcmp(op, "Exists") != 0 && strcmp(op, "Equal") != 0)
            return GS_EINVAL;
        o->value = jstr(x, "value");
        o->effect = !eff || !*eff                          ? 0
                    : strcmp(eff, "NoSchedule") == 0       ? GS_TAINT_NO_SCHEDULE
                    : strcmp(eff, "PreferNoSchedule") == 0 ? GS_TAINT_PREFER_NO_SCHEDULE
                    : strcmp(eff, "NoExecute") == 0        ? GS_TAINT_NO_EXECUTE
                                                           : 255;
        if (o->effect == 255)
            return GS_EINVAL;
    }
    t->f.tolerations = t->tols;
    t->f.n_tolerations = (uint32_t)ntol;
    return GS_OK;
}

void gs__kfilter_fini(struct gs__kfilter *t)
{
    free(t->selector);
    free(t->req_terms);
    free(t->sel_block);
    free(t->pref_terms);
    free(t->exprs);
    free(t->values);
    free(t->tols);
    memset(t, 0, sizeof(*t));
}

/*
 * The pod object with its avoided nodes (gs_kworld_avoid_node) written into its required node
 * affinity as `matchFields metadata.name NotIn [node]` entries ANDed into every term (or one term
 * of its own when there are none), so the one translation below sees them. A new reference, or NULL
 * when out of memory.
 */
json_t *gs__kpod_with_avoided(const json_t *obj, const json_t *nodes)
{
    json_t *o = json_deep_copy(obj);
    json_t *spec = json_object_get(o, "spec");
    if (!o || !json_is_object(spec)) {
        json_decref(o);
        return NULL;
    }
    json_t *aff = json_object_get(spec, "affinity");
    if (!json_is_object(aff)) {
        aff = json_object();
        json_object_set_new(spec, "affinity", aff);
    }
    json_t *na = json_object_get(aff, "nodeAffinity");
    if (!json_is_object(na)) {
        na = json_object();
        json_object_set_new(aff, "nodeAffinity", na);
    }
    json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!json_is_object(req)) {
        req = json_object();
        json_object_set_new(na, "requiredDuringSchedulingIgnoredDuringExecution", req);
    }
    json_t *terms = json_object_get(req, "nodeSelectorTerms");
    if (!json_is_array(terms) || json_array_size(terms) == 0) {
        terms = json_array();
        json_array_append_new(terms, json_object());
        json_object_set_new(req, "nodeSelectorTerms", terms);
    }
    for (size_t i = 0; i < json_array_size(terms); i++) {
        json_t *t = json_array_get(terms, i);
        json_t *mf = json_object_get(t, "matchFields");
        if (!json_is_array(mf)) {
            mf = json_array();
            json_object_set_new(t, "matchFields", mf);
        }
        /* One expression per node: the API allows a single value for a field's NotIn. */
        for (size_t n = 0; n < json_array_size(nodes); n++)
            json_array_append_new(mf,
                                  json_pack("{s:s,s:s,s:[O]}", "key", "metadata.name", "operator",
                                            "NotIn", "values", json_array_get(nodes, n)));
    }
    if (!aff || !na || !req || !terms) {
        json_decref(o);
        return NULL;
    }
    return o;
}
