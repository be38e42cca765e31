/*
 * Time-based trace replay through the multi-tenant engine (include/gpusched/replay.h).
 *
 * One event heap ordered by (time, sequence) drives everything: arrivals, ends of runs,
 * deletions of pods that never ran in production, and retry ticks while pods wait. All events
 * at one instant are applied, then one scheduling cycle runs at that instant. Per-queue GPU use
 * is integrated between instants, and the share of each queue is sampled on a fixed period.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "gpusched/replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/charge.h"
#include "gpusched/defrag.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/sched.h"
#include "util/file.h"
#include "util/heap.h"

#define REPLAY_NODE_PODS_MAX 1001
/* Defragmentation: waiting pods checked for "fits nowhere" per cycle at most, and the fit
 * trials one search may make (bounds a replay's time; a search that reaches it counts as
 * no_plan unless it found one). */
#define DEFRAG_CHECKS_MAX 16
#define DEFRAG_EVALS_MAX 200000u
/* Retries without progress, once no event is left, before the replay ends (2 h at 10 min). */
#define REPLAY_IDLE_RETRIES 12
/* Trace times above this (about 31,700 years) are refused: they would overflow as ms. */
#define REPLAY_TIME_S_MAX INT64_C(1000000000000)

enum ev_kind { EV_ARRIVE = 0, EV_END = 1, EV_DELETE = 2, EV_RETRY = 3 };

struct event {
    int64_t t_ms;
    uint64_t seq;
    uint32_t kind;
    uint32_t pod;   /* trace index */
    uint32_t token; /* EV_END: the run it ends */
};

struct gs_replay {
    struct gs_replay_queue *queues; /* leaf queues, in engine id order */
    uint32_t nqueues;
    uint32_t *leaf_of; /* engine queue id -> leaf index (UINT32_MAX: not a leaf) */
    uint32_t *active;  /* per leaf: samples in which it had pods waiting */
    struct gs_replay_sample *samples;
    uint32_t nsamples, capsamples;
    double *share_alloc, *share_fair; /* nsamples x nqueues */
    uint32_t *wait_queue;
    double *wait_s;
    char **wait_pod; /* the trace pod's name (owned) */
    uint32_t nwaits;
    uint64_t evict_by[GS_REPLAY_EVICT_REASONS]; /* by enum gs_evict_reason */
    uint32_t pods;
    uint64_t binds, evictions, cycles;
    uint64_t mig_repartitions; /* dynamic MIG: GPUs re-partitioned for pods that started */
    int64_t end_ms;
    uint32_t gangs, gangs_started, gangs_timed_out; /* formed by podGroups rules */
    int mixed; /* 1: the input named sharing modes or kinds, and modes[] is kept */
    struct gs_replay_mode modes[GS_REPLAY_MODES]; /* by enum gs_gpu_sharing */
    struct gs_replay_defrag defrag;               /* what the planner did */
};

struct run_state {
    struct gs_replay *r;
    struct gs_engine *e;
    const struct gs_trace_pods *pods;
    struct gs_heap h; /* of struct event, by (t_ms, seq) */
    uint64_t seq;
    uint32_t *engine_of;  /* trace index -> engine pod id (UINT32_MAX before arrival) */
    uint32_t *trace_of;   /* engine pod id -> trace index */
    int64_t *runtime_ms;  /* -1: never ran in production */
    uint32_t *token;      /* current run of each trace pod */
    int64_t *first_start; /* -1 until started */
    double *jct_s;        /* per trace pod, -1 until completed */
    int64_t now_ms;
    uint32_t *gang_id;       /* per formed gang: its engine gang id */
    const uint32_t *gang_of; /* per trace pod: its formed gang or GS_QCONFIG_NO_GANG */
    bool *gang_timed_out;    /* per formed gang: a GANG_TIMEOUT event was seen */
    int err;
    const struct gs_replay_config *cfg; /* for its taps */
    struct gs_cluster *c;
    const struct gs_pod_req *reqs; /* per trace pod */
    /* Per-mode books, kept when r->mixed: what each running pod is charged (the engine's own
     * rule, gs_charge_milli() of gs_charge_placement()) and in which mode, and the sums. */
    int64_t *charge_milli;                   /* per trace pod, while it runs */
    uint8_t *mode_of;                        /* per trace pod, while it runs */
    int64_t mode_now_milli[GS_REPLAY_MODES]; /* charged now, per mode */
    /* Defragmentation (cfg->defrag). */
    int64_t *df_next_ms;           /* per trace pod: not tried again before this time */
    uint32_t df_low;               /* engine pods below this id have all ended */
    struct gs_defrag_pod *df_pods; /* scratch: the running pods given to the planner */
    uint32_t *df_ids;              /* scratch: their engine ids */
    int64_t min_run_ms;            /* movable only after running this long */
};

/* Arrival of a pod in replay time: its creation time, divided by the arrival speed-up. */
static int64_t arrival_ms(const struct gs_trace_pod *p, const struct gs_replay_config *cfg)
{
    int64_t t = p->creation_time_s < 0 ? 0 : p->creation_time_s * 1000;
    return cfg->arrival_speedup > 1 ? (int64_t)((double)t / cfg->arrival_speedup) : t;
}

static bool ev_before(const void *pa, const void *pb, void *ctx)
{
    const struct event *a = pa, *b = pb;
    (void)ctx;
    if (a->t_ms != b->t_ms)
        return a->t_ms < b->t_ms;
    return a->seq < b->seq;
}

/* Queues an event, stamping it with the next sequence number (ties in time keep push order). */
static int heap_push(struct run_state *s, struct event ev)
{
    ev.seq = s->seq++;
    return gs__heap_push(&s->h, &ev);
}

/* Time of the next event; the heap must not be empty. */
static int64_t next_t_ms(const struct run_state *s)
{
    return ((const struct event *)gs__heap_top(&s->h))->t_ms;
}

/* How full one GPU is, in % of the capacity of its mode. */
static double gpu_fill_pct(const struct gs_gpu *g)
{
    switch (g->sharing) {
    case GS_GPU_SHARE_TIMESLICE:
        return g->replicas ? 100.0 * g->replicas_used / g->replicas : 0.0;
    case GS_GPU_SHARE_MIG: {
        uint32_t held = 0, all = g->mig_model ? g->mig_model->compute_slices : 0;
        for (uint32_t k = 0; all && k < g->mig_count; k++)
            if (g->mig_held & (1u << k))
                held += g->mig_model->profiles[g->mig[k].profile].compute_slices;
        return all ? 100.0 * held / all : 0.0;
    }
    default: {
        double f = 100.0 * g->gpu_milli_used / GS_GPU_MILLI;
        if (g->mem_mib > 0 && 100.0 * (double)g->mem_mib_used / (double)g->mem_mib > f)
            f = 100.0 * (double)g->mem_mib_used / (double)g->mem_mib;
        return f;
    }
    }
}

/* Per-mode books of a pod that starts (start) or stops running. */
static void book_mode(struct run_state *s, uint32_t tp, const struct gs_placement *pl, bool start)
{
    if (!start) {
        if (s->mode_of[tp] < GS_REPLAY_MODES) {
            s->mode_now_milli[s->mode_of[tp]] -= s->charge_milli[tp];
            s->mode_of[tp] = UINT8_MAX;
        }
        return;
    }
    const struct gs_node *n = gs_cluster_node(s->c, pl->node);
    if (n == NULL || (pl->num_gpu == 0 && pl->mig_count == 0))
        return;
    uint8_t mode = pl->mig_count ? (uint8_t)GS_GPU_SHARE_MIG : n->gpus[pl->gpu_index[0]].sharing;
    double gpus = 0;
    if (mode >= GS_REPLAY_MODES || gs_charge_placement(s->c, &s->reqs[tp], pl, &gpus) != GS_OK) {
        s->err = GS_EINVAL;
        return;
    }
    s->charge_milli[tp] = gs_charge_milli(gpus);
    s->mode_of[tp] = mode;
    s->mode_now_milli[mode] += s->charge_milli[tp];
    struct gs_replay_mode *m = &s->r->modes[mode];
    m->pods_started++;
    /* The GPUs the pod landed on, after its bind: the fullest one any pod ever saw. */
    for (uint32_t k = 0; k < pl->num_gpu; k++) {
        double f = gpu_fill_pct(&n->gpus[pl->gpu_index[k]]);
        if (f > m->peak_fill_pct)
            m->peak_fill_pct = f;
    }
    for (uint32_t k = 0; k < pl->mig_count; k++) {
        double f = gpu_fill_pct(&n->gpus[pl->mig[k].gpu]);
        if (f > m->peak_fill_pct)
            m->peak_fill_pct = f;
    }
}

static void on_event(void *ctx, const struct gs_event *ev)
{
    struct run_state *s = ctx;
    if (s->err)
        return;
    uint32_t tp = s->trace_of[ev->pod];
    if (s->r->mixed && ev->pl != NULL) {
        if (ev->kind == GS_EV_BIND || ev->kind == GS_EV_BACKFILL || ev->kind == GS_EV_ADOPT)
            book_mode(s, tp, ev->pl, true);
        else if (ev->kind == GS_EV_EVICT || ev->kind == GS_EV_FINISH || ev->kind == GS_EV_DELETE)
            book_mode(s, tp, ev->pl, false);
        if (s->err)
            return;
    }
    if (ev->kind == GS_EV_BIND || ev->kind == GS_EV_BACKFILL) {
        /* After a dynamic MIG re-partition the pod runs from the end of the re-partition. */
        int64_t start_ms = ev->now_ms + ev->start_delay_ms;
        s->r->binds++;
        s->r->mig_repartitions += ev->mig_repartitions;
        s->token[tp]++;
        if (s->first_start[tp] < 0)
            s->first_start[tp] = start_ms;
        if (s->runtime_ms[tp] >= 0)
            s->err = heap_push(
                s, (struct event){start_ms + s->runtime_ms[tp], 0, EV_END, tp, s->token[tp]});
    } else if (ev->kind == GS_EV_EVICT) {
        s->r->evictions++;
        if ((unsigned)ev->reason < GS_REPLAY_EVICT_REASONS)
            s->r->evict_by[ev->reason]++;
        s->token[tp]++; /* its pending end no longer counts */
    } else if (ev->kind == GS_EV_GANG_TIMEOUT) {
        s->token[tp]++; /* failed: it will not run */
        if (s->gang_of[tp] != GS_QCONFIG_NO_GANG)
            s->gang_timed_out[s->gang_of[tp]] = true;
    }
    if (s->cfg->tap_event)
        s->cfg->tap_event(s->cfg->tap_ctx, s->c, s->e, ev,
                          ev->kind == GS_EV_SUBMIT ? NULL : &s->pods->v[tp]);
}

static double percentile(double *v, uint32_t n, double q)
{
    if (n == 0)
        return NAN;
    /* Nearest rank on sorted values. */
    uint32_t k = (uint32_t)ceil(q * n);
    if (k < 1)
        k = 1;
    return v[k - 1];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int take_sample(struct run_state *s, int64_t t_ms, int64_t cap_gpu)
{
    struct gs_replay *r = s->r;
    if (r->nsamples == r->capsamples) {
        uint32_t cap = r->capsamples ? r->capsamples * 2 : 256;
        struct gs_replay_sample *sv = realloc(r->samples, cap * sizeof(*sv));
        if (sv)
            r->samples = sv;
        double *a = realloc(r->share_alloc, (size_t)cap * r->nqueues * sizeof(*a));
        if (a)
            r->share_alloc = a;
        double *f = realloc(r->share_fair, (size_t)cap * r->nqueues * sizeof(*f));
        if (f)
            r->share_fair = f;
        if (!sv || !a || !f)
            return GS_ENOMEM;
        r->capsamples = cap;
    }
    struct gs_queue_info root;
    gs_engine_queue_info(s->e, GS_QUEUE_ROOT, &root);
    uint32_t pending = 0, running = 0;
    for (uint32_t qi = 0; qi < gs_engine_queue_count(s->e); qi++) {
        uint32_t li = r->leaf_of[qi];
        if (li == UINT32_MAX)
            continue;
        struct gs_queue_info in;
        gs_engine_queue_info(s->e, qi, &in);
        pending += in.pending;
        running += in.running;
        double a = 100.0 * (double)in.allocated[GS_RES_GPU] / (double)cap_gpu;
        double f = 100.0 * (double)in.fair[GS_RES_GPU] / (double)cap_gpu;
        r->share_alloc[(size_t)r->nsamples * r->nqueues + li] = a;
        r->share_fair[(size_t)r->nsamples * r->nqueues + li] = f;
        if (in.pending > 0) {
            r->queues[li].share_mean_pct += a;
            r->queues[li].fair_mean_pct += f;
            r->active[li]++;
        }
    }
    r->samples[r->nsamples++] = (struct gs_replay_sample){
        t_ms, 100.0 * (double)root.allocated[GS_RES_GPU] / (double)cap_gpu, pending, running};
    return GS_OK;
}

/* Whether `req` fits on some node that takes pods, as the cluster is. */
static bool fits_somewhere(const struct gs_cluster *c, const struct gs_pod_req *req)
{
    const struct gs_node_fit *fit = gs_cluster_fit_array(c);
    for (uint32_t i = 0; i < gs_cluster_node_count(c); i++) {
        const struct gs_node *nd = gs_cluster_node(c, i);
        if (nd->present && !nd->unschedulable && gs_cluster_fits_at(c, fit, i, req))
            return true;
    }
    return false;
}

/*
 * One defragmentation step after a cycle (gs_replay_config.defrag): finds the pod that has
 * waited longest past the threshold and fits nowhere, plans for it and carries the plan out.
 * Engine ids grow with submission time (the replay forgets no pod), so the first eligible id
 * is the longest wait. *target receives the planned-for pod, or UINT32_MAX when nothing moved.
 */
static int defrag_step(struct run_state *s, int64_t t, uint32_t *target)
{
    const struct gs_replay_config *cfg = s->cfg;
    *target = UINT32_MAX;
    uint32_t np = gs_engine_pod_count(s->e), pick = UINT32_MAX, checks = 0;
    int64_t again_ms = cfg->defrag_wait_ms > 0 ? cfg->defrag_wait_ms : 60000;
    struct gs_tpod_info in;
    for (uint32_t id = s->df_low; id < np && checks < DEFRAG_CHECKS_MAX; id++) {
        if (gs_engine_pod_info(s->e, id, &in) != GS_OK)
            continue;
        if (in.state == GS_TPOD_SUCCEEDED || in.state == GS_TPOD_FAILED) {
            if (id == s->df_low)
                s->df_low++;
            continue;
        }
        if (in.state != GS_TPOD_PENDING || in.gang != GS_NO_GANG)
            continue;
        if (t - in.submit_ms < cfg->defrag_wait_ms)
            break; /* every later pod has waited less */
        uint32_t tp = s->trace_of[id];
        if (s->df_next_ms[tp] > t)
            continue;
        s->df_next_ms[tp] = t + again_ms;
        checks++;
        if (!fits_somewhere(s->c, &s->reqs[tp])) {
            pick = id;
            break;
        }
    }
    if (pick == UINT32_MAX)
        return GS_OK;
    /* A pod runs at least the wait threshold between moves (and the queues file's minimum run
     * time), so that plans cannot keep restarting the same pods. */
    int64_t min_run_ms = s->min_run_ms > cfg->defrag_wait_ms ? s->min_run_ms : cfg->defrag_wait_ms;
    uint32_t n = 0;
    for (uint32_t id = 0; id < np; id++) {
        if (gs_engine_pod_info(s->e, id, &in) != GS_OK || in.state != GS_TPOD_RUNNING)
            continue;
        s->df_pods[n] = (struct gs_defrag_pod){s->reqs[s->trace_of[id]], in.pl,
                                               in.gang == GS_NO_GANG && !in.foreign &&
                                                   t - in.start_ms >= min_run_ms};
        s->df_ids[n++] = id;
    }
    struct gs_defrag_config dc = {cfg->defrag_moves ? cfg->defrag_moves : 2, DEFRAG_EVALS_MAX};
    struct gs_defrag_plan plan;
    struct gs_replay_defrag *d = &s->r->defrag;
    int err = gs_defrag_plan(s->c, s->df_pods, n, &s->reqs[s->trace_of[pick]], &dc, &plan);
    d->searches++;
    d->evals += plan.evals;
    if (err == GS_ENOENT || err == GS_ELIMIT || (err == GS_OK && plan.pods_moved == 0)) {
        d->no_plan += err != GS_OK;
        return GS_OK;
    }
    if (err)
        return err;
    uint32_t ids[GS_DEFRAG_BUDGET_MAX];
    struct gs_placement pls[GS_DEFRAG_BUDGET_MAX];
    uint32_t m = 0;
    for (uint32_t k = 0; k < plan.n_ops; k++)
        if (plan.ops[k].kind == GS_DEFRAG_PLACE && plan.ops[k].pod != GS_DEFRAG_PENDING) {
            ids[m] = s->df_ids[plan.ops[k].pod];
            pls[m++] = plan.ops[k].pl;
        }
    if ((err = gs_engine_migrate(s->e, ids, pls, m, t, cfg->defrag_restart_ms)) != GS_OK)
        return err;
    d->plans++;
    d->pods_moved += m;
    d->gpu_milli_moved += plan.gpu_milli_moved;
    for (uint32_t k = 0; k < m; k++)
        if (gs_engine_pod_info(s->e, ids[k], &in) == GS_OK && s->r->leaf_of[in.queue] != UINT32_MAX)
            s->r->queues[s->r->leaf_of[in.queue]].defrag_moved++;
    *target = pick;
    return GS_OK;
}

/* After the cycle that follows a plan: whether its pod started, and what that recovered. */
static void defrag_note_start(struct run_state *s, uint32_t pod)
{
    struct gs_tpod_info in;
    if (gs_engine_pod_info(s->e, pod, &in) != GS_OK || in.state != GS_TPOD_RUNNING)
        return;
    double gpus = 0;
    (void)gs_charge_placement(s->c, &s->reqs[s->trace_of[pod]], &in.pl, &gpus);
    s->r->defrag.started++;
    s->r->defrag.gpu_milli_recovered += gs_charge_milli(gpus);
    if (s->r->leaf_of[in.queue] != UINT32_MAX)
        s->r->queues[s->r->leaf_of[in.queue]].defrag_started++;
}

int gs_replay_run(const struct gs_trace_nodes *nodes, const struct gs_trace_pods *pods,
                  const struct gs_qconfig *qc, const struct gs_replay_config *cfg,
                  struct gs_replay **out, struct gs_diag *diag)
{
    *out = NULL;
    if (diag)
        memset(diag, 0, sizeof(*diag));
    if (cfg->mig_repartition_ms < 0) {
        if (diag)
            (void)snprintf(diag->msg, sizeof(diag->msg),
                           "the MIG re-partition delay is negative (%lld ms)",
                           (long long)cfg->mig_repartition_ms);
        return GS_EINVAL;
    }
    if (cfg->defrag && (cfg->defrag_wait_ms < 0 || cfg->defrag_restart_ms < 0 ||
                        cfg->defrag_moves > GS_DEFRAG_BUDGET_MAX)) {
        if (diag)
            (void)snprintf(diag->msg, sizeof(diag->msg),
                           "defragmentation: a negative wait or restart delay, or more than %d "
                           "moves per plan",
                           GS_DEFRAG_BUDGET_MAX);
        return GS_EINVAL;
    }
    if (!pods->has_times) {
        if (diag)
            (void)snprintf(
                diag->msg, sizeof(diag->msg),
                "the pod list has no creation/deletion/scheduled time columns to replay");
        return GS_EINVAL;
    }
    int err = GS_ENOMEM;
    struct run_state s;
    memset(&s, 0, sizeof(s));
    gs__heap_init(&s.h, sizeof(struct event), ev_before, NULL);
    struct gs_cluster *c = NULL;
    struct gs_workload w = {0};
    struct gs_pod_req *reqs = NULL;
    struct gs_qconfig_gangs gangs;
    memset(&gangs, 0, sizeof gangs);
    const char **specs = NULL;
    uint32_t *rank = NULL, *qid = NULL, *pcid = NULL;
    struct gs_replay *r = calloc(1, sizeof(*r));
    uint32_t n = pods->n;
    if (!r)
        return GS_ENOMEM;
    s.r = r;
    s.pods = pods;
    s.cfg = cfg;
    if ((err = gs_cluster_new(&c)) != GS_OK)
        goto out;
    s.c = c;
    /* Nodes in name order, as the simulator adds them. */
    uint32_t *order = malloc((nodes->n + 1) * sizeof(*order));
    if (!order) {
        err = GS_ENOMEM;
        goto out;
    }
    err = gs_trace_nodes_order_by_name(nodes->v, nodes->n, order);
    if (err) {
        free(order);
        goto out;
    }
    for (uint32_t i = 0; i < pods->n; i++) {
        const struct gs_trace_pod *p = &pods->v[i];
        if (p->creation_time_s > REPLAY_TIME_S_MAX || p->deletion_time_s > REPLAY_TIME_S_MAX ||
            p->scheduled_time_s > REPLAY_TIME_S_MAX) {
            if (diag)
                (void)snprintf(diag->msg, sizeof(diag->msg),
                               "pod %.64s: a time above %lld s cannot be replayed", p->name,
                               (long long)REPLAY_TIME_S_MAX);
            free(order);
            err = GS_EINVAL;
            goto out;
        }
    }
    int64_t cap_gpu = 0;
    for (uint32_t k = 0; k < nodes->n; k++) {
        const struct gs_trace_node *tn = &nodes->v[order[k]];
        struct gs_gpu_mode modes[GS_NODE_GPUS_MAX];
        struct gs_node_spec ns;
        gs_trace_node_spec(tn, REPLAY_NODE_PODS_MAX, modes, &ns);
        if ((err = gs_cluster_add_node(c, &ns, NULL)) != GS_OK) {
            free(order);
            goto out;
        }
        cap_gpu += (int64_t)tn->gpu_count * GS_GPU_MILLI;
        if (nodes->has_modes || pods->has_sharing)
            r->modes[tn->gpu_mode.sharing < GS_REPLAY_MODES ? tn->gpu_mode.sharing : 0].gpus +=
                tn->gpu_count;
    }
    r->mixed = nodes->has_modes || pods->has_sharing;
    free(order);
    if (cap_gpu == 0) {
        if (diag)
            (void)snprintf(diag->msg, sizeof(diag->msg), "the cluster has no GPU (%u nodes)",
                           nodes->n);
        err = GS_EINVAL;
        goto out;
    }
    err = GS_ENOMEM;
    reqs = calloc(n + 1, sizeof(*reqs));
    specs = calloc(n + 1, sizeof(*specs));
    rank = malloc((nodes->n + 1) * sizeof(*rank));
    qid = malloc((n + 1) * sizeof(*qid));
    pcid = malloc((n + 1) * sizeof(*pcid));
    s.engine_of = malloc((n + 1) * sizeof(uint32_t));
    s.trace_of = malloc((n + 1) * sizeof(uint32_t));
    s.runtime_ms = malloc((n + 1) * sizeof(int64_t));
    s.token = calloc(n + 1, sizeof(uint32_t));
    s.first_start = malloc((n + 1) * sizeof(int64_t));
    s.jct_s = malloc((n + 1) * sizeof(double));
    s.charge_milli = calloc(n + 1, sizeof(int64_t));
    s.mode_of = malloc(n + 1);
    s.df_next_ms = calloc(n + 1, sizeof(int64_t));
    s.df_pods = malloc((n + 1) * sizeof(*s.df_pods));
    s.df_ids = malloc((n + 1) * sizeof(*s.df_ids));
    s.min_run_ms = gs_qconfig_min_runtime_ms(qc);
    if (!s.charge_milli || !s.mode_of || !s.df_next_ms || !s.df_pods || !s.df_ids)
        goto out;
    memset(s.mode_of, UINT8_MAX, n + 1);
    s.reqs = reqs;
    if (!reqs || !specs || !rank || !qid || !pcid || !s.engine_of || !s.trace_of || !s.runtime_ms ||
        !s.token || !s.first_start || !s.jct_s)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        const struct gs_trace_pod *p = &pods->v[i];
        /* Valid: the reader checked every row with the same rule. */
        (void)gs_trace_pod_req(p, gs_cluster_model_mask(c, p->gpu_spec, strlen(p->gpu_spec)),
                               &reqs[i]);
        specs[i] = p->gpu_spec;
        s.engine_of[i] = UINT32_MAX;
        s.first_start[i] = -1;
        s.jct_s[i] = -1;
        s.runtime_ms[i] = p->scheduled_time_s >= 0 && p->deletion_time_s >= p->scheduled_time_s
                              ? (p->deletion_time_s - p->scheduled_time_s) * 1000
                              : -1;
    }
    struct gs_rng rng;
    gs_rng_seed(&rng, cfg->seed);
    for (uint32_t i = 0; i < nodes->n; i++)
        rank[i] = i;
    gs_rng_shuffle_u32(&rng, rank, nodes->n);
    const char *policy = cfg->policy ? cfg->policy : "fgd";
    bool wants_workload = strcmp(policy, "fgd") == 0 || strcmp(policy, "fgdband") == 0 ||
                          strcmp(policy, "fgdfill") == 0;
    if (wants_workload && (err = gs_workload_build(reqs, specs, n, 95, &w)) != GS_OK)
        goto out;
    struct gs_engine_config ec = {.policy = policy,
                                  .workload = &w,
                                  .node_rank = rank,
                                  .preemption = cfg->preemption,
                                  .reclaim = cfg->reclaim,
                                  .backfill = cfg->backfill,
                                  .dynamic_mig = cfg->dynamic_mig,
                                  .mig_repartition_ms = cfg->mig_repartition_ms,
                                  .on_event = on_event,
                                  .ctx = &s};
    if ((err = gs_engine_new(c, &ec, &s.e)) != GS_OK)
        goto out;
    if ((err = gs_qconfig_apply(qc, s.e, diag)) != GS_OK)
        goto out;
    /* Leaf queues and the pods' queues and classes. */
    uint32_t nq = gs_engine_queue_count(s.e);
    r->leaf_of = malloc(nq * sizeof(*r->leaf_of));
    r->queues = calloc(nq, sizeof(*r->queues));
    r->active = calloc(nq, sizeof(*r->active));
    err = GS_ENOMEM;
    if (!r->leaf_of || !r->queues || !r->active)
        goto out;
    for (uint32_t qi = 0; qi < nq; qi++) {
        struct gs_queue_info in;
        gs_engine_queue_info(s.e, qi, &in);
        r->leaf_of[qi] = UINT32_MAX;
        if (!in.leaf)
            continue;
        r->leaf_of[qi] = r->nqueues;
        char *copy = malloc(strlen(in.name) + 1);
        if (!copy)
            goto out;
        memcpy(copy, in.name, strlen(in.name) + 1);
        r->queues[r->nqueues++].name = copy; /* freed by gs_replay_free() */
    }
    err = GS_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        struct gs_qconfig_assignment as;
        memset(&as, 0, sizeof(as));
        if (gs_qconfig_assign(qc, &pods->v[i], &as) != GS_OK) {
            if (diag)
                (void)snprintf(diag->msg, sizeof(diag->msg),
                               "pod %.64s: the queues file maps it to %s: add a rule or "
                               "assignment.defaultQueue / defaultPriorityClass",
                               pods->v[i].name,
                               as.queue ? "no PriorityClass (no priorityByQoS entry for its QoS)"
                                        : "no queue");
            goto out;
        }
        int q = gs_engine_find_queue(s.e, as.queue);
        int pc = gs_engine_find_priority_class(s.e, as.priority_class);
        if (q < 0 || pc < 0 || r->leaf_of[q] == UINT32_MAX) {
            if (diag)
                (void)snprintf(diag->msg, sizeof(diag->msg),
                               "pod %s: assigned to %s/%s, not a leaf queue and class",
                               pods->v[i].name, as.queue, as.priority_class);
            goto out;
        }
        qid[i] = (uint32_t)q;
        pcid[i] = (uint32_t)pc;
        r->queues[r->leaf_of[q]].pods++;
    }
    /* Gangs from the podGroups rules, each a PodGroup of the engine. */
    if ((err = gs_qconfig_form_gangs(qc, pods, &gangs)) != GS_OK)
        goto out;
    s.gang_of = gangs.gang_of;
    s.gang_id = malloc(((size_t)gangs.n + 1) * sizeof(*s.gang_id));
    s.gang_timed_out = calloc((size_t)gangs.n + 1, sizeof(*s.gang_timed_out));
    if (s.gang_id == NULL || s.gang_timed_out == NULL) {
        err = GS_ENOMEM;
        goto out;
    }
    for (uint32_t g = 0; g < gangs.n; g++) {
        struct gs_gang_spec gs = {gangs.v[g].name, gangs.v[g].min_member, gangs.v[g].timeout_ms};
        if ((err = gs_engine_add_gang(s.e, &gs, &s.gang_id[g])) != GS_OK)
            goto out;
    }
    r->gangs = gangs.n;
    err = GS_OK;
    for (uint32_t i = 0; i < n && !err; i++) {
        const struct gs_trace_pod *p = &pods->v[i];
        int64_t t = arrival_ms(p, cfg);
        err = heap_push(&s, (struct event){t, 0, EV_ARRIVE, i, 0});
        /* A pod that never ran is deleted after as long as it waited in production. */
        if (!err && s.runtime_ms[i] < 0 && p->deletion_time_s >= p->creation_time_s)
            err = heap_push(&s, (struct event){t + (p->deletion_time_s - p->creation_time_s) * 1000,
                                               0, EV_DELETE, i, 0});
    }
    if (err)
        goto out;

    int64_t sample_ms = cfg->sample_ms > 0 ? cfg->sample_ms : INT64_C(3600) * 1000;
    int64_t retry_ms = cfg->retry_ms > 0 ? cfg->retry_ms : INT64_C(600) * 1000;
    int64_t next_sample = gs__heap_len(&s.h) ? next_t_ms(&s) : 0;
    int64_t last_t = next_sample;
    bool retry_queued = false;
    uint32_t idle_retries = 0;
    uint64_t last_progress = 0;
    uint64_t *gpu_milli_ms = calloc(r->nqueues + 1, sizeof(*gpu_milli_ms));
    uint64_t mode_milli_ms[GS_REPLAY_MODES] = {0};
    if (!gpu_milli_ms) {
        err = GS_ENOMEM;
        goto out;
    }
    while (gs__heap_len(&s.h) > 0 && !err) {
        int64_t t = next_t_ms(&s);
        /* Integrate GPU use per queue over [last_t, t) and take the samples in between. */
        for (uint32_t qi = 0; qi < nq; qi++) {
            if (r->leaf_of[qi] == UINT32_MAX)
                continue;
            struct gs_queue_info in;
            gs_engine_queue_info(s.e, qi, &in);
            gpu_milli_ms[r->leaf_of[qi]] +=
                (uint64_t)in.allocated[GS_RES_GPU] * (uint64_t)(t - last_t);
        }
        for (uint32_t m = 0; r->mixed && m < GS_REPLAY_MODES; m++)
            mode_milli_ms[m] += (uint64_t)s.mode_now_milli[m] * (uint64_t)(t - last_t);
        while (next_sample <= t && !err) {
            if (r->nsamples < GS_REPLAY_SAMPLES_MAX)
                err = take_sample(&s, next_sample, cap_gpu);
            if (cfg->tap_sample)
                cfg->tap_sample(cfg->tap_ctx, c, s.e, next_sample);
            next_sample += sample_ms;
            if (next_sample <= t && t - next_sample > sample_ms * (int64_t)GS_REPLAY_SAMPLES_MAX)
                next_sample = t; /* a long idle gap: one sample at its end is enough */
        }
        last_t = t;
        s.now_ms = t;
        while (gs__heap_len(&s.h) > 0 && next_t_ms(&s) == t && !err) {
            struct event ev;
            (void)gs__heap_pop(&s.h, &ev);
            if (ev.kind == EV_ARRIVE) {
                const struct gs_trace_pod *p = &pods->v[ev.pod];
                uint32_t g = gangs.gang_of[ev.pod];
                struct gs_tpod_spec ps = {
                    p->name,      qid[ev.pod],
                    pcid[ev.pod], g == GS_QCONFIG_NO_GANG ? GS_NO_GANG : s.gang_id[g],
                    reqs[ev.pod], cfg->backfill ? s.runtime_ms[ev.pod] : -1};
                uint32_t id;
                err = gs_engine_submit(s.e, &ps, t, &id);
                /* A gang whose minimum can never fit under its queue's caps is refused: the pod
                 * is in the engine all the same and waits, as in a cluster. */
                if (err == GS_ELIMIT)
                    err = GS_OK;
                if (!err) {
                    s.engine_of[ev.pod] = id;
                    s.trace_of[id] = ev.pod;
                    r->pods++;
                }
            } else if (ev.kind == EV_END) {
                uint32_t id = s.engine_of[ev.pod];
                struct gs_tpod_info in;
                if (id != UINT32_MAX && gs_engine_pod_info(s.e, id, &in) == GS_OK &&
                    in.state == GS_TPOD_RUNNING && s.token[ev.pod] == ev.token) {
                    err = gs_engine_finish(s.e, id, t);
                    s.jct_s[ev.pod] = (double)(t - arrival_ms(&pods->v[ev.pod], cfg)) / 1000.0;
                }
            } else if (ev.kind == EV_DELETE) {
                uint32_t id = s.engine_of[ev.pod];
                struct gs_tpod_info in;
                if (id != UINT32_MAX && gs_engine_pod_info(s.e, id, &in) == GS_OK &&
                    (in.state == GS_TPOD_PENDING || in.state == GS_TPOD_RUNNING))
                    err = gs_engine_delete(s.e, id, t);
            } else {
                retry_queued = false;
            }
        }
        if (err)
            break;
        err = gs_engine_cycle(s.e, t, &rng, NULL);
        r->cycles++;
        if (!err)
            err = s.err;
        if (!err && cfg->defrag) {
            uint32_t target;
            err = defrag_step(&s, t, &target);
            if (!err && target != UINT32_MAX) {
                err = gs_engine_cycle(s.e, t, &rng, NULL);
                r->cycles++;
                if (!err)
                    err = s.err;
                defrag_note_start(&s, target);
            }
        }
        struct gs_queue_info root;
        gs_engine_queue_info(s.e, GS_QUEUE_ROOT, &root);
        uint32_t pending = 0;
        for (uint32_t qi = 0; qi < nq; qi++) {
            struct gs_queue_info in;
            if (r->leaf_of[qi] != UINT32_MAX && gs_engine_queue_info(s.e, qi, &in) == GS_OK)
                pending += in.pending;
        }
        /* While pods wait, try again now and then even without events (min run times pass).
         * Once nothing else is left to happen and REPLAY_IDLE_RETRIES retries in a row changed
         * nothing, the waiting pods can never start: stop, they count as pending at the end. */
        uint64_t progress = r->binds + r->evictions;
        if (gs__heap_len(&s.h) == 0 && progress == last_progress)
            idle_retries++;
        else
            idle_retries = 0;
        last_progress = progress;
        if (!err && pending > 0 && !retry_queued && idle_retries < REPLAY_IDLE_RETRIES &&
            (gs__heap_len(&s.h) == 0 || next_t_ms(&s) > t + retry_ms)) {
            err = heap_push(&s, (struct event){t + retry_ms, 0, EV_RETRY, 0, 0});
            retry_queued = true;
        }
        r->end_ms = t;
    }
    if (err) {
        free(gpu_milli_ms);
        goto out;
    }
    /* Per-queue results. */
    for (uint32_t li = 0; li < r->nqueues; li++)
        r->queues[li].gpu_hours = (double)gpu_milli_ms[li] / 1000.0 / 3600000.0;
    free(gpu_milli_ms);
    for (uint32_t m = 0; r->mixed && m < GS_REPLAY_MODES; m++) {
        struct gs_replay_mode *md = &r->modes[m];
        md->gpu_milli_ms = mode_milli_ms[m];
        md->gpu_hours = (double)mode_milli_ms[m] / 1000.0 / 3600000.0;
        md->alloc_pct = md->gpus && r->end_ms > 0
                            ? 100.0 * (double)mode_milli_ms[m] /
                                  ((double)md->gpus * GS_GPU_MILLI * (double)r->end_ms)
                            : NAN;
    }
    err = GS_ENOMEM;
    r->wait_queue = malloc((n + 1) * sizeof(*r->wait_queue));
    r->wait_s = malloc((n + 1) * sizeof(*r->wait_s));
    r->wait_pod = calloc(n + 1, sizeof(*r->wait_pod));
    double *tmp = malloc((n + 1) * sizeof(*tmp));
    if (!r->wait_queue || !r->wait_s || !r->wait_pod || !tmp) {
        free(tmp);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (s.first_start[i] < 0)
            continue;
        if (!(r->wait_pod[r->nwaits] = strdup(pods->v[i].name ? pods->v[i].name : ""))) {
            free(tmp);
            goto out;
        }
        r->wait_queue[r->nwaits] = r->leaf_of[qid[i]];
        r->wait_s[r->nwaits++] = (double)(s.first_start[i] - arrival_ms(&pods->v[i], cfg)) / 1000.0;
    }
    for (uint32_t qi = 0; qi < nq; qi++) {
        uint32_t li = r->leaf_of[qi];
        if (li == UINT32_MAX)
            continue;
        struct gs_replay_queue *rq = &r->queues[li];
        struct gs_queue_info in;
        gs_engine_queue_info(s.e, qi, &in);
        rq->pending_end = in.pending;
        rq->evictions_suffered = in.evictions_suffered;
        rq->evictions_caused = in.evictions_caused;
        if (r->active[li]) {
            rq->share_mean_pct /= r->active[li];
            rq->fair_mean_pct /= r->active[li];
        } else {
            rq->share_mean_pct = rq->fair_mean_pct = NAN;
        }
        uint32_t k = 0;
        for (uint32_t w2 = 0; w2 < r->nwaits; w2++)
            /* wait_queue[0, nwaits) is written above; the analyzer forgets nwaits. */
            /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
            if (r->wait_queue[w2] == li)
                tmp[k++] = r->wait_s[w2];
        rq->started = k;
        double wsum = 0;
        for (uint32_t w3 = 0; w3 < k; w3++)
            wsum += tmp[w3];
        rq->wait_mean_s = k ? wsum / k : NAN;
        qsort(tmp, k, sizeof(*tmp), cmp_double);
        rq->wait_p50_s = percentile(tmp, k, 0.50);
        rq->wait_p95_s = percentile(tmp, k, 0.95);
        rq->wait_p99_s = percentile(tmp, k, 0.99);
        k = 0;
        double sum = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (qid[i] != qi || s.jct_s[i] < 0)
                continue;
            tmp[k++] = s.jct_s[i];
            sum += s.jct_s[i];
        }
        rq->completed = k;
        qsort(tmp, k, sizeof(*tmp), cmp_double);
        rq->jct_mean_s = k ? sum / k : NAN;
        rq->jct_p50_s = percentile(tmp, k, 0.50);
    }
    free(tmp);
    for (uint32_t g = 0; g < gangs.n; g++) {
        struct gs_gang_info gi;
        if (gs_engine_gang_info(s.e, s.gang_id[g], &gi) != GS_OK)
            continue;
        r->gangs_started += gi.started;
        r->gangs_timed_out += s.gang_timed_out[g];
    }
    {
        char msg[200];
        if (gs_engine_check(s.e, msg, sizeof(msg)) != GS_OK) {
            if (diag)
                (void)snprintf(diag->msg, sizeof(diag->msg), "invariant broken: %s", msg);
            err = GS_EINVAL;
            goto out;
        }
    }
    err = GS_OK;
out:
    gs_engine_free(s.e);
    gs_cluster_free(c);
    gs_workload_fini(&w);
    free(reqs);
    free(specs);
    free(rank);
    free(qid);
    free(pcid);
    free(s.engine_of);
    free(s.trace_of);
    free(s.runtime_ms);
    free(s.token);
    free(s.first_start);
    free(s.jct_s);
    free(s.charge_milli);
    free(s.mode_of);
    free(s.df_next_ms);
    free(s.df_pods);
    free(s.df_ids);
    free(s.gang_id);
    free(s.gang_timed_out);
    gs_qconfig_gangs_fini(&gangs);
    gs__heap_fini(&s.h);
    if (err) {
        gs_replay_free(r);
        return err;
    }
    *out = r;
    return GS_OK;
}

void gs_replay_free(struct gs_replay *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nqueues; i++)
        free((char *)r->queues[i].name);
    free(r->queues);
    free(r->leaf_of);
    free(r->active);
    free(r->samples);
    free(r->share_alloc);
    free(r->share_fair);
    free(r->wait_queue);
    free(r->wait_s);
    for (uint32_t i = 0; r->wait_pod && i < r->nwaits; i++)
        free(r->wait_pod[i]);
    free(r->wait_pod);
    free(r);
}

uint32_t gs_replay_queues(const struct gs_replay *r, const struct gs_replay_queue **q)
{
    *q = r->queues;
    return r->nqueues;
}

uint32_t gs_replay_samples(const struct gs_replay *r, const struct gs_replay_sample **s)
{
    *s = r->samples;
    return r->nsamples;
}

void gs_replay_shares(const struct gs_replay *r, const double **alloc_pct, const double **fair_pct)
{
    *alloc_pct = r->share_alloc;
    *fair_pct = r->share_fair;
}

uint32_t gs_replay_waits(const struct gs_replay *r, const uint32_t **queue, const double **wait_s)
{
    *queue = r->wait_queue;
    *wait_s = r->wait_s;
    return r->nwaits;
}

void gs_replay_gangs(const struct gs_replay *r, uint32_t *formed, uint32_t *started,
                     uint32_t *timed_out)
{
    *formed = r->gangs;
    *started = r->gangs_started;
    *timed_out = r->gangs_timed_out;
}

void gs_replay_totals(const struct gs_replay *r, uint32_t *pods, uint64_t *binds,
                      uint64_t *evictions, uint64_t *cycles, int64_t *end_ms)
{
    *pods = r->pods;
    *binds = r->binds;
    *evictions = r->evictions;
    *cycles = r->cycles;
    *end_ms = r->end_ms;
}

void gs_replay_defrag(const struct gs_replay *r, struct gs_replay_defrag *out)
{
    *out = r->defrag;
}

uint64_t gs_replay_mig_repartitions(const struct gs_replay *r)
{
    return r->mig_repartitions;
}

const char *const *gs_replay_wait_pods(const struct gs_replay *r)
{
    return (const char *const *)r->wait_pod;
}

void gs_replay_evictions_by_reason(const struct gs_replay *r, uint64_t out[GS_REPLAY_EVICT_REASONS])
{
    memcpy(out, r->evict_by, sizeof(r->evict_by));
}

int gs_replay_modes(const struct gs_replay *r, struct gs_replay_mode out[GS_REPLAY_MODES])
{
    memset(out, 0, sizeof(struct gs_replay_mode) * GS_REPLAY_MODES);
    if (!r->mixed)
        return 0;
    memcpy(out, r->modes, sizeof(r->modes));
    return 1;
}
