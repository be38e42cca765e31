/*
 * The configuration programme of the offline bound, solved by column generation
 * (include/gpusched/bound.h, gs_bound_cg(), has the programme, the bounds and their sources).
 *
 * The restricted master is a GLPK problem: one row per node type (configurations of the type at
 * most its nodes), one per shape that asks a GPU (pods of the shape placed at most those that
 * arrived), one column per configuration found. Each round solves it (GLPK keeps the basis, so
 * a round is a warm primal simplex), reads the duals and prices every type with an exact
 * branch and bound over whole-node packings; the best configuration of each type with a
 * positive reduced cost joins the master. The pricing places every pod on a GPU of the node, so
 * a configuration is a packing the node can hold GPU by GPU, not only in its totals.
 */
#include "gpusched/bound.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"

/* Deepest a packing may be (pods on one node, plus one level per item), so that the search's
 * recursion stays within a small stack whatever the input. */
#define CG_DEPTH_MAX 4096

/* A reduced cost below this (milli-GPU) counts as zero: GLPK's duals carry its tolerances. */
#define CG_RC_EPS 1e-6

/* A branch whose bound is within this of the best packing is not searched: what it could add
 * is below what the master can tell from zero (CG_RC_EPS). The pricing's upper bound adds it. */
#define CG_PRUNE_EPS 1e-7

/* Times a round that finds no column while a pricing was cut is priced again, each with ten
 * times the search nodes. */
#define CG_ESCALATIONS 2

/* Multiplier pairs of the pricing's Lagrangian bound (room_bound()). */
#define CG_LAMBDAS 8

/* An item of one pricing: a shape that fits the type and is worth placing. */
struct item {
    uint32_t row; /* the shape's row in the master, 0-based among GPU shapes */
    int64_t cpu_milli, mem_mib;
    uint32_t num_gpu;
    int32_t gpu_milli;
    double gpu;   /* milli-GPU per pod: the objective coefficient */
    double w;     /* value per pod in this pricing, > 0 */
    uint32_t cap; /* most pods of the shape one node of the type holds */
};

/* One pricing's search: an exact branch and bound over packings of one node. */
struct search {
    const struct item *it;
    uint32_t n;
    uint32_t gpus;
    /* Over items i..n-1: the best value per pod and the value of all their pods at caps. */
    double *ratio_pod, *sum;
    /* Per-GPU bound: for multiplier pair l (lam_cpu[l], lam_mem[l], per milli-core and MiB),
     * fill[(l * (n + 1) + i) * (units + 1) + f] is the most that items i.. with values
     * w - lam . (cpu, mem) add to one GPU with f x unit milli free. */
    uint32_t nlam, units;
    int32_t unit;
    const double *lam_cpu, *lam_mem;
    double *fill;
    uint64_t nodes, nodes_max;
    bool truncated;
    double open_ub; /* once truncated: the largest bound of a subtree left unsearched */
    double value, best;
    uint32_t *cur, *best_n;              /* pods per item: the current packing and the best one */
    int32_t free_desc[GS_NODE_GPUS_MAX]; /* free milli per GPU, descending */
};

/*
 * An upper bound on what items i.. add to a node with the given room, the least of: every pod
 * at its cap; the pod limit at the best value per pod; and, for each multiplier pair lam >= 0,
 * the Lagrangian relaxation of CPU and memory, lam . (cpu, mem) + the sum over GPUs of the
 * best a GPU's free milli holds with values w - lam . (cpu, mem) (fill: shares packed into the
 * GPU, whole-GPU pods only on an empty GPU at their value per GPU; caps across GPUs relaxed).
 * Any packing of the room is within each: its pods' values, less lam times what they ask
 * (at most the room), split GPU by GPU.
 */
static double room_bound(const struct search *s, uint32_t i, uint32_t placed_i, int64_t cpu,
                         int64_t mem, int64_t pods)
{
    double b = s->sum[i] - (double)placed_i * s->it[i].w;
    double bp = (double)pods * s->ratio_pod[i];
    if (bp < b)
        b = bp;
    for (uint32_t l = 0; l < s->nlam; l++) {
        const double *f = s->fill + ((size_t)l * (s->n + 1) + i) * (s->units + 1);
        double v = s->lam_cpu[l] * (double)cpu + s->lam_mem[l] * (double)mem;
        for (uint32_t g = 0; g < s->gpus && v < b; g++)
            v += f[s->free_desc[g] / s->unit];
        if (v < b)
            b = v;
    }
    return b;
}

/* Fills s->fill for items 0..n-1 (a knapsack per GPU, unbounded per item: a relaxation). */
static void fill_tables(struct search *s)
{
    uint32_t F = s->units;
    for (uint32_t l = 0; l < s->nlam; l++) {
        double *last = s->fill + ((size_t)l * (s->n + 1) + s->n) * (F + 1);
        for (uint32_t f = 0; f <= F; f++)
            last[f] = 0;
        for (uint32_t i = s->n; i-- > 0;) {
            const struct item *it = &s->it[i];
            double *cur = s->fill + ((size_t)l * (s->n + 1) + i) * (F + 1);
            const double *next = cur + (F + 1);
            double v =
                it->w - s->lam_cpu[l] * (double)it->cpu_milli - s->lam_mem[l] * (double)it->mem_mib;
            memcpy(cur, next, (F + 1) * sizeof(*cur));
            if (!(v > 0))
                continue;
            if (it->gpu_milli >= GS_GPU_MILLI) {
                if (v / it->num_gpu > cur[F])
                    cur[F] = v / it->num_gpu;
                continue;
            }
            uint32_t m = (uint32_t)(it->gpu_milli / s->unit);
            for (uint32_t f = m; f <= F; f++)
                if (v + cur[f - m] > cur[f])
                    cur[f] = v + cur[f - m];
        }
    }
}

/* Moves free_desc[j] right after it shrank, keeping the array descending; returns where it is. */
static uint32_t sift_right(int32_t *f, uint32_t n, uint32_t j)
{
    while (j + 1 < n && f[j] < f[j + 1]) {
        int32_t t = f[j];
        f[j] = f[j + 1];
        f[j + 1] = t;
        j++;
    }
    return j;
}

/* Moves free_desc[j] left after it grew. */
static void sift_left(int32_t *f, uint32_t j)
{
    while (j > 0 && f[j] > f[j - 1]) {
        int32_t t = f[j];
        f[j] = f[j - 1];
        f[j - 1] = t;
        j--;
    }
}

/*
 * Item i, with placed_i of its pods on the node already, the last of them on a GPU that had
 * `last_free` milli free. Branches: one more pod of item i (on each distinct free value, at most
 * last_free: pods of one item are placed in non-increasing order of the free value they land
 * on, which every assignment of them to GPUs admits, so no packing is missed and none is
 * visited twice for one item), then no more of item i.
 */
static void search_item(struct search *s, uint32_t i, uint32_t placed_i, int32_t last_free,
                        int64_t cpu, int64_t mem, int64_t pods, double bound)
{
    if (s->value > s->best) {
        s->best = s->value;
        memcpy(s->best_n, s->cur, s->n * sizeof(*s->cur));
    }
    if (i >= s->n)
        return;
    /* The parent's bound holds here too (the bounds are not monotone along a path). */
    double b = s->value + room_bound(s, i, placed_i, cpu, mem, pods);
    if (b > bound)
        b = bound;
    if (!s->truncated && ++s->nodes > s->nodes_max)
        s->truncated = true;
    if (s->truncated) {
        /* Out of nodes: this subtree stays unsearched, and its bound joins the frontier's
         * (every branch still open on the path is visited once this way, not expanded). */
        if (b > s->open_ub)
            s->open_ub = b;
        return;
    }
    if (b <= s->best + CG_PRUNE_EPS)
        return;
    const struct item *it = &s->it[i];
    if (placed_i < it->cap && cpu >= it->cpu_milli && mem >= it->mem_mib && pods >= 1) {
        s->value += it->w;
        s->cur[i]++;
        if (it->gpu_milli >= GS_GPU_MILLI) {
            /* Whole GPUs: the first num_gpu of the descending array must be free. */
            uint32_t k = it->num_gpu;
            if (k <= s->gpus && s->free_desc[k - 1] == GS_GPU_MILLI) {
                int32_t saved[GS_NODE_GPUS_MAX];
                memcpy(saved, s->free_desc, sizeof(saved));
                memmove(s->free_desc, s->free_desc + k, (s->gpus - k) * sizeof(int32_t));
                for (uint32_t g = s->gpus - k; g < s->gpus; g++)
                    s->free_desc[g] = 0;
                search_item(s, i, placed_i + 1, last_free, cpu - it->cpu_milli, mem - it->mem_mib,
                            pods - 1, b);
                memcpy(s->free_desc, saved, sizeof(saved));
            }
        } else {
            /* A share of one GPU: each distinct free value that holds it, largest first. */
            for (uint32_t j = 0; j < s->gpus; j++) {
                int32_t f = s->free_desc[j];
                if (f < it->gpu_milli)
                    break;
                if (f > last_free || (j > 0 && s->free_desc[j - 1] == f))
                    continue;
                s->free_desc[j] = f - it->gpu_milli;
                uint32_t at = sift_right(s->free_desc, s->gpus, j);
                search_item(s, i, placed_i + 1, f, cpu - it->cpu_milli, mem - it->mem_mib, pods - 1,
                            b);
                s->free_desc[at] += it->gpu_milli;
                sift_left(s->free_desc, at);
            }
        }
        s->cur[i]--;
        s->value -= it->w;
    }
    search_item(s, i + 1, 0, INT32_MAX, cpu, mem, pods, b);
}

/* What one pricing found. */
struct priced {
    double value;    /* the best packing's value (the optimum unless truncated) */
    double value_ub; /* an upper bound on every packing's value */
    bool truncated;
};

/* Items of type t for values w[row] (only those above zero and fitting), ordered whole GPUs
 * first (more GPUs first), then shares, larger first: large items first prune best. */
static int cmp_item(const void *pa, const void *pb)
{
    const struct item *a = pa, *b = pb;
    double ka = a->gpu_milli >= GS_GPU_MILLI ? 1e9 + a->num_gpu : a->gpu_milli;
    double kb = b->gpu_milli >= GS_GPU_MILLI ? 1e9 + b->num_gpu : b->gpu_milli;
    if (ka != kb)
        return ka > kb ? -1 : 1;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return 0;
}

/* The CG problem's fixed parts. */
struct cg {
    const struct gs_bound_shape *shapes;
    const struct gs_bound_type *types;
    const bool *fits;
    uint32_t ns, nt, nrow; /* shapes, types, GPU shapes (rows of the shape part) */
    uint32_t *row_shape;   /* GPU shape row -> shape index */
    uint64_t nodes_max;
    struct item *items;     /* scratch, nrow entries */
    double *scratch;        /* 2 x (nrow + 1) */
    int32_t unit;           /* milli: the gcd of 1000 and every share's milli */
    uint32_t units;         /* 1000 / unit */
    double *fill;           /* CG_LAMBDAS x (nrow + 1) x (units + 1) */
    uint32_t *cur, *best_n; /* nrow each */
};

/*
 * Prices type t: the packing of one node of it that maximises sum over pods of w[row] (w by
 * GPU-shape row). On return items[0..*n_out) are the items searched and best_n their counts.
 */
static int price(struct cg *cg, uint32_t t, const double *w, struct priced *out, uint32_t *n_out)
{
    const struct gs_bound_type *ty = &cg->types[t];
    uint32_t n = 0;
    for (uint32_t r = 0; r < cg->nrow; r++) {
        uint32_t sidx = cg->row_shape[r];
        const struct gs_bound_shape *sh = &cg->shapes[sidx];
        if (!(w[r] > 0) || !cg->fits[(size_t)sidx * cg->nt + t])
            continue;
        double cap = fmin(floor(sh->count), (double)ty->pods_max);
        if (sh->cpu_milli > 0)
            cap = fmin(cap, floor((double)ty->cpu_milli / (double)sh->cpu_milli));
        if (sh->mem_mib > 0)
            cap = fmin(cap, floor((double)ty->mem_mib / (double)sh->mem_mib));
        cap = fmin(cap, sh->gpu_milli >= GS_GPU_MILLI
                            ? floor((double)ty->gpu_count / sh->num_gpu)
                            : (double)ty->gpu_count * floor((double)GS_GPU_MILLI / sh->gpu_milli));
        if (cap < 1)
            continue;
        cg->items[n++] = (struct item){r,
                                       sh->cpu_milli,
                                       sh->mem_mib,
                                       sh->num_gpu,
                                       sh->gpu_milli,
                                       (double)sh->num_gpu * sh->gpu_milli,
                                       w[r],
                                       (uint32_t)fmin(cap, (double)CG_DEPTH_MAX)};
    }
    qsort(cg->items, n, sizeof(*cg->items), cmp_item);
    /* The search is one level per pod placed plus one per item: pods are at most the caps'
     * sum, the pod limit and what the GPUs hold of the smallest item. */
    double pods_most = (double)ty->pods_max, milli_least = GS_GPU_MILLI;
    double caps = 0;
    for (uint32_t k = 0; k < n; k++) {
        caps += cg->items[k].cap;
        milli_least = fmin(milli_least, cg->items[k].gpu_milli);
    }
    pods_most = fmin(fmin(pods_most, caps), ty->gpu_count * floor(GS_GPU_MILLI / milli_least));
    if (pods_most + n > CG_DEPTH_MAX)
        return GS_ELIMIT;
    struct search s;
    memset(&s, 0, sizeof(s));
    s.it = cg->items;
    s.n = n;
    s.gpus = ty->gpu_count;
    s.ratio_pod = cg->scratch;
    s.sum = s.ratio_pod + cg->nrow + 1;
    s.ratio_pod[n] = s.sum[n] = 0;
    for (uint32_t k = n; k-- > 0;) {
        const struct item *it = &cg->items[k];
        s.ratio_pod[k] = fmax(s.ratio_pod[k + 1], it->w);
        s.sum[k] = s.sum[k + 1] + it->w * it->cap;
    }
    /* Multipliers in units of the node's milli-GPU per milli-core and per MiB. */
    static const double lam_c[CG_LAMBDAS] = {0, 0.25, 0.5, 0.75, 1, 1.5, 0, 0.5};
    static const double lam_m[CG_LAMBDAS] = {0, 0, 0, 0, 0, 0, 1, 0.5};
    double lc[CG_LAMBDAS], lm[CG_LAMBDAS];
    double gpu_cap = (double)ty->gpu_count * GS_GPU_MILLI;
    for (uint32_t l = 0; l < CG_LAMBDAS; l++) {
        lc[l] = ty->cpu_milli > 0 ? lam_c[l] * gpu_cap / (double)ty->cpu_milli : 0;
        lm[l] = ty->mem_mib > 0 ? lam_m[l] * gpu_cap / (double)ty->mem_mib : 0;
    }
    s.nlam = CG_LAMBDAS;
    s.lam_cpu = lc;
    s.lam_mem = lm;
    s.unit = cg->unit;
    s.units = cg->units;
    s.fill = cg->fill;
    fill_tables(&s);
    s.nodes_max = cg->nodes_max;
    s.cur = cg->cur;
    s.best_n = cg->best_n;
    memset(s.cur, 0, (size_t)cg->nrow * sizeof(*s.cur));
    memset(s.best_n, 0, (size_t)cg->nrow * sizeof(*s.best_n));
    for (uint32_t g = 0; g < s.gpus; g++)
        s.free_desc[g] = GS_GPU_MILLI;
    double root = n ? room_bound(&s, 0, 0, ty->cpu_milli, ty->mem_mib, ty->pods_max) : 0;
    if (root < 0)
        root = 0;
    search_item(&s, 0, 0, INT32_MAX, ty->cpu_milli, ty->mem_mib, ty->pods_max, root);
    out->value = s.best;
    out->truncated = s.truncated;
    out->value_ub = (s.truncated ? fmax(s.best, fmin(root, s.open_ub)) : s.best) + CG_PRUNE_EPS;
    *n_out = n;
    return GS_OK;
}

/* Adds the best packing of the last pricing of type t as a column. */
static void add_column(glp_prob *lp, const struct cg *cg, uint32_t t, uint32_t n, int *ind,
                       double *val)
{
    int len = 0;
    double gpu = 0;
    ind[++len] = (int)t + 1;
    val[len] = 1.0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t c = cg->best_n[k];
        if (c == 0)
            continue;
        ind[++len] = (int)(cg->nt + cg->items[k].row) + 1;
        val[len] = c;
        gpu += c * cg->items[k].gpu;
    }
    int col = glp_add_cols(lp, 1);
    glp_set_col_bnds(lp, col, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(lp, col, gpu);
    glp_set_mat_col(lp, col, len, ind, val);
}

/*
 * Farley's ratio for type t with duals mu (its row) and pi (by GPU-shape row): the largest
 * gpu(p) / (mu + pi . p) over the type's packings p, by Dinkelbach's method on the pricing
 * (each step maximises gpu . p - theta (mu + pi . p); theta is the ratio once that is <= 0).
 * Returns INFINITY where no finite ratio is proved.
 */
static int farley_ratio(struct cg *cg, uint32_t t, double mu, const double *pi, double *w,
                        double *ratio)
{
    double theta = 1.0;
    for (int step = 0; step < 64; step++) {
        for (uint32_t r = 0; r < cg->nrow; r++) {
            const struct gs_bound_shape *sh = &cg->shapes[cg->row_shape[r]];
            w[r] = (double)sh->num_gpu * sh->gpu_milli - theta * pi[r];
        }
        struct priced p;
        uint32_t n = 0;
        int err = price(cg, t, w, &p, &n);
        if (err)
            return err;
        double f_ub = p.value_ub - theta * mu;
        if (f_ub <= CG_RC_EPS || p.truncated || step == 63) {
            /* For every packing gpu . p <= theta (mu + pi . p) + f_ub, and mu + pi . p >= mu. */
            if (f_ub <= 0)
                *ratio = theta;
            else if (mu > 0)
                *ratio = theta + f_ub / mu;
            else
                *ratio = f_ub <= CG_RC_EPS ? theta : INFINITY;
            return GS_OK;
        }
        double gpu = 0, denom = mu;
        for (uint32_t k = 0; k < n; k++) {
            gpu += cg->best_n[k] * cg->items[k].gpu;
            denom += cg->best_n[k] * pi[cg->items[k].row];
        }
        if (!(denom > 0)) {
            *ratio = INFINITY;
            return GS_OK;
        }
        theta = gpu / denom;
    }
    *ratio = INFINITY;
    return GS_OK;
}

int gs_bound_cg(const struct gs_bound_shape *shapes, uint32_t ns, const struct gs_bound_type *types,
                uint32_t nt, const bool *fits, const struct gs_bound_cg_limits *limits,
                struct gs_bound_cg_result *out)
{
    if (!out)
        return GS_EINVAL;
    memset(out, 0, sizeof(*out));
    if ((!shapes && ns) || (!types && nt) || (!fits && ns && nt))
        return GS_EINVAL;
    struct gs_bound_cg_limits lim = {GS_BOUND_CG_COLUMNS_MAX, GS_BOUND_CG_ROUNDS_MAX,
                                     GS_BOUND_CG_NODES_MAX};
    if (limits)
        lim = *limits;
    if (lim.columns_max < 1 || lim.rounds_max < 1 || lim.pricing_nodes_max < 1)
        return GS_EINVAL;
    uint32_t nrow = 0;
    for (uint32_t s = 0; s < ns; s++) {
        const struct gs_bound_shape *sh = &shapes[s];
        if (!(sh->count >= 0) || sh->cpu_milli < 0 || sh->mem_mib < 0 ||
            sh->num_gpu > GS_NODE_GPUS_MAX || (sh->num_gpu > 0) != (sh->gpu_milli > 0) ||
            sh->gpu_milli > GS_GPU_MILLI || (sh->gpu_milli < GS_GPU_MILLI && sh->num_gpu > 1))
            return GS_EINVAL;
        nrow += sh->num_gpu > 0 && sh->count >= 1;
    }
    for (uint32_t t = 0; t < nt; t++)
        if (!(types[t].count >= 0) || types[t].gpu_count > GS_NODE_GPUS_MAX ||
            types[t].cpu_milli < 0 || types[t].mem_mib < 0 || types[t].pods_max < 0)
            return GS_EINVAL;
    if ((uint64_t)nrow + nt > INT_MAX / 2)
        return GS_ELIMIT;
    struct cg cg = {shapes, types, fits,         ns, nt,   nrow, NULL, lim.pricing_nodes_max,
                    NULL,   NULL,  GS_GPU_MILLI, 1,  NULL, NULL, NULL};
    for (uint32_t s = 0; s < ns; s++) {
        int32_t a = cg.unit, b = shapes[s].gpu_milli;
        while (b > 0) {
            int32_t r = a % b;
            a = b;
            b = r;
        }
        cg.unit = a;
    }
    cg.units = (uint32_t)(GS_GPU_MILLI / cg.unit);
    cg.fill = malloc((size_t)CG_LAMBDAS * ((size_t)nrow + 1) * (cg.units + 1) * sizeof(*cg.fill));
    cg.row_shape = malloc(((size_t)nrow + 1) * sizeof(*cg.row_shape));
    cg.items = malloc(((size_t)nrow + 1) * sizeof(*cg.items));
    cg.scratch = malloc(2 * ((size_t)nrow + 1) * sizeof(*cg.scratch));
    cg.cur = malloc(((size_t)nrow + 1) * sizeof(*cg.cur));
    cg.best_n = malloc(((size_t)nrow + 1) * sizeof(*cg.best_n));
    double *pi = calloc((size_t)nrow + 1, sizeof(*pi));
    double *w = malloc(((size_t)nrow + 1) * sizeof(*w));
    double *mu = calloc((size_t)nt + 1, sizeof(*mu));
    double *value_ub = malloc(((size_t)nt + 1) * sizeof(*value_ub));
    int *ind = malloc(((size_t)nrow + 2) * sizeof(*ind));
    double *val = malloc(((size_t)nrow + 2) * sizeof(*val));
    glp_prob *lp = NULL;
    int err = GS_ENOMEM;
    if (!cg.fill || !cg.row_shape || !cg.items || !cg.scratch || !cg.cur || !cg.best_n || !pi ||
        !w || !mu || !value_ub || !ind || !val)
        goto done;
    nrow = 0;
    double gpu_asked = 0, gpu_cap = 0;
    for (uint32_t s = 0; s < ns; s++)
        if (shapes[s].num_gpu > 0 && shapes[s].count >= 1) {
            cg.row_shape[nrow++] = s;
            gpu_asked += floor(shapes[s].count) * shapes[s].num_gpu * shapes[s].gpu_milli;
        }
    for (uint32_t t = 0; t < nt; t++)
        gpu_cap += floor(types[t].count) * types[t].gpu_count * GS_GPU_MILLI;

    lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MAX);
    glp_add_rows(lp, (int)(nt + nrow));
    for (uint32_t t = 0; t < nt; t++)
        glp_set_row_bnds(lp, (int)t + 1, GLP_UP, 0.0, floor(types[t].count));
    for (uint32_t r = 0; r < nrow; r++)
        glp_set_row_bnds(lp, (int)(nt + r) + 1, GLP_UP, 0.0, floor(shapes[cg.row_shape[r]].count));
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    double lagrange = INFINITY, dual_obj = 0;
    int escalations = 0;
    for (;;) {
        /* The master's optimum and duals (none yet: all zero). */
        double z = 0;
        memset(mu, 0, nt * sizeof(*mu));
        memset(pi, 0, nrow * sizeof(*pi));
        if (out->columns > 0) {
            if (glp_simplex(lp, &parm) != 0 || glp_get_status(lp) != GLP_OPT) {
                err = GS_ERANGE;
                goto done;
            }
            z = glp_get_obj_val(lp);
            /* Duals of <= rows of a maximisation are >= 0; GLPK's rounding is cut off, and
             * the bounds below hold for whatever non-negative duals they are given. */
            for (uint32_t t = 0; t < nt; t++)
                mu[t] = fmax(0.0, glp_get_row_dual(lp, (int)t + 1));
            for (uint32_t r = 0; r < nrow; r++)
                pi[r] = fmax(0.0, glp_get_row_dual(lp, (int)(nt + r) + 1));
        }
        out->lp_milli = z;
        double lagr = 0;
        for (uint32_t r = 0; r < nrow; r++) {
            const struct gs_bound_shape *sh = &shapes[cg.row_shape[r]];
            w[r] = (double)sh->num_gpu * sh->gpu_milli - pi[r];
            lagr += floor(sh->count) * pi[r];
        }
        dual_obj = lagr;
        for (uint32_t t = 0; t < nt; t++)
            dual_obj += floor(types[t].count) * mu[t];
        bool add = out->columns < lim.columns_max && out->rounds < lim.rounds_max;
        bool improved = false, converged = true, cut = false;
        out->rounds++;
        for (uint32_t t = 0; t < nt; t++) {
            value_ub[t] = 0;
            if (floor(types[t].count) < 1 || types[t].gpu_count == 0)
                continue;
            struct priced p;
            uint32_t n = 0;
            if ((err = price(&cg, t, w, &p, &n)) != GS_OK)
                goto done;
            out->pricing_truncated |= p.truncated;
            cut |= p.truncated;
            value_ub[t] = p.value_ub;
            lagr += floor(types[t].count) * fmax(0.0, p.value_ub);
            if (p.value_ub - mu[t] > CG_RC_EPS)
                converged = false;
            if (p.value - mu[t] > CG_RC_EPS && add && out->columns < lim.columns_max) {
                add_column(lp, &cg, t, n, ind, val);
                out->columns++;
                improved = true;
            }
        }
        if (lagr < lagrange)
            lagrange = lagr;
        if (!improved && !converged && cut && add && escalations < CG_ESCALATIONS) {
            /* Nothing to add, but a cut pricing leaves the bound loose: search deeper. */
            cg.nodes_max *= 10;
            escalations++;
            continue;
        }
        if (!improved) {
            out->converged = converged;
            out->column_cap = !converged && out->columns >= lim.columns_max;
            out->round_cap = !converged && !out->column_cap && out->rounds >= lim.rounds_max;
            out->search_cap = !converged && !out->column_cap && !out->round_cap;
            break;
        }
    }
    /* Farley's bound with the last duals: theta x the dual objective, theta the largest ratio
     * of a column's objective to its dual price (1 when no column has a positive reduced
     * cost). */
    double theta = 1.0;
    for (uint32_t t = 0; t < nt && isfinite(theta); t++) {
        if (floor(types[t].count) < 1 || types[t].gpu_count == 0 || value_ub[t] <= 0)
            continue;
        double ratio = 1.0;
        if ((err = farley_ratio(&cg, t, mu[t], pi, w, &ratio)) != GS_OK)
            goto done;
        theta = fmax(theta, ratio);
    }
    out->farley_milli = isfinite(theta) ? theta * dual_obj : INFINITY;
    out->lagrange_milli = lagrange;
    out->gpu_milli_max =
        fmin(fmin(out->farley_milli, out->lagrange_milli), fmin(gpu_cap, gpu_asked));
    if (out->gpu_milli_max < out->lp_milli)
        out->gpu_milli_max = out->lp_milli; /* rounding: the master's value is reachable */
    err = GS_OK;
done:
    if (lp)
        glp_delete_prob(lp);
    free(cg.fill);
    free(cg.row_shape);
    free(cg.items);
    free(cg.scratch);
    free(cg.cur);
    free(cg.best_n);
    free(pi);
    free(w);
    free(mu);
    free(value_ub);
    free(ind);
    free(val);
    return err;
}
