/*
 * The gRPC server's bounds against local peers that misbehave or are hostile (issue 9; the
 * limits and their defaults are documented at struct gs_grpc_server_limits in
 * include/gpusched/grpc.h):
 *
 * - Deadlines. A connection must finish its handshake (the client preface and a first frame,
 *   which HTTP/2 requires to be SETTINGS) within handshake_timeout_ms of accept; one with no
 *   open stream for idle_timeout_ms is closed, as grpc-go's MaxConnectionIdle does (idle
 *   means no outstanding call, so PINGs do not keep it alive); a request whose body is not
 *   complete within body_timeout_ms of its HEADERS is answered DEADLINE_EXCEEDED. The
 *   nearest deadline arms the server's timerfd, which sits in its epoll set, so the server's
 *   descriptor turns readable when one passes and the application's loop needs no timer.
 * - The connection table. When it is full a new connection takes the place of the
 *   connection that has had no stream for the longest (one still in its handshake counts),
 *   which gets GOAWAY(NO_ERROR) and is closed; only when every connection has a call open is
 *   the newcomer refused.
 * - Output. Queued response bytes are counted per connection and for the server; when a
 *   message would pass a cap, the stream with the most queued bytes (in the stream itself,
 *   its connection or the server, whichever cap is passed) is reset with RST_STREAM(CANCEL)
 *   and its queue freed at once, until the message fits. A peer that reads keeps its queue
 *   near empty, so the stream reset is the one whose peer stopped reading.
 * - Request bodies. Buffered bytes are counted per connection (conn_body_max_bytes) and for
 *   the server (server_body_max_bytes); when the server's budget is used up, the connection
 *   holding the most gives bytes back (its largest incomplete request is refused) as long as
 *   it holds more than the one asking, so one peer's unfinished bodies cannot make everyone
 *   else's requests fail.
 *
 * Every event is counted in struct gs_grpc_server_stats and logged at most once a second per
 * kind, with the number left unlogged since the last line.
 */
#define _GNU_SOURCE /* timerfd */

#include "server_int.h"

#include "gpusched/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>

/** Least time between two log lines of one kind of defence event, ms. */
#define GUARD_LOG_INTERVAL_MS 1000

int64_t gs__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gs__guard_say(struct gs_grpc_server *srv, enum guard_event ev, const char *fmt, ...)
{
    struct guard_log *g = &srv->log_state[ev];
    int64_t now = gs__now_ms();
    char line[512];
    va_list ap;

    if (g->last_ms != 0 && now - g->last_ms < GUARD_LOG_INTERVAL_MS) {
        g->suppressed++;
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (g->suppressed > 0)
        gs__srv_say(srv, "%s (and %llu more like it since the last line)", line,
                    (unsigned long long)g->suppressed);
    else
        gs__srv_say(srv, "%s", line);
    g->last_ms = now;
    g->suppressed = 0;
}

/* ---- limits ------------------------------------------------------------------------------- */

void gs_grpc_server_limits_default(struct gs_grpc_server_limits *out)
{
    out->handshake_timeout_ms = 10000;
    out->idle_timeout_ms = 300000;
    out->max_connections = GS_GRPC_MAX_CONNECTIONS;
    out->conn_out_max_bytes = (size_t)16 * 1024 * 1024;
    out->server_out_max_bytes = (size_t)32 * 1024 * 1024;
    out->conn_body_max_bytes = (size_t)8 * 1024 * 1024;
    out->server_body_max_bytes = (size_t)32 * 1024 * 1024;
    out->body_timeout_ms = 30000;
}

int gs_grpc_server_set_limits(struct gs_grpc_server *srv,
                              const struct gs_grpc_server_limits *limits)
{
    const struct gs_grpc_server_limits *l = limits;

    if (l->handshake_timeout_ms <= 0 || l->idle_timeout_ms <= 0 || l->body_timeout_ms <= 0 ||
        l->max_connections == 0 || l->conn_out_max_bytes == 0 || l->server_out_max_bytes == 0 ||
        l->conn_body_max_bytes == 0 || l->server_body_max_bytes == 0)
        return GS_EINVAL;
    srv->limits = *l;
    gs__srv_kick(srv); /* deadlines may have moved: let run_once re-arm the timer */
    return GS_OK;
}

/* ---- closing connections ------------------------------------------------------------------ */

/* Sends GOAWAY (as much as the socket takes now) and marks the connection for teardown: its
 * streams and queues are freed at the end of this round of run_once. */
static void goaway_and_close(struct gs__grpc_conn *conn, uint32_t h2_error)
{
    conn->guard_closing = true;
    if (conn->busy == 0) {
        (void)nghttp2_session_terminate_session(conn->session, h2_error);
        gs__conn_flush(conn);
    }
    gs__conn_mark_dead(conn);
}

bool gs__guard_admit(struct gs_grpc_server *srv)
{
    size_t live = 0;
    struct gs__grpc_conn *victim = NULL;

    for (struct gs__grpc_conn *c = srv->conns; c; c = c->next) {
        if (c->dead)
            continue;
        live++;
        if (c->streams == NULL &&
            (victim == NULL || c->idle_since_ms < victim->idle_since_ms ||
             (c->idle_since_ms == victim->idle_since_ms && c->serial < victim->serial)))
            victim = c;
    }
    if (live < srv->limits.max_connections)
        return true;
    if (victim == NULL)
        return false;
    srv->stats.connections_evicted++;
    gs__guard_say(srv, GUARD_EVICTED,
                  "grpc: connection %llu: evicted (GOAWAY): %zu connections open, it had no "
                  "call for %lld ms%s",
                  (unsigned long long)victim->serial, live,
                  (long long)(gs__now_ms() - victim->idle_since_ms),
                  victim->handshake_done ? "" : " and no handshake");
    goaway_and_close(victim, NGHTTP2_NO_ERROR);
    return true;
}

/* ---- output ------------------------------------------------------------------------------- */

/* Resets a stream whose peer is not reading: RST_STREAM(CANCEL) and its queue freed now. */
static void reset_for_output(struct gs_grpc_stream *s, const char *cap)
{
    struct gs__grpc_conn *conn = s->conn;
    struct gs_grpc_server *srv = conn->srv;
    size_t queued = gs__buf_size(&s->out);

    s->reset = true;
    gs__buf_fini(&s->out);
    gs__stream_out_sync(srv, s);
    (void)nghttp2_submit_rst_stream(conn->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    srv->stats.streams_reset_output++;
    gs__guard_say(srv, GUARD_OUTPUT,
                  "grpc: connection %llu: stream %d reset (CANCEL): its peer is not reading, "
                  "%zu bytes queued, %s output cap reached",
                  (unsigned long long)conn->serial, (int)s->id, queued, cap);
    gs__srv_kick(srv);
}

/* The stream with the most bytes queued on one connection, or on all when conn is NULL. */
static struct gs_grpc_stream *largest_queue(struct gs_grpc_server *srv, struct gs__grpc_conn *conn)
{
    struct gs_grpc_stream *best = NULL;

    for (struct gs__grpc_conn *c = conn ? conn : srv->conns; c; c = conn ? NULL : c->next) {
        if (c->dead)
            continue;
        for (struct gs_grpc_stream *s = c->streams; s; s = s->next)
            if (!s->reset && gs__buf_size(&s->out) > 0 &&
                (best == NULL || gs__buf_size(&s->out) > gs__buf_size(&best->out)))
                best = s;
    }
    return best;
}

int gs__guard_out_room(struct gs_grpc_stream *s, size_t need)
{
    struct gs__grpc_conn *conn = s->conn;
    struct gs_grpc_server *srv = conn->srv;
    const struct gs_grpc_server_limits *l = &srv->limits;

    for (;;) {
        struct gs_grpc_stream *victim;
        const char *cap;
        if (need > s->out.max_bytes - gs__buf_size(&s->out)) {
            victim = s;
            cap = "the stream's";
        } else if (need > l->conn_out_max_bytes || conn->out_bytes > l->conn_out_max_bytes - need) {
            victim = largest_queue(srv, conn);
            cap = "the connection's";
        } else if (need > l->server_out_max_bytes ||
                   srv->stats.out_bytes > l->server_out_max_bytes - need) {
            victim = largest_queue(srv, NULL);
            cap = "the server's";
        } else {
            return GS_OK;
        }
        if (victim == NULL) /* nothing queued anywhere and still too big: this one goes */
            victim = s;
        /* The victim's connection flushes its RST_STREAM: now if another connection and not
         * running nghttp2, otherwise when the caller flushes. */
        struct gs__grpc_conn *vconn = victim->conn;
        reset_for_output(victim, cap);
        if (victim == s)
            return GS_ELIMIT;
        if (vconn != conn)
            gs__conn_request_flush(vconn);
    }
}

/* ---- request bodies ----------------------------------------------------------------------- */

/* Refuses a request for lack of body memory. */
static void refuse_body(struct gs_grpc_stream *s, const char *why)
{
    struct gs__grpc_conn *conn = s->conn;
    struct gs_grpc_server *srv = conn->srv;

    srv->stats.requests_refused_body++;
    gs__guard_say(srv, GUARD_BODY_SHARE,
                  "grpc: connection %llu: request on stream %d refused (RESOURCE_EXHAUSTED): %s",
                  (unsigned long long)conn->serial, (int)s->id, why);
    gs__stream_reject(s, GS_GRPC_RESOURCE_EXHAUSTED, why);
}

bool gs__guard_body_room(struct gs_grpc_stream *s, size_t len)
{
    struct gs__grpc_conn *conn = s->conn;
    struct gs_grpc_server *srv = conn->srv;
    const struct gs_grpc_server_limits *l = &srv->limits;

    if (len > l->conn_body_max_bytes || conn->in_bytes > l->conn_body_max_bytes - len) {
        refuse_body(s, "this connection's share of request buffers is used up");
        return false;
    }
    while (len > l->server_body_max_bytes || srv->in_bytes > l->server_body_max_bytes - len) {
        struct gs__grpc_conn *big = NULL;
        for (struct gs__grpc_conn *c = srv->conns; c; c = c->next)
            if (!c->dead && (big == NULL || c->in_bytes > big->in_bytes))
                big = c;
        if (big == NULL || big == conn || big->in_bytes <= conn->in_bytes + len) {
            refuse_body(s, "server request buffers are full");
            return false;
        }
        struct gs_grpc_stream *most = NULL;
        for (struct gs_grpc_stream *t = big->streams; t; t = t->next)
            if (t->state == ST_BODY &&
                (most == NULL || gs__buf_size(&t->in) > gs__buf_size(&most->in)))
                most = t;
        if (most == NULL || gs__buf_size(&most->in) == 0) { /* cannot happen: big holds bytes */
            refuse_body(s, "server request buffers are full");
            return false;
        }
        refuse_body(most, "server request buffers are full; this connection holds the most");
        gs__conn_request_flush(big);
    }
    return true;
}

/* ---- deadlines ---------------------------------------------------------------------------- */

/* The earliest deadline of a connection (INT64_MAX: none); expired ones are acted on. */
static int64_t conn_sweep(struct gs__grpc_conn *conn, int64_t now, bool act)
{
    struct gs_grpc_server *srv = conn->srv;
    const struct gs_grpc_server_limits *l = &srv->limits;
    int64_t next = INT64_MAX;

    if (!conn->handshake_done) {
        int64_t at = conn->accepted_ms + l->handshake_timeout_ms;
        if (act && now > at) {
            srv->stats.connections_handshake_timeout++;
            gs__guard_say(srv, GUARD_HANDSHAKE,
                          "grpc: connection %llu: closed: no HTTP/2 preface and SETTINGS within "
                          "%d ms",
                          (unsigned long long)conn->serial, l->handshake_timeout_ms);
            goaway_and_close(conn, NGHTTP2_SETTINGS_TIMEOUT);
            return INT64_MAX;
        }
        next = at;
    }
    if (conn->streams == NULL) {
        int64_t at = conn->idle_since_ms + l->idle_timeout_ms;
        if (act && now > at) {
            srv->stats.connections_idle_timeout++;
            gs__guard_say(srv, GUARD_IDLE,
                          "grpc: connection %llu: closed (GOAWAY): no call for %d ms",
                          (unsigned long long)conn->serial, l->idle_timeout_ms);
            goaway_and_close(conn, NGHTTP2_NO_ERROR);
            return INT64_MAX;
        }
        return at < next ? at : next;
    }
    /* Answers are only submitted while the list is walked: a flush now could close and free
     * the stream under the walk, so it waits until the end. */
    conn->busy++;
    for (struct gs_grpc_stream *s = conn->streams; s; s = s->next) {
        if ((s->state != ST_HEADERS && s->state != ST_BODY) || s->remote_closed)
            continue;
        int64_t at = s->opened_ms + l->body_timeout_ms;
        if (act && now > at) {
            char why[96];
            srv->stats.requests_body_timeout++;
            (void)snprintf(why, sizeof why, "request not complete within %d ms",
                           l->body_timeout_ms);
            gs__guard_say(srv, GUARD_BODY_TIMEOUT,
                          "grpc: connection %llu: stream %d: %s (DEADLINE_EXCEEDED)",
                          (unsigned long long)conn->serial, (int)s->id, why);
            gs__stream_reject(s, GS_GRPC_DEADLINE_EXCEEDED, why);
            continue;
        }
        if (at < next)
            next = at;
    }
    conn->busy--;
    if (conn->want_flush)
        gs__conn_flush(conn);
    return next;
}

void gs__guard_sweep(struct gs_grpc_server *srv)
{
    int64_t now = gs__now_ms();

    for (struct gs__grpc_conn *c = srv->conns; c; c = c->next) {
        if (c->dead || conn_sweep(c, 0, false) >= now)
            continue;
        /* A deadline passed. If the application's loop was slow, what would have met it may
         * be waiting in the socket: read that first, then judge. */
        gs__conn_read_pending(c);
        if (!c->dead)
            (void)conn_sweep(c, gs__now_ms(), true);
    }
}

void gs__guard_arm(struct gs_grpc_server *srv)
{
    int64_t next = INT64_MAX;

    for (struct gs__grpc_conn *c = srv->conns; c; c = c->next) {
        if (c->dead)
            continue;
        int64_t at = conn_sweep(c, 0, false);
        if (at < next)
            next = at;
    }
    int64_t want = next == INT64_MAX ? 0 : next;
    if (want == srv->timer_at_ms)
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (want != 0) {
        /* Absolute CLOCK_MONOTONIC time, as gs__now_ms counts, one ms after the deadline: times
         * are whole ms rounded down, so a deadline counts as passed only once the clock reads
         * more than it (never early, at most 1 ms late). One already past fires at once. */
        int64_t fire = want + 1;
        its.it_value.tv_sec = (time_t)(fire / 1000);
        its.it_value.tv_nsec = (long)(fire % 1000) * 1000000L;
    }
    if (timerfd_settime(srv->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        srv->timer_at_ms = want;
}
