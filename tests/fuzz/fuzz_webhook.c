/*
 * libFuzzer target for the admission webhook's review decision (src/k8s/webhook.c). Besides the
 * sanitizers' checks it asserts the contract of include/gpusched/webhook.h on every input: an
 * answer is JSON; a 400 is a v1 Status with a message; a 200 is an AdmissionReview v1 whose
 * response names the request's uid and allows the pod; a patch appears exactly when the
 * outcome says PATCHED, and is base64 of a JSON array of "add" operations under
 * /spec/containers/0/resources that bring the slice, each value "1" or a map holding "1".
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static int b64v(char c)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(tab, c) : NULL;
    return p ? (int)(p - tab) : -1;
}

/* Decodes padded base64; the result is malloc'd. */
static char *b64_decode(const char *b, size_t *len)
{
    size_t n = strlen(b);
    check(n % 4 == 0);
    char *out = malloc(n / 4 * 3 + 1);
    check(out != NULL);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t x = 0;
        for (int j = 0; j < 4; j++) {
            int v = b[i + j] == '=' ? 0 : b64v(b[i + j]);
            check(v >= 0);
            x = x << 6 | (uint32_t)v;
        }
        out[k++] = (char)(x >> 16);
        if (b[i + 2] != '=')
            out[k++] = (char)(x >> 8 & 255);
        if (b[i + 3] != '=')
            out[k++] = (char)(x & 255);
    }
    *len = k;
    return out;
}

static void check_patch(const char *b64)
{
    size_t len = 0;
    char *text = b64_decode(b64, &len);
    json_t *ops = json_loadb(text, len, 0, NULL);
    free(text);
    check(json_is_array(ops) && json_array_size(ops) >= 1 && json_array_size(ops) <= 2);
    for (size_t i = 0; i < json_array_size(ops); i++) {
        const json_t *op = json_array_get(ops, i);
        check(strcmp(json_string_value(json_object_get(op, "op")), "add") == 0);
        const char *path = json_string_value(json_object_get(op, "path"));
        check(path && strncmp(path, "/spec/containers/0/resources", 28) == 0);
        const json_t *v = json_object_get(op, "value");
        if (json_is_string(v))
            check(strcmp(json_string_value(v), "1") == 0);
        else
            check(json_is_object(v));
    }
    json_decref(ops);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_webhook_answer a;
    int rc = gs_webhook_review("gpusched", (const char *)data, size, &a);
    if (rc == GS_ENOMEM)
        return 0;
    check(rc == GS_OK);
    check(a.body != NULL && strlen(a.body) == a.body_len);
    json_t *ans = json_loads(a.body, 0, NULL);
    check(ans != NULL);
    if (a.outcome == GS_WEBHOOK_BAD_REVIEW) {
        check(a.http_status == 400);
        check(strcmp(json_string_value(json_object_get(ans, "kind")), "Status") == 0);
        check(json_string_value(json_object_get(ans, "message")) != NULL);
    } else {
        check(a.http_status == 200);
        json_t *in = json_loadb((const char *)data, size, 0, NULL);
        const char *uid = json_string_value(json_object_get(json_object_get(in, "request"), "uid"));
        const json_t *resp = json_object_get(ans, "response");
        check(uid && strcmp(json_string_value(json_object_get(resp, "uid")), uid) == 0);
        check(json_is_true(json_object_get(resp, "allowed")));
        const char *patch = json_string_value(json_object_get(resp, "patch"));
        check((patch != NULL) == (a.outcome == GS_WEBHOOK_PATCHED));
        if (patch)
            check_patch(patch);
        json_decref(in);
    }
    json_decref(ans);
    gs_webhook_answer_fini(&a);
    return 0;
}
