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
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"

#define NO_ID UINT32_MAX
#define BACKFILL_RELEASES_MAX 20000
/* Jobs tried behind a reservation per flavor and cycle (Slurm's bf_max_job_test plays the same
 * role): bounds a cycle's cost when thousands of jobs wait. */
#define BACKFILL_DEPTH 64
/* Room for a refused gang's reason, with a long gang name cut short. */
#define GANG_REASON_MAX 320

struct heap_ent {
    uint32_t pod;
    uint32_t seq; /* the pod's enqueue token; stale when it differs */
    int32_t prio;
    int64_t submit_ms;
};

struct flavor_queue {
    uint64_t mask;         /* GPU model mask of the pods in it (CPU-only pods: 0) */
    uint32_t fclass;       /* node filter class of the pods in it */
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
    /* The queue's best head (queue_next()), cached: valid while ver == hc_ver in cycle
     * hc_cycle and the pod is still pending with token hc_seq. ver counts every change of the
     * queue's heaps and blocked flavors; with many flavors (model masks x filter classes) this
     * saves scanning every flavor of every queue for each job a cycle tries. */
    uint64_t ver, hc_ver;
    uint32_t hc_cycle, hc_pod, hc_flavor, hc_seq;
    bool hc_skipped; /* a flavor blocked in hc_cycle was left out: valid in that cycle only */
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
    bool refused;                 /* its minimum can never fit under a limit (gang_judge()) */
    char reason[GANG_REASON_MAX]; /* why it is refused; "" otherwise */
    uint32_t vic_stamp;           /* victim search (e->vic_stamp) that vic_taken belongs to */
    uint32_t vic_taken;           /* running members taken as victims in that search */
    uint32_t last_fit;            /* members running or placed when its last plain trial
                                     failed, for the reason; UINT32_MAX when not known */
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
    uint32_t node_slot;  /* index in its node's pod list while RUNNING */
    uint32_t bind_trial; /* e->trial when last bound: a trial never evicts what it bound */
    uint32_t vic_stamp;  /* victim search (e->vic_stamp) that took it */
    /* Live-cluster identity (NULL / 0 in the simulator). */
    char *uid, *ns;
    uint32_t fclass;       /* node filter class; the pod holds one reference until forgotten */
    int64_t created_ms;    /* creation time, for "newest first" */
    bool adopted;          /* came in running */
    bool foreign;          /* another scheduler's: capacity only, in the root's books */
    bool forgotten;        /* slot no longer a pod (free, or a gang member's tombstone) */
    uint32_t gen;          /* slot generation, for handles */
    char *reason_text;     /* last UNSCHEDULABLE text, owned */
    uint64_t explained_at; /* gs_cluster_changes() when last explained */
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
    int64_t k3;
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
    uint64_t capacity_gen; /* gs_cluster_capacity_gen() when capacity was read; 0 never */
    int64_t foreign_alloc[GS_RES_COUNT]; /* what foreign pods hold */
    uint32_t *uid_slots;                 /* open addressing over uids: pod id + 1, 0 empty */
    uint32_t uid_cap, uid_len;           /* slots (power of two), live entries (with tombstones) */
    uint32_t *free_pods;                 /* forgotten pod slots ready for reuse */
    uint64_t evictions_reused;           /* evictions of pods whose slots were reused */
    uint32_t nfree, capfree;
    int64_t now_ms;
    struct gs_rng *rng;
    struct gs_cycle_stats *st;
    /* scratch for victim search */
    uint32_t *cand;
    uint32_t ncand_cap;
    int64_t *qdelta; /* per queue, resource of the fairness check */
    int64_t *vloss;  /* per victim in e->cand: what its queue loses (reclaim rule) */
    uint32_t *unb;   /* pods unbound while a victim set is tried on one node */
    int64_t *vals;   /* scratch for gang_judge(), as long as the largest gang */
    uint32_t vloss_cap, unb_cap, vals_cap;
    uint32_t trial;     /* bumped by every job trial (try_job_mode) */
    uint32_t vic_stamp; /* bumped by every victim set tried on a node */
};

static void emit(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                 enum gs_evict_reason reason, const struct gs_placement *pl);

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
    while (f < q->n_flavors && (q->flavors[f].mask != mask || q->flavors[f].fclass != p->fclass))
        f++;
    if (f == q->n_flavors) {
        struct flavor_queue *nf = realloc(q->flavors, (q->n_flavors + 1) * sizeof(*nf));
        if (!nf)
            return GS_ENOMEM;
        q->flavors = nf;
        memset(&nf[f], 0, sizeof(nf[f]));
        nf[f].mask = mask;
        nf[f].fclass = p->fclass;
        nf[f].blocked_cycle = UINT32_MAX;
        nf[f].bf_cycle = UINT32_MAX;
        q->n_flavors++;
    }
    p->seq++;
    q->ver++;
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
    for (uint32_t i = 0; i < e->np; i++) {
        free(e->p[i].name);
        free(e->p[i].uid);
        free(e->p[i].ns);
        free(e->p[i].reason_text);
    }
    free(e->uid_slots);
    free(e->free_pods);
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
    free(e->vloss);
    free(e->unb);
    free(e->vals);
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

static void gang_judge(struct gs_engine *e, uint32_t gi);

int gs_engine_update_queue(struct gs_engine *e, uint32_t id, const struct gs_queue_spec *spec)
{
    if (id == GS_QUEUE_ROOT || id >= e->nq || !spec->name ||
        strcmp(spec->name, e->q[id].name) != 0 || spec->parent != e->q[id].parent ||
        !(spec->over_quota_weight >= 0) || spec->min_runtime_ms < 0)
        return GS_EINVAL;
    const struct queue *q = &e->q[id], *par = &e->q[q->parent];
    for (int r = 0; r < GS_RES_COUNT; r++) {
        if (spec->quota[r] < 0 || spec->limit[r] < spec->quota[r] || spec->limit[r] < q->alloc[r])
            return GS_EINVAL;
        if (par->quota[r] != GS_UNLIMITED) {
            int64_t sum = spec->quota[r];
            for (uint32_t ch = par->first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
                sum += ch == id ? 0 : e->q[ch].quota[r];
            if (sum > par->quota[r])
                return GS_EINVAL;
        }
        if (spec->quota[r] != GS_UNLIMITED) {
            int64_t sum = 0;
            for (uint32_t ch = q->first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
                sum += e->q[ch].quota[r];
            if (sum > spec->quota[r])
                return GS_EINVAL;
        }
    }
    struct queue *w = &e->q[id];
    memcpy(w->quota, spec->quota, sizeof(w->quota));
    memcpy(w->limit, spec->limit, sizeof(w->limit));
    w->weight = spec->over_quota_weight;
    w->min_runtime_ms = spec->min_runtime_ms;
    /* Caps changed: every gang below this queue is judged again (e->vals already holds the
     * largest gang, from its submissions). */
    for (uint32_t gi = 0; gi < e->ng; gi++) {
        if (e->g[gi].n_members == 0)
            continue;
        for (uint32_t a = e->p[e->g[gi].members[0]].queue; a != NO_ID; a = e->q[a].parent) {
            if (a == id) {
                gang_judge(e, gi);
                break;
            }
        }
    }
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
    g->last_fit = UINT32_MAX;
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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Writes an amount of resource r for a reason text: "2 GPUs", "1.5 GPUs", "4000 milli-CPU". */
static void fmt_amount(char *buf, size_t cap, int r, int64_t v)
{
    if (r == GS_RES_GPU) {
        char frac[8] = "";
        int64_t f = v % GS_GPU_MILLI;
        if (f) {
            (void)snprintf(frac, sizeof(frac), ".%03lld", (long long)f);
            size_t n = strlen(frac);
            while (n > 2 && frac[n - 1] == '0')
                frac[--n] = '\0';
        }
        (void)snprintf(buf, cap, "%lld%s GPU%s", (long long)(v / GS_GPU_MILLI), frac,
                       v == GS_GPU_MILLI ? "" : "s");
    } else {
        (void)snprintf(buf, cap, "%lld %s", (long long)v, r == GS_RES_CPU ? "milli-CPU" : "MiB");
    }
}

/*
 * Decides whether gang gi can ever start under the limits of its queue and its ancestors, and
 * records the answer in g->refused and g->reason. Its minimum is min_member less its finished
 * members, to run at once; per resource the least that takes is the sum of the smallest requests
 * among its pending and running members (all of them while they are fewer than the minimum: the
 * members still to come can only add). A queue's cap is its limit, or its quota when its
 * over-quota weight is 0, as within_limits() applies them. A gang with running members is never
 * refused (it already fits). Needs e->vals for n_members values; cannot fail.
 */
static void gang_judge(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    g->refused = false;
    g->reason[0] = '\0';
    if (g->n_members == 0 || g->running > 0 || g->succeeded >= g->min_member)
        return;
    uint32_t k = g->min_member - g->succeeded;
    uint32_t qi = e->p[g->members[0]].queue;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        uint32_t n = 0;
        for (uint32_t m = 0; m < g->n_members; m++) {
            const struct tpod *o = &e->p[g->members[m]];
            if (o->state == GS_TPOD_PENDING || o->state == GS_TPOD_RUNNING)
                e->vals[n++] = o->r[r];
        }
        if (n > k)
            qsort(e->vals, n, sizeof(*e->vals), cmp_i64);
        int64_t need = 0;
        for (uint32_t i = 0; i < n && i < k; i++)
            need += e->vals[i];
        if (need <= 0)
            continue;
        for (uint32_t a = qi; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
            const struct queue *q = &e->q[a];
            int64_t cap = q->limit[r];
            bool by_quota = q->weight <= 0 && q->quota[r] != GS_UNLIMITED && q->quota[r] < cap;
            if (by_quota)
                cap = q->quota[r];
            if (cap == GS_UNLIMITED || need <= cap)
                continue;
            char a_need[32], a_cap[32];
            fmt_amount(a_need, sizeof(a_need), r, need);
            fmt_amount(a_cap, sizeof(a_cap), r, cap);
            (void)snprintf(g->reason, sizeof(g->reason),
                           "gang %.100s needs %s at minimum but queue %s is limited to %s%s",
                           g->name, a_need, q->name, a_cap,
                           by_quota ? " (its quota; over-quota weight 0)" : "");
            g->refused = true;
            return;
        }
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

/* ---- pod identity: the uid index and slot reuse ------------------------------------------ */

static uint64_t hash_uid(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

#define UID_TOMB UINT32_MAX

/* The slot of uid in the index: where it is, or the first free place to put it. */
static uint32_t *uid_slot(const struct gs_engine *e, const char *uid, bool for_insert)
{
    uint32_t mask = e->uid_cap - 1, *tomb = NULL;
    for (uint32_t i = (uint32_t)hash_uid(uid) & mask;; i = (i + 1) & mask) {
        uint32_t v = e->uid_slots[i];
        if (v == 0)
            return for_insert && tomb ? tomb : &e->uid_slots[i];
        if (v == UID_TOMB) {
            if (!tomb)
                tomb = &e->uid_slots[i];
            continue;
        }
        if (strcmp(e->p[v - 1].uid, uid) == 0)
            return &e->uid_slots[i];
    }
}

static int uid_reserve(struct gs_engine *e)
{
    if ((e->uid_len + 1) * 2 <= e->uid_cap)
        return GS_OK;
    uint32_t cap = e->uid_cap ? e->uid_cap * 2 : 64;
    uint32_t *old = e->uid_slots, old_cap = e->uid_cap;
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return GS_ENOMEM;
    e->uid_slots = slots;
    e->uid_cap = cap;
    e->uid_len = 0;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i] == 0 || old[i] == UID_TOMB)
            continue;
        *uid_slot(e, e->p[old[i] - 1].uid, true) = old[i];
        e->uid_len++;
    }
    free(old);
    return GS_OK;
}

int64_t gs_engine_find_pod(const struct gs_engine *e, const char *uid)
{
    if (!uid || !e->uid_cap)
        return -1;
    uint32_t v = *uid_slot(e, uid, false);
    return v && v != UID_TOMB ? (int64_t)v - 1 : -1;
}

static bool spec_ok(const struct gs_engine *e, const struct gs_tpod_spec *spec)
{
    if (spec->queue == GS_QUEUE_ROOT || spec->queue >= e->nq || !is_leaf(&e->q[spec->queue]) ||
        spec->priority_class >= e->npc || (spec->gang != GS_NO_GANG && spec->gang >= e->ng))
        return false;
    const struct gs_pod_req *rq = &spec->req;
    if (rq->cpu_milli < 0 || rq->mem_mib < 0 || rq->num_gpu > GS_NODE_GPUS_MAX ||
        (rq->num_gpu && (rq->gpu_milli <= 0 || rq->gpu_milli > GS_GPU_MILLI ||
                         (rq->num_gpu > 1 && rq->gpu_milli < GS_GPU_MILLI))))
        return false;
    if (spec->gang != GS_NO_GANG) {
        const struct gang *g = &e->g[spec->gang];
        if (g->n_members > 0 && e->p[g->members[0]].queue != spec->queue)
            return false;
    }
    return true;
}

/*
 * Creates a pod record in state `state` (PENDING or RUNNING), with every allocation done first
 * so that nothing after it can fail: a reused or new slot, the uid index entry, the gang member
 * entry and the copies of the strings. The caller finishes the state (heap or bind).
 */
static int new_pod(struct gs_engine *e, const struct gs_tpod_spec *spec,
                   const struct gs_pod_ident *ident, int64_t now_ms, uint32_t *out)
{
    const char *uid = ident && ident->uid && *ident->uid ? ident->uid : NULL;
    if (ident && !gs_filter_nodes(e->c, ident->filter_class))
        return GS_EINVAL;
    if (uid && gs_engine_find_pod(e, uid) >= 0)
        return GS_EEXIST;
    int err = GS_OK;
    if (e->nfree == 0 && (err = grow((void **)&e->p, &e->capp, e->np + 1, sizeof(*e->p))))
        return err;
    if (uid && (err = uid_reserve(e)))
        return err;
    if (spec->gang != GS_NO_GANG) {
        struct gang *g = &e->g[spec->gang];
        if ((err = grow((void **)&g->members, &g->cap_members, g->n_members + 1,
                        sizeof(*g->members))) != GS_OK ||
            (err = grow((void **)&e->vals, &e->vals_cap, g->n_members + 1, sizeof(*e->vals))) !=
                GS_OK)
            return err;
    }
    const char *nm = ident && ident->name ? ident->name : spec->name;
    char *name = dup_str(nm ? nm : "");
    char *uidc = uid ? dup_str(uid) : NULL;
    char *ns = ident && ident->ns ? dup_str(ident->ns) : NULL;
    if (!name || (uid && !uidc) || (ident && ident->ns && !ns)) {
        free(name);
        free(uidc);
        free(ns);
        return GS_ENOMEM;
    }
    bool reused = e->nfree > 0;
    uint32_t pi = reused ? e->free_pods[--e->nfree] : e->np++;
    struct tpod *p = &e->p[pi];
    uint32_t gen = reused ? p->gen + 1 : 0;
    if (reused)
        e->evictions_reused += p->evictions; /* their record goes with the slot */
    uint32_t seq = reused ? p->seq : 0;      /* stale heap entries of the old pod stay stale */
    memset(p, 0, sizeof(*p));
    p->gen = gen;
    p->seq = seq;
    p->name = name;
    p->uid = uidc;
    p->ns = ns;
    p->queue = spec->queue;
    p->pclass = spec->priority_class;
    p->gang = spec->gang;
    p->req = spec->req;
    if (!p->req.num_gpu)
        p->req.gpu_milli = 0;
    req_vector(&p->req, p->r);
    p->est_ms = spec->runtime_estimate_ms;
    p->state = GS_TPOD_PENDING;
    p->submit_ms = now_ms;
    p->start_ms = p->end_ms = -1;
    p->created_ms = ident ? ident->created_ms : now_ms;
    p->fclass = ident ? ident->filter_class : GS_FILTER_DEFAULT;
    gs_filter_ref(e->c, p->fclass);
    if (uid) {
        uint32_t *slot = uid_slot(e, uid, true);
        if (*slot == 0)
            e->uid_len++;
        *slot = pi + 1;
    }
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->members[g->n_members++] = pi;
        if (g->first_submit_ms < 0)
            g->first_submit_ms = now_ms;
    }
    *out = pi;
    return GS_OK;
}

/* Undoes new_pod() for a pod that never entered any state (an enqueue that failed). */
static void drop_new_pod(struct gs_engine *e, uint32_t pi)
{
    struct tpod *p = &e->p[pi];
    if (p->uid)
        *uid_slot(e, p->uid, false) = UID_TOMB;
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->n_members--;
        if (g->n_members == 0)
            g->first_submit_ms = -1;
    }
    gs_filter_release(e->c, p->fclass);
    free(p->name);
    free(p->uid);
    free(p->ns);
    p->name = p->uid = p->ns = NULL;
    p->forgotten = true;
    p->state = GS_TPOD_FAILED; /* a free slot is in no queue's books */
    if (pi == e->np - 1)
        e->np--;
    else
        e->free_pods[e->nfree++] = pi; /* the slot came from the free list */
}

int gs_engine_submit_pod(struct gs_engine *e, const struct gs_tpod_spec *spec,
                         const struct gs_pod_ident *ident, int64_t now_ms, uint32_t *id)
{
    if (!spec_ok(e, spec))
        return GS_EINVAL;
    uint32_t pi;
    int err = new_pod(e, spec, ident, now_ms, &pi);
    if (err)
        return err;
    if ((err = enqueue(e, pi)) != GS_OK) {
        drop_new_pod(e, pi);
        return err;
    }
    struct tpod *p = &e->p[pi];
    struct queue *q = &e->q[p->queue];
    q->leaf_used = true;
    q->pending++;
    account(e, p->queue, 1, p->r, +1);
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending++; /* new_pod() made it a member */
        gang_judge(e, p->gang);
    }
    if (id)
        *id = pi;
    e->now_ms = now_ms;
    emit(e, GS_EV_SUBMIT, pi, NO_ID, GS_EVICT_NONE, NULL);
    return p->gang != GS_NO_GANG && e->g[p->gang].refused ? GS_ELIMIT : GS_OK;
}

int gs_engine_submit(struct gs_engine *e, const struct gs_tpod_spec *spec, int64_t now_ms,
                     uint32_t *id)
{
    return gs_engine_submit_pod(e, spec, NULL, now_ms, id);
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
    p->bind_trial = e->trial;
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
            (void)gs_cluster_adopt(e->c, &p->req, &u->pl); /* exact restore */
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

static void emit_text(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                      enum gs_evict_reason reason, const struct gs_placement *pl, const char *text)
{
    if (!e->cfg.on_event)
        return;
    struct gs_event ev = {kind, pod, by, reason, pl, e->now_ms, text};
    e->cfg.on_event(e->cfg.ctx, &ev);
}

static void emit(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                 enum gs_evict_reason reason, const struct gs_placement *pl)
{
    emit_text(e, kind, pod, by, reason, pl, NULL);
}

/* An evicted pod that ends instead of waiting again (config evict_ends_pod): it leaves its
 * queue's pending books as a deleted pending pod does. */
static void end_evicted(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    e->q[p->queue].pending--;
    account(e, p->queue, 1, p->r, -1);
    if (p->gang != GS_NO_GANG)
        e->g[p->gang].pending--;
    p->state = GS_TPOD_FAILED;
    p->end_ms = e->now_ms;
}

/* Whether the log between `from` and `to` holds a change of `pod` of kind `bind`. */
static bool log_has(const struct gs_engine *e, uint32_t from, uint32_t to, uint32_t pod,
                    uint8_t bind)
{
    for (uint32_t i = from; i < to; i++)
        if (e->log[i].pod == pod && e->log[i].bind == bind)
            return true;
    return false;
}

/*
 * Makes the log from `mark` final: start times, eviction records, re-queueing, events. Only net
 * changes are reported: a bind undone by a later eviction in the same log, and that eviction,
 * leave no trace (the pod was pending before and is pending after, still in its heap), so the
 * event stream never evicts a pod it did not report bound.
 */
static int commit(struct gs_engine *e, uint32_t mark, bool backfill)
{
    int err = GS_OK;
    for (uint32_t i = mark; i < e->nlog; i++) {
        struct undo *u = &e->log[i];
        struct tpod *p = &e->p[u->pod];
        if (!u->bind && log_has(e, mark, i, u->pod, 1))
            continue; /* the eviction of a bind made in this same log */
        if (u->bind) {
            if (log_has(e, i + 1, e->nlog, u->pod, 0))
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
            emit(e, GS_EV_EVICT, u->pod, u->by, p->reason, &u->pl);
            if (p->state == GS_TPOD_PENDING && (e->cfg.evict_ends_pod || p->foreign)) {
                end_evicted(e, u->pod);
            } else if (p->state == GS_TPOD_PENDING) {
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

/* Ends a running pod as SUCCEEDED and releases what it held; no event. */
static int finish_quiet(struct gs_engine *e, uint32_t pod, int64_t now_ms)
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
        gang_judge(e, p->gang); /* a finished member counts toward min_member */
    }
    if (p->foreign)
        for (int r = 0; r < GS_RES_COUNT; r++)
            e->foreign_alloc[r] -= p->r[r];
    if (p->foreign)
        e->capacity_gen = 0;
    return GS_OK;
}

int gs_engine_finish(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    int err = finish_quiet(e, pod, now_ms);
    if (err)
        return err;
    e->now_ms = now_ms;
    emit(e, GS_EV_FINISH, pod, NO_ID, GS_EVICT_NONE, &e->p[pod].pl);
    return GS_OK;
}

int gs_engine_delete(struct gs_engine *e, uint32_t pod, int64_t now_ms)
{
    if (pod >= e->np)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    bool was_running = p->state == GS_TPOD_RUNNING;
    if (was_running) {
        int err = finish_quiet(e, pod, now_ms);
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
    e->now_ms = now_ms;
    emit(e, GS_EV_DELETE, pod, NO_ID, GS_EVICT_NONE, was_running ? &p->pl : NULL);
    /* A gang that lost a running member below min_member cannot go on: its other running
     * members go back to pending, whole. */
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        gang_judge(e, p->gang); /* one member fewer can only make it fit */
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

/* What the queues share: the cluster's usable capacity less what foreign pods hold. */
static void cluster_capacity(const struct gs_engine *e, int64_t cap[GS_RES_COUNT])
{
    gs_cluster_capacity(e->c, &cap[GS_RES_CPU], &cap[GS_RES_MEM], &cap[GS_RES_GPU]);
    for (int r = 0; r < GS_RES_COUNT; r++) {
        cap[r] -= e->foreign_alloc[r];
        if (cap[r] < 0)
            cap[r] = 0;
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

/* ---- why pending -------------------------------------------------------------------------- */

/* The queue-limit reason of a pod that within_limits() refuses; false if it is within them. */
static bool quota_reason(const struct gs_engine *e, const struct tpod *p, char *buf, size_t cap)
{
    for (uint32_t a = p->queue; a != GS_QUEUE_ROOT && a != NO_ID; a = e->q[a].parent) {
        const struct queue *q = &e->q[a];
        for (int r = 0; r < GS_RES_COUNT; r++) {
            char amt[64];
            if (q->limit[r] != GS_UNLIMITED && q->alloc[r] + p->r[r] > q->limit[r]) {
                fmt_amount(amt, sizeof(amt), r, q->limit[r]);
                (void)snprintf(buf, cap, "queue %s is at its limit of %s", q->name, amt);
                return true;
            }
            if (q->weight <= 0 && q->quota[r] != GS_UNLIMITED && p->r[r] > 0 &&
                q->alloc[r] + p->r[r] > q->quota[r]) {
                fmt_amount(amt, sizeof(amt), r, q->quota[r]);
                (void)snprintf(buf, cap,
                               "queue %s is at its quota of %s and may not borrow "
                               "(overQuotaWeight 0)",
                               q->name, amt);
                return true;
            }
        }
    }
    return false;
}

static bool within_limits(const struct gs_engine *e, const struct tpod *p);

/*
 * Records why a pod that was tried is still pending, and emits UNSCHEDULABLE when the reason
 * differs from the one it had: a queue limit, else the per-filter counts (explain.h), with the
 * gang named for a gang member.
 */
static int note_unschedulable(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    /* No node changed (no bind, release, label, taint, cordon, health or capacity change) since
     * this pod was last judged: the reason is the same, and judging every node again (O(nodes))
     * would be wasted. Queue books change only with binds and releases, which change nodes. */
    uint64_t stamp = gs_cluster_changes(e->c);
    if (p->reason_text && p->explained_at == stamp)
        return GS_OK;
    p->explained_at = stamp;
    char buf[1024];
    size_t len = 0;
    if (p->gang != GS_NO_GANG) {
        const struct gang *g = &e->g[p->gang];
        int w = snprintf(buf, sizeof(buf), "gang %s (min_member %u, %u running): ", g->name,
                         g->min_member, g->running);
        len = w > 0 && (size_t)w < sizeof(buf) ? (size_t)w : 0;
    }
    if (!quota_reason(e, p, buf + len, sizeof(buf) - len)) {
        struct gs_unsched u;
        int err = gs_explain(e->c, &p->req, p->fclass, &u);
        if (err)
            return err;
        if (u.fit > 0 && p->gang != GS_NO_GANG && e->g[p->gang].last_fit < e->g[p->gang].min_member)
            (void)snprintf(buf + len, sizeof(buf) - len, "%u of %u members fit",
                           e->g[p->gang].last_fit, e->g[p->gang].min_member);
        else if (u.fit > 0) /* it fits somewhere now: held back by order, a reservation, a gang */
            (void)snprintf(buf + len, sizeof(buf) - len, "%s",
                           p->gang != GS_NO_GANG ? "not every member of the minimum fits"
                                                 : "waiting behind a reservation");
        else
            (void)gs_explain_format(&u, &p->req, buf + len, sizeof(buf) - len);
    }
    if (p->reason_text && strcmp(p->reason_text, buf) == 0)
        return GS_OK;
    char *copy = dup_str(buf);
    if (!copy)
        return GS_ENOMEM;
    free(p->reason_text);
    p->reason_text = copy;
    emit_text(e, GS_EV_UNSCHEDULABLE, pod, NO_ID, GS_EVICT_NONE, NULL, copy);
    return GS_OK;
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
    int err = gs_sched_place_class(e->sched, &p->req, p->fclass, e->rng, &pl);
    if (err)
        return err;
    return do_bind(e, pod, &pl);
}

/* Whether pod c itself may be evicted: running, preemptible, past its queue's min_runtime_ms. */
static bool pod_evictable(const struct gs_engine *e, const struct tpod *c)
{
    return c->state == GS_TPOD_RUNNING && !c->foreign && e->pc[c->pclass].preemptible &&
           e->now_ms - c->start_ms >= e->q[c->queue].min_runtime_ms;
}

static int fair_res(const struct tpod *p)
{
    return p->r[GS_RES_GPU] > 0 ? GS_RES_GPU : GS_RES_CPU;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/*
 * Reclaim rule for one victim c of preemptor p, judged on what actually moves: `loss` is what
 * c's queue gives up on the fairness resource (c alone, or its whole gang), `gain` what p's queue
 * takes (p alone, or the members of p's gang that start with it), and `taken` what this search
 * has already taken from c's queue.
 */
static bool reclaim_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                       int64_t taken, int64_t loss, int64_t gain, bool whole_gang)
{
    if (c->queue == p->queue)
        return false;
    int r = fair_res(p);
    if (c->r[r] <= 0)
        return false;
    const struct queue *R = &e->q[p->queue], *V = &e->q[c->queue];
    int64_t av = V->alloc[r] - taken;
    /* The victim's queue is above its share and keeps it: reclaim takes only what a queue holds
     * beyond its fair share, so queues can never take from each other in turn (a loop of
     * reclaim and in-queue preemption was found by test_live_random). A gang that must go
     * whole may take its queue below its share, when the move still lowers unfairness. The
     * victim's queue keeps its quota; the reclaimer is below its share; and the move strictly
     * lowers |alloc - fair| summed over the two queues. */
    if (av <= V->fair[r] || (!whole_gang && av - loss < V->fair[r]) || av - loss < V->quota[r] ||
        R->alloc[r] >= R->fair[r])
        return false;
    int64_t before = abs64(R->alloc[r] - R->fair[r]) + abs64(av - V->fair[r]);
    int64_t after = abs64(R->alloc[r] + gain - R->fair[r]) + abs64(av - loss - V->fair[r]);
    return after < before;
}

/*
 * What the reclaiming queue gains on resource r when `pod` starts: the pod alone, or, while its
 * gang is below min_member, the pod and the pending members after it that the trial needs to
 * reach min_member. A gang starts all or nothing, so they move together and are judged together.
 */
static int64_t reclaim_gain(const struct gs_engine *e, uint32_t pod, int r)
{
    const struct tpod *p = &e->p[pod];
    int64_t gain = p->r[r];
    if (p->gang == GS_NO_GANG)
        return gain;
    const struct gang *g = &e->g[p->gang];
    uint32_t have = g->running + g->succeeded + 1;
    bool after = false;
    for (uint32_t m = 0; m < g->n_members && have < g->min_member; m++) {
        const struct tpod *o = &e->p[g->members[m]];
        if (g->members[m] == pod) {
            after = true;
        } else if (after && o->state == GS_TPOD_PENDING) {
            gain += o->r[r];
            have++;
        }
    }
    return gain;
}

static bool preempt_ok(const struct gs_engine *e, const struct tpod *p, const struct tpod *c)
{
    return c->queue == p->queue && prio_of(e, c) < prio_of(e, p);
}

/* What evicting one victim moves, in the current victim search (e->vic_stamp). */
struct victim_unit {
    bool whole;       /* its gang goes with it (it would drop below min_member) */
    uint32_t pods;    /* pods evicted */
    int64_t loss;     /* their requests on the preemptor's fairness resource */
    int32_t max_prio; /* highest priority among them */
};

/*
 * Works out what evicting c moves, given the victims this search has taken so far: c alone
 * while its gang keeps min_member running or finished without it, else c and every running
 * member of its gang not taken yet. A whole gang is a victim only if each of those members is
 * evictable and, for preemption, of lower priority than p. Returns false if c cannot go.
 */
static bool victim_unit(const struct gs_engine *e, const struct tpod *p, const struct tpod *c,
                        bool reclaim, struct victim_unit *u)
{
    int r = fair_res(p);
    *u = (struct victim_unit){false, 1, c->r[r], prio_of(e, c)};
    if (c->gang == GS_NO_GANG)
        return true;
    const struct gang *g = &e->g[c->gang];
    uint32_t taken = g->vic_stamp == e->vic_stamp ? g->vic_taken : 0;
    if (g->running - taken - 1 + g->succeeded >= g->min_member)
        return true;
    *u = (struct victim_unit){true, 0, 0, INT32_MIN};
    for (uint32_t m = 0; m < g->n_members; m++) {
        const struct tpod *o = &e->p[g->members[m]];
        if (o->state != GS_TPOD_RUNNING || o->vic_stamp == e->vic_stamp)
            continue;
        if (o != c && (!pod_evictable(e, o) || (!reclaim && !preempt_ok(e, p, o))))
            return false;
        u->pods++;
        u->loss += o->r[r];
        u->max_prio = prio_of(e, o) > u->max_prio ? prio_of(e, o) : u->max_prio;
    }
    return true;
}

/* Takes victim ci (alone or with its gang) in the current search: marks what moves and unbinds
 * from the cluster what of it sits on `node`, listing those in e->unb for the rebind. */
static void take_unit(struct gs_engine *e, uint32_t ci, bool whole, uint32_t node, uint32_t *nunb)
{
    struct tpod *c = &e->p[ci];
    struct gang *g = c->gang != GS_NO_GANG ? &e->g[c->gang] : NULL;
    if (g && g->vic_stamp != e->vic_stamp) {
        g->vic_stamp = e->vic_stamp;
        g->vic_taken = 0;
    }
    bool all = whole && g; /* only a gang member goes whole */
    uint32_t n = all ? g->n_members : 1;
    for (uint32_t m = 0; m < n; m++) {
        uint32_t oi = all ? g->members[m] : ci;
        struct tpod *o = &e->p[oi];
        if (o->state != GS_TPOD_RUNNING || o->vic_stamp == e->vic_stamp)
            continue;
        o->vic_stamp = e->vic_stamp;
        if (g)
            g->vic_taken++;
        if (o->pl.node != node)
            continue;
        (void)gs_cluster_unbind(e->c, &o->req, &o->pl);
        e->unb[(*nunb)++] = oi;
    }
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
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
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

/* Victim order on a node: lowest priority, then newest: shortest running (latest start), then
 * latest created (highest id), so a gang above min_member loses its newest members first. */
static void victim_key(const struct gs_engine *e, uint32_t pod, struct sort_key *k)
{
    const struct tpod *p = &e->p[pod];
    *k = (struct sort_key){e->pc[p->pclass].value, -p->start_ms, -(int64_t)pod, pod};
}

/*
 * Finds the cheapest set of victims that lets pod fit on one node: fewest pods evicted (a
 * victim's gang counted when it goes whole), then lowest highest priority, then node rank order
 * (node index). Victims are tried greedily in victim order on each node that could host the pod.
 * Never a member of pod's own gang, nor a pod bound earlier in the same trial. Returns true and
 * fills *best, leaving the victims' ids in e->cand[0..best->n).
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
    int64_t gain = reclaim ? reclaim_gain(e, pod, fair_res(p)) : 0;
    *best = (struct victim_set){0, 0, 0, 0};
    uint32_t *bestv = NULL;
    uint32_t bestv_cap = 0;
    for (uint32_t n = 0; n < nn && n < e->nodes_cap; n++) {
        uint32_t k = e->node_npods[n];
        if (k == 0)
            continue;
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        if (!gs_filter_pass(e->c, p->fclass, n))
            continue; /* cordoned, tainted or not selected: victims there would not help */
        if (p->req.num_gpu && (nd->gpu_count < p->req.num_gpu ||
                               (p->req.gpu_model_mask != GS_MODEL_ANY &&
                                !(p->req.gpu_model_mask & (UINT64_C(1) << (nd->model_id & 63))))))
            continue;
        if (grow((void **)&e->cand, &e->ncand_cap, k, sizeof(uint32_t)) != GS_OK ||
            grow((void **)&e->unb, &e->unb_cap, k, sizeof(uint32_t)) != GS_OK ||
            grow((void **)&e->vloss, &e->vloss_cap, k, sizeof(int64_t)) != GS_OK)
            break;
        e->vic_stamp++;
        uint32_t nc = 0;
        for (uint32_t i = 0; i < k; i++) {
            uint32_t ci = e->node_pods[n][i];
            const struct tpod *c = &e->p[ci];
            struct victim_unit u;
            if (!pod_evictable(e, c) || (c->gang != GS_NO_GANG && c->gang == p->gang) ||
                c->bind_trial == e->trial || !victim_unit(e, p, c, reclaim, &u))
                continue;
            /* The rules with nothing taken yet are necessary for any set containing c: taking
             * more only lowers the victim queue's allocation and grows what a victim moves. */
            if (reclaim ? reclaim_ok(e, p, c, 0, u.loss, gain, u.whole) : preempt_ok(e, p, c))
                e->cand[nc++] = ci;
        }
        if (nc == 0)
            continue;
        if (sort_pods(e, e->cand, nc, victim_key) != GS_OK)
            break;
        /* Greedy: take victims in order until the pod fits, each judged on what it moves. */
        uint32_t used = 0, count = 0, nunb = 0;
        int32_t maxp = INT32_MIN;
        bool fits = false;
        for (uint32_t i = 0; i < nc && !fits; i++) {
            struct tpod *c = &e->p[e->cand[i]];
            struct victim_unit u;
            if (c->vic_stamp == e->vic_stamp || !victim_unit(e, p, c, reclaim, &u))
                continue; /* gone with its gang already, or its gang cannot go */
            if (reclaim) {
                int64_t taken = 0;
                for (uint32_t j = 0; j < used; j++)
                    if (e->p[e->cand[j]].queue == c->queue)
                        taken += e->vloss[j];
                if (!reclaim_ok(e, p, c, taken, u.loss, gain, u.whole))
                    continue;
            }
            take_unit(e, e->cand[i], u.whole, n, &nunb);
            uint32_t tmp = e->cand[used];
            e->cand[used] = e->cand[i];
            e->cand[i] = tmp;
            e->vloss[used] = u.loss;
            used++;
            count += u.pods;
            maxp = u.max_prio > maxp ? u.max_prio : maxp;
            fits = gs_node_fits(nd, &p->req);
        }
        if (fits && used > 1) {
            /* Reprieve, as kube-scheduler does: give back, most valuable first, each victim
             * the pod fits without (one on an unhealthy GPU frees nothing usable). Only plain
             * pods: a gang member stays with the unit it was taken in. */
            uint32_t kept = 0;
            for (uint32_t i = used; i-- > 0;) {
                struct tpod *c = &e->p[e->cand[i]];
                if (c->gang != GS_NO_GANG)
                    continue;
                (void)gs_cluster_adopt(e->c, &c->req, &c->pl);
                if (!gs_node_fits(nd, &p->req)) {
                    (void)gs_cluster_unbind(e->c, &c->req, &c->pl);
                    continue;
                }
                for (uint32_t j = 0; j < nunb; j++) /* bound again: not restored below */
                    if (e->unb[j] == e->cand[i]) {
                        e->unb[j] = e->unb[--nunb];
                        break;
                    }
                e->cand[i] = NO_ID;
            }
            count = 0;
            maxp = INT32_MIN;
            for (uint32_t i = 0; i < used; i++) { /* the victims left, in victim order */
                if (e->cand[i] == NO_ID)
                    continue;
                const struct tpod *c = &e->p[e->cand[i]];
                struct victim_unit u;
                e->cand[kept] = e->cand[i];
                e->vloss[kept++] = e->vloss[i];
                if (victim_unit(e, p, c, reclaim, &u)) {
                    count += u.pods;
                    maxp = u.max_prio > maxp ? u.max_prio : maxp;
                } else {
                    count += 1;
                    maxp = prio_of(e, c) > maxp ? prio_of(e, c) : maxp;
                }
            }
            used = kept;
        }
        for (uint32_t i = nunb; i-- > 0;) {
            struct tpod *c = &e->p[e->unb[i]];
            (void)gs_cluster_adopt(e->c, &c->req, &c->pl); /* exact restore */
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

/* Evicts a victim and, when that leaves its gang below min_member (finished members count),
 * the gang's other running members: the same choice victim_unit() made in the search. */
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
    if (g->running + g->succeeded >= g->min_member)
        return GS_OK;
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
    e->trial++;
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
        bool short_gpu = gpu_need > e->capacity[GS_RES_GPU] - gs_cluster_gpu_milli_used(e->c);
        uint32_t slots = gang_slots(e, members, nm);
        if (short_gpu || slots < need) {
            struct gang *sg = &e->g[e->p[head].gang];
            sg->last_fit = sg->running + sg->succeeded + (slots < need ? slots : need - 1);
            return GS_EUNSCHEDULABLE;
        }
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
    /* Judged on the gang's state, not on `placed`: a member placed and then displaced inside
     * the trial must not count. */
    struct gang *g = &e->g[e->p[head].gang];
    if (placed < need || (need == 0 && placed == 0) || g->running + g->succeeded < g->min_member) {
        if (mode == 0) /* running (finished ones count) before the rollback takes them back */
            g->last_fit = g->running + g->succeeded;
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
    *k = (struct sort_key){p->start_ms + p->est_ms, 0, 0, pod};
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
        gang_judge(e, gi);
    }
}

/* The next job of a leaf queue: the best head among its flavors not blocked in this cycle. */
static uint32_t queue_next(struct gs_engine *e, struct queue *q, uint32_t *flavor)
{
    if (q->hc_ver == q->ver && q->hc_ver != 0 && (q->hc_cycle == e->cycle || !q->hc_skipped)) {
        if (q->hc_pod == NO_ID)
            return NO_ID;
        const struct tpod *cp = &e->p[q->hc_pod];
        if (cp->state == GS_TPOD_PENDING && cp->seq == q->hc_seq) {
            *flavor = q->hc_flavor;
            return q->hc_pod;
        }
    }
    uint32_t best = NO_ID;
    bool skipped = false;
    struct heap_ent bh = {0};
    for (uint32_t f = 0; f < q->n_flavors; f++) {
        struct flavor_queue *fq = &q->flavors[f];
        if (fq->blocked_cycle == e->cycle) {
            skipped = true;
            continue;
        }
        uint32_t h = flavor_head(e, fq);
        if (h == NO_ID)
            continue;
        if (best == NO_ID || heap_before(&fq->heap[0], &bh)) {
            best = h;
            bh = fq->heap[0];
            *flavor = f;
        }
    }
    q->ver += q->ver == 0; /* 0 means "never cached" */
    q->hc_ver = q->ver;
    q->hc_cycle = e->cycle;
    q->hc_skipped = skipped;
    q->hc_pod = best;
    q->hc_flavor = best == NO_ID ? 0 : *flavor;
    q->hc_seq = best == NO_ID ? 0 : e->p[best].seq;
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
    if (e->capacity_gen != gs_cluster_capacity_gen(e->c)) {
        cluster_capacity(e, e->capacity); /* O(nodes), only when capacity may have changed */
        e->capacity_gen = gs_cluster_capacity_gen(e->c);
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
        e->q[qbest].ver++;
        struct tpod *hp = &e->p[head];
        if (hp->gang != GS_NO_GANG) {
            /* A refused gang is not tried (it cannot fit) and blocks nothing behind it. */
            if (e->g[hp->gang].refused || e->g[hp->gang].tried_cycle == e->cycle) {
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
        if ((err = note_unschedulable(e, head)) != GS_OK)
            break;
        if (e->cfg.backfill && fq->bf_cycle != e->cycle) {
            /* The first job of this flavor that cannot start gets the reservation. */
            fq->bf_cycle = e->cycle;
            fq->bf_tries = 0;
            if ((err = reserve(e, head)) != GS_OK)
                break;
        } else if (!e->cfg.backfill || ++fq->bf_tries >= BACKFILL_DEPTH) {
            fq->blocked_cycle = e->cycle;
            e->q[qbest].ver++;
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
            if (q->flavors[f].mask != mask || q->flavors[f].fclass != p->fclass)
                continue;
            q->ver++;
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

uint32_t gs_engine_gang_count(const struct gs_engine *e)
{
    return e->ng;
}

int gs_engine_gang_info(const struct gs_engine *e, uint32_t id, struct gs_gang_info *out)
{
    if (id >= e->ng)
        return GS_EINVAL;
    const struct gang *g = &e->g[id];
    out->name = g->name;
    out->min_member = g->min_member;
    out->members = g->n_members;
    out->pending = g->pending;
    out->running = g->running;
    out->succeeded = g->succeeded;
    out->started = g->started;
    out->refused = g->refused;
    out->reason = g->reason;
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
    out->uid = p->uid;
    out->ns = p->ns;
    out->filter_class = p->fclass;
    out->adopted = p->adopted;
    out->foreign = p->foreign;
    out->reason = p->reason_text;
    return p->forgotten && !p->name ? GS_ENOENT : GS_OK;
}

int gs_engine_check(const struct gs_engine *e, char *msg, size_t cap)
{
    int err = GS_EINVAL;
    uint32_t nn = gs_cluster_node_count(e->c);
    int32_t *used = calloc((size_t)(nn ? nn : 1) * GS_NODE_GPUS_MAX, sizeof(*used));
    int64_t *qalloc = calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qalloc));
    int64_t *qdem = calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qdem));
    int64_t *qadopt = calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qadopt));
    uint32_t *qpend = calloc(e->nq, sizeof(*qpend)), *qrun = calloc(e->nq, sizeof(*qrun));
    uint64_t evictions = 0;
    if (!used || !qalloc || !qdem || !qadopt || !qpend || !qrun) {
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
            for (int r = 0; r < GS_RES_COUNT; r++) {
                qalloc[a * GS_RES_COUNT + r] += p->r[r];
                if (p->adopted)
                    qadopt[a * GS_RES_COUNT + r] += p->r[r];
            }
        for (uint32_t g = 0; g < p->pl.num_gpu; g++)
            used[p->pl.node * GS_NODE_GPUS_MAX + p->pl.gpu_index[g]] += p->pl.gpu_milli;
    }
    if (evictions + e->evictions_reused != e->evictions_total) {
        (void)snprintf(msg, cap, "%llu evictions recorded on pods, %llu made",
                       (unsigned long long)evictions, (unsigned long long)e->evictions_total);
        goto out;
    }
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        if (!nd->present) {
            if (n < e->nodes_cap && e->node_npods[n] > 0) {
                (void)snprintf(msg, cap, "node slot %u is free but holds %u pods", n,
                               e->node_npods[n]);
                goto out;
            }
            continue;
        }
        for (uint32_t g = 0; g < nd->gpu_count; g++) {
            int32_t u = used[n * GS_NODE_GPUS_MAX + g];
            const struct gs_gpu *gpu = &nd->gpus[g];
            if (u > gpu->gpu_milli || u != gpu->gpu_milli_used || gpu->gpu_milli_free < 0 ||
                (!gpu->healthy && gpu->gpu_milli_free != 0)) {
                (void)snprintf(
                    msg, cap,
                    "node %s GPU %u: pods hold %d milli, the cluster says %d of %d (%d free)",
                    nd->name, g, u, gpu->gpu_milli_used, gpu->gpu_milli, gpu->gpu_milli_free);
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
            /* Adopted pods may put a queue over its limit (they run already); what the engine
             * bound itself never is. */
            int64_t own = q->alloc[r] - qadopt[qi * GS_RES_COUNT + r];
            if (q->limit[r] != GS_UNLIMITED &&
                (own > q->limit[r] ||
                 (qadopt[qi * GS_RES_COUNT + r] == 0 && q->alloc[r] > q->limit[r]))) {
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
        uint32_t run = 0, done = 0, pend = 0, adopted = 0;
        for (uint32_t m = 0; m < g->n_members; m++) {
            enum gs_tpod_state s = e->p[g->members[m]].state;
            run += s == GS_TPOD_RUNNING;
            done += s == GS_TPOD_SUCCEEDED;
            pend += s == GS_TPOD_PENDING;
            adopted += s == GS_TPOD_RUNNING && e->p[g->members[m]].adopted;
        }
        if (run != g->running || done != g->succeeded || pend != g->pending) {
            (void)snprintf(msg, cap, "gang %s counts disagree with its members", g->name);
            goto out;
        }
        /* Members that were already running when handed over (adopt) are what the cluster
         * has, not a placement of ours: a gang may run below its minimum only through them. */
        if (run > adopted && run + done < g->min_member) {
            (void)snprintf(msg, cap, "gang %s runs %u of min_member %u", g->name, run,
                           g->min_member);
            goto out;
        }
        if (g->refused && run > 0) {
            (void)snprintf(msg, cap, "gang %s is refused but runs %u members", g->name, run);
            goto out;
        }
    }
    err = GS_OK;
out:
    free(used);
    free(qalloc);
    free(qdem);
    free(qadopt);
    free(qpend);
    free(qrun);
    return err;
}

/* ---- the live cluster: adopt, forget, handles, node removal ------------------------------- */

/* GPUs for an adopted pod whose GPUs are unknown: the lowest-indexed healthy GPUs that can take
 * it (untouched ones for whole GPUs, the first with room for a fraction). */
static bool pick_unknown_gpus(const struct gs_node *n, const struct gs_pod_req *req,
                              struct gs_placement *pl)
{
    pl->num_gpu = 0;
    for (uint32_t g = 0; g < n->gpu_count && pl->num_gpu < req->num_gpu; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (!gpu->healthy)
            continue;
        bool ok = req->gpu_milli >= GS_GPU_MILLI
                      ? gpu->gpu_milli_used == 0
                      : gpu->gpu_milli - gpu->gpu_milli_used >= req->gpu_milli;
        if (ok)
            pl->gpu_index[pl->num_gpu++] = (uint8_t)g;
    }
    pl->gpu_milli = req->gpu_milli;
    return pl->num_gpu == req->num_gpu;
}

int gs_engine_adopt(struct gs_engine *e, const struct gs_tpod_spec *spec,
                    const struct gs_pod_ident *ident, const struct gs_placement *pl,
                    int64_t start_ms, uint32_t *id)
{
    bool foreign = ident && ident->foreign;
    struct gs_tpod_spec sp = *spec;
    if (foreign) {
        sp.gang = GS_NO_GANG; /* another scheduler's pod belongs to none of our gangs or queues */
    } else if (!spec_ok(e, &sp)) {
        return GS_EINVAL;
    }
    if (foreign &&
        (sp.req.cpu_milli < 0 || sp.req.mem_mib < 0 || sp.req.num_gpu > GS_NODE_GPUS_MAX ||
         (sp.req.num_gpu && (sp.req.gpu_milli <= 0 || sp.req.gpu_milli > GS_GPU_MILLI))))
        return GS_EINVAL;
    const struct gs_node *n = gs_cluster_node(e->c, pl->node);
    if (!n || !n->present)
        return GS_EINVAL;
    struct gs_placement where = *pl;
    if (sp.req.num_gpu == 0) {
        where.num_gpu = 0;
        where.gpu_milli = 0;
    } else if (where.num_gpu == 0 && !pick_unknown_gpus(n, &sp.req, &where)) {
        return GS_EINVAL; /* no GPUs left to charge it to: an over-commit */
    }
    int err = ensure_nodes(e);
    if (err)
        return err;
    if ((err = grow((void **)&e->node_pods[where.node], &e->node_cappods[where.node],
                    e->node_npods[where.node] + 1, sizeof(uint32_t))) != GS_OK)
        return err;
    uint32_t pi;
    if (foreign) {
        /* new_pod() wants a leaf queue; give it the first one and move the pod to the root. */
        struct gs_tpod_spec tmp = sp;
        tmp.queue = GS_QUEUE_ROOT;
        tmp.priority_class = 0;
        if (e->npc == 0)
            return GS_EINVAL; /* the engine needs one PriorityClass for any pod */
        err = new_pod(e, &tmp, ident, start_ms, &pi);
    } else {
        err = new_pod(e, &sp, ident, start_ms, &pi);
    }
    if (err)
        return err;
    struct tpod *p = &e->p[pi];
    if (gs_cluster_adopt(e->c, &p->req, &where) != GS_OK) {
        drop_new_pod(e, pi);
        return GS_EINVAL;
    }
    p->pl = where;
    p->state = GS_TPOD_RUNNING;
    p->start_ms = start_ms;
    p->adopted = true;
    p->foreign = foreign;
    (void)node_list_add(e, pi); /* capacity ensured above */
    struct queue *q = &e->q[p->queue];
    q->leaf_used = q->leaf_used || !foreign;
    q->running++;
    account(e, p->queue, 0, p->r, +1);
    account(e, p->queue, 1, p->r, +1);
    if (foreign) {
        for (int r = 0; r < GS_RES_COUNT; r++)
            e->foreign_alloc[r] += p->r[r];
        e->capacity_gen = 0;
    }
    if (p->gang != GS_NO_GANG) {
        struct gang *g = &e->g[p->gang];
        g->running++;
        if (g->running + g->succeeded >= g->min_member)
            g->started = true;
    }
    e->mutations++;
    if (id)
        *id = pi;
    emit(e, GS_EV_ADOPT, pi, NO_ID, GS_EVICT_NONE, &p->pl);
    return GS_OK;
}

int gs_engine_forget(struct gs_engine *e, uint32_t pod)
{
    if (pod >= e->np)
        return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    if (p->forgotten || (p->state != GS_TPOD_SUCCEEDED && p->state != GS_TPOD_FAILED))
        return GS_EINVAL;
    bool reuse = p->gang == GS_NO_GANG;
    if (reuse && grow((void **)&e->free_pods, &e->capfree, e->nfree + 1, sizeof(uint32_t)))
        return GS_ENOMEM;
    if (p->uid)
        *uid_slot(e, p->uid, false) = UID_TOMB;
    gs_filter_release(e->c, p->fclass);
    p->fclass = GS_FILTER_DEFAULT;
    free(p->uid);
    free(p->ns);
    free(p->reason_text);
    p->uid = p->ns = p->reason_text = NULL;
    p->forgotten = true;
    if (reuse) {
        /* The slot is free; the name goes too, so pod_info reports GS_ENOENT. */
        free(p->name);
        p->name = NULL;
        e->free_pods[e->nfree++] = pod;
    }
    return GS_OK;
}

uint64_t gs_engine_pod_handle(const struct gs_engine *e, uint32_t pod)
{
    uint32_t gen = pod < e->np ? e->p[pod].gen : 0;
    return (uint64_t)gen << 32 | pod;
}

int gs_engine_pod_resolve(const struct gs_engine *e, uint64_t handle, uint32_t *pod)
{
    uint32_t i = (uint32_t)handle;
    if (i >= e->np || e->p[i].gen != handle >> 32 || (e->p[i].forgotten && !e->p[i].name))
        return GS_ENOENT;
    *pod = i;
    return GS_OK;
}

const char *gs_engine_pod_reason(const struct gs_engine *e, uint32_t pod)
{
    return pod < e->np ? e->p[pod].reason_text : NULL;
}

int gs_engine_remove_node(struct gs_engine *e, uint32_t node, int64_t now_ms)
{
    const struct gs_node *n = gs_cluster_node(e->c, node);
    if (!n || !n->present)
        return GS_EINVAL;
    int err = ensure_nodes(e);
    if (err)
        return err;
    e->now_ms = now_ms;
    uint32_t mark = e->nlog;
    /* Victims first, then the gangs they leave below their minimum. */
    while (!err && e->node_npods[node] > 0)
        err = do_evict(e, e->node_pods[node][e->node_npods[node] - 1], GS_EVICT_NODE_LOST, NO_ID);
    for (uint32_t i = mark; !err && i < e->nlog; i++) {
        const struct tpod *p = &e->p[e->log[i].pod];
        if (p->gang == GS_NO_GANG)
            continue;
        struct gang *g = &e->g[p->gang];
        if (g->running == 0 || g->running + g->succeeded >= g->min_member)
            continue;
        for (uint32_t m = 0; m < g->n_members && !err; m++)
            if (e->p[g->members[m]].state == GS_TPOD_RUNNING)
                err = do_evict(e, g->members[m], GS_EVICT_GANG, NO_ID);
        g->started = false;
    }
    if (err) {
        rollback(e, mark);
        return err;
    }
    /* Foreign pods on the node leave the root's books as they go. */
    for (uint32_t i = mark; i < e->nlog; i++) {
        struct tpod *p = &e->p[e->log[i].pod];
        if (p->foreign) {
            for (int r = 0; r < GS_RES_COUNT; r++)
                e->foreign_alloc[r] -= p->r[r];
            e->capacity_gen = 0;
        }
    }
    /* Events first, while the node still has its name; then the node goes. Removing a node
     * with no pods left cannot fail. */
    err = commit(e, mark, false);
    int rm = gs_cluster_remove_node(e->c, node);
    return err ? err : rm;
}
