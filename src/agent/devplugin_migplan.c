/*
 * Dynamic MIG on the node (issue 8): the agent carries out the re-partition plans `gpusched
 * scheduler --dynamic-mig` writes on its Node (annotation gpusched.io/mig-plan, kmigplan.h),
 * only with mig.dynamic on in its config. A plan is checked whole before anything changes
 * (gs_dp_mig_execute), then its destroys and creates go through the GPU backend, the GPUs are
 * read again (the rediscovery path: new device lists, sockets and the inventory
 * gpusched.io/gpus), and the outcome is written as gpusched.io/mig-plan-status. A plan is
 * carried out once (by id); with the switch off plans are ignored, said once in the log.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/dpkube.h"
#include "gpusched/err.h"
#include "gpusched/kmigplan.h"
#include "gpusched/mig.h"

#include "devplugin_agent.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int GS_PRINTF(4, 5) refuse(char *why, size_t cap, int rc, const char *fmt, ...)
{
    if (why != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The MIG device of g at (profile, start), or -1. */
static int find_mig(const struct gs_gpu_info *g, const char *profile, uint32_t start)
{
    for (uint32_t i = 0; i < g->mig_count; i++)
        if (g->mig[i].has_start && g->mig[i].start_slot == start &&
            strcmp(g->mig[i].profile, profile) == 0)
            return (int)i;
    return -1;
}

int gs_dp_mig_execute(struct gs_gpu_backend *b, const struct gs_kmig_plan *p,
                      gs_dp_mig_used_fn used, void *ctx, char *why, size_t cap)
{
    if (why != NULL && cap > 0)
        why[0] = '\0';
    if (b == NULL || p == NULL)
        return refuse(why, cap, GS_EINVAL, "no backend or plan");
    uint32_t n = 0;
    if (gs_gpu_count(b, &n) != GS_OK || p->gpu >= n)
        return refuse(why, cap, GS_EINVAL, "GPU %u does not exist (the node has %u)", p->gpu, n);
    struct gs_gpu_info g;
    if (gs_gpu_info(b, p->gpu, &g) != GS_OK || g.lost)
        return refuse(why, cap, GS_EINVAL, "GPU %u cannot be read: %s", p->gpu,
                      gs_gpu_last_error(b));
    if (p->uuid[0] != '\0' && strcmp(p->uuid, g.uuid) != 0)
        return refuse(why, cap, GS_EINVAL, "GPU %u is %s, not %s as the plan says", p->gpu, g.uuid,
                      p->uuid);
    if (!g.mig_enabled)
        return refuse(why, cap, GS_EINVAL, "GPU %u is not in MIG mode", p->gpu);
    const struct gs_mig_model *m = gs_mig_model_find(g.model);
    if (m == NULL)
        return refuse(why, cap, GS_EINVAL, "GPU %u: model %s is not in the MIG table", p->gpu,
                      g.model);
    /* The layout after the plan: what stays, then what is made. */
    bool gone[GS_GPU_MIG_MAX] = {false};
    for (uint32_t d = 0; d < p->n_destroy; d++) {
        int i = find_mig(&g, p->destroy[d].profile, p->destroy[d].start);
        if (i < 0 || gone[i])
            return refuse(why, cap, GS_EINVAL, "GPU %u has no instance %s at slice %u to destroy",
                          p->gpu, p->destroy[d].profile, p->destroy[d].start);
        char who[160] = "";
        if (used != NULL && used(ctx, p->gpu, &g.mig[i], who, sizeof who))
            return refuse(why, cap, GS_EINVAL,
                          "GPU %u: instance %s at slice %u (%s) is in use by %s", p->gpu,
                          g.mig[i].profile, g.mig[i].start_slot, g.mig[i].uuid, who);
        gone[i] = true;
    }
    struct gs_mig_instance after[GS_GPU_MIG_MAX + GS_MIG_INSTANCES_MAX];
    uint32_t n_after = 0;
    for (uint32_t i = 0; i < g.mig_count; i++) {
        if (gone[i])
            continue;
        int pi = gs_mig_profile_find(m, g.mig[i].profile);
        if (pi < 0 || !g.mig[i].has_start)
            return refuse(why, cap, GS_EINVAL,
                          "GPU %u: instance %s (%s) that stays has no known profile and start",
                          p->gpu, g.mig[i].profile, g.mig[i].uuid);
        after[n_after++] = (struct gs_mig_instance){(uint8_t)pi, (uint8_t)g.mig[i].start_slot};
    }
    for (uint32_t c = 0; c < p->n_create; c++) {
        int pi = gs_mig_profile_find(m, p->create[c].profile);
        if (pi < 0)
            return refuse(why, cap, GS_EINVAL, "GPU %u (%s) has no MIG profile %s", p->gpu, m->name,
                          p->create[c].profile);
        after[n_after++] = (struct gs_mig_instance){(uint8_t)pi, (uint8_t)p->create[c].start};
    }
    char reason[200];
    if (n_after > GS_MIG_INSTANCES_MAX ||
        gs_mig_layout_check(m, after, n_after, reason, sizeof reason) != GS_OK)
        return refuse(why, cap, GS_EINVAL, "GPU %u: the layout after the plan is not valid: %s",
                      p->gpu, n_after > GS_MIG_INSTANCES_MAX ? "too many instances" : reason);
    for (uint32_t d = 0; d < p->n_destroy; d++)
        if (gs_gpu_mig_destroy(b, p->gpu, p->destroy[d].start) != GS_OK)
            return refuse(why, cap, GS_EIO, "GPU %u: destroying %s at slice %u failed: %s", p->gpu,
                          p->destroy[d].profile, p->destroy[d].start, gs_gpu_last_error(b));
    for (uint32_t c = 0; c < p->n_create; c++)
        if (gs_gpu_mig_create(b, p->gpu, p->create[c].profile, p->create[c].start) != GS_OK)
            return refuse(why, cap, GS_EIO, "GPU %u: creating %s at slice %u failed: %s", p->gpu,
                          p->create[c].profile, p->create[c].start, gs_gpu_last_error(b));
    return GS_OK;
}

/* Held: named by a live pod's assignment on this node, or by kubelet's last PodResources
 * answer (the devices containers hold). */
static bool agent_mig_used(void *ctx, uint32_t gpu, const struct gs_gpu_mig *mig, char *who,
                           size_t cap)
{
    struct gs_dp_agent *a = ctx;
    size_t len = strlen(mig->uuid);
    for (uint32_t k = 0; len > 0 && k < a->n_attr && k < GS_EXPORTER_ATTR_MAX; k++) {
        const char *id = a->attr[k].device_id;
        /* The MIG device itself, or one of its time-slicing replicas "<UUID>::<n>". */
        if (strncmp(id, mig->uuid, len) != 0 ||
            (id[len] != '\0' && strncmp(id + len, "::", 2) != 0))
            continue;
        (void)snprintf(who, cap, "container %s of pod %s/%s", a->attr[k].container,
                       a->attr[k].namespace_name, a->attr[k].pod);
        return true;
    }
    return a->kube != NULL && mig->has_start &&
           gs__dp_kube_mig_used(a->kube, gpu, mig->profile, mig->start_slot, who, cap);
}

static void say_status(struct gs_dp_agent *a, const char *id, bool done, const char *reason)
{
    struct gs_kmig_status st;
    memset(&st, 0, sizeof st);
    (void)snprintf(st.id, sizeof st.id, "%s", id);
    st.done = done;
    (void)snprintf(st.reason, sizeof st.reason, "%s", reason);
    char *text = gs_kmig_status_write(&st);
    if (text == NULL || gs__dp_kube_plan_status(a->kube, text) != GS_OK)
        gs__dp_logf(a, "dynamic MIG: out of memory writing the outcome of plan %s", id);
    free(text);
}

void gs__dp_migplan_turn(struct gs_dp_agent *a)
{
    if (a->mig_rediscover && !a->have_pending) {
        a->mig_rediscover = false;
        gs__dp_rediscover(a); /* the new layout: device lists, sockets, inventory */
    }
    if (a->kube == NULL)
        return;
    char *text = gs__dp_kube_take_plan(a->kube);
    if (text == NULL)
        return;
    if (!a->cfg.mig_dynamic) {
        if (!a->said_mig_off)
            gs__dp_logf(a,
                        "dynamic MIG: ignoring the MIG re-partition plan on node %s (annotation "
                        "%s): mig.dynamic is off in the config; the scheduler's plan times out",
                        a->node_name, GS_KMIGPLAN_ANNOTATION);
        a->said_mig_off = true;
        free(text);
        return;
    }
    struct gs_kmig_plan p;
    char err[GS_KMIGPLAN_REASON_LEN] = "";
    int rc = gs_kmig_plan_read(text, &p, err, sizeof err);
    free(text);
    if (rc != GS_OK) {
        gs__dp_logf(a, "dynamic MIG: annotation %s is not a plan: %s", GS_KMIGPLAN_ANNOTATION, err);
        return; /* no id to answer to; the scheduler's timeout ends it */
    }
    if (a->mig_last_id != NULL && strcmp(p.id, a->mig_last_id) == 0)
        return; /* carried out already (the same plan seen again) */
    free(a->mig_last_id);
    a->mig_last_id = strdup(p.id);
    rc = gs_dp_mig_execute(a->backend, &p, agent_mig_used, a, err, sizeof err);
    if (rc == GS_OK) {
        gs__dp_logf(a,
                    "dynamic MIG: plan %s for pod %s carried out on GPU %u (%u destroyed, %u "
                    "created)",
                    p.id, p.pod, p.gpu, p.n_destroy, p.n_create);
        say_status(a, p.id, true, "");
    } else {
        gs__dp_logf(a, "dynamic MIG: plan %s for pod %s refused: %s", p.id, p.pod, err);
        say_status(a, p.id, false, err);
    }
    if (rc != GS_EINVAL)
        a->mig_rediscover = true; /* something changed: read the GPUs again */
    gs__dp_migplan_turn(a);
}
