/*
 * Kubernetes objects into the cluster and engine of the core. See include/gpusched/kworld.h for
 * what each field becomes. Small name maps are jansson objects (hash tables with owned keys).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "kworld_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/filter.h"
#include "gpusched/frag.h"
#include "gpusched/kquantity.h"
#include "gpusched/mig.h"
#include "kselect.h"

#include "kworld_capmig.h"
#include "kworld_gpus.h"
#include "kworld_inv.h"
#include "kworld_kai.h"
#include "kworld_pdb.h"
#include "kworld_qspec.h"
#include "kworld_queue.h"
#include "kworld_xres.h"
#include "kjson.h"

static void wl_note(struct gs_kworld *w, const struct gs_pod_req *req);

/* ---- small helpers ------------------------------------------------------------------------ */

static char *join_key(const char *ns, const char *name)
{
    size_t a = strlen(ns), b = strlen(name);
    char *k = malloc(a + b + 2);
    if (k) {
        /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): the name's copy brings the NUL */
        memcpy(k, ns, a);
        k[a] = '/';
        memcpy(k + a + 1, name, b + 1);
    }
    return k;
}

/* ---- world ------------------------------------------------------------------------------- */

static void set_err(struct gs_kworld *w, char *err, size_t cap)
{
    w->err = err && cap ? err : w->scratch;
    w->errcap = err && cap ? cap : sizeof(w->scratch);
}

int gs_kworld_new(const struct gs_kworld_config *cfg, struct gs_kworld **out)
{
    *out = NULL;
    struct gs_kworld *w = calloc(1, sizeof(*w));
    if (!w)
        return GS_ENOMEM;
    w->cfg = *cfg;
    w->entering = NO_ID;
    set_err(w, NULL, 0);
    w->sched_name = strdup(cfg->scheduler_name ? cfg->scheduler_name : GS_KWORLD_SCHEDULER);
    w->default_queue = strdup(cfg->default_queue ? cfg->default_queue : "default");
    w->policy = strdup(cfg->policy ? cfg->policy : "fgd");
    w->staged = json_array();
    w->staged_at = json_object();
    w->pod_keys = json_object();
    w->queues = json_object();
    w->pclasses = json_object();
    w->pc_ids = json_object();
    w->gangs = json_object();
    w->podgroups = json_object();
    w->avoid = json_object();
    w->mode_due = json_object();
    int err = gs_cluster_new(&w->c);
    if (!err && (!w->sched_name || !w->default_queue || !w->policy || !w->staged || !w->staged_at ||
                 !w->pod_keys || !w->queues || !w->pclasses || !w->pc_ids || !w->gangs ||
                 !w->podgroups || !w->avoid || !w->mode_due || gs__kinv_init(&w->inv) != GS_OK ||
                 gs__kpdb_init(&w->pdb) != GS_OK ||
                 gs__kqueue_init(&w->kq, cfg->on_warning, cfg->ctx) != GS_OK))
        err = GS_ENOMEM;
    if (err) {
        gs_kworld_free(w);
        return err;
    }
    *out = w;
    return GS_OK;
}

void gs_kworld_free(struct gs_kworld *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->npods; i++) {
        struct kpod *p = &w->pods[i];
        free(p->key);
        free(p->ns);
        free(p->name);
        free(p->uid);
        free(p->park);
        json_decref(p->obj);
    }
    free(w->pods);
    free(w->of_engine);
    gs_engine_free(w->e);
    gs_workload_fini(&w->wls[0]);
    gs_workload_fini(&w->wls[1]);
    free(w->wl_seen);
    gs_cluster_free(w->c);
    json_decref(w->staged);
    json_decref(w->staged_at);
    json_decref(w->pod_keys);
    json_decref(w->queues);
    gs__kqueue_fini(&w->kq);
    json_decref(w->pclasses);
    json_decref(w->pc_ids);
    json_decref(w->gangs);
    json_decref(w->podgroups);
    json_decref(w->avoid);
    json_decref(w->mode_due);
    gs__kinv_fini(&w->inv);
    gs__kpdb_fini(&w->pdb);
    free(w->sched_name);
    free(w->default_queue);
    free(w->policy);
    free(w);
}

int gs_kworld_inventory_mig(const struct gs_kworld *w, const char *node, uint32_t gpu,
                            struct gs_kmig_slot *out, uint32_t cap, uint32_t *n)
{
    *n = 0;
    return w && out ? gs__kinv_mig(&w->inv, node, gpu, out, cap, n) : GS_ENOENT;
}

const struct gs_cluster *gs_kworld_cluster(const struct gs_kworld *w)
{
    return w->started ? w->c : NULL;
}

const struct gs_engine *gs_kworld_engine(const struct gs_kworld *w)
{
    return w->e;
}

/* ---- events ------------------------------------------------------------------------------- */

static const char *evict_word(enum gs_evict_reason r)
{
    switch (r) {
    case GS_EVICT_PREEMPT:
        return "preemption";
    case GS_EVICT_RECLAIM:
        return "reclaim";
    case GS_EVICT_GANG:
        return "gang";
    case GS_EVICT_NODE_LOST:
        return "node-lost";
    default:
        return "unknown";
    }
}

static struct kpod *of_engine(struct gs_kworld *w, uint32_t id)
{
    return id < w->cap_of_engine && w->of_engine[id] != NO_ID ? &w->pods[w->of_engine[id]] : NULL;
}

static int grow_of_engine(struct gs_kworld *w, uint32_t id);

/* Whether instance (profile name, start) is among l[0..n). */
static bool slot_in(const struct gs_kmig_slot *l, uint32_t n, const char *profile, int32_t start)
{
    for (uint32_t i = 0; i < n; i++)
        if (l[i].start == start && l[i].profile && strcmp(l[i].profile, profile) == 0)
            return true;
    return false;
}

/* The re-partition of the GPU of a dynamic MIG bind: the layout the engine planned against the
 * node's last inventory (what its agent shows). False when there is nothing to say (the node or
 * GPU is gone). */
static bool mig_change(struct gs_kworld *w, const char *node, const struct gs_placement *pl,
                       struct gs_kmig_change *mc)
{
    const struct gs_node *n = gs_cluster_node(w->c, pl->node);
    uint32_t gi = pl->mig[0].gpu;
    if (!n || !node || gi >= n->gpu_count || !n->gpus[gi].mig_model)
        return false;
    const struct gs_gpu *g = &n->gpus[gi];
    memset(mc, 0, sizeof(*mc));
    mc->gpu = gi;
    for (uint32_t m = 0; m < g->mig_count && m < GS_MIG_INSTANCES_MAX; m++) {
        const struct gs_mig_instance *in = &g->mig[m];
        mc->layout[mc->n_layout++] = (struct gs_kmig_slot){
            in->profile < g->mig_model->n_profiles ? g->mig_model->profiles[in->profile].name : "",
            (int32_t)in->start};
    }
    struct gs_kmig_slot old[GS_MIG_INSTANCES_MAX];
    uint32_t n_old = 0;
    if (gs__kinv_mig(&w->inv, node, gi, old, GS_MIG_INSTANCES_MAX, &n_old) != GS_OK)
        return true; /* known stays false: read from capacity, the starts are a guess */
    mc->known = true;
    /* Destroys by ascending start (the inventory may list them in any order). */
    for (int32_t st = 0; st < 8; st++)
        for (uint32_t i = 0; i < n_old; i++)
            if (old[i].start == st && old[i].profile &&
                !slot_in(mc->layout, mc->n_layout, old[i].profile, st))
                mc->destroy[mc->n_destroy++] = old[i];
    for (uint32_t i = 0; i < mc->n_layout; i++)
        if (!slot_in(old, n_old, mc->layout[i].profile, mc->layout[i].start))
            mc->create[mc->n_create++] = mc->layout[i];
    return true;
}

static void on_engine_event(void *ctx, const struct gs_event *ev)
{
    struct gs_kworld *w = ctx;
    /* The engine names a new pod's id in its SUBMIT or ADOPT event, inside the call: a slot the
     * engine reuses (after gs_engine_forget) is not the next one, so the id is learnt here. */
    if ((ev->kind == GS_EV_SUBMIT || ev->kind == GS_EV_ADOPT) && w->entering != NO_ID &&
        grow_of_engine(w, ev->pod) == GS_OK)
        w->of_engine[ev->pod] = w->entering;
    struct kpod *p = of_engine(w, ev->pod);
    if (!p)
        return;
    struct gs_kevent k = {.ns = p->ns, .name = p->name, .uid = p->uid, .now_ms = ev->now_ms};
    {
        struct gs_tpod_info pi;
        struct gs_queue_info qi;
        if (gs_engine_pod_info(w->e, ev->pod, &pi) == GS_OK &&
            gs_engine_queue_info(w->e, pi.queue, &qi) == GS_OK)
            k.queue = qi.name;
    }
    switch (ev->kind) {
    case GS_EV_BIND:
    case GS_EV_BACKFILL:
    case GS_EV_ADOPT:
        k.kind = GS_KEV_BIND;
        k.adopted = ev->kind == GS_EV_ADOPT;
        k.detail = ev->kind != GS_EV_ADOPT ? ev->text : NULL;
        if (!k.adopted)
            w->changes++;
        {
            struct gs_tpod_info ti;
            struct gs_gang_info gi;
            if (gs_engine_pod_info(w->e, ev->pod, &ti) == GS_OK && ti.gang != GS_NO_GANG &&
                gs_engine_gang_info(w->e, ti.gang, &gi) == GS_OK)
                k.gang = gi.name; /* "ns/podgroup" (gang_id) */
        }
        break;
    case GS_EV_EVICT:
        k.kind = GS_KEV_EVICT;
        k.reason = evict_word(ev->reason);
        k.detail = ev->text;
        if (ev->by != UINT32_MAX && of_engine(w, ev->by)) {
            k.by = of_engine(w, ev->by)->key;
            k.by_uid = of_engine(w, ev->by)->uid;
        }
        w->changes++;
        break;
    case GS_EV_FINISH:
        k.kind = GS_KEV_FINISH;
        break;
    case GS_EV_DELETE:
        k.kind = GS_KEV_DELETE;
        break;
    case GS_EV_UNSCHEDULABLE:
        k.kind = GS_KEV_PENDING;
        k.reason = ev->text;
        break;
    default:
        return;
    }
    if (ev->pl && (k.kind == GS_KEV_BIND || k.kind == GS_KEV_EVICT)) {
        const struct gs_node *n = gs_cluster_node(w->c, ev->pl->node);
        k.node = n && n->present ? n->name : NULL;
        k.n_gpus = ev->pl->num_gpu;
        for (uint32_t g = 0; g < ev->pl->num_gpu; g++) {
            uint8_t gi = ev->pl->gpu_index[g];
            const struct gs_gpu *gp = n && gi < n->gpu_count ? &n->gpus[gi] : NULL;
            /* Memory is named for a memory share (MEMORY placements record it per GPU). */
            bool mem = gp && gp->sharing == GS_GPU_SHARE_MILLI && ev->pl->gpu_mem_mib[g] > 0;
            k.gpus[g] = (struct gs_kgpu){
                gi,
                gp && gp->sharing == GS_GPU_SHARE_TIMESLICE ? 0 : ev->pl->gpu_milli,
                gs__kinv_uuid(&w->inv, k.node, gi),
                mem ? ev->pl->gpu_mem_mib[g] : 0,
                NULL,
                -1};
        }
        for (uint32_t m = 0; m < ev->pl->mig_count && k.n_gpus < GS_NODE_GPUS_MAX; m++) {
            const struct gs_placement_mig *pm = &ev->pl->mig[m];
            const struct gs_gpu *gp = n && pm->gpu < n->gpu_count ? &n->gpus[pm->gpu] : NULL;
            const struct gs_mig_model *mm = gp ? gp->mig_model : NULL;
            k.gpus[k.n_gpus++] = (struct gs_kgpu){
                pm->gpu, 0, gs__kinv_uuid(&w->inv, k.node, pm->gpu), 0,
                mm && pm->profile < mm->n_profiles ? mm->profiles[pm->profile].name : NULL,
                /* Read from capacity (no inventory, no UUID) the start is the core's guess. */
                gs__kinv_uuid(&w->inv, k.node, pm->gpu) ? pm->start : -1};
        }
    }
    struct gs_kmig_change mc;
    if (k.kind == GS_KEV_BIND && !k.adopted && ev->mig_repartitions > 0 && ev->pl &&
        ev->pl->mig_count > 0 && mig_change(w, k.node, ev->pl, &mc))
        k.mig_change = &mc;
    if (w->cfg.on_event)
        w->cfg.on_event(w->cfg.ctx, &k);
}

/* ---- priority classes, queues, pod groups ------------------------------------------------ */

static int class_id(struct gs_kworld *w, const char *name, int32_t value, bool preemptible,
                    uint32_t *id)
{
    json_t *v = json_object_get(w->pc_ids, name);
    if (v) {
        *id = (uint32_t)json_integer_value(v);
        return GS_OK;
    }
    struct gs_priority_class_spec s = {name, value, preemptible ? 1 : 0};
    int err = gs_engine_add_priority_class(w->e, &s, id);
    if (err)
        return err;
    return json_object_set_new(w->pc_ids, name, json_integer(*id)) ? GS_ENOMEM : GS_OK;
}

static int apply_priority_class(struct gs_kworld *w, const json_t *obj)
{
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    const json_t *value = json_object_get(obj, "value");
    if (!name || !json_is_integer(value))
        return gs__kfail(w, "PriorityClass %s: needs metadata.name and an integer value",
                         name ? name : "?");
    const char *pp = jstr(obj, "preemptionPolicy");
    if (json_object_get(obj, "preemptionPolicy") &&
        !(pp && (strcmp(pp, "Never") == 0 || strcmp(pp, "PreemptLowerPriority") == 0)))
        return gs__kfail(
            w, "PriorityClass %s: preemptionPolicy must be PreemptLowerPriority or Never", name);
    const char *pre = gs__kmeta_kv(obj, "labels", "gpusched.io/preemptible");
    json_t *rec = json_pack("{s:I,s:b,s:b}", "value", json_integer_value(value), "default",
                            json_is_true(json_object_get(obj, "globalDefault")), "never",
                            pp && strcmp(pp, "Never") == 0);
    if (rec && pre &&
        json_object_set_new(rec, "preemptible", json_boolean(strcmp(pre, "false") != 0))) {
        json_decref(rec);
        return GS_ENOMEM;
    }
    if (!rec || json_object_set_new(w->pclasses, name, rec))
        return GS_ENOMEM;
    return GS_OK;
}

static int add_queue(struct gs_kworld *w, const json_t *obj, char *name_out, size_t cap)
{
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    const char *api = jstr(obj, "apiVersion");
    bool kai = api && strncmp(api, "scheduling.run.ai/", 18) == 0;
    const json_t *spec = json_object_get(obj, "spec");
    const char *parent = jstr(spec, "parentQueue");
    (void)snprintf(name_out, cap, "%s", name ? name : "?");
    if (gs__kqueue_other_kind(&w->kq, name, api))
        return GS_OK; /* another kind's Queue made it */
    uint32_t pid = GS_QUEUE_ROOT;
    if (parent && *parent) {
        json_t *pv = json_object_get(w->queues, parent);
        if (!pv)
            return GS_ENOENT;
        pid = (uint32_t)json_integer_value(pv);
    }
    struct gs_queue_spec q = {name, pid, {0}, {0}, 1.0, 0};
    const char *res_names[GS_RES_COUNT] = {"gpu", "cpu", "memory"};
    double weight = -1;
    for (int r = 0; r < GS_RES_COUNT; r++) {
        const json_t *rv = jpath(json_object_get(spec, "resources"), res_names[r], NULL);
        if (gs__kqueue_amount(json_object_get(rv, "quota"), r, kai, 0, &q.quota[r]) != 0 ||
            gs__kqueue_amount(json_object_get(rv, "limit"), r, kai, GS_UNLIMITED, &q.limit[r]) != 0)
            return gs__kfail(w, "Queue %s: spec.resources.%s: quota and limit must be quantities",
                             name, res_names[r]);
        if (q.quota[r] == GS_UNLIMITED) /* guaranteed its demand up to its limit */
            q.quota[r] = q.limit[r] == GS_UNLIMITED ? 0 : q.limit[r];
        const json_t *wv = json_object_get(rv, "overQuotaWeight");
        if (json_is_number(wv) && weight < 0)
            weight = json_number_value(wv);
    }
    q.over_quota_weight = weight < 0 ? 1.0 : weight;
    struct gs_model_quota by_model[GS_MODELS_MAX];
    char why[256];
    if (gs__kqueue_by_model(jpath(json_object_get(spec, "resources"), "gpu", "byModel"), w->c,
                            by_model, &q.n_by_model, why, sizeof(why)) != 0)
        return gs__kfail(w, "Queue %s: %s", name, why);
    q.by_model = by_model;
    int known = name ? gs_engine_find_queue(w->e, name) : -1;
    if (known >= 0) /* an edit, a relist's ADDED, or created again after a delete */
        return gs__kqueue_update(&w->kq, w->e, w->queues, (uint32_t)known, &q, parent, api, w->err,
                                 w->errcap);
    uint32_t id;
    int err = gs_engine_add_queue(w->e, &q, &id);
    if (err == GS_ENOMEM)
        return err;
    if (err)
        return gs__kfail(w,
                         "Queue %s: refused by the engine (%s): names are up to 63 of "
                         "[A-Za-z0-9._-], limits at least the quota, children within the parent "
                         "(per GPU model too), byModel quotas within the gpu limit",
                         name, gs_strerror(err));
    char ignored[768];
    if (kai && w->cfg.on_warning && gs__kai_queue_ignored(spec, ignored, sizeof(ignored)) > 0) {
        char msg[1024];
        (void)snprintf(msg, sizeof(msg),
                       "Queue %s (%s): ignored: %s (gpusched reads spec.parentQueue and "
                       "spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight})",
                       name, api, ignored);
        w->cfg.on_warning(w->cfg.ctx, msg);
    }
    if (json_object_set_new(w->queues, name, json_integer(id)))
        return GS_ENOMEM;
    return gs__kqueue_own(&w->kq, name, api);
}

/* The annotation on a PodGroup that sets its gang's grace period, in whole seconds. */
#define GANG_GRACE_ANNOTATION "gpusched.io/gang-grace-seconds"

/*
 * A PodGroup: its minimum, schedule timeout and grace period, kept until its first member
 * arrives (gang_id()). The grace period (tenant.h, gs_engine_set_gang_grace()) is the
 * gpusched.io/gang-grace-seconds annotation, else spec.scheduleTimeoutSeconds, else 300 s.
 */
static int apply_podgroup(struct gs_kworld *w, const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns = jstr(md, "namespace"), *name = jstr(md, "name");
    const json_t *spec = json_object_get(obj, "spec");
    json_int_t min = json_integer_value(json_object_get(spec, "minMember"));
    const json_t *tv = json_object_get(spec, "scheduleTimeoutSeconds");
    json_int_t timeout = json_integer_value(tv);
    if (!name || min < 1)
        return gs__kfail(w, "PodGroup %s: spec.minMember must be at least 1", name ? name : "?");
    if ((tv && !json_is_integer(tv)) || timeout < 0)
        return gs__kfail(w, "PodGroup %s: spec.scheduleTimeoutSeconds must be a whole number >= 0",
                         name);
    json_int_t grace = timeout > 0 ? timeout : GS_GANG_GRACE_DEFAULT_MS / 1000;
    const char *ga = gs__kmeta_kv(obj, "annotations", GANG_GRACE_ANNOTATION);
    if (ga) {
        char *end = NULL;
        long long v = *ga >= '0' && *ga <= '9' ? strtoll(ga, &end, 10) : -1;
        /* At most ~31 years, so that the milliseconds cannot overflow. */
        if (v < 0 || *end != '\0' || v > 1000000000LL)
            return gs__kfail(w,
                             "PodGroup %s: metadata.annotations " GANG_GRACE_ANNOTATION
                             " must be a whole number of seconds (0 to 1000000000), not \"%s\"",
                             name, ga);
        grace = (json_int_t)v;
    }
    char *key = join_key(ns ? ns : "default", name);
    if (!key)
        return GS_ENOMEM;
    json_t *rec = json_pack("{s:I,s:I,s:I}", "min", min, "timeout_s", timeout, "grace_s", grace);
    int err = rec && !json_object_set_new(w->podgroups, key, rec) ? GS_OK : GS_ENOMEM;
    json_t *gv = json_object_get(w->gangs, key);
    if (!err && gv) /* edited after its first member came: its gang exists */
        err = gs__kqueue_gang_changed(&w->kq, w->e, key, (uint32_t)json_integer_value(gv), min,
                                      grace);
    free(key);
    return err;
}

static int gang_id(struct gs_kworld *w, const char *key, uint32_t *id)
{
    json_t *v = json_object_get(w->gangs, key);
    if (v) {
        *id = (uint32_t)json_integer_value(v);
        return GS_OK;
    }
    json_t *pg = json_object_get(w->podgroups, key);
    if (!pg)
        return GS_ENOENT;
    struct gs_gang_spec g = {key, (uint32_t)json_integer_value(json_object_get(pg, "min")),
                             json_integer_value(json_object_get(pg, "timeout_s")) * 1000};
    int err = gs_engine_add_gang(w->e, &g, id);
    if (!err)
        err = gs_engine_set_gang_grace(w->e, *id,
                                       json_integer_value(json_object_get(pg, "grace_s")) * 1000);
    if (err)
        return err;
    return json_object_set_new(w->gangs, key, json_integer(*id)) ? GS_ENOMEM : GS_OK;
}

/* ---- pods --------------------------------------------------------------------------------- */

static int pod_request(const json_t *spec, const char *res, double unit, int64_t *out)
{
    return gs__kpod_request(spec, res, unit, out);
}

/* What a Pod becomes; the filter arrays borrow strings from the pod object. */
struct tr {
    struct gs_tpod_spec spec;
    struct gs_pod_ident ident;
    const char *node;
    struct gs_placement pl;
    bool foreign;
    int64_t start_ms;
    struct gs__kfilter flt; /* nodeSelector, node affinity, tolerations (kselect.h) */
    char reason[256];
};

static void tr_free(struct tr *t)
{
    gs__kfilter_fini(&t->flt);
}

/*
 * The pod's PriorityClass id in the engine, and whether it may preempt. Its priority is
 * spec.priority, else its class's value, else the globalDefault class's, else 0; it is
 * preemptible as its class's gpusched.io/preemptible label says, else (with
 * --kai-preemptible-threshold) iff the priority is below the threshold, else yes. *never is
 * spec.preemptionPolicy == Never, else the class's (admission copies it to the pod). Returns 1
 * with `reason` for a preemptionPolicy that is neither Never nor PreemptLowerPriority.
 */
static int pod_class(struct gs_kworld *w, const json_t *spec, uint32_t *id, bool *never,
                     char *reason, size_t cap)
{
    const char *cname = jstr(spec, "priorityClassName");
    const json_t *prio = json_object_get(spec, "priority");
    const json_t *rec = cname ? json_object_get(w->pclasses, cname) : NULL;
    if (!rec) { /* the globalDefault class */
        const char *k;
        const json_t *v;
        json_object_foreach(w->pclasses, k, v)
        {
            if (!cname && json_is_true(json_object_get(v, "default"))) {
                cname = k;
                rec = v;
                break;
            }
        }
    }
    int32_t value = rec ? (int32_t)json_integer_value(json_object_get(rec, "value")) : 0;
    if (json_is_integer(prio))
        value = (int32_t)json_integer_value(prio);
    const json_t *label = json_object_get(rec, "preemptible");
    bool pre = label ? json_is_true(label)
                     : !w->cfg.kai_preemptible || value < w->cfg.kai_preemptible_threshold;
    char name[300];
    if (rec && value == (int32_t)json_integer_value(json_object_get(rec, "value")))
        (void)snprintf(name, sizeof(name), "%s", cname);
    else
        (void)snprintf(name, sizeof(name), "%s.v%d", rec ? cname : NO_CLASS, value);
    int err = class_id(w, name, value, pre, id);
    if (err)
        return err;
    const json_t *ppv = json_object_get(spec, "preemptionPolicy");
    const char *pp = json_string_value(ppv);
    if (ppv && !(pp && (strcmp(pp, "Never") == 0 || strcmp(pp, "PreemptLowerPriority") == 0))) {
        if (pp)
            (void)snprintf(reason, cap,
                           "spec.preemptionPolicy is \"%s\", not PreemptLowerPriority or Never",
                           pp);
        else
            (void)snprintf(reason, cap, "spec.preemptionPolicy is not a string");
        return 1;
    }
    *never = pp ? strcmp(pp, "Never") == 0 : json_is_true(json_object_get(rec, "never"));
    return GS_OK;
}

/* Translates a Pod object; 0 = ready, 1 = waits with t->reason, <0 = error. */
static int translate_pod(struct gs_kworld *w, const json_t *obj, int64_t now_ms, struct tr *t)
{
    memset(t, 0, sizeof(*t));
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *spec = json_object_get(obj, "spec");
    const char *sn = jstr(spec, "schedulerName");
    t->node = jstr(spec, "nodeName");
    t->foreign = !(sn && strcmp(sn, w->sched_name) == 0);
    t->spec.name = jstr(md, "name");
    t->spec.gang = GS_NO_GANG;
    t->spec.runtime_estimate_ms = -1;
    t->spec.req.gpu_model_mask = GS_MODEL_ANY;
    t->ident.uid = jstr(md, "uid");
    t->ident.ns = jstr(md, "namespace") ? jstr(md, "namespace") : "default";
    t->ident.name = t->spec.name;
    t->ident.foreign = t->foreign;
    const char *ts = jstr(md, "creationTimestamp");
    if (!ts || gs_ktime_ms(ts, &t->ident.created_ms) != 0)
        t->ident.created_ms = now_ms; /* created now, as far as we know */
    const char *st = jstr(json_object_get(obj, "status"), "startTime");
    t->start_ms = t->ident.created_ms;
    if (st)
        (void)gs_ktime_ms(st, &t->start_ms);
    if (gs__kpod_request_why(spec, "cpu", 1e-3, &t->spec.req.cpu_milli, t->reason,
                             sizeof(t->reason)) != 0 ||
        gs__kpod_request_why(spec, "memory", 1048576.0, &t->spec.req.mem_mib, t->reason,
                             sizeof(t->reason)) != 0)
        return 1;
    if (gs__kworld_pod_gpus(obj, spec, &t->spec.req, t->reason, sizeof(t->reason)))
        return 1;
    int err = gs__kxres_pod(w->c, spec, &t->spec.req, t->reason, sizeof(t->reason));
    if (err)
        return err;
    err = pod_class(w, spec, &t->spec.priority_class, &t->spec.preempt_never, t->reason,
                    sizeof(t->reason));
    if (err == 1 && t->foreign) { /* it preempts nothing here: it holds its capacity all the same */
        err = GS_OK;
        t->reason[0] = '\0';
    }
    if (err)
        return err;
    if (t->node) {
        int idx = gs_cluster_find_node(w->c, t->node);
        if (idx < 0) {
            (void)snprintf(t->reason, sizeof(t->reason), "bound to node %s, which is unknown",
                           t->node);
            return 1;
        }
        t->pl.node = (uint32_t)idx;
        gs__kworld_assigned(obj, &t->spec.req, w->c, t->pl.node, &t->pl);
    }
    if (t->foreign) { /* capacity only: any queue will do for the books it skips */
        const char *k;
        const json_t *v;
        json_object_foreach(w->queues, k, v)
        {
            (void)k;
            t->spec.queue = (uint32_t)json_integer_value(v);
            break;
        }
        return 0;
    }
    const char *q = gs__kmeta_kv(obj, "labels", "gpusched.io/queue");
    if (!q)
        q = gs__kmeta_kv(obj, "labels", "kai.scheduler/queue");
    if (!q)
        q = gs__kmeta_kv(obj, "labels", "kueue.x-k8s.io/queue-name");
    if (!q)
        q = w->default_queue;
    const json_t *qv = json_object_get(w->queues, q);
    if (!qv) {
        (void)snprintf(t->reason, sizeof(t->reason), "queue %s does not exist", q);
        return 1;
    }
    t->spec.queue = (uint32_t)json_integer_value(qv);
    const char *pg =
        w->cfg.observe ? NULL : gs__kmeta_kv(obj, "labels", "scheduling.x-k8s.io/pod-group");
    if (!pg && !w->cfg.observe)
        pg = gs__kmeta_kv(obj, "annotations", "scheduling.k8s.io/group-name");
    if (pg) {
        char *key = join_key(t->ident.ns, pg);
        if (!key)
            return GS_ENOMEM;
        err = gang_id(w, key, &t->spec.gang);
        if (err == GS_ENOENT)
            (void)snprintf(t->reason, sizeof(t->reason), "PodGroup %s does not exist", key);
        free(key);
        if (err == GS_ENOENT)
            return 1;
        if (err)
            return err;
    }
    const json_t *aff = json_object_get(spec, "affinity");
    if (json_object_get(aff, "podAffinity") || json_object_get(aff, "podAntiAffinity")) {
        (void)snprintf(t->reason, sizeof(t->reason),
                       "pod affinity and anti-affinity are not supported by gpusched");
        return 1;
    }
    if (json_array_size(json_object_get(spec, "topologySpreadConstraints"))) {
        (void)snprintf(t->reason, sizeof(t->reason),
                       "topology spread constraints are not supported by gpusched");
        return 1;
    }
    if (!t->node && json_array_size(json_object_get(spec, "schedulingGates"))) {
        (void)snprintf(t->reason, sizeof(t->reason), "%s", GS_KWORLD_REASON_GATED);
        return 1;
    }
    if ((err = gs__kfilter_read(&t->flt, spec)) != GS_OK) {
        if (err == GS_ENOMEM)
            return err;
        (void)snprintf(t->reason, sizeof(t->reason), "node affinity or tolerations are malformed");
        return 1;
    }
    return 0;
}

static int grow_of_engine(struct gs_kworld *w, uint32_t id)
{
    if (id < w->cap_of_engine)
        return GS_OK;
    uint32_t cap = w->cap_of_engine ? w->cap_of_engine : 64;
    while (cap <= id)
        cap *= 2;
    uint32_t *m = realloc(w->of_engine, cap * sizeof(*m));
    if (!m)
        return GS_ENOMEM;
    for (uint32_t i = w->cap_of_engine; i < cap; i++)
        m[i] = NO_ID;
    w->of_engine = m;
    w->cap_of_engine = cap;
    return GS_OK;
}

static void set_park(struct kpod *p, const char *reason, const json_t *obj)
{
    char *r = strdup(reason);
    if (!r)
        return; /* keeps the older reason */
    free(p->park);
    p->park = r;
    if (obj != p->obj) {
        json_decref(p->obj);
        p->obj = json_deep_copy(obj);
    }
}

/* Puts a pod into the engine, or parks it with a reason. */
static int enter_pod(struct gs_kworld *w, uint32_t pi, const json_t *obj_in, int64_t now_ms)
{
    struct kpod *p = &w->pods[pi];
    const json_t *avoid = json_object_get(w->avoid, p->key);
    json_t *own = NULL;
    if (avoid && json_array_size(avoid) && !jstr(json_object_get(obj_in, "spec"), "nodeName") &&
        !(own = gs__kpod_with_avoided(obj_in, avoid)))
        return GS_ENOMEM;
    /* The pod's own object stays what is kept (parked), so the avoided nodes can be cleared. */
    const json_t *obj = own ? own : obj_in;
    struct tr t;
    int rc = translate_pod(w, obj, now_ms, &t);
    if (rc < 0) {
        tr_free(&t);
        json_decref(own);
        return rc;
    }
    if (rc == 1) {
        set_park(p, t.reason, obj_in);
        tr_free(&t);
        json_decref(own);
        return GS_OK;
    }
    wl_note(w, &t.spec.req);
    int err = GS_OK;
    uint32_t cls = GS_FILTER_DEFAULT;
    if (!t.node && !t.foreign) {
        err = gs_filter_intern(w->c, &t.flt.f, &cls);
        if (err == GS_EINVAL) {
            set_park(p, "node affinity or tolerations are malformed", obj_in);
            tr_free(&t);
            json_decref(own);
            return GS_OK;
        }
    }
    if (err) {
        tr_free(&t);
        json_decref(own);
        return err;
    }
    t.ident.filter_class = cls;
    uint32_t id = NO_ID;
    /* The engine's id is not known before the call, and its events name it: its SUBMIT or
     * ADOPT event maps it (on_engine_event). Room for a new slot is made first. */
    err = grow_of_engine(w, gs_engine_pod_count(w->e) + 1);
    w->entering = pi;
    if (!err && t.node)
        err = gs_engine_adopt(w->e, &t.spec, &t.ident, &t.pl, t.start_ms, &id);
    else if (!err)
        /* Submitted at its creation, not when this scheduler first saw it: the queue serves
         * equal priorities oldest first, and a restart (which lists pods by name) keeps the
         * order they were created in. */
        err = gs_engine_submit_pod(w->e, &t.spec, &t.ident,
                                   t.ident.created_ms < now_ms ? t.ident.created_ms : now_ms, &id);
    w->entering = NO_ID;
    if (!err && grow_of_engine(w, id) == GS_OK)
        w->of_engine[id] = pi;
    else if (err && id != NO_ID && id < w->cap_of_engine)
        w->of_engine[id] = NO_ID; /* as before: a refused gang's pod is parked, unmapped */
    gs_filter_release(w->c, cls);
    bool adopting = t.node != NULL;
    tr_free(&t);
    json_decref(own); /* t borrowed its strings */
    if (err) {
        if (err == GS_ENOMEM)
            return err;
        char why[200];
        (void)snprintf(why, sizeof(why), "refused by the engine: %s%s", gs_strerror(err),
                       err == GS_EINVAL && adopting ? " (its GPUs are over capacity)" : "");
        set_park(p, why, obj_in);
        return GS_OK;
    }
    p->engine_id = id;
    free(p->park);
    p->park = NULL;
    json_decref(p->obj);
    p->obj = NULL;
    const json_t *labels = json_object_get(json_object_get(obj_in, "metadata"), "labels");
    return gs__kpdb_track(&w->pdb, w->e, p->key, p->ns, labels, id); /* its budgets */
}

static int new_kpod(struct gs_kworld *w, const char *key, const char *ns, const char *name,
                    const char *uid, bool ours, uint32_t *out)
{
    if (w->npods == w->cappods) {
        uint32_t cap = w->cappods ? w->cappods * 2 : 64;
        struct kpod *np = realloc(w->pods, cap * sizeof(*np));
        if (!np)
            return GS_ENOMEM;
        w->pods = np;
        w->cappods = cap;
    }
    if (!w->pods)
        return GS_ENOMEM;
    struct kpod *p = &w->pods[w->npods];
    memset(p, 0, sizeof(*p));
    p->key = strdup(key);
    p->ns = strdup(ns);
    p->name = strdup(name);
    p->uid = uid ? strdup(uid) : NULL;
    p->engine_id = NO_ID;
    p->ours = ours;
    if (!p->key || !p->ns || !p->name || (uid && !p->uid) ||
        json_object_set_new(w->pod_keys, key, json_integer(w->npods))) {
        free(p->key);
        free(p->ns);
        free(p->name);
        free(p->uid);
        return GS_ENOMEM;
    }
    *out = w->npods++;
    return GS_OK;
}

static struct kpod *find_kpod(struct gs_kworld *w, const char *ns, const char *name)
{
    char *key = join_key(ns, name);
    if (!key)
        return NULL;
    json_t *v = json_object_get(w->pod_keys, key);
    free(key);
    return v ? &w->pods[json_integer_value(v)] : NULL;
}

static int apply_pod(struct gs_kworld *w, enum gs_kchange change, const json_t *obj, int64_t now_ms)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns = jstr(md, "namespace") ? jstr(md, "namespace") : "default";
    const char *name = jstr(md, "name");
    if (!name || !*name)
        return gs__kfail(w, "a Pod without metadata.name");
    const char *phase = jstr(json_object_get(obj, "status"), "phase");
    bool done = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
    struct kpod *p = find_kpod(w, ns, name);
    if (p && p->uid && jstr(md, "uid") && strcmp(p->uid, jstr(md, "uid")) != 0 && !p->ended &&
        change != GS_KDELETED)
        return gs__kfail(w, "pod %s/%s: a second pod of that name while the first is known", ns,
                         name);
    if (change == GS_KDELETED || (p && done)) {
        if (!p || p->ended)
            return GS_OK;
        if (p->engine_id != NO_ID) {
            struct gs_tpod_info info;
            (void)gs_engine_pod_info(w->e, p->engine_id, &info);
            if (done && phase[0] == 'S' && info.state == GS_TPOD_RUNNING)
                (void)gs_engine_finish(w->e, p->engine_id, now_ms);
            else if (info.state == GS_TPOD_RUNNING || info.state == GS_TPOD_PENDING)
                (void)gs_engine_delete(w->e, p->engine_id, now_ms);
        }
        p->ended = true;
        free(p->park);
        p->park = NULL;
        gs__kpdb_untrack(&w->pdb, p->key);
        return GS_OK;
    }
    if (p && !p->ended) {
        if (p->park)
            return enter_pod(w, (uint32_t)(p - w->pods), obj, now_ms); /* e.g. gates removed */
        /* Changes to a pod the engine holds: its binding is ours; its labels pick budgets. */
        return gs__kpdb_track(&w->pdb, w->e, p->key, ns, json_object_get(md, "labels"),
                              p->engine_id);
    }
    if (done)
        return GS_OK;
    const json_t *spec = json_object_get(obj, "spec");
    const char *sn = jstr(spec, "schedulerName");
    bool ours = sn && strcmp(sn, w->sched_name) == 0;
    if ((!ours || w->cfg.observe) && !jstr(spec, "nodeName"))
        return GS_OK; /* another scheduler's pending pod; observing: ours enters once bound */
    char *key = join_key(ns, name);
    if (!key)
        return GS_ENOMEM;
    uint32_t pi;
    int err;
    if (p) { /* a pod of an old name that ended: the name now names the new one */
        pi = (uint32_t)(p - w->pods);
        p->ended = false;
        p->engine_id = NO_ID;
        free(p->uid);
        p->uid = jstr(md, "uid") ? strdup(jstr(md, "uid")) : NULL;
        p->ours = ours;
        err = GS_OK;
    } else {
        err = new_kpod(w, key, ns, name, jstr(md, "uid"), ours, &pi);
    }
    free(key);
    return err ? err : enter_pod(w, pi, obj, now_ms);
}

/* ---- setup at the first cycle ------------------------------------------------------------- */

static const char *kind_of(const json_t *obj)
{
    const char *k = jstr(obj, "kind");
    return k ? k : "";
}

/* Records the request of a GPU pod seen (ours or another scheduler's) for the workload. */
static void wl_note(struct gs_kworld *w, const struct gs_pod_req *req)
{
    /* The FGD target workload is the GPU pods' task types (frag.h): milli, memory fractions,
     * MIG instances and time-sliced slots alike. */
    if (!gs_req_wants_gpu(req))
        return;
    if (!w->wl_seen && !(w->wl_seen = calloc(WL_SAMPLES, sizeof(*w->wl_seen))))
        return; /* the workload only guides scores: keep the one we have */
    w->wl_seen[w->wl_n % WL_SAMPLES] = *req;
    w->wl_n++;
}

/* At a cycle's start: the workload from the requests seen, when their count reached wl_next.
 * The engine borrows the workload, so the new one is built in the other of the two slots and
 * the old one is released only at the next swap. */
static int wl_refresh(struct gs_kworld *w)
{
    if (w->wl_n < w->wl_next || !w->wl_seen)
        return GS_OK;
    uint32_t k = w->wl_n < WL_SAMPLES ? (uint32_t)w->wl_n : WL_SAMPLES;
    const char **specs = calloc(k, sizeof(*specs));
    if (!specs)
        return GS_ENOMEM;
    for (uint32_t i = 0; i < k; i++)
        specs[i] = "";
    struct gs_workload fresh;
    memset(&fresh, 0, sizeof(fresh));
    int err = gs_workload_build(w->wl_seen, specs, k, 100, &fresh);
    free(specs);
    if (err)
        return err;
    int nxt = 1 - w->wl_cur;
    gs_workload_fini(&w->wls[nxt]); /* the engine points at wls[wl_cur], not at this one */
    w->wls[nxt] = fresh;
    if ((err = gs_engine_set_workload(w->e, &w->wls[nxt])) != GS_OK)
        return err; /* the engine keeps wls[wl_cur] */
    w->wl_cur = nxt;
    w->wl_next = w->wl_n < WL_SAMPLES ? w->wl_n * 2 : w->wl_n + WL_SAMPLES;
    w->wl_builds++;
    return GS_OK;
}

static int build_workload(struct gs_kworld *w)
{
    size_t n = json_array_size(w->staged);
    struct gs_pod_req *reqs = calloc(n + 1, sizeof(*reqs));
    const char **specs = calloc(n + 1, sizeof(*specs));
    if (!reqs || !specs) {
        free(reqs);
        free(specs);
        return GS_ENOMEM;
    }
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *obj = json_array_get(w->staged, i);
        if (strcmp(kind_of(obj), "Pod") != 0)
            continue;
        struct tr t;
        memset(&t, 0, sizeof(t));
        t.spec.req.gpu_model_mask = GS_MODEL_ANY;
        const json_t *spec = json_object_get(obj, "spec");
        if (pod_request(spec, "cpu", 1e-3, &t.spec.req.cpu_milli) != 0 ||
            gs__kworld_pod_gpus(obj, spec, &t.spec.req, t.reason, sizeof(t.reason)) != 0 ||
            !gs_req_wants_gpu(&t.spec.req))
            continue;
        reqs[k] = t.spec.req;
        specs[k++] = "";
    }
    if (k == 0) { /* no GPU pod yet: one whole GPU stands for the workload */
        reqs[0] = (struct gs_pod_req){
            .cpu_milli = 1000, .num_gpu = 1, .gpu_milli = 1000, .gpu_model_mask = GS_MODEL_ANY};
        specs[0] = "";
        k = 1;
    }
    /* The first rebuild from the pods seen comes once they are twice the dump's (at least 16);
     * enter_pod notes the dump's pods as it enters them. */
    w->wl_next = k < 8 ? 16 : 2 * (uint64_t)k;
    int err = gs_workload_build(reqs, specs, k, 100, &w->wls[0]);
    free(reqs);
    free(specs);
    return err;
}

static int start(struct gs_kworld *w, int64_t now_ms)
{
    int err = build_workload(w);
    if (err)
        return err;
    struct gs_engine_config ec = {.policy = w->policy,
                                  .workload = &w->wls[0],
                                  .preemption = w->cfg.preemption,
                                  .reclaim = w->cfg.reclaim,
                                  .backfill = w->cfg.backfill,
                                  .evict_ends_pod = true,
                                  .dynamic_mig = w->cfg.dynamic_mig,
                                  .on_event = on_engine_event,
                                  .ctx = w};
    if ((err = gs_engine_new(w->c, &ec, &w->e)) != GS_OK)
        return err;
    w->started = true;
    size_t n = json_array_size(w->staged);
    /* Kinds in dependency order; queues until no more can be added (parents first). */
    for (size_t i = 0; i < n && !err; i++) {
        const json_t *o = json_array_get(w->staged, i);
        if (strcmp(kind_of(o), "PriorityClass") == 0)
            err = apply_priority_class(w, o);
        else if (strcmp(kind_of(o), "PodGroup") == 0)
            err = apply_podgroup(w, o);
        else if (strcmp(kind_of(o), "PodDisruptionBudget") == 0)
            err = gs__kpdb_apply(&w->pdb, w->e, GS_KADDED, o, w->err, w->errcap);
    }
    bool *done = calloc(n + 1, sizeof(*done));
    if (!done)
        return GS_ENOMEM;
    for (bool progress = true; progress && !err;) {
        progress = false;
        for (size_t i = 0; i < n && !err; i++) {
            const json_t *o = json_array_get(w->staged, i);
            if (done[i] || strcmp(kind_of(o), "Queue") != 0)
                continue;
            char qn[256];
            err = add_queue(w, o, qn, sizeof(qn));
            if (err == GS_ENOENT) {
                err = GS_OK; /* its parent comes later */
                continue;
            }
            done[i] = true;
            progress = true;
        }
    }
    for (size_t i = 0; i < n && !err; i++) {
        const json_t *o = json_array_get(w->staged, i);
        if (!done[i] && strcmp(kind_of(o), "Queue") == 0)
            err = gs__kfail(w, "Queue %s: spec.parentQueue %s does not exist",
                            jstr(json_object_get(o, "metadata"), "name"),
                            jstr(json_object_get(o, "spec"), "parentQueue"));
    }
    free(done);
    if (!err && !json_object_get(w->queues, w->default_queue)) {
        struct gs_queue_spec q = {w->default_queue, GS_QUEUE_ROOT, {0}, {0}, 1.0, 0};
        for (int r = 0; r < GS_RES_COUNT; r++)
            q.limit[r] = GS_UNLIMITED;
        uint32_t id;
        if ((err = gs_engine_add_queue(w->e, &q, &id)) == GS_OK &&
            json_object_set_new(w->queues, w->default_queue, json_integer(id)))
            err = GS_ENOMEM;
    }
    uint32_t none;
    if (!err)
        err = class_id(w, NO_CLASS ".v0", 0, true, &none); /* foreign pods need one */
    for (size_t i = 0; i < n && !err; i++) {
        const json_t *o = json_array_get(w->staged, i);
        if (strcmp(kind_of(o), "Node") == 0)
            err = gs__kworld_apply_node(w, GS_KADDED, o, now_ms);
    }
    /* Running pods first (oldest first, as they were bound), then pending ones. */
    for (int pass = 0; pass < 2 && !err; pass++)
        for (size_t i = 0; i < n && !err; i++) {
            const json_t *o = json_array_get(w->staged, i);
            bool bound = jstr(json_object_get(o, "spec"), "nodeName") != NULL;
            if (strcmp(kind_of(o), "Pod") == 0 && bound == (pass == 0))
                err = apply_pod(w, GS_KADDED, o, now_ms);
        }
    json_array_clear(w->staged);
    json_object_clear(w->staged_at);
    return err;
}

int gs_kworld_apply(struct gs_kworld *w, enum gs_kchange change, const json_t *obj, int64_t now_ms,
                    char *err, size_t cap)
{
    set_err(w, err, cap);
    if (!json_is_object(obj))
        return gs__kfail(w, "an object is not a mapping");
    const char *kind = kind_of(obj);
    if (!w->started) {
        /* Held for the first cycle: a later change of the same object replaces it. */
        const json_t *md = json_object_get(obj, "metadata");
        const char *ns = jstr(md, "namespace"), *name = jstr(md, "name");
        if (!name) /* nameless: kept in order, never replaced (the first cycle reports it) */
            return change == GS_KDELETED || json_array_append(w->staged, (json_t *)obj) == 0
                       ? GS_OK
                       : GS_ENOMEM;
        /* The unit separator cannot occur in a kind, namespace or name. */
        /* With the API group: two kinds of Queue (or PodGroup) may share a name. */
        const char *api = jstr(obj, "apiVersion"), *slash = api ? strchr(api, '/') : NULL;
        int glen = slash ? (int)(slash - api) : 0;
        size_t klen = strlen(kind) + (size_t)glen + (ns ? strlen(ns) : 0) + strlen(name) + 5;
        char *key = malloc(klen);
        if (!key)
            return GS_ENOMEM;
        (void)snprintf(key, klen, "%s\x1f%.*s\x1f%s%s\x1f%s", kind, glen, glen ? api : "",
                       ns ? "+" : "-", ns ? ns : "", name);
        json_t *at = json_object_get(w->staged_at, key);
        int rc = GS_OK;
        if (at) {
            size_t i = (size_t)json_integer_value(at);
            if (change == GS_KDELETED) {
                /* A hole, not a removal: the indexes of later objects stay right. */
                if (json_array_set_new(w->staged, i, json_null()) ||
                    json_object_del(w->staged_at, key))
                    rc = GS_ENOMEM;
            } else if (json_array_set(w->staged, i, (json_t *)obj)) {
                rc = GS_ENOMEM;
            }
        } else if (change != GS_KDELETED) {
            if (json_object_set_new(w->staged_at, key,
                                    json_integer((json_int_t)json_array_size(w->staged))) ||
                json_array_append(w->staged, (json_t *)obj))
                rc = GS_ENOMEM;
        }
        free(key);
        return rc;
    }
    if (strcmp(kind, "Node") == 0)
        return gs__kworld_apply_node(w, change, obj, now_ms);
    if (strcmp(kind, "Pod") == 0)
        return apply_pod(w, change, obj, now_ms);
    if (strcmp(kind, "PriorityClass") == 0 && change != GS_KDELETED)
        return apply_priority_class(w, obj);
    if (strcmp(kind, "PodGroup") == 0 && change != GS_KDELETED)
        return apply_podgroup(w, obj);
    if (strcmp(kind, "PodDisruptionBudget") == 0)
        return gs__kpdb_apply(&w->pdb, w->e, change, obj, w->err, w->errcap);
    if (strcmp(kind, "Queue") == 0 && change == GS_KDELETED)
        return gs__kqueue_delete(&w->kq, w->e, w->queues, obj, w->err, w->errcap);
    if (strcmp(kind, "Queue") == 0) {
        char qn[256];
        int rc = add_queue(w, obj, qn, sizeof(qn));
        return rc == GS_ENOENT ? gs__kfail(w, "Queue %s: its parent queue does not exist", qn) : rc;
    }
    return GS_OK;
}

int gs_kworld_cycle(struct gs_kworld *w, int64_t now_ms, uint32_t *changes, char *err, size_t cap)
{
    set_err(w, err, cap);
    int rc;
    if (!w->started && (rc = start(w, now_ms)) != GS_OK)
        return rc;
    /* GPU modes that waited for their pods to leave (apply_node). */
    if (json_object_size(w->mode_due)) {
        json_t *due = json_copy(w->mode_due);
        const char *k;
        json_t *v;
        rc = due ? GS_OK : GS_ENOMEM;
        json_object_foreach(due, k, v)
        {
            (void)k;
            if (rc == GS_OK)
                rc = gs__kworld_apply_node(w, GS_KMODIFIED, v, now_ms);
        }
        json_decref(due);
        if (rc)
            return rc;
    }
    /* Parked pods may fit in now (a queue, node or PodGroup arrived). */
    for (uint32_t i = 0; i < w->npods; i++) {
        struct kpod *p = &w->pods[i];
        if (p->park && p->obj && !p->ended) {
            json_t *o = json_incref(p->obj);
            rc = enter_pod(w, i, o, now_ms);
            json_decref(o);
            if (rc)
                return rc;
        }
    }
    if ((rc = wl_refresh(w)) == GS_ENOMEM)
        return rc; /* any other failure keeps the workload the engine has */
    w->changes = 0;
    rc = w->cfg.observe ? GS_OK : gs_engine_cycle(w->e, now_ms, NULL, NULL);
    if (changes)
        *changes = w->changes;
    return rc;
}

int gs_kworld_finish_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms)
{
    struct kpod *p = find_kpod(w, ns, name);
    if (!p || p->ended)
        return GS_ENOENT;
    if (p->engine_id == NO_ID)
        return GS_EINVAL;
    int rc = gs_engine_finish(w->e, p->engine_id, now_ms);
    if (rc == GS_OK)
        p->ended = true;
    return rc;
}

int gs_kworld_delete_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms)
{
    struct kpod *p = find_kpod(w, ns, name);
    if (!p || p->ended)
        return GS_ENOENT;
    if (p->engine_id != NO_ID) {
        struct gs_tpod_info info;
        (void)gs_engine_pod_info(w->e, p->engine_id, &info);
        if (info.state == GS_TPOD_RUNNING || info.state == GS_TPOD_PENDING)
            (void)gs_engine_delete(w->e, p->engine_id, now_ms);
    }
    p->ended = true;
    return GS_OK;
}

int gs_kworld_forget_pod(struct gs_kworld *w, const char *ns, const char *name, int64_t now_ms)
{
    struct kpod *p = find_kpod(w, ns, name);
    if (!p)
        return GS_ENOENT;
    if (p->engine_id != NO_ID) {
        struct gs_tpod_info info;
        if (gs_engine_pod_info(w->e, p->engine_id, &info) == GS_OK &&
            (info.state == GS_TPOD_RUNNING || info.state == GS_TPOD_PENDING))
            (void)gs_engine_delete(w->e, p->engine_id, now_ms);
        /* The engine forgets it too, uid included: the same pod read again (same uid) enters
         * afresh instead of being refused as a duplicate. */
        if (gs_engine_forget(w->e, p->engine_id) == GS_OK && p->engine_id < w->cap_of_engine)
            w->of_engine[p->engine_id] = NO_ID;
        p->engine_id = NO_ID;
    }
    /* The name forgets its pod: the next ADDED of it starts afresh. */
    p->ended = true;
    free(p->uid);
    p->uid = NULL;
    free(p->park);
    p->park = NULL;
    json_decref(p->obj);
    p->obj = NULL;
    return GS_OK;
}

int gs_kworld_avoid_node(struct gs_kworld *w, const char *ns, const char *name, const char *node)
{
    char *key = join_key(ns, name);
    if (!key)
        return GS_ENOMEM;
    json_t *arr = json_object_get(w->avoid, key);
    int err = GS_OK;
    if (!arr) {
        arr = json_array();
        if (!arr || json_object_set_new(w->avoid, key, arr))
            err = GS_ENOMEM;
    }
    free(key);
    for (size_t i = 0; !err && i < json_array_size(arr); i++)
        if (strcmp(json_string_value(json_array_get(arr, i)), node) == 0)
            return GS_OK;
    if (!err && json_array_append_new(arr, json_string(node)))
        err = GS_ENOMEM;
    return err;
}

void gs_kworld_avoid_clear(struct gs_kworld *w, const char *ns, const char *name)
{
    char *key = join_key(ns, name);
    if (key)
        (void)json_object_del(w->avoid, key);
    free(key);
}

int gs_kworld_cordon(struct gs_kworld *w, const char *node, bool unschedulable)
{
    int idx = gs_cluster_find_node(w->c, node);
    return idx < 0 ? GS_ENOENT : gs_cluster_set_unschedulable(w->c, (uint32_t)idx, unschedulable);
}

int gs_kworld_gpu_health(struct gs_kworld *w, const char *node, uint32_t gpu, bool healthy)
{
    int idx = gs_cluster_find_node(w->c, node);
    return idx < 0 ? GS_ENOENT : gs_cluster_set_gpu_health(w->c, (uint32_t)idx, gpu, healthy);
}

int gs_kworld_delete_node(struct gs_kworld *w, const char *node, int64_t now_ms)
{
    int idx = gs_cluster_find_node(w->c, node);
    return idx < 0 ? GS_ENOENT : gs_engine_remove_node(w->e, (uint32_t)idx, now_ms);
}

void gs_kworld_each_pending(struct gs_kworld *w,
                            void (*fn)(void *ctx, const char *ns, const char *name, const char *uid,
                                       const char *reason),
                            void *ctx)
{
    for (uint32_t i = 0; i < w->npods; i++) {
        struct kpod *p = &w->pods[i];
        if (p->ended || !p->ours)
            continue;
        if (p->engine_id == NO_ID) {
            fn(ctx, p->ns, p->name, p->uid, p->park ? p->park : "not tried yet (no cycle ran)");
            continue;
        }
        struct gs_tpod_info info;
        if (gs_engine_pod_info(w->e, p->engine_id, &info) != GS_OK || info.state != GS_TPOD_PENDING)
            continue;
        fn(ctx, p->ns, p->name, p->uid,
           info.reason ? info.reason
                       : "waiting in its queue: a pod ahead of it (higher priority or older) "
                         "cannot be placed yet");
    }
}

const struct gs_workload *gs_kworld_workload(const struct gs_kworld *w, uint32_t *rebuilds)
{
    if (rebuilds)
        *rebuilds = w->wl_builds;
    return w->started ? &w->wls[w->wl_cur] : NULL;
}
