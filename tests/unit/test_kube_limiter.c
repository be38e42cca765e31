/*
 * Tests of the Kubernetes client's timing and error mapping (include/gpusched/kube.h): the
 * token bucket against a fake clock (burst, then one token per 1/qps, refill capped at the
 * burst, a clock going backwards), the jittered exponential backoff's bounds over many draws,
 * the HTTP status to error-code map, and the client itself driven by a fake clock against a
 * port where nothing listens: requests are throttled by sleeping on the injected clock, fail
 * with GS_EIO and a message, a failing informer retries after exactly its backoff delays, a
 * failing watch keeps its resourceVersion, and a token file is re-read when its period is over.
 * No server is involved: the real-apiserver tests are in tests/k8s.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"
#include "gpusched/rng.h"
#include "k8s/kube_int.h" /* gs__kube_read_status */

/* ---- limiter ------------------------------------------------------------------------------ */

static void limiter_gives_the_burst_then_one_token_per_period(void **state)
{
    (void)state;
    struct gs_kube_limiter l;
    gs_kube_limiter_init(&l, 10.0, 3, 1000); /* 10 qps: one token per 100 ms */
    assert_int_equal(gs_kube_limiter_reserve(&l, 1000), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 1000), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 1000), 0);
    /* Empty: reservations queue up, 100 ms apart. */
    assert_int_equal(gs_kube_limiter_reserve(&l, 1000), 100);
    assert_int_equal(gs_kube_limiter_reserve(&l, 1000), 200);
    /* 250 ms later: 2.5 tokens came, 2 were owed, so 0.5 is there: the next waits 50 ms. */
    assert_int_equal(gs_kube_limiter_reserve(&l, 1250), 50);
    /* A long pause refills only up to the burst. */
    assert_int_equal(gs_kube_limiter_reserve(&l, 100000), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 100000), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 100000), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 100000), 100);
    /* A clock going backwards refills nothing. */
    assert_int_equal(gs_kube_limiter_reserve(&l, 50000), 200);
}

static void limiter_off_and_odd_settings(void **state)
{
    (void)state;
    struct gs_kube_limiter l;
    gs_kube_limiter_init(&l, 0, 1, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gs_kube_limiter_reserve(&l, 0), 0);
    gs_kube_limiter_init(&l, -5, 0, 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 0), 0);
    /* burst 0 is taken as 1; 3 qps rounds the wait up (333.3 -> 334 ms). */
    gs_kube_limiter_init(&l, 3.0, 0, 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 0), 0);
    assert_int_equal(gs_kube_limiter_reserve(&l, 0), 334);
}

/* ---- backoff ------------------------------------------------------------------------------ */

static uint64_t rng_zero(void *ud)
{
    (void)ud;
    return 0;
}

static uint64_t rng_max(void *ud)
{
    (void)ud;
    return UINT64_MAX;
}

static uint64_t rng_xoshiro(void *ud)
{
    return gs_rng_next(ud);
}

static void backoff_doubles_up_to_the_cap(void **state)
{
    (void)state;
    struct gs_kube_backoff b;
    gs_kube_backoff_init(&b, 100, 1000, 0.5);
    /* rng 0 takes nothing off: the plain sequence. */
    static const int64_t want[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(gs_kube_backoff_next(&b, rng_zero, NULL), want[i]);
    gs_kube_backoff_reset(&b);
    assert_int_equal(gs_kube_backoff_next(&b, NULL, NULL), 100);
    /* The largest draw takes almost half off: 200 * (1 - 0.5 * (1 - 2^-53)) rounds to 100+. */
    int64_t d = gs_kube_backoff_next(&b, rng_max, NULL);
    assert_true(d > 100 && d <= 101);
    /* Many attempts do not overflow. */
    b.attempt = UINT32_MAX - 1;
    assert_int_equal(gs_kube_backoff_next(&b, rng_zero, NULL), 1000);
    assert_int_equal(gs_kube_backoff_next(&b, rng_zero, NULL), 1000);
    assert_int_equal(b.attempt, UINT32_MAX);
}

static void backoff_jitter_stays_in_bounds(void **state)
{
    (void)state;
    struct gs_rng rng;
    gs_rng_seed(&rng, 42);
    struct gs_kube_backoff b;
    gs_kube_backoff_init(&b, 800, 30000, 0.25);
    int64_t lo_seen = INT64_MAX, hi_seen = 0;
    for (int round = 0; round < 200; round++) {
        gs_kube_backoff_reset(&b);
        int64_t base = 800;
        for (int k = 0; k < 10; k++) {
            int64_t d = gs_kube_backoff_next(&b, rng_xoshiro, &rng);
            /* [base * 0.75, base], never above the cap. */
            assert_true(d >= base - base / 4);
            assert_true(d <= base);
            assert_true(d <= 30000);
            if (base == 30000) {
                if (d < lo_seen)
                    lo_seen = d;
                if (d > hi_seen)
                    hi_seen = d;
            }
            base = base * 2 > 30000 ? 30000 : base * 2;
        }
    }
    /* The jitter is really spread over the range at the cap (22500..30000). */
    assert_true(lo_seen < 23500);
    assert_true(hi_seen > 29000);
    /* Clamping of bad settings. */
    gs_kube_backoff_init(&b, 0, -1, 7.0);
    assert_int_equal(b.initial_ms, 1);
    assert_int_equal(b.max_ms, 1);
    assert_true(b.jitter == 1.0);
}

/* ---- status mapping ----------------------------------------------------------------------- */

static void http_status_maps_to_error_codes(void **state)
{
    (void)state;
    assert_int_equal(gs_kube_status_to_err(200, NULL), GS_OK);
    assert_int_equal(gs_kube_status_to_err(201, "x"), GS_OK);
    assert_int_equal(gs_kube_status_to_err(0, NULL), GS_EIO);
    assert_int_equal(gs_kube_status_to_err(400, "BadRequest"), GS_EINVAL);
    assert_int_equal(gs_kube_status_to_err(401, "Unauthorized"), GS_EAUTH);
    assert_int_equal(gs_kube_status_to_err(403, "Forbidden"), GS_EAUTH);
    assert_int_equal(gs_kube_status_to_err(404, "NotFound"), GS_ENOENT);
    assert_int_equal(gs_kube_status_to_err(409, "AlreadyExists"), GS_EEXIST);
    assert_int_equal(gs_kube_status_to_err(409, "Conflict"), GS_ECONFLICT);
    assert_int_equal(gs_kube_status_to_err(409, NULL), GS_ECONFLICT);
    assert_int_equal(gs_kube_status_to_err(410, "Expired"), GS_EGONE);
    assert_int_equal(gs_kube_status_to_err(410, "Gone"), GS_EGONE);
    assert_int_equal(gs_kube_status_to_err(422, "Invalid"), GS_EREJECTED);
    assert_int_equal(gs_kube_status_to_err(429, "TooManyRequests"), GS_ETHROTTLED);
    assert_int_equal(gs_kube_status_to_err(500, "InternalError"), GS_EHTTP);
    assert_int_equal(gs_kube_status_to_err(504, "Timeout"), GS_ETIMEDOUT);
    assert_string_equal(gs_errname(GS_EGONE), "GS_EGONE");
    assert_string_equal(gs_strerror(GS_ETHROTTLED), "too many requests; retry later");
}

/* ---- the client on a fake clock ----------------------------------------------------------- */

struct fake_clock {
    int64_t now_ms;
    int64_t slept[64];
    int n;
};

static int64_t fake_now(void *ud)
{
    return ((struct fake_clock *)ud)->now_ms;
}

static void fake_sleep(void *ud, int64_t ms)
{
    struct fake_clock *f = ud;
    if (f->n < 64)
        f->slept[f->n++] = ms;
    f->now_ms += ms;
}

/* A server URL where nothing listens: port 1 on loopback refuses at once. */
static struct gs_kube_client *refusing_client(struct fake_clock *fc, double qps, uint32_t burst)
{
    struct gs_kube_config cfg = {.server = "http://127.0.0.1:1/"};
    struct gs_kube_clock clk = {.now_ms = fake_now, .sleep_ms = fake_sleep, .ud = fc};
    struct gs_kube_client_opts o = {
        .qps = qps, .burst = burst, .clock = &clk, .connect_timeout_ms = 2000, .timeout_ms = 3000};
    struct gs_kube_client *c = NULL;
    assert_int_equal(gs_kube_client_new(&cfg, &o, &c), GS_OK);
    return c;
}

static void requests_are_throttled_on_the_injected_clock(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 5000};
    struct gs_kube_client *c = refusing_client(&fc, 2.0, 1);
    struct gs_kube_response r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gs_kube_request(c, GS_KUBE_GET, "/api/v1/nodes", NULL, &r), GS_EIO);
        assert_int_equal(r.http_status, 0);
        assert_non_null(strstr(r.message, "127.0.0.1"));
        gs_kube_response_fini(&r);
    }
    /* One token at once, then one per 500 ms (the fake clock moves only by sleeping). */
    assert_int_equal(fc.n, 2);
    assert_int_equal(fc.slept[0], 500);
    assert_int_equal(fc.slept[1], 500);
    json_t *body = json_pack("{s:s}", "a", "b");
    assert_int_equal(gs_kube_request(c, GS_KUBE_PATCH_MERGE, "/api/v1/nodes/n", body, &r), GS_EIO);
    gs_kube_response_fini(&r);
    json_decref(body);
    assert_int_equal(gs_kube_request(c, GS_KUBE_GET, "api/v1/nodes", NULL, &r), GS_EINVAL);
    assert_int_equal(gs_kube_request(c, (enum gs_kube_method)99, "/x", NULL, &r), GS_EINVAL);
    struct gs_kube_list l;
    assert_int_equal(gs_kube_list(c, "/api/v1/nodes", NULL, 10, &l, &r), GS_EIO);
    assert_null(l.items);
    assert_non_null(strstr(r.message, "127.0.0.1"));
    gs_kube_response_fini(&r);
    assert_int_equal(gs_kube_list(c, "/api/v1/nodes?limit=1", NULL, 10, &l, NULL), GS_EINVAL);
    gs_kube_client_free(c);

    struct gs_kube_config none = {0};
    assert_int_equal(gs_kube_client_new(&none, NULL, &c), GS_EINVAL);
    assert_null(c);
    gs_kube_client_free(NULL);
}

/* What async callbacks saw. */
struct done_log {
    int calls;
    int err[8];
    long status[8];
    bool named_host[8];       /* the transport error's text names the server */
    struct gs_kube_client *c; /* set: the first callback starts one more request */
};

static void on_done(void *ud, int err, struct gs_kube_response *r)
{
    struct done_log *d = ud;
    if (d->calls < 8) {
        d->err[d->calls] = err;
        d->status[d->calls] = r->http_status;
        d->named_host[d->calls] = strstr(r->message, "127.0.0.1") != NULL;
    }
    d->calls++;
    if (d->c && d->calls == 1)
        assert_int_equal(gs_kube_request_async(d->c, GS_KUBE_GET, "/again", NULL, on_done, d),
                         GS_OK);
}

static void async_requests_call_back_once_each_from_the_step(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_client *c = refusing_client(&fc, -1, 0);
    struct done_log d = {.c = c};
    json_t *body = json_pack("{s:s}", "kind", "Binding");
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_POST, "/api/v1/namespaces/d/pods/p/binding",
                                           body, on_done, &d),
                     GS_OK);
    json_decref(body); /* serialised at the call */
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/x", NULL, on_done, &d), GS_OK);
    assert_int_equal(gs_kube_client_in_flight(c), 2);
    assert_int_equal(d.calls, 0); /* nothing is called before a step */
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "x", NULL, on_done, &d), GS_EINVAL);
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/x", NULL, NULL, &d), GS_EINVAL);
    assert_int_equal(gs_kube_request_async(NULL, GS_KUBE_GET, "/x", NULL, on_done, &d), GS_EINVAL);
    assert_int_equal(gs_kube_client_in_flight(c), 2);
    /* Refused connections end at once; the first callback adds a third request. */
    for (int i = 0; i < 100 && (gs_kube_client_in_flight(c) > 0 || d.calls < 3); i++)
        assert_int_equal(gs_kube_client_step(c, 50), GS_OK);
    assert_int_equal(d.calls, 3);
    assert_int_equal(gs_kube_client_in_flight(c), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(d.err[i], GS_EIO);
        assert_int_equal(d.status[i], 0);
        assert_true(d.named_host[i]);
    }
    /* One left in flight when the client goes is dropped without a call (and without a leak). */
    d.c = NULL;
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/late", NULL, on_done, &d), GS_OK);
    gs_kube_client_free(c);
    assert_int_equal(d.calls, 3);
}

/* 200 async requests, more than the 64 that run at once: the rest wait and start as others
 * end; every one is called back exactly once, and queued ones left at free are dropped. */
static void async_requests_beyond_the_slots_wait_their_turn(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_client *c = refusing_client(&fc, -1, 0);
    struct done_log d = {0};
    for (int i = 0; i < 200; i++)
        assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/x", NULL, on_done, &d), GS_OK);
    assert_int_equal(gs_kube_client_in_flight(c), 200);
    for (int i = 0; i < 1000 && gs_kube_client_in_flight(c) > 0; i++)
        assert_int_equal(gs_kube_client_step(c, 50), GS_OK);
    assert_int_equal(d.calls, 200);
    assert_int_equal(gs_kube_client_in_flight(c), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(d.err[i], GS_EIO);
    /* Queued when the client goes: dropped without a call and without a leak. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/late", NULL, on_done, &d), GS_OK);
    gs_kube_client_free(c);
    assert_int_equal(d.calls, 200);
}

/* The order in which async requests were called back: 'f' foreground, 'b' background. */
struct lane_log {
    char seq[512];
    int n;
};

struct lane {
    struct lane_log *log;
    char tag;
};

static void on_lane_done(void *ud, int err, struct gs_kube_response *r)
{
    (void)err;
    (void)r;
    struct lane *l = ud;
    if (l->log->n < (int)sizeof(l->log->seq) - 1)
        l->log->seq[l->log->n++] = l->tag;
}

/* Events go behind Bindings: 1 foreground request, 10 background, 100 foreground, 10 background.
 * Eight background ones start (their cap while a foreground one runs), then 55 foreground fill
 * the 64 slots; the 45 foreground left wait, and every waiting background request starts only
 * after they all started, that is after 45 completions. All 121 are called back, none dropped. */
static void background_requests_wait_behind_foreground_ones(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_client *c = refusing_client(&fc, -1, 0);
    struct lane_log log = {.n = 0};
    struct lane fg = {&log, 'f'}, bg = {&log, 'b'};
    /* One foreground request first: with none running, background ones may take every slot. */
    assert_int_equal(gs_kube_request_async(c, GS_KUBE_POST, "/b", NULL, on_lane_done, &fg), GS_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(
            gs_kube_request_async_background(c, GS_KUBE_POST, "/e", NULL, on_lane_done, &bg),
            GS_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(gs_kube_request_async(c, GS_KUBE_POST, "/b", NULL, on_lane_done, &fg),
                         GS_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(
            gs_kube_request_async_background(c, GS_KUBE_POST, "/e", NULL, on_lane_done, &bg),
            GS_OK);
    assert_int_equal(gs_kube_client_in_flight(c), 121);
    assert_int_equal(gs_kube_request_async_background(c, GS_KUBE_GET, "x", NULL, on_lane_done, &bg),
                     GS_EINVAL);
    for (int i = 0; i < 1000 && gs_kube_client_in_flight(c) > 0; i++)
        assert_int_equal(gs_kube_client_step(c, 50), GS_OK);
    assert_int_equal(log.n, 121);
    int nb = 0, nf = 0;
    for (int k = 0; k < log.n; k++) {
        if (log.seq[k] == 'f') {
            nf++;
            continue;
        }
        if (++nb > 8) /* one that waited */
            assert_true(k >= 45);
    }
    assert_int_equal(nb, 20);
    assert_int_equal(nf, 101);
    /* Foreground requests sent after waiting background ones still go first: 100, then 10
     * background, then 100 more; the background ones start once all 200 have, after 136
     * completions (200 - 64). */
    log.n = 0;
    for (int i = 0; i < 210; i++) {
        struct lane *l = i >= 100 && i < 110 ? &bg : &fg;
        int rc = l == &bg ? gs_kube_request_async_background(c, GS_KUBE_POST, "/e", NULL,
                                                             on_lane_done, l)
                          : gs_kube_request_async(c, GS_KUBE_POST, "/b", NULL, on_lane_done, l);
        assert_int_equal(rc, GS_OK);
    }
    for (int i = 0; i < 1000 && gs_kube_client_in_flight(c) > 0; i++)
        assert_int_equal(gs_kube_client_step(c, 50), GS_OK);
    assert_int_equal(log.n, 210);
    for (int k = 0; k < 136; k++)
        assert_int_equal(log.seq[k], 'f');
    /* Background requests queued when the client goes are dropped without a call or a leak. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(gs_kube_request_async(c, GS_KUBE_GET, "/late", NULL, on_lane_done, &fg),
                         GS_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(
            gs_kube_request_async_background(c, GS_KUBE_GET, "/late", NULL, on_lane_done, &bg),
            GS_OK);
    gs_kube_client_free(c);
    assert_int_equal(log.n, 210);
}

struct calls {
    int relist, synced, other;
};

static void count_cb(void *ud, enum gs_kube_event_type t, json_t *obj)
{
    struct calls *k = ud;
    (void)obj;
    if (t == GS_KUBE_EVENT_RELIST)
        k->relist++;
    else if (t == GS_KUBE_EVENT_SYNCED)
        k->synced++;
    else
        k->other++;
}

static void failing_informer_retries_after_its_backoff(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_client *c = refusing_client(&fc, -1, 0);
    struct calls k = {0};
    struct gs_kube_informer_opts o = {
        .path = "/api/v1/pods", .backoff_initial_ms = 100, .backoff_max_ms = 400, .rng = rng_zero};
    struct gs_kube_informer *inf = NULL;
    assert_int_equal(gs_kube_informer_new(c, &o, count_cb, &k, &inf), GS_OK);
    assert_false(gs_kube_informer_synced(inf));
    assert_null(gs_kube_informer_resource_version(inf));
    /* Each step: the list fails at once, then the step sleeps until the next attempt. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(gs_kube_client_step(c, 10000), GS_OK);
    static const int64_t want[] = {100, 200, 400, 400, 400};
    assert_int_equal(fc.n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(fc.slept[i], want[i]);
    struct gs_kube_informer_stats st;
    gs_kube_informer_get_stats(inf, &st);
    assert_int_equal(st.failures, 5);
    assert_int_equal(st.lists, 0);
    assert_int_equal(k.relist + k.synced + k.other, 0);
    assert_non_null(strstr(gs_kube_informer_last_error(inf), "list /api/v1/pods: "));
    /* A short step timeout caps the sleep. */
    fc.n = 0;
    assert_int_equal(gs_kube_client_step(c, 30), GS_OK);
    assert_int_equal(fc.n, 1);
    assert_int_equal(fc.slept[0], 30);

    assert_int_equal(gs_kube_informer_new(c, &o, NULL, NULL, NULL), GS_EINVAL);
    o.path = "api/v1/pods";
    assert_int_equal(gs_kube_informer_new(c, &o, count_cb, &k, NULL), GS_EINVAL);
    /* The client frees its informers. */
    o.path = "/api/v1/nodes";
    assert_int_equal(gs_kube_informer_new(c, &o, count_cb, &k, NULL), GS_OK);
    gs_kube_client_free(c);
}

static void watch_failure_keeps_the_rv_and_backs_off(void **state)
{
    (void)state;
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_client *c = refusing_client(&fc, -1, 0);
    struct calls k = {0};
    struct gs_kube_informer_opts o = {.path = "/api/v1/pods",
                                      .query = "fieldSelector=spec.nodeName%3D",
                                      .resource_version = "4711",
                                      .backoff_initial_ms = 100,
                                      .rng = rng_zero};
    struct gs_kube_informer *inf = NULL;
    assert_int_equal(gs_kube_informer_new(c, &o, count_cb, &k, &inf), GS_OK);
    /* Started from an RV: synced at once, and the first attempt is a watch, not a list. */
    assert_true(gs_kube_informer_synced(inf));
    struct gs_kube_informer_stats st = {0};
    for (int i = 0; i < 50 && st.failures == 0; i++) {
        assert_int_equal(gs_kube_client_step(c, 100), GS_OK);
        gs_kube_informer_get_stats(inf, &st);
    }
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.watches, 1);
    assert_int_equal(st.lists, 0);
    assert_string_equal(gs_kube_informer_resource_version(inf), "4711");
    assert_non_null(strstr(gs_kube_informer_last_error(inf), "watch /api/v1/pods: "));
    assert_int_equal(k.relist + k.synced + k.other, 0);
    gs_kube_client_free(c);
}

static void status_bodies_fill_reason_message_and_retry(void **state)
{
    (void)state;
    struct gs_kube_response r = {.retry_after_s = -1};
    r.body = json_loads("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                        "\"message\":\"slow down\",\"reason\":\"TooManyRequests\","
                        "\"details\":{\"retryAfterSeconds\":7},\"code\":429}",
                        0, NULL);
    assert_non_null(r.body);
    gs__kube_read_status(&r);
    assert_string_equal(r.reason, "TooManyRequests");
    assert_string_equal(r.message, "slow down");
    assert_int_equal(r.retry_after_s, 7);
    gs_kube_response_fini(&r);
    assert_int_equal(r.retry_after_s, -1);
    assert_null(r.body);
    /* Not a Status: nothing is taken from it. */
    r.body = json_loads("{\"kind\":\"Pod\",\"reason\":\"x\"}", 0, NULL);
    gs__kube_read_status(&r);
    assert_string_equal(r.reason, "");
    gs_kube_response_fini(&r);
    gs_kube_response_fini(NULL);
}

static const char *bearer_of(struct curl_slist *l)
{
    for (; l != NULL; l = l->next)
        if (strncmp(l->data, "Authorization: Bearer ", 22) == 0)
            return l->data + 22;
    return "";
}

static void write_token(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void token_file_is_reread_when_its_period_is_over(void **state)
{
    (void)state;
    char path[] = "/tmp/test_kube_token.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(close(fd), 0);
    write_token(path, "first\n");
    struct fake_clock fc = {.now_ms = 0};
    struct gs_kube_clock clk = {.now_ms = fake_now, .sleep_ms = fake_sleep, .ud = &fc};
    struct gs_kube_config cfg = {
        .server = "http://127.0.0.1:1", .token = "first", .token_file = path};
    struct gs_kube_client_opts o = {.clock = &clk, .token_reread_ms = 1000};
    struct gs_kube_client *c = NULL;
    assert_int_equal(gs_kube_client_new(&cfg, &o, &c), GS_OK);
    struct curl_slist *h = gs__kube_headers(c, "application/json");
    assert_string_equal(bearer_of(h), "first");
    curl_slist_free_all(h);
    write_token(path, "second");
    fc.now_ms = 999;
    h = gs__kube_headers(c, NULL);
    assert_string_equal(bearer_of(h), "first");
    curl_slist_free_all(h);
    fc.now_ms = 1000;
    h = gs__kube_headers(c, NULL);
    assert_string_equal(bearer_of(h), "second");
    curl_slist_free_all(h);
    /* A file that cannot be read keeps the last token. */
    assert_int_equal(unlink(path), 0);
    fc.now_ms = 5000;
    h = gs__kube_headers(c, NULL);
    assert_string_equal(bearer_of(h), "second");
    curl_slist_free_all(h);
    gs_kube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limiter_gives_the_burst_then_one_token_per_period),
        cmocka_unit_test(limiter_off_and_odd_settings),
        cmocka_unit_test(backoff_doubles_up_to_the_cap),
        cmocka_unit_test(backoff_jitter_stays_in_bounds),
        cmocka_unit_test(http_status_maps_to_error_codes),
        cmocka_unit_test(requests_are_throttled_on_the_injected_clock),
        cmocka_unit_test(async_requests_call_back_once_each_from_the_step),
        cmocka_unit_test(async_requests_beyond_the_slots_wait_their_turn),
        cmocka_unit_test(background_requests_wait_behind_foreground_ones),
        cmocka_unit_test(failing_informer_retries_after_its_backoff),
        cmocka_unit_test(watch_failure_keeps_the_rv_and_backs_off),
        cmocka_unit_test(status_bodies_fill_reason_message_and_retry),
        cmocka_unit_test(token_file_is_reread_when_its_period_is_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
