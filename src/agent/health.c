/*
 * Per-GPU health state machine (contract in include/gpusched/health.h).
 *
 * Each GPU holds its state, the time of its last critical error and the time of its next
 * allowed probe. The only inputs are events, ticks and the clock, so the tests replay any
 * history exactly.
 */
#include "gpusched/health.h"

#include "gpusched/err.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** One GPU's state. */
struct gpu_health {
    enum gs_health_state state;       /**< current state */
    int64_t last_error_ms;            /**< clock at the last critical event */
    int64_t next_probe_ms;            /**< earliest time of the next probe */
    struct gs_health_counters counts; /**< counters */
};

struct gs_health {
    struct gs_health_config cfg;   /**< settings */
    struct gs_clock clock;         /**< time source (now_ms only) */
    struct gs_health_callbacks cb; /**< probe and log */
    uint32_t n;                    /**< GPUs */
    struct gpu_health gpu[];       /**< n entries */
};

static const uint64_t default_ignored[] = {13, 31, 43, 45, 68, 109};

void gs_health_config_default(struct gs_health_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_ignored = sizeof default_ignored / sizeof default_ignored[0];
    memcpy(cfg->ignored_xids, default_ignored, sizeof default_ignored);
    cfg->quiet_ms = GS_HEALTH_DEFAULT_QUIET_MS;
    cfg->probe_retry_ms = GS_HEALTH_DEFAULT_PROBE_RETRY_MS;
}

int gs_health_config_set_ignored(struct gs_health_config *cfg, const char *list)
{
    if (cfg == NULL || list == NULL)
        return GS_EINVAL;
    uint64_t codes[GS_HEALTH_IGNORED_MAX];
    uint32_t n = 0;
    const char *p = list;
    while (*p == ' ')
        p++;
    if (*p == '\0')
        goto done;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p < '0' || *p > '9')
            return GS_EPARSE;
        uint64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (uint64_t)(*p - '0');
            if (v > UINT32_MAX)
                return GS_EPARSE;
            p++;
        }
        if (v == 0)
            return GS_EPARSE;
        if (n == GS_HEALTH_IGNORED_MAX)
            return GS_ELIMIT;
        codes[n++] = v;
        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            return GS_EPARSE;
    }
done:
    cfg->n_ignored = n;
    memcpy(cfg->ignored_xids, codes, n * sizeof codes[0]);
    return GS_OK;
}

bool gs_health_xid_ignored(const struct gs_health_config *cfg, uint64_t xid)
{
    for (uint32_t i = 0; i < cfg->n_ignored && i < GS_HEALTH_IGNORED_MAX; i++)
        if (cfg->ignored_xids[i] == xid)
            return true;
    return false;
}

int gs_health_new(const struct gs_health_config *cfg, uint32_t n_gpus, const struct gs_clock *clock,
                  const struct gs_health_callbacks *cb, struct gs_health **out)
{
    if (out != NULL)
        *out = NULL;
    if (cfg == NULL || clock == NULL || clock->now_ms == NULL || cb == NULL || cb->probe == NULL ||
        out == NULL || n_gpus > GS_GPU_MAX || cfg->probe_retry_ms <= 0 ||
        cfg->n_ignored > GS_HEALTH_IGNORED_MAX)
        return GS_EINVAL;
    struct gs_health *h = calloc(1, sizeof *h + (size_t)n_gpus * sizeof h->gpu[0]);
    if (h == NULL)
        return GS_ENOMEM;
    h->cfg = *cfg;
    h->clock = *clock;
    h->cb = *cb;
    h->n = n_gpus;
    for (uint32_t i = 0; i < n_gpus; i++)
        h->gpu[i].state = GS_HEALTH_HEALTHY;
    *out = h;
    return GS_OK;
}

void gs_health_free(struct gs_health *h)
{
    free(h);
}

/* Adds one XID to the per-code counts, keeping them sorted by code. */
static void count_xid(struct gs_health_counters *c, uint64_t xid)
{
    c->xid_total++;
    uint32_t lo = 0, hi = c->n_xid;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->xid[mid].xid < xid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->n_xid && c->xid[lo].xid == xid) {
        c->xid[lo].count++;
        return;
    }
    if (c->n_xid == GS_HEALTH_XID_CODES_MAX) {
        c->xid_other++;
        return;
    }
    memmove(&c->xid[lo + 1], &c->xid[lo], (c->n_xid - lo) * sizeof c->xid[0]);
    c->xid[lo].xid = xid;
    c->xid[lo].count = 1;
    c->n_xid++;
}

static void transition(struct gs_health *h, uint32_t i, enum gs_health_state to,
                       enum gs_health_reason reason, uint64_t xid, int64_t now)
{
    struct gpu_health *g = &h->gpu[i];
    enum gs_health_state from = g->state;
    g->state = to;
    if (to == GS_HEALTH_UNHEALTHY)
        g->counts.to_unhealthy++;
    else
        g->counts.recoveries++;
    if (h->cb.log == NULL)
        return;
    char text[160];
    switch (reason) {
    case GS_HEALTH_REASON_XID:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": XID %" PRIu64 ": %s -> %s", i, xid,
                       gs_health_state_name(from), gs_health_state_name(to));
        break;
    case GS_HEALTH_REASON_ECC_DBE:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": double-bit ECC error: %s -> %s", i,
                       gs_health_state_name(from), gs_health_state_name(to));
        break;
    case GS_HEALTH_REASON_RECOVERED:
    default:
        (void)snprintf(text, sizeof text,
                       "GPU %" PRIu32 ": no critical error for %" PRId64
                       " ms and the probe succeeded: %s -> %s",
                       i, now - g->last_error_ms, gs_health_state_name(from),
                       gs_health_state_name(to));
        break;
    }
    struct gs_health_transition t = {.gpu = i,
                                     .from = from,
                                     .to = to,
                                     .reason = reason,
                                     .xid = reason == GS_HEALTH_REASON_XID ? xid : 0,
                                     .t_ms = now,
                                     .text = text};
    h->cb.log(h->cb.ctx, &t);
}

static void on_gpu(struct gs_health *h, uint32_t i, const struct gs_gpu_event *ev, int64_t now)
{
    struct gpu_health *g = &h->gpu[i];
    bool critical;
    if (ev->kind == GS_GPU_EVENT_XID) {
        count_xid(&g->counts, ev->xid);
        critical = !gs_health_xid_ignored(&h->cfg, ev->xid);
    } else {
        g->counts.ecc_dbe_events++;
        critical = true;
    }
    if (!critical)
        return;
    g->last_error_ms = now;
    g->next_probe_ms = h->cfg.quiet_ms >= 0 && now <= INT64_MAX - h->cfg.quiet_ms
                           ? now + h->cfg.quiet_ms
                           : INT64_MAX;
    if (g->state == GS_HEALTH_HEALTHY)
        transition(h, i, GS_HEALTH_UNHEALTHY,
                   ev->kind == GS_GPU_EVENT_XID ? GS_HEALTH_REASON_XID : GS_HEALTH_REASON_ECC_DBE,
                   ev->xid, now);
}

int gs_health_on_event(struct gs_health *h, const struct gs_gpu_event *ev)
{
    if (h == NULL || ev == NULL ||
        (ev->kind != GS_GPU_EVENT_XID && ev->kind != GS_GPU_EVENT_ECC_DBE))
        return GS_EINVAL;
    if (ev->gpu_index != GS_GPU_INDEX_ALL && ev->gpu_index >= h->n)
        return GS_ERANGE;
    int64_t now = h->clock.now_ms(h->clock.ctx);
    for (uint32_t i = 0; i < h->n; i++)
        if (ev->gpu_index == GS_GPU_INDEX_ALL || ev->gpu_index == i)
            on_gpu(h, i, ev, now);
    return GS_OK;
}

int gs_health_tick(struct gs_health *h)
{
    if (h == NULL)
        return GS_EINVAL;
    if (h->cfg.quiet_ms < 0)
        return 0;
    int recovered = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        struct gpu_health *g = &h->gpu[i];
        int64_t now = h->clock.now_ms(h->clock.ctx);
        if (g->state != GS_HEALTH_UNHEALTHY || now < g->next_probe_ms)
            continue;
        if (h->cb.probe(h->cb.ctx, i) == GS_OK) {
            transition(h, i, GS_HEALTH_HEALTHY, GS_HEALTH_REASON_RECOVERED, 0, now);
            recovered++;
        } else {
            g->counts.probe_failures++;
            g->next_probe_ms =
                now <= INT64_MAX - h->cfg.probe_retry_ms ? now + h->cfg.probe_retry_ms : INT64_MAX;
        }
    }
    return recovered;
}

int64_t gs_health_next_due_ms(const struct gs_health *h)
{
    int64_t due = INT64_MAX;
    if (h == NULL || h->cfg.quiet_ms < 0)
        return due;
    for (uint32_t i = 0; i < h->n; i++)
        if (h->gpu[i].state == GS_HEALTH_UNHEALTHY && h->gpu[i].next_probe_ms < due)
            due = h->gpu[i].next_probe_ms;
    return due;
}

enum gs_health_state gs_health_state(const struct gs_health *h, uint32_t gpu)
{
    if (h == NULL || gpu >= h->n)
        return GS_HEALTH_UNHEALTHY;
    return h->gpu[gpu].state;
}

int gs_health_counters(const struct gs_health *h, uint32_t gpu, struct gs_health_counters *out)
{
    if (h == NULL || out == NULL)
        return GS_EINVAL;
    if (gpu >= h->n)
        return GS_ERANGE;
    *out = h->gpu[gpu].counts;
    return GS_OK;
}

const char *gs_health_state_name(enum gs_health_state s)
{
    return s == GS_HEALTH_HEALTHY ? "Healthy" : "Unhealthy";
}
