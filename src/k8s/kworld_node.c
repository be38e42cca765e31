/*
 * Node objects into the cluster (kworld_int.h): capacity and allocatable, GPU inventory and
 * modes (the node agent's annotation, else what the NVIDIA stack publishes), labels, taints and
 * schedulability. Part of the translation of include/gpusched/kworld.h.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "kworld_int.h"

#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kquantity.h"
#include "gpusched/mig.h"
#include "kworld_capmig.h"

static int quantity(const json_t *v, double unit, bool up, int64_t *out)
{
    return gs__kquantity_json(v, unit, up, out);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static int node_taints(struct gs_kworld *w, uint32_t idx, const json_t *obj, const char *name)
{
    const json_t *arr = jpath(json_object_get(obj, "spec"), "taints", NULL);
    size_t n = json_array_size(arr);
    struct gs_taint *t = n ? calloc(n, sizeof(*t)) : NULL;
    if (n && !t)
        return GS_ENOMEM;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(arr, i);
        const char *eff = jstr(x, "effect");
        uint8_t e = !eff                                   ? 0
                    : strcmp(eff, "NoSchedule") == 0       ? GS_TAINT_NO_SCHEDULE
                    : strcmp(eff, "PreferNoSchedule") == 0 ? GS_TAINT_PREFER_NO_SCHEDULE
                    : strcmp(eff, "NoExecute") == 0        ? GS_TAINT_NO_EXECUTE
                                                           : 0;
        if (!jstr(x, "key") || !e) {
            free(t);
            return gs__kfail(w,
                             "node %s: spec.taints: a taint needs a key and an effect (NoSchedule, "
                             "PreferNoSchedule or NoExecute)",
                             name);
        }
        t[k++] = (struct gs_taint){(char *)jstr(x, "key"),
                                   (char *)(jstr(x, "value") ? jstr(x, "value") : ""), e};
    }
    int err = gs_cluster_set_taints(w->c, idx, t, k);
    free(t);
    return err;
}

static int node_labels(struct gs_kworld *w, uint32_t idx, const json_t *obj)
{
    const json_t *labels = jpath(json_object_get(obj, "metadata"), "labels", NULL);
    size_t n = json_object_size(labels);
    char **kv = calloc(n + 1, sizeof(*kv));
    if (!kv)
        return GS_ENOMEM;
    uint32_t k = 0;
    const char *key;
    const json_t *val;
    int err = GS_OK;
    json_object_foreach((json_t *)labels, key, val)
    {
        const char *v = json_string_value(val);
        if (!v)
            continue;
        kv[k] = malloc(strlen(key) + strlen(v) + 2);
        if (!kv[k]) {
            err = GS_ENOMEM;
            break;
        }
        (void)sprintf(kv[k], "%s=%s", key, v);
        k++;
    }
    if (!err)
        err = gs_cluster_set_labels(w->c, idx, (const char *const *)kv, k);
    for (uint32_t i = 0; i < k; i++)
        free(kv[i]);
    free(kv);
    return err;
}

/* Allocatable (and GPU capacity) of a Node object. */
struct node_res {
    int64_t cpu_milli, mem_mib, pods, gpus, gpus_alloc, gpu_mem_mib;
    int64_t replicas; /* GFD nvidia.com/gpu.replicas: time-slicing slots per GPU, 1 if none */
};

static int node_resources(struct gs_kworld *w, const json_t *obj, const char *name,
                          struct node_res *r)
{
    const json_t *st = json_object_get(obj, "status");
    const json_t *alloc = json_object_get(st, "allocatable");
    const json_t *capy = json_object_get(st, "capacity");
    if (!alloc)
        alloc = capy;
    char shown[64];
    memset(r, 0, sizeof(*r));
    r->pods = 110;
    if (json_object_get(alloc, "cpu") &&
        quantity(json_object_get(alloc, "cpu"), 1e-3, false, &r->cpu_milli) != 0)
        return gs__kfail(w, "node %s: status.allocatable.cpu is %s, not a quantity", name,
                         jshow(json_object_get(alloc, "cpu"), shown, sizeof(shown)));
    if (json_object_get(alloc, "memory") &&
        quantity(json_object_get(alloc, "memory"), 1048576.0, false, &r->mem_mib) != 0)
        return gs__kfail(w, "node %s: status.allocatable.memory is %s, not a quantity", name,
                         jshow(json_object_get(alloc, "memory"), shown, sizeof(shown)));
    if (json_object_get(alloc, "pods") &&
        quantity(json_object_get(alloc, "pods"), 1.0, false, &r->pods) != 0)
        return gs__kfail(w, "node %s: status.allocatable.pods is %s, not a quantity", name,
                         jshow(json_object_get(alloc, "pods"), shown, sizeof(shown)));
    const json_t *gc = json_object_get(capy, GPU_RES);
    const json_t *ga = json_object_get(alloc, GPU_RES);
    if ((gc && quantity(gc, 1.0, false, &r->gpus) != 0) ||
        (ga && quantity(ga, 1.0, false, &r->gpus_alloc) != 0))
        return gs__kfail(w, "node %s: status nvidia.com/gpu is not a count", name);
    if (!gc)
        r->gpus = r->gpus_alloc;
    if (!ga)
        r->gpus_alloc = r->gpus;
    /* Time-slicing (GFD label nvidia.com/gpu.replicas > 1): capacity is GPUs x replicas, under
     * nvidia.com/gpu, or nvidia.com/gpu.shared when the device plugin renames it. A GPU that
     * lost any of its replicas from allocatable is an unhealthy one. */
    r->replicas = 1;
    const char *rep = gs__kmeta_kv(obj, "labels", "nvidia.com/gpu.replicas");
    int64_t reps = 0;
    if (rep && gs_kquantity(rep, 1.0, false, &reps) == 0 && reps > 1 && reps <= 255) {
        int64_t sc = 0, sa = 0;
        const json_t *shc = json_object_get(capy, GPU_SHARED_RES);
        const json_t *sha = json_object_get(alloc, GPU_SHARED_RES);
        if (r->gpus == 0 && (shc || sha) && (!shc || quantity(shc, 1.0, false, &sc) == 0) &&
            (!sha || quantity(sha, 1.0, false, &sa) == 0)) {
            r->gpus = shc ? sc : sa;
            r->gpus_alloc = sha ? sa : sc;
        }
        r->replicas = reps;
        r->gpus /= reps;
        r->gpus_alloc /= reps;
    }
    if (r->gpus > GS_NODE_GPUS_MAX && !gs__kcap_single(obj)) /* MIG devices: gs__kcap_read */
        return gs__kfail(w, "node %s: more than 16 nvidia.com/gpu", name);
    if (r->gpus_alloc > r->gpus)
        r->gpus_alloc = r->gpus;
    const char *mem = gs__kmeta_kv(obj, "labels", "nvidia.com/gpu.memory");
    if (mem && gs_kquantity(mem, 1.0, false, &r->gpu_mem_mib) != 0)
        r->gpu_mem_mib = 0;
    if (r->pods < 1)
        r->pods = 1;
    return GS_OK;
}

int gs__kworld_apply_node(struct gs_kworld *w, enum gs_kchange change, const json_t *obj,
                          int64_t now_ms)
{
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    if (!name || !*name)
        return gs__kfail(w, "a Node without metadata.name");
    int idx = gs_cluster_find_node(w->c, name);
    (void)json_object_del(w->mode_due, name);
    if (change == GS_KDELETED) {
        gs__kinv_forget(&w->inv, name);
        return idx < 0 ? GS_OK : gs_engine_remove_node(w->e, (uint32_t)idx, now_ms);
    }
    struct node_res r;
    int err = node_resources(w, obj, name, &r);
    if (err)
        return err;
    /* The agent's inventory, when there and good, says which GPUs there are (over capacity)
     * and each one's mode; without one, GFD's replicas label makes every GPU time-sliced, and
     * MIG is read as the device plugin advertises it (kworld_capmig.h). */
    struct gs__knode_gpus inv;
    int have_inv = 0;
    if (gs__kinv_read(&w->inv, obj, name, &inv, &have_inv, w->cfg.on_warning, w->cfg.ctx))
        return GS_ENOMEM;
    const char *model = gs__kmeta_kv(obj, "labels", "nvidia.com/gpu.product");
    struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
    bool usable[GS_NODE_GPUS_MAX];
    bool set_modes = have_inv == 1 || r.replicas > 1;
    uint32_t n_modes = 0; /* entries of modes and usable filled */
    if (have_inv == 1) {
        r.gpus = r.gpus_alloc = inv.n;
        r.gpu_mem_mib = inv.mem_mib;
        if (gs__kinv_modes(&w->inv, &inv, name, model, modes, usable, &model, w->cfg.on_warning,
                           w->cfg.ctx))
            return GS_ENOMEM;
    } else {
        struct gs_gpu_mode plain = {r.replicas > 1 ? GS_GPU_SHARE_TIMESLICE : GS_GPU_SHARE_MILLI,
                                    (uint8_t)r.replicas};
        uint32_t n_cap = 0;
        if (gs__kcap_read(&w->inv, obj, name, model, (uint32_t)r.gpus, (uint32_t)r.gpus_alloc,
                          &plain, modes, usable, &n_cap, &set_modes, w->cfg.on_warning, w->cfg.ctx))
            return GS_ENOMEM;
        r.gpus = n_cap;
    }
    n_modes = set_modes ? (uint32_t)r.gpus : 0;
    if (idx < 0) {
        struct gs_node_spec s = {name,
                                 r.cpu_milli,
                                 r.mem_mib,
                                 (int32_t)r.pods,
                                 (uint32_t)r.gpus,
                                 model ? model : "nvidia-gpu",
                                 r.gpu_mem_mib,
                                 set_modes ? modes : NULL};
        uint32_t id;
        if ((err = gs_cluster_add_node(w->c, &s, &id)) != GS_OK)
            return err == GS_ENOMEM ? err : gs__kfail(w, "node %s: cannot be added", name);
        idx = (int)id;
    } else {
        struct gs_node_update u = {r.cpu_milli,
                                   r.mem_mib,
                                   (int32_t)r.pods,
                                   (uint32_t)r.gpus,
                                   model ? model : "nvidia-gpu",
                                   r.gpu_mem_mib};
        err = gs_cluster_update_node(w->c, (uint32_t)idx, &u);
        if (err == GS_EINVAL) {
            /* GPUs that hold pods cannot go: keep them, as unhealthy ones. */
            const struct gs_node *n = gs_cluster_node(w->c, (uint32_t)idx);
            u.gpu_count = n->gpu_count;
            u.gpu_model = NULL;
            if (r.gpus_alloc > r.gpus)
                r.gpus_alloc = r.gpus;
            r.gpus = n->gpu_count;
            err = gs_cluster_update_node(w->c, (uint32_t)idx, &u);
        }
        if (err)
            return err == GS_ENOMEM ? err : gs__kfail(w, "node %s: cannot be updated", name);
        /* A mode changes only on a GPU that holds no pod; one that holds pods keeps its mode
         * until they leave: the Node is kept and applied again at each cycle until then. */
        const struct gs_node *n = gs_cluster_node(w->c, (uint32_t)idx);
        bool due = false;
        for (uint32_t g = 0; g < n->gpu_count; g++) {
            struct gs_gpu_mode fr = {.sharing = GS_GPU_SHARE_MILLI, .replicas = 1};
            const struct gs_gpu_mode *m = g < n_modes ? &modes[g] : &fr;
            if (gs__kinv_mode_equal(&n->gpus[g], m))
                continue;
            if (n->gpus[g].pods == 0)
                (void)gs_cluster_set_gpu_mode(w->c, (uint32_t)idx, g, m, NULL, 0);
            else if (!(w->cfg.dynamic_mig && m->sharing == GS_GPU_SHARE_MIG &&
                       n->gpus[g].sharing == GS_GPU_SHARE_MIG && m->mig_count > 0 &&
                       gs_cluster_set_mig_layout(w->c, (uint32_t)idx, g, m->mig, m->mig_count, NULL,
                                                 0) == GS_OK))
                /* Dynamic MIG: a new layout that keeps every held instance applies at once (a
                 * failed plan's GPU goes back to what the node has); one that lacks a held
                 * instance (the old inventory while a plan for that pod is in flight) waits. */
                due = true;
        }
        if (due && json_object_set(w->mode_due, name, (json_t *)obj) != 0)
            return GS_ENOMEM;
    }
    uint32_t i = (uint32_t)idx;
    /* Allocatable below capacity: the highest indices are the unhealthy GPUs, unless the
     * inventory says which. */
    for (int64_t g = 0; g < r.gpus; g++)
        (void)gs_cluster_set_gpu_health(w->c, i, (uint32_t)g,
                                        set_modes ? g < n_modes && usable[g] : g < r.gpus_alloc);
    /* NVLink peers from a good inventory (whole-GPU picks then keep pairs together); none
     * without one. GPUs kept beyond the inventory (they hold pods) have no links. */
    uint16_t peers[GS_NODE_GPUS_MAX] = {0};
    const struct gs_node *nn = gs_cluster_node(w->c, i);
    for (uint32_t g = 0; have_inv == 1 && g < inv.n && g < nn->gpu_count; g++)
        peers[g] = (uint16_t)(inv.nvlink[g] & ((1u << nn->gpu_count) - 1u));
    if (gs_cluster_set_nvlink(w->c, i, peers, nn->gpu_count) != GS_OK)
        return gs__kfail(w, "node %s: NVLink peers cannot be set", name);
    const json_t *st = json_object_get(obj, "status");
    const json_t *alloc = json_object_get(st, "allocatable");
    char warn[256];
    err = gs__kxres_node(w->c, i, alloc ? alloc : json_object_get(st, "capacity"), name, w->err,
                         w->errcap, warn, sizeof(warn));
    if (err)
        return err;
    if (warn[0] && w->cfg.on_warning)
        w->cfg.on_warning(w->cfg.ctx, warn);
    bool unsched = json_is_true(jpath(json_object_get(obj, "spec"), "unschedulable", NULL));
    (void)gs_cluster_set_unschedulable(w->c, i, unsched);
    if ((err = node_labels(w, i, obj)) != GS_OK || (err = node_taints(w, i, obj, name)) != GS_OK)
        return err;
    return GS_OK;
}
