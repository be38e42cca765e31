/*
 * Disruption budgets of the tenant engine: the policy/v1 PodDisruptionBudgets of a live cluster,
 * each reduced to a name and its disruptions allowed now, and which victims of a victim search
 * would exceed one. The selector matching happens where pods and budgets are read (kworld);
 * the engine only knows which budgets cover each pod. Part of the tenant engine (tenant_int.h).
 *
 * The violation rule is kube-scheduler's (filterPodsWithPDBViolation in
 * pkg/scheduler/framework/plugins/defaultpreemption): the potential victims on a node are walked
 * most important first; each takes one disruption from every budget covering it, and it
 * violates when one of those goes below zero. So with one disruption allowed and two covered
 * victims, the more important one is non-violating and the other violating.
 */
#include <string.h>

#include "gpusched/err.h"
#include "tenant_int.h"

int gs_engine_add_budget(struct gs_engine *e, const char *name, int32_t disruptions_allowed,
                         uint32_t *id)
{
    if (!name || !*name || disruptions_allowed < 0)
        return GS_EINVAL;
    if (gs_engine_find_budget(e, name) >= 0)
        return GS_EEXIST;
    int err = gs__grow((void **)&e->b, &e->capb, e->nb + 1, sizeof(*e->b));
    if (err)
        return err;
    char *copy = gs__dup_str(name);
    if (!copy)
        return GS_ENOMEM;
    e->b[e->nb] = (struct budget){copy, disruptions_allowed, 0, 0};
    e->nb++;
    if (id)
        *id = e->nb;
    return GS_OK;
}

int64_t gs_engine_find_budget(const struct gs_engine *e, const char *name)
{
    if (!name)
        return -1;
    for (uint32_t i = 0; i < e->nb; i++)
        if (strcmp(e->b[i].name, name) == 0)
            return (int64_t)i + 1;
    return -1;
}

int gs_engine_set_budget_allowed(struct gs_engine *e, uint32_t id, int32_t disruptions_allowed)
{
    if (id == 0 || id > e->nb || disruptions_allowed < 0)
        return GS_EINVAL;
    e->b[id - 1].allowed = disruptions_allowed;
    return GS_OK;
}

int gs_engine_budget_info(const struct gs_engine *e, uint32_t id, const char **name,
                          int32_t *disruptions_allowed)
{
    if (id == 0 || id > e->nb)
        return GS_EINVAL;
    if (name)
        *name = e->b[id - 1].name;
    if (disruptions_allowed)
        *disruptions_allowed = e->b[id - 1].allowed;
    return GS_OK;
}

/* GS_OK when every non-zero entry of ids[0..n) names a budget and n fits a pod; else GS_EINVAL. */
int gs__budget_valid_ids(const struct gs_engine *e, const uint32_t *ids, uint32_t n)
{
    if (n > GS_POD_BUDGETS_MAX || (n > 0 && !ids))
        return GS_EINVAL;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] > e->nb)
            return GS_EINVAL;
    return GS_OK;
}

int gs_engine_set_pod_budgets(struct gs_engine *e, uint32_t pod, const uint32_t *ids, uint32_t n)
{
    if (pod >= e->np || e->p[pod].forgotten || gs__budget_valid_ids(e, ids, n) != GS_OK)
        return GS_EINVAL;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == 0)
            return GS_EINVAL;
    struct tpod *p = &e->p[pod];
    memset(p->budgets, 0, sizeof(p->budgets));
    p->nbudgets = 0;
    for (uint32_t i = 0; i < n; i++)
        p->budgets[p->nbudgets++] = ids[i];
    return GS_OK;
}

/*
 * Classifies one potential victim in the current victim search (e->vic_stamp): takes one
 * disruption from each budget covering it and returns whether one of them went below zero.
 * Call it for the search's pods most important first; a pod already classified in this search
 * keeps its answer and takes nothing again. The answer is left in pdb_viol / pdb_stamp.
 */
bool gs__budget_classify(struct gs_engine *e, uint32_t pod)
{
    struct tpod *p = &e->p[pod];
    if (p->pdb_stamp == e->vic_stamp)
        return p->pdb_viol;
    bool viol = false;
    for (uint32_t i = 0; i < p->nbudgets; i++) {
        struct budget *b = &e->b[p->budgets[i] - 1];
        if (b->stamp != e->vic_stamp) {
            b->stamp = e->vic_stamp;
            b->left = b->allowed;
        }
        if (--b->left < 0)
            viol = true;
    }
    p->pdb_viol = viol;
    p->pdb_stamp = e->vic_stamp;
    return viol;
}

/* A committed eviction of `pod`: each budget covering it has one disruption fewer (not below
 * zero), as the Eviction API counts, until the caller sets the cluster's value. */
void gs__budget_evicted(struct gs_engine *e, uint32_t pod)
{
    const struct tpod *p = &e->p[pod];
    for (uint32_t i = 0; i < p->nbudgets; i++) {
        struct budget *b = &e->b[p->budgets[i] - 1];
        if (b->allowed > 0)
            b->allowed--;
    }
}

/* Frees the budgets (gs_engine_free()). */
void gs__budget_free(struct gs_engine *e)
{
    for (uint32_t i = 0; i < e->nb; i++)
        gs__free(e->b[i].name);
    gs__free(e->b);
    e->b = NULL;
    e->nb = e->capb = 0;
}
