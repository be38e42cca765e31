/*
 * The multi-tenant engine: queues, fair share, PriorityClasses, gangs, preemption, reclaim and
 * backfill over the placement core. See include/gpusched/tenant.h for the contract and
 * docs/internals/tenancy.md for the rules; src/core/tenant_int.h for the engine's state and how
 * it is split across files.
 *
 * This file: creating and freeing the engine, queues and PriorityClasses, and reading state
 * back (the info calls and the invariant checker gs_engine_check()).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/charge.h"
#include "gpusched/err.h"
#include "gpusched/names.h"
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"
#include "tenant_int.h"

/* ---- small helpers --------------------------------------------------------------------------- */

char *gs__dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = gs__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int gs__grow(void **ptr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return GS_OK;
    uint32_t nc = *cap ? *cap : 8;
    while (nc < need)
        nc *= 2;
    void *np = gs__realloc(*ptr, (size_t)nc * elem);
    if (!np)
        return GS_ENOMEM;
    *ptr = np;
    *cap = nc;
    return GS_OK;
}

/* ---- engine setup ---------------------------------------------------------------------------- */

int gs_engine_new(struct gs_cluster *c, const struct gs_engine_config *cfg, struct gs_engine **out)
{
    *out = NULL;
    if (cfg->mig_repartition_ms < 0)
        return GS_EINVAL;
    struct gs_engine *e = gs__calloc(1, sizeof(*e));
    if (!e)
        return GS_ENOMEM;
    e->c = c;
    e->cfg = *cfg;
    struct gs_sched_config sc = {cfg->policy ? cfg->policy : "bestfit", cfg->node_rank,
                                 cfg->workload, cfg->nodes_to_find};
    int err = gs_sched_new(c, &sc, &e->sched);
    if (err) {
        gs__free(e);
        return err;
    }
    /* The root queue: everything, unlimited. */
    e->q = gs__calloc(8, sizeof(*e->q));
    e->capq = 8;
    e->m_alloc = gs__calloc((size_t)8 * GS_MODELS_MAX, sizeof(*e->m_alloc));
    e->m_alloc_capq = 8;
    if (!e->q || !e->m_alloc || !(e->q[0].name = gs__dup_str("root"))) {
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

struct gs_cluster *gs_engine_cluster(const struct gs_engine *e)
{
    return e->c;
}

void gs_engine_free(struct gs_engine *e)
{
    if (!e)
        return;
    for (uint32_t i = 0; i < e->nq; i++) {
        /* nq is 0 while q is NULL (calloc); the analyzer forgets that once &e->sched escapes. */
        /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
        gs__free(e->q[i].name);
        gs__free(e->q[i].mq);
        for (uint32_t f = 0; f < e->q[i].n_flavors; f++)
            gs__heap_fini(&e->q[i].flavors[f].heap);
        gs__free(e->q[i].flavors);
    }
    for (uint32_t i = 0; i < e->npc; i++)
        gs__free(e->pc[i].name);
    for (uint32_t i = 0; i < e->ng; i++) {
        gs__free(e->g[i].name);
        gs__free(e->g[i].members);
        gs__free(e->g[i].holds);
    }
    for (uint32_t i = 0; i < e->np; i++) {
        gs__free(e->p[i].name);
        gs__free(e->p[i].uid);
        gs__free(e->p[i].ns);
        gs__free(e->p[i].reason_text);
    }
    gs__free(e->uid_slots);
    gs__free(e->free_pods);
    for (uint32_t i = 0; i < e->nodes_cap; i++)
        gs__free(e->node_pods[i]);
    for (uint32_t i = 0; i < e->nresv; i++)
        gs__free(e->resv[i].nodes);
    gs__free(e->node_pods);
    gs__free(e->node_npods);
    gs__free(e->node_cappods);
    gs__free(e->q);
    gs__free(e->m_alloc);
    gs__free(e->m_demand);
    gs__free(e->m_fair);
    gs__free(e->pc);
    gs__free(e->g);
    gs__free(e->p);
    gs__free(e->log);
    gs__free(e->resv);
    gs__free(e->cand);
    gs__free(e->qdelta);
    gs__free(e->vloss);
    gs__free(e->unb);
    gs__free(e->vals);
    gs__free(e->end_order);
    gs__free(e->keys);
    gs__free(e->taken);
    gs__budget_free(e);
    gs_sched_free(e->sched);
    gs__free(e);
}

/* Queue and PriorityClass names: DNS-1123 subdomains of at most 253 characters, as Kubernetes
 * names them (the one rule, gs_name_is_dns1123_subdomain, that the queue config checks too). */
static bool valid_name(const char *name)
{
    return gs_name_is_dns1123_subdomain(name, strlen(name), NULL, 0);
}

int gs_engine_find_queue(const struct gs_engine *e, const char *name)
{
    for (uint32_t i = 0; i < e->nq; i++)
        if (strcmp(e->q[i].name, name) == 0)
            return (int)i;
    return -1;
}

const struct gs_model_quota *gs__queue_model(const struct queue *q, uint32_t model)
{
    for (uint32_t i = 0; i < q->n_mq; i++)
        if (q->mq[i].model == model)
            return &q->mq[i];
    return NULL;
}

/* The quota queue q has for model m: its entry's, else 0. */
static int64_t model_quota_of(const struct queue *q, uint32_t m)
{
    const struct gs_model_quota *mq = gs__queue_model(q, m);
    return mq ? mq->quota_milli : 0;
}

/*
 * Checks spec's per-model entries for queue `self` (NO_ID: a queue being added under
 * spec->parent): known, distinct models; 0 <= quota <= limit and quota within the overall GPU
 * limit; the siblings' quotas for a model within the parent's entry for it; and, for an update,
 * the children's quotas within the new entries and no limit below what the subtree holds.
 */
static bool models_ok(const struct gs_engine *e, const struct gs_queue_spec *spec, uint32_t self)
{
    if (spec->n_by_model > GS_MODELS_MAX || (spec->n_by_model > 0 && !spec->by_model))
        return false;
    const struct queue *par = &e->q[spec->parent];
    uint64_t seen = 0;
    for (uint32_t i = 0; i < spec->n_by_model; i++) {
        const struct gs_model_quota *m = &spec->by_model[i];
        if (m->model >= GS_MODELS_MAX || !gs_cluster_model_name(e->c, m->model) ||
            (seen & (UINT64_C(1) << m->model)) || m->quota_milli < 0 ||
            m->limit_milli < m->quota_milli ||
            (spec->limit[GS_RES_GPU] != GS_UNLIMITED && m->quota_milli > spec->limit[GS_RES_GPU]))
            return false;
        seen |= UINT64_C(1) << m->model;
        const struct gs_model_quota *pm = gs__queue_model(par, m->model);
        if (pm) {
            int64_t sum = m->quota_milli;
            for (uint32_t ch = par->first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
                sum += ch == self ? 0 : model_quota_of(&e->q[ch], m->model);
            if (sum > pm->quota_milli)
                return false;
        }
        if (self == NO_ID)
            continue;
        int64_t sum = 0;
        for (uint32_t ch = e->q[self].first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
            sum += model_quota_of(&e->q[ch], m->model);
        if (sum > m->quota_milli ||
            (m->limit_milli != GS_UNLIMITED &&
             e->m_alloc[(size_t)self * GS_MODELS_MAX + m->model] > m->limit_milli))
            return false;
    }
    return true;
}

/* Copies spec's per-model entries into *out (NULL when there are none). */
static int copy_models(const struct gs_queue_spec *spec, struct gs_model_quota **out)
{
    *out = NULL;
    if (spec->n_by_model == 0)
        return GS_OK;
    *out = gs__malloc(spec->n_by_model * sizeof(**out));
    if (!*out)
        return GS_ENOMEM;
    memcpy(*out, spec->by_model, spec->n_by_model * sizeof(**out));
    return GS_OK;
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
    if (!models_ok(e, spec, NO_ID))
        return GS_EINVAL;
    int err = gs__grow((void **)&e->q, &e->capq, e->nq + 1, sizeof(*e->q));
    if (err)
        return err;
    if (e->capq > e->m_alloc_capq) {
        int64_t *ma = gs__realloc(e->m_alloc, (size_t)e->capq * GS_MODELS_MAX * sizeof(*ma));
        if (!ma)
            return GS_ENOMEM;
        memset(ma + (size_t)e->m_alloc_capq * GS_MODELS_MAX, 0,
               (size_t)(e->capq - e->m_alloc_capq) * GS_MODELS_MAX * sizeof(*ma));
        e->m_alloc = ma;
        e->m_alloc_capq = e->capq;
    }
    struct gs_model_quota *mq;
    if ((err = copy_models(spec, &mq)) != GS_OK)
        return err;
    char *name = gs__dup_str(spec->name);
    if (!name) {
        gs__free(mq);
        return GS_ENOMEM;
    }
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
    q->mq = mq;
    q->n_mq = spec->n_by_model;
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

int gs_engine_set_workload(struct gs_engine *e, const struct gs_workload *w)
{
    int err = gs_sched_set_workload(e->sched, w);
    if (err == GS_OK)
        e->cfg.workload = w;
    return err;
}

/* Sets a queue's quota and limit; what it holds above a lowered limit stays (over_limit). */
static void set_caps(struct gs_engine *e, uint32_t id, const int64_t quota[GS_RES_COUNT],
                     const int64_t limit[GS_RES_COUNT])
{
    struct queue *q = &e->q[id];
    for (int r = 0; r < GS_RES_COUNT; r++) {
        q->quota[r] = quota[r];
        q->limit[r] = limit[r];
        q->over_limit[r] = limit[r] != GS_UNLIMITED && q->alloc[r] > limit[r] ? q->alloc[r] : 0;
    }
}

/* Whether queue a is q or one of its ancestors. */
static bool queue_under(const struct gs_engine *e, uint32_t q, uint32_t a)
{
    for (; q != NO_ID; q = e->q[q].parent)
        if (q == a)
            return true;
    return false;
}

/* Caps of queue id changed: every gang below it is judged again (e->vals already holds the
 * largest gang, from its submissions), and its pending pods' reasons are worked out again at
 * the next cycle (gs__note_unschedulable() otherwise keeps them while no node changes). */
static void caps_changed(struct gs_engine *e, uint32_t id)
{
    for (uint32_t gi = 0; gi < e->ng; gi++)
        if (e->g[gi].n_members > 0 && queue_under(e, e->p[e->g[gi].members[0]].queue, id))
            gs__gang_judge(e, gi);
    for (uint32_t i = 0; i < e->np; i++)
        if (e->p[i].state == GS_TPOD_PENDING && queue_under(e, e->p[i].queue, id))
            e->p[i].explained_at = UINT64_MAX;
}

int gs_engine_update_queue(struct gs_engine *e, uint32_t id, const struct gs_queue_spec *spec)
{
    if (id == GS_QUEUE_ROOT || id >= e->nq || !spec->name ||
        strcmp(spec->name, e->q[id].name) != 0 || spec->parent != e->q[id].parent ||
        !(spec->over_quota_weight >= 0) || spec->min_runtime_ms < 0)
        return GS_EINVAL;
    const struct queue *q = &e->q[id], *par = &e->q[q->parent];
    for (int r = 0; r < GS_RES_COUNT; r++) {
        if (spec->quota[r] < 0 || spec->limit[r] < spec->quota[r])
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
    if (!models_ok(e, spec, id))
        return GS_EINVAL;
    struct gs_model_quota *mq;
    int err = copy_models(spec, &mq);
    if (err)
        return err;
    struct queue *w = &e->q[id];
    gs__free(w->mq);
    w->mq = mq;
    w->n_mq = spec->n_by_model;
    set_caps(e, id, spec->quota, spec->limit);
    w->deleted = false;
    w->weight = spec->over_quota_weight;
    w->min_runtime_ms = spec->min_runtime_ms;
    caps_changed(e, id);
    return GS_OK;
}

int gs_engine_delete_queue(struct gs_engine *e, uint32_t id)
{
    if (id == GS_QUEUE_ROOT || id >= e->nq)
        return GS_EINVAL;
    for (uint32_t ch = e->q[id].first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
        if (!e->q[ch].deleted)
            return GS_EINVAL;
    const int64_t zero[GS_RES_COUNT] = {0};
    set_caps(e, id, zero, zero); /* per-model entries stay: they count what its pods hold */
    e->q[id].deleted = true;
    caps_changed(e, id);
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
    int err = gs__grow((void **)&e->pc, &e->cappc, e->npc + 1, sizeof(*e->pc));
    if (err)
        return err;
    char *name = gs__dup_str(spec->name);
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

/* Adds sign x r to the allocation (which=0) or demand (which=1) of qi and its ancestors. */
void gs__account(struct gs_engine *e, uint32_t qi, int which, const int64_t r[], int sign)
{
    for (uint32_t a = qi; a != NO_ID; a = e->q[a].parent) {
        int64_t *v = which == 0 ? e->q[a].alloc : e->q[a].demand;
        for (int k = 0; k < GS_RES_COUNT; k++)
            v[k] += sign * r[k];
    }
}

/* The GPU model of a node with GPUs; -1 for a node without. */
int gs__model_of_node(const struct gs_engine *e, uint32_t node)
{
    const struct gs_node *nd = gs_cluster_node(e->c, node);
    return nd && nd->gpu_count > 0 && nd->model_id < GS_MODELS_MAX ? (int)nd->model_id : -1;
}

/* Adds sign x the pod's request to its queue's (and ancestors') allocation, and its GPU charge
 * to their books for the model of `node`, where it runs or ran. */
void gs__account_alloc(struct gs_engine *e, uint32_t pod, uint32_t node, int sign)
{
    const struct tpod *p = &e->p[pod];
    gs__account(e, p->queue, 0, p->r, sign);
    int m = p->r[GS_RES_GPU] > 0 ? gs__model_of_node(e, node) : -1;
    if (m < 0)
        return;
    for (uint32_t a = p->queue; a != NO_ID; a = e->q[a].parent)
        e->m_alloc[(size_t)a * GS_MODELS_MAX + (uint32_t)m] += sign * p->r[GS_RES_GPU];
}

/* Sets pod's GPU charge to gpu_milli, moving its queue's (and ancestors') demand with it. Its
 * allocation is not touched: callers change the charge only while the pod is off the books
 * (before gs__account_alloc(+1), after gs__account_alloc(-1)). */
static void set_gpu_charge(struct gs_engine *e, uint32_t pod, int64_t gpu_milli)
{
    struct tpod *p = &e->p[pod];
    int64_t delta[GS_RES_COUNT] = {0};
    delta[GS_RES_GPU] = gpu_milli - p->r[GS_RES_GPU];
    if (delta[GS_RES_GPU] == 0)
        return;
    gs__account(e, p->queue, 1, delta, +1);
    p->r[GS_RES_GPU] = gpu_milli;
}

/*
 * Re-charges pod, about to hold pl, exactly for the GPUs it lands on (issue 8: a memory share
 * of the GPU it lands on; the slots of that GPU's replicas; the slices of its MIG GPU). The
 * pending charge was an estimate made before the GPU was known. Milli pods keep their charge,
 * which does not depend on the GPU. Call before gs__account_alloc(+1).
 */
void gs__charge_landed(struct gs_engine *e, uint32_t pod, const struct gs_placement *pl)
{
    struct tpod *p = &e->p[pod];
    double landed;
    if (gs_req_kind(&p->req) != GS_REQ_MILLI &&
        gs_charge_placement(e->c, &p->req, pl, &landed) == GS_OK)
        set_gpu_charge(e, pod, gs_charge_milli(landed));
}

/*
 * Re-estimates the pending charge of every pending pod whose charge depends on the cluster's
 * GPUs (memory, slots; MIG for a profile no model had), after the GPUs may have changed (a
 * node added or removed, a health or mode change): a GPU with less memory than any before
 * would otherwise land a pod at more than the charge its queue's limits admitted. O(distinct
 * request shapes x GPUs + pending pods), only when gs_cluster_capacity_gen() or gs_filter_gen()
 * moved (the charge is over the GPUs of the nodes the pod's filter passes now). A gang whose
 * member changed charge is judged again against its queues' caps.
 */
void gs__charge_refresh_pending(struct gs_engine *e)
{
    /* Pending pods mostly share a few request shapes (the replicas of one workload), and each
     * gs_charge_request() of a memory or slot request reads every GPU: the answers of the
     * last REFRESH_SHAPES distinct shapes are kept for this refresh, so n pods of one shape
     * cost one scan, not n. */
    enum { REFRESH_SHAPES = 16 };
    struct {
        const struct gs_pod_req *req;
        double gpus;
        uint32_t fclass;
        int rc;
    } seen[REFRESH_SHAPES];
    uint32_t nseen = 0;
    for (uint32_t i = 0; i < e->np; i++) {
        struct tpod *p = &e->p[i];
        if (p->state != GS_TPOD_PENDING || p->forgotten || gs_req_kind(&p->req) == GS_REQ_MILLI)
            continue;
        uint32_t used = nseen < REFRESH_SHAPES ? nseen : REFRESH_SHAPES, k = 0;
        while (k < used && !(seen[k].fclass == p->fclass && gs_pod_req_equal(seen[k].req, &p->req)))
            k++;
        if (k == used) {
            k = nseen++ % REFRESH_SHAPES;
            seen[k].req = &p->req;
            seen[k].fclass = p->fclass;
            seen[k].rc = gs_charge_request_class(e->c, &p->req, p->fclass, &seen[k].gpus);
        }
        double gpus = seen[k].gpus;
        if (seen[k].rc != GS_OK)
            continue;
        int64_t was = p->pend_gpu_milli;
        p->pend_gpu_milli = gs_charge_milli(gpus);
        set_gpu_charge(e, i, p->pend_gpu_milli);
        if (p->gang != GS_NO_GANG && was != p->pend_gpu_milli)
            gs__gang_judge(e, p->gang); /* its least footprint changed with it */
    }
}

/* Puts pod's GPU charge back to its pending one, after gs__account_alloc(-1). */
void gs__charge_pending(struct gs_engine *e, uint32_t pod)
{
    set_gpu_charge(e, pod, e->p[pod].pend_gpu_milli);
}

/* Writes an amount of resource r for a reason text: "2 GPUs", "1.5 GPUs", "4000 milli-CPU". */
void gs__fmt_amount(char *buf, size_t cap, int r, int64_t v)
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

int gs__ensure_nodes(struct gs_engine *e)
{
    uint32_t n = gs_cluster_node_count(e->c);
    if (n <= e->nodes_cap)
        return GS_OK;
    uint32_t cap = e->nodes_cap ? e->nodes_cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t **np = gs__realloc(e->node_pods, cap * sizeof(*np));
    if (np)
        e->node_pods = np;
    uint32_t *nn = gs__realloc(e->node_npods, cap * sizeof(*nn));
    if (nn)
        e->node_npods = nn;
    uint32_t *nc = gs__realloc(e->node_cappods, cap * sizeof(*nc));
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

/* ---- reading state --------------------------------------------------------------------------- */

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

int gs_engine_queue_model_info(const struct gs_engine *e, uint32_t id, uint32_t model,
                               struct gs_queue_model_info *out)
{
    if (id >= e->nq || model >= GS_MODELS_MAX)
        return GS_EINVAL;
    const struct gs_model_quota *mq = gs__queue_model(&e->q[id], model);
    out->bounded = mq != NULL;
    out->quota_milli = mq ? mq->quota_milli : 0;
    out->limit_milli = mq ? mq->limit_milli : GS_UNLIMITED;
    out->allocated_milli = e->m_alloc[(size_t)id * GS_MODELS_MAX + model];
    size_t k = (size_t)id * GS_MODELS_MAX + model;
    out->fair_known = e->m_fair_on;
    out->demand_milli = e->m_fair_on ? e->m_demand[k] : 0;
    out->fair_milli = e->m_fair_on ? e->m_fair[k] : 0;
    return GS_OK;
}

int gs_engine_queue_path(const struct gs_engine *e, uint32_t id, char *buf, size_t cap,
                         const char **top)
{
    if (top)
        *top = NULL;
    if (cap)
        buf[0] = '\0';
    if (id >= e->nq || cap == 0)
        return GS_EINVAL;
    /* Parents have lower ids than their children (added first), so the walk ends; the chain is
     * reversed in place by writing from the top down, one level per pass. */
    uint32_t depth = 0;
    for (uint32_t q = id; q != GS_QUEUE_ROOT; q = e->q[q].parent)
        depth++;
    size_t len = 0;
    for (uint32_t level = depth; level > 0; level--) {
        uint32_t q = id; /* the ancestor `level - 1` steps above the top: walk up from id */
        for (uint32_t k = 1; k < level; k++)
            q = e->q[q].parent;
        if (level == depth && top)
            *top = e->q[q].name;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? "/" : "", e->q[q].name);
        if (w < 0 || (size_t)w >= cap - len) {
            buf[len] = '\0';
            return GS_EINVAL;
        }
        len += (size_t)w;
    }
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
    out->grace_ms = g->grace_ms;
    out->grace_until_ms = g->degraded_ms >= 0 ? g->degraded_ms + g->grace_ms : -1;
    out->holds = 0;
    for (uint32_t i = 0; i < g->n_holds; i++)
        out->holds += g->holds[i].state == HOLD_HELD;
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

/* What running pods and held gang capacity ask of one other resource on one node. */
static int64_t xres_held(const struct gs_engine *e, uint32_t node, uint32_t id)
{
    int64_t sum = 0;
    for (uint32_t i = 0; i < e->np; i++) {
        const struct tpod *p = &e->p[i];
        if (p->state != GS_TPOD_RUNNING || p->pl.node != node)
            continue;
        for (uint32_t r = 0; r < p->req.xres_count; r++)
            if (p->req.xres[r].id == id)
                sum += p->req.xres[r].qty;
    }
    for (uint32_t gi = 0; gi < e->ng; gi++)
        for (uint32_t k = 0; k < e->g[gi].n_holds; k++) {
            const struct gang_hold *h = &e->g[gi].holds[k];
            if (h->state != HOLD_HELD || h->pl.node != node)
                continue;
            for (uint32_t r = 0; r < h->req.xres_count; r++)
                if (h->req.xres[r].id == id)
                    sum += h->req.xres[r].qty;
        }
    return sum;
}

/* Each node's other resources in use equal what its pods (and gang holds) ask; none negative.
 * O(nodes x entries x pods) but only over nodes that list other resources. */
static int check_xres(const struct gs_engine *e, char *msg, size_t cap)
{
    uint32_t nn = gs_cluster_node_count(e->c);
    for (uint32_t i = 0; i < e->np; i++) { /* every resource a running pod asks is listed */
        const struct tpod *p = &e->p[i];
        if (p->state != GS_TPOD_RUNNING)
            continue;
        const struct gs_node *nd = gs_cluster_node(e->c, p->pl.node);
        for (uint32_t r = 0; r < p->req.xres_count; r++) {
            bool listed = false;
            for (uint32_t k = 0; k < nd->xres_count; k++)
                listed |= nd->xres[k].id == p->req.xres[r].id;
            if (!listed) {
                (void)snprintf(msg, cap, "pod %s holds %s on node %s, which does not list it",
                               p->name, gs_cluster_xres_name(e->c, p->req.xres[r].id), nd->name);
                return GS_EINVAL;
            }
        }
    }
    for (uint32_t n = 0; n < nn; n++) {
        const struct gs_node *nd = gs_cluster_node(e->c, n);
        for (uint32_t k = 0; nd->present && k < nd->xres_count; k++) {
            const struct gs_node_xres *x = &nd->xres[k];
            int64_t want = xres_held(e, n, x->id);
            if (x->used < 0 || x->allocatable < 0 || x->used != want) {
                (void)snprintf(msg, cap,
                               "node %s resource %s: pods hold %lld, the cluster says %lld of %lld",
                               nd->name, gs_cluster_xres_name(e->c, x->id), (long long)want,
                               (long long)x->used, (long long)x->allocatable);
                return GS_EINVAL;
            }
        }
    }
    return GS_OK;
}

/* Per-model books: each queue's m_alloc equals what its subtree's running pods hold on nodes of
 * each model, and no queue is above a model limit except by adopted pods. */
static int check_model_books(const struct gs_engine *e, char *msg, size_t cap)
{
    size_t n = (size_t)e->nq * GS_MODELS_MAX;
    int64_t *held = gs__calloc(n, sizeof(*held)), *adopted = gs__calloc(n, sizeof(*adopted));
    int err = GS_EINVAL;
    if (!held || !adopted) {
        (void)snprintf(msg, cap, "out of memory");
        err = GS_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < e->np; i++) {
        const struct tpod *p = &e->p[i];
        int m = p->state == GS_TPOD_RUNNING && p->r[GS_RES_GPU] > 0
                    ? gs__model_of_node(e, p->pl.node)
                    : -1;
        for (uint32_t a = p->queue; m >= 0 && a != NO_ID; a = e->q[a].parent) {
            held[(size_t)a * GS_MODELS_MAX + (uint32_t)m] += p->r[GS_RES_GPU];
            if (p->adopted)
                adopted[(size_t)a * GS_MODELS_MAX + (uint32_t)m] += p->r[GS_RES_GPU];
        }
    }
    for (uint32_t qi = 0; qi < e->nq; qi++) {
        const struct queue *q = &e->q[qi];
        for (uint32_t m = 0; m < GS_MODELS_MAX; m++) {
            size_t k = (size_t)qi * GS_MODELS_MAX + m;
            if (e->m_alloc[k] != held[k]) {
                (void)snprintf(msg, cap, "queue %s GPU model %u: books say %lld milli, pods %lld",
                               q->name, m, (long long)e->m_alloc[k], (long long)held[k]);
                goto out;
            }
        }
        for (uint32_t i = 0; i < q->n_mq; i++) {
            const struct gs_model_quota *mq = &q->mq[i];
            size_t k = (size_t)qi * GS_MODELS_MAX + mq->model;
            if (mq->limit_milli != GS_UNLIMITED && e->m_alloc[k] - adopted[k] > mq->limit_milli) {
                (void)snprintf(msg, cap,
                               "queue %s is above its limit for GPU model %s: %lld > %lld", q->name,
                               gs_cluster_model_name(e->c, mq->model), (long long)e->m_alloc[k],
                               (long long)mq->limit_milli);
                goto out;
            }
        }
    }
    err = GS_OK;
out:
    gs__free(held);
    gs__free(adopted);
    return err;
}

int gs_engine_check(const struct gs_engine *e, char *msg, size_t cap)
{
    int err = GS_EINVAL;
    uint32_t nn = gs_cluster_node_count(e->c);
    int32_t *used = gs__calloc((size_t)(nn ? nn : 1) * GS_NODE_GPUS_MAX, sizeof(*used));
    int64_t *qalloc = gs__calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qalloc));
    int64_t *qdem = gs__calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qdem));
    int64_t *qadopt = gs__calloc((size_t)e->nq * GS_RES_COUNT, sizeof(*qadopt));
    uint32_t *qpend = gs__calloc(e->nq, sizeof(*qpend)), *qrun = gs__calloc(e->nq, sizeof(*qrun));
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
        /* The GPU charge: the pending one while pending, exactly where it landed while
         * running (gs__charge_landed()); adopted pods were charged where they run too. */
        double landed;
        if (p->state == GS_TPOD_PENDING && p->r[GS_RES_GPU] != p->pend_gpu_milli) {
            (void)snprintf(msg, cap, "pod %u (%s) is pending at %lld milli-GPU, not its %lld", i,
                           p->name, (long long)p->r[GS_RES_GPU], (long long)p->pend_gpu_milli);
            goto out;
        }
        if (p->state == GS_TPOD_RUNNING && gs_req_kind(&p->req) != GS_REQ_MILLI &&
            gs_charge_placement(e->c, &p->req, &p->pl, &landed) == GS_OK &&
            gs_charge_milli(landed) != p->r[GS_RES_GPU]) {
            (void)snprintf(msg, cap, "pod %u (%s) is charged %lld milli-GPU, where it runs %lld", i,
                           p->name, (long long)p->r[GS_RES_GPU],
                           (long long)gs_charge_milli(landed));
            goto out;
        }
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
    for (uint32_t gi = 0; gi < e->ng; gi++) { /* held capacity is bound in the cluster too */
        const struct gang *g = &e->g[gi];
        for (uint32_t i = 0; i < g->n_holds; i++) {
            const struct gang_hold *h = &g->holds[i];
            if (h->state != HOLD_HELD)
                continue;
            if (h->pl.node >= nn || !gs_cluster_node(e->c, h->pl.node)->present) {
                (void)snprintf(msg, cap, "gang %s holds capacity on node slot %u, which is free",
                               g->name, h->pl.node);
                goto out;
            }
            for (uint32_t k = 0; k < h->pl.num_gpu; k++)
                used[h->pl.node * GS_NODE_GPUS_MAX + h->pl.gpu_index[k]] += h->pl.gpu_milli;
        }
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
    if (check_xres(e, msg, cap) != GS_OK)
        goto out;
    if ((err = check_model_books(e, msg, cap)) != GS_OK)
        goto out;
    err = GS_EINVAL;
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
            /* Nor above what it held when its limit was lowered below that: pods stay. */
            int64_t top = q->limit[r] > q->over_limit[r] ? q->limit[r] : q->over_limit[r];
            if (q->limit[r] != GS_UNLIMITED &&
                (own > top || (qadopt[qi * GS_RES_COUNT + r] == 0 && q->alloc[r] > top))) {
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
         * has, not a placement of ours: a gang may run below its minimum only through them, or
         * in its grace period after losing members. */
        bool degraded = g->degraded_ms >= 0;
        uint32_t held = 0;
        for (uint32_t i = 0; i < g->n_holds; i++)
            held += g->holds[i].state == HOLD_HELD;
        if (held > 0 && !degraded) {
            (void)snprintf(msg, cap, "gang %s holds capacity outside a grace period", g->name);
            goto out;
        }
        if (degraded && (run == 0 || run + done >= g->min_member)) {
            (void)snprintf(msg, cap, "gang %s is in a grace period it cannot be in (%u running)",
                           g->name, run);
            goto out;
        }
        if (run > adopted && run + done < g->min_member && !degraded) {
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
    gs__free(used);
    gs__free(qalloc);
    gs__free(qdem);
    gs__free(qadopt);
    gs__free(qpend);
    gs__free(qrun);
    return err;
}
