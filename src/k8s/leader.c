/*
 * Leader election on a coordination.k8s.io/v1 Lease (contract in include/gpusched/kube.h),
 * following client-go's tools/leaderelection tryAcquireOrRenew: read the Lease; create it when
 * absent; take it when its holder is empty, is us, or has not changed the record for its
 * leaseDurationSeconds as measured on our own monotonic clock from the moment we first saw that
 * resourceVersion; write it back with the resourceVersion read, so the API server's optimistic
 * concurrency (409 Conflict) picks one winner. Times written (acquireTime, renewTime) are wall
 * clock MicroTime for people reading the Lease; no decision reads them.
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"

struct gs_kube_leader {
    struct gs_kube_client *c;       /**< borrowed client */
    char *coll;                     /**< the namespace's leases collection path */
    char *path;                     /**< the Lease's path */
    char *name;                     /**< the Lease's name */
    char *ns;                       /**< the Lease's namespace */
    char *id;                       /**< our holderIdentity */
    int64_t lease_ms;               /**< lease duration we write */
    int64_t deadline_ms;            /**< renew deadline */
    int64_t retry_ms;               /**< retry period */
    int64_t next_ms;                /**< earliest next attempt */
    char observed_rv[64];           /**< resourceVersion of the record last read */
    int64_t observed_ms;            /**< when observed_rv was first seen (our clock) */
    char holder[256];               /**< holderIdentity last read */
    bool leader;                    /**< we hold it (and the deadline has not passed) */
    bool lost;                      /**< we held it and no longer do */
    struct gs_kube_leader_stats st; /**< counters */
};

static char *dup_s(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int gs_kube_leader_new(struct gs_kube_client *c, const struct gs_kube_leader_opts *opts,
                       struct gs_kube_leader **out)
{
    if (out)
        *out = NULL;
    if (!c || !opts || !out || !opts->namespace_ || !opts->name || !opts->identity ||
        !opts->namespace_[0] || !opts->name[0] || !opts->identity[0])
        return GS_EINVAL;
    int64_t lease = opts->lease_duration_ms ? opts->lease_duration_ms : 15000;
    int64_t deadline = opts->renew_deadline_ms ? opts->renew_deadline_ms : 10000;
    int64_t retry = opts->retry_period_ms ? opts->retry_period_ms : 2000;
    if (lease <= 0 || deadline <= 0 || retry <= 0 || deadline >= lease || retry >= deadline ||
        strlen(opts->identity) >= sizeof(((struct gs_kube_leader *)0)->holder))
        return GS_EINVAL;
    struct gs_kube_leader *l = calloc(1, sizeof(*l));
    if (!l)
        return GS_ENOMEM;
    l->c = c;
    l->lease_ms = lease;
    l->deadline_ms = deadline;
    l->retry_ms = retry;
    size_t n = strlen(opts->namespace_) + strlen(opts->name) + 64;
    l->coll = malloc(n);
    l->path = malloc(n);
    l->name = dup_s(opts->name);
    l->ns = dup_s(opts->namespace_);
    l->id = dup_s(opts->identity);
    if (!l->coll || !l->path || !l->name || !l->ns || !l->id) {
        gs_kube_leader_free(l);
        return GS_ENOMEM;
    }
    (void)snprintf(l->coll, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
                   opts->namespace_);
    (void)snprintf(l->path, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
                   opts->namespace_, opts->name);
    *out = l;
    return GS_OK;
}

void gs_kube_leader_free(struct gs_kube_leader *l)
{
    if (!l)
        return;
    free(l->coll);
    free(l->path);
    free(l->name);
    free(l->ns);
    free(l->id);
    free(l);
}

/* The wall clock as the API's MicroTime, "2026-12-01T21:41:43.123456Z". */
static void micro_time(char *buf, size_t cap)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

static void observe(struct gs_kube_leader *l, const json_t *lease, int64_t now_ms)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(lease, "metadata"), "resourceVersion"));
    if (rv && strcmp(rv, l->observed_rv) != 0) {
        (void)snprintf(l->observed_rv, sizeof(l->observed_rv), "%s", rv);
        l->observed_ms = now_ms;
    }
    const char *h =
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
    (void)snprintf(l->holder, sizeof(l->holder), "%s", h ? h : "");
}

/*
 * One tryAcquireOrRenew. Returns GS_OK when we hold the Lease after it, GS_EEXIST when another
 * live holder has it, GS_ECONFLICT when our write lost a race, or the request's error.
 */
static int try_acquire_or_renew(struct gs_kube_leader *l, int64_t now_ms)
{
    char now[80];
    micro_time(now, sizeof(now));
    json_int_t dur_s = (json_int_t)((l->lease_ms + 999) / 1000);
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    json_t *body = NULL;
    int rc = gs_kube_request(l->c, GS_KUBE_GET, l->path, NULL, &r);
    if (rc == GS_ENOENT) {
        gs_kube_response_fini(&r);
        body =
            json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:I,s:s,s:s,s:i}}", "apiVersion",
                      "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", l->name,
                      "namespace", l->ns, "spec", "holderIdentity", l->id, "leaseDurationSeconds",
                      dur_s, "acquireTime", now, "renewTime", now, "leaseTransitions", 0);
        rc = body ? gs_kube_request(l->c, GS_KUBE_POST, l->coll, body, &r) : GS_ENOMEM;
        if (rc == GS_EEXIST)
            rc = GS_ECONFLICT; /* another candidate created it first */
        goto wrote;
    }
    if (rc != GS_OK || !json_is_object(r.body)) {
        rc = rc ? rc : GS_EPARSE;
        goto out;
    }
    observe(l, r.body, now_ms);
    json_t *spec = json_object_get(r.body, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        if (!spec || json_object_set_new(r.body, "spec", spec) != 0) {
            rc = GS_ENOMEM;
            goto out;
        }
    }
    json_int_t their_s = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    if (their_s <= 0)
        their_s = dur_s;
    bool ours = strcmp(l->holder, l->id) == 0;
    if (l->holder[0] && !ours && now_ms < l->observed_ms + (int64_t)their_s * 1000) {
        rc = GS_EEXIST;
        goto out;
    }
    if (!ours) {
        json_int_t tr = json_integer_value(json_object_get(spec, "leaseTransitions"));
        /* An empty holder is a release: client-go counts the next holder as a transition too. */
        (void)json_object_set_new(spec, "leaseTransitions", json_integer(tr + 1));
        (void)json_object_set_new(spec, "acquireTime", json_string(now));
    }
    (void)json_object_set_new(spec, "holderIdentity", json_string(l->id));
    (void)json_object_set_new(spec, "leaseDurationSeconds", json_integer(dur_s));
    (void)json_object_set_new(spec, "renewTime", json_string(now));
    body = json_incref(r.body); /* metadata keeps the resourceVersion read */
    gs_kube_response_fini(&r);
    rc = gs_kube_request(l->c, GS_KUBE_PUT, l->path, body, &r);
wrote:
    if (rc == GS_OK && json_is_object(r.body))
        observe(l, r.body, now_ms);
out:
    gs_kube_response_fini(&r);
    json_decref(body);
    return rc;
}

int gs_kube_leader_step(struct gs_kube_leader *l, int64_t now_ms)
{
    if (!l)
        return GS_EINVAL;
    if (l->lost || now_ms < l->next_ms)
        return GS_OK;
    l->next_ms = now_ms + l->retry_ms;
    l->st.attempts++;
    int rc = try_acquire_or_renew(l, now_ms);
    if (rc == GS_ENOMEM)
        return rc;
    if (rc == GS_OK) {
        if (l->leader) {
            l->st.renewals++;
            if (now_ms - l->st.last_renew_ms > l->st.max_renew_gap_ms)
                l->st.max_renew_gap_ms = now_ms - l->st.last_renew_ms;
        } else {
            l->st.acquisitions++;
        }
        l->leader = true;
        l->st.last_renew_ms = now_ms;
        return GS_OK;
    }
    l->st.failures++;
    if (l->leader && (rc == GS_EEXIST || now_ms - l->st.last_renew_ms >= l->deadline_ms)) {
        l->leader = false; /* taken over, or out of time */
        l->lost = true;
    }
    return GS_OK;
}

bool gs_kube_leader_is_leader(struct gs_kube_leader *l, int64_t now_ms)
{
    if (!l || !l->leader)
        return false;
    if (now_ms - l->st.last_renew_ms >= l->deadline_ms) {
        l->leader = false;
        l->lost = true;
    }
    return l->leader;
}

bool gs_kube_leader_lost(const struct gs_kube_leader *l)
{
    return l && l->lost;
}

int gs_kube_leader_release(struct gs_kube_leader *l, int64_t now_ms)
{
    if (!l || !l->leader)
        return GS_OK;
    l->leader = false;
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    int rc = gs_kube_request(l->c, GS_KUBE_GET, l->path, NULL, &r);
    if (rc != GS_OK || !json_is_object(r.body))
        goto out;
    observe(l, r.body, now_ms);
    json_t *spec = json_object_get(r.body, "spec");
    if (!json_is_object(spec) || strcmp(l->holder, l->id) != 0)
        goto out; /* someone else holds it already */
    char now[80];
    micro_time(now, sizeof(now));
    (void)json_object_set_new(spec, "holderIdentity", json_string(""));
    (void)json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
    (void)json_object_set_new(spec, "renewTime", json_string(now));
    json_t *body = json_incref(r.body);
    gs_kube_response_fini(&r);
    rc = gs_kube_request(l->c, GS_KUBE_PUT, l->path, body, &r);
    json_decref(body);
out:
    gs_kube_response_fini(&r);
    return rc;
}

const char *gs_kube_leader_holder(const struct gs_kube_leader *l)
{
    return l ? l->holder : "";
}

void gs_kube_leader_get_stats(const struct gs_kube_leader *l, struct gs_kube_leader_stats *st)
{
    if (l && st)
        *st = l->st;
}
