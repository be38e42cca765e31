/*
 * gRPC over HTTP/2 cleartext on UNIX sockets, for the node agent's kubelet APIs: a server for
 * the device plugin service (kubelet calls it) and a blocking client for kubelet's Registration
 * and PodResourcesLister services.
 *
 * Wire protocol (grpc/doc/PROTOCOL-HTTP2.md; docs/kubernetes-contracts.md 3.1): HTTP/2 with
 * prior knowledge (no TLS, no upgrade), `POST /<package>.<Service>/<Method>`,
 * `content-type: application/grpc`; every message is framed as a 1-byte compressed flag and a
 * 4-byte big-endian length, then the protobuf bytes; the response ends with trailers
 * `grpc-status` and, optionally, a percent-encoded `grpc-message`. HTTP/2 itself (SETTINGS,
 * flow control, PING, GOAWAY) is nghttp2's; messages are protobuf-c's.
 *
 * Limits: a message is at most GS_GRPC_MAX_MESSAGE_BYTES (4 MiB) in either direction;
 * compression is not supported (a compressed request is answered UNIMPLEMENTED). Only unary and
 * server-streaming methods exist, which is all the kubelet APIs use.
 *
 * Server model: single-threaded and poll-driven. The server owns one epoll descriptor
 * (gs_grpc_server_fd) that becomes readable whenever gs_grpc_server_run_once has work, so the
 * agent can put it in its own poll() next to inotify and timer descriptors, or simply call
 * gs_grpc_server_run_once(srv, timeout_ms) in a loop. Handlers run inside run_once. A
 * streaming handler gets a stream handle that the application keeps and pushes messages to
 * later, from anywhere on the server's thread (gs_grpc_stream_send); the server tells it once,
 * through the close callback, when the stream is gone. Misbehaving peers cost only their own
 * stream (malformed message: INTERNAL; unknown method: UNIMPLEMENTED) or their own connection
 * (HTTP/2 protocol error, garbage bytes); other streams and connections keep being served.
 * Hostile peers are bounded by struct gs_grpc_server_limits: handshake and idle deadlines,
 * eviction of idle connections when the table is full, output caps per connection and for the
 * server (a stream over them is reset and its queue freed), and request-body memory shared
 * per connection with a deadline for incomplete requests. Each defence has a counter in
 * struct gs_grpc_server_stats and logs at most one line per second per kind of event (with
 * the number of events since the last line).
 *
 * Client model: blocking, one call at a time per client, with a deadline per call. Transport
 * failures are reported the way gRPC libraries report them, as a call status (UNAVAILABLE when
 * the socket cannot be reached or the connection breaks, DEADLINE_EXCEEDED on timeout), so a
 * caller has a single place to look. A broken connection is dropped and the next call dials
 * again.
 *
 * Thread-safety: a server or client object must be used from one thread at a time; the only
 * exception is gs_grpc_server_wake, which any thread or signal handler may call.
 */
#ifndef GPUSCHED_GRPC_H
#define GPUSCHED_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "gpusched/log.h"

/** Largest message, bytes (protobuf payload, framing not counted), in either direction. */
#define GS_GRPC_MAX_MESSAGE_BYTES ((size_t)4 * 1024 * 1024)
/** Most bytes a server stream may have queued and not yet sent (framing included). */
#define GS_GRPC_MAX_QUEUED_BYTES ((size_t)16 * 1024 * 1024)
/** Longest method path, bytes ("/v1beta1.DevicePlugin/GetPreferredAllocation" is 44). */
#define GS_GRPC_MAX_METHOD_BYTES 256
/** Longest status message sent or kept, bytes before percent-encoding; longer ones are cut. */
#define GS_GRPC_MAX_STATUS_MESSAGE_BYTES 1024
/** Default of gs_grpc_server_limits.max_connections. */
#define GS_GRPC_MAX_CONNECTIONS 64
/** Most concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
#define GS_GRPC_MAX_STREAMS_PER_CONNECTION 128

/** gRPC status codes (grpc/doc/statuscodes.md); sent in the `grpc-status` trailer. */
enum gs_grpc_status {
    GS_GRPC_OK = 0,
    GS_GRPC_CANCELLED = 1,
    GS_GRPC_UNKNOWN = 2,
    GS_GRPC_INVALID_ARGUMENT = 3,
    GS_GRPC_DEADLINE_EXCEEDED = 4,
    GS_GRPC_NOT_FOUND = 5,
    GS_GRPC_ALREADY_EXISTS = 6,
    GS_GRPC_PERMISSION_DENIED = 7,
    GS_GRPC_RESOURCE_EXHAUSTED = 8,
    GS_GRPC_FAILED_PRECONDITION = 9,
    GS_GRPC_ABORTED = 10,
    GS_GRPC_OUT_OF_RANGE = 11,
    GS_GRPC_UNIMPLEMENTED = 12,
    GS_GRPC_INTERNAL = 13,
    GS_GRPC_UNAVAILABLE = 14,
    GS_GRPC_DATA_LOSS = 15,
    GS_GRPC_UNAUTHENTICATED = 16,
};

/**
 * Returns the canonical name of a gRPC status code ("UNIMPLEMENTED").
 * @param status  a gRPC status code; values outside 0..16 give "UNKNOWN_STATUS".
 * @return a string with static storage; never NULL. Thread-safe.
 */
const char *gs_grpc_status_name(int status);

/* ---- protobuf-c helpers ------------------------------------------------------------------- */

/**
 * Serialises a protobuf-c message into a new buffer.
 * @param msg   borrowed; any protobuf-c message.
 * @param out   receives a malloc'd buffer (free() it), or NULL when the message packs to zero
 *              bytes.
 * @param len   receives the length, bytes.
 * @return GS_OK; GS_ERANGE when the message is over GS_GRPC_MAX_MESSAGE_BYTES; GS_ENOMEM.
 *         On failure *out is NULL and *len 0.
 */
int gs_grpc_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *len);

/**
 * Parses protobuf bytes into a new message of the given type.
 * @param desc  borrowed; the message type, e.g. &v1beta1__allocate_request__descriptor.
 * @param data  borrowed; len bytes (may be NULL when len is 0).
 * @param out   receives the message; free it with protobuf_c_message_free_unpacked(m, NULL).
 * @return GS_OK; GS_EPARSE when the bytes are not a valid message of that type (a handler
 *         answers GS_GRPC_INVALID_ARGUMENT then). On failure *out is NULL.
 */
int gs_grpc_unpack(const ProtobufCMessageDescriptor *desc, const void *data, size_t len,
                   ProtobufCMessage **out);

/* ---- server ------------------------------------------------------------------------------- */

/** A gRPC server listening on one UNIX socket. Opaque. */
struct gs_grpc_server;
/** The answer to a unary call, filled by its handler. Opaque; valid during the handler only. */
struct gs_grpc_reply;
/** One open server-streaming call. Opaque; valid until its close callback returns. */
struct gs_grpc_stream;

/** Why a stream's close callback was called. */
enum gs_grpc_close_reason {
    GS_GRPC_CLOSE_FINISHED = 0,     /**< the status set by gs_grpc_stream_finish was sent */
    GS_GRPC_CLOSE_CANCELLED = 1,    /**< the peer cancelled or reset the stream, or the
                                         server reset it at an output cap because the peer
                                         was not reading (streams_reset_output) */
    GS_GRPC_CLOSE_DISCONNECTED = 2, /**< the connection closed or failed */
    GS_GRPC_CLOSE_SHUTDOWN = 3,     /**< the server is being freed */
};

/**
 * Handler of a unary method. Runs inside gs_grpc_server_run_once.
 * @param user     the pointer given at registration.
 * @param req      the request message's protobuf bytes (framing removed); borrowed, valid
 *                 during the call; NULL when req_len is 0.
 * @param req_len  bytes.
 * @param reply    where to put the answer: gs_grpc_reply_bytes / gs_grpc_reply_message for a
 *                 response message, gs_grpc_reply_error for a failure. Untouched, the call
 *                 succeeds with an empty message (a valid protobuf Empty).
 */
typedef void (*gs_grpc_unary_fn)(void *user, const uint8_t *req, size_t req_len,
                                 struct gs_grpc_reply *reply);

/**
 * Handler of a server-streaming method, called once the request message has arrived. Runs
 * inside gs_grpc_server_run_once.
 * @param user     the pointer given at registration.
 * @param req      the request's protobuf bytes; borrowed, valid during the call only.
 * @param req_len  bytes.
 * @param stream   the new stream; the application keeps it, sends with gs_grpc_stream_send
 *                 (now or later) and ends it with gs_grpc_stream_finish. It stays valid until
 *                 the close callback for it returns, which always happens exactly once.
 */
typedef void (*gs_grpc_stream_open_fn)(void *user, const uint8_t *req, size_t req_len,
                                       struct gs_grpc_stream *stream);

/**
 * Close callback of a server-streaming method: the stream is gone and the handle becomes
 * invalid when this returns. Runs inside gs_grpc_server_run_once or gs_grpc_server_free,
 * never inside another gs_grpc_* call. The callback may send on or finish other streams.
 * @param user    the pointer given at registration.
 * @param stream  the stream; gs_grpc_stream_user still works, sends fail with GS_EIO.
 * @param reason  a value of enum gs_grpc_close_reason.
 */
typedef void (*gs_grpc_stream_close_fn)(void *user, struct gs_grpc_stream *stream, int reason);

/** Receives one log line (no trailing newline) about connection-level events and errors: the
 * project's one log sink (include/gpusched/log.h). */
typedef gs_log_fn gs_grpc_log_fn;

/** Counters of a server, for tests and metrics. */
struct gs_grpc_server_stats {
    size_t connections;            /**< connections open now */
    size_t streams;                /**< server-streaming calls open now (close not yet told) */
    size_t out_bytes;              /**< response bytes queued now, all streams, framing included */
    size_t request_bytes;          /**< request-body bytes buffered now, all streams */
    uint64_t connections_accepted; /**< connections accepted since start */
    uint64_t connections_refused;  /**< closed at accept: max_connections reached and no idle
                                        connection to evict */
    uint64_t connections_failed;   /**< closed for a protocol error, I/O error or garbage */
    uint64_t connections_evicted;  /**< idle connections closed (GOAWAY) to admit a new one
                                        when the table was full */
    uint64_t connections_handshake_timeout; /**< closed: no client preface and SETTINGS within
                                                 handshake_timeout_ms of accept */
    uint64_t connections_idle_timeout;      /**< closed (GOAWAY): no open stream and nothing
                                                 received for idle_timeout_ms */
    uint64_t streams_reset_output;  /**< streams reset (RST_STREAM) and their queue freed because
                                         a per-stream, per-connection or server-wide output cap
                                         was reached: their peer was not reading */
    uint64_t requests_refused_body; /**< requests answered RESOURCE_EXHAUSTED because their
                                         connection's share of request-body memory was used up,
                                         or reset to give the server-wide budget back to
                                         another connection */
    uint64_t requests_body_timeout; /**< requests answered DEADLINE_EXCEEDED because their body
                                         was not complete within body_timeout_ms */
    uint64_t calls_dispatched;      /**< requests handed to a handler */
    uint64_t calls_rejected;        /**< requests the server answered itself with an error
                                         (includes requests_refused_body and
                                         requests_body_timeout) */
};

/**
 * Bounds a server keeps against local clients that misbehave or are hostile (issue 9): the
 * device plugin socket can be opened by anything on the node that can reach the file, so no
 * single peer may hold the connection table, the memory or the loop. Every field is a hard
 * limit; gs_grpc_server_limits_default gives the values below.
 *
 * The defaults are far above what kubelet does and well inside the agent's DaemonSet memory
 * limit (deploy/daemonset.yaml: 128Mi). kubelet's device manager opens one connection per
 * plugin, right after Register, keeps one ListAndWatch stream on it for as long as it runs
 * and sends Allocate, GetPreferredAllocation and PreStartContainer on the same connection,
 * each a request of a few hundred bytes to a few KiB, sent in one go; a ListAndWatch update
 * is one message of well under 1 MiB and kubelet reads it at once. So kubelet's connection
 * is never idle (its stream is open), finishes its handshake in microseconds, never has more
 * than a few KiB of request body or queued output, and never needs more than one of the 64
 * connection slots. Output: 16 MiB per connection holds a whole GS_GRPC_MAX_QUEUED_BYTES
 * stream; 32 MiB in all. Request bodies: 8 MiB per connection admits a message of the
 * largest size (4 MiB + 5) with another under way; 32 MiB in all. Together with the
 * agent's own ~10 MiB that stays under 128 MiB.
 */
struct gs_grpc_server_limits {
    /** From accept until the client's connection preface and first SETTINGS frame have
     * arrived, ms (> 0). Default 10000. A connection that has not finished by then is closed
     * (it cannot take a GOAWAY yet); counted in connections_handshake_timeout. */
    int handshake_timeout_ms;
    /** How long a connection with no open stream may receive nothing, ms (> 0). Default
     * 300000 (5 min; grpc-go's kubelet client never idles: its ListAndWatch stream is open).
     * Such a connection gets GOAWAY(NO_ERROR) and is closed; connections_idle_timeout. */
    int idle_timeout_ms;
    /** Most connections at once (>= 1). Default GS_GRPC_MAX_CONNECTIONS (64). When a new
     * connection arrives at the limit, the connection with no open stream that has received
     * nothing for the longest (one still in its handshake counts) is sent GOAWAY and closed
     * to make room (connections_evicted); only when every connection has an open stream is
     * the new one closed at accept (connections_refused). */
    size_t max_connections;
    /** Most response bytes queued on one connection, all its streams, framing included
     * (> 0). Default 16 MiB. */
    size_t conn_out_max_bytes;
    /** Most response bytes queued on the whole server (> 0). Default 32 MiB. When a message
     * would pass this cap, the per-connection cap or GS_GRPC_MAX_QUEUED_BYTES for its stream,
     * the streams with the most bytes queued (on that connection, or anywhere for the server
     * cap) are reset with RST_STREAM(CANCEL) and their queues freed at once until it fits;
     * a stream of a peer that reads has (almost) nothing queued, so it is not the one. */
    size_t server_out_max_bytes;
    /** Most request-body bytes buffered for one connection, all its streams (> 0). Default
     * 8 MiB. A request that would pass it is answered RESOURCE_EXHAUSTED and its bytes freed
     * (requests_refused_body). */
    size_t conn_body_max_bytes;
    /** Most request-body bytes buffered on the whole server (> 0). Default 32 MiB. When a
     * request would pass it, requests of the connection holding the most are reset first
     * (RESOURCE_EXHAUSTED, requests_refused_body) as long as that connection holds more than
     * the one asking, so one peer cannot starve another; otherwise the request asking is
     * refused. */
    size_t server_body_max_bytes;
    /** From a request's HEADERS to its END_STREAM, ms (> 0). Default 30000. A request still
     * incomplete then is answered DEADLINE_EXCEEDED, reset and its bytes freed
     * (requests_body_timeout). */
    int body_timeout_ms;
};

/**
 * Creates a server with no methods and no socket.
 * @param out  receives the server; free with gs_grpc_server_free.
 * @return GS_OK; GS_ENOMEM; GS_EIO when epoll or eventfd cannot be created. On failure *out
 *         is NULL.
 */
int gs_grpc_server_new(struct gs_grpc_server **out);

/**
 * Closes every connection, calls the close callback of every open stream with
 * GS_GRPC_CLOSE_SHUTDOWN, removes the socket file it created (if it is still the same file)
 * and frees the server. NULL is a no-op. Must not be called from inside a handler or callback.
 */
void gs_grpc_server_free(struct gs_grpc_server *srv);

/**
 * Registers a unary method.
 * @param method  full method path, "/<package>.<Service>/<Method>", e.g.
 *                "/v1beta1.DevicePlugin/Allocate"; copied. At most GS_GRPC_MAX_METHOD_BYTES.
 * @param fn      handler; @param user passed to it, borrowed for the server's lifetime.
 * @return GS_OK; GS_EINVAL when method does not start with '/' or is too long, or fn is NULL;
 *         GS_EEXIST when the path is already registered; GS_ENOMEM. On failure nothing is
 *         registered.
 */
int gs_grpc_server_add_unary(struct gs_grpc_server *srv, const char *method, gs_grpc_unary_fn fn,
                             void *user);

/**
 * Registers a server-streaming method (one request message, any number of responses).
 * @param method    full method path, as for gs_grpc_server_add_unary; copied.
 * @param open_fn   called when a call arrives; @param close_fn called once when it is gone
 *                  (both required); @param user passed to both, borrowed.
 * @return GS_OK; GS_EINVAL; GS_EEXIST; GS_ENOMEM, as for gs_grpc_server_add_unary.
 */
int gs_grpc_server_add_stream(struct gs_grpc_server *srv, const char *method,
                              gs_grpc_stream_open_fn open_fn, gs_grpc_stream_close_fn close_fn,
                              void *user);

/**
 * Starts listening on a UNIX stream socket. An existing socket file at the path is probed with
 * a non-blocking connect(): only ECONNREFUSED (nobody listens: a stale socket of an earlier
 * run) has it removed first, as device plugins do; a socket that accepts, or whose owner is
 * alive but not accepting (EAGAIN: its backlog is full), is another process's and is left.
 * The listen backlog is 4096 (capped by net.core.somaxconn), so a burst of connections far
 * larger than max_connections waits to be accepted rather than being refused by the kernel.
 * @param socket_path  file system path, shorter than sizeof(sockaddr_un.sun_path) (108).
 * @return GS_OK; GS_EINVAL when the path is too long or the server already listens; GS_EEXIST
 *         when the path exists and is not a socket, or is a live server's (the reason goes to
 *         the log callback); GS_EIO when socket/bind/listen fails (likewise). On failure
 *         nothing is left behind, and another process's socket is never removed.
 */
int gs_grpc_server_listen(struct gs_grpc_server *srv, const char *socket_path);

/**
 * Returns a descriptor to poll for POLLIN in the application's own loop: it is readable
 * whenever gs_grpc_server_run_once has work (a connection, data, a wake-up, pending
 * callbacks). Owned by the server; do not read from or close it.
 */
int gs_grpc_server_fd(const struct gs_grpc_server *srv);

/**
 * Waits up to timeout_ms for events and handles them: accepts connections, reads and writes,
 * calls handlers and close callbacks, closes failed connections.
 * @param timeout_ms  -1 waits until something happens, 0 only handles what is ready.
 * @return GS_OK (also when interrupted by a signal or woken); GS_EIO when epoll_wait fails.
 */
int gs_grpc_server_run_once(struct gs_grpc_server *srv, int timeout_ms);

/**
 * Makes a waiting or the next gs_grpc_server_run_once return promptly, so the loop can look
 * at work queued by another thread. Thread-safe and async-signal-safe (one write(2)).
 */
void gs_grpc_server_wake(struct gs_grpc_server *srv);

/** Installs a log callback (NULL: no logging). @param user is borrowed. */
void gs_grpc_server_set_log(struct gs_grpc_server *srv, gs_grpc_log_fn fn, void *user);

/**
 * Fills *out with the default limits (see struct gs_grpc_server_limits for the values and
 * why a real kubelet never reaches them).
 */
void gs_grpc_server_limits_default(struct gs_grpc_server_limits *out);

/**
 * Replaces the server's limits (a new server starts with the defaults). Connections and
 * requests already open are measured against the new values from the next run_once.
 * @param limits  borrowed; copied.
 * @return GS_OK; GS_EINVAL when a timeout is <= 0 or a count or byte limit is 0 (the limits
 *         are unchanged then).
 */
int gs_grpc_server_set_limits(struct gs_grpc_server *srv,
                              const struct gs_grpc_server_limits *limits);

/** Copies the server's counters into *out. */
void gs_grpc_server_stats(const struct gs_grpc_server *srv, struct gs_grpc_server_stats *out);

/**
 * Sets the response message of a unary call to a copy of the given protobuf bytes.
 * @return GS_OK; GS_ERANGE when len is over GS_GRPC_MAX_MESSAGE_BYTES; GS_ENOMEM. On failure
 *         the reply is unchanged.
 */
int gs_grpc_reply_bytes(struct gs_grpc_reply *reply, const void *data, size_t len);

/**
 * Sets the response message of a unary call to a protobuf-c message (packed now; borrowed).
 * @return GS_OK; GS_ERANGE; GS_ENOMEM, as for gs_grpc_reply_bytes.
 */
int gs_grpc_reply_message(struct gs_grpc_reply *reply, const ProtobufCMessage *msg);

/**
 * Fails the unary call with a status; any response message set is dropped.
 * @param status   1..16 (not GS_GRPC_OK).
 * @param message  borrowed, may be NULL; sent as grpc-message, cut to
 *                 GS_GRPC_MAX_STATUS_MESSAGE_BYTES.
 * @return GS_OK; GS_EINVAL for a status outside 1..16 (the reply is unchanged); GS_ENOMEM
 *         (the status is still set, without the message).
 */
int gs_grpc_reply_error(struct gs_grpc_reply *reply, int status, const char *message);

/**
 * Queues one response message on a stream and starts sending it. The response headers go out
 * with the first message. Flow control is nghttp2's: bytes leave as the peer's windows allow,
 * and gs_grpc_stream_queued_bytes tells how much is still waiting.
 * @param data  protobuf bytes; copied.
 * @return GS_OK; GS_EIO when the stream or its connection is already gone (its close callback
 *         comes next); GS_EINVAL after gs_grpc_stream_finish; GS_ERANGE when len is over
 *         GS_GRPC_MAX_MESSAGE_BYTES; GS_ELIMIT when the queue would pass
 *         GS_GRPC_MAX_QUEUED_BYTES (the peer is not reading); GS_ENOMEM. On failure nothing
 *         is queued. When the message would pass a cap (GS_GRPC_MAX_QUEUED_BYTES for the
 *         stream, the server's conn_out_max_bytes or server_out_max_bytes), the streams with
 *         the most queued are reset first (RST_STREAM, queue freed, close callback later with
 *         GS_GRPC_CLOSE_CANCELLED); if that is this stream, GS_ELIMIT is returned and the
 *         stream is gone (later sends give GS_EIO).
 */
int gs_grpc_stream_send(struct gs_grpc_stream *stream, const void *data, size_t len);

/**
 * Packs a protobuf-c message (borrowed) and queues it, as gs_grpc_stream_send.
 * @return as gs_grpc_stream_send.
 */
int gs_grpc_stream_send_message(struct gs_grpc_stream *stream, const ProtobufCMessage *msg);

/**
 * Ends a stream with a status, after every queued message. The close callback follows
 * (GS_GRPC_CLOSE_FINISHED once the status is out, or another reason if the peer goes first).
 * @param status   0..16.
 * @param message  borrowed, may be NULL; cut to GS_GRPC_MAX_STATUS_MESSAGE_BYTES.
 * @return GS_OK; GS_EIO when the stream is already gone; GS_EINVAL when it was finished
 *         before or the status is out of range; GS_ENOMEM.
 */
int gs_grpc_stream_finish(struct gs_grpc_stream *stream, int status, const char *message);

/** Bytes queued on the stream and not yet handed to the socket. */
size_t gs_grpc_stream_queued_bytes(const struct gs_grpc_stream *stream);

/** Attaches an application pointer to a stream (borrowed). */
void gs_grpc_stream_set_user(struct gs_grpc_stream *stream, void *user);

/** Returns the pointer set by gs_grpc_stream_set_user, NULL before. */
void *gs_grpc_stream_user(const struct gs_grpc_stream *stream);

/* ---- client ------------------------------------------------------------------------------- */

/** Outcome of a client call or stream read. Caller storage; free with gs_grpc_result_fini. */
struct gs_grpc_result {
    int status;    /**< enum gs_grpc_status; GS_GRPC_OK on success */
    char *message; /**< grpc-message, percent-decoded, or a local explanation for transport
                        failures; NUL-terminated, malloc'd; NULL when there is none */
    uint8_t *data; /**< the response message's protobuf bytes (framing removed), malloc'd;
                        NULL when len is 0 or the call failed */
    size_t len;    /**< bytes in data */
};

/** Frees what a result holds and zeroes it. NULL is a no-op. */
void gs_grpc_result_fini(struct gs_grpc_result *r);

/** What gs_grpc_client_stream_read found. */
enum gs_grpc_read {
    GS_GRPC_READ_MESSAGE = 0, /**< a message is in result.data/len */
    GS_GRPC_READ_END = 1,     /**< the stream ended; result.status/message say how */
    GS_GRPC_READ_TIMEOUT = 2, /**< nothing arrived within the timeout; the stream is open */
};

/** A blocking gRPC client bound to one UNIX socket. Opaque. */
struct gs_grpc_client;

/**
 * Creates a client for a socket path; it dials on the first call, not now.
 * @param socket_path  copied; shorter than 108 bytes.
 * @param out          receives the client; free with gs_grpc_client_free.
 * @return GS_OK; GS_EINVAL for a too-long path; GS_ENOMEM. On failure *out is NULL.
 */
int gs_grpc_client_new(const char *socket_path, struct gs_grpc_client **out);

/** Cancels any open stream, closes the connection and frees the client. NULL is a no-op. */
void gs_grpc_client_free(struct gs_grpc_client *c);

/**
 * Makes a unary call and waits for its outcome. Sends `grpc-timeout` and `:authority:
 * localhost`. Reuses the client's connection when it is healthy.
 * @param method      full method path, e.g. "/v1beta1.Registration/Register".
 * @param req         request protobuf bytes, borrowed (NULL allowed when req_len is 0).
 * @param timeout_ms  deadline for the whole call including connecting, > 0.
 * @param out         overwritten: status, message and, on GS_GRPC_OK, the response bytes.
 *                    Transport problems appear as GS_GRPC_UNAVAILABLE (cannot connect,
 *                    connection lost, HTTP/2 error) or GS_GRPC_DEADLINE_EXCEEDED (the call is
 *                    cancelled on the wire), with an explanation in message.
 * @return GS_OK whenever *out holds an outcome, whatever its status; GS_EINVAL for a bad
 *         method, timeout or size, or while a stream is open; GS_ENOMEM (the connection is
 *         dropped). On failure *out is zeroed.
 */
int gs_grpc_client_unary(struct gs_grpc_client *c, const char *method, const void *req,
                         size_t req_len, int timeout_ms, struct gs_grpc_result *out);

/**
 * Starts a server-streaming call: connects if needed and sends the request. Problems
 * (connect, transport) are reported by the first gs_grpc_client_stream_read as READ_END.
 * @param timeout_ms  deadline for connecting and sending the request, > 0; reads have their own.
 * @return GS_OK; GS_EINVAL for a bad method, timeout or size, or when a stream is already
 *         open; GS_ENOMEM.
 */
int gs_grpc_client_stream_start(struct gs_grpc_client *c, const char *method, const void *req,
                                size_t req_len, int timeout_ms);

/**
 * Waits for the next message or the end of the open stream.
 * @param timeout_ms  -1 waits without limit, 0 only looks at what has arrived.
 * @param out         overwritten (free with gs_grpc_result_fini): a message, or the final
 *                    status; zeroed on READ_TIMEOUT.
 * @param what        receives enum gs_grpc_read. After READ_END the stream is closed.
 * @return GS_OK; GS_EINVAL when no stream is open; GS_ENOMEM (the stream is ended).
 */
int gs_grpc_client_stream_read(struct gs_grpc_client *c, int timeout_ms, struct gs_grpc_result *out,
                               enum gs_grpc_read *what);

/** Cancels the open stream (RST_STREAM CANCEL) without waiting; no-op when none is open. */
void gs_grpc_client_stream_cancel(struct gs_grpc_client *c);

/**
 * One-shot unary call: gs_grpc_client_new, gs_grpc_client_unary, gs_grpc_client_free.
 * @return as gs_grpc_client_unary, plus GS_EINVAL for a too-long socket path.
 */
int gs_grpc_call_unary(const char *socket_path, const char *method, const void *req, size_t req_len,
                       int timeout_ms, struct gs_grpc_result *out);

/**
 * One-shot unary call with a protobuf-c request: gs_grpc_pack, then gs_grpc_call_unary.
 * @param req  the request message; borrowed.
 * @return as gs_grpc_call_unary, plus GS_ENOMEM when packing fails (then `out` is zeroed).
 */
int gs_grpc_call_message(const char *socket_path, const char *method, const ProtobufCMessage *req,
                         int timeout_ms, struct gs_grpc_result *out);

#endif /* GPUSCHED_GRPC_H */
