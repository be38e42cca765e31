/*
 * The table of pods bound to this node and the scheduler's GPU choice for each (contract in
 * include/gpusched/dpkube.h). Pure: Pod objects in, claims out; the agent's Kubernetes thread
 * fills it and both threads use it under the agent's lock.
 *
 * A node holds tens of pods, so the table is an array searched linearly. A pod is claimable
 * while it is Pending, carries a readable assignment and has GPUs of it not yet handed out;
 * what was handed out is kept by uid in `given` (a jansson object) so that a relist, which
 * clears the rows, does not make an allocated pod claimable again. Each assigned GPU keeps the
 * share the scheduler recorded on it (milli, memory, the MIG instance's profile and start), so
 * that GetPreferredAllocation can find the very MIG instance and Allocate can pass the memory
 * limit on.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "gpusched/dpkube.h"

#include "gpusched/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row {
    char *uid;          /**< metadata.uid */
    char *key;          /**< "namespace/name" */
    char *created;      /**< metadata.creationTimestamp (RFC 3339, compares as text) */
    uint64_t seq;       /**< arrival order, for equal timestamps */
    json_t *containers; /**< [spec.containers..., spec.initContainers...] (owned) */
    uint32_t n_gpus;    /**< GPUs in the assignment */
    uint32_t gpu[GS_DP_ASSIGN_GPUS_MAX];
    char uuid[GS_DP_ASSIGN_GPUS_MAX][GS_GPU_UUID_LEN];
    int32_t milli[GS_DP_ASSIGN_GPUS_MAX];   /**< per GPU entry: "milli", -1 absent */
    int64_t mem_mib[GS_DP_ASSIGN_GPUS_MAX]; /**< per GPU entry: "mem_mib", 0 absent */
    char mig_profile[GS_DP_ASSIGN_GPUS_MAX][GS_GPU_PROFILE_LEN]; /**< "mig.profile", "" */
    int32_t mig_start[GS_DP_ASSIGN_GPUS_MAX];                    /**< "mig.start", -1 */
    bool pending; /**< status.phase Pending (or none yet) */
};

struct gs_dp_assign {
    struct row *rows;
    uint32_t n, cap;
    uint64_t seq;  /**< next arrival number */
    json_t *given; /**< uid -> GPUs handed out (integer) */
};

int gs_dp_assign_new(struct gs_dp_assign **out)
{
    *out = NULL;
    struct gs_dp_assign *t = calloc(1, sizeof *t);
    if (t == NULL)
        return GS_ENOMEM;
    t->given = json_object();
    if (t->given == NULL) {
        free(t);
        return GS_ENOMEM;
    }
    *out = t;
    return GS_OK;
}

static void row_fini(struct row *r)
{
    free(r->uid);
    free(r->key);
    free(r->created);
    json_decref(r->containers);
    memset(r, 0, sizeof *r);
}

void gs_dp_assign_clear(struct gs_dp_assign *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        row_fini(&t->rows[i]);
    t->n = 0;
}

void gs_dp_assign_free(struct gs_dp_assign *t)
{
    if (t == NULL)
        return;
    gs_dp_assign_clear(t);
    free(t->rows);
    json_decref(t->given);
    free(t);
}

uint32_t gs_dp_assign_count(const struct gs_dp_assign *t)
{
    return t->n;
}

static int32_t find(const struct gs_dp_assign *t, const char *uid)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].uid, uid) == 0)
            return (int32_t)i;
    return -1;
}

void gs_dp_assign_remove(struct gs_dp_assign *t, const char *uid)
{
    int32_t i = find(t, uid);
    if (i < 0)
        return;
    row_fini(&t->rows[i]);
    t->rows[i] = t->rows[--t->n];
    (void)json_object_del(t->given, uid);
}

static const char *jstr2(const json_t *o, const char *a, const char *b)
{
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

static uint32_t given_of(const struct gs_dp_assign *t, const char *uid);

/* gpusched.io/allocated-gpus: "N" with N in 0..GS_DP_ASSIGN_GPUS_MAX; 0 otherwise. */
static uint32_t allocated_mark(const json_t *meta)
{
    const char *s = jstr2(meta, "annotations", GS_DP_ALLOCATED_ANNOTATION);
    uint32_t n = 0;
    for (size_t i = 0; s != NULL && s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9' || i > 2)
            return 0;
        n = 10 * n + (uint32_t)(s[i] - '0');
    }
    return n <= GS_DP_ASSIGN_GPUS_MAX ? n : 0;
}

/*
 * Reads one entry's share: "milli" (0..1000), "mem_mib" (a positive MiB count) and "mig"
 * ({"profile": a non-empty name, "start": slot 0..7}), each optional here (the scheduler always
 * writes milli; the schema in docs/schemas/assigned-gpus.schema.json says which kind has which).
 * False with a reason naming the member when one is there but wrong.
 */
static bool read_share(struct row *r, size_t i, const json_t *g, char *why, size_t cap)
{
    const json_t *milli = json_object_get(g, "milli");
    const json_t *mem = json_object_get(g, "mem_mib");
    const json_t *mig = json_object_get(g, "mig");
    r->milli[i] = -1;
    r->mem_mib[i] = 0;
    r->mig_profile[i][0] = '\0';
    r->mig_start[i] = -1;
    if (milli != NULL) {
        if (!json_is_integer(milli) || json_integer_value(milli) < 0 ||
            json_integer_value(milli) > 1000) {
            (void)snprintf(why, cap, "annotation %s: gpus[%zu].milli is not a count 0..1000",
                           GS_DP_ASSIGNED_ANNOTATION, i);
            return false;
        }
        r->milli[i] = (int32_t)json_integer_value(milli);
    }
    if (mem != NULL) {
        /* 2^40 MiB is a petabyte: far above any GPU, far below overflow when printed. */
        if (!json_is_integer(mem) || json_integer_value(mem) <= 0 ||
            json_integer_value(mem) > ((json_int_t)1 << 40)) {
            (void)snprintf(why, cap,
                           "annotation %s: gpus[%zu].mem_mib is not a positive count "
                           "of MiB",
                           GS_DP_ASSIGNED_ANNOTATION, i);
            return false;
        }
        r->mem_mib[i] = (int64_t)json_integer_value(mem);
    }
    if (mig != NULL) {
        const char *prof = json_string_value(json_object_get(mig, "profile"));
        const json_t *st = json_object_get(mig, "start");
        if (prof == NULL || prof[0] == '\0' || strlen(prof) >= GS_GPU_PROFILE_LEN) {
            (void)snprintf(why, cap,
                           "annotation %s: gpus[%zu].mig.profile is not a profile name of 1..%d "
                           "bytes",
                           GS_DP_ASSIGNED_ANNOTATION, i, GS_GPU_PROFILE_LEN - 1);
            return false;
        }
        /* null: the scheduler knew the profile only (MIG capacity from nvidia.com/mig-*, no
         * inventory): any instance of that profile on the GPU, -1 here. */
        if (!json_is_null(st) &&
            (!json_is_integer(st) || json_integer_value(st) < 0 || json_integer_value(st) > 7)) {
            (void)snprintf(why, cap,
                           "annotation %s: gpus[%zu].mig.start is not a slot 0..7 or null",
                           GS_DP_ASSIGNED_ANNOTATION, i);
            return false;
        }
        (void)snprintf(r->mig_profile[i], sizeof r->mig_profile[i], "%s", prof);
        r->mig_start[i] = json_is_null(st) ? -1 : (int32_t)json_integer_value(st);
    }
    return true;
}

/*
 * Reads {"gpus":[{"index":N,"uuid":"...","milli":M,"mem_mib":B,"mig":{...}},...]} into the row;
 * false with a reason if not.
 */
static bool read_assignment(struct row *r, const char *text, char *why, size_t cap)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    const json_t *gpus = json_object_get(doc, "gpus");
    bool ok = false;
    if (doc == NULL) {
        (void)snprintf(why, cap, "annotation %s is not JSON: %s", GS_DP_ASSIGNED_ANNOTATION,
                       jerr.text);
        goto out;
    }
    if (!json_is_array(gpus) || json_array_size(gpus) > GS_DP_ASSIGN_GPUS_MAX) {
        (void)snprintf(why, cap, "annotation %s: \"gpus\" is not a list of at most %d GPUs",
                       GS_DP_ASSIGNED_ANNOTATION, GS_DP_ASSIGN_GPUS_MAX);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        const json_t *g = json_array_get(gpus, i);
        const json_t *idx = json_object_get(g, "index");
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) >= GS_GPU_MAX) {
            (void)snprintf(why, cap, "annotation %s: gpus[%zu].index is not a GPU index 0..%d",
                           GS_DP_ASSIGNED_ANNOTATION, i, GS_GPU_MAX - 1);
            goto out;
        }
        r->gpu[i] = (uint32_t)json_integer_value(idx);
        (void)snprintf(r->uuid[i], sizeof r->uuid[i], "%s", uuid != NULL ? uuid : "");
        if (!read_share(r, i, g, why, cap))
            goto out;
    }
    r->n_gpus = (uint32_t)json_array_size(gpus);
    ok = true;
out:
    json_decref(doc);
    return ok;
}

int gs_dp_assign_update(struct gs_dp_assign *t, const json_t *pod, char *why, size_t cap)
{
    char scratch[8];
    if (why == NULL || cap == 0) {
        why = scratch;
        cap = sizeof scratch;
    }
    why[0] = '\0';
    const json_t *meta = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    /* A uid is 36 characters in practice; one that a claim cannot carry whole could never be
     * consumed (the fuzzer's first finding), so it is refused like a missing one. */
    if (uid == NULL || ns == NULL || name == NULL ||
        strlen(uid) >= sizeof(((struct gs_dp_claim *)0)->uid))
        return GS_EINVAL;
    const char *created = json_string_value(json_object_get(meta, "creationTimestamp"));
    const char *ann = jstr2(meta, "annotations", GS_DP_ASSIGNED_ANNOTATION);
    const char *phase = jstr2(pod, "status", "phase");

    struct row r;
    memset(&r, 0, sizeof r);
    /* Kubelet admits neither a pod that runs already nor one being deleted. */
    r.pending = (phase == NULL || strcmp(phase, "Pending") == 0) &&
                json_object_get(meta, "deletionTimestamp") == NULL;
    bool readable = ann != NULL && read_assignment(&r, ann, why, cap);
    int32_t at = find(t, uid);
    if (!readable) {
        if (at >= 0) {
            row_fini(&t->rows[at]);
            t->rows[at] = t->rows[--t->n];
        }
        return GS_OK;
    }
    const json_t *spec = json_object_get(pod, "spec");
    r.containers = json_array();
    size_t ksz = strlen(ns) + strlen(name) + 2;
    r.key = malloc(ksz);
    r.uid = strdup(uid);
    r.created = strdup(created != NULL ? created : "");
    const json_t *ctrs = json_object_get(spec, "containers");
    const json_t *inits = json_object_get(spec, "initContainers");
    if (r.containers == NULL || r.key == NULL || r.uid == NULL || r.created == NULL ||
        (json_is_array(ctrs) && json_array_extend(r.containers, (json_t *)ctrs) != 0) ||
        (json_is_array(inits) && json_array_extend(r.containers, (json_t *)inits) != 0)) {
        row_fini(&r);
        return GS_ENOMEM;
    }
    (void)snprintf(r.key, ksz, "%s/%s", ns, name);
    uint32_t mark = allocated_mark(meta);
    if (mark > given_of(t, uid) && json_object_set_new(t->given, uid, json_integer(mark)) != 0) {
        row_fini(&r);
        return GS_ENOMEM;
    }
    if (at >= 0) {
        r.seq = t->rows[at].seq; /* a MODIFIED keeps its place */
        row_fini(&t->rows[at]);
        t->rows[at] = r;
        return GS_OK;
    }
    if (t->n == t->cap) {
        uint32_t ncap = t->cap ? 2 * t->cap : 16;
        struct row *p = realloc(t->rows, ncap * sizeof *p);
        if (p == NULL) {
            row_fini(&r);
            return GS_ENOMEM;
        }
        t->rows = p;
        t->cap = ncap;
    }
    r.seq = t->seq++;
    t->rows[t->n++] = r;
    return GS_OK;
}

static uint32_t given_of(const struct gs_dp_assign *t, const char *uid)
{
    return (uint32_t)json_integer_value(json_object_get(t->given, uid));
}

/* The container's count of a resource: its limit, else its request; 0 when it asks none. */
static int64_t asks(const json_t *ctr, const char *resource)
{
    const json_t *res = json_object_get(ctr, "resources");
    const json_t *v = json_object_get(json_object_get(res, "limits"), resource);
    if (v == NULL)
        v = json_object_get(json_object_get(res, "requests"), resource);
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (s == NULL || *s == '\0')
        return 0;
    char *end = NULL;
    long long n = strtoll(s, &end, 10);
    return end != NULL && *end == '\0' && n > 0 ? (int64_t)n : 0;
}

static bool older(const struct row *a, const struct row *b)
{
    int c = strcmp(a->created, b->created);
    return c < 0 || (c == 0 && a->seq < b->seq);
}

int gs_dp_assign_match(const struct gs_dp_assign *t, const char *resource, uint32_t count,
                       struct gs_dp_claim *out)
{
    if (t == NULL || resource == NULL || out == NULL || count == 0)
        return GS_EINVAL;
    const struct row *best = NULL;
    for (uint32_t i = 0; i < t->n; i++) {
        const struct row *r = &t->rows[i];
        uint32_t given = given_of(t, r->uid);
        if (!r->pending || given >= r->n_gpus || r->n_gpus - given < count)
            continue;
        bool fits = false;
        for (size_t c = 0; c < json_array_size(r->containers) && !fits; c++)
            fits = asks(json_array_get(r->containers, c), resource) == (int64_t)count;
        if (fits && (best == NULL || older(r, best)))
            best = r;
    }
    if (best == NULL)
        return GS_ENOENT;
    memset(out, 0, sizeof *out);
    (void)snprintf(out->pod, sizeof out->pod, "%s", best->key);
    (void)snprintf(out->uid, sizeof out->uid, "%s", best->uid);
    uint32_t given = given_of(t, best->uid);
    out->n_gpus = count;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t j = given + k;
        out->gpu[k] = best->gpu[j];
        memcpy(out->uuid[k], best->uuid[j], sizeof out->uuid[k]);
        out->milli[k] = best->milli[j];
        out->mem_mib[k] = best->mem_mib[j];
        memcpy(out->mig_profile[k], best->mig_profile[j], sizeof out->mig_profile[k]);
        out->mig_start[k] = best->mig_start[j];
    }
    return GS_OK;
}

int gs_dp_assign_consume(struct gs_dp_assign *t, const char *uid, uint32_t count,
                         uint32_t *given_out)
{
    int32_t i = find(t, uid);
    if (i < 0)
        return GS_ENOENT;
    uint32_t given = given_of(t, uid) + count;
    if (given_out != NULL)
        *given_out = given;
    return json_object_set_new(t->given, uid, json_integer(given)) == 0 ? GS_OK : GS_ENOMEM;
}
