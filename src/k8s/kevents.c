/*
 * The Event recorder of include/gpusched/kevents.h: a hash table of series slots, a POST for a
 * new Event and a merge patch of `series` for a repeat.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/kevents.h"

#include "gpusched/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096

struct slot {
    uint64_t key;       /* hash of ns/pod/reason; 0 = empty */
    int64_t first_ms;   /* when its Event was created (monotonic) */
    int64_t written_ms; /* when its Event was last written */
    uint32_t count;     /* occurrences in the series */
    uint32_t written;   /* the count last written */
    char ns[64];        /* the Event's namespace (a DNS label: at most 63) */
    char name[256];     /* the Event's name */
    char observed[80];  /* MicroTime of the last occurrence */
};

/* An Event create in flight (gs_kube_request_async_background): what its answer updates. */
struct pending {
    struct pending *prev, *next; /* the recorder's list, freed with it if never answered */
    struct gs_kevents *r;
    uint64_t key;    /* the slot's key when it was sent */
    size_t slot;     /* the slot */
    char reason[64]; /* the Event's reason, for gs_kevents_unanswered */
    char what[400];  /* "reason for pod=ns/name", for the log */
};

struct gs_kevents {
    struct gs_kube_client *c;
    struct pending *pending; /* creates in flight */
    char *controller, *instance;
    int64_t repeat_ms, series_ms;
    void (*log)(void *ud, const char *msg);
    void *log_ud;
    struct slot *slots; /* SLOTS entries */
    struct gs_kevents_stats st;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void micro_time(char *buf, size_t cap, const struct timespec *ts)
{
    struct tm tm;
    (void)gmtime_r(&ts->tv_sec, &tm);
    (void)snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* a separator, so "a" "bc" differs from "ab" "c" */
}

static void say(struct gs_kevents *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct gs_kevents *r, const char *fmt, ...)
{
    r->st.failures++;
    if (!r->log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->log(r->log_ud, msg);
}

int gs_kevents_new(struct gs_kube_client *c, const struct gs_kevents_opts *opts,
                   struct gs_kevents **out)
{
    if (!out)
        return GS_EINVAL;
    *out = NULL;
    if (!c || !opts || !opts->instance)
        return GS_EINVAL;
    struct gs_kevents *r = calloc(1, sizeof(*r));
    if (!r)
        return GS_ENOMEM;
    r->c = c;
    r->controller = strdup(opts->controller ? opts->controller : "gpusched");
    r->instance = strdup(opts->instance);
    r->repeat_ms = opts->repeat_ms > 0 ? opts->repeat_ms : 10000;
    r->series_ms = opts->series_ms > 0 ? opts->series_ms : 600000;
    r->log = opts->log;
    r->log_ud = opts->log_ud;
    r->slots = calloc(SLOTS, sizeof(*r->slots));
    if (!r->controller || !r->instance || !r->slots) {
        gs_kevents_free(r);
        return GS_ENOMEM;
    }
    *out = r;
    return GS_OK;
}

void gs_kevents_free(struct gs_kevents *r)
{
    if (!r)
        return;
    /* Creates the client dropped unanswered (it was freed first, as kevents.h asks). */
    while (r->pending) {
        struct pending *p = r->pending;
        r->pending = p->next;
        free(p);
    }
    free(r->controller);
    free(r->instance);
    free(r->slots);
    free(r);
}

/* Writes a slot's grown count as its Event's series. */
static void patch_series(struct gs_kevents *r, struct slot *e)
{
    char path[400];
    (void)snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events/%s", e->ns,
                   e->name);
    /* Only the series: the API keeps an Event's note immutable, so it stays the first one's. */
    json_t *body = json_pack("{s:{s:I,s:s}}", "series", "count", (json_int_t)e->count,
                             "lastObservedTime", e->observed);
    struct gs_kube_response resp;
    memset(&resp, 0, sizeof(resp));
    int err = body ? gs_kube_request(r->c, GS_KUBE_PATCH_MERGE, path, body, &resp) : GS_ENOMEM;
    if (err == GS_OK) {
        r->st.patched++;
    } else {
        say(r, "event %s/%s: series count %u not written: HTTP %ld %s", e->ns, e->name, e->count,
            resp.http_status, resp.message[0] ? resp.message : gs_strerror(err));
        if (err == GS_ENOENT)
            e->key = 0; /* the Event is gone (expired): the next occurrence makes a new one */
    }
    e->written = e->count;
    e->written_ms = mono_ms();
    gs_kube_response_fini(&resp);
    json_decref(body);
}

void gs_kevents_flush(struct gs_kevents *r, bool force)
{
    if (!r)
        return;
    int64_t now = mono_ms();
    for (size_t i = 0; i < SLOTS; i++) {
        struct slot *e = &r->slots[i];
        if (e->key && e->count > e->written && (force || now - e->written_ms >= r->repeat_ms))
            patch_series(r, e);
    }
}

/* The answer to an Event create: counted, or logged and its slot emptied so that the next
 * occurrence makes a new Event. */
static void created(void *ud, int err, struct gs_kube_response *resp)
{
    struct pending *p = ud;
    struct gs_kevents *r = p->r;
    if (p->prev)
        p->prev->next = p->next;
    else
        r->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    if (err == GS_OK) {
        r->st.created++;
    } else {
        say(r, "event %s not written: HTTP %ld %s: %s", p->what, resp->http_status, resp->reason,
            resp->message[0] ? resp->message : gs_strerror(err));
        if (r->slots[p->slot].key == p->key)
            r->slots[p->slot].key = 0;
    }
    free(p);
}

void gs_kevents_post(struct gs_kevents *r, const char *ns, const char *pod, const char *uid,
                     const char *type, const char *reason, const char *action, const char *note)
{
    if (!r || !ns || !pod || !type || !reason || !action)
        return;
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    char now[80], gen[216], path[400], notebuf[1024];
    micro_time(now, sizeof(now), &ts);
    uint64_t k = fnv1a(fnv1a(fnv1a(14695981039346656037ULL, ns), pod), reason);
    if (k == 0)
        k = 1;
    int64_t mono = mono_ms();
    struct slot *e = &r->slots[k % SLOTS];
    if (e->key == k && mono - e->first_ms < r->series_ms) {
        e->count++;
        r->st.counted++;
        (void)snprintf(e->observed, sizeof(e->observed), "%s", now);
        if (mono - e->written_ms >= r->repeat_ms)
            patch_series(r, e);
        return; /* else written by gs_kevents_flush */
    }
    /* client-go's name: the pod's, a dot, the time in hex ns (generateName may not end in a
     * dot); within a name's 253 characters. */
    (void)snprintf(gen, sizeof(gen), "%.200s.%llx", pod,
                   (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    (void)snprintf(notebuf, sizeof(notebuf), "%s", note ? note : ""); /* the API's limit: 1 kB */
    (void)snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events", ns);
    json_t *body = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s}}", "apiVersion",
        "events.k8s.io/v1", "kind", "Event", "metadata", "name", gen, "namespace", ns, "eventTime",
        now, "reportingController", r->controller, "reportingInstance", r->instance, "action",
        action, "reason", reason, "type", type, "note", notebuf, "regarding", "apiVersion", "v1",
        "kind", "Pod", "namespace", ns, "name", pod, "uid", uid ? uid : "");
    /* Sent without waiting (a scheduler posts one per bind): the slot is taken now, so repeats
     * count into it while the create is in flight; a refused create empties it again. */
    struct pending *p = body ? calloc(1, sizeof(*p)) : NULL;
    int err = p ? GS_OK : GS_ENOMEM;
    if (p) {
        p->r = r;
        p->key = k;
        p->slot = (size_t)(e - r->slots);
        (void)snprintf(p->reason, sizeof(p->reason), "%s", reason);
        (void)snprintf(p->what, sizeof(p->what), "%s for pod=%s/%s", reason, ns, pod);
        err = gs_kube_request_async_background(r->c, GS_KUBE_POST, path, body, created, p);
    }
    if (err == GS_OK) {
        p->next = r->pending;
        if (r->pending)
            r->pending->prev = p;
        r->pending = p;
        *e =
            (struct slot){.key = k, .first_ms = mono, .written_ms = mono, .count = 1, .written = 1};
        (void)snprintf(e->ns, sizeof(e->ns), "%s", ns);
        (void)snprintf(e->name, sizeof(e->name), "%s", gen);
        (void)snprintf(e->observed, sizeof(e->observed), "%s", now);
    } else {
        free(p);
        say(r, "event %s for pod=%s/%s not sent: %s", reason, ns, pod, gs_strerror(err));
    }
    json_decref(body);
}

uint64_t gs_kevents_unanswered(const struct gs_kevents *r, const char *reason)
{
    uint64_t n = 0;
    for (const struct pending *p = r ? r->pending : NULL; p; p = p->next)
        if (!reason || strncmp(p->reason, reason, sizeof(p->reason) - 1) == 0)
            n++;
    return n;
}

void gs_kevents_get_stats(const struct gs_kevents *r, struct gs_kevents_stats *st)
{
    if (r && st)
        *st = r->st;
}
