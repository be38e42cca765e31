/*
 * A Pod's GPU ask into the core's request kinds, and the assignment annotation back into a
 * placement (internal contract in kworld_gpus.h). The vocabularies are the ones users already
 * write: NVIDIA's device plugin (`nvidia.com/gpu`, `nvidia.com/gpu.shared`,
 * `nvidia.com/mig-<profile>`), KAI's annotations (`gpu-fraction`, `gpu-memory`,
 * `gpu-fraction-num-devices`) and HAMi's resources (`nvidia.com/gpumem`,
 * `nvidia.com/gpumem-percentage`, `nvidia.com/gpucores`). This file only reads the words; the
 * core's gs_pod_req_validate() alone decides whether their mix is a request, so a pod is
 * refused for the same reason whatever vocabulary it used.
 */
#include "kworld_gpus.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpusched/kquantity.h"
#include "gpusched/mig.h"
#include "kworld_xres.h"

#define MIG_PREFIX "nvidia.com/mig-"

static const char *annotation(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

/* The MIG resource names a spec asks for, over containers and init containers; at most two
 * distinct names are kept (a second is enough to refuse). Returns how many were seen (0..2). */
static int mig_names(const json_t *spec, const char *names[2])
{
    static const char *const lists[] = {"containers", "initContainers"};
    static const char *const maps[] = {"limits", "requests"};
    int n = 0;
    for (size_t l = 0; l < 2; l++) {
        const json_t *conts = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(conts); i++) {
            const json_t *res = json_object_get(json_array_get(conts, i), "resources");
            for (size_t m = 0; m < 2; m++) {
                const char *key;
                const json_t *v;
                json_object_foreach(json_object_get(res, maps[m]), key, v)
                {
                    (void)v;
                    if (strncmp(key, MIG_PREFIX, strlen(MIG_PREFIX)) != 0)
                        continue;
                    if (n >= 1 && strcmp(names[0], key) == 0)
                        continue;
                    if (n == 2)
                        continue;
                    names[n++] = key;
                    if (n == 2)
                        return n;
                }
            }
        }
    }
    return n;
}

#define REFUSE(...)                                                                                \
    do {                                                                                           \
        (void)snprintf(reason, cap, __VA_ARGS__);                                                  \
        return 1;                                                                                  \
    } while (0)

int gs__kworld_pod_gpus(const json_t *obj, const json_t *spec, struct gs_pod_req *rq, char *reason,
                        size_t cap)
{
    int64_t n = 0, cores = 0, gpumem = 0, pct = 0, shared = 0;
    if (gs__kpod_request_why(spec, "nvidia.com/gpu", 1.0, &n, reason, cap) != 0)
        return 1;
    if (gs__kpod_request_why(spec, "nvidia.com/gpucores", 1.0, &cores, reason, cap) != 0)
        return 1;
    if (gs__kpod_request_why(spec, "nvidia.com/gpumem", 1.0, &gpumem, reason, cap) != 0)
        return 1;
    if (gs__kpod_request_why(spec, "nvidia.com/gpumem-percentage", 1.0, &pct, reason, cap) != 0)
        return 1;
    if (gs__kpod_request_why(spec, "nvidia.com/gpu.shared", 1.0, &shared, reason, cap) != 0)
        return 1;
    const char *pct_ann = annotation(obj, "nvidia.com/gpumem-percentage");
    if (pct == 0 && pct_ann && gs_kquantity(pct_ann, 1.0, true, &pct) != 0)
        REFUSE("annotation nvidia.com/gpumem-percentage must be a number of percent");
    const char *names[2] = {NULL, NULL};
    int n_mig = mig_names(spec, names);
    if (n_mig == 2)
        REFUSE("asks MIG instances of two profiles (%s and %s): one profile per pod",
               names[0] + strlen(MIG_PREFIX), names[1] + strlen(MIG_PREFIX));
    int64_t mig = 0;
    if (n_mig == 1 && gs__kpod_request_why(spec, names[0], 1.0, &mig, reason, cap) != 0)
        return 1;
    if (n_mig == 1 && strlen(names[0] + strlen(MIG_PREFIX)) >= sizeof(rq->mig_profile))
        REFUSE("%s: profile name longer than %zu bytes", names[0], sizeof(rq->mig_profile) - 1);

    /* KAI's annotations. */
    int64_t frac_milli = 0, kai_mem = 0, devs = 1;
    const char *frac = annotation(obj, "gpu-fraction");
    const char *kmem = annotation(obj, "gpu-memory");
    const char *kdevs = annotation(obj, "gpu-fraction-num-devices");
    if (frac &&
        (gs_kquantity(frac, 1e-3, true, &frac_milli) != 0 || frac_milli <= 0 || frac_milli > 1000))
        REFUSE("annotation gpu-fraction must be a number in (0, 1]");
    if (kmem && (gs_kquantity(kmem, 1.0, true, &kai_mem) != 0 || kai_mem <= 0))
        REFUSE("annotation gpu-memory must be a positive number of MiB");
    if (kdevs && (gs_kquantity(kdevs, 1.0, false, &devs) != 0 || devs < 1))
        REFUSE("annotation gpu-fraction-num-devices must be a count of at least 1");
    if (frac && kmem)
        REFUSE("annotations gpu-fraction and gpu-memory: give a fraction one way only");

        /* Every word is written into the request as it stands, so that the validation judges and
         * names it; a count beyond its field's type is clamped to the type's largest value (255, or
         * 100% of compute) rather than wrapped into a valid-looking one. */
#define CLAMP(v, hi) ((v) > (hi) ? (hi) : (v))
    rq->num_gpu = 0;
    rq->gpu_milli = 0;
    rq->gpu_mem_mib = 0;
    rq->gpu_mem_pct = 0;
    rq->timeslice_slots = 0;
    rq->mig_count = 0;
    memset(rq->mig_profile, 0, sizeof(rq->mig_profile));
    if (n > GS_NODE_GPUS_MAX || devs > GS_NODE_GPUS_MAX)
        REFUSE("asks %lld GPUs, more than any node has", (long long)(n > devs ? n : devs));
    if (frac || kmem) {
        if (n > 0 && n != devs)
            REFUSE("nvidia.com/gpu %lld beside a KAI fraction of %lld device(s): give the "
                   "devices by gpu-fraction-num-devices only",
                   (long long)n, (long long)devs);
        rq->num_gpu = (uint32_t)devs;
        if (kmem) {
            rq->gpu_mem_mib = kai_mem;
        } else if (devs == 1 || frac_milli == 1000) {
            rq->gpu_milli = (int32_t)frac_milli; /* KAI: that share of compute and memory */
        } else {
            /* N devices of one fraction each: the same share of compute and of memory on
             * each (the memory share rounded up to a whole percent). */
            rq->gpu_milli = (int32_t)frac_milli;
            rq->gpu_mem_pct = (uint8_t)((frac_milli + 9) / 10);
        }
    } else {
        rq->num_gpu = (uint32_t)n;
        if (gpumem > 0 || pct > 0) {
            rq->gpu_mem_mib = gpumem;
            rq->gpu_mem_pct = (uint8_t)CLAMP(pct, UINT8_MAX);
            rq->gpu_milli = (int32_t)(CLAMP(cores, 100) * 10);
        } else {
            rq->gpu_milli = n ? GS_GPU_MILLI : 0;
            if (cores > 0 && n == 1 && cores < 100)
                rq->gpu_milli = (int32_t)(cores * 10); /* HAMi gpucores: percent of one GPU */
        }
    }
    rq->timeslice_slots = (uint8_t)CLAMP(shared, UINT8_MAX);
    if (n_mig == 1 && mig > 0) {
        rq->mig_count = (uint8_t)CLAMP(mig, UINT8_MAX);
        (void)snprintf(rq->mig_profile, sizeof(rq->mig_profile), "%s",
                       names[0] + strlen(MIG_PREFIX));
    }
#undef CLAMP
    char why[GS_REQ_REASON_MAX];
    if (gs_pod_req_validate(rq, why, sizeof(why)) != 0)
        REFUSE("not a GPU request: %s", why);
    return 0;
}

#undef REFUSE

/* For an assignment without a start (the node's MIG read from capacity): the first instance of
 * profile p on GPU g that no pod holds and `got` has not taken yet; -1 when none. */
static int free_start(const struct gs_gpu *gp, uint8_t p, uint8_t g, const struct gs_placement *got,
                      uint32_t n)
{
    for (uint32_t i = 0; i < gp->mig_count; i++) {
        bool taken = gp->mig[i].profile != p || (gp->mig_held & (1u << i)) != 0;
        for (uint32_t j = 0; j < n && !taken; j++)
            taken = got->mig[j].gpu == g && got->mig[j].start == gp->mig[i].start;
        if (!taken)
            return gp->mig[i].start;
    }
    return -1;
}

void gs__kworld_assigned(const json_t *obj, const struct gs_pod_req *rq, const struct gs_cluster *c,
                         uint32_t node, struct gs_placement *pl)
{
    const char *a = annotation(obj, "gpusched.io/assigned-gpus");
    const struct gs_node *nd = gs_cluster_node(c, node);
    if (!a || !nd)
        return;
    json_t *doc = json_loads(a, 0, NULL);
    const json_t *gpus = json_object_get(doc, "gpus");
    enum gs_req_kind kind = gs_req_kind(rq);
    struct gs_placement got;
    memset(&got, 0, sizeof(got));
    got.node = pl->node;
    uint32_t n = 0;
    bool bad = false;
    for (size_t i = 0; i < json_array_size(gpus) && !bad; i++) {
        const json_t *e = json_array_get(gpus, i);
        const json_t *ix = json_object_get(e, "index");
        if (!json_is_integer(ix) || json_integer_value(ix) < 0 ||
            json_integer_value(ix) >= (json_int_t)nd->gpu_count) {
            bad = true;
            break;
        }
        uint8_t g = (uint8_t)json_integer_value(ix);
        if (kind == GS_REQ_MIG) {
            const json_t *m = json_object_get(e, "mig");
            const json_t *st = json_object_get(m, "start");
            const struct gs_mig_model *mm = nd->gpus[g].mig_model;
            int p =
                mm ? gs_mig_profile_find(mm, json_string_value(json_object_get(m, "profile"))) : -1;
            int start =
                json_is_integer(st) && json_integer_value(st) >= 0 && json_integer_value(st) <= 7
                    ? (int)json_integer_value(st)
                    : -1;
            if (json_is_null(st) && p >= 0)
                start = free_start(&nd->gpus[g], (uint8_t)p, g, &got, n);
            if (p < 0 || start < 0 || n >= GS_PLACEMENT_MIG_MAX) {
                bad = true;
                break;
            }
            got.mig[n++] = (struct gs_placement_mig){g, (uint8_t)p, (uint8_t)start};
            continue;
        }
        if (n >= GS_NODE_GPUS_MAX) {
            bad = true;
            break;
        }
        if (kind == GS_REQ_MEMORY) {
            const json_t *mem = json_object_get(e, "mem_mib");
            if (!json_is_integer(mem) || json_integer_value(mem) <= 0 ||
                json_integer_value(mem) > INT32_MAX) {
                bad = true;
                break;
            }
            got.gpu_mem_mib[n] = (int32_t)json_integer_value(mem);
        }
        got.gpu_index[n++] = g;
    }
    json_decref(doc);
    if (bad)
        return;
    uint32_t want = kind == GS_REQ_MIG         ? rq->mig_count
                    : kind == GS_REQ_TIMESLICE ? rq->timeslice_slots
                                               : rq->num_gpu;
    if (n != want)
        return;
    if (kind == GS_REQ_MIG) {
        got.mig_count = (uint8_t)n;
    } else {
        got.num_gpu = n;
        got.gpu_milli = kind == GS_REQ_TIMESLICE ? 0 : rq->gpu_milli;
    }
    *pl = got;
}
