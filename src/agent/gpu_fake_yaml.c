/*
 * The fake GPU backend's reader (contract in include/gpusched/gpu.h, format in
 * deploy/fake-gpus.yaml).
 *
 * The YAML text is loaded into a libyaml document (a node tree with source marks) and walked
 * along a fixed schema, so the walk is bounded by the schema whatever aliases the text holds:
 * a node is only ever looked at as the one kind of thing the schema expects there, and lists
 * have fixed maxima. Every mapping is checked for unknown and repeated keys; every value for
 * type and range. The first problem stops the read with the file, the line and column of the
 * offending node (libyaml's marks, made 1-based) and the key it belongs to.
 *
 * The script is sorted by time (stably, so entries with equal t_ms keep file order) and
 * replayed lazily: each operation first applies every entry whose time has come. Applied
 * event entries between `delivered` and `applied` are the queue of undelivered events, so no
 * separate queue is needed.
 */
#define _POSIX_C_SOURCE 200809L /* strerror_r (XSI form) */

#include "gpusched/gpu.h"

#include "gpusched/err.h"
#include "gpusched/diag.h"
#include "util/file.h"
#include "util/yaml.h"

#include "gpu_fake_int.h"
#include "gpu_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- YAML reading --------------------------------------------------------------------- */

/** State of one parse. */
struct rd {
    yaml_document_t *doc;
    struct gs_diag *diag;
    int err;                                 /**< first error, GS_OK while none */
    const yaml_node_t *gpu_node[GS_GPU_MAX]; /**< the mapping each GPU index came from */
};

/* Records the first error and returns it: never GS_OK. The static analyzer does not inline
 * variadic functions, so it explores callers as if fail_at() might return GS_OK and then reports
 * values that are unset on that impossible path; those lines carry NOLINT("see fail_at"). */
GS_PRINTF(5, 6)
static int fail_at(struct rd *r, int err, const yaml_node_t *node, const char *field,
                   const char *fmt, ...)
{
    if (r->err != GS_OK)
        return r->err;
    r->err = err;
    if (r->diag != NULL) {
        r->diag->line = node != NULL ? (uint64_t)node->start_mark.line + 1 : 0;
        r->diag->column = node != NULL ? (uint32_t)node->start_mark.column + 1 : 0;
        (void)snprintf(r->diag->field, sizeof r->diag->field, "%s", field != NULL ? field : "");
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(r->diag->msg, sizeof r->diag->msg, fmt, ap);
        va_end(ap);
    }
    return err;
}

static yaml_node_t *node_at(struct rd *r, int id)
{
    return yaml_document_get_node(r->doc, id);
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* Requires a node of the given type; `what` names it in the message. */
static int expect(struct rd *r, const yaml_node_t *n, yaml_node_type_t type, const char *field)
{
    /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): see fail_at */
    if (n->type == type)
        return GS_OK;
    const char *want = type == YAML_SCALAR_NODE     ? "a scalar"
                       : type == YAML_SEQUENCE_NODE ? "a list"
                                                    : "a mapping";
    return fail_at(r, GS_EPARSE, n, field, "expected %s, found %s", want, kind_name(n));
}

/* A scalar's text; fails on an embedded NUL byte, which no field may hold. */
static int scalar_text(struct rd *r, const yaml_node_t *n, const char *field, const char **out)
{
    int rc = expect(r, n, YAML_SCALAR_NODE, field);
    if (rc != GS_OK)
        return rc;
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length)
        return fail_at(r, GS_EPARSE, n, field, "value holds a NUL byte");
    *out = s;
    return GS_OK;
}

static int get_int(struct rd *r, const yaml_node_t *n, const char *field, int64_t lo, int64_t hi,
                   int64_t *out)
{
    const char *s = NULL;
    int rc = scalar_text(r, n, field, &s);
    if (rc != GS_OK)
        return rc;
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (*p < '0' || *p > '9')
        return fail_at(r, GS_EPARSE, n, field, "'%.40s' is not an integer", s);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return fail_at(r, GS_EPARSE, n, field, "'%.40s' is not an integer", s);
    if (errno == ERANGE || v < lo || v > hi)
        return fail_at(r, GS_EPARSE, n, field, "%.40s is out of range %" PRId64 "..%" PRId64, s, lo,
                       hi);
    *out = v;
    return GS_OK;
}

static int get_u32(struct rd *r, const yaml_node_t *n, const char *field, uint32_t hi,
                   uint32_t *out)
{
    int64_t v;
    int rc = get_int(r, n, field, 0, hi, &v);
    if (rc == GS_OK)
        *out = (uint32_t)v;
    return rc;
}

static int get_u64(struct rd *r, const yaml_node_t *n, const char *field, int64_t hi, uint64_t *out)
{
    int64_t v;
    int rc = get_int(r, n, field, 0, hi, &v);
    if (rc == GS_OK)
        *out = (uint64_t)v;
    return rc;
}

static int get_bool(struct rd *r, const yaml_node_t *n, const char *field, bool *out)
{
    const char *s = NULL;
    int rc = scalar_text(r, n, field, &s);
    if (rc != GS_OK)
        return rc;
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see fail_at */
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
        *out = false;
    else
        return fail_at(r, GS_EPARSE, n, field, "'%.40s' is not true or false", s);
    return GS_OK;
}

/* Watts with up to three decimals, 0..100000, into milliwatts. */
static int get_watts(struct rd *r, const yaml_node_t *n, const char *field, uint64_t *mw)
{
    const char *s = NULL;
    int rc = scalar_text(r, n, field, &s);
    if (rc != GS_OK)
        return rc;
    /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): see fail_at */
    if (*s < '0' || *s > '9')
        return fail_at(r, GS_EPARSE, n, field, "'%.40s' is not a number of watts", s);
    char *end;
    double w = strtod(s, &end);
    if (*end != '\0' || !isfinite(w))
        return fail_at(r, GS_EPARSE, n, field, "'%.40s' is not a number of watts", s);
    if (w < 0 || w > 100000)
        return fail_at(r, GS_EPARSE, n, field, "%.40s W is out of range 0..100000", s);
    *mw = (uint64_t)llround(w * 1000.0);
    return GS_OK;
}

/* A string into dst[cap]: non-empty, printable ASCII, shorter than cap. */
static int get_str(struct rd *r, const yaml_node_t *n, const char *field, char *dst, size_t cap)
{
    const char *s = NULL;
    int rc = scalar_text(r, n, field, &s);
    if (rc != GS_OK)
        return rc;
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see fail_at */
    size_t len = strlen(s);
    if (len == 0)
        return fail_at(r, GS_EPARSE, n, field, "value is empty");
    if (len >= cap)
        return fail_at(r, GS_EPARSE, n, field, "value is longer than %zu bytes", cap - 1);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return fail_at(r, GS_EPARSE, n, field,
                           "value holds a byte that is not printable ASCII");
    memcpy(dst, s, len + 1);
    return GS_OK;
}

/* A UUID with the given prefix ("GPU-", "MIG-") and only letters, digits and '-' after it. */
static int get_uuid(struct rd *r, const yaml_node_t *n, const char *field, const char *prefix,
                    char *dst, size_t cap)
{
    int rc = get_str(r, n, field, dst, cap);
    if (rc != GS_OK)
        return rc;
    size_t plen = strlen(prefix);
    bool ok = strncmp(dst, prefix, plen) == 0 && dst[plen] != '\0';
    for (const char *p = dst + plen; ok && *p != '\0'; p++)
        ok = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
             *p == '-';
    if (!ok)
        return fail_at(r, GS_EPARSE, n, field,
                       "'%.60s' is not a UUID of the form %s<letters, digits, '-'>", dst, prefix);
    return GS_OK;
}

/* Accepts MIG profile names as NVIDIA spells them: "1g.18gb", "7g.141gb", "1g.18gb+me". */
static bool profile_ok(const char *s)
{
    const char *p = s;
    if (*p < '1' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (strncmp(p, "g.", 2) != 0)
        return false;
    p += 2;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (strncmp(p, "gb", 2) != 0)
        return false;
    p += 2;
    if (*p == '\0')
        return true;
    if (*p++ != '+' || *p == '\0')
        return false;
    for (; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '.' || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* "MAJOR.MINOR", each 1 to 3 decimal digits and nothing else. */
static bool parse_ver2(const char *s, unsigned *maj, unsigned *min)
{
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see fail_at */
    size_t a = strspn(s, "0123456789");
    if (a == 0 || a > 3 || s[a] != '.')
        return false;
    size_t b = strspn(s + a + 1, "0123456789");
    if (b == 0 || b > 3 || s[a + 1 + b] != '\0')
        return false;
    *maj = (unsigned)strtoul(s, NULL, 10);
    *min = (unsigned)strtoul(s + a + 1, NULL, 10);
    return true;
}

/* PCI bus ids: hex digits, ':' and '.', as "00000000:18:00.0". */
static bool pci_ok(const char *s)
{
    int colons = 0, dots = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == ':')
            colons++;
        else if (*p == '.')
            dots++;
        else if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                   (*p >= 'A' && *p <= 'F')))
            return false;
    }
    return colons == 2 && dots == 1;
}

/*
 * A mapping walker: each key must be one of `keys` (NULL-terminated) and appear at most once.
 * The caller loops over pairs; this checks the key and returns its slot in the keys array.
 */
static int map_key(struct rd *r, const yaml_node_t *map, const yaml_node_pair_t *pair,
                   const char *const *keys, uint32_t *seen, const char *where, int *slot)
{
    yaml_node_t *k = node_at(r, pair->key);
    if (k == NULL || k->type != YAML_SCALAR_NODE)
        return fail_at(r, GS_EPARSE, k != NULL ? k : map, where, "keys of %s must be scalars",
                       where);
    const char *name = (const char *)k->data.scalar.value;
    for (int i = 0; keys[i] != NULL; i++) {
        if (strcmp(keys[i], name) == 0 && strlen(name) == k->data.scalar.length) {
            if (*seen & (1u << i))
                return fail_at(r, GS_EPARSE, k, keys[i], "key repeated in %s", where);
            *seen |= 1u << i;
            *slot = i;
            return GS_OK;
        }
    }
    char shown[64];
    (void)snprintf(shown, sizeof shown, "%s", name);
    for (char *p = shown; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    return fail_at(r, GS_EPARSE, k, shown, "unknown key in %s", where);
}

/* Fails when a required key (bit i of `required`) is missing from a mapping. */
static int need_keys(struct rd *r, const yaml_node_t *map, const char *const *keys, uint32_t seen,
                     uint32_t required, const char *where)
{
    for (int i = 0; keys[i] != NULL; i++)
        if ((required & (1u << i)) && !(seen & (1u << i)))
            return fail_at(r, GS_EPARSE, map, keys[i], "required key missing from %s", where);
    return GS_OK;
}

/* The loop variable is a declarator, which cannot be parenthesised. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define FOR_PAIRS(r, map, pair)                                                                    \
    for (yaml_node_pair_t *pair = (map)->data.mapping.pairs.start;                                 \
         (r)->err == GS_OK && pair < (map)->data.mapping.pairs.top; pair++)
/* NOLINTEND(bugprone-macro-parentheses) */

/* Values of a sample mapping ("sample:" of a GPU, "set:" of a script entry). */
static const char *const sample_keys[] = {
    "utilization_pct", "temperature_c", "fb_used_mib",       "power_w",
    "sm_clock_mhz",    "mem_clock_mhz", "ecc_dbe_vol_total", NULL};

static int read_sample(struct rd *r, const yaml_node_t *map, const char *where, bool allow_ecc,
                       struct gs_gpu_sample *s, uint32_t *mask)
{
    int rc = expect(r, map, YAML_MAPPING_NODE, where);
    if (rc != GS_OK)
        return rc;
    uint32_t seen = 0;
    *mask = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot;
        if (map_key(r, map, pair, sample_keys, &seen, where, &slot) != GS_OK)
            break;
        yaml_node_t *v = node_at(r, pair->value);
        const char *f = sample_keys[slot];
        int64_t t;
        switch (slot) {
        case 0:
            if (get_u32(r, v, f, 100, &s->util_pct) == GS_OK)
                *mask |= GS_GPU_HAVE_UTIL;
            break;
        case 1:
            if (get_int(r, v, f, -273, 1000, &t) == GS_OK) {
                s->temp_c = (int32_t)t;
                *mask |= GS_GPU_HAVE_TEMP;
            }
            break;
        case 2:
            if (get_u64(r, v, f, INT64_C(1) << 40, &s->fb_used_mib) == GS_OK)
                *mask |= GS_GPU_HAVE_FB;
            break;
        case 3:
            if (get_watts(r, v, f, &s->power_mw) == GS_OK)
                *mask |= GS_GPU_HAVE_POWER;
            break;
        case 4:
            if (get_u32(r, v, f, 100000, &s->sm_clock_mhz) == GS_OK)
                *mask |= GS_GPU_HAVE_SM_CLOCK;
            break;
        case 5:
            if (get_u32(r, v, f, 100000, &s->mem_clock_mhz) == GS_OK)
                *mask |= GS_GPU_HAVE_MEM_CLOCK;
            break;
        case 6:
            if (!allow_ecc) {
                fail_at(r, GS_EPARSE, v, f, "use an ecc_dbe entry to raise ECC errors");
                break;
            }
            if (get_u64(r, v, f, INT64_MAX / 2, &s->ecc_dbe_vol_total) == GS_OK)
                *mask |= GS_GPU_HAVE_ECC_DBE;
            break;
        default:
            break;
        }
    }
    return r->err;
}

/* Names accepted in a GPU's "unsupported:" list, with their field bits. */
static const struct {
    const char *name;
    uint32_t bit;
} field_names[] = {
    {"utilization", GS_GPU_HAVE_UTIL},
    {"fb", GS_GPU_HAVE_FB},
    {"temperature", GS_GPU_HAVE_TEMP},
    {"power", GS_GPU_HAVE_POWER},
    {"sm_clock", GS_GPU_HAVE_SM_CLOCK},
    {"mem_clock", GS_GPU_HAVE_MEM_CLOCK},
    {"ecc_dbe", GS_GPU_HAVE_ECC_DBE},
    {"xid", GS_GPU_HAVE_XID},
    {"processes", 0}, /* no sample field: the per-process read (fake_gpu.no_procs) */
};

static int read_unsupported(struct rd *r, const yaml_node_t *seq, uint32_t *valid, bool *no_procs)
{
    const char *f = "unsupported";
    int rc = expect(r, seq, YAML_SEQUENCE_NODE, f);
    if (rc != GS_OK)
        return rc;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *v = node_at(r, *it);
        const char *s = NULL;
        if (scalar_text(r, v, f, &s) != GS_OK)
            return r->err;
        size_t i = 0;
        while (i < sizeof field_names / sizeof field_names[0] &&
               strcmp(field_names[i].name, s) != 0)
            i++;
        if (i == sizeof field_names / sizeof field_names[0])
            return fail_at(r, GS_EPARSE, v, f,
                           "'%.40s' is not one of utilization, fb, temperature, power, "
                           "sm_clock, mem_clock, ecc_dbe, xid, processes",
                           s);
        *valid &= ~field_names[i].bit;
        if (field_names[i].bit == 0)
            *no_procs = true;
    }
    return GS_OK;
}

static const char *const proc_keys[] = {"pid", "mem_mib", "sm_util_pct", "gpu_instance_id", NULL};

/* A GPU's "processes:" list: [{pid, mem_mib, sm_util_pct, gpu_instance_id?}, ...]. */
static int read_procs(struct rd *r, const yaml_node_t *seq, struct fake_gpu *g)
{
    const char *f = "processes";
    if (expect(r, seq, YAML_SEQUENCE_NODE, f) != GS_OK)
        return r->err;
    for (yaml_node_item_t *it = seq->data.sequence.items.start;
         r->err == GS_OK && it < seq->data.sequence.items.top; it++) {
        const yaml_node_t *map = node_at(r, *it);
        if (g->n_procs == GS_GPU_PROC_MAX)
            return fail_at(r, GS_EPARSE, map, f, "more than %d processes", GS_GPU_PROC_MAX);
        if (expect(r, map, YAML_MAPPING_NODE, f) != GS_OK)
            return r->err;
        struct gs_gpu_proc p;
        memset(&p, 0, sizeof p);
        uint32_t seen = 0;
        const yaml_node_t *pid_node = map;
        FOR_PAIRS(r, map, pair)
        {
            int slot = 0;
            if (map_key(r, map, pair, proc_keys, &seen, "a process", &slot) != GS_OK)
                break;
            yaml_node_t *v = node_at(r, pair->value);
            const char *k = proc_keys[slot];
            if (slot == 0) {
                pid_node = v;
                if (get_u32(r, v, k, INT32_MAX, &p.pid) == GS_OK && p.pid == 0)
                    fail_at(r, GS_EPARSE, v, k, "pid must be positive");
            } else if (slot == 1) {
                if (get_u64(r, v, k, INT64_C(1) << 30, &p.mem_mib) == GS_OK &&
                    p.mem_mib > g->info.mem_total_mib)
                    fail_at(r, GS_EPARSE, v, k, "mem_mib exceeds the GPU's memory_mib");
                p.has_mem = true;
            } else if (slot == 2) {
                get_u32(r, v, k, 100, &p.sm_util_pct);
                p.has_sm_util = true;
            } else {
                get_u32(r, v, k, 255, &p.gi_id);
                p.has_gi_id = true;
            }
        }
        if (r->err == GS_OK)
            need_keys(r, map, proc_keys, seen, 1u, "a process");
        for (uint32_t j = 0; r->err == GS_OK && j < g->n_procs; j++)
            if (g->procs[j].pid == p.pid)
                fail_at(r, GS_EPARSE, pid_node, "pid", "pid %" PRIu32 " repeated", p.pid);
        if (r->err == GS_OK)
            g->procs[g->n_procs++] = p;
    }
    return r->err;
}

static const char *const mig_inst_keys[] = {"profile", "uuid", "memory_mib", "start", NULL};

static int read_mig(struct rd *r, const yaml_node_t *map, struct gs_gpu_info *g)
{
    static const char *const keys[] = {"capable", "enabled", "instances", NULL};
    int rc = expect(r, map, YAML_MAPPING_NODE, "mig");
    if (rc != GS_OK)
        return rc;
    uint32_t seen = 0;
    const yaml_node_t *inst = NULL;
    g->mig_capable = true;
    FOR_PAIRS(r, map, pair)
    {
        int slot;
        if (map_key(r, map, pair, keys, &seen, "mig", &slot) != GS_OK)
            break;
        yaml_node_t *v = node_at(r, pair->value);
        if (slot == 0)
            get_bool(r, v, keys[0], &g->mig_capable);
        else if (slot == 1)
            get_bool(r, v, keys[1], &g->mig_enabled);
        else
            inst = v;
    }
    if (r->err != GS_OK)
        return r->err;
    if (g->mig_enabled && !g->mig_capable)
        return fail_at(r, GS_EPARSE, map, "enabled", "MIG enabled on a GPU that is not capable");
    if (inst == NULL)
        return GS_OK;
    if (expect(r, inst, YAML_SEQUENCE_NODE, "instances") != GS_OK)
        return r->err;
    if (!g->mig_enabled && inst->data.sequence.items.top != inst->data.sequence.items.start)
        return fail_at(r, GS_EPARSE, inst, "instances", "MIG instances while MIG is disabled");
    uint64_t sum_mib = 0;
    for (yaml_node_item_t *it = inst->data.sequence.items.start;
         r->err == GS_OK && it < inst->data.sequence.items.top; it++) {
        yaml_node_t *m = node_at(r, *it);
        if (g->mig_count == GS_GPU_MIG_MAX)
            return fail_at(r, GS_EPARSE, m, "instances", "more than %d MIG instances",
                           GS_GPU_MIG_MAX);
        if (expect(r, m, YAML_MAPPING_NODE, "instances") != GS_OK)
            break;
        struct gs_gpu_mig *mig = &g->mig[g->mig_count];
        uint32_t mseen = 0;
        FOR_PAIRS(r, m, pair)
        {
            int slot;
            if (map_key(r, m, pair, mig_inst_keys, &mseen, "a MIG instance", &slot) != GS_OK)
                break;
            yaml_node_t *v = node_at(r, pair->value);
            if (slot == 0) {
                if (get_str(r, v, "profile", mig->profile, sizeof mig->profile) == GS_OK &&
                    !profile_ok(mig->profile))
                    fail_at(r, GS_EPARSE, v, "profile",
                            "'%s' is not a MIG profile like 1g.18gb or 3g.71gb", mig->profile);
            } else if (slot == 1) {
                get_uuid(r, v, "uuid", "MIG-", mig->uuid, sizeof mig->uuid);
            } else if (slot == 2) {
                if (get_u64(r, v, "memory_mib", INT64_C(1) << 30, &mig->mem_mib) == GS_OK &&
                    mig->mem_mib == 0)
                    fail_at(r, GS_EPARSE, v, "memory_mib", "memory_mib must be positive");
            } else {
                /* Slices of a GPU: 8 on A100/H100/H200 (7 compute), so 0..7. */
                if (get_u32(r, v, "start", 7, &mig->start_slot) == GS_OK)
                    mig->has_start = true;
            }
        }
        if (r->err == GS_OK)
            need_keys(r, m, mig_inst_keys, mseen, 7u, "a MIG instance");
        if (r->err == GS_OK) {
            sum_mib += mig->mem_mib;
            if (sum_mib > g->mem_total_mib && g->mem_total_mib > 0)
                return fail_at(r, GS_EPARSE, m, "memory_mib",
                               "MIG instances hold more memory than the GPU (%" PRIu64 " MiB)",
                               g->mem_total_mib);
            g->mig_count++;
        }
    }
    return r->err;
}

static const char *const gpu_keys[] = {"index",
                                       "uuid",
                                       "model",
                                       "memory_mib",
                                       "numa_node",
                                       "pci_bus_id",
                                       "compute_capability",
                                       "nvlink_peers",
                                       "mig",
                                       "sample",
                                       "unsupported",
                                       "processes",
                                       NULL};
#define GPU_REQUIRED 0xfu /* index, uuid, model, memory_mib */

static int read_gpu(struct rd *r, struct fake *f, const yaml_node_t *map, uint64_t *seen_idx)
{
    if (expect(r, map, YAML_MAPPING_NODE, "gpus") != GS_OK)
        return r->err;
    struct fake_gpu tmp;
    memset(&tmp, 0, sizeof tmp);
    struct gs_gpu_info *g = &tmp.info;
    g->numa_node = -1;
    g->cc_major = -1;
    g->cc_minor = -1;
    tmp.cur.valid = ALL_FIELDS;
    uint32_t seen = 0;
    /* Read memory_mib before mig and sample, which check against it, whatever the key order. */
    const yaml_node_t *mig = NULL, *sample = NULL, *peers = NULL, *index_node = NULL;
    const yaml_node_t *procs = NULL;
    FOR_PAIRS(r, map, pair)
    {
        int slot;
        if (map_key(r, map, pair, gpu_keys, &seen, "a GPU", &slot) != GS_OK)
            break;
        yaml_node_t *v = node_at(r, pair->value);
        const char *k = gpu_keys[slot];
        int64_t t;
        switch (slot) {
        case 0:
            index_node = v;
            get_u32(r, v, k, GS_GPU_MAX - 1, &g->index);
            break;
        case 1:
            get_uuid(r, v, k, "GPU-", g->uuid, sizeof g->uuid);
            break;
        case 2:
            get_str(r, v, k, g->model, sizeof g->model);
            break;
        case 3:
            if (get_u64(r, v, k, INT64_C(1) << 30, &g->mem_total_mib) == GS_OK &&
                g->mem_total_mib == 0)
                fail_at(r, GS_EPARSE, v, k, "memory_mib must be positive");
            break;
        case 4:
            if (get_int(r, v, k, -1, 1023, &t) == GS_OK)
                /* NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign): see fail_at */
                g->numa_node = (int32_t)t;
            break;
        case 5:
            if (get_str(r, v, k, g->pci_bus_id, sizeof g->pci_bus_id) == GS_OK &&
                !pci_ok(g->pci_bus_id))
                fail_at(r, GS_EPARSE, v, k, "'%s' is not a PCI bus id like 00000000:18:00.0",
                        g->pci_bus_id);
            break;
        case 6: {
            const char *s = NULL;
            unsigned maj, min;
            if (scalar_text(r, v, k, &s) != GS_OK)
                break;
            if (!parse_ver2(s, &maj, &min) || maj > 99 || min > 99) {
                fail_at(r, GS_EPARSE, v, k, "'%.40s' is not a compute capability like 9.0", s);
                break;
            }
            g->cc_major = (int32_t)maj;
            g->cc_minor = (int32_t)min;
            break;
        }
        case 7:
            peers = v;
            break;
        case 8:
            mig = v;
            break;
        case 9:
            sample = v;
            break;
        case 10:
            read_unsupported(r, v, &tmp.cur.valid, &tmp.no_procs);
            break;
        case 11:
            procs = v;
            break;
        default:
            break;
        }
    }
    if (r->err == GS_OK)
        need_keys(r, map, gpu_keys, seen, GPU_REQUIRED, "a GPU");
    if (r->err == GS_OK && g->index >= f->n)
        fail_at(r, GS_EPARSE, index_node, "index",
                "GPU index %" PRIu32 " out of range: %" PRIu32 " GPUs have indices 0..%" PRIu32,
                g->index, f->n, f->n - 1);
    if (r->err == GS_OK && (*seen_idx & (UINT64_C(1) << g->index)) != 0)
        fail_at(r, GS_EPARSE, index_node, "index", "GPU index %" PRIu32 " repeated", g->index);
    if (r->err == GS_OK && mig != NULL)
        read_mig(r, mig, g);
    if (r->err == GS_OK && sample != NULL) {
        uint32_t mask;
        uint32_t valid = tmp.cur.valid;
        if (read_sample(r, sample, "sample", true, &tmp.cur, &mask) == GS_OK) {
            tmp.cur.valid = valid;
            if (tmp.cur.fb_used_mib > g->mem_total_mib)
                fail_at(r, GS_EPARSE, sample, "fb_used_mib", "fb_used_mib exceeds memory_mib");
        }
    }
    if (r->err == GS_OK && procs != NULL)
        read_procs(r, procs, &tmp);
    if (r->err == GS_OK && peers != NULL) {
        if (expect(r, peers, YAML_SEQUENCE_NODE, "nvlink_peers") != GS_OK)
            return r->err;
        for (yaml_node_item_t *it = peers->data.sequence.items.start;
             r->err == GS_OK && it < peers->data.sequence.items.top; it++) {
            yaml_node_t *v = node_at(r, *it);
            uint32_t p;
            if (get_u32(r, v, "nvlink_peers", GS_GPU_MAX - 1, &p) != GS_OK)
                break;
            if (p == g->index) {
                fail_at(r, GS_EPARSE, v, "nvlink_peers", "a GPU cannot be its own NVLink peer");
                break;
            }
            for (uint32_t j = 0; j < g->nvlink_peer_count; j++)
                if (g->nvlink_peers[j] == p)
                    fail_at(r, GS_EPARSE, v, "nvlink_peers", "peer %" PRIu32 " repeated", p);
            if (r->err == GS_OK)
                g->nvlink_peers[g->nvlink_peer_count++] = p;
        }
    }
    if (r->err != GS_OK)
        return r->err;
    tmp.cur.fb_free_mib = g->mem_total_mib - tmp.cur.fb_used_mib;
    *seen_idx |= UINT64_C(1) << g->index;
    f->gpu[g->index] = tmp;
    r->gpu_node[g->index] = map;
    return GS_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Checks what one GPU entry cannot: unique UUIDs (GPU and MIG), peers that exist. Indices
 * are already known to be 0..n-1, each once. */
static int check_gpus(struct rd *r, struct fake *f)
{
    for (uint32_t i = 0; i < f->n; i++) {
        struct gs_gpu_info *g = &f->gpu[i].info;
        const yaml_node_t *at = r->gpu_node[i];
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(f->gpu[j].info.uuid, g->uuid) == 0)
                return fail_at(r, GS_EPARSE, at, "uuid", "UUID %s repeated", g->uuid);
            for (uint32_t m = 0; m < g->mig_count; m++)
                for (uint32_t k = 0; k < f->gpu[j].info.mig_count; k++)
                    if (strcmp(f->gpu[j].info.mig[k].uuid, g->mig[m].uuid) == 0)
                        return fail_at(r, GS_EPARSE, at, "uuid", "MIG UUID %s repeated",
                                       g->mig[m].uuid);
        }
        for (uint32_t m = 0; m < g->mig_count; m++)
            for (uint32_t k = 0; k < m; k++)
                if (strcmp(g->mig[k].uuid, g->mig[m].uuid) == 0)
                    return fail_at(r, GS_EPARSE, at, "uuid", "MIG UUID %s repeated",
                                   g->mig[m].uuid);
        for (uint32_t p = 0; p < g->nvlink_peer_count; p++)
            if (g->nvlink_peers[p] >= f->n)
                return fail_at(r, GS_EPARSE, at, "nvlink_peers",
                               "NVLink peer %" PRIu32 " of GPU %" PRIu32 " does not exist",
                               g->nvlink_peers[p], i);
        qsort(g->nvlink_peers, g->nvlink_peer_count, sizeof g->nvlink_peers[0], cmp_u32);
    }
    return GS_OK;
}

static int push_step(struct rd *r, struct fake *f, const yaml_node_t *at, const struct step *s)
{
    if (f->n_steps == FAKE_STEPS_MAX)
        return fail_at(r, GS_EPARSE, at, "script", "more than %u script entries", FAKE_STEPS_MAX);
    if (f->n_steps == f->cap_steps) {
        size_t cap = f->cap_steps == 0 ? 16 : f->cap_steps * 2;
        struct step *p = realloc(f->steps, cap * sizeof *p);
        if (p == NULL)
            return fail_at(r, GS_ENOMEM, at, "script", "out of memory");
        f->steps = p;
        f->cap_steps = cap;
    }
    f->steps[f->n_steps] = *s;
    f->steps[f->n_steps].seq = f->n_steps;
    f->n_steps++;
    return GS_OK;
}

static const char *const step_keys[] = {"t_ms",    "gpu",  "set", "xid",
                                        "ecc_dbe", "lost", "mig", NULL};

/*
 * A scripted MIG layout ("mig:" of a script entry, the same mapping as a GPU's "mig:"): read
 * once the entry's GPU is known, against that GPU's memory; the GPU must be MIG-capable, and
 * `capable` cannot change.
 */
static int read_layout(struct rd *r, struct fake *f, const yaml_node_t *v, struct step *s)
{
    const struct gs_gpu_info *gpu = &f->gpu[s->gpu].info;
    if (!gpu->mig_capable)
        return fail_at(r, GS_EPARSE, v, "mig",
                       "GPU %" PRIu32 " is not MIG-capable (its mig.capable is false)", s->gpu);
    if (f->n_layouts == FAKE_LAYOUTS_MAX)
        return fail_at(r, GS_EPARSE, v, "mig", "more than %u scripted MIG layouts",
                       FAKE_LAYOUTS_MAX);
    if (f->layouts == NULL) {
        f->layouts = calloc(FAKE_LAYOUTS_MAX, sizeof *f->layouts);
        if (f->layouts == NULL)
            return fail_at(r, GS_ENOMEM, v, "mig", "out of memory");
    }
    struct gs_gpu_info *g = &f->layouts[f->n_layouts];
    memset(g, 0, sizeof *g);
    g->mem_total_mib = gpu->mem_total_mib;
    if (read_mig(r, v, g) != GS_OK)
        return r->err;
    if (!g->mig_capable)
        return fail_at(r, GS_EPARSE, v, "capable",
                       "a script entry cannot make a GPU MIG-incapable");
    for (uint32_t m = 0; m < g->mig_count; m++)
        for (uint32_t k = 0; k < m; k++)
            if (strcmp(g->mig[k].uuid, g->mig[m].uuid) == 0)
                return fail_at(r, GS_EPARSE, v, "uuid", "MIG UUID %s repeated", g->mig[m].uuid);
    f->layout_gpu[f->n_layouts] = s->gpu;
    f->layout_node[f->n_layouts] = v;
    s->layout = f->n_layouts++;
    return GS_OK;
}

/* Whether GPU gpu's MIG devices, initial or scripted, include uuid. */
static bool gpu_has_mig_uuid(const struct fake *f, uint32_t gpu, const char *uuid)
{
    const struct gs_gpu_info *g = &f->gpu[gpu].info;
    for (uint32_t k = 0; k < g->mig_count; k++)
        if (strcmp(g->mig[k].uuid, uuid) == 0)
            return true;
    for (uint32_t l = 0; l < f->n_layouts; l++)
        if (f->layout_gpu[l] == gpu)
            for (uint32_t k = 0; k < f->layouts[l].mig_count; k++)
                if (strcmp(f->layouts[l].mig[k].uuid, uuid) == 0)
                    return true;
    return false;
}

/* A MIG UUID belongs to one GPU: a scripted layout may reuse its own GPU's, never another's. */
static int check_layouts(struct rd *r, const struct fake *f)
{
    for (uint32_t l = 0; l < f->n_layouts; l++)
        for (uint32_t k = 0; k < f->layouts[l].mig_count; k++)
            for (uint32_t g = 0; g < f->n; g++)
                if (g != f->layout_gpu[l] && gpu_has_mig_uuid(f, g, f->layouts[l].mig[k].uuid))
                    return fail_at(r, GS_EPARSE, f->layout_node[l], "uuid",
                                   "MIG UUID %s is GPU %" PRIu32 "'s", f->layouts[l].mig[k].uuid,
                                   g);
    return GS_OK;
}

static int read_step(struct rd *r, struct fake *f, const yaml_node_t *map)
{
    if (expect(r, map, YAML_MAPPING_NODE, "script") != GS_OK)
        return r->err;
    struct step s;
    memset(&s, 0, sizeof s);
    uint32_t seen = 0;
    const yaml_node_t *gpu_node = NULL, *action = NULL, *mig = NULL;
    int actions = 0;
    FOR_PAIRS(r, map, pair)
    {
        int slot;
        if (map_key(r, map, pair, step_keys, &seen, "a script entry", &slot) != GS_OK)
            break;
        yaml_node_t *v = node_at(r, pair->value);
        const char *k = step_keys[slot];
        switch (slot) {
        case 0:
            get_int(r, v, k, 0, FAKE_T_MAX_MS, &s.t_ms);
            break;
        case 1:
            gpu_node = v;
            get_u32(r, v, k, GS_GPU_MAX - 1, &s.gpu);
            break;
        case 2:
            s.kind = STEP_SET;
            action = v;
            actions++;
            read_sample(r, v, "set", false, &s.set, &s.set_mask);
            break;
        case 3:
            s.kind = STEP_XID;
            action = v;
            actions++;
            if (get_u64(r, v, k, UINT32_MAX, &s.n) == GS_OK && s.n == 0)
                fail_at(r, GS_EPARSE, v, k, "XID codes start at 1");
            break;
        case 4:
            s.kind = STEP_ECC;
            action = v;
            actions++;
            if (get_u64(r, v, k, 1000000, &s.n) == GS_OK && s.n == 0)
                fail_at(r, GS_EPARSE, v, k, "ecc_dbe counts errors and must be at least 1");
            break;
        case 5:
            s.kind = STEP_LOST;
            action = v;
            actions++;
            get_bool(r, v, k, &s.lost);
            break;
        case 6:
            s.kind = STEP_MIG;
            action = mig = v;
            actions++;
            break;
        default:
            break;
        }
    }
    if (r->err != GS_OK)
        return r->err;
    if (need_keys(r, map, step_keys, seen, 3u, "a script entry") != GS_OK)
        return r->err;
    if (actions != 1)
        return fail_at(r, GS_EPARSE, actions == 0 ? map : action, "script",
                       "a script entry needs exactly one of set, xid, ecc_dbe, lost, mig");
    if (s.gpu >= f->n)
        return fail_at(r, GS_EPARSE, gpu_node, "gpu", "GPU %" PRIu32 " does not exist", s.gpu);
    if (mig != NULL && read_layout(r, f, mig, &s) != GS_OK)
        return r->err;
    if (s.kind == STEP_SET && (s.set_mask & GS_GPU_HAVE_FB) &&
        s.set.fb_used_mib > f->gpu[s.gpu].info.mem_total_mib)
        return fail_at(r, GS_EPARSE, action, "fb_used_mib", "fb_used_mib exceeds memory_mib");
    return push_step(r, f, map, &s);
}

/* Parses a CUDA version "12.4" or an encoded 12040 into 1000*major + 10*minor. */
static int read_cuda_version(struct rd *r, const yaml_node_t *v, int32_t *out)
{
    const char *k = "cuda_driver_version";
    const char *s = NULL;
    if (scalar_text(r, v, k, &s) != GS_OK)
        return r->err;
    unsigned maj, min;
    if (parse_ver2(s, &maj, &min)) {
        if (min <= 99) {
            *out = (int32_t)(maj * 1000 + min * 10);
            return GS_OK;
        }
    } else if (s[0] >= '1' && s[0] <= '9' && strlen(s) <= 6 &&
               strspn(s, "0123456789") == strlen(s)) {
        long n = strtol(s, NULL, 10);
        if (n >= 1000) {
            *out = (int32_t)n;
            return GS_OK;
        }
    }
    return fail_at(r, GS_EPARSE, v, k, "'%.40s' is not a CUDA version like 12.4 or 12040", s);
}

static int cmp_step(const void *a, const void *b)
{
    const struct step *x = a, *y = b;
    if (x->t_ms != y->t_ms)
        return (x->t_ms > y->t_ms) - (x->t_ms < y->t_ms);
    return (x->seq > y->seq) - (x->seq < y->seq); /* equal times keep file order */
}

static const char *const top_keys[] = {"driver_version", "cuda_driver_version", "gpus", "script",
                                       NULL};

static int read_top(struct rd *r, struct fake *f, const yaml_node_t *root)
{
    if (expect(r, root, YAML_MAPPING_NODE, "") != GS_OK)
        return r->err;
    uint32_t seen = 0;
    const yaml_node_t *gpus = NULL, *script = NULL;
    FOR_PAIRS(r, root, pair)
    {
        int slot;
        if (map_key(r, root, pair, top_keys, &seen, "the top level", &slot) != GS_OK)
            break;
        yaml_node_t *v = node_at(r, pair->value);
        /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult): see fail_at */
        if (slot == 0)
            get_str(r, v, top_keys[0], f->sys.driver_version, sizeof f->sys.driver_version);
        else if (slot == 1)
            read_cuda_version(r, v, &f->sys.cuda_driver_version);
        else if (slot == 2)
            gpus = v;
        else
            script = v;
    }
    if (r->err != GS_OK)
        return r->err;
    if (need_keys(r, root, top_keys, seen, 4u, "the top level") != GS_OK)
        return r->err;
    if (expect(r, gpus, YAML_SEQUENCE_NODE, "gpus") != GS_OK)
        return r->err;
    size_t n = (size_t)(gpus->data.sequence.items.top - gpus->data.sequence.items.start);
    if (n > GS_GPU_MAX)
        return fail_at(r, GS_EPARSE, gpus, "gpus", "more than %d GPUs", GS_GPU_MAX);
    f->n = (uint32_t)n;
    uint64_t seen_idx = 0;
    for (size_t i = 0; i < n; i++)
        if (read_gpu(r, f, node_at(r, gpus->data.sequence.items.start[i]), &seen_idx) != GS_OK)
            return r->err;
    if (check_gpus(r, f) != GS_OK)
        return r->err;
    if (script == NULL)
        return GS_OK;
    if (expect(r, script, YAML_SEQUENCE_NODE, "script") != GS_OK)
        return r->err;
    for (yaml_node_item_t *it = script->data.sequence.items.start;
         it < script->data.sequence.items.top; it++)
        if (read_step(r, f, node_at(r, *it)) != GS_OK)
            return r->err;
    if (check_layouts(r, f) != GS_OK)
        return r->err;
    qsort(f->steps, f->n_steps, sizeof f->steps[0], cmp_step);
    return GS_OK;
}

/* ---- the backend ---------------------------------------------------------------------- */
/* Turns a libyaml load error into a diagnostic. */
static int yaml_problem(struct rd *r, const yaml_parser_t *p)
{
    r->err = GS_EPARSE;
    if (r->diag == NULL)
        return GS_EPARSE;
    if (p->error == YAML_MEMORY_ERROR) {
        r->err = GS_ENOMEM;
        (void)snprintf(r->diag->msg, sizeof r->diag->msg, "out of memory");
        return GS_ENOMEM;
    }
    const yaml_mark_t *m = p->problem != NULL ? &p->problem_mark : &p->context_mark;
    r->diag->line = (uint64_t)m->line + 1;
    r->diag->column = (uint32_t)m->column + 1;
    (void)snprintf(r->diag->msg, sizeof r->diag->msg, "not valid YAML: %s%s%s",
                   p->problem != NULL ? p->problem : "unknown problem",
                   p->context != NULL ? " " : "", p->context != NULL ? p->context : "");
    return GS_EPARSE;
}

/* The walker's callback: the limits are all the check wanted here. */
static int check_event(void *ctx, const struct gs_yaml_event *ev, struct gs_diag *d)
{
    (void)ctx;
    (void)ev;
    (void)d;
    return GS_OK;
}

int gs_gpu_parse_fake(const char *buf, size_t len, const char *name, const struct gs_clock *clock,
                      struct gs_gpu_backend **out, struct gs_diag *diag)
{
    struct rd r;
    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_parser = false, have_doc = false;
    struct fake *f = NULL;
    struct gs_gpu_backend *b = NULL;

    memset(&r, 0, sizeof r);
    r.doc = &doc;
    r.diag = diag;
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", name != NULL ? name : "");
    }
    if (out != NULL)
        *out = NULL;
    if (buf == NULL || out == NULL || clock == NULL || clock->now_ms == NULL ||
        clock->sleep_ms == NULL) {
        r.err = GS_EINVAL;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        goto out;
    }
    if (len > FAKE_FILE_MAX) {
        r.err = GS_EIO;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "file larger than %zu bytes",
                           FAKE_FILE_MAX);
        goto out;
    }
    f = calloc(1, sizeof *f);
    b = calloc(1, sizeof *b);
    if (f == NULL || b == NULL || !yaml_parser_initialize(&parser)) {
        r.err = GS_ENOMEM;
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "out of memory");
        goto out;
    }
    have_parser = true;
    /* The shared bounded walker first: it stops a deeply nested input (a 1 MB "[[[...") at
     * its limit, where yaml_parser_load() would stack it up for minutes (issue 9). The
     * document below is then known to be small and shallow. */
    struct gs_yaml_limits lim = {.bytes_max = FAKE_FILE_MAX,
                                 .depth_max = FAKE_DEPTH_MAX,
                                 .nodes_max = FAKE_NODES_MAX,
                                 .aliases = true,
                                 .tags = true,
                                 .what = "a fake node"};
    r.err = gs__yaml_walk(buf, len, &lim, check_event, NULL, diag);
    if (r.err != GS_OK)
        goto out;
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_problem(&r, &parser);
        goto out;
    }
    have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root == NULL) {
        fail_at(&r, GS_EPARSE, NULL, "", "empty document: expected a mapping with 'gpus'");
        goto out;
    }
    if (read_top(&r, f, root) != GS_OK)
        goto out;
    /* A second document would be silently ignored; refuse it instead. */
    yaml_document_t extra;
    if (!yaml_parser_load(&parser, &extra)) {
        yaml_problem(&r, &parser);
        goto out;
    }
    yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
    if (extra_root != NULL)
        fail_at(&r, GS_EPARSE, extra_root, "", "more than one YAML document");
    yaml_document_delete(&extra);
    if (r.err != GS_OK)
        goto out;

    f->clock = *clock;
    f->t0_ms = clock->now_ms(clock->ctx);
    b->ops = &gs__fake_ops;
    b->impl = f;
    *out = b;
    f = NULL;
    b = NULL;
out:
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    if (f != NULL) {
        free(f->steps);
        free(f->layouts);
    }
    free(f);
    free(b);
    return r.err;
}

int gs_gpu_open_fake(const char *path, const struct gs_clock *clock, struct gs_gpu_backend **out,
                     struct gs_diag *diag)
{
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
        (void)snprintf(diag->file, sizeof diag->file, "%s", path != NULL ? path : "");
    }
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL) {
        if (diag != NULL)
            (void)snprintf(diag->msg, sizeof diag->msg, "invalid argument");
        return GS_EINVAL;
    }
    char *buf;
    size_t len;
    int rc = gs__read_file(path, FAKE_FILE_MAX, &buf, &len, diag);
    if (rc != GS_OK)
        return rc;
    rc = gs_gpu_parse_fake(buf, len, path, clock, out, diag);
    free(buf);
    return rc;
}
