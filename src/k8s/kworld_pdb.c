/*
 * PodDisruptionBudgets into the tenancy engine (kworld_pdb.h has the contract): the label
 * selector read and matched against pod labels, the budgets' allowances, and the pods each
 * budget covers kept up to date as budgets and pods change.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "kworld_pdb.h"
#include "kjson.h"

int gs__kpdb_init(struct gs__kpdbs *s)
{
    s->pdbs = json_object();
    s->pods = json_object();
    if (!s->pdbs || !s->pods) {
        gs__kpdb_fini(s);
        return GS_ENOMEM;
    }
    return GS_OK;
}

void gs__kpdb_fini(struct gs__kpdbs *s)
{
    json_decref(s->pdbs);
    json_decref(s->pods);
    s->pdbs = s->pods = NULL;
}

GS_PRINTF(3, 4) static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && cap)
        (void)vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return GS_EINVAL;
}

/* Checks a LabelSelector (metav1): matchLabels strings, matchExpressions with a string key, an
 * operator In, NotIn, Exists or DoesNotExist, and string values (non-empty for In and NotIn,
 * none for the others, as the API validates). GS_OK or GS_EINVAL with the field named. */
static int sel_check(const json_t *sel, const char *who, char *err, size_t cap)
{
    if (!sel || json_is_null(sel))
        return GS_OK;
    if (!json_is_object(sel))
        return fail(err, cap, "%s: spec.selector is not a mapping", who);
    const json_t *ml = json_object_get(sel, "matchLabels");
    const char *k;
    const json_t *v;
    if (ml && !json_is_null(ml) && !json_is_object(ml))
        return fail(err, cap, "%s: spec.selector.matchLabels is not a mapping", who);
    json_object_foreach((json_t *)ml, k, v)
    {
        if (!json_is_string(v))
            return fail(err, cap, "%s: spec.selector.matchLabels.%s is not a string", who, k);
    }
    const json_t *me = json_object_get(sel, "matchExpressions");
    if (me && !json_is_null(me) && !json_is_array(me))
        return fail(err, cap, "%s: spec.selector.matchExpressions is not a list", who);
    for (size_t i = 0; i < json_array_size(me); i++) {
        const json_t *x = json_array_get(me, i);
        const char *key = jstr(x, "key"), *op = jstr(x, "operator");
        const json_t *vals = json_object_get(x, "values");
        if (!key)
            return fail(err, cap, "%s: spec.selector.matchExpressions[%zu].key is missing", who, i);
        bool known = op && (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0 ||
                            strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0);
        if (!known)
            return fail(err, cap,
                        "%s: spec.selector.matchExpressions[%zu].operator \"%s\" is not In, "
                        "NotIn, Exists or DoesNotExist",
                        who, i, op ? op : "");
        bool set_op = strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0;
        if (vals && !json_is_null(vals) && !json_is_array(vals))
            return fail(err, cap, "%s: spec.selector.matchExpressions[%zu].values is not a list",
                        who, i);
        if (set_op != (json_array_size(vals) > 0))
            return fail(err, cap, "%s: spec.selector.matchExpressions[%zu].values must be %s", who,
                        i,
                        set_op ? "non-empty for In and NotIn"
                               : "empty for Exists and "
                                 "DoesNotExist");
        for (size_t j = 0; j < json_array_size(vals); j++)
            if (!json_is_string(json_array_get(vals, j)))
                return fail(err, cap,
                            "%s: spec.selector.matchExpressions[%zu].values[%zu] is not a string",
                            who, i, j);
    }
    return GS_OK;
}

/* Whether a checked selector matches a pod's labels. Nil or empty matches nothing, and a pod
 * without labels matches nothing (kube-scheduler's rule for preemption). */
static bool sel_matches(const json_t *sel, const json_t *labels)
{
    const json_t *ml = json_object_get(sel, "matchLabels");
    const json_t *me = json_object_get(sel, "matchExpressions");
    if (json_object_size(ml) == 0 && json_array_size(me) == 0)
        return false;
    if (json_object_size(labels) == 0)
        return false;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)ml, k, v)
    {
        const char *have = jstr(labels, k);
        if (!have || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    for (size_t i = 0; i < json_array_size(me); i++) {
        const json_t *x = json_array_get(me, i);
        const char *op = jstr(x, "operator");
        const char *have = jstr(labels, jstr(x, "key"));
        bool in = false;
        const json_t *vals = json_object_get(x, "values");
        for (size_t j = 0; have && j < json_array_size(vals); j++)
            in |= strcmp(have, json_string_value(json_array_get(vals, j))) == 0;
        bool ok = strcmp(op, "In") == 0       ? in
                  : strcmp(op, "NotIn") == 0  ? !in
                  : strcmp(op, "Exists") == 0 ? have != NULL
                                              : have == NULL;
        if (!ok)
            return false;
    }
    return true;
}

uint32_t gs__kpdb_match(const struct gs__kpdbs *s, const char *ns, const char *name,
                        const json_t *labels, uint32_t out[GS_POD_BUDGETS_MAX])
{
    memset(out, 0, GS_POD_BUDGETS_MAX * sizeof(*out));
    uint32_t n = 0;
    const char *k;
    const json_t *v;
    json_object_foreach(s->pdbs, k, v)
    {
        if (strcmp(jstr(v, "ns"), ns) != 0 || !sel_matches(json_object_get(v, "sel"), labels))
            continue;
        if (name && json_object_get(json_object_get(v, "dis"), name))
            continue; /* its eviction was admitted: it takes nothing more of this budget */
        if (n < GS_POD_BUDGETS_MAX)
            out[n] = (uint32_t)json_integer_value(json_object_get(v, "id"));
        n++;
    }
    return n;
}

/* Gives one tracked pod its budgets again; false when the engine forgot it. */
static bool refresh_pod(const struct gs__kpdbs *s, struct gs_engine *e, const json_t *rec)
{
    uint32_t pod;
    if (gs_engine_pod_resolve(e, (uint64_t)json_integer_value(json_object_get(rec, "h")), &pod))
        return false;
    uint32_t ids[GS_POD_BUDGETS_MAX];
    uint32_t n =
        gs__kpdb_match(s, jstr(rec, "ns"), jstr(rec, "name"), json_object_get(rec, "labels"), ids);
    (void)gs_engine_set_pod_budgets(e, pod, ids, n < GS_POD_BUDGETS_MAX ? n : GS_POD_BUDGETS_MAX);
    return true;
}

/* Gives every tracked pod of namespace ns its budgets again, dropping forgotten ones. */
static void refresh_ns(struct gs__kpdbs *s, struct gs_engine *e, const char *ns)
{
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(s->pods, tmp, k, v)
    {
        if (strcmp(jstr(v, "ns"), ns) == 0 && !refresh_pod(s, e, v))
            (void)json_object_del(s->pods, k);
    }
}

int gs__kpdb_apply(struct gs__kpdbs *s, struct gs_engine *e, enum gs_kchange change,
                   const json_t *obj, char *err, size_t cap)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *name = jstr(md, "name");
    const char *ns = jstr(md, "namespace") ? jstr(md, "namespace") : "default";
    if (!name || !*name)
        return fail(err, cap, "a PodDisruptionBudget without metadata.name");
    char key[512];
    (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
    char who[560];
    (void)snprintf(who, sizeof(who), "PodDisruptionBudget %s", key);
    json_t *old = json_object_get(s->pdbs, key);
    if (change == GS_KDELETED) {
        if (!old)
            return GS_OK;
        (void)json_object_del(s->pdbs, key);
        refresh_ns(s, e, ns);
        return GS_OK;
    }
    const json_t *sel = json_object_get(json_object_get(obj, "spec"), "selector");
    int rc = sel_check(sel, who, err, cap);
    if (rc)
        return rc;
    const json_t *da = json_object_get(json_object_get(obj, "status"), "disruptionsAllowed");
    json_int_t allowed = 0;
    if (da && !json_is_null(da)) {
        if (!json_is_integer(da) || json_integer_value(da) < 0 ||
            json_integer_value(da) > INT32_MAX)
            return fail(err, cap, "%s: status.disruptionsAllowed is not a whole number >= 0", who);
        allowed = json_integer_value(da);
    }
    int64_t found = gs_engine_find_budget(e, key);
    uint32_t id = found > 0 ? (uint32_t)found : 0;
    if (id) {
        if ((rc = gs_engine_set_budget_allowed(e, id, (int32_t)allowed)) != GS_OK)
            return rc;
    } else if ((rc = gs_engine_add_budget(e, key, (int32_t)allowed, &id)) != GS_OK) {
        return rc;
    }
    json_t *selc = json_is_object(sel) ? json_deep_copy(sel) : json_object();
    /* status.disruptedPods: pods whose eviction the API server admitted and that are not gone
     * yet; kube-scheduler counts them against the budget no more. */
    const json_t *dp = json_object_get(json_object_get(obj, "status"), "disruptedPods");
    if (dp && !json_is_null(dp) && !json_is_object(dp)) {
        json_decref(selc);
        return fail(err, cap, "%s: status.disruptedPods is not a mapping", who);
    }
    json_t *dis = json_is_object(dp) ? json_deep_copy(dp) : json_object();
    bool same = old && json_equal(json_object_get(old, "sel"), selc) &&
                json_equal(json_object_get(old, "dis"), dis);
    json_t *rec =
        json_pack("{s:s, s:o, s:o, s:I}", "ns", ns, "sel", selc, "dis", dis, "id", (json_int_t)id);
    if (!rec || json_object_set_new(s->pdbs, key, rec))
        return GS_ENOMEM;
    if (!same)
        refresh_ns(s, e, ns);
    return GS_OK;
}

int gs__kpdb_track(struct gs__kpdbs *s, struct gs_engine *e, const char *key, const char *ns,
                   const json_t *labels, uint32_t pod)
{
    json_int_t h = (json_int_t)gs_engine_pod_handle(e, pod);
    json_t *lab = json_is_object(labels) ? json_incref((json_t *)labels) : json_object();
    const char *slash = strchr(key, '/');
    json_t *rec = json_pack("{s:s, s:s, s:o, s:I}", "ns", ns, "name", slash ? slash + 1 : key,
                            "labels", lab, "h", h);
    if (!rec || json_object_set_new(s->pods, key, rec))
        return GS_ENOMEM;
    if (!refresh_pod(s, e, rec))
        (void)json_object_del(s->pods, key);
    return GS_OK;
}

void gs__kpdb_untrack(struct gs__kpdbs *s, const char *key)
{
    (void)json_object_del(s->pods, key);
}
