/*
 * The queue configuration's diagnostics and typed node readers (see qconfig_int.h): every value
 * is checked for type, unit and range here, with the position of the offending node.
 */
#include "qconfig_int.h"

#include "gpusched/err.h"
#include "gpusched/names.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** QoS names of the openb trace, in the order of qos_map. */
const char *const gs__qc_qos_names[] = {"LS", "Guaranteed", "Burstable", "BE"};
const char *const gs__qc_res_names[GS_RES_COUNT] = {"gpu", "cpu", "memory"};

/* ---- diagnostics ------------------------------------------------------------------------ */

/* Records an error at a position (NULL: the whole file) and returns err. */
GS_PRINTF(5, 6)
int gs__qc_fail_at(struct pctx *c, int err, const struct gs_yaml_pos *at, const char *field,
                   const char *fmt, ...)
{
    va_list ap;
    c->d->line = at ? at->line : 0;
    c->d->column = at ? at->col : 0;
    (void)snprintf(c->d->field, sizeof c->d->field, "%s", field ? field : "");
    va_start(ap, fmt);
    (void)vsnprintf(c->d->msg, sizeof c->d->msg, fmt, ap);
    va_end(ap);
    return err;
}

int gs__qc_oom(struct pctx *c)
{
    return gs__qc_fail_at(c, GS_ENOMEM, NULL, "", "out of memory");
}

/* Formats a quantity in the file's units for messages. */
const char *gs__qc_fmt_qty(char *buf, size_t cap, int r, int64_t v)
{
    if (v == GS_UNLIMITED) {
        (void)snprintf(buf, cap, "unlimited");
    } else if (r == GS_RES_MEM) {
        if (v > 0 && v % 1048576 == 0)
            (void)snprintf(buf, cap, "%lldTi", (long long)(v / 1048576));
        else if (v > 0 && v % 1024 == 0)
            (void)snprintf(buf, cap, "%lldGi", (long long)(v / 1024));
        else
            (void)snprintf(buf, cap, "%lldMi", (long long)v);
    } else if (v % 1000 == 0) {
        (void)snprintf(buf, cap, "%lld", (long long)(v / 1000));
    } else {
        (void)snprintf(buf, cap, "%lld.%03lld", (long long)(v / 1000), (long long)(v % 1000));
        size_t len = strlen(buf);
        while (len > 0 && buf[len - 1] == '0')
            buf[--len] = '\0';
    }
    return buf;
}

/* ---- schema helpers --------------------------------------------------------------------- */

int gs__qc_need_kind(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                     enum gs_yaml_kind kind)
{
    char buf[64];
    static const char *const want[] = {"a value", "a list", "a mapping"};
    if (n->kind == kind && !(kind == GS_YAML_SCALAR && gs__yaml_is_null(n)))
        return GS_OK;
    return FAIL(c, n, field, "expected %s, found %s", want[kind],
                gs__yaml_is_null(n) ? "null" : gs__yaml_describe(n, buf, sizeof buf));
}

/*
 * Checks that n is a mapping whose keys are all in `keys` (NULL-terminated) and none repeats.
 * `field` names where the mapping sits, for a wrong type.
 */
int gs__qc_check_map(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                     const char *const *keys)
{
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_MAP);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < n->n; i++) {
        const struct gs_yaml_node *k = n->u.items[2 * (size_t)i];
        char buf[64];
        if (k->kind != GS_YAML_SCALAR)
            return FAIL(c, k, field, "a key must be a string, found %s",
                        gs__yaml_describe(k, buf, sizeof buf));
        size_t j = 0;
        while (keys[j] != NULL && !gs__yaml_text_is(k, keys[j]))
            j++;
        if (keys[j] == NULL) {
            char allowed[200];
            size_t len = 0;
            allowed[0] = '\0';
            for (size_t m = 0; keys[m] != NULL && len < sizeof allowed; m++) {
                int w =
                    snprintf(allowed + len, sizeof allowed - len, "%s%s", m ? ", " : "", keys[m]);
                if (w > 0)
                    len += (size_t)w;
            }
            return FAIL(c, k, k->u.s, "unknown key '%.60s' (allowed: %s)", k->u.s, allowed);
        }
        for (uint32_t m = 0; m < i; m++)
            if (gs__yaml_text_is(n->u.items[2 * (size_t)m], keys[j]))
                return FAIL(c, k, keys[j], "duplicate key '%s' (first on line %u)", keys[j],
                            n->u.items[2 * (size_t)m]->at.line);
    }
    return GS_OK;
}

/* The value of key in a checked mapping, or NULL when absent or null. */
const struct gs_yaml_node *gs__qc_get(const struct gs_yaml_node *map, const char *key)
{
    for (uint32_t i = 0; i < map->n; i++)
        if (gs__yaml_text_is(map->u.items[2 * (size_t)i], key)) {
            const struct gs_yaml_node *v = map->u.items[2 * (size_t)i + 1];
            return gs__yaml_is_null(v) ? NULL : v;
        }
    return NULL;
}

/* As gs__qc_get(), failing when the key is absent or null. */
int gs__qc_require(struct pctx *c, const struct gs_yaml_node *map, const char *key,
                   const struct gs_yaml_node **out)
{
    *out = gs__qc_get(map, key);
    if (*out != NULL)
        return GS_OK;
    for (uint32_t i = 0; i < map->n; i++)
        if (gs__yaml_text_is(map->u.items[2 * (size_t)i], key))
            return FAIL(c, map->u.items[2 * (size_t)i], key, "'%s' needs a value", key);
    return FAIL(c, map, key, "missing required key '%s'", key);
}

/* A string: a non-null scalar without NUL or control bytes, 1..NAME_MAX_LEN bytes, copied. */
int gs__qc_get_name(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                    const char **out)
{
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    if (n->n == 0)
        return FAIL(c, n, field, "empty name");
    if (n->n > NAME_MAX_LEN)
        return FAIL(c, n, field, "name longer than %u bytes", NAME_MAX_LEN);
    for (uint32_t i = 0; i < n->n; i++)
        if ((unsigned char)n->u.s[i] < 0x20 || n->u.s[i] == 0x7f)
            return FAIL(c, n, field, "control character (byte 0x%02x) in a name",
                        (unsigned)(unsigned char)n->u.s[i]);
    *out = gs__arena_strndup(&c->qc->ar, n->u.s, n->n);
    return *out ? GS_OK : gs__qc_oom(c);
}

/* A queue or PriorityClass name: as gs__qc_get_name(), and a DNS-1123 subdomain of at most 253
 * characters, as Kubernetes names the objects these become (include/gpusched/names.h). */
int gs__qc_get_object_name(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                           const char **out)
{
    int rc = gs__qc_get_name(c, n, field, out);
    if (rc)
        return rc;
    char why[160];
    if (!gs_name_is_dns1123_subdomain(n->u.s, n->n, why, sizeof why))
        return FAIL(c, n, field,
                    "invalid name '%.60s%s': %s (a DNS-1123 subdomain, as Kubernetes "
                    "names objects)",
                    n->u.s, n->n > 60 ? "..." : "", why);
    return GS_OK;
}

/* A decimal integer written plainly (a quoted "5" is a string, as Kubernetes reads it). */
int gs__qc_get_int(struct pctx *c, const struct gs_yaml_node *n, const char *field, int64_t min,
                   int64_t max, int64_t *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
    bool neg = s[0] == '-';
    if (!n->plain || i == n->n)
        return FAIL(c, n, field, "expected an integer, found %s",
                    gs__yaml_describe(n, buf, sizeof buf));
    int64_t v = 0;
    bool big = false;
    for (; i < n->n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FAIL(c, n, field, "expected an integer, found %s",
                        gs__yaml_describe(n, buf, sizeof buf));
        if (v > (INT64_MAX - (s[i] - '0')) / 10)
            big = true;
        else
            v = v * 10 + (s[i] - '0');
    }
    if (neg)
        v = -v;
    if (neg && min >= 0 && v != 0)
        return FAIL(c, n, field, "negative value %s", gs__yaml_describe(n, buf, sizeof buf));
    if (big || v < min || v > max)
        return FAIL(c, n, field, "%s is out of range (%lld to %lld)",
                    gs__yaml_describe(n, buf, sizeof buf), (long long)min, (long long)max);
    *out = v;
    return GS_OK;
}

int gs__qc_get_bool(struct pctx *c, const struct gs_yaml_node *n, const char *field, bool *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    if (n->plain && (gs__yaml_text_is(n, "true") || gs__yaml_text_is(n, "True") ||
                     gs__yaml_text_is(n, "TRUE"))) {
        *out = true;
        return GS_OK;
    }
    if (n->plain && (gs__yaml_text_is(n, "false") || gs__yaml_text_is(n, "False") ||
                     gs__yaml_text_is(n, "FALSE"))) {
        *out = false;
        return GS_OK;
    }
    return FAIL(c, n, field, "expected true or false, found %s",
                gs__yaml_describe(n, buf, sizeof buf));
}

/* A weight: a plain decimal number ("1", "0.5"), 0..WEIGHT_MAX, read without locale. */
int gs__qc_get_weight(struct pctx *c, const struct gs_yaml_node *n, const char *field, double *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    uint32_t i = 0, digits = 0, frac = 0;
    int64_t m = 0;
    bool dot = false;
    if (n->plain && s[0] == '-' && n->n > 1)
        return FAIL(c, n, field, "negative weight %s", gs__yaml_describe(n, buf, sizeof buf));
    for (; n->plain && i < n->n; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
        } else if (s[i] >= '0' && s[i] <= '9' && digits < 15) {
            m = m * 10 + (s[i] - '0');
            digits++;
            frac += dot;
        } else {
            break;
        }
    }
    if (!n->plain || i != n->n || digits == 0)
        return FAIL(c, n, field, "expected a number, found %s",
                    gs__yaml_describe(n, buf, sizeof buf));
    double v = (double)m;
    while (frac-- > 0)
        v /= 10;
    if (v > WEIGHT_MAX)
        return FAIL(c, n, field, "weight %s is above %.0f", gs__yaml_describe(n, buf, sizeof buf),
                    WEIGHT_MAX);
    *out = v;
    return GS_OK;
}

/*
 * Parses a Kubernetes-style quantity ("3", "0.5", "500m", "64Gi", "1.5Ti") into internal
 * units: milli for GPU and CPU, MiB for memory. The value is kept exact as mantissa x 2^p2 x
 * 5^p5 so that any suffix and any number of decimals is either exact or refused. Returns NULL,
 * or a message fragment for a bad value (the caller adds the text).
 */
static const char *parse_quantity(const char *s, size_t len, int r, int64_t *out)
{
    static const struct {
        const char *sfx;
        int p2, p5;
    } mem_sfx[] = {
        {"", 0, 0},  {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0},
        {"k", 3, 3}, {"M", 6, 6},   {"G", 9, 9},   {"T", 12, 12}, {"P", 15, 15},
    };
    size_t i = 0;
    int64_t m = 0;
    int digits = 0, frac = 0;
    bool dot = false;

    for (; i < len; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
        } else if (s[i] >= '0' && s[i] <= '9') {
            if (m > (INT64_MAX - 9) / 10)
                return "is too large";
            m = m * 10 + (s[i] - '0');
            digits++;
            frac += dot;
        } else {
            break;
        }
    }
    if (digits == 0)
        return r == GS_RES_MEM ? "is not a quantity: expected a number with an optional unit "
                                 "(Ki, Mi, Gi, Ti, Pi or k, M, G, T, P)"
                               : "is not a quantity: expected a number, optionally with 'm' "
                                 "for thousandths";
    const char *sfx = s + i;
    size_t sfx_len = len - i;
    int p2 = -frac, p5 = -frac;
    if (r == GS_RES_MEM) {
        size_t k = 0;
        while (k < sizeof mem_sfx / sizeof mem_sfx[0] &&
               !(strlen(mem_sfx[k].sfx) == sfx_len && memcmp(mem_sfx[k].sfx, sfx, sfx_len) == 0))
            k++;
        if (k == sizeof mem_sfx / sizeof mem_sfx[0])
            return "has a bad unit: memory takes Ki, Mi, Gi, Ti, Pi (or k, M, G, T, P; none "
                   "means bytes)";
        p2 += mem_sfx[k].p2 - 20; /* bytes to MiB */
        p5 += mem_sfx[k].p5;
    } else if (sfx_len == 1 && sfx[0] == 'm') {
        /* already in thousandths */
    } else if (sfx_len == 0) {
        p2 += 3;
        p5 += 3;
    } else {
        return r == GS_RES_GPU ? "has a bad unit: GPUs are a count, optionally with 'm' for "
                                 "milli-GPU"
                               : "has a bad unit: CPU is cores, or milli-cores with 'm'";
    }
    for (; p2 < 0; p2++) {
        if (m % 2 != 0)
            return r == GS_RES_MEM ? "is not a whole number of MiB" : "is finer than a thousandth";
        m /= 2;
    }
    for (; p5 < 0; p5++) {
        if (m % 5 != 0)
            return r == GS_RES_MEM ? "is not a whole number of MiB" : "is finer than a thousandth";
        m /= 5;
    }
    for (; p2 > 0 && m != 0; p2--) {
        if (m > QUANTITY_MAX / 2)
            return "is too large";
        m *= 2;
    }
    for (; p5 > 0 && m != 0; p5--) {
        if (m > QUANTITY_MAX / 5)
            return "is too large";
        m *= 5;
    }
    if (m > QUANTITY_MAX)
        return "is too large";
    *out = m;
    return NULL;
}

/* A quota (limit == false) or a limit of resource r. */
int gs__qc_get_quantity(struct pctx *c, const struct gs_yaml_node *n, const char *field, int r,
                        bool limit, int64_t *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    if (limit && (gs__yaml_text_is(n, "unlimited") || gs__yaml_text_is(n, "-1"))) {
        *out = GS_UNLIMITED;
        return GS_OK;
    }
    if (n->n > 0 && n->u.s[0] == '-')
        return FAIL(c, n, field, "negative %s %s%s", field, gs__yaml_describe(n, buf, sizeof buf),
                    limit ? " (only -1, meaning unlimited, may be negative)" : "");
    if (gs__yaml_text_is(n, "unlimited"))
        return FAIL(c, n, field,
                    "a quota cannot be unlimited; leave it out for 0 (or the sum "
                    "of the children's) and set the limit instead");
    const char *why = parse_quantity(n->u.s, n->n, r, out);
    if (why != NULL)
        return FAIL(c, n, field, "%s %s %s", gs__qc_res_names[r],
                    gs__yaml_describe(n, buf, sizeof buf), why);
    return GS_OK;
}

/* A duration "1h30m", "10m", "45s", "500ms" or "0", Go's time.ParseDuration without fractions. */
int gs__qc_get_duration(struct pctx *c, const struct gs_yaml_node *n, const char *field,
                        int64_t *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    const char *s = n->u.s;
    size_t i = 0;
    int64_t total = 0;
    if (n->n > 0 && s[0] == '-')
        return FAIL(c, n, field, "negative duration %s", gs__yaml_describe(n, buf, sizeof buf));
    if (gs__yaml_text_is(n, "0")) {
        *out = 0;
        return GS_OK;
    }
    while (i < n->n) {
        int64_t v = 0;
        size_t d0 = i;
        for (; i < n->n && s[i] >= '0' && s[i] <= '9'; i++)
            v = v > DURATION_MAX_MS ? v : v * 10 + (s[i] - '0'); /* saturates past the max */
        int64_t unit = 0;
        if (i + 1 < n->n && s[i] == 'm' && s[i + 1] == 's') {
            unit = 1;
            i += 2;
        } else if (i < n->n && s[i] == 's') {
            unit = 1000;
            i++;
        } else if (i < n->n && s[i] == 'm') {
            unit = 60000;
            i++;
        } else if (i < n->n && s[i] == 'h') {
            unit = 3600000;
            i++;
        }
        if (i == d0 || unit == 0 || (s[d0] < '0' || s[d0] > '9'))
            return FAIL(c, n, field,
                        "bad duration %s: expected numbers with units ms, s, m, h (\"1h30m\")",
                        gs__yaml_describe(n, buf, sizeof buf));
        if (v > DURATION_MAX_MS / unit || total > DURATION_MAX_MS - v * unit)
            return FAIL(c, n, field, "duration %s is too long",
                        gs__yaml_describe(n, buf, sizeof buf));
        total += v * unit;
    }
    if (n->n == 0)
        return FAIL(c, n, field, "bad duration ''");
    *out = total;
    return GS_OK;
}

int gs__qc_qos_index(const char *s, size_t len)
{
    for (int i = 0; i < QOS_COUNT; i++)
        if (strlen(gs__qc_qos_names[i]) == len && memcmp(gs__qc_qos_names[i], s, len) == 0)
            return i;
    return -1;
}

int gs__qc_bad_qos(struct pctx *c, const struct gs_yaml_node *n, const char *field)
{
    char buf[64];
    return FAIL(c, n, field, "unknown QoS %s (allowed: LS, Guaranteed, Burstable, BE)",
                gs__yaml_describe(n, buf, sizeof buf));
}

/* A reference to a leaf queue by name. */
int gs__qc_leaf_ref(struct pctx *c, const struct gs_yaml_node *n, const char *field, uint32_t *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    const struct qqueue *q = gs__strmap_get(&c->qnames, n->u.s, n->n);
    if (q == NULL)
        return FAIL(c, n, field, "unknown queue %s", gs__yaml_describe(n, buf, sizeof buf));
    if (q->children > 0)
        return FAIL(c, n, field, "queue %s has child queues; pods can only be sent to a leaf queue",
                    gs__yaml_describe(n, buf, sizeof buf));
    *out = (uint32_t)(q - c->qc->q);
    return GS_OK;
}

/* A reference to a PriorityClass by name. */
int gs__qc_class_ref(struct pctx *c, const struct gs_yaml_node *n, const char *field, uint32_t *out)
{
    char buf[64];
    int rc = gs__qc_need_kind(c, n, field, GS_YAML_SCALAR);
    if (rc)
        return rc;
    const struct qclass *pc = gs__strmap_get(&c->cnames, n->u.s, n->n);
    if (pc == NULL)
        return FAIL(c, n, field, "unknown PriorityClass %s", gs__yaml_describe(n, buf, sizeof buf));
    *out = (uint32_t)(pc - c->qc->pc);
    return GS_OK;
}
