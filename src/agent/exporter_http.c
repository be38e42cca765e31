/*
 * The exporter's HTTP side (contract in include/gpusched/exporter.h): snapshot storage and a
 * libmicrohttpd server for /metrics and /healthz.
 *
 * libmicrohttpd runs its internal polling thread. The snapshot lives in the exporter under a
 * mutex; a scrape renders into the exporter's own buffer under that mutex and hands
 * libmicrohttpd a copy, so the buffer is reused from scrape to scrape.
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */

#include "gpusched/exporter.h"

#include "gpusched/err.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/** Most HTTP connections at once. */
#define EXPORTER_CONNECTIONS 256
/** Most connections from one client address. */
#define EXPORTER_PER_ADDRESS 8
/** A connection that sends nothing for this long is closed, s. */
#define EXPORTER_IDLE_S 5
/** Memory of one connection's request and headers, bytes. */
#define EXPORTER_CONNECTION_MEMORY (32 * 1024)

struct gs_exporter {
    pthread_mutex_t lock;              /**< guards everything below */
    struct gs_exporter_snapshot snap;  /**< current snapshot; arrays owned */
    struct gs_exporter_gpu *gpus;      /**< storage of snap.gpus, GS_GPU_MAX entries */
    struct gs_exporter_attr *attr;     /**< storage of snap.attr */
    uint32_t attr_cap;                 /**< entries allocated in attr */
    struct gs_exporter_podval *podval; /**< storage of snap.podval */
    uint32_t podval_cap;               /**< entries allocated in podval */
    struct gs_textbuf buf;             /**< render buffer, reused by scrapes */
    struct MHD_Daemon *daemon;         /**< NULL when not serving */
    char err[160];                     /**< why the last start failed; "" none */
};

int gs_exporter_new(size_t max_bytes, struct gs_exporter **out)
{
    if (out == NULL)
        return GS_EINVAL;
    *out = NULL;
    struct gs_exporter *e = calloc(1, sizeof *e);
    if (e == NULL)
        return GS_ENOMEM;
    e->gpus = calloc(GS_GPU_MAX, sizeof *e->gpus);
    if (e->gpus == NULL || pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e->gpus);
        free(e);
        return GS_ENOMEM;
    }
    e->snap.gpus = e->gpus;
    gs_textbuf_init(&e->buf, max_bytes == 0 ? GS_EXPORTER_DEFAULT_MAX_BYTES : max_bytes);
    *out = e;
    return GS_OK;
}

int gs_exporter_update(struct gs_exporter *e, const struct gs_exporter_snapshot *s)
{
    if (e == NULL || s == NULL || s->n_gpus > GS_GPU_MAX || s->n_attr > GS_EXPORTER_ATTR_MAX ||
        s->n_podval > GS_EXPORTER_PODVAL_MAX || (s->n_gpus > 0 && s->gpus == NULL) ||
        (s->n_attr > 0 && s->attr == NULL) || (s->n_podval > 0 && s->podval == NULL))
        return GS_EINVAL;
    int rc = GS_OK;
    pthread_mutex_lock(&e->lock);
    if (s->n_podval > e->podval_cap) {
        struct gs_exporter_podval *p = realloc(e->podval, s->n_podval * sizeof *p);
        if (p == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
        e->podval = p;
        e->podval_cap = s->n_podval;
    }
    if (s->n_attr > e->attr_cap) {
        struct gs_exporter_attr *p = realloc(e->attr, s->n_attr * sizeof *p);
        if (p == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
        e->attr = p;
        e->attr_cap = s->n_attr;
    }
    memcpy(e->snap.hostname, s->hostname, sizeof e->snap.hostname);
    e->snap.hostname[sizeof e->snap.hostname - 1] = '\0';
    if (s->n_gpus > 0)
        memcpy(e->gpus, s->gpus, s->n_gpus * sizeof *e->gpus);
    if (s->n_attr > 0)
        memcpy(e->attr, s->attr, s->n_attr * sizeof *e->attr);
    for (uint32_t i = 0; i < s->n_attr; i++) {
        struct gs_exporter_attr *a = &e->attr[i];
        a->device_id[sizeof a->device_id - 1] = '\0';
        a->pod[sizeof a->pod - 1] = '\0';
        a->namespace_name[sizeof a->namespace_name - 1] = '\0';
        a->container[sizeof a->container - 1] = '\0';
    }
    if (s->n_podval > 0)
        memcpy(e->podval, s->podval, s->n_podval * sizeof *e->podval);
    for (uint32_t i = 0; i < s->n_podval; i++) {
        struct gs_exporter_podval *v = &e->podval[i];
        v->pod_uid[sizeof v->pod_uid - 1] = '\0';
        v->container_id[sizeof v->container_id - 1] = '\0';
        v->pod[sizeof v->pod - 1] = '\0';
        v->namespace_name[sizeof v->namespace_name - 1] = '\0';
        v->container[sizeof v->container - 1] = '\0';
    }
    e->snap.n_podval = s->n_podval;
    e->snap.podval = e->podval;
    e->snap.n_gpus = s->n_gpus;
    e->snap.n_attr = s->n_attr;
    e->snap.have_assign = s->have_assign;
    e->snap.assign_as_assigned = s->assign_as_assigned;
    e->snap.assign_mismatch = s->assign_mismatch;
    e->snap.assign_fallbacks = s->assign_fallbacks;
    e->snap.attr = e->attr;
out:
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int gs_exporter_scrape(struct gs_exporter *e, struct gs_textbuf *out)
{
    if (e == NULL || out == NULL)
        return GS_EINVAL;
    gs_textbuf_reset(out);
    pthread_mutex_lock(&e->lock);
    int rc = gs_exporter_render(&e->snap, out);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct gs_exporter *e = cls;
    (void)version;
    (void)upload_data;
    static const char text[] = "text/plain; charset=utf-8";
    static int seen; /* the address marks a request whose headers were already handled */
    /* Answer only once the whole request is in (the second call at the earliest): a response
     * queued before that makes libmicrohttpd close the connection after it, so keep-alive and
     * pipelined scrapes were lost (issue 9). */
    if (*req_cls == NULL) {
        *req_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* a body we do not want: drop it */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
    if (strcmp(url, "/healthz") == 0)
        return reply(c, MHD_HTTP_OK, text, "ok", 2);
    if (strcmp(url, "/metrics") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, text, "not found\n", 10);

    pthread_mutex_lock(&e->lock);
    gs_textbuf_reset(&e->buf);
    int rc = gs_exporter_render(&e->snap, &e->buf);
    enum MHD_Result res;
    if (rc == GS_OK)
        res = reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                    e->buf.data != NULL ? e->buf.data : "", e->buf.len);
    else
        res = reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, gs_strerror(rc),
                    strlen(gs_strerror(rc)));
    pthread_mutex_unlock(&e->lock);
    return res;
}

int gs_exporter_start(struct gs_exporter *e, const char *bind_addr, uint16_t port,
                      uint16_t *port_out)
{
    if (e == NULL || bind_addr == NULL || e->daemon != NULL)
        return GS_EINVAL;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    char port_text[8];
    (void)snprintf(port_text, sizeof port_text, "%u", (unsigned)port);
    if (getaddrinfo(bind_addr, port_text, &hints, &ai) != 0 || ai == NULL)
        return GS_EINVAL;
    /* The listening socket is made here, so that a taken port is told as such ("Address
     * already in use"), not as libmicrohttpd's bare failure. */
    e->err[0] = '\0';
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    int rc = GS_OK;
    if (fd < 0) {
        (void)snprintf(e->err, sizeof e->err, "socket: %s", strerror(errno));
        rc = GS_EIO;
    } else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
               bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        (void)snprintf(e->err, sizeof e->err, "bind: %s", strerror(errno));
        rc = errno == EADDRINUSE ? GS_EEXIST : GS_EIO;
    } else if (listen(fd, 64) != 0) {
        (void)snprintf(e->err, sizeof e->err, "listen: %s", strerror(errno));
        rc = GS_EIO;
    }
    bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (rc != GS_OK) {
        if (fd >= 0)
            (void)close(fd);
        return rc;
    }
    /*
     * Any pod can reach this port (issue 9: 64 idle connections took /metrics and /healthz
     * down, so the liveness probe restarted the agent). Each client address gets at most
     * EXPORTER_PER_ADDRESS connections of EXPORTER_CONNECTIONS, and an idle connection ends
     * after EXPORTER_IDLE_S; keep-alive stays on for well-behaved scrapers.
     */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (v6)
        flags |= MHD_USE_IPv6;
    e->daemon = MHD_start_daemon(flags, port, NULL, NULL, on_request, e, MHD_OPTION_LISTEN_SOCKET,
                                 fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)EXPORTER_CONNECTIONS,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)EXPORTER_PER_ADDRESS,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXPORTER_IDLE_S,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                 (size_t)EXPORTER_CONNECTION_MEMORY, MHD_OPTION_END);
    if (e->daemon == NULL) {
        (void)close(fd);
        (void)snprintf(e->err, sizeof e->err, "libmicrohttpd could not start");
        return GS_EIO;
    }
    if (port_out != NULL) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(e->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *port_out = info != NULL ? info->port : port;
    }
    return GS_OK;
}

const char *gs_exporter_error(const struct gs_exporter *e)
{
    return e != NULL ? e->err : "";
}

void gs_exporter_stop(struct gs_exporter *e)
{
    if (e == NULL || e->daemon == NULL)
        return;
    MHD_stop_daemon(e->daemon);
    e->daemon = NULL;
}

void gs_exporter_free(struct gs_exporter *e)
{
    if (e == NULL)
        return;
    gs_exporter_stop(e);
    pthread_mutex_destroy(&e->lock);
    gs_textbuf_fini(&e->buf);
    free(e->attr);
    free(e->podval);
    free(e->gpus);
    free(e);
}
