/*
 * GPU sharing modes in the core: what a GPU in each mode offers, the one validation of
 * requests of every kind, the one GPU pick for every kind, and the checks and arithmetic that
 * make a bind, an adopt and a release exact per mode (cluster.c calls them). See cluster.h for
 * the modes (enum gs_gpu_sharing) and the request kinds (enum gs_req_kind).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"
#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/topo.h"

static int64_t max0(int64_t v)
{
    return v > 0 ? v : 0;
}

GS_PRINTF(3, 4) static int refuse(char *reason, size_t cap, const char *fmt, ...)
{
    if (reason && cap) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(reason, cap, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

int gs_pod_req_validate(const struct gs_pod_req *req, char *reason, size_t cap)
{
    if (reason && cap)
        reason[0] = '\0';
    if (req->cpu_milli < 0)
        return refuse(reason, cap, "cpu_milli %lld: negative", (long long)req->cpu_milli);
    if (req->mem_mib < 0)
        return refuse(reason, cap, "mem_mib %lld: negative", (long long)req->mem_mib);
    if (req->num_gpu > GS_NODE_GPUS_MAX)
        return refuse(reason, cap, "num_gpu %u: above %u", req->num_gpu, GS_NODE_GPUS_MAX);
    if (req->xres_count > GS_POD_XRES_MAX)
        return refuse(reason, cap, "xres_count %u: above %u", req->xres_count, GS_POD_XRES_MAX);
    for (uint32_t r = 0; r < req->xres_count; r++)
        if (req->xres[r].qty <= 0)
            return refuse(reason, cap, "xres[%u] qty %lld: not positive", r,
                          (long long)req->xres[r].qty);
    switch (gs_req_kind(req)) {
    case GS_REQ_MILLI:
        if (req->num_gpu == 0)
            return GS_OK;
        if (req->gpu_milli <= 0 || req->gpu_milli > GS_GPU_MILLI)
            return refuse(reason, cap, "gpu_milli %d: outside 1..%d", req->gpu_milli, GS_GPU_MILLI);
        if (req->num_gpu > 1 && req->gpu_milli != GS_GPU_MILLI)
            return refuse(reason, cap,
                          "gpu_milli %d with num_gpu %u: a fraction is of one GPU (ask for "
                          "memory per GPU to share several)",
                          req->gpu_milli, req->num_gpu);
        return GS_OK;
    case GS_REQ_MEMORY:
        if (req->num_gpu == 0)
            return refuse(reason, cap, "gpu memory asked with num_gpu 0: name the GPUs");
        if (req->gpu_mem_mib < 0)
            return refuse(reason, cap, "gpu_mem_mib %lld: negative", (long long)req->gpu_mem_mib);
        if (req->gpu_mem_mib > INT32_MAX)
            return refuse(reason, cap, "gpu_mem_mib %lld: above %d", (long long)req->gpu_mem_mib,
                          INT32_MAX);
        if (req->gpu_mem_mib && req->gpu_mem_pct)
            return refuse(reason, cap,
                          "gpu_mem_mib %lld and gpu_mem_pct %u: give memory one way only",
                          (long long)req->gpu_mem_mib, req->gpu_mem_pct);
        if (req->gpu_mem_pct > 100)
            return refuse(reason, cap, "gpu_mem_pct %u: above 100", req->gpu_mem_pct);
        if (req->gpu_milli < 0 || req->gpu_milli >= GS_GPU_MILLI)
            return refuse(reason, cap,
                          "gpu_milli %d with gpu memory: a compute share is 0..%d (a whole GPU "
                          "takes all its memory)",
                          req->gpu_milli, GS_GPU_MILLI - 1);
        return GS_OK;
    case GS_REQ_TIMESLICE:
        if (req->timeslice_slots > GS_NODE_GPUS_MAX)
            return refuse(reason, cap, "timeslice_slots %u: above %u (one per GPU)",
                          req->timeslice_slots, GS_NODE_GPUS_MAX);
        if (req->num_gpu || req->gpu_milli || req->gpu_mem_mib || req->gpu_mem_pct)
            return refuse(reason, cap,
                          "timeslice_slots %u with num_gpu, gpu_milli or gpu memory: a "
                          "time-sliced pod asks for slots only",
                          req->timeslice_slots);
        return GS_OK;
    case GS_REQ_MIG:
        if (req->mig_count > GS_PLACEMENT_MIG_MAX)
            return refuse(reason, cap, "mig_count %u: above %u", req->mig_count,
                          GS_PLACEMENT_MIG_MAX);
        if (memchr(req->mig_profile, '\0', sizeof(req->mig_profile)) == NULL)
            return refuse(reason, cap, "mig_profile: not NUL-terminated within %u bytes",
                          (unsigned)sizeof(req->mig_profile));
        if (req->mig_profile[0] == '\0')
            return refuse(reason, cap, "mig_count %u without mig_profile", req->mig_count);
        if (req->num_gpu || req->gpu_milli || req->gpu_mem_mib || req->gpu_mem_pct ||
            req->timeslice_slots)
            return refuse(reason, cap,
                          "mig_count %u with num_gpu, gpu_milli, gpu memory or slots: a MIG pod "
                          "asks for instances only",
                          req->mig_count);
        return GS_OK;
    }
    return refuse(reason, cap, "unknown request kind");
}

/* ---- what each mode offers ------------------------------------------------------------------ */

int64_t gs__milli_mem_mib(const struct gs_gpu *g, int32_t milli)
{
    return g->mem_mib > 0 ? g->mem_mib * milli / GS_GPU_MILLI : 0;
}

int32_t gs__gpu_milli_open(const struct gs_gpu *g)
{
    if (!g->healthy)
        return 0;
    switch (g->sharing) {
    case GS_GPU_SHARE_MILLI: {
        int64_t open = max0(g->gpu_milli - g->gpu_milli_used);
        if (g->mem_mib > 0) {
            /* The largest m with floor(mem_mib * m / 1000) <= memory free. */
            int64_t mem_free = max0(g->mem_mib - g->mem_mib_used);
            int64_t by_mem = ((mem_free + 1) * GS_GPU_MILLI - 1) / g->mem_mib;
            open = by_mem < open ? by_mem : open;
        }
        return (int32_t)open;
    }
    case GS_GPU_SHARE_WHOLE:
        return g->pods == 0 && g->gpu_milli_used == 0 ? g->gpu_milli : 0;
    default:
        return 0; /* time-sliced and MIG GPUs take no milli request */
    }
}

/* MiB a MEMORY request takes on a fractions GPU; 0 when it cannot go there. */
static int64_t mem_ask(const struct gs_gpu *g, const struct gs_pod_req *req)
{
    if (g->sharing != GS_GPU_SHARE_MILLI || g->mem_mib <= 0)
        return 0;
    if (req->gpu_mem_pct)
        return g->mem_mib * req->gpu_mem_pct / 100;
    return req->gpu_mem_mib;
}

/* Index of the layout instance with this profile and start, or -1. */
static int mig_find(const struct gs_gpu *g, uint8_t profile, uint8_t start)
{
    for (uint32_t k = 0; k < g->mig_count; k++)
        if (g->mig[k].profile == profile && g->mig[k].start == start)
            return (int)k;
    return -1;
}

/* ---- the pick -------------------------------------------------------------------------------- */

static bool model_fits(const struct gs_node *n, const struct gs_pod_req *req)
{
    if (!gs_req_wants_gpu(req))
        return true;
    return n->gpu_count > 0 &&
           (req->gpu_model_mask == GS_MODEL_ANY ||
            (n->model_id < 64 && (req->gpu_model_mask & (UINT64_C(1) << n->model_id))));
}

static bool base_fits(const struct gs_node *n, const struct gs_pod_req *req)
{
    if (!n->present || req->cpu_milli > n->cpu_milli_free || req->mem_mib > n->mem_mib_free ||
        n->pods >= n->pods_max)
        return false;
    return gs_node_xres_fits(n, req) && model_fits(n, req);
}

/* Sorts candidate GPUs by key ascending, index ascending on ties (at most 16: insertion). */
struct cand {
    int64_t key;
    uint8_t gpu;
    int64_t mem_mib;
};

static void cand_sort(struct cand *c, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        struct cand v = c[i];
        uint32_t k = i;
        while (k > 0 && (c[k - 1].key > v.key || (c[k - 1].key == v.key && c[k - 1].gpu > v.gpu))) {
            c[k] = c[k - 1];
            k--;
        }
        c[k] = v;
    }
}

/* Takes the first `want` candidates into pl, GPU indices ascending. */
static void take(struct gs_placement *pl, struct cand *c, uint32_t want)
{
    for (uint32_t i = 0; i < want; i++)
        c[i].key = c[i].gpu;
    cand_sort(c, want);
    pl->num_gpu = want;
    for (uint32_t i = 0; i < want; i++) {
        pl->gpu_index[i] = c[i].gpu;
        pl->gpu_mem_mib[i] = (int32_t)c[i].mem_mib;
    }
}

/* Free for a whole-GPU pod: nothing held (the rule of node_refresh's gpus_full_free). */
static bool whole_free(const struct gs_gpu *g)
{
    return g->gpu_milli_free == g->gpu_milli && g->gpu_milli > 0;
}

/* A milli request's GPUs; `topo` false only asks whether whole GPUs fit (the fit check), which
 * needs no topology search. */
static int pick_milli(const struct gs_node *n, const struct gs_pod_req *req,
                      struct gs_placement *pl, bool topo)
{
    if (req->num_gpu == 0)
        return GS_OK;
    pl->num_gpu = req->num_gpu;
    pl->gpu_milli = req->gpu_milli;
    if (req->gpu_milli < GS_GPU_MILLI) {
        int32_t best_free = INT32_MAX;
        int best = -1;
        for (uint32_t g = 0; g < n->gpu_count; g++) {
            int32_t f = n->gpus[g].gpu_milli_free;
            if (n->gpus[g].sharing == GS_GPU_SHARE_MILLI && f >= req->gpu_milli && f < best_free) {
                best = (int)g;
                best_free = f;
            }
        }
        if (best < 0)
            return GS_EUNSCHEDULABLE;
        pl->gpu_index[0] = (uint8_t)best;
        return GS_OK;
    }
    if (!topo) {
        /* Whether it fits, not where: only how many GPUs are wholly free. */
        uint32_t full = 0;
        for (uint32_t g = 0; g < n->gpu_count; g++)
            full += whole_free(&n->gpus[g]) ? 1u : 0u;
        return full >= req->num_gpu ? GS_OK : GS_EUNSCHEDULABLE;
    }
    return gs__pick_whole_gpus(n, req->num_gpu, pl->gpu_index) == req->num_gpu ? GS_OK
                                                                               : GS_EUNSCHEDULABLE;
}

uint32_t gs__pick_whole_gpus(const struct gs_node *n, uint32_t num, uint8_t *gpu_index)
{
    uint64_t free_mask = 0;
    uint32_t n_free = 0;
    bool linked = false; /* some free GPU has a free NVLink peer */
    for (uint32_t g = 0; g < n->gpu_count; g++)
        if (whole_free(&n->gpus[g])) {
            free_mask |= UINT64_C(1) << g;
            n_free++;
        }
    for (uint32_t g = 0; n->has_nvlink && g < n->gpu_count && !linked; g++)
        linked = (free_mask >> g & 1u) && (n->nvlink[g] & free_mask) != 0;
    uint64_t take = free_mask;
    if (linked && n_free > num) {
        /* Topology only where it can matter: two free GPUs joined, and a choice to make. With
         * no free pair every set scores alike and the lowest indices win, as below. */
        uint64_t peers[GS_NODE_GPUS_MAX];
        for (uint32_t g = 0; g < n->gpu_count; g++)
            peers[g] = n->nvlink[g];
        if (gs_topo_pick(n->gpu_count, peers, NULL, free_mask, 0, num, &take) != GS_OK)
            take = free_mask; /* cannot happen: n_free > num and the masks are the node's */
    }
    uint32_t taken = 0;
    for (uint32_t g = 0; g < n->gpu_count && taken < num; g++)
        if (take >> g & 1u)
            gpu_index[taken++] = (uint8_t)g;
    return taken;
}

static int pick_memory(const struct gs_node *n, const struct gs_pod_req *req,
                       struct gs_placement *pl)
{
    struct cand c[GS_NODE_GPUS_MAX];
    uint32_t nc = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        int64_t ask = mem_ask(gpu, req);
        int64_t mem_free = gpu->mem_mib - gpu->mem_mib_used;
        if (!gpu->healthy || ask <= 0 || ask > mem_free ||
            gpu->gpu_milli_used + req->gpu_milli > gpu->gpu_milli)
            continue;
        c[nc++] = (struct cand){mem_free - ask, (uint8_t)g, ask};
    }
    if (nc < req->num_gpu)
        return GS_EUNSCHEDULABLE;
    /* Best fit: the GPUs left with the least memory free, so whole GPUs stay whole. */
    cand_sort(c, nc);
    take(pl, c, req->num_gpu);
    pl->gpu_milli = req->gpu_milli;
    return GS_OK;
}

static int pick_timeslice(const struct gs_node *n, const struct gs_pod_req *req,
                          struct gs_placement *pl)
{
    struct cand c[GS_NODE_GPUS_MAX];
    uint32_t nc = 0;
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (gpu->sharing != GS_GPU_SHARE_TIMESLICE || !gpu->healthy ||
            gpu->replicas_used >= gpu->replicas)
            continue;
        c[nc++] = (struct cand){gpu->replicas - gpu->replicas_used, (uint8_t)g, 0};
    }
    if (nc < req->timeslice_slots)
        return GS_EUNSCHEDULABLE;
    cand_sort(c, nc); /* fewest free slots first: fills shared GPUs before fresh ones */
    take(pl, c, req->timeslice_slots);
    return GS_OK;
}

static int pick_mig(const struct gs_node *n, const struct gs_pod_req *req, struct gs_placement *pl)
{
    uint32_t got = 0;
    for (uint32_t g = 0; g < n->gpu_count && got < req->mig_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (gpu->sharing != GS_GPU_SHARE_MIG || !gpu->healthy || !gpu->mig_model)
            continue;
        int p = gs_mig_profile_find(gpu->mig_model, req->mig_profile);
        if (p < 0)
            continue;
        /* The layout is kept by ascending start: the first free match is the lowest slot. */
        for (uint32_t k = 0; k < gpu->mig_count && got < req->mig_count; k++)
            if (gpu->mig[k].profile == (uint8_t)p && !(gpu->mig_held >> k & 1))
                pl->mig[got++] =
                    (struct gs_placement_mig){(uint8_t)g, (uint8_t)p, gpu->mig[k].start};
    }
    if (got < req->mig_count)
        return GS_EUNSCHEDULABLE;
    pl->mig_count = (uint8_t)got;
    return GS_OK;
}

static int pick_gpu_half(const struct gs_node *n, const struct gs_pod_req *req,
                         struct gs_placement *pl, bool topo)
{
    switch (gs_req_kind(req)) {
    case GS_REQ_MILLI:
        return pick_milli(n, req, pl, topo);
    case GS_REQ_MEMORY:
        return pick_memory(n, req, pl);
    case GS_REQ_TIMESLICE:
        return pick_timeslice(n, req, pl);
    case GS_REQ_MIG:
        return pick_mig(n, req, pl);
    }
    return GS_EUNSCHEDULABLE;
}

int gs_node_pick_gpus(const struct gs_node *n, uint32_t node_index, const struct gs_pod_req *req,
                      struct gs_placement *pl)
{
    memset(pl, 0, sizeof(*pl));
    if (gs_pod_req_validate(req, NULL, 0) != GS_OK)
        return GS_EINVAL;
    pl->node = node_index;
    int err = base_fits(n, req) ? pick_gpu_half(n, req, pl, true) : GS_EUNSCHEDULABLE;
    if (err) {
        memset(pl, 0, sizeof(*pl));
        return err;
    }
    return GS_OK;
}

bool gs__share_gpus_fit(const struct gs_node *n, const struct gs_pod_req *req)
{
    struct gs_placement pl = {0};
    return n->present && gs_pod_req_validate(req, NULL, 0) == GS_OK && model_fits(n, req) &&
           pick_gpu_half(n, req, &pl, false) == GS_OK;
}

bool gs__share_mode_present(const struct gs_node *n, const struct gs_pod_req *req)
{
    for (uint32_t g = 0; g < n->gpu_count; g++) {
        const struct gs_gpu *gpu = &n->gpus[g];
        if (!gpu->healthy)
            continue;
        switch (gs_req_kind(req)) {
        case GS_REQ_MILLI:
            return true;
        case GS_REQ_MEMORY:
            if (gpu->sharing == GS_GPU_SHARE_MILLI && gpu->mem_mib > 0)
                return true;
            break;
        case GS_REQ_TIMESLICE:
            if (gpu->sharing == GS_GPU_SHARE_TIMESLICE)
                return true;
            break;
        case GS_REQ_MIG:
            if (gpu->sharing == GS_GPU_SHARE_MIG && gpu->mig_model) {
                int p = gs_mig_profile_find(gpu->mig_model, req->mig_profile);
                for (uint32_t k = 0; p >= 0 && k < gpu->mig_count; k++)
                    if (gpu->mig[k].profile == (uint8_t)p)
                        return true;
            }
            break;
        }
    }
    return false;
}

bool gs__share_fits(const struct gs_node *n, const struct gs_pod_req *req)
{
    /* The filter's per-node test: the pick without the full validation (the engine validated
     * the request once per decision). What the picks need to stay in bounds is checked here:
     * the instance count and a terminated profile name; other out-of-range values only fail. */
    if (req->mig_count > GS_PLACEMENT_MIG_MAX ||
        !memchr(req->mig_profile, '\0', sizeof(req->mig_profile)))
        return false;
    struct gs_placement pl = {0};
    return base_fits(n, req) && pick_gpu_half(n, req, &pl, false) == GS_OK;
}

/* ---- bind, adopt, release -------------------------------------------------------------------- */

/* Whether GPU list gpu_index[0..count) is in range and without repeats. */
static bool distinct_gpus(const struct gs_node *n, const uint8_t *idx, uint32_t count)
{
    uint32_t seen = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (idx[i] >= n->gpu_count || (seen >> idx[i] & 1))
            return false;
        seen |= UINT32_C(1) << idx[i];
    }
    return true;
}

static bool valid_milli(const struct gs_node *n, const struct gs_pod_req *req,
                        const struct gs_placement *pl, enum gs__bind_mode mode)
{
    if (pl->num_gpu != req->num_gpu || (req->num_gpu && pl->gpu_milli != req->gpu_milli))
        return false;
    if (req->num_gpu && (req->gpu_milli <= 0 || req->gpu_milli > GS_GPU_MILLI))
        return false;
    if (pl->mig_count || !distinct_gpus(n, pl->gpu_index, pl->num_gpu))
        return false;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        const struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
        int64_t mem = gs__milli_mem_mib(gpu, pl->gpu_milli);
        if (gpu->sharing == GS_GPU_SHARE_WHOLE ? pl->gpu_milli != GS_GPU_MILLI
                                               : gpu->sharing != GS_GPU_SHARE_MILLI)
            return false;
        if (mode == GS__BIND_NEW && gpu->gpu_milli_free < pl->gpu_milli)
            return false;
        if (mode == GS__BIND_ADOPT && (gpu->gpu_milli_used + pl->gpu_milli > gpu->gpu_milli ||
                                       gpu->mem_mib_used + mem > max0(gpu->mem_mib)))
            return false;
        if (mode == GS__BIND_RELEASE &&
            (gpu->gpu_milli_used < pl->gpu_milli || gpu->pods == 0 || gpu->mem_mib_used < mem))
            return false;
    }
    return true;
}

static bool valid_memory(const struct gs_node *n, const struct gs_pod_req *req,
                         const struct gs_placement *pl, enum gs__bind_mode mode)
{
    if (pl->num_gpu != req->num_gpu || pl->gpu_milli != req->gpu_milli || pl->mig_count ||
        !distinct_gpus(n, pl->gpu_index, pl->num_gpu))
        return false;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        const struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
        int64_t ask = mem_ask(gpu, req);
        if (ask <= 0 || pl->gpu_mem_mib[i] != ask)
            return false;
        if (mode == GS__BIND_RELEASE) {
            if (gpu->mem_mib_used < ask || gpu->gpu_milli_used < pl->gpu_milli || gpu->pods == 0)
                return false;
            continue;
        }
        if ((mode == GS__BIND_NEW && !gpu->healthy) || gpu->mem_mib_used + ask > gpu->mem_mib ||
            gpu->gpu_milli_used + pl->gpu_milli > gpu->gpu_milli)
            return false;
    }
    return true;
}

static bool valid_timeslice(const struct gs_node *n, const struct gs_pod_req *req,
                            const struct gs_placement *pl, enum gs__bind_mode mode)
{
    if (pl->num_gpu != req->timeslice_slots || pl->mig_count ||
        !distinct_gpus(n, pl->gpu_index, pl->num_gpu))
        return false;
    for (uint32_t i = 0; i < pl->num_gpu; i++) {
        const struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
        if (gpu->sharing != GS_GPU_SHARE_TIMESLICE)
            return false;
        if (mode == GS__BIND_RELEASE
                ? gpu->replicas_used == 0 || gpu->pods == 0
                : gpu->replicas_used >= gpu->replicas || (mode == GS__BIND_NEW && !gpu->healthy))
            return false;
    }
    return true;
}

static bool valid_mig(const struct gs_node *n, const struct gs_pod_req *req,
                      const struct gs_placement *pl, enum gs__bind_mode mode)
{
    if (pl->num_gpu || pl->mig_count != req->mig_count || pl->mig_count > GS_PLACEMENT_MIG_MAX)
        return false;
    uint8_t mine[GS_NODE_GPUS_MAX] = {0}; /* instances of this placement, per GPU */
    for (uint32_t i = 0; i < pl->mig_count; i++) {
        const struct gs_placement_mig *m = &pl->mig[i];
        if (m->gpu >= n->gpu_count)
            return false;
        const struct gs_gpu *gpu = &n->gpus[m->gpu];
        if (gpu->sharing != GS_GPU_SHARE_MIG || !gpu->mig_model ||
            gs_mig_profile_find(gpu->mig_model, req->mig_profile) != (int)m->profile)
            return false;
        int k = mig_find(gpu, m->profile, m->start);
        if (k < 0 || (mine[m->gpu] >> k & 1))
            return false;
        mine[m->gpu] |= (uint8_t)(1u << k);
        bool held = gpu->mig_held >> k & 1;
        if (mode == GS__BIND_RELEASE ? !held : held || (mode == GS__BIND_NEW && !gpu->healthy))
            return false;
    }
    return true;
}

bool gs__share_valid(const struct gs_node *n, const struct gs_pod_req *req,
                     const struct gs_placement *pl, enum gs__bind_mode mode)
{
    if (gs_pod_req_validate(req, NULL, 0) != GS_OK)
        return false;
    switch (gs_req_kind(req)) {
    case GS_REQ_MILLI:
        return valid_milli(n, req, pl, mode);
    case GS_REQ_MEMORY:
        return valid_memory(n, req, pl, mode);
    case GS_REQ_TIMESLICE:
        return valid_timeslice(n, req, pl, mode);
    case GS_REQ_MIG:
        return valid_mig(n, req, pl, mode);
    }
    return false;
}

int64_t gs__share_apply(struct gs_node *n, const struct gs_pod_req *req,
                        const struct gs_placement *pl, int sign)
{
    int64_t milli = 0;
    switch (gs_req_kind(req)) {
    case GS_REQ_MILLI:
    case GS_REQ_MEMORY:
        for (uint32_t i = 0; i < pl->num_gpu; i++) {
            struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
            int64_t mem = gs_req_kind(req) == GS_REQ_MILLI ? gs__milli_mem_mib(gpu, pl->gpu_milli)
                                                           : pl->gpu_mem_mib[i];
            gpu->gpu_milli_used += sign * pl->gpu_milli;
            gpu->mem_mib_used += sign * mem;
            gpu->pods = (uint16_t)(gpu->pods + sign);
            milli += (int64_t)sign * pl->gpu_milli;
        }
        break;
    case GS_REQ_TIMESLICE:
        for (uint32_t i = 0; i < pl->num_gpu; i++) {
            struct gs_gpu *gpu = &n->gpus[pl->gpu_index[i]];
            gpu->replicas_used = (uint8_t)(gpu->replicas_used + sign);
            gpu->pods = (uint16_t)(gpu->pods + sign);
        }
        break;
    case GS_REQ_MIG: {
        uint32_t touched = 0;
        for (uint32_t i = 0; i < pl->mig_count; i++) {
            const struct gs_placement_mig *m = &pl->mig[i];
            struct gs_gpu *gpu = &n->gpus[m->gpu];
            int k = mig_find(gpu, m->profile, m->start);
            if (k < 0)
                continue; /* not reached: gs__share_valid() found every instance */
            uint8_t bit = (uint8_t)(1u << k);
            uint8_t slices = (uint8_t)gs_mig_compute_mask(gpu->mig_model, gpu->mig[k]);
            gpu->mig_held = (uint8_t)(sign > 0 ? gpu->mig_held | bit : gpu->mig_held & ~bit);
            gpu->mig_slices_used = (uint8_t)(sign > 0 ? gpu->mig_slices_used | slices
                                                      : gpu->mig_slices_used & ~slices);
            if (!(touched >> m->gpu & 1)) {
                touched |= UINT32_C(1) << m->gpu;
                gpu->pods = (uint16_t)(gpu->pods + sign);
            }
        }
        break;
    }
    }
    return milli;
}

/* ---- modes ----------------------------------------------------------------------------------- */

int gs__gpu_mode_check(const char *model_name, const struct gs_gpu_mode *mode,
                       const struct gs_mig_model **mig_model, char *reason, size_t cap)
{
    *mig_model = NULL;
    switch (mode->sharing) {
    case GS_GPU_SHARE_MILLI:
    case GS_GPU_SHARE_WHOLE:
        return GS_OK;
    case GS_GPU_SHARE_TIMESLICE:
        if (mode->replicas < 1)
            return refuse(reason, cap, "time-slicing with 0 replicas");
        return GS_OK;
    case GS_GPU_SHARE_MIG: {
        const struct gs_mig_model *m = gs_mig_model_find(model_name);
        if (!m)
            return refuse(reason, cap, "GPU model %s has no MIG geometry in the table",
                          model_name ? model_name : "(none)");
        if (mode->mig_count < 1)
            return refuse(reason, cap, "MIG mode with no instance");
        int err = gs_mig_layout_check(m, mode->mig, mode->mig_count, reason, cap);
        if (err)
            return err;
        *mig_model = m;
        return GS_OK;
    }
    default:
        return refuse(reason, cap, "unknown sharing mode %u", mode->sharing);
    }
}

void gs__gpu_mode_apply(struct gs_gpu *g, const struct gs_gpu_mode *mode,
                        const struct gs_mig_model *mig_model)
{
    g->sharing = mode->sharing;
    g->replicas = mode->sharing == GS_GPU_SHARE_TIMESLICE ? mode->replicas : 1;
    g->replicas_used = 0;
    g->mig_model = mig_model;
    g->mig_count = 0;
    g->mig_held = 0;
    g->mig_slices = mig_model ? mig_model->compute_slices : 0;
    g->mig_slices_used = 0;
    memset(g->mig, 0, sizeof(g->mig));
    if (!mig_model)
        return;
    /* Kept by ascending start, so that the pick's first free match is the lowest slot. */
    for (uint32_t i = 0; i < mode->mig_count; i++) {
        struct gs_mig_instance v = mode->mig[i];
        uint32_t k = g->mig_count++;
        while (k > 0 && g->mig[k - 1].start > v.start) {
            g->mig[k] = g->mig[k - 1];
            k--;
        }
        g->mig[k] = v;
    }
}

/* ---- names and MIG modes shared with the agent and the inventory reader ------------------ */

static const char *const sharing_names[] = {
    [GS_GPU_SHARE_MILLI] = "fractions",
    [GS_GPU_SHARE_TIMESLICE] = "replicas",
    [GS_GPU_SHARE_MIG] = "mig",
    [GS_GPU_SHARE_WHOLE] = "whole",
};

const char *gs_gpu_sharing_name(enum gs_gpu_sharing s)
{
    return (unsigned)s < sizeof(sharing_names) / sizeof(sharing_names[0]) ? sharing_names[s] : NULL;
}

int gs_gpu_sharing_parse(const char *name, enum gs_gpu_sharing *out)
{
    for (size_t i = 0; name && i < sizeof(sharing_names) / sizeof(sharing_names[0]); i++)
        if (strcmp(name, sharing_names[i]) == 0) {
            *out = (enum gs_gpu_sharing)i;
            return GS_OK;
        }
    return GS_EINVAL;
}

int gs_mig_mode_build(const struct gs_mig_model *model, const struct gs_mig_device *dev, uint32_t n,
                      struct gs_gpu_mode *out, char *why, size_t cap)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        cap = sizeof(scratch);
    }
    if (cap)
        why[0] = '\0';
    memset(out, 0, sizeof(*out));
    out->sharing = GS_GPU_SHARE_WHOLE;
    out->replicas = 1;
    struct gs_gpu_mode m = {.sharing = GS_GPU_SHARE_MIG};
    if (n == 0 || n > GS_MIG_INSTANCES_MAX) {
        (void)snprintf(why, cap, "%u MIG devices, not 1..%d", (unsigned)n, GS_MIG_INSTANCES_MAX);
        return GS_EINVAL;
    }
    if (!model) {
        (void)snprintf(why, cap, "the model is not in the MIG table");
        return GS_EINVAL;
    }
    for (uint32_t i = 0; i < n; i++) {
        const char *name = dev[i].profile && dev[i].profile[0] ? dev[i].profile : NULL;
        int p = name ? gs_mig_profile_find(model, name) : -1;
        if (p < 0) {
            (void)snprintf(why, cap, "mig[%u].profile %s is not a profile of %s", (unsigned)i,
                           name ? name : "(none)", model->name);
            return GS_EINVAL;
        }
        if (dev[i].start < 0 || dev[i].start > 255) {
            (void)snprintf(why, cap, "mig[%u].start is unknown", (unsigned)i);
            return GS_EINVAL;
        }
        m.mig[i] = (struct gs_mig_instance){(uint8_t)p, (uint8_t)dev[i].start};
    }
    m.mig_count = (uint8_t)n;
    char r[GS_REQ_REASON_MAX];
    if (gs_mig_layout_check(model, m.mig, n, r, sizeof(r)) != GS_OK) {
        (void)snprintf(why, cap, "MIG layout: %s", r);
        return GS_EINVAL;
    }
    *out = m;
    return GS_OK;
}
