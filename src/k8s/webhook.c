/*
 * The mutating webhook's decision (contract in include/gpusched/webhook.h): one AdmissionReview
 * v1 in, one answer out, no I/O and no state, so the fuzz target and the unit tests drive the
 * same code the HTTPS server does (webhook_http.c).
 *
 * The patch is written against the object the API server sent, so every "add" names a parent
 * that exists: the slice goes into resources.limits when that map is there, else the map is
 * added holding it (and resources likewise). RFC 6902's JSON Pointer escapes "/" in the
 * resource name as "~1".
 */
#include "gpusched/webhook.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "gpusched/kquantity.h"
#include "kjson.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REVIEW_API "admission.k8s.io/v1"
#define UID_MAX 128
/* The pointer to the slice under a resources map: "gpusched.io/gpu-slice" escaped. */
#define SLICE_POINTER "gpusched.io~1gpu-slice"

_Static_assert(sizeof(SLICE_POINTER) == sizeof(GS_WEBHOOK_SLICE_RESOURCE) + 1,
               "SLICE_POINTER is GS_WEBHOOK_SLICE_RESOURCE with its one '/' escaped");

void gs_webhook_answer_fini(struct gs_webhook_answer *a)
{
    if (!a)
        return;
    free(a->body);
    memset(a, 0, sizeof(*a));
}

static void set_detail(struct gs_webhook_answer *a, const char *fmt, ...) GS_PRINTF(2, 3);

/* detail = the formatted text, cut to fit. */
static void set_detail(struct gs_webhook_answer *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(a->detail, sizeof(a->detail), fmt, ap);
    va_end(ap);
}

/* Stores text as the answer's body. @return GS_OK or GS_ENOMEM. */
static int take_body(struct gs_webhook_answer *a, json_t *doc)
{
    if (!doc)
        return GS_ENOMEM;
    a->body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!a->body)
        return GS_ENOMEM;
    a->body_len = strlen(a->body);
    return GS_OK;
}

/* A 400 answer: a metav1 Status naming what is wrong (the detail already says it). */
static int bad_review(struct gs_webhook_answer *a)
{
    a->outcome = GS_WEBHOOK_BAD_REVIEW;
    a->http_status = 400;
    char msg[600];
    (void)snprintf(msg, sizeof(msg), "gpusched webhook: not an AdmissionReview %s: %s", REVIEW_API,
                   a->detail);
    return take_body(a, json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "apiVersion", "v1", "kind", "Status",
                                  "status", "Failure", "message", msg, "reason", "BadRequest",
                                  "code", 400));
}

/* Standard base64 with padding (RFC 4648 section 4). @return malloc'd text or NULL. */
static char *b64_encode(const char *in, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16 |
                     (uint32_t)(unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
        out[k++] = tab[v >> 18 & 63];
        out[k++] = tab[v >> 12 & 63];
        out[k++] = tab[v >> 6 & 63];
        out[k++] = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        out[k++] = tab[v >> 18 & 63];
        out[k++] = tab[v >> 12 & 63];
        out[k++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[k++] = '=';
    }
    out[k] = '\0';
    return out;
}

/* True when a container list asks for a device resource of its own already. */
static bool asks_device(const json_t *containers)
{
    static const char *const res[] = {"nvidia.com/gpu", GS_WEBHOOK_SLICE_RESOURCE};
    for (size_t i = 0; i < json_array_size(containers); i++) {
        const json_t *r = json_object_get(json_array_get(containers, i), "resources");
        for (size_t k = 0; k < 2; k++)
            if (json_object_get(json_object_get(r, "limits"), res[k]) ||
                json_object_get(json_object_get(r, "requests"), res[k]))
                return true;
    }
    return false;
}

/* gpu-fraction: a number in (0, 1]; gpu-memory: a positive whole count of MiB (KAI's units). */
static bool fraction_ok(const char *key, const char *v)
{
    int64_t x = 0;
    if (strcmp(key, "gpu-fraction") == 0)
        return gs_kquantity(v, 1e-3, true, &x) == 0 && x > 0 && x <= 1000;
    size_t n = strspn(v, "0123456789");
    return n > 0 && n <= 12 && v[n] == '\0' && gs_kquantity(v, 1.0, true, &x) == 0 && x > 0;
}

/* The JSON Patch adding one slice to the first container's limits and requests. */
static json_t *slice_patch(const json_t *c0)
{
    json_t *ops = json_array();
    const json_t *res = json_object_get(c0, "resources");
    if (!ops)
        return NULL;
    if (!res) {
        json_array_append_new(ops, json_pack("{s:s,s:s,s:{s:{s:s},s:{s:s}}}", "op", "add", "path",
                                             "/spec/containers/0/resources", "value", "limits",
                                             GS_WEBHOOK_SLICE_RESOURCE, "1", "requests",
                                             GS_WEBHOOK_SLICE_RESOURCE, "1"));
    } else {
        static const char *const maps[] = {"limits", "requests"};
        for (size_t m = 0; m < 2; m++) {
            char path[96];
            if (json_object_get(res, maps[m])) {
                (void)snprintf(path, sizeof(path), "/spec/containers/0/resources/%s/%s", maps[m],
                               SLICE_POINTER);
                json_array_append_new(
                    ops, json_pack("{s:s,s:s,s:s}", "op", "add", "path", path, "value", "1"));
            } else {
                (void)snprintf(path, sizeof(path), "/spec/containers/0/resources/%s", maps[m]);
                json_array_append_new(ops, json_pack("{s:s,s:s,s:{s:s}}", "op", "add", "path", path,
                                                     "value", GS_WEBHOOK_SLICE_RESOURCE, "1"));
            }
        }
    }
    if (json_array_size(ops) != (res ? 2u : 1u)) {
        json_decref(ops);
        return NULL;
    }
    return ops;
}

/*
 * Decides for a well-formed request; *patch receives the JSON Patch when the pod is patched,
 * *warning a warning text (static or in a->detail) when one is due.
 */
static int decide(const char *sched, const json_t *req, struct gs_webhook_answer *a, json_t **patch,
                  const char **warning)
{
    const json_t *kind = json_object_get(req, "kind");
    const json_t *resource = json_object_get(req, "resource");
    const char *op = jstr(req, "operation");
    const char *sub = jstr(req, "subResource");
    const json_t *pod = json_object_get(req, "object");
    bool is_pod = jstr(kind, "group") && jstr(kind, "group")[0] == '\0' && jstr(kind, "kind") &&
                  strcmp(jstr(kind, "kind"), "Pod") == 0;
    bool is_pods = resource && jstr(resource, "resource") &&
                   strcmp(jstr(resource, "resource"), "pods") == 0 && (!sub || !sub[0]);
    if (!op || strcmp(op, "CREATE") != 0 || !is_pod || !is_pods) {
        set_detail(a, "not a Pod CREATE (operation %.40s, kind %.80s): allowed unchanged",
                   op ? op : "?", jstr(kind, "kind") ? jstr(kind, "kind") : "?");
        return GS_OK;
    }
    if (!json_is_object(pod)) {
        set_detail(a, "request.object: %s, want the Pod object", pod ? "not an object" : "missing");
        return GS_EPARSE;
    }
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *spec = json_object_get(pod, "spec");
    if ((meta && !json_is_object(meta)) || !json_is_object(spec)) {
        set_detail(a, "request.object.%s: not an object",
                   json_is_object(spec) ? "metadata" : "spec");
        return GS_EPARSE;
    }
    const char *ns = jstr(req, "namespace");
    const char *name = jstr(meta, "name");
    const char *gen = jstr(meta, "generateName");
    (void)snprintf(a->pod, sizeof(a->pod), "%.100s/%.200s%s", ns ? ns : "",
                   name  ? name
                   : gen ? gen
                         : "",
                   name  ? ""
                   : gen ? "*"
                         : "");
    const char *sn = jstr(spec, "schedulerName");
    if (!sn || strcmp(sn, sched) != 0) {
        set_detail(a, "spec.schedulerName is %.200s, not %.200s: allowed unchanged",
                   sn ? sn : "unset (default-scheduler)", sched);
        return GS_OK;
    }
    const json_t *ann = json_object_get(meta, "annotations");
    const char *key = "gpu-fraction";
    const json_t *val = json_object_get(ann, key);
    if (!val) {
        key = "gpu-memory";
        val = json_object_get(ann, key);
    }
    if (!val) {
        set_detail(a, "no gpu-fraction or gpu-memory annotation: allowed unchanged");
        return GS_OK;
    }
    const json_t *containers = json_object_get(spec, "containers");
    if (json_array_size(containers) == 0 || !json_is_object(json_array_get(containers, 0))) {
        set_detail(a, "spec.containers: empty or not a list of objects: allowed unchanged");
        return GS_OK;
    }
    if (asks_device(containers) || asks_device(json_object_get(spec, "initContainers"))) {
        set_detail(a, "asks for nvidia.com/gpu or %s already: allowed unchanged",
                   GS_WEBHOOK_SLICE_RESOURCE);
        return GS_OK;
    }
    const char *v = json_string_value(val);
    if (!v || !fraction_ok(key, v)) {
        char shown[80];
        (void)snprintf(shown, sizeof(shown), "%.60s", v ? v : "(not a string)");
        char w[sizeof(a->detail)];
        (void)snprintf(w, sizeof(w),
                       "gpusched: annotation %s: \"%s\" is not %s; no %s was added and the pod "
                       "will not be scheduled by gpusched",
                       key, shown,
                       strcmp(key, "gpu-fraction") == 0 ? "a number in (0, 1]"
                                                        : "a positive whole number of MiB",
                       GS_WEBHOOK_SLICE_RESOURCE);
        (void)snprintf(a->detail, sizeof(a->detail), "%s", w);
        *warning = a->detail;
        return GS_OK;
    }
    const json_t *res0 = json_object_get(json_array_get(containers, 0), "resources");
    if (res0 &&
        (!json_is_object(res0) ||
         (json_object_get(res0, "limits") && !json_is_object(json_object_get(res0, "limits"))) ||
         (json_object_get(res0, "requests") &&
          !json_is_object(json_object_get(res0, "requests"))))) {
        set_detail(a, "request.object.spec.containers[0].resources: not a map of maps");
        return GS_EPARSE;
    }
    *patch = slice_patch(json_array_get(containers, 0));
    if (!*patch)
        return GS_ENOMEM;
    char shown[80];
    (void)snprintf(shown, sizeof(shown), "%.60s", v);
    (void)snprintf(
        a->detail, sizeof(a->detail), "annotation %s=%s: added %s: 1 to container %.100s", key,
        shown, GS_WEBHOOK_SLICE_RESOURCE,
        jstr(json_array_get(containers, 0), "name") ? jstr(json_array_get(containers, 0), "name")
                                                    : "0");
    return GS_OK;
}

int gs_webhook_review(const char *scheduler_name, const char *body, size_t len,
                      struct gs_webhook_answer *out)
{
    if (!out)
        return GS_EINVAL;
    memset(out, 0, sizeof(*out));
    if (!scheduler_name || (!body && len))
        return GS_EINVAL;
    json_error_t jerr;
    json_t *doc = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *patch = NULL;
    const char *warning = NULL;
    int rc = GS_OK;
    if (!doc) {
        (void)snprintf(out->detail, sizeof(out->detail), "body: not JSON: line %d column %d: %s",
                       jerr.line, jerr.column, jerr.text);
        rc = bad_review(out);
        goto out;
    }
    const char *api = jstr(doc, "apiVersion"), *kind = jstr(doc, "kind");
    const json_t *req = json_object_get(doc, "request");
    const char *uid = jstr(req, "uid");
    if (!json_is_object(doc))
        set_detail(out, "body: a JSON %s, want an object", json_is_array(doc) ? "array" : "scalar");
    else if (!api || strcmp(api, REVIEW_API) != 0)
        set_detail(out, "apiVersion: %.100s, want " REVIEW_API, api ? api : "missing");
    else if (!kind || strcmp(kind, "AdmissionReview") != 0)
        set_detail(out, "kind: %.100s, want AdmissionReview", kind ? kind : "missing");
    else if (!json_is_object(req))
        set_detail(out, "request: %s, want an object", req ? "not an object" : "missing");
    else if (!uid || !uid[0] || strlen(uid) > UID_MAX)
        set_detail(out, "request.uid: %s",
                   !uid      ? "missing or not a string"
                   : !uid[0] ? "empty"
                             : "longer than 128 bytes");
    else
        goto good;
    rc = bad_review(out);
    goto out;
good:
    rc = decide(scheduler_name, req, out, &patch, &warning);
    if (rc == GS_EPARSE) {
        rc = bad_review(out);
        goto out;
    }
    if (rc != GS_OK)
        goto out;
    json_t *resp = json_pack("{s:s,s:b}", "uid", uid, "allowed", 1);
    if (resp && patch) {
        char *text = json_dumps(patch, JSON_COMPACT);
        char *b64 = text ? b64_encode(text, strlen(text)) : NULL;
        if (!b64 || json_object_set_new(resp, "patchType", json_string("JSONPatch")) ||
            json_object_set_new(resp, "patch", json_string(b64))) {
            json_decref(resp);
            resp = NULL;
        }
        free(text);
        free(b64);
    }
    if (resp && warning && json_object_set_new(resp, "warnings", json_pack("[s]", warning))) {
        json_decref(resp);
        resp = NULL;
    }
    out->outcome = patch ? GS_WEBHOOK_PATCHED : GS_WEBHOOK_UNCHANGED;
    out->http_status = 200;
    rc = take_body(out, resp ? json_pack("{s:s,s:s,s:o}", "apiVersion", REVIEW_API, "kind",
                                         "AdmissionReview", "response", resp)
                             : NULL);
out:
    json_decref(patch);
    json_decref(doc);
    if (rc != GS_OK)
        gs_webhook_answer_fini(out);
    return rc;
}
