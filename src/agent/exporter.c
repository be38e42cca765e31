/*
 * Prometheus rendering of GPU metrics (contract in include/gpusched/exporter.h; the HTTP side
 * is exporter_http.c, so that this file needs nothing but libc).
 *
 * Rendering walks a fixed table of metric families. For each family it writes HELP and TYPE
 * before the first series, then each GPU's own series and, for the two families that a pod
 * can be charged with (utilisation, memory used), one series per pod measured on the GPU.
 * Which GPU each attribution row maps to, and whether it repeats an earlier row of the same
 * GPU and pod, is worked out once per render into one scratch array; so is which row, if
 * any, each per-pod value joins, and each GPU's totals for bounding the sums. A scrape costs
 * O(rows x values) matching work once, plus the text itself. Numbers are
 * formatted by hand (integers, and watts from milliwatts with three decimals at most), which
 * keeps the output independent of the C locale and snprintf's speed.
 */
#include "gpusched/exporter.h"

#include "gpusched/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bounded buffer --------------------------------------------------------------------- */

void gs_textbuf_init(struct gs_textbuf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    /* Far below SIZE_MAX, so that len + n + 1 and the doubling below cannot overflow. */
    b->max = max_bytes > SIZE_MAX / 4 ? SIZE_MAX / 4 : max_bytes;
}

void gs_textbuf_reset(struct gs_textbuf *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

void gs_textbuf_fini(struct gs_textbuf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

int gs_textbuf_append(struct gs_textbuf *b, const char *s, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return GS_ELIMIT;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap == 0 ? 4096 : b->cap;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (cap > b->max + 1)
            cap = b->max + 1;
        char *p = realloc(b->data, cap);
        if (p == NULL)
            return GS_ENOMEM;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GS_OK;
}

/* ---- writer: appends with a sticky error, so render code reads straight through ------- */

struct writer {
    struct gs_textbuf *out;
    int err; /**< first error; GS_OK while none */
};

static void put(struct writer *w, const char *s, size_t n)
{
    if (w->err == GS_OK)
        w->err = gs_textbuf_append(w->out, s, n);
}

static void puts_(struct writer *w, const char *s)
{
    put(w, s, strlen(s));
}

static void put_u64(struct writer *w, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(w, tmp + i, sizeof tmp - i);
}

static void put_i64(struct writer *w, int64_t v)
{
    if (v < 0) {
        put(w, "-", 1);
        put_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(w, (uint64_t)v);
    }
}

/* Milliunits as a decimal with up to three decimals: 652500 -> "652.5", 72000 -> "72". */
static void put_milli(struct writer *w, uint64_t milli)
{
    put_u64(w, milli / 1000);
    unsigned frac = (unsigned)(milli % 1000);
    if (frac == 0)
        return;
    char d[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                 (char)('0' + frac % 10)};
    size_t n = 4;
    while (d[n - 1] == '0')
        n--;
    put(w, d, n);
}

int gs_exporter_escape_label(struct gs_textbuf *out, const char *value)
{
    const char *p = value;
    const char *run = p;
    int rc = GS_OK;
    for (; *p != '\0' && rc == GS_OK; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        if (esc == NULL)
            continue;
        rc = gs_textbuf_append(out, run, (size_t)(p - run));
        if (rc == GS_OK)
            rc = gs_textbuf_append(out, esc, 2);
        run = p + 1;
    }
    if (rc == GS_OK)
        rc = gs_textbuf_append(out, run, (size_t)(p - run));
    return rc;
}

static void put_label(struct writer *w, const char *name, const char *value, bool first)
{
    if (!first)
        put(w, ",", 1);
    puts_(w, name);
    put(w, "=\"", 2);
    if (w->err == GS_OK)
        w->err = gs_exporter_escape_label(w->out, value);
    put(w, "\"", 1);
}

/* ---- attribution ------------------------------------------------------------------------- */

/* Whether id is `base` or `base::<digits>`. */
static bool id_is(const char *id, const char *base)
{
    size_t n = strlen(base);
    if (n == 0 || strncmp(id, base, n) != 0)
        return false;
    if (id[n] == '\0')
        return true;
    if (id[n] != ':' || id[n + 1] != ':' || id[n + 2] == '\0')
        return false;
    return strspn(id + n + 2, "0123456789") == strlen(id + n + 2);
}

/* Whether id names GPU g by index: "nvidia<i>" or "<i>". */
static bool id_is_index(const char *id, uint32_t index)
{
    if (strncmp(id, "nvidia", 6) == 0)
        id += 6;
    if (*id < '0' || *id > '9' || strspn(id, "0123456789") != strlen(id) || strlen(id) > 9)
        return false;
    return (uint32_t)strtoul(id, NULL, 10) == index;
}

/** Where an attribution row goes: NO_GPU, or a GPU position and maybe a MIG device. */
#define NO_GPU UINT32_MAX
struct match {
    uint32_t gpu;   /**< position in snapshot gpus, NO_GPU when unmatched or a repeat */
    int32_t mig;    /**< MIG device index within the GPU, -1 for the whole GPU */
    int32_t leader; /**< a repeat: the row whose series it joins; -1 otherwise */
};

/* n of a replica ID "<base>::<n>", or -1 for an ID that is not one. */
static int32_t replica_of(const char *id)
{
    const char *p = strstr(id, "::");
    if (p == NULL || p[2] == '\0' || strspn(p + 2, "0123456789") != strlen(p + 2) ||
        strlen(p + 2) > 6)
        return -1;
    return (int32_t)strtol(p + 2, NULL, 10);
}

static struct match match_row(const struct gs_exporter_snapshot *s,
                              const struct gs_exporter_attr *a)
{
    struct match m = {NO_GPU, -1, -1};
    for (uint32_t g = 0; g < s->n_gpus; g++) {
        const struct gs_gpu_info *gi = &s->gpus[g].info;
        if (id_is(a->device_id, gi->uuid) || id_is_index(a->device_id, gi->index)) {
            m.gpu = g;
            return m;
        }
        for (uint32_t k = 0; k < gi->mig_count && k < GS_GPU_MIG_MAX; k++) {
            if (id_is(a->device_id, gi->mig[k].uuid)) {
                m.gpu = g;
                m.mig = (int32_t)k;
                return m;
            }
        }
    }
    return m;
}

/* Same pod labels (and MIG profile) as an earlier row of the same GPU. */
static bool same_series(const struct gs_exporter_snapshot *s, const struct match *ma,
                        const struct match *mb, const struct gs_exporter_attr *a,
                        const struct gs_exporter_attr *b)
{
    if (ma->gpu != mb->gpu || strcmp(a->pod, b->pod) != 0 ||
        strcmp(a->namespace_name, b->namespace_name) != 0 ||
        strcmp(a->container, b->container) != 0)
        return false;
    const struct gs_gpu_info *gi = &s->gpus[ma->gpu].info;
    const char *pa = ma->mig >= 0 ? gi->mig[ma->mig].profile : NULL;
    const char *pb = mb->mig >= 0 ? gi->mig[mb->mig].profile : NULL;
    if (pa == NULL || pb == NULL)
        return pa == pb;
    return strcmp(pa, pb) == 0;
}

/* ---- metric families --------------------------------------------------------------------- */

enum value_kind { V_UTIL, V_FB_USED, V_FB_FREE, V_TEMP, V_POWER, V_SM, V_MEM, V_XID, V_ECC };

static const struct family {
    const char *name;
    const char *type;
    const char *help;
    uint32_t need;        /**< gs_gpu_field bit the value needs */
    enum value_kind kind; /**< which value */
} dcgm[] = {
    {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", GS_GPU_HAVE_UTIL, V_UTIL},
    {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", GS_GPU_HAVE_FB,
     V_FB_USED},
    {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", GS_GPU_HAVE_FB,
     V_FB_FREE},
    {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", GS_GPU_HAVE_TEMP, V_TEMP},
    {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", GS_GPU_HAVE_POWER, V_POWER},
    {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", GS_GPU_HAVE_SM_CLOCK, V_SM},
    {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", GS_GPU_HAVE_MEM_CLOCK,
     V_MEM},
    {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", GS_GPU_HAVE_XID,
     V_XID},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
     GS_GPU_HAVE_ECC_DBE, V_ECC},
};

static void put_header(struct writer *w, const char *name, const char *type, const char *help)
{
    put(w, "# HELP ", 7);
    puts_(w, name);
    put(w, " ", 1);
    puts_(w, help); /* constant text without backslash or line feed: nothing to escape */
    put(w, "\n# TYPE ", 8);
    puts_(w, name);
    put(w, " ", 1);
    puts_(w, type);
    put(w, "\n", 1);
}

static void put_gpu_labels(struct writer *w, const struct gs_exporter_snapshot *s,
                           const struct gs_exporter_gpu *g)
{
    char num[16];
    (void)snprintf(num, sizeof num, "%u", (unsigned)g->info.index);
    put_label(w, "gpu", num, true);
    put_label(w, "UUID", g->info.uuid, false);
    char dev[24];
    (void)snprintf(dev, sizeof dev, "nvidia%u", (unsigned)g->info.index);
    put_label(w, "device", dev, false);
    put_label(w, "modelName", g->info.model, false);
    put_label(w, "Hostname", s->hostname, false);
}

static void put_value(struct writer *w, const struct gs_gpu_sample *v, enum value_kind k)
{
    switch (k) {
    case V_UTIL:
        put_u64(w, v->util_pct);
        break;
    case V_FB_USED:
        put_u64(w, v->fb_used_mib);
        break;
    case V_FB_FREE:
        put_u64(w, v->fb_free_mib);
        break;
    case V_TEMP:
        put_i64(w, v->temp_c);
        break;
    case V_POWER:
        put_milli(w, v->power_mw);
        break;
    case V_SM:
        put_u64(w, v->sm_clock_mhz);
        break;
    case V_MEM:
        put_u64(w, v->mem_clock_mhz);
        break;
    case V_XID:
        put_u64(w, v->last_xid);
        break;
    case V_ECC:
        put_u64(w, v->ecc_dbe_vol_total);
        break;
    }
}

/*
 * The label replica="1,3" of a pod series: the replicas ("<id>::<n>") the pod holds on that
 * GPU (or MIG device), ascending; no label when it holds none (a whole GPU, a MIG device).
 */
static void put_replicas(struct writer *w, const struct gs_exporter_snapshot *s,
                         const struct match *rows, uint32_t leader)
{
    char text[256] = "";
    size_t len = 0;
    int32_t last = -1;
    /* Ascending without sorting: the smallest replica above the last one, each round. */
    for (;;) {
        int32_t next = -1;
        for (uint32_t j = leader; j < s->n_attr; j++) {
            if (j != leader && rows[j].leader != (int32_t)leader)
                continue;
            int32_t r = replica_of(s->attr[j].device_id);
            if (r > last && (next < 0 || r < next))
                next = r;
        }
        if (next < 0)
            break;
        int n = snprintf(text + len, sizeof text - len, "%s%d", len > 0 ? "," : "", (int)next);
        if (n < 0 || (size_t)n >= sizeof text - len)
            break;
        len += (size_t)n;
        last = next;
    }
    if (len > 0)
        put_label(w, "replica", text, false);
}

/** The sums of the per-pod values in one scope: a GPU outside MIG instances, or one instance. */
struct scope_sum {
    uint64_t util; /**< Σ of the values' utilisation (their processes') */
    uint64_t mem;  /**< Σ of the values' memory */
    uint32_t n;    /**< values in the scope */
    bool any_util; /**< some value there reports its processes' utilisation */
};

/** Where each per-pod value goes, worked out once per render. */
struct podjoin {
    const struct match *rows;         /**< per attribution row */
    int32_t *row_of;                  /**< per value: the leader row it joins, -1 its own series */
    int32_t *mig_of;                  /**< per value: the MIG device (info.mig position) its
                                           processes ran in, -1 none (the GPU's scope) */
    uint64_t gpu_mem[GS_GPU_MAX];     /**< per GPU: Σ of all its values' memory, MIG ones too */
    struct scope_sum gpu[GS_GPU_MAX]; /**< per GPU, outside MIG instances */
    struct scope_sum mig[GS_GPU_MAX][GS_GPU_MIG_MAX]; /**< per GPU and MIG device */
};

/* Whether value v is measured on GPU g's MIG device mig (-1: the whole GPU, any instance). */
static bool podval_on(const struct gs_exporter_snapshot *s, const struct gs_exporter_podval *v,
                      uint32_t g, int32_t mig)
{
    if (v->gpu != g)
        return false;
    if (mig < 0)
        return true;
    const struct gs_gpu_mig *mg = &s->gpus[g].info.mig[mig];
    return !v->has_gi_id || !mg->has_gi_id || mg->gi_id == v->gi_id;
}

/* Whether value v is the pod of attribution row a (by name: the join of issue 9). */
static bool podval_is(const struct gs_exporter_podval *v, const struct gs_exporter_attr *a)
{
    return v->pod[0] != '\0' && strcmp(v->pod, a->pod) == 0 &&
           strcmp(v->namespace_name, a->namespace_name) == 0 &&
           (v->container[0] == '\0' || strcmp(v->container, a->container) == 0);
}

/* Whether value v counts: its GPU exists and had its processes read. */
static bool podval_live(const struct gs_exporter_snapshot *s, const struct gs_exporter_podval *v)
{
    return v->gpu < s->n_gpus && s->gpus[v->gpu].have_procs && s->gpus[v->gpu].have_sample;
}

/* The MIG device of GPU g that runs GPU instance gi_id, or -1. */
static int32_t mig_of_gi(const struct gs_gpu_info *gi, uint32_t gi_id)
{
    for (uint32_t k = 0; k < gi->mig_count && k < GS_GPU_MIG_MAX; k++)
        if (gi->mig[k].has_gi_id && gi->mig[k].gi_id == gi_id)
            return (int32_t)k;
    return -1;
}

/* The own values of MIG device mig of a GPU this period (by its GPU instance id), or NULL. */
static const struct gs_gpu_mig_sample *mig_values(const struct gs_exporter_gpu *gpu, int32_t mig)
{
    const struct gs_gpu_mig *mg = &gpu->info.mig[mig];
    for (uint32_t i = 0; mg->has_gi_id && i < gpu->n_mig && i < GS_GPU_MIG_MAX; i++)
        if (gpu->mig[i].gi_id == mg->gi_id)
            return &gpu->mig[i];
    return NULL;
}

static void podjoin_build(const struct gs_exporter_snapshot *s, struct podjoin *j)
{
    for (uint32_t k = 0; k < s->n_podval; k++) {
        const struct gs_exporter_podval *v = &s->podval[k];
        j->row_of[k] = -1;
        j->mig_of[k] = -1;
        if (!podval_live(s, v))
            continue;
        for (uint32_t i = 0; i < s->n_attr && j->row_of[k] < 0; i++)
            if (j->rows[i].gpu == v->gpu && podval_on(s, v, v->gpu, j->rows[i].mig) &&
                podval_is(v, &s->attr[i]))
                j->row_of[k] = (int32_t)i;
        if (v->has_gi_id)
            j->mig_of[k] = mig_of_gi(&s->gpus[v->gpu].info, v->gi_id);
        struct scope_sum *sc = j->mig_of[k] >= 0 ? &j->mig[v->gpu][j->mig_of[k]] : &j->gpu[v->gpu];
        sc->n++;
        if (v->has_util) {
            sc->util += v->util_pct;
            sc->any_util = true;
        }
        if (v->has_mem) {
            sc->mem += v->mem_mib;
            j->gpu_mem[v->gpu] += v->mem_mib;
        }
    }
}

/*
 * A pod value bounded so that the GPU's pod values add up to no more than the device's: when
 * the raw total passes the device's value (plus the tolerance, for utilisation), each is scaled
 * by device/total, rounded down.
 */
static uint64_t bounded(uint64_t raw, uint64_t total, uint64_t device, uint64_t tolerance)
{
    if (total <= device + tolerance || total == 0)
        return raw;
    return raw * device / total;
}

/*
 * What value k shows in the utilisation (util) or memory family, bounded by its scope's own
 * device value: the GPU's, or its MIG instance's (see exporter.h). False when it has none.
 */
static bool podval_shown(const struct gs_exporter_snapshot *s, const struct podjoin *j, uint32_t k,
                         bool util, uint64_t *out)
{
    const struct gs_exporter_podval *v = &s->podval[k];
    const struct gs_exporter_gpu *gpu = &s->gpus[v->gpu];
    bool gpu_util = (gpu->sample.valid & GS_GPU_HAVE_UTIL) != 0;
    bool gpu_fb = (gpu->sample.valid & GS_GPU_HAVE_FB) != 0;
    int32_t mig = j->mig_of[k];
    if (!util && !v->has_mem)
        return false;
    if (mig < 0) {
        if (util && (!v->has_util || !gpu_util))
            return false;
        if (!util && !gpu_fb)
            return false;
        *out = util ? bounded(v->util_pct, j->gpu[v->gpu].util, gpu->sample.util_pct,
                              GS_EXPORTER_UTIL_TOLERANCE_PCT)
                    : bounded(v->mem_mib, j->gpu_mem[v->gpu], gpu->sample.fb_used_mib, 0);
        return true;
    }
    const struct scope_sum *sc = &j->mig[v->gpu][mig];
    const struct gs_gpu_mig_sample *own = mig_values(gpu, mig);
    if (!util) {
        if (own != NULL && (own->valid & GS_GPU_HAVE_FB)) {
            *out = bounded(v->mem_mib, sc->mem, own->fb_used_mib, 0);
            return true;
        }
        if (!gpu_fb)
            return false;
        *out = bounded(v->mem_mib, j->gpu_mem[v->gpu], gpu->sample.fb_used_mib, 0);
        return true;
    }
    if (own == NULL || !(own->valid & GS_GPU_HAVE_UTIL))
        return false; /* no GPM: a MIG pod has no utilisation rather than the GPU's */
    if (v->has_util) {
        *out = bounded(v->util_pct, sc->util, own->util_pct, GS_EXPORTER_UTIL_TOLERANCE_PCT);
        return true;
    }
    if (sc->any_util || sc->n != 1)
        return false;     /* several values and no process utilisation: nothing to split by */
    *out = own->util_pct; /* the instance's only value: the instance's own */
    return true;
}

static void put_mig_labels(struct writer *w, const struct gs_gpu_mig *mg)
{
    if (mg->has_gi_id) {
        char id[16];
        (void)snprintf(id, sizeof id, "%u", (unsigned)mg->gi_id);
        put_label(w, "GPU_I_ID", id, false);
    }
    put_label(w, "GPU_I_PROFILE", mg->profile, false);
}

/* The pod series of one GPU for a chargeable family (V_UTIL or V_FB_USED). */
static void render_pods(struct writer *w, const struct gs_exporter_snapshot *s,
                        const struct podjoin *j, uint32_t g, const struct family *fam)
{
    const struct gs_exporter_gpu *gpu = &s->gpus[g];
    bool util = fam->kind == V_UTIL;
    /* Series joined to attribution rows: the pod's values summed over its processes. */
    for (uint32_t i = 0; i < s->n_attr; i++) {
        if (j->rows[i].gpu != g)
            continue;
        uint64_t sum = 0;
        const char *uid = NULL, *cid = NULL;
        bool one_cid = true; /* every joined value names the same container ID */
        for (uint32_t k = 0; k < s->n_podval; k++) {
            uint64_t shown;
            if (j->row_of[k] != (int32_t)i || !podval_shown(s, j, k, util, &shown))
                continue;
            sum += shown;
            if (uid == NULL) {
                uid = s->podval[k].pod_uid;
                cid = s->podval[k].container_id;
            } else if (strcmp(cid, s->podval[k].container_id) != 0) {
                one_cid = false;
            }
        }
        if (uid == NULL)
            continue; /* no process of the pod measured here: no value to show */
        const struct gs_exporter_attr *a = &s->attr[i];
        puts_(w, fam->name);
        put(w, "{", 1);
        put_gpu_labels(w, s, gpu);
        if (j->rows[i].mig >= 0)
            put_mig_labels(w, &gpu->info.mig[j->rows[i].mig]);
        put_label(w, "container", a->container, false);
        put_label(w, "namespace", a->namespace_name, false);
        put_label(w, "pod", a->pod, false);
        /* pod_uid marks a measured value (usage ingest takes it as it is, never splits it). */
        put_label(w, "pod_uid", uid, false);
        if (one_cid)
            put_label(w, "container_id", cid, false);
        put_replicas(w, s, j->rows, i);
        put(w, "} ", 2);
        put_u64(w, sum);
        put(w, "\n", 1);
    }
    /* Values no row claims: labelled by the pod UID (and container ID) of their cgroup. */
    for (uint32_t k = 0; k < s->n_podval; k++) {
        const struct gs_exporter_podval *v = &s->podval[k];
        uint64_t shown;
        if (v->gpu != g || j->row_of[k] >= 0 || !podval_live(s, v) ||
            !podval_shown(s, j, k, util, &shown))
            continue;
        puts_(w, fam->name);
        put(w, "{", 1);
        put_gpu_labels(w, s, gpu);
        if (j->mig_of[k] >= 0)
            put_mig_labels(w, &gpu->info.mig[j->mig_of[k]]);
        if (v->container[0] != '\0')
            put_label(w, "container", v->container, false);
        if (v->namespace_name[0] != '\0')
            put_label(w, "namespace", v->namespace_name, false);
        if (v->pod[0] != '\0')
            put_label(w, "pod", v->pod, false);
        put_label(w, "pod_uid", v->pod_uid, false);
        put_label(w, "container_id", v->container_id, false);
        put(w, "} ", 2);
        put_u64(w, shown);
        put(w, "\n", 1);
    }
}

/* Whether some MIG device of GPU gpu has its own value in a chargeable family. */
static bool mig_has(const struct gs_exporter_gpu *gpu, const struct family *fam)
{
    if (!gpu->have_sample || (fam->kind != V_UTIL && fam->kind != V_FB_USED))
        return false;
    for (uint32_t i = 0; i < gpu->n_mig && i < GS_GPU_MIG_MAX; i++)
        if (gpu->mig[i].valid & fam->need)
            return true;
    return false;
}

/* Whether GPU gpu may have pod series in a family: it had its processes read and the GPU or
 * one of its MIG devices has a value to bound them by. */
static bool pods_possible(const struct gs_exporter_gpu *gpu, const struct family *fam)
{
    if (!gpu->have_sample || !gpu->have_procs || (fam->kind != V_UTIL && fam->kind != V_FB_USED))
        return false;
    return (gpu->sample.valid & fam->need) || mig_has(gpu, fam);
}

/*
 * Each MIG device's own series (dcgm-exporter's GPU_I_ID and GPU_I_PROFILE, no pod labels):
 * the instance's memory used, and its utilisation where the backend has one (GPM).
 */
static void render_migs(struct writer *w, const struct gs_exporter_snapshot *s,
                        const struct gs_exporter_gpu *gpu, const struct family *fam)
{
    for (uint32_t k = 0; k < gpu->info.mig_count && k < GS_GPU_MIG_MAX; k++) {
        const struct gs_gpu_mig_sample *own =
            gpu->info.mig[k].has_gi_id ? mig_values(gpu, (int32_t)k) : NULL;
        if (own == NULL || !(own->valid & fam->need))
            continue;
        puts_(w, fam->name);
        put(w, "{", 1);
        put_gpu_labels(w, s, gpu);
        put_mig_labels(w, &gpu->info.mig[k]);
        put(w, "} ", 2);
        put_u64(w, fam->kind == V_UTIL ? own->util_pct : own->fb_used_mib);
        put(w, "\n", 1);
    }
}

static void render_dcgm(struct writer *w, const struct gs_exporter_snapshot *s,
                        const struct podjoin *j)
{
    for (size_t f = 0; f < sizeof dcgm / sizeof dcgm[0]; f++) {
        bool header = false;
        for (uint32_t g = 0; g < s->n_gpus; g++) {
            const struct gs_exporter_gpu *gpu = &s->gpus[g];
            bool own = gpu->have_sample && (gpu->sample.valid & dcgm[f].need);
            bool migs = mig_has(gpu, &dcgm[f]);
            bool pods = pods_possible(gpu, &dcgm[f]);
            if (!own && !migs && !pods)
                continue;
            if (!header) {
                put_header(w, dcgm[f].name, dcgm[f].type, dcgm[f].help);
                header = true;
            }
            /* The device's own series always, pods or not: device-only values (power,
             * clocks, temperature) belong there, and a shared GPU keeps it (issue 9). */
            if (own) {
                puts_(w, dcgm[f].name);
                put(w, "{", 1);
                put_gpu_labels(w, s, gpu);
                put(w, "} ", 2);
                put_value(w, &gpu->sample, dcgm[f].kind);
                put(w, "\n", 1);
            }
            if (migs)
                render_migs(w, s, gpu, &dcgm[f]);
            /* Pods only where they have a value of their own: never the device's copied. */
            if (pods)
                render_pods(w, s, j, g, &dcgm[f]);
        }
    }
}

/*
 * Who holds each GPU, as kubelet's PodResources says: one info series (value 1) per pod, with
 * the labels a DCGM pod series had before issue 9. It carries no measurement, so nothing is
 * copied; the pods' own values are in the DCGM series (by pod, or by pod_uid).
 */
static void render_pod_info(struct writer *w, const struct gs_exporter_snapshot *s,
                            const struct match *rows)
{
    bool header = false;
    for (uint32_t i = 0; i < s->n_attr; i++) {
        if (rows[i].gpu == NO_GPU)
            continue;
        if (!header) {
            put_header(w, "gpusched_gpu_pod_info", "gauge",
                       "1 for each pod kubelet reports holding the GPU (PodResources), with its "
                       "replicas and MIG device; its usage is in the DCGM series.");
            header = true;
        }
        const struct gs_exporter_gpu *gpu = &s->gpus[rows[i].gpu];
        const struct gs_exporter_attr *a = &s->attr[i];
        puts_(w, "gpusched_gpu_pod_info{");
        put_gpu_labels(w, s, gpu);
        if (rows[i].mig >= 0)
            put_mig_labels(w, &gpu->info.mig[rows[i].mig]);
        put_label(w, "container", a->container, false);
        put_label(w, "namespace", a->namespace_name, false);
        put_label(w, "pod", a->pod, false);
        put_replicas(w, s, rows, i);
        puts_(w, "} 1\n");
    }
}

static void render_own(struct writer *w, const struct gs_exporter_snapshot *s)
{
    bool any = false;
    for (uint32_t g = 0; g < s->n_gpus; g++)
        any |= s->gpus[g].have_health;
    if (!any)
        return;

    put_header(w, "gpusched_gpu_health", "gauge",
               "1 when the GPU is Healthy, 0 when Unhealthy (the state kubelet is told); "
               "reason: none, xid, ecc_dbe or lost.");
    for (uint32_t g = 0; g < s->n_gpus; g++) {
        const struct gs_exporter_gpu *gpu = &s->gpus[g];
        if (!gpu->have_health)
            continue;
        puts_(w, "gpusched_gpu_health{");
        put_gpu_labels(w, s, gpu);
        put_label(w, "reason",
                  gs_health_reason_name(gpu->health == GS_HEALTH_HEALTHY ? 0 : gpu->health_reason),
                  false);
        puts_(w, gpu->health == GS_HEALTH_HEALTHY ? "} 1\n" : "} 0\n");
    }

    put_header(w, "gpusched_gpu_reset_required", "gauge",
               "1 while the GPU is Unhealthy until it is seen reset or an operator clears it.");
    for (uint32_t g = 0; g < s->n_gpus; g++) {
        const struct gs_exporter_gpu *gpu = &s->gpus[g];
        if (!gpu->have_health)
            continue;
        puts_(w, "gpusched_gpu_reset_required{");
        put_gpu_labels(w, s, gpu);
        puts_(w, gpu->health != GS_HEALTH_HEALTHY && gpu->needs_reset ? "} 1\n" : "} 0\n");
    }

    put_header(w, "gpusched_gpu_xid_total", "counter",
               "XID errors seen on the GPU, by XID code, ignored (application) XIDs included.");
    for (uint32_t g = 0; g < s->n_gpus; g++) {
        const struct gs_exporter_gpu *gpu = &s->gpus[g];
        if (!gpu->have_health)
            continue;
        const struct gs_health_counters *c = &gpu->counters;
        for (uint32_t k = 0; k < c->n_xid && k < GS_HEALTH_XID_CODES_MAX; k++) {
            char code[24];
            (void)snprintf(code, sizeof code, "%llu", (unsigned long long)c->xid[k].xid);
            puts_(w, "gpusched_gpu_xid_total{");
            put_gpu_labels(w, s, gpu);
            put_label(w, "xid", code, false);
            put(w, "} ", 2);
            put_u64(w, c->xid[k].count);
            put(w, "\n", 1);
        }
        if (c->xid_other > 0) {
            puts_(w, "gpusched_gpu_xid_total{");
            put_gpu_labels(w, s, gpu);
            put_label(w, "xid", "other", false);
            put(w, "} ", 2);
            put_u64(w, c->xid_other);
            put(w, "\n", 1);
        }
    }

    put_header(w, "gpusched_gpu_health_transitions_total", "counter",
               "Health transitions of the GPU, by the state entered.");
    for (uint32_t g = 0; g < s->n_gpus; g++) {
        const struct gs_exporter_gpu *gpu = &s->gpus[g];
        if (!gpu->have_health)
            continue;
        for (int to = 0; to < 2; to++) {
            puts_(w, "gpusched_gpu_health_transitions_total{");
            put_gpu_labels(w, s, gpu);
            put_label(w, "to", to == 0 ? "unhealthy" : "healthy", false);
            put(w, "} ", 2);
            put_u64(w, to == 0 ? gpu->counters.to_unhealthy : gpu->counters.recoveries);
            put(w, "\n", 1);
        }
    }
}

/* The agent's counters of following the scheduler's assignments (a Kubernetes side only). */
static void render_assign(struct writer *w, const struct gs_exporter_snapshot *s)
{
    if (!s->have_assign)
        return;
    put_header(w, "gpusched_assignment_allocations_total", "counter",
               "Allocate calls of pods with a gpusched assignment, by whether kubelet allocated "
               "the assigned GPUs.");
    puts_(w, "gpusched_assignment_allocations_total{");
    put_label(w, "Hostname", s->hostname, true);
    put_label(w, "outcome", "as_assigned", false);
    put(w, "} ", 2);
    put_u64(w, s->assign_as_assigned);
    put(w, "\n", 1);
    puts_(w, "gpusched_assignment_allocations_total{");
    put_label(w, "Hostname", s->hostname, true);
    put_label(w, "outcome", "mismatch", false);
    put(w, "} ", 2);
    put_u64(w, s->assign_mismatch);
    put(w, "\n", 1);
    put_header(w, "gpusched_assignment_preferred_fallbacks_total", "counter",
               "GetPreferredAllocation answers that could not propose the assigned GPUs.");
    puts_(w, "gpusched_assignment_preferred_fallbacks_total{");
    put_label(w, "Hostname", s->hostname, true);
    put(w, "} ", 2);
    put_u64(w, s->assign_fallbacks);
    put(w, "\n", 1);
}

int gs_exporter_render(const struct gs_exporter_snapshot *s, struct gs_textbuf *out)
{
    if (s == NULL || out == NULL || s->n_gpus > GS_GPU_MAX || s->n_attr > GS_EXPORTER_ATTR_MAX ||
        s->n_podval > GS_EXPORTER_PODVAL_MAX || (s->n_gpus > 0 && s->gpus == NULL) ||
        (s->n_attr > 0 && s->attr == NULL) || (s->n_podval > 0 && s->podval == NULL))
        return GS_EINVAL;
    struct match *rows = malloc((s->n_attr > 0 ? s->n_attr : 1) * sizeof *rows);
    size_t n_val = s->n_podval > 0 ? s->n_podval : 1;
    int32_t *row_of = malloc(2 * n_val * sizeof *row_of);
    struct podjoin *join = calloc(1, sizeof *join); /* 33 KiB of sums: not on the stack */
    int rc = GS_ENOMEM;
    if (rows == NULL || row_of == NULL || join == NULL)
        goto out;
    join->rows = rows;
    join->row_of = row_of;
    join->mig_of = row_of + n_val;
    for (uint32_t i = 0; i < s->n_attr; i++) {
        rows[i] = match_row(s, &s->attr[i]);
        if (rows[i].gpu == NO_GPU)
            continue;
        /* Rows of one GPU are few; a repeat of an earlier (GPU, pod) gives no new series. */
        for (uint32_t j = 0; j < i && rows[i].gpu != NO_GPU; j++)
            if (rows[j].gpu != NO_GPU &&
                same_series(s, &rows[i], &rows[j], &s->attr[i], &s->attr[j])) {
                rows[i].gpu = NO_GPU;
                rows[i].leader = (int32_t)j;
            }
    }
    podjoin_build(s, join);
    struct writer w = {.out = out, .err = GS_OK};
    render_dcgm(&w, s, join);
    render_pod_info(&w, s, rows);
    render_own(&w, s);
    render_assign(&w, s);
    rc = w.err;
out:
    free(rows);
    free(row_of);
    free(join);
    return rc;
}
