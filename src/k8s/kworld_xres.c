/*
 * Other resources of Node and Pod objects (kworld_xres.h).
 */
#include "kjson.h"
#include "kworld_xres.h"

#include <stdio.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kquantity.h"

bool gs__kxres_own(const char *name)
{
    static const char *const exact[] = {"cpu",
                                        "memory",
                                        "pods",
                                        "nvidia.com/gpu",
                                        "nvidia.com/gpu.shared",
                                        "nvidia.com/gpumem",
                                        "nvidia.com/gpumem-percentage",
                                        "nvidia.com/gpucores",
                                        "gpusched.io/gpu-slice"};
    for (size_t k = 0; k < sizeof(exact) / sizeof(exact[0]); k++)
        if (strcmp(name, exact[k]) == 0)
            return true;
    return strncmp(name, "nvidia.com/mig-", strlen("nvidia.com/mig-")) == 0;
}

int gs__kquantity_json(const json_t *v, double unit, bool up, int64_t *out)
{
    if (json_is_integer(v)) {
        double x = (double)json_integer_value(v) / unit;
        *out = (int64_t)(up ? x + 0.999999 : x);
        return json_integer_value(v) < 0 ? -1 : 0;
    }
    if (json_is_real(v)) {
        char buf[64];
        (void)snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
        return gs_kquantity(buf, unit, up, out);
    }
    return json_is_string(v) ? gs_kquantity(json_string_value(v), unit, up, out) : -1;
}

static int qty(const json_t *v, bool up, int64_t *out)
{
    return gs__kquantity_json(v, 1.0, up, out);
}

int gs__kxres_node(struct gs_cluster *c, uint32_t node, const json_t *alloc, const char *name,
                   char *err, size_t errcap, char *warn, size_t warncap)
{
    struct gs_xres x[GS_NODE_XRES_MAX];
    uint32_t n = 0, dropped = 0;
    const char *key;
    const json_t *val;
    if (warncap)
        warn[0] = '\0';
    json_object_foreach((json_t *)alloc, key, val)
    {
        if (gs__kxres_own(key))
            continue;
        int64_t q = 0;
        if (qty(val, false, &q) != 0) {
            char shown[64];
            (void)snprintf(err, errcap, "node %s: status.allocatable.%s is %s, not a quantity",
                           name, key, jshow(val, shown, sizeof(shown)));
            return GS_EINVAL;
        }
        uint32_t id;
        int e = n < GS_NODE_XRES_MAX ? gs_cluster_xres_id(c, key, &id) : GS_ELIMIT;
        if (e == GS_ENOMEM)
            return e;
        if (e) {
            dropped++;
            continue;
        }
        x[n++] = (struct gs_xres){id, q};
    }
    if (dropped && warncap)
        (void)snprintf(warn, warncap,
                       "node %s: %u resources of status.allocatable left out (at most %d per "
                       "node, %d names per cluster); pods asking for them will not fit there",
                       name, dropped, GS_NODE_XRES_MAX, GS_XRES_MAX);
    int e = gs_cluster_set_xres(c, node, x, n);
    return e == GS_ENOMEM ? e : GS_OK;
}

int gs__kpod_request(const json_t *spec, const char *res, double unit, int64_t *out)
{
    return gs__kpod_request_why(spec, res, unit, out, NULL, 0);
}

int gs__kpod_request_why(const json_t *spec, const char *res, double unit, int64_t *out, char *why,
                         size_t cap)
{
    int64_t sum = 0, init_max = 0;
    const char *lists[2] = {"containers", "initContainers"};
    char shown[64];
    for (int l = 0; l < 2; l++) {
        const json_t *arr = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            const json_t *r = json_object_get(json_array_get(arr, i), "resources");
            const char *field = "requests";
            const json_t *v = json_object_get(json_object_get(r, "requests"), res);
            if (!v) {
                field = "limits";
                v = json_object_get(json_object_get(r, "limits"), res);
            }
            int64_t x = 0;
            if (v && gs__kquantity_json(v, unit, true, &x) != 0) {
                if (why)
                    (void)snprintf(why, cap, "spec.%s[%zu].resources.%s.%s is %s, not a quantity",
                                   lists[l], i, field, res, jshow(v, shown, sizeof(shown)));
                return -1;
            }
            if (l == 0) {
                if (x > INT64_MAX - sum) {
                    if (why)
                        (void)snprintf(why, cap, "the containers' %s adds up past %lld", res,
                                       (long long)INT64_MAX);
                    return -1;
                }
                sum += x;
            } else if (x > init_max) {
                init_max = x;
            }
        }
    }
    int64_t over = 0;
    const json_t *ov = json_object_get(json_object_get(spec, "overhead"), res);
    if (ov && gs__kquantity_json(ov, unit, true, &over) != 0) {
        if (why)
            (void)snprintf(why, cap, "spec.overhead.%s is %s, not a quantity", res,
                           jshow(ov, shown, sizeof(shown)));
        return -1;
    }
    int64_t m = sum > init_max ? sum : init_max;
    if (over > INT64_MAX - m) {
        if (why)
            (void)snprintf(why, cap, "%s with spec.overhead adds up past %lld", res,
                           (long long)INT64_MAX);
        return -1;
    }
    *out = m + over;
    return 0;
}

/* Adds resource `res` to req (once). 0; 1 with reason; GS_ENOMEM. */
static int add_one(struct gs_cluster *c, const json_t *spec, const char *res,
                   struct gs_pod_req *req, char *reason, size_t cap)
{
    if (gs__kxres_own(res))
        return 0;
    uint32_t id;
    int e = gs_cluster_xres_id(c, res, &id);
    if (e == GS_ENOMEM)
        return e;
    if (e) {
        (void)snprintf(reason, cap, "asks for %s: the cluster has %d other resource names already",
                       res, GS_XRES_MAX);
        return 1;
    }
    for (uint32_t r = 0; r < req->xres_count; r++)
        if (req->xres[r].id == id)
            return 0; /* seen in an earlier container */
    int64_t q = 0;
    if (gs__kpod_request_why(spec, res, 1.0, &q, reason, cap) != 0)
        return 1;
    if (q == 0)
        return 0;
    if (req->xres_count == GS_POD_XRES_MAX) {
        (void)snprintf(reason, cap,
                       "asks for more than %d resources beside cpu, memory and GPUs (%s is one "
                       "too many)",
                       GS_POD_XRES_MAX, res);
        return 1;
    }
    req->xres[req->xres_count++] = (struct gs_xres){id, q};
    return 0;
}

int gs__kxres_pod(struct gs_cluster *c, const json_t *spec, struct gs_pod_req *req, char *reason,
                  size_t cap)
{
    req->xres_count = 0;
    const char *lists[2] = {"containers", "initContainers"};
    for (int l = 0; l < 2; l++) {
        const json_t *arr = json_object_get(spec, lists[l]);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            const json_t *r = json_object_get(json_array_get(arr, i), "resources");
            const char *maps[2] = {"requests", "limits"};
            for (int m = 0; m < 2; m++) {
                const char *key;
                const json_t *val;
                json_object_foreach(json_object_get(r, maps[m]), key, val)
                {
                    (void)val;
                    int e = add_one(c, spec, key, req, reason, cap);
                    if (e)
                        return e;
                }
            }
        }
    }
    const char *key;
    const json_t *val;
    json_object_foreach(json_object_get(spec, "overhead"), key, val)
    {
        (void)val;
        int e = add_one(c, spec, key, req, reason, cap);
        if (e)
            return e;
    }
    /* One order for equal asks: by id. */
    for (uint32_t a = 1; a < req->xres_count; a++)
        for (uint32_t b = a; b > 0 && req->xres[b - 1].id > req->xres[b].id; b--) {
            struct gs_xres t = req->xres[b];
            req->xres[b] = req->xres[b - 1];
            req->xres[b - 1] = t;
        }
    return 0;
}
