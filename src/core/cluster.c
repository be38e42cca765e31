/*
 * The cluster model: node storage, GPU model interning, the feasibility filter and binding.
 *
 * Nodes live in one growable array of slots; a removed node leaves a free slot that the next
 * added node reuses (a stack of free indices), with the slot's incarnation bumped so that node
 * handles never resolve to the wrong node. A small open-addressing index over the names finds a
 * node and catches duplicates at O(1). What pods hold is kept as `_used` amounts; binding,
 * unbinding, capacity and health changes recompute a node's derived members (free values, the
 * descending free list, clustering tags) and bump its generation, the single signal every
 * per-node cache in the core keys on.
 */
#include "gpusched/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"
#include "gpusched/err.h"

static uint64_t hash_str(const char *s)
{
    /* FNV-1a, 64 bit. */
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = gs__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int gs_cluster_new(struct gs_cluster **out)
{
    *out = gs__calloc(1, sizeof(**out));
    if (!*out)
        return GS_ENOMEM;
    (*out)->next_gen = 1;
    int err = gs__filter_init(*out);
    if (err) {
        gs__free(*out);
        *out = NULL;
    }
    return err;
}

static void node_release_strings(struct gs_node *n)
{
    gs__free(n->name);
    n->name = NULL;
    for (uint32_t l = 0; l < n->label_count; l++)
        gs__free(n->labels[l]);
    gs__free(n->labels);
    n->labels = NULL;
    n->label_count = 0;
    for (uint32_t t = 0; t < n->taint_count; t++) {
        gs__free(n->taints[t].key);
        gs__free(n->taints[t].value);
    }
    gs__free(n->taints);
    n->taints = NULL;
    n->taint_count = 0;
    gs__free(n->xres);
    n->xres = NULL;
    n->xres_count = 0;
}

void gs_cluster_free(struct gs_cluster *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->nodes_len; i++)
        node_release_strings(&c->nodes[i]);
    gs__filter_fini(c);
    gs__free(c->free_slots);
    for (uint32_t m = 0; m < c->models_len; m++)
        gs__free(c->models[m]);
    gs__xres_names_free(c);
    gs__free(c->nodes);
    gs__free(c->fit);
    gs__free(c->name_index);
    gs__free(c);
}

int gs_cluster_model_find(const struct gs_cluster *c, const char *name)
{
    for (uint32_t m = 0; m < c->models_len; m++)
        if (strcmp(c->models[m], name) == 0)
            return (int)m;
    return -1;
}

int gs_cluster_model_id(struct gs_cluster *c, const char *name, uint32_t *id)
{
    if (!name || !*name)
        return GS_EINVAL;
    int found = gs_cluster_model_find(c, name);
    if (found >= 0) {
        *id = (uint32_t)found;
        return GS_OK;
    }
    if (c->models_len == GS_MODELS_MAX)
        return GS_ELIMIT;
    char *copy = dup_str(name);
    if (!copy)
        return GS_ENOMEM;
    c->models[c->models_len] = copy;
    *id = c->models_len++;
    return GS_OK;
}

const char *gs_cluster_model_name(const struct gs_cluster *c, uint32_t id)
{
    return id < c->models_len ? c->models[id] : NULL;
}

uint64_t gs_cluster_model_mask(const struct gs_cluster *c, const char *spec, size_t len)
{
    if (!spec)
        return GS_MODEL_ANY;
    uint64_t mask = 0;
    bool any_part = false;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && spec[i] != '|')
            continue;
        size_t plen = i - start;
        if (plen > 0) {
            any_part = true;
            for (uint32_t m = 0; m < c->models_len; m++)
                if (strlen(c->models[m]) == plen && memcmp(c->models[m], spec + start, plen) == 0)
                    mask |= UINT64_C(1) << m;
        }
        start = i + 1;
    }
    return any_part ? mask : GS_MODEL_ANY;
}

static uint32_t *index_slot(const struct gs_cluster *c, const char *name)
{
    uint32_t mask = c->name_index_cap - 1;
    uint32_t i = (uint32_t)hash_str(name) & mask;
    for (;;) {
        uint32_t v = c->name_index[i];
        if (v == 0 || strcmp(c->nodes[v - 1].name, name) == 0)
            return &c->name_index[i];
        i = (i + 1) & mask;
    }
}

static int index_grow(struct gs_cluster *c)
{
    uint32_t cap = c->name_index_cap ? c->name_index_cap * 2 : 64;
    uint32_t *idx = gs__calloc(cap, sizeof(*idx));
    if (!idx)
        return GS_ENOMEM;
    gs__free(c->name_index);
    c->name_index = idx;
    c->name_index_cap = cap;
    for (uint32_t n = 0; n < c->nodes_len; n++)
        if (c->nodes[n].present)
            *index_slot(c, c->nodes[n].name) = n + 1;
    return GS_OK;
}

/* Deletes a name from the linear-probing index by backward shift (no tombstones). */
static void index_delete(struct gs_cluster *c, const char *name)
{
    uint32_t mask = c->name_index_cap - 1;
    uint32_t *slot = index_slot(c, name);
    uint32_t hole = (uint32_t)(slot - c->name_index);
    if (*slot == 0)
        return;
    c->name_index[hole] = 0;
    for (uint32_t j = (hole + 1) & mask; c->name_index[j] != 0; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)hash_str(c->nodes[c->name_index[j] - 1].name) & mask;
        /* Move entry j into the hole when its home does not lie cyclically in (hole, j]. */
        bool in_range = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            c->name_index[hole] = c->name_index[j];
            c->name_index[j] = 0;
            hole = j;
        }
    }
}

static int64_t max0(int64_t v)
{
    return v > 0 ? v : 0;
}

/* Recomputes the derived members of a node and gives it a new generation. */
static void node_refresh(struct gs_cluster *c, struct gs_node *n)
{
    int32_t total = 0;
    uint32_t full = 0, healthy = 0;
    uint8_t flags = 0;
    n->cpu_milli_free = max0(n->cpu_milli - n->cpu_milli_used);
    n->mem_mib_free = max0(n->mem_mib - n->mem_mib_used);
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        struct gs_gpu *gpu = &n->gpus[g];
        gpu->gpu_milli_free = gs__gpu_milli_open(gpu);
        gpu->mem_mib_free = max0(gpu->mem_mib - gpu->mem_mib_used);
        healthy += gpu->healthy;
        int32_t f = gpu->gpu_milli_free;
        total += f;
        /* Free for a whole-GPU pod: nothing held (for a milli-only GPU, milli used 0). */
        if (f == gpu->gpu_milli && f > 0)
            full++;
        if (gpu->sharing == GS_GPU_SHARE_WHOLE)
            flags |= GS_FIT_HAS_WHOLE;
        else if (gpu->healthy && gpu->sharing == GS_GPU_SHARE_TIMESLICE)
            flags |= GS_FIT_HAS_TIMESLICE;
        else if (gpu->healthy && gpu->sharing == GS_GPU_SHARE_MIG)
            flags |= GS_FIT_HAS_MIG;
        else if (gpu->healthy && gpu->sharing == GS_GPU_SHARE_MILLI && gpu->mem_mib > 0)
            flags |= GS_FIT_HAS_MEM;
        /* Insertion into the descending list: at most 16 entries. */
        uint32_t k = g;
        while (k > 0 && n->gpu_free_desc[k - 1] < f) {
            n->gpu_free_desc[k] = n->gpu_free_desc[k - 1];
            k--;
        }
        n->gpu_free_desc[k] = f;
    }
    n->share_flags = flags;
    n->gpu_milli_free_total = total;
    n->gpus_full_free = full;
    n->healthy_gpus = healthy;
    gs__node_bump(c, n);
    struct gs_node_fit *f = &c->fit[n - c->nodes];
    memset(f, 0, sizeof(*f));
    if (!n->present)
        return; /* pods_left 0: nothing fits a free slot */
    f->cpu_milli_free = n->cpu_milli_free;
    f->mem_mib_free = n->mem_mib_free;
    f->pods_left = n->pods_max - n->pods;
    f->model_id = (uint16_t)n->model_id;
    f->gpu_count = (uint8_t)n->gpu_count;
    f->share_flags = flags;
    for (uint32_t g = 0; g < n->gpu_count; g++)
        f->gpu_free_desc[g] = (int16_t)n->gpu_free_desc[g];
    f->gpu_milli_free_total = total;
    f->gpus_full_free = full;
}

const struct gs_node_fit *gs_cluster_fit_array(const struct gs_cluster *c)
{
    return c->fit;
}

static int grow_slots(struct gs_cluster *c)
{
    uint32_t cap = c->nodes_cap ? c->nodes_cap * 2 : 64;
    struct gs_node *nodes = gs__realloc(c->nodes, (size_t)cap * sizeof(*nodes));
    if (!nodes)
        return GS_ENOMEM;
    c->nodes = nodes;
    struct gs_node_fit *fit = gs__realloc(c->fit, (size_t)cap * sizeof(*fit));
    if (!fit)
        return GS_ENOMEM;
    c->fit = fit;
    uint32_t *fs = gs__realloc(c->free_slots, (size_t)cap * sizeof(*fs));
    if (!fs)
        return GS_ENOMEM;
    c->free_slots = fs;
    int err = gs__filter_reserve(c, cap);
    if (err)
        return err;
    c->nodes_cap = cap;
    return GS_OK;
}

int gs_cluster_add_node(struct gs_cluster *c, const struct gs_node_spec *spec, uint32_t *id)
{
    if (!spec->name || !*spec->name || spec->cpu_milli < 0 || spec->mem_mib < 0 ||
        spec->pods_max < 1 || spec->gpu_count > GS_NODE_GPUS_MAX || spec->gpu_mem_mib < 0)
        return GS_EINVAL;
    if (spec->gpu_count > 0 && (!spec->gpu_model || !*spec->gpu_model))
        return GS_EINVAL;
    const struct gs_mig_model *mig_models[GS_NODE_GPUS_MAX] = {0};
    for (uint32_t g = 0; spec->gpu_modes && g < spec->gpu_count; g++)
        if (gs__gpu_mode_check(spec->gpu_model, &spec->gpu_modes[g], &mig_models[g], NULL, 0))
            return GS_EINVAL;
    if (c->name_index_cap && *index_slot(c, spec->name) != 0)
        return GS_EEXIST;
    if (c->free_len == 0 && c->nodes_len == c->nodes_cap) {
        int err = grow_slots(c);
        if (err)
            return err;
    }
    if ((c->nodes_len + 1) * 2 > c->name_index_cap) {
        int err = index_grow(c);
        if (err)
            return err;
    }
    uint32_t model = 0;
    uint32_t models_before = c->models_len;
    if (spec->gpu_count > 0) {
        int err = gs_cluster_model_id(c, spec->gpu_model, &model);
        if (err)
            return err;
    }
    char *name = dup_str(spec->name);
    if (!name) {
        if (c->models_len > models_before)
            gs__free(c->models[--c->models_len]);
        return GS_ENOMEM;
    }
    bool reused = c->free_len > 0;
    uint32_t idx = reused ? c->free_slots[--c->free_len] : c->nodes_len++;
    struct gs_node *n = &c->nodes[idx];
    uint32_t incarnation = reused ? n->incarnation : 0;
    memset(n, 0, sizeof(*n));
    n->incarnation = incarnation + 1;
    n->present = true;
    n->name = name;
    n->model_id = model;
    n->cpu_milli = spec->cpu_milli;
    n->mem_mib = spec->mem_mib;
    n->pods_max = spec->pods_max;
    n->gpu_count = spec->gpu_count;
    for (uint32_t g = 0; g < spec->gpu_count; g++) {
        struct gs_gpu *gpu = &n->gpus[g];
        gpu->gpu_milli = GS_GPU_MILLI;
        gpu->healthy = true;
        gpu->mem_mib = gpu->mem_mib_free = spec->gpu_mem_mib;
        gpu->sharing = GS_GPU_SHARE_MILLI;
        gpu->replicas = 1;
        if (spec->gpu_modes)
            gs__gpu_mode_apply(gpu, &spec->gpu_modes[g], mig_models[g]);
    }
    node_refresh(c, n);
    *index_slot(c, name) = idx + 1;
    c->gpu_count += spec->gpu_count;
    c->nodes_present++;
    c->capacity_gen++;
    gs__filter_node_changed(c, idx, false);
    if (id)
        *id = idx;
    return GS_OK;
}

static struct gs_node *node_at(struct gs_cluster *c, uint32_t i)
{
    return i < c->nodes_len && c->nodes[i].present ? &c->nodes[i] : NULL;
}

int gs_cluster_remove_node(struct gs_cluster *c, uint32_t i)
{
    struct gs_node *n = node_at(c, i);
    if (!n)
        return GS_EINVAL;
    if (n->pods > 0)
        return GS_EEXIST;
    bool had_prefer = gs__node_has_prefer_taint(n);
    index_delete(c, n->name);
    c->gpu_count -= n->gpu_count;
    uint32_t incarnation = n->incarnation;
    node_release_strings(n);
    memset(n, 0, sizeof(*n));
    n->incarnation = incarnation;
    node_refresh(c, n);
    c->free_slots[c->free_len++] = i;
    c->nodes_present--;
    c->capacity_gen++;
    gs__filter_node_changed(c, i, had_prefer);
    return GS_OK;
}

int gs_cluster_update_node(struct gs_cluster *c, uint32_t i, const struct gs_node_update *u)
{
    struct gs_node *n = node_at(c, i);
    if (!n || u->cpu_milli < 0 || u->mem_mib < 0 || u->pods_max < 1 ||
        u->gpu_count > GS_NODE_GPUS_MAX || u->gpu_mem_mib < 0)
        return GS_EINVAL;
    for (uint32_t g = u->gpu_count; g < n->gpu_count; g++)
        if (n->gpus[g].pods > 0)
            return GS_EINVAL;
    uint32_t model = n->model_id;
    if (u->gpu_count > 0 && u->gpu_model) {
        int found = gs_cluster_model_find(c, u->gpu_model);
        if (found < 0 || (uint32_t)found != n->model_id || n->gpu_count == 0) {
            if (n->gpu_pods > 0)
                return GS_EINVAL;
            int err = gs_cluster_model_id(c, u->gpu_model, &model);
            if (err)
                return err;
        }
    } else if (u->gpu_count > 0 && n->gpu_count == 0) {
        return GS_EINVAL; /* GPUs appear: they need a model */
    }
    for (uint32_t g = n->gpu_count; g < u->gpu_count; g++) {
        struct gs_gpu *gpu = &n->gpus[g];
        memset(gpu, 0, sizeof(*gpu));
        gpu->gpu_milli = GS_GPU_MILLI;
        gpu->healthy = true;
        gpu->mem_mib = gpu->mem_mib_free = u->gpu_mem_mib;
        gpu->sharing = GS_GPU_SHARE_MILLI;
        gpu->replicas = 1;
    }
    if (model != n->model_id) {
        /* A MIG layout belongs to the old model's geometry: those GPUs go back to fractions
         * (none holds a pod: the model changes only then) until their mode is set again. */
        struct gs_gpu_mode frac = {.sharing = GS_GPU_SHARE_MILLI};
        for (uint32_t g = 0; g < n->gpu_count && g < u->gpu_count; g++)
            if (n->gpus[g].sharing == GS_GPU_SHARE_MIG)
                gs__gpu_mode_apply(&n->gpus[g], &frac, NULL);
    }
    /* Links to and from GPUs that go are dropped; added GPUs have none until told. */
    uint16_t keep = (uint16_t)((1u << u->gpu_count) - 1u);
    bool linked = false;
    for (uint32_t g = 0; g < GS_NODE_GPUS_MAX; g++) {
        n->nvlink[g] = g < u->gpu_count ? (uint16_t)(n->nvlink[g] & keep) : 0;
        linked = linked || n->nvlink[g] != 0;
    }
    n->has_nvlink = linked;
    c->gpu_count = c->gpu_count - n->gpu_count + u->gpu_count;
    n->gpu_count = u->gpu_count;
    n->model_id = model;
    n->cpu_milli = u->cpu_milli;
    n->mem_mib = u->mem_mib;
    n->pods_max = u->pods_max;
    node_refresh(c, n);
    c->capacity_gen++;
    return GS_OK;
}

int gs_cluster_set_nvlink(struct gs_cluster *c, uint32_t i, const uint16_t *peers, uint32_t n)
{
    struct gs_node *node = node_at(c, i);
    if (!node || (n != 0 && n != node->gpu_count) || (n > 0 && !peers))
        return GS_EINVAL;
    uint16_t all = (uint16_t)((1u << node->gpu_count) - 1u);
    uint16_t sym[GS_NODE_GPUS_MAX] = {0};
    for (uint32_t g = 0; g < n; g++) {
        if ((peers[g] & ~all) || (peers[g] >> g & 1u))
            return GS_EINVAL;
        sym[g] = (uint16_t)(sym[g] | peers[g]);
        for (uint32_t j = 0; j < n; j++)
            if (peers[g] >> j & 1u)
                sym[j] = (uint16_t)(sym[j] | (1u << g));
    }
    bool same = true, linked = false;
    for (uint32_t g = 0; g < GS_NODE_GPUS_MAX; g++) {
        same = same && node->nvlink[g] == sym[g];
        linked = linked || sym[g] != 0;
    }
    if (same)
        return GS_OK;
    for (uint32_t g = 0; g < GS_NODE_GPUS_MAX; g++)
        node->nvlink[g] = sym[g];
    node->has_nvlink = linked;
    gs__node_bump(c, node);
    return GS_OK;
}

int gs_cluster_set_unschedulable(struct gs_cluster *c, uint32_t i, bool unschedulable)
{
    struct gs_node *n = node_at(c, i);
    if (!n)
        return GS_EINVAL;
    if (n->unschedulable == unschedulable)
        return GS_OK;
    n->unschedulable = unschedulable;
    gs__node_bump(c, n);
    gs__filter_node_changed(c, i, gs__node_has_prefer_taint(n));
    return GS_OK;
}

int gs_cluster_set_gpu_health(struct gs_cluster *c, uint32_t i, uint32_t gpu, bool healthy)
{
    struct gs_node *n = node_at(c, i);
    if (!n || gpu >= n->gpu_count)
        return GS_EINVAL;
    if (n->gpus[gpu].healthy == healthy)
        return GS_OK;
    n->gpus[gpu].healthy = healthy;
    node_refresh(c, n);
    c->capacity_gen++;
    return GS_OK;
}

int gs_cluster_set_gpu_mode(struct gs_cluster *c, uint32_t i, uint32_t gpu,
                            const struct gs_gpu_mode *mode, char *reason, size_t cap)
{
    if (reason && cap)
        reason[0] = '\0';
    struct gs_node *n = node_at(c, i);
    if (!n || gpu >= n->gpu_count || !mode)
        return GS_EINVAL;
    if (n->gpus[gpu].pods > 0) {
        if (reason && cap)
            (void)snprintf(reason, cap, "GPU %u holds %u pod(s): its mode changes only when free",
                           gpu, n->gpus[gpu].pods);
        return GS_EINVAL;
    }
    const struct gs_mig_model *mig_model;
    int err =
        gs__gpu_mode_check(gs_cluster_model_name(c, n->model_id), mode, &mig_model, reason, cap);
    if (err)
        return err;
    gs__gpu_mode_apply(&n->gpus[gpu], mode, mig_model);
    node_refresh(c, n);
    c->capacity_gen++; /* what a pending pod is charged (charge.h) may depend on the mode */
    return GS_OK;
}

int gs_cluster_set_mig_layout(struct gs_cluster *c, uint32_t i, uint32_t gpu,
                              const struct gs_mig_instance *layout, uint32_t n, char *reason,
                              size_t cap)
{
    if (reason && cap)
        reason[0] = '\0';
    struct gs_node *node = node_at(c, i);
    if (!node || gpu >= node->gpu_count || (n > 0 && !layout))
        return GS_EINVAL;
    struct gs_gpu *g = &node->gpus[gpu];
    if (g->sharing != GS_GPU_SHARE_MIG || !g->mig_model) {
        if (reason && cap)
            (void)snprintf(reason, cap, "GPU %u is not in MIG mode", gpu);
        return GS_EINVAL;
    }
    if (n < 1 || n > GS_MIG_INSTANCES_MAX) {
        if (reason && cap)
            (void)snprintf(reason, cap, "%u instances: a MIG layout has 1 to %u", n,
                           GS_MIG_INSTANCES_MAX);
        return GS_EINVAL;
    }
    int err = gs_mig_layout_check(g->mig_model, layout, n, reason, cap);
    if (err)
        return err;
    /* The new layout by ascending start (the pick's order), each marked held when a pod holds
     * the same instance now. */
    struct gs_mig_instance sorted[GS_MIG_INSTANCES_MAX];
    uint32_t held_new = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t j = k;
        while (j > 0 && sorted[j - 1].start > layout[k].start) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = layout[k];
    }
    for (uint32_t h = 0; h < g->mig_count; h++) {
        if (!(g->mig_held >> h & 1))
            continue;
        bool kept = false;
        for (uint32_t k = 0; k < n && !kept; k++)
            if (sorted[k].profile == g->mig[h].profile && sorted[k].start == g->mig[h].start) {
                held_new |= UINT32_C(1) << k;
                kept = true;
            }
        if (!kept) {
            if (reason && cap)
                (void)snprintf(reason, cap,
                               "instance %s at %u is held by a pod and not in the new layout",
                               g->mig_model->profiles[g->mig[h].profile].name, g->mig[h].start);
            return GS_EINVAL;
        }
    }
    memset(g->mig, 0, sizeof(g->mig));
    memcpy(g->mig, sorted, sizeof(sorted[0]) * n);
    g->mig_count = (uint8_t)n;
    g->mig_held = (uint8_t)held_new;
    uint32_t slices = 0;
    for (uint32_t k = 0; k < n; k++)
        if (held_new >> k & 1)
            slices |= gs_mig_compute_mask(g->mig_model, sorted[k]);
    g->mig_slices_used = (uint8_t)slices;
    node_refresh(c, node);
    return GS_OK;
}

int gs_cluster_set_taints(struct gs_cluster *c, uint32_t i, const struct gs_taint *taints,
                          uint32_t count)
{
    struct gs_node *n = node_at(c, i);
    if (!n || (count && !taints))
        return GS_EINVAL;
    for (uint32_t t = 0; t < count; t++)
        if (!taints[t].key || !*taints[t].key || taints[t].effect < GS_TAINT_NO_SCHEDULE ||
            taints[t].effect > GS_TAINT_NO_EXECUTE)
            return GS_EINVAL;
    struct gs_taint *copy = count ? gs__calloc(count, sizeof(*copy)) : NULL;
    if (count && !copy)
        return GS_ENOMEM;
    for (uint32_t t = 0; t < count; t++) {
        copy[t].key = dup_str(taints[t].key);
        copy[t].value = dup_str(taints[t].value ? taints[t].value : "");
        copy[t].effect = taints[t].effect;
        if (!copy[t].key || !copy[t].value) {
            for (uint32_t k = 0; k <= t; k++) {
                gs__free(copy[k].key);
                gs__free(copy[k].value);
            }
            gs__free(copy);
            return GS_ENOMEM;
        }
    }
    bool had_prefer = gs__node_has_prefer_taint(n);
    for (uint32_t t = 0; t < n->taint_count; t++) {
        gs__free(n->taints[t].key);
        gs__free(n->taints[t].value);
    }
    gs__free(n->taints);
    n->taints = copy;
    n->taint_count = count;
    gs__node_bump(c, n);
    gs__filter_node_changed(c, i, had_prefer);
    return GS_OK;
}

static char *kv_make(const char *key, const char *value)
{
    size_t klen = strlen(key), vlen = strlen(value);
    char *kv = gs__malloc(klen + vlen + 2);
    if (!kv)
        return NULL;
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): the value's copy brings the NUL */
    memcpy(kv, key, klen);
    kv[klen] = '=';
    memcpy(kv + klen + 1, value, vlen + 1);
    return kv;
}

int gs_cluster_set_label(struct gs_cluster *c, uint32_t node, const char *key, const char *value)
{
    struct gs_node *n = node_at(c, node);
    if (!n || !key || !*key || !value || strchr(key, '='))
        return GS_EINVAL;
    size_t klen = strlen(key);
    char *kv = kv_make(key, value);
    if (!kv)
        return GS_ENOMEM;
    bool replaced = false;
    for (uint32_t l = 0; l < n->label_count && !replaced; l++) {
        if (strncmp(n->labels[l], key, klen) == 0 && n->labels[l][klen] == '=') {
            gs__free(n->labels[l]);
            n->labels[l] = kv;
            replaced = true;
        }
    }
    if (!replaced) {
        char **labels = gs__realloc(n->labels, (n->label_count + 1) * sizeof(*labels));
        if (!labels) {
            gs__free(kv);
            return GS_ENOMEM;
        }
        n->labels = labels;
        n->labels[n->label_count++] = kv;
    }
    gs__node_bump(c, n);
    gs__filter_node_changed(c, node, gs__node_has_prefer_taint(n));
    return GS_OK;
}

int gs_cluster_set_labels(struct gs_cluster *c, uint32_t i, const char *const *kv, uint32_t count)
{
    struct gs_node *n = node_at(c, i);
    if (!n || (count && !kv))
        return GS_EINVAL;
    for (uint32_t l = 0; l < count; l++)
        if (!kv[l] || kv[l][0] == '=' || !strchr(kv[l], '='))
            return GS_EINVAL;
    char **labels = count ? gs__calloc(count, sizeof(*labels)) : NULL;
    if (count && !labels)
        return GS_ENOMEM;
    for (uint32_t l = 0; l < count; l++) {
        if (!(labels[l] = dup_str(kv[l]))) {
            for (uint32_t k = 0; k < l; k++)
                gs__free(labels[k]);
            gs__free(labels);
            return GS_ENOMEM;
        }
    }
    for (uint32_t l = 0; l < n->label_count; l++)
        gs__free(n->labels[l]);
    gs__free(n->labels);
    n->labels = labels;
    n->label_count = count;
    gs__node_bump(c, n);
    gs__filter_node_changed(c, i, gs__node_has_prefer_taint(n));
    return GS_OK;
}

const char *gs_node_label(const struct gs_node *n, const char *key)
{
    size_t klen = strlen(key);
    for (uint32_t l = 0; l < n->label_count; l++)
        if (strncmp(n->labels[l], key, klen) == 0 && n->labels[l][klen] == '=')
            return n->labels[l] + klen + 1;
    return NULL;
}

uint32_t gs_cluster_node_count(const struct gs_cluster *c)
{
    return c->nodes_len;
}

uint32_t gs_cluster_nodes_present(const struct gs_cluster *c)
{
    return c->nodes_present;
}

const struct gs_node *gs_cluster_node(const struct gs_cluster *c, uint32_t i)
{
    return i < c->nodes_len ? &c->nodes[i] : NULL;
}

int gs_cluster_find_node(const struct gs_cluster *c, const char *name)
{
    if (!name || !c->name_index_cap)
        return -1;
    uint32_t v = *index_slot(c, name);
    return v ? (int)(v - 1) : -1;
}

uint64_t gs_cluster_node_handle(const struct gs_cluster *c, uint32_t i)
{
    uint32_t inc = i < c->nodes_len ? c->nodes[i].incarnation : 0;
    return (uint64_t)inc << 32 | i;
}

int gs_cluster_node_resolve(const struct gs_cluster *c, uint64_t handle, uint32_t *index)
{
    uint32_t i = (uint32_t)handle;
    if (i >= c->nodes_len || !c->nodes[i].present || c->nodes[i].incarnation != handle >> 32)
        return GS_ENOENT;
    *index = i;
    return GS_OK;
}

void gs_cluster_capacity(const struct gs_cluster *c, int64_t *cpu_milli, int64_t *mem_mib,
                         int64_t *gpu_milli)
{
    int64_t cpu = 0, mem = 0, gpu = 0;
    for (uint32_t i = 0; i < c->nodes_len; i++) {
        const struct gs_node *n = &c->nodes[i];
        if (!n->present)
            continue;
        cpu += n->cpu_milli;
        mem += n->mem_mib;
        gpu += (int64_t)n->healthy_gpus * GS_GPU_MILLI;
    }
    *cpu_milli = cpu;
    *mem_mib = mem;
    *gpu_milli = gpu;
}

uint64_t gs_cluster_changes(const struct gs_cluster *c)
{
    return c->next_gen;
}

uint64_t gs_cluster_refreshes(const struct gs_cluster *c)
{
    return c->refreshes;
}

bool gs_cluster_refreshed_node(const struct gs_cluster *c, uint64_t k, uint32_t *node)
{
    return gs__journal_at(c, k, node);
}

uint64_t gs_cluster_capacity_gen(const struct gs_cluster *c)
{
    return c->capacity_gen;
}

uint32_t gs_cluster_gpu_count(const struct gs_cluster *c)
{
    return c->gpu_count;
}

int64_t gs_cluster_gpu_milli_used(const struct gs_cluster *c)
{
    return c->gpu_milli_used;
}

bool gs_node_fits(const struct gs_node *n, const struct gs_pod_req *req)
{
    if (gs_req_kind(req) != GS_REQ_MILLI)
        return gs__share_fits(n, req);
    if (!n->present || req->cpu_milli > n->cpu_milli_free || req->mem_mib > n->mem_mib_free ||
        n->pods >= n->pods_max)
        return false;
    if (req->num_gpu == 0)
        return gs_node_xres_fits(n, req);
    if (req->num_gpu > n->gpu_count)
        return false;
    if (req->gpu_model_mask != GS_MODEL_ANY &&
        (n->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << n->model_id))))
        return false;
    /* A fraction goes only to a fractions GPU: with whole-mode GPUs on the node, look. */
    if (req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI && (n->share_flags & GS_FIT_HAS_WHOLE))
        return gs__share_fits(n, req);
    /* The num_gpu-th largest free value decides whether num_gpu GPUs can each give gpu_milli. */
    return n->gpu_free_desc[req->num_gpu - 1] >= req->gpu_milli && gs_node_xres_fits(n, req);
}

bool gs_pod_req_equal(const struct gs_pod_req *a, const struct gs_pod_req *b)
{
    if (a->cpu_milli != b->cpu_milli || a->mem_mib != b->mem_mib || a->num_gpu != b->num_gpu ||
        a->gpu_milli != b->gpu_milli || a->gpu_model_mask != b->gpu_model_mask ||
        a->xres_count != b->xres_count || a->gpu_mem_mib != b->gpu_mem_mib ||
        a->gpu_mem_pct != b->gpu_mem_pct || a->timeslice_slots != b->timeslice_slots ||
        a->mig_count != b->mig_count ||
        strncmp(a->mig_profile, b->mig_profile, sizeof(a->mig_profile)) != 0)
        return false;
    for (uint32_t r = 0; r < a->xres_count && r < GS_POD_XRES_MAX; r++)
        if (a->xres[r].id != b->xres[r].id || a->xres[r].qty != b->xres[r].qty)
            return false;
    return true;
}

int gs_req_tag(const struct gs_pod_req *req)
{
    enum gs_req_kind kind = gs_req_kind(req);
    if (kind == GS_REQ_TIMESLICE || kind == GS_REQ_MIG)
        return GS_TAG_SHARE;
    if (kind == GS_REQ_MEMORY)
        return req->num_gpu == 1 ? GS_TAG_SHARE : (int)req->num_gpu;
    if (req->num_gpu == 0)
        return -1;
    if (req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI)
        return GS_TAG_SHARE;
    return (int)req->num_gpu;
}

static void apply(struct gs_cluster *c, struct gs_node *n, const struct gs_pod_req *req,
                  const struct gs_placement *pl, int sign)
{
    n->cpu_milli_used += sign * req->cpu_milli;
    n->mem_mib_used += sign * req->mem_mib;
    n->pods += sign;
    gs__xres_apply(n, req, sign);
    c->gpu_milli_used += gs__share_apply(n, req, pl, sign);
    int tag = gs_req_tag(req);
    if (tag >= 0) {
        n->gpu_pods = (uint32_t)((int32_t)n->gpu_pods + sign);
        n->tag_count[tag] = (uint32_t)((int32_t)n->tag_count[tag] + sign);
    }
    node_refresh(c, n);
}

int gs_cluster_bind(struct gs_cluster *c, const struct gs_pod_req *req,
                    const struct gs_placement *pl)
{
    struct gs_node *n = node_at(c, pl->node);
    if (!n || !gs__xres_req_valid(c, req) || !gs_node_fits(n, req) ||
        !gs__share_valid(n, req, pl, GS__BIND_NEW))
        return GS_EINVAL;
    apply(c, n, req, pl, +1);
    return GS_OK;
}

int gs_cluster_adopt(struct gs_cluster *c, const struct gs_pod_req *req,
                     const struct gs_placement *pl)
{
    struct gs_node *n = node_at(c, pl->node);
    if (!n || req->cpu_milli < 0 || req->mem_mib < 0 || req->num_gpu > n->gpu_count ||
        n->pods == INT32_MAX || !gs__xres_req_valid(c, req) ||
        !gs__share_valid(n, req, pl, GS__BIND_ADOPT))
        return GS_EINVAL;
    int err = gs__xres_reserve(n, req);
    if (err)
        return err;
    apply(c, n, req, pl, +1);
    return GS_OK;
}

int gs_cluster_unbind(struct gs_cluster *c, const struct gs_pod_req *req,
                      const struct gs_placement *pl)
{
    struct gs_node *n = node_at(c, pl->node);
    if (!n)
        return GS_EINVAL;
    int tag = gs_req_tag(req);
    if (n->pods == 0 || n->cpu_milli_used < req->cpu_milli || n->mem_mib_used < req->mem_mib ||
        !gs__share_valid(n, req, pl, GS__BIND_RELEASE) || (tag >= 0 && n->tag_count[tag] == 0) ||
        !gs__xres_req_valid(c, req) || !gs__xres_release_ok(n, req))
        return GS_EINVAL;
    apply(c, n, req, pl, -1);
    return GS_OK;
}
