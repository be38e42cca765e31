/*
 * Writes the accounting store of usage_ingest.sh through the store's API (usage.h):
 *
 *   usage_ingest_fixture DB
 *
 * One node gpu-node-1 with four H200 GPUs present over [T0, T0 + 2 h), T0 = 2026-12-01T00:00Z:
 *
 *   GPU 0 (GPU-...a0)  ml/train-a     whole GPU     [T0, T0 + 2 h)   team train
 *   GPU 1 (GPU-...a1)  ml/notebook-b  whole GPU     [T0, T0 + 2 h)   team notebook
 *   GPU 2 (GPU-...a2)  ml/share-c     500 milli     [T0, T0 + 2 h)   team share-c
 *                      ml/share-d     250 milli     [T0, T0 + 2 h)   team share-d
 *   GPU 3 (no UUID)    ml/late-e      whole GPU     [T0 + 1 h, T0 + 2 h)   team late
 *
 * GPU 3's grant has no UUID (as a replay writes it), so its series must be mapped by node and
 * index. The last heartbeat is T0 + 2 h. Exits 0, or 1 with the store's message.
 */
#include <stdint.h>
#include <stdio.h>

#include "gpusched/err.h"
#include "gpusched/usage.h"

#define H_MS INT64_C(3600000)
/* 2026-12-01T00:00:00Z: 20,788 days after the epoch (as in tests/unit/test_usage_store.c). */
#define T0_MS (INT64_C(20788) * 86400 * 1000)

static const char *const uuids[4] = {"GPU-00000000-0000-0000-0000-0000000000a0",
                                     "GPU-00000000-0000-0000-0000-0000000000a1",
                                     "GPU-00000000-0000-0000-0000-0000000000a2", NULL};

static int pod(struct gs_usage_store *s, const char *name, const char *team, uint32_t gpu,
               int32_t milli, int64_t start, int64_t end)
{
    char uid[32];
    (void)snprintf(uid, sizeof(uid), "uid-%s", name);
    struct gs_usage_interval iv = {.pod_uid = uid,
                                   .ns = "ml",
                                   .name = name,
                                   .queue = team,
                                   .queue_path = team,
                                   .team = team,
                                   .node = "gpu-node-1",
                                   .model = "NVIDIA H200",
                                   .queued_ms = start,
                                   .start_ms = start};
    struct gs_usage_gpu g = {.gpu_uuid = uuids[gpu],
                             .gpu_index = gpu,
                             .sharing = GS_GPU_SHARE_MILLI,
                             .gpu_milli = milli,
                             .mig_instance = -1,
                             .replica_slot = -1};
    int64_t id;
    int err = gs_usage_begin_interval(s, &iv, &g, 1, &id);
    if (!err)
        err = gs_usage_end_interval(s, id, end, GS_USAGE_END_FINISHED, NULL);
    return err;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        (void)fprintf(stderr, "usage: usage_ingest_fixture DB\n");
        return 2;
    }
    char msg[600];
    struct gs_usage_store *s;
    if (gs_usage_open(argv[1], NULL, &s, msg, sizeof(msg)) != GS_OK) {
        (void)fprintf(stderr, "usage_ingest_fixture: %s\n", msg);
        return 1;
    }
    int err = GS_OK;
    for (uint32_t g = 0; g < 4 && !err; g++) {
        struct gs_usage_capacity c = {"gpu-node-1", "NVIDIA H200", g, uuids[g], true, T0_MS};
        int64_t id;
        err = gs_usage_begin_capacity(s, &c, &id);
        if (!err)
            err = gs_usage_end_capacity(s, id, T0_MS + 2 * H_MS, "removed");
    }
    if (!err)
        err = pod(s, "train-a", "train", 0, 1000, T0_MS, T0_MS + 2 * H_MS);
    if (!err)
        err = pod(s, "notebook-b", "notebook", 1, 1000, T0_MS, T0_MS + 2 * H_MS);
    if (!err)
        err = pod(s, "share-c", "share-c", 2, 500, T0_MS, T0_MS + 2 * H_MS);
    if (!err)
        err = pod(s, "share-d", "share-d", 2, 250, T0_MS, T0_MS + 2 * H_MS);
    if (!err)
        err = pod(s, "late-e", "late", 3, 1000, T0_MS + H_MS, T0_MS + 2 * H_MS);
    if (!err)
        err = gs_usage_commit(s, T0_MS + 2 * H_MS);
    if (err)
        (void)fprintf(stderr, "usage_ingest_fixture: %s\n", gs_usage_errmsg(s));
    if (gs_usage_close(s) != GS_OK && !err)
        err = GS_EIO;
    return err ? 1 : 0;
}
