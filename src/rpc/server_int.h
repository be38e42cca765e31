/*
 * Internals of the gRPC server shared by server.c (the HTTP/2 and gRPC machinery) and
 * server_guard.c (the bounds against hostile peers: deadlines, eviction, output and body
 * caps). Not part of any API.
 */
#ifndef GPUSCHED_RPC_SERVER_INT_H
#define GPUSCHED_RPC_SERVER_INT_H

#include "rpc_int.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpusched/compiler.h"

/** What an epoll event's data.ptr points at; the first member of each owner. */
enum item_kind { ITEM_LISTEN, ITEM_WAKE, ITEM_TIMER, ITEM_CONN };

/** Kinds of defence events; each logs at most one line per GUARD_LOG_INTERVAL_MS. */
enum guard_event {
    GUARD_REFUSED,      /**< connection refused at accept */
    GUARD_EVICTED,      /**< idle connection evicted for a new one */
    GUARD_HANDSHAKE,    /**< handshake deadline passed */
    GUARD_IDLE,         /**< idle deadline passed */
    GUARD_OUTPUT,       /**< stream reset at an output cap */
    GUARD_BODY_SHARE,   /**< request refused: body memory share used up */
    GUARD_BODY_TIMEOUT, /**< request body deadline passed */
    GUARD_N
};

/** Log rate limit state of one kind of event. */
struct guard_log {
    int64_t last_ms;     /**< when its last line went out, 0: never */
    uint64_t suppressed; /**< events since that line that were not logged */
};

/** A registered method. */
struct method {
    char *path;                    /**< full method path, owned */
    gs_grpc_unary_fn unary;        /**< unary handler, or NULL for a streaming method */
    gs_grpc_stream_open_fn open;   /**< streaming: open handler */
    gs_grpc_stream_close_fn close; /**< streaming: close callback */
    void *user;                    /**< passed to the handlers, borrowed */
};

/** Where a request is in its life on the server. */
enum stream_state {
    ST_HEADERS,    /**< request headers still arriving */
    ST_BODY,       /**< collecting the request message */
    ST_DISCARD,    /**< answered early; further request bytes are dropped */
    ST_DISPATCHED, /**< handed to the handler; the response is under way */
};

struct gs_grpc_stream {
    struct gs__grpc_conn *conn;              /**< NULL once the connection is gone */
    int32_t id;                              /**< HTTP/2 stream id */
    enum stream_state state;                 /**< see enum stream_state */
    const struct method *method;             /**< the method, once known */
    char path[GS_GRPC_MAX_METHOD_BYTES + 1]; /**< :path as received (NUL-terminated) */
    bool have_path;                          /**< :path was received and fits in path */
    bool is_post;                            /**< :method is POST */
    bool grpc_content_type;                  /**< content-type is application/grpc[+...] */
    struct gs__buf in;                       /**< request body collected so far */
    struct gs__buf out;                      /**< framed response bytes not yet sent */
    bool headers_submitted;                  /**< response HEADERS submitted */
    bool finishing;                          /**< the status is set; trailers follow the queue */
    bool end_sent;                           /**< our END_STREAM left (status sent) */
    bool remote_closed;                      /**< the peer sent END_STREAM */
    bool h2_closed;                          /**< nghttp2 has closed the stream */
    bool app_owned;                          /**< held by a streaming handler: close owed */
    bool reset;                              /**< reset by the server at an output cap */
    size_t out_counted;                      /**< bytes of out counted in conn and server */
    int64_t opened_ms;                       /**< monotonic time of its HEADERS (body deadline) */
    int status;                              /**< gRPC status to send (valid with finishing) */
    char *status_message;                    /**< percent-encoded grpc-message, or NULL */
    int close_reason;                        /**< enum gs_grpc_close_reason to report */
    void *app_user;                          /**< gs_grpc_stream_set_user */
    struct gs_grpc_stream *prev;             /**< connection's list of open streams */
    struct gs_grpc_stream *next;             /**< connection list, then closing list */
};

struct gs__grpc_conn {
    enum item_kind kind;            /**< ITEM_CONN: the epoll tag */
    struct gs_grpc_server *srv;     /**< owner */
    int fd;                         /**< socket, or -1 for a memory connection */
    nghttp2_session *session;       /**< the HTTP/2 state */
    struct gs_grpc_stream *streams; /**< open streams (doubly linked) */
    int busy;                       /**< > 0 while nghttp2 runs on this session */
    bool want_flush;                /**< output was queued while busy */
    bool dead;                      /**< failed or finished; torn down by reap */
    bool deleting;                  /**< being torn down: ignore nghttp2 callbacks */
    bool failed;                    /**< counted in connections_failed */
    bool handshake_done;            /**< the client's preface and a first frame arrived */
    bool guard_closing;             /**< closed by a defence (timeout, eviction) */
    int64_t accepted_ms;            /**< monotonic time of accept */
    int64_t idle_since_ms;          /**< monotonic time it last had no stream (valid when
                                         streams is NULL) */
    size_t out_bytes;               /**< response bytes queued on its streams */
    size_t in_bytes;                /**< request-body bytes buffered on its streams */
    uint32_t ep_events;             /**< events registered with epoll */
    struct gs__buf *capture;        /**< memory connection: output sink, or NULL */
    uint64_t serial;                /**< connection number, for logs */
    struct gs__grpc_conn *next;     /**< server's list of connections (at most a few dozen) */
};

struct gs_grpc_server {
    int epfd;                             /**< epoll descriptor (gs_grpc_server_fd) */
    int listen_fd;                        /**< listening socket, or -1 */
    int wake_fd;                          /**< eventfd for wake-ups */
    enum item_kind listen_tag;            /**< ITEM_LISTEN, epoll tag of listen_fd */
    enum item_kind wake_tag;              /**< ITEM_WAKE, epoll tag of wake_fd */
    int timer_fd;                         /**< timerfd armed at the next deadline */
    enum item_kind timer_tag;             /**< ITEM_TIMER, epoll tag of timer_fd */
    int64_t timer_at_ms;                  /**< when timer_fd is armed for, 0: disarmed */
    struct gs_grpc_server_limits limits;  /**< gs_grpc_server_set_limits */
    struct guard_log log_state[GUARD_N];  /**< rate limit of the defences' log lines */
    char *socket_path;                    /**< path bound, owned, or NULL */
    dev_t socket_dev;                     /**< identity of the socket file we created */
    ino_t socket_ino;                     /**< identity of the socket file we created */
    struct method **methods;              /**< registered methods (each allocated on its own, so
                                               streams may point at them while more are added) */
    size_t n_methods;                     /**< entries in methods */
    struct gs__grpc_conn *conns;          /**< open connections */
    size_t n_dead;                        /**< connections marked dead, not yet reaped */
    struct gs_grpc_stream *closing_head;  /**< streams whose close callback is owed */
    struct gs_grpc_stream *closing_tail;  /**< last of closing_head's list */
    size_t in_bytes;                      /**< request bytes buffered across all streams */
    int in_run;                           /**< > 0 inside run_once (or a memory feed) */
    bool shutting_down;                   /**< inside gs_grpc_server_free */
    uint64_t next_serial;                 /**< serial of the next connection */
    nghttp2_session_callbacks *callbacks; /**< shared by all sessions */
    nghttp2_option *option;               /**< shared by all sessions */
    gs_grpc_log_fn log;                   /**< log callback, or NULL */
    void *log_user;                       /**< its argument */
    struct gs_grpc_server_stats stats;    /**< counters */
};

struct gs_grpc_reply {
    uint8_t *data; /**< response message, malloc'd, or NULL */
    size_t len;    /**< bytes in data */
    int status;    /**< gRPC status */
    char *message; /**< status message, malloc'd, or NULL */
};

/* ---- server.c, used by server_guard.c ---------------------------------------------------- */

/** Logs one line through the server's log callback. */
void gs__srv_say(struct gs_grpc_server *srv, const char *fmt, ...) GS_PRINTF(2, 3);
/** Makes run_once come back promptly when work was queued outside it. */
void gs__srv_kick(struct gs_grpc_server *srv);
/** Runs nghttp2's send on a connection (not while it is busy). */
void gs__conn_flush(struct gs__grpc_conn *conn);
/** Flushes now, or when nghttp2 returns if it is running on the connection. */
void gs__conn_request_flush(struct gs__grpc_conn *conn);
/** Reads and handles what the peer has sent and the server has not read yet (non-blocking). */
void gs__conn_read_pending(struct gs__grpc_conn *conn);
/** Marks a connection for teardown at the end of run_once. */
void gs__conn_mark_dead(struct gs__grpc_conn *conn);
/** Answers a request early with a status and drops the rest of its body. */
void gs__stream_reject(struct gs_grpc_stream *s, int status, const char *message);
/** Brings the connection's and server's output counts in line with the stream's queue. */
void gs__stream_out_sync(struct gs_grpc_server *srv, struct gs_grpc_stream *s);

/* ---- server_guard.c ------------------------------------------------------------------------ */

/** Monotonic clock, ms. */
int64_t gs__now_ms(void);
/** Logs a defence event, at most one line per second per kind, counting the rest. */
void gs__guard_say(struct gs_grpc_server *srv, enum guard_event ev, const char *fmt, ...)
    GS_PRINTF(3, 4);
/**
 * Decides whether a new connection may be accepted: below max_connections yes; at it, the
 * longest-idle connection without streams is evicted (GOAWAY) and yes; otherwise no.
 */
bool gs__guard_admit(struct gs_grpc_server *srv);
/**
 * Makes room for need more output bytes on s: resets the streams with the most queued until
 * the stream, connection and server caps allow it.
 * @return GS_OK; GS_ELIMIT when s itself had to be reset.
 */
int gs__guard_out_room(struct gs_grpc_stream *s, size_t need);
/**
 * Makes room for len more request-body bytes on s (connection share, server budget,
 * reclaiming from the connection holding the most).
 * @return true when they may be buffered; false when s was refused (already answered).
 */
bool gs__guard_body_room(struct gs_grpc_stream *s, size_t len);
/** Applies the deadlines (handshake, idle, request body) at the current time. */
void gs__guard_sweep(struct gs_grpc_server *srv);
/** Arms the server's timerfd at the next deadline (or disarms it). */
void gs__guard_arm(struct gs_grpc_server *srv);

#endif /* GPUSCHED_RPC_SERVER_INT_H */
