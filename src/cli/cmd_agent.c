/*
 * `gpusched agent`: the node agent (Kubernetes device plugin, GPU health, metrics), and
 * `gpusched agent labels`: GPU Feature Discovery-style node labels. Both read GPUs from a
 * backend (NVML, or a fake node from YAML for tests and laptops) and the agent configuration;
 * the work is in src/agent (include/gpusched/devplugin.h, gfd_labels.h).
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, gethostname */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gpusched/devplugin.h"
#include "gpusched/err.h"
#include "gpusched/gfd_labels.h"
#include "gpusched/gpu.h"
#include "gpusched/kube.h"
#include "gpusched/log.h"

static const char *const usage_agent =
    "usage: gpusched agent [options]\n"
    "       gpusched agent labels [options] [--timestamp]\n"
    "\n"
    "Runs the node agent: a Kubernetes device plugin (v1beta1) for the node's GPUs (whole GPUs,\n"
    "MIG devices, time-sliced replicas, gpusched.io/gpu-slice fraction tickets), GPU health from\n"
    "XID/ECC events with recovery, and a dcgm-exporter-compatible /metrics endpoint with pod\n"
    "labels from kubelet's PodResources API.\n"
    "`labels` prints GPU Feature Discovery node labels, one key=value per line, and exits.\n"
    "\n"
    "options:\n"
    "  --config FILE               agent configuration (YAML), or a ConfigMap manifest whose\n"
    "                              data.config.yaml it is (deploy/agent-config.yaml);\n"
    "                              defaults apply without one\n"
    "  --gpu-backend nvml|fake     where GPUs come from (default nvml); fake:FILE is short for\n"
    "                              --gpu-backend fake --fake-gpus FILE\n"
    "  --fake-gpus FILE            fake node for --gpu-backend fake (see deploy/fake-gpus.yaml)\n"
    "  --kubelet-dir DIR           kubelet's device plugin directory\n"
    "                              (default " GS_DP_DEFAULT_PLUGIN_DIR ")\n"
    "  --pod-resources-socket PATH kubelet's PodResources socket, \"\" for no pod labels\n"
    "                              (default " GS_DP_DEFAULT_POD_RESOURCES_SOCKET ")\n"
    "  --proc-root DIR             where GPU processes' cgroups are read to find their pods, for\n"
    "                              per-pod utilisation and memory, MIG pods bounded by their\n"
    "                              instance's own values (default /proc; the agent\n"
    "                              needs hostPID: true; \"\" for no per-pod values)\n"
    "  --metrics-addr HOST:PORT    /metrics and /healthz address, \"\" for none\n"
    "                              (default " GS_DP_DEFAULT_METRICS_ADDR "; port 0 picks one)\n"
    "  --rediscover-s S            re-read the GPUs' MIG layouts every S seconds and advertise\n"
    "                              changes without a restart (default 30; 0 never; overrides\n"
    "                              flags.rediscoverInterval; decimals allowed, at least 0.1)\n"
    "  --node-name NAME            the Node's name: Hostname label of metrics and the Node the\n"
    "                              inventory goes on (default $NODE_NAME, else the host name)\n"
    "  --kubeconfig FILE           API server to publish the GPU inventory on (Node annotation\n"
    "                              gpusched.io/gpus), to read pod assignments from\n"
    "                              (gpusched.io/assigned-gpus) and the names of the node's pods\n"
    "                              (pod, namespace, container labels of the per-pod metrics,\n"
    "                              else pod_uid only); default: the in-cluster service\n"
    "                              account when KUBERNETES_SERVICE_HOST is set, else none (the\n"
    "                              agent then serves kubelet alone and publishes nothing)\n"
    "  --log-format text|json      text (default): \"TIME agent: MESSAGE\"; json: one JSON\n"
    "                              object per line: ts, level (info; warn for warnings),\n"
    "                              component (agent),\n"
    "                              msg, and pod, node, queue when the message names them\n"
    "  --timestamp                 labels: add nvidia.com/gfd.timestamp\n"
    "  -h, --help                  this text\n"
    "\n"
    "Options override the configuration file. The agent stops cleanly (its sockets removed) on\n"
    "SIGTERM, SIGINT or SIGHUP.\n"
    "exit status: 0 done, 1 runtime failure (GPUs, sockets), 2 bad usage or configuration.\n";

/*
 * SIGTERM, SIGINT and SIGHUP stop the agent cleanly. They are blocked in every thread and taken
 * by one thread of their own with sigwait(), which calls gs_dp_agent_stop(): no asynchronous
 * handler, so no signal can wait unhandled in a thread that happens to be blocked elsewhere
 * (under ThreadSanitizer a SIGTERM was lost that way about once in eight runs).
 */
struct stopper {
    struct gs_dp_agent *agent;
    sigset_t set;
    atomic_int done; /* set once gs_dp_agent_run() returned: the thread ends */
};

/** The signals that stop the agent: SIGHUP too, so a closed terminal stops it cleanly. */
static void stop_signals(sigset_t *set)
{
    (void)sigemptyset(set);
    (void)sigaddset(set, SIGTERM);
    (void)sigaddset(set, SIGINT);
    (void)sigaddset(set, SIGHUP);
}

static void *stopper_main(void *arg)
{
    struct stopper *st = arg;
    const struct timespec tick = {0, 200000000L}; /* 200 ms */
    while (!atomic_load(&st->done))
        if (sigtimedwait(&st->set, NULL, &tick) > 0)
            gs_dp_agent_stop(st->agent); /* again on a second signal: still a clean stop */
    return NULL;
}

/* --log-format; set by gs_cmd_agent before any thread logs, read-only after. */
static enum gs_log_format agent_log_format = GS_LOG_FORMAT_TEXT;

/* The agent's lines carry no level field of their own: a JSON line says "warn" for a line that
 * begins "warning: " (how src/agent words them), else "info". */
static void log_line(void *ctx, const char *line)
{
    (void)ctx;
    if (agent_log_format == GS_LOG_FORMAT_JSON) {
        bool warning = strncmp(line, "warning: ", 9) == 0;
        struct gs_log_json_sink js = {.level = warning ? "warn" : "info", .component = "agent"};
        gs_log_stderr_json(&js, line);
    } else {
        gs_log_stderr_stamped((void *)"agent:", line);
    }
}

struct args {
    const char *config;        /**< --config */
    const char *backend;       /**< "nvml" or "fake" */
    const char *fake_gpus;     /**< --fake-gpus */
    const char *kubelet_dir;   /**< --kubelet-dir */
    const char *pod_resources; /**< --pod-resources-socket */
    const char *proc_root;     /**< --proc-root */
    const char *metrics_addr;  /**< --metrics-addr */
    const char *node_name;     /**< --node-name */
    const char *kubeconfig;    /**< --kubeconfig */
    const char *rediscover_s;  /**< --rediscover-s */
    const char *log_format;    /**< --log-format: "text" (NULL) or "json" */
    bool labels;               /**< the labels subcommand */
    bool timestamp;            /**< --timestamp */
};

/* Returns 0, 1 for -h, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, struct args *a)
{
    memset(a, 0, sizeof *a);
    a->backend = "nvml";
    int i = 0;
    if (argc > 0 && strcmp(argv[0], "labels") == 0) {
        a->labels = true;
        i = 1;
    }
    for (; i < argc; i++) {
        const char *o = argv[i];
        const char **slot = NULL;
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
            return 1;
        if (strcmp(o, "--timestamp") == 0 && a->labels) {
            a->timestamp = true;
            continue;
        }
        if (strcmp(o, "--config") == 0)
            slot = &a->config;
        else if (strcmp(o, "--gpu-backend") == 0)
            slot = &a->backend;
        else if (strcmp(o, "--fake-gpus") == 0)
            slot = &a->fake_gpus;
        else if (strcmp(o, "--kubelet-dir") == 0)
            slot = &a->kubelet_dir;
        else if (strcmp(o, "--pod-resources-socket") == 0)
            slot = &a->pod_resources;
        else if (strcmp(o, "--metrics-addr") == 0)
            slot = &a->metrics_addr;
        else if (strcmp(o, "--proc-root") == 0 && !a->labels)
            slot = &a->proc_root;
        else if (strcmp(o, "--node-name") == 0)
            slot = &a->node_name;
        else if (strcmp(o, "--kubeconfig") == 0 && !a->labels)
            slot = &a->kubeconfig;
        else if (strcmp(o, "--rediscover-s") == 0 && !a->labels)
            slot = &a->rediscover_s;
        else if (strcmp(o, "--log-format") == 0 && !a->labels)
            slot = &a->log_format;
        if (slot == NULL) {
            (void)fprintf(stderr, "gpusched agent: unknown option '%s' (see --help)\n", o);
            return 2;
        }
        if (i + 1 >= argc) {
            (void)fprintf(stderr, "gpusched agent: %s needs a value\n", o);
            return 2;
        }
        *slot = argv[++i];
    }
    if (a->log_format != NULL && gs_log_format_parse(a->log_format, &agent_log_format) != GS_OK) {
        (void)fprintf(stderr, "gpusched agent: --log-format must be text or json, not '%s'\n",
                      a->log_format);
        return 2;
    }
    if (strncmp(a->backend, "fake:", 5) == 0) {
        a->fake_gpus = a->backend + 5;
        a->backend = "fake";
    }
    if (strcmp(a->backend, "nvml") != 0 && strcmp(a->backend, "fake") != 0) {
        (void)fprintf(stderr, "gpusched agent: --gpu-backend: '%s' is not nvml or fake\n",
                      a->backend);
        return 2;
    }
    if (strcmp(a->backend, "fake") == 0 && (a->fake_gpus == NULL || a->fake_gpus[0] == '\0')) {
        (void)fprintf(stderr, "gpusched agent: --gpu-backend fake needs --fake-gpus FILE\n");
        return 2;
    }
    return 0;
}

/* Copies an option over a configuration string; 2 when it does not fit. */
static int override(char *dst, size_t cap, const char *value, const char *option)
{
    if (value == NULL)
        return 0;
    if (strlen(value) >= cap) {
        (void)fprintf(stderr, "gpusched agent: %s: value longer than %zu bytes\n", option, cap - 1);
        return 2;
    }
    memcpy(dst, value, strlen(value) + 1);
    return 0;
}

static int load_config(const struct args *a, struct gs_dp_config *cfg)
{
    gs_dp_config_default(cfg);
    if (a->config != NULL) {
        struct gs_diag d;
        int rc = gs_dp_config_read(a->config, cfg, &d);
        if (rc != GS_OK) {
            char text[700];
            gs_diag_format(&d, text, sizeof text);
            (void)fprintf(stderr, "gpusched agent: %s\n", text);
            return rc == GS_ENOMEM ? 1 : 2;
        }
    }
    if (override(cfg->plugin_dir, sizeof cfg->plugin_dir, a->kubelet_dir, "--kubelet-dir") ||
        override(cfg->pod_resources_socket, sizeof cfg->pod_resources_socket, a->pod_resources,
                 "--pod-resources-socket") ||
        override(cfg->proc_root, sizeof cfg->proc_root, a->proc_root, "--proc-root") ||
        override(cfg->metrics_addr, sizeof cfg->metrics_addr, a->metrics_addr, "--metrics-addr"))
        return 2;
    if (a->rediscover_s != NULL) {
        /* Seconds, decimals allowed ("0.5"); 0 turns rediscovery off. */
        char *end = NULL;
        errno = 0;
        double sec = strtod(a->rediscover_s, &end);
        if (a->rediscover_s[0] < '0' || a->rediscover_s[0] > '9' || *end != '\0' || errno != 0 ||
            !(sec >= 0 && sec <= 86400) || (sec > 0 && sec * 1000 < GS_DP_REDISCOVER_MIN_MS)) {
            (void)fprintf(stderr,
                          "gpusched agent: --rediscover-s: '%s' is not 0 or a number of seconds "
                          "from 0.1 to 86400\n",
                          a->rediscover_s);
            return 2;
        }
        cfg->rediscover_ms = (int64_t)(sec * 1000 + 0.5);
    }
    return 0;
}

static int open_backend(const struct args *a, const struct gs_clock *clock,
                        struct gs_gpu_backend **b)
{
    if (strcmp(a->backend, "fake") == 0) {
        struct gs_diag d;
        int rc = gs_gpu_open_fake(a->fake_gpus, clock, b, &d);
        if (rc != GS_OK) {
            char text[700];
            gs_diag_format(&d, text, sizeof text);
            (void)fprintf(stderr, "gpusched agent: %s\n", text);
            return rc == GS_ENOMEM ? 1 : 2;
        }
        return 0;
    }
    char err[512];
    if (gs_gpu_open_nvml(clock, b, err, sizeof err) != GS_OK) {
        (void)fprintf(stderr, "gpusched agent: %s\n", err);
        return 1;
    }
    return 0;
}

static int run_labels(const struct args *a, const struct gs_dp_config *cfg,
                      struct gs_gpu_backend *b)
{
    static struct gs_gpu_info gpus[GS_GPU_MAX];
    static struct gs_gfd_labels labels;
    struct gs_gpu_system sys;
    uint32_t n = 0;
    if (gs_gpu_system(b, &sys) != GS_OK || gs_gpu_count(b, &n) != GS_OK) {
        (void)fprintf(stderr, "gpusched agent labels: %s\n", gs_gpu_last_error(b));
        return 1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (gs_gpu_info(b, i, &gpus[i]) != GS_OK) {
            (void)fprintf(stderr, "gpusched agent labels: GPU %u: %s\n", (unsigned)i,
                          gs_gpu_last_error(b));
            return 1;
        }
    struct gs_gfd_options opt = {.replicas = gs_dp_config_gpu_replicas(cfg),
                                 .mig_strategy = cfg->mig_strategy,
                                 .timestamp_s = a->timestamp ? (int64_t)time(NULL) : 0};
    int rc = gs_gfd_labels(&sys, gpus, n, &opt, &labels);
    if (rc != GS_OK) {
        (void)fprintf(stderr, "gpusched agent labels: %s%s\n", gs_strerror(rc),
                      rc == GS_EINVAL ? " (migStrategy single needs every GPU in MIG mode "
                                        "with one profile)"
                                      : "");
        return 2;
    }
    if (gs_gfd_labels_write(&labels, stdout) != GS_OK || fflush(stdout) != 0) {
        (void)fprintf(stderr, "gpusched agent labels: cannot write the labels\n");
        return 1;
    }
    return 0;
}

static int run_agent(const struct args *a, const struct gs_dp_config *cfg, struct gs_gpu_backend *b)
{
    char node[256] = "";
    const char *env_node = getenv("NODE_NAME");
    if (a->node_name != NULL)
        (void)snprintf(node, sizeof node, "%s", a->node_name);
    else if (env_node != NULL && env_node[0] != '\0')
        (void)snprintf(node, sizeof node, "%s", env_node);
    else if (gethostname(node, sizeof node - 1) != 0)
        node[0] = '\0';
    node[sizeof node - 1] = '\0';

    /* The Kubernetes side: --kubeconfig, else in-cluster, else none. */
    struct gs_kube_config kcfg;
    memset(&kcfg, 0, sizeof kcfg);
    bool have_kube = false;
    struct gs_kube_diag kd;
    int krc = GS_ENOENT;
    if (a->kubeconfig != NULL)
        krc = gs_kube_config_load_file(a->kubeconfig, &kcfg, &kd);
    else if (getenv("KUBERNETES_SERVICE_HOST") != NULL)
        krc = gs_kube_config_load_in_cluster(NULL, &kcfg, &kd);
    if (krc == GS_OK) {
        have_kube = true;
        char line[600];
        (void)snprintf(line, sizeof line, "kubernetes: API server %s, node %s", kcfg.server, node);
        log_line(NULL, line);
    } else if (a->kubeconfig != NULL || getenv("KUBERNETES_SERVICE_HOST") != NULL) {
        char text[700];
        gs_kube_diag_format(&kd, text, sizeof text);
        (void)fprintf(stderr, "gpusched agent: %s\n", text);
        return krc == GS_ENOMEM ? 1 : 2;
    } else {
        log_line(NULL, "kubernetes: no configuration (--kubeconfig, in-cluster): the GPU "
                       "inventory is not published and pod assignments are not read");
    }

    struct gs_dp_agent_options opt = {.cfg = cfg,
                                      .backend = b,
                                      .node_name = node,
                                      .kube = have_kube ? &kcfg : NULL,
                                      .log = log_line,
                                      .log_ctx = NULL};
    struct gs_dp_agent *agent = NULL;
    char err[600];
    int rc = gs_dp_agent_new(&opt, &agent, err, sizeof err);
    gs_kube_config_fini(&kcfg);
    if (rc != GS_OK) {
        (void)fprintf(stderr, "gpusched agent: %s\n", err);
        return rc == GS_EINVAL ? 2 : 1;
    }
    const struct gs_dp_model *m = gs_dp_agent_model(agent);
    for (uint32_t i = 0; i < m->n_resources; i++) {
        char line[300];
        (void)snprintf(line, sizeof line, "resource %s: %u devices", m->resources[i].name,
                       (unsigned)m->resources[i].n_devices);
        log_line(NULL, line);
    }
    if (cfg->metrics_addr[0] != '\0') {
        char line[300];
        (void)snprintf(line, sizeof line, "metrics on %s (port %u)", cfg->metrics_addr,
                       (unsigned)gs_dp_agent_metrics_port(agent));
        log_line(NULL, line);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &sa, NULL);
    struct stopper st = {.agent = agent};
    atomic_init(&st.done, 0);
    stop_signals(&st.set);
    pthread_t stopper;
    if (pthread_create(&stopper, NULL, stopper_main, &st) != 0) {
        gs_dp_agent_free(agent);
        (void)fprintf(stderr, "gpusched agent: cannot start the signal thread\n");
        return 1;
    }

    rc = gs_dp_agent_run(agent);

    atomic_store(&st.done, 1);
    (void)pthread_join(stopper, NULL);
    gs_dp_agent_free(agent);
    return rc == GS_OK ? 0 : 1;
}

int gs_cmd_agent(int argc, char **argv)
{
    struct args a;
    int rc = parse_args(argc, argv, &a);
    if (rc == 1) {
        (void)fputs(usage_agent, stdout);
        return 0;
    }
    if (rc != 0)
        return rc;
    static struct gs_dp_config cfg;
    rc = load_config(&a, &cfg);
    if (rc != 0)
        return rc;
    if (!a.labels) {
        /* Blocked from here to the exit, before the backend or the metrics server can start a
         * thread (threads inherit the mask), so none of them takes a stop signal by its default
         * action; run_agent()'s stopper thread takes them. A signal that comes before it runs
         * waits pending; one after it ended is discarded with the process. */
        sigset_t set;
        stop_signals(&set);
        (void)pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    struct gs_clock clock = gs_clock_monotonic();
    struct gs_gpu_backend *b = NULL;
    rc = open_backend(&a, &clock, &b);
    if (rc != 0)
        return rc;
    rc = a.labels ? run_labels(&a, &cfg, b) : run_agent(&a, &cfg, b);
    gs_gpu_close(b);
    return rc;
}
