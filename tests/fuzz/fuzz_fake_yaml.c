/*
 * libFuzzer target for the fake GPU backend's YAML reader (src/agent/gpu_fake.c). Besides the
 * sanitizers' checks it asserts the reader's contract: on failure no backend and a diagnostic
 * with a message; on success GPUs with valid indices, UUIDs, NVLink peers and MIG devices, and
 * a script that replays to its end (on a clock that only moves when the backend sleeps)
 * without a sample or event breaking the documented ranges, and scripted MIG layouts that keep
 * every GPU valid and no MIG UUID on two GPUs. A broken promise aborts, which
 * the fuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static int64_t fz_now(void *ctx)
{
    return *(int64_t *)ctx;
}

static void fz_sleep(void *ctx, int64_t ms)
{
    check(ms > 0);
    *(int64_t *)ctx += ms;
}

static void check_info(const struct gs_gpu_info *g, uint32_t index, uint32_t n)
{
    check(g->index == index);
    check(strncmp(g->uuid, "GPU-", 4) == 0 && memchr(g->uuid, '\0', sizeof g->uuid) != NULL);
    check(g->model[0] != '\0' && memchr(g->model, '\0', sizeof g->model) != NULL);
    check(g->mem_total_mib > 0);
    check(g->numa_node >= -1);
    check(g->nvlink_peer_count < n || (n == 0 && g->nvlink_peer_count == 0));
    for (uint32_t p = 0; p < g->nvlink_peer_count; p++) {
        check(g->nvlink_peers[p] < n && g->nvlink_peers[p] != index);
        check(p == 0 || g->nvlink_peers[p - 1] < g->nvlink_peers[p]);
    }
    check(g->mig_count <= GS_GPU_MIG_MAX);
    check(g->mig_count == 0 || g->mig_enabled);
    check(!g->mig_enabled || g->mig_capable);
    uint64_t sum = 0;
    for (uint32_t k = 0; k < g->mig_count; k++) {
        check(strncmp(g->mig[k].uuid, "MIG-", 4) == 0);
        check(g->mig[k].mem_mib > 0);
        sum += g->mig[k].mem_mib;
    }
    check(sum <= g->mem_total_mib);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = size > 0 ? (const char *)data : "";
    int64_t now = 1000;
    struct gs_clock clock = {.now_ms = fz_now, .sleep_ms = fz_sleep, .ctx = &now};
    struct gs_gpu_backend *b = (struct gs_gpu_backend *)0x1;
    struct gs_diag d;

    int rc = gs_gpu_parse_fake(buf, size, "fuzz", &clock, &b, &d);
    if (rc != GS_OK) {
        check(rc == GS_EPARSE || rc == GS_ENOMEM || rc == GS_EIO);
        check(b == NULL);
        check(d.msg[0] != '\0');
        check(memchr(d.field, '\0', sizeof d.field) != NULL);
        char text[800];
        int len = gs_diag_format(&d, text, sizeof text);
        check(len > 0 && (size_t)len == strlen(text));
        return 0;
    }
    check(b != NULL);
    uint32_t n = 0;
    check(gs_gpu_count(b, &n) == GS_OK && n <= GS_GPU_MAX);
    struct gs_gpu_system sys;
    check(gs_gpu_system(b, &sys) == GS_OK && sys.cuda_driver_version >= 0);
    struct gs_gpu_info info[GS_GPU_MAX];
    for (uint32_t i = 0; i < n; i++) {
        check(gs_gpu_info(b, i, &info[i]) == GS_OK);
        check_info(&info[i], i, n);
        for (uint32_t j = 0; j < i; j++)
            check(strcmp(info[i].uuid, info[j].uuid) != 0);
    }
    check(gs_gpu_info(b, n, &info[0]) == GS_ERANGE);

    /* Replay the script: events in time order, samples within their ranges. */
    int64_t last_t = 0;
    for (int round = 0; round < 2000; round++) {
        struct gs_gpu_event ev;
        rc = gs_gpu_wait_event(b, INT64_C(2000000000000), &ev);
        if (rc == GS_ENOENT)
            break;
        check(rc == GS_OK);
        check(ev.gpu_index < n && ev.t_ms >= last_t);
        check(ev.kind == GS_GPU_EVENT_XID ? ev.xid > 0 : ev.kind == GS_GPU_EVENT_ECC_DBE);
        last_t = ev.t_ms;
        for (uint32_t i = 0; i < n; i++) {
            struct gs_gpu_sample s;
            rc = gs_gpu_sample(b, i, &s);
            check(rc == GS_OK || rc == GS_EIO);
            if (rc != GS_OK)
                continue;
            check(s.util_pct <= 100);
            check(!(s.valid & GS_GPU_HAVE_FB) ||
                  s.fb_used_mib + s.fb_free_mib == info[i].mem_total_mib);
        }
    }
    /* Past the script's end: every "mig:" entry applied, each GPU still the same GPU with a
     * valid layout, and no MIG UUID on two GPUs. */
    now += INT64_C(2000000000000);
    for (uint32_t i = 0; i < n; i++) {
        struct gs_gpu_info g;
        check(gs_gpu_info(b, i, &g) == GS_OK);
        check_info(&g, i, n);
        check(strcmp(g.uuid, info[i].uuid) == 0 && g.mem_total_mib == info[i].mem_total_mib);
        info[i] = g;
        for (uint32_t j = 0; j < i; j++)
            for (uint32_t k = 0; k < info[i].mig_count; k++)
                for (uint32_t l = 0; l < info[j].mig_count; l++)
                    check(strcmp(info[i].mig[k].uuid, info[j].mig[l].uuid) != 0);
    }
    gs_gpu_close(b);
    return 0;
}
