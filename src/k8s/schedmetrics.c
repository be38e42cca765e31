/*
 * The scheduler's /healthz, /readyz and /metrics (contract in include/gpusched/schedmetrics.h).
 * Counters live under one mutex; libmicrohttpd's internal polling thread renders a scrape into
 * a buffer on its stack under that mutex and hands libmicrohttpd a copy. The set of series is
 * fixed, so the text is bounded (RENDER_MAX).
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */

#include "gpusched/schedmetrics.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "hostport.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RENDER_MAX 8192

static const char *const evict_reasons[] = {"preemption", "reclaim", "gang", "node-lost", "other"};
#define N_EVICT (sizeof(evict_reasons) / sizeof(evict_reasons[0]))

/* Upper bounds of the cycle-duration histogram, seconds; +Inf is implied. */
static const double cycle_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define N_LE (sizeof(cycle_le) / sizeof(cycle_le[0]))

struct gs_schedmetrics {
    pthread_mutex_t lock;            /**< guards everything below but daemon */
    uint64_t attempts[3];            /**< by enum gs_sched_result */
    uint64_t binds;                  /**< Bindings accepted */
    uint64_t bind_failures;          /**< Bindings refused or failed */
    uint64_t evictions[N_EVICT];     /**< by evict_reasons */
    uint64_t cycle_bucket[N_LE + 1]; /**< cycles per bucket (not cumulative); last is +Inf */
    uint64_t cycles;                 /**< cycles recorded */
    double cycle_sum_s;              /**< their total duration */
    uint32_t pending;                /**< pods pending after the last cycle */
    uint64_t relists;                /**< watch relists after the first list (410 Gone...) */
    bool leader;                     /**< gpusched_leader */
    bool ready;                      /**< /readyz answers 200 */
    struct MHD_Daemon *daemon;       /**< NULL when not serving; owner's thread only */
};

int gs_schedmetrics_new(struct gs_schedmetrics **out)
{
    if (!out)
        return GS_EINVAL;
    *out = NULL;
    struct gs_schedmetrics *m = calloc(1, sizeof(*m));
    if (!m)
        return GS_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return GS_ENOMEM;
    }
    *out = m;
    return GS_OK;
}

void gs_schedmetrics_free(struct gs_schedmetrics *m)
{
    if (!m)
        return;
    if (m->daemon)
        MHD_stop_daemon(m->daemon); /* joins its thread: no scrape runs after this */
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void gs_schedmetrics_attempt(struct gs_schedmetrics *m, enum gs_sched_result r)
{
    if (!m || (unsigned)r > GS_SCHED_ERROR)
        return;
    pthread_mutex_lock(&m->lock);
    m->attempts[r]++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_bind(struct gs_schedmetrics *m, bool ok)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (ok)
        m->binds++;
    else
        m->bind_failures++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_eviction(struct gs_schedmetrics *m, const char *reason)
{
    if (!m)
        return;
    size_t i = 0;
    while (i < N_EVICT - 1 && (!reason || strcmp(reason, evict_reasons[i]) != 0))
        i++;
    pthread_mutex_lock(&m->lock);
    m->evictions[i]++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_cycle(struct gs_schedmetrics *m, double seconds, uint32_t pending)
{
    if (!m)
        return;
    size_t b = 0;
    while (b < N_LE && seconds > cycle_le[b])
        b++;
    pthread_mutex_lock(&m->lock);
    m->cycle_bucket[b]++;
    m->cycles++;
    m->cycle_sum_s += seconds;
    m->pending = pending;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_relist(struct gs_schedmetrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->relists++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_set_leader(struct gs_schedmetrics *m, bool leader)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->leader = leader;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_set_ready(struct gs_schedmetrics *m, bool ready)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->ready = ready;
    pthread_mutex_unlock(&m->lock);
}

static bool is_ready(struct gs_schedmetrics *m)
{
    pthread_mutex_lock(&m->lock);
    bool r = m->ready;
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* Appends to a bounded buffer, counting what would have been written past its end. */
struct out {
    char *buf;
    size_t cap;
    size_t len;
};

static void put(struct out *o, const char *fmt, ...) GS_PRINTF(2, 3);

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

size_t gs_schedmetrics_render(struct gs_schedmetrics *m, char *buf, size_t cap)
{
    struct out o = {.buf = buf, .cap = buf ? cap : 0, .len = 0};
    if (buf && cap)
        buf[0] = '\0';
    if (!m)
        return 0;
    static const char *const results[] = {"scheduled", "unschedulable", "error"};
    pthread_mutex_lock(&m->lock);
    put(&o, "# HELP gpusched_scheduling_attempts_total Pods tried, by result.\n"
            "# TYPE gpusched_scheduling_attempts_total counter\n");
    for (size_t i = 0; i < 3; i++)
        put(&o, "gpusched_scheduling_attempts_total{result=\"%s\"} %llu\n", results[i],
            (unsigned long long)m->attempts[i]);
    put(&o,
        "# HELP gpusched_binds_total Bindings the API server accepted.\n"
        "# TYPE gpusched_binds_total counter\n"
        "gpusched_binds_total %llu\n"
        "# HELP gpusched_bind_failures_total Bindings refused or failed.\n"
        "# TYPE gpusched_bind_failures_total counter\n"
        "gpusched_bind_failures_total %llu\n"
        "# HELP gpusched_watch_relists_total Lists after the first of a watched collection "
        "(its watch history was gone: 410).\n"
        "# TYPE gpusched_watch_relists_total counter\n"
        "gpusched_watch_relists_total %llu\n"
        "# HELP gpusched_evictions_total Evictions sent, by reason.\n"
        "# TYPE gpusched_evictions_total counter\n",
        (unsigned long long)m->binds, (unsigned long long)m->bind_failures,
        (unsigned long long)m->relists);
    for (size_t i = 0; i < N_EVICT; i++)
        put(&o, "gpusched_evictions_total{reason=\"%s\"} %llu\n", evict_reasons[i],
            (unsigned long long)m->evictions[i]);
    put(&o, "# HELP gpusched_cycle_duration_seconds Duration of a scheduling cycle.\n"
            "# TYPE gpusched_cycle_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b < N_LE; b++) {
        cum += m->cycle_bucket[b];
        put(&o, "gpusched_cycle_duration_seconds_bucket{le=\"%g\"} %llu\n", cycle_le[b],
            (unsigned long long)cum);
    }
    cum += m->cycle_bucket[N_LE];
    put(&o,
        "gpusched_cycle_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
        "gpusched_cycle_duration_seconds_sum %.9g\n"
        "gpusched_cycle_duration_seconds_count %llu\n"
        "# HELP gpusched_pending_pods Pods of ours waiting after the last cycle.\n"
        "# TYPE gpusched_pending_pods gauge\n"
        "gpusched_pending_pods %u\n"
        "# HELP gpusched_leader 1 while this replica holds the Lease (or runs without election).\n"
        "# TYPE gpusched_leader gauge\n"
        "gpusched_leader %d\n",
        (unsigned long long)cum, m->cycle_sum_s, (unsigned long long)m->cycles, m->pending,
        m->leader ? 1 : 0);
    pthread_mutex_unlock(&m->lock);
    return o.len;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct gs_schedmetrics *m = cls;
    (void)version;
    (void)upload_data;
    (void)req_cls;
    static const char text[] = "text/plain; charset=utf-8";
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* a body we do not want: drop it */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0)
        return reply(c, MHD_HTTP_OK, text, "ok", 2);
    if (strcmp(url, "/readyz") == 0)
        return is_ready(m)
                   ? reply(c, MHD_HTTP_OK, text, "ok", 2)
                   : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, text, "caches not synced\n", 18);
    if (strcmp(url, "/metrics") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, text, "not found\n", 10);
    char buf[RENDER_MAX];
    size_t n = gs_schedmetrics_render(m, buf, sizeof(buf));
    if (n >= sizeof(buf))
        n = sizeof(buf) - 1; /* the series are fixed and fit; keep what fits if not */
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, n);
}

int gs_schedmetrics_serve(struct gs_schedmetrics *m, const char *addr, uint16_t *port_out)
{
    if (!m || !addr || m->daemon)
        return GS_EINVAL;
    struct addrinfo *ai = NULL;
    if (gs__hostport_resolve(addr, &ai) != GS_OK)
        return GS_EINVAL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (m->daemon == NULL)
        return GS_EIO;
    if (port_out) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *port_out = info ? info->port : 0;
    }
    return GS_OK;
}
