/*
 * FGD, fragmentation gradient descent (Weng et al., "Beware of Fragmentation", USENIX ATC '23):
 * the node and GPU whose placement increases the cluster's expected fragmentation least.
 *
 * Hot path. One decision on the 1,213-node openb cluster scores every feasible node. The cheap
 * policies are O(GPUs) per node. FGD needs the node's fragmentation before and after placing
 * the pod on each candidate GPU, each a pass over the target workload (35 types x 8 GPUs on
 * openb), which done naively is ~10^4 evaluations per decision. Three caches make it cheap:
 *   1. F(node) per node, valid while the node's generation is unchanged;
 *   2. the FGD score per (node, request class), valid for the same generation, so a node that
 *      did not change since it was last scored for this kind of pod costs one load;
 *   3. a memo from (node state, request class) to score shared by all nodes, so nodes in
 *      identical states (most idle nodes, and many partly used ones) are evaluated once.
 * The scores are pure functions of (state, class), so the caches never change a result.
 *
 * A node whose fragmentation needs the per-GPU measure (gs__frag_full(): the workload has
 * memory, MIG or time-sliced types, or the node has GPUs in other modes) is scored on its GPU
 * records (policy_fgd_modes.c), through cache 2 only: its state is more than the free list
 * cache 3 keys on. Memory and MIG requests are scored there too (score_kind, pick_kind).
 */
#include "sched_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"
#include "gpusched/err.h"

/* ---- fgd ---------------------------------------------------------------------------------- */

int32_t gs__fgd_score_of(double f_before, double f_after)
{
    double x = (f_before - f_after) / 1000.0;
    return (int32_t)(100.0 * (1.0 / (1.0 + exp(-x))));
}

/* FGD score of a shared pod on GPU g of a state given as a descending free list. */
static int32_t fgd_share_gpu(const struct gs_sched *s, uint32_t model, int64_t cpu_after,
                             const int32_t *free_list, uint32_t n_gpu, uint32_t g,
                             int32_t gpu_milli, double f_before)
{
    int32_t after[GS_NODE_GPUS_MAX];
    memcpy(after, free_list, n_gpu * sizeof(*after));
    after[g] -= gpu_milli;
    return gs__fgd_score_of(f_before, gs_frag_node(s->w, model, cpu_after, after, n_gpu, NULL));
}

/* FGD score of a request on a node state (descending free list); pure. */
static int32_t fgd_eval(const struct gs_sched *s, const struct gs_node *n,
                        const struct gs_pod_req *req, double f_before)
{
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    if (is_share(req)) {
        /* Equal free values give equal after-states: evaluate each distinct value once. */
        int32_t best = -1;
        for (uint32_t r = 0; r < n->gpu_count; r++) {
            int32_t f = n->gpu_free_desc[r];
            if (f < req->gpu_milli)
                break;
            if (r > 0 && f == n->gpu_free_desc[r - 1])
                continue;
            int32_t sc = fgd_share_gpu(s, n->model_id, cpu_after, n->gpu_free_desc, n->gpu_count, r,
                                       req->gpu_milli, f_before);
            best = sc > best ? sc : best;
        }
        return best;
    }
    /* Whole GPUs: the first num_gpu fully free GPUs become 0. The descending list has the fully
     * free GPUs first, so zeroing its first num_gpu entries gives the same multiset. */
    int32_t after[GS_NODE_GPUS_MAX];
    memcpy(after, n->gpu_free_desc, n->gpu_count * sizeof(*after));
    for (uint32_t r = 0; r < req->num_gpu; r++)
        after[r] = 0;
    return gs__fgd_score_of(f_before,
                            gs_frag_node(s->w, n->model_id, cpu_after, after, n->gpu_count, NULL));
}

static uint64_t class_hash(const struct req_class *k)
{
    uint64_t h = mix64((uint64_t)k->cpu_milli ^
                       mix64(((uint64_t)k->gpu_milli << 32) ^ k->num_gpu ^ mix64(k->mask)));
    if (k->kind == GS_REQ_MILLI)
        return h;
    uint64_t name = 0;
    memcpy(&name, k->mig_profile, sizeof(name));
    return mix64(h ^ mix64((uint64_t)k->gpu_mem_mib ^ ((uint64_t)k->kind << 56) ^
                           ((uint64_t)k->gpu_mem_pct << 48) ^ ((uint64_t)k->timeslice_slots << 40) ^
                           ((uint64_t)k->mig_count << 32) ^ mix64(name)));
}

static int class_of(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls)
{
    struct req_class key;
    memset(&key, 0, sizeof(key));
    key.cpu_milli = gs_cpu_nonzero(req->cpu_milli);
    key.gpu_milli = req->gpu_milli;
    key.num_gpu = req->num_gpu;
    key.mask = req->gpu_model_mask;
    key.kind = (uint8_t)gs_req_kind(req);
    if (key.kind != GS_REQ_MILLI) {
        key.gpu_mem_mib = req->gpu_mem_mib;
        key.gpu_mem_pct = req->gpu_mem_pct;
        key.timeslice_slots = req->timeslice_slots;
        key.mig_count = req->mig_count;
        memcpy(key.mig_profile, req->mig_profile, sizeof(key.mig_profile));
    }
    if ((s->n_classes + 1) * 2 > s->class_slots_cap) {
        uint32_t cap = s->class_slots_cap ? s->class_slots_cap * 2 : 256;
        uint32_t *slots = gs__calloc(cap, sizeof(*slots));
        struct req_class *classes = gs__realloc(s->classes, (cap / 2) * sizeof(*classes));
        if (classes)
            s->classes = classes;
        if (!slots || !classes) {
            gs__free(slots);
            return GS_ENOMEM;
        }
        gs__free(s->class_slots);
        s->class_slots = slots;
        s->class_slots_cap = cap;
        s->classes_cap = cap / 2;
        for (uint32_t c = 0; c < s->n_classes; c++) {
            uint64_t h = class_hash(&s->classes[c]);
            uint32_t i = (uint32_t)h & (cap - 1);
            while (slots[i])
                i = (i + 1) & (cap - 1);
            slots[i] = c + 1;
        }
    }
    uint64_t h = class_hash(&key);
    uint32_t mask = s->class_slots_cap - 1;
    uint32_t i = (uint32_t)h & mask;
    for (;;) {
        uint32_t v = s->class_slots[i];
        if (v == 0)
            break;
        if (memcmp(&s->classes[v - 1], &key, sizeof(key)) == 0) {
            *cls = v - 1;
            return GS_OK;
        }
        i = (i + 1) & mask;
    }
    s->classes[s->n_classes] = key;
    s->class_slots[i] = s->n_classes + 1;
    *cls = s->n_classes++;
    return GS_OK;
}

/* Makes the per-(node, class) cache wide enough for class `cls`. */
static int ensure_cache(struct gs_sched *s, uint32_t cls)
{
    if (cls < s->cache_classes)
        return GS_OK;
    uint32_t width = s->cache_classes ? s->cache_classes : 16;
    while (width <= cls)
        width *= 2;
    struct score_entry *cache = gs__calloc((size_t)s->nodes_cap * width, sizeof(*cache));
    if (!cache)
        return GS_ENOMEM;
    for (uint32_t n = 0; n < s->nodes_cap && s->cache_classes; n++)
        memcpy(cache + (size_t)n * width, s->cache + (size_t)n * s->cache_classes,
               s->cache_classes * sizeof(*cache));
    gs__free(s->cache);
    s->cache = cache;
    s->cache_classes = width;
    return GS_OK;
}

static uint64_t memo_hash(const struct gs_node *n, uint32_t cls)
{
    uint64_t h = mix64(((uint64_t)cls << 40) ^ ((uint64_t)n->model_id << 32) ^ n->gpu_count);
    h = mix64(h ^ (uint64_t)n->cpu_milli_free);
    for (uint32_t g = 0; g < n->gpu_count; g++)
        h = mix64(h ^ (uint64_t)(uint32_t)n->gpu_free_desc[g] ^ ((uint64_t)g << 48));
    return h | 1; /* never 0, the empty mark */
}

static bool memo_match(const struct memo_entry *e, uint64_t h, const struct gs_node *n,
                       uint32_t cls)
{
    if (e->hash != h || e->cls != cls || e->model_id != n->model_id ||
        e->cpu_milli_free != n->cpu_milli_free || e->n_gpu != n->gpu_count)
        return false;
    for (uint32_t g = 0; g < n->gpu_count; g++)
        if (e->free_desc[g] != n->gpu_free_desc[g])
            return false;
    return true;
}

/* FGD score of one node through the three caches. Returns the score or GS_ENOMEM. */
static int32_t fgd_node(struct gs_sched *s, uint32_t node, uint32_t cls,
                        const struct gs_pod_req *req)
{
    const struct gs_node *n = gs_cluster_node(s->c, node);
    struct score_entry *ce = &s->cache[(size_t)node * s->cache_classes + cls];
    if (ce->gen == n->gen)
        return ce->score;
    if (gs__frag_full(s, n)) {
        ce->score = gs__fgd_milli_full(s, n, req, gs_sched_node_frag(s, node, NULL), NULL);
        ce->gen = n->gen;
        return ce->score;
    }
    if (!s->memo) {
        s->memo = gs__calloc(1024, sizeof(*s->memo));
        if (!s->memo)
            return GS_ENOMEM;
        s->memo_cap = 1024;
    }
    uint64_t h = memo_hash(n, cls);
    uint32_t mask = s->memo_cap - 1;
    uint32_t i = (uint32_t)h & mask;
    while (s->memo[i].hash != 0) {
        if (memo_match(&s->memo[i], h, n, cls)) {
            ce->gen = n->gen;
            ce->score = s->memo[i].score;
            return ce->score;
        }
        i = (i + 1) & mask;
    }
    int32_t score = fgd_eval(s, n, req, gs_sched_node_frag(s, node, NULL));
    ce->gen = n->gen;
    ce->score = score;
    if ((s->memo_len + 1) * 2 > s->memo_cap) {
        /* Grow up to a bound, then start afresh: the memo only saves work. */
        uint32_t cap = s->memo_cap < MEMO_CAP_MAX ? s->memo_cap * 2 : s->memo_cap;
        struct memo_entry *memo = gs__calloc(cap, sizeof(*memo));
        if (!memo)
            return score; /* keep working without memoising this one */
        if (cap > s->memo_cap) {
            for (uint32_t k = 0; k < s->memo_cap; k++) {
                if (!s->memo[k].hash)
                    continue;
                uint32_t j = (uint32_t)s->memo[k].hash & (cap - 1);
                while (memo[j].hash)
                    j = (j + 1) & (cap - 1);
                memo[j] = s->memo[k];
            }
        } else {
            s->memo_len = 0;
        }
        gs__free(s->memo);
        s->memo = memo;
        s->memo_cap = cap;
        mask = cap - 1;
        i = (uint32_t)h & mask;
        while (s->memo[i].hash)
            i = (i + 1) & mask;
    }
    struct memo_entry *e = &s->memo[i];
    e->hash = h;
    e->cls = cls;
    e->model_id = n->model_id;
    e->cpu_milli_free = n->cpu_milli_free;
    e->n_gpu = n->gpu_count;
    e->score = score;
    for (uint32_t g = 0; g < n->gpu_count; g++)
        e->free_desc[g] = (int16_t)n->gpu_free_desc[g];
    s->memo_len++;
    return score;
}

int gs__fgd_class(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls)
{
    int err = class_of(s, req, cls);
    return err ? err : ensure_cache(s, *cls);
}

static int score_fgd(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                     struct gs_rng *rng)
{
    (void)rng;
    uint32_t cls;
    int err = gs__fgd_class(s, req, &cls);
    if (err)
        return err;
    for (uint32_t k = 0; k < nf; k++) {
        int32_t sc = fgd_node(s, s->feasible[k], cls, req);
        if (sc < 0)
            return sc;
        s->scores[k] = sc;
    }
    return GS_OK;
}

/* FGD GPU pick for a shared pod: the first GPU (by index) whose score reaches the node's best. */
static uint32_t pick_share_fgd(struct gs_sched *s, const struct gs_node *n,
                               const struct gs_pod_req *req, struct gs_rng *rng)
{
    (void)rng;
    uint32_t node = (uint32_t)(n - gs_cluster_node(s->c, 0));
    double f_before = gs_sched_node_frag(s, node, NULL);
    if (gs__frag_full(s, n)) {
        uint32_t gpu = 0;
        (void)gs__fgd_milli_full(s, n, req, f_before, &gpu);
        return gpu;
    }
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    int32_t list[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < n->gpu_count; g++)
        list[g] = n->gpus[g].gpu_milli_free;
    uint32_t pick = 0;
    int32_t best = -1;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        if (list[g] < req->gpu_milli || n->gpus[g].sharing != GS_GPU_SHARE_MILLI)
            continue;
        int32_t sc = fgd_share_gpu(s, n->model_id, cpu_after, list, n->gpu_count, g, req->gpu_milli,
                                   f_before);
        if (sc > best) {
            best = sc;
            pick = g;
        }
    }
    return pick;
}

/* One node's FGD score for the placement index: what score_fgd() writes for it. */
static int node_score_fgd(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req,
                          uint32_t cls, int32_t *score)
{
    int32_t sc = fgd_node(s, node, cls, req);
    if (sc < 0)
        return sc;
    *score = sc;
    return GS_OK;
}

const struct policy_ops gs__policy_fgd = {
    "fgd",          "06-FGD",           score_fgd,         pick_share_fgd,
    gs__pick_whole, gs__fgd_score_kind, gs__fgd_pick_kind, node_score_fgd,
    gs__fgd_class};
