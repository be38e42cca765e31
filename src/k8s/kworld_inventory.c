/*
 * The node agent's inventory (Node annotation gpusched.io/gpus) into what the core places on:
 * GPU count, model, memory, which GPUs are usable, their NVLink peers, and their UUIDs for the
 * assignment the
 * scheduler writes (internal contract in kworld_inv.h; the writer is src/agent/
 * devplugin_inventory.c, the format docs/schemas/node-gpus.schema.json).
 *
 * The annotation is outside input: every member the scheduler uses is checked, and the first
 * problem is one sentence naming the node and the field; the caller then reads the Node as if
 * there were no annotation (status.capacity), so a broken or foreign agent costs UUIDs and
 * per-GPU health, never the node.
 */
#include "kworld_inv.h"

#include "gpusched/err.h"

#include <stdio.h>
#include <string.h>

#define WARN_TAIL "; GPUs read from status.capacity"

/* A non-empty string member shorter than cap; its value or NULL. */
static const char *member_str(const json_t *o, const char *key, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL && s[0] != '\0' && strlen(s) < cap ? s : NULL;
}

int gs__kworld_node_gpus(const json_t *node, const char *name, struct gs__knode_gpus *out,
                         char *warn, size_t cap)
{
    memset(out, 0, sizeof *out);
    const json_t *ann = json_object_get(json_object_get(node, "metadata"), "annotations");
    const json_t *v = json_object_get(ann, GS_KWORLD_INVENTORY);
    if (v == NULL)
        return 0;
    const char *text = json_string_value(v);
    json_error_t jerr;
    json_t *doc = text != NULL ? json_loads(text, 0, &jerr) : NULL;
    const json_t *gpus = json_object_get(doc, "gpus");
    const json_t *ver = json_object_get(doc, "version");
    int rc = -1;
#define BAD(...)                                                                                   \
    do {                                                                                           \
        char what_[200];                                                                           \
        (void)snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        (void)snprintf(warn, cap, "node %s: annotation %s: %s" WARN_TAIL, name,                    \
                       GS_KWORLD_INVENTORY, what_);                                                \
        goto out;                                                                                  \
    } while (0)
    if (text == NULL)
        BAD("not a string");
    if (doc == NULL)
        BAD("not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    if (!json_is_object(doc))
        BAD("not a JSON object");
    if (ver != NULL && (!json_is_integer(ver) || json_integer_value(ver) != 1))
        BAD("version: not 1 (this scheduler reads version 1)");
    if (!json_is_array(gpus))
        BAD("gpus: not a list");
    if (json_array_size(gpus) > GS_NODE_GPUS_MAX)
        BAD("gpus: %zu GPUs, more than the %d a node holds here", json_array_size(gpus),
            GS_NODE_GPUS_MAX);
    out->n = (uint32_t)json_array_size(gpus);
    for (uint32_t i = 0; i < out->n; i++) {
        const json_t *g = json_array_get(gpus, i);
        if (!json_is_object(g))
            BAD("gpus[%u]: not an object", (unsigned)i);
        const json_t *idx = json_object_get(g, "index");
        if (!json_is_integer(idx) || json_integer_value(idx) != (json_int_t)i)
            BAD("gpus[%u].index: not %u (entries are in index order from 0)", (unsigned)i,
                (unsigned)i);
        const char *uuid = member_str(g, "uuid", sizeof out->uuid[i]);
        if (uuid == NULL)
            BAD("gpus[%u].uuid: not a non-empty string of at most %zu bytes", (unsigned)i,
                sizeof out->uuid[i] - 1);
        const char *model = member_str(g, "model", sizeof out->model);
        if (model == NULL)
            BAD("gpus[%u].model: not a non-empty string of at most %zu bytes", (unsigned)i,
                sizeof out->model - 1);
        const json_t *mem = json_object_get(g, "mem_mib");
        if (!json_is_integer(mem) || json_integer_value(mem) <= 0)
            BAD("gpus[%u].mem_mib: not a positive integer", (unsigned)i);
        enum gs_gpu_sharing sharing;
        if (gs_gpu_sharing_parse(json_string_value(json_object_get(g, "mode")), &sharing) != GS_OK)
            BAD("gpus[%u].mode: not whole, replicas, fractions or mig", (unsigned)i);
        const char *health = json_string_value(json_object_get(g, "health"));
        if (health == NULL || (strcmp(health, "Healthy") != 0 && strcmp(health, "Unhealthy") != 0))
            BAD("gpus[%u].health: not Healthy or Unhealthy", (unsigned)i);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(out->uuid[j], uuid) == 0)
                BAD("gpus[%u].uuid: %s is also gpus[%u]'s", (unsigned)i, uuid, (unsigned)j);
        (void)snprintf(out->uuid[i], sizeof out->uuid[i], "%s", uuid);
        if (i == 0)
            (void)snprintf(out->model, sizeof out->model, "%s", model);
        if (i == 0 || json_integer_value(mem) < out->mem_mib)
            out->mem_mib = json_integer_value(mem);
        out->usable[i] = strcmp(health, "Healthy") == 0;
        out->mode[i] = (uint8_t)sharing;
        const json_t *rep = json_object_get(g, "replicas");
        out->replicas[i] = rep == NULL ? 1 : json_is_integer(rep) ? json_integer_value(rep) : -1;
        /* NVLink peers (optional): distinct indices of other GPUs of this node. */
        const json_t *peers = json_object_get(g, "nvlink_peers");
        if (peers != NULL && !json_is_array(peers))
            BAD("gpus[%u].nvlink_peers: not a list", (unsigned)i);
        for (size_t p = 0; p < json_array_size(peers); p++) {
            const json_t *pv = json_array_get(peers, p);
            if (!json_is_integer(pv))
                BAD("gpus[%u].nvlink_peers[%zu]: not an integer", (unsigned)i, p);
            json_int_t j = json_integer_value(pv);
            if (j < 0 || j >= (json_int_t)out->n)
                BAD("gpus[%u].nvlink_peers[%zu]: %lld is not a GPU of this node (0..%u)",
                    (unsigned)i, p, (long long)j, (unsigned)out->n - 1);
            if (j == (json_int_t)i)
                BAD("gpus[%u].nvlink_peers[%zu]: %lld is the GPU itself", (unsigned)i, p,
                    (long long)j);
            if (out->nvlink[i] >> j & 1u)
                BAD("gpus[%u].nvlink_peers[%zu]: %lld is named twice", (unsigned)i, p,
                    (long long)j);
            out->nvlink[i] = (uint16_t)(out->nvlink[i] | (1u << j));
        }
        /* The MIG devices are read as given; gs__kinv_modes judges them per GPU, so a bad
         * layout costs that GPU, not the node. */
        const json_t *mig = json_object_get(g, "mig");
        size_t nm = json_array_size(mig);
        out->mig_n[i] = (uint8_t)(nm > GS_MIG_INSTANCES_MAX ? GS_MIG_INSTANCES_MAX + 1 : nm);
        for (size_t m = 0; m < nm && m < GS_MIG_INSTANCES_MAX; m++) {
            const json_t *d = json_array_get(mig, m);
            const char *prof = member_str(d, "profile", GS_MIG_NAME_MAX);
            const json_t *st = json_object_get(d, "start");
            (void)snprintf(out->mig[i][m].profile, GS_MIG_NAME_MAX, "%s", prof ? prof : "");
            out->mig[i][m].start =
                json_is_integer(st) && json_integer_value(st) >= 0 && json_integer_value(st) <= 7
                    ? (int)json_integer_value(st)
                    : -1;
        }
    }
#undef BAD
    rc = 1;
out:
    json_decref(doc);
    if (rc != 1) {
        struct gs__knode_gpus zero;
        memset(&zero, 0, sizeof zero);
        *out = zero;
    }
    return rc;
}

/* ---- what the translation keeps ---------------------------------------------------------- */

int gs__kinv_init(struct gs__kinv *k)
{
    k->uuids = json_object();
    k->warned = json_object();
    k->mode_warned = json_object();
    k->cap_warned = json_object();
    k->migs = json_object();
    if (k->uuids == NULL || k->warned == NULL || k->mode_warned == NULL || k->cap_warned == NULL ||
        k->migs == NULL) {
        gs__kinv_fini(k);
        return GS_ENOMEM;
    }
    return GS_OK;
}

void gs__kinv_fini(struct gs__kinv *k)
{
    json_decref(k->uuids);
    json_decref(k->warned);
    json_decref(k->mode_warned);
    json_decref(k->cap_warned);
    json_decref(k->migs);
    k->uuids = k->warned = k->mode_warned = k->cap_warned = k->migs = NULL;
}

void gs__kinv_forget(struct gs__kinv *k, const char *name)
{
    (void)json_object_del(k->uuids, name);
    (void)json_object_del(k->warned, name);
    (void)json_object_del(k->mode_warned, name);
    (void)json_object_del(k->cap_warned, name);
    (void)json_object_del(k->migs, name);
}

const char *gs__kinv_uuid(const struct gs__kinv *k, const char *node, uint32_t index)
{
    if (node == NULL)
        return NULL;
    return json_string_value(json_array_get(json_object_get(k->uuids, node), index));
}

int gs__kinv_read(struct gs__kinv *k, const json_t *node, const char *name,
                  struct gs__knode_gpus *out, int *have, void (*warn)(void *ctx, const char *msg),
                  void *ctx)
{
    char text[400];
    *have = gs__kworld_node_gpus(node, name, out, text, sizeof text);
    if (*have != 1) {
        (void)json_object_del(k->uuids, name);
        (void)json_object_del(k->migs, name);
        if (*have == 0) {
            (void)json_object_del(k->warned, name);
            return GS_OK;
        }
        const char *last = json_string_value(json_object_get(k->warned, name));
        if (last == NULL || strcmp(last, text) != 0) {
            if (json_object_set_new(k->warned, name, json_string(text)) != 0)
                return GS_ENOMEM;
            if (warn != NULL)
                warn(ctx, text);
        }
        return GS_OK;
    }
    (void)json_object_del(k->warned, name);
    json_t *uuids = json_array();
    for (uint32_t g = 0; uuids != NULL && g < out->n; g++)
        if (json_array_append_new(uuids, json_string(out->uuid[g])) != 0) {
            json_decref(uuids);
            uuids = NULL;
        }
    if (uuids == NULL || json_object_set_new(k->uuids, name, uuids) != 0)
        return GS_ENOMEM;
    /* The MIG devices as given (profile, start), for dynamic MIG's plans and their check. */
    json_t *migs = json_array();
    for (uint32_t g = 0; migs != NULL && g < out->n; g++) {
        json_t *l = json_array();
        for (uint32_t m = 0; l != NULL && m < out->mig_n[g] && m < GS_MIG_INSTANCES_MAX; m++)
            if (json_array_append_new(
                    l, json_pack("[s,i]", out->mig[g][m].profile, out->mig[g][m].start)) != 0) {
                json_decref(l);
                l = NULL;
            }
        if (l == NULL || json_array_append_new(migs, l) != 0) {
            json_decref(migs);
            migs = NULL;
        }
    }
    if (migs == NULL || json_object_set_new(k->migs, name, migs) != 0)
        return GS_ENOMEM;
    return GS_OK;
}

int gs__kinv_mig(const struct gs__kinv *k, const char *node, uint32_t index,
                 struct gs_kmig_slot *out, uint32_t cap, uint32_t *n)
{
    *n = 0;
    const json_t *l = node ? json_array_get(json_object_get(k->migs, node), index) : NULL;
    if (l == NULL)
        return GS_ENOENT;
    size_t i;
    const json_t *e;
    json_array_foreach(l, i, e)
    {
        if (*n == cap)
            break;
        json_int_t st = json_integer_value(json_array_get(e, 1));
        out[*n].profile = json_string_value(json_array_get(e, 0));
        out[*n].start = st < 0 ? -1 : (int32_t)st;
        (*n)++;
    }
    return GS_OK;
}

/* ---- per-GPU modes --------------------------------------------------------------------- */

/* The MIG layout of GPU g, or why it is not one ("" when the GPU has no instances). */
static bool mig_mode(const struct gs__knode_gpus *inv, uint32_t g, const struct gs_mig_model *mm,
                     struct gs_gpu_mode *mode, char *why, size_t cap)
{
    why[0] = '\0';
    if (inv->mig_n[g] == 0)
        return false; /* MIG on, no instance made yet: nothing to place, nothing wrong */
    if (inv->mig_n[g] > GS_MIG_INSTANCES_MAX) {
        (void)snprintf(why, cap, "more than %d MIG devices", GS_MIG_INSTANCES_MAX);
        return false;
    }
    if (mm == NULL) {
        (void)snprintf(why, cap, "model %s is not in the MIG table", inv->model);
        return false;
    }
    /* The core's builder, which the agent uses for what it publishes: one judgement. */
    struct gs_mig_device dev[GS_MIG_INSTANCES_MAX];
    for (uint32_t m = 0; m < inv->mig_n[g]; m++)
        dev[m] = (struct gs_mig_device){inv->mig[g][m].profile, inv->mig[g][m].start};
    return gs_mig_mode_build(mm, dev, inv->mig_n[g], mode, why, cap) == GS_OK;
}

int gs__kinv_modes(struct gs__kinv *k, const struct gs__knode_gpus *inv, const char *name,
                   const char *product, struct gs_gpu_mode *out, bool *usable, const char **model,
                   void (*warn)(void *ctx, const char *msg), void *ctx)
{
    *model = inv->model;
    const struct gs_mig_model *mm = gs_mig_model_find(inv->model);
    bool has_mig = false;
    for (uint32_t g = 0; g < inv->n; g++)
        has_mig = has_mig || inv->mode[g] == GS_GPU_SHARE_MIG;
    if (mm == NULL && has_mig && gs_mig_model_find(product) != NULL) {
        mm = gs_mig_model_find(product);
        *model = product;
    }
    char text[600] = "";
    size_t len = 0;
    for (uint32_t g = 0; g < inv->n; g++) {
        memset(&out[g], 0, sizeof out[g]);
        out[g].sharing = GS_GPU_SHARE_WHOLE;
        out[g].replicas = 1;
        usable[g] = inv->usable[g];
        char why[200] = "";
        switch (inv->mode[g]) {
        case GS_GPU_SHARE_TIMESLICE:
            if (inv->replicas[g] < 1 || inv->replicas[g] > 255) {
                (void)snprintf(why, sizeof why, "replicas is not a count in 1..255");
                usable[g] = false;
            } else if (inv->replicas[g] > 1) {
                out[g].sharing = GS_GPU_SHARE_TIMESLICE;
                out[g].replicas = (uint8_t)inv->replicas[g];
            } /* one replica: the GPU is whole */
            break;
        case GS_GPU_SHARE_MILLI:
            out[g].sharing = GS_GPU_SHARE_MILLI;
            break;
        case GS_GPU_SHARE_MIG:
            if (!mig_mode(inv, g, mm, &out[g], why, sizeof why)) {
                memset(&out[g], 0, sizeof out[g]);
                out[g].sharing = GS_GPU_SHARE_WHOLE;
                out[g].replicas = 1;
                usable[g] = false;
            }
            break;
        default:
            break;
        }
        if (why[0] && len < sizeof text) {
            int w = snprintf(text + len, sizeof text - len, "%snode %s: GPU %u: %s; unusable",
                             len ? "\n" : "", name, (unsigned)g, why);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    if (!text[0]) {
        (void)json_object_del(k->mode_warned, name);
        return GS_OK;
    }
    const char *last = json_string_value(json_object_get(k->mode_warned, name));
    if (last != NULL && strcmp(last, text) == 0)
        return GS_OK;
    if (json_object_set_new(k->mode_warned, name, json_string(text)) != 0)
        return GS_ENOMEM;
    if (warn != NULL) {
        /* One warning per GPU, each its own line. */
        char *line = text;
        while (line != NULL) {
            char *nl = strchr(line, '\n');
            if (nl != NULL)
                *nl = '\0';
            warn(ctx, line);
            line = nl != NULL ? nl + 1 : NULL;
        }
    }
    return GS_OK;
}

bool gs__kinv_mode_equal(const struct gs_gpu *g, const struct gs_gpu_mode *m)
{
    if (g->sharing != m->sharing)
        return false;
    if (m->sharing == GS_GPU_SHARE_TIMESLICE)
        return g->replicas == m->replicas;
    if (m->sharing != GS_GPU_SHARE_MIG)
        return true;
    if (g->mig_count != m->mig_count)
        return false;
    /* The core keeps a layout by start; starts of one layout are distinct (no overlap). */
    for (uint32_t i = 0; i < m->mig_count; i++) {
        bool found = false;
        for (uint32_t j = 0; j < g->mig_count && !found; j++)
            found = g->mig[j].start == m->mig[i].start && g->mig[j].profile == m->mig[i].profile;
        if (!found)
            return false;
    }
    return true;
}
