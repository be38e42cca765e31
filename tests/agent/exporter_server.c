/*
 * A small node agent for tests: the fake GPU backend, the health machine and the exporter on
 * a loopback port, wired as the real agent wires them. It samples every GPU each 100 ms,
 * feeds XID/ECC events to the health machine and publishes a snapshot with the attribution
 * table given on the command line, and with --proc-root the per-pod values of the GPUs'
 * scripted processes, mapped to pods through that directory's <pid>/cgroup files.
 *
 *   exporter_server FAKE.yaml PORT_FILE [--seconds N] [--hostname H] [--proc-root DIR]
 *                   [--attr DEVICE_ID=NAMESPACE/POD/CONTAINER]...
 *
 * The bound port is written to PORT_FILE (through a rename, so a reader never sees half of
 * it). The program stops on SIGTERM or SIGINT, or after N seconds (default 60) so that a
 * crashed test script cannot leave it behind.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, rename */

#include "gpusched/err.h"
#include "gpusched/exporter.h"
#include "gpusched/gpu.h"
#include "gpusched/health.h"
#include "gpusched/podmap.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

struct ctx {
    struct gs_gpu_backend *b;
};

static int probe(void *c, uint32_t gpu, uint64_t *resets)
{
    struct gs_gpu_sample s;
    int rc = gs_gpu_sample(((struct ctx *)c)->b, gpu, &s);
    if (rc == 0)
        *resets = s.resets;
    return rc;
}

static void log_transition(void *c, const struct gs_health_transition *t)
{
    (void)c;
    fprintf(stderr, "exporter_server: %s\n", t->text);
}

static int parse_attr(const char *arg, struct gs_exporter_attr *a)
{
    memset(a, 0, sizeof *a);
    const char *eq = strchr(arg, '=');
    if (eq == NULL || (size_t)(eq - arg) >= sizeof a->device_id)
        return GS_EINVAL;
    memcpy(a->device_id, arg, (size_t)(eq - arg));
    char ns[64], pod[254], ctr[64];
    if (sscanf(eq + 1, "%63[^/]/%253[^/]/%63s", ns, pod, ctr) != 3)
        return GS_EINVAL;
    snprintf(a->namespace_name, sizeof a->namespace_name, "%s", ns);
    snprintf(a->pod, sizeof a->pod, "%s", pod);
    snprintf(a->container, sizeof a->container, "%s", ctr);
    return GS_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s FAKE.yaml PORT_FILE [--seconds N] [--hostname H] "
                "[--proc-root DIR] [--attr ID=NS/POD/CONTAINER]...\n",
                argv[0]);
        return 2;
    }
    static struct gs_exporter_attr attr[GS_EXPORTER_ATTR_MAX];
    uint32_t n_attr = 0;
    long seconds = 60;
    const char *hostname = "test-node";
    const char *proc_root = NULL;
    static struct gs_exporter_podval podval[GS_EXPORTER_PODVAL_MAX];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--hostname") == 0 && i + 1 < argc) {
            hostname = argv[++i];
        } else if (strcmp(argv[i], "--proc-root") == 0 && i + 1 < argc) {
            proc_root = argv[++i];
        } else if (strcmp(argv[i], "--attr") == 0 && i + 1 < argc &&
                   n_attr < GS_EXPORTER_ATTR_MAX &&
                   parse_attr(argv[i + 1], &attr[n_attr]) == GS_OK) {
            n_attr++;
            i++;
        } else {
            fprintf(stderr, "exporter_server: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int rc = 1;
    struct gs_clock clock = gs_clock_monotonic();
    struct ctx c = {NULL};
    struct gs_health *h = NULL;
    struct gs_exporter *e = NULL;
    static struct gs_exporter_gpu gpus[GS_GPU_MAX];
    struct gs_diag d;
    if (gs_gpu_open_fake(argv[1], &clock, &c.b, &d) != GS_OK) {
        char text[600];
        gs_diag_format(&d, text, sizeof text);
        fprintf(stderr, "exporter_server: %s\n", text);
        goto out;
    }
    uint32_t n;
    gs_gpu_count(c.b, &n);
    for (uint32_t i = 0; i < n; i++)
        gs_gpu_info(c.b, i, &gpus[i].info);

    struct gs_health_config cfg;
    gs_health_config_default(&cfg);
    struct gs_health_callbacks cb = {.probe = probe, .log = log_transition, .ctx = &c};
    if (gs_health_new(&cfg, n, &clock, &cb, &h) != GS_OK || gs_exporter_new(0, &e) != GS_OK)
        goto out;
    uint16_t port = 0;
    if (gs_exporter_start(e, "127.0.0.1", 0, &port) != GS_OK) {
        fprintf(stderr, "exporter_server: cannot listen on 127.0.0.1\n");
        goto out;
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *pf = fopen(tmp, "w");
    if (pf == NULL || fprintf(pf, "%u\n", (unsigned)port) < 0 || fclose(pf) != 0 ||
        rename(tmp, argv[2]) != 0) {
        fprintf(stderr, "exporter_server: cannot write %s\n", argv[2]);
        goto out;
    }
    fprintf(stderr, "exporter_server: serving on 127.0.0.1:%u\n", (unsigned)port);

    int64_t end_ms = clock.now_ms(NULL) + seconds * 1000;
    while (!stop && clock.now_ms(NULL) < end_ms) {
        struct gs_gpu_event ev;
        if (gs_gpu_wait_event(c.b, 100, &ev) == GS_OK)
            gs_health_on_event(h, &ev);
        gs_health_tick(h);
        for (uint32_t i = 0; i < n; i++) {
            gpus[i].have_sample = gs_gpu_sample(c.b, i, &gpus[i].sample) == GS_OK;
            gpus[i].have_health = true;
            gpus[i].health = gs_health_state(h, i);
            gs_health_counters(h, i, &gpus[i].counters);
        }
        uint32_t n_podval = 0;
        if (proc_root != NULL)
            (void)gs_podmap_collect(c.b, proc_root, gpus, n, podval, GS_EXPORTER_PODVAL_MAX,
                                    &n_podval);
        struct gs_exporter_snapshot s = {.n_gpus = n,
                                         .gpus = gpus,
                                         .n_attr = n_attr,
                                         .attr = attr,
                                         .n_podval = n_podval,
                                         .podval = podval};
        snprintf(s.hostname, sizeof s.hostname, "%s", hostname);
        gs_exporter_update(e, &s);
    }
    rc = 0;
out:
    gs_exporter_free(e);
    gs_health_free(h);
    gs_gpu_close(c.b);
    return rc;
}
