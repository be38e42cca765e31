/*
 * The mutating webhook (include/gpusched/webhook.h): which reviews get the gpu-slice patch, the
 * patch's exact operations (decoded from the answer's base64 and compared with patches written
 * here by hand from RFC 6902), the 400 answers to malformed reviews, and the HTTPS server
 * itself, driven by libcurl with a certificate that openssl makes for the test.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusched/err.h"
#include "gpusched/webhook.h"

/* A review of a Pod CREATE in namespace ns1 whose pod is `pod` (JSON text). */
static char *review_of(const char *pod)
{
    static const char fmt[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
        "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
        "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
        "\"namespace\":\"ns1\",\"operation\":\"CREATE\",\"object\":%s}}";
    size_t n = sizeof(fmt) + strlen(pod);
    char *s = malloc(n);
    assert_non_null(s);
    (void)snprintf(s, n, fmt, pod);
    return s;
}

/* Answers a review; the answer's response object (a new reference) or NULL for a 400. */
static json_t *answer(const char *review, struct gs_webhook_answer *a)
{
    assert_int_equal(gs_webhook_review("gpusched", review, strlen(review), a), GS_OK);
    json_t *doc = json_loads(a->body, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(strlen(a->body), a->body_len);
    if (a->http_status == 400) {
        assert_string_equal(json_string_value(json_object_get(doc, "kind")), "Status");
        assert_int_equal(json_integer_value(json_object_get(doc, "code")), 400);
        json_decref(doc);
        return NULL;
    }
    assert_int_equal(a->http_status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "apiVersion")),
                        "admission.k8s.io/v1");
    json_t *resp = json_incref(json_object_get(doc, "response"));
    json_decref(doc);
    assert_string_equal(json_string_value(json_object_get(resp, "uid")),
                        "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    return resp;
}

static int b64v(char c)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strchr(tab, c);
    return p && c ? (int)(p - tab) : -1;
}

/* The patch of a response, decoded (base64 by hand) and parsed. */
static json_t *patch_of(const json_t *resp)
{
    assert_string_equal(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
    const char *b = json_string_value(json_object_get(resp, "patch"));
    assert_non_null(b);
    size_t n = strlen(b);
    assert_int_equal(n % 4, 0);
    char *out = calloc(1, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++)
            v[j] = b[i + j] == '=' ? 0 : b64v(b[i + j]);
        for (int j = 0; j < 4; j++)
            assert_true(v[j] >= 0);
        uint32_t x =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[k++] = (char)(x >> 16);
        if (b[i + 2] != '=')
            out[k++] = (char)(x >> 8 & 255);
        if (b[i + 3] != '=')
            out[k++] = (char)(x & 255);
    }
    json_t *p = json_loadb(out, k, 0, NULL);
    free(out);
    assert_non_null(p);
    return p;
}

static void assert_json_equal(const json_t *got, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT);
        print_error("got  %s\nwant %s\n", g, want_text);
        free(g);
        fail();
    }
    json_decref(want);
}

static void test_kai_fraction_without_resources_gets_resources_with_one_slice(void **state)
{
    (void)state;
    char *r = review_of("{\"metadata\":{\"name\":\"half\",\"annotations\":{\"gpu-fraction\":"
                        "\"0.5\"}},\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{"
                        "\"name\":\"main\",\"image\":\"x\"}]}}");
    struct gs_webhook_answer a;
    json_t *resp = answer(r, &a);
    assert_int_equal(a.outcome, GS_WEBHOOK_PATCHED);
    assert_string_equal(a.pod, "ns1/half");
    json_t *p = patch_of(resp);
    /* No resources at all: one "add" of the whole map (RFC 6902 4.1 needs the parent). */
    assert_json_equal(p, "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources\",\"value\":"
                         "{\"limits\":{\"gpusched.io/gpu-slice\":\"1\"},"
                         "\"requests\":{\"gpusched.io/gpu-slice\":\"1\"}}}]");
    assert_non_null(strstr(a.detail, "gpu-fraction=0.5"));
    json_decref(p);
    json_decref(resp);
    gs_webhook_answer_fini(&a);
    free(r);
}

static void test_slice_joins_existing_limits_and_adds_missing_requests(void **state)
{
    (void)state;
    /* limits exist (cpu), requests do not: the slice joins limits by its escaped name ("/" is
     * "~1", RFC 6901 section 3), requests is added as a map. Only container 0 is touched. */
    char *r = review_of(
        "{\"metadata\":{\"generateName\":\"job-\",\"annotations\":{\"gpu-memory\":\"4096\"}},"
        "\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"a\",\"resources\":{"
        "\"limits\":{\"cpu\":\"2\"}}},{\"name\":\"b\"}]}}");
    struct gs_webhook_answer a;
    json_t *resp = answer(r, &a);
    assert_int_equal(a.outcome, GS_WEBHOOK_PATCHED);
    assert_string_equal(a.pod, "ns1/job-*");
    json_t *p = patch_of(resp);
    assert_json_equal(
        p,
        "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/gpusched.io~1gpu-slice\","
        "\"value\":\"1\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests\","
        "\"value\":{\"gpusched.io/gpu-slice\":\"1\"}}]");
    json_decref(p);
    json_decref(resp);
    gs_webhook_answer_fini(&a);
    free(r);
}

/* Pods that must pass untouched: each answered 200, allowed, with no patch field. */
static void test_other_pods_are_allowed_without_a_patch(void **state)
{
    (void)state;
    static const char *const pods[] = {
        /* another scheduler's pod, even with KAI's annotation */
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpu-fraction\":\"0.5\"}},"
        "\"spec\":{\"schedulerName\":\"kai-scheduler\",\"containers\":[{\"name\":\"c\"}]}}",
        /* no schedulerName: default-scheduler */
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpu-fraction\":\"0.5\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
        /* ours, no fraction annotation */
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"schedulerName\":\"gpusched\","
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
        /* ours, fraction, but already asks nvidia.com/gpu (HAMi style) */
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpu-fraction\":\"0.5\"}},"
        "\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\",\"resources\":{"
        "\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
        /* ours, fraction, already has the slice (a second call: the patch is not doubled) */
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpu-fraction\":\"0.5\"}},"
        "\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\",\"resources\":{"
        "\"limits\":{\"gpusched.io/gpu-slice\":\"1\"}}}]}}",
        /* an init container asks for a GPU */
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpu-fraction\":\"0.5\"}},"
        "\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\"}],"
        "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/"
        "gpu\":\"1\"}}}]}}",
    };
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        char *r = review_of(pods[i]);
        struct gs_webhook_answer a;
        json_t *resp = answer(r, &a);
        assert_int_equal(a.outcome, GS_WEBHOOK_UNCHANGED);
        assert_null(json_object_get(resp, "patch"));
        assert_null(json_object_get(resp, "patchType"));
        assert_null(json_object_get(resp, "warnings"));
        json_decref(resp);
        gs_webhook_answer_fini(&a);
        free(r);
    }
}

static void test_bad_fraction_is_allowed_unpatched_with_a_warning(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"gpu-fraction", "1.5"},  /* above 1 */
        {"gpu-fraction", "0"},    /* not above 0 */
        {"gpu-fraction", "half"}, /* not a number */
        {"gpu-memory", "4Gi"},    /* KAI's gpu-memory is MiB, a plain number */
        {"gpu-memory", "0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char pod[400];
        (void)snprintf(
            pod, sizeof(pod),
            "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"%s\":\"%s\"}},"
            "\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{\"name\":\"c\"}]}}",
            cases[i][0], cases[i][1]);
        char *r = review_of(pod);
        struct gs_webhook_answer a;
        json_t *resp = answer(r, &a);
        assert_int_equal(a.outcome, GS_WEBHOOK_UNCHANGED);
        assert_null(json_object_get(resp, "patch"));
        const char *w = json_string_value(json_array_get(json_object_get(resp, "warnings"), 0));
        assert_non_null(w);
        char want[100];
        (void)snprintf(want, sizeof(want), "annotation %s: \"%s\" is not", cases[i][0],
                       cases[i][1]);
        assert_non_null(strstr(w, want));
        json_decref(resp);
        gs_webhook_answer_fini(&a);
        free(r);
    }
}

static void test_update_and_other_resources_pass(void **state)
{
    (void)state;
    const char *upd =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\",\"kind\":{\"group\":\"\",\"version\":"
        "\"v1\",\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
        "\"pods\"},\"operation\":\"UPDATE\",\"object\":{\"metadata\":{\"annotations\":{"
        "\"gpu-fraction\":\"0.5\"}},\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{}]}}}"
        "}";
    struct gs_webhook_answer a;
    json_t *resp = answer(upd, &a);
    assert_int_equal(a.outcome, GS_WEBHOOK_UNCHANGED);
    assert_non_null(strstr(a.detail, "operation UPDATE"));
    json_decref(resp);
    gs_webhook_answer_fini(&a);
}

/* Malformed reviews: 400 with a Status whose message names the field. */
static void test_malformed_reviews_get_400_naming_the_field(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"", "body: not JSON: line 1"},
        {"{\"apiVersion\":", "body: not JSON"},
        {"[1,2]", "body: a JSON array, want an object"},
        {"{\"kind\":\"AdmissionReview\"}", "apiVersion: missing"},
        {"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\"}",
         "apiVersion: admission.k8s.io/v1beta1, want admission.k8s.io/v1"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\"}", "kind: Pod, want"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
         "request: missing"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
         "request.uid: missing"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
         "\"uid\":\"\"}}",
         "request.uid: empty"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
         "\"uid\":\"u\",\"kind\":{\"group\":\"\",\"kind\":\"Pod\"},\"resource\":{\"resource\":"
         "\"pods\"},\"operation\":\"CREATE\",\"object\":7}}",
         "request.object: not an object"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
         "\"uid\":\"u\",\"kind\":{\"group\":\"\",\"kind\":\"Pod\"},\"resource\":{\"resource\":"
         "\"pods\"},\"operation\":\"CREATE\",\"object\":{\"spec\":[]}}}",
         "request.object.spec: not an object"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
         "\"uid\":\"u\",\"kind\":{\"group\":\"\",\"kind\":\"Pod\"},\"resource\":{\"resource\":"
         "\"pods\"},\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"annotations\":{"
         "\"gpu-fraction\":\"0.5\"}},\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{"
         "\"resources\":{\"limits\":[]}}]}}}}",
         "containers[0].resources: not a map of maps"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gs_webhook_answer a;
        assert_null(answer(cases[i][0], &a));
        assert_int_equal(a.outcome, GS_WEBHOOK_BAD_REVIEW);
        json_t *doc = json_loads(a.body, 0, NULL);
        const char *msg = json_string_value(json_object_get(doc, "message"));
        if (!msg || !strstr(msg, cases[i][1])) {
            print_error("case %zu: message '%s' lacks '%s'\n", i, msg ? msg : "(none)",
                        cases[i][1]);
            fail();
        }
        json_decref(doc);
        gs_webhook_answer_fini(&a);
    }
    struct gs_webhook_answer a;
    assert_int_equal(gs_webhook_review(NULL, "{}", 2, &a), GS_EINVAL);
    assert_null(a.body);
}

/* --- The HTTPS server, with a CA and certificate made by openssl for 127.0.0.1 --- */

struct grow {
    char buf[65536];
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct grow *g = ud;
    size_t k = size * n;
    if (g->len + k >= sizeof(g->buf))
        return 0;
    memcpy(g->buf + g->len, p, k);
    g->len += k;
    g->buf[g->len] = '\0';
    return k;
}

/* One request; returns the HTTP status (0 when the transfer failed). */
static long https(const char *ca, uint16_t port, const char *method, const char *path,
                  const char *body, size_t body_len, struct grow *g)
{
    char url[128];
    (void)snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", (unsigned)port, path);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    g->len = 0;
    g->buf[0] = '\0';
    (void)curl_easy_setopt(c, CURLOPT_URL, url);
    (void)curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
    (void)curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    if (strcmp(method, "POST") == 0) {
        (void)curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        (void)curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static void collect_log(void *ud, const char *level, const char *msg)
{
    (void)level;
    int *n = ud;
    if (strstr(msg, "patched"))
        (*n)++;
}

static void test_https_server_answers_reviews_and_refuses_bad_requests(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-webhook-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[2048];
    (void)snprintf(
        cmd, sizeof(cmd),
        "cd %s && openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null && "
        "openssl req -x509 -new -key ca.key -subj /CN=test-ca -days 1 -out ca.crt 2>/dev/null && "
        "openssl ecparam -name prime256v1 -genkey -noout -out tls.key 2>/dev/null && "
        "openssl req -new -key tls.key -subj /CN=127.0.0.1 -out tls.csr 2>/dev/null && "
        "printf 'subjectAltName=IP:127.0.0.1\\n' > ext && "
        "openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile ext -out tls.crt 2>/dev/null && "
        "openssl ecparam -name prime256v1 -genkey -noout -out other.key 2>/dev/null",
        dir);
    if (system(cmd) != 0)
        skip(); /* no openssl: install-deps.sh lists it */
    char cert[128], key[128], other[128], ca[128];
    (void)snprintf(cert, sizeof(cert), "%s/tls.crt", dir);
    (void)snprintf(key, sizeof(key), "%s/tls.key", dir);
    (void)snprintf(other, sizeof(other), "%s/other.key", dir);
    (void)snprintf(ca, sizeof(ca), "%s/ca.crt", dir);

    int patched = 0;
    struct gs_webhook_server_opts o = {.addr = "127.0.0.1:0",
                                       .cert_file = cert,
                                       .key_file = other,
                                       .scheduler_name = "gpusched",
                                       .log = collect_log,
                                       .log_ud = &patched};
    struct gs_webhook_server *w = NULL;
    char err[600] = "";
    uint16_t port = 0;
    /* A key that is not the certificate's: refused before serving, and said so. */
    assert_int_equal(gs_webhook_server_start(&o, &w, &port, err, sizeof(err)), GS_EPARSE);
    assert_null(w);
    assert_non_null(strstr(err, other));
    o.key_file = "/nonexistent/tls.key";
    assert_int_equal(gs_webhook_server_start(&o, &w, &port, err, sizeof(err)), GS_EIO);
    assert_non_null(strstr(err, "--webhook-key /nonexistent/tls.key: No such file"));
    o.key_file = key;
    o.addr = "localhost:0";
    assert_int_equal(gs_webhook_server_start(&o, &w, &port, err, sizeof(err)), GS_EINVAL);
    o.addr = "127.0.0.1:0";
    assert_int_equal(gs_webhook_server_start(&o, &w, &port, err, sizeof(err)), GS_OK);
    assert_true(port > 0);

    struct grow *g = malloc(sizeof(*g));
    char *r = review_of("{\"metadata\":{\"name\":\"half\",\"annotations\":{\"gpu-fraction\":"
                        "\"0.25\"}},\"spec\":{\"schedulerName\":\"gpusched\",\"containers\":[{"
                        "\"name\":\"main\"}]}}");
    assert_int_equal(https(ca, port, "POST", GS_WEBHOOK_PATH, r, strlen(r), g), 200);
    json_t *doc = json_loads(g->buf, 0, NULL);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "response"), "patchType")),
        "JSONPatch");
    json_decref(doc);
    assert_int_equal(https(ca, port, "POST", GS_WEBHOOK_PATH, "garbage", 7, g), 400);
    assert_non_null(strstr(g->buf, "body: not JSON"));
    assert_int_equal(https(ca, port, "GET", GS_WEBHOOK_PATH, NULL, 0, g), 405);
    assert_int_equal(https(ca, port, "GET", "/healthz", NULL, 0, g), 200);
    assert_int_equal(https(ca, port, "POST", "/elsewhere", "{}", 2, g), 404);
    /* A body over the bound: 413, and the server goes on. */
    size_t big_len = GS_WEBHOOK_BODY_MAX + 10;
    char *big = malloc(big_len);
    memset(big, ' ', big_len);
    assert_int_equal(https(ca, port, "POST", GS_WEBHOOK_PATH, big, big_len, g), 413);
    free(big);
    assert_int_equal(https(ca, port, "POST", GS_WEBHOOK_PATH, r, strlen(r), g), 200);
    gs_webhook_server_free(w);
    assert_int_equal(patched, 2);
    /* Stopped: nothing answers. */
    assert_int_equal(https(ca, port, "GET", "/healthz", NULL, 0, g), 0);
    free(r);
    free(g);
    (void)snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kai_fraction_without_resources_gets_resources_with_one_slice),
        cmocka_unit_test(test_slice_joins_existing_limits_and_adds_missing_requests),
        cmocka_unit_test(test_other_pods_are_allowed_without_a_patch),
        cmocka_unit_test(test_bad_fraction_is_allowed_unpatched_with_a_warning),
        cmocka_unit_test(test_update_and_other_resources_pass),
        cmocka_unit_test(test_malformed_reviews_get_400_naming_the_field),
        cmocka_unit_test(test_https_server_answers_reviews_and_refuses_bad_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
