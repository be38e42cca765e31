/*
 * Queue objects that change while the scheduler runs (kworld_queue.h): updates in place,
 * deletes, and one owner per queue name among the Queue kinds.
 */
#define _POSIX_C_SOURCE 200809L

#include "kworld_queue.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "kjson.h"

int gs__kqueue_init(struct gs__kqueues *s, void (*on_warning)(void *ctx, const char *msg),
                    void *ctx)
{
    s->groups = json_object();
    s->warned = json_object();
    s->on_warning = on_warning;
    s->ctx = ctx;
    return s->groups && s->warned ? GS_OK : GS_ENOMEM;
}

void gs__kqueue_fini(struct gs__kqueues *s)
{
    json_decref(s->groups);
    json_decref(s->warned);
    s->groups = s->warned = NULL;
}

GS_PRINTF(2, 3) static void warn(const struct gs__kqueues *s, const char *fmt, ...)
{
    if (!s->on_warning)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    s->on_warning(s->ctx, msg);
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

/* The API group of an apiVersion ("scheduling.run.ai/v2" -> "scheduling.run.ai"), in buf. */
static const char *group_of(const char *api, char *buf, size_t cap)
{
    const char *slash = api ? strchr(api, '/') : NULL;
    size_t n = slash ? (size_t)(slash - api) : 0; /* "v1": the core group, "" */
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, api, n);
    buf[n] = '\0';
    return buf;
}

bool gs__kqueue_other_kind(struct gs__kqueues *s, const char *name, const char *api)
{
    if (!name)
        return false;
    const char *had = json_string_value(json_object_get(s->groups, name));
    char g[256];
    if (!had || strcmp(had, group_of(api, g, sizeof(g))) == 0)
        return false;
    char key[512];
    (void)snprintf(key, sizeof(key), "%s\x1f%s", name, g);
    if (json_object_get(s->warned, key))
        return true;
    (void)json_object_set_new(s->warned, key, json_true());
    warn(s,
         "Queue %s of %s is ignored: the Queue %s of %s made that queue, and one name names one "
         "queue (rename one of them)",
         name, *g ? g : "no API group", name, had);
    return true;
}

int gs__kqueue_own(struct gs__kqueues *s, const char *name, const char *api)
{
    char g[256];
    return json_object_set_new(s->groups, name, json_string(group_of(api, g, sizeof(g))))
               ? GS_ENOMEM
               : GS_OK;
}

int gs__kqueue_update(struct gs__kqueues *s, struct gs_engine *e, json_t *queues, uint32_t id,
                      struct gs_queue_spec *q, const char *parent, const char *api, char *err,
                      size_t cap)
{
    struct gs_queue_info qi;
    if (gs_engine_queue_info(e, id, &qi) != GS_OK)
        return fail(err, cap, "Queue %s: not a queue of the engine", q->name);
    if (q->parent != qi.parent) {
        struct gs_queue_info pi;
        const char *old =
            qi.parent != GS_QUEUE_ROOT && gs_engine_queue_info(e, qi.parent, &pi) == GS_OK
                ? pi.name
                : "(none)";
        warn(s,
             "Queue %s: spec.parentQueue changed from %s to %s; the queue stays under %s (a "
             "queue is not moved while the scheduler runs: restart it to move the queue)",
             q->name, old, parent && *parent ? parent : "(none)", old);
        q->parent = qi.parent;
    }
    int rc = gs_engine_update_queue(e, id, q);
    if (rc == GS_ENOMEM)
        return rc;
    if (rc)
        return fail(err, cap,
                    "Queue %s: the change is refused by the engine (%s): limits at least the "
                    "quota, children's quotas within the parent's; the queue keeps its previous "
                    "spec",
                    q->name, gs_strerror(rc));
    if (json_object_set_new(queues, q->name, json_integer(id)))
        return GS_ENOMEM;
    return gs__kqueue_own(s, q->name, api);
}

int gs__kqueue_delete(struct gs__kqueues *s, struct gs_engine *e, json_t *queues, const json_t *obj,
                      char *err, size_t cap)
{
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    const json_t *v = name ? json_object_get(queues, name) : NULL;
    if (!v)
        return GS_OK;
    const char *had = json_string_value(json_object_get(s->groups, name));
    char g[256];
    if (had && strcmp(had, group_of(jstr(obj, "apiVersion"), g, sizeof(g))) != 0)
        return GS_OK; /* the other kind's Queue of that name, ignored when it came */
    int rc = gs_engine_delete_queue(e, (uint32_t)json_integer_value(v));
    if (rc)
        return fail(err, cap,
                    "Queue %s: deleted while child queues name it as their parent; it keeps its "
                    "spec until they are deleted",
                    name);
    (void)json_object_del(s->groups, name);
    (void)json_object_del(queues, name);
    json_object_clear(s->warned); /* another kind may take the name now */
    return GS_OK;
}

int gs__kqueue_gang_changed(struct gs__kqueues *s, struct gs_engine *e, const char *key,
                            uint32_t gang, long long min, long long grace_s)
{
    struct gs_gang_info gi;
    int err = gs_engine_gang_info(e, gang, &gi);
    if (err)
        return err;
    if ((long long)gi.min_member != min &&
        gs_engine_set_gang_min_member(e, gang, (uint32_t)min) != GS_OK)
        warn(s,
             "PodGroup %s: spec.minMember %lld is not applied: its gang has started, and keeps "
             "min_member %u",
             key, min, gi.min_member);
    return gs_engine_set_gang_grace(e, gang, (int64_t)grace_s * 1000);
}
