/*
 * The placement engine: filter, score, select and GPU pick, with the six FGD-paper policies in
 * a static registry of ops tables.
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
 */
#include "gpusched/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "alloc_int.h"

/* Fixed maximums the reference uses to scale CPU and GPU (MaxSpecCpu, MaxSpecGpu). */
#define MAX_SPEC_CPU_MILLI 128000.0
#define MAX_SPEC_GPU_MILLI 8000
#define MEMO_CAP_MAX (1u << 18)

struct gs_sched;

struct policy_ops {
    const char *name;
    const char *label;
    /* Scores s->feasible[0..nf) into s->scores[0..nf). */
    int (*score)(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf, struct gs_rng *rng);
    /* Picks the GPU of a shared (num_gpu == 1, gpu_milli < 1000) pod on node n. */
    uint32_t (*pick_share)(struct gs_sched *s, const struct gs_node *n,
                           const struct gs_pod_req *req, struct gs_rng *rng);
};

/* A request class: what the FGD score of a pod depends on. */
struct req_class {
    int64_t cpu_milli;
    int32_t gpu_milli;
    uint32_t num_gpu;
    uint64_t mask;
};

struct score_entry {
    uint64_t gen; /* node generation the score is valid for; 0 = empty */
    int32_t score;
};

struct memo_entry {
    uint64_t hash; /* 0 = empty slot */
    int64_t cpu_milli_free;
    uint32_t cls;
    uint32_t model_id;
    uint32_t n_gpu;
    int32_t score;
    int16_t free_desc[GS_NODE_GPUS_MAX];
};

struct gs_sched {
    struct gs_cluster *c;
    const struct policy_ops *ops;
    const struct gs_workload *w;
    uint32_t *rank; /* tie-break rank by node index; rank_len entries */
    uint32_t rank_len;
    uint32_t *feasible;    /* scratch: feasible node indices of this decision */
    int32_t *scores;       /* scratch: their scores */
    uint32_t nodes_cap;    /* capacity of every per-node array */
    struct gs_frag *nfrag; /* F(node) cache */
    uint64_t *nfrag_gen;   /* generation each nfrag entry is valid for (0 = none) */
    struct req_class *classes;
    uint32_t n_classes, classes_cap;
    uint32_t *class_slots; /* open addressing, class index + 1; class_slots_cap slots */
    uint32_t class_slots_cap;
    struct score_entry *cache; /* [node * cache_classes + class] */
    uint32_t cache_classes;
    struct memo_entry *memo;
    uint32_t memo_cap, memo_len;
    uint32_t nodes_to_find; /* 0 = all */
    uint32_t next_start;    /* where the next bounded scan starts */
};

/* ---- shared helpers ---------------------------------------------------------------------- */

static bool is_share(const struct gs_pod_req *req)
{
    return req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* Grows every per-node array to the cluster's node count. */
static int ensure_nodes(struct gs_sched *s)
{
    uint32_t n = gs_cluster_node_count(s->c);
    if (n <= s->nodes_cap) {
        /* Nodes added since the last call rank after the ranked ones, by index. */
        for (uint32_t i = s->rank_len; i < n; i++)
            s->rank[i] = i;
        s->rank_len = n > s->rank_len ? n : s->rank_len;
        return GS_OK;
    }
    uint32_t cap = s->nodes_cap ? s->nodes_cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t *feasible = gs__realloc(s->feasible, cap * sizeof(*feasible));
    if (feasible)
        s->feasible = feasible;
    int32_t *scores = gs__realloc(s->scores, cap * sizeof(*scores));
    if (scores)
        s->scores = scores;
    uint32_t *rank = gs__realloc(s->rank, cap * sizeof(*rank));
    if (rank)
        s->rank = rank;
    struct gs_frag *nfrag = gs__realloc(s->nfrag, cap * sizeof(*nfrag));
    if (nfrag)
        s->nfrag = nfrag;
    uint64_t *nfrag_gen = gs__realloc(s->nfrag_gen, cap * sizeof(*nfrag_gen));
    if (nfrag_gen)
        s->nfrag_gen = nfrag_gen;
    struct score_entry *cache = NULL;
    if (s->cache_classes) {
        cache = gs__realloc(s->cache, (size_t)cap * s->cache_classes * sizeof(*cache));
        if (cache)
            s->cache = cache;
    }
    if (!feasible || !scores || !rank || !nfrag || !nfrag_gen || (s->cache_classes && !cache))
        return GS_ENOMEM;
    memset(s->nfrag_gen + s->nodes_cap, 0, (cap - s->nodes_cap) * sizeof(*nfrag_gen));
    if (s->cache_classes)
        memset(s->cache + (size_t)s->nodes_cap * s->cache_classes, 0,
               (size_t)(cap - s->nodes_cap) * s->cache_classes * sizeof(*cache));
    s->nodes_cap = cap;
    for (uint32_t i = s->rank_len; i < n; i++)
        s->rank[i] = i;
    s->rank_len = n;
    return GS_OK;
}

double gs_sched_node_frag(struct gs_sched *s, uint32_t i, struct gs_frag *out)
{
    const struct gs_node *n = gs_cluster_node(s->c, i);
    if (!s->w || !n || ensure_nodes(s) != GS_OK) {
        if (out)
            memset(out, 0, sizeof(*out));
        return 0;
    }
    if (s->nfrag_gen[i] != n->gen) {
        gs_frag_node(s->w, n->model_id, n->cpu_milli_free, n->gpu_free_desc, n->gpu_count,
                     &s->nfrag[i]);
        s->nfrag_gen[i] = n->gen;
    }
    if (out)
        *out = s->nfrag[i];
    return s->nfrag[i].total;
}

double gs_sched_cluster_frag(struct gs_sched *s)
{
    double sum = 0;
    uint32_t n = gs_cluster_node_count(s->c);
    for (uint32_t i = 0; i < n; i++)
        sum += gs_sched_node_frag(s, i, NULL);
    return sum;
}

/* ---- GPU pick inside the chosen node ------------------------------------------------------ */

/* Shared pod, best fit: the GPU with the least free milli that still fits; lowest index on ties. */
static uint32_t pick_share_best(struct gs_sched *s, const struct gs_node *n,
                                const struct gs_pod_req *req, struct gs_rng *rng)
{
    (void)s;
    (void)rng;
    uint32_t best = 0;
    int32_t best_free = INT32_MAX;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        int32_t f = n->gpus[g].gpu_milli_free;
        if (f >= req->gpu_milli && f < best_free) {
            best = g;
            best_free = f;
        }
    }
    return best;
}

/* Shared pod, random: reservoir sampling over fitting GPUs in index order, one draw each. */
static uint32_t pick_share_random(struct gs_sched *s, const struct gs_node *n,
                                  const struct gs_pod_req *req, struct gs_rng *rng)
{
    (void)s;
    uint32_t pick = 0, seen = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        if (n->gpus[g].gpu_milli_free < req->gpu_milli)
            continue;
        seen++;
        if (gs_rng_below(rng, seen) == 0)
            pick = g;
    }
    return pick;
}

/* ---- random ------------------------------------------------------------------------------- */

static int score_random(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                        struct gs_rng *rng)
{
    (void)req;
    uint32_t chosen = gs_rng_below(rng, nf);
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = k == chosen ? 100 : 0;
    return GS_OK;
}

/* ---- dotprod ------------------------------------------------------------------------------ */

static int score_dotprod(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    double p_cpu = (double)cpu / MAX_SPEC_CPU_MILLI;
    double p_gpu = (double)((int64_t)req->num_gpu * req->gpu_milli) / MAX_SPEC_GPU_MILLI;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node_fit *n = &fit[s->feasible[k]];
        if (n->cpu_milli_free < cpu) {
            s->scores[k] = 0;
            continue;
        }
        double n_cpu = (double)n->cpu_milli_free / MAX_SPEC_CPU_MILLI;
        double n_gpu = (double)n->gpu_milli_free_total / MAX_SPEC_GPU_MILLI;
        double dot = n_cpu * p_cpu + n_gpu * p_gpu;
        s->scores[k] = (int32_t)(100.0 * (1.0 - dot / 2.0));
    }
    return GS_OK;
}

/* ---- clustering --------------------------------------------------------------------------- */

static int score_clustering(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                            struct gs_rng *rng)
{
    (void)rng;
    int tag = gs_req_tag(req);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node *n = gs_cluster_node(s->c, s->feasible[k]);
        if (tag < 0) {
            s->scores[k] = 0;
            continue;
        }
        int32_t b = 25 * (MAX_SPEC_GPU_MILLI - n->gpu_milli_free_total) / MAX_SPEC_GPU_MILLI;
        uint32_t same = n->tag_count[tag];
        if (n->gpu_pods == 0)
            s->scores[k] = 25 + b;
        else if (same == n->gpu_pods)
            s->scores[k] = 75 + b;
        else if (same > 0)
            s->scores[k] = 50 + b;
        else
            s->scores[k] = b;
    }
    return GS_OK;
}

/* ---- packing ------------------------------------------------------------------------------ */

static int32_t packing_node(const struct gs_node *n, const struct gs_pod_req *req)
{
    int32_t f = (int32_t)n->gpus_full_free;
    if ((uint32_t)f == n->gpu_count)
        return 33 - f > f ? 33 - f : f;
    /* Walk GPUs by increasing free milli, taking those that fit until num_gpu are taken. */
    uint32_t taken = 0, fresh = 0;
    int32_t pct_sum = 0;
    for (uint32_t r = n->gpu_count; r-- > 0 && taken < req->num_gpu;) {
        int32_t free_milli = n->gpu_free_desc[r];
        if (free_milli < req->gpu_milli)
            continue;
        taken++;
        if (free_milli == GS_GPU_MILLI)
            fresh++;
        pct_sum += free_milli * 100 / GS_GPU_MILLI;
    }
    if (fresh > 0)
        return 50 - (int32_t)fresh > 33 ? 50 - (int32_t)fresh : 33;
    return 100 - pct_sum / 10 > 50 ? 100 - pct_sum / 10 : 50;
}

static int score_packing(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node *n = gs_cluster_node(s->c, s->feasible[k]);
        s->scores[k] = req->num_gpu == 0 || req->gpu_milli <= 0 ? 0 : packing_node(n, req);
    }
    return GS_OK;
}

/* ---- bestfit ------------------------------------------------------------------------------ */

static int score_bestfit(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    (void)rng;
    int64_t cpu = gs_cpu_nonzero(req->cpu_milli);
    int64_t gpu = (int64_t)req->num_gpu * req->gpu_milli;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t k = 0; k < nf; k++) {
        const struct gs_node_fit *n = &fit[s->feasible[k]];
        double r = 0.5 * (double)(n->cpu_milli_free - cpu) / MAX_SPEC_CPU_MILLI +
                   0.5 * (double)(n->gpu_milli_free_total - gpu) / MAX_SPEC_GPU_MILLI;
        int32_t raw = (int32_t)(100.0 * (1.0 - r));
        s->scores[k] = raw;
        lo = raw < lo ? raw : lo;
        hi = raw > hi ? raw : hi;
    }
    /* Min-max rescale over this cycle's feasible nodes, integer (the reference NormalizeScore). */
    for (uint32_t k = 0; k < nf; k++)
        s->scores[k] = hi == lo ? 0 : (s->scores[k] - lo) * 100 / (hi - lo);
    return GS_OK;
}

/* ---- fgd ---------------------------------------------------------------------------------- */

static int32_t fgd_score_of(double f_before, double f_after)
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
    return fgd_score_of(f_before, gs_frag_node(s->w, model, cpu_after, after, n_gpu, NULL));
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
    return fgd_score_of(f_before,
                        gs_frag_node(s->w, n->model_id, cpu_after, after, n->gpu_count, NULL));
}

static int class_of(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls)
{
    struct req_class key = {gs_cpu_nonzero(req->cpu_milli), req->gpu_milli, req->num_gpu,
                            req->gpu_model_mask};
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
            const struct req_class *k = &s->classes[c];
            uint64_t h = mix64((uint64_t)k->cpu_milli ^
                               mix64(((uint64_t)k->gpu_milli << 32) ^ k->num_gpu ^ mix64(k->mask)));
            uint32_t i = (uint32_t)h & (cap - 1);
            while (slots[i])
                i = (i + 1) & (cap - 1);
            slots[i] = c + 1;
        }
    }
    uint64_t h = mix64((uint64_t)key.cpu_milli ^
                       mix64(((uint64_t)key.gpu_milli << 32) ^ key.num_gpu ^ mix64(key.mask)));
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

static int score_fgd(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                     struct gs_rng *rng)
{
    (void)rng;
    uint32_t cls;
    int err = class_of(s, req, &cls);
    if (err)
        return err;
    if ((err = ensure_cache(s, cls)) != GS_OK)
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
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    int32_t list[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < n->gpu_count; g++)
        list[g] = n->gpus[g].gpu_milli_free;
    uint32_t pick = 0;
    int32_t best = -1;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        if (list[g] < req->gpu_milli)
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

/* ---- registry ----------------------------------------------------------------------------- */

static const struct policy_ops policies[GS_POLICY_COUNT] = {
    {"random", "01-Random", score_random, pick_share_random},
    {"dotprod", "02-DotProd", score_dotprod, pick_share_best},
    {"clustering", "03-GpuClustering", score_clustering, pick_share_best},
    {"packing", "04-GpuPacking", score_packing, pick_share_best},
    {"bestfit", "05-BestFit", score_bestfit, pick_share_best},
    {"fgd", "06-FGD", score_fgd, pick_share_fgd},
};

uint32_t gs_sched_adaptive_nodes_to_find(uint32_t n_nodes)
{
    if (n_nodes < 100)
        return n_nodes;
    int64_t pct = 50 - (int64_t)n_nodes / 125;
    if (pct < 5)
        pct = 5;
    int64_t num = (int64_t)n_nodes * pct / 100;
    return num < 100 ? 100 : (uint32_t)num;
}

const char *gs_policy_name(uint32_t i)
{
    return i < GS_POLICY_COUNT ? policies[i].name : NULL;
}

const char *gs_policy_label(uint32_t i)
{
    return i < GS_POLICY_COUNT ? policies[i].label : NULL;
}

int gs_policy_find(const char *name)
{
    for (uint32_t i = 0; i < GS_POLICY_COUNT; i++)
        if (strcmp(policies[i].name, name) == 0)
            return (int)i;
    return -1;
}

int gs_sched_new(struct gs_cluster *c, const struct gs_sched_config *cfg, struct gs_sched **out)
{
    *out = NULL;
    int p = cfg->policy ? gs_policy_find(cfg->policy) : -1;
    if (p < 0)
        return GS_ENOENT;
    if (strcmp(policies[p].name, "fgd") == 0 && (!cfg->workload || cfg->workload->n_types == 0))
        return GS_EINVAL;
    struct gs_sched *s = gs__calloc(1, sizeof(*s));
    if (!s)
        return GS_ENOMEM;
    s->c = c;
    s->ops = &policies[p];
    s->w = cfg->workload;
    s->nodes_to_find = cfg->nodes_to_find;
    int err = ensure_nodes(s);
    if (err) {
        gs_sched_free(s);
        return err;
    }
    if (cfg->node_rank) {
        uint32_t n = gs_cluster_node_count(c);
        uint8_t *seen = gs__calloc(n ? n : 1, 1);
        if (!seen) {
            gs_sched_free(s);
            return GS_ENOMEM;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t r = cfg->node_rank[i];
            if (r >= n || seen[r]) {
                gs__free(seen);
                gs_sched_free(s);
                return GS_EINVAL;
            }
            seen[r] = 1;
            s->rank[i] = r;
        }
        gs__free(seen);
    }
    *out = s;
    return GS_OK;
}

int gs_sched_set_workload(struct gs_sched *s, const struct gs_workload *w)
{
    if (strcmp(s->ops->name, "fgd") == 0 && (!w || w->n_types == 0))
        return GS_EINVAL;
    s->w = w;
    /* Every cache below holds values computed against the old workload. */
    if (s->nfrag_gen)
        memset(s->nfrag_gen, 0, (size_t)s->nodes_cap * sizeof(*s->nfrag_gen));
    if (s->cache)
        memset(s->cache, 0, (size_t)s->nodes_cap * s->cache_classes * sizeof(*s->cache));
    if (s->memo)
        memset(s->memo, 0, (size_t)s->memo_cap * sizeof(*s->memo));
    s->memo_len = 0;
    return GS_OK;
}

void gs_sched_free(struct gs_sched *s)
{
    if (!s)
        return;
    gs__free(s->rank);
    gs__free(s->feasible);
    gs__free(s->scores);
    gs__free(s->nfrag);
    gs__free(s->nfrag_gen);
    gs__free(s->classes);
    gs__free(s->class_slots);
    gs__free(s->cache);
    gs__free(s->memo);
    gs__free(s);
}

static bool req_valid(const struct gs_pod_req *req)
{
    if (req->cpu_milli < 0 || req->mem_mib < 0 || req->num_gpu > GS_NODE_GPUS_MAX)
        return false;
    if (req->num_gpu == 0)
        return true;
    if (req->gpu_milli <= 0 || req->gpu_milli > GS_GPU_MILLI)
        return false;
    return req->num_gpu == 1 || req->gpu_milli == GS_GPU_MILLI;
}

/* Filter and score; leaves the feasible list and scores in the scratch arrays. */
/* kube-scheduler's DefaultNormalizeScore: score * 100 / max, reversed for taints (fewer
 * untolerated PreferNoSchedule taints is better). Weights are its defaults: NodeAffinity 2,
 * TaintToleration 3. Added only when they can differ between nodes, so a cluster without
 * preferences or PreferNoSchedule taints places exactly as the policy alone. */
static int add_filter_scores(struct gs_sched *s, uint32_t cls, uint32_t nf)
{
    bool aff = gs_filter_has_preferences(s->c, cls);
    bool taint = gs_filter_prefer_tainted_nodes(s->c) > 0;
    if (!aff && !taint)
        return GS_OK;
    int64_t max_aff = 0, max_taint = 0;
    int64_t *raw = gs__malloc((size_t)nf * 2 * sizeof(*raw));
    if (!raw)
        return GS_ENOMEM;
    for (uint32_t k = 0; k < nf; k++) {
        gs_filter_raw_scores(s->c, cls, s->feasible[k], &raw[(size_t)2 * k],
                             &raw[(size_t)2 * k + 1]);
        max_aff = raw[(size_t)2 * k] > max_aff ? raw[(size_t)2 * k] : max_aff;
        max_taint = raw[(size_t)2 * k + 1] > max_taint ? raw[(size_t)2 * k + 1] : max_taint;
    }
    for (uint32_t k = 0; k < nf; k++) {
        int64_t a = max_aff ? raw[(size_t)2 * k] * 100 / max_aff : 0;
        int64_t t = max_taint ? 100 - raw[(size_t)2 * k + 1] * 100 / max_taint : 100;
        s->scores[k] += (int32_t)(2 * a + 3 * t);
    }
    gs__free(raw);
    return GS_OK;
}

/*
 * A pod that asks for no GPU goes to a node without GPUs when one of the feasible nodes has
 * none (kubernetes/kubernetes#129229: CPU pods spread over GPU nodes by the default scores use
 * up the CPU and memory that GPU pods then lack there). The rule ranks above every score, so
 * it is applied as a cut of the feasible list before the policy scores what is left: among
 * GPU-less nodes the policy, the filter scores and the tie-break choose as before. When no
 * feasible node is GPU-less (or all are), nothing changes. With a bounded scan (nodes_to_find)
 * it looks at the nodes the scan found. O(feasible) for CPU-only pods, nothing for GPU pods.
 * Returns the new length of feasible[].
 */
static uint32_t keep_gpu_free_nodes(const struct gs_pod_req *req, const struct gs_node_fit *fit,
                                    uint32_t *feasible, uint32_t nf)
{
    if (req->num_gpu != 0 || nf < 2)
        return nf;
    uint32_t kept = 0;
    for (uint32_t k = 0; k < nf; k++)
        if (fit[feasible[k]].gpu_count == 0)
            feasible[kept++] = feasible[k];
    return kept > 0 ? kept : nf; /* none without GPUs: the list is untouched (nothing moved) */
}

static int filter_and_score(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                            struct gs_rng *rng, uint32_t *nf_out)
{
    if (!req_valid(req))
        return GS_EINVAL;
    int err = ensure_nodes(s);
    if (err)
        return err;
    const uint64_t *set = gs_filter_nodes(s->c, cls);
    uint32_t pin = UINT32_MAX;
    if (!set && !gs_filter_pinned(s->c, cls, &pin))
        return GS_EINVAL;
    uint32_t n = gs_cluster_node_count(s->c);
    uint32_t nf = 0;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    if (!set) {
        /* A pod pinned to one node (filter.h): that node is judged alone, with no scan. */
        if (gs_filter_pass(s->c, cls, pin) && gs_fit_ok(&fit[pin], req))
            s->feasible[nf++] = pin;
    } else if (s->nodes_to_find == 0 || s->nodes_to_find >= n) {
        for (uint32_t w = 0; w < (n + 63) / 64; w++)
            for (uint64_t bits = set[w]; bits; bits &= bits - 1) {
                uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
                if (i < n && gs_fit_ok(&fit[i], req))
                    s->feasible[nf++] = i;
            }
    } else {
        /* Bounded scan from a rotating start, as kube-scheduler does on large clusters. Only
         * the nodes of the filter class are visited (64 at a time from its node set), so a
         * selector that leaves a quarter of the nodes costs a quarter of the scan; the order
         * and the rotation are those of a scan over every node. */
        uint32_t start = s->next_start < n ? s->next_start : 0, i = start, words = (n + 63) / 64;
        bool done = false;
        for (uint32_t k = 0; k <= words && !done; k++) {
            uint32_t w = (start / 64 + k) % words;
            uint64_t bits = set[w];
            if (k == 0)
                bits &= ~UINT64_C(0) << (start % 64); /* from the start bit on */
            else if (k == words)
                bits &= start % 64 ? ~(~UINT64_C(0) << (start % 64)) : 0; /* wrapped: below it */
            for (; bits; bits &= bits - 1) {
                i = w * 64 + (uint32_t)__builtin_ctzll(bits);
                if (i >= n)
                    break;
                if (gs_fit_ok(&fit[i], req) && (s->feasible[nf++] = i, nf == s->nodes_to_find)) {
                    done = true;
                    break;
                }
            }
        }
        /* The next scan starts after the last node looked at; after a whole round, where it
         * began (as the plain scan, which stops there too). */
        s->next_start = done ? (i + 1 == n ? 0 : i + 1) : start;
    }
    nf = keep_gpu_free_nodes(req, fit, s->feasible, nf);
    *nf_out = nf;
    if (nf == 1) {
        /* kube-scheduler skips scoring when one node is feasible; no random draw either. */
        s->scores[0] = 100;
        return GS_OK;
    }
    if (!nf)
        return GS_OK;
    if ((err = s->ops->score(s, req, nf, rng)) != GS_OK)
        return err;
    return add_filter_scores(s, cls, nf);
}

int gs_sched_score_nodes(struct gs_sched *s, const struct gs_pod_req *req, struct gs_rng *rng,
                         int32_t *scores)
{
    uint32_t nf;
    int err = filter_and_score(s, req, GS_FILTER_DEFAULT, rng, &nf);
    if (err)
        return err;
    uint32_t n = gs_cluster_node_count(s->c);
    for (uint32_t i = 0; i < n; i++)
        scores[i] = -1;
    for (uint32_t k = 0; k < nf; k++)
        scores[s->feasible[k]] = s->scores[k];
    return (int)nf;
}

int gs_sched_place(struct gs_sched *s, const struct gs_pod_req *req, struct gs_rng *rng,
                   struct gs_placement *pl)
{
    return gs_sched_place_class(s, req, GS_FILTER_DEFAULT, rng, pl);
}

int gs_sched_place_class(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                         struct gs_rng *rng, struct gs_placement *pl)
{
    uint32_t nf;
    int err = filter_and_score(s, req, cls, rng, &nf);
    if (err)
        return err;
    if (nf == 0)
        return GS_EUNSCHEDULABLE;
    /* Highest score; among equal scores the smallest rank. */
    uint32_t best = 0;
    for (uint32_t k = 1; k < nf; k++) {
        if (s->scores[k] > s->scores[best] ||
            (s->scores[k] == s->scores[best] &&
             s->rank[s->feasible[k]] < s->rank[s->feasible[best]]))
            best = k;
    }
    uint32_t node = s->feasible[best];
    const struct gs_node *n = gs_cluster_node(s->c, node);
    memset(pl, 0, sizeof(*pl));
    pl->node = node;
    pl->num_gpu = req->num_gpu;
    pl->gpu_milli = req->num_gpu ? req->gpu_milli : 0;
    if (req->num_gpu == 0)
        return GS_OK;
    if (is_share(req)) {
        pl->gpu_index[0] = (uint8_t)s->ops->pick_share(s, n, req, rng);
        return GS_OK;
    }
    /* Whole GPUs under every policy: the first num_gpu fully free GPUs by index. */
    uint32_t taken = 0;
    for (uint32_t g = 0; g < n->gpu_count && taken < req->num_gpu; g++)
        if (n->gpus[g].gpu_milli_free == n->gpus[g].gpu_milli)
            pl->gpu_index[taken++] = (uint8_t)g;
    return GS_OK;
}
