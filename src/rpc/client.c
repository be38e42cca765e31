/*
 * The blocking gRPC client (contract in include/gpusched/grpc.h): one nghttp2 client session
 * over a non-blocking UNIX socket, driven by poll() until the call in progress reaches what
 * the caller waits for or its deadline passes.
 *
 * One call is in progress at a time. Its response body is collected in a bounded buffer; a
 * unary call takes the one message at the end, a stream hands out each message as soon as it
 * is complete. The socket is read only while the caller waits for something, so a slow reader
 * of a stream pushes back on the server through HTTP/2 flow control rather than through memory
 * here. Deadlines use CLOCK_MONOTONIC.
 *
 * Transport failures end the call with a synthesised status (UNAVAILABLE, DEADLINE_EXCEEDED,
 * RESOURCE_EXHAUSTED, INTERNAL), as gRPC libraries do, and a broken connection is dropped so
 * that the next call dials again.
 */
#define _GNU_SOURCE /* SOCK_NONBLOCK, SOCK_CLOEXEC, MSG_NOSIGNAL */

#include "rpc_int.h"

#include "gpusched/err.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/** Response bytes buffered at most: one whole message plus one HTTP/2 frame. */
#define CLIENT_MAX_BUFFERED_BYTES (GS__GRPC_PREFIX_BYTES + GS_GRPC_MAX_MESSAGE_BYTES + 16384u)
/** Receive window we grant the server per stream (SETTINGS_INITIAL_WINDOW_SIZE), bytes. */
#define CLIENT_STREAM_WINDOW_BYTES (1u << 20)

/** The call in progress. */
struct call {
    int32_t id;         /**< HTTP/2 stream id; 0 when no call is in progress */
    bool streaming;     /**< a server-streaming call (messages handed out one by one) */
    struct gs__buf out; /**< request body not yet given to nghttp2 */
    struct gs__buf in;  /**< response body received and not yet handed out */
    int http_status;    /**< :status, 0 until received */
    int grpc_status;    /**< grpc-status, -1 until received */
    char *grpc_message; /**< grpc-message, decoded, or NULL */
    bool closed;        /**< nghttp2 closed the stream */
    uint32_t h2_error;  /**< error code of the close */
    bool failed;        /**< ended locally (transport, limit, protocol) */
    int fail_status;    /**< status for a local end */
    char fail_msg[192]; /**< message for a local end */
};

struct gs_grpc_client {
    char *socket_path;        /**< owned */
    int fd;                   /**< connected socket, or -1 */
    nghttp2_session *session; /**< session on fd, or NULL */
    char conn_error[160];     /**< why the connection broke, set by callbacks */
    struct call call;         /**< the call in progress */
};

/* ---- time --------------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline (-1: none), for poll(). */
static int remaining_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > 60000 ? 60000 : (int)left;
}

/* ---- call state --------------------------------------------------------------------------- */

static void call_reset(struct call *c)
{
    gs__buf_fini(&c->out);
    gs__buf_fini(&c->in);
    free(c->grpc_message);
    memset(c, 0, sizeof *c);
    c->grpc_status = -1;
    gs__buf_init(&c->out, GS__GRPC_PREFIX_BYTES + GS_GRPC_MAX_MESSAGE_BYTES);
    gs__buf_init(&c->in, CLIENT_MAX_BUFFERED_BYTES);
}

static void call_fail(struct call *c, int status, const char *msg)
{
    if (c->failed)
        return;
    c->failed = true;
    c->fail_status = status;
    (void)snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg);
}

static char *dup_text(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

/* ---- nghttp2 callbacks -------------------------------------------------------------------- */

static ssize_t send_cb(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
                       void *user_data)
{
    struct gs_grpc_client *c = user_data;

    (void)session;
    (void)flags;
    for (;;) {
        ssize_t n = send(c->fd, data, length, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return NGHTTP2_ERR_WOULDBLOCK;
        (void)snprintf(c->conn_error, sizeof c->conn_error, "send: %s", strerror(errno));
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
}

static int on_header_cb(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    struct gs_grpc_client *c = user_data;
    struct call *k = &c->call;

    (void)session;
    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != k->id || k->id == 0)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int v = gs__grpc_status_parse((const char *)value, valuelen);
        k->http_status = v < 0 ? 0 : v;
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int v = gs__grpc_status_parse((const char *)value, valuelen);
        k->grpc_status = v < 0 ? GS_GRPC_UNKNOWN : v;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        char *m;
        if (gs__grpc_percent_decode((const char *)value, valuelen, &m) == GS_OK) {
            free(k->grpc_message);
            k->grpc_message = m;
        }
    }
    return 0;
}

static int on_data_chunk_recv_cb(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                                 const uint8_t *data, size_t len, void *user_data)
{
    struct gs_grpc_client *c = user_data;
    struct call *k = &c->call;

    (void)flags;
    if (stream_id != k->id || k->id == 0 || k->failed)
        return 0;
    int rc = gs__buf_append(&k->in, data, len);
    if (rc != GS_OK) {
        call_fail(k, GS_GRPC_RESOURCE_EXHAUSTED,
                  rc == GS_ENOMEM ? "client out of memory" : "response message larger than 4 MiB");
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_stream_close_cb(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    struct gs_grpc_client *c = user_data;

    (void)session;
    if (stream_id == c->call.id && c->call.id != 0) {
        c->call.closed = true;
        c->call.h2_error = error_code;
    }
    return 0;
}

/* nghttp2 data provider of the request body; END_STREAM after the last byte. */
static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    struct gs__buf *b = source->ptr;
    size_t avail = gs__buf_size(b);
    size_t n = avail < length ? avail : length;

    (void)session;
    (void)stream_id;
    (void)user_data;
    if (n > 0) {
        memcpy(buf, gs__buf_head(b), n);
        gs__buf_consume(b, n);
    }
    if (gs__buf_size(b) == 0)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- connection --------------------------------------------------------------------------- */

static void drop_connection(struct gs_grpc_client *c)
{
    if (c->session) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* Connects the socket before the deadline. Returns GS_OK, or GS_EIO with c->conn_error set. */
static int dial(struct gs_grpc_client *c, int64_t deadline)
{
    struct sockaddr_un sa;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, c->socket_path, strlen(c->socket_path) + 1);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            (void)snprintf(c->conn_error, sizeof c->conn_error, "socket: %s", strerror(errno));
            return GS_EIO;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            c->fd = fd;
            return GS_OK;
        }
        int err = errno;
        close(fd);
        /* A full listen backlog (EAGAIN on UNIX sockets): retry briefly until the deadline. */
        if ((err == EAGAIN || err == EINTR) && remaining_ms(deadline) > 0) {
            poll(NULL, 0, 5);
            continue;
        }
        (void)snprintf(c->conn_error, sizeof c->conn_error, "connect %s: %s", c->socket_path,
                       strerror(err));
        return GS_EIO;
    }
}

static int connect_session(struct gs_grpc_client *c, int64_t deadline)
{
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CLIENT_STREAM_WINDOW_BYTES},
    };
    int rc = dial(c, deadline);

    if (rc != GS_OK)
        return rc;
    rc = GS_ENOMEM;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        goto out;
    nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close_cb);
    if (nghttp2_session_client_new(&c->session, cbs, c) != 0)
        goto out;
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0)
        goto out;
    rc = GS_OK;
out:
    nghttp2_session_callbacks_del(cbs);
    if (rc != GS_OK)
        drop_connection(c);
    return rc;
}

/* True when the connection can carry a new call. */
static bool connection_usable(struct gs_grpc_client *c)
{
    return c->session && nghttp2_session_want_read(c->session) &&
           nghttp2_session_get_next_stream_id(c->session) < (1u << 30);
}

/* Marks the connection broken: the call in progress fails with UNAVAILABLE. */
static void connection_broken(struct gs_grpc_client *c, const char *why)
{
    char msg[192];
    (void)snprintf(msg, sizeof msg, "connection to %s failed: %s", c->socket_path, why);
    call_fail(&c->call, GS_GRPC_UNAVAILABLE, msg);
    drop_connection(c);
}

/* Writes what nghttp2 has to send. Returns false when the connection broke. */
static bool flush(struct gs_grpc_client *c)
{
    int rv = nghttp2_session_send(c->session);
    if (rv != 0) {
        connection_broken(c, c->conn_error[0] ? c->conn_error : nghttp2_strerror(rv));
        return false;
    }
    return true;
}

/*
 * One round of I/O: flush, wait for the socket until the deadline, read what is there.
 * Returns GS_OK after progress, GS_ELIMIT when the deadline passed, GS_EIO when the connection
 * broke (the call has failed then).
 */
static int pump(struct gs_grpc_client *c, int64_t deadline)
{
    uint8_t buf[16384];

    if (c->session == NULL)
        return GS_EIO;
    if (!flush(c))
        return GS_EIO;
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
        connection_broken(c, "closed by the server (GOAWAY)");
        return GS_EIO;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (nghttp2_session_want_write(c->session))
        p.events |= POLLOUT;
    int n = poll(&p, 1, remaining_ms(deadline));
    if (n < 0) {
        if (errno == EINTR)
            return GS_OK;
        connection_broken(c, strerror(errno));
        return GS_EIO;
    }
    if (n == 0)
        return deadline >= 0 && now_ms() >= deadline ? GS_ELIMIT : GS_OK;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r == 0) {
            connection_broken(c, "closed by the server");
            return GS_EIO;
        }
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            connection_broken(c, strerror(errno));
            return GS_EIO;
        }
        if (r > 0) {
            ssize_t rv = nghttp2_session_mem_recv(c->session, buf, (size_t)r);
            if (rv < 0) {
                connection_broken(c, nghttp2_strerror((int)rv));
                return GS_EIO;
            }
        }
    }
    return GS_OK;
}

/* Cancels the call in progress on the wire (best effort, without waiting). */
static void cancel_on_wire(struct gs_grpc_client *c)
{
    if (c->session && c->call.id > 0 && !c->call.closed) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, c->call.id, NGHTTP2_CANCEL);
        if (nghttp2_session_send(c->session) != 0)
            drop_connection(c);
    }
}

/* Validates the arguments shared by unary and stream calls. */
static bool method_ok(const char *method)
{
    size_t n = method ? strlen(method) : 0;
    if (n < 2 || n > GS_GRPC_MAX_METHOD_BYTES || method[0] != '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)method[i] <= 0x20 || (unsigned char)method[i] >= 0x7f)
            return false;
    return true;
}

/*
 * Connects if needed and submits a request whose body (already framed) is in c->call.out.
 * On a transport problem the call is failed (status set) and GS_OK returned; GS_ENOMEM only
 * when memory runs out.
 */
static int start_call(struct gs_grpc_client *c, const char *method, const char *content_type,
                      int timeout_ms, int64_t deadline)
{
    char timeout[16];
    nghttp2_nv nv[8];
    size_t nnv = 0;

#define NV(n, v)                                                                                   \
    do {                                                                                           \
        nv[nnv].name = (uint8_t *)(uintptr_t)(n);                                                  \
        nv[nnv].value = (uint8_t *)(uintptr_t)(v);                                                 \
        nv[nnv].namelen = strlen(n);                                                               \
        nv[nnv].valuelen = strlen(v);                                                              \
        nv[nnv].flags = NGHTTP2_NV_FLAG_NONE;                                                      \
        nnv++;                                                                                     \
    } while (0)

    if (!connection_usable(c))
        drop_connection(c);
    if (c->session == NULL) {
        c->conn_error[0] = '\0';
        int rc = connect_session(c, deadline);
        if (rc == GS_ENOMEM)
            return rc;
        if (rc != GS_OK) {
            call_fail(&c->call, GS_GRPC_UNAVAILABLE, c->conn_error);
            return GS_OK;
        }
    }
    gs__grpc_timeout_format(timeout_ms, timeout);
    NV(":method", "POST");
    NV(":scheme", "http");
    NV(":path", method);
    NV(":authority", "localhost");
    if (content_type)
        NV("content-type", content_type);
    NV("te", "trailers");
    NV("grpc-timeout", timeout);
    NV("user-agent", "gpusched-grpc/0.1");
#undef NV
    nghttp2_data_provider prd;
    prd.source.ptr = &c->call.out;
    prd.read_callback = data_read_cb;
    int32_t id = nghttp2_submit_request(c->session, NULL, nv, nnv, &prd, NULL);
    if (id < 0) {
        if (id == NGHTTP2_ERR_NOMEM)
            return GS_ENOMEM;
        connection_broken(c, nghttp2_strerror(id));
        return GS_OK;
    }
    c->call.id = id;
    flush(c);
    return GS_OK;
}

/* Moves the final status of the finished (or failed) call into *out. */
static int final_status(struct gs_grpc_client *c, struct gs_grpc_result *out)
{
    struct call *k = &c->call;
    char msg[96];
    const char *text = NULL;

    if (k->failed) {
        out->status = k->fail_status;
        text = k->fail_msg;
    } else if (k->grpc_status >= 0) {
        out->status = k->grpc_status;
        out->message = k->grpc_message;
        k->grpc_message = NULL;
        return GS_OK;
    } else if (k->http_status != 0 && k->http_status != 200) {
        out->status = gs__grpc_status_from_http(k->http_status);
        (void)snprintf(msg, sizeof msg, "HTTP status %d", k->http_status);
        text = msg;
    } else if (k->h2_error != NGHTTP2_NO_ERROR) {
        out->status = gs__grpc_status_from_h2(k->h2_error);
        (void)snprintf(msg, sizeof msg, "stream reset by the server (HTTP/2 error %u)",
                       (unsigned)k->h2_error);
        text = msg;
    } else {
        out->status = GS_GRPC_UNKNOWN;
        text = "response ended without grpc-status";
    }
    out->message = dup_text(text);
    return out->message ? GS_OK : GS_ENOMEM;
}

/* Takes the next complete message off the call's buffer. Returns GS_OK with *got set. */
static int next_message(struct call *k, struct gs_grpc_result *out, bool *got)
{
    struct gs__grpc_frame f;
    int rc = gs__grpc_frame_parse(gs__buf_head(&k->in), gs__buf_size(&k->in),
                                  GS_GRPC_MAX_MESSAGE_BYTES, &f);

    *got = false;
    if (rc == GS_ERANGE) {
        call_fail(k, GS_GRPC_RESOURCE_EXHAUSTED, "response message larger than 4 MiB");
        return GS_OK;
    }
    if (rc != GS_OK || (f.have_prefix && f.compressed)) {
        call_fail(k, GS_GRPC_INTERNAL,
                  rc != GS_OK ? "invalid message prefix in response"
                              : "compressed response message (not supported)");
        return GS_OK;
    }
    if (!f.complete)
        return GS_OK;
    if (f.msg_len > 0) {
        out->data = malloc(f.msg_len);
        if (out->data == NULL)
            return GS_ENOMEM;
        memcpy(out->data, f.msg, f.msg_len);
    }
    out->len = f.msg_len;
    gs__buf_consume(&k->in, f.frame_bytes);
    *got = true;
    return GS_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

void gs_grpc_result_fini(struct gs_grpc_result *r)
{
    if (r == NULL)
        return;
    free(r->message);
    free(r->data);
    memset(r, 0, sizeof *r);
}

int gs_grpc_client_new(const char *socket_path, struct gs_grpc_client **out)
{
    struct sockaddr_un sa;
    size_t n = socket_path ? strlen(socket_path) : 0;

    *out = NULL;
    if (n == 0 || n >= sizeof sa.sun_path)
        return GS_EINVAL;
    struct gs_grpc_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return GS_ENOMEM;
    c->socket_path = dup_text(socket_path);
    if (c->socket_path == NULL) {
        free(c);
        return GS_ENOMEM;
    }
    c->fd = -1;
    call_reset(&c->call);
    *out = c;
    return GS_OK;
}

void gs_grpc_client_free(struct gs_grpc_client *c)
{
    if (c == NULL)
        return;
    cancel_on_wire(c);
    drop_connection(c);
    call_reset(&c->call);
    gs__buf_fini(&c->call.out);
    gs__buf_fini(&c->call.in);
    free(c->socket_path);
    free(c);
}

/* Frames a request message into the call's outgoing buffer. */
static int frame_request(struct call *k, const void *req, size_t req_len)
{
    uint8_t prefix[GS__GRPC_PREFIX_BYTES];
    gs__grpc_frame_prefix(prefix, false, (uint32_t)req_len);
    int rc = gs__buf_append(&k->out, prefix, sizeof prefix);
    if (rc == GS_OK)
        rc = gs__buf_append(&k->out, req, req_len);
    return rc == GS_ELIMIT ? GS_EINVAL : rc;
}

/* Runs a unary call whose request body is in c->call.out, to its end or deadline. */
static int run_unary(struct gs_grpc_client *c, const char *method, const char *content_type,
                     int timeout_ms, struct gs_grpc_result *out)
{
    struct call *k = &c->call;
    int64_t deadline = now_ms() + timeout_ms;
    int rc = start_call(c, method, content_type, timeout_ms, deadline);

    while (rc == GS_OK && !k->failed && !k->closed) {
        int p = pump(c, deadline);
        if (p == GS_ELIMIT) {
            char msg[96];
            (void)snprintf(msg, sizeof msg, "deadline of %d ms exceeded", timeout_ms);
            call_fail(k, GS_GRPC_DEADLINE_EXCEEDED, msg);
        }
    }
    if (rc == GS_OK && !k->closed)
        cancel_on_wire(c);
    if (rc == GS_OK && !k->failed && k->grpc_status == GS_GRPC_OK) {
        /* Exactly one message must have come with an OK status. */
        bool got = false;
        rc = next_message(k, out, &got);
        if (rc == GS_OK && !k->failed && (!got || gs__buf_size(&k->in) != 0)) {
            gs_grpc_result_fini(out);
            call_fail(k, GS_GRPC_INTERNAL,
                      got ? "more than one response message" : "missing response message");
        }
        if (k->failed) {
            free(out->data);
            out->data = NULL;
            out->len = 0;
        }
    }
    if (rc == GS_OK)
        rc = final_status(c, out);
    if (rc != GS_OK) {
        gs_grpc_result_fini(out);
        drop_connection(c);
    }
    call_reset(k);
    return rc;
}

int gs__grpc_client_unary_raw(struct gs_grpc_client *c, const char *method, const void *body,
                              size_t body_len, const char *content_type, int timeout_ms,
                              struct gs_grpc_result *out)
{
    memset(out, 0, sizeof *out);
    if (!method_ok(method) || timeout_ms <= 0 || c->call.id != 0 || c->call.streaming ||
        body_len > GS__GRPC_PREFIX_BYTES + GS_GRPC_MAX_MESSAGE_BYTES)
        return GS_EINVAL;
    int rc = gs__buf_append(&c->call.out, body, body_len);
    if (rc != GS_OK) {
        call_reset(&c->call);
        return rc;
    }
    return run_unary(c, method, content_type, timeout_ms, out);
}

int gs_grpc_client_unary(struct gs_grpc_client *c, const char *method, const void *req,
                         size_t req_len, int timeout_ms, struct gs_grpc_result *out)
{
    memset(out, 0, sizeof *out);
    if (!method_ok(method) || timeout_ms <= 0 || c->call.id != 0 || c->call.streaming ||
        req_len > GS_GRPC_MAX_MESSAGE_BYTES || (req == NULL && req_len > 0))
        return GS_EINVAL;
    int rc = frame_request(&c->call, req, req_len);
    if (rc != GS_OK) {
        call_reset(&c->call);
        return rc;
    }
    return run_unary(c, method, "application/grpc", timeout_ms, out);
}

int gs_grpc_client_stream_start(struct gs_grpc_client *c, const char *method, const void *req,
                                size_t req_len, int timeout_ms)
{
    if (!method_ok(method) || timeout_ms <= 0 || c->call.id != 0 || c->call.streaming ||
        req_len > GS_GRPC_MAX_MESSAGE_BYTES || (req == NULL && req_len > 0))
        return GS_EINVAL;
    struct call *k = &c->call;
    int64_t deadline = now_ms() + timeout_ms;
    int rc = frame_request(k, req, req_len);
    if (rc == GS_OK)
        rc = start_call(c, method, "application/grpc", timeout_ms, deadline);
    if (rc != GS_OK) {
        call_reset(k);
        drop_connection(c);
        return rc;
    }
    k->streaming = true;
    /* Push the request out now, so the server starts even before the first read. */
    while (!k->failed && !k->closed && gs__buf_size(&k->out) > 0) {
        if (pump(c, deadline) == GS_ELIMIT) {
            call_fail(k, GS_GRPC_DEADLINE_EXCEEDED, "deadline exceeded sending the request");
            cancel_on_wire(c);
        }
    }
    return GS_OK;
}

int gs_grpc_client_stream_read(struct gs_grpc_client *c, int timeout_ms, struct gs_grpc_result *out,
                               enum gs_grpc_read *what)
{
    struct call *k = &c->call;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    int rc = GS_OK;

    memset(out, 0, sizeof *out);
    *what = GS_GRPC_READ_TIMEOUT;
    if (!k->streaming)
        return GS_EINVAL;
    for (;;) {
        if (!k->failed) {
            bool got;
            rc = next_message(k, out, &got);
            if (rc != GS_OK)
                break;
            if (got) {
                out->status = GS_GRPC_OK;
                *what = GS_GRPC_READ_MESSAGE;
                return GS_OK;
            }
        }
        if (k->failed || k->closed) {
            if (!k->failed && gs__buf_size(&k->in) != 0)
                call_fail(k, GS_GRPC_INTERNAL, "truncated response message");
            if (k->failed)
                cancel_on_wire(c);
            rc = final_status(c, out);
            *what = GS_GRPC_READ_END;
            break;
        }
        int p = pump(c, deadline);
        if (p == GS_ELIMIT)
            return GS_OK; /* READ_TIMEOUT, stream still open */
    }
    if (rc != GS_OK) {
        gs_grpc_result_fini(out);
        cancel_on_wire(c);
        drop_connection(c);
        *what = GS_GRPC_READ_END;
    }
    call_reset(k);
    return rc;
}

void gs_grpc_client_stream_cancel(struct gs_grpc_client *c)
{
    if (!c->call.streaming)
        return;
    cancel_on_wire(c);
    call_reset(&c->call);
}

int gs_grpc_call_unary(const char *socket_path, const char *method, const void *req, size_t req_len,
                       int timeout_ms, struct gs_grpc_result *out)
{
    struct gs_grpc_client *c;

    memset(out, 0, sizeof *out);
    int rc = gs_grpc_client_new(socket_path, &c);
    if (rc != GS_OK)
        return rc;
    rc = gs_grpc_client_unary(c, method, req, req_len, timeout_ms, out);
    gs_grpc_client_free(c);
    return rc;
}

int gs_grpc_call_message(const char *socket_path, const char *method, const ProtobufCMessage *req,
                         int timeout_ms, struct gs_grpc_result *out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = gs_grpc_pack(req, &buf, &len);
    if (rc == GS_OK)
        rc = gs_grpc_call_unary(socket_path, method, buf, len, timeout_ms, out);
    free(buf);
    return rc;
}
