/*
 * The cluster model: node storage, GPU model interning, the feasibility filter and binding.
 *
 * Nodes live in one growable array; a small open-addressing index over their names catches
 * duplicates at O(1). Binding and unbinding recompute a node's derived members (free totals, the
 * descending free list, clustering tags) and bump its generation, the single signal every
 * per-node cache in the core keys on.
 */
#include "gpusched/cluster.h"

#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"

struct gs_cluster {
    struct gs_node *nodes;   /* node array, nodes_len used of nodes_cap */
    struct gs_node_fit *fit; /* packed filter view, same indices and capacity */
    uint32_t nodes_len;
    uint32_t nodes_cap;
    uint32_t *name_index;    /* open addressing: node index + 1, 0 = empty; name_index_cap slots */
    uint32_t name_index_cap; /* power of two, at least twice nodes_len */
    char *models[GS_MODELS_MAX]; /* model names by id, owned */
    uint32_t models_len;
    uint32_t gpu_count;     /* sum of node gpu_count */
    int64_t gpu_milli_used; /* sum over GPUs of gpu_milli - gpu_milli_free */
    uint64_t next_gen;      /* source of node generations */
};

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
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int gs_cluster_new(struct gs_cluster **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return GS_ENOMEM;
    (*out)->next_gen = 1;
    return GS_OK;
}

void gs_cluster_free(struct gs_cluster *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->nodes_len; i++) {
        free(c->nodes[i].name);
        for (uint32_t l = 0; l < c->nodes[i].label_count; l++)
            free(c->nodes[i].labels[l]);
        free(c->nodes[i].labels);
    }
    for (uint32_t m = 0; m < c->models_len; m++)
        free(c->models[m]);
    free(c->nodes);
    free(c->fit);
    free(c->name_index);
    free(c);
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
    uint32_t *idx = calloc(cap, sizeof(*idx));
    if (!idx)
        return GS_ENOMEM;
    free(c->name_index);
    c->name_index = idx;
    c->name_index_cap = cap;
    for (uint32_t n = 0; n < c->nodes_len; n++)
        *index_slot(c, c->nodes[n].name) = n + 1;
    return GS_OK;
}

/* Recomputes the derived members of a node and gives it a new generation. */
static void node_refresh(struct gs_cluster *c, struct gs_node *n)
{
    int32_t total = 0;
    uint32_t full = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        int32_t f = n->gpus[g].gpu_milli_free;
        total += f;
        if (f == n->gpus[g].gpu_milli)
            full++;
        /* Insertion into the descending list: at most 16 entries. */
        uint32_t k = g;
        while (k > 0 && n->gpu_free_desc[k - 1] < f) {
            n->gpu_free_desc[k] = n->gpu_free_desc[k - 1];
            k--;
        }
        n->gpu_free_desc[k] = f;
    }
    n->gpu_milli_free_total = total;
    n->gpus_full_free = full;
    n->gen = c->next_gen++;
    struct gs_node_fit *f = &c->fit[n - c->nodes];
    memset(f, 0, sizeof(*f));
    f->cpu_milli_free = n->cpu_milli_free;
    f->mem_mib_free = n->mem_mib_free;
    f->pods_left = n->pods_max - n->pods;
    f->model_id = (uint16_t)n->model_id;
    f->gpu_count = (uint16_t)n->gpu_count;
    for (uint32_t g = 0; g < n->gpu_count; g++)
        f->gpu_free_desc[g] = (int16_t)n->gpu_free_desc[g];
    f->gpu_milli_free_total = total;
    f->gpus_full_free = full;
}

const struct gs_node_fit *gs_cluster_fit_array(const struct gs_cluster *c)
{
    return c->fit;
}

int gs_cluster_add_node(struct gs_cluster *c, const struct gs_node_spec *spec, uint32_t *id)
{
    if (!spec->name || !*spec->name || spec->cpu_milli < 0 || spec->mem_mib < 0 ||
        spec->pods_max < 1 || spec->gpu_count > GS_NODE_GPUS_MAX || spec->gpu_mem_mib < 0)
        return GS_EINVAL;
    if (spec->gpu_count > 0 && (!spec->gpu_model || !*spec->gpu_model))
        return GS_EINVAL;
    if (c->name_index_cap && *index_slot(c, spec->name) != 0)
        return GS_EEXIST;
    if (c->nodes_len == c->nodes_cap) {
        uint32_t cap = c->nodes_cap ? c->nodes_cap * 2 : 64;
        struct gs_node *nodes = realloc(c->nodes, (size_t)cap * sizeof(*nodes));
        if (!nodes)
            return GS_ENOMEM;
        c->nodes = nodes;
        struct gs_node_fit *fit = realloc(c->fit, (size_t)cap * sizeof(*fit));
        if (!fit)
            return GS_ENOMEM;
        c->fit = fit;
        c->nodes_cap = cap;
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
            free(c->models[--c->models_len]);
        return GS_ENOMEM;
    }
    struct gs_node *n = &c->nodes[c->nodes_len];
    memset(n, 0, sizeof(*n));
    n->name = name;
    n->model_id = model;
    n->cpu_milli = n->cpu_milli_free = spec->cpu_milli;
    n->mem_mib = n->mem_mib_free = spec->mem_mib;
    n->pods_max = spec->pods_max;
    n->gpu_count = spec->gpu_count;
    for (uint32_t g = 0; g < spec->gpu_count; g++) {
        struct gs_gpu *gpu = &n->gpus[g];
        gpu->gpu_milli = gpu->gpu_milli_free = GS_GPU_MILLI;
        gpu->mem_mib = gpu->mem_mib_free = spec->gpu_mem_mib;
        gpu->sharing = GS_GPU_SHARE_MILLI;
        gpu->replicas = 1;
    }
    node_refresh(c, n);
    *index_slot(c, name) = c->nodes_len + 1;
    c->gpu_count += spec->gpu_count;
    if (id)
        *id = c->nodes_len;
    c->nodes_len++;
    return GS_OK;
}

int gs_cluster_set_label(struct gs_cluster *c, uint32_t node, const char *key, const char *value)
{
    if (node >= c->nodes_len || !key || !*key || !value || strchr(key, '='))
        return GS_EINVAL;
    struct gs_node *n = &c->nodes[node];
    size_t klen = strlen(key), vlen = strlen(value);
    char *kv = malloc(klen + vlen + 2);
    if (!kv)
        return GS_ENOMEM;
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): the value brings its NUL */
    memcpy(kv, key, klen);
    kv[klen] = '=';
    memcpy(kv + klen + 1, value, vlen + 1);
    for (uint32_t l = 0; l < n->label_count; l++) {
        if (strncmp(n->labels[l], key, klen) == 0 && n->labels[l][klen] == '=') {
            free(n->labels[l]);
            n->labels[l] = kv;
            n->gen = c->next_gen++;
            return GS_OK;
        }
    }
    char **labels = realloc(n->labels, (n->label_count + 1) * sizeof(*labels));
    if (!labels) {
        free(kv);
        return GS_ENOMEM;
    }
    n->labels = labels;
    n->labels[n->label_count++] = kv;
    n->gen = c->next_gen++;
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

const struct gs_node *gs_cluster_node(const struct gs_cluster *c, uint32_t i)
{
    return i < c->nodes_len ? &c->nodes[i] : NULL;
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
    if (req->cpu_milli > n->cpu_milli_free || req->mem_mib > n->mem_mib_free ||
        n->pods >= n->pods_max)
        return false;
    if (req->num_gpu == 0)
        return true;
    if (req->num_gpu > n->gpu_count)
        return false;
    if (req->gpu_model_mask != GS_MODEL_ANY &&
        (n->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << n->model_id))))
        return false;
    /* The num_gpu-th largest free value decides whether num_gpu GPUs can each give gpu_milli. */
    return n->gpu_free_desc[req->num_gpu - 1] >= req->gpu_milli;
}

int gs_req_tag(const struct gs_pod_req *req)
{
    if (req->num_gpu == 0)
        return -1;
    if (req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI)
        return GS_TAG_SHARE;
    return (int)req->num_gpu;
}

/* Checks the GPU half of a placement: sign +1 binds, -1 releases. */
static bool placement_valid(const struct gs_node *n, const struct gs_pod_req *req,
                            const struct gs_placement *pl, int sign)
{
    if (pl->num_gpu != req->num_gpu || (req->num_gpu && pl->gpu_milli != req->gpu_milli))
        return false;
    if (req->num_gpu && (req->gpu_milli <= 0 || req->gpu_milli > GS_GPU_MILLI))
        return false;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        uint32_t g = pl->gpu_index[i];
        if (g >= n->gpu_count || (seen & (1u << g)))
            return false;
        seen |= 1u << g;
        const struct gs_gpu *gpu = &n->gpus[g];
        if (sign > 0 && gpu->gpu_milli_free < pl->gpu_milli)
            return false;
        if (sign < 0 && (gpu->gpu_milli_free + pl->gpu_milli > gpu->gpu_milli || gpu->pods == 0))
            return false;
    }
    return true;
}

int gs_cluster_bind(struct gs_cluster *c, const struct gs_pod_req *req,
                    const struct gs_placement *pl)
{
    if (pl->node >= c->nodes_len)
        return GS_EINVAL;
    struct gs_node *n = &c->nodes[pl->node];
    if (!gs_node_fits(n, req) || !placement_valid(n, req, pl, +1))
        return GS_EINVAL;
    n->cpu_milli_free -= req->cpu_milli;
    n->mem_mib_free -= req->mem_mib;
    n->pods++;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
        gpu->gpu_milli_free -= pl->gpu_milli;
        gpu->pods++;
    }
    int tag = gs_req_tag(req);
    if (tag >= 0) {
        n->gpu_pods++;
        n->tag_count[tag]++;
    }
    c->gpu_milli_used += (int64_t)pl->num_gpu * pl->gpu_milli;
    node_refresh(c, n);
    return GS_OK;
}

int gs_cluster_unbind(struct gs_cluster *c, const struct gs_pod_req *req,
                      const struct gs_placement *pl)
{
    if (pl->node >= c->nodes_len)
        return GS_EINVAL;
    struct gs_node *n = &c->nodes[pl->node];
    int tag = gs_req_tag(req);
    if (n->pods == 0 || n->cpu_milli_free + req->cpu_milli > n->cpu_milli ||
        n->mem_mib_free + req->mem_mib > n->mem_mib || !placement_valid(n, req, pl, -1) ||
        (tag >= 0 && n->tag_count[tag] == 0))
        return GS_EINVAL;
    n->cpu_milli_free += req->cpu_milli;
    n->mem_mib_free += req->mem_mib;
    n->pods--;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
        gpu->gpu_milli_free += pl->gpu_milli;
        gpu->pods--;
    }
    if (tag >= 0) {
        n->gpu_pods--;
        n->tag_count[tag]--;
    }
    c->gpu_milli_used -= (int64_t)pl->num_gpu * pl->gpu_milli;
    node_refresh(c, n);
    return GS_OK;
}
