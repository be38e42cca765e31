/*
 * The whole-GPU topology choice (contract in include/gpusched/topo.h): which GPUs of a machine a
 * multi-GPU request takes when NVLink joins some of them. Pure; no allocation (every mask and
 * array lives on the stack, bounded by GS_TOPO_GPUS_MAX).
 *
 * A set is scored by three numbers compared in order (struct score): NVLink pairs inside it,
 * most members on one NUMA node, NVLink links cut to available GPUs left outside. The exact
 * search walks the want-subsets of the candidates in lexicographic order of their indices and
 * keeps the first of the best, so ties go to the lowest indices; the greedy search, for more
 * candidates than an exact walk can afford, grows a set from every seed one GPU at a time.
 */
#include "gpusched/topo.h"

#include <stdbool.h>
#include <stddef.h>

#include "gpusched/err.h"

/* Bits set in x (the SWAR count; C11 has no popcount). */
static uint32_t popcount64(uint64_t x)
{
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
    return (uint32_t)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* The machine as the searches read it: symmetric masks without self bits, and NUMA nodes. */
struct topo {
    uint32_t n;                      /* GPUs */
    bool numa_known;                 /* numa[] came from the caller */
    uint64_t link[GS_TOPO_GPUS_MAX]; /* bit j of link[i]: i and j are joined */
    int32_t numa[GS_TOPO_GPUS_MAX];  /* NUMA node by GPU, -1 unknown */
    uint64_t pool;                   /* avail | must: what the cut is counted against */
};

/* A set's score; compared by score_better(). */
struct score {
    uint32_t links; /* NVLink pairs inside the set */
    uint32_t numa;  /* most members on one NUMA node */
    uint32_t cut;   /* links from the set to pool GPUs outside it (fewer is better) */
};

static bool score_better(struct score a, struct score b)
{
    if (a.links != b.links)
        return a.links > b.links;
    if (a.numa != b.numa)
        return a.numa > b.numa;
    return a.cut < b.cut;
}

/* Members of `set` on NUMA node `node`. */
static uint32_t numa_count(const struct topo *t, uint64_t set, int32_t node)
{
    uint32_t c = 0;
    for (uint64_t s = set; s != 0; s &= s - 1)
        c += t->numa[popcount64((s & -s) - 1)] == node ? 1u : 0u;
    return c;
}

/* Most members of `set` on one NUMA node (unknown nodes are one node, -1). */
static uint32_t numa_max(const struct topo *t, uint64_t set)
{
    if (!t->numa_known)
        return popcount64(set);
    uint32_t best = 0;
    for (uint64_t s = set; s != 0; s &= s - 1) {
        uint32_t c = numa_count(t, set, t->numa[popcount64((s & -s) - 1)]);
        if (c > best)
            best = c;
    }
    return best;
}

static struct score score_set(const struct topo *t, uint64_t set)
{
    struct score sc = {0, numa_max(t, set), 0};
    for (uint64_t s = set; s != 0; s &= s - 1) {
        uint64_t l = t->link[popcount64((s & -s) - 1)];
        sc.links += popcount64(l & set);
        sc.cut += popcount64(l & t->pool & ~set);
    }
    sc.links /= 2; /* each pair was counted from both ends */
    return sc;
}

/*
 * Exact: the best `must | S` over the subsets S of `cand` (at most GS_TOPO_EXACT_MAX GPUs) with
 * `want` members (0 < want < |cand|); equal scores go to the most members on `near` (the NUMA
 * node of the lowest must GPU, INT32_MIN for none), then to the first subset in lexicographic
 * order of ascending indices.
 */
static uint64_t best_subset(const struct topo *t, uint64_t cand, uint64_t must, uint32_t want,
                            int32_t near)
{
    uint32_t idx[GS_TOPO_EXACT_MAX] = {0}, n = 0;
    for (uint64_t s = cand; s != 0 && n < GS_TOPO_EXACT_MAX; s &= s - 1)
        idx[n++] = popcount64((s & -s) - 1);
    if (want == 0 || want >= n)
        return want == 0 ? 0 : cand; /* the caller asks for fewer than n; said for the analyzer */
    uint32_t c[GS_TOPO_EXACT_MAX] = {0};
    for (uint32_t i = 0; i < want; i++)
        c[i] = i;
    uint64_t chosen = 0;
    struct score best = {0, 0, 0};
    uint32_t best_near = 0;
    bool have = false;
    for (;;) {
        uint64_t set = 0;
        uint32_t at_near = 0;
        for (uint32_t i = 0; i < want; i++) {
            set |= UINT64_C(1) << idx[c[i]];
            at_near += t->numa[idx[c[i]]] == near ? 1u : 0u;
        }
        struct score sc = score_set(t, set | must);
        if (!have || score_better(sc, best) || (!score_better(best, sc) && at_near > best_near)) {
            have = true;
            best = sc;
            best_near = at_near;
            chosen = set;
        }
        /* Next combination: the rightmost position that can still move right, then the rest
         * packed after it. */
        uint32_t i = want;
        while (i > 0 && c[i - 1] == n - want + i - 1)
            i--;
        if (i == 0)
            break;
        c[i - 1]++;
        for (uint32_t j = i; j < want; j++)
            c[j] = c[j - 1] + 1;
    }
    return chosen;
}

/* Greedy: `more` GPUs of the pool added to `set` one at a time (see topo.h). */
static uint64_t grow(const struct topo *t, uint64_t set, uint32_t more)
{
    for (uint32_t k = 0; k < more; k++) {
        int32_t best = -1;
        uint32_t bl = 0, bn = 0, bc = 0;
        for (uint64_t s = t->pool & ~set; s != 0; s &= s - 1) {
            uint32_t x = popcount64((s & -s) - 1);
            uint64_t bit = UINT64_C(1) << x;
            uint32_t links = popcount64(t->link[x] & set);
            uint32_t numa = numa_count(t, set, t->numa[x]);
            uint32_t cut = popcount64(t->link[x] & t->pool & ~set & ~bit);
            if (best < 0 || links > bl || (links == bl && numa > bn) ||
                (links == bl && numa == bn && cut < bc)) {
                best = (int32_t)x;
                bl = links;
                bn = numa;
                bc = cut;
            }
        }
        if (best < 0)
            break;
        set |= UINT64_C(1) << best;
    }
    return set;
}

static uint64_t best_greedy(const struct topo *t, uint64_t cand, uint64_t must, uint32_t want)
{
    uint64_t chosen = 0;
    struct score best = {0, 0, 0};
    bool have = false;
    /* With must GPUs the set grows from them alone; otherwise from each candidate. */
    uint64_t seeds = must != 0 ? 1 : cand;
    for (uint64_t s = seeds; s != 0; s &= s - 1) {
        uint64_t seed = must != 0 ? must : s & -s;
        uint64_t set = grow(t, seed, must != 0 ? want : want - 1);
        struct score sc = score_set(t, set);
        if (!have || score_better(sc, best)) {
            have = true;
            best = sc;
            chosen = set & ~must;
        }
    }
    return chosen;
}

int gs_topo_pick(uint32_t n_gpus, const uint64_t *nvlink, const int32_t *numa_node, uint64_t avail,
                 uint64_t must, uint32_t want, uint64_t *out)
{
    if (out == NULL)
        return GS_EINVAL;
    *out = 0;
    if (n_gpus > GS_TOPO_GPUS_MAX || want > GS_TOPO_GPUS_MAX || (nvlink == NULL && n_gpus > 0))
        return GS_EINVAL;
    uint64_t all = n_gpus == GS_TOPO_GPUS_MAX ? UINT64_MAX : (UINT64_C(1) << n_gpus) - 1;
    if ((avail | must) & ~all)
        return GS_EINVAL;
    uint64_t cand = avail & ~must;
    uint32_t n_cand = popcount64(cand);
    if (n_cand < want)
        return GS_EUNSCHEDULABLE;
    if (want == 0)
        return GS_OK;
    if (n_cand == want) {
        *out = cand;
        return GS_OK;
    }
    struct topo t;
    t.n = n_gpus;
    t.numa_known = numa_node != NULL;
    t.pool = avail | must;
    for (uint32_t i = 0; i < n_gpus; i++) {
        t.link[i] = 0;
        t.numa[i] = numa_node != NULL && numa_node[i] >= 0 ? numa_node[i] : -1;
    }
    for (uint32_t i = 0; i < n_gpus; i++) {
        uint64_t l = nvlink[i] & all & ~(UINT64_C(1) << i);
        t.link[i] |= l;
        for (uint64_t s = l; s != 0; s &= s - 1)
            t.link[popcount64((s & -s) - 1)] |= UINT64_C(1) << i;
    }
    if (n_cand <= GS_TOPO_EXACT_MAX) {
        int32_t near = INT32_MIN;
        if (must != 0)
            near = t.numa[popcount64((must & -must) - 1)];
        *out = best_subset(&t, cand, must, want, near);
    } else {
        *out = best_greedy(&t, cand, must, want);
    }
    return GS_OK;
}
