/*
 * The live scheduler's accountant (sched_acct.h): world decisions into allocation intervals in
 * the usage store (usage.h), through the store's one interface that the replay's recorder also
 * writes through.
 *
 * Writes go into the store's open transaction as the decisions come (an INSERT or UPDATE in
 * WAL mode: microseconds, no sync), and the loop commits at most once a second, off the
 * scheduling cycle (gs__sched_acct_step() runs between cycles). A commit is one fsync, its cost
 * is measured and logged at exit. A crash loses at most the last second of decisions; each
 * commit's heartbeat is the wall time, so an interval whose pod vanished while no scheduler
 * ran is closed at most a second after it was last known running.
 *
 * Restart: the intervals open in the file are read at start, by pod uid. A pod adopted in the
 * first cycle (already bound, running) keeps its interval; of the others, a pod seen Succeeded
 * or Failed is closed at its containers' finish time (the latest status.containerStatuses[].
 * state.terminated.finishedAt, and never before the interval's start) with reason "finished";
 * the rest at the last heartbeat with reason "recovered" (gs_usage_recover()).
 */
#define _POSIX_C_SOURCE 200809L

#include "sched_acct.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusched/err.h"
#include "gpusched/usage.h"
#include "gpusched/usage_report.h"
#include "sched_evict.h"
#include "sched_int.h"

/* The longest a batch stays open, wall ms. */
#define COMMIT_EVERY_MS 1000
/* How often capacity (nodes, GPUs, health) and queue quota snapshots are brought in line. */
#define SYNC_EVERY_MS 60000

struct gs__sched_acct {
    const char *path;
    const char *team_label;
    struct gs_usage_store *store;  /* NULL until started */
    struct gs_usage_recorder *rec; /* capacity and quota snapshots (gs_usage_recorder_sync()) */
    const struct gs_kworld *world; /* the world last seen, for the syncs */
    int64_t last_sync_ms;
    json_t *open;       /* pod uid -> open interval id */
    json_t *candidates; /* pod uid -> its start_ms: open at start, not yet seen running */
    json_t *finished;   /* pod uid -> the latest container finishedAt (Unix ms) of a pod seen
                           Succeeded or Failed: where its interval ends at the reconcile */
    json_t *ns_team;    /* namespace -> its team label's value */
    json_t *pods;       /* pod uid -> {"team": label, "pc": priorityClassName} */
    bool reconciled;
    int64_t last_commit_ms;
    struct gs__sched_acct_stats st;
    /* Live charge per queue (gs__sched_acct_charges()). */
    struct qcharge *qc; /* nqc queues, first charged first */
    uint32_t nqc, cqc;
    int64_t charge_ms; /* GPU-seconds accrued up to here; INT64_MIN before any */
    json_t *open_gpus; /* pod uid -> [queue index, GPUs charged] of intervals counted live */
    /* A follower's (gs__sched_acct_follow()); all NULL otherwise. */
    json_t *bound;      /* pod uid -> [bind ms, created ms] of pods seen bound, until opened */
    json_t *open_start; /* pod uid -> start_ms of its open interval */
    json_t *evicted;    /* pod uid (open) -> [end reason, at ms, preemptor uid] from its mark */
    json_t *fin_at;     /* pod uid (open) -> its containers' latest finishedAt, Unix ms */
};

/* One queue's live charge. */
struct qcharge {
    char *queue;     /* owned */
    double gpus_now; /* GPUs its open intervals are charged */
    double gpu_s;    /* GPU-seconds accrued */
};

/* Accrues every queue's GPUs up to now_ms (never backwards: a clock step back accrues none).
 * Nothing before the reconcile: the first cycle's adoptions carry the engine's time before any
 * cycle (0), so time counts from the reconcile's now_ms on. */
static void accrue(struct gs__sched_acct *a, int64_t now_ms)
{
    if (!a->reconciled)
        return;
    if (a->charge_ms != INT64_MIN && now_ms > a->charge_ms) {
        double dt_s = (double)(now_ms - a->charge_ms) / 1000.0;
        for (uint32_t i = 0; i < a->nqc; i++)
            a->qc[i].gpu_s += a->qc[i].gpus_now * dt_s;
    }
    if (a->charge_ms == INT64_MIN || now_ms > a->charge_ms)
        a->charge_ms = now_ms;
}

/* Starts counting pod uid's interval, gpus on queue, from now_ms. GS_OK; GS_ENOMEM. */
static int charge_open(struct gs__sched_acct *a, const char *uid, const char *queue, double gpus,
                       int64_t now_ms)
{
    accrue(a, now_ms);
    if (!queue || !queue[0])
        queue = "-";
    uint32_t i = 0;
    while (i < a->nqc && strcmp(a->qc[i].queue, queue) != 0)
        i++;
    if (i == a->nqc) {
        if (a->nqc == a->cqc) {
            uint32_t nc = a->cqc ? a->cqc * 2 : 16;
            struct qcharge *v = realloc(a->qc, nc * sizeof(*v));
            if (!v)
                return GS_ENOMEM;
            a->qc = v;
            a->cqc = nc;
        }
        char *q = strdup(queue);
        if (!q)
            return GS_ENOMEM;
        a->qc[a->nqc++] = (struct qcharge){q, 0, 0};
    }
    a->qc[i].gpus_now += gpus;
    return json_object_set_new(a->open_gpus, uid, json_pack("[I,f]", (json_int_t)i, gpus))
               ? GS_ENOMEM
               : GS_OK;
}

/* Stops counting pod uid's interval at now_ms; nothing when it is not counted. */
static void charge_close(struct gs__sched_acct *a, const char *uid, int64_t now_ms)
{
    const json_t *row = json_object_get(a->open_gpus, uid);
    if (!row)
        return;
    accrue(a, now_ms);
    json_int_t i = json_integer_value(json_array_get(row, 0));
    if (i >= 0 && (uint32_t)i < a->nqc) {
        struct qcharge *q = &a->qc[i];
        q->gpus_now -= json_real_value(json_array_get(row, 1));
        if (q->gpus_now < 1e-9)
            q->gpus_now = 0; /* what the additions and subtractions leave of nothing */
    }
    (void)json_object_del(a->open_gpus, uid);
}

uint32_t gs__sched_acct_charges(struct gs__sched_acct *a, int64_t now_ms,
                                struct gs_schedmetrics_charge *out, uint32_t cap)
{
    if (!a->store)
        return 0;
    accrue(a, now_ms);
    uint32_t n = 0;
    for (; n < a->nqc && n < cap; n++)
        out[n] = (struct gs_schedmetrics_charge){a->qc[n].queue, a->qc[n].gpu_s, a->qc[n].gpus_now};
    return n;
}

static double mono_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int gs__sched_acct_new(const char *path, const char *team_label, struct gs__sched_acct **out)
{
    *out = NULL;
    struct gs__sched_acct *a = calloc(1, sizeof(*a));
    if (!a)
        return GS_ENOMEM;
    a->path = path;
    a->team_label = team_label;
    a->open = json_object();
    a->candidates = json_object();
    a->ns_team = json_object();
    a->pods = json_object();
    a->finished = json_object();
    a->open_gpus = json_object();
    a->charge_ms = INT64_MIN;
    if (!a->open || !a->candidates || !a->ns_team || !a->pods || !a->finished || !a->open_gpus) {
        (void)gs__sched_acct_free(a, 0, NULL);
        return GS_ENOMEM;
    }
    *out = a;
    return GS_OK;
}

void gs__sched_acct_follow(struct gs__sched_acct *a)
{
    if (a->bound)
        return;
    a->bound = json_object();
    a->open_start = json_object();
    a->evicted = json_object();
    a->fin_at = json_object();
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A Kubernetes time field of obj at the JSON path (NULL-terminated keys) as Unix ms, or -1. */
static int64_t time_at(const json_t *obj, const char *k1, const char *k2)
{
    const char *t =
        json_string_value(json_object_get(k2 ? json_object_get(obj, k1) : obj, k2 ? k2 : k1));
    int64_t ms;
    return t && gs_usage_parse_time(t, &ms) == GS_OK ? ms : -1;
}

/* Where a bound pod's interval starts as the API server shows it: the PodScheduled=True
 * condition's lastTransitionTime (the Binding's), else status.startTime, else -1. */
static int64_t bind_time(const json_t *obj)
{
    const json_t *status = json_object_get(obj, "status");
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        int64_t ms = time_at(c, "lastTransitionTime", NULL);
        if (type && strcmp(type, "PodScheduled") == 0 && st && strcmp(st, "True") == 0 && ms > 0)
            return ms;
    }
    return time_at(status, "startTime", NULL);
}

static bool finished_at(const json_t *obj, int64_t *ms);

/* A follower's reading of a Pod object (gs__sched_acct_observe()). */
static void follow_pod(struct gs__sched_acct *a, bool deleted, const char *uid, const json_t *obj)
{
    const json_t *spec = json_object_get(obj, "spec");
    if (deleted)
        (void)json_object_del(a->bound, uid);
    else if (json_string_value(json_object_get(spec, "nodeName")) &&
             !json_object_get(a->open, uid) && !json_object_get(a->bound, uid)) {
        int64_t at = bind_time(obj), created = time_at(obj, "metadata", "creationTimestamp");
        if (at <= 0)
            at = wall_ms(); /* first seen bound */
        json_object_set_new(a->bound, uid,
                            json_pack("[I,I]", (json_int_t)at,
                                      (json_int_t)(created > 0 && created < at ? created : at)));
    }
    if (!json_object_get(a->open, uid))
        return; /* the marks below are read when its interval ends */
    struct gs__evict_seen e;
    if (gs__evict_of_pod(obj, &e))
        json_object_set_new(a->evicted, uid,
                            json_pack("[i,I,s]", (int)e.end, (json_int_t)e.at_ms, e.by_uid));
    int64_t fin;
    if (finished_at(obj, &fin))
        json_object_set_new(a->fin_at, uid, json_integer(fin));
}

int gs__sched_acct_start(struct gs__sched_acct *a, char *msg, size_t cap)
{
    if (a->store)
        return GS_OK;
    struct gs_usage_options opt = {.batch_events = 1000, .batch_ms = COMMIT_EVERY_MS};
    int err = gs_usage_open(a->path, &opt, &a->store, msg, cap);
    if (err)
        return err;
    /* World times are wall ms already: the recorder's epoch is 0. */
    struct gs_usage_recorder_config rcfg = {.store = a->store, .epoch_ms = 0, .uid_prefix = NULL};
    if ((err = gs_usage_recorder_new(&rcfg, &a->rec)) != GS_OK) {
        (void)snprintf(msg, cap, "%s: %s", a->path, gs_strerror(err));
        (void)gs_usage_close(a->store);
        a->store = NULL;
        return err;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(gs_usage_db(a->store),
                                "SELECT id, pod_uid, start_ms FROM allocation WHERE end_ms IS NULL",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *uid = (const char *)sqlite3_column_text(st, 1);
            if (!uid)
                continue;
            json_object_set_new(a->open, uid, json_integer(sqlite3_column_int64(st, 0)));
            json_object_set_new(a->candidates, uid, json_integer(sqlite3_column_int64(st, 2)));
            if (a->open_start)
                json_object_set_new(a->open_start, uid, json_integer(sqlite3_column_int64(st, 2)));
        }
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_DONE) {
        (void)snprintf(msg, cap, "%s: reading open intervals: %s", a->path,
                       sqlite3_errmsg(gs_usage_db(a->store)));
        gs_usage_recorder_free(a->rec);
        a->rec = NULL;
        (void)gs_usage_close(a->store);
        a->store = NULL;
        return GS_EIO;
    }
    gs__sched_logf("info", "accounting: recording to %s (%zu interval(s) open in it from before)",
                   a->path, json_object_size(a->open));
    return GS_OK;
}

/* The latest status.containerStatuses[].state.terminated.finishedAt of a pod in phase Succeeded
 * or Failed, Unix ms; false when it is in neither phase or none parses. */
static bool finished_at(const json_t *obj, int64_t *ms)
{
    const json_t *status = json_object_get(obj, "status");
    const char *phase = json_string_value(json_object_get(status, "phase"));
    if (!phase || (strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0))
        return false;
    bool have = false;
    size_t i;
    const json_t *cs;
    json_array_foreach(json_object_get(status, "containerStatuses"), i, cs)
    {
        const json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
        const char *at = json_string_value(json_object_get(term, "finishedAt"));
        int64_t t;
        if (at && gs_usage_parse_time(at, &t) == GS_OK && (!have || t > *ms)) {
            *ms = t;
            have = true;
        }
    }
    return have;
}

static const char *label_of(const json_t *obj, const char *key)
{
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    return json_string_value(json_object_get(labels, key));
}

void gs__sched_acct_observe(struct gs__sched_acct *a, const char *kind, bool deleted,
                            const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    if (strcmp(kind, "Namespace") == 0) {
        const char *ns = json_string_value(json_object_get(md, "name"));
        const char *team = label_of(obj, a->team_label);
        if (!ns)
            return;
        if (deleted || !team)
            (void)json_object_del(a->ns_team, ns);
        else
            json_object_set_new(a->ns_team, ns, json_string(team));
    } else if (strcmp(kind, "Pod") == 0) {
        const char *uid = json_string_value(json_object_get(md, "uid"));
        if (!uid)
            return;
        if (a->bound)
            follow_pod(a, deleted, uid, obj);
        int64_t fin_ms;
        if (!a->reconciled && finished_at(obj, &fin_ms)) /* kept until the reconcile */
            json_object_set_new(a->finished, uid, json_integer(fin_ms));
        const char *team = label_of(obj, a->team_label);
        const char *pc =
            json_string_value(json_object_get(json_object_get(obj, "spec"), "priorityClassName"));
        if (deleted || (!team && !pc)) {
            (void)json_object_del(a->pods, uid);
            return;
        }
        json_t *v = json_object();
        if (team)
            json_object_set_new(v, "team", json_string(team));
        if (pc)
            json_object_set_new(v, "pc", json_string(pc));
        json_object_set_new(a->pods, uid, v);
    }
}

/* The UUID of GPU `index` in the event, or NULL. */
static const char *uuid_of(const struct gs_kevent *ev, uint32_t index)
{
    for (uint32_t k = 0; k < ev->n_gpus && k < GS_NODE_GPUS_MAX; k++)
        if (ev->gpus[k].index == index)
            return ev->gpus[k].uuid;
    return NULL;
}

static int begin(struct gs__sched_acct *a, const struct gs_kworld *w, const struct gs_kevent *ev)
{
    const struct gs_engine *e = gs_kworld_engine(w);
    const struct gs_cluster *c = gs_kworld_cluster(w);
    char path[512] = "";
    const char *top = NULL, *queue = NULL, *model = NULL;
    int64_t queued_ms = ev->now_ms, start_ms = ev->now_ms;
    int64_t pod = e ? gs_engine_find_pod(e, ev->uid) : -1;
    struct gs_tpod_info pi;
    bool running = false;
    if (pod >= 0 && gs_engine_pod_info(e, (uint32_t)pod, &pi) == GS_OK) {
        running = pi.state == GS_TPOD_RUNNING;
        /* A pod bound while nothing recorded, adopted: it has held its GPUs since its start
         * (status.startTime, else its creation), not since the adoption event's time, which in
         * the first cycle is the engine's time before any cycle (0). */
        if (ev->adopted && running && pi.start_ms > 0)
            queued_ms = start_ms = pi.start_ms;
        struct gs_queue_info qi;
        (void)gs_engine_queue_path(e, pi.queue, path, sizeof(path), &top);
        if (gs_engine_queue_info(e, pi.queue, &qi) == GS_OK)
            queue = qi.name;
        if (!ev->adopted && pi.submit_ms >= 0 && pi.submit_ms <= ev->now_ms)
            queued_ms = pi.submit_ms;
    }
    const json_t *seen = a->bound ? json_object_get(a->bound, ev->uid) : NULL;
    if (seen) { /* a follower's: the bind as the API server shows it */
        start_ms = json_integer_value(json_array_get(seen, 0));
        queued_ms = json_integer_value(json_array_get(seen, 1));
    }
    int ni = c && ev->node ? gs_cluster_find_node(c, ev->node) : -1;
    const struct gs_node *node = ni >= 0 ? gs_cluster_node(c, (uint32_t)ni) : NULL;
    if (node && node->gpu_count)
        model = gs_cluster_model_name(c, node->model_id);
    const json_t *pinfo = json_object_get(a->pods, ev->uid);
    const char *team = json_string_value(json_object_get(pinfo, "team"));
    if (!team && ev->ns)
        team = json_string_value(json_object_get(a->ns_team, ev->ns));
    if (!team)
        team = top;
    struct gs_usage_gpu gpus[GS_NODE_GPUS_MAX];
    uint32_t n = 0;
    if (running && node) {
        const char *uuids[GS_NODE_GPUS_MAX] = {0};
        for (uint32_t k = 0; k < GS_NODE_GPUS_MAX; k++)
            uuids[k] = uuid_of(ev, k);
        n = gs_usage_grants(&pi.pl, node, uuids, gpus);
    }
    if (!running) {
        /* Not running in the engine (cannot happen for a decision it made): the event's word. */
        for (uint32_t k = 0; k < ev->n_gpus && k < GS_NODE_GPUS_MAX; k++) {
            const struct gs_kgpu *g = &ev->gpus[k];
            const struct gs_gpu *ng =
                node && g->index < node->gpu_count ? &node->gpus[g->index] : NULL;
            gpus[n++] = (struct gs_usage_gpu){
                .gpu_uuid = g->uuid,
                .gpu_index = g->index,
                .gpu_milli = g->milli,
                .gpu_mem_mib = ng ? ng->mem_mib : 0,
                .sharing = GS_GPU_SHARE_MILLI,
                .mig_instance = -1,
                .replica_slot = -1,
                .replicas = 1,
            };
        }
    }
    struct gs_usage_interval iv = {
        .pod_uid = ev->uid,
        .ns = ev->ns,
        .name = ev->name,
        .queue = queue,
        .queue_path = path[0] ? path : NULL,
        .team = team,
        .priority_class = json_string_value(json_object_get(pinfo, "pc")),
        .node = ev->node,
        .model = model,
        .queued_ms = queued_ms,
        .start_ms = start_ms,
    };
    int64_t id = 0;
    int err = gs_usage_begin_interval(a->store, &iv, gpus, n, &id);
    if (err)
        return err;
    a->st.opened++;
    if (json_object_set_new(a->open, ev->uid, json_integer(id)))
        return GS_ENOMEM;
    if (a->bound) {
        (void)json_object_del(a->bound, ev->uid);
        if (json_object_set_new(a->open_start, ev->uid, json_integer(start_ms)))
            return GS_ENOMEM;
    }
    double charged; /* what the store just wrote as gpus_charged, by the same function */
    if (gs_usage_charge_gpus(gpus, n, NULL, &charged) != GS_OK)
        charged = 0;
    return charge_open(a, ev->uid, queue, charged, ev->now_ms);
}

static enum gs_usage_end end_reason(const struct gs_kevent *ev)
{
    if (ev->kind == GS_KEV_FINISH)
        return GS_USAGE_END_FINISHED;
    if (ev->kind == GS_KEV_DELETE)
        return GS_USAGE_END_DELETED;
    const char *r = ev->reason ? ev->reason : "";
    if (strcmp(r, "reclaim") == 0)
        return GS_USAGE_END_RECLAIMED;
    if (strcmp(r, "gang") == 0)
        return GS_USAGE_END_GANG;
    if (strcmp(r, "node-lost") == 0)
        return GS_USAGE_END_NODE_LOST;
    return GS_USAGE_END_PREEMPTED;
}

static void count_commit(struct gs__sched_acct *a, double t0, int64_t now_ms)
{
    double ms = mono_ms() - t0;
    a->st.commits++;
    a->st.commit_ms_total += ms;
    if (ms > a->st.commit_ms_max)
        a->st.commit_ms_max = ms;
    a->last_commit_ms = now_ms;
}

/* Counts live an interval a previous writer left open, adopted now: its queue and charge as
 * the file holds them. GS_OK; GS_EIO; GS_ENOMEM. */
static int charge_kept(struct gs__sched_acct *a, const char *uid, int64_t id, int64_t now_ms)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(gs_usage_db(a->store),
                                "SELECT queue, gpus_charged FROM allocation WHERE id = ?1", -1, &st,
                                NULL);
    int err = GS_EIO;
    if (rc == SQLITE_OK) {
        (void)sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW)
            err = charge_open(a, uid, (const char *)sqlite3_column_text(st, 0),
                              sqlite3_column_double(st, 1), now_ms);
    }
    sqlite3_finalize(st);
    return err;
}

/*
 * A follower's end of an interval: the leader's eviction mark (a pod deleted or Failed), else
 * its finish time (Succeeded, or Failed without a mark), else the event as it is; the time kept
 * inside [the interval's start, the event]. *by is borrowed from a->evicted until the entry goes.
 */
static void follow_end(struct gs__sched_acct *a, const struct gs_kevent *ev, enum gs_usage_end *why,
                       int64_t *at_ms, const char **by)
{
    if (ev->kind == GS_KEV_EVICT)
        return; /* the world's own: a Node that went (node-lost) */
    const json_t *mark = json_object_get(a->evicted, ev->uid);
    const json_t *fin = json_object_get(a->fin_at, ev->uid);
    int64_t t = -1;
    if (mark && ev->kind == GS_KEV_DELETE) {
        *why = (enum gs_usage_end)json_integer_value(json_array_get(mark, 0));
        t = json_integer_value(json_array_get(mark, 1));
        const char *uid = json_string_value(json_array_get(mark, 2));
        *by = uid && uid[0] ? uid : NULL;
    } else if (fin) {
        *why = GS_USAGE_END_FINISHED;
        t = json_integer_value(fin);
    }
    int64_t start = json_integer_value(json_object_get(a->open_start, ev->uid));
    if (t > 0)
        *at_ms = t < start ? start : t > ev->now_ms ? ev->now_ms : t;
}

void gs__sched_acct_event(struct gs__sched_acct *a, const struct gs_kworld *w,
                          const struct gs_kevent *ev)
{
    a->world = w;
    if (!a->store || !ev->uid || !ev->uid[0] || ev->kind == GS_KEV_PENDING)
        return;
    int err = GS_OK;
    const json_t *row = json_object_get(a->open, ev->uid);
    if (ev->kind == GS_KEV_BIND) {
        if (row) {
            /* Open in the file from before a restart: the pod still runs, one interval. */
            if (json_object_get(a->candidates, ev->uid)) {
                (void)json_object_del(a->candidates, ev->uid);
                a->st.kept++;
                err = charge_kept(a, ev->uid, json_integer_value(row), ev->now_ms);
            }
        } else {
            err = begin(a, w, ev);
        }
    } else if (row) {
        /* The preemptor by its uid, as the report matches evicted_by against pod_uid (the
         * "ns/name" only when the world has no uid for it). */
        const char *by = ev->kind != GS_KEV_EVICT      ? NULL
                         : ev->by_uid && ev->by_uid[0] ? ev->by_uid
                                                       : ev->by;
        enum gs_usage_end why = end_reason(ev);
        int64_t at_ms = ev->now_ms;
        if (a->bound)
            follow_end(a, ev, &why, &at_ms, &by);
        err = gs_usage_end_interval(a->store, json_integer_value(row), at_ms, why, by);
        /* GS_EINVAL: the wall clock stepped back past its start; it stays open in the file
         * until the next restart's recovery closes it, and the error is logged. */
        (void)json_object_del(a->candidates, ev->uid);
        (void)json_object_del(a->open, ev->uid);
        if (a->bound) {
            (void)json_object_del(a->open_start, ev->uid);
            (void)json_object_del(a->evicted, ev->uid);
            (void)json_object_del(a->fin_at, ev->uid);
        }
        charge_close(a, ev->uid, ev->now_ms);
        a->st.closed++;
    }
    if (err) {
        gs__sched_logf("error", "accounting: %s/%s: %s", ev->ns ? ev->ns : "",
                       ev->name ? ev->name : "",
                       gs_usage_errmsg(a->store)[0] ? gs_usage_errmsg(a->store) : gs_strerror(err));
        return;
    }
    double t0 = mono_ms();
    bool committed = false;
    if (gs_usage_tick(a->store, ev->now_ms, &committed) == GS_OK && committed)
        count_commit(a, t0, ev->now_ms);
}

/* Capacity intervals and quota snapshots from the world's cluster and engine at now_ms. */
static int sync_capacity(struct gs__sched_acct *a, const struct gs_kworld *w, int64_t now_ms)
{
    a->last_sync_ms = now_ms;
    const struct gs_cluster *c = w ? gs_kworld_cluster(w) : NULL;
    if (!c)
        return GS_OK;
    return gs_usage_recorder_sync(a->rec, c, gs_kworld_engine(w), now_ms);
}

int gs__sched_acct_reconcile(struct gs__sched_acct *a, const struct gs_kworld *w, int64_t now_ms)
{
    if (!a->store || a->reconciled)
        return GS_OK;
    a->world = w;
    a->reconciled = true;
    a->charge_ms = now_ms; /* live GPU-seconds count from here (accrue()) */
    const char *uid;
    json_t *v, *tmp;
    /* Pods seen finished: closed at their containers' finish time, not the heartbeat. */
    json_object_foreach(a->candidates, uid, v)
    {
        const json_t *fin = json_object_get(a->finished, uid);
        if (!fin)
            continue;
        int64_t start_ms = json_integer_value(v), end_ms = json_integer_value(fin);
        int err = gs_usage_end_interval(a->store, json_integer_value(json_object_get(a->open, uid)),
                                        end_ms > start_ms ? end_ms : start_ms,
                                        GS_USAGE_END_FINISHED, NULL);
        if (err)
            return err;
        a->st.recovered_finished++;
    }
    json_object_clear(a->finished);
    size_t n = json_object_size(a->open), k = 0;
    const char **running = calloc(n ? n : 1, sizeof(*running));
    if (!running)
        return GS_ENOMEM;
    json_object_foreach(a->open, uid, v)
    {
        if (!json_object_get(a->candidates, uid))
            running[k++] = uid;
    }
    uint32_t closed = 0;
    double t0 = mono_ms();
    int err = gs_usage_recover(a->store, running, (uint32_t)k, &closed);
    free(running);
    if (err)
        return err;
    count_commit(a, t0, a->last_commit_ms);
    a->st.recovered += closed;
    json_object_foreach_safe(a->candidates, tmp, uid, v)
    {
        (void)json_object_del(a->open, uid);
    }
    json_object_clear(a->candidates);
    /* After the recovery, which closes the capacity the old writer left open. */
    return sync_capacity(a, w, now_ms);
}

int gs__sched_acct_step(struct gs__sched_acct *a, int64_t now_ms)
{
    if (!a->store || !a->reconciled)
        return GS_OK;
    if (now_ms - a->last_sync_ms >= SYNC_EVERY_MS) {
        int err = sync_capacity(a, a->world, now_ms);
        if (err)
            return err;
    }
    if (now_ms - a->last_commit_ms < COMMIT_EVERY_MS)
        return GS_OK;
    double t0 = mono_ms();
    int err = gs_usage_commit(a->store, now_ms);
    count_commit(a, t0, now_ms);
    return err;
}

int gs__sched_acct_free(struct gs__sched_acct *a, int64_t now_ms,
                        struct gs__sched_acct_stats *stats)
{
    if (!a)
        return GS_OK;
    int err = GS_OK;
    if (a->store) {
        double t0 = mono_ms();
        /* Capacity ends with the recording (a restart's recovery would end it at the same
         * heartbeat); allocation intervals of running pods stay open. */
        err = a->reconciled ? gs_usage_recorder_finish(a->rec, now_ms)
                            : gs_usage_commit(a->store, now_ms);
        count_commit(a, t0, now_ms);
        int cerr = gs_usage_close(a->store);
        if (!err)
            err = cerr;
    }
    gs_usage_recorder_free(a->rec);
    if (stats)
        *stats = a->st;
    json_decref(a->open);
    json_decref(a->candidates);
    json_decref(a->ns_team);
    json_decref(a->pods);
    json_decref(a->finished);
    json_decref(a->open_gpus);
    json_decref(a->bound);
    json_decref(a->open_start);
    json_decref(a->evicted);
    json_decref(a->fin_at);
    for (uint32_t i = 0; i < a->nqc; i++)
        free(a->qc[i].queue);
    free(a->qc);
    free(a);
    return err;
}

const char *gs__sched_acct_errmsg(const struct gs__sched_acct *a)
{
    return a->store ? gs_usage_errmsg(a->store) : "";
}
