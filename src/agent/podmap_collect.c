/*
 * The agent's per-pod GPU values (contract in include/gpusched/podmap.h, gs_podmap_collect):
 * the backend's processes of each GPU, the pod of each from its cgroup, summed per pod and
 * container on each GPU (and MIG GPU instance). Kept apart from podmap.c so that the parser
 * and its fuzzer need neither a backend nor the exporter.
 */
#include "gpusched/podmap.h"

#include "gpusched/err.h"

#include <string.h>

_Static_assert(sizeof(((struct gs_exporter_podval *)0)->pod_uid) == GS_PODMAP_UID_LEN,
               "a pod UID fits the exporter's value as the map reads it");
_Static_assert(sizeof(((struct gs_exporter_podval *)0)->container_id) == GS_PODMAP_CID_LEN,
               "a container ID fits the exporter's value as the map reads it");

/* The value of (gpu, instance, pod, container) in out[0, n), or NULL. */
static struct gs_exporter_podval *find(struct gs_exporter_podval *out, uint32_t n, uint32_t gpu,
                                       const struct gs_gpu_proc *p, const struct gs_podmap_entry *e)
{
    for (uint32_t i = 0; i < n; i++) {
        struct gs_exporter_podval *v = &out[i];
        if (v->gpu == gpu && v->has_gi_id == p->has_gi_id &&
            (!p->has_gi_id || v->gi_id == p->gi_id) && strcmp(v->pod_uid, e->pod_uid) == 0 &&
            strcmp(v->container_id, e->container_id) == 0)
            return v;
    }
    return NULL;
}

int gs_podmap_collect(struct gs_gpu_backend *b, const char *proc_root, struct gs_exporter_gpu *gpus,
                      uint32_t n_gpus, struct gs_exporter_podval *out, uint32_t cap,
                      uint32_t *n_out)
{
    if (n_out != NULL)
        *n_out = 0;
    if (b == NULL || proc_root == NULL || (gpus == NULL && n_gpus > 0) ||
        (out == NULL && cap > 0) || n_out == NULL)
        return GS_EINVAL;
    struct gs_gpu_proc procs[GS_GPU_PROC_MAX]; /* 3 KiB */
    uint32_t n = 0;
    int rc = GS_OK;
    for (uint32_t g = 0; g < n_gpus; g++) {
        gpus[g].have_procs = false;
        if (!gpus[g].have_sample)
            continue;
        uint32_t np = 0;
        if (gs_gpu_processes(b, gpus[g].info.index, procs, GS_GPU_PROC_MAX, &np) != GS_OK)
            continue;
        gpus[g].have_procs = true;
        for (uint32_t k = 0; k < np; k++) {
            const struct gs_gpu_proc *p = &procs[k];
            struct gs_podmap_entry e;
            if (gs_podmap_read_pid(proc_root, p->pid, &e) != GS_OK)
                continue; /* not a pod's process, or gone */
            struct gs_exporter_podval *v = find(out, n, g, p, &e);
            if (v == NULL) {
                if (n == cap) {
                    rc = GS_ELIMIT;
                    continue;
                }
                v = &out[n++];
                memset(v, 0, sizeof *v);
                v->gpu = g;
                v->has_gi_id = p->has_gi_id;
                v->gi_id = p->gi_id;
                memcpy(v->pod_uid, e.pod_uid, sizeof v->pod_uid);
                memcpy(v->container_id, e.container_id, sizeof v->container_id);
            }
            if (p->has_sm_util) {
                v->util_pct += p->sm_util_pct;
                v->has_util = true;
            }
            if (p->has_mem) {
                v->mem_mib += p->mem_mib;
                v->has_mem = true;
            }
        }
    }
    *n_out = n;
    return rc;
}
