/*
 * Informers: list-then-watch of one collection (contract in include/gpusched/kube.h), a small
 * cousin of client-go's tools/cache Reflector.
 *
 * Each informer is a three-state machine: NEED_LIST (no usable resourceVersion), NEED_WATCH
 * (have one, a watch is to be opened at next_ms) and WATCHING (its transfer is in the client's
 * multi handle). gs_kube_client_step moves all of a client's informers at once: lists are
 * blocking requests on the client's easy handle; watches are concurrent transfers driven by
 * curl_multi_poll/perform, so one thread multiplexes several resources, and on HTTP/2 several
 * watches share one connection. Watch bytes go straight from libcurl's write callback into the
 * framing parser (watch.c), whose callback updates the RV and calls the user back, so nothing
 * but one incomplete event is buffered.
 *
 * How a watch ends decides what is next (the API Concepts page, "Efficient detection of
 * changes" and "410 Gone responses"): a clean end (the server's timeoutSeconds) re-watches at
 * once from the last RV; an HTTP 410, or an ERROR event whose Status has code 410, drops the RV
 * and relists at once; every other failure (transport, an HTTP error, an ERROR event of another
 * code, a stream that does not parse) re-watches from the same RV after a jittered
 * exponential backoff, which a watch that delivered anything resets.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "kube_int.h"

#include "gpusched/err.h"
#include "gpusched/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PAGE_LIMIT 500u
#define DEFAULT_WATCH_TIMEOUT_S 300u
#define DEFAULT_BACKOFF_INITIAL_MS 800
#define DEFAULT_BACKOFF_MAX_MS 30000
#define DEFAULT_JITTER 0.5
/** Bytes of a failed watch's body kept for its Status message. */
#define ERR_BODY_MAX (64u << 10)
/** A watch that ends cleanly sooner than this without any event counts as a failure. */
#define WATCH_MIN_CLEAN_MS 1000
/** Slack over timeoutSeconds before a silent watch is cut by the client. */
#define WATCH_SLACK_S 60

static uint64_t default_rng(void *ud)
{
    return gs_rng_next((struct gs_rng *)ud);
}

int gs_kube_informer_new(struct gs_kube_client *c, const struct gs_kube_informer_opts *opts,
                         gs_kube_informer_fn cb, void *ud, struct gs_kube_informer **out)
{
    struct gs_kube_informer *inf = NULL;
    int rc = GS_EINVAL;
    if (out != NULL)
        *out = NULL;
    if (c == NULL || opts == NULL || cb == NULL || opts->path == NULL || opts->path[0] != '/' ||
        strchr(opts->path, '?') != NULL)
        return GS_EINVAL;
    rc = GS_ENOMEM;
    if ((inf = calloc(1, sizeof *inf)) == NULL)
        return GS_ENOMEM;
    if ((inf->path = strdup(opts->path)) == NULL)
        goto out;
    if (opts->query != NULL && opts->query[0] != '\0' && (inf->query = strdup(opts->query)) == NULL)
        goto out;
    if (gs_kube_watch_parser_new(opts->max_event_bytes, &inf->parser) != GS_OK)
        goto out;
    inf->client = c;
    inf->cb = cb;
    inf->ud = ud;
    inf->page_limit = opts->page_limit > 0 ? opts->page_limit : DEFAULT_PAGE_LIMIT;
    inf->watch_timeout_s =
        opts->watch_timeout_s > 0 ? opts->watch_timeout_s : DEFAULT_WATCH_TIMEOUT_S;
    gs_kube_backoff_init(
        &inf->backoff,
        opts->backoff_initial_ms > 0 ? opts->backoff_initial_ms : DEFAULT_BACKOFF_INITIAL_MS,
        opts->backoff_max_ms > 0 ? opts->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS,
        opts->backoff_jitter == 0 ? DEFAULT_JITTER
                                  : (opts->backoff_jitter < 0 ? 0 : opts->backoff_jitter));
    if (opts->rng != NULL) {
        inf->rng = opts->rng;
        inf->rng_ud = opts->rng_ud;
    } else {
        /* Different informers (and processes) should not reconnect in step. */
        gs_rng_seed(&inf->rng_default,
                    (uint64_t)gs__kube_now_ms(c) ^ (uint64_t)(uintptr_t)inf ^ 0x9e3779b97f4a7c15u);
        inf->rng = default_rng;
        inf->rng_ud = &inf->rng_default;
    }
    inf->err_body.max = ERR_BODY_MAX;
    if (opts->resource_version != NULL && opts->resource_version[0] != '\0') {
        if ((inf->rv = strdup(opts->resource_version)) == NULL)
            goto out;
        inf->state = GS__INF_NEED_WATCH;
        inf->synced = true;
    } else {
        inf->state = GS__INF_NEED_LIST;
    }
    inf->next_ms = gs__kube_now_ms(c);
    inf->next = c->informers;
    c->informers = inf;
    if (out != NULL)
        *out = inf;
    return GS_OK;
out:
    gs_kube_watch_parser_free(inf->parser);
    free(inf->path);
    free(inf->query);
    free(inf->rv);
    free(inf);
    return rc;
}

static void stop_watch(struct gs_kube_informer *inf)
{
    if (inf->watch != NULL) {
        (void)curl_multi_remove_handle(inf->client->multi, inf->watch);
        curl_easy_cleanup(inf->watch);
        inf->watch = NULL;
    }
    curl_slist_free_all(inf->watch_headers);
    inf->watch_headers = NULL;
    gs__kube_buf_free(&inf->err_body);
}

void gs_kube_informer_free(struct gs_kube_informer *inf)
{
    if (inf == NULL)
        return;
    stop_watch(inf);
    for (struct gs_kube_informer **pp = &inf->client->informers; *pp != NULL; pp = &(*pp)->next)
        if (*pp == inf) {
            *pp = inf->next;
            break;
        }
    gs_kube_watch_parser_free(inf->parser);
    free(inf->path);
    free(inf->query);
    free(inf->rv);
    free(inf);
}

const char *gs_kube_informer_resource_version(const struct gs_kube_informer *inf)
{
    return inf->rv;
}

bool gs_kube_informer_synced(const struct gs_kube_informer *inf)
{
    return inf->synced;
}

void gs_kube_informer_get_stats(const struct gs_kube_informer *inf,
                                struct gs_kube_informer_stats *st)
{
    *st = inf->stats;
}

const char *gs_kube_informer_last_error(const struct gs_kube_informer *inf)
{
    return inf->last_error;
}

static int set_rv(struct gs_kube_informer *inf, const char *rv)
{
    if (rv == NULL || rv[0] == '\0')
        return GS_OK;
    if (inf->rv != NULL && strcmp(inf->rv, rv) == 0)
        return GS_OK;
    char *n = strdup(rv);
    if (n == NULL)
        return GS_ENOMEM;
    free(inf->rv);
    inf->rv = n;
    return GS_OK;
}

/* A failed attempt: count it, say why, and wait a backoff delay before the next. */
static void failed(struct gs_kube_informer *inf, int64_t now, const char *what, int rc,
                   const struct gs_kube_response *r)
{
    inf->stats.failures++;
    if (r != NULL && r->http_status != 0)
        (void)snprintf(inf->last_error, sizeof inf->last_error, "%s %.150s: HTTP %ld %.60s: %.250s",
                       what, inf->path, r->http_status, r->reason, r->message);
    else
        (void)snprintf(inf->last_error, sizeof inf->last_error, "%s %.150s: %s%s%.250s", what,
                       inf->path, gs_strerror(rc), r != NULL && r->message[0] != '\0' ? ": " : "",
                       r != NULL ? r->message : "");
    inf->next_ms = now + gs_kube_backoff_next(&inf->backoff, inf->rng, inf->rng_ud);
}

static int do_list(struct gs_kube_informer *inf)
{
    struct gs_kube_client *c = inf->client;
    struct gs_kube_list l;
    struct gs_kube_response r;
    int rc = gs_kube_list(c, inf->path, inf->query, inf->page_limit, &l, &r);
    int64_t now = gs__kube_now_ms(c);
    if (rc != GS_OK) {
        failed(inf, now, "list", rc, &r);
        gs_kube_response_fini(&r);
        return rc == GS_ENOMEM ? rc : GS_OK;
    }
    gs_kube_response_fini(&r);
    free(inf->rv);
    inf->rv = l.resource_version;
    l.resource_version = NULL;
    inf->cb(inf->ud, GS_KUBE_EVENT_RELIST, NULL);
    size_t i;
    json_t *it;
    json_array_foreach(l.items, i, it)
    {
        inf->cb(inf->ud, GS_KUBE_EVENT_ADDED, it);
    }
    inf->cb(inf->ud, GS_KUBE_EVENT_SYNCED, NULL);
    gs_kube_list_fini(&l);
    inf->synced = true;
    inf->stats.lists++;
    gs_kube_backoff_reset(&inf->backoff);
    inf->state = GS__INF_NEED_WATCH;
    inf->next_ms = now;
    return GS_OK;
}

/* The parser's callback: one decoded watch event. */
static int on_event(void *ud, const struct gs_kube_watch_event *ev)
{
    struct gs_kube_informer *inf = ud;
    switch (ev->type) {
    case GS_KUBE_EVENT_BOOKMARK:
        inf->stats.bookmarks++;
        inf->watch_events++;
        return set_rv(inf, ev->resource_version);
    case GS_KUBE_EVENT_ERROR:
        if (ev->status_code == 410) {
            inf->watch_gone = true;
            return GS_EGONE;
        }
        (void)snprintf(inf->last_error, sizeof inf->last_error,
                       "watch %.150s: ERROR event: code %ld %.60s: %.250s", inf->path,
                       ev->status_code, ev->reason, ev->message);
        inf->watch_err = GS_EHTTP;
        return GS_EHTTP;
    default:
        break;
    }
    int rc = set_rv(inf, ev->resource_version);
    if (rc != GS_OK) {
        inf->watch_err = rc;
        return rc;
    }
    inf->stats.events++;
    inf->watch_events++;
    inf->cb(inf->ud, ev->type, ev->object);
    return GS_OK;
}

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *ud)
{
    struct gs_kube_informer *inf = ud;
    size_t n = size * nmemb;
    if (inf->watch_status == 0)
        (void)curl_easy_getinfo(inf->watch, CURLINFO_RESPONSE_CODE, &inf->watch_status);
    if (inf->watch_status != 200) {
        /* An error's Status body: keep its start for the message. */
        size_t room = inf->err_body.max - inf->err_body.len;
        if (gs__kube_buf_add(&inf->err_body, data, n < room ? n : room) != GS_OK)
            return 0;
        return n;
    }
    int rc = gs_kube_watch_parser_feed(inf->parser, data, n, on_event, inf);
    if (rc == GS_OK)
        return n;
    if (!inf->watch_gone && inf->watch_err == GS_OK) {
        inf->watch_err = rc;
        (void)snprintf(inf->last_error, sizeof inf->last_error, "watch %.150s: %.300s", inf->path,
                       gs_kube_watch_parser_error(inf->parser));
    }
    return 0; /* ends the transfer (CURLE_WRITE_ERROR) */
}

static int start_watch(struct gs_kube_informer *inf)
{
    struct gs_kube_client *c = inf->client;
    char *url = NULL;
    int rc = GS_ENOMEM;
    CURLcode e = CURLE_OK;
    size_t n = strlen(c->server) + strlen(inf->path) + (inf->query ? strlen(inf->query) : 0) +
               strlen(inf->rv) * 3 + 128;
    if ((url = malloc(n)) == NULL)
        goto out;
    /* RVs are opaque, but in practice digits; escape the few bytes a URL cannot carry. */
    int k = snprintf(url, n,
                     "%s%s?%s%swatch=1&allowWatchBookmarks=true&timeoutSeconds=%u"
                     "&resourceVersion=",
                     c->server, inf->path, inf->query ? inf->query : "", inf->query ? "&" : "",
                     inf->watch_timeout_s);
    for (const char *p = inf->rv; *p != '\0' && (size_t)k + 4 < n; p++) {
        unsigned char ch = (unsigned char)*p;
        if ((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~')
            url[k++] = (char)ch;
        else
            k += snprintf(url + k, n - (size_t)k, "%%%02X", ch);
    }
    url[k] = '\0';
    gs__kube_throttle(c);
    if ((inf->watch_headers = gs__kube_headers(c, NULL)) == NULL)
        goto out;
    rc = GS_EIO;
    if ((inf->watch = curl_easy_init()) == NULL)
        goto out;
    if (gs__kube_setup_easy(c, inf->watch) != GS_OK)
        goto out;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (e == CURLE_OK)                                                                         \
            e = curl_easy_setopt(inf->watch, opt, val);                                            \
    } while (0)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_HTTPHEADER, inf->watch_headers);
    SET(CURLOPT_WRITEFUNCTION, on_watch_data);
    SET(CURLOPT_WRITEDATA, inf);
    SET(CURLOPT_PRIVATE, inf);
    /* The server ends the watch after timeoutSeconds; a connection silent much longer is dead. */
    SET(CURLOPT_TIMEOUT_MS, (long)(inf->watch_timeout_s + WATCH_SLACK_S) * 1000L);
#undef SET
    if (e != CURLE_OK)
        goto out;
    gs_kube_watch_parser_reset(inf->parser);
    inf->watch_status = 0;
    inf->watch_err = GS_OK;
    inf->watch_gone = false;
    inf->watch_events = 0;
    inf->next_ms = gs__kube_now_ms(c); /* the watch's start, for WATCH_MIN_CLEAN_MS */
    if (curl_multi_add_handle(c->multi, inf->watch) != CURLM_OK)
        goto out;
    inf->state = GS__INF_WATCHING;
    inf->stats.watches++;
    rc = GS_OK;
out:
    if (rc != GS_OK) {
        stop_watch(inf);
        struct gs_kube_response r = {.retry_after_s = -1};
        (void)snprintf(r.message, sizeof r.message, "cannot start the watch request");
        failed(inf, gs__kube_now_ms(c), "watch", rc, &r);
    }
    free(url);
    return rc == GS_ENOMEM ? rc : GS_OK;
}

/* A watch transfer is over: decide between re-watch, relist and backoff. */
static void finish_watch(struct gs_kube_informer *inf, CURLcode res)
{
    struct gs_kube_client *c = inf->client;
    int64_t now = gs__kube_now_ms(c);
    int64_t started = inf->next_ms;
    long status = inf->watch_status;
    if (status == 0 && inf->watch != NULL)
        (void)curl_easy_getinfo(inf->watch, CURLINFO_RESPONSE_CODE, &status);
    struct gs_kube_response r = {.http_status = status, .retry_after_s = -1};
    if (status != 200 && status != 0 && inf->err_body.len > 0) {
        json_error_t jerr;
        r.body = json_loadb(inf->err_body.p, inf->err_body.len, 0, &jerr);
        gs__kube_read_status(&r);
    }
    if (inf->watch_events > 0)
        gs_kube_backoff_reset(&inf->backoff);
    if (inf->watch_gone || status == 410) {
        /* History before our RV is gone: forget it, relist now (the reflector does too). */
        inf->stats.gone++;
        free(inf->rv);
        inf->rv = NULL;
        inf->synced = false;
        inf->state = GS__INF_NEED_LIST;
        inf->next_ms = now;
    } else if (status != 0 && status != 200) {
        inf->state = GS__INF_NEED_WATCH;
        failed(inf, now, "watch", gs_kube_status_to_err(status, r.reason), &r);
    } else if (inf->watch_err != GS_OK) {
        /* last_error was written where the problem was seen. */
        inf->stats.failures++;
        inf->state = GS__INF_NEED_WATCH;
        inf->next_ms = now + gs_kube_backoff_next(&inf->backoff, inf->rng, inf->rng_ud);
    } else if (res != CURLE_OK) {
        inf->state = GS__INF_NEED_WATCH;
        (void)snprintf(r.message, sizeof r.message, "%s", curl_easy_strerror(res));
        r.http_status = 0;
        failed(inf, now, "watch", res == CURLE_OPERATION_TIMEDOUT ? GS_ETIMEDOUT : GS_EIO, &r);
    } else if (gs_kube_watch_parser_finish(inf->parser) != GS_OK) {
        inf->state = GS__INF_NEED_WATCH;
        (void)snprintf(r.message, sizeof r.message, "%.300s",
                       gs_kube_watch_parser_error(inf->parser));
        r.http_status = 0;
        failed(inf, now, "watch", GS_EPARSE, &r);
    } else if (inf->watch_events == 0 && now - started < WATCH_MIN_CLEAN_MS) {
        /* A server that closes at once must not make us spin. */
        inf->state = GS__INF_NEED_WATCH;
        inf->next_ms = now + gs_kube_backoff_next(&inf->backoff, inf->rng, inf->rng_ud);
    } else {
        inf->state = GS__INF_NEED_WATCH;
        inf->next_ms = now;
    }
    json_decref(r.body);
    stop_watch(inf);
}

int gs_kube_client_step(struct gs_kube_client *c, int64_t timeout_ms)
{
    int running = 0, rc;
    bool watching = false;
    if (timeout_ms < 0)
        timeout_ms = 0;
    for (struct gs_kube_informer *inf = c->informers; inf != NULL; inf = inf->next) {
        int64_t now = gs__kube_now_ms(c);
        if (inf->state == GS__INF_NEED_LIST && now >= inf->next_ms && (rc = do_list(inf)) != GS_OK)
            return rc;
        now = gs__kube_now_ms(c);
        if (inf->state == GS__INF_NEED_WATCH && now >= inf->next_ms &&
            (rc = start_watch(inf)) != GS_OK)
            return rc;
    }
    int64_t wait = timeout_ms, now = gs__kube_now_ms(c);
    watching = c->n_async > 0; /* async requests are transfers of the multi handle too */
    for (struct gs_kube_informer *inf = c->informers; inf != NULL; inf = inf->next) {
        if (inf->state == GS__INF_WATCHING) {
            watching = true;
        } else if (inf->next_ms - now < wait) {
            wait = inf->next_ms - now > 0 ? inf->next_ms - now : 0;
        }
    }
    if (!watching) {
        if (wait > 0)
            c->clock.sleep_ms(c->clock.ud, wait);
        return GS_OK;
    }
    if (curl_multi_perform(c->multi, &running) != CURLM_OK)
        return GS_EIO;
    if (curl_multi_poll(c->multi, NULL, 0, wait > INT32_MAX ? INT32_MAX : (int)wait, NULL) !=
        CURLM_OK)
        return GS_EIO;
    if (curl_multi_perform(c->multi, &running) != CURLM_OK)
        return GS_EIO;
    CURLMsg *m;
    int left = 0;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct gs_kube_informer *inf = NULL;
        CURLcode res = m->data.result;
        if (gs__kube_async_done(c, m->easy_handle, res))
            continue;
        (void)curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&inf);
        if (inf != NULL && inf->watch == m->easy_handle)
            finish_watch(inf, res);
    }
    return GS_OK;
}
