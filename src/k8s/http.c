/*
 * The client and its blocking requests (contract in include/gpusched/kube.h).
 *
 * One libcurl easy handle serves every blocking request of a client, so its connection (one
 * HTTP/2 connection when the server offers h2 over TLS, else a kept-alive HTTP/1.1 one) is
 * reused; it is reset before each request (curl_easy_reset keeps live connections, the DNS and
 * TLS session caches) and set up again from the client, so no option of one request leaks into
 * the next. Watches run as separate easy handles in the client's multi handle (informer.c);
 * a share handle lends them the DNS and TLS-session caches. None of this is locked: a client
 * belongs to one thread at a time, as the header says.
 *
 * Error bodies are the API's `Status` objects (kind "Status", with reason, message, code and
 * details.retryAfterSeconds, see the API Concepts page); their reason picks between codes that
 * share an HTTP status (409 AlreadyExists vs Conflict).
 */
#define _POSIX_C_SOURCE 200809L /* strdup, nanosleep, clock_gettime */

#include "kube_int.h"

#include "gpusched/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define DEFAULT_QPS 50.0
#define DEFAULT_BURST 100u
#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_TOKEN_REREAD_MS 60000
#define DEFAULT_MAX_BODY ((size_t)64 << 20)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

/* libcurl's own process-wide state; the only one-time initialisation of the library. */
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int64_t mono_now_ms(void *ud)
{
    (void)ud;
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mono_sleep_ms(void *ud, int64_t ms)
{
    (void)ud;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int64_t gs__kube_now_ms(struct gs_kube_client *c)
{
    return c->clock.now_ms(c->clock.ud);
}

void gs__kube_throttle(struct gs_kube_client *c)
{
    int64_t wait = gs_kube_limiter_reserve(&c->limiter, gs__kube_now_ms(c));
    if (wait > 0)
        c->clock.sleep_ms(c->clock.ud, wait);
}

int gs_kube_status_to_err(long http_status, const char *reason)
{
    if (http_status >= 200 && http_status < 300)
        return GS_OK;
    switch (http_status) {
    case 0:
        return GS_EIO;
    case 400:
        return GS_EINVAL;
    case 401:
    case 403:
        return GS_EAUTH;
    case 404:
        return GS_ENOENT;
    case 409:
        return reason != NULL && strcmp(reason, "AlreadyExists") == 0 ? GS_EEXIST : GS_ECONFLICT;
    case 410:
        return GS_EGONE;
    case 422:
        return GS_EREJECTED;
    case 429:
        return GS_ETHROTTLED;
    case 504:
        return GS_ETIMEDOUT;
    default:
        return GS_EHTTP;
    }
}

void gs_kube_response_fini(struct gs_kube_response *r)
{
    if (r == NULL)
        return;
    json_decref(r->body);
    memset(r, 0, sizeof *r);
    r->retry_after_s = -1;
}

void gs__kube_read_status(struct gs_kube_response *r)
{
    json_t *b = r->body;
    if (!json_is_object(b))
        return;
    json_t *kind = json_object_get(b, "kind");
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "Status") != 0)
        return;
    json_t *reason = json_object_get(b, "reason");
    json_t *message = json_object_get(b, "message");
    json_t *ra = json_object_get(json_object_get(b, "details"), "retryAfterSeconds");
    if (json_is_string(reason))
        (void)snprintf(r->reason, sizeof r->reason, "%s", json_string_value(reason));
    if (json_is_string(message))
        (void)snprintf(r->message, sizeof r->message, "%s", json_string_value(message));
    if (json_is_integer(ra) && r->retry_after_s < 0)
        r->retry_after_s = (int64_t)json_integer_value(ra);
}

static int dup_blob(unsigned char **dst, size_t *dlen, const unsigned char *src, size_t len)
{
    *dst = NULL;
    *dlen = 0;
    if (src == NULL)
        return GS_OK;
    if ((*dst = malloc(len > 0 ? len : 1)) == NULL)
        return GS_ENOMEM;
    memcpy(*dst, src, len);
    *dlen = len;
    return GS_OK;
}

static int dup_str(char **dst, const char *src)
{
    *dst = NULL;
    if (src == NULL)
        return GS_OK;
    *dst = strdup(src);
    return *dst != NULL ? GS_OK : GS_ENOMEM;
}

int gs_kube_client_new(const struct gs_kube_config *cfg, const struct gs_kube_client_opts *opts,
                       struct gs_kube_client **out)
{
    static const struct gs_kube_client_opts defaults;
    struct gs_kube_client *c = NULL;
    int rc = GS_EINVAL;
    if (out == NULL)
        return GS_EINVAL;
    *out = NULL;
    if (cfg == NULL || cfg->server == NULL || cfg->server[0] == '\0')
        return GS_EINVAL;
    if (opts == NULL)
        opts = &defaults;
    (void)pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return GS_EIO;
    if ((c = calloc(1, sizeof *c)) == NULL)
        return GS_ENOMEM;
    rc = GS_ENOMEM;
    const struct gs_kube_config *s = cfg;
    struct gs_kube_config *t = &c->tls;
    if (dup_str(&c->server, s->server) || dup_str(&t->ca_file, s->ca_file) ||
        dup_blob(&t->ca_data, &t->ca_len, s->ca_data, s->ca_len) ||
        dup_str(&t->cert_file, s->cert_file) ||
        dup_blob(&t->cert_data, &t->cert_len, s->cert_data, s->cert_len) ||
        dup_str(&t->key_file, s->key_file) ||
        dup_blob(&t->key_data, &t->key_len, s->key_data, s->key_len) ||
        dup_str(&c->token, s->token) || dup_str(&c->token_file, s->token_file))
        goto out;
    t->insecure_skip_tls_verify = s->insecure_skip_tls_verify;
    size_t n = strlen(c->server);
    while (n > 0 && c->server[n - 1] == '/')
        c->server[--n] = '\0';
    if (opts->clock != NULL && opts->clock->now_ms != NULL && opts->clock->sleep_ms != NULL)
        c->clock = *opts->clock;
    else
        c->clock = (struct gs_kube_clock){.now_ms = mono_now_ms, .sleep_ms = mono_sleep_ms};
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->connect_timeout_ms =
        opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    c->token_reread_ms =
        opts->token_reread_ms > 0 ? opts->token_reread_ms : DEFAULT_TOKEN_REREAD_MS;
    c->max_body_bytes = opts->max_body_bytes > 0 ? opts->max_body_bytes : DEFAULT_MAX_BODY;
    if (dup_str(&c->user_agent, opts->user_agent != NULL ? opts->user_agent : "gpusched/0.1.0"))
        goto out;
    double qps = opts->qps == 0 ? DEFAULT_QPS : opts->qps;
    c->token_read_ms = gs__kube_now_ms(c);
    gs_kube_limiter_init(&c->limiter, qps, opts->burst > 0 ? opts->burst : DEFAULT_BURST,
                         c->token_read_ms);
    rc = GS_EIO;
    if ((c->easy = curl_easy_init()) == NULL || (c->share = curl_share_init()) == NULL ||
        (c->multi = curl_multi_init()) == NULL)
        goto out;
    if (curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)
        goto out;
    /* Several watches may share one HTTP/2 connection, as client-go's do. */
    (void)curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    *out = c;
    c = NULL;
    rc = GS_OK;
out:
    gs_kube_client_free(c);
    return rc;
}

void gs_kube_client_free(struct gs_kube_client *c)
{
    if (c == NULL)
        return;
    while (c->informers != NULL)
        gs_kube_informer_free(c->informers);
    if (c->multi != NULL)
        (void)curl_multi_cleanup(c->multi);
    if (c->batch != NULL)
        (void)curl_multi_cleanup(c->batch);
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    if (c->share != NULL)
        (void)curl_share_cleanup(c->share);
    gs_kube_config_fini(&c->tls);
    if (c->token != NULL)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    free(c->token_file);
    free(c->server);
    free(c->user_agent);
    free(c);
}

int gs__kube_setup_easy(struct gs_kube_client *c, CURL *h)
{
    const struct gs_kube_config *t = &c->tls;
    CURLcode e = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (e == CURLE_OK)                                                                         \
            e = curl_easy_setopt(h, opt, val);                                                     \
    } while (0)
    SET(CURLOPT_SHARE, c->share);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_USERAGENT, c->user_agent);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_PIPEWAIT, 1L);
    if (t->insecure_skip_tls_verify) {
        SET(CURLOPT_SSL_VERIFYPEER, 0L);
        SET(CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (t->ca_file != NULL)
        SET(CURLOPT_CAINFO, t->ca_file);
    if (t->ca_data != NULL) {
        struct curl_blob b = {.data = t->ca_data, .len = t->ca_len, .flags = CURL_BLOB_COPY};
        SET(CURLOPT_CAINFO_BLOB, &b);
    }
    if (t->cert_file != NULL)
        SET(CURLOPT_SSLCERT, t->cert_file);
    if (t->cert_data != NULL) {
        struct curl_blob b = {.data = t->cert_data, .len = t->cert_len, .flags = CURL_BLOB_COPY};
        SET(CURLOPT_SSLCERT_BLOB, &b);
        SET(CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (t->key_file != NULL)
        SET(CURLOPT_SSLKEY, t->key_file);
    if (t->key_data != NULL) {
        struct curl_blob b = {.data = t->key_data, .len = t->key_len, .flags = CURL_BLOB_COPY};
        SET(CURLOPT_SSLKEY_BLOB, &b);
        SET(CURLOPT_SSLKEYTYPE, "PEM");
    }
#undef SET
    return e == CURLE_OK ? GS_OK : GS_EIO;
}

/* Re-reads the token file now; keeps the old token when the file cannot be read. */
static bool reread_token(struct gs_kube_client *c)
{
    char *t = NULL;
    struct gs_kube_diag d;
    c->token_read_ms = gs__kube_now_ms(c);
    if (gs__kube_read_token(c->token_file, &t, &d) != GS_OK)
        return false;
    bool changed = c->token == NULL || strcmp(t, c->token) != 0;
    free(c->token);
    c->token = t;
    return changed;
}

struct curl_slist *gs__kube_headers(struct gs_kube_client *c, const char *content_type)
{
    struct curl_slist *l = NULL, *n;
    char line[256];
    if (c->token_file != NULL && gs__kube_now_ms(c) - c->token_read_ms >= c->token_reread_ms)
        (void)reread_token(c);
    if ((n = curl_slist_append(l, "Accept: application/json")) == NULL)
        goto fail;
    l = n;
    if (content_type != NULL) {
        (void)snprintf(line, sizeof line, "Content-Type: %s", content_type);
        if ((n = curl_slist_append(l, line)) == NULL)
            goto fail;
        l = n;
    }
    if (c->token != NULL) {
        size_t len = strlen(c->token) + 32;
        char *h = malloc(len);
        if (h == NULL)
            goto fail;
        (void)snprintf(h, len, "Authorization: Bearer %s", c->token);
        n = curl_slist_append(l, h);
        memset(h, 0, len);
        free(h);
        if (n == NULL)
            goto fail;
        l = n;
    }
    return l;
fail:
    curl_slist_free_all(l);
    return NULL;
}

/** What the body and header callbacks of one blocking request write to. */
struct sink {
    struct gs__kube_buf body; /**< the response body, bounded */
    bool over;                /**< the body passed its bound */
    bool oom;                 /**< a body append ran out of memory */
    int64_t retry_after_s;    /**< Retry-After (delta-seconds form), -1 when absent */
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t n = size * nmemb;
    int rc = gs__kube_buf_add(&s->body, data, n);
    if (rc == GS_ELIMIT)
        s->over = true;
    else if (rc != GS_OK)
        s->oom = true;
    return rc == GS_OK ? n : 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t n = size * nmemb;
    static const char key[] = "retry-after:";
    /* A new status line (after a 100 Continue or a redirect) starts a new header set. */
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0)
        s->retry_after_s = -1;
    if (n > sizeof key - 1 && strncasecmp(data, key, sizeof key - 1) == 0) {
        long long v = 0;
        size_t i = sizeof key - 1;
        while (i < n && data[i] == ' ')
            i++;
        size_t d0 = i;
        while (i < n && data[i] >= '0' && data[i] <= '9' && v < 1000000000)
            v = v * 10 + (data[i++] - '0');
        if (i > d0)
            s->retry_after_s = (int64_t)v;
    }
    return n;
}

static const char *method_name(enum gs_kube_method m)
{
    switch (m) {
    case GS_KUBE_GET:
        return "GET";
    case GS_KUBE_POST:
        return "POST";
    case GS_KUBE_PUT:
        return "PUT";
    case GS_KUBE_PATCH_MERGE:
    case GS_KUBE_PATCH_STRATEGIC:
    case GS_KUBE_PATCH_JSON:
        return "PATCH";
    case GS_KUBE_DELETE:
        return "DELETE";
    }
    return NULL;
}

static const char *content_type_of(enum gs_kube_method m)
{
    switch (m) {
    case GS_KUBE_PATCH_MERGE:
        return "application/merge-patch+json";
    case GS_KUBE_PATCH_STRATEGIC:
        return "application/strategic-merge-patch+json";
    case GS_KUBE_PATCH_JSON:
        return "application/json-patch+json";
    default:
        return "application/json";
    }
}

/* One transfer being set up, run and read: the blocking request's or one call of a batch. */
struct xfer {
    CURL *h;                     /**< the easy handle (the client's, or the batch's own) */
    struct sink s;               /**< body and headers as they arrive */
    struct curl_slist *hdrs;     /**< request headers (owned) */
    const char *url;             /**< full URL */
    const char *text;            /**< serialised body, or NULL */
    char err[CURL_ERROR_SIZE];   /**< libcurl's error text */
};

/* Sets up `x->h` for one request; `x->url` and `x->text` are set. @return GS_OK, or an error
 * with its text in resp->message. */
static int prepare(struct gs_kube_client *c, struct xfer *x, enum gs_kube_method method,
                   struct gs_kube_response *resp)
{
    CURL *h = x->h;
    const char *url = x->url, *body = x->text;
    CURLcode e = CURLE_OK;
    int rc;

    x->s = (struct sink){.body = {.max = c->max_body_bytes}, .retry_after_s = -1};
    x->err[0] = '\0';
    gs_kube_response_fini(resp);
    curl_slist_free_all(x->hdrs);
    x->hdrs = gs__kube_headers(c, body != NULL ? content_type_of(method) : NULL);
    if (x->hdrs == NULL)
        return GS_ENOMEM;
    curl_easy_reset(h);
    rc = gs__kube_setup_easy(c, h);
    if (rc != GS_OK)
        return rc;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (e == CURLE_OK)                                                                         \
            e = curl_easy_setopt(h, opt, val);                                                     \
    } while (0)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_HTTPHEADER, x->hdrs);
    SET(CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, &x->s);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, &x->s);
    SET(CURLOPT_ERRORBUFFER, x->err);
    if (body != NULL) {
        SET(CURLOPT_POSTFIELDS, body);
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    if (method != GS_KUBE_GET && method != GS_KUBE_POST)
        SET(CURLOPT_CUSTOMREQUEST, method_name(method));
    if (method == GS_KUBE_POST && body == NULL) {
        SET(CURLOPT_POSTFIELDS, "");
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
#undef SET
    if (e != CURLE_OK) {
        (void)snprintf(resp->message, sizeof resp->message, "%s", curl_easy_strerror(e));
        return GS_EIO;
    }
    return GS_OK;
}

/* Reads the outcome `e` of a transfer that prepare() set up into resp. @return its code. */
static int finish(struct xfer *x, CURLcode e, size_t max_body_bytes,
                  struct gs_kube_response *resp)
{
    CURL *h = x->h;
    struct sink s = x->s;
    int rc;
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->http_status);
    long ver = 0;
    (void)curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver);
    resp->http_major = ver == CURL_HTTP_VERSION_2_0 ? 2 : (ver != 0 ? 1 : 0);
    (void)curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &resp->new_connections);
    resp->retry_after_s = s.retry_after_s;
    if (s.over) {
        rc = GS_ELIMIT;
        (void)snprintf(resp->message, sizeof resp->message,
                       "response body over the limit of %zu bytes", max_body_bytes);
        goto out;
    }
    if (s.oom) {
        rc = GS_ENOMEM;
        goto out;
    }
    if (e != CURLE_OK) {
        rc = e == CURLE_OPERATION_TIMEDOUT ? GS_ETIMEDOUT : GS_EIO;
        (void)snprintf(resp->message, sizeof resp->message, "%s",
                       x->err[0] != '\0' ? x->err : curl_easy_strerror(e));
        goto out;
    }
    if (s.body.len > 0) {
        json_error_t jerr;
        resp->body = json_loadb(s.body.p, s.body.len, 0, &jerr);
        if (resp->body == NULL) {
            if (resp->http_status >= 200 && resp->http_status < 300) {
                rc = GS_EPARSE;
                (void)snprintf(resp->message, sizeof resp->message, "response is not JSON: %s",
                               jerr.text);
                goto out;
            }
            /* A proxy's or a plain-text error: keep its start as the message. */
            (void)snprintf(resp->message, sizeof resp->message, "%.200s", s.body.p);
        }
    }
    gs__kube_read_status(resp);
    rc = gs_kube_status_to_err(resp->http_status, resp->reason);
out:
    gs__kube_buf_free(&x->s.body);
    return rc;
}

/* One attempt of a blocking request on the client's own handle. */
static int attempt(struct gs_kube_client *c, enum gs_kube_method method, const char *url,
                   const char *body, struct gs_kube_response *resp)
{
    struct xfer x = {.h = c->easy, .url = url, .text = body};
    int rc = prepare(c, &x, method, resp);
    if (rc == GS_OK)
        rc = finish(&x, curl_easy_perform(c->easy), c->max_body_bytes, resp);
    else
        gs__kube_buf_free(&x.s.body);
    (void)snprintf(c->curl_err, sizeof c->curl_err, "%s", x.err);
    curl_slist_free_all(x.hdrs);
    return rc;
}

int gs_kube_request(struct gs_kube_client *c, enum gs_kube_method method, const char *path,
                    const json_t *body, struct gs_kube_response *resp)
{
    char *text = NULL, *url = NULL;
    int rc = GS_EINVAL;
    if (resp == NULL)
        return GS_EINVAL;
    memset(resp, 0, sizeof *resp);
    resp->retry_after_s = -1;
    if (c == NULL || path == NULL || path[0] != '/' || method_name(method) == NULL)
        return GS_EINVAL;
    rc = GS_ENOMEM;
    if (body != NULL && (text = json_dumps(body, JSON_COMPACT)) == NULL)
        goto out;
    size_t n = strlen(c->server) + strlen(path) + 1;
    if ((url = malloc(n)) == NULL)
        goto out;
    (void)snprintf(url, n, "%s%s", c->server, path);
    gs__kube_throttle(c);
    rc = attempt(c, method, url, text, resp);
    /* A rotated token: try once more with the file's new content (client-go does the same). */
    if (rc == GS_EAUTH && resp->http_status == 401 && c->token_file != NULL && reread_token(c)) {
        gs__kube_throttle(c);
        rc = attempt(c, method, url, text, resp);
    }
out:
    free(text);
    free(url);
    return rc;
}

/* One call of a batch: its transfer and the strings it owns. */
struct batch_slot {
    struct xfer x;
    char *url, *text;
    bool added; /**< in the multi handle */
};

int gs_kube_request_many(struct gs_kube_client *c, struct gs_kube_call *calls, size_t n,
                         uint32_t max_in_flight)
{
    if (n == 0)
        return GS_OK;
    if (c == NULL || calls == NULL)
        return GS_EINVAL;
    for (size_t i = 0; i < n; i++) {
        memset(&calls[i].resp, 0, sizeof calls[i].resp);
        calls[i].resp.retry_after_s = -1;
        calls[i].rc = GS_EINVAL;
    }
    if (max_in_flight == 0)
        max_in_flight = 1;
    if (c->batch == NULL) {
        if ((c->batch = curl_multi_init()) == NULL)
            return GS_EIO;
        /* Concurrent calls share one HTTP/2 connection where the server offers it. */
        (void)curl_multi_setopt(c->batch, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    struct batch_slot *sl = calloc(n, sizeof *sl);
    if (sl == NULL)
        return GS_ENOMEM;
    int rc = GS_OK;
    size_t next = 0, done = 0, running = 0;
    while (done < n) {
        /* Start calls up to the bound, each after its rate-limiter token. */
        while (next < n && running < max_in_flight) {
            struct gs_kube_call *k = &calls[next];
            struct batch_slot *b = &sl[next];
            int err = GS_EINVAL;
            if (k->path != NULL && k->path[0] == '/' && method_name(k->method) != NULL) {
                size_t len = strlen(c->server) + strlen(k->path) + 1;
                err = GS_ENOMEM;
                if ((b->url = malloc(len)) != NULL &&
                    (k->body == NULL || (b->text = json_dumps(k->body, JSON_COMPACT)) != NULL) &&
                    (b->x.h = curl_easy_init()) != NULL) {
                    (void)snprintf(b->url, len, "%s%s", c->server, k->path);
                    b->x.url = b->url;
                    b->x.text = b->text;
                    err = prepare(c, &b->x, k->method, &k->resp);
                    /* Wait for a multiplexed connection rather than open one per call. */
                    if (err == GS_OK) {
                        (void)curl_easy_setopt(b->x.h, CURLOPT_PIPEWAIT, 1L);
                        (void)curl_easy_setopt(b->x.h, CURLOPT_PRIVATE, (void *)b);
                    }
                    if (err == GS_OK && curl_multi_add_handle(c->batch, b->x.h) != CURLM_OK)
                        err = GS_EIO;
                }
            }
            if (err == GS_OK) {
                gs__kube_throttle(c);
                b->added = true;
                running++;
            } else {
                k->rc = err;
                done++;
            }
            next++;
        }
        int still = 0;
        if (curl_multi_perform(c->batch, &still) != CURLM_OK) {
            rc = GS_EIO;
            break;
        }
        CURLMsg *m;
        int left = 0;
        while ((m = curl_multi_info_read(c->batch, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            CURL *h = m->easy_handle;
            CURLcode e = m->data.result;
            void *priv = NULL;
            (void)curl_easy_getinfo(h, CURLINFO_PRIVATE, &priv);
            struct batch_slot *b = priv;
            if (b == NULL || b < sl || b >= sl + next || !b->added)
                continue;
            size_t i = (size_t)(b - sl);
            (void)curl_multi_remove_handle(c->batch, h);
            sl[i].added = false;
            calls[i].rc = finish(&sl[i].x, e, c->max_body_bytes, &calls[i].resp);
            running--;
            done++;
        }
        if (done < n && running > 0 &&
            curl_multi_poll(c->batch, NULL, 0, 100, NULL) != CURLM_OK) {
            rc = GS_EIO;
            break;
        }
    }
    for (size_t i = next; i < n; i++)
        calls[i].rc = GS_EIO; /* never started: the multi interface failed */
    for (size_t i = 0; i < n; i++) {
        if (sl[i].added) {
            (void)curl_multi_remove_handle(c->batch, sl[i].x.h);
            calls[i].rc = GS_EIO;
            gs__kube_buf_free(&sl[i].x.s.body);
        }
        if (sl[i].x.h != NULL)
            curl_easy_cleanup(sl[i].x.h);
        curl_slist_free_all(sl[i].x.hdrs);
        free(sl[i].url);
        free(sl[i].text);
    }
    free(sl);
    /* A rotated token: the calls refused with 401 go once more, one by one, as
     * gs_kube_request does. */
    for (size_t i = 0; rc == GS_OK && i < n; i++) {
        if (calls[i].rc == GS_EAUTH && calls[i].resp.http_status == 401) {
            gs_kube_response_fini(&calls[i].resp);
            calls[i].rc = gs_kube_request(c, calls[i].method, calls[i].path, calls[i].body,
                                          &calls[i].resp);
        }
    }
    return rc;
}
