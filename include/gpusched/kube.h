/*
 * The Kubernetes API client of `gpusched scheduler` (library gpusched_k8s, src/k8s/).
 *
 * Five parts, each usable alone:
 *   - configuration: a kubeconfig file, $KUBECONFIG, or the in-cluster service account;
 *   - a client: one authenticated HTTPS connection pool doing GET/POST/PUT/PATCH/DELETE with
 *     JSON (jansson) bodies, mapping the API's `Status` errors to enum gs_err, behind a
 *     client-side QPS/burst token bucket; requests block, or (gs_kube_request_async) finish
 *     inside gs_kube_client_step with a callback;
 *   - paged lists (`limit` + `continue`, restarted on an expired continue token);
 *   - a watch-stream framing parser, free of I/O (unit-tested and fuzzed);
 *   - informers: list-then-watch of one resource path, with relist on 410 Gone and jittered
 *     exponential backoff between reconnects, all informers of a client driven by one call
 *     (gs_kube_client_step) that blocks at most a given time.
 * Design notes: docs/internals/k8s-client.md. API semantics followed: Kubernetes "API
 * Concepts" (kubernetes/website content/en/docs/reference/using-api/api-concepts.md) and
 * client-go's rest, tools/clientcmd, tools/cache (reflector) and util/flowcontrol packages.
 *
 * Thread-safety: the pure parts (gs_kube_diag_format, gs_kube_status_to_err, the limiter, the
 * backoff, the watch parser on distinct parsers) are reentrant. A gs_kube_client and the
 * informers made from it form one unit that must be used by one thread at a time (it holds
 * libcurl easy and multi handles, which are not thread-safe); use one client per thread for
 * parallel requests. libcurl must be initialised once per process (curl_global_init) before
 * the first client is made on another thread; gs_kube_client_new does it under pthread_once.
 */
#ifndef GPUSCHED_KUBE_H
#define GPUSCHED_KUBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- diagnostics -------------------------------------------------------------------------- */

/** Where a configuration problem is. Plain value record; zeroed by every loader first. */
struct gs_kube_diag {
    char file[256];  /**< file concerned (kubeconfig, token, CA...); "" when none */
    uint32_t line;   /**< 1-based line in `file`; 0 when not about one place in it */
    uint32_t column; /**< 1-based column; 0 when line is 0 */
    char field[128]; /**< path of the YAML key, e.g. "users[0].user.client-key-data"; "" if none */
    char msg[256];   /**< what is wrong, one sentence without a trailing period */
};

/**
 * Formats a diagnostic as "FILE:LINE:COLUMN: field 'F': MSG", leaving out ":LINE:COLUMN" when
 * line is 0, "field 'F': " when field is "" and "FILE: " when file is "".
 * @param buf  receives the text, NUL-terminated, truncated to cap bytes (cap may be 0).
 * @return the length snprintf would have written. Reentrant.
 */
int gs_kube_diag_format(const struct gs_kube_diag *d, char *buf, size_t cap);

/* ---- configuration ------------------------------------------------------------------------ */

/**
 * Where and how to reach the API server. Filled by a loader, released by gs_kube_config_fini.
 * Every pointer is malloc'd and owned by the record; NULL when absent. Paths are absolute or
 * relative to the working directory (kubeconfig-relative paths are already resolved).
 */
struct gs_kube_config {
    char *server;                  /**< base URL, "https://host:port[/prefix]", no trailing '/' */
    char *ca_file;                 /**< PEM bundle to verify the server with */
    unsigned char *ca_data;        /**< inline PEM (decoded certificate-authority-data) */
    size_t ca_len;                 /**< bytes in ca_data */
    bool insecure_skip_tls_verify; /**< do not verify the server's certificate or name */
    char *tls_server_name;         /**< name to verify the certificate against; unused (kept) */
    char *cert_file;               /**< client certificate, PEM */
    unsigned char *cert_data;      /**< inline client certificate, PEM */
    size_t cert_len;               /**< bytes in cert_data */
    char *key_file;                /**< client key, PEM */
    unsigned char *key_data;       /**< inline client key, PEM */
    size_t key_len;                /**< bytes in key_data */
    char *token;                   /**< bearer token (may be the first read of token_file) */
    char *token_file;              /**< file re-read periodically for a rotating bearer token */
    char *namespace_;              /**< the context's (or service account's) namespace; NULL */
};

/**
 * Loads the current context of a kubeconfig file (clientcmd format, apiVersion v1): its
 * cluster's `server`, `certificate-authority` / `certificate-authority-data`,
 * `insecure-skip-tls-verify`, `tls-server-name`, and its user's `client-certificate(-data)`,
 * `client-key(-data)`, `token`, `tokenFile`; relative paths are taken from the file's
 * directory. Only the one file is read (no merging of several). Referenced files must be
 * readable at load time; `tokenFile` is read once now (and again by the client as it rotates).
 * Unknown keys are ignored, as kubectl does; `exec`, `auth-provider` and `username`/`password`
 * are refused as unsupported.
 * @param path  the kubeconfig file (at most 1 MiB).
 * @param cfg   caller storage, overwritten; on failure left zeroed (nothing to release).
 * @param diag  on failure: file, line, column, field and message; may be NULL. Messages:
 *              "cannot open: REASON", "file is N bytes, over the limit of M", "YAML syntax
 *              error: PROBLEM", "the file is empty", "expected a mapping, found a list" (also
 *              "a scalar" / "a mapping" / "a list" in other places), "no current-context is
 *              set", "context 'X' is not in contexts", "duplicate name 'X'", "a name is
 *              required", "cluster 'X' is not in clusters", "user 'X' is not in users",
 *              "context 'X' names no cluster", "cluster 'X' has no server", "server 'S' is not
 *              an http:// or https:// URL", "not valid base64", "decoded data is empty",
 *              "both certificate-authority and certificate-authority-data are set", "both
 *              client-certificate and client-certificate-data are set" (and the key's),
 *              "client-certificate without client-key" (and the reverse), "not a boolean:
 *              'V'" , "insecure-skip-tls-verify cannot be combined with a certificate
 *              authority", "cannot read 'PATH': REASON", "exec credential plugins are not
 *              supported", "auth-provider plugins are not supported", "basic authentication
 *              (username/password) is not supported", "token file is empty".
 * @return GS_OK; GS_EIO (file unreadable or too big); GS_EPARSE (content); GS_EINVAL (NULL
 *         path or cfg); GS_ENOMEM.
 */
int gs_kube_config_load_file(const char *path, struct gs_kube_config *cfg,
                             struct gs_kube_diag *diag);

/**
 * Loads the in-cluster configuration the way client-go's rest.InClusterConfig does: server
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (IPv6 hosts bracketed), CA
 * `SA_DIR/ca.crt`, token file `SA_DIR/token` (read now, re-read by the client), namespace from
 * `SA_DIR/namespace` when present.
 * @param sa_dir  the service-account directory; NULL means
 *                "/var/run/secrets/kubernetes.io/serviceaccount".
 * @param diag    messages: "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set
 *                (not running in a cluster?)", "cannot read 'PATH': REASON", "token file is
 *                empty"; may be NULL.
 * @return GS_OK; GS_ENOENT (not in a cluster); GS_EIO; GS_ENOMEM. On failure cfg is zeroed.
 */
int gs_kube_config_load_in_cluster(const char *sa_dir, struct gs_kube_config *cfg,
                                   struct gs_kube_diag *diag);

/**
 * Loads the configuration a command-line tool expects: the first path of $KUBECONFIG when it
 * is set and not empty (further ':'-separated paths are ignored, not merged), else the
 * in-cluster configuration when KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
 * @return as the loader chosen.
 */
int gs_kube_config_load_default(struct gs_kube_config *cfg, struct gs_kube_diag *diag);

/** Releases what a loader filled and zeroes the record. NULL and a zeroed record are no-ops. */
void gs_kube_config_fini(struct gs_kube_config *cfg);

/* ---- rate limiting and backoff (pure) ----------------------------------------------------- */

/**
 * A token bucket as client-go's flowcontrol.NewTokenBucketRateLimiter: `burst` tokens at most,
 * refilled at `qps` per second. Plain value record; set it up with gs_kube_limiter_init.
 */
struct gs_kube_limiter {
    double qps;      /**< tokens per second; <= 0 disables limiting */
    double burst;    /**< bucket size, >= 1 */
    double tokens;   /**< tokens now (negative: reserved ahead) */
    int64_t last_ms; /**< time of the last refill, on the caller's clock */
};

/**
 * Starts a full bucket at time now_ms.
 * @param qps    tokens per second; <= 0 (or NaN) disables limiting.
 * @param burst  bucket size; 0 is taken as 1.
 */
void gs_kube_limiter_init(struct gs_kube_limiter *l, double qps, uint32_t burst, int64_t now_ms);

/**
 * Takes one token at now_ms, reserving it ahead when the bucket is empty, and says how long
 * the caller must wait before using it (client-go's Wait semantics: reservations queue up).
 * A clock that goes backwards refills nothing.
 * @return milliseconds to wait, >= 0 (0 when a token was there or limiting is off).
 */
int64_t gs_kube_limiter_reserve(struct gs_kube_limiter *l, int64_t now_ms);

/** Random source: returns 64 random bits. `ud` is the caller's. */
typedef uint64_t (*gs_kube_rng_fn)(void *ud);

/**
 * Jittered exponential backoff between reconnects. Attempt k (0-based since the last reset)
 * waits base_k = min(max_ms, initial_ms * 2^k), less up to jitter * base_k drawn uniformly:
 * delay in [base_k * (1 - jitter), base_k], never above max_ms.
 */
struct gs_kube_backoff {
    int64_t initial_ms; /**< first delay, > 0 */
    int64_t max_ms;     /**< cap, >= initial_ms */
    double jitter;      /**< fraction in [0, 1] taken off at random */
    uint32_t attempt;   /**< attempts since the last reset */
};

/**
 * Sets up a backoff; out-of-range values are clamped (initial_ms to >= 1, max_ms to >=
 * initial_ms, jitter to [0, 1]).
 */
void gs_kube_backoff_init(struct gs_kube_backoff *b, int64_t initial_ms, int64_t max_ms,
                          double jitter);

/**
 * Returns the next delay, ms, within the bounds above, and counts the attempt.
 * @param rng  draws one value; NULL means no jitter (the delay is base_k).
 */
int64_t gs_kube_backoff_next(struct gs_kube_backoff *b, gs_kube_rng_fn rng, void *rng_ud);

/** Forgets past attempts after a success: the next delay is initial_ms again. */
void gs_kube_backoff_reset(struct gs_kube_backoff *b);

/* ---- the client --------------------------------------------------------------------------- */

/** Injectable time: a monotonic clock and a sleep, both in ms. */
struct gs_kube_clock {
    int64_t (*now_ms)(void *ud);            /**< monotonic milliseconds */
    void (*sleep_ms)(void *ud, int64_t ms); /**< waits ms (> 0) */
    void *ud;                               /**< passed to both */
};

/** Options of a client; zero-initialise and set what differs from the defaults. */
struct gs_kube_client_opts {
    double qps;                        /**< request rate limit; 0 = 50, < 0 = unlimited */
    uint32_t burst;                    /**< bucket size; 0 = 100 */
    int64_t timeout_ms;                /**< whole-request limit of non-watch requests; 0 = 30000 */
    int64_t connect_timeout_ms;        /**< TCP+TLS connect limit; 0 = 10000 */
    int64_t token_reread_ms;           /**< re-read period of a token file; 0 = 60000 */
    size_t max_body_bytes;             /**< largest response body accepted; 0 = 64 MiB */
    const char *user_agent;            /**< copied; NULL = "gpusched/VERSION" */
    const struct gs_kube_clock *clock; /**< copied; NULL = CLOCK_MONOTONIC and nanosleep */
};

/** An API client. Opaque. */
struct gs_kube_client;

/**
 * Makes a client for a configuration. Nothing is sent yet. HTTP/2 is used over TLS when
 * libcurl and the server offer it (CURL_HTTP_VERSION_2TLS), HTTP/1.1 otherwise; connections
 * are kept and reused.
 * @param cfg   borrowed; everything needed is copied.
 * @param opts  borrowed; NULL = all defaults.
 * @param out   receives the client; NULL on failure.
 * @return GS_OK; GS_EINVAL (no server in cfg, NULL out); GS_EIO (libcurl could not start);
 *         GS_ENOMEM.
 */
int gs_kube_client_new(const struct gs_kube_config *cfg, const struct gs_kube_client_opts *opts,
                       struct gs_kube_client **out);

/** Frees a client and every informer made from it. NULL is a no-op. */
void gs_kube_client_free(struct gs_kube_client *c);

/** Request methods; the PATCH variants differ in Content-Type. */
enum gs_kube_method {
    GS_KUBE_GET,
    GS_KUBE_POST,
    GS_KUBE_PUT,
    GS_KUBE_PATCH_MERGE,     /**< application/merge-patch+json (RFC 7386) */
    GS_KUBE_PATCH_STRATEGIC, /**< application/strategic-merge-patch+json */
    GS_KUBE_PATCH_JSON,      /**< application/json-patch+json (RFC 6902; body is an array) */
    GS_KUBE_DELETE,
};

/** What a request got back. Caller storage; release with gs_kube_response_fini. */
struct gs_kube_response {
    long http_status;      /**< HTTP status; 0 when no response arrived */
    json_t *body;          /**< parsed JSON body (owned); NULL when empty or not JSON */
    char reason[64];       /**< a Status body's `reason` ("NotFound", "Expired"...); "" */
    char message[512];     /**< a Status body's `message`, or a transport error's text; "" */
    int64_t retry_after_s; /**< Retry-After header (or Status details.retryAfterSeconds); -1 */
    int http_major;        /**< HTTP version the answer came in: 1 or 2; 0 when none */
    long new_connections;  /**< connections opened for this request (0: an open one was reused) */
};

/** Releases the body and zeroes the record. NULL is a no-op. */
void gs_kube_response_fini(struct gs_kube_response *r);

/**
 * Maps an HTTP status and Status `reason` to an error code: 2xx GS_OK; 401/403 GS_EAUTH; 404
 * GS_ENOENT; 409 GS_EEXIST when reason is "AlreadyExists", else GS_ECONFLICT; 410 GS_EGONE;
 * 422 GS_EREJECTED; 429 GS_ETHROTTLED; 504 GS_ETIMEDOUT; 400 GS_EINVAL (BadRequest); 0 (no
 * response) GS_EIO; any other GS_EHTTP. Reentrant.
 * @param reason  may be NULL.
 */
int gs_kube_status_to_err(long http_status, const char *reason);

/**
 * Sends one request and waits for the whole response (at most opts.timeout_ms), after taking a
 * token from the rate limiter (sleeping on the client's clock when it must). A bearer token
 * file is re-read when its period is over, and once more on a 401 (the request is then
 * retried once with the new token).
 * @param path  absolute API path with optional query, already URL-escaped,
 *              e.g. "/api/v1/namespaces/default/pods?labelSelector=app%3Dx".
 * @param body  request body (borrowed) or NULL; serialised compactly.
 * @param resp  caller storage, overwritten; filled on success and on HTTP errors alike (status,
 *              body, Status reason/message, Retry-After); release with gs_kube_response_fini.
 * @return GS_OK (2xx); a gs_kube_status_to_err code for any other status; GS_EIO (transport
 *         error: message says libcurl's reason); GS_ETIMEDOUT (request timed out); GS_ELIMIT
 *         (body over max_body_bytes); GS_EPARSE (2xx body that is not JSON); GS_EINVAL (bad
 *         arguments); GS_ENOMEM.
 */
int gs_kube_request(struct gs_kube_client *c, enum gs_kube_method method, const char *path,
                    const json_t *body, struct gs_kube_response *resp);

/** A whole list. Caller storage; release with gs_kube_list_fini. */
struct gs_kube_list {
    json_t *items;          /**< JSON array of the objects (owned), in server order */
    char *resource_version; /**< the list's metadata.resourceVersion (owned) */
    uint32_t pages;         /**< requests the last successful attempt took */
    uint32_t restarts;      /**< restarts after an expired continue token */
};

/** Releases a list and zeroes it. NULL is a no-op. */
void gs_kube_list_fini(struct gs_kube_list *l);

/**
 * Lists a collection page by page (`limit`, then `continue` until it is empty) into one array.
 * A continue token that expired (410) restarts the list from the first page, at most 3 times.
 * Each object of `items` gets the list's `kind` without "List" and its `apiVersion` if it has
 * none (the server leaves them out of list items).
 * @param path   collection path, e.g. "/api/v1/nodes"; no query.
 * @param query  extra query (escaped, without '?'), e.g. "labelSelector=a%3Db", or NULL.
 * @param limit  page size; 0 means no limit (one request).
 * @param out    caller storage, overwritten; zeroed on failure.
 * @param resp   optional: the failing request's response (status, reason, message) on error;
 *               released by the caller with gs_kube_response_fini either way.
 * @return GS_OK; GS_EGONE (still expired after 3 restarts); GS_EPARSE (not a list); any code of
 *         gs_kube_request.
 */
int gs_kube_list(struct gs_kube_client *c, const char *path, const char *query, uint32_t limit,
                 struct gs_kube_list *out, struct gs_kube_response *resp);

/**
 * Receives the end of an async request: its error code (as gs_kube_request returns) and its
 * response (borrowed: released after the call; incref resp->body to keep it). Runs inside
 * gs_kube_client_step; it may send requests (blocking or async) on the client, but must not step
 * or free it.
 */
typedef void (*gs_kube_done_fn)(void *ud, int err, struct gs_kube_response *resp);

/**
 * Starts a request that does not block: a transfer of the client's multi handle beside its
 * watches (over HTTP/2 the same connection), driven and finished by gs_kube_client_step, which
 * calls `done` once, with the outcome, in the order transfers finish. At most 64 run at once,
 * so that they share one HTTP/2 connection rather than open a TLS connection each; later calls
 * wait in call order and start as earlier ones end. A rate-limiter token is taken when a
 * request starts (sleeping as gs_kube_request does). The request's limit is opts.timeout_ms. A
 * 401 is not retried with a re-read token (the next request reads it). Requests still in flight
 * when the client is freed are dropped without a call.
 * @param path  as gs_kube_request; copied.
 * @param body  JSON, serialised now; may be NULL.
 * @return GS_OK (done will be called); GS_EINVAL (NULL client, path not starting with '/',
 *         NULL done); GS_ENOMEM; GS_EIO (libcurl refused the transfer). Nothing is called on
 *         failure.
 */
int gs_kube_request_async(struct gs_kube_client *c, enum gs_kube_method method, const char *path,
                          const json_t *body, gs_kube_done_fn done, void *ud);

/**
 * As gs_kube_request_async, for a request that may wait behind the others (an Event): it waits
 * in its own FIFO and starts only while no gs_kube_request_async request is waiting for a slot,
 * with at most 8 background requests running at once while any other async request runs (up to
 * the 64 slots when none does). So while Bindings queue, Events wait; they are not dropped (only
 * freeing the client drops what is left). Same parameters, return codes and callback contract.
 */
int gs_kube_request_async_background(struct gs_kube_client *c, enum gs_kube_method method,
                                     const char *path, const json_t *body, gs_kube_done_fn done,
                                     void *ud);

/** Async requests not finished yet: running, and waiting for one of the 64 slots. */
size_t gs_kube_client_in_flight(const struct gs_kube_client *c);

/* ---- watch events ------------------------------------------------------------------------- */

/** Types of watch events, and the two an informer adds around a (re)list. */
enum gs_kube_event_type {
    GS_KUBE_EVENT_ADDED,
    GS_KUBE_EVENT_MODIFIED,
    GS_KUBE_EVENT_DELETED,
    GS_KUBE_EVENT_BOOKMARK,
    GS_KUBE_EVENT_ERROR,
    GS_KUBE_EVENT_RELIST, /**< informer only: forget every object; ADDED for each follows */
    GS_KUBE_EVENT_SYNCED, /**< informer only: the (re)list has been delivered completely */
};

/** Returns "ADDED", "MODIFIED", ... ("?" for unknown values). Reentrant. */
const char *gs_kube_event_type_name(enum gs_kube_event_type t);

/** One decoded watch event. Everything is borrowed from the parser, valid during the callback. */
struct gs_kube_watch_event {
    enum gs_kube_event_type type; /**< ADDED..ERROR */
    json_t *object;               /**< the event's object (a Status for ERROR); incref to keep */
    const char *resource_version; /**< object.metadata.resourceVersion; NULL when absent */
    long status_code;             /**< ERROR: the Status's `code`; 0 otherwise or when absent */
    const char *reason;           /**< ERROR: the Status's `reason`; "" otherwise */
    const char *message;          /**< ERROR: the Status's `message`; "" otherwise */
};

/**
 * Receives a decoded event. Return 0 to go on, or a negative code to stop the feed, which then
 * returns that code.
 */
typedef int (*gs_kube_watch_event_fn)(void *ud, const struct gs_kube_watch_event *ev);

/** Default bound on one event's bytes: 16 MiB. */
#define GS_KUBE_WATCH_MAX_EVENT_BYTES ((size_t)16 << 20)

/**
 * The framing parser of a watch stream: a sequence of JSON objects (the API server writes one
 * per line, but whitespace, or nothing, between objects is accepted), each
 * {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": {...}}. It keeps only the
 * bytes of the one incomplete event, so its memory is bounded by max_event_bytes. Opaque.
 */
struct gs_kube_watch_parser;

/**
 * @param max_event_bytes  longest event accepted; 0 = GS_KUBE_WATCH_MAX_EVENT_BYTES.
 * @return GS_OK; GS_EINVAL (NULL out); GS_ENOMEM.
 */
int gs_kube_watch_parser_new(size_t max_event_bytes, struct gs_kube_watch_parser **out);

/** Frees a parser. NULL is a no-op. */
void gs_kube_watch_parser_free(struct gs_kube_watch_parser *p);

/** Forgets buffered bytes and any error, for a new stream. */
void gs_kube_watch_parser_reset(struct gs_kube_watch_parser *p);

/**
 * Feeds the next bytes of the stream; calls `cb` once per event completed by them, in order.
 * After an error the parser stays failed (every later feed returns the same code) until
 * reset: a stream with one bad event cannot be trusted to be framed right after it.
 * @param data  len bytes (data may be NULL when len is 0); borrowed.
 * @param cb    called per event; its non-zero return stops the feed and is returned.
 * @return GS_OK; GS_ELIMIT (an event longer than the bound); GS_EPARSE (bad JSON, a byte
 *         other than whitespace or '{' between events, no or unknown "type", no "object"
 *         object); GS_ENOMEM; or cb's code. Messages (gs_kube_watch_parser_error), each after
 *         "byte OFFSET: " (the stream offset of the event's '{', or of the stray byte):
 *         "event longer than N bytes", "expected '{' to start an event, found byte 0xHH",
 *         "bad JSON in event: JANSSON'S TEXT (after N bytes of it)", "event has no \"type\"",
 *         "unknown event type T" (T "(not a string)" for a non-string), "TYPE event has no
 *         \"object\" object", "out of memory"; from gs_kube_watch_parser_finish "stream ends
 *         inside an event".
 */
int gs_kube_watch_parser_feed(struct gs_kube_watch_parser *p, const void *data, size_t len,
                              gs_kube_watch_event_fn cb, void *ud);

/**
 * Says whether the stream may end here: GS_OK when no event is half-received, GS_EPARSE
 * ("stream ends inside an event") otherwise, or the code of an earlier failure.
 */
int gs_kube_watch_parser_finish(struct gs_kube_watch_parser *p);

/**
 * The last error's sentence with the stream offset, e.g. "byte 1042: event has no \"type\"";
 * "" when none. Valid until the next call on the parser.
 */
const char *gs_kube_watch_parser_error(const struct gs_kube_watch_parser *p);

/* ---- informers ---------------------------------------------------------------------------- */

/**
 * Receives an informer's changes: ADDED/MODIFIED/DELETED with the object (borrowed; incref to
 * keep it), RELIST (object NULL) before the objects of a (re)list arrive as ADDED, and SYNCED
 * (object NULL) after the last of them. BOOKMARK and ERROR events are handled inside and never
 * delivered. The callback may send requests on the client (gs_kube_request), but must not
 * call gs_kube_client_step or free the client or an informer.
 */
typedef void (*gs_kube_informer_fn)(void *ud, enum gs_kube_event_type type, json_t *object);

/** Options of an informer; zero-initialise and set what differs from the defaults. */
struct gs_kube_informer_opts {
    const char *path;         /**< collection path, e.g. "/api/v1/pods" (copied; required) */
    const char *query;        /**< extra escaped query, e.g. "fieldSelector=spec.nodeName%3D"
                                   (copied; NULL = none) */
    uint32_t page_limit;      /**< list page size; 0 = 500 */
    uint32_t watch_timeout_s; /**< timeoutSeconds of each watch; 0 = 300 (server may end sooner) */
    int64_t backoff_initial_ms;   /**< first reconnect delay; 0 = 800 */
    int64_t backoff_max_ms;       /**< longest reconnect delay; 0 = 30000 */
    double backoff_jitter;        /**< fraction of jitter in [0,1]; 0 = 0.5; < 0 = none */
    size_t max_event_bytes;       /**< bound on one watch event; 0 = 16 MiB */
    gs_kube_rng_fn rng;           /**< jitter source; NULL = an xoshiro seeded from the clock */
    void *rng_ud;                 /**< passed to rng */
    const char *resource_version; /**< start watching from this RV without a first list (the
                                      caller has the state up to it); NULL = list first */
};

/** A list-then-watch loop over one collection. Opaque; owned by its client. */
struct gs_kube_informer;

/**
 * Adds an informer to a client. Nothing is sent until gs_kube_client_step runs.
 * @param opts  borrowed; strings are copied.
 * @param cb    required; `ud` is passed to it.
 * @param out   receives the informer, owned by the client (freed with it or by
 *              gs_kube_informer_free); may be NULL.
 * @return GS_OK; GS_EINVAL (NULL cb or path, path not starting with '/'); GS_ENOMEM.
 */
int gs_kube_informer_new(struct gs_kube_client *c, const struct gs_kube_informer_opts *opts,
                         gs_kube_informer_fn cb, void *ud, struct gs_kube_informer **out);

/** Stops an informer (closing its watch) and frees it. NULL is a no-op. */
void gs_kube_informer_free(struct gs_kube_informer *inf);

/**
 * Drives every informer of the client once: lists those that need a (re)list (blocking, each
 * page limited by opts.timeout_ms), opens watches whose backoff delay is over, then waits for
 * watch data up to timeout_ms (less when a backoff deadline comes sooner) and delivers what
 * arrived. A watch that ends cleanly (timeoutSeconds) is reopened at once from the last RV; one
 * that fails (transport, HTTP error, bad stream) is reopened after a backoff delay; a 410 Gone
 * (HTTP status or an ERROR event with code 410) drops the RV and relists. Bookmarks only move
 * the RV. Failed lists are retried after a backoff delay too. Call it in a loop.
 * @param timeout_ms  longest wait for watch data, >= 0.
 * @return GS_OK; GS_ENOMEM; GS_EIO (libcurl's multi interface failed). Errors of single
 *         requests are not returned: they are retried, and the last one is kept for
 *         gs_kube_informer_last_error.
 */
int gs_kube_client_step(struct gs_kube_client *c, int64_t timeout_ms);

/** The resource version the informer would resume from; NULL before the first list. */
const char *gs_kube_informer_resource_version(const struct gs_kube_informer *inf);

/** True once a list has been delivered completely (SYNCED sent) and no relist is pending. */
bool gs_kube_informer_synced(const struct gs_kube_informer *inf);

/** Counters of an informer, for tests and metrics. */
struct gs_kube_informer_stats {
    uint64_t lists;     /**< completed lists */
    uint64_t watches;   /**< watch requests opened */
    uint64_t events;    /**< ADDED/MODIFIED/DELETED delivered from watches */
    uint64_t bookmarks; /**< bookmarks seen */
    uint64_t gone;      /**< 410 answers (HTTP or ERROR event) that caused a relist */
    uint64_t failures;  /**< failed lists and watches (retried after backoff) */
};

/** Copies the informer's counters. */
void gs_kube_informer_get_stats(const struct gs_kube_informer *inf,
                                struct gs_kube_informer_stats *st);

/**
 * The last failure's sentence, e.g. "watch /api/v1/pods: HTTP 403 Forbidden: pods is
 * forbidden..."; "" when none. Valid until the next gs_kube_client_step.
 */
const char *gs_kube_informer_last_error(const struct gs_kube_informer *inf);

/* ---- leader election ---------------------------------------------------------------------- */

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's tools/leaderelection
 * (LeaseLock) does it: a candidate reads the Lease every retry period; it takes the Lease when
 * there is none (create), when its holderIdentity is empty, or when the record has not changed
 * for leaseDurationSeconds of the candidate's own clock (the record's resourceVersion is
 * watched, so clocks of different machines are never compared); it writes with the
 * resourceVersion it read, so of two candidates one wins and the other is answered 409. The
 * holder renews every retry period; one that has not renewed for renew_deadline_ms is no longer
 * the leader (gs_kube_leader_is_leader turns false at once, before the Lease can expire for
 * anyone else, as renew_deadline_ms < lease_duration_ms).
 */
struct gs_kube_leader_opts {
    const char *namespace_;    /**< the Lease's namespace (copied; required) */
    const char *name;          /**< the Lease's name (copied; required) */
    const char *identity;      /**< holderIdentity written (copied; required, unique per process) */
    int64_t lease_duration_ms; /**< leaseDurationSeconds (rounded up to s); 0 = 15000 */
    int64_t renew_deadline_ms; /**< leader gives up after this without a renewal; 0 = 10000 */
    int64_t retry_period_ms;   /**< time between attempts; 0 = 2000 */
};

/** A candidate for one Lease. Opaque; borrows its client. */
struct gs_kube_leader;

/**
 * Makes a candidate. Nothing is sent until gs_kube_leader_step.
 * @param c     borrowed; must outlive the candidate. Its request timeout should be below the
 *              renew deadline (a hung renewal must not outlive the lease).
 * @return GS_OK; GS_EINVAL (NULL or empty strings, renew deadline not below the duration,
 *         retry period not below the renew deadline); GS_ENOMEM.
 */
int gs_kube_leader_new(struct gs_kube_client *c, const struct gs_kube_leader_opts *opts,
                       struct gs_kube_leader **out);

/** Frees a candidate (it does not release the Lease). NULL is a no-op. */
void gs_kube_leader_free(struct gs_kube_leader *l);

/**
 * Tries to acquire or renew the Lease when the retry period since the last attempt is over
 * (else returns at once). Blocks for at most two requests (GET, then create or update).
 * @param now_ms  the caller's monotonic clock.
 * @return GS_OK (whatever the outcome; ask gs_kube_leader_is_leader); GS_ENOMEM.
 */
int gs_kube_leader_step(struct gs_kube_leader *l, int64_t now_ms);

/**
 * True while this candidate holds the Lease and renewed it less than renew_deadline_ms ago
 * (by now_ms); a leader whose deadline passed is marked lost and never leader again.
 */
bool gs_kube_leader_is_leader(struct gs_kube_leader *l, int64_t now_ms);

/** True once this candidate was the leader and lost the Lease (deadline passed or taken). */
bool gs_kube_leader_lost(const struct gs_kube_leader *l);

/**
 * Gives the Lease up when this candidate holds it: holderIdentity emptied and
 * leaseDurationSeconds 1, so a standby takes it at its next attempt. Afterwards the candidate is
 * no longer the leader. @return GS_OK (also when not the leader); a gs_kube_request code.
 */
int gs_kube_leader_release(struct gs_kube_leader *l, int64_t now_ms);

/** The holderIdentity last read from the Lease ("" when none or not read yet). */
const char *gs_kube_leader_holder(const struct gs_kube_leader *l);

/** Counters of a candidate, for logs and metrics. */
struct gs_kube_leader_stats {
    uint64_t attempts;        /**< acquire-or-renew attempts */
    uint64_t acquisitions;    /**< times it became the leader */
    uint64_t renewals;        /**< successful renewals while leader */
    uint64_t failures;        /**< attempts that failed (request error or conflict) */
    int64_t last_renew_ms;    /**< caller's clock of the last successful write; 0 = none */
    int64_t max_renew_gap_ms; /**< longest time between two successful writes while leader */
};

/** Copies the counters. */
void gs_kube_leader_get_stats(const struct gs_kube_leader *l, struct gs_kube_leader_stats *st);

#endif /* GPUSCHED_KUBE_H */
