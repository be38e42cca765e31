/*
 * Tests of the GPU health state machine (include/gpusched/health.h): the XID filter and its
 * default list, transitions on critical events only, recovery after the quiet period and a
 * successful probe (the fix for k8s-device-plugin #234/#1014), probe retries, the log and the
 * counters. The last test drives the machine from the fake backend's script, probing with
 * gs_gpu_sample(): a GPU that "fell off the bus" recovers only once it answers again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/gpu.h"
#include "gpusched/health.h"

/* ---- harness: clock, probe and log ------------------------------------------------------ */

struct harness {
    int64_t now_ms;
    int probe_rc[GS_GPU_MAX];    /* what the probe answers per GPU */
    uint64_t resets[GS_GPU_MAX]; /* the reset count the probe hands back */
    int probes;                  /* probe calls */
    int logs;                    /* log calls */
    struct gs_health_transition last;
    char last_text[200];
    struct gs_gpu_backend *backend; /* when set, the probe samples the GPU */
};

static int64_t h_now(void *ctx)
{
    return ((struct harness *)ctx)->now_ms;
}

static void h_sleep(void *ctx, int64_t ms)
{
    ((struct harness *)ctx)->now_ms += ms;
}

static int h_probe(void *ctx, uint32_t gpu, uint64_t *resets)
{
    struct harness *t = ctx;
    t->probes++;
    if (t->backend != NULL) {
        struct gs_gpu_sample s;
        int rc = gs_gpu_sample(t->backend, gpu, &s);
        if (rc == GS_OK)
            *resets = s.resets;
        return rc;
    }
    *resets = t->resets[gpu];
    return t->probe_rc[gpu];
}

static void h_log(void *ctx, const struct gs_health_transition *tr)
{
    struct harness *t = ctx;
    t->logs++;
    t->last = *tr;
    snprintf(t->last_text, sizeof t->last_text, "%s", tr->text);
    t->last.text = t->last_text;
}

static struct gs_health *make(struct harness *t, const struct gs_health_config *cfg, uint32_t n)
{
    struct gs_clock c = {.now_ms = h_now, .sleep_ms = h_sleep, .ctx = t};
    struct gs_health_callbacks cb = {.probe = h_probe, .log = h_log, .ctx = t};
    struct gs_health *h = NULL;
    assert_int_equal(gs_health_new(cfg, n, &c, &cb, &h), GS_OK);
    return h;
}

static struct gs_gpu_event xid(uint32_t gpu, uint64_t code)
{
    struct gs_gpu_event e = {.gpu_index = gpu, .kind = GS_GPU_EVENT_XID, .xid = code};
    return e;
}

static struct gs_gpu_event dbe(uint32_t gpu)
{
    struct gs_gpu_event e = {.gpu_index = gpu, .kind = GS_GPU_EVENT_ECC_DBE};
    return e;
}

/* ---- config --------------------------------------------------------------------------- */

static void test_default_config_ignores_the_device_plugin_application_xids(void **state)
{
    (void)state;
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    const uint64_t want[] = {13, 31, 43, 45, 68, 109};
    assert_int_equal(cfg.n_ignored, 6);
    for (size_t i = 0; i < 6; i++)
        assert_true(gs_health_xid_ignored(&cfg, want[i]));
    assert_false(gs_health_xid_ignored(&cfg, 79));
    assert_false(gs_health_xid_ignored(&cfg, 48));
    assert_int_equal(cfg.quiet_ms, GS_HEALTH_DEFAULT_QUIET_MS);
    assert_int_equal(cfg.probe_retry_ms, GS_HEALTH_DEFAULT_PROBE_RETRY_MS);
}

static void test_ignore_list_parses_and_rejects_bad_text(void **state)
{
    (void)state;
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    assert_int_equal(gs_health_config_set_ignored(&cfg, " 13, 31,79 "), GS_OK);
    assert_int_equal(cfg.n_ignored, 3);
    assert_true(gs_health_xid_ignored(&cfg, 79));
    assert_false(gs_health_xid_ignored(&cfg, 43));

    const char *bad[] = {"13,", ",13", "13;31", "x", "0", "13 31", "4294967296", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gs_health_config_set_ignored(&cfg, bad[i]), GS_EPARSE);
        assert_int_equal(cfg.n_ignored, 3); /* unchanged */
    }
    char many[1024] = "";
    for (int i = 1; i <= GS_HEALTH_IGNORED_MAX + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i > 1 ? "," : "", i);
    assert_int_equal(gs_health_config_set_ignored(&cfg, many), GS_ELIMIT);
    assert_int_equal(gs_health_config_set_ignored(&cfg, "  "), GS_OK);
    assert_int_equal(cfg.n_ignored, 0);
    assert_false(gs_health_xid_ignored(&cfg, 13));
    assert_int_equal(gs_health_config_set_ignored(NULL, "1"), GS_EINVAL);
}

static void test_new_rejects_bad_arguments(void **state)
{
    (void)state;
    struct harness t = {0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_clock c = {.now_ms = h_now, .sleep_ms = h_sleep, .ctx = &t};
    struct gs_health_callbacks cb = {.probe = h_probe, .log = NULL, .ctx = &t};
    struct gs_health *h = (struct gs_health *)0x1;
    assert_int_equal(gs_health_new(&cfg, GS_GPU_MAX + 1, &c, &cb, &h), GS_EINVAL);
    assert_null(h);
    cb.probe = NULL;
    assert_int_equal(gs_health_new(&cfg, 1, &c, &cb, &h), GS_EINVAL);
    cb.probe = h_probe;
    cfg.probe_retry_ms = 0;
    assert_int_equal(gs_health_new(&cfg, 1, &c, &cb, &h), GS_EINVAL);
    gs_health_free(NULL);
}

/* ---- transitions ---------------------------------------------------------------------- */

static void test_critical_xid_makes_gpu_unhealthy_and_logs_once(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 1000};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 4);

    assert_int_equal(gs_health_state(h, 2), GS_HEALTH_HEALTHY);
    struct gs_gpu_event e = xid(2, 79);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(gs_health_state(h, 2), GS_HEALTH_UNHEALTHY);
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_HEALTHY);
    assert_int_equal(t.logs, 1);
    assert_int_equal(t.last.gpu, 2);
    assert_int_equal(t.last.from, GS_HEALTH_HEALTHY);
    assert_int_equal(t.last.to, GS_HEALTH_UNHEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_XID);
    assert_int_equal(t.last.xid, 79);
    assert_int_equal(t.last.t_ms, 1000);
    assert_string_equal(t.last_text, "GPU 2: XID 79: Healthy -> Unhealthy (needs a GPU reset)");

    /* A second critical XID while Unhealthy is counted, not logged again. */
    e = xid(2, 48);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(t.logs, 1);
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 2, &c), GS_OK);
    assert_int_equal(c.to_unhealthy, 1);
    assert_int_equal(c.xid_total, 2);
    assert_int_equal(c.n_xid, 2);
    assert_int_equal(c.xid[0].xid, 48); /* ascending by code */
    assert_int_equal(c.xid[1].xid, 79);
    assert_int_equal(c.xid[1].count, 1);
    assert_string_equal(gs_health_state_name(gs_health_state(h, 2)), "Unhealthy");
    assert_string_equal(gs_health_state_name(gs_health_state(h, 0)), "Healthy");
    gs_health_free(h);
}

static void test_ignored_xid_is_counted_but_keeps_gpu_healthy(void **state)
{
    (void)state;
    struct harness t = {0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 1);
    const uint64_t app[] = {13, 31, 43, 45, 68, 109, 13};
    for (size_t i = 0; i < sizeof app / sizeof app[0]; i++) {
        struct gs_gpu_event e = xid(0, app[i]);
        assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    }
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_HEALTHY);
    assert_int_equal(t.logs, 0);
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.xid_total, 7);
    assert_int_equal(c.n_xid, 6);
    assert_int_equal(c.xid[0].xid, 13);
    assert_int_equal(c.xid[0].count, 2);
    assert_int_equal(c.to_unhealthy, 0);
    assert_int_equal(gs_health_next_due_ms(h), INT64_MAX);
    gs_health_free(h);
}

static void test_double_bit_ecc_makes_gpu_unhealthy(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 5};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 2);
    struct gs_gpu_event e = dbe(1);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_UNHEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_ECC_DBE);
    assert_string_equal(t.last_text, "GPU 1: double-bit ECC error: Healthy -> Unhealthy");
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 1, &c), GS_OK);
    assert_int_equal(c.ecc_dbe_events, 1);
    assert_int_equal(c.xid_total, 0);
    gs_health_free(h);
}

static void test_gpu_recovers_after_quiet_period_and_successful_probe(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = 60000;
    cfg.probe_retry_ms = 10000;
    struct gs_health *h = make(&t, &cfg, 2);
    struct gs_gpu_event e = xid(0, 94); /* contained ECC error: no reset needed */
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_false(gs_health_needs_reset(h, 0));
    assert_int_equal(gs_health_next_due_ms(h), 60000);

    /* Quiet period not over: no probe. */
    t.now_ms = 59999;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 0);

    /* A new critical error restarts the quiet period. */
    t.now_ms = 30000;
    e = xid(0, 8);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    t.now_ms = 60000;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 0);
    assert_int_equal(gs_health_next_due_ms(h), 90000);

    /* Quiet period over but the GPU does not answer: retry after probe_retry_ms. A GPU that
     * stopped answering now needs a reset: a later answer alone is not enough. */
    t.now_ms = 90000;
    t.probe_rc[0] = GS_EIO;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 1);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_UNHEALTHY);
    assert_true(gs_health_needs_reset(h, 0));
    assert_int_equal(gs_health_next_due_ms(h), 100000);
    t.now_ms = 99999;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 1);

    /* It answers, seen reset by the backend (count 0 -> 1): Healthy again, logged, counted. */
    t.now_ms = 100000;
    t.probe_rc[0] = GS_OK;
    t.resets[0] = 1;
    int logs = t.logs;
    assert_int_equal(gs_health_tick(h), 1);
    assert_int_equal(t.probes, 2);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_HEALTHY);
    assert_int_equal(t.logs, logs + 1);
    assert_int_equal(t.last.from, GS_HEALTH_UNHEALTHY);
    assert_int_equal(t.last.to, GS_HEALTH_HEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_RESET);
    assert_string_equal(t.last_text, "GPU 0: seen reset (lost and found again) and answering: "
                                     "Unhealthy -> Healthy");
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.to_unhealthy, 1);
    assert_int_equal(c.recoveries, 1);
    assert_int_equal(c.probe_failures, 1);
    assert_int_equal(gs_health_next_due_ms(h), INT64_MAX);

    /* Healthy GPUs are never probed. */
    t.now_ms = 500000;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 2);

    /* And it can fail again later. */
    e = dbe(0);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.to_unhealthy, 2);
    gs_health_free(h);
}

static void test_negative_quiet_period_never_recovers(void **state)
{
    (void)state;
    struct harness t = {0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = -1;
    struct gs_health *h = make(&t, &cfg, 1);
    struct gs_gpu_event e = xid(0, 79);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    t.now_ms = INT64_MAX / 2;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(t.probes, 0);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_UNHEALTHY);
    assert_int_equal(gs_health_next_due_ms(h), INT64_MAX);
    gs_health_free(h);
}

static void test_event_for_all_gpus_and_out_of_range(void **state)
{
    (void)state;
    struct harness t = {0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 3);
    struct gs_gpu_event e = xid(GS_GPU_INDEX_ALL, 119);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(gs_health_state(h, i), GS_HEALTH_UNHEALTHY);
    assert_int_equal(t.logs, 3);
    e = xid(3, 79);
    assert_int_equal(gs_health_on_event(h, &e), GS_ERANGE);
    e.kind = (enum gs_gpu_event_kind)7;
    e.gpu_index = 0;
    assert_int_equal(gs_health_on_event(h, &e), GS_EINVAL);
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 3, &c), GS_ERANGE);
    assert_int_equal(gs_health_state(h, 3), GS_HEALTH_UNHEALTHY);
    gs_health_free(h);
}

static void test_xid_codes_beyond_the_table_go_to_other(void **state)
{
    (void)state;
    struct harness t = {0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 1);
    for (uint64_t code = 1000; code > 1000 - GS_HEALTH_XID_CODES_MAX - 3; code--) {
        struct gs_gpu_event e = xid(0, code);
        assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    }
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.n_xid, GS_HEALTH_XID_CODES_MAX);
    assert_int_equal(c.xid_other, 3);
    assert_int_equal(c.xid_total, GS_HEALTH_XID_CODES_MAX + 3);
    for (uint32_t i = 1; i < c.n_xid; i++)
        assert_true(c.xid[i - 1].xid < c.xid[i].xid);
    gs_health_free(h);
}

static void test_contained_xid_recovers_after_the_quiet_period(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = 1000;
    struct gs_health *h = make(&t, &cfg, 1);
    struct gs_gpu_event e = xid(0, 94);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(gs_health_reason_of(h, 0), GS_HEALTH_REASON_XID);
    assert_string_equal(t.last_text, "GPU 0: XID 94: Healthy -> Unhealthy");
    t.now_ms = 1000;
    assert_int_equal(gs_health_tick(h), 1);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_RECOVERED);
    assert_string_equal(t.last_text, "GPU 0: no critical error for 1000 ms and the probe "
                                     "succeeded: Unhealthy -> Healthy");
    assert_int_equal(gs_health_reason_of(h, 0), 0);
    gs_health_free(h);
}

static void test_reset_class_xid_stays_unhealthy_until_seen_reset(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = 1000;
    cfg.probe_retry_ms = 500;
    struct gs_health *h = make(&t, &cfg, 2);
    /* The backend had already found GPU 0 again twice before (count 2). */
    assert_int_equal(gs_health_on_sample(h, 0, GS_OK, 2), GS_OK);
    t.resets[0] = 2;
    struct gs_gpu_event e = xid(0, 79);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_true(t.last.needs_reset);
    assert_string_equal(t.last_text, "GPU 0: XID 79: Healthy -> Unhealthy (needs a GPU reset)");
    assert_true(gs_health_needs_reset(h, 0));
    /* A contained error later does not lift the need for a reset. */
    t.now_ms = 100;
    e = xid(0, 94);
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_true(gs_health_needs_reset(h, 0));

    /* Quiet since 100: probes from 1100 on answer, but the count stays 2: no recovery, the
     * probe is repeated every 500 ms (and none of this is a probe failure). */
    for (int64_t at = 1100; at <= 3100; at += 500) {
        t.now_ms = at;
        assert_int_equal(gs_health_tick(h), 0);
        assert_int_equal(gs_health_state(h, 0), GS_HEALTH_UNHEALTHY);
        assert_int_equal(gs_health_next_due_ms(h), at + 500);
    }
    assert_int_equal(t.probes, 5);
    /* Samples that answer without a reset change nothing either. */
    assert_int_equal(gs_health_on_sample(h, 0, GS_OK, 2), GS_OK);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_UNHEALTHY);
    /* Seen reset (count 3) in a sample: Healthy at once, without waiting for a probe. */
    t.now_ms = 3200;
    assert_int_equal(gs_health_on_sample(h, 0, GS_OK, 3), GS_OK);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_HEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_RESET);
    assert_false(gs_health_needs_reset(h, 0));
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.probe_failures, 0);
    assert_int_equal(c.to_unhealthy, 1);
    assert_int_equal(c.recoveries, 1);
    /* GPU 1 was never touched. */
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_HEALTHY);
    gs_health_free(h);
}

static void test_failed_sample_makes_gpu_unhealthy_as_lost(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = 1000;
    struct gs_health *h = make(&t, &cfg, 8);
    /* GPU 5 answers no query and sends no XID. */
    assert_int_equal(gs_health_on_sample(h, 5, GS_EIO, 0), GS_OK);
    assert_int_equal(gs_health_state(h, 5), GS_HEALTH_UNHEALTHY);
    assert_int_equal(gs_health_reason_of(h, 5), GS_HEALTH_REASON_LOST);
    assert_string_equal(gs_health_reason_name(gs_health_reason_of(h, 5)), "lost");
    assert_string_equal(t.last_text, "GPU 5: lost (does not answer): Healthy -> Unhealthy "
                                     "(needs a GPU reset)");
    assert_int_equal(gs_health_on_sample(h, 5, GS_EIO, 0), GS_OK);
    assert_int_equal(t.logs, 1);
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 5, &c), GS_OK);
    assert_int_equal(c.failed_samples, 2);
    assert_int_equal(c.to_unhealthy, 1);
    for (uint32_t g = 0; g < 8; g++)
        assert_int_equal(gs_health_state(h, g), g == 5 ? GS_HEALTH_UNHEALTHY : GS_HEALTH_HEALTHY);
    /* The probe answers after the quiet period, but without a reset seen: still Unhealthy. */
    t.now_ms = 5000;
    assert_int_equal(gs_health_tick(h), 0);
    assert_int_equal(gs_health_state(h, 5), GS_HEALTH_UNHEALTHY);
    /* The probe sees it reset. */
    t.now_ms = 5000 + GS_HEALTH_DEFAULT_PROBE_RETRY_MS;
    t.resets[5] = 1;
    assert_int_equal(gs_health_tick(h), 1);
    assert_int_equal(gs_health_state(h, 5), GS_HEALTH_HEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_RESET);
    assert_int_equal(gs_health_on_sample(h, 9, GS_OK, 0), GS_ERANGE);
    assert_int_equal(gs_health_on_sample(NULL, 0, GS_OK, 0), GS_EINVAL);
    gs_health_free(h);
}

static void test_lost_event_needs_reset_and_operator_clears(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health *h = make(&t, &cfg, 2);
    struct gs_gpu_event e = {.gpu_index = 1, .kind = GS_GPU_EVENT_LOST};
    assert_int_equal(gs_health_on_event(h, &e), GS_OK);
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_UNHEALTHY);
    assert_int_equal(gs_health_reason_of(h, 1), GS_HEALTH_REASON_LOST);
    assert_true(gs_health_needs_reset(h, 1));
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_HEALTHY);
    assert_int_equal(gs_health_clear(h, 0), 0); /* Healthy: nothing to clear */
    assert_int_equal(gs_health_clear(h, 1), 1);
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_HEALTHY);
    assert_int_equal(t.last.reason, GS_HEALTH_REASON_CLEARED);
    assert_string_equal(t.last_text, "GPU 1: cleared by an operator: Unhealthy -> Healthy");
    assert_false(gs_health_needs_reset(h, 1));
    assert_int_equal(gs_health_clear(h, 2), GS_ERANGE);
    gs_health_free(h);
}

static void test_reset_list_default_and_parse(void **state)
{
    (void)state;
    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    const uint64_t want[] = {48, 62, 64, 74, 79, 95, 119, 120, 140};
    assert_int_equal(cfg.n_reset, 9);
    for (uint32_t i = 0; i < 9; i++)
        assert_true(gs_health_xid_needs_reset(&cfg, want[i]));
    assert_false(gs_health_xid_needs_reset(&cfg, 94));
    assert_false(gs_health_xid_needs_reset(&cfg, 63));
    assert_int_equal(gs_health_config_set_reset(&cfg, "94, 8"), GS_OK);
    assert_int_equal(cfg.n_reset, 2);
    assert_true(gs_health_xid_needs_reset(&cfg, 94));
    assert_false(gs_health_xid_needs_reset(&cfg, 79));
    assert_int_equal(gs_health_config_set_reset(&cfg, "79,x"), GS_EPARSE);
    assert_int_equal(cfg.n_reset, 2); /* unchanged on failure */
    assert_int_equal(gs_health_config_set_reset(&cfg, ""), GS_OK);
    assert_int_equal(cfg.n_reset, 0);
}

/* ---- with the fake backend ------------------------------------------------------------ */

static void test_fake_xid79_lost_gpu_recovers_only_when_it_answers(void **state)
{
    (void)state;
    struct harness t = {.now_ms = 0};
    struct gs_clock clock = {.now_ms = h_now, .sleep_ms = h_sleep, .ctx = &t};
    char path[1024];
    const char *src = getenv("GS_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/fake/two_gpus.yaml", src != NULL ? src : ".");
    struct gs_diag d;
    assert_int_equal(gs_gpu_open_fake(path, &clock, &t.backend, &d), GS_OK);

    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    cfg.quiet_ms = 2000; /* GPU 1: XID 79 and lost at 5000, found again at 9000 */
    cfg.probe_retry_ms = 1000;
    struct gs_health *h = make(&t, &cfg, 2);

    /* The agent's loop: wait for an event or the next probe, feed events, tick. */
    int64_t healthy_again_at = -1;
    while (t.now_ms < 20000) {
        int64_t due = gs_health_next_due_ms(h);
        int64_t wait = due == INT64_MAX ? 20000 - t.now_ms : due - t.now_ms;
        if (wait < 0)
            wait = 0;
        struct gs_gpu_event ev;
        int rc = gs_gpu_wait_event(t.backend, wait, &ev);
        if (rc == GS_OK)
            assert_int_equal(gs_health_on_event(h, &ev), GS_OK);
        else
            assert_int_equal(rc, GS_ENOENT);
        if (gs_health_tick(h) > 0 && healthy_again_at < 0)
            healthy_again_at = t.now_ms;
        if (t.now_ms == 5000)
            assert_int_equal(gs_health_state(h, 1), GS_HEALTH_UNHEALTHY);
    }
    /* XID 13 on GPU 0 (ignored) and the ECC error at 5000 made GPU 0 Unhealthy too; it
     * answers at once, so it recovers at 7000. GPU 1 is probed at 7000 and 8000 (lost), then
     * recovers at 9000. */
    assert_int_equal(healthy_again_at, 7000);
    assert_int_equal(gs_health_state(h, 0), GS_HEALTH_HEALTHY);
    assert_int_equal(gs_health_state(h, 1), GS_HEALTH_HEALTHY);
    struct gs_health_counters c;
    assert_int_equal(gs_health_counters(h, 1, &c), GS_OK);
    assert_int_equal(c.to_unhealthy, 1);
    assert_int_equal(c.recoveries, 1);
    assert_int_equal(c.probe_failures, 2);
    assert_int_equal(c.xid_total, 1);
    assert_int_equal(c.xid[0].xid, 79);
    assert_int_equal(gs_health_counters(h, 0, &c), GS_OK);
    assert_int_equal(c.xid[0].xid, 13);
    assert_int_equal(c.ecc_dbe_events, 1);
    assert_int_equal(c.probe_failures, 0);
    gs_health_free(h);
    gs_gpu_close(t.backend);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_config_ignores_the_device_plugin_application_xids),
        cmocka_unit_test(test_ignore_list_parses_and_rejects_bad_text),
        cmocka_unit_test(test_new_rejects_bad_arguments),
        cmocka_unit_test(test_critical_xid_makes_gpu_unhealthy_and_logs_once),
        cmocka_unit_test(test_ignored_xid_is_counted_but_keeps_gpu_healthy),
        cmocka_unit_test(test_double_bit_ecc_makes_gpu_unhealthy),
        cmocka_unit_test(test_gpu_recovers_after_quiet_period_and_successful_probe),
        cmocka_unit_test(test_negative_quiet_period_never_recovers),
        cmocka_unit_test(test_event_for_all_gpus_and_out_of_range),
        cmocka_unit_test(test_xid_codes_beyond_the_table_go_to_other),
        cmocka_unit_test(test_contained_xid_recovers_after_the_quiet_period),
        cmocka_unit_test(test_reset_class_xid_stays_unhealthy_until_seen_reset),
        cmocka_unit_test(test_failed_sample_makes_gpu_unhealthy_as_lost),
        cmocka_unit_test(test_lost_event_needs_reset_and_operator_clears),
        cmocka_unit_test(test_reset_list_default_and_parse),
        cmocka_unit_test(test_fake_xid79_lost_gpu_recovers_only_when_it_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
