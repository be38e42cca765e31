/*
 * The names of the pods bound to this node, by UID (contract in include/gpusched/podnames.h).
 *
 * A chained hash table on the UID (FNV-1a), with as many buckets as the power of two at or
 * above max_pods, so a chain is short however the UIDs fall. Each pod is one allocation: the
 * record and its containers (a flexible array), sized to the containers its status names.
 * Replacing a pod builds the new record first and swaps it in, so a failure leaves the old one.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/podnames.h"

#include "gpusched/err.h"
#include "gpusched/podmap.h"

#include <stdlib.h>
#include <string.h>

/** Largest max_pods accepted. */
#define MAX_PODS_LIMIT 1000000u

/** One container with a runtime ID. */
struct ctr {
    char id[GS_PODMAP_CID_LEN]; /**< runtime ID without its "<runtime>://" prefix */
    char name[64];              /**< container name */
};

/** One pod. */
struct pod {
    struct pod *next;            /**< next in the bucket's chain */
    char uid[GS_PODMAP_UID_LEN]; /**< metadata.uid */
    char ns[64];                 /**< metadata.namespace */
    char name[254];              /**< metadata.name */
    uint32_t n_ctr;              /**< entries in ctr */
    struct ctr ctr[];            /**< containers with an ID, in status order */
};

struct gs_podnames {
    struct pod **bucket; /**< n_buckets chains */
    uint32_t n_buckets;  /**< a power of two */
    uint32_t n;          /**< pods held */
    uint32_t max;        /**< most pods held */
};

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

int gs_podnames_new(uint32_t max_pods, struct gs_podnames **out)
{
    if (out == NULL || max_pods > MAX_PODS_LIMIT)
        return GS_EINVAL;
    *out = NULL;
    if (max_pods == 0)
        max_pods = GS_PODNAMES_DEFAULT_MAX;
    struct gs_podnames *t = calloc(1, sizeof *t);
    if (t == NULL)
        return GS_ENOMEM;
    t->n_buckets = 1;
    while (t->n_buckets < max_pods)
        t->n_buckets *= 2;
    t->bucket = calloc(t->n_buckets, sizeof(struct pod *));
    if (t->bucket == NULL) {
        free(t);
        return GS_ENOMEM;
    }
    t->max = max_pods;
    *out = t;
    return GS_OK;
}

void gs_podnames_clear(struct gs_podnames *t)
{
    if (t == NULL)
        return;
    for (uint32_t b = 0; b < t->n_buckets; b++) {
        struct pod *p = t->bucket[b];
        while (p != NULL) {
            struct pod *next = p->next;
            free(p);
            p = next;
        }
        t->bucket[b] = NULL;
    }
    t->n = 0;
}

void gs_podnames_free(struct gs_podnames *t)
{
    if (t == NULL)
        return;
    gs_podnames_clear(t);
    free(t->bucket);
    free(t);
}

/* The link that points at pod uid (or at the chain's NULL end when it is not there). */
static struct pod **slot_of(const struct gs_podnames *t, const char *uid)
{
    struct pod **at = &t->bucket[hash(uid) & (t->n_buckets - 1)];
    while (*at != NULL && strcmp((*at)->uid, uid) != 0)
        at = &(*at)->next;
    return at;
}

/* A string member of obj, when it is a string of 1..cap-1 bytes; else NULL. */
static const char *str_of(const json_t *obj, const char *key, size_t cap)
{
    const char *s = json_string_value(json_object_get(obj, key));
    if (s == NULL || s[0] == '\0' || strlen(s) >= cap)
        return NULL;
    return s;
}

static const char *const status_lists[] = {"initContainerStatuses", "containerStatuses",
                                           "ephemeralContainerStatuses"};

/* Whether status entry c has a name and an ID that fit; *id then skips "<runtime>://". */
static bool ctr_of(const json_t *c, const char **name, const char **id)
{
    *name = str_of(c, "name", sizeof(((struct ctr *)0)->name));
    const char *full = json_string_value(json_object_get(c, "containerID"));
    if (*name == NULL || full == NULL)
        return false;
    const char *sep = strstr(full, "://");
    *id = sep != NULL ? sep + 3 : full;
    return (*id)[0] != '\0' && strlen(*id) < GS_PODMAP_CID_LEN;
}

int gs_podnames_update(struct gs_podnames *t, const json_t *pod)
{
    if (t == NULL || pod == NULL)
        return GS_EINVAL;
    const json_t *meta = json_object_get(pod, "metadata");
    const char *uid = str_of(meta, "uid", GS_PODMAP_UID_LEN);
    const char *ns = str_of(meta, "namespace", 64);
    const char *name = str_of(meta, "name", 254);
    if (uid == NULL || ns == NULL || name == NULL)
        return GS_EINVAL;
    const json_t *status = json_object_get(pod, "status");
    uint32_t n_ctr = 0;
    for (size_t l = 0; l < sizeof status_lists / sizeof status_lists[0]; l++) {
        const json_t *arr = json_object_get(status, status_lists[l]);
        for (size_t i = 0; i < json_array_size(arr) && n_ctr < GS_PODNAMES_CONTAINERS_MAX; i++) {
            const char *cn, *cid;
            if (ctr_of(json_array_get(arr, i), &cn, &cid))
                n_ctr++;
        }
    }
    struct pod **at = slot_of(t, uid);
    if (*at == NULL && t->n >= t->max)
        return GS_ELIMIT;
    struct pod *p = calloc(1, sizeof *p + (size_t)n_ctr * sizeof p->ctr[0]);
    if (p == NULL)
        return GS_ENOMEM;
    memcpy(p->uid, uid, strlen(uid) + 1);
    memcpy(p->ns, ns, strlen(ns) + 1);
    memcpy(p->name, name, strlen(name) + 1);
    for (size_t l = 0; l < sizeof status_lists / sizeof status_lists[0]; l++) {
        const json_t *arr = json_object_get(status, status_lists[l]);
        for (size_t i = 0; i < json_array_size(arr) && p->n_ctr < n_ctr; i++) {
            const char *cn, *cid;
            if (!ctr_of(json_array_get(arr, i), &cn, &cid))
                continue;
            struct ctr *c = &p->ctr[p->n_ctr++];
            memcpy(c->id, cid, strlen(cid) + 1);
            memcpy(c->name, cn, strlen(cn) + 1);
        }
    }
    if (*at != NULL) { /* replace in place in the chain */
        p->next = (*at)->next;
        free(*at);
    } else {
        t->n++;
    }
    *at = p;
    return GS_OK;
}

void gs_podnames_remove(struct gs_podnames *t, const char *uid)
{
    if (t == NULL || uid == NULL)
        return;
    struct pod **at = slot_of(t, uid);
    if (*at == NULL)
        return;
    struct pod *p = *at;
    *at = p->next;
    free(p);
    t->n--;
}

uint32_t gs_podnames_count(const struct gs_podnames *t)
{
    return t != NULL ? t->n : 0;
}

bool gs_podnames_find(const struct gs_podnames *t, const char *uid, const char *container_id,
                      char ns[64], char name[254], char container[64])
{
    if (t == NULL || uid == NULL)
        return false;
    const struct pod *p = *slot_of(t, uid);
    if (p == NULL)
        return false;
    memcpy(ns, p->ns, sizeof p->ns);
    memcpy(name, p->name, sizeof p->name);
    container[0] = '\0';
    for (uint32_t i = 0; container_id != NULL && container_id[0] != '\0' && i < p->n_ctr; i++)
        if (strcmp(p->ctr[i].id, container_id) == 0) {
            memcpy(container, p->ctr[i].name, sizeof p->ctr[i].name);
            break;
        }
    return true;
}

uint32_t gs_podnames_fill(const struct gs_podnames *t, struct gs_exporter_podval *v, uint32_t n)
{
    _Static_assert(sizeof v->namespace_name == 64 && sizeof v->pod == 254 &&
                       sizeof v->container == 64,
                   "the value's name fields are the sizes gs_podnames_find writes");
    uint32_t named = 0;
    for (uint32_t i = 0; v != NULL && i < n; i++)
        if (gs_podnames_find(t, v[i].pod_uid, v[i].container_id, v[i].namespace_name, v[i].pod,
                             v[i].container))
            named++;
    return named;
}
