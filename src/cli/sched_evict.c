/*
 * The eviction mark a leader leaves on its victims and how a follower reads it (sched_evict.h).
 * The annotation is the record: the Eviction API rewrites the DisruptionTarget condition
 * (reason EvictionByEvictionAPI) as it evicts, so the condition's own reason and message may be
 * gone by the time a watcher sees the pod leave; the condition is read only without it (a
 * victim marked by an older gpusched).
 */
#include "sched_evict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/usage_report.h"

char *gs__evict_note(const char *word, const char *by, const char *by_uid, int64_t at_ms)
{
    json_t *o =
        json_pack("{s:s,s:I}", "reason", word ? word : "preemption", "atMs", (json_int_t)at_ms);
    if (!o)
        return NULL;
    if (by)
        (void)json_object_set_new(o, "by", json_string(by));
    if (by_uid && by_uid[0])
        (void)json_object_set_new(o, "byUid", json_string(by_uid));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static bool end_of_word(const char *w, enum gs_usage_end *end)
{
    static const struct {
        const char *word;
        enum gs_usage_end end;
    } words[] = {{"preemption", GS_USAGE_END_PREEMPTED},
                 {"reclaim", GS_USAGE_END_RECLAIMED},
                 {"gang", GS_USAGE_END_GANG},
                 {"node-lost", GS_USAGE_END_NODE_LOST}};
    for (size_t i = 0; w && i < sizeof(words) / sizeof(words[0]); i++)
        if (strcmp(w, words[i].word) == 0) {
            *end = words[i].end;
            return true;
        }
    return false;
}

static bool from_annotation(const char *text, struct gs__evict_seen *out)
{
    json_t *o = json_loads(text, 0, NULL);
    enum gs_usage_end end;
    bool ok =
        json_is_object(o) && end_of_word(json_string_value(json_object_get(o, "reason")), &end);
    if (ok) {
        const char *uid = json_string_value(json_object_get(o, "byUid"));
        const json_t *at = json_object_get(o, "atMs");
        out->end = end;
        out->at_ms =
            json_is_integer(at) && json_integer_value(at) > 0 ? json_integer_value(at) : -1;
        (void)snprintf(out->by_uid, sizeof(out->by_uid), "%s", uid ? uid : "");
    }
    json_decref(o);
    return ok;
}

/* The "(uid U)" of a message, into out (cap bytes); "" when none. */
static void uid_of_message(const char *msg, char *out, size_t cap)
{
    out[0] = '\0';
    const char *u = strstr(msg, "(uid ");
    if (!u)
        return;
    u += 5;
    size_t n = strcspn(u, ") ");
    if (u[n] == ')' && n > 0 && n < cap)
        (void)snprintf(out, cap, "%.*s", (int)n, u);
}

bool gs__evict_of_pod(const json_t *pod, struct gs__evict_seen *out)
{
    const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
    const char *note = json_string_value(json_object_get(ann, GS__EVICTED_ANNOTATION));
    if (note && from_annotation(note, out))
        return true;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (!type || strcmp(type, "DisruptionTarget") != 0 || !st || strcmp(st, "True") != 0)
            continue;
        const char *reason = json_string_value(json_object_get(c, "reason"));
        const char *msg = json_string_value(json_object_get(c, "message"));
        const char *at = json_string_value(json_object_get(c, "lastTransitionTime"));
        struct gs__evict_seen e = {.at_ms = -1, .end = GS_USAGE_END_PREEMPTED};
        if (!reason)
            return false;
        if (strcmp(reason, "PreemptionByScheduler") == 0) {
            msg = msg ? msg : "";
            if (strstr(msg, ": reclaiming resources for "))
                e.end = GS_USAGE_END_RECLAIMED;
            else if (strstr(msg, ": gang ") && strstr(msg, "released whole"))
                e.end = GS_USAGE_END_GANG;
            else if (strstr(msg, ": node ") && strstr(msg, " is gone"))
                e.end = GS_USAGE_END_NODE_LOST;
            if (e.end == GS_USAGE_END_PREEMPTED || e.end == GS_USAGE_END_RECLAIMED)
                uid_of_message(msg, e.by_uid, sizeof(e.by_uid));
        } else if (strcmp(reason, "DeletionByTaintManager") == 0 ||
                   strcmp(reason, "DeletionByPodGC") == 0) {
            e.end = GS_USAGE_END_NODE_LOST;
        } else {
            return false;
        }
        int64_t ms;
        if (at && gs_usage_parse_time(at, &ms) == GS_OK)
            e.at_ms = ms;
        *out = e;
        return true;
    }
    return false;
}
