/*
 * The placement engine: filter, score, select and GPU pick. The six FGD-paper policies are one
 * file each (policy_*.c) behind sched_int.h, listed in the registry below; FGD's caches are
 * described in policy_fgd.c.
 */
#include "gpusched/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "alloc_int.h"
#include "cluster_int.h"
#include "sched_int.h"

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
        if (gs__frag_full(s, n))
            gs_frag_node_gpus(s->w, n->model_id, n->cpu_milli_free, n->gpus, n->gpu_count,
                              &s->nfrag[i]);
        else
            gs_frag_node(s->w, n->model_id, n->cpu_milli_free, n->gpu_free_desc, n->gpu_count,
                         &s->nfrag[i]);
        s->nfrag_gen[i] = n->gen;
    }
    if (out)
        *out = s->nfrag[i];
    return s->nfrag[i].total;
}

/* Counts every node afresh into frag_total; GS_ENOMEM leaves the count invalid. */
static int frag_recount(struct gs_sched *s)
{
    uint32_t n = gs_cluster_node_count(s->c);
    if (n > s->frag_cap) {
        uint32_t cap = s->frag_cap ? s->frag_cap : 64;
        while (cap < n)
            cap *= 2;
        int64_t *counted = gs__realloc(s->frag_counted, (size_t)cap * sizeof(*counted));
        if (!counted) {
            s->frag_valid = false;
            return GS_ENOMEM;
        }
        s->frag_counted = counted;
        s->frag_cap = cap;
    }
    memset(s->frag_counted, 0, (size_t)s->frag_cap * sizeof(*s->frag_counted));
    s->frag_total = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct gs_frag f;
        gs_sched_node_frag(s, i, &f);
        s->frag_counted[i] = f.total_count_milli;
        s->frag_total += f.total_count_milli;
    }
    s->frag_seen = gs_cluster_refreshes(s->c);
    s->frag_valid = true;
    return GS_OK;
}

/*
 * The cluster total is kept in integer fixed point (count-weighted milli-GPU, see struct
 * gs_frag), so adding and removing a node's share in any order gives exactly the sum counted
 * afresh. Only the nodes the cluster's refresh journal names since the last call are looked
 * at: O(1) per event in the simulator, which changes one node per pod. A journal that has
 * forgotten some refreshes, a grown node array or a new workload recounts every node.
 */
double gs_sched_cluster_frag(struct gs_sched *s)
{
    if (!s->w || s->w->n_pods_covered == 0)
        return 0;
    uint64_t now = gs_cluster_refreshes(s->c);
    bool recount = !s->frag_valid || gs_cluster_node_count(s->c) > s->frag_cap;
    for (uint64_t k = s->frag_seen; !recount && k < now; k++) {
        uint32_t i;
        if (!gs__journal_at(s->c, k, &i) || i >= s->frag_cap) {
            recount = true;
            break;
        }
        struct gs_frag f;
        gs_sched_node_frag(s, i, &f);
        s->frag_total += f.total_count_milli - s->frag_counted[i];
        s->frag_counted[i] = f.total_count_milli;
    }
    s->frag_seen = now;
    if (recount && frag_recount(s) != GS_OK) {
        /* Out of memory for the per-node counts: sum the nodes directly. */
        double sum = 0;
        uint32_t n = gs_cluster_node_count(s->c);
        for (uint32_t i = 0; i < n; i++)
            sum += gs_sched_node_frag(s, i, NULL);
        return sum;
    }
    return (double)s->frag_total / (double)s->w->n_pods_covered;
}

/* ---- GPU pick inside the chosen node ------------------------------------------------------ */

/* Shared pod, best fit: the GPU with the least free milli that still fits; lowest index on ties. */
uint32_t gs__pick_share_best(struct gs_sched *s, const struct gs_node *n,
                             const struct gs_pod_req *req, struct gs_rng *rng)
{
    (void)s;
    (void)rng;
    uint32_t best = 0;
    int32_t best_free = INT32_MAX;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        int32_t f = n->gpus[g].gpu_milli_free;
        if (f >= req->gpu_milli && f < best_free && n->gpus[g].sharing == GS_GPU_SHARE_MILLI) {
            best = g;
            best_free = f;
        }
    }
    return best;
}

/* Whole GPUs under every policy today: the pick of gs_node_pick_gpus() (share.c), the first
 * num_gpu fully free GPUs by index, or on a node with NVLink peers the topology's choice. */
void gs__pick_whole(struct gs_sched *s, const struct gs_node *n, const struct gs_pod_req *req,
                    uint8_t *gpu_index)
{
    (void)s;
    (void)gs__pick_whole_gpus(n, req->num_gpu, gpu_index);
}

/* ---- registry ----------------------------------------------------------------------------- */

static const struct policy_ops *const policies[GS_POLICY_COUNT] = {
    &gs__policy_random,  &gs__policy_dotprod, &gs__policy_clustering, &gs__policy_packing,
    &gs__policy_bestfit, &gs__policy_fgd,     &gs__policy_fgdband,    &gs__policy_fgdfill,
};

/* Policies that score against a target workload and cannot work without one. */
static bool needs_workload(const struct policy_ops *ops)
{
    return ops == &gs__policy_fgd || ops == &gs__policy_fgdband || ops == &gs__policy_fgdfill;
}

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
    return i < GS_POLICY_COUNT ? policies[i]->name : NULL;
}

const char *gs_policy_label(uint32_t i)
{
    return i < GS_POLICY_COUNT ? policies[i]->label : NULL;
}

int gs_policy_find(const char *name)
{
    for (uint32_t i = 0; i < GS_POLICY_COUNT; i++)
        if (strcmp(policies[i]->name, name) == 0)
            return (int)i;
    return -1;
}

int gs_sched_new(struct gs_cluster *c, const struct gs_sched_config *cfg, struct gs_sched **out)
{
    *out = NULL;
    int p = cfg->policy ? gs_policy_find(cfg->policy) : -1;
    if (p < 0)
        return GS_ENOENT;
    if (needs_workload(policies[p]) && (!cfg->workload || cfg->workload->n_types == 0))
        return GS_EINVAL;
    struct gs_sched *s = gs__calloc(1, sizeof(*s));
    if (!s)
        return GS_ENOMEM;
    s->c = c;
    s->ops = policies[p];
    s->w = cfg->workload;
    s->w_modes = gs_workload_has_modes(s->w);
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
    if (needs_workload(s->ops) && (!w || w->n_types == 0))
        return GS_EINVAL;
    s->w = w;
    s->w_modes = gs_workload_has_modes(w);
    s->frag_valid = false;
    /* Every cache below holds values computed against the old workload. */
    if (s->nfrag_gen)
        memset(s->nfrag_gen, 0, (size_t)s->nodes_cap * sizeof(*s->nfrag_gen));
    if (s->cache)
        memset(s->cache, 0, (size_t)s->nodes_cap * s->cache_classes * sizeof(*s->cache));
    if (s->memo)
        memset(s->memo, 0, (size_t)s->memo_cap * sizeof(*s->memo));
    s->memo_len = 0;
    gs__index_invalidate(s->ix);
    gs__fill_reset(s->fill);
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
    gs__free(s->frag_counted);
    gs__free(s->classes);
    gs__free(s->class_slots);
    gs__free(s->cache);
    gs__free(s->memo);
    gs__index_free(s->ix);
    gs__fill_free(s->fill);
    gs__free(s);
}

/*
 * The score of a node for a request of a kind beyond milli (memory, time-slice slots, MIG
 * instances): best fit on what the kind takes, the node left with the least of it free scoring
 * highest, min-max scaled to 0..100 over the feasible nodes. Every policy without a score_kind
 * of its own uses it for these kinds; FGD and FGD-band score memory and MIG requests by the
 * fragmentation gradient (policy_fgd_modes.c) and leave time-sliced slots to this one.
 */
static int64_t kind_free(const struct gs_node *n, const struct gs_pod_req *req)
{
    int64_t free_units = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (!gpu->healthy)
            continue;
        switch (gs_req_kind(req)) {
        case GS_REQ_MEMORY:
            if (gpu->sharing == GS_GPU_SHARE_MILLI)
                free_units += gpu->mem_mib_free;
            break;
        case GS_REQ_TIMESLICE:
            if (gpu->sharing == GS_GPU_SHARE_TIMESLICE)
                free_units += gpu->replicas - gpu->replicas_used;
            break;
        case GS_REQ_MIG:
            if (gpu->sharing == GS_GPU_SHARE_MIG)
                for (uint32_t k = 0; k < gpu->mig_count; k++)
                    free_units += !(gpu->mig_held >> k & 1);
            break;
        case GS_REQ_MILLI:
            break;
        }
    }
    return free_units;
}

static void score_kind(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf)
{
    /* The free amounts in a first pass over the nodes, kept in the score array (clamped to
     * int32: 16 GPUs of 128 GiB are 2 million MiB), which the second pass rescales in place. */
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    int32_t *v = s->scores;
    for (uint32_t k = 0; k < nf; k++) {
        int64_t f = kind_free(gs_cluster_node(s->c, s->feasible[k]), req);
        v[k] = f < INT32_MAX ? (int32_t)f : INT32_MAX;
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    for (uint32_t k = 0; k < nf; k++)
        v[k] = hi == lo ? 0 : (int32_t)((int64_t)(hi - v[k]) * 100 / ((int64_t)hi - lo));
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
    if (gs_req_wants_gpu(req) || nf < 2)
        return nf;
    uint32_t kept = 0;
    for (uint32_t k = 0; k < nf; k++)
        if (fit[feasible[k]].gpu_count == 0)
            feasible[kept++] = feasible[k];
    return kept > 0 ? kept : nf; /* none without GPUs: the list is untouched (nothing moved) */
}

/*
 * The filter's scan: the feasible nodes of class `cls` (its node set, or the one pinned node)
 * into s->feasible. Always inlined with a constant `how`, so that each kind of decision gets a
 * loop of its own and a plain milli request pays nothing for the other kinds.
 */
static inline __attribute__((always_inline)) uint32_t scan(struct gs_sched *s, uint32_t cls,
                                                           const uint64_t *set, uint32_t pin,
                                                           const struct gs_pod_req *req,
                                                           enum fit_how how)
{
    uint32_t n = gs_cluster_node_count(s->c);
    uint32_t nf = 0;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    if (!set) {
        /* A pod pinned to one node (filter.h): that node is judged alone, with no scan. */
        if (gs_filter_pass(s->c, cls, pin) && gs__fits(s->c, fit, pin, req, how))
            s->feasible[nf++] = pin;
    } else if (s->nodes_to_find == 0 || s->nodes_to_find >= n) {
        for (uint32_t w = 0; w < (n + 63) / 64; w++)
            for (uint64_t bits = set[w]; bits; bits &= bits - 1) {
                uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);
                if (i < n && gs__fits(s->c, fit, i, req, how))
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
                if (gs__fits(s->c, fit, i, req, how) &&
                    (s->feasible[nf++] = i, nf == s->nodes_to_find)) {
                    done = true;
                    break;
                }
            }
        }
        /* The next scan starts after the last node looked at; after a whole round, where it
         * began (as the plain scan, which stops there too). */
        s->next_start = done ? (i + 1 == n ? 0 : i + 1) : start;
    }
    return nf;
}

static int filter_and_score(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                            struct gs_rng *rng, uint32_t *nf_out)
{
    if (gs_pod_req_validate(req, NULL, 0) != GS_OK)
        return GS_EINVAL;
    int err = ensure_nodes(s);
    if (err)
        return err;
    const uint64_t *set = gs_filter_nodes(s->c, cls);
    uint32_t pin = UINT32_MAX;
    if (!set && !gs_filter_pinned(s->c, cls, &pin))
        return GS_EINVAL;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    uint32_t nf;
    switch (fit_how_of(req)) {
    case FIT_VIEW:
        nf = scan(s, cls, set, pin, req, FIT_VIEW);
        break;
    case FIT_SHARE:
        nf = scan(s, cls, set, pin, req, FIT_SHARE);
        break;
    default:
        nf = scan(s, cls, set, pin, req, FIT_ANY);
        break;
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
    if (gs_req_kind(req) != GS_REQ_MILLI) {
        err = s->ops->score_kind ? s->ops->score_kind(s, req, nf) : GS__KIND_SHARED;
        if (err == GS__KIND_SHARED)
            score_kind(s, req, nf);
        else if (err != GS_OK)
            return err;
    } else if ((err = s->ops->score(s, req, nf, rng)) != GS_OK)
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
    uint32_t node = 0;
    int err = gs_pod_req_validate(req, NULL, 0) != GS_OK ? GS_EINVAL : ensure_nodes(s);
    if (err)
        return err;
    /* The index gives the node the scan below would (sched_index.c), without the scan. */
    err = gs__index_best(s, req, cls, rng, &node);
    if (err == GS__INDEX_SCAN) {
        uint32_t nf;
        err = filter_and_score(s, req, cls, rng, &nf);
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
        node = s->feasible[best];
    } else if (err) {
        return err;
    }
    const struct gs_node *n = gs_cluster_node(s->c, node);
    if (gs_req_kind(req) != GS_REQ_MILLI) {
        err = s->ops->pick_kind ? s->ops->pick_kind(s, n, node, req, pl) : GS__KIND_SHARED;
        if (err == GS__KIND_SHARED)
            err = gs_node_pick_gpus(n, node, req, pl);
        return err == GS_OK ? GS_OK : GS_EUNSCHEDULABLE;
    }
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
    s->ops->pick_whole(s, n, req, pl->gpu_index);
    return GS_OK;
}
