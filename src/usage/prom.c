/*
 * A Prometheus HTTP API client for range queries (include/gpusched/usage_ingest.h): the
 * `/api/v1/query_range` request over libcurl and the parser of its JSON body (jansson).
 *
 * The response format is Prometheus' documented one
 * (https://prometheus.io/docs/prometheus/latest/querying/api/): {"status": "success"|"error",
 * "data": {"resultType": "matrix", "result": [{"metric": {LABELS}, "values": [[T, "V"], ...]}]},
 * "errorType", "error", "warnings"}, T in Unix seconds (a number with a fraction), V the
 * sample's value as a string ("NaN", "+Inf" included). Every refusal names the field.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpusched/usage_ingest.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "prom_int.h"

#define BODY_MAX_BYTES ((size_t)512 << 20)

static GS_PRINTF(3, 4) void put_msg(char *msg, size_t cap, const char *fmt, ...)
{
    if (!msg || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
}

void gs_prom_matrix_free(struct gs_prom_matrix *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->nseries; i++) {
        struct gs_prom_series *s = &m->series[i];
        for (uint32_t k = 0; k < s->nlabels; k++) {
            free(s->label_names[k]);
            free(s->label_values[k]);
        }
        free(s->label_names);
        free(s->label_values);
        free(s->t_ms);
        free(s->value);
    }
    free(m->series);
    free(m);
}

const char *gs_prom_label(const struct gs_prom_series *s, const char *name)
{
    for (uint32_t k = 0; k < s->nlabels; k++)
        if (strcmp(s->label_names[k], name) == 0)
            return s->label_values[k][0] ? s->label_values[k] : NULL;
    return NULL;
}

/* A JSON value's type, for messages. */
static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* A sample value as Prometheus writes it: a decimal or "NaN", "+Inf", "-Inf". */
static int parse_value(const char *text, double *v)
{
    if (strcmp(text, "NaN") == 0) {
        *v = NAN;
        return 0;
    }
    if (strcmp(text, "+Inf") == 0 || strcmp(text, "Inf") == 0) {
        *v = INFINITY;
        return 0;
    }
    if (strcmp(text, "-Inf") == 0) {
        *v = -INFINITY;
        return 0;
    }
    char *end;
    errno = 0;
    double x = strtod(text, &end);
    if (end == text || *end || (errno && !isfinite(x)) || isnan(x))
        return -1;
    *v = x;
    return 0;
}

/* Copies a JSON string (never holding a NUL byte: jansson refuses \u0000 unless asked). */
static char *dup_label(const json_t *v)
{
    size_t n = json_string_length(v);
    const char *t = json_string_value(v);
    char *c = malloc(n + 1);
    if (c)
        memcpy(c, t, n + 1);
    return c;
}

static int parse_series(const json_t *r, size_t i, struct gs_prom_series *s, char *msg, size_t cap)
{
    if (!json_is_object(r)) {
        put_msg(msg, cap, "data.result[%zu]: expected an object, got %s", i, jtype(r));
        return GS_EPARSE;
    }
    const json_t *metric = json_object_get(r, "metric");
    const json_t *values = json_object_get(r, "values");
    if (!json_is_object(metric)) {
        put_msg(msg, cap, "data.result[%zu].metric: expected an object of labels, got %s", i,
                metric ? jtype(metric) : "nothing");
        return GS_EPARSE;
    }
    if (!json_is_array(values)) {
        put_msg(msg, cap, "data.result[%zu].values: expected an array of [time, \"value\"], got %s",
                i, values ? jtype(values) : "nothing (an instant vector's \"value\"?)");
        return GS_EPARSE;
    }
    size_t nl = json_object_size(metric), nv = json_array_size(values);
    if (nv > UINT32_MAX || nl > UINT32_MAX) {
        put_msg(msg, cap, "data.result[%zu]: too many samples or labels", i);
        return GS_EPARSE;
    }
    s->label_names = calloc(nl ? nl : 1, sizeof(char *));
    s->label_values = calloc(nl ? nl : 1, sizeof(char *));
    s->t_ms = malloc((nv ? nv : 1) * sizeof(int64_t));
    s->value = malloc((nv ? nv : 1) * sizeof(double));
    if (!s->label_names || !s->label_values || !s->t_ms || !s->value)
        return GS_ENOMEM;
    const char *key;
    const json_t *lv;
    json_object_foreach((json_t *)metric, key, lv)
    {
        if (!json_is_string(lv)) {
            put_msg(msg, cap, "data.result[%zu].metric.%s: expected a string, got %s", i, key,
                    jtype(lv));
            return GS_EPARSE;
        }
        uint32_t k = s->nlabels;
        size_t kl = strlen(key);
        s->label_names[k] = malloc(kl + 1);
        if (s->label_names[k])
            memcpy(s->label_names[k], key, kl + 1);
        s->label_values[k] = dup_label(lv);
        if (!s->label_names[k] || !s->label_values[k]) {
            s->nlabels++; /* freed with the matrix */
            return GS_ENOMEM;
        }
        s->nlabels++;
    }
    for (size_t k = 0; k < nv; k++) {
        const json_t *p = json_array_get(values, k);
        if (!json_is_array(p) || json_array_size(p) != 2) {
            put_msg(msg, cap, "data.result[%zu].values[%zu]: expected [time, \"value\"], got %s", i,
                    k, json_is_array(p) ? "an array of another length" : jtype(p));
            return GS_EPARSE;
        }
        const json_t *t = json_array_get(p, 0), *v = json_array_get(p, 1);
        if (!json_is_number(t) || !(json_number_value(t) > -1e13 && json_number_value(t) < 1e13)) {
            put_msg(msg, cap,
                    "data.result[%zu].values[%zu][0]: expected a time in Unix seconds, got %s", i,
                    k, json_is_number(t) ? "a number out of range" : jtype(t));
            return GS_EPARSE;
        }
        if (!json_is_string(v) || parse_value(json_string_value(v), &s->value[k]) != 0) {
            put_msg(msg, cap,
                    "data.result[%zu].values[%zu][1]: expected a number as a string, got %s", i, k,
                    json_is_string(v) ? "a string that is not a number" : jtype(v));
            return GS_EPARSE;
        }
        s->t_ms[k] = (int64_t)llround(json_number_value(t) * 1000.0);
        s->n++;
    }
    return GS_OK;
}

int gs_prom_parse_range(const char *body, size_t len, struct gs_prom_matrix **out, char *msg,
                        size_t cap)
{
    *out = NULL;
    put_msg(msg, cap, "%s", "");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        put_msg(msg, cap, "not JSON: line %d column %d: %s", je.line, je.column, je.text);
        return GS_EPARSE;
    }
    int err = GS_EPARSE;
    struct gs_prom_matrix *m = NULL;
    const json_t *status = json_object_get(root, "status");
    if (!json_is_object(root)) {
        put_msg(msg, cap, "the body: expected an object, got %s", jtype(root));
        goto out;
    }
    if (!json_is_string(status)) {
        put_msg(msg, cap, "status: expected \"success\" or \"error\", got %s",
                status ? jtype(status) : "nothing");
        goto out;
    }
    if (strcmp(json_string_value(status), "error") == 0) {
        const json_t *et = json_object_get(root, "errorType"), *e = json_object_get(root, "error");
        put_msg(msg, cap, "the server refused the query: %s: %s",
                json_is_string(et) ? json_string_value(et) : "(no errorType)",
                json_is_string(e) ? json_string_value(e) : "(no error)");
        err = GS_EREJECTED;
        goto out;
    }
    if (strcmp(json_string_value(status), "success") != 0) {
        put_msg(msg, cap, "status: expected \"success\" or \"error\", got \"%.64s\"",
                json_string_value(status));
        goto out;
    }
    const json_t *data = json_object_get(root, "data");
    if (!json_is_object(data)) {
        put_msg(msg, cap, "data: expected an object, got %s", data ? jtype(data) : "nothing");
        goto out;
    }
    const json_t *rt = json_object_get(data, "resultType");
    if (!json_is_string(rt) || strcmp(json_string_value(rt), "matrix") != 0) {
        if (json_is_string(rt))
            put_msg(msg, cap, "data.resultType: expected \"matrix\", got \"%.64s\"",
                    json_string_value(rt));
        else
            put_msg(msg, cap, "data.resultType: expected \"matrix\", got %s",
                    rt ? jtype(rt) : "nothing");
        goto out;
    }
    const json_t *result = json_object_get(data, "result");
    if (!json_is_array(result)) {
        put_msg(msg, cap, "data.result: expected an array, got %s",
                result ? jtype(result) : "nothing");
        goto out;
    }
    size_t n = json_array_size(result);
    if (n > UINT32_MAX) {
        put_msg(msg, cap, "data.result: too many series");
        goto out;
    }
    err = GS_ENOMEM;
    m = calloc(1, sizeof(*m));
    if (!m)
        goto out;
    m->series = calloc(n ? n : 1, sizeof(*m->series));
    if (!m->series)
        goto out;
    for (size_t i = 0; i < n; i++) {
        m->nseries++;
        if ((err = parse_series(json_array_get(result, i), i, &m->series[i], msg, cap)) != GS_OK)
            goto out;
        m->nsamples += m->series[i].n;
    }
    *out = m;
    m = NULL;
    err = GS_OK;
out:
    if (err == GS_ENOMEM)
        put_msg(msg, cap, "out of memory reading the body");
    gs_prom_matrix_free(m);
    json_decref(root);
    return err;
}

/* ---- the request ------------------------------------------------------------------------ */

struct body {
    char *p;
    size_t n, cap;
    bool too_big;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct body *b = arg;
    size_t n = size * nmemb;
    if (b->n + n > BODY_MAX_BYTES) {
        b->too_big = true;
        return 0;
    }
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 65536;
        while (c < b->n + n + 1)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q)
            return 0;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

/* "1764547200.5": Unix ms as Prometheus' seconds with a fraction. */
static void fmt_seconds(int64_t ms, char *out, size_t cap)
{
    int64_t s = ms / 1000, f = ms % 1000;
    if (f < 0) {
        f += 1000;
        s -= 1;
    }
    (void)snprintf(out, cap, "%lld.%03lld", (long long)s, (long long)f);
}

/*
 * GETs url on h into b (no proxy, no redirects, at most BODY_MAX_BYTES), naming shown in msg.
 * GS_OK, whatever the HTTP status; GS_EINVAL (cannot set up, bad URL); GS_EIO; GS_ETIMEDOUT;
 * GS_ENOMEM.
 */
static int perform(CURL *h, const char *url, const char *shown, long timeout_ms, struct body *b,
                   char *msg, size_t cap)
{
    char ebuf[CURL_ERROR_SIZE] = "";
    if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEDATA, b) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK) {
        put_msg(msg, cap, "%.200s: cannot set up the request", shown);
        return GS_EINVAL;
    }
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        return GS_OK;
    if (b->too_big) {
        put_msg(msg, cap, "%.200s: the response is over %zu MiB", shown, BODY_MAX_BYTES >> 20);
        return GS_EIO;
    }
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        put_msg(msg, cap, "%.200s: no answer within %ld ms", shown, timeout_ms);
        return GS_ETIMEDOUT;
    }
    if (cc == CURLE_URL_MALFORMAT || cc == CURLE_UNSUPPORTED_PROTOCOL) {
        put_msg(msg, cap, "%.200s: bad URL: %s", shown, ebuf[0] ? ebuf : curl_easy_strerror(cc));
        return GS_EINVAL;
    }
    if (cc == CURLE_WRITE_ERROR) {
        put_msg(msg, cap, "%.200s: out of memory reading the response", shown);
        return GS_ENOMEM;
    }
    put_msg(msg, cap, "%.200s: %s", shown, ebuf[0] ? ebuf : curl_easy_strerror(cc));
    return GS_EIO;
}

int gs_prom_query_range(const struct gs_prom_range *q, struct gs_prom_matrix **out, char *msg,
                        size_t cap)
{
    *out = NULL;
    const char *u = q->base_url ? q->base_url : "";
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        put_msg(msg, cap, "%.200s: not a Prometheus URL (expected http://HOST:PORT or https://...)",
                u);
        return GS_EINVAL;
    }
    if (!q->query || !q->query[0] || q->end_ms < q->start_ms || q->step_ms < 1000 ||
        (q->end_ms - q->start_ms) / q->step_ms >= 11000) {
        put_msg(msg, cap,
                "%.200s: a range query needs a query, end >= start, a step of at least "
                "1 s and at most 11,000 steps",
                u);
        return GS_EINVAL;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        put_msg(msg, cap, "cannot start libcurl");
        return GS_ENOMEM;
    }
    int err = GS_ENOMEM;
    char *url = NULL, *esc = curl_easy_escape(h, q->query, 0);
    struct body b = {0};
    if (!esc)
        goto out;
    char start[32], end[32], step[32];
    fmt_seconds(q->start_ms, start, sizeof(start));
    fmt_seconds(q->end_ms, end, sizeof(end));
    fmt_seconds(q->step_ms, step, sizeof(step));
    size_t ul = strlen(u);
    while (ul > 0 && u[ul - 1] == '/')
        ul--;
    size_t need = ul + strlen(esc) + 128;
    url = malloc(need);
    if (!url)
        goto out;
    (void)snprintf(url, need, "%.*s/api/v1/query_range?query=%s&start=%s&end=%s&step=%s", (int)ul,
                   u, esc, start, end, step);
    long timeout_ms = q->timeout_ms > 0 ? q->timeout_ms : 30000;
    if ((err = perform(h, url, u, timeout_ms, &b, msg, cap)) != GS_OK)
        goto out;
    long status = 0;
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    char pmsg[400];
    err = gs_prom_parse_range(b.p ? b.p : "", b.n, out, pmsg, sizeof(pmsg));
    if (status != 200 && err != GS_EREJECTED) {
        /* Not Prometheus' own error body: a proxy, a wrong path, another server. */
        gs_prom_matrix_free(*out);
        *out = NULL;
        put_msg(msg, cap,
                "%.200s: HTTP %ld for /api/v1/query_range without a Prometheus error body (not "
                "a Prometheus server, or a wrong path prefix?)",
                u, status);
        err = GS_EHTTP;
    } else if (err) {
        put_msg(msg, cap, "%.200s: HTTP %ld: %s", u, status, pmsg);
    }
out:
    free(b.p);
    free(url);
    curl_free(esc);
    curl_easy_cleanup(h);
    return err;
}

int gs__prom_get(const char *url, long timeout_ms, char **body, size_t *len, char *msg, size_t cap)
{
    *body = NULL;
    *len = 0;
    CURL *h = curl_easy_init();
    if (!h) {
        put_msg(msg, cap, "cannot start libcurl");
        return GS_ENOMEM;
    }
    struct body b = {0};
    int err = perform(h, url, url, timeout_ms > 0 ? timeout_ms : 30000, &b, msg, cap);
    if (err != GS_OK)
        goto out;
    long status = 0;
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        put_msg(msg, cap, "%.200s: HTTP %ld", url, status);
        err = GS_EHTTP;
        goto out;
    }
    *body = b.p ? b.p : calloc(1, 1);
    *len = b.n;
    b.p = NULL;
    if (!*body)
        err = GS_ENOMEM;
out:
    free(b.p);
    curl_easy_cleanup(h);
    return err;
}
