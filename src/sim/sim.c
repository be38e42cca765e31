/*
 * The experiment driver of the FGD paper's trace simulation (see include/gpusched/sim.h for the
 * method and docs/internals/fgd.md for the rules and their sources).
 *
 * A gs_sim_input holds everything runs share and never changes after loading, so runs can go
 * in parallel threads. Each run builds its own cluster and scheduler; the per-event metrics are
 * bucketed on the fly into the 131 arrived-workload columns, so no event log is kept.
 */
#include "gpusched/sim.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/charge.h"
#include "gpusched/cluster.h"
#include "gpusched/err.h"
#include "gpusched/sched.h"

/* The reference simulator gives each node a pod limit of 1001. */
#define SIM_NODE_PODS_MAX 1001
#define SIM_THRESHOLD_PCT 95

struct gs_sim_input {
    char *name;
    struct gs_trace_nodes nodes;
    struct gs_trace_pods pods;
    uint32_t *nodes_by_name; /* node indices in name order: the cluster's node order */
    uint32_t *pods_by_name;  /* pod indices in name order */
    struct gs_pod_req *reqs; /* per pod (file order), model masks for the run clusters */
    int64_t *req_milli;      /* per pod: GPU asked in milli (num_gpu x gpu_milli; the charge of
                                gs_charge_request() for memory, MIG and time-sliced kinds) */
    struct gs_workload workload;
    uint32_t total_gpus;
    int mixed;                        /* the input names sharing (gpu_mode, sharing columns) */
    uint32_t mode_gpus[GS_SIM_MODES]; /* GPUs per enum gs_gpu_sharing */
};

static const struct gs_trace_nodes *sort_nodes_ctx;
static const struct gs_trace_pods *sort_pods_ctx;

/* qsort has no context argument; loading is single-threaded, so a file-static context is safe
 * here (this file is the simulator, not the pure core). */
static int cmp_node_name(const void *a, const void *b)
{
    return strcmp(sort_nodes_ctx->v[*(const uint32_t *)a].name,
                  sort_nodes_ctx->v[*(const uint32_t *)b].name);
}

static int cmp_pod_name(const void *a, const void *b)
{
    int c = strcmp(sort_pods_ctx->v[*(const uint32_t *)a].name,
                   sort_pods_ctx->v[*(const uint32_t *)b].name);
    if (c)
        return c;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* Builds a run's cluster: nodes added in name order, so model ids are the same in every run. */
static int build_cluster(const struct gs_sim_input *in, struct gs_cluster **out)
{
    int err = gs_cluster_new(out);
    if (err)
        return err;
    for (uint32_t k = 0; k < in->nodes.n; k++) {
        const struct gs_trace_node *tn = &in->nodes.v[in->nodes_by_name[k]];
        struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
        struct gs_node_spec spec;
        gs_trace_node_spec(tn, SIM_NODE_PODS_MAX, modes, &spec);
        err = gs_cluster_add_node(*out, &spec, NULL);
        if (err) {
            gs_cluster_free(*out);
            *out = NULL;
            return err;
        }
    }
    return GS_OK;
}

static const char *base_name(const char *path, size_t *len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 4 && strcmp(b + n - 4, ".csv") == 0)
        n -= 4;
    *len = n;
    return b;
}

int gs_sim_input_load(const char *nodes_path, const char *pods_path, const char *workload_name,
                      struct gs_sim_input **out, struct gs_diag *diag)
{
    *out = NULL;
    struct gs_sim_input *in = calloc(1, sizeof(*in));
    struct gs_cluster *c = NULL;
    const char **specs = NULL;
    if (!in)
        return GS_ENOMEM;
    int err = gs_trace_read_nodes(nodes_path, &in->nodes, diag);
    if (err)
        goto out;
    if ((err = gs_trace_read_pods(pods_path, &in->pods, diag)) != GS_OK)
        goto out;
    err = GS_ENOMEM;
    size_t nlen;
    const char *nm = workload_name ? workload_name : base_name(pods_path, &nlen);
    if (workload_name)
        nlen = strlen(workload_name);
    in->name = malloc(nlen + 1);
    in->nodes_by_name = malloc((in->nodes.n + 1) * sizeof(uint32_t));
    in->pods_by_name = malloc((in->pods.n + 1) * sizeof(uint32_t));
    in->reqs = calloc(in->pods.n + 1, sizeof(*in->reqs));
    in->req_milli = calloc(in->pods.n + 1, sizeof(*in->req_milli));
    specs = calloc(in->pods.n + 1, sizeof(*specs));
    if (!in->name || !in->nodes_by_name || !in->pods_by_name || !in->reqs || !in->req_milli ||
        !specs)
        goto out;
    memcpy(in->name, nm, nlen);
    in->name[nlen] = '\0';
    for (uint32_t i = 0; i < in->nodes.n; i++)
        in->nodes_by_name[i] = i;
    for (uint32_t i = 0; i < in->pods.n; i++)
        in->pods_by_name[i] = i;
    sort_nodes_ctx = &in->nodes;
    qsort(in->nodes_by_name, in->nodes.n, sizeof(uint32_t), cmp_node_name);
    sort_pods_ctx = &in->pods;
    qsort(in->pods_by_name, in->pods.n, sizeof(uint32_t), cmp_pod_name);
    if ((err = build_cluster(in, &c)) != GS_OK) {
        if (err == GS_ELIMIT && diag) {
            memset(diag, 0, sizeof(*diag));
            (void)snprintf(diag->file, sizeof(diag->file), "%s", nodes_path);
            (void)snprintf(diag->msg, sizeof(diag->msg), "more than %d GPU models in the node list",
                           GS_MODELS_MAX);
        }
        goto out;
    }
    in->total_gpus = gs_cluster_gpu_count(c);
    if (in->total_gpus == 0) {
        err = GS_EINVAL;
        if (diag) {
            memset(diag, 0, sizeof(*diag));
            (void)snprintf(diag->file, sizeof(diag->file), "%s", nodes_path);
            (void)snprintf(diag->msg, sizeof(diag->msg), "the cluster has no GPU");
        }
        goto out;
    }
    for (uint32_t i = 0; i < in->pods.n; i++) {
        const struct gs_trace_pod *p = &in->pods.v[i];
        /* Valid: the reader checked every row with the same rule. */
        (void)gs_trace_pod_req(p, gs_cluster_model_mask(c, p->gpu_spec, strlen(p->gpu_spec)),
                               &in->reqs[i]);
        specs[i] = p->gpu_spec;
        const struct gs_pod_req *r = &in->reqs[i];
        double gpus = 0;
        if (gs_req_kind(r) == GS_REQ_MILLI)
            in->req_milli[i] = (int64_t)r->num_gpu * r->gpu_milli;
        else if (gs_charge_request(c, r, &gpus) == GS_OK)
            in->req_milli[i] = gs_charge_milli(gpus);
    }
    in->mixed = in->nodes.has_modes || in->pods.has_sharing;
    for (uint32_t i = 0; in->mixed && i < in->nodes.n; i++)
        in->mode_gpus[in->nodes.v[i].gpu_mode.sharing % GS_SIM_MODES] += in->nodes.v[i].gpu_count;
    err = gs_workload_build(in->reqs, specs, in->pods.n, SIM_THRESHOLD_PCT, &in->workload);
out:
    free(specs);
    gs_cluster_free(c);
    if (err) {
        gs_sim_input_free(in);
        return err;
    }
    *out = in;
    return GS_OK;
}

void gs_sim_input_free(struct gs_sim_input *in)
{
    if (!in)
        return;
    free(in->name);
    gs_trace_nodes_fini(&in->nodes);
    gs_trace_pods_fini(&in->pods);
    free(in->nodes_by_name);
    free(in->pods_by_name);
    free(in->reqs);
    free(in->req_milli);
    gs_workload_fini(&in->workload);
    free(in);
}

const char *gs_sim_input_name(const struct gs_sim_input *in)
{
    return in->name;
}

const struct gs_workload *gs_sim_input_workload(const struct gs_sim_input *in)
{
    return &in->workload;
}

uint32_t gs_sim_input_pod_count(const struct gs_sim_input *in)
{
    return in->pods.n;
}

const char *gs_sim_input_ignored_columns(const struct gs_sim_input *in)
{
    return in->pods.ignored_columns;
}

int gs_sim_input_unfit(const struct gs_sim_input *in, struct gs_trace_unfit *out)
{
    return gs_trace_unfit(&in->nodes, &in->pods, out);
}

double gs_round_half_even(double x, int decimals)
{
    /* Two decimals, once per simulated event: without printf. 100x is s + e exactly (s the
     * rounded product, e its error from fma). With k = floor(s), d = s - k is exact and, like
     * 0.5, a multiple of ulp(s) (s < 2^50), so d != 0.5 differs from 0.5 by more than |e| and
     * decides alone; d == 0.5 leaves it to the sign of e, a tie (e == 0) to the even k. The
     * result k / 100 is the correctly rounded quotient, the double strtod gives for "k/100"
     * written out. tests/unit/test_sim checks it against the printf path. */
    if (decimals == 2 && x >= 0 && x < 0x1p40) {
        double sp = 100.0 * x, e = fma(100.0, x, -sp), k = floor(sp), d = sp - k;
        if (d > 0.5 || (d == 0.5 && (e > 0 || (e == 0 && fmod(k, 2.0) != 0))))
            k += 1;
        return k / 100.0;
    }
    /* glibc's printf rounds the exact binary value to nearest, ties to even: the same result
     * as Python's correctly rounded round(). */
    char buf[64];
    (void)snprintf(buf, sizeof(buf), "%.*f", decimals, x);
    return strtod(buf, NULL);
}

/* GPU a pod asks, milli: num_gpu x gpu_milli for milli requests, as the FGD experiments count. */
static int64_t gpu_request(const struct gs_sim_input *in, uint32_t pod)
{
    return in->req_milli[pod];
}

/*
 * Tuning down: remove the k-th remaining pod, k uniform in [0, remaining), until the total is at
 * most `target`, keeping the order of the rest. The k-th remaining position is found in
 * O(log n) with a Fenwick tree of "still present" flags (the descent finds the smallest prefix
 * holding k + 1 present pods), so the random stream and the result are those of removing one
 * element at a time from an array, without its O(n) shifts per removal. On return `list` holds
 * the remaining pods in order and `*len` their count.
 */
static int shrink_pod_list(const struct gs_sim_input *in, double target, int64_t total,
                           struct gs_rng *rng, uint32_t *list, uint32_t *len)
{
    uint32_t n = *len;
    uint32_t *tree = malloc(((size_t)n + 1) * sizeof(*tree)); /* 1-based */
    uint8_t *gone = calloc(n ? n : 1, 1);
    if (!tree || !gone) {
        free(tree);
        free(gone);
        return GS_ENOMEM;
    }
    /* All present: node i covers (i - lowbit(i), i], so it holds lowbit(i). */
    for (uint32_t i = 1; i <= n; i++)
        tree[i] = i & (0u - i);
    uint32_t top = 1;
    while (top <= n / 2)
        top <<= 1;
    uint32_t remaining = n;
    while ((double)total > target && remaining > 0) {
        uint32_t k = gs_rng_below(rng, remaining); /* 0-based rank among the present */
        uint32_t pos = 0;                          /* largest prefix with at most k present */
        for (uint32_t step = top; step; step >>= 1) {
            if (pos + step <= n && tree[pos + step] <= k) {
                pos += step;
                k -= tree[pos];
            }
        }
        /* Position pos (0-based) is the k-th present pod. */
        gone[pos] = 1;
        total -= gpu_request(in, list[pos]);
        for (uint32_t i = pos + 1; i <= n; i += i & (0u - i))
            tree[i]--;
        remaining--;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!gone[i])
            list[w++] = list[i];
    *len = w;
    free(tree);
    free(gone);
    return GS_OK;
}

/*
 * Steps 2-3 of the method: shuffle the name-sorted pods, then tune the list to `tune` x the
 * cluster's GPU capacity. Tuning up draws pods of the name-sorted original list with
 * replacement and appends them; like the reference, its stop test compares the running total
 * plus the clone's per-GPU milli (not its total) with the target, and drops the clone that
 * stops it. Tuning down removes random pods, keeping the order of the rest (shrink_pod_list).
 */
static int make_pod_list(const struct gs_sim_input *in, double tune, struct gs_rng *rng,
                         uint32_t **list_out, uint32_t *len_out)
{
    uint32_t n = in->pods.n;
    size_t cap = (size_t)n + 16;
    uint32_t *list = malloc(cap * sizeof(*list));
    if (!list)
        return GS_ENOMEM;
    memcpy(list, in->pods_by_name, n * sizeof(*list));
    gs_rng_shuffle_u32(rng, list, n);
    uint32_t len = n;
    double target = tune * (double)in->total_gpus * GS_GPU_MILLI;
    int64_t total = 0, trace_gpu = 0;
    for (uint32_t i = 0; i < n; i++)
        total += gpu_request(in, list[i]);
    trace_gpu = total;
    if ((double)total < target && trace_gpu > 0) {
        for (;;) {
            uint32_t pick = in->pods_by_name[gs_rng_below(rng, n)];
            const struct gs_pod_req *r = &in->reqs[pick];
            /* The reference adds one GPU's milli here; other kinds their charge. */
            int64_t step = gs_req_kind(r) == GS_REQ_MILLI ? r->gpu_milli : in->req_milli[pick];
            if ((double)(total + step) > target)
                break;
            total += gpu_request(in, pick);
            if (len == GS_SIM_PODS_MAX) {
                /* A list of tiny GPU requests and CPU-only pods would need without end. */
                free(list);
                return GS_ELIMIT;
            }
            if (len == cap) {
                cap = cap * 2 < GS_SIM_PODS_MAX ? cap * 2 : GS_SIM_PODS_MAX;
                uint32_t *grown = realloc(list, cap * sizeof(*list));
                if (!grown) {
                    free(list);
                    return GS_ENOMEM;
                }
                list = grown;
            }
            list[len++] = pick;
        }
    } else if ((double)total > target) {
        int err = shrink_pod_list(in, target, total, rng, list, &len);
        if (err != GS_OK) {
            free(list);
            return err;
        }
    }
    *list_out = list;
    *len_out = len;
    return GS_OK;
}

/* Running sums of one arrived-workload bucket. */
struct bucket {
    uint32_t events;
    double alloc_sum;      /* of per-event allocation %, each rounded to 2 decimals */
    double frag_milli_sum; /* of cluster fragmentation, milli-GPU */
    double ratio_sum;      /* of fragmentation / idle, % */
};

#define SIM_BUCKETS (GS_SIM_COLUMNS + 1)

int gs_sim_run(const struct gs_sim_input *in, const struct gs_sim_run_config *cfg,
               struct gs_sim_result *res)
{
    if (cfg->policy >= GS_POLICY_COUNT || !(cfg->tune > 0) || cfg->tune > 100)
        return GS_EINVAL;
    memset(res, 0, sizeof(*res));
    res->policy = cfg->policy;
    res->seed = cfg->seed;
    res->tune = cfg->tune;
    res->total_gpus = in->total_gpus;

    struct gs_rng rng;
    gs_rng_seed(&rng, cfg->seed);
    uint32_t *list = NULL, len = 0, *rank = NULL;
    struct gs_cluster *c = NULL;
    struct gs_sched *s = NULL;
    struct bucket *b = calloc(SIM_BUCKETS, sizeof(*b));
    /* crossed[k]: the state after the pod whose arrival jumped over column k (small clusters,
     * where one pod is several percent of the capacity). */
    struct bucket *crossed = calloc(SIM_BUCKETS, sizeof(*crossed));
    int err = b && crossed ? make_pod_list(in, cfg->tune, &rng, &list, &len) : GS_ENOMEM;
    if (err)
        goto out;
    err = GS_ENOMEM;
    uint32_t nn = in->nodes.n;
    rank = malloc((nn + 1) * sizeof(*rank));
    if (!rank)
        goto out;
    /* Step 4: the tie-break rank of name-sorted node i is perm[i] of a random permutation. */
    for (uint32_t i = 0; i < nn; i++)
        rank[i] = i;
    gs_rng_shuffle_u32(&rng, rank, nn);
    if ((err = build_cluster(in, &c)) != GS_OK)
        goto out;
    struct gs_sched_config sc = {gs_policy_name(cfg->policy), rank, &in->workload, 0};
    if ((err = gs_sched_new(c, &sc, &s)) != GS_OK)
        goto out;

    const double total_gpus = in->total_gpus;
    const double total_milli = total_gpus * GS_GPU_MILLI;
    int64_t arrived = 0;
    /* The column of the arrived workload before this pod; -1 before the first, so that a first
     * pod that jumps past column 0 (a small cluster) fills it too. */
    int prev_col = -1;
    for (uint32_t k = 0; k < len; k++) {
        const struct gs_pod_req *r = &in->reqs[list[k]];
        arrived += gpu_request(in, list[k]);
        struct gs_placement pl;
        err = gs_sched_place(s, r, &rng, &pl);
        if (err == GS_OK)
            err = gs_cluster_bind(c, r, &pl);
        if (err == GS_OK && in->mixed && (pl.num_gpu > 0 || pl.mig_count > 0)) {
            /* Per-mode books: the mode of the GPUs it took, charged as the engine charges. */
            const struct gs_node *nd = gs_cluster_node(c, pl.node);
            uint32_t mode = pl.mig_count ? GS_GPU_SHARE_MIG : nd->gpus[pl.gpu_index[0]].sharing;
            double gpus = 0;
            if ((err = gs_charge_placement(c, r, &pl, &gpus)) != GS_OK)
                goto out;
            res->mode_pods[mode % GS_SIM_MODES]++;
            res->mode_used_milli[mode % GS_SIM_MODES] += gs_charge_milli(gpus);
        }
        if (err == GS_EUNSCHEDULABLE) {
            res->pods_failed++;
        } else if (err) {
            goto out;
        }
        /* Step 6: record this event in its arrived-workload bucket. */
        double arrive = rint((double)arrived / total_gpus / 10.0);
        int cur_col = arrive >= SIM_BUCKETS ? SIM_BUCKETS : (int)arrive;
        bool in_range = arrive >= 0 && arrive < SIM_BUCKETS;
        if (!in_range && cur_col <= prev_col + 1)
            continue;
        int64_t used = gs_cluster_gpu_milli_used(c);
        double frag = gs_sched_cluster_frag(s);
        double idle = total_milli - (double)used;
        struct bucket ev = {1, gs_round_half_even((double)used / total_gpus / 10.0, 2), frag,
                            idle > 0 ? 100.0 * frag / idle : 0.0};
        /* Columns this pod's arrival jumped over take the state after it; used only where the
         * neighbour rule below leaves a column empty, so clusters where every column sees an
         * event (the published traces) give the same numbers as before. */
        for (int j = prev_col + 1; j < cur_col && j < SIM_BUCKETS; j++)
            crossed[j] = ev;
        if (cur_col > prev_col)
            prev_col = cur_col;
        if (!in_range)
            continue;
        struct bucket *bk = &b[(int)arrive];
        bk->events++;
        bk->alloc_sum += ev.alloc_sum;
        bk->frag_milli_sum += ev.frag_milli_sum;
        bk->ratio_sum += ev.ratio_sum;
    }
    err = GS_OK;
    res->pods = len;
    res->arrived_gpu_milli = arrived;
    res->used_gpu_milli = gs_cluster_gpu_milli_used(c);
    res->mixed = in->mixed;
    memcpy(res->mode_gpus, in->mode_gpus, sizeof(res->mode_gpus));
    for (int col = 0; col < GS_SIM_COLUMNS; col++) {
        /* An empty column takes the events of its neighbours (the reference's discretiser). */
        struct bucket m = b[col];
        if (m.events == 0) {
            for (int d = -1; d <= 1; d += 2) {
                int j = col + d;
                if (j < 0 || j >= SIM_BUCKETS)
                    continue;
                m.events += b[j].events;
                m.alloc_sum += b[j].alloc_sum;
                m.frag_milli_sum += b[j].frag_milli_sum;
                m.ratio_sum += b[j].ratio_sum;
            }
        }
        if (m.events == 0)
            m = crossed[col];
        if (m.events == 0) {
            res->alloc_pct[col] = res->frag_pct[col] = res->frag_ratio_pct[col] = NAN;
            continue;
        }
        res->alloc_pct[col] = gs_round_half_even(m.alloc_sum / m.events, 2);
        res->frag_pct[col] =
            gs_round_half_even(100.0 * (m.frag_milli_sum / m.events) / 1000.0 / total_gpus, 2);
        res->frag_ratio_pct[col] = m.ratio_sum / m.events;
    }
out:
    gs_sched_free(s);
    gs_cluster_free(c);
    free(rank);
    free(list);
    free(b);
    free(crossed);
    return err;
}

int gs_sim_arrivals(const struct gs_sim_input *in, uint64_t seed, double tune, uint32_t **list,
                    uint32_t *len)
{
    if (!(tune > 0) || tune > 100)
        return GS_EINVAL;
    struct gs_rng rng;
    gs_rng_seed(&rng, seed); /* as gs_sim_run(): the pod list is its first draw */
    return make_pod_list(in, tune, &rng, list, len);
}

const struct gs_pod_req *gs_sim_input_req(const struct gs_sim_input *in, uint32_t i)
{
    return i < in->pods.n ? &in->reqs[i] : NULL;
}

bool gs_sim_input_mixed(const struct gs_sim_input *in)
{
    return in->mixed != 0;
}

int gs_sim_input_cluster(const struct gs_sim_input *in, struct gs_cluster **out)
{
    return build_cluster(in, out);
}
