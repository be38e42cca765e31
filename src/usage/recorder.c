/*
 * The usage recorder (include/gpusched/usage.h): turns the engine's event stream into
 * allocation intervals, and the cluster's nodes into capacity intervals, in the store.
 *
 * It keeps, per engine pod id, the pod's handle (ids are reused after gs_engine_forget()), the
 * open interval's id and when the pod began to wait; per node slot and GPU, the open capacity
 * interval and the health it was opened with. It reads the engine and cluster and never changes
 * them, so it is safe inside the engine's callback.
 */
#include "gpusched/usage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"

struct pod_slot {
    uint64_t handle;   /* the engine's handle of the pod this slot describes */
    int64_t row;       /* open interval id, 0 when none */
    int64_t queued_ms; /* when it began to wait, Unix ms */
    bool known;        /* handle is set */
};

struct cap_slot {
    int64_t row;     /* open capacity interval, 0 when none */
    uint64_t handle; /* node handle it was opened for */
    bool healthy;    /* health it was opened with */
};

/* A queue's last quota snapshot, so that only changes are written: the report reads the
 * snapshots as a step function (each value holds until the next, the last until the store's
 * heartbeat), so an unchanged one adds a row and no information. */
struct quota_last {
    bool have;
    uint64_t name_hash; /* FNV-1a of name and path: a renamed or moved queue is a change */
    int64_t quota, limit, fair, allocated;
};

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* a separator, so "ab"+"c" differs from "a"+"bc" */
}

struct gs_usage_recorder {
    struct gs_usage_store *store;
    int64_t epoch_ms;
    char *uid_prefix;
    struct pod_slot *pods;
    uint32_t npods;
    struct cap_slot *caps; /* node slots x GS_NODE_GPUS_MAX */
    uint32_t nnodes;
    struct quota_last *qlast; /* by engine queue id: the last snapshot written */
    uint32_t nqlast;
    int err;
};

int gs_usage_recorder_new(const struct gs_usage_recorder_config *cfg,
                          struct gs_usage_recorder **out)
{
    *out = NULL;
    if (!cfg->store)
        return GS_EINVAL;
    struct gs_usage_recorder *r = calloc(1, sizeof(*r));
    const char *prefix = cfg->uid_prefix ? cfg->uid_prefix : "pod-";
    if (!r)
        return GS_ENOMEM;
    r->uid_prefix = malloc(strlen(prefix) + 1);
    if (!r->uid_prefix) {
        free(r);
        return GS_ENOMEM;
    }
    memcpy(r->uid_prefix, prefix, strlen(prefix) + 1);
    r->store = cfg->store;
    r->epoch_ms = cfg->epoch_ms;
    *out = r;
    return GS_OK;
}

void gs_usage_recorder_free(struct gs_usage_recorder *r)
{
    if (!r)
        return;
    free(r->uid_prefix);
    free(r->pods);
    free(r->caps);
    free(r->qlast);
    free(r);
}

int gs_usage_recorder_error(const struct gs_usage_recorder *r)
{
    return r->err;
}

/*
 * What the engine's placement grants per GPU, in the store's terms (charge.h says how each is
 * charged): a MIG GPU's instances of the pod on it as one grant of their compute slices (the
 * first instance's profile and start named); a time-sliced GPU one replica of its N; otherwise
 * the milli and, for a memory request, the MiB, with the GPU's memory. Returns the count.
 * (usage.h; the live scheduler's accountant and the replay's recorder both use it.)
 */
uint32_t gs_usage_grants(const struct gs_placement *pl, const struct gs_node *node,
                         const char *const *uuids, struct gs_usage_gpu *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < pl->mig_count && i < GS_PLACEMENT_MIG_MAX; i++) {
        const struct gs_placement_mig *m = &pl->mig[i];
        const struct gs_gpu *g = m->gpu < node->gpu_count ? &node->gpus[m->gpu] : NULL;
        if (!g || !g->mig_model || m->profile >= g->mig_model->n_profiles)
            continue;
        const struct gs_mig_profile *pr = &g->mig_model->profiles[m->profile];
        if (n > 0 && out[n - 1].gpu_index == m->gpu) { /* another instance on the same GPU */
            out[n - 1].mig_slices = (uint8_t)(out[n - 1].mig_slices + pr->compute_slices);
            out[n - 1].mem_mib += pr->mem_mib;
            continue;
        }
        if (n == GS_NODE_GPUS_MAX)
            break;
        out[n++] = (struct gs_usage_gpu){
            .gpu_uuid = uuids ? uuids[m->gpu] : NULL,
            .mig_profile = pr->name,
            .mem_mib = pr->mem_mib,
            .gpu_mem_mib = g->mem_mib,
            .gpu_index = m->gpu,
            .mig_instance = m->start,
            .replica_slot = -1,
            .sharing = GS_GPU_SHARE_MIG,
            .mig_slices = pr->compute_slices,
            .gpu_mig_slices = g->mig_model->compute_slices,
            .replicas = 1,
        };
    }
    for (uint32_t k = 0; k < pl->num_gpu && k < GS_NODE_GPUS_MAX && n < GS_NODE_GPUS_MAX; k++) {
        uint32_t gi = pl->gpu_index[k];
        const struct gs_gpu *g = gi < node->gpu_count ? &node->gpus[gi] : NULL;
        if (!g || g->sharing == GS_GPU_SHARE_MIG)
            continue; /* its instances are above */
        bool ts = g->sharing == GS_GPU_SHARE_TIMESLICE && g->replicas > 0;
        out[n++] = (struct gs_usage_gpu){
            .gpu_uuid = uuids ? uuids[gi] : NULL,
            .mem_mib = ts ? 0 : pl->gpu_mem_mib[k],
            .gpu_mem_mib = g->mem_mib,
            .gpu_index = gi,
            .gpu_milli = ts ? 0 : pl->gpu_milli,
            .mig_instance = -1,
            .replica_slot = -1,
            .sharing = ts ? GS_GPU_SHARE_TIMESLICE : GS_GPU_SHARE_MILLI,
            .replicas = ts ? g->replicas : 1,
        };
    }
    return n;
}

static struct pod_slot *pod_slot(struct gs_usage_recorder *r, uint32_t pod)
{
    if (pod >= r->npods) {
        uint32_t n = r->npods ? r->npods : 256;
        while (n <= pod)
            n *= 2;
        struct pod_slot *v = realloc(r->pods, (size_t)n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + r->npods, 0, (size_t)(n - r->npods) * sizeof(*v));
        r->pods = v;
        r->npods = n;
    }
    return &r->pods[pod];
}

/* The slot of `pod` as the engine knows it now; a slot of an earlier pod with the id is reset. */
static struct pod_slot *pod_current(struct gs_usage_recorder *r, const struct gs_engine *e,
                                    uint32_t pod, int64_t now_ms)
{
    struct pod_slot *ps = pod_slot(r, pod);
    if (!ps)
        return NULL;
    uint64_t h = gs_engine_pod_handle(e, pod);
    if (!ps->known || ps->handle != h) {
        *ps = (struct pod_slot){.handle = h, .row = 0, .queued_ms = now_ms, .known = true};
    }
    return ps;
}

static void pod_uid(struct gs_usage_recorder *r, const struct gs_engine *e, uint32_t pod,
                    const struct gs_tpod_info *in, char *buf, size_t cap)
{
    if (in->uid && in->uid[0])
        (void)snprintf(buf, cap, "%s", in->uid);
    else
        (void)snprintf(buf, cap, "%s%" PRIu64, r->uid_prefix, gs_engine_pod_handle(e, pod));
}

static int open_interval(struct gs_usage_recorder *r, const struct gs_cluster *c,
                         const struct gs_engine *e, const struct gs_event *ev,
                         const struct gs_usage_pod_names *names, struct pod_slot *ps,
                         int64_t now_ms)
{
    struct gs_tpod_info in;
    int err = gs_engine_pod_info(e, ev->pod, &in);
    if (err)
        return err;
    char uid[128], path[512];
    const char *top;
    pod_uid(r, e, ev->pod, &in, uid, sizeof(uid));
    (void)gs_engine_queue_path(e, in.queue, path, sizeof(path), &top);
    struct gs_queue_info qi;
    const char *queue = gs_engine_queue_info(e, in.queue, &qi) == 0 ? qi.name : NULL;
    const struct gs_placement *pl = ev->pl;
    const struct gs_node *node = pl ? gs_cluster_node(c, pl->node) : NULL;
    struct gs_usage_gpu gpus[GS_NODE_GPUS_MAX];
    uint32_t n = node ? gs_usage_grants(pl, node, NULL, gpus) : 0;
    struct gs_usage_interval iv = {
        .pod_uid = uid,
        .ns = in.ns,
        .name = in.name,
        .queue = queue,
        .queue_path = path[0] ? path : NULL,
        .team = names && names->team ? names->team : top,
        .priority_class = names ? names->priority_class : NULL,
        .node = node && node->present ? node->name : NULL,
        .model = node && node->gpu_count ? gs_cluster_model_name(c, node->model_id) : NULL,
        .queued_ms = ps->queued_ms,
        .start_ms = now_ms,
    };
    return gs_usage_begin_interval(r->store, &iv, gpus, n, &ps->row);
}

static enum gs_usage_end end_reason(enum gs_evict_reason why)
{
    switch (why) {
    case GS_EVICT_PREEMPT:
        return GS_USAGE_END_PREEMPTED;
    case GS_EVICT_RECLAIM:
        return GS_USAGE_END_RECLAIMED;
    case GS_EVICT_GANG:
        return GS_USAGE_END_GANG;
    case GS_EVICT_NODE_LOST:
        return GS_USAGE_END_NODE_LOST;
    default:
        return GS_USAGE_END_PREEMPTED;
    }
}

void gs_usage_recorder_on_event(struct gs_usage_recorder *r, const struct gs_cluster *c,
                                const struct gs_engine *e, const struct gs_event *ev,
                                const struct gs_usage_pod_names *names)
{
    if (r->err)
        return;
    int64_t now = r->epoch_ms + ev->now_ms;
    struct pod_slot *ps = pod_current(r, e, ev->pod, now);
    int err = GS_OK;
    if (!ps) {
        r->err = GS_ENOMEM;
        return;
    }
    switch (ev->kind) {
    case GS_EV_SUBMIT:
        ps->queued_ms = now;
        break;
    case GS_EV_BIND:
    case GS_EV_BACKFILL:
    case GS_EV_ADOPT:
        if (ps->row == 0)
            err = open_interval(r, c, e, ev, names, ps, now);
        break;
    case GS_EV_EVICT:
    case GS_EV_FINISH:
    case GS_EV_DELETE:
        if (ps->row != 0) {
            enum gs_usage_end why = ev->kind == GS_EV_FINISH   ? GS_USAGE_END_FINISHED
                                    : ev->kind == GS_EV_DELETE ? GS_USAGE_END_DELETED
                                                               : end_reason(ev->reason);
            char by[128];
            struct gs_tpod_info bi;
            bool has_by = ev->kind == GS_EV_EVICT && ev->by != UINT32_MAX &&
                          gs_engine_pod_info(e, ev->by, &bi) == GS_OK;
            if (has_by)
                pod_uid(r, e, ev->by, &bi, by, sizeof(by));
            err = gs_usage_end_interval(r->store, ps->row, now, why, has_by ? by : NULL);
            ps->row = 0;
        }
        ps->queued_ms = now; /* an evicted pod waits again from now */
        break;
    default:
        break;
    }
    if (!err)
        err = gs_usage_tick(r->store, now, NULL);
    if (err)
        r->err = err;
}

int gs_usage_recorder_sync(struct gs_usage_recorder *r, const struct gs_cluster *c,
                           const struct gs_engine *e, int64_t now_ms)
{
    if (r->err)
        return r->err;
    int64_t now = r->epoch_ms + now_ms;
    uint32_t slots = gs_cluster_node_count(c);
    int err = GS_OK;
    if (slots > r->nnodes) {
        struct cap_slot *v = realloc(r->caps, (size_t)slots * GS_NODE_GPUS_MAX * sizeof(*v));
        if (!v)
            return r->err = GS_ENOMEM;
        memset(v + (size_t)r->nnodes * GS_NODE_GPUS_MAX, 0,
               (size_t)(slots - r->nnodes) * GS_NODE_GPUS_MAX * sizeof(*v));
        r->caps = v;
        r->nnodes = slots;
    }
    for (uint32_t i = 0; i < r->nnodes && !err; i++) {
        const struct gs_node *n = i < slots ? gs_cluster_node(c, i) : NULL;
        bool present = n && n->present;
        uint64_t h = present ? gs_cluster_node_handle(c, i) : 0;
        for (uint32_t g = 0; g < GS_NODE_GPUS_MAX && !err; g++) {
            struct cap_slot *cs = &r->caps[(size_t)i * GS_NODE_GPUS_MAX + g];
            bool here = present && g < n->gpu_count;
            bool healthy = here && n->gpus[g].healthy;
            if (cs->row && (!here || cs->handle != h || cs->healthy != healthy)) {
                err = gs_usage_end_capacity(r->store, cs->row, now,
                                            here && cs->handle == h ? "health-changed" : "removed");
                cs->row = 0;
            }
            if (!err && here && !cs->row) {
                struct gs_usage_capacity cap = {
                    n->name, gs_cluster_model_name(c, n->model_id), g, NULL, healthy, now};
                err = gs_usage_begin_capacity(r->store, &cap, &cs->row);
                cs->handle = h;
                cs->healthy = healthy;
            }
        }
    }
    uint32_t nq = e ? gs_engine_queue_count(e) : 0;
    if (nq > r->nqlast) {
        struct quota_last *v = realloc(r->qlast, nq * sizeof(*v));
        if (!v)
            return r->err = GS_ENOMEM;
        memset(v + r->nqlast, 0, (nq - r->nqlast) * sizeof(*v));
        r->qlast = v;
        r->nqlast = nq;
    }
    for (uint32_t q = 1; q < nq && !err; q++) {
        struct gs_queue_info in;
        char path[512];
        const char *top;
        if (gs_engine_queue_info(e, q, &in) != GS_OK)
            continue;
        (void)gs_engine_queue_path(e, q, path, sizeof(path), &top);
        struct quota_last now_q = {true,
                                   fnv1a(fnv1a(14695981039346656037ULL, in.name), path),
                                   in.quota[GS_RES_GPU],
                                   in.limit[GS_RES_GPU],
                                   in.fair[GS_RES_GPU],
                                   in.allocated[GS_RES_GPU]};
        struct quota_last *last = &r->qlast[q];
        if (last->have && last->name_hash == now_q.name_hash && last->quota == now_q.quota &&
            last->limit == now_q.limit && last->fair == now_q.fair &&
            last->allocated == now_q.allocated)
            continue; /* unchanged: the step function already says it */
        struct gs_usage_quota qs = {now,
                                    in.name,
                                    path,
                                    in.quota[GS_RES_GPU],
                                    in.limit[GS_RES_GPU],
                                    in.fair[GS_RES_GPU],
                                    in.allocated[GS_RES_GPU]};
        err = gs_usage_add_quota(r->store, &qs);
        if (!err)
            *last = now_q;
    }
    if (err)
        r->err = err;
    return err;
}

int gs_usage_recorder_finish(struct gs_usage_recorder *r, int64_t now_ms)
{
    if (r->err)
        return r->err;
    int64_t now = r->epoch_ms + now_ms;
    int err = GS_OK;
    for (size_t i = 0; i < (size_t)r->nnodes * GS_NODE_GPUS_MAX && !err; i++) {
        if (r->caps[i].row) {
            err = gs_usage_end_capacity(r->store, r->caps[i].row, now, "recording-ended");
            r->caps[i].row = 0;
        }
    }
    if (!err)
        err = gs_usage_commit(r->store, now);
    if (err)
        r->err = err;
    return err;
}
