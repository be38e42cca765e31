/*
 * The DevicePlugin service's methods as pure functions from request bytes to an answer
 * (contracts in include/gpusched/devplugin.h; messages in proto/deviceplugin/v1beta1).
 *
 * Each handler decodes with protobuf-c, works on the model and the health array it is given,
 * and packs its response into malloc'd bytes; the agent's loop hands those to gsrpc. Response
 * messages are built from stack and per-call heap pieces that live only until packing, and
 * every string they point at is either the model's or the request's, so nothing is copied
 * twice.
 */
#include "gpusched/devplugin.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/grpc.h"

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "devplugin_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Control device nodes every GPU container needs, after the per-GPU /dev/nvidiaN. */
/** Most must_include IDs of one container request that the resource does not have. */
#define PREFERRED_UNKNOWN_MUST_MAX 64

static const char *const control_nodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                            "/dev/nvidia-uvm-tools"};
#define N_CONTROL_NODES (sizeof control_nodes / sizeof control_nodes[0])

void gs_dp_answer_fini(struct gs_dp_answer *a)
{
    if (a == NULL)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

static void answer_init(struct gs_dp_answer *a)
{
    memset(a, 0, sizeof *a);
}

GS_PRINTF(3, 4)
static int answer_error(struct gs_dp_answer *a, int status, const char *fmt, ...)
{
    free(a->data);
    a->data = NULL;
    a->len = 0;
    a->status = status;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
    return GS_OK;
}

static int answer_pack(struct gs_dp_answer *a, const ProtobufCMessage *msg)
{
    int rc = gs_grpc_pack(msg, &a->data, &a->len);
    if (rc == GS_ERANGE)
        return answer_error(a, GS_GRPC_RESOURCE_EXHAUSTED, "response over the message limit");
    return rc;
}

int gs_dp_handle_options(struct gs_dp_answer *out)
{
    answer_init(out);
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.pre_start_required = 1;
    o.get_preferred_allocation_available = 1;
    return answer_pack(out, &o.base);
}

static bool view_ok(const struct gs_dp_view *v)
{
    return v != NULL && v->cfg != NULL && v->model != NULL && v->health != NULL &&
           v->resource < v->model->n_resources;
}

/* A retired device (gone from the hardware, kept while a container holds it) never is. */
static bool healthy(const struct gs_dp_view *v, const struct gs_dp_device *d)
{
    return !d->retired && d->gpu < v->model->n_gpus && v->health[d->gpu] == GS_HEALTH_HEALTHY;
}

int gs_dp_handle_list(const struct gs_dp_view *v, struct gs_dp_answer *out)
{
    answer_init(out);
    if (!view_ok(v))
        return GS_EINVAL;
    const struct gs_dp_resource *r = &v->model->resources[v->resource];
    uint32_t n = r->n_devices;
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device *devs = calloc(n > 0 ? n : 1, sizeof *devs);
    V1beta1__Device **ptrs = calloc(n > 0 ? n : 1, sizeof(V1beta1__Device *));
    /* One TopologyInfo per GPU: devices of a GPU share it (packing only reads). */
    V1beta1__TopologyInfo topo[GS_GPU_MAX];
    V1beta1__NUMANode numa[GS_GPU_MAX];
    V1beta1__NUMANode *numa_ptr[GS_GPU_MAX];
    int rc = GS_OK;
    if (devs == NULL || ptrs == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    for (uint32_t g = 0; g < v->model->n_gpus; g++) {
        v1beta1__numanode__init(&numa[g]);
        numa[g].id = v->model->gpus[g].numa_node;
        numa_ptr[g] = &numa[g];
        v1beta1__topology_info__init(&topo[g]);
        topo[g].n_nodes = 1;
        topo[g].nodes = &numa_ptr[g];
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct gs_dp_device *d = &r->devices[i];
        v1beta1__device__init(&devs[i]);
        devs[i].id = (char *)d->id;
        devs[i].health =
            (char *)gs_health_state_name(healthy(v, d) ? GS_HEALTH_HEALTHY : GS_HEALTH_UNHEALTHY);
        devs[i].topology = d->numa_node >= 0 ? &topo[d->gpu] : NULL;
        ptrs[i] = &devs[i];
    }
    resp.n_devices = n;
    resp.devices = ptrs;
    rc = answer_pack(out, &resp.base);
out:
    free(devs);
    free(ptrs);
    return rc;
}

/* ---- GetPreferredAllocation ------------------------------------------------------------- */

static void join(char *dst, const char *s);

/*
 * Whether device d is the unit that entry k of a claim names: a device of that GPU that is not a
 * MIG device for a whole-GPU, fraction or slot entry; for a MIG entry (mig_profile set) a device
 * of the MIG device of that profile at that start slot, so that two instances of one profile on
 * one GPU are told apart.
 */
static bool is_claimed_unit(const struct gs_dp_model *m, const struct gs_dp_device *d,
                            const struct gs_dp_claim *cl, uint32_t k)
{
    if (d->gpu != cl->gpu[k] || d->gpu >= m->n_gpus)
        return false;
    if (cl->mig_profile[k][0] == '\0')
        return d->mig < 0;
    if (d->mig < 0)
        return false;
    const struct gs_gpu_mig *mg = &m->gpus[d->gpu].mig[d->mig];
    /* start -1 (the annotation's null): any instance of the profile on that GPU. */
    return (cl->mig_start[k] < 0 ||
            (mg->has_start && (int32_t)mg->start_slot == cl->mig_start[k])) &&
           strcmp(mg->profile, cl->mig_profile[k]) == 0;
}

void gs__dp_claim_unit_name(const struct gs_dp_claim *cl, uint32_t k, char *buf, size_t cap)
{
    if (cl->mig_profile[k][0] != '\0' && cl->mig_start[k] < 0)
        (void)snprintf(buf, cap, "%u:%s@any", (unsigned)cl->gpu[k], cl->mig_profile[k]);
    else if (cl->mig_profile[k][0] != '\0')
        (void)snprintf(buf, cap, "%u:%s@%d", (unsigned)cl->gpu[k], cl->mig_profile[k],
                       (int)cl->mig_start[k]);
    else
        (void)snprintf(buf, cap, "%u", (unsigned)cl->gpu[k]);
}

void gs__dp_claim_units(const struct gs_dp_claim *cl, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < cl->n_gpus && k < GS_DP_ASSIGN_GPUS_MAX && n + 1 < cap; k++) {
        char one[GS_GPU_PROFILE_LEN + 32];
        gs__dp_claim_unit_name(cl, k, one, sizeof one);
        int w = snprintf(buf + n, cap - n, "%s%s", k ? "," : "", one);
        if (w < 0)
            break;
        n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
    }
}

/*
 * Whether claim entry k names a GPU this node can give: on the node, the same GPU as the
 * assignment's UUID (when it names one), Healthy. False with the reason in why when not.
 */
static bool claim_gpu_usable(const struct gs_dp_view *v, const struct gs_dp_claim *cl, uint32_t k,
                             char *why, size_t cap)
{
    uint32_t g = cl->gpu[k];
    if (g >= v->model->n_gpus) {
        (void)snprintf(why, cap, "assigned GPU %u is not on this node (%u GPUs)", (unsigned)g,
                       (unsigned)v->model->n_gpus);
        return false;
    }
    const char *uuid = v->model->gpus[g].uuid;
    if (cl->uuid[k][0] != '\0' && strcmp(cl->uuid[k], uuid) != 0) {
        (void)snprintf(why, cap, "assigned GPU %u is %.96s on the scheduler's side but %.96s here",
                       (unsigned)g, cl->uuid[k], uuid);
        return false;
    }
    if (v->health[g] != GS_HEALTH_HEALTHY) {
        (void)snprintf(why, cap, "assigned GPU %u (%.96s) is Unhealthy", (unsigned)g, uuid);
        return false;
    }
    return true;
}

/*
 * The claimed units' devices among those kubelet offers: for each claimed entry (its GPU's UUID,
 * when the assignment names one, must be the node's GPU at that index; the GPU must be Healthy)
 * the first offered device of the unit it names (is_claimed_unit) not taken yet, must_include
 * first. False, with the reason in why, when one is missing; true with the positions (after the
 * must ones) in out.
 */
static bool honour_claim(const struct gs_dp_view *v, const struct gs_dp_resource *r,
                         const struct gs_dp_claim *cl, const uint32_t *avail, uint32_t n_avail,
                         const uint32_t *must, uint32_t n_must, uint32_t *out, uint32_t *n_out,
                         char *why, size_t cap)
{
    bool used_must[GS_DP_ASSIGN_GPUS_MAX] = {false};
    *n_out = 0;
    if (n_must > cl->n_gpus) {
        (void)snprintf(why, cap, "kubelet insists on %u devices, more than the %u assigned GPUs",
                       (unsigned)n_must, (unsigned)cl->n_gpus);
        return false;
    }
    for (uint32_t k = 0; k < cl->n_gpus; k++) {
        if (!claim_gpu_usable(v, cl, k, why, cap))
            return false;
        uint32_t g = cl->gpu[k];
        const char *uuid = v->model->gpus[g].uuid;
        bool found = false;
        for (uint32_t i = 0; i < n_must && !found; i++) {
            if (!used_must[i] && is_claimed_unit(v->model, &r->devices[must[i]], cl, k))
                found = used_must[i] = true;
        }
        for (uint32_t i = 0; i < n_avail && !found; i++) {
            bool taken = false;
            for (uint32_t j = 0; j < *n_out && !taken; j++)
                taken = out[j] == avail[i];
            if (!taken && is_claimed_unit(v->model, &r->devices[avail[i]], cl, k)) {
                out[(*n_out)++] = avail[i];
                found = true;
            }
        }
        if (found)
            continue;
        if (cl->mig_profile[k][0] == '\0') {
            (void)snprintf(why, cap, "no device of assigned GPU %u (%.96s) is offered", (unsigned)g,
                           uuid);
            return false;
        }
        /* A MIG instance: say whether the node has it at all (a layout changed under the
         * scheduler) or kubelet left it out (held by another pod, or its list lags). */
        bool here = false;
        for (uint32_t i = 0; i < r->n_devices && !here; i++)
            here = is_claimed_unit(v->model, &r->devices[i], cl, k);
        char at[24] = "any start"; /* "start " and any int */
        if (cl->mig_start[k] >= 0)
            (void)snprintf(at, sizeof at, "start %d", (int)cl->mig_start[k]);
        (void)snprintf(why, cap, "assigned MIG instance %.31s at %s of GPU %u (%.96s) %s",
                       cl->mig_profile[k], at, (unsigned)g, uuid,
                       here ? "is not offered" : "is not a device of this resource here");
        return false;
    }
    for (uint32_t i = 0; i < n_must; i++)
        if (!used_must[i]) {
            (void)snprintf(why, cap, "kubelet insists on %.63s, not of the assigned GPUs",
                           r->devices[must[i]].id);
            return false;
        }
    return true;
}

/* Tells the view's on_claim what became of a claim; ids joined with commas. */
static int report_claim(const struct gs_dp_view *v, const struct gs_dp_claim *cl, bool allocate,
                        bool honoured, bool gave_assigned, const char *why, const char *const *ids,
                        size_t n)
{
    char *text = calloc(n + 1, GS_DP_DEVICE_ID_LEN + 1);
    if (text == NULL)
        return GS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (ids[i] != NULL)
            join(text, ids[i]);
    struct gs_dp_claim_outcome o = {cl,   allocate,     honoured, honoured ? "" : why,
                                    text, gave_assigned};
    v->on_claim(v->claim_ctx, &o);
    free(text);
    return GS_OK;
}

int gs_dp_handle_preferred(const struct gs_dp_view *v, const uint8_t *req, size_t len,
                           struct gs_dp_answer *out)
{
    answer_init(out);
    if (!view_ok(v))
        return GS_EINVAL;
    const struct gs_dp_resource *r = &v->model->resources[v->resource];
    ProtobufCMessage *m = NULL;
    if (gs_grpc_unpack(&v1beta1__preferred_allocation_request__descriptor, req, len, &m) != GS_OK)
        return answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                            "the request is not a PreferredAllocationRequest");
    V1beta1__PreferredAllocationRequest *pr = (V1beta1__PreferredAllocationRequest *)m;
    size_t nc = pr->n_container_requests;
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *cr = calloc(nc > 0 ? nc : 1, sizeof *cr);
    V1beta1__ContainerPreferredAllocationResponse **crp =
        calloc(nc > 0 ? nc : 1, sizeof(V1beta1__ContainerPreferredAllocationResponse *));
    uint8_t *mark = calloc(r->n_devices > 0 ? r->n_devices : 1, 1);
    uint32_t *avail = NULL, *must = NULL, *chosen = NULL;
    const char *unknown[PREFERRED_UNKNOWN_MUST_MAX];
    int rc = GS_OK;
    if (cr == NULL || crp == NULL || mark == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    for (size_t c = 0; c < nc; c++) {
        V1beta1__ContainerPreferredAllocationRequest *q = pr->container_requests[c];
        v1beta1__container_preferred_allocation_response__init(&cr[c]);
        crp[c] = &cr[c];
        if (q->allocation_size < 0 || q->n_must_include_deviceids > (size_t)q->allocation_size) {
            answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                         "container request %zu: %zu devices must be included in an allocation "
                         "of %d",
                         c, q->n_must_include_deviceids, (int)q->allocation_size);
            goto out;
        }
        /* Sizes come from the client: bound what is allocated by what the resource has, so
         * that allocation_size 2^31-1 costs no more than a request for every device. */
        if ((size_t)q->allocation_size > (size_t)r->n_devices + PREFERRED_UNKNOWN_MUST_MAX) {
            answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                         "container request %zu: allocation_size %d is more than the %u devices "
                         "of %s",
                         c, (int)q->allocation_size, (unsigned)r->n_devices, r->name);
            goto out;
        }
        size_t size = (size_t)q->allocation_size;
        free(avail);
        free(must);
        free(chosen);
        avail = calloc(q->n_available_deviceids + 1, sizeof *avail);
        must = calloc(q->n_must_include_deviceids + 1, sizeof *must);
        chosen = calloc(size + 1, sizeof *chosen);
        cr[c].deviceids = calloc(size + 1, sizeof *cr[c].deviceids);
        if (avail == NULL || must == NULL || chosen == NULL || cr[c].deviceids == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
        /* must_include first, as given (unknown ones too: kubelet insists on them). Known IDs
         * are told apart by their mark, in O(log n) each; only the few unknown ones are
         * compared with each other. */
        uint32_t n_must = 0, n_unknown = 0;
        for (size_t i = 0; i < q->n_must_include_deviceids; i++) {
            const char *id = q->must_include_deviceids[i];
            int32_t pos = gs_dp_model_find(r, id);
            if (pos >= 0) {
                if (mark[pos])
                    continue; /* a repeat */
                mark[pos] = 1;
                if (!r->devices[pos].retired) /* echoed below, but no unit to pack by */
                    must[n_must++] = (uint32_t)pos;
            } else {
                bool dup = false;
                for (uint32_t j = 0; j < n_unknown && !dup; j++)
                    dup = strcmp(unknown[j], id) == 0;
                if (dup)
                    continue;
                if (n_unknown == PREFERRED_UNKNOWN_MUST_MAX) {
                    answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                                 "container request %zu: more than %d must_include IDs that %s "
                                 "does not have",
                                 c, PREFERRED_UNKNOWN_MUST_MAX, r->name);
                    goto out;
                }
                unknown[n_unknown++] = id;
            }
            cr[c].deviceids[cr[c].n_deviceids++] = (char *)id;
        }
        /* A device the agent knows is Unhealthy is never proposed, even when kubelet still
         * offers it (its list may lag a health change); Allocate would refuse it. */
        uint32_t n_avail = 0;
        for (size_t i = 0; i < q->n_available_deviceids; i++) {
            int32_t pos = gs_dp_model_find(r, q->available_deviceids[i]);
            if (pos >= 0 && !mark[pos] && healthy(v, &r->devices[pos])) {
                mark[pos] = 1;
                avail[n_avail++] = (uint32_t)pos;
            }
        }
        uint32_t n_chosen = 0;
        struct gs_dp_claim claim;
        char why[256] = "";
        bool claimed = v->claim != NULL && size > 0 &&
                       v->claim(v->claim_ctx, r->name, (uint32_t)size, &claim) == GS_OK;
        bool honoured = claimed && n_must == cr[c].n_deviceids &&
                        honour_claim(v, r, &claim, avail, n_avail, must, n_must, chosen, &n_chosen,
                                     why, sizeof why);
        if (!honoured) {
            n_chosen = 0;
            rc = gs__dp_prefer(v->model, r, avail, n_avail, must, n_must,
                               (uint32_t)(size - cr[c].n_deviceids), chosen, &n_chosen);
            if (rc != GS_OK)
                goto out;
            if (claimed && why[0] == '\0')
                (void)snprintf(why, sizeof why, "kubelet insists on a device not on them");
        }
        for (uint32_t i = 0; i < n_chosen; i++)
            cr[c].deviceids[cr[c].n_deviceids++] = (char *)r->devices[chosen[i]].id;
        if (claimed && v->on_claim != NULL) {
            rc = report_claim(v, &claim, false, honoured, false, why,
                              (const char *const *)cr[c].deviceids, cr[c].n_deviceids);
            if (rc != GS_OK)
                goto out;
        }
        for (uint32_t i = 0; i < n_must; i++)
            mark[must[i]] = 0;
        for (uint32_t i = 0; i < n_avail; i++)
            mark[avail[i]] = 0;
    }
    resp.n_container_responses = nc;
    resp.container_responses = crp;
    rc = answer_pack(out, &resp.base);
out:
    for (size_t c = 0; cr != NULL && c < nc; c++)
        free(cr[c].deviceids);
    free(cr);
    free(crp);
    free(mark);
    free(avail);
    free(must);
    free(chosen);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* ---- Allocate ------------------------------------------------------------------------------ */

/**
 * Most environment variables of one container: NVIDIA_VISIBLE_DEVICES, the two of replicas,
 * CUDA_DEVICE_SM_LIMIT and one CUDA_DEVICE_MEMORY_LIMIT_<i> per claimed unit.
 */
#define CTR_ENV_MAX (4 + GS_DP_ASSIGN_GPUS_MAX)

/** Per-container building space; strings live in `text`, pointers into it. */
struct ctr {
    V1beta1__ContainerAllocateResponse resp;
    V1beta1__ContainerAllocateResponse__EnvsEntry env[CTR_ENV_MAX];
    V1beta1__ContainerAllocateResponse__EnvsEntry *envp[CTR_ENV_MAX];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry ann[4];
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *annp[4];
    V1beta1__DeviceSpec *specs; /**< GPU nodes + control nodes */
    V1beta1__DeviceSpec **specp;
    V1beta1__CDIDevice *cdi;
    V1beta1__CDIDevice **cdip;
    char (*gpu_nodes)[32];                   /**< "/dev/nvidiaN" per GPU node */
    char *visible;                           /**< NVIDIA_VISIBLE_DEVICES */
    char *uuids;                             /**< annotation gpusched.io/gpus */
    char *ids;                               /**< annotation gpusched.io/devices */
    char *replicas;                          /**< GPUSCHED_GPU_REPLICAS */
    char (*cdi_names)[GS_GPU_UUID_LEN + 32]; /**< CDI names */
    char percent[16];                        /**< CUDA_MPS_ACTIVE_THREAD_PERCENTAGE */
    uint32_t n_units;                        /**< units recorded in unit_pos (at most 16) */
    int32_t unit_pos[GS_DP_ASSIGN_GPUS_MAX]; /**< a device of each distinct unit, in the order
                                                  of NVIDIA_VISIBLE_DEVICES */
    char mem_key[GS_DP_ASSIGN_GPUS_MAX][40]; /**< "CUDA_DEVICE_MEMORY_LIMIT_<i>" */
    char mem_val[GS_DP_ASSIGN_GPUS_MAX][24]; /**< "<MiB>m" */
    char sm_limit[16];                       /**< CUDA_DEVICE_SM_LIMIT, percent */
};

static void ctr_free(struct ctr *c)
{
    free(c->specs);
    free(c->specp);
    free(c->cdi);
    free(c->cdip);
    free(c->gpu_nodes);
    free(c->visible);
    free(c->uuids);
    free(c->ids);
    free(c->replicas);
    free(c->cdi_names);
}

/* Appends "sep s" to a string with room: the caller sizes dst for n units and commas. */
static void join(char *dst, const char *s)
{
    if (dst[0] != '\0')
        strcat(dst, ","); /* NOLINT(clang-analyzer-security.insecureAPI.strcpy): sized above */
    strcat(dst, s);       /* NOLINT(clang-analyzer-security.insecureAPI.strcpy): sized above */
}

/* The runtime's name of a unit: UUID, or "index" / "index:mig" under deviceIDStrategy index. */
static void unit_name(const struct gs_dp_view *v, const struct gs_dp_device *d, char *buf,
                      size_t cap)
{
    const struct gs_gpu_info *g = &v->model->gpus[d->gpu];
    if (v->cfg->id_strategy == GS_DP_ID_INDEX) {
        if (d->mig >= 0)
            (void)snprintf(buf, cap, "%u:%d", (unsigned)d->gpu, (int)d->mig);
        else
            (void)snprintf(buf, cap, "%u", (unsigned)d->gpu);
    } else {
        (void)snprintf(buf, cap, "%s", d->mig >= 0 ? g->mig[d->mig].uuid : g->uuid);
    }
}

/* The position of the first device of GPU g (not a MIG device) in r; -1 when r has none. */
static int32_t first_device_of_gpu(const struct gs_dp_resource *r, uint32_t g)
{
    for (uint32_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].gpu == g && r->devices[i].mig < 0)
            return (int32_t)i;
    return -1;
}

/*
 * Builds one container's response from the IDs kubelet handed. give NULL: the container gets
 * the units behind those IDs. give set (slices kubelet handed of other GPUs than assigned, each
 * entry's GPU checked to have a device in r): the container gets give's GPUs instead, while the
 * annotation gpusched.io/devices still names kubelet's IDs (what kubelet accounts).
 */
static int build_container(const struct gs_dp_view *v, const V1beta1__ContainerAllocateRequest *q,
                           size_t ci, struct ctr *c, struct gs_dp_answer *out,
                           const struct gs_dp_claim *give)
{
    const struct gs_dp_resource *r = &v->model->resources[v->resource];
    size_t n = q->n_devices_ids;
    int32_t *pos = calloc(n + 1, sizeof *pos);
    if (pos == NULL)
        return GS_ENOMEM;
    int rc = GS_OK;
    if (n == 0) {
        answer_error(out, GS_GRPC_INVALID_ARGUMENT, "container request %zu names no device", ci);
        goto out;
    }
    uint32_t n_replicas = 0;
    for (size_t i = 0; i < n; i++) {
        const char *id = q->devices_ids[i];
        pos[i] = gs_dp_model_find(r, id);
        if (pos[i] < 0) {
            answer_error(out, GS_GRPC_INVALID_ARGUMENT, "unknown device '%.80s' for resource %s",
                         id, r->name);
            goto out;
        }
        for (size_t j = 0; j < i; j++)
            if (pos[j] == pos[i]) {
                answer_error(out, GS_GRPC_INVALID_ARGUMENT, "device '%.80s' requested twice", id);
                goto out;
            }
        const struct gs_dp_device *d = &r->devices[pos[i]];
        if (d->retired) {
            answer_error(out, GS_GRPC_FAILED_PRECONDITION,
                         "device '%.80s' no longer exists (GPU %u was re-partitioned); it is "
                         "listed Unhealthy while a container holds it",
                         id, (unsigned)d->gpu);
            goto out;
        }
        if (!healthy(v, d)) {
            answer_error(out, GS_GRPC_FAILED_PRECONDITION, "device '%.80s' is Unhealthy (GPU %u)",
                         id, (unsigned)d->gpu);
            goto out;
        }
        n_replicas += d->replicas > 0 ? 1u : 0u;
    }
    if (v->cfg->fail_requests_greater_than_one && n_replicas > 1) {
        answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                     "request for %zu devices of shared resource %s too large: "
                     "failRequestsGreaterThanOne allows 1",
                     n, r->name);
        goto out;
    }

    /* The devices whose units the container gets: kubelet's, or one of each given GPU. */
    int32_t given_pos[GS_DP_ASSIGN_GPUS_MAX];
    const int32_t *upos = pos;
    size_t nu = n;
    if (give != NULL) {
        nu = 0;
        for (uint32_t k = 0; k < give->n_gpus && k < GS_DP_ASSIGN_GPUS_MAX; k++) {
            int32_t p = first_device_of_gpu(r, give->gpu[k]);
            if (p >= 0)
                given_pos[nu++] = p;
        }
        upos = given_pos;
        if (nu > n) {
            rc = GS_EINVAL; /* a claim is of the count asked: never more GPUs than IDs */
            goto out;
        }
    }
    size_t unit_cap = GS_GPU_UUID_LEN + 1;
    c->visible = calloc(n, unit_cap);
    c->uuids = calloc(n, unit_cap);
    c->ids = calloc(n, GS_DP_DEVICE_ID_LEN + 1);
    c->replicas = calloc(n, unit_cap + 24);
    c->gpu_nodes = calloc(n, sizeof *c->gpu_nodes);
    c->specs = calloc(n + N_CONTROL_NODES, sizeof *c->specs);
    c->specp = calloc(n + N_CONTROL_NODES, sizeof(V1beta1__DeviceSpec *));
    c->cdi = calloc(n, sizeof *c->cdi);
    c->cdip = calloc(n, sizeof(V1beta1__CDIDevice *));
    c->cdi_names = calloc(n, sizeof *c->cdi_names);
    if (c->visible == NULL || c->uuids == NULL || c->ids == NULL || c->replicas == NULL ||
        c->gpu_nodes == NULL || c->specs == NULL || c->specp == NULL || c->cdi == NULL ||
        c->cdip == NULL || c->cdi_names == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    V1beta1__ContainerAllocateResponse *resp = &c->resp;
    v1beta1__container_allocate_response__init(resp);

    /* Distinct units (GPU or MIG device) in request order; replicas counted per unit. */
    uint64_t gpus_seen = 0;
    uint32_t min_pct = 100;
    bool any_replica = false;
    for (size_t i = 0; i < n; i++)
        join(c->ids, r->devices[pos[i]].id);
    for (size_t i = 0; i < nu; i++) {
        const struct gs_dp_device *d = &r->devices[upos[i]];
        bool first_of_unit = true;
        uint32_t k = 0;
        for (size_t j = 0; j < nu; j++) {
            const struct gs_dp_device *e = &r->devices[upos[j]];
            if (e->gpu == d->gpu && e->mig == d->mig) {
                if (j < i)
                    first_of_unit = false;
                k++;
            }
        }
        if (!first_of_unit)
            continue;
        const struct gs_gpu_info *g = &v->model->gpus[d->gpu];
        const char *uuid = d->mig >= 0 ? g->mig[d->mig].uuid : g->uuid;
        char name[GS_GPU_UUID_LEN];
        unit_name(v, d, name, sizeof name);
        join(c->visible, name);
        join(c->uuids, uuid);
        if (c->n_units < GS_DP_ASSIGN_GPUS_MAX)
            c->unit_pos[c->n_units++] = upos[i];
        if (v->cfg->list_cdi) {
            V1beta1__CDIDevice *cd = &c->cdi[resp->n_cdi_devices];
            v1beta1__cdidevice__init(cd);
            (void)snprintf(c->cdi_names[resp->n_cdi_devices], sizeof c->cdi_names[0],
                           "nvidia.com/gpu=%s", name);
            cd->name = c->cdi_names[resp->n_cdi_devices];
            c->cdip[resp->n_cdi_devices++] = cd;
        }
        if (d->replicas > 0) {
            any_replica = true;
            char part[GS_GPU_UUID_LEN + 24];
            (void)snprintf(part, sizeof part, "%s=%u/%u", uuid, (unsigned)k, (unsigned)d->replicas);
            join(c->replicas, part);
            uint32_t pct = (uint32_t)(100u * k / d->replicas);
            if (pct < 1)
                pct = 1;
            if (pct < min_pct)
                min_pct = pct;
        }
        gpus_seen |= UINT64_C(1) << d->gpu;
    }
    /* Device nodes: /dev/nvidia<minor> per GPU, by GPU index, then the control nodes. */
    size_t ns = 0;
    for (uint32_t gi = 0; gi < v->model->n_gpus; gi++) {
        if (!(gpus_seen & (UINT64_C(1) << gi)))
            continue;
        (void)snprintf(c->gpu_nodes[ns], sizeof c->gpu_nodes[0], "/dev/nvidia%u",
                       (unsigned)v->model->dev_minor[gi]);
        V1beta1__DeviceSpec *s = &c->specs[ns];
        v1beta1__device_spec__init(s);
        s->container_path = c->gpu_nodes[ns];
        s->host_path = c->gpu_nodes[ns];
        s->permissions = (char *)"rw";
        c->specp[ns] = s;
        ns++;
    }
    for (size_t k = 0; k < N_CONTROL_NODES; k++) {
        V1beta1__DeviceSpec *s = &c->specs[ns];
        v1beta1__device_spec__init(s);
        s->container_path = (char *)control_nodes[k];
        s->host_path = (char *)control_nodes[k];
        s->permissions = (char *)"rw";
        c->specp[ns++] = s;
    }
    resp->n_devices = ns;
    resp->devices = c->specp;
    resp->cdi_devices = c->cdip;

    size_t ne = 0;
    v1beta1__container_allocate_response__envs_entry__init(&c->env[ne]);
    c->env[ne].key = (char *)"NVIDIA_VISIBLE_DEVICES";
    c->env[ne].value = v->cfg->list_envvar ? c->visible : (char *)"void";
    ne++;
    if (any_replica) {
        (void)snprintf(c->percent, sizeof c->percent, "%u", (unsigned)min_pct);
        v1beta1__container_allocate_response__envs_entry__init(&c->env[ne]);
        c->env[ne].key = (char *)"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
        c->env[ne].value = c->percent;
        ne++;
        v1beta1__container_allocate_response__envs_entry__init(&c->env[ne]);
        c->env[ne].key = (char *)"GPUSCHED_GPU_REPLICAS";
        c->env[ne].value = c->replicas;
        ne++;
    }
    for (size_t k = 0; k < ne; k++)
        c->envp[k] = &c->env[k];
    resp->n_envs = ne;
    resp->envs = c->envp;

    size_t na = 0;
    const char *akeys[4] = {"gpusched.io/resource", "gpusched.io/devices", "gpusched.io/gpus",
                            "gpusched.io/replicas"};
    char *avals[4] = {(char *)r->name, c->ids, c->uuids, c->replicas};
    for (size_t k = 0; k < (any_replica ? 4u : 3u); k++) {
        v1beta1__container_allocate_response__annotations_entry__init(&c->ann[na]);
        c->ann[na].key = (char *)akeys[k];
        c->ann[na].value = avals[k];
        c->annp[na] = &c->ann[na];
        na++;
    }
    resp->n_annotations = na;
    resp->annotations = c->annp;
out:
    free(pos);
    return rc;
}

/* Sort key of a unit: GPU, then MIG start + 1 (0 a whole GPU or its slots; 15 a MIG device of
 * unknown start, which no claim names). */
static uint32_t unit_key_of_device(const struct gs_dp_model *m, const struct gs_dp_device *d)
{
    if (d->mig < 0)
        return d->gpu * 16u;
    const struct gs_gpu_mig *mg = &m->gpus[d->gpu].mig[d->mig];
    return d->gpu * 16u + (mg->has_start ? mg->start_slot + 1u : 15u);
}

static void sort_keys(uint32_t *k, uint32_t *idx, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
            uint32_t t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
            t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

/* Appends one environment variable to a built container. */
static void add_env(struct ctr *c, const char *key, char *value)
{
    V1beta1__ContainerAllocateResponse *resp = &c->resp;
    size_t ne = resp->n_envs;
    if (ne >= CTR_ENV_MAX)
        return; /* sized above for every variable there can be */
    v1beta1__container_allocate_response__envs_entry__init(&c->env[ne]);
    c->env[ne].key = (char *)key;
    c->env[ne].value = value;
    c->envp[ne] = &c->env[ne];
    resp->n_envs = ne + 1;
}

/*
 * The claim's shares into the container's environment, as HAMi's device plugin passes them to
 * its in-container library (HAMi-core): CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m for the i-th unit of
 * NVIDIA_VISIBLE_DEVICES whose claim entry has mem_mib, and CUDA_DEVICE_SM_LIMIT=<percent>, the
 * smallest compute share (milli / 10, at least 1) among entries of 1..999 milli. Each unit takes
 * the claim entry of the same unit, else the first entry left: kubelet decides which GPU the
 * container gets, and the pod's share goes with it.
 */
static void claim_env(const struct gs_dp_view *v, const struct gs_dp_claim *cl, struct ctr *c)
{
    const struct gs_dp_resource *r = &v->model->resources[v->resource];
    bool used[GS_DP_ASSIGN_GPUS_MAX] = {false};
    int32_t min_milli = 1000;
    for (uint32_t i = 0; i < c->n_units; i++) {
        const struct gs_dp_device *d = &r->devices[c->unit_pos[i]];
        int32_t k = -1;
        for (uint32_t j = 0; j < cl->n_gpus && k < 0; j++)
            if (!used[j] && is_claimed_unit(v->model, d, cl, j))
                k = (int32_t)j;
        for (uint32_t j = 0; j < cl->n_gpus && k < 0; j++)
            if (!used[j])
                k = (int32_t)j;
        if (k < 0)
            break;
        used[k] = true;
        if (cl->mem_mib[k] > 0) {
            (void)snprintf(c->mem_key[i], sizeof c->mem_key[i], "CUDA_DEVICE_MEMORY_LIMIT_%u",
                           (unsigned)i);
            (void)snprintf(c->mem_val[i], sizeof c->mem_val[i], "%lldm", (long long)cl->mem_mib[k]);
            add_env(c, c->mem_key[i], c->mem_val[i]);
        }
        if (cl->milli[k] > 0 && cl->milli[k] < 1000 && cl->milli[k] < min_milli)
            min_milli = cl->milli[k];
    }
    if (min_milli < 1000) {
        (void)snprintf(c->sm_limit, sizeof c->sm_limit, "%d",
                       min_milli / 10 > 0 ? (int)(min_milli / 10) : 1);
        add_env(c, "CUDA_DEVICE_SM_LIMIT", c->sm_limit);
    }
}

/*
 * After a container's Allocate is built: the claim of a pod that asks for this many devices of
 * the resource, compared with the units (GPUs, MIG instances by GPU and start) behind the IDs
 * kubelet chose, as multisets (order does not matter). Kubelet decides, except for slices
 * (gpusched.io/gpu-slice) of other GPUs than claimed: the container is built again for the
 * claim's GPUs when each can be given. The outcome reports (and marks the claim handed out; for
 * slices without a claim it warns), and the claim's memory and compute shares join the
 * container's environment (claim_env), after any rebuild so that they follow the GPU given.
 */
static int check_allocation(const struct gs_dp_view *v, const V1beta1__ContainerAllocateRequest *q,
                            size_t ci, struct ctr *c, struct gs_dp_answer *out)
{
    const struct gs_dp_resource *r = &v->model->resources[v->resource];
    struct gs_dp_claim claim;
    size_t n = q->n_devices_ids;
    if (n == 0 || n > GS_DP_ASSIGN_GPUS_MAX)
        return GS_OK;
    /* build_container checked every ID: each is a device of r. */
    bool slices = false;
    for (size_t i = 0; i < n && !slices; i++)
        slices = r->devices[gs_dp_model_find(r, q->devices_ids[i])].slices > 0;
    if (v->claim(v->claim_ctx, r->name, (uint32_t)n, &claim) != GS_OK) {
        /* Slices without an assignment: the GPU of the slices kubelet handed (the container was
         * built so), told so that an operator sees a fraction placed by no scheduler. */
        if (!slices || v->on_claim == NULL)
            return GS_OK;
        char none[160];
        (void)snprintf(none, sizeof none,
                       "no pending pod bound here has an assignment for %zu %.100s", n, r->name);
        return report_claim(v, NULL, true, false, false, none, (const char *const *)q->devices_ids,
                            n);
    }
    uint32_t got[GS_DP_ASSIGN_GPUS_MAX], want[GS_DP_ASSIGN_GPUS_MAX];
    uint32_t got_at[GS_DP_ASSIGN_GPUS_MAX], want_at[GS_DP_ASSIGN_GPUS_MAX];
    bool mig = false;
    for (size_t i = 0; i < n; i++) {
        const struct gs_dp_device *d = &r->devices[gs_dp_model_find(r, q->devices_ids[i])];
        got[i] = unit_key_of_device(v->model, d);
        got_at[i] = (uint32_t)gs_dp_model_find(r, q->devices_ids[i]);
        bool inst = claim.mig_profile[i][0] != '\0';
        /* A start outside 0..7 (only a hand-made claim has one) names no device: 15. */
        uint32_t st = inst && claim.mig_start[i] >= 0 && claim.mig_start[i] <= 7
                          ? (uint32_t)claim.mig_start[i] + 1u
                          : 15u;
        want[i] = claim.gpu[i] * 16u + (inst ? st : 0u);
        want_at[i] = (uint32_t)i;
        mig = mig || inst || d->mig >= 0;
    }
    /* A start of null: the entry wants a device kubelet handed of that GPU and profile (each
     * handed device answering one such entry, first come first served), among those that no
     * entry of a known unit names (so that [start 3, null] handed 3 and 6 matches). */
    bool used[GS_DP_ASSIGN_GPUS_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        if (claim.mig_profile[i][0] != '\0' && claim.mig_start[i] < 0)
            continue;
        for (size_t j = 0; j < n; j++)
            if (!used[j] && got[j] == want[i]) {
                used[j] = true;
                break;
            }
    }
    for (size_t i = 0; i < n; i++) {
        if (claim.mig_profile[i][0] == '\0' || claim.mig_start[i] >= 0)
            continue;
        for (size_t j = 0; j < n; j++) {
            const struct gs_dp_device *d = &r->devices[got_at[j]];
            if (used[j] || d->mig < 0 || d->gpu != claim.gpu[i] ||
                strcmp(v->model->gpus[d->gpu].mig[d->mig].profile, claim.mig_profile[i]) != 0)
                continue;
            used[j] = true;
            want[i] = got[j];
            break;
        }
    }
    sort_keys(got, got_at, n);
    sort_keys(want, want_at, n);
    bool same = true;
    for (size_t i = 0; i < n; i++)
        same = same && got[i] == want[i];
    enum { LABEL = GS_GPU_PROFILE_LEN + 32 };
    char why[640] = "", gl[GS_DP_ASSIGN_GPUS_MAX * LABEL] = "",
         wl[GS_DP_ASSIGN_GPUS_MAX * LABEL] = "";
    if (!same) {
        for (size_t i = 0; i < n; i++) {
            char one[LABEL];
            const struct gs_dp_device *d = &r->devices[got_at[i]];
            if (d->mig >= 0) {
                const struct gs_gpu_mig *mg = &v->model->gpus[d->gpu].mig[d->mig];
                if (mg->has_start)
                    (void)snprintf(one, sizeof one, "%u:%s@%u", (unsigned)d->gpu, mg->profile,
                                   (unsigned)mg->start_slot);
                else
                    (void)snprintf(one, sizeof one, "%u:%s@?", (unsigned)d->gpu, mg->profile);
            } else {
                (void)snprintf(one, sizeof one, "%u", (unsigned)d->gpu);
            }
            join(gl, one);
            gs__dp_claim_unit_name(&claim, want_at[i], one, sizeof one);
            join(wl, one);
        }
        (void)snprintf(why, sizeof why,
                       "kubelet allocated %s %.100s, the scheduler assigned %.100s",
                       mig ? "MIG instances" : "GPUs", gl, wl);
    }
    /* Slices are tickets of a GPU's capacity, and kubelet picks them without knowing the
     * assignment: the container gets the assigned GPUs when each can be given. */
    bool gave = false;
    if (slices && !same) {
        char no[320] = "";
        bool can = true;
        for (uint32_t k = 0; k < claim.n_gpus && can; k++) {
            if (claim.mig_profile[k][0] != '\0') {
                (void)snprintf(no, sizeof no, "entry %u is a MIG instance", (unsigned)k);
                can = false;
            } else if (!claim_gpu_usable(v, &claim, k, no, sizeof no)) {
                can = false;
            } else if (first_device_of_gpu(r, claim.gpu[k]) < 0) {
                (void)snprintf(no, sizeof no, "assigned GPU %u (%.96s) has no %.100s device here",
                               (unsigned)claim.gpu[k], v->model->gpus[claim.gpu[k]].uuid, r->name);
                can = false;
            }
        }
        if (can) {
            ctr_free(c);
            memset(c, 0, sizeof *c);
            int rc = build_container(v, q, ci, c, out, &claim);
            if (rc != GS_OK)
                return rc;
            gave = true;
        } else {
            size_t used_why = strlen(why);
            (void)snprintf(why + used_why, sizeof why - used_why,
                           "; the assigned GPUs cannot be given: %s", no);
        }
    }
    claim_env(v, &claim, c);
    if (v->on_claim == NULL)
        return GS_OK;
    return report_claim(v, &claim, true, same, gave, why, (const char *const *)q->devices_ids, n);
}

int gs_dp_handle_allocate(const struct gs_dp_view *v, const uint8_t *req, size_t len,
                          struct gs_dp_answer *out)
{
    answer_init(out);
    if (!view_ok(v))
        return GS_EINVAL;
    ProtobufCMessage *m = NULL;
    if (gs_grpc_unpack(&v1beta1__allocate_request__descriptor, req, len, &m) != GS_OK)
        return answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                            "the request is not an "
                            "AllocateRequest");
    V1beta1__AllocateRequest *ar = (V1beta1__AllocateRequest *)m;
    size_t nc = ar->n_container_requests;
    struct ctr *cs = calloc(nc > 0 ? nc : 1, sizeof *cs);
    V1beta1__ContainerAllocateResponse **cp =
        calloc(nc > 0 ? nc : 1, sizeof(V1beta1__ContainerAllocateResponse *));
    int rc = GS_OK;
    if (cs == NULL || cp == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    for (size_t c = 0; c < nc; c++) {
        rc = build_container(v, ar->container_requests[c], c, &cs[c], out, NULL);
        if (rc != GS_OK || out->status != GS_GRPC_OK)
            goto out;
        cp[c] = &cs[c].resp;
    }
    for (size_t c = 0; c < nc && v->claim != NULL; c++) {
        rc = check_allocation(v, ar->container_requests[c], c, &cs[c], out);
        if (rc != GS_OK)
            goto out;
    }
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    resp.n_container_responses = nc;
    resp.container_responses = cp;
    rc = answer_pack(out, &resp.base);
out:
    for (size_t c = 0; cs != NULL && c < nc; c++)
        ctr_free(&cs[c]);
    free(cs);
    free(cp);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int gs_dp_handle_prestart(const uint8_t *req, size_t len, struct gs_dp_answer *out)
{
    answer_init(out);
    ProtobufCMessage *m = NULL;
    if (gs_grpc_unpack(&v1beta1__pre_start_container_request__descriptor, req, len, &m) != GS_OK)
        return answer_error(out, GS_GRPC_INVALID_ARGUMENT,
                            "the request is not a PreStartContainerRequest");
    protobuf_c_message_free_unpacked(m, NULL);
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    return answer_pack(out, &resp.base);
}
