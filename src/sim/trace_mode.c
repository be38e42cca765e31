/*
 * The node list's `gpu_mode` column and the pod list's sharing columns turned into the core's
 * terms: a gs_gpu_mode for every GPU of a node, a gs_pod_req of any kind for a pod.
 *
 * A MIG mode lists profiles joined by '+', each with an optional "@start" (the first memory
 * slice). Profiles without a start are placed by a small search: the instances in the order
 * written, each at the lowest allowed start that overlaps no instance before it, backing off
 * when a later one finds no room, so "3g.20gb+2g.10gb+2g.10gb" on an A100-40GB becomes 3g at 4
 * and the two 2g at 0 and 2. Whatever the search picks is judged by gs_mig_layout_check(), the
 * core's one rule for what the hardware allows.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/trace.h"

/* Depth-first search of starts for in[k..n) given the memory slices taken so far. */
static bool place_from(const struct gs_mig_model *m, struct gs_mig_instance *in, const bool *fixed,
                       uint32_t k, uint32_t n, uint32_t taken)
{
    if (k == n)
        return true;
    const struct gs_mig_profile *p = &m->profiles[in[k].profile];
    for (uint32_t s = 0; s < p->n_starts; s++) {
        if (fixed[k] && p->starts[s] != in[k].start)
            continue;
        struct gs_mig_instance cand = {in[k].profile, p->starts[s]};
        uint32_t mask = gs_mig_mem_mask(m, cand);
        if (mask == 0 || (mask & taken))
            continue;
        in[k].start = cand.start;
        if (place_from(m, in, fixed, k + 1, n, taken | mask))
            return true;
    }
    return false;
}

int gs_trace_parse_gpu_mode(const char *text, size_t len, const char *model,
                            struct gs_gpu_mode *out, char *reason, size_t cap)
{
    char buf[256];
    memset(out, 0, sizeof(*out));
    out->sharing = GS_GPU_SHARE_MILLI;
    out->replicas = 1;
    if (reason && cap)
        reason[0] = '\0';
    if (len >= sizeof(buf)) {
        if (reason)
            (void)snprintf(reason, cap, "mode is %zu bytes; at most %zu", len, sizeof(buf) - 1);
        return GS_EINVAL;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (len == 0 || strcmp(buf, "fractions") == 0)
        return GS_OK;
    if (strcmp(buf, "whole") == 0) {
        out->sharing = GS_GPU_SHARE_WHOLE;
        return GS_OK;
    }
    if (strncmp(buf, "replicas:", 9) == 0) {
        const char *d = buf + 9;
        uint32_t v = 0;
        size_t nd = 0;
        for (; d[nd] >= '0' && d[nd] <= '9' && v <= 255; nd++)
            v = v * 10 + (uint32_t)(d[nd] - '0');
        if (nd == 0 || d[nd] != '\0' || v < 1 || v > 255) {
            if (reason)
                (void)snprintf(reason, cap, "'%s': replicas:N needs N in 1..255", buf);
            return GS_EINVAL;
        }
        out->sharing = GS_GPU_SHARE_TIMESLICE;
        out->replicas = (uint8_t)v;
        return GS_OK;
    }
    if (strncmp(buf, "mig:", 4) != 0) {
        if (reason)
            (void)snprintf(reason, cap,
                           "unknown mode '%.64s'; one of whole, fractions, replicas:N, "
                           "mig:<profile>+<profile>...",
                           buf);
        return GS_EINVAL;
    }
    const struct gs_mig_model *m = gs_mig_model_find(model);
    if (m == NULL) {
        if (reason)
            (void)snprintf(reason, cap,
                           "model '%.40s' has no MIG geometry: name the model as the MIG table "
                           "does (A100-40GB, A100-80GB, A30-24GB, H100-80GB, H100-94GB, "
                           "H200-141GB, B200)",
                           model ? model : "");
        return GS_EINVAL;
    }
    bool fixed[GS_MIG_INSTANCES_MAX] = {false};
    uint32_t n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf + 4, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
        if (n == GS_MIG_INSTANCES_MAX) {
            if (reason)
                (void)snprintf(reason, cap, "more than %d MIG instances on one GPU",
                               GS_MIG_INSTANCES_MAX);
            return GS_EINVAL;
        }
        char *at = strchr(tok, '@');
        if (at) {
            *at = '\0';
            char *end = NULL;
            unsigned long s = strtoul(at + 1, &end, 10);
            if (at[1] < '0' || at[1] > '9' || *end != '\0' || s >= m->mem_slices) {
                if (reason)
                    (void)snprintf(reason, cap, "instance %u (%.16s): bad start '%.8s'", n + 1, tok,
                                   at + 1);
                return GS_EINVAL;
            }
            out->mig[n].start = (uint8_t)s;
            fixed[n] = true;
        }
        int p = gs_mig_profile_find(m, tok);
        if (p < 0) {
            if (reason)
                (void)snprintf(reason, cap, "instance %u: %s has no MIG profile '%.16s'", n + 1,
                               m->name, tok);
            return GS_EINVAL;
        }
        out->mig[n++].profile = (uint8_t)p;
    }
    if (n == 0) {
        if (reason)
            (void)snprintf(reason, cap, "mig: lists no profile");
        return GS_EINVAL;
    }
    /* With no room found, keep the first starts so that the check names the fault. */
    struct gs_mig_instance tried[GS_MIG_INSTANCES_MAX];
    memcpy(tried, out->mig, sizeof(tried));
    if (!place_from(m, out->mig, fixed, 0, n, 0)) {
        /* Each at its lowest start free of the ones before (or its first start), so that
         * the check reports the first instance with no room. */
        uint32_t taken = 0;
        memcpy(out->mig, tried, sizeof(tried));
        for (uint32_t k = 0; k < n; k++) {
            const struct gs_mig_profile *p = &m->profiles[out->mig[k].profile];
            if (!fixed[k]) {
                out->mig[k].start = p->starts[0];
                for (uint32_t s = 0; s < p->n_starts; s++) {
                    struct gs_mig_instance cand = {out->mig[k].profile, p->starts[s]};
                    if (!(gs_mig_mem_mask(m, cand) & taken)) {
                        out->mig[k].start = cand.start;
                        break;
                    }
                }
            }
            taken |= gs_mig_mem_mask(m, out->mig[k]);
        }
    }
    char why[160];
    if (gs_mig_layout_check(m, out->mig, n, why, sizeof(why)) != GS_OK) {
        if (reason)
            (void)snprintf(reason, cap, "%s cannot hold this layout: %s", m->name, why);
        return GS_EINVAL;
    }
    out->sharing = GS_GPU_SHARE_MIG;
    out->mig_count = (uint8_t)n;
    return GS_OK;
}

int gs_trace_pod_req(const struct gs_trace_pod *p, uint64_t model_mask, struct gs_pod_req *out)
{
    memset(out, 0, sizeof(*out));
    out->cpu_milli = p->cpu_milli;
    out->mem_mib = p->mem_mib;
    out->gpu_model_mask = model_mask;
    if (p->mig_profile[0]) {
        /* num_gpu counts the instances; gpu_milli must be 0, which validation checks. */
        out->mig_count = p->num_gpu > UINT8_MAX ? UINT8_MAX : (uint8_t)p->num_gpu;
        out->gpu_milli = p->gpu_milli;
        memcpy(out->mig_profile, p->mig_profile, sizeof(out->mig_profile));
    } else if (p->timeslice_slots) {
        /* num_gpu and gpu_milli must be 0, which validation checks. */
        out->timeslice_slots = p->timeslice_slots;
        out->num_gpu = p->num_gpu;
        out->gpu_milli = p->gpu_milli;
    } else {
        out->num_gpu = p->num_gpu;
        out->gpu_milli = p->gpu_milli;
        out->gpu_mem_mib = p->gpu_mem_mib;
    }
    return gs_pod_req_validate(out, NULL, 0);
}

void gs_trace_node_spec(const struct gs_trace_node *tn, int32_t pods_max, struct gs_gpu_mode *modes,
                        struct gs_node_spec *out)
{
    bool plain = tn->gpu_mode.sharing == GS_GPU_SHARE_MILLI;
    for (uint32_t g = 0; !plain && g < tn->gpu_count && g < GS_NODE_GPUS_MAX; g++)
        modes[g] = tn->gpu_mode;
    *out = (struct gs_node_spec){.name = tn->name,
                                 .cpu_milli = tn->cpu_milli,
                                 .mem_mib = tn->mem_mib,
                                 .pods_max = pods_max,
                                 .gpu_count = tn->gpu_count,
                                 .gpu_model = tn->model,
                                 .gpu_mem_mib = tn->gpu_mem_mib,
                                 .gpu_modes = plain ? NULL : modes};
}
