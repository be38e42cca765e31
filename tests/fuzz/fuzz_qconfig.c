/*
 * libFuzzer target for the queue configuration loader: every input is parsed as a
 * configuration; one that parses is applied to a fresh engine and asked to assign a few pods.
 * Besides the sanitizers' checks it asserts the loader's contract: a failed parse returns no
 * configuration and a diagnostic with a message and a sane position; a configuration that
 * parses is accepted whole by the engine (the loader checks everything the engine checks),
 * leaves the engine's invariants intact, and assigns pods only to leaf queues and known
 * PriorityClasses. A broken promise aborts, which the fuzzer reports as a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/qconfig.h"
#include "gpusched/tenant.h"
#include "gpusched/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_failure(int rc, const struct gs_qconfig *qc, const struct gs_diag *d)
{
    char text[700];

    check(rc == GS_EPARSE || rc == GS_EIO || rc == GS_ENOMEM);
    check(qc == NULL);
    check(d->msg[0] != '\0');
    check(d->line > 0 || d->column == 0);
    check(memchr(d->field, '\0', sizeof d->field) != NULL);
    check(strcmp(d->file, "fuzz") == 0);
    int len = gs_diag_format(d, text, sizeof text);
    check(len > 0 && (size_t)len == strlen(text));
}

/* Assigns one pod and checks the answer against the engine the configuration was applied to. */
static void check_assign(const struct gs_qconfig *qc, const struct gs_engine *e, const char *name,
                         const char *qos, uint32_t num_gpu, const char *spec)
{
    struct gs_trace_pod p;
    struct gs_qconfig_assignment a;

    memset(&p, 0, sizeof p);
    p.name = (char *)name;
    p.qos = (char *)qos;
    p.num_gpu = num_gpu;
    p.gpu_milli = num_gpu ? 1000 : 0;
    p.gpu_spec = (char *)spec;
    p.phase = (char *)"";
    int rc = gs_qconfig_assign(qc, &p, &a);
    /* qconfig.h: GS_ENOENT when no queue or no PriorityClass applies; the queue is then the
     * one found (NULL if none) and priority_class is NULL. */
    check(rc == GS_OK || rc == GS_ENOENT);
    if (rc == GS_ENOENT) {
        check(a.priority_class == NULL);
        if (a.queue == NULL)
            return;
    }
    int q = gs_engine_find_queue(e, a.queue);
    struct gs_queue_info in;
    check(q > 0 && gs_engine_queue_info(e, (uint32_t)q, &in) == GS_OK && in.leaf);
    if (rc == GS_OK)
        check(gs_engine_find_priority_class(e, a.priority_class) >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An empty input still needs a valid pointer. */
    const char *buf = size > 0 ? (const char *)data : "";
    struct gs_qconfig *qc = (struct gs_qconfig *)&size;
    struct gs_diag d;
    int rc = gs_qconfig_parse(buf, size, "fuzz", &qc, &d);

    if (rc != GS_OK) {
        check_failure(rc, qc, &d);
        return 0;
    }
    check(qc != NULL && d.msg[0] == '\0');
    check(gs_qconfig_min_runtime_ms(qc) >= 0);

    struct gs_cluster *c = NULL;
    struct gs_engine *e = NULL;
    struct gs_node_spec node = {.name = "n0",
                                .cpu_milli = 64000,
                                .mem_mib = 1 << 20,
                                .pods_max = 110,
                                .gpu_count = 8,
                                .gpu_model = "V100M16"};
    struct gs_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = "bestfit";
    check(gs_cluster_new(&c) == GS_OK);
    check(gs_cluster_add_node(c, &node, NULL) == GS_OK);
    check(gs_engine_new(c, &cfg, &e) == GS_OK);
    rc = gs_qconfig_apply(qc, e, &d);
    check(rc == GS_OK || rc == GS_ENOMEM);
    if (rc == GS_OK) {
        char msg[256];
        check(gs_engine_check(e, msg, sizeof msg) == GS_OK);
        static const char *const qos[] = {"LS", "Guaranteed", "Burstable", "BE", "", "ls"};
        static const char *const names[] = {"openb-pod-0000", "job-1", "a", ""};
        static const char *const specs[] = {"", "V100M16", "T4|V100M32|G2", "A"};
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 4; j++)
                check_assign(qc, e, names[j], qos[i], (uint32_t)(i + j) % 10, specs[(i + j) % 4]);
        /* A name taken from the input exercises the hash with arbitrary bytes. */
        char name[64];
        size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
        memcpy(name, buf, n);
        name[n] = '\0';
        check_assign(qc, e, name, "BE", 1, "");
    }
    gs_engine_free(e);
    gs_cluster_free(c);
    gs_qconfig_free(qc);
    return 0;
}
