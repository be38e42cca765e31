/*
 * The client's pure timing helpers (contract in include/gpusched/kube.h): the request token
 * bucket, after client-go's flowcontrol.NewTokenBucketRateLimiter (golang.org/x/time/rate with
 * reservations: a caller that finds the bucket empty takes a token "on credit" and is told how
 * long to wait, so waiting callers are served in order), and the jittered exponential backoff
 * between reconnects, after client-go's wait.Backoff but with the jitter taken off the delay
 * so that the cap is a true maximum. Neither reads a clock nor draws randomness itself.
 */
#include "gpusched/kube.h"

#include <math.h>

void gs_kube_limiter_init(struct gs_kube_limiter *l, double qps, uint32_t burst, int64_t now_ms)
{
    l->qps = qps > 0 && isfinite(qps) ? qps : 0;
    l->burst = burst > 0 ? (double)burst : 1;
    l->tokens = l->burst;
    l->last_ms = now_ms;
}

int64_t gs_kube_limiter_reserve(struct gs_kube_limiter *l, int64_t now_ms)
{
    if (l->qps <= 0)
        return 0;
    if (now_ms > l->last_ms) {
        l->tokens += (double)(now_ms - l->last_ms) * l->qps / 1000.0;
        if (l->tokens > l->burst)
            l->tokens = l->burst;
        l->last_ms = now_ms;
    }
    l->tokens -= 1;
    if (l->tokens >= 0)
        return 0;
    /* The debt is paid back at qps tokens per second; round up so the token is really there. */
    return (int64_t)ceil(-l->tokens * 1000.0 / l->qps);
}

void gs_kube_backoff_init(struct gs_kube_backoff *b, int64_t initial_ms, int64_t max_ms,
                          double jitter)
{
    b->initial_ms = initial_ms >= 1 ? initial_ms : 1;
    b->max_ms = max_ms >= b->initial_ms ? max_ms : b->initial_ms;
    b->jitter = jitter > 0 && jitter <= 1 ? jitter : (jitter > 1 ? 1 : 0);
    b->attempt = 0;
}

int64_t gs_kube_backoff_next(struct gs_kube_backoff *b, gs_kube_rng_fn rng, void *rng_ud)
{
    int64_t base = b->initial_ms;
    for (uint32_t i = 0; i < b->attempt && base < b->max_ms; i++)
        base = base > b->max_ms / 2 ? b->max_ms : base * 2;
    if (base > b->max_ms)
        base = b->max_ms;
    if (b->attempt < UINT32_MAX)
        b->attempt++;
    if (rng == NULL || b->jitter <= 0)
        return base;
    /* A uniform fraction in [0, 1) from the top 53 bits. */
    double u = (double)(rng(rng_ud) >> 11) * (1.0 / 9007199254740992.0);
    int64_t off = (int64_t)(u * b->jitter * (double)base);
    return base - off;
}

void gs_kube_backoff_reset(struct gs_kube_backoff *b)
{
    b->attempt = 0;
}

const char *gs_kube_event_type_name(enum gs_kube_event_type t)
{
    switch (t) {
    case GS_KUBE_EVENT_ADDED:
        return "ADDED";
    case GS_KUBE_EVENT_MODIFIED:
        return "MODIFIED";
    case GS_KUBE_EVENT_DELETED:
        return "DELETED";
    case GS_KUBE_EVENT_BOOKMARK:
        return "BOOKMARK";
    case GS_KUBE_EVENT_ERROR:
        return "ERROR";
    case GS_KUBE_EVENT_RELIST:
        return "RELIST";
    case GS_KUBE_EVENT_SYNCED:
        return "SYNCED";
    }
    return "?";
}
