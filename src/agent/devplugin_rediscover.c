/*
 * Rediscovery (issue 9): the agent reads its GPUs again every flags.rediscoverInterval and,
 * when a MIG layout changed, advertises the new model without a restart. The model side (the
 * carried layout, the withdrawal step) is pure, in devplugin_carry.c; this file drives the
 * agent through it: see docs/agent.md, "MIG changes without a restart".
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/devplugin.h"

#include "gpusched/err.h"

#include "devplugin_agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rediscovery -------------------------------------------------------------------------- */

/* A GPU's MIG layout in a few words, for log lines: "MIG off", "MIG on, 0 instance(s)", "MIG on,
 * 3 instance(s): 1g.18gb 1g.18gb 3g.71gb". */
static void layout_words(const struct gs_gpu_info *g, char *buf, size_t cap)
{
    if (!g->mig_enabled) {
        (void)snprintf(buf, cap, "MIG off");
        return;
    }
    size_t k = (size_t)snprintf(buf, cap, "MIG on, %u instance(s)", (unsigned)g->mig_count);
    for (uint32_t m = 0; m < g->mig_count && k + 2 < cap; m++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", m == 0 ? ": " : " ", g->mig[m].profile);
}

/* The resource positions of the model: socket paths, GPU masks (after every model change). */
int gs__dp_res_layout(struct gs_dp_agent *a, uint32_t i)
{
    struct res_rt *r = &a->res[i];
    const struct gs_dp_resource *mr = &a->model.resources[i];
    r->a = a;
    r->index = i;
    r->gpu_mask = 0;
    for (uint32_t d = 0; d < mr->n_devices; d++)
        r->gpu_mask |= UINT64_C(1) << mr->devices[d].gpu;
    return gs__dp_join_path(r->path, sizeof r->path, a->cfg.plugin_dir, mr->endpoint) ? GS_OK
                                                                                      : GS_EINVAL;
}

/* Logs a rediscovery failure once until it changes or a rediscovery succeeds. */
static void rediscover_failed(struct gs_dp_agent *a, const char *why)
{
    if (strcmp(a->rediscover_err, why) == 0)
        return;
    gs__dp_scopy(a->rediscover_err, sizeof a->rediscover_err, why);
    gs__dp_logf(a, "rediscovery: %s; still advertising the devices as they were", why);
}

static bool id_listed(const char *const *ids, uint32_t n, const char *id)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0)
            return true;
    return false;
}

/* Logs each device next keeps retired that the advertised model does not, with its holder. */
static void log_retired(struct gs_dp_agent *a, const struct gs_dp_model *next)
{
    for (uint32_t i = 0; i < next->n_resources; i++) {
        const struct gs_dp_resource *r = &next->resources[i];
        for (uint32_t d = 0; d < r->n_devices; d++) {
            const struct gs_dp_device *dev = &r->devices[d];
            if (!dev->retired)
                continue;
            int32_t was =
                i < a->model.n_resources ? gs_dp_model_find(&a->model.resources[i], dev->id) : -1;
            if (was >= 0 && a->model.resources[i].devices[was].retired)
                continue;
            const struct gs_exporter_attr *holder = NULL;
            for (uint32_t k = 0; k < a->n_attr && holder == NULL; k++)
                if (strcmp(a->attr[k].device_id, dev->id) == 0)
                    holder = &a->attr[k];
            gs__dp_logf(a,
                        "rediscovery: warning: %s (%s) is held by pod %s/%s but GPU %u no longer "
                        "has it (re-partitioned under a running container): listed Unhealthy "
                        "until the pod releases it",
                        dev->id, r->name, holder != NULL ? holder->namespace_name : "?",
                        holder != NULL ? holder->pod : "?", (unsigned)dev->gpu);
        }
    }
}

/* Whether resource i lists different device IDs in two models. */
static bool list_differs(const struct gs_dp_model *x, const struct gs_dp_model *y, uint32_t i)
{
    if (i >= x->n_resources || i >= y->n_resources)
        return true;
    const struct gs_dp_resource *p = &x->resources[i], *q = &y->resources[i];
    if (p->n_devices != q->n_devices)
        return true;
    for (uint32_t d = 0; d < p->n_devices; d++)
        if (strcmp(p->devices[d].id, q->devices[d].id) != 0 ||
            p->devices[d].retired != q->devices[d].retired)
            return true;
    return false;
}

/* Makes m the advertised model and sends every resource whose list changed its new list. */
static void install_model(struct gs_dp_agent *a, struct gs_dp_model *m)
{
    struct gs_dp_model old = a->model;
    a->model = *m;
    memset(m, 0, sizeof *m);
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        bool differs = list_differs(&old, &a->model, i);
        /* A position given to another resource: its old socket closes, a new one starts
         * (gs__dp_advertise_pending); the old streams never see the new resource's list. */
        bool renamed =
            i < old.n_resources && strcmp(old.resources[i].name, a->model.resources[i].name) != 0;
        (void)gs__dp_res_layout(a, i); /* paths were checked when the model was made */
        if (!differs || renamed || a->res[i].srv == NULL)
            continue;
        const struct gs_dp_resource *mr = &a->model.resources[i];
        gs__dp_logf(a, "rediscovery: %s: %u devices (was %u); sending the list to %zu stream(s)",
                    mr->name, (unsigned)mr->n_devices,
                    i < old.n_resources ? (unsigned)old.resources[i].n_devices : 0u,
                    a->res[i].n_streams);
        gs__dp_broadcast(&a->res[i]);
    }
    gs_dp_model_fini(&old);
}

/* Step two of a rediscovery: the new lists, new sockets, the inventory. */
void gs__dp_advertise_pending(struct gs_dp_agent *a)
{
    a->have_pending = false;
    char old_name[GS_DP_RESOURCES_MAX][GS_DP_RESOURCE_NAME_LEN];
    for (uint32_t i = 0; i < GS_DP_RESOURCES_MAX; i++)
        gs__dp_scopy(old_name[i], sizeof old_name[i],
                     i < a->model.n_resources ? a->model.resources[i].name : "");
    install_model(a, &a->pending);
    for (uint32_t i = 0; i < a->model.n_resources; i++) {
        struct res_rt *r = &a->res[i];
        enum gs_dp_res_change c = a->pending_change[i];
        if (c == GS_DP_RES_ADDED || c == GS_DP_RES_REPLACED) {
            if (c == GS_DP_RES_REPLACED)
                gs__dp_logf(a, "rediscovery: the position of withdrawn %s goes to %s; closing %s",
                            old_name[i], a->model.resources[i].name, old_name[i]);
            else
                gs__dp_logf(a, "rediscovery: new resource %s: %u devices",
                            a->model.resources[i].name, (unsigned)a->model.resources[i].n_devices);
            gs__dp_res_stop(r);
            (void)gs__dp_res_start(a, r); /* registers; a failure is retried by recover() */
        } else if (c == GS_DP_RES_WITHDRAWN && a->model.resources[i].n_devices == 0) {
            gs__dp_logf(a, "rediscovery: %s withdrawn: its socket stays with an empty list",
                        a->model.resources[i].name);
        } else if (c == GS_DP_RES_WITHDRAWN) {
            gs__dp_logf(a,
                        "rediscovery: %s withdrawn: its socket stays, listing the %u device(s) "
                        "containers hold as Unhealthy",
                        a->model.resources[i].name, (unsigned)a->model.resources[i].n_devices);
        }
    }
    a->rediscoveries++;
    gs__dp_publish_inventory(a);
}

/*
 * Timer: reads every GPU's facts again; when a MIG layout changed (or a GPU lost at start
 * answers with its UUID), builds the new model, lays it out in the current positions, sends
 * the withdrawal step now and the new lists WITHDRAW_SETTLE_MS later. A GPU that does not
 * answer keeps the facts it had (health deals with it). A model that cannot be built (single
 * strategy no longer fits, too many resources) is logged and the current one stays.
 */
void gs__dp_rediscover(struct gs_dp_agent *a)
{
    if (a->have_pending)
        return;
    uint32_t n = a->model.n_gpus;
    struct gs_gpu_info *infos = calloc(n > 0 ? n : 1, sizeof *infos);
    if (infos == NULL) {
        rediscover_failed(a, "out of memory");
        return;
    }
    uint64_t changed = 0;
    for (uint32_t g = 0; g < n; g++) {
        int rc = gs_gpu_info(a->backend, g, &infos[g]);
        if (rc != GS_OK || infos[g].lost || infos[g].index != g) {
            infos[g] = a->model.gpus[g];
            continue;
        }
        if (!gs_dp_gpu_layout_same(&a->model.gpus[g], &infos[g]))
            changed |= UINT64_C(1) << g;
    }
    /* Devices containers hold (the last PodResources List; none without pod attribution). */
    const char *in_use[GS_EXPORTER_ATTR_MAX];
    uint32_t n_in_use = 0;
    for (uint32_t k = 0; k < a->n_attr && k < GS_EXPORTER_ATTR_MAX; k++)
        in_use[n_in_use++] = a->attr[k].device_id;
    bool released = false; /* a retired device no container holds any more */
    for (uint32_t i = 0; i < a->model.n_resources; i++)
        for (uint32_t d = 0; d < a->model.resources[i].n_devices; d++) {
            const struct gs_dp_device *dev = &a->model.resources[i].devices[d];
            released = released || (dev->retired && !id_listed(in_use, n_in_use, dev->id));
        }
    if (changed == 0 && !released) {
        free(infos);
        return;
    }
    char merr[512];
    struct gs_dp_model next, step;
    memset(&next, 0, sizeof next);
    memset(&step, 0, sizeof step);
    int rc = gs_dp_model_build(&a->cfg, infos, n, &next, merr, sizeof merr);
    if (rc == GS_OK) {
        memcpy(next.dev_minor, a->model.dev_minor, sizeof next.dev_minor);
        rc = gs_dp_model_carry(&a->model, &next, a->pending_change, merr, sizeof merr);
    }
    if (rc == GS_OK) {
        rc = gs_dp_model_retain(&a->model, &next, in_use, n_in_use, NULL);
        if (rc == GS_ELIMIT)
            (void)snprintf(merr, sizeof merr,
                           "more than %d devices in one resource with the ones containers hold",
                           GS_DP_DEVICES_MAX);
    }
    for (uint32_t i = 0; rc == GS_OK && i < next.n_resources; i++) {
        char path[GS_DP_PATH_LEN + GS_DP_ENDPOINT_LEN];
        if (!gs__dp_join_path(path, sizeof path, a->cfg.plugin_dir, next.resources[i].endpoint)) {
            (void)snprintf(merr, sizeof merr, "socket path %s/%s is longer than %d bytes",
                           a->cfg.plugin_dir, next.resources[i].endpoint, SOCKET_PATH_MAX);
            rc = GS_EINVAL;
        }
    }
    if (rc == GS_OK)
        rc = gs_dp_model_withdrawal(&a->model, &next, a->pending_change, &step);
    if (rc != GS_OK) {
        if (rc == GS_ENOMEM)
            (void)snprintf(merr, sizeof merr, "out of memory");
        rediscover_failed(a, merr);
        gs_dp_model_fini(&next);
        free(infos);
        return;
    }
    a->rediscover_err[0] = '\0';
    for (uint32_t g = 0; g < n; g++) {
        if (!(changed & (UINT64_C(1) << g)))
            continue;
        char was[160], now[160];
        layout_words(&a->model.gpus[g], was, sizeof was);
        layout_words(&infos[g], now, sizeof now);
        gs__dp_logf(a, "rediscovery: GPU %u (%s): %s, was %s", (unsigned)g, infos[g].uuid, now,
                    was);
        a->xgpus[g].info = infos[g];
    }
    free(infos);
    log_retired(a, &next);
    bool withdraws = false;
    for (uint32_t i = 0; i < step.n_resources; i++)
        withdraws = withdraws || list_differs(&a->model, &step, i);
    install_model(a, &step); /* only removals: every list a subset of old and new */
    a->pending = next;
    a->have_pending = true;
    a->advertise_at_ms = gs__dp_now_ms(a) + (withdraws ? WITHDRAW_SETTLE_MS : 0);
}
