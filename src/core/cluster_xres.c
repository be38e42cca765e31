/*
 * Other resources of the cluster model (cluster.h, GS_XRES_MAX): the name table, what each node
 * offers and what bound pods hold. kube-scheduler's NodeResourcesFit checks every resource a pod
 * requests against the node's status.allocatable; CPU, memory and GPUs have their own columns,
 * and everything else (extended resources, ephemeral-storage, hugepages) is kept here as a short
 * per-node list sorted by id, read only for requests that ask for some.
 */
#include <string.h>

#include "cluster_int.h"
#include "gpusched/err.h"

int gs_cluster_xres_id(struct gs_cluster *c, const char *name, uint32_t *id)
{
    if (!name || !*name)
        return GS_EINVAL;
    for (uint32_t k = 0; k < c->xres_len; k++)
        if (strcmp(c->xres_names[k], name) == 0) {
            *id = k;
            return GS_OK;
        }
    if (c->xres_len == GS_XRES_MAX)
        return GS_ELIMIT;
    size_t len = strlen(name) + 1;
    char *copy = gs__malloc(len);
    if (!copy)
        return GS_ENOMEM;
    memcpy(copy, name, len);
    c->xres_names[c->xres_len] = copy;
    *id = c->xres_len++;
    return GS_OK;
}

const char *gs_cluster_xres_name(const struct gs_cluster *c, uint32_t id)
{
    return id < c->xres_len ? c->xres_names[id] : NULL;
}

void gs__xres_names_free(struct gs_cluster *c)
{
    for (uint32_t k = 0; k < c->xres_len; k++)
        gs__free(c->xres_names[k]);
    c->xres_len = 0;
}

static const struct gs_node_xres *find(const struct gs_node *n, uint32_t id)
{
    for (uint32_t k = 0; k < n->xres_count && n->xres[k].id <= id; k++)
        if (n->xres[k].id == id)
            return &n->xres[k];
    return NULL;
}

static int64_t free_of(const struct gs_node_xres *x)
{
    return x && x->allocatable > x->used ? x->allocatable - x->used : 0;
}

bool gs_node_xres_fits(const struct gs_node *n, const struct gs_pod_req *req)
{
    for (uint32_t r = 0; r < req->xres_count; r++)
        if (free_of(find(n, req->xres[r].id)) < req->xres[r].qty)
            return false;
    return true;
}

int64_t gs_node_xres_copies(const struct gs_node *n, const struct gs_pod_req *req)
{
    int64_t k = INT64_MAX;
    for (uint32_t r = 0; r < req->xres_count; r++) {
        int64_t q =
            req->xres[r].qty > 0 ? free_of(find(n, req->xres[r].id)) / req->xres[r].qty : INT64_MAX;
        if (q < k)
            k = q;
    }
    return k;
}

bool gs__xres_req_valid(const struct gs_cluster *c, const struct gs_pod_req *req)
{
    if (req->xres_count > GS_POD_XRES_MAX)
        return false;
    for (uint32_t r = 0; r < req->xres_count; r++) {
        if (req->xres[r].id >= c->xres_len || req->xres[r].qty <= 0)
            return false;
        for (uint32_t s = 0; s < r; s++)
            if (req->xres[s].id == req->xres[r].id)
                return false;
    }
    return true;
}

/* Inserts an entry for `id` (allocatable 0) keeping the list sorted; n->xres has room. */
static struct gs_node_xres *insert(struct gs_node *n, uint32_t id)
{
    uint32_t k = 0;
    while (k < n->xres_count && n->xres[k].id < id)
        k++;
    memmove(&n->xres[k + 1], &n->xres[k], (n->xres_count - k) * sizeof(n->xres[0]));
    n->xres[k] = (struct gs_node_xres){id, 0, 0};
    n->xres_count++;
    return &n->xres[k];
}

int gs__xres_reserve(struct gs_node *n, const struct gs_pod_req *req)
{
    uint32_t missing = 0;
    for (uint32_t r = 0; r < req->xres_count; r++)
        missing += find(n, req->xres[r].id) == NULL;
    if (missing == 0)
        return GS_OK;
    if (n->xres_count + missing > GS_NODE_XRES_MAX)
        return GS_ELIMIT;
    struct gs_node_xres *grown = gs__realloc(n->xres, (n->xres_count + missing) * sizeof(*grown));
    if (!grown)
        return GS_ENOMEM;
    n->xres = grown;
    for (uint32_t r = 0; r < req->xres_count; r++)
        if (!find(n, req->xres[r].id))
            (void)insert(n, req->xres[r].id);
    return GS_OK;
}

bool gs__xres_release_ok(const struct gs_node *n, const struct gs_pod_req *req)
{
    for (uint32_t r = 0; r < req->xres_count; r++) {
        const struct gs_node_xres *x = find(n, req->xres[r].id);
        if (!x || x->used < req->xres[r].qty)
            return false;
    }
    return true;
}

void gs__xres_apply(struct gs_node *n, const struct gs_pod_req *req, int sign)
{
    for (uint32_t r = 0; r < req->xres_count; r++) {
        struct gs_node_xres *x = (struct gs_node_xres *)find(n, req->xres[r].id);
        if (x)
            x->used += sign * req->xres[r].qty;
    }
}

int gs_cluster_set_xres(struct gs_cluster *c, uint32_t i, const struct gs_xres *alloc, uint32_t n)
{
    if (i >= c->nodes_len || !c->nodes[i].present || (n && !alloc))
        return GS_EINVAL;
    struct gs_node *nd = &c->nodes[i];
    uint64_t seen[GS_XRES_MAX / 64] = {0};
    uint32_t keep = 0; /* held by pods, absent from the new list */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = alloc[k].id;
        if (id >= c->xres_len || alloc[k].qty < 0 || (seen[id / 64] >> (id % 64) & 1))
            return GS_EINVAL;
        seen[id / 64] |= UINT64_C(1) << (id % 64);
    }
    for (uint32_t k = 0; k < nd->xres_count; k++) {
        uint32_t id = nd->xres[k].id;
        if (nd->xres[k].used > 0 && !(seen[id / 64] >> (id % 64) & 1))
            keep++;
    }
    uint32_t total = n + keep;
    if (total > GS_NODE_XRES_MAX)
        return GS_ELIMIT;
    struct gs_node_xres *next = gs__malloc((total ? total : 1) * sizeof(*next));
    if (!next)
        return GS_ENOMEM;
    /* Build the new list by id: every id offered or held, in ascending order. */
    uint32_t len = 0;
    for (uint32_t id = 0; id < c->xres_len; id++) {
        const struct gs_node_xres *old = find(nd, id);
        int64_t held = old ? old->used : 0;
        int64_t offered = -1;
        for (uint32_t k = 0; k < n; k++)
            if (alloc[k].id == id)
                offered = alloc[k].qty;
        if ((offered < 0 && held == 0) || len == total)
            continue;
        next[len++] = (struct gs_node_xres){id, offered < 0 ? 0 : offered, held};
    }
    gs__free(nd->xres);
    nd->xres = len ? next : NULL;
    nd->xres_count = len;
    if (!len)
        gs__free(next);
    gs__node_bump(c, nd);
    return GS_OK;
}
