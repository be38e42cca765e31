/*
 * The dynamic MIG annotations (include/gpusched/kmigplan.h): writers and strict readers. The
 * readers take any text: every member is checked for presence, type and range, unknown ones are
 * refused, and the first fault is one sentence naming its field.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */

#include "gpusched/kmigplan.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"

/** Highest GPU index a plan may name (the agent's GS_GPU_MAX is 64). */
#define PLAN_GPU_MAX 63
/** Highest start slot (a MIG GPU has 8 memory slices). */
#define PLAN_START_MAX 7
/** Largest accepted annotation text, bytes. */
#define PLAN_TEXT_MAX 16384

static int GS_PRINTF(3, 4) bad(char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

static json_t *inst_array(const struct gs_kmig_inst *in, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < n && i < GS_MIG_INSTANCES_MAX; i++) {
        if (json_array_append_new(a, json_pack("{s:s,s:I}", "profile", in[i].profile, "start",
                                               (json_int_t)in[i].start)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

char *gs_kmig_plan_write(const struct gs_kmig_plan *p)
{
    if (!p)
        return NULL;
    json_t *o =
        json_pack("{s:s,s:I,s:s,s:o?,s:o?,s:s,s:s}", "id", p->id, "gpu", (json_int_t)p->gpu, "uuid",
                  p->uuid, "destroy", inst_array(p->destroy, p->n_destroy), "create",
                  inst_array(p->create, p->n_create), "pod", p->pod, "created", p->created);
    if (!o || !json_object_get(o, "destroy") || !json_object_get(o, "create")) {
        json_decref(o);
        return NULL;
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

char *gs_kmig_status_write(const struct gs_kmig_status *s)
{
    if (!s)
        return NULL;
    json_t *o = json_pack("{s:s,s:s,s:s}", "id", s->id, "state", s->done ? "done" : "failed",
                          "reason", s->reason);
    if (!o)
        return NULL;
    char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return t;
}

/* The text parsed as one JSON object; NULL with err filled. */
static json_t *load_object(const char *text, const char *what, char *err, size_t cap)
{
    if (!text) {
        (void)bad(err, cap, "%s: no text", what);
        return NULL;
    }
    size_t len = strnlen(text, PLAN_TEXT_MAX + 1);
    if (len > PLAN_TEXT_MAX) {
        (void)bad(err, cap, "%s: longer than %d bytes", what, PLAN_TEXT_MAX);
        return NULL;
    }
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        (void)bad(err, cap, "%s: not JSON: %s (column %d)", what, je.text, je.column);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        (void)bad(err, cap, "%s: not a JSON object", what);
        return NULL;
    }
    return o;
}

/* Refuses members of o not in keys (NULL-terminated). */
static int only_keys(const json_t *o, const char *const *keys, const char *where, char *err,
                     size_t cap)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        bool known = false;
        for (size_t i = 0; keys[i] && !known; i++)
            known = strcmp(k, keys[i]) == 0;
        if (!known)
            return bad(err, cap, "%s%s%s: unknown member", where, *where ? "." : "", k);
    }
    return GS_OK;
}

/* A required string member into dst[dcap]; empty allowed only with allow_empty. */
static int get_str(const json_t *o, const char *key, const char *where, bool allow_empty, char *dst,
                   size_t dcap, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    const char *dot = *where ? "." : "";
    if (!v)
        return bad(err, cap, "%s%s%s: missing", where, dot, key);
    if (!json_is_string(v))
        return bad(err, cap, "%s%s%s: not a string", where, dot, key);
    size_t n = json_string_length(v);
    if (n == 0 && !allow_empty)
        return bad(err, cap, "%s%s%s: empty", where, dot, key);
    if (n >= dcap)
        return bad(err, cap, "%s%s%s: longer than %zu bytes", where, dot, key, dcap - 1);
    if (strlen(json_string_value(v)) != n)
        return bad(err, cap, "%s%s%s: holds a NUL character", where, dot, key);
    memcpy(dst, json_string_value(v), n + 1);
    return GS_OK;
}

static int get_uint(const json_t *o, const char *key, const char *where, uint32_t hi, uint32_t *out,
                    char *err, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    const char *dot = *where ? "." : "";
    if (!v)
        return bad(err, cap, "%s%s%s: missing", where, dot, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)hi)
        return bad(err, cap, "%s%s%s: not an integer in 0..%u", where, dot, key, hi);
    *out = (uint32_t)json_integer_value(v);
    return GS_OK;
}

static int get_insts(const json_t *o, const char *key, struct gs_kmig_inst *out, uint32_t *n,
                     char *err, size_t cap)
{
    static const char *const inst_keys[] = {"profile", "start", NULL};
    const json_t *a = json_object_get(o, key);
    if (!a)
        return bad(err, cap, "%s: missing", key);
    if (!json_is_array(a))
        return bad(err, cap, "%s: not an array", key);
    if (json_array_size(a) > GS_MIG_INSTANCES_MAX)
        return bad(err, cap, "%s: more than %d instances", key, GS_MIG_INSTANCES_MAX);
    *n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        char where[48];
        (void)snprintf(where, sizeof(where), "%s[%zu]", key, i);
        if (!json_is_object(e))
            return bad(err, cap, "%s: not an object", where);
        int rc = only_keys(e, inst_keys, where, err, cap);
        if (rc == GS_OK)
            rc = get_str(e, "profile", where, false, out[i].profile, sizeof(out[i].profile), err,
                         cap);
        if (rc == GS_OK)
            rc = get_uint(e, "start", where, PLAN_START_MAX, &out[i].start, err, cap);
        if (rc != GS_OK)
            return rc;
        (*n)++;
    }
    return GS_OK;
}

int gs_kmig_plan_read(const char *text, struct gs_kmig_plan *out, char *err, size_t cap)
{
    static const char *const keys[] = {"id",     "gpu", "uuid",    "destroy",
                                       "create", "pod", "created", NULL};
    if (!out)
        return bad(err, cap, "mig-plan: no output");
    json_t *o = load_object(text, "mig-plan", err, cap);
    if (!o)
        return GS_EINVAL;
    struct gs_kmig_plan p;
    memset(&p, 0, sizeof(p));
    int rc = only_keys(o, keys, "", err, cap);
    if (rc == GS_OK)
        rc = get_str(o, "id", "", false, p.id, sizeof(p.id), err, cap);
    if (rc == GS_OK)
        rc = get_uint(o, "gpu", "", PLAN_GPU_MAX, &p.gpu, err, cap);
    if (rc == GS_OK)
        rc = get_str(o, "uuid", "", true, p.uuid, sizeof(p.uuid), err, cap);
    if (rc == GS_OK)
        rc = get_insts(o, "destroy", p.destroy, &p.n_destroy, err, cap);
    if (rc == GS_OK)
        rc = get_insts(o, "create", p.create, &p.n_create, err, cap);
    if (rc == GS_OK && p.n_create == 0)
        rc = bad(err, cap, "create: empty (a plan creates at least one instance)");
    if (rc == GS_OK)
        rc = get_str(o, "pod", "", false, p.pod, sizeof(p.pod), err, cap);
    if (rc == GS_OK && !strchr(p.pod, '/'))
        rc = bad(err, cap, "pod: not \"namespace/name\"");
    if (rc == GS_OK)
        rc = get_str(o, "created", "", false, p.created, sizeof(p.created), err, cap);
    json_decref(o);
    if (rc == GS_OK)
        *out = p;
    return rc;
}

int gs_kmig_status_read(const char *text, struct gs_kmig_status *out, char *err, size_t cap)
{
    static const char *const keys[] = {"id", "state", "reason", NULL};
    if (!out)
        return bad(err, cap, "mig-plan-status: no output");
    json_t *o = load_object(text, "mig-plan-status", err, cap);
    if (!o)
        return GS_EINVAL;
    struct gs_kmig_status s;
    memset(&s, 0, sizeof(s));
    char state[16];
    int rc = only_keys(o, keys, "", err, cap);
    if (rc == GS_OK)
        rc = get_str(o, "id", "", false, s.id, sizeof(s.id), err, cap);
    if (rc == GS_OK)
        rc = get_str(o, "state", "", false, state, sizeof(state), err, cap);
    if (rc == GS_OK && strcmp(state, "done") != 0 && strcmp(state, "failed") != 0)
        rc = bad(err, cap, "state: not \"done\" or \"failed\"");
    s.done = rc == GS_OK && strcmp(state, "done") == 0;
    if (rc == GS_OK && json_object_get(o, "reason")) {
        const json_t *r = json_object_get(o, "reason");
        if (!json_is_string(r))
            rc = bad(err, cap, "reason: not a string");
        else
            (void)snprintf(s.reason, sizeof(s.reason), "%s", json_string_value(r));
    }
    json_decref(o);
    if (rc == GS_OK)
        *out = s;
    return rc;
}
