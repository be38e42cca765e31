/*
 * FGD-fill: FGD (policy_fgd.c) with a lookahead over the pods that will fill the node, a
 * policy of ours (issue 12, "a policy of ours that beats FGD"; docs/fgd-policies.md §7).
 *
 * FGD scores a placement by the change of F(node), the idle GPU the *next* pod drawn from the
 * target workload could not use. Where FGD loses GPUs on the openb traces is further ahead: a
 * node's GPUs stay idle once its CPU is gone, or its GPUs are cut into pieces no type fits,
 * after several more pods have landed on it. FGD-fill adds to dF the change of W(node), the
 * idle GPU expected to be left on the node once random pods of the target workload, drawn among
 * the types that still fit it, have filled it until no GPU type fits: a Monte Carlo rollout of
 * the node's future, the "rollout" of Bertsekas, Tsitsiklis and Wu, "Rollout algorithms for
 * combinatorial optimization" (J. Heuristics 3, 1997), with a random base policy, evaluated per
 * node since a placement changes only its node. A node's rollouts draw type t with weight
 * count(t) x total GPUs / GPUs of the models t may use, so a type constrained to a few models
 * weighs more on their nodes, where all of it must land. Rollouts use common random numbers
 * (rollout r draws from a stream seeded by r alone, for every state), so W is a pure function
 * of the node's state, memoised on it. W is still an estimate, and a run can hinge on the
 * difference of two estimates: with one set of 32 rollouts, multigpu30 was left with 5.7 % of
 * its GPUs unallocated against FGD's 3.7 %, with 64 rollouts gpuspec20 was, 5.9 % against 5.4
 * (docs/fgd-policies.md §7.1). So W is estimated by two sets of 32 rollouts (streams 0-31 and
 * 32-63), and dW counts only where the two agree on its sign, then the smaller in magnitude:
 * the lookahead moves a placement only where both estimates see the same effect.
 *
 * The score is FGD's with dF replaced by dF + dW: trunc(100 x sigmoid(-(dF + dW) / 1000)), the
 * GPU of a shared pod the one of least dF + dW. Then, as FGD-band (policy_fgdband.c), every
 * node within one point of the best counts as the best for a pod that is not a GPU share, and
 * the random node rank chooses among them. Nodes whose fragmentation needs the per-GPU measure
 * (whole-mode, time-sliced or MIG GPUs, or a workload with such types) and requests beyond
 * milli keep FGD's score and pick.
 *
 * It is an online policy: it uses the target workload FGD uses, the cluster state and its own
 * fixed random streams, nothing of the pods to come.
 */
#include "sched_int.h"

#include <string.h>

#include "alloc_int.h"
#include "gpusched/err.h"

/* Rollouts per set (each of the two estimates of W is a mean over these), the longest
 * rollout, the most types a rollout draws from, the most memo entries. */
#define FILL_ROLLOUTS 32
#define FILL_TYPES_MAX 512
#define FILL_STEPS_MAX 96
#define FILL_MEMO_MAX (1u << 20)
/* Scores within FILL_BAND_POINTS of the best count as the best (pods that are not shares). */
#define FILL_BAND_POINTS 1

struct fill_entry {
    uint64_t hash; /* 0 = empty */
    int64_t cpu;
    uint32_t model;
    uint32_t n_gpu;
    int16_t free_desc[GS_NODE_GPUS_MAX];
    double waste[2]; /* W by rollout set 0 and set 1 */
};

struct delta_entry {
    uint64_t gen; /* 0 = empty */
    double delta;
    uint32_t gpu;
};

struct gs__fill {
    struct fill_entry *memo;
    uint32_t cap, len;
    struct delta_entry *dc; /* [node * width + cls] */
    uint32_t nodes, width;
    uint64_t *weight; /* per type of the workload: its draw weight in a rollout */
    uint32_t n_weight;
};

void gs__fill_free(struct gs__fill *f)
{
    if (!f)
        return;
    gs__free(f->memo);
    gs__free(f->dc);
    gs__free(f->weight);
    gs__free(f);
}

void gs__fill_reset(struct gs__fill *f)
{
    if (f && f->memo) {
        memset(f->memo, 0, (size_t)f->cap * sizeof(*f->memo));
        f->len = 0;
    }
    if (f && f->dc)
        memset(f->dc, 0, (size_t)f->nodes * f->width * sizeof(*f->dc));
    if (f) {
        gs__free(f->weight);
        f->weight = NULL;
        f->n_weight = 0;
    }
}

/* Draw weights: a type's count, scaled by total GPUs / GPUs of the models it may use, so a
 * type constrained to a few models weighs more on their nodes, where all of it must land. */
static int fill_weights(struct gs_sched *s)
{
    struct gs__fill *f = s->fill;
    if (f->weight && f->n_weight == s->w->n_types)
        return GS_OK;
    gs__free(f->weight);
    f->weight = gs__calloc(s->w->n_types ? s->w->n_types : 1, sizeof(*f->weight));
    if (!f->weight)
        return GS_ENOMEM;
    f->n_weight = s->w->n_types;
    double per_model[64] = {0}, total = 0;
    uint32_t nn = gs_cluster_node_count(s->c);
    for (uint32_t i = 0; i < nn; i++) {
        const struct gs_node *n = gs_cluster_node(s->c, i);
        if (!n->present || n->gpu_count == 0)
            continue;
        if (n->model_id < 64)
            per_model[n->model_id] += n->gpu_count;
        total += n->gpu_count;
    }
    for (uint32_t t = 0; t < s->w->n_types; t++) {
        const struct gs_task_type *m = &s->w->types[t];
        double allowed = total;
        if (m->gpu_milli > 0 && m->gpu_model_mask != GS_MODEL_ANY) {
            allowed = 0;
            for (uint32_t k = 0; k < 64; k++)
                if (m->gpu_model_mask & (UINT64_C(1) << k))
                    allowed += per_model[k];
        }
        double wv = allowed > 0 ? (double)m->count * 1024.0 * total / allowed : 0;
        f->weight[t] = (uint64_t)wv;
    }
    return GS_OK;
}

static uint64_t rng_step(uint64_t *x)
{
    *x += UINT64_C(0x9e3779b97f4a7c15);
    return mix64(*x);
}

/* The types a rollout on a node of one model draws from (milli types allowed on the model). */
struct fill_type {
    int64_t cpu;
    int32_t milli;
    uint32_t num_gpu;
    uint64_t weight;
};

/*
 * W(state): the idle GPU milli expected to be left on a node state once pods of the target
 * workload, drawn one after another among the types that still fit (by weight), have filled it
 * until no GPU type fits. The mean over `rollouts` rollouts, rollout r drawing from a stream
 * seeded by r alone (common random numbers: every state sees the same streams, so differences
 * of W between two states are not drowned in sampling noise, and W is a pure function).
 */
static double fill_eval(const struct gs_workload *w, const uint64_t *wt, uint32_t model,
                        int64_t cpu0, const int32_t *free0, uint32_t n_gpu, int rollouts, int first)
{
    uint64_t model_bit = model < 64 ? UINT64_C(1) << model : 0;
    struct fill_type ty[FILL_TYPES_MAX];
    uint32_t nt = 0;
    for (uint32_t t = 0; t < w->n_types && nt < FILL_TYPES_MAX; t++) {
        const struct gs_task_type *m = &w->types[t];
        if (m->kind != GS_REQ_MILLI || wt[t] == 0 ||
            (m->gpu_milli > 0 && m->gpu_model_mask != GS_MODEL_ANY &&
             !(m->gpu_model_mask & model_bit)))
            continue;
        ty[nt++] = (struct fill_type){m->cpu_milli, m->gpu_milli, m->num_gpu, wt[t]};
    }
    uint32_t ok[FILL_TYPES_MAX];
    double sum = 0;
    for (int r = 0; r < rollouts; r++) {
        uint64_t x = (uint64_t)(first + r) * UINT64_C(0x2545f4914f6cdd1d) + 1;
        int32_t fr[GS_NODE_GPUS_MAX];
        memcpy(fr, free0, n_gpu * sizeof(*fr));
        int64_t cpu = cpu0;
        for (int step = 0; step < FILL_STEPS_MAX; step++) {
            int32_t max_free = 0;
            uint32_t n_full = 0;
            for (uint32_t g = 0; g < n_gpu; g++) {
                max_free = fr[g] > max_free ? fr[g] : max_free;
                n_full += fr[g] >= GS_GPU_MILLI;
            }
            uint32_t nok = 0;
            uint64_t tot = 0;
            bool gpu_fits = false;
            for (uint32_t t = 0; t < nt; t++) {
                const struct fill_type *m = &ty[t];
                if (cpu < m->cpu)
                    continue;
                if (m->milli > 0) {
                    if (m->milli < GS_GPU_MILLI ? max_free < m->milli : n_full < m->num_gpu)
                        continue;
                    gpu_fits = true;
                }
                ok[nok++] = t;
                tot += m->weight;
            }
            /* Resources only shrink: once no GPU type fits, none will, and the idle GPU stays. */
            if (!gpu_fits)
                break;
            uint64_t u = rng_step(&x) % tot;
            uint32_t pick = ok[nok - 1];
            for (uint32_t k = 0; k < nok; k++) {
                if (u < ty[ok[k]].weight) {
                    pick = ok[k];
                    break;
                }
                u -= ty[ok[k]].weight;
            }
            const struct fill_type *m = &ty[pick];
            cpu -= m->cpu;
            if (m->milli == 0)
                continue;
            if (m->milli < GS_GPU_MILLI) {
                /* A share: best fit, the GPU with the least free milli that fits. */
                uint32_t best = n_gpu;
                for (uint32_t g = 0; g < n_gpu; g++)
                    if (fr[g] >= m->milli && (best == n_gpu || fr[g] < fr[best]))
                        best = g;
                fr[best] -= m->milli;
            } else {
                uint32_t taken = 0;
                for (uint32_t g = 0; g < n_gpu && taken < m->num_gpu; g++)
                    if (fr[g] >= GS_GPU_MILLI) {
                        fr[g] = 0;
                        taken++;
                    }
            }
        }
        for (uint32_t g = 0; g < n_gpu; g++)
            sum += fr[g];
    }
    return sum / rollouts;
}

/* W of a state (free list in any order) by each rollout set, into wv[0..2); memoised. */
static void fill_waste(struct gs_sched *s, uint32_t model, int64_t cpu, const int32_t *free_any,
                       uint32_t n_gpu, double *wv)
{
    int32_t fr[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < n_gpu; g++) {
        int32_t v = free_any[g];
        uint32_t j = g;
        while (j > 0 && fr[j - 1] < v) {
            fr[j] = fr[j - 1];
            j--;
        }
        fr[j] = v;
    }
    struct gs__fill *f = s->fill;
    uint64_t h = mix64(((uint64_t)model << 32) ^ n_gpu);
    h = mix64(h ^ (uint64_t)cpu);
    for (uint32_t g = 0; g < n_gpu; g++)
        h = mix64(h ^ (uint64_t)(uint32_t)fr[g] ^ ((uint64_t)g << 48));
    h |= 1;
    uint32_t mask = f->cap - 1, i = (uint32_t)h & mask;
    while (f->memo[i].hash) {
        struct fill_entry *e = &f->memo[i];
        if (e->hash == h && e->cpu == cpu && e->model == model && e->n_gpu == n_gpu) {
            bool same = true;
            for (uint32_t g = 0; g < n_gpu && same; g++)
                same = e->free_desc[g] == fr[g];
            if (same) {
                wv[0] = e->waste[0];
                wv[1] = e->waste[1];
                return;
            }
        }
        i = (i + 1) & mask;
    }
    for (int set = 0; set < 2; set++)
        wv[set] = fill_eval(s->w, s->fill->weight, model, cpu, fr, n_gpu, FILL_ROLLOUTS,
                            set * FILL_ROLLOUTS);
    if ((f->len + 1) * 2 > f->cap) {
        uint32_t cap = f->cap < FILL_MEMO_MAX ? f->cap * 2 : f->cap;
        struct fill_entry *memo = gs__calloc(cap, sizeof(*memo));
        if (!memo)
            return;
        if (cap > f->cap) {
            for (uint32_t k = 0; k < f->cap; k++) {
                if (!f->memo[k].hash)
                    continue;
                uint32_t j = (uint32_t)f->memo[k].hash & (cap - 1);
                while (memo[j].hash)
                    j = (j + 1) & (cap - 1);
                memo[j] = f->memo[k];
            }
        } else {
            f->len = 0;
        }
        gs__free(f->memo);
        f->memo = memo;
        f->cap = cap;
        mask = cap - 1;
        i = (uint32_t)h & mask;
        while (f->memo[i].hash)
            i = (i + 1) & mask;
    }
    struct fill_entry *e = &f->memo[i];
    e->hash = h;
    e->cpu = cpu;
    e->model = model;
    e->n_gpu = n_gpu;
    for (uint32_t g = 0; g < n_gpu; g++)
        e->free_desc[g] = (int16_t)fr[g];
    e->waste[0] = wv[0];
    e->waste[1] = wv[1];
    f->len++;
}

/* dF + dW of placing milli request req on node n (index `node`): on GPU `gpu` for a share,
 * on the first req->num_gpu fully free GPUs otherwise (gpu < 0). */
static double fill_delta(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                         const struct gs_pod_req *req, int32_t gpu)
{
    int32_t fr[GS_NODE_GPUS_MAX];
    for (uint32_t g = 0; g < n->gpu_count; g++)
        fr[g] = n->gpus[g].gpu_milli_free;
    double w_before[2], w_after[2];
    fill_waste(s, n->model_id, n->cpu_milli_free, fr, n->gpu_count, w_before);
    int64_t cpu_after = n->cpu_milli_free - gs_cpu_nonzero(req->cpu_milli);
    if (gpu >= 0) {
        fr[gpu] -= req->gpu_milli;
    } else {
        uint32_t taken = 0;
        for (uint32_t g = 0; g < n->gpu_count && taken < req->num_gpu; g++)
            if (n->gpus[g].gpu_milli_free == n->gpus[g].gpu_milli) {
                fr[g] = 0;
                taken++;
            }
    }
    fill_waste(s, n->model_id, cpu_after, fr, n->gpu_count, w_after);
    double f_before = gs_sched_node_frag(s, node, NULL);
    double f_after = gs_frag_node(s->w, n->model_id, cpu_after, fr, n->gpu_count, NULL);
    /* dW where the two rollout sets agree on its sign, the smaller of the two; else 0. */
    double d0 = w_after[0] - w_before[0], d1 = w_after[1] - w_before[1], dw = 0;
    if (d0 > 0 && d1 > 0)
        dw = d0 < d1 ? d0 : d1;
    else if (d0 < 0 && d1 < 0)
        dw = d0 > d1 ? d0 : d1;
    return (f_after - f_before) + dw;
}

/* The least dF + dW of req on node n and its GPU (*gpu; a share's, else 0). */
static double fill_node_raw(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                            const struct gs_pod_req *req, uint32_t *gpu)
{
    *gpu = 0;
    if (!is_share(req))
        return fill_delta(s, n, node, req, -1);
    double best = 0;
    bool any = false;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        if (n->gpus[g].gpu_milli_free < req->gpu_milli || n->gpus[g].sharing != GS_GPU_SHARE_MILLI)
            continue;
        double d = fill_delta(s, n, node, req, (int32_t)g);
        if (!any || d < best) {
            best = d;
            *gpu = g;
            any = true;
        }
    }
    return best;
}

/* Makes the delta cache cover `nodes` nodes and class `cls`. GS_OK or GS_ENOMEM. */
static int ensure_dc(struct gs__fill *f, uint32_t nodes, uint32_t cls)
{
    if (f->dc && nodes <= f->nodes && cls < f->width)
        return GS_OK;
    uint32_t width = f->width ? f->width : 16;
    while (width <= cls)
        width *= 2;
    uint32_t nn = nodes > f->nodes ? nodes : f->nodes;
    struct delta_entry *dc = gs__calloc((size_t)nn * width, sizeof(*dc));
    if (!dc)
        return GS_ENOMEM;
    for (uint32_t n = 0; n < f->nodes && f->dc; n++)
        memcpy(dc + (size_t)n * width, f->dc + (size_t)n * f->width, f->width * sizeof(*dc));
    gs__free(f->dc);
    f->dc = dc;
    f->nodes = nn;
    f->width = width;
    return GS_OK;
}

/* The FGD-fill score of node `node` (class `cls`), through the per-(node, class) cache;
 * *gpu: a share's GPU. */
static int32_t fill_node(struct gs_sched *s, uint32_t node, uint32_t cls,
                         const struct gs_pod_req *req, uint32_t *gpu)
{
    struct gs__fill *f = s->fill;
    const struct gs_node *n = gs_cluster_node(s->c, node);
    struct delta_entry *e = &f->dc[(size_t)node * f->width + cls];
    if (e->gen != n->gen) {
        e->delta = fill_node_raw(s, n, node, req, &e->gpu);
        e->gen = n->gen;
    }
    *gpu = e->gpu;
    return gs__fgd_score_of(0.0, e->delta);
}

/* Everything score() needs before its first node: the class, the memo, the weights. */
static int fill_prepare(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls)
{
    int err = gs__fgd_class(s, req, cls);
    if (err)
        return err;
    if (!s->fill) {
        s->fill = gs__calloc(1, sizeof(*s->fill));
        if (!s->fill)
            return GS_ENOMEM;
    }
    if (!s->fill->memo) {
        s->fill->memo = gs__calloc(1u << 12, sizeof(*s->fill->memo));
        if (!s->fill->memo)
            return GS_ENOMEM;
        s->fill->cap = 1u << 12;
        s->fill->len = 0;
    }
    if ((err = fill_weights(s)) != GS_OK)
        return err;
    return ensure_dc(s->fill, gs_cluster_node_count(s->c), *cls);
}

static int score_fgdfill(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf,
                         struct gs_rng *rng)
{
    uint32_t cls;
    int err = s->w_modes ? GS_OK : fill_prepare(s, req, &cls);
    if (err)
        return err;
    if (s->w_modes) {
        if ((err = gs__policy_fgd.score(s, req, nf, rng)) != GS_OK)
            return err;
    } else {
        for (uint32_t k = 0; k < nf; k++) {
            uint32_t node = s->feasible[k], gpu;
            if (gs__frag_full(s, gs_cluster_node(s->c, node))) {
                if ((err = gs__policy_fgd.node_score(s, node, req, cls, &s->scores[k])) != GS_OK)
                    return err;
                continue;
            }
            s->scores[k] = fill_node(s, node, cls, req, &gpu);
        }
    }
    if (is_share(req) || nf == 0)
        return GS_OK;
    int32_t best = s->scores[0];
    for (uint32_t k = 1; k < nf; k++)
        best = s->scores[k] > best ? s->scores[k] : best;
    for (uint32_t k = 0; k < nf; k++)
        if (s->scores[k] >= best - FILL_BAND_POINTS)
            s->scores[k] = best;
    return GS_OK;
}

/* A share's GPU: the one of least dF + dW (the first by index among equal ones). */
static uint32_t pick_share_fgdfill(struct gs_sched *s, const struct gs_node *n,
                                   const struct gs_pod_req *req, struct gs_rng *rng)
{
    uint32_t node = (uint32_t)(n - gs_cluster_node(s->c, 0)), cls, gpu = 0;
    if (s->w_modes || gs__frag_full(s, n) || fill_prepare(s, req, &cls) != GS_OK)
        return gs__policy_fgd.pick_share(s, n, req, rng);
    (void)fill_node(s, node, cls, req, &gpu);
    return gpu;
}

/* Memory and MIG requests: FGD's gradient and pick. */
const struct policy_ops gs__policy_fgdfill = {
    "fgdfill",      "08-FGD-fill",      score_fgdfill,    pick_share_fgdfill,
    gs__pick_whole, gs__fgd_score_kind, gs__fgd_pick_kind};
