/*
 * The node agent's inventory (Node annotation gpusched.io/gpus) into what the core places on:
 * GPU count, model, memory, which GPUs are usable, and their UUIDs for the assignment the
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

static const char *const modes[] = {"whole", "replicas", "fractions", "mig"};

static bool str_in(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; s != NULL && i < n; i++)
        if (strcmp(s, set[i]) == 0)
            return true;
    return false;
}

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
        const char *mode = json_string_value(json_object_get(g, "mode"));
        if (!str_in(mode, modes, sizeof modes / sizeof modes[0]))
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
        out->usable[i] = strcmp(health, "Healthy") == 0 &&
                         (strcmp(mode, "whole") == 0 || strcmp(mode, "replicas") == 0);
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
    if (k->uuids == NULL || k->warned == NULL) {
        gs__kinv_fini(k);
        return GS_ENOMEM;
    }
    return GS_OK;
}

void gs__kinv_fini(struct gs__kinv *k)
{
    json_decref(k->uuids);
    json_decref(k->warned);
    k->uuids = k->warned = NULL;
}

void gs__kinv_forget(struct gs__kinv *k, const char *name)
{
    (void)json_object_del(k->uuids, name);
    (void)json_object_del(k->warned, name);
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
    return GS_OK;
}
