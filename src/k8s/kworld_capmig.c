/*
 * MIG read from a Node's capacity when its agent published no inventory (internal contract in
 * kworld_capmig.h): the device plugin's `nvidia.com/mig-<profile>` counts packed back onto the
 * fewest GPUs whose layouts the hardware allows, and the single strategy's MIG devices as whole
 * devices.
 *
 * The packing is exact, not greedy. The distinct layouts one GPU can hold (as instance counts
 * per profile, only of the profiles asked) are enumerated from the geometry table; then
 * f(v) = 1 + min f(v - L) over layouts L <= v is the fewest GPUs that hold exactly the counts v,
 * memoized over the states v. Each packing has some GPU holding an instance of the first profile
 * v still needs, so only layouts with one are tried first: every packing is found once, in one
 * order, and the first minimum in layout order is the answer, the same on every run. Profiles
 * are taken largest first (most compute slices), since few layouts hold a large one, and a
 * state that needs more GPUs than there are by a lower bound is cut (bench/bench_capmig).
 */
#include "kworld_capmig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kquantity.h"
#include "kworld_xres.h"

#define MIG_PREFIX "nvidia.com/mig-"
#define GPU_RES "nvidia.com/gpu"
#define F_UNKNOWN 255
#define F_NONE 254

/* One distinct per-GPU layout: its instances, and their counts per profile. */
struct layout {
    uint8_t n;
    struct gs_mig_instance in[GS_MIG_INSTANCES_MAX];
    uint8_t count[GS_MIG_PROFILES_MAX];
};

struct cand {
    uint8_t profile, start;
    uint32_t mem_mask;
};

struct search {
    const struct gs__kcap_counts *want;
    const struct gs_mig_model *m;
    struct cand cand[GS_MIG_PROFILES_MAX * GS_MIG_STARTS_MAX];
    uint32_t n_cand;
    struct layout *lay;
    uint32_t n_lay;
    bool too_many;
    /* The DP over states: mixed radix over the profiles, radix want->n[p] + 1. */
    uint64_t radix[GS_MIG_PROFILES_MAX];
    uint8_t *f;                       /* GPUs for the state, F_UNKNOWN or F_NONE */
    uint16_t *choice;                 /* the layout taken first from the state */
    uint32_t max_gpus;                /* a state needing more is no use: F_NONE */
    uint8_t ord[GS_MIG_PROFILES_MAX]; /* profiles asked, most compute slices first */
    uint32_t n_ord;
    /* The layouts holding profile p, in enumeration order: with[p][0..n_with[p]). */
    uint16_t *with[GS_MIG_PROFILES_MAX];
    uint32_t n_with[GS_MIG_PROFILES_MAX];
};

/* Adds the current set as a layout unless its counts are known already. */
static void record(struct search *s, const struct layout *cur)
{
    for (uint32_t i = 0; i < s->n_lay; i++)
        if (memcmp(s->lay[i].count, cur->count, sizeof cur->count) == 0)
            return;
    if (gs_mig_layout_check(s->m, cur->in, cur->n, NULL, 0) != GS_OK)
        return; /* never: the walk keeps memory runs disjoint and counts within bounds */
    if (s->n_lay == GS_KCAP_LAYOUTS_MAX) {
        s->too_many = true;
        return;
    }
    s->lay[s->n_lay++] = *cur;
}

/* Every set of candidates from index i on added to cur whose memory runs are disjoint. */
static void walk(struct search *s, uint32_t i, struct layout *cur, uint32_t mem, uint32_t compute)
{
    if (cur->n > 0)
        record(s, cur);
    if (cur->n == GS_MIG_INSTANCES_MAX || s->too_many)
        return;
    for (uint32_t c = i; c < s->n_cand; c++) {
        const struct cand *k = &s->cand[c];
        const struct gs_mig_profile *pr = &s->m->profiles[k->profile];
        if ((k->mem_mask & mem) != 0 || compute + pr->compute_slices > s->m->compute_slices ||
            cur->count[k->profile] >= pr->max_count ||
            cur->count[k->profile] >= s->want->n[k->profile])
            continue;
        cur->in[cur->n++] = (struct gs_mig_instance){k->profile, k->start};
        cur->count[k->profile]++;
        walk(s, c + 1, cur, mem | k->mem_mask, compute + pr->compute_slices);
        cur->count[k->profile]--;
        cur->n--;
    }
}

static uint64_t state_of(const struct search *s, const uint16_t *v)
{
    uint64_t x = 0;
    for (int p = GS_MIG_PROFILES_MAX - 1; p >= 0; p--)
        x = x * s->radix[p] + v[p];
    return x;
}

/* GPUs v needs at least: its compute and memory slices, and each profile's most per GPU. */
static uint32_t lower_bound(const struct search *s, const uint16_t *v)
{
    uint32_t compute = 0, mem = 0, lb = 0;
    for (uint32_t i = 0; i < s->n_ord; i++) {
        const struct gs_mig_profile *pr = &s->m->profiles[s->ord[i]];
        uint32_t n = v[s->ord[i]], per = (n + pr->max_count - 1) / pr->max_count;
        compute += n * pr->compute_slices;
        mem += n * pr->mem_slices;
        lb = per > lb ? per : lb;
    }
    uint32_t c = (compute + s->m->compute_slices - 1) / s->m->compute_slices;
    uint32_t m = (mem + s->m->mem_slices - 1) / s->m->mem_slices;
    lb = c > lb ? c : lb;
    return m > lb ? m : lb;
}

/*
 * Fewest GPUs holding exactly v, memoized; F_NONE when more than max_gpus (such a state is in
 * no packing that fits, so cutting it loses none). The first profile in `ord` that v still
 * needs is on some GPU of every packing: only layouts holding it are tried, so each packing is
 * found in one order. Depth: one level per GPU.
 */
static uint8_t solve(struct search *s, uint16_t *v)
{
    uint64_t x = state_of(s, v);
    if (s->f[x] != F_UNKNOWN)
        return s->f[x];
    int first = -1;
    for (uint32_t i = 0; i < s->n_ord && first < 0; i++)
        if (v[s->ord[i]] > 0)
            first = s->ord[i];
    if (first < 0)
        return s->f[x] = 0;
    if (lower_bound(s, v) > s->max_gpus)
        return s->f[x] = F_NONE;
    uint8_t best = F_NONE;
    for (uint32_t j = 0; j < s->n_with[first]; j++) {
        uint32_t i = s->with[first][j];
        const struct layout *l = &s->lay[i];
        bool fits = true;
        for (int p = 0; p < GS_MIG_PROFILES_MAX && fits; p++)
            fits = l->count[p] <= v[p];
        if (!fits)
            continue;
        for (int p = 0; p < GS_MIG_PROFILES_MAX; p++)
            v[p] = (uint16_t)(v[p] - l->count[p]);
        uint8_t r = solve(s, v);
        for (int p = 0; p < GS_MIG_PROFILES_MAX; p++)
            v[p] = (uint16_t)(v[p] + l->count[p]);
        if (r != F_NONE && r + 1 < best && r + 1u <= s->max_gpus) {
            best = (uint8_t)(r + 1);
            s->choice[x] = (uint16_t)i;
        }
    }
    return s->f[x] = best;
}

static int cmp_start(const void *a, const void *b)
{
    const struct gs_mig_instance *x = a, *y = b;
    return (int)x->start - (int)y->start;
}

int gs__kcap_pack(const struct gs__kcap_counts *want, uint32_t max_gpus,
                  struct gs_gpu_mode layouts[GS_NODE_GPUS_MAX], uint32_t *n_gpus)
{
    *n_gpus = 0;
    if (!want || !want->model)
        return GS_EINVAL;
    const struct gs_mig_model *m = want->model;
    if (max_gpus > GS_NODE_GPUS_MAX)
        max_gpus = GS_NODE_GPUS_MAX;
    struct search s;
    memset(&s, 0, sizeof s);
    s.want = want;
    s.m = m;
    s.max_gpus = max_gpus;
    for (uint32_t p = 0; p < m->n_profiles && p < GS_MIG_PROFILES_MAX; p++) {
        if (want->n[p] == 0)
            continue;
        /* Insertion by compute slices, then memory slices, descending; ties by index. */
        uint32_t i = s.n_ord++;
        for (; i > 0; i--) {
            const struct gs_mig_profile *a = &m->profiles[s.ord[i - 1]], *b = &m->profiles[p];
            if (a->compute_slices > b->compute_slices ||
                (a->compute_slices == b->compute_slices && a->mem_slices >= b->mem_slices))
                break;
            s.ord[i] = s.ord[i - 1];
        }
        s.ord[i] = (uint8_t)p;
    }
    uint64_t total = 0, states = 1;
    for (uint32_t p = 0; p < GS_MIG_PROFILES_MAX; p++) {
        if (want->n[p] > 0 && p >= m->n_profiles)
            return GS_ENOENT;
        total += want->n[p];
        s.radix[p] = (uint64_t)want->n[p] + 1;
        if (states <= GS_KCAP_STATES_MAX)
            states *= s.radix[p];
    }
    if (total == 0)
        return GS_OK;
    /* More instances than the GPUs could hold at best: no search needed (and none too deep). */
    if (total > (uint64_t)max_gpus * GS_MIG_INSTANCES_MAX)
        return GS_ENOENT;
    if (states > GS_KCAP_STATES_MAX)
        return GS_ELIMIT;
    for (uint32_t p = 0; p < m->n_profiles; p++) {
        if (want->n[p] == 0)
            continue;
        const struct gs_mig_profile *pr = &m->profiles[p];
        for (uint32_t j = 0; j < pr->n_starts; j++) {
            struct gs_mig_instance in = {(uint8_t)p, pr->starts[j]};
            s.cand[s.n_cand++] = (struct cand){(uint8_t)p, pr->starts[j], gs_mig_mem_mask(m, in)};
        }
    }
    int rc = GS_ENOMEM;
    s.lay = malloc(sizeof(*s.lay) * GS_KCAP_LAYOUTS_MAX);
    s.f = malloc((size_t)states);
    s.choice = malloc(sizeof(*s.choice) * (size_t)states);
    if (!s.lay || !s.f || !s.choice)
        goto out;
    memset(s.f, F_UNKNOWN, (size_t)states);
    struct layout cur;
    memset(&cur, 0, sizeof cur);
    walk(&s, 0, &cur, 0, 0);
    rc = GS_ELIMIT;
    if (s.too_many)
        goto out;
    rc = GS_ENOMEM;
    for (uint32_t p = 0; p < GS_MIG_PROFILES_MAX; p++) {
        if (want->n[p] == 0)
            continue;
        if (!(s.with[p] = malloc(sizeof(*s.with[p]) * s.n_lay)))
            goto out;
        for (uint32_t i = 0; i < s.n_lay; i++)
            if (s.lay[i].count[p] > 0)
                s.with[p][s.n_with[p]++] = (uint16_t)i;
    }
    uint16_t v[GS_MIG_PROFILES_MAX];
    memcpy(v, want->n, sizeof v);
    uint8_t k = solve(&s, v);
    rc = GS_ENOENT;
    if (k == F_NONE || k > max_gpus)
        goto out;
    for (uint32_t g = 0; g < k; g++) {
        const struct layout *l = &s.lay[s.choice[state_of(&s, v)]];
        struct gs_gpu_mode *md = &layouts[g];
        memset(md, 0, sizeof *md);
        md->sharing = GS_GPU_SHARE_MIG;
        md->replicas = 1;
        md->mig_count = l->n;
        memcpy(md->mig, l->in, sizeof(l->in[0]) * l->n);
        qsort(md->mig, md->mig_count, sizeof md->mig[0], cmp_start);
        for (int p = 0; p < GS_MIG_PROFILES_MAX; p++)
            v[p] = (uint16_t)(v[p] - l->count[p]);
    }
    *n_gpus = k;
    rc = GS_OK;
out:
    free(s.lay);
    free(s.f);
    free(s.choice);
    for (uint32_t p = 0; p < GS_MIG_PROFILES_MAX; p++)
        free(s.with[p]);
    return rc;
}

/* ---- reading a Node -------------------------------------------------------------------- */

static const char *label(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

bool gs__kcap_single(const json_t *obj)
{
    const char *s = label(obj, GS_KCAP_STRATEGY);
    return s && strcmp(s, "single") == 0;
}

/* Says `text` once per node and text ("" forgets the last one). */
static int say(struct gs__kinv *k, const char *name, const char *text,
               void (*warn)(void *ctx, const char *msg), void *ctx)
{
    if (!text[0]) {
        (void)json_object_del(k->cap_warned, name);
        return GS_OK;
    }
    const char *last = json_string_value(json_object_get(k->cap_warned, name));
    if (last && strcmp(last, text) == 0)
        return GS_OK;
    if (json_object_set_new(k->cap_warned, name, json_string(text)) != 0)
        return GS_ENOMEM;
    if (warn)
        warn(ctx, text);
    return GS_OK;
}

/* A count of status map `m` (capacity or allocatable) for key, or -1 when not a count. */
static int64_t count_of(const json_t *m, const char *key)
{
    int64_t q = 0;
    const json_t *v = json_object_get(m, key);
    if (!v)
        return 0;
    return gs__kquantity_json(v, 1.0, false, &q) == 0 ? q : -1;
}

static uint32_t single_devices(const json_t *obj, const char *name, uint32_t whole,
                               uint32_t whole_alloc, struct gs_gpu_mode *modes, bool *usable,
                               char *text, size_t cap)
{
    const json_t *st = json_object_get(obj, "status");
    const json_t *capy = json_object_get(st, "capacity");
    int64_t raw = count_of(capy ? capy : json_object_get(st, "allocatable"), GPU_RES);
    if (raw > GS_NODE_GPUS_MAX)
        (void)snprintf(text, cap,
                       "node %s: %lld MIG devices (nvidia.com/gpu with %s single), more than the "
                       "%d a node holds here; %d are used",
                       name, (long long)raw, GS_KCAP_STRATEGY, GS_NODE_GPUS_MAX, GS_NODE_GPUS_MAX);
    for (uint32_t g = 0; g < whole; g++) {
        /* A MIG device is handed out whole by the device plugin: no fraction lands on it. */
        modes[g] = (struct gs_gpu_mode){.sharing = GS_GPU_SHARE_WHOLE, .replicas = 1};
        usable[g] = g < whole_alloc;
    }
    return whole;
}

int gs__kcap_read(struct gs__kinv *k, const json_t *obj, const char *name, const char *product,
                  uint32_t whole, uint32_t whole_alloc, const struct gs_gpu_mode *whole_mode,
                  struct gs_gpu_mode modes[GS_NODE_GPUS_MAX], bool usable[GS_NODE_GPUS_MAX],
                  uint32_t *n, bool *set_modes, void (*warn)(void *ctx, const char *msg), void *ctx)
{
    char text[600] = "";
    if (whole > GS_NODE_GPUS_MAX)
        whole = GS_NODE_GPUS_MAX;
    if (whole_alloc > whole)
        whole_alloc = whole;
    *n = whole;
    for (uint32_t g = 0; g < whole; g++) {
        modes[g] = *whole_mode;
        usable[g] = g < whole_alloc;
    }
    if (gs__kcap_single(obj) && whole > 0) {
        *n = single_devices(obj, name, whole, whole_alloc, modes, usable, text, sizeof text);
        *set_modes = true;
        return say(k, name, text, warn, ctx);
    }
    const json_t *st = json_object_get(obj, "status");
    const json_t *capy = json_object_get(st, "capacity");
    const json_t *alloc = json_object_get(st, "allocatable");
    if (!capy)
        capy = alloc;
    if (!alloc)
        alloc = capy;
    const struct gs_mig_model *mm = gs_mig_model_find(product);
    struct gs__kcap_counts want;
    memset(&want, 0, sizeof want);
    want.model = mm;
    int64_t have_alloc[GS_MIG_PROFILES_MAX] = {0};
    char list[300] = ""; /* "nvidia.com/mig-1g.10gb: 7, ..." for the warning */
    size_t len = 0;
    bool any = false;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)capy, key, val)
    {
        if (strncmp(key, MIG_PREFIX, strlen(MIG_PREFIX)) != 0)
            continue;
        int64_t c = count_of(capy, key), a = count_of(alloc, key);
        if (c == 0)
            continue;
        any = true;
        if (text[0])
            continue; /* the first fault is the one said */
        const char *prof = key + strlen(MIG_PREFIX);
        int p = gs_mig_profile_find(mm, prof);
        if (c < 0 || a < 0)
            (void)snprintf(text, sizeof text,
                           "node %s: status %s is not a count; its MIG capacity is unusable", name,
                           key);
        else if (!mm)
            (void)snprintf(text, sizeof text,
                           "node %s: %s: GPU model %s is not in the MIG table; its MIG capacity "
                           "is unusable",
                           name, key, product ? product : "(no nvidia.com/gpu.product label)");
        else if (p < 0)
            (void)snprintf(text, sizeof text,
                           "node %s: %s: %s is not a MIG profile of %s; its MIG capacity is "
                           "unusable",
                           name, key, prof, mm->name);
        else if (c > UINT16_MAX)
            (void)snprintf(text, sizeof text,
                           "node %s: %s: %lld instances; its MIG capacity is unusable", name, key,
                           (long long)c);
        else {
            want.n[p] = (uint16_t)c;
            have_alloc[p] = a;
            int w = snprintf(list + len, sizeof list - len, "%s%s: %lld", len ? ", " : "", key,
                             (long long)c);
            if (w > 0 && (size_t)w < sizeof list - len)
                len += (size_t)w;
        }
    }
    if (!any)
        return say(k, name, "", warn, ctx); /* not a MIG node: read as before */
    /* The physical GPUs: label nvidia.com/gpu.count when GFD wrote one, else what it takes. */
    int64_t count = 0;
    const char *cl = label(obj, "nvidia.com/gpu.count");
    if (!cl || gs_kquantity(cl, 1.0, false, &count) != 0 || count < 0)
        count = 0;
    uint32_t room = GS_NODE_GPUS_MAX - whole;
    if (count > 0)
        room = count > (int64_t)whole ? (uint32_t)(count - whole) : 0;
    if (room > GS_NODE_GPUS_MAX - whole)
        room = GS_NODE_GPUS_MAX - whole;
    struct gs_gpu_mode mig[GS_NODE_GPUS_MAX];
    uint32_t k_mig = 0;
    if (!text[0] && mm) { /* no model said so in text already */
        int rc = gs__kcap_pack(&want, room, mig, &k_mig);
        if (rc == GS_ENOMEM)
            return rc;
        if (rc == GS_ENOENT)
            (void)snprintf(text, sizeof text,
                           "node %s: %s fit no MIG layouts of %s on the %u GPU(s) beside the %u "
                           "without MIG; its MIG capacity is unusable",
                           name, list, mm->name, (unsigned)room, (unsigned)whole);
        else if (rc != GS_OK)
            (void)snprintf(text, sizeof text,
                           "node %s: %s: too many ways to lay them out to search; its MIG "
                           "capacity is unusable",
                           name, list);
    }
    if (text[0])
        k_mig = 0;
    for (uint32_t g = 0; g < k_mig; g++) {
        modes[whole + g] = mig[g];
        usable[whole + g] = true;
    }
    uint32_t total = whole + k_mig;
    if (k_mig > 0 && count > (int64_t)total) {
        /* MIG GPUs whose instances the packing put on others: there, nothing to place on. */
        for (; total < (uint32_t)count && total < GS_NODE_GPUS_MAX; total++) {
            modes[total] = (struct gs_gpu_mode){.sharing = GS_GPU_SHARE_WHOLE, .replicas = 1};
            usable[total] = false;
        }
    }
    /* Allocatable below capacity: the MIG GPUs holding the profile go, highest index first. */
    for (uint32_t p = 0; p < GS_MIG_PROFILES_MAX && k_mig > 0; p++) {
        int64_t here[GS_NODE_GPUS_MAX] = {0}, live = 0;
        for (uint32_t g = whole; g < whole + k_mig; g++) {
            for (uint32_t i = 0; i < modes[g].mig_count; i++)
                here[g] += modes[g].mig[i].profile == p;
            live += usable[g] ? here[g] : 0; /* an earlier profile may have taken the GPU */
        }
        for (uint32_t g = whole + k_mig; g-- > whole && live > have_alloc[p];) {
            if (here[g] > 0 && usable[g]) {
                usable[g] = false;
                live -= here[g];
            }
        }
    }
    *n = total;
    *set_modes = *set_modes || k_mig > 0;
    return say(k, name, text, warn, ctx);
}
