/*
 * Tests of the fake GPU backend (include/gpusched/gpu.h): every field read from YAML, GPUs
 * kept by index whatever the file order, the script replayed against a test clock (values,
 * events, a lost GPU, timeouts, order of simultaneous events), and every kind of bad input
 * reported with file, line, column and key. Runs under ASan, which catches a leak on any
 * error path.
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

/* ---- a clock the test drives --------------------------------------------------------- */

struct tclock {
    int64_t now_ms;
    int sleeps;
};

static int64_t t_now(void *ctx)
{
    return ((struct tclock *)ctx)->now_ms;
}

static void t_sleep(void *ctx, int64_t ms)
{
    struct tclock *c = ctx;
    c->now_ms += ms;
    c->sleeps++;
}

static struct gs_clock make_clock(struct tclock *c)
{
    struct gs_clock k = {.now_ms = t_now, .sleep_ms = t_sleep, .ctx = c};
    return k;
}

static char *data_path(const char *rel)
{
    const char *src = getenv("GS_SOURCE_DIR");
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", src != NULL ? src : ".", rel);
    return buf;
}

static struct gs_gpu_backend *open_file(const char *rel, struct tclock *c)
{
    struct gs_clock k = make_clock(c);
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    int rc = gs_gpu_open_fake(data_path(rel), &k, &b, &d);
    if (rc != GS_OK) {
        char text[600];
        gs_diag_format(&d, text, sizeof text);
        print_message("%s\n", text);
    }
    assert_int_equal(rc, GS_OK);
    assert_non_null(b);
    return b;
}

/* ---- reading -------------------------------------------------------------------------- */

static void test_fake_reads_every_field_and_orders_gpus_by_index(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 1000};
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);

    struct gs_gpu_system sys;
    assert_int_equal(gs_gpu_system(b, &sys), GS_OK);
    assert_string_equal(sys.driver_version, "550.54.15");
    assert_int_equal(sys.cuda_driver_version, 12040);

    uint32_t n;
    assert_int_equal(gs_gpu_count(b, &n), GS_OK);
    assert_int_equal(n, 2);

    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.index, 0);
    assert_string_equal(g.uuid, "GPU-bbbbbbbb-0000-0000-0000-000000000000");
    assert_string_equal(g.model, "NVIDIA H100 80GB HBM3");
    assert_int_equal(g.mem_total_mib, 81559);
    assert_int_equal(g.numa_node, -1); /* not given */
    assert_int_equal(g.cc_major, -1);
    assert_string_equal(g.pci_bus_id, "00000000:18:00.0");
    assert_int_equal(g.nvlink_peer_count, 1);
    assert_int_equal(g.nvlink_peers[0], 1);
    assert_false(g.mig_capable);
    assert_false(g.mig_enabled);
    assert_int_equal(g.mig_count, 0);

    assert_int_equal(gs_gpu_info(b, 1, &g), GS_OK);
    assert_int_equal(g.index, 1);
    assert_string_equal(g.uuid, "GPU-bbbbbbbb-0000-0000-0000-000000000001");
    assert_int_equal(g.numa_node, 1);
    assert_int_equal(g.cc_major, 9);
    assert_int_equal(g.cc_minor, 0);
    assert_true(g.mig_capable);
    assert_true(g.mig_enabled);
    assert_int_equal(g.mig_count, 2);
    assert_string_equal(g.mig[0].profile, "3g.40gb");
    assert_string_equal(g.mig[0].uuid, "MIG-aaaaaaaa-0000-0000-0000-000000000011");
    assert_int_equal(g.mig[0].mem_mib, 40192);
    assert_string_equal(g.mig[1].profile, "1g.10gb+me");
    assert_int_equal(g.mig[1].mem_mib, 9856);

    assert_int_equal(gs_gpu_info(b, 2, &g), GS_ERANGE);
    assert_non_null(strstr(gs_gpu_last_error(b), "no GPU 2"));
    gs_gpu_close(b);
}

static void test_fake_initial_sample_and_unsupported_fields(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 0};
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);
    struct gs_gpu_sample s;

    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    assert_int_equal(s.valid, GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB | GS_GPU_HAVE_TEMP |
                                  GS_GPU_HAVE_POWER | GS_GPU_HAVE_SM_CLOCK | GS_GPU_HAVE_MEM_CLOCK |
                                  GS_GPU_HAVE_ECC_DBE | GS_GPU_HAVE_XID);
    assert_int_equal(s.util_pct, 5);
    assert_int_equal(s.temp_c, 30);
    assert_int_equal(s.fb_used_mib, 1024);
    assert_int_equal(s.fb_free_mib, 81559 - 1024);
    assert_int_equal(s.power_mw, 70250);
    assert_int_equal(s.sm_clock_mhz, 345);
    assert_int_equal(s.mem_clock_mhz, 2619);
    assert_int_equal(s.ecc_dbe_vol_total, 2);
    assert_int_equal(s.xid_count, 0);

    assert_int_equal(gs_gpu_sample(b, 1, &s), GS_OK);
    assert_int_equal(s.valid & (GS_GPU_HAVE_ECC_DBE | GS_GPU_HAVE_POWER), 0);
    assert_true(s.valid & GS_GPU_HAVE_TEMP);
    assert_int_equal(s.fb_free_mib, 81559);
    gs_gpu_close(b);
}

/* ---- the script ----------------------------------------------------------------------- */

static void test_fake_script_changes_values_when_due(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 50000}; /* script times are relative to open */
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);
    struct gs_gpu_sample s;

    c.now_ms += 999;
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    assert_int_equal(s.util_pct, 5);

    c.now_ms += 1;
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    assert_int_equal(s.util_pct, 80);
    assert_int_equal(s.fb_used_mib, 60000);
    assert_int_equal(s.fb_free_mib, 81559 - 60000);
    assert_int_equal(s.power_mw, 500000);
    assert_int_equal(s.temp_c, 30); /* not in the "set" */
    assert_int_equal(gs_gpu_sample(b, 1, &s), GS_OK);
    assert_int_equal(s.temp_c, 70);

    /* Counters move when the events fall due, whether or not anyone waited for them. */
    c.now_ms += 4000;
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    assert_int_equal(s.xid_count, 1);
    assert_int_equal(s.last_xid, 13);
    assert_int_equal(s.ecc_dbe_vol_total, 2 + 3);
    gs_gpu_close(b);
}

static void test_fake_wait_event_sleeps_until_the_next_scripted_event(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 100};
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);
    struct gs_gpu_event ev;

    /* The first event (XID 13 on GPU 0, written after the 5000 ms ones) is due at 3000. */
    assert_int_equal(gs_gpu_wait_event(b, 10000, &ev), GS_OK);
    assert_int_equal(c.now_ms, 100 + 3000);
    assert_int_equal(ev.gpu_index, 0);
    assert_int_equal(ev.kind, GS_GPU_EVENT_XID);
    assert_int_equal(ev.xid, 13);
    assert_int_equal(ev.t_ms, 3100);

    /* Two events at 5000, delivered in file order. */
    assert_int_equal(gs_gpu_wait_event(b, 10000, &ev), GS_OK);
    assert_int_equal(c.now_ms, 5100);
    assert_int_equal(ev.gpu_index, 1);
    assert_int_equal(ev.kind, GS_GPU_EVENT_XID);
    assert_int_equal(ev.xid, 79);
    int sleeps = c.sleeps;
    assert_int_equal(gs_gpu_wait_event(b, 10000, &ev), GS_OK);
    assert_int_equal(c.sleeps, sleeps); /* already due: no wait */
    assert_int_equal(ev.gpu_index, 0);
    assert_int_equal(ev.kind, GS_GPU_EVENT_ECC_DBE);
    assert_int_equal(ev.xid, 0);

    /* Nothing left: the whole timeout passes, then GS_ENOENT. */
    assert_int_equal(gs_gpu_wait_event(b, 2500, &ev), GS_ENOENT);
    assert_int_equal(c.now_ms, 5100 + 2500);
    assert_int_equal(gs_gpu_wait_event(b, 0, &ev), GS_ENOENT);
    assert_int_equal(c.now_ms, 7600);
    gs_gpu_close(b);
}

static void test_fake_wait_event_times_out_before_a_later_event(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 0};
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);
    struct gs_gpu_event ev;

    assert_int_equal(gs_gpu_wait_event(b, 2999, &ev), GS_ENOENT);
    assert_int_equal(c.now_ms, 2999);
    assert_int_equal(gs_gpu_wait_event(b, 1, &ev), GS_OK);
    assert_int_equal(ev.xid, 13);
    /* The longest timeout does not overflow: it waits for the next event (5000). */
    assert_int_equal(gs_gpu_wait_event(b, INT64_MAX, &ev), GS_OK);
    assert_int_equal(ev.xid, 79);
    assert_int_equal(c.now_ms, 5000);
    assert_int_equal(gs_gpu_wait_event(b, -1, &ev), GS_EINVAL);
    gs_gpu_close(b);
}

static void test_fake_lost_gpu_fails_sample_until_found(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 0};
    struct gs_gpu_backend *b = open_file("tests/data/fake/two_gpus.yaml", &c);
    struct gs_gpu_sample s;

    c.now_ms = 5000;
    assert_int_equal(gs_gpu_sample(b, 1, &s), GS_EIO);
    assert_non_null(strstr(gs_gpu_last_error(b), "lost"));
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK); /* the other GPU still answers */
    assert_string_equal(gs_gpu_last_error(b), "");
    c.now_ms = 8999;
    assert_int_equal(gs_gpu_sample(b, 1, &s), GS_EIO);
    c.now_ms = 9000;
    assert_int_equal(gs_gpu_sample(b, 1, &s), GS_OK);
    assert_int_equal(s.xid_count, 1);
    assert_int_equal(s.last_xid, 79);
    assert_int_equal(s.resets, 1); /* found again: a reset seen, for the health machine */
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    assert_int_equal(s.resets, 0);
    assert_int_equal(gs_gpu_sample(b, 2, &s), GS_ERANGE);
    gs_gpu_close(b);
}

/* A scripted re-partition: gs_gpu_info() shows the new MIG mode and instances from t_ms on. */
static void test_fake_script_repartitions_mig(void **state)
{
    (void)state;
    static const char yaml[] =
        "gpus:\n"
        "  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, mig: {capable: true}}\n"
        "script:\n"
        "  - t_ms: 1000\n"
        "    gpu: 0\n"
        "    mig: {enabled: true, instances: [{profile: 1g.10gb, uuid: MIG-p, memory_mib: 10,\n"
        "                                      start: 0},\n"
        "                                     {profile: 3g.40gb, uuid: MIG-q, memory_mib: 40,\n"
        "                                      start: 4}]}\n"
        "  - {t_ms: 2000, gpu: 0, mig: {enabled: false}}\n";
    struct tclock c = {.now_ms = 7000};
    struct gs_clock k = make_clock(&c);
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    assert_int_equal(gs_gpu_parse_fake(yaml, strlen(yaml), "r.yaml", &k, &b, &d), GS_OK);
    struct gs_gpu_info g;
    c.now_ms += 999;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_true(g.mig_capable);
    assert_false(g.mig_enabled);
    assert_int_equal(g.mig_count, 0);
    c.now_ms += 1; /* t_ms 1000: MIG on, two instances in file order */
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_true(g.mig_enabled);
    assert_int_equal(g.mig_count, 2);
    assert_string_equal(g.mig[0].uuid, "MIG-p");
    assert_string_equal(g.mig[0].profile, "1g.10gb");
    assert_int_equal(g.mig[0].mem_mib, 10);
    assert_true(g.mig[0].has_start);
    assert_int_equal(g.mig[0].start_slot, 0);
    assert_string_equal(g.mig[1].uuid, "MIG-q");
    assert_int_equal(g.mig[1].start_slot, 4);
    assert_string_equal(g.uuid, "GPU-a"); /* the rest of the GPU as it was */
    assert_int_equal(g.mem_total_mib, 100);
    struct gs_gpu_sample s;
    assert_int_equal(gs_gpu_sample(b, 0, &s), GS_OK);
    c.now_ms += 1000; /* t_ms 2000: MIG off, no instance left over */
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_false(g.mig_enabled);
    assert_int_equal(g.mig_count, 0);
    assert_string_equal(g.mig[0].uuid, "");
    gs_gpu_close(b);
}

/*
 * MIG instances with their GPU and compute instance ids and their own values (issue 9,
 * dcgm-exporter #587): memory used per instance, GPM utilisation where scripted; an instance
 * without gpm_util_pct has no utilisation, one without an id no values at all; a scripted
 * layout brings its own values; a GPU not in MIG mode has none; a lost one fails.
 */
static void test_fake_mig_instances_have_ids_and_own_values(void **state)
{
    (void)state;
    static const char yaml[] =
        "gpus:\n"
        "  - index: 0\n"
        "    uuid: GPU-a\n"
        "    model: M\n"
        "    memory_mib: 100\n"
        "    mig:\n"
        "      enabled: true\n"
        "      instances:\n"
        "        - {profile: 1g.10gb, uuid: MIG-p, memory_mib: 10, gpu_instance_id: 9,\n"
        "           compute_instance_id: 0, memory_used_mib: 7, gpm_util_pct: 64}\n"
        "        - {profile: 3g.40gb, uuid: MIG-q, memory_mib: 40, gpu_instance_id: 2,\n"
        "           memory_used_mib: 30}\n"
        "        - {profile: 1g.10gb, uuid: MIG-r, memory_mib: 10}\n"
        "    processes: [{pid: 11, mem_mib: 5, gpu_instance_id: 9}]\n"
        "  - {index: 1, uuid: GPU-b, model: M, memory_mib: 100}\n"
        "script:\n"
        "  - t_ms: 100\n"
        "    gpu: 0\n"
        "    mig: {enabled: true, instances: [{profile: 7g.80gb, uuid: MIG-s, memory_mib: 80,\n"
        "                                      gpu_instance_id: 0, gpm_util_pct: 3}]}\n"
        "  - {t_ms: 200, gpu: 0, lost: true}\n";
    struct tclock c = {.now_ms = 0};
    struct gs_clock k = make_clock(&c);
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    int rc = gs_gpu_parse_fake(yaml, strlen(yaml), "m.yaml", &k, &b, &d);
    if (rc != GS_OK) {
        char text[600];
        gs_diag_format(&d, text, sizeof text);
        print_message("%s\n", text);
    }
    assert_int_equal(rc, GS_OK);
    struct gs_gpu_info g;
    assert_int_equal(gs_gpu_info(b, 0, &g), GS_OK);
    assert_int_equal(g.mig_count, 3);
    assert_true(g.mig[0].has_gi_id && g.mig[0].has_ci_id);
    assert_int_equal(g.mig[0].gi_id, 9);
    assert_int_equal(g.mig[0].ci_id, 0);
    assert_true(g.mig[1].has_gi_id && !g.mig[1].has_ci_id);
    assert_int_equal(g.mig[1].gi_id, 2);
    assert_false(g.mig[2].has_gi_id);
    struct gs_gpu_mig_sample m[GS_GPU_MIG_MAX];
    uint32_t n = 99;
    assert_int_equal(gs_gpu_mig_sample(b, 0, m, GS_GPU_MIG_MAX, &n), GS_OK);
    assert_int_equal(n, 2); /* MIG-r has no id: no values */
    assert_int_equal(m[0].gi_id, 9);
    assert_int_equal(m[0].valid, GS_GPU_HAVE_FB | GS_GPU_HAVE_UTIL);
    assert_int_equal(m[0].fb_used_mib, 7);
    assert_int_equal(m[0].util_pct, 64);
    assert_int_equal(m[1].gi_id, 2);
    assert_int_equal(m[1].valid, GS_GPU_HAVE_FB); /* no gpm_util_pct: no utilisation */
    assert_int_equal(m[1].fb_used_mib, 30);
    assert_int_equal(gs_gpu_mig_sample(b, 0, m, 1, &n), GS_OK); /* cut at cap */
    assert_int_equal(n, 1);
    struct gs_gpu_proc p[4];
    assert_int_equal(gs_gpu_processes(b, 0, p, 4, &n), GS_OK);
    assert_int_equal(n, 1);
    assert_true(p[0].has_gi_id);
    assert_int_equal(p[0].gi_id, 9);
    assert_int_equal(gs_gpu_mig_sample(b, 1, m, GS_GPU_MIG_MAX, &n), GS_OK);
    assert_int_equal(n, 0); /* not in MIG mode */
    assert_int_equal(gs_gpu_mig_sample(b, 2, m, GS_GPU_MIG_MAX, &n), GS_ERANGE);
    assert_int_equal(gs_gpu_mig_sample(b, 0, m, 0, &n), GS_EINVAL);
    c.now_ms = 100; /* the scripted layout, with its own values */
    assert_int_equal(gs_gpu_mig_sample(b, 0, m, GS_GPU_MIG_MAX, &n), GS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].gi_id, 0);
    assert_int_equal(m[0].valid, GS_GPU_HAVE_UTIL);
    assert_int_equal(m[0].util_pct, 3);
    c.now_ms = 200;
    assert_int_equal(gs_gpu_mig_sample(b, 0, m, GS_GPU_MIG_MAX, &n), GS_EIO);
    assert_int_equal(n, 0);
    gs_gpu_close(b);
}

static void test_fake_deep_nesting_stops_at_the_limit(void **state)
{
    (void)state;
    /* 1 MB of "[" kept libyaml's loader busy for 425 s (issue 9); the bounded walker stops at
     * the 17th level, column 17 of line 1. */
    struct tclock c = {0};
    struct gs_clock k = make_clock(&c);
    size_t n = 1024 * 1024;
    char *y = malloc(n);
    assert_non_null(y);
    memset(y, '[', n);
    struct gs_gpu_backend *b = NULL;
    struct gs_diag d;
    assert_int_equal(gs_gpu_parse_fake(y, n, "deep.yaml", &k, &b, &d), GS_EPARSE);
    assert_null(b);
    assert_string_equal(d.file, "deep.yaml");
    assert_int_equal(d.line, 1);
    assert_int_equal(d.column, 17);
    assert_string_equal(d.msg, "nesting deeper than 16 levels");
    free(y);
}

static void test_fake_example_node_of_the_deploy_directory_loads(void **state)
{
    (void)state;
    struct tclock c = {.now_ms = 0};
    struct gs_gpu_backend *b = open_file("deploy/fake-gpus.yaml", &c);
    uint32_t n;
    assert_int_equal(gs_gpu_count(b, &n), GS_OK);
    assert_int_equal(n, 8);
    uint32_t mig_gpus = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct gs_gpu_info g;
        assert_int_equal(gs_gpu_info(b, i, &g), GS_OK);
        assert_string_equal(g.model, "NVIDIA H200");
        assert_int_equal(g.numa_node, i < 4 ? 0 : 1);
        mig_gpus += g.mig_enabled;
    }
    assert_int_equal(mig_gpus, 2);
    struct gs_gpu_event ev;
    assert_int_equal(gs_gpu_wait_event(b, 60000, &ev), GS_OK);
    assert_int_equal(ev.gpu_index, 3);
    assert_int_equal(ev.xid, 79);
    assert_int_equal(c.now_ms, 30000);
    gs_gpu_close(b);
}

/* ---- bad input ------------------------------------------------------------------------ */

#define HEAD "gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100}\n"
#define MIG_X "{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5}"
/* GPU 0 in MIG mode with the instances inst (a flow sequence's items). */
#define MIG_LINE(inst)                                                                             \
    "gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, mig: {enabled: true, "          \
    "instances: [" inst "]}}\n"
/* GPU 0 in MIG mode with one instance, MIG-x. */
#define HEAD_MIG                                                                                   \
    "gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, mig: {enabled: true, "          \
    "instances: [" MIG_X "]}}\n"

struct bad_case {
    const char *yaml;
    uint64_t line;
    uint32_t column;
    const char *field;
    const char *msg_part;
};

static const struct bad_case bad_cases[] = {
    {"", 0, 0, "", "empty document"},
    {"gpus: [\n", 2, 1, "", "malformed YAML: did not find expected node content"},
    {"- 1\n", 1, 1, "", "expected a mapping, found a list"},
    {"gpus: []\ngpus: []\n", 2, 1, "gpus", "key repeated"},
    {"gpu: []\n", 1, 1, "gpu", "unknown key in the top level"},
    {"driver_version: x\n", 1, 1, "gpus", "required key missing"},
    {"gpus: {}\n", 1, 7, "gpus", "expected a list, found a mapping"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M}\n", 2, 5, "memory_mib",
     "required key missing from a GPU"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 0}\n", 2, 51, "memory_mib",
     "must be positive"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 1x}\n", 2, 51, "memory_mib",
     "not an integer"},
    {"gpus:\n  - {index: 1, uuid: GPU-a, model: M, memory_mib: 100}\n", 2, 13, "index",
     "out of range: 1 GPUs"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100}\n"
     "  - {index: 0, uuid: GPU-b, model: M, memory_mib: 100}\n",
     3, 13, "index", "GPU index 0 repeated"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100}\n"
     "  - {index: 1, uuid: GPU-a, model: M, memory_mib: 100}\n",
     3, 5, "uuid", "UUID GPU-a repeated"},
    {"gpus:\n  - {index: 0, uuid: MIG-a, model: M, memory_mib: 100}\n", 2, 22, "uuid",
     "not a UUID of the form GPU-"},
    {"gpus:\n  - {index: 0, uuid: \"GPU-a b\", model: M, memory_mib: 100}\n", 2, 22, "uuid",
     "not a UUID"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: \"\", memory_mib: 100}\n", 2, 36, "model",
     "value is empty"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: \"a\\tb\", memory_mib: 100}\n", 2, 36, "model",
     "not printable"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: \"a\\0b\", memory_mib: 100}\n", 2, 36, "model",
     "NUL byte"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, numa_node: -2}\n", 2, 67,
     "numa_node", "out of range -1..1023"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, pci_bus_id: 18:00}\n", 2, 68,
     "pci_bus_id", "not a PCI bus id"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, compute_capability: 9}\n", 2,
     76, "compute_capability", "not a compute capability"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, nvlink_peers: [0]}\n", 2, 71,
     "nvlink_peers", "its own NVLink peer"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, nvlink_peers: [3]}\n", 2, 5,
     "nvlink_peers", "peer 3 of GPU 0 does not exist"},
    {"gpus:\n  - {index: 0, uuid: GPU-a, model: M, memory_mib: 100, numa: 0}\n", 2, 56, "numa",
     "unknown key in a GPU"},
    {HEAD "    # comment\n", 0, 0, NULL, NULL}, /* placeholder: valid, skipped below */
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: true, capable: false}\n",
     6, 10, "enabled", "not capable"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: false, instances: [{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5}]}\n",
     6, 38, "instances", "while MIG is disabled"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: true, instances: [{profile: 1gb, uuid: MIG-x, memory_mib: 5}]}\n",
     6, 48, "profile", "not a MIG profile"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: true, instances: [{profile: 1g.5gb, memory_mib: 5}]}\n",
     6, 38, "uuid", "required key missing from a MIG instance"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: true, instances: [{profile: 1g.5gb, uuid: MIG-x, memory_mib: 60},\n"
     "                                     {profile: 1g.5gb, uuid: MIG-y, memory_mib: 60}]}\n",
     7, 38, "memory_mib", "more memory than the GPU"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    mig: {enabled: true, instances: [{profile: 1g.5gb, uuid: MIG-x, memory_mib: 6},\n"
     "                                     {profile: 1g.5gb, uuid: MIG-x, memory_mib: 6}]}\n",
     2, 5, "uuid", "MIG UUID MIG-x repeated"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    sample: {fb_used_mib: 101}\n",
     6, 13, "fb_used_mib", "exceeds memory_mib"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    sample: {utilization_pct: 101}\n",
     6, 31, "utilization_pct", "out of range 0..100"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    unsupported: [power, fan]\n",
     6, 26, "unsupported", "'fan' is not one of"},
    {HEAD "script:\n  - {t_ms: 5, gpu: 0}\n", 4, 5, "script", "exactly one of"},
    {HEAD "script:\n  - {t_ms: 5, gpu: 0, xid: 13, lost: true}\n", 4, 38, "script",
     "exactly one of"},
    {HEAD "script:\n  - {gpu: 0, xid: 13}\n", 4, 5, "t_ms", "required key missing"},
    {HEAD "script:\n  - {t_ms: -1, gpu: 0, xid: 13}\n", 4, 12, "t_ms", "out of range"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 1, xid: 13}\n", 4, 20, "gpu", "GPU 1 does not exist"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, xid: 0}\n", 4, 28, "xid", "start at 1"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, ecc_dbe: 0}\n", 4, 32, "ecc_dbe", "at least 1"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, lost: maybe}\n", 4, 29, "lost", "not true or false"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, set: {power_w: abc}}\n", 4, 38, "power_w",
     "not a number of watts"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, set: {power_w: 1e9}}\n", 4, 38, "power_w",
     "out of range"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, set: {ecc_dbe_vol_total: 1}}\n", 4, 48,
     "ecc_dbe_vol_total", "use an ecc_dbe entry"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, set: {fb_used_mib: 200}}\n", 4, 28, "fb_used_mib",
     "exceeds memory_mib"},
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, set: {tempc: 3}}\n", 4, 29, "tempc",
     "unknown key in set"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    processes: [{pid: 7, mem_mib: 101}]\n",
     6, 35, "mem_mib", "exceeds the GPU's memory_mib"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    processes: [{pid: 7}, {pid: 7}]\n",
     6, 33, "pid", "pid 7 repeated"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    processes: [{mem_mib: 1}]\n",
     6, 17, "pid", "required key missing"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    processes: [{pid: 0}]\n",
     6, 23, "pid", "pid must be positive"},
    {"gpus:\n  - index: 0\n    uuid: GPU-a\n    model: M\n    memory_mib: 100\n"
     "    processes: [{pid: 3, sm_util_pct: 101}]\n",
     6, 39, "sm_util_pct", "out of range 0..100"},
    {HEAD "cuda_driver_version: 12.x\n", 3, 22, "cuda_driver_version", "not a CUDA version"},
    {HEAD "cuda_driver_version: 999\n", 3, 22, "cuda_driver_version", "not a CUDA version"},
    {HEAD "---\ngpus: []\n", 3, 1, "", "a second YAML document; a fake node is one"},
    {"? [a]\n: 1\n", 1, 3, "the top level", "keys of the top level must be scalars"},
    /* Scripted MIG layouts: the value of "mig:" starts at column 28 of the entry's line
     * ("  - {" 5, "t_ms: 1, " 9, "gpu: 0, " 8, "mig: " 5 characters before it); a following
     * "{enabled: true}" takes 28..42, ", xid: " 43..49, so the xid's value is at 50. */
    {HEAD "script:\n  - {t_ms: 1, gpu: 0, mig: {enabled: true}}\n", 4, 28, "mig",
     "GPU 0 is not MIG-capable"},
    {HEAD_MIG "script:\n  - {t_ms: 1, gpu: 0, mig: {capable: false}}\n", 4, 28, "capable",
     "cannot make a GPU MIG-incapable"},
    {HEAD_MIG "script:\n  - {t_ms: 1, gpu: 0, mig: {enabled: false, instances: [" MIG_X "]}}\n", 4,
     56, "instances", "while MIG is disabled"},
    {HEAD_MIG "  - {index: 1, uuid: GPU-b, model: M, memory_mib: 100, mig: {enabled: false}}\n"
              "script:\n  - {t_ms: 1, gpu: 1, mig: {enabled: true, instances: [" MIG_X "]}}\n",
     5, 28, "uuid", "MIG UUID MIG-x is GPU 0's"},
    {HEAD_MIG "script:\n  - {t_ms: 1, gpu: 0, mig: {enabled: true, instances: [" MIG_X ", " MIG_X
              "]}}\n",
     4, 28, "uuid", "MIG UUID MIG-x repeated"},
    {HEAD_MIG "script:\n  - {t_ms: 1, gpu: 0, mig: {enabled: true}, xid: 3}\n", 4, 50, "script",
     "exactly one of set, xid, ecc_dbe, lost, mig"},
    /* MIG instances' own fields (issue 9): ids, memory used and GPM utilisation; a check
     * across fields points at the instance's mapping. Columns are 1-based offsets in line 2. */
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: 300}"), 2, 152,
     "gpu_instance_id", "out of range 0..255"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: x}"), 2, 152,
     "gpu_instance_id", "is not an integer"},
    {MIG_LINE(
         "{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: 1, gpm_util_pct: 101}"),
     2, 169, "gpm_util_pct", "out of range 0..100"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: 1, "
              "compute_instance_id: -1}"),
     2, 176, "compute_instance_id", "out of range 0..255"},
    {MIG_LINE(
         "{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: 1, memory_used_mib: 6}"),
     2, 89, "memory_used_mib", "memory_used_mib 6 exceeds the instance's memory_mib 5"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, memory_used_mib: 1}"), 2, 89,
     "memory_used_mib", "need its gpu_instance_id"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpm_util_pct: 1}"), 2, 89,
     "gpm_util_pct", "need its gpu_instance_id"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, compute_instance_id: 0}"), 2, 89,
     "compute_instance_id", "without gpu_instance_id"},
    {MIG_LINE("{profile: 1g.5gb, uuid: MIG-x, memory_mib: 5, gpu_instance_id: 3}, {profile: "
              "1g.5gb, uuid: MIG-y, memory_mib: 5, gpu_instance_id: 3}"),
     2, 156, "gpu_instance_id", "gpu_instance_id 3 repeated"},
};

static void test_fake_bad_input_names_line_column_and_key(void **state)
{
    (void)state;
    struct tclock c = {0};
    struct gs_clock k = make_clock(&c);
    int failures = 0;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *bc = &bad_cases[i];
        if (bc->field == NULL)
            continue;
        struct gs_gpu_backend *b = (struct gs_gpu_backend *)0x1;
        struct gs_diag d;
        int rc = gs_gpu_parse_fake(bc->yaml, strlen(bc->yaml), "t.yaml", &k, &b, &d);
        char text[600];
        gs_diag_format(&d, text, sizeof text);
        bool ok = rc == GS_EPARSE && b == NULL && strcmp(d.file, "t.yaml") == 0 &&
                  d.line == bc->line && d.column == bc->column && strcmp(d.field, bc->field) == 0 &&
                  strstr(d.msg, bc->msg_part) != NULL;
        if (!ok) {
            print_message("case %zu:\n%s\ngot:  rc %d %s\nwant: %llu:%u field '%s' ~ '%s'\n", i,
                          bc->yaml, rc, text, (unsigned long long)bc->line, bc->column, bc->field,
                          bc->msg_part);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* One T4 time-sliced by three pods (issue 9's example): the scripted processes come back as
 * written, in file order; a MIG process keeps its instance; "unsupported: [processes]" and a
 * lost GPU answer as NVML would. */
static void test_fake_processes_are_reported_as_scripted(void **state)
{
    (void)state;
    struct tclock c = {0};
    struct gs_clock k = make_clock(&c);
    struct gs_gpu_backend *b = NULL;
    const char *y = "gpus:\n"
                    "  - {index: 0, uuid: GPU-t4, model: Tesla T4, memory_mib: 15360,\n"
                    "     sample: {utilization_pct: 71, fb_used_mib: 7000},\n"
                    "     processes: [{pid: 4101, mem_mib: 3000, sm_util_pct: 30},\n"
                    "                 {pid: 4102, mem_mib: 2500, sm_util_pct: 25},\n"
                    "                 {pid: 4103, mem_mib: 1500, sm_util_pct: 16}]}\n"
                    "  - {index: 1, uuid: GPU-b, model: M, memory_mib: 100,\n"
                    "     unsupported: [processes]}\n"
                    "  - {index: 2, uuid: GPU-c, model: M, memory_mib: 100,\n"
                    "     processes: [{pid: 9, gpu_instance_id: 5}]}\n"
                    "script:\n  - {t_ms: 10, gpu: 2, lost: true}\n";
    struct gs_diag d;
    int rc = gs_gpu_parse_fake(y, strlen(y), "t.yaml", &k, &b, &d);
    if (rc != GS_OK) {
        char text[600];
        gs_diag_format(&d, text, sizeof text);
        print_message("%s\n", text);
    }
    assert_int_equal(rc, GS_OK);

    struct gs_gpu_proc p[GS_GPU_PROC_MAX];
    uint32_t n = 99;
    assert_int_equal(gs_gpu_processes(b, 0, p, GS_GPU_PROC_MAX, &n), GS_OK);
    assert_int_equal(n, 3);
    const uint32_t pid[3] = {4101, 4102, 4103}, sm[3] = {30, 25, 16};
    const uint64_t mem[3] = {3000, 2500, 1500};
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(p[i].pid, pid[i]);
        assert_true(p[i].has_mem && p[i].has_sm_util && !p[i].has_gi_id);
        assert_int_equal(p[i].mem_mib, mem[i]);
        assert_int_equal(p[i].sm_util_pct, sm[i]);
    }
    /* A smaller buffer cuts the list at cap. */
    assert_int_equal(gs_gpu_processes(b, 0, p, 2, &n), GS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(p[1].pid, 4102);

    assert_int_equal(gs_gpu_processes(b, 1, p, GS_GPU_PROC_MAX, &n), GS_ENOENT);
    assert_int_equal(n, 0);
    assert_non_null(strstr(gs_gpu_last_error(b), "cannot list processes"));

    assert_int_equal(gs_gpu_processes(b, 2, p, GS_GPU_PROC_MAX, &n), GS_OK);
    assert_int_equal(n, 1);
    assert_true(p[0].has_gi_id && !p[0].has_mem && !p[0].has_sm_util);
    assert_int_equal(p[0].gi_id, 5);
    c.now_ms = 10;
    assert_int_equal(gs_gpu_processes(b, 2, p, GS_GPU_PROC_MAX, &n), GS_EIO);

    assert_int_equal(gs_gpu_processes(b, 3, p, GS_GPU_PROC_MAX, &n), GS_ERANGE);
    assert_int_equal(gs_gpu_processes(b, 0, p, 0, &n), GS_EINVAL);
    assert_int_equal(gs_gpu_processes(NULL, 0, p, 1, &n), GS_EINVAL);
    gs_gpu_close(b);
}

static void test_fake_minimal_file_is_accepted(void **state)
{
    (void)state;
    struct tclock c = {0};
    struct gs_clock k = make_clock(&c);
    struct gs_gpu_backend *b = NULL;
    const char *y = HEAD "# a comment\n";
    assert_int_equal(gs_gpu_parse_fake(y, strlen(y), "t.yaml", &k, &b, NULL), GS_OK);
    struct gs_gpu_system sys;
    assert_int_equal(gs_gpu_system(b, &sys), GS_OK);
    assert_string_equal(sys.driver_version, "");
    assert_int_equal(sys.cuda_driver_version, 0);
    gs_gpu_close(b);

    const char *none = "gpus: []\n";
    assert_int_equal(gs_gpu_parse_fake(none, strlen(none), "t.yaml", &k, &b, NULL), GS_OK);
    uint32_t n = 9;
    assert_int_equal(gs_gpu_count(b, &n), GS_OK);
    assert_int_equal(n, 0);
    gs_gpu_close(b);
}

static void test_fake_file_errors(void **state)
{
    (void)state;
    struct tclock c = {0};
    struct gs_clock k = make_clock(&c);
    struct gs_gpu_backend *b = (struct gs_gpu_backend *)0x1;
    struct gs_diag d;
    assert_int_equal(gs_gpu_open_fake("/nonexistent/fake.yaml", &k, &b, &d), GS_EIO);
    assert_null(b);
    assert_string_equal(d.file, "/nonexistent/fake.yaml");
    assert_non_null(strstr(d.msg, "cannot open"));

    assert_int_equal(
        gs_gpu_open_fake(data_path("tests/data/fake/bad_unknown_key.yaml"), &k, &b, &d), GS_EPARSE);
    char text[600];
    gs_diag_format(&d, text, sizeof text);
    assert_non_null(strstr(text, "tests/data/fake/bad_unknown_key.yaml:7:5: field 'numa_nodes': "
                                 "unknown key in a GPU"));
    assert_int_equal(gs_gpu_open_fake(NULL, &k, &b, &d), GS_EINVAL);
    gs_gpu_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_reads_every_field_and_orders_gpus_by_index),
        cmocka_unit_test(test_fake_initial_sample_and_unsupported_fields),
        cmocka_unit_test(test_fake_script_changes_values_when_due),
        cmocka_unit_test(test_fake_wait_event_sleeps_until_the_next_scripted_event),
        cmocka_unit_test(test_fake_wait_event_times_out_before_a_later_event),
        cmocka_unit_test(test_fake_lost_gpu_fails_sample_until_found),
        cmocka_unit_test(test_fake_script_repartitions_mig),
        cmocka_unit_test(test_fake_mig_instances_have_ids_and_own_values),
        cmocka_unit_test(test_fake_deep_nesting_stops_at_the_limit),
        cmocka_unit_test(test_fake_example_node_of_the_deploy_directory_loads),
        cmocka_unit_test(test_fake_bad_input_names_line_column_and_key),
        cmocka_unit_test(test_fake_processes_are_reported_as_scripted),
        cmocka_unit_test(test_fake_minimal_file_is_accepted),
        cmocka_unit_test(test_fake_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
