/*
 * The gRPC server (contract in include/gpusched/grpc.h): an epoll loop over one listening UNIX
 * socket, an eventfd for wake-ups and the accepted connections, each with its own nghttp2
 * server session.
 *
 * A request goes through these states on its stream: headers are checked when they are
 * complete (POST, a gRPC content-type, a registered path; otherwise the server answers at once
 * and drops the rest of the request), the body is collected while its 5-byte prefix is checked
 * as soon as it arrives (flag, length), and at END_STREAM the one request message is handed to
 * the method's handler. A unary reply, or each message of a server stream, is framed into the
 * stream's outgoing queue, which an nghttp2 data provider drains as flow control allows; the
 * status goes out as trailers after the last byte, or alone as a "Trailers-Only" HEADERS frame
 * when nothing was sent. If the peer still has its side open when ours ends, the stream is
 * reset with NO_ERROR (RFC 9113 8.1), so an early answer never leaves it dangling.
 *
 * Reentrancy is kept out of the application's way with two rules. First, nghttp2 is never
 * entered recursively: a send or finish made while nghttp2 is running on that connection (in a
 * handler, say) only marks the connection for a flush that runs when nghttp2 returns. Second,
 * the application is only called back from run_once (handlers, close callbacks): a stream that
 * nghttp2 closes is put on a list and its close callback runs at the end of run_once, and a
 * connection that fails during an application call is only marked dead and torn down there.
 * When such work is queued outside run_once the eventfd is written, so the server's descriptor
 * turns readable and the loop comes back to it.
 */
#define _GNU_SOURCE /* accept4, SOCK_NONBLOCK, SOCK_CLOEXEC, MSG_NOSIGNAL */

#include "server_int.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/** Bytes read from one connection per readiness event, so one peer cannot starve others. */
#define READ_BUDGET_BYTES ((size_t)256 * 1024)
/** Largest DATA frame payload nghttp2 hands us (SETTINGS_MAX_FRAME_SIZE default). */
#define H2_MAX_FRAME_BYTES 16384u
/** Most epoll events taken per wait. */
#define EPOLL_BATCH 32
/**
 * Listen backlog: connections the kernel queues before the loop accepts them; Linux caps it at
 * net.core.somaxconn (4096 by default since 5.4). It must hold far more than the connection
 * table: a UNIX socket whose backlog is full answers a non-blocking connect() with EAGAIN, so a
 * burst of local connections (hostile or not) while the loop is busy would turn kubelet away
 * although the table would have made room for it (grpc-go fails the dial and backs off;
 * grpcio even takes EAGAIN for a connect in progress and fails on its first read with
 * "recvmsg: Invalid argument"). Queued connections cost the kernel a socket each; the loop
 * takes them max_connections a round (accept_batch), so the table's limits, and its memory,
 * hold however many wait.
 */
#define LISTEN_BACKLOG 4096

/* ---- small helpers ------------------------------------------------------------------------ */

void gs__srv_say(struct gs_grpc_server *srv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gs_vlog(srv->log, srv->log_user, fmt, ap);
    va_end(ap);
}

/* True when a header name or value equals a literal. */
static bool name_is(const uint8_t *name, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len == n && memcmp(name, lit, n) == 0;
}

static nghttp2_nv make_nv(const char *name, const char *value)
{
    nghttp2_nv nv;
    nv.name = (uint8_t *)(uintptr_t)name;
    nv.value = (uint8_t *)(uintptr_t)value;
    nv.namelen = strlen(name);
    nv.valuelen = strlen(value);
    nv.flags = NGHTTP2_NV_FLAG_NONE;
    return nv;
}

/* Counts a connection as failed (once) and logs why. */
static void conn_failed(struct gs__grpc_conn *conn, const char *why)
{
    if (conn->failed)
        return;
    conn->failed = true;
    conn->srv->stats.connections_failed++;
    gs__srv_say(conn->srv, "grpc: connection %llu: closed: %s", (unsigned long long)conn->serial,
                why);
}

/* Asks for a flush of a connection's output: now, or when nghttp2 returns if it is running. */
void gs__conn_request_flush(struct gs__grpc_conn *conn)
{
    if (conn->busy > 0)
        conn->want_flush = true;
    else
        gs__conn_flush(conn);
}

/* Makes run_once come back promptly when work was queued outside it. */
void gs__srv_kick(struct gs_grpc_server *srv)
{
    if (srv->in_run == 0)
        gs_grpc_server_wake(srv);
}

/* ---- streams ------------------------------------------------------------------------------ */

static struct gs_grpc_stream *stream_new(struct gs__grpc_conn *conn, int32_t id)
{
    struct gs_grpc_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->conn = conn;
    s->id = id;
    s->state = ST_HEADERS;
    s->opened_ms = gs__now_ms();
    gs__buf_init(&s->in, GS__GRPC_PREFIX_BYTES + GS_GRPC_MAX_MESSAGE_BYTES + H2_MAX_FRAME_BYTES);
    gs__buf_init(&s->out, GS_GRPC_MAX_QUEUED_BYTES);
    s->next = conn->streams;
    if (conn->streams)
        conn->streams->prev = s;
    conn->streams = s;
    return s;
}

/* Frees the request body and gives its bytes back to the connection's and server's budget. */
static void stream_drop_input(struct gs_grpc_server *srv, struct gs_grpc_stream *s)
{
    size_t n = gs__buf_size(&s->in);
    srv->in_bytes -= n;
    if (s->conn)
        s->conn->in_bytes -= n;
    gs__buf_fini(&s->in);
}

void gs__stream_out_sync(struct gs_grpc_server *srv, struct gs_grpc_stream *s)
{
    size_t now = gs__buf_size(&s->out);
    srv->stats.out_bytes = srv->stats.out_bytes - s->out_counted + now;
    if (s->conn)
        s->conn->out_bytes = s->conn->out_bytes - s->out_counted + now;
    s->out_counted = now;
}

static void stream_unlink(struct gs_grpc_stream *s)
{
    struct gs__grpc_conn *conn = s->conn;
    if (s->prev)
        s->prev->next = s->next;
    else if (conn)
        conn->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    if (conn && conn->streams == NULL)
        conn->idle_since_ms = gs__now_ms();
}

static void stream_free(struct gs_grpc_server *srv, struct gs_grpc_stream *s)
{
    stream_drop_input(srv, s);
    gs__buf_fini(&s->out);
    gs__stream_out_sync(srv, s);
    free(s->status_message);
    free(s);
}

/*
 * Called when a stream leaves its connection (nghttp2 closed it, or the connection is going):
 * an application-owned stream goes on the closing list for its close callback, others are
 * freed at once.
 */
static void stream_retire(struct gs_grpc_server *srv, struct gs_grpc_stream *s, int reason)
{
    stream_unlink(s);
    stream_drop_input(srv, s);
    gs__buf_fini(&s->out);
    gs__stream_out_sync(srv, s);
    s->conn = NULL;
    s->h2_closed = true;
    if (!s->app_owned) {
        stream_free(srv, s);
        return;
    }
    s->close_reason = reason;
    s->next = NULL;
    if (srv->closing_tail)
        srv->closing_tail->next = s;
    else
        srv->closing_head = s;
    srv->closing_tail = s;
    gs__srv_kick(srv);
}

/* Runs the owed close callbacks; the callbacks may queue more, which run too. */
static void drain_closing(struct gs_grpc_server *srv)
{
    while (srv->closing_head) {
        struct gs_grpc_stream *s = srv->closing_head;
        srv->closing_head = s->next;
        if (srv->closing_head == NULL)
            srv->closing_tail = NULL;
        s->next = NULL;
        if (srv->stats.streams > 0)
            srv->stats.streams--;
        s->method->close(s->method->user, s, s->close_reason);
        stream_free(srv, s);
    }
}

/* nghttp2 data provider: hands out the queued response bytes, then the trailers. */
static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    struct gs_grpc_stream *s = source->ptr;
    struct gs__grpc_conn *conn = user_data;
    size_t avail = gs__buf_size(&s->out);
    size_t n = avail < length ? avail : length;

    if (n > 0) {
        memcpy(buf, gs__buf_head(&s->out), n);
        gs__buf_consume(&s->out, n);
        gs__stream_out_sync(conn->srv, s);
    }
    if (gs__buf_size(&s->out) == 0 && s->finishing) {
        char code[16];
        nghttp2_nv nv[2];
        size_t nnv = 0;
        (void)snprintf(code, sizeof code, "%d", s->status);
        nv[nnv++] = make_nv("grpc-status", code);
        if (s->status_message && s->status_message[0])
            nv[nnv++] = make_nv("grpc-message", s->status_message);
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (nghttp2_submit_trailer(session, stream_id, nv, nnv) == 0)
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        /* else: END_STREAM on this DATA frame; the client then sees no grpc-status. This
         * only happens when nghttp2 is out of memory. */
        return (ssize_t)n;
    }
    if (n == 0)
        return NGHTTP2_ERR_DEFERRED;
    return (ssize_t)n;
}

/* Submits the response HEADERS that open the body (status 200, gRPC content-type). */
static int submit_headers(struct gs_grpc_stream *s)
{
    nghttp2_nv nv[2] = {make_nv(":status", "200"), make_nv("content-type", "application/grpc")};
    nghttp2_data_provider prd;
    prd.source.ptr = s;
    prd.read_callback = data_read_cb;
    if (nghttp2_submit_response(s->conn->session, s->id, nv, 2, &prd) != 0)
        return GS_ENOMEM;
    s->headers_submitted = true;
    return GS_OK;
}

/* Submits a Trailers-Only response: one HEADERS frame with the status and END_STREAM. */
static int submit_trailers_only(struct gs_grpc_stream *s)
{
    char code[16];
    nghttp2_nv nv[4];
    size_t nnv = 0;

    (void)snprintf(code, sizeof code, "%d", s->status);
    nv[nnv++] = make_nv(":status", "200");
    nv[nnv++] = make_nv("content-type", "application/grpc");
    nv[nnv++] = make_nv("grpc-status", code);
    if (s->status_message && s->status_message[0])
        nv[nnv++] = make_nv("grpc-message", s->status_message);
    if (nghttp2_submit_response(s->conn->session, s->id, nv, nnv, NULL) != 0)
        return GS_ENOMEM;
    s->headers_submitted = true;
    return GS_OK;
}

/* Sets the final status of a stream and gets it on its way. */
static int stream_finish(struct gs_grpc_stream *s, int status, const char *message)
{
    int rc = GS_OK;

    if (s->conn == NULL || s->h2_closed || s->reset)
        return GS_EIO;
    if (s->finishing)
        return GS_EINVAL;
    s->finishing = true;
    s->status = status;
    if (message && message[0])
        rc = gs__grpc_percent_encode(message, strlen(message), &s->status_message);
    if (!s->headers_submitted) {
        if (submit_trailers_only(s) != GS_OK) {
            nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                      NGHTTP2_INTERNAL_ERROR);
            rc = GS_ENOMEM;
        }
    } else {
        nghttp2_session_resume_data(s->conn->session, s->id);
    }
    gs__conn_request_flush(s->conn);
    return rc;
}

/* Answers a request early (before or instead of its handler) and drops the rest of it. */
void gs__stream_reject(struct gs_grpc_stream *s, int status, const char *message)
{
    struct gs_grpc_server *srv = s->conn->srv;
    s->state = ST_DISCARD;
    stream_drop_input(srv, s);
    srv->stats.calls_rejected++;
    stream_finish(s, status, message);
}

/* Answers with a bare HTTP status (not a gRPC request at all). */
static void reject_http(struct gs_grpc_stream *s, const char *http_status)
{
    nghttp2_nv nv[1] = {make_nv(":status", http_status)};
    struct gs_grpc_server *srv = s->conn->srv;
    s->state = ST_DISCARD;
    s->finishing = true;
    s->headers_submitted = true;
    srv->stats.calls_rejected++;
    if (nghttp2_submit_response(s->conn->session, s->id, nv, 1, NULL) != 0)
        nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

/* Queues one framed message on a stream. */
static int stream_queue(struct gs_grpc_stream *s, const void *data, size_t len)
{
    uint8_t prefix[GS__GRPC_PREFIX_BYTES];
    struct gs__buf *b = &s->out;

    if (len > GS_GRPC_MAX_MESSAGE_BYTES)
        return GS_ERANGE;
    int rc = gs__guard_out_room(s, GS__GRPC_PREFIX_BYTES + len);
    if (rc != GS_OK)
        return rc;
    gs__grpc_frame_prefix(prefix, false, (uint32_t)len);
    rc = gs__buf_append(b, prefix, sizeof prefix);
    if (rc != GS_OK)
        return rc;
    rc = gs__buf_append(b, data, len);
    if (rc != GS_OK) {
        /* Take the prefix back off the end so the stream's framing stays intact. */
        b->len -= sizeof prefix;
        if (b->len == b->off)
            b->off = b->len = 0;
        return rc;
    }
    gs__stream_out_sync(s->conn->srv, s);
    return GS_OK;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

static void dispatch_unary(struct gs_grpc_stream *s, const uint8_t *msg, size_t len)
{
    struct gs_grpc_reply reply = {NULL, 0, GS_GRPC_OK, NULL};
    const struct method *m = s->method;

    m->unary(m->user, msg, len, &reply);
    stream_drop_input(s->conn->srv, s);
    if (reply.status == GS_GRPC_OK) {
        int rc = stream_queue(s, reply.data, reply.len);
        if (rc == GS_OK)
            rc = submit_headers(s);
        if (rc == GS_OK)
            stream_finish(s, GS_GRPC_OK, NULL);
        else if (!s->reset) /* a reset stream (output cap) is already over */
            stream_finish(s, GS_GRPC_INTERNAL, "server out of memory");
    } else {
        stream_finish(s, reply.status, reply.message);
    }
    free(reply.data);
    free(reply.message);
}

/* The request is complete: check it is exactly one uncompressed message and run the handler. */
static void dispatch(struct gs_grpc_stream *s)
{
    struct gs_grpc_server *srv = s->conn->srv;
    struct gs__grpc_frame f;
    size_t have = gs__buf_size(&s->in);
    int rc = gs__grpc_frame_parse(gs__buf_head(&s->in), have, GS_GRPC_MAX_MESSAGE_BYTES, &f);

    if (rc == GS_ERANGE) {
        gs__stream_reject(s, GS_GRPC_RESOURCE_EXHAUSTED, "request message larger than 4 MiB");
        return;
    }
    if (rc != GS_OK) {
        gs__stream_reject(s, GS_GRPC_INTERNAL, "invalid compressed flag in message prefix");
        return;
    }
    if (!f.complete) {
        gs__stream_reject(s, GS_GRPC_INTERNAL,
                          have == 0 ? "missing request message" : "truncated request message");
        return;
    }
    if (f.frame_bytes != have) {
        gs__stream_reject(s, GS_GRPC_INTERNAL, "more than one request message");
        return;
    }
    if (f.compressed) {
        gs__stream_reject(s, GS_GRPC_UNIMPLEMENTED, "compressed messages are not supported");
        return;
    }
    s->state = ST_DISPATCHED;
    srv->stats.calls_dispatched++;
    if (s->method->unary) {
        dispatch_unary(s, f.msg, f.msg_len);
        return;
    }
    s->app_owned = true;
    srv->stats.streams++;
    s->method->open(s->method->user, f.msg, f.msg_len, s);
    if (s->conn)
        stream_drop_input(srv, s);
}

/* Checks the request headers once they are complete. */
static void on_request_headers(struct gs_grpc_stream *s)
{
    struct gs_grpc_server *srv = s->conn->srv;

    if (!s->is_post) {
        reject_http(s, "405");
        return;
    }
    if (!s->grpc_content_type) {
        reject_http(s, "415");
        return;
    }
    for (size_t i = 0; s->have_path && i < srv->n_methods; i++) {
        if (strcmp(srv->methods[i]->path, s->path) == 0) {
            s->method = srv->methods[i];
            s->state = ST_BODY;
            return;
        }
    }
    char msg[GS_GRPC_MAX_METHOD_BYTES + 32];
    (void)snprintf(msg, sizeof msg, "unknown method %s", s->have_path ? s->path : "(too long)");
    gs__stream_reject(s, GS_GRPC_UNIMPLEMENTED, msg);
}

/* ---- nghttp2 callbacks -------------------------------------------------------------------- */

static ssize_t send_cb(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
                       void *user_data)
{
    struct gs__grpc_conn *conn = user_data;

    (void)session;
    (void)flags;
    if (conn->fd < 0) {
        if (conn->capture)
            gs__buf_append(conn->capture, data, length); /* excess is dropped, by contract */
        return (ssize_t)length;
    }
    for (;;) {
        ssize_t n = send(conn->fd, data, length, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return NGHTTP2_ERR_WOULDBLOCK;
        char why[96];
        (void)snprintf(why, sizeof why, "send: %s", strerror(errno));
        conn_failed(conn, why);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
}

static int on_begin_headers_cb(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data)
{
    struct gs__grpc_conn *conn = user_data;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct gs_grpc_stream *s = stream_new(conn, frame->hd.stream_id);
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* nghttp2 resets the stream */
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
    return 0;
}

static int on_header_cb(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    (void)flags;
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct gs_grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s == NULL)
        return 0;
    if (name_is(name, namelen, ":method")) {
        s->is_post = name_is(value, valuelen, "POST");
    } else if (name_is(name, namelen, ":path")) {
        s->have_path = valuelen <= GS_GRPC_MAX_METHOD_BYTES && memchr(value, 0, valuelen) == NULL;
        if (s->have_path) {
            memcpy(s->path, value, valuelen);
            s->path[valuelen] = '\0';
        }
    } else if (name_is(name, namelen, "content-type")) {
        s->grpc_content_type = gs__grpc_content_type_ok((const char *)value, valuelen);
    }
    return 0;
}

/* Checks a request body prefix as soon as it is complete, to refuse early. */
static bool check_prefix(struct gs_grpc_stream *s)
{
    struct gs__grpc_frame f;
    size_t have = gs__buf_size(&s->in);
    int rc = gs__grpc_frame_parse(gs__buf_head(&s->in), have, GS_GRPC_MAX_MESSAGE_BYTES, &f);

    if (rc == GS_ERANGE) {
        gs__stream_reject(s, GS_GRPC_RESOURCE_EXHAUSTED, "request message larger than 4 MiB");
        return false;
    }
    if (rc != GS_OK) {
        gs__stream_reject(s, GS_GRPC_INTERNAL, "invalid compressed flag in message prefix");
        return false;
    }
    if (f.have_prefix && f.compressed) {
        gs__stream_reject(s, GS_GRPC_UNIMPLEMENTED, "compressed messages are not supported");
        return false;
    }
    if (f.complete && have > f.frame_bytes) {
        gs__stream_reject(s, GS_GRPC_INTERNAL, "more than one request message");
        return false;
    }
    return true;
}

static int on_data_chunk_recv_cb(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                                 const uint8_t *data, size_t len, void *user_data)
{
    struct gs__grpc_conn *conn = user_data;
    struct gs_grpc_server *srv = conn->srv;

    (void)flags;
    struct gs_grpc_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (s == NULL || s->state != ST_BODY)
        return 0;
    if (!gs__guard_body_room(s, len))
        return 0;
    int rc = gs__buf_append(&s->in, data, len);
    if (rc != GS_OK) {
        gs__stream_reject(s, GS_GRPC_RESOURCE_EXHAUSTED,
                          rc == GS_ENOMEM ? "server out of memory" : "request larger than 4 MiB");
        return 0;
    }
    srv->in_bytes += len;
    conn->in_bytes += len;
    check_prefix(s);
    return 0;
}

static int on_frame_recv_cb(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct gs__grpc_conn *conn = user_data;

    conn->handshake_done = true; /* nghttp2 checked the preface; the first frame is SETTINGS */
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    struct gs_grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        s->state == ST_HEADERS)
        on_request_headers(s);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        s->remote_closed = true;
        if (s->state == ST_BODY)
            dispatch(s);
        else if (s->state == ST_HEADERS) /* trailers without a request: cannot happen */
            gs__stream_reject(s, GS_GRPC_INTERNAL, "malformed request");
    }
    return 0;
}

static int on_frame_send_cb(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct gs__grpc_conn *conn = user_data;

    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR &&
        !conn->guard_closing) {
        char why[64];
        (void)snprintf(why, sizeof why, "protocol error (GOAWAY %s)",
                       nghttp2_http2_strerror(frame->goaway.error_code));
        conn_failed(user_data, why);
        return 0;
    }
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct gs_grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s == NULL)
        return 0;
    s->end_sent = true;
    if (!s->remote_closed)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close_cb(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    struct gs__grpc_conn *conn = user_data;

    if (conn->deleting)
        return 0;
    struct gs_grpc_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    (void)error_code;
    stream_retire(conn->srv, s, s->end_sent ? GS_GRPC_CLOSE_FINISHED : GS_GRPC_CLOSE_CANCELLED);
    return 0;
}

/* ---- connections -------------------------------------------------------------------------- */

static void conn_update_events(struct gs__grpc_conn *conn)
{
    if (conn->dead)
        return;
    bool rd = nghttp2_session_want_read(conn->session);
    bool wr = nghttp2_session_want_write(conn->session);
    if (!rd && !wr) {
        /* GOAWAY exchanged or the session is over: nothing more to do on this connection. */
        gs__conn_mark_dead(conn);
        return;
    }
    if (conn->fd < 0)
        return;
    uint32_t ev = (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0);
    if (ev != conn->ep_events) {
        struct epoll_event e = {.events = ev, .data.ptr = conn};
        if (epoll_ctl(conn->srv->epfd, EPOLL_CTL_MOD, conn->fd, &e) != 0) {
            gs__srv_say(conn->srv, "grpc: connection %llu: epoll_ctl: %s",
                        (unsigned long long)conn->serial, strerror(errno));
            gs__conn_mark_dead(conn);
            return;
        }
        conn->ep_events = ev;
    }
}

void gs__conn_flush(struct gs__grpc_conn *conn)
{
    if (conn->dead)
        return;
    do {
        conn->want_flush = false;
        conn->busy++;
        int rv = nghttp2_session_send(conn->session);
        conn->busy--;
        if (rv != 0) {
            conn_failed(conn, nghttp2_strerror(rv));
            gs__conn_mark_dead(conn);
            return;
        }
    } while (conn->want_flush);
    conn_update_events(conn);
}

void gs__conn_mark_dead(struct gs__grpc_conn *conn)
{
    if (conn->dead)
        return;
    conn->dead = true;
    conn->srv->n_dead++;
    gs__srv_kick(conn->srv);
}

/* Feeds received bytes to nghttp2. Returns false when the connection failed. */
static bool conn_recv(struct gs__grpc_conn *conn, const uint8_t *data, size_t len)
{
    conn->busy++;
    ssize_t rv = nghttp2_session_mem_recv(conn->session, data, len);
    conn->busy--;
    if (rv < 0) {
        conn_failed(conn, nghttp2_strerror((int)rv));
        gs__conn_mark_dead(conn);
        return false;
    }
    return true;
}

static void conn_on_readable(struct gs__grpc_conn *conn);

void gs__conn_read_pending(struct gs__grpc_conn *conn)
{
    if (conn->fd >= 0 && !conn->dead)
        conn_on_readable(conn);
}

static void conn_on_readable(struct gs__grpc_conn *conn)
{
    uint8_t buf[16384];
    size_t total = 0;

    while (total < READ_BUDGET_BYTES && !conn->dead) {
        ssize_t n = read(conn->fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            char why[96];
            (void)snprintf(why, sizeof why, "read: %s", strerror(errno));
            conn_failed(conn, why);
            gs__conn_mark_dead(conn);
            return;
        }
        if (n == 0) {
            gs__conn_mark_dead(conn);
            return;
        }
        if (!conn_recv(conn, buf, (size_t)n))
            return;
        total += (size_t)n;
    }
    gs__conn_flush(conn);
}

static int conn_new(struct gs_grpc_server *srv, int fd, struct gs__buf *capture,
                    struct gs__grpc_conn **out)
{
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GS_GRPC_MAX_STREAMS_PER_CONNECTION},
    };
    struct gs__grpc_conn *conn = calloc(1, sizeof *conn);

    *out = NULL;
    if (conn == NULL)
        return GS_ENOMEM;
    conn->kind = ITEM_CONN;
    conn->srv = srv;
    conn->fd = fd;
    conn->capture = capture;
    conn->serial = ++srv->next_serial;
    conn->accepted_ms = conn->idle_since_ms = gs__now_ms();
    if (nghttp2_session_server_new2(&conn->session, srv->callbacks, conn, srv->option) != 0) {
        free(conn);
        return GS_ENOMEM;
    }
    if (nghttp2_submit_settings(conn->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) !=
        0) {
        nghttp2_session_del(conn->session);
        free(conn);
        return GS_ENOMEM;
    }
    if (fd >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = conn};
        if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            nghttp2_session_del(conn->session);
            free(conn);
            return GS_EIO;
        }
        conn->ep_events = EPOLLIN;
    }
    conn->next = srv->conns;
    srv->conns = conn;
    srv->stats.connections++;
    srv->stats.connections_accepted++;
    *out = conn;
    return GS_OK;
}

/* Tears a connection down; its application streams get their close callback later. */
static void conn_destroy(struct gs__grpc_conn *conn)
{
    struct gs_grpc_server *srv = conn->srv;
    int reason = srv->shutting_down ? GS_GRPC_CLOSE_SHUTDOWN : GS_GRPC_CLOSE_DISCONNECTED;

    conn->deleting = true;
    nghttp2_session_del(conn->session);
    struct gs_grpc_stream *s = conn->streams;
    conn->streams = NULL;
    while (s) {
        struct gs_grpc_stream *next = s->next;
        s->prev = s->next = NULL;
        stream_retire(srv, s, reason);
        s = next;
    }
    if (conn->fd >= 0) {
        epoll_ctl(srv->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
        close(conn->fd);
    }
    if (conn->dead)
        srv->n_dead--;
    struct gs__grpc_conn **pp = &srv->conns;
    while (*pp != conn)
        pp = &(*pp)->next;
    *pp = conn->next;
    srv->stats.connections--;
    free(conn);
}

/* Tears down the dead socket connections (memory ones are closed by their owner). */
static void reap(struct gs_grpc_server *srv)
{
    struct gs__grpc_conn *conn = srv->conns;
    while (conn && srv->n_dead > 0) {
        /* conn_destroy unlinks conn before freeing it, so srv->conns never leads to a freed
         * connection; the analyzer loses the list's shape. */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        struct gs__grpc_conn *next = conn->next;
        if (conn->dead && conn->fd >= 0)
            conn_destroy(conn);
        conn = next;
    }
}

/*
 * Accepts what is waiting, at most max_connections a round: a connection evicted to admit
 * another is only freed when the round ends (reap), so a full backlog (LISTEN_BACKLOG) taken in
 * one round would hold thousands of sessions at once (about 13 KiB each). The rest stay
 * queued; the listening socket is still readable, so the next run_once comes back at once.
 */
static void accept_batch(struct gs_grpc_server *srv)
{
    for (size_t n = 0; n < srv->limits.max_connections; n++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                gs__srv_say(srv, "grpc: accept: %s", strerror(errno));
            return;
        }
        if (!gs__guard_admit(srv)) {
            srv->stats.connections_refused++;
            gs__guard_say(srv, GUARD_REFUSED,
                          "grpc: refusing connection: %zu connections open, none idle",
                          srv->limits.max_connections);
            close(fd);
            continue;
        }
        struct gs__grpc_conn *conn;
        if (conn_new(srv, fd, NULL, &conn) != GS_OK) {
            gs__srv_say(srv, "grpc: cannot set up a connection");
            close(fd);
            continue;
        }
        gs__conn_flush(conn); /* our SETTINGS */
    }
}

/* ---- public API --------------------------------------------------------------------------- */

int gs_grpc_server_new(struct gs_grpc_server **out)
{
    struct gs_grpc_server *srv = calloc(1, sizeof *srv);
    int rc = GS_ENOMEM;

    *out = NULL;
    if (srv == NULL)
        return GS_ENOMEM;
    srv->epfd = srv->wake_fd = srv->listen_fd = srv->timer_fd = -1;
    srv->listen_tag = ITEM_LISTEN;
    srv->wake_tag = ITEM_WAKE;
    srv->timer_tag = ITEM_TIMER;
    gs_grpc_server_limits_default(&srv->limits);
    if (nghttp2_session_callbacks_new(&srv->callbacks) != 0)
        goto out;
    nghttp2_session_callbacks_set_send_callback(srv->callbacks, send_cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->callbacks, on_begin_headers_cb);
    nghttp2_session_callbacks_set_on_header_callback(srv->callbacks, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(srv->callbacks,
                                                              on_data_chunk_recv_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->callbacks, on_frame_recv_cb);
    nghttp2_session_callbacks_set_on_frame_send_callback(srv->callbacks, on_frame_send_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->callbacks, on_stream_close_cb);
    if (nghttp2_option_new(&srv->option) != 0)
        goto out;

    rc = GS_EIO;
    srv->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (srv->epfd < 0)
        goto out;
    srv->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (srv->wake_fd < 0)
        goto out;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &srv->wake_tag};
    if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->wake_fd, &e) != 0)
        goto out;
    srv->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (srv->timer_fd < 0)
        goto out;
    struct epoll_event te = {.events = EPOLLIN, .data.ptr = &srv->timer_tag};
    if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->timer_fd, &te) != 0)
        goto out;
    *out = srv;
    return GS_OK;
out:
    gs_grpc_server_free(srv);
    return rc;
}

void gs_grpc_server_free(struct gs_grpc_server *srv)
{
    if (srv == NULL)
        return;
    srv->shutting_down = true;
    srv->in_run++;
    while (srv->conns)
        conn_destroy(srv->conns);
    drain_closing(srv);
    srv->in_run--;
    if (srv->listen_fd >= 0) {
        struct stat st;
        close(srv->listen_fd);
        if (lstat(srv->socket_path, &st) == 0 && st.st_dev == srv->socket_dev &&
            st.st_ino == srv->socket_ino)
            unlink(srv->socket_path);
    }
    if (srv->wake_fd >= 0)
        close(srv->wake_fd);
    if (srv->timer_fd >= 0)
        close(srv->timer_fd);
    if (srv->epfd >= 0)
        close(srv->epfd);
    for (size_t i = 0; i < srv->n_methods; i++) {
        free(srv->methods[i]->path);
        free(srv->methods[i]);
    }
    free(srv->methods);
    free(srv->socket_path);
    nghttp2_session_callbacks_del(srv->callbacks);
    nghttp2_option_del(srv->option);
    free(srv);
}

static int add_method(struct gs_grpc_server *srv, const char *path, const struct method *m)
{
    size_t n = path ? strlen(path) : 0;

    if (n < 2 || path[0] != '/' || n > GS_GRPC_MAX_METHOD_BYTES)
        return GS_EINVAL;
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i]->path, path) == 0)
            return GS_EEXIST;
    struct method **nm = realloc(srv->methods, (srv->n_methods + 1) * sizeof(struct method *));
    if (nm == NULL)
        return GS_ENOMEM;
    srv->methods = nm;
    struct method *copy = malloc(sizeof *copy);
    char *p = malloc(n + 1);
    if (copy == NULL || p == NULL) {
        free(copy);
        free(p);
        return GS_ENOMEM;
    }
    memcpy(p, path, n + 1);
    *copy = *m;
    copy->path = p;
    nm[srv->n_methods++] = copy;
    return GS_OK;
}

int gs_grpc_server_add_unary(struct gs_grpc_server *srv, const char *method, gs_grpc_unary_fn fn,
                             void *user)
{
    struct method m = {NULL, fn, NULL, NULL, user};
    if (fn == NULL)
        return GS_EINVAL;
    return add_method(srv, method, &m);
}

int gs_grpc_server_add_stream(struct gs_grpc_server *srv, const char *method,
                              gs_grpc_stream_open_fn open_fn, gs_grpc_stream_close_fn close_fn,
                              void *user)
{
    struct method m = {NULL, NULL, open_fn, close_fn, user};
    if (open_fn == NULL || close_fn == NULL)
        return GS_EINVAL;
    return add_method(srv, method, &m);
}

int gs_grpc_server_listen(struct gs_grpc_server *srv, const char *socket_path)
{
    struct sockaddr_un sa;
    struct stat st;
    size_t n = socket_path ? strlen(socket_path) : 0;
    int fd = -1;
    int rc = GS_EIO;

    if (n == 0 || n >= sizeof sa.sun_path || srv->listen_fd >= 0)
        return GS_EINVAL;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, socket_path, n + 1);
    if (lstat(socket_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return GS_EEXIST;
        /* A socket someone still listens on belongs to a live server (a second agent, say):
         * taking it over would make the two unlink each other's sockets in turn. The probe
         * does not block: a live owner that is not accepting (its backlog full) answers
         * EAGAIN at once where a blocking connect() would wait for it. Only ECONNREFUSED
         * (nobody listens) makes the socket stale; any other answer leaves it alone. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (probe < 0) {
            gs__srv_say(srv, "grpc: socket: %s", strerror(errno));
            return GS_EIO;
        }
        int c = connect(probe, (struct sockaddr *)&sa, sizeof sa);
        int why = c == 0 ? 0 : errno;
        close(probe);
        if (c == 0 || (why != ECONNREFUSED && why != ENOENT)) {
            gs__srv_say(srv, "grpc: %s is served by another process (%s); not taking it over",
                        socket_path, c == 0 ? "it accepts connections" : strerror(why));
            return GS_EEXIST;
        }
        if (why == ECONNREFUSED)
            unlink(socket_path); /* a stale socket of an earlier run */
    }
    char *copy = malloc(n + 1);
    if (copy == NULL)
        return GS_ENOMEM;
    memcpy(copy, socket_path, n + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        gs__srv_say(srv, "grpc: socket: %s", strerror(errno));
        goto out;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        gs__srv_say(srv, "grpc: bind %s: %s", socket_path, strerror(errno));
        goto out;
    }
    if (lstat(socket_path, &st) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        gs__srv_say(srv, "grpc: listen %s: %s", socket_path, strerror(errno));
        unlink(socket_path);
        goto out;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &srv->listen_tag};
    if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
        gs__srv_say(srv, "grpc: epoll_ctl: %s", strerror(errno));
        unlink(socket_path);
        goto out;
    }
    srv->listen_fd = fd;
    srv->socket_path = copy;
    srv->socket_dev = st.st_dev;
    srv->socket_ino = st.st_ino;
    return GS_OK;
out:
    if (fd >= 0)
        close(fd);
    free(copy);
    return rc;
}

int gs_grpc_server_fd(const struct gs_grpc_server *srv)
{
    return srv->epfd;
}

void gs_grpc_server_wake(struct gs_grpc_server *srv)
{
    uint64_t one = 1;
    /* A full counter (EAGAIN) already means "wake up"; nothing else can fail here. */
    ssize_t n = write(srv->wake_fd, &one, sizeof one);
    (void)n;
}

void gs_grpc_server_set_log(struct gs_grpc_server *srv, gs_grpc_log_fn fn, void *user)
{
    srv->log = fn;
    srv->log_user = user;
}

void gs_grpc_server_stats(const struct gs_grpc_server *srv, struct gs_grpc_server_stats *out)
{
    *out = srv->stats;
    out->request_bytes = srv->in_bytes;
}

/* Finishes a round of work: reaps dead connections and runs owed close callbacks. */
static void epilogue(struct gs_grpc_server *srv)
{
    /* Close callbacks may fail connections and those may owe more callbacks: a few rounds
     * settle it; anything left is picked up by the next run_once (the eventfd is set). */
    for (int round = 0; round < 4 && (srv->n_dead > 0 || srv->closing_head); round++) {
        reap(srv);
        drain_closing(srv);
    }
}

int gs_grpc_server_run_once(struct gs_grpc_server *srv, int timeout_ms)
{
    struct epoll_event evs[EPOLL_BATCH];

    if (srv->n_dead > 0 || srv->closing_head)
        timeout_ms = 0;
    int n = epoll_wait(srv->epfd, evs, EPOLL_BATCH, timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return GS_OK;
        return GS_EIO;
    }
    srv->in_run++;
    for (int i = 0; i < n; i++) {
        enum item_kind *kind = evs[i].data.ptr;
        if (*kind == ITEM_LISTEN) {
            accept_batch(srv);
        } else if (*kind == ITEM_WAKE) {
            uint64_t v;
            ssize_t r = read(srv->wake_fd, &v, sizeof v);
            (void)r;
        } else if (*kind == ITEM_TIMER) {
            uint64_t v;
            ssize_t r = read(srv->timer_fd, &v, sizeof v);
            (void)r;
            srv->timer_at_ms = 0; /* one-shot: fired, so disarmed; the sweep below runs */
        } else {
            struct gs__grpc_conn *conn = (struct gs__grpc_conn *)kind;
            if (!conn->dead && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                conn_on_readable(conn);
            if (!conn->dead && (evs[i].events & EPOLLOUT))
                gs__conn_flush(conn);
        }
    }
    gs__guard_sweep(srv);
    epilogue(srv);
    gs__guard_arm(srv);
    srv->in_run--;
    if (srv->n_dead > 0 || srv->closing_head)
        gs_grpc_server_wake(srv);
    return GS_OK;
}

/* ---- replies and streams ------------------------------------------------------------------ */

int gs_grpc_reply_bytes(struct gs_grpc_reply *reply, const void *data, size_t len)
{
    uint8_t *p = NULL;

    if (len > GS_GRPC_MAX_MESSAGE_BYTES)
        return GS_ERANGE;
    if (len > 0) {
        p = malloc(len);
        if (p == NULL)
            return GS_ENOMEM;
        memcpy(p, data, len);
    }
    free(reply->data);
    reply->data = p;
    reply->len = len;
    return GS_OK;
}

int gs_grpc_reply_message(struct gs_grpc_reply *reply, const ProtobufCMessage *msg)
{
    uint8_t *p;
    size_t len;
    int rc = gs_grpc_pack(msg, &p, &len);
    if (rc != GS_OK)
        return rc;
    free(reply->data);
    reply->data = p;
    reply->len = len;
    return GS_OK;
}

int gs_grpc_reply_error(struct gs_grpc_reply *reply, int status, const char *message)
{
    if (status <= GS_GRPC_OK || status > GS_GRPC_UNAUTHENTICATED)
        return GS_EINVAL;
    reply->status = status;
    free(reply->message);
    reply->message = NULL;
    if (message == NULL)
        return GS_OK;
    size_t n = strlen(message);
    if (n > GS_GRPC_MAX_STATUS_MESSAGE_BYTES)
        n = GS_GRPC_MAX_STATUS_MESSAGE_BYTES;
    reply->message = malloc(n + 1);
    if (reply->message == NULL)
        return GS_ENOMEM;
    memcpy(reply->message, message, n);
    reply->message[n] = '\0';
    return GS_OK;
}

int gs_grpc_stream_send(struct gs_grpc_stream *stream, const void *data, size_t len)
{
    if (stream->conn == NULL || stream->h2_closed || stream->conn->dead || stream->reset)
        return GS_EIO;
    if (stream->finishing)
        return GS_EINVAL;
    size_t before = gs__buf_size(&stream->out);
    struct gs__grpc_conn *conn = stream->conn;
    int rc = stream_queue(stream, data, len);
    if (rc != GS_OK) {
        gs__conn_request_flush(conn); /* the RST_STREAM of streams reset for room */
        return rc;
    }
    if (!stream->headers_submitted) {
        rc = submit_headers(stream);
        if (rc != GS_OK) {
            stream->out.len = stream->out.off + before;
            gs__stream_out_sync(conn->srv, stream);
            return rc;
        }
    } else {
        nghttp2_session_resume_data(stream->conn->session, stream->id);
    }
    gs__conn_request_flush(stream->conn);
    return GS_OK;
}

int gs_grpc_stream_send_message(struct gs_grpc_stream *stream, const ProtobufCMessage *msg)
{
    uint8_t *p;
    size_t len;
    int rc = gs_grpc_pack(msg, &p, &len);
    if (rc != GS_OK)
        return rc;
    rc = gs_grpc_stream_send(stream, p, len);
    free(p);
    return rc;
}

int gs_grpc_stream_finish(struct gs_grpc_stream *stream, int status, const char *message)
{
    if (status < GS_GRPC_OK || status > GS_GRPC_UNAUTHENTICATED)
        return GS_EINVAL;
    if (stream->conn && stream->conn->dead)
        return GS_EIO;
    return stream_finish(stream, status, message);
}

size_t gs_grpc_stream_queued_bytes(const struct gs_grpc_stream *stream)
{
    return gs__buf_size(&stream->out);
}

void gs_grpc_stream_set_user(struct gs_grpc_stream *stream, void *user)
{
    stream->app_user = user;
}

void *gs_grpc_stream_user(const struct gs_grpc_stream *stream)
{
    return stream->app_user;
}

/* ---- memory connections (tests, fuzzing) -------------------------------------------------- */

int gs__grpc_server_mem_conn(struct gs_grpc_server *srv, struct gs__buf *capture,
                             struct gs__grpc_conn **out)
{
    *out = NULL;
    if (srv->stats.connections >= srv->limits.max_connections)
        return GS_ELIMIT;
    int rc = conn_new(srv, -1, capture, out);
    if (rc == GS_OK)
        gs__conn_flush(*out);
    return rc;
}

int gs__grpc_conn_feed(struct gs__grpc_conn *conn, const uint8_t *data, size_t len)
{
    struct gs_grpc_server *srv = conn->srv;

    srv->in_run++;
    if (!conn->dead && conn_recv(conn, data, len))
        gs__conn_flush(conn);
    epilogue(srv);
    srv->in_run--;
    return conn->dead ? GS_EPARSE : GS_OK;
}

void gs__grpc_conn_close(struct gs__grpc_conn *conn)
{
    struct gs_grpc_server *srv = conn->srv;

    srv->in_run++;
    conn_destroy(conn);
    epilogue(srv);
    srv->in_run--;
}
