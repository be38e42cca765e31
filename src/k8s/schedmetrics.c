/*
 * The scheduler's /healthz, /readyz and /metrics (contract in include/gpusched/schedmetrics.h).
 * Counters and the last queue and pool snapshot live under one mutex; libmicrohttpd's internal
 * polling thread renders a scrape into a heap buffer under that mutex, grown until the text
 * fits, and hands libmicrohttpd a copy. The snapshot is capped (GS_SCHEDMETRICS_QUEUES_MAX,
 * GS_SCHEDMETRICS_POOLS_MAX), so the text is bounded.
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */

#include "gpusched/schedmetrics.h"

#include "gpusched/cluster.h"
#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/frag.h"
#include "gpusched/tenant.h"
#include "hostport.h"

#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* First size tried for a scrape's text; grown to what the render asked for until it fits. */
#define RENDER_FIRST 16384

static const char *const evict_reasons[] = {"preemption", "reclaim", "gang", "node-lost", "other"};
#define N_EVICT (sizeof(evict_reasons) / sizeof(evict_reasons[0]))

/* Upper bounds of the cycle-duration histogram, seconds; +Inf is implied. */
static const double cycle_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define N_LE (sizeof(cycle_le) / sizeof(cycle_le[0]))

/* kube-scheduler's buckets (pkg/scheduler/metrics/metrics.go): attempts ExponentialBuckets(0.001,
 * 2, 15), 1 ms .. 16.384 s; pod scheduling (the SLI) ExponentialBuckets(0.01, 2, 20), 10 ms ..
 * 5242.88 s. Filled at gs_schedmetrics_new(): start x 2^i, exact in binary floating point. */
#define N_ATTEMPT_LE 15
#define N_POD_LE 20
/* gpusched_scheduling_decision_duration_seconds: ExponentialBuckets(4e-6, 2, 20), 4 us to 2.1 s,
 * so decisions far below kube-scheduler's first bucket (1 ms) still have a p50 and a p99. */
#define N_DECISION_LE 20

/* A histogram: bucket[i] counts observations in (le[i-1], le[i]], not cumulative; the last
 * bucket is +Inf. */
_Static_assert(N_ATTEMPT_LE <= N_POD_LE && N_DECISION_LE <= N_POD_LE,
               "struct hist holds the most buckets of any histogram");

struct hist {
    uint64_t bucket[N_POD_LE + 1];
    uint64_t count;
    double sum;
};

static void hist_observe(struct hist *h, const double *le, size_t n_le, double v)
{
    size_t b = 0;
    while (b < n_le && v > le[b])
        b++;
    h->bucket[b]++;
    h->count++;
    h->sum += v;
}

/* One queue's series of the last snapshot, in the units rendered. */
struct queue_row {
    char *name;                     /* owned */
    double allocated[GS_RES_COUNT]; /* gpu GPUs, cpu cores, memory bytes */
    double fair[GS_RES_COUNT];
    double quota[GS_RES_COUNT];
    double limit[GS_RES_COUNT]; /* +Inf when unlimited */
    uint32_t pending;
    struct model_row *models; /* per GPU model, when the engine divides them (owned) */
    uint32_t n_models;
};

/* One queue's series for one GPU model (gs_queue_model_info), in GPUs. */
struct model_row {
    char *model; /* the model's name, owned */
    double allocated, demand, fair;
};

/* One node pool's series of the last snapshot. */
struct pool_row {
    char *name;           /* the label's value, owned; "" for nodes without it */
    double allocated_gpu; /* GPUs held by pods (fractional) on healthy GPUs */
    double free_gpu;      /* the rest of the healthy GPUs */
    double unhealthy_gpu; /* GPUs not healthy */
    double frag_milli;    /* sum of F over its nodes, milli-GPU */
};

struct snapshot {
    struct queue_row *queues;
    uint32_t n_queues;
    uint32_t queues_left_out;
    struct pool_row *pools;
    uint32_t n_pools;
    uint32_t pools_left_out;
    bool has_frag;    /* a workload was given */
    char *pool_label; /* owned */
};

struct gs_schedmetrics {
    pthread_mutex_t lock;                   /**< guards everything below but daemon */
    uint64_t attempts[3];                   /**< by enum gs_sched_result */
    uint64_t binds;                         /**< Bindings accepted */
    uint64_t bind_failures;                 /**< Bindings refused or failed */
    uint64_t evictions[N_EVICT];            /**< by evict_reasons */
    uint64_t cycle_bucket[N_LE + 1];        /**< cycles per bucket (not cumulative); last is +Inf */
    uint64_t cycles;                        /**< cycles recorded */
    double cycle_sum_s;                     /**< their total duration */
    double attempt_le[N_ATTEMPT_LE];        /**< upper bounds, seconds (constant after new) */
    double pod_le[N_POD_LE];                /**< upper bounds, seconds (constant after new) */
    double decision_le[N_DECISION_LE];      /**< upper bounds, seconds (constant after new) */
    struct hist attempt_hist[3];            /**< by enum gs_sched_result */
    struct hist decision_hist;              /**< every result, the fine buckets */
    struct hist pod_hist;                   /**< creation to bind */
    double decision_share_s;                /**< last cycle's duration over the pods it decided */
    bool has_share;                         /**< a cycle with a decision was recorded */
    struct snapshot snap;                   /**< queues and pools, gs_schedmetrics_observe() */
    struct gs_schedmetrics_charge *charges; /**< n_charges rows, names owned; NULL: not set */
    uint32_t n_charges;
    uint32_t pending;          /**< pods pending after the last cycle */
    uint64_t relists;          /**< watch relists after the first list (410 Gone...) */
    bool leader;               /**< gpusched_leader */
    bool ready;                /**< /readyz answers 200 */
    struct MHD_Daemon *daemon; /**< NULL when not serving; owner's thread only */
};

static void snapshot_fini(struct snapshot *sn)
{
    for (uint32_t i = 0; i < sn->n_queues; i++) {
        free(sn->queues[i].name);
        for (uint32_t k = 0; k < sn->queues[i].n_models; k++)
            free(sn->queues[i].models[k].model);
        free(sn->queues[i].models);
    }
    for (uint32_t i = 0; i < sn->n_pools; i++)
        free(sn->pools[i].name);
    free(sn->queues);
    free(sn->pools);
    free(sn->pool_label);
    memset(sn, 0, sizeof(*sn));
}

static void charges_free(struct gs_schedmetrics_charge *rows, uint32_t n)
{
    for (uint32_t i = 0; rows && i < n; i++)
        free((char *)(uintptr_t)rows[i].queue);
    free(rows);
}

int gs_schedmetrics_set_charges(struct gs_schedmetrics *m,
                                const struct gs_schedmetrics_charge *rows, uint32_t n)
{
    if (!m || (!rows && n))
        return GS_EINVAL;
    if (n > GS_SCHEDMETRICS_QUEUES_MAX)
        n = GS_SCHEDMETRICS_QUEUES_MAX;
    /* Built before the mutex is taken; swapped under it. One extra row so that n == 0 still
     * marks the families as set. */
    struct gs_schedmetrics_charge *v = calloc((size_t)n + 1, sizeof(*v));
    if (!v)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        v[i] = rows[i];
        v[i].queue = strdup(rows[i].queue ? rows[i].queue : "");
        if (!v[i].queue) {
            charges_free(v, i);
            return GS_ENOMEM;
        }
    }
    pthread_mutex_lock(&m->lock);
    struct gs_schedmetrics_charge *old = m->charges;
    uint32_t n_old = m->n_charges;
    m->charges = v;
    m->n_charges = n;
    pthread_mutex_unlock(&m->lock);
    charges_free(old, n_old);
    return GS_OK;
}

int gs_schedmetrics_new(struct gs_schedmetrics **out)
{
    if (!out)
        return GS_EINVAL;
    *out = NULL;
    struct gs_schedmetrics *m = calloc(1, sizeof(*m));
    if (!m)
        return GS_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return GS_ENOMEM;
    }
    m->attempt_le[0] = 0.001;
    for (size_t i = 1; i < N_ATTEMPT_LE; i++)
        m->attempt_le[i] = m->attempt_le[i - 1] * 2;
    m->pod_le[0] = 0.01;
    for (size_t i = 1; i < N_POD_LE; i++)
        m->pod_le[i] = m->pod_le[i - 1] * 2;
    m->decision_le[0] = 4e-6;
    for (size_t i = 1; i < N_DECISION_LE; i++)
        m->decision_le[i] = m->decision_le[i - 1] * 2;
    *out = m;
    return GS_OK;
}

void gs_schedmetrics_free(struct gs_schedmetrics *m)
{
    if (!m)
        return;
    if (m->daemon)
        MHD_stop_daemon(m->daemon); /* joins its thread: no scrape runs after this */
    pthread_mutex_destroy(&m->lock);
    snapshot_fini(&m->snap);
    charges_free(m->charges, m->n_charges);
    free(m);
}

void gs_schedmetrics_attempt(struct gs_schedmetrics *m, enum gs_sched_result r)
{
    if (!m || (unsigned)r > GS_SCHED_ERROR)
        return;
    pthread_mutex_lock(&m->lock);
    m->attempts[r]++;
    if (m->has_share) {
        hist_observe(&m->attempt_hist[r], m->attempt_le, N_ATTEMPT_LE, m->decision_share_s);
        hist_observe(&m->decision_hist, m->decision_le, N_DECISION_LE, m->decision_share_s);
    }
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_bind(struct gs_schedmetrics *m, bool ok)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (ok)
        m->binds++;
    else
        m->bind_failures++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_eviction(struct gs_schedmetrics *m, const char *reason)
{
    if (!m)
        return;
    size_t i = 0;
    while (i < N_EVICT - 1 && (!reason || strcmp(reason, evict_reasons[i]) != 0))
        i++;
    pthread_mutex_lock(&m->lock);
    m->evictions[i]++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_cycle(struct gs_schedmetrics *m, double seconds, uint32_t pending,
                           uint32_t decided)
{
    if (!m)
        return;
    size_t b = 0;
    while (b < N_LE && seconds > cycle_le[b])
        b++;
    pthread_mutex_lock(&m->lock);
    m->cycle_bucket[b]++;
    m->cycles++;
    m->cycle_sum_s += seconds;
    m->pending = pending;
    if (decided > 0) {
        m->decision_share_s = seconds / (double)decided;
        m->has_share = true;
    }
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_pod_scheduled(struct gs_schedmetrics *m, double seconds)
{
    if (!m || !(seconds >= 0))
        return;
    pthread_mutex_lock(&m->lock);
    hist_observe(&m->pod_hist, m->pod_le, N_POD_LE, seconds);
    pthread_mutex_unlock(&m->lock);
}

/* A healthy GPU's share held by pods, 0..1 (see gs_schedmetrics_observe). */
static double gpu_held(const struct gs_gpu *g)
{
    if (g->sharing == GS_GPU_SHARE_TIMESLICE)
        return g->replicas ? (double)g->replicas_used / (double)g->replicas : 0;
    if (g->sharing == GS_GPU_SHARE_MIG) {
        if (!g->mig_slices)
            return 0;
        unsigned used = 0;
        for (unsigned b = 0; b < 8; b++)
            used += (g->mig_slices_used >> b) & 1u;
        return used >= g->mig_slices ? 1.0 : (double)used / (double)g->mig_slices;
    }
    double milli = g->gpu_milli > 0 ? (double)g->gpu_milli_used / g->gpu_milli : 0;
    /* A fractions GPU with known memory: a pod asking memory alone holds no milli. */
    double mem = g->sharing == GS_GPU_SHARE_MILLI && g->mem_mib > 0
                     ? (double)g->mem_mib_used / (double)g->mem_mib
                     : 0;
    double held = milli > mem ? milli : mem;
    return held > 1.0 ? 1.0 : held;
}

static double per_unit(int64_t v, double unit)
{
    return v == GS_UNLIMITED ? (double)INFINITY : (double)v / unit;
}

/* Queue q's per-model rows: every model of the cluster, when the last cycle divided them. */
static int observe_models(const struct gs_engine *e, uint32_t q, struct queue_row *row)
{
    const struct gs_cluster *c = gs_engine_cluster(e);
    uint32_t n = 0;
    while (n < GS_MODELS_MAX && gs_cluster_model_name(c, n))
        n++;
    struct gs_queue_model_info mi;
    if (n == 0 || gs_engine_queue_model_info(e, q, 0, &mi) != GS_OK || !mi.fair_known)
        return GS_OK;
    row->models = calloc(n, sizeof(*row->models));
    if (!row->models)
        return GS_ENOMEM;
    for (uint32_t m = 0; m < n; m++) {
        if (gs_engine_queue_model_info(e, q, m, &mi) != GS_OK)
            continue;
        struct model_row *mr = &row->models[row->n_models];
        mr->model = strdup(gs_cluster_model_name(c, m));
        if (!mr->model)
            return GS_ENOMEM;
        row->n_models++;
        mr->allocated = (double)mi.allocated_milli / 1000.0;
        mr->demand = (double)mi.demand_milli / 1000.0;
        mr->fair = (double)mi.fair_milli / 1000.0;
    }
    return GS_OK;
}

static int observe_queues(const struct gs_engine *e, struct snapshot *sn)
{
    uint32_t n = gs_engine_queue_count(e);
    uint32_t want = n > 1 ? n - 1 : 0; /* id 0 is the root */
    uint32_t keep = want < GS_SCHEDMETRICS_QUEUES_MAX ? want : GS_SCHEDMETRICS_QUEUES_MAX;
    sn->queues = keep ? calloc(keep, sizeof(*sn->queues)) : NULL;
    if (keep && !sn->queues)
        return GS_ENOMEM;
    sn->queues_left_out = want - keep;
    /* gpu milli-GPU -> GPUs, cpu milli -> cores, memory MiB -> bytes */
    static const double unit[GS_RES_COUNT] = {1000.0, 1000.0, 1.0 / 1048576.0};
    for (uint32_t q = 1; q < n && sn->n_queues < keep; q++) {
        struct gs_queue_info qi;
        if (gs_engine_queue_info(e, q, &qi) != GS_OK)
            continue;
        struct queue_row *row = &sn->queues[sn->n_queues];
        row->name = strdup(qi.name ? qi.name : "");
        if (!row->name)
            return GS_ENOMEM;
        sn->n_queues++;
        for (int r = 0; r < GS_RES_COUNT; r++) {
            row->allocated[r] = per_unit(qi.allocated[r], unit[r]);
            row->fair[r] = per_unit(qi.fair[r], unit[r]);
            row->quota[r] = per_unit(qi.quota[r], unit[r]);
            row->limit[r] = per_unit(qi.limit[r], unit[r]);
        }
        row->pending = qi.pending;
        int err = observe_models(e, q, row);
        if (err)
            return err;
    }
    return GS_OK;
}

static int observe_pools(const struct gs_cluster *c, const struct gs_workload *w, const char *label,
                         struct snapshot *sn)
{
    sn->pools = calloc(GS_SCHEDMETRICS_POOLS_MAX, sizeof(*sn->pools));
    if (!sn->pools)
        return GS_ENOMEM;
    sn->has_frag = w != NULL && w->n_types > 0;
    /* Pools past the cap, each counted once: their names, to tell a new one from a known one. */
    char **left = NULL;
    uint32_t n_left = 0, cap_left = 0;
    int rc = GS_OK;
    for (uint32_t i = 0; i < gs_cluster_node_count(c) && rc == GS_OK; i++) {
        const struct gs_node *node = gs_cluster_node(c, i);
        if (!node || !node->present)
            continue;
        const char *v = gs_node_label(node, label);
        if (!v)
            v = "";
        struct pool_row *row = NULL;
        for (uint32_t p = 0; p < sn->n_pools && !row; p++)
            if (sn->pools[p].name && strcmp(sn->pools[p].name, v) == 0)
                row = &sn->pools[p];
        if (!row && sn->n_pools < GS_SCHEDMETRICS_POOLS_MAX) {
            row = &sn->pools[sn->n_pools];
            if (!(row->name = strdup(v))) {
                rc = GS_ENOMEM;
                break;
            }
            sn->n_pools++;
        }
        if (!row) {
            bool known = false;
            for (uint32_t k = 0; k < n_left && !known; k++)
                known = strcmp(left[k], v) == 0;
            if (!known) {
                if (n_left == cap_left) {
                    uint32_t nc = cap_left ? cap_left * 2 : 16;
                    char **nl = realloc(left, nc * sizeof(*nl));
                    if (!nl) {
                        rc = GS_ENOMEM;
                        break;
                    }
                    left = nl;
                    cap_left = nc;
                }
                left[n_left++] = (char *)(uintptr_t)v; /* the node's, valid during the call */
            }
            continue;
        }
        for (uint32_t g = 0; g < node->gpu_count; g++) {
            const struct gs_gpu *gpu = &node->gpus[g];
            if (!gpu->healthy) {
                row->unhealthy_gpu += 1;
                continue;
            }
            double held = gpu_held(gpu);
            row->allocated_gpu += held;
            row->free_gpu += 1 - held;
        }
        if (sn->has_frag && node->gpu_count > 0)
            row->frag_milli += gs_frag_node(w, node->model_id, node->cpu_milli_free,
                                            node->gpu_free_desc, node->gpu_count, NULL);
    }
    sn->pools_left_out = n_left;
    free(left);
    return rc;
}

int gs_schedmetrics_observe(struct gs_schedmetrics *m, const struct gs_engine *e,
                            const struct gs_cluster *c, const struct gs_workload *w,
                            const char *pool_label)
{
    if (!m)
        return GS_EINVAL;
    struct snapshot sn;
    memset(&sn, 0, sizeof(sn));
    const char *label = pool_label ? pool_label : GS_SCHEDMETRICS_POOL_LABEL;
    int rc = (sn.pool_label = strdup(label)) ? GS_OK : GS_ENOMEM;
    if (rc == GS_OK && e)
        rc = observe_queues(e, &sn);
    if (rc == GS_OK && e && c)
        rc = observe_pools(c, w, label, &sn);
    if (rc != GS_OK) {
        snapshot_fini(&sn);
        return rc;
    }
    pthread_mutex_lock(&m->lock);
    struct snapshot old = m->snap;
    m->snap = sn;
    pthread_mutex_unlock(&m->lock);
    snapshot_fini(&old);
    return GS_OK;
}

void gs_schedmetrics_relist(struct gs_schedmetrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->relists++;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_set_leader(struct gs_schedmetrics *m, bool leader)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->leader = leader;
    pthread_mutex_unlock(&m->lock);
}

void gs_schedmetrics_set_ready(struct gs_schedmetrics *m, bool ready)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->ready = ready;
    pthread_mutex_unlock(&m->lock);
}

static bool is_ready(struct gs_schedmetrics *m)
{
    pthread_mutex_lock(&m->lock);
    bool r = m->ready;
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* Appends to a bounded buffer, counting what would have been written past its end. */
struct out {
    char *buf;
    size_t cap;
    size_t len;
};

static void put(struct out *o, const char *fmt, ...) GS_PRINTF(2, 3);

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* Writes a sample value: +Inf, an integer exactly, else 9 significant digits. */
static void put_num(struct out *o, double v)
{
    if (isinf(v))
        put(o, "%sInf", v > 0 ? "+" : "-");
    else if (v == floor(v) && fabs(v) < 1e15)
        put(o, "%.0f", v);
    else
        put(o, "%.9g", v);
}

/* Writes a label value escaped as the text format asks: backslash, double quote, newline. */
static void put_label(struct out *o, const char *v)
{
    while (*v) {
        size_t plain = strcspn(v, "\\\"\n");
        if (plain)
            put(o, "%.*s", (int)plain, v);
        v += plain;
        if (*v) {
            put(o, "\\%c", *v == '\n' ? 'n' : *v);
            v++;
        }
    }
}

/* One histogram's _bucket, _sum and _count lines; lbl is "" or `k="v",` (ends in a comma). */
static void put_hist(struct out *o, const char *name, const char *lbl, const double *le,
                     size_t n_le, const struct hist *h)
{
    uint64_t cum = 0;
    for (size_t b = 0; b < n_le; b++) {
        cum += h->bucket[b];
        put(o, "%s_bucket{%sle=\"%g\"} %llu\n", name, lbl, le[b], (unsigned long long)cum);
    }
    cum += h->bucket[n_le];
    size_t ll = strlen(lbl);
    put(o, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, lbl, (unsigned long long)cum);
    put(o, "%s_sum%s%.*s%s %.9g\n", name, ll ? "{" : "", ll ? (int)ll - 1 : 0, lbl, ll ? "}" : "",
        h->sum);
    put(o, "%s_count%s%.*s%s %llu\n", name, ll ? "{" : "", ll ? (int)ll - 1 : 0, lbl, ll ? "}" : "",
        (unsigned long long)h->count);
}

static const char *const res_names[GS_RES_COUNT] = {"gpu", "cpu", "memory"};

/* gpusched_queue_* of the snapshot. */
static void put_queues(struct out *o, const struct snapshot *sn)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } fam[] = {
        {"gpusched_queue_allocated", "Requests of the queue's running pods (its subtree)",
         offsetof(struct queue_row, allocated)},
        {"gpusched_queue_fair_share", "The queue's fair share from the last cycle",
         offsetof(struct queue_row, fair)},
        {"gpusched_queue_quota", "The queue's guaranteed quota", offsetof(struct queue_row, quota)},
        {"gpusched_queue_limit", "The queue's hard limit (+Inf: none)",
         offsetof(struct queue_row, limit)},
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        put(o,
            "# HELP %s %s, by resource: gpu in GPUs, cpu in cores, memory in bytes.\n"
            "# TYPE %s gauge\n",
            fam[f].name, fam[f].help, fam[f].name);
        for (uint32_t q = 0; q < sn->n_queues; q++) {
            const double *v =
                (const double *)(const void *)((const char *)&sn->queues[q] + fam[f].off);
            for (int r = 0; r < GS_RES_COUNT; r++) {
                put(o, "%s{queue=\"", fam[f].name);
                put_label(o, sn->queues[q].name);
                put(o, "\",resource=\"%s\"} ", res_names[r]);
                put_num(o, v[r]);
                put(o, "\n");
            }
        }
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } mfam[] = {
        {"gpusched_queue_model_allocated", "GPUs of the model the queue's running pods hold",
         offsetof(struct model_row, allocated)},
        {"gpusched_queue_model_demand",
         "GPUs of the model the queue holds or its pending pods may use",
         offsetof(struct model_row, demand)},
        {"gpusched_queue_model_fair_share",
         "The queue's fair share of the model's GPUs from the last cycle (each model divided "
         "on its own)",
         offsetof(struct model_row, fair)},
    };
    for (size_t f = 0; f < sizeof(mfam) / sizeof(mfam[0]); f++) {
        put(o,
            "# HELP %s %s, in GPUs; only while some queue has per-model quotas.\n"
            "# TYPE %s gauge\n",
            mfam[f].name, mfam[f].help, mfam[f].name);
        for (uint32_t q = 0; q < sn->n_queues; q++)
            for (uint32_t k = 0; k < sn->queues[q].n_models; k++) {
                const struct model_row *mr = &sn->queues[q].models[k];
                put(o, "%s{queue=\"", mfam[f].name);
                put_label(o, sn->queues[q].name);
                put(o, "\",model=\"");
                put_label(o, mr->model);
                put(o, "\"} ");
                put_num(o, *(const double *)(const void *)((const char *)mr + mfam[f].off));
                put(o, "\n");
            }
    }
    put(o, "# HELP gpusched_queue_pending_pods Pods of the queue waiting to be placed.\n"
           "# TYPE gpusched_queue_pending_pods gauge\n");
    for (uint32_t q = 0; q < sn->n_queues; q++) {
        put(o, "gpusched_queue_pending_pods{queue=\"");
        put_label(o, sn->queues[q].name);
        put(o, "\"} %u\n", sn->queues[q].pending);
    }
    put(o,
        "# HELP gpusched_metrics_queues_left_out Queues past the cap of %d not shown in the "
        "gpusched_queue_* series.\n"
        "# TYPE gpusched_metrics_queues_left_out gauge\n"
        "gpusched_metrics_queues_left_out %u\n",
        GS_SCHEDMETRICS_QUEUES_MAX, sn->queues_left_out);
}

/* gpusched_gpus and gpusched_gpu_fragmentation of the snapshot. */
static void put_pools(struct out *o, const struct snapshot *sn)
{
    put(o, "# HELP gpusched_gpus GPUs of the node pool (node label ");
    put_label(o, sn->pool_label ? sn->pool_label : GS_SCHEDMETRICS_POOL_LABEL);
    put(o, "), by state; fractions for shared GPUs.\n"
           "# TYPE gpusched_gpus gauge\n");
    static const char *const states[] = {"allocated", "free", "unhealthy"};
    for (uint32_t p = 0; p < sn->n_pools; p++) {
        const struct pool_row *row = &sn->pools[p];
        const double v[] = {row->allocated_gpu, row->free_gpu, row->unhealthy_gpu};
        for (size_t k = 0; k < 3; k++) {
            put(o, "gpusched_gpus{pool=\"");
            put_label(o, row->name);
            put(o, "\",state=\"%s\"} ", states[k]);
            put_num(o, v[k]);
            put(o, "\n");
        }
    }
    put(o, "# HELP gpusched_gpu_fragmentation FGD fragmentation of the node pool (Weng et al., "
           "USENIX ATC '23): idle GPU a task of the target workload could not use, expected, "
           "summed over its nodes, in GPUs.\n"
           "# TYPE gpusched_gpu_fragmentation gauge\n");
    for (uint32_t p = 0; sn->has_frag && p < sn->n_pools; p++) {
        put(o, "gpusched_gpu_fragmentation{pool=\"");
        put_label(o, sn->pools[p].name);
        put(o, "\"} ");
        put_num(o, sn->pools[p].frag_milli / 1000.0);
        put(o, "\n");
    }
    put(o,
        "# HELP gpusched_metrics_pools_left_out Node pools past the cap of %d not shown in the "
        "pool series.\n"
        "# TYPE gpusched_metrics_pools_left_out gauge\n"
        "gpusched_metrics_pools_left_out %u\n",
        GS_SCHEDMETRICS_POOLS_MAX, sn->pools_left_out);
}

/* gpusched_usage_charged_* of the last gs_schedmetrics_set_charges(), when there was one. */
static void put_charges(struct out *o, const struct gs_schedmetrics *m)
{
    if (!m->charges)
        return;
    put(o, "# HELP gpusched_usage_charged_gpu_seconds_total GPU-seconds charged by capacity "
           "(a pod's share of each GPU it holds times the time it holds it), by queue, as the "
           "accounting store charges them, since this process began recording.\n"
           "# TYPE gpusched_usage_charged_gpu_seconds_total counter\n");
    for (uint32_t i = 0; i < m->n_charges; i++) {
        put(o, "gpusched_usage_charged_gpu_seconds_total{queue=\"");
        put_label(o, m->charges[i].queue);
        put(o, "\"} ");
        put_num(o, m->charges[i].gpu_seconds);
        put(o, "\n");
    }
    put(o, "# HELP gpusched_usage_charged_gpus GPUs charged by capacity now, by queue.\n"
           "# TYPE gpusched_usage_charged_gpus gauge\n");
    for (uint32_t i = 0; i < m->n_charges; i++) {
        put(o, "gpusched_usage_charged_gpus{queue=\"");
        put_label(o, m->charges[i].queue);
        put(o, "\"} ");
        put_num(o, m->charges[i].gpus);
        put(o, "\n");
    }
}

size_t gs_schedmetrics_render(struct gs_schedmetrics *m, char *buf, size_t cap)
{
    struct out o = {.buf = buf, .cap = buf ? cap : 0, .len = 0};
    if (buf && cap)
        buf[0] = '\0';
    if (!m)
        return 0;
    static const char *const results[] = {"scheduled", "unschedulable", "error"};
    pthread_mutex_lock(&m->lock);
    put(&o, "# HELP gpusched_scheduling_attempts_total Pods tried, by result.\n"
            "# TYPE gpusched_scheduling_attempts_total counter\n");
    for (size_t i = 0; i < 3; i++)
        put(&o, "gpusched_scheduling_attempts_total{result=\"%s\"} %llu\n", results[i],
            (unsigned long long)m->attempts[i]);
    put(&o,
        "# HELP gpusched_binds_total Bindings the API server accepted.\n"
        "# TYPE gpusched_binds_total counter\n"
        "gpusched_binds_total %llu\n"
        "# HELP gpusched_bind_failures_total Bindings refused or failed.\n"
        "# TYPE gpusched_bind_failures_total counter\n"
        "gpusched_bind_failures_total %llu\n"
        "# HELP gpusched_watch_relists_total Lists after the first of a watched collection "
        "(its watch history was gone: 410).\n"
        "# TYPE gpusched_watch_relists_total counter\n"
        "gpusched_watch_relists_total %llu\n"
        "# HELP gpusched_evictions_total Evictions sent, by reason.\n"
        "# TYPE gpusched_evictions_total counter\n",
        (unsigned long long)m->binds, (unsigned long long)m->bind_failures,
        (unsigned long long)m->relists);
    for (size_t i = 0; i < N_EVICT; i++)
        put(&o, "gpusched_evictions_total{reason=\"%s\"} %llu\n", evict_reasons[i],
            (unsigned long long)m->evictions[i]);
    put(&o, "# HELP gpusched_cycle_duration_seconds Duration of a scheduling cycle.\n"
            "# TYPE gpusched_cycle_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b < N_LE; b++) {
        cum += m->cycle_bucket[b];
        put(&o, "gpusched_cycle_duration_seconds_bucket{le=\"%g\"} %llu\n", cycle_le[b],
            (unsigned long long)cum);
    }
    cum += m->cycle_bucket[N_LE];
    put(&o,
        "gpusched_cycle_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
        "gpusched_cycle_duration_seconds_sum %.9g\n"
        "gpusched_cycle_duration_seconds_count %llu\n"
        "# HELP gpusched_pending_pods Pods of ours waiting after the last cycle.\n"
        "# TYPE gpusched_pending_pods gauge\n"
        "gpusched_pending_pods %u\n"
        "# HELP gpusched_leader 1 while this replica holds the Lease (or runs without election).\n"
        "# TYPE gpusched_leader gauge\n"
        "gpusched_leader %d\n",
        (unsigned long long)cum, m->cycle_sum_s, (unsigned long long)m->cycles, m->pending,
        m->leader ? 1 : 0);
    put(&o, "# HELP gpusched_scheduling_attempt_duration_seconds Time the core spent deciding a "
            "pod: its cycle's duration over the pods that cycle decided.\n"
            "# TYPE gpusched_scheduling_attempt_duration_seconds histogram\n");
    for (size_t i = 0; i < 3; i++) {
        char lbl[32];
        (void)snprintf(lbl, sizeof(lbl), "result=\"%s\",", results[i]);
        put_hist(&o, "gpusched_scheduling_attempt_duration_seconds", lbl, m->attempt_le,
                 N_ATTEMPT_LE, &m->attempt_hist[i]);
    }
    put(&o, "# HELP gpusched_scheduling_decision_duration_seconds The same decision time, every "
            "result, in buckets from 4 us.\n"
            "# TYPE gpusched_scheduling_decision_duration_seconds histogram\n");
    put_hist(&o, "gpusched_scheduling_decision_duration_seconds", "", m->decision_le, N_DECISION_LE,
             &m->decision_hist);
    put(&o, "# HELP gpusched_pod_scheduling_duration_seconds From a pod's creation to its "
            "Binding's acceptance.\n"
            "# TYPE gpusched_pod_scheduling_duration_seconds histogram\n");
    put_hist(&o, "gpusched_pod_scheduling_duration_seconds", "", m->pod_le, N_POD_LE, &m->pod_hist);
    put_queues(&o, &m->snap);
    put_pools(&o, &m->snap);
    put_charges(&o, m);
    pthread_mutex_unlock(&m->lock);
    return o.len;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct gs_schedmetrics *m = cls;
    (void)version;
    (void)upload_data;
    (void)req_cls;
    static const char text[] = "text/plain; charset=utf-8";
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* a body we do not want: drop it */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0)
        return reply(c, MHD_HTTP_OK, text, "ok", 2);
    if (strcmp(url, "/readyz") == 0)
        return is_ready(m)
                   ? reply(c, MHD_HTTP_OK, text, "ok", 2)
                   : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, text, "caches not synced\n", 18);
    if (strcmp(url, "/metrics") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, text, "not found\n", 10);
    size_t cap = RENDER_FIRST, n = 0;
    char *buf = NULL;
    for (;;) { /* the text may grow between two renders (a new snapshot): try again */
        char *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "out of memory\n", 14);
        }
        buf = nb;
        n = gs_schedmetrics_render(m, buf, cap);
        if (n < cap)
            break;
        cap = n + 1 + n / 4;
    }
    enum MHD_Result r = reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, n);
    free(buf);
    return r;
}

int gs_schedmetrics_serve(struct gs_schedmetrics *m, const char *addr, uint16_t *port_out)
{
    if (!m || !addr || m->daemon)
        return GS_EINVAL;
    struct addrinfo *ai = NULL;
    if (gs__hostport_resolve(addr, &ai) != GS_OK)
        return GS_EINVAL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (m->daemon == NULL)
        return GS_EIO;
    if (port_out) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *port_out = info ? info->port : 0;
    }
    return GS_OK;
}
