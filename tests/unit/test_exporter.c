/*
 * Tests of the Prometheus exporter (include/gpusched/exporter.h): the bounded buffer, label
 * escaping, the exact text of a scrape (HELP/TYPE lines, label order, number formats), one
 * series per pod on a shared GPU with the pod's own measured value (issue 9: the T4 whose
 * three pods add up to the device, sums scaled to the device, no pod series without
 * per-process values or for device-only families) and every way a device id can name a GPU, fields
 * left out when unread, the size limit, every series of an 8-GPU, 32-pod node, and the HTTP server
 * (/metrics, /healthz, 404, 405) over a real loopback socket.
 */
#define _POSIX_C_SOURCE 200809L /* POSIX sockets */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpusched/err.h"
#include "gpusched/exporter.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static void fill_gpu(struct gs_exporter_gpu *g, uint32_t index)
{
    memset(g, 0, sizeof *g);
    g->info.index = index;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-0000000%u", (unsigned)index);
    snprintf(g->info.model, sizeof g->info.model, "NVIDIA H200");
    g->info.mem_total_mib = 143771;
    g->have_sample = true;
    g->sample.valid = GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB | GS_GPU_HAVE_TEMP | GS_GPU_HAVE_POWER |
                      GS_GPU_HAVE_SM_CLOCK | GS_GPU_HAVE_MEM_CLOCK | GS_GPU_HAVE_ECC_DBE |
                      GS_GPU_HAVE_XID;
    g->sample.util_pct = 90 + index;
    g->sample.fb_used_mib = 1000;
    g->sample.fb_free_mib = 142771;
    g->sample.temp_c = 50;
    g->sample.power_mw = 652500;
    g->sample.sm_clock_mhz = 1980;
    g->sample.mem_clock_mhz = 2619;
}

static void fill_attr(struct gs_exporter_attr *a, const char *id, const char *pod, const char *ns,
                      const char *ctr)
{
    memset(a, 0, sizeof *a);
    snprintf(a->device_id, sizeof a->device_id, "%s", id);
    snprintf(a->pod, sizeof a->pod, "%s", pod);
    snprintf(a->namespace_name, sizeof a->namespace_name, "%s", ns);
    snprintf(a->container, sizeof a->container, "%s", ctr);
}

/* A per-pod value; pod "" leaves it to be named by its UID alone (what the agent knows). */
static void fill_podval(struct gs_exporter_podval *v, uint32_t gpu, const char *pod, const char *ns,
                        const char *ctr, const char *uid, uint32_t util_pct, uint64_t mem_mib)
{
    memset(v, 0, sizeof *v);
    v->gpu = gpu;
    snprintf(v->pod, sizeof v->pod, "%s", pod);
    snprintf(v->namespace_name, sizeof v->namespace_name, "%s", ns);
    snprintf(v->container, sizeof v->container, "%s", ctr);
    snprintf(v->pod_uid, sizeof v->pod_uid, "%s", uid);
    v->util_pct = util_pct;
    v->has_util = true;
    v->mem_mib = mem_mib;
    v->has_mem = true;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ---- buffer and escaping ---------------------------------------------------------------- */

static void test_textbuf_grows_up_to_its_maximum_and_no_further(void **state)
{
    (void)state;
    struct gs_textbuf b;
    gs_textbuf_init(&b, 10);
    assert_null(b.data);
    assert_int_equal(gs_textbuf_append(&b, "hello", 5), GS_OK);
    assert_int_equal(gs_textbuf_append(&b, "world", 5), GS_OK);
    assert_string_equal(b.data, "helloworld");
    assert_int_equal(gs_textbuf_append(&b, "!", 1), GS_ELIMIT);
    assert_int_equal(b.len, 10); /* nothing appended */
    char *before = b.data;
    gs_textbuf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_ptr_equal(b.data, before); /* allocation kept */
    assert_string_equal(b.data, "");
    gs_textbuf_fini(&b);
    assert_null(b.data);
    gs_textbuf_fini(NULL);
}

static void test_label_values_are_escaped(void **state)
{
    (void)state;
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1024);
    assert_int_equal(gs_exporter_escape_label(&b, "a\"b\\c\nd"), GS_OK);
    assert_string_equal(b.data, "a\\\"b\\\\c\\nd");
    gs_textbuf_reset(&b);
    assert_int_equal(gs_exporter_escape_label(&b, "plain"), GS_OK);
    assert_string_equal(b.data, "plain");
    gs_textbuf_fini(&b);
}

/* ---- rendering ---------------------------------------------------------------------------- */

static void test_scrape_of_one_gpu_is_exactly_the_dcgm_text(void **state)
{
    (void)state;
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    g.sample.last_xid = 79;
    g.sample.ecc_dbe_vol_total = 2;
    g.sample.temp_c = -5;
    g.sample.power_mw = 70025;
    snprintf(g.info.model, sizeof g.info.model, "NVIDIA \"H200\"");
    g.have_health = true;
    g.health = GS_HEALTH_UNHEALTHY;
    g.health_reason = GS_HEALTH_REASON_XID;
    g.needs_reset = true;
    g.counters.to_unhealthy = 1;
    g.counters.n_xid = 2;
    g.counters.xid[0].xid = 13;
    g.counters.xid[0].count = 4;
    g.counters.xid[1].xid = 79;
    g.counters.xid[1].count = 1;
    struct gs_exporter_snapshot s = {.n_gpus = 1, .gpus = &g};
    snprintf(s.hostname, sizeof s.hostname, "node-1");

    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
#define L                                                                                          \
    "{gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\",modelName=\"NVIDIA \\\"H200\\\"\","       \
    "Hostname=\"node-1\"}"
    const char *want =
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        "DCGM_FI_DEV_GPU_UTIL" L " 90\n"
        "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        "DCGM_FI_DEV_FB_USED" L " 1000\n"
        "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
        "DCGM_FI_DEV_FB_FREE" L " 142771\n"
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        "DCGM_FI_DEV_GPU_TEMP" L " -5\n"
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        "DCGM_FI_DEV_POWER_USAGE" L " 70.025\n"
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
        "DCGM_FI_DEV_SM_CLOCK" L " 1980\n"
        "# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).\n"
        "# TYPE DCGM_FI_DEV_MEM_CLOCK gauge\n"
        "DCGM_FI_DEV_MEM_CLOCK" L " 2619\n"
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        "DCGM_FI_DEV_XID_ERRORS" L " 79\n"
        "# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.\n"
        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" L " 2\n"
        "# HELP gpusched_gpu_health 1 when the GPU is Healthy, 0 when Unhealthy (the state "
        "kubelet is told); reason: none, xid, ecc_dbe or lost.\n"
        "# TYPE gpusched_gpu_health gauge\n"
        "gpusched_gpu_health{gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\","
        "modelName=\"NVIDIA \\\"H200\\\"\",Hostname=\"node-1\",reason=\"xid\"} 0\n"
        "# HELP gpusched_gpu_reset_required 1 while the GPU is Unhealthy until it is seen reset "
        "or an operator clears it.\n"
        "# TYPE gpusched_gpu_reset_required gauge\n"
        "gpusched_gpu_reset_required" L " 1\n"
        "# HELP gpusched_gpu_xid_total XID errors seen on the GPU, by XID code, ignored "
        "(application) XIDs included.\n"
        "# TYPE gpusched_gpu_xid_total counter\n"
        "gpusched_gpu_xid_total{gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\","
        "modelName=\"NVIDIA \\\"H200\\\"\",Hostname=\"node-1\",xid=\"13\"} 4\n"
        "gpusched_gpu_xid_total{gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\","
        "modelName=\"NVIDIA \\\"H200\\\"\",Hostname=\"node-1\",xid=\"79\"} 1\n"
        "# HELP gpusched_gpu_health_transitions_total Health transitions of the GPU, by the "
        "state entered.\n"
        "# TYPE gpusched_gpu_health_transitions_total counter\n"
        "gpusched_gpu_health_transitions_total{gpu=\"0\",UUID=\"GPU-00000000\","
        "device=\"nvidia0\",modelName=\"NVIDIA \\\"H200\\\"\",Hostname=\"node-1\","
        "to=\"unhealthy\"} 1\n"
        "gpusched_gpu_health_transitions_total{gpu=\"0\",UUID=\"GPU-00000000\","
        "device=\"nvidia0\",modelName=\"NVIDIA \\\"H200\\\"\",Hostname=\"node-1\","
        "to=\"healthy\"} 0\n";
#undef L
    if (strcmp(b.data, want) != 0)
        print_message("got:\n%s\n", b.data);
    assert_string_equal(b.data, want);
    gs_textbuf_fini(&b);
}

/* Attribution rows joined by pod name to measured values: each pod series carries the pod's
 * own value (issue 9), with its replica and MIG labels; the device series keep theirs. */
static void test_shared_gpu_gets_one_series_per_pod(void **state)
{
    (void)state;
    struct gs_exporter_gpu g[3];
    for (uint32_t i = 0; i < 3; i++) {
        fill_gpu(&g[i], i);
        g[i].have_procs = true;
    }
    g[2].info.mig_enabled = true;
    g[2].info.mig_count = 2;
    snprintf(g[2].info.mig[0].uuid, sizeof g[2].info.mig[0].uuid, "MIG-aaaa");
    snprintf(g[2].info.mig[0].profile, sizeof g[2].info.mig[0].profile, "3g.71gb");
    snprintf(g[2].info.mig[1].uuid, sizeof g[2].info.mig[1].uuid, "MIG-bbbb");
    snprintf(g[2].info.mig[1].profile, sizeof g[2].info.mig[1].profile, "1g.18gb");
    g[2].info.mig[1].has_gi_id = true; /* dcgm-exporter's GPU_I_ID where NVML told it */
    g[2].info.mig[1].gi_id = 9;
    /* Instance 9's own values (GPM utilisation 25 %, 120 MiB used): tiny's 20 % and 100 MiB
     * stay within them, so they are shown as measured. */
    g[2].n_mig = 1;
    g[2].mig[0] = (struct gs_gpu_mig_sample){
        .gi_id = 9, .util_pct = 25, .fb_used_mib = 120, .valid = GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB};

    struct gs_exporter_attr a[8];
    fill_attr(&a[0], "GPU-00000000::0", "train-a", "ml", "main");
    fill_attr(&a[1], "GPU-00000000::1", "train-b", "ml", "main");
    fill_attr(&a[2], "GPU-00000000::2", "train-a", "ml", "main"); /* repeat: no new series */
    fill_attr(&a[3], "nvidia1", "infer", "web", "server");
    fill_attr(&a[4], "MIG-bbbb", "tiny", "ml", "c");
    fill_attr(&a[5], "MIG-aaaa::3", "mid", "ml", "c");
    fill_attr(&a[6], "GPU-00000000x", "nobody", "ml", "c"); /* matches nothing */
    fill_attr(&a[7], "GPU-0000000", "nobody", "ml", "c");   /* a prefix is not a match */
    /* What each pod's processes use. train-a has two processes on GPU 0 (30 + 20 %, 250 +
     * 150 MiB); on GPU 0 the pods add up to 50 + 30 = 80 % of the device's 90 %, memory
     * 400 + 300 = 700 of 1000 MiB, so nothing is scaled. tiny's processes run in GPU
     * instance 9 (the 1g.18gb device), mid's carry no instance id. */
    struct gs_exporter_podval v[6];
    fill_podval(&v[0], 0, "train-a", "ml", "main", "uid-a", 30, 250);
    fill_podval(&v[1], 0, "train-b", "ml", "main", "uid-b", 30, 300);
    fill_podval(&v[2], 0, "train-a", "ml", "", "uid-a", 20, 150); /* container unknown */
    fill_podval(&v[3], 1, "infer", "web", "server", "uid-i", 60, 500);
    fill_podval(&v[4], 2, "tiny", "ml", "c", "uid-t", 20, 100);
    v[4].has_gi_id = true;
    v[4].gi_id = 9;
    fill_podval(&v[5], 2, "mid", "ml", "c", "uid-m", 40, 200);
    struct gs_exporter_snapshot s = {
        .n_gpus = 3, .gpus = g, .n_attr = 8, .attr = a, .n_podval = 6, .podval = v};
    snprintf(s.hostname, sizeof s.hostname, "h");

    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    const char *text = b.data;
    /* Five pod series, the three GPUs' own series (issue 9: the device series stays) and
     * instance 9's own (25 %, 120 MiB). */
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_GPU_UTIL{"), 9);
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_FB_USED{"), 9);
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",UUID=\"GPU-00000002\","
                                 "device=\"nvidia2\",modelName=\"NVIDIA H200\",Hostname=\"h\","
                                 "GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.18gb\"} 25\n"));
    assert_non_null(strstr(text, "DCGM_FI_DEV_FB_USED{gpu=\"2\",UUID=\"GPU-00000002\","
                                 "device=\"nvidia2\",modelName=\"NVIDIA H200\",Hostname=\"h\","
                                 "GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.18gb\"} 120\n"));
    /* Device-only families: the three devices, no pod. */
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_POWER_USAGE{"), 3);
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_GPU_TEMP{"), 3);
    /* Every value joined a row (no series without a pod name); each keeps its container ID. */
    assert_int_equal(count_lines_with(text, "container_id=\"\""),
                     count_lines_with(text, "pod_uid=\""));
    assert_int_equal(count_lines_with(text, "pod_uid=\""), 10);
    /* train-a holds replicas 0 and 2: one series, both replicas named. */
    assert_non_null(strstr(
        text,
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000\","
        "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"h\","
        "container=\"main\",namespace=\"ml\",pod=\"train-a\",pod_uid=\"uid-a\",container_id=\"\","
        "replica=\"0,2\"} 50\n"));
    assert_non_null(strstr(
        text,
        "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-00000000\","
        "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"h\","
        "container=\"main\",namespace=\"ml\",pod=\"train-a\",pod_uid=\"uid-a\",container_id=\"\","
        "replica=\"0,2\"} 400\n"));
    assert_non_null(strstr(
        text,
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000\","
        "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"h\","
        "container=\"main\",namespace=\"ml\",pod=\"train-b\",pod_uid=\"uid-b\",container_id=\"\","
        "replica=\"1\"} 30\n"));
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-00000001\","
                                 "device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"h\","
                                 "container=\"server\",namespace=\"web\",pod=\"infer\",pod_uid="
                                 "\"uid-i\",container_id=\"\"} 60\n"));
    assert_non_null(
        strstr(text, "device=\"nvidia2\",modelName=\"NVIDIA H200\",Hostname=\"h\","
                     "GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.18gb\",container=\"c\","
                     "namespace=\"ml\",pod=\"tiny\",pod_uid=\"uid-t\",container_id=\"\"} 20\n"));
    assert_non_null(strstr(text,
                           "GPU_I_PROFILE=\"3g.71gb\",container=\"c\",namespace=\"ml\","
                           "pod=\"mid\",pod_uid=\"uid-m\",container_id=\"\",replica=\"3\"} 40\n"));
    assert_null(strstr(text, "nobody"));
    /* Only the two families a pod can be charged with, and its info series. */
    assert_int_equal(count_lines_with(text, "pod=\"train-a\""), 2 + 1);
    assert_int_equal(count_lines_with(text, "gpusched_gpu_pod_info{"), 5);
    /* Every GPU keeps its own series, without pod labels. */
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000\","
                                 "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"h\"}"
                                 " 90\n"));
    assert_non_null(strstr(text, "Hostname=\"h\"} 92\n"));
    /* Health metrics are absent when no GPU carries health. */
    assert_null(strstr(text, "gpusched_gpu_health"));
    gs_textbuf_fini(&b);
}

/*
 * Issue 9's node: one T4 (15360 MiB) time-sliced by three pods, whose processes use 30, 25
 * and 16 % of the SMs and 3000, 2500 and 1500 MiB; the device reads 71 % and 7000 MiB used,
 * 60 W. The agent knows the pods only by the UIDs of their cgroups, so the series carry
 * pod_uid and container_id; the attribution rows (names, no UID) join none of them and so
 * add no series. Σ util = 30 + 25 + 16 = 71 = the device's; Σ memory = 7000 = FB used.
 */
static void test_time_sliced_t4_pod_series_add_up_to_the_device(void **state)
{
    (void)state;
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    snprintf(g.info.model, sizeof g.info.model, "Tesla T4");
    g.info.mem_total_mib = 15360;
    g.sample.util_pct = 71;
    g.sample.fb_used_mib = 7000;
    g.sample.fb_free_mib = 8360;
    g.sample.power_mw = 60000;
    g.have_procs = true;
    struct gs_exporter_attr a[3];
    fill_attr(&a[0], "GPU-00000000::0", "infer-a", "web", "server");
    fill_attr(&a[1], "GPU-00000000::1", "infer-b", "web", "server");
    fill_attr(&a[2], "GPU-00000000::2", "infer-c", "web", "server");
    struct gs_exporter_podval v[3];
    fill_podval(&v[0], 0, "", "", "", "uid-a", 30, 3000);
    fill_podval(&v[1], 0, "", "", "", "uid-b", 25, 2500);
    fill_podval(&v[2], 0, "", "", "", "uid-c", 16, 1500);
    snprintf(v[0].container_id, sizeof v[0].container_id, "c0ffee");
    struct gs_exporter_snapshot s = {
        .n_gpus = 1, .gpus = &g, .n_attr = 3, .attr = a, .n_podval = 3, .podval = v};
    snprintf(s.hostname, sizeof s.hostname, "t4");
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    const char *text = b.data;
#define T4                                                                                         \
    "gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\",modelName=\"Tesla T4\",Hostname=\"t4\""
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{" T4 "} 71\n"));
    assert_non_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{" T4
                                 ",pod_uid=\"uid-a\",container_id=\"c0ffee\"} 30\n"));
    assert_non_null(
        strstr(text, "DCGM_FI_DEV_GPU_UTIL{" T4 ",pod_uid=\"uid-b\",container_id=\"\"} 25\n"));
    assert_non_null(
        strstr(text, "DCGM_FI_DEV_GPU_UTIL{" T4 ",pod_uid=\"uid-c\",container_id=\"\"} 16\n"));
    assert_non_null(strstr(text, "DCGM_FI_DEV_FB_USED{" T4 "} 7000\n"));
    assert_non_null(strstr(text, "DCGM_FI_DEV_FB_USED{" T4
                                 ",pod_uid=\"uid-a\",container_id=\"c0ffee\"} 3000\n"));
    assert_non_null(
        strstr(text, "DCGM_FI_DEV_FB_USED{" T4 ",pod_uid=\"uid-b\",container_id=\"\"} 2500\n"));
    assert_non_null(
        strstr(text, "DCGM_FI_DEV_FB_USED{" T4 ",pod_uid=\"uid-c\",container_id=\"\"} 1500\n"));
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_GPU_UTIL{"), 1 + 3);
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_FB_USED{"), 1 + 3);
    /* 60 W is the device's; no pod draws it (before issue 9 each of three pods showed 60). */
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_POWER_USAGE{"), 1);
    assert_non_null(strstr(text, "DCGM_FI_DEV_POWER_USAGE{" T4 "} 60\n"));
    assert_int_equal(count_lines_with(text, "DCGM_FI_DEV_FB_FREE{"), 1);
    /* Rows without a value: no DCGM series, one info series each, naming the pod. */
    assert_null(strstr(text, "DCGM_FI_DEV_GPU_UTIL{" T4 ",container"));
    assert_int_equal(count_lines_with(text, "gpusched_gpu_pod_info{"), 3);
    assert_non_null(strstr(text, "gpusched_gpu_pod_info{" T4 ",container=\"server\","
                                 "namespace=\"web\",pod=\"infer-b\",replica=\"1\"} 1\n"));
#undef T4
    gs_textbuf_fini(&b);
}

/* Raw per-process sums above the device's (NVML's windows differ) are scaled to it. */
static void test_pod_sums_above_the_device_are_scaled_down(void **state)
{
    (void)state;
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    g.sample.util_pct = 80;
    g.sample.fb_used_mib = 6000;
    g.have_procs = true;
    struct gs_exporter_podval v[2];
    /* 60 + 50 = 110 % > 80 + 5: 60 * 80 / 110 = 43.6 -> 43, 50 * 80 / 110 = 36.4 -> 36
     * (Σ 79 <= 80). 5000 + 4000 = 9000 MiB > 6000: 5000 * 6000 / 9000 = 3333.3 -> 3333,
     * 4000 * 6000 / 9000 = 2666.7 -> 2666 (Σ 5999 <= 6000). */
    fill_podval(&v[0], 0, "", "", "", "ua", 60, 5000);
    fill_podval(&v[1], 0, "", "", "", "ub", 50, 4000);
    struct gs_exporter_snapshot s = {.n_gpus = 1, .gpus = &g, .n_podval = 2, .podval = v};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_non_null(strstr(b.data, "pod_uid=\"ua\",container_id=\"\"} 43\n"));
    assert_non_null(strstr(b.data, "pod_uid=\"ub\",container_id=\"\"} 36\n"));
    assert_non_null(strstr(b.data, "pod_uid=\"ua\",container_id=\"\"} 3333\n"));
    assert_non_null(strstr(b.data, "pod_uid=\"ub\",container_id=\"\"} 2666\n"));

    /* 40 + 45 = 85 <= 80 + 5: within the tolerance, kept as measured. */
    v[0].util_pct = 40;
    v[1].util_pct = 45;
    gs_textbuf_reset(&b);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_non_null(strstr(b.data, "pod_uid=\"ua\",container_id=\"\"} 40\n"));
    assert_non_null(strstr(b.data, "pod_uid=\"ub\",container_id=\"\"} 45\n"));
    gs_textbuf_fini(&b);
}

/* A GPU whose processes could not be read has no pod series at all, never copied values; a
 * MIG process's series names its GPU instance. */
static void test_no_process_values_no_pod_series_and_mig_instances(void **state)
{
    (void)state;
    struct gs_exporter_gpu g[2];
    fill_gpu(&g[0], 0);
    fill_gpu(&g[1], 1);
    g[1].have_procs = true;
    g[1].info.mig_enabled = true;
    g[1].info.mig_count = 1;
    snprintf(g[1].info.mig[0].uuid, sizeof g[1].info.mig[0].uuid, "MIG-cccc");
    snprintf(g[1].info.mig[0].profile, sizeof g[1].info.mig[0].profile, "1g.18gb");
    g[1].info.mig[0].has_gi_id = true;
    g[1].info.mig[0].gi_id = 9;
    struct gs_exporter_attr a;
    fill_attr(&a, "GPU-00000000::0", "p", "n", "c");
    struct gs_exporter_podval v[2];
    fill_podval(&v[0], 0, "p", "n", "c", "u0", 10, 10); /* GPU 0 not read: ignored */
    fill_podval(&v[1], 1, "", "", "", "u1", 12, 700);
    v[1].has_gi_id = true;
    v[1].gi_id = 9;
    struct gs_exporter_snapshot s = {
        .n_gpus = 2, .gpus = g, .n_attr = 1, .attr = &a, .n_podval = 2, .podval = v};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000\","
                               "device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"\","
                               "container"));
    assert_int_equal(count_lines_with(b.data, "pod=\"p\""), 1); /* the info series only */
    assert_null(strstr(b.data, "u0"));
    /* The two devices only: instance 9 tells no utilisation of its own (no GPM), so u1 has
     * no utilisation series rather than the GPU's; its memory is bounded by the GPU's. */
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 2);
    assert_non_null(strstr(b.data, "DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-00000001\","
                                   "device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"\","
                                   "GPU_I_ID=\"9\",GPU_I_PROFILE=\"1g.18gb\",pod_uid=\"u1\","
                                   "container_id=\"\"} 700\n"));
    s.n_podval = GS_EXPORTER_PODVAL_MAX + 1;
    assert_int_equal(gs_exporter_render(&s, &b), GS_EINVAL);
    s.n_podval = 1;
    s.podval = NULL;
    assert_int_equal(gs_exporter_render(&s, &b), GS_EINVAL);
    gs_textbuf_fini(&b);
}

static void set_mig(struct gs_gpu_mig *m, const char *uuid, const char *profile, uint32_t gi_id)
{
    memset(m, 0, sizeof *m);
    snprintf(m->uuid, sizeof m->uuid, "%s", uuid);
    snprintf(m->profile, sizeof m->profile, "%s", profile);
    m->has_gi_id = true;
    m->gi_id = gi_id;
}

/*
 * MIG pods get their instance's values, never the whole GPU's (dcgm-exporter #587). One H200
 * at 90 % and 9000 MiB used, three instances with their own values:
 *   gi 1 (3g.71gb): GPM 40 %, 5000 MiB. u1 30 % / 3000 MiB and u2 20 % / 2500 MiB add up to
 *       50 % > 40 + 5 and 5500 > 5000 MiB, so both are scaled by the instance's: 30*40/50 = 24,
 *       20*40/50 = 16; 3000*5000/5500 = 2727.3 -> 2727, 2500*5000/5500 = 2272.7 -> 2272.
 *   gi 2 (1g.18gb): 300 MiB, no GPM. u3 (10 %, 200 MiB): no utilisation series; 200 MiB.
 *   gi 3 (1g.18gb): GPM 70 %, 800 MiB. u4, pod web/infer (kubelet's row for MIG-c), reports
 *       no process utilisation (NVML has none per process in MIG mode) and is the instance's
 *       only value: the instance's 70 %; 600 MiB.
 * u5 ran in gi 7, which the GPU does not list: the GPU's scope, 5 % of 90, 100 MiB of the
 * GPU's 3000 + 2500 + 200 + 600 + 100 = 6400 <= 9000: as measured, without MIG labels.
 */
static void test_mig_pods_get_their_instance_values(void **state)
{
    (void)state;
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    g.have_procs = true;
    g.sample.fb_used_mib = 9000;
    g.info.mig_enabled = true;
    g.info.mig_count = 3;
    set_mig(&g.info.mig[0], "MIG-a", "3g.71gb", 1);
    set_mig(&g.info.mig[1], "MIG-b", "1g.18gb", 2);
    set_mig(&g.info.mig[2], "MIG-c", "1g.18gb", 3);
    g.n_mig = 3;
    g.mig[0] = (struct gs_gpu_mig_sample){.gi_id = 1,
                                          .util_pct = 40,
                                          .fb_used_mib = 5000,
                                          .valid = GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB};
    g.mig[1] = (struct gs_gpu_mig_sample){.gi_id = 2, .fb_used_mib = 300, .valid = GS_GPU_HAVE_FB};
    g.mig[2] = (struct gs_gpu_mig_sample){
        .gi_id = 3, .util_pct = 70, .fb_used_mib = 800, .valid = GS_GPU_HAVE_UTIL | GS_GPU_HAVE_FB};
    struct gs_exporter_attr a;
    fill_attr(&a, "MIG-c", "infer", "web", "srv");
    struct gs_exporter_podval v[5];
    const uint32_t gi[5] = {1, 1, 2, 3, 7};
    fill_podval(&v[0], 0, "", "", "", "u1", 30, 3000);
    fill_podval(&v[1], 0, "", "", "", "u2", 20, 2500);
    fill_podval(&v[2], 0, "", "", "", "u3", 10, 200);
    fill_podval(&v[3], 0, "infer", "web", "srv", "u4", 0, 600);
    v[3].has_util = false;
    fill_podval(&v[4], 0, "", "", "", "u5", 5, 100);
    for (int i = 0; i < 5; i++) {
        v[i].has_gi_id = true;
        v[i].gi_id = gi[i];
    }
    struct gs_exporter_snapshot s = {
        .n_gpus = 1, .gpus = &g, .n_attr = 1, .attr = &a, .n_podval = 5, .podval = v};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
#define G0                                                                                         \
    "{gpu=\"0\",UUID=\"GPU-00000000\",device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"\","
#define GI(id, prof) "GPU_I_ID=\"" id "\",GPU_I_PROFILE=\"" prof "\","
    static const char *const want[] = {
        "DCGM_FI_DEV_GPU_UTIL" G0 GI("1", "3g.71gb") "pod_uid=\"u1\",container_id=\"\"} 24\n",
        "DCGM_FI_DEV_GPU_UTIL" G0 GI("1", "3g.71gb") "pod_uid=\"u2\",container_id=\"\"} 16\n",
        "DCGM_FI_DEV_GPU_UTIL" G0 GI(
            "3", "1g.18gb") "container=\"srv\",namespace=\"web\","
                            "pod=\"infer\",pod_uid=\"u4\",container_id=\"\"} 70\n",
        "DCGM_FI_DEV_GPU_UTIL" G0 "pod_uid=\"u5\",container_id=\"\"} 5\n",
        "DCGM_FI_DEV_FB_USED" G0 GI("1", "3g.71gb") "pod_uid=\"u1\",container_id=\"\"} 2727\n",
        "DCGM_FI_DEV_FB_USED" G0 GI("1", "3g.71gb") "pod_uid=\"u2\",container_id=\"\"} 2272\n",
        "DCGM_FI_DEV_FB_USED" G0 GI("2", "1g.18gb") "pod_uid=\"u3\",container_id=\"\"} 200\n",
        "DCGM_FI_DEV_FB_USED" G0 GI(
            "3", "1g.18gb") "container=\"srv\",namespace=\"web\","
                            "pod=\"infer\",pod_uid=\"u4\",container_id=\"\"} 600\n",
        "DCGM_FI_DEV_FB_USED" G0 "pod_uid=\"u5\",container_id=\"\"} 100\n",
        /* Each instance's own series, without pod labels: its GPM utilisation, its memory. */
        "DCGM_FI_DEV_GPU_UTIL" G0 "GPU_I_ID=\"1\",GPU_I_PROFILE=\"3g.71gb\"} 40\n",
        "DCGM_FI_DEV_GPU_UTIL" G0 "GPU_I_ID=\"3\",GPU_I_PROFILE=\"1g.18gb\"} 70\n",
        "DCGM_FI_DEV_FB_USED" G0 "GPU_I_ID=\"1\",GPU_I_PROFILE=\"3g.71gb\"} 5000\n",
        "DCGM_FI_DEV_FB_USED" G0 "GPU_I_ID=\"2\",GPU_I_PROFILE=\"1g.18gb\"} 300\n",
        "DCGM_FI_DEV_FB_USED" G0 "GPU_I_ID=\"3\",GPU_I_PROFILE=\"1g.18gb\"} 800\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (strstr(b.data, want[i]) == NULL)
            fail_msg("missing %s in:\n%s", want[i], b.data);
    /* The device's own series, the instances' (gi 2 has no utilisation) and the pods' above:
     * u3 has no utilisation series. */
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 1 + 2 + 4);
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_FB_USED{"), 1 + 3 + 5);
    assert_int_equal(count_lines_with(b.data, "} 90\n"), 1); /* the GPU's, copied nowhere */

    /* No instance values this period (the backend could not read them): no MIG pod has a
     * utilisation; memory is bounded by the GPU's (6400 <= 9000: as measured). */
    g.n_mig = 0;
    gs_textbuf_reset(&b);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 1 + 1); /* device, u5 */
    assert_non_null(strstr(b.data, "DCGM_FI_DEV_FB_USED" G0 GI(
                                       "1", "3g.71gb") "pod_uid=\"u1\",container_id=\"\"} 3000\n"));
    assert_non_null(strstr(b.data,
                           "DCGM_FI_DEV_FB_USED" G0 GI(
                               "3", "1g.18gb") "container=\"srv\",namespace=\"web\",pod=\"infer\","
                                               "pod_uid=\"u4\",container_id=\"\"} 600\n"));
#undef GI
#undef G0
    gs_textbuf_fini(&b);
}

static void test_device_id_by_index_and_unattributed_gpu(void **state)
{
    (void)state;
    struct gs_exporter_gpu g[2];
    fill_gpu(&g[0], 0);
    fill_gpu(&g[1], 1);
    g[1].have_procs = true;
    struct gs_exporter_attr a;
    fill_attr(&a, "1", "p", "n", "c");
    struct gs_exporter_podval v;
    fill_podval(&v, 1, "p", "n", "c", "u", 40, 10);
    struct gs_exporter_snapshot s = {
        .n_gpus = 2, .gpus = g, .n_attr = 1, .attr = &a, .n_podval = 1, .podval = &v};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_non_null(strstr(
        b.data, "device=\"nvidia1\",modelName=\"NVIDIA H200\",Hostname=\"\","
                "container=\"c\",namespace=\"n\",pod=\"p\",pod_uid=\"u\",container_id=\"\"} 40\n"));
    assert_non_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000\","
                                   "device=\"nvidia0\",modelName=\"NVIDIA H200\","
                                   "Hostname=\"\"} 90\n"));
    gs_textbuf_fini(&b);
}

static void test_unread_fields_and_silent_gpus_are_left_out(void **state)
{
    (void)state;
    struct gs_exporter_gpu g[2];
    fill_gpu(&g[0], 0);
    fill_gpu(&g[1], 1);
    g[0].sample.valid &= ~(uint32_t)(GS_GPU_HAVE_POWER | GS_GPU_HAVE_ECC_DBE);
    g[1].have_sample = false; /* did not answer */
    g[1].have_health = true;
    g[1].health = GS_HEALTH_UNHEALTHY;
    struct gs_exporter_snapshot s = {.n_gpus = 2, .gpus = g};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_null(strstr(b.data, "POWER_USAGE")); /* not even HELP/TYPE */
    assert_null(strstr(b.data, "ECC_DBE_VOL_TOTAL"));
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 1);
    assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\""));
    assert_non_null(strstr(b.data, "gpusched_gpu_health{gpu=\"1\""));
    assert_null(strstr(b.data, "gpusched_gpu_health{gpu=\"0\""));

    struct gs_exporter_snapshot empty = {.n_gpus = 0};
    gs_textbuf_reset(&b);
    assert_int_equal(gs_exporter_render(&empty, &b), GS_OK);
    assert_int_equal(b.len, 0);
    gs_textbuf_fini(&b);
}

static void test_assignment_counters_only_with_a_kubernetes_side(void **state)
{
    (void)state;
    struct gs_exporter_snapshot s = {
        .hostname = "n1", .assign_as_assigned = 3, .assign_mismatch = 1, .assign_fallbacks = 2};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_int_equal(b.len, 0); /* no Kubernetes configuration: not rendered */
    s.have_assign = true;
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_string_equal(
        b.data,
        "# HELP gpusched_assignment_allocations_total Allocate calls of pods with a gpusched "
        "assignment, by whether kubelet allocated the assigned GPUs.\n"
        "# TYPE gpusched_assignment_allocations_total counter\n"
        "gpusched_assignment_allocations_total{Hostname=\"n1\",outcome=\"as_assigned\"} 3\n"
        "gpusched_assignment_allocations_total{Hostname=\"n1\",outcome=\"mismatch\"} 1\n"
        "# HELP gpusched_assignment_preferred_fallbacks_total GetPreferredAllocation answers that "
        "could not propose the assigned GPUs.\n"
        "# TYPE gpusched_assignment_preferred_fallbacks_total counter\n"
        "gpusched_assignment_preferred_fallbacks_total{Hostname=\"n1\"} 2\n");
    gs_textbuf_fini(&b);
}

static void test_render_stops_at_the_size_limit(void **state)
{
    (void)state;
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    struct gs_exporter_snapshot s = {.n_gpus = 1, .gpus = &g};
    struct gs_textbuf b;
    gs_textbuf_init(&b, 300);
    assert_int_equal(gs_exporter_render(&s, &b), GS_ELIMIT);
    assert_true(b.len <= 300);
    gs_textbuf_fini(&b);

    s.n_gpus = GS_GPU_MAX + 1;
    gs_textbuf_init(&b, 300);
    assert_int_equal(gs_exporter_render(&s, &b), GS_EINVAL);
    assert_int_equal(gs_exporter_render(NULL, &b), GS_EINVAL);
    gs_textbuf_fini(&b);
}

/* A full node (8 GPUs, 32 pods) renders every series, also into a buffer reset after use. How
 * long a scrape takes is measured by bench/agent_metrics.py (make bench), not asserted here: a
 * unit test that times itself fails on a busy machine. */
static void test_scrape_of_8_gpus_with_32_pods_renders_every_series(void **state)
{
    (void)state;
    struct gs_exporter_gpu g[8];
    struct gs_exporter_attr a[32];
    struct gs_exporter_podval v[32];
    for (uint32_t i = 0; i < 8; i++) {
        fill_gpu(&g[i], i);
        g[i].have_procs = true;
        g[i].have_health = true;
        g[i].counters.n_xid = 1;
        g[i].counters.xid[0].xid = 13;
        g[i].counters.xid[0].count = 2;
    }
    for (uint32_t p = 0; p < 32; p++) {
        char id[64], pod[64];
        snprintf(id, sizeof id, "GPU-0000000%u::%u", (unsigned)(p % 8), (unsigned)(p / 8));
        snprintf(pod, sizeof pod, "training-job-%u-worker", (unsigned)p);
        fill_attr(&a[p], id, pod, "team-research", "pytorch");
        fill_podval(&v[p], p % 8, pod, "team-research", "pytorch", "u", 20, 100);
    }
    struct gs_exporter_snapshot s = {
        .n_gpus = 8, .gpus = g, .n_attr = 32, .attr = a, .n_podval = 32, .podval = v};
    snprintf(s.hostname, sizeof s.hostname, "gpu-node-017.cluster.example");
    struct gs_textbuf b;
    gs_textbuf_init(&b, GS_EXPORTER_DEFAULT_MAX_BYTES);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    size_t first_len = b.len;
    gs_textbuf_reset(&b);
    assert_int_equal(gs_exporter_render(&s, &b), GS_OK);
    assert_int_equal(b.len, first_len);
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 32 + 8); /* + devices */
    gs_textbuf_fini(&b);
}

/* ---- HTTP ----------------------------------------------------------------------------- */

/* One HTTP/1.1 request over a fresh connection; returns the whole response (malloc'd). */
static char *http(uint16_t port, const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char req[256];
    int n =
        snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                 method, path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

static void test_http_server_serves_metrics_and_healthz(void **state)
{
    (void)state;
    struct gs_exporter *e = NULL;
    assert_int_equal(gs_exporter_new(0, &e), GS_OK);
    uint16_t port = 0;
    assert_int_equal(gs_exporter_start(e, "127.0.0.1", 0, &port), GS_OK);
    assert_true(port != 0);
    assert_int_equal(gs_exporter_start(e, "127.0.0.1", 0, NULL), GS_EINVAL); /* started */

    char *r = http(port, "GET", "/healthz");
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_non_null(strstr(r, "\r\n\r\nok"));
    free(r);

    /* Before any snapshot: an empty, valid scrape. */
    r = http(port, "GET", "/metrics");
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    free(r);

    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    g.have_procs = true;
    struct gs_exporter_attr a[2];
    fill_attr(&a[0], "GPU-00000000::0", "pod-a", "ns", "c");
    fill_attr(&a[1], "GPU-00000000::1", "pod-b", "ns", "c");
    struct gs_exporter_podval v[2];
    fill_podval(&v[0], 0, "pod-a", "ns", "c", "ua", 60, 300);
    fill_podval(&v[1], 0, "pod-b", "ns", "c", "ub", 25, 200);
    struct gs_exporter_snapshot s = {
        .n_gpus = 1, .gpus = &g, .n_attr = 2, .attr = a, .n_podval = 2, .podval = v};
    snprintf(s.hostname, sizeof s.hostname, "node");
    assert_int_equal(gs_exporter_update(e, &s), GS_OK);
    g.sample.util_pct = 0; /* the exporter holds its own copy */
    v[0].util_pct = 1;
    r = http(port, "GET", "/metrics");
    assert_non_null(
        strstr(r, "pod=\"pod-a\",pod_uid=\"ua\",container_id=\"\",replica=\"0\"} 60\n"));
    assert_non_null(
        strstr(r, "pod=\"pod-b\",pod_uid=\"ub\",container_id=\"\",replica=\"1\"} 25\n"));
    free(r);

    struct gs_textbuf b;
    gs_textbuf_init(&b, 1 << 20);
    assert_int_equal(gs_exporter_scrape(e, &b), GS_OK);
    assert_int_equal(count_lines_with(b.data, "DCGM_FI_DEV_GPU_UTIL{"), 2 + 1); /* + the device */
    gs_textbuf_fini(&b);

    r = http(port, "GET", "/nope");
    assert_non_null(strstr(r, "HTTP/1.1 404"));
    free(r);
    r = http(port, "POST", "/metrics");
    assert_non_null(strstr(r, "HTTP/1.1 405"));
    assert_non_null(strstr(r, "Allow: GET, HEAD"));
    free(r);
    r = http(port, "HEAD", "/metrics");
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_null(strstr(r, "pod-a")); /* no body */
    free(r);

    s.n_attr = GS_EXPORTER_ATTR_MAX + 1;
    assert_int_equal(gs_exporter_update(e, &s), GS_EINVAL);
    gs_exporter_stop(e);
    gs_exporter_stop(e); /* idempotent */
    assert_int_equal(gs_exporter_start(e, "not-an-address", 0, NULL), GS_EINVAL);
    gs_exporter_free(e);
    gs_exporter_free(NULL);
}

static void test_scrape_over_the_limit_is_answered_500(void **state)
{
    (void)state;
    struct gs_exporter *e = NULL;
    assert_int_equal(gs_exporter_new(100, &e), GS_OK);
    struct gs_exporter_gpu g;
    fill_gpu(&g, 0);
    struct gs_exporter_snapshot s = {.n_gpus = 1, .gpus = &g};
    assert_int_equal(gs_exporter_update(e, &s), GS_OK);
    uint16_t port = 0;
    assert_int_equal(gs_exporter_start(e, "127.0.0.1", 0, &port), GS_OK);
    char *r = http(port, "GET", "/metrics");
    assert_non_null(strstr(r, "HTTP/1.1 500"));
    free(r);
    gs_exporter_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_textbuf_grows_up_to_its_maximum_and_no_further),
        cmocka_unit_test(test_label_values_are_escaped),
        cmocka_unit_test(test_scrape_of_one_gpu_is_exactly_the_dcgm_text),
        cmocka_unit_test(test_shared_gpu_gets_one_series_per_pod),
        cmocka_unit_test(test_time_sliced_t4_pod_series_add_up_to_the_device),
        cmocka_unit_test(test_pod_sums_above_the_device_are_scaled_down),
        cmocka_unit_test(test_no_process_values_no_pod_series_and_mig_instances),
        cmocka_unit_test(test_mig_pods_get_their_instance_values),
        cmocka_unit_test(test_device_id_by_index_and_unattributed_gpu),
        cmocka_unit_test(test_unread_fields_and_silent_gpus_are_left_out),
        cmocka_unit_test(test_render_stops_at_the_size_limit),
        cmocka_unit_test(test_scrape_of_8_gpus_with_32_pods_renders_every_series),
        cmocka_unit_test(test_http_server_serves_metrics_and_healthz),
        cmocka_unit_test(test_scrape_over_the_limit_is_answered_500),
        cmocka_unit_test(test_assignment_counters_only_with_a_kubernetes_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
