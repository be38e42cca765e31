/*
 * The device plugin's resource model and its preferred-allocation policy (contracts in
 * include/gpusched/devplugin.h). Pure: no I/O, no clock.
 *
 * The model is built in two passes. The first gives every physical unit (a whole GPU or a
 * MIG device) its base resource from the MIG strategy, as NVIDIA's plugin names them, and
 * then its final resource and replica count from the time-slicing entries. The second
 * expands each final resource, in name order, into its devices: GPUs ascending, MIG devices in
 * backend order, replicas ascending, so ListAndWatch lists are stable from run to run.
 *
 * The preferred-allocation policy has two shapes. Whole GPUs are chosen by the core's topology
 * function (gs_topo_pick(): NVLink pairs inside the set, then NUMA, then fewest links cut to
 * available GPUs left outside; exact up to 16 candidates, greedy beyond), the same one the
 * scheduler places whole GPUs with, so the two prefer the same GPUs. Shared slots (replicas, MIG
 * devices) are grouped by the unit whose capacity they share (the GPU, or the MIG device for its
 * replicas) and packed group by group, so that a request lands where capacity is already broken
 * into and whole GPUs stay free.
 */
#include "gpusched/devplugin.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/topo.h"

#include "devplugin_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Most physical units of a node: every GPU whole, or every MIG device of every GPU. */
#define UNITS_MAX (GS_GPU_MAX * GS_GPU_MIG_MAX)

/** A physical unit and where it goes. */
struct unit {
    uint32_t gpu;                        /**< GPU index */
    int32_t mig;                         /**< MIG device position, -1 whole */
    char base[GS_DP_RESOURCE_NAME_LEN];  /**< resource from the MIG strategy */
    char final[GS_DP_RESOURCE_NAME_LEN]; /**< resource after time-slicing */
    uint32_t replicas;                   /**< 0 not shared */
    int32_t entry;                       /**< time-slicing entry that selected it, -1 none */
    uint32_t slices;                     /**< slices of a fractions GPU, 0 none */
};

GS_PRINTF(3, 4)
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    if (err != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

static bool name_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

/* "nvidia.com/mig-<profile>" with characters a resource name cannot hold made '.'. */
static void mig_resource(const char *profile, char *out, size_t cap)
{
    char p[GS_GPU_PROFILE_LEN];
    size_t i = 0;
    for (; profile[i] != '\0' && i + 1 < sizeof p; i++)
        p[i] = name_char_ok(profile[i]) ? profile[i] : '.';
    p[i] = '\0';
    (void)snprintf(out, cap, "nvidia.com/mig-%s", p);
}

static bool selects(const struct gs_dp_ts_entry *e, const struct gs_gpu_info *gpus,
                    const struct unit *u, bool *matched)
{
    if (e->all_devices)
        return true;
    bool hit = false;
    for (uint32_t s = 0; s < e->n_devices; s++) {
        const char *sel = e->devices[s];
        bool h = false;
        if (strncmp(sel, "GPU-", 4) == 0) {
            h = strcmp(gpus[u->gpu].uuid, sel) == 0;
        } else if (strncmp(sel, "MIG-", 4) == 0) {
            h = u->mig >= 0 && strcmp(gpus[u->gpu].mig[u->mig].uuid, sel) == 0;
        } else if (strchr(sel, ':') != NULL) {
            /* "GPU:MIG", both small decimal indices (checked by the config reader). */
            char *end;
            unsigned long g = strtoul(sel, &end, 10);
            unsigned long mg = strtoul(end + 1, NULL, 10);
            h = g == u->gpu && u->mig >= 0 && (unsigned long)u->mig == mg;
        } else {
            h = (uint32_t)strtoul(sel, NULL, 10) == u->gpu;
        }
        if (h) {
            matched[s] = true;
            hit = true;
        }
    }
    return hit;
}

/* First pass: base resources from the MIG strategy. */
static int base_units(const struct gs_dp_config *cfg, const struct gs_gpu_info *gpus, uint32_t n,
                      struct unit *units, uint32_t *n_units, char *err, size_t cap)
{
    /* A GPU lost when read tells nothing of its MIG mode: it counts for no strategy. */
    uint32_t n_mig_gpus = 0, n_read = 0;
    for (uint32_t g = 0; g < n; g++) {
        n_mig_gpus += gpus[g].mig_enabled ? 1u : 0u;
        n_read += gpus[g].lost ? 0u : 1u;
    }
    bool single_mig = cfg->mig_strategy == GS_MIG_STRATEGY_SINGLE && n_mig_gpus > 0;
    if (single_mig && n_mig_gpus != n_read)
        return fail(err, cap,
                    "migStrategy single: %u of %u GPUs run MIG; single needs all or "
                    "none (use mixed)",
                    (unsigned)n_mig_gpus, (unsigned)n_read);
    const char *single_profile = NULL;
    uint32_t k = 0;
    for (uint32_t g = 0; g < n; g++) {
        const struct gs_gpu_info *gi = &gpus[g];
        /* Lost when read: advertised whole (and Unhealthy) when its UUID is known, so kubelet
         * keeps counting it; not at all when it is not, or when its MIG devices are unknown. */
        if (gi->lost && (gi->uuid[0] == '\0' || single_mig))
            continue;
        bool as_mig = gi->mig_enabled && cfg->mig_strategy != GS_MIG_STRATEGY_NONE;
        if (!as_mig) {
            struct unit *u = &units[k++];
            memset(u, 0, sizeof *u);
            u->gpu = g;
            u->mig = -1;
            u->entry = -1;
            (void)snprintf(u->base, sizeof u->base, "nvidia.com/gpu");
            continue;
        }
        for (uint32_t m = 0; m < gi->mig_count && m < GS_GPU_MIG_MAX; m++) {
            const struct gs_gpu_mig *mg = &gi->mig[m];
            if (single_mig) {
                if (single_profile == NULL)
                    single_profile = mg->profile;
                else if (strcmp(single_profile, mg->profile) != 0)
                    return fail(err, cap,
                                "migStrategy single: GPU %u has MIG profile '%s' and "
                                "another GPU '%s'; single needs one profile (use mixed)",
                                (unsigned)g, mg->profile, single_profile);
            } else if (mg->profile[0] == '\0') {
                continue; /* an unknown profile has no resource name: not advertised */
            }
            struct unit *u = &units[k++];
            memset(u, 0, sizeof *u);
            u->gpu = g;
            u->mig = (int32_t)m;
            u->entry = -1;
            if (single_mig)
                (void)snprintf(u->base, sizeof u->base, "nvidia.com/gpu");
            else
                mig_resource(mg->profile, u->base, sizeof u->base);
        }
    }
    *n_units = k;
    return GS_OK;
}

/* Second half of the first pass: time-slicing entries pick units and name their resource. */
static int share_units(const struct gs_dp_config *cfg, const struct gs_gpu_info *gpus,
                       struct unit *units, uint32_t n_units, struct gs_dp_model *m, char *err,
                       size_t cap)
{
    bool matched[GS_DP_TS_MAX][GS_DP_SELECT_MAX];
    memset(matched, 0, sizeof matched);
    for (uint32_t i = 0; i < n_units; i++) {
        struct unit *u = &units[i];
        (void)snprintf(u->final, sizeof u->final, "%s", u->base);
        for (uint32_t e = 0; e < cfg->n_ts && e < GS_DP_TS_MAX; e++) {
            const struct gs_dp_ts_entry *t = &cfg->ts[e];
            if (strcmp(t->name, u->base) != 0 || !selects(t, gpus, u, matched[e]))
                continue;
            if (u->entry >= 0)
                return fail(err, cap,
                            "time-slicing entries %d (line %u) and %u (line %u) both "
                            "select GPU %u%s%s",
                            (int)u->entry, (unsigned)cfg->ts[u->entry].line, (unsigned)e,
                            (unsigned)t->line, (unsigned)u->gpu, u->mig >= 0 ? " MIG device " : "",
                            u->mig >= 0 ? gpus[u->gpu].mig[u->mig].uuid : "");
            u->entry = (int32_t)e;
            u->replicas = t->replicas;
            if (t->rename[0] != '\0')
                (void)snprintf(u->final, sizeof u->final, "%s", t->rename);
            else if (cfg->rename_by_default)
                (void)snprintf(u->final, sizeof u->final, "%.100s.shared", u->base);
        }
    }
    /* sharing.fractions: whole GPUs become slice tickets; a GPU in one mode only. */
    bool f_matched[GS_DP_SELECT_MAX];
    memset(f_matched, 0, sizeof f_matched);
    for (uint32_t i = 0; cfg->has_fractions && i < n_units; i++) {
        struct unit *u = &units[i];
        const struct gs_dp_ts_entry *f = &cfg->fractions;
        if (!selects(f, gpus, u, f_matched))
            continue;
        if (u->mig >= 0) {
            if (f->all_devices)
                continue; /* 'all' means the GPUs that are whole; a MIG GPU keeps its devices */
            return fail(err, cap,
                        "sharing.fractions (line %u) selects GPU %u, which runs MIG: "
                        "a GPU is in one mode",
                        (unsigned)f->line, (unsigned)u->gpu);
        }
        if (u->entry >= 0)
            return fail(err, cap,
                        "sharing.fractions (line %u) and time-slicing entry %d (line %u) both "
                        "select GPU %u: a GPU is in one mode",
                        (unsigned)f->line, (int)u->entry, (unsigned)cfg->ts[u->entry].line,
                        (unsigned)u->gpu);
        u->slices = f->replicas;
        (void)snprintf(u->final, sizeof u->final, "%s", GS_DP_SLICE_RESOURCE);
    }
    for (uint32_t s = 0; cfg->has_fractions && s < cfg->fractions.n_devices; s++)
        if (!f_matched[s] && m->n_unmatched++ == 0)
            (void)snprintf(m->unmatched, sizeof m->unmatched, "%s", cfg->fractions.devices[s]);
    for (uint32_t e = 0; e < cfg->n_ts && e < GS_DP_TS_MAX; e++)
        for (uint32_t s = 0; s < cfg->ts[e].n_devices && s < GS_DP_SELECT_MAX; s++)
            if (!matched[e][s]) {
                if (m->n_unmatched++ == 0)
                    (void)snprintf(m->unmatched, sizeof m->unmatched, "%s", cfg->ts[e].devices[s]);
            }
    return GS_OK;
}

/* Sort records: qsort has no context argument, so each element carries its key. */
struct id_pos {
    const char *id; /**< the device's ID */
    uint32_t pos;   /**< its position in the resource */
};

static int cmp_id_pos(const void *a, const void *b)
{
    return strcmp(((const struct id_pos *)a)->id, ((const struct id_pos *)b)->id);
}

static int cmp_res(const void *a, const void *b)
{
    return strcmp(((const struct gs_dp_resource *)a)->name,
                  ((const struct gs_dp_resource *)b)->name);
}

/* Second pass: devices of one resource. */
static int expand(const struct gs_gpu_info *gpus, const struct unit *units, uint32_t n_units,
                  struct gs_dp_resource *r, char *err, size_t cap)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_units; i++)
        if (strcmp(units[i].final, r->name) == 0)
            total += units[i].slices > 0     ? units[i].slices
                     : units[i].replicas > 0 ? units[i].replicas
                                             : 1;
    if (total > GS_DP_DEVICES_MAX) {
        (void)fail(err, cap, "resource %s would have %llu devices, more than %d", r->name,
                   (unsigned long long)total, GS_DP_DEVICES_MAX);
        return GS_ELIMIT;
    }
    size_t n_alloc = total > 0 ? (size_t)total : 1;
    r->devices = calloc(n_alloc, sizeof *r->devices);
    r->by_id = calloc(n_alloc, sizeof *r->by_id);
    if (r->devices == NULL || r->by_id == NULL)
        return GS_ENOMEM;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_units; i++) {
        const struct unit *u = &units[i];
        if (strcmp(u->final, r->name) != 0)
            continue;
        const struct gs_gpu_info *g = &gpus[u->gpu];
        const char *base_id = u->mig >= 0 ? g->mig[u->mig].uuid : g->uuid;
        uint32_t copies = u->slices > 0 ? u->slices : u->replicas > 0 ? u->replicas : 1;
        for (uint32_t c = 0; c < copies; c++) {
            struct gs_dp_device *d = &r->devices[k];
            int len =
                u->slices > 0 ? snprintf(d->id, sizeof d->id, "%s::slice-%u", base_id, (unsigned)c)
                : u->replicas > 0 ? snprintf(d->id, sizeof d->id, "%s::%u", base_id, (unsigned)c)
                                  : snprintf(d->id, sizeof d->id, "%s", base_id);
            if (len < 0 || (size_t)len >= sizeof d->id)
                return fail(err, cap, "device ID '%s%s' of GPU %u is longer than 63 characters",
                            base_id,
                            u->slices > 0     ? "::slice-N"
                            : u->replicas > 0 ? "::N"
                                              : "",
                            (unsigned)u->gpu);
            d->gpu = u->gpu;
            d->mig = u->mig;
            d->replica = c;
            d->replicas = u->replicas;
            d->slices = u->slices;
            d->numa_node = g->numa_node >= 0 ? g->numa_node : -1;
            k++;
        }
    }
    r->n_devices = k;
    struct id_pos *tmp = calloc(k > 0 ? k : 1, sizeof *tmp);
    if (tmp == NULL)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < k; i++)
        tmp[i] = (struct id_pos){r->devices[i].id, i};
    qsort(tmp, k, sizeof *tmp, cmp_id_pos);
    for (uint32_t i = 0; i < k; i++)
        r->by_id[i] = tmp[i].pos;
    free(tmp);
    for (uint32_t i = 1; i < k; i++)
        if (strcmp(r->devices[r->by_id[i - 1]].id, r->devices[r->by_id[i]].id) == 0)
            return fail(err, cap, "device ID %s appears twice in %s (two GPUs with one UUID?)",
                        r->devices[r->by_id[i]].id, r->name);
    /* Socket file: gpusched-<name>.sock with unsafe characters made '-'. */
    char safe[GS_DP_RESOURCE_NAME_LEN];
    size_t j = 0;
    for (; r->name[j] != '\0' && j + 1 < sizeof safe; j++)
        safe[j] = name_char_ok(r->name[j]) && r->name[j] != '_' ? r->name[j] : '-';
    safe[j] = '\0';
    (void)snprintf(r->endpoint, sizeof r->endpoint, "gpusched-%s.sock", safe);
    return GS_OK;
}

int gs_dp_model_build(const struct gs_dp_config *cfg, const struct gs_gpu_info *gpus, uint32_t n,
                      struct gs_dp_model *out, char *err, size_t cap)
{
    struct unit *units = NULL;
    int rc = GS_OK;

    if (err != NULL && cap > 0)
        err[0] = '\0';
    if (out == NULL)
        return GS_EINVAL;
    memset(out, 0, sizeof *out);
    if (cfg == NULL || (gpus == NULL && n > 0) || n > GS_GPU_MAX)
        return fail(err, cap, "invalid argument");
    for (uint32_t g = 0; g < n; g++)
        if (gpus[g].index != g || gpus[g].mig_count > GS_GPU_MIG_MAX)
            return fail(err, cap, "GPU at position %u reports index %u", (unsigned)g,
                        (unsigned)gpus[g].index);
    out->n_gpus = n;
    out->gpus = calloc(n > 0 ? n : 1, sizeof *out->gpus);
    units = calloc((size_t)UNITS_MAX, sizeof *units);
    if (out->gpus == NULL || units == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    if (n > 0)
        memcpy(out->gpus, gpus, n * sizeof *gpus);
    for (uint32_t g = 0; g < n; g++)
        out->dev_minor[g] = g;
    for (uint32_t g = 0; g < n; g++)
        for (uint32_t p = 0; p < gpus[g].nvlink_peer_count && p < GS_GPU_MAX; p++)
            if (gpus[g].nvlink_peers[p] < n && gpus[g].nvlink_peers[p] != g)
                out->nvlink[g] |= UINT64_C(1) << gpus[g].nvlink_peers[p];

    uint32_t n_units = 0;
    rc = base_units(cfg, gpus, n, units, &n_units, err, cap);
    if (rc == GS_OK)
        rc = share_units(cfg, gpus, units, n_units, out, err, cap);
    if (rc != GS_OK)
        goto out;

    /* Distinct final names, then their devices. */
    for (uint32_t i = 0; i < n_units; i++) {
        if (gs_dp_model_resource(out, units[i].final) >= 0)
            continue;
        if (out->n_resources == GS_DP_RESOURCES_MAX) {
            (void)fail(err, cap, "more than %d resources", GS_DP_RESOURCES_MAX);
            rc = GS_ELIMIT;
            goto out;
        }
        (void)snprintf(out->resources[out->n_resources++].name, GS_DP_RESOURCE_NAME_LEN, "%s",
                       units[i].final);
    }
    qsort(out->resources, out->n_resources, sizeof out->resources[0], cmp_res);
    for (uint32_t i = 0; i < out->n_resources; i++) {
        rc = expand(gpus, units, n_units, &out->resources[i], err, cap);
        if (rc != GS_OK)
            goto out;
    }
out:
    free(units);
    if (rc != GS_OK) {
        if (rc == GS_ENOMEM && err != NULL && cap > 0)
            (void)snprintf(err, cap, "out of memory");
        gs_dp_model_fini(out);
    }
    return rc;
}

void gs_dp_model_fini(struct gs_dp_model *m)
{
    if (m == NULL)
        return;
    for (uint32_t i = 0; i < GS_DP_RESOURCES_MAX; i++) {
        free(m->resources[i].devices);
        free(m->resources[i].by_id);
    }
    free(m->gpus);
    memset(m, 0, sizeof *m);
}

int32_t gs_dp_model_find(const struct gs_dp_resource *r, const char *id)
{
    if (r == NULL || id == NULL)
        return -1;
    uint32_t lo = 0, hi = r->n_devices;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->devices[r->by_id[mid]].id, id);
        if (c == 0)
            return (int32_t)r->by_id[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int32_t gs_dp_model_resource(const struct gs_dp_model *m, const char *name)
{
    for (uint32_t i = 0; m != NULL && name != NULL && i < m->n_resources; i++)
        if (strcmp(m->resources[i].name, name) == 0)
            return (int32_t)i;
    return -1;
}

/* ---- preferred allocation --------------------------------------------------------------- */

/*
 * Whole GPUs: the core's topology choice (gs_topo_pick(), include/gpusched/topo.h), the one the
 * scheduler places whole GPUs by, on the model's NVLink masks and NUMA nodes. Fewer available
 * GPUs than wanted: all of them (kubelet then decides).
 */
static int prefer_whole(const struct gs_dp_model *m, const struct gs_dp_resource *r,
                        const uint32_t *avail, uint32_t n_avail, const uint32_t *must,
                        uint32_t n_must, uint32_t want, uint32_t *out, uint32_t *n_out)
{
    uint64_t am = 0, mm = 0;
    int32_t pos_of_gpu[GS_GPU_MAX];
    int32_t numa[GS_GPU_MAX];
    for (uint32_t i = 0; i < GS_GPU_MAX; i++) {
        pos_of_gpu[i] = -1;
        numa[i] = i < m->n_gpus ? m->gpus[i].numa_node : -1;
    }
    for (uint32_t i = 0; i < n_avail; i++) {
        am |= UINT64_C(1) << r->devices[avail[i]].gpu;
        pos_of_gpu[r->devices[avail[i]].gpu] = (int32_t)avail[i];
    }
    for (uint32_t i = 0; i < n_must; i++)
        mm |= UINT64_C(1) << r->devices[must[i]].gpu;
    am &= ~mm;
    uint32_t n_am = 0;
    for (uint64_t x = am; x != 0; x &= x - 1)
        n_am++;
    uint64_t chosen = am;
    if (n_am > want) {
        int rc = gs_topo_pick(m->n_gpus, m->nvlink, numa, am, mm, want, &chosen);
        if (rc != GS_OK)
            return rc; /* the masks are the model's own: not expected */
    }
    uint32_t k = 0;
    for (uint32_t g = 0; g < m->n_gpus && k < want; g++)
        if ((chosen & (UINT64_C(1) << g)) && pos_of_gpu[g] >= 0)
            out[k++] = (uint32_t)pos_of_gpu[g];
    *n_out = k;
    return GS_OK;
}

/* A unit whose capacity a set of slots shares: a GPU, or a MIG device for its replicas. */
struct group {
    uint32_t gpu;   /**< GPU index */
    int32_t key;    /**< gpu * (GS_GPU_MIG_MAX + 1) + (replicated MIG ? mig + 1 : 0) */
    uint32_t slots; /**< devices of the resource in the group */
    uint32_t free;  /**< available and not yet chosen */
    uint32_t next;  /**< next position in order[] to take from */
    uint32_t end;   /**< end of the group's range in order[] */
    bool touched;   /**< others hold some of its slots */
    bool used;      /**< this request already holds some */
    int32_t numa;   /**< NUMA node of the GPU */
};

static int32_t group_key(const struct gs_dp_device *d)
{
    int32_t sub = d->replicas > 0 && d->mig >= 0 ? d->mig + 1 : 0;
    return (int32_t)d->gpu * (GS_GPU_MIG_MAX + 1) + sub;
}

/* Sort record of a slot: its group's key, then its position. */
struct key_pos {
    int32_t key;  /**< group_key() of the device */
    uint32_t pos; /**< position in the resource */
};

static int cmp_key_pos(const void *a, const void *b)
{
    const struct key_pos *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Whether group a is a better next choice than b for `need` more slots. */
static bool group_better(const struct group *a, const struct group *b, int32_t numa, uint32_t need)
{
    if (a->used != b->used)
        return a->used;
    if (numa >= 0 && (a->numa == numa) != (b->numa == numa))
        return a->numa == numa;
    if ((a->free >= need) != (b->free >= need))
        return a->free >= need;
    if (a->touched != b->touched)
        return a->touched;
    if ((a->slots > 1) != (b->slots > 1))
        return a->slots > 1;
    if (a->free != b->free)
        return a->free < b->free;
    return a->key < b->key;
}

static int prefer_slots(const struct gs_dp_resource *r, const uint32_t *avail, uint32_t n_avail,
                        const uint32_t *must, uint32_t n_must, uint32_t want, uint32_t *out,
                        uint32_t *n_out)
{
    struct key_pos *order = malloc((n_avail > 0 ? n_avail : 1) * sizeof *order);
    struct group *groups = calloc(n_avail + n_must + 1, sizeof *groups);
    uint32_t *slots = calloc((size_t)GS_GPU_MAX * (GS_GPU_MIG_MAX + 1), sizeof *slots);
    if (order == NULL || groups == NULL || slots == NULL) {
        free(order);
        free(groups);
        free(slots);
        return GS_ENOMEM;
    }
    for (uint32_t i = 0; i < r->n_devices; i++)
        slots[group_key(&r->devices[i])]++;
    for (uint32_t i = 0; i < n_avail; i++)
        order[i] = (struct key_pos){group_key(&r->devices[avail[i]]), avail[i]};
    qsort(order, n_avail, sizeof *order, cmp_key_pos);

    uint32_t n_groups = 0;
    for (uint32_t i = 0; i < n_avail; i++) {
        const struct gs_dp_device *d = &r->devices[order[i].pos];
        int32_t key = order[i].key;
        if (n_groups == 0 || groups[n_groups - 1].key != key) {
            struct group *g = &groups[n_groups++];
            g->gpu = d->gpu;
            g->key = key;
            g->slots = slots[key];
            g->next = i;
            g->numa = d->numa_node;
        }
        groups[n_groups - 1].free++;
        groups[n_groups - 1].end = i + 1;
    }
    int32_t numa = -1;
    for (uint32_t j = 0; j < n_must; j++) {
        const struct gs_dp_device *d = &r->devices[must[j]];
        if (numa < 0)
            numa = d->numa_node;
        for (uint32_t g = 0; g < n_groups; g++)
            if (groups[g].key == group_key(d))
                groups[g].used = true;
    }
    /* Held by others: slots neither offered nor already ours. */
    for (uint32_t g = 0; g < n_groups; g++) {
        uint32_t mine = 0;
        for (uint32_t j = 0; j < n_must; j++)
            mine += group_key(&r->devices[must[j]]) == groups[g].key ? 1u : 0u;
        groups[g].touched = groups[g].free + mine < groups[g].slots;
    }

    uint32_t k = 0;
    while (k < want) {
        int32_t best = -1;
        for (uint32_t g = 0; g < n_groups; g++) {
            if (groups[g].free == 0)
                continue;
            if (best < 0 || group_better(&groups[g], &groups[best], numa, want - k))
                best = (int32_t)g;
        }
        if (best < 0)
            break;
        struct group *g = &groups[best];
        while (k < want && g->next < g->end) {
            out[k++] = order[g->next++].pos;
            g->free--;
        }
        g->used = true;
        if (numa < 0)
            numa = g->numa;
    }
    *n_out = k;
    free(order);
    free(groups);
    free(slots);
    return GS_OK;
}

int gs__dp_prefer(const struct gs_dp_model *m, const struct gs_dp_resource *r,
                  const uint32_t *avail, uint32_t n_avail, const uint32_t *must, uint32_t n_must,
                  uint32_t want, uint32_t *out, uint32_t *n_out)
{
    *n_out = 0;
    if (want == 0)
        return GS_OK;
    bool whole = true;
    for (uint32_t i = 0; i < n_avail && whole; i++)
        whole = r->devices[avail[i]].mig < 0 && r->devices[avail[i]].replicas == 0 &&
                r->devices[avail[i]].slices == 0;
    for (uint32_t i = 0; i < n_must && whole; i++)
        whole = r->devices[must[i]].mig < 0 && r->devices[must[i]].replicas == 0 &&
                r->devices[must[i]].slices == 0;
    if (whole)
        return prefer_whole(m, r, avail, n_avail, must, n_must, want, out, n_out);
    return prefer_slots(r, avail, n_avail, must, n_must, want, out, n_out);
}
