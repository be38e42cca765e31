/*
 * The node agent's Kubernetes thread (internal contract in devplugin_int.h): it owns one API
 * client (include/gpusched/kube.h) with two informers, the agent's own Node (fieldSelector
 * metadata.name) and the pods bound to it (fieldSelector spec.nodeName), and runs
 * gs_kube_client_step in a loop of at most 200 ms per round.
 *
 * Why a thread: the client blocks (lists, PATCHes), and the agent's loop must answer kubelet
 * and push health within its 1 s bounds whatever the API server does. What the two share is
 * small and sits under one mutex: the inventory text to publish (the loop writes it), the
 * assignment table (this thread fills it, the loop's GetPreferredAllocation and Allocate read
 * it) and the names of every pod bound to the node (this thread fills it from the same watch,
 * the loop's metrics refresh reads it to name the per-pod GPU values; podnames.h).
 *
 * "Not more often than needed": the Node is PATCHed (merge patch of one annotation) only when
 * the Node as last seen, from the watch or a PATCH answer, carries other text than the
 * inventory: at start, after a health change, and when someone else changed or removed the
 * annotation. The agent may start before its Node exists; the Node's ADDED event then brings
 * the first PATCH. Failed PATCHes are retried after 1 s, doubling up to 30 s.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/kmigplan.h"
#include "gpusched/kube.h"
#include "gpusched/podnames.h"

#include "devplugin_int.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) || defined(__clang__)
#define KUBE_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KUBE_PRINTF(f, a)
#endif

/** Longest wait of one gs_kube_client_step, ms: the stop latency and the PATCH latency. */
#define STEP_MS 200
/** Most pod marks waiting to be written (kubelet admits pods one at a time). */
#define MARKS_MAX 64
/** Attempts to write one mark before it is dropped (the local table still has it). */
#define MARK_TRIES 3
/** First and longest wait after a failed PATCH, ms. */
#define PATCH_BACKOFF_MIN_MS 1000
#define PATCH_BACKOFF_MAX_MS 30000

/** A pod annotation to write: gpusched.io/allocated-gpus of ns/name. */
struct mark {
    char ns[64];    /**< namespace (a DNS label) */
    char name[254]; /**< name (a DNS subdomain) */
    uint32_t given; /**< GPUs handed out */
    uint32_t tries; /**< failed attempts so far */
};

struct gs__dp_kube {
    pthread_t thread;             /**< runs kube_main */
    bool started;                 /**< thread was created */
    atomic_int stop;              /**< set by gs__dp_kube_free */
    pthread_mutex_t mu;           /**< guards want, table, names, marks */
    char *want;                   /**< inventory to publish (owned); NULL before the first */
    struct gs_dp_assign *table;   /**< pods bound to the node that can be claimed */
    struct gs_podnames *names;    /**< every pod bound to the node, by UID (bounded) */
    bool said_names_full;         /**< the names table's limit was logged (under mu) */
    atomic_ulong patches;         /**< successful PATCHes */
    struct mark marks[MARKS_MAX]; /**< pod marks to write (under mu) */
    uint32_t n_marks;             /**< entries used */
    char *plan;                   /**< the Node's gpusched.io/mig-plan as last seen (under mu);
                                       NULL none */
    bool plan_new;                /**< plan not yet taken by the loop (under mu) */
    char *plan_status;            /**< gpusched.io/mig-plan-status to write (under mu); NULL */
    json_t *mig_used;             /**< pod uid -> ["GPU/profile@start", ...]: the MIG instances
                                       the assignments of the node's live pods name (under mu) */
    /* Owned by the thread: */
    struct gs_kube_client *client;
    struct gs_kube_informer *node_inf, *pod_inf;
    char node[256]; /**< the Node's name */
    bool node_seen; /**< the Node exists (as of the watch) */
    char *node_has; /**< the annotation's text on the Node as last seen (owned); NULL none */
    int64_t next_patch_ms;
    int64_t backoff_ms;
    char said_node[512]; /**< last node informer error logged */
    char said_pods[512]; /**< last pod informer error logged */
    gs_dp_log_fn log;
    void *log_ctx;
};

KUBE_PRINTF(2, 3)
static void klog(struct gs__dp_kube *k, const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (k->log != NULL)
        k->log(k->log_ctx, line);
    else
        (void)fprintf(stderr, "%s\n", line);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* Remembers the annotation text of a Node object (NULL when it has none). */
static void node_saw(struct gs__dp_kube *k, const json_t *node)
{
    const json_t *ann = json_object_get(json_object_get(node, "metadata"), "annotations");
    free(k->node_has);
    k->node_has = dup_or_null(json_string_value(json_object_get(ann, GS_DP_INVENTORY_ANNOTATION)));
}

static void on_node(void *ud, enum gs_kube_event_type type, json_t *obj)
{
    struct gs__dp_kube *k = ud;
    if (type == GS_KUBE_EVENT_ADDED || type == GS_KUBE_EVENT_MODIFIED) {
        if (!k->node_seen)
            klog(k, "kubernetes: node %s is there", k->node);
        k->node_seen = true;
        node_saw(k, obj);
        const json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
        const char *plan = json_string_value(json_object_get(ann, GS_KMIGPLAN_ANNOTATION));
        pthread_mutex_lock(&k->mu);
        if (plan == NULL) {
            free(k->plan);
            k->plan = NULL;
            k->plan_new = false;
        } else if (k->plan == NULL || strcmp(k->plan, plan) != 0) {
            free(k->plan);
            k->plan = strdup(plan);
            k->plan_new = k->plan != NULL;
        }
        pthread_mutex_unlock(&k->mu);
    } else if (type == GS_KUBE_EVENT_DELETED || type == GS_KUBE_EVENT_RELIST) {
        k->node_seen = false;
        free(k->node_has);
        k->node_has = NULL;
    }
}

/* The MIG instances a live pod's assignment names ("GPU/profile@start"), under uid; a pod that
 * ended or names none is forgotten. */
static void mig_used_update(struct gs__dp_kube *k, const json_t *pod)
{
    const json_t *md = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    if (uid == NULL)
        return;
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    const char *text = json_string_value(
        json_object_get(json_object_get(md, "annotations"), GS_DP_ASSIGNED_ANNOTATION));
    json_t *list = json_array();
    bool live = phase == NULL || (strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0);
    json_t *as = live && text != NULL ? json_loads(text, 0, NULL) : NULL;
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(as, "gpus"), i, g)
    {
        const json_t *mig = json_object_get(g, "mig");
        const char *prof = json_string_value(json_object_get(mig, "profile"));
        const json_t *st = json_object_get(mig, "start");
        const json_t *idx = json_object_get(g, "index");
        if (prof == NULL || !json_is_integer(st) || !json_is_integer(idx))
            continue;
        char key[96];
        (void)snprintf(key, sizeof key, "%lld/%.40s@%lld", (long long)json_integer_value(idx), prof,
                       (long long)json_integer_value(st));
        if (list != NULL)
            (void)json_array_append_new(list, json_string(key));
    }
    json_decref(as);
    if (list != NULL && json_array_size(list) > 0)
        (void)json_object_set_new(k->mig_used, uid, list);
    else {
        json_decref(list);
        (void)json_object_del(k->mig_used, uid);
    }
}

static void on_pod(void *ud, enum gs_kube_event_type type, json_t *obj)
{
    struct gs__dp_kube *k = ud;
    pthread_mutex_lock(&k->mu);
    if (type == GS_KUBE_EVENT_RELIST) {
        gs_dp_assign_clear(k->table);
        gs_podnames_clear(k->names);
        json_object_clear(k->mig_used);
    } else if (type == GS_KUBE_EVENT_DELETED) {
        const char *uid =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
        if (uid != NULL) {
            gs_dp_assign_remove(k->table, uid);
            gs_podnames_remove(k->names, uid);
            (void)json_object_del(k->mig_used, uid);
        }
    } else if (type == GS_KUBE_EVENT_ADDED || type == GS_KUBE_EVENT_MODIFIED) {
        mig_used_update(k, obj);
        char why[300];
        int rc = gs_dp_assign_update(k->table, obj, why, sizeof why);
        const json_t *meta = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        int nrc = gs_podnames_update(k->names, obj);
        if (nrc == GS_ELIMIT && !k->said_names_full)
            klog(k,
                 "kubernetes: more than %d pods on the node; pod %s/%s and later ones are "
                 "named by UID only in the metrics",
                 GS_PODNAMES_DEFAULT_MAX, ns ? ns : "?", name ? name : "?");
        k->said_names_full |= nrc == GS_ELIMIT;
        if (rc == GS_ENOMEM || nrc == GS_ENOMEM)
            klog(k, "kubernetes: out of memory reading pod %s/%s", ns ? ns : "?",
                 name ? name : "?");
        else if (why[0] != '\0' && type == GS_KUBE_EVENT_ADDED)
            klog(k, "kubernetes: pod %s/%s: %s; its GPUs follow kubelet", ns ? ns : "?",
                 name ? name : "?", why);
    }
    pthread_mutex_unlock(&k->mu);
}

static void maybe_patch(struct gs__dp_kube *k, int64_t now)
{
    if (!k->node_seen || now < k->next_patch_ms)
        return;
    pthread_mutex_lock(&k->mu);
    char *want = dup_or_null(k->want);
    pthread_mutex_unlock(&k->mu);
    if (want == NULL)
        return;
    if (k->node_has != NULL && strcmp(k->node_has, want) == 0) {
        free(want);
        return;
    }
    char path[300];
    (void)snprintf(path, sizeof path, "/api/v1/nodes/%s", k->node);
    json_t *body =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GS_DP_INVENTORY_ANNOTATION, want);
    struct gs_kube_response r;
    memset(&r, 0, sizeof r);
    int rc =
        body != NULL ? gs_kube_request(k->client, GS_KUBE_PATCH_MERGE, path, body, &r) : GS_ENOMEM;
    if (rc == GS_OK) {
        atomic_fetch_add(&k->patches, 1);
        if (r.body != NULL)
            node_saw(k, r.body);
        else {
            free(k->node_has);
            k->node_has = dup_or_null(want);
        }
        klog(k, "kubernetes: node %s: annotation %s written (%zu bytes)", k->node,
             GS_DP_INVENTORY_ANNOTATION, strlen(want));
        k->backoff_ms = PATCH_BACKOFF_MIN_MS;
    } else {
        klog(k, "kubernetes: node %s: PATCH failed: HTTP %ld %s: %s (retrying in %lld ms)", k->node,
             r.http_status, r.reason, r.message[0] ? r.message : gs_strerror(rc),
             (long long)k->backoff_ms);
        k->next_patch_ms = now + k->backoff_ms;
        k->backoff_ms *= 2;
        if (k->backoff_ms > PATCH_BACKOFF_MAX_MS)
            k->backoff_ms = PATCH_BACKOFF_MAX_MS;
        if (rc == GS_ENOENT) { /* gone since the watch said so: wait for it to come back */
            k->node_seen = false;
        }
    }
    gs_kube_response_fini(&r);
    json_decref(body);
    free(want);
}

/* Writes the waiting pod marks; a failed one is retried next round, MARK_TRIES times in all. */
static void write_marks(struct gs__dp_kube *k)
{
    for (;;) {
        pthread_mutex_lock(&k->mu);
        if (k->n_marks == 0) {
            pthread_mutex_unlock(&k->mu);
            return;
        }
        struct mark m = k->marks[0];
        k->marks[0] = k->marks[--k->n_marks];
        pthread_mutex_unlock(&k->mu);
        char path[400], val[16];
        (void)snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", m.ns, m.name);
        (void)snprintf(val, sizeof val, "%u", (unsigned)m.given);
        json_t *body =
            json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GS_DP_ALLOCATED_ANNOTATION, val);
        struct gs_kube_response r;
        memset(&r, 0, sizeof r);
        int rc = body != NULL ? gs_kube_request(k->client, GS_KUBE_PATCH_MERGE, path, body, &r)
                              : GS_ENOMEM;
        json_decref(body);
        if (rc == GS_OK || rc == GS_ENOENT) { /* written, or the pod is gone */
            gs_kube_response_fini(&r);
            continue;
        }
        klog(k, "kubernetes: pod %s/%s: annotation %s not written: HTTP %ld %s: %s%s", m.ns, m.name,
             GS_DP_ALLOCATED_ANNOTATION, r.http_status, r.reason,
             r.message[0] ? r.message : gs_strerror(rc),
             m.tries + 1 < MARK_TRIES ? " (retrying)" : " (given up)");
        gs_kube_response_fini(&r);
        if (++m.tries < MARK_TRIES) {
            pthread_mutex_lock(&k->mu);
            if (k->n_marks < MARKS_MAX)
                k->marks[k->n_marks++] = m;
            pthread_mutex_unlock(&k->mu);
        }
        return; /* the rest next round, after a step */
    }
}

/* Writes the outcome of a MIG plan on the Node (once; a failure is retried next round). */
static void write_plan_status(struct gs__dp_kube *k)
{
    if (!k->node_seen)
        return;
    pthread_mutex_lock(&k->mu);
    char *text = dup_or_null(k->plan_status);
    pthread_mutex_unlock(&k->mu);
    if (text == NULL)
        return;
    char path[300];
    (void)snprintf(path, sizeof path, "/api/v1/nodes/%s", k->node);
    json_t *body =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GS_KMIGPLAN_STATUS_ANNOTATION, text);
    struct gs_kube_response r;
    memset(&r, 0, sizeof r);
    int rc =
        body != NULL ? gs_kube_request(k->client, GS_KUBE_PATCH_MERGE, path, body, &r) : GS_ENOMEM;
    if (rc == GS_OK) {
        klog(k, "kubernetes: node %s: annotation %s written: %s", k->node,
             GS_KMIGPLAN_STATUS_ANNOTATION, text);
        pthread_mutex_lock(&k->mu);
        if (k->plan_status != NULL && strcmp(k->plan_status, text) == 0) {
            free(k->plan_status);
            k->plan_status = NULL;
        }
        pthread_mutex_unlock(&k->mu);
    } else {
        klog(k, "kubernetes: node %s: annotation %s not written: HTTP %ld %s (retrying)", k->node,
             GS_KMIGPLAN_STATUS_ANNOTATION, r.http_status,
             r.message[0] ? r.message : gs_strerror(rc));
    }
    gs_kube_response_fini(&r);
    json_decref(body);
    free(text);
}

/* Copies s without its digits: "after 7 ms" and "after 0 ms" are the same failure. */
static void shape_of(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s != '\0' && n + 1 < cap; s++)
        if (*s < '0' || *s > '9')
            out[n++] = *s;
    out[n] = '\0';
}

/*
 * Logs an informer's failure once per kind of text (digits aside: timings and resource
 * versions change between retries), so an API server that is down for an hour is a few lines.
 */
static void say_errors(struct gs__dp_kube *k, struct gs_kube_informer *inf, char *said, size_t cap)
{
    const char *e = gs_kube_informer_last_error(inf);
    if (e == NULL || e[0] == '\0')
        return;
    char shape[512];
    shape_of(e, shape, sizeof shape);
    if (strncmp(said, shape, cap - 1) == 0)
        return;
    (void)snprintf(said, cap, "%s", shape);
    klog(k, "kubernetes: %s", e);
}

static void *kube_main(void *arg)
{
    struct gs__dp_kube *k = arg;
    while (!atomic_load(&k->stop)) {
        int rc = gs_kube_client_step(k->client, STEP_MS);
        if (rc != GS_OK) {
            klog(k, "kubernetes: %s; the Kubernetes side stops", gs_strerror(rc));
            break;
        }
        say_errors(k, k->node_inf, k->said_node, sizeof k->said_node);
        say_errors(k, k->pod_inf, k->said_pods, sizeof k->said_pods);
        maybe_patch(k, mono_ms());
        write_marks(k);
        write_plan_status(k);
    }
    return NULL;
}

int gs__dp_kube_new(const struct gs_kube_config *cfg, const char *node, gs_dp_log_fn log,
                    void *log_ctx, struct gs__dp_kube **out)
{
    *out = NULL;
    if (cfg == NULL || node == NULL || node[0] == '\0' || strlen(node) >= 254)
        return GS_EINVAL;
    struct gs__dp_kube *k = calloc(1, sizeof *k);
    if (k == NULL)
        return GS_ENOMEM;
    pthread_mutex_init(&k->mu, NULL);
    atomic_init(&k->stop, 0);
    atomic_init(&k->patches, 0);
    k->log = log;
    k->log_ctx = log_ctx;
    k->backoff_ms = PATCH_BACKOFF_MIN_MS;
    (void)snprintf(k->node, sizeof k->node, "%s", node);
    k->mig_used = json_object();
    int rc = k->mig_used != NULL ? gs_dp_assign_new(&k->table) : GS_ENOMEM;
    if (rc == GS_OK)
        rc = gs_podnames_new(GS_PODNAMES_DEFAULT_MAX, &k->names);
    /* A node agent's traffic is small: two watches and a PATCH per health change. Requests
     * are bounded by 5 s, so that a hung API server delays a SIGTERM by at most that. */
    struct gs_kube_client_opts co = {.qps = 5,
                                     .burst = 10,
                                     .timeout_ms = 5000,
                                     .connect_timeout_ms = 5000,
                                     .user_agent = "gpusched-agent"};
    if (rc == GS_OK)
        rc = gs_kube_client_new(cfg, &co, &k->client);
    char q[320];
    (void)snprintf(q, sizeof q, "fieldSelector=metadata.name%%3D%s", node);
    struct gs_kube_informer_opts no = {.path = "/api/v1/nodes", .query = q};
    if (rc == GS_OK)
        rc = gs_kube_informer_new(k->client, &no, on_node, k, &k->node_inf);
    (void)snprintf(q, sizeof q, "fieldSelector=spec.nodeName%%3D%s", node);
    struct gs_kube_informer_opts po = {.path = "/api/v1/pods", .query = q};
    if (rc == GS_OK)
        rc = gs_kube_informer_new(k->client, &po, on_pod, k, &k->pod_inf);
    if (rc == GS_OK) {
        if (gs__dp_thread_start(&k->thread, kube_main, k) != 0)
            rc = GS_EIO;
        else
            k->started = true;
    }
    if (rc != GS_OK) {
        gs__dp_kube_free(k);
        return rc;
    }
    *out = k;
    return GS_OK;
}

int gs__dp_kube_publish(struct gs__dp_kube *k, const char *inventory)
{
    char *copy = strdup(inventory);
    if (copy == NULL)
        return GS_ENOMEM;
    pthread_mutex_lock(&k->mu);
    free(k->want);
    k->want = copy;
    pthread_mutex_unlock(&k->mu);
    return GS_OK;
}

int gs__dp_kube_mark(struct gs__dp_kube *k, const char *pod, uint32_t given)
{
    const char *slash = strchr(pod, '/');
    if (slash == NULL || slash == pod || (size_t)(slash - pod) >= sizeof(((struct mark *)0)->ns) ||
        strlen(slash + 1) == 0 || strlen(slash + 1) >= sizeof(((struct mark *)0)->name))
        return GS_EINVAL;
    struct mark m;
    memset(&m, 0, sizeof m);
    memcpy(m.ns, pod, (size_t)(slash - pod));
    (void)snprintf(m.name, sizeof m.name, "%s", slash + 1);
    m.given = given;
    int rc = GS_OK;
    pthread_mutex_lock(&k->mu);
    uint32_t i = 0;
    while (i < k->n_marks &&
           !(strcmp(k->marks[i].ns, m.ns) == 0 && strcmp(k->marks[i].name, m.name) == 0))
        i++;
    if (i < k->n_marks)
        k->marks[i] = m;
    else if (k->n_marks < MARKS_MAX)
        k->marks[k->n_marks++] = m;
    else
        rc = GS_ELIMIT;
    pthread_mutex_unlock(&k->mu);
    return rc;
}

struct gs_dp_assign *gs__dp_kube_lock(struct gs__dp_kube *k)
{
    pthread_mutex_lock(&k->mu);
    return k->table;
}

void gs__dp_kube_unlock(struct gs__dp_kube *k)
{
    pthread_mutex_unlock(&k->mu);
}

uint32_t gs__dp_kube_name_pods(struct gs__dp_kube *k, struct gs_exporter_podval *v, uint32_t n)
{
    pthread_mutex_lock(&k->mu);
    uint32_t named = gs_podnames_fill(k->names, v, n);
    pthread_mutex_unlock(&k->mu);
    return named;
}

char *gs__dp_kube_take_plan(struct gs__dp_kube *k)
{
    pthread_mutex_lock(&k->mu);
    char *p = k->plan_new ? dup_or_null(k->plan) : NULL;
    k->plan_new = false;
    pthread_mutex_unlock(&k->mu);
    return p;
}

int gs__dp_kube_plan_status(struct gs__dp_kube *k, const char *text)
{
    char *copy = strdup(text);
    if (copy == NULL)
        return GS_ENOMEM;
    pthread_mutex_lock(&k->mu);
    free(k->plan_status);
    k->plan_status = copy;
    pthread_mutex_unlock(&k->mu);
    return GS_OK;
}

bool gs__dp_kube_mig_used(struct gs__dp_kube *k, uint32_t gpu, const char *profile, uint32_t start,
                          char *pod, size_t cap)
{
    char key[96];
    (void)snprintf(key, sizeof key, "%u/%.40s@%u", (unsigned)gpu, profile, (unsigned)start);
    bool used = false;
    pthread_mutex_lock(&k->mu);
    const char *uid;
    const json_t *l;
    json_object_foreach(k->mig_used, uid, l)
    {
        size_t i;
        const json_t *e;
        json_array_foreach(l, i, e)
        {
            if (!used && strcmp(json_string_value(e), key) == 0) {
                used = true;
                (void)snprintf(pod, cap, "pod uid %s", uid);
            }
        }
    }
    pthread_mutex_unlock(&k->mu);
    return used;
}

uint64_t gs__dp_kube_patches(struct gs__dp_kube *k)
{
    return atomic_load(&k->patches);
}

void gs__dp_kube_free(struct gs__dp_kube *k)
{
    if (k == NULL)
        return;
    atomic_store(&k->stop, 1);
    if (k->started)
        pthread_join(k->thread, NULL);
    gs_kube_client_free(k->client); /* frees the informers */
    gs_dp_assign_free(k->table);
    gs_podnames_free(k->names);
    free(k->want);
    free(k->node_has);
    free(k->plan);
    free(k->plan_status);
    json_decref(k->mig_used);
    pthread_mutex_destroy(&k->mu);
    free(k);
}
