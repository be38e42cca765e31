/*
 * The device plugin's configuration file (contract in include/gpusched/devplugin.h, user's
 * reference in docs/agent.md, example in deploy/agent-config.yaml).
 *
 * The shape follows NVIDIA's k8s-device-plugin config (version v1): flags.migStrategy,
 * flags.plugin.{deviceListStrategy, deviceIDStrategy}, sharing.timeSlicing.{renameByDefault,
 * failRequestsGreaterThanOne, resources[{name, rename, replicas, devices}]}; the agent's own
 * sections are health, exporter and kubelet. sharing.mps is refused with a sentence rather
 * than as an unknown key, since users will copy it from NVIDIA's examples.
 *
 * The text is loaded by the shared YAML walker (src/util/yaml.h) under this reader's limits
 * (1 MiB, depth 16, 100,000 nodes with aliases expanded, one document) and walked along the
 * fixed schema, so aliases cannot make the walk larger than the schema; every mapping is checked
 * for unknown and repeated keys and every value for type and range. The first problem stops the
 * read with the line and column of the node (libyaml's marks, made 1-based), the key in `field` and
 * the key's path in the sentence.
 */
#define _POSIX_C_SOURCE 200809L /* strerror_r (XSI form) */

#include "gpusched/devplugin.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "util/file.h"
#include "util/yaml.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Longest duration accepted, ms (one week). */
#define DURATION_MAX_MS (7LL * 24 * 3600 * 1000)

/** State of one parse. */
struct rd {
    struct gs_yaml_doc doc; /**< the loaded document (the shared walker's tree) */
    struct gs_diag *diag;   /**< where errors go; may be NULL */
    int err;                /**< first error, GS_OK while none */
};

GS_PRINTF(5, 6)
static int fail_at(struct rd *r, int err, const struct gs_yaml_node *node, const char *field,
                   const char *fmt, ...)
{
    if (r->err != GS_OK)
        return r->err;
    r->err = err;
    if (r->diag != NULL) {
        r->diag->line = node != NULL ? node->at.line : 0;
        r->diag->column = node != NULL ? node->at.col : 0;
        (void)snprintf(r->diag->field, sizeof r->diag->field, "%s", field != NULL ? field : "");
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(r->diag->msg, sizeof r->diag->msg, fmt, ap);
        va_end(ap);
    }
    return err;
}

static const char *kind_name(int kind)
{
    return kind == GS_YAML_SEQ ? "a list" : kind == GS_YAML_MAP ? "a mapping" : "a scalar";
}

/* Requires a node of the given type; `path` is the key's full path, `key` its last part. */
static int expect(struct rd *r, const struct gs_yaml_node *n, enum gs_yaml_kind kind,
                  const char *path, const char *key)
{
    if (n->kind == kind)
        return GS_OK;
    return fail_at(r, GS_EPARSE, n, key, "%s: expected %s, found %s", path, kind_name(kind),
                   kind_name(n->kind));
}

/* A scalar's text; fails on an embedded NUL byte. */
static int scalar_text(struct rd *r, const struct gs_yaml_node *n, const char *path,
                       const char *key, const char **out)
{
    int rc = expect(r, n, GS_YAML_SCALAR, path, key);
    if (rc != GS_OK)
        return rc;
    const char *s = n->u.s;
    if (strlen(s) != n->n)
        return fail_at(r, GS_EPARSE, n, key, "%s: value holds a NUL byte", path);
    *out = s;
    return GS_OK;
}

/* A string of printable ASCII shorter than cap; empty allowed when allow_empty. */
static int get_str(struct rd *r, const struct gs_yaml_node *n, const char *path, const char *key,
                   bool allow_empty, char *dst, size_t cap)
{
    const char *s = "";
    int rc = scalar_text(r, n, path, key, &s);
    if (rc != GS_OK)
        return rc;
    size_t len = strlen(s);
    if (len == 0 && !allow_empty)
        return fail_at(r, GS_EPARSE, n, key, "%s: value is empty", path);
    if (len >= cap)
        return fail_at(r, GS_EPARSE, n, key, "%s: value is longer than %zu bytes", path, cap - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return fail_at(r, GS_EPARSE, n, key,
                           "%s: value holds a byte that is not printable "
                           "ASCII",
                           path);
    memcpy(dst, s, len + 1);
    return GS_OK;
}

static int get_int(struct rd *r, const struct gs_yaml_node *n, const char *path, const char *key,
                   int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = "";
    int rc = scalar_text(r, n, path, key, &s);
    if (rc != GS_OK)
        return rc;
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (*p < '0' || *p > '9')
        return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' is not an integer", path, s);
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' is not an integer", path, s);
    if (errno == ERANGE || v < lo || v > hi)
        return fail_at(r, GS_EPARSE, n, key, "%s: %.40s is out of range %" PRId64 "..%" PRId64,
                       path, s, lo, hi);
    *out = v;
    return GS_OK;
}

static int get_bool(struct rd *r, const struct gs_yaml_node *n, const char *path, const char *key,
                    bool *out)
{
    const char *s = "";
    int rc = scalar_text(r, n, path, key, &s);
    if (rc != GS_OK)
        return rc;
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
        *out = false;
    else
        return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' is not true or false", path, s);
    return GS_OK;
}

/*
 * A duration in Go's notation, as Kubernetes configs write them: one or more <number><unit>
 * with units ms, s, m, h ("1m30s", "500ms"); "0" alone is zero. Whole numbers only.
 */
static int get_duration(struct rd *r, const struct gs_yaml_node *n, const char *path,
                        const char *key, int64_t lo_ms, int64_t *out_ms)
{
    const char *s = "";
    int rc = scalar_text(r, n, path, key, &s);
    if (rc != GS_OK)
        return rc;
    if (strcmp(s, "0") == 0) {
        if (lo_ms > 0)
            return fail_at(r, GS_EPARSE, n, key, "%s: must be at least %" PRId64 "ms", path, lo_ms);
        *out_ms = 0;
        return GS_OK;
    }
    int64_t total = 0;
    const char *p = s;
    if (*p == '\0')
        return fail_at(r, GS_EPARSE, n, key, "%s: value is empty", path);
    while (*p != '\0') {
        if (*p < '0' || *p > '9')
            return fail_at(r, GS_EPARSE, n, key,
                           "%s: '%.40s' is not a duration such as 30s, "
                           "5m or 1m30s",
                           path, s);
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            if (v > DURATION_MAX_MS)
                return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' is longer than a week", path, s);
            p++;
        }
        int64_t unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else {
            return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' needs a unit (ms, s, m or h)", path,
                           s);
        }
        total += v * unit;
        if (total > DURATION_MAX_MS)
            return fail_at(r, GS_EPARSE, n, key, "%s: '%.40s' is longer than a week", path, s);
    }
    if (total < lo_ms)
        return fail_at(r, GS_EPARSE, n, key, "%s: must be at least %" PRId64 "ms", path, lo_ms);
    *out_ms = total;
    return GS_OK;
}

/*
 * Checks a mapping key against `keys` (NULL-terminated), each allowed once.
 * @return GS_OK with *slot set; GS_EPARSE for an unknown, repeated or non-scalar key.
 */
static int map_key(struct rd *r, const struct gs_yaml_node *map, struct gs_yaml_node *const *pair,
                   const char *const *keys, uint32_t *seen, const char *where, int *slot)
{
    const struct gs_yaml_node *k = pair[0];
    if (k == NULL || k->kind != GS_YAML_SCALAR)
        return fail_at(r, GS_EPARSE, k != NULL ? k : map, "", "%s: keys must be scalars", where);
    const char *name = k->u.s;
    for (int i = 0; keys[i] != NULL; i++) {
        if (strcmp(keys[i], name) == 0 && strlen(name) == k->n) {
            if (*seen & (1u << i))
                return fail_at(r, GS_EPARSE, k, keys[i], "%s: key '%s' repeated", where, keys[i]);
            *seen |= 1u << i;
            *slot = i;
            return GS_OK;
        }
    }
    char shown[48];
    (void)snprintf(shown, sizeof shown, "%s", name);
    for (char *p = shown; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    return fail_at(r, GS_EPARSE, k, shown, "%s: unknown key '%s'", where, shown);
}

/* Reads a decimal index below `max` at *p (digits only, no sign or space; no overflow, unlike
 * sscanf's %u, which wraps 4294967296 to 0) and advances *p past it. */
static bool small_index(const char **p, unsigned max)
{
    const char *s = *p;
    unsigned v = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (unsigned)(*s - '0');
        if (v >= max)
            return false;
    }
    *p = s;
    return true;
}

/* The loop variable is a declarator, which cannot be parenthesised. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define FOR_PAIRS(r, map, pair)                                                                    \
    for (struct gs_yaml_node *const *pair = (map)->u.items;                                        \
         (r)->err == GS_OK && pair < (map)->u.items + 2 * (size_t)(map)->n; pair += 2)

#define FOR_ITEMS(r, seq, it)                                                                      \
    for (struct gs_yaml_node *const *it = (seq)->u.items;                                          \
         (r)->err == GS_OK && it < (seq)->u.items + (seq)->n; it++)
/* NOLINTEND(bugprone-macro-parentheses) */

/* Valid extended resource name: "domain/name", a DNS-like domain, name [A-Za-z0-9._-]. */
static bool resource_name_ok(const char *s)
{
    const char *slash = strchr(s, '/');
    if (slash == NULL || slash == s || strchr(slash + 1, '/') != NULL)
        return false;
    size_t dlen = (size_t)(slash - s), nlen = strlen(slash + 1);
    if (dlen > 253 || nlen == 0 || nlen > 63)
        return false;
    for (const char *p = s; p < slash; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return false;
    for (const char *p = slash + 1; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.' || *p == '_'))
            return false;
    /* kubernetes.io names are not extended resources (kubelet refuses them). */
    if ((dlen == 13 && strncmp(s, "kubernetes.io", 13) == 0) ||
        (dlen > 14 && strncmp(slash - 14, ".kubernetes.io", 14) == 0))
        return false;
    return true;
}

/* ---- sections ---------------------------------------------------------------------------- */

static const char *const plugin_keys[] = {"deviceListStrategy", "deviceIDStrategy", NULL};

static int read_list_strategy_item(struct rd *r, const struct gs_yaml_node *n,
                                   struct gs_dp_config *cfg)
{
    const char *path = "flags.plugin.deviceListStrategy";
    const char *s = "";
    if (scalar_text(r, n, path, "deviceListStrategy", &s) != GS_OK)
        return r->err;
    if (strcmp(s, "envvar") == 0)
        cfg->list_envvar = true;
    else if (strcmp(s, "cdi-cri") == 0)
        cfg->list_cdi = true;
    else
        return fail_at(r, GS_EPARSE, n, "deviceListStrategy",
                       "%s: '%.40s' is not envvar or cdi-cri", path, s);
    return GS_OK;
}

static int read_plugin(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "flags.plugin", "plugin") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, plugin_keys, &seen, "flags.plugin", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            cfg->list_envvar = false;
            cfg->list_cdi = false;
            if (v->kind == GS_YAML_SEQ) {
                if (v->n == 0)
                    return fail_at(r, GS_EPARSE, v, "deviceListStrategy",
                                   "flags.plugin.deviceListStrategy: the list is empty");
                FOR_ITEMS(r, v, it)
                read_list_strategy_item(r, *it, cfg);
            } else {
                read_list_strategy_item(r, v, cfg);
            }
        } else {
            const char *s = "";
            if (scalar_text(r, v, "flags.plugin.deviceIDStrategy", "deviceIDStrategy", &s) != GS_OK)
                break;
            if (strcmp(s, "uuid") == 0)
                cfg->id_strategy = GS_DP_ID_UUID;
            else if (strcmp(s, "index") == 0)
                cfg->id_strategy = GS_DP_ID_INDEX;
            else
                fail_at(r, GS_EPARSE, v, "deviceIDStrategy",
                        "flags.plugin.deviceIDStrategy: '%.40s' is not uuid or index", s);
        }
    }
    return r->err;
}

static const char *const flags_keys[] = {"migStrategy", "plugin", "rediscoverInterval", NULL};

static int read_flags(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "flags", "flags") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, flags_keys, &seen, "flags", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            const char *s = "";
            if (scalar_text(r, v, "flags.migStrategy", "migStrategy", &s) != GS_OK)
                break;
            if (gs_gfd_mig_strategy_parse(s, &cfg->mig_strategy) != GS_OK)
                fail_at(r, GS_EPARSE, v, "migStrategy",
                        "flags.migStrategy: '%.40s' is not none, single or mixed", s);
        } else if (slot == 1) {
            read_plugin(r, v, cfg);
        } else if (get_duration(r, v, "flags.rediscoverInterval", "rediscoverInterval", 0,
                                &cfg->rediscover_ms) == GS_OK &&
                   cfg->rediscover_ms > 0 && cfg->rediscover_ms < GS_DP_REDISCOVER_MIN_MS) {
            fail_at(r, GS_EPARSE, v, "rediscoverInterval",
                    "flags.rediscoverInterval: must be 0 (off) or at least %dms",
                    GS_DP_REDISCOVER_MIN_MS);
        }
    }
    return r->err;
}

static const char *const entry_keys[] = {"name", "rename", "replicas", "devices", NULL};

static int read_devices(struct rd *r, const struct gs_yaml_node *v, const char *path,
                        struct gs_dp_ts_entry *e)
{
    if (v->kind == GS_YAML_SCALAR) {
        const char *s = "";
        if (scalar_text(r, v, path, "devices", &s) != GS_OK)
            return r->err;
        if (strcmp(s, "all") != 0)
            return fail_at(r, GS_EPARSE, v, "devices",
                           "%s: expected 'all' or a list of GPU indices or UUIDs", path);
        e->all_devices = true;
        return GS_OK;
    }
    if (expect(r, v, GS_YAML_SEQ, path, "devices") != GS_OK)
        return r->err;
    e->all_devices = false;
    if (v->n == 0)
        return fail_at(r, GS_EPARSE, v, "devices", "%s: the list is empty", path);
    FOR_ITEMS(r, v, it)
    {
        const struct gs_yaml_node *d = *it;
        if (e->n_devices == GS_DP_SELECT_MAX)
            return fail_at(r, GS_EPARSE, d, "devices", "%s: more than %d selectors", path,
                           GS_DP_SELECT_MAX);
        char *dst = e->devices[e->n_devices];
        if (get_str(r, d, path, "devices", false, dst, GS_GPU_UUID_LEN) != GS_OK)
            break;
        /* Index "3", MIG position "6:1", or a UUID "GPU-…" / "MIG-…". */
        bool ok = false;
        if (strncmp(dst, "GPU-", 4) == 0 || strncmp(dst, "MIG-", 4) == 0) {
            ok = dst[4] != '\0';
            for (const char *p = dst + 4; *p != '\0'; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '/'))
                    ok = false;
        } else {
            const char *p = dst;
            ok = small_index(&p, GS_GPU_MAX) &&
                 (*p == '\0' || (*p++ == ':' && small_index(&p, GS_GPU_MIG_MAX) && *p == '\0'));
        }
        if (!ok)
            return fail_at(r, GS_EPARSE, d, "devices",
                           "%s: '%.40s' is not a GPU index (0..%d), a MIG device 'GPU:MIG' or a "
                           "GPU-/MIG- UUID",
                           path, dst, GS_GPU_MAX - 1);
        for (uint32_t j = 0; j < e->n_devices; j++)
            if (strcmp(e->devices[j], dst) == 0)
                return fail_at(r, GS_EPARSE, d, "devices", "%s: '%.40s' is listed twice", path,
                               dst);
        e->n_devices++;
    }
    return r->err;
}

static int read_entry(struct rd *r, const struct gs_yaml_node *map, uint32_t idx,
                      struct gs_dp_config *cfg)
{
    char where[64];
    (void)snprintf(where, sizeof where, "sharing.timeSlicing.resources[%u]", (unsigned)idx);
    if (expect(r, map, GS_YAML_MAP, where, "resources") != GS_OK)
        return r->err;
    struct gs_dp_ts_entry *e = &cfg->ts[idx];
    memset(e, 0, sizeof *e);
    e->all_devices = true;
    e->line = map->at.line;
    uint32_t seen = 0;
    char path[96];
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, entry_keys, &seen, where, &slot) != GS_OK)
            break;
        (void)snprintf(path, sizeof path, "%s.%s", where, entry_keys[slot]);
        const struct gs_yaml_node *v = pair[1];
        int64_t n = 0;
        switch (slot) {
        case 0:
        case 1: {
            char *dst = slot == 0 ? e->name : e->rename;
            if (get_str(r, v, path, entry_keys[slot], false, dst, GS_DP_RESOURCE_NAME_LEN) != GS_OK)
                break;
            if (!resource_name_ok(dst))
                fail_at(r, GS_EPARSE, v, entry_keys[slot],
                        "%s: '%.60s' is not an extended resource name (domain/name)", path, dst);
            else if (slot == 0 && strcmp(dst, "nvidia.com/gpu") != 0 &&
                     strncmp(dst, "nvidia.com/mig-", 15) != 0)
                fail_at(r, GS_EPARSE, v, "name",
                        "%s: '%.60s' is not a resource this plugin advertises (nvidia.com/gpu "
                        "or nvidia.com/mig-<profile>)",
                        path, dst);
            break;
        }
        case 2:
            if (get_int(r, v, path, "replicas", 0, INT32_MAX, &n) != GS_OK)
                break;
            if (n < 2 || n > GS_DP_REPLICAS_MAX)
                fail_at(r, GS_EPARSE, v, "replicas",
                        "%s: %" PRId64 " is out of range 2..%d (leave a device out to keep it "
                        "whole)",
                        path, n, GS_DP_REPLICAS_MAX);
            else
                e->replicas = (uint32_t)n;
            break;
        default:
            read_devices(r, v, path, e);
            break;
        }
    }
    if (r->err == GS_OK && !(seen & 1u))
        fail_at(r, GS_EPARSE, map, "name", "%s: required key 'name' is missing", where);
    if (r->err == GS_OK && !(seen & 4u))
        fail_at(r, GS_EPARSE, map, "replicas", "%s: required key 'replicas' is missing", where);
    return r->err;
}

static const char *const ts_keys[] = {"renameByDefault", "failRequestsGreaterThanOne", "resources",
                                      NULL};

static int read_time_slicing(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    const char *where = "sharing.timeSlicing";
    if (expect(r, map, GS_YAML_MAP, where, "timeSlicing") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, ts_keys, &seen, where, &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            get_bool(r, v, "sharing.timeSlicing.renameByDefault", "renameByDefault",
                     &cfg->rename_by_default);
        } else if (slot == 1) {
            get_bool(r, v, "sharing.timeSlicing.failRequestsGreaterThanOne",
                     "failRequestsGreaterThanOne", &cfg->fail_requests_greater_than_one);
        } else {
            if (expect(r, v, GS_YAML_SEQ, "sharing.timeSlicing.resources", "resources") != GS_OK)
                break;
            cfg->n_ts = 0;
            FOR_ITEMS(r, v, it)
            {
                const struct gs_yaml_node *m = *it;
                if (cfg->n_ts == GS_DP_TS_MAX)
                    return fail_at(r, GS_EPARSE, m, "resources",
                                   "sharing.timeSlicing.resources: more than %d entries",
                                   GS_DP_TS_MAX);
                if (read_entry(r, m, cfg->n_ts, cfg) == GS_OK)
                    cfg->n_ts++;
            }
        }
    }
    return r->err;
}

static const char *const fractions_keys[] = {"slicesPerGpu", "devices", NULL};

/* sharing.fractions: the GPUs advertised as gpusched.io/gpu-slice tickets (mode fractions). */
static int read_fractions(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    const char *where = "sharing.fractions";
    if (expect(r, map, GS_YAML_MAP, where, "fractions") != GS_OK)
        return r->err;
    struct gs_dp_ts_entry *e = &cfg->fractions;
    memset(e, 0, sizeof *e);
    (void)snprintf(e->name, sizeof e->name, "%s", GS_DP_SLICE_RESOURCE);
    e->all_devices = true;
    e->replicas = GS_DP_SLICES_DEFAULT;
    e->line = map->at.line;
    cfg->has_fractions = true;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, fractions_keys, &seen, where, &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            int64_t n = 0;
            if (get_int(r, v, "sharing.fractions.slicesPerGpu", "slicesPerGpu", 0, INT32_MAX, &n) !=
                GS_OK)
                break;
            if (n < 1 || n > GS_DP_REPLICAS_MAX)
                fail_at(r, GS_EPARSE, v, "slicesPerGpu",
                        "sharing.fractions.slicesPerGpu: %" PRId64 " is out of range 1..%d", n,
                        GS_DP_REPLICAS_MAX);
            else
                e->replicas = (uint32_t)n;
        } else {
            read_devices(r, v, "sharing.fractions.devices", e);
        }
    }
    for (uint32_t i = 0; r->err == GS_OK && i < e->n_devices; i++)
        if (strchr(e->devices[i], ':') != NULL || strncmp(e->devices[i], "MIG-", 4) == 0)
            fail_at(r, GS_EPARSE, map, "devices",
                    "sharing.fractions.devices: '%.40s' is a MIG device; fractions take whole "
                    "GPUs",
                    e->devices[i]);
    return r->err;
}

/*
 * A GPU in two modes: a sharing.timeSlicing entry of nvidia.com/gpu and sharing.fractions both
 * selecting it (by the same selector, or either by 'all'). Selectors of different spellings
 * (index and UUID) are told apart only when the GPUs are known: gs_dp_model_build refuses those.
 */
static int check_modes(struct rd *r, const struct gs_yaml_node *root,
                       const struct gs_dp_config *cfg)
{
    if (!cfg->has_fractions)
        return GS_OK;
    const struct gs_dp_ts_entry *f = &cfg->fractions;
    for (uint32_t t = 0; t < cfg->n_ts; t++) {
        const struct gs_dp_ts_entry *e = &cfg->ts[t];
        if (strcmp(e->name, "nvidia.com/gpu") != 0)
            continue;
        const char *both = NULL;
        if (e->all_devices || f->all_devices)
            both = e->all_devices ? (f->all_devices ? "all" : f->devices[0]) : e->devices[0];
        for (uint32_t i = 0; both == NULL && i < e->n_devices; i++)
            for (uint32_t j = 0; both == NULL && j < f->n_devices; j++)
                if (strcmp(e->devices[i], f->devices[j]) == 0)
                    both = f->devices[j];
        if (both != NULL)
            return fail_at(r, GS_EPARSE, root, "fractions",
                           "sharing.fractions (line %u) and sharing.timeSlicing.resources[%u] "
                           "(line %u) both take GPU '%.40s': a GPU is in one mode",
                           (unsigned)f->line, (unsigned)t, (unsigned)e->line, both);
    }
    return GS_OK;
}

static const char *const sharing_keys[] = {"timeSlicing", "mps", "fractions", NULL};

static int read_sharing(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "sharing", "sharing") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, sharing_keys, &seen, "sharing", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0)
            read_time_slicing(r, v, cfg);
        else if (slot == 2)
            read_fractions(r, v, cfg);
        else
            fail_at(r, GS_EPARSE, pair[0], "mps",
                    "sharing.mps: MPS sharing is not supported; use sharing.timeSlicing");
    }
    return r->err;
}

static const char *const health_keys[] = {"ignoredXids", "recoveryQuietPeriod", "probeInterval",
                                          "resetXids", NULL};

static int read_health(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "health", "health") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, health_keys, &seen, "health", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            if (expect(r, v, GS_YAML_SEQ, "health.ignoredXids", "ignoredXids") != GS_OK)
                break;
            cfg->health.n_ignored = 0;
            FOR_ITEMS(r, v, it)
            {
                const struct gs_yaml_node *x = *it;
                int64_t code = 0;
                if (get_int(r, x, "health.ignoredXids", "ignoredXids", 1, INT64_MAX, &code) !=
                    GS_OK)
                    break;
                if (cfg->health.n_ignored == GS_HEALTH_IGNORED_MAX)
                    return fail_at(r, GS_EPARSE, x, "ignoredXids",
                                   "health.ignoredXids: more than %d codes", GS_HEALTH_IGNORED_MAX);
                cfg->health.ignored_xids[cfg->health.n_ignored++] = (uint64_t)code;
            }
        } else if (slot == 1) {
            const char *s = "";
            if (scalar_text(r, v, "health.recoveryQuietPeriod", "recoveryQuietPeriod", &s) != GS_OK)
                break;
            if (strcmp(s, "never") == 0)
                cfg->health.quiet_ms = -1;
            else
                get_duration(r, v, "health.recoveryQuietPeriod", "recoveryQuietPeriod", 0,
                             &cfg->health.quiet_ms);
        } else if (slot == 2) {
            get_duration(r, v, "health.probeInterval", "probeInterval", 10,
                         &cfg->health.probe_retry_ms);
        } else {
            if (expect(r, v, GS_YAML_SEQ, "health.resetXids", "resetXids") != GS_OK)
                break;
            cfg->health.n_reset = 0;
            FOR_ITEMS(r, v, it)
            {
                const struct gs_yaml_node *x = *it;
                int64_t code = 0;
                if (get_int(r, x, "health.resetXids", "resetXids", 1, INT64_MAX, &code) != GS_OK)
                    break;
                if (cfg->health.n_reset == GS_HEALTH_RESET_MAX)
                    return fail_at(r, GS_EPARSE, x, "resetXids",
                                   "health.resetXids: more than %d codes", GS_HEALTH_RESET_MAX);
                cfg->health.reset_xids[cfg->health.n_reset++] = (uint64_t)code;
            }
        }
    }
    return r->err;
}

/* "HOST:PORT" with a numeric port; "[v6]:PORT"; "" turns metrics off. */
static bool addr_ok(const char *s)
{
    if (*s == '\0')
        return true;
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon[1] == '\0')
        return false;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535 || colon[1] < '0' || colon[1] > '9')
        return false;
    if (s[0] == '[')
        return colon > s + 1 && colon[-1] == ']';
    return true;
}

static const char *const exporter_keys[] = {"listenAddress", "refreshInterval", NULL};

static int read_exporter(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "exporter", "exporter") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, exporter_keys, &seen, "exporter", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0) {
            if (get_str(r, v, "exporter.listenAddress", "listenAddress", true, cfg->metrics_addr,
                        sizeof cfg->metrics_addr) == GS_OK &&
                !addr_ok(cfg->metrics_addr))
                fail_at(r, GS_EPARSE, v, "listenAddress",
                        "exporter.listenAddress: '%.60s' is not HOST:PORT", cfg->metrics_addr);
        } else {
            get_duration(r, v, "exporter.refreshInterval", "refreshInterval", 100,
                         &cfg->refresh_ms);
        }
    }
    return r->err;
}

static const char *const kubelet_keys[] = {"devicePluginDir", "podResourcesSocket", NULL};

static int read_kubelet(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "kubelet", "kubelet") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, kubelet_keys, &seen, "kubelet", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        if (slot == 0)
            get_str(r, v, "kubelet.devicePluginDir", "devicePluginDir", false, cfg->plugin_dir,
                    sizeof cfg->plugin_dir);
        else
            get_str(r, v, "kubelet.podResourcesSocket", "podResourcesSocket", true,
                    cfg->pod_resources_socket, sizeof cfg->pod_resources_socket);
    }
    return r->err;
}

static const char *const mig_keys[] = {"dynamic", NULL};

static int read_mig(struct rd *r, const struct gs_yaml_node *map, struct gs_dp_config *cfg)
{
    if (expect(r, map, GS_YAML_MAP, "mig", "mig") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot = -1;
        if (map_key(r, map, pair, mig_keys, &seen, "mig", &slot) != GS_OK)
            break;
        get_bool(r, pair[1], "mig.dynamic", "dynamic", &cfg->mig_dynamic);
    }
    return r->err;
}

static const char *const top_keys[] = {"version",  "flags",   "sharing", "health",
                                       "exporter", "kubelet", "mig",     NULL};

static int read_top(struct rd *r, const struct gs_yaml_node *root, struct gs_dp_config *cfg)
{
    if (expect(r, root, GS_YAML_MAP, "the document", "") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    FOR_PAIRS(r, root, pair)
    {
        int slot = -1;
        if (map_key(r, root, pair, top_keys, &seen, "the document", &slot) != GS_OK)
            break;
        const struct gs_yaml_node *v = pair[1];
        switch (slot) {
        case 0: {
            const char *s = "";
            if (scalar_text(r, v, "version", "version", &s) == GS_OK && strcmp(s, "v1") != 0)
                fail_at(r, GS_EPARSE, v, "version", "version: '%.40s' is not v1", s);
            break;
        }
        case 1:
            read_flags(r, v, cfg);
            break;
        case 2:
            read_sharing(r, v, cfg);
            break;
        case 3:
            read_health(r, v, cfg);
            break;
        case 4:
            read_exporter(r, v, cfg);
            break;
        case 5:
            read_kubelet(r, v, cfg);
            break;
        default:
            read_mig(r, v, cfg);
            break;
        }
    }
    if (r->err == GS_OK && !(seen & 1u))
        fail_at(r, GS_EPARSE, root, "version",
                "required key 'version' is missing (write "
                "'version: v1')");
    if (r->err == GS_OK)
        (void)check_modes(r, root, cfg);
    if (r->err == GS_OK && !cfg->list_envvar && !cfg->list_cdi)
        fail_at(r, GS_EPARSE, root, "deviceListStrategy",
                "flags.plugin.deviceListStrategy: no strategy left");
    return r->err;
}

/* ---- entry points ------------------------------------------------------------------------ */

void gs_dp_config_default(struct gs_dp_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mig_strategy = GS_MIG_STRATEGY_NONE;
    cfg->list_envvar = true;
    cfg->id_strategy = GS_DP_ID_UUID;
    gs_health_config_default(&cfg->health);
    (void)snprintf(cfg->metrics_addr, sizeof cfg->metrics_addr, "%s", GS_DP_DEFAULT_METRICS_ADDR);
    cfg->refresh_ms = GS_DP_DEFAULT_REFRESH_MS;
    cfg->rediscover_ms = GS_DP_DEFAULT_REDISCOVER_MS;
    (void)snprintf(cfg->plugin_dir, sizeof cfg->plugin_dir, "%s", GS_DP_DEFAULT_PLUGIN_DIR);
    (void)snprintf(cfg->pod_resources_socket, sizeof cfg->pod_resources_socket, "%s",
                   GS_DP_DEFAULT_POD_RESOURCES_SOCKET);
    (void)snprintf(cfg->proc_root, sizeof cfg->proc_root, "%s", "/proc");
}

static int parse_text(const char *buf, size_t len, const char *name, struct gs_dp_config *cfg,
                      struct gs_diag *diag, bool outer);

/* Spaces at the start of 1-based line `line` of buf. */
static uint32_t indent_of_line(const char *buf, size_t len, uint32_t line)
{
    size_t i = 0;
    for (uint32_t l = 1; l < line && i < len; i++)
        if (buf[i] == '\n')
            l++;
    uint32_t n = 0;
    while (i < len && buf[i] == ' ') {
        i++;
        n++;
    }
    return n;
}

/*
 * A ConfigMap manifest given as --config (deploy/agent-config.yaml itself, issue 9): the
 * configuration is its data.config.yaml, read as if it were the file, with positions in
 * diagnostics moved to the manifest's lines and columns (a literal block "config.yaml: |"
 * starts on the line after its key).
 */
static int parse_configmap(struct rd *r, const char *buf, size_t len, const char *name,
                           const struct gs_yaml_node *root, struct gs_dp_config *cfg)
{
    const struct gs_yaml_node *data = gs__yaml_map_get(root, "data");
    const struct gs_yaml_node *text =
        data != NULL && data->kind == GS_YAML_MAP ? gs__yaml_map_get(data, "config.yaml") : NULL;
    if (text == NULL || text->kind != GS_YAML_SCALAR)
        return fail_at(r, GS_EPARSE, data != NULL ? data : root, "config.yaml",
                       "a ConfigMap: the configuration must be the text of data.config.yaml");
    int rc = parse_text(text->u.s, text->n, name, cfg, r->diag, false);
    if (rc != GS_OK && r->diag != NULL && r->diag->line > 0) {
        uint32_t first = text->at.line + 1;
        r->diag->column += indent_of_line(buf, len, first);
        r->diag->line += text->at.line;
    }
    r->err = rc;
    return rc;
}

int gs_dp_config_parse(const char *buf, size_t len, const char *name, struct gs_dp_config *cfg,
                       struct gs_diag *diag)
{
    return parse_text(buf, len, name, cfg, diag, true);
}

static int parse_text(const char *buf, size_t len, const char *name, struct gs_dp_config *cfg,
                      struct gs_diag *diag, bool outer)
{
    struct rd r;

    memset(&r, 0, sizeof r);
    r.diag = diag;
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", name != NULL ? name : "");
    }
    if (buf == NULL || cfg == NULL) {
        r.err = GS_EINVAL;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        goto out;
    }
    gs_dp_config_default(cfg);
    if (len > (size_t)GS_DP_CONFIG_FILE_MAX) {
        r.err = GS_EIO;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "file larger than %u bytes",
                           GS_DP_CONFIG_FILE_MAX);
        goto out;
    }
    static const struct gs_yaml_limits limits = {
        .bytes_max = (size_t)GS_DP_CONFIG_FILE_MAX,
        .depth_max = 16,
        .nodes_max = 100000,
        .aliases = true,
        .tags = true,
        .what = "a device plugin configuration",
    };
    struct gs_diag scratch;
    memset(&scratch, 0, sizeof scratch);
    r.err = gs__yaml_load(buf, len, &limits, &r.doc, diag != NULL ? diag : &scratch);
    if (r.err != GS_OK)
        goto out;
    const struct gs_yaml_node *root = r.doc.root;
    if (root == NULL) {
        fail_at(&r, GS_EPARSE, NULL, "version", "empty document: expected 'version: v1'");
        goto out;
    }
    const struct gs_yaml_node *kind =
        outer && root->kind == GS_YAML_MAP ? gs__yaml_map_get(root, "kind") : NULL;
    if (kind != NULL && gs__yaml_text_is(kind, "ConfigMap")) {
        (void)parse_configmap(&r, buf, len, name, root, cfg);
        goto out;
    }
    (void)read_top(&r, root, cfg);
out:
    gs__yaml_doc_fini(&r.doc);
    return r.err;
}

int gs_dp_config_read(const char *path, struct gs_dp_config *cfg, struct gs_diag *diag)
{
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", path != NULL ? path : "");
    }
    if (path == NULL || cfg == NULL) {
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        return GS_EINVAL;
    }
    char *buf;
    size_t len;
    int rc = gs__read_file(path, (size_t)GS_DP_CONFIG_FILE_MAX, &buf, &len, diag);
    if (rc != GS_OK)
        return rc;
    rc = gs_dp_config_parse(buf, len, path, cfg, diag);
    free(buf);
    return rc;
}

uint32_t gs_dp_config_gpu_replicas(const struct gs_dp_config *cfg)
{
    for (uint32_t i = 0; cfg != NULL && i < cfg->n_ts; i++)
        if (strcmp(cfg->ts[i].name, "nvidia.com/gpu") == 0)
            return cfg->ts[i].replicas;
    return 1;
}
