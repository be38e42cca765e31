/*
 * The node's GPU inventory as the Node annotation gpusched.io/gpus (contract in
 * include/gpusched/dpkube.h, schema in docs/schemas/node-gpus.schema.json). Pure: the model
 * and the health array in, JSON text out. Built with jansson and dumped with sorted keys, so
 * the same node and health give the same bytes, and the agent can tell from a string compare
 * whether the Node needs a PATCH.
 */
#include "gpusched/dpkube.h"

#include "gpusched/err.h"
#include "gpusched/mig.h"

#include <stdlib.h>
#include <string.h>

/* Appends a value to an array, returning false when out of memory (jansson steals v). */
static bool push(json_t *arr, json_t *v)
{
    return v != NULL && json_array_append_new(arr, v) == 0;
}

static bool set(json_t *obj, const char *key, json_t *v)
{
    return v != NULL && json_object_set_new(obj, key, v) == 0;
}

/* Replicas of the unit (GPU mig=-1, or MIG device mig) and the resources holding its devices. */
static void unit_facts(const struct gs_dp_model *m, uint32_t gpu, int32_t mig, uint32_t *replicas,
                       bool *has_mig_devices, uint32_t *res_mask, bool *sliced)
{
    *replicas = 1;
    for (uint32_t r = 0; r < m->n_resources; r++) {
        const struct gs_dp_resource *res = &m->resources[r];
        for (uint32_t d = 0; d < res->n_devices; d++) {
            const struct gs_dp_device *dev = &res->devices[d];
            if (dev->gpu != gpu || dev->retired)
                continue; /* a retired device is no longer on the GPU */
            if (dev->mig >= 0 && has_mig_devices != NULL)
                *has_mig_devices = true;
            if (dev->mig != mig && mig != INT32_MIN)
                continue;
            *res_mask |= 1u << r;
            if (dev->slices > 0 && sliced != NULL)
                *sliced = true;
            if (dev->mig == mig && dev->replicas > 0)
                *replicas = dev->replicas;
        }
    }
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static json_t *mig_entry(const struct gs_dp_model *m, uint32_t g, uint32_t k)
{
    const struct gs_gpu_mig *mig = &m->gpus[g].mig[k];
    uint32_t replicas = 1, mask = 0;
    unit_facts(m, g, (int32_t)k, &replicas, NULL, &mask, NULL);
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok =
        set(o, "profile", json_string(mig->profile)) && set(o, "uuid", json_string(mig->uuid)) &&
        set(o, "mem_mib", json_integer((json_int_t)mig->mem_mib)) &&
        set(o, "start", mig->has_start ? json_integer(mig->start_slot) : json_null()) &&
        set(o, "replicas", json_integer(replicas)) && set(o, "advertised", json_boolean(mask != 0));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int gs_dp_gpu_mode(const struct gs_dp_model *m, uint32_t g, struct gs_gpu_mode *mode, char *why,
                   size_t cap)
{
    if (why != NULL && cap > 0)
        why[0] = '\0';
    if (m == NULL || mode == NULL || g >= m->n_gpus)
        return GS_EINVAL;
    memset(mode, 0, sizeof *mode);
    uint32_t replicas = 1, mask = 0;
    bool has_mig = false, sliced = false;
    unit_facts(m, g, -1, &replicas, &has_mig, &mask, &sliced);
    mode->replicas = 1;
    if (!has_mig) {
        mode->sharing = sliced         ? GS_GPU_SHARE_MILLI
                        : replicas > 1 ? GS_GPU_SHARE_TIMESLICE
                                       : GS_GPU_SHARE_WHOLE;
        if (mode->sharing == GS_GPU_SHARE_TIMESLICE)
            mode->replicas = (uint8_t)(replicas > 255 ? 255 : replicas);
        return GS_OK;
    }
    const struct gs_gpu_info *info = &m->gpus[g];
    struct gs_mig_device dev[GS_MIG_INSTANCES_MAX];
    uint32_t n = info->mig_count;
    for (uint32_t k = 0; k < n && k < GS_MIG_INSTANCES_MAX; k++)
        dev[k] = (struct gs_mig_device){info->mig[k].profile,
                                        info->mig[k].has_start ? (int)info->mig[k].start_slot : -1};
    const struct gs_mig_model *mm = gs_mig_model_find(info->model);
    char reason[200] = "";
    if (mm == NULL)
        (void)snprintf(reason, sizeof reason, "model %s is not in the MIG table", info->model);
    else if (n > 0)
        (void)gs_mig_mode_build(mm, dev, n, mode, reason, sizeof reason);
    if (reason[0] != '\0' || n == 0) {
        memset(mode, 0, sizeof *mode);
        mode->replicas = 1;
    }
    mode->sharing = GS_GPU_SHARE_MIG;
    if (why != NULL && cap > 0)
        (void)snprintf(why, cap, "%s", reason);
    return GS_OK;
}

static json_t *gpu_entry(const struct gs_dp_model *m, const enum gs_health_state *health,
                         uint32_t g)
{
    const struct gs_gpu_info *info = &m->gpus[g];
    uint32_t replicas = 1, mask = 0;
    bool has_mig = false;
    unit_facts(m, g, -1, &replicas, &has_mig, &mask, NULL);
    uint32_t all_mask = 0, unused = 1;
    unit_facts(m, g, INT32_MIN, &unused, NULL, &all_mask,
               NULL); /* every resource with a device here */
    struct gs_gpu_mode core_mode;
    (void)gs_dp_gpu_mode(m, g, &core_mode, NULL, 0); /* g is in range */
    const char *mode = gs_gpu_sharing_name((enum gs_gpu_sharing)core_mode.sharing);
    json_t *o = json_object();
    json_t *peers = json_array();
    json_t *res = json_array();
    json_t *migs = json_array();
    bool ok = o != NULL && peers != NULL && res != NULL && migs != NULL;
    for (uint32_t i = 0; ok && i < info->nvlink_peer_count; i++)
        ok = push(peers, json_integer(info->nvlink_peers[i]));
    /* By name: a rediscovered model keeps its resources in the order first advertised. */
    const char *names[GS_DP_RESOURCES_MAX];
    size_t n_names = 0;
    for (uint32_t r = 0; r < m->n_resources && r < GS_DP_RESOURCES_MAX; r++)
        if (all_mask & (1u << r))
            names[n_names++] = m->resources[r].name;
    qsort(names, n_names, sizeof names[0], cmp_name);
    for (size_t i = 0; ok && i < n_names; i++)
        ok = push(res, json_string(names[i]));
    for (uint32_t k = 0; ok && has_mig && k < info->mig_count; k++)
        ok = push(migs, mig_entry(m, g, k));
    /*
     * A GPU lost when the agent read it may have told nothing (no UUID, model or memory). The
     * schema wants each of them, and a reader refuses the whole annotation when one is wrong,
     * so such a GPU is written "lost-<index>" with the model and memory of the node's first GPU
     * that told them (memory is the node's minimum to the scheduler: 0 would spoil it), and
     * Unhealthy, which keeps the scheduler off it.
     */
    const struct gs_gpu_info *facts = info;
    for (uint32_t k = 0; k < m->n_gpus && (facts->model[0] == '\0' || facts->mem_total_mib == 0);
         k++)
        facts = &m->gpus[k];
    char lost_uuid[32];
    (void)snprintf(lost_uuid, sizeof lost_uuid, "lost-%u", (unsigned)g);
    ok = ok && set(o, "index", json_integer(g)) &&
         set(o, "uuid", json_string(info->uuid[0] != '\0' ? info->uuid : lost_uuid)) &&
         set(o, "model", json_string(facts->model[0] != '\0' ? facts->model : "unknown")) &&
         set(o, "mem_mib",
             json_integer(facts->mem_total_mib > 0 ? (json_int_t)facts->mem_total_mib : 1)) &&
         set(o, "mode", json_string(mode)) &&
         set(o, "health",
             json_string(gs_health_state_name(
                 info->lost && info->uuid[0] == '\0' ? GS_HEALTH_UNHEALTHY : health[g]))) &&
         set(o, "numa_node", info->numa_node >= 0 ? json_integer(info->numa_node) : json_null()) &&
         set(o, "replicas", json_integer(replicas));
    if (ok) {
        ok = json_object_set(o, "nvlink_peers", peers) == 0 &&
             json_object_set(o, "resources", res) == 0 && json_object_set(o, "mig", migs) == 0;
    }
    json_decref(peers);
    json_decref(res);
    json_decref(migs);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int gs_dp_inventory_json(const struct gs_dp_model *m, const enum gs_health_state *health,
                         char **out)
{
    if (out != NULL)
        *out = NULL;
    if (m == NULL || out == NULL || (health == NULL && m->n_gpus > 0))
        return GS_EINVAL;
    json_t *doc = json_object();
    json_t *gpus = json_array();
    bool ok = doc != NULL && gpus != NULL;
    for (uint32_t g = 0; ok && g < m->n_gpus; g++)
        ok = push(gpus, gpu_entry(m, health, g));
    ok = ok && set(doc, "version", json_integer(GS_DP_INVENTORY_VERSION)) &&
         json_object_set(doc, "gpus", gpus) == 0;
    json_decref(gpus);
    char *text = ok ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (text == NULL)
        return GS_ENOMEM;
    *out = text;
    return GS_OK;
}
