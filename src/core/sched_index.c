/*
 * The placement index: a decision in O(changed nodes x log nodes) instead of a scan of every
 * node, with the same result as the scan.
 *
 * A decision of a policy whose score is a pure function of a node's state and the request
 * (policy_ops.node_score: FGD, DotProd, GpuPacking, GpuClustering, and BestFit, whose min-max
 * rescale keeps the raw maximum's nodes and only them at 100) takes the feasible node of
 * highest score, the smallest tie-break rank among equal scores. For each request class (what
 * the filter and the score read of a milli request: CPU, memory, GPUs, milli per GPU, model
 * mask) the index keeps a max segment tree over node slots whose leaf is one 64-bit key that
 * orders nodes exactly as the scan's selection does:
 *
 *     bit 63      a CPU-only request on a node without GPUs (the scan's cut, keep_gpu_free_nodes()
 *                 in sched.c: such nodes win over every node with GPUs when one is feasible)
 *     bits 32-62  the score + 2^30
 *     bits 0-31   UINT32_MAX - rank (ranks are distinct: a permutation, new nodes after it)
 *
 * and 0 for a node that is not feasible (outside the default filter class's node set, or the
 * request does not fit). The root is the scan's choice. Random (policy_ops.node_draw) draws
 * the k-th feasible node in index order: its leaves count feasible nodes (low half) and
 * feasible nodes without GPUs (high half), its inner nodes sum them, and the k-th is found
 * from the root down. A node's key changes only when its
 * generation does, and the cluster names every new generation in its refresh journal
 * (gs_cluster_refreshed_node()), so a class asked again recomputes the leaves of the nodes
 * refreshed since it was last asked (each once, however often it changed): one per pod placed
 * in the simulator. A class whose part of the journal is forgotten is rebuilt from every node
 * (a scan, as before), as is every class after a new workload or a grown cluster.
 *
 * Where the index cannot give the scan's answer the decision scans: a bounded scan
 * (nodes_to_find, whose rotating start depends on the order), a filter class other than the
 * default (pinned pods, selectors; classes are recycled), filter scores that differ between
 * nodes (preferences, PreferNoSchedule taints), requests beyond milli or with other resources,
 * and every policy without a per-node score or draw (FGD-band's band over this decision's
 * feasible nodes). An allocation failure also falls back to
 * the scan: the index only saves work.
 *
 * Memory: 16 bytes per node slot and class; the classes kept are bounded by IX_BYTES_MAX, the
 * least recently asked one giving its tree to a new class when the bound is reached.
 */
#include "sched_int.h"

#include <string.h>

#include "alloc_int.h"
#include "cluster_int.h"
#include "gpusched/err.h"
#include "gpusched/filter.h"

/* Trees of all classes together, bytes; at least IX_CLASSES_MIN classes whatever the size. */
#define IX_BYTES_MAX ((size_t)64 << 20)
#define IX_CLASSES_MIN 8u
#define IX_CLASSES_MAX 1024u

/* What the filter and the node scores read of a milli request without other resources. */
struct ix_key {
    int64_t cpu_milli;
    int64_t mem_mib;
    uint64_t gpu_model_mask;
    uint32_t num_gpu;
    int32_t gpu_milli;
};
_Static_assert(sizeof(struct ix_key) == 32, "no implicit padding in an index key");

struct ix_class {
    struct ix_key key;
    uint32_t score_cls; /* the policy's class of the request (policy_ops.node_class) */
    bool valid;         /* tree holds every node's key as of `seen` */
    uint64_t seen;      /* cluster refreshes the tree has taken in */
    uint64_t used;      /* ix->clock at the last decision (least recently used goes first) */
    uint64_t *tree;     /* [2 * ix->leaves]: tree[1] the root, tree[leaves + i] node i's key */
};

struct gs__index {
    struct ix_class *classes; /* n_classes used of max_classes */
    uint32_t n_classes, max_classes;
    uint32_t *slots;   /* open addressing over the keys: class index + 1, 0 empty; slot_cap */
    uint32_t slot_cap; /* a power of two >= 2 x max_classes */
    uint32_t leaves;   /* leaves of every tree: the node slots and some slack */
    uint64_t clock;    /* decisions answered */
    /* last_ref[i]: the last refresh of node i among the journal's entries below `jseen`
     * (kept from the journal at each decision), so a class catching up visits each changed
     * node once, at its last refresh in the range, however often it changed. Entries before a
     * forgotten stretch of the journal are stale, and every class is rebuilt after one. */
    uint64_t *last_ref; /* [leaves] */
    uint64_t jseen;
};

static uint64_t key_hash(const struct ix_key *k)
{
    return mix64((uint64_t)k->cpu_milli ^
                 mix64((uint64_t)k->mem_mib ^
                       mix64(k->gpu_model_mask ^
                             mix64(((uint64_t)k->num_gpu << 32) ^ (uint32_t)k->gpu_milli))));
}

void gs__index_free(struct gs__index *ix)
{
    if (!ix)
        return;
    for (uint32_t k = 0; k < ix->n_classes; k++)
        gs__free(ix->classes[k].tree);
    gs__free(ix->classes);
    gs__free(ix->slots);
    gs__free(ix->last_ref);
    gs__free(ix);
}

void gs__index_invalidate(struct gs__index *ix)
{
    for (uint32_t k = 0; ix && k < ix->n_classes; k++)
        ix->classes[k].valid = false;
}

/* Sizes the index for `n` node slots: the first call, or a cluster grown past the leaves,
 * drops every class (their trees are the wrong size). GS_OK or GS_ENOMEM. */
static int ix_reserve(struct gs_sched *s, uint32_t n)
{
    struct gs__index *ix = s->ix;
    if (ix && n <= ix->leaves)
        return GS_OK;
    /* The tree is the bottom-up kind (inner node j over 2j and 2j + 1, leaves from `leaves`
     * on). Its maximum needs no power of two (slack for 64 more nodes before the next resize);
     * a draw's k-th node in index order does, as only then are the leaves in order below
     * every inner node. */
    uint32_t leaves = (n / 64 + 1) * 64;
    if (s->ops->node_draw)
        for (leaves = 64; leaves < n; leaves *= 2)
            ;
    size_t per_class = (size_t)2 * leaves * sizeof(uint64_t);
    size_t fit = IX_BYTES_MAX / per_class;
    uint32_t max = fit < IX_CLASSES_MIN   ? IX_CLASSES_MIN
                   : fit > IX_CLASSES_MAX ? IX_CLASSES_MAX
                                          : (uint32_t)fit;
    uint32_t slot_cap = 16;
    while (slot_cap < 2 * max)
        slot_cap *= 2;
    struct gs__index *grown = gs__calloc(1, sizeof(*grown));
    struct ix_class *classes = gs__calloc(max, sizeof(*classes));
    uint32_t *slots = gs__calloc(slot_cap, sizeof(*slots));
    uint64_t *last_ref = gs__calloc(leaves, sizeof(*last_ref));
    if (!grown || !classes || !slots || !last_ref) {
        gs__free(grown);
        gs__free(classes);
        gs__free(slots);
        gs__free(last_ref);
        return GS_ENOMEM;
    }
    grown->last_ref = last_ref;
    grown->jseen = gs_cluster_refreshes(s->c); /* no class yet: nothing before it is needed */
    grown->classes = classes;
    grown->slots = slots;
    grown->max_classes = max;
    grown->slot_cap = slot_cap;
    grown->leaves = leaves;
    grown->clock = ix ? ix->clock : 0;
    gs__index_free(ix);
    s->ix = grown;
    return GS_OK;
}

/* Re-enters every class in the key table (after one was replaced). */
static void ix_rehash(struct gs__index *ix)
{
    uint32_t mask = ix->slot_cap - 1;
    memset(ix->slots, 0, (size_t)ix->slot_cap * sizeof(*ix->slots));
    for (uint32_t k = 0; k < ix->n_classes; k++) {
        uint32_t i = (uint32_t)key_hash(&ix->classes[k].key) & mask;
        while (ix->slots[i])
            i = (i + 1) & mask;
        ix->slots[i] = k + 1;
    }
}

/* The class of key `key`, made (or taken over from the least recently used) when new; its
 * tree allocated. NULL on out of memory. */
static struct ix_class *ix_class_of(struct gs_sched *s, const struct ix_key *key,
                                    const struct gs_pod_req *req)
{
    struct gs__index *ix = s->ix;
    uint32_t mask = ix->slot_cap - 1;
    uint32_t i = (uint32_t)key_hash(key) & mask;
    struct ix_class *k;
    for (; ix->slots[i]; i = (i + 1) & mask) {
        k = &ix->classes[ix->slots[i] - 1];
        if (memcmp(&k->key, key, sizeof(*key)) != 0)
            continue;
        if (!k->tree)
            k->tree = gs__malloc((size_t)2 * ix->leaves * sizeof(*k->tree));
        return k->tree ? k : NULL;
    }
    uint32_t score_cls = 0;
    if (s->ops->node_class && s->ops->node_class(s, req, &score_cls) != GS_OK)
        return NULL;
    if (ix->n_classes < ix->max_classes) {
        k = &ix->classes[ix->n_classes++];
        memset(k, 0, sizeof(*k));
        ix->slots[i] = (uint32_t)(k - ix->classes) + 1;
    } else {
        k = &ix->classes[0];
        for (uint32_t c = 1; c < ix->n_classes; c++)
            if (ix->classes[c].used < k->used)
                k = &ix->classes[c];
        k->key = *key;
        ix_rehash(ix);
    }
    k->key = *key;
    k->score_cls = score_cls;
    k->valid = false;
    if (!k->tree) {
        k->tree = gs__malloc((size_t)2 * ix->leaves * sizeof(*k->tree));
        if (!k->tree)
            return NULL; /* the class stays, without a tree: the next decision tries again */
    }
    return k;
}

/* Node i's key in class k (see the file comment); GS_OK or the policy's error. */
static int leaf_key(struct gs_sched *s, const struct ix_class *k, const uint64_t *set,
                    const struct gs_pod_req *req, enum fit_how how, uint32_t i, uint64_t *out)
{
    const struct gs_node_fit *fit = s->c->fit;
    *out = 0;
    if (!(set[i / 64] >> (i % 64) & 1) || !gs__fits(s->c, fit, i, req, how))
        return GS_OK;
    bool gpu_free = !gs_req_wants_gpu(req) && fit[i].gpu_count == 0;
    if (s->ops->node_draw) {
        *out = 1 | (uint64_t)gpu_free << 32;
        return GS_OK;
    }
    int32_t score;
    int err = s->ops->node_score(s, i, req, k->score_cls, &score);
    if (err)
        return err;
    uint64_t top = gpu_free ? UINT64_C(1) << 63 : 0;
    uint64_t biased = (uint64_t)((int64_t)score + ((int64_t)1 << 30)) & 0x7fffffffu;
    *out = top | biased << 32 | (UINT32_MAX - s->rank[i]);
    return GS_OK;
}

/* An inner node from its children: the larger key, or for a drawing policy the sums of both
 * counts (each below 2^32, so the halves do not carry into each other). */
static inline uint64_t combine(bool draw, uint64_t a, uint64_t b)
{
    return draw ? a + b : a > b ? a : b;
}

/* Every leaf afresh, then the inner nodes bottom up. */
static int rebuild(struct gs_sched *s, struct ix_class *k, const uint64_t *set,
                   const struct gs_pod_req *req, enum fit_how how, uint32_t n)
{
    uint32_t leaves = s->ix->leaves;
    uint64_t *t = k->tree;
    for (uint32_t i = 0; i < n; i++) {
        int err = leaf_key(s, k, set, req, how, i, &t[leaves + i]);
        if (err)
            return err;
    }
    memset(t + leaves + n, 0, (size_t)(leaves - n) * sizeof(*t));
    bool draw = s->ops->node_draw;
    for (size_t j = (size_t)leaves - 1; j >= 1; j--)
        t[j] = combine(draw, t[2 * j], t[2 * j + 1]);
    return GS_OK;
}

/* Node i's leaf afresh and the path above it, up to where the inner value no longer changes. */
static int update(struct gs_sched *s, struct ix_class *k, const uint64_t *set,
                  const struct gs_pod_req *req, enum fit_how how, uint32_t i)
{
    uint64_t *t = k->tree;
    size_t j = (size_t)s->ix->leaves + i;
    uint64_t v;
    int err = leaf_key(s, k, set, req, how, i, &v);
    if (err)
        return err;
    if (t[j] == v)
        return GS_OK;
    t[j] = v;
    bool draw = s->ops->node_draw;
    for (j /= 2; j >= 1; j /= 2) {
        uint64_t m = combine(draw, t[2 * j], t[2 * j + 1]);
        if (t[j] == m)
            break;
        t[j] = m;
    }
    return GS_OK;
}

/*
 * A drawing policy's choice from the counts: the feasible nodes in index order, cut to those
 * without GPUs for a CPU-only pod when two or more are feasible and some have none (as
 * keep_gpu_free_nodes() cuts the scan's list), and of those the one the policy's draw names
 * (one draw, none when only one is left, as the scan's score()).
 */
static int draw_node(struct gs_sched *s, const uint64_t *t, const struct gs_pod_req *req,
                     struct gs_rng *rng, uint32_t *node)
{
    uint32_t nf = (uint32_t)t[1], shift = 0;
    if (!gs_req_wants_gpu(req) && nf >= 2 && (uint32_t)(t[1] >> 32) > 0) {
        shift = 32;
        nf = (uint32_t)(t[1] >> 32);
    }
    if (nf == 0)
        return GS_EUNSCHEDULABLE;
    uint32_t left = nf == 1 ? 0 : s->ops->node_draw(rng, nf);
    size_t j = 1;
    while (j < s->ix->leaves) {
        uint32_t c = (uint32_t)(t[2 * j] >> shift);
        if (left < c) {
            j = 2 * j;
        } else {
            left -= c;
            j = 2 * j + 1;
        }
    }
    *node = (uint32_t)(j - s->ix->leaves);
    return GS_OK;
}

int gs__index_best(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                   struct gs_rng *rng, uint32_t *node)
{
    enum fit_how how = fit_how_of(req);
    uint32_t n = gs_cluster_node_count(s->c);
    if ((!s->ops->node_score && !s->ops->node_draw) || cls != GS_FILTER_DEFAULT || how == FIT_ANY ||
        (s->nodes_to_find != 0 && s->nodes_to_find < n) || n == 0 ||
        gs_filter_has_preferences(s->c, cls) || gs_filter_prefer_tainted_nodes(s->c) > 0)
        return GS__INDEX_SCAN;
    const uint64_t *set = gs_filter_nodes(s->c, cls);
    if (!set || ix_reserve(s, n) != GS_OK)
        return GS__INDEX_SCAN;
    struct ix_key key = {req->cpu_milli, req->mem_mib, req->gpu_model_mask, req->num_gpu,
                         req->num_gpu ? req->gpu_milli : 0};
    struct ix_class *k = ix_class_of(s, &key, req);
    if (!k)
        return GS__INDEX_SCAN;
    struct gs__index *ix = s->ix;
    k->used = ++ix->clock;
    uint64_t now = s->c->refreshes;
    for (uint64_t r = ix->jseen; r < now; r++) {
        uint32_t i;
        if (!gs__journal_at(s->c, r, &i)) {
            /* Forgotten: the last refreshes of some nodes are unknown; every class rebuilds. */
            gs__index_invalidate(ix);
            break;
        }
        if (i < ix->leaves)
            ix->last_ref[i] = r;
    }
    ix->jseen = now;
    int err = GS_OK;
    if (!k->valid) {
        err = rebuild(s, k, set, req, how, n);
    } else {
        for (uint64_t r = k->seen; r < now && err == GS_OK; r++) {
            uint32_t i;
            if (!gs__journal_at(s->c, r, &i) || i >= n) {
                err = rebuild(s, k, set, req, how, n);
                break;
            }
            if (ix->last_ref[i] == r) /* its last refresh in the range */
                err = update(s, k, set, req, how, i);
        }
    }
    if (err) {
        k->valid = false;
        return GS__INDEX_SCAN;
    }
    k->valid = true;
    k->seen = now;
    const uint64_t *t = k->tree;
    if (s->ops->node_draw)
        return draw_node(s, t, req, rng, node);
    if (t[1] == 0)
        return GS_EUNSCHEDULABLE;
    size_t j = 1;
    while (j < s->ix->leaves)
        j = t[2 * j] == t[j] ? 2 * j : 2 * j + 1;
    *node = (uint32_t)(j - s->ix->leaves);
    return GS_OK;
}
