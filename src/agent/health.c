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
    enum gs_health_reason reason;     /**< why Unhealthy; 0 while Healthy */
    bool needs_reset;                 /**< Unhealthy until seen reset or cleared */
    uint64_t resets_seen;             /**< the backend's reset count last seen (it counts from 0
                                           at open, so 0 is right before any sample) */
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

/*
 * XIDs whose remedy NVIDIA's XID catalog gives as a GPU reset (or more): 48 double-bit ECC
 * (before Ampere), 62 and 119/120 internal micro-controller / GSP errors, 64 row-remapping
 * failure, 74 NVLink error, 79 fallen off the bus, 95 uncontained ECC error, 140 unrecovered
 * ECC error. Contained errors (94: the application is ended, the page offlined, the GPU keeps
 * working) are not on it. docs/agent.md has the table.
 */
static const uint64_t default_reset[] = {48, 62, 64, 74, 79, 95, 119, 120, 140};

void gs_health_config_default(struct gs_health_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_ignored = sizeof default_ignored / sizeof default_ignored[0];
    memcpy(cfg->ignored_xids, default_ignored, sizeof default_ignored);
    cfg->quiet_ms = GS_HEALTH_DEFAULT_QUIET_MS;
    cfg->probe_retry_ms = GS_HEALTH_DEFAULT_PROBE_RETRY_MS;
    cfg->n_reset = sizeof default_reset / sizeof default_reset[0];
    memcpy(cfg->reset_xids, default_reset, sizeof default_reset);
}

_Static_assert(GS_HEALTH_RESET_MAX == GS_HEALTH_IGNORED_MAX, "one list parser for both");

/* Parses "13, 31,43" into codes[GS_HEALTH_IGNORED_MAX]; *n_out entries. */
static int parse_codes(const char *list, uint64_t *codes, uint32_t *n_out)
{
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
    *n_out = n;
    return GS_OK;
}

int gs_health_config_set_ignored(struct gs_health_config *cfg, const char *list)
{
    if (cfg == NULL || list == NULL)
        return GS_EINVAL;
    uint64_t codes[GS_HEALTH_IGNORED_MAX];
    uint32_t n = 0;
    int rc = parse_codes(list, codes, &n);
    if (rc != GS_OK)
        return rc;
    cfg->n_ignored = n;
    memcpy(cfg->ignored_xids, codes, n * sizeof codes[0]);
    return GS_OK;
}

int gs_health_config_set_reset(struct gs_health_config *cfg, const char *list)
{
    if (cfg == NULL || list == NULL)
        return GS_EINVAL;
    uint64_t codes[GS_HEALTH_RESET_MAX];
    uint32_t n = 0;
    int rc = parse_codes(list, codes, &n);
    if (rc != GS_OK)
        return rc;
    cfg->n_reset = n;
    memcpy(cfg->reset_xids, codes, n * sizeof codes[0]);
    return GS_OK;
}

bool gs_health_xid_needs_reset(const struct gs_health_config *cfg, uint64_t xid)
{
    for (uint32_t i = 0; i < cfg->n_reset && i < GS_HEALTH_RESET_MAX; i++)
        if (cfg->reset_xids[i] == xid)
            return true;
    return false;
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
        cfg->n_ignored > GS_HEALTH_IGNORED_MAX || cfg->n_reset > GS_HEALTH_RESET_MAX)
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
    if (to == GS_HEALTH_UNHEALTHY) {
        g->counts.to_unhealthy++;
        g->reason = reason;
    } else {
        g->counts.recoveries++;
        g->reason = 0;
        g->needs_reset = false;
    }
    if (h->cb.log == NULL)
        return;
    char text[200];
    const char *after = g->needs_reset && to == GS_HEALTH_UNHEALTHY ? " (needs a GPU reset)" : "";
    switch (reason) {
    case GS_HEALTH_REASON_XID:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": XID %" PRIu64 ": %s -> %s%s", i, xid,
                       gs_health_state_name(from), gs_health_state_name(to), after);
        break;
    case GS_HEALTH_REASON_ECC_DBE:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": double-bit ECC error: %s -> %s", i,
                       gs_health_state_name(from), gs_health_state_name(to));
        break;
    case GS_HEALTH_REASON_LOST:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": lost (does not answer): %s -> %s%s", i,
                       gs_health_state_name(from), gs_health_state_name(to), after);
        break;
    case GS_HEALTH_REASON_RESET:
        (void)snprintf(text, sizeof text,
                       "GPU %" PRIu32 ": seen reset (lost and found again) and answering: %s -> %s",
                       i, gs_health_state_name(from), gs_health_state_name(to));
        break;
    case GS_HEALTH_REASON_CLEARED:
        (void)snprintf(text, sizeof text, "GPU %" PRIu32 ": cleared by an operator: %s -> %s", i,
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
                                     .needs_reset = to == GS_HEALTH_UNHEALTHY && g->needs_reset,
                                     .t_ms = now,
                                     .text = text};
    h->cb.log(h->cb.ctx, &t);
}

/* Marks the GPU as needing a reset: a later rise of the backend's reset count recovers it. */
static void need_reset(struct gpu_health *g)
{
    g->needs_reset = true;
}

/* A critical error at `now`: Unhealthy (once), quiet period restarted. */
static void critical(struct gs_health *h, uint32_t i, enum gs_health_reason reason, uint64_t xid,
                     bool reset, int64_t now)
{
    struct gpu_health *g = &h->gpu[i];
    g->last_error_ms = now;
    g->next_probe_ms = h->cfg.quiet_ms >= 0 && now <= INT64_MAX - h->cfg.quiet_ms
                           ? now + h->cfg.quiet_ms
                           : INT64_MAX;
    if (reset)
        need_reset(g);
    if (g->state == GS_HEALTH_HEALTHY)
        transition(h, i, GS_HEALTH_UNHEALTHY, reason, xid, now);
}

static void on_gpu(struct gs_health *h, uint32_t i, const struct gs_gpu_event *ev, int64_t now)
{
    struct gpu_health *g = &h->gpu[i];
    switch (ev->kind) {
    case GS_GPU_EVENT_XID:
        count_xid(&g->counts, ev->xid);
        if (!gs_health_xid_ignored(&h->cfg, ev->xid))
            critical(h, i, GS_HEALTH_REASON_XID, ev->xid,
                     gs_health_xid_needs_reset(&h->cfg, ev->xid), now);
        break;
    case GS_GPU_EVENT_ECC_DBE:
        g->counts.ecc_dbe_events++;
        critical(h, i, GS_HEALTH_REASON_ECC_DBE, 0, false, now);
        break;
    case GS_GPU_EVENT_LOST:
    default:
        critical(h, i, GS_HEALTH_REASON_LOST, 0, true, now);
        break;
    }
}

int gs_health_on_event(struct gs_health *h, const struct gs_gpu_event *ev)
{
    if (h == NULL || ev == NULL ||
        (ev->kind != GS_GPU_EVENT_XID && ev->kind != GS_GPU_EVENT_ECC_DBE &&
         ev->kind != GS_GPU_EVENT_LOST))
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
        uint64_t resets = UINT64_MAX; /* stays so when the probe does not know */
        int rc = h->cb.probe(h->cb.ctx, i, &resets);
        if (rc == GS_OK && !g->needs_reset) {
            transition(h, i, GS_HEALTH_HEALTHY, GS_HEALTH_REASON_RECOVERED, 0, now);
            recovered++;
            continue;
        }
        if (rc == GS_OK && resets != UINT64_MAX && resets > g->resets_seen) {
            g->resets_seen = resets;
            transition(h, i, GS_HEALTH_HEALTHY, GS_HEALTH_REASON_RESET, 0, now);
            recovered++;
            continue;
        }
        if (rc != GS_OK) {
            g->counts.probe_failures++;
            need_reset(g); /* it stopped answering: a quiet period will not bring it back */
        }
        g->next_probe_ms =
            now <= INT64_MAX - h->cfg.probe_retry_ms ? now + h->cfg.probe_retry_ms : INT64_MAX;
    }
    return recovered;
}

int gs_health_on_sample(struct gs_health *h, uint32_t gpu, int rc, uint64_t resets)
{
    if (h == NULL)
        return GS_EINVAL;
    if (gpu >= h->n)
        return GS_ERANGE;
    struct gpu_health *g = &h->gpu[gpu];
    int64_t now = h->clock.now_ms(h->clock.ctx);
    if (rc != GS_OK) {
        g->counts.failed_samples++;
        critical(h, gpu, GS_HEALTH_REASON_LOST, 0, true, now);
        return GS_OK;
    }
    if (resets > g->resets_seen) {
        g->resets_seen = resets;
        if (g->state == GS_HEALTH_UNHEALTHY && g->needs_reset)
            transition(h, gpu, GS_HEALTH_HEALTHY, GS_HEALTH_REASON_RESET, 0, now);
    }
    return GS_OK;
}

int gs_health_clear(struct gs_health *h, uint32_t gpu)
{
    if (h == NULL)
        return GS_EINVAL;
    if (gpu >= h->n)
        return GS_ERANGE;
    if (h->gpu[gpu].state == GS_HEALTH_HEALTHY)
        return 0;
    transition(h, gpu, GS_HEALTH_HEALTHY, GS_HEALTH_REASON_CLEARED, 0,
               h->clock.now_ms(h->clock.ctx));
    return 1;
}

enum gs_health_reason gs_health_reason_of(const struct gs_health *h, uint32_t gpu)
{
    if (h == NULL || gpu >= h->n || h->gpu[gpu].state == GS_HEALTH_HEALTHY)
        return 0;
    return h->gpu[gpu].reason;
}

bool gs_health_needs_reset(const struct gs_health *h, uint32_t gpu)
{
    return h != NULL && gpu < h->n && h->gpu[gpu].state == GS_HEALTH_UNHEALTHY &&
           h->gpu[gpu].needs_reset;
}

const char *gs_health_reason_name(enum gs_health_reason r)
{
    switch (r) {
    case GS_HEALTH_REASON_XID:
        return "xid";
    case GS_HEALTH_REASON_ECC_DBE:
        return "ecc_dbe";
    case GS_HEALTH_REASON_RECOVERED:
        return "recovered";
    case GS_HEALTH_REASON_LOST:
        return "lost";
    case GS_HEALTH_REASON_RESET:
        return "reset";
    case GS_HEALTH_REASON_CLEARED:
        return "cleared";
    default:
        return "none";
    }
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
