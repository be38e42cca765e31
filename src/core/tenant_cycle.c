/*
 * One scheduling cycle of the tenant engine: the per-flavor priority heaps of the leaf queues,
 * fair share (computed top-down every cycle), and the loop that serves the queue furthest below
 * its share. Part of the tenant engine (tenant_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/explain.h"
#include "gpusched/filter.h"
#include "gpusched/sched.h"
#include "tenant_int.h"

/* ---- queue heaps ----------------------------------------------------------------------------- */

/* Heap order: higher priority first, then members of gangs in their grace period, then earlier
 * submission, then lower pod id. */
static bool heap_before(const struct heap_ent *a, const struct heap_ent *b)
{
    if (a->prio != b->prio)
        return a->prio > b->prio;
    if (a->restore != b->restore)
        return a->restore;
    if (a->submit_ms != b->submit_ms)
        return a->submit_ms < b->submit_ms;
    return a->pod < b->pod;
}

static bool ent_before(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    return heap_before(a, b);
}

static int heap_push(struct flavor_queue *f, struct heap_ent ent)
{
    return gs__heap_push(&f->heap, &ent);
}

static void heap_pop(struct flavor_queue *f)
{
    (void)gs__heap_pop(&f->heap, NULL);
}

static const struct heap_ent *heap_top(const struct flavor_queue *f)
{
    return gs__heap_top(&f->heap);
}

/*
 * A pod's heap entry. A member of a gang in its grace period (a replacement, or a member evicted
 * with its node) comes before every other pod of its priority in its queue, ordered by the
 * gang's first submission: the gang gets back the capacity it holds before newer pods, and an
 * older pod that cannot use the held capacity does not keep the gang's replacements waiting
 * behind it until the grace period runs out (the job they restore was admitted already).
 */
static struct heap_ent heap_entry(const struct gs_engine *e, uint32_t pod)
{
    const struct tpod *p = &e->p[pod];
    struct heap_ent h = {pod, p->seq, prio_of(e, p), false, p->submit_ms};
    if (p->gang != GS_NO_GANG && e->g[p->gang].degraded_ms >= 0) {
        h.restore = true;
        h.submit_ms = e->g[p->gang].first_submit_ms;
    }
    return h;
}

/* Drops stale entries from the top of a flavor heap; returns the head pod or NO_ID. */
static uint32_t flavor_head(const struct gs_engine *e, struct flavor_queue *f)
{
    const struct heap_ent *h;
    while ((h = heap_top(f)) != NULL) {
        const struct tpod *p = &e->p[h->pod];
        if (p->state == GS_TPOD_PENDING && p->seq == h->seq)
            return h->pod;
        heap_pop(f);
    }
    return NO_ID;
}

int gs__enqueue(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    struct queue *q = &e->q[p->queue];
    uint64_t mask = p->req.num_gpu ? p->req.gpu_model_mask : 0;
    uint32_t f = 0;
    uint32_t fc = gs_filter_base(e->c, p->fclass);
    while (f < q->n_flavors && (q->flavors[f].mask != mask || q->flavors[f].fclass != fc))
        f++;
    if (f == q->n_flavors) {
        struct flavor_queue *nf = gs__realloc(q->flavors, (q->n_flavors + 1) * sizeof(*nf));
        if (!nf)
            return GS_ENOMEM;
        q->flavors = nf;
        memset(&nf[f], 0, sizeof(nf[f]));
        nf[f].mask = mask;
        nf[f].fclass = fc;
        nf[f].blocked_cycle = UINT32_MAX;
        nf[f].bf_cycle = UINT32_MAX;
        gs__heap_init(&nf[f].heap, sizeof(struct heap_ent), ent_before, NULL);
        gs__heap_set_alloc(&nf[f].heap, gs__realloc, gs__free);
        q->n_flavors++;
    }
    p->seq++;
    q->ver++;
    return heap_push(&q->flavors[f], heap_entry(e, pod));
}

/* ---- fair share ------------------------------------------------------------------------------ */

/*
 * The dimensions the fair share divides: d < GS_RES_COUNT is that resource; d = GS_RES_COUNT +
 * m the GPUs of model m (fair share per GPU model, below). Per model a queue's quota is its
 * by_model entry's (0 without one), its limit the entry's (else its overall GPU limit), its
 * demand and share in e->m_demand and e->m_fair.
 */
static int64_t *fair_of(struct gs_engine *e, uint32_t qi, int d)
{
    return d < GS_RES_COUNT ? &e->q[qi].fair[d]
                            : &e->m_fair[(size_t)qi * GS_MODELS_MAX + (uint32_t)(d - GS_RES_COUNT)];
}

static int64_t quota_of(const struct gs_engine *e, uint32_t qi, int d)
{
    if (d < GS_RES_COUNT)
        return e->q[qi].quota[d];
    const struct gs_model_quota *mq = gs__queue_model(&e->q[qi], (uint32_t)(d - GS_RES_COUNT));
    return mq ? mq->quota_milli : 0;
}

/* min(demand, limit) on dimension d. */
static int64_t want_of(const struct gs_engine *e, uint32_t qi, int d)
{
    const struct queue *c = &e->q[qi];
    if (d < GS_RES_COUNT)
        return c->demand[d] < c->limit[d] ? c->demand[d] : c->limit[d];
    uint32_t m = (uint32_t)(d - GS_RES_COUNT);
    const struct gs_model_quota *mq = gs__queue_model(c, m);
    int64_t lim = mq ? mq->limit_milli : c->limit[GS_RES_GPU];
    int64_t dem = e->m_demand[(size_t)qi * GS_MODELS_MAX + m];
    return lim != GS_UNLIMITED && lim < dem ? lim : dem;
}

static void fair_children(struct gs_engine *e, uint32_t qi, int r)
{
    int64_t amount = *fair_of(e, qi, r);
    uint32_t n = 0;
    for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling)
        n++;
    if (n == 0)
        return;
    /* want = demand capped by limit; first give min(quota, want). */
    int64_t sum_give = 0;
    for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
        int64_t want = want_of(e, ch, r), quota = quota_of(e, ch, r);
        int64_t give = quota < want ? quota : want;
        *fair_of(e, ch, r) = give;
        sum_give += give;
    }
    if (sum_give > amount) {
        /* Capacity below the guaranteed quotas: scale them down in proportion. */
        int64_t given = 0;
        for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
            int64_t *f = fair_of(e, ch, r);
            *f = (int64_t)((double)*f * (double)amount / (double)sum_give);
            given += *f;
        }
        for (uint32_t ch = e->q[qi].first_child; ch != NO_ID && given < amount;
             ch = e->q[ch].next_sibling) {
            (*fair_of(e, ch, r))++;
            given++;
        }
    } else {
        /* Water-filling of the leftover by over-quota weight. */
        int64_t left = amount - sum_give;
        for (;;) {
            double wsum = 0;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                const struct queue *c = &e->q[ch];
                if (c->weight > 0 && *fair_of(e, ch, r) < want_of(e, ch, r))
                    wsum += c->weight;
            }
            if (wsum <= 0 || left <= 0)
                break;
            bool capped = false;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                const struct queue *c = &e->q[ch];
                int64_t want = want_of(e, ch, r), *f = fair_of(e, ch, r);
                if (!(c->weight > 0 && *f < want))
                    continue;
                int64_t share = (int64_t)((double)left * c->weight / wsum);
                if (*f + share >= want) {
                    left -= want - *f;
                    *f = want;
                    capped = true;
                }
            }
            if (capped)
                continue;
            int64_t given = 0;
            uint32_t active = 0;
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID; ch = e->q[ch].next_sibling) {
                const struct queue *c = &e->q[ch];
                int64_t *f = fair_of(e, ch, r);
                if (!(c->weight > 0 && *f < want_of(e, ch, r)))
                    continue;
                int64_t share = (int64_t)((double)left * c->weight / wsum);
                *f += share;
                given += share;
                active++;
            }
            left -= given;
            /* Whole units left by truncation go one each in id order. */
            for (uint32_t ch = e->q[qi].first_child; ch != NO_ID && left > 0;
                 ch = e->q[ch].next_sibling) {
                const struct queue *c = &e->q[ch];
                int64_t *f = fair_of(e, ch, r);
                if (c->weight > 0 && *f < want_of(e, ch, r)) {
                    (*f)++;
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

/* ---- fair share per GPU model ---------------------------------------------------------------- */

/*
 * Divides each GPU model's GPUs among the queues on their own, when some queue has per-model
 * entries: a queue's unused share of one model (its H100 quota, say) then never counts as a
 * share of another (A100s), as Kueue divides each ResourceFlavor's nominal quota on its own.
 * Per model m: the GPUs are the healthy GPUs of present nodes of model m less what foreign pods
 * hold there; a queue's demand is what its subtree's pods hold on m plus the charge of each of
 * its pending pods that may use m (where it will land is not known, so it counts on every model
 * it may use); quota, limit and weight as in fair_of()/want_of(); the division is
 * fair_children()'s. O(pods x tree depth + nodes + queues x models), only in engines with
 * per-model entries. Returns GS_OK or GS_ENOMEM (the shares then stay off).
 */
static int model_fair(struct gs_engine *e)
{
    bool on = false;
    for (uint32_t qi = 0; qi < e->nq && !on; qi++)
        on = e->q[qi].n_mq > 0;
    e->m_fair_on = false;
    if (!on)
        return GS_OK;
    if (e->m_fair_capq < e->nq) {
        size_t n = (size_t)e->capq * GS_MODELS_MAX;
        int64_t *d = gs__realloc(e->m_demand, n * sizeof(*d));
        if (d)
            e->m_demand = d;
        int64_t *f = gs__realloc(e->m_fair, n * sizeof(*f));
        if (f)
            e->m_fair = f;
        if (!d || !f)
            return GS_ENOMEM;
        e->m_fair_capq = e->capq;
    }
    size_t n = (size_t)e->nq * GS_MODELS_MAX;
    memset(e->m_demand, 0, n * sizeof(*e->m_demand));
    memset(e->m_fair, 0, n * sizeof(*e->m_fair));
    memset(e->m_cap, 0, sizeof(e->m_cap));
    uint64_t seen = 0;
    for (uint32_t i = 0; i < gs_cluster_node_count(e->c); i++) {
        const struct gs_node *nd = gs_cluster_node(e->c, i);
        if (!nd->present || nd->gpu_count == 0 || nd->model_id >= GS_MODELS_MAX)
            continue;
        e->m_cap[nd->model_id] += (int64_t)nd->healthy_gpus * GS_GPU_MILLI;
        seen |= UINT64_C(1) << nd->model_id;
    }
    for (uint32_t i = 0; i < e->np; i++) {
        const struct tpod *p = &e->p[i];
        int64_t g = p->r[GS_RES_GPU];
        if (g <= 0 || p->forgotten)
            continue;
        uint64_t models = 0;
        if (p->state == GS_TPOD_RUNNING) {
            int m = gs__model_of_node(e, p->pl.node);
            if (m < 0)
                continue;
            if (p->foreign) {
                e->m_cap[m] -= g;
                continue;
            }
            models = UINT64_C(1) << m;
        } else if (p->state == GS_TPOD_PENDING) {
            models = p->req.gpu_model_mask & seen;
        }
        for (uint32_t m = 0; models; m++, models >>= 1)
            if (models & 1)
                for (uint32_t a = p->queue; a != NO_ID; a = e->q[a].parent)
                    e->m_demand[(size_t)a * GS_MODELS_MAX + m] += g;
    }
    e->m_fair_on = true;
    for (uint32_t m = 0; m < GS_MODELS_MAX; m++) {
        if (!(seen & (UINT64_C(1) << m)))
            continue;
        e->m_fair[m] = e->m_cap[m] > 0 ? e->m_cap[m] : 0; /* the root's share: row 0 */
        fair_children(e, 0, GS_RES_COUNT + (int)m);
    }
    return GS_OK;
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

/* ---- the cycle ------------------------------------------------------------------------------- */

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
        if (best == NO_ID || heap_before(heap_top(fq), &bh)) {
            best = h;
            bh = *heap_top(fq);
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
    int err = gs__ensure_nodes(e);
    if (err)
        return err;
    if ((err = gs__gang_expire_grace(e)) != GS_OK)
        return err;
    gs__fail_timed_out_gangs(e);
    if (e->capacity_gen != gs_cluster_capacity_gen(e->c)) {
        cluster_capacity(e, e->capacity); /* O(nodes), only when capacity may have changed */
        e->capacity_gen = gs_cluster_capacity_gen(e->c);
        e->filter_gen = gs_filter_gen(e->c);
        gs__charge_refresh_pending(e);
    } else if (e->filter_gen != gs_filter_gen(e->c)) {
        /* A node's labels, taints or cordon changed which nodes some pod may use: its pending
         * charge is over those (gs_charge_request_class()). */
        e->filter_gen = gs_filter_gen(e->c);
        gs__charge_refresh_pending(e);
    }
    gs_engine_compute_fair(e, e->capacity);
    if ((err = model_fair(e)) != GS_OK)
        return err;
    for (uint32_t i = 0; i < e->nresv; i++)
        gs__free(e->resv[i].nodes);
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
                if ((err = gs__grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))))
                    break;
                deferred[ndef++] = head;
                continue;
            }
            struct gang *hg = &e->g[hp->gang];
            hg->tried_cycle = e->cycle;
            /* Nor a gang with fewer members than its minimum (they arrive one by one, or a
             * released gang waits for replacements): it cannot start, so it holds up nothing
             * behind it, and says so. */
            if (hg->pending + hg->running + hg->succeeded < hg->min_member) {
                if ((err = gs__grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))))
                    break;
                deferred[ndef++] = head;
                if ((err = gs__note_unschedulable(e, head)) != GS_OK)
                    break;
                continue;
            }
        }
        e->st->attempts++;
        uint32_t mark = e->nlog;
        err = gs__try_job_mode(e, head, 0, mark);
        bool backfilled = false;
        if (err == GS_OK && e->nresv > 0) {
            if (!gs__respects_reservations(e, mark)) {
                gs__rollback(e, mark);
                err = GS_EUNSCHEDULABLE;
            } else {
                backfilled = true;
            }
        }
        if (err == GS_EUNSCHEDULABLE && e->cfg.preemption && e->nresv == 0)
            err = gs__try_job_mode(e, head, 1, mark);
        if (err == GS_EUNSCHEDULABLE && e->cfg.reclaim && e->nresv == 0)
            err = gs__try_job_mode(e, head, 2, mark);
        if (err == GS_ENOMEM)
            break;
        if (err == GS_OK) {
            if ((err = gs__commit(e, mark, backfilled)) != GS_OK)
                break;
            /* A gang's members left in the heaps are stale or pending extras: keep them. */
            if (hp->state == GS_TPOD_PENDING) {
                if ((err = gs__grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))))
                    break;
                deferred[ndef++] = head;
            }
            continue;
        }
        /* Not placed: it waits. Without backfill its flavor waits behind it this cycle. */
        if ((err = gs__grow((void **)&deferred, &capdef, ndef + 1, sizeof(*deferred))) != GS_OK)
            break;
        deferred[ndef++] = head;
        if ((err = gs__note_unschedulable(e, head)) != GS_OK)
            break;
        /* A plain pod pinned to one node can take no other node, so what it waits for is that
         * node alone: it holds up nothing behind it (pinned pods share their flavor, so one
         * pinned to a full node would otherwise stop those pinned elsewhere). */
        if (hp->gang == GS_NO_GANG && gs_filter_pinned(e->c, hp->fclass, NULL))
            continue;
        /* Nor does one that fits no node even when empty: it waits for the cluster to change
         * (a node added, relabelled, uncordoned), not for room that pods behind it could take.
         * gs__note_unschedulable() just judged it on the cluster as it is (or found that
         * nothing changed since it last did). */
        if (hp->gang == GS_NO_GANG && hp->fits_none)
            continue;
        if (e->cfg.backfill && fq->bf_cycle != e->cycle) {
            /* The first job of this flavor that cannot start gets the reservation. */
            fq->bf_cycle = e->cycle;
            fq->bf_tries = 0;
            if ((err = gs__reserve(e, head)) != GS_OK)
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
            if (q->flavors[f].mask != mask ||
                q->flavors[f].fclass != gs_filter_base(e->c, p->fclass))
                continue;
            q->ver++;
            int perr = heap_push(&q->flavors[f], heap_entry(e, deferred[i]));
            if (perr && !err)
                err = perr;
            break;
        }
    }
    gs__free(deferred);
    e->rng = NULL;
    e->st = NULL;
    return err;
}
