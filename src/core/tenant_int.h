/*
 * Internal header of the tenant engine (public contract: include/gpusched/tenant.h). The engine
 * is one opaque struct gs_engine whose state is shared by the files below; nothing here is for
 * use outside src/core/tenant*.c.
 *
 *   tenant.c        engine setup, queues, PriorityClasses, reading state, gs_engine_check()
 *   tenant_gang.c   gang records, refusal (gang_judge), gang trials' members, gang timeout
 *   tenant_pod.c    pod identity (uid index, slots, handles), submit, finish, delete, adopt,
 *                   forget, node removal
 *   tenant_undo.c   the undo log: bind / evict with accounting, rollback, commit and events
 *   tenant_place.c  one job in one mode (plain, preempt, reclaim), victims, backfill, reasons
 *   tenant_budget.c disruption budgets (PodDisruptionBudgets) and which victims violate them
 *   tenant_mig.c    dynamic MIG: the best re-partition plan over the cluster, applied and logged
 *   tenant_cycle.c  queue heaps, fair share, the cycle
 *
 * State is incremental: queue allocations and demands are kept up to date on every bind,
 * eviction, submission and finish, and each leaf queue keeps one priority heap per GPU flavor
 * (model mask), so a cycle touches only the heads of the heaps and the nodes it places on. No
 * per-cycle snapshot of the cluster is built.
 *
 * Internal functions are named gs__<name>; each one's contract is the comment at its
 * definition.
 */
#ifndef GPUSCHED_TENANT_INT_H
#define GPUSCHED_TENANT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_int.h"
#include "gpusched/cluster.h"
#include "gpusched/sched.h"
#include "gpusched/tenant.h"
#include "util/heap.h"

#define NO_ID UINT32_MAX
#define BACKFILL_RELEASES_MAX 20000
/* Jobs tried behind a reservation per flavor and cycle (Slurm's bf_max_job_test plays the same
 * role): bounds a cycle's cost when thousands of jobs wait. */
#define BACKFILL_DEPTH 64
/* Room for a refused gang's reason, with a long gang name cut short. */
#define GANG_REASON_MAX 320

struct heap_ent {
    uint32_t pod;
    uint32_t seq; /* the pod's enqueue token; stale when it differs */
    int32_t prio;
    bool restore;      /* a member of a gang in its grace period: first among its priority */
    int64_t submit_ms; /* order among equals: submission (a restoring gang's first one) */
};

struct flavor_queue {
    uint64_t mask;          /* GPU model mask of the pods in it (CPU-only pods: 0) */
    uint32_t fclass;        /* node filter class of the pods in it (for pods pinned to one node,
                               the class of the rest of their filter: gs_filter_base()) */
    struct gs_heap heap;    /* of struct heap_ent, best first (util/heap.h, the core's allocator) */
    uint32_t blocked_cycle; /* cycle in which its head could not be placed */
    uint32_t bf_cycle;      /* cycle in which its head got a backfill reservation */
    uint32_t bf_tries;      /* jobs tried behind that reservation in bf_cycle */
};

struct queue {
    char *name;
    uint32_t parent;
    uint32_t first_child, next_sibling; /* NO_ID terminated */
    bool leaf_used;                     /* has ever held pods */
    bool deleted;                       /* gs_engine_delete_queue(): starts nothing */
    int64_t quota[GS_RES_COUNT], limit[GS_RES_COUNT];
    /* What the queue held when its limit was set below that (gs_engine_update_queue(),
     * gs_engine_delete_queue()): pods placed before stay, so its books may be above the limit
     * by up to this; 0 when the limit was at least what it held. */
    int64_t over_limit[GS_RES_COUNT];
    double weight;
    int64_t min_runtime_ms;
    int64_t alloc[GS_RES_COUNT], demand[GS_RES_COUNT], fair[GS_RES_COUNT];
    struct gs_model_quota *mq; /* per-GPU-model bounds (gs_queue_spec.by_model), n_mq entries */
    uint32_t n_mq;
    struct flavor_queue *flavors;
    uint32_t n_flavors;
    uint32_t pending, running;
    uint64_t ev_suffered, ev_caused;
    /* The queue's best head (queue_next()), cached: valid while ver == hc_ver in cycle
     * hc_cycle and the pod is still pending with token hc_seq. ver counts every change of the
     * queue's heaps and blocked flavors; with many flavors (model masks x filter classes) this
     * saves scanning every flavor of every queue for each job a cycle tries. */
    uint64_t ver, hc_ver;
    uint32_t hc_cycle, hc_pod, hc_flavor, hc_seq;
    bool hc_skipped; /* a flavor blocked in hc_cycle was left out: valid in that cycle only */
};

struct pclass {
    char *name;
    int32_t value;
    bool preemptible;
};

/* Capacity a lost gang member freed, bound in the cluster for the gang's replacements (no pod
 * holds it; gs_engine_check() counts it). */
enum hold_state {
    HOLD_DEAD = 0,     /* given back: released in a committed trial, or the grace ended */
    HOLD_HELD = 1,     /* bound in the cluster */
    HOLD_RELEASED = 2, /* unbound by the gang's trial in progress (the undo log has it) */
};

struct gang_hold {
    struct gs_pod_req req;  /* the lost member's request */
    struct gs_placement pl; /* where it ran; its node still exists */
    uint8_t state;          /* enum hold_state */
};

struct gang {
    char *name;
    uint32_t min_member;
    int64_t timeout_ms;
    uint32_t *members;
    uint32_t n_members, cap_members;
    uint32_t running, succeeded, pending;
    int64_t first_submit_ms; /* -1 until a member arrives */
    bool started;            /* reached min_member once */
    uint32_t tried_cycle;
    bool refused;                 /* its minimum can never fit under a limit (gang_judge()) */
    char reason[GANG_REASON_MAX]; /* why it is refused; "" otherwise */
    uint32_t vic_stamp;           /* victim search (e->vic_stamp) that vic_taken belongs to */
    uint32_t vic_taken;           /* running members taken as victims in that search */
    uint32_t last_fit;            /* members running or placed when its last plain trial
                                     failed, for the reason; UINT32_MAX when not known */
    int64_t grace_ms;    /* how long it may run below min_member after losing members; 0: none */
    int64_t degraded_ms; /* when it last fell below min_member while running (lost members),
                            -1 while it is not in its grace period */
    struct gang_hold *holds; /* capacity its lost members freed, held for their replacements */
    uint32_t n_holds, cap_holds;
};

/* A disruption budget (gs_engine_add_budget()); id = index + 1. */
struct budget {
    char *name;      /* "namespace/name" */
    int32_t allowed; /* disruptions allowed now, >= 0 */
    int64_t left;    /* what the victim search e->vic_stamp left of it (valid when stamp is) */
    uint32_t stamp;  /* victim search that `left` belongs to */
};

struct tpod {
    char *name;
    uint32_t queue, pclass, gang;
    struct gs_pod_req req;
    int64_t r[GS_RES_COUNT]; /* what its queue is charged: the request, GPU at its charge
                                (charge.h); while RUNNING the charge of where it landed */
    int64_t pend_gpu_milli;  /* GPU charge while PENDING (gs_charge_request() at submit): what
                                r[GS_RES_GPU] goes back to when it leaves its GPUs */
    int64_t est_ms;
    enum gs_tpod_state state;
    struct gs_placement pl;
    int64_t submit_ms, start_ms, end_ms;
    uint32_t evictions;
    enum gs_evict_reason reason;
    uint32_t seq;
    uint32_t node_slot;  /* index in its node's pod list while RUNNING */
    uint32_t bind_trial; /* e->trial when last bound: a trial never evicts what it bound */
    uint32_t vic_stamp;  /* victim search (e->vic_stamp) that took it */
    /* Live-cluster identity (NULL / 0 in the simulator). */
    char *uid, *ns;
    uint32_t fclass;        /* node filter class; the pod holds one reference until forgotten */
    int64_t created_ms;     /* creation time, for "newest first" */
    bool adopted;           /* came in running */
    bool foreign;           /* another scheduler's: capacity only, in the root's books */
    bool preempt_never;     /* preemptionPolicy Never: no priority preemption for it */
    bool forgotten;         /* slot no longer a pod (free, or a gang member's tombstone) */
    uint32_t gen;           /* slot generation, for handles */
    char *reason_text;      /* last UNSCHEDULABLE text, owned */
    uint64_t explained_at;  /* gs_cluster_changes() when last explained */
    uint64_t explained_aux; /* its gang's members and last_fit then (0 without a gang) */
    bool fits_none;         /* when last explained, it fit no node even when empty
                               (gs__fits_no_node()): it holds up nothing behind it */
    uint32_t budgets[GS_POD_BUDGETS_MAX]; /* disruption budget ids covering it, 0-padded */
    uint8_t nbudgets;                     /* entries used in budgets */
    bool pdb_viol;      /* violates a budget in victim search pdb_stamp (gs__budget_classify) */
    uint32_t pdb_stamp; /* victim search pdb_viol belongs to */
};

/* One change in the undo log. */
enum undo_kind {
    UNDO_EVICT = 0,
    UNDO_BIND = 1,
    UNDO_HOLD = 2, /* a gang's hold released for its trial: pod = gang id, by = hold index */
    UNDO_MIG = 3,  /* a MIG GPU re-partitioned for pod (dynamic MIG): by = node, reason = GPU
                      index, pl.mig[0..mig_count) its layout before */
};

struct undo {
    uint32_t pod;
    uint8_t kind;   /* enum undo_kind */
    uint8_t reason; /* evict reason */
    uint32_t by;    /* preemptor */
    struct gs_placement pl;
};

struct reservation {
    int64_t start_ms; /* the reserved job's shadow start */
    uint8_t *nodes;   /* node flags (1 = reserved) */
};

/* A sort key: pods are sorted by (k1, k2, pod) ascending. Keys are computed before sorting, so
 * the comparison needs no context (the core keeps no globals). */
struct sort_key {
    int64_t k1;
    int64_t k2;
    int64_t k3;
    uint32_t pod;
};

struct gs_engine {
    struct gs_cluster *c;
    struct gs_sched *sched;
    struct gs_engine_config cfg;
    struct queue *q;
    uint32_t nq, capq;
    /* Per queue and GPU model: milli-GPU its subtree's running pods hold on nodes of that model,
     * m_alloc[queue * GS_MODELS_MAX + model]; capq queues' worth. */
    int64_t *m_alloc;
    uint32_t m_alloc_capq;
    /* Per queue and GPU model, laid out as m_alloc and computed each cycle while some queue has
     * per-model entries (m_fair_on): the demand a queue's subtree has for GPUs of the model and
     * its fair share of them (tenant_cycle.c, "fair share per GPU model"). m_cap: milli-GPU of
     * each model the queues share. m_fair_capq queues' worth. */
    int64_t *m_demand, *m_fair;
    int64_t m_cap[GS_MODELS_MAX];
    uint32_t m_fair_capq;
    bool m_fair_on;
    struct pclass *pc;
    uint32_t npc, cappc;
    struct gang *g;
    uint32_t ng, capg;
    struct tpod *p;
    uint32_t np, capp;
    uint32_t **node_pods; /* running pods per node */
    uint32_t *node_npods, *node_cappods;
    uint32_t nodes_cap;
    struct undo *log;
    uint32_t nlog, caplog;
    struct reservation *resv;
    uint32_t nresv, capresv;
    uint32_t cycle;
    uint64_t evictions_total;
    int64_t capacity[GS_RES_COUNT]; /* cluster totals, for capacity_nodes nodes */
    uint64_t mutations;             /* bumped by every committed bind or eviction, finish, delete */
    uint32_t *end_order;            /* running pods with estimates by estimated end (backfill) */
    struct sort_key *keys;          /* scratch for sort_pods() */
    uint32_t keys_cap;
    uint32_t end_order_n, end_order_cap;
    uint64_t end_order_at; /* `mutations` when end_order was built; UINT64_MAX: never */
    uint64_t capacity_gen; /* gs_cluster_capacity_gen() when capacity was read; 0 never */
    uint64_t filter_gen;   /* gs_filter_gen() when the pending charges were last refreshed */
    int64_t foreign_alloc[GS_RES_COUNT]; /* what foreign pods hold */
    uint32_t *uid_slots;                 /* open addressing over uids: pod id + 1, 0 empty */
    uint32_t uid_cap, uid_len;           /* slots (power of two), live entries (with tombstones) */
    uint32_t *free_pods;                 /* forgotten pod slots ready for reuse */
    uint64_t evictions_reused;           /* evictions of pods whose slots were reused */
    uint32_t nfree, capfree;
    int64_t now_ms;
    int64_t bind_delay_ms; /* start delay of binds gs__commit() reports (gs_engine_migrate()'s
                              restart delay while it commits; 0 otherwise) */
    struct gs_rng *rng;
    struct gs_cycle_stats *st;
    /* scratch for victim search */
    uint32_t *cand;
    uint32_t ncand_cap;
    int64_t *qdelta; /* per queue, resource of the fairness check */
    int64_t *vloss;  /* per victim in e->cand: what its queue loses (reclaim rule) */
    uint32_t *unb;   /* pods unbound while a victim set is tried on one node */
    int64_t *vals;   /* scratch for gang_judge(), as long as the largest gang */
    uint32_t vloss_cap, unb_cap, vals_cap;
    uint32_t *taken; /* every pod a victim set on one node takes (gang mates included) */
    uint32_t taken_cap;
    struct budget *b; /* disruption budgets, id - 1 */
    uint32_t nb, capb;
    uint32_t trial;     /* bumped by every job trial (try_job_mode) */
    uint32_t vic_stamp; /* bumped by every victim set tried on a node */
};

/* ---- small inline helpers -------------------------------------------------------------------- */

static inline void req_vector(const struct gs_pod_req *req, int64_t r[GS_RES_COUNT])
{
    r[GS_RES_GPU] = (int64_t)req->num_gpu * req->gpu_milli;
    r[GS_RES_CPU] = req->cpu_milli;
    r[GS_RES_MEM] = req->mem_mib;
}

static inline int32_t prio_of(const struct gs_engine *e, const struct tpod *p)
{
    return e->pc[p->pclass].value;
}

static inline bool is_leaf(const struct queue *q)
{
    return q->first_child == NO_ID;
}

static inline int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* ---- tenant.c -------------------------------------------------------------------------------- */

void gs__account(struct gs_engine *e, uint32_t qi, int which, const int64_t r[], int sign);
void gs__account_alloc(struct gs_engine *e, uint32_t pod, uint32_t node, int sign);
void gs__charge_landed(struct gs_engine *e, uint32_t pod, const struct gs_placement *pl);
void gs__charge_pending(struct gs_engine *e, uint32_t pod);
void gs__charge_refresh_pending(struct gs_engine *e);
int gs__model_of_node(const struct gs_engine *e, uint32_t node);
const struct gs_model_quota *gs__queue_model(const struct queue *q, uint32_t model);
char *gs__dup_str(const char *s);
int gs__ensure_nodes(struct gs_engine *e);
void gs__fmt_amount(char *buf, size_t cap, int r, int64_t v);
int gs__grow(void **ptr, uint32_t *cap, uint32_t need, size_t elem);

/* ---- tenant_budget.c ------------------------------------------------------------------------- */

bool gs__budget_classify(struct gs_engine *e, uint32_t pod);
void gs__budget_evicted(struct gs_engine *e, uint32_t pod);
void gs__budget_free(struct gs_engine *e);
int gs__budget_valid_ids(const struct gs_engine *e, const uint32_t *ids, uint32_t n);

/* ---- tenant_gang.c --------------------------------------------------------------------------- */

void gs__fail_timed_out_gangs(struct gs_engine *e);
int gs__gang_hold_reserve(struct gs_engine *e, uint32_t gi);
void gs__gang_hold_add(struct gs_engine *e, uint32_t gi, const struct gs_pod_req *req,
                       const struct gs_placement *pl);
void gs__gang_settle(struct gs_engine *e, uint32_t gi);
void gs__gang_degrade(struct gs_engine *e, uint32_t gi, int64_t now_ms);
void gs__gang_drop_node_holds(struct gs_engine *e, uint32_t node);
int gs__gang_expire_grace(struct gs_engine *e);
void gs__gang_judge(struct gs_engine *e, uint32_t gi);
uint32_t gs__gang_slots(const struct gs_engine *e, const uint32_t *members, uint32_t nm);
uint32_t gs__job_members(struct gs_engine *e, uint32_t head, uint32_t **out, uint32_t *need);

/* ---- tenant_undo.c --------------------------------------------------------------------------- */

int gs__commit(struct gs_engine *e, uint32_t mark, bool backfill);
int gs__do_bind(struct gs_engine *e, uint32_t pod, const struct gs_placement *pl);
int gs__do_evict(struct gs_engine *e, uint32_t pod, enum gs_evict_reason reason, uint32_t by);
void gs__emit(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
              enum gs_evict_reason reason, const struct gs_placement *pl);
void gs__emit_text(struct gs_engine *e, enum gs_event_kind kind, uint32_t pod, uint32_t by,
                   enum gs_evict_reason reason, const struct gs_placement *pl, const char *text);
int gs__node_list_add(struct gs_engine *e, uint32_t pod);
void gs__node_list_remove(struct gs_engine *e, uint32_t pod);
void gs__rollback(struct gs_engine *e, uint32_t mark);
int gs__release_holds(struct gs_engine *e, uint32_t gi);

/* ---- tenant_mig.c ---------------------------------------------------------------------------- */

int gs__place_mig_dynamic(struct gs_engine *e, uint32_t pod, const struct gs_pod_req *req);
void gs__undo_mig(struct gs_engine *e, const struct undo *u);

/* ---- tenant_place.c -------------------------------------------------------------------------- */

bool gs__fits_no_node(const struct gs_engine *e, const struct tpod *p, char *why, size_t cap);
void gs__evict_text(const struct gs_engine *e, uint32_t victim, uint32_t by,
                    enum gs_evict_reason reason, char *buf, size_t cap);
size_t gs__victim_note(const struct gs_engine *e, uint32_t victim, uint32_t by,
                       enum gs_evict_reason reason, char *buf, size_t len, size_t cap);
uint64_t gs__model_room(const struct gs_engine *e, const struct tpod *p);
int gs__note_unschedulable(struct gs_engine *e, uint32_t pod);
int gs__reserve(struct gs_engine *e, uint32_t head);
bool gs__respects_reservations(const struct gs_engine *e, uint32_t mark);
int gs__try_job_mode(struct gs_engine *e, uint32_t head, int mode, uint32_t mark);

/* ---- tenant_cycle.c -------------------------------------------------------------------------- */

int gs__enqueue(struct gs_engine *e, uint32_t pod);

#endif /* GPUSCHED_TENANT_INT_H */
