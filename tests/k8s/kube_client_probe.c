/*
 * kube_client_probe: a small command-line front of the Kubernetes client library
 * (include/gpusched/kube.h), so that tests against a real kube-apiserver can be written as
 * shell scripts (tests/k8s/kube_client.sh). It reads the configuration the way the scheduler
 * will (gs_kube_config_load_default: $KUBECONFIG, in-cluster, ~/.kube/config) and prints
 * plain lines that a script can grep.
 *
 *   kube_client_probe request METHOD PATH [JSON]   METHOD: GET POST PUT MERGE STRATEGIC JSONPATCH
 *                                                  DELETE; prints "status=N err=GS_x
 *                                                  reason=R http=V retry_after=S connects=C"
 *                                                  then the body on one line; REPEAT=N in the
 *                                                  environment sends it N times
 *   kube_client_probe list PATH [--limit N] [--query Q]
 *                                                  prints "items=N pages=P restarts=R rv=RV"
 *                                                  then one "item NAME" line per object
 *   kube_client_probe watch PATH [--query Q] [--rv RV] [--events N] [--until-synced]
 *                                [--until-deleted] [--also PATH2]
 *                                                  (--also: a second informer on PATH2 in the
 *                                                  same client and step loop; its lines start
 *                                                  with "also")
 *                                [--timeout-s T] [--watch-timeout-s W]
 *                                                  runs an informer; prints "event TYPE NAME RV"
 *                                                  per change, "relist" and "synced", and at
 *                                                  the end "stats lists=.. watches=.. events=..
 *                                                  bookmarks=.. gone=.. failures=.. rv=RV"
 *   kube_client_probe config                        prints what the configuration loaded
 *
 * Exit status: 0 on success (a request: a 2xx answer), 1 on an error answer or failure, 2 on
 * bad usage, 3 when a watch ran out of time before its goal.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"

static int usage(void)
{
    (void)fprintf(stderr, "usage: kube_client_probe request METHOD PATH [JSON] | list PATH "
                          "[--limit N] [--query Q] | watch PATH [options] | many N NAMESPACE "
                          "IN-FLIGHT | config\n");
    return 2;
}

static const char *name_of(const json_t *obj)
{
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    return n != NULL ? n : "-";
}

static const char *rv_of(const json_t *obj)
{
    const char *n =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    return n != NULL ? n : "-";
}

static int cmd_request(struct gs_kube_client *c, int argc, char **argv)
{
    static const struct {
        const char *name;
        enum gs_kube_method m;
    } methods[] = {{"GET", GS_KUBE_GET},
                   {"POST", GS_KUBE_POST},
                   {"PUT", GS_KUBE_PUT},
                   {"MERGE", GS_KUBE_PATCH_MERGE},
                   {"STRATEGIC", GS_KUBE_PATCH_STRATEGIC},
                   {"JSONPATCH", GS_KUBE_PATCH_JSON},
                   {"DELETE", GS_KUBE_DELETE}};
    if (argc < 2)
        return usage();
    int mi = -1;
    for (int i = 0; i < (int)(sizeof methods / sizeof methods[0]); i++)
        if (strcmp(argv[0], methods[i].name) == 0)
            mi = i;
    if (mi < 0)
        return usage();
    json_t *body = NULL;
    if (argc >= 3) {
        json_error_t e;
        body = json_loads(argv[2], 0, &e);
        if (body == NULL) {
            (void)fprintf(stderr, "kube_client_probe: body is not JSON: %s\n", e.text);
            return 2;
        }
    }
    struct gs_kube_response r;
    /* REPEAT=N sends the request N times (connection reuse shows in connects=). */
    const char *rep = getenv("REPEAT");
    int n = rep != NULL ? atoi(rep) : 1, rc = GS_OK;
    for (int i = 0; i < (n > 0 ? n : 1); i++) {
        if (i > 0)
            gs_kube_response_fini(&r);
        rc = gs_kube_request(c, methods[mi].m, argv[1], body, &r);
        printf("status=%ld err=%s reason=%s http=%d retry_after=%lld connects=%ld\n", r.http_status,
               rc == GS_OK ? "GS_OK" : gs_errname(rc), r.reason[0] ? r.reason : "-", r.http_major,
               (long long)r.retry_after_s, r.new_connections);
    }
    if (r.message[0] != '\0')
        printf("message=%s\n", r.message);
    if (r.body != NULL) {
        char *t = json_dumps(r.body, JSON_COMPACT | JSON_SORT_KEYS);
        if (t != NULL)
            printf("%s\n", t);
        free(t);
    }
    gs_kube_response_fini(&r);
    json_decref(body);
    return rc == GS_OK ? 0 : 1;
}

/* many N PATH-PREFIX IN-FLIGHT: N concurrent POSTs of ConfigMaps PATH-PREFIX-i (one of them,
 * i = 3, twice: the second is refused AlreadyExists) through gs_kube_request_many; prints one
 * line per call in call order. */
static int cmd_many(struct gs_kube_client *c, int argc, char **argv)
{
    if (argc < 3)
        return usage();
    size_t n = (size_t)strtoul(argv[0], NULL, 10);
    const char *ns = argv[1];
    uint32_t in_flight = (uint32_t)strtoul(argv[2], NULL, 10);
    if (n < 4 || n > 10000)
        return usage();
    struct gs_kube_call *calls = calloc(n + 1, sizeof(*calls));
    json_t **bodies = calloc(n + 1, sizeof(*bodies));
    char path[256];
    (void)snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps", ns);
    int rc = 1;
    if (calls == NULL || bodies == NULL)
        goto out;
    for (size_t i = 0; i <= n; i++) {
        char name[64];
        (void)snprintf(name, sizeof name, "many-%zu", i == n ? (size_t)3 : i);
        char idx[32];
        (void)snprintf(idx, sizeof idx, "%zu", i);
        bodies[i] = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                              "metadata", "name", name, "data", "i", idx);
        calls[i].method = GS_KUBE_POST;
        calls[i].path = path;
        calls[i].body = bodies[i];
    }
    int brc = gs_kube_request_many(c, calls, n + 1, in_flight);
    printf("batch=%s\n", brc == GS_OK ? "GS_OK" : gs_errname(brc));
    long connects = 0;
    for (size_t i = 0; i <= n; i++) {
        const struct gs_kube_response *r = &calls[i].resp;
        connects += r->new_connections;
        printf("call=%zu status=%ld err=%s reason=%s http=%d name=%s\n", i, r->http_status,
               calls[i].rc == GS_OK ? "GS_OK" : gs_errname(calls[i].rc),
               r->reason[0] ? r->reason : "-", r->http_major, r->body ? name_of(r->body) : "-");
    }
    printf("connects=%ld\n", connects);
    rc = brc == GS_OK ? 0 : 1;
out:
    for (size_t i = 0; calls && bodies && i <= n; i++) {
        gs_kube_response_fini(&calls[i].resp);
        json_decref(bodies[i]);
    }
    free(calls);
    free(bodies);
    return rc;
}

static int cmd_list(struct gs_kube_client *c, int argc, char **argv)
{
    uint32_t limit = 0;
    const char *query = NULL;
    if (argc < 1)
        return usage();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
            limit = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--query") == 0 && i + 1 < argc)
            query = argv[++i];
        else
            return usage();
    }
    struct gs_kube_list l;
    struct gs_kube_response r;
    int rc = gs_kube_list(c, argv[0], query, limit, &l, &r);
    if (rc != GS_OK) {
        printf("error=%s status=%ld reason=%s message=%s\n", gs_errname(rc), r.http_status,
               r.reason, r.message);
        gs_kube_response_fini(&r);
        return 1;
    }
    printf("items=%zu pages=%u restarts=%u rv=%s\n", json_array_size(l.items), l.pages, l.restarts,
           l.resource_version);
    size_t i;
    json_t *it;
    json_array_foreach(l.items, i, it)
    {
        printf("item %s %s\n", name_of(it),
               json_string_value(json_object_get(it, "kind")) != NULL
                   ? json_string_value(json_object_get(it, "kind"))
                   : "-");
    }
    gs_kube_list_fini(&l);
    gs_kube_response_fini(&r);
    return 0;
}

/** Watch goals and what has been seen. */
struct watch_state {
    long events_goal;  /**< stop after this many ADDED/MODIFIED/DELETED from the watch; 0 none */
    bool until_synced; /**< stop at the next SYNCED */
    int until_type;    /**< stop at the first watch event of this type; -1 none */
    bool in_list;      /**< between RELIST and SYNCED */
    long events;       /**< watch events seen */
    bool done;         /**< a goal was reached */
    const char *label; /**< printed before each line (the --also informer); NULL none */
};

static void on_change(void *ud, enum gs_kube_event_type t, json_t *obj)
{
    struct watch_state *w = ud;
    if (w->label != NULL)
        printf("%s ", w->label);
    switch (t) {
    case GS_KUBE_EVENT_RELIST:
        w->in_list = true;
        printf("relist\n");
        break;
    case GS_KUBE_EVENT_SYNCED:
        w->in_list = false;
        printf("synced\n");
        if (w->until_synced)
            w->done = true;
        break;
    default:
        printf("%s %s %s %s\n", w->in_list ? "listed" : "event", gs_kube_event_type_name(t),
               name_of(obj), rv_of(obj));
        if (!w->in_list && ++w->events == w->events_goal)
            w->done = true;
        if (!w->in_list && (int)t == w->until_type)
            w->done = true;
        break;
    }
    (void)fflush(stdout);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmd_watch(struct gs_kube_client *c, int argc, char **argv)
{
    struct gs_kube_informer_opts o = {0};
    struct watch_state w = {.until_type = -1};
    long timeout_s = 60;
    const char *also = NULL;
    if (argc < 1)
        return usage();
    o.path = argv[0];
    o.backoff_initial_ms = 200;
    o.backoff_max_ms = 2000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--query") == 0 && i + 1 < argc)
            o.query = argv[++i];
        else if (strcmp(argv[i], "--rv") == 0 && i + 1 < argc)
            o.resource_version = argv[++i];
        else if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            w.events_goal = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--until-synced") == 0)
            w.until_synced = true;
        else if (strcmp(argv[i], "--until-deleted") == 0)
            w.until_type = GS_KUBE_EVENT_DELETED;
        else if (strcmp(argv[i], "--timeout-s") == 0 && i + 1 < argc)
            timeout_s = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--also") == 0 && i + 1 < argc)
            also = argv[++i];
        else if (strcmp(argv[i], "--watch-timeout-s") == 0 && i + 1 < argc)
            o.watch_timeout_s = (uint32_t)strtoul(argv[++i], NULL, 10);
        else
            return usage();
    }
    struct gs_kube_informer *inf = NULL;
    int rc = gs_kube_informer_new(c, &o, on_change, &w, &inf);
    if (rc != GS_OK) {
        (void)fprintf(stderr, "kube_client_probe: informer: %s\n", gs_strerror(rc));
        return 1;
    }
    /* --also: a second informer on the same client, stepped by the same call. */
    struct watch_state w2 = {.until_type = -1, .label = "also"};
    struct gs_kube_informer_opts o2 = o;
    struct gs_kube_informer *inf2 = NULL;
    o2.path = also;
    o2.query = NULL;
    o2.resource_version = NULL;
    if (also != NULL && (rc = gs_kube_informer_new(c, &o2, on_change, &w2, &inf2)) != GS_OK) {
        (void)fprintf(stderr, "kube_client_probe: informer: %s\n", gs_strerror(rc));
        return 1;
    }
    /* The first watch has been opened once the informer is WATCHING; say so for scripts. */
    bool said_ready = false;
    int64_t end = now_ms() + timeout_s * 1000;
    while (!w.done && now_ms() < end) {
        rc = gs_kube_client_step(c, 200);
        if (rc != GS_OK) {
            (void)fprintf(stderr, "kube_client_probe: step: %s\n", gs_strerror(rc));
            return 1;
        }
        struct gs_kube_informer_stats st;
        gs_kube_informer_get_stats(inf, &st);
        struct gs_kube_informer_stats st2 = {.watches = 1};
        if (inf2 != NULL)
            gs_kube_informer_get_stats(inf2, &st2);
        if (!said_ready && st.watches > 0 && st2.watches > 0) {
            printf("watching rv=%s\n", gs_kube_informer_resource_version(inf)
                                           ? gs_kube_informer_resource_version(inf)
                                           : "-");
            (void)fflush(stdout);
            said_ready = true;
        }
    }
    struct gs_kube_informer_stats st;
    gs_kube_informer_get_stats(inf, &st);
    printf("stats lists=%llu watches=%llu events=%llu bookmarks=%llu gone=%llu failures=%llu "
           "rv=%s\n",
           (unsigned long long)st.lists, (unsigned long long)st.watches,
           (unsigned long long)st.events, (unsigned long long)st.bookmarks,
           (unsigned long long)st.gone, (unsigned long long)st.failures,
           gs_kube_informer_resource_version(inf) ? gs_kube_informer_resource_version(inf) : "-");
    if (gs_kube_informer_last_error(inf)[0] != '\0')
        printf("last_error=%s\n", gs_kube_informer_last_error(inf));
    if (inf2 != NULL) {
        gs_kube_informer_get_stats(inf2, &st);
        printf("also stats lists=%llu watches=%llu events=%llu failures=%llu\n",
               (unsigned long long)st.lists, (unsigned long long)st.watches,
               (unsigned long long)st.events, (unsigned long long)st.failures);
    }
    return w.done ? 0 : 3;
}

int main(int argc, char **argv)
{
    struct gs_kube_config cfg;
    struct gs_kube_diag d;
    struct gs_kube_client *c = NULL;
    int status = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return usage();
    int rc = gs_kube_config_load_default(&cfg, &d);
    if (rc != GS_OK) {
        char text[800];
        gs_kube_diag_format(&d, text, sizeof text);
        (void)fprintf(stderr, "kube_client_probe: %s\n", text);
        return 1;
    }
    if (strcmp(argv[1], "config") == 0) {
        printf("server=%s ca_file=%s ca_data=%zu cert_file=%s cert_data=%zu key_file=%s "
               "key_data=%zu token=%s token_file=%s insecure=%d namespace=%s\n",
               cfg.server, cfg.ca_file ? cfg.ca_file : "-", cfg.ca_len,
               cfg.cert_file ? cfg.cert_file : "-", cfg.cert_len, cfg.key_file ? cfg.key_file : "-",
               cfg.key_len, cfg.token ? "set" : "-", cfg.token_file ? cfg.token_file : "-",
               cfg.insecure_skip_tls_verify, cfg.namespace_ ? cfg.namespace_ : "-");
        gs_kube_config_fini(&cfg);
        return 0;
    }
    struct gs_kube_client_opts o = {.qps = 100, .burst = 200};
    rc = gs_kube_client_new(&cfg, &o, &c);
    gs_kube_config_fini(&cfg);
    if (rc != GS_OK) {
        (void)fprintf(stderr, "kube_client_probe: client: %s\n", gs_strerror(rc));
        return 1;
    }
    if (strcmp(argv[1], "request") == 0)
        status = cmd_request(c, argc - 2, argv + 2);
    else if (strcmp(argv[1], "many") == 0)
        status = cmd_many(c, argc - 2, argv + 2);
    else if (strcmp(argv[1], "list") == 0)
        status = cmd_list(c, argc - 2, argv + 2);
    else if (strcmp(argv[1], "watch") == 0)
        status = cmd_watch(c, argc - 2, argv + 2);
    else
        status = usage();
    gs_kube_client_free(c);
    return status;
}
