/*
 * Internals of the placement engine (src/core/sched.c), shared with the policies: one file
 * each (policy_*.c), each an ops table the registry in sched.c lists. Not installed.
 */
#ifndef GPUSCHED_CORE_SCHED_INT_H
#define GPUSCHED_CORE_SCHED_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "gpusched/cluster.h"
#include "gpusched/frag.h"
#include "gpusched/rng.h"
#include "gpusched/sched.h"

/* Fixed maximums the reference uses to scale CPU and GPU (MaxSpecCpu, MaxSpecGpu). */
#define MAX_SPEC_CPU_MILLI 128000.0
#define MAX_SPEC_GPU_MILLI 8000
#define MEMO_CAP_MAX (1u << 18)
/* score_kind / pick_kind: "not this policy's kind", use the shared rule (positive, never an
 * error code). */
#define GS__KIND_SHARED 1

struct policy_ops {
    const char *name;
    const char *label;
    /* Scores s->feasible[0..nf) into s->scores[0..nf). */
    int (*score)(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf, struct gs_rng *rng);
    /* Picks the GPU of a shared (num_gpu == 1, gpu_milli < 1000) pod on node n. */
    uint32_t (*pick_share)(struct gs_sched *s, const struct gs_node *n,
                           const struct gs_pod_req *req, struct gs_rng *rng);
    /* Picks the req->num_gpu fully free GPUs of a whole-GPU pod on node n (the node is known to
     * have that many) into gpu_index[0..num_gpu), so a topology-aware policy can choose its
     * GPUs; every policy today takes gs__pick_whole (NVLink-aware on nodes that know their
     * links). */
    void (*pick_whole)(struct gs_sched *s, const struct gs_node *n, const struct gs_pod_req *req,
                       uint8_t *gpu_index);
    /* Scores a request of a kind beyond milli (memory, MIG); NULL: the shared best-fit score
     * of sched.c for every kind. Returns GS_OK, or GS__KIND_SHARED to leave the kind to best fit.
     */
    int (*score_kind)(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf);
    /* Picks the GPUs (instances) of such a request on node `node`, the one score_kind scored;
     * NULL, or GS__KIND_SHARED: gs_node_pick_gpus(). GS_OK or GS_EUNSCHEDULABLE. */
    int (*pick_kind)(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                     const struct gs_pod_req *req, struct gs_placement *pl);
    /* The score of node `node` for a milli request, a pure function of the node's state (fixed
     * while its generation is) and the request: what score() writes for that node whatever the
     * other feasible nodes. Lets the placement index (sched_index.c) keep each request class's
     * best node; NULL: the policy's scores are not per node, and every decision scans. GS_OK
     * and *score, or an error code. `cls` is node_class()'s for the request (0 without one). */
    int (*node_score)(struct gs_sched *s, uint32_t node, const struct gs_pod_req *req, uint32_t cls,
                      int32_t *score);
    /* The policy's class of a request for node_score (FGD's interned class); NULL: none. GS_OK
     * or an error code. */
    int (*node_class)(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls);
    /* For a policy that takes one of nf >= 2 feasible nodes (in index order) by a draw and
     * scores nothing (Random): the draw, 0..nf-1, exactly the one score() makes. NULL: none. */
    uint32_t (*node_draw)(struct gs_rng *rng, uint32_t nf);
};

/* A request class: what the FGD score of a pod depends on. Compared with memcmp, so laid out
 * without implicit padding (the members beyond `mask` are 0 for a milli request). */
struct req_class {
    int64_t cpu_milli;
    int32_t gpu_milli;
    uint32_t num_gpu;
    uint64_t mask;
    int64_t gpu_mem_mib;
    uint8_t kind;
    uint8_t gpu_mem_pct;
    uint8_t timeslice_slots;
    uint8_t mig_count;
    char mig_profile[GS_MIG_NAME_MAX];
    uint8_t pad[4];
};
_Static_assert(sizeof(struct req_class) == 56, "no implicit padding in a class key");

struct score_entry {
    uint64_t gen; /* node generation the score is valid for; 0 = empty */
    int32_t score;
};

struct memo_entry {
    uint64_t hash; /* 0 = empty slot */
    int64_t cpu_milli_free;
    uint32_t cls;
    uint32_t model_id;
    uint32_t n_gpu;
    int32_t score;
    int16_t free_desc[GS_NODE_GPUS_MAX];
};

struct gs__index;
struct gs__fill;

struct gs_sched {
    struct gs_cluster *c;
    const struct policy_ops *ops;
    const struct gs_workload *w;
    bool w_modes;   /* w has a type beyond milli (gs_workload_has_modes): every node is judged by
                       gs_frag_node_gpus() */
    uint32_t *rank; /* tie-break rank by node index; rank_len entries */
    uint32_t rank_len;
    uint32_t *feasible;    /* scratch: feasible node indices of this decision */
    int32_t *scores;       /* scratch: their scores */
    uint32_t nodes_cap;    /* capacity of every per-node array */
    struct gs_frag *nfrag; /* F(node) cache */
    uint64_t *nfrag_gen;   /* generation each nfrag entry is valid for (0 = none) */
    struct req_class *classes;
    uint32_t n_classes, classes_cap;
    uint32_t *class_slots; /* open addressing, class index + 1; class_slots_cap slots */
    uint32_t class_slots_cap;
    struct score_entry *cache; /* [node * cache_classes + class] */
    uint32_t cache_classes;
    struct memo_entry *memo;
    uint32_t memo_cap, memo_len;
    /* The cluster fragmentation kept incrementally (gs_sched_cluster_frag): frag_counted[i] is
     * node i's total_count_milli as counted in frag_total, valid for the cluster's refreshes
     * up to frag_seen; frag_cap entries. frag_valid false: recount every node on next use. */
    int64_t *frag_counted;
    int64_t frag_total;
    uint64_t frag_seen;
    uint32_t frag_cap;
    bool frag_valid;
    struct gs__index *ix;   /* the placement index (sched_index.c); NULL until first used */
    uint32_t nodes_to_find; /* 0 = all */
    uint32_t next_start;    /* where the next bounded scan starts */
    struct gs__fill *fill;  /* FGD-fill's memo (policy_fgdfill.c); NULL until first used */
};

/* ---- shared helpers ---------------------------------------------------------------------- */

static inline bool is_share(const struct gs_pod_req *req)
{
    return req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/*
 * Whether node n's fragmentation needs the per-GPU measure (gs_frag_node_gpus()) rather than
 * the free-milli one (gs_frag_node()): the workload has types beyond milli, or the node has a
 * GPU that is not a plain fractions GPU. For a milli workload on fractions GPUs, the case of
 * the 13-trace comparison, the two are bit-for-bit equal and the cheaper, memoised one is used.
 */
static inline bool gs__frag_full(const struct gs_sched *s, const struct gs_node *n)
{
    return s->w_modes ||
           (n->share_flags & (GS_FIT_HAS_WHOLE | GS_FIT_HAS_TIMESLICE | GS_FIT_HAS_MIG));
}

/*
 * How the filter judges a node for one decision, chosen once per decision so that the hot loop
 * for a plain milli request is the one-cache-line test it always was: FIT_VIEW, a milli request
 * of whole GPUs or no GPU, no other resources (the view decides); FIT_SHARE, a milli fraction
 * without other resources (the view decides unless the node has a whole-mode GPU); FIT_ANY,
 * everything else (gs_cluster_fits_at()).
 */
enum fit_how { FIT_VIEW, FIT_SHARE, FIT_ANY };

static inline enum fit_how fit_how_of(const struct gs_pod_req *req)
{
    if (gs_req_kind(req) != GS_REQ_MILLI || req->xres_count != 0)
        return FIT_ANY;
    return is_share(req) ? FIT_SHARE : FIT_VIEW;
}

static inline bool gs__fits(const struct gs_cluster *c, const struct gs_node_fit *fit, uint32_t i,
                            const struct gs_pod_req *req, enum fit_how how)
{
    switch (how) {
    case FIT_VIEW:
        return gs_fit_ok_milli(&fit[i], req);
    case FIT_SHARE:
        return gs_fit_ok_milli(&fit[i], req) && (!(fit[i].share_flags & GS_FIT_HAS_WHOLE) ||
                                                 gs_node_fits(gs_cluster_node(c, i), req));
    case FIT_ANY:
        break;
    }
    return gs_cluster_fits_at(c, fit, i, req);
}

/* FGD's score from F before and after a placement: trunc(100 x sigmoid((before - after) /
 * 1000)) (policy_fgd.c). */
int32_t gs__fgd_score_of(double f_before, double f_after);

/* FGD on the per-GPU measure (policy_fgd_modes.c). The score of a milli request on node n (a
 * sharing pod: its best GPU, the first by index reaching the best, into *gpu when not NULL). */
int32_t gs__fgd_milli_full(const struct gs_sched *s, const struct gs_node *n,
                           const struct gs_pod_req *req, double f_before, uint32_t *gpu);
/* The FGD request class of req (interned) with the per-(node, class) score cache wide enough
 * for it (policy_fgd.c). GS_OK or GS_ENOMEM. */
int gs__fgd_class(struct gs_sched *s, const struct gs_pod_req *req, uint32_t *cls);
/* FGD's score_kind and pick_kind for memory and MIG requests (policy_fgd_modes.c). */
int gs__fgd_score_kind(struct gs_sched *s, const struct gs_pod_req *req, uint32_t nf);
int gs__fgd_pick_kind(struct gs_sched *s, const struct gs_node *n, uint32_t node,
                      const struct gs_pod_req *req, struct gs_placement *pl);

/* ---- the placement index (sched_index.c) ----------------------------------------------- */

/* gs__index_best(): the index cannot answer this decision, scan (positive, never an error). */
#define GS__INDEX_SCAN 1

/* The node a full scan of filter class `cls` would choose for milli request `req` (the highest
 * score, the smallest rank among equal ones; for a drawing policy the node its draw from `rng`
 * names), from the index: GS_OK and *node;
 * GS_EUNSCHEDULABLE when no node is feasible; GS__INDEX_SCAN when the index does not apply or
 * ran out of memory (the caller scans). The request is valid and the per-node arrays sized. */
int gs__index_best(struct gs_sched *s, const struct gs_pod_req *req, uint32_t cls,
                   struct gs_rng *rng, uint32_t *node);
/* Marks every class for a rebuild (a new workload changes every score). NULL: no-op. */
void gs__index_invalidate(struct gs__index *ix);
/* Frees the index; NULL: no-op. */
void gs__index_free(struct gs__index *ix);

/* Shared pod, best fit: the GPU with the least free milli that still fits (sched.c). */
uint32_t gs__pick_share_best(struct gs_sched *s, const struct gs_node *n,
                             const struct gs_pod_req *req, struct gs_rng *rng);

/* Whole GPUs: gs__pick_whole_gpus() (share.c): the first num_gpu fully free GPUs by index, or
 * on a node with NVLink peers the topology's choice (sched.c). */
void gs__pick_whole(struct gs_sched *s, const struct gs_node *n, const struct gs_pod_req *req,
                    uint8_t *gpu_index);

/* The policies, in registry order (policy_*.c). */
extern const struct policy_ops gs__policy_random, gs__policy_dotprod, gs__policy_clustering,
    gs__policy_packing, gs__policy_bestfit, gs__policy_fgd, gs__policy_fgdband, gs__policy_fgdfill;

/* FGD-fill's memo: frees it (NULL: no-op); forgets every entry (a new workload). */
void gs__fill_free(struct gs__fill *f);
void gs__fill_reset(struct gs__fill *f);

#endif
