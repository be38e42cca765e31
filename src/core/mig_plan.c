/*
 * The dynamic MIG re-partition planner (include/gpusched/mig_plan.h): exhaustive search over the
 * free instances to destroy and the starts of the new instances, judged by the header's rules.
 *
 * Destroy sets are visited by size, smallest first, and within a size by their bitmask over the
 * input indices, lowest first (Gosper's next-subset step over the free instances, whose order
 * the expansion to input indices keeps). The first size that holds any plan ends the search:
 * rule 1 already prefers it to every larger set. Within a destroy set the start sets are
 * visited in lexicographic order, skipping a start whose memory slices an instance already in
 * the candidate takes; a later candidate replaces the best one only when it is strictly better
 * by rules 2 and 3, so ties keep the first in enumeration order. Everything lives in a caller's
 * stack frame: no allocation.
 */
#include "gpusched/mig_plan.h"

#include <string.h>

#include "gpusched/err.h"

/* Most further single-instance requests of profile p the layout can serve without destroying:
 * new instances placed greedily from the lowest allowed start in the memory slices no instance
 * takes (`mem`), capped by the compute slices left and by the profile's most instances. */
static uint32_t room_for(const struct gs_mig_model *m, uint32_t p, uint32_t mem, uint32_t compute,
                         uint32_t have)
{
    const struct gs_mig_profile *pr = &m->profiles[p];
    if (have >= pr->max_count || compute >= m->compute_slices)
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

/* The header's future score of layout l[0..nl); spare[i] marks a free instance the request does
 * not take. */
static uint32_t score_of(const struct gs_mig_model *m, const struct gs_mig_instance *l, uint32_t nl,
                         const bool *spare)
{
    uint32_t mem = 0, compute = 0;
    uint32_t have[GS_MIG_PROFILES_MAX] = {0}, spare_of[GS_MIG_PROFILES_MAX] = {0};
    for (uint32_t i = 0; i < nl; i++) {
        mem |= gs_mig_mem_mask(m, l[i]);
        compute += m->profiles[l[i].profile].compute_slices;
        have[l[i].profile]++;
        if (spare[i])
            spare_of[l[i].profile]++;
    }
    uint32_t s = 0;
    for (uint32_t p = 0; p < m->n_profiles; p++)
        s += m->profiles[p].compute_slices * (spare_of[p] + room_for(m, p, mem, compute, have[p]));
    return s;
}

/* The search's state: the request, the candidate being built and the best plan so far. */
struct ctx {
    const struct gs_mig_model *m;
    const struct gs_mig_slot *cur;
    uint32_t n;       /* entries in cur */
    uint32_t profile; /* the profile asked */
    uint32_t count;   /* instances asked */
    /* The candidate: the kept instances (input order), then the new ones (ascending start). */
    uint32_t mask;    /* destroy set, bit i = cur[i] */
    uint32_t kept_n;  /* kept instances at the front of layout */
    uint32_t serving; /* kept free instances of the profile the request takes */
    uint32_t need;    /* new instances to create: count - serving */
    struct gs_mig_instance layout[GS_MIG_INSTANCES_MAX];
    bool spare[GS_MIG_INSTANCES_MAX];      /* free and not taken by the request */
    uint8_t granted[GS_MIG_INSTANCES_MAX]; /* the kept free instances the request takes */
    /* The best plan so far. */
    bool found;
    uint32_t best_score;
    uint32_t best_created;
    struct gs_mig_plan plan;
    uint32_t evaluated; /* complete candidates judged */
};

/* Writes the candidate into c->plan: destroys by ascending start, then creates by ascending
 * start (the new starts are picked ascending). */
static void take_candidate(struct ctx *c, uint32_t score)
{
    const struct gs_mig_model *m = c->m;
    struct gs_mig_plan *p = &c->plan;
    memset(p, 0, sizeof(*p));
    for (uint32_t s = 0; s < m->mem_slices; s++)
        for (uint32_t i = 0; i < c->n; i++)
            if ((c->mask >> i & 1) && c->cur[i].in.start == s)
                p->ops[p->n_ops++] = (struct gs_mig_op){GS_MIG_OP_DESTROY, c->cur[i].in};
    p->n_destroyed = p->n_ops;
    for (uint32_t k = 0; k < c->need; k++)
        p->ops[p->n_ops++] = (struct gs_mig_op){GS_MIG_OP_CREATE, c->layout[c->kept_n + k]};
    p->n_created = c->need;
    p->n_layout = c->kept_n + c->need;
    memcpy(p->layout, c->layout, sizeof(p->layout[0]) * p->n_layout);
    for (uint32_t g = 0; g < c->serving; g++)
        p->granted[p->n_granted++] = c->granted[g];
    for (uint32_t k = 0; k < c->need; k++)
        p->granted[p->n_granted++] = (uint8_t)(c->kept_n + k);
    p->score = score;
    c->found = true;
    c->best_score = score;
    c->best_created = c->need;
}

/* Judges the complete candidate: valid layouts only, then rules 2 and 3 against the best of the
 * same destroy-set size (rule 1 is the caller's loop order). */
static void judge(struct ctx *c)
{
    uint32_t nl = c->kept_n + c->need;
    if (c->evaluated >= GS_MIG_PLAN_EVAL_MAX)
        return;
    c->evaluated++;
    if (gs_mig_layout_check(c->m, c->layout, nl, NULL, 0) != GS_OK)
        return;
    uint32_t score = score_of(c->m, c->layout, nl, c->spare);
    if (c->found &&
        (score < c->best_score || (score == c->best_score && c->need >= c->best_created)))
        return;
    take_candidate(c, score);
}

/* Picks the k-th..need-th new start, each from the allowed starts after `from`, in lexicographic
 * order; `mem` is the memory the candidate takes so far. */
static void pick_starts(struct ctx *c, uint32_t k, uint32_t from, uint32_t mem)
{
    if (k == c->need) {
        judge(c);
        return;
    }
    const struct gs_mig_profile *pr = &c->m->profiles[c->profile];
    for (uint32_t s = from; s + (c->need - k) <= pr->n_starts; s++) {
        struct gs_mig_instance in = {(uint8_t)c->profile, pr->starts[s]};
        uint32_t mask = gs_mig_mem_mask(c->m, in);
        if (!mask || (mask & mem))
            continue;
        c->layout[c->kept_n + k] = in;
        c->spare[c->kept_n + k] = false;
        pick_starts(c, k + 1, s + 1, mem | mask);
    }
}

/* Builds the kept part of the candidate for destroy set c->mask and searches its start sets. */
static void try_destroy_set(struct ctx *c)
{
    const struct gs_mig_model *m = c->m;
    const struct gs_mig_profile *pr = &m->profiles[c->profile];
    uint32_t compute = 0, have = 0;
    c->kept_n = 0;
    c->serving = 0;
    uint32_t mem = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->mask >> i & 1)
            continue;
        const struct gs_mig_slot *s = &c->cur[i];
        bool takes = !s->used && s->in.profile == c->profile && c->serving < c->count;
        if (takes)
            c->granted[c->serving++] = (uint8_t)c->kept_n;
        if (s->in.profile == c->profile)
            have++;
        c->layout[c->kept_n] = s->in;
        c->spare[c->kept_n] = !s->used && !takes;
        c->kept_n++;
        mem |= gs_mig_mem_mask(m, s->in);
        compute += m->profiles[s->in.profile].compute_slices;
    }
    c->need = c->count - c->serving;
    /* Cheap bounds before the start search; gs_mig_layout_check() judges the rest. */
    if (have + c->need > pr->max_count ||
        compute + c->need * pr->compute_slices > m->compute_slices)
        return;
    pick_starts(c, 0, 0, mem);
}

/* The next larger integer with the same number of set bits (Gosper's hack); x > 0. */
static uint32_t next_same_popcount(uint32_t x)
{
    uint32_t low = x & (~x + 1);
    uint32_t ripple = x + low;
    return ripple | (((x ^ ripple) >> 2) / low);
}

int gs_mig_plan_repartition(const struct gs_mig_model *m, const struct gs_mig_slot *cur, uint32_t n,
                            uint32_t profile, uint32_t count, struct gs_mig_plan *out)
{
    if (!m || !out || (n > 0 && !cur) || n > GS_MIG_INSTANCES_MAX || profile >= m->n_profiles ||
        count < 1 || count > GS_MIG_INSTANCES_MAX)
        return GS_EINVAL;
    struct ctx c = {.m = m, .cur = cur, .n = n, .profile = profile, .count = count};
    uint32_t free_idx[GS_MIG_INSTANCES_MAX], n_free = 0;
    for (uint32_t i = 0; i < n; i++) {
        c.layout[i] = cur[i].in;
        if (!cur[i].used)
            free_idx[n_free++] = i;
    }
    if (gs_mig_layout_check(m, c.layout, n, NULL, 0) != GS_OK)
        return GS_EINVAL;
    for (uint32_t size = 0; size <= n_free && !c.found; size++) {
        /* Subsets of the free instances as bitmasks over free_idx, ascending; the expansion to
         * input indices is monotone, so the destroy masks ascend too. */
        uint32_t sub = size ? (UINT32_C(1) << size) - 1 : 0;
        while (sub < (UINT32_C(1) << n_free)) {
            c.mask = 0;
            for (uint32_t j = 0; j < n_free; j++)
                if (sub >> j & 1)
                    c.mask |= UINT32_C(1) << free_idx[j];
            try_destroy_set(&c);
            if (size == 0)
                break;
            sub = next_same_popcount(sub);
        }
    }
    if (!c.found)
        return GS_ENOENT;
    c.plan.evaluated = c.evaluated;
    memcpy(out, &c.plan, sizeof(*out));
    return GS_OK;
}
