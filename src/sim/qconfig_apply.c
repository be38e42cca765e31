/*
 * The queue configuration applied (see qconfig_int.h): its queues and PriorityClasses created in
 * an engine, and trace pods mapped to queues and classes by the rules.
 */
#include "qconfig_int.h"

#include "gpusched/err.h"

#include <errno.h>
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
        spec.name = q->name;
        spec.parent = q->parent == NONE ? GS_QUEUE_ROOT : eid[q->parent];
        memcpy(spec.quota, q->quota, sizeof spec.quota);
        memcpy(spec.limit, q->limit, sizeof spec.limit);
        spec.over_quota_weight = q->weight;
        spec.min_runtime_ms = q->min_runtime_ms;
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

int gs_qconfig_assign(const struct gs_qconfig *qc, const struct gs_trace_pod *pod,
                      struct gs_qconfig_assignment *out)
{
    const char *name = pod->name ? pod->name : "";
    const char *qos_text = pod->qos ? pod->qos : "";
    int qos = gs__qc_qos_index(qos_text, strlen(qos_text));
    uint32_t queue = qc->default_queue, pclass = NONE;

    out->queue = NULL;
    out->priority_class = NULL;
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
    /* On failure, a found queue is still reported so the caller can say what is missing. */
    if (queue != NONE)
        out->queue = qc->q[queue].name;
    if (queue == NONE || pclass == NONE)
        return GS_ENOENT;
    out->queue = qc->q[queue].name;
    out->priority_class = qc->pc[pclass].name;
    return GS_OK;
}

int64_t gs_qconfig_min_runtime_ms(const struct gs_qconfig *qc)
{
    return qc ? qc->min_runtime_ms : 0;
}
