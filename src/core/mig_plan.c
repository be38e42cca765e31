/*
 * The dynamic MIG re-partition planner (include/gpusched/mig_plan.h): exhaustive search over the
 * free instances to destroy and the starts of the new instances, judged by the header's rules.
 */
#include "gpusched/mig_plan.h"

#include <string.h>

#include "gpusched/err.h"

struct best {
    bool found;
    uint32_t destroyed, score, created;
};

/* Most further single-instance requests of profile p the layout can serve without destroying. */
static uint32_t room_for(const struct gs_mig_model *m, uint32_t p, uint32_t mem, uint32_t compute,
                         uint32_t have)
{
    const struct gs_mig_profile *pr = &m->profiles[p];
    if (have >= pr->max_count)
        return 0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < pr->n_starts; k++) {
        struct gs_mig_instance in = {(uint8_t)p, pr->starts[k]};
        uint32_t mask = gs_mig_mem_mask(m, in);
        if (mask && !(mask & mem)) {
            mem |= mask;
            n++;
        }
    }
    uint32_t by_compute = (m->compute_slices - compute) / pr->compute_slices;
    uint32_t by_count = pr->max_count - have;
    if (n > by_compute)
        n = by_compute;
    return n > by_count ? by_count : n;
}

static uint32_t score_of(const struct gs_mig_model *m, const struct gs_mig_instance *l, uint32_t nl,
                         const bool *spare)
{
    uint32_t mem = 0, compute = 0;
    uint32_t have[GS_MIG_PROFILES_MAX] = {0}, free_of[GS_MIG_PROFILES_MAX] = {0};
    for (uint32_t i = 0; i < nl; i++) {
        mem |= gs_mig_mem_mask(m, l[i]);
        compute += m->profiles[l[i].profile].compute_slices;
        have[l[i].profile]++;
        if (spare[i])
            free_of[l[i].profile]++;
    }
    uint32_t s = 0;
    for (uint32_t p = 0; p < m->n_profiles; p++)
        s += m->profiles[p].compute_slices *
             (free_of[p] + room_for(m, p, mem, compute, have[p]));
    return s;
}

struct ctx {
    const struct gs_mig_model *m;
    const struct gs_mig_slot *cur;
    uint32_t n, profile, need, mask, kept_n, serving;
    struct gs_mig_instance layout[GS_MIG_INSTANCES_MAX];
    bool spare[GS_MIG_INSTANCES_MAX];
    uint8_t pick[GS_MIG_INSTANCES_MAX];
    struct best best;
    struct gs_mig_plan plan;
    uint32_t evaluated;
};

static void consider(struct ctx *c)
{
    const struct gs_mig_model *m = c->m;
    uint32_t nl = c->kept_n + c->need;
    if (++c->evaluated > GS_MIG_PLAN_EVAL_MAX)
        return;
    if (gs_mig_layout_check(m, c->layout, nl, NULL, 0) != GS_OK)
        return;
    uint32_t destroyed = (uint32_t)__builtin_popcount(c->mask);
    uint32_t score = score_of(m, c->layout, nl, c->spare);
    struct best *b = &c->best;
    if (b->found && (destroyed > b->destroyed ||
                     (destroyed == b->destroyed &&
                      (score < b->score || (score == b->score && c->need >= b->created)))))
        return;
    *b = (struct best){true, destroyed, score, c->need};
    struct gs_mig_plan *p = &c->plan;
    memset(p, 0, sizeof(*p));
    /* Destroys by ascending start, then creates by ascending start (picks are ascending). */
    for (uint32_t s = 0; s < m->mem_slices; s++)
        for (uint32_t i = 0; i < c->n; i++)
            if ((c->mask >> i & 1) && c->cur[i].in.start == s)
                p->ops[p->n_ops++] = (struct gs_mig_op){GS_MIG_OP_DESTROY, c->cur[i].in};
    p->n_destroyed = p->n_ops;
    for (uint32_t k = 0; k < c->need; k++)
        p->ops[p->n_ops++] = (struct gs_mig_op){GS_MIG_OP_CREATE, c->layout[c->kept_n + k]};
    p->n_created = c->need;
    p->n_layout = nl;
    memcpy(p->layout, c->layout, sizeof(p->layout));
    uint32_t g = 0;
    for (uint32_t i = 0; i < c->kept_n && g < c->serving; i++)
        if (c->layout[i].profile == c->profile && !c->spare[i] && !c->cur_used_dummy)
            ;
    (void)g;
    p->score = score;
}
