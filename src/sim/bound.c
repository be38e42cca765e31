/*
 * The offline bound (include/gpusched/bound.h has the programme and why it is a bound): builds
 * the shapes of a run's arrivals and the types of its nodes, tests each pair with the core's
 * gs_node_fits() on an empty node of the type, and solves the programme with GLPK's simplex.
 */
#include "gpusched/bound.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/cluster.h"
#include "gpusched/err.h"

/* Rows per node type: CPU, memory, pods, milli-GPU, GPUs held alone. */
#define ROWS_PER_TYPE 5

int gs_bound_lp(const struct gs_bound_shape *shapes, uint32_t ns, const struct gs_bound_type *types,
                uint32_t nt, const bool *fits, double *gpu_milli_max)
{
    if ((!shapes && ns) || (!types && nt) || (!fits && ns && nt) || !gpu_milli_max)
        return GS_EINVAL;
    *gpu_milli_max = 0;
    uint64_t ncols = 0;
    for (uint32_t s = 0; s < ns; s++) {
        if (!(shapes[s].count >= 0))
            return GS_EINVAL;
        for (uint32_t t = 0; t < nt; t++)
            ncols += fits[(size_t)s * nt + t] && shapes[s].num_gpu > 0;
    }
    for (uint32_t t = 0; t < nt; t++)
        if (!(types[t].count >= 0))
            return GS_EINVAL;
    if (ncols == 0)
        return GS_OK; /* nothing that asks a GPU fits anywhere */
    if (ncols > (UINT64_C(1) << 30) || (uint64_t)ns + (uint64_t)nt * ROWS_PER_TYPE > (1u << 30))
        return GS_ELIMIT;
    /* Each column has at most 1 + ROWS_PER_TYPE entries; GLPK's arrays are 1-based. */
    size_t cap = (size_t)ncols * (1 + ROWS_PER_TYPE) + 1;
    int *ia = malloc(cap * sizeof(*ia)), *ja = malloc(cap * sizeof(*ja));
    double *ar = malloc(cap * sizeof(*ar));
    if (!ia || !ja || !ar) {
        free(ia);
        free(ja);
        free(ar);
        return GS_ENOMEM;
    }
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MAX);
    glp_add_rows(lp, (int)(ns + nt * ROWS_PER_TYPE));
    for (uint32_t s = 0; s < ns; s++)
        glp_set_row_bnds(lp, (int)s + 1, GLP_UP, 0.0, shapes[s].count);
    for (uint32_t t = 0; t < nt; t++) {
        const struct gs_bound_type *ty = &types[t];
        double caps[ROWS_PER_TYPE] = {
            (double)ty->cpu_milli * ty->count, (double)ty->mem_mib * ty->count,
            (double)ty->pods_max * ty->count, (double)ty->gpu_count * GS_GPU_MILLI * ty->count,
            (double)ty->gpu_count * ty->count};
        for (int k = 0; k < ROWS_PER_TYPE; k++)
            glp_set_row_bnds(lp, (int)(ns + t * ROWS_PER_TYPE) + k + 1, GLP_UP, 0.0, caps[k]);
    }
    glp_add_cols(lp, (int)ncols);
    int col = 0;
    size_t ne = 0;
    for (uint32_t s = 0; s < ns; s++) {
        const struct gs_bound_shape *sh = &shapes[s];
        if (sh->num_gpu == 0)
            continue; /* asks no GPU: adds nothing to the objective, only takes room */
        double gpu = (double)sh->num_gpu * sh->gpu_milli;
        /* GPUs it needs to itself: each whole GPU; a fraction above half a GPU, since no two
         * of those fit on one GPU; smaller fractions may share. */
        double alone = sh->gpu_milli >= GS_GPU_MILLI      ? (double)sh->num_gpu
                       : sh->gpu_milli > GS_GPU_MILLI / 2 ? 1.0
                                                          : 0.0;
        for (uint32_t t = 0; t < nt; t++) {
            if (!fits[(size_t)s * nt + t])
                continue;
            col++;
            /* Per node at most as many pods of the shape as fit on it alone (whole pods of it:
             * the rows above would let a type's nodes share a pod's remainder). */
            const struct gs_bound_type *ty = &types[t];
            double per_node = floor((double)ty->pods_max);
            if (sh->cpu_milli > 0)
                per_node = fmin(per_node, floor((double)ty->cpu_milli / (double)sh->cpu_milli));
            if (sh->mem_mib > 0)
                per_node = fmin(per_node, floor((double)ty->mem_mib / (double)sh->mem_mib));
            /* GPUs: num_gpu each for whole ones, one each above half a GPU, and each GPU holds
             * at most floor(1000 / gpu_milli) smaller fractions. */
            per_node =
                fmin(per_node, alone > 0 ? floor(ty->gpu_count / alone)
                                         : ty->gpu_count * floor((double)GS_GPU_MILLI / gpu));
            if (per_node * ty->count > 0)
                glp_set_col_bnds(lp, col, GLP_DB, 0.0, per_node * ty->count);
            else
                glp_set_col_bnds(lp, col, GLP_FX, 0.0, 0.0);
            glp_set_obj_coef(lp, col, gpu);
            int base = (int)(ns + t * ROWS_PER_TYPE);
            double coef[1 + ROWS_PER_TYPE] = {
                1.0, (double)sh->cpu_milli, (double)sh->mem_mib, 1.0, gpu, alone};
            int row[1 + ROWS_PER_TYPE] = {(int)s + 1, base + 1, base + 2,
                                          base + 3,   base + 4, base + 5};
            for (int k = 0; k < 1 + ROWS_PER_TYPE; k++) {
                if (coef[k] == 0)
                    continue;
                ne++;
                ia[ne] = row[k];
                ja[ne] = col;
                ar[ne] = coef[k];
            }
        }
    }
    glp_load_matrix(lp, (int)ne, ia, ja, ar);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_ON;
    int ret = glp_simplex(lp, &parm);
    int err = GS_OK;
    if (ret != 0 || glp_get_status(lp) != GLP_OPT)
        err = GS_ERANGE;
    else
        *gpu_milli_max = glp_get_obj_val(lp);
    glp_delete_prob(lp);
    free(ia);
    free(ja);
    free(ar);
    return err;
}

/* A shape key: what decides where a pod fits and what it takes. */
struct shape_key {
    int64_t cpu_milli, mem_mib;
    uint32_t num_gpu;
    int32_t gpu_milli;
    uint64_t model_mask;
    uint32_t pod; /* a pod of the shape, for the fit test */
};

static int cmp_shape(const void *pa, const void *pb)
{
    const struct shape_key *a = pa, *b = pb;
    if (a->cpu_milli != b->cpu_milli)
        return a->cpu_milli < b->cpu_milli ? -1 : 1;
    if (a->mem_mib != b->mem_mib)
        return a->mem_mib < b->mem_mib ? -1 : 1;
    if (a->num_gpu != b->num_gpu)
        return a->num_gpu < b->num_gpu ? -1 : 1;
    if (a->gpu_milli != b->gpu_milli)
        return a->gpu_milli < b->gpu_milli ? -1 : 1;
    if (a->model_mask != b->model_mask)
        return a->model_mask < b->model_mask ? -1 : 1;
    return 0;
}

/* A node type key, with a node of the type for the fit test. */
struct type_key {
    int64_t cpu_milli, mem_mib, pods_max;
    uint32_t gpu_count, model_id;
    uint32_t node;
};

static int cmp_type(const void *pa, const void *pb)
{
    const struct type_key *a = pa, *b = pb;
    if (a->cpu_milli != b->cpu_milli)
        return a->cpu_milli < b->cpu_milli ? -1 : 1;
    if (a->mem_mib != b->mem_mib)
        return a->mem_mib < b->mem_mib ? -1 : 1;
    if (a->pods_max != b->pods_max)
        return a->pods_max < b->pods_max ? -1 : 1;
    if (a->gpu_count != b->gpu_count)
        return a->gpu_count < b->gpu_count ? -1 : 1;
    if (a->model_id != b->model_id)
        return a->model_id < b->model_id ? -1 : 1;
    return 0;
}

int gs_bound_sim(const struct gs_sim_input *in, uint64_t seed, double tune,
                 const struct gs_bound_cg_limits *limits, struct gs_bound_result *out)
{
    memset(out, 0, sizeof(*out));
    out->seed = seed;
    if (gs_sim_input_mixed(in))
        return GS_EINVAL;
    uint32_t *list = NULL, len = 0;
    int err = gs_sim_arrivals(in, seed, tune, &list, &len);
    if (err)
        return err;
    struct gs_cluster *c = NULL;
    struct shape_key *sk = NULL;
    struct type_key *tk = NULL;
    struct gs_bound_shape *shapes = NULL;
    struct gs_bound_type *types = NULL;
    bool *fits = NULL;
    if ((err = gs_sim_input_cluster(in, &c)) != GS_OK)
        goto out;
    double cap_milli = (double)gs_cluster_gpu_count(c) * GS_GPU_MILLI;
    err = GS_EINVAL;
    if (cap_milli <= 0)
        goto out;
    /* The arrivals up to the last pod in column 100 (sim.c's rule for an event's column). */
    uint32_t cut = 0;
    int64_t arrived = 0;
    for (uint32_t k = 0; k < len; k++) {
        const struct gs_pod_req *r = gs_sim_input_req(in, list[k]);
        if (gs_req_kind(r) != GS_REQ_MILLI)
            goto out;
        int64_t next = arrived + (int64_t)r->num_gpu * r->gpu_milli;
        if (rint((double)next / (cap_milli / GS_GPU_MILLI) / 10.0) > 100)
            break;
        arrived = next;
        cut = k + 1;
    }
    err = GS_ENOMEM;
    sk = malloc(((size_t)cut + 1) * sizeof(*sk));
    uint32_t nn = gs_cluster_node_count(c);
    tk = malloc(((size_t)nn + 1) * sizeof(*tk));
    if (!sk || !tk)
        goto out;
    for (uint32_t k = 0; k < cut; k++) {
        const struct gs_pod_req *r = gs_sim_input_req(in, list[k]);
        sk[k] = (struct shape_key){r->cpu_milli, r->mem_mib,        r->num_gpu,
                                   r->gpu_milli, r->gpu_model_mask, list[k]};
    }
    qsort(sk, cut, sizeof(*sk), cmp_shape);
    for (uint32_t i = 0; i < nn; i++) {
        const struct gs_node *nd = gs_cluster_node(c, i);
        tk[i] = (struct type_key){nd->cpu_milli, nd->mem_mib,  nd->pods_max,
                                  nd->gpu_count, nd->model_id, i};
    }
    qsort(tk, nn, sizeof(*tk), cmp_type);
    shapes = calloc((size_t)cut + 1, sizeof(*shapes));
    types = calloc((size_t)nn + 1, sizeof(*types));
    if (!shapes || !types)
        goto out;
    uint32_t ns = 0, nt = 0;
    for (uint32_t k = 0; k < cut; k++) {
        if (k == 0 || cmp_shape(&sk[k], &sk[ns - 1]) != 0) {
            sk[ns] = sk[k];
            shapes[ns++] = (struct gs_bound_shape){sk[k].cpu_milli, sk[k].mem_mib, sk[k].num_gpu,
                                                   sk[k].gpu_milli, 0};
        }
        shapes[ns - 1].count += 1;
    }
    for (uint32_t i = 0; i < nn; i++) {
        if (i == 0 || cmp_type(&tk[i], &tk[nt - 1]) != 0) {
            tk[nt] = tk[i];
            types[nt++] = (struct gs_bound_type){tk[i].cpu_milli, tk[i].mem_mib, tk[i].pods_max,
                                                 tk[i].gpu_count, 0};
        }
        types[nt - 1].count += 1;
    }
    fits = calloc((size_t)ns * nt + 1, sizeof(*fits));
    if (!fits)
        goto out;
    for (uint32_t s = 0; s < ns; s++)
        for (uint32_t t = 0; t < nt; t++)
            fits[(size_t)s * nt + t] =
                gs_node_fits(gs_cluster_node(c, tk[t].node), gs_sim_input_req(in, sk[s].pod));
    double opt = 0;
    if ((err = gs_bound_lp(shapes, ns, types, nt, fits, &opt)) != GS_OK)
        goto out;
    out->pods = cut;
    out->shapes = ns;
    out->types = nt;
    out->arrived_gpu_milli = arrived;
    out->arrived_pct = 100.0 * (double)arrived / cap_milli;
    if ((err = gs_bound_cg(shapes, ns, types, nt, fits, limits, &out->cg)) != GS_OK)
        goto out;
    out->agg_unalloc_min_pct = fmax(0.0, 100.0 - 100.0 * opt / cap_milli);
    out->cg_lp_pct = 100.0 - 100.0 * out->cg.lp_milli / cap_milli;
    out->cg_unalloc_min_pct = fmax(0.0, 100.0 - 100.0 * out->cg.gpu_milli_max / cap_milli);
    /* Both are bounds: the tighter holds (the simplex's rounding kept above 0). */
    out->alloc_max_milli = fmin(opt, out->cg.gpu_milli_max);
    out->unalloc_min_pct = fmax(out->agg_unalloc_min_pct, out->cg_unalloc_min_pct);
out:
    free(list);
    free(sk);
    free(tk);
    free(shapes);
    free(types);
    free(fits);
    gs_cluster_free(c);
    return err;
}
