/*
 * Internal interface of the Kubernetes client (src/k8s): the client and informer structs,
 * shared by http.c (requests), list.c (paged lists) and informer.c (watches), and the small
 * helpers config.c lends the others. Not part of the public API (include/gpusched/kube.h).
 */
#ifndef GPUSCHED_K8S_KUBE_INT_H
#define GPUSCHED_K8S_KUBE_INT_H

#include "gpusched/compiler.h"
#include "gpusched/kube.h"
#include "gpusched/rng.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Largest token file read, bytes. */
#define GS__KUBE_TOKEN_MAX_BYTES (64u << 10)

/**
 * Reads a bearer token file: the whole file less surrounding whitespace.
 * @param token  receives a malloc'd string (caller frees); NULL on failure.
 * @param diag   on failure: "cannot read 'PATH': REASON", "token file is empty", "file is over
 *               the limit of N bytes"; may be NULL.
 * @return GS_OK; GS_EIO; GS_EPARSE (empty); GS_ENOMEM.
 */
int gs__kube_read_token(const char *path, char **token, struct gs_kube_diag *diag);

/** Fills a diagnostic (file, no line) with a formatted message; NULL diag is a no-op. */
void gs__kube_diag_set(struct gs_kube_diag *d, const char *file, const char *fmt, ...)
    GS_PRINTF(3, 4);

/** A growing byte buffer with a hard maximum (curl's dynbuf idea). */
struct gs__kube_buf {
    char *p;    /**< bytes, NUL-terminated when len > 0 */
    size_t len; /**< bytes held */
    size_t cap; /**< bytes allocated */
    size_t max; /**< most bytes it may hold */
};

/** Appends n bytes; GS_ELIMIT past max (nothing appended), GS_ENOMEM. */
int gs__kube_buf_add(struct gs__kube_buf *b, const void *data, size_t n);

/** Frees and zeroes the buffer, keeping max. */
void gs__kube_buf_free(struct gs__kube_buf *b);

/** Informer states. */
enum gs__inf_state {
    GS__INF_NEED_LIST,  /**< no usable RV: list (at next_ms) */
    GS__INF_NEED_WATCH, /**< have an RV: open a watch (at next_ms) */
    GS__INF_WATCHING,   /**< a watch transfer is in the multi handle */
};

struct gs_kube_informer {
    struct gs_kube_client *client;       /**< owner */
    struct gs_kube_informer *next;       /**< the client's list of informers */
    char *path;                          /**< collection path */
    char *query;                         /**< extra query or NULL */
    uint32_t page_limit;                 /**< list page size */
    uint32_t watch_timeout_s;            /**< timeoutSeconds per watch */
    gs_kube_informer_fn cb;              /**< the caller's callback */
    void *ud;                            /**< its argument */
    gs_kube_rng_fn rng;                  /**< jitter source */
    void *rng_ud;                        /**< its argument */
    struct gs_rng rng_default;           /**< the default generator's state (when rng is ours) */
    struct gs_kube_backoff backoff;      /**< between failed attempts */
    enum gs__inf_state state;            /**< what comes next */
    int64_t next_ms;                     /**< earliest time of the next attempt (client clock) */
    char *rv;                            /**< RV to resume from; NULL when a list is needed */
    bool synced;                         /**< a list was delivered and no relist is pending */
    CURL *watch;                         /**< the watch transfer while WATCHING */
    struct curl_slist *watch_headers;    /**< its headers */
    struct gs_kube_watch_parser *parser; /**< frames the watch body */
    struct gs__kube_buf err_body;        /**< a failing watch's body (bounded) for the message */
    long watch_status;                   /**< HTTP status of the watch, once the headers are in */
    int watch_err;                       /**< why the current watch must end (GS_OK while fine) */
    bool watch_gone;                     /**< the watch saw an ERROR event with code 410 */
    uint64_t watch_events;               /**< events of the current watch (for backoff reset) */
    struct gs_kube_informer_stats stats; /**< counters */
    char last_error[512];                /**< the last failure's sentence */
};

struct gs__kube_async;

struct gs_kube_client {
    char *server;                       /**< base URL without a trailing '/' */
    struct gs_kube_config tls;          /**< copies of the TLS material (server unused) */
    char *token;                        /**< current bearer token or NULL */
    char *token_file;                   /**< file the token comes from, or NULL */
    int64_t token_read_ms;              /**< when token_file was last read */
    int64_t token_reread_ms;            /**< re-read period */
    int64_t timeout_ms;                 /**< per-request limit */
    int64_t connect_timeout_ms;         /**< connect limit */
    size_t max_body_bytes;              /**< response body bound */
    char *user_agent;                   /**< User-Agent header value */
    struct gs_kube_clock clock;         /**< time source */
    struct gs_kube_limiter limiter;     /**< request rate limit */
    CURL *easy;                         /**< the handle of blocking requests (keeps connections) */
    CURLSH *share;                      /**< DNS and TLS session cache shared with watches */
    CURLM *multi;                       /**< the watches' transfers */
    struct gs_kube_informer *informers; /**< informers, newest first */
    struct gs__kube_async *asyncs;      /**< requests in flight (gs_kube_request_async) */
    size_t n_async;                     /**< how many, the queued ones included */
    struct gs__kube_async *queue_head;  /**< async requests waiting for a slot, oldest first */
    struct gs__kube_async *queue_tail;
    struct gs__kube_async *bg_head; /**< background ones waiting, oldest first */
    struct gs__kube_async *bg_tail;
    size_t n_active;                /**< async transfers in the multi handle */
    size_t n_bg_active;             /**< of which background */
    char curl_err[CURL_ERROR_SIZE]; /**< libcurl's error text of the last blocking request */
};

/**
 * Applies the client's common options (TLS, HTTP/2, timeouts, share handle, user agent) to an
 * easy handle. @return GS_OK or GS_EIO.
 */
int gs__kube_setup_easy(struct gs_kube_client *c, CURL *h);

/**
 * Builds the request header list: Accept, the bearer token (re-read from its file when due),
 * and `content_type` when not NULL. @return the list, or NULL when out of memory.
 */
struct curl_slist *gs__kube_headers(struct gs_kube_client *c, const char *content_type);

/** Reads the client's clock. */
int64_t gs__kube_now_ms(struct gs_kube_client *c);

/** Waits for a rate-limiter token (sleeping on the client's clock). */
void gs__kube_throttle(struct gs_kube_client *c);

/**
 * Fills reason, message and retry_after_s of a response from a Status object in its body.
 * Leaves fields alone that the body does not give.
 */
void gs__kube_read_status(struct gs_kube_response *r);

/** What the body and header callbacks of one request write to. */
struct gs__kube_sink {
    struct gs__kube_buf body; /**< the response body, bounded */
    bool over;                /**< the body passed its bound */
    bool oom;                 /**< a body append ran out of memory */
    int64_t retry_after_s;    /**< Retry-After (delta-seconds form), -1 when absent */
};

/**
 * Sets an easy handle up for one request (the client's common options, URL, method, headers,
 * body, bounded sinks). The caller keeps url, body, *s, *hdrs and errbuf (CURL_ERROR_SIZE) alive
 * until the transfer ends, then frees *hdrs and s->body. @return GS_OK; GS_ENOMEM; GS_EIO.
 */
int gs__kube_prepare(struct gs_kube_client *c, CURL *h, enum gs_kube_method method, const char *url,
                     const char *body, struct gs__kube_sink *s, struct curl_slist **hdrs,
                     char *errbuf);

/**
 * Fills a response from a finished transfer (status, version, body, Status fields) and maps it
 * to an error code as gs_kube_request does. @param e  the transfer's result.
 */
int gs__kube_finish(struct gs_kube_client *c, CURL *h, CURLcode e, struct gs__kube_sink *s,
                    const char *errbuf, struct gs_kube_response *resp);

/**
 * Called by gs_kube_client_step for each finished transfer: when it is an async request's, calls
 * its callback, frees it and returns true; false for any other handle.
 */
bool gs__kube_async_done(struct gs_kube_client *c, CURL *h, CURLcode res);

/** Removes and frees every request in flight without calling back (the client is freed). */
void gs__kube_async_abort_all(struct gs_kube_client *c);

#endif /* GPUSCHED_K8S_KUBE_INT_H */
