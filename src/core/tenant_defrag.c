/*
 * The engine's side of a defragmentation plan (include/gpusched/defrag.h): the plan's moves
 * carried out as evictions and binds at the plan's placements in one undo log (tenant_undo.c),
 * so that a bind the cluster refuses leaves everything as it was, and the events are reported
 * by the same commit as every other eviction and bind.
 */
#include "core/tenant_int.h"
#include "gpusched/err.h"

int gs_engine_migrate(struct gs_engine *e, const uint32_t *pods, const struct gs_placement *pls,
                      uint32_t n, int64_t now_ms, int64_t restart_delay_ms)
{
    if (!e || !pods || !pls || n == 0 || restart_delay_ms < 0)
        return GS_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        if (pods[i] >= e->np)
            return GS_EINVAL;
        const struct tpod *p = &e->p[pods[i]];
        if (p->state != GS_TPOD_RUNNING || p->gang != GS_NO_GANG || p->foreign)
            return GS_EINVAL;
        for (uint32_t j = 0; j < i; j++)
            if (pods[j] == pods[i])
                return GS_EINVAL;
    }
    e->now_ms = now_ms;
    uint32_t mark = e->nlog;
    int err = GS_OK;
    for (uint32_t i = 0; i < n && !err; i++)
        err = gs__do_evict(e, pods[i], GS_EVICT_DEFRAG, NO_ID);
    for (uint32_t i = 0; i < n && !err; i++)
        err = gs__do_bind(e, pods[i], &pls[i]);
    if (err) {
        gs__rollback(e, mark);
        return err == GS_ENOMEM ? err : GS_EINVAL;
    }
    e->bind_delay_ms = restart_delay_ms;
    err = gs__commit(e, mark, false);
    e->bind_delay_ms = 0;
    return err;
}
