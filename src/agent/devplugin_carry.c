/*
 * Rediscovery's part of the resource model (contracts in include/gpusched/devplugin.h): whether
 * a GPU's MIG layout changed, the next model laid out in the previous one's resource order, and
 * the withdrawal step between them. Pure: no I/O, no clock.
 *
 * The agent serves one socket per resource position, and the gRPC server of a socket keeps the
 * position it was made for, so a rediscovered model keeps every position: a resource that is
 * still there stays where it was, one that is gone stays as an empty list (kubelet then counts
 * 0 of it), a new one takes a new position.
 *
 * A change goes out in two steps so that no device is ever under two resources, nor a GPU
 * whole and in MIG devices at once: first every resource sends the devices it keeps (its old
 * list less the ones that go), then, a moment later, the full new lists. Each step's lists are
 * subsets of one model (the old or the new), whatever order kubelet reads the streams in.
 */
#include "gpusched/devplugin.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool mig_same(const struct gs_gpu_mig *x, const struct gs_gpu_mig *y)
{
    return strcmp(x->uuid, y->uuid) == 0 && strcmp(x->profile, y->profile) == 0 &&
           x->mem_mib == y->mem_mib && x->has_start == y->has_start &&
           (!x->has_start || x->start_slot == y->start_slot);
}

bool gs_dp_gpu_layout_same(const struct gs_gpu_info *was, const struct gs_gpu_info *now)
{
    if (was == NULL || now == NULL)
        return was == now;
    if (strcmp(was->uuid, now->uuid) != 0 || was->mig_enabled != now->mig_enabled ||
        was->mig_count != now->mig_count)
        return false;
    for (uint32_t k = 0; k < was->mig_count && k < GS_GPU_MIG_MAX; k++)
        if (!mig_same(&was->mig[k], &now->mig[k]))
            return false;
    return true;
}

static int fail(char *err, size_t cap, int rc, const char *fmt, ...) GS_PRINTF(4, 5);

static int fail(char *err, size_t cap, int rc, const char *fmt, ...)
{
    if (err != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Whether two resources list the same device IDs in the same order, retired alike. */
static bool same_list(const struct gs_dp_resource *x, const struct gs_dp_resource *y)
{
    if (x->n_devices != y->n_devices)
        return false;
    for (uint32_t d = 0; d < x->n_devices; d++)
        if (strcmp(x->devices[d].id, y->devices[d].id) != 0 ||
            x->devices[d].retired != y->devices[d].retired)
            return false;
    return true;
}

/* An empty resource named as r (its socket name too). */
static void empty_like(struct gs_dp_resource *dst, const struct gs_dp_resource *r)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst->name, r->name, sizeof dst->name);
    memcpy(dst->endpoint, r->endpoint, sizeof dst->endpoint);
}

int gs_dp_model_carry(const struct gs_dp_model *prev, struct gs_dp_model *next,
                      enum gs_dp_res_change *change, char *err, size_t cap)
{
    if (err != NULL && cap > 0)
        err[0] = '\0';
    if (prev == NULL || next == NULL || change == NULL || prev->n_resources > GS_DP_RESOURCES_MAX ||
        next->n_resources > GS_DP_RESOURCES_MAX)
        return fail(err, cap, GS_EINVAL, "invalid argument");
    /* Resources move, never copy: each devices/by_id array stays owned exactly once. */
    struct gs_dp_resource *slots = calloc(GS_DP_RESOURCES_MAX, sizeof *slots);
    bool *taken = calloc(GS_DP_RESOURCES_MAX, sizeof *taken);
    if (slots == NULL || taken == NULL) {
        free(slots);
        free(taken);
        return fail(err, cap, GS_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < GS_DP_RESOURCES_MAX; i++)
        change[i] = GS_DP_RES_SAME;
    /* Positions of prev: the same name, or an empty list in its place. */
    for (uint32_t i = 0; i < prev->n_resources; i++) {
        const struct gs_dp_resource *was = &prev->resources[i];
        int32_t j = gs_dp_model_resource(next, was->name);
        if (j < 0) {
            empty_like(&slots[i], was);
            change[i] = was->n_devices > 0 ? GS_DP_RES_WITHDRAWN : GS_DP_RES_SAME;
            continue;
        }
        slots[i] = next->resources[j];
        taken[j] = true;
        change[i] = same_list(was, &slots[i]) ? GS_DP_RES_SAME : GS_DP_RES_CHANGED;
    }
    /* New names: a new position, else one whose resource was empty before this round too. */
    uint32_t n = prev->n_resources;
    int rc = GS_OK;
    for (uint32_t j = 0; j < next->n_resources; j++) {
        if (taken[j])
            continue;
        uint32_t at = n;
        if (n < GS_DP_RESOURCES_MAX) {
            n++;
            change[at] = GS_DP_RES_ADDED;
        } else {
            for (at = 0; at < n; at++)
                if (change[at] == GS_DP_RES_SAME && slots[at].n_devices == 0 &&
                    gs_dp_model_resource(next, slots[at].name) < 0)
                    break;
            if (at == n) {
                rc = fail(err, cap, GS_ELIMIT,
                          "resource %s is new and the %d resources a node may have are taken "
                          "by resources still advertised or withdrawn in this rediscovery",
                          next->resources[j].name, GS_DP_RESOURCES_MAX);
                break;
            }
            change[at] = GS_DP_RES_REPLACED;
        }
        slots[at] = next->resources[j];
        taken[j] = true;
    }
    if (rc != GS_OK) {
        /* next is untouched: it still owns every array, slots only borrowed them. */
        free(slots);
        free(taken);
        return rc;
    }
    memcpy(next->resources, slots, GS_DP_RESOURCES_MAX * sizeof *slots);
    next->n_resources = n;
    free(slots);
    free(taken);
    return GS_OK;
}

/* Builds by_id of r (positions sorted by ID): insertion sort, lists are short and sorted. */
static void index_ids(struct gs_dp_resource *r)
{
    for (uint32_t i = 0; i < r->n_devices; i++) {
        uint32_t p = i;
        uint32_t k = i;
        while (k > 0 && strcmp(r->devices[r->by_id[k - 1]].id, r->devices[p].id) > 0) {
            r->by_id[k] = r->by_id[k - 1];
            k--;
        }
        r->by_id[k] = p;
    }
}

/* dst = the devices of src whose ID keep has too (none when keep is NULL). */
static int filtered(struct gs_dp_resource *dst, const struct gs_dp_resource *src,
                    const struct gs_dp_resource *keep)
{
    empty_like(dst, src);
    uint32_t n = src->n_devices;
    dst->devices = calloc(n > 0 ? n : 1, sizeof *dst->devices);
    dst->by_id = calloc(n > 0 ? n : 1, sizeof *dst->by_id);
    if (dst->devices == NULL || dst->by_id == NULL)
        return GS_ENOMEM;
    for (uint32_t d = 0; keep != NULL && d < n; d++)
        if (gs_dp_model_find(keep, src->devices[d].id) >= 0)
            dst->devices[dst->n_devices++] = src->devices[d];
    index_ids(dst);
    return GS_OK;
}

static bool listed(const char *const *ids, uint32_t n, const char *id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] != NULL && strcmp(ids[i], id) == 0)
            return true;
    return false;
}

static bool in_model(const struct gs_dp_model *m, const char *id)
{
    for (uint32_t i = 0; i < m->n_resources; i++)
        if (gs_dp_model_find(&m->resources[i], id) >= 0)
            return true;
    return false;
}

int gs_dp_model_retain(const struct gs_dp_model *prev, struct gs_dp_model *next,
                       const char *const *in_use, uint32_t n_in_use, uint32_t *n_retained)
{
    if (n_retained != NULL)
        *n_retained = 0;
    if (prev == NULL || next == NULL || (in_use == NULL && n_in_use > 0))
        return GS_EINVAL;
    uint32_t total = 0;
    for (uint32_t i = 0; i < prev->n_resources && i < next->n_resources; i++) {
        const struct gs_dp_resource *was = &prev->resources[i];
        struct gs_dp_resource *r = &next->resources[i];
        if (strcmp(was->name, r->name) != 0)
            continue; /* a replaced position: its resource was empty */
        uint32_t keep = 0;
        for (uint32_t d = 0; d < was->n_devices; d++)
            keep +=
                listed(in_use, n_in_use, was->devices[d].id) && !in_model(next, was->devices[d].id)
                    ? 1u
                    : 0u;
        if (keep == 0)
            continue;
        if ((uint64_t)r->n_devices + keep > GS_DP_DEVICES_MAX)
            return GS_ELIMIT;
        uint32_t n = r->n_devices + keep;
        struct gs_dp_device *devs = calloc(n, sizeof *devs);
        uint32_t *by_id = calloc(n, sizeof *by_id);
        if (devs == NULL || by_id == NULL) {
            free(devs);
            free(by_id);
            return GS_ENOMEM;
        }
        if (r->n_devices > 0)
            memcpy(devs, r->devices, r->n_devices * sizeof *devs);
        uint32_t k = r->n_devices;
        for (uint32_t d = 0; d < was->n_devices; d++) {
            const struct gs_dp_device *od = &was->devices[d];
            if (!listed(in_use, n_in_use, od->id) || in_model(next, od->id))
                continue;
            devs[k] = *od;
            devs[k].retired = true;
            devs[k].mig = -1; /* its MIG position is gone with it */
            k++;
        }
        free(r->devices);
        free(r->by_id);
        r->devices = devs;
        r->by_id = by_id;
        r->n_devices = n;
        index_ids(r);
        total += keep;
    }
    if (n_retained != NULL)
        *n_retained = total;
    return GS_OK;
}

int gs_dp_model_withdrawal(const struct gs_dp_model *prev, const struct gs_dp_model *next,
                           const enum gs_dp_res_change *change, struct gs_dp_model *out)
{
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (prev == NULL || next == NULL || change == NULL || out == NULL ||
        prev->n_resources > next->n_resources)
        return GS_EINVAL;
    out->n_gpus = next->n_gpus;
    out->gpus = calloc(next->n_gpus > 0 ? next->n_gpus : 1, sizeof *out->gpus);
    if (out->gpus == NULL)
        return GS_ENOMEM;
    if (next->n_gpus > 0)
        memcpy(out->gpus, next->gpus, next->n_gpus * sizeof *out->gpus);
    memcpy(out->nvlink, next->nvlink, sizeof out->nvlink);
    memcpy(out->dev_minor, next->dev_minor, sizeof out->dev_minor);
    out->n_resources = prev->n_resources;
    int rc = GS_OK;
    for (uint32_t i = 0; rc == GS_OK && i < prev->n_resources; i++) {
        const struct gs_dp_resource *was = &prev->resources[i];
        /* A replaced position still serves its old (empty) resource in this step. */
        const struct gs_dp_resource *src =
            change[i] == GS_DP_RES_REPLACED ? was : &next->resources[i];
        rc = filtered(&out->resources[i], src, change[i] == GS_DP_RES_REPLACED ? NULL : was);
    }
    if (rc != GS_OK)
        gs_dp_model_fini(out);
    return rc;
}
