/*
 * The multi-tenant engine: queues, fair share, PriorityClasses, gangs, preemption, reclaim and
 * backfill over the placement core. See include/gpusched/tenant.h for the contract and
 * docs/internals/tenancy.md for the rules.
 *
 * State is incremental: queue allocations and demands are kept up to date on every bind,
 * eviction, submission and finish, and each leaf queue keeps one priority heap per GPU flavor
 * (model mask), so a cycle touches only the heads of the heaps and the nodes it places on. No
 * per-cycle snapshot of the cluster is built.
 *
 * Every tentative change (a gang's members, victims of a preemption, the releases that find a
 * backfill reservation) goes through one undo log: do_bind()/do_evict() apply a change with all
 * its accounting and record it; rollback() undoes the records in reverse; commit() turns them
 * into events. "Would it fit" and "place it" are thus one code path over the same state.
 */
#include "gpusched/tenant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/sched.h"

#define NO_ID UINT32_MAX
#define BACKFILL_RELEASES_MAX 20000
/* Jobs tried behind a reservation per flavor and cycle (Slurm's bf_max_job_test plays the same
 * role): bounds a cycle's cost when thousands of jobs wait. */
#define BACKFILL_DEPTH 64

struct heap_ent {
    uint32_t pod;
    uint32_t seq; /* the pod's enqueue token; stale when it differs */
    int32_t prio;
    int64_t submit_ms;
};

struct flavor_queue {
    uint64_t mask;         /* GPU model mask of the pods in it (CPU-only pods: 0) */
    struct heap_ent *heap; /* binary heap, best first */
    uint32_t len, cap;
    uint32_t blocked_cycle; /* cycle in which its head could not be placed */
    uint32_t bf_cycle;      /* cycle in which its head got a backfill reservation */
    uint32_t bf_tries;      /* jobs tried behind that reservation in bf_cycle */
};

struct queue {
    char *name;
    uint32_t parent;
    uint32_t first_child, next_sibling; /* NO_ID terminated */
    bool leaf_used;                     /* has ever held pods */
    int64_t quota[GS_RES_COUNT], limit[GS_RES_COUNT];
    double weight;
    int64_t min_runtime_ms;
    int64_t alloc[GS_RES_COUNT], demand[GS_RES_COUNT], fair[GS_RES_COUNT];
    struct flavor_queue *flavors;
    uint32_t n_flavors;
    uint32_t pending, running;
    uint64_t ev_suffered, ev_caused;
};

struct pclass {
    char *name;
    int32_t value;
    bool preemptible;
};

struct gang {
    char *name;
    uint32_t min_member;
    int64_t timeout_ms;
    uint32_t *members;
    uint32_t n_members, cap_members;
    uint32_t running, succeeded, pending;
    int64_t first_submit_ms; /* -1 until a member arrives */
    bool started;            /* reached min_member once */
    uint32_t tried_cycle;
};

struct tpod {
    char *name;
    uint32_t queue, pclass, gang;
    struct gs_pod_req req;
    int64_t r[GS_RES_COUNT];
    int64_t est_ms;
    enum gs_tpod_state state;
    struct gs_placement pl;
    int64_t submit_ms, start_ms, end_ms;
    uint32_t evictions;
    enum gs_evict_reason reason;
    uint32_t seq;
    uint32_t node_slot; /* index in its node's pod list while RUNNING */
};

/* One change in the undo log. */
struct undo {
    uint32_t pod;
    uint8_t bind;   /* 1 bind, 0 evict */
    uint8_t reason; /* evict reason */
    uint32_t by;    /* preemptor */
    struct gs_placement pl;
};

struct reservation {
    int64_t start_ms; /* the reserved job's shadow start */
    uint8_t *nodes;   /* node flags (1 = reserved) */
};

/* A sort key: pods are sorted by (k1, k2, pod) ascending. Keys are computed before sorting, so
 * the comparison needs no context (the core keeps no globals). */
struct sort_key {
    int64_t k1;
    int64_t k2;
    uint32_t pod;
};

struct gs_engine {
    struct gs_cluster *c;
    struct gs_sched *sched;
    struct gs_engine_config cfg;
    struct queue *q;
    uint32_t nq, capq;
    struct pclass *pc;
    uint32_t npc, cappc;
    struct gang *g;
    uint32_t ng, capg;
    struct tpod *p;
    uint32_t np, capp;
    uint32_t **node_pods; /* running pods per node */
    uint32_t *node_npods, *node_cappods;
    uint32_t nodes_cap;
    struct undo *log;
    uint32_t nlog, caplog;
    struct reservation *resv;
    uint32_t nresv, capresv;
    uint32_t cycle;
    uint64_t evictions_total;
    int64_t capacity[GS_RES_COUNT]; /* cluster totals, for capacity_nodes nodes */
    uint64_t mutations;             /* bumped by every committed bind or eviction, finish, delete */
    uint32_t *end_order;            /* running pods with estimates by estimated end (backfill) */
    struct sort_key *keys;          /* scratch for sort_pods() */
    uint32_t keys_cap;
    uint32_t end_order_n, end_order_cap;
    uint64_t end_order_at; /* `mutations` when end_order was built; UINT64_MAX: never */
    uint32_t capacity_nodes;
    int64_t now_ms;
    struct gs_rng *rng;
    struct gs_cycle_stats *st;
    /* scratch for victim search */
    uint32_t *cand;
    uint32_t ncand_cap;
    int64_t *qdelta; /* per queue, resource of the fairness check */
};

/* ---- small helpers ------------------------------------------------------------------------ */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int grow(void **ptr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return GS_OK;
    uint32_t nc = *cap ? *cap : 8;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*ptr, (size_t)nc * elem);
    if (!np)
        return GS_ENOMEM;
    *ptr = np;
    *cap = nc;
    return GS_OK;
}

static void req_vector(const struct gs_pod_req *req, int64_t r[GS_RES_COUNT])
{
    r[GS_RES_GPU] = (int64_t)req->num_gpu * req->gpu_milli;
    r[GS_RES_CPU] = req->cpu_milli;
    r[GS_RES_MEM] = req->mem_mib;
}

static int32_t prio_of(const struct gs_engine *e, const struct tpod *p)
{
    return e->pc[p->pclass].value;
}

static bool is_leaf(const struct queue *q)
{
    return q->first_child == NO_ID;
}

/* Heap order: higher priority first, then earlier submission, then lower pod id. */
static bool heap_before(const struct heap_ent *a, const struct heap_ent *b)
{
    if (a->prio != b->prio)
        return a->prio > b->prio;
    if (a->submit_ms != b->submit_ms)
        return a->submit_ms < b->submit_ms;
    return a->pod < b->pod;
}

static int heap_push(struct flavor_queue *f, struct heap_ent ent)
{
    int err = grow((void **)&f->heap, &f->cap, f->len + 1, sizeof(*f->heap));
    if (err)
        return err;
    uint32_t i = f->len++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!heap_before(&ent, &f->heap[parent]))
            break;
        f->heap[i] = f->heap[parent];
        i = parent;
    }
    f->heap[i] = ent;
    return GS_OK;
}

static void heap_pop(struct flavor_queue *f)
{
    struct heap_ent last = f->heap[--f->len];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, best = i;
        const struct heap_ent *bv = &last;
        if (l < f->len && heap_before(&f->heap[l], bv)) {
            best = l;
            bv = &f->heap[l];
        }
        if (r < f->len && heap_before(&f->heap[r], bv))
            best = r;
        if (best == i)
            break;
        f->heap[i] = f->heap[best];
        i = best;
    }
    if (f->len > 0)
        f->heap[i] = last;
}

/* Drops stale entries from the top of a flavor heap; returns the head pod or NO_ID. */
static uint32_t flavor_head(const struct gs_engine *e, struct flavor_queue *f)
{
    while (f->len > 0) {
        const struct heap_ent *h = &f->heap[0];
        const struct tpod *p = &e->p[h->pod];
        if (p->state == GS_TPOD_PENDING && p->seq == h->seq)
            return h->pod;
        heap_pop(f);
    }
    return NO_ID;
}

static int enqueue(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    struct queue *q = &e->q[p->queue];
    uint64_t mask = p->req.num_gpu ? p->req.gpu_model_mask : 0;
    uint32_t f = 0;
    while (f < q->n_flavors && q->flavors[f].mask != mask)
        f++;
    if (f == q->n_flavors) {
        struct flavor_queue *nf = realloc(q->flavors, (q->n_flavors + 1) * sizeof(*nf));
        if (!nf)
            return GS_ENOMEM;
        q->flavors = nf;
        memset(&nf[f], 0, sizeof(nf[f]));
        nf[f].mask = mask;
        nf[f].blocked_cycle = UINT32_MAX;
        nf[f].bf_cycle = UINT32_MAX;
        q->n_flavors++;
    }
    p->seq++;
    return heap_push(&q->flavors[f], (struct heap_ent){pod, p->seq, prio_of(e, p), p->submit_ms});
}

/* ---- engine setup ------------------------------------------------------------------------- */

int gs_engine_new(struct gs_cluster *c, const struct gs_engine_config *cfg, struct gs_engine **out)
{
    *out = NULL;
    struct gs_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return GS_ENOMEM;
    e->c = c;
    e->cfg = *cfg;
    struct gs_sched_config sc = {cfg->policy ? cfg->policy : "bestfit", cfg->node_rank,
                                 cfg->workload, cfg->nodes_to_find};
    int err = gs_sched_new(c, &sc, &e->sched);
    if (err) {
        free(e);
        return err;
    }
    /* The root queue: everything, unlimited. */
    e->q = calloc(8, sizeof(*e->q));
    e->capq = 8;
    if (!e->q || !(e->q[0].name = dup_str("root"))) {
        gs_engine_free(e);
        return GS_ENOMEM;
    }
    e->nq = 1;
    e->q[0].parent = NO_ID;
    e->q[0].first_child = e->q[0].next_sibling = NO_ID;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        e->q[0].quota[r] = GS_UNLIMITED;
        e->q[0].limit[r] = GS_UNLIMITED;
    }
    e->q[0].weight = 1;
    e->end_order_at = UINT64_MAX;
    *out = e;
    return GS_OK;
}

void gs_engine_free(struct gs_engine *e)
{
    if (!e)
        return;
    for (uint32_t i = 0; i < e->nq; i++) {
        /* nq is 0 while q is NULL (calloc); the analyzer forgets that once &e->sched escapes. */
        /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
        free(e->q[i].name);
        for (uint32_t f = 0; f < e->q[i].n_flavors; f++)
            free(e->q[i].flavors[f].heap);
        free(e->q[i].flavors);
    }
    for (uint32_t i = 0; i < e->npc; i++)
        free(e->pc[i].name);
    for (uint32_t i = 0; i < e->ng; i++) {
        free(e->g[i].name);
        free(e->g[i].members);
    }
    for (uint32_t i = 0; i < e->np; i++)
        free(e->p[i].name);
    for (uint32_t i = 0; i < e->nodes_cap; i++)
        free(e->node_pods[i]);
    for (uint32_t i = 0; i < e->nresv; i++)
        free(e->resv[i].nodes);
    free(e->node_pods);
    free(e->node_npods);
    free(e->node_cappods);
    free(e->q);
    free(e->pc);
    free(e->g);
    free(e->p);
    free(e->log);
    free(e->resv);
    free(e->cand);
    free(e->qdelta);
    free(e->end_order);
    free(e->keys);
    gs_sched_free(e->sched);
    free(e);
}

/* Queue and PriorityClass names: 1 to 63 of [A-Za-z0-9._-], like Kubernetes object names. They
 * end up in CSV cells and plot titles, so nothing else is let in. */
static bool valid_name(const char *name)
{
    size_t n = 0;
    for (const char *c = name; *c; c++, n++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
        if (!ok || n >= 63)
            return false;
    }
    return n > 0;
}

int gs_engine_find_queue(const struct gs_engine *e, const char *name)
{
    for (uint32_t i = 0; i < e->nq; i++)
        if (strcmp(e->q[i].name, name) == 0)
            return (int)i;
    return -1;
}

int gs_engine_add_queue(struct gs_engine *e, const struct gs_queue_spec *spec, uint32_t *id)
{
    if (!spec->name || !*spec->name || !(spec->over_quota_weight >= 0) || spec->min_runtime_ms < 0)
        return GS_EINVAL;
    if (gs_engine_find_queue(e, spec->name) >= 0)
        return GS_EEXIST;
    if (spec->parent >= e->nq)
        return GS_ENOENT;
    struct queue *par = &e->q[spec->parent];
    if (par->leaf_used)
        return GS_EINVAL;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        if (spec->quota[r] < 0 || spec->limit[r] < 0 || spec->limit[r] < spec->quota[r])
            return GS_EINVAL;
        if (par->quota[r] != GS_UNLIMITED) {
            int64_t sum = spec->quota[r];
            for (uint32_t ch = par->first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
                sum += e->q[ch].quota[r];
            if (sum > par->quota[r])
                return GS_EINVAL;
        }
    }
    int err = grow((void **)&e->q, &e->capq, e->nq + 1, sizeof(*e->q));
    if (err)
        return err;
    char *name = dup_str(spec->name);
    if (!name)
        return GS_ENOMEM;
    uint32_t qi = e->nq;
    struct queue *q = &e->q[qi];
    memset(q, 0, sizeof(*q));
    q->name = name;
    q->parent = spec->parent;
    q->first_child = NO_ID;
    memcpy(q->quota, spec->quota, sizeof(q->quota));
    memcpy(q->limit, spec->limit, sizeof(q->limit));
    q->weight = spec->over_quota_weight;
    q->min_runtime_ms = spec->min_runtime_ms;
    /* Append as the last child so children stay in id order. */
    par = &e->q[spec->parent];
    q->next_sibling = NO_ID;
    if (par->first_child == NO_ID) {
        par->first_child = qi;
    } else {
        uint32_t ch = par->first_child;
        while (e->q[ch].next_sibling != NO_ID)
            ch = e->q[ch].next_sibling;
        e->q[ch].next_sibling = qi;
    }
    e->nq++;
    if (id)
        *id = qi;
    return GS_OK;
}

int gs_engine_find_priority_class(const struct gs_engine *e, const char *name)
{
    for (uint32_t i = 0; i < e->npc; i++)
        if (strcmp(e->pc[i].name, name) == 0)
            return (int)i;
    return -1;
}

int gs_engine_add_priority_class(struct gs_engine *e, const struct gs_priority_class_spec *spec,
                                 uint32_t *id)
{
    if (!spec->name || !valid_name(spec->name))
        return GS_EINVAL;
    if (gs_engine_find_priority_class(e, spec->name) >= 0)
        return GS_EEXIST;
    int err = grow((void **)&e->pc, &e->cappc, e->npc + 1, sizeof(*e->pc));
    if (err)
        return err;
    char *name = dup_str(spec->name);
    if (!name)
        return GS_ENOMEM;
    e->pc[e->npc] = (struct pclass){
        name, spec->value, spec->preemptible < 0 ? spec->value < 100 : spec->preemptible != 0};
    if (id)
        *id = e->npc;
    e->npc++;
    return GS_OK;
}

bool gs_engine_priority_class(const struct gs_engine *e, uint32_t id, int32_t *value,
                              bool *preemptible)
{
    if (id >= e->npc)
        return false;
    if (value)
        *value = e->pc[id].value;
    if (preemptible)
        *preemptible = e->pc[id].preemptible;
    return true;
}

int gs_engine_add_gang(struct gs_engine *e, const struct gs_gang_spec *spec, uint32_t *id)
{
    if (!spec->name || !*spec->name || spec->min_member == 0 || spec->timeout_ms < 0)
        return GS_EINVAL;
    for (uint32_t i = 0; i < e->ng; i++)
        if (strcmp(e->g[i].name, spec->name) == 0)
            return GS_EEXIST;
    int err = grow((void **)&e->g, &e->capg, e->ng + 1, sizeof(*e->g));
    if (err)
        return err;
    char *name = dup_str(spec->name);
    if (!name)
        return GS_ENOMEM;
    struct gang *g = &e->g[e->ng];
    memset(g, 0, sizeof(*g));
    g->name = name;
    g->min_member = spec->min_member;
    g->timeout_ms = spec->timeout_ms;
    g->first_submit_ms = -1;
    g->tried_cycle = UINT32_MAX;
    if (id)
        *id = e->ng;
    e->ng++;
    return GS_OK;
}

/* Adds sign x r to the allocation (which=0) or demand (which=1) of qi and its ancestors. */
static void account(struct gs_engine *e, uint32_t qi, int which, const int64_t r[], int sign)
{
    for (uint32_t a = qi; a != NO_ID; a = e->q[a].parent) {
        int64_t *v = which == 0 ? e->q[a].alloc : e->q[a].demand;
        for (int k = 0; k < GS_RES_COUNT; k++)
            v[k] += sign * r[k];
    }
}

static int ensure_nodes(struct gs_engine *e)
{
    uint32_t n = gs_cluster_node_count(e->c);
    if (n <= e->nodes_cap)
        return GS_OK;
    uint32_t cap = e->nodes_cap ? e->nodes_cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t **np = realloc(e->node_pods, cap * sizeof(*np));
    if (np)
        e->node_pods = np;
    uint32_t *nn = realloc(e->node_npods, cap * sizeof(*nn));
    if (nn)
        e->node_npods = nn;
    uint32_t *nc = realloc(e->node_cappods, cap * sizeof(*nc));
    if (nc)
        e->node_cappods = nc;
    if (!np || !nn || !nc)
        return GS_ENOMEM;
    for (uint32_t i = e->nodes_cap; i < cap; i++) {
        e->node_pods[i] = NULL;
        e->node_npods[i] = e->node_cappods[i] = 0;
    }
    e->nodes_cap = cap;
    return GS_OK;
}

int gs_engine_submit(struct gs_engine *e, const struct gs_tpod_spec *spec, int64_t now_ms,
                     uint32_t *id)
{
    if (spec->queue == GS_QUEUE_ROOT || spec->queue >= e->nq || !is_leaf(&e->q[spec->queue]) ||
        spec->priority_class >= e->npc || (spec->gang != GS_NO_GANG && spec->gang >= e->ng))
        return GS_EINVAL;
    const struct gs_pod_req *rq = &spec->req;
    if (rq->cpu_milli < 0 || rq->mem_mib < 0 || rq->num_gpu > GS_NODE_GPUS_MAX ||
        (rq->num_gpu && (rq->gpu_milli <= 0 || rq->gpu_milli > GS_GPU_MILLI ||
                         (rq->num_gpu > 1 && rq->gpu_milli < GS_GPU_MILLI))))
        return GS_EINVAL;
    if (spec->gang != GS_NO_GANG) {
        struct gang *g = &e->g[spec->gang];
        if (g->n_members > 0 && e->p[g->members[0]].queue != spec->queue)
            return GS_EINVAL;
    }
    int err = grow((void **)&e->p, &e->capp, e->np + 1, sizeof(*e->p));
    if (err)
        return err;
    if (spec->gang != GS_NO_GANG) {
        struct gang *g = &e->g[spec->gang];
        if ((err = grow((void **)&g->members, &g->cap_members, g->n_members + 1,
                        sizeof(*g->members))) != GS_OK)
            return err;
    }
    char *name = dup_str(spec->name ? spec->name : "");
    if (!name)
        return GS_ENOMEM;
    uint32_t pi = e->np;
    struct tpod *p = &e->p[pi];
    memset(p, 0, sizeof(*p));
    p->name = name;
    p->queue = spec->queue;
    p->pclass = spec->priority_class;
    p->gang = spec->gang;
    p->req = *rq;
    if (!p->req.num_gpu)
        p->req.gpu_milli = 0;
    req_vector(&p->req, p->r);
    p->est_ms = spec->runtime_estimate_ms;
    p->state = GS_TPOD_PENDING;
    p->submit_ms = now_ms;
    p->start_ms = p->end_ms = -1;
    e->np++;
    if ((err = enqueue(e, pi)) != GS_OK) {
        e->np--;
        free(name);
        return err;
    }
    struct queue *q = &e->q[p->queue];
    q->leaf_used = true;
    q->pending++;
    account(e, p->queue, 1, p->r, +1);
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->members[g->n_members++] = pi;
        g->pending++;
        if (g->first_submit_ms < 0)
            g->first_submit_ms = now_ms;
    }
    if (id)
        *id = pi;
    return GS_OK;
}

/* ---- bind / evict with accounting and undo ------------------------------------------------ */

static int log_push(struct gs_engine *e, struct undo u)
{
    int err = grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log));
    if (err)
        return err;
    e->log[e->nlog++] = u;
    return GS_OK;
}

static int node_list_add(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    uint32_t n = p->pl.node;
    int err = grow((void **)&e->node_pods[n], &e->node_cappods[n], e->node_npods[n] + 1,
                   sizeof(uint32_t));
    if (err)
        return err;
    p->node_slot = e->node_npods[n];
    e->node_pods[n][e->node_npods[n]++] = pod;
    return GS_OK;
}

static void node_list_remove(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    uint32_t n = p->pl.node;
    uint32_t last = e->node_pods[n][--e->node_npods[n]];
    e->node_pods[n][p->node_slot] = last;
    e->p[last].node_slot = p->node_slot;
}

/* Starts a pending pod on pl (state, cluster, accounting), recording it for undo. */
static int do_bind(struct gs_engine *e, uint32_t pod, const struct gs_placement *pl)
{
    struct tpod *p = &e->p[pod];
    int err = ensure_nodes(e);
    if (err)
        return err;
    if ((err = grow((void **)&e->node_pods[pl->node], &e->node_cappods[pl->node],
                    e->node_npods[pl->node] + 1, sizeof(uint32_t))) != GS_OK ||
        (err = grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log))) != GS_OK)
        return err;
    if ((err = gs_cluster_bind(e->c, &p->req, pl)) != GS_OK)
        return err;
    p->pl = *pl;
    p->state = GS_TPOD_RUNNING;
    (void)node_list_add(e, pod); /* capacity ensured above */
    account(e, p->queue, 0, p->r, +1);
    e->q[p->queue].pending--;
    e->q[p->queue].running++;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending--;
        e->g[p->gang].running++;
    }
    (void)log_push(e, (struct undo){pod, 1, 0, NO_ID, *pl});
    return GS_OK;
}

/* Stops a running pod and puts it back to pending (not yet re-queued), recording it. */
static int do_evict(struct gs_engine *e, uint32_t pod, enum gs_evict_reason reason, uint32_t by)
{
    struct tpod *p = &e->p[pod];
    int err = grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log));
    if (err)
        return err;
    if ((err = gs_cluster_unbind(e->c, &p->req, &p->pl)) != GS_OK)
        return err;
    node_list_remove(e, pod);
    p->state = GS_TPOD_PENDING;
    account(e, p->queue, 0, p->r, -1);
    e->q[p->queue].pending++;
    e->q[p->queue].running--;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending++;
        e->g[p->gang].running--;
    }
    (void)log_push(e, (struct undo){pod, 0, (uint8_t)reason, by, p->pl});
    return GS_OK;
}

/* Undoes the log back to `mark`, newest first. Restores exactly, so it cannot fail. */
static void rollback(struct gs_engine *e, uint32_t mark)
{
    while (e->nlog > mark) {
        struct undo *u = &e->log[--e->nlog];
        struct tpod *p = &e->p[u->pod];
        if (u->bind) {
            (void)gs_cluster_unbind(e->c, &p->req, &u->pl);
            node_list_remove(e, u->pod);
            p->state = GS_TPOD_PENDING;
            account(e, p->queue, 0, p->r, -1);
            e->q[p->queue].pending++;
            e->q[p->queue].running--;
            if (p->gang != GS_NO_GANG) {
                e->g[p->gang].pending++;
                e->g[p->gang].running--;
            }
        } else {
            (void)gs_cluster_bind(e->c, &p->req, &u->pl);
            p->pl = u->pl;
            (void)node_list_add(e, u->pod); /* the slot it left is still allocated */
            p->state = GS_TPOD_RUNNING;
            account(e, p->queue, 0, p->r, +1);
            e->q[p->queue].pending--;
            e->q[p->queue].running++;
            if (p->gang != GS_NO_GANG) {
                e->g[p->gang].pending--;
                e->g[p->gang].running++;
            }
        }
    }
}

static void emit(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                 enum gs_evict_reason reason, const struct gs_placement *pl)
{
    if (!e->cfg.on_event)
        return;
    struct gs_event ev = {kind, pod, by, reason, pl, e->now_ms};
    e->cfg.on_event(e->cfg.ctx, &ev);
}

/* Makes the log from `mark` final: start times, eviction records, re-queueing, events. */
static int commit(struct gs_engine *e, uint32_t mark, bool backfill)
{
    int err = GS_OK;
    for (uint32_t i = mark; i < e->nlog; i++) {
        struct undo *u = &e->log[i];
        struct tpod *p = &e->p[u->pod];
        if (u->bind) {
            if (p->state != GS_TPOD_RUNNING)
                continue; /* bound then evicted again inside the same trial */
            p->start_ms = e->now_ms;
            if (p->gang != GS_NO_GANG &&
                e->g[p->gang].running + e->g[p->gang].succeeded >= e->g[p->gang].min_member)
                e->g[p->gang].started = true;
            if (e->st) {
                e->st->bound++;
                e->st->backfilled += backfill;
            }
            emit(e, backfill ? GS_EV_BACKFILL : GS_EV_BIND, u->pod, NO_ID, GS_EVICT_NONE, &p->pl);
        } else {
            p->evictions++;
            p->reason = (enum gs_evict_reason)u->reason;
            e->evictions_total++;
            e->q[p->queue].ev_suffered++;
            if (u->by != NO_ID)
                e->q[e->p[u->by].queue].ev_caused++;
            if (e->st)
                e->st->evicted++;
            emit(e, GS_EV_EVICT, u->pod, u->by, p->reason, NULL);
            if (p->state == GS_TPOD_PENDING) {
                int qerr = enqueue(e, u->pod);
                if (qerr)
                    err = qerr;
            }
        }
    }
    e->nlog = mark;
    e->mutations++;
    return err;
}

int gs_engine_finish(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    if (pod >= e->np || e->p[pod].state != GS_TPOD_RUNNING)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    int err = gs_cluster_unbind(e->c, &p->req, &p->pl);
    if (err)
        return err;
    node_list_remove(e, pod);
    p->state = GS_TPOD_SUCCEEDED;
    p->end_ms = now_ms;
    e->mutations++;
    account(e, p->queue, 0, p->r, -1);
    account(e, p->queue, 1, p->r, -1);
    e->q[p->queue].running--;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].running--;
        e->g[p->gang].succeeded++;
    }
    return GS_OK;
}

int gs_engine_delete(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    if (pod >= e->np)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    if (p->state == GS_TPOD_RUNNING) {
        int err = gs_engine_finish(e, pod, now_ms);
        if (err)
            return err;
        if (p->gang != GS_NO_GANG)
            e->g[p->gang].succeeded--;
    } else if (p->state == GS_TPOD_PENDING) {
        e->q[p->queue].pending--;
        account(e, p->queue, 1, p->r, -1);
        if (p->gang != GS_NO_GANG)
            e->g[p->gang].pending--;
    } else {
        return GS_EINVAL;
    }
    p->state = GS_TPOD_FAILED;
    p->end_ms = now_ms;
    /* A gang that lost a running member below min_member cannot go on: its other running
     * members go back to pending, whole. */
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        if (g->running > 0 && g->running + g->succeeded < g->min_member) {
            e->now_ms = now_ms;
            uint32_t mark = e->nlog;
            int err = GS_OK;
            for (uint32_t m = 0; m < g->n_members && !err; m++)
                if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
                    err = do_evict(e, g->members[m], GS_EVICT_GANG, NO_ID);
            if (err) {
                rollback(e, mark);
                return err;
            }
            g->started = false;
            return commit(e, mark, false);
        }
    }
    return GS_OK;
}

/* ---- fair share --------------------------------------------------------------------------- */

static void fair_children(struct gs_engine *e, uint32_t qi, int r)
{
    int64_t amount = e->q[qi].fair[r];
    uint32_t n = 0;
    for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
        n++;
    if (n == 0)
        return;
    /* want = demand capped by limit; first give min(quota, want). */
    int64_t sum_give = 0;
    for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
        struct queue *c = &e->q[ch];
        int64_t want = c->demand[r] < c->limit[r] ? c->demand[r] : c->limit[r];
        int64_t give = c->quota[r] < want ? c->quota[r] : want;
        c->fair[r] = give;
        sum_give += give;
    }
    if (sum_give > amount) {
        /* Capacity below the guaranteed quotas: scale them down in proportion. */
        int64_t given = 0;
        for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
            struct queue *c = &e->q[ch];
            c->fair[r] = (int64_t)((double)c->fair[r] * (double)amount / (double)sum_give);
            given += c->fair[r];
        }
        for (uint32_t ch = e->q[qi].first_child; ch != NO_ID && given < amount;
             ch = e->q[ch].next_sibling) {
            e->q[ch].fair[r]++;
            given++;
        }
    } else {
        /* Water-filling of the leftover by over-quota weight. */
        int64_t left = amount - sum_give;
        for (;;) {
            double wsum = 0;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                struct queue *c = &e->q[ch];
                int64_t want = c->demand[r] < c->limit[r] ? c->demand[r] : c->limit[r];
                if (c->weight > 0 && c->fair[r] < want)
                    wsum += c->weight;
            }
            if (wsum <= 0 || left <= 0)
                break;
            bool capped = false;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                struct queue *c = &e->q[ch];
                int64_t want = c->demand[r] < c->limit[r] ? c->demand[r] : c->limit[r];
                if (!(c->weight > 0 && c->fair[r] < want))
                    continue;
                int64_t share = (int64_t)((double)left * c->weight / wsum);
                if (c->fair[r] + share >= want) {
                    left -= want - c->fair[r];
                    c->fair[r] = want;
                    capped = true;
                }
            }
            if (capped)
                continue;
            int64_t given = 0;
            uint32_t active = 0;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                struct queue *c = &e->q[ch];
                int64_t want = c->demand[r] < c->limit[r] ? c->demand[r] : c->limit[r];
                if (!(c->weight > 0 && c->fair[r] < want))
                    continue;
                int64_t share = (int64_t)((double)left * c->weight / wsum);
                c->fair[r] += share;
                given += share;
                active++;
            }
            left -= given;
            /* Whole units left by truncation go one each in id order. */
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID && left > 0;
                 ch = e->q[ch].next_sibling) {
                struct queue *c = &e->q[ch];
                int64_t want = c->demand[r] < c->limit[r] ? c->demand[r] : c->limit[r];
                if (c->weight > 0 && c->fair[r] < want) {
                    c->fair[r]++;
                    left--;
                }
            }
            (void)active;
            break;
        }
    }
    for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
        fair_children(e, ch, r);
}

void gs_engine_compute_fair(struct gs_engine *e, const int64_t capacity[GS_RES_COUNT])
{
    for (int r = 0; r < GS_RES_COUNT; r++) {
        e->q[0].fair[r] = capacity[r];
        fair_children(e, 0, r);
    }
}

static void cluster_capacity(const struct gs_engine *e, int64_t cap[GS_RES_COUNT])
{
    memset(cap, 0, sizeof(int64_t) * GS_RES_COUNT);
    uint32_t n = gs_cluster_node_count(e->c);
    for (uint32_t i = 0; i < n; i++) {
        const struct gs_node *nd = gs_cluster_node(e->c, i);
        cap[GS_RES_GPU] += (int64_t)nd->gpu_count * GS_GPU_MILLI;
        cap[GS_RES_CPU] += nd->cpu_milli;
        cap[GS_RES_MEM] += nd->mem_mib;
    }
}

/* Dominant share ratio: max over demanded resources of allocated / fair. */
static double share_ratio(const struct queue *q)
{
    double worst = 0;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        if (q->demand[r] <= 0)
            continue;
        double v = q->fair[r] > 0 ? (double)q->alloc[r] / (double)q->fair[r]
                                  : (q->alloc[r] > 0 ? INFINITY : 1e300);
        worst = v > worst ? v : worst;
    }
    return worst;
}

/* ---- placement of one job ----------------------------------------------------------------- */

/* Whether starting a pod keeps its queue and every ancestor within limit (and a queue with
 * over-quota weight 0 within its quota). */
static bool within_limits(const struct gs_engine *e, const struct tpod *p)
{
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        for (int r = 0; r < GS_RES_COUNT; r++) {
            if (q->limit[r] != GS_UNLIMITED && q->alloc[r] + p->r[r] > q->limit[r])
                return false;
            if (q->weight <= 0 && q->quota[r] != GS_UNLIMITED && p->r[r] > 0 &&
                q->alloc[r] + p->r[r] > q->quota[r])
                return false;
        }
    }
    return true;
}

/* Places one pod where the policy says; GS_EUNSCHEDULABLE when it does not fit anywhere. */
static int place_one(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    if (!within_limits(e, p))
        return GS_EUNSCHEDULABLE;
    struct gs_placement pl;
    int err = gs_sched_place(e->sched, &p->req, e->rng, &pl);
    if (err)
        return err;
    return do_bind(e, pod, &pl);
}

static bool victim_common_ok(const struct gs_engine *e, const struct tpod *c)
{
    if (c->state != GS_TPOD_RUNNING || !e->pc[c->pclass].preemptible)
        return false;
    if (e->now_ms - c->start_ms < e->q[c->queue].min_runtime_ms)
        return false;
    if (c->gang != GS_NO_GANG) {
        /* A gang goes whole: each running member must be evictable. */
        const struct gang *g = &e->g[c->gang];
        for (uint32_t m = 0; m < g->n_members; m++) {
            const struct tpod *o = &e->p[g->members[m]];
            if (o->state == GS_TPOD_RUNNING &&
                (!e->pc[o->pclass].preemptible ||
                 e->now_ms - o->start_ms < e->q[o->queue].min_runtime_ms))
                return false;
        }
    }
    return true;
}

static int fair_res(const struct tpod *p)
{
    return p->r[GS_RES_GPU] > 0 ? GS_RES_GPU : GS_RES_CPU;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Reclaim rule for one victim c of preemptor p, with `taken` already taken from c's queue on
 * the fairness resource in this search. */
static bool reclaim_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                       int64_t taken)
{
    if (c->queue == p->queue)
        return false;
    int r = fair_res(p);
    if (c->r[r] <= 0)
        return false;
    const struct queue *R = &e->q[p->queue], *V = &e->q[c->queue];
    int64_t av = V->alloc[r] - taken;
    /* The victim's queue is above its share and keeps its quota; the reclaimer is below its
     * share; and the move strictly lowers |alloc - fair| summed over the two queues. */
    if (av <= V->fair[r] || av - c->r[r] < V->quota[r] || R->alloc[r] >= R->fair[r])
        return false;
    int64_t before = abs64(R->alloc[r] - R->fair[r]) + abs64(av - V->fair[r]);
    int64_t after = abs64(R->alloc[r] + p->r[r] - R->fair[r]) + abs64(av - c->r[r] - V->fair[r]);
    return after < before;
}

static bool preempt_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c)
{
    return c->queue == p->queue && prio_of(e, c) < prio_of(e, p);
}

struct victim_set {
    uint32_t node;
    uint32_t count;   /* pods evicted, whole gangs counted */
    int32_t max_prio; /* highest victim priority */
    uint32_t n;       /* entries in e->cand[0..n) */
};

static int cmp_sort_key(const void *a, const void *b)
{
    const struct sort_key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    return x->pod < y->pod ? -1 : x->pod > y->pod;
}

/* Sorts pods[0..n) by the keys key_of() gives, through the engine's scratch key array. */
static int sort_pods(struct gs_engine *e, uint32_t *pods, uint32_t n,
                     void (*key_of)(const struct gs_engine *, uint32_t, struct sort_key *))
{
    if (n < 2)
        return GS_OK;
    int err = grow((void **)&e->keys, &e->keys_cap, n, sizeof(*e->keys));
    if (err)
        return err;
    for (uint32_t i = 0; i < n; i++)
        key_of(e, pods[i], &e->keys[i]);
    qsort(e->keys, n, sizeof(*e->keys), cmp_sort_key);
    for (uint32_t i = 0; i < n; i++)
        pods[i] = e->keys[i].pod;
    return GS_OK;
}

/* Victim order on a node: lowest priority, then shortest running (latest start), then id. */
static void victim_key(const struct gs_engine *e, uint32_t pod, struct sort_key *k)
{
    const struct tpod *p = &e->p[pod];
    *k = (struct sort_key){e->pc[p->pclass].value, -p->start_ms, pod};
}

/*
 * Finds the cheapest set of victims that lets pod fit on one node: fewest pods (gangs counted
 * whole), then lowest highest priority, then node rank order (node index). Victims are tried
 * greedily in victim order on each node that could host the pod. Returns true and fills *best,
 * leaving the victims' ids in e->cand[0..best->n).
 */
static bool find_victims(struct gs_engine *e, uint32_t pod, bool reclaim, struct victim_set *best)
{
    struct tpod *p = &e->p[pod];
    uint32_t nn = gs_cluster_node_count(e->c);
    bool found = false;
    if (reclaim) {
        /* Only a queue below its fair share on the needed resource may reclaim. */
        const struct queue *R = &e->q[p->queue];
        int r = fair_res(p);
        if (R->alloc[r] >= R->fair[r])
            return false;
    }
    *best = (struct victim_set){0, 0, 0, 0};
    uint32_t *bestv = NULL;
    uint32_t bestv_cap = 0;
    for (uint32_t n = 0; n < nn && n < e->nodes_cap; n++) {
        uint32_t k = e->node_npods[n];
        if (k == 0)
            continue;
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        if (p->req.num_gpu && (nd->gpu_count < p->req.num_gpu ||
                               (p->req.gpu_model_mask != GS_MODEL_ANY &&
                                !(p->req.gpu_model_mask & (UINT64_C(1) << (nd->model_id & 63))))))
            continue;
        if (grow((void **)&e->cand, &e->ncand_cap, k, sizeof(uint32_t)) != GS_OK)
            break;
        uint32_t nc = 0;
        int r = fair_res(p);
        for (uint32_t i = 0; i < k; i++) {
            uint32_t ci = e->node_pods[n][i];
            const struct tpod *c = &e->p[ci];
            if (!victim_common_ok(e, c))
                continue;
            /* reclaim_ok with nothing taken yet is necessary for any set containing c. */
            if (reclaim ? reclaim_ok(e, p, c, 0) : preempt_ok(e, p, c))
                e->cand[nc++] = ci;
        }
        (void)r;
        if (nc == 0)
            continue;
        if (sort_pods(e, e->cand, nc, victim_key) != GS_OK)
            break;
        /* Greedy: unbind in order until the pod fits, with the reclaim rule per victim. */
        uint32_t used = 0, count = 0;
        int32_t maxp = INT32_MIN;
        bool fits = false;
        for (uint32_t i = 0; i < nc && !fits; i++) {
            struct tpod *c = &e->p[e->cand[i]];
            if (reclaim) {
                int64_t taken = 0;
                for (uint32_t j = 0; j < used; j++)
                    if (e->p[e->cand[j]].queue == c->queue)
                        taken += e->p[e->cand[j]].r[fair_res(p)];
                if (!reclaim_ok(e, p, c, taken))
                    continue;
            }
            (void)gs_cluster_unbind(e->c, &c->req, &c->pl);
            uint32_t tmp = e->cand[used];
            e->cand[used] = e->cand[i];
            e->cand[i] = tmp;
            used++;
            count += c->gang != GS_NO_GANG ? e->g[c->gang].running : 1;
            int32_t pv = prio_of(e, c);
            maxp = pv > maxp ? pv : maxp;
            fits = gs_node_fits(nd, &p->req);
        }
        for (uint32_t i = used; i-- > 0;) {
            struct tpod *c = &e->p[e->cand[i]];
            (void)gs_cluster_bind(e->c, &c->req, &c->pl);
        }
        if (!fits)
            continue;
        if (!found || count < best->count || (count == best->count && maxp < best->max_prio)) {
            if (grow((void **)&bestv, &bestv_cap, used, sizeof(uint32_t)) != GS_OK)
                break;
            memcpy(bestv, e->cand, used * sizeof(uint32_t));
            *best = (struct victim_set){n, count, maxp, used};
            found = true;
        }
    }
    if (found) {
        if (grow((void **)&e->cand, &e->ncand_cap, best->n, sizeof(uint32_t)) != GS_OK)
            found = false;
        else
            memcpy(e->cand, bestv, best->n * sizeof(uint32_t));
    }
    free(bestv);
    return found;
}

/* Evicts a victim and, when it belongs to a gang, the gang's other running members. */
static int evict_victim(struct gs_engine *e, uint32_t victim, enum gs_evict_reason reason,
                        uint32_t by)
{
    struct tpod *c = &e->p[victim];
    if (c->state != GS_TPOD_RUNNING)
        return GS_OK;
    int err = do_evict(e, victim, reason, by);
    if (err || c->gang == GS_NO_GANG)
        return err;
    struct gang *g = &e->g[c->gang];
    for (uint32_t m = 0; m < g->n_members && !err; m++)
        if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
            err = do_evict(e, g->members[m], GS_EVICT_GANG, by);
    return err;
}

/* Places one pod, evicting victims (preempt or reclaim mode) if it does not fit as is. */
static int place_with_victims(struct gs_engine *e, uint32_t pod, bool reclaim)
{
    int err = place_one(e, pod);
    if (err != GS_EUNSCHEDULABLE)
        return err;
    if (!within_limits(e, &e->p[pod]))
        return GS_EUNSCHEDULABLE;
    struct victim_set vs = {0, 0, 0, 0};
    if (!find_victims(e, pod, reclaim, &vs))
        return GS_EUNSCHEDULABLE;
    enum gs_evict_reason why = reclaim ? GS_EVICT_RECLAIM : GS_EVICT_PREEMPT;
    err = GS_OK;
    for (uint32_t i = 0; i < vs.n && !err; i++)
        err = evict_victim(e, e->cand[i], why, pod);
    if (err)
        return err;
    return place_one(e, pod);
}

/* Pods of the job headed by `head`: the gang's pending members, or the pod alone. */
static uint32_t job_members(struct gs_engine *e, uint32_t head, uint32_t **out, uint32_t *need)
{
    struct tpod *p = &e->p[head];
    if (p->gang == GS_NO_GANG) {
        *out = &p->seq; /* unused placeholder; caller uses head */
        *need = 1;
        return 0;
    }
    struct gang *g = &e->g[p->gang];
    *out = g->members;
    uint32_t have = g->running + g->succeeded;
    *need = g->min_member > have ? g->min_member - have : 0;
    return g->n_members;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/*
 * An upper bound on how many pending members of a gang the cluster could host right now, when
 * they all ask for the same thing (the usual gang): per node, the fewest copies that its free
 * CPU, memory, pod slots and GPUs allow, summed. Ignores placement order and limits, so it only
 * proves that a gang cannot fit: a gang of 512 eight-GPU pods is refused in one pass over the
 * packed node view instead of 300 trial placements and their rollback. Returns UINT32_MAX
 * when the members differ (no bound).
 */
static uint32_t gang_slots(const struct gs_engine *e, const uint32_t *members, uint32_t nm)
{
    const struct gs_pod_req *rq = NULL;
    for (uint32_t m = 0; m < nm; m++) {
        const struct tpod *mp = &e->p[members[m]];
        if (mp->state != GS_TPOD_PENDING)
            continue;
        if (rq && memcmp(rq, &mp->req, sizeof(*rq)) != 0)
            return UINT32_MAX;
        rq = &mp->req;
    }
    if (!rq)
        return 0;
    const struct gs_node_fit *fit = gs_cluster_fit_array(e->c);
    uint32_t nn = gs_cluster_node_count(e->c);
    uint64_t slots = 0;
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node_fit *f = &fit[n];
        if (!gs_fit_ok(f, rq))
            continue;
        int64_t k = f->pods_left;
        if (rq->cpu_milli > 0)
            k = min64(k, f->cpu_milli_free / rq->cpu_milli);
        if (rq->mem_mib > 0)
            k = min64(k, f->mem_mib_free / rq->mem_mib);
        if (rq->num_gpu > 0) {
            int64_t g = 0;
            for (uint32_t i = 0; i < f->gpu_count; i++)
                g += f->gpu_free_desc[i] / rq->gpu_milli; /* copies each GPU can take */
            k = min64(k, rq->gpu_milli < GS_GPU_MILLI ? g : g / rq->num_gpu);
        }
        slots += (uint64_t)k;
        if (slots >= nm)
            return nm;
    }
    return (uint32_t)slots;
}

/*
 * Tries a job in one mode (0 plain, 1 preempt, 2 reclaim). On success the changes stay in the
 * log (from `mark`); on failure they are rolled back. Returns GS_OK, GS_EUNSCHEDULABLE or
 * GS_ENOMEM.
 */
static int try_job_mode(struct gs_engine *e, uint32_t head, int mode, uint32_t mark)
{
    uint32_t *members, need;
    uint32_t nm = job_members(e, head, &members, &need);
    int err;
    if (nm == 0) {
        err = mode == 0 ? place_one(e, head) : place_with_victims(e, head, mode == 2);
        if (err)
            rollback(e, mark);
        return err;
    }
    /* A gang: place pending members until min_member run, all or nothing; extra members that
     * fit join too. Without evictions, a gang whose needed members ask for more GPU than the
     * cluster has free is refused before any trial placement. */
    if (mode == 0 && need > 0) {
        int64_t gpu_need = 0;
        uint32_t counted = 0;
        for (uint32_t m = 0; m < nm && counted < need; m++) {
            const struct tpod *mp = &e->p[members[m]];
            if (mp->state != GS_TPOD_PENDING)
                continue;
            gpu_need += mp->r[GS_RES_GPU];
            counted++;
        }
        if (gpu_need > e->capacity[GS_RES_GPU] - gs_cluster_gpu_milli_used(e->c))
            return GS_EUNSCHEDULABLE;
        if (gang_slots(e, members, nm) < need)
            return GS_EUNSCHEDULABLE;
    }
    uint32_t placed = 0;
    for (uint32_t m = 0; m < nm; m++) {
        uint32_t pi = members[m];
        if (e->p[pi].state != GS_TPOD_PENDING)
            continue;
        err = mode == 0 ? place_one(e, pi) : place_with_victims(e, pi, mode == 2);
        if (err == GS_ENOMEM) {
            rollback(e, mark);
            return err;
        }
        if (err == GS_OK)
            placed++;
        else if (placed < need && mode == 0)
            break; /* plain mode: a member that does not fit now will not fit later */
    }
    if (placed < need || (need == 0 && placed == 0)) {
        rollback(e, mark);
        return GS_EUNSCHEDULABLE;
    }
    return GS_OK;
}

/* Whether the binds since `mark` respect every reservation of this cycle. */
static bool respects_reservations(const struct gs_engine *e, uint32_t mark)
{
    for (uint32_t i = mark; i < e->nlog; i++) {
        const struct undo *u = &e->log[i];
        if (!u->bind)
            return false; /* backfill never evicts */
        const struct tpod *p = &e->p[u->pod];
        for (uint32_t k = 0; k < e->nresv; k++) {
            const struct reservation *rv = &e->resv[k];
            if (!rv->nodes[u->pl.node])
                continue;
            if (p->est_ms < 0 || e->now_ms + p->est_ms > rv->start_ms)
                return false;
        }
    }
    return true;
}

/* Backfill order: earliest estimated end first, then id. */
static void end_key(const struct gs_engine *e, uint32_t pod, struct sort_key *k)
{
    const struct tpod *p = &e->p[pod];
    *k = (struct sort_key){p->start_ms + p->est_ms, 0, pod};
}

/*
 * EASY backfill: finds when the blocked job headed by `head` could start if running pods end
 * at their estimates (release them in order of estimated end, trying the job after each), and
 * records the nodes it would use then as reserved until that time. Everything is rolled back.
 */
static int reserve(struct gs_engine *e, uint32_t head)
{
    /* The running pods by estimated end change only when something is committed: build the
     * order once per change, from the per-node lists (no scan of every pod ever submitted). */
    if (e->end_order_at != e->mutations) {
        uint32_t nn = gs_cluster_node_count(e->c), k = 0;
        for (uint32_t n = 0; n < nn && n < e->nodes_cap; n++) {
            for (uint32_t j = 0; j < e->node_npods[n]; j++) {
                uint32_t pi = e->node_pods[n][j];
                if (e->p[pi].est_ms < 0)
                    continue;
                if (grow((void **)&e->end_order, &e->end_order_cap, k + 1, sizeof(uint32_t)))
                    return GS_ENOMEM;
                e->end_order[k++] = pi;
            }
        }
        if (sort_pods(e, e->end_order, k, end_key) != GS_OK)
            return GS_ENOMEM;
        e->end_order_n = k;
        e->end_order_at = e->mutations;
    }
    uint32_t n_run = e->end_order_n;
    if (n_run == 0)
        return GS_OK;
    uint32_t *order = malloc(n_run * sizeof(*order));
    if (!order)
        return GS_ENOMEM;
    memcpy(order, e->end_order, n_run * sizeof(*order));
    uint32_t mark = e->nlog;
    int err = GS_OK;
    int64_t at = -1;
    uint32_t nn = gs_cluster_node_count(e->c);
    uint8_t *nodes = NULL;
    for (uint32_t i = 0; i < n_run && i < BACKFILL_RELEASES_MAX; i++) {
        struct tpod *r = &e->p[order[i]];
        if ((err = do_evict(e, order[i], GS_EVICT_NONE, NO_ID)) != GS_OK)
            break;
        /* Try only once every pod ending at this same time is released. */
        if (i + 1 < n_run &&
            e->p[order[i + 1]].start_ms + e->p[order[i + 1]].est_ms == r->start_ms + r->est_ms)
            continue;
        uint32_t inner = e->nlog;
        if (e->p[head].gang == GS_NO_GANG) {
            /* A single pod did not fit before these releases, so it fits now only on a node
             * they touched: check those nodes alone instead of a whole placement. */
            uint32_t batch_start = i;
            while (batch_start > 0 &&
                   e->p[order[batch_start - 1]].start_ms + e->p[order[batch_start - 1]].est_ms ==
                       r->start_ms + r->est_ms)
                batch_start--;
            bool fits = false;
            for (uint32_t j = batch_start; j <= i && !fits; j++) {
                const struct gs_node *nd = gs_cluster_node(e->c, e->p[order[j]].pl.node);
                fits = gs_node_fits(nd, &e->p[head].req) && within_limits(e, &e->p[head]);
            }
            if (!fits)
                continue;
        }
        err = try_job_mode(e, head, 0, inner);
        if (err == GS_ENOMEM)
            break;
        if (err == GS_OK) {
            at = r->start_ms + r->est_ms;
            nodes = calloc(nn ? nn : 1, 1);
            if (!nodes) {
                err = GS_ENOMEM;
                break;
            }
            for (uint32_t j = inner; j < e->nlog; j++)
                if (e->log[j].bind)
                    nodes[e->log[j].pl.node] = 1;
            break;
        }
        err = GS_OK;
    }
    rollback(e, mark);
    free(order);
    if (err == GS_ENOMEM) {
        free(nodes);
        return err;
    }
    if (at < 0) {
        free(nodes);
        return GS_OK;
    }
    if (grow((void **)&e->resv, &e->capresv, e->nresv + 1, sizeof(*e->resv)) != GS_OK) {
        free(nodes);
        return GS_ENOMEM;
    }
    e->resv[e->nresv++] = (struct reservation){at, nodes};
    return GS_OK;
}

/* ---- the cycle ---------------------------------------------------------------------------- */

static void fail_timed_out_gangs(struct gs_engine *e)
{
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        struct gang *g = &e->g[gi];
        if (g->started || g->timeout_ms <= 0 || g->first_submit_ms < 0 || g->pending == 0 ||
            e->now_ms - g->first_submit_ms < g->timeout_ms)
            continue;
        for (uint32_t m = 0; m < g->n_members; m++) {
            struct tpod *p = &e->p[g->members[m]];
            if (p->state != GS_TPOD_PENDING)
                continue;
            p->state = GS_TPOD_FAILED;
            p->end_ms = e->now_ms;
            e->q[p->queue].pending--;
            g->pending--;
            account(e, p->queue, 1, p->r, -1);
            emit(e, GS_EV_GANG_TIMEOUT, g->members[m], NO_ID, GS_EVICT_NONE, NULL);
        }
    }
}

/* The next job of a leaf queue: the best head among its flavors not blocked in this cycle. */
static uint32_t queue_next(struct gs_engine *e, struct queue *q, uint32_t *flavor)
{
    uint32_t best = NO_ID;
    struct heap_ent bh = {0};
    for (uint32_t f = 0; f < q->n_flavors; f++) {
        struct flavor_queue *fq = &q->flavors[f];
        if (fq->blocked_cycle == e->cycle)
            continue;
        uint32_t h = flavor_head(e, fq);
        if (h == NO_ID)
            continue;
        if (best == NO_ID || heap_before(&fq->heap[0], &bh)) {
            best = h;
            bh = fq->heap[0];
            *flavor = f;
        }
    }
    return best;
}

int gs_engine_cycle(struct gs_engine *e, int64_t now_ms, struct gs_rng *rng,
                    struct gs_cycle_stats *st)
{
    struct gs_cycle_stats local = {0};
    e->now_ms = now_ms;
    e->rng = rng;
    e->st = st ? st : &local;
    memset(e->st, 0, sizeof(*e->st));
    e->cycle++;
    int err = ensure_nodes(e);
    if (err)
        return err;
    fail_timed_out_gangs(e);
    if (e->capacity_nodes != gs_cluster_node_count(e->c)) {
        cluster_capacity(e, e->capacity);
        e->capacity_nodes = gs_cluster_node_count(e->c);
    }
    gs_engine_compute_fair(e, e->capacity);
    for (uint32_t i = 0; i < e->nresv; i++)
        free(e->resv[i].nodes);
    e->nresv = 0;

    /* Pods popped and not placed this cycle go back at the end. */
    uint32_t *deferred = NULL, ndef = 0, capdef = 0;
    for (;;) {
        /* The leaf queue furthest below its share (lowest dominant ratio), then id. */
        uint32_t qbest = NO_ID, fbest = 0, head = NO_ID;
        double rbest = 0;
        for (uint32_t qi = 1; qi < e->nq; qi++) {
            struct queue *q = &e->q[qi];
            if (!is_leaf(q) || q->pending == 0)
                continue;
            uint32_t f;
            uint32_t h = queue_next(e, q, &f);
            if (h == NO_ID)
                continue;
            double ratio = share_ratio(q);
            if (qbest == NO_ID || ratio < rbest) {
                qbest = qi;
                rbest = ratio;
                fbest = f;
                head = h;
            }
        }
        if (qbest == NO_ID)
            break;
        if (e->cfg.cycle_attempts_max && e->st->attempts >= e->cfg.cycle_attempts_max)
            break;
        struct flavor_queue *fq = &e->q[qbest].flavors[fbest];
        heap_pop(fq);
        struct tpod *hp = &e->p[head];
        if (hp->gang != GS_NO_GANG) {
            if (e->g[hp->gang].tried_cycle == e->cycle) {
                if ((err = grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))))
                    break;
                deferred[ndef++] = head;
                continue;
            }
            e->g[hp->gang].tried_cycle = e->cycle;
        }
        e->st->attempts++;
        uint32_t mark = e->nlog;
        err = try_job_mode(e, head, 0, mark);
        bool backfilled = false;
        if (err == GS_OK && e->nresv > 0) {
            if (!respects_reservations(e, mark)) {
                rollback(e, mark);
                err = GS_EUNSCHEDULABLE;
            } else {
                backfilled = true;
            }
        }
        if (err == GS_EUNSCHEDULABLE && e->cfg.preemption && e->nresv == 0)
            err = try_job_mode(e, head, 1, mark);
        if (err == GS_EUNSCHEDULABLE && e->cfg.reclaim && e->nresv == 0)
            err = try_job_mode(e, head, 2, mark);
        if (err == GS_ENOMEM)
            break;
        if (err == GS_OK) {
            if ((err = commit(e, mark, backfilled)) != GS_OK)
                break;
            /* A gang's members left in the heaps are stale or pending extras: keep them. */
            if (hp->state == GS_TPOD_PENDING) {
                if ((err = grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))))
                    break;
                deferred[ndef++] = head;
            }
            continue;
        }
        /* Not placed: it waits. Without backfill its flavor waits behind it this cycle. */
        if ((err = grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))) != GS_OK)
            break;
        deferred[ndef++] = head;
        err = GS_OK;
        if (e->cfg.backfill && fq->bf_cycle != e->cycle) {
            /* The first job of this flavor that cannot start gets the reservation. */
            fq->bf_cycle = e->cycle;
            fq->bf_tries = 0;
            if ((err = reserve(e, head)) != GS_OK)
                break;
        } else if (!e->cfg.backfill || ++fq->bf_tries >= BACKFILL_DEPTH) {
            fq->blocked_cycle = e->cycle;
        }
    }
    for (uint32_t i = 0; i < ndef; i++) {
        struct tpod *p = &e->p[deferred[i]];
        if (p->state != GS_TPOD_PENDING)
            continue;
        /* Re-push with the same token: the entry that was popped is gone. */
        struct queue *q = &e->q[p->queue];
        uint64_t mask = p->req.num_gpu ? p->req.gpu_model_mask : 0;
        for (uint32_t f = 0; f < q->n_flavors; f++) {
            if (q->flavors[f].mask != mask)
                continue;
            int perr = heap_push(&q->flavors[f], (struct heap_ent){deferred[i], p->seq,
                                                                   prio_of(e, p), p->submit_ms});
            if (perr && !err)
                err = perr;
            break;
        }
    }
    free(deferred);
    e->rng = NULL;
    e->st = NULL;
    return err;
}

/* ---- reading state ------------------------------------------------------------------------ */

uint32_t gs_engine_queue_count(const struct gs_engine *e)
{
    return e->nq;
}

int gs_engine_queue_info(const struct gs_engine *e, uint32_t id, struct gs_queue_info *out)
{
    if (id >= e->nq)
        return GS_EINVAL;
    const struct queue *q = &e->q[id];
    out->name = q->name;
    out->parent = q->parent;
    out->leaf = is_leaf(q) && id != GS_QUEUE_ROOT;
    memcpy(out->allocated, q->alloc, sizeof(q->alloc));
    memcpy(out->demand, q->demand, sizeof(q->demand));
    memcpy(out->fair, q->fair, sizeof(q->fair));
    memcpy(out->quota, q->quota, sizeof(q->quota));
    memcpy(out->limit, q->limit, sizeof(q->limit));
    out->pending = q->pending;
    out->running = q->running;
    out->evictions_suffered = q->ev_suffered;
    out->evictions_caused = q->ev_caused;
    return GS_OK;
}

uint32_t gs_engine_pod_count(const struct gs_engine *e)
{
    return e->np;
}

int gs_engine_pod_info(const struct gs_engine *e, uint32_t id, struct gs_tpod_info *out)
{
    if (id >= e->np)
        return GS_EINVAL;
    const struct tpod *p = &e->p[id];
    out->name = p->name;
    out->state = p->state;
    out->queue = p->queue;
    out->priority_class = p->pclass;
    out->gang = p->gang;
    out->pl = p->pl;
    out->submit_ms = p->submit_ms;
    out->start_ms = p->start_ms;
    out->end_ms = p->end_ms;
    out->evictions = p->evictions;
    out->last_evict_reason = p->reason;
    return GS_OK;
}

int gs_engine_check(const struct gs_engine *e, char *msg, size_t cap)
{
    int err = GS_EINVAL;
    uint32_t nn = gs_cluster_node_count(e->c);
    int32_t *used = calloc((size_t)(nn ? nn : 1) * GS_NODE_GPUS_MAX, sizeof(*used));
    int64_t *qalloc = calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qalloc));
    int64_t *qdem = calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qdem));
    uint32_t *qpend = calloc(e->nq, sizeof(*qpend)), *qrun = calloc(e->nq, sizeof(*qrun));
    uint64_t evictions = 0;
    if (!used || !qalloc || !qdem || !qpend || !qrun) {
        (void)snprintf(msg, cap, "out of memory");
        err = GS_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < e->np; i++) {
        const struct tpod *p = &e->p[i];
        if (p->state > GS_TPOD_FAILED) {
            (void)snprintf(msg, cap, "pod %u (%s) has no valid state", i, p->name);
            goto out;
        }
        if (p->evictions > 0 && p->reason == GS_EVICT_NONE) {
            (void)snprintf(msg, cap, "pod %u (%s) was evicted without a reason", i, p->name);
            goto out;
        }
        evictions += p->evictions;
        if (p->state == GS_TPOD_PENDING || p->state == GS_TPOD_RUNNING)
            for (uint32_t a = p->queue; a != NO_ID; a = e->q[a].parent)
                for (int r = 0; r < GS_RES_COUNT; r++)
                    qdem[a * GS_RES_COUNT + r] += p->r[r];
        if (p->state == GS_TPOD_PENDING)
            qpend[p->queue]++;
        if (p->state != GS_TPOD_RUNNING)
            continue;
        qrun[p->queue]++;
        for (uint32_t a = p->queue; a != NO_ID; a = e->q[a].parent)
            for (int r = 0; r < GS_RES_COUNT; r++)
                qalloc[a * GS_RES_COUNT + r] += p->r[r];
        for (uint32_t g = 0; g < p->pl.num_gpu; g++)
            used[p->pl.node * GS_NODE_GPUS_MAX + p->pl.gpu_index[g]] += p->pl.gpu_milli;
    }
    if (evictions != e->evictions_total) {
        (void)snprintf(msg, cap, "%llu evictions recorded on pods, %llu made",
                       (unsigned long long)evictions, (unsigned long long)e->evictions_total);
        goto out;
    }
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        for (uint32_t g = 0; g < nd->gpu_count; g++) {
            int32_t u = used[n * GS_NODE_GPUS_MAX + g];
            if (u > nd->gpus[g].gpu_milli ||
                u != nd->gpus[g].gpu_milli - nd->gpus[g].gpu_milli_free) {
                (void)snprintf(msg, cap,
                               "node %s GPU %u: pods hold %d milli, the cluster says %d of %d",
                               nd->name, g, u, nd->gpus[g].gpu_milli - nd->gpus[g].gpu_milli_free,
                               nd->gpus[g].gpu_milli);
                goto out;
            }
        }
    }
    for (uint32_t qi = 0; qi < e->nq; qi++) {
        const struct queue *q = &e->q[qi];
        for (int r = 0; r < GS_RES_COUNT; r++) {
            if (q->alloc[r] != qalloc[qi * GS_RES_COUNT + r] ||
                q->demand[r] != qdem[qi * GS_RES_COUNT + r]) {
                (void)snprintf(
                    msg, cap,
                    "queue %s resource %d: books say alloc %lld demand %lld, pods say %lld %lld",
                    q->name, r, (long long)q->alloc[r], (long long)q->demand[r],
                    (long long)qalloc[qi * GS_RES_COUNT + r],
                    (long long)qdem[qi * GS_RES_COUNT + r]);
                goto out;
            }
            if (q->limit[r] != GS_UNLIMITED && q->alloc[r] > q->limit[r]) {
                (void)snprintf(msg, cap, "queue %s is above its limit for resource %d: %lld > %lld",
                               q->name, r, (long long)q->alloc[r], (long long)q->limit[r]);
                goto out;
            }
        }
        if (q->pending != qpend[qi] || q->running != qrun[qi]) {
            (void)snprintf(msg, cap, "queue %s counts %u pending %u running, pods say %u %u",
                           q->name, q->pending, q->running, qpend[qi], qrun[qi]);
            goto out;
        }
    }
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        const struct gang *g = &e->g[gi];
        uint32_t run = 0, done = 0, pend = 0;
        for (uint32_t m = 0; m < g->n_members; m++) {
            enum gs_tpod_state s = e->p[g->members[m]].state;
            run += s == GS_TPOD_RUNNING;
            done += s == GS_TPOD_SUCCEEDED;
            pend += s == GS_TPOD_PENDING;
        }
        if (run != g->running || done != g->succeeded || pend != g->pending) {
            (void)snprintf(msg, cap, "gang %s counts disagree with its members", g->name);
            goto out;
        }
        if (run > 0 && run + done < g->min_member) {
            (void)snprintf(msg, cap, "gang %s runs %u of min_member %u", g->name, run,
                           g->min_member);
            goto out;
        }
    }
    err = GS_OK;
out:
    free(used);
    free(qalloc);
    free(qdem);
    free(qpend);
    free(qrun);
    return err;
}
