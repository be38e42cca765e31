/*
 * Internals of `gpusched scheduler` shared by its files: sched_opts.c (the options),
 * cmd_scheduler.c (the loop, informers, evictions and nominations) and sched_bind.c (Bindings:
 * assume, send, confirm or forget, back off; gang members that fail to bind). One scheduling thread
 * owns everything here; nothing is locked.
 */
#ifndef GPUSCHED_CLI_SCHED_INT_H
#define GPUSCHED_CLI_SCHED_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpusched/compiler.h"
#include "gpusched/kevents.h"
#include "gpusched/kmigplan.h"
#include "gpusched/kube.h"
#include "gpusched/kworld.h"
#include "gpusched/log.h"
#include "gpusched/schedmetrics.h"
#include "gpusched/webhook.h"

struct gs__sched_acct; /* sched_acct.h */

/* The re-partition a dynamic MIG BIND needs (kworld.h gs_kmig_change, copied). */
struct gs__sched_mig {
    uint32_t gpu;
    bool known; /* the node has an agent inventory: the plan can be written */
    uint32_t n_destroy, n_create, n_layout;
    struct gs_kmig_inst destroy[GS_MIG_INSTANCES_MAX], create[GS_MIG_INSTANCES_MAX],
        layout[GS_MIG_INSTANCES_MAX];
};

/* A decision of the last cycle, sent after it. */
struct action {
    enum gs_kevent_kind kind;
    char *ns, *name, *uid, *node, *text, *by;
    char *by_uid;   /* EVICT: metadata.uid of `by`; NULL when unknown */
    char *detail;   /* EVICT: why (kworld.h gs_kevent.detail); BIND: whom it evicted; or NULL */
    json_t *gpus;   /* BIND: the assignment's gpus array */
    char *gang;     /* BIND: "ns/podgroup" of the pod's gang; NULL when none */
    char *queue;    /* the pod's queue (logged as queue=Q); NULL when unknown */
    uint64_t cycle; /* the scheduling cycle that decided it (1 = the first) */
    struct gs__sched_mig *mig; /* BIND on a GPU to re-partition first (--dynamic-mig); NULL */
};

/*
 * A pod held for a MIG re-partition (sched_migplan.c): the engine holds its instance on the
 * planned layout, the plan is on the Node (gpusched.io/mig-plan), and the Binding is sent once
 * the node's inventory shows the layout; a failure or the timeout releases it.
 */
struct migplan {
    struct action bind;          /* the BIND, owned (bind.mig is the change) */
    char *key;                   /* "ns/name" */
    char id[GS_KMIGPLAN_ID_LEN]; /* the plan's id */
    int64_t due_ms;              /* monotonic: when it times out */
    char *failed;                /* the agent's reason for a failure; NULL */
};

/*
 * A gang member whose Binding was refused, waiting to send it again: the engine keeps its
 * placement (its GPUs are held for it) until the Binding goes through or GANG_RETRY_MS after
 * the first refusal, when the gang is released whole (sched_bind.c).
 */
struct gang_retry {
    struct action bind; /* the BIND, owned */
    int64_t first_ms;   /* monotonic: its first refusal */
    int64_t due_ms;     /* monotonic: when it is sent again */
    uint32_t tries;     /* refusals so far */
};

/*
 * A preemptor waiting for its victims to leave, as kube-scheduler's nominated pod: the engine
 * holds its GPUs on the node already (so no other pod is given them), status.nominatedNodeName
 * says where it goes, and the Binding is sent once every victim is gone from the API server.
 */
struct nomination {
    struct action bind; /* the preemptor's BIND */
    char *key;          /* its "ns/name" */
    json_t *victims;    /* "ns/name" -> true: evicted, not yet deleted */
    char *blocked;      /* why the node cannot be freed ("PodDisruptionBudget ns/name"); NULL */
    char *blocked_by;   /* the victim whose eviction was refused */
    bool failed;        /* an eviction was refused: give the node up */
};

struct bind_call;

struct sched {
    struct gs_kube_client *client;
    struct gs_kworld *world;
    struct gs_kube_leader *leader; /* NULL without leader election */
    const char *identity;          /* holderIdentity and reportingInstance */
    const char *sched_name;        /* the spec.schedulerName served */
    struct action *acts;
    size_t nacts, capacts;
    bool dry_run;
    bool dirty;
    bool lost; /* the Lease was lost: send nothing more */
    uint64_t binds, bind_failures, evictions, status_patches;
    uint64_t cycle;                  /* the scheduling cycle running or last run (1 = the first) */
    struct gs_kevents *events;       /* the Event recorder (kevents.h); NULL: none written */
    struct gs_schedmetrics *metrics; /* NULL when not served; its calls take NULL */
    struct gs_webhook_server *webhook; /* the admission webhook; NULL when not served */
    /* Pods held out of the world until due: "ns/name" -> {"ns", "name", "due_ms"}. A refused
     * bind's pod waits out its backoff here (holding nothing); a pod whose bind or re-read
     * failed on the way is read again from here. Watch events of held pods are not applied:
     * the pod is read afresh when due. */
    json_t *held;
    json_t *bind_attempts; /* "ns/name" -> refused binds in a row (for the backoff) */
    json_t *pdb_blocked;   /* "ns/name" -> "blocked by PodDisruptionBudget ..." (its reason) */
    json_t *pending_said;  /* "ns/name" -> the PodScheduled=False message last written, for the
                              pods waiting at the last cycle (written once per change) */
    json_t *failed_told;   /* "ns/name" -> true: a FailedScheduling Event posted by do_pending
                              since the cycle began, so say_pending posts none more */
    json_t *unblock;       /* "ns/name" -> due_ms: when its avoided nodes are tried again */
    json_t *queue_status;  /* Queue name -> the status last written */
    struct nomination *noms;
    size_t nnoms, capnoms;
    struct bind_call *in_flight; /* Bindings sent and not answered yet (sched_bind.c), a list */
    struct gang_retry *gretry;   /* gang members waiting to send their Binding again */
    size_t ngretry, capgretry;
    json_t *gang_bound;          /* gang "ns/pg" -> {"ns/name": true}: its members bound by us */
    struct gs__sched_acct *acct; /* --accounting (sched_acct.h); NULL when not recorded */
    bool follower;    /* `gpusched accountant`: it records the leader's decisions, makes none */
    bool dynamic_mig; /* --dynamic-mig */
    int64_t mig_plan_timeout_ms; /* --mig-plan-timeout-s in ms */
    struct migplan *plans;       /* pods held for a re-partition */
    size_t nplans, capplans;
    uint64_t plan_seq; /* plans written so far (their ids) */
};

/* kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds. */
#define BIND_BACKOFF_INITIAL_MS 1000
#define BIND_BACKOFF_MAX_MS 10000
/* How long a preemptor avoids a node whose PodDisruptionBudget refused an eviction. */
#define PDB_RETRY_MS 30000
/* How long a gang member whose Binding was refused retries on the GPUs held for it before its
 * gang is released whole (issue 7: "the failed members retry on the GPUs held for them for
 * 30 s"). Its tries back off as a refused pod's do (1 s doubling), the last at 30 s. */
#define GANG_RETRY_MS 30000

/* Outcomes of an eviction. */
enum evict_result {
    EVICT_SENT,    /* the API server accepted it: the pod is deleted or terminating */
    EVICT_GONE,    /* it was gone already (404) */
    EVICT_BLOCKED, /* 429: a PodDisruptionBudget forbids it now */
    EVICT_FAILED,  /* any other refusal */
};

/* The command line of `gpusched scheduler` (sched_opts.c); the strings borrow argv. */
struct gs__sched_opts {
    const char *kubeconfig;   /* --kubeconfig; NULL: $KUBECONFIG, in-cluster, ~/.kube/config */
    const char *name;         /* --scheduler-name; NULL: GS_KWORLD_SCHEDULER */
    const char *dq;           /* --default-queue; NULL: the world's default */
    const char *policy;       /* --policy, checked by gs__cli_policy_arg (default fgd) */
    const char *lease_ns;     /* --lease-namespace (default kube-system) */
    const char *lease_name;   /* --lease-name (default gpusched) */
    const char *metrics_addr; /* --metrics-addr; NULL: not served */
    const char *wh_addr;      /* --webhook-addr; NULL: not served (then cert and key NULL too) */
    const char *wh_cert;      /* --webhook-cert */
    const char *wh_key;       /* --webhook-key */
    const char *acct_path;    /* --accounting; NULL: not recorded */
    const char *team_label;   /* --team-label, never empty */
    const char *pool_label;   /* --pool-label, never empty */
    double qps;               /* --qps, requests/s; 0: the client's default */
    long burst;               /* --burst, requests; 0: the client's default */
    long max_runtime_s;       /* --max-runtime-s, seconds; 0: no limit */
    long shutdown_timeout_s;  /* --shutdown-timeout-s, seconds 0..3600 (default 10) */
    bool dry;                 /* --dry-run */
    bool kai_preemptible;     /* --kai-preemptible-threshold given */
    int32_t kai_threshold;    /* its N (default 100) */
    int elect;                /* --leader-elect: 1, 0, or -1 for the default (on unless dry) */
    enum gs_log_format log_format; /* --log-format (default text) */
    bool dynamic_mig;              /* --dynamic-mig (sched_migplan.c) */
    long mig_plan_timeout_s;       /* --mig-plan-timeout-s, 1..3600 (default 60) */
    bool mig_timeout_given;        /* --mig-plan-timeout-s was given */
    bool follower; /* `gpusched accountant` (cmd_accountant.c): no Lease, no cycles that place,
                      nothing written to the API server; acct_path set */
};

/**
 * Reads the command line (argv without the subcommand's name) into o. Returns -1 to go on and
 * run, or the exit code to return at once: 0 after --help or --version (printed on stdout), 2
 * after a usage error (printed on stderr naming the option).
 */
int gs__sched_parse_opts(int argc, char **argv, struct gs__sched_opts *o);

/**
 * Runs the scheduler (or, with o->follower, the accountant) with the options read; returns its
 * exit code (0 stopped; 1 internal error or the Lease lost; 2 bad configuration).
 */
int gs__sched_run(const struct gs__sched_opts *o);

/** Selects how gs__sched_logf writes its lines from now on (call before any thread logs). */
void gs__sched_log_set_format(enum gs_log_format fmt);

/** CLOCK_MONOTONIC in milliseconds (deadlines and backoffs). */
int64_t gs__sched_mono_ms(void);

/** CLOCK_REALTIME in milliseconds since the epoch (what the world is told as now_ms). */
int64_t gs__sched_wall_ms(void);

/** One stamped log line on stderr at level ("info", "warn", "error"). */
void gs__sched_logf(const char *level, const char *fmt, ...) GS_PRINTF(2, 3);

/** Frees what an action owns (not the action). */
void gs__sched_action_fini(struct action *a);

/** Tells of a decision about the action's pod as an Event (aggregated: kevents.h). */
void gs__sched_post_event(struct sched *s, const struct action *a, const char *type,
                          const char *reason, const char *verb, const char *note);

/** Writes "/api/v1/namespaces/NS/pods/NAME[/SUB]" into buf (cap bytes, truncated to fit). */
void gs__sched_pod_path(char *buf, size_t cap, const char *ns, const char *name, const char *sub);

/** "ns/name", malloc'd; NULL when out of memory. */
char *gs__sched_key_of(const char *ns, const char *name);

/** Holds pod ns/name out of the world until due_ms (monotonic), then reads it again. */
void gs__sched_hold_pod(struct sched *s, const char *ns, const char *name, int64_t due_ms);

/** True while pod ns/name is held. */
bool gs__sched_is_held(struct sched *s, const char *ns, const char *name);

/** Reads the held pods that are due again from the API server into the world. */
void gs__sched_process_held(struct sched *s);

/**
 * Writes PodScheduled=False with reason and message on the pod's status.
 * @return GS_OK; GS_ENOENT (gone); another code when the write failed (logged).
 */
int gs__sched_patch_scheduled_false(struct sched *s, const char *ns, const char *name,
                                    const char *reason, const char *msg);

/**
 * One GPU of the gpusched.io/assigned-gpus annotation (docs/schemas/assigned-gpus.schema.json):
 * {"index", "milli", "uuid"?, "mem_mib"? (memory requests), "mig"? {"profile", "start"} (MIG)}.
 * @param g  borrowed.
 * @return a new object the caller owns; NULL when out of memory.
 */
json_t *gs__sched_assigned_gpu(const struct gs_kgpu *g);

/**
 * Sends a pod's Binding without waiting (the engine has assumed the placement); the answer is
 * handled inside gs_kube_client_step(). Takes the action over (it is left empty).
 */
void gs__sched_bind(struct sched *s, struct action *a);

/**
 * Sends the Eviction of a victim (dry_run: only asks whether it would be allowed). On
 * EVICT_BLOCKED `pdb` receives the budget "ns/name"; on EVICT_FAILED the HTTP refusal.
 */
enum evict_result gs__sched_evict_pod(struct sched *s, const struct action *a, bool dry_run,
                                      char *pdb, size_t pdb_cap);

/** Marks a victim with the DisruptionTarget condition before its eviction. */
void gs__sched_mark_disruption_target(struct sched *s, const struct action *a);

/**
 * Sends the Bindings of refused gang members that are due again (only while leading: `live`),
 * and releases whole the gangs whose retries ran past GANG_RETRY_MS.
 */
void gs__sched_gang_retry(struct sched *s, bool live);

/** Forgets pod "ns/name" in the gang records (it was deleted). */
void gs__sched_gang_pod_gone(struct sched *s, const char *key);

/** Frees the gang records (at exit). */
void gs__sched_gang_fini(struct sched *s);

/**
 * Frees the Bindings still unanswered at exit, after gs_kube_client_free() dropped their
 * requests (it calls no callback for them, kube.h). Call it only after the client is freed.
 */
void gs__sched_bind_fini(struct sched *s);

/** A malloc'd copy of a BIND's re-partition (kworld.h); NULL when out of memory. */
struct gs__sched_mig *gs__sched_mig_copy(const struct gs_kmig_change *mc);

/** Sets (node) or clears (NULL) a pod's status.nominatedNodeName. */
void gs__sched_set_nominated(struct sched *s, const char *ns, const char *name, const char *node);

/**
 * Takes over a BIND whose GPU must be re-partitioned first (a->mig; the action is left empty):
 * writes the plan on the Node and holds the pod there, or, when it cannot (no inventory on the
 * node, a plan already in flight there, the PATCH refused), releases it (sched_migplan.c).
 */
void gs__sched_migplan_start(struct sched *s, struct action *a);

/** A Node object as the watch delivered it: an outcome its agent wrote for a plan in flight. */
void gs__sched_migplan_node(struct sched *s, const json_t *node);

/**
 * Binds the held pods whose node shows the planned layout; gives up those whose agent reported
 * a failure or whose timeout passed (only while leading: `live`).
 */
void gs__sched_migplan_check(struct sched *s, bool live);

/** Forgets the plan of pod "ns/name" (it was deleted): its annotation is removed. */
void gs__sched_migplan_pod_gone(struct sched *s, const char *key);

/** Frees the plans (at exit). */
void gs__sched_migplan_fini(struct sched *s);

#endif /* GPUSCHED_CLI_SCHED_INT_H */
