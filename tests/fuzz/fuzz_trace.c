/*
 * libFuzzer target for the trace readers: every input is read as a node list and as a pod
 * list. Besides the sanitizers' checks it asserts the readers' contract: on success every
 * record keeps the documented invariants, on failure the output is empty and the diagnostic
 * has a message. A broken promise aborts, which the fuzzer reports as a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* A failed read: empty output, a message, a formatted line that fits. */
static void check_failure(int rc, const struct gs_diag *d, uint32_t n, const void *v)
{
    char text[700];

    check(rc == GS_EPARSE || rc == GS_EIO || rc == GS_ENOMEM);
    check(n == 0 && v == NULL);
    check(d->msg[0] != '\0');
    check(memchr(d->field, '\0', sizeof d->field) != NULL);
    int len = gs_diag_format(d, text, sizeof text);
    check(len > 0 && (size_t)len == strlen(text));
}

static void fuzz_nodes(const char *buf, size_t size)
{
    struct gs_trace_nodes nodes;
    struct gs_diag d;
    int rc = gs_trace_parse_nodes(buf, size, "fuzz", &nodes, &d);

    if (rc != GS_OK) {
        check_failure(rc, &d, nodes.n, nodes.v);
        return;
    }
    check(nodes.n > 0 && nodes.v != NULL);
    for (uint32_t i = 0; i < nodes.n; i++) {
        const struct gs_trace_node *n = &nodes.v[i];
        check(n->name != NULL && n->name[0] != '\0' && n->model != NULL);
        check(n->cpu_milli >= 0 && n->mem_mib >= 0 && n->gpu_count <= 16);
        check((n->gpu_count > 0) == (n->model[0] != '\0'));
        check(n->gpu_mem_mib >= 0);
        if (n->gpu_mode.sharing == GS_GPU_SHARE_MIG)
            check(gs_mig_layout_check(gs_mig_model_find(n->model), n->gpu_mode.mig,
                                      n->gpu_mode.mig_count, NULL, 0) == GS_OK);
        else
            check(n->gpu_mode.sharing <= GS_GPU_SHARE_WHOLE && n->gpu_mode.replicas >= 1);
        for (uint32_t j = 0; j < i && j < 64; j++)
            check(strcmp(nodes.v[j].name, n->name) != 0);
    }
    gs_trace_nodes_fini(&nodes);
    check(nodes.n == 0 && nodes.v == NULL);
}

static void fuzz_pods(const char *buf, size_t size)
{
    struct gs_trace_pods pods;
    struct gs_diag d;
    int rc = gs_trace_parse_pods(buf, size, "fuzz", &pods, &d);

    if (rc != GS_OK) {
        check_failure(rc, &d, pods.n, pods.v);
        return;
    }
    check(pods.n > 0 && pods.v != NULL);
    for (uint32_t i = 0; i < pods.n; i++) {
        const struct gs_trace_pod *p = &pods.v[i];
        check(p->name != NULL && p->name[0] != '\0');
        check(p->gpu_spec != NULL && p->qos != NULL && p->phase != NULL);
        check(p->cpu_milli >= 0 && p->mem_mib >= 0);
        check(p->num_gpu <= 16 && p->gpu_milli >= 0 && p->gpu_milli <= 1000);
        struct gs_pod_req req;
        bool sharing = p->gpu_mem_mib > 0 || p->mig_profile[0] || p->timeslice_slots;
        check((p->gpu_mem_mib > 0) + (p->mig_profile[0] != '\0') + (p->timeslice_slots > 0) <= 1);
        /* Every row is a request the core accepts; plain rows keep the milli rules. */
        check(gs_trace_pod_req(p, GS_MODEL_ANY, &req) == GS_OK);
        check(sharing || (p->num_gpu == 0) == (p->gpu_milli == 0));
        check(sharing || p->gpu_milli == 1000 || p->num_gpu <= 1);
        check(p->creation_time_s >= -1 && p->deletion_time_s >= -1 && p->scheduled_time_s >= -1);
    }
    gs_trace_pods_fini(&pods);
    check(pods.n == 0 && pods.v == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An empty input still needs a valid pointer. */
    const char *buf = size > 0 ? (const char *)data : "";

    fuzz_nodes(buf, size);
    fuzz_pods(buf, size);
    return 0;
}
