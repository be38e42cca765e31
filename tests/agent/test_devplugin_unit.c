/*
 * Unit tests of the device plugin's pure layers (include/gpusched/devplugin.h): the
 * configuration reader and its diagnostics, the resource model under each MIG strategy and
 * time-slicing, the preferred-allocation policy, and the ListAndWatch/Allocate handlers. The
 * daemon itself is tested against grpcio in tests/agent/test_devplugin.py.
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

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "gpusched/devplugin.h"
#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/topo.h"

#include "dp_fixture.h"

/* ---- a synthetic node ------------------------------------------------------------------- */

static void add_mig(struct gs_gpu_info *g, const char *const *profiles, uint32_t k)
{
    g->mig_capable = g->mig_enabled = true;
    g->mig_count = k;
    for (uint32_t m = 0; m < k; m++) {
        (void)snprintf(g->mig[m].profile, sizeof g->mig[m].profile, "%s", profiles[m]);
        (void)snprintf(g->mig[m].uuid, sizeof g->mig[m].uuid, "MIG-%u-%u", (unsigned)g->index,
                       (unsigned)m);
        g->mig[m].mem_mib = 16384;
    }
}

static const struct gs_dp_resource *res(const struct gs_dp_model *m, const char *name)
{
    int32_t i = gs_dp_model_resource(m, name);
    assert_true(i >= 0);
    return &m->resources[i];
}

/* "id,id,..." of a resource's devices. */
static const char *ids(const struct gs_dp_resource *r)
{
    static char buf[4096];
    buf[0] = '\0';
    size_t used = 0;
    for (uint32_t i = 0; i < r->n_devices && used < sizeof buf; i++) {
        int w = snprintf(buf + used, sizeof buf - used, "%s%s", i > 0 ? "," : "", r->devices[i].id);
        used += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* ---- configuration ---------------------------------------------------------------------- */

static void test_config_minimal_keeps_defaults(void **state)
{
    (void)state;
    struct gs_dp_config c, d;
    dpfx_parse_ok("version: v1\n", &c);
    gs_dp_config_default(&d);
    assert_memory_equal(&c, &d, sizeof c);
    assert_int_equal(c.mig_strategy, GS_MIG_STRATEGY_NONE);
    assert_true(c.list_envvar && !c.list_cdi);
    assert_string_equal(c.metrics_addr, "0.0.0.0:9400");
    assert_string_equal(c.plugin_dir, "/var/lib/kubelet/device-plugins");
    assert_int_equal(c.health.n_ignored, 6);
    assert_int_equal(gs_dp_config_gpu_replicas(&c), 1);
}

static void test_config_reads_every_key(void **state)
{
    (void)state;
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\n"
                  "flags:\n"
                  "  migStrategy: mixed\n"
                  "  plugin: {deviceListStrategy: [cdi-cri], deviceIDStrategy: index}\n"
                  "sharing:\n"
                  "  timeSlicing:\n"
                  "    renameByDefault: true\n"
                  "    failRequestsGreaterThanOne: true\n"
                  "    resources:\n"
                  "      - {name: nvidia.com/gpu, replicas: 4, devices: [0, \"6:1\", GPU-x]}\n"
                  "      - {name: nvidia.com/mig-1g.18gb, rename: example.com/small, replicas: 2}\n"
                  "health: {ignoredXids: [79], recoveryQuietPeriod: 1m30s, probeInterval: 500ms}\n"
                  "exporter: {listenAddress: \"\", refreshInterval: 2s}\n"
                  "kubelet: {devicePluginDir: /d, podResourcesSocket: \"\"}\n",
                  &c);
    assert_int_equal(c.mig_strategy, GS_MIG_STRATEGY_MIXED);
    assert_true(!c.list_envvar && c.list_cdi);
    assert_int_equal(c.id_strategy, GS_DP_ID_INDEX);
    assert_true(c.rename_by_default && c.fail_requests_greater_than_one);
    assert_int_equal(c.n_ts, 2);
    assert_string_equal(c.ts[0].name, "nvidia.com/gpu");
    assert_int_equal(c.ts[0].replicas, 4);
    assert_false(c.ts[0].all_devices);
    assert_int_equal(c.ts[0].n_devices, 3);
    assert_string_equal(c.ts[0].devices[1], "6:1");
    assert_int_equal(c.ts[0].line, 10);
    assert_true(c.ts[1].all_devices);
    assert_string_equal(c.ts[1].rename, "example.com/small");
    assert_int_equal(c.health.n_ignored, 1);
    assert_int_equal(c.health.ignored_xids[0], 79);
    assert_int_equal(c.health.quiet_ms, 90000);
    assert_int_equal(c.health.probe_retry_ms, 500);
    assert_string_equal(c.metrics_addr, "");
    assert_int_equal(c.refresh_ms, 2000);
    assert_string_equal(c.plugin_dir, "/d");
    assert_string_equal(c.pod_resources_socket, "");
    assert_int_equal(gs_dp_config_gpu_replicas(&c), 4);

    dpfx_parse_ok("version: v1\nhealth: {recoveryQuietPeriod: never}\n", &c);
    assert_true(c.health.quiet_ms < 0);
}

/* One bad input and where its diagnostic must point. */
struct bad {
    const char *text;
    uint64_t line;
    uint32_t column;
    const char *field;
    const char *msg; /* a substring of the message */
};

static void test_config_errors_name_line_column_and_key(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"flags: {migStrategy: none}\n", 1, 1, "version", "required key 'version'"},
        {"version: v2\n", 1, 10, "version", "is not v1"},
        {"version: v1\nflag: {}\n", 2, 1, "flag", "unknown key 'flag'"},
        {"version: v1\nversion: v1\n", 2, 1, "version", "repeated"},
        {"version: v1\nflags:\n  migStrategy: some\n", 3, 16, "migStrategy",
         "flags.migStrategy: 'some' is not none, single or mixed"},
        {"version: v1\nflags: {plugin: {deviceListStrategy: []}}\n", 2, 38, "deviceListStrategy",
         "the list is empty"},
        {"version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n"
         "        replicas: 1\n",
         6, 19, "replicas", "sharing.timeSlicing.resources[0].replicas: 1 is out of range 2..256"},
        {"version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - replicas: 2\n", 5, 9,
         "name", "required key 'name'"},
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: amd.com/gpu, replicas: 2}]}}\n",
         2, 44, "name", "not a resource this plugin advertises"},
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, rename: "
         "kubernetes.io/gpu, replicas: 2}]}}\n",
         2, 68, "rename", "not an extended resource name"},
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, "
         "devices: [0, 0]}]}}\n",
         2, 86, "devices", "listed twice"},
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, "
         "devices: [x1]}]}}\n",
         2, 83, "devices", "is not a GPU index"},
        /* sscanf's %u once wrapped these to GPU 0 and MIG 1. */
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, "
         "devices: ['4294967296']}]}}\n",
         2, 83, "devices", "is not a GPU index"},
        {"version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2, "
         "devices: ['1:4294967297']}]}}\n",
         2, 83, "devices", "is not a GPU index"},
        {"version: v1\nsharing: {mps: {}}\n", 2, 11, "mps", "not supported"},
        {"version: v1\nhealth: {recoveryQuietPeriod: 300}\n", 2, 31, "recoveryQuietPeriod",
         "needs a unit"},
        {"version: v1\nhealth: {probeInterval: 0}\n", 2, 25, "probeInterval", "at least 10ms"},
        {"version: v1\nhealth: {ignoredXids: [0]}\n", 2, 24, "ignoredXids", "out of range"},
        {"version: v1\nexporter: {listenAddress: 9400}\n", 2, 27, "listenAddress",
         "is not HOST:PORT"},
        {"version: v1\nexporter: {refreshInterval: 1ms}\n", 2, 29, "refreshInterval",
         "at least 100ms"},
        {"version: v1\nflags: [1]\n", 2, 8, "flags", "expected a mapping, found a list"},
        /* YAML problems come from the shared walker (src/util/yaml.h), with its wording; a
         * second document is named at its "---". */
        {"version: v1\nflags: {migStrategy: [mixed\n", 3, 1, "",
         "malformed YAML: did not find expected ',' or ']' (while parsing a flow sequence at line "
         "2, column 22)"},
        {"version: v1\n---\nversion: v1\n", 2, 1, "",
         "a second YAML document; a device plugin configuration is one document"},
        /* Depth 16: the root mapping is level 1, so the 16th '[' (column 4 + 15) is level 17. */
        {"version: v1\nx: [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]\n", 2, 19, "",
         "nesting deeper than 16 levels"},
        {"", 0, 0, "version", "empty document"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad *b = &cases[i];
        struct gs_dp_config c;
        struct gs_diag d;
        int rc = gs_dp_config_parse(b->text, strlen(b->text), "bad.yaml", &c, &d);
        char text[700];
        gs_diag_format(&d, text, sizeof text);
        if (rc != GS_EPARSE || d.line != b->line || d.column != b->column ||
            strcmp(d.field, b->field) != 0 || strstr(d.msg, b->msg) == NULL)
            fail_msg("case %zu: rc %d, got \"%s\"; want line %llu column %u field '%s' msg '%s'", i,
                     rc, text, (unsigned long long)b->line, (unsigned)b->column, b->field, b->msg);
        assert_string_equal(d.file, "bad.yaml");
    }
}

static void test_config_read_missing_file_is_eio(void **state)
{
    (void)state;
    struct gs_dp_config c;
    struct gs_diag d;
    assert_int_equal(gs_dp_config_read("/nonexistent/agent.yaml", &c, &d), GS_EIO);
    assert_non_null(strstr(d.msg, "cannot open"));
}

static void test_config_accepts_a_configmap_manifest(void **state)
{
    (void)state;
    /* deploy/agent-config.yaml is a ConfigMap: --config on it reads data.config.yaml. */
    const char *cm = "apiVersion: v1\n"
                     "kind: ConfigMap\n"
                     "metadata:\n"
                     "  name: gpusched-agent-config\n"
                     "data:\n"
                     "  config.yaml: |\n"
                     "    version: v1\n"
                     "    flags:\n"
                     "      migStrategy: mixed\n"
                     "    health:\n"
                     "      resetXids: [79]\n";
    struct gs_dp_config c;
    struct gs_diag d;
    assert_int_equal(gs_dp_config_parse(cm, strlen(cm), "cm.yaml", &c, &d), GS_OK);
    assert_int_equal(c.mig_strategy, GS_MIG_STRATEGY_MIXED);
    assert_int_equal(c.health.n_reset, 1);
    assert_int_equal(c.health.reset_xids[0], 79);
    /* An error inside names the manifest's own line and column: "muxed" is at 9:20. */
    const char *bad = "apiVersion: v1\n"
                      "kind: ConfigMap\n"
                      "metadata:\n"
                      "  name: gpusched-agent-config\n"
                      "data:\n"
                      "  config.yaml: |\n"
                      "    version: v1\n"
                      "    flags:\n"
                      "      migStrategy: muxed\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "cm.yaml", &c, &d), GS_EPARSE);
    assert_int_equal(d.line, 9);
    assert_int_equal(d.column, 20);
    assert_string_equal(d.field, "migStrategy");
    /* A ConfigMap without the key says where the configuration is expected. */
    const char *none = "kind: ConfigMap\ndata:\n  other.yaml: x\n";
    assert_int_equal(gs_dp_config_parse(none, strlen(none), "cm.yaml", &c, &d), GS_EPARSE);
    assert_int_equal(d.line, 3);
    assert_non_null(strstr(d.msg, "data.config.yaml"));
}

/* ---- resource model --------------------------------------------------------------------- */

static void test_model_none_strategy_advertises_mig_gpus_whole(void **state)
{
    (void)state;
    struct gs_gpu_info g[3];
    dpfx_make_node(g, 3, 2, 0);
    static const char *const p[] = {"1g.18gb", "1g.18gb"};
    add_mig(&g[2], p, 2);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 3, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 1);
    assert_string_equal(m.resources[0].name, "nvidia.com/gpu");
    assert_string_equal(m.resources[0].endpoint, "gpusched-nvidia.com-gpu.sock");
    assert_string_equal(ids(&m.resources[0]), "GPU-0,GPU-1,GPU-2");
    assert_int_equal(m.resources[0].devices[2].numa_node, 1);
    assert_int_equal(m.resources[0].devices[2].mig, -1);
    gs_dp_model_fini(&m);
}

static void test_model_single_strategy_needs_one_profile_on_every_gpu(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 2, 0);
    static const char *const p[] = {"3g.71gb", "3g.71gb"};
    add_mig(&g[0], p, 2);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    c.mig_strategy = GS_MIG_STRATEGY_SINGLE;
    struct gs_dp_model m;
    char err[256];
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "1 of 2 GPUs run MIG"));
    assert_int_equal(m.n_resources, 0);

    add_mig(&g[1], p, 1);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_OK);
    assert_int_equal(m.n_resources, 1);
    assert_string_equal(ids(res(&m, "nvidia.com/gpu")), "MIG-0-0,MIG-0-1,MIG-1-0");
    gs_dp_model_fini(&m);

    static const char *const q[] = {"1g.18gb"};
    add_mig(&g[1], q, 1);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "one profile"));

    /* No GPU in MIG mode: single is whole GPUs. */
    dpfx_make_node(g, 2, 2, 0);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_OK);
    assert_string_equal(ids(res(&m, "nvidia.com/gpu")), "GPU-0,GPU-1");
    gs_dp_model_fini(&m);
}

static void test_model_mixed_strategy_names_profiles(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    static const char *const p[] = {"1g.18gb", "3g.71gb+me", "1g.18gb", ""};
    add_mig(&g[1], p, 4);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    c.mig_strategy = GS_MIG_STRATEGY_MIXED;
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 3);
    assert_string_equal(m.resources[0].name, "nvidia.com/gpu");
    assert_string_equal(m.resources[1].name, "nvidia.com/mig-1g.18gb");
    assert_string_equal(m.resources[2].name, "nvidia.com/mig-3g.71gb.me");
    assert_string_equal(m.resources[2].endpoint, "gpusched-nvidia.com-mig-3g.71gb.me.sock");
    assert_string_equal(ids(&m.resources[0]), "GPU-0");
    assert_string_equal(ids(&m.resources[1]), "MIG-1-0,MIG-1-2");
    assert_int_equal(m.resources[1].devices[1].mig, 2);
    assert_int_equal(m.resources[1].devices[1].gpu, 1);
    assert_int_equal(gs_dp_model_find(&m.resources[1], "MIG-1-2"), 1);
    assert_int_equal(gs_dp_model_find(&m.resources[1], "MIG-1-1"), -1);
    gs_dp_model_fini(&m);
}

static void test_model_time_slicing_selects_devices_and_renames(void **state)
{
    (void)state;
    struct gs_gpu_info g[4];
    dpfx_make_node(g, 4, 2, 0);
    struct gs_dp_config c;
    dpfx_parse_ok(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: "
        "2, devices: [1, GPU-3, 9, GPU-elsewhere]}]}}\n",
        &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 4, &m, NULL, 0), GS_OK);
    /* Without rename whole GPUs and replicas share nvidia.com/gpu (as NVIDIA's plugin). */
    assert_int_equal(m.n_resources, 1);
    assert_string_equal(ids(&m.resources[0]), "GPU-0,GPU-1::0,GPU-1::1,GPU-2,GPU-3::0,GPU-3::1");
    assert_int_equal(m.resources[0].devices[2].replica, 1);
    assert_int_equal(m.resources[0].devices[2].replicas, 2);
    assert_int_equal(m.n_unmatched, 2);
    assert_string_equal(m.unmatched, "9");
    gs_dp_model_fini(&m);

    c.rename_by_default = true;
    assert_int_equal(gs_dp_model_build(&c, g, 4, &m, NULL, 0), GS_OK);
    assert_string_equal(ids(res(&m, "nvidia.com/gpu")), "GPU-0,GPU-2");
    assert_string_equal(ids(res(&m, "nvidia.com/gpu.shared")),
                        "GPU-1::0,GPU-1::1,GPU-3::0,GPU-3::1");
    gs_dp_model_fini(&m);

    (void)snprintf(c.ts[0].rename, sizeof c.ts[0].rename, "example.com/slice");
    assert_int_equal(gs_dp_model_build(&c, g, 4, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 2);
    assert_string_equal(m.resources[0].name, "example.com/slice");
    assert_string_equal(m.resources[0].endpoint, "gpusched-example.com-slice.sock");
    gs_dp_model_fini(&m);
}

static void test_model_device_in_two_entries_is_an_error(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 2, 0);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                  "      - {name: nvidia.com/gpu, replicas: 2}\n"
                  "      - {name: nvidia.com/gpu, replicas: 3, devices: [1]}\n",
                  &c);
    struct gs_dp_model m;
    char err[256];
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "entries 0 (line 5) and 1 (line 6) both select GPU 1"));
}

static void test_model_long_ids_and_limits(void **state)
{
    (void)state;
    struct gs_gpu_info g[1];
    dpfx_make_node(g, 1, 1, 0);
    memset(g[0].uuid, 'a', 62);
    memcpy(g[0].uuid, "GPU-", 4);
    g[0].uuid[62] = '\0';
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    char err[256];
    assert_int_equal(gs_dp_model_build(&c, g, 1, &m, err, sizeof err), GS_OK); /* 62 chars */
    gs_dp_model_fini(&m);
    dpfx_parse_ok("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
                  "replicas: 2}]}}\n",
                  &c);
    assert_int_equal(gs_dp_model_build(&c, g, 1, &m, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "longer than 63 characters"));

    /* 64 GPUs x 256 replicas = 16384 devices: the limit, accepted. */
    static struct gs_gpu_info big[GS_GPU_MAX];
    dpfx_make_node(big, GS_GPU_MAX, 8, 8);
    dpfx_parse_ok("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
                  "replicas: 256}]}}\n",
                  &c);
    assert_int_equal(gs_dp_model_build(&c, big, GS_GPU_MAX, &m, err, sizeof err), GS_OK);
    assert_int_equal(m.resources[0].n_devices, GS_DP_DEVICES_MAX);
    assert_int_equal(gs_dp_model_find(&m.resources[0], "GPU-63::255"), GS_DP_DEVICES_MAX - 1);
    gs_dp_model_fini(&m);
}

/* ---- sharing.fractions ------------------------------------------------------------------ */

static void test_config_fractions_default_bounds_and_one_mode(void **state)
{
    (void)state;
    struct gs_dp_config c;
    /* An empty mapping: every whole GPU, 10 slices (GS_DP_SLICES_DEFAULT). */
    dpfx_parse_ok("version: v1\nsharing: {fractions: {}}\n", &c);
    assert_true(c.has_fractions);
    assert_string_equal(c.fractions.name, "gpusched.io/gpu-slice");
    assert_int_equal(c.fractions.replicas, 10);
    assert_true(c.fractions.all_devices);
    assert_int_equal(c.fractions.line, 2);
    /* Without the key: no fractions. */
    dpfx_parse_ok("version: v1\n", &c);
    assert_false(c.has_fractions);
    /* Both bounds are accepted; a list of selectors replaces 'all'. */
    dpfx_parse_ok("version: v1\nsharing:\n  fractions:\n    slicesPerGpu: 1\n", &c);
    assert_int_equal(c.fractions.replicas, 1);
    dpfx_parse_ok("version: v1\nsharing:\n  fractions:\n    slicesPerGpu: 256\n"
                  "    devices: [1, GPU-3]\n",
                  &c);
    assert_int_equal(c.fractions.replicas, 256);
    assert_false(c.fractions.all_devices);
    assert_int_equal(c.fractions.n_devices, 2);
    assert_string_equal(c.fractions.devices[0], "1");
    assert_string_equal(c.fractions.devices[1], "GPU-3");
    /* fractions with a time-slicing entry of another resource (a MIG profile) is one mode
     * per GPU still: fractions take whole GPUs only. */
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\nsharing: {fractions: {devices: [0]}, "
                  "timeSlicing: {resources: [{name: nvidia.com/mig-1g.18gb, replicas: 2}]}}\n",
                  &c);

    static const struct {
        const char *text;
        uint64_t line;
        uint32_t column;
        const char *field, *msg;
    } bad[] = {
        /* "sharing: {fractions: {slicesPerGpu: " is 36 characters: the value is column 37. */
        {"version: v1\nsharing: {fractions: {slicesPerGpu: 0}}\n", 2, 37, "slicesPerGpu",
         "sharing.fractions.slicesPerGpu: 0 is out of range 1..256"},
        {"version: v1\nsharing: {fractions: {slicesPerGpu: 257}}\n", 2, 37, "slicesPerGpu",
         "sharing.fractions.slicesPerGpu: 257 is out of range 1..256"},
        /* "sharing: {fractions: {devices: " is 31 characters. */
        {"version: v1\nsharing: {fractions: {devices: []}}\n", 2, 32, "devices",
         "sharing.fractions.devices: the list is empty"},
        /* A MIG device is named at the fractions mapping (column 22). */
        {"version: v1\nsharing: {fractions: {devices: ['1:0']}}\n", 2, 22, "devices",
         "'1:0' is a MIG device; fractions take whole GPUs"},
        {"version: v1\nsharing: {fractions: {replicas: 2}}\n", 2, 23, "replicas",
         "unknown key 'replicas'"},
        /* One GPU in two modes, told by the reader when the selectors are equal or 'all';
         * reported at the document (line 1, column 1) naming both entries' lines. */
        {"version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
         "      - {name: nvidia.com/gpu, replicas: 2, devices: [0, 1]}\n"
         "  fractions: {devices: [1]}\n",
         1, 1, "fractions",
         "sharing.fractions (line 6) and sharing.timeSlicing.resources[0] (line 5) both take "
         "GPU '1': a GPU is in one mode"},
        {"version: v1\nsharing:\n  fractions: {}\n  timeSlicing:\n    resources:\n"
         "      - {name: nvidia.com/gpu, replicas: 2, devices: [GPU-2]}\n",
         1, 1, "fractions", "both take GPU 'GPU-2'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gs_diag d;
        int rc = gs_dp_config_parse(bad[i].text, strlen(bad[i].text), "bad.yaml", &c, &d);
        char text[700];
        gs_diag_format(&d, text, sizeof text);
        if (rc != GS_EPARSE || d.line != bad[i].line || d.column != bad[i].column ||
            strcmp(d.field, bad[i].field) != 0 || strstr(d.msg, bad[i].msg) == NULL)
            fail_msg("case %zu: rc %d, got \"%s\"; want line %llu column %u field '%s' msg '%s'", i,
                     rc, text, (unsigned long long)bad[i].line, (unsigned)bad[i].column,
                     bad[i].field, bad[i].msg);
    }
}

static void test_model_fractions_advertise_slices_per_gpu(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nsharing: {fractions: {}}\n", &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    /* Every GPU in fractions: gpusched.io/gpu-slice only, 2 x 10 = 20 devices, GPU by GPU. */
    assert_int_equal(m.n_resources, 1);
    const struct gs_dp_resource *r = res(&m, "gpusched.io/gpu-slice");
    assert_string_equal(r->endpoint, "gpusched-gpusched.io-gpu-slice.sock");
    assert_int_equal(r->n_devices, 20);
    assert_string_equal(ids(r), "GPU-0::slice-0,GPU-0::slice-1,GPU-0::slice-2,GPU-0::slice-3,"
                                "GPU-0::slice-4,GPU-0::slice-5,GPU-0::slice-6,GPU-0::slice-7,"
                                "GPU-0::slice-8,GPU-0::slice-9,GPU-1::slice-0,GPU-1::slice-1,"
                                "GPU-1::slice-2,GPU-1::slice-3,GPU-1::slice-4,GPU-1::slice-5,"
                                "GPU-1::slice-6,GPU-1::slice-7,GPU-1::slice-8,GPU-1::slice-9");
    /* Device 13 is GPU 1's slice 3: a slice, not a replica (no replica environment). */
    assert_int_equal(r->devices[13].gpu, 1);
    assert_int_equal(r->devices[13].replica, 3);
    assert_int_equal(r->devices[13].slices, 10);
    assert_int_equal(r->devices[13].replicas, 0);
    assert_int_equal(r->devices[13].mig, -1);
    assert_int_equal(gs_dp_model_find(r, "GPU-1::slice-9"), 19);
    assert_int_equal(gs_dp_model_find(r, "GPU-1::10"), -1);
    gs_dp_model_fini(&m);

    /* One GPU selected by UUID, 3 slices: GPU 0 stays whole under nvidia.com/gpu. Resources
     * sort by name, so gpusched.io/gpu-slice is 0 and nvidia.com/gpu 1. */
    dpfx_parse_ok("version: v1\nsharing: {fractions: {slicesPerGpu: 3, devices: [GPU-1, 7]}}\n",
                  &c);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    assert_int_equal(m.n_resources, 2);
    assert_string_equal(m.resources[0].name, "gpusched.io/gpu-slice");
    assert_string_equal(ids(&m.resources[0]), "GPU-1::slice-0,GPU-1::slice-1,GPU-1::slice-2");
    assert_string_equal(ids(&m.resources[1]), "GPU-0");
    /* "7" selects no GPU here: counted as unmatched, like time-slicing selectors. */
    assert_int_equal(m.n_unmatched, 1);
    assert_string_equal(m.unmatched, "7");
    gs_dp_model_fini(&m);

    /* The same GPU by index in time-slicing and by UUID in fractions: only the model can tell. */
    dpfx_parse_ok("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                  "      - {name: nvidia.com/gpu, replicas: 2, devices: [1]}\n"
                  "  fractions: {devices: [GPU-1]}\n",
                  &c);
    char err[256];
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_EINVAL);
    assert_string_equal(err, "sharing.fractions (line 6) and time-slicing entry 0 (line 5) both "
                             "select GPU 1: a GPU is in one mode");

    /* A MIG GPU named in fractions is refused; under 'all' it keeps its MIG devices. */
    static const char *const p[] = {"1g.18gb", "1g.18gb"};
    add_mig(&g[1], p, 2);
    dpfx_parse_ok(
        "version: v1\nflags: {migStrategy: mixed}\nsharing: {fractions: {devices: [1]}}\n", &c);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_EINVAL);
    assert_string_equal(err, "sharing.fractions (line 3) selects GPU 1, which runs MIG: a GPU is "
                             "in one mode");
    dpfx_parse_ok(
        "version: v1\nflags: {migStrategy: mixed}\nsharing: {fractions: {slicesPerGpu: 2}}\n", &c);
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, err, sizeof err), GS_OK);
    assert_string_equal(ids(res(&m, "gpusched.io/gpu-slice")), "GPU-0::slice-0,GPU-0::slice-1");
    assert_string_equal(ids(res(&m, "nvidia.com/mig-1g.18gb")), "MIG-1-0,MIG-1-1");
    gs_dp_model_fini(&m);
}

/* ---- handlers --------------------------------------------------------------------------- */

static enum gs_health_state all_healthy[GS_GPU_MAX];
/** The health prefer() hands the handler; all_healthy unless a test points it elsewhere. */
static const enum gs_health_state *prefer_health = all_healthy;

/* Calls GetPreferredAllocation for one container; returns "id,id". */
static const char *prefer(const struct gs_dp_config *c, const struct gs_dp_model *m,
                          const char *resource, const char *const *avail, size_t n_avail,
                          const char *const *must, size_t n_must, int size)
{
    struct gs_dp_view v = {
        c, m, (uint32_t)gs_dp_model_resource(m, resource), prefer_health, NULL, NULL, NULL};
    return dpfx_prefer(&v, avail, n_avail, must, n_must, size);
}

static void test_preferred_whole_gpus_follow_nvlink_then_numa(void **state)
{
    (void)state;
    /* 8 GPUs: NVLink quads {0-3} {4-7}; NUMA pairs {0,1} {2,3} {4,5} {6,7}. */
    struct gs_gpu_info g[8];
    dpfx_make_node(g, 8, 2, 4);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    const char *all[] = {"GPU-7", "GPU-6", "GPU-5", "GPU-4", "GPU-3", "GPU-2", "GPU-1", "GPU-0"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, NULL, 0, 2), "GPU-0,GPU-1");
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, NULL, 0, 4),
                        "GPU-0,GPU-1,GPU-2,GPU-3");
    const char *must[] = {"GPU-6"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, must, 1, 2), "GPU-6,GPU-7");
    /* Quad {0-3} broken by others: a pair from the broken quad keeps {4-7} whole. */
    const char *some[] = {"GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5", "GPU-6", "GPU-7"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", some, 7, NULL, 0, 2), "GPU-2,GPU-3");
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", some, 7, NULL, 0, 1), "GPU-1");
    gs_dp_model_fini(&m);
}

/* Adds the NVLink links pairs[0..n) (both directions) to a node made without NVLink. */
static void link_pairs(struct gs_gpu_info *g, const uint32_t (*pairs)[2], size_t n)
{
    for (size_t k = 0; k < n; k++) {
        struct gs_gpu_info *a = &g[pairs[k][0]], *b = &g[pairs[k][1]];
        a->nvlink_peers[a->nvlink_peer_count++] = pairs[k][1];
        b->nvlink_peers[b->nvlink_peer_count++] = pairs[k][0];
    }
}

static void test_preferred_whole_gpus_is_exact_up_to_16(void **state)
{
    (void)state;
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    /* NUMA nodes {0-3} {4-7}; NVLink 0-4, 0-5, 2-6, 3-4, 3-7. Offered {2,3,5,6,7}, 4 wanted:
     * {2,3,6,7} holds two links (2-6, 3-7); the greedy completion returned {2,5,6,7}, which
     * holds one (2-6), because seeded at 5 it filled NUMA node 1 first. */
    struct gs_gpu_info g[8];
    dpfx_make_node(g, 8, 4, 0);
    const uint32_t links1[][2] = {{0, 4}, {0, 5}, {2, 6}, {3, 4}, {3, 7}};
    link_pairs(g, links1, 5);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    const char *offered[] = {"GPU-2", "GPU-3", "GPU-5", "GPU-6", "GPU-7"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", offered, 5, NULL, 0, 4),
                        "GPU-2,GPU-3,GPU-6,GPU-7");
    gs_dp_model_fini(&m);

    /* NVLink 0-2, 3-7, 6-7. Offered {0,1,2,3,5,7}, 4 wanted: {0,2,3,7} holds 0-2 and 3-7;
     * greedy took {0,1,2,3} (all on NUMA node 0, one link). Links count before NUMA. */
    dpfx_make_node(g, 8, 4, 0);
    const uint32_t links2[][2] = {{0, 2}, {3, 7}, {6, 7}};
    link_pairs(g, links2, 3);
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    const char *offered2[] = {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-5", "GPU-7"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", offered2, 6, NULL, 0, 4),
                        "GPU-0,GPU-2,GPU-3,GPU-7");
    /* With must_include GPU-1 (kubelet insists): three more hold one link at most (0-2, or
     * 3-7); {1,0,2,3} does with all four on NUMA node 0. */
    const char *must1[] = {"GPU-1"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", offered2, 6, must1, 1, 4),
                        "GPU-1,GPU-0,GPU-2,GPU-3");
    gs_dp_model_fini(&m);
}

/* "GPU-a,GPU-b,..." of a mask, ascending. */
static void mask_ids(uint64_t mask, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t g = 0; g < 64 && len < cap; g++)
        if (mask >> g & 1u) {
            int w = snprintf(out + len, cap - len, "%sGPU-%u", len ? "," : "", (unsigned)g);
            len += w > 0 ? (size_t)w : 0;
        }
}

/*
 * GetPreferredAllocation for whole GPUs is the core's gs_topo_pick() (the scheduler's pick):
 * for every set of GPUs kubelet may offer on an 8-GPU board (pairs (0,1) (2,3), a quad link
 * 4-5-6-7, NUMA {0-3} {4-7}) and every size, the handler proposes exactly the core's set; on a
 * 20-GPU board (the greedy path) the same for the sets that leave out one or two GPUs.
 */
static void test_preferred_whole_gpus_are_the_core_pick(void **state)
{
    (void)state;
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_gpu_info g[20];
    dpfx_make_node(g, 8, 4, 0);
    const uint32_t links[][2] = {{0, 1}, {2, 3}, {4, 5}, {4, 6}, {4, 7}, {5, 6}, {5, 7}, {6, 7}};
    link_pairs(g, links, 8);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    uint64_t nv[8];
    int32_t numa[8];
    for (uint32_t i = 0; i < 8; i++) {
        nv[i] = 0;
        for (uint32_t k = 0; k < g[i].nvlink_peer_count; k++)
            nv[i] |= UINT64_C(1) << g[i].nvlink_peers[k];
        numa[i] = g[i].numa_node;
    }
    static const char *const names[] = {"GPU-0",  "GPU-1",  "GPU-2",  "GPU-3",  "GPU-4",
                                        "GPU-5",  "GPU-6",  "GPU-7",  "GPU-8",  "GPU-9",
                                        "GPU-10", "GPU-11", "GPU-12", "GPU-13", "GPU-14",
                                        "GPU-15", "GPU-16", "GPU-17", "GPU-18", "GPU-19"};
    uint32_t checked = 0;
    for (uint64_t avail = 1; avail < 256; avail++) {
        const char *offer[8];
        uint32_t n = 0;
        for (uint32_t i = 0; i < 8; i++)
            if (avail >> i & 1u)
                offer[n++] = names[i];
        for (uint32_t size = 1; size < n; size++) {
            uint64_t want = 0;
            assert_int_equal(gs_topo_pick(8, nv, numa, avail, 0, size, &want), GS_OK);
            char ids[256];
            mask_ids(want, ids, sizeof ids);
            assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", offer, n, NULL, 0, (int)size),
                                ids);
            checked++;
        }
    }
    assert_int_equal(checked, 769); /* sum over k of C(8,k) x (k - 1) = 8 x 2^7 - 2^8 + 1 */
    /* Spot values: all offered, 2 wanted: {0,1} (a link, cut 0, lowest); 3 wanted: {4,5,6}
     * (3 links in the quad) over any pair plus one. */
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", names, 8, NULL, 0, 2), "GPU-0,GPU-1");
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", names, 8, NULL, 0, 3),
                        "GPU-4,GPU-5,GPU-6");
    gs_dp_model_fini(&m);

    /* 20 GPUs in pairs, NUMA by tens: past 16 candidates, the core's greedy search. */
    dpfx_make_node(g, 20, 10, 2);
    assert_int_equal(gs_dp_model_build(&c, g, 20, &m, NULL, 0), GS_OK);
    uint64_t nv20[20];
    int32_t numa20[20];
    for (uint32_t i = 0; i < 20; i++) {
        nv20[i] = UINT64_C(1) << (i ^ 1u);
        numa20[i] = g[i].numa_node;
    }
    for (uint32_t x = 0; x < 20; x++)
        for (uint32_t y = x; y < 20; y++) {
            uint64_t avail = ((UINT64_C(1) << 20) - 1) & ~(UINT64_C(1) << x) & ~(UINT64_C(1) << y);
            const char *offer[20];
            uint32_t n = 0;
            for (uint32_t i = 0; i < 20; i++)
                if (avail >> i & 1u)
                    offer[n++] = names[i];
            for (uint32_t size = 1; size <= 4; size++) {
                uint64_t want = 0;
                assert_int_equal(gs_topo_pick(20, nv20, numa20, avail, 0, size, &want), GS_OK);
                char ids[256];
                mask_ids(want, ids, sizeof ids);
                assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", offer, n, NULL, 0, (int)size),
                                    ids);
            }
        }
    gs_dp_model_fini(&m);
}

static void test_preferred_never_proposes_an_unhealthy_device(void **state)
{
    (void)state;
    /* 8 GPUs, no NVLink, one NUMA node; GPU 5 lost, but kubelet still offers all 8 (issue 9:
     * a size-7 request used to get GPU 5, and the Allocate that followed was refused). */
    struct gs_gpu_info g[8];
    dpfx_make_node(g, 8, 8, 0);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    enum gs_health_state h[8] = {GS_HEALTH_HEALTHY};
    h[5] = GS_HEALTH_UNHEALTHY;
    prefer_health = h;
    const char *all[] = {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5", "GPU-6", "GPU-7"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, NULL, 0, 7),
                        "GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-6,GPU-7");
    /* All 8 asked: the best shorter list, still without it. */
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, NULL, 0, 8),
                        "GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-6,GPU-7");
    /* kubelet insists on it through must_include: kept, nothing else Unhealthy added. */
    const char *must5[] = {"GPU-5"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, must5, 1, 2), "GPU-5,GPU-0");
    /* Only Unhealthy devices offered: nothing proposed. */
    const char *only5[] = {"GPU-5"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", only5, 1, NULL, 0, 1), "");
    prefer_health = all_healthy;
    gs_dp_model_fini(&m);
}

/* Status of GetPreferredAllocation on raw request bytes. */
static int preferred_status(const struct gs_dp_config *c, const struct gs_dp_model *m,
                            const uint8_t *buf, size_t len, char *msg, size_t cap)
{
    struct gs_dp_view v = {c, m, 0, all_healthy, NULL, NULL, NULL};
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_preferred(&v, buf, len, &a), GS_OK);
    int st = a.status;
    (void)snprintf(msg, cap, "%s", a.message);
    gs_dp_answer_fini(&a);
    return st;
}

static void test_preferred_sizes_are_bounded_by_the_resource(void **state)
{
    (void)state;
    struct gs_gpu_info g[8];
    dpfx_make_node(g, 8, 8, 0);
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 8, &m, NULL, 0), GS_OK);
    const char *all[] = {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5", "GPU-6", "GPU-7"};
    char msg[256];
    size_t len = 0;
    /* allocation_size 2^31-1 used to size two allocations per container (24 GiB). */
    uint8_t *buf = dpfx_pack_preferred(all, 8, NULL, 0, INT32_MAX, &len);
    assert_int_equal(preferred_status(&c, &m, buf, len, msg, sizeof msg), 3 /* INVALID_ARG */);
    assert_string_equal(msg, "container request 0: allocation_size 2147483647 is more than the 8 "
                             "devices of nvidia.com/gpu");
    free(buf);
    /* 100,000 must_include IDs (repeats of known ones) were compared pairwise: 14.5 s. Now the
     * size bound refuses them at once. */
    enum { N = 100000 };
    const char **must = malloc(N * sizeof *must);
    assert_non_null(must);
    for (size_t i = 0; i < N; i++)
        must[i] = all[i % 8];
    buf = dpfx_pack_preferred(all, 8, must, N, N, &len);
    assert_int_equal(preferred_status(&c, &m, buf, len, msg, sizeof msg), 3);
    free(buf);
    /* Within the bound, repeats of known IDs count once and cost a lookup each: 72 = 8 + 64
     * must_include IDs that are all GPU-1 give GPU-1 alone. */
    for (size_t i = 0; i < 72; i++)
        must[i] = "GPU-1";
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 8, must, 72, 72),
                        "GPU-1,GPU-0,GPU-2,GPU-3,GPU-4,GPU-5,GPU-6,GPU-7");
    /* More than 64 distinct IDs the resource does not have are refused. */
    static char unknown[65][16];
    for (size_t i = 0; i < 65; i++) {
        (void)snprintf(unknown[i], sizeof unknown[i], "GPU-x%zu", i);
        must[i] = unknown[i];
    }
    buf = dpfx_pack_preferred(all, 8, must, 65, 70, &len);
    assert_int_equal(preferred_status(&c, &m, buf, len, msg, sizeof msg), 3);
    assert_string_equal(msg, "container request 0: more than 64 must_include IDs that "
                             "nvidia.com/gpu does not have");
    free(buf);
    free(must);
    gs_dp_model_fini(&m);
}

static void test_preferred_replicas_pack_onto_shared_gpus(void **state)
{
    (void)state;
    struct gs_gpu_info g[3];
    dpfx_make_node(g, 3, 3, 0);
    struct gs_dp_config c;
    dpfx_parse_ok(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: "
        "2, devices: [1, 2]}]}}\n",
        &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 3, &m, NULL, 0), GS_OK);
    /* A whole GPU and shared slots in one resource: a shared slot rather than the whole GPU. */
    const char *all[] = {"GPU-0", "GPU-1::0", "GPU-1::1", "GPU-2::0", "GPU-2::1"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", all, 5, NULL, 0, 1), "GPU-1::0");
    /* GPU 2 half used by another pod: fill it first. */
    const char *some[] = {"GPU-0", "GPU-1::0", "GPU-1::1", "GPU-2::1"};
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", some, 4, NULL, 0, 1), "GPU-2::1");
    /* Two fit on GPU 1 only. */
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", some, 4, NULL, 0, 2), "GPU-1::0,GPU-1::1");
    /* Deterministic. */
    assert_string_equal(prefer(&c, &m, "nvidia.com/gpu", some, 4, NULL, 0, 2), "GPU-1::0,GPU-1::1");
    gs_dp_model_fini(&m);
}

static V1beta1__AllocateResponse *allocate(const struct gs_dp_config *c,
                                           const struct gs_dp_model *m, const char *resource,
                                           const enum gs_health_state *health,
                                           const char *const *idv, size_t n, int *status)
{
    struct gs_dp_view v = {c,    m,   (uint32_t)gs_dp_model_resource(m, resource), health, NULL,
                           NULL, NULL};
    return dpfx_allocate(&v, idv, n, status);
}

static const char *env(const V1beta1__ContainerAllocateResponse *c, const char *key)
{
    for (size_t i = 0; i < c->n_envs; i++)
        if (strcmp(c->envs[i]->key, key) == 0)
            return c->envs[i]->value;
    return NULL;
}

static void test_allocate_names_units_and_refuses_bad_ids(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    static const char *const p[] = {"1g.18gb", "1g.18gb"};
    add_mig(&g[1], p, 2);
    struct gs_dp_config c;
    dpfx_parse_ok(
        "version: v1\nflags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}\n"
        "sharing: {timeSlicing: {resources: [{name: nvidia.com/mig-1g.18gb, replicas: 3}]}}\n",
        &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    int status = -1;
    const char *two[] = {"MIG-1-1::2", "MIG-1-1::0"};
    V1beta1__AllocateResponse *r =
        allocate(&c, &m, "nvidia.com/mig-1g.18gb", all_healthy, two, 2, &status);
    assert_int_equal(status, 0);
    const V1beta1__ContainerAllocateResponse *cr = r->container_responses[0];
    assert_string_equal(env(cr, "NVIDIA_VISIBLE_DEVICES"), "void"); /* envvar strategy off */
    assert_string_equal(env(cr, "GPUSCHED_GPU_REPLICAS"), "MIG-1-1=2/3");
    assert_string_equal(env(cr, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "66");
    assert_int_equal(cr->n_cdi_devices, 1);
    assert_string_equal(cr->cdi_devices[0]->name, "nvidia.com/gpu=MIG-1-1");
    assert_int_equal(cr->n_devices, 4);
    assert_string_equal(cr->devices[0]->host_path, "/dev/nvidia1");
    assert_string_equal(cr->devices[0]->permissions, "rw");
    v1beta1__allocate_response__free_unpacked(r, NULL);

    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_UNHEALTHY};
    const char *one[] = {"MIG-1-0::0"};
    r = allocate(&c, &m, "nvidia.com/mig-1g.18gb", h, one, 1, &status);
    assert_null(r);
    assert_int_equal(status, 9); /* FAILED_PRECONDITION: the GPU is Unhealthy */
    const char *unknown[] = {"GPU-0"};
    r = allocate(&c, &m, "nvidia.com/mig-1g.18gb", all_healthy, unknown, 1, &status);
    assert_null(r);
    assert_int_equal(status, 3); /* INVALID_ARGUMENT: not a device of this resource */
    gs_dp_model_fini(&m);
}

static void test_list_marks_only_the_unhealthy_gpu_devices(void **state)
{
    (void)state;
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    g[1].numa_node = -1;
    struct gs_dp_config c;
    dpfx_parse_ok(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: "
        "2}]}}\n",
        &c);
    struct gs_dp_model m;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &m, NULL, 0), GS_OK);
    enum gs_health_state h[2] = {GS_HEALTH_UNHEALTHY, GS_HEALTH_HEALTHY};
    struct gs_dp_view v = {&c, &m, 0, h, NULL, NULL, NULL};
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_list(&v, &a), GS_OK);
    V1beta1__ListAndWatchResponse *r =
        v1beta1__list_and_watch_response__unpack(NULL, a.len, a.data);
    assert_non_null(r);
    assert_int_equal(r->n_devices, 4);
    assert_string_equal(r->devices[0]->id, "GPU-0::0");
    assert_string_equal(r->devices[0]->health, "Unhealthy");
    assert_string_equal(r->devices[1]->health, "Unhealthy");
    assert_string_equal(r->devices[2]->health, "Healthy");
    assert_int_equal(r->devices[0]->topology->n_nodes, 1);
    assert_int_equal(r->devices[0]->topology->nodes[0]->id, 0);
    assert_null(r->devices[3]->topology); /* NUMA node unknown: no topology */
    v1beta1__list_and_watch_response__free_unpacked(r, NULL);
    gs_dp_answer_fini(&a);
    gs_dp_model_fini(&m);
}

/* ---- rediscovery: the model diff ---------------------------------------------------------- */

static void test_config_rediscover_interval(void **state)
{
    (void)state;
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    assert_int_equal(c.rediscover_ms, 30000); /* issue 9: within 30 s */
    dpfx_parse_ok("version: v1\nflags: {rediscoverInterval: 1m30s}\n", &c);
    assert_int_equal(c.rediscover_ms, 90000);
    dpfx_parse_ok("version: v1\nflags: {rediscoverInterval: 0}\n", &c);
    assert_int_equal(c.rediscover_ms, 0); /* off */
    dpfx_parse_ok("version: v1\nflags: {rediscoverInterval: 100ms}\n", &c);
    assert_int_equal(c.rediscover_ms, 100);
    /* The value on line 2 starts after "flags: {" (8) and "rediscoverInterval: " (20
     * characters): column 29. */
    struct gs_diag d;
    const char *bad = "version: v1\nflags: {rediscoverInterval: 50ms}\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "t.yaml", &c, &d), GS_EPARSE);
    assert_int_equal(d.line, 2);
    assert_int_equal(d.column, 29);
    assert_string_equal(d.field, "rediscoverInterval");
    assert_non_null(strstr(d.msg, "0 (off) or at least 100ms"));
    bad = "version: v1\nflags: {rediscoverInterval: soon}\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "t.yaml", &c, &d), GS_EPARSE);
    assert_string_equal(d.field, "rediscoverInterval");
    assert_non_null(strstr(d.msg, "not a duration"));
}

/* mig.dynamic: off by default; a bool; an unknown key under mig is named. */
static void test_config_mig_dynamic(void **state)
{
    (void)state;
    struct gs_dp_config c;
    gs_dp_config_default(&c);
    assert_false(c.mig_dynamic);
    dpfx_parse_ok("version: v1\nmig: {dynamic: true}\n", &c);
    assert_true(c.mig_dynamic);
    dpfx_parse_ok("version: v1\nmig: {dynamic: false}\n", &c);
    assert_false(c.mig_dynamic);
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    assert_false(c.mig_dynamic);
    struct gs_diag d;
    const char *bad = "version: v1\nmig: {dynamic: yes-please}\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "t.yaml", &c, &d), GS_EPARSE);
    assert_int_equal(d.line, 2);
    assert_string_equal(d.field, "dynamic");
    assert_non_null(strstr(d.msg, "mig.dynamic: 'yes-please' is not true or false"));
    bad = "version: v1\nmig: {dynamc: true}\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "t.yaml", &c, &d), GS_EPARSE);
    assert_string_equal(d.field, "dynamc");
    bad = "version: v1\nmig: true\n";
    assert_int_equal(gs_dp_config_parse(bad, strlen(bad), "t.yaml", &c, &d), GS_EPARSE);
    assert_string_equal(d.field, "mig");
}

static void test_gpu_layout_same_looks_at_mig_only(void **state)
{
    (void)state;
    static const char *const p3[] = {"1g.18gb", "1g.18gb", "3g.71gb"};
    struct gs_gpu_info a[2], b[2];
    dpfx_make_node(a, 2, 1, 0);
    add_mig(&a[1], p3, 3);
    memcpy(b, a, sizeof a);
    assert_true(gs_dp_gpu_layout_same(&a[1], &b[1]));
    b[1].nvlink_peers[b[1].nvlink_peer_count++] = 0; /* not a layout fact */
    b[1].numa_node = 3;
    assert_true(gs_dp_gpu_layout_same(&a[1], &b[1]));
    b[1].mig[2].has_start = true; /* a start slot now known */
    assert_false(gs_dp_gpu_layout_same(&a[1], &b[1]));
    memcpy(b, a, sizeof a);
    (void)snprintf(b[1].mig[1].profile, sizeof b[1].mig[1].profile, "2g.35gb");
    assert_false(gs_dp_gpu_layout_same(&a[1], &b[1]));
    memcpy(b, a, sizeof a);
    b[1].mig_count = 2; /* an instance destroyed */
    assert_false(gs_dp_gpu_layout_same(&a[1], &b[1]));
    assert_false(gs_dp_gpu_layout_same(&a[0], &a[1])); /* MIG off vs on (and another UUID) */
    memcpy(b, a, sizeof a);
    a[0].uuid[0] = '\0'; /* lost at start, found again with its UUID */
    assert_false(gs_dp_gpu_layout_same(&a[0], &b[0]));
    assert_true(gs_dp_gpu_layout_same(NULL, NULL));
    assert_false(gs_dp_gpu_layout_same(&a[0], NULL));
}

/* One rediscovery: build next from g, carry it over prev; prev then becomes next. */
static void rediscover_round(const struct gs_dp_config *c, const struct gs_gpu_info *g,
                             struct gs_dp_model *prev, enum gs_dp_res_change *chg,
                             struct gs_dp_model *step)
{
    struct gs_dp_model next;
    char err[256];
    assert_int_equal(gs_dp_model_build(c, g, 2, &next, err, sizeof err), GS_OK);
    assert_int_equal(gs_dp_model_carry(prev, &next, chg, err, sizeof err), GS_OK);
    assert_int_equal(gs_dp_model_withdrawal(prev, &next, chg, step), GS_OK);
    gs_dp_model_fini(prev);
    *prev = next;
}

/*
 * GPU 1 of two under migStrategy mixed: MIG off, then on (1g, 1g, 3g), re-partitioned (2g new,
 * 1g MIG-1-1 kept, 3g kept), off, on again with one 1g. Expected positions and lists by hand:
 *   start  0 nvidia.com/gpu [GPU-0, GPU-1]
 *   on     0 gpu CHANGED [GPU-0] (step [GPU-0]); 1 mig-1g.18gb ADDED [MIG-1-0, MIG-1-1];
 *          2 mig-3g.71gb ADDED [MIG-1-2]
 *   re-partitioned: 0 SAME; 1 CHANGED [MIG-1-1] (step [MIG-1-1]: the kept one stays);
 *          2 SAME; 3 mig-2g.35gb ADDED [MIG-1-3]
 *   off    0 CHANGED [GPU-0, GPU-1] (step [GPU-0]); 1, 2, 3 WITHDRAWN: empty, names kept
 *   on     0 CHANGED [GPU-0]; 1 CHANGED [MIG-1-0] (back on its old position); 2, 3 SAME (empty)
 */
static void test_carry_keeps_positions_across_repartitions(void **state)
{
    (void)state;
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    g[1].mig_capable = true;
    struct gs_dp_model prev, step;
    enum gs_dp_res_change chg[GS_DP_RESOURCES_MAX];
    assert_int_equal(gs_dp_model_build(&c, g, 2, &prev, NULL, 0), GS_OK);
    assert_int_equal(prev.n_resources, 1);

    static const char *const p3[] = {"1g.18gb", "1g.18gb", "3g.71gb"};
    add_mig(&g[1], p3, 3);
    rediscover_round(&c, g, &prev, chg, &step);
    assert_int_equal(prev.n_resources, 3);
    assert_string_equal(prev.resources[0].name, "nvidia.com/gpu");
    assert_string_equal(prev.resources[1].name, "nvidia.com/mig-1g.18gb");
    assert_string_equal(prev.resources[2].name, "nvidia.com/mig-3g.71gb");
    assert_int_equal(chg[0], GS_DP_RES_CHANGED);
    assert_int_equal(chg[1], GS_DP_RES_ADDED);
    assert_int_equal(chg[2], GS_DP_RES_ADDED);
    assert_int_equal(chg[3], GS_DP_RES_SAME);
    assert_string_equal(ids(&prev.resources[0]), "GPU-0");
    assert_string_equal(ids(&prev.resources[1]), "MIG-1-0,MIG-1-1");
    assert_string_equal(ids(&prev.resources[2]), "MIG-1-2");
    assert_int_equal(step.n_resources, 1); /* the new resources come with the second step */
    assert_string_equal(ids(&step.resources[0]), "GPU-0");
    assert_true(step.gpus[1].mig_enabled); /* the step's GPUs are the new ones */
    gs_dp_model_fini(&step);

    static const char *const p3b[] = {"2g.35gb", "1g.18gb", "3g.71gb"};
    add_mig(&g[1], p3b, 3);
    (void)snprintf(g[1].mig[0].uuid, sizeof g[1].mig[0].uuid, "MIG-1-3"); /* a new instance */
    rediscover_round(&c, g, &prev, chg, &step);
    assert_int_equal(prev.n_resources, 4);
    assert_int_equal(chg[0], GS_DP_RES_SAME);
    assert_int_equal(chg[1], GS_DP_RES_CHANGED);
    assert_int_equal(chg[2], GS_DP_RES_SAME);
    assert_int_equal(chg[3], GS_DP_RES_ADDED);
    assert_string_equal(prev.resources[3].name, "nvidia.com/mig-2g.35gb");
    assert_string_equal(ids(&prev.resources[1]), "MIG-1-1");
    assert_string_equal(ids(&prev.resources[3]), "MIG-1-3");
    assert_int_equal(step.n_resources, 3);
    assert_string_equal(ids(&step.resources[1]), "MIG-1-1");
    assert_int_equal(gs_dp_model_find(&step.resources[1], "MIG-1-1"), 0);
    assert_int_equal(gs_dp_model_find(&step.resources[1], "MIG-1-0"), -1);
    assert_int_equal(step.resources[1].devices[0].mig, 1); /* its position in the new GPU */
    assert_string_equal(ids(&step.resources[2]), "MIG-1-2");
    gs_dp_model_fini(&step);
    /* The inventory names GPU 1's resources by name, whatever their positions (1g, 3g, 2g). */
    enum gs_health_state hh[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    char *inv = NULL;
    assert_int_equal(gs_dp_inventory_json(&prev, hh, &inv), GS_OK);
    assert_non_null(strstr(inv,
                           "\"resources\":[\"nvidia.com/mig-1g.18gb\",\"nvidia.com/mig-2g.35gb\","
                           "\"nvidia.com/mig-3g.71gb\"]"));
    free(inv);

    g[1].mig_enabled = false;
    g[1].mig_count = 0;
    rediscover_round(&c, g, &prev, chg, &step);
    assert_int_equal(prev.n_resources, 4);
    assert_int_equal(chg[0], GS_DP_RES_CHANGED);
    for (uint32_t i = 1; i < 4; i++) {
        assert_int_equal(chg[i], GS_DP_RES_WITHDRAWN);
        assert_int_equal(prev.resources[i].n_devices, 0);
        assert_int_equal(step.resources[i].n_devices, 0);
    }
    assert_string_equal(prev.resources[1].endpoint, "gpusched-nvidia.com-mig-1g.18gb.sock");
    assert_string_equal(ids(&prev.resources[0]), "GPU-0,GPU-1");
    assert_string_equal(ids(&step.resources[0]), "GPU-0"); /* GPU 1 comes back in step two */
    /* Withdrawn resources are on no GPU of the inventory: GPU 1 is whole again. */
    assert_int_equal(gs_dp_inventory_json(&prev, hh, &inv), GS_OK);
    assert_null(strstr(inv, "mig-"));
    assert_non_null(strstr(inv, "\"index\":1,\"mem_mib\":143771,\"mig\":[],\"mode\":\"whole\""));
    free(inv);
    /* A withdrawn resource answers like any: an empty list, and no device to allocate. */
    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct gs_dp_view v = {&c, &prev, 1, h, NULL, NULL, NULL};
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_list(&v, &a), GS_OK);
    assert_int_equal(a.status, 0);
    V1beta1__ListAndWatchResponse *r =
        v1beta1__list_and_watch_response__unpack(NULL, a.len, a.data);
    assert_non_null(r);
    assert_int_equal(r->n_devices, 0);
    v1beta1__list_and_watch_response__free_unpacked(r, NULL);
    gs_dp_answer_fini(&a);
    static const char *const gone[] = {"MIG-1-1"};
    int status = 0;
    assert_null(allocate(&c, &prev, "nvidia.com/mig-1g.18gb", h, gone, 1, &status));
    assert_int_equal(status, 3); /* INVALID_ARGUMENT */
    gs_dp_model_fini(&step);

    static const char *const p1[] = {"1g.18gb"};
    add_mig(&g[1], p1, 1);
    rediscover_round(&c, g, &prev, chg, &step);
    assert_int_equal(prev.n_resources, 4);
    assert_int_equal(chg[0], GS_DP_RES_CHANGED);
    assert_int_equal(chg[1], GS_DP_RES_CHANGED);
    assert_int_equal(chg[2], GS_DP_RES_SAME);
    assert_int_equal(chg[3], GS_DP_RES_SAME);
    assert_string_equal(ids(&prev.resources[1]), "MIG-1-0");
    assert_int_equal(step.resources[1].n_devices, 0);
    gs_dp_model_fini(&step);
    gs_dp_model_fini(&prev);
}

/*
 * A container holds MIG-1-1 when GPU 1 is re-partitioned (1g, 1g -> one 2g, MIG-1-2): the
 * rebuilt mig-1g.18gb has no device, and the retained model lists MIG-1-1 there, retired
 * (mig -1); MIG-1-0, held by nobody, is gone. By hand: Unhealthy on the list, never proposed
 * even when offered, Allocate FAILED_PRECONDITION (9), no resource on the GPU in the inventory;
 * the next round with nobody holding it drops it.
 */
static void test_retain_keeps_held_devices_unhealthy(void **state)
{
    (void)state;
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    struct gs_gpu_info g[2];
    dpfx_make_node(g, 2, 1, 0);
    static const char *const p2[] = {"1g.18gb", "1g.18gb"};
    add_mig(&g[1], p2, 2);
    struct gs_dp_model prev, next, step;
    enum gs_dp_res_change chg[GS_DP_RESOURCES_MAX];
    assert_int_equal(gs_dp_model_build(&c, g, 2, &prev, NULL, 0), GS_OK);
    assert_string_equal(ids(res(&prev, "nvidia.com/mig-1g.18gb")), "MIG-1-0,MIG-1-1");

    static const char *const p1[] = {"2g.35gb"};
    add_mig(&g[1], p1, 1);
    (void)snprintf(g[1].mig[0].uuid, sizeof g[1].mig[0].uuid, "MIG-1-2");
    assert_int_equal(gs_dp_model_build(&c, g, 2, &next, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_carry(&prev, &next, chg, NULL, 0), GS_OK);
    static const char *const held[] = {"GPU-0", "MIG-1-1", "MIG-9-9"};
    uint32_t n_ret = 0;
    assert_int_equal(gs_dp_model_retain(&prev, &next, held, 3, &n_ret), GS_OK);
    assert_int_equal(n_ret, 1); /* GPU-0 is still in next; MIG-9-9 was never here */
    const struct gs_dp_resource *r1 = res(&next, "nvidia.com/mig-1g.18gb");
    assert_int_equal(chg[gs_dp_model_resource(&next, "nvidia.com/mig-1g.18gb")],
                     GS_DP_RES_WITHDRAWN);
    assert_string_equal(ids(r1), "MIG-1-1");
    assert_true(r1->devices[0].retired);
    assert_int_equal(r1->devices[0].mig, -1);
    assert_int_equal(r1->devices[0].gpu, 1);
    assert_int_equal(gs_dp_model_find(r1, "MIG-1-1"), 0);
    assert_false(res(&next, "nvidia.com/gpu")->devices[0].retired);
    /* The withdrawal step keeps it (it never disappears from kubelet's view). */
    assert_int_equal(gs_dp_model_withdrawal(&prev, &next, chg, &step), GS_OK);
    assert_string_equal(ids(res(&step, "nvidia.com/mig-1g.18gb")), "MIG-1-1");
    assert_true(res(&step, "nvidia.com/mig-1g.18gb")->devices[0].retired);
    gs_dp_model_fini(&step);

    enum gs_health_state h[2] = {GS_HEALTH_HEALTHY, GS_HEALTH_HEALTHY};
    struct gs_dp_view v = {
        &c,   &next, (uint32_t)gs_dp_model_resource(&next, "nvidia.com/mig-1g.18gb"), h, NULL,
        NULL, NULL};
    struct gs_dp_answer a;
    assert_int_equal(gs_dp_handle_list(&v, &a), GS_OK);
    V1beta1__ListAndWatchResponse *lr =
        v1beta1__list_and_watch_response__unpack(NULL, a.len, a.data);
    assert_non_null(lr);
    assert_int_equal(lr->n_devices, 1);
    assert_string_equal(lr->devices[0]->id, "MIG-1-1");
    assert_string_equal(lr->devices[0]->health, "Unhealthy");
    v1beta1__list_and_watch_response__free_unpacked(lr, NULL);
    gs_dp_answer_fini(&a);
    static const char *const one[] = {"MIG-1-1"};
    assert_string_equal(prefer(&c, &next, "nvidia.com/mig-1g.18gb", one, 1, NULL, 0, 1), "");
    int status = 0;
    assert_null(allocate(&c, &next, "nvidia.com/mig-1g.18gb", h, one, 1, &status));
    assert_int_equal(status, 9); /* FAILED_PRECONDITION */
    char *inv = NULL;
    assert_int_equal(gs_dp_inventory_json(&next, h, &inv), GS_OK);
    assert_null(strstr(inv, "mig-1g"));
    assert_non_null(strstr(inv, "\"resources\":[\"nvidia.com/mig-2g.35gb\"]"));
    free(inv);

    /* Nobody holds it any more: the next round drops it. */
    struct gs_dp_model again;
    assert_int_equal(gs_dp_model_build(&c, g, 2, &again, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_carry(&next, &again, chg, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_retain(&next, &again, NULL, 0, &n_ret), GS_OK);
    assert_int_equal(n_ret, 0);
    assert_int_equal(res(&again, "nvidia.com/mig-1g.18gb")->n_devices, 0);
    gs_dp_model_fini(&again);
    gs_dp_model_fini(&next);
    gs_dp_model_fini(&prev);
}

/* A prev of 32 positions: nvidia.com/gpu and 31 others ("example.com/old-NN"). */
static void full_prev(const struct gs_dp_config *c, const struct gs_gpu_info *g,
                      struct gs_dp_model *prev, bool others_have_devices)
{
    assert_int_equal(gs_dp_model_build(c, g, 1, prev, NULL, 0), GS_OK);
    for (uint32_t i = 1; i < GS_DP_RESOURCES_MAX; i++) {
        struct gs_dp_resource *r = &prev->resources[i];
        (void)snprintf(r->name, sizeof r->name, "example.com/old-%02u", (unsigned)i);
        (void)snprintf(r->endpoint, sizeof r->endpoint, "gpusched-example.com-old-%02u.sock",
                       (unsigned)i);
        if (others_have_devices) {
            r->devices = calloc(1, sizeof *r->devices);
            r->by_id = calloc(1, sizeof *r->by_id);
            assert_non_null(r->devices);
            assert_non_null(r->by_id);
            (void)snprintf(r->devices[0].id, sizeof r->devices[0].id, "old-%u", (unsigned)i);
            r->n_devices = 1;
        }
    }
    prev->n_resources = GS_DP_RESOURCES_MAX;
}

/*
 * All 32 positions used: a new resource takes the first one whose resource was already empty
 * before and is not in the new model (position 1, example.com/old-01), REPLACED; its withdrawal
 * step still shows the old empty resource there. When every position holds devices until this
 * round, there is no room: GS_ELIMIT, and next is left as built.
 */
static void test_carry_reuses_an_empty_position_when_full(void **state)
{
    (void)state;
    struct gs_dp_config c;
    dpfx_parse_ok("version: v1\nflags: {migStrategy: mixed}\n", &c);
    struct gs_gpu_info g[1], gm[1];
    dpfx_make_node(g, 1, 1, 0);
    memcpy(gm, g, sizeof g);
    static const char *const p1[] = {"1g.18gb"};
    add_mig(&gm[0], p1, 1);
    struct gs_dp_model prev, next, step;
    enum gs_dp_res_change chg[GS_DP_RESOURCES_MAX];
    char err[256];

    full_prev(&c, g, &prev, false);
    assert_int_equal(gs_dp_model_build(&c, gm, 1, &next, NULL, 0), GS_OK);
    assert_int_equal(next.n_resources, 1);
    assert_int_equal(gs_dp_model_carry(&prev, &next, chg, err, sizeof err), GS_OK);
    assert_int_equal(next.n_resources, GS_DP_RESOURCES_MAX);
    assert_int_equal(chg[0], GS_DP_RES_WITHDRAWN); /* nvidia.com/gpu had GPU-0 */
    assert_int_equal(chg[1], GS_DP_RES_REPLACED);
    assert_string_equal(next.resources[1].name, "nvidia.com/mig-1g.18gb");
    assert_string_equal(ids(&next.resources[1]), "MIG-0-0");
    assert_int_equal(chg[2], GS_DP_RES_SAME);
    assert_string_equal(next.resources[2].name, "example.com/old-02");
    assert_int_equal(gs_dp_model_withdrawal(&prev, &next, chg, &step), GS_OK);
    assert_string_equal(step.resources[1].name, "example.com/old-01");
    assert_int_equal(step.resources[1].n_devices, 0);
    assert_int_equal(step.resources[0].n_devices, 0);
    gs_dp_model_fini(&step);
    gs_dp_model_fini(&next);
    gs_dp_model_fini(&prev);

    full_prev(&c, g, &prev, true);
    assert_int_equal(gs_dp_model_build(&c, gm, 1, &next, NULL, 0), GS_OK);
    assert_int_equal(gs_dp_model_carry(&prev, &next, chg, err, sizeof err), GS_ELIMIT);
    assert_non_null(strstr(err, "nvidia.com/mig-1g.18gb is new"));
    assert_int_equal(next.n_resources, 1); /* untouched */
    assert_string_equal(ids(&next.resources[0]), "MIG-0-0");
    gs_dp_model_fini(&next);
    gs_dp_model_fini(&prev);
}

int main(void)
{
    for (size_t i = 0; i < GS_GPU_MAX; i++)
        all_healthy[i] = GS_HEALTH_HEALTHY;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_minimal_keeps_defaults),
        cmocka_unit_test(test_config_reads_every_key),
        cmocka_unit_test(test_config_errors_name_line_column_and_key),
        cmocka_unit_test(test_config_read_missing_file_is_eio),
        cmocka_unit_test(test_config_accepts_a_configmap_manifest),
        cmocka_unit_test(test_model_none_strategy_advertises_mig_gpus_whole),
        cmocka_unit_test(test_model_single_strategy_needs_one_profile_on_every_gpu),
        cmocka_unit_test(test_model_mixed_strategy_names_profiles),
        cmocka_unit_test(test_model_time_slicing_selects_devices_and_renames),
        cmocka_unit_test(test_model_device_in_two_entries_is_an_error),
        cmocka_unit_test(test_model_long_ids_and_limits),
        cmocka_unit_test(test_config_fractions_default_bounds_and_one_mode),
        cmocka_unit_test(test_model_fractions_advertise_slices_per_gpu),
        cmocka_unit_test(test_preferred_whole_gpus_follow_nvlink_then_numa),
        cmocka_unit_test(test_preferred_whole_gpus_is_exact_up_to_16),
        cmocka_unit_test(test_preferred_whole_gpus_are_the_core_pick),
        cmocka_unit_test(test_preferred_never_proposes_an_unhealthy_device),
        cmocka_unit_test(test_preferred_sizes_are_bounded_by_the_resource),
        cmocka_unit_test(test_preferred_replicas_pack_onto_shared_gpus),
        cmocka_unit_test(test_allocate_names_units_and_refuses_bad_ids),
        cmocka_unit_test(test_list_marks_only_the_unhealthy_gpu_devices),
        cmocka_unit_test(test_config_rediscover_interval),
        cmocka_unit_test(test_config_mig_dynamic),
        cmocka_unit_test(test_gpu_layout_same_looks_at_mig_only),
        cmocka_unit_test(test_carry_keeps_positions_across_repartitions),
        cmocka_unit_test(test_carry_reuses_an_empty_position_when_full),
        cmocka_unit_test(test_retain_keeps_held_devices_unhealthy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
