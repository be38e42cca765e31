/*
 * The queue configuration applied (see qconfig_int.h): its queues and PriorityClasses created in
 * an engine, and trace pods mapped to queues and classes by the rules.
 */
#include "qconfig_int.h"

#include "gpusched/err.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- apply and assign ------------------------------------------------------------------- */

int gs_qconfig_apply(const struct gs_qconfig *qc, struct gs_engine *e, struct gs_diag *diag)
{
    struct gs_diag scratch;
    struct gs_diag *d = diag ? diag : &scratch;
    uint32_t *eid = calloc(qc->nq ? qc->nq : 1, sizeof *eid);
    int rc = GS_OK;

    memset(d, 0, sizeof *d);
    (void)snprintf(d->file, sizeof d->file, "%s", qc->name);
    if (eid == NULL) {
        (void)snprintf(d->msg, sizeof d->msg, "out of memory");
        return GS_ENOMEM;
    }
    for (uint32_t k = 0; k < qc->nq; k++) {
        uint32_t i = qc->order[k];
        const struct qqueue *q = &qc->q[i];
        struct gs_queue_spec spec;
        memset(&spec, 0, sizeof spec);
        spec.name = q->name;
        spec.parent = q->parent == NONE ? GS_QUEUE_ROOT : eid[q->parent];
        memcpy(spec.quota, q->quota, sizeof spec.quota);
        memcpy(spec.limit, q->limit, sizeof spec.limit);
        spec.over_quota_weight = q->weight;
        spec.min_runtime_ms = q->min_runtime_ms;
        struct gs_model_quota mq[LIST_MAX];
        for (uint32_t j = 0; j < q->nmodels; j++) {
            /* Model ids from the cluster's table; a model no node has yet is added to it. */
            rc = gs_cluster_model_id(gs_engine_cluster(e), q->models[j].model, &mq[j].model);
            if (rc != GS_OK) {
                d->line = q->models[j].at.line;
                d->column = q->models[j].at.col;
                (void)snprintf(d->field, sizeof d->field, "byModel");
                (void)snprintf(d->msg, sizeof d->msg, "the cluster refused GPU model '%.100s': %s",
                               q->models[j].model, gs_strerror(rc));
                goto out;
            }
            mq[j].quota_milli = q->models[j].quota;
            mq[j].limit_milli = q->models[j].limit;
        }
        spec.by_model = q->nmodels ? mq : NULL;
        spec.n_by_model = q->nmodels;
        rc = gs_engine_add_queue(e, &spec, &eid[i]);
        if (rc != GS_OK) {
            d->line = q->at.line;
            d->column = q->at.col;
            (void)snprintf(d->field, sizeof d->field, "name");
            (void)snprintf(d->msg, sizeof d->msg, "the engine refused queue '%.100s': %s", q->name,
                           gs_strerror(rc));
            goto out;
        }
    }
    for (uint32_t i = 0; i < qc->npc; i++) {
        const struct qclass *pc = &qc->pc[i];
        struct gs_priority_class_spec spec = {pc->name, pc->value, pc->preemptible};
        rc = gs_engine_add_priority_class(e, &spec, NULL);
        if (rc != GS_OK) {
            d->line = pc->at.line;
            d->column = pc->at.col;
            (void)snprintf(d->field, sizeof d->field, "name");
            (void)snprintf(d->msg, sizeof d->msg, "the engine refused PriorityClass '%.100s': %s",
                           pc->name, gs_strerror(rc));
            goto out;
        }
    }
out:
    free(eid);
    if (rc == GS_OK)
        memset(d, 0, sizeof *d);
    return rc;
}

/* True when one of the '|'-separated parts of spec is among the rule's models. */
static bool model_matches(const struct qrule *rule, const char *spec)
{
    while (*spec != '\0') {
        size_t len = strcspn(spec, "|");
        for (uint32_t i = 0; i < rule->nmodels; i++)
            if (strlen(rule->models[i]) == len && memcmp(rule->models[i], spec, len) == 0)
                return true;
        spec += len;
        if (*spec == '|')
            spec++;
    }
    return false;
}

static bool rule_matches(const struct qrule *rule, const struct gs_trace_pod *pod, int qos,
                         const char *name)
{
    if (rule->qos_mask != 0 && (qos < 0 || !(rule->qos_mask & (1u << qos))))
        return false;
    if (rule->nmodels > 0 && !model_matches(rule, pod->gpu_spec ? pod->gpu_spec : ""))
        return false;
    if (rule->has_num && (pod->num_gpu < rule->num_min || pod->num_gpu > rule->num_max))
        return false;
    if (rule->prefix != NULL && strncmp(name, rule->prefix, rule->prefix_len) != 0)
        return false;
    return true;
}

/* The rules' decision for one pod as indices: *queue and *pclass, NONE when not found. */
static void assign_index(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                         uint32_t *queue_out, uint32_t *pclass_out)
{
    const char *name = pod->name ? pod->name : "";
    const char *qos_text = pod->qos ? pod->qos : "";
    int qos = gs__qc_qos_index(qos_text, strlen(qos_text));
    uint32_t queue = qc->default_queue, pclass = NONE;

    for (uint32_t i = 0; i < qc->nrules; i++) {
        const struct qrule *rule = &qc->rules[i];
        if (!rule_matches(rule, pod, qos, name))
            continue;
        queue = rule->queue;
        if (queue == NONE) {
            uint64_t h = gs__fnv1a(name, strlen(name)) % rule->weight_sum;
            uint32_t j = 0;
            while (h >= rule->hash[j].weight) {
                h -= rule->hash[j].weight;
                j++;
            }
            queue = rule->hash[j].queue;
        }
        pclass = rule->pclass;
        break;
    }
    if (pclass == NONE && qos >= 0)
        pclass = qc->qos_class[qos];
    if (pclass == NONE)
        pclass = qc->default_class;
    *queue_out = queue;
    *pclass_out = pclass;
}

int gs_qconfig_assign(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                      struct gs_qconfig_assignment *out)
{
    uint32_t queue, pclass;
    assign_index(qc, pod, &queue, &pclass);
    out->queue = NULL;
    out->priority_class = NULL;
    /* On failure, a found queue is still reported so the caller can say what is missing. */
    if (queue != NONE)
        out->queue = qc->q[queue].name;
    if (queue == NONE || pclass == NONE)
        return GS_ENOENT;
    out->priority_class = qc->pc[pclass].name;
    return GS_OK;
}

/* ---- pod groups ------------------------------------------------------------------------- */

/** A pod in arrival order. */
struct arrival {
    int64_t t_s;  /**< creation time, 0 when missing */
    uint32_t pod; /**< index in the list */
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct arrival *x = a, *y = b;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return x->pod < y->pod ? -1 : x->pod > y->pod;
}

/** The open group of one (rule, queue) pair. */
struct open_group {
    uint32_t rule, queue;
    uint32_t *members; /**< rule's size slots; n used */
    uint32_t n;
    int64_t first_s; /**< arrival of members[0] */
};

static bool same_shape(const struct gs_trace_pod *a, const struct gs_trace_pod *b)
{
    return a->num_gpu == b->num_gpu && a->gpu_milli == b->gpu_milli &&
           a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib &&
           strcmp(a->gpu_spec ? a->gpu_spec : "", b->gpu_spec ? b->gpu_spec : "") == 0;
}

/* The first rule that looks at a pod of queue q asking num_gpu GPUs, or NONE. */
static uint32_t rule_for(const struct gs_qconfig *qc, uint32_t q, uint32_t num_gpu)
{
    for (uint32_t r = 0; r < qc->npg; r++) {
        const struct qpgroup *g = &qc->pg[r];
        if (num_gpu < g->min_gpu)
            continue;
        if (g->nqueues == 0)
            return r;
        for (uint32_t k = 0; k < g->nqueues; k++)
            if (g->queues[k] == q)
                return r;
    }
    return NONE;
}

/* Records a full group as gang number ++count[queue] of its queue. */
static int close_as_gang(const struct gs_qconfig *qc, const struct open_group *og, uint32_t *count,
                         struct gs_qconfig_gangs *out, uint32_t *cap)
{
    if (out->n == *cap) {
        uint32_t ncap = *cap ? 2 * *cap : 16;
        struct gs_qconfig_gang *nv = realloc(out->v, ncap * sizeof *nv);
        if (nv == NULL)
            return GS_ENOMEM;
        out->v = nv;
        *cap = ncap;
    }
    const char *qname = qc->q[og->queue].name;
    uint32_t k = ++count[og->queue];
    size_t len = strlen(qname) + 16;
    char *name = malloc(len);
    if (name == NULL)
        return GS_ENOMEM;
    (void)snprintf(name, len, "%s-pg-%u", qname, k);
    const struct qpgroup *g = &qc->pg[og->rule];
    out->v[out->n] =
        (struct gs_qconfig_gang){name, og->queue, g->size, g->timeout_ms, og->members[0]};
    for (uint32_t m = 0; m < og->n; m++)
        out->gang_of[og->members[m]] = out->n;
    out->n++;
    return GS_OK;
}

int gs_qconfig_form_gangs(const struct gs_qconfig *qc, const struct gs_trace_pods *pods,
                          struct gs_qconfig_gangs *out)
{
    uint32_t n = pods->n, cap = 0, nopen = 0;
    int rc = GS_ENOMEM;
    memset(out, 0, sizeof *out);
    struct arrival *order = malloc(((size_t)n + 1) * sizeof *order);
    uint32_t *count = calloc((size_t)qc->nq + 1, sizeof *count);
    /* At most one open group per (rule, queue) pair that has seen a pod: at most n of them. */
    struct open_group *open =
        calloc((size_t)(n < qc->npg * (uint64_t)qc->nq ? n : qc->npg * qc->nq) + 1, sizeof *open);
    out->gang_of = malloc(((size_t)n + 1) * sizeof *out->gang_of);
    out->npods = n;
    if (order == NULL || count == NULL || open == NULL || out->gang_of == NULL)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        int64_t t = pods->v[i].creation_time_s;
        order[i] = (struct arrival){t < 0 ? 0 : t, i};
        out->gang_of[i] = GS_QCONFIG_NO_GANG;
    }
    if (n > 1)
        qsort(order, n, sizeof *order, cmp_arrival);
    for (uint32_t k = 0; k < n && qc->npg > 0; k++) {
        const struct gs_trace_pod *p = &pods->v[order[k].pod];
        uint32_t q, pclass;
        assign_index(qc, p, &q, &pclass);
        if (q == NONE)
            continue;
        uint32_t r = rule_for(qc, q, p->num_gpu);
        if (r == NONE)
            continue;
        const struct qpgroup *g = &qc->pg[r];
        struct open_group *og = NULL;
        for (uint32_t j = 0; j < nopen && og == NULL; j++)
            if (open[j].rule == r && open[j].queue == q)
                og = &open[j];
        if (og == NULL) {
            og = &open[nopen++];
            og->rule = r;
            og->queue = q;
            if ((og->members = malloc(g->size * sizeof *og->members)) == NULL)
                goto out;
        }
        bool joins = og->n > 0 && og->n < g->size && same_shape(&pods->v[og->members[0]], p) &&
                     (order[k].t_s - og->first_s) * 1000 <= g->window_ms;
        if (!joins) {
            og->n = 0; /* a short group dissolves: its pods run alone */
            og->first_s = order[k].t_s;
        }
        og->members[og->n++] = order[k].pod;
        if (og->n == g->size) {
            if ((rc = close_as_gang(qc, og, count, out, &cap)) != GS_OK)
                goto out;
            og->n = 0;
        }
    }
    rc = GS_OK;
out:
    for (uint32_t j = 0; j < nopen; j++)
        free(open[j].members);
    free(open);
    free(count);
    free(order);
    if (rc != GS_OK)
        gs_qconfig_gangs_fini(out);
    return rc;
}

void gs_qconfig_gangs_fini(struct gs_qconfig_gangs *g)
{
    if (g == NULL)
        return;
    for (uint32_t i = 0; i < g->n; i++)
        free(g->v[i].name);
    free(g->v);
    free(g->gang_of);
    memset(g, 0, sizeof *g);
}

uint32_t gs_qconfig_pod_group_rules(const struct gs_qconfig *qc)
{
    return qc ? qc->npg : 0;
}

int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc)
{
    return qc ? qc->min_runtime_ms : 0;
}

void gs_qconfig_scale(struct gs_qconfig *qc, double factor)
{
    if (!qc || !(factor > 0) || factor >= 1)
        return;
    /* Floors: floor(a f) + floor(b f) <= floor((a + b) f), so children's quotas stay within
     * their parent's, and limits stay at or above quotas. */
    for (uint32_t i = 0; i < qc->nq; i++)
        for (int r = 0; r < GS_RES_COUNT; r++) {
            qc->q[i].quota[r] = (int64_t)floor((double)qc->q[i].quota[r] * factor);
            if (qc->q[i].limit[r] != GS_UNLIMITED)
                qc->q[i].limit[r] = (int64_t)floor((double)qc->q[i].limit[r] * factor);
        }
    for (uint32_t i = 0; i < qc->nq; i++) /* per-model bounds alike */
        for (uint32_t j = 0; j < qc->q[i].nmodels; j++) {
            struct qmodel *x = &qc->q[i].models[j];
            x->quota = (int64_t)floor((double)x->quota * factor);
            if (x->limit != GS_UNLIMITED)
                x->limit = (int64_t)floor((double)x->limit * factor);
        }
}

uint32_t gs_qconfig_queue_count(const struct gs_qconfig *qc)
{
    return qc ? qc->nq : 0;
}

const char *gs_qconfig_queue_gpu(const struct gs_qconfig *qc, uint32_t i, int64_t *quota_milli,
                                 int64_t *limit_milli)
{
    if (!qc || i >= qc->nq)
        return NULL;
    *quota_milli = qc->q[i].quota[GS_RES_GPU];
    *limit_milli = qc->q[i].limit[GS_RES_GPU];
    return qc->q[i].name;
}

/* splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
 * 2014): one well-mixed 64-bit value per (seed, pod, rule), so a pod's draw does not depend on
 * the others. */
static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

uint32_t gs_qconfig_sharing_rules(const struct gs_qconfig *qc)
{
    return qc ? qc->nsh : 0;
}

int gs_qconfig_apply_sharing(const struct gs_qconfig *qc, struct gs_trace_pods *pods, uint64_t seed,
                             uint32_t converted[3])
{
    for (int k = 0; k < 3; k++)
        converted[k] = 0;
    if (qc == NULL || qc->nsh == 0)
        return GS_OK;
    for (uint32_t i = 0; i < pods->n; i++) {
        struct gs_trace_pod *p = &pods->v[i];
        if (p->num_gpu == 0 || p->gpu_mem_mib > 0 || p->mig_profile[0] || p->timeslice_slots)
            continue; /* no GPU, or a kind the pod list gave already */
        bool shared = p->gpu_milli < GS_GPU_MILLI;
        for (uint32_t r = 0; r < qc->nsh; r++) {
            const struct qshare *sh = &qc->sh[r];
            if ((sh->pods == QSHARE_PODS_SHARED && !shared) ||
                (sh->pods == QSHARE_PODS_WHOLE && shared))
                continue;
            uint64_t draw = mix64(seed ^ mix64(((uint64_t)i << 8) | r));
            if (draw % 100 >= sh->share_pct)
                continue;
            struct gs_trace_pod q = *p;
            if (sh->kind == QSHARE_MEMORY) {
                q.gpu_mem_mib = sh->gpu_mem_mib * p->gpu_milli / GS_GPU_MILLI;
                if (q.gpu_mem_mib < 1)
                    q.gpu_mem_mib = 1;
                q.gpu_milli = 0;
            } else if (sh->kind == QSHARE_MIG) {
                (void)snprintf(q.mig_profile, sizeof q.mig_profile, "%s", sh->mig_profile);
                q.gpu_milli = 0;
            } else {
                q.timeslice_slots = (uint8_t)p->num_gpu;
                q.num_gpu = 0;
                q.gpu_milli = 0;
            }
            struct gs_pod_req req;
            if (gs_trace_pod_req(&q, GS_MODEL_ANY, &req) != GS_OK)
                continue; /* e.g. more than GS_PLACEMENT_MIG_MAX instances: left as it is */
            *p = q;
            converted[sh->kind]++;
            break;
        }
    }
    pods->has_sharing = 1;
    return GS_OK;
}
