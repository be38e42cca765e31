/*
 * The undo log of the tenant engine. Every tentative change (a gang's members, victims of a
 * preemption, the releases that find a backfill reservation) goes through it: gs__do_bind() and
 * gs__do_evict() apply a change with all its accounting and record it; gs__rollback() undoes the
 * records in reverse; gs__commit() turns them into events. "Would it fit" and "place it" are
 * thus one code path over the same state. Part of the tenant engine (tenant_int.h).
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

static int log_push(struct gs_engine *e, struct undo u)
{
    int err = gs__grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log));
    if (err)
        return err;
    e->log[e->nlog++] = u;
    return GS_OK;
}

int gs__node_list_add(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    uint32_t n = p->pl.node;
    int err = gs__grow((void **)&e->node_pods[n], &e->node_cappods[n], e->node_npods[n] + 1,
                       sizeof(uint32_t));
    if (err)
        return err;
    p->node_slot = e->node_npods[n];
    e->node_pods[n][e->node_npods[n]++] = pod;
    return GS_OK;
}

void gs__node_list_remove(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    uint32_t n = p->pl.node;
    uint32_t last = e->node_pods[n][--e->node_npods[n]];
    e->node_pods[n][p->node_slot] = last;
    e->p[last].node_slot = p->node_slot;
}

/* Starts a pending pod on pl (state, cluster, accounting), recording it for undo. */
int gs__do_bind(struct gs_engine *e, uint32_t pod, const struct gs_placement *pl)
{
    struct tpod *p = &e->p[pod];
    int err = gs__ensure_nodes(e);
    if (err)
        return err;
    if ((err = gs__grow((void **)&e->node_pods[pl->node], &e->node_cappods[pl->node],
                        e->node_npods[pl->node] + 1, sizeof(uint32_t))) != GS_OK ||
        (err = gs__grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log))) != GS_OK)
        return err;
    if ((err = gs_cluster_bind(e->c, &p->req, pl)) != GS_OK)
        return err;
    p->pl = *pl;
    p->state = GS_TPOD_RUNNING;
    p->bind_trial = e->trial;
    (void)gs__node_list_add(e, pod); /* capacity ensured above */
    gs__charge_landed(e, pod, pl);
    gs__account_alloc(e, pod, pl->node, +1);
    e->q[p->queue].pending--;
    e->q[p->queue].running++;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending--;
        e->g[p->gang].running++;
    }
    (void)log_push(e, (struct undo){pod, UNDO_BIND, 0, NO_ID, *pl});
    return GS_OK;
}

/* Stops a running pod and puts it back to pending (not yet re-queued), recording it. */
int gs__do_evict(struct gs_engine *e, uint32_t pod, enum gs_evict_reason reason, uint32_t by)
{
    struct tpod *p = &e->p[pod];
    int err = gs__grow((void **)&e->log, &e->caplog, e->nlog + 1, sizeof(*e->log));
    if (err)
        return err;
    if ((err = gs_cluster_unbind(e->c, &p->req, &p->pl)) != GS_OK)
        return err;
    gs__node_list_remove(e, pod);
    p->state = GS_TPOD_PENDING;
    gs__account_alloc(e, pod, p->pl.node, -1);
    gs__charge_pending(e, pod);
    e->q[p->queue].pending++;
    e->q[p->queue].running--;
    if (p->gang != GS_NO_GANG) {
        e->g[p->gang].pending++;
        e->g[p->gang].running--;
    }
    (void)log_push(e, (struct undo){pod, UNDO_EVICT, (uint8_t)reason, by, p->pl});
    return GS_OK;
}

/* Undoes the log back to `mark`, newest first. Restores exactly, so it cannot fail. */
void gs__rollback(struct gs_engine *e, uint32_t mark)
{
    while (e->nlog > mark) {
        struct undo *u = &e->log[--e->nlog];
        if (u->kind == UNDO_HOLD) {
            struct gang_hold *h = &e->g[u->pod].holds[u->by];
            (void)gs_cluster_adopt(e->c, &h->req, &h->pl); /* exact restore */
            h->state = HOLD_HELD;
            continue;
        }
        if (u->kind == UNDO_MIG) {
            gs__undo_mig(e, u);
            continue;
        }
        struct tpod *p = &e->p[u->pod];
        if (u->kind == UNDO_BIND) {
            (void)gs_cluster_unbind(e->c, &p->req, &u->pl);
            gs__node_list_remove(e, u->pod);
            p->state = GS_TPOD_PENDING;
            gs__account_alloc(e, u->pod, u->pl.node, -1);
            gs__charge_pending(e, u->pod);
            e->q[p->queue].pending++;
            e->q[p->queue].running--;
            if (p->gang != GS_NO_GANG) {
                e->g[p->gang].pending++;
                e->g[p->gang].running--;
            }
        } else {
            (void)gs_cluster_adopt(e->c, &p->req, &u->pl); /* exact restore */
            p->pl = u->pl;
            (void)gs__node_list_add(e, u->pod); /* the slot it left is still allocated */
            p->state = GS_TPOD_RUNNING;
            gs__charge_landed(e, u->pod, &u->pl);
            gs__account_alloc(e, u->pod, u->pl.node, +1);
            e->q[p->queue].pending--;
            e->q[p->queue].running++;
            if (p->gang != GS_NO_GANG) {
                e->g[p->gang].pending--;
                e->g[p->gang].running++;
            }
        }
    }
}

/*
 * Gives gang gi's held capacity back to the cluster for the trial in progress (its
 * replacements may use it), recording each release so that gs__rollback() holds it again and
 * gs__commit() lets it go for good. Returns GS_OK or GS_ENOMEM (the releases made stay in the
 * log: roll back to the trial's mark).
 */
int gs__release_holds(struct gs_engine *e, uint32_t gi)
{
    struct gang *g = &e->g[gi];
    for (uint32_t i = 0; i < g->n_holds; i++) {
        struct gang_hold *h = &g->holds[i];
        if (h->state != HOLD_HELD)
            continue;
        int err = log_push(e, (struct undo){gi, UNDO_HOLD, 0, i, h->pl});
        if (err)
            return err;
        (void)gs_cluster_unbind(e->c, &h->req, &h->pl); /* bound by the hold: cannot fail */
        h->state = HOLD_RELEASED;
    }
    return GS_OK;
}

/* ---- events ---------------------------------------------------------------------------------- */

void gs__emit_text(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                   enum gs_evict_reason reason, const struct gs_placement *pl, const char *text)
{
    if (!e->cfg.on_event)
        return;
    struct gs_event ev = {kind, pod, by, reason, pl, e->now_ms, text, 0, 0};
    e->cfg.on_event(e->cfg.ctx, &ev);
}

void gs__emit(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
              enum gs_evict_reason reason, const struct gs_placement *pl)
{
    gs__emit_text(e, kind, pod, by, reason, pl, NULL);
}

static bool log_has(const struct gs_engine *e, uint32_t from, uint32_t to, uint32_t pod,
                    uint8_t kind);

/*
 * The BIND text of a pod that evicted others in the log from `mark` (its net evictions, as
 * gs__commit() reports them): "preempted ns/a (...), ns/b (...)" or "reclaimed ns/a (...)";
 * "" when it evicted nothing.
 */
static void victims_text(const struct gs_engine *e, uint32_t mark, uint32_t pod, char *buf,
                         size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = mark; i < e->nlog; i++) {
        const struct undo *u = &e->log[i];
        if (u->kind != UNDO_EVICT || u->by != pod || log_has(e, mark, i, u->pod, UNDO_BIND))
            continue;
        if (len == 0) {
            bool reclaim = u->reason == GS_EVICT_RECLAIM;
            int w = snprintf(buf, cap, "%s ", reclaim ? "reclaimed" : "preempted");
            len = w > 0 && (size_t)w < cap ? (size_t)w : 0;
        } else if (len + 3 < cap) {
            buf[len++] = ',';
            buf[len++] = ' ';
            buf[len] = '\0';
        }
        len = gs__victim_note(e, u->pod, pod, (enum gs_evict_reason)u->reason, buf, len, cap);
    }
}

/* BIND or BACKFILL of a pod, with its dynamic MIG re-partitions and start delay, and what it
 * evicted to fit (victims_text()). */
static void emit_bind(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod,
                      uint32_t repartitions, int64_t delay_ms, uint32_t mark)
{
    if (!e->cfg.on_event)
        return;
    char text[1024];
    victims_text(e, mark, pod, text, sizeof(text));
    struct gs_event ev = {kind,
                          pod,
                          NO_ID,
                          GS_EVICT_NONE,
                          &e->p[pod].pl,
                          e->now_ms,
                          text[0] ? text : NULL,
                          repartitions,
                          delay_ms};
    e->cfg.on_event(e->cfg.ctx, &ev);
}

/* An evicted pod that ends instead of waiting again (config evict_ends_pod): it leaves its
 * queue's pending books as a deleted pending pod does. */
static void end_evicted(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    e->q[p->queue].pending--;
    gs__account(e, p->queue, 1, p->r, -1);
    if (p->gang != GS_NO_GANG)
        e->g[p->gang].pending--;
    p->state = GS_TPOD_FAILED;
    p->end_ms = e->now_ms;
}

/* Whether the log between `from` and `to` holds a change of `pod` of kind `kind`. */
static bool log_has(const struct gs_engine *e, uint32_t from, uint32_t to, uint32_t pod,
                    uint8_t kind)
{
    for (uint32_t i = from; i < to; i++)
        if (e->log[i].pod == pod && e->log[i].kind == kind)
            return true;
    return false;
}

/*
 * Makes the log from `mark` final: start times, eviction records, re-queueing, events. Only net
 * changes are reported: a bind undone by a later eviction in the same log, and that eviction,
 * leave no trace (the pod was pending before and is pending after, still in its heap), so the
 * event stream never evicts a pod it did not report bound.
 */
int gs__commit(struct gs_engine *e, uint32_t mark, bool backfill)
{
    int err = GS_OK;
    for (uint32_t i = mark; i < e->nlog; i++) {
        struct undo *u = &e->log[i];
        if (u->kind == UNDO_HOLD) {
            e->g[u->pod].holds[u->by].state = HOLD_DEAD; /* released for good */
            continue;
        }
        if (u->kind == UNDO_MIG)
            continue; /* the layout stays; the pod's BIND below reports it */
        struct tpod *p = &e->p[u->pod];
        if (u->kind == UNDO_EVICT && log_has(e, mark, i, u->pod, UNDO_BIND))
            continue; /* the eviction of a bind made in this same log */
        if (u->kind == UNDO_BIND) {
            if (log_has(e, i + 1, e->nlog, u->pod, UNDO_EVICT))
                continue; /* bound then evicted again inside the same trial */
            /* A GPU re-partitioned for it right before this bind (gs__place_mig_dynamic()
             * logs the two together): it starts once the re-partition is done. */
            uint32_t repart =
                i > mark && e->log[i - 1].kind == UNDO_MIG && e->log[i - 1].pod == u->pod;
            int64_t delay_ms = repart ? e->cfg.mig_repartition_ms : e->bind_delay_ms;
            p->start_ms = e->now_ms + delay_ms;
            if (p->gang != GS_NO_GANG &&
                e->g[p->gang].running + e->g[p->gang].succeeded >= e->g[p->gang].min_member) {
                e->g[p->gang].started = true;
                gs__gang_settle(e, p->gang); /* back at its minimum: its grace period ends */
            }
            if (e->st) {
                e->st->bound++;
                e->st->backfilled += backfill;
            }
            emit_bind(e, backfill ? GS_EV_BACKFILL : GS_EV_BIND, u->pod, repart, delay_ms, mark);
        } else {
            p->evictions++;
            p->reason = (enum gs_evict_reason)u->reason;
            e->evictions_total++;
            e->q[p->queue].ev_suffered++;
            if (u->by != NO_ID)
                e->q[e->p[u->by].queue].ev_caused++;
            if (e->st)
                e->st->evicted++;
            if (p->reason == GS_EVICT_PREEMPT || p->reason == GS_EVICT_RECLAIM ||
                p->reason == GS_EVICT_GANG)
                gs__budget_evicted(e, u->pod); /* what the Eviction API will count */
            char why[1024] = "";
            if (e->cfg.on_event)
                gs__evict_text(e, u->pod, u->by, p->reason, why, sizeof(why));
            gs__emit_text(e, GS_EV_EVICT, u->pod, u->by, p->reason, &u->pl, why[0] ? why : NULL);
            if (p->gang != GS_NO_GANG && e->g[p->gang].running == 0)
                gs__gang_settle(e, p->gang); /* nothing left running to keep a grace for */
            if (p->state == GS_TPOD_PENDING && (e->cfg.evict_ends_pod || p->foreign)) {
                end_evicted(e, u->pod);
            } else if (p->state == GS_TPOD_PENDING) {
                int qerr = gs__enqueue(e, u->pod);
                if (qerr)
                    err = qerr;
            }
        }
    }
    e->nlog = mark;
    e->mutations++;
    return err;
}
