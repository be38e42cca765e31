/*
 * Requests that do not block: transfers of the client's multi handle, next to its watches, so
 * over HTTP/2 they share one connection with them, and finished inside gs_kube_client_step,
 * which calls each one's callback. The scheduler sends its Bindings this way, so a slow Binding
 * (an admission webhook, a loaded server) never holds up the next cycle. Contract in kube.h.
 *
 * Two FIFOs wait for a slot: foreground requests (Bindings) and background ones
 * (Events). A background request starts only while no foreground one waits, and at most
 * ASYNC_BG_IN_FLIGHT of them run at once while any foreground one runs (all 64 slots when none
 * does), so on a loaded API server the requests that place pods are served first and the Events
 * that tell of them follow, and once the Bindings are done the Events catch up at full width.
 */
#define _POSIX_C_SOURCE 200809L

#include "kube_int.h"

#include "gpusched/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs__kube_async {
    struct gs__kube_async *next;  /* the client's list */
    CURL *h;                      /* its own easy handle */
    struct gs__kube_sink sink;    /* what the transfer writes */
    struct curl_slist *hdrs;      /* its headers */
    char *url, *body;             /* kept for the transfer's life */
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's text of a failure */
    enum gs_kube_method method;   /* what to send */
    bool background;              /* gs_kube_request_async_background */
    gs_kube_done_fn done;         /* the caller's callback */
    void *ud;                     /* its argument */
};

/* Async transfers at once: enough to hide the server's latency, few enough that they share
 * one HTTP/2 connection (the API server allows 100-1000 streams on one) instead of opening a
 * TLS connection each: 10,000 Bindings added at once timed out in their TLS handshakes. */
#define ASYNC_IN_FLIGHT 64

/* Background requests at once while a foreground one runs: enough to keep Events flowing
 * beside Bindings, few enough that the next Bindings find slots. */
#define ASYNC_BG_IN_FLIGHT 8

static void async_free(struct gs__kube_async *a)
{
    if (a->h != NULL)
        curl_easy_cleanup(a->h);
    curl_slist_free_all(a->hdrs);
    gs__kube_buf_free(&a->sink.body);
    free(a->url);
    free(a->body);
    free(a);
}

/* Takes a rate-limiter token, sets the transfer up and adds it to the multi handle. */
static int async_start(struct gs_kube_client *c, struct gs__kube_async *a)
{
    gs__kube_throttle(c);
    int rc = gs__kube_prepare(c, a->h, a->method, a->url, a->body, &a->sink, &a->hdrs, a->errbuf);
    if (rc != GS_OK)
        return rc;
    (void)curl_easy_setopt(a->h, CURLOPT_PRIVATE, (char *)NULL);
    if (curl_multi_add_handle(c->multi, a->h) != CURLM_OK)
        return GS_EIO;
    a->next = c->asyncs;
    c->asyncs = a;
    c->n_active++;
    if (a->background)
        c->n_bg_active++;
    return GS_OK;
}

/* Whether a background request may start now. */
static bool bg_may_start(const struct gs_kube_client *c)
{
    bool fg_running = c->n_active > c->n_bg_active;
    return c->queue_head == NULL && c->n_active < ASYNC_IN_FLIGHT &&
           (!fg_running || c->n_bg_active < ASYNC_BG_IN_FLIGHT);
}

static void enqueue(struct gs__kube_async **head, struct gs__kube_async **tail,
                    struct gs__kube_async *a)
{
    a->next = NULL;
    if (*tail)
        (*tail)->next = a;
    else
        *head = a;
    *tail = a;
}

static int request_async(struct gs_kube_client *c, enum gs_kube_method method, const char *path,
                         const json_t *body, bool background, gs_kube_done_fn done, void *ud)
{
    if (c == NULL || path == NULL || path[0] != '/' || done == NULL)
        return GS_EINVAL;
    struct gs__kube_async *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return GS_ENOMEM;
    int rc = GS_ENOMEM;
    size_t n = strlen(c->server) + strlen(path) + 1;
    if ((a->url = malloc(n)) == NULL)
        goto fail;
    (void)snprintf(a->url, n, "%s%s", c->server, path);
    if (body != NULL && (a->body = json_dumps(body, JSON_COMPACT)) == NULL)
        goto fail;
    rc = GS_EIO;
    if ((a->h = curl_easy_init()) == NULL)
        goto fail;
    a->method = method;
    a->background = background;
    a->done = done;
    a->ud = ud;
    bool start = background ? bg_may_start(c) : c->n_active < ASYNC_IN_FLIGHT;
    if (start) {
        if ((rc = async_start(c, a)) != GS_OK)
            goto fail;
    } else if (background) {
        enqueue(&c->bg_head, &c->bg_tail, a); /* started by gs__kube_async_done, in order */
    } else {
        enqueue(&c->queue_head, &c->queue_tail, a);
    }
    c->n_async++;
    return GS_OK;
fail:
    async_free(a);
    return rc;
}

int gs_kube_request_async(struct gs_kube_client *c, enum gs_kube_method method, const char *path,
                          const json_t *body, gs_kube_done_fn done, void *ud)
{
    return request_async(c, method, path, body, false, done, ud);
}

int gs_kube_request_async_background(struct gs_kube_client *c, enum gs_kube_method method,
                                     const char *path, const json_t *body, gs_kube_done_fn done,
                                     void *ud)
{
    return request_async(c, method, path, body, true, done, ud);
}

/* Takes the oldest request of a FIFO. */
static struct gs__kube_async *dequeue(struct gs__kube_async **head, struct gs__kube_async **tail)
{
    struct gs__kube_async *a = *head;
    *head = a->next;
    if (*head == NULL)
        *tail = NULL;
    return a;
}

/* Starts queued requests while there is room, foreground ones first; one that cannot start is
 * finished at once with its error, as a transfer that failed would be. */
static void async_start_queued(struct gs_kube_client *c)
{
    for (;;) {
        struct gs__kube_async *a;
        if (c->queue_head != NULL && c->n_active < ASYNC_IN_FLIGHT)
            a = dequeue(&c->queue_head, &c->queue_tail);
        else if (c->bg_head != NULL && bg_may_start(c))
            a = dequeue(&c->bg_head, &c->bg_tail);
        else
            return;
        int rc = async_start(c, a);
        if (rc != GS_OK) {
            c->n_async--;
            struct gs_kube_response r;
            memset(&r, 0, sizeof(r));
            r.retry_after_s = -1;
            (void)snprintf(r.message, sizeof(r.message), "%s", "the request could not start");
            a->done(a->ud, rc, &r);
            async_free(a);
        }
    }
}

size_t gs_kube_client_in_flight(const struct gs_kube_client *c)
{
    return c != NULL ? c->n_async : 0;
}

bool gs__kube_async_done(struct gs_kube_client *c, CURL *h, CURLcode res)
{
    struct gs__kube_async **pp = &c->asyncs;
    while (*pp != NULL && (*pp)->h != h)
        pp = &(*pp)->next;
    struct gs__kube_async *a = *pp;
    if (a == NULL)
        return false;
    *pp = a->next;
    c->n_async--;
    c->n_active--;
    if (a->background)
        c->n_bg_active--;
    (void)curl_multi_remove_handle(c->multi, h);
    struct gs_kube_response r;
    memset(&r, 0, sizeof(r));
    r.retry_after_s = -1;
    int rc = gs__kube_finish(c, h, res, &a->sink, a->errbuf, &r);
    a->done(a->ud, rc, &r);
    gs_kube_response_fini(&r);
    async_free(a);
    async_start_queued(c);
    return true;
}

void gs__kube_async_abort_all(struct gs_kube_client *c)
{
    while (c->asyncs != NULL) {
        struct gs__kube_async *a = c->asyncs;
        c->asyncs = a->next;
        (void)curl_multi_remove_handle(c->multi, a->h);
        async_free(a);
    }
    while (c->queue_head != NULL) {
        struct gs__kube_async *a = c->queue_head;
        c->queue_head = a->next;
        async_free(a);
    }
    c->queue_tail = NULL;
    while (c->bg_head != NULL)
        async_free(dequeue(&c->bg_head, &c->bg_tail));
    c->n_async = 0;
    c->n_active = 0;
    c->n_bg_active = 0;
}
