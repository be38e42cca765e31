/*
 * The defragmentation planner (include/gpusched/defrag.h has the model, the rules of choice,
 * the search and its complexity). The search works on the caller's cluster in place: every
 * trial is a gs_cluster_unbind()/gs_cluster_bind() pair undone in reverse order, so the fit
 * check and GPU pick are the core's own (gs_node_fits(), gs_node_pick_gpus()), and a plan is
 * valid by construction when replayed from its first operation. Restores use
 * gs_cluster_adopt() of the placement a pod held, which puts back exactly what it held.
 */
#include "gpusched/defrag.h"

#include <string.h>

#include "core/alloc_int.h"
#include "gpusched/charge.h"
#include "gpusched/err.h"

/* Depth of the search tree at most: k evictions and k + 1 placements, and one to spare. */
#define LEVELS_MAX (2 * GS_DEFRAG_BUDGET_MAX + 2)

/* A pod still to place: the pending one or an evicted one. */
struct homeless {
    uint32_t pod;       /* index into pods, or GS_DEFRAG_PENDING */
    int64_t size_milli; /* its GPU charge; the largest is placed first */
};

/* The state of one search. */
struct search {
    struct gs_cluster *c;
    const struct gs_defrag_pod *pods;
    const struct gs_pod_req *pending;
    uint32_t nodes;                                  /* node slots of the cluster */
    uint32_t *node_first;                            /* movable pods of node i are */
    uint32_t *node_pods;                             /* node_pods[node_first[i]..[i+1]) */
    int64_t *charge_milli;                           /* per pod: GPU charge, milli */
    bool *moved;                                     /* per pod: evicted in this branch */
    uint32_t *tried;                                 /* LEVELS_MAX x nodes: dedupe lists */
    struct homeless home[GS_DEFRAG_BUDGET_MAX + 1];  /* pods still to place */
    uint32_t n_home;                                 /* entries in home */
    struct gs_defrag_op path[GS_DEFRAG_OPS_MAX + 1]; /* operations of this branch */
    uint32_t n_path;                                 /* entries in path */
    uint32_t level;                                  /* recursion depth */
    uint32_t k;                                      /* moves allowed at this depth */
    uint32_t moves;                                  /* pods evicted in this branch */
    int64_t gpu_milli;                               /* their charge */
    bool have_best;                                  /* best holds a plan */
    struct gs_defrag_plan best;                      /* the best plan so far */
    uint64_t evals, evals_max;                       /* fit trials made and allowed */
    bool stopped;                                    /* evals_max reached */
    int err;                                         /* first error (EINVAL); GS_OK */
};

static const struct gs_pod_req *req_of(const struct search *s, uint32_t pod)
{
    return pod == GS_DEFRAG_PENDING ? s->pending : &s->pods[pod].req;
}

/* A node the planner may place on: present and not cordoned. */
static bool usable(const struct gs_node *nd)
{
    return nd != NULL && nd->present && !nd->unschedulable;
}

/* gs_node_fits(), counted against evals_max. */
static bool fits(struct search *s, uint32_t node, const struct gs_pod_req *req)
{
    if (s->evals >= s->evals_max) {
        s->stopped = true;
        return false;
    }
    s->evals++;
    return gs_node_fits(gs_cluster_node(s->c, node), req);
}

static bool same_placement(const struct gs_placement *a, const struct gs_placement *b)
{
    if (a->node != b->node || a->num_gpu != b->num_gpu || a->gpu_milli != b->gpu_milli ||
        a->mig_count != b->mig_count)
        return false;
    for (uint32_t i = 0; i < a->num_gpu; i++)
        if (a->gpu_index[i] != b->gpu_index[i] || a->gpu_mem_mib[i] != b->gpu_mem_mib[i])
            return false;
    for (uint32_t i = 0; i < a->mig_count; i++)
        if (a->mig[i].gpu != b->mig[i].gpu || a->mig[i].profile != b->mig[i].profile ||
            a->mig[i].start != b->mig[i].start)
            return false;
    return true;
}

/* Takes pod `p` off its node for a trial (counted with the fit trials). */
static bool evict(struct search *s, uint32_t p)
{
    s->evals++;
    if (gs_cluster_unbind(s->c, &s->pods[p].req, &s->pods[p].pl) != GS_OK) {
        s->err = GS_EINVAL; /* the caller's placement is not what the cluster holds */
        return false;
    }
    return true;
}

/* Puts pod `p` back exactly where it was (undoes evict()). */
static void restore(struct search *s, uint32_t p)
{
    (void)gs_cluster_adopt(s->c, &s->pods[p].req, &s->pods[p].pl); /* exact restore */
}

/* Movable pods of `node` not moved in this branch, into out[]; returns how many. */
static uint32_t unmoved_on(const struct search *s, uint32_t node, uint32_t *out)
{
    uint32_t m = 0;
    for (uint32_t i = s->node_first[node]; i < s->node_first[node + 1]; i++)
        if (!s->moved[s->node_pods[i]])
            out[m++] = s->node_pods[i];
    return m;
}

static void record(struct search *s)
{
    if (s->have_best && s->gpu_milli >= s->best.gpu_milli_moved)
        return;
    struct gs_defrag_plan *b = &s->best;
    b->pods_moved = s->moves;
    b->gpu_milli_moved = s->gpu_milli;
    b->n_ops = s->n_path;
    memcpy(b->ops, s->path, sizeof(s->path[0]) * s->n_path);
    for (uint32_t i = 0; i < s->n_path; i++)
        if (s->path[i].kind == GS_DEFRAG_PLACE && s->path[i].pod == GS_DEFRAG_PENDING)
            b->pending_pl = s->path[i].pl;
    s->have_best = true;
}

static void dfs(struct search *s);

/* (a) Places homeless `h` on a node where it fits as it is, trying each node (see header). */
static void place_direct(struct search *s, struct homeless h, bool last)
{
    const struct gs_pod_req *req = req_of(s, h.pod);
    uint32_t *tried = s->tried + (size_t)s->level * s->nodes;
    uint32_t n_tried = 0;
    const struct gs_node_fit *fit = gs_cluster_fit_array(s->c);
    for (uint32_t node = 0; node < s->nodes && !s->stopped && !s->err; node++) {
        if (!usable(gs_cluster_node(s->c, node)) || !fits(s, node, req))
            continue;
        struct gs_placement pl;
        if (gs_node_pick_gpus(gs_cluster_node(s->c, node), node, req, &pl) != GS_OK)
            continue;
        if (h.pod != GS_DEFRAG_PENDING && same_placement(&pl, &s->pods[h.pod].pl))
            continue; /* a move back onto what it left changes nothing */
        /* Nodes with the same packed view and no movable pod are the same to every later step
         * (for requests the view decides, without other resources). */
        bool plain = s->node_first[node] == s->node_first[node + 1] &&
                     gs_fit_decides(&fit[node], req) && req->xres_count == 0;
        if (plain) {
            bool seen = false;
            for (uint32_t t = 0; t < n_tried && !seen; t++)
                seen = memcmp(&fit[tried[t]], &fit[node], sizeof(fit[node])) == 0;
            if (seen)
                continue;
            tried[n_tried++] = node;
        }
        if (gs_cluster_bind(s->c, req, &pl) != GS_OK)
            continue;
        s->path[s->n_path++] = (struct gs_defrag_op){GS_DEFRAG_PLACE, h.pod, pl};
        dfs(s);
        s->n_path--;
        (void)gs_cluster_unbind(s->c, req, &pl);
        if (last)
            break; /* the last pod to place: where it lands decides nothing later */
        fit = gs_cluster_fit_array(s->c);
    }
}

/* Tries eviction set pods e[0..size) on `node` for homeless `h` (the set is off the node). */
static void try_set(struct search *s, struct homeless h, uint32_t node, const uint32_t *e,
                    uint32_t size, int64_t cost_milli)
{
    const struct gs_pod_req *req = req_of(s, h.pod);
    if (!fits(s, node, req))
        return;
    /* Minimal: no proper subset of E makes room. Fitting is monotone in what is freed, so a
     * working proper subset F would make every set between F and E work, E minus one pod of E
     * not in F among them: checking the |E| sets one pod smaller is enough. */
    for (uint32_t x = 0; x < size; x++) {
        restore(s, e[x]);
        bool f = fits(s, node, req);
        if (!evict(s, e[x]))
            return;
        if (f || s->stopped)
            return;
    }
    struct gs_placement pl;
    if (gs_node_pick_gpus(gs_cluster_node(s->c, node), node, req, &pl) != GS_OK ||
        gs_cluster_bind(s->c, req, &pl) != GS_OK)
        return;
    uint32_t path0 = s->n_path, home0 = s->n_home;
    for (uint32_t i = 0; i < size; i++) {
        s->path[s->n_path++] = (struct gs_defrag_op){GS_DEFRAG_EVICT, e[i], s->pods[e[i]].pl};
        s->moved[e[i]] = true;
        s->home[s->n_home++] = (struct homeless){e[i], s->charge_milli[e[i]]};
    }
    s->path[s->n_path++] = (struct gs_defrag_op){GS_DEFRAG_PLACE, h.pod, pl};
    s->moves += size;
    s->gpu_milli += cost_milli;
    dfs(s);
    s->moves -= size;
    s->gpu_milli -= cost_milli;
    for (uint32_t i = 0; i < size; i++)
        s->moved[e[i]] = false;
    s->n_path = path0;
    s->n_home = home0;
    (void)gs_cluster_unbind(s->c, req, &pl);
}

/*
 * A necessary condition for "`req` fits on node `nd` once the pods cand[0..m) are gone", by
 * arithmetic on what they hold: CPU, memory, pod slots and, for a milli request, the GPUs
 * that would have gpu_milli free. An upper bound on what eviction frees (it ignores memory
 * bounds and sharing modes), so false means no set of them makes room; true means try.
 */
static bool could_fit(const struct search *s, const struct gs_node *nd, const uint32_t *cand,
                      uint32_t m, const struct gs_pod_req *req)
{
    int64_t cpu = nd->cpu_milli - nd->cpu_milli_used, mem = nd->mem_mib - nd->mem_mib_used;
    int64_t slots = (int64_t)nd->pods_max - nd->pods + m;
    int64_t gpu_free[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < nd->gpu_count; g++)
        gpu_free[g] = nd->gpus[g].gpu_milli_free;
    for (uint32_t i = 0; i < m; i++) {
        const struct gs_defrag_pod *p = &s->pods[cand[i]];
        cpu += p->req.cpu_milli;
        mem += p->req.mem_mib;
        for (uint32_t k = 0; k < p->pl.num_gpu; k++)
            if (p->pl.gpu_index[k] < nd->gpu_count)
                gpu_free[p->pl.gpu_index[k]] += p->pl.gpu_milli;
    }
    if (req->cpu_milli > cpu || req->mem_mib > mem || slots <= 0)
        return false;
    if (gs_req_kind(req) != GS_REQ_MILLI || req->num_gpu == 0)
        return true;
    if (req->gpu_model_mask != GS_MODEL_ANY &&
        (nd->model_id >= 64 || !(req->gpu_model_mask & (UINT64_C(1) << nd->model_id))))
        return false;
    uint32_t enough = 0;
    for (uint32_t g = 0; g < nd->gpu_count; g++)
        enough += gpu_free[g] >= req->gpu_milli;
    return enough >= req->num_gpu;
}

/* (b) Places homeless `h` on a node after evicting a minimal set of its movable pods. */
static void place_evicting(struct search *s, struct homeless h, uint32_t *cand)
{
    const struct gs_pod_req *req = req_of(s, h.pod);
    uint32_t left = s->k - s->moves;
    for (uint32_t node = 0; node < s->nodes && !s->stopped && !s->err; node++) {
        if (!usable(gs_cluster_node(s->c, node)))
            continue;
        uint32_t m = unmoved_on(s, node, cand);
        if (m == 0 || !could_fit(s, gs_cluster_node(s->c, node), cand, m, req) ||
            fits(s, node, req))
            continue; /* nothing to evict, not enough to free, or nothing needs evicting */
        /* Worth a look only if it fits with every movable pod gone. */
        uint32_t off = 0;
        while (off < m && evict(s, cand[off]))
            off++;
        bool room = off == m && fits(s, node, req);
        while (off > 0)
            restore(s, cand[--off]);
        if (!room || s->err)
            continue;
        uint32_t most = m < left ? m : left;
        for (uint32_t size = 1; size <= most && !s->stopped && !s->err; size++) {
            uint32_t idx[GS_DEFRAG_BUDGET_MAX], e[GS_DEFRAG_BUDGET_MAX];
            for (uint32_t i = 0; i < size; i++)
                idx[i] = i;
            for (;;) {
                int64_t cost = 0;
                for (uint32_t i = 0; i < size; i++) {
                    e[i] = cand[idx[i]];
                    cost += s->charge_milli[e[i]];
                }
                if ((!s->have_best || s->gpu_milli + cost < s->best.gpu_milli_moved) &&
                    could_fit(s, gs_cluster_node(s->c, node), e, size, req)) {
                    uint32_t done = 0;
                    while (done < size && evict(s, e[done]))
                        done++;
                    if (done == size)
                        try_set(s, h, node, e, size, cost);
                    while (done > 0)
                        restore(s, e[--done]);
                }
                if (s->stopped || s->err)
                    break;
                /* Next combination of `size` out of m, lexicographic. */
                int32_t i = (int32_t)size - 1;
                while (i >= 0 && idx[i] == m - size + (uint32_t)i)
                    i--;
                if (i < 0)
                    break;
                idx[i]++;
                for (uint32_t j = (uint32_t)i + 1; j < size; j++)
                    idx[j] = idx[j - 1] + 1;
            }
        }
    }
}

static void dfs(struct search *s)
{
    if (s->stopped || s->err)
        return;
    if (s->n_home == 0) {
        record(s);
        return;
    }
    if (s->have_best && s->gpu_milli >= s->best.gpu_milli_moved)
        return;
    uint32_t pick = 0;
    for (uint32_t i = 1; i < s->n_home; i++)
        if (s->home[i].size_milli > s->home[pick].size_milli)
            pick = i;
    struct homeless h = s->home[pick];
    s->home[pick] = s->home[--s->n_home];
    s->level++;
    place_direct(s, h, s->n_home == 0);
    if (s->moves < s->k) {
        uint32_t cand[64];
        uint32_t most = 0;
        for (uint32_t i = 0; i < s->nodes; i++) {
            uint32_t cnt = s->node_first[i + 1] - s->node_first[i];
            most = cnt > most ? cnt : most;
        }
        if (most <= 64) {
            place_evicting(s, h, cand);
        } else {
            uint32_t *big = gs__malloc(sizeof(uint32_t) * most);
            if (!big)
                s->err = GS_ENOMEM;
            else
                place_evicting(s, h, big);
            gs__free(big);
        }
    }
    s->level--;
    s->home[s->n_home++] = s->home[pick];
    s->home[pick] = h;
}

static int build(struct search *s, uint32_t n)
{
    s->node_first = gs__calloc((size_t)s->nodes + 1, sizeof(uint32_t));
    s->node_pods = gs__calloc((size_t)n + 1, sizeof(uint32_t));
    s->charge_milli = gs__calloc((size_t)n + 1, sizeof(int64_t));
    s->moved = gs__calloc((size_t)n + 1, sizeof(bool));
    s->tried = gs__calloc((size_t)LEVELS_MAX * (s->nodes + 1), sizeof(uint32_t));
    if (!s->node_first || !s->node_pods || !s->charge_milli || !s->moved || !s->tried)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        if (!s->pods[i].movable)
            continue;
        uint32_t node = s->pods[i].pl.node;
        if (node >= s->nodes || !gs_cluster_node(s->c, node)->present)
            return GS_EINVAL;
        double gpus = 0;
        if (gs_charge_placement(s->c, &s->pods[i].req, &s->pods[i].pl, &gpus) != GS_OK)
            return GS_EINVAL;
        s->charge_milli[i] = gs_charge_milli(gpus);
        s->node_first[node + 1]++;
    }
    for (uint32_t i = 0; i < s->nodes; i++)
        s->node_first[i + 1] += s->node_first[i];
    uint32_t *fill = gs__calloc((size_t)s->nodes + 1, sizeof(uint32_t));
    if (!fill)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        if (s->pods[i].movable) {
            uint32_t node = s->pods[i].pl.node;
            s->node_pods[s->node_first[node] + fill[node]++] = i;
        }
    gs__free(fill);
    return GS_OK;
}

int gs_defrag_plan(struct gs_cluster *c, const struct gs_defrag_pod *pods, uint32_t n,
                   const struct gs_pod_req *pending, const struct gs_defrag_config *cfg,
                   struct gs_defrag_plan *out)
{
    if (out)
        memset(out, 0, sizeof(*out));
    if (!c || (!pods && n > 0) || !pending || !cfg || !out || cfg->budget_pods < 1 ||
        cfg->budget_pods > GS_DEFRAG_BUDGET_MAX || gs_pod_req_validate(pending, NULL, 0) != GS_OK)
        return GS_EINVAL;
    struct search *s = gs__calloc(1, sizeof(*s));
    if (!s)
        return GS_ENOMEM;
    s->c = c;
    s->pods = pods;
    s->pending = pending;
    s->nodes = gs_cluster_node_count(c);
    s->evals_max = cfg->evals_max ? cfg->evals_max : GS_DEFRAG_EVALS_DEFAULT;
    int err = build(s, n);
    if (err)
        goto out;
    /* Moves never add to what the usable nodes have free in total (a moved pod only lands on
     * a usable node; free is max(0, allocatable - used), so leaving an over-committed node
     * frees less than the pod takes elsewhere): a request above that total has no plan,
     * however many moves. A GPU with known memory derives its free milli from the memory left
     * too, with rounding, so it counts 1 milli of slack. */
    int64_t cpu_free = 0, mem_free = 0, gpu_free = 0;
    for (uint32_t i = 0; i < s->nodes; i++) {
        const struct gs_node *nd = gs_cluster_node(c, i);
        if (!usable(nd))
            continue;
        cpu_free += nd->cpu_milli_free;
        mem_free += nd->mem_mib_free;
        gpu_free += nd->gpu_milli_free_total;
        for (uint32_t g = 0; g < nd->gpu_count; g++)
            gpu_free += nd->gpus[g].mem_mib > 0;
    }
    if (pending->cpu_milli > cpu_free || pending->mem_mib > mem_free ||
        (gs_req_kind(pending) == GS_REQ_MILLI &&
         (int64_t)pending->num_gpu * pending->gpu_milli > gpu_free)) {
        err = GS_ENOENT;
        goto out;
    }
    double pend_gpus = 0;
    (void)gs_charge_request(c, pending, &pend_gpus);
    /* Depth 0 is the zero-move plan: the pod fits as the cluster is. */
    for (uint32_t k = 0; k <= cfg->budget_pods && !s->have_best; k++) {
        s->k = k;
        s->n_home = 1;
        s->home[0] = (struct homeless){GS_DEFRAG_PENDING, gs_charge_milli(pend_gpus)};
        dfs(s);
        if (s->err || s->stopped)
            break;
    }
    err = s->err;
    if (err)
        goto out;
    if (s->have_best) {
        *out = s->best;
        out->exact = !s->stopped;
    } else {
        err = s->stopped ? GS_ELIMIT : GS_ENOENT;
    }
    out->evals = s->evals;
out:
    if (err)
        memset(out, 0, sizeof(*out));
    gs__free(s->node_first);
    gs__free(s->node_pods);
    gs__free(s->charge_milli);
    gs__free(s->moved);
    gs__free(s->tried);
    gs__free(s);
    return err;
}
