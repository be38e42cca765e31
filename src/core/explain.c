/*
 * "Why pending": counts of the filters each node fails for one request, and the message built
 * from them. See include/gpusched/explain.h for the order and the templates.
 */
#include "gpusched/explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"
#include "gpusched/err.h"
#include "gpusched/filter.h"

static void copy_cut(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n >= GS_EXPLAIN_TAINT_MAX)
        n = GS_EXPLAIN_TAINT_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static bool model_ok(const struct gs_node *n, const struct gs_pod_req *req)
{
    if (!gs_req_wants_gpu(req))
        return true;
    if (n->gpu_count == 0)
        return false;
    return req->gpu_model_mask == GS_MODEL_ANY ||
           (n->model_id < 64 && (req->gpu_model_mask & (UINT64_C(1) << n->model_id)));
}

int gs_explain(const struct gs_cluster *c, const struct gs_pod_req *req, uint32_t cls,
               struct gs_unsched *out)
{
    memset(out, 0, sizeof(*out));
    if (!gs_filter_valid(c, cls))
        return GS_EINVAL;
    bool share = req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI;
    uint32_t n_slots = gs_cluster_node_count(c);
    for (uint32_t i = 0; i < n_slots; i++) {
        const struct gs_node *n = gs_cluster_node(c, i);
        if (!n->present)
            continue;
        out->nodes++;
        const struct gs_taint *taint = NULL;
        switch (gs_filter_check(c, cls, i, &taint)) {
        case GS_FILTER_UNSCHEDULABLE:
            out->unschedulable++;
            continue;
        case GS_FILTER_TAINT:
            if (out->taint++ == 0 && taint) {
                copy_cut(out->taint_key, taint->key);
                copy_cut(out->taint_value, taint->value);
            }
            continue;
        case GS_FILTER_AFFINITY:
            out->affinity++;
            continue;
        case GS_FILTER_ABSENT:
            continue;
        case GS_FILTER_PASS:
            break;
        }
        if (!model_ok(n, req)) {
            out->model++;
            continue;
        }
        bool lack = false;
        if (n->pods >= n->pods_max) {
            out->pods++;
            lack = true;
        }
        if (req->cpu_milli > n->cpu_milli_free) {
            out->cpu++;
            lack = true;
        }
        if (req->mem_mib > n->mem_mib_free) {
            out->mem++;
            lack = true;
        }
        bool xres_lack = false;
        for (uint32_t r = 0; r < req->xres_count && r < GS_POD_XRES_MAX; r++) {
            struct gs_pod_req one = {0};
            one.xres_count = 1;
            one.xres[0] = req->xres[r];
            if (!gs_node_xres_fits(n, &one)) {
                out->xres[r]++;
                xres_lack = lack = true;
            }
        }
        enum gs_req_kind kind = gs_req_kind(req);
        bool gpu_lack;
        if (kind == GS_REQ_MILLI && !(share && (n->share_flags & GS_FIT_HAS_WHOLE)))
            gpu_lack = req->num_gpu > 0 && (req->num_gpu > n->gpu_count ||
                                            n->gpu_free_desc[req->num_gpu - 1] < req->gpu_milli);
        else
            gpu_lack = !gs__share_gpus_fit(n, req);
        if (gpu_lack) {
            if (kind != GS_REQ_MILLI && !gs__share_mode_present(n, req))
                out->gpu_mode++;
            else if (kind == GS_REQ_MEMORY)
                out->gpu_mem++;
            else if (kind == GS_REQ_TIMESLICE)
                out->gpu_slots++;
            else if (kind == GS_REQ_MIG)
                out->mig++;
            else
                out->gpu++;
            lack = true;
        }
        if (!lack)
            out->fit++;
        if (req->num_gpu == 0 || kind != GS_REQ_MILLI || n->pods >= n->pods_max ||
            req->cpu_milli > n->cpu_milli_free || req->mem_mib > n->mem_mib_free || xres_lack)
            continue;
        /* The GPU capacity this node could give if only GPUs were short. */
        uint32_t block = 0;
        for (uint32_t g = 0; g < n->gpu_count; g++) {
            int32_t f = n->gpus[g].gpu_milli_free;
            if (f >= req->gpu_milli)
                block++;
            out->share_free += f;
            if (f > out->largest_share)
                out->largest_share = f;
        }
        out->gpu_free += block;
        if (block > out->largest_block)
            out->largest_block = block;
    }
    for (uint32_t r = 0; r < req->xres_count && r < GS_POD_XRES_MAX; r++)
        out->xres_name[r] = gs_cluster_xres_name(c, req->xres[r].id);
    if (out->fit == 0 && req->num_gpu > 0 && gs_req_kind(req) == GS_REQ_MILLI) {
        if (share)
            out->fragmented = out->share_free >= req->gpu_milli;
        else
            out->fragmented = out->gpu_free >= req->num_gpu;
    }
    return GS_OK;
}

struct reason {
    char text[GS_EXPLAIN_TAINT_MAX * 2 + 80];
};

static int cmp_reason(const void *a, const void *b)
{
    return strcmp(((const struct reason *)a)->text, ((const struct reason *)b)->text);
}

size_t gs_explain_format(const struct gs_unsched *u, const struct gs_pod_req *req, char *buf,
                         size_t cap)
{
    struct reason r[12 + GS_POD_XRES_MAX];
    uint32_t nr = 0;
#define ADD(count, ...)                                                                            \
    do {                                                                                           \
        if (count) {                                                                               \
            int w_ = snprintf(r[nr].text, sizeof(r[nr].text), __VA_ARGS__);                        \
            if (w_ > 0)                                                                            \
                nr++;                                                                              \
        }                                                                                          \
    } while (0)
    ADD(u->unschedulable, "%u node(s) were unschedulable", u->unschedulable);
    ADD(u->taint, "%u node(s) had untolerated taint {%s: %s}", u->taint, u->taint_key,
        u->taint_value);
    ADD(u->affinity, "%u node(s) didn't match Pod's node affinity/selector", u->affinity);
    ADD(u->model, "%u node(s) didn't match Pod's GPU model", u->model);
    ADD(u->pods, "%u Too many pods", u->pods);
    ADD(u->cpu, "%u Insufficient cpu", u->cpu);
    ADD(u->mem, "%u Insufficient memory", u->mem);
    ADD(u->gpu, "%u Insufficient nvidia.com/gpu", u->gpu);
    ADD(u->gpu_mem, "%u Insufficient GPU memory", u->gpu_mem);
    ADD(u->gpu_slots, "%u Insufficient time-sliced GPU slots", u->gpu_slots);
    ADD(u->mig, "%u Insufficient nvidia.com/mig-%.*s", u->mig, GS_MIG_NAME_MAX, req->mig_profile);
    switch (gs_req_kind(req)) {
    case GS_REQ_MEMORY:
        ADD(u->gpu_mode, "%u node(s) had no GPU with known memory in fractions mode", u->gpu_mode);
        break;
    case GS_REQ_TIMESLICE:
        ADD(u->gpu_mode, "%u node(s) had no time-sliced GPU", u->gpu_mode);
        break;
    case GS_REQ_MIG:
        ADD(u->gpu_mode, "%u node(s) had no MIG GPU with profile %.*s", u->gpu_mode,
            GS_MIG_NAME_MAX, req->mig_profile);
        break;
    case GS_REQ_MILLI:
        break;
    }
    for (uint32_t x = 0; x < GS_POD_XRES_MAX && x < req->xres_count; x++)
        ADD(u->xres[x], "%u Insufficient %s", u->xres[x], u->xres_name[x] ? u->xres_name[x] : "?");
#undef ADD
    qsort(r, nr, sizeof(r[0]), cmp_reason);
    size_t len = 0;
    char tmp[64];
    (void)snprintf(tmp, sizeof(tmp), "%u/%u nodes are available%s", u->fit, u->nodes,
                   nr > 0 || u->nodes == 0 ? ":" : "");
    if (cap)
        buf[0] = '\0';
#define APPEND(s)                                                                                  \
    do {                                                                                           \
        size_t l_ = strlen(s);                                                                     \
        if (len + 1 < cap) {                                                                       \
            size_t k_ = l_ < cap - 1 - len ? l_ : cap - 1 - len;                                   \
            memcpy(buf + len, s, k_);                                                              \
            buf[len + k_] = '\0';                                                                  \
        }                                                                                          \
        len += l_;                                                                                 \
    } while (0)
    APPEND(tmp);
    if (u->nodes == 0)
        APPEND(" no nodes to schedule on"); /* an empty cluster, not a refusal by every node */
    for (uint32_t i = 0; i < nr; i++) {
        APPEND(i ? ", " : " ");
        APPEND(r[i].text);
    }
    APPEND(".");
    if (u->fragmented) {
        char frag[160];
        if (req->num_gpu == 1 && req->gpu_milli < GS_GPU_MILLI)
            (void)snprintf(frag, sizeof(frag),
                           " free GPU capacity is fragmented: largest free share %d of the %d "
                           "milli-GPU asked",
                           u->largest_share, req->gpu_milli);
        else
            (void)snprintf(frag, sizeof(frag),
                           " free GPU capacity is fragmented: largest free block %u of the %u "
                           "GPUs asked",
                           u->largest_block, req->num_gpu);
        APPEND(frag);
    }
#undef APPEND
    return len;
}
